//! Model-based test of a replica's bookkeeping: a plain sequential reference
//! model of what a [`Replica`] remembers and counts, and the real replica
//! over a [`MemoryStore`], driven by the same random operation sequences on
//! one [`ManualClock`].
//!
//! The operations: local calls whose trips the request path reports to the
//! [`Outbox`] (first trips, and re-trips after a failed probe), publishing,
//! other replicas' trips recorded in the store, news delivered late,
//! twice, out of order or forged (an older or newer epoch, nothing left,
//! this replica's own name), reconciliation, a store that is unreachable,
//! and a store lost (restarted empty, or failed over) that the replica is
//! told of. The clock also jumps to the edges the bookkeeping turns on: an
//! own trip's end and an applied epoch's forgetting time, ±1 ms.
//!
//! # What is modelled
//!
//! * **The outbox**: what [`Outbox::report`] keeps (a local trip: a
//!   transition to Open whose reason is not `RemoteTrip`), in order, up to
//!   its capacity, and what it drops ([`Outbox::dropped`]).
//! * **Own trips**: publishing drains the outbox into the table of own
//!   trips — a key's later end replaces its entry, *unpublished* again (a
//!   re-trip after a failed probe must reach the store even when the key
//!   was published before); then trips that ended are forgotten; then every
//!   unpublished one goes to the store with what is left of it (checked
//!   trip by trip: key, time left, reason, origin, window, slack), and is
//!   marked published once the store took it. An unreachable store takes
//!   one attempt, counts an error and keeps everything unpublished; a store
//!   lost makes every own trip unpublished again.
//! * **Applied epochs**: news passes the filters in their order (fewer
//!   reporters than `min_reporters`; an epoch not newer than the last
//!   applied for the key; this replica's own open trip coming back with no
//!   other reporter or no later end, which counts as applied; nothing left),
//!   and the epoch of news that passes is remembered until its period's end
//!   plus the slack, forgotten only by a reconciliation after that.
//! * **The counters** of [`SyncStats`](failfast::share::SyncStats):
//!   published, errors, received, stale, below `min_reporters`, ignored,
//!   reconciled, dropped, and applied (the news that returned a transition).
//!
//! # What is not, and why
//!
//! * **The store's rules** (epochs, reporters, expiry): `MemoryStore`'s own
//!   unit tests and `redis_store_rules.rs`. The model takes the store's news
//!   as they come and predicts what the replica does with them.
//! * **What a merge does to a breaker**, once news passed the filters: the
//!   breaker's (`tests/model.rs`, `share_convergence.rs`). The model checks
//!   that filtered news returns no transition, and that a merge's transition
//!   is a remote trip to Open; when a local trip ends is learned from its
//!   transition (jitter included).
//! * **A full registry** (the overflow breaker is never opened by news:
//!   `share_replica.rs`), the open cap (`share_replica.rs`, the loom
//!   models), and the redis task (its own tests).
//!
//! It catches two deliberate bugs of the catalogue (`loom-tests/bugs/`):
//! `replica-forgets-early` and `retrip-not-republished`.
//!
//! # Running
//!
//! `cargo test --test replica_model` runs the in-code default of 64 cases;
//! CI sets `PROPTEST_CASES=1000`. Failures are persisted next to this file,
//! in `tests/replica_model.proptest-regressions` (commit it).

use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use failfast::share::{LocalTrip, MemoryStore, News, Outbox, Replica, Store, Unreachable};
use failfast::{Breaker, Clock, ManualClock, Nanos, Outcome, Reason, Registry, State, Transition};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config as ProptestConfig;
use proptest_state_machine::{prop_state_machine, ReferenceStateMachine, StateMachineTest};

type Hosts = Registry<String, RandomState, ManualClock>;

const HOSTS: [&str; 3] = ["db:5432", "api:443", "cache:6379"];
/// This replica's name, and the other replicas'.
const ME: &str = "me";
const OTHERS: [&str; 2] = ["a", "b"];
/// The most undelivered news kept on the wire (the oldest goes first).
const WIRE: usize = 12;
const MS: u64 = 1_000_000;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

// ---------------------------------------------------------------------------
// The configuration
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct Spec {
    /// The breakers' base open duration (×2 per trip in a row, up to ×4).
    open_ms: u64,
    jitter: f64,
    outbox: usize,
    min_reporters: u32,
    window_ms: u64,
    slack_ms: u64,
}

fn spec_strategy() -> impl Strategy<Value = Spec> {
    (
        500u64..=4_000,
        prop_oneof![Just(0.0), Just(0.2)],
        1usize..=4,
        prop_oneof![3 => Just(1u32), 1 => Just(2)],
        1_000u64..=20_000,
        prop_oneof![1 => Just(0u64), 4 => 1u64..=5_000],
    )
        .prop_map(
            |(open_ms, jitter, outbox, min_reporters, window_ms, slack_ms)| Spec {
                open_ms,
                jitter,
                outbox,
                min_reporters,
                window_ms,
                slack_ms,
            },
        )
}

// ---------------------------------------------------------------------------
// The operations
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Edge {
    /// The end of an own trip the model knows.
    OwnEnd,
    /// When an applied epoch may be forgotten.
    Forget,
}

#[derive(Clone, Debug)]
enum Op {
    Advance(u64),
    /// To an edge, nudged by −1, 0 or +1 ms (never backwards).
    ToEdge(Edge, Index, i64),
    /// A local call to a host, through the registry; a trip goes to the outbox.
    Call(usize, bool),
    Publish,
    /// Another replica's trip, recorded in the store: its news goes on the wire.
    Remote {
        host: usize,
        other: usize,
        remaining_ms: u64,
    },
    /// News on the wire reaches the replica; `keep` leaves it there (a later
    /// delivery is a duplicate).
    Deliver(Index, bool),
    /// News made up by the test: an epoch one below, at or above the last
    /// the model applied for the host (or 1), any time left (0 too), 1 to 3
    /// reporters, from this replica's name or another's.
    Forge {
        host: usize,
        epoch: i64,
        remaining_ms: u64,
        reporters: u32,
        mine: bool,
    },
    Reconcile,
    Reachable(bool),
    /// The store is lost (emptied if `clear`, else failed over with its
    /// records) and the replica is told.
    StoreLost(bool),
}

fn op_strategy() -> BoxedStrategy<Op> {
    let host = 0..HOSTS.len();
    prop_oneof![
        6 => prop_oneof![3 => 0u64..=100, 2 => 0u64..=3_000, 1 => 0u64..=15_000]
            .prop_map(Op::Advance),
        6 => (
            prop_oneof![Just(Edge::OwnEnd), Just(Edge::Forget)],
            any::<Index>(),
            -1i64..=1
        )
            .prop_map(|(e, i, n)| Op::ToEdge(e, i, n)),
        10 => (host.clone(), prop::bool::weighted(0.7)).prop_map(|(h, fail)| Op::Call(h, fail)),
        6 => Just(Op::Publish),
        4 => (host.clone(), 0..OTHERS.len(), 1u64..=10_000)
            .prop_map(|(host, other, remaining_ms)| Op::Remote { host, other, remaining_ms }),
        10 => (any::<Index>(), any::<bool>()).prop_map(|(i, keep)| Op::Deliver(i, keep)),
        2 => (
            host,
            -1i64..=1,
            prop_oneof![1 => Just(0u64), 3 => 1u64..=6_000],
            1u32..=3,
            any::<bool>()
        )
            .prop_map(|(host, epoch, remaining_ms, reporters, mine)| Op::Forge {
                host,
                epoch,
                remaining_ms,
                reporters,
                mine,
            }),
        4 => Just(Op::Reconcile),
        2 => any::<bool>().prop_map(Op::Reachable),
        1 => any::<bool>().prop_map(Op::StoreLost),
    ]
    .boxed()
}

struct Ops;

impl ReferenceStateMachine for Ops {
    type State = Spec;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Spec> {
        spec_strategy().boxed()
    }

    fn transitions(_: &Spec) -> BoxedStrategy<Op> {
        op_strategy()
    }

    fn apply(spec: Spec, _: &Op) -> Spec {
        spec
    }
}

// ---------------------------------------------------------------------------
// The reference model
// ---------------------------------------------------------------------------

/// One of the replica's own trips, still open.
#[derive(Clone, Copy, Debug)]
struct Own {
    until: Nanos,
    reason: Reason,
    published: bool,
}

/// The last news applied for a key.
#[derive(Clone, Copy, Debug)]
struct Seen {
    epoch: u64,
    forget_at: Nanos,
}

/// The replica's counters, as `SyncStats` reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Stats {
    published: u64,
    errors: u64,
    received: u64,
    applied: u64,
    stale: u64,
    below_min_reporters: u64,
    ignored: u64,
    reconciled: u64,
    dropped: u64,
}

/// What the filters make of a piece of news.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Filtered {
    BelowMinReporters,
    Stale,
    /// This replica's own open trip coming back (taken as applied).
    Own,
    /// Nothing left of its period.
    Nothing,
    /// Merged into the breaker, which decides whether anything changes.
    Merged,
}

#[derive(Clone, Debug)]
struct Model {
    spec: Spec,
    now: Nanos,
    reachable: bool,
    /// The outbox: (key, the trip's end, reason), oldest first.
    outbox: VecDeque<(usize, Nanos, Reason)>,
    own: BTreeMap<usize, Own>,
    applied: BTreeMap<usize, Seen>,
    stats: Stats,
}

impl Model {
    fn new(spec: Spec, now: Nanos) -> Model {
        Model {
            spec,
            now,
            reachable: true,
            outbox: VecDeque::new(),
            own: BTreeMap::new(),
            applied: BTreeMap::new(),
            stats: Stats::default(),
        }
    }

    /// Whether the outbox keeps `t`, a transition of `host`'s breaker.
    fn report(&mut self, host: usize, t: &Transition) -> bool {
        let Some(open_for) = t.open_for else {
            return false;
        };
        if t.to != State::Open || t.reason == Reason::RemoteTrip {
            return false;
        }
        if self.outbox.len() >= self.spec.outbox {
            self.stats.dropped += 1;
            return false;
        }
        self.outbox
            .push_back((host, t.at.saturating_add(open_for), t.reason));
        true
    }

    /// The outbox into the table of own trips, then the ended ones forgotten.
    fn drain(&mut self) {
        while let Some((host, until, reason)) = self.outbox.pop_front() {
            let fresh = Own {
                until,
                reason,
                published: false,
            };
            match self.own.get_mut(&host) {
                Some(own) if until > own.until => *own = fresh,
                Some(_) => {}
                None => {
                    self.own.insert(host, fresh);
                }
            }
        }
        let now = self.now;
        self.own.retain(|_, own| own.until > now);
    }

    /// The trips a publish hands to the store (the outbox drained first).
    fn due(&mut self) -> Vec<LocalTrip> {
        self.drain();
        let now = self.now;
        self.own
            .iter()
            .filter(|(_, own)| !own.published)
            .map(|(&host, own)| {
                let mut trip = LocalTrip::new(
                    HOSTS[host],
                    own.until.saturating_duration_since(now),
                    own.reason,
                    ME,
                );
                trip.window = ms(self.spec.window_ms);
                trip.slack = ms(self.spec.slack_ms);
                trip
            })
            .collect()
    }

    /// The store took `trip`.
    fn confirm(&mut self, trip: &LocalTrip) {
        let host = host_index(&trip.key);
        let now = self.now;
        if let Some(own) = self.own.get_mut(&host) {
            if own.until <= now.saturating_add(trip.remaining) {
                own.published = true;
            }
        }
        self.stats.published += 1;
    }

    /// The filters, in their order, and the epoch remembered.
    fn receive(&mut self, news: &News) -> Filtered {
        self.stats.received += 1;
        if news.reporters < self.spec.min_reporters {
            self.stats.below_min_reporters += 1;
            return Filtered::BelowMinReporters;
        }
        let host = host_index(&news.key);
        if self
            .applied
            .get(&host)
            .is_some_and(|s| s.epoch >= news.epoch)
        {
            self.stats.stale += 1;
            return Filtered::Stale;
        }
        let now = self.now;
        let end = now.saturating_add(news.remaining);
        let seen = Seen {
            epoch: news.epoch,
            forget_at: end.saturating_add(ms(self.spec.slack_ms)),
        };
        let own = self.own.get(&host).filter(|o| o.until > now);
        if news.origin == ME
            && own.is_some_and(|o| news.reporters <= 1 || o.until.saturating_add(ms(1)) >= end)
        {
            self.applied.insert(host, seen);
            self.stats.ignored += 1;
            return Filtered::Own;
        }
        if news.remaining.is_zero() {
            return Filtered::Nothing;
        }
        self.applied.insert(host, seen);
        Filtered::Merged
    }

    /// A reconciliation's end: the epochs whose period and slack are over go.
    fn forget(&mut self) {
        let now = self.now;
        self.applied.retain(|_, seen| seen.forget_at > now);
        self.stats.reconciled += 1;
    }
}

fn host_index(key: &str) -> usize {
    HOSTS
        .iter()
        .position(|h| *h == key)
        .expect("a host of the test")
}

// ---------------------------------------------------------------------------
// The real replica beside the model
// ---------------------------------------------------------------------------

/// The store, with a record of what the replica asked of it.
struct Spy {
    store: MemoryStore<ManualClock>,
    /// Every trip handed to the store since the last look.
    trips: Vec<LocalTrip>,
    /// The last list of open trips the store gave.
    listed: Vec<News>,
}

impl Store for Spy {
    type Error = Unreachable;

    fn trip(&mut self, trip: &LocalTrip) -> Result<Option<News>, Unreachable> {
        self.trips.push(trip.clone());
        self.store.trip(trip)
    }

    fn open_trips(&mut self) -> Result<Vec<News>, Unreachable> {
        let open = self.store.open_trips()?;
        self.listed = open.clone();
        Ok(open)
    }
}

struct Pair {
    clock: ManualClock,
    registry: Arc<Hosts>,
    outbox: Arc<Outbox>,
    replica: Replica<String, RandomState, ManualClock>,
    spy: Spy,
    /// News on its way to the replica.
    wire: Vec<News>,
    model: Model,
}

impl Pair {
    fn new(spec: &Spec) -> Pair {
        let clock = ManualClock::starting_at(Nanos::from_secs(1_000));
        let breakers = Breaker::builder()
            .consecutive_failures(1)
            .open_duration(ms(spec.open_ms))
            .backoff(2.0, ms(spec.open_ms * 4))
            .jitter(spec.jitter);
        let registry = Arc::new(
            Registry::<String>::builder(breakers)
                .build_with_clock(clock.clone())
                .expect("a valid registry"),
        );
        let outbox = Arc::new(Outbox::new(spec.outbox));
        let replica = Replica::builder(registry.clone(), outbox.clone())
            .origin(ME)
            .min_reporters(spec.min_reporters, ms(spec.window_ms))
            .slack(ms(spec.slack_ms))
            .build()
            .expect("a valid replica");
        let now = clock.now();
        Pair {
            spy: Spy {
                store: MemoryStore::new(clock.clone()),
                trips: Vec::new(),
                listed: Vec::new(),
            },
            clock,
            registry,
            outbox,
            replica,
            wire: Vec::new(),
            model: Model::new(spec.clone(), now),
        }
    }

    fn advance_to(&mut self, t: Nanos) {
        if t > self.model.now {
            self.model.now = t;
            self.clock.set(t);
        }
    }

    fn send(&mut self, news: impl IntoIterator<Item = News>) {
        self.wire.extend(news);
        let excess = self.wire.len().saturating_sub(WIRE);
        self.wire.drain(..excess);
    }

    /// Delivers `news` to the replica and checks what it did with it.
    fn deliver(&mut self, news: &News) {
        let filtered = self.model.receive(news);
        let t = self.replica.receive_at(news, self.model.now);
        self.merged(filtered, t.is_some(), t.as_ref());
    }

    /// Filtered news changes nothing; merged news may open the breaker or
    /// extend its period, and nothing else.
    fn merged(&mut self, filtered: Filtered, changed: bool, t: Option<&Transition>) {
        if filtered != Filtered::Merged {
            assert!(!changed, "{filtered:?} news changed a breaker: {t:?}");
            return;
        }
        if let Some(t) = t {
            assert_eq!(
                (t.to, t.reason),
                (State::Open, Reason::RemoteTrip),
                "a merge's transition: {t:?}"
            );
        }
        self.model.stats.applied += u64::from(changed);
    }

    fn apply(&mut self, op: Op) {
        let now = self.model.now;
        match op {
            Op::Advance(n) => self.advance_to(now.saturating_add(ms(n))),
            Op::ToEdge(edge, which, nudge) => {
                let edges: Vec<Nanos> = match edge {
                    Edge::OwnEnd => self.model.own.values().map(|o| o.until).collect(),
                    Edge::Forget => self.model.applied.values().map(|s| s.forget_at).collect(),
                };
                if !edges.is_empty() {
                    let t = edges[which.index(edges.len())];
                    let t =
                        Nanos::from_nanos(t.as_nanos().saturating_add_signed(nudge * MS as i64));
                    self.advance_to(t);
                }
            }
            Op::Call(host, fail) => {
                let h = self.registry.handle_at(HOSTS[host], now);
                let Ok(permit) = h.try_acquire_at(now) else {
                    return;
                };
                let outcome = if fail {
                    Outcome::Failure
                } else {
                    Outcome::Success
                };
                if let Some(t) = permit.record_at(outcome, now) {
                    let kept = self.outbox.report(HOSTS[host], &t);
                    assert_eq!(kept, self.model.report(host, &t), "the outbox kept {t:?}");
                }
            }
            Op::Publish => {
                let mut due = self.model.due();
                let news = self.replica.publish_to_at(&mut self.spy, now);
                let mut sent = std::mem::take(&mut self.spy.trips);
                if due.is_empty() {
                    assert!(sent.is_empty(), "nothing due, but sent {sent:?}");
                } else if self.model.reachable {
                    let key = |t: &LocalTrip| t.key.clone();
                    due.sort_by_key(key);
                    sent.sort_by_key(key);
                    assert_eq!(sent, due, "the trips handed to the store");
                    for trip in &due {
                        self.model.confirm(trip);
                    }
                } else {
                    // The first attempt fails; nothing more is tried.
                    assert_eq!(sent.len(), 1, "attempts on an unreachable store");
                    assert!(due.contains(&sent[0]), "{:?} not due: {due:?}", sent[0]);
                    self.model.stats.errors += 1;
                }
                self.send(news);
            }
            Op::Remote {
                host,
                other,
                remaining_ms,
            } => {
                let mut trip = LocalTrip::new(
                    HOSTS[host],
                    ms(remaining_ms),
                    Reason::FailureRate,
                    OTHERS[other],
                );
                trip.window = ms(self.model.spec.window_ms);
                trip.slack = ms(self.model.spec.slack_ms);
                if let Ok(Some(news)) = self.spy.store.trip(&trip) {
                    self.send([news]);
                }
            }
            Op::Deliver(which, keep) => {
                if self.wire.is_empty() {
                    return;
                }
                let i = which.index(self.wire.len());
                let news = if keep {
                    self.wire[i].clone()
                } else {
                    self.wire.remove(i)
                };
                self.deliver(&news);
            }
            Op::Forge {
                host,
                epoch,
                remaining_ms,
                reporters,
                mine,
            } => {
                let last = self.model.applied.get(&host).map_or(1, |s| s.epoch);
                let news = News::new(
                    HOSTS[host],
                    last.saturating_add_signed(epoch).max(1),
                    ms(remaining_ms),
                    reporters,
                    Reason::ConsecutiveFailures,
                    if mine { ME } else { OTHERS[0] },
                );
                self.deliver(&news);
            }
            Op::Reconcile => {
                self.spy.listed.clear();
                let real = self.replica.reconcile_with_at(&mut self.spy, now);
                if !self.model.reachable {
                    assert_eq!(real, Err(Unreachable));
                    self.model.stats.errors += 1;
                    return;
                }
                let changed = real.expect("a reachable store");
                let listed = std::mem::take(&mut self.spy.listed);
                let mut merged = 0;
                for news in &listed {
                    match self.model.receive(news) {
                        Filtered::Merged => merged += 1,
                        Filtered::Nothing => panic!("the store listed {news:?} with nothing left"),
                        _ => {}
                    }
                }
                assert!(
                    changed <= merged,
                    "{changed} breakers changed by {merged} merged news"
                );
                self.model.stats.applied += changed as u64;
                self.model.forget();
            }
            Op::Reachable(up) => {
                self.spy.store.set_reachable(up);
                self.model.reachable = up;
            }
            Op::StoreLost(clear) => {
                if clear {
                    self.spy.store.clear();
                }
                self.replica.store_lost();
                for own in self.model.own.values_mut() {
                    own.published = false;
                }
            }
        }
    }

    fn check(&self) {
        let s = self.replica.stats();
        let got = Stats {
            published: s.published(),
            errors: s.errors(),
            received: s.received(),
            applied: s.applied(),
            stale: s.stale(),
            below_min_reporters: s.below_min_reporters(),
            ignored: s.ignored(),
            reconciled: s.reconciled(),
            dropped: s.dropped(),
        };
        assert_eq!(got, self.model.stats, "the replica's counters");
        assert_eq!(
            (self.outbox.len(), self.outbox.dropped()),
            (self.model.outbox.len(), self.model.stats.dropped),
            "the outbox (waiting, dropped)"
        );
    }
}

struct ReplicaMachine;

impl StateMachineTest for ReplicaMachine {
    type SystemUnderTest = Pair;
    type Reference = Ops;

    fn init_test(spec: &Spec) -> Pair {
        Pair::new(spec)
    }

    fn apply(mut pair: Pair, _: &Spec, op: Op) -> Pair {
        pair.apply(op);
        pair
    }

    fn check_invariants(pair: &Pair, _: &Spec) {
        pair.check();
    }
}

prop_state_machine! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        max_shrink_iters: 20_000,
        .. ProptestConfig::default()
    })]

    /// The replica's bookkeeping agrees with the reference model on every step.
    #[test]
    fn replica_agrees_with_the_bookkeeping_model(sequential 1..120 => ReplicaMachine);
}
