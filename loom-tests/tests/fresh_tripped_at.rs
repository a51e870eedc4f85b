//! Invariants 2 and 3: a reader that sees OPEN never pairs it with an older
//! trip's `tripped_at`, so it never probes early.
#![cfg(failfast_loom)]

use std::time::Duration;

use failfast::{Reason, RejectReason, State};
use failfast_loom_tests::{base, build, secs, seen, trip_and_probe, Seen};
use loom::thread;

/// The breaker tripped at 0 s and closed again at 10 s (its `tripped_at` now
/// holds 10 s). Thread A trips it anew at 100 s while this thread asks at
/// 105 s: after every *old* deadline (10 s, 20 s) but before the new one
/// (110 s). This thread must see CLOSED (and be admitted as an ordinary call)
/// or see OPEN and be rejected with exactly 5 s to wait — never be admitted
/// as an early probe of the new open period.
#[test]
fn fresh_tripped_at_no_early_probe() {
    loom::model(|| {
        let (b, log) = build(base().consecutive_failures(1));
        assert_eq!(trip_and_probe(&b, secs(0), true), State::Closed); // generation 3
        let tripper = {
            let b = b.clone();
            thread::spawn(move || {
                let p = b.try_acquire_at(secs(100)).expect("closed");
                p.failure_at(secs(100)).expect("trips").generation
            })
        };
        match b.try_acquire_at(secs(105)) {
            Ok(p) => {
                assert!(!p.is_probe(), "an early probe, 5 s before the open time");
                assert_eq!(p.generation(), 3, "admitted only while still closed");
            }
            Err(r) => {
                assert_eq!(r.reason(), RejectReason::Open);
                assert_eq!(r.retry_after(), Some(Duration::from_secs(5)));
            }
        }
        assert_eq!(tripper.join().unwrap(), 4);
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
