//! The retry budget's words under concurrency: a ratio budget's two slots
//! (the half's index, and the two sums packed in one word) and a token
//! budget's bucket.
//!
//! * Withdrawals race: never more retries than the balance holds (the
//!   check and the withdrawal are one CAS).
//! * The move to a new half races a deposit (or a withdrawal): nothing is
//!   lost while the TTL holds it; the documented approximation is only that
//!   an entry racing the move may be counted in the half before its own
//!   (so it expires half a TTL early).
//! * Verdicts race on the token bucket: every one is applied once.
#![cfg(failfast_loom)]

use std::time::Duration;

use failfast::{Breaker, ManualClock, Nanos, RejectReason, RetryBudget};
use failfast_loom_tests::{secs, Cb};
use loom::sync::Arc;
use loom::thread;

fn budget(budget: RetryBudget) -> Arc<Cb> {
    Arc::new(
        Breaker::builder()
            .consecutive_failures(1_000)
            .retry_budget(budget)
            .build_with_clock(ManualClock::new())
            .expect("valid model config"),
    )
}

fn room(b: &Cb, at: Nanos) -> u32 {
    b.snapshot_at(at).retry_room.expect("a budget")
}

/// A reserve of one retry (1 per second over 1 s), no deposits: two
/// retries race for it; exactly one is admitted, the other refused by the
/// budget, and the room is then 0.
#[test]
fn racing_withdrawals_never_exceed_the_room() {
    loom::model(|| {
        let b = budget(RetryBudget::ratio(0.0, Duration::from_secs(1), 1));
        let other = {
            let b = b.clone();
            thread::spawn(move || {
                b.try_retry_at(secs(0))
                    .map(|p| p.success_at(secs(0)))
                    .is_ok()
            })
        };
        let mine = b.try_retry_at(secs(0));
        let mine_ok = match mine {
            Ok(p) => {
                let _ = p.success_at(secs(0));
                true
            }
            Err(e) => {
                assert_eq!(e.reason(), RejectReason::RetryBudget);
                false
            }
        };
        let theirs = other.join().unwrap();
        assert!(mine_ok ^ theirs, "exactly one of two: {mine_ok} {theirs}");
        assert_eq!(room(&b, secs(0)), 0);
    });
}

/// Half a TTL is 1 s. Two deposits at 0 s (one retry's worth at 50 %);
/// then two first tries at 1 s race, each possibly the one that moves the
/// sums to the new half. At 1 s all four deposits count (nothing lost: room
/// 2). At 2 s the deposits of 0 s have expired; a deposit that raced the
/// move may have been counted in the half before and expired with them
/// (the approximation): room 1 or 0. At 3 s everything has expired.
#[test]
fn a_move_to_a_new_half_racing_a_deposit_loses_nothing() {
    loom::model(|| {
        let b = budget(RetryBudget::ratio(0.5, Duration::from_secs(2), 0));
        for _ in 0..2 {
            let _ = b.try_acquire_at(secs(0)).unwrap().success_at(secs(0));
        }
        assert_eq!(room(&b, secs(0)), 1);
        let other = {
            let b = b.clone();
            thread::spawn(move || {
                let _ = b.try_acquire_at(secs(1)).unwrap().success_at(secs(1));
            })
        };
        let _ = b.try_acquire_at(secs(1)).unwrap().success_at(secs(1));
        other.join().unwrap();
        assert_eq!(room(&b, secs(1)), 2, "every deposit still counts");
        assert!(room(&b, secs(2)) <= 1, "the deposits of 0 s expired");
        assert_eq!(room(&b, secs(3)), 0);
    });
}

/// The same move racing a retry's withdrawal: at 1 s the balance is the
/// two old deposits and the new one, less the retry (2.5 − 1 − … ): the
/// retry is admitted, and nothing else changes.
#[test]
fn a_move_to_a_new_half_racing_a_withdrawal_loses_nothing() {
    loom::model(|| {
        let b = budget(RetryBudget::ratio(1.0, Duration::from_secs(2), 0));
        let _ = b.try_acquire_at(secs(0)).unwrap().success_at(secs(0));
        let _ = b.try_acquire_at(secs(0)).unwrap().success_at(secs(0));
        let other = {
            let b = b.clone();
            thread::spawn(move || {
                let _ = b.try_acquire_at(secs(1)).unwrap().success_at(secs(1));
            })
        };
        let retry = b.try_retry_at(secs(1));
        assert!(retry.is_ok(), "two retries' worth deposited at 0 s");
        let _ = retry.unwrap().success_at(secs(1));
        other.join().unwrap();
        assert_eq!(room(&b, secs(1)), 2, "3 deposited − 1 withdrawn");
    });
}

/// Two failures and a success race on a token bucket of 10 (ratio 0.5)
/// that holds 8: each verdict is applied exactly once, in any order (no
/// cap is reached): 8 − 1 − 1 + 0.5 = 6.5 tokens, two failures above the
/// threshold of 5. A lost failure would leave 7.5 (room 3), a lost success
/// 6 (room 1).
#[test]
fn racing_verdicts_move_the_bucket_once_each() {
    loom::model(|| {
        let b = budget(RetryBudget::tokens(10, 0.5));
        for _ in 0..2 {
            let _ = b.try_acquire_at(secs(0)).unwrap().failure_at(secs(0));
        }
        let call = || failfast::OwnedPermit::acquire_at(b.clone(), secs(0)).unwrap();
        let (f1, f2, s) = (call(), call(), call());
        let failure = thread::spawn(move || {
            let _ = f1.failure_at(secs(0));
        });
        let success = thread::spawn(move || {
            let _ = s.success_at(secs(0));
        });
        let _ = f2.failure_at(secs(0));
        failure.join().unwrap();
        success.join().unwrap();
        assert_eq!(room(&b, secs(0)), 2, "6.5 tokens");
    });
}
