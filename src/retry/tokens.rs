//! gRPC's retry throttling: one slot of milli-tokens per host.
//!
//! The slot holds the bucket in thousandths of a token (gRPC keeps three
//! decimals of `token_ratio`), so every step is integer: a failure takes
//! 1000, a success gives `ratio`, capped at `max`. A retry is allowed while
//! `milli > max / 2`, i.e. `2 × milli > max`: no division, no rounding.

use crate::outcome::Verdict;
use crate::sync::{AtomicU64, Ordering};

/// The slots the bucket takes.
pub(crate) const SLOTS: usize = 1;

/// gRPC's cap on `max_tokens`.
pub(crate) const MAX_TOKENS: u32 = 1000;

/// One token, in milli-tokens.
pub(crate) const TOKEN: u64 = 1000;

/// A validated bucket: its size and a success's refill, in milli-tokens.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tokens {
    /// `max_tokens × 1000` (≤ 10⁶).
    pub(crate) max: u64,
    /// `⌊token_ratio × 1000⌋` (1 ..= 10⁶).
    pub(crate) ratio: u64,
}

impl Tokens {
    pub(crate) const fn new(max_tokens: u32, ratio_milli: u64) -> Tokens {
        Tokens {
            max: max_tokens as u64 * TOKEN,
            ratio: ratio_milli,
        }
    }

    /// A new bucket is full.
    pub(crate) const fn initial(self) -> u64 {
        self.max
    }

    /// Pure: whether a bucket holding `milli` allows a retry (gRPC: more
    /// than `max_tokens / 2` tokens).
    #[inline]
    pub(crate) const fn allows(self, milli: u64) -> bool {
        2 * milli > self.max
    }

    /// Pure: the bucket after a verdict: a failure (or a slow call) takes a
    /// token (not below 0), a fast success gives `ratio` back (not above
    /// `max`), anything else keeps it. `None` when it does not change.
    #[inline]
    pub(crate) const fn after(self, milli: u64, verdict: Verdict, slow: bool) -> Option<u64> {
        if !verdict.counts() {
            return None;
        }
        if verdict.is_failure() || slow || !matches!(verdict, Verdict::Success) {
            if milli == 0 {
                return None;
            }
            Some(milli.saturating_sub(TOKEN))
        } else {
            if milli >= self.max {
                return None;
            }
            let more = milli + self.ratio;
            Some(if more > self.max { self.max } else { more })
        }
    }

    /// Pure: how many more failures the bucket can take before retries
    /// stop (0: they have stopped).
    pub(crate) const fn room(self, milli: u64) -> u32 {
        if !self.allows(milli) {
            return 0;
        }
        // The least k with 2 × (milli − k × 1000) ≤ max.
        let over = 2 * milli - self.max; // > 0
        over.div_ceil(2 * TOKEN) as u32
    }
}

/// The bucket in its slot.
#[derive(Copy, Clone)]
pub(crate) struct Bucket<'a>(pub(crate) &'a AtomicU64);

impl Bucket<'_> {
    /// The milli-tokens now.
    #[inline]
    pub(crate) fn load(self) -> u64 {
        // Relaxed: the bucket is a value of its own; no other memory is
        // published with it.
        self.0.load(Ordering::Relaxed)
    }

    /// A verdict moves the bucket: one CAS loop, none when it stays (a
    /// success on a full bucket is one load).
    #[inline]
    pub(crate) fn verdict(self, rules: Tokens, verdict: Verdict, slow: bool) {
        let mut milli = self.load();
        while let Some(next) = rules.after(milli, verdict, slow) {
            // Relaxed: see `load`; the loop re-reads a changed bucket.
            match self
                .0
                .compare_exchange_weak(milli, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(seen) => milli = seen,
            }
        }
    }
}

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;

    /// gRFC A6's example, to the token.
    #[test]
    fn grpc_sequence() {
        let t = Tokens::new(4, 1600);
        let mut milli = t.initial();
        let mut step = |v: Verdict| {
            if let Some(next) = t.after(milli, v, false) {
                milli = next;
            }
            milli
        };
        assert_eq!(step(Verdict::Failure), 3000);
        assert_eq!(step(Verdict::Success), 4000);
        assert_eq!(step(Verdict::Failure), 3000);
        assert!(t.allows(3000));
        assert_eq!(step(Verdict::Failure), 2000);
        assert!(!t.allows(2000), "2 tokens is not more than 4 / 2");
        assert_eq!(t.room(2000), 0);
        assert_eq!(t.room(3000), 1);
        assert_eq!(t.room(2500), 1);
        assert_eq!(t.room(4000), 2);
    }

    #[test]
    fn slow_successes_take_a_token_and_neutral_verdicts_nothing() {
        let t = Tokens::new(10, 100);
        assert_eq!(t.after(10_000, Verdict::Success, true), Some(9_000));
        assert_eq!(t.after(10_000, Verdict::Ignored, false), None);
        assert_eq!(t.after(10_000, Verdict::Neutral, false), None);
        assert_eq!(t.after(10_000, Verdict::Dropped, false), None);
        assert_eq!(t.after(10_000, Verdict::AbandonedSlow, true), Some(9_000));
        assert_eq!(t.after(500, Verdict::Failure, false), Some(0));
        assert_eq!(t.after(0, Verdict::Failure, false), None);
        assert_eq!(t.after(9_950, Verdict::Success, false), Some(10_000));
    }

    #[test]
    fn room_counts_the_failures_left() {
        let t = Tokens::new(10, 100);
        // 10 tokens: retries stop once the bucket is at 5, after 5 failures.
        assert_eq!(t.room(10_000), 5);
        let mut milli = 10_000;
        for left in (0..5).rev() {
            milli -= TOKEN;
            assert_eq!(t.room(milli), left);
        }
        assert!(!t.allows(milli));
    }
}
