//! **redis.** Trips shared through a three-node Redis Cluster on loopback
//! ports (started by the test, see `redis_server/`): scripts run on the node
//! that owns their shard's slot, sharded pub/sub delivers the news, a
//! replica started later reconciles every shard from every node, and a node
//! asleep holds back no shard of the others. Skipped, with a notice, where
//! `redis-server` is missing.

mod redis_server;

use std::time::Duration;

use failfast::redis::RedisSyncBuilder;
use redis_server::node::Node;
use redis_server::{shard_of, within, Cluster};

/// A replica syncing through `cluster`.
fn start(cluster: &Cluster, name: &str) -> Node {
    let sync = RedisSyncBuilder::cluster(cluster.urls())
        .reconcile_every(Duration::from_millis(500))
        .timeout(Duration::from_millis(500));
    Node::plain(sync, name)
}

/// How long a replica may take to connect to the cluster and reconcile.
const READY: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trips_travel_through_a_three_node_cluster() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let a = start(&cluster, "a");
    let b = start(&cluster, "b");
    a.ready_within(READY).await;
    b.ready_within(READY).await;

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
    let c = start(&cluster, "c");
    c.ready_within(READY).await;
    assert_eq!(c.open(&hosts), hosts.len());
    assert_eq!(c.stats.errors(), 0);
}

/// The node (index into `cluster.nodes`) that owns shard `n`'s slot (the
/// cluster splits the slots evenly, in node order).
fn node_of_shard(cluster: &Cluster, n: u16) -> usize {
    let slot: u64 = cluster.nodes[0].query(
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(format!("{{failfast:{n}}}:open")),
    );
    match slot {
        0..=5460 => 0,
        5461..=10922 => 1,
        _ => 2,
    }
}

/// A key whose shard (of the default 16) lives on node `node`, or not.
fn key_on(cluster: &Cluster, prefix: &str, node: usize, on: bool) -> String {
    (0..)
        .map(|i| format!("{prefix}{i}:443"))
        .find(|k| (node_of_shard(cluster, shard_of(k, 16)) == node) == on)
        .expect("keys land on every node")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_asleep_holds_back_no_shard_of_the_others() {
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let a = start(&cluster, "a");
    let b = start(&cluster, "b");
    a.ready_within(READY).await;
    b.ready_within(READY).await;
    let (asleep, awake) = (
        key_on(&cluster, "asleep", 0, true),
        key_on(&cluster, "awake", 0, false),
    );

    // Node 0 sleeps 1.5 s (under the 2 s node timeout: no failover).
    let sleeper = cluster.nodes[0].sleep(1.5).await;

    // A trip whose script waits on the sleeping node...
    a.trip(&asleep);
    tokio::time::sleep(Duration::from_millis(20)).await;
    // ...holds back no trip of another node's shard.
    a.trip(&awake);
    let took = within(Duration::from_secs(3), || {
        b.open(std::slice::from_ref(&awake)) == 1
    })
    .await
    .expect("B opens the awake node's key");
    assert!(took < Duration::from_millis(50), "B opened after {took:?}");
    assert!(!sleeper.is_finished(), "all of it while node 0 slept");
    sleeper.join().unwrap();
    // Once the node wakes, the first trip goes out too.
    within(Duration::from_secs(10), || {
        b.open(std::slice::from_ref(&asleep)) == 1
    })
    .await
    .expect("B opens the sleeping node's key after it wakes");
}
