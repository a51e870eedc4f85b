//! Finagle's retry budget in two slots, with a lazy window and no timer.
//!
//! The TTL is cut into two halves. Slot 0 holds when the current half ends
//! (`(k + 1) × half` for half `k = ⌊now / half⌋`, in nanoseconds), so a call
//! knows its half is the current one with one compare (`now < end`: no
//! division, no multiplication); slot 1 holds two sums in milli-retries,
//! each biased by 2³¹ in 32 bits: the current half's (high) and the
//! previous half's (low). A first try adds `deposit` to the current sum
//! (one `fetch_add`); a retry takes 1000 from it when `reserve + current +
//! previous ≥ 1000` (one CAS). The first call of a new half moves the sums
//! along (one strong CAS on the end elects it; then one CAS loop on the
//! sums).
//!
//! Approximations, all documented on [`RetryBudget::ratio`]:
//! * a deposit counts for between `ttl / 2` and `ttl`;
//! * a call with a `now` older than the current half's start counts in the
//!   current half; a call racing the move to a new half may be counted in
//!   the half before its own (it then expires half a TTL early), and after a
//!   pause of a whole TTL or more, a call racing the move may be forgotten
//!   (at most one per racing caller, as the breaker's windows skew);
//! * a half's sum saturates at 2³¹ − 1 milli-retries (over two million
//!   retries' worth: ten million first tries at 20 %).
//!
//! [`RetryBudget::ratio`]: super::RetryBudget::ratio

use core::time::Duration;

use crate::clock::Nanos;
use crate::sync::{AtomicU64, Ordering};

/// The slots the budget takes: the half's end, the two sums.
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
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ratio {
    /// Milli-retries a first try deposits (`percent × 1000`, ≤ 10⁶).
    pub(crate) deposit: u64,
    /// `deposit` where the current sum is: what a first try adds to the word.
    pub(crate) add: u64,
    /// Milli-retries always there: `min_per_second × ttl`.
    pub(crate) reserve: u64,
    /// Half the TTL, in nanoseconds (≥ 0.5 s).
    pub(crate) half: u64,
    /// The least sum of the two biased sums that covers one retry:
    /// `2³² + 1000 − reserve` (see [`Ratio::covers`]).
    pub(crate) floor: u64,
}

impl Ratio {
    pub(crate) fn new(deposit: u64, ttl: Duration, min_per_second: u32) -> Ratio {
        let ttl_nanos = ttl.as_nanos() as u64; // ≤ 60 s
        let reserve = u64::from(min_per_second) * ttl_nanos / 1_000_000;
        Ratio {
            deposit,
            add: deposit << 32,
            reserve,
            half: (ttl_nanos / 2).max(1),
            floor: Ratio::floor_for(reserve, RETRY),
        }
    }

    /// The least sum of the two biased sums that covers `amount`.
    const fn floor_for(reserve: u64, amount: u64) -> u64 {
        (2 * BIAS + amount).saturating_sub(reserve)
    }

    /// Pure: whether the sums `word` (of the current half) cover `amount`
    /// milli-retries with the reserve, and the current sum can give them.
    #[inline(always)]
    pub(crate) fn covers(self, word: u64, amount: u64) -> bool {
        let floor = if amount == RETRY {
            self.floor
        } else {
            Ratio::floor_for(self.reserve, amount)
        };
        (word >> 32) + (word & LOW) >= floor && word >> 32 >= amount
    }

    /// The half `now` falls in.
    pub(crate) fn epoch(self, now: Nanos) -> u64 {
        now.as_nanos() / self.half
    }

    /// When the half `now` falls in ends.
    pub(crate) fn half_end(self, now: Nanos) -> Nanos {
        Nanos::from_nanos((self.epoch(now) + 1).saturating_mul(self.half))
    }

    /// The slots' values for a budget started at `now`.
    pub(crate) fn initial(self, i: usize, now: Nanos) -> u64 {
        if i == 0 {
            self.half_end(now).as_nanos()
        } else {
            EMPTY
        }
    }

    /// Pure: the milli-retries a retry may draw on at `now`, with the sums
    /// `word` of the half that ends at `end`: the reserve plus the sums
    /// still in the TTL (both while their half is current, the old current
    /// one as the previous in the next half, none later). Never below 0.
    pub(crate) fn balance(self, end: u64, word: u64, now: Nanos) -> u64 {
        let now = now.as_nanos();
        let kept = if now < end {
            current(word) + previous(word)
        } else if now < end.saturating_add(self.half) {
            current(word)
        } else {
            0
        };
        (self.reserve as i64 + kept).max(0) as u64
    }

    /// Pure: retries the budget would admit at `now` (the balance in whole
    /// retries).
    pub(crate) fn room(self, end: u64, word: u64, now: Nanos) -> u32 {
        u32::try_from(self.balance(end, word, now) / RETRY).unwrap_or(u32::MAX)
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
    /// When the half the sums belong to ends.
    pub(crate) end: &'a AtomicU64,
    /// The two biased sums.
    pub(crate) sums: &'a AtomicU64,
}

impl<'a> Window<'a> {
    /// The window in `slots` (exactly [`SLOTS`] of them).
    #[inline(always)]
    pub(crate) fn new(slots: &'a [AtomicU64; SLOTS]) -> Window<'a> {
        Window {
            end: &slots[0],
            sums: &slots[1],
        }
    }
}

// Relaxed throughout: the two words are values of their own, no other
// memory is published with them, and the documented approximation is the
// same whatever order another thread sees their changes in (each word's
// own changes are totally ordered by its read-modify-writes).
impl Window<'_> {
    /// A first try at `now`: `rules.deposit` added to the current half.
    #[inline(always)]
    pub(crate) fn deposit(self, rules: &Ratio, now: Nanos) {
        // Each rare case is a tail call, so that nothing is live across a
        // call and the common case saves no register.
        if now.as_nanos() >= self.end.load(Ordering::Relaxed) {
            return self.deposit_late(rules, now);
        }
        self.add(rules);
    }

    /// The deposit's addition, saturating.
    #[inline(always)]
    fn add(self, rules: &Ratio) {
        let before = self.sums.fetch_add(rules.add, Ordering::Relaxed);
        if before.overflowing_add(rules.add).1 {
            // The half's sum wrapped: take it back (saturation). Never in
            // practice: it takes over two million retries' worth.
            self.saturated(rules);
        }
    }

    /// The first deposit of a new half: moves the sums along first.
    #[cold]
    #[inline(never)]
    fn deposit_late(self, rules: &Ratio, now: Nanos) {
        self.catch_up(rules, now);
        self.add(rules);
    }

    #[cold]
    #[inline(never)]
    fn saturated(self, rules: &Ratio) {
        self.sums.fetch_sub(rules.add, Ordering::Relaxed);
    }

    /// A deposit taken back (a retry admitted outside Closed, whose
    /// admission deposited as a first try's does).
    pub(crate) fn undeposit(self, rules: &Ratio) {
        let _ = self
            .sums
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                ((w >> 32) >= rules.deposit).then(|| w - rules.add)
            });
    }

    /// A retry at `now`: withdraws `amount` milli-retries if the balance
    /// covers them, else `false` and nothing changes.
    #[inline(always)]
    pub(crate) fn withdraw(self, rules: &Ratio, now: Nanos, amount: u64) -> bool {
        if now.as_nanos() >= self.end.load(Ordering::Relaxed) {
            return self.withdraw_late(rules, now, amount);
        }
        self.take(rules, amount)
    }

    /// The first withdrawal of a new half: moves the sums along first.
    #[cold]
    #[inline(never)]
    fn withdraw_late(self, rules: &Ratio, now: Nanos, amount: u64) -> bool {
        self.catch_up(rules, now);
        self.take(rules, amount)
    }

    /// The withdrawal: one CAS from the sums it checked.
    #[inline(always)]
    fn take(self, rules: &Ratio, amount: u64) -> bool {
        let mut word = self.sums.load(Ordering::Relaxed);
        // A caller with an older `now` draws on the sums as they are.
        while rules.covers(word, amount) {
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
        false
    }

    /// The retries the budget would admit at `now`, changing nothing.
    pub(crate) fn room(self, rules: &Ratio, now: Nanos) -> u32 {
        let end = self.end.load(Ordering::Relaxed);
        let word = self.sums.load(Ordering::Relaxed);
        rules.room(end, word, now)
    }

    /// Moves the sums on to the half of `now`, if it is later than theirs:
    /// the caller whose strong CAS moves the end elects itself and shifts
    /// the sums by the halves it moved it (a racing deposit may land before
    /// or after the shift: the approximation in the module docs).
    #[cold]
    #[inline(never)]
    pub(crate) fn catch_up(self, rules: &Ratio, now: Nanos) {
        let new_end = rules.half_end(now).as_nanos();
        let mut end = self.end.load(Ordering::Relaxed);
        while end < new_end {
            match self
                .end
                .compare_exchange(end, new_end, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    let k = (new_end - end) / rules.half;
                    let _ = self
                        .sums
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                            Some(shifted(w, k))
                        });
                    return;
                }
                Err(seen) => end = seen,
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
    fn the_half_ends_at_each_multiple_of_half_the_ttl() {
        let r = finagle();
        assert_eq!(r.half_end(Nanos::ZERO), Nanos::from_secs(5));
        assert_eq!(
            r.half_end(Nanos::from_nanos(4_999_999_999)),
            Nanos::from_secs(5)
        );
        assert_eq!(r.half_end(Nanos::from_secs(5)), Nanos::from_secs(10));
        assert_eq!(r.half_end(Nanos::from_secs(12)), Nanos::from_secs(15));
        assert_eq!(r.initial(0, Nanos::from_secs(12)), 15_000_000_000);
        assert_eq!(r.initial(1, Nanos::from_secs(12)), EMPTY);
    }

    #[test]
    fn sums_shift_and_expire() {
        let w = EMPTY + (5 << 32) + 7; // current 5, previous 7
        assert_eq!((current(w), previous(w)), (5, 7));
        let once = shifted(w, 1);
        assert_eq!((current(once), previous(once)), (0, 5));
        assert_eq!(shifted(w, 2), EMPTY);
        let r = Ratio::new(200, Duration::from_secs(10), 0);
        let end = 20_000_000_000; // the half [15 s, 20 s)
        assert_eq!(r.balance(end, w, Nanos::from_secs(19)), 12);
        assert_eq!(r.balance(end, w, Nanos::from_secs(3)), 12, "an older now");
        assert_eq!(r.balance(end, w, Nanos::from_secs(20)), 5);
        assert_eq!(r.balance(end, w, Nanos::from_secs(25)), 0);
    }

    #[test]
    fn covering_a_retry_is_the_balance_reaching_it() {
        for reserve_per_second in [0u32, 1, 7] {
            let r = Ratio::new(200, Duration::from_secs(2), reserve_per_second);
            for cur in [-3000i64, -1000, 0, 500, 999, 1000, 1001, 5000] {
                for prev in [-2000i64, 0, 1, 999, 4000] {
                    let word = ((BIAS as i64 + cur) as u64) << 32 | (BIAS as i64 + prev) as u64;
                    let balance = r.reserve as i64 + cur + prev;
                    let can = balance >= RETRY as i64 && cur + BIAS as i64 >= RETRY as i64;
                    assert_eq!(r.covers(word, RETRY), can, "{cur} {prev} {}", r.reserve);
                    assert_eq!(r.covers(word, RETRY + 200), can && balance >= 1200);
                }
            }
        }
    }

    #[test]
    fn withdrawals_stop_at_the_balance() {
        let r = Ratio::new(500, Duration::from_secs(10), 0);
        let slots = [
            AtomicU64::new(r.initial(0, Nanos::ZERO)),
            AtomicU64::new(EMPTY),
        ];
        let w = Window::new(&slots);
        let now = Nanos::ZERO;
        assert!(!w.withdraw(&r, now, RETRY));
        for _ in 0..5 {
            w.deposit(&r, now);
        }
        assert_eq!(w.room(&r, now), 2);
        assert!(w.withdraw(&r, now, RETRY));
        assert!(w.withdraw(&r, now, RETRY));
        assert!(!w.withdraw(&r, now, RETRY), "half a retry left");
        assert_eq!(w.room(&r, now), 0);
        // A half later the deposits still count (as the previous half's).
        w.deposit(&r, Nanos::from_secs(5));
        assert_eq!(current(slots[1].load(Ordering::Relaxed)), 500);
        assert_eq!(previous(slots[1].load(Ordering::Relaxed)), 500);
        assert!(w.withdraw(&r, Nanos::from_secs(5), RETRY));
        assert!(!w.withdraw(&r, Nanos::from_secs(5), RETRY));
        // A whole TTL later, nothing.
        assert_eq!(w.room(&r, Nanos::from_secs(15)), 0);
        w.deposit(&r, Nanos::from_secs(15));
        assert_eq!(slots[1].load(Ordering::Relaxed), EMPTY + (500 << 32));
    }

    #[test]
    fn a_full_half_saturates() {
        let r = Ratio::new(1_000_000, Duration::from_secs(10), 0);
        let slots = [
            AtomicU64::new(r.initial(0, Nanos::ZERO)),
            AtomicU64::new(EMPTY),
        ];
        let w = Window::new(&slots);
        for _ in 0..3_000 {
            w.deposit(&r, Nanos::ZERO);
        }
        let sum = current(slots[1].load(Ordering::Relaxed));
        assert!(sum > 2_000_000_000 && sum < 1 << 31, "{sum}");
        assert_eq!(previous(slots[1].load(Ordering::Relaxed)), 0);
    }
}
