//! The sync task's loop: publish, receive, reconcile, and degrade to
//! local-only while Redis is away.

use core::hash::{BuildHasher, Hash};
use core::time::Duration;

use futures_util::stream::{self, StreamExt};
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio::time::{timeout, Instant, MissedTickBehavior};

use super::conn::Conn;
use super::RedisSync;
use crate::clock::Clock;
use crate::share::News;

/// The most trips published in one step: the step stays short, and what is
/// left goes out at the next (`flush_every` later).
const MAX_PER_STEP: usize = 1024;
/// Scripts in flight at once (pipelined on the multiplexed connection).
const IN_FLIGHT: usize = 64;
/// The first wait after a failed operation; it doubles up to `MAX_BACKOFF`.
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The task's view of its connection.
struct Link {
    conn: Option<Conn>,
    /// Subscribed to every shard's channel since the last failure.
    subscribed: bool,
    /// No operation before this (back-off after a failure).
    retry_at: Instant,
    backoff: Duration,
    reconcile_at: Instant,
}

impl Link {
    /// After a failed operation: wait, then subscribe again, publish every
    /// own trip again and reconcile (the store may have restarted).
    fn fail(&mut self) {
        self.subscribed = false;
        self.retry_at = Instant::now() + self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
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
    /// when Redis answers: subscribes (after connecting or any failure — and
    /// then reconciles and publishes every own open trip again), publishes
    /// the trips Redis does not have yet, and reconciles every
    /// `reconcile_every`. Messages are applied as they arrive. A failed or
    /// slow operation (longer than `timeout`) is counted in
    /// [`SyncStats::errors`](crate::share::SyncStats::errors) and retried
    /// after a back-off of 100 ms doubling to 5 s; the registry goes on
    /// local-only meanwhile.
    pub async fn run(mut self) {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let now = Instant::now();
        let mut link = Link {
            conn: None,
            subscribed: false,
            retry_at: now,
            backoff: MIN_BACKOFF,
            reconcile_at: now,
        };
        let mut flush = tokio::time::interval(self.flush_every);
        flush.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                Some(push) = rx.recv() => self.on_push(push, &mut link),
                _ = flush.tick() => self.step(&mut link, &tx).await,
            }
        }
    }

    /// One pass: outbox, connection, subscription, publishing, reconciliation.
    async fn step(&mut self, link: &mut Link, pushes: &UnboundedSender<PushInfo>) {
        self.replica.drain_outbox_at(self.replica.registry().now());
        if Instant::now() < link.retry_at {
            return;
        }
        match self.try_step(link, pushes).await {
            Ok(()) => link.backoff = MIN_BACKOFF,
            Err(()) => {
                self.replica.count_error();
                link.fail();
            }
        }
    }

    async fn try_step(
        &mut self,
        link: &mut Link,
        pushes: &UnboundedSender<PushInfo>,
    ) -> Result<(), ()> {
        let limit = self.timeout;
        if link.conn.is_none() {
            let conn = timeout(limit, Conn::open(&self.target, pushes.clone(), limit)).await;
            link.conn = Some(conn.map_err(drop)?.map_err(drop)?);
        }
        let Some(conn) = link.conn.as_mut() else {
            return Err(());
        };
        if !link.subscribed {
            for shard in self.keys.shards() {
                let channel = shard.channel();
                timeout(limit, conn.ssubscribe(&channel))
                    .await
                    .map_err(drop)?
                    .map_err(drop)?;
            }
            link.subscribed = true;
            self.replica.store_lost();
            link.reconcile_at = Instant::now();
        }
        let now = self.replica.registry().now();
        let due = self.replica.due_at(now);
        let (keys, scripts) = (&self.keys, &self.scripts);
        let sent: Vec<_> = stream::iter(due.into_iter().take(MAX_PER_STEP))
            .map(|trip| {
                let mut conn = conn.clone();
                async move {
                    let call = scripts.trip(&keys.shard_of(&trip.key), &trip);
                    let done = timeout(limit, conn.invoke::<Option<String>>(call)).await;
                    (trip, matches!(done, Ok(Ok(_))))
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        let mut failed = false;
        for (trip, ok) in &sent {
            if *ok {
                self.replica.confirm(trip, now);
            } else {
                failed = true;
            }
        }
        if failed {
            return Err(());
        }
        if Instant::now() >= link.reconcile_at {
            let mut open = Vec::new();
            for shard in self.keys.shards() {
                let call = self.scripts.open(&shard);
                let list: Vec<String> = timeout(limit, conn.invoke(call))
                    .await
                    .map_err(drop)?
                    .map_err(drop)?;
                for wire in list {
                    match News::decode(&wire) {
                        Some(news) => open.push(news),
                        None => self.replica.count_ignored(),
                    }
                }
            }
            let now = self.replica.registry().now();
            self.replica.reconciled_at(&open, now);
            link.reconcile_at = Instant::now() + self.reconcile_every;
        }
        Ok(())
    }

    /// A push from the connection: news to apply, or a lost subscription.
    fn on_push(&mut self, push: PushInfo, link: &mut Link) {
        match push.kind {
            PushKind::SMessage => {
                let news = push
                    .data
                    .get(1)
                    .and_then(text)
                    .and_then(|w| News::decode(&w));
                match news {
                    Some(news) => {
                        let now = self.replica.registry().now();
                        self.replica.receive_at(&news, now);
                    }
                    None => self.replica.count_ignored(),
                }
            }
            // The connection dropped (it reconnects by itself), or the server
            // dropped a subscription (its slot moved to another node):
            // subscribe again, and reconcile for what was missed meanwhile.
            PushKind::Disconnection | PushKind::SUnsubscribe => link.subscribed = false,
            _ => {}
        }
    }
}
