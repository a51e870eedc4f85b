//! One shard: a papaya map of the shard's entries, read with no lock; the
//! writer lock that serialises the shard's inserts, removals and sweeps with
//! its books; and the shard's overflow breaker.
//!
//! Every operation takes the hash the registry computed once. The map hashes
//! an entry by the hash its key was stored under, which the breaker's id
//! carries (it *is* the key's hash, folded), so a key is never hashed twice.
//!
//! # Readers and the writer
//!
//! A lookup pins the map (an epoch guard of `seize`, papaya's reclamation:
//! a write to a per-thread slot, never a shared line), probes it and runs its
//! closure on the entry it found; nothing it does waits for a writer. The
//! writer of a shard — an insert, a removal, a sweep — holds the shard's
//! mutex, so every structural change of one shard and its books happen one
//! at a time, and a scan under the mutex sees each entry exactly once.
//!
//! What papaya guarantees and loom cannot check (its atomics are not loom's):
//! a lookup sees the result of the most recent write to its key ("a read
//! establishes a happens-before relationship with the corresponding write",
//! papaya's crate docs, "Consistency"); an entry a lookup found stays
//! allocated until the lookup's guard is dropped (reclamation waits for
//! guards); in `ResizeMode::Blocking` a reader never searches two tables.
//! What failfast adds, and its loom models check: one entry per key (inserts
//! look again under the mutex), and the handshake of a reader that keeps an
//! entry (a handle) with the writer that evicts it ([`Entry::claim`]).

use core::fmt;

use core::time::Duration;

use super::budget::Budget;
use super::fleet::Fleet;
use super::handle::{tick, Entry, EntryArc, Kind, TICK_SHIFT};
use super::key::KeyArg;
use super::map::{address_of, stored_hash, Probe, ShardMap};
use crate::breaker::Breaker;
use crate::clock::{Clock, Nanos};
use crate::observe::CallCounts;
use crate::state::State;
use crate::sync::Mutex;

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
    /// (the shard's writer) then checks that no reader keeps it
    /// ([`Entry::begin_leaving`]).
    ///
    /// * CLOSED: idle past `forget_after` (and the TTL) — whatever its window
    ///   holds is that old, and whatever is left of a decaying backoff step
    ///   goes with it — or idle past the TTL (any idle time under pressure)
    ///   and pristine ([`Breaker::is_pristine_at`](crate::Breaker::is_pristine_at):
    ///   not within a ramp's window, a backoff step kept by its last close
    ///   decayed back to the base, and no upstream's hint still remembered,
    ///   besides a clean window and no run);
    /// * OPEN or HALF_OPEN: idle past the TTL plus an open period (an OPEN
    ///   breaker's own, however it was set: the backoff step, an upstream's
    ///   hint, an outlier ejection, another replica's news; the backoff's cap for a HALF_OPEN
    ///   one): nobody asked for the host through a whole open period and a
    ///   TTL;
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
                let open_for = ticks(b.unvisited_open_period());
                idle > self.ttl_ticks.saturating_add(open_for).min(MAX_AGE_TICKS)
            }
            State::ForcedOpen | State::Disabled | State::MetricsOnly => false,
        }
    }

    /// The whole rule, as the writer sees it before the handshake: no
    /// reference but the map's, and stale. A lock-free reader may clone the
    /// entry after this read; [`Entry::begin_leaving`] settles that race.
    fn allows<K, C: Clock>(&self, e: &EntryArc<Entry<K, C>>) -> bool {
        EntryArc::strong_count(e) == 1 && self.is_stale(e)
    }
}

/// A lookup by key: the hash the key was stored under, and the key.
struct ByKey<'a, A> {
    hash: u64,
    key: &'a A,
}

impl<K, C: Clock, A: KeyArg<K>> Probe<K, C> for ByKey<'_, A> {
    fn hash(&self) -> u64 {
        self.hash
    }

    #[inline]
    fn is(&self, e: &EntryArc<Entry<K, C>>) -> bool {
        stored_hash(e) == self.hash && matches(self.key, e)
    }
}

/// A lookup by a predicate on the stored key (discovery's `remove`, an
/// override's replacement), under the hash the key was stored under.
struct ByPredicate<F> {
    hash: u64,
    is_key: F,
}

impl<K, C: Clock, F: Fn(&K) -> bool> Probe<K, C> for ByPredicate<F> {
    fn hash(&self) -> u64 {
        self.hash
    }

    fn is(&self, e: &EntryArc<Entry<K, C>>) -> bool {
        stored_hash(e) == self.hash && e.key.as_ref().is_some_and(&self.is_key)
    }
}

/// A lookup of one entry by its address (and the hash it was stored
/// under): the entry a permit was admitted by, a breaker a hook names, a
/// victim the writer chose.
struct ByAddress {
    hash: u64,
    address: usize,
}

impl ByAddress {
    fn of<K, C: Clock>(e: &EntryArc<Entry<K, C>>) -> ByAddress {
        ByAddress {
            hash: stored_hash(e),
            address: address_of(e),
        }
    }
}

impl<K, C: Clock> Probe<K, C> for ByAddress {
    fn hash(&self) -> u64 {
        self.hash
    }

    #[inline]
    fn is(&self, e: &EntryArc<Entry<K, C>>) -> bool {
        address_of(e) == self.address
    }
}

/// The shard of `len` that holds the key stored under `hash`.
///
/// Bits 25..57: below the map's 7-bit tag, above the bits it uses for
/// bucket positions (a shard's table stays below 2^25 buckets), scaled to
/// the shard count by one multiply, so the count need not be a power of two.
#[inline]
pub(crate) fn shard_index(hash: u64, len: usize) -> usize {
    let bits = u64::from((hash >> 25) as u32);
    ((bits * len as u64) >> 32) as usize
}

/// Finds an entry by its breaker's address (a transition hook naming the
/// breaker that reported).
struct ByBreaker {
    hash: u64,
    address: usize,
}

impl<K, C: Clock> Probe<K, C> for ByBreaker {
    fn hash(&self) -> u64 {
        self.hash
    }

    fn is(&self, e: &EntryArc<Entry<K, C>>) -> bool {
        &e.breaker as *const Breaker<C> as usize == self.address
    }
}

/// What a shard keeps about entries that left it, and its scan memo: the
/// writer's, under the shard's mutex.
#[derive(Default)]
struct Books {
    /// When a full registry last scanned this shard for a victim and found
    /// none: it does not scan again within the same tick, so a flood of new
    /// keys into a full registry costs one scan per shard per tick, not one
    /// per request.
    quiet_tick: Option<u32>,
    /// The call counters of every breaker that left this shard, folded in
    /// by the writer that removed it, so a scan under the mutex sees each
    /// breaker exactly once: in the map or in here.
    departed: CallCounts,
    /// Entries evicted (idle or under pressure) from this shard.
    evicted: u64,
    /// Entries removed (`remove`, `retain`, replaced by `insert_with`).
    removed: u64,
}

/// One shard: its map (read with no lock), the writer lock with its books,
/// and the breaker its new keys share when the registry is full.
pub(crate) struct Shard<K, C: Clock> {
    map: ShardMap<K, C>,
    books: Mutex<Books>,
    overflow: EntryArc<Entry<K, C>>,
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
        retries_refused,
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
    to.retries_refused += retries_refused;
}

impl<K, C: Clock> Shard<K, C> {
    /// An empty shard whose map reclaims through `collector` (one per
    /// registry: guards and retired slots are shared by its shards).
    pub(crate) fn new(
        overflow: EntryArc<Entry<K, C>>,
        collector: &std::sync::Arc<seize::Collector>,
    ) -> Shard<K, C>
    where
        K: Send + Sync + 'static,
    {
        Shard {
            map: ShardMap::new(collector),
            books: Mutex::new(Books::default()),
            overflow,
        }
    }

    fn write(&self) -> impl core::ops::DerefMut<Target = Books> + '_ {
        // A panic under the writer lock (a user `Hash`/`Eq` or `retain`
        // predicate) leaves the map and the books consistent (each change is
        // made whole, then booked), so poisoning is ignored.
        self.books.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Holds this shard's writer lock until the guard drops: a test pauses
    /// every writer of the shard there (`registry::lock_free_reads`).
    #[cfg(all(test, not(failfast_loom)))]
    pub(crate) fn pause_writers(&self) -> impl Drop + '_ {
        self.books.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Evicts `victim` now as a sweep does once it found the entry stale,
    /// whoever holds a clone of it: a test stages the handshake's race by
    /// holding a reader's clone (`registry::lock_free_reads`).
    #[cfg(all(test, not(failfast_loom)))]
    pub(crate) fn evict_now(
        &self,
        victim: &EntryArc<Entry<K, C>>,
        now: Nanos,
        fleet: &Fleet,
        budget: &Budget<K>,
    ) -> bool {
        let mut books = self.write();
        self.evict(&mut books, victim, now, fleet, budget, true)
    }

    /// This shard's entries (a test's view).
    #[cfg(all(test, not(failfast_loom)))]
    pub(crate) fn entries(&self) -> Vec<EntryArc<Entry<K, C>>> {
        let mut all = Vec::new();
        self.map.for_each(|e| all.push(e.clone()));
        all
    }

    /// The breaker new keys of this shard share while the registry is full.
    pub(crate) fn overflow(&self) -> &EntryArc<Entry<K, C>> {
        &self.overflow
    }

    /// Runs `f` on the entry for `key`, with no lock; gives `f` back on a
    /// miss. The entry stays allocated while `f` runs (the map's guard).
    #[inline]
    pub(crate) fn find<R, F>(&self, hash: u64, key: &impl KeyArg<K>, f: F) -> Result<R, F>
    where
        F: FnOnce(&EntryArc<Entry<K, C>>) -> R,
    {
        self.map.find(&ByKey { hash, key }, f)
    }

    /// Runs `f` on the entry whose breaker is `breaker`, with no lock, if
    /// it is in this shard under `hash` (its id's table hash).
    pub(crate) fn find_breaker<R>(
        &self,
        hash: u64,
        breaker: &Breaker<C>,
        f: impl FnOnce(&EntryArc<Entry<K, C>>) -> R,
    ) -> Option<R> {
        let probe = ByBreaker {
            hash,
            address: breaker as *const Breaker<C> as usize,
        };
        self.map.find(&probe, f).ok()
    }

    /// The miss path: under the writer lock, returns the existing entry (a
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
        let mut books = self.write();
        let existing = self.map.find(&ByKey { hash, key: &key }, |e| {
            // The writer lock excludes this shard's evictions: the clone
            // needs no handshake.
            e.touch(rule.now);
            e.clone()
        });
        if let Ok(e) = existing {
            return Some(e);
        }
        // A victim's slot passes to this insert.
        if !budget.reserve_slot() && !self.evict_lru(&mut books, rule, fleet, budget, false) {
            return None;
        }
        let key = key.into_key();
        if !budget.reserve_bytes(&key) {
            // Victims give back their bytes and their slots.
            let fits = (0..4).any(|_| {
                self.evict_lru(&mut books, rule, fleet, budget, true) && budget.reserve_bytes(&key)
            });
            if !fits {
                budget.release_slot();
                return None;
            }
        }
        let entry = make(key);
        self.map.insert(entry.clone());
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
        let mut books = self.write();
        self.remove_found(&mut books, hash, is_key, now, fleet, budget);
        budget.force_slot();
        if let Some(k) = &entry.key {
            budget.force_bytes(k);
        }
        self.map.insert(entry);
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
        let mut books = self.write();
        self.remove_found(&mut books, hash, is_key, now, fleet, budget)
    }

    /// Removes every tracked entry for which `keep` returns false; `keep`
    /// and the removals run under the writer lock (readers go on).
    pub(crate) fn retain(
        &self,
        now: Nanos,
        fleet: &Fleet,
        budget: &Budget<K>,
        mut keep: impl FnMut(&Entry<K, C>) -> bool,
    ) -> usize {
        let mut books = self.write();
        let mut doomed: Vec<EntryArc<Entry<K, C>>> = Vec::new();
        self.map.for_each(|e| {
            if !keep(e) {
                doomed.push(e.clone());
            }
        });
        for entry in &doomed {
            if self.map.remove(&ByAddress::of(entry)) {
                books.removed += 1;
                self.depart(&mut books, entry, now, fleet, budget, true);
            }
        }
        doomed.len()
    }

    /// Evicts every entry that meets `rule` and returns how many went.
    ///
    /// The scan and the removals run under the writer lock, which readers
    /// never take: a sweep blocks this shard's inserts and removals, never a
    /// lookup. Each candidate goes through the handshake with lock-free
    /// readers ([`Entry::begin_leaving`]) before it leaves the map; one that
    /// a reader cloned meanwhile stays. Victims are freed when the last
    /// lookup that may still see them is done (papaya's reclamation).
    pub(crate) fn sweep(&self, rule: Evict, fleet: &Fleet, budget: &Budget<K>) -> usize {
        let mut books = self.write();
        let mut candidates: Vec<EntryArc<Entry<K, C>>> = Vec::new();
        self.map.for_each(|e| {
            if rule.allows(e) {
                candidates.push(e.clone());
            }
        });
        let mut evicted = 0;
        for entry in candidates {
            if self.evict(&mut books, &entry, rule.now, fleet, budget, true) {
                evicted += 1;
            }
        }
        evicted
    }

    /// Calls `f` on every entry, under the writer lock (each entry exactly
    /// once: no writer of this shard runs meanwhile; lookups go on).
    pub(crate) fn for_each(&self, mut f: impl FnMut(&Entry<K, C>)) {
        let _books = self.write();
        self.map.for_each(|e| f(e));
    }

    /// Calls `f` on every entry and the overflow breaker and returns the
    /// departed breakers' folded call counters, all under the writer lock
    /// (each breaker counted once).
    pub(crate) fn for_each_with_departed(&self, mut f: impl FnMut(&Entry<K, C>)) -> CallCounts {
        let books = self.write();
        self.map.for_each(|e| f(e));
        f(&self.overflow);
        books.departed
    }

    /// (evicted, removed) so far.
    pub(crate) fn departures(&self) -> (u64, u64) {
        let books = self.write();
        (books.evicted, books.removed)
    }

    /// Entries in this shard.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Settles an entry that just left the map, whoever else still holds
    /// it: its counters folded into `departed`, its bytes (and slot, if
    /// `release_slot`) released, and its fleet accounting settled.
    fn depart(
        &self,
        books: &mut Books,
        entry: &EntryArc<Entry<K, C>>,
        now: Nanos,
        fleet: &Fleet,
        budget: &Budget<K>,
        release_slot: bool,
    ) {
        if let Some(calls) = entry.breaker.snapshot_at(now).calls {
            add_calls(&mut books.departed, &calls);
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
        &self,
        books: &mut Books,
        hash: u64,
        is_key: impl Fn(&K) -> bool,
        now: Nanos,
        fleet: &Fleet,
        budget: &Budget<K>,
    ) -> bool {
        let Ok(entry) = self.map.find(&ByPredicate { hash, is_key }, |e| e.clone()) else {
            return false;
        };
        self.map.remove(&ByAddress::of(&entry));
        books.removed += 1;
        self.depart(books, &entry, now, fleet, budget, true);
        true
    }

    /// Removes the least recently used entry that `rule` (under pressure)
    /// allows, if any. Its slot passes to the caller unless `release_slot`.
    fn evict_lru(
        &self,
        books: &mut Books,
        rule: Evict,
        fleet: &Fleet,
        budget: &Budget<K>,
        release_slot: bool,
    ) -> bool {
        let now_tick = tick(rule.now);
        if books.quiet_tick == Some(now_tick) {
            return false;
        }
        let rule = rule.under_pressure();
        let mut oldest: Option<EntryArc<Entry<K, C>>> = None;
        self.map.for_each(|e| {
            let older = oldest
                .as_ref()
                .is_none_or(|o| e.idle_ticks(rule.now) > o.idle_ticks(rule.now));
            if older && rule.allows(e) {
                oldest = Some(e.clone());
            }
        });
        let Some(victim) = oldest else {
            books.quiet_tick = Some(now_tick);
            return false;
        };
        self.evict(books, &victim, rule.now, fleet, budget, release_slot)
    }

    /// Evicts `victim`, found stale and unreferenced under the writer lock,
    /// unless a lock-free reader cloned it since: the handshake of
    /// [`Entry::begin_leaving`] with [`Entry::claim`]. Its slot (and bytes)
    /// go back unless `release_slot` is false (an insert takes it over).
    fn evict(
        &self,
        books: &mut Books,
        victim: &EntryArc<Entry<K, C>>,
        now: Nanos,
        fleet: &Fleet,
        budget: &Budget<K>,
        release_slot: bool,
    ) -> bool {
        // The map's reference and the caller's clone: 2 when nobody else
        // holds the entry.
        if !victim.begin_leaving(|| EntryArc::strong_count(victim) - 1) {
            victim.stay();
            return false;
        }
        self.map.remove(&ByAddress::of(victim));
        // Unreferenced (the handshake checked): settled at once.
        self.depart(books, victim, now, fleet, budget, release_slot);
        books.evicted += 1;
        true
    }
}

fn matches<K, C: Clock>(key: &impl KeyArg<K>, e: &Entry<K, C>) -> bool {
    e.key.as_ref().is_some_and(|k| key.matches(k))
}

impl<K, C: Clock> fmt::Debug for Shard<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shard").field("len", &self.len()).finish()
    }
}
