//! [`Bulkhead`]: a cap on calls in flight to one dependency.

use core::fmt;

use crate::error::{RejectReason, Rejected};
use crate::sync::{AtomicUsize, Ordering};

/// Limits calls in flight to one dependency: one atomic counter, an RAII
/// permit, immediate rejection when full, never a queue.
///
/// Put it *outside* the breaker (acquire the bulkhead first): its rejections
/// then never run the call, never take a breaker permit, and so never enter
/// the breaker's window (S1).
///
/// ```
/// use failfast::{Bulkhead, RejectReason};
///
/// let bulkhead = Bulkhead::new(2);
/// let a = bulkhead.try_acquire().unwrap();
/// let _b = bulkhead.try_acquire().unwrap();
/// assert_eq!(bulkhead.try_acquire().unwrap_err().reason(), RejectReason::BulkheadFull);
/// drop(a);
/// assert!(bulkhead.try_acquire().is_ok());
/// ```
pub struct Bulkhead {
    in_flight: AtomicUsize,
    max: usize,
}

impl Bulkhead {
    /// A bulkhead admitting at most `max` calls at once (`max` 0 admits none).
    pub fn new(max: usize) -> Bulkhead {
        Bulkhead {
            in_flight: AtomicUsize::new(0),
            max,
        }
    }

    /// The most calls admitted at once.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Calls in flight now.
    pub fn in_flight(&self) -> usize {
        // Relaxed: a gauge for display; admission does its own RMW.
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Takes a slot, or rejects at once with [`RejectReason::BulkheadFull`].
    ///
    /// # Errors
    ///
    /// [`Rejected`] when `max` calls are in flight.
    pub fn try_acquire(&self) -> Result<BulkheadPermit<'_>, Rejected> {
        // Relaxed: the counter guards no other memory; the RMW alone makes
        // the limit exact (no two callers can take the last slot).
        self.in_flight
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.max).then_some(n + 1)
            })
            .map(|_| BulkheadPermit { bulkhead: self })
            .map_err(|_| Rejected::new(RejectReason::BulkheadFull, None))
    }
}

impl fmt::Debug for Bulkhead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bulkhead")
            .field("in_flight", &self.in_flight())
            .field("max", &self.max)
            .finish()
    }
}

/// A slot in a [`Bulkhead`], given back on drop.
#[must_use = "the slot is released when the permit is dropped"]
pub struct BulkheadPermit<'a> {
    bulkhead: &'a Bulkhead,
}

impl Drop for BulkheadPermit<'_> {
    fn drop(&mut self) {
        // Relaxed: see `try_acquire`.
        self.bulkhead.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl fmt::Debug for BulkheadPermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BulkheadPermit").finish_non_exhaustive()
    }
}
