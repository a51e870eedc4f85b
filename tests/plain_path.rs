//! The plain breaker's fast success path (no window, no slow-call threshold,
//! no counters) must behave exactly like the general path.

use failfast::{Breaker, ManualClock, Nanos, State};
use std::time::Duration;

#[test]
fn a_stale_success_does_not_end_the_current_failure_run() {
    let b = Breaker::builder()
        .consecutive_failures(3)
        .open_duration(Duration::from_secs(1))
        .build_with_clock(ManualClock::new())
        .unwrap();
    let stale = b.try_acquire_at(Nanos::ZERO).unwrap(); // generation 0
    for _ in 0..3 {
        b.try_acquire_at(Nanos::ZERO)
            .unwrap()
            .failure_at(Nanos::ZERO);
    }
    assert_eq!(b.state(), State::Open);
    let t = Nanos::from_secs(1);
    b.try_acquire_at(t).unwrap().success_at(t); // the probe closes it
    assert_eq!(b.state(), State::Closed);
    b.try_acquire_at(t).unwrap().failure_at(t);
    b.try_acquire_at(t).unwrap().failure_at(t);
    assert_eq!(b.snapshot_at(t).consecutive_failures, 2);
    // A success from generation 0 arrives now: it must change nothing.
    assert_eq!(stale.success_at(t), None);
    assert_eq!(
        b.snapshot_at(t).consecutive_failures,
        2,
        "the stale success ended the run"
    );
    b.try_acquire_at(t).unwrap().failure_at(t);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn a_consecutive_breaker_with_counters_counts_its_successes() {
    let b = Breaker::builder()
        .consecutive_failures(3)
        .count_calls(true)
        .build_with_clock(ManualClock::new())
        .unwrap();
    for _ in 0..5 {
        b.try_acquire_at(Nanos::ZERO)
            .unwrap()
            .success_at(Nanos::ZERO);
    }
    let calls = b.snapshot_at(Nanos::ZERO).calls.unwrap();
    assert_eq!((calls.admitted, calls.successes), (5, 5));
}

#[test]
fn a_plain_success_ends_a_failure_run_and_a_plain_probe_closes() {
    let b = Breaker::builder()
        .consecutive_failures(2)
        .open_duration(Duration::from_secs(1))
        .build_with_clock(ManualClock::new())
        .unwrap();
    b.try_acquire_at(Nanos::ZERO)
        .unwrap()
        .failure_at(Nanos::ZERO);
    b.try_acquire_at(Nanos::ZERO)
        .unwrap()
        .success_at(Nanos::ZERO);
    b.try_acquire_at(Nanos::ZERO)
        .unwrap()
        .failure_at(Nanos::ZERO);
    assert_eq!(b.state(), State::Closed, "the success ended the run");
    b.try_acquire_at(Nanos::ZERO)
        .unwrap()
        .failure_at(Nanos::ZERO);
    assert_eq!(b.state(), State::Open);
    let t = Nanos::from_secs(1);
    let probe = b.try_acquire_at(t).unwrap();
    assert!(probe.is_probe());
    assert!(probe.success_at(t).is_some());
    assert_eq!(b.state(), State::Closed);
}
