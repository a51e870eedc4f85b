//! The count-based window: the last N calls.
//!
//! Layout: the head is the cursor (calls recorded since the last reset) in
//! its low 63 bits and the [`CLEAN`] mark in bit 63; the body is a ring of N
//! 2-bit entries, 32 per word: bit 0 = failure, bit 1 = slow. Call number `i`
//! lives at ring position `i % N`.
//!
//! Recording is one `fetch_add` on the cursor, then a load of the entry's
//! word; only if the entry being overwritten differs from the new one (the
//! window is not all-healthy) is there a second read-modify-write, an XOR of
//! the two bits. Counting is a popcount over at most N/32 words.
//!
//! # The clean mark
//!
//! In a full ring of healthy entries, a healthy call changes nothing the
//! window reports: it would overwrite a healthy entry with a healthy one, and
//! the ring holds N calls either way. So a healthy call that finds the ring
//! marked [`CLEAN`] writes nothing: one load, no `fetch_add` on the shared
//! cursor. Skipped calls do not move the cursor; in an all-healthy ring which
//! entry the next call overwrites does not matter, so the ring still holds
//! the counts of the last N calls.
//!
//! The mark is set by the writer of each lap's last entry (position N − 1)
//! when it finds the ring full and every entry healthy, and cleared by every
//! writer whose XOR leaves its entry unhealthy. It must never stay set over
//! an unhealthy entry: the skipped calls would then keep that failure in the
//! window for good. The two sides meet on the entry's word:
//!
//! * the setter checks the ring, sets the mark with a CAS on the cursor word
//!   it checked (after a reset the CAS fails, unless the new generation has
//!   since counted as many calls: then the ring is full again, and the
//!   re-read decides), then reads every ring word again with an `AcqRel`
//!   read-modify-write and clears the mark if any entry is unhealthy;
//! * a writer of an unhealthy entry XORs it in with `AcqRel`, then loads the
//!   cursor word and clears the mark if it is set.
//!
//! Two read-modify-writes of one word are ordered. If the setter's re-read
//! comes after the XOR, it reads the unhealthy entry and clears the mark. If
//! it comes first, the XOR reads from the re-read's release sequence (every
//! later read-modify-write of the word continues it, which is why a reset
//! zeroes the ring with `swap`, not `store`), so the mark, set before the
//! re-read, happens before the writer's load, which sees it and clears it.
//! Either way the mark does not outlive the unhealthy entry (loom models
//! `count_window_clean_mark_never_hides_a_failure` and, in this module,
//! `loom_models::reset_races_setter_and_failure`; bugs `clean-ring-no-reread`,
//! `clean-ring-reread-load` and `clean-ring-reset-store`).
//!
//! While a setter is between its CAS and its re-read, or a writer between its
//! XOR and its load, the mark can cover an unhealthy entry and healthy calls
//! are skipped: the failure then stays in the window for more than N calls,
//! for as long as that thread is held up. Failures are over-reported in that
//! moment, never hidden, and the window is exact again once both are done.
//!
//! Clearing may also remove a mark a later setter set over a healthy ring;
//! that costs only speed, until the next lap's last writer sets it again.

use core::num::NonZeroU32;

use super::{Slots, WindowCounts};
use crate::sync::{AtomicU64, Ordering};

const ENTRIES_PER_WORD: u32 = 32;
const FAILURE_BITS: u64 = 0x5555_5555_5555_5555;
const SLOW_BITS: u64 = 0xAAAA_AAAA_AAAA_AAAA;
/// In the cursor word: the ring is full and every entry is healthy (see the
/// module docs). The cursor below it cannot reach it (2⁶³ calls).
const CLEAN: u64 = 1 << 63;

/// The body: the ring's words.
pub(crate) fn slots_for(size: u32) -> usize {
    size.div_ceil(ENTRIES_PER_WORD) as usize
}

#[inline(always)]
pub(crate) fn record(slots: Slots<'_>, size: NonZeroU32, failure: bool, slow: bool) {
    let new = u64::from(failure) | (u64::from(slow) << 1);
    // Relaxed: a stale mark only skips a healthy call into a ring that was
    // clean a moment ago, or records one the mark would have skipped.
    if new == 0 && slots.head().load(Ordering::Relaxed) & CLEAN != 0 {
        return;
    }
    write(slots, size, new);
}

/// Writes call `new` into the ring: the path of a ring that is not marked
/// clean. Out of line, so the verdict paths that inline [`record`] carry only
/// its mark test.
#[inline(never)]
fn write(slots: Slots<'_>, size: NonZeroU32, new: u64) {
    // Relaxed: the window is a statistic; the trip decision re-reads it and
    // the trip itself is ordered by the state word's CAS.
    let call = slots.head().fetch_add(1, Ordering::Relaxed) & !CLEAN;
    let pos = (call % u64::from(size.get())) as u32;
    let word = &slots.body()[(pos / ENTRIES_PER_WORD) as usize];
    let shift = (pos % ENTRIES_PER_WORD) * 2;
    // Relaxed: as above.
    let old = (word.load(Ordering::Relaxed) >> shift) & 0b11;
    if old != new {
        // AcqRel: meets the clean-mark setter's re-read of this word (module
        // docs). XOR flips exactly the bits that differ; a writer racing on
        // the same entry (a call N later) can skew this one entry.
        let before = word.fetch_xor((old ^ new) << shift, Ordering::AcqRel);
        if ((before >> shift) ^ old ^ new) & 0b11 != 0 {
            unmark(slots.head());
        }
    }
    if pos == size.get() - 1 {
        mark_if_clean(slots, size.get());
    }
}

/// Clears the clean mark after an unhealthy entry was written.
#[cold]
fn unmark(cursor: &AtomicU64) {
    // Relaxed: this load follows the entry's `AcqRel` XOR, which is what
    // orders it against a setter (module docs).
    if cursor.load(Ordering::Relaxed) & CLEAN != 0 {
        // Relaxed: the mark orders nothing; clearing it is always safe.
        cursor.fetch_and(!CLEAN, Ordering::Relaxed);
    }
}

/// Sets the clean mark if the ring is full and every entry healthy: by the
/// writer of a lap's last entry.
#[cold]
fn mark_if_clean(slots: Slots<'_>, size: u32) {
    let ring = &slots.body()[..slots_for(size)];
    // Relaxed: a first look; the re-read below decides.
    let seen = slots.head().load(Ordering::Relaxed);
    if seen & CLEAN != 0 || seen < u64::from(size) {
        return;
    }
    // Relaxed: as above.
    if ring.iter().any(|w| w.load(Ordering::Relaxed) != 0) {
        return;
    }
    // Relaxed: the CAS only keeps a mark off a ring a reset emptied; the
    // re-read's `AcqRel` orders the mark against the writers.
    if slots
        .head()
        .compare_exchange(seen, seen | CLEAN, Ordering::Relaxed, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    // AcqRel read-modify-write, not a load: it is ordered with every XOR of
    // the same word (module docs). Not short-circuited: each word is read.
    let dirty = ring
        .iter()
        .fold(0, |dirty, w| dirty | w.fetch_or(0, Ordering::AcqRel));
    if dirty != 0 {
        unmark(slots.head());
    }
}

pub(crate) fn counts(slots: Slots<'_>, size: u32) -> WindowCounts {
    // Relaxed: see `record`.
    let recorded = slots.head().load(Ordering::Relaxed) & !CLEAN;
    let (mut failures, mut slow) = (0u32, 0u32);
    for word in &slots.body()[..slots_for(size)] {
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

pub(crate) fn reset(slots: Slots<'_>, size: u32) {
    // Relaxed: a reset races with verdicts of the old generation (whose
    // skew the window's docs bound) and with the new generation's first
    // calls. Zeroing the cursor also clears the mark.
    //
    // `swap`, not `store`: a plain store to a ring word would end the
    // release sequence of a setter's re-read (module docs), so a writer
    // whose XOR read the reset's 0 would not be ordered after the mark and
    // could leave it over its failure (loom
    // `window::count::loom_models::reset_races_setter_and_failure`, bug
    // `clean-ring-reset-store`). The cursor's `swap` keeps loom exact: it
    // lets a read-modify-write skip a racing plain store.
    slots.head().swap(0, Ordering::Relaxed);
    for slot in &slots.body()[..slots_for(size)] {
        slot.swap(0, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;
    use crate::window::SlotArc;

    fn nz(size: u32) -> NonZeroU32 {
        NonZeroU32::new(size).unwrap()
    }

    fn window(size: u32) -> SlotArc {
        SlotArc::from_header_and_iter(
            AtomicU64::new(0),
            (0..slots_for(size)).map(|_| AtomicU64::new(0)),
        )
    }

    #[test]
    fn keeps_exactly_the_last_n_calls() {
        let w = window(40);
        for i in 0..100u32 {
            record(Slots::new(&w), nz(40), i % 4 == 0, i % 5 == 0);
        }
        // Calls 60..100: failures where i % 4 == 0, slow where i % 5 == 0.
        let failures = (60..100).filter(|i| i % 4 == 0).count() as u32;
        let slow = (60..100).filter(|i| i % 5 == 0).count() as u32;
        assert_eq!(
            counts(Slots::new(&w), 40),
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
        record(Slots::new(&w), nz(3), true, true);
        record(Slots::new(&w), nz(3), false, false);
        record(Slots::new(&w), nz(3), false, false);
        assert_eq!(counts(Slots::new(&w), 3).failures, 1);
        record(Slots::new(&w), nz(3), false, false);
        assert_eq!(counts(Slots::new(&w), 3), WindowCounts::new(3, 0, 0));
    }

    fn healthy(w: &SlotArc, size: u32, n: u32) {
        for _ in 0..n {
            record(Slots::new(w), nz(size), false, false);
        }
    }

    fn marked(w: &SlotArc) -> bool {
        w.header.header.load(Ordering::Relaxed) & CLEAN != 0
    }

    #[test]
    fn a_full_healthy_ring_is_marked_and_then_written_no_more() {
        let w = window(40);
        healthy(&w, 40, 39);
        assert!(!marked(&w), "not full yet");
        healthy(&w, 40, 1);
        assert!(marked(&w), "the lap's last writer marks a healthy ring");
        healthy(&w, 40, 100);
        assert_eq!(
            w.header.header.load(Ordering::Relaxed),
            40 | CLEAN,
            "healthy calls into a marked ring move no cursor"
        );
        assert_eq!(counts(Slots::new(&w), 40), WindowCounts::new(40, 0, 0));
    }

    #[test]
    fn a_failure_clears_the_mark_and_leaves_after_n_calls() {
        let w = window(40);
        healthy(&w, 40, 40);
        record(Slots::new(&w), nz(40), true, false);
        assert!(!marked(&w), "an unhealthy entry clears the mark");
        assert_eq!(counts(Slots::new(&w), 40), WindowCounts::new(40, 1, 0));
        healthy(&w, 40, 39);
        assert_eq!(
            counts(Slots::new(&w), 40).failures,
            1,
            "39 calls later it is still in"
        );
        assert!(!marked(&w), "the lap ended over the failure: no mark");
        healthy(&w, 40, 1);
        assert_eq!(
            counts(Slots::new(&w), 40),
            WindowCounts::new(40, 0, 0),
            "40 calls later it is out"
        );
        healthy(&w, 40, 39);
        assert!(marked(&w), "marked again at the end of the next lap");
    }

    #[test]
    fn a_slow_call_clears_the_mark_too() {
        let w = window(3);
        healthy(&w, 3, 3);
        assert!(marked(&w));
        record(Slots::new(&w), nz(3), false, true);
        assert!(!marked(&w));
        assert_eq!(counts(Slots::new(&w), 3), WindowCounts::new(3, 0, 1));
    }

    #[test]
    fn a_ring_of_one_is_marked_after_each_healthy_call() {
        let w = window(1);
        record(Slots::new(&w), nz(1), true, false);
        assert!(!marked(&w));
        healthy(&w, 1, 1);
        assert!(marked(&w));
        assert_eq!(counts(Slots::new(&w), 1), WindowCounts::new(1, 0, 0));
    }

    #[test]
    fn reset_clears_the_mark() {
        let w = window(4);
        healthy(&w, 4, 4);
        assert!(marked(&w));
        reset(Slots::new(&w), 4);
        assert!(!marked(&w));
        healthy(&w, 4, 3);
        assert_eq!(
            counts(Slots::new(&w), 4),
            WindowCounts::new(3, 0, 0),
            "healthy calls count again"
        );
    }

    #[test]
    fn a_ring_is_marked_only_when_full_and_healthy() {
        let w = window(5);
        healthy(&w, 5, 3);
        mark_if_clean(Slots::new(&w), 5);
        assert!(!marked(&w), "3 calls in a ring of 5: not full");
        healthy(&w, 5, 2);
        assert!(marked(&w));
        record(Slots::new(&w), nz(5), true, false);
        mark_if_clean(Slots::new(&w), 5);
        assert!(!marked(&w), "a failure in the ring");
    }

    proptest::proptest! {
        /// Against a model of the last N calls, through marks, laps and resets.
        #[test]
        fn counts_the_last_n_calls(
            size in 1u32..=70,
            calls in proptest::collection::vec(0u8..6, 0..400),
        ) {
            let w = window(size);
            let mut model: std::collections::VecDeque<(bool, bool)> = Default::default();
            for c in calls {
                if c == 5 {
                    reset(Slots::new(&w), size);
                    model.clear();
                    continue;
                }
                // Healthy calls are most of them, as in life.
                let (failure, slow) = (c == 3, c == 4);
                record(Slots::new(&w), nz(size), failure, slow);
                model.push_back((failure, slow));
                if model.len() > size as usize {
                    model.pop_front();
                }
                let want = WindowCounts::new(
                    model.len() as u32,
                    model.iter().filter(|(f, _)| *f).count() as u32,
                    model.iter().filter(|(_, s)| *s).count() as u32,
                );
                proptest::prop_assert_eq!(counts(Slots::new(&w), size), want);
                if marked(&w) {
                    proptest::prop_assert!(want.failures == 0 && want.slow == 0 && want.calls == size);
                }
            }
        }
    }

    #[test]
    fn reset_empties() {
        let w = window(5);
        record(Slots::new(&w), nz(5), true, false);
        reset(Slots::new(&w), 5);
        assert_eq!(counts(Slots::new(&w), 5), WindowCounts::default());
    }
}

/// A loom model of the window alone, for the one race the public API can
/// only stage with three threads and outcomes that depend on who won: a
/// reset (a transition, on its own thread) racing an old-generation failure
/// writer and a new-generation healthy call that ends a lap (`loom-tests/`
/// holds the public-API models; this module's model runs in `.ci/run`'s
/// "loom models in the crate" step).
#[cfg(all(test, failfast_loom))]
mod loom_models {
    use super::*;
    use crate::window::SlotArc;

    /// A ring of 1 holding one healthy call, not yet marked. Once every
    /// thread is done, the mark must not be set over an unhealthy entry.
    #[test]
    fn reset_races_setter_and_failure() {
        let one = NonZeroU32::MIN;
        loom::model(move || {
            let w =
                SlotArc::from_header_and_iter(AtomicU64::new(1), [AtomicU64::new(0)].into_iter());
            let (failing, resetting) = (w.clone(), w.clone());
            let x = loom::thread::spawn(move || record(Slots::new(&failing), one, true, false));
            let t = loom::thread::spawn(move || reset(Slots::new(&resetting), 1));
            record(Slots::new(&w), one, false, false);
            x.join().unwrap();
            t.join().unwrap();
            let head = w.header.header.load(Ordering::Relaxed);
            let ring = w.slice[0].load(Ordering::Relaxed);
            assert!(
                head & CLEAN == 0 || ring == 0,
                "the mark over an unhealthy entry: head {head:#x}, ring {ring:#x}"
            );
        });
    }
}
