//! Slow start after a recovery (issue 27): a probe round that closes puts
//! the word in the ramp's mode (code 4, Closed to everyone outside). The
//! first admission after the ramp window moves it back to plain Closed with
//! a count change in its generation, not a transition, so permits admitted
//! during the ramp stay valid. A trip during the ramp is a failed recovery:
//! it opens at the kept backoff step plus one, with no decay.
//!
//! The ramps here have a floor of 1.0 (`ramp_curve(window, 1.0, 1.0)`):
//! every call is admitted, whatever its thread's Weyl turn, so the models
//! stay deterministic while the word still goes through the ramp's mode.
//! Hints are off (no slot to read on a trip: fewer interleavings).
//!
//! Core protocol models (the `protocol_` prefix): CI runs them at
//! `LOOM_MAX_PREEMPTIONS=3` too.
#![cfg(failfast_loom)]

use std::time::Duration;

use failfast::{OwnedPermit, Reason, RejectReason, State};
use failfast_loom_tests::{
    base, both_orders, build, go_second, secs, seen, take_and_hold, trip_and_probe, Cb, Log, Seen,
    OPEN,
};
use loom::sync::Arc;
use loom::thread;

/// `consecutive_failures(1)`, open for 10 s doubling up to 40 s (a step
/// that grows, so the next one shows), a ramp of `window` admitting
/// everyone: tripped at 0 s, closed by its probe at 10 s (generation 3,
/// backoff step 1 kept), ramping from there.
fn ramping(window: Duration) -> (Arc<Cb>, Log) {
    let (b, log) = build(
        base()
            .backoff(2.0, OPEN * 4)
            .consecutive_failures(1)
            .ramp_curve(window, 1.0, 1.0)
            .hints_off(),
    );
    assert_eq!(trip_and_probe(&b, secs(0), true), State::Closed);
    assert_eq!(b.snapshot_at(secs(10)).ramp_fraction, Some(1.0));
    (b, log)
}

/// A call of the ramp (generation 3), admitted at 12 s, to report later.
fn ramp_permit(b: &Arc<Cb>) -> OwnedPermit<failfast::ManualClock, Arc<Cb>> {
    let p = OwnedPermit::acquire_at(b.clone(), secs(12)).expect("a floor of 1.0 admits");
    assert_eq!((p.is_probe(), p.generation()), (false, 3));
    p
}

/// An admission racing the trip: admitted into Closed of generation 3 (before
/// the trip, or after it lost), or turned away for the new open period (step
/// 2: 20 s).
fn admitted_or_open(asked: Result<(bool, u32), failfast::Rejected>) {
    match asked {
        Ok(got) => assert_eq!(got, (false, 3), "an ordinary call of the closed period"),
        Err(r) => {
            assert_eq!(r.reason(), RejectReason::Open, "{r:?}");
            assert_eq!(r.retry_after(), Some(OPEN * 2));
        }
    }
}

/// The ramp (10 s to 15 s) is over. Two threads ask at 15 s, each able to
/// make the leave-the-ramp CAS, while the main thread reports a failure for
/// a call admitted during the ramp. That verdict counts, wherever the leave
/// lands (the leave keeps the generation), and trips once: Closed → Open,
/// generation 4, step 2 (the kept step 1, 5 s of healthy time decaying
/// nothing, plus one). The leave is no transition: the observer sees only
/// the trip.
#[test]
fn protocol_ramp_end_admissions_race_a_trip_by_a_ramp_permit() {
    loom::model(|| {
        let (b, log) = ramping(Duration::from_secs(5));
        let held = ramp_permit(&b);
        let after = secs(15);
        let askers: Vec<_> = (0..2)
            .map(|_| {
                let b = b.clone();
                thread::spawn(move || take_and_hold(&b, after))
            })
            .collect();
        let tripped = held.failure_at(after);
        for asker in askers {
            admitted_or_open(asker.join().unwrap());
        }

        let t = tripped.expect("a ramp permit's verdict counts after the ramp");
        assert_eq!(
            (t.from, t.to, t.generation, t.trips_in_a_row),
            (State::Closed, State::Open, 4, 2)
        );
        assert_eq!(
            seen(&log)[3..],
            [Seen::new(
                State::Closed,
                State::Open,
                Reason::ConsecutiveFailures,
                4
            )],
            "one transition: the trip (leaving the ramp is none)"
        );
        let snap = b.snapshot_at(after);
        assert_eq!((snap.state, snap.generation), (State::Open, 4));
    });
}

/// In the ramp (30 s from 10 s), at 35 s: a call of the ramp fails while
/// another thread asks (× 2 orders). The trip is a failed recovery: step 2
/// (the kept step 1 plus one), not the decayed step 25 s of healthy time
/// would give (two base periods: step 0, plus one). It is reported once;
/// the asker is admitted into the ramp's generation or turned away `Open`.
fn trip_during_the_ramp_races_an_admission(spawned_first: bool) {
    let (b, log) = ramping(Duration::from_secs(30));
    let held = ramp_permit(&b);
    let during = secs(35);
    let asker = {
        let b = b.clone();
        thread::spawn(move || {
            go_second(spawned_first);
            take_and_hold(&b, during)
        })
    };
    let tripped = held.failure_at(during);
    admitted_or_open(asker.join().unwrap());

    let t = tripped.expect("one failure trips");
    assert_eq!(
        (t.from, t.to, t.generation),
        (State::Closed, State::Open, 4)
    );
    assert_eq!(
        t.trips_in_a_row, 2,
        "a trip in the ramp takes the next step"
    );
    assert_eq!(
        seen(&log)[3..],
        [Seen::new(
            State::Closed,
            State::Open,
            Reason::ConsecutiveFailures,
            4
        )]
    );
    assert_eq!(b.snapshot_at(during).backoff_step, 2);
}

#[test]
fn protocol_trip_during_the_ramp_is_a_failed_recovery() {
    both_orders(trip_during_the_ramp_races_an_admission);
}
