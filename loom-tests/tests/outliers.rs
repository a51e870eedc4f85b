//! An outlier ejection's bookkeeping (issue 28): a pooled breaker that its
//! pool finds an outlier reserves a place under the pool's ejection cap
//! (`ejected`, one read-modify-write), writes its ejection mark (the OPEN
//! generation it is about to enter) and then trips. Whatever moves the
//! breaker out of that generation (a reset, a probe, a forced open) finds
//! the mark, clears it with one compare-exchange and gives the place back;
//! an ejection whose trip loses takes its own mark back the same way. So
//! the place is given back exactly once, whoever gets there first.
//!
//! The set-up, sequential: a registry whose pool ejects on the failure
//! percentage (threshold 50 %, one call and one host enough, enforced
//! 100 %), intervals of 1 ms. Host 1 fails its one call of interval 0 and
//! of interval 1; host 2 succeeds in interval 1, and its first call of
//! interval 2 seals interval 0 and caches its figures (one host with the
//! volume: the rule is on). Host 1's first admission of interval 2 then
//! rolls its tally and ejects it (its interval 1: 100 % failures), without
//! sealing anything in the race; whether it ejected is read from the pool's
//! count of enforced ejections. The breakers never trip by themselves.
//!
//! After each race, the pool's counts must match the breaker: `ejected`
//! and `unhealthy` are 1 exactly when host 1 is Open, and once host 1 is
//! removed and dropped (its `Drop` gives back the place of an ejection it
//! still holds) both are 0: a place leaked or given back twice (an
//! underflow) fails the model.
#![cfg(failfast_loom)]

use std::sync::Mutex;
use std::time::Duration;

use failfast::{
    Breaker, Handle, ManualClock, Nanos, OutlierPoolSnapshot, OutlierRule, Outliers, Registry,
    State, Transition,
};
use failfast_loom_tests::{both_orders, go_second};
use loom::sync::Arc;
use loom::thread;

type Reg = Registry<u64, std::collections::hash_map::RandomState, ManualClock>;
type H = Handle<u64, ManualClock>;

/// Interval `k`'s start (intervals of 1 ms).
const fn interval(k: u64) -> Nanos {
    Nanos::from_millis(k)
}

/// A registry of one pool ejecting by the failure percentage alone.
fn registry() -> Arc<Reg> {
    registry_capped(10)
}

/// The same, at most `percent` % of the pool ejected (at least one host).
/// Envoy's preset: one failed call is enough, with no evidence asked.
fn registry_capped(percent: u8) -> Arc<Reg> {
    let template = Breaker::builder()
        .consecutive_failures(30_000)
        .open_duration(Duration::from_secs(10));
    let outliers = Outliers::envoy()
        .max_ejection_percent(percent)
        .interval(Duration::from_millis(1))
        .failure_percentage_threshold(50)
        .failure_percentage_request_volume(1)
        .failure_percentage_minimum_hosts(1)
        .enforcing_failure_percentage(100)
        .panic_threshold(0);
    let r = Registry::<u64>::builder(template)
        .shards(1)
        .outliers(outliers)
        .build_with_clock(ManualClock::new())
        .expect("valid registry");
    Arc::new(r)
}

/// One call of `h` at `at`, failed or not; the transition it caused.
fn call(h: &H, at: Nanos, failure: bool) -> Option<Transition> {
    let permit = h.try_acquire_at(at).expect("closed: admitted");
    if failure {
        permit.failure_at(at)
    } else {
        permit.success_at(at)
    }
}

/// The set-up (see the module's docs): the registry and host 1, whose next
/// verdict in interval 2 ejects it.
fn set_up() -> (Arc<Reg>, H) {
    let r = registry();
    let (one, two) = (r.handle_at(&1, interval(0)), r.handle_at(&2, interval(0)));
    assert_eq!(call(&one, interval(0), true), None);
    assert_eq!(call(&one, interval(1), true), None, "nothing to judge by");
    assert_eq!(call(&two, interval(1), false), None);
    assert_eq!(call(&two, interval(2), false), None, "host 2 is no outlier");
    (r, one)
}

/// How a race ended, over every execution of a model: host 1 Open (the
/// ejection came last), Closed after its ejection (the other side came
/// after the trip), Closed with no ejection (the trip lost). A std `Mutex`
/// outside the model: each case must be seen, or the model explored too
/// little to prove anything.
type Cases = Mutex<[bool; 3]>;

/// Records the case of one execution.
fn saw(cases: &Cases, one: &H, ejected: bool) {
    let case = match (one.state(), ejected) {
        (State::Open, _) => 0,
        (_, true) => 1,
        (_, false) => 2,
    };
    cases.lock().unwrap_or_else(|e| e.into_inner())[case] = true;
}

/// Every case was seen.
fn all_seen(cases: &Cases) {
    let seen = *cases.lock().unwrap_or_else(|e| e.into_inner());
    assert_eq!(
        seen, [true; 3],
        "Open; Closed after an ejection; Closed, none"
    );
}

/// The pool's numbers.
fn pool(r: &Reg) -> OutlierPoolSnapshot {
    let pools = r.outlier_pools();
    assert_eq!(pools.len(), 1);
    pools[0].clone()
}

/// Host 1's admission at interval 2, on another thread: it rolls host 1's
/// interval and ejects it (the call itself runs, and ends ignored). Whether
/// the ejection tripped: the pool's count of enforced ejections.
fn ejector(one: &H, spawned_first: bool) -> thread::JoinHandle<()> {
    let one = one.clone();
    thread::spawn(move || {
        go_second(spawned_first);
        if let Ok(permit) = one.try_acquire_at(interval(2)) {
            permit.ignore_at(interval(2));
        }
    })
}

/// Whether the ejection tripped host 1.
fn ejected(r: &Reg) -> bool {
    pool(r).enforced(OutlierRule::FailurePercentage) == 1
}

/// After a race: the pool's counts match host 1's state, and its ejection
/// count matches the ejections that tripped. Then host 1 leaves the
/// registry and is dropped: every count is back to host 2's alone.
fn check_books(r: Arc<Reg>, one: H, ejections: u64) {
    let open = one.state() == State::Open;
    let p = pool(&r);
    assert_eq!(
        (p.members, p.ejected, p.unhealthy),
        (2, u64::from(open), u64::from(open)),
        "host 1 {:?}: {p:?}",
        one.state()
    );
    assert_eq!(p.enforced(OutlierRule::FailurePercentage), ejections);
    assert!(r.remove_at(&1, interval(2)));
    drop(one);
    let p = pool(&r);
    assert_eq!(
        (p.members, p.ejected, p.unhealthy),
        (1, 0, 0),
        "host 1 gone: {p:?}"
    );
}

/// Host 1's ejecting admission (at interval 2, on another thread)
/// races a reset of host 1 (× 2 orders). The reset came after the trip (it
/// gives the place back: Closed), before the ejection read the word (the
/// ejection trips the reset breaker: Open, ejected), or in between (the
/// ejection's trip loses and it takes its place back: Closed, no
/// ejection). In each, `ejected` is 1 exactly while host 1 is Open.
///
/// Bug: `mark-after-trip` (the mark written after the trip: a reset in
/// between finds no mark, and the mark written after it holds the place
/// for a generation already over).
fn ejection_races_a_reset(spawned_first: bool) {
    let (r, one) = set_up();
    let ejector = ejector(&one, spawned_first);
    let reset = one.reset_at(interval(2)).expect("a reset is a transition");
    ejector.join().unwrap();
    let ejection = ejected(&r);

    assert_eq!(reset.to, State::Closed);
    if one.state() == State::Open {
        assert!(ejection, "only the ejection opens host 1");
        assert_eq!(reset.from, State::Closed, "the reset came first");
    }
    saw(&RESET, &one, ejection);
    check_books(r, one, u64::from(ejection));
}

#[test]
fn an_ejection_racing_a_reset_gives_its_place_back_once() {
    both_orders(ejection_races_a_reset);
    all_seen(&RESET);
}

static RESET: Cases = Mutex::new([false; 3]);

/// Host 1's ejecting admission (on another thread) races a forced open and
/// then a reset of host 1 (× 2 orders). A forced open that lands between
/// the ejection's mark and its trip takes the generation the mark names,
/// so the ejection's own take-back and the reset's look for the same mark:
/// exactly one of the two compare-exchanges clears it and gives the place
/// back. Host 1 ends Closed (the reset was last) or Open (the ejection
/// tripped after the reset), and `ejected` is 1 exactly while it is Open.
///
/// Bugs: `release-without-cas` (the take-back a load and a store: both give
/// the place back, and `ejected` wraps below 0), `mark-after-trip`.
fn ejection_races_a_forced_open_and_a_reset(spawned_first: bool) {
    let (r, one) = set_up();
    let ejector = ejector(&one, spawned_first);
    let forced = one.force_open_at(interval(2)).expect("a transition");
    let reset = one.reset_at(interval(2)).expect("a transition");
    ejector.join().unwrap();
    let ejection = ejected(&r);

    assert_eq!(
        (forced.to, reset.from, reset.to),
        (State::ForcedOpen, State::ForcedOpen, State::Closed)
    );
    if one.state() == State::Open {
        assert!(ejection, "only the ejection opens host 1");
        assert_eq!(forced.from, State::Closed, "the ejection came last");
    }
    saw(&FORCED, &one, ejection);
    check_books(r, one, u64::from(ejection));
}

#[test]
fn an_ejection_racing_a_forced_open_gives_its_place_back_once() {
    both_orders(ejection_races_a_forced_open_and_a_reset);
    all_seen(&FORCED);
}

static FORCED: Cases = Mutex::new([false; 3]);

/// Host 1 ejected at interval 2 (its ejecting call failed, so its tally of
/// interval 2 is an outlier's again), at most every host ejected at once.
/// Then, at interval 3, a reset of host 1 races host 1's admission on
/// another thread (× 2 orders). The reset moves the word to Closed and then
/// ends the ejection in the mark; an admission that finds the word Closed
/// in between rolls the tally and ejects host 1 again while the first
/// ejection's end is still on its way. Its mark's CAS then replaces a mark
/// that still names the first ejection: it gives that place back itself,
/// and the reset's CAS finds the mark changed. Either way each ejection's
/// place is given back once, and the second ejection is the host's second
/// in a row: 60 s of Envoy's ejection time.
///
/// Bug: `eject-stores-mark` (the mark set by a plain store: the first
/// ejection's place is never given back).
fn a_re_ejection_races_the_end_of_the_last(spawned_first: bool) {
    let r = registry_capped(100);
    let (one, two) = (r.handle_at(&1, interval(0)), r.handle_at(&2, interval(0)));
    assert_eq!(call(&one, interval(0), true), None);
    assert_eq!(call(&one, interval(1), true), None);
    assert_eq!(call(&two, interval(1), false), None);
    assert_eq!(call(&two, interval(2), false), None);
    // The ejecting admission runs, and fails: interval 2 is 100 % failures.
    let permit = one
        .try_acquire_at(interval(2))
        .expect("admitted, then ejected");
    let _ = permit.failure_at(interval(2));
    assert_eq!(one.state(), State::Open);
    let caller = {
        let one = one.clone();
        thread::spawn(move || {
            go_second(spawned_first);
            if let Ok(permit) = one.try_acquire_at(interval(3)) {
                permit.ignore_at(interval(3));
            }
        })
    };
    let reset = one.reset_at(interval(3)).expect("a reset is a transition");
    caller.join().unwrap();
    assert_eq!(reset.from, State::Open);
    let p = pool(&r);
    let open = one.state() == State::Open;
    assert_eq!(
        p.enforced(OutlierRule::FailurePercentage),
        1 + u64::from(open),
        "{p:?}"
    );
    if open {
        let wait = one.try_acquire_at(interval(3)).unwrap_err().retry_after();
        assert_eq!(
            wait.map(|d| d.as_secs()),
            Some(60),
            "the second ejection in a row"
        );
    }
    assert_eq!(
        (p.ejected, p.unhealthy),
        (u64::from(open), u64::from(open)),
        "{p:?}"
    );
    let case = usize::from(open);
    REEJECT.lock().unwrap_or_else(|e| e.into_inner())[case] = true;
    assert!(r.remove_at(&1, interval(3)));
    drop(one);
    let p = pool(&r);
    assert_eq!((p.members, p.ejected, p.unhealthy), (1, 0, 0), "{p:?}");
}

#[test]
fn a_re_ejection_racing_the_end_of_the_last_gives_each_place_back_once() {
    both_orders(a_re_ejection_races_the_end_of_the_last);
    let seen = *REEJECT.lock().unwrap_or_else(|e| e.into_inner());
    assert_eq!(seen, [true; 2], "Closed after the reset; ejected again");
}

static REEJECT: Mutex<[bool; 2]> = Mutex::new([false; 2]);
