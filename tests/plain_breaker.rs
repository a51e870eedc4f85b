//! The plain breaker's fast success path (a consecutive-failures policy
//! only: no window, no slow-call threshold, no counters): a success still
//! ends a failure run, a plain probe still closes the round, a stale success
//! does not end a newer run, and call counters, when on, still see successes.

use failfast::{Breaker, ManualClock, Nanos, State};
use std::time::Duration;

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

#[test]
fn a_stale_success_of_a_plain_breaker_does_not_end_a_newer_run() {
    // Plain: no window, no timing, no counters (the one-branch success path).
    let b = Breaker::builder()
        .consecutive_failures(2)
        .open_duration(Duration::from_secs(1))
        .build_with_clock(ManualClock::new())
        .unwrap();
    let s = Nanos::from_secs;
    let stale = b.try_acquire_at(s(0)).unwrap(); // generation 0
    b.try_acquire_at(s(0)).unwrap().failure_at(s(0));
    b.try_acquire_at(s(0)).unwrap().failure_at(s(0)); // Open, generation 1
    b.try_acquire_at(s(2)).unwrap().success_at(s(2)); // probe closes: generation 3
    b.try_acquire_at(s(3)).unwrap().failure_at(s(3)); // a run of 1
    assert_eq!(b.snapshot_at(s(3)).consecutive_failures, 1);
    assert_eq!(stale.success_at(s(3)), None);
    assert_eq!(
        b.snapshot_at(s(3)).consecutive_failures,
        1,
        "a stale success changed the run"
    );
}

#[test]
fn call_counters_see_the_successes_of_a_windowless_breaker() {
    let b = Breaker::builder()
        .consecutive_failures(3)
        .count_calls(true)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let t = Nanos::from_secs(1);
    b.try_acquire_at(t).unwrap().success_at(t);
    b.try_acquire_at(t).unwrap().success_at(t);
    let calls = b.snapshot_at(t).calls.expect("counted");
    assert_eq!((calls.admitted, calls.successes), (2, 2));
}
