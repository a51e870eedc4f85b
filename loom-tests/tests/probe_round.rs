//! Two verdicts of one probe round in flight at once (P = 2): every count
//! update of the round (a slot released, a success that does not yet close)
//! is a CAS loop that retries on the word it found while the round is still
//! current. One that gave up on a lost CAS would drop a count and leave the
//! round half-open until its lease ran out.
//!
//! Both models drop or report their permits at the admission time on a
//! `ManualClock` left at zero, so a drop without a verdict is an early
//! (neutral) drop that only frees its slot.
#![cfg(failfast_loom)]

use failfast::{ManualClock, OwnedPermit, Reason, State};
use failfast_loom_tests::{
    base, both_orders, build, go_second, secs, seen, trip, Cb, Log, Seen, OPEN,
};
use loom::sync::Arc;
use loom::thread;

/// A probe that can move to another thread.
type Probe = OwnedPermit<ManualClock, Arc<Cb>>;

/// P = 2, tripped at 0 s; both probes of round 2 taken at the open deadline.
/// Returns the breaker, its log, and the two probes.
fn two_probes() -> (Arc<Cb>, Log, Probe, Probe) {
    let (b, log) = build(base().consecutive_failures(1).half_open_probes(2));
    trip(&b, secs(0));
    let ready = secs(0) + OPEN;
    let first = OwnedPermit::acquire_at(b.clone(), ready).expect("wins the election");
    let second = OwnedPermit::acquire_at(b.clone(), ready).expect("the second slot");
    assert!(first.is_probe() && second.is_probe());
    assert_eq!((first.generation(), second.generation()), (2, 2));
    (b, log, first, second)
}

/// Both probes of the round succeed at once: whichever CAS loses retries on
/// the word it found, so the second success always closes the breaker.
/// Exactly one verdict reports the close, and it counts both successes.
#[test]
fn concurrent_probe_successes_close_the_round() {
    both_orders(|spawned_first| {
        let (b, log, first, second) = two_probes();
        let ready = secs(0) + OPEN;
        let other = thread::spawn(move || second.success_at(ready));
        go_second(spawned_first);
        let mine = first.success_at(ready);
        let theirs = other.join().unwrap();

        let closes: Vec<_> = [mine, theirs].into_iter().flatten().collect();
        assert_eq!(closes.len(), 1, "exactly one verdict closes: {closes:?}");
        let t = &closes[0];
        assert_eq!(
            (t.from, t.to, t.generation),
            (State::HalfOpen, State::Closed, 3)
        );
        assert_eq!(t.reason, Reason::ProbesSucceeded);
        assert_eq!(t.probe_successes, 2, "both successes counted");
        assert_eq!(b.state(), State::Closed);
        assert_eq!(
            seen(&log)[2..],
            [Seen::new(
                State::HalfOpen,
                State::Closed,
                Reason::ProbesSucceeded,
                3
            )]
        );
    });
}

/// One probe succeeds while the other is dropped without a verdict. Neither
/// update may be lost: afterwards one slot of round 2 is free (a third caller
/// is admitted as a probe of the same round), and the success still counts
/// (that caller's success is the second and closes the breaker).
#[test]
fn probe_success_and_concurrent_drop_leave_one_free_slot() {
    both_orders(|spawned_first| {
        let (b, log, first, second) = two_probes();
        let ready = secs(0) + OPEN;
        let other = thread::spawn(move || drop(second));
        go_second(spawned_first);
        let mine = first.success_at(ready);
        other.join().unwrap();

        assert_eq!(mine, None, "one success of two does not close");
        assert_eq!(b.state(), State::HalfOpen);
        let third = b
            .try_acquire_at(ready)
            .expect("the dropped probe's slot is free");
        assert_eq!((third.is_probe(), third.generation()), (true, 2));
        assert!(b.try_acquire_at(ready).is_err(), "only one slot was freed");
        let t = third
            .success_at(ready)
            .expect("the earlier success counted: this one closes");
        assert_eq!(
            (t.to, t.generation, t.probe_successes),
            (State::Closed, 3, 2)
        );
        assert_eq!(seen(&log).len(), 3, "trip, election, close");
    });
}
