//! The default outlier rules against Envoy's, end to end through a registry
//! on a `ManualClock`: the default asks for evidence (a healthy pool's
//! noise ejects nobody, a sick host is still found), and both presets use
//! Envoy's ejection time (30, 60, 90 s …, one time forgiven per interval
//! back). Envoy's own cases, under `Outliers::envoy()`, are in
//! `tests/outliers.rs`; the trade-off over a grid of pools is measured by
//! `examples/outlier_tradeoff.rs`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use failfast::{Breaker, Clock, ManualClock, Outliers, Reason, Registry, Transition};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Binomial, Distribution};

type Reg = Registry<u64, std::collections::hash_map::RandomState, ManualClock>;

const INTERVAL: Duration = Duration::from_secs(10);

fn registry(outliers: Outliers) -> (Reg, ManualClock) {
    let clock = ManualClock::new();
    let r = Registry::<u64>::builder(
        // Far from tripping by itself: only the pool ejects here.
        Breaker::builder()
            .consecutive_failures(30_000)
            .open_duration(Duration::from_secs(30)),
    )
    .outliers(outliers.interval(INTERVAL))
    .build_with_clock(clock.clone())
    .unwrap();
    (r, clock)
}

/// The ejections a registry's hook hears: (host, interval, open for).
type Seen = Arc<Mutex<Vec<(u64, u64, Duration)>>>;

fn ejections(r: &Reg) -> Seen {
    let seen = Seen::default();
    let log = seen.clone();
    r.on_transition(move |host: &str, t: &Transition| {
        if matches!(t.reason, Reason::Outlier | Reason::SlowOutlier) {
            let interval = t.at.as_nanos() / INTERVAL.as_nanos() as u64;
            log.lock().unwrap().push((
                host.parse().unwrap(),
                interval,
                t.open_for.expect("an ejection opens"),
            ));
        }
    });
    seen
}

/// One interval of traffic: `calls` calls per host, spread over the
/// interval (host after host at each step), `fails(host, i)` saying which
/// fail; then the clock is at the next interval's start.
fn interval(
    r: &Reg,
    clock: &ManualClock,
    hosts: u64,
    calls: u32,
    fails: impl Fn(u64, u32) -> bool,
) {
    let start = clock.now();
    let step = INTERVAL / calls;
    for i in 0..calls {
        clock.set(start + step * i);
        for host in 0..hosts {
            if let Ok(p) = r.handle(&host).try_acquire() {
                if fails(host, i) {
                    p.failure();
                } else {
                    p.success();
                }
            }
        }
    }
    clock.set(start + INTERVAL);
}

/// Envoy's `EjectTimeBackoff`, translated: a host ejected again as soon as
/// it is back is out for 30, 60, then 90 s; back and healthy for one whole
/// interval it is forgiven one time (90 s again, not 120); back for longer
/// than its multiplier, it starts over at 30 s. The same under both
/// presets: the host fails half its calls while its pool fails none, which
/// is evidence enough at once.
#[test]
fn envoys_ejection_time_grows_by_the_base_and_decays_per_interval() {
    for outliers in [Outliers::envoy(), Outliers::new()] {
        // Nine healthy hosts and host 0, which fails the second half of each
        // interval's calls (the first call after an ejection, its probe,
        // succeeds). 50 calls are enough to be judged: a host back in the
        // middle of an interval is judged on the rest of it.
        let (r, clock) = registry(outliers.clone().success_rate_request_volume(50));
        let seen = ejections(&r);
        // Host 0 is healthy in these intervals.
        let healthy = |k: u64| k == 22 || (33..=37).contains(&k);
        for k in 0..45u64 {
            interval(&r, &clock, 10, 100, |host, i| {
                host == 0 && i >= 50 && !healthy(k)
            });
        }
        let got: Vec<(u64, u64, u64)> = seen
            .lock()
            .unwrap()
            .iter()
            .map(|&(host, k, open)| (host, k, open.as_secs()))
            .collect();
        // Envoy's timer at the same instants (each tick un-ejects, then
        // ejects, then lowers the multiplier of hosts back for a whole
        // interval): eject at 2 (multiplier 1, 30 s); un-eject at 5, eject
        // at 6 (2, 60 s); un-eject at 12, eject at 13 (3, 90 s); un-eject at
        // 22, healthy in 22, lowered at 23 (2), bad in 23, eject at 24 (3,
        // 90 s); un-eject at 33, healthy in 33 to 37, lowered at 34, 35, 36
        // (0), bad in 38, eject at 39 (1, 30 s); un-eject at 42, eject at 43
        // (2, 60 s).
        assert_eq!(
            got,
            [
                (0, 2, 30),
                (0, 6, 60),
                (0, 13, 90),
                (0, 24, 90),
                (0, 39, 30),
                (0, 43, 60),
            ],
            "{:?}",
            outliers.get_significance()
        );
        // Open for the ejection time, rounded up to the span's 2²⁴ ns.
        for &(_, _, open) in seen.lock().unwrap().iter() {
            let unit = Duration::from_nanos(1 << 24);
            assert!(
                open.as_nanos() % 30_000_000_000 < unit.as_nanos(),
                "{open:?}"
            );
        }
    }
}

/// The pool: 20 healthy hosts at 99.5 % with 1,000 calls an
/// interval, each interval's failures a binomial draw. Envoy's rule ejects
/// hosts for their noise; the default ejects none.
#[test]
fn a_tight_healthy_pool_keeps_its_hosts_by_default() {
    let traffic = |outliers: Outliers, intervals: u64| {
        let (r, clock) = registry(outliers);
        let seen = ejections(&r);
        let mut rng = SmallRng::seed_from_u64(7);
        let noise = Binomial::new(1_000, 0.005).unwrap();
        for _ in 0..intervals {
            let fails: Vec<u64> = (0..20).map(|_| noise.sample(&mut rng)).collect();
            // Each host's failures spread over its interval.
            interval(&r, &clock, 20, 1_000, |host, i| {
                u64::from(i) * fails[host as usize] / 1_000
                    != u64::from(i + 1) * fails[host as usize] / 1_000
            });
        }
        let n = seen.lock().unwrap().len();
        n
    };
    assert!(
        traffic(Outliers::envoy(), 20) > 0,
        "Envoy's rule ejects healthy hosts"
    );
    assert_eq!(traffic(Outliers::new(), 60), 0, "the default ejects none");
}

/// The same pool with one host failing five times as often (2.5 %): the
/// default finds it within a few intervals, and nobody else.
#[test]
fn a_sick_host_among_healthy_ones_is_ejected() {
    let (r, clock) = registry(Outliers::new());
    let seen = ejections(&r);
    let mut rng = SmallRng::seed_from_u64(11);
    let noise = Binomial::new(1_000, 0.005).unwrap();
    let sick = Binomial::new(1_000, 0.025).unwrap();
    for _ in 0..8 {
        let fails: Vec<u64> = (0..20)
            .map(|host| {
                if host == 0 {
                    sick.sample(&mut rng)
                } else {
                    noise.sample(&mut rng)
                }
            })
            .collect();
        interval(&r, &clock, 20, 1_000, |host, i| {
            u64::from(i) * fails[host as usize] / 1_000
                != u64::from(i + 1) * fails[host as usize] / 1_000
        });
    }
    let got = seen.lock().unwrap().clone();
    assert!(!got.is_empty());
    assert!(got.iter().all(|e| e.0 == 0), "the sick host only: {got:?}");
    // Judged from interval 2 (against interval 0's figures) on.
    assert!(got[0].1 <= 4, "found within three judgements: {got:?}");
}

/// The failure-percentage rule at a small volume: five calls that all
/// failed are 100 % under Envoy's rule and eject at once; the default
/// weighs five calls against a pool that fails 1 % and waits for more.
#[test]
fn five_failures_of_five_calls_are_not_yet_evidence() {
    let rule = |o: Outliers| {
        o.success_rate_off()
            .enforcing_failure_percentage(100)
            .failure_percentage_request_volume(5)
            .success_rate_request_volume(5)
    };
    let run = |outliers: Outliers, intervals: u64| {
        let (r, clock) = registry(outliers);
        let seen = ejections(&r);
        for k in 0..intervals {
            // Host 0 fails everything from interval 2 on; the others fail
            // one call in a hundred… of 5 calls: one host in five, once.
            interval(&r, &clock, 20, 5, |host, i| {
                (host == 0 && k >= 2) || (host != 0 && i == 0 && (host + k) % 20 == 0)
            });
        }
        let got = seen.lock().unwrap().clone();
        got
    };
    let envoy = run(rule(Outliers::envoy()), 4);
    assert_eq!(
        envoy.iter().map(|e| (e.0, e.1)).collect::<Vec<_>>(),
        [(0, 3)]
    );
    let default = run(rule(Outliers::new()), 4);
    assert!(default.is_empty(), "{default:?}");
    // Evidence adds up: 5·ln 2 − (5 + 0.01·95)·5/100 ≈ 3.2 nats an
    // interval reaches 13.8 in five.
    let default = run(rule(Outliers::new()), 10);
    assert_eq!(default.iter().map(|e| e.0).collect::<Vec<_>>(), [0]);
    assert!((6..=8).contains(&default[0].1), "{default:?}");
}
