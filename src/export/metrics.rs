//! Export through the [`metrics`] facade (feature `metrics`): breaker state
//! at scrape time, and — opt-in, through the tower layers — per-call series.
//!
//! # At scrape time
//!
//! Nothing of this part runs per call. Gauges and counters are read from the
//! breakers' own atomics when you call [`MetricsExporter::export_breaker`] or
//! [`MetricsExporter::export_registry`] — typically right before your
//! exporter renders a scrape — so the hot path pays no label hashing and no
//! extra atomic. Transitions are counted as they happen (they are rare) by
//! [`record_transition`] or [`MetricsObserver`].
//!
//! | series | kind | labels | from |
//! |---|---|---|---|
//! | `circuit_breaker_state` | gauge, 1 for the current state and 0 for the others | `upstream`, `state` | [`Breaker::snapshot`] |
//! | `circuit_breaker_calls_total` | counter (absolute) | `upstream`, `outcome` = `success`, `failure`, `ignored`, `dropped`, `abandoned`, `panicked`, `rejected`, `retry_refused` (retries the retry budget refused, also in `rejected`) | one breaker's call counters: needs [`Builder::count_calls(true)`](crate::Builder::count_calls) |
//! | `circuit_breaker_open_age_seconds` | gauge: how long the current open period (Open or ForcedOpen) has lasted; 0 in any other state | `upstream` | [`Breaker::snapshot`] (`time_in_state`) |
//! | `circuit_breaker_failure_ratio` | gauge, 0..1, or -1 below `min_calls` | `upstream` | the window |
//! | `circuit_breaker_slow_call_ratio` | gauge, 0..1, or -1 below `min_calls` | `upstream` | the window |
//! | `circuit_breaker_ramp_admitted_ratio` | gauge, (0, 1]: the share of calls a breaker ramping up after a recovery admits now ([`Builder::ramp`](crate::Builder::ramp)); 0 when not ramping | `upstream` | [`Breaker::snapshot`] (`ramp_fraction`) |
//! | `circuit_breaker_retry_room` | gauge: what the [retry budget](crate::RetryBudget) has room for now (retries, or failures before retries stop); absent without a budget | `upstream` | [`Breaker::snapshot`] (`retry_room`) |
//! | `circuit_breaker_backoff_step` | gauge: the exponent of the next open period; kept by a close and decayed by healthy time | `upstream` | [`Breaker::snapshot`] (`backoff_step`) |
//! | `circuit_breaker_transitions_total` | counter | `from`, `to`, `reason` (+ `upstream` with [`record_transition_per_host`]) | [`record_transition`] / [`MetricsObserver`] |
//! | `circuit_breaker_open_seconds_total` | counter, seconds: each open period's length ([`Transition::open_for`]), added when the period begins, rounded to whole seconds | (+ `upstream` with [`record_transition_per_host`]) | [`record_transition`] / [`MetricsObserver`] |
//! | `circuit_breaker_registry_calls_total` | counter (absolute) | `outcome` | [`Registry::lifetime_calls`]: live breakers plus every evicted or removed one |
//! | `circuit_breaker_registry_evicted_total` | counter (absolute) | — | [`Registry::evicted`] |
//! | `circuit_breaker_registry_removed_total` | counter (absolute) | — | [`Registry::removed`] |
//! | `circuit_breaker_registry_untracked_total` | counter (absolute) | — | [`Registry::untracked`]: new keys sent to an overflow breaker |
//! | `circuit_breaker_registry_keyless_total` | counter (absolute) | — | [`Registry::keyless`] |
//! | `circuit_breaker_registry_refused_trips_total` | counter (absolute) | — | [`Registry::refused_trips`] |
//! | `circuit_breaker_open` | gauge | — | registry counters |
//! | `circuit_breaker_half_open` | gauge | — | registry counters |
//! | `circuit_breaker_tracked` | gauge | — | registry counters |
//! | `circuit_breaker_outlier_ejections_total` | counter (absolute): outliers ejected (each won ejection: the breaker opened by it) | `pool`, `reason` = `success_rate`, `failure_percentage`, `slow` | [`Registry::outlier_pools`] (`enforced`) |
//! | `circuit_breaker_outlier_detected_total` | counter (absolute): outliers found, ejected or not (a rule's enforcement below 100 %, the pool's cap, panic mode) | `pool`, `reason` | [`Registry::outlier_pools`] (`detected`) |
//! | `circuit_breaker_outlier_late_reports_total` | counter (absolute): hosts' reports that missed their interval's sums | `pool` | [`Registry::outlier_pools`] |
//! | `circuit_breaker_outlier_pool_hosts` | gauge: the pool's breakers now | `pool` | [`Registry::outlier_pools`] (`members`) |
//! | `circuit_breaker_outlier_pool_unhealthy` | gauge: of them, open, half-open or forced open | `pool` | [`Registry::outlier_pools`] |
//! | `circuit_breaker_outlier_pool_ejected` | gauge: of them, ejected as outliers now | `pool` | [`Registry::outlier_pools`] |
//! | `circuit_breaker_outlier_pool_panicking` | gauge, 1 while the pool panics (its outlier ejections lifted), else 0 | `pool` | [`Registry::outlier_pools`] |
//! | `circuit_breaker_outlier_success_rate_threshold_ratio` | gauge, 0..1: the last computed interval's success-rate threshold, or -1 without one | `pool` | [`Registry::outlier_pools`] |
//! | `circuit_breaker_outlier_slow_call_limit_ratio` | gauge, 0..1: the latency rule's slow-call rate limit of the last computed interval, or -1 without one | `pool` | [`Registry::outlier_pools`] |
//! | `circuit_breaker_hints_ignored_total` | counter (absolute) | — | [`hints_ignored_total`]: upstream hints (`Retry-After`, gRPC pushback) ignored as bad, process-wide; published by both `export_breaker` and `export_registry` |
//! | `circuit_breaker_sync_published_total`, `…_sync_errors_total`, `…_sync_dropped_total`, `…_sync_received_total`, `…_sync_applied_total`, `…_sync_stale_total`, `…_sync_below_min_reporters_total`, `…_sync_ignored_total`, `…_sync_reconciled_total`, `…_sync_bad_records_total` | counter (absolute) | — | a replica's [`SyncStats`](crate::share::SyncStats) (trips shared across replicas): [`SyncStats::export_metrics`](crate::share::SyncStats::export_metrics) |
//!
//! A registry may hold millions of hosts: its per-host series (the first
//! eight rows) are **opt-in** ([`MetricsExporter::per_host`]); its aggregates
//! are always exported, under **their own names** (`circuit_breaker_registry_*`),
//! so a `sum()` over the per-host series never double-counts them. A single
//! breaker exported with [`export_breaker`](MetricsExporter::export_breaker)
//! always gets its per-host series.
//!
//! # Outlier pools
//!
//! A registry with outlier detection ([`RegistryBuilder::outliers`]) exports
//! one set of `circuit_breaker_outlier_*` series per pool, labelled `pool`
//! (`"default"`, or the name a key's configuration gives), with
//! [`export_registry`](MetricsExporter::export_registry): read from the
//! pools' own counters at scrape time, a handful of series per pool
//! whatever the number of hosts, none without pools. The ejections are
//! counted by the rule that found the host (`reason`), which a transition
//! does not carry: a transition says only [`Reason::Outlier`] (success rate
//! or failure percentage) or [`Reason::SlowOutlier`], and is counted under
//! that `reason` in `circuit_breaker_transitions_total` like any other.
//! Which rule holds a host open now is its snapshot's
//! [`outlier_ejection`](BreakerSnapshot::outlier_ejection) (and the status
//! page's `outlier_ejection`).
//!
//! [`RegistryBuilder::outliers`]: crate::RegistryBuilder::outliers
//! [`Reason::Outlier`]: crate::Reason::Outlier
//! [`Reason::SlowOutlier`]: crate::Reason::SlowOutlier
//!
//! # Per call (tower layers)
//!
//! A tower layer given [`CallMetrics`] (`.call_metrics(..)`) records, as
//! calls happen:
//!
//! | series | kind | labels | recorded |
//! |---|---|---|---|
//! | `circuit_breaker_rejected_total` | counter | `upstream`, `reason` = `open`, `half_open_full`, `forced_open`, `ramp` | each rejected call |
//! | `circuit_breaker_call_duration_seconds` | histogram, seconds | `upstream`, `outcome` = an [`Ending`](crate::export::Ending)'s name but `rejected` ([`Ending::TIMED`](crate::export::Ending::TIMED)) | each admitted call, from its admission to its verdict (or its drop); **opt-in**: [`CallMetrics::call_duration`] |
//! | `circuit_breaker_fallback_total` | counter | `upstream` | each rejection answered by a [`FallbackLayer`](crate::tower::FallbackLayer) (or [`record_fallback`]) |
//!
//! `upstream` is the layer's `upstream` name for a single-breaker layer
//! (absent when it has none); a keyed layer aggregates its hosts (no
//! `upstream` label) unless [`CallMetrics::per_host`] names each key (one
//! label set per host, and the key formatted for every recorded call: mind
//! the cardinality and the allocation).
//!
//! The duration is measured from the permit's start — the layers always
//! admit at a clock reading — to the verdict. With the histogram off no
//! clock is read for it; with it on, the verdict reads the clock once (and
//! hands that reading to the breaker, which then reads none of its own), so
//! a call costs at most one clock read more than without it.
//!
//! The layers register their series' handles when the layer is built (a
//! single-breaker layer) or label them per call (a keyed layer per host):
//! install the recorder before building the layers.
//!
//! # Counters that never go down
//!
//! Counters are published with `Counter::absolute`, which keeps the largest
//! value ever set, so a published total must itself be monotone or it
//! stalls. A breaker's own counters are; a registry's sum over its live
//! breakers is not (an evicted host takes its calls with it). So the
//! registry's totals are its **lifetime** totals: the counters of every
//! breaker that left (folded in when it left) plus the live ones, each
//! breaker counted exactly once ([`Registry::lifetime_calls`]).
//!
//! [`hints_ignored_total`]: crate::hint::hints_ignored_total

use core::fmt;

use crate::breaker::Breaker;
use crate::clock::Clock;
use crate::error::Rejected;
use crate::hint::hints_ignored_total;
use crate::observe::{BreakerSnapshot, CallCounts, Observer, Transition};
use crate::outlier::{OutlierPoolSnapshot, OutlierRule};
use crate::registry::{Key, Registry};
use crate::state::State;

/// `circuit_breaker_state`
pub const STATE: &str = "circuit_breaker_state";
/// `circuit_breaker_calls_total`
pub const CALLS_TOTAL: &str = "circuit_breaker_calls_total";
/// `circuit_breaker_transitions_total`
pub const TRANSITIONS_TOTAL: &str = "circuit_breaker_transitions_total";
/// `circuit_breaker_failure_ratio`
pub const FAILURE_RATIO: &str = "circuit_breaker_failure_ratio";
/// `circuit_breaker_slow_call_ratio`
pub const SLOW_CALL_RATIO: &str = "circuit_breaker_slow_call_ratio";
/// `circuit_breaker_ramp_admitted_ratio`: the share of calls a ramping
/// breaker admits now (0 when not ramping).
pub const RAMP_ADMITTED_RATIO: &str = "circuit_breaker_ramp_admitted_ratio";
/// `circuit_breaker_retry_room`: what a breaker's retry budget has room for
/// now (see [`BreakerSnapshot::retry_room`]).
pub const RETRY_ROOM: &str = "circuit_breaker_retry_room";
/// `circuit_breaker_backoff_step`: the exponent of the next open period.
pub const BACKOFF_STEP: &str = "circuit_breaker_backoff_step";
/// `circuit_breaker_open`
pub const OPEN: &str = "circuit_breaker_open";
/// `circuit_breaker_half_open`
pub const HALF_OPEN: &str = "circuit_breaker_half_open";
/// `circuit_breaker_tracked`
pub const TRACKED: &str = "circuit_breaker_tracked";
/// `circuit_breaker_open_age_seconds`
pub const OPEN_AGE_SECONDS: &str = "circuit_breaker_open_age_seconds";
/// `circuit_breaker_open_seconds_total`
pub const OPEN_SECONDS_TOTAL: &str = "circuit_breaker_open_seconds_total";
/// `circuit_breaker_rejected_total`
pub const REJECTED_TOTAL: &str = "circuit_breaker_rejected_total";
/// `circuit_breaker_call_duration_seconds`
pub const CALL_DURATION_SECONDS: &str = "circuit_breaker_call_duration_seconds";
/// `circuit_breaker_fallback_total`
pub const FALLBACK_TOTAL: &str = "circuit_breaker_fallback_total";
/// `circuit_breaker_registry_calls_total`
pub const REGISTRY_CALLS_TOTAL: &str = "circuit_breaker_registry_calls_total";
/// `circuit_breaker_registry_evicted_total`
pub const REGISTRY_EVICTED_TOTAL: &str = "circuit_breaker_registry_evicted_total";
/// `circuit_breaker_registry_removed_total`
pub const REGISTRY_REMOVED_TOTAL: &str = "circuit_breaker_registry_removed_total";
/// `circuit_breaker_registry_untracked_total`
pub const REGISTRY_UNTRACKED_TOTAL: &str = "circuit_breaker_registry_untracked_total";
/// `circuit_breaker_registry_keyless_total`
pub const REGISTRY_KEYLESS_TOTAL: &str = "circuit_breaker_registry_keyless_total";
/// `circuit_breaker_registry_refused_trips_total`
pub const REGISTRY_REFUSED_TRIPS_TOTAL: &str = "circuit_breaker_registry_refused_trips_total";
/// `circuit_breaker_outlier_ejections_total{pool,reason}`: outliers ejected,
/// by the rule that found them.
pub const OUTLIER_EJECTIONS_TOTAL: &str = "circuit_breaker_outlier_ejections_total";
/// `circuit_breaker_outlier_detected_total{pool,reason}`: outliers found,
/// ejected or not.
pub const OUTLIER_DETECTED_TOTAL: &str = "circuit_breaker_outlier_detected_total";
/// `circuit_breaker_outlier_late_reports_total{pool}`: reports that missed
/// their interval's sums.
pub const OUTLIER_LATE_REPORTS_TOTAL: &str = "circuit_breaker_outlier_late_reports_total";
/// `circuit_breaker_outlier_pool_hosts{pool}`: the pool's breakers.
pub const OUTLIER_POOL_HOSTS: &str = "circuit_breaker_outlier_pool_hosts";
/// `circuit_breaker_outlier_pool_unhealthy{pool}`: of them, open, half-open
/// or forced open.
pub const OUTLIER_POOL_UNHEALTHY: &str = "circuit_breaker_outlier_pool_unhealthy";
/// `circuit_breaker_outlier_pool_ejected{pool}`: of them, ejected as
/// outliers now.
pub const OUTLIER_POOL_EJECTED: &str = "circuit_breaker_outlier_pool_ejected";
/// `circuit_breaker_outlier_pool_panicking{pool}`: 1 while the pool panics.
pub const OUTLIER_POOL_PANICKING: &str = "circuit_breaker_outlier_pool_panicking";
/// `circuit_breaker_outlier_success_rate_threshold_ratio{pool}`: the
/// success-rate threshold (-1 without one).
pub const OUTLIER_SUCCESS_RATE_THRESHOLD_RATIO: &str =
    "circuit_breaker_outlier_success_rate_threshold_ratio";
/// `circuit_breaker_outlier_slow_call_limit_ratio{pool}`: the latency rule's
/// slow-call rate limit (-1 without one).
pub const OUTLIER_SLOW_CALL_LIMIT_RATIO: &str = "circuit_breaker_outlier_slow_call_limit_ratio";
/// `circuit_breaker_hints_ignored_total`: upstream hints ignored as bad,
/// process-wide ([`hints_ignored_total`]).
pub const HINTS_IGNORED_TOTAL: &str = "circuit_breaker_hints_ignored_total";

/// `circuit_breaker_sync_published_total`: local trips the store accepted.
pub const SYNC_PUBLISHED_TOTAL: &str = "circuit_breaker_sync_published_total";
/// `circuit_breaker_sync_errors_total`: store operations that failed or
/// timed out (the replica went on local-only).
pub const SYNC_ERRORS_TOTAL: &str = "circuit_breaker_sync_errors_total";
/// `circuit_breaker_sync_dropped_total`: local trips never shared (outbox
/// full, key too long, table of trips to publish full).
pub const SYNC_DROPPED_TOTAL: &str = "circuit_breaker_sync_dropped_total";
/// `circuit_breaker_sync_received_total`: news received.
pub const SYNC_RECEIVED_TOTAL: &str = "circuit_breaker_sync_received_total";
/// `circuit_breaker_sync_applied_total`: news that opened a breaker or
/// extended its period.
pub const SYNC_APPLIED_TOTAL: &str = "circuit_breaker_sync_applied_total";
/// `circuit_breaker_sync_stale_total`: news not newer than the last applied.
pub const SYNC_STALE_TOTAL: &str = "circuit_breaker_sync_stale_total";
/// `circuit_breaker_sync_below_min_reporters_total`: news reported by fewer
/// replicas than `min_reporters`.
pub const SYNC_BELOW_MIN_REPORTERS_TOTAL: &str = "circuit_breaker_sync_below_min_reporters_total";
/// `circuit_breaker_sync_ignored_total`: well-formed news set aside otherwise.
pub const SYNC_IGNORED_TOTAL: &str = "circuit_breaker_sync_ignored_total";
/// `circuit_breaker_sync_reconciled_total`: reconciliations done.
pub const SYNC_RECONCILED_TOTAL: &str = "circuit_breaker_sync_reconciled_total";
/// `circuit_breaker_sync_bad_records_total`: malformed records and messages
/// found in the store and set aside.
pub const SYNC_BAD_RECORDS_TOTAL: &str = "circuit_breaker_sync_bad_records_total";

/// The sync counters of a sharing replica and their descriptions, in the
/// order [`SyncStats::export_metrics`](crate::share::SyncStats::export_metrics) publishes them.
pub(crate) const SYNC: [(&str, &str); 10] = [
    (
        SYNC_PUBLISHED_TOTAL,
        "Local trips the shared store accepted",
    ),
    (
        SYNC_ERRORS_TOTAL,
        "Shared-store operations that failed or timed out (local-only meanwhile)",
    ),
    (
        SYNC_DROPPED_TOTAL,
        "Local trips never shared (outbox or table full, key too long)",
    ),
    (
        SYNC_RECEIVED_TOTAL,
        "News of other replicas' trips received",
    ),
    (
        SYNC_APPLIED_TOTAL,
        "News that opened a breaker or extended its open period",
    ),
    (
        SYNC_STALE_TOTAL,
        "News not newer than the last applied for its key",
    ),
    (
        SYNC_BELOW_MIN_REPORTERS_TOTAL,
        "News reported by fewer replicas than min_reporters",
    ),
    (
        SYNC_IGNORED_TOTAL,
        "News set aside (untrackable key, own trip)",
    ),
    (
        SYNC_RECONCILED_TOTAL,
        "Reconciliations with the shared store",
    ),
    (
        SYNC_BAD_RECORDS_TOTAL,
        "Malformed records and messages in the shared store, set aside",
    ),
];

/// Registers a description and unit for every series (call once, after
/// installing the recorder).
pub fn describe() {
    use metrics::{describe_counter, describe_gauge, Unit};
    describe_gauge!(STATE, "1 for the breaker's current state, 0 for the others");
    describe_counter!(
        CALLS_TOTAL,
        Unit::Count,
        "Calls by outcome, rejections included"
    );
    describe_counter!(
        TRANSITIONS_TOTAL,
        Unit::Count,
        "State transitions by from, to and reason"
    );
    describe_gauge!(
        FAILURE_RATIO,
        Unit::Count,
        "Failures / calls in the window (0..1)"
    );
    describe_gauge!(
        SLOW_CALL_RATIO,
        Unit::Count,
        "Slow calls / calls in the window (0..1)"
    );
    describe_recovery();
    describe_outliers();
    describe_counter!(
        REGISTRY_CALLS_TOTAL,
        Unit::Count,
        "Calls by outcome over every breaker the registry ever held"
    );
    describe_counter!(
        REGISTRY_EVICTED_TOTAL,
        Unit::Count,
        "Breakers evicted (idle, or to make room)"
    );
    describe_counter!(
        REGISTRY_REMOVED_TOTAL,
        Unit::Count,
        "Breakers removed (discovery)"
    );
    describe_counter!(
        REGISTRY_UNTRACKED_TOTAL,
        Unit::Count,
        "New keys sent to an overflow breaker (registry full)"
    );
    describe_counter!(
        REGISTRY_KEYLESS_TOTAL,
        Unit::Count,
        "Requests without a breaker key"
    );
    describe_counter!(
        REGISTRY_REFUSED_TRIPS_TOTAL,
        Unit::Count,
        "Trips refused by the open cap"
    );
    describe_gauge!(
        OPEN_AGE_SECONDS,
        Unit::Seconds,
        "How long the current open period has lasted (0 when not open)"
    );
    describe_counter!(
        OPEN_SECONDS_TOTAL,
        Unit::Seconds,
        "Length of every open period begun, in whole seconds"
    );
    describe_counter!(
        REJECTED_TOTAL,
        Unit::Count,
        "Calls rejected by the breaker, by reason"
    );
    metrics::describe_histogram!(
        CALL_DURATION_SECONDS,
        Unit::Seconds,
        "Admitted calls from admission to verdict, by outcome"
    );
    describe_counter!(
        FALLBACK_TOTAL,
        Unit::Count,
        "Rejected calls answered by a fallback"
    );
    describe_gauge!(OPEN, Unit::Count, "Breakers open now");
    describe_gauge!(HALF_OPEN, Unit::Count, "Breakers half-open now");
    describe_gauge!(TRACKED, Unit::Count, "Breakers held by the registry");
    describe_counter!(
        HINTS_IGNORED_TOTAL,
        Unit::Count,
        "Upstream hints (Retry-After, gRPC pushback) ignored as malformed or absurd, process-wide"
    );
    for (name, description) in SYNC {
        describe_counter!(name, Unit::Count, description);
    }
}

/// Describes the recovery gauges (a part of [`describe`]).
fn describe_recovery() {
    use metrics::{describe_gauge, Unit};
    describe_gauge!(
        RAMP_ADMITTED_RATIO,
        Unit::Count,
        "Share of calls admitted while ramping up after a recovery (0..1; 0 when not ramping)"
    );
    describe_gauge!(
        BACKOFF_STEP,
        Unit::Count,
        "Exponent of the next open period (decays with healthy time)"
    );
}

/// Describes the outlier pools' series (a part of [`describe`]).
fn describe_outliers() {
    use metrics::{describe_counter, describe_gauge, Unit};
    describe_counter!(
        OUTLIER_EJECTIONS_TOTAL,
        Unit::Count,
        "Hosts ejected as outliers of their pool, by the rule that found them"
    );
    describe_counter!(
        OUTLIER_DETECTED_TOTAL,
        Unit::Count,
        "Hosts found outliers of their pool, ejected or not, by rule"
    );
    describe_counter!(
        OUTLIER_LATE_REPORTS_TOTAL,
        Unit::Count,
        "Hosts' interval reports that missed their pool's sums"
    );
    describe_gauge!(OUTLIER_POOL_HOSTS, Unit::Count, "Breakers in the pool");
    describe_gauge!(
        OUTLIER_POOL_UNHEALTHY,
        Unit::Count,
        "Breakers of the pool open, half-open or forced open"
    );
    describe_gauge!(
        OUTLIER_POOL_EJECTED,
        Unit::Count,
        "Breakers of the pool ejected as outliers now"
    );
    describe_gauge!(
        OUTLIER_POOL_PANICKING,
        "1 while too few of the pool's hosts are healthy (outlier ejections lifted)"
    );
    describe_gauge!(
        OUTLIER_SUCCESS_RATE_THRESHOLD_RATIO,
        Unit::Count,
        "Success rate under which a host is an outlier (0..1; -1 without one)"
    );
    describe_gauge!(
        OUTLIER_SLOW_CALL_LIMIT_RATIO,
        Unit::Count,
        "Slow-call rate over which a host is a latency outlier (0..1; -1 without one)"
    );
}

/// Publishes the series of a registry's outlier pools (see the module's
/// "Outlier pools"): each pool's counters as absolute counters (a pool's
/// counts only grow, and a pool lives as long as its registry) and its
/// gauges.
pub fn export_outlier_pools(pools: &[OutlierPoolSnapshot]) {
    for p in pools {
        let pool = || String::from(&*p.name);
        for rule in OutlierRule::ALL {
            metrics::counter!(OUTLIER_EJECTIONS_TOTAL, "pool" => pool(), "reason" => rule.as_str())
                .absolute(p.enforced(rule));
            metrics::counter!(OUTLIER_DETECTED_TOTAL, "pool" => pool(), "reason" => rule.as_str())
                .absolute(p.detected(rule));
        }
        metrics::counter!(OUTLIER_LATE_REPORTS_TOTAL, "pool" => pool()).absolute(p.late_reports);
        metrics::gauge!(OUTLIER_POOL_HOSTS, "pool" => pool()).set(p.members as f64);
        metrics::gauge!(OUTLIER_POOL_UNHEALTHY, "pool" => pool()).set(p.unhealthy as f64);
        metrics::gauge!(OUTLIER_POOL_EJECTED, "pool" => pool()).set(p.ejected as f64);
        metrics::gauge!(OUTLIER_POOL_PANICKING, "pool" => pool())
            .set(f64::from(u8::from(p.panicking)));
        metrics::gauge!(OUTLIER_SUCCESS_RATE_THRESHOLD_RATIO, "pool" => pool())
            .set(ratio_or_unknown(p.success_rate_threshold));
        metrics::gauge!(OUTLIER_SLOW_CALL_LIMIT_RATIO, "pool" => pool())
            .set(ratio_or_unknown(p.slow_rate_limit));
    }
}

/// Counts one transition in `circuit_breaker_transitions_total{from,to,reason}`,
/// and the length of an open period it begins in
/// `circuit_breaker_open_seconds_total`.
/// Usable as a tower layer's hook:
/// `.on_transition(failfast::export::metrics::record_transition)` (the
/// upstream is not a label of this series; see [`record_transition_per_host`]).
pub fn record_transition(_upstream: &str, transition: &Transition) {
    metrics::counter!(
        TRANSITIONS_TOTAL,
        "from" => transition.from.as_str(),
        "to" => transition.to.as_str(),
        "reason" => transition.reason.as_str()
    )
    .increment(1);
    if let Some(secs) = open_seconds(transition) {
        metrics::counter!(OPEN_SECONDS_TOTAL).increment(secs);
    }
}

/// The whole seconds an open period that `transition` begins adds to
/// `circuit_breaker_open_seconds_total`: its length, rounded to the
/// nearest second (the facade's counters are integers).
fn open_seconds(transition: &Transition) -> Option<u64> {
    let open_for = transition.open_for?;
    let secs = open_for.as_secs() + u64::from(open_for.subsec_nanos() >= 500_000_000);
    (secs > 0).then_some(secs)
}

/// Counts one transition in
/// `circuit_breaker_transitions_total{upstream,from,to,reason}`: the opt-in
/// per-host variant of [`record_transition`] (one label set per host and
/// transition kind: mind the cardinality). Usable as a tower layer's hook:
/// `.on_transition(failfast::export::metrics::record_transition_per_host)`.
/// Use one of the two for a given metric, not both.
pub fn record_transition_per_host(upstream: &str, transition: &Transition) {
    metrics::counter!(
        TRANSITIONS_TOTAL,
        "upstream" => upstream.to_owned(),
        "from" => transition.from.as_str(),
        "to" => transition.to.as_str(),
        "reason" => transition.reason.as_str()
    )
    .increment(1);
    if let Some(secs) = open_seconds(transition) {
        metrics::counter!(OPEN_SECONDS_TOTAL, "upstream" => upstream.to_owned()).increment(secs);
    }
}

/// An [`Observer`] that counts every transition (see [`record_transition`]).
///
/// ```
/// use failfast::export::metrics::MetricsObserver;
/// use failfast::Breaker;
///
/// let breaker = Breaker::builder().consecutive_failures(3).observer(MetricsObserver).build()?;
/// # let _ = breaker;
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Copy, Clone, Debug, Default)]
pub struct MetricsObserver;

impl Observer for MetricsObserver {
    fn on_transition(&self, transition: &Transition) {
        record_transition("", transition);
    }
}

/// Publishes breaker and registry state at scrape time.
///
/// ```
/// use failfast::export::metrics::MetricsExporter;
/// use failfast::Breaker;
///
/// let breaker = Breaker::builder().consecutive_failures(3).count_calls(true).build()?;
/// // In the scrape handler, before rendering:
/// MetricsExporter::new().export_breaker("payments", &breaker);
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Copy, Clone, Debug, Default)]
pub struct MetricsExporter {
    per_host: bool,
}

impl MetricsExporter {
    /// An exporter of registry aggregates only.
    pub fn new() -> MetricsExporter {
        MetricsExporter::default()
    }

    /// Also export each registry entry's per-host series (one label set per
    /// host: mind the cardinality).
    pub fn per_host(mut self, on: bool) -> MetricsExporter {
        self.per_host = on;
        self
    }

    /// Whether registries export per-host series.
    pub fn is_per_host(&self) -> bool {
        self.per_host
    }

    /// Publishes one breaker's per-host series, read from
    /// [`Breaker::snapshot`], and the process-wide
    /// `circuit_breaker_hints_ignored_total`.
    pub fn export_breaker<C: Clock>(&self, upstream: &str, breaker: &Breaker<C>) {
        export_snapshot(upstream, &breaker.snapshot());
        export_process();
    }

    /// Publishes a registry's aggregates — `circuit_breaker_open`,
    /// `circuit_breaker_half_open`, `circuit_breaker_tracked` (O(1), from its
    /// counters), its departure and refusal counters, and
    /// `circuit_breaker_registry_calls_total{outcome}`, its lifetime totals
    /// (one pass over the entries, only when its breakers count calls) — and
    /// the process-wide `circuit_breaker_hints_ignored_total`, and the
    /// series of its outlier pools, if it has any (see the module's
    /// "Outlier pools"; [`export_outlier_pools`]); with
    /// [`per_host`](Self::per_host) also every key's per-host series, the
    /// key formatted by `Display` as `upstream`.
    ///
    /// ```
    /// use failfast::export::metrics::MetricsExporter;
    /// use failfast::{Breaker, Registry};
    ///
    /// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(3)).build()?;
    /// let _a = registry.handle("a.example:443");
    /// MetricsExporter::new().export_registry(&registry); // aggregates only
    /// MetricsExporter::new().per_host(true).export_registry(&registry);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn export_registry<K, H, C>(&self, registry: &Registry<K, H, C>)
    where
        K: fmt::Display + Key + ?Sized,
        C: Clock,
    {
        metrics::gauge!(OPEN).set(registry.open_count() as f64);
        metrics::gauge!(HALF_OPEN).set(registry.half_open_count() as f64);
        metrics::gauge!(TRACKED).set(registry.len() as f64);
        metrics::counter!(REGISTRY_EVICTED_TOTAL).absolute(registry.evicted());
        metrics::counter!(REGISTRY_REMOVED_TOTAL).absolute(registry.removed());
        metrics::counter!(REGISTRY_UNTRACKED_TOTAL).absolute(registry.untracked());
        metrics::counter!(REGISTRY_KEYLESS_TOTAL).absolute(registry.keyless());
        metrics::counter!(REGISTRY_REFUSED_TRIPS_TOTAL).absolute(registry.refused_trips());
        if let Some(calls) = registry.lifetime_calls() {
            for (outcome, n) in outcomes(&calls) {
                metrics::counter!(REGISTRY_CALLS_TOTAL, "outcome" => outcome).absolute(n);
            }
        }
        export_outlier_pools(&registry.outlier_pools());
        if self.per_host {
            registry.for_each_snapshot(|key, snapshot| export_snapshot(&key.to_string(), snapshot));
        }
        export_process();
    }
}

/// Publishes the process-wide figures: with both exports (absolute, so
/// publishing it twice in one scrape changes nothing).
fn export_process() {
    metrics::counter!(HINTS_IGNORED_TOTAL).absolute(hints_ignored_total());
}

fn outcomes(calls: &CallCounts) -> [(&'static str, u64); 8] {
    [
        ("success", calls.successes),
        ("failure", calls.failures),
        ("ignored", calls.ignored),
        ("dropped", calls.dropped),
        ("abandoned", calls.abandoned),
        ("panicked", calls.panicked),
        ("rejected", calls.rejected),
        ("retry_refused", calls.retries_refused),
    ]
}

/// A rate gauge's value: the rate, or -1 while the window holds fewer than
/// `min_calls` calls (Resilience4j's convention). A gauge keeps its last
/// value, so skipping it would leave a stale rate on the dashboard.
fn ratio_or_unknown(rate: Option<f64>) -> f64 {
    rate.unwrap_or(-1.0)
}

/// Publishes the per-host series of one snapshot under `upstream`.
pub fn export_snapshot(upstream: &str, snapshot: &BreakerSnapshot) {
    for state in State::all() {
        let value = if state == snapshot.state { 1.0 } else { 0.0 };
        metrics::gauge!(STATE, "upstream" => upstream.to_owned(), "state" => state.as_str())
            .set(value);
    }
    let open_age = match snapshot.state {
        State::Open | State::ForcedOpen => snapshot.time_in_state.as_secs_f64(),
        _ => 0.0,
    };
    metrics::gauge!(OPEN_AGE_SECONDS, "upstream" => upstream.to_owned()).set(open_age);
    metrics::gauge!(FAILURE_RATIO, "upstream" => upstream.to_owned())
        .set(ratio_or_unknown(snapshot.failure_rate));
    metrics::gauge!(SLOW_CALL_RATIO, "upstream" => upstream.to_owned())
        .set(ratio_or_unknown(snapshot.slow_call_rate));
    export_recovery(upstream, snapshot);
    if let Some(calls) = snapshot.calls {
        for (outcome, n) in outcomes(&calls) {
            metrics::counter!(CALLS_TOTAL, "upstream" => upstream.to_owned(), "outcome" => outcome)
                .absolute(n);
        }
    }
}

/// Publishes the recovery gauges of one snapshot: the share a ramp admits
/// (0 when not ramping: a gauge keeps its last value, so a finished ramp
/// must be set back) and the backoff step.
fn export_recovery(upstream: &str, snapshot: &BreakerSnapshot) {
    metrics::gauge!(RAMP_ADMITTED_RATIO, "upstream" => upstream.to_owned())
        .set(snapshot.ramp_fraction.unwrap_or(0.0));
    metrics::gauge!(BACKOFF_STEP, "upstream" => upstream.to_owned())
        .set(f64::from(snapshot.backoff_step));
    if let Some(room) = snapshot.retry_room {
        metrics::gauge!(RETRY_ROOM, "upstream" => upstream.to_owned()).set(f64::from(room));
    }
}

/// Counts one rejected call in `circuit_breaker_rejected_total{upstream,reason}`
/// (for calls outside the tower layers, which count their own).
///
/// ```
/// use failfast::Breaker;
///
/// let breaker = Breaker::builder().consecutive_failures(1).build()?;
/// breaker.force_open();
/// if let Err(rejected) = breaker.try_acquire() {
///     failfast::export::metrics::record_rejection("payments", &rejected);
/// }
/// # Ok::<(), failfast::ConfigError>(())
/// ```
pub fn record_rejection(upstream: &str, rejected: &Rejected) {
    metrics::counter!(
        REJECTED_TOTAL,
        "upstream" => upstream.to_owned(),
        "reason" => rejected.reason().as_str()
    )
    .increment(1);
}

/// Counts one rejection answered by a fallback in
/// `circuit_breaker_fallback_total{upstream}` (for fallbacks outside a
/// [`FallbackLayer`](crate::tower::FallbackLayer), e.g. after
/// [`Breaker::call_or_else`] answered [`Answer::Fallback`](crate::Answer::Fallback)).
pub fn record_fallback(upstream: &str) {
    metrics::counter!(FALLBACK_TOTAL, "upstream" => upstream.to_owned()).increment(1);
}

/// The per-call series a tower layer records (see the module's "Per call"
/// table): rejections by reason always, the call duration histogram when
/// asked, per host for a keyed layer when asked.
///
/// ```
/// use failfast::export::metrics::CallMetrics;
/// use failfast::tower::FailFastLayer;
/// use failfast::Breaker;
/// use std::sync::Arc;
///
/// let breaker = Arc::new(Breaker::builder().consecutive_failures(5).build()?);
/// let layer = FailFastLayer::new(breaker)
///     .upstream("payments")
///     .call_metrics(CallMetrics::new().call_duration(true));
/// # let _ = layer;
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CallMetrics {
    duration: bool,
    per_host: bool,
}

impl CallMetrics {
    /// Rejections only; no histogram; a keyed layer's hosts aggregated.
    pub fn new() -> CallMetrics {
        CallMetrics::default()
    }

    /// Also records `circuit_breaker_call_duration_seconds{upstream,outcome}`
    /// for each admitted call (one clock read more per call at most).
    pub fn call_duration(mut self, on: bool) -> CallMetrics {
        self.duration = on;
        self
    }

    /// A keyed layer labels each series with the request's key (formatted
    /// by `Display`) instead of aggregating its hosts.
    pub fn per_host(mut self, on: bool) -> CallMetrics {
        self.per_host = on;
        self
    }

    /// Whether the duration histogram is recorded.
    pub fn records_duration(&self) -> bool {
        self.duration
    }

    /// Whether a keyed layer labels its series per host.
    pub fn is_per_host(&self) -> bool {
        self.per_host
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hint::parse_retry_after;
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    /// `circuit_breaker_hints_ignored_total` as `export` publishes it.
    fn published(export: impl FnOnce()) -> u64 {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, export);
        snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .find_map(|(key, _, _, value)| match value {
                DebugValue::Counter(n) if key.key().name() == HINTS_IGNORED_TOTAL => Some(n),
                _ => None,
            })
            .expect("the counter is published")
    }

    #[test]
    fn both_exports_publish_the_ignored_hints() {
        assert_eq!(parse_retry_after(b"-1"), None);
        let after_one = hints_ignored_total();
        assert!(after_one >= 1);
        let breaker = Breaker::builder().consecutive_failures(3).build().unwrap();
        let by_breaker = published(|| MetricsExporter::new().export_breaker("a", &breaker));
        assert!(by_breaker >= after_one, "{by_breaker} < {after_one}");
        assert!(by_breaker <= hints_ignored_total());

        assert_eq!(parse_retry_after(b"soon"), None);
        let after_two = hints_ignored_total();
        let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(3))
            .build()
            .unwrap();
        let by_registry = published(|| MetricsExporter::new().export_registry(&registry));
        assert!(by_registry >= after_two, "{by_registry} < {after_two}");
        assert!(by_registry > after_one);
    }
}
