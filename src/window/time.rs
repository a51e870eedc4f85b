//! The time-based window: the calls of the last `length`, in B buckets.
//!
//! Layout: `slots[0]` is the current epoch (`now / width`, where
//! `width = length / B`); `slots[1 + e % B]` holds epoch `e`'s counts packed as
//! `calls:22 | failures:21 | slow:21`.
//!
//! No timer rotates the buckets. The first writer that sees a newer epoch
//! advances it with one CAS and, as the winner, zeroes the buckets it skipped.
//! A healthy call is one load of the epoch, one load of the bucket and one
//! `fetch_add`.
//!
//! A bucket never silently stops counting. The writer that finds it holding
//! [`BUCKET_LIMIT`] (2²⁰) calls halves all three counts with one CAS before
//! adding its own, so the bucket's failure and slow-call rates stay those of
//! its calls (weighted toward the recent ones once it has halved) at any
//! request rate — 200k requests a second to one host fill a 10 s bucket
//! twice over. The fields leave room for 2²⁰ writers racing past the check.

use core::time::Duration;

use super::WindowCounts;
use crate::clock::Nanos;
use crate::sync::{AtomicU64, Ordering};

const CALLS_SHIFT: u32 = 0;
const FAILURES_SHIFT: u32 = 22;
const SLOW_SHIFT: u32 = 43;
const CALLS_MASK: u64 = (1 << 22) - 1;
const FIELD21_MASK: u64 = (1 << 21) - 1;
/// A bucket holding this many calls is halved before the next one is added.
/// Small under loom, so a model reaches it in a few calls.
pub(crate) const BUCKET_LIMIT: u64 = if cfg!(failfast_loom) { 4 } else { 1 << 20 };

pub(crate) fn slots_for(buckets: u32) -> usize {
    1 + buckets as usize
}

/// Nanoseconds per bucket (at least 1; validated at build).
#[inline]
pub(crate) fn width(length: Duration, buckets: u32) -> u64 {
    let w = length.as_nanos() / u128::from(buckets);
    (w.min(u128::from(u64::MAX)) as u64).max(1)
}

#[inline(always)]
pub(crate) fn record(
    slots: &[AtomicU64],
    width: u64,
    buckets: u32,
    now: Nanos,
    failure: bool,
    slow: bool,
) {
    let epoch = now.as_nanos() / width;
    // Relaxed: the epoch orders nothing else; a stale read only makes this
    // writer try to rotate (CAS) or write one bucket late, which the module
    // docs count as racing skew.
    let current = slots[0].load(Ordering::Relaxed);
    if epoch > current {
        rotate(slots, buckets, current, epoch);
    } else if current - epoch >= u64::from(buckets) {
        return; // older than the whole window: nothing to count it in
    }
    let bucket = &slots[1 + (epoch % u64::from(buckets)) as usize];
    // Relaxed: statistics (see above).
    let seen = bucket.load(Ordering::Relaxed);
    if seen & CALLS_MASK >= BUCKET_LIMIT {
        halve(bucket, seen);
    }
    let add = (1 << CALLS_SHIFT)
        | (u64::from(failure) << FAILURES_SHIFT)
        | (u64::from(slow) << SLOW_SHIFT);
    bucket.fetch_add(add, Ordering::Relaxed);
}

/// Halves a full bucket's three counts, keeping its rates. A CAS loop, not a
/// store: a store would wipe out the calls added since `seen`. Stops as soon
/// as the bucket is below the limit (another writer halved it, or a rotation
/// zeroed it).
#[cold]
fn halve(bucket: &AtomicU64, mut seen: u64) {
    while seen & CALLS_MASK >= BUCKET_LIMIT {
        let half = (((seen >> CALLS_SHIFT) & CALLS_MASK) / 2) << CALLS_SHIFT
            | (((seen >> FAILURES_SHIFT) & FIELD21_MASK) / 2) << FAILURES_SHIFT
            | (((seen >> SLOW_SHIFT) & FIELD21_MASK) / 2) << SLOW_SHIFT;
        // Relaxed: statistics, as for the `fetch_add` it precedes.
        match bucket.compare_exchange_weak(seen, half, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return,
            Err(actual) => seen = actual,
        }
    }
}

/// Moves the epoch from `seen` to `epoch`; the CAS winner zeroes the buckets
/// of the epochs it skipped (at most all B of them).
fn rotate(slots: &[AtomicU64], buckets: u32, seen: u64, epoch: u64) {
    let mut current = seen;
    while current < epoch {
        // Relaxed: a rotation publishes nothing but the epoch itself.
        match slots[0].compare_exchange_weak(current, epoch, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => {
                let skipped = (epoch - current).min(u64::from(buckets));
                for e in (epoch + 1 - skipped)..=epoch {
                    // Relaxed: see above.
                    slots[1 + (e % u64::from(buckets)) as usize].store(0, Ordering::Relaxed);
                }
                return;
            }
            Err(actual) => current = actual,
        }
    }
}

pub(crate) fn counts(slots: &[AtomicU64], width: u64, buckets: u32, now: Nanos) -> WindowCounts {
    // Relaxed: statistics.
    let current = slots[0].load(Ordering::Relaxed);
    let epoch = (now.as_nanos() / width).max(current);
    let mut total = WindowCounts::default();
    for age in 0..u64::from(buckets) {
        let Some(e) = epoch.checked_sub(age) else {
            break;
        };
        if e > current {
            continue; // not rotated in yet: that bucket still holds an old epoch
        }
        let b = slots[1 + (e % u64::from(buckets)) as usize].load(Ordering::Relaxed);
        total.calls += ((b >> CALLS_SHIFT) & CALLS_MASK) as u32;
        total.failures += ((b >> FAILURES_SHIFT) & FIELD21_MASK) as u32;
        total.slow += ((b >> SLOW_SHIFT) & FIELD21_MASK) as u32;
    }
    total.failures = total.failures.min(total.calls);
    total.slow = total.slow.min(total.calls);
    total
}

pub(crate) fn reset(slots: &[AtomicU64], width: u64, buckets: u32, now: Nanos) {
    // Relaxed: as for the count window's reset.
    for slot in &slots[1..slots_for(buckets)] {
        slot.store(0, Ordering::Relaxed);
    }
    slots[0].fetch_max(now.as_nanos() / width, Ordering::Relaxed);
}

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;

    const W: u64 = 1_000; // 1 µs buckets
    fn window(b: u32) -> Vec<AtomicU64> {
        (0..slots_for(b)).map(|_| AtomicU64::new(0)).collect()
    }
    fn at(n: u64) -> Nanos {
        Nanos::from_nanos(n)
    }

    #[test]
    fn counts_only_the_last_b_buckets() {
        let w = window(4);
        record(&w, W, 4, at(0), true, false); // epoch 0
        record(&w, W, 4, at(1_500), false, true); // epoch 1
        record(&w, W, 4, at(3_999), false, false); // epoch 3
        assert_eq!(counts(&w, W, 4, at(3_999)), WindowCounts::new(3, 1, 1));
        // At epoch 4, epoch 0 has slid out.
        assert_eq!(counts(&w, W, 4, at(4_000)), WindowCounts::new(2, 0, 1));
        // A write at epoch 5 rotates and zeroes epoch 1's bucket.
        record(&w, W, 4, at(5_000), true, true);
        assert_eq!(counts(&w, W, 4, at(5_000)), WindowCounts::new(2, 1, 1));
        // Far later, everything has expired.
        assert_eq!(counts(&w, W, 4, at(100_000)), WindowCounts::default());
    }

    #[test]
    fn a_write_older_than_the_window_is_dropped() {
        let w = window(2);
        record(&w, W, 2, at(10_000), false, false);
        record(&w, W, 2, at(1_000), true, false);
        assert_eq!(counts(&w, W, 2, at(10_000)), WindowCounts::new(1, 0, 0));
    }

    #[test]
    fn a_full_bucket_halves_its_counts_then_counts_on() {
        let w = window(1);
        let full = BUCKET_LIMIT | (BUCKET_LIMIT / 4) << FAILURES_SHIFT | 6 << SLOW_SHIFT;
        w[1].store(full, Ordering::Relaxed);
        record(&w, W, 1, at(0), true, true);
        assert_eq!(
            counts(&w, W, 1, at(0)),
            WindowCounts {
                calls: (BUCKET_LIMIT / 2 + 1) as u32,
                failures: (BUCKET_LIMIT / 8 + 1) as u32,
                slow: 3 + 1,
            }
        );
    }

    /// Far past the limit, in one bucket, the rates stay those of the calls.
    #[test]
    fn rates_survive_millions_of_calls_in_one_bucket() {
        let w = window(1);
        for i in 0..3 * BUCKET_LIMIT {
            record(&w, W, 1, at(0), i % 4 == 0, i % 10 == 0);
        }
        let c = counts(&w, W, 1, at(0));
        assert!(u64::from(c.calls) <= BUCKET_LIMIT + 1, "{c:?}");
        assert!((c.failure_rate() - 0.25).abs() < 0.001, "{c:?}");
        assert!((c.slow_call_rate() - 0.1).abs() < 0.001, "{c:?}");
    }

    /// A bucket that has seen a million successes still sees the failures
    /// that follow them: 1.1 M successes, then 2 M failures, all in one bucket.
    #[test]
    fn failures_after_a_million_successes_still_count() {
        let w = window(1);
        for _ in 0..1_100_000 {
            record(&w, W, 1, at(0), false, false);
        }
        for _ in 0..2_000_000 {
            record(&w, W, 1, at(0), true, false);
        }
        let c = counts(&w, W, 1, at(0));
        assert!(c.failure_rate() > 0.6, "{c:?}");
    }

    #[test]
    fn reset_empties_and_keeps_the_epoch() {
        let w = window(3);
        record(&w, W, 3, at(7_000), true, false);
        reset(&w, W, 3, at(8_000));
        assert_eq!(counts(&w, W, 3, at(8_000)), WindowCounts::default());
        record(&w, W, 3, at(8_000), true, false);
        assert_eq!(counts(&w, W, 3, at(8_000)).failures, 1);
    }
}
