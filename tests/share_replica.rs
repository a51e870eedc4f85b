//! A replica's rails, one at a time, on a [`ManualClock`] with the
//! in-process [`MemoryStore`]: `min_reporters`, an unreachable store, a
//! store restarted empty, a full registry, the open cap, and the outbox hook
//! of a keyed layer (which never echoes remote trips).

use std::collections::hash_map::RandomState;
use std::sync::Arc;
use std::time::Duration;

use failfast::share::{MemoryStore, News, Outbox, Replica, ReplicaBuilder};
use failfast::{Breaker, ManualClock, MaxOpen, Nanos, Reason, Registry, RegistryBuilder, State};

type Hosts = Registry<String, RandomState, ManualClock>;

struct Node {
    registry: Arc<Hosts>,
    outbox: Arc<Outbox>,
    replica: Replica<String, RandomState, ManualClock>,
}

fn node(
    clock: &ManualClock,
    name: &str,
    registry: impl FnOnce(RegistryBuilder<String>) -> RegistryBuilder<String>,
    replica: impl FnOnce(
        ReplicaBuilder<String, RandomState, ManualClock>,
    ) -> ReplicaBuilder<String, RandomState, ManualClock>,
) -> Node {
    let breakers = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(30));
    let registry = Arc::new(
        registry(Registry::<String>::builder(breakers))
            .build_with_clock(clock.clone())
            .unwrap(),
    );
    let outbox = Arc::new(Outbox::new(16));
    let replica = replica(Replica::builder(registry.clone(), outbox.clone()).origin(name))
        .build()
        .unwrap();
    Node {
        registry,
        outbox,
        replica,
    }
}

fn plain(clock: &ManualClock, name: &str) -> Node {
    node(clock, name, |r| r, |r| r)
}

impl Node {
    fn trip(&self, key: &str) {
        let t = self
            .registry
            .with(key, |b| b.try_acquire().unwrap().failure())
            .unwrap();
        assert!(self.outbox.report(key, &t));
    }

    fn state(&self, key: &str) -> State {
        self.registry.with(key, |b| b.state())
    }

    fn hear(&mut self, news: &[News]) -> usize {
        news.iter()
            .filter(|n| self.replica.receive(n).is_some())
            .count()
    }
}

#[test]
fn one_reporter_is_not_enough_when_two_are_required() {
    let clock = ManualClock::new();
    let mut store = MemoryStore::new(clock.clone());
    let two = |r: ReplicaBuilder<String, RandomState, ManualClock>| {
        r.min_reporters(2, Duration::from_secs(60))
    };
    let mut a = node(&clock, "a", |r| r, two);
    let mut b = node(&clock, "b", |r| r, two);
    let mut c = node(&clock, "c", |r| r, two);
    a.trip("db:1");
    let news = a.replica.publish_to(&mut store);
    assert_eq!(news[0].reporters, 1);
    assert_eq!(c.hear(&news), 0);
    assert_eq!(c.state("db:1"), State::Closed);
    assert_eq!(c.replica.stats().below_min_reporters(), 1);
    clock.advance(Duration::from_secs(1));
    b.trip("db:1");
    let news = b.replica.publish_to(&mut store);
    assert_eq!(news[0].reporters, 2);
    assert_eq!(c.hear(&news), 1);
    assert_eq!(c.state("db:1"), State::Open);
    // A, which tripped first, takes B's later end too.
    assert_eq!(a.hear(&news), 1);
}

#[test]
fn an_unreachable_store_is_counted_and_the_trip_is_sent_when_it_is_back() {
    let clock = ManualClock::new();
    let mut store = MemoryStore::new(clock.clone());
    let mut a = plain(&clock, "a");
    let mut b = plain(&clock, "b");
    store.set_reachable(false);
    a.trip("db:1");
    assert!(a.replica.publish_to(&mut store).is_empty());
    assert!(b.replica.reconcile_with(&mut store).is_err());
    assert_eq!(
        (a.replica.stats().errors(), b.replica.stats().errors()),
        (1, 1)
    );
    // The request path went on: A rejects locally.
    assert_eq!(a.state("db:1"), State::Open);
    clock.advance(Duration::from_secs(10));
    store.set_reachable(true);
    let news = a.replica.publish_to(&mut store);
    assert_eq!(news.len(), 1);
    assert_eq!(
        news[0].remaining,
        Duration::from_secs(20),
        "what is left, not the whole period"
    );
    assert_eq!(b.replica.reconcile_with(&mut store), Ok(1));
    assert_eq!(b.state("db:1"), State::Open);
    assert_eq!(a.replica.stats().published(), 1);
}

#[test]
fn a_store_restarted_empty_gets_the_open_trips_again() {
    let clock = ManualClock::new();
    let mut store = MemoryStore::new(clock.clone());
    let mut a = plain(&clock, "a");
    let mut b = plain(&clock, "b");
    a.trip("db:1");
    let first = a.replica.publish_to(&mut store);
    // Published once: a second publish sends nothing.
    assert!(a.replica.publish_to(&mut store).is_empty());
    clock.advance(Duration::from_millis(5));
    store.clear();
    a.replica.store_lost();
    let again = a.replica.publish_to(&mut store);
    assert_eq!(again.len(), 1);
    assert!(
        again[0].epoch > first[0].epoch,
        "epochs grow across the restart"
    );
    assert_eq!(b.replica.reconcile_with(&mut store), Ok(1));
    assert_eq!(b.state("db:1"), State::Open);
    // Once the period is over, nothing is sent again.
    clock.advance(Duration::from_secs(31));
    a.replica.store_lost();
    assert!(a.replica.publish_to(&mut store).is_empty());
}

#[test]
fn a_full_registry_does_not_open_its_shared_overflow_breaker() {
    let clock = ManualClock::new();
    // One shard, and the tracked key held: a full registry makes room by
    // evicting an unreferenced pristine entry of the new key's shard, so
    // with several shards (or the key let go) whether the news finds room
    // would depend on where the random hasher puts the two keys.
    let mut b = node(&clock, "b", |r| r.capacity(1).shards(1), |r| r);
    let known = b.registry.handle("known:1");
    known.try_acquire().unwrap().success();
    let news = News::new(
        "new:1",
        1,
        Duration::from_secs(30),
        1,
        Reason::FailureRate,
        "a",
    );
    assert!(b.replica.receive(&news).is_none());
    assert_eq!(b.replica.stats().ignored(), 1);
    assert!(
        b.registry.handle("other:1").try_acquire().is_ok(),
        "the overflow breaker admits"
    );
    assert!(known.is_tracked());
}

#[test]
fn remote_trips_respect_the_open_cap() {
    let clock = ManualClock::new();
    let mut b = node(&clock, "b", |r| r.max_open(MaxOpen::Count(1)), |r| r);
    for h in ["h1:1", "h2:1"] {
        b.registry.with(h, |br| br.try_acquire().unwrap().success());
    }
    for (i, h) in ["h1:1", "h2:1"].iter().enumerate() {
        let news = News::new(
            *h,
            i as u64 + 1,
            Duration::from_secs(30),
            1,
            Reason::FailureRate,
            "a",
        );
        b.replica.receive(&news);
    }
    assert_eq!(
        (b.state("h1:1"), b.state("h2:1")),
        (State::Open, State::Closed)
    );
    assert_eq!(b.registry.refused_trips(), 1);
}

#[test]
fn news_opens_until_the_receivers_now_plus_what_is_left() {
    let clock = ManualClock::starting_at(Nanos::from_secs(500));
    let mut b = plain(&clock, "b");
    let news = News::new(
        "db:1",
        9,
        Duration::from_millis(12_500),
        1,
        Reason::SlowCallRate,
        "a",
    );
    let t = b.replica.receive(&news).unwrap();
    assert_eq!(
        (t.from, t.to, t.reason),
        (State::Closed, State::Open, Reason::RemoteTrip)
    );
    let left = b
        .registry
        .with("db:1", |br| br.snapshot().retry_after)
        .unwrap();
    // Less B's own probe offset (under 10 % of what is left), rounded up to
    // the breaker's 16.8 ms unit.
    let offset = b.replica.probe_offset(&news);
    assert!(offset < Duration::from_millis(1_250), "{offset:?}");
    let end = Duration::from_millis(12_500) - offset;
    assert!(
        left >= end && left < end + Duration::from_millis(17),
        "{left:?} for {end:?}"
    );
    // A remote trip is not a local one: the outbox stays empty.
    assert!(!b.outbox.report("db:1", &t));
    assert!(b.outbox.is_empty());
}

#[cfg(feature = "tower")]
#[tokio::test(start_paused = true)]
async fn a_keyed_layers_hook_reports_local_trips_only() {
    use failfast::share::Store;
    use failfast::tower::KeyedLayer;
    use tower::{Layer, Service, ServiceExt};

    let registry = Arc::new(
        Registry::<String>::builder(Breaker::builder().consecutive_failures(1))
            .build()
            .unwrap(),
    );
    let outbox = Arc::new(Outbox::new(16));
    let mut svc = KeyedLayer::new(registry.clone())
        .key_fn(|req: &http::Request<()>| req.uri().host().map(str::to_owned))
        .on_transition(outbox.hook())
        .layer(tower::service_fn(|_req: http::Request<()>| async {
            Err::<(), _>(std::io::Error::other("down"))
        }));
    let req = || http::Request::get("http://db.example/").body(()).unwrap();
    let _ = svc.ready().await.unwrap().call(req()).await;
    assert_eq!(outbox.len(), 1, "the trip");
    let _ = svc.ready().await.unwrap().call(req()).await;
    assert_eq!(outbox.len(), 1, "a rejection is no transition");

    // A remote trip of another host, through a replica: nothing reported.
    let mut replica = Replica::builder(registry.clone(), outbox.clone())
        .origin("me")
        .build()
        .unwrap();
    let mut store = MemoryStore::new(failfast::QuantaClock::new());
    let news = News::new(
        "api.example",
        1,
        Duration::from_secs(30),
        1,
        Reason::FailureRate,
        "other",
    );
    assert!(replica.receive(&news).is_some());
    assert_eq!(outbox.len(), 1);
    // The layer's trip goes out through the replica.
    let published = replica.publish_to(&mut store);
    assert_eq!(published.len(), 1);
    assert_eq!(published[0].key, "db.example");
    assert_eq!(store.open_trips().unwrap().len(), 1);
}
