//! `Outcome::Neutral`: a call failed by no fault of the dependency (the
//! caller's own resources, the client's request body). Not counted, it ends
//! no run of failures, and a probe that ends neutral frees its slot.

use std::time::Duration;

use failfast::{Breaker, ManualClock, Nanos, Outcome, State};

fn at(ms: u64) -> Nanos {
    Nanos::from_millis(ms)
}

#[test]
fn neutral_counts_nothing_and_leaves_the_failure_run() {
    let breaker = Breaker::builder()
        .consecutive_failures(3)
        .failure_rate(0.5)
        .count_window(10)
        .min_calls(4)
        .count_calls(true)
        .build_with_clock(ManualClock::new())
        .unwrap();
    for i in 0..2 {
        breaker.try_acquire_at(at(i)).unwrap().failure_at(at(i));
    }
    assert_eq!(breaker.snapshot_at(at(2)).consecutive_failures, 2);
    // A client mixing broken requests in between: neutral, not a "success".
    for i in 2..20 {
        let t = breaker
            .try_acquire_at(at(i))
            .unwrap()
            .record_at(Outcome::Neutral, at(i));
        assert!(t.is_none());
    }
    let snap = breaker.snapshot_at(at(20));
    assert_eq!(snap.consecutive_failures, 2, "the run stays");
    assert_eq!(snap.window.calls, 2, "neutral calls are not in the window");
    let calls = snap.calls.unwrap();
    assert_eq!((calls.neutral, calls.failures, calls.ignored), (18, 2, 0));
    // So the third failure still trips it.
    breaker.try_acquire_at(at(21)).unwrap().failure_at(at(21));
    assert_eq!(breaker.state(), State::Open);
}

#[test]
fn ignored_ends_the_run_where_neutral_does_not() {
    // The difference that makes Neutral necessary: an `Ignored` would let
    // a client keep a failing upstream closed.
    let run_after = |outcome: Outcome| {
        let breaker = Breaker::builder()
            .consecutive_failures(3)
            .build_with_clock(ManualClock::new())
            .unwrap();
        breaker.try_acquire_at(at(0)).unwrap().failure_at(at(0));
        breaker
            .try_acquire_at(at(1))
            .unwrap()
            .record_at(outcome, at(1));
        breaker.snapshot_at(at(1)).consecutive_failures
    };
    assert_eq!(run_after(Outcome::Ignored), 0);
    assert_eq!(run_after(Outcome::Neutral), 1);
}

#[test]
fn a_neutral_probe_frees_its_slot_and_decides_nothing() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .consecutive_failures(1)
        .half_open_probes(1)
        .open_duration(Duration::from_secs(10))
        .build_with_clock(clock.clone())
        .unwrap();
    breaker.try_acquire_at(at(0)).unwrap().failure_at(at(0));
    let probe = breaker.try_acquire_at(at(10_000)).unwrap();
    assert!(probe.is_probe());
    assert!(
        breaker.try_acquire_at(at(10_001)).is_err(),
        "the one slot is taken"
    );
    assert!(probe.record_at(Outcome::Neutral, at(10_002)).is_none());
    assert_eq!(
        breaker.state(),
        State::HalfOpen,
        "neither closed nor reopened"
    );
    let next = breaker
        .try_acquire_at(at(10_003))
        .expect("the slot is free again");
    assert!(next.is_probe());
    next.success_at(at(10_004));
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn a_slow_neutral_call_is_not_a_slow_call() {
    let breaker = Breaker::builder()
        .slow_call_rate(0.5)
        .slow_call_threshold(Duration::from_millis(100))
        .count_window(4)
        .min_calls(1)
        .count_calls(true)
        .build_with_clock(ManualClock::new())
        .unwrap();
    for i in 0..4 {
        let start = at(i * 1000);
        let permit = breaker.try_acquire_at(start).unwrap();
        permit.record_at(Outcome::Neutral, start + Duration::from_millis(900));
    }
    let snap = breaker.snapshot_at(at(5000));
    assert_eq!(snap.state, State::Closed);
    assert_eq!((snap.window.slow, snap.calls.unwrap().slow), (0, 0));
}

#[test]
fn neutral_is_named_for_logs_and_labels() {
    assert_eq!(Outcome::Neutral.as_str(), "neutral");
}
