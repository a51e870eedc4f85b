//! The registry's fleet-wide cap on ejected (Open or HalfOpen) breakers, one
//! step at a time: a slot is taken by the trip of an upstream seen
//! succeeding, kept through the probe round, and given back when the breaker
//! closes or leaves the ejected states by hand. (The races on the cap are
//! loom models: loom-tests/tests/fleet_cap.rs.) Every handle here is a real
//! upstream: its first call succeeds (see `handle`).

use std::time::Duration;

use failfast::{Breaker, Handle, ManualClock, MaxOpen, Nanos, Registry, State};

const OPEN: Duration = Duration::from_secs(10);

fn secs(s: u64) -> Nanos {
    Nanos::from_secs(s)
}

fn registry(
    max_open: MaxOpen,
) -> Registry<u64, std::collections::hash_map::RandomState, ManualClock> {
    Registry::<u64>::builder(
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(OPEN)
            .backoff(1.0, OPEN),
    )
    .max_open(max_open)
    .build_with_clock(ManualClock::new())
    .unwrap()
}

/// A real upstream's handle: seen succeeding once, so the cap counts it.
fn handle(
    r: &Registry<u64, std::collections::hash_map::RandomState, ManualClock>,
    key: u64,
    at: Nanos,
) -> Handle<u64, ManualClock> {
    let h = r.handle_at(&key, at);
    h.try_acquire_at(at).unwrap().success_at(at);
    h
}

/// One failure at `at`: whether it tripped the breaker.
fn fail(h: &Handle<u64, ManualClock>, at: Nanos) -> bool {
    h.try_acquire_at(at).unwrap().failure_at(at).is_some()
}

/// The probe at `at` reports `success`; the state it leads to.
fn probe(h: &Handle<u64, ManualClock>, at: Nanos, success: bool) -> State {
    let p = h.try_acquire_at(at).unwrap();
    assert!(p.is_probe());
    let t = if success {
        p.success_at(at)
    } else {
        p.failure_at(at)
    };
    t.expect("one probe decides the round").to
}

#[test]
fn a_recovered_breaker_frees_its_slot_for_another() {
    let r = registry(MaxOpen::Count(1));
    let (a, b) = (handle(&r, 1, secs(0)), handle(&r, 2, secs(0)));
    assert!(fail(&a, secs(0)));
    assert!(!fail(&b, secs(0)), "over the cap: refused");
    assert_eq!((b.state(), r.refused_trips()), (State::Closed, 1));

    assert_eq!(probe(&a, secs(10), true), State::Closed);
    assert_eq!((r.open_count(), r.half_open_count()), (0, 0));
    assert!(fail(&b, secs(10)), "A's slot is free again");
    assert_eq!(
        (b.state(), r.open_count(), r.refused_trips()),
        (State::Open, 1, 1)
    );
}

#[test]
fn a_breaker_keeps_its_slot_through_its_probe_rounds() {
    let r = registry(MaxOpen::Count(1));
    let (a, b) = (handle(&r, 1, secs(0)), handle(&r, 2, secs(0)));
    assert!(fail(&a, secs(0)));
    let p = a.try_acquire_at(secs(10)).unwrap();
    assert_eq!((r.open_count(), r.half_open_count()), (0, 1));
    assert!(!fail(&b, secs(10)), "a half-open breaker is still ejected");
    assert_eq!(p.failure_at(secs(10)).unwrap().to, State::Open);
    assert!(!fail(&b, secs(10)), "reopened: still ejected");
    assert_eq!(
        (r.open_count(), r.half_open_count(), r.refused_trips()),
        (1, 0, 2)
    );
}

#[test]
fn leaving_the_ejected_states_by_hand_frees_the_slot() {
    let r = registry(MaxOpen::Count(1));
    let (a, b) = (handle(&r, 1, secs(0)), handle(&r, 2, secs(0)));
    assert!(fail(&a, secs(0)));
    a.force_open_at(secs(1)).unwrap();
    assert_eq!((r.open_count(), r.count_in(State::ForcedOpen)), (0, 1));
    assert!(
        fail(&b, secs(1)),
        "a forced-open breaker is not counted against the cap"
    );
    b.reset_at(secs(2)).unwrap();
    assert_eq!(r.count_in(State::Closed), 1);
    let c = handle(&r, 3, secs(2));
    assert!(fail(&c, secs(2)), "the reset breaker gave its slot back");
    assert_eq!((r.open_count(), r.refused_trips()), (1, 0));
}

#[test]
fn a_shadow_trip_takes_no_slot() {
    let r = registry(MaxOpen::Count(1));
    let (a, b) = (handle(&r, 1, secs(0)), handle(&r, 2, secs(0)));
    a.metrics_only_at(secs(0)).unwrap();
    let t = a
        .try_acquire_at(secs(0))
        .unwrap()
        .failure_at(secs(0))
        .unwrap();
    assert_eq!((t.from, t.to), (State::MetricsOnly, State::MetricsOnly));
    assert!(fail(&b, secs(0)), "the shadow trip reserved nothing");
    assert_eq!(
        (
            r.open_count(),
            r.count_in(State::MetricsOnly),
            r.refused_trips()
        ),
        (1, 1, 0)
    );
}

#[test]
fn counts_per_state_follow_every_transition() {
    let r = registry(MaxOpen::Unlimited);
    let a = handle(&r, 1, secs(0));
    let _b = handle(&r, 2, secs(0));
    let counts = |r: &Registry<u64, _, ManualClock>| State::all().map(|s| r.count_in(s));
    // Closed, Open, HalfOpen, ForcedOpen, Disabled, MetricsOnly
    assert_eq!(counts(&r), [2, 0, 0, 0, 0, 0]);
    assert!(fail(&a, secs(0)));
    assert_eq!(counts(&r), [1, 1, 0, 0, 0, 0]);
    let p = a.try_acquire_at(secs(10)).unwrap();
    assert_eq!(counts(&r), [1, 0, 1, 0, 0, 0]);
    drop(p);
    a.disable_at(secs(10)).unwrap();
    assert_eq!(counts(&r), [1, 0, 0, 0, 1, 0]);
    a.reset_at(secs(10)).unwrap();
    assert_eq!(counts(&r), [2, 0, 0, 0, 0, 0]);
    a.reset_at(secs(10)).unwrap(); // Closed -> Closed: no move between counts
    assert_eq!(counts(&r), [2, 0, 0, 0, 0, 0]);
    assert_eq!(r.len(), 2);
}

#[test]
fn a_fractional_cap_is_at_least_one_and_follows_the_tracked_count() {
    let r = registry(MaxOpen::Fraction(0.5));
    let a = handle(&r, 1, secs(0));
    assert!(
        fail(&a, secs(0)),
        "half of one tracked breaker still allows one"
    );
    let b = handle(&r, 2, secs(0));
    assert!(!fail(&b, secs(0)), "half of two is one, taken");
    let hs: Vec<_> = (3..=4).map(|k| handle(&r, k, secs(0))).collect();
    assert!(fail(&b, secs(0)), "half of four is two");
    assert!(!fail(&hs[0], secs(0)));
    assert_eq!((r.open_count(), r.refused_trips()), (2, 2));
}

#[test]
fn unlimited_never_refuses() {
    let r = registry(MaxOpen::Unlimited);
    let hs: Vec<_> = (0..64).map(|k| handle(&r, k, secs(0))).collect();
    assert!(hs.iter().all(|h| fail(h, secs(0))));
    assert_eq!((r.open_count(), r.refused_trips()), (64, 0));
}
