//! S3: retry makes it worse. 20 requests while the backend times out on
//! every call, each retried up to 3 attempts. Retry alone: 60 backend calls,
//! 0 successes. With failfast (a window with a minimum of 5 calls) the breaker
//! opens after 5 calls, the retry loop does not retry a rejection, and both
//! backend calls and total elapsed time are strictly lower.

use failfast::{Breaker, CallError, Clock, ManualClock, Nanos, RejectReason, State};
use std::cell::Cell;
use std::time::Duration;

const REQUESTS: u32 = 20;
const ATTEMPTS: u32 = 3;
const TIMEOUT: Duration = Duration::from_secs(1);
const RETRY_DELAY: Duration = Duration::from_millis(100);

#[derive(Debug, PartialEq)]
struct TimedOut;

#[derive(Debug, Default, PartialEq)]
struct Run {
    backend_calls: u32,
    successes: u32,
    rejected_attempts: u32,
    requests_failed_fast: u32,
    elapsed: Duration,
}

/// Runs the 20 requests one after another in simulated time.
fn run(clock: &ManualClock, breaker: Option<&Breaker<ManualClock>>) -> Run {
    let start = clock.now();
    let backend_calls = Cell::new(0);
    let backend = || -> Result<(), TimedOut> {
        backend_calls.set(backend_calls.get() + 1);
        clock.advance(TIMEOUT); // the call hangs until the client timeout fires
        Err(TimedOut)
    };
    let mut r = Run::default();
    for _ in 0..REQUESTS {
        let mut reached_backend = false;
        for attempt in 0..ATTEMPTS {
            let result = match breaker {
                None => backend().map_err(CallError::Inner),
                Some(b) => b.call(backend),
            };
            match result {
                Ok(()) => {
                    r.successes += 1;
                    break;
                }
                Err(CallError::Rejected(rejected)) => {
                    // A rejection is not retried: the breaker says the backend is down.
                    assert_eq!(rejected.reason(), RejectReason::Open);
                    assert!(rejected.retry_after().is_some());
                    r.rejected_attempts += 1;
                    if !reached_backend {
                        r.requests_failed_fast += 1;
                    }
                    break;
                }
                Err(CallError::Inner(TimedOut)) => {
                    reached_backend = true;
                    if attempt + 1 < ATTEMPTS {
                        clock.advance(RETRY_DELAY);
                    }
                }
            }
        }
    }
    r.backend_calls = backend_calls.get();
    r.elapsed = clock.now().saturating_duration_since(start);
    r
}

#[test]
fn retry_only_makes_sixty_backend_calls() {
    let clock = ManualClock::new();
    let r = run(&clock, None);
    assert_eq!(r.backend_calls, 60);
    assert_eq!(r.successes, 0);
    assert_eq!(r.elapsed, 20 * (3 * TIMEOUT + 2 * RETRY_DELAY));
}

#[test]
fn failfast_cuts_backend_calls_and_elapsed_time() {
    let retry_only = run(&ManualClock::new(), None);

    let clock = ManualClock::starting_at(Nanos::from_secs(10));
    let breaker = Breaker::builder()
        .failure_rate(0.5)
        .count_window(10)
        .min_calls(5)
        .open_duration(Duration::from_secs(60))
        .count_calls(true)
        .build_with_clock(clock.clone())
        .unwrap();
    let with = run(&clock, Some(&breaker));

    // The first five calls (request 1's three attempts, request 2's first two)
    // open the breaker; request 2's third attempt and the 18 other requests
    // are rejected once each, and never retried.
    assert_eq!(with.backend_calls, 5);
    assert_eq!(with.successes, 0);
    assert_eq!(with.rejected_attempts, 19);
    assert_eq!(with.requests_failed_fast, 18);
    assert_eq!(breaker.state(), State::Open);
    let calls = breaker.snapshot().calls.unwrap();
    assert_eq!((calls.admitted, calls.failures, calls.rejected), (5, 5, 19));

    assert!(
        with.backend_calls < retry_only.backend_calls,
        "backend calls: {} vs {}",
        with.backend_calls,
        retry_only.backend_calls
    );
    assert!(
        with.elapsed < retry_only.elapsed,
        "elapsed: {:?} vs {:?}",
        with.elapsed,
        retry_only.elapsed
    );
    // Request 1: 3 timeouts, 2 delays; request 2: 2 timeouts, 2 delays, then a rejection.
    assert_eq!(with.elapsed, 5 * TIMEOUT + 4 * RETRY_DELAY);
}
