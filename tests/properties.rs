//! Properties of the pure parts, through the public API: the backoff
//! schedule, the jitter, and the windows' sequential exactness.
//!
//! (The state word's encoding and the private `Backoff`/`Rate` helpers are
//! checked by proptests at the end of `src/state.rs` and `src/policy.rs`.)
//!
//! `PROPTEST_CASES` scales every property here (CI: 1000).

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use failfast::{Breaker, ManualClock, Nanos, Outcome, State, WindowCounts};
use proptest::prelude::*;

const MS: u64 = 1_000_000;

fn schedule() -> impl Strategy<Value = (Duration, f64, Duration)> {
    (
        1u64..=60_000,
        prop_oneof![Just(1.0), Just(2.0), 1.0f64..=10.0, 10.0f64..=1000.0],
        1u64..=1_000_000,
    )
        .prop_map(|(base_ms, m, extra_ms)| {
            let base = Duration::from_millis(base_ms);
            (base, m, base + Duration::from_millis(extra_ms))
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The un-jittered schedule starts at the base, never shrinks from one
    /// trip to the next, never passes the cap, grows by the multiplier until
    /// it reaches the cap (to float precision), is pinned at the cap once
    /// there, and stops growing after 63 trips (where trips saturate).
    #[test]
    fn backoff_is_monotone_and_capped((base, m, cap) in schedule()) {
        let config = Breaker::builder()
            .consecutive_failures(1)
            .open_duration(base)
            .backoff(m, cap)
            .build_config()
            .unwrap();
        prop_assert_eq!(config.open_duration(1), base);
        prop_assert_eq!(config.open_duration(0), base, "trips are at least 1");
        let mut previous = Duration::ZERO;
        for trips in 1..=80 {
            let d = config.open_duration(trips);
            prop_assert!(d >= previous, "trips {}: {:?} < {:?}", trips, d, previous);
            prop_assert!(d <= cap, "trips {}: {:?} > cap {:?}", trips, d, cap);
            if trips > 63 {
                // Trips in a row saturate at 63 (the state word's 6 bits).
                prop_assert_eq!(d, config.open_duration(63));
            } else if trips > 1 && previous < cap {
                let want = (previous.as_nanos() as f64 * m).min(cap.as_nanos() as f64);
                let got = d.as_nanos() as f64;
                // `previous` was truncated to whole nanoseconds: allow m ns.
                prop_assert!((got - want).abs() <= want * 1e-12 + m + 2.0, "trips {}: {} vs {}", trips, got, want);
            }
            if previous == cap {
                prop_assert_eq!(d, cap);
            }
            previous = d;
        }
        if m >= 2.0 {
            prop_assert_eq!(config.open_duration(63), cap, "doubling reaches any cap in 63 trips");
        }
    }

    /// The jittered open period of the trip into generation g lies in
    /// `(step·(1 − jitter), step]`, is the same for two breakers with the same
    /// id at the same generation, and is what admission and the snapshot use.
    #[test]
    fn jitter_is_bounded_and_deterministic_per_id_and_generation(
        id in any::<u32>(),
        resets in 0u32..40,
        jitter in prop_oneof![Just(0.0), 0.001f64..0.999],
        base_ms in 1u64..=100_000,
        failed_probes in 0u32..4,
    ) {
        let base = Duration::from_millis(base_ms);
        let build = || {
            Breaker::builder()
                .id(id)
                .consecutive_failures(1)
                .open_duration(base)
                .backoff(2.0, base * 16)
                .jitter(jitter)
                .build_with_clock(ManualClock::new())
                .unwrap()
        };
        let (a, b) = (build(), build());
        let mut durations = Vec::new();
        let mut ends = Vec::new();
        for breaker in [&a, &b] {
            let mut now = Nanos::ZERO;
            // Move to generation `resets`, then trip, then fail probes.
            for _ in 0..resets {
                breaker.reset_at(now).unwrap();
            }
            let t = breaker.try_acquire_at(now).unwrap().failure_at(now).unwrap();
            let mut seen = vec![(t.generation, t.trips_in_a_row, t.open_for.unwrap())];
            for _ in 0..failed_probes {
                now += seen.last().unwrap().2;
                let probe = breaker.try_acquire_at(now).unwrap();
                prop_assert!(probe.is_probe());
                let t = probe.failure_at(now).unwrap();
                seen.push((t.generation, t.trips_in_a_row, t.open_for.unwrap()));
            }
            durations.push(seen);
            ends.push(now);
        }
        let now = ends[0];
        prop_assert_eq!(&durations[0], &durations[1], "same id, same generations: same durations");
        for &(generation, trips, d) in &durations[0] {
            let step = a.config().open_duration(trips);
            prop_assert!(d <= step, "generation {}: {:?} > step {:?}", generation, d, step);
            if jitter == 0.0 {
                prop_assert_eq!(d, step);
            } else {
                let floor = step.as_nanos() as f64 * (1.0 - jitter);
                prop_assert!(d.as_nanos() as f64 >= floor, "generation {}: {:?} below {}", generation, d, floor);
            }
        }
        // Admission and the snapshot use the reported duration, to the nanosecond.
        let (_, _, open_for) = *durations[0].last().unwrap();
        prop_assert_eq!(a.snapshot_at(now).retry_after, Some(open_for));
        let rejected = a.try_acquire_at(now).unwrap_err();
        prop_assert_eq!(rejected.retry_after(), Some(open_for));
        let last = now + open_for - Duration::from_nanos(1);
        prop_assert!(a.try_acquire_at(last).is_err(), "admitted 1 ns early");
        prop_assert!(a.try_acquire_at(now + open_for).unwrap().is_probe());
    }

    /// A sequence of calls through a count window of N (a failure-rate and a
    /// slow-rate policy that may trip) agrees at every step with a naive
    /// "last N calls" list; at a trip, the transition carries exactly the
    /// naive counts, and after a reset both start empty.
    #[test]
    fn count_window_is_exact_when_sequential(
        size in 1u32..=70,
        rate in 1u32..=1000,
        calls in prop::collection::vec((0u8..3, any::<bool>()), 1..300),
    ) {
        let threshold = Duration::from_millis(100);
        let breaker = Breaker::builder()
            .failure_rate(f64::from(rate) / 1000.0)
            .slow_call_rate(f64::from(rate) / 1000.0)
            .slow_call_threshold(threshold)
            .count_window(size)
            .min_calls(size)
            .build_with_clock(ManualClock::new())
            .unwrap();
        let mut naive: VecDeque<(bool, bool)> = VecDeque::new();
        let mut now = Nanos::ZERO;
        for (kind, slow) in calls {
            let outcome = [Outcome::Success, Outcome::Failure, Outcome::Ignored][kind as usize];
            let permit = breaker.try_acquire_at(now).unwrap();
            now += if slow { threshold } else { Duration::from_millis(1) };
            let t = permit.record_at(outcome, now);
            if outcome != Outcome::Ignored {
                naive.push_back((outcome == Outcome::Failure, slow));
                if naive.len() > size as usize {
                    naive.pop_front();
                }
            }
            let want = counts(naive.iter().copied());
            if let Some(t) = t {
                prop_assert_eq!(t.window, want, "window at the trip");
                prop_assert!(want.calls >= size);
                breaker.reset_at(now).unwrap();
                naive.clear();
            }
            prop_assert_eq!(breaker.snapshot_at(now).window, counts(naive.iter().copied()));
        }
    }

    /// A time window of B buckets of width w, written at increasing times and
    /// read at any later time, holds exactly the calls whose bucket
    /// `t / w` is within the last B buckets of the reading time.
    #[test]
    fn time_window_is_exact_when_sequential(
        buckets in 1u32..=16,
        width_ms in 1u64..=1000,
        steps in prop::collection::vec((0u64..=1500, 0u8..3, any::<bool>(), 0u64..=3000), 1..200),
    ) {
        let width = width_ms * MS;
        let threshold = Duration::from_millis(100);
        let breaker = Breaker::builder()
            .failure_rate(1.0)
            .time_window(Duration::from_nanos(width * u64::from(buckets)), buckets)
            .min_calls(1_048_576)
            .slow_call_threshold(threshold)
            .build_with_clock(ManualClock::new())
            .unwrap();
        let mut naive: Vec<(u64, bool, bool)> = Vec::new();
        let mut now = 0u64;
        let in_window = |naive: &[(u64, bool, bool)], at: u64| {
            counts(
                naive
                    .iter()
                    .filter(|(t, _, _)| at / width - t / width < u64::from(buckets))
                    .map(|&(_, f, s)| (f, s)),
            )
        };
        for (advance_ms, kind, slow, look_ahead_ms) in steps {
            now += advance_ms * MS / 4;
            let outcome = [Outcome::Success, Outcome::Failure, Outcome::Ignored][kind as usize];
            let permit = breaker.try_acquire_at(Nanos::from_nanos(now)).unwrap();
            if slow {
                now += threshold.as_nanos() as u64;
            }
            prop_assert!(permit.record_at(outcome, Nanos::from_nanos(now)).is_none());
            if outcome != Outcome::Ignored {
                naive.push((now, outcome == Outcome::Failure, slow));
            }
            prop_assert_eq!(breaker.snapshot_at(Nanos::from_nanos(now)).window, in_window(&naive, now));
            // Reading later changes nothing and sees old buckets slide out.
            let later = now + look_ahead_ms * MS;
            prop_assert_eq!(breaker.snapshot_at(Nanos::from_nanos(later)).window, in_window(&naive, later));
        }
        prop_assert_eq!(breaker.state(), State::Closed);
    }
}

fn counts(calls: impl Iterator<Item = (bool, bool)>) -> WindowCounts {
    let mut c = WindowCounts::default();
    for (failure, slow) in calls {
        c.calls += 1;
        c.failures += u32::from(failure);
        c.slow += u32::from(slow);
    }
    c
}

/// Jitter spreads: 200 breakers with distinct ids, same generation, jitter
/// 0.5, open for 200 distinct durations (a hash, not a constant), all in range.
#[test]
fn jitter_spreads_across_ids() {
    let base = Duration::from_secs(60);
    let mut seen = HashSet::new();
    for id in 0..200u32 {
        let b = Breaker::builder()
            .id(id)
            .consecutive_failures(1)
            .open_duration(base)
            .jitter(0.5)
            .build_with_clock(ManualClock::new())
            .unwrap();
        let t = b
            .try_acquire_at(Nanos::ZERO)
            .unwrap()
            .failure_at(Nanos::ZERO)
            .unwrap();
        let d = t.open_for.unwrap();
        assert!(d > base / 2 && d <= base, "{d:?}");
        seen.insert(d);
    }
    assert!(seen.len() >= 195, "only {} distinct durations", seen.len());
}

/// Jitter varies with the generation too: one breaker, tripped 64 times
/// (each time from a fresh Closed), opens for many different durations.
#[test]
fn jitter_varies_across_generations() {
    let base = Duration::from_secs(60);
    let b = Breaker::builder()
        .id(7)
        .consecutive_failures(1)
        .open_duration(base)
        .jitter(0.5)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let mut seen = HashSet::new();
    for _ in 0..64 {
        let t = b
            .try_acquire_at(Nanos::ZERO)
            .unwrap()
            .failure_at(Nanos::ZERO)
            .unwrap();
        seen.insert(t.open_for.unwrap());
        b.reset_at(Nanos::ZERO).unwrap();
    }
    assert!(seen.len() >= 60, "only {} distinct durations", seen.len());
}
