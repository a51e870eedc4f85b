//! The sync task's loop: publish, receive, reconcile, and degrade to
//! local-only while Redis is away — every operation on its own, so one
//! shard's (or one key's) trouble never holds back another's.

use core::hash::{BuildHasher, Hash};
use core::time::Duration;
use std::collections::{HashSet, VecDeque};

use futures_util::stream::{FuturesUnordered, StreamExt};
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc;
use tokio::time::{timeout, Instant, MissedTickBehavior};

use super::conn::Conn;
use super::keys::Keyspace;
use super::script::{OpenReply, Scripts, TripReply};
use super::RedisSync;
use crate::clock::{Clock, Nanos};
use crate::share::{LocalTrip, News, Replica};

/// Trip scripts in flight at once (pipelined on the multiplexed
/// connection); the next starts as one ends.
const TRIPS_IN_FLIGHT: usize = 64;
/// The most trips read from the table at a tick, to start as others end;
/// what is left goes at the next tick (`flush_every` later).
const TRIPS_PER_TICK: usize = 1024;
/// The first wait after a failed operation; it doubles up to `MAX_BACKOFF`.
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// When to try something again after it failed.
#[derive(Debug)]
struct Backoff {
    at: Instant,
    wait: Duration,
}

impl Backoff {
    fn new(now: Instant) -> Backoff {
        Backoff {
            at: now,
            wait: MIN_BACKOFF,
        }
    }

    fn ready(&self, now: Instant) -> bool {
        now >= self.at
    }

    fn failed(&mut self, now: Instant) {
        self.at = now + self.wait;
        self.wait = (self.wait * 2).min(MAX_BACKOFF);
    }

    fn succeeded(&mut self) {
        self.wait = MIN_BACKOFF;
    }
}

/// One shard's subscription and reconciliation, on their own schedule.
#[derive(Debug)]
struct ShardLink {
    /// Subscribed to its channel since its last failure.
    subscribed: bool,
    /// Bumped when the subscription is lost: a subscription that was on its
    /// way then does not count.
    generation: u32,
    /// A subscription or a reconciliation of it is in flight.
    busy: bool,
    /// Reconciled since the last counted round.
    read: bool,
    reconcile_at: Instant,
    retry: Backoff,
}

impl ShardLink {
    fn lost(&mut self) {
        self.subscribed = false;
        self.generation = self.generation.wrapping_add(1);
    }
}

/// The task's view of Redis between operations.
struct Link {
    conn: Option<Conn>,
    connect: Backoff,
    shards: Vec<ShardLink>,
    /// Trips read from the table, waiting for a slot, with when they were read.
    queued: VecDeque<(LocalTrip, Nanos)>,
    /// Trip scripts in flight.
    in_flight: usize,
    /// The keys of the trips queued or in flight.
    tripping: HashSet<String>,
}

/// One operation on Redis.
enum Op {
    /// `SSUBSCRIBE` to the shard's channel (the shard's generation then).
    Subscribe(u16, u32),
    /// The reconciliation script on the shard.
    Reconcile(u16),
    /// The trip script, for a trip read from the table at that instant.
    Trip(LocalTrip, Nanos),
}

/// How an operation went (`None`: it failed or timed out).
enum Done {
    Subscribed(u16, u32, bool),
    Reconciled(u16, Option<OpenReply>),
    Tripped(LocalTrip, Nanos, Option<TripReply>),
}

/// Runs `op` on its own clone of the connection, within `limit`.
async fn perform(
    op: Op,
    mut conn: Conn,
    keys: &Keyspace,
    scripts: &Scripts,
    limit: Duration,
) -> Done {
    match op {
        Op::Subscribe(n, generation) => {
            let channel = keys.shard_at(n).channel();
            let done = timeout(limit, conn.ssubscribe(&channel)).await;
            Done::Subscribed(n, generation, matches!(done, Ok(Ok(()))))
        }
        Op::Reconcile(n) => {
            let call = scripts.open(&keys.shard_at(n));
            let done = timeout(limit, conn.invoke::<OpenReply>(&call)).await;
            Done::Reconciled(n, done.ok().and_then(Result::ok))
        }
        Op::Trip(trip, read_at) => {
            let call = scripts.trip(&keys.shard_of(&trip.key), &trip);
            let done = timeout(limit, conn.invoke::<TripReply>(&call)).await;
            Done::Tripped(trip, read_at, done.ok().and_then(Result::ok))
        }
    }
}

/// The text of a bulk string.
fn text(v: &Value) -> Option<String> {
    redis::from_redis_value_ref(v).ok()
}

impl<K, S, C> RedisSync<K, S, C>
where
    K: Hash + Eq + for<'a> TryFrom<&'a str>,
    S: BuildHasher,
    C: Clock,
{
    /// Runs the sync task until it is dropped (abort its `JoinHandle`):
    /// `tokio::spawn(sync.run())`. Never returns on its own; never panics on
    /// what Redis does.
    ///
    /// Every `flush_every` it moves the outbox's trips into its table, and,
    /// when Redis answers, starts what is due: each shard's subscription
    /// (after connecting, or when the connection or the shard's
    /// subscription was lost — and then it reconciles the shard and
    /// publishes again every own open trip of it), each trip Redis does
    /// not have yet, each shard's reconciliation every `reconcile_every`. Each runs on its own, concurrently with the
    /// others; messages and results are applied as they arrive, so a shard
    /// or a key in trouble holds back nothing else. A failed or slow
    /// operation (longer than `timeout`) is counted in
    /// [`SyncStats::errors`](crate::share::SyncStats::errors) and retried
    /// on its own after a back-off of 100 ms doubling to 5 s: a shard's
    /// subscription and reconciliation by shard, a trip by trip. Malformed
    /// records and messages are set aside and counted in
    /// [`SyncStats::bad_records`](crate::share::SyncStats::bad_records).
    /// The registry goes on local-only meanwhile.
    pub async fn run(self) {
        let RedisSync {
            mut replica,
            target,
            keys,
            scripts,
            reconcile_every,
            flush_every,
            timeout: limit,
        } = self;
        let (tx, mut rx) = mpsc::unbounded_channel();
        let now = Instant::now();
        let mut link = Link {
            conn: None,
            connect: Backoff::new(now),
            shards: (0..keys.len())
                .map(|_| ShardLink {
                    subscribed: false,
                    generation: 0,
                    busy: false,
                    read: false,
                    reconcile_at: now,
                    retry: Backoff::new(now),
                })
                .collect(),
            queued: VecDeque::new(),
            in_flight: 0,
            tripping: HashSet::new(),
        };
        let mut ops = FuturesUnordered::new();
        let mut flush = tokio::time::interval(flush_every);
        flush.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                Some(push) = rx.recv() => link.on_push(&mut replica, &keys, push),
                Some(done) = ops.next(), if !ops.is_empty() => {
                    link.finish(&mut replica, &keys, done, reconcile_every);
                    if let Some(conn) = &link.conn {
                        let conn = conn.clone();
                        for op in link.next_trips() {
                            ops.push(perform(op, conn.clone(), &keys, &scripts, limit));
                        }
                    }
                }
                _ = flush.tick() => {
                    replica.drain_outbox_at(replica.registry().now());
                    let Some(conn) = link.connection(&target, &tx, limit, &replica).await else {
                        continue;
                    };
                    for op in link.plan(&mut replica) {
                        ops.push(perform(op, conn.clone(), &keys, &scripts, limit));
                    }
                }
            }
        }
    }
}

impl Link {
    /// The connection, made now if there is none (and its back-off allows).
    async fn connection<K, S, C: Clock>(
        &mut self,
        target: &super::conn::Target,
        pushes: &mpsc::UnboundedSender<PushInfo>,
        limit: Duration,
        replica: &Replica<K, S, C>,
    ) -> Option<Conn> {
        if self.conn.is_none() {
            let now = Instant::now();
            if !self.connect.ready(now) {
                return None;
            }
            match timeout(limit, Conn::open(target, pushes.clone(), limit)).await {
                Ok(Ok(conn)) => {
                    self.connect.succeeded();
                    self.conn = Some(conn);
                }
                _ => {
                    replica.count_error();
                    self.connect.failed(Instant::now());
                    return None;
                }
            }
        }
        self.conn.clone()
    }

    /// The operations due now: each idle shard's subscription or
    /// reconciliation (unless it waits after a failure), and the trips
    /// Redis does not have yet (read from the table when none is queued),
    /// up to [`TRIPS_IN_FLIGHT`] in flight.
    fn plan<K, S, C: Clock>(&mut self, replica: &mut Replica<K, S, C>) -> Vec<Op> {
        let now = Instant::now();
        let mut ops = Vec::new();
        for (n, shard) in (0u16..).zip(self.shards.iter_mut()) {
            if shard.busy || !shard.retry.ready(now) {
                continue;
            }
            if !shard.subscribed {
                shard.busy = true;
                ops.push(Op::Subscribe(n, shard.generation));
            } else if now >= shard.reconcile_at {
                shard.busy = true;
                ops.push(Op::Reconcile(n));
            }
        }
        if self.queued.is_empty() {
            let read_at = replica.registry().now();
            let tripping = &self.tripping;
            let due = replica.due_at(read_at, TRIPS_PER_TICK, |key| tripping.contains(key));
            for trip in due {
                self.tripping.insert(trip.key.clone());
                self.queued.push_back((trip, read_at));
            }
        }
        ops.extend(self.next_trips());
        ops
    }

    /// Queued trips to start, while there is room in flight.
    fn next_trips(&mut self) -> Vec<Op> {
        let room = TRIPS_IN_FLIGHT.saturating_sub(self.in_flight);
        let n = room.min(self.queued.len());
        self.in_flight += n;
        self.queued
            .drain(..n)
            .map(|(trip, read_at)| Op::Trip(trip, read_at))
            .collect()
    }

    /// Applies how an operation went.
    fn finish<K, S, C>(
        &mut self,
        replica: &mut Replica<K, S, C>,
        keys: &Keyspace,
        done: Done,
        reconcile_every: Duration,
    ) where
        K: Hash + Eq + for<'a> TryFrom<&'a str>,
        S: BuildHasher,
        C: Clock,
    {
        let now = Instant::now();
        match done {
            Done::Subscribed(n, generation, ok) => {
                let shard = &mut self.shards[usize::from(n)];
                shard.busy = false;
                if generation != shard.generation {
                    // Lost while on its way: subscribe again at the next tick.
                } else if ok {
                    shard.subscribed = true;
                    shard.retry.succeeded();
                    // Whatever was missed meanwhile: read it, and hand the
                    // shard's own trips again (the store may have lost them).
                    shard.reconcile_at = now;
                    replica.store_lost_where(|key| keys.index_of(key) == n);
                } else {
                    replica.count_error();
                    shard.retry.failed(now);
                }
            }
            Done::Reconciled(n, reply) => {
                let shard = &mut self.shards[usize::from(n)];
                shard.busy = false;
                let Some((mut bad, list)) = reply else {
                    // Read it again after its back-off. A store that restarted
                    // dropped the connection: that push has the shard
                    // subscribe again, and publish its own trips again.
                    replica.count_error();
                    shard.retry.failed(now);
                    return;
                };
                shard.retry.succeeded();
                shard.read = true;
                shard.reconcile_at = now + reconcile_every;
                let mut open = Vec::with_capacity(list.len());
                for wire in &list {
                    match News::decode(wire) {
                        Some(news) => open.push(news),
                        None => bad += 1,
                    }
                }
                replica.count_bad(bad);
                let at = replica.registry().now();
                replica.apply_open_at(&open, at);
                if self.shards.iter().all(|s| s.read) {
                    for s in &mut self.shards {
                        s.read = false;
                    }
                    replica.count_reconciled();
                }
            }
            Done::Tripped(trip, read_at, reply) => {
                self.in_flight -= 1;
                self.tripping.remove(&trip.key);
                match reply {
                    Some((bad, _news)) => {
                        replica.count_bad(bad);
                        replica.confirm(&trip, read_at);
                    }
                    None => {
                        let at = replica.registry().now();
                        replica.refused(&trip, at);
                    }
                }
            }
        }
    }

    /// A push from the connection: news to apply, or a lost subscription.
    fn on_push<K, S, C>(&mut self, replica: &mut Replica<K, S, C>, keys: &Keyspace, push: PushInfo)
    where
        K: Hash + Eq + for<'a> TryFrom<&'a str>,
        S: BuildHasher,
        C: Clock,
    {
        match push.kind {
            PushKind::SMessage => {
                let news = push
                    .data
                    .get(1)
                    .and_then(text)
                    .and_then(|w| News::decode(&w));
                match news {
                    Some(news) => {
                        let now = replica.registry().now();
                        replica.receive_at(&news, now);
                    }
                    None => replica.count_bad(1),
                }
            }
            // The connection dropped (it reconnects by itself): every shard
            // subscribes again, and reconciles for what was missed.
            PushKind::Disconnection => self.shards.iter_mut().for_each(ShardLink::lost),
            // The server dropped a subscription (its slot moved to another
            // node): that shard subscribes again (every shard, if the
            // channel is not one of ours).
            PushKind::SUnsubscribe => {
                let n = push
                    .data
                    .first()
                    .and_then(text)
                    .and_then(|c| keys.index_of_channel(&c));
                match n {
                    Some(n) => self.shards[usize::from(n)].lost(),
                    None => self.shards.iter_mut().for_each(ShardLink::lost),
                }
            }
            _ => {}
        }
    }
}
