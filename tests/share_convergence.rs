//! Trip sharing across three replicas through the in-process
//! [`MemoryStore`], on one [`ManualClock`], under random interleavings: local
//! trips, publishing, and a network that reorders, duplicates, delays and
//! drops messages, a store that goes away and one that restarts empty.
//!
//! Checked on every message: a remote message never closes a breaker, never
//! half-opens one, never shortens an open period, never touches a probe
//! round, and reports only
//! Closed/Open → Open with `Reason::RemoteTrip`; a duplicate or older epoch
//! changes nothing. Checked at the end, after one publish and one
//! reconciliation per replica: every replica's open period of every host
//! ends where the store says, within the jitter and the replica's probe
//! spread — never later, but for the delay of a message that arrived late
//! (a message carries the time left when it was sent).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use failfast::share::{
    MemoryStore, News, Outbox, Replica, Store, DEFAULT_PROBE_SPREAD, DEFAULT_PROBE_SPREAD_CAP,
};
use failfast::{Breaker, Clock, ManualClock, Nanos, Reason, Registry, State};
use proptest::prelude::*;

const HOSTS: [&str; 3] = ["db:5432", "api:443", "cache:6379"];
const JITTER: f64 = 0.1;
/// The breaker's open periods are stored in units of 2^24 ns, rounded up.
const UNIT: Duration = Duration::from_nanos(1 << 24);

#[derive(Clone, Debug)]
enum Op {
    /// Replica `r`'s next call to host `h` fails.
    Trip(usize, usize),
    /// Replica `r` hands its trips to the store; the news goes on the wire.
    Publish(usize),
    /// The message at this index (modulo) reaches replica `r`; it stays on
    /// the wire (a later delivery is a duplicate).
    Deliver(usize, usize),
    /// The message at this index is lost.
    Lose(usize),
    /// Time moves on; what is in flight is lost.
    Advance(u64),
    /// Time moves on; what is in flight arrives late, if at all.
    Delay(u64),
    /// Replica `r` reconciles.
    Reconcile(usize),
    /// The store goes away or comes back.
    Reachable(bool),
    /// The store restarts empty (1 ms later); the replicas notice.
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3usize, 0..HOSTS.len()).prop_map(|(r, h)| Op::Trip(r, h)),
        3 => (0..3usize).prop_map(Op::Publish),
        5 => (any::<usize>(), 0..3usize).prop_map(|(m, r)| Op::Deliver(m, r)),
        1 => any::<usize>().prop_map(Op::Lose),
        2 => (1..200u64).prop_map(Op::Advance),
        1 => (1..200u64).prop_map(Op::Delay),
        1 => (0..3usize).prop_map(Op::Reconcile),
        1 => any::<bool>().prop_map(Op::Reachable),
        1 => Just(Op::Restart),
    ]
}

struct Node {
    registry: Arc<Registry<String, std::collections::hash_map::RandomState, ManualClock>>,
    outbox: Arc<Outbox>,
    replica: Replica<String, std::collections::hash_map::RandomState, ManualClock>,
    /// Per host: the newest epoch received, and the longest delay of a
    /// message that changed the breaker.
    heard: HashMap<String, (u64, Duration)>,
}

fn node(clock: &ManualClock, name: &str, open: Duration) -> Node {
    let registry = Arc::new(
        Registry::<String>::builder(
            Breaker::builder()
                .consecutive_failures(1)
                .open_duration(open)
                .jitter(JITTER),
        )
        .build_with_clock(clock.clone())
        .unwrap(),
    );
    let outbox = Arc::new(Outbox::new(64));
    let replica = Replica::builder(registry.clone(), outbox.clone())
        .origin(name)
        .build()
        .unwrap();
    Node {
        registry,
        outbox,
        replica,
        heard: HashMap::new(),
    }
}

/// Applies `news`, sent `delay` ago, to `n` and checks the merge's promises.
fn receive(n: &mut Node, news: &News, delay: Duration) -> Result<(), TestCaseError> {
    let before = n
        .registry
        .with(news.key.as_str(), |b| (b.state(), b.snapshot().retry_after));
    let t = n.replica.receive(news);
    let after = n
        .registry
        .with(news.key.as_str(), |b| (b.state(), b.snapshot().retry_after));
    let heard = n.heard.entry(news.key.clone()).or_default();
    if news.epoch <= heard.0 {
        // A duplicate or an older message: nothing changes.
        prop_assert!(
            t.is_none() && after == before,
            "epoch {} after {}: {:?}",
            news.epoch,
            heard.0,
            t
        );
    }
    heard.0 = heard.0.max(news.epoch);
    if let Some(t) = t {
        prop_assert_eq!(t.reason, Reason::RemoteTrip);
        prop_assert_eq!(t.to, State::Open);
        prop_assert!(matches!(t.from, State::Closed | State::Open), "{:?}", t);
        heard.1 = heard.1.max(delay);
    }
    match before.0 {
        State::Closed => prop_assert!(matches!(after.0, State::Closed | State::Open)),
        State::Open => {
            prop_assert_eq!(
                after.0,
                State::Open,
                "a remote message closed or half-opened it"
            );
            prop_assert!(
                after.1 >= before.1,
                "shortened: {:?} → {:?}",
                before.1,
                after.1
            );
        }
        other => prop_assert_eq!(after.0, other, "a remote message touched a probe round"),
    }
    Ok(())
}

proptest! {
    #[test]
    fn every_interleaving_converges_and_nothing_remote_closes(
        ops in proptest::collection::vec(op(), 1..80),
        open_s in 20u64..120,
    ) {
        let clock = ManualClock::starting_at(Nanos::from_secs(1_000));
        let mut store = MemoryStore::new(clock.clone());
        let open = Duration::from_secs(open_s);
        let mut nodes: Vec<Node> = ["a", "b", "c"].iter().map(|n| node(&clock, n, open)).collect();
        let mut wire: Vec<(News, Nanos)> = Vec::new();
        let mut elapsed = Duration::ZERO;
        for op in ops {
            match op {
                Op::Trip(r, h) => {
                    let n = &nodes[r];
                    let t = n.registry.with(HOSTS[h], |b| b.try_acquire().ok().and_then(|p| p.failure()));
                    if let Some(t) = t {
                        n.outbox.report(HOSTS[h], &t);
                    }
                }
                Op::Publish(r) => {
                    let now = clock.now();
                    wire.extend(nodes[r].replica.publish_to(&mut store).into_iter().map(|n| (n, now)));
                }
                Op::Deliver(m, r) if !wire.is_empty() => {
                    let (news, sent) = wire[m % wire.len()].clone();
                    receive(&mut nodes[r], &news, clock.now().saturating_duration_since(sent))?;
                }
                Op::Lose(m) if !wire.is_empty() => {
                    wire.remove(m % wire.len());
                }
                Op::Advance(ms) => {
                    clock.advance(Duration::from_millis(ms));
                    elapsed += Duration::from_millis(ms);
                    wire.clear();
                }
                Op::Delay(ms) => {
                    clock.advance(Duration::from_millis(ms));
                    elapsed += Duration::from_millis(ms);
                }
                Op::Reconcile(r) => {
                    if let Ok(open) = store.open_trips() {
                        for news in &open {
                            receive(&mut nodes[r], news, Duration::ZERO)?;
                        }
                    }
                }
                Op::Reachable(up) => store.set_reachable(up),
                Op::Restart => {
                    clock.advance(Duration::from_millis(1));
                    elapsed += Duration::from_millis(1);
                    wire.clear();
                    store.clear();
                    for n in &mut nodes {
                        n.replica.store_lost();
                    }
                }
                _ => {}
            }
        }
        // Nothing reached its period's end: the test is about merges, not probes.
        prop_assume!(
            elapsed < open.mul_f64(1.0 - JITTER - DEFAULT_PROBE_SPREAD) - Duration::from_secs(1)
        );
        store.set_reachable(true);
        for n in &mut nodes {
            let _ = n.replica.publish_to(&mut store);
        }
        let open_now = store.open_trips().unwrap();
        for n in &mut nodes {
            for news in &open_now {
                receive(n, news, Duration::ZERO)?;
            }
        }
        for host in HOSTS {
            let left = open_now.iter().find(|n| n.key == host).map(|n| n.remaining);
            for (i, n) in nodes.iter().enumerate() {
                let (state, retry) = n.registry.with(host, |b| (b.state(), b.snapshot().retry_after));
                match left {
                    None => prop_assert_eq!(state, State::Closed, "replica {} {}", i, host),
                    Some(left) => {
                        prop_assert_eq!(state, State::Open, "replica {} {}", i, host);
                        let retry = retry.unwrap();
                        // Never later than the store's end (rounding aside), but
                        // for a message that arrived late (by its delay)...
                        let late = n.heard.get(host).map_or(Duration::ZERO, |h| h.1);
                        prop_assert!(retry <= left + late + UNIT + Duration::from_millis(1),
                            "replica {} {}: {:?} > {:?}", i, host, retry, left);
                        // ...and earlier by at most its jitter and its spread
                        // (each a share of what was left when it heard).
                        let heard_left = left + elapsed;
                        let spread = heard_left.mul_f64(DEFAULT_PROBE_SPREAD).min(DEFAULT_PROBE_SPREAD_CAP);
                        let floor = left.saturating_sub(heard_left.mul_f64(JITTER) + spread + UNIT + Duration::from_millis(1));
                        prop_assert!(retry >= floor, "replica {} {}: {:?} < {:?}", i, host, retry, floor);
                    }
                }
            }
        }
    }
}
