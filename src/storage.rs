//! A breaker's heap slots: its window, then the slot of an upstream's
//! remembered hint, then an outlier pool's two (the tally and the ejection
//! mark), then a retry budget's one or two (and, with call counters, the
//! count of retries it refused), then its call counters, in one allocation
//! made when the breaker is built — none at all for a breaker with none of
//! them (the consecutive-failures policy with hints off, in no pool, no
//! retry budget).
//!
//! The allocation is a `triomphe::ThinArc`: a thin pointer (8 bytes in the
//! breaker) to a header, then the slots. The header holds the window's head
//! word (the count window's cursor, the time window's epoch) beside the
//! slice's length: a healthy call reads the head at a fixed offset, with no
//! bounds check. The window's body comes first in the slice, so a verdict
//! finds it at offset 0 whatever the flags; it reads only its own
//! [`Shape::slots`]. The hint's slot, when hints are on, comes right after
//! the window's. The counters are the last [`counters::SLOTS`]. A breaker
//! with counters and no window keeps an unused head (8 bytes). The reference
//! count is unused (one owner); the crate needs no `unsafe` for a thin slice.

use core::fmt;

use crate::counters::{self, Counters};
use crate::retry::Rules;
use crate::sync::AtomicU64;
use crate::window::{Shape, SlotArc, Slots, Window};

/// The slots a pooled breaker keeps.
pub(crate) const POOL_SLOTS: usize = 2;

/// A pooled breaker's two slots.
#[derive(Copy, Clone)]
pub(crate) struct PoolSlots<'a> {
    /// The interval's tally (`outlier::tally`).
    pub(crate) tally: &'a AtomicU64,
    /// The generation (+ 1) and rule of the breaker's outlier ejection while
    /// it lasts, else 0.
    pub(crate) mark: &'a AtomicU64,
}

/// The window's head in the header and the slots, or nothing.
pub(crate) struct Storage(Option<SlotArc>);

/// What every breaker of one configuration starts its storage with,
/// computed once per configuration: the window's head, then every slot's
/// initial value — the window's (its constants, [`Shape::initial`]), the
/// hint's, the pool's, the retry budget's ([`Rules::initial`]), its
/// refused count, the counters — so that building a breaker copies them
/// and decides nothing.
#[derive(Clone, Debug, Default)]
pub(crate) struct Layout {
    head: u64,
    initial: Box<[u64]>,
}

impl Layout {
    /// The layout of a window of `shape` followed by the hint's slot (if
    /// `hints`), the pool's (if `pooled`), the retry budget's (if any) and
    /// the counters (if `counts_calls`).
    pub(crate) fn new(
        counts_calls: bool,
        shape: Shape,
        hints: bool,
        pooled: bool,
        retry: Option<Rules>,
    ) -> Layout {
        let retry_at = Storage::retry_at(shape, hints, pooled);
        let retry_slots = retry.map_or(0, |rules| Storage::retry_slots(rules, counts_calls));
        let len = if counts_calls { counters::SLOTS } else { 0 } + retry_at + retry_slots;
        let initial = (0..len)
            .map(|i| match retry {
                Some(rules) if (retry_at..retry_at + rules.slots()).contains(&i) => {
                    rules.initial(i - retry_at)
                }
                Some(_) if (retry_at..retry_at + retry_slots).contains(&i) => 0, // refused
                _ => shape.initial(i),
            })
            .collect();
        Layout {
            head: shape.initial_head(),
            initial,
        }
    }
}

impl Storage {
    /// The storage a breaker of this layout starts with: a copy of
    /// `layout`'s initial values (none: no allocation).
    #[inline]
    pub(crate) fn new(layout: &Layout) -> Storage {
        if layout.initial.is_empty() {
            return Storage(None);
        }
        Storage(Some(SlotArc::from_header_and_iter(
            AtomicU64::new(layout.head),
            layout.initial.iter().map(|&v| AtomicU64::new(v)),
        )))
    }

    /// Where a retry budget's slots begin: after the window's, the hint's
    /// and the pool's.
    pub(crate) fn retry_at(shape: Shape, hints: bool, pooled: bool) -> usize {
        Storage::pool_at(shape, hints) + if pooled { POOL_SLOTS } else { 0 }
    }

    /// The slots a retry budget takes: its own, and the count of retries it
    /// refused when the breaker counts calls.
    pub(crate) fn retry_slots(rules: Rules, counts_calls: bool) -> usize {
        rules.slots() + usize::from(counts_calls)
    }

    /// The slot of an upstream's remembered hint (an instant, 0 when none),
    /// when the storage was made with one (`hints`).
    #[inline]
    pub(crate) fn hint_slot(&self, shape: Shape, hints: bool) -> Option<&AtomicU64> {
        if !hints {
            return None;
        }
        self.slots()?.body().get(shape.slots())
    }

    /// Where an outlier pool's slots begin: after the window's and the
    /// hint's.
    pub(crate) fn pool_at(shape: Shape, hints: bool) -> usize {
        shape.slots() + usize::from(hints)
    }

    /// An outlier pool's slots from `at` ([`pool_at`](Self::pool_at)): the
    /// host's tally and its ejection mark (see `outlier`).
    #[inline(always)]
    pub(crate) fn pool_slots(&self, at: usize) -> Option<PoolSlots<'_>> {
        Some(PoolSlots {
            tally: self.slot(at)?,
            mark: self.slot(at + 1)?,
        })
    }

    /// Slot `at` of the body, if there is one.
    #[inline(always)]
    pub(crate) fn slot(&self, at: usize) -> Option<&AtomicU64> {
        self.slots()?.body().get(at)
    }

    #[inline(always)]
    pub(crate) fn slots(&self) -> Option<Slots<'_>> {
        self.0.as_ref().map(Slots::new)
    }

    /// The call counters, when the breaker keeps them.
    #[inline(always)]
    pub(crate) fn counters(&self, counts_calls: bool) -> Option<Counters<'_>> {
        counts_calls.then(|| {
            let body = self.slots().map_or(&[][..], |s| s.body());
            Counters::new(&body[body.len() - counters::SLOTS..])
        })
    }

    /// The window of `shape` (empty for [`Shape::None`]): the slots from
    /// the first, of which it reads its own.
    #[inline(always)]
    pub(crate) fn window(&self, shape: Shape) -> Window<'_> {
        Window::new(self.slots(), shape)
    }

    /// Bytes on the heap: the reference count, the header (the window's
    /// head, the length) and the slots.
    pub(crate) fn heap_bytes(&self) -> usize {
        match &self.0 {
            Some(arc) => {
                2 * core::mem::size_of::<usize>()
                    + core::mem::size_of::<AtomicU64>()
                    + core::mem::size_of_val(&arc.slice)
            }
            None => 0,
        }
    }
}

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;
    use crate::clock::Nanos;
    use crate::outcome::Verdict;
    use crate::window::{WindowCounts, WindowKind};
    use core::num::NonZeroU32;

    #[test]
    fn window_and_counters_keep_to_their_own_slots() {
        let size = NonZeroU32::new(40).unwrap();
        for kind in [
            WindowKind::Count { size: size.get() },
            WindowKind::Time {
                length: core::time::Duration::from_secs(1),
                buckets: 4,
            },
        ] {
            let storage = Storage::new(&Layout::new(true, Shape::of(kind), true, true, None));
            let counters = storage.counters(true).unwrap();
            counters.admitted();
            counters.verdict(Verdict::Failure, false);
            let window = storage.window(Shape::of(kind));
            window.record(Nanos::ZERO, true, true);
            assert_eq!(
                window.counts(Nanos::ZERO),
                WindowCounts::new(1, 1, 1),
                "{kind:?}: the counters do not leak into the window"
            );
            window.reset(Nanos::ZERO);
            assert_eq!(window.counts(Nanos::ZERO), WindowCounts::default());
            let calls = storage.counters(true).unwrap().read();
            assert_eq!(
                (calls.admitted, calls.failures),
                (1, 1),
                "{kind:?}: a reset keeps the counters"
            );
        }
    }

    /// A first try with a ratio budget and neither counters nor a pool
    /// finds the budget's slots as the storage's last (`deposit_only`).
    #[test]
    fn without_counters_or_a_pool_the_ratio_budget_is_last() {
        let ratio = crate::retry::ratio::Ratio::new(200, core::time::Duration::from_secs(10), 10);
        let count = WindowKind::Count { size: 40 };
        for shape in [Shape::None, Shape::of(count)] {
            for hints in [false, true] {
                let layout = Layout::new(false, shape, hints, false, Some(Rules::Ratio(ratio)));
                let at = Storage::retry_at(shape, hints, false);
                assert_eq!(layout.initial.len(), at + crate::retry::ratio::SLOTS);
                assert_eq!(layout.initial[at..], [ratio.initial(0), ratio.initial(1)]);
            }
        }
    }
}

impl fmt::Debug for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Storage")
            .field("slots", &self.slots().map_or(0, |s| s.body().len()))
            .finish()
    }
}
