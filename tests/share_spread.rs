//! Probes spread without configuration: replicas that apply the same remote
//! trip at the same instant end its open period at different instants,
//! with the breakers' jitter at 0 (the guide's settings), by their own
//! probe offset — bounded, deterministic, never a longer period — while a
//! local trip keeps its exact period (the OPEN fast path is untouched).
//! On a [`ManualClock`], in process.

use std::collections::hash_map::RandomState;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use failfast::share::{
    News, Outbox, Replica, ReplicaBuilder, DEFAULT_PROBE_SPREAD, DEFAULT_PROBE_SPREAD_CAP,
};
use failfast::{Breaker, ManualClock, Nanos, Reason, Registry, State};

type Hosts = Registry<String, RandomState, ManualClock>;
type Tune = fn(
    ReplicaBuilder<String, RandomState, ManualClock>,
) -> ReplicaBuilder<String, RandomState, ManualClock>;

/// The breaker's open periods are stored in units of 2^24 ns, rounded up.
const UNIT: Duration = Duration::from_nanos(1 << 24);
const LEFT: Duration = Duration::from_secs(30);

struct Node {
    registry: Arc<Hosts>,
    outbox: Arc<Outbox>,
    replica: Replica<String, RandomState, ManualClock>,
}

/// A replica named `name` whose breakers have no jitter.
fn node(clock: &ManualClock, name: &str, tune: Tune) -> Node {
    let registry = Arc::new(
        Registry::<String>::builder(
            Breaker::builder()
                .consecutive_failures(1)
                .open_duration(LEFT)
                .jitter(0.0),
        )
        .build_with_clock(clock.clone())
        .unwrap(),
    );
    let outbox = Arc::new(Outbox::new(16));
    let replica = tune(Replica::builder(registry.clone(), outbox.clone()).origin(name))
        .build()
        .unwrap();
    Node {
        registry,
        outbox,
        replica,
    }
}

fn news(key: &str, epoch: u64, left: Duration) -> News {
    News::new(
        key,
        epoch,
        left,
        1,
        Reason::FailureRate,
        "origin-of-the-trip",
    )
}

impl Node {
    /// When the key's open period ends, from now.
    fn retry_after(&self, key: &str) -> Option<Duration> {
        self.registry.with(key, |b| b.snapshot().retry_after)
    }
}

/// `n` replicas, each applying the same news at the same instant: when each
/// ends the period, from that instant.
fn ends(n: usize, key: &str, tune: Tune) -> Vec<(Node, Duration)> {
    let clock = ManualClock::starting_at(Nanos::from_secs(1_000));
    let news = news(key, 42, LEFT);
    (0..n)
        .map(|i| {
            let mut r = node(&clock, &format!("checkout-{i}"), tune);
            let t = r.replica.receive(&news).expect("news applied");
            assert_eq!((t.from, t.to), (State::Closed, State::Open));
            let end = r.retry_after(key).unwrap();
            (r, end)
        })
        .collect()
}

#[test]
fn replicas_that_hear_the_same_trip_end_its_period_apart_without_jitter() {
    let range = LEFT
        .mul_f64(DEFAULT_PROBE_SPREAD)
        .min(DEFAULT_PROBE_SPREAD_CAP);
    assert_eq!(range, Duration::from_secs(3), "the documented default");
    let nodes = ends(8, "db:5432", |r| r);
    let all: Vec<Duration> = nodes.iter().map(|(_, end)| *end).collect();
    // Pairwise distinct...
    let distinct: HashSet<Duration> = all.iter().copied().collect();
    assert_eq!(distinct.len(), all.len(), "{all:?}");
    for (node, end) in &nodes {
        // ...each what is left less its own offset (rounded up to the
        // breaker's unit), the offset within the documented range...
        let offset = node.replica.probe_offset(&news("db:5432", 42, LEFT));
        assert!(offset < range, "{offset:?}");
        assert!(
            *end >= LEFT - offset && *end < LEFT - offset + UNIT,
            "{end:?} for an offset of {offset:?}"
        );
    }
    // ...and spread over it.
    let (first, last) = (all.iter().min().unwrap(), all.iter().max().unwrap());
    assert!(
        *last - *first > range / 2,
        "{all:?} cover more than half of {range:?}"
    );
}

#[test]
fn the_first_replica_to_probe_changes_from_key_to_key() {
    let firsts: HashSet<usize> = (0..12)
        .map(|k| {
            let nodes = ends(4, &format!("h{k}.example:443"), |r| r);
            (0..nodes.len())
                .min_by_key(|&i| nodes[i].1)
                .expect("four replicas")
        })
        .collect();
    assert!(firsts.len() >= 3, "first probers: {firsts:?}");
}

#[test]
fn the_offset_never_extends_a_period() {
    let clock = ManualClock::starting_at(Nanos::from_secs(1_000));
    let mut b = node(&clock, "b", |r| r);
    let mut unspread = node(&clock, "c", |r| r.probe_spread(0.0, Duration::ZERO));
    // A closed breaker opens for no longer than without the spread,
    // whatever the draw.
    for epoch in 1..200 {
        let key = format!("h{epoch}:80");
        let n = news(&key, epoch, LEFT);
        b.replica.receive(&n).unwrap();
        unspread.replica.receive(&n).unwrap();
        let (end, plain) = (
            b.retry_after(&key).unwrap(),
            unspread.retry_after(&key).unwrap(),
        );
        assert!(
            end <= plain && plain < LEFT + UNIT,
            "epoch {epoch}: {end:?}, {plain:?}"
        );
    }
    // An open period that the news ends a little later than, but its
    // offset earlier than: not extended.
    let t = b
        .registry
        .with("db:5432", |br| br.try_acquire().unwrap().failure())
        .unwrap();
    assert!(b.outbox.report("db:5432", &t));
    let local = b.retry_after("db:5432").unwrap();
    assert_eq!(local, LEFT, "a local trip keeps its exact period");
    let later = LEFT + Duration::from_millis(20);
    let epoch = (1..)
        .find(|e| b.replica.probe_offset(&news("db:5432", *e, later)) > Duration::from_millis(40))
        .unwrap();
    assert!(b.replica.receive(&news("db:5432", epoch, later)).is_none());
    assert_eq!(b.retry_after("db:5432"), Some(local), "not extended");
    // Much later: extended, to the news' end less the offset, never beyond.
    let much_later = LEFT * 2;
    let n = news("db:5432", epoch + 1, much_later);
    let offset = b.replica.probe_offset(&n);
    assert!(b.replica.receive(&n).is_some());
    let end = b.retry_after("db:5432").unwrap();
    assert!(end >= much_later - offset && end < much_later - offset + UNIT);
}

#[test]
fn the_spread_can_be_turned_off_and_bad_values_are_refused() {
    // Off: every replica ends where the news says (the behaviour without it).
    let nodes = ends(4, "db:5432", |r| {
        r.probe_spread(0.0, DEFAULT_PROBE_SPREAD_CAP)
    });
    for (_, end) in &nodes {
        assert!(*end >= LEFT && *end < LEFT + UNIT, "{end:?}");
    }
    let clock = ManualClock::new();
    let build = |fraction: f64, cap: Duration| {
        let registry = Arc::new(
            Registry::<String>::builder(Breaker::builder().consecutive_failures(1))
                .build_with_clock(clock.clone())
                .unwrap(),
        );
        Replica::builder(registry, Arc::new(Outbox::new(4)))
            .probe_spread(fraction, cap)
            .build()
            .map(|r| r.probe_spread())
    };
    let hour = Duration::from_secs(3_600);
    assert_eq!(build(0.5, hour).unwrap(), (0.5, hour));
    for (fraction, cap, field) in [
        (-0.01, hour, "probe_spread fraction"),
        (0.51, hour, "probe_spread fraction"),
        (f64::NAN, hour, "probe_spread fraction"),
        (0.1, hour + Duration::from_nanos(1), "probe_spread cap"),
    ] {
        assert_eq!(build(fraction, cap).unwrap_err().field(), field);
    }
}
