//! A builder is a template: cloned for several upstreams, with presets that
//! mirror well-known defaults, a way to switch backoff off, and ids that
//! keep standalone breakers' jitter apart without configuration.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::{Log, LogTransitions};
use failfast::{Breaker, Builder, ManualClock, Nanos, State, WindowKind};

#[test]
fn one_template_builds_three_upstreams_sharing_its_observer() {
    let log = Log::default();
    let template = Breaker::builder()
        .consecutive_failures(1)
        .log_transitions(&log);
    let breakers: Vec<_> = (0..3)
        .map(|_| {
            template
                .clone()
                .build_with_clock(ManualClock::new())
                .unwrap()
        })
        .collect();
    for b in &breakers {
        let _ = b
            .try_acquire_at(Nanos::ZERO)
            .unwrap()
            .failure_at(Nanos::ZERO);
        assert_eq!(b.state(), State::Open);
    }
    assert_eq!(log.lock().unwrap().len(), 3, "one observer, three breakers");
}

#[test]
fn backoff_off_keeps_every_open_period_at_the_base() {
    let c = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(7))
        .backoff_off()
        .build_config()
        .unwrap();
    for trips in 1..=10 {
        assert_eq!(c.open_duration(trips), Duration::from_secs(7));
    }
    // A later `backoff` turns it back on.
    let c = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(7))
        .backoff_off()
        .backoff(2.0, Duration::from_secs(60))
        .build_config()
        .unwrap();
    assert_eq!(c.open_duration(2), Duration::from_secs(14));
}

#[test]
fn presets_mirror_envoy_and_resilience4j() {
    let envoy = Builder::envoy_outlier_detection().build_config().unwrap();
    assert_eq!(envoy.consecutive_failures(), Some(5));
    assert_eq!(envoy.failure_rate(), None);
    assert_eq!(
        (1..=6)
            .map(|t| envoy.open_duration(t).as_secs())
            .collect::<Vec<_>>(),
        [30, 60, 120, 240, 300, 300]
    );
    let r4j = Builder::resilience4j_defaults().build_config().unwrap();
    assert_eq!(r4j.failure_rate(), Some(0.5));
    assert_eq!(r4j.slow_call_rate(), Some(1.0));
    assert_eq!(r4j.slow_call_threshold(), Some(Duration::from_secs(60)));
    assert_eq!(r4j.window(), WindowKind::Count { size: 100 });
    assert_eq!(r4j.min_calls(), 100);
    assert_eq!(r4j.half_open_probes(), 10);
    assert_eq!(r4j.open_duration(1), Duration::from_secs(60));
    assert_eq!(r4j.open_duration(9), Duration::from_secs(60));
    assert_eq!(r4j.consecutive_failures(), None);
}

#[test]
fn ten_standalone_breakers_with_jitter_open_for_different_periods() {
    let periods: HashSet<Duration> = (0..10)
        .map(|_| {
            let b = Breaker::builder()
                .consecutive_failures(1)
                .open_duration(Duration::from_secs(10))
                .jitter(0.5)
                .build_with_clock(ManualClock::new())
                .unwrap();
            b.try_acquire_at(Nanos::ZERO)
                .unwrap()
                .failure_at(Nanos::ZERO)
                .unwrap()
                .open_for
                .unwrap()
        })
        .collect();
    assert!(periods.len() >= 5, "{periods:?}");
}

#[test]
fn an_explicit_id_gives_a_reproducible_schedule() {
    let open_for = || {
        Breaker::builder()
            .consecutive_failures(1)
            .jitter(0.5)
            .id(42)
            .build_with_clock(ManualClock::new())
            .unwrap()
            .try_acquire_at(Nanos::ZERO)
            .unwrap()
            .failure_at(Nanos::ZERO)
            .unwrap()
            .open_for
    };
    assert_eq!(open_for(), open_for());
}
