//! Chaos: 200 callers through 10,000 open → half-open cycles, with probes
//! that are cancelled early or late, panic, hang, or have a classifier that
//! panics; a clock that jumps forward (minutes, days, and once by a century
//! and a half); and callers whose `_at(now)` times are a few milliseconds
//! behind or ahead of the shared clock and of each other. Every trip policy
//! runs it (`chaos/specs.rs`: consecutive failures, count and time windows,
//! failure and slow-call rates, one to four probes, `abandoned_after` above
//! and below the slow-call threshold, jitter, backoff off, gentle, steep and
//! at its one-day cap), first on one thread, then on four.
//!
//! # What it asserts
//!
//! * **Never more than P probes of a round in flight.** One thread: the
//!   harness counts each round's slots (a probe admitted takes one, an
//!   ignored or early-dropped probe gives it back, a success keeps it) and
//!   a round turns a call away exactly when all P are taken. Four threads:
//!   every probe is counted in under its generation once admitted and out
//!   just before it ends, and the count never passes P (and reaches it).
//! * **No breaker stuck past its open time plus the probe lease.** Now and
//!   then the callers fall quiet until the current open period or probe
//!   lease ends (read from a snapshot taken at the latest instant anyone
//!   has used): one nanosecond before an open period ends the call is
//!   rejected with a wait of 1 ns, at its end it is admitted as the probe;
//!   at a lease's end a call is admitted. The wait is never longer than the
//!   backoff cap (Open) or the lease (HalfOpen) from that instant. The same
//!   holds at every checkpoint of the threads and at the end of every run.
//! * **No early probe; every transition once, in a legal chain.** Each
//!   Open → HalfOpen comes no sooner than the trip's instant plus its open
//!   period, each superseded round no sooner than its start plus the lease;
//!   generations run 1, 2, 3… with each transition starting where the last
//!   ended; trips in a row, open periods (within their jitter and the cap)
//!   and the probes that closed a round are what they must be.
//! * **No state change from a late verdict.** One thread: a verdict, drop
//!   or panic of a permit whose generation has passed leaves the snapshot
//!   (state, generation, window, run, trips, time in state, wait) and the
//!   observer's log exactly as they were, and returns no transition. Four
//!   threads: a permit whose generation had passed before its verdict
//!   returns no transition; any transition a verdict returns enters the
//!   permit's generation + 1.
//! * **No panic escaping but the deliberate ones.** Every deliberate panic
//!   has its own payload and is caught where a caller would catch it;
//!   anything else fails the test. A panic unwinding through a probe, and a
//!   classifier's panic in `call_with`, reopen the breaker and count once.
//! * **No overflow.** The test runs in a debug build, where any arithmetic
//!   overflow panics; the trips in a row reach their 6-bit ceiling (63) in
//!   long outages, open periods their one-day cap (`backoff_at_the_cap`),
//!   the clock passes 2⁶² ns, and every snapshot stays within its fields'
//!   bounds and its window.
//! * **Conservation.** When every permit has ended, every admitted call
//!   ended exactly once in the call counters, and the counters saw exactly
//!   the admissions and rejections the callers saw.
//!
//! # One thread, then four
//!
//! This host has two cores, so 200 callers are logical actors, not threads.
//! On one thread (`chaos/logical.rs`) a seeded discrete-event scheduler
//! drives them: the run is replayed exactly from its seed, so every check
//! can be exact, before and after each action. It interleaves whole
//! operations only. Four threads of 50 callers each (`chaos/threads.rs`),
//! more threads than cores so that they are preempted anywhere, interleave
//! *inside* operations — a verdict between another call's load of the
//! state word and its CAS, two rounds stamped at once — which no scheduler
//! of whole operations can; they are not replayable, so their checks are
//! those that hold in every interleaving, plus exact ones at checkpoints
//! where all four wait at a barrier. The loom models (`loom-tests/`) explore
//! every interleaving of a few operations; this explores many operations.
//!
//! # Size, seed, replay
//!
//! The default run is CI's (`cargo test --all-features` runs it; `.ci/run`
//! needs no step of its own): 10,000 cycles on one thread (2,000 per
//! configuration), 1,000,000 operations on four threads (200,000 per
//! configuration, about 9,000 cycles in all). In a debug build on this
//! project's two-core host, with a load average of 8 from other builds,
//! the two tests took 4.4 s and 2.7 s alone.
//!
//! * `FAILFAST_CHAOS_SEED=<u64 or 0x…>`: another seed (the default is
//!   fixed). A failure prints its seed, the step and the last actions.
//! * `FAILFAST_CHAOS_CYCLES=<n>`: the single-threaded cycles; the threads'
//!   operations scale with it (× 100). A long run:
//!   `FAILFAST_CHAOS_CYCLES=200000 cargo test --release --test chaos`.
//!
//! # Found
//!
//! The threads found that a trip by consecutive failures can report a run
//! shorter than the threshold: `a_consecutive_trip_reports_the_run_it_tripped_on`,
//! ignored until it is fixed (its docs have the sequence).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use failfast::{Breaker, ManualClock, Nanos, Reason, Transition, MAX_DURATION};

#[path = "chaos/invariants.rs"]
mod invariants;
#[path = "chaos/logical.rs"]
mod logical;
#[path = "chaos/specs.rs"]
mod specs;
#[path = "chaos/support.rs"]
mod support;
#[path = "chaos/threads.rs"]
mod threads;

mod common;

use specs::SPECS;

/// Every reason the machine has, bar the manual modes and remote trips.
const MACHINE_REASONS: [Reason; 9] = [
    Reason::ConsecutiveFailures,
    Reason::FailureRate,
    Reason::SlowCallRate,
    Reason::OpenElapsed,
    Reason::ProbeLeaseExpired,
    Reason::ProbeFailed,
    Reason::ProbeSlow,
    Reason::ProbeAbandoned,
    Reason::ProbesSucceeded,
];

#[test]
fn logical_callers_on_every_policy() {
    let seed = support::seed();
    let per_spec = support::cycles().div_ceil(SPECS.len() as u64);
    let mut reasons = Vec::new();
    let mut at_ceiling = 0;
    for (i, spec) in SPECS.iter().enumerate() {
        let started = Instant::now();
        let (chain, tally) = logical::run(spec, seed, i as u64 + 1, per_spec);
        eprintln!(
            "one thread, {}: {} cycles, {} transitions, {} steps in {:?}",
            spec.name,
            chain.cycles,
            chain.checked,
            tally.steps,
            started.elapsed()
        );
        // The chaos happened: each ending, the lease, the quiet edges, the
        // herd (callers told the same instant), many callers holding calls.
        assert!(chain.cycles >= per_spec);
        let t = &tally;
        for (what, n) in [
            ("deliberate panics", t.deliberate_panics),
            ("panicking classifiers", t.classifier_panics),
            ("late verdicts of hung calls", t.late_verdicts),
            ("rounds superseded", chain.rounds_superseded),
            ("quiet edges", t.quiet_edges),
            ("clock jumps", t.jumps),
        ] {
            assert!(n > 0 || per_spec < 100, "{}: no {what}", spec.name);
        }
        if per_spec >= 100 {
            assert!(t.largest_burst >= 20, "{}: {t:?}", spec.name);
            assert!(t.max_held >= 5, "{}: {t:?}", spec.name);
        }
        if spec.name == "backoff_at_the_cap" && per_spec >= 100 {
            // One day less at most 5 % of jitter.
            let day = MAX_DURATION.as_secs_f64();
            assert!(chain.longest_open.as_secs_f64() >= 0.95 * day, "{chain:?}");
        }
        reasons.extend(chain.reasons);
        at_ceiling += chain.at_trip_ceiling;
    }
    if per_spec >= 1_000 {
        for r in MACHINE_REASONS {
            assert!(reasons.contains(&r), "{r:?} never happened");
        }
        assert!(at_ceiling > 0, "the trips in a row never reached 63");
    }
}

#[test]
fn threads_racing_on_every_policy() {
    let seed = support::seed();
    // 100 operations per single-threaded cycle, over the configurations
    // and the threads: 50,000 per thread and configuration by default.
    let ops_per_thread = support::cycles() * 100 / (SPECS.len() * threads::THREADS) as u64;
    let epochs = 20;
    let mut cycles = 0;
    for (i, spec) in SPECS.iter().enumerate() {
        let started = Instant::now();
        let _report = support::Trail::<()>::new(format!("the threads, {}", spec.name), seed);
        let (chain, tally) =
            threads::run(spec, seed, i as u64 + 1, epochs, ops_per_thread / epochs);
        eprintln!(
            "four threads, {}: {} cycles, {} transitions, {} operations in {:?}",
            spec.name,
            chain.cycles,
            chain.checked,
            tally.ops,
            started.elapsed()
        );
        cycles += chain.cycles;
        if ops_per_thread >= 10_000 {
            assert!(chain.cycles > 0 && tally.deliberate_panics > 0 && tally.stale_endings > 0);
            let p = SPECS[i]
                .builder(0)
                .build_config()
                .unwrap()
                .half_open_probes();
            // The bound is reached, so a round admitting one more would show.
            assert_eq!(tally.most_in_flight, p, "{}: {tally:?}", spec.name);
        }
    }
    assert!(cycles > 0);
}

/// **Bug, found by the threads (spec `backoff_at_the_cap`, default seed):
/// a trip by consecutive failures can report a run shorter than the
/// threshold**, down to `consecutive_failures: 0`, though
/// [`Reason::ConsecutiveFailures`] says "`consecutive_failures` failures in
/// a row".
///
/// The sequence, K = 1, one generation of CLOSED: thread A's failure
/// counts the run 0 → 1 (its CAS in `record_closed` via
/// `machine::closed_run`) and decides to trip on run 1; thread B's success
/// ends the run, 1 → 0 (its own CAS); A's trip CAS (`machine::trip`, which
/// checks only the generation) then succeeds from the word B wrote, and
/// `Breaker::describe` reports `from.count()` of that word: 0. The trip
/// itself is the one a sequential history (A's failure, then B's success,
/// stale by then) would make; its report is not: the transition should
/// carry the run the trip was decided on, as it carries the window counts
/// it was decided on. Two threads, one failing and one succeeding, show it
/// within milliseconds (debug or release).
#[test]
#[ignore = "bug: a racing success makes a consecutive-failures trip report a run below K (see the docs)"]
fn a_consecutive_trip_reports_the_run_it_tripped_on() {
    let short: Arc<Mutex<Vec<Transition>>> = Arc::default();
    let trips = Arc::new(AtomicU64::new(0));
    let (sink, count) = (short.clone(), trips.clone());
    let b = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_nanos(1))
        .backoff_off()
        .observer(move |t: &Transition| {
            if t.reason == Reason::ConsecutiveFailures {
                // SeqCst: test bookkeeping.
                count.fetch_add(1, Ordering::SeqCst);
                if t.consecutive_failures < 1 {
                    sink.lock().unwrap().push(*t);
                }
            }
        })
        .build_with_clock(ManualClock::new())
        .unwrap();
    let time = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    std::thread::scope(|s| {
        for failing in [true, false] {
            let (b, time, stop) = (&b, &time, &stop);
            s.spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let t = Nanos::from_nanos(time.fetch_add(1, Ordering::SeqCst));
                    if let Ok(p) = b.try_acquire_at(t) {
                        if failing && !p.is_probe() {
                            p.failure_at(t);
                        } else {
                            p.success_at(t);
                        }
                    }
                }
            });
        }
        while short.lock().unwrap().is_empty() && started.elapsed() < Duration::from_secs(5) {
            std::thread::yield_now();
        }
        stop.store(true, Ordering::SeqCst);
    });
    let short = short.lock().unwrap();
    assert!(
        short.is_empty(),
        "{} of {} trips so far reported a run below K = 1, first: {:?}",
        short.len(),
        trips.load(Ordering::SeqCst),
        short[0]
    );
}
