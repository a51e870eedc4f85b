//! The single-threaded phase: 200 logical callers on one OS thread, driven
//! by a seeded discrete-event scheduler over a [`ManualClock`]. Everything
//! here is replayed exactly from the seed, so every check is exact: before
//! and after each action the harness takes a snapshot at the same instant
//! and knows what the action may change.
//!
//! Each caller waits (a think time, or the `retry_after` it was told), then
//! arrives: it asks at its own time — the shared clock plus its skew, a few
//! milliseconds early or late — or at the breaker's clock, or runs a whole
//! call through `call_with`, sometimes with a classifier that panics. An
//! admitted caller holds its permit and later ends it by a verdict (at its
//! own time or the breaker's), a cancellation (a drop: early or late, as
//! the breaker judges its age), a panic unwinding through the permit, or
//! not at all: a hung call, released long after with a late verdict or a
//! drop. The clock moves with the events, now and then jumps (minutes,
//! days, and once a century and a half), and some arrivals come after a
//! long quiet time: exactly at the end of the open period or the probe
//! lease, where the next call must be admitted.

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::Duration;

use failfast::{
    Breaker, BreakerSnapshot, CallError, Clock, Config, ManualClock, Nanos, Outcome, OwnedPermit,
    Reason, RejectReason, Rejected, State, Transition,
};

use super::common::{Log, LogTransitions};
use super::invariants::{check_conservation, check_snapshot, Chain};
use super::specs::Spec;
use super::support::{deliberate, only_deliberate, Rng, Trail};

/// Logical callers per breaker.
pub const CALLERS: usize = 200;
/// Callers ask a little early or late against the shared clock: up to this.
const MAX_SKEW: Duration = Duration::from_millis(3);
/// A caller's think time between calls: uniform in `0..2 × THINK`.
const THINK: Duration = Duration::from_secs(2);

/// How a held permit will end.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Plan {
    /// A verdict, at the caller's own (skewed) time or on the breaker's clock.
    Verdict { outcome: Outcome, own_time: bool },
    /// Dropped without a verdict: a cancelled call (the breaker judges its age).
    Cancel,
    /// A panic unwinds through the held permit.
    Panic,
    /// Never answered in time: released long after, by a late verdict or a drop.
    Hang { outcome: Option<Outcome> },
}

struct Held {
    permit: OwnedPermit<ManualClock>,
    plan: Plan,
}

struct Caller {
    /// Nanoseconds added to the shared clock when this caller passes a time.
    skew: i64,
    /// Comes back when a rejection said to, rather than after a think time.
    honours_retry_after: bool,
    held: Option<Held>,
}

/// What the trail of a failing run shows.
#[derive(Clone, Copy, Debug)]
#[allow(dead_code)] // read through Debug
enum Did {
    Asked {
        caller: usize,
        at: Nanos,
        clock: bool,
        admitted: Option<(bool, u32)>,
    },
    CallWith {
        caller: usize,
        at: Nanos,
        panicking_classifier: bool,
        outcome: Outcome,
        took: Duration,
    },
    Ended {
        caller: usize,
        clock: Nanos,
        plan: Plan,
        generation: u32,
        stale: bool,
    },
    Jump {
        to: Nanos,
    },
    QuietUntil {
        edge: Nanos,
        state: State,
    },
}

/// What the run did, for its final checks and the report.
#[derive(Debug, Default)]
pub struct Tally {
    pub steps: u64,
    pub admitted: u64,
    pub rejected: u64,
    pub probes: u64,
    pub deliberate_panics: u64,
    pub classifier_panics: u64,
    pub late_verdicts: u64,
    pub hung: u64,
    pub jumps: u64,
    pub quiet_edges: u64,
    pub max_held: usize,
    pub largest_burst: u64,
}

/// The probe slots of the current round, as the harness counts them.
#[derive(Clone, Copy, Debug)]
struct Round {
    generation: u32,
    taken: u32,
}

struct Run {
    breaker: Arc<Breaker<ManualClock>>,
    config: Config,
    clock: ManualClock,
    log: Log,
    seen: usize,
    chain: Chain,
    rng: Rng,
    callers: Vec<Caller>,
    /// (when, tie-breaker, caller): each caller has exactly one event queued.
    queue: BinaryHeap<Reverse<(Nanos, u64, usize)>>,
    seq: u64,
    /// The latest instant the clock or any caller has shown: no stamp of the
    /// breaker is later.
    latest: Nanos,
    round: Round,
    fast: Duration,
    sick: bool,
    trail: Trail<Did>,
    tally: Tally,
    /// Callers told to come back at the same instant, and that instant.
    burst: (Nanos, u64),
    /// The next arrival comes after a quiet time (see `follow_log`).
    quiet: bool,
    /// Callers holding a permit.
    held: usize,
    /// Cycles left in a long outage (every verdict a failure).
    outage: u32,
    /// Rejections since the state last changed.
    rejections_here: u32,
}

/// Drives one breaker of `spec` through `cycles` Open → HalfOpen cycles.
pub fn run(spec: &Spec, seed: u64, stream: u64, cycles: u64) -> (Chain, Tally) {
    let log = Log::default();
    let clock = ManualClock::starting_at(Nanos::from_secs(1));
    let breaker = spec
        .builder(stream as u32)
        .log_transitions(&log)
        .build_with_clock(clock.clone())
        .expect("valid configuration");
    let config = breaker.config().clone();
    let mut rng = Rng::new(seed, stream);
    let callers = (0..CALLERS)
        .map(|i| Caller {
            skew: if i % 4 == 0 {
                0
            } else {
                let m = MAX_SKEW.as_nanos() as u64;
                rng.between(0, 2 * m) as i64 - m as i64
            },
            honours_retry_after: rng.percent(80),
            held: None,
        })
        .collect();
    let mut run = Run {
        breaker: Arc::new(breaker),
        fast: Spec::fast_limit(&config),
        chain: Chain::new(&config, false),
        config,
        latest: clock.now(),
        clock,
        log,
        seen: 0,
        rng,
        callers,
        queue: BinaryHeap::new(),
        seq: 0,
        round: Round {
            generation: u32::MAX,
            taken: 0,
        },
        sick: true,
        trail: Trail::new(format!("the single-threaded phase, {}", spec.name), seed),
        tally: Tally::default(),
        burst: (Nanos::ZERO, 0),
        quiet: false,
        held: 0,
        outage: 0,
        rejections_here: 0,
    };
    for i in 0..CALLERS {
        let at = run.clock.now() + run.think();
        run.schedule(i, at);
    }
    let half = cycles / 2;
    let mut jumped_far = false;
    let step_limit = 2_000 * cycles.max(10);
    while run.chain.cycles < cycles {
        run.tally.steps += 1;
        assert!(
            run.tally.steps < step_limit,
            "no progress: {} cycles in {} steps",
            run.chain.cycles,
            run.tally.steps
        );
        if !jumped_far && run.chain.cycles >= half {
            // A clock that has run for a century and a half: every stamp,
            // period and lease is computed on huge instants.
            jumped_far = true;
            run.jump(Duration::from_nanos(1 << 62));
        }
        run.step();
    }
    run.drain();
    (run.chain, run.tally)
}

impl Run {
    fn think(&mut self) -> Duration {
        Duration::from_nanos(self.rng.below(2 * THINK.as_nanos() as u64))
    }

    fn schedule(&mut self, caller: usize, at: Nanos) {
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq, caller)));
    }

    /// The caller's own view of `now`: the shared clock plus its skew.
    fn own_time(&mut self, caller: usize, now: Nanos) -> Nanos {
        let skew = self.callers[caller].skew;
        let t = if skew >= 0 {
            now + Duration::from_nanos(skew as u64)
        } else {
            now - Duration::from_nanos(skew.unsigned_abs())
        };
        self.note(t);
        t
    }

    fn note(&mut self, t: Nanos) {
        self.latest = self.latest.max(t);
    }

    fn jump(&mut self, by: Duration) {
        self.clock.advance(by);
        let to = self.clock.now();
        self.note(to);
        self.tally.jumps += 1;
        self.trail.push(Did::Jump { to });
    }

    fn outcome(&mut self) -> Outcome {
        if self.outage > 0 {
            return Outcome::Failure;
        }
        let roll = self.rng.below(100);
        let failing = if self.sick { 55 } else { 3 };
        if roll < failing {
            Outcome::Failure
        } else if roll < 95 {
            Outcome::Success
        } else if roll < 97 {
            Outcome::Neutral
        } else {
            Outcome::Ignored
        }
    }

    /// How long a call runs: mostly fast, sometimes past the slow-call
    /// threshold or `abandoned_after`.
    fn took(&mut self) -> Duration {
        let fast = self.fast.min(Duration::from_secs(1)).as_nanos() as u64;
        Duration::from_nanos(if self.rng.percent(80) {
            self.rng.below(fast / 2 + 1)
        } else {
            self.rng.between(fast, 2 * fast)
        })
    }

    fn step(&mut self) {
        if self.rng.per_10k(10) {
            let by = self.rng.between(1, 600);
            self.jump(Duration::from_secs(by));
        } else if self.rng.per_10k(1) {
            let by = self.rng.between(1, 30 * 24);
            self.jump(Duration::from_secs(by * 3600));
        }
        let Reverse((at, _, caller)) = self.queue.pop().expect("every caller has an event");
        self.clock.set(at);
        let now = self.clock.now();
        self.note(now);
        if self.callers[caller].held.is_some() {
            self.end(caller);
        } else {
            self.arrive(caller);
        }
        self.tally.max_held = self.tally.max_held.max(self.held);
        self.follow_log();
        let latest = self.latest;
        check_snapshot(&self.config, &self.breaker.snapshot_at(latest), true);
    }

    /// Checks the transitions the observer saw since the last look.
    fn follow_log(&mut self) {
        let log = self.log.lock().unwrap();
        for t in &log[self.seen..] {
            self.chain.check(t);
            match t.reason {
                Reason::OpenElapsed => {
                    self.sick = self.rng.percent(60);
                    self.outage = self.outage.saturating_sub(1);
                    if self.outage == 0 && self.rng.per_10k(50) {
                        // A long outage: every call fails for 80 cycles, so
                        // the backoff reaches its cap and the trips in a row
                        // their cap step.
                        self.outage = 80;
                    }
                }
                Reason::ProbesSucceeded => self.sick = self.rng.percent(85),
                _ => {}
            }
            // Whether the state just entered is left alone until its end:
            // most open periods (which saves the run their rejections), a
            // few probe rounds (the lease must end them).
            self.rejections_here = 0;
            self.quiet = match t.to {
                State::Open => self.rng.percent(70),
                State::HalfOpen => self.rng.percent(10),
                _ => false,
            };
        }
        self.seen = log.len();
    }

    fn log_len(&self) -> usize {
        self.log.lock().unwrap().len()
    }

    fn last_logged(&self) -> Transition {
        *self.log.lock().unwrap().last().expect("a transition")
    }

    fn arrive(&mut self, caller: usize) {
        // An open period of a day gets millions of rejections in a real
        // proxy; a few dozen are enough to check them.
        let sampled = self.rejections_here >= 24 && self.breaker.state() == State::Open;
        if std::mem::take(&mut self.quiet) || sampled {
            return self.after_a_quiet_time(caller);
        }
        let now = self.clock.now();
        match self.rng.below(100) {
            0..70 => {
                let at = self.own_time(caller, now);
                self.ask(caller, Some(at));
            }
            70..80 => {
                self.ask(caller, None);
            }
            roll => self.call_with(caller, roll < 90),
        }
    }

    /// No breaker is stuck past its open time plus the probe lease: after
    /// the quiet time it asks for, the next call is admitted — and not one
    /// nanosecond sooner while Open (no early probe).
    fn after_a_quiet_time(&mut self, caller: usize) {
        let quiet_from = self.clock.now();
        let t = self.latest.max(quiet_from);
        let s = self.breaker.snapshot_at(t);
        let edge = match s.state {
            State::Open => {
                let wait = s.retry_after.expect("Open says when");
                assert!(
                    wait <= self.config.open_duration_cap(),
                    "open past its longest period: {s:?}"
                );
                let edge = t + wait;
                if !wait.is_zero() {
                    let early = edge - Duration::from_nanos(1);
                    self.clock.set(early);
                    let r = self.breaker.try_acquire_owned_at(early);
                    let r = r.expect_err("no probe before the open period ends");
                    assert_eq!(
                        (r.reason(), r.retry_after()),
                        (RejectReason::Open, Some(Duration::from_nanos(1)))
                    );
                    self.tally.rejected += 1;
                }
                edge
            }
            State::HalfOpen => {
                let left = self.config.probe_lease().saturating_sub(s.time_in_state);
                t + left
            }
            _ => t,
        };
        self.trail.push(Did::QuietUntil {
            edge,
            state: s.state,
        });
        self.tally.quiet_edges += 1;
        self.clock.set(edge);
        self.note(edge);
        self.sleep_idle_callers(self.clock.now().saturating_duration_since(quiet_from));
        assert!(
            self.ask(caller, Some(edge)),
            "stuck: not admitted at {edge:?}, after a quiet time from {s:?}"
        );
    }

    /// Quiet means no calls: the idle callers' arrivals move `by` later
    /// (calls under way still end when they were due).
    fn sleep_idle_callers(&mut self, by: Duration) {
        let events = std::mem::take(&mut self.queue).into_vec();
        self.queue = events
            .into_iter()
            .map(|Reverse((at, seq, caller))| {
                let at = if self.callers[caller].held.is_none() {
                    at + by
                } else {
                    at
                };
                Reverse((at, seq, caller))
            })
            .collect();
    }

    /// A permit asked for at `at` (the caller's time), or on the breaker's
    /// clock (`None`). Returns whether it was admitted.
    fn ask(&mut self, caller: usize, at: Option<Nanos>) -> bool {
        let t = at.unwrap_or_else(|| self.clock.now());
        let before = self.breaker.snapshot_at(t);
        let logged = self.log_len();
        let result = match at {
            Some(at) => self.breaker.try_acquire_owned_at(at),
            None => self.breaker.try_acquire_owned(),
        };
        let admitted = self.judge_admission(
            &before,
            t,
            result
                .as_ref()
                .map(|p| (p.is_probe(), p.generation(), p.transition())),
        );
        let transition = result.as_ref().ok().and_then(|p| p.transition());
        assert_eq!(self.log_len(), logged + usize::from(transition.is_some()));
        if let Some(tr) = transition {
            assert_eq!(
                tr,
                self.last_logged(),
                "the permit's transition is the observed one"
            );
        }
        self.trail.push(Did::Asked {
            caller,
            at: t,
            clock: at.is_none(),
            admitted: result.as_ref().ok().map(|p| (p.is_probe(), p.generation())),
        });
        match result {
            Ok(permit) => {
                self.hold(caller, permit);
                true
            }
            Err(rejected) => {
                self.after_rejection(caller, t, &rejected);
                assert!(!admitted);
                false
            }
        }
    }

    /// Checks an admission at `t` against the snapshot taken just before at
    /// the same instant; keeps the count of the round's probe slots.
    fn judge_admission(
        &mut self,
        before: &BreakerSnapshot,
        t: Nanos,
        result: Result<(bool, u32, Option<Transition>), &Rejected>,
    ) -> bool {
        let probes = self.config.half_open_probes();
        let lease = self.config.probe_lease();
        match (before.state, result) {
            (State::Closed, Ok((probe, generation, transition))) => {
                assert!(!probe && transition.is_none(), "a plain call in Closed");
                assert_eq!(generation, before.generation);
            }
            (State::Closed, Err(r)) => panic!("Closed rejected a call: {r:?}"),
            (State::Open, Ok((probe, generation, transition))) => {
                assert_eq!(
                    before.retry_after,
                    Some(Duration::ZERO),
                    "no early probe: admitted at {t:?}"
                );
                let tr = transition.expect("the first probe starts the round");
                assert!(probe);
                assert_eq!(
                    (tr.from, tr.to, tr.reason, tr.generation),
                    (
                        State::Open,
                        State::HalfOpen,
                        Reason::OpenElapsed,
                        before.generation + 1
                    )
                );
                assert_eq!(generation, tr.generation);
                self.round = Round {
                    generation,
                    taken: 1,
                };
                self.tally.probes += 1;
            }
            (State::Open, Err(r)) => {
                assert_eq!(r.reason(), RejectReason::Open, "{r:?}");
                assert_eq!(
                    r.retry_after(),
                    before.retry_after,
                    "the wait the snapshot shows"
                );
                let wait = r.retry_after().expect("told when to retry");
                let cap = self.config.open_duration_cap();
                assert!(!wait.is_zero() && t + wait <= self.latest + cap, "{r:?}");
            }
            (State::HalfOpen, Ok((probe, generation, transition))) => {
                assert!(probe, "only probes in HalfOpen");
                assert_eq!(
                    self.round.generation, before.generation,
                    "the harness follows the round"
                );
                if before.time_in_state >= lease {
                    let tr = transition.expect("a new round after the lease");
                    assert_eq!(
                        (tr.from, tr.to, tr.reason, tr.generation),
                        (
                            State::HalfOpen,
                            State::HalfOpen,
                            Reason::ProbeLeaseExpired,
                            before.generation + 1
                        )
                    );
                    assert_eq!(generation, tr.generation);
                    self.round = Round {
                        generation,
                        taken: 1,
                    };
                } else {
                    assert!(transition.is_none());
                    assert_eq!(generation, before.generation);
                    self.round.taken += 1;
                    assert!(
                        self.round.taken <= probes,
                        "{} probes in a round of {probes}",
                        self.round.taken
                    );
                }
                self.tally.probes += 1;
            }
            (State::HalfOpen, Err(r)) => {
                assert_eq!(r.reason(), RejectReason::HalfOpenFull, "{r:?}");
                assert!(
                    before.time_in_state < lease,
                    "a round past its lease refused a call"
                );
                assert_eq!(
                    self.round.taken, probes,
                    "a round turned a call away with a free slot"
                );
                // Retry no later than the lease's end (a caller behind the
                // round's start, by its skew, waits that much longer).
                let wait = r.retry_after().expect("told when to retry");
                assert!(
                    !wait.is_zero() && t + wait <= self.latest + lease,
                    "{r:?} at {t:?} with {before:?}"
                );
            }
            (state, _) => panic!("no manual mode is used, found {state:?}"),
        }
        match result {
            Ok(_) => {
                self.tally.admitted += 1;
                true
            }
            Err(_) => {
                self.tally.rejected += 1;
                self.rejections_here += 1;
                false
            }
        }
    }

    /// Schedules the next arrival of a caller turned away at `t`.
    fn after_rejection(&mut self, caller: usize, t: Nanos, rejected: &Rejected) {
        let now = self.clock.now();
        let wait = rejected.retry_after().expect("never forced open");
        let told = t + wait;
        let honours = self.callers[caller].honours_retry_after;
        let at = match self.rng.below(100) {
            // Exactly when told (at its own, skewed, time): the herd at the edge.
            0..40 if honours => now + wait,
            40..60 if honours => {
                now + Duration::from_nanos(self.rng.below(2 * wait.as_nanos() as u64 + 1))
            }
            // A proxy sees a rejected caller retry again and again; a few
            // dozen rejections per state are checked, the rest go elsewhere
            // for a while.
            _ if self.rejections_here > 24 => now + wait + 10 * self.think(),
            _ => now + self.think(),
        };
        if at == now + wait {
            // The callers told the same instant (each at its own time).
            if told == self.burst.0 {
                self.burst.1 += 1;
                self.tally.largest_burst = self.tally.largest_burst.max(self.burst.1);
            } else if told > self.burst.0 {
                self.burst = (told, 1);
            }
        }
        self.schedule(caller, at);
    }

    fn hold(&mut self, caller: usize, permit: OwnedPermit<ManualClock>) {
        let now = self.clock.now();
        let (plan, due) = match self.rng.below(100) {
            0..72 => {
                let outcome = self.outcome();
                let own_time = self.rng.percent(50);
                (Plan::Verdict { outcome, own_time }, now + self.took())
            }
            72..82 => (Plan::Cancel, now + self.took()),
            82..88 => (Plan::Panic, now + self.took()),
            _ => {
                self.tally.hung += 1;
                let outcome = self.rng.percent(60).then(|| self.outcome());
                let lease = self.config.probe_lease().as_nanos() as u64;
                let late = Duration::from_nanos(self.rng.between(lease, 20 * lease));
                (Plan::Hang { outcome }, now + late)
            }
        };
        self.callers[caller].held = Some(Held { permit, plan });
        self.held += 1;
        self.schedule(caller, due);
    }

    /// The caller's held permit ends as planned.
    fn end(&mut self, caller: usize) {
        let Held { permit, plan } = self.callers[caller].held.take().expect("held");
        self.held -= 1;
        let now = self.clock.now();
        let own = self.own_time(caller, now);
        let t = self.latest;
        let before = self.breaker.snapshot_at(t);
        let logged = self.log_len();
        let generation = permit.generation();
        let probe = permit.is_probe();
        let stale = generation != before.generation;
        self.trail.push(Did::Ended {
            caller,
            clock: now,
            plan,
            generation,
            stale,
        });
        let returned = match plan {
            Plan::Verdict { outcome, own_time } => Some(if own_time {
                permit.record_at(outcome, own)
            } else {
                permit.record(outcome)
            }),
            Plan::Hang {
                outcome: Some(outcome),
            } => {
                self.tally.late_verdicts += 1;
                Some(permit.record_at(outcome, own))
            }
            Plan::Cancel | Plan::Hang { outcome: None } => {
                drop(permit);
                None
            }
            Plan::Panic => {
                let r = only_deliberate(move || {
                    let _held = permit;
                    deliberate()
                });
                assert!(r.is_err(), "the panic reaches the caller");
                self.tally.deliberate_panics += 1;
                None
            }
        };
        let after = self.breaker.snapshot_at(t);
        let grown = self.log_len() - logged;
        if plan == Plan::Panic {
            let (b, a) = (before.calls.unwrap(), after.calls.unwrap());
            assert_eq!(a.panicked, b.panicked + 1, "a panic is counted as one");
        }
        if stale {
            // A verdict (or drop, or panic) of an older generation changes
            // nothing: not the state, the window, the run, the backoff.
            assert_eq!(grown, 0, "a late verdict caused a transition");
            assert_eq!(returned.flatten(), None);
            let (mut b, mut a) = (before, after);
            b.calls = None;
            a.calls = None;
            assert_eq!(
                a, b,
                "a late {plan:?} of generation {generation} changed the breaker"
            );
        } else {
            assert!(grown <= 1, "one transition per ending");
            assert_eq!(after.generation, before.generation + grown as u32);
            let transition = (grown == 1).then(|| self.last_logged());
            if let Some(returned) = returned {
                assert_eq!(
                    returned, transition,
                    "the verdict returns what the observer saw"
                );
            }
            if let Some(tr) = transition {
                assert_eq!(tr.generation, generation + 1);
            }
            if probe {
                self.end_probe(plan, &before, transition);
            } else {
                assert_eq!(
                    before.state,
                    State::Closed,
                    "a plain call of the current generation"
                );
                if let Some(tr) = transition {
                    assert_eq!((tr.from, tr.to), (State::Closed, State::Open));
                }
            }
        }
        let next = self.clock.now() + self.think();
        self.schedule(caller, next);
    }

    /// A probe of the current round ended: a failure or a panic reopens the
    /// breaker; a drop, an ignored or a neutral call frees its slot; a
    /// success keeps it.
    fn end_probe(&mut self, plan: Plan, before: &BreakerSnapshot, transition: Option<Transition>) {
        assert_eq!(before.state, State::HalfOpen);
        assert_eq!(self.round.generation, before.generation);
        let reason = transition.map(|t| t.reason);
        match plan {
            Plan::Panic
            | Plan::Verdict {
                outcome: Outcome::Failure,
                ..
            }
            | Plan::Hang {
                outcome: Some(Outcome::Failure),
            } => assert_eq!(reason, Some(Reason::ProbeFailed), "{plan:?}"),
            Plan::Verdict {
                outcome: Outcome::Ignored | Outcome::Neutral,
                ..
            }
            | Plan::Hang {
                outcome: Some(Outcome::Ignored | Outcome::Neutral),
            } => {
                assert_eq!(reason, None, "an ignored or neutral probe decides nothing");
                self.round.taken -= 1;
            }
            Plan::Cancel | Plan::Hang { outcome: None } => match reason {
                None => self.round.taken -= 1, // dropped early: the slot is free
                Some(r) => assert_eq!(r, Reason::ProbeAbandoned, "{plan:?}"),
            },
            Plan::Verdict {
                outcome: Outcome::Success,
                ..
            }
            | Plan::Hang {
                outcome: Some(Outcome::Success),
            } => assert!(
                matches!(
                    reason,
                    None | Some(Reason::ProbesSucceeded | Reason::ProbeSlow)
                ),
                "{plan:?}: {reason:?}"
            ),
        }
    }

    /// A whole call through `call_with`: the call takes some time on the
    /// shared clock, and the classifier may panic.
    fn call_with(&mut self, caller: usize, panicking: bool) {
        let t = self.clock.now();
        let before = self.breaker.snapshot_at(t);
        let logged = self.log_len();
        let outcome = self.outcome();
        let took = self.took();
        self.trail.push(Did::CallWith {
            caller,
            at: t,
            panicking_classifier: panicking,
            outcome,
            took,
        });
        let ran = Cell::new(false);
        let clock = self.clock.clone();
        let breaker = self.breaker.clone();
        let result = only_deliberate(|| {
            breaker.call_with(
                |_: &Result<(), ()>| {
                    if panicking {
                        deliberate();
                    }
                    outcome
                },
                || {
                    ran.set(true);
                    clock.advance(took);
                    match outcome {
                        Outcome::Failure => Err(()),
                        _ => Ok(()),
                    }
                },
            )
        });
        let now = self.clock.now();
        self.note(now);
        let rejected = match &result {
            Ok(Err(CallError::Rejected(r))) => Some(r.clone()),
            _ => None,
        };
        assert_eq!(ran.get(), rejected.is_none(), "the call runs iff admitted");
        assert_eq!(
            result.is_err(),
            panicking && ran.get(),
            "the classifier's panic reaches the caller"
        );
        // The permit is gone by now: its admission is judged by what the
        // state allowed and by the round start the observer saw, if any.
        let round_start = self.log.lock().unwrap()[logged..]
            .first()
            .copied()
            .filter(|tr| matches!(tr.reason, Reason::OpenElapsed | Reason::ProbeLeaseExpired));
        let admission = match &rejected {
            Some(r) => Err(r),
            None => Ok((
                before.state != State::Closed,
                round_start.map_or(before.generation, |tr| tr.generation),
                round_start,
            )),
        };
        self.judge_admission(&before, t, admission);
        let after = self.breaker.snapshot_at(self.latest);
        let grown = self.log_len() - logged;
        assert!(grown <= 2, "a round start and its verdict at most");
        if panicking && ran.get() {
            self.tally.classifier_panics += 1;
            let (b, a) = (before.calls.unwrap(), after.calls.unwrap());
            assert_eq!(
                a.panicked,
                b.panicked + 1,
                "a classifier's panic is a failure"
            );
            if before.state != State::Closed {
                let last = self.last_logged();
                assert_eq!(
                    (last.to, last.reason),
                    (State::Open, Reason::ProbeFailed),
                    "a probe whose classifier panics fails its round"
                );
            }
        }
        if ran.get() && before.state != State::Closed {
            // A probe: a fast success keeps its slot, an ignored or neutral
            // call frees it, anything else ended the round.
            let still = after.state == State::HalfOpen && after.generation == self.round.generation;
            if still {
                assert!(
                    matches!(
                        outcome,
                        Outcome::Ignored | Outcome::Neutral | Outcome::Success
                    ) && !panicking,
                    "{outcome:?} left the round open"
                );
                if matches!(outcome, Outcome::Ignored | Outcome::Neutral) {
                    self.round.taken -= 1;
                }
            }
        } else if ran.get() {
            assert_ne!(
                after.state,
                State::HalfOpen,
                "a Closed call cannot half-open"
            );
        }
        match rejected {
            Some(r) => self.after_rejection(caller, t, &r),
            None => {
                let next = self.clock.now() + self.think();
                self.schedule(caller, next);
            }
        }
    }

    /// Ends every held permit, then checks conservation and that the
    /// breaker, left alone long enough, admits again.
    fn drain(&mut self) {
        for caller in 0..CALLERS {
            if self.callers[caller].held.is_some() {
                self.end(caller);
            }
        }
        self.follow_log();
        let t = self.latest;
        let s = self.breaker.snapshot_at(t);
        check_snapshot(&self.config, &s, true);
        check_conservation(&s);
        let c = s.calls.unwrap();
        assert_eq!(
            (c.admitted, c.rejected),
            (self.tally.admitted, self.tally.rejected),
            "the breaker counted what the callers saw"
        );
        assert_eq!(
            u64::from(s.generation),
            self.chain.checked,
            "one event per generation"
        );
        assert_eq!(s.state, self.chain.state());
        self.after_a_quiet_time(0);
        self.callers[0].held = None;
    }
}
