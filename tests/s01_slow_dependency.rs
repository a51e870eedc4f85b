//! S1: the slow dependency that never errors.
//!
//! A price catalog behind a pool of 50 connections answers in 80 ms, then a
//! bad deploy makes it answer 200 OK in 8 s. No error ever arrives: an
//! error-only breaker never opens, while a slow-call breaker (window 20, min
//! 10, threshold 500 ms, rate 50 %) opens at the 10th slow success and rejects
//! the 11th call without running it. A bulkhead of 20 outside the breaker
//! rejects the excess at once and never pollutes the breaker's window.
//!
//! The simulation runs in simulated time: a small discrete-event loop.

use failfast::{
    Breaker, BreakerSnapshot, Bulkhead, BulkheadPermit, ManualClock, Nanos, Permit, Reason,
    RejectReason, State, Transition, WindowCounts,
};
use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

mod common;
use common::{Log, LogTransitions};

const POOL: usize = 50;
const HEALTHY: Duration = Duration::from_millis(80);
const DEGRADED: Duration = Duration::from_secs(8);
const ARRIVAL_EVERY: Duration = Duration::from_millis(5); // 200 calls/s
const BAD_DEPLOY_AT: Nanos = Nanos::from_secs(1);
const END: Nanos = Nanos::from_secs(30);
const OPEN: Duration = Duration::from_secs(10);
const BULKHEAD: usize = 20;

fn slow_call_breaker(clock: &ManualClock, log: Log) -> Breaker<ManualClock> {
    Breaker::builder()
        .count_window(20)
        .min_calls(10)
        .slow_call_threshold(Duration::from_millis(500))
        .slow_call_rate(0.5)
        .open_duration(OPEN)
        .count_calls(true)
        .log_transitions(&log)
        .build_with_clock(clock.clone())
        .unwrap()
}

#[test]
fn opens_at_the_tenth_slow_success_and_the_eleventh_call_does_not_run() {
    let clock = ManualClock::new();
    let events = Arc::default();
    let breaker = slow_call_breaker(&clock, Arc::clone(&events));
    let executions = Cell::new(0u32);
    let catalog = |latency: Duration| {
        breaker.call(|| {
            executions.set(executions.get() + 1);
            clock.advance(latency);
            Ok::<_, ()>("200 OK")
        })
    };
    // A healthy window: 20 fast calls.
    for _ in 0..20 {
        assert_eq!(catalog(HEALTHY), Ok("200 OK"));
    }
    // The bad deploy: 200 OK in 8 s. Nine slow successes are 9 of 20.
    for i in 1..=9 {
        assert_eq!(catalog(DEGRADED), Ok("200 OK"));
        assert_eq!(breaker.state(), State::Closed, "after slow call {i}");
    }
    assert_eq!(catalog(DEGRADED), Ok("200 OK"), "the 10th still succeeds");
    assert_eq!(breaker.state(), State::Open, "10 slow of 20 = 50 %");
    assert_eq!(executions.get(), 30);

    let rejected = catalog(DEGRADED).unwrap_err();
    assert_eq!(rejected.rejected().unwrap().reason(), RejectReason::Open);
    assert_eq!(
        executions.get(),
        30,
        "the 11th call is rejected without running"
    );

    let events = events.lock().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].reason, Reason::SlowCallRate);
    assert_eq!(events[0].window, WindowCounts::new(20, 0, 10));
    assert_eq!(
        breaker.snapshot().failure_rate,
        Some(0.0),
        "the error rate stayed 0 %"
    );
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Guard {
    NoBreaker,
    ErrorOnly,
    SlowCall,
    BulkheadAndSlowCall,
}

#[derive(Debug, Default)]
struct Report {
    arrivals: u64,
    admitted: u64,
    rejected_by_breaker: u64,
    rejected_by_bulkhead: u64,
    executed: u64,
    completed: u64,
    max_pool_busy: usize,
    final_queue: usize,
    latencies: Vec<Duration>,
    /// Callers answered (a response or a rejection) within one second.
    answered_within_1s: u64,
    /// Completions of 8 s calls, and the instant of the 10th.
    slow_completions: u64,
    tenth_slow_completion: Option<Nanos>,
    /// Executions when the breaker first opened.
    executed_at_trip: Option<u64>,
    /// Arrivals and admissions while the first open period lasted.
    arrivals_while_open: u64,
    admitted_while_open: u64,
    /// The breaker's snapshot just before the verdict that tripped it.
    before_trip: Option<BreakerSnapshot>,
    breaker: Option<BreakerSnapshot>,
    transitions: Vec<Transition>,
}

impl Report {
    fn p99(&self) -> Duration {
        let mut l = self.latencies.clone();
        l.sort();
        l[(l.len() * 99) / 100]
    }
}

struct Call<'a> {
    arrived: Nanos,
    _bulkhead: Option<BulkheadPermit<'a>>,
    permit: Option<Permit<'a, ManualClock>>,
}

fn simulate(guard: Guard) -> Report {
    let clock = ManualClock::new();
    let events = Log::default();
    let breaker = match guard {
        Guard::NoBreaker => None,
        Guard::ErrorOnly => Some(
            Breaker::builder()
                .failure_rate(0.5)
                .count_window(20)
                .min_calls(10)
                .count_calls(true)
                .build_with_clock(clock.clone())
                .unwrap(),
        ),
        Guard::SlowCall | Guard::BulkheadAndSlowCall => {
            Some(slow_call_breaker(&clock, Arc::clone(&events)))
        }
    };
    let bulkhead = (guard == Guard::BulkheadAndSlowCall).then(|| Bulkhead::new(BULKHEAD));

    let mut r = Report::default();
    let mut calls: HashMap<u64, Call<'_>> = HashMap::new();
    let mut done: BinaryHeap<Reverse<(Nanos, u64)>> = BinaryHeap::new();
    let mut queue: VecDeque<u64> = VecDeque::new();
    let mut busy = 0usize;
    let mut next_arrival = Nanos::ZERO;
    let mut next_id = 0u64;
    let mut open_until: Option<Nanos> = None;

    let start =
        |id: u64, now: Nanos, busy: &mut usize, r: &mut Report, done: &mut BinaryHeap<_>| {
            *busy += 1;
            r.max_pool_busy = r.max_pool_busy.max(*busy);
            r.executed += 1;
            let latency = if now >= BAD_DEPLOY_AT {
                DEGRADED
            } else {
                HEALTHY
            };
            done.push(Reverse((now + latency, id)));
        };

    loop {
        let completion_first = matches!(done.peek(), Some(Reverse((t, _))) if *t <= next_arrival);
        if completion_first {
            let Reverse((now, id)) = done.pop().unwrap();
            if now > END {
                break;
            }
            clock.set(now);
            busy -= 1;
            let call = calls.remove(&id).unwrap();
            let latency = now.saturating_duration_since(call.arrived);
            r.completed += 1;
            if latency <= Duration::from_secs(1) {
                r.answered_within_1s += 1;
            }
            r.latencies.push(latency);
            let was_slow_service = latency >= DEGRADED;
            if was_slow_service {
                r.slow_completions += 1;
                if r.slow_completions == 10 {
                    r.tenth_slow_completion = Some(now);
                }
            }
            if let Some(permit) = call.permit {
                let before = breaker.as_ref().unwrap().snapshot_at(now);
                if let Some(t) = permit.success_at(now) {
                    if t.to == State::Open && r.executed_at_trip.is_none() {
                        r.executed_at_trip = Some(r.executed);
                        r.before_trip = Some(before);
                        open_until = Some(now + t.open_for.unwrap());
                    }
                }
            }
            if let Some(next) = queue.pop_front() {
                start(next, now, &mut busy, &mut r, &mut done);
            }
        } else {
            let now = next_arrival;
            if now > END {
                break;
            }
            next_arrival = now + ARRIVAL_EVERY;
            clock.set(now);
            r.arrivals += 1;
            let in_first_open = matches!(open_until, Some(u) if now < u);
            if in_first_open {
                r.arrivals_while_open += 1;
            }
            let bulkhead_permit = match &bulkhead {
                None => None,
                Some(b) => match b.try_acquire() {
                    Ok(p) => Some(p),
                    Err(rejected) => {
                        assert_eq!(rejected.reason(), RejectReason::BulkheadFull);
                        r.rejected_by_bulkhead += 1;
                        r.answered_within_1s += 1;
                        continue;
                    }
                },
            };
            let permit = match &breaker {
                None => None,
                Some(b) => match b.try_acquire_at(now) {
                    Ok(p) => Some(p),
                    Err(_) => {
                        r.rejected_by_breaker += 1;
                        r.answered_within_1s += 1;
                        continue; // not run: no connection, no execution
                    }
                },
            };
            r.admitted += 1;
            if in_first_open {
                r.admitted_while_open += 1;
            }
            let id = next_id;
            next_id += 1;
            calls.insert(
                id,
                Call {
                    arrived: now,
                    _bulkhead: bulkhead_permit,
                    permit,
                },
            );
            if busy < POOL {
                start(id, now, &mut busy, &mut r, &mut done);
            } else {
                queue.push_back(id);
            }
        }
    }
    r.final_queue = queue.len();
    r.breaker = breaker.as_ref().map(|b| b.snapshot_at(END));
    drop(calls); // unresolved permits count as ignored
    r.transitions = events.lock().unwrap().clone();
    r
}

#[test]
fn without_a_breaker_the_pool_drains_and_callers_wait() {
    let r = simulate(Guard::NoBreaker);
    assert_eq!(r.arrivals, 6_001);
    assert_eq!(r.admitted, r.arrivals);
    assert_eq!(r.max_pool_busy, POOL, "the whole pool is held by 8 s calls");
    assert!(r.final_queue > 4_000, "queue: {}", r.final_queue);
    // Little's law: 50 connections / 8 s = 6.25 calls/s at most.
    let degraded_completions = r.slow_completions;
    assert!(degraded_completions <= 150, "{degraded_completions}");
    assert!(r.p99() > DEGRADED, "p99 {:?}", r.p99());
}

#[test]
fn an_error_only_breaker_never_opens() {
    let plain = simulate(Guard::NoBreaker);
    let r = simulate(Guard::ErrorOnly);
    let snap = r.breaker.unwrap();
    assert_eq!(snap.state, State::Closed);
    assert_eq!(snap.generation, 0, "never opened");
    assert_eq!(snap.failure_rate, Some(0.0));
    assert_eq!(snap.window.calls, 20);
    assert_eq!(snap.window.failures, 0);
    assert_eq!(r.rejected_by_breaker, 0);
    // It is invisible: the same admissions, executions and latencies.
    assert_eq!(
        (r.admitted, r.executed, r.completed, r.final_queue),
        (
            plain.admitted,
            plain.executed,
            plain.completed,
            plain.final_queue
        )
    );
    assert_eq!(r.latencies, plain.latencies);
}

#[test]
fn a_slow_call_breaker_opens_and_stops_admitting() {
    let plain = simulate(Guard::NoBreaker);
    let r = simulate(Guard::SlowCall);
    let trip = r.transitions[0];
    assert_eq!(
        (trip.from, trip.to, trip.reason),
        (State::Closed, State::Open, Reason::SlowCallRate)
    );
    assert_eq!(
        Some(trip.at),
        r.tenth_slow_completion,
        "opens at the 10th slow success"
    );
    assert_eq!(trip.window, WindowCounts::new(20, 0, 10));
    // While open, every arrival is rejected without running.
    assert_eq!(r.arrivals_while_open, 2_000);
    assert_eq!(r.admitted_while_open, 0);
    assert!(r.rejected_by_breaker >= r.arrivals_while_open);
    assert!(
        r.admitted < plain.admitted / 2,
        "{} vs {}",
        r.admitted,
        plain.admitted
    );
    assert!(
        r.answered_within_1s > 10 * plain.answered_within_1s.max(1),
        "{} vs {}",
        r.answered_within_1s,
        plain.answered_within_1s
    );
    let snap = r.breaker.unwrap();
    let calls = snap.calls.unwrap();
    assert_eq!(calls.admitted, r.admitted);
    assert_eq!(calls.rejected, r.rejected_by_breaker);
    assert_eq!(snap.failure_rate, Some(0.0), "never a single error");
}

#[test]
fn a_bulkhead_outside_the_breaker_never_pollutes_its_window() {
    let r = simulate(Guard::BulkheadAndSlowCall);
    assert!(r.max_pool_busy <= BULKHEAD, "pool busy {}", r.max_pool_busy);
    assert_eq!(r.final_queue, 0, "nothing ever waits for a connection");
    assert!(r.rejected_by_bulkhead > 1_000, "{}", r.rejected_by_bulkhead);
    assert!(
        r.latencies.iter().all(|l| *l <= DEGRADED),
        "callers never queue"
    );

    // Thousands of bulkhead rejections, none seen by the breaker.
    let before = r.before_trip.expect("the breaker opened");
    let calls = before.calls.unwrap();
    assert_eq!(calls.rejected, 0, "no rejection of its own before the trip");
    assert_eq!(before.window, WindowCounts::new(20, 0, 9));
    let trip = r.transitions[0];
    assert_eq!(Some(trip.at), r.tenth_slow_completion);
    assert_eq!(trip.window, WindowCounts::new(20, 0, 10));
    let snap = r.breaker.unwrap();
    let calls = snap.calls.unwrap();
    assert_eq!(
        calls.admitted + calls.rejected,
        r.arrivals - r.rejected_by_bulkhead,
        "the breaker saw exactly the calls the bulkhead let through"
    );
    // Trip, one probe after 10 s (an 8 s success: slow), reopen.
    let seen: Vec<Reason> = r.transitions.iter().map(|t| t.reason).collect();
    assert_eq!(
        seen,
        [Reason::SlowCallRate, Reason::OpenElapsed, Reason::ProbeSlow]
    );
    assert_eq!(snap.state, State::Open);
}
