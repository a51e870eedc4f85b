//! S12: at any moment a caller can read, without disturbing the hot path:
//! state, time in state, calls admitted / rejected, failure rate, slow-call
//! rate, transitions and their reasons.

use failfast::{Breaker, CallCounts, ManualClock, Nanos, Reason, State, WindowCounts};
use std::time::Duration;

mod common;
use common::{Log, LogTransitions};

const OPEN: Duration = Duration::from_secs(20);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn snapshot_fields_follow_the_breaker_through_its_states() {
    let events = Log::default();
    let b = Breaker::builder()
        .failure_rate(0.5)
        .slow_call_rate(0.8)
        .slow_call_threshold(ms(100))
        .count_window(10)
        .min_calls(4)
        .consecutive_failures(5)
        .open_duration(OPEN)
        .count_calls(true)
        .log_transitions(&events)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let t = |s: u64| Nanos::from_secs(s);

    // A fresh breaker.
    let fresh = b.snapshot_at(t(3));
    assert_eq!(
        (
            fresh.state,
            fresh.generation,
            fresh.time_in_state,
            fresh.retry_after
        ),
        (State::Closed, 0, Duration::from_secs(3), None)
    );
    assert_eq!(fresh.window, WindowCounts::default());
    assert_eq!((fresh.failure_rate, fresh.slow_call_rate), (None, None));
    assert_eq!((fresh.consecutive_failures, fresh.trips_in_a_row), (0, 0));
    assert_eq!(fresh.calls, Some(CallCounts::default()));

    // Closed: one fast success, one slow success, one failure, one ignored.
    let _ = b.try_acquire_at(t(10)).unwrap().success_at(t(10) + ms(5));
    let _ = b.try_acquire_at(t(10)).unwrap().success_at(t(10) + ms(300));
    let _ = b.try_acquire_at(t(11)).unwrap().failure_at(t(11) + ms(5));
    let _ = b.try_acquire_at(t(11)).unwrap().ignore();
    let s = b.snapshot_at(t(12));
    assert_eq!(s.state, State::Closed);
    assert_eq!(
        s.time_in_state,
        Duration::from_secs(12),
        "no transition yet"
    );
    assert_eq!(s.window, WindowCounts::new(3, 1, 1));
    // 3 calls, below min_calls (4): not enough calls yet to judge a rate
    // (1 failure in 3 calls is not a 33 % failure rate worth publishing).
    assert_eq!((s.failure_rate, s.slow_call_rate), (None, None));
    assert_eq!(s.consecutive_failures, 0, "the ignored call ended the run");
    assert_eq!(calls_of(s.calls), [4, 0, 2, 1, 1, 1]);

    // A second failure: 2 of 4 = 50 % at min_calls 4 → open.
    let trip = b
        .try_acquire_at(t(12))
        .unwrap()
        .failure_at(t(12))
        .expect("trips");
    assert_eq!(trip.reason, Reason::FailureRate);
    let _ = b.try_acquire_at(t(13)).unwrap_err();
    let _ = b.try_acquire_at(t(14)).unwrap_err();
    let s = b.snapshot_at(t(15));
    assert_eq!(s.state, State::Open);
    assert_eq!(s.generation, 1);
    assert_eq!(s.time_in_state, Duration::from_secs(3));
    assert_eq!(s.retry_after, Some(OPEN - Duration::from_secs(3)));
    assert_eq!(s.trips_in_a_row, 1);
    assert_eq!(
        (s.failure_rate, s.slow_call_rate),
        (Some(0.5), Some(0.25)),
        "the window that tripped it is still visible"
    );
    let calls = s.calls.unwrap();
    assert_eq!((calls.admitted, calls.rejected, calls.failures), (5, 2, 2));

    // Half-open.
    let probe = b.try_acquire_at(t(32)).unwrap();
    let s = b.snapshot_at(t(33));
    assert_eq!((s.state, s.generation), (State::HalfOpen, 2));
    assert_eq!(s.time_in_state, Duration::from_secs(1));
    assert_eq!(s.retry_after, None);
    assert_eq!(s.trips_in_a_row, 1);
    let _ = b.try_acquire_at(t(33)).unwrap_err();

    // Slow probe: reopens with backoff.
    assert!(probe.success_at(t(33)).is_some());
    let s = b.snapshot_at(t(34));
    assert_eq!(
        (s.state, s.generation, s.trips_in_a_row),
        (State::Open, 3, 2)
    );
    assert_eq!(s.retry_after, Some(2 * OPEN - Duration::from_secs(1)));

    // Fast probe after 40 s: closed, fresh window, counters kept.
    let at = t(33) + 2 * OPEN;
    let probe = b.try_acquire_at(at).unwrap();
    assert!(probe.success_at(at + ms(1)).is_some());
    let s = b.snapshot_at(at + Duration::from_secs(7));
    assert_eq!(
        (s.state, s.generation, s.trips_in_a_row),
        (State::Closed, 5, 0)
    );
    assert_eq!(s.time_in_state, Duration::from_secs(7) - ms(1));
    assert_eq!(s.window, WindowCounts::default());
    assert_eq!(
        (s.failure_rate, s.slow_call_rate),
        (None, None),
        "a fresh window: no rate yet"
    );
    assert_eq!(calls_of(s.calls), [7, 3, 4, 2, 1, 2]);

    // Transitions: the generation counts them; the observer has their reasons.
    let events = events.lock().unwrap();
    assert_eq!(events.len() as u32, s.generation);
    let seen: Vec<(State, State, Reason)> =
        events.iter().map(|e| (e.from, e.to, e.reason)).collect();
    assert_eq!(
        seen,
        [
            (State::Closed, State::Open, Reason::FailureRate),
            (State::Open, State::HalfOpen, Reason::OpenElapsed),
            (State::HalfOpen, State::Open, Reason::ProbeSlow),
            (State::Open, State::HalfOpen, Reason::OpenElapsed),
            (State::HalfOpen, State::Closed, Reason::ProbesSucceeded),
        ]
    );
    let names: Vec<&str> = events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(
        names,
        [
            "failure_rate",
            "open_elapsed",
            "probe_slow",
            "open_elapsed",
            "probes_succeeded"
        ]
    );
}

#[test]
fn reading_a_snapshot_changes_nothing() {
    let b = Breaker::builder()
        .consecutive_failures(2)
        .failure_rate(0.5)
        .time_window(Duration::from_secs(10), 10)
        .count_calls(true)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let _ = b
        .try_acquire_at(Nanos::from_secs(1))
        .unwrap()
        .failure_at(Nanos::from_secs(1));
    let first = b.snapshot_at(Nanos::from_secs(2));
    for _ in 0..1_000 {
        assert_eq!(b.snapshot_at(Nanos::from_secs(2)), first);
    }
    assert_eq!(first.calls.unwrap().admitted, 1);
    assert_eq!(first.consecutive_failures, 1);
    // Without count_calls there are no counters (and no cost for them).
    let lean = Breaker::builder()
        .consecutive_failures(2)
        .build_with_clock(ManualClock::new())
        .unwrap();
    assert_eq!(lean.snapshot().calls, None);
}

#[test]
fn labels_for_exporters() {
    let names: Vec<&str> = State::all().iter().map(|s| s.as_str()).collect();
    assert_eq!(
        names,
        [
            "closed",
            "open",
            "half_open",
            "forced_open",
            "disabled",
            "metrics_only"
        ]
    );
    assert_eq!(State::HalfOpen.to_string(), "half_open");
}

#[test]
fn closing_reports_every_probe_success() {
    for probes in [1, 2, 3] {
        let b = Breaker::builder()
            .consecutive_failures(1)
            .half_open_probes(probes)
            .open_duration(Duration::from_secs(1))
            .build_with_clock(ManualClock::new())
            .unwrap();
        let t = Nanos::from_secs(5);
        b.try_acquire_at(Nanos::ZERO)
            .unwrap()
            .failure_at(Nanos::ZERO);
        let permits: Vec<_> = (0..probes).map(|_| b.try_acquire_at(t).unwrap()).collect();
        let mut last = None;
        for p in permits {
            last = p.success_at(t);
        }
        let closed = last.expect("the last probe closes");
        assert_eq!(closed.to, State::Closed);
        assert_eq!(closed.probe_successes, probes, "probes {probes}");
    }
}

/// The counters a test checks, in a fixed order: admitted, rejected,
/// successes, failures, ignored, slow.
fn calls_of(calls: Option<CallCounts>) -> [u64; 6] {
    let c = calls.expect("the breaker counts calls");
    [
        c.admitted,
        c.rejected,
        c.successes,
        c.failures,
        c.ignored,
        c.slow,
    ]
}
