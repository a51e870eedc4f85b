//! [`Registry`]: one breaker per key (upstream host, route, tenant), created
//! on first use, for up to millions of keys, with no thread and no timer.
//!
//! # Handles first
//!
//! [`Registry::handle`] returns a [`Handle`]: a reference-counted pointer to
//! the key's entry that derefs to its [`Breaker`]. A caller keeps it per
//! upstream, route or pooled connection, and each request then touches only
//! that breaker's atomics — no hashing, no lock, no map. [`Registry::with`] is
//! the fallback for callers with nowhere to keep a handle: a borrowed lookup
//! that takes no lock and, for a known key, neither clones nor allocates.
//!
//! # Layout
//!
//! **Shards**, each in its own cache line: 256, or 8 to 4096 sized for 800
//! keys a shard at [`capacity`](RegistryBuilder::capacity), or
//! [`shards`](RegistryBuilder::shards). Each holds:
//!
//! * a **papaya map**, read with no lock under an epoch guard (a write to a
//!   per-thread slot, not a shared line). A slot is one pointer to a key's
//!   entry: key, breaker, idle tick and a "leaving" mark in one
//!   `triomphe::Arc` (no weak count). What failfast takes from papaya as
//!   given — linearizable per key, a read happens-after the write it sees,
//!   an entry found stays allocated while the guard lives — is stated in
//!   `registry::map`; the loom models run on a stand-in with just those;
//! * a **writer mutex** guarding the shard's books (departed call totals,
//!   eviction and removal counts): every insert, removal and sweep of the
//!   shard holds it, so a scan sees each entry once. Lookups never take it;
//! * an **overflow breaker**, shared by the shard's new keys while the
//!   registry is full.
//!
//! Beside them: the **budget** (entry slots and key bytes), the fleet
//! counters and the sweep schedule.
//!
//! # A lookup, and a miss
//!
//! The key is hashed **once** (std's keyed SipHash by default, any
//! `BuildHasher` pluggable). The 64 bits are folded to the breaker's 32-bit id
//! (its jitter seed, so open periods differ per host) and the map's hash is
//! rebuilt from the id, so a resize rehashes an entry from its breaker, never
//! from its key. Bits 25..57 of that hash, scaled to the shard count by one
//! multiply, pick the shard (below papaya's 7 tag bits, above its position
//! bits), whose map is probed with no lock. A hit stamps the entry's idle tick
//! (2²⁴ ns ≈ 16.8 ms: one load, and a store only when the tick changed). Then
//! `with` runs its closure on the breaker, while a caller that keeps the entry
//! — a [`Handle`], or a keyed layer's call, whose permit holds it until the
//! verdict — clones it and **claims** it (`Entry::claim`, the reader's half of
//! the handshake under "Eviction"). A claim that finds the entry leaving drops
//! the clone and goes the miss path's way.
//!
//! A miss takes the shard's writer lock and **looks again**: a racing insert
//! may have won, and its entry is returned (with no handshake: the lock
//! excludes the shard's evictions). Only a key still absent is cloned into a
//! new entry (with its own configuration if the builder's `override_key`
//! named it), once the budget grants its slot and its bytes; the insert
//! allocates the entry and papaya's node for its slot, then does one
//! piggybacked sweep step.
//!
//! # The key contract
//!
//! One upstream must have exactly one key, and the registry cannot know that
//! two spellings name one host: `K`'s `Eq` decides. So:
//!
//! * **normalise before the registry**: a key taken from a request must be
//!   canonical (the keyed layer's `AuthorityKey` lowercases the host, makes
//!   the port explicit, strips userinfo and a trailing dot, and rejects what
//!   does not parse), or one failing host gets a fresh breaker per spelling;
//! * `Hash` and `Eq` agree, and a borrowed form (`&str` for `String` or
//!   [`HostKey`]) hashes and compares exactly like the owned key;
//! * keys from untrusted input need a keyed hasher (the default SipHash) and
//!   a bound on their size: [`capacity`](RegistryBuilder::capacity) bounds
//!   entries, [`max_key_bytes`](RegistryBuilder::max_key_bytes) the bytes of
//!   their text ([`KeyBytes`]);
//! * text keys are cheapest in a `Registry<str>` (or as [`HostKey`]s): up
//!   to 23 bytes live inside the entry, with no allocation of their own
//!   ([`Key`]); a `Registry<String>` gives every key a heap buffer beside
//!   its entry (a 32-byte chunk for a host name of up to 24 bytes).
//!
//! # Eviction: by information, not by state
//!
//! Only a shard's writer evicts, under the writer lock: a sweep, or an insert
//! into a full registry making room ("Capacity"). Nothing runs in the
//! background. One shard at a time is swept, piggybacked on inserts (only the
//! caller that wins a CAS on the last-sweep stamp sweeps, about one shard
//! every `idle_ttl / shards`) or explicitly through [`Registry::maintain`]
//! and [`Registry::sweep`]. An entry is evicted when forgetting it loses
//! nothing worth its memory:
//!
//! * **nobody keeps it**: the map holds the only reference (the handshake
//!   below settles a race with a lookup that is cloning it);
//! * **idle longer than the TTL**: no lookup through the map and no handle
//!   released for that long (never stamped by the request path of a held
//!   handle); an OPEN breaker that still sees traffic is never evicted;
//! * and one of:
//!   * CLOSED and **pristine** — no failure run and no failure or slow call
//!     in its window, not ramping up after a recovery, no backoff step
//!     left to decay, and no upstream's hint remembered that is still
//!     running ([`Breaker::is_pristine_at`]): indistinguishable from a
//!     fresh breaker. A breaker that closed after trips in a row keeps its
//!     step and loses one per base open duration of healthy time; until it
//!     is back at the base it is not pristine, so a host that flaps keeps
//!     its longer open periods rather than being forgotten between flaps.
//!     Likewise a host that said "not for 2 minutes" with a verdict that
//!     did not trip is kept until those minutes have passed, so that its
//!     next trip still opens for them; and a host whose token retry budget
//!     is below full (only successes refill it) is kept, so that its
//!     retries stay refused until it recovers or `forget_after` passes;
//!   * CLOSED and idle longer than [`forget_after`](RegistryBuilder::forget_after)
//!     (default 1 h): every call its window holds started at least that long
//!     ago (a call is admitted through a lookup or a held handle, and both
//!     stamp the entry — a lookup when it happens, a handle when it is
//!     released; a kept entry is never evicted), and failures that old carry
//!     no information about the host now;
//!   * OPEN or HALF_OPEN and idle longer than the TTL **plus an open
//!     period** (an OPEN breaker's own, as its backoff step, an upstream's
//!     hint, its outlier pool's ejection or another replica's news set it; the configuration's backoff
//!     cap for a HALF_OPEN one): nobody asked for the host through a whole
//!     open period, so a fresh breaker would admit its next call just as
//!     this one would let it probe.
//!
//! Breakers in a manual mode (forced open, disabled, metrics only) and keys
//! inserted with [`insert_with`](Registry::insert_with) are never evicted.
//!
//! **The handshake.** The writer notes each entry that meets the rule with a
//! reference count of 1; a lookup may clone one after that read. So the
//! writer marks the candidate leaving, fences (SeqCst) and reads the count
//! again (`Entry::begin_leaving`), while a reader that keeps an entry clones
//! it, fences and reads the mark (`Entry::claim`): at least one sees the
//! other's write. The writer sees the clone and keeps the entry
//! (`Entry::stay`), or the reader sees the mark, drops its clone and takes
//! the miss path, whose writer lock finds the entry (kept) or inserts a fresh
//! one (evicted). **Settled** under the same lock: the entry leaves the map,
//! its call counters join the shard's departed totals, its key bytes and its
//! slot go back to the budget (a pressure eviction hands the slot to its
//! insert), and its breaker leaves the fleet counters. No lookup waits.
//!
//! # Capacity, key bytes, and the overflow breaker
//!
//! With [`capacity`](RegistryBuilder::capacity) set, an insert reserves a slot
//! (one CAS on a counter, by the shard's writer); with
//! [`max_key_bytes`](RegistryBuilder::max_key_bytes), it also reserves its
//! key's bytes. When either is exhausted, the insert evicts the **least
//! recently used** evictable entry of its own shard — under this pressure a
//! pristine entry counts as evictable whatever its idle time, since
//! forgetting it loses nothing. If there is none either, the key is **not
//! tracked**: it shares its shard's **overflow breaker** (same configuration
//! as the template) with every other new key of that shard until room is
//! made, and the refusal is counted in [`Registry::untracked`].
//!
//! The choice and its cost: a junk flood cannot grow memory past the bounds,
//! cannot push out a breaker that holds information, and a real upstream that
//! fails while the registry is full is still rejected — by its shard's
//! overflow breaker, which trips on the failures of every untracked key in
//! that shard. The cost is collateral: while an overflow breaker is open, a
//! healthy new key of that shard is rejected too (one shard in `shards`),
//! until the overflow breaker probes and closes or an entry frees up. A
//! fresh untracked breaker per request (the alternative) would protect
//! nothing. A shard that found nothing to evict is not scanned again within
//! the same tick; a pressure scan reads every entry of the shard (800 when
//! full) under its writer lock, which lookups never wait for.
//!
//! # Discovery: remove, retain, insert_with
//!
//! [`remove`](Registry::remove) and [`retain`](Registry::retain) take keys out
//! of the map under the shard's writer lock, with no handshake: a removal
//! does not wait for holders. [`insert_with`](Registry::insert_with) puts a
//! key in with its own configuration (replacing any current entry) and pins
//! it: never evicted, gone only when removed. A departing breaker leaves the
//! fleet counters at once — an OPEN one frees its place in
//! [`open_count`](Registry::open_count) and in the `max_open` budget. If
//! nobody holds it, that is all. If handles are alive, they keep working on
//! the departed breaker, with its state and its whole behaviour: the breaker
//! left the registry's trip gate in one atomic step (a bit in its state
//! word), so none of its later transitions touches the registry's counters,
//! and a later lookup of the key creates a fresh breaker — the old one is
//! never tracked again.
//!
//! # Totals that never go down
//!
//! When a breaker that counts calls ([`Builder::count_calls`](crate::Builder::count_calls))
//! leaves a shard, its counters are folded into that shard's departed totals
//! under the writer lock, and [`lifetime_calls`](Registry::lifetime_calls)
//! reads each shard's entries and departed totals under that same lock: each
//! breaker is counted exactly once, in the map or as it was when it left, so
//! the lifetime totals are monotone across evictions and removals
//! (`tests/metrics_totals.rs`). Calls on a removed breaker after it left are
//! not counted.
//!
//! # Fleet-wide open cap
//!
//! All breakers of a registry share one set of counters (`fleet`): breakers
//! per state, and how many hold an ejection slot. With
//! [`max_open`](RegistryBuilder::max_open), a trip of an upstream *seen
//! succeeding at least once* (or inserted through discovery,
//! [`insert_with`](Registry::insert_with)) first reserves an ejection slot;
//! over the cap the trip is refused, the breaker stays CLOSED, and the
//! refusal is counted ([`Registry::refused_trips`]). An upstream never seen
//! working — junk keys from requests, a host down from the start — opens
//! without a slot: it is rejected like any open breaker, but it cannot use
//! up the budget that keeps real upstreams in service. The slot travels with
//! the ejection in the breaker's state word and is given back when it closes,
//! is forced or reset, or leaves the registry. The counters change only
//! on transitions, inserts, evictions and removals — never per call — which
//! is also why [`len`](Registry::len), [`open_count`](Registry::open_count)
//! and [`half_open_count`](Registry::half_open_count) are O(1).
//!
//! # Invariants
//!
//! Each names what checks it; each loom model (`loom-tests/tests/`) catches
//! a deliberate bug of the catalogue (`loom-tests/bugs/`).
//!
//! * **Lookups take no lock**: a lookup, a handle and a call complete while
//!   every writer of their shard is paused (lib test
//!   `registry::lock_free_reads`; bug `reads-take-the-writer-lock`).
//! * **One breaker per key**: an insert happens only under the writer lock
//!   after a second lookup there, so of two racing misses the second finds
//!   the first's entry (loom `registry`,
//!   `registry_one_per_key::racing_inserts_make_one_breaker`; bug
//!   `insert-no-second-lookup`).
//! * **No eviction under a keeper**: an entry a handle or a keyed call keeps
//!   is not evicted while kept; at each attempt the writer sees its
//!   reference, or the reader saw the mark and kept no clone. So a kept
//!   entry is the key's tracked one when its lookup returns (the one found,
//!   or one inserted after the eviction) and stays so until the key is
//!   removed (loom
//!   `registry_one_per_key::sweep_never_splits_a_handle_from_the_map`,
//!   `registry_sweep::sweep_never_evicts_under_a_later_lookup`; bugs
//!   `handle-keeps-a-leaving-entry`, `leaving-mark-without-fence`,
//!   `sweep-recheck-no-refcount`).
//! * **A reader racing an eviction, a removal, a sweep and a re-insertion of
//!   the same key** (papaya's per-key guarantees taken as given) finds an
//!   entry that was the key's at some instant of its lookup, or misses and
//!   looks again under the writer lock. A departed entry never returns to
//!   the map: a re-insertion is a fresh breaker. A kept entry is never an
//!   evicted one (above). And:
//!   * a removal (`remove`, `retain`, a replacing `insert_with`) makes no
//!     handshake: a lookup racing it may keep the departed breaker, as a
//!     holder from before it does. That breaker keeps its state and
//!     behaviour, is out of the fleet counters and is never tracked again
//!     (loom `registry_remove`);
//!   * `with` keeps nothing: its closure may run on an entry a writer evicts
//!     or removes meanwhile. The entry stays allocated until it returns, but
//!     what it records lands on a breaker the key's later lookups do not
//!     find (no loom model covers this; an evicted breaker held no
//!     information when the writer judged it).
//! * **A departing breaker is settled once**, under the writer lock, leaving
//!   the fleet counters in one atomic step on its state word whoever still
//!   holds it (loom `registry_remove`: the counters match the map, bug
//!   `detach-ignored`; suite `tests/registry_model.rs`).
//! * **Counters are statistics:** the fleet and budget counters, the idle
//!   ticks and the sweep schedule are `Relaxed`; the writer lock orders a
//!   shard's structural changes, and the map publishes each entry to its
//!   readers. The budget is exact: reserved before and released after the
//!   map change it accounts for.
//!
//! ```
//! use failfast::{Breaker, ManualClock, Nanos, Registry, State};
//! use std::time::Duration;
//!
//! let clock = ManualClock::new();
//! let registry = Registry::<str>::builder(
//!         Breaker::builder().consecutive_failures(1).open_duration(Duration::from_secs(60)),
//!     )
//!     .build_with_clock(clock.clone())?;
//!
//! let a = registry.handle("a.example:443");
//! a.try_acquire().unwrap().failure();
//! assert_eq!(a.state(), State::Open);
//! // Another host is unaffected.
//! assert!(registry.handle("b.example:443").try_acquire().is_ok());
//! assert_eq!((registry.len(), registry.open_count()), (2, 1));
//! # Ok::<(), failfast::ConfigError>(())
//! ```

mod budget;
mod builder;
mod discovery;
mod fleet;
mod handle;
mod hash;
mod host;
mod key;
#[cfg(all(test, not(failfast_loom)))]
mod lock_free_reads;
mod map;
mod names;
mod pools;
mod remote;
mod shard;
mod sweep;

use core::borrow::Borrow;
use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::time::Duration;
use std::collections::hash_map::RandomState;

use crossbeam_utils::CachePadded;
use hashbrown::HashTable;

pub use self::builder::RegistryBuilder;
pub use self::fleet::MaxOpen;
pub use self::handle::Handle;
pub use self::host::HostKey;
pub use self::key::{Key, KeyBytes, Lookup};

use self::budget::Budget;
use self::fleet::Fleet;
use self::handle::Kind;
pub(crate) use self::handle::{Entry, EntryArc};
use self::hash::key_hash;
use self::key::{Borrowed, Converted, KeyArg, Owned, Stored};
use self::shard::{shard_index, Evict, Shard};
use self::sweep::Schedule;
use crate::breaker::{Breaker, Shared};
use crate::builder::Builder;
use crate::clock::{Clock, Nanos, QuantaClock};
use crate::hooks::{Hooks, OnTransition};
use crate::observe::{BreakerSnapshot, CallCounts};
use crate::state::State;
use crate::sync::{Arc, AtomicU64, Ordering};

/// The shards of a registry of `K`, each in its own cache line (a std
/// `Arc`: the hooks' names hold them weakly).
type Shards<K, C> = std::sync::Arc<[CachePadded<Shard<Stored<K>, C>>]>;

/// A key with its own configuration.
struct Override<K, C: Clock> {
    key: K,
    hash: u64,
    shared: Arc<Shared<C>>,
}

/// One circuit breaker per key, created on first use; see the
/// [module docs](self) for the design.
///
/// `K` is the key type. For host names, a `Registry<str>` keeps each name
/// inside its entry ([`Key`]); any sized `K: Hash + Eq` (a `String`, a
/// `u64`, a type of your own) is kept as itself.
///
/// ```
/// use failfast::{Breaker, Registry};
///
/// let registry = Registry::<str>::builder(Breaker::builder().consecutive_failures(5))
///     .capacity(100_000)
///     .build()?;
/// // Once per upstream: a handle. Per request: the breaker's atomics only.
/// let upstream = registry.handle("api.example.com:443");
/// match upstream.try_acquire() {
///     Ok(permit) => {
///         permit.success();
///     }
///     Err(rejected) => println!("fail fast: {rejected}"),
/// }
/// # Ok::<(), failfast::ConfigError>(())
/// ```
pub struct Registry<K: ?Sized + Key, S = RandomState, C: Clock = QuantaClock> {
    shards: Shards<K, C>,
    hasher: S,
    shared: Arc<Shared<C>>,
    overrides: HashTable<Override<Stored<K>, C>>,
    /// Also every breaker's trip gate (a std `Arc`: the gate is a trait
    /// object, which loom's `Arc` cannot hold; its counters are loom's).
    fleet: std::sync::Arc<Fleet>,
    /// The outlier pools of its keys (none without outliers).
    pools: pools::Pools,
    budget: Budget<Stored<K>>,
    idle_ttl: Duration,
    forget_after: Duration,
    ttl_ticks: u32,
    forget_ticks: u32,
    /// Lookups of new keys sent to an overflow breaker (the registry was full).
    untracked: AtomicU64,
    /// Requests whose key could not be derived (counted by the keyed layer).
    keyless: AtomicU64,
    /// The breaker keyless requests share when the keyed layer asks for one.
    unkeyed: EntryArc<Entry<Stored<K>, C>>,
    schedule: Schedule,
}

impl<K: Hash + Eq + Key + ?Sized> Registry<K> {
    /// A builder stamping every key's breaker from `template` (validated once,
    /// shared by all breakers).
    ///
    /// ```
    /// use failfast::{Breaker, Registry};
    /// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(5)).build()?;
    /// assert!(registry.is_empty());
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn builder(template: Builder) -> RegistryBuilder<K> {
        RegistryBuilder::new(template)
    }
}

impl<K: Hash + Eq + Key + ?Sized, S: BuildHasher, C: Clock> Registry<K, S, C> {
    /// The handle of `key`'s breaker, creating it on first use (the key is
    /// cloned only then). Call it once per upstream and keep the handle.
    ///
    /// Never fails: if the registry is full and nothing can be evicted, the
    /// handle is its shard's overflow breaker (see [`Handle::is_tracked`]).
    ///
    /// ```
    /// # use failfast::{Breaker, Handle, Registry};
    /// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(5)).build()?;
    /// let a = registry.handle("db:5432");
    /// let b = registry.handle("db:5432");
    /// assert!(Handle::ptr_eq(&a, &b));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn handle<Q>(&self, key: &Q) -> Handle<K, C>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + Lookup<K> + ?Sized,
    {
        self.handle_at(key, self.now())
    }

    /// [`handle`](Self::handle) at `now` (the idle stamp and sweep schedule).
    ///
    /// ```
    /// # use failfast::{Breaker, ManualClock, Nanos, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(5))
    ///     .build_with_clock(ManualClock::new())?;
    /// let h = registry.handle_at(&42, Nanos::from_secs(1));
    /// assert_eq!(h.key(), Some(&42));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn handle_at<Q>(&self, key: &Q, now: Nanos) -> Handle<K, C>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + Lookup<K> + ?Sized,
    {
        let hash = key_hash(&self.hasher, key);
        Handle::new(self.entry(hash, Borrowed::new(key), now))
    }

    /// Runs `f` on `key`'s breaker without cloning a handle or allocating
    /// (for an existing key), creating the breaker on first use.
    ///
    /// `f` holds no lock (it may even look up another key), but it runs
    /// inside the map's epoch guard and on an entry nothing keeps: keep it
    /// short (take a permit *decision*, read the state). A writer may evict
    /// or remove the entry while `f` runs, and then what `f` records stays
    /// on a breaker the key's later lookups do not find (module docs,
    /// "Invariants"). A call that must outlive `f` needs a [`Handle`].
    ///
    /// ```
    /// # use failfast::{Breaker, Registry, State};
    /// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(5))
    ///     .shards(1)
    ///     .build()?;
    /// let admitted = registry.with("search:9200", |breaker| breaker.try_acquire().is_ok());
    /// assert!(admitted);
    /// assert_eq!(registry.with("search:9200", |b| b.state()), State::Closed);
    /// // No lock held: a lookup (here an insert) of the same shard from `f`.
    /// assert!(registry.with("search:9200", |_| registry.handle("db:5432").is_tracked()));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn with<Q, R>(&self, key: &Q, f: impl FnOnce(&Breaker<C>) -> R) -> R
    where
        K: Borrow<Q>,
        Q: Hash + Eq + Lookup<K> + ?Sized,
    {
        self.with_at(key, self.now(), f)
    }

    /// [`with`](Self::with) at `now`.
    ///
    /// ```
    /// # use failfast::{Breaker, ManualClock, Nanos, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1))
    ///     .build_with_clock(ManualClock::new())?;
    /// let now = Nanos::from_secs(5);
    /// registry.with_at(&1, now, |b| b.try_acquire_at(now).unwrap().failure_at(now));
    /// assert_eq!(registry.open_count(), 1);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn with_at<Q, R>(&self, key: &Q, now: Nanos, f: impl FnOnce(&Breaker<C>) -> R) -> R
    where
        K: Borrow<Q>,
        Q: Hash + Eq + Lookup<K> + ?Sized,
    {
        let hash = key_hash(&self.hasher, key);
        let key = Borrowed::new(key);
        match self.shard(hash).find(hash, &key, |e| {
            e.touch(now);
            f(&e.breaker)
        }) {
            Ok(r) => r,
            // A miss: straight to the insert, which looks again under the
            // shard's writer lock (no second lock-free probe first).
            Err(f) => f(&self.insert(self.shard(hash), hash, key, now)),
        }
    }

    /// The entry of `key`, kept (a handle's, or a keyed call's on a miss):
    /// found with no lock and cloned, then claimed ([`Entry::claim`]). An
    /// entry its shard's writer is evicting is let go, and the key goes the
    /// miss path's way: under the writer lock, which waits for that writer,
    /// it finds the entry (the writer kept it) or inserts a fresh one.
    fn entry(
        &self,
        hash: u64,
        key: impl KeyArg<Stored<K>>,
        now: Nanos,
    ) -> EntryArc<Entry<Stored<K>, C>> {
        let shard = self.shard(hash);
        let found = shard.find(hash, &key, |e| {
            e.touch(now);
            e.clone()
        });
        match found {
            Ok(e) if e.claim() => e,
            _ => self.insert(shard, hash, key, now),
        }
    }

    /// The miss path (allocates): insert under the shard's writer lock, or
    /// hand out the shard's overflow breaker when full; then one piggybacked
    /// sweep step.
    #[cold]
    fn insert(
        &self,
        shard: &Shard<Stored<K>, C>,
        hash: u64,
        key: impl KeyArg<Stored<K>>,
        now: Nanos,
    ) -> EntryArc<Entry<Stored<K>, C>> {
        let over = self.overrides.find(hash, |o| key.matches(&o.key));
        let shared = over.map_or(&self.shared, |o| &o.shared);
        let inserted = shard.insert(hash, key, self.rule(now), &self.fleet, &self.budget, |k| {
            let breaker = Breaker::from_shared(shared.clone(), hash::id_of(hash));
            EntryArc::new(Entry::new(breaker, Some(k), now, Kind::Tracked))
        });
        let entry = inserted.unwrap_or_else(|| {
            // Relaxed: a statistic.
            self.untracked.fetch_add(1, Ordering::Relaxed);
            shard.overflow().clone()
        });
        self.maintain_up_to(now, 1);
        entry
    }
}

/// Lookups that convert or move a sized key into the entry.
impl<K: Hash + Eq, S: BuildHasher, C: Clock> Registry<K, S, C> {
    /// [`handle`](Self::handle) for a key type whose borrowed form converts
    /// with `From` rather than `ToOwned` — a [`HostKey`] looked up by `&str`:
    /// the text is converted only when the key is new.
    ///
    /// ```
    /// # use failfast::{Breaker, Handle, Registry};
    /// use failfast::registry::HostKey;
    /// let registry = Registry::<HostKey>::builder(Breaker::builder().consecutive_failures(5)).build()?;
    /// let a = registry.handle_from("db:5432");
    /// let b = registry.get_or_insert(HostKey::from("db:5432"));
    /// assert!(Handle::ptr_eq(&a, &b));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn handle_from<Q>(&self, key: &Q) -> Handle<K, C>
    where
        K: Borrow<Q> + for<'q> From<&'q Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.handle_from_at(key, self.now())
    }

    /// [`handle_from`](Self::handle_from) at `now`.
    ///
    /// ```
    /// # use failfast::{Breaker, ManualClock, Nanos, Registry};
    /// use failfast::registry::HostKey;
    /// let registry = Registry::<HostKey>::builder(Breaker::builder().consecutive_failures(5))
    ///     .build_with_clock(ManualClock::new())?;
    /// assert!(registry.handle_from_at("db:5432", Nanos::ZERO).is_tracked());
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn handle_from_at<Q>(&self, key: &Q, now: Nanos) -> Handle<K, C>
    where
        K: Borrow<Q> + for<'q> From<&'q Q>,
        Q: Hash + Eq + ?Sized,
    {
        Handle::new(self.entry_from_at(key, now))
    }

    /// The entry of a borrowed key whose `ToOwned` is `K` (the keyed layer's
    /// `KeySink::borrowed`: any such `Q`, not only those that are a
    /// [`Lookup`] of `K`).
    #[cfg(feature = "tower")]
    pub(crate) fn entry_borrowed_at<Q>(&self, key: &Q, now: Nanos) -> EntryArc<Entry<K, C>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let hash = key_hash(&self.hasher, key);
        self.entry(hash, self::key::Cloned(key), now)
    }

    /// The entry of a borrowed key converted with `From` (the keyed layer's
    /// lookup: no handle, so no clock read when it is dropped).
    pub(crate) fn entry_from_at<Q>(&self, key: &Q, now: Nanos) -> EntryArc<Entry<Stored<K>, C>>
    where
        K: Borrow<Q> + for<'q> From<&'q Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = key_hash(&self.hasher, key);
        self.entry(hash, Converted(key), now)
    }

    /// The entry of an owned key (see [`entry_from_at`](Self::entry_from_at)).
    pub(crate) fn entry_owned_at(&self, key: K, now: Nanos) -> EntryArc<Entry<Stored<K>, C>> {
        let hash = key_hash(&self.hasher, &key);
        self.entry(hash, Owned(key), now)
    }

    /// [`handle`](Self::handle) for an owned key: never clones it, and drops
    /// it if the key is already tracked.
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(5)).build()?;
    /// let h = registry.get_or_insert("cache:6379".to_string());
    /// assert_eq!(registry.len(), 1);
    /// # drop(h);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn get_or_insert(&self, key: K) -> Handle<K, C> {
        self.get_or_insert_at(key, self.now())
    }

    /// [`get_or_insert`](Self::get_or_insert) at `now`.
    ///
    /// ```
    /// # use failfast::{Breaker, ManualClock, Nanos, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(5))
    ///     .build_with_clock(ManualClock::new())?;
    /// assert!(registry.get_or_insert_at(7, Nanos::ZERO).is_tracked());
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn get_or_insert_at(&self, key: K, now: Nanos) -> Handle<K, C> {
        Handle::new(self.entry_owned_at(key, now))
    }
}

impl<K: Key + ?Sized, S, C: Clock> Registry<K, S, C>
where
    Stored<K>: fmt::Display + Send + Sync + 'static,
{
    /// Calls `hook` on every transition of every breaker of this registry
    /// from now on, named by its key (by `Display`; a breaker many keys
    /// share is [`SHARED_NAME`](crate::SHARED_NAME), one no longer in the
    /// registry [`REMOVED_NAME`](crate::REMOVED_NAME)), after the
    /// configuration's [`Observer`](crate::Observer) and the hooks added
    /// before it. Whatever caused the transition: a verdict, a drop, a
    /// panic, an admission that starts a probe round, news from another
    /// replica, `force_open` or `reset`. Nothing is paid per call: the key
    /// is found and formatted (on the stack) on transitions only.
    ///
    /// ```
    /// use failfast::{Breaker, Registry, Transition};
    /// use std::sync::{Arc, Mutex};
    ///
    /// let registry = Registry::<str>::builder(Breaker::builder().consecutive_failures(1))
    ///     .build()?;
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = seen.clone();
    /// registry.on_transition(move |host: &str, t: &Transition| {
    ///     log.lock().unwrap().push(format!("{host}: {}", t.reason));
    /// });
    /// registry.handle("db-1:5432").try_acquire().unwrap().failure();
    /// registry.handle("db-2:5432").force_open();
    /// assert_eq!(
    ///     *seen.lock().unwrap(),
    ///     ["db-1:5432: consecutive_failures", "db-2:5432: force_open"]
    /// );
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn on_transition(&self, hook: impl OnTransition) {
        self.named_hooks().keep_by_key(hook);
    }

    /// Adds a layer's hook, heard while the lease lives.
    #[cfg(feature = "tower")]
    pub(crate) fn lend_hook(&self, hook: std::sync::Arc<dyn OnTransition>) -> crate::hooks::Lease {
        self.named_hooks().lend_by_key(hook)
    }

    /// The registry's hooks, naming breakers by their keys.
    fn named_hooks(&self) -> &Hooks<Breaker<C>> {
        let hooks = &self.shared.hooks;
        hooks.name_by(|| {
            Box::new(names::KeyNames {
                shards: std::sync::Arc::downgrade(&self.shards),
                shared: self.unkeyed.breaker.shared_address(),
            })
        });
        hooks
    }
}

impl<K: Key + ?Sized, S, C: Clock> Registry<K, S, C> {
    #[inline]
    fn shard(&self, hash: u64) -> &Shard<Stored<K>, C> {
        &self.shards[shard_index(hash, self.shards.len())]
    }

    fn rule(&self, now: Nanos) -> Evict {
        Evict {
            now,
            ttl_ticks: self.ttl_ticks,
            forget_ticks: self.forget_ticks,
            pressure: false,
        }
    }

    /// The registry's clock reading (the keyed layer reads it once per request).
    #[inline]
    pub(crate) fn now(&self) -> Nanos {
        self.shared.clock.now()
    }

    /// Counts a request whose key could not be derived.
    #[cfg(feature = "tower")]
    pub(crate) fn count_keyless(&self) {
        // Relaxed: a statistic.
        self.keyless.fetch_add(1, Ordering::Relaxed);
    }

    /// The unkeyed breaker's entry.
    #[cfg(feature = "tower")]
    pub(crate) fn unkeyed_entry(&self) -> &EntryArc<Entry<Stored<K>, C>> {
        &self.unkeyed
    }

    fn sweep_shards(&self, count: usize, now: Nanos) -> usize {
        let rule = self.rule(now);
        let mut evicted = 0;
        for _ in 0..count.min(self.shards.len()) {
            let shard = &self.shards[self.schedule.next_shard(self.shards.len())];
            evicted += shard.sweep(rule, &self.fleet, &self.budget);
        }
        evicted
    }

    fn maintain_up_to(&self, now: Nanos, max: usize) -> usize {
        match self.schedule.claim(now, max) {
            0 => 0,
            due => self.sweep_shards(due, now),
        }
    }

    /// Sweeps the shards that are due at `now` (a full pass takes about one
    /// idle TTL), if this caller wins the schedule's CAS; returns how many
    /// entries were evicted. Inserts already do one step each; call this from
    /// a place that runs anyway (a scrape, a request) if inserts are rare.
    ///
    /// ```
    /// # use failfast::{Breaker, ManualClock, Nanos, Registry};
    /// # use std::time::Duration;
    /// let clock = ManualClock::new();
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1))
    ///     .idle_ttl(Duration::from_secs(60))
    ///     .build_with_clock(clock.clone())?;
    /// drop(registry.handle(&1));
    /// clock.advance(Duration::from_secs(180)); // idle for three TTLs: a full pass is due
    /// assert_eq!(registry.maintain(), 1);
    /// assert!(registry.is_empty());
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn maintain(&self) -> usize {
        self.maintain_at(self.now())
    }

    /// [`maintain`](Self::maintain) at `now`.
    ///
    /// ```
    /// # use failfast::{Breaker, ManualClock, Nanos, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1))
    ///     .build_with_clock(ManualClock::new())?;
    /// assert_eq!(registry.maintain_at(Nanos::ZERO), 0); // nothing due yet
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn maintain_at(&self, now: Nanos) -> usize {
        self.maintain_up_to(now, self.shards.len())
    }

    /// Sweeps the next `budget` shards now, due or not; returns how many
    /// entries were evicted. Each shard's writer lock is held for that shard's
    /// scan alone; lookups never wait for it.
    ///
    /// ```
    /// # use failfast::{Breaker, ManualClock, Registry};
    /// # use std::time::Duration;
    /// let clock = ManualClock::new();
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1))
    ///     .idle_ttl(Duration::from_secs(60))
    ///     .shards(4)
    ///     .build_with_clock(clock.clone())?;
    /// let kept = registry.handle(&1);        // a live handle: never evicted
    /// drop(registry.handle(&2));
    /// clock.advance(Duration::from_secs(61));
    /// assert_eq!(registry.sweep(4), 1);
    /// assert_eq!(registry.len(), 1);
    /// # drop(kept);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn sweep(&self, budget: usize) -> usize {
        self.sweep_at(budget, self.now())
    }

    /// [`sweep`](Self::sweep) at `now`.
    ///
    /// ```
    /// # use failfast::{Breaker, ManualClock, Nanos, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1))
    ///     .build_with_clock(ManualClock::new())?;
    /// assert_eq!(registry.sweep_at(usize::MAX, Nanos::ZERO), 0);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn sweep_at(&self, budget: usize, now: Nanos) -> usize {
        self.sweep_shards(budget, now)
    }

    /// Tracked keys (O(1), from counters kept on insert and eviction).
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1)).build()?;
    /// let _a = registry.handle(&1);
    /// assert_eq!(registry.len(), 1);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn len(&self) -> usize {
        self.fleet.tracked()
    }

    /// No key is tracked.
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1)).build()?;
    /// assert!(registry.is_empty());
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Each outlier pool's numbers now: members, unhealthy and ejected
    /// hosts, panic, outliers found and ejected by rule, the last figures
    /// (empty without [`RegistryBuilder::outliers`]). O(pools).
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(5)).build()?;
    /// assert!(registry.outlier_pools().is_empty());
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn outlier_pools(&self) -> Vec<crate::OutlierPoolSnapshot> {
        self.pools.snapshots(self.shared.clock.now())
    }

    /// Tracked breakers that are OPEN (O(1), counters kept on transitions).
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1)).build()?;
    /// registry.handle(&1).try_acquire().unwrap().failure();
    /// assert_eq!(registry.open_count(), 1);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn open_count(&self) -> usize {
        self.fleet.count(State::Open)
    }

    /// Tracked breakers that are HALF_OPEN (O(1)).
    ///
    /// ```
    /// # use failfast::{Breaker, ManualClock, Registry};
    /// # use std::time::Duration;
    /// let clock = ManualClock::new();
    /// let registry = Registry::<u64>::builder(
    ///         Breaker::builder().consecutive_failures(1).open_duration(Duration::from_secs(1)),
    ///     )
    ///     .build_with_clock(clock.clone())?;
    /// let h = registry.handle(&1);
    /// h.try_acquire().unwrap().failure();
    /// clock.advance(Duration::from_secs(2));
    /// let probe = h.try_acquire().unwrap();
    /// assert_eq!((registry.open_count(), registry.half_open_count()), (0, 1));
    /// # drop(probe);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn half_open_count(&self) -> usize {
        self.fleet.count(State::HalfOpen)
    }

    /// Tracked breakers in `state` (O(1)).
    ///
    /// ```
    /// # use failfast::{Breaker, Registry, State};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1)).build()?;
    /// let _h = registry.handle(&1);
    /// assert_eq!(registry.count_in(State::Closed), 1);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn count_in(&self, state: State) -> usize {
        self.fleet.count(state)
    }

    /// Trips refused by the open cap since the registry was built. The cap
    /// counts upstreams seen succeeding at least once (or inserted through
    /// [`insert_with`](Self::insert_with)): junk that never worked opens
    /// without taking a slot.
    ///
    /// ```
    /// # use failfast::{Breaker, MaxOpen, Registry, State};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1))
    ///     .max_open(MaxOpen::Count(1))
    ///     .build()?;
    /// let first = registry.handle(&1);
    /// first.try_acquire().unwrap().success();                // a real upstream
    /// first.try_acquire().unwrap().failure();                // opens: the one slot
    /// let second = registry.handle(&2);
    /// second.try_acquire().unwrap().success();
    /// second.try_acquire().unwrap().failure();               // refused: stays closed
    /// assert_eq!(second.state(), State::Closed);
    /// assert_eq!(registry.refused_trips(), 1);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn refused_trips(&self) -> u64 {
        self.fleet.refused_trips()
    }

    /// Lookups of new keys refused because the registry was full (each got
    /// its shard's overflow breaker).
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1)).build()?;
    /// assert_eq!(registry.untracked(), 0);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn untracked(&self) -> u64 {
        // Relaxed: a statistic.
        self.untracked.load(Ordering::Relaxed)
    }

    /// The capacity bound, if any.
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1)).build()?;
    /// assert_eq!(registry.capacity(), None);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn capacity(&self) -> Option<usize> {
        self.budget.capacity()
    }

    /// The key-byte budget, if any.
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(1))
    ///     .max_key_bytes(1 << 20)
    ///     .build()?;
    /// assert_eq!(registry.max_key_bytes(), Some(1 << 20));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn max_key_bytes(&self) -> Option<usize> {
        self.budget.max_key_bytes()
    }

    /// Bytes of key text held by tracked entries (counted only with a
    /// [`max_key_bytes`](RegistryBuilder::max_key_bytes) budget; 0 without).
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(1))
    ///     .max_key_bytes(1 << 20)
    ///     .build()?;
    /// let _h = registry.handle("db:5432");
    /// assert_eq!(registry.key_bytes(), 7);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn key_bytes(&self) -> usize {
        self.budget.key_bytes()
    }

    /// Requests the keyed layer could not derive a key for (an unparsable or
    /// over-long authority), since the registry was built.
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(1)).build()?;
    /// assert_eq!(registry.keyless(), 0);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn keyless(&self) -> u64 {
        // Relaxed: a statistic.
        self.keyless.load(Ordering::Relaxed)
    }

    /// The breaker keyless requests share when the keyed layer is told to
    /// guard them with one (`Keyless::Shared`) rather than reject them. Not in
    /// the map: not counted in [`len`](Self::len) or
    /// [`open_count`](Self::open_count), never evicted.
    ///
    /// ```
    /// # use failfast::{Breaker, Handle, Registry};
    /// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(1)).build()?;
    /// assert!(Handle::ptr_eq(&registry.unkeyed(), &registry.unkeyed()));
    /// assert!(!registry.unkeyed().is_tracked());
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn unkeyed(&self) -> Handle<K, C> {
        Handle::new(self.unkeyed.clone())
    }

    /// Entries evicted since the registry was built (idle, or to make room).
    ///
    /// ```
    /// # use failfast::{Breaker, ManualClock, Registry};
    /// # use std::time::Duration;
    /// let clock = ManualClock::new();
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1))
    ///     .idle_ttl(Duration::from_secs(60))
    ///     .build_with_clock(clock.clone())?;
    /// drop(registry.handle(&1));
    /// clock.advance(Duration::from_secs(61));
    /// registry.sweep(usize::MAX);
    /// assert_eq!(registry.evicted(), 1);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn evicted(&self) -> u64 {
        self.shards.iter().map(|s| s.departures().0).sum()
    }

    /// Entries removed since the registry was built ([`remove`](Self::remove),
    /// [`retain`](Self::retain), replaced by [`insert_with`](Self::insert_with)).
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1)).build()?;
    /// drop(registry.handle(&1));
    /// registry.remove(&1);
    /// assert_eq!(registry.removed(), 1);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn removed(&self) -> u64 {
        self.shards.iter().map(|s| s.departures().1).sum()
    }

    /// The lifetime call counters of every breaker this registry ever held —
    /// those evicted or removed (folded in when they left) plus the live ones,
    /// the overflow and the unkeyed breakers — or `None` if its breakers do
    /// not count calls ([`Builder::count_calls`](crate::Builder::count_calls)).
    /// Monotone: each breaker is counted exactly once at any time (see the
    /// [module docs](self#totals-that-never-go-down)). One pass over the
    /// entries, under one shard's writer lock at a time (lookups go on).
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<u64>::builder(
    ///         Breaker::builder().consecutive_failures(5).count_calls(true),
    ///     )
    ///     .build()?;
    /// let h = registry.handle(&1);
    /// h.try_acquire().unwrap().success();
    /// drop(h);
    /// registry.remove(&1);
    /// assert_eq!(registry.lifetime_calls().unwrap().successes, 1);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn lifetime_calls(&self) -> Option<CallCounts> {
        let now = self.now();
        let mut total = CallCounts::default();
        let mut any = self.shared.config.counts_calls();
        let mut add = |b: &Breaker<C>| {
            if let Some(c) = b.snapshot_at(now).calls {
                any = true;
                shard::add_calls(&mut total, &c);
            }
        };
        add(&self.unkeyed.breaker);
        let mut departed = CallCounts::default();
        for shard in self.shards.iter() {
            let d = shard.for_each_with_departed(|e| add(&e.breaker));
            shard::add_calls(&mut departed, &d);
        }
        any |= departed != CallCounts::default();
        shard::add_calls(&mut total, &departed);
        any.then_some(total)
    }

    /// The idle TTL.
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// # use std::time::Duration;
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1)).build()?;
    /// assert_eq!(registry.idle_ttl(), Duration::from_secs(600));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn idle_ttl(&self) -> Duration {
        self.idle_ttl
    }

    /// How long a CLOSED breaker's window is remembered without use.
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// # use std::time::Duration;
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1)).build()?;
    /// assert_eq!(registry.forget_after(), Duration::from_secs(3600));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn forget_after(&self) -> Duration {
        self.forget_after
    }

    /// The number of shards.
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1))
    ///     .capacity(1_000_000)
    ///     .build()?;
    /// assert_eq!(registry.shard_count(), 1250); // 800 keys each when full
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Calls `f` with every tracked key and a snapshot of its breaker, one
    /// shard at a time, each under its writer lock: lookups go on, and only
    /// that shard's inserts, removals and sweeps wait for the scrape. Nothing
    /// is cloned; do not call back into the registry from `f` (an insert
    /// into the shard being read would wait for its own lock).
    ///
    /// ```
    /// # use failfast::{Breaker, Registry, State};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1)).build()?;
    /// registry.handle(&1).try_acquire().unwrap().failure();
    /// let _b = registry.handle(&2);
    /// let mut open = Vec::new();
    /// registry.for_each_snapshot(|key, s| if s.state == State::Open { open.push(*key) });
    /// assert_eq!(open, [1]);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn for_each_snapshot(&self, mut f: impl FnMut(&K, &BreakerSnapshot)) {
        for shard in self.shards.iter() {
            let now = self.now();
            shard.for_each(|e| {
                if let Some(key) = &e.key {
                    f(key.borrow(), &e.breaker.snapshot_at(now));
                }
            });
        }
    }

    /// An iterator of `(key, snapshot)` that copies one shard at a time, so no
    /// lock is held between calls to `next`. The keys are clones of their
    /// stored form ([`Key`]): `K` itself, or a [`HostKey`] for a
    /// `Registry<str>`.
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(1)).build()?;
    /// let _a = registry.handle("a");
    /// let keys: Vec<String> = registry.snapshots().map(|(k, _)| k).collect();
    /// assert_eq!(keys, ["a"]);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn snapshots(&self) -> Snapshots<'_, K, S, C>
    where
        Stored<K>: Clone,
    {
        Snapshots {
            registry: self,
            next_shard: 0,
            buffer: Vec::new().into_iter(),
        }
    }
}

/// The iterator of [`Registry::snapshots`].
pub struct Snapshots<'a, K: Key + ?Sized, S, C: Clock> {
    registry: &'a Registry<K, S, C>,
    next_shard: usize,
    buffer: std::vec::IntoIter<(Stored<K>, BreakerSnapshot)>,
}

impl<K: Key + ?Sized, S, C: Clock> Iterator for Snapshots<'_, K, S, C>
where
    Stored<K>: Clone,
{
    type Item = (Stored<K>, BreakerSnapshot);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(item) = self.buffer.next() {
                return Some(item);
            }
            let shard = self.registry.shards.get(self.next_shard)?;
            self.next_shard += 1;
            let now = self.registry.now();
            let mut items = Vec::new();
            shard.for_each(|e| {
                if let Some(key) = &e.key {
                    items.push((key.clone(), e.breaker.snapshot_at(now)));
                }
            });
            self.buffer = items.into_iter();
        }
    }
}

impl<K: Key + ?Sized, S, C: Clock> fmt::Debug for Snapshots<'_, K, S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshots")
            .field("next_shard", &self.next_shard)
            .finish_non_exhaustive()
    }
}

impl<K: Key + ?Sized, S, C: Clock> fmt::Debug for Registry<K, S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("len", &self.len())
            .field("open", &self.open_count())
            .field("half_open", &self.half_open_count())
            .field("budget", &self.budget)
            .field("idle_ttl", &self.idle_ttl)
            .field("forget_after", &self.forget_after)
            .field("shards", &self.shards.len())
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}
