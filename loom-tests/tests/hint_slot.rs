//! The remembered hint (issue 27): a verdict with an upstream's hint ("do
//! not come back for 30 s") stores `now + hint` in the breaker's hint slot
//! (one `AtomicU64`, Relaxed) before the verdict is recorded; a trip to Open
//! reads what is left of it, opens for that when it is longer than the
//! schedule's step, and then clears the slot, so the hint lengthens one trip
//! only.
//!
//! Every breaker here opens for 10 s at every step; a hint is 30 s, sent at
//! 0 s. After the race the breaker is reset at 1 s and tripped again: a hint
//! still in the slot (29 s left) would lengthen that trip.
#![cfg(failfast_loom)]

use std::time::Duration;

use failfast::{Outcome, OwnedPermit, Reason, State};
use failfast_loom_tests::{base, both_orders, build, go_second, secs, seen, Cb, Seen, OPEN};
use loom::sync::Arc;
use loom::thread;

const HINT: Duration = Duration::from_secs(30);

/// A call that can move to another thread.
type Call = OwnedPermit<failfast::ManualClock, Arc<Cb>>;

/// A breaker tripping on `k` consecutive failures and two calls of its
/// first closed period (generation 0), admitted at 0 s.
fn two_calls(k: u32) -> (Arc<Cb>, failfast_loom_tests::Log, [Call; 2]) {
    let (b, log) = build(base().consecutive_failures(k).hints());
    let calls = [(); 2].map(|()| OwnedPermit::acquire_at(b.clone(), secs(0)).unwrap());
    (b, log, calls)
}

/// How long the breaker, Open since `since`, stays open.
fn open_for(b: &Cb, since: failfast::Nanos) -> Duration {
    let snap = b.snapshot_at(since);
    assert_eq!(snap.state, State::Open);
    snap.retry_after.expect("open")
}

/// After the race: reset at 1 s (Closed, step 0) and trip again with `k`
/// failures at 1 s. The slot must be empty: the trip opens for the schedule's
/// 10 s, not for the 29 s the hint would have left.
fn next_trip_is_not_lengthened(b: &Cb, k: u32) {
    let at = secs(1);
    assert!(b.reset_at(at).is_some());
    for _ in 0..k {
        let _ = b.try_acquire_at(at).expect("closed").failure_at(at);
    }
    assert_eq!(open_for(b, at), OPEN, "the hint was used, and forgotten");
}

/// Two failures of one closed period, `consecutive_failures(2)`: one carries
/// the hint (on another thread), the other does not (× 2 orders). Whichever
/// counts second trips, once. The hint is stored before its verdict counts,
/// so the trip that follows that count (its own, or the plain failure's,
/// whose run CAS read the hinted failure's count) sees it: the breaker opens
/// for the hint (at least 30 s) in every order, and the slot is empty after.
fn hinted_failure_and_a_trip(spawned_first: bool) {
    let (b, log, [hinted, plain]) = two_calls(2);
    let other = thread::spawn(move || {
        go_second(spawned_first);
        hinted.record_hinted_at(Outcome::Failure, Some(HINT), secs(0))
    });
    let mine = plain.failure_at(secs(0));
    let theirs = other.join().unwrap();

    let trips: Vec<_> = [mine, theirs].into_iter().flatten().collect();
    assert_eq!(trips.len(), 1, "the second failure trips: {trips:?}");
    let t = &trips[0];
    assert_eq!(
        seen(&log),
        [Seen::new(
            State::Closed,
            State::Open,
            Reason::ConsecutiveFailures,
            1
        )]
    );
    let open = open_for(&b, secs(0));
    assert!(open >= HINT, "the hint came before the trip: {open:?}");
    assert!(open < HINT + Duration::from_millis(17), "{open:?}");
    assert_eq!(t.open_for, Some(open));
    next_trip_is_not_lengthened(&b, 2);
}

#[test]
fn hinted_failure_and_a_trip_open_for_the_hint_once() {
    both_orders(hinted_failure_and_a_trip);
}

/// `consecutive_failures(1)`: a hinted failure and a plain one race to trip
/// (× 2 orders). One trips. The hint is never lost: if the hinted failure
/// tripped, it opens for the hint; if the plain one tripped, it opened for
/// the hint (it read the slot after the store), or the hint, stored too late
/// for it, is still in the slot and lengthens the next trip. Exactly one trip
/// of the two takes it.
fn a_hint_racing_a_trip(spawned_first: bool) {
    let (b, _log, [hinted, plain]) = two_calls(1);
    let other = thread::spawn(move || {
        go_second(spawned_first);
        hinted.record_hinted_at(Outcome::Failure, Some(HINT), secs(0))
    });
    let mine = plain.failure_at(secs(0));
    let theirs = other.join().unwrap();

    assert_eq!(
        [&mine, &theirs].iter().filter(|t| t.is_some()).count(),
        1,
        "one trip: {mine:?} {theirs:?}"
    );
    let first = open_for(&b, secs(0));
    let at = secs(1);
    assert!(b.reset_at(at).is_some());
    let _ = b.try_acquire_at(at).unwrap().failure_at(at);
    let next = open_for(&b, at);
    let lengthened = |d: Duration| d > OPEN;
    assert!(
        lengthened(first) != lengthened(next),
        "the hint lengthens exactly one trip: {first:?} then {next:?} \
         (hinted tripped: {})",
        theirs.is_some()
    );
    if theirs.is_some() {
        assert!(first >= HINT, "the hinted failure's own trip: {first:?}");
    }
}

#[test]
fn a_hint_racing_a_trip_is_never_lost() {
    both_orders(a_hint_racing_a_trip);
}
