//! S2: the five tests of the slow-call breaker.
//!
//! Window 10, min calls 10, slow threshold 500 ms, slow-call rate 50 %, call
//! timeout 2 s, open 10 s, 3 half-open probes.

use failfast::{
    Breaker, CallError, Clock, ManualClock, Nanos, Reason, RejectReason, State, Transition,
};
use std::cell::Cell;
use std::time::Duration;

mod common;
use common::{Log, LogTransitions};

const CALL_TIMEOUT: Duration = Duration::from_secs(2);
const OPEN: Duration = Duration::from_secs(10);

struct Fixture {
    clock: ManualClock,
    breaker: Breaker<ManualClock>,
    events: Log,
}

fn fixture() -> Fixture {
    let clock = ManualClock::starting_at(Nanos::from_secs(1_000));
    let events = Log::default();
    let breaker = Breaker::builder()
        .count_window(10)
        .min_calls(10)
        .slow_call_threshold(Duration::from_millis(500))
        .slow_call_rate(0.5)
        .open_duration(OPEN)
        .half_open_probes(3)
        .count_calls(true)
        .log_transitions(&events)
        .build_with_clock(clock.clone())
        .unwrap();
    Fixture {
        clock,
        breaker,
        events,
    }
}

impl Fixture {
    /// A call through `Breaker::call` that takes `took` and returns `Ok`.
    fn slow_ok(&self, took: Duration, ran: &Cell<u32>) -> Result<(), CallError<()>> {
        self.breaker.call(|| {
            ran.set(ran.get() + 1);
            self.clock.advance(took);
            Ok(())
        })
    }

    /// Ten calls that each return success after 800 ms: the breaker opens.
    fn open_with_ten_slow_successes(&self) -> Nanos {
        let ran = Cell::new(0);
        for i in 0..10 {
            assert_eq!(
                self.breaker.state(),
                State::Closed,
                "closed before call {i}"
            );
            self.slow_ok(Duration::from_millis(800), &ran).unwrap();
        }
        assert_eq!(ran.get(), 10);
        assert_eq!(self.breaker.state(), State::Open);
        self.clock.now()
    }

    fn events(&self) -> Vec<Transition> {
        self.events.lock().unwrap().clone()
    }
}

#[test]
fn s2_1_ten_slow_successes_open_and_the_eleventh_does_not_run() {
    let f = fixture();
    let tripped = f.open_with_ten_slow_successes();

    let ran = Cell::new(0);
    let err = f
        .slow_ok(Duration::from_millis(1), &ran)
        .expect_err("the 11th call is rejected");
    assert_eq!(ran.get(), 0, "the 11th call must not execute");
    let rejected = err.rejected().expect("a rejection, not an inner error");
    assert_eq!(rejected.reason(), RejectReason::Open);
    assert_eq!(rejected.retry_after(), Some(OPEN));

    let events = f.events();
    assert_eq!(events.len(), 1);
    let t = events[0];
    assert_eq!(
        (t.from, t.to, t.reason),
        (State::Closed, State::Open, Reason::SlowCallRate)
    );
    assert_eq!(t.at, tripped);
    assert_eq!(
        (t.window.calls, t.window.slow, t.window.failures),
        (10, 10, 0)
    );
    assert_eq!(t.open_for, Some(OPEN));

    let snap = f.breaker.snapshot();
    let calls = snap.calls.unwrap();
    assert_eq!((calls.admitted, calls.rejected), (10, 1));
    assert_eq!((calls.successes, calls.slow, calls.failures), (10, 10, 0));
}

#[test]
fn s2_2_three_fast_probes_close_it_after_the_open_time() {
    let f = fixture();
    f.open_with_ten_slow_successes();

    f.clock.advance(OPEN - Duration::from_nanos(1));
    let early = f.breaker.try_acquire().unwrap_err();
    assert_eq!(early.retry_after(), Some(Duration::from_nanos(1)));
    f.clock.advance(Duration::from_nanos(1));

    let p1 = f.breaker.try_acquire().expect("first probe");
    let p2 = f.breaker.try_acquire().expect("second probe");
    let p3 = f.breaker.try_acquire().expect("third probe");
    assert!(p1.is_probe() && p2.is_probe() && p3.is_probe());
    let full = f.breaker.try_acquire().unwrap_err();
    assert_eq!(full.reason(), RejectReason::HalfOpenFull);
    assert_eq!(f.breaker.state(), State::HalfOpen);

    f.clock.advance(Duration::from_millis(50));
    assert!(p1.success().is_none());
    assert!(p2.success().is_none());
    assert_eq!(
        f.breaker.state(),
        State::HalfOpen,
        "two of three is not enough"
    );
    let closed = p3.success().expect("the third fast success closes");
    assert_eq!(
        (closed.from, closed.to, closed.reason),
        (State::HalfOpen, State::Closed, Reason::ProbesSucceeded)
    );
    assert_eq!(closed.trips_in_a_row, 0);
    assert_eq!(f.breaker.state(), State::Closed);

    // Closed again with a fresh window: calls flow.
    let snap = f.breaker.snapshot();
    assert_eq!(snap.window.calls, 0);
    let ran = Cell::new(0);
    f.slow_ok(Duration::from_millis(10), &ran).unwrap();
    assert_eq!(ran.get(), 1);
    let reasons: Vec<Reason> = f.events().iter().map(|t| t.reason).collect();
    assert_eq!(
        reasons,
        [
            Reason::SlowCallRate,
            Reason::OpenElapsed,
            Reason::ProbesSucceeded
        ]
    );
}

#[test]
fn s2_3_a_probe_that_succeeds_after_three_seconds_reopens() {
    let f = fixture();
    f.open_with_ten_slow_successes();
    f.clock.advance(OPEN);

    let ran = Cell::new(0);
    // A success, but after 3 s: slower than the 500 ms threshold.
    f.slow_ok(Duration::from_secs(3), &ran).unwrap();
    assert_eq!(ran.get(), 1);
    assert_eq!(f.breaker.state(), State::Open);
    let events = f.events();
    let reopen = events.last().unwrap();
    assert_eq!(
        (reopen.from, reopen.to, reopen.reason),
        (State::HalfOpen, State::Open, Reason::ProbeSlow)
    );
    assert_eq!(reopen.trips_in_a_row, 2);
    // The second open period backs off (×2 by default) and starts now.
    assert_eq!(reopen.open_for, Some(2 * OPEN));
    let rejected = f.breaker.try_acquire().unwrap_err();
    assert_eq!(rejected.retry_after(), Some(2 * OPEN));
}

#[test]
fn s2_4_one_slow_call_among_fast_ones_does_not_open() {
    let f = fixture();
    let ran = Cell::new(0);
    for i in 0..30 {
        // Calls 9, 19, 29 are slow: one per window of ten.
        let took = if i % 10 == 9 { 800 } else { 20 };
        f.slow_ok(Duration::from_millis(took), &ran).unwrap();
    }
    assert_eq!(ran.get(), 30);
    assert_eq!(f.breaker.state(), State::Closed);
    let snap = f.breaker.snapshot();
    assert_eq!(snap.generation, 0);
    assert_eq!((snap.window.calls, snap.window.slow), (10, 1));
    assert_eq!(snap.slow_call_rate, Some(0.1));
    assert!(f.events().is_empty());
}

#[test]
fn s2_5_a_call_that_never_answers_is_a_failure_and_a_slow_call() {
    let f = fixture();
    for i in 0..10u32 {
        let permit = f.breaker.try_acquire().unwrap();
        let started = permit.started_at();
        // The dependency never answers; the caller's 2 s timeout fires.
        f.clock.advance(CALL_TIMEOUT);
        let fired = started + CALL_TIMEOUT;
        let t = permit.failure_at(fired);
        let snap = f.breaker.snapshot();
        if i < 9 {
            assert!(t.is_none());
            assert_eq!(snap.window.failures, i + 1);
            assert_eq!(snap.window.slow, i + 1, "a timeout is also a slow call");
        } else {
            let t = t.expect("ten timeouts: 100 % slow");
            assert_eq!(t.reason, Reason::SlowCallRate);
            assert_eq!(
                (t.window.calls, t.window.failures, t.window.slow),
                (10, 10, 10)
            );
        }
    }
    let calls = f.breaker.snapshot().calls.unwrap();
    assert_eq!((calls.failures, calls.slow, calls.successes), (10, 10, 0));
}
