//! Manual modes: force open, disable, metrics only (shadow trips), reset.
//! Each is observable through the observer and the returned `Transition`.

use failfast::{Breaker, ManualClock, Nanos, Reason, RejectReason, State, Transition};
use std::time::Duration;

mod common;
use common::{Log, LogTransitions};

const OPEN: Duration = Duration::from_secs(10);

fn breaker() -> (Breaker<ManualClock>, Log) {
    let events = Log::default();
    let b = Breaker::builder()
        .consecutive_failures(3)
        .failure_rate(0.5)
        .count_window(10)
        .min_calls(4)
        .open_duration(OPEN)
        .count_calls(true)
        .log_transitions(&events)
        .build_with_clock(ManualClock::new())
        .unwrap();
    (b, events)
}

fn last(events: &Log) -> Transition {
    *events.lock().unwrap().last().expect("an event")
}

fn at(s: u64) -> Nanos {
    Nanos::from_secs(s)
}

#[test]
fn force_open_rejects_everything_until_reset() {
    let (b, events) = breaker();
    let t = b.force_open_at(at(1)).expect("a transition");
    assert_eq!(
        (t.from, t.to, t.reason, t.generation, t.at),
        (
            State::Closed,
            State::ForcedOpen,
            Reason::ForceOpen,
            1,
            at(1)
        )
    );
    assert_eq!(last(&events), t, "observed once, as returned");
    assert!(b.force_open_at(at(2)).is_none(), "already forced open");
    assert_eq!(events.lock().unwrap().len(), 1);

    // No open duration ever lets a probe through.
    for s in [1, 100, 100_000] {
        let r = b.try_acquire_at(at(s)).unwrap_err();
        assert_eq!(r.reason(), RejectReason::ForcedOpen);
        assert_eq!(r.retry_after(), None);
    }
    assert_eq!(b.state(), State::ForcedOpen);

    let t = b
        .reset_at(at(100_001))
        .expect("reset is always a transition");
    assert_eq!(
        (t.from, t.to, t.reason),
        (State::ForcedOpen, State::Closed, Reason::Reset)
    );
    assert_eq!(last(&events), t);
    assert!(b.try_acquire_at(at(100_001)).is_ok());
}

#[test]
fn force_open_from_open_keeps_the_backoff_and_reset_clears_it() {
    let (b, events) = breaker();
    for _ in 0..3 {
        let _ = b.try_acquire_at(at(1)).unwrap().failure_at(at(1));
    }
    assert_eq!(b.state(), State::Open);
    let t = b.force_open_at(at(2)).unwrap();
    assert_eq!((t.from, t.to), (State::Open, State::ForcedOpen));
    assert_eq!(t.trips_in_a_row, 1);
    assert!(b.try_acquire_at(at(100)).is_err());

    let t = b.reset_at(at(100)).unwrap();
    assert_eq!(t.trips_in_a_row, 0);
    let s = b.snapshot_at(at(100));
    assert_eq!(
        (s.state, s.trips_in_a_row, s.consecutive_failures),
        (State::Closed, 0, 0)
    );
    assert_eq!(s.window.calls, 0, "reset empties the window");
    // The next trip uses the base open duration again.
    for _ in 0..3 {
        let _ = b.try_acquire_at(at(100)).unwrap().failure_at(at(100));
    }
    assert_eq!(last(&events).open_for, Some(OPEN));
}

#[test]
fn disabled_admits_everything_and_records_nothing() {
    let (b, events) = breaker();
    let t = b.disable_at(at(1)).unwrap();
    assert_eq!(
        (t.from, t.to, t.reason),
        (State::Closed, State::Disabled, Reason::Disable)
    );
    assert_eq!(last(&events), t);
    assert!(b.disable_at(at(1)).is_none());
    for i in 0..100 {
        let p = b.try_acquire_at(at(2)).expect("disabled admits all");
        assert!(!p.is_probe());
        assert!(p.failure_at(at(2)).is_none(), "call {i}: nothing trips");
    }
    let s = b.snapshot_at(at(3));
    assert_eq!(s.state, State::Disabled);
    assert_eq!(s.window.calls, 0, "nothing recorded");
    assert_eq!(s.consecutive_failures, 0);
    assert_eq!(events.lock().unwrap().len(), 1);

    let t = b.reset_at(at(4)).unwrap();
    assert_eq!((t.from, t.to), (State::Disabled, State::Closed));
    // Back to normal: three failures open it.
    for _ in 0..3 {
        let _ = b.try_acquire_at(at(4)).unwrap().failure_at(at(4));
    }
    assert_eq!(b.state(), State::Open);
}

#[test]
fn metrics_only_records_and_shadow_trips_but_never_rejects() {
    let (b, events) = breaker();
    let t = b.metrics_only_at(at(1)).unwrap();
    assert_eq!(
        (t.from, t.to, t.reason),
        (State::Closed, State::MetricsOnly, Reason::MetricsOnly)
    );
    assert_eq!(last(&events), t);
    assert!(b.metrics_only_at(at(1)).is_none());

    // Three failures in a row: a shadow trip, returned and observed.
    let mut shadow = None;
    for i in 0..3 {
        let p = b.try_acquire_at(at(2)).unwrap();
        let t = p.failure_at(at(2));
        assert_eq!(t.is_some(), i == 2, "failure {i}");
        shadow = shadow.or(t);
    }
    let shadow = shadow.unwrap();
    assert_eq!(
        (shadow.from, shadow.to, shadow.reason),
        (
            State::MetricsOnly,
            State::MetricsOnly,
            Reason::ConsecutiveFailures
        )
    );
    assert_eq!(shadow.consecutive_failures, 3);
    assert_eq!(shadow.open_for, None, "nothing actually opens");
    assert_eq!(last(&events), shadow);
    assert_eq!(b.state(), State::MetricsOnly);

    // It keeps admitting, and keeps evaluating: a failure-rate shadow trip.
    let mut reasons = Vec::new();
    for i in 0..1_000u32 {
        let p = b.try_acquire_at(at(3)).expect("never rejects");
        let t = if i % 2 == 0 {
            p.failure_at(at(3))
        } else {
            p.success_at(at(3))
        };
        if let Some(t) = t {
            assert_eq!((t.from, t.to), (State::MetricsOnly, State::MetricsOnly));
            reasons.push(t.reason);
        }
    }
    assert!(!reasons.is_empty());
    assert!(
        reasons.iter().all(|r| *r == Reason::FailureRate),
        "{reasons:?}"
    );
    let s = b.snapshot_at(at(3));
    assert_eq!(s.state, State::MetricsOnly);
    assert_eq!(s.generation as usize, events.lock().unwrap().len());
    assert_eq!(s.calls.unwrap().rejected, 0);

    let t = b.reset_at(at(4)).unwrap();
    assert_eq!((t.from, t.to), (State::MetricsOnly, State::Closed));
}

#[test]
fn reset_from_closed_is_observed_too_and_makes_old_permits_stale() {
    let (b, events) = breaker();
    let old = b.try_acquire_at(at(1)).unwrap();
    let _ = b.try_acquire_at(at(1)).unwrap().failure_at(at(1));
    let _ = b.try_acquire_at(at(1)).unwrap().failure_at(at(1));
    assert_eq!(b.snapshot_at(at(1)).consecutive_failures, 2);
    let t = b.reset_at(at(2)).unwrap();
    assert_eq!(
        (t.from, t.to, t.reason),
        (State::Closed, State::Closed, Reason::Reset)
    );
    assert_eq!(last(&events), t);
    assert_eq!(b.snapshot_at(at(2)).consecutive_failures, 0);
    assert!(old.failure_at(at(2)).is_none());
    assert_eq!(
        b.snapshot_at(at(2)).consecutive_failures,
        0,
        "stale verdict"
    );
}

#[test]
fn reset_from_half_open_ends_the_round() {
    let (b, _) = breaker();
    for _ in 0..3 {
        let _ = b.try_acquire_at(at(0)).unwrap().failure_at(at(0));
    }
    let probe = b.try_acquire_at(at(10)).unwrap();
    let t = b.reset_at(at(10)).unwrap();
    assert_eq!((t.from, t.to), (State::HalfOpen, State::Closed));
    assert!(
        probe.failure_at(at(10)).is_none(),
        "the old probe cannot reopen"
    );
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn manual_modes_through_the_clock_reading_methods() {
    let clock = ManualClock::starting_at(at(50));
    let b = Breaker::builder()
        .consecutive_failures(1)
        .build_with_clock(clock.clone())
        .unwrap();
    assert_eq!(b.force_open().unwrap().at, at(50));
    clock.advance(Duration::from_secs(1));
    assert_eq!(b.disable().unwrap().at, at(51));
    assert_eq!(b.metrics_only().unwrap().at, at(51));
    assert_eq!(b.reset().unwrap().at, at(51));
    assert_eq!(b.snapshot().generation, 4);
}
