//! One shard: a `hashbrown::HashTable` of `Arc<Entry>` behind its own
//! read-write lock, and the operations that run under that lock.
//!
//! Every operation takes the hash the registry computed once; the table's
//! rehash on growth reads it back from the breaker's id (which *is* the key's
//! hash), so a key is never hashed twice.

use core::fmt;

use hashbrown::HashTable;

use super::handle::{tick, Entry};
use super::key::KeyArg;
use crate::clock::{Clock, Nanos};
use crate::fleet::Fleet;
use crate::sync::{Arc, RwLock};

/// The rule an entry must meet to be evicted (module docs, "Eviction").
#[derive(Copy, Clone, Debug)]
pub(crate) struct Evict {
    pub(crate) now: Nanos,
    /// Idle longer than this many ticks.
    pub(crate) ttl_ticks: u32,
}

impl Evict {
    /// Idle and indistinguishable from fresh; the caller checks the
    /// reference count under the write lock.
    fn is_stale<K, C: Clock>(&self, e: &Entry<K, C>) -> bool {
        e.idle_ticks(self.now) > self.ttl_ticks && e.breaker.is_pristine_at(self.now)
    }

    /// The whole rule. Only meaningful under the shard's write lock: handles
    /// are cloned only under the shard's lock, so a count of 1 (the table's
    /// own reference) cannot grow until the lock is released.
    fn allows<K, C: Clock>(&self, e: &Arc<Entry<K, C>>) -> bool {
        Arc::strong_count(e) == 1 && self.is_stale(e)
    }
}

/// A shard's table, plus the tick of its last fruitless pressure scan.
pub(crate) struct Table<K, C: Clock> {
    map: HashTable<Arc<Entry<K, C>>>,
    /// When a full registry last scanned this shard for a victim and found
    /// none: it does not scan again within the same tick, so a flood of new
    /// keys into a full registry costs one scan per shard per tick, not one
    /// per request.
    quiet_tick: Option<u32>,
}

/// One shard: the lock and its table.
pub(crate) struct Shard<K, C: Clock> {
    table: RwLock<Table<K, C>>,
}

fn rehash<K, C: Clock>(e: &Arc<Entry<K, C>>) -> u64 {
    e.breaker.id()
}

impl<K, C: Clock> Shard<K, C> {
    pub(crate) fn new() -> Shard<K, C> {
        Shard {
            table: RwLock::new(Table {
                map: HashTable::new(),
                quiet_tick: None,
            }),
        }
    }

    /// Runs `f` on the entry for `key` under the read lock; gives `f` back on
    /// a miss.
    #[inline]
    pub(crate) fn find<R, F>(&self, hash: u64, key: &impl KeyArg<K>, f: F) -> Result<R, F>
    where
        F: FnOnce(&Arc<Entry<K, C>>) -> R,
    {
        // A panic while a write lock was held (a user `Hash`/`Eq`) leaves the
        // table consistent (hashbrown is panic-safe), so poisoning is ignored.
        let table = self.table.read().unwrap_or_else(|e| e.into_inner());
        match table
            .map
            .find(hash, |e| e.breaker.id() == hash && key.matches(&e.key))
        {
            Some(e) => Ok(f(e)),
            None => Err(f),
        }
    }

    /// The miss path: under the write lock, returns the existing entry (a
    /// racing insert won) or inserts `make`'s entry if `admit` grants a
    /// capacity slot — evicting one stale entry of this shard when it does not.
    ///
    /// `Err(key)` means the key is not tracked: the registry is full and this
    /// shard holds nothing to evict.
    pub(crate) fn insert<P: KeyArg<K>>(
        &self,
        hash: u64,
        key: P,
        rule: Evict,
        fleet: &Fleet,
        admit: impl FnOnce() -> bool,
        make: impl FnOnce(K) -> Arc<Entry<K, C>>,
    ) -> Result<Arc<Entry<K, C>>, P> {
        let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
        let found = table
            .map
            .find(hash, |e| e.breaker.id() == hash && key.matches(&e.key));
        if let Some(e) = found {
            e.touch(rule.now);
            return Ok(e.clone());
        }
        if !admit() && !table.evict_one(rule, fleet) {
            return Err(key);
        }
        let entry = make(key.into_key());
        table.map.insert_unique(hash, entry.clone(), rehash);
        fleet.on_insert();
        Ok(entry)
    }

    /// Evicts every entry that meets `rule` and returns how many went.
    ///
    /// The full scan — one pointer chase per entry, the slow part — runs under
    /// the read lock and only notes the candidates (hash and address). The
    /// write lock is taken only if there is one, and then each candidate is
    /// found by hash, re-checked (its reference count now, under the write
    /// lock) and removed, so readers wait for a few cached probes per victim,
    /// not for the scan. Victims are freed after the lock is released.
    pub(crate) fn sweep(&self, rule: Evict, fleet: &Fleet) -> usize {
        let candidates: Vec<(u64, *const Entry<K, C>)> = {
            let table = self.table.read().unwrap_or_else(|e| e.into_inner());
            table
                .map
                .iter()
                .filter(|e| Arc::strong_count(e) == 1 && rule.is_stale(e))
                .map(|e| (e.breaker.id(), Arc::as_ptr(e)))
                .collect()
        };
        if candidates.is_empty() {
            return 0;
        }
        let mut victims = Vec::with_capacity(candidates.len());
        {
            let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
            for (hash, ptr) in candidates {
                // Identity by address: the candidate may have been evicted and
                // its address reused by a new entry since the read lock; the
                // full rule is checked again on whatever is found.
                if let Ok(found) = table.map.find_entry(hash, |e| Arc::as_ptr(e) == ptr) {
                    if rule.allows(found.get()) {
                        victims.push(found.remove().0);
                    }
                }
            }
        }
        for victim in &victims {
            fleet.on_remove(victim.breaker.state(), victim.breaker.holds_gate_slot());
        }
        victims.len()
    }

    /// Calls `f` on every entry, under the read lock.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&Entry<K, C>)) {
        let table = self.table.read().unwrap_or_else(|e| e.into_inner());
        for e in table.map.iter() {
            f(e);
        }
    }

    /// Entries in this shard.
    pub(crate) fn len(&self) -> usize {
        self.table
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .map
            .len()
    }
}

impl<K, C: Clock> Table<K, C> {
    /// Removes one entry that meets `rule`, if any (a full registry making
    /// room). Returns whether one went; its capacity slot passes to the caller.
    fn evict_one(&mut self, rule: Evict, fleet: &Fleet) -> bool {
        let now_tick = tick(rule.now);
        if self.quiet_tick == Some(now_tick) {
            return false;
        }
        match self.map.extract_if(|e| rule.allows(e)).next() {
            Some(victim) => {
                fleet.on_remove(victim.breaker.state(), victim.breaker.holds_gate_slot());
                true
            }
            None => {
                self.quiet_tick = Some(now_tick);
                false
            }
        }
    }
}

impl<K, C: Clock> fmt::Debug for Shard<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shard").field("len", &self.len()).finish()
    }
}
