//! Outcome accounting while CLOSED: a count-based or a time-based window.
//!
//! Consecutive failures are not here: they live in the state word's count
//! field, so a success that clears no run costs no write at all.
//!
//! Both windows are a head word and a slice of atomics in the breaker's one
//! heap allocation (its storage, made when the breaker is built, never on the
//! request path), whose layout depends on the [`WindowKind`]:
//!
//! * [`count`]: the last N calls as a ring of 2-bit entries (failure, slow).
//! * [`time`]: B buckets of packed (calls, failures, slow), rotated lazily by
//!   epoch on the request path, with no timer.
//!
//! # Concurrency
//!
//! Sequential use is exact. A healthy call costs one read-modify-write, or
//! one load in a count window marked clean. Concurrent writers racing on the
//! same slot (two calls N apart in the count ring, or a write racing a bucket
//! rotation or a reset) may skew the window by at most the number of writers
//! in that race; in a count window, the calls skipped while a racing writer
//! or setter is between two of its steps keep a failure in for longer (see
//! [`count`], "The clean mark"). Counts are clamped to the window, and once
//! writers are quiescent the window is exact again.

pub(crate) mod count;
pub(crate) mod time;

use crate::clock::Nanos;
use crate::sync::AtomicU64;
use core::num::{NonZeroU32, NonZeroU64};
use core::time::Duration;

/// Largest count window.
pub const MAX_COUNT_WINDOW: u32 = 4096;
/// Most buckets in a time window.
pub const MAX_TIME_BUCKETS: u32 = 1024;

/// Where window-based rates are measured.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
#[non_exhaustive]
pub struct WindowCounts {
    /// Calls recorded (successes and failures; ignored calls are not counted).
    pub calls: u32,
    /// Failures among them.
    pub failures: u32,
    /// Slow calls among them, successes or failures.
    pub slow: u32,
}

impl WindowCounts {
    /// Counts of `calls` calls, `failures` failures and `slow` slow calls.
    ///
    /// ```
    /// use failfast::WindowCounts;
    /// let w = WindowCounts::new(4, 1, 2);
    /// assert_eq!((w.calls, w.failures, w.slow), (4, 1, 2));
    /// assert_eq!(w.failure_rate(), 0.25);
    /// ```
    pub const fn new(calls: u32, failures: u32, slow: u32) -> WindowCounts {
        WindowCounts {
            calls,
            failures,
            slow,
        }
    }

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

/// A window's shape, computed once from its [`WindowKind`] when the config
/// is built: what the request path needs, with the time window's bucket width
/// already divided out (no `u128` division per call).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    None,
    /// Nonzero (validated at build), so the ring's modulo needs no check.
    Count {
        size: NonZeroU32,
    },
    /// Both nonzero (the width is at least 1 ns, the buckets validated at
    /// build), so neither division needs a check.
    Time {
        width: NonZeroU64,
        buckets: NonZeroU32,
    },
}

impl Shape {
    pub(crate) fn of(kind: WindowKind) -> Shape {
        match kind {
            WindowKind::None => Shape::None,
            // A zero size is refused at build; `MIN` only keeps this total.
            WindowKind::Count { size } => Shape::Count {
                size: NonZeroU32::new(size).unwrap_or(NonZeroU32::MIN),
            },
            // `width` is at least 1; a zero `buckets` is refused at build.
            WindowKind::Time { length, buckets } => Shape::Time {
                width: NonZeroU64::new(time::width(length, buckets)).unwrap_or(NonZeroU64::MIN),
                buckets: NonZeroU32::new(buckets).unwrap_or(NonZeroU32::MIN),
            },
        }
    }

    /// The value the head of a window of this shape starts with: 0, but for
    /// the time window's, which names epoch 0's bucket slot (`time::pack`):
    /// a head of 0 would name the width's slot.
    pub(crate) fn initial_head(self) -> u64 {
        match self {
            Shape::Time { buckets, .. } => time::pack(0, buckets.get()),
            _ => 0,
        }
    }

    /// The value body slot `i` of a window of this shape starts with: 0,
    /// but for the time window's width (`time::WIDTH_SLOT`).
    pub(crate) fn initial(self, i: usize) -> u64 {
        match self {
            Shape::Time { width, .. } if i == time::WIDTH_SLOT => width.get(),
            _ => 0,
        }
    }

    /// The body slots a window of this shape takes (its head is in the
    /// storage's header).
    pub(crate) fn slots(self) -> usize {
        match self {
            Shape::None => 0,
            Shape::Count { size } => count::slots_for(size.get()),
            Shape::Time { buckets, .. } => time::slots_for(buckets.get()),
        }
    }
}

/// The storage's allocation: the window's head in the header, then the
/// slots (see `storage`).
pub(crate) type SlotArc = triomphe::ThinArc<AtomicU64, AtomicU64>;

/// A window's words in the breaker's storage: its head (the count window's
/// cursor, the time window's epoch word), which the storage keeps in its
/// header so a healthy call reads it at a fixed offset with no bounds check,
/// and its body ([`Shape::slots`] words, which may run on into the breaker's
/// counters: the window touches only its own). One pointer: the body's length
/// is read only by the paths that index it.
#[derive(Copy, Clone)]
pub(crate) struct Slots<'a>(&'a SlotArc);

impl<'a> Slots<'a> {
    #[inline(always)]
    pub(crate) fn new(arc: &'a SlotArc) -> Slots<'a> {
        Slots(arc)
    }

    #[inline(always)]
    pub(crate) fn head(self) -> &'a AtomicU64 {
        &self.0.header.header
    }

    #[inline(always)]
    pub(crate) fn body(self) -> &'a [AtomicU64] {
        &self.0.slice
    }
}

/// A window: its slots (none without storage) read by its shape.
#[derive(Copy, Clone)]
pub(crate) struct Window<'a> {
    slots: Option<Slots<'a>>,
    shape: Shape,
}

impl<'a> Window<'a> {
    #[inline(always)]
    pub(crate) fn new(slots: Option<Slots<'a>>, shape: Shape) -> Window<'a> {
        debug_assert!(
            shape == Shape::None || slots.is_some_and(|s| s.body().len() >= shape.slots())
        );
        Window { slots, shape }
    }

    /// Records one success or failure (never an ignored call).
    #[inline(always)]
    pub(crate) fn record(self, now: Nanos, failure: bool, slow: bool) {
        let Some(slots) = self.slots else { return };
        match self.shape {
            Shape::None => {}
            Shape::Count { size } => count::record(slots, size, failure, slow),
            // The width is read from the slots (`time::WIDTH_SLOT`).
            Shape::Time { buckets, .. } => {
                time::record(slots, || buckets.get(), now, failure, slow)
            }
        }
    }

    /// The calls, failures and slow calls in the window at `now`.
    pub(crate) fn counts(self, now: Nanos) -> WindowCounts {
        let Some(slots) = self.slots else {
            return WindowCounts::default();
        };
        match self.shape {
            Shape::None => WindowCounts::default(),
            Shape::Count { size } => count::counts(slots, size.get()),
            Shape::Time { width, buckets } => time::counts(slots, width.get(), buckets.get(), now),
        }
    }

    /// Empties the window (on entering Closed or MetricsOnly).
    pub(crate) fn reset(self, now: Nanos) {
        let Some(slots) = self.slots else { return };
        match self.shape {
            Shape::None => {}
            Shape::Count { size } => count::reset(slots, size.get()),
            Shape::Time { width, buckets } => time::reset(slots, width.get(), buckets.get(), now),
        }
    }
}
