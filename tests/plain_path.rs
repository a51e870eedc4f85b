//! The plain breaker's fast success path (no window, no slow-call threshold,
//! no counters): a success still ends a failure run, and a plain probe still
//! closes the round. Its stale-success and counter cases are in
//! `mutants_core.rs`.

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
