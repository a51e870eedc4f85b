//! [`RegistryBuilder`]: the consuming, validating builder of a [`Registry`].

use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::time::Duration;
use std::collections::hash_map::RandomState;

use crossbeam_utils::CachePadded;
use hashbrown::HashTable;

use super::handle::TICK_SHIFT;
use super::shard::Shard;
use super::sweep::Schedule;
use super::{Override, Registry};
use crate::breaker::Shared;
use crate::builder::Builder;
use crate::clock::{Clock, QuantaClock};
use crate::error::ConfigError;
use crate::fleet::{Fleet, MaxOpen};
use crate::sync::{Arc, AtomicU64, AtomicUsize};

/// Default idle TTL: ten minutes.
const DEFAULT_IDLE_TTL: Duration = Duration::from_secs(600);
/// Longest idle TTL: a year, well inside the wrapping tick counter's range.
const MAX_IDLE_TTL: Duration = Duration::from_secs(365 * 24 * 3600);
/// Most shards.
const MAX_SHARDS: usize = 1 << 16;
/// Entries per shard the default shard count aims at: scanning one such shard
/// takes about 25 µs and its write lock is held about 15 µs (benches/README.md).
const ENTRIES_PER_SHARD: usize = 1024;
/// Shards when no capacity is set: sized for about 256k keys.
const DEFAULT_SHARDS: usize = 256;

/// Builds a [`Registry`]: one breaker [`Builder`] as the template for every
/// key, then the registry's own limits, then `build()`.
///
/// Defaults: std's keyed SipHash [`RandomState`], no capacity bound, an idle
/// TTL of 10 minutes, no open cap ([`MaxOpen::Unlimited`]), and a power-of-two
/// shard count sized for the capacity (about 1024 keys per shard, 8..=4096
/// shards), or 256 shards without a capacity.
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
pub struct RegistryBuilder<K, S = RandomState> {
    template: Builder,
    overrides: Vec<(K, Builder)>,
    hasher: S,
    capacity: Option<usize>,
    idle_ttl: Duration,
    max_open: MaxOpen,
    shards: Option<usize>,
}

impl<K> RegistryBuilder<K> {
    pub(crate) fn new(template: Builder) -> RegistryBuilder<K> {
        RegistryBuilder {
            template,
            overrides: Vec::new(),
            hasher: RandomState::new(),
            capacity: None,
            idle_ttl: DEFAULT_IDLE_TTL,
            max_open: MaxOpen::Unlimited,
            shards: None,
        }
    }
}

impl<K: Hash + Eq, S: BuildHasher> RegistryBuilder<K, S> {
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
            idle_ttl: self.idle_ttl,
            max_open: self.max_open,
            shards: self.shards,
        }
    }

    /// Give `key` its own configuration instead of the template's. Validated
    /// in `build`; looked up only when the key is inserted.
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
    pub fn override_key(mut self, key: K, breaker: Builder) -> Self {
        self.overrides.push((key, breaker));
        self
    }

    /// Track at most `max` keys (≥ 1). When full, a new key evicts an idle
    /// entry of its shard; if there is none it gets a detached breaker
    /// (see [`Registry::handle`]) and the refusal is counted.
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
    /// (> 0, at most a year) — only if it is indistinguishable from a fresh
    /// one. A full sweep pass takes about one `ttl`.
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

    /// Use `n` shards (a power of two, 1..=65536) instead of the count sized
    /// for the capacity. More shards shorten each sweep's write lock; each
    /// costs one cache-padded lock and table (128 bytes on x86-64).
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
    /// (`capacity`, `idle_ttl`, `max_open`, `shards`) or a field of the
    /// template's or an override's breaker builder.
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let err = Registry::<u64>::builder(Breaker::builder().consecutive_failures(3))
    ///     .shards(1000)
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "shards");
    /// ```
    pub fn build(self) -> Result<Registry<K, S, QuantaClock>, ConfigError> {
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
    pub fn build_with_clock<C: Clock + Clone>(
        self,
        clock: C,
    ) -> Result<Registry<K, S, C>, ConfigError> {
        if self.capacity == Some(0) {
            return Err(ConfigError::new("capacity", "≥ 1", 0));
        }
        if self.idle_ttl.is_zero() || self.idle_ttl > MAX_IDLE_TTL {
            return Err(ConfigError::new(
                "idle_ttl",
                "> 0 and at most 365 days",
                self.idle_ttl,
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
        let shards = match (self.shards, self.capacity) {
            (Some(n), _) if !n.is_power_of_two() || n > MAX_SHARDS => {
                return Err(ConfigError::new("shards", "a power of two in 1..=65536", n));
            }
            (Some(n), _) => n,
            (None, Some(cap)) => cap
                .div_ceil(ENTRIES_PER_SHARD)
                .next_power_of_two()
                .clamp(8, 4096),
            (None, None) => DEFAULT_SHARDS,
        };
        let fleet = std::sync::Arc::new(Fleet::new(self.max_open));
        let now = clock.now();
        let template = self.template.build_shared(clock.clone())?;
        let detached = Arc::new(Shared::new(template.config.clone(), clock.clone(), None));
        let shared = attach(template, &fleet);
        let mut overrides = HashTable::new();
        for (key, breaker) in self.overrides {
            let own = breaker.build_shared(clock.clone())?;
            let detached = Arc::new(Shared::new(own.config.clone(), clock.clone(), None));
            let hash = self.hasher.hash_one(&key);
            let entry = Override {
                key,
                hash,
                shared: attach(own, &fleet),
                detached,
            };
            // A key overridden twice: the last one wins.
            match overrides.find_entry(hash, |o: &Override<K, C>| o.key == entry.key) {
                Ok(mut found) => *found.get_mut() = entry,
                Err(_) => {
                    overrides.insert_unique(hash, entry, |o| o.hash);
                }
            }
        }
        let ttl_ticks = (self.idle_ttl.as_nanos() >> TICK_SHIFT) as u32;
        let interval = self.idle_ttl.as_nanos() / shards as u128;
        Ok(Registry {
            shards: (0..shards)
                .map(|_| CachePadded::new(Shard::new()))
                .collect(),
            shard_bits: shards.trailing_zeros(),
            hasher: self.hasher,
            shared,
            detached,
            overrides,
            fleet,
            capacity: self.capacity,
            idle_ttl: self.idle_ttl,
            ttl_ticks,
            slots: AtomicUsize::new(0),
            untracked: AtomicU64::new(0),
            schedule: Schedule::new(interval.min(u128::from(u64::MAX)) as u64, now),
        })
    }
}

/// Attaches the registry's fleet counters to a freshly built shared config.
fn attach<C>(shared: Arc<Shared<C>>, fleet: &std::sync::Arc<Fleet>) -> Arc<Shared<C>> {
    match Arc::try_unwrap(shared) {
        Ok(shared) => Arc::new(shared.with_gate(fleet.clone())),
        // Unreachable: `build_shared` returns a fresh `Arc` nobody else holds.
        Err(shared) => shared,
    }
}

impl<K: fmt::Debug, S> fmt::Debug for RegistryBuilder<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryBuilder")
            .field("template", &self.template)
            .field("overrides", &self.overrides)
            .field("capacity", &self.capacity)
            .field("idle_ttl", &self.idle_ttl)
            .field("max_open", &self.max_open)
            .field("shards", &self.shards)
            .finish_non_exhaustive()
    }
}
