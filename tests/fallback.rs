//! Explicit fallbacks on the plain API: `call_or_else` and
//! `call_async_or_else` answer a rejected call from the fallback, marked as
//! such, and never run the fallback for an admitted call.

mod poll;

use poll::block_on;
use std::cell::Cell;
use std::time::Duration;

use failfast::{Answer, Breaker, ManualClock, RejectReason, State};

fn open_breaker(clock: &ManualClock) -> Breaker<ManualClock> {
    let breaker = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(10))
        .jitter(0.0)
        .build_with_clock(clock.clone())
        .unwrap();
    assert_eq!(
        breaker
            .call(|| Err::<(), _>("boom"))
            .unwrap_err()
            .into_inner(),
        Some("boom")
    );
    assert_eq!(breaker.state(), State::Open);
    breaker
}

#[test]
fn an_open_breaker_calls_the_fallback_with_the_rejection_and_marks_its_value() {
    let clock = ManualClock::new();
    let breaker = open_breaker(&clock);
    clock.advance(Duration::from_secs(4));
    let ran = Cell::new(false);
    let answer = breaker
        .call_or_else(
            || {
                ran.set(true);
                Ok::<_, ()>("fresh")
            },
            |rejected| {
                assert_eq!(rejected.reason(), RejectReason::Open);
                assert_eq!(rejected.retry_after(), Some(Duration::from_secs(6)));
                "cached"
            },
        )
        .unwrap();
    assert!(!ran.get(), "the rejected call did not run");
    assert!(answer.is_fallback() && !answer.is_fresh());
    assert_eq!(
        answer.rejected().map(|r| r.reason()),
        Some(RejectReason::Open)
    );
    assert_eq!(answer.clone().fresh(), None, "a fallback is never fresh");
    match answer {
        Answer::Fallback { value, rejected } => {
            assert_eq!(value, "cached");
            assert_eq!(rejected.retry_after(), Some(Duration::from_secs(6)));
        }
        other => panic!("expected a fallback, got {other:?}"),
    }
}

#[test]
fn a_closed_breaker_never_calls_the_fallback() {
    let breaker = Breaker::builder().consecutive_failures(3).build().unwrap();
    for i in 0..10 {
        let answer = breaker.call_or_else(|| Ok::<_, ()>(i), |_| panic!("fallback called"));
        assert_eq!(answer, Ok(Answer::Fresh(i)));
        assert_eq!(answer.unwrap().rejected(), None);
    }
    // A failure is the caller's error, not a fallback; it still counts.
    let failed = breaker.call_or_else(|| Err::<u32, _>("503"), |_| panic!("fallback called"));
    assert_eq!(failed, Err("503"));
    assert_eq!(breaker.snapshot().consecutive_failures, 1);
}

#[test]
fn a_forced_open_breaker_gives_the_fallback_no_retry_time() {
    let breaker = Breaker::builder().consecutive_failures(3).build().unwrap();
    breaker.force_open();
    let answer = breaker.call_or_else(
        || Ok::<_, ()>(1),
        |r| {
            assert_eq!(r.reason(), RejectReason::ForcedOpen);
            assert_eq!(r.retry_after(), None);
            0
        },
    );
    assert_eq!(answer.unwrap().map(|v| v + 1).into_inner(), 1);
}

#[test]
fn the_async_fallback_answers_only_rejected_calls() {
    let clock = ManualClock::new();
    let breaker = open_breaker(&clock);
    let answer = block_on(breaker.call_async_or_else(
        async { Ok::<_, ()>("primary") },
        |rejected| async move {
            assert_eq!(rejected.reason(), RejectReason::Open);
            "secondary"
        },
    ))
    .unwrap();
    assert_eq!(
        answer.as_ref().rejected().map(|r| r.reason()),
        Some(RejectReason::Open)
    );
    assert_eq!(answer.as_ref().into_inner(), &"secondary");
    assert!(answer.is_fallback());

    // After the open period the call is admitted (the probe), and fresh.
    clock.advance(Duration::from_secs(10));
    let answer = block_on(
        breaker.call_async_or_else(async { Ok::<_, ()>("primary") }, |_| async {
            panic!("fallback called")
        }),
    );
    assert_eq!(answer, Ok(Answer::Fresh("primary")));
    assert_eq!(breaker.state(), State::Closed, "the probe closed it");
}

#[test]
fn a_panic_in_the_call_counts_as_a_failure_and_the_fallback_stays_out() {
    let breaker = Breaker::builder().consecutive_failures(1).build().unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        breaker.call_or_else(|| -> Result<u8, ()> { panic!("in the call") }, |_| 0)
    }));
    assert!(caught.is_err(), "the panic went on unchanged");
    assert_eq!(breaker.state(), State::Open, "and counted as a failure");
}
