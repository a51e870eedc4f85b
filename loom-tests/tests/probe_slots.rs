//! Invariant 5 (no wedge): a probe permit dropped without a verdict frees its
//! slot for exactly one successor, and an expired round is superseded by
//! exactly one new round.
#![cfg(failfast_loom)]

use failfast::{Reason, RejectReason, State};
use failfast_loom_tests::{base, build, secs, seen, take_and_hold, trip, Seen, OPEN};
use loom::thread;

/// P = 1. This thread holds the round's only probe, drops it, then asks
/// again; two other threads ask at the same time. Every interleaving admits
/// exactly one of the three (the freed slot goes to one successor), as a
/// probe of the same round; the others are told the round is full.
#[test]
fn dropped_probe_frees_its_slot_for_exactly_one_successor() {
    loom::model(|| {
        let (b, log) = build(base().consecutive_failures(1));
        trip(&b, secs(0));
        let ready = secs(0) + OPEN;
        let probe = b.try_acquire_at(ready).expect("probe");
        let others: Vec<_> = (0..2)
            .map(|_| {
                let b = b.clone();
                thread::spawn(move || take_and_hold(&b, ready))
            })
            .collect();
        drop(probe); // no verdict: ignored, slot freed
        let mut results = vec![take_and_hold(&b, ready)];
        results.extend(others.into_iter().map(|h| h.join().unwrap()));

        let admitted: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(
            admitted,
            [&(true, 2)],
            "one successor, same round: {results:?}"
        );
        for r in results.iter().filter_map(|r| r.as_ref().err()) {
            assert_eq!(r.reason(), RejectReason::HalfOpenFull);
        }
        assert_eq!(b.state(), State::HalfOpen);
        assert_eq!(seen(&log).len(), 2, "dropping a probe is not a transition");
    });
}

/// A probe hangs past its lease; two threads arrive after the lease. Exactly
/// one starts the new round (one `ProbeLeaseExpired` transition) and probes;
/// the other is turned away.
#[test]
fn expired_round_is_superseded_once() {
    loom::model(|| {
        let lease = std::time::Duration::from_secs(2);
        let (b, log) = build(base().consecutive_failures(1).probe_lease(lease));
        trip(&b, secs(0));
        let ready = secs(0) + OPEN;
        assert_eq!(take_and_hold(&b, ready), Ok((true, 2))); // hangs forever
        let after = ready + lease;
        let other = {
            let b = b.clone();
            thread::spawn(move || take_and_hold(&b, after))
        };
        let results = [take_and_hold(&b, after), other.join().unwrap()];

        let admitted: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(admitted, [&(true, 3)], "{results:?}");
        assert_eq!(
            seen(&log)[2..],
            [Seen::new(
                State::HalfOpen,
                State::HalfOpen,
                Reason::ProbeLeaseExpired,
                3
            )]
        );
    });
}
