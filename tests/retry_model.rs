//! Model-based test of the retry budget's bookkeeping: a plain sequential
//! reference model of each kind, and a real [`Breaker`] with that budget,
//! driven by the same random sequences of first tries, retries, verdicts
//! and clock advances through the public API, on a [`ManualClock`].
//!
//! # What is modelled
//!
//! The reference model is `budget_model/mod.rs` (shared with
//! `registry_model.rs`, which runs it for each breaker of a registry).
//!
//! * **Tokens** (gRPC): a count of milli-tokens, full at first. A counted
//!   failure or slow call (of a first try or a retry) takes 1000, not below
//!   0; a fast success gives `⌊token_ratio × 1000⌋`, not above the maximum;
//!   an ignored call, or one dropped before the slow-call threshold,
//!   nothing (dropped later, it was abandoned: a slow call). A retry is admitted iff `2 × count
//!   > max`, and costs nothing itself.
//! * **Ratio** (Finagle): a list of timestamped entries, +`⌊percent ×
//!   1000⌉` for each first try admitted, −1000 for each retry admitted. The
//!   TTL is kept as halves: half `k` is `⌊now / (ttl/2)⌋`, and an entry of
//!   half `j` counts at `now` while `k − j ≤ 1`. The balance is `reserve +
//!   Σ counted entries`, with `reserve = min_per_second × ttl` (in
//!   milli-retries); a retry is admitted iff the balance is at least 1000.
//!   Times are whole milliseconds and the halves whole seconds, so the
//!   half's index is exact.
//! * **The breaker** is kept Closed (its trip conditions are out of reach)
//!   or, when drawn, in MetricsOnly, where every admission takes the
//!   general path: a retry's admission there must still deposit nothing.
//! * **Observed**: every admission's result, the rejection's reason, the
//!   snapshot's `retry_room` (tokens: failures before retries stop; ratio:
//!   whole retries in the balance) and the refused count, after every step.

use std::time::Duration;

use failfast::{Breaker, ManualClock, Outcome, RejectReason, RetryBudget};
use proptest::prelude::*;

mod budget_model;
use budget_model::BudgetModel;

#[derive(Clone, Debug)]
enum Op {
    /// A first try, then its verdict after `ms`.
    First(Verdict, u64),
    /// A retry, then its verdict after `ms` if admitted.
    Retry(Verdict, u64),
    /// The clock moves on.
    Advance(u64),
}

#[derive(Copy, Clone, Debug, PartialEq)]
enum Verdict {
    Success,
    Failure,
    Ignored,
    Dropped,
}

fn verdict() -> impl Strategy<Value = Verdict> {
    prop_oneof![
        4 => Just(Verdict::Success),
        3 => Just(Verdict::Failure),
        1 => Just(Verdict::Ignored),
        1 => Just(Verdict::Dropped),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (verdict(), 0u64..300).prop_map(|(v, ms)| Op::First(v, ms)),
        4 => (verdict(), 0u64..300).prop_map(|(v, ms)| Op::Retry(v, ms)),
        1 => prop_oneof![0u64..1_000, 1_000u64..12_000].prop_map(Op::Advance),
    ]
}

/// The slow-call threshold: a call that takes this long is slow.
const SLOW_MS: u64 = 200;

/// The verdict's move of the budget (see [`BudgetModel`]).
fn verdict_moves(model: &mut BudgetModel, verdict: Verdict, slow: bool) {
    match verdict {
        Verdict::Success if !slow => model.success(),
        Verdict::Success | Verdict::Failure => model.failure(),
        // A permit dropped after the slow-call threshold was
        // abandoned: a slow call, against the host.
        Verdict::Dropped if slow => model.failure(),
        Verdict::Ignored | Verdict::Dropped => {}
    }
}

/// Milliseconds as the model's nanoseconds.
fn ns(ms: u64) -> u64 {
    ms * 1_000_000
}

fn budget() -> impl Strategy<Value = RetryBudget> {
    prop_oneof![
        (1u32..=12, 1u32..=3000)
            .prop_map(|(max, ratio)| RetryBudget::tokens(max, f64::from(ratio) / 1000.0)),
        (0u32..=50, 1u64..=6, 0u32..=3).prop_map(|(percent, half_s, per_second)| {
            RetryBudget::ratio(
                f64::from(percent) / 100.0,
                Duration::from_secs(2 * half_s),
                per_second,
            )
        }),
    ]
}

fn record(permit: failfast::Permit<'_, ManualClock>, verdict: Verdict, clock: &ManualClock) {
    match verdict {
        Verdict::Success => drop(permit.record(Outcome::Success)),
        Verdict::Failure => drop(permit.record(Outcome::Failure)),
        Verdict::Ignored => drop(permit.record(Outcome::Ignored)),
        Verdict::Dropped => drop(permit),
    }
    let _ = clock;
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_budget_follows_its_model(
        budget in budget(),
        metrics_only in any::<bool>(),
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        let clock = ManualClock::new();
        let breaker = Breaker::builder()
            .consecutive_failures(30_000)
            .slow_call_threshold(Duration::from_millis(SLOW_MS))
            .count_calls(true)
            .retry_budget(budget)
            .build_with_clock(clock.clone())
            .unwrap();
        if metrics_only {
            breaker.metrics_only();
        }
        let mut model = BudgetModel::new(budget);
        let mut now_ms = 0u64;
        let mut refused = 0u64;
        for op in ops {
            match op {
                Op::Advance(ms) => {
                    clock.advance(Duration::from_millis(ms));
                    now_ms += ms;
                }
                Op::First(v, ms) => {
                    let permit = breaker.try_acquire().expect("never rejects");
                    model.first_try(ns(now_ms));
                    clock.advance(Duration::from_millis(ms));
                    now_ms += ms;
                    record(permit, v, &clock);
                    verdict_moves(&mut model, v, ms >= SLOW_MS);
                }
                Op::Retry(v, ms) => {
                    let expected = model.admits_retry(ns(now_ms));
                    match breaker.try_retry() {
                        Ok(permit) => {
                            prop_assert!(expected, "admitted at {now_ms} ms: {model:?}");
                            model.retry(ns(now_ms));
                            clock.advance(Duration::from_millis(ms));
                            now_ms += ms;
                            record(permit, v, &clock);
                            verdict_moves(&mut model, v, ms >= SLOW_MS);
                        }
                        Err(rejected) => {
                            prop_assert!(!expected, "refused at {now_ms} ms: {model:?}");
                            prop_assert_eq!(rejected.reason(), RejectReason::RetryBudget);
                            refused += 1;
                        }
                    }
                }
            }
            let snapshot = breaker.snapshot();
            prop_assert_eq!(snapshot.retry_room, Some(model.room(ns(now_ms))), "at {} ms", now_ms);
            prop_assert_eq!(snapshot.calls.unwrap().retries_refused, refused);
        }
    }
}
