//! A breaker opened by another replica's news reports true fields: while
//! Open, the word's run bits hold the remote period's span, which is no
//! run of failures; its snapshots and the transitions in and out of it say
//! so.

use std::time::Duration;

use failfast::{Breaker, ManualClock, Nanos, Reason, RemoteTrip, State};

mod common;
use common::{Log, LogTransitions};

fn secs(s: u64) -> Nanos {
    Nanos::from_secs(s)
}

#[test]
fn a_remotely_opened_breaker_reports_no_run_of_failures() {
    let log = Log::default();
    let breaker = Breaker::builder()
        .consecutive_failures(5)
        .open_duration(Duration::from_secs(10))
        .log_transitions(&log)
        .build_with_clock(ManualClock::new())
        .unwrap();
    // Two failures of its own first: a run of 2 the trip reports.
    for _ in 0..2 {
        breaker.try_acquire_at(secs(1)).unwrap().failure_at(secs(1));
    }
    // 30 s left: a span of 1789 units of 2^24 ns, in the bits that hold
    // the run while Closed.
    let news = RemoteTrip::new(7, Duration::from_secs(30), Reason::FailureRate);
    let t = breaker.apply_remote_at(&news, secs(2)).unwrap();
    assert_eq!(
        (t.from, t.to, t.reason),
        (State::Closed, State::Open, Reason::RemoteTrip)
    );
    assert_eq!(t.consecutive_failures, 2, "the run it left");
    let snap = breaker.snapshot_at(secs(3));
    assert_eq!(snap.state, State::Open);
    assert_eq!(
        (snap.consecutive_failures, snap.unanswered_calls),
        (0, 0),
        "Open keeps no run: {snap:?}"
    );
    let left = snap.retry_after.unwrap();
    assert!(
        left > Duration::from_secs(28) && left <= Duration::from_secs(30),
        "{left:?}"
    );

    // Later news extends it: Open -> Open, no run either.
    let later = RemoteTrip::new(8, Duration::from_secs(60), Reason::FailureRate);
    let t = breaker.apply_remote_at(&later, secs(4)).unwrap();
    assert_eq!(
        (t.from, t.to, t.consecutive_failures),
        (State::Open, State::Open, 0)
    );

    // The probe's round: the transition out of the remote Open carries no
    // run, nor a probe's successes.
    let probe = breaker.try_acquire_at(secs(65)).unwrap();
    let t = probe.transition().expect("the admission started the round");
    assert_eq!((t.from, t.to), (State::Open, State::HalfOpen));
    assert_eq!(
        (
            t.consecutive_failures,
            t.probe_successes,
            t.unanswered_calls
        ),
        (0, 0, 0)
    );
    let all = log.lock().unwrap().clone();
    assert!(
        all.iter().all(|t| t.consecutive_failures <= 2),
        "no span read as a run: {all:?}"
    );
}
