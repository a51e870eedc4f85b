//! S11: ten breakers (replicas or hosts) with a 10 s open time, tripped at the
//! same instant, do not all probe at the same instant: their probe times
//! spread over the jitter range, deterministically.

use failfast::{Breaker, ManualClock, Nanos, RejectReason, State};
use std::time::Duration;

const OPEN: Duration = Duration::from_secs(10);
const JITTER: f64 = 0.5;

/// Builds ten breakers, trips them all at `t0`, and returns the first instant
/// each one admits a probe (checked to the nanosecond on both sides).
fn probe_times(ids: &[u32], jitter: f64) -> Vec<Nanos> {
    let t0 = Nanos::from_secs(1_000);
    ids.iter()
        .map(|&id| {
            let b = Breaker::builder()
                .consecutive_failures(1)
                .open_duration(OPEN)
                .jitter(jitter)
                .id(id)
                .build_with_clock(ManualClock::new())
                .unwrap();
            let trip = b.try_acquire_at(t0).unwrap().failure_at(t0).unwrap();
            let open_for = trip.open_for.unwrap();
            let rejected = b.try_acquire_at(t0).unwrap_err();
            assert_eq!(rejected.reason(), RejectReason::Open);
            assert_eq!(rejected.retry_after(), Some(open_for), "id {id}");
            assert_eq!(b.snapshot_at(t0).retry_after, Some(open_for));

            let probe_at = t0 + open_for;
            assert!(
                b.try_acquire_at(probe_at - Duration::from_nanos(1))
                    .is_err(),
                "id {id}: no probe before its jittered time"
            );
            let probe = b.try_acquire_at(probe_at).expect("probe at its time");
            assert!(probe.is_probe());
            assert_eq!(b.state(), State::HalfOpen);
            drop(probe);
            probe_at
        })
        .collect()
}

#[test]
fn probe_times_spread_over_the_jitter_range() {
    let ids: Vec<u32> = (1..=10).collect();
    let times = probe_times(&ids, JITTER);
    let t0 = Nanos::from_secs(1_000);
    let lo = t0 + OPEN.mul_f64(1.0 - JITTER);
    let hi = t0 + OPEN;
    for (id, t) in ids.iter().zip(&times) {
        assert!(
            *t > lo && *t <= hi,
            "id {id}: {t:?} outside ({lo:?}, {hi:?}]"
        );
    }
    let mut sorted = times.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(
        sorted.len(),
        10,
        "no two breakers probe at the same instant"
    );
    let spread = sorted[9].saturating_duration_since(sorted[0]);
    assert!(
        spread >= Duration::from_secs(2),
        "probe times should cover much of the 5 s range, spread {spread:?}"
    );
    let min_gap = sorted
        .windows(2)
        .map(|w| w[1].saturating_duration_since(w[0]))
        .min()
        .unwrap();
    assert!(
        min_gap >= Duration::from_millis(1),
        "no two probes within a millisecond: {sorted:?}"
    );
}

#[test]
fn over_many_hosts_probe_times_are_uniform_over_the_range() {
    // 1,000 hosts, five 1-second bins over (5 s, 10 s]: each holds about 200.
    let ids: Vec<u32> = (0..1_000).collect();
    let times = probe_times(&ids, JITTER);
    let t0 = Nanos::from_secs(1_000);
    let mut bins = [0u32; 5];
    for t in &times {
        let offset = t.saturating_duration_since(t0) - OPEN.mul_f64(1.0 - JITTER);
        let bin = (offset.as_secs_f64() as usize).min(4);
        bins[bin] += 1;
    }
    for (i, n) in bins.iter().enumerate() {
        assert!((150..=250).contains(n), "bin {i}: {bins:?}");
    }
}

#[test]
fn jitter_is_deterministic_across_runs() {
    // The documented formula, computed outside this crate (a few lines of
    // Python): the first trip of breaker `id` opens generation 1 for
    // `step - cut` ns, where `u = splitmix64(id ^ 1·0x9E3779B97F4A7C15)`'s (the 32-bit id widened)
    // high 32 bits and `cut = step · (jitter·2³²) · u >> 64`, with
    // step = 10 s and jitter = 0.5. Any run on any machine gives these.
    const OPEN_NS: [u64; 10] = [
        7_068_533_887,
        7_630_133_741,
        6_794_217_438,
        8_689_036_284,
        6_179_348_698,
        8_560_917_307,
        8_094_802_694,
        6_520_943_075,
        7_481_491_075,
        5_687_965_459,
    ];
    let ids: Vec<u32> = (1..=10u32).map(|i| i.wrapping_mul(0x9E37_79B9)).collect();
    let t0 = Nanos::from_secs(1_000);
    let expected: Vec<Nanos> = OPEN_NS
        .iter()
        .map(|&ns| t0 + Duration::from_nanos(ns))
        .collect();
    assert_eq!(probe_times(&ids, JITTER), expected);
}

#[test]
fn without_jitter_they_all_probe_at_once() {
    let ids: Vec<u32> = (1..=10).collect();
    let times = probe_times(&ids, 0.0);
    assert!(times.iter().all(|t| *t == Nanos::from_secs(1_010)));
}

#[test]
fn jitter_also_varies_from_one_trip_to_the_next() {
    // The same breaker draws a new jitter each generation.
    let b = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(OPEN)
        .backoff(1.0, OPEN)
        .jitter(JITTER)
        .id(42)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let mut now = Nanos::from_secs(1);
    let mut durations = Vec::new();
    for _ in 0..10 {
        let t = b.try_acquire_at(now).unwrap().failure_at(now).unwrap();
        let d = t.open_for.unwrap();
        assert!(d > OPEN.mul_f64(1.0 - JITTER) && d <= OPEN);
        durations.push(d);
        now += d;
        let probe = b.try_acquire_at(now).unwrap();
        assert!(probe.success_at(now).is_some());
    }
    durations.sort();
    durations.dedup();
    assert!(durations.len() >= 8, "{durations:?}");
}
