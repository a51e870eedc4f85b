//! A breaker's heap slots: its call counters, then its window, in one
//! allocation made when the breaker is built — none at all for a breaker
//! with neither (the consecutive-failures policy).
//!
//! The allocation is a `triomphe::ThinArc`: a thin pointer (8 bytes in the
//! breaker) to a header holding the length, then the slots. Its reference
//! count is unused (one owner); the crate needs no `unsafe` for a thin slice.

use core::fmt;

use crate::counters::{self, Counters};
use crate::sync::AtomicU64;
use crate::window::{Shape, Window};

/// The slots, or nothing.
pub(crate) struct Storage(Option<triomphe::ThinArc<(), AtomicU64>>);

impl Storage {
    /// Slots for the counters (if `counts_calls`) followed by a window of
    /// `shape`, all zero.
    pub(crate) fn new(counts_calls: bool, shape: Shape) -> Storage {
        let len = if counts_calls { counters::SLOTS } else { 0 } + shape.slots();
        if len == 0 {
            return Storage(None);
        }
        Storage(Some(triomphe::ThinArc::from_header_and_iter(
            (),
            (0..len).map(|_| AtomicU64::new(0)),
        )))
    }

    #[inline]
    fn slots(&self) -> &[AtomicU64] {
        match &self.0 {
            Some(arc) => &arc.slice,
            None => &[],
        }
    }

    /// The call counters, when the breaker keeps them.
    #[inline]
    pub(crate) fn counters(&self, counts_calls: bool) -> Option<Counters<'_>> {
        counts_calls.then(|| Counters::new(&self.slots()[..counters::SLOTS]))
    }

    /// The window of `shape` (empty for [`Shape::None`]).
    #[inline]
    pub(crate) fn window(&self, counts_calls: bool, shape: Shape) -> Window<'_> {
        let from = if counts_calls { counters::SLOTS } else { 0 };
        Window::new(&self.slots()[from..], shape)
    }

    /// Bytes on the heap: the header (reference count, length) and the slots.
    pub(crate) fn heap_bytes(&self) -> usize {
        match &self.0 {
            Some(arc) => 2 * core::mem::size_of::<usize>() + core::mem::size_of_val(&arc.slice),
            None => 0,
        }
    }
}

impl fmt::Debug for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Storage")
            .field("slots", &self.slots().len())
            .finish()
    }
}
