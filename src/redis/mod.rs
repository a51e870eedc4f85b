//! Trips shared across replicas through Redis: [`RedisSync`], one tokio task
//! per registry, with nothing on the request path.
//!
//! The request path is the same with or without it: admission and verdicts
//! touch only the breaker's atomics. A verdict that trips a breaker returns
//! its transition, which goes into an [`Outbox`](crate::share::Outbox) (one
//! lock-free push; [`Outbox::hook`](crate::share::Outbox::hook) does it for a
//! keyed layer). The task — started by you, `tokio::spawn(sync.run())` —
//! does the rest: it publishes those trips, applies the other replicas'
//! news, and reconciles. The merge, the epochs and the safety rails are
//! [`share`](crate::share)'s; this module is their transport.
//!
//! ```no_run
//! use failfast::redis::RedisSyncBuilder;
//! use failfast::registry::HostKey;
//! use failfast::share::{Outbox, Replica};
//! use failfast::tower::KeyedLayer;
//! use failfast::{Breaker, Registry};
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! # async fn start() -> Result<(), failfast::ConfigError> {
//! let registry = Arc::new(Registry::<HostKey>::builder(Breaker::builder().failure_rate(0.5)).build()?);
//! let outbox = Arc::new(Outbox::new(1024));
//! let layer = KeyedLayer::new(registry.clone()).on_transition(outbox.hook());
//! let replica = Replica::builder(registry, outbox)
//!     .min_reporters(2, Duration::from_secs(60)) // two replicas must agree
//!     .build()?;
//! let sync = RedisSyncBuilder::new("redis://127.0.0.1:6379/").build(replica)?;
//! let stats = sync.stats();
//! tokio::spawn(sync.run());
//! # let _ = (layer, stats);
//! # Ok(())
//! # }
//! ```
//!
//! # The protocol
//!
//! Keys are grouped in `shards` (default 16) by an FNV-1a hash of the
//! upstream's key; each shard is one hash tag, `{prefix:n}`, so everything a
//! script touches lives in one Redis Cluster slot:
//!
//! | key | type | holds | expires |
//! |---|---|---|---|
//! | `{failfast:n}:trip:<key>` | hash | `epoch`, `until` (server ms), `reporters`, `reason`, `origin` | period end + slack |
//! | `{failfast:n}:rep:<key>` | sorted set | replica → when it last reported (server ms) | the `min_reporters` window |
//! | `{failfast:n}:open` | sorted set | key → its period's end (server ms): the index reconciliation reads | the last period's end + slack |
//! | `{failfast:n}:trips` | sharded channel | `epoch\|remaining_ms\|reporters\|reason\|origin\|key` | — |
//!
//! **Publishing** is one Lua script per trip (`EVALSHA`), atomic on the
//! server's clock (`TIME`): the reporter joins the key's reporters; the
//! period ends at the later of the record's end and now + the trip's
//! *remaining* time; if that is not later and the reporters are not more,
//! nothing is new and nothing is published; else the key gets a new epoch —
//! the record's + 1 or the server's now in microseconds, whichever is
//! greater, so epochs grow across the record's expiry and a server restart
//! — the record and index are written with their expiries, and `SPUBLISH`
//! sends what is *left* of the period. No replica's clock is ever stored or
//! sent.
//!
//! **Receiving**: news arrives as RESP3 pushes on the task's connection; the
//! replica applies it at its own now + what is left, after its filters
//! (newer epoch, `min_reporters`, not its own open trip).
//!
//! **Reconciliation**, on connect, after a shard's subscription was lost
//! (a dropped connection, a moved slot) and every `reconcile_every`
//! (default 5 s): a second script per shard trims ended keys from the
//! index and lists the open ones with what is left. Lost
//! pub/sub messages (at most once delivery, a killed subscriber), a cold
//! start and a healed partition all converge by it; epochs make a record
//! already applied a no-op.
//!
//! **Nothing read is trusted.** Both scripts take a record only whole —
//! every field present and of its type — and a key only of its Redis type;
//! reconciliation skips anything else (and drops it from the index), a trip
//! replaces it, and the replica decodes every message. What is set aside is
//! counted in [`SyncStats::bad_records`](crate::share::SyncStats::bad_records)
//! and never fails a script, so junk under one key stops no other key.
//!
//! # What runs where
//!
//! | where | what | may wait on Redis |
//! |---|---|---|
//! | the request path | atomics; a trip: one push into the outbox | never |
//! | the sync task | drains the outbox every `flush_every` (default 5 ms), scripts, subscriptions, reconciliation | yes, each operation bounded by `timeout` (default 1 s) |
//! | Redis | the two scripts; expiry | — |
//!
//! redis-rs keeps helper tasks of its own for the connection (reconnects).
//!
//! # Safety rails
//!
//! * **`min_reporters(k, window)`** ([`ReplicaBuilder::min_reporters`](crate::share::ReplicaBuilder::min_reporters)):
//!   news counts once `k` distinct replicas reported the key within the
//!   window; the script counts them, each replica checks its own `k`.
//! * **The cap**: a remote trip asks the registry's `max_open` as a local
//!   one does; a key the registry cannot track is not opened.
//! * **Redis unreachable or slow**: the task counts each failed operation
//!   ([`SyncStats::errors`](crate::share::SyncStats::errors)) and tries it
//!   again after its own back-off (100 ms doubling to 5 s): a shard's
//!   subscription and reconciliation per shard, a trip per trip. Each
//!   operation runs on its own, so a shard (a cluster node) or a trip in
//!   trouble holds back no other. Its own open trips stay in its table and
//!   are published — again, after a shard's subscription was lost, in case
//!   Redis restarted empty — when it answers. The outbox drains into that
//!   table meanwhile, so the request path never finds it full for that
//!   reason.
//!
//! # Redis Cluster
//!
//! [`RedisSyncBuilder::cluster`] connects to a cluster: scripts go to the
//! node that owns their shard's slot, and the task subscribes to each
//! shard's channel on its node (sharded pub/sub; `SSUBSCRIBE` again when a
//! slot moves). A node that does not have a script yet gets it with the
//! call (`EVAL`), never by `SCRIPT LOAD`, which the cluster client sends to
//! every node (one node asleep would hold up every node's first call).
//! Needs Redis 7 or later (sharded pub/sub), single server or cluster.

mod blocking;
mod conn;
mod keys;
mod script;
mod task;

use core::fmt;
use core::time::Duration;
use std::collections::hash_map::RandomState;

pub use self::blocking::RedisStore;
use self::conn::Target;
use self::keys::Keyspace;
use self::script::Scripts;
use crate::clock::{Clock, QuantaClock};
use crate::error::ConfigError;
use crate::share::{Replica, SyncStats};

/// One registry's Redis sync task: build it with [`RedisSyncBuilder`], run
/// it with [`run`](RedisSync::run) (`tokio::spawn(sync.run())`).
pub struct RedisSync<K, S = RandomState, C: Clock = QuantaClock> {
    replica: Replica<K, S, C>,
    target: Target,
    keys: Keyspace,
    scripts: Scripts,
    reconcile_every: Duration,
    flush_every: Duration,
    timeout: Duration,
}

impl<K, S, C: Clock> RedisSync<K, S, C> {
    /// The replica's counters, readable while the task runs.
    pub fn stats(&self) -> std::sync::Arc<SyncStats> {
        self.replica.stats()
    }

    /// The replica it runs.
    pub fn replica(&self) -> &Replica<K, S, C> {
        &self.replica
    }
}

impl<K, S, C: Clock> fmt::Debug for RedisSync<K, S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSync")
            .field("replica", &self.replica)
            .field("keys", &self.keys)
            .field("reconcile_every", &self.reconcile_every)
            .field("flush_every", &self.flush_every)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Builds a [`RedisSync`]: where Redis is, how keys are named, how often the
/// task works.
///
/// ```
/// use failfast::redis::RedisSyncBuilder;
/// use std::time::Duration;
///
/// let builder = RedisSyncBuilder::new("redis+unix:///run/redis/redis.sock")
///     .prefix("checkout")
///     .reconcile_every(Duration::from_secs(2));
/// # let _ = builder;
/// ```
#[must_use]
#[derive(Clone, Debug)]
pub struct RedisSyncBuilder {
    urls: Vec<String>,
    cluster: bool,
    prefix: String,
    shards: u16,
    reconcile_every: Duration,
    flush_every: Duration,
    timeout: Duration,
}

impl RedisSyncBuilder {
    /// A single Redis server (7 or later): `redis://host:port/db`,
    /// `rediss://…` with TLS if redis-rs was built with it, or
    /// `redis+unix:///path/to.sock`.
    pub fn new(url: &str) -> RedisSyncBuilder {
        RedisSyncBuilder::with_urls(vec![url.to_owned()], false)
    }

    /// A Redis Cluster, found from any of `nodes` (`redis://host:port`).
    pub fn cluster<I, U>(nodes: I) -> RedisSyncBuilder
    where
        I: IntoIterator<Item = U>,
        U: AsRef<str>,
    {
        let urls = nodes.into_iter().map(|u| u.as_ref().to_owned()).collect();
        RedisSyncBuilder::with_urls(urls, true)
    }

    fn with_urls(urls: Vec<String>, cluster: bool) -> RedisSyncBuilder {
        RedisSyncBuilder {
            urls,
            cluster,
            prefix: "failfast".to_owned(),
            shards: 16,
            reconcile_every: Duration::from_secs(5),
            flush_every: Duration::from_millis(5),
            timeout: Duration::from_secs(1),
        }
    }

    /// The prefix of every key and channel (default `failfast`): one per
    /// group of replicas that share trips. 1 to 64 printable ASCII bytes,
    /// without `{`, `}` or `|`.
    pub fn prefix(mut self, prefix: &str) -> Self {
        prefix.clone_into(&mut self.prefix);
        self
    }

    /// How many shards (hash tags, channels, indexes) the keys spread over
    /// (default 16, in 1..=1024): more spread a cluster's load more evenly;
    /// each costs one subscription and one script per reconciliation.
    /// Every replica of a group must use the same.
    pub fn shards(mut self, shards: u16) -> Self {
        self.shards = shards;
        self
    }

    /// How often to reconcile (default 5 s, in 100 ms..=1 hour): the
    /// longest a lost message keeps a replica unaware of a trip.
    pub fn reconcile_every(mut self, every: Duration) -> Self {
        self.reconcile_every = every;
        self
    }

    /// How often the task drains the outbox (default 5 ms, in 1 ms..=1 s):
    /// the delay a local trip waits before it is published.
    pub fn flush_every(mut self, every: Duration) -> Self {
        self.flush_every = every;
        self
    }

    /// How long one Redis operation may take before it counts as failed
    /// (default 1 s, in 10 ms..=60 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The task for `replica`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the field out of range, or `url` for an
    /// address that does not parse.
    pub fn build<K, S, C: Clock>(
        self,
        replica: Replica<K, S, C>,
    ) -> Result<RedisSync<K, S, C>, ConfigError> {
        let mut infos = Vec::with_capacity(self.urls.len());
        for url in &self.urls {
            let info = conn::parse(url).map_err(|_| {
                ConfigError::new("url", "a redis://, rediss:// or redis+unix:// URL", url)
            })?;
            infos.push(info);
        }
        let target = match (self.cluster, infos.len()) {
            (_, 0) => return Err(ConfigError::new("url", "at least one node", "none")),
            (false, _) => Target::Single(infos.swap_remove(0)),
            (true, _) => Target::Cluster(infos),
        };
        let prefix_ok = (1..=64).contains(&self.prefix.len())
            && self
                .prefix
                .bytes()
                .all(|b| b.is_ascii_graphic() && !matches!(b, b'{' | b'}' | b'|'));
        if !prefix_ok {
            return Err(ConfigError::new(
                "prefix",
                "1 to 64 printable ASCII bytes, no '{', '}' or '|'",
                self.prefix,
            ));
        }
        if !(1..=1024).contains(&self.shards) {
            return Err(ConfigError::new("shards", "1..=1024", self.shards));
        }
        let ranges = [
            (
                "reconcile_every",
                self.reconcile_every,
                Duration::from_millis(100),
                Duration::from_secs(3_600),
                "100 ms ..= 1 hour",
            ),
            (
                "flush_every",
                self.flush_every,
                Duration::from_millis(1),
                Duration::from_secs(1),
                "1 ms ..= 1 s",
            ),
            (
                "timeout",
                self.timeout,
                Duration::from_millis(10),
                Duration::from_secs(60),
                "10 ms ..= 60 s",
            ),
        ];
        for (field, value, min, max, allowed) in ranges {
            if !(min..=max).contains(&value) {
                return Err(ConfigError::new(field, allowed, value));
            }
        }
        Ok(RedisSync {
            replica,
            target,
            keys: Keyspace::new(&self.prefix, self.shards),
            scripts: Scripts::new(),
            reconcile_every: self.reconcile_every,
            flush_every: self.flush_every,
            timeout: self.timeout,
        })
    }
}
