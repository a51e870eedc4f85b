//! The breaker configurations every phase runs: between them every trip
//! policy (consecutive failures, a count window, a time window, failure and
//! slow-call rates), one to four probes, slow-call thresholds with and
//! without a slow-call rate, `abandoned_after` above and below the
//! threshold, jitter from none to half, and backoff off, gentle, steep and
//! pinned at its one-day cap.

use std::time::Duration;

use failfast::{Breaker, Builder, Config, WindowKind, MAX_DURATION};

/// One configuration, by name.
pub struct Spec {
    pub name: &'static str,
    builder: fn() -> Builder,
}

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub const SPECS: [Spec; 5] = [
    Spec {
        // The plainest breaker: no timing, so `try_acquire` in CLOSED reads
        // no clock and its drop is neutral; a probe is timed all the same.
        name: "consecutive",
        builder: || {
            Breaker::builder()
                .consecutive_failures(3)
                .open_duration(ms(100))
                .backoff(2.0, ms(1_600))
                .probe_lease(ms(250))
        },
    },
    Spec {
        // Both rates over the last 20 calls; abandoned after 60 ms, above
        // the 40 ms threshold; three probes; a quarter of jitter.
        name: "count_window_slow",
        builder: || {
            Breaker::builder()
                .failure_rate(0.5)
                .slow_call_rate(0.5)
                .slow_call_threshold(ms(40))
                .count_window(20)
                .min_calls(6)
                .half_open_probes(3)
                .open_duration(ms(200))
                .backoff(1.5, ms(3_000))
                .jitter(0.25)
                .probe_lease(ms(500))
                .abandoned_after(ms(60))
        },
    },
    Spec {
        // A failure rate over 2 s in 8 buckets; no slow-call threshold, so an
        // abandoned call (120 ms) is a failure; the lease is the base open
        // duration; half the open period may be jitter.
        name: "time_window",
        builder: || {
            Breaker::builder()
                .failure_rate(0.4)
                .time_window(ms(2_000), 8)
                .min_calls(6)
                .half_open_probes(2)
                .open_duration(ms(150))
                .backoff(3.0, ms(20_000))
                .jitter(0.5)
                .probe_lease(ms(150))
                .abandoned_after(ms(120))
        },
    },
    Spec {
        // Every trip condition at once over a time window, four probes, no
        // backoff; abandoned after 10 ms, below the 25 ms threshold.
        name: "combined_no_backoff",
        builder: || {
            Breaker::builder()
                .consecutive_failures(4)
                .failure_rate(0.6)
                .slow_call_rate(0.8)
                .slow_call_threshold(ms(25))
                .time_window(ms(500), 5)
                .min_calls(4)
                .half_open_probes(4)
                .open_duration(ms(80))
                .backoff_off()
                .jitter(0.1)
                .probe_lease(ms(300))
                .abandoned_after(ms(10))
        },
    },
    Spec {
        // One failure trips; each trip in a row multiplies the period by
        // 1000 up to the largest cap allowed (one day): after three failed
        // rounds every period is the cap, and the trips in a row stop at
        // their cap step, 4.
        name: "backoff_at_the_cap",
        builder: || {
            Breaker::builder()
                .consecutive_failures(1)
                .slow_call_threshold(ms(5))
                .open_duration(ms(1))
                .backoff(1000.0, MAX_DURATION)
                .jitter(0.05)
                .probe_lease(ms(40))
        },
    },
];

impl Spec {
    /// The configuration with call counters on (conservation is checked)
    /// and a fixed id (the jitter is part of the seeded run).
    pub fn builder(&self, id: u32) -> Builder {
        (self.builder)().count_calls(true).id(id)
    }

    /// The longest a call may take and still count as fast when dropped or
    /// reported: below the slow-call threshold and `abandoned_after`.
    pub fn fast_limit(config: &Config) -> Duration {
        let slow = config.slow_call_threshold().unwrap_or(Duration::MAX);
        slow.min(config.abandoned_after())
    }
}

/// The most calls a window can hold (`None`: no window).
pub fn window_capacity(config: &Config) -> Option<u64> {
    match config.window() {
        WindowKind::Count { size } => Some(u64::from(size)),
        // Each bucket halves at 2^20 calls.
        WindowKind::Time { buckets, .. } => Some(u64::from(buckets) << 20),
        _ => None,
    }
}
