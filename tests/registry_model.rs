//! Model-based test of the registry's bookkeeping: a plain sequential
//! reference model of what a [`Registry`] holds and counts, and the real
//! registry, driven by the same random operation sequences through the
//! public API only (lookups, `with_at`, handles held and released, calls,
//! manual modes, `remove`, `retain`, `insert_with`, `sweep`, `maintain`, the
//! unkeyed breaker, a [`ManualClock`]).
//!
//! # What is modelled
//!
//! * **Which keys are in the map**, and which breaker each lookup returns:
//!   the key's own, a fresh one after its old one left, or the shard's
//!   overflow breaker when the registry is full ([`Handle::is_tracked`],
//!   [`Handle::ptr_eq`] against every handle the test holds).
//! * **Capacity slots and key bytes**: a slot per entry in the map, key
//!   bytes per its text ([`Registry::key_bytes`]); a full registry makes
//!   room by evicting the least recently used evictable entry of the shard
//!   (under pressure a pristine CLOSED entry is evictable whatever its idle
//!   time), and a key that finds no room goes to the overflow breaker and is
//!   counted ([`Registry::untracked`]); a key's bytes may take up to four
//!   victims; a shard that found nothing to evict is not scanned again
//!   within the same idle tick. `insert_with` takes its slot and bytes past
//!   the bounds.
//! * **Eviction by information** (the registry's module docs): no handle
//!   held; CLOSED and idle past `forget_after`, or past the TTL and
//!   pristine; OPEN and idle past the TTL plus its open period (learned
//!   from the breaker), HALF_OPEN past the TTL plus the backoff cap;
//!   never a manual mode or a pinned key. Idle time restarts on a lookup
//!   and when a handle is released.
//! * **Departures**: `remove`, `retain` and a replacing `insert_with` count
//!   in [`Registry::removed`], sweeps and pressure in [`Registry::evicted`];
//!   a departed breaker keeps working for its holders, and none of its later
//!   calls or transitions reaches the registry's counters.
//! * **The counters**: `len`, `is_empty`, `count_in` for every state
//!   (`open_count`, `half_open_count`), what `for_each_snapshot` and
//!   `retain` see (keys, states, call counts), and the **lifetime totals**
//!   ([`Registry::lifetime_calls`], every breaker counting calls): the sum
//!   of the calls of the breakers in the map, of every breaker at the moment
//!   it left, of the overflow breaker and of the unkeyed one. After every
//!   step the totals equal the model's and never decrease, and `len` stays
//!   within the capacity plus the pinned keys.
//!
//! # What is not, and why
//!
//! * **The breakers' own behaviour.** Whether a call is admitted, and the
//!   state and pristineness a call leaves, are *learned* from the breaker
//!   the call went through (`tests/model.rs` checks the breaker against its
//!   own model); the model predicts everything the registry does with them,
//!   and checks each breaker's call counters against what it saw admitted
//!   and rejected. Calls are instantaneous (no slow or abandoned calls), and
//!   the breakers have no time window, so a breaker's state changes only
//!   through calls made here, and its pristineness through them and the
//!   decay of a backoff step a close kept: the model learns from when it is
//!   pristine (`pristine_from`).
//! * **Where the piggybacked sweeps fall.** An insert does one step of the
//!   sweep schedule and `maintain` sweeps what is due; *when* a shard is due
//!   is the schedule's business (`registry_maintenance.rs`), so after each of
//!   them the model accepts "nothing swept" or "the shard swept by the
//!   rule", whichever the registry did, and carries on from it. Likewise,
//!   among entries idle for the same number of ticks the least recently used
//!   is any of them: the model accepts the one the registry chose. Explicit
//!   `sweep` is exact.
//! * **One shard.** Which shard a key lands in is the hasher's business;
//!   the rules are per shard, and one shard makes every one of them visible.
//! * **Time in whole idle ticks** (2²⁴ ns): the TTL, `forget_after`, the
//!   open periods and every step of the clock are whole ticks, so idle ages
//!   are exact whatever the registry's stamp resolution below that.
//! * **Not the open cap** (`max_open`: `fleet_cap.rs`, the loom models),
//!   the keyed layers, per-key overrides of the builder, or concurrency (the
//!   loom models of `loom-tests/`).
//!
//! It catches three deliberate bugs of the catalogue
//! (`loom-tests/bugs/`): `retain-keeps-slots`, `totals-skip-overflow` and
//! `totals-skip-pressure-evictions`.
//!
//! # Running
//!
//! `cargo test --test registry_model` runs the in-code default of 64
//! cases; CI sets `PROPTEST_CASES=1000`. Failures are persisted next to
//! this file, in `tests/registry_model.proptest-regressions` (proptest's
//! default for integration tests; commit it).

use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use failfast::{Breaker, CallCounts, Handle, ManualClock, Nanos, Outcome, Registry, State};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config as ProptestConfig;
use proptest_state_machine::{prop_state_machine, ReferenceStateMachine, StateMachineTest};

type Reg = Registry<String, RandomState, ManualClock>;
type Held = Handle<String, ManualClock>;

/// One idle tick of the registry, in nanoseconds: the model's unit of time.
const TICK: u64 = 1 << 24;

/// The keys, 4 to 12 bytes of text each (the key-byte budget is 16 to 48).
const KEYS: [&str; 10] = [
    "a.io",
    "b.io:1",
    "c.net:80",
    "d.org:443",
    "e.example",
    "f.co:8080",
    "g.internal",
    "h.example:1",
    "i.example:12",
    "j.io:5",
];

/// The most handles the test holds at once.
const MAX_HELD: usize = 6;

/// The index of a key of the test.
fn key_index(k: &str) -> usize {
    KEYS.iter()
        .position(|x| *x == k)
        .expect("a key of the test")
}

fn at(tick: u64) -> Nanos {
    Nanos::from_nanos(tick * TICK)
}

fn ticks(n: u64) -> Duration {
    Duration::from_nanos(n * TICK)
}

// ---------------------------------------------------------------------------
// The configuration
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct Spec {
    capacity: Option<usize>,
    max_key_bytes: Option<usize>,
    /// Idle TTL, in ticks.
    ttl: u64,
    /// `forget_after`, in ticks (the registry uses at least the TTL).
    forget: u64,
    consecutive: u32,
    /// A failure rate over a count window of 4 besides the run: failures
    /// stay in the window (not pristine) after a success ends the run.
    rate_window: bool,
    /// Base open duration, in ticks; the backoff cap is `open × cap_factor`.
    open: u64,
    cap_factor: u64,
}

impl Spec {
    fn template(&self) -> failfast::Builder {
        let b = Breaker::builder()
            .consecutive_failures(self.consecutive)
            .open_duration(ticks(self.open))
            .backoff(2.0, ticks(self.open * self.cap_factor))
            .count_calls(true);
        if self.rate_window {
            b.failure_rate(0.5).count_window(4).min_calls(4)
        } else {
            b
        }
    }

    /// The configuration of a key inserted with `insert_with`.
    fn pinned(&self) -> failfast::Builder {
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(ticks(self.open))
            .count_calls(true)
    }

    fn build(&self, clock: &ManualClock) -> Reg {
        let mut b = Registry::<String>::builder(self.template())
            .shards(1)
            .idle_ttl(ticks(self.ttl))
            .forget_after(ticks(self.forget));
        if let Some(c) = self.capacity {
            b = b.capacity(c);
        }
        if let Some(m) = self.max_key_bytes {
            b = b.max_key_bytes(m);
        }
        b.build_with_clock(clock.clone())
            .expect("the generator makes valid configs")
    }
}

fn spec_strategy() -> impl Strategy<Value = Spec> {
    (
        prop_oneof![1 => Just(None), 4 => (1usize..=6).prop_map(Some)],
        prop_oneof![1 => Just(None), 1 => (16usize..=48).prop_map(Some)],
        1u64..=6,
        1u64..=12,
        1u32..=3,
        any::<bool>(),
        1u64..=4,
        prop_oneof![Just(1u64), Just(2), Just(4)],
    )
        .prop_map(
            |(capacity, max_key_bytes, ttl, forget, consecutive, rate_window, open, cap_factor)| {
                Spec {
                    capacity,
                    max_key_bytes,
                    ttl,
                    forget,
                    consecutive,
                    rate_window,
                    open,
                    cap_factor,
                }
            },
        )
}

// ---------------------------------------------------------------------------
// The operations
// ---------------------------------------------------------------------------

/// What a call through a breaker ends with (instantly: no call is slow).
#[derive(Clone, Copy, Debug)]
enum Verdict {
    Success,
    Failure,
    Ignored,
    /// The permit dropped without a verdict (early: neutral).
    Dropped,
}

/// What is done with a breaker once looked up.
#[derive(Clone, Copy, Debug)]
enum Act {
    Nothing,
    Call(Verdict),
    ForceOpen,
    Reset,
}

/// How a key is looked up.
#[derive(Clone, Copy, Debug)]
enum Via {
    /// `handle_at(&str)`.
    Handle,
    /// `get_or_insert_at(String)`.
    Owned,
    /// `with_at`: the act runs inside, nothing is held.
    With,
}

#[derive(Clone, Debug)]
enum Op {
    /// The clock moves on by this many ticks.
    Advance(u64),
    /// Looks the key up, acts on its breaker, and keeps the handle if `hold`
    /// (never through `with_at`).
    Lookup {
        key: usize,
        via: Via,
        act: Act,
        hold: bool,
    },
    /// Acts through a held handle (its breaker may have left the map).
    Held(Index, Act),
    /// Releases a held handle.
    Release(Index),
    /// A call through the unkeyed breaker.
    Unkeyed(Verdict),
    Remove(usize),
    /// `retain` keeping the keys whose bit is set.
    Retain(u16),
    /// `insert_with` (the key pinned with its own breaker), the handle kept if `hold`.
    InsertWith {
        key: usize,
        hold: bool,
    },
    Sweep(usize),
    Maintain,
}

fn verdict_strategy() -> impl Strategy<Value = Verdict> {
    prop_oneof![
        4 => Just(Verdict::Success),
        4 => Just(Verdict::Failure),
        1 => Just(Verdict::Ignored),
        1 => Just(Verdict::Dropped),
    ]
}

fn act_strategy() -> impl Strategy<Value = Act> {
    prop_oneof![
        3 => Just(Act::Nothing),
        12 => verdict_strategy().prop_map(Act::Call),
        1 => Just(Act::ForceOpen),
        1 => Just(Act::Reset),
    ]
}

fn op_strategy() -> BoxedStrategy<Op> {
    let key = 0..KEYS.len();
    let via = prop_oneof![
        3 => Just(Via::Handle),
        1 => Just(Via::Owned),
        2 => Just(Via::With),
    ];
    prop_oneof![
        10 => prop_oneof![3 => 0u64..=3, 2 => 0u64..=16].prop_map(Op::Advance),
        30 => (key.clone(), via, act_strategy(), prop::bool::weighted(0.25))
            .prop_map(|(key, via, act, hold)| Op::Lookup { key, via, act, hold }),
        8 => (any::<Index>(), act_strategy()).prop_map(|(i, a)| Op::Held(i, a)),
        6 => any::<Index>().prop_map(Op::Release),
        2 => verdict_strategy().prop_map(Op::Unkeyed),
        3 => key.clone().prop_map(Op::Remove),
        2 => any::<u16>().prop_map(Op::Retain),
        1 => (key, prop::bool::weighted(0.3)).prop_map(|(key, hold)| Op::InsertWith { key, hold }),
        3 => (0usize..=2).prop_map(Op::Sweep),
        3 => Just(Op::Maintain),
    ]
    .boxed()
}

/// Generates the configuration and the operations; the model lives beside
/// the registry, because it adopts the registry's choice where the design
/// leaves one open.
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

/// What a breaker is to the registry.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// A key's own breaker, created by a lookup: evictable.
    Tracked,
    /// A key's own breaker from `insert_with`: never evicted.
    Pinned,
    /// The shard's overflow breaker, shared by the keys that found no room.
    Overflow,
    /// The registry's unkeyed breaker.
    Unkeyed,
}

/// One breaker as the model knows it.
#[derive(Clone, Debug)]
struct Book {
    kind: Kind,
    key: Option<usize>,
    calls: CallCounts,
    /// Learned from the breaker after every act on it: its state, and from
    /// when it is pristine with no further call (never: `None`). A close
    /// keeps the backoff step, which healthy time decays (issue 27), so a
    /// breaker turns pristine by itself once its step is back at the base.
    state: State,
    pristine_from: Option<Nanos>,
    /// While OPEN, its open period in whole ticks (truncated, as the
    /// registry counts it): the backoff step, or the span a tripping
    /// verdict's hint set.
    open_ticks: u64,
    /// The tick it was last looked up or released at.
    seen: u64,
    in_map: bool,
}

impl Book {
    fn new(kind: Kind, key: Option<usize>, now: u64) -> Book {
        Book {
            kind,
            key,
            calls: CallCounts::default(),
            state: State::Closed,
            pristine_from: Some(Nanos::ZERO),
            open_ticks: 0,
            seen: now,
            in_map: matches!(kind, Kind::Tracked | Kind::Pinned),
        }
    }
}

/// What a step may be told apart by, from outside: the model's branches
/// (ties and piggybacked sweeps) are matched against the registry with it.
#[derive(Clone, Debug, PartialEq)]
struct Observed {
    keys: BTreeSet<usize>,
    len: usize,
    evicted: u64,
    removed: u64,
    untracked: u64,
    key_bytes: usize,
}

#[derive(Clone, Debug)]
struct Model {
    spec: Spec,
    /// Now, in ticks.
    now: u64,
    /// Every breaker the registry ever handed out, by the model's number.
    books: Vec<Book>,
    /// Key → its breaker in the map.
    map: BTreeMap<usize, usize>,
    overflow: usize,
    unkeyed: usize,
    /// The breaker of each handle the test holds, in the test's order.
    held: Vec<usize>,
    /// The calls of every breaker at the moment it left the map.
    departed: CallCounts,
    evicted: u64,
    removed: u64,
    untracked: u64,
    /// The tick at which a pressure scan last found nothing to evict.
    quiet: Option<u64>,
}

fn add(to: &mut CallCounts, c: &CallCounts) {
    to.admitted += c.admitted;
    to.rejected += c.rejected;
    to.successes += c.successes;
    to.failures += c.failures;
    to.ignored += c.ignored;
    to.dropped += c.dropped;
    to.abandoned += c.abandoned;
    to.panicked += c.panicked;
    to.slow += c.slow;
}

/// `a ≥ b`, field by field.
fn covers(a: &CallCounts, b: &CallCounts) -> bool {
    a.admitted >= b.admitted
        && a.rejected >= b.rejected
        && a.successes >= b.successes
        && a.failures >= b.failures
        && a.ignored >= b.ignored
        && a.dropped >= b.dropped
        && a.abandoned >= b.abandoned
        && a.panicked >= b.panicked
        && a.slow >= b.slow
}

impl Model {
    fn new(spec: Spec) -> Model {
        Model {
            spec,
            now: 0,
            books: vec![
                Book::new(Kind::Overflow, None, 0),
                Book::new(Kind::Unkeyed, None, 0),
            ],
            map: BTreeMap::new(),
            overflow: 0,
            unkeyed: 1,
            held: Vec::new(),
            departed: CallCounts::default(),
            evicted: 0,
            removed: 0,
            untracked: 0,
            quiet: None,
        }
    }

    fn observed(&self) -> Observed {
        Observed {
            keys: self.map.keys().copied().collect(),
            len: self.map.len(),
            evicted: self.evicted,
            removed: self.removed,
            untracked: self.untracked,
            key_bytes: self.key_bytes(),
        }
    }

    fn key_bytes(&self) -> usize {
        if self.spec.max_key_bytes.is_none() {
            return 0;
        }
        self.map.keys().map(|&k| KEYS[k].len()).sum()
    }

    fn pinned_in_map(&self) -> usize {
        self.map
            .values()
            .filter(|&&b| self.books[b].kind == Kind::Pinned)
            .count()
    }

    /// The lifetime totals the registry must report.
    fn totals(&self) -> CallCounts {
        let mut total = self.departed;
        for &b in self.map.values() {
            add(&mut total, &self.books[b].calls);
        }
        add(&mut total, &self.books[self.overflow].calls);
        add(&mut total, &self.books[self.unkeyed].calls);
        total
    }

    /// A use of breaker `b`: a lookup, or a handle released.
    fn touch(&mut self, b: usize) {
        let now = self.now;
        let book = &mut self.books[b];
        if book.in_map {
            book.seen = now;
        }
    }

    /// Whether the rule allows evicting `b` now; `protect` is a breaker
    /// held by the operation itself (an insert's new entry during its sweep).
    fn evictable(&self, b: usize, pressure: bool, protect: Option<usize>) -> bool {
        let book = &self.books[b];
        if book.kind != Kind::Tracked || !book.in_map || Some(b) == protect {
            return false;
        }
        if self.held.contains(&b) {
            return false;
        }
        let idle = self.now - book.seen;
        let s = &self.spec;
        match book.state {
            State::Closed => {
                let pristine = book.pristine_from.is_some_and(|t| at(self.now) >= t);
                idle > s.forget.max(s.ttl) || ((pressure || idle > s.ttl) && pristine)
            }
            State::Open => idle > s.ttl + book.open_ticks,
            State::HalfOpen => idle > s.ttl + s.open * s.cap_factor,
            _ => false,
        }
    }

    /// Breaker `b` leaves the map: its calls fold into the departed totals.
    fn depart(&mut self, b: usize, evicted: bool) {
        let book = &mut self.books[b];
        book.in_map = false;
        let key = book.key.expect("a key's breaker");
        let calls = book.calls;
        self.map.remove(&key);
        add(&mut self.departed, &calls);
        if evicted {
            self.evicted += 1;
        } else {
            self.removed += 1;
        }
    }

    /// Every breaker a sweep evicts now (by the ordinary rule).
    fn sweep(&mut self, protect: Option<usize>) -> usize {
        let victims: Vec<usize> = self
            .map
            .values()
            .copied()
            .filter(|&b| self.evictable(b, false, protect))
            .collect();
        for &b in &victims {
            self.depart(b, true);
        }
        victims.len()
    }

    /// A full shard making room: every way the least recently used
    /// evictable entry may go (ties), or, with none, the scan's failure
    /// (remembered for the tick). `(model, evicted one)`.
    fn evict_lru(&self) -> Vec<(Model, bool)> {
        if self.quiet == Some(self.now) {
            return vec![(self.clone(), false)];
        }
        let candidates: Vec<usize> = self
            .map
            .values()
            .copied()
            .filter(|&b| self.evictable(b, true, None))
            .collect();
        let Some(oldest) = candidates.iter().map(|&b| self.books[b].seen).min() else {
            let mut m = self.clone();
            m.quiet = Some(self.now);
            return vec![(m, false)];
        };
        candidates
            .into_iter()
            .filter(|&b| self.books[b].seen == oldest)
            .map(|b| {
                let mut m = self.clone();
                m.depart(b, true);
                (m, true)
            })
            .collect()
    }

    fn fits(&self, key: usize) -> bool {
        match self.spec.max_key_bytes {
            Some(max) => self.key_bytes() + KEYS[key].len() <= max,
            None => true,
        }
    }

    /// The key goes to the overflow breaker.
    fn overflowed(mut self) -> (Model, usize) {
        self.untracked += 1;
        let b = self.overflow;
        (self, b)
    }

    /// The key gets a fresh breaker in the map.
    fn tracked(mut self, key: usize) -> (Model, usize) {
        let b = self.books.len();
        self.books
            .push(Book::new(Kind::Tracked, Some(key), self.now));
        self.map.insert(key, b);
        (self, b)
    }

    /// A lookup's miss: every outcome the design allows, with the breaker
    /// the lookup returns. A slot first (a victim's passes to the new key),
    /// then the key's bytes (victims give theirs back, at most 4 of them),
    /// then one piggybacked sweep step, or none.
    fn insert(&self, key: usize) -> Vec<(Model, usize)> {
        let full = self.spec.capacity.is_some_and(|cap| self.map.len() >= cap);
        let mut with_slot = Vec::new();
        let mut outcomes = Vec::new();
        if full {
            for (m, room) in self.evict_lru() {
                if room {
                    with_slot.push(m);
                } else {
                    outcomes.push(m.overflowed());
                }
            }
        } else {
            with_slot.push(self.clone());
        }
        for m in with_slot {
            // (model, victims so far) still looking for bytes.
            let mut looking = vec![(m, 0)];
            while let Some((m, tries)) = looking.pop() {
                if m.fits(key) {
                    outcomes.push(m.tracked(key));
                } else if tries == 4 {
                    outcomes.push(m.overflowed());
                } else {
                    for (m, room) in m.evict_lru() {
                        if room {
                            looking.push((m, tries + 1));
                        } else {
                            // Nothing left to evict: the tries that remain
                            // find nothing either (the shard is quiet now).
                            outcomes.push(m.overflowed());
                        }
                    }
                }
            }
        }
        let mut all = Vec::new();
        for (m, b) in outcomes {
            let protect = (m.books[b].kind == Kind::Tracked).then_some(b);
            let mut swept = m.clone();
            swept.sweep(protect);
            all.push((m, b));
            all.push((swept, b));
        }
        all
    }

    /// A lookup of `key`: every allowed outcome and the breaker returned.
    fn lookup(&self, key: usize) -> Vec<(Model, usize)> {
        match self.map.get(&key) {
            Some(&b) => {
                let mut m = self.clone();
                m.touch(b);
                vec![(m, b)]
            }
            None => self.insert(key),
        }
    }

    /// Counts an attempted call on breaker `b`: `admitted` is what the
    /// breaker answered.
    fn call(&mut self, b: usize, admitted: bool, verdict: Verdict) {
        let c = &mut self.books[b].calls;
        if !admitted {
            c.rejected += 1;
            return;
        }
        c.admitted += 1;
        match verdict {
            Verdict::Success => c.successes += 1,
            Verdict::Failure => c.failures += 1,
            Verdict::Ignored => c.ignored += 1,
            Verdict::Dropped => c.dropped += 1,
        }
    }
}

// ---------------------------------------------------------------------------
// The real registry beside the model
// ---------------------------------------------------------------------------

struct Pair {
    registry: Reg,
    clock: ManualClock,
    model: Model,
    /// Handles held by the test, with `model.held` in the same order.
    held: Vec<Held>,
    /// The lifetime totals at the last step (they never decrease).
    last_totals: CallCounts,
}

/// What the registry shows of the step's outcome.
fn observe(r: &Reg) -> Observed {
    let mut keys = BTreeSet::new();
    r.for_each_snapshot(|k, _| {
        let i = key_index(k);
        assert!(keys.insert(i), "key {k} listed twice");
    });
    Observed {
        keys,
        len: r.len(),
        evicted: r.evicted(),
        removed: r.removed(),
        untracked: r.untracked(),
        key_bytes: r.key_bytes(),
    }
}

/// Does `act` on a breaker; returns whether a call was admitted.
fn act_on(b: &Breaker<ManualClock>, act: Act, now: Nanos) -> Option<bool> {
    match act {
        Act::Nothing => None,
        Act::ForceOpen => {
            let _ = b.force_open_at(now);
            None
        }
        Act::Reset => {
            let _ = b.reset_at(now);
            None
        }
        Act::Call(v) => Some(match b.try_acquire_at(now) {
            Err(_) => false,
            Ok(p) => {
                match v {
                    Verdict::Success => drop(p.record_at(Outcome::Success, now)),
                    Verdict::Failure => drop(p.record_at(Outcome::Failure, now)),
                    Verdict::Ignored => drop(p.record_at(Outcome::Ignored, now)),
                    Verdict::Dropped => drop(p),
                }
                true
            }
        }),
    }
}

/// What the model learns from a breaker after acting on it.
struct Learned {
    state: State,
    pristine_from: Option<Nanos>,
    /// An OPEN breaker's period, when its end is still ahead (seen from
    /// the act that opened it, at the latest: the calls here take no time).
    open_ticks: Option<u64>,
    calls: Option<CallCounts>,
}

fn learn(b: &Breaker<ManualClock>, now: Nanos) -> Learned {
    let s = b.snapshot_at(now);
    let open_for = s
        .retry_after
        .filter(|left| !left.is_zero())
        .map(|left| s.time_in_state + left);
    Learned {
        state: b.state(),
        pristine_from: pristine_from(b, now),
        open_ticks: open_for.map(|d| (d.as_nanos() / u128::from(TICK)) as u64),
        calls: s.calls,
    }
}

/// The first instant from `now` on at which `b`, left alone, is pristine:
/// pristineness only grows with time here (no time window; the backoff step
/// decays), so a binary search over the breaker's own answer finds it.
fn pristine_from(b: &Breaker<ManualClock>, now: Nanos) -> Option<Nanos> {
    if b.is_pristine_at(now) {
        return Some(now);
    }
    // The step decays one per base period from at most 63.
    let horizon = now + b.config().open_duration_base() * 64;
    if !b.is_pristine_at(horizon) {
        return None;
    }
    let (mut lo, mut hi) = (now.as_nanos(), horizon.as_nanos());
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if b.is_pristine_at(Nanos::from_nanos(mid)) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(Nanos::from_nanos(hi))
}

impl Pair {
    fn new(spec: &Spec) -> Pair {
        let clock = ManualClock::new();
        Pair {
            registry: spec.build(&clock),
            clock,
            model: Model::new(spec.clone()),
            held: Vec::new(),
            last_totals: CallCounts::default(),
        }
    }

    fn now(&self) -> Nanos {
        at(self.model.now)
    }

    /// Adopts the one of `branches` the registry took.
    fn choose<T>(&mut self, branches: Vec<(Model, T)>, what: &str) -> T {
        let seen = observe(&self.registry);
        let allowed: Vec<Observed> = branches.iter().map(|(m, _)| m.observed()).collect();
        let Some(i) = allowed.iter().position(|o| *o == seen) else {
            panic!("{what}: the registry shows {seen:?}, the model allows {allowed:?}");
        };
        let (m, t) = branches.into_iter().nth(i).expect("found above");
        self.model = m;
        t
    }

    /// Records an act on breaker `b` and checks the breaker's own counters.
    fn acted(&mut self, b: usize, act: Act, admitted: Option<bool>, learned: Learned) {
        if let (Act::Call(v), Some(a)) = (act, admitted) {
            self.model.call(b, a, v);
        }
        let book = &mut self.model.books[b];
        book.state = learned.state;
        book.pristine_from = learned.pristine_from;
        if let Some(ticks) = learned.open_ticks {
            book.open_ticks = ticks;
        }
        assert_eq!(
            learned.calls,
            Some(book.calls),
            "breaker {b}'s own call counters"
        );
    }

    /// A new handle returned for breaker `b`: the same breaker as every held
    /// handle of `b`, and no other.
    fn check_identity(&self, h: &Held, b: usize) {
        let kind = self.model.books[b].kind;
        assert_eq!(
            h.is_tracked(),
            matches!(kind, Kind::Tracked | Kind::Pinned),
            "is_tracked of a {kind:?} breaker"
        );
        assert_eq!(
            h.key().map(String::as_str),
            self.model.books[b].key.map(|k| KEYS[k])
        );
        for (other, &ob) in self.held.iter().zip(&self.model.held) {
            assert_eq!(
                Handle::ptr_eq(h, other),
                ob == b,
                "handle of breaker {b} against a held one of {ob}"
            );
        }
    }

    fn hold_or_drop(&mut self, h: Held, b: usize, hold: bool) {
        if hold && self.held.len() < MAX_HELD {
            self.held.push(h);
            self.model.held.push(b);
        } else {
            drop(h);
            self.model.touch(b);
        }
    }

    fn apply(&mut self, op: Op) {
        let now = self.now();
        match op {
            Op::Advance(n) => {
                self.model.now += n;
                self.clock.set(at(self.model.now));
            }
            Op::Lookup {
                key,
                via,
                act,
                hold,
            } => {
                let branches = self.model.lookup(key);
                match via {
                    Via::With => {
                        let (admitted, learned) = self.registry.with_at(KEYS[key], now, |b| {
                            let admitted = act_on(b, act, now);
                            (admitted, learn(b, now))
                        });
                        let b = self.choose(branches, "with_at");
                        self.acted(b, act, admitted, learned);
                    }
                    Via::Handle | Via::Owned => {
                        let h = match via {
                            Via::Handle => self.registry.handle_at(KEYS[key], now),
                            _ => self.registry.get_or_insert_at(KEYS[key].to_string(), now),
                        };
                        let b = self.choose(branches, "lookup");
                        self.check_identity(&h, b);
                        let admitted = act_on(&h, act, now);
                        self.acted(b, act, admitted, learn(&h, now));
                        self.hold_or_drop(h, b, hold);
                    }
                }
            }
            Op::Held(which, act) => {
                if self.held.is_empty() {
                    return;
                }
                let i = which.index(self.held.len());
                let b = self.model.held[i];
                let h = &self.held[i];
                let admitted = act_on(h, act, now);
                let learned = learn(h, now);
                self.acted(b, act, admitted, learned);
            }
            Op::Release(which) => {
                if self.held.is_empty() {
                    return;
                }
                let i = which.index(self.held.len());
                drop(self.held.remove(i));
                let b = self.model.held.remove(i);
                self.model.touch(b);
            }
            Op::Unkeyed(v) => {
                let h = self.registry.unkeyed();
                let b = self.model.unkeyed;
                self.check_identity(&h, b);
                let admitted = act_on(&h, Act::Call(v), now);
                self.acted(b, Act::Call(v), admitted, learn(&h, now));
            }
            Op::Remove(key) => {
                let real = self.registry.remove_at(KEYS[key], now);
                let want = self.model.map.get(&key).copied();
                if let Some(b) = want {
                    self.model.depart(b, false);
                }
                assert_eq!(real, want.is_some(), "remove({})", KEYS[key]);
            }
            Op::Retain(mask) => {
                let mut seen = BTreeMap::new();
                let real = self.registry.retain_at(now, |k, snap| {
                    let i = key_index(k);
                    seen.insert(i, (snap.state, snap.calls));
                    mask & (1 << i) != 0
                });
                let want: BTreeMap<usize, (State, Option<CallCounts>)> = self
                    .model
                    .map
                    .iter()
                    .map(|(&k, &b)| {
                        (
                            k,
                            (self.model.books[b].state, Some(self.model.books[b].calls)),
                        )
                    })
                    .collect();
                assert_eq!(seen, want, "what retain's predicate saw");
                let doomed: Vec<usize> = self
                    .model
                    .map
                    .iter()
                    .filter(|(&k, _)| mask & (1 << k) == 0)
                    .map(|(_, &b)| b)
                    .collect();
                for &b in &doomed {
                    self.model.depart(b, false);
                }
                assert_eq!(real, doomed.len(), "retain's count");
            }
            Op::InsertWith { key, hold } => {
                let h = self
                    .registry
                    .insert_with_at(KEYS[key].to_string(), self.model.spec.pinned(), now)
                    .expect("a valid breaker");
                if let Some(&old) = self.model.map.get(&key) {
                    self.model.depart(old, false);
                }
                let b = self.model.books.len();
                self.model
                    .books
                    .push(Book::new(Kind::Pinned, Some(key), self.model.now));
                self.model.map.insert(key, b);
                self.check_identity(&h, b);
                let learned = learn(&h, now);
                self.acted(b, Act::Nothing, None, learned);
                self.hold_or_drop(h, b, hold);
            }
            Op::Sweep(budget) => {
                let real = self.registry.sweep_at(budget, now);
                let want = if budget == 0 {
                    0
                } else {
                    self.model.sweep(None)
                };
                assert_eq!(real, want, "sweep_at({budget})");
            }
            Op::Maintain => {
                let mut swept = self.model.clone();
                let n = swept.sweep(None);
                let branches = vec![(self.model.clone(), 0), (swept, n)];
                let real = self.registry.maintain_at(now);
                let want = self.choose(branches, "maintain_at");
                assert_eq!(real, want, "maintain_at's count");
            }
        }
    }

    /// Everything the registry counts agrees with the model.
    fn check(&mut self) {
        let m = &self.model;
        let r = &self.registry;
        assert_eq!(observe(r), m.observed(), "the map and its counters");
        let mut states = BTreeMap::new();
        r.for_each_snapshot(|k, snap| {
            let i = key_index(k);
            states.insert(i, (snap.state, snap.calls));
        });
        let want: BTreeMap<usize, (State, Option<CallCounts>)> = m
            .map
            .iter()
            .map(|(&k, &b)| (k, (m.books[b].state, Some(m.books[b].calls))))
            .collect();
        assert_eq!(states, want, "each key's state and calls");
        assert_eq!(r.is_empty(), m.map.is_empty());
        for s in State::all() {
            let n = m.map.values().filter(|&&b| m.books[b].state == s).count();
            assert_eq!(r.count_in(s), n, "count_in({s:?})");
        }
        assert_eq!(r.open_count(), r.count_in(State::Open));
        assert_eq!(r.half_open_count(), r.count_in(State::HalfOpen));
        if let Some(cap) = m.spec.capacity {
            assert!(
                r.len() <= cap + m.pinned_in_map(),
                "len {} past the capacity {cap} and {} pinned keys",
                r.len(),
                m.pinned_in_map()
            );
        }
        let totals = r.lifetime_calls().expect("the breakers count calls");
        assert_eq!(totals, m.totals(), "lifetime totals");
        assert!(
            covers(&totals, &self.last_totals),
            "lifetime totals went down: {:?} after {:?}",
            totals,
            self.last_totals
        );
        self.last_totals = totals;
        for (h, &b) in self.held.iter().zip(&m.held) {
            let book = &m.books[b];
            assert_eq!(
                (h.state(), h.snapshot_at(at(m.now)).calls),
                (book.state, Some(book.calls)),
                "held handle of breaker {b}"
            );
        }
    }
}

struct RegistryMachine;

impl StateMachineTest for RegistryMachine {
    type SystemUnderTest = Pair;
    type Reference = Ops;

    fn init_test(spec: &Spec) -> Pair {
        Pair::new(spec)
    }

    fn apply(mut pair: Pair, _: &Spec, op: Op) -> Pair {
        pair.apply(op);
        pair.check();
        pair
    }

    fn check_invariants(_: &Pair, _: &Spec) {}
}

prop_state_machine! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        max_shrink_iters: 20_000,
        .. ProptestConfig::default()
    })]

    /// The registry's bookkeeping agrees with the reference model on every step.
    #[test]
    fn registry_agrees_with_the_bookkeeping_model(sequential 1..120 => RegistryMachine);
}
