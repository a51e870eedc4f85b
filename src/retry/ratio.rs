//! Finagle's retry budget in two slots, with a lazy window and no timer.
//!
//! The TTL is cut into two halves. Slot 0 holds the index of the current
//! half (`now / (ttl / 2)`, computed with a precomputed reciprocal:
//! [`Ratio::epoch`]); slot 1 holds two sums in milli-retries, each biased
//! by 2³¹ in 32 bits: the current half's (high) and the previous half's
//! (low). A first try adds `deposit` to the current sum (one `fetch_add`);
//! a retry takes 1000 from it when `reserve + current + previous ≥ 1000`
//! (one CAS). The first call of a new half moves the sums along (one strong
//! CAS on the index elects it; then one CAS loop on the sums).
//!
//! Approximations, all documented on [`RetryBudget::ratio`]:
//! * a deposit counts for between `ttl / 2` and `ttl`;
//! * a call racing the move to a new half may be counted in the half after
//!   its own (it then counts half a TTL longer or shorter), and after a
//!   pause of a whole TTL or more, a call racing the move may be forgotten
//!   (at most one per racing caller, as the breaker's windows skew);
//! * a half's sum saturates at 2³¹ − 1 milli-retries (over two million
//!   retries' worth: ten million first tries at 20 %).
//!
//! [`RetryBudget::ratio`]: super::RetryBudget::ratio

use core::time::Duration;

use crate::clock::Nanos;
use crate::sync::{AtomicU64, Ordering};

/// The slots the budget takes: the half's index, the two sums.
pub(crate) const SLOTS: usize = 2;

/// The largest `min_per_second`: its reserve over 60 s (6 × 10⁸
/// milli-retries) stays well inside a sum's 2³¹.
pub(crate) const MAX_PER_SECOND: u32 = 10_000;

/// One retry, in milli-retries.
pub(crate) const RETRY: u64 = 1000;

/// A sum's zero.
const BIAS: u64 = 1 << 31;
const LOW: u64 = u32::MAX as u64;
/// Both sums at zero.
pub(crate) const EMPTY: u64 = BIAS << 32 | BIAS;

/// A validated ratio budget, in the integers the request path uses.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ratio {
    /// Milli-retries a first try deposits (`percent × 1000`, ≤ 10⁶).
    pub(crate) deposit: u64,
    /// Milli-retries always there: `min_per_second × ttl`.
    pub(crate) reserve: u64,
    /// Half the TTL, in nanoseconds.
    pub(crate) half: u64,
    /// `⌈2⁶⁴ / half⌉`: the half's index is `now × per_nanos >> 64`, no
    /// division on the request path (as the outlier pool's intervals); a
    /// boundary comes at most `now × half / 2⁶⁴` early (nanoseconds).
    pub(crate) per_nanos: u64,
}

impl Ratio {
    pub(crate) fn new(deposit: u64, ttl: Duration, min_per_second: u32) -> Ratio {
        let ttl_nanos = ttl.as_nanos() as u64; // ≤ 60 s
        let half = (ttl_nanos / 2).max(1);
        Ratio {
            deposit,
            reserve: u64::from(min_per_second) * ttl_nanos / 1_000_000,
            half,
            per_nanos: (u64::MAX / half) + 1,
        }
    }

    /// The half `now` falls in.
    #[inline(always)]
    pub(crate) fn epoch(self, now: Nanos) -> u64 {
        ((u128::from(now.as_nanos()) * u128::from(self.per_nanos)) >> 64) as u64
    }

    /// When the half `now` falls in ends.
    pub(crate) fn half_end(self, now: Nanos) -> Nanos {
        Nanos::from_nanos((self.epoch(now) + 1).saturating_mul(self.half))
    }

    /// The slots' values for a budget started at `now`.
    pub(crate) fn initial(self, i: usize, now: Nanos) -> u64 {
        if i == 0 {
            self.epoch(now)
        } else {
            EMPTY
        }
    }

    /// Pure: the milli-retries a retry may draw on, with the sums `word`
    /// of half `stored`, seen from half `epoch`: the reserve plus the sums
    /// still in the TTL (both in the same half, the old current one as the
    /// previous in the next, none later). Never below 0.
    pub(crate) fn balance(self, stored: u64, word: u64, epoch: u64) -> u64 {
        let kept = if epoch <= stored {
            current(word) + previous(word)
        } else if epoch == stored + 1 {
            current(word)
        } else {
            0
        };
        (self.reserve as i64 + kept).max(0) as u64
    }

    /// Pure: retries the budget would admit now (the balance in whole
    /// retries).
    pub(crate) fn room(self, stored: u64, word: u64, epoch: u64) -> u32 {
        u32::try_from(self.balance(stored, word, epoch) / RETRY).unwrap_or(u32::MAX)
    }
}

/// The current half's sum in `word`.
#[inline(always)]
pub(crate) const fn current(word: u64) -> i64 {
    (word >> 32) as i64 - BIAS as i64
}

/// The previous half's sum in `word`.
#[inline(always)]
pub(crate) const fn previous(word: u64) -> i64 {
    (word & LOW) as i64 - BIAS as i64
}

/// Pure: the sums `k` halves on (the current one becomes the previous one,
/// or both are gone).
pub(crate) const fn shifted(word: u64, k: u64) -> u64 {
    if k == 0 {
        word
    } else if k == 1 {
        BIAS << 32 | word >> 32
    } else {
        EMPTY
    }
}

/// The budget's two slots.
#[derive(Copy, Clone)]
pub(crate) struct Window<'a> {
    /// The half the sums belong to.
    pub(crate) epoch: &'a AtomicU64,
    /// The two biased sums.
    pub(crate) sums: &'a AtomicU64,
}

// Relaxed throughout: the two words are values of their own, no other
// memory is published with them, and the documented approximation is the
// same whatever order another thread sees their changes in (each word's
// own changes are totally ordered by its read-modify-writes).
impl Window<'_> {
    /// A first try at `now`: `rules.deposit` added to the current half.
    #[inline(always)]
    pub(crate) fn deposit(self, rules: Ratio, now: Nanos) {
        let epoch = rules.epoch(now);
        if self.epoch.load(Ordering::Relaxed) != epoch {
            self.catch_up(epoch);
        }
        let add = rules.deposit << 32;
        let before = self.sums.fetch_add(add, Ordering::Relaxed);
        if (before >> 32) + rules.deposit > LOW {
            // The half's sum wrapped: take it back (saturation). Never in
            // practice: it takes over two million retries' worth.
            self.sums.fetch_sub(add, Ordering::Relaxed);
        }
    }

    /// A deposit taken back (a retry admitted outside Closed, whose
    /// admission deposited as a first try's does).
    pub(crate) fn undeposit(self, rules: Ratio) {
        let add = rules.deposit << 32;
        let _ = self
            .sums
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                ((w >> 32) >= rules.deposit).then(|| w - add)
            });
    }

    /// A retry at `now`: withdraws `amount` milli-retries if the balance
    /// covers them, else `false` and nothing changes.
    #[inline]
    pub(crate) fn withdraw(self, rules: Ratio, now: Nanos, amount: u64) -> bool {
        let epoch = rules.epoch(now);
        let mut stored = self.epoch.load(Ordering::Relaxed);
        if stored < epoch {
            self.catch_up(epoch);
            stored = epoch;
        }
        let mut word = self.sums.load(Ordering::Relaxed);
        loop {
            // Seen from the stored half: a caller with an older `now` draws
            // on the sums as they are.
            if rules.balance(stored, word, stored) < amount || (word >> 32) < amount {
                return false;
            }
            match self.sums.compare_exchange_weak(
                word,
                word - (amount << 32),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(seen) => word = seen,
            }
        }
    }

    /// The retries the budget would admit at `now`, changing nothing.
    pub(crate) fn room(self, rules: Ratio, now: Nanos) -> u32 {
        let stored = self.epoch.load(Ordering::Relaxed);
        let word = self.sums.load(Ordering::Relaxed);
        rules.room(stored, word, rules.epoch(now))
    }

    /// Moves the sums on to half `epoch`, if it is later than theirs: the
    /// caller whose strong CAS moves the index shifts the sums by the
    /// halves it moved it (a racing deposit may land before or after the
    /// shift: the approximation in the module docs).
    #[cold]
    #[inline(never)]
    pub(crate) fn catch_up(self, epoch: u64) {
        let mut stored = self.epoch.load(Ordering::Relaxed);
        while stored < epoch {
            match self
                .epoch
                .compare_exchange(stored, epoch, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    let k = epoch - stored;
                    let _ = self
                        .sums
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                            Some(shifted(w, k))
                        });
                    return;
                }
                Err(seen) => stored = seen,
            }
        }
    }
}

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;

    fn finagle() -> Ratio {
        Ratio::new(200, Duration::from_secs(10), 10)
    }

    #[test]
    fn the_reserve_is_min_per_second_times_ttl() {
        assert_eq!(finagle().reserve, 100 * RETRY);
        assert_eq!(Ratio::new(0, Duration::from_millis(1500), 3).reserve, 4500);
    }

    #[test]
    fn the_epoch_is_the_half_ttl_index() {
        let r = finagle();
        assert_eq!(r.epoch(Nanos::ZERO), 0);
        assert_eq!(r.epoch(Nanos::from_nanos(4_999_999_999)), 0);
        assert_eq!(r.epoch(Nanos::from_secs(5)), 1);
        assert_eq!(r.epoch(Nanos::from_secs(12)), 2);
        assert_eq!(r.half_end(Nanos::from_secs(12)), Nanos::from_secs(15));
        // The rounded-up reciprocal moves a boundary at most `now × half /
        // 2⁶⁴` early: under a microsecond for the first thousand halves
        // (83 min), 23 ns a day later at this TTL's half.
        for k in 0..1000u64 {
            assert_eq!(r.epoch(Nanos::from_nanos(k * r.half)), k);
            if k > 0 {
                assert_eq!(r.epoch(Nanos::from_nanos(k * r.half - 1_000)), k - 1);
            }
        }
    }

    #[test]
    fn sums_shift_and_expire() {
        let w = EMPTY + (5 << 32) + 7; // current 5, previous 7
        assert_eq!((current(w), previous(w)), (5, 7));
        let once = shifted(w, 1);
        assert_eq!((current(once), previous(once)), (0, 5));
        assert_eq!(shifted(w, 2), EMPTY);
        let r = Ratio::new(200, Duration::from_secs(10), 0);
        assert_eq!(r.balance(3, w, 3), 12);
        assert_eq!(r.balance(3, w, 4), 5);
        assert_eq!(r.balance(3, w, 5), 0);
    }

    #[test]
    fn withdrawals_stop_at_the_balance() {
        let r = Ratio::new(500, Duration::from_secs(10), 0);
        let (epoch, sums) = (AtomicU64::new(0), AtomicU64::new(EMPTY));
        let w = Window {
            epoch: &epoch,
            sums: &sums,
        };
        let now = Nanos::ZERO;
        assert!(!w.withdraw(r, now, RETRY));
        for _ in 0..5 {
            w.deposit(r, now);
        }
        assert_eq!(w.room(r, now), 2);
        assert!(w.withdraw(r, now, RETRY));
        assert!(w.withdraw(r, now, RETRY));
        assert!(!w.withdraw(r, now, RETRY), "half a retry left");
        assert_eq!(w.room(r, now), 0);
        // A half later the deposits still count (as the previous half's).
        w.deposit(r, Nanos::from_secs(5));
        assert_eq!(current(sums.load(Ordering::Relaxed)), 500);
        assert_eq!(previous(sums.load(Ordering::Relaxed)), 500);
        assert!(w.withdraw(r, Nanos::from_secs(5), RETRY));
        assert!(!w.withdraw(r, Nanos::from_secs(5), RETRY));
    }
}
