//! S8: consecutive failures with structured transitions (PIX anti-fraud).
//!
//! Three infrastructure failures in a row open the breaker; a 422 resets the
//! run; following calls fail in ~0 ms without touching the service; one probe
//! after the open time while concurrent calls fail fast; every transition
//! emits exactly one structured event with from, to, reason and the counts.

use failfast::{
    Breaker, CallError, Clock, ManualClock, Nanos, Outcome, Reason, RejectReason, State, Transition,
};
use std::cell::Cell;
use std::time::Duration;

mod common;
use common::{Log, LogTransitions};

const OPEN: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy)]
enum AntiFraud {
    Unprocessable, // 422: a business "no"
    Unavailable,   // 503
    Timeout,
    Refused,
}

fn classify(r: &Result<(), AntiFraud>) -> Outcome {
    match r {
        Ok(()) => Outcome::Success,
        Err(AntiFraud::Unprocessable) => Outcome::Ignored,
        Err(_) => Outcome::Failure,
    }
}

struct Pix {
    clock: ManualClock,
    breaker: Breaker<ManualClock>,
    events: Log,
    service_calls: Cell<u32>,
}

impl Pix {
    fn new() -> Pix {
        let clock = ManualClock::starting_at(Nanos::from_secs(3_600));
        let events = Log::default();
        let breaker = Breaker::builder()
            .consecutive_failures(3)
            .open_duration(OPEN)
            .id(7)
            .log_transitions(&events)
            .build_with_clock(clock.clone())
            .unwrap();
        Pix {
            clock,
            breaker,
            events,
            service_calls: Cell::new(0),
        }
    }

    /// One payment: the anti-fraud service answers `answer` after `took`.
    fn pay(
        &self,
        answer: Result<(), AntiFraud>,
        took: Duration,
    ) -> Result<(), CallError<AntiFraud>> {
        self.breaker.call_with(classify, || {
            self.service_calls.set(self.service_calls.get() + 1);
            self.clock.advance(took);
            answer
        })
    }

    fn events(&self) -> Vec<Transition> {
        self.events.lock().unwrap().clone()
    }
}

#[test]
fn a_422_resets_the_run() {
    let pix = Pix::new();
    let ms = Duration::from_millis(20);
    for _ in 0..50 {
        assert!(pix.pay(Err(AntiFraud::Unavailable), ms).is_err());
        assert!(pix.pay(Err(AntiFraud::Timeout), ms).is_err());
        assert!(matches!(
            pix.pay(Err(AntiFraud::Unprocessable), ms),
            Err(CallError::Inner(AntiFraud::Unprocessable))
        ));
    }
    assert_eq!(pix.breaker.state(), State::Closed);
    assert_eq!(pix.service_calls.get(), 150);
    assert!(pix.events().is_empty());
}

#[test]
fn three_failures_open_one_probe_closes_one_event_per_transition() {
    let pix = Pix::new();
    let ms = Duration::from_millis(20);

    // 503, timeout, connection refused: the third opens.
    pix.pay(Ok(()), ms).unwrap();
    pix.pay(Err(AntiFraud::Unavailable), ms).unwrap_err();
    pix.pay(Err(AntiFraud::Timeout), Duration::from_secs(2))
        .unwrap_err();
    assert_eq!(pix.breaker.snapshot().consecutive_failures, 2);
    pix.pay(Err(AntiFraud::Refused), ms).unwrap_err();
    let tripped_at = pix.clock.now();
    assert_eq!(pix.breaker.state(), State::Open);
    assert_eq!(pix.service_calls.get(), 4);

    let events = pix.events();
    assert_eq!(events.len(), 1, "exactly one event for the trip");
    let trip = events[0];
    assert_eq!(
        (trip.from, trip.to, trip.reason),
        (State::Closed, State::Open, Reason::ConsecutiveFailures)
    );
    assert_eq!(trip.reason.as_str(), "consecutive_failures");
    assert_eq!(trip.consecutive_failures, 3, "the counts that caused it");
    assert_eq!(trip.generation, 1);
    assert_eq!(trip.at, tripped_at);
    assert_eq!(trip.breaker_id, 7);
    assert_eq!(trip.trips_in_a_row, 1);
    assert_eq!(trip.open_for, Some(OPEN));

    // Following calls fail at once, without touching the service, for 30 s.
    for _ in 0..100 {
        let err = pix.pay(Ok(()), ms).unwrap_err();
        assert_eq!(err.rejected().unwrap().reason(), RejectReason::Open);
        pix.clock.advance(Duration::from_millis(299));
    }
    assert_eq!(pix.service_calls.get(), 4, "no call reached the service");
    pix.clock.set(tripped_at + OPEN);

    // One probe; concurrent payments fail fast while it runs.
    let probe = pix.breaker.try_acquire().expect("the probe");
    assert!(probe.is_probe());
    for _ in 0..10 {
        let err = pix.pay(Ok(()), ms).unwrap_err();
        let rejected = err.rejected().unwrap();
        assert_eq!(rejected.reason(), RejectReason::HalfOpenFull);
        assert!(rejected.retry_after().is_some());
    }
    assert_eq!(pix.service_calls.get(), 4);
    pix.clock.advance(ms);
    let closed = probe.record(classify(&Ok(()))).expect("the probe closes");
    assert_eq!(pix.breaker.state(), State::Closed);

    let events = pix.events();
    assert_eq!(events.len(), 3, "trip, half-open, close: {events:#?}");
    assert_eq!(events[2], closed, "the event is the returned transition");
    let half = events[1];
    assert_eq!(
        (half.from, half.to, half.reason, half.generation, half.at),
        (
            State::Open,
            State::HalfOpen,
            Reason::OpenElapsed,
            2,
            tripped_at + OPEN
        )
    );
    assert_eq!(half.trips_in_a_row, 1);
    assert_eq!(half.open_for, None);
    assert_eq!(
        (closed.from, closed.to, closed.reason, closed.generation),
        (State::HalfOpen, State::Closed, Reason::ProbesSucceeded, 3)
    );
    assert_eq!(closed.probe_successes, 1, "the one probe that closed it");
    assert_eq!(closed.trips_in_a_row, 0);
    assert_eq!(closed.at, tripped_at + OPEN + ms);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.generation, i as u32 + 1);
    }
    assert_eq!(pix.breaker.snapshot().generation, 3);

    pix.pay(Ok(()), ms).unwrap();
    assert_eq!(pix.service_calls.get(), 5);
}

#[test]
fn the_open_time_counts_from_the_failure_not_from_the_clock_origin() {
    // A breaker that does not time calls: verdicts through `failure()` must
    // still stamp the trip with the real time.
    let pix = Pix::new();
    for _ in 0..3 {
        pix.breaker.try_acquire().unwrap().failure();
    }
    let tripped = pix.events()[0].at;
    assert_eq!(tripped, Nanos::from_secs(3_600));
    let rejected = pix
        .breaker
        .try_acquire()
        .expect_err("no probe right after the trip");
    assert_eq!(rejected.retry_after(), Some(OPEN));
}

#[test]
fn a_failing_probe_reopens_with_one_event() {
    let pix = Pix::new();
    for _ in 0..3 {
        pix.pay(Err(AntiFraud::Unavailable), Duration::ZERO)
            .unwrap_err();
    }
    pix.clock.advance(OPEN);
    pix.pay(Err(AntiFraud::Timeout), Duration::from_secs(2))
        .unwrap_err();
    let events = pix.events();
    let reasons: Vec<_> = events.iter().map(|e| (e.from, e.to, e.reason)).collect();
    assert_eq!(
        reasons,
        [
            (State::Closed, State::Open, Reason::ConsecutiveFailures),
            (State::Open, State::HalfOpen, Reason::OpenElapsed),
            (State::HalfOpen, State::Open, Reason::ProbeFailed),
        ]
    );
    let reopen = events[2];
    assert_eq!(reopen.trips_in_a_row, 2);
    assert_eq!(reopen.probe_successes, 0);
    assert_eq!(reopen.open_for, Some(2 * OPEN));
    assert_eq!(reopen.at, pix.clock.now());
}
