//! The multi-threaded phase: the same 200 callers split over four OS
//! threads, racing on one breaker and one shared [`ManualClock`]. The
//! scheduler cannot interleave *inside* an operation — a verdict between
//! another caller's load of the state word and its CAS, two callers
//! stamping the same round — and threads can; on two cores, four threads
//! are preempted at arbitrary points. Threads are not replayable, so the
//! checks here are those that hold in every interleaving, and the exact
//! ones wait for a checkpoint: every few thousand operations all threads
//! stop at a barrier and one checks the chain of transitions, the
//! snapshot, and that the breaker, left alone, admits again.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use failfast::{
    Breaker, CallError, Clock, Config, ManualClock, Nanos, Outcome, OwnedPermit, Reason,
    RejectReason, State,
};

use super::common::{Log, LogTransitions};
use super::invariants::{check_conservation, check_snapshot, Chain};
use super::specs::Spec;
use super::support::{deliberate, only_deliberate, Rng};

pub const THREADS: usize = 4;
const CALLERS_PER_THREAD: usize = 200 / THREADS;
const MAX_SKEW_NS: u64 = 3_000_000;

/// Probes in flight per generation: `generation << 32 | count`, one word per
/// slot, the slot chosen by the generation. A slot still counting another
/// generation's probes means the table is too small for the run (a harness
/// limit, reported as such).
struct InFlight {
    slots: Vec<AtomicU64>,
}

impl InFlight {
    const SLOTS: usize = 4096;

    fn new() -> InFlight {
        InFlight {
            slots: (0..Self::SLOTS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Counts a probe of generation `g` in; returns how many are in flight.
    fn enter(&self, g: u32) -> u32 {
        let slot = &self.slots[g as usize % Self::SLOTS];
        // SeqCst here and below: test bookkeeping, not a protocol under test.
        let mut current = slot.load(Ordering::SeqCst);
        loop {
            let (sg, n) = ((current >> 32) as u32, current as u32);
            let next = if n == 0 {
                (u64::from(g) << 32) | 1
            } else {
                assert_eq!(sg, g, "in-flight table too small for this run");
                current + 1
            };
            match slot.compare_exchange_weak(current, next, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return next as u32,
                Err(seen) => current = seen,
            }
        }
    }

    fn leave(&self, g: u32) {
        let slot = &self.slots[g as usize % Self::SLOTS];
        let before = slot.fetch_sub(1, Ordering::SeqCst);
        assert!(before as u32 > 0 && (before >> 32) as u32 == g);
    }

    fn count(&self, g: u32) -> u32 {
        let w = self.slots[g as usize % Self::SLOTS].load(Ordering::SeqCst);
        if (w >> 32) as u32 == g {
            w as u32
        } else {
            0
        }
    }
}

struct Shared {
    breaker: Arc<Breaker<ManualClock>>,
    config: Config,
    clock: ManualClock,
    log: Log,
    in_flight: InFlight,
    /// The latest instant any thread has passed the breaker or the clock
    /// has shown (`fetch_max` before the instant is used).
    latest: AtomicU64,
    barrier: Barrier,
    /// A thread failed: the others stop working and only meet the barriers.
    failed: AtomicBool,
}

impl Shared {
    fn note(&self, t: Nanos) -> Nanos {
        // SeqCst: test bookkeeping; read after the breaker call it bounds.
        self.latest.fetch_max(t.as_nanos(), Ordering::SeqCst);
        t
    }

    fn latest(&self) -> Nanos {
        Nanos::from_nanos(self.latest.load(Ordering::SeqCst))
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Plan {
    Verdict(Outcome, bool),
    Cancel,
    Panic,
    Hang(Option<Outcome>),
}

struct Held {
    permit: OwnedPermit<ManualClock>,
    plan: Plan,
    /// The clock instant it is due, and the thread's op count it is due by.
    due: (Nanos, u64),
}

#[derive(Debug, Default, Clone, Copy)]
pub struct Tally {
    pub ops: u64,
    pub admitted: u64,
    pub rejected: u64,
    pub probes: u64,
    pub most_in_flight: u32,
    pub deliberate_panics: u64,
    pub stale_endings: u64,
    pub edges: u64,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.ops += o.ops;
        self.admitted += o.admitted;
        self.rejected += o.rejected;
        self.probes += o.probes;
        self.most_in_flight = self.most_in_flight.max(o.most_in_flight);
        self.deliberate_panics += o.deliberate_panics;
        self.stale_endings += o.stale_endings;
        self.edges += o.edges;
    }
}

struct Worker<'a> {
    shared: &'a Shared,
    rng: Rng,
    skews: Vec<i64>,
    held: Vec<Option<Held>>,
    ops: u64,
    tally: Tally,
    sick: bool,
}

/// Runs `spec` on [`THREADS`] threads for `epochs` checkpoints of
/// `ops_per_epoch` operations per thread.
pub fn run(spec: &Spec, seed: u64, stream: u64, epochs: u64, ops_per_epoch: u64) -> (Chain, Tally) {
    let log = Log::default();
    let clock = ManualClock::starting_at(Nanos::from_secs(1));
    let breaker = spec
        .builder(stream as u32)
        .log_transitions(&log)
        .build_with_clock(clock.clone())
        .expect("valid configuration");
    let shared = Shared {
        config: breaker.config().clone(),
        breaker: Arc::new(breaker),
        latest: AtomicU64::new(clock.now().as_nanos()),
        clock,
        log,
        in_flight: InFlight::new(),
        barrier: Barrier::new(THREADS),
        failed: AtomicBool::new(false),
    };
    let mut chain = Chain::new(&shared.config, true);
    let mut total = Tally::default();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|index| {
                let shared = &shared;
                let mut chain = (index == 0).then(|| Chain::new(&shared.config, true));
                s.spawn(move || {
                    let mut rng = Rng::new(seed, stream * 100 + index as u64);
                    let skews = (0..CALLERS_PER_THREAD)
                        .map(|_| rng.between(0, 2 * MAX_SKEW_NS) as i64 - MAX_SKEW_NS as i64)
                        .collect();
                    let mut w = Worker {
                        shared,
                        rng,
                        skews,
                        held: (0..CALLERS_PER_THREAD).map(|_| None).collect(),
                        ops: 0,
                        tally: Tally::default(),
                        sick: true,
                    };
                    // A failing thread keeps meeting the barriers (doing
                    // nothing) so the others finish; its panic is re-raised
                    // once they have.
                    let mut failure = None;
                    let mut guarded = |f: &mut dyn FnMut()| {
                        if shared.failed.load(Ordering::SeqCst) {
                            return;
                        }
                        if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
                            shared.failed.store(true, Ordering::SeqCst);
                            failure = Some(p);
                        }
                    };
                    for _ in 0..epochs {
                        guarded(&mut || {
                            for _ in 0..ops_per_epoch {
                                w.op();
                            }
                        });
                        shared.barrier.wait();
                        if let Some(chain) = chain.as_mut() {
                            guarded(&mut || w.checkpoint(chain));
                        }
                        shared.barrier.wait();
                    }
                    guarded(&mut || w.finish());
                    if let Some(p) = failure {
                        resume_unwind(p);
                    }
                    (w.tally, chain)
                })
            })
            .collect();
        for h in workers {
            let (tally, c) = h.join().unwrap_or_else(|p| resume_unwind(p));
            total.add(&tally);
            if let Some(c) = c {
                chain = c;
            }
        }
    });
    // Every permit has ended: the whole log, conservation, and liveness.
    follow(&shared, &mut chain);
    let t = shared.latest();
    let snap = shared.breaker.snapshot_at(t);
    check_snapshot(&shared.config, &snap, true);
    check_conservation(&snap);
    let calls = snap.calls.unwrap();
    assert_eq!(
        (calls.admitted, calls.rejected),
        (total.admitted, total.rejected),
        "the breaker counted what the callers saw"
    );
    assert_eq!(u64::from(snap.generation), chain.checked);
    admits_after_a_quiet_time(&shared);
    (chain, total)
}

/// Checks the transitions logged since the last look, in generation order.
fn follow(shared: &Shared, chain: &mut Chain) {
    let mut fresh: Vec<_> = shared.log.lock().unwrap()[chain.checked as usize..].to_vec();
    fresh.sort_by_key(|t| t.generation);
    for t in &fresh {
        chain.check(t);
    }
}

/// The breaker, left alone until its open period or probe lease ends,
/// admits the next call — not a nanosecond sooner while Open. The probe is
/// dropped at once (neutral: it frees its slot). Returns the calls it made
/// (admitted, rejected), for the tally.
fn admits_after_a_quiet_time(shared: &Shared) -> (u64, u64) {
    let mut rejected = 0;
    let t = shared.latest().max(shared.clock.now());
    let s = shared.breaker.snapshot_at(t);
    let edge = match s.state {
        State::Open => {
            let wait = s.retry_after.unwrap();
            assert!(wait <= shared.config.open_duration_cap(), "{s:?}");
            let edge = t + wait;
            if !wait.is_zero() {
                let early = edge - Duration::from_nanos(1);
                let r = shared.breaker.try_acquire_owned_at(early);
                let r = r.expect_err("no probe before the open period ends");
                assert_eq!(r.retry_after(), Some(Duration::from_nanos(1)));
                rejected += 1;
            }
            edge
        }
        State::HalfOpen => t + shared.config.probe_lease().saturating_sub(s.time_in_state),
        _ => t,
    };
    shared.clock.set(shared.note(edge));
    let permit = shared.breaker.try_acquire_owned_at(edge);
    let permit = permit.unwrap_or_else(|r| panic!("stuck at {edge:?}: {r:?} after {s:?}"));
    if s.state != State::Closed {
        assert!(permit.is_probe());
    }
    drop(permit);
    (1, rejected)
}

impl Worker<'_> {
    fn own_time(&self, caller: usize) -> Nanos {
        let now = self.shared.clock.now();
        let skew = self.skews[caller];
        let t = if skew >= 0 {
            now + Duration::from_nanos(skew as u64)
        } else {
            now - Duration::from_nanos(skew.unsigned_abs())
        };
        self.shared.note(t)
    }

    fn outcome(&mut self) -> Outcome {
        let roll = self.rng.below(100);
        if roll < if self.sick { 55 } else { 3 } {
            Outcome::Failure
        } else if roll < 95 {
            Outcome::Success
        } else {
            Outcome::Ignored
        }
    }

    fn took(&mut self) -> Duration {
        let fast = Spec::fast_limit(&self.shared.config).min(Duration::from_secs(1));
        let fast = fast.as_nanos() as u64;
        Duration::from_nanos(if self.rng.percent(80) {
            self.rng.below(fast / 2 + 1)
        } else {
            self.rng.between(fast, 2 * fast)
        })
    }

    fn op(&mut self) {
        self.ops += 1;
        self.tally.ops += 1;
        let shared = self.shared;
        // Time passes with every operation, now and then by a lot.
        let step = if self.rng.per_10k(5) {
            Duration::from_secs(self.rng.between(1, 3600))
        } else {
            Duration::from_nanos(self.rng.below(200_000))
        };
        shared.clock.advance(step);
        shared.note(shared.clock.now());
        if self.rng.percent(1) {
            self.sick = self.rng.percent(70);
        }
        if self.rng.percent(2) {
            self.jump_to_the_edge();
        }
        let caller = self.rng.below(CALLERS_PER_THREAD as u64) as usize;
        match &self.held[caller] {
            Some(h) if shared.clock.now() >= h.due.0 || self.ops >= h.due.1 => self.end(caller),
            Some(_) => {}
            None => self.arrive(caller),
        }
    }

    /// Moves the shared clock to the end of the current open period or
    /// probe lease, as read by a racy snapshot: callers on every thread
    /// then race at the edge.
    fn jump_to_the_edge(&mut self) {
        let shared = self.shared;
        let t = shared.clock.now();
        let s = shared.breaker.snapshot_at(t);
        let to = match s.state {
            State::Open => t + s.retry_after.unwrap_or_default(),
            State::HalfOpen => t + shared.config.probe_lease().saturating_sub(s.time_in_state),
            _ => return,
        };
        shared.clock.set(shared.note(to));
        self.tally.edges += 1;
    }

    fn arrive(&mut self, caller: usize) {
        let shared = self.shared;
        let roll = self.rng.below(100);
        if roll >= 80 {
            return self.call_with(roll < 90);
        }
        let (t, result) = if roll < 70 {
            let t = self.own_time(caller);
            (t, shared.breaker.try_acquire_owned_at(t))
        } else {
            let t = shared.note(shared.clock.now());
            (t, shared.breaker.try_acquire_owned())
        };
        match result {
            Ok(permit) => {
                self.tally.admitted += 1;
                if permit.is_probe() {
                    self.counted_in(&permit);
                } else {
                    assert!(permit.transition().is_none());
                }
                let plan = match self.rng.below(100) {
                    0..72 => {
                        let outcome = self.outcome();
                        Plan::Verdict(outcome, self.rng.percent(50))
                    }
                    72..82 => Plan::Cancel,
                    82..88 => Plan::Panic,
                    _ => {
                        let outcome = self.rng.percent(60).then(|| self.outcome());
                        Plan::Hang(outcome)
                    }
                };
                let due = match plan {
                    Plan::Hang(_) => (Nanos::NEVER, self.ops + self.rng.between(200, 2_000)),
                    _ => (shared.clock.now() + self.took(), u64::MAX),
                };
                self.held[caller] = Some(Held { permit, plan, due });
            }
            Err(r) => {
                self.tally.rejected += 1;
                let wait = r.retry_after().expect("never forced open");
                assert!(!wait.is_zero(), "{r:?}");
                match r.reason() {
                    // A caller behind the state's stamp, by its skew, waits
                    // that much longer.
                    RejectReason::Open => assert!(
                        t + wait <= shared.latest() + shared.config.open_duration_cap(),
                        "{r:?} at {t:?}"
                    ),
                    RejectReason::HalfOpenFull => assert!(
                        t + wait <= shared.latest() + shared.config.probe_lease(),
                        "{r:?} at {t:?}"
                    ),
                    other => panic!("{other:?}"),
                }
            }
        }
    }

    /// A probe admitted: never more than P of its round in flight.
    fn counted_in(&mut self, permit: &OwnedPermit<ManualClock>) {
        let g = permit.generation();
        if let Some(t) = permit.transition() {
            assert_eq!(t.generation, g, "{t:?}");
            assert_eq!(t.to, State::HalfOpen);
            assert!(matches!(
                t.reason,
                Reason::OpenElapsed | Reason::ProbeLeaseExpired
            ));
        }
        let n = self.shared.in_flight.enter(g);
        let p = self.shared.config.half_open_probes();
        assert!(
            n <= p,
            "{n} probes of generation {g} in flight, at most {p}"
        );
        self.tally.most_in_flight = self.tally.most_in_flight.max(n);
        self.tally.probes += 1;
    }

    fn end(&mut self, caller: usize) {
        let shared = self.shared;
        let Held { permit, plan, .. } = self.held[caller].take().expect("held");
        let g = permit.generation();
        let probe = permit.is_probe();
        if probe {
            shared.in_flight.leave(g);
        }
        // Generations only move forward: a permit whose generation has
        // passed before its verdict is stale for good.
        let current = shared.breaker.snapshot_at(shared.latest()).generation;
        let stale = current != g;
        self.tally.stale_endings += u64::from(stale);
        let own = self.own_time(caller);
        let returned = match plan {
            Plan::Verdict(outcome, true) | Plan::Hang(Some(outcome)) => {
                Some(permit.record_at(outcome, own))
            }
            Plan::Verdict(outcome, false) => Some(permit.record(outcome)),
            Plan::Cancel | Plan::Hang(None) => {
                drop(permit);
                None
            }
            Plan::Panic => {
                let r = only_deliberate(move || {
                    let _held = permit;
                    deliberate()
                });
                assert!(r.is_err());
                self.tally.deliberate_panics += 1;
                None
            }
        };
        if let Some(Some(t)) = returned {
            assert!(!stale, "a late verdict of generation {g} caused {t:?}");
            assert_eq!(t.generation, g + 1, "{t:?}");
            let from = if probe {
                State::HalfOpen
            } else {
                State::Closed
            };
            assert_eq!(t.from, from, "{t:?}");
        }
    }

    fn call_with(&mut self, panicking: bool) {
        let shared = self.shared;
        let outcome = self.outcome();
        let took = self.took();
        shared.note(shared.clock.now());
        let ran = std::cell::Cell::new(false);
        let result = only_deliberate(|| {
            shared.breaker.call_with(
                |_: &Result<(), ()>| {
                    if panicking {
                        deliberate();
                    }
                    outcome
                },
                || {
                    ran.set(true);
                    shared.clock.advance(took);
                    shared.note(shared.clock.now());
                    if outcome == Outcome::Failure {
                        Err(())
                    } else {
                        Ok(())
                    }
                },
            )
        });
        assert_eq!(result.is_err(), panicking && ran.get());
        match result {
            Err(()) => {
                self.tally.admitted += 1;
                self.tally.deliberate_panics += 1;
            }
            Ok(Err(CallError::Rejected(_))) => self.tally.rejected += 1,
            Ok(_) => self.tally.admitted += 1,
        }
    }

    /// All threads wait at the barrier: the log is complete, the snapshot
    /// exact, and a quiet time ends in an admission.
    fn checkpoint(&mut self, chain: &mut Chain) {
        let shared = self.shared;
        follow(shared, chain);
        let t = shared.latest();
        let s = shared.breaker.snapshot_at(t);
        check_snapshot(&shared.config, &s, true);
        assert_eq!(
            u64::from(s.generation),
            chain.checked,
            "one event per generation"
        );
        assert_eq!(s.state, chain.state());
        if s.state == State::HalfOpen {
            let p = shared.config.half_open_probes();
            assert!(shared.in_flight.count(s.generation) <= p);
        }
        let (admitted, rejected) = admits_after_a_quiet_time(shared);
        self.tally.admitted += admitted;
        self.tally.rejected += rejected;
        self.tally.edges += 1;
        follow(shared, chain);
    }

    /// Ends every held permit (the thread's callers give up).
    fn finish(&mut self) {
        for caller in 0..CALLERS_PER_THREAD {
            if self.held[caller].is_some() {
                self.end(caller);
            }
        }
    }
}
