//! The half-open rate rule's judgement of a round
//! (`Builder::half_open_rate_rule`), with every other setting at its
//! default: a slow failure counts toward both the failure and the slow-call
//! limits (Resilience4j's `SLOW_ERROR`), and a round is decided as soon as
//! its outcome is certain — the probes still out then answer a round that
//! is over, and their verdicts are ignored by generation.

mod common;

use std::time::Duration;

use common::{Log, LogTransitions};
use failfast::{Breaker, Builder, ManualClock, Nanos, Reason, State};

const OPEN: Duration = Duration::from_secs(30); // the default open duration
const SLOW: Duration = Duration::from_secs(1);

/// Ten probes a round under the rule; one failure trips the closed breaker
/// (so a late failure counted against it would show).
fn ruled() -> Builder {
    Breaker::builder()
        .consecutive_failures(1)
        .half_open_probes(10)
        .half_open_rate_rule()
}

/// Trips `b` at 0 and takes the ten probes of its first round at the
/// open deadline.
fn round(b: &Breaker<ManualClock>) -> Vec<failfast::Permit<'_, ManualClock>> {
    b.try_acquire_at(Nanos::ZERO)
        .unwrap()
        .failure_at(Nanos::ZERO);
    let at = Nanos::ZERO + OPEN;
    let probes: Vec<_> = (0..10).map(|_| b.try_acquire_at(at).unwrap()).collect();
    assert!(probes.iter().all(|p| p.is_probe()));
    probes
}

#[test]
fn three_slow_failures_of_ten_reopen_at_a_slow_limit_of_30_percent() {
    let log = Log::default();
    let b = ruled()
        .slow_call_threshold(SLOW)
        .half_open_slow_call_rate(0.3)
        .log_transitions(&log)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let mut probes = round(&b).into_iter();
    let at = Nanos::ZERO + OPEN;
    let late = at + SLOW; // each took the slow-call threshold: slow
    for p in probes.by_ref().take(2) {
        assert_eq!(p.failure_at(late), None, "2 of 10 slow: not yet");
    }
    // The third slow failure: 3 of 10 probes slow reaches 30 % (3 of 10
    // failed is short of the 50 % failure rate).
    let t = probes.next().unwrap().failure_at(late).expect("reopens");
    assert_eq!(
        (t.from, t.to, t.reason, t.trips_in_a_row),
        (State::HalfOpen, State::Open, Reason::ProbeSlow, 2)
    );
    for p in probes {
        assert_eq!(p.success_at(at), None, "the round is over");
    }
    assert_eq!(b.state(), State::Open);
}

#[test]
fn a_round_closes_as_soon_as_its_outcome_is_certain() {
    let log = Log::default();
    let b = ruled()
        .log_transitions(&log)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let mut probes = round(&b).into_iter();
    let at = Nanos::ZERO + OPEN;
    // Five of ten at a failure rate of 50 % reopen: after five successes,
    // the five answers to come could all fail.
    for i in 1..=5 {
        assert_eq!(probes.next().unwrap().success_at(at), None, "success {i}");
    }
    // The sixth: four answers to come cannot make five failures.
    let t = probes
        .next()
        .unwrap()
        .success_at(at)
        .expect("closes with four probes still out");
    assert_eq!(
        (t.from, t.to, t.reason, t.probe_successes),
        (State::HalfOpen, State::Closed, Reason::ProbesSucceeded, 6)
    );
    // At once, everyone is admitted again.
    let call = b.try_acquire_at(at).expect("closed");
    assert!(!call.is_probe());
    call.success_at(at);
    // The four late probes fail: of a round that is over, they change
    // nothing (one failure trips this breaker when Closed).
    for p in probes {
        assert_eq!(p.failure_at(at), None);
    }
    let snap = b.snapshot_at(at);
    assert_eq!((snap.state, snap.consecutive_failures), (State::Closed, 0));
    assert_eq!(log.lock().unwrap().len(), 3, "trip, round, close");
}

#[test]
fn a_round_reopens_as_soon_as_a_limit_is_reached() {
    let b = ruled().build_with_clock(ManualClock::new()).unwrap();
    let mut probes = round(&b).into_iter();
    let at = Nanos::ZERO + OPEN;
    for _ in 0..4 {
        assert_eq!(probes.next().unwrap().failure_at(at), None);
    }
    let t = probes
        .next()
        .unwrap()
        .failure_at(at)
        .expect("the fifth failure");
    assert_eq!((t.to, t.reason), (State::Open, Reason::ProbeFailed));
}
