//! A shard's map: the shard's entries, read with no lock.
//!
//! Each shard keeps its entries in a papaya map (lock-free reads under an
//! epoch guard of `seize`; `ResizeMode::Blocking`, so a reader never
//! searches two tables). Writers are the shard's business: every insert and
//! removal happens under the shard's mutex, so the map sees one writer at a
//! time.
//!
//! What failfast takes from papaya as given — its crate docs, "Consistency":
//! the map is linearizable per key and "a read establishes a happens-before
//! relationship with the corresponding write"; an entry a read found stays
//! allocated while the reader's guard lives. Loom cannot see papaya's
//! atomics, so under `--cfg failfast_loom` the map is a stand-in with
//! exactly those guarantees and no more: a table behind a loom `RwLock`
//! held for each operation alone (a read's closure runs under the read
//! lock, as papaya's runs under its guard). The models then explore
//! failfast's own protocol around the map — one entry per key, the shard's
//! writer lock, the handshake of a reader that keeps an entry with the
//! writer that evicts it — with every interleaving of those atomics.

#[cfg(not(failfast_loom))]
use core::hash::BuildHasher;
use core::hash::{Hash, Hasher};

use super::handle::{Entry, EntryArc};
use super::hash::table_hash;
use crate::clock::Clock;

/// An entry's address, as a number: what identifies it while it lives (a
/// permit keeps it; comparing it reads no memory through it).
#[inline]
pub(crate) fn address_of<K, C: Clock>(e: &EntryArc<Entry<K, C>>) -> usize {
    EntryArc::as_ptr(e) as usize
}

/// The hash an entry is stored under: its breaker id's table hash.
#[inline]
pub(crate) fn stored_hash<K, C: Clock>(e: &Entry<K, C>) -> u64 {
    table_hash(e.breaker.id())
}

/// How a lookup recognises its entry: the hash it was stored under, and a
/// test (a key compare, an address, a predicate on the key).
pub(crate) trait Probe<K, C: Clock> {
    /// The hash the entry was stored under.
    fn hash(&self) -> u64;
    /// Whether `e` is the entry looked for (its hash already matched).
    fn is(&self, e: &EntryArc<Entry<K, C>>) -> bool;
}

/// A slot of a shard's map: one key's entry.
///
/// Hashed by the hash its key was stored under, and equal only to itself:
/// a lookup compares through a [`Probe`], and an insert happens under the
/// shard's writer lock after a lookup found no entry for its key, so two
/// slots never hold one key.
pub(crate) struct Slot<K, C: Clock>(pub(crate) EntryArc<Entry<K, C>>);

impl<K, C: Clock> Hash for Slot<K, C> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(stored_hash(&self.0));
    }
}

impl<K, C: Clock> PartialEq for Slot<K, C> {
    fn eq(&self, other: &Self) -> bool {
        EntryArc::ptr_eq(&self.0, &other.0)
    }
}

impl<K, C: Clock> Eq for Slot<K, C> {}

/// The map's hasher: what a slot or a probe writes is the hash (keys were
/// hashed once, by the registry's keyed hasher).
#[cfg(not(failfast_loom))]
#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct PassThrough;

#[cfg(not(failfast_loom))]
impl BuildHasher for PassThrough {
    type Hasher = StoredHash;

    fn build_hasher(&self) -> StoredHash {
        StoredHash(0)
    }
}

/// See [`PassThrough`].
#[cfg(not(failfast_loom))]
#[derive(Debug)]
pub(crate) struct StoredHash(u64);

#[cfg(not(failfast_loom))]
impl Hasher for StoredHash {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }

    fn write(&mut self, bytes: &[u8]) {
        // Never called (slots and probes write one u64); total anyway.
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(not(failfast_loom))]
pub(crate) use self::papaya_map::ShardMap;

#[cfg(failfast_loom)]
pub(crate) use self::loom_map::ShardMap;

#[cfg(not(failfast_loom))]
mod papaya_map {
    use core::hash::{Hash, Hasher};

    use papaya::{Equivalent, ResizeMode};

    use super::{PassThrough, Probe, Slot};
    use crate::clock::Clock;
    use crate::registry::handle::{Entry, EntryArc};

    /// A [`Probe`] as papaya looks keys up: hashed as the stored hash,
    /// equivalent to the slot it recognises.
    struct Find<'a, K, C: Clock, P> {
        probe: &'a P,
        of: core::marker::PhantomData<fn(&K, &C)>,
    }

    impl<'a, K, C: Clock, P: Probe<K, C>> Find<'a, K, C, P> {
        fn new(probe: &'a P) -> Self {
            Find {
                probe,
                of: core::marker::PhantomData,
            }
        }
    }

    impl<K, C: Clock, P: Probe<K, C>> Hash for Find<'_, K, C, P> {
        fn hash<H: Hasher>(&self, state: &mut H) {
            state.write_u64(self.probe.hash());
        }
    }

    impl<K, C: Clock, P: Probe<K, C>> Equivalent<Slot<K, C>> for Find<'_, K, C, P> {
        #[inline]
        fn equivalent(&self, slot: &Slot<K, C>) -> bool {
            self.probe.is(&slot.0)
        }
    }

    /// The shard's entries in a papaya map.
    pub(crate) struct ShardMap<K, C: Clock> {
        map: papaya::HashMap<Slot<K, C>, (), PassThrough>,
    }

    impl<K, C: Clock> ShardMap<K, C> {
        /// An empty map reclaiming through `collector`.
        pub(crate) fn new(collector: &std::sync::Arc<seize::Collector>) -> ShardMap<K, C>
        where
            K: Send + Sync + 'static,
        {
            ShardMap {
                map: papaya::HashMap::builder()
                    .hasher(PassThrough)
                    // A reader never searches two tables; the writer that
                    // grows the table finishes the copy itself (under the
                    // shard's mutex, so no other writer waits on it).
                    .resize_mode(ResizeMode::Blocking)
                    .shared_collector(collector.clone())
                    .build(),
            }
        }

        /// Runs `f` on the entry `probe` recognises, with no lock; gives
        /// `f` back on a miss.
        #[inline]
        pub(crate) fn find<R, F>(&self, probe: &impl Probe<K, C>, f: F) -> Result<R, F>
        where
            F: FnOnce(&EntryArc<Entry<K, C>>) -> R,
        {
            let map = self.map.pin();
            match map.get_key_value(&Find::new(probe)) {
                Some((slot, ())) => Ok(f(&slot.0)),
                None => Err(f),
            }
        }

        /// Adds `entry` (the caller holds the shard's writer lock, and found
        /// no entry for its key).
        pub(crate) fn insert(&self, entry: EntryArc<Entry<K, C>>) {
            self.map.pin().insert(Slot(entry), ());
        }

        /// Removes the entry `probe` recognises; whether there was one.
        pub(crate) fn remove(&self, probe: &impl Probe<K, C>) -> bool {
            self.map.pin().remove(&Find::new(probe)).is_some()
        }

        /// Calls `f` on every entry (under the shard's writer lock: then
        /// each exactly once).
        pub(crate) fn for_each(&self, mut f: impl FnMut(&EntryArc<Entry<K, C>>)) {
            for (slot, ()) in self.map.pin().iter() {
                f(&slot.0);
            }
        }

        /// Entries in the map.
        pub(crate) fn len(&self) -> usize {
            self.map.len()
        }
    }
}

#[cfg(failfast_loom)]
mod loom_map {
    use hashbrown::HashTable;

    use super::{stored_hash, Probe, Slot};
    use crate::clock::Clock;
    use crate::registry::handle::{Entry, EntryArc};
    use crate::sync::RwLock;

    /// papaya's guarantees, and no more, in loom's terms (module docs).
    pub(crate) struct ShardMap<K, C: Clock> {
        table: RwLock<HashTable<Slot<K, C>>>,
    }

    impl<K, C: Clock> ShardMap<K, C> {
        pub(crate) fn new(_collector: &std::sync::Arc<seize::Collector>) -> ShardMap<K, C>
        where
            K: Send + Sync + 'static,
        {
            ShardMap {
                table: RwLock::new(HashTable::new()),
            }
        }

        pub(crate) fn find<R, F>(&self, probe: &impl Probe<K, C>, f: F) -> Result<R, F>
        where
            F: FnOnce(&EntryArc<Entry<K, C>>) -> R,
        {
            let table = self.table.read().unwrap_or_else(|e| e.into_inner());
            match table.find(probe.hash(), |slot| probe.is(&slot.0)) {
                Some(slot) => Ok(f(&slot.0)),
                None => Err(f),
            }
        }

        pub(crate) fn insert(&self, entry: EntryArc<Entry<K, C>>) {
            let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
            table.insert_unique(stored_hash(&entry), Slot(entry), |slot| {
                stored_hash(&slot.0)
            });
        }

        pub(crate) fn remove(&self, probe: &impl Probe<K, C>) -> bool {
            let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
            match table.find_entry(probe.hash(), |slot| probe.is(&slot.0)) {
                Ok(found) => {
                    found.remove();
                    true
                }
                Err(_) => false,
            }
        }

        pub(crate) fn for_each(&self, mut f: impl FnMut(&EntryArc<Entry<K, C>>)) {
            let table = self.table.read().unwrap_or_else(|e| e.into_inner());
            for slot in table.iter() {
                f(&slot.0);
            }
        }

        pub(crate) fn len(&self) -> usize {
            self.table.read().unwrap_or_else(|e| e.into_inner()).len()
        }
    }
}
