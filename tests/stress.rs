//! Stress: 4 threads × 250k operations on one breaker, mixed verdicts
//! (success, failure, ignored, dropped, slow), a moving clock passed in with
//! `_at(now)`, a small open duration so the breaker cycles through every
//! state. At the end: conservation of permits, exactly one observer event per
//! generation with a consistent chain, and a legal final state.

use failfast::{Breaker, ManualClock, Nanos, Permit, Reason, State};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Duration;

mod common;
use common::{Log, LogTransitions};

const THREADS: usize = 4;
const OPS: u64 = 250_000;
/// Simulated nanoseconds per operation, across all threads.
const STEP_NS: u64 = 50;
/// Calls held for a few operations come out slow.
const SLOW: Duration = Duration::from_micros(5);
const WINDOW: u32 = 16;
const MAX_PENDING: usize = 4;

#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    admitted: u64,
    rejected: u64,
    successes: u64,
    failures: u64,
    ignored: u64,
    /// Dropped without a verdict: the clock the drop reads stands still, so
    /// every drop is early and neutral.
    dropped: u64,
    slow: u64,
    resets: u64,
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, o: Tally) {
        self.admitted += o.admitted;
        self.rejected += o.rejected;
        self.successes += o.successes;
        self.failures += o.failures;
        self.ignored += o.ignored;
        self.dropped += o.dropped;
        self.slow += o.slow;
        self.resets += o.resets;
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn worker(index: usize, b: &Breaker<ManualClock>, time: &AtomicU64, start: &Barrier) -> Tally {
    start.wait(); // first: nothing before it may panic and strand the others
    let mut rng =
        Rng(0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
    let mut t = Tally::default();
    let mut pending: Vec<Permit<'_, ManualClock>> = Vec::with_capacity(MAX_PENDING);
    let mut parked: Option<(Permit<'_, ManualClock>, u64)> = None;
    let tick = || Nanos::from_nanos(time.fetch_add(STEP_NS, Ordering::Relaxed) + STEP_NS);
    for i in 0..OPS {
        let now = tick();
        // Alternating phases: a sick dependency, then a healthy one.
        let sick = (i / 2_000) % 2 == 0;
        if index == 0 && i % 20_000 == 10_000 {
            let r = b.reset_at(now).expect("reset is always a transition");
            assert_eq!(r.to, State::Closed);
            t.resets += 1;
        }
        if pending.len() < MAX_PENDING && (pending.is_empty() || rng.below(2) == 0) {
            match b.try_acquire_at(now) {
                Ok(p) => {
                    t.admitted += 1;
                    pending.push(p);
                }
                Err(r) => {
                    t.rejected += 1;
                    assert!(r.retry_after().is_some(), "never forced open here");
                }
            }
            continue;
        }
        let mut p = pending.swap_remove(rng.below(pending.len() as u64) as usize);
        // Now and then a call hangs for a while (a slow call, or a hung
        // probe that the lease must supersede): park it, report it later.
        match parked.take() {
            Some((held, until)) if i >= until => p = swap_in(&mut pending, p, held),
            Some(still) => parked = Some(still),
            None if rng.below(200) == 0 => {
                parked = Some((p, i + 500));
                continue;
            }
            None => {}
        }
        let roll = rng.below(100);
        let fail_below = if sick { 60 } else { 5 };
        // Verdicts are reported at the current time; a permit held pending
        // across many operations is a slow call.
        let end = now;
        let slow = end.saturating_duration_since(p.started_at()) >= SLOW;
        if roll < fail_below {
            t.failures += 1;
            t.slow += u64::from(slow);
            let _ = p.failure_at(end);
        } else if roll < 85 {
            t.successes += 1;
            t.slow += u64::from(slow);
            let _ = p.success_at(end);
        } else if roll < 93 {
            t.ignored += 1;
            let _ = p.ignore();
        } else {
            t.dropped += 1; // dropped early without a verdict: neutral
            drop(p);
        }
    }
    if let Some((held, _)) = parked {
        pending.push(held);
    }
    t.dropped += pending.len() as u64;
    drop(pending);
    t
}

/// Puts `current` back among the pending permits and returns `held` to be
/// reported now instead.
fn swap_in<'a>(
    pending: &mut Vec<Permit<'a, ManualClock>>,
    current: Permit<'a, ManualClock>,
    held: Permit<'a, ManualClock>,
) -> Permit<'a, ManualClock> {
    pending.push(current);
    held
}

#[test]
fn conservation_one_event_per_generation_legal_final_state() {
    let events = Log::default();
    let b = Breaker::builder()
        .consecutive_failures(4)
        .failure_rate(0.5)
        .slow_call_rate(0.6)
        .slow_call_threshold(SLOW)
        .count_window(WINDOW)
        .min_calls(8)
        .half_open_probes(2)
        .open_duration(Duration::from_micros(2))
        .probe_lease(Duration::from_micros(10))
        .backoff(2.0, Duration::from_micros(16))
        .jitter(0.3)
        .count_calls(true)
        .id(0xFA11)
        .log_transitions(&events)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let time = AtomicU64::new(0);
    let start = Barrier::new(THREADS);

    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|i| {
                let (b, time, start) = (&b, &time, &start);
                s.spawn(move || worker(i, b, time, start))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut total = Tally::default();
    for t in tallies {
        total += t;
    }
    let end = Nanos::from_nanos(time.load(Ordering::Relaxed));
    let snap = b.snapshot_at(end);

    // Conservation: every admitted permit got exactly one verdict or an ignore.
    let calls = snap.calls.unwrap();
    assert_eq!(calls.admitted, total.admitted);
    assert_eq!(calls.rejected, total.rejected);
    assert_eq!(calls.successes, total.successes);
    assert_eq!(calls.failures, total.failures);
    assert_eq!(calls.ignored, total.ignored);
    assert_eq!(calls.dropped, total.dropped);
    assert_eq!(calls.slow, total.slow);
    assert_eq!(
        calls.admitted,
        calls.successes + calls.failures + calls.ignored + calls.dropped
    );

    // Exactly one observer event per generation change, in a consistent chain.
    let mut events = events.lock().unwrap().clone();
    events.sort_by_key(|e| e.generation);
    assert_eq!(events.len() as u64, u64::from(snap.generation));
    let generations: HashSet<u32> = events.iter().map(|e| e.generation).collect();
    assert_eq!(
        generations.len(),
        events.len(),
        "no generation reported twice"
    );
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.generation, i as u32 + 1, "generations are exactly 1..=N");
        let previous = if i == 0 {
            State::Closed
        } else {
            events[i - 1].to
        };
        assert_eq!(e.from, previous, "event {i} starts where {} ended", i);
        match (e.from, e.to) {
            (_, State::Closed) if e.reason == Reason::Reset => {}
            (State::Closed, State::Open) => assert!(e.reason.is_trip()),
            (State::Open, State::HalfOpen) => assert_eq!(e.reason, Reason::OpenElapsed),
            (State::HalfOpen, State::HalfOpen) => {
                assert_eq!(e.reason, Reason::ProbeLeaseExpired)
            }
            (State::HalfOpen, State::Open) => {
                assert!(matches!(e.reason, Reason::ProbeFailed | Reason::ProbeSlow))
            }
            (State::HalfOpen, State::Closed) => {
                assert_eq!(e.reason, Reason::ProbesSucceeded);
                assert_eq!(e.probe_successes, 2);
            }
            other => panic!("illegal transition {other:?}: {e:?}"),
        }
        if e.to == State::Open {
            assert!(e.trips_in_a_row >= 1 && e.open_for.is_some());
        }
    }
    assert_eq!(events.last().map_or(State::Closed, |e| e.to), snap.state);
    let resets = events.iter().filter(|e| e.reason == Reason::Reset).count() as u64;
    assert_eq!(resets, total.resets);

    // It really cycled through every state, many times.
    for (state, at_least) in [
        (State::Open, 50),
        (State::HalfOpen, 50),
        (State::Closed, 20),
    ] {
        let n = events.iter().filter(|e| e.to == state).count();
        assert!(n >= at_least, "entered {state} only {n} times");
    }
    for reason in [
        Reason::OpenElapsed,
        Reason::ProbesSucceeded,
        Reason::ProbeFailed,
        Reason::ConsecutiveFailures,
        Reason::FailureRate,
    ] {
        assert!(
            events.iter().any(|e| e.reason == reason),
            "{reason} never seen"
        );
    }
    assert!(events
        .iter()
        .any(|e| matches!(e.reason, Reason::ProbeFailed | Reason::ProbeSlow)));

    // A legal final state.
    match snap.state {
        State::Closed => assert_eq!(snap.trips_in_a_row, 0),
        State::Open | State::HalfOpen => {
            // Trips in a row are set on entering Open and kept through the
            // probe rounds that follow.
            let last_open = events.iter().rev().find(|e| e.to == State::Open);
            assert_eq!(
                Some(snap.trips_in_a_row),
                last_open.map(|e| e.trips_in_a_row)
            );
        }
        other => panic!("no manual mode was used, found {other}"),
    }
    assert!(snap.window.calls <= WINDOW);
    assert!(snap.window.failures <= snap.window.calls);
    assert!(snap.window.slow <= snap.window.calls);
    // And never wedged: with every permit resolved, a later request gets in.
    let later = end + Duration::from_secs(1);
    let permit = b.try_acquire_at(later).expect("not wedged");
    let admitted_in = snap.state;
    let t = permit.success_at(later);
    if admitted_in == State::Closed {
        assert!(t.is_none());
    }
    assert_ne!(b.state(), State::Open, "a fast success never opens");
}
