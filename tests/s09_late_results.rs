//! S9: late results are ignored. A call admitted while Closed that finishes
//! after the breaker opened neither extends the open period nor closes it; a
//! probe whose lease expired cannot decide a newer round.

use failfast::{Breaker, ManualClock, Nanos, Reason, RejectReason, State};
use std::time::Duration;

mod common;
use common::{Log, LogTransitions};

const OPEN: Duration = Duration::from_secs(10);
const LEASE: Duration = Duration::from_secs(2);

fn breaker(probes: u32) -> (Breaker<ManualClock>, Log) {
    let events = Log::default();
    let b = Breaker::builder()
        .consecutive_failures(3)
        .slow_call_threshold(Duration::from_secs(1))
        .open_duration(OPEN)
        .probe_lease(LEASE)
        .half_open_probes(probes)
        .count_calls(true)
        .log_transitions(&events)
        .build_with_clock(ManualClock::new())
        .unwrap();
    (b, events)
}

fn s(n: u64) -> Nanos {
    Nanos::from_secs(n)
}

#[test]
fn a_call_admitted_while_closed_cannot_extend_or_close_the_open_period() {
    let (b, events) = breaker(1);
    // Four calls go out at t = 0; three fail at t = 1 and open the breaker.
    let late_failure = b.try_acquire_at(s(0)).unwrap();
    let late_success = b.try_acquire_at(s(0)).unwrap();
    let late_slow = b.try_acquire_at(s(0)).unwrap();
    for _ in 0..3 {
        let _ = b.try_acquire_at(s(0)).unwrap().failure_at(s(1));
    }
    assert_eq!(b.state(), State::Open);
    let before = b.snapshot_at(s(5));
    assert_eq!(before.retry_after, Some(OPEN - Duration::from_secs(4)));

    // The stragglers report at t = 5, after the trip.
    assert!(late_failure.failure_at(s(5)).is_none(), "cannot re-trip");
    assert!(late_success.success_at(s(5)).is_none(), "cannot close");
    assert!(late_slow.success_at(s(5)).is_none());
    let after = b.snapshot_at(s(5));
    // Nothing but the lifetime counters (which count stale verdicts too) moved.
    let mut expected = before;
    expected.calls = after.calls;
    assert_eq!(expected, after);
    assert_eq!(after.state, State::Open);
    assert_eq!(after.generation, 1);
    assert_eq!(
        after.retry_after, before.retry_after,
        "open period not extended"
    );
    assert_eq!(events.lock().unwrap().len(), 1);

    // The probe comes exactly when the original open period ends.
    assert_eq!(
        b.try_acquire_at(s(1) + OPEN - Duration::from_nanos(1))
            .unwrap_err()
            .reason(),
        RejectReason::Open
    );
    let probe = b.try_acquire_at(s(1) + OPEN).unwrap();
    assert!(probe.is_probe());
    // The counters still saw every verdict (conservation), stale or not.
    let calls = b.snapshot_at(s(11)).calls.unwrap();
    assert_eq!((calls.admitted, calls.successes, calls.failures), (7, 2, 4));
    drop(probe);
}

#[test]
fn a_late_closed_call_does_not_count_as_a_probe() {
    let (b, _) = breaker(1);
    let straggler = b.try_acquire_at(s(0)).unwrap();
    for _ in 0..3 {
        let _ = b.try_acquire_at(s(0)).unwrap().failure_at(s(0));
    }
    let probe = b.try_acquire_at(s(10)).unwrap();
    assert_eq!(b.state(), State::HalfOpen);
    // The straggler from Closed succeeds during the probe round: no effect.
    assert!(straggler.success_at(s(10)).is_none());
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(
        b.try_acquire_at(s(10)).unwrap_err().reason(),
        RejectReason::HalfOpenFull
    );
    assert!(probe.success_at(s(10)).is_some());
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn a_probe_whose_lease_expired_cannot_decide_the_newer_round() {
    let (b, events) = breaker(2);
    for _ in 0..3 {
        let _ = b.try_acquire_at(s(0)).unwrap().failure_at(s(0));
    }
    // Round 1 at t = 10: two probes; they hang.
    let old_a = b.try_acquire_at(s(10)).unwrap();
    let old_b = b.try_acquire_at(s(10)).unwrap();
    let round1 = old_a.generation();
    // After the 2 s lease the next request starts round 2.
    let new_a = b.try_acquire_at(s(12)).unwrap();
    assert!(new_a.is_probe());
    assert_eq!(new_a.generation(), round1 + 1);
    {
        let e = events.lock().unwrap();
        let last = e.last().unwrap();
        assert_eq!(
            (last.from, last.to, last.reason),
            (State::HalfOpen, State::HalfOpen, Reason::ProbeLeaseExpired)
        );
    }

    // The old probes come back fast and successful: they do not count
    // toward the new round (which needs two successes) …
    assert!(old_a.success_at(s(12)).is_none());
    assert!(old_b.success_at(s(12)).is_none());
    assert_eq!(b.state(), State::HalfOpen);
    assert!(new_a.success_at(s(12)).is_none(), "one success of two");
    assert_eq!(b.state(), State::HalfOpen);
    let new_b = b.try_acquire_at(s(12)).unwrap();
    assert!(new_b.success_at(s(12)).is_some());
    assert_eq!(b.state(), State::Closed);
    let e = events.lock().unwrap();
    assert_eq!(e.last().unwrap().reason, Reason::ProbesSucceeded);
    assert_eq!(e.last().unwrap().probe_successes, 2);
}

#[test]
fn an_expired_probes_failure_does_not_reopen_the_newer_round() {
    let (b, _) = breaker(1);
    for _ in 0..3 {
        let _ = b.try_acquire_at(s(0)).unwrap().failure_at(s(0));
    }
    let old = b.try_acquire_at(s(10)).unwrap();
    let new = b.try_acquire_at(s(12)).unwrap();
    assert!(old.failure_at(s(13)).is_none());
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "the stale failure changed nothing"
    );
    // The new probe (admitted at 12, fast) decides.
    let t = new.success_at(s(12) + Duration::from_millis(10)).unwrap();
    assert_eq!(t.to, State::Closed);
}
