//! Discovery sync: [`Registry::remove`], [`Registry::retain`] and
//! [`Registry::insert_with`] (see the module docs, "Discovery").

use core::borrow::Borrow;
use core::fmt;
use core::hash::{BuildHasher, Hash};

use super::handle::{Entry, EntryArc, Kind};
use super::key::{key_of, Key, Stored};
use super::{builder, Handle, HostKey, Registry};
use crate::breaker::Breaker;
use crate::builder::Builder;
use crate::clock::{Clock, Nanos};
use crate::error::ConfigError;
use crate::observe::BreakerSnapshot;

impl<K: Hash + Eq + Key + ?Sized, S: BuildHasher, C: Clock> Registry<K, S, C> {
    /// Takes `key` out of the registry; returns whether it was there. Live
    /// handles keep working on the departed breaker — it keeps its state and
    /// its whole behaviour for them, and none of its transitions reaches the
    /// registry's counters any more (see the
    /// [module docs](crate::registry#discovery-remove-retain-insert_with)); the next
    /// lookup of `key` creates a fresh one. An OPEN breaker leaves
    /// [`open_count`](Self::open_count) and the `max_open` budget at once.
    ///
    /// ```
    /// # use failfast::{Breaker, Handle, Registry, State};
    /// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(1)).build()?;
    /// let old = registry.handle("gone.example:443");
    /// old.try_acquire().unwrap().failure();
    /// assert_eq!(registry.open_count(), 1);
    /// assert!(registry.remove("gone.example:443"));
    /// assert_eq!((registry.len(), registry.open_count()), (0, 0));
    /// assert!(old.try_acquire().is_err()); // the holder's breaker is still open
    /// let fresh = registry.handle("gone.example:443");
    /// assert!(!Handle::ptr_eq(&old, &fresh));
    /// assert_eq!(fresh.state(), State::Closed);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn remove<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.remove_at(key, self.now())
    }

    /// [`remove`](Self::remove) at `now`.
    ///
    /// ```
    /// # use failfast::{Breaker, ManualClock, Nanos, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1))
    ///     .build_with_clock(ManualClock::new())?;
    /// assert!(!registry.remove_at(&7, Nanos::ZERO));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn remove_at<Q>(&self, key: &Q, now: Nanos) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = super::hash::key_hash(&self.hasher, key);
        self.shard(hash).remove(
            hash,
            |k| key_of::<K>(k).borrow() == key,
            now,
            &self.fleet,
            &self.budget,
        )
    }

    /// Pins `key` (its stored form) with its own breaker: `insert_with` for
    /// every key type.
    fn pin_at(
        &self,
        key: Stored<K>,
        breaker: Builder,
        now: Nanos,
    ) -> Result<Handle<K, C>, ConfigError>
    where
        Stored<K>: fmt::Debug,
        C: Clone,
    {
        let own = breaker
            .build_shared(self.shared.clock.clone())
            .map_err(|e| builder::for_key(&e, &key))?;
        let shared = builder::attach(own, &self.fleet, &self.shared.hooks, &self.pools)
            .map_err(|e| builder::for_key(&e, &key))?;
        let hash = super::hash::key_hash(&self.hasher, key_of::<K>(&key));
        // An upstream registered through discovery is known: the open cap
        // counts it from its first trip, success or not.
        let breaker = Breaker::from_shared(shared, super::hash::id_of(hash));
        breaker.mark_proven();
        let entry = EntryArc::new(Entry::new(breaker, Some(key), now, Kind::Pinned));
        if let Some(k) = &entry.key {
            self.shard(hash).insert_pinned(
                hash,
                |other| key_of::<K>(other) == key_of::<K>(k),
                entry.clone(),
                now,
                &self.fleet,
                &self.budget,
            );
        }
        Ok(Handle::new(entry))
    }

    /// Removes every tracked key for which `keep` returns `false`, and
    /// returns how many went; see [`remove`](Self::remove) for what happens
    /// to their handles. `keep` runs under each shard's writer lock in turn:
    /// keep it short, and do not call back into the registry from it (an
    /// insert into the same shard would wait for that lock forever).
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(1)).build()?;
    /// for host in ["a:80", "b:80", "c:80"] {
    ///     drop(registry.handle(host));
    /// }
    /// let discovered = ["a:80", "c:80"];
    /// assert_eq!(registry.retain(|key, _snapshot| discovered.contains(&key.as_str())), 1);
    /// assert_eq!(registry.len(), 2);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn retain(&self, keep: impl FnMut(&K, &BreakerSnapshot) -> bool) -> usize {
        self.retain_at(self.now(), keep)
    }

    /// [`retain`](Self::retain) at `now`.
    ///
    /// ```
    /// # use failfast::{Breaker, ManualClock, Nanos, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1))
    ///     .build_with_clock(ManualClock::new())?;
    /// drop(registry.handle(&1));
    /// assert_eq!(registry.retain_at(Nanos::ZERO, |_, _| false), 1);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn retain_at(
        &self,
        now: Nanos,
        mut keep: impl FnMut(&K, &BreakerSnapshot) -> bool,
    ) -> usize {
        let mut removed = 0;
        for shard in self.shards.iter() {
            removed += shard.retain(now, &self.fleet, &self.budget, |e| match &e.key {
                Some(k) => keep(k.borrow(), &e.breaker.snapshot_at(now)),
                None => true,
            });
        }
        removed
    }
}

/// `insert_with` for a sized key, moved into its entry.
impl<K: Hash + Eq, S: BuildHasher, C: Clock> Registry<K, S, C> {
    /// Puts `key` in with its own configuration, replacing its current entry
    /// if there is one (which departs as with [`remove`](Self::remove)), and
    /// pins it: never evicted, gone only when removed. For hosts registered
    /// through service discovery with per-host settings. It is inserted even
    /// past the capacity and the key-byte budget.
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(5)).build()?;
    /// let h = registry.insert_with("payments:443".to_string(), Breaker::builder().consecutive_failures(2))?;
    /// assert_eq!(h.config().consecutive_failures(), Some(2));
    /// let err = registry
    ///     .insert_with("bad:443".to_string(), Breaker::builder().failure_rate(2.0))
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "failure_rate");
    /// assert!(err.to_string().contains("\"bad:443\""), "{err}");
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the invalid field of `breaker`, whose
    /// [`key`](ConfigError::key) names the key.
    pub fn insert_with(&self, key: K, breaker: Builder) -> Result<Handle<K, C>, ConfigError>
    where
        K: fmt::Debug,
        C: Clone,
    {
        self.pin_at(key, breaker, self.now())
    }

    /// [`insert_with`](Self::insert_with) at `now`.
    ///
    /// # Errors
    ///
    /// As [`insert_with`](Self::insert_with).
    ///
    /// ```
    /// # use failfast::{Breaker, ManualClock, Nanos, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(5))
    ///     .build_with_clock(ManualClock::new())?;
    /// let h = registry.insert_with_at(9, Breaker::builder().consecutive_failures(1), Nanos::ZERO)?;
    /// assert!(h.is_tracked());
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn insert_with_at(
        &self,
        key: K,
        breaker: Builder,
        now: Nanos,
    ) -> Result<Handle<K, C>, ConfigError>
    where
        K: fmt::Debug,
        C: Clone,
    {
        self.pin_at(key, breaker, now)
    }
}

/// `insert_with` for a `Registry<str>`: the text is copied into the entry.
impl<S: BuildHasher, C: Clock> Registry<str, S, C> {
    /// Puts `key` in with its own configuration and pins it, as
    /// [`insert_with`](Registry::insert_with) does for a sized key.
    ///
    /// ```
    /// # use failfast::{Breaker, Handle, Registry};
    /// let registry = Registry::<str>::builder(Breaker::builder().consecutive_failures(5)).build()?;
    /// let h = registry.insert_with("payments:443", Breaker::builder().consecutive_failures(2))?;
    /// assert!(Handle::ptr_eq(&h, &registry.handle("payments:443")));
    /// assert_eq!(h.config().consecutive_failures(), Some(2));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`insert_with`](Registry::insert_with).
    pub fn insert_with(&self, key: &str, breaker: Builder) -> Result<Handle<str, C>, ConfigError>
    where
        C: Clone,
    {
        self.pin_at(HostKey::from(key), breaker, self.now())
    }

    /// [`insert_with`](Self::insert_with) at `now`.
    ///
    /// # Errors
    ///
    /// As [`insert_with`](Registry::insert_with).
    pub fn insert_with_at(
        &self,
        key: &str,
        breaker: Builder,
        now: Nanos,
    ) -> Result<Handle<str, C>, ConfigError>
    where
        C: Clone,
    {
        self.pin_at(HostKey::from(key), breaker, now)
    }
}
