//! The registry's fleet-wide cap on ejected (Open or HalfOpen) breakers.
//!
//! A trip from Closed of an upstream seen succeeding first reserves an
//! ejection slot with one atomic read-modify-write on the fleet's counter,
//! and is refused (the breaker stays Closed, the refusal is counted) when
//! none is left. The slot is given back when the trip's CAS loses, and when
//! the breaker closes again. Every upstream here has succeeded once (see
//! `known`): the cap counts only those.
#![cfg(failfast_loom)]

use failfast::{Breaker, Handle, ManualClock, MaxOpen, Nanos, Registry, State};
use failfast_loom_tests::{secs, OPEN};
use loom::sync::Arc;
use loom::thread;

type Reg = Registry<u64, std::collections::hash_map::RandomState, ManualClock>;

/// A registry of `consecutive_failures(1)` breakers open for [`OPEN`], with
/// at most `cap` of them ejected at once.
fn registry(cap: usize) -> Arc<Reg> {
    let template = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(OPEN)
        .backoff(1.0, OPEN);
    let r = Registry::<u64>::builder(template)
        .shards(1)
        .max_open(MaxOpen::Count(cap))
        .build_with_clock(ManualClock::new())
        .expect("valid registry");
    Arc::new(r)
}

/// The handle of `key`, an upstream seen succeeding (set-up, sequential).
fn known(r: &Reg, key: u64) -> Handle<u64, ManualClock> {
    let h = r.handle_at(&key, Nanos::ZERO);
    let _ = h
        .try_acquire_at(Nanos::ZERO)
        .expect("closed")
        .success_at(Nanos::ZERO);
    h
}

/// One failure through `h` at `at`; the transition it caused, if any.
fn fail(h: &Handle<u64, ManualClock>, at: Nanos) -> Option<failfast::Transition> {
    h.try_acquire_at(at)
        .expect("closed: admitted")
        .failure_at(at)
}

/// Cap 1: two breakers trip at once. The reservation is one atomic step, so
/// exactly one opens; the other stays Closed and its refusal is counted.
#[test]
fn two_trips_against_a_cap_of_one_open_one() {
    loom::model(|| {
        let r = registry(1);
        let (a, b) = (known(&r, 1), known(&r, 2));
        let other = {
            let a = a.clone();
            thread::spawn(move || fail(&a, secs(1)))
        };
        let mine = fail(&b, secs(1));
        let theirs = other.join().unwrap();

        assert_eq!(
            usize::from(mine.is_some()) + usize::from(theirs.is_some()),
            1,
            "exactly one trip: {mine:?} {theirs:?}"
        );
        let mut states = [a.state(), b.state()];
        states.sort_by_key(|s| s.as_str());
        assert_eq!(states, [State::Closed, State::Open]);
        assert_eq!(r.open_count(), 1);
        assert_eq!(r.refused_trips(), 1);
    });
}

/// Cap 2: two failures of one breaker race to trip it, so both may reserve a
/// slot and one trip's CAS loses. The loser gives its slot back: afterwards
/// a second breaker can still open (one slot left).
#[test]
fn a_lost_trip_gives_its_slot_back() {
    loom::model(|| {
        let r = registry(2);
        let a = known(&r, 1);
        let first = a.try_acquire_owned_at(secs(1)).expect("closed");
        let second = a.try_acquire_owned_at(secs(1)).expect("closed");
        let other = thread::spawn(move || first.failure_at(secs(1)));
        let mine = second.failure_at(secs(1));
        let theirs = other.join().unwrap();

        assert_eq!(
            usize::from(mine.is_some()) + usize::from(theirs.is_some()),
            1,
            "exactly one trip: {mine:?} {theirs:?}"
        );
        assert_eq!(
            (a.state(), r.open_count(), r.refused_trips()),
            (State::Open, 1, 0)
        );
        let c = known(&r, 2);
        assert!(fail(&c, secs(1)).is_some(), "one slot of two is free");
        assert_eq!((r.open_count(), r.refused_trips()), (2, 0));
    });
}

/// Cap 1, breaker A open. A's probe closes it while breaker B fails: B's
/// trip is refused only if it came before A's slot was released; either way,
/// once A is closed, B's next failure opens it (recovery under the cap).
#[test]
fn a_close_releases_the_slot_for_another_breaker() {
    loom::model(|| {
        let r = registry(1);
        let (a, b) = (known(&r, 1), known(&r, 2));
        assert!(fail(&a, secs(0)).is_some());
        let ready = secs(0) + OPEN;
        let prober = {
            let a = a.clone();
            thread::spawn(move || {
                let probe = a.try_acquire_at(ready).expect("open time over");
                assert!(probe.is_probe());
                probe.success_at(ready)
            })
        };
        let first_try = fail(&b, ready);
        let closed = prober.join().unwrap().expect("the probe closes A");
        assert_eq!(closed.to, State::Closed);

        let refused = u64::from(first_try.is_none());
        assert_eq!(r.refused_trips(), refused);
        if first_try.is_none() {
            assert_eq!(b.state(), State::Closed, "a refused trip stays Closed");
            assert!(fail(&b, ready).is_some(), "A's slot was released");
        }
        assert_eq!((a.state(), b.state()), (State::Closed, State::Open));
        assert_eq!((r.open_count(), r.half_open_count()), (1, 0));
        assert_eq!(r.refused_trips(), refused);
    });
}
