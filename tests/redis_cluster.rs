//! **redis.** Trips shared through a three-node Redis Cluster on loopback
//! ports (started by the test, see `redis_server/`): scripts run on the node
//! that owns their shard's slot, sharded pub/sub delivers the news, and a
//! replica started later reconciles every shard from every node. Skipped,
//! with a notice, where `redis-server` is missing.

mod redis_server;

use std::sync::Arc;
use std::time::Duration;

use failfast::redis::RedisSyncBuilder;
use failfast::share::{Outbox, Replica, SyncStats};
use failfast::{Breaker, Registry, State};
use redis_server::{within, Cluster};
use tokio::task::JoinHandle;

struct Node {
    registry: Arc<Registry<String>>,
    outbox: Arc<Outbox>,
    stats: Arc<SyncStats>,
    task: JoinHandle<()>,
}

impl Drop for Node {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Node {
    fn start(cluster: &Cluster, name: &str) -> Node {
        let registry = Arc::new(
            Registry::<String>::builder(
                Breaker::builder()
                    .consecutive_failures(1)
                    .open_duration(Duration::from_secs(30)),
            )
            .build()
            .unwrap(),
        );
        let outbox = Arc::new(Outbox::new(1024));
        let replica = Replica::builder(registry.clone(), outbox.clone())
            .origin(name)
            .build()
            .unwrap();
        let sync = RedisSyncBuilder::cluster(cluster.urls())
            .reconcile_every(Duration::from_millis(500))
            .timeout(Duration::from_millis(500))
            .build(replica)
            .unwrap();
        let stats = sync.stats();
        Node {
            registry,
            outbox,
            stats,
            task: tokio::spawn(sync.run()),
        }
    }

    fn trip(&self, key: &str) {
        let t = self
            .registry
            .with(key, |b| b.try_acquire().map(|p| p.failure()))
            .expect("admitted")
            .expect("tripped");
        assert!(self.outbox.report(key, &t));
    }

    fn open(&self, keys: &[String]) -> usize {
        keys.iter()
            .filter(|k| self.registry.with(k.as_str(), |b| b.state()) == State::Open)
            .count()
    }

    async fn ready(&self) {
        let stats = self.stats.clone();
        within(Duration::from_secs(15), move || stats.reconciled() >= 1)
            .await
            .expect("connected to the cluster and reconciled");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trips_travel_through_a_three_node_cluster() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let a = Node::start(&cluster, "a");
    let b = Node::start(&cluster, "b");
    a.ready().await;
    b.ready().await;

    // One trip: pub/sub on the shard's node.
    a.trip("first:443");
    let took = within(Duration::from_secs(2), || {
        b.open(&["first:443".into()]) == 1
    })
    .await
    .expect("B opens");
    assert!(took < Duration::from_millis(50), "B opened after {took:?}");

    // A hundred, over every shard: every node holds some of them.
    let hosts: Vec<String> = (0..100).map(|i| format!("h{i}.example:443")).collect();
    for h in &hosts {
        a.trip(h);
    }
    within(Duration::from_secs(5), || b.open(&hosts) == hosts.len())
        .await
        .expect("B opens all of them");
    let per_node: Vec<u64> = cluster.nodes.iter().map(|n| n.dbsize()).collect();
    assert_eq!(
        per_node.iter().filter(|n| **n > 0).count(),
        3,
        "keys on every node: {per_node:?}"
    );

    // A replica started now learns all of them from every node's indexes.
    let c = Node::start(&cluster, "c");
    c.ready().await;
    assert_eq!(c.open(&hosts), hosts.len());
    assert_eq!(c.stats.errors(), 0);
}
