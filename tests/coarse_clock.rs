//! A coarse clock: durations its steps cannot tell from zero are refused at
//! build, for a breaker and for every breaker of a registry; with feature
//! `coarse-clock`, `CoarseClock` follows the monotonic clock to within one
//! step and a breaker on it trips, rejects and reports its wait.

use std::time::Duration;

use failfast::{Breaker, Builder, Clock, ConfigError, ManualClock, Nanos, Registry};

/// A manual clock that says it moves in 4 ms steps.
#[derive(Clone, Default)]
struct Steps4ms(ManualClock);

const STEP: Duration = Duration::from_millis(4);

impl Clock for Steps4ms {
    fn now(&self) -> Nanos {
        self.0.now()
    }

    fn resolution(&self) -> Duration {
        STEP
    }
}

#[track_caller]
fn refused(builder: Builder, field: &str) -> ConfigError {
    let err = builder
        .build_with_clock(Steps4ms::default())
        .expect_err("a duration shorter than the clock's step must be refused");
    assert_eq!(err.field(), field, "{err}");
    assert!(err.allowed().contains("resolution"), "{err}");
    assert!(err.found().contains("4ms"), "the step is shown: {err}");
    err
}

fn timed(threshold: Duration) -> Builder {
    Breaker::builder()
        .consecutive_failures(5)
        .slow_call_rate(0.5)
        .slow_call_threshold(threshold)
        .count_window(10)
}

fn windowed(length: Duration, buckets: u32) -> Builder {
    Breaker::builder()
        .failure_rate(0.5)
        .time_window(length, buckets)
}

#[test]
fn a_slow_call_threshold_below_one_step_is_refused() {
    let err = refused(timed(STEP - Duration::from_nanos(1)), "slow_call_threshold");
    assert!(err.found().contains("3.999999ms"), "{err}");
    assert!(timed(STEP).build_with_clock(Steps4ms::default()).is_ok());
}

#[test]
fn a_time_window_bucket_below_one_step_is_refused() {
    // 10 buckets of 3.9 ms: each shorter than a step.
    let err = refused(
        windowed(Duration::from_millis(39), 10),
        "time_window.length",
    );
    assert!(err.found().contains("3.9ms"), "{err}");
    assert!(windowed(Duration::from_millis(40), 10)
        .build_with_clock(Steps4ms::default())
        .is_ok());
}

#[test]
fn a_fine_clock_accepts_the_same_durations() {
    // The check is the clock's: every other clock has 1 ns steps.
    assert!(timed(Duration::from_micros(1))
        .build_with_clock(ManualClock::new())
        .is_ok());
    assert!(windowed(Duration::from_micros(10), 10)
        .build_with_clock(ManualClock::new())
        .is_ok());
}

#[test]
fn a_clock_behind_an_arc_keeps_its_step() {
    let clock = std::sync::Arc::new(Steps4ms::default());
    assert_eq!(clock.resolution(), STEP);
    let err = timed(Duration::from_millis(1))
        .build_with_clock(clock)
        .expect_err("refused through the Arc too");
    assert_eq!(err.field(), "slow_call_threshold");
}

#[test]
fn a_registry_refuses_it_in_its_template_and_in_an_override() {
    let err = Registry::<u64>::builder(timed(Duration::from_millis(1)))
        .build_with_clock(Steps4ms::default())
        .expect_err("the template is checked against the clock");
    assert_eq!(err.field(), "slow_call_threshold");

    let err = Registry::<u64>::builder(timed(Duration::from_secs(1)))
        .override_key(7, windowed(Duration::from_millis(10), 10))
        .build_with_clock(Steps4ms::default())
        .expect_err("an override is checked against the clock");
    assert_eq!(err.field(), "time_window.length");

    assert!(Registry::<u64>::builder(timed(Duration::from_secs(1)))
        .override_key(7, windowed(Duration::from_secs(1), 10))
        .build_with_clock(Steps4ms::default())
        .is_ok());
}

/// Said where `cargo test` shows it (as `feature_gated.rs` does for whole files).
#[cfg(not(feature = "coarse-clock"))]
#[test]
#[ignore = "needs --features coarse-clock"]
fn coarse() {
    panic!(
        "skipped without its feature: run `cargo test --features coarse-clock --test coarse_clock`"
    );
}

#[cfg(feature = "coarse-clock")]
mod coarse {
    use std::time::{Duration, Instant};

    use failfast::{Breaker, Clock, CoarseClock, RejectReason, State};

    #[test]
    fn its_step_is_the_kernels_tick() {
        let step = CoarseClock::new().resolution();
        // HZ is 100 to 1000 on Linux; 1 ns where there is no coarse clock.
        assert!(step <= Duration::from_millis(10), "{step:?}");
        if cfg!(any(target_os = "linux", target_os = "android")) {
            assert!(step >= Duration::from_micros(100), "{step:?}");
        }
    }

    #[test]
    fn it_follows_the_monotonic_clock_to_within_one_step() {
        let origin = Instant::now();
        let clock = CoarseClock::new();
        let step = clock.resolution();
        let mut last = clock.now();
        let mut steps = 0;
        // Until the clock has moved three times: about three ticks.
        while steps < 3 {
            let before = origin.elapsed();
            let now = clock.now();
            let after = origin.elapsed();
            assert!(now >= last, "{now:?} after {last:?}");
            // Its origin lags the real one by up to a step, and so may each
            // reading; a tick that comes late (a loaded virtual machine: seen
            // 1.1 ms late in CI with 4 ms steps) adds to either lag. Never
            // ahead of the fine clock by more than two steps, never behind it
            // by more than two.
            assert!(
                now.as_duration() <= after + 2 * step,
                "{now:?} ahead of {after:?}"
            );
            assert!(
                now.as_duration() + 2 * step >= before,
                "{now:?} behind {before:?}"
            );
            if now != last {
                steps += 1;
                last = now;
            }
            assert!(before < Duration::from_secs(10), "the clock never moved");
        }
    }

    #[test]
    fn a_breaker_on_it_trips_and_reports_its_wait() {
        let open = Duration::from_secs(60);
        let breaker = Breaker::builder()
            .consecutive_failures(3)
            .open_duration(open)
            .build_with_clock(CoarseClock::new())
            .unwrap();
        for _ in 0..3 {
            let _ = breaker.try_acquire().unwrap().failure();
        }
        assert_eq!(breaker.state(), State::Open);
        let rejected = breaker.try_acquire().expect_err("open");
        assert_eq!(rejected.reason(), RejectReason::Open);
        let wait = rejected.retry_after().expect("an open period has an end");
        // Within one step of the whole period: the trip and the rejection
        // read the clock a moment apart.
        let step = CoarseClock::new().resolution();
        assert!(wait <= open && wait + 2 * step >= open, "{wait:?}");
    }

    #[test]
    fn it_refuses_a_threshold_below_its_step_where_it_has_one() {
        let built = Breaker::builder()
            .consecutive_failures(3)
            .slow_call_rate(0.5)
            .slow_call_threshold(Duration::from_micros(1))
            .count_window(10)
            .build_with_clock(CoarseClock::new());
        if CoarseClock::new().resolution() > Duration::from_micros(1) {
            assert_eq!(built.expect_err("refused").field(), "slow_call_threshold");
        } else {
            assert!(built.is_ok());
        }
    }
}
