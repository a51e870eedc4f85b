//! The core protocol models, run at `LOOM_MAX_PREEMPTIONS=3` in CI (the
//! `protocol_` prefix is the filter): probe election, the trip race, and stale
//! verdicts.
#![cfg(failfast_loom)]

use failfast::{OwnedPermit, Reason, RejectReason, State};
use failfast_loom_tests::{
    base, both_orders, build, go_second, secs, seen, take_and_hold, trip, Seen, OPEN,
};
use loom::thread;

/// Invariants 1 and 2: after the open time, three racers (this thread and two
/// spawned) ask at once; exactly one wins the OPEN → HALF_OPEN CAS and is the
/// probe, the others are turned away with `HalfOpenFull`; one transition is
/// reported.
#[test]
fn protocol_probe_election_one_winner_among_three() {
    loom::model(|| {
        let (b, log) = build(base().consecutive_failures(1));
        trip(&b, secs(0));
        let ready = secs(0) + OPEN;
        let racers: Vec<_> = (0..2)
            .map(|_| {
                let b = b.clone();
                thread::spawn(move || take_and_hold(&b, ready))
            })
            .collect();
        let mut results = vec![take_and_hold(&b, ready)];
        results.extend(racers.into_iter().map(|h| h.join().unwrap()));

        let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners, [&(true, 2)], "exactly one probe, of generation 2");
        for r in results.iter().filter_map(|r| r.as_ref().err()) {
            assert_eq!(r.reason(), RejectReason::HalfOpenFull);
            assert_eq!(
                r.retry_after(),
                Some(OPEN),
                "the lease (= open time) is left"
            );
        }
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
    });
}

/// Invariant 2, second half: with P = 2 probe slots, three racers get exactly
/// two probes (the slot count is a CAS from an exact snapshot, never a
/// load-then-store).
#[test]
fn protocol_probe_election_two_slots_among_three() {
    loom::model(|| {
        let (b, log) = build(base().consecutive_failures(1).half_open_probes(2));
        trip(&b, secs(0));
        let ready = secs(0) + OPEN;
        let racers: Vec<_> = (0..2)
            .map(|_| {
                let b = b.clone();
                thread::spawn(move || take_and_hold(&b, ready))
            })
            .collect();
        let mut results = vec![take_and_hold(&b, ready)];
        results.extend(racers.into_iter().map(|h| h.join().unwrap()));

        let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 2, "{results:?}");
        assert!(winners.iter().all(|w| **w == (true, 2)), "{results:?}");
        assert_eq!(b.state(), State::HalfOpen);
        assert_eq!(seen(&log).len(), 2, "one trip, one election");
    });
}

/// Invariant 1: two threads each report a failure; with
/// `consecutive_failures(2)` the second one trips. Whatever the interleaving,
/// exactly one verdict returns the transition, the observer fires once and the
/// generation moves by exactly one.
#[test]
fn protocol_trip_race_consecutive() {
    loom::model(|| {
        let (b, log) = build(base().consecutive_failures(2));
        let other = {
            let b = b.clone();
            thread::spawn(move || {
                let p = b.try_acquire_at(secs(1)).expect("closed until both failed");
                p.failure_at(secs(1))
            })
        };
        let p = b.try_acquire_at(secs(1)).expect("closed until both failed");
        let mine = p.failure_at(secs(1));
        let theirs = other.join().unwrap();

        assert_eq!(
            usize::from(mine.is_some()) + usize::from(theirs.is_some()),
            1,
            "exactly one verdict reports the trip: {mine:?} {theirs:?}"
        );
        let t = mine.or(theirs).unwrap();
        assert_eq!(t.consecutive_failures, 2);
        assert_eq!(
            seen(&log),
            [Seen::new(
                State::Closed,
                State::Open,
                Reason::ConsecutiveFailures,
                1
            )]
        );
        let snap = b.snapshot_at(secs(1));
        assert_eq!(
            (snap.state, snap.generation, snap.trips_in_a_row),
            (State::Open, 1, 1)
        );
    });
}

/// Invariant 1 through the window: a failure-rate trip where both failing
/// threads may see the threshold reached and both try the CLOSED → OPEN CAS
/// from generation 0; one wins, one transition is reported.
#[test]
fn protocol_trip_race_window() {
    loom::model(|| {
        let (b, log) = build(base().failure_rate(0.5).count_window(2).min_calls(2));
        let other = {
            let b = b.clone();
            thread::spawn(move || {
                let p = b.try_acquire_at(secs(1)).expect("closed until both failed");
                p.failure_at(secs(1))
            })
        };
        let p = b.try_acquire_at(secs(1)).expect("closed until both failed");
        let mine = p.failure_at(secs(1));
        let theirs = other.join().unwrap();

        assert_eq!(
            usize::from(mine.is_some()) + usize::from(theirs.is_some()),
            1,
            "exactly one verdict reports the trip: {mine:?} {theirs:?}"
        );
        assert_eq!(
            seen(&log),
            [Seen::new(
                State::Closed,
                State::Open,
                Reason::FailureRate,
                1
            )]
        );
        assert_eq!(
            (b.state(), b.snapshot_at(secs(1)).generation),
            (State::Open, 1)
        );
    });
}

/// Invariant 4: a call admitted while CLOSED (generation 0) is still in flight
/// when the breaker trips; meanwhile this thread probes and closes it again
/// (generation 3). The old call's failure, wherever it lands (generation 1, 2
/// or 3), changes nothing: it returns `None`, and in particular it cannot
/// re-trip the new CLOSED period (with `consecutive_failures(1)` it would).
///
/// Run in both orders (see [`both_orders`]): loom's DPOR would otherwise
/// never move the late verdict's load after the prober's writes.
#[test]
fn protocol_stale_verdict_after_trip() {
    both_orders(|spawned_first| {
        let (b, log) = build(base().consecutive_failures(1));
        let stale = OwnedPermit::acquire_at(b.clone(), secs(0)).expect("closed");
        trip(&b, secs(0)); // generation 1, with `stale` still in flight
        let ready = secs(0) + OPEN;
        let late = thread::spawn(move || stale.failure_at(ready));
        go_second(spawned_first);
        let probe = b.try_acquire_at(ready).expect("open time over: probe");
        assert!(probe.is_probe());
        let closed = probe.success_at(ready).expect("the probe closes");
        assert_eq!((closed.to, closed.generation), (State::Closed, 3));
        let late = late.join().unwrap();

        assert!(late.is_none(), "a stale verdict reported {late:?}");
        let snap = b.snapshot_at(ready);
        assert_eq!((snap.state, snap.generation), (State::Closed, 3));
        assert_eq!(
            snap.consecutive_failures, 0,
            "the stale failure was not counted"
        );
        assert_eq!(seen(&log).len(), 3);
    });
}

/// Invariants 4 and 5: a probe of round g outlives its lease; another thread
/// starts round g+1 lazily. The late probe's success either lands first (then
/// it legitimately closes round g, and the other thread is admitted into
/// CLOSED, not as a probe) or it lands after and changes nothing: it can never
/// close the newer round.
#[test]
fn protocol_stale_probe_verdict_after_lease() {
    both_orders(|spawned_first| {
        let lease = std::time::Duration::from_secs(1);
        let (b, log) = build(base().consecutive_failures(1).probe_lease(lease));
        trip(&b, secs(0));
        let ready = secs(0) + OPEN;
        let old = b.try_acquire_at(ready).expect("probe of round 2");
        assert!(old.is_probe());
        let expired = ready + lease;
        let newer = {
            let b = b.clone();
            thread::spawn(move || take_and_hold(&b, expired))
        };
        go_second(spawned_first);
        let late = old.success_at(expired);
        let newer = newer.join().unwrap().expect("admitted either way");

        let snap = b.snapshot_at(expired);
        match late {
            Some(t) => {
                // The old round was still current: it closed (generation 3)
                // and the other thread came in as an ordinary call.
                assert_eq!((t.to, t.generation), (State::Closed, 3));
                assert_eq!(newer, (false, 3));
                assert_eq!((snap.state, snap.generation), (State::Closed, 3));
            }
            None => {
                // The lease expiry won: round 3 is open and the late success
                // did not close it.
                assert_eq!(newer, (true, 3));
                assert_eq!((snap.state, snap.generation), (State::HalfOpen, 3));
                assert_eq!(
                    seen(&log)[2..],
                    [Seen::new(
                        State::HalfOpen,
                        State::HalfOpen,
                        Reason::ProbeLeaseExpired,
                        3
                    )]
                );
            }
        }
        assert_eq!(seen(&log).len(), 3);
    });
}
