//! The tower layers' per-call series (features `metrics` and `tower`):
//! handles registered once per layer, and the per-host variants.

use core::fmt;

use metrics::{Counter, Histogram};

use super::metrics::{CallMetrics, CALL_DURATION_SECONDS, FALLBACK_TOTAL, REJECTED_TOTAL};
use super::Ending;
use crate::error::{RejectReason, Rejected};

/// The reasons a breaker rejects for (a bulkhead's are not the breaker's).
const BREAKER_REASONS: [RejectReason; 5] = [
    RejectReason::Open,
    RejectReason::HalfOpenFull,
    RejectReason::ForcedOpen,
    RejectReason::Ramp,
    RejectReason::RetryBudget,
];

fn reason_index(reason: RejectReason) -> Option<usize> {
    BREAKER_REASONS.iter().position(|r| *r == reason)
}

/// A layer's registered handles for one label set (an upstream, or none):
/// recording through them hashes no label and allocates nothing.
pub(crate) struct Meters {
    rejected: [Counter; BREAKER_REASONS.len()],
    durations: Option<[Histogram; Ending::TIMED.len()]>,
}

impl Meters {
    /// Registers the handles with the installed recorder, labelled
    /// `upstream` (none when `None`).
    pub(crate) fn register(upstream: Option<&str>, config: CallMetrics) -> Meters {
        let up = upstream.map(str::to_owned);
        let rejected = BREAKER_REASONS.map(|r| rejected_counter(up.as_deref(), r));
        let durations = config
            .records_duration()
            .then(|| Ending::TIMED.map(|e| duration_histogram(up.as_deref(), e.as_str())));
        Meters {
            rejected,
            durations,
        }
    }

    /// No handles: for a keyed layer that labels every call per host.
    pub(crate) fn per_host() -> Meters {
        Meters {
            rejected: BREAKER_REASONS.map(|_| Counter::noop()),
            durations: None,
        }
    }

    pub(crate) fn rejected(&self, rejected: &Rejected) {
        if let Some(i) = reason_index(rejected.reason()) {
            self.rejected[i].increment(1);
        }
    }

    pub(crate) fn duration(&self, ending: Ending, seconds: f64) {
        if let (Some(h), Some(i)) = (&self.durations, ending.timed_index()) {
            h[i].record(seconds);
        }
    }
}

impl fmt::Debug for Meters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Meters")
            .field("durations", &self.durations.is_some())
            .finish_non_exhaustive()
    }
}

fn rejected_counter(upstream: Option<&str>, reason: RejectReason) -> Counter {
    match upstream {
        Some(up) => metrics::counter!(
            REJECTED_TOTAL,
            "upstream" => up.to_owned(),
            "reason" => reason.as_str()
        ),
        None => metrics::counter!(REJECTED_TOTAL, "reason" => reason.as_str()),
    }
}

fn duration_histogram(upstream: Option<&str>, outcome: &'static str) -> Histogram {
    match upstream {
        Some(up) => metrics::histogram!(
            CALL_DURATION_SECONDS,
            "upstream" => up.to_owned(),
            "outcome" => outcome
        ),
        None => metrics::histogram!(CALL_DURATION_SECONDS, "outcome" => outcome),
    }
}

/// Records one rejection per host (a keyed layer with [`CallMetrics::per_host`]).
pub(crate) fn rejected_per_host(upstream: &str, rejected: &Rejected) {
    if reason_index(rejected.reason()).is_some() {
        rejected_counter(Some(upstream), rejected.reason()).increment(1);
    }
}

/// Records one call's duration per host (a keyed layer with [`CallMetrics::per_host`]).
pub(crate) fn duration_per_host(upstream: &str, outcome: &'static str, seconds: f64) {
    duration_histogram(Some(upstream), outcome).record(seconds);
}

/// Counts a fallback through a registered handle (a [`FallbackLayer`](crate::tower::FallbackLayer)'s).
pub(crate) fn fallback_counter(upstream: Option<&str>) -> Counter {
    match upstream {
        Some(up) => metrics::counter!(FALLBACK_TOTAL, "upstream" => up.to_owned()),
        None => metrics::counter!(FALLBACK_TOTAL),
    }
}
