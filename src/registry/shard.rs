//! One shard: a `hashbrown::HashTable` of `Arc<Entry>` behind its own
//! read-write lock, its overflow breaker, and the operations that run under
//! that lock.
//!
//! Every operation takes the hash the registry computed once; the table's
//! rehash on growth reads it back from the breaker's id (which *is* the key's
//! hash), so a key is never hashed twice.

use core::fmt;
use core::time::Duration;

use hashbrown::HashTable;

use super::budget::Budget;
use super::fleet::Fleet;
use super::handle::{tick, Entry, EntryArc, Kind, TICK_SHIFT};
use super::hash::table_hash;
use super::key::KeyArg;
use crate::clock::{Clock, Nanos};
use crate::observe::CallCounts;
use crate::state::State;
use crate::sync::RwLock;

/// The most ticks an age is compared with: well below half the wrapping
/// `u32` tick range (about 1.1 years), so wrapped ages never look young.
const MAX_AGE_TICKS: u32 = 1 << 31;

/// `d` in idle ticks, at most [`MAX_AGE_TICKS`].
pub(crate) fn ticks(d: Duration) -> u32 {
    (d.as_nanos() >> TICK_SHIFT).min(u128::from(MAX_AGE_TICKS)) as u32
}

/// The rule an entry must meet to be evicted (module docs, "Eviction").
#[derive(Copy, Clone, Debug)]
pub(crate) struct Evict {
    pub(crate) now: Nanos,
    /// Idle longer than this many ticks.
    pub(crate) ttl_ticks: u32,
    /// Idle longer than this many ticks (≥ the TTL), a CLOSED breaker's
    /// window holds nothing worth keeping.
    pub(crate) forget_ticks: u32,
    /// A full registry making room: a pristine breaker goes whatever its
    /// idle time (forgetting it loses nothing).
    pub(crate) pressure: bool,
}

impl Evict {
    /// The same rule for a full registry making room.
    pub(crate) fn under_pressure(self) -> Evict {
        Evict {
            pressure: true,
            ..self
        }
    }

    /// Whether `e` carries no information worth its memory; the caller
    /// checks the reference count under the write lock.
    ///
    /// * CLOSED: idle past `forget_after` (and the TTL) — whatever its window
    ///   holds is that old — or idle past the TTL (any idle time under
    ///   pressure) and pristine;
    /// * OPEN or HALF_OPEN: idle past the TTL plus the longest open period:
    ///   nobody asked for the host through a whole open period and a TTL;
    /// * manual modes (forced open, disabled, metrics only), pinned and
    ///   shared breakers: never.
    fn is_stale<K, C: Clock>(&self, e: &Entry<K, C>) -> bool {
        if e.kind != Kind::Tracked {
            return false;
        }
        let idle = e.idle_ticks(self.now);
        let b = &e.breaker;
        match b.state() {
            State::Closed => {
                idle > self.forget_ticks
                    || ((self.pressure || idle > self.ttl_ticks) && b.is_pristine_at(self.now))
            }
            State::Open | State::HalfOpen => {
                let open_for = ticks(b.config().open_duration_cap());
                idle > self.ttl_ticks.saturating_add(open_for).min(MAX_AGE_TICKS)
            }
            State::ForcedOpen | State::Disabled | State::MetricsOnly => false,
        }
    }

    /// The whole rule. Only meaningful under the shard's write lock: handles
    /// are cloned only under the shard's lock, so a count of 1 (the table's
    /// own reference) cannot grow until the lock is released.
    fn allows<K, C: Clock>(&self, e: &EntryArc<Entry<K, C>>) -> bool {
        EntryArc::strong_count(e) == 1 && self.is_stale(e)
    }
}

/// A shard's table, plus what it keeps about entries that left it.
pub(crate) struct Table<K, C: Clock> {
    map: HashTable<EntryArc<Entry<K, C>>>,
    /// When a full registry last scanned this shard for a victim and found
    /// none: it does not scan again within the same tick, so a flood of new
    /// keys into a full registry costs one scan per shard per tick, not one
    /// per request.
    quiet_tick: Option<u32>,
    /// The call counters of every breaker that left this shard, folded in
    /// under the write lock that removed it, so a reader holding the read
    /// lock sees each breaker exactly once: in the map or in here.
    departed: CallCounts,
    /// Entries evicted (idle or under pressure) from this shard.
    evicted: u64,
    /// Entries removed (`remove`, `retain`, replaced by `insert_with`).
    removed: u64,
}

/// One shard: the lock, its table, and the breaker its new keys share when
/// the registry is full.
pub(crate) struct Shard<K, C: Clock> {
    table: RwLock<Table<K, C>>,
    overflow: EntryArc<Entry<K, C>>,
}

fn rehash<K, C: Clock>(e: &EntryArc<Entry<K, C>>) -> u64 {
    table_hash(e.breaker.id())
}

/// Adds `c` to `to`, field by field. The pattern names every field, so a
/// new kind of count cannot be left out of the registry's totals unseen.
pub(crate) fn add_calls(to: &mut CallCounts, c: &CallCounts) {
    let CallCounts {
        admitted,
        rejected,
        successes,
        failures,
        ignored,
        neutral,
        dropped,
        unanswered,
        abandoned,
        panicked,
        slow,
    } = *c;
    to.admitted += admitted;
    to.rejected += rejected;
    to.successes += successes;
    to.failures += failures;
    to.ignored += ignored;
    to.neutral += neutral;
    to.dropped += dropped;
    to.unanswered += unanswered;
    to.abandoned += abandoned;
    to.panicked += panicked;
    to.slow += slow;
}

impl<K, C: Clock> Shard<K, C> {
    pub(crate) fn new(overflow: EntryArc<Entry<K, C>>) -> Shard<K, C> {
        Shard {
            table: RwLock::new(Table {
                map: HashTable::new(),
                quiet_tick: None,
                departed: CallCounts::default(),
                evicted: 0,
                removed: 0,
            }),
            overflow,
        }
    }

    fn read(&self) -> impl core::ops::Deref<Target = Table<K, C>> + '_ {
        // A panic while a write lock was held (a user `Hash`/`Eq`) leaves the
        // table consistent (hashbrown is panic-safe), so poisoning is ignored.
        self.table.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> impl core::ops::DerefMut<Target = Table<K, C>> + '_ {
        // Poisoning ignored: see `read`.
        self.table.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The breaker new keys of this shard share while the registry is full.
    pub(crate) fn overflow(&self) -> &EntryArc<Entry<K, C>> {
        &self.overflow
    }

    /// Runs `f` on the entry for `key` under the read lock; gives `f` back on
    /// a miss.
    #[inline]
    pub(crate) fn find<R, F>(&self, hash: u64, key: &impl KeyArg<K>, f: F) -> Result<R, F>
    where
        F: FnOnce(&EntryArc<Entry<K, C>>) -> R,
    {
        let table = self.read();
        match table.map.find(hash, |e| {
            table_hash(e.breaker.id()) == hash && matches(key, e)
        }) {
            Some(e) => Ok(f(e)),
            None => Err(f),
        }
    }

    /// The miss path: under the write lock, returns the existing entry (a
    /// racing insert won) or inserts `make`'s entry if the budget has room —
    /// evicting the least recently used evictable entries of this shard when
    /// it has none.
    ///
    /// `None` means the key is not tracked: the registry is full and this
    /// shard holds nothing it may evict.
    pub(crate) fn insert<P: KeyArg<K>>(
        &self,
        hash: u64,
        key: P,
        rule: Evict,
        fleet: &Fleet,
        budget: &Budget<K>,
        make: impl FnOnce(K) -> EntryArc<Entry<K, C>>,
    ) -> Option<EntryArc<Entry<K, C>>> {
        let mut table = self.write();
        let found = table.map.find(hash, |e| {
            table_hash(e.breaker.id()) == hash && matches(&key, e)
        });
        if let Some(e) = found {
            e.touch(rule.now);
            return Some(e.clone());
        }
        // A victim's slot passes to this insert.
        if !budget.reserve_slot() && !table.evict_lru(rule, fleet, budget, false) {
            return None;
        }
        let key = key.into_key();
        if !budget.reserve_bytes(&key) {
            // Victims give back their bytes and their slots.
            let fits = (0..4)
                .any(|_| table.evict_lru(rule, fleet, budget, true) && budget.reserve_bytes(&key));
            if !fits {
                budget.release_slot();
                return None;
            }
        }
        let entry = make(key);
        table.map.insert_unique(hash, entry.clone(), rehash);
        fleet.on_insert();
        Some(entry)
    }

    /// Inserts `entry` (a key with its own configuration), replacing the
    /// key's current entry if there is one. Takes its slot and bytes even
    /// past the bounds: the operator asked for it.
    pub(crate) fn insert_pinned(
        &self,
        hash: u64,
        is_key: impl Fn(&K) -> bool,
        entry: EntryArc<Entry<K, C>>,
        now: Nanos,
        fleet: &Fleet,
        budget: &Budget<K>,
    ) {
        let mut table = self.write();
        table.remove_found(hash, is_key, now, fleet, budget);
        budget.force_slot();
        if let Some(k) = &entry.key {
            budget.force_bytes(k);
        }
        table.map.insert_unique(hash, entry, rehash);
        fleet.on_insert();
    }

    /// Removes `key`'s entry; false if there was none.
    pub(crate) fn remove(
        &self,
        hash: u64,
        is_key: impl Fn(&K) -> bool,
        now: Nanos,
        fleet: &Fleet,
        budget: &Budget<K>,
    ) -> bool {
        self.write().remove_found(hash, is_key, now, fleet, budget)
    }

    /// Removes every tracked entry for which `keep` returns false. `keep`
    /// runs under the read lock; the removals under one write lock.
    pub(crate) fn retain(
        &self,
        now: Nanos,
        fleet: &Fleet,
        budget: &Budget<K>,
        mut keep: impl FnMut(&Entry<K, C>) -> bool,
    ) -> usize {
        let doomed: Vec<(u64, *const Entry<K, C>)> = {
            let table = self.read();
            table
                .map
                .iter()
                .filter(|e| !keep(e))
                .map(|e| (table_hash(e.breaker.id()), EntryArc::as_ptr(e)))
                .collect()
        };
        if doomed.is_empty() {
            return 0;
        }
        let mut table = self.write();
        let mut removed = 0;
        for (hash, ptr) in doomed {
            // The entry noted under the read lock, if it is still there.
            if let Ok(found) = table
                .map
                .find_entry(hash, |e| core::ptr::eq(EntryArc::as_ptr(e), ptr))
            {
                let entry = found.remove().0;
                removed += 1;
                table.removed += 1;
                table.depart(&entry, now, fleet, budget, true);
            }
        }
        removed
    }

    /// Evicts every entry that meets `rule` and returns how many went.
    ///
    /// The full scan — one pointer chase per entry, the slow part — runs under
    /// the read lock and only notes the candidates (hash and address). The
    /// write lock is taken only if there is one, and then each candidate is
    /// found by hash, re-checked (its reference count now, under the write
    /// lock) and removed, so readers wait for a few cached probes per victim,
    /// not for the scan. Victims are freed after the lock is released.
    pub(crate) fn sweep(&self, rule: Evict, fleet: &Fleet, budget: &Budget<K>) -> usize {
        let candidates: Vec<(u64, *const Entry<K, C>)> = {
            let table = self.read();
            table
                .map
                .iter()
                .filter(|e| EntryArc::strong_count(e) == 1 && rule.is_stale(e))
                .map(|e| (table_hash(e.breaker.id()), EntryArc::as_ptr(e)))
                .collect()
        };
        if candidates.is_empty() {
            return 0;
        }
        let mut victims = Vec::with_capacity(candidates.len());
        {
            let mut table = self.write();
            for (hash, ptr) in candidates {
                // Identity by address: the candidate may have been evicted and
                // its address reused by a new entry since the read lock; the
                // full rule is checked again on whatever is found.
                if let Ok(found) = table
                    .map
                    .find_entry(hash, |e| core::ptr::eq(EntryArc::as_ptr(e), ptr))
                {
                    if rule.allows(found.get()) {
                        let victim = found.remove().0;
                        // Unreferenced (the rule checked): settled at once.
                        table.depart(&victim, rule.now, fleet, budget, true);
                        table.evicted += 1;
                        victims.push(victim);
                    }
                }
            }
        }
        victims.len()
    }

    /// Calls `f` on every entry, under the read lock.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&Entry<K, C>)) {
        let table = self.read();
        for e in table.map.iter() {
            f(e);
        }
    }

    /// Calls `f` on every entry and returns the departed breakers' folded
    /// call counters, all under one read lock (each breaker counted once).
    pub(crate) fn for_each_with_departed(&self, mut f: impl FnMut(&Entry<K, C>)) -> CallCounts {
        let table = self.read();
        for e in table.map.iter() {
            f(e);
        }
        f(&self.overflow);
        table.departed
    }

    /// (evicted, removed) so far.
    pub(crate) fn departures(&self) -> (u64, u64) {
        let table = self.read();
        (table.evicted, table.removed)
    }

    /// Entries in this shard.
    pub(crate) fn len(&self) -> usize {
        self.read().map.len()
    }
}

fn matches<K, C: Clock>(key: &impl KeyArg<K>, e: &Entry<K, C>) -> bool {
    e.key.as_ref().is_some_and(|k| key.matches(k))
}

impl<K, C: Clock> Table<K, C> {
    /// Settles an entry that just left the map, whoever else still holds
    /// it: its counters folded into `departed`, its bytes (and slot, if
    /// `release_slot`) released, and its fleet accounting settled.
    fn depart(
        &mut self,
        entry: &EntryArc<Entry<K, C>>,
        now: Nanos,
        fleet: &Fleet,
        budget: &Budget<K>,
        release_slot: bool,
    ) {
        if let Some(calls) = entry.breaker.snapshot_at(now).calls {
            add_calls(&mut self.departed, &calls);
        }
        if let Some(k) = &entry.key {
            budget.release_bytes(k);
        }
        if release_slot {
            budget.release_slot();
        }
        // The breaker leaves the fleet in one step, whoever else still holds
        // it: its state and gate slot at that instant leave the counts, and
        // none of its later transitions (its holders keep using it) touches
        // them again.
        if let Some((state, held_slot)) = entry.breaker.leave_gate() {
            fleet.on_remove(state, held_slot);
        }
    }

    /// Removes `key`'s entry, if any (see [`Shard::remove`]).
    fn remove_found(
        &mut self,
        hash: u64,
        is_key: impl Fn(&K) -> bool,
        now: Nanos,
        fleet: &Fleet,
        budget: &Budget<K>,
    ) -> bool {
        let Ok(found) = self.map.find_entry(hash, |e| {
            table_hash(e.breaker.id()) == hash && e.key.as_ref().is_some_and(&is_key)
        }) else {
            return false;
        };
        let entry = found.remove().0;
        self.removed += 1;
        self.depart(&entry, now, fleet, budget, true);
        true
    }

    /// Removes the least recently used entry that `rule` (under pressure)
    /// allows, if any. Its slot passes to the caller unless `release_slot`.
    fn evict_lru(
        &mut self,
        rule: Evict,
        fleet: &Fleet,
        budget: &Budget<K>,
        release_slot: bool,
    ) -> bool {
        let now_tick = tick(rule.now);
        if self.quiet_tick == Some(now_tick) {
            return false;
        }
        let rule = rule.under_pressure();
        let oldest = self
            .map
            .iter()
            .filter(|e| rule.allows(e))
            .max_by_key(|e| e.idle_ticks(rule.now))
            .map(|e| (table_hash(e.breaker.id()), EntryArc::as_ptr(e)));
        let Some((hash, ptr)) = oldest else {
            self.quiet_tick = Some(now_tick);
            return false;
        };
        let Ok(found) = self
            .map
            .find_entry(hash, |e| core::ptr::eq(EntryArc::as_ptr(e), ptr))
        else {
            return false;
        };
        let victim = found.remove().0;
        // Unreferenced (the rule checked): settled at once.
        self.depart(&victim, rule.now, fleet, budget, release_slot);
        self.evicted += 1;
        true
    }
}

impl<K, C: Clock> fmt::Debug for Shard<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shard").field("len", &self.len()).finish()
    }
}
