//! Outcome accounting while CLOSED: a count-based or a time-based window.
//!
//! Consecutive failures are not here: they live in the state word's count
//! field, so a success that clears no run costs no write at all.
//!
//! Both windows are one boxed slice of atomics, allocated once when the
//! breaker is built (never on the request path), whose layout depends on the
//! [`WindowKind`]:
//!
//! * [`count`]: the last N calls as a ring of 2-bit entries (failure, slow).
//! * [`time`]: B buckets of packed (calls, failures, slow), rotated lazily by
//!   epoch on the request path, with no timer.
//!
//! # Concurrency
//!
//! Sequential use is exact. A healthy call costs one read-modify-write.
//! Concurrent writers racing on the same slot (two calls N apart in the count
//! ring, or a write racing a bucket rotation or a reset) may skew the window by
//! at most the number of writers in that race; counts are clamped to the
//! window, and once writers are quiescent the window is exact again.

pub(crate) mod count;
pub(crate) mod time;

use crate::clock::Nanos;
use crate::sync::AtomicU64;
use core::time::Duration;

/// Where window-based rates are measured.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum WindowKind {
    /// No window: only consecutive failures can trip the breaker.
    None,
    /// The last `size` calls.
    Count {
        /// Number of calls in the window.
        size: u32,
    },
    /// The calls of the last `length`, in `buckets` slices rotated lazily.
    Time {
        /// Length of the whole window.
        length: Duration,
        /// Number of slices; the window slides by `length / buckets`.
        buckets: u32,
    },
}

/// What a window holds: calls, failures and slow calls (exact when sequential).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct WindowCounts {
    /// Calls recorded (successes and failures; ignored calls are not counted).
    pub calls: u32,
    /// Failures among them.
    pub failures: u32,
    /// Slow calls among them, successes or failures.
    pub slow: u32,
}

impl WindowCounts {
    /// failures / calls, or 0 with no calls.
    pub fn failure_rate(&self) -> f64 {
        ratio(self.failures, self.calls)
    }

    /// slow / calls, or 0 with no calls.
    pub fn slow_call_rate(&self) -> f64 {
        ratio(self.slow, self.calls)
    }
}

pub(crate) fn ratio(part: u32, whole: u32) -> f64 {
    if whole == 0 {
        0.0
    } else {
        f64::from(part) / f64::from(whole)
    }
}

/// The window's atomics; the [`WindowKind`] (from the shared config) says how to read them.
pub(crate) struct Window {
    slots: Box<[AtomicU64]>,
}

impl Window {
    pub(crate) fn new(kind: WindowKind) -> Window {
        let len = match kind {
            WindowKind::None => 0,
            WindowKind::Count { size } => count::slots_for(size),
            WindowKind::Time { buckets, .. } => time::slots_for(buckets),
        };
        Window {
            slots: (0..len).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Bytes on the heap for this window.
    pub(crate) fn heap_bytes(&self) -> usize {
        core::mem::size_of_val(&*self.slots)
    }

    /// Records one success or failure (never an ignored call).
    #[inline]
    pub(crate) fn record(&self, kind: WindowKind, now: Nanos, failure: bool, slow: bool) {
        match kind {
            WindowKind::None => {}
            WindowKind::Count { size } => count::record(&self.slots, size, failure, slow),
            WindowKind::Time { length, buckets } => time::record(
                &self.slots,
                time::width(length, buckets),
                buckets,
                now,
                failure,
                slow,
            ),
        }
    }

    /// The calls, failures and slow calls in the window at `now`.
    pub(crate) fn counts(&self, kind: WindowKind, now: Nanos) -> WindowCounts {
        match kind {
            WindowKind::None => WindowCounts::default(),
            WindowKind::Count { size } => count::counts(&self.slots, size),
            WindowKind::Time { length, buckets } => {
                time::counts(&self.slots, time::width(length, buckets), buckets, now)
            }
        }
    }

    /// Empties the window (on entering Closed or MetricsOnly).
    pub(crate) fn reset(&self, kind: WindowKind, now: Nanos) {
        match kind {
            WindowKind::None => {}
            WindowKind::Count { .. } => count::reset(&self.slots),
            WindowKind::Time { length, buckets } => {
                time::reset(&self.slots, time::width(length, buckets), now)
            }
        }
    }
}

impl core::fmt::Debug for Window {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Window")
            .field("slots", &self.slots.len())
            .finish()
    }
}
