//! The registry's bounds: how many entries (capacity) and how many key bytes
//! it may hold. Both are reserved before the table change they pay for and
//! released after the eviction or removal that frees them, so they are exact.

use core::fmt;

use crate::sync::{AtomicUsize, Ordering};

/// A key-byte budget and how to measure a key against it.
pub(crate) type KeyBudget<K> = Option<(usize, fn(&K) -> usize)>;

/// Entry slots and key bytes.
pub(crate) struct Budget<K> {
    capacity: Option<usize>,
    /// Entries in the maps (counted only with a capacity).
    slots: AtomicUsize,
    /// The key-byte budget and how to measure a key.
    bytes: KeyBudget<K>,
    /// Key bytes held (counted only with a budget).
    used_bytes: AtomicUsize,
}

impl<K> Budget<K> {
    pub(crate) fn new(capacity: Option<usize>, bytes: KeyBudget<K>) -> Self {
        Budget {
            capacity,
            slots: AtomicUsize::new(0),
            bytes,
            used_bytes: AtomicUsize::new(0),
        }
    }

    pub(crate) fn capacity(&self) -> Option<usize> {
        self.capacity
    }

    /// The key-byte budget, if any.
    pub(crate) fn max_key_bytes(&self) -> Option<usize> {
        self.bytes.map(|(max, _)| max)
    }

    /// Key bytes held now (0 without a budget).
    pub(crate) fn key_bytes(&self) -> usize {
        // Relaxed: a statistic.
        self.used_bytes.load(Ordering::Relaxed)
    }

    /// Takes an entry slot if one is left (always, without a capacity).
    pub(crate) fn reserve_slot(&self) -> bool {
        let Some(cap) = self.capacity else {
            return true;
        };
        // Relaxed: a budget, like the fleet's; the shard lock orders the insert
        // it pays for, and a release happens only after the matching removal.
        self.slots
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < cap).then_some(n + 1)
            })
            .is_ok()
    }

    /// Takes a slot even past the capacity (an insert the operator asked for).
    pub(crate) fn force_slot(&self) {
        if self.capacity.is_some() {
            // Relaxed: see `reserve_slot`.
            self.slots.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Takes `key`'s bytes if they fit the budget (always, without one).
    pub(crate) fn reserve_bytes(&self, key: &K) -> bool {
        let Some((max, measure)) = self.bytes else {
            return true;
        };
        let need = measure(key);
        // Relaxed: see `reserve_slot`.
        self.used_bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                n.checked_add(need).filter(|&m| m <= max)
            })
            .is_ok()
    }

    /// Takes `key`'s bytes even past the budget.
    pub(crate) fn force_bytes(&self, key: &K) {
        if let Some((_, measure)) = self.bytes {
            // Relaxed: see `reserve_slot`.
            self.used_bytes.fetch_add(measure(key), Ordering::Relaxed);
        }
    }

    /// Gives back one slot.
    pub(crate) fn release_slot(&self) {
        if self.capacity.is_some() {
            // Relaxed: see `reserve_slot`.
            self.slots.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Gives back `key`'s bytes.
    pub(crate) fn release_bytes(&self, key: &K) {
        if let Some((_, measure)) = self.bytes {
            // Relaxed: see `reserve_slot`.
            self.used_bytes.fetch_sub(measure(key), Ordering::Relaxed);
        }
    }
}

impl<K> fmt::Debug for Budget<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Budget")
            .field("capacity", &self.capacity)
            .field("max_key_bytes", &self.max_key_bytes())
            .field("key_bytes", &self.key_bytes())
            .finish()
    }
}
