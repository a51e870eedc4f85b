//! The retry budget's sequential reference model, shared by
//! `retry_model.rs` (the budget alone against time) and `registry_model.rs`
//! (the budget of each breaker a registry hands out). Times are
//! nanoseconds.
//!
//! * **Tokens** (gRPC): a count of milli-tokens, full at first. A counted
//!   failure (or slow call) takes 1000, not below 0; a fast success gives
//!   `⌊token_ratio × 1000⌋`, not above the maximum. A retry is admitted iff
//!   `2 × count > max`, and costs nothing itself.
//! * **Ratio** (Finagle): a list of timestamped entries, +`⌊percent ×
//!   1000⌉` for each first try admitted, −1000 for each retry admitted. The
//!   TTL is kept as halves: half `k` is `⌊now / (ttl/2)⌋`, and an entry of
//!   half `j` counts at `now` while `k − j ≤ 1`. The balance is `reserve +
//!   Σ counted entries`, with `reserve = min_per_second × ttl` (in
//!   milli-retries); a retry is admitted iff the balance is at least 1000.

// Each test binary uses a part of it.
#![allow(dead_code)]

use failfast::RetryBudget;

#[derive(Clone, Debug)]
pub enum BudgetModel {
    Tokens {
        max: u64,
        ratio: u64,
        milli: u64,
    },
    Ratio {
        deposit: i64,
        reserve: i64,
        half: u64,
        entries: Vec<(u64, i64)>,
    },
}

impl BudgetModel {
    pub fn new(budget: RetryBudget) -> BudgetModel {
        match budget {
            RetryBudget::Tokens {
                max_tokens,
                token_ratio,
            } => BudgetModel::Tokens {
                max: u64::from(max_tokens) * 1000,
                ratio: (token_ratio * 1000.0) as u64,
                milli: u64::from(max_tokens) * 1000,
            },
            RetryBudget::Ratio {
                percent,
                ttl,
                min_per_second,
            } => BudgetModel::Ratio {
                deposit: (percent * 1000.0).round() as i64,
                reserve: (u128::from(min_per_second) * ttl.as_nanos() / 1_000_000) as i64,
                half: (ttl.as_nanos() / 2) as u64,
                entries: Vec::new(),
            },
            _ => unreachable!("a budget of the models"),
        }
    }

    /// The entries of a ratio budget that count at `now`.
    fn counted(entries: &[(u64, i64)], half: u64, now: u64) -> impl Iterator<Item = i64> + '_ {
        let k = now / half;
        entries
            .iter()
            .filter(move |(t, _)| k.saturating_sub(t / half) <= 1)
            .map(|&(_, a)| a)
    }

    /// Milli-tokens, or the ratio's balance in milli-retries.
    pub fn balance(&self, now: u64) -> i64 {
        match self {
            BudgetModel::Tokens { milli, .. } => *milli as i64,
            BudgetModel::Ratio {
                reserve,
                half,
                entries,
                ..
            } => reserve + Self::counted(entries, *half, now).sum::<i64>(),
        }
    }

    pub fn admits_retry(&self, now: u64) -> bool {
        match self {
            BudgetModel::Tokens { max, milli, .. } => 2 * milli > *max,
            BudgetModel::Ratio { .. } => self.balance(now) >= 1000,
        }
    }

    /// The snapshot's `retry_room`: failures before retries stop (tokens),
    /// whole retries in the balance (ratio).
    pub fn room(&self, now: u64) -> u32 {
        match self {
            BudgetModel::Tokens { max, milli, .. } => {
                let mut m = *milli;
                let mut n = 0;
                while 2 * m > *max {
                    m = m.saturating_sub(1000);
                    n += 1;
                }
                n
            }
            BudgetModel::Ratio { .. } => (self.balance(now).max(0) / 1000) as u32,
        }
    }

    /// Whether it is as a fresh budget at `now`: a full bucket, or no
    /// entry of the ratio's still counted.
    pub fn at_rest(&self, now: u64) -> bool {
        match self {
            BudgetModel::Tokens { max, milli, .. } => milli == max,
            BudgetModel::Ratio { half, entries, .. } => {
                Self::counted(entries, *half, now).next().is_none()
            }
        }
    }

    /// A first try admitted at `now`.
    pub fn first_try(&mut self, now: u64) {
        if let BudgetModel::Ratio {
            deposit, entries, ..
        } = self
        {
            entries.push((now, *deposit));
        }
    }

    /// A retry admitted at `now`.
    pub fn retry(&mut self, now: u64) {
        if let BudgetModel::Ratio { entries, .. } = self {
            entries.push((now, -1000));
        }
    }

    /// A fast success.
    pub fn success(&mut self) {
        if let BudgetModel::Tokens { max, ratio, milli } = self {
            *milli = (*milli + *ratio).min(*max);
        }
    }

    /// A failure the breaker counts against the host (a slow call too).
    pub fn failure(&mut self) {
        if let BudgetModel::Tokens { milli, .. } = self {
            *milli = milli.saturating_sub(1000);
        }
    }
}
