//! One replica for the Redis tests: its registry, its outbox and its
//! running sync task (aborted on drop), with the calls the tests make on it.

use std::sync::Arc;
use std::time::Duration;

use failfast::redis::RedisSyncBuilder;
use failfast::share::{Outbox, Replica, ReplicaBuilder, SyncStats};
use failfast::{Breaker, Builder, Registry, State};
use tokio::task::JoinHandle;

use super::within;

/// The breakers most tests use: one failure trips, open for 30 s.
pub fn breakers() -> Builder {
    Breaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(30))
}

/// One replica: its registry, its outbox, its running sync task.
pub struct Node {
    pub registry: Arc<Registry<String>>,
    pub outbox: Arc<Outbox>,
    pub stats: Arc<SyncStats>,
    task: JoinHandle<()>,
}

impl Drop for Node {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Node {
    /// A replica named `name` over `registry`, its replica builder tuned by
    /// `tune`, syncing through `sync`.
    pub fn start(
        sync: RedisSyncBuilder,
        name: &str,
        registry: Registry<String>,
        tune: impl FnOnce(ReplicaBuilder<String>) -> ReplicaBuilder<String>,
    ) -> Node {
        let registry = Arc::new(registry);
        let outbox = Arc::new(Outbox::new(16_384));
        let replica = tune(Replica::builder(registry.clone(), outbox.clone()).origin(name))
            .build()
            .unwrap();
        let sync = sync.build(replica).unwrap();
        let stats = sync.stats();
        Node {
            registry,
            outbox,
            stats,
            task: tokio::spawn(sync.run()),
        }
    }

    /// A replica of [`breakers`] with the replica's defaults.
    pub fn plain(sync: RedisSyncBuilder, name: &str) -> Node {
        let registry = Registry::<String>::builder(breakers()).build().unwrap();
        Node::start(sync, name, registry, |r| r)
    }

    /// One failed call to `key`, on the request path: the breaker trips and
    /// the verdict's transition goes into the outbox.
    pub fn trip(&self, key: &str) {
        let t = self
            .registry
            .with(key, |b| b.try_acquire().map(|p| p.failure()))
            .expect("admitted")
            .expect("tripped");
        assert!(self.outbox.report(key, &t));
    }

    /// One successful call to `key` (the registry's cap counts proven hosts).
    pub fn succeed(&self, key: &str) {
        self.registry
            .with(key, |b| b.try_acquire().map(|p| p.success()))
            .expect("admitted");
    }

    pub fn state(&self, key: &str) -> State {
        self.registry.with(key, |b| b.state())
    }

    /// How many of `keys` are open here.
    pub fn open(&self, keys: &[String]) -> usize {
        keys.iter().filter(|k| self.state(k) == State::Open).count()
    }

    pub fn retry_after(&self, key: &str) -> Option<Duration> {
        self.registry.with(key, |b| b.snapshot().retry_after)
    }

    /// Connected, subscribed, and every shard reconciled once, within 10 s.
    pub async fn ready(&self) {
        self.ready_within(Duration::from_secs(10)).await;
    }

    /// [`ready`](Self::ready) within `limit`.
    pub async fn ready_within(&self, limit: Duration) {
        let stats = self.stats.clone();
        let done = within(limit, move || stats.reconciled() >= 1).await;
        assert!(
            done.is_some(),
            "the sync task connects and reconciles: {:?}",
            self.stats
        );
    }
}
