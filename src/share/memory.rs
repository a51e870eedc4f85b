//! [`MemoryStore`]: the [`Store`] rules in process, for simulations, tests
//! and the demo — the same rules the `redis` module's Lua scripts run, on a
//! clock of its own (the "server's" clock).

use core::fmt;
use core::time::Duration;
use std::collections::HashMap;

use super::news::{ceil_millis, LocalTrip, News};
use super::store::Store;
use crate::clock::{Clock, QuantaClock};
use crate::observe::Reason;

/// The store was made unreachable ([`MemoryStore::set_reachable`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Unreachable;

impl fmt::Display for Unreachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the store is unreachable")
    }
}

impl std::error::Error for Unreachable {}

/// A key's trip record (the Redis hash `...:trip:<key>`).
#[derive(Clone, Debug)]
struct Record {
    epoch: u64,
    /// The period's end, store milliseconds.
    until: u64,
    reporters: u32,
    reason: Reason,
    origin: String,
    expires: u64,
}

/// A key's reporters (the Redis sorted set `...:rep:<key>`): replica →
/// when it last reported, store milliseconds.
#[derive(Clone, Debug, Default)]
struct Reporters {
    seen: HashMap<String, u64>,
    expires: u64,
}

/// An in-process [`Store`]: every replica of a simulation calls the same
/// one. Deterministic on a [`ManualClock`](crate::ManualClock).
///
/// ```
/// use failfast::share::{MemoryStore, Outbox, Replica};
/// use failfast::{Breaker, ManualClock, Nanos, Registry};
/// use std::sync::Arc;
///
/// let clock = ManualClock::new();
/// let mut store = MemoryStore::new(clock.clone());
/// let replica = |name: &str| -> Result<_, failfast::ConfigError> {
///     let registry = Arc::new(
///         Registry::<String>::builder(Breaker::builder().consecutive_failures(1))
///             .build_with_clock(clock.clone())?,
///     );
///     let outbox = Arc::new(Outbox::new(64));
///     Ok((registry.clone(), outbox.clone(), Replica::builder(registry, outbox).origin(name).build()?))
/// };
/// let (a_hosts, a_outbox, mut a) = replica("a")?;
/// let (b_hosts, _, mut b) = replica("b")?;
///
/// // A's breaker trips on the request path; the verdict's transition goes to the outbox.
/// let t = a_hosts.with("db:5432", |b| b.try_acquire().unwrap().failure()).unwrap();
/// a_outbox.report("db:5432", &t);
/// // A's sync step publishes it; the store's news reaches B.
/// for news in a.publish_to(&mut store) {
///     b.receive(&news);
/// }
/// assert!(b_hosts.handle("db:5432").try_acquire().is_err());
/// # Ok::<(), failfast::ConfigError>(())
/// ```
pub struct MemoryStore<C: Clock = QuantaClock> {
    clock: C,
    records: HashMap<String, Record>,
    reporters: HashMap<String, Reporters>,
    /// Key → its period's end (the Redis sorted set `...:open`).
    index: HashMap<String, u64>,
    index_expires: u64,
    reachable: bool,
}

impl<C: Clock> MemoryStore<C> {
    /// An empty store on `clock`.
    pub fn new(clock: C) -> MemoryStore<C> {
        MemoryStore {
            clock,
            records: HashMap::new(),
            reporters: HashMap::new(),
            index: HashMap::new(),
            index_expires: 0,
            reachable: true,
        }
    }

    /// Makes every call fail with [`Unreachable`] (`false`) or succeed again.
    pub fn set_reachable(&mut self, reachable: bool) {
        self.reachable = reachable;
    }

    /// Forgets everything, as a store restarted without persistence.
    pub fn clear(&mut self) {
        self.records.clear();
        self.reporters.clear();
        self.index.clear();
    }

    /// The keys the store holds, as Redis's `DBSIZE` would count them: one
    /// record and one reporters set per key still kept, and the index while
    /// it lists anything.
    pub fn len(&mut self) -> usize {
        let now = self.now_ms();
        self.expire(now);
        self.records.len() + self.reporters.len() + usize::from(!self.index.is_empty())
    }

    /// Whether the store holds nothing.
    pub fn is_empty(&mut self) -> bool {
        self.len() == 0
    }

    /// The store's now: milliseconds, and microseconds for epochs.
    fn now_ms(&self) -> u64 {
        self.clock.now().as_nanos() / 1_000_000
    }

    /// Drops what has expired, as Redis does lazily.
    fn expire(&mut self, now: u64) {
        self.records.retain(|_, r| r.expires > now);
        self.reporters.retain(|_, r| r.expires > now);
        if self.index_expires <= now {
            self.index.clear();
        }
    }

    fn check(&self) -> Result<(), Unreachable> {
        if self.reachable {
            Ok(())
        } else {
            Err(Unreachable)
        }
    }
}

impl<C: Clock> Store for MemoryStore<C> {
    type Error = Unreachable;

    fn trip(&mut self, trip: &LocalTrip) -> Result<Option<News>, Unreachable> {
        self.check()?;
        let now_us = self.clock.now().as_nanos() / 1_000;
        let now = now_us / 1_000;
        self.expire(now);
        let window = ceil_millis(trip.window).max(1);
        let slack = ceil_millis(trip.slack);
        let seen = self.reporters.entry(trip.key.clone()).or_default();
        seen.seen.insert(trip.origin.clone(), now);
        seen.seen.retain(|_, at| *at + window > now);
        seen.expires = now + window;
        let reporters = u32::try_from(seen.seen.len()).unwrap_or(u32::MAX);
        let mut until = now.saturating_add(ceil_millis(trip.remaining));
        let mut epoch = now_us;
        if let Some(old) = self.records.get(&trip.key) {
            if old.until >= until && old.reporters >= reporters {
                return Ok(None);
            }
            until = until.max(old.until);
            epoch = epoch.max(old.epoch + 1);
        }
        let left = until - now;
        self.records.insert(
            trip.key.clone(),
            Record {
                epoch,
                until,
                reporters,
                reason: trip.reason,
                origin: trip.origin.clone(),
                expires: now + left + slack,
            },
        );
        self.index.insert(trip.key.clone(), until);
        self.index_expires = self.index_expires.max(now + left + slack);
        Ok(Some(News::new(
            trip.key.clone(),
            epoch,
            Duration::from_millis(left),
            reporters,
            trip.reason,
            trip.origin.clone(),
        )))
    }

    fn open_trips(&mut self) -> Result<Vec<News>, Unreachable> {
        self.check()?;
        let now = self.now_ms();
        self.expire(now);
        self.index.retain(|_, until| *until > now);
        let mut open: Vec<(u64, &String)> = self.index.iter().map(|(k, u)| (*u, k)).collect();
        open.sort();
        Ok(open
            .into_iter()
            .filter_map(|(until, key)| {
                let r = self.records.get(key)?;
                Some(News::new(
                    key.clone(),
                    r.epoch,
                    Duration::from_millis(until - now),
                    r.reporters,
                    r.reason,
                    r.origin.clone(),
                ))
            })
            .collect())
    }
}

impl<C: Clock> fmt::Debug for MemoryStore<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("records", &self.records.len())
            .field("open", &self.index.len())
            .field("reachable", &self.reachable)
            .finish()
    }
}

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn trip(key: &str, origin: &str, remaining_ms: u64) -> LocalTrip {
        LocalTrip {
            key: key.into(),
            remaining: Duration::from_millis(remaining_ms),
            reason: Reason::FailureRate,
            origin: origin.into(),
            window: Duration::from_secs(60),
            slack: Duration::from_secs(5),
        }
    }

    #[test]
    fn a_later_end_or_a_new_reporter_is_news_and_nothing_else_is() {
        let clock = ManualClock::new();
        clock.advance(Duration::from_secs(1000));
        let mut store = MemoryStore::new(clock.clone());
        let first = store.trip(&trip("k", "a", 10_000)).unwrap().unwrap();
        assert_eq!(
            (first.reporters, first.remaining),
            (1, Duration::from_secs(10))
        );
        // Same reporter, an earlier end: nothing new.
        clock.advance(Duration::from_secs(1));
        assert_eq!(store.trip(&trip("k", "a", 5_000)).unwrap(), None);
        // Another reporter, an earlier end: news, with the later end kept.
        let second = store.trip(&trip("k", "b", 5_000)).unwrap().unwrap();
        assert!(second.epoch > first.epoch);
        assert_eq!(
            (second.reporters, second.remaining),
            (2, Duration::from_secs(9))
        );
        // A later end: news.
        let third = store.trip(&trip("k", "a", 20_000)).unwrap().unwrap();
        assert!(third.epoch > second.epoch);
        assert_eq!(third.remaining, Duration::from_secs(20));
        // Reconciliation lists it with what is left.
        clock.advance(Duration::from_secs(5));
        let open = store.open_trips().unwrap();
        assert_eq!(open.len(), 1);
        assert_eq!(
            (open[0].epoch, open[0].remaining),
            (third.epoch, Duration::from_secs(15))
        );
    }

    #[test]
    fn everything_expires() {
        let clock = ManualClock::new();
        let mut store = MemoryStore::new(clock.clone());
        for i in 0..10 {
            store.trip(&trip(&format!("h{i}"), "a", 1_000)).unwrap();
        }
        assert_eq!(store.len(), 21);
        clock.advance(Duration::from_millis(1_001));
        assert!(store.open_trips().unwrap().is_empty());
        // Records outlive their period by the slack; reporters by the window.
        clock.advance(Duration::from_secs(5));
        assert_eq!(store.len(), 10);
        clock.advance(Duration::from_secs(60));
        assert!(store.is_empty());
    }

    #[test]
    fn reporters_leave_the_window() {
        let clock = ManualClock::new();
        let mut store = MemoryStore::new(clock.clone());
        let mut t = trip("k", "a", 100_000);
        t.window = Duration::from_secs(10);
        store.trip(&t).unwrap();
        clock.advance(Duration::from_secs(11));
        t.origin = "b".into();
        t.remaining = Duration::from_secs(200);
        assert_eq!(store.trip(&t).unwrap().unwrap().reporters, 1);
    }

    #[test]
    fn unreachable_fails_every_call() {
        let mut store = MemoryStore::new(ManualClock::new());
        store.set_reachable(false);
        assert_eq!(store.trip(&trip("k", "a", 1)), Err(Unreachable));
        assert_eq!(store.open_trips(), Err(Unreachable));
    }
}
