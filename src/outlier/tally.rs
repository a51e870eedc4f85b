//! A pooled host's tally of the current interval: its calls, failures and
//! slow calls, packed in one word of the breaker's own storage.
//!
//! ```text
//!  63        46 45        28 27        10 9     0
//! +------------+------------+------------+-------+
//! |  slow (18) | fails (18) | calls (18) |tag(10)|
//! +------------+------------+------------+-------+
//! ```
//!
//! The tag is the interval number modulo 1024. A call is counted at its
//! admission: one `fetch_add` (the one read-modify-write a pooled host pays
//! per call, on its own cache line). Its verdict adds a failure or a slow
//! call to the same interval, or takes the call back if it does not count
//! (neutral, ignored, dropped early); a fast success adds nothing. The first
//! admission of a later interval rolls the tally: one CAS from the word it
//! read to a fresh tally holding only its own call. The CAS's winner alone
//! gets the old counts, so each interval of a host is judged once; a loser
//! re-reads and adds to the fresh tally. A `fetch_add` that read the old tag
//! but lands after the roll counts in the new interval, and a call whose
//! time was read before a racing call rolled into the next interval is
//! dropped (never rolling the tally back): every call is counted at most
//! once, and in the interval current at its write. A verdict
//! whose call's interval was rolled meanwhile adds nothing (the old counts
//! are gone to the pool): a failure at an interval's edge may be missed,
//! never counted twice.
//!
//! Calls stop being counted at [`CAP`] in an interval (262,144 minus a margin
//! for racing writers, so a field never carries into the next): the rates of
//! a busier host are those of its first `CAP` calls.
//!
//! A host silent for a multiple of 1024 intervals (2.8 hours at 10 s) would
//! find its old tag current and add to the old counts; its next roll then
//! judges them with the new ones. That is the price of ten tag bits.

use crate::sync::{AtomicU64, Ordering};

const TAG_BITS: u32 = 10;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;
const FIELD_BITS: u32 = 18;
const FIELD_MASK: u64 = (1 << FIELD_BITS) - 1;
const CALLS_SHIFT: u32 = TAG_BITS;
const FAILS_SHIFT: u32 = CALLS_SHIFT + FIELD_BITS;
const SLOW_SHIFT: u32 = FAILS_SHIFT + FIELD_BITS;
const _: () = assert!(SLOW_SHIFT + FIELD_BITS == 64);

/// Calls counted per interval at most: a writer adds only below it, and the
/// 4,096 values above it absorb writers that read the count at the same time.
pub(crate) const CAP: u32 = (1 << FIELD_BITS) - 4096;

/// One interval's calls of one host.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) calls: u32,
    pub(crate) failures: u32,
    pub(crate) slow: u32,
}

impl Counts {
    /// A word's counts. Failures and slow calls are clamped to the calls:
    /// each is added at a verdict, after its call, and a call taken back
    /// or capped may leave them one ahead for a moment.
    fn of(word: u64) -> Counts {
        let field = |shift: u32| ((word >> shift) & FIELD_MASK) as u32;
        let calls = field(CALLS_SHIFT);
        Counts {
            calls,
            failures: field(FAILS_SHIFT).min(calls),
            slow: field(SLOW_SHIFT).min(calls),
        }
    }
}

/// The tag of interval `epoch`.
#[inline(always)]
fn tag_of(epoch: u64) -> u64 {
    epoch & TAG_MASK
}

/// One call.
const CALL: u64 = 1 << CALLS_SHIFT;

/// A verdict's delta: a failure and a slow call if it was.
#[inline(always)]
fn outcome(failure: bool, slow: bool) -> u64 {
    (u64::from(failure) << FAILS_SHIFT) | (u64::from(slow) << SLOW_SHIFT)
}

/// Whether `word`'s field at `shift` has room for one more.
#[inline(always)]
fn has_room(word: u64, shift: u32) -> bool {
    ((word >> shift) & FIELD_MASK) < u64::from(CAP)
}

/// A host's tally word (see the module's docs).
#[derive(Copy, Clone)]
pub(crate) struct Tally<'a>(pub(crate) &'a AtomicU64);

impl Tally<'_> {
    /// Counts one call admitted in interval `epoch`. When it rolls the
    /// tally out of the interval just before (`epoch - 1`), returns that
    /// interval's counts; a tally older than that (the host was silent for a
    /// whole interval) is dropped and returns nothing, as does every other
    /// call.
    /// (The breaker calls [`count`](Self::count) and [`roll`](Self::roll)
    /// apart, so that its common case saves no register for the rare one.)
    #[cfg(test)]
    pub(crate) fn call(self, epoch: u64) -> Option<Counts> {
        if self.count(epoch) {
            return None;
        }
        self.roll(epoch)
    }

    /// [`call`](Self::call)'s common case: the tally is `epoch`'s, and the
    /// call is counted in it (below the cap). `false` when the tally is
    /// another interval's: the caller then [rolls](Self::roll) it.
    #[inline(always)]
    pub(crate) fn count(self, epoch: u64) -> bool {
        // Relaxed throughout: the word is only counts, read back whole by the
        // rolling CAS, whose atomicity alone orders it after every earlier
        // add (one modification order); nothing else is published through it.
        let word = self.0.load(Ordering::Relaxed);
        if word & TAG_MASK != tag_of(epoch) {
            return false;
        }
        if has_room(word, CALLS_SHIFT) {
            self.0.fetch_add(CALL, Ordering::Relaxed);
        }
        true
    }

    /// The verdict of a call admitted in interval `epoch`: a failure and a
    /// slow call are added to it, if the tally still holds it.
    pub(crate) fn outcome(self, epoch: u64, failure: bool, slow: bool) {
        let word = self.0.load(Ordering::Relaxed);
        if word & TAG_MASK == tag_of(epoch)
            && has_room(word, FAILS_SHIFT)
            && has_room(word, SLOW_SHIFT)
        {
            self.0.fetch_add(outcome(failure, slow), Ordering::Relaxed);
        }
    }

    /// Takes back a call of interval `epoch` that ended counting nothing
    /// (neutral, ignored, dropped early), if the tally still holds it. A CAS,
    /// so that the count never goes below zero into the tag.
    pub(crate) fn uncount(self, epoch: u64) {
        let mut word = self.0.load(Ordering::Relaxed);
        while word & TAG_MASK == tag_of(epoch) && (word >> CALLS_SHIFT) & FIELD_MASK != 0 {
            match self.0.compare_exchange_weak(
                word,
                word - CALL,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(current) => word = current,
            }
        }
    }

    /// The first call of interval `epoch` seen on a tally of another: one
    /// CAS to a fresh tally; its winner returns the old counts if they are
    /// the previous interval's. A lost CAS re-reads (another call rolled, or
    /// added): it never retries a roll that someone else made.
    #[cold]
    #[inline(never)]
    pub(crate) fn roll(self, epoch: u64) -> Option<Counts> {
        let fresh = tag_of(epoch) | CALL;
        let mut word = self.0.load(Ordering::Relaxed);
        loop {
            if (1..=8).contains(&(word.wrapping_sub(epoch) & TAG_MASK)) {
                // The tally is a later interval's: this call's time was read
                // earlier, or passed in from the past. Counted nowhere,
                // rather than rolling the tally back.
                return None;
            }
            if word & TAG_MASK == tag_of(epoch) {
                // Rolled by another call meanwhile: count in it.
                if has_room(word, CALLS_SHIFT) {
                    self.0.fetch_add(CALL, Ordering::Relaxed);
                }
                return None;
            }
            match self
                .0
                .compare_exchange(word, fresh, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(old) => {
                    let previous = tag_of(epoch.wrapping_sub(1));
                    return (old & TAG_MASK == previous).then(|| Counts::of(old));
                }
                Err(current) => word = current,
            }
        }
    }

    /// Starts an empty tally in interval `epoch` (a breaker joining its
    /// pool): a fresh slot's 0 would be interval 0's, which a tag near the
    /// end of the circle takes for a later one.
    pub(crate) fn start(self, epoch: u64) {
        self.0.store(tag_of(epoch), Ordering::Relaxed);
    }

    /// The counts of the interval in progress, if the tally is `epoch`'s.
    #[cfg(test)]
    #[cfg_attr(failfast_loom, allow(dead_code))] // for the loom models
    pub(crate) fn peek(self, epoch: u64) -> Option<Counts> {
        let word = self.0.load(Ordering::Relaxed);
        (word & TAG_MASK == tag_of(epoch)).then(|| Counts::of(word))
    }
}

/// The initial tally (a fresh slot is 0): interval 0's, empty. A host built
/// in interval 0 or 1 then looks as if it counted nothing there, which is
/// true.
#[cfg(test)]
#[cfg_attr(failfast_loom, allow(dead_code))] // for the loom models
const EMPTY: u64 = 0;

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;

    #[test]
    fn calls_add_up_in_their_interval_and_roll_once() {
        let word = AtomicU64::new(EMPTY);
        let tally = Tally(&word);
        for i in 0..10 {
            assert_eq!(tally.call(5), None);
            tally.outcome(5, i % 5 == 0, i % 2 == 0);
        }
        tally.call(5);
        tally.uncount(5);
        assert_eq!(
            tally.peek(5),
            Some(Counts {
                calls: 10,
                failures: 2,
                slow: 5
            })
        );
        let rolled = tally.call(6);
        assert_eq!(
            rolled,
            Some(Counts {
                calls: 10,
                failures: 2,
                slow: 5
            }),
            "the first call of the next interval gets the old counts"
        );
        assert_eq!(tally.call(6), None, "and only that one");
        tally.outcome(5, true, true);
        assert_eq!(
            tally.peek(6).map(|c| c.failures),
            Some(0),
            "5's verdict is late"
        );
        assert_eq!(tally.peek(6).map(|c| c.calls), Some(2));
    }

    #[test]
    fn a_tally_older_than_the_previous_interval_is_dropped() {
        let word = AtomicU64::new(EMPTY);
        let tally = Tally(&word);
        tally.call(5);
        assert_eq!(tally.call(7), None, "interval 6 was silent");
        assert_eq!(tally.peek(7).map(|c| c.calls), Some(1));
    }

    #[test]
    fn counting_stops_at_the_cap_without_carrying() {
        let word = AtomicU64::new(EMPTY);
        let tally = Tally(&word);
        for _ in 0..CAP + 10 {
            tally.call(1);
            tally.outcome(1, true, true);
        }
        let c = tally.peek(1).unwrap();
        assert_eq!((c.calls, c.failures, c.slow), (CAP, CAP, CAP));
        assert_eq!(
            word.load(Ordering::Relaxed) & TAG_MASK,
            1,
            "the tag is intact"
        );
    }

    #[test]
    fn a_call_from_an_earlier_interval_never_rolls_the_tally_back() {
        let word = AtomicU64::new(EMPTY);
        let tally = Tally(&word);
        tally.call(5);
        assert_eq!(tally.call(4), None);
        assert_eq!(tally.peek(5).map(|c| (c.calls, c.failures)), Some((1, 0)));
    }

    #[test]
    fn a_call_taken_back_never_goes_below_zero() {
        let word = AtomicU64::new(EMPTY);
        let tally = Tally(&word);
        tally.start(3);
        tally.uncount(3);
        assert_eq!(word.load(Ordering::Relaxed), 3, "nothing to take back");
        tally.call(3);
        tally.uncount(3);
        assert_eq!(tally.peek(3).map(|c| c.calls), Some(0));
    }

    #[test]
    fn the_tag_wraps_at_1024_intervals() {
        let word = AtomicU64::new(EMPTY);
        let tally = Tally(&word);
        tally.start(1023);
        tally.call(1023);
        assert_eq!(tally.call(1024).map(|c| c.calls), Some(1));
    }
}
