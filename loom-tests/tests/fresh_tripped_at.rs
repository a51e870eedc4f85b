//! Invariants 2 and 3: a reader that sees OPEN never pairs it with an older
//! trip's `tripped_at`, so it never probes early.
#![cfg(failfast_loom)]

use std::time::Duration;

use failfast::{Reason, RejectReason, State};
use failfast_loom_tests::{base, both_orders, build, go_second, secs, seen, trip_and_probe, Seen};
use loom::thread;

/// The breaker tripped at 0 s and closed again at 10 s (its `tripped_at` now
/// holds 10 s). This thread trips it anew at 100 s while thread B asks at
/// 105 s: after every *old* deadline (10 s, 20 s) but before the new one
/// (110 s). B must see CLOSED (and be admitted as an ordinary call) or see
/// OPEN and be rejected with exactly 5 s to wait — never be admitted as an
/// early probe of the new open period.
/// Run in both orders (see `both_orders`).
#[test]
fn fresh_tripped_at_no_early_probe() {
    both_orders(|spawned_first| {
        let (b, log) = build(base().consecutive_failures(1));
        assert_eq!(trip_and_probe(&b, secs(0), true), State::Closed); // generation 3
        let reader = {
            let b = b.clone();
            thread::spawn(move || match b.try_acquire_at(secs(105)) {
                Ok(p) => Ok((p.is_probe(), p.generation())),
                Err(r) => Err((r.reason(), r.retry_after())),
            })
        };
        go_second(spawned_first);
        let p = b.try_acquire_at(secs(100)).expect("closed");
        assert_eq!(p.failure_at(secs(100)).expect("trips").generation, 4);
        match reader.join().unwrap() {
            Ok(got) => assert_eq!(
                got,
                (false, 3),
                "admitted only as a call of the closed state"
            ),
            Err(got) => assert_eq!(got, (RejectReason::Open, Some(Duration::from_secs(5)))),
        }
        assert_eq!(b.state(), State::Open);
        assert_eq!(
            seen(&log)[3..],
            [Seen::new(
                State::Closed,
                State::Open,
                Reason::ConsecutiveFailures,
                4
            )]
        );
    });
}

/// A reader two transitions behind: it loaded OPEN (generation 1, tripped at
/// 0 s, open 10 s) while this thread won the probe at 10 s and failed it
/// (generation 3, open for the doubled 20 s from 10 s). Whatever it read, the
/// reader's answer must belong to one state the breaker was in: the probe of
/// generation 2 (it won the election), "round full" (lease = 10 s left), or
/// "open, 20 s left" (generation 3) — never generation 3's stamp paired with
/// generation 1's duration (that would say "open, 10 s left"). And exactly one
/// of the two threads probes: this thread's own admission is checked too.
#[test]
fn stale_reader_two_transitions_behind() {
    both_orders(|spawned_first| {
        let (b, _log) = build(
            failfast::Breaker::builder()
                .consecutive_failures(1)
                .open_duration(failfast_loom_tests::OPEN)
                .backoff(2.0, Duration::from_secs(40))
                .probe_lease(failfast_loom_tests::OPEN),
        );
        failfast_loom_tests::trip(&b, secs(0));
        let reader = {
            let b = b.clone();
            thread::spawn(move || failfast_loom_tests::take_and_hold(&b, secs(10)))
        };
        go_second(spawned_first);
        let probed = match b.try_acquire_at(secs(10)) {
            Ok(p) => {
                assert_eq!((p.is_probe(), p.generation()), (true, 2));
                let t = p.failure_at(secs(10)).expect("the probe's failure reopens");
                assert_eq!((t.to, t.generation), (State::Open, 3));
                true
            }
            Err(r) => {
                // The reader won the election and holds the round's only slot.
                let got = (r.reason(), r.retry_after());
                assert_eq!(
                    got,
                    (RejectReason::HalfOpenFull, Some(Duration::from_secs(10)))
                );
                false
            }
        };
        let full = (RejectReason::HalfOpenFull, Some(Duration::from_secs(10)));
        let reopened = (RejectReason::Open, Some(Duration::from_secs(20)));
        match reader.join().unwrap() {
            Ok(got) => {
                assert!(!probed, "two probes in a round of one");
                assert_eq!(got, (true, 2));
                assert_eq!(b.state(), State::HalfOpen);
            }
            Err(r) => {
                // Exactly one of the two probes: a round where nobody probes
                // would wait out its lease with no verdict.
                assert!(probed, "nobody probed at the open deadline");
                let got = (r.reason(), r.retry_after());
                assert!(got == full || got == reopened, "{got:?}");
                assert_eq!(b.state(), State::Open);
            }
        }
    });
}
