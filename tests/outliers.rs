//! Each host judged against its pool (Envoy's outlier detection, with no
//! timer), end to end through a registry on a `ManualClock`, under Envoy's
//! preset (`Outliers::envoy()`: its rules with no evidence asked, and its
//! ejection time). What the default adds is in `tests/outlier_evidence.rs`.
//!
//! Envoy's own cases, translated: a success rate of 50 among four of 100
//! gives a threshold of 52 and is ejected; `minimum_hosts` and
//! `request_volume` each gate it; the pool's cap limits how many go; the
//! failure percentage ejects at 85 and only observes at 0 % enforcement;
//! panic mode lifts ejections and restores them. Envoy un-ejects on a
//! timer; failfast recovers through probes, so its timing cases are
//! replaced by the recovery case here.
//!
//! Timing: a host's calls of interval `k` are added to the pool when it
//! rolls out of `k` (its first call of `k + 1`), and it is judged then
//! against the figures of `k − 1`. So a pool needs two intervals of traffic
//! before anyone is judged, and a change is judged one interval later.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use failfast::{
    Breaker, Builder, ManualClock, OutlierRule, Outliers, Reason, Registry, State, Transition,
};

type Reg = Registry<u64, std::collections::hash_map::RandomState, ManualClock>;

const INTERVAL: Duration = Duration::from_secs(10);

fn template() -> Builder {
    // Far from tripping by itself: only the pool ejects here.
    Breaker::builder()
        .consecutive_failures(30_000)
        .open_duration(Duration::from_secs(30))
}

fn registry(outliers: Outliers) -> (Reg, ManualClock) {
    registry_with(template(), outliers)
}

fn registry_with(template: Builder, outliers: Outliers) -> (Reg, ManualClock) {
    let clock = ManualClock::new();
    let r = Registry::<u64>::builder(template)
        .outliers(outliers.interval(INTERVAL))
        .build_with_clock(clock.clone())
        .unwrap();
    (r, clock)
}

type Seen = Arc<Mutex<Vec<(u64, Transition)>>>;

/// The ejections a registry's hook hears (an ejection happens at the
/// admission that rolls a host's interval, so no verdict returns it).
fn ejections(r: &Reg) -> Seen {
    let seen = Seen::default();
    let log = seen.clone();
    r.on_transition(move |host: &str, t: &Transition| {
        if matches!(t.reason, Reason::Outlier | Reason::SlowOutlier) {
            log.lock().unwrap().push((host.parse().unwrap(), *t));
        }
    });
    seen
}

/// What `seen` heard since the last call.
fn take(seen: &Seen) -> Vec<(u64, Transition)> {
    std::mem::take(&mut *seen.lock().unwrap())
}

/// One host's traffic in an interval: `calls` calls, the first `failures`
/// of them failed.
#[derive(Copy, Clone)]
struct Host {
    calls: u32,
    failures: u32,
}

fn host(calls: u32, success_percent: u32) -> Host {
    Host {
        calls,
        failures: calls - calls * success_percent / 100,
    }
}

/// Runs one interval of `hosts`' traffic (keys 0..), then moves the clock to
/// the next interval's start.
fn interval(r: &Reg, clock: &ManualClock, hosts: &[Host]) {
    for (key, h) in hosts.iter().enumerate() {
        let handle = r.handle(&(key as u64));
        for i in 0..h.calls {
            let Ok(permit) = handle.try_acquire() else {
                continue;
            };
            if i < h.failures {
                permit.failure();
            } else {
                permit.success();
            }
        }
    }
    clock.advance(INTERVAL);
}

/// Envoy's case: host 0 at 50 %, four at 100 %, 100 calls each.
fn envoys_five() -> [Host; 5] {
    [
        host(100, 50),
        host(100, 100),
        host(100, 100),
        host(100, 100),
        host(100, 100),
    ]
}

/// One successful call per host: each rolls its interval and is judged.
fn roll(r: &Reg, keys: usize) {
    for key in 0..keys as u64 {
        if let Ok(p) = r.handle(&key).try_acquire() {
            p.success();
        }
    }
}

fn state(r: &Reg, key: u64) -> State {
    r.handle(&key).state()
}

/// Two intervals of the same traffic, then a roll: the judgement of the
/// second interval against the first's figures. Returns the ejections.
fn judge(r: &Reg, clock: &ManualClock, hosts: &[Host]) -> Vec<(u64, Transition)> {
    let seen = ejections(r);
    interval(r, clock, hosts);
    interval(r, clock, hosts);
    roll(r, hosts.len());
    take(&seen)
}

#[test]
fn envoys_success_rate_case_ejects_the_host_at_50() {
    let (r, clock) = registry(Outliers::envoy());
    let hosts = envoys_five();
    let ejected = judge(&r, &clock, &hosts);
    assert_eq!(ejected.len(), 1, "{ejected:?}");
    assert_eq!(ejected[0].0, 0);
    assert_eq!(ejected[0].1.reason, Reason::Outlier);
    assert_eq!(ejected[0].1.to, State::Open);
    assert_eq!(ejected[0].1.outlier_rule, Some(OutlierRule::SuccessRate));
    assert_eq!(state(&r, 0), State::Open);
    let pool = &r.outlier_pools()[0];
    assert_eq!(
        pool.success_rate_threshold,
        Some(0.52),
        "mean 90 − 1.9 × stdev 20"
    );
    assert_eq!(pool.enforced(OutlierRule::SuccessRate), 1);
    assert_eq!(pool.ejected, 1);
    for key in 1..5 {
        assert_eq!(state(&r, key), State::Closed);
    }
}

#[test]
fn minimum_hosts_gates_the_success_rate_rule() {
    let (r, clock) = registry(Outliers::envoy());
    let hosts = [
        host(100, 50),
        host(100, 100),
        host(100, 100),
        host(100, 100),
    ];
    assert!(
        judge(&r, &clock, &hosts).is_empty(),
        "4 hosts < minimum_hosts 5"
    );
    // With four hosts, one can be at most √3 ≈ 1.73 standard deviations
    // from the mean (population stdev): a factor of 1.9 never ejects.
    let lower = Outliers::envoy()
        .success_rate_minimum_hosts(4)
        .stdev_factor(1.5);
    let (r, clock) = registry(lower);
    assert_eq!(judge(&r, &clock, &hosts).len(), 1, "and 4 are enough at 4");
}

#[test]
fn request_volume_gates_the_success_rate_rule() {
    let (r, clock) = registry(Outliers::envoy());
    // The bad host has 99 calls: not judged, and only four hosts qualify.
    let hosts = [
        host(99, 50),
        host(100, 100),
        host(100, 100),
        host(100, 100),
        host(100, 100),
    ];
    assert!(judge(&r, &clock, &hosts).is_empty());
    assert_eq!(r.outlier_pools()[0].detected(OutlierRule::SuccessRate), 0);
}

#[test]
fn the_pools_cap_limits_the_ejections() {
    // Twenty hosts, two bad (mean 94, stdev 18: both below 59.8). At 5 %,
    // one host at a time.
    let (r, clock) = registry(Outliers::envoy().max_ejection_percent(5));
    let mut hosts = vec![host(100, 100); 20];
    for h in &mut hosts[..2] {
        *h = host(100, 40);
    }
    let ejected = judge(&r, &clock, &hosts);
    assert_eq!(ejected.len(), 1, "{ejected:?}");
    let pool = &r.outlier_pools()[0];
    assert_eq!(pool.detected(OutlierRule::SuccessRate), 2, "both found");
    assert_eq!(pool.enforced(OutlierRule::SuccessRate), 1);
    assert_eq!(pool.ejected, 1);
    // At the default 10 %, both go.
    let (r, clock) = registry(Outliers::envoy());
    assert_eq!(judge(&r, &clock, &hosts).len(), 2);
}

#[test]
fn failure_percentage_ejects_at_85_and_only_observes_at_0_percent() {
    let hosts = [
        host(50, 10),
        host(50, 100),
        host(50, 100),
        host(50, 100),
        host(50, 100),
    ];
    // Observed only (Envoy's default enforcement), the success-rate rule off.
    let (r, clock) = registry(Outliers::envoy().success_rate_off());
    assert!(judge(&r, &clock, &hosts).is_empty());
    let pool = &r.outlier_pools()[0];
    assert_eq!(pool.detected(OutlierRule::FailurePercentage), 1);
    assert_eq!(pool.enforced(OutlierRule::FailurePercentage), 0);
    // Enforced.
    let (r, clock) = registry(
        Outliers::envoy()
            .success_rate_off()
            .enforcing_failure_percentage(100),
    );
    let ejected = judge(&r, &clock, &hosts);
    assert_eq!(ejected.iter().map(|e| e.0).collect::<Vec<_>>(), [0]);
    assert_eq!(
        ejected[0].1.outlier_rule,
        Some(OutlierRule::FailurePercentage)
    );
    // 84 % failures is under the threshold.
    let (r, clock) = registry(
        Outliers::envoy()
            .success_rate_off()
            .enforcing_failure_percentage(100),
    );
    let hosts = [
        host(50, 16),
        host(50, 100),
        host(50, 100),
        host(50, 100),
        host(50, 100),
    ];
    assert!(judge(&r, &clock, &hosts).is_empty());
}

#[test]
fn panic_mode_lifts_the_ejections_and_restores_them() {
    let (r, clock) = registry(Outliers::envoy().max_ejection_percent(100));
    let hosts = envoys_five();
    assert_eq!(judge(&r, &clock, &hosts).len(), 1);
    assert!(r.handle(&0).try_acquire().is_err(), "ejected: rejected");
    // Two more hosts go down by their own trips: 2 of 5 healthy < 50 %.
    r.handle(&1).force_open();
    r.handle(&2).force_open();
    let pool = &r.outlier_pools()[0];
    assert!(pool.panicking);
    let h0 = r.handle(&0);
    let permit = h0.try_acquire().expect("panic lifts the ejection");
    assert!(!permit.is_probe());
    permit.success();
    assert!(r.handle(&1).try_acquire().is_err(), "ordinary trips stay");
    // Health back: the ejection is back.
    r.handle(&1).reset();
    assert!(!r.outlier_pools()[0].panicking);
    assert!(r.handle(&0).try_acquire().is_err(), "restored");
    assert_eq!(state(&r, 0), State::Open);
}

#[test]
fn no_host_is_ejected_while_the_pool_panics() {
    let (r, clock) = registry(Outliers::envoy().max_ejection_percent(100));
    let seen = ejections(&r);
    let mut hosts = vec![host(100, 100); 6];
    hosts[0] = host(100, 50);
    interval(&r, &clock, &hosts);
    interval(&r, &clock, &hosts);
    for key in 2..5 {
        r.handle(&key).force_open(); // 3 of 6 healthy: 50 % is not under 50 %
    }
    r.handle(&5).force_open(); // 2 of 6: panic
    assert!(r.outlier_pools()[0].panicking);
    roll(&r, 2);
    assert!(take(&seen).is_empty(), "found, not ejected in panic");
    assert_eq!(r.outlier_pools()[0].detected(OutlierRule::SuccessRate), 1);
}

#[test]
fn a_silent_host_is_never_ejected_for_its_silence() {
    let (r, clock) = registry(Outliers::envoy());
    let seen = ejections(&r);
    let hosts = envoys_five();
    interval(&r, &clock, &hosts);
    interval(&r, &clock, &hosts);
    // Host 0 is silent for an interval; the others carry on.
    let mut quiet = hosts;
    quiet[0] = Host {
        calls: 0,
        failures: 0,
    };
    interval(&r, &clock, &quiet);
    // Its next call finds a tally two intervals old: nothing to judge.
    roll(&r, 1);
    assert!(take(&seen).is_empty());
    assert_eq!(state(&r, 0), State::Closed);
}

#[test]
fn an_ejected_host_recovers_through_the_probe() {
    let (r, clock) = registry(Outliers::envoy());
    let hosts = envoys_five();
    assert_eq!(judge(&r, &clock, &hosts).len(), 1);
    // The open period is held as the word's span, in 2²⁴ ns units rounded
    // up: the schedule's 30 s, and at most one unit more.
    let wait = r
        .handle(&0)
        .try_acquire()
        .unwrap_err()
        .retry_after()
        .unwrap();
    assert!(
        wait >= Duration::from_secs(30) && wait < Duration::from_millis(30_017),
        "{wait:?}"
    );
    clock.advance(wait);
    let h0 = r.handle(&0);
    let probe = h0.try_acquire().expect("the lazy probe");
    assert!(probe.is_probe());
    let closed = probe.success().expect("closes");
    assert_eq!(closed.to, State::Closed);
    let pool = &r.outlier_pools()[0];
    assert_eq!(pool.ejected, 0, "its place under the cap is back");
    assert_eq!(pool.unhealthy, 0);
}

#[test]
fn the_slow_rule_ejects_a_host_twice_as_slow() {
    let slow = Duration::from_millis(100);
    let (r, clock) = registry_with(
        template().slow_call_threshold(slow),
        Outliers::envoy().slow_outliers(3.0, 0.1),
    );
    // Every host answers in 60 ms but one in ten in 120 ms; host 0 is twice
    // as slow: 120 ms, and one in ten 240 ms. Slow rates 10 % against 100 %.
    let seen = ejections(&r);
    for round in 0..3 {
        for key in 0..6u64 {
            let h = r.handle(&key);
            let calls = if round == 2 { 1 } else { 100 };
            for i in 0..calls {
                let start = failfast::Clock::now(&clock);
                let mut took = if i % 10 == 0 { 120 } else { 60 };
                if key == 0 {
                    took *= 2;
                }
                let Ok(p) = h.try_acquire_at(start) else {
                    continue;
                };
                p.success_at(start + Duration::from_millis(took));
            }
        }
        clock.advance(INTERVAL);
    }
    let ejections = take(&seen);
    assert_eq!(ejections.len(), 1, "{ejections:?}");
    assert_eq!(ejections[0].0, 0);
    assert_eq!(ejections[0].1.reason, Reason::SlowOutlier);
    assert_eq!(ejections[0].1.outlier_rule, Some(OutlierRule::Slow));
    let pool = &r.outlier_pools()[0];
    assert_eq!(pool.enforced(OutlierRule::Slow), 1);
    assert_eq!(
        pool.detected(OutlierRule::SuccessRate),
        0,
        "it never failed"
    );
}

#[test]
fn named_pools_judge_their_own_hosts_only() {
    // Keys 0..5 are one service at 100 %; keys 5..10 another whose hosts all
    // succeed 60 % of the time, but for key 5 at 20 %. Compared across both
    // services, the whole second one would look bad.
    let clock = ManualClock::new();
    let mut builder =
        Registry::<u64>::builder(template()).outliers(Outliers::envoy().interval(INTERVAL));
    for key in 5..10 {
        builder = builder.override_key(key, template().outlier_pool("second"));
    }
    let r = builder.build_with_clock(clock.clone()).unwrap();
    let mut hosts = vec![host(100, 100); 5];
    hosts.extend([
        host(100, 20),
        host(100, 60),
        host(100, 60),
        host(100, 60),
        host(100, 60),
    ]);
    let ejected = judge(&r, &clock, &hosts);
    assert_eq!(ejected.iter().map(|e| e.0).collect::<Vec<_>>(), [5]);
    let pools = r.outlier_pools();
    let names: Vec<&str> = pools.iter().map(|p| &*p.name).collect();
    assert_eq!(names, ["default", "second"]);
    assert_eq!(pools[1].enforced(OutlierRule::SuccessRate), 1);
    assert_eq!(pools[0].members, 5);
}

#[test]
fn bad_pool_configurations_are_refused() {
    let e = Registry::<u64>::builder(template().outlier_pool("x"))
        .build()
        .unwrap_err();
    assert_eq!(e.field(), "outlier_pool", "a pool name without outliers");
    let e = Registry::<u64>::builder(template())
        .outliers(Outliers::envoy().slow_outliers(2.0, 0.1))
        .build()
        .unwrap_err();
    assert_eq!(
        e.field(),
        "outliers.slow_outliers",
        "the latency rule needs timed calls"
    );
    let e = Registry::<u64>::builder(template())
        .outliers(Outliers::envoy().stdev_factor(-1.0))
        .build()
        .unwrap_err();
    assert_eq!(e.field(), "outliers.stdev_factor");
}

#[test]
fn a_removed_host_leaves_its_pool_at_once() {
    // The failure percentage alone, enforced, one call and one host enough:
    // five hosts, so the cap is one.
    let (r, clock) = registry(
        Outliers::envoy()
            .success_rate_off()
            .enforcing_failure_percentage(100)
            .failure_percentage_threshold(50)
            .failure_percentage_request_volume(1)
            .failure_percentage_minimum_hosts(1),
    );
    let seen = ejections(&r);
    // Hosts 0 and 1 fail every call.
    let traffic = |keys: std::ops::Range<u64>| {
        for key in keys {
            if let Ok(p) = r.handle(&key).try_acquire() {
                if key < 2 {
                    p.failure();
                } else {
                    p.success();
                }
            }
        }
    };
    traffic(0..5);
    clock.advance(INTERVAL);
    traffic(0..5);
    clock.advance(INTERVAL);
    traffic(0..5);
    assert_eq!(
        take(&seen).iter().map(|e| e.0).collect::<Vec<_>>(),
        [0],
        "the cap: one"
    );
    // Host 0 leaves the registry, with nothing holding it: its place goes
    // with it, not when the map's reclamation drops it later.
    assert!(r.remove(&0));
    let pool = &r.outlier_pools()[0];
    assert_eq!((pool.members, pool.unhealthy, pool.ejected), (4, 0, 0));
    clock.advance(INTERVAL);
    traffic(1..5);
    assert_eq!(
        take(&seen).iter().map(|e| e.0).collect::<Vec<_>>(),
        [1],
        "host 1 takes the place"
    );
}
