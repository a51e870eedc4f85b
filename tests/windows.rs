//! Windows and policies through the public API: count and time windows
//! (sequentially exact), min_calls, expiry with the clock, combined trip
//! conditions, backoff growth and cap across trips in a row, the probe lease
//! default.

use failfast::{Breaker, Clock, ManualClock, Nanos, Reason, State, WindowCounts};
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn counts(calls: u32, failures: u32, slow: u32) -> WindowCounts {
    WindowCounts::new(calls, failures, slow)
}

#[test]
fn count_window_keeps_exactly_the_last_n_calls() {
    let b = Breaker::builder()
        .failure_rate(1.0) // never reached below: we only watch the counts
        .slow_call_rate(1.0)
        .slow_call_threshold(ms(100))
        .count_window(8)
        .min_calls(8)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let now = Nanos::from_secs(1);
    // Pattern over 40 calls: failure when i % 3 == 0, slow when i % 4 == 0,
    // never all-failing nor all-slow over 8 calls.
    let mut history = Vec::new();
    for i in 0..40u32 {
        let failure = i % 3 == 0;
        let slow = i % 4 == 0;
        history.push((failure, slow));
        let p = b.try_acquire_at(now).unwrap();
        let end = now + if slow { ms(150) } else { ms(5) };
        let t = if failure {
            p.failure_at(end)
        } else {
            p.success_at(end)
        };
        assert!(t.is_none());
        let tail = &history[history.len().saturating_sub(8)..];
        let expected = counts(
            tail.len() as u32,
            tail.iter().filter(|c| c.0).count() as u32,
            tail.iter().filter(|c| c.1).count() as u32,
        );
        let s = b.snapshot_at(now);
        assert_eq!(s.window, expected, "after call {i}");
        // Rates only once the window holds min_calls (8) calls.
        let judged = expected.calls >= 8;
        assert_eq!(s.failure_rate, judged.then(|| expected.failure_rate()));
        assert_eq!(s.slow_call_rate, judged.then(|| expected.slow_call_rate()));
    }
}

#[test]
fn ignored_calls_do_not_enter_a_window() {
    let b = Breaker::builder()
        .failure_rate(0.5)
        .count_window(4)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let _ = b
        .try_acquire_at(Nanos::ZERO)
        .unwrap()
        .failure_at(Nanos::ZERO);
    for _ in 0..10 {
        let _ = b.try_acquire_at(Nanos::ZERO).unwrap().ignore();
        drop(b.try_acquire_at(Nanos::ZERO).unwrap());
    }
    assert_eq!(b.snapshot_at(Nanos::ZERO).window, counts(1, 1, 0));
}

#[test]
fn min_calls_is_respected() {
    let b = Breaker::builder()
        .failure_rate(0.5)
        .count_window(20)
        .min_calls(10)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let now = Nanos::from_secs(1);
    for i in 0..9 {
        assert!(
            b.try_acquire_at(now).unwrap().failure_at(now).is_none(),
            "{i}"
        );
    }
    assert_eq!(
        b.snapshot_at(now).failure_rate,
        None,
        "not enough calls yet to judge a rate"
    );
    assert_eq!(
        b.state(),
        State::Closed,
        "9 of 9 failing, but below min_calls"
    );
    let t = b.try_acquire_at(now).unwrap().failure_at(now).unwrap();
    assert_eq!(
        (t.reason, t.window),
        (Reason::FailureRate, counts(10, 10, 0))
    );
}

#[test]
fn the_rate_is_judged_at_a_failure_not_at_a_fast_success() {
    // Documented departure: 5 failures then 5 fast successes is 50 % at
    // min_calls, but only a failure or slow call evaluates the trip.
    let b = Breaker::builder()
        .failure_rate(0.5)
        .count_window(10)
        .min_calls(10)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let now = Nanos::ZERO;
    for _ in 0..5 {
        let _ = b.try_acquire_at(now).unwrap().failure_at(now);
    }
    for _ in 0..5 {
        assert!(b.try_acquire_at(now).unwrap().success_at(now).is_none());
    }
    assert_eq!(b.snapshot_at(now).failure_rate, Some(0.5));
    assert_eq!(b.state(), State::Closed);
    // The next failure pushes out the oldest failure: still 5 of 10 → trips.
    let t = b.try_acquire_at(now).unwrap().failure_at(now).unwrap();
    assert_eq!(t.window, counts(10, 5, 0));
}

#[test]
fn rate_thresholds_are_exact() {
    // 0.3 over 10 calls trips at exactly 3 failures, not 2.
    let b = Breaker::builder()
        .failure_rate(0.3)
        .count_window(10)
        .min_calls(10)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let now = Nanos::ZERO;
    for _ in 0..8 {
        let _ = b.try_acquire_at(now).unwrap().success_at(now);
    }
    assert!(
        b.try_acquire_at(now).unwrap().failure_at(now).is_none(),
        "1/9"
    );
    assert!(
        b.try_acquire_at(now).unwrap().failure_at(now).is_none(),
        "2/10"
    );
    // Oldest success slides out: 3/10.
    let t = b.try_acquire_at(now).unwrap().failure_at(now).unwrap();
    assert_eq!(t.window, counts(10, 3, 0));
}

#[test]
fn time_window_counts_the_last_length_and_expires_with_the_clock() {
    let clock = ManualClock::starting_at(Nanos::from_secs(100));
    let b = Breaker::builder()
        .failure_rate(0.9)
        .slow_call_rate(0.9)
        .slow_call_threshold(ms(500))
        .time_window(Duration::from_secs(10), 10)
        .min_calls(100)
        .build_with_clock(clock.clone())
        .unwrap();
    // One failure, one slow success and one fast success per second, for 5 s.
    for _ in 0..5 {
        let _ = b.try_acquire().unwrap().failure();
        let p = b.try_acquire().unwrap();
        clock.advance(ms(600));
        let _ = p.success();
        let _ = b.try_acquire().unwrap().success();
        clock.advance(ms(400));
    }
    let now = clock.now(); // t = 105 s
    assert_eq!(b.snapshot().window, counts(15, 5, 5));
    // The first second's calls (at 100 s–100.6 s) fall out once the window
    // no longer covers their 1 s bucket, at 110 s.
    assert_eq!(
        b.snapshot_at(now + Duration::from_secs(5) - Duration::from_nanos(1))
            .window,
        counts(15, 5, 5)
    );
    assert_eq!(
        b.snapshot_at(now + Duration::from_secs(5)).window,
        counts(12, 4, 4)
    );
    assert_eq!(
        b.snapshot_at(now + Duration::from_secs(8)).window,
        counts(3, 1, 1)
    );
    assert_eq!(
        b.snapshot_at(now + Duration::from_secs(9)).window,
        counts(0, 0, 0)
    );
    // A write long after rotates lazily: the old buckets are gone.
    clock.advance(Duration::from_secs(60));
    let _ = b.try_acquire().unwrap().failure();
    assert_eq!(b.snapshot().window, counts(1, 1, 0));
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn time_window_trips_on_its_rate_and_min_calls() {
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .failure_rate(0.5)
        .time_window(Duration::from_secs(1), 4)
        .min_calls(6)
        .build_with_clock(clock.clone())
        .unwrap();
    // Old failures expire: 5 failures, then 1 s later 5 more calls alone.
    for _ in 0..5 {
        let _ = b.try_acquire().unwrap().failure();
    }
    assert_eq!(b.state(), State::Closed, "5 < min_calls 6");
    clock.advance(Duration::from_secs(1));
    for _ in 0..4 {
        let _ = b.try_acquire().unwrap().success();
    }
    let t = b.try_acquire().unwrap().failure();
    assert!(
        t.is_none(),
        "the old failures expired: 1 failure of 5 calls"
    );
    assert_eq!(b.snapshot().window, counts(5, 1, 0));
    // Three more failures within the same second: 4 of 8.
    let _ = b.try_acquire().unwrap().failure();
    let _ = b.try_acquire().unwrap().failure();
    let t = b.try_acquire().unwrap().failure().expect("4 of 8 = 50 %");
    assert_eq!((t.reason, t.window), (Reason::FailureRate, counts(8, 4, 0)));
}

#[test]
fn combined_policies_report_which_condition_tripped() {
    let build = || {
        Breaker::builder()
            .consecutive_failures(3)
            .failure_rate(0.5)
            .slow_call_rate(0.5)
            .slow_call_threshold(ms(100))
            .count_window(10)
            .min_calls(6)
            .build_with_clock(ManualClock::new())
            .unwrap()
    };
    let t0 = Nanos::from_secs(1);
    let fast = t0 + ms(1);
    let slow = t0 + ms(200);

    // Three failures in a row, below min_calls: consecutive.
    let b = build();
    let _ = b.try_acquire_at(t0).unwrap().failure_at(fast);
    let _ = b.try_acquire_at(t0).unwrap().failure_at(fast);
    let t = b.try_acquire_at(t0).unwrap().failure_at(fast).unwrap();
    assert_eq!(t.reason, Reason::ConsecutiveFailures);
    assert_eq!(t.consecutive_failures, 3);

    // Failures spread out by successes: failure rate.
    let b = build();
    for _ in 0..3 {
        let _ = b.try_acquire_at(t0).unwrap().failure_at(fast);
        let _ = b.try_acquire_at(t0).unwrap().success_at(fast);
    }
    assert_eq!(b.state(), State::Closed, "3 of 6, last a success");
    let t = b.try_acquire_at(t0).unwrap().failure_at(fast).unwrap();
    assert_eq!((t.reason, t.window), (Reason::FailureRate, counts(7, 4, 0)));

    // Slow successes: slow-call rate.
    let b = build();
    for _ in 0..3 {
        let _ = b.try_acquire_at(t0).unwrap().success_at(fast);
    }
    for _ in 0..2 {
        assert!(b.try_acquire_at(t0).unwrap().success_at(slow).is_none());
    }
    let t = b.try_acquire_at(t0).unwrap().success_at(slow).unwrap();
    assert_eq!(
        (t.reason, t.window),
        (Reason::SlowCallRate, counts(6, 0, 3))
    );

    // Both rates reached at once: the failure rate is reported first.
    let b = build();
    for _ in 0..2 {
        let _ = b.try_acquire_at(t0).unwrap().failure_at(slow);
        let _ = b.try_acquire_at(t0).unwrap().success_at(fast);
    }
    let _ = b.try_acquire_at(t0).unwrap().failure_at(slow);
    assert_eq!(b.state(), State::Closed, "5 calls: below min_calls");
    let t = b.try_acquire_at(t0).unwrap().failure_at(fast).unwrap();
    assert_eq!((t.reason, t.window), (Reason::FailureRate, counts(6, 4, 3)));
    assert_eq!(t.consecutive_failures, 2);
    assert!(t.window.slow_call_rate() >= 0.5);
}

#[test]
fn backoff_grows_per_trip_in_a_row_up_to_the_cap_and_decays_after_a_close() {
    let b = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(1))
        .backoff(2.0, Duration::from_secs(10))
        .build_with_clock(ManualClock::new())
        .unwrap();
    let mut now = Nanos::from_secs(1);
    let first = b.try_acquire_at(now).unwrap().failure_at(now).unwrap();
    let mut periods = vec![first.open_for.unwrap()];
    let mut trips = vec![first.trips_in_a_row];
    for _ in 0..6 {
        let open_for = *periods.last().unwrap();
        // Not a nanosecond early.
        let early = b.try_acquire_at(now + open_for - Duration::from_nanos(1));
        assert_eq!(
            early.unwrap_err().retry_after(),
            Some(Duration::from_nanos(1))
        );
        now += open_for;
        let probe = b.try_acquire_at(now).expect("probe when the period ends");
        let t = probe.failure_at(now).expect("probe failure reopens");
        assert_eq!(t.reason, Reason::ProbeFailed);
        periods.push(t.open_for.unwrap());
        trips.push(t.trips_in_a_row);
    }
    let secs: Vec<u64> = periods.iter().map(Duration::as_secs).collect();
    assert_eq!(secs, [1, 2, 4, 8, 10, 10, 10]);
    // The step stops counting at the cap's (5: 1, 2, 4, 8, 10 s).
    assert_eq!(trips, [1, 2, 3, 4, 5, 5, 5]);
    assert_eq!(b.snapshot_at(now).trips_in_a_row, 5);

    // Closing ends the run of trips but keeps the backoff step, which
    // decays one step per base period (1 s) of healthy time: a trip at
    // once continues the schedule, one after 5 healthy seconds (the cap
    // step × the base) is back at the base.
    now += Duration::from_secs(10);
    let probe = b.try_acquire_at(now).unwrap();
    assert_eq!(probe.success_at(now).unwrap().trips_in_a_row, 0);
    assert_eq!(b.snapshot_at(now).backoff_step, 5);
    assert_eq!(b.snapshot_at(now + Duration::from_secs(3)).backoff_step, 2);
    let t = b.try_acquire_at(now).unwrap().failure_at(now).unwrap();
    assert_eq!(t.open_for, Some(Duration::from_secs(10)));
    assert_eq!(t.trips_in_a_row, 5);
    now += Duration::from_secs(10);
    b.try_acquire_at(now).unwrap().success_at(now).unwrap();
    now += Duration::from_secs(5);
    assert_eq!(b.snapshot_at(now).backoff_step, 0);
    let t = b.try_acquire_at(now).unwrap().failure_at(now).unwrap();
    assert_eq!(t.open_for, Some(Duration::from_secs(1)));
    assert_eq!(t.trips_in_a_row, 1);
}

#[test]
fn lease_expiry_keeps_the_backoff_step() {
    let b = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(1))
        .backoff(3.0, Duration::from_secs(100))
        .probe_lease(Duration::from_secs(5))
        .build_with_clock(ManualClock::new())
        .unwrap();
    let t0 = Nanos::from_secs(1);
    let _ = b.try_acquire_at(t0).unwrap().failure_at(t0);
    let hung = b.try_acquire_at(t0 + Duration::from_secs(1)).unwrap();
    let fresh = b.try_acquire_at(t0 + Duration::from_secs(6)).unwrap();
    drop(hung);
    let t = fresh.failure_at(t0 + Duration::from_secs(6)).unwrap();
    assert_eq!(t.trips_in_a_row, 2, "a superseded round is not a trip");
    assert_eq!(t.open_for, Some(Duration::from_secs(3)));
}

#[test]
fn probe_lease_defaults_to_the_base_open_duration_and_at_least_30_s() {
    let lease = |base: u64| {
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_secs(base))
            .build_config()
            .unwrap()
            .probe_lease()
    };
    // A short open period must not cut off a probe that takes a while.
    assert_eq!(lease(1), Duration::from_secs(30));
    assert_eq!(lease(29), Duration::from_secs(30));
    assert_eq!(lease(45), Duration::from_secs(45));
    let default = Breaker::builder().consecutive_failures(1).build_config();
    assert_eq!(default.unwrap().probe_lease(), Duration::from_secs(30));

    let b = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(40))
        .backoff(4.0, Duration::from_secs(1_000))
        .build_with_clock(ManualClock::new())
        .unwrap();
    assert_eq!(b.config().probe_lease(), Duration::from_secs(40));
    let t0 = Nanos::from_secs(1);
    let _ = b.try_acquire_at(t0).unwrap().failure_at(t0);
    let round = t0 + Duration::from_secs(40);
    let hung = b.try_acquire_at(round).unwrap();
    let r = b.try_acquire_at(round).unwrap_err();
    assert_eq!(r.retry_after(), Some(Duration::from_secs(40)));
    assert!(b
        .try_acquire_at(round + Duration::from_secs(40) - Duration::from_nanos(1))
        .is_err());
    let fresh = b.try_acquire_at(round + Duration::from_secs(40)).unwrap();
    assert_eq!(fresh.generation(), hung.generation() + 1);
    // Even after backoff has grown, the lease stays the base duration.
    let t = fresh.failure_at(round + Duration::from_secs(40)).unwrap();
    assert_eq!(t.open_for, Some(Duration::from_secs(160)));
    let next_round = round + Duration::from_secs(40 + 160);
    let _hung = b.try_acquire_at(next_round).unwrap();
    let r = b.try_acquire_at(next_round).unwrap_err();
    assert_eq!(r.retry_after(), Some(Duration::from_secs(40)));
}

/// No silent cap: 1.1 M successes then 2 M failures inside one 10 s bucket
/// (200k requests a second to one host) trip a 50 % failure-rate breaker.
#[test]
fn a_bucket_past_two_million_calls_still_sees_its_failures() {
    let b = Breaker::builder()
        .failure_rate(0.5)
        .time_window(Duration::from_secs(10), 1)
        .min_calls(100)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let now = Nanos::from_secs(1);
    for _ in 0..1_100_000 {
        let _ = b.try_acquire_at(now).unwrap().success_at(now);
    }
    let mut failures = 0u32;
    while b.state() == State::Closed && failures < 2_000_000 {
        let _ = b.try_acquire_at(now).unwrap().failure_at(now);
        failures += 1;
    }
    assert_eq!(b.state(), State::Open, "after {failures} failures");
    // The million successes still weigh: it takes hundreds of thousands of
    // failures (a halved bucket weighs recent calls more than old ones, so
    // fewer than the exact 1.1 M).
    assert!(failures > 400_000, "tripped too early: {failures}");
}

#[test]
fn without_a_consecutive_policy_failures_count_no_run() {
    // Invariant 8: the word is written only for a run that some policy reads.
    let b = Breaker::builder()
        .failure_rate(0.9)
        .count_window(100)
        .min_calls(100)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let t = Nanos::from_secs(1);
    for _ in 0..3 {
        b.try_acquire_at(t).unwrap().failure_at(t);
    }
    let s = b.snapshot_at(t);
    assert_eq!(s.state, State::Closed);
    assert_eq!(s.window.failures, 3);
    assert_eq!(s.consecutive_failures, 0);
}

#[test]
fn a_time_window_reset_starts_at_the_reset() {
    // Buckets of 1 s, a window of 3 s. After a reset at t = 8 s, a call that
    // ended at t = 5 s (older than the window at the reset) does not count.
    let b = Breaker::builder()
        .failure_rate(0.5)
        .time_window(Duration::from_secs(3), 3)
        .min_calls(1)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let s = Nanos::from_secs;
    b.try_acquire_at(s(1)).unwrap().success_at(s(1));
    b.reset_at(s(8));
    let p = b.try_acquire_at(s(8)).unwrap();
    assert_eq!(p.failure_at(s(5)), None);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot_at(s(8)).window.calls, 0);
}

/// A window-only time breaker (no threshold, no counters) records its
/// successes on the time window's own success path, which rotates the
/// buckets itself: successes over more than the window's length leave the
/// last buckets' calls, two in one bucket count two, and a jump past the
/// whole window leaves only the call after it.
#[test]
fn window_only_time_successes_rotate_and_expire() {
    let clock = ManualClock::starting_at(Nanos::from_secs(100));
    let b = Breaker::builder()
        .failure_rate(0.9)
        .time_window(Duration::from_secs(10), 10)
        .min_calls(1000)
        .build_with_clock(clock.clone())
        .unwrap();
    // One success a second from 100 s to 114 s.
    for _ in 0..15 {
        let _ = b.try_acquire().unwrap().success();
        clock.advance(Duration::from_secs(1));
    }
    // At 115 s the window holds the buckets of 106 s..=115 s.
    assert_eq!(b.snapshot().window, counts(9, 0, 0));
    let _ = b.try_acquire().unwrap().success();
    clock.advance(ms(999));
    let _ = b.try_acquire().unwrap().success(); // 115.999 s: the same bucket
    assert_eq!(b.snapshot().window, counts(11, 0, 0));
    clock.advance(ms(1));
    let _ = b.try_acquire().unwrap().success(); // 116 s: the next one
    assert_eq!(b.snapshot().window, counts(11, 0, 0), "106 s slid out");
    clock.advance(Duration::from_secs(25));
    let _ = b.try_acquire().unwrap().success();
    assert_eq!(b.snapshot().window, counts(1, 0, 0));
    assert_eq!(b.state(), State::Closed);
}
