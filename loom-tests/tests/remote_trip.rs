//! News from another replica ([`RemoteTrip`]) merged while local admissions
//! and verdicts race it on one breaker: the merge goes through the same
//! CAS protocol as every transition, so the core's invariants hold — one
//! winner per transition, one probe per round — and the news never closes,
//! half-opens or shortens anything, nor interrupts a local probe round.
#![cfg(failfast_loom)]

use std::time::Duration;

use failfast::{OwnedPermit, Reason, RejectReason, RemoteTrip, State};
use failfast_loom_tests::{base, both_orders, build, go_second, secs, seen, trip, Seen};
use loom::thread;

fn news(remaining_secs: u64) -> RemoteTrip {
    RemoteTrip::new(1, Duration::from_secs(remaining_secs), Reason::FailureRate)
}

/// Open since 0 s for 10 s. At 10 s a request arrives (the open period is
/// over: it may start a round) while news says 20 s are left elsewhere.
/// Either the news came first and extended the period (the request is
/// turned away, nobody probes), or the request started the round and
/// probes, and the news changed nothing: the round is local.
fn remote_news_races_the_election(spawned_first: bool) {
    let (b, log) = build(base().consecutive_failures(1));
    trip(&b, secs(0));
    let merger = {
        let b = b.clone();
        thread::spawn(move || {
            go_second(spawned_first);
            b.apply_remote_at(&news(20), secs(10))
        })
    };
    let asked = b.try_acquire_at(secs(10)).map(|p| {
        let probe = (p.is_probe(), p.generation());
        core::mem::forget(p);
        probe
    });
    let merged = merger.join().unwrap();
    match asked {
        Ok(probe) => {
            assert_eq!(probe, (true, 2), "the request probes round 2");
            assert!(merged.is_none(), "news does not touch a probe round");
            assert_eq!(b.state(), State::HalfOpen);
            assert_eq!(
                seen(&log)[1..],
                [Seen::new(
                    State::Open,
                    State::HalfOpen,
                    Reason::OpenElapsed,
                    2
                )]
            );
        }
        Err(r) => {
            assert_eq!(r.reason(), RejectReason::Open);
            assert!(r.retry_after() >= Some(Duration::from_secs(20)));
            assert_eq!(
                merged.map(|t| (t.from, t.to)),
                Some((State::Open, State::Open))
            );
            assert_eq!(
                seen(&log)[1..],
                [Seen::new(State::Open, State::Open, Reason::RemoteTrip, 2)]
            );
        }
    }
}

#[test]
fn protocol_remote_news_races_the_election() {
    both_orders(remote_news_races_the_election);
}

/// Closed: a local failure trips (consecutive 1) while news of a remote
/// trip arrives. Exactly one of them opens the breaker; the other finds it
/// open (the news then extends it only to a later end). Never two trips
/// from Closed.
fn remote_news_races_a_local_trip(spawned_first: bool) {
    let (b, log) = build(base().consecutive_failures(1));
    let permit = OwnedPermit::acquire_at(b.clone(), secs(1)).expect("closed");
    let merger = {
        let b = b.clone();
        thread::spawn(move || {
            go_second(spawned_first);
            b.apply_remote_at(&news(30), secs(1))
        })
    };
    let local = permit.failure_at(secs(1));
    let merged = merger.join().unwrap();
    let events = seen(&log);
    let from_closed = events.iter().filter(|e| e.from == State::Closed).count();
    assert_eq!(from_closed, 1, "one trip from Closed: {events:?}");
    assert_eq!(b.state(), State::Open);
    match (local, merged) {
        (Some(l), m) => {
            assert_eq!(l.reason, Reason::ConsecutiveFailures);
            // The news came second: it extends the 10 s period to 30 s.
            assert_eq!(m.map(|t| t.from), Some(State::Open));
        }
        (None, Some(m)) => {
            assert_eq!((m.from, m.reason), (State::Closed, Reason::RemoteTrip));
        }
        (None, None) => panic!("nobody tripped"),
    }
}

#[test]
fn protocol_remote_news_races_a_local_trip() {
    both_orders(remote_news_races_a_local_trip);
}

/// A registry capped at one open breaker, two upstreams both seen
/// succeeding: news opens one while a local failure trips the other. The
/// news asks the trip gate as a local trip does, so exactly one opens and
/// the other's trip is refused and counted, whichever reserves first.
fn remote_and_local_trips_against_a_cap_of_one(spawned_first: bool) {
    use failfast::{Breaker, Handle, ManualClock, MaxOpen, Nanos, Registry};

    type Reg = Registry<u64, std::collections::hash_map::RandomState, ManualClock>;
    let template = Breaker::builder().consecutive_failures(1);
    let r: Reg = Registry::<u64>::builder(template)
        .shards(1)
        .max_open(MaxOpen::Count(1))
        .build_with_clock(ManualClock::new())
        .expect("valid registry");
    let known = |key: u64| -> Handle<u64, ManualClock> {
        let h = r.handle_at(&key, Nanos::ZERO);
        let _ = h
            .try_acquire_at(Nanos::ZERO)
            .expect("closed")
            .success_at(Nanos::ZERO);
        h
    };
    let (remote, local) = (known(1), known(2));
    let merger = {
        let remote = remote.clone();
        thread::spawn(move || {
            go_second(spawned_first);
            remote.apply_remote_at(&news(30), secs(1))
        })
    };
    let tripped = local
        .try_acquire_at(secs(1))
        .expect("closed: admitted")
        .failure_at(secs(1));
    let merged = merger.join().unwrap();
    assert_eq!(
        usize::from(merged.is_some()) + usize::from(tripped.is_some()),
        1,
        "exactly one opens: remote {merged:?}, local {tripped:?}"
    );
    let states = (remote.state(), local.state());
    match (merged, tripped) {
        (Some(m), None) => {
            assert_eq!((m.from, m.reason), (State::Closed, Reason::RemoteTrip));
            assert_eq!(states, (State::Open, State::Closed));
        }
        (None, Some(t)) => {
            assert_eq!(t.reason, Reason::ConsecutiveFailures);
            assert_eq!(states, (State::Closed, State::Open));
        }
        _ => unreachable!(),
    }
    assert_eq!((r.open_count(), r.refused_trips()), (1, 1));
}

#[test]
fn remote_and_local_trips_against_a_cap_of_one_open_one() {
    both_orders(remote_and_local_trips_against_a_cap_of_one);
}
