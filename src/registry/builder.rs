//! [`RegistryBuilder`]: the consuming, validating builder of a [`Registry`].

use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::time::Duration;
use std::collections::hash_map::RandomState;

use crossbeam_utils::CachePadded;
use hashbrown::HashTable;

use super::budget::{Budget, KeyBudget};
use super::fleet::{Fleet, MaxOpen};
use super::handle::{Entry, EntryArc, Kind};
use super::key::{key_of, Key, KeyBytes, Stored};
use super::pools::Pools;
use super::shard::{ticks, Shard};
use super::sweep::Schedule;
use super::HostKey;
use super::{Override, Registry};
use crate::breaker::Breaker;
use crate::breaker::Shared;
use crate::builder::Builder;
use crate::clock::{Clock, QuantaClock};
use crate::error::ConfigError;
use crate::hooks::Hooks;
use crate::outlier::Outliers;
use crate::sync::{Arc, AtomicU64};

/// Default idle TTL: ten minutes.
const DEFAULT_IDLE_TTL: Duration = Duration::from_secs(600);
/// Default `forget_after`: an hour.
const DEFAULT_FORGET_AFTER: Duration = Duration::from_secs(3600);
/// Longest idle TTL: a year, well inside the wrapping tick counter's range.
const MAX_IDLE_TTL: Duration = Duration::from_secs(365 * 24 * 3600);
/// Most shards.
const MAX_SHARDS: usize = 1 << 16;
/// Entries per shard a full registry's default shard count aims at: sweeping
/// one such shard takes tens of µs. (The figure was chosen for the
/// `hashbrown` tables the shards had before their papaya maps, to keep a
/// full table below its doubling; it has not been re-tuned for papaya.)
const ENTRIES_PER_SHARD: usize = 800;
/// Shards when no capacity is set: sized for about 256k keys.
const DEFAULT_SHARDS: usize = 256;

/// Builds a [`Registry`]: one breaker [`Builder`] as the template for every
/// key, then the registry's own limits, then `build()`.
///
/// Defaults: std's keyed SipHash [`RandomState`], no capacity bound, an idle
/// TTL of 10 minutes, `forget_after` 1 hour, no key-byte budget, no open cap
/// ([`MaxOpen::Unlimited`]), and a shard count sized for the capacity (800
/// keys per shard when full, 8..=4096 shards), or 256 shards without a
/// capacity.
///
/// ```
/// use failfast::{Breaker, MaxOpen, Registry};
/// use std::time::Duration;
///
/// let registry = Registry::<String>::builder(
///         Breaker::builder().consecutive_failures(5).open_duration(Duration::from_secs(30)),
///     )
///     .override_key("payments".to_string(), Breaker::builder().consecutive_failures(2))
///     .capacity(100_000)                      // junk hosts cannot grow memory past this
///     .idle_ttl(Duration::from_secs(300))     // forget healthy, unused hosts after 5 min
///     .max_open(MaxOpen::Fraction(0.2))       // eject at most 20% of hosts at once
///     .build()?;
/// assert_eq!(registry.capacity(), Some(100_000));
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[must_use = "a builder does nothing until `build`"]
pub struct RegistryBuilder<K: Key + ?Sized, S = RandomState> {
    template: Builder,
    /// Each key (stored form) with its breaker builder and its name for errors.
    overrides: Vec<(Stored<K>, Builder, String)>,
    hasher: S,
    capacity: Option<usize>,
    max_key_bytes: KeyBudget<Stored<K>>,
    idle_ttl: Duration,
    forget_after: Duration,
    max_open: MaxOpen,
    shards: Option<usize>,
    outliers: Option<Outliers>,
}

impl<K: Key + ?Sized> RegistryBuilder<K> {
    pub(crate) fn new(template: Builder) -> RegistryBuilder<K> {
        RegistryBuilder {
            template,
            overrides: Vec::new(),
            hasher: RandomState::new(),
            capacity: None,
            max_key_bytes: None,
            idle_ttl: DEFAULT_IDLE_TTL,
            forget_after: DEFAULT_FORGET_AFTER,
            max_open: MaxOpen::Unlimited,
            outliers: None,
            shards: None,
        }
    }
}

impl<K: Hash + Eq + Key + ?Sized, S: BuildHasher> RegistryBuilder<K, S> {
    /// Hash keys with `hasher` instead of std's keyed SipHash. Keys taken from
    /// requests (a Host header) need a keyed, DoS-resistant hasher; a faster
    /// one (e.g. `foldhash::quality::RandomState`) suits trusted key sets such
    /// as configured upstream names. Never an unkeyed hash for hostile keys.
    ///
    /// ```
    /// use failfast::{Breaker, Registry};
    /// use std::hash::BuildHasherDefault;
    /// use std::collections::hash_map::DefaultHasher;
    ///
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(3))
    ///     .hasher(BuildHasherDefault::<DefaultHasher>::default())
    ///     .build()?;
    /// # let _ = registry;
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn hasher<S2: BuildHasher>(self, hasher: S2) -> RegistryBuilder<K, S2> {
        RegistryBuilder {
            template: self.template,
            overrides: self.overrides,
            hasher,
            capacity: self.capacity,
            max_key_bytes: self.max_key_bytes,
            idle_ttl: self.idle_ttl,
            forget_after: self.forget_after,
            max_open: self.max_open,
            shards: self.shards,
            outliers: self.outliers,
        }
    }

    /// Records an override of `key` (its stored form).
    fn push_override(mut self, key: Stored<K>, breaker: Builder) -> Self
    where
        Stored<K>: fmt::Debug,
    {
        let name = format!("{key:?}");
        self.overrides.push((key, breaker, name));
        self
    }

    /// Track at most `max` keys (≥ 1). When full, a new key evicts the least
    /// recently used evictable entry of its shard; if there is none it shares
    /// its shard's overflow breaker (see [`Registry::handle`]) and the
    /// refusal is counted.
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(3))
    ///     .capacity(10_000)
    ///     .build()?;
    /// assert_eq!(registry.capacity(), Some(10_000));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn capacity(mut self, max: usize) -> Self {
        self.capacity = Some(max);
        self
    }

    /// Evict a breaker that nobody looked up or held for longer than `ttl`
    /// (> 0, at most a year) — if it carries no information worth keeping
    /// (see the [module docs](super#eviction-by-information-not-by-state)).
    /// A full sweep pass takes about one `ttl`.
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// # use std::time::Duration;
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(3))
    ///     .idle_ttl(Duration::from_secs(120))
    ///     .build()?;
    /// assert_eq!(registry.idle_ttl(), Duration::from_secs(120));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn idle_ttl(mut self, ttl: Duration) -> Self {
        self.idle_ttl = ttl;
        self
    }

    /// Forget a CLOSED breaker's window once nobody used the key for
    /// `after` (> 0, at most a year; default 1 h; effectively at least the
    /// idle TTL): failures that old say nothing about the host now, so an
    /// entry holding only them is evicted like a pristine one.
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// # use std::time::Duration;
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(3))
    ///     .forget_after(Duration::from_secs(24 * 3600))
    ///     .build()?;
    /// assert_eq!(registry.forget_after(), Duration::from_secs(24 * 3600));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn forget_after(mut self, after: Duration) -> Self {
        self.forget_after = after;
        self
    }

    /// Hold at most `max` bytes (≥ 1) of key text in tracked entries
    /// ([`KeyBytes`]). Like the capacity: when a new key does not fit, the
    /// least recently used evictable entries of its shard make room, and if
    /// none can, the key shares its shard's overflow breaker.
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(3))
    ///     .capacity(100_000)
    ///     .max_key_bytes(100_000 * 64)
    ///     .build()?;
    /// assert_eq!(registry.max_key_bytes(), Some(6_400_000));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn max_key_bytes(mut self, max: usize) -> Self
    where
        Stored<K>: KeyBytes,
    {
        self.max_key_bytes = Some((max, <Stored<K> as KeyBytes>::key_bytes));
        self
    }

    /// Cap how many breakers may be OPEN or HALF_OPEN at once (Envoy's max
    /// ejection percent): `Count(n ≥ 1)` or `Fraction(f in (0, 1])` of the
    /// tracked breakers. A trip over the cap is refused — that breaker stays
    /// CLOSED — and counted in [`Registry::refused_trips`].
    ///
    /// ```
    /// # use failfast::{Breaker, MaxOpen, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1))
    ///     .max_open(MaxOpen::Count(1))
    ///     .build()?;
    /// # let _ = registry;
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn max_open(mut self, max_open: MaxOpen) -> Self {
        self.max_open = max_open;
        self
    }

    /// Compare each host with the other hosts of its pool, and eject the
    /// outliers ([`Outliers`]; Envoy's outlier detection with no timer).
    /// Every key is in the `"default"` pool unless its configuration names
    /// another ([`Builder::outlier_pool`]). Pools apply to a registry's keys
    /// only: a balancer's standalone breakers (`EjectLayer`) are in none.
    ///
    /// A pooled breaker takes the general verdict path and reads the clock
    /// at each verdict, and adds each call to its tally (one
    /// read-modify-write on its own cache line); with pools off nothing is
    /// added (see `benches/README.md`).
    ///
    /// ```
    /// use failfast::{Breaker, Outliers, Registry};
    ///
    /// let registry = Registry::<str>::builder(Breaker::builder().consecutive_failures(5))
    ///     .outliers(Outliers::new())
    ///     .build()?;
    /// registry.handle("10.0.0.1:80");
    /// assert_eq!(registry.outlier_pools()[0].members, 1);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn outliers(mut self, outliers: Outliers) -> Self {
        self.outliers = Some(outliers);
        self
    }

    /// Use `n` shards (a power of two, 1..=65536) instead of the count sized
    /// for the capacity. More shards shorten each sweep's hold of its
    /// shard's writer lock (no lookup waits for it); each costs one
    /// cache-padded writer lock, books and map.
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(3))
    ///     .shards(1024)
    ///     .build()?;
    /// assert_eq!(registry.shard_count(), 1024);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn shards(mut self, n: usize) -> Self {
        self.shards = Some(n);
        self
    }

    /// Validates and builds a registry on the default [`QuantaClock`].
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first invalid field: a registry field
    /// (`capacity`, `max_key_bytes`, `idle_ttl`, `forget_after`, `max_open`,
    /// `shards`) or a field of the template's or an override's breaker
    /// builder (then [`key`](ConfigError::key) names the key).
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let err = Registry::<u64>::builder(Breaker::builder().consecutive_failures(3))
    ///     .shards(1000)
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "shards");
    /// ```
    pub fn build(self) -> Result<Registry<K, S, QuantaClock>, ConfigError>
    where
        Stored<K>: Send + Sync + 'static,
    {
        self.build_with_clock(QuantaClock::new())
    }

    /// Validates and builds a registry whose breakers all read `clock`.
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build).
    ///
    /// ```
    /// # use failfast::{Breaker, ManualClock, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(3))
    ///     .build_with_clock(ManualClock::new())?;
    /// # let _ = registry;
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    /// Keys are shared between threads (a lookup on one, its entry's
    /// reclamation on another): `K`'s stored form is `Send + Sync`.
    pub fn build_with_clock<C: Clock + Clone>(
        self,
        clock: C,
    ) -> Result<Registry<K, S, C>, ConfigError>
    where
        Stored<K>: Send + Sync + 'static,
    {
        let shards = self.check_limits()?;
        let pools = Pools::new(self.outliers)?;
        let fleet = std::sync::Arc::new(Fleet::new(self.max_open));
        let now = clock.now();
        let template = self.template.build_shared(clock.clone())?;
        // One list of transition hooks for every breaker of the registry.
        let hooks = std::sync::Arc::new(Hooks::new());
        // Shared breakers (overflow, unkeyed): the template's config and
        // observer, outside the fleet — they are no key's breaker.
        let detached = Shared::new(
            template.config.clone(),
            clock.clone(),
            template.observer.clone(),
        );
        let detached = Arc::new(detached.with_hooks(hooks.clone()));
        let shared = attach(template, &fleet, &hooks, &pools)?;
        let mut overrides = HashTable::new();
        for (key, breaker, name) in self.overrides {
            let own = breaker
                .build_shared(clock.clone())
                .map_err(|e| for_key(&e, &Raw(&name)))?;
            let hash = super::hash::key_hash(&self.hasher, key_of::<K>(&key));
            let shared =
                attach(own, &fleet, &hooks, &pools).map_err(|e| for_key(&e, &Raw(&name)))?;
            let entry = Override { key, hash, shared };
            // A key overridden twice: the last one wins.
            let same = |o: &Override<Stored<K>, C>| key_of::<K>(&o.key) == key_of::<K>(&entry.key);
            match overrides.find_entry(hash, same) {
                Ok(mut found) => *found.get_mut() = entry,
                Err(_) => {
                    overrides.insert_unique(hash, entry, |o| o.hash);
                }
            }
        }
        let shared_entry = |seed: u64| {
            let breaker = Breaker::from_shared(detached.clone(), super::hash::id_of(seed));
            EntryArc::new(Entry::new(breaker, None, now, Kind::Shared))
        };
        let ttl_ticks = ticks(self.idle_ttl);
        let forget_ticks = ticks(self.forget_after).max(ttl_ticks);
        let interval = self.idle_ttl.as_nanos() / shards as u128;
        // One reclamation domain for the registry's maps: a lookup's guard
        // and the retired slots of every shard are counted together.
        let collector = std::sync::Arc::new(seize::Collector::new());
        Ok(Registry {
            shards: (0..shards)
                .map(|i| {
                    // A distinct jitter seed per overflow breaker.
                    let seed = super::hash::key_hash(&self.hasher, &("overflow", i));
                    CachePadded::new(Shard::new(shared_entry(seed), &collector))
                })
                .collect(),
            unkeyed: shared_entry(super::hash::key_hash(&self.hasher, "unkeyed")),
            hasher: self.hasher,
            shared,
            overrides,
            fleet,
            pools,
            budget: Budget::new(self.capacity, self.max_key_bytes),
            idle_ttl: self.idle_ttl,
            forget_after: self.forget_after,
            ttl_ticks,
            forget_ticks,
            untracked: AtomicU64::new(0),
            keyless: AtomicU64::new(0),
            schedule: Schedule::new(interval.min(u128::from(u64::MAX)) as u64, now),
        })
    }

    /// Checks the registry's own limits (not the breakers'), and returns
    /// the shard count they give.
    pub(crate) fn check_limits(&self) -> Result<usize, ConfigError> {
        if self.capacity == Some(0) {
            return Err(ConfigError::new("capacity", "≥ 1", 0));
        }
        if let Some((0, _)) = self.max_key_bytes {
            return Err(ConfigError::new("max_key_bytes", "≥ 1", 0));
        }
        if self.idle_ttl.is_zero() || self.idle_ttl > MAX_IDLE_TTL {
            return Err(ConfigError::new(
                "idle_ttl",
                "> 0 and at most 365 days",
                self.idle_ttl,
            ));
        }
        if self.forget_after.is_zero() || self.forget_after > MAX_IDLE_TTL {
            return Err(ConfigError::new(
                "forget_after",
                "> 0 and at most 365 days",
                self.forget_after,
            ));
        }
        match self.max_open {
            MaxOpen::Count(0) => {
                return Err(ConfigError::new("max_open", "Count(n ≥ 1)", self.max_open))
            }
            MaxOpen::Fraction(f) if !(f > 0.0 && f <= 1.0) => {
                return Err(ConfigError::new(
                    "max_open",
                    "Fraction(f) with f in (0, 1]",
                    self.max_open,
                ))
            }
            _ => {}
        }
        match (self.shards, self.capacity) {
            (Some(n), _) if !n.is_power_of_two() || n > MAX_SHARDS => {
                Err(ConfigError::new("shards", "a power of two in 1..=65536", n))
            }
            (Some(n), _) => Ok(n),
            (None, Some(cap)) => Ok(cap.div_ceil(ENTRIES_PER_SHARD).clamp(8, 4096)),
            (None, None) => Ok(DEFAULT_SHARDS),
        }
    }
}

/// Attaches the registry's fleet counters, hooks and outlier pool to a
/// freshly built shared config.
pub(crate) fn attach<C: Clock>(
    shared: Arc<Shared<C>>,
    fleet: &std::sync::Arc<Fleet>,
    hooks: &std::sync::Arc<Hooks<Breaker<C>>>,
    pools: &Pools,
) -> Result<Arc<Shared<C>>, ConfigError> {
    match Arc::try_unwrap(shared) {
        Ok(shared) => {
            let shared = shared.with_gate(fleet.clone()).with_hooks(hooks.clone());
            Ok(Arc::new(pools.attach(shared)?))
        }
        // Unreachable: `build_shared` returns a fresh `Arc` nobody else holds.
        Err(shared) => Ok(shared),
    }
}

/// `error`, naming the key whose override held it.
pub(crate) fn for_key(error: &ConfigError, key: &dyn fmt::Debug) -> ConfigError {
    error.clone().with_key(key)
}

/// Text that `Debug` writes as it is (a `ConfigError` formats its value with
/// `Debug`).
struct Raw<'a>(&'a str);

impl fmt::Debug for Raw<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// Overrides of a sized key, moved into the builder.
impl<K: Hash + Eq, S: BuildHasher> RegistryBuilder<K, S> {
    /// Give `key` its own configuration instead of the template's. Validated
    /// in `build` (an error names the key); looked up only when the key is
    /// inserted, so it is kept across evictions. For keys added at run time
    /// (service discovery), see [`Registry::insert_with`].
    ///
    /// ```
    /// use failfast::{Breaker, Registry};
    ///
    /// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(5))
    ///     .override_key("flaky".to_string(), Breaker::builder().consecutive_failures(1))
    ///     .build()?;
    /// assert_eq!(registry.handle("flaky").config().consecutive_failures(), Some(1));
    /// assert_eq!(registry.handle("other").config().consecutive_failures(), Some(5));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn override_key(self, key: K, breaker: Builder) -> Self
    where
        K: fmt::Debug,
    {
        self.push_override(key, breaker)
    }
}

/// Overrides of a `Registry<str>`'s keys.
impl<S: BuildHasher> RegistryBuilder<str, S> {
    /// Give `key` its own configuration, as
    /// [`override_key`](RegistryBuilder::override_key) does for a sized key.
    ///
    /// ```
    /// use failfast::{Breaker, Registry};
    ///
    /// let registry = Registry::<str>::builder(Breaker::builder().consecutive_failures(5))
    ///     .override_key("flaky", Breaker::builder().consecutive_failures(1))
    ///     .build()?;
    /// assert_eq!(registry.handle("flaky").config().consecutive_failures(), Some(1));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn override_key(self, key: &str, breaker: Builder) -> Self {
        self.push_override(HostKey::from(key), breaker)
    }
}

impl<K: Key + ?Sized, S> fmt::Debug for RegistryBuilder<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryBuilder")
            .field("template", &self.template)
            .field("overrides", &self.overrides.len())
            .field("capacity", &self.capacity)
            .field("max_key_bytes", &self.max_key_bytes.map(|(max, _)| max))
            .field("idle_ttl", &self.idle_ttl)
            .field("forget_after", &self.forget_after)
            .field("max_open", &self.max_open)
            .field("shards", &self.shards)
            .finish_non_exhaustive()
    }
}
