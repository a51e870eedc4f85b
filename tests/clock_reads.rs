//! When a breaker reads its clock (invariants 7 and 8 in the `docs` module):
//! never for a Closed admission or a fast success when nothing is timed; once
//! at admission when a slow-call threshold times the call; once per verdict
//! that needs the time (a time window, a failure that may trip, a probe).

use failfast::{Breaker, Clock, ManualClock, Nanos, Outcome, State};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A manual clock that counts its reads (invariants 7 and 8: time is read
/// on the request path only where needed).
#[derive(Clone, Default)]
struct CountingClock {
    time: ManualClock,
    reads: Arc<AtomicU64>,
}

impl CountingClock {
    fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }
}

impl Clock for CountingClock {
    fn now(&self) -> Nanos {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.time.now()
    }
}

#[test]
fn closed_admission_and_a_fast_success_read_no_clock_without_timing() {
    let clock = CountingClock::default();
    let b = Breaker::builder()
        .consecutive_failures(3)
        .failure_rate(0.5)
        .count_window(10)
        .build_with_clock(clock.clone())
        .unwrap();
    let p = b.try_acquire().unwrap();
    assert_eq!(clock.reads(), 0, "admission in Closed is one load");
    assert_eq!(p.started_at(), Nanos::NEVER, "untimed: no known start");
    p.success();
    assert_eq!(clock.reads(), 0, "a success needs no time here");
    b.try_acquire().unwrap().ignore();
    assert_eq!(clock.reads(), 0, "nor does a business error");
    b.try_acquire().unwrap().record(Outcome::Ignored);
    assert_eq!(clock.reads(), 0);
    drop(b.try_acquire().unwrap());
    assert_eq!(clock.reads(), 0, "a drop with no known start is neutral");
    b.try_acquire().unwrap().failure();
    assert_eq!(clock.reads(), 1, "a failure may trip: it reads the time");
}

#[test]
fn a_slow_call_threshold_times_every_call() {
    let clock = CountingClock::default();
    let b = Breaker::builder()
        .consecutive_failures(3)
        .slow_call_threshold(Duration::from_millis(100))
        .build_with_clock(clock.clone())
        .unwrap();
    clock.time.advance(Duration::from_secs(1));
    let p = b.try_acquire().unwrap();
    assert_eq!(clock.reads(), 1);
    assert_eq!(p.started_at(), Nanos::from_secs(1));
    p.success();
    assert_eq!(clock.reads(), 2);
}

#[test]
fn a_time_window_reads_the_clock_at_the_verdict() {
    let clock = CountingClock::default();
    let b = Breaker::builder()
        .failure_rate(0.5)
        .time_window(Duration::from_secs(10), 10)
        .min_calls(1)
        .build_with_clock(clock.clone())
        .unwrap();
    // Successes at t = 100 s land in the window of t = 100 s, not of t = 0.
    clock.time.advance(Duration::from_secs(100));
    for _ in 0..3 {
        let p = b.try_acquire().unwrap();
        p.success();
    }
    assert_eq!(clock.reads(), 3, "one read per verdict, none at admission");
    let w = b.snapshot_at(Nanos::from_secs(100)).window;
    assert_eq!((w.calls, w.failures), (3, 0));
}

#[test]
fn a_probe_verdict_reads_the_clock() {
    let clock = CountingClock::default();
    let b = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(1))
        .build_with_clock(clock.clone())
        .unwrap();
    b.try_acquire_at(Nanos::ZERO)
        .unwrap()
        .failure_at(Nanos::ZERO);
    clock.time.advance(Duration::from_secs(2));
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    let before = clock.reads();
    probe.success();
    assert_eq!(clock.reads(), before + 1);
    assert_eq!(b.state(), State::Closed);
}
