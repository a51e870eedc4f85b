//! Trips reported by other replicas ([`RemoteTrip`]), applied per key.

use core::borrow::Borrow;
use core::hash::{BuildHasher, Hash};

use super::key::{Key, Lookup};
use super::Registry;
use crate::clock::{Clock, Nanos};
use crate::observe::Transition;
use crate::remote::RemoteTrip;

impl<K: Hash + Eq + Key + ?Sized, S: BuildHasher, C: Clock> Registry<K, S, C> {
    /// Applies another replica's trip of `key` now: see
    /// [`apply_remote_at`](Self::apply_remote_at).
    pub fn apply_remote<Q>(&self, key: &Q, remote: &RemoteTrip) -> Option<Transition>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + Lookup<K> + ?Sized,
    {
        self.apply_remote_at(key, remote, self.now())
    }

    /// Applies another replica's trip of `key` at `now`
    /// ([`Breaker::apply_remote_at`](crate::Breaker::apply_remote_at)): the
    /// key's breaker — created if the registry does not track the key yet,
    /// so this replica rejects the host before its first call — opens, or its
    /// open period is extended to the later end. The registry's `max_open`
    /// applies as to a local trip.
    ///
    /// ```
    /// use failfast::{Breaker, Reason, Registry, RemoteTrip, State};
    /// use std::time::Duration;
    ///
    /// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(5)).build()?;
    /// let news = RemoteTrip::new(1, Duration::from_secs(30), Reason::FailureRate);
    /// let t = registry.apply_remote("db.example:5432", &news).unwrap();
    /// assert_eq!(t.to, State::Open);
    /// assert!(registry.handle("db.example:5432").try_acquire().is_err());
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn apply_remote_at<Q>(&self, key: &Q, remote: &RemoteTrip, now: Nanos) -> Option<Transition>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + Lookup<K> + ?Sized,
    {
        self.handle_at(key, now).apply_remote_at(remote, now)
    }
}
