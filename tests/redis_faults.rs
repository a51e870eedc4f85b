//! **redis.** Faults stay local: junk written under the store's keys and
//! channels — records with a field missing or malformed, keys of the wrong
//! Redis type, garbage pub/sub messages — and a shard the server refuses
//! are set aside, counted (`SyncStats::bad_records`, `errors`) and never
//! fatal: every other key and shard goes on sharing within its normal
//! latency (B rejects within 50 ms of A's trip, as in `redis_sync.rs`).
//! Against a real `redis-server` (started by the test on a unix socket, see
//! `redis_server/`); skipped, with a notice, where it is missing.

#![cfg(feature = "redis")]

mod redis_server;

use std::time::Duration;

use failfast::redis::RedisSyncBuilder;
use failfast::State;
use redis_server::node::Node;
use redis_server::{key_in_shard, within, Server};

/// What "its normal latency" means here: the bound `redis_sync.rs` holds
/// a healthy store to.
const NORMAL: Duration = Duration::from_millis(50);

/// A trip on `a` opens `key` on `b` within the normal latency.
async fn shares(a: &Node, b: &Node, key: &str) {
    a.trip(key);
    let took = within(Duration::from_secs(3), || b.state(key) == State::Open).await;
    let took = took.unwrap_or_else(|| panic!("B opens {key}: A {:?}, B {:?}", a.stats, b.stats));
    assert!(took < NORMAL, "B opened {key} after {took:?}");
}

fn sync_to(url: &str, shards: u16) -> RedisSyncBuilder {
    RedisSyncBuilder::new(url)
        .shards(shards)
        .reconcile_every(Duration::from_millis(500))
        .timeout(Duration::from_millis(200))
}

/// The server's clock, in milliseconds (`TIME`).
fn server_ms(server: &Server) -> u64 {
    let (s, us): (u64, u64) = server.query(&redis::cmd("TIME"));
    s * 1000 + us / 1000
}

/// Writes `fields` as the record of `key` in shard 0 and indexes it as open
/// for 20 s more.
fn junk_record(server: &Server, key: &str, fields: &[(&str, &str)]) {
    let mut hset = redis::cmd("HSET");
    hset.arg(format!("{{failfast:0}}:trip:{key}"));
    for (f, v) in fields {
        hset.arg(*f).arg(*v);
    }
    let _: () = server.query(&hset);
    index(server, key, &(server_ms(server) + 20_000).to_string());
}

/// Lists `key` in shard 0's index with `score`.
fn index(server: &Server, key: &str, score: &str) {
    let _: () = server.query(
        redis::cmd("ZADD")
            .arg("{failfast:0}:open")
            .arg(score)
            .arg(key),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_records_are_skipped_counted_and_the_rest_shares_on_time() {
    let Some(server) = Server::start() else {
        return;
    };
    let until = (server_ms(&server) + 20_000).to_string();
    let whole = |epoch: &'static str| {
        [
            ("epoch", epoch),
            ("until", "0"),
            ("reporters", "1"),
            ("reason", "failure_rate"),
            ("origin", "elsewhere"),
        ]
    };
    // A record of every kind of wrong, each listed in the index as open.
    let mut no_reason = whole("7").to_vec();
    no_reason.retain(|(f, _)| *f != "reason");
    junk_record(&server, "no-reason:80", &no_reason);
    let mut no_until = whole("7").to_vec();
    no_until.retain(|(f, _)| *f != "until");
    junk_record(&server, "no-until:80", &no_until);
    junk_record(&server, "epoch-text:80", &whole("seven"));
    let mut bad_reason = whole("7");
    bad_reason[3].1 = "tuesday";
    junk_record(&server, "bad-reason:80", &bad_reason);
    let mut bad_origin = whole("7");
    bad_origin[4].1 = "a|b";
    junk_record(&server, "bad-origin:80", &bad_origin);
    let _: () = server.query(
        redis::cmd("SET")
            .arg("{failfast:0}:trip:a-string:80")
            .arg("x"),
    );
    index(&server, "a-string:80", &until);
    index(&server, "", &until);
    index(&server, "forever:80", "+inf");
    const BAD: u64 = 8;
    // And one good record among them.
    junk_record(&server, "good:80", &whole("7"));

    // B reconciles on connect: it skips the junk and opens the good one.
    let b = Node::plain(sync_to(&server.url(), 1), "b");
    b.ready().await;
    assert_eq!(b.state("good:80"), State::Open);
    assert_eq!(b.state("a-string:80"), State::Closed);
    assert_eq!((b.stats.bad_records(), b.stats.errors()), (BAD, 0));

    // New trips share within the normal latency, junk keys' too: a trip
    // replaces a bad record of its key.
    let a = Node::plain(sync_to(&server.url(), 1), "a");
    a.ready().await;
    shares(&a, &b, "fresh:80").await;
    for key in ["no-until:80", "a-string:80", "epoch-text:80"] {
        shares(&a, &b, key).await;
    }
    assert_eq!(a.stats.bad_records(), 3, "the three records A replaced");
    // Skipped junk leaves the index: later rounds count nothing more.
    let rounds = b.stats.reconciled();
    let stats = b.stats.clone();
    within(Duration::from_secs(3), move || {
        stats.reconciled() >= rounds + 2
    })
    .await
    .expect("B goes on reconciling");
    assert_eq!(b.stats.bad_records(), BAD);
    assert_eq!((a.stats.errors(), b.stats.errors()), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_of_the_wrong_redis_type_are_replaced() {
    let Some(server) = Server::start() else {
        return;
    };
    // The shard's index a list, a key's reporters a string, its record a set.
    let _: () = server.query(redis::cmd("RPUSH").arg("{failfast:0}:open").arg("x"));
    let _: () = server.query(redis::cmd("SET").arg("{failfast:0}:rep:db:5432").arg("x"));
    let _: () = server.query(redis::cmd("SADD").arg("{failfast:0}:trip:db:5432").arg("x"));
    let a = Node::plain(sync_to(&server.url(), 1), "a");
    let b = Node::plain(sync_to(&server.url(), 1), "b");
    a.ready().await;
    b.ready().await;
    shares(&a, &b, "db:5432").await;
    shares(&a, &b, "other:80").await;
    // Each wrong key counted once, by whichever replica met it first.
    assert_eq!(a.stats.bad_records() + b.stats.bad_records(), 3);
    assert_eq!((a.stats.errors(), b.stats.errors()), (0, 0));
    // A replica started now reconciles both from the rebuilt index.
    let c = Node::plain(sync_to(&server.url(), 1), "c");
    c.ready().await;
    assert_eq!(
        (c.state("db:5432"), c.state("other:80")),
        (State::Open, State::Open)
    );
    assert_eq!(c.stats.bad_records(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_the_channel_is_counted_and_news_flows() {
    let Some(server) = Server::start() else {
        return;
    };
    let a = Node::plain(sync_to(&server.url(), 1), "a");
    let b = Node::plain(sync_to(&server.url(), 1), "b");
    a.ready().await;
    b.ready().await;
    let garbage: [&[u8]; 8] = [
        b"",
        b"|||||",
        b"1|2|3",
        b"x|10000|1|failure_rate|o|k:80",
        b"99999999999999999999|10000|1|failure_rate|o|k:80",
        b"1|10000|1|failure_rate||k:80",
        b"1|10000|1|no_such_reason|o|k:80",
        b"\xff\xfe|10000|1|failure_rate|o|k:80",
    ];
    for g in garbage {
        let _: u64 = server.query(redis::cmd("SPUBLISH").arg("{failfast:0}:trips").arg(g));
    }
    // Behind the garbage on the same channel, a real trip.
    shares(&a, &b, "after:80").await;
    assert_eq!(b.stats.bad_records(), garbage.len() as u64);
    assert_eq!(b.state("k:80"), State::Closed);
    assert_eq!((b.stats.ignored(), b.stats.errors()), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_the_server_refuses_holds_back_no_other() {
    let Some(server) = Server::start() else {
        return;
    };
    // A user that may touch shard 0 only: shard 1's scripts and
    // subscription fail (NOPERM), as a shard on a failing node would.
    let _: () = server.query(
        redis::cmd("ACL")
            .arg("SETUSER")
            .arg("limited")
            .arg("on")
            .arg(">pw")
            .arg("+@all")
            .arg("resetkeys")
            .arg("~{failfast:0}:*")
            .arg("resetchannels")
            .arg("&{failfast:0}:trips"),
    );
    let url = format!("{}?user=limited&pass=pw", server.url());
    let a = Node::plain(sync_to(&url, 2), "a");
    let b = Node::plain(sync_to(&url, 2), "b");
    let subscribed = || {
        let counts: Vec<redis::Value> = server.query(
            redis::cmd("PUBSUB")
                .arg("SHARDNUMSUB")
                .arg("{failfast:0}:trips"),
        );
        matches!(counts.get(1), Some(redis::Value::Int(2)))
    };
    within(Duration::from_secs(5), subscribed)
        .await
        .expect("both replicas subscribe to shard 0");
    let (k0, k1) = (key_in_shard("ok", 0, 2), key_in_shard("refused", 1, 2));
    shares(&a, &b, &k0).await;
    // A trip the server refuses is retried on its own...
    a.trip(&k1);
    let errors = a.stats.clone();
    within(Duration::from_secs(3), move || errors.errors() >= 3)
        .await
        .expect("the refusals are counted");
    // ...and holds back no other trip.
    shares(&a, &b, &key_in_shard("ok-later", 0, 2)).await;
    assert_eq!(b.state(&k1), State::Closed);
    assert!(b.stats.errors() >= 1, "B's shard 1 fails too");
    // The server lets shard 1 in: A's trip goes out, B hears it.
    let _: () = server.query(
        redis::cmd("ACL")
            .arg("SETUSER")
            .arg("limited")
            .arg("allkeys")
            .arg("allchannels"),
    );
    within(Duration::from_secs(12), || b.state(&k1) == State::Open)
        .await
        .expect("shard 1 recovers on its own back-off");
}
