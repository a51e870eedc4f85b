//! S4: business errors (a declined card, HTTP 400/422) prove the dependency is
//! up. They never open the breaker, and they end a run of consecutive failures
//! like a success. Only infrastructure failures count.

use failfast::{Breaker, CallError, ManualClock, Nanos, Outcome, Reason, State};
use std::time::Duration;

/// What the payment service answered.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Answer {
    Declined(u16), // 400, 402, 422: a business "no"
    Unavailable,   // 503
    Timeout,
    ConnectionRefused,
}

fn classify(r: &Result<&'static str, Answer>) -> Outcome {
    match r {
        Ok(_) => Outcome::Success,
        Err(Answer::Declined(_)) => Outcome::Ignored,
        Err(Answer::Unavailable | Answer::Timeout | Answer::ConnectionRefused) => Outcome::Failure,
    }
}

fn pay(breaker: &Breaker<ManualClock>, answer: Result<&'static str, Answer>) -> bool {
    match breaker.call_with(classify, || answer) {
        Ok(_) | Err(CallError::Inner(_)) => true,
        Err(CallError::Rejected(_)) => false,
    }
}

#[test]
fn any_number_of_declines_never_opens_a_rate_breaker() {
    let breaker = Breaker::builder()
        .failure_rate(0.5)
        .count_window(10)
        .min_calls(5)
        .count_calls(true)
        .build_with_clock(ManualClock::new())
        .unwrap();
    for i in 0..10_000u32 {
        let code = [400, 402, 422][(i % 3) as usize];
        assert!(
            pay(&breaker, Err(Answer::Declined(code))),
            "call {i} rejected"
        );
    }
    let snap = breaker.snapshot();
    assert_eq!(snap.state, State::Closed);
    assert_eq!(snap.generation, 0);
    assert_eq!(snap.window.calls, 0, "declines never enter the window");
    assert_eq!(snap.failure_rate, None, "no call to judge a rate by");
    let calls = snap.calls.unwrap();
    assert_eq!(
        (calls.ignored, calls.failures, calls.successes),
        (10_000, 0, 0)
    );

    // Declines do not count toward min_calls either: 4 failures among
    // thousands of declines are 4 calls, below min_calls 5 …
    for _ in 0..4 {
        assert!(pay(&breaker, Err(Answer::Unavailable)));
        for _ in 0..100 {
            assert!(pay(&breaker, Err(Answer::Declined(422))));
        }
    }
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().window.calls, 4);
    // … and the fifth infrastructure failure makes 5 of 5.
    assert!(pay(&breaker, Err(Answer::Timeout)));
    assert_eq!(breaker.state(), State::Open);
    assert!(!pay(&breaker, Err(Answer::Declined(400))), "open: rejected");
}

#[test]
fn a_decline_resets_the_consecutive_run_like_a_success() {
    let breaker = Breaker::builder()
        .consecutive_failures(3)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let failures = [
        Answer::Unavailable,
        Answer::Timeout,
        Answer::ConnectionRefused,
    ];
    for round in 0..100 {
        // Two failures, then a decline: the run never reaches 3.
        assert!(pay(&breaker, Err(failures[round % 3])));
        assert!(pay(&breaker, Err(failures[(round + 1) % 3])));
        assert_eq!(breaker.snapshot().consecutive_failures, 2);
        assert!(pay(&breaker, Err(Answer::Declined(422))));
        assert_eq!(breaker.snapshot().consecutive_failures, 0, "round {round}");
    }
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().generation, 0);

    // A success resets it the same way.
    assert!(pay(&breaker, Err(Answer::Timeout)));
    assert!(pay(&breaker, Err(Answer::Timeout)));
    assert!(pay(&breaker, Ok("paid")));
    assert_eq!(breaker.snapshot().consecutive_failures, 0);

    // Three infrastructure failures in a row do open it.
    for (i, f) in failures.iter().enumerate() {
        let permit = breaker.try_acquire_at(Nanos::from_secs(1)).unwrap();
        let t = permit.record_at(classify(&Err(*f)), Nanos::from_secs(1));
        assert_eq!(t.is_some(), i == 2);
    }
    assert_eq!(breaker.state(), State::Open);
}

#[test]
fn a_declined_probe_neither_closes_nor_reopens_and_frees_its_slot() {
    let breaker = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(10))
        .build_with_clock(ManualClock::new())
        .unwrap();
    let t0 = Nanos::from_secs(5);
    let trip = breaker.try_acquire_at(t0).unwrap().failure_at(t0).unwrap();
    assert_eq!(trip.reason, Reason::ConsecutiveFailures);

    let at = t0 + Duration::from_secs(10);
    let probe = breaker.try_acquire_at(at).unwrap();
    assert!(probe.is_probe());
    assert!(probe.record_at(Outcome::Ignored, at).is_none());
    assert_eq!(
        breaker.state(),
        State::HalfOpen,
        "a decline proves nothing either way"
    );
    let probe = breaker.try_acquire_at(at).expect("the slot was freed");
    assert!(probe.success_at(at).is_some());
    assert_eq!(breaker.state(), State::Closed);
}
