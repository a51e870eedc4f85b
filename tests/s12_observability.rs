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

/// Issue 28: a snapshot names the outlier rule that ejected the breaker
/// while the ejection holds it open (through its pool's panic too), and no
/// longer once its open period ends; an ordinary trip, a breaker outside any
/// pool and a closed host never name one.
#[test]
fn the_snapshot_names_the_outlier_rule_while_the_ejection_holds() {
    use failfast::{OutlierRule, Outliers, Registry};

    let interval = Duration::from_secs(10);
    let clock = ManualClock::new();
    // The failure-percentage rule enforced, the success-rate rule off.
    let registry = Registry::<u64>::builder(
        Breaker::builder()
            .consecutive_failures(1000)
            .open_duration(OPEN),
    )
    .outliers(
        Outliers::envoy()
            .interval(interval)
            .success_rate_off()
            .enforcing_failure_percentage(100)
            .ejection_time_of_breaker(),
    )
    .build_with_clock(clock.clone())
    .unwrap();
    for _ in 0..2 {
        for key in 0..5u64 {
            let h = registry.handle(&key);
            for i in 0..50 {
                let p = h.try_acquire().unwrap();
                let _ = if key == 0 && i % 10 != 0 {
                    p.failure() // 90 % failures
                } else {
                    p.success()
                };
            }
        }
        clock.advance(interval);
    }
    let snapshot = |key: u64| registry.handle(&key).snapshot();
    assert_eq!(snapshot(0).outlier_ejection, None, "not judged yet");
    // Its next call rolls its interval: judged at that admission, ejected
    // (the call itself runs).
    registry.handle(&0).try_acquire().unwrap().success();
    let ejected = snapshot(0);
    assert_eq!(ejected.state, State::Open);
    assert_eq!(
        ejected.outlier_ejection,
        Some(OutlierRule::FailurePercentage)
    );
    assert_eq!(snapshot(1).outlier_ejection, None);
    // Three more hosts down by their own trips: the pool panics and lifts
    // the ejection. Still ejected (Open, calls let through), and so named;
    // the ordinary trips name no rule.
    for key in 2..5 {
        registry.handle(&key).force_open();
    }
    assert!(registry.outlier_pools()[0].panicking);
    assert!(registry.handle(&0).try_acquire().is_ok(), "lifted");
    assert_eq!(
        snapshot(0).outlier_ejection,
        Some(OutlierRule::FailurePercentage)
    );
    assert_eq!(snapshot(2).state, State::ForcedOpen);
    assert_eq!(snapshot(2).outlier_ejection, None);
    for key in 2..5 {
        registry.handle(&key).reset();
    }
    // The open period over: the probe round is an ordinary one.
    clock.advance(OPEN + Duration::from_secs(1));
    let h0 = registry.handle(&0);
    let probe = h0.try_acquire().unwrap();
    assert!(probe.is_probe());
    assert_eq!(snapshot(0).state, State::HalfOpen);
    assert_eq!(snapshot(0).outlier_ejection, None);
    let _ = probe.success();
    assert_eq!(snapshot(0).state, State::Closed);
    assert_eq!(snapshot(0).outlier_ejection, None);

    // A breaker outside any pool, tripped: no rule.
    let plain = Breaker::builder()
        .consecutive_failures(1)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let _ = plain.try_acquire().unwrap().failure();
    assert_eq!(plain.snapshot().state, State::Open);
    assert_eq!(plain.snapshot().outlier_ejection, None);
}
