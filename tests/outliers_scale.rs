//! Issue 28's detection target at scale: in one pool of a million hosts,
//! one host that goes bad is ejected at its first call after the interval
//! in which it went bad, with no timer and no thread: the interval's work
//! is done by the requests themselves (see `failfast::outlier`). What that
//! work costs a request is a benchmark row, not a timed test: `outliers/`
//! in benches/main.rs.
//!
//! One test in this binary, so that no other test's thread changes the
//! process's thread count. Linux only: the count is read from `/proc/self`.
#![cfg(target_os = "linux")]

use std::collections::hash_map::RandomState;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use failfast::{Breaker, Handle, ManualClock, OutlierRule, Outliers, Reason, Registry, State};

/// Hosts in the pool: the million (about 10 s in a debug build on
/// the 2-core CI guest, most of it building the registry's entries).
const HOSTS: u64 = 1_000_000;

/// Calls each host makes in an interval: the success-rate rule's volume.
const CALLS: u32 = 5;

const INTERVAL: Duration = Duration::from_secs(10);

type Reg = Registry<u64, RandomState, ManualClock>;

fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("procfs");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("a Threads: line")
}

/// One interval of every host's traffic: `CALLS` calls each, all failed
/// for the host `bad` (if any), else all successful. Returns the calls
/// rejected.
fn interval(hosts: &[Handle<u64, ManualClock>], bad: Option<usize>) -> u64 {
    let mut rejected = 0;
    for (i, h) in hosts.iter().enumerate() {
        for _ in 0..CALLS {
            match h.try_acquire() {
                Ok(p) if Some(i) == bad => {
                    p.failure();
                }
                Ok(p) => {
                    p.success();
                }
                Err(_) => rejected += 1,
            }
        }
    }
    rejected
}

#[test]
fn one_bad_host_among_many_is_ejected_within_one_interval_with_no_thread() {
    let threads_before = threads();
    let started = Instant::now();
    let clock = ManualClock::new();
    let registry: Reg = Registry::<u64>::builder(
        // Far from tripping by itself: only the pool ejects here.
        Breaker::builder()
            .consecutive_failures(1000)
            .open_duration(Duration::from_secs(60)),
    )
    .capacity(HOSTS as usize)
    .outliers(
        Outliers::envoy()
            .interval(INTERVAL)
            .success_rate_request_volume(CALLS)
            .success_rate_minimum_hosts(5),
    )
    .build_with_clock(clock.clone())
    .unwrap();
    let ejections = Arc::new(Mutex::new(Vec::new()));
    let log = ejections.clone();
    registry.on_transition(move |host: &str, t: &failfast::Transition| {
        if t.reason == Reason::Outlier {
            log.lock().unwrap().push(host.parse::<u64>().unwrap());
        }
    });
    let hosts: Vec<_> = (0..HOSTS).map(|k| registry.handle(&k)).collect();
    assert_eq!(registry.len(), HOSTS as usize);
    assert_eq!(registry.outlier_pools()[0].members, HOSTS);
    let bad = (HOSTS * 3 / 4 + 17) as usize;
    let built = started.elapsed();

    // Interval 0: every host healthy. Interval 1: one host fails every call
    // (the change). Its calls of interval 1 are judged when it rolls out of
    // it, against the pool's figures of interval 0.
    assert_eq!(interval(&hosts, None), 0);
    clock.advance(INTERVAL);
    assert_eq!(interval(&hosts, Some(bad)), 0);
    assert!(
        ejections.lock().unwrap().is_empty(),
        "nobody is judged before the pool has figures"
    );
    assert_eq!(hosts[bad].state(), State::Closed);
    clock.advance(INTERVAL);

    // Interval 2: every host's first call rolls its interval 1. The first of
    // them (host 0's) seals interval 0's sums and computes the figures.
    for (i, h) in hosts.iter().enumerate() {
        if i == bad {
            break;
        }
        h.try_acquire().expect("closed").success();
    }
    assert_eq!(hosts[bad].state(), State::Closed, "not judged yet");
    // Its first call after the interval it went bad in: admitted (the
    // admission that rolls still runs), and it ejects the host.
    hosts[bad]
        .try_acquire()
        .expect("the rolling call is admitted")
        .success();
    assert_eq!(hosts[bad].state(), State::Open, "ejected at that call");
    assert_eq!(*ejections.lock().unwrap(), [bad as u64]);
    assert!(
        hosts[bad].try_acquire().is_err(),
        "its next call is rejected"
    );
    for h in &hosts[bad + 1..] {
        h.try_acquire().expect("closed").success();
    }
    let detected = started.elapsed();

    assert_eq!(
        *ejections.lock().unwrap(),
        [bad as u64],
        "one host ejected, no healthy host"
    );
    assert_eq!(registry.open_count(), 1);
    let pool = &registry.outlier_pools()[0];
    assert_eq!(pool.members, HOSTS);
    assert_eq!(
        (pool.ejected, pool.enforced(OutlierRule::SuccessRate)),
        (1, 1)
    );
    assert_eq!(pool.late_reports, 0);
    assert_eq!(
        pool.success_rate_threshold,
        Some(1.0),
        "interval 0: every host at 100 %"
    );
    assert_eq!(threads(), threads_before, "no thread started");
    println!(
        "{HOSTS} pooled hosts: built in {built:?}; three intervals of {CALLS}, {CALLS} and 1 \
         calls per host, ejection detected, {detected:?} in all"
    );
}
