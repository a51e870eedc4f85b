//! Tests added for mutation testing (issue 3, item 4; `.ci/mutants.sh`,
//! `.cargo/mutants.toml`): each pins a behaviour of the core that a
//! surviving mutant showed no other fast test checked.

use failfast::{Breaker, Clock, ManualClock, Nanos, Outcome, State, WindowKind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A manual clock that counts its reads (invariants 7 and 8: time is read
/// on the request path only where needed).
#[derive(Clone, Default)]
struct CountingClock {
    time: ManualClock,
    reads: Arc<AtomicU64>,
}

impl CountingClock {
    fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }
}

impl Clock for CountingClock {
    fn now(&self) -> Nanos {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.time.now()
    }
}

#[test]
fn closed_admission_and_a_fast_success_read_no_clock_without_timing() {
    let clock = CountingClock::default();
    let b = Breaker::builder()
        .consecutive_failures(3)
        .failure_rate(0.5)
        .count_window(10)
        .build_with_clock(clock.clone())
        .unwrap();
    let p = b.try_acquire().unwrap();
    assert_eq!(clock.reads(), 0, "admission in Closed is one load");
    assert_eq!(p.started_at(), Nanos::NEVER, "untimed: no known start");
    p.success();
    assert_eq!(clock.reads(), 0, "a success needs no time here");
    b.try_acquire().unwrap().ignore();
    assert_eq!(clock.reads(), 0, "nor does a business error");
    b.try_acquire().unwrap().record(Outcome::Ignored);
    assert_eq!(clock.reads(), 0);
    drop(b.try_acquire().unwrap());
    assert_eq!(clock.reads(), 0, "a drop with no known start is neutral");
    b.try_acquire().unwrap().failure();
    assert_eq!(clock.reads(), 1, "a failure may trip: it reads the time");
}

#[test]
fn a_slow_call_threshold_times_every_call() {
    let clock = CountingClock::default();
    let b = Breaker::builder()
        .consecutive_failures(3)
        .slow_call_threshold(Duration::from_millis(100))
        .build_with_clock(clock.clone())
        .unwrap();
    clock.time.advance(Duration::from_secs(1));
    let p = b.try_acquire().unwrap();
    assert_eq!(clock.reads(), 1);
    assert_eq!(p.started_at(), Nanos::from_secs(1));
    p.success();
    assert_eq!(clock.reads(), 2);
}

#[test]
fn a_time_window_reads_the_clock_at_the_verdict() {
    let clock = CountingClock::default();
    let b = Breaker::builder()
        .failure_rate(0.5)
        .time_window(Duration::from_secs(10), 10)
        .min_calls(1)
        .build_with_clock(clock.clone())
        .unwrap();
    // Successes at t = 100 s land in the window of t = 100 s, not of t = 0.
    clock.time.advance(Duration::from_secs(100));
    for _ in 0..3 {
        let p = b.try_acquire().unwrap();
        p.success();
    }
    assert_eq!(clock.reads(), 3, "one read per verdict, none at admission");
    let w = b.snapshot_at(Nanos::from_secs(100)).window;
    assert_eq!((w.calls, w.failures), (3, 0));
}

#[test]
fn a_probe_verdict_reads_the_clock() {
    let clock = CountingClock::default();
    let b = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(1))
        .build_with_clock(clock.clone())
        .unwrap();
    b.try_acquire_at(Nanos::ZERO)
        .unwrap()
        .failure_at(Nanos::ZERO);
    clock.time.advance(Duration::from_secs(2));
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    let before = clock.reads();
    probe.success();
    assert_eq!(clock.reads(), before + 1);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn memory_bytes_counts_the_window_and_the_counters() {
    let base = std::mem::size_of::<Breaker<ManualClock>>();
    let build = |b: failfast::Builder| b.build_with_clock(ManualClock::new()).unwrap();
    let none = build(Breaker::builder().consecutive_failures(1));
    assert_eq!(none.memory_bytes(), base);
    // 100 entries: a cursor and ceil(100 / 32) = 4 words of 2-bit entries.
    let count = build(Breaker::builder().failure_rate(0.5).count_window(100));
    assert_eq!(count.memory_bytes(), base + 5 * 8);
    // 10 buckets and the epoch.
    let time = build(
        Breaker::builder()
            .failure_rate(0.5)
            .time_window(Duration::from_secs(10), 10),
    );
    assert_eq!(time.memory_bytes(), base + 11 * 8);
    let counted = build(
        Breaker::builder()
            .failure_rate(0.5)
            .count_window(100)
            .count_calls(true),
    );
    assert!(counted.memory_bytes() > count.memory_bytes());
}

#[test]
fn debug_output_names_the_state_and_the_window() {
    let b = Breaker::builder()
        .consecutive_failures(1)
        .count_window(40)
        .failure_rate(1.0)
        .id(7)
        .build_with_clock(ManualClock::new())
        .unwrap();
    b.try_acquire_at(Nanos::ZERO)
        .unwrap()
        .failure_at(Nanos::from_secs(5));
    let s = format!("{b:?}");
    for part in [
        "Breaker",
        "id: 7",
        "state: Open",
        "generation: 1",
        "trips: 1",
        "tripped_at: Nanos(5s)",
        "Window",
        "slots: 3",
    ] {
        assert!(s.contains(part), "{part:?} missing from {s}");
    }

    let probe = b.try_acquire_at(Nanos::from_secs(100)).unwrap();
    let s = format!("{probe:?}");
    for part in [
        "Permit",
        "generation: 2",
        "probe: true",
        "start: Nanos(100s)",
    ] {
        assert!(s.contains(part), "{part:?} missing from {s}");
    }
    drop(probe);

    let shared = Arc::new(b);
    let owned = shared.try_acquire_owned_at(Nanos::from_secs(101)).unwrap();
    let s = format!("{owned:?}");
    for part in [
        "OwnedPermit",
        "generation: 2",
        "probe: true",
        "start: Nanos(101s)",
    ] {
        assert!(s.contains(part), "{part:?} missing from {s}");
    }
}

#[test]
fn config_getters_return_what_was_built() {
    let b = Breaker::builder()
        .consecutive_failures(4)
        .failure_rate(0.25)
        .slow_call_rate(0.75)
        .slow_call_threshold(Duration::from_millis(300))
        .count_window(50)
        .min_calls(7)
        .half_open_probes(3)
        .probe_lease(Duration::from_secs(9))
        .open_duration(Duration::from_secs(2))
        .backoff(3.0, Duration::from_secs(40))
        .jitter(0.25)
        .count_calls(true)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let c = b.config();
    assert_eq!(c.consecutive_failures(), Some(4));
    assert_eq!(c.failure_rate(), Some(0.25));
    assert_eq!(c.slow_call_rate(), Some(0.75));
    assert_eq!(c.slow_call_threshold(), Some(Duration::from_millis(300)));
    assert_eq!(c.window(), WindowKind::Count { size: 50 });
    assert_eq!(c.min_calls(), 7);
    assert_eq!(c.half_open_probes(), 3);
    assert_eq!(c.probe_lease(), Duration::from_secs(9));
    assert_eq!(c.open_duration_base(), Duration::from_secs(2));
    assert_eq!(c.open_duration(1), Duration::from_secs(2));
    assert_eq!(c.open_duration(2), Duration::from_secs(6));
    assert_eq!(c.open_duration(3), Duration::from_secs(18));
    assert_eq!(c.open_duration(4), Duration::from_secs(40));
    assert_eq!(c.backoff_multiplier(), 3.0);
    assert_eq!(c.open_duration_cap(), Duration::from_secs(40));
    assert_eq!(c.jitter(), 0.25);
    assert!(c.counts_calls());

    let d = Breaker::builder()
        .consecutive_failures(2)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let c = d.config();
    assert_eq!(c.failure_rate(), None);
    assert_eq!(c.slow_call_rate(), None);
    assert_eq!(c.slow_call_threshold(), None);
    assert_eq!(c.window(), WindowKind::None);
    assert!(!c.counts_calls());
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

#[test]
fn pristine_means_closed_with_no_run_and_a_clean_window() {
    let t = Nanos::from_secs(1);
    // No window: only the run can make it not pristine.
    let b = Breaker::builder()
        .consecutive_failures(3)
        .build_with_clock(ManualClock::new())
        .unwrap();
    assert!(b.is_pristine_at(t));
    b.try_acquire_at(t).unwrap().failure_at(t);
    assert!(!b.is_pristine_at(t), "a run of 1");
    b.try_acquire_at(t).unwrap().success_at(t);
    assert!(b.is_pristine_at(t), "the run ended");
    b.force_open_at(t);
    assert!(!b.is_pristine_at(t), "forced open (trips 0, count 0)");

    // A window: a failure or a slow call in it is remembered.
    let b = Breaker::builder()
        .consecutive_failures(3)
        .failure_rate(1.0)
        .slow_call_threshold(Duration::from_secs(1))
        .count_window(10)
        .build_with_clock(ManualClock::new())
        .unwrap();
    assert!(b.is_pristine_at(t));
    b.try_acquire_at(t).unwrap().failure_at(t);
    b.try_acquire_at(t).unwrap().success_at(t);
    assert_eq!(b.snapshot_at(t).consecutive_failures, 0);
    assert!(!b.is_pristine_at(t), "a failure in the window");
    b.reset_at(t);
    assert!(b.is_pristine_at(t));
    b.try_acquire_at(t)
        .unwrap()
        .success_at(t + Duration::from_secs(2));
    assert!(!b.is_pristine_at(t), "a slow call in the window");
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

#[test]
fn builder_debug_names_its_fields() {
    let b = Breaker::builder()
        .consecutive_failures(4)
        .half_open_probes(2)
        .id(9);
    let s = format!("{b:?}");
    for part in [
        "Builder",
        "consecutive_failures: Some(4)",
        "probes: 2",
        "observer: false",
        "id: 9",
    ] {
        assert!(s.contains(part), "{part:?} missing from {s}");
    }
}

#[test]
fn only_open_and_forced_open_reject() {
    let rejecting: Vec<State> = State::all().into_iter().filter(|s| s.rejects()).collect();
    assert_eq!(rejecting, [State::Open, State::ForcedOpen]);
}

#[test]
fn a_stale_success_of_a_plain_breaker_does_not_end_a_newer_run() {
    // Plain: no window, no timing, no counters (the one-branch success path).
    let b = Breaker::builder()
        .consecutive_failures(2)
        .open_duration(Duration::from_secs(1))
        .build_with_clock(ManualClock::new())
        .unwrap();
    let s = Nanos::from_secs;
    let stale = b.try_acquire_at(s(0)).unwrap(); // generation 0
    b.try_acquire_at(s(0)).unwrap().failure_at(s(0));
    b.try_acquire_at(s(0)).unwrap().failure_at(s(0)); // Open, generation 1
    b.try_acquire_at(s(2)).unwrap().success_at(s(2)); // probe closes: generation 3
    b.try_acquire_at(s(3)).unwrap().failure_at(s(3)); // a run of 1
    assert_eq!(b.snapshot_at(s(3)).consecutive_failures, 1);
    assert_eq!(stale.success_at(s(3)), None);
    assert_eq!(
        b.snapshot_at(s(3)).consecutive_failures,
        1,
        "a stale success changed the run"
    );
}

#[test]
fn call_counters_see_the_successes_of_a_windowless_breaker() {
    let b = Breaker::builder()
        .consecutive_failures(3)
        .count_calls(true)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let t = Nanos::from_secs(1);
    b.try_acquire_at(t).unwrap().success_at(t);
    b.try_acquire_at(t).unwrap().success_at(t);
    let calls = b.snapshot_at(t).calls.expect("counted");
    assert_eq!((calls.admitted, calls.successes), (2, 2));
}
