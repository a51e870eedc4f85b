//! [`Registry`]: one breaker per key (upstream host, route, tenant), created
//! on first use, for up to millions of keys, with no thread and no timer.
//!
//! # Handles first
//!
//! [`Registry::handle`] returns a [`Handle`]: an `Arc` of the key's entry
//! that derefs to its [`Breaker`]. A caller keeps it per upstream, route or
//! pooled connection, and each request then touches only that breaker's
//! atomics — no hashing, no lock, no map. [`Registry::with`] is the fallback
//! for callers with nowhere to keep a handle: a borrowed lookup under the
//! shard's read lock that neither clones nor allocates.
//!
//! # Sharding
//!
//! The key is hashed **once** (std's keyed SipHash by default, any
//! `BuildHasher` pluggable); the hash picks the shard (bits 57−b..57, below
//! the 7 tag bits hashbrown uses), probes the shard's `hashbrown::HashTable`,
//! and is stored as the breaker's id — so rehashing on growth reads it back
//! instead of hashing the key again, and jitter differs per host. Each shard is
//! its own `RwLock` in a `CachePadded` slot: a lookup takes one shard's read
//! lock and never waits on another shard. Buckets hold one pointer
//! (`Arc<Entry>`: key, breaker and idle stamp in one allocation). A miss takes
//! the write lock, looks again (a racing insert may have won) and inserts, so
//! there is exactly one breaker per key; the key is cloned only then.
//!
//! # Eviction
//!
//! Nothing runs in the background. One shard at a time is swept, piggybacked
//! on inserts (only the caller that wins a CAS on the last-sweep stamp sweeps,
//! about one shard every `idle_ttl / shards`) or explicitly through
//! [`Registry::maintain`] and [`Registry::sweep`]. An entry is evicted only if
//! it is **indistinguishable from a fresh breaker** — so forgetting it loses
//! nothing:
//!
//! * CLOSED, with no failure run and no failure or slow call in its window
//!   ([`Breaker::is_pristine_at`]) — an OPEN or HALF_OPEN breaker is never
//!   evicted: a host that is down is not forgotten and hammered again;
//! * idle longer than the TTL: no lookup through the map and no handle
//!   released for that long (a coarse tick of ≈ 16.8 ms stamped by lookups,
//!   at most one store per tick, and never by the request path of a held
//!   handle);
//! * no live handle: `Arc::strong_count == 1`, checked under the shard's write
//!   lock. Handles are cloned out of the table only under that shard's lock,
//!   so the count cannot grow while the sweeper holds it, and holders never
//!   see their breaker split from the map's.
//!
//! A sweep scans its shard under the *read* lock, noting candidates (hash and
//! address); only if there are any does it take the write lock, find each
//! again by hash, re-check the whole rule and remove it. Victims are freed
//! after the lock is released. Readers of the shard therefore wait for a few
//! cached probes per victim (≈ 14 µs for a 1k-entry shard on the development
//! machine), not for the scan or the allocator, and a sweep that evicts
//! nothing blocks no one.
//!
//! # Capacity
//!
//! With [`capacity`](RegistryBuilder::capacity) set, an insert reserves a slot
//! (one CAS on a counter, under the shard's write lock); when none is left it
//! evicts one stale entry of its own shard. If there is none either, the key is
//! **not tracked**: the caller still gets a decision — a *detached* handle, a
//! fresh breaker of the same configuration that the registry does not keep
//! (it fails open, as a new host would) — and the refusal is counted in
//! [`Registry::untracked`]. A flood of junk hosts therefore cannot grow memory
//! past the bound, and cannot push out a breaker that holds state. A shard that
//! found nothing to evict is not scanned again within the same tick.
//!
//! # Fleet-wide open cap
//!
//! All breakers of a registry share one set of counters (`fleet`): breakers
//! per state, and how many are ejected (OPEN or HALF_OPEN). With
//! [`max_open`](RegistryBuilder::max_open), a trip first reserves an ejection
//! slot; over the cap the trip is refused, the breaker stays CLOSED, and the
//! refusal is counted ([`Registry::refused_trips`]). The counters change only
//! on transitions, inserts and evictions — never per call — which is also why
//! [`len`](Registry::len), [`open_count`](Registry::open_count) and
//! [`half_open_count`](Registry::half_open_count) are O(1).
//!
//! # Concurrency argument
//!
//! * **One breaker per key:** inserts happen only under the shard's write lock
//!   after a second lookup under that same lock, so two racing misses
//!   serialise and the second finds the first's entry.
//! * **No eviction under a user:** eviction happens under the write lock and
//!   requires a reference count of 1; every other user either holds a handle
//!   (count ≥ 2) or runs inside [`with`](Registry::with) under the read lock.
//!   A candidate noted under the read lock is only a hint: under the write
//!   lock the entry found at that hash and address (even a new one that
//!   reused the address) must meet the whole rule again.
//! * **Counters are statistics:** the fleet counters, the capacity counter,
//!   the idle stamps and the sweep schedule are `Relaxed`; the shard locks
//!   order everything structural. The capacity counter is exact because it is
//!   reserved before and released after the table change it accounts for.
//!
//! ```
//! use failfast::{Breaker, ManualClock, Nanos, Registry, State};
//! use std::time::Duration;
//!
//! let clock = ManualClock::new();
//! let registry = Registry::<String>::builder(
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

mod builder;
mod handle;
mod key;
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
pub use self::handle::Handle;

use self::handle::Entry;
use self::key::{Borrowed, KeyArg, Owned};
use self::shard::{Evict, Shard};
use self::sweep::Schedule;
use crate::breaker::{Breaker, Shared};
use crate::builder::Builder;
use crate::clock::{Clock, Nanos, QuantaClock};
use crate::fleet::Fleet;
use crate::observe::BreakerSnapshot;
use crate::state::State;
use crate::sync::{Arc, AtomicU64, AtomicUsize, Ordering};

/// A key with its own configuration.
struct Override<K, C> {
    key: K,
    hash: u64,
    shared: Arc<Shared<C>>,
    detached: Arc<Shared<C>>,
}

/// One circuit breaker per key, created on first use; see the
/// [module docs](self) for the design.
///
/// ```
/// use failfast::{Breaker, Registry};
///
/// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(5))
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
pub struct Registry<K, S = RandomState, C: Clock = QuantaClock> {
    shards: Box<[CachePadded<Shard<K, C>>]>,
    shard_bits: u32,
    hasher: S,
    shared: Arc<Shared<C>>,
    /// The template's config without fleet or observer, for detached breakers.
    detached: Arc<Shared<C>>,
    overrides: HashTable<Override<K, C>>,
    /// Also every breaker's trip gate (a std `Arc`: the gate is a trait
    /// object, which loom's `Arc` cannot hold; its counters are loom's).
    fleet: std::sync::Arc<Fleet>,
    capacity: Option<usize>,
    idle_ttl: Duration,
    ttl_ticks: u32,
    /// Capacity slots taken (only counted with a capacity).
    slots: AtomicUsize,
    /// Keys refused because the registry was full.
    untracked: AtomicU64,
    schedule: Schedule,
}

impl<K: Hash + Eq> Registry<K> {
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

impl<K: Hash + Eq, S: BuildHasher, C: Clock> Registry<K, S, C> {
    /// The handle of `key`'s breaker, creating it on first use (the key is
    /// cloned only then). Call it once per upstream and keep the handle.
    ///
    /// Never fails: if the registry is full and nothing can be evicted, the
    /// handle is detached (see [`Handle::is_tracked`]).
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
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
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
    /// assert_eq!(*h.key(), 42);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn handle_at<Q>(&self, key: &Q, now: Nanos) -> Handle<K, C>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
        self.entry(hash, Borrowed(key), now)
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
        let hash = self.hasher.hash_one(&key);
        self.entry(hash, Owned(key), now)
    }

    /// Runs `f` on `key`'s breaker without cloning a handle or allocating
    /// (for an existing key), creating the breaker on first use.
    ///
    /// `f` runs under the shard's read lock: keep it short (take a permit
    /// *decision*, read the state), and do not call back into the registry from
    /// it. A call that must outlive `f` needs a [`Handle`].
    ///
    /// ```
    /// # use failfast::{Breaker, Registry, State};
    /// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(5)).build()?;
    /// let admitted = registry.with("search:9200", |breaker| breaker.try_acquire().is_ok());
    /// assert!(admitted);
    /// assert_eq!(registry.with("search:9200", |b| b.state()), State::Closed);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn with<Q, R>(&self, key: &Q, f: impl FnOnce(&Breaker<C>) -> R) -> R
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
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
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let hash = self.hasher.hash_one(key);
        let key = Borrowed(key);
        match self.shard(hash).find(hash, &key, |e| {
            e.touch(now);
            f(&e.breaker)
        }) {
            Ok(r) => r,
            // A miss: straight to the insert, which looks again under the
            // shard's write lock (no second read-locked probe first).
            Err(f) => f(self.insert(self.shard(hash), hash, key, now).entry()),
        }
    }

    fn entry(&self, hash: u64, key: impl KeyArg<K>, now: Nanos) -> Handle<K, C> {
        let shard = self.shard(hash);
        match shard.find(hash, &key, |e| {
            e.touch(now);
            e.clone()
        }) {
            Ok(e) => Handle::new(e),
            Err(_) => self.insert(shard, hash, key, now),
        }
    }

    /// The miss path (allocates): insert under the shard's write lock, or hand
    /// out a detached breaker when full; then one piggybacked sweep step.
    #[cold]
    fn insert(
        &self,
        shard: &Shard<K, C>,
        hash: u64,
        key: impl KeyArg<K>,
        now: Nanos,
    ) -> Handle<K, C> {
        let over = self.overrides.find(hash, |o| key.matches(&o.key));
        let shared = over.map_or(&self.shared, |o| &o.shared);
        let result = shard.insert(
            hash,
            key,
            self.rule(now),
            &self.fleet,
            || self.reserve_slot(),
            |k| {
                let breaker = Breaker::from_shared(shared.clone(), hash);
                Arc::new(Entry::new(breaker, k, now, true))
            },
        );
        let entry = result.unwrap_or_else(|key| {
            // Relaxed: a statistic.
            self.untracked.fetch_add(1, Ordering::Relaxed);
            let shared = over.map_or(&self.detached, |o| &o.detached);
            let breaker = Breaker::from_shared(shared.clone(), hash);
            Arc::new(Entry::new(breaker, key.into_key(), now, false))
        });
        self.maintain_up_to(now, 1);
        Handle::new(entry)
    }

    /// Takes a capacity slot if one is left (always, without a capacity).
    fn reserve_slot(&self) -> bool {
        let Some(cap) = self.capacity else {
            return true;
        };
        // Relaxed: a budget, like the fleet's; the shard lock orders the insert
        // it pays for, and a release happens only after the matching eviction.
        self.slots
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < cap).then_some(n + 1)
            })
            .is_ok()
    }
}

impl<K, S, C: Clock> Registry<K, S, C> {
    #[inline]
    fn shard(&self, hash: u64) -> &Shard<K, C> {
        // Bits 57-b..57: below hashbrown's 7-bit tag, above the bits it uses
        // for bucket positions (a shard's table stays far below 2^41 buckets).
        let index = (hash >> (57 - self.shard_bits)) as usize & (self.shards.len() - 1);
        &self.shards[index]
    }

    fn now(&self) -> Nanos {
        self.shared.clock.now()
    }

    fn release_slots(&self, n: usize) {
        if self.capacity.is_some() && n > 0 {
            // Relaxed: see `reserve_slot`.
            self.slots.fetch_sub(n, Ordering::Relaxed);
        }
    }

    fn rule(&self, now: Nanos) -> Evict {
        Evict {
            now,
            ttl_ticks: self.ttl_ticks,
        }
    }

    fn sweep_shards(&self, count: usize, now: Nanos) -> usize {
        let rule = self.rule(now);
        let mut evicted = 0;
        for _ in 0..count.min(self.shards.len()) {
            let shard = &self.shards[self.schedule.next_shard(self.shards.len())];
            let n = shard.sweep(rule, &self.fleet);
            self.release_slots(n);
            evicted += n;
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
    /// entries were evicted. Each shard is locked on its own, for the time of
    /// one shard's scan.
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

    /// Trips refused by the open cap since the registry was built.
    ///
    /// ```
    /// # use failfast::{Breaker, MaxOpen, Registry, State};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1))
    ///     .max_open(MaxOpen::Count(1))
    ///     .build()?;
    /// registry.handle(&1).try_acquire().unwrap().failure(); // opens
    /// let second = registry.handle(&2);
    /// second.try_acquire().unwrap().failure();               // refused: stays closed
    /// assert_eq!(second.state(), State::Closed);
    /// assert_eq!(registry.refused_trips(), 1);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn refused_trips(&self) -> u64 {
        self.fleet.refused_trips()
    }

    /// New keys refused because the registry was full (each got a detached
    /// breaker).
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
        self.capacity
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

    /// The number of shards.
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1))
    ///     .capacity(1_000_000)
    ///     .build()?;
    /// assert_eq!(registry.shard_count(), 1024);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Calls `f` with every tracked key and a snapshot of its breaker, one
    /// shard at a time (each under its read lock, which is all a scrape
    /// costs the request path). Nothing is cloned; do not call back into the
    /// registry from `f`.
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
            shard.for_each(|e| f(&e.key, &e.breaker.snapshot_at(now)));
        }
    }

    /// An iterator of `(key, snapshot)` that copies one shard at a time, so no
    /// lock is held between calls to `next`.
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
        K: Clone,
    {
        Snapshots {
            registry: self,
            next_shard: 0,
            buffer: Vec::new().into_iter(),
        }
    }
}

/// The iterator of [`Registry::snapshots`].
pub struct Snapshots<'a, K, S, C: Clock> {
    registry: &'a Registry<K, S, C>,
    next_shard: usize,
    buffer: std::vec::IntoIter<(K, BreakerSnapshot)>,
}

impl<K: Clone, S, C: Clock> Iterator for Snapshots<'_, K, S, C> {
    type Item = (K, BreakerSnapshot);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(item) = self.buffer.next() {
                return Some(item);
            }
            let shard = self.registry.shards.get(self.next_shard)?;
            self.next_shard += 1;
            let now = self.registry.now();
            let mut items = Vec::new();
            shard.for_each(|e| items.push((e.key.clone(), e.breaker.snapshot_at(now))));
            self.buffer = items.into_iter();
        }
    }
}

impl<K, S, C: Clock> fmt::Debug for Snapshots<'_, K, S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshots")
            .field("next_shard", &self.next_shard)
            .finish_non_exhaustive()
    }
}

impl<K, S, C: Clock> fmt::Debug for Registry<K, S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("len", &self.len())
            .field("open", &self.open_count())
            .field("half_open", &self.half_open_count())
            .field("capacity", &self.capacity)
            .field("idle_ttl", &self.idle_ttl)
            .field("shards", &self.shards.len())
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}
