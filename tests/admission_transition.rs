//! The transition an admission causes (Open → HalfOpen, a superseded probe
//! round) is available on the permit, equal to what the observer saw, so a
//! layer that knows the upstream's name can report it.

use failfast::{Breaker, ManualClock, Nanos, Reason, State};
use std::sync::Arc;
use std::time::Duration;

mod common;
use common::{Log, LogTransitions};

fn breaker(log: &Log) -> Arc<Breaker<ManualClock>> {
    let breaker = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(10))
        .probe_lease(Duration::from_secs(2))
        .half_open_probes(2)
        .log_transitions(log)
        .build_with_clock(ManualClock::new())
        .unwrap();
    Arc::new(breaker)
}

#[test]
fn the_round_starter_carries_the_transition_the_observer_saw() {
    let log = Log::default();
    let b = breaker(&log);
    let closed = b.try_acquire_at(Nanos::ZERO).unwrap();
    assert_eq!(
        closed.transition(),
        None,
        "a closed admission causes nothing"
    );
    closed.failure_at(Nanos::ZERO);

    let probe = b.try_acquire_owned_at(Nanos::from_secs(10)).unwrap();
    let t = probe.transition().expect("this admission opened the round");
    assert_eq!(
        (t.from, t.to, t.reason),
        (State::Open, State::HalfOpen, Reason::OpenElapsed)
    );
    assert_eq!(t.at, Nanos::from_secs(10));
    assert_eq!(log.lock().unwrap().last(), Some(&t));

    let second = b.try_acquire_at(Nanos::from_secs(11)).unwrap();
    assert!(second.is_probe());
    assert_eq!(
        second.transition(),
        None,
        "joining a round is no transition"
    );
    drop(second);

    // The first probe hangs; after the lease the next request starts a new round.
    let superseding = b.try_acquire_at(Nanos::from_secs(12)).unwrap();
    let t = superseding.transition().expect("superseded the round");
    assert_eq!(
        (t.from, t.to, t.reason),
        (State::HalfOpen, State::HalfOpen, Reason::ProbeLeaseExpired)
    );
    assert_eq!(log.lock().unwrap().last(), Some(&t));
    assert_eq!(t.generation, superseding.generation());
    drop(probe);
}

#[test]
fn the_rebuilt_transition_keeps_trips_and_the_superseded_rounds_successes() {
    let log = Log::default();
    let b = breaker(&log);
    // Trip twice in a row: Closed → Open, then a failed probe reopens (trips 2).
    b.try_acquire_at(Nanos::ZERO)
        .unwrap()
        .failure_at(Nanos::ZERO);
    let probe = b.try_acquire_at(Nanos::from_secs(10)).unwrap();
    probe.failure_at(Nanos::from_secs(10));
    let reopened_at = Nanos::from_secs(10);
    let wait = b.snapshot_at(reopened_at).retry_after.unwrap();
    let t0 = reopened_at + wait;
    let first = b.try_acquire_at(t0).unwrap();
    let opened = first.transition().unwrap();
    assert_eq!(opened.trips_in_a_row, 2);
    assert_eq!(log.lock().unwrap().last(), Some(&opened));
    // One probe succeeds, the other hangs past the lease: the new round's
    // transition reports the superseded round's one success.
    let second = b.try_acquire_at(t0).unwrap();
    second.success_at(t0);
    let t1 = t0 + Duration::from_secs(2);
    let superseding = b.try_acquire_at(t1).unwrap();
    let t = superseding.transition().unwrap();
    assert_eq!((t.probe_successes, t.trips_in_a_row), (1, 2));
    assert_eq!(log.lock().unwrap().last(), Some(&t));
    drop(first);
}
