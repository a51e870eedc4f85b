//! Every invalid builder value is refused at `build` with a `ConfigError`
//! naming the field and the allowed range; valid edge values are accepted.

use failfast::{
    Breaker, Builder, ConfigError, ManualClock, State, WindowKind, MAX_COUNT_WINDOW, MAX_DURATION,
};
use std::time::Duration;

/// A builder that is valid on its own: every case below breaks one value.
fn valid() -> Builder {
    Breaker::builder().consecutive_failures(5)
}

#[track_caller]
fn refused(builder: Builder, field: &str, allowed_fragment: &str) -> ConfigError {
    let err = builder
        .build_with_clock(ManualClock::new())
        .expect_err("an invalid value must be refused");
    assert_eq!(err.field(), field, "{err}");
    assert!(
        err.allowed().contains(allowed_fragment),
        "allowed range {:?} should mention {allowed_fragment:?}",
        err.allowed()
    );
    let message = err.to_string();
    assert!(
        message.contains(field),
        "message names the field: {message}"
    );
    assert!(
        message.contains(err.allowed()),
        "message gives the allowed range: {message}"
    );
    assert!(
        message.contains(err.found()),
        "message shows the value: {message}"
    );
    err
}

#[track_caller]
fn accepted(builder: Builder) -> failfast::Config {
    match builder.build_with_clock(ManualClock::new()) {
        Ok(b) => b.config().clone(),
        Err(e) => panic!("a valid value was refused: {e}"),
    }
}

#[test]
fn rates_outside_zero_one_are_refused() {
    for bad in [
        0.0,
        -0.0,
        -0.5,
        1.000_001,
        2.0,
        f64::NAN,
        f64::INFINITY,
        -f64::INFINITY,
    ] {
        let e = refused(valid().failure_rate(bad), "failure_rate", "(0, 1]");
        assert_eq!(e.found(), format!("{bad:?}"));
        refused(
            valid()
                .slow_call_rate(bad)
                .slow_call_threshold(Duration::from_millis(500)),
            "slow_call_rate",
            "(0, 1]",
        );
    }
    // The exact text users see.
    let e = refused(valid().failure_rate(f64::NAN), "failure_rate", "(0, 1]");
    assert_eq!(
        e.to_string(),
        "invalid failfast config: failure_rate = NaN; allowed: (0, 1]"
    );
}

#[test]
fn count_window_zero_or_oversized_is_refused() {
    for bad in [0, MAX_COUNT_WINDOW + 1, u32::MAX] {
        let e = refused(
            valid().failure_rate(0.5).count_window(bad),
            "count_window",
            "1..=4096",
        );
        assert_eq!(e.found(), bad.to_string());
    }
}

#[test]
fn min_calls_zero_or_above_the_window_is_refused() {
    refused(
        valid().failure_rate(0.5).count_window(20).min_calls(21),
        "min_calls",
        "window",
    );
    refused(
        valid().failure_rate(0.5).count_window(20).min_calls(0),
        "min_calls",
        "1..=",
    );
    refused(
        valid()
            .failure_rate(0.5)
            .time_window(Duration::from_secs(10), 10)
            .min_calls(0),
        "min_calls",
        "1..=",
    );
    refused(
        valid()
            .failure_rate(0.5)
            .time_window(Duration::from_secs(10), 10)
            .min_calls(1_048_577),
        "min_calls",
        "1048576",
    );
    // With the default window of 100 calls, 101 is too many.
    refused(
        valid().failure_rate(0.5).min_calls(101),
        "min_calls",
        "window",
    );
}

#[test]
fn probes_zero_or_too_many_are_refused() {
    refused(valid().half_open_probes(0), "half_open_probes", "1..=255");
    refused(valid().half_open_probes(256), "half_open_probes", "1..=255");
}

#[test]
fn zero_open_duration_is_refused() {
    refused(
        valid().open_duration(Duration::ZERO),
        "open_duration",
        "> 0",
    );
}

#[test]
fn backoff_cap_below_base_is_refused() {
    refused(
        valid()
            .open_duration(Duration::from_secs(10))
            .backoff(2.0, Duration::from_secs(9)),
        "backoff.cap",
        "open_duration",
    );
}

#[test]
fn multiplier_below_one_or_nan_is_refused() {
    for bad in [0.999, 0.0, -2.0, f64::NAN, 1000.5, f64::INFINITY] {
        refused(
            valid().backoff(bad, Duration::from_secs(600)),
            "backoff.multiplier",
            "1.0..=1000.0",
        );
    }
}

#[test]
fn jitter_outside_zero_one_is_refused() {
    for bad in [-0.01, 1.0, 1.5, f64::NAN, f64::INFINITY] {
        refused(valid().jitter(bad), "jitter", "[0, 1)");
    }
}

#[test]
fn zero_probe_lease_is_refused() {
    refused(valid().probe_lease(Duration::ZERO), "probe_lease", "> 0");
}

#[test]
fn slow_rate_without_threshold_is_refused() {
    refused(
        Breaker::builder().slow_call_rate(0.5),
        "slow_call_threshold",
        "slow_call_rate",
    );
    refused(
        valid().slow_call_threshold(Duration::ZERO),
        "slow_call_threshold",
        "> 0",
    );
}

#[test]
fn no_trip_condition_is_refused() {
    refused(Breaker::builder(), "trip condition", "consecutive_failures");
    refused(Breaker::builder(), "trip condition", "unanswered");
    // A threshold alone is not a trip condition either.
    refused(
        Breaker::builder().slow_call_threshold(Duration::from_millis(100)),
        "trip condition",
        "slow_call_rate",
    );
}

#[test]
fn time_window_bucket_count_and_width_are_checked() {
    refused(
        valid()
            .failure_rate(0.5)
            .time_window(Duration::from_secs(10), 0),
        "time_window.buckets",
        "1..=1024",
    );
    refused(
        valid()
            .failure_rate(0.5)
            .time_window(Duration::from_secs(10), 1025),
        "time_window.buckets",
        "1..=1024",
    );
    // Each bucket must be at least 1 µs wide.
    refused(
        valid()
            .failure_rate(0.5)
            .time_window(Duration::from_nanos(9_999), 10),
        "time_window.length",
        "1 µs",
    );
    refused(
        valid().failure_rate(0.5).time_window(Duration::ZERO, 1),
        "time_window.length",
        "1 µs",
    );
}

#[test]
fn consecutive_failures_zero_or_too_many_is_refused() {
    refused(
        Breaker::builder().consecutive_failures(0),
        "consecutive_failures",
        "1..=32767",
    );
    refused(
        Breaker::builder().consecutive_failures(32_768),
        "consecutive_failures",
        "1..=32767",
    );
}

#[test]
fn build_config_validates_like_build() {
    let e = valid().jitter(1.0).build_config().unwrap_err();
    assert_eq!(e.field(), "jitter");
    assert!(valid().build_config().is_ok());
}

#[test]
fn errors_are_send_sync_static_std_errors() {
    fn check<T: std::error::Error + Send + Sync + 'static>() {}
    check::<ConfigError>();
    let boxed: Box<dyn std::error::Error + Send + Sync> =
        Box::new(valid().half_open_probes(0).build().unwrap_err());
    assert_eq!(
        boxed.downcast_ref::<ConfigError>().unwrap().field(),
        "half_open_probes"
    );
}

#[test]
fn valid_edge_values_are_accepted() {
    let c = accepted(Breaker::builder().consecutive_failures(1));
    assert_eq!(c.consecutive_failures(), Some(1));
    let c = accepted(Breaker::builder().consecutive_failures(32_767));
    assert_eq!(c.consecutive_failures(), Some(32_767));

    let c = accepted(Breaker::builder().failure_rate(1.0));
    assert_eq!(c.failure_rate(), Some(1.0));
    // A default window of 100 calls and min_calls 10 when a rate has no window.
    assert_eq!(c.window(), WindowKind::Count { size: 100 });
    assert_eq!(c.min_calls(), 10);
    let c = accepted(Breaker::builder().failure_rate(0.000_001));
    assert_eq!(c.failure_rate(), Some(0.000_001));

    let c = accepted(
        Breaker::builder()
            .failure_rate(0.5)
            .count_window(1)
            .min_calls(1),
    );
    assert_eq!(c.window(), WindowKind::Count { size: 1 });
    assert_eq!(c.min_calls(), 1);
    let c = accepted(
        Breaker::builder()
            .failure_rate(0.5)
            .count_window(MAX_COUNT_WINDOW)
            .min_calls(MAX_COUNT_WINDOW),
    );
    assert_eq!(c.min_calls(), MAX_COUNT_WINDOW);
    // min_calls defaults to the window size when the window is smaller than 10.
    let c = accepted(Breaker::builder().failure_rate(0.5).count_window(4));
    assert_eq!(c.min_calls(), 4);

    // 1024 buckets of exactly 1 µs; the largest time-window min_calls.
    let c = accepted(
        Breaker::builder()
            .failure_rate(0.5)
            .time_window(Duration::from_micros(1024), 1024)
            .min_calls(1_048_576),
    );
    assert_eq!(
        c.window(),
        WindowKind::Time {
            length: Duration::from_micros(1024),
            buckets: 1024
        }
    );
    accepted(
        Breaker::builder()
            .failure_rate(0.5)
            .time_window(Duration::from_micros(1), 1),
    );

    let c = accepted(valid().half_open_probes(1));
    assert_eq!(c.half_open_probes(), 1);
    let c = accepted(valid().half_open_probes(255));
    assert_eq!(c.half_open_probes(), 255);

    let c = accepted(valid().open_duration(Duration::from_nanos(1)));
    assert_eq!(c.open_duration_base(), Duration::from_nanos(1));
    assert_eq!(
        c.probe_lease(),
        Duration::from_secs(30),
        "lease defaults to the base, at least 30 s"
    );
    assert_eq!(
        c.open_duration_cap(),
        Duration::from_nanos(3),
        "3 × the base"
    );
    let c = accepted(valid().open_duration(MAX_DURATION));
    assert_eq!(c.probe_lease(), MAX_DURATION, "lease defaults to the base");
    assert_eq!(
        c.open_duration_cap(),
        MAX_DURATION,
        "3 × the base, at most a day"
    );
    let c = accepted(valid().probe_lease(Duration::from_nanos(1)));
    assert_eq!(c.probe_lease(), Duration::from_nanos(1));

    // cap == base, multiplier at both ends of its range.
    let c = accepted(
        valid()
            .open_duration(Duration::from_secs(10))
            .backoff(1.0, Duration::from_secs(10)),
    );
    assert_eq!(c.open_duration(5), Duration::from_secs(10));
    let c = accepted(valid().backoff(1000.0, Duration::from_secs(3600)));
    assert_eq!(c.backoff_multiplier(), 1000.0);
    assert_eq!(c.open_duration(63), Duration::from_secs(3600));

    let c = accepted(valid().jitter(0.0));
    assert_eq!(c.jitter(), 0.0);
    let c = accepted(valid().jitter(0.999_999));
    assert_eq!(c.jitter(), 0.999_999);

    let c = accepted(
        Breaker::builder()
            .slow_call_rate(1.0)
            .slow_call_threshold(Duration::from_nanos(1)),
    );
    assert_eq!(c.slow_call_threshold(), Some(Duration::from_nanos(1)));
    assert_eq!(c.slow_call_rate(), Some(1.0));
}

#[test]
fn defaults_are_the_documented_ones() {
    let c = accepted(valid());
    assert_eq!(c.half_open_probes(), 1);
    // 1 s, 2 s, then 3 s (`tests/incident_recovery.rs` has the measurement).
    assert_eq!(c.open_duration_base(), Duration::from_secs(1));
    assert_eq!(c.open_duration(2), Duration::from_secs(2));
    assert_eq!(c.open_duration_cap(), Duration::from_secs(3));
    assert_eq!(c.open_duration(3), Duration::from_secs(3));
    assert_eq!(c.open_duration(10), Duration::from_secs(3));
    assert_eq!(c.probe_lease(), Duration::from_secs(30));
    assert_eq!(c.max_hint(), Some(Duration::from_secs(600)));
    assert!(!c.remembers_hints());
    assert_eq!(c.jitter(), 0.0);
    assert!(!c.counts_calls());
    assert_eq!(c.window(), WindowKind::None);
    assert_eq!(c.slow_call_threshold(), None);
}

#[test]
fn min_calls_zero_is_refused_even_without_a_window() {
    // Consecutive failures alone have no window, but 0 is never a valid minimum.
    refused(valid().min_calls(0), "min_calls", "1..=");
}

#[test]
fn durations_past_one_day_are_refused() {
    // A lease of years would let a lost probe wedge a breaker; a day is
    // already far past any sane open period, and longer is a unit mistake.
    let past = MAX_DURATION + Duration::from_nanos(1);
    refused(valid().open_duration(past), "open_duration", "1 day");
    refused(
        valid().open_duration(Duration::MAX),
        "open_duration",
        "1 day",
    );
    refused(valid().probe_lease(past), "probe_lease", "1 day");
    refused(valid().probe_lease(Duration::MAX), "probe_lease", "1 day");
    refused(valid().backoff(2.0, Duration::MAX), "backoff.cap", "1 day");
    refused(
        valid().slow_call_threshold(past),
        "slow_call_threshold",
        "1 day",
    );
    refused(valid().abandoned_after(past), "abandoned_after", "1 day");
    refused(
        valid().abandoned_after(Duration::ZERO),
        "abandoned_after",
        "> 0",
    );
}

#[test]
fn the_largest_durations_are_accepted_and_saturate() {
    use failfast::{Nanos, RejectReason};
    let b = valid()
        .consecutive_failures(1)
        .open_duration(MAX_DURATION)
        .probe_lease(MAX_DURATION)
        .slow_call_threshold(MAX_DURATION)
        .abandoned_after(MAX_DURATION)
        .build_with_clock(ManualClock::new())
        .unwrap();
    assert_eq!(b.config().abandoned_after(), MAX_DURATION);
    let now = Nanos::from_secs(1);
    let t = b.try_acquire_at(now).unwrap().failure_at(now).unwrap();
    assert_eq!(t.open_for, Some(MAX_DURATION));
    let r = b.try_acquire_at(Nanos::from_secs(1_000)).unwrap_err();
    assert_eq!(r.reason(), RejectReason::Open);
    assert_eq!(
        r.retry_after(),
        Some(MAX_DURATION - Duration::from_secs(999))
    );
    // Saturating arithmetic: at the end of time the period has passed.
    assert!(b.try_acquire_at(Nanos::NEVER).unwrap().is_probe());
    assert_eq!(b.state(), State::HalfOpen);
}

#[test]
fn abandoned_after_defaults_to_the_slow_threshold_else_the_probe_lease() {
    let c = accepted(valid().probe_lease(Duration::from_secs(7)));
    assert_eq!(c.abandoned_after(), Duration::from_secs(7));
    let c = accepted(valid().slow_call_threshold(Duration::from_millis(300)));
    assert_eq!(c.abandoned_after(), Duration::from_millis(300));
    let c = accepted(
        valid()
            .slow_call_threshold(Duration::from_millis(300))
            .abandoned_after(Duration::from_secs(2)),
    );
    assert_eq!(c.abandoned_after(), Duration::from_secs(2));
}

#[test]
fn the_unanswered_rule_is_checked_against_the_drops_already_counted() {
    let ms = Duration::from_millis;
    for calls in [0, 256, u32::MAX] {
        refused(
            valid().unanswered(calls, ms(100)),
            "unanswered.calls",
            "1..=255",
        );
    }
    refused(
        valid().unanswered(5, Duration::ZERO),
        "unanswered.after",
        "> 0",
    );
    // A drop that old is already counted as abandoned (or slow): the rule
    // would never see one.
    let err = refused(
        valid().abandoned_after(ms(300)).unanswered(5, ms(300)),
        "unanswered.after",
        "shorter than abandoned_after",
    );
    assert!(err.found().contains("300ms"), "{err}");
    refused(
        valid()
            .slow_call_threshold(ms(200))
            .abandoned_after(ms(900))
            .unanswered(5, ms(250)),
        "unanswered.after",
        "slow-call threshold",
    );
    // Valid edges; and the rule alone is a trip condition.
    let config = accepted(valid().abandoned_after(ms(300)).unanswered(255, ms(299)));
    assert_eq!(config.unanswered(), Some((255, ms(299))));
    let config = accepted(Breaker::builder().unanswered(1, ms(1)));
    assert_eq!(config.unanswered(), Some((1, ms(1))));
    // On by default, fitted below the drops already counted, never refused.
    assert_eq!(accepted(valid()).unanswered(), Some((20, ms(250))));
    let c = accepted(valid().slow_call_threshold(ms(300)));
    assert_eq!(c.unanswered(), Some((20, ms(150))));
    let c = accepted(valid().abandoned_after(ms(100)));
    assert_eq!(c.unanswered(), Some((20, ms(50))));
    let c = accepted(valid().slow_call_threshold(Duration::from_nanos(1)));
    assert_eq!(c.unanswered(), None, "no room under 1 ns");
    assert_eq!(accepted(valid().unanswered_off()).unanswered(), None);
    // The default is no trip condition: a builder with none is refused.
    refused(Breaker::builder(), "trip condition", "at least one of");
    refused(
        Breaker::builder().unanswered_off(),
        "trip condition",
        "at least one of",
    );
}

#[test]
fn recovery_settings_at_their_edges() {
    let ms = Duration::from_millis;
    let ns = Duration::from_nanos;
    // The ramp: a window from 1 ms to 1 day, a floor in [0, 1], an
    // aggression in (0, 100].
    let c = accepted(valid().ramp_curve(ms(1), 0.0, 100.0));
    assert_eq!(c.ramp(), Some((ms(1), 0.0, 100.0)));
    let c = accepted(valid().ramp_curve(MAX_DURATION, 1.0, f64::MIN_POSITIVE));
    assert_eq!(c.ramp(), Some((MAX_DURATION, 1.0, f64::MIN_POSITIVE)));
    refused(valid().ramp(ms(1) - ns(1)), "ramp.window", "1 ms..=1 day");
    refused(
        valid().ramp(MAX_DURATION + ns(1)),
        "ramp.window",
        "1 ms..=1 day",
    );
    refused(
        valid().ramp_curve(ms(1), -0.0001, 1.0),
        "ramp.min_fraction",
        "[0, 1]",
    );
    refused(
        valid().ramp_curve(ms(1), 1.0001, 1.0),
        "ramp.min_fraction",
        "[0, 1]",
    );
    refused(
        valid().ramp_curve(ms(1), f64::NAN, 1.0),
        "ramp.min_fraction",
        "[0, 1]",
    );
    refused(
        valid().ramp_curve(ms(1), 0.1, 0.0),
        "ramp.aggression",
        "(0, 100]",
    );
    refused(
        valid().ramp_curve(ms(1), 0.1, 100.0001),
        "ramp.aggression",
        "(0, 100]",
    );
    refused(
        valid().ramp_curve(ms(1), 0.1, f64::INFINITY),
        "ramp.aggression",
        "(0, 100]",
    );
    // The last call wins: a bad ramp replaced by a good one builds.
    accepted(valid().ramp(Duration::ZERO).ramp(ms(5)));

    // The rate rule: at most 31 probes under it, 255 without.
    let c = accepted(valid().half_open_probes(31).half_open_rate_rule());
    assert_eq!(c.half_open_rates(), Some((0.5, None)));
    accepted(valid().half_open_probes(255));
    refused(
        valid().half_open_probes(32).half_open_rate_rule(),
        "half_open_probes",
        "1..=31 under the half-open rate rule",
    );
    let c = accepted(valid().half_open_failure_rate(1.0));
    assert_eq!(c.half_open_rates(), Some((1.0, None)));
    refused(
        valid().half_open_failure_rate(0.0),
        "half_open_failure_rate",
        "(0, 1]",
    );
    refused(
        valid()
            .half_open_slow_call_rate(1.5)
            .slow_call_threshold(ms(100)),
        "half_open_slow_call_rate",
        "(0, 1]",
    );
    refused(
        valid().half_open_slow_call_rate(0.5),
        "slow_call_threshold",
        "half_open_slow_call_rate",
    );

    // Hints: a tripping verdict's by default, capped at 10 min; `hints()`
    // remembers them, capped at 10 min; a cap above 0 and at most 39 h;
    // off is no cap at all.
    let hours = |h: u64| Duration::from_secs(h * 3600);
    assert_eq!(accepted(valid()).max_hint(), Some(Duration::from_secs(600)));
    assert!(!accepted(valid()).remembers_hints());
    assert!(accepted(valid().hints()).remembers_hints());
    assert!(!accepted(valid().hints().hints_off()).remembers_hints());
    assert_eq!(
        accepted(valid().hints()).max_hint(),
        Some(Duration::from_secs(600))
    );
    assert_eq!(accepted(valid().max_hint(ns(1))).max_hint(), Some(ns(1)));
    assert_eq!(
        accepted(valid().max_hint(hours(39))).max_hint(),
        Some(hours(39))
    );
    assert_eq!(accepted(valid().hints_off()).max_hint(), None);
    refused(
        valid().max_hint(Duration::ZERO),
        "max_hint",
        "> 0 and ≤ 39 h",
    );
    refused(
        valid().max_hint(hours(39) + ns(1)),
        "max_hint",
        "> 0 and ≤ 39 h",
    );
    // A bad cap does not matter once hints are off.
    accepted(valid().max_hint(Duration::ZERO).hints_off());
}
