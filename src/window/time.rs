//! The time-based window: the calls of the last `length`, in B buckets.
//!
//! Layout: the head is the current epoch `e` (`now / width`, where
//! `width = length / B`) packed with its bucket's body slot,
//! `e << 11 | (1 + e % B)` ([`pack`]); the body's first word is `width`,
//! written once when the storage is made (the success path reads it there,
//! next to the epoch, instead of through the shared configuration); body word
//! `1 + e % B` holds epoch `e`'s counts packed as
//! `calls:22 | failures:21 | slow:21`.
//!
//! A call in the current epoch needs no division: its time lies in
//! `[e * width, (e + 1) * width)`, one multiplication and one compare, and
//! its bucket's slot is the word's low bits, with nothing to add. Only a call
//! in another epoch divides. The packed word orders as the epoch does (the
//! slot is below the epoch's bits and smaller than 2¹¹), so the rotation's
//! CAS and the reset's `fetch_max` compare packed words as they compared
//! epochs.
//!
//! No timer rotates the buckets. The first writer that sees a newer epoch
//! advances it with one CAS and, as the winner, zeroes the buckets it skipped.
//! A healthy call is one load of the epoch word and one of the width, a
//! multiplication and a compare, and one `fetch_add` on the bucket.
//!
//! A bucket never silently stops counting. The writer that finds it holding
//! [`BUCKET_LIMIT`] (2²⁰) calls — as its `fetch_add` returns it, so the
//! healthy path reads the bucket once — halves all three counts, its own call
//! with them, with one CAS, so the bucket's failure and slow-call rates stay
//! those of its calls (weighted toward the recent ones once it has halved) at
//! any request rate — 200k requests a second to one host fill a 10 s bucket
//! twice over. The fields leave room for 2²⁰ − 1 writers racing past it.

use core::time::Duration;

use super::{Slots, WindowCounts};
use crate::clock::Nanos;
use crate::sync::{AtomicU64, Ordering};

const CALLS_SHIFT: u32 = 0;
const FAILURES_SHIFT: u32 = 22;
const SLOW_SHIFT: u32 = 43;
const CALLS_MASK: u64 = (1 << 22) - 1;
const FIELD21_MASK: u64 = (1 << 21) - 1;
/// A call whose `fetch_add` finds this many calls halves the bucket, itself
/// included. Small under loom, so a model reaches it in a few calls.
pub(crate) const BUCKET_LIMIT: u64 = if cfg!(failfast_loom) { 4 } else { 1 << 20 };

/// The body slot holding the width, a constant.
pub(crate) const WIDTH_SLOT: usize = 0;
/// The body slot of the bucket of every epoch `e` with `e % B == 0`.
const FIRST_BUCKET: usize = 1;

/// The body: the width, then the buckets.
pub(crate) fn slots_for(buckets: u32) -> usize {
    FIRST_BUCKET + buckets as usize
}

/// Nanoseconds per bucket (at least 1; validated at build).
#[inline]
pub(crate) fn width(length: Duration, buckets: u32) -> u64 {
    let w = length.as_nanos() / u128::from(buckets);
    (w.min(u128::from(u64::MAX)) as u64).max(1)
}

/// Bits of the head below the epoch: its bucket's body slot
/// (`1 + e % B <= 1024 < 2¹¹`).
const SLOT_BITS: u32 = 11;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
const _: () = assert!(FIRST_BUCKET as u64 + super::MAX_TIME_BUCKETS as u64 <= SLOT_MASK);
/// The last epoch the head holds (2⁵³ − 1). A width of at least 2048 ns
/// never reaches it (`u64::MAX / 2048 < 2⁵³`); a narrower one (1000..2048 ns:
/// a `length` under 2048 ns per bucket, at any bucket count) reaches it only
/// 2⁵³ widths (over 285 years) after the clock's origin, and counts every
/// later time in that last epoch.
pub(crate) const MAX_EPOCH: u64 = u64::MAX >> SLOT_BITS;

/// The epoch of `now`: its bucket's number since the origin (at most
/// [`MAX_EPOCH`]).
#[inline]
pub(crate) fn epoch_at(now: Nanos, width: u64) -> u64 {
    (now.as_nanos() / width).min(MAX_EPOCH)
}

/// The body slot of the bucket of `epoch`.
#[inline]
fn slot_of(epoch: u64, buckets: u32) -> usize {
    FIRST_BUCKET + (epoch % u64::from(buckets)) as usize
}

/// The head's word for `epoch` (at most [`MAX_EPOCH`]): the epoch, then
/// its bucket's body slot.
#[inline]
pub(crate) fn pack(epoch: u64, buckets: u32) -> u64 {
    (epoch << SLOT_BITS) | slot_of(epoch, buckets) as u64
}

/// The epoch of a word of the head.
#[inline(always)]
pub(crate) fn epoch_of(word: u64) -> u64 {
    word >> SLOT_BITS
}

/// Records one call at `now`; `buckets` gives B, asked for only when the
/// call is outside the current epoch.
#[inline(always)]
pub(crate) fn record(
    slots: Slots<'_>,
    buckets: impl FnOnce() -> u32,
    now: Nanos,
    failure: bool,
    slow: bool,
) {
    let body = slots.body();
    // Relaxed: the epoch orders nothing else; a stale read only makes this
    // writer try to rotate (CAS) or write one bucket late, which the module
    // docs count as racing skew.
    let word = slots.head().load(Ordering::Relaxed);
    // The bucket of the word's epoch, at the slot the word holds. Looked up
    // first: finding it proves the body holds the width's slot (0) too, so
    // reading the width checks nothing.
    let Some(current) = body.get((word & SLOT_MASK) as usize) else {
        return; // never: the word's slot is at most B
    };
    let Some(width) = body.get(WIDTH_SLOT) else {
        return; // never: see above
    };
    // Relaxed: a constant, written before the storage was shared.
    let width = width.load(Ordering::Relaxed);
    // The current epoch's first nanosecond. No overflow: the word's epoch
    // is some `t / width` with `t` a `u64`, or less (`MAX_EPOCH`).
    let start = epoch_of(word).wrapping_mul(width);
    let bucket = if now.as_nanos().wrapping_sub(start) < width {
        current // the current epoch: no division
    } else {
        let Some(slot) = enter(slots, width, buckets, word, now) else {
            return; // older than the whole window: nothing to count it in
        };
        let Some(bucket) = body.get(slot) else {
            return; // never: the slot is at most B
        };
        bucket
    };
    let add = (1 << CALLS_SHIFT)
        | (u64::from(failure) << FAILURES_SHIFT)
        | (u64::from(slow) << SLOW_SHIFT);
    // Relaxed: statistics (see above).
    let seen = bucket.fetch_add(add, Ordering::Relaxed);
    // Tested on what the add returned, not on a load before it: no second
    // access to the bucket on the healthy path.
    if seen & CALLS_MASK >= BUCKET_LIMIT {
        halve(bucket, seen.wrapping_add(add));
    }
}

/// A call outside the epoch `word` holds: rotates to its epoch if it is
/// newer; its bucket's body slot, or `None` when it is older than the window.
/// Out of line: at most once per width per writer in steady traffic. It
/// alone needs B, so only it asks for it (the success path reads it from
/// the shared configuration, a pointer away).
#[cold]
#[inline(never)]
fn enter(
    slots: Slots<'_>,
    width: u64,
    buckets: impl FnOnce() -> u32,
    word: u64,
    now: Nanos,
) -> Option<usize> {
    let buckets = buckets();
    // `max`: a zero width (never: the storage writes it) divides nothing.
    let epoch = epoch_at(now, width.max(1));
    let current = epoch_of(word);
    if epoch > current {
        rotate(slots, buckets, word, epoch);
    } else if current - epoch >= u64::from(buckets) {
        return None;
    }
    Some(slot_of(epoch, buckets))
}

/// Halves a full bucket's three counts, keeping its rates; `seen` is what
/// the caller's `fetch_add` left. A CAS loop, not a store: a store would wipe
/// out the calls added since `seen`. Stops as soon as the bucket is below the
/// limit (another writer halved it, or a rotation zeroed it).
#[cold]
fn halve(bucket: &AtomicU64, mut seen: u64) {
    while seen & CALLS_MASK >= BUCKET_LIMIT {
        let half = (((seen >> CALLS_SHIFT) & CALLS_MASK) / 2) << CALLS_SHIFT
            | (((seen >> FAILURES_SHIFT) & FIELD21_MASK) / 2) << FAILURES_SHIFT
            | (((seen >> SLOW_SHIFT) & FIELD21_MASK) / 2) << SLOW_SHIFT;
        // Relaxed: statistics, as for the `fetch_add` before it.
        match bucket.compare_exchange_weak(seen, half, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return,
            Err(actual) => seen = actual,
        }
    }
}

/// Moves the epoch from `seen`'s (a word of the head) to `epoch`; the CAS
/// winner zeroes the buckets of the epochs it skipped (at most all B of them).
fn rotate(slots: Slots<'_>, buckets: u32, seen: u64, epoch: u64) {
    let next = pack(epoch, buckets);
    let mut current = seen;
    // Words order as their epochs: `current < next` is `epoch_of(current) < epoch`.
    while current < next {
        // Relaxed: a rotation publishes nothing but the epoch itself.
        match slots.head().compare_exchange_weak(
            current,
            next,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => {
                let skipped = (epoch - epoch_of(current)).min(u64::from(buckets));
                for e in (epoch + 1 - skipped)..=epoch {
                    // Relaxed: see above.
                    slots.body()[slot_of(e, buckets)].store(0, Ordering::Relaxed);
                }
                return;
            }
            Err(actual) => current = actual,
        }
    }
}

pub(crate) fn counts(slots: Slots<'_>, width: u64, buckets: u32, now: Nanos) -> WindowCounts {
    // Relaxed: statistics.
    let current = epoch_of(slots.head().load(Ordering::Relaxed));
    let epoch = epoch_at(now, width).max(current);
    let mut total = WindowCounts::default();
    for age in 0..u64::from(buckets) {
        let Some(e) = epoch.checked_sub(age) else {
            break;
        };
        if e > current {
            continue; // not rotated in yet: that bucket still holds an old epoch
        }
        let b = slots.body()[slot_of(e, buckets)].load(Ordering::Relaxed);
        total.calls += ((b >> CALLS_SHIFT) & CALLS_MASK) as u32;
        total.failures += ((b >> FAILURES_SHIFT) & FIELD21_MASK) as u32;
        total.slow += ((b >> SLOW_SHIFT) & FIELD21_MASK) as u32;
    }
    total.failures = total.failures.min(total.calls);
    total.slow = total.slow.min(total.calls);
    total
}

pub(crate) fn reset(slots: Slots<'_>, width: u64, buckets: u32, now: Nanos) {
    // Relaxed: as for the count window's reset.
    for slot in &slots.body()[FIRST_BUCKET..slots_for(buckets)] {
        slot.store(0, Ordering::Relaxed);
    }
    // Words order as their epochs: the later epoch's word wins.
    slots
        .head()
        .fetch_max(pack(epoch_at(now, width), buckets), Ordering::Relaxed);
}

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;
    use crate::window::SlotArc;

    const W: u64 = 1_000; // 1 µs buckets
    fn window(b: u32) -> SlotArc {
        window_of(b, W)
    }
    fn window_of(b: u32, width: u64) -> SlotArc {
        SlotArc::from_header_and_iter(
            AtomicU64::new(pack(0, b)),
            (0..slots_for(b)).map(|i| AtomicU64::new(if i == WIDTH_SLOT { width } else { 0 })),
        )
    }
    fn at(n: u64) -> Nanos {
        Nanos::from_nanos(n)
    }

    #[test]
    fn counts_only_the_last_b_buckets() {
        let w = window(4);
        record(Slots::new(&w), || 4, at(0), true, false); // epoch 0
        record(Slots::new(&w), || 4, at(1_500), false, true); // epoch 1
        record(Slots::new(&w), || 4, at(3_999), false, false); // epoch 3
        assert_eq!(
            counts(Slots::new(&w), W, 4, at(3_999)),
            WindowCounts::new(3, 1, 1)
        );
        // At epoch 4, epoch 0 has slid out.
        assert_eq!(
            counts(Slots::new(&w), W, 4, at(4_000)),
            WindowCounts::new(2, 0, 1)
        );
        // A write at epoch 5 rotates and zeroes epoch 1's bucket.
        record(Slots::new(&w), || 4, at(5_000), true, true);
        assert_eq!(
            counts(Slots::new(&w), W, 4, at(5_000)),
            WindowCounts::new(2, 1, 1)
        );
        // Far later, everything has expired.
        assert_eq!(
            counts(Slots::new(&w), W, 4, at(100_000)),
            WindowCounts::default()
        );
    }

    #[test]
    fn a_write_older_than_the_window_is_dropped() {
        let w = window(2);
        record(Slots::new(&w), || 2, at(10_000), false, false);
        record(Slots::new(&w), || 2, at(1_000), true, false);
        assert_eq!(
            counts(Slots::new(&w), W, 2, at(10_000)),
            WindowCounts::new(1, 0, 0)
        );
    }

    #[test]
    fn a_full_bucket_halves_its_counts_then_counts_on() {
        let w = window(1);
        let full = BUCKET_LIMIT | (BUCKET_LIMIT / 4) << FAILURES_SHIFT | 6 << SLOW_SHIFT;
        w.slice[FIRST_BUCKET].store(full, Ordering::Relaxed);
        record(Slots::new(&w), || 1, at(0), true, true);
        // The call that found it full counts, and is halved with the rest:
        // (LIMIT + 1) / 2 calls, (LIMIT / 4 + 1) / 2 failures, 7 / 2 slow.
        assert_eq!(
            counts(Slots::new(&w), W, 1, at(0)),
            WindowCounts {
                calls: (BUCKET_LIMIT / 2) as u32,
                failures: (BUCKET_LIMIT / 8) as u32,
                slow: 3,
            }
        );
        // The next call finds it below the limit and only adds.
        record(Slots::new(&w), || 1, at(0), false, false);
        assert_eq!(
            counts(Slots::new(&w), W, 1, at(0)).calls,
            (BUCKET_LIMIT / 2 + 1) as u32
        );
    }

    /// Halving starts with the call that finds the bucket full, not with
    /// the one that fills it: LIMIT − 1 calls and one more hold LIMIT; the
    /// next halves them, itself included: LIMIT + 1 calls to LIMIT / 2.
    #[test]
    fn the_call_that_fills_a_bucket_is_counted_the_next_halves_it() {
        let w = window(1);
        w.slice[FIRST_BUCKET].store(BUCKET_LIMIT - 1, Ordering::Relaxed);
        record(Slots::new(&w), || 1, at(0), false, false);
        assert_eq!(
            counts(Slots::new(&w), W, 1, at(0)).calls,
            BUCKET_LIMIT as u32
        );
        record(Slots::new(&w), || 1, at(0), false, false);
        assert_eq!(
            counts(Slots::new(&w), W, 1, at(0)).calls,
            (BUCKET_LIMIT / 2) as u32
        );
    }

    /// Far past the limit, in one bucket, the rates stay those of the calls.
    #[test]
    fn rates_survive_millions_of_calls_in_one_bucket() {
        let w = window(1);
        for i in 0..3 * BUCKET_LIMIT {
            record(Slots::new(&w), || 1, at(0), i % 4 == 0, i % 10 == 0);
        }
        let c = counts(Slots::new(&w), W, 1, at(0));
        assert!(u64::from(c.calls) <= BUCKET_LIMIT, "{c:?}");
        assert!((c.failure_rate() - 0.25).abs() < 0.001, "{c:?}");
        assert!((c.slow_call_rate() - 0.1).abs() < 0.001, "{c:?}");
    }

    /// A bucket that has seen a million successes still sees the failures
    /// that follow them: 1.1 M successes, then 2 M failures, all in one bucket.
    #[test]
    fn failures_after_a_million_successes_still_count() {
        let w = window(1);
        for _ in 0..1_100_000 {
            record(Slots::new(&w), || 1, at(0), false, false);
        }
        for _ in 0..2_000_000 {
            record(Slots::new(&w), || 1, at(0), true, false);
        }
        let c = counts(Slots::new(&w), W, 1, at(0));
        assert!(c.failure_rate() > 0.6, "{c:?}");
    }

    /// The packed word gives back its epoch and the epoch's bucket, and
    /// orders as the epochs do, at every bucket count and at the ends of the
    /// epoch's range.
    #[test]
    fn the_packed_word_round_trips_and_orders_as_its_epoch() {
        for b in 1..=crate::window::MAX_TIME_BUCKETS {
            let bb = u64::from(b);
            let mut epochs = vec![
                0,
                1,
                bb - 1,
                bb,
                bb + 1,
                2 * bb + 3,
                MAX_EPOCH - 1,
                MAX_EPOCH,
            ];
            epochs.extend([MAX_EPOCH / 2, MAX_EPOCH - bb, MAX_EPOCH - bb - 1]);
            epochs.sort_unstable();
            epochs.dedup();
            for (i, &e) in epochs.iter().enumerate() {
                let w = pack(e, b);
                assert_eq!(epoch_of(w), e, "b {b} e {e}");
                assert_eq!(w & SLOT_MASK, 1 + e % bb, "b {b} e {e}");
                if let Some(&next) = epochs.get(i + 1) {
                    assert!(w < pack(next, b), "b {b}: {e} < {next}");
                }
            }
        }
    }

    /// A width of 2048 ns or more never reaches the last epoch the word
    /// holds, so its epoch is the plain division at every time; a narrower
    /// one reaches it 2⁵³ widths after the origin and stays there.
    #[test]
    fn the_epoch_is_the_division_below_the_last_one() {
        for width in [2048, 2049, 1_000_000, u64::MAX / 3, u64::MAX] {
            for t in [0, 1, width - 1, width, u64::MAX - 1, u64::MAX] {
                assert_eq!(epoch_at(at(t), width), t / width, "{t} / {width}");
            }
        }
        for width in [1000, 1001, 1024, 2047] {
            let last = MAX_EPOCH * width;
            assert_eq!(epoch_at(at(last - 1), width), MAX_EPOCH - 1, "{width}");
            assert_eq!(epoch_at(at(last), width), MAX_EPOCH, "{width}");
            assert_eq!(epoch_at(at(u64::MAX), width), MAX_EPOCH, "{width}");
        }
    }

    /// At the far end of the clock (the last epoch, with a narrow width)
    /// a call still counts, in the last epoch, and later ones with it.
    #[test]
    fn calls_at_the_end_of_time_count_in_the_last_epoch() {
        for (width, b) in [
            (1000, 1024),
            (1023, 600),
            (2047, 1024),
            (2048, 1024),
            (W, 4),
        ] {
            let w = window_of(b, width);
            record(Slots::new(&w), || b, Nanos::NEVER, true, false);
            record(Slots::new(&w), || b, Nanos::NEVER, false, true);
            record(Slots::new(&w), || b, at(u64::MAX - 1), false, false);
            assert_eq!(
                counts(Slots::new(&w), width, b, Nanos::NEVER),
                WindowCounts::new(3, 1, 1),
                "width {width}, {b} buckets"
            );
        }
    }

    /// Each end of an epoch: its first nanosecond is in it, the one past its
    /// last is in the next, on the word's fast path as on a rotation.
    #[test]
    fn a_call_lands_in_its_epoch_at_both_ends() {
        let w = window(3);
        record(Slots::new(&w), || 3, at(5 * W), false, false); // epoch 5: rotates
        record(Slots::new(&w), || 3, at(5 * W + W - 1), true, false); // epoch 5, its last ns
        record(Slots::new(&w), || 3, at(6 * W), false, true); // epoch 6: rotates
        record(Slots::new(&w), || 3, at(6 * W), false, true); // epoch 6, its first ns
        record(Slots::new(&w), || 3, at(6 * W - 1), true, false); // back in epoch 5
                                                                  // Epoch 5 slides out at epoch 8; epoch 6 at epoch 9.
        assert_eq!(
            counts(Slots::new(&w), W, 3, at(7 * W + W - 1)),
            WindowCounts::new(5, 2, 2)
        );
        assert_eq!(
            counts(Slots::new(&w), W, 3, at(8 * W)),
            WindowCounts::new(2, 0, 2)
        );
        assert_eq!(
            counts(Slots::new(&w), W, 3, at(9 * W)),
            WindowCounts::default()
        );
    }

    /// What the window does, in the plainest terms: every call kept with its
    /// epoch; a call more than B epochs older than the latest one written is
    /// dropped; the counts at `now` are those of the last B epochs up to
    /// `max(epoch(now), latest)`; a reset forgets every call and moves the
    /// latest epoch up to now's.
    #[derive(Default)]
    struct Model {
        calls: Vec<(u64, bool, bool)>,
        latest: u64,
    }

    impl Model {
        fn record(&mut self, b: u64, epoch: u64, failure: bool, slow: bool) {
            if epoch + b <= self.latest {
                return;
            }
            self.latest = self.latest.max(epoch);
            self.calls.push((epoch, failure, slow));
        }
        fn counts(&self, b: u64, epoch: u64) -> WindowCounts {
            let top = epoch.max(self.latest);
            let mut c = WindowCounts::default();
            for &(e, failure, slow) in &self.calls {
                if e + b > top {
                    c.calls += 1;
                    c.failures += u32::from(failure);
                    c.slow += u32::from(slow);
                }
            }
            c
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Record(u64, bool, bool),
        Counts(u64),
        Reset(u64),
    }

    fn ops(width: u64) -> impl Strategy<Value = Vec<Op>> {
        // Times near each other (the same and neighbouring epochs, each
        // epoch's ends), and jumps of any size, both ways.
        let t = prop_oneof![
            4 => (0u64..64, Just(0u64)),
            2 => (0u64..64, prop_oneof![Just(1u64), Just(width - 1)]),
            1 => (0u64..=u64::MAX / width, Just(0u64)),
        ]
        .prop_map(move |(e, off)| e.saturating_mul(width).saturating_add(off));
        let t = t.boxed();
        prop::collection::vec(
            prop_oneof![
                8 => (t.clone(), any::<bool>(), any::<bool>()).prop_map(|(t, f, s)| Op::Record(t, f, s)),
                2 => t.clone().prop_map(Op::Counts),
                1 => t.prop_map(Op::Reset),
            ],
            1..60,
        )
    }

    use proptest::prelude::*;

    proptest! {
        /// The window, rotations and all, counts what the model counts, at
        /// widths of 2048 ns and more (where every epoch is the division).
        #[test]
        fn the_window_counts_what_the_model_counts(
            (width, b, ops) in (prop_oneof![Just(2048u64), Just(W * 1024), 2048u64..1 << 40], 1u32..=12)
                .prop_flat_map(|(width, b)| (Just(width), Just(b), ops(width)))
        ) {
            let w = window_of(b, width);
            let mut m = Model::default();
            let bb = u64::from(b);
            for op in ops {
                match op {
                    Op::Record(t, f, s) => {
                        record(Slots::new(&w), || b, at(t), f, s);
                        m.record(bb, t / width, f, s);
                    }
                    Op::Counts(t) => {
                        prop_assert_eq!(counts(Slots::new(&w), width, b, at(t)), m.counts(bb, t / width), "at {}", t);
                    }
                    Op::Reset(t) => {
                        reset(Slots::new(&w), width, b, at(t));
                        m.calls.clear();
                        m.latest = m.latest.max(t / width);
                    }
                }
            }
        }
    }

    #[test]
    fn reset_empties_and_keeps_the_epoch() {
        let w = window(3);
        record(Slots::new(&w), || 3, at(7_000), true, false);
        reset(Slots::new(&w), W, 3, at(8_000));
        assert_eq!(
            counts(Slots::new(&w), W, 3, at(8_000)),
            WindowCounts::default()
        );
        record(Slots::new(&w), || 3, at(8_000), true, false);
        assert_eq!(counts(Slots::new(&w), W, 3, at(8_000)).failures, 1);
    }
}
