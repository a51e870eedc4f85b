//! The count-based window: the last N calls.
//!
//! Layout: `slots[0]` is the cursor (calls recorded since the last reset);
//! `slots[1..]` is a ring of N 2-bit entries, 32 per word: bit 0 = failure,
//! bit 1 = slow. Call number `i` lives at ring position `i % N`.
//!
//! Recording is one `fetch_add` on the cursor, then a load of the entry's
//! word; only if the entry being overwritten differs from the new one (the
//! window is not all-healthy) is there a second read-modify-write, an XOR of
//! the two bits. Counting is a popcount over at most N/32 words.

use core::num::NonZeroU32;

use super::WindowCounts;
use crate::sync::{AtomicU64, Ordering};

const ENTRIES_PER_WORD: u32 = 32;
const FAILURE_BITS: u64 = 0x5555_5555_5555_5555;
const SLOW_BITS: u64 = 0xAAAA_AAAA_AAAA_AAAA;

pub(crate) fn slots_for(size: u32) -> usize {
    1 + size.div_ceil(ENTRIES_PER_WORD) as usize
}

#[inline(always)]
pub(crate) fn record(slots: &[AtomicU64], size: NonZeroU32, failure: bool, slow: bool) {
    // Relaxed: the window is a statistic; the trip decision re-reads it and
    // the trip itself is ordered by the state word's CAS.
    let call = slots[0].fetch_add(1, Ordering::Relaxed);
    let pos = (call % u64::from(size.get())) as u32;
    let word = &slots[1 + (pos / ENTRIES_PER_WORD) as usize];
    let shift = (pos % ENTRIES_PER_WORD) * 2;
    let new = u64::from(failure) | (u64::from(slow) << 1);
    // Relaxed: as above.
    let old = (word.load(Ordering::Relaxed) >> shift) & 0b11;
    if old != new {
        // Relaxed: as above. XOR flips exactly the bits that differ; a writer
        // racing on the same entry (a call N later) can skew this one entry.
        word.fetch_xor((old ^ new) << shift, Ordering::Relaxed);
    }
}

pub(crate) fn counts(slots: &[AtomicU64], size: u32) -> WindowCounts {
    // Relaxed: see `record`.
    let recorded = slots[0].load(Ordering::Relaxed);
    let (mut failures, mut slow) = (0u32, 0u32);
    for word in &slots[1..slots_for(size)] {
        let w = word.load(Ordering::Relaxed);
        failures += (w & FAILURE_BITS).count_ones();
        slow += (w & SLOW_BITS).count_ones();
    }
    let calls = recorded.min(u64::from(size)) as u32;
    WindowCounts {
        calls,
        failures: failures.min(calls),
        slow: slow.min(calls),
    }
}

pub(crate) fn reset(slots: &[AtomicU64], size: u32) {
    // Relaxed: a reset races only with verdicts of the old generation, whose
    // skew the module docs bound.
    for slot in &slots[..slots_for(size)] {
        slot.store(0, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;

    fn nz(size: u32) -> NonZeroU32 {
        NonZeroU32::new(size).unwrap()
    }

    fn window(size: u32) -> Vec<AtomicU64> {
        (0..slots_for(size)).map(|_| AtomicU64::new(0)).collect()
    }

    #[test]
    fn keeps_exactly_the_last_n_calls() {
        let w = window(40);
        for i in 0..100u32 {
            record(&w, nz(40), i % 4 == 0, i % 5 == 0);
        }
        // Calls 60..100: failures where i % 4 == 0, slow where i % 5 == 0.
        let failures = (60..100).filter(|i| i % 4 == 0).count() as u32;
        let slow = (60..100).filter(|i| i % 5 == 0).count() as u32;
        assert_eq!(
            counts(&w, 40),
            WindowCounts {
                calls: 40,
                failures,
                slow
            }
        );
    }

    #[test]
    fn an_old_failure_is_forgotten_when_its_entry_is_overwritten() {
        let w = window(3);
        record(&w, nz(3), true, true);
        record(&w, nz(3), false, false);
        record(&w, nz(3), false, false);
        assert_eq!(counts(&w, 3).failures, 1);
        record(&w, nz(3), false, false);
        assert_eq!(counts(&w, 3), WindowCounts::new(3, 0, 0));
    }

    #[test]
    fn reset_empties() {
        let w = window(5);
        record(&w, nz(5), true, false);
        reset(&w, 5);
        assert_eq!(counts(&w, 5), WindowCounts::default());
    }
}
