//! [`Replica`]: one registry's side of trip sharing — its trips on their way
//! out, and the merge of news coming in — with no I/O of its own.

use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::time::Duration;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::sync::Arc;

use super::news::{check_origin, LocalTrip, News};
use super::outbox::Outbox;
use super::spread::{self, Spread, DEFAULT_PROBE_SPREAD, DEFAULT_PROBE_SPREAD_CAP};
use super::stats::{Count, SyncStats};
use super::store::Store;
use crate::clock::{Clock, Nanos, QuantaClock};
use crate::error::ConfigError;
use crate::observe::{Reason, Transition};
use crate::registry::Registry;
use crate::remote::RemoteTrip;

/// The most local trips a replica keeps to publish (and to publish again
/// after its store lost them); more are dropped and counted.
pub const MAX_OWN_TRIPS: usize = 1 << 16;

/// The last news applied for a key.
#[derive(Copy, Clone, Debug)]
struct Seen {
    epoch: u64,
    /// When the entry may be forgotten: the period's end plus the slack.
    forget_at: Nanos,
}

/// The wait before a trip the store refused is handed again; it doubles
/// per refusal up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(100);
/// The longest wait before a refused trip is handed again.
const RETRY_MAX: Duration = Duration::from_secs(5);

/// One of this replica's own trips, still open.
#[derive(Copy, Clone, Debug)]
struct Own {
    until: Nanos,
    reason: Reason,
    /// Whether the store has it.
    published: bool,
    /// Not handed to the store before this (after a refusal).
    retry_at: Nanos,
    /// The wait after the next refusal.
    backoff: Duration,
}

impl Own {
    fn new(until: Nanos, reason: Reason) -> Own {
        Own {
            until,
            reason,
            published: false,
            retry_at: Nanos::ZERO,
            backoff: RETRY_FIRST,
        }
    }
}

/// One registry's side of trip sharing, driven by a sync task (or, with a
/// [`Store`] called directly, by a simulation): no I/O, no thread, no clock
/// of its own — it reads the registry's.
///
/// * **Out:** it drains the [`Outbox`] the request path fills and hands each
///   local trip to the store with what is left of its open period, keeping
///   it (until the period ends) to hand it again if the store was
///   unreachable or lost it. A trip the store refuses does not hold the
///   others back: it goes after them next time (the sync task makes it
///   wait on its own, 100 ms doubling to 5 s).
/// * **In:** it merges the store's [`News`] into the registry with
///   [`Registry::apply_remote_at`]-style monotone merges (a breaker is
///   opened or its period extended, never closed or shortened), after three
///   filters: an epoch not newer than the last one applied for the key
///   (duplicates, reordering, stale news) changes nothing; news reported by
///   fewer than `min_reporters` replicas changes nothing; news of a trip this
///   replica made itself, still open, changes nothing unless another
///   replica reported a later end.
/// * **Spread:** it ends a remote period a little before the news says —
///   its own [`probe_offset`](Replica::probe_offset), drawn from its name,
///   the key and the epoch, at most a fraction of what is left up to a cap
///   ([`ReplicaBuilder::probe_spread`]) — so replicas that heard the same
///   trip probe at different instants even with the breakers' jitter at 0.
///
/// See [`MemoryStore`](super::MemoryStore) for a runnable example.
pub struct Replica<K, S = RandomState, C: Clock = QuantaClock> {
    registry: Arc<Registry<K, S, C>>,
    outbox: Arc<Outbox>,
    origin: String,
    min_reporters: u32,
    window: Duration,
    slack: Duration,
    spread: Spread,
    applied: HashMap<String, Seen>,
    own: HashMap<String, Own>,
    stats: Arc<SyncStats>,
}

/// Builds a [`Replica`]: see [`Replica::builder`].
#[must_use]
pub struct ReplicaBuilder<K, S = RandomState, C: Clock = QuantaClock> {
    registry: Arc<Registry<K, S, C>>,
    outbox: Arc<Outbox>,
    origin: Option<String>,
    min_reporters: u32,
    window: Duration,
    slack: Duration,
    spread: (f64, Duration),
}

/// The default `min_reporters` window.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(60);
/// The default slack: how long the store keeps a record past its period.
pub const DEFAULT_SLACK: Duration = Duration::from_secs(5);

impl<K, S, C: Clock> Replica<K, S, C> {
    /// A builder for the replica sharing `registry`'s trips, which the
    /// request path reports into `outbox`.
    ///
    /// Defaults: a random origin name, `min_reporters(1, 60 s)` (any one
    /// replica's trip is applied everywhere), a slack of 5 s,
    /// `probe_spread(0.1, 5 s)`.
    pub fn builder(
        registry: Arc<Registry<K, S, C>>,
        outbox: Arc<Outbox>,
    ) -> ReplicaBuilder<K, S, C> {
        ReplicaBuilder {
            registry,
            outbox,
            origin: None,
            min_reporters: 1,
            window: DEFAULT_WINDOW,
            slack: DEFAULT_SLACK,
            spread: (DEFAULT_PROBE_SPREAD, DEFAULT_PROBE_SPREAD_CAP),
        }
    }
}

impl<K, S, C: Clock> ReplicaBuilder<K, S, C> {
    /// Names this replica in the store (default: random, unique per
    /// process). 1 to 64 printable ASCII bytes, no `|`. Give each running
    /// replica its own name: news from its own name is taken for its own.
    pub fn origin(mut self, name: impl Into<String>) -> Self {
        self.origin = Some(name.into());
        self
    }

    /// Applies a remote trip only once `k` distinct replicas reported the
    /// key within `window` (default 1, 60 s): with `k = 2` one replica cut
    /// off from an upstream by its own network cannot eject the upstream
    /// everywhere. `k` in 1..=1000, `window` in 1 ms..=1 day.
    pub fn min_reporters(mut self, k: u32, window: Duration) -> Self {
        self.min_reporters = k;
        self.window = window;
        self
    }

    /// How long the store keeps a key's record past its period (default
    /// 5 s, at most 1 hour): it carries the key's epochs across a trip that
    /// follows soon after, and bounds how long this replica remembers the
    /// last epoch it applied.
    pub fn slack(mut self, slack: Duration) -> Self {
        self.slack = slack;
        self
    }

    /// How far apart replicas that apply the same news end its open period
    /// (default `0.1`, 5 s): this replica ends it earlier than the news
    /// says by its own offset, in `[0, min(remaining × fraction, cap))`,
    /// drawn from a hash of its [`origin`](Self::origin), the key and the
    /// news' epoch ([`Replica::probe_offset`]). Deterministic, no state;
    /// distinct names draw distinct offsets, so the fleet's probes spread
    /// over the range (two of N replicas still share a 16.8 ms unit of the
    /// breaker's period now and then, as in a birthday draw). It never
    /// extends a period, and the breakers' own
    /// [`jitter`](crate::Builder::jitter), if any, shortens it further.
    /// `fraction` in `0.0..=0.5`, `cap` at most 1 hour; `(0.0, _)` or
    /// `(_, 0)` turns the spread off.
    ///
    /// ```
    /// use failfast::share::{Outbox, Replica};
    /// use failfast::{Breaker, Registry};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let registry = Arc::new(Registry::<String>::builder(Breaker::builder().consecutive_failures(5)).build()?);
    /// let replica = Replica::builder(registry.clone(), Arc::new(Outbox::new(64)))
    ///     .probe_spread(0.2, Duration::from_secs(2))
    ///     .build()?;
    /// assert_eq!(replica.probe_spread(), (0.2, Duration::from_secs(2)));
    /// let too_wide = Replica::builder(registry, Arc::new(Outbox::new(64)))
    ///     .probe_spread(0.9, Duration::from_secs(2))
    ///     .build();
    /// assert_eq!(too_wide.unwrap_err().field(), "probe_spread fraction");
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn probe_spread(mut self, fraction: f64, cap: Duration) -> Self {
        self.spread = (fraction, cap);
        self
    }

    /// The replica.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the field out of range.
    pub fn build(self) -> Result<Replica<K, S, C>, ConfigError> {
        let origin = self.origin.unwrap_or_else(random_origin);
        if !check_origin(&origin) {
            return Err(ConfigError::new(
                "origin",
                "1 to 64 printable ASCII bytes, no '|'",
                origin,
            ));
        }
        if !(1..=1000).contains(&self.min_reporters) {
            return Err(ConfigError::new(
                "min_reporters",
                "1..=1000",
                self.min_reporters,
            ));
        }
        if !(Duration::from_millis(1)..=Duration::from_secs(86_400)).contains(&self.window) {
            return Err(ConfigError::new(
                "min_reporters window",
                "1 ms ..= 1 day",
                self.window,
            ));
        }
        if self.slack > Duration::from_secs(3_600) {
            return Err(ConfigError::new("slack", "0 ..= 1 hour", self.slack));
        }
        let (fraction, cap) = self.spread;
        if !(0.0..=spread::MAX_FRACTION).contains(&fraction) {
            return Err(ConfigError::new(
                "probe_spread fraction",
                "0.0 ..= 0.5",
                fraction,
            ));
        }
        let Some(spread) = Spread::new(&origin, fraction, cap) else {
            return Err(ConfigError::new("probe_spread cap", "0 ..= 1 hour", cap));
        };
        let stats = Arc::new(SyncStats::new(self.outbox.clone()));
        Ok(Replica {
            registry: self.registry,
            outbox: self.outbox,
            origin,
            min_reporters: self.min_reporters,
            window: self.window,
            slack: self.slack,
            spread,
            applied: HashMap::new(),
            own: HashMap::new(),
            stats,
        })
    }
}

/// A name unique to this process: `replica-` and 16 hex digits from the
/// process id, the time and std's random hasher keys.
fn random_origin() -> String {
    use core::hash::Hasher;
    let mut h = RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    format!("replica-{:016x}", h.finish())
}

impl<K, S, C: Clock> Replica<K, S, C> {
    /// This replica's name in the store.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Its counters, readable while its task runs.
    pub fn stats(&self) -> Arc<SyncStats> {
        self.stats.clone()
    }

    /// The registry it shares.
    pub fn registry(&self) -> &Arc<Registry<K, S, C>> {
        &self.registry
    }

    /// `min_reporters`: `(k, window)`.
    pub fn min_reporters(&self) -> (u32, Duration) {
        (self.min_reporters, self.window)
    }

    /// The slack the store keeps a record past its period.
    pub fn slack(&self) -> Duration {
        self.slack
    }

    /// `probe_spread`: `(fraction, cap)`.
    pub fn probe_spread(&self) -> (f64, Duration) {
        self.spread.settings()
    }

    /// How much earlier than `news` says this replica ends the key's open
    /// period when it applies the news
    /// ([`ReplicaBuilder::probe_spread`]): in `[0, min(remaining ×
    /// fraction, cap))`, a pure function of this replica's name, the key,
    /// the epoch and what is left.
    ///
    /// ```
    /// use failfast::share::{News, Outbox, Replica};
    /// use failfast::{Breaker, Reason, Registry};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let replica = |name: &str| -> Result<_, failfast::ConfigError> {
    ///     let registry = Arc::new(Registry::<String>::builder(Breaker::builder().consecutive_failures(5)).build()?);
    ///     Replica::builder(registry, Arc::new(Outbox::new(64))).origin(name).build()
    /// };
    /// let news = News::new("db:5432", 7, Duration::from_secs(30), 1, Reason::FailureRate, "c");
    /// let (a, b) = (replica("a")?.probe_offset(&news), replica("b")?.probe_offset(&news));
    /// // By default, under 10 % of what is left (and under 5 s); each its own.
    /// assert!(a < Duration::from_secs(3) && b < Duration::from_secs(3));
    /// assert_ne!(a, b);
    /// assert_eq!(a, replica("a")?.probe_offset(&news), "deterministic");
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn probe_offset(&self, news: &News) -> Duration {
        self.spread.offset(&news.key, news.epoch, news.remaining)
    }

    /// Own trips still open that the store may not have: all of them, after
    /// the store restarted, failed over or was unreachable. They are handed
    /// again at once, whatever their wait after a refusal.
    pub fn store_lost(&mut self) {
        self.store_lost_where(|_| true);
    }

    /// [`store_lost`](Self::store_lost) for the keys `lost` picks (one
    /// shard's, with Redis).
    pub(crate) fn store_lost_where(&mut self, lost: impl Fn(&str) -> bool) {
        for (key, own) in &mut self.own {
            if lost(key) {
                own.published = false;
                own.retry_at = Nanos::ZERO;
            }
        }
    }

    /// Moves the outbox's reports into the table of own trips, and forgets
    /// the own trips that ended by `now`.
    pub(crate) fn drain_outbox_at(&mut self, now: Nanos) {
        while let Some(report) = self.outbox.pop() {
            let until = report.until();
            let fresh = Own::new(until, report.reason);
            let full = self.own.len() >= MAX_OWN_TRIPS;
            match self.own.get_mut(report.key()) {
                // A later end to publish; a key the store refuses keeps
                // waiting on its own.
                Some(own) if until > own.until => {
                    *own = Own {
                        retry_at: own.retry_at,
                        backoff: own.backoff,
                        ..fresh
                    }
                }
                Some(_) => {}
                None if full => self.outbox.count_dropped(),
                None => {
                    self.own.insert(report.key().to_owned(), fresh);
                }
            }
        }
        self.own.retain(|_, own| own.until > now);
    }

    /// The own trips open at `now` that the store does not have yet and
    /// that are not waiting after a refusal (the outbox drained first),
    /// with what is left of them: at most `most`, none that `skip` picks
    /// (already on their way).
    #[cfg(feature = "redis")]
    pub(crate) fn due_at(
        &mut self,
        now: Nanos,
        most: usize,
        skip: impl Fn(&str) -> bool,
    ) -> Vec<LocalTrip> {
        self.drain_outbox_at(now);
        self.own
            .iter()
            .filter(|(key, own)| !own.published && own.retry_at <= now && !skip(key))
            .take(most)
            .map(|(key, own)| self.local_trip(key, own, now))
            .collect()
    }

    /// Every own trip open at `now` that the store does not have yet (the
    /// outbox drained first), waiting or not: the ones never refused first,
    /// then the ones refused longest ago.
    fn unpublished_at(&mut self, now: Nanos) -> Vec<LocalTrip> {
        self.drain_outbox_at(now);
        let mut waiting: Vec<(&String, &Own)> =
            self.own.iter().filter(|(_, own)| !own.published).collect();
        waiting.sort_by_key(|(_, own)| own.retry_at);
        waiting
            .into_iter()
            .map(|(key, own)| self.local_trip(key, own, now))
            .collect()
    }

    /// The trip to hand the store for `key`'s own trip at `now`.
    fn local_trip(&self, key: &str, own: &Own, now: Nanos) -> LocalTrip {
        LocalTrip {
            key: key.to_owned(),
            remaining: own.until.saturating_duration_since(now),
            reason: own.reason,
            origin: self.origin.clone(),
            window: self.window,
            slack: self.slack,
        }
    }

    /// The store has `trip` (sent at `now`): not to be sent again unless the
    /// store loses it.
    pub(crate) fn confirm(&mut self, trip: &LocalTrip, now: Nanos) {
        if let Some(own) = self.own.get_mut(&trip.key) {
            if own.until <= now.saturating_add(trip.remaining) {
                own.published = true;
            }
            own.backoff = RETRY_FIRST;
        }
        self.stats.add(Count::Published, 1);
    }

    /// The store refused `trip` (sent at `now`), or did not answer: counted
    /// in [`SyncStats::errors`]; the sync task hands it again after its own
    /// wait (100 ms, doubling to 5 s), and
    /// [`publish_to`](Self::publish_to) after the others.
    pub(crate) fn refused(&mut self, trip: &LocalTrip, now: Nanos) {
        if let Some(own) = self.own.get_mut(&trip.key) {
            own.retry_at = now.saturating_add(own.backoff);
            own.backoff = (own.backoff * 2).min(RETRY_MAX);
        }
        self.count_error();
    }

    /// Counts `n` malformed records or messages set aside.
    pub(crate) fn count_bad(&self, n: u64) {
        if n > 0 {
            self.stats.add(Count::BadRecords, n);
        }
    }

    /// Counts one reconciliation round (every shard read).
    pub(crate) fn count_reconciled(&self) {
        self.stats.add(Count::Reconciled, 1);
    }

    /// Counts a failed store operation.
    pub(crate) fn count_error(&self) {
        self.stats.add(Count::Errors, 1);
    }

    /// Forgets applied epochs whose period and slack are over.
    fn forget_at(&mut self, now: Nanos) {
        self.applied.retain(|_, seen| seen.forget_at > now);
    }
}

impl<K, S, C> Replica<K, S, C>
where
    K: Hash + Eq + for<'a> TryFrom<&'a str>,
    S: BuildHasher,
    C: Clock,
{
    /// Applies `news` now: see [`receive_at`](Self::receive_at).
    pub fn receive(&mut self, news: &News) -> Option<Transition> {
        let now = self.registry.now();
        self.receive_at(news, now)
    }

    /// Applies `news` at `now`, if it passes the filters (a newer epoch than
    /// the last applied for the key, at least `min_reporters` reporters, not
    /// this replica's own open trip coming back with nothing beyond it — it
    /// is the only reporter, or the news ends no later): the key's breaker —
    /// created if the registry does not track the key yet — opens until
    /// `now` plus what is left less this replica's
    /// [`probe_offset`](Self::probe_offset) (and less its breaker's jitter),
    /// or its open period is extended to that end if it is later. The
    /// offset only ever moves the end earlier than the news says. Returns
    /// the transition, whose reason is [`Reason::RemoteTrip`]; it is never a
    /// close or a half-open.
    pub fn receive_at(&mut self, news: &News, now: Nanos) -> Option<Transition> {
        self.stats.add(Count::Received, 1);
        if news.reporters < self.min_reporters {
            self.stats.add(Count::BelowMinReporters, 1);
            return None;
        }
        if self
            .applied
            .get(&news.key)
            .is_some_and(|s| s.epoch >= news.epoch)
        {
            self.stats.add(Count::Stale, 1);
            return None;
        }
        let end = now.saturating_add(news.remaining);
        let seen = Seen {
            epoch: news.epoch,
            forget_at: end.saturating_add(self.slack),
        };
        let own = self.own.get(&news.key).filter(|o| o.until > now);
        if news.origin == self.origin
            && own.is_some_and(|o| {
                news.reporters <= 1 || o.until.saturating_add(Duration::from_millis(1)) >= end
            })
        {
            // Its own trip coming back (it is the only reporter, or the news
            // ends no later than its own trip; the wire rounds up to whole
            // milliseconds): nothing to learn, and applying it would only
            // stretch the period by the round trip. Taken as applied, so a
            // late duplicate cannot do that either.
            self.applied.insert(news.key.clone(), seen);
            self.stats.add(Count::Ignored, 1);
            return None;
        }
        if news.remaining.is_zero() {
            return None;
        }
        let Ok(key) = K::try_from(news.key.as_str()) else {
            self.stats.add(Count::Ignored, 1);
            return None;
        };
        let handle = self.registry.get_or_insert_at(key, now);
        if !handle.is_tracked() {
            // The registry is full: its overflow breaker is shared by every
            // untracked key, and one upstream's news must not open it.
            self.stats.add(Count::Ignored, 1);
            return None;
        }
        self.applied.insert(news.key.clone(), seen);
        // The spread: below what is left (the offset is under half of it).
        let remaining = news.remaining.saturating_sub(self.probe_offset(news));
        let remote = RemoteTrip::new(news.epoch, remaining, news.reason);
        let t = handle.apply_remote_at(&remote, now);
        if t.is_some() {
            self.stats.add(Count::Applied, 1);
        }
        t
    }

    /// Applies the store's list of open trips (reconciliation) at `now`, and
    /// forgets applied epochs that are over. Returns how many changed a
    /// breaker.
    pub(crate) fn reconciled_at(&mut self, open: &[News], now: Nanos) -> usize {
        let applied = self.apply_open_at(open, now);
        self.count_reconciled();
        applied
    }

    /// Applies part of the store's list of open trips (one shard's) at
    /// `now`, and forgets applied epochs that are over. Returns how many
    /// changed a breaker.
    pub(crate) fn apply_open_at(&mut self, open: &[News], now: Nanos) -> usize {
        let applied = open
            .iter()
            .filter(|news| self.receive_at(news, now).is_some())
            .count();
        self.forget_at(now);
        applied
    }

    /// Hands the local trips the store does not have yet to `store`, now:
    /// see [`publish_to_at`](Self::publish_to_at).
    pub fn publish_to<St: Store>(&mut self, store: &mut St) -> Vec<News> {
        let now = self.registry.now();
        self.publish_to_at(store, now)
    }

    /// Hands the local trips the store does not have yet to `store` at
    /// `now`, and returns the news the store made of them, to deliver to
    /// every replica (a simulation's job; Redis publishes them itself). A
    /// store error is counted in [`SyncStats::errors`] and ends this call;
    /// the trips are handed again next time, while they last, the ones the
    /// store refused last going last — so one trip the store keeps refusing
    /// does not hold the others back. Bad records the store replaced are
    /// counted in [`SyncStats::bad_records`].
    pub fn publish_to_at<St: Store>(&mut self, store: &mut St, now: Nanos) -> Vec<News> {
        let mut out = Vec::new();
        for trip in self.unpublished_at(now) {
            let done = store.trip(&trip);
            self.count_bad(store.take_bad_records());
            match done {
                Ok(news) => {
                    self.confirm(&trip, now);
                    out.extend(news);
                }
                Err(_) => {
                    self.refused(&trip, now);
                    break;
                }
            }
        }
        out
    }

    /// Reconciles with `store` now: see [`reconcile_with_at`](Self::reconcile_with_at).
    ///
    /// # Errors
    ///
    /// The store's, counted in [`SyncStats::errors`].
    pub fn reconcile_with<St: Store>(&mut self, store: &mut St) -> Result<usize, St::Error> {
        let now = self.registry.now();
        self.reconcile_with_at(store, now)
    }

    /// Reads every open trip from `store` and applies it at `now` (what
    /// heals lost messages, a cold start and a partition). Returns how many
    /// changed a breaker. Bad records the store skipped are counted in
    /// [`SyncStats::bad_records`].
    ///
    /// # Errors
    ///
    /// The store's, counted in [`SyncStats::errors`].
    pub fn reconcile_with_at<St: Store>(
        &mut self,
        store: &mut St,
        now: Nanos,
    ) -> Result<usize, St::Error> {
        let open = store.open_trips();
        self.count_bad(store.take_bad_records());
        match open {
            Ok(open) => Ok(self.reconciled_at(&open, now)),
            Err(e) => {
                self.count_error();
                Err(e)
            }
        }
    }
}

impl<K, S, C: Clock> fmt::Debug for ReplicaBuilder<K, S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplicaBuilder")
            .field("origin", &self.origin)
            .field("min_reporters", &self.min_reporters)
            .field("window", &self.window)
            .field("slack", &self.slack)
            .field("probe_spread", &self.spread)
            .finish_non_exhaustive()
    }
}

impl<K, S, C: Clock> fmt::Debug for Replica<K, S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Replica")
            .field("origin", &self.origin)
            .field("min_reporters", &self.min_reporters)
            .field("window", &self.window)
            .field("slack", &self.slack)
            .field("probe_spread", &self.spread.settings())
            .field("own_trips", &self.own.len())
            .field("applied", &self.applied.len())
            .field("stats", &self.stats)
            .finish()
    }
}
