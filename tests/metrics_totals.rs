//! The metrics exporter's registry totals stay true across evictions and
//! removals: published with `Counter::absolute` (which keeps the largest value
//! ever set), they must be lifetime totals — departed breakers folded in —
//! or they stall and undercount. Per-host and aggregate series have distinct
//! names, so a `sum()` over the per-host ones never double-counts. A
//! registry's outlier pools are exported by pool and rule.

use std::time::Duration;

use failfast::export::metrics::{
    record_transition, record_transition_per_host, MetricsExporter, CALLS_TOTAL,
    REGISTRY_CALLS_TOTAL, REGISTRY_EVICTED_TOTAL, REGISTRY_REMOVED_TOTAL, TRANSITIONS_TOTAL,
};
use failfast::{Breaker, ManualClock, Registry};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

/// A series of a snapshot: name, labels, value.
type Named<T> = (String, Vec<(String, String)>, T);

/// A counter: name, labels, value.
type Counter = Named<u64>;

/// Every counter in a snapshot (a snapshot drains the recorder's counters;
/// `absolute` sets them again).
fn counters(snapshotter: &Snapshotter) -> Vec<Counter> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| match value {
            DebugValue::Counter(n) => {
                let (name, labels) = named(key);
                Some((name, labels, n))
            }
            _ => None,
        })
        .collect()
}

/// A key's name and labels.
fn named(key: metrics_util::CompositeKey) -> (String, Vec<(String, String)>) {
    let (_, key) = key.into_parts();
    let labels = key
        .labels()
        .map(|l| (l.key().to_owned(), l.value().to_owned()))
        .collect();
    (key.name().to_owned(), labels)
}

fn value<T: Copy + std::fmt::Debug>(all: &[Named<T>], name: &str, labels: &[(&str, &str)]) -> T {
    all.iter()
        .find(|(n, l, _)| {
            n == name
                && l.len() == labels.len()
                && labels
                    .iter()
                    .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|(_, _, v)| *v)
        .unwrap_or_else(|| panic!("no {name} {labels:?} in {all:?}"))
}

fn successes(
    registry: &Registry<u64, std::collections::hash_map::RandomState, ManualClock>,
    key: u64,
    n: usize,
) {
    let h = registry.handle(&key);
    for _ in 0..n {
        h.try_acquire().unwrap().success();
    }
}

#[test]
fn registry_calls_total_is_monotone_across_eviction_and_removal() {
    let clock = ManualClock::new();
    let registry =
        Registry::<u64>::builder(Breaker::builder().consecutive_failures(5).count_calls(true))
            .idle_ttl(Duration::from_secs(60))
            .build_with_clock(clock.clone())
            .unwrap();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let export = || {
        metrics::with_local_recorder(&recorder, || {
            MetricsExporter::new().export_registry(&registry)
        })
    };
    let success_total = || {
        export();
        value(
            &counters(&snapshotter),
            REGISTRY_CALLS_TOTAL,
            &[("outcome", "success")],
        )
    };

    successes(&registry, 1, 100);
    assert_eq!(success_total(), 100);

    // Host 1 is evicted: its 100 calls stay in the total.
    clock.advance(Duration::from_secs(61));
    assert_eq!(registry.sweep(usize::MAX), 1);
    export();
    let all = counters(&snapshotter);
    assert_eq!(
        value(&all, REGISTRY_CALLS_TOTAL, &[("outcome", "success")]),
        100
    );
    assert_eq!(value(&all, REGISTRY_EVICTED_TOTAL, &[]), 1);

    // 10 more on a new host: 110, then 120 — not stalled at the old maximum.
    successes(&registry, 2, 10);
    assert_eq!(success_total(), 110);
    successes(&registry, 3, 10);
    assert_eq!(success_total(), 120);

    // Removed, with and without a live handle: still counted, never lower.
    let held = registry.handle(&2);
    assert!(registry.remove(&2));
    assert!(registry.remove(&3));
    export();
    let all = counters(&snapshotter);
    assert_eq!(
        value(&all, REGISTRY_CALLS_TOTAL, &[("outcome", "success")]),
        120
    );
    assert_eq!(value(&all, REGISTRY_REMOVED_TOTAL, &[]), 2);
    drop(held);
    successes(&registry, 4, 5);
    assert_eq!(success_total(), 125);
    assert_eq!(registry.lifetime_calls().unwrap().successes, 125);
}

#[test]
fn per_host_and_aggregate_series_have_distinct_names() {
    let registry =
        Registry::<u64>::builder(Breaker::builder().consecutive_failures(5).count_calls(true))
            .build_with_clock(ManualClock::new())
            .unwrap();
    successes(&registry, 1, 3);
    successes(&registry, 2, 4);
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        MetricsExporter::new()
            .per_host(true)
            .export_registry(&registry)
    });
    let all = counters(&snapshotter);
    let per_host: u64 = all
        .iter()
        .filter(|(n, l, _)| {
            n == CALLS_TOTAL && l.iter().any(|(k, v)| k == "outcome" && v == "success")
        })
        .map(|(_, l, v)| {
            assert!(l.iter().any(|(k, _)| k == "upstream"), "{l:?}");
            *v
        })
        .sum();
    assert_eq!(
        per_host, 7,
        "a sum over the per-host series counts each call once"
    );
    assert_eq!(
        value(&all, REGISTRY_CALLS_TOTAL, &[("outcome", "success")]),
        7
    );
    assert_ne!(CALLS_TOTAL, REGISTRY_CALLS_TOTAL);
}

#[test]
fn transitions_carry_the_upstream_label_only_when_asked() {
    let breaker = Breaker::builder()
        .consecutive_failures(1)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let t = breaker.try_acquire().unwrap().failure().unwrap();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        record_transition("api.example:443", &t);
        record_transition_per_host("api.example:443", &t);
    });
    let all = counters(&snapshotter);
    let base = [
        ("from", "closed"),
        ("to", "open"),
        ("reason", t.reason.as_str()),
    ];
    assert_eq!(value(&all, TRANSITIONS_TOTAL, &base), 1);
    let mut labelled = base.to_vec();
    labelled.push(("upstream", "api.example:443"));
    assert_eq!(value(&all, TRANSITIONS_TOTAL, &labelled), 1);
}

/// A sharing replica's counters, exported: each series carries its own
/// counter's value (distinct values, so a swapped pair shows).
#[test]
fn sync_counters_are_exported_under_their_names() {
    use failfast::export::metrics::{
        SYNC_APPLIED_TOTAL, SYNC_BELOW_MIN_REPORTERS_TOTAL, SYNC_DROPPED_TOTAL, SYNC_ERRORS_TOTAL,
        SYNC_IGNORED_TOTAL, SYNC_PUBLISHED_TOTAL, SYNC_RECEIVED_TOTAL, SYNC_RECONCILED_TOTAL,
        SYNC_STALE_TOTAL,
    };
    use failfast::share::{MemoryStore, News, Outbox, Replica};
    use failfast::Reason;
    use std::sync::Arc;

    let clock = ManualClock::new();
    let registry = Arc::new(
        Registry::<String>::builder(Breaker::builder().consecutive_failures(1))
            .build_with_clock(clock.clone())
            .unwrap(),
    );
    let outbox = Arc::new(Outbox::new(1));
    let mut replica = Replica::builder(registry.clone(), outbox.clone())
        .origin("me")
        .min_reporters(2, Duration::from_secs(60))
        .build()
        .unwrap();
    let mut store = MemoryStore::new(clock.clone());
    // Two local trips into an outbox of one: one published, one dropped.
    for key in ["a:1", "b:1"] {
        let t = registry
            .with(key, |b| b.try_acquire().unwrap().failure())
            .unwrap();
        outbox.report(key, &t);
    }
    assert_eq!(replica.publish_to(&mut store).len(), 1);
    // News: 3 applied (two reporters), 2 stale, 4 below min_reporters, 5
    // ignored (its own trip coming back, ending before its own period).
    let news = |key: &str, epoch, reporters, origin: &str| {
        News::new(
            key,
            epoch,
            Duration::from_secs(1),
            reporters,
            Reason::FailureRate,
            origin,
        )
    };
    for i in 0..3 {
        replica.receive(&news(&format!("h{i}:1"), 10, 2, "x"));
    }
    for _ in 0..2 {
        replica.receive(&news("h0:1", 9, 2, "x"));
    }
    for i in 0..4 {
        replica.receive(&news(&format!("h{i}:1"), 11, 1, "x"));
    }
    for epoch in 0..5 {
        replica.receive(&news("a:1", 20 + epoch, 2, "me"));
    }
    // Errors: 6 reconciliations with the store away; reconciled: 7 with it
    // back, each receiving the store's one open trip (a:1, one reporter:
    // below min_reporters).
    store.set_reachable(false);
    for _ in 0..6 {
        assert!(replica.reconcile_with(&mut store).is_err());
    }
    store.set_reachable(true);
    for _ in 0..7 {
        replica.reconcile_with(&mut store).unwrap();
    }
    let stats = replica.stats();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || stats.export_metrics());
    let all = counters(&snapshotter);
    let expected = [
        (SYNC_PUBLISHED_TOTAL, 1),
        (SYNC_DROPPED_TOTAL, 1),
        (SYNC_APPLIED_TOTAL, 3),
        (SYNC_STALE_TOTAL, 2),
        (SYNC_BELOW_MIN_REPORTERS_TOTAL, 4 + 7),
        (SYNC_IGNORED_TOTAL, 5),
        (SYNC_ERRORS_TOTAL, 6),
        (SYNC_RECONCILED_TOTAL, 7),
        (SYNC_RECEIVED_TOTAL, 3 + 2 + 4 + 5 + 7),
    ];
    for (name, n) in expected {
        assert_eq!(value(&all, name, &[]), n, "{name}");
    }
}

/// A counter or a gauge: name, labels, value.
type Series = Named<f64>;

/// Every series of a snapshot, counters and gauges.
fn series(snapshotter: &Snapshotter) -> Vec<Series> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| {
            let v = match value {
                DebugValue::Counter(n) => n as f64,
                DebugValue::Gauge(g) => g.0,
                DebugValue::Histogram(_) => return None,
            };
            let (name, labels) = named(key);
            Some((name, labels, v))
        })
        .collect()
}

/// A registry's outlier pools (issue 28), exported at scrape time: the
/// ejections and the outliers found by rule (`reason`), per pool, and the
/// pool's gauges. Host 0 of five fails 90 % of its calls: the success-rate
/// rule finds and ejects it; the failure-percentage rule finds it too, but
/// observes only (Envoy's default enforcement of 0 %).
#[test]
fn outlier_pools_are_exported_with_their_ejections_by_rule() {
    use failfast::export::metrics::{
        OUTLIER_DETECTED_TOTAL, OUTLIER_EJECTIONS_TOTAL, OUTLIER_LATE_REPORTS_TOTAL,
        OUTLIER_POOL_EJECTED, OUTLIER_POOL_HOSTS, OUTLIER_POOL_PANICKING, OUTLIER_POOL_UNHEALTHY,
        OUTLIER_SLOW_CALL_LIMIT_RATIO, OUTLIER_SUCCESS_RATE_THRESHOLD_RATIO,
    };
    use failfast::Outliers;

    let interval = Duration::from_secs(10);
    let clock = ManualClock::new();
    let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1000))
        .outliers(Outliers::envoy().interval(interval))
        .build_with_clock(clock.clone())
        .unwrap();
    for _ in 0..2 {
        for key in 0..5u64 {
            let h = registry.handle(&key);
            for i in 0..100 {
                let p = h.try_acquire().unwrap();
                let _ = if key == 0 && i < 90 {
                    p.failure()
                } else {
                    p.success()
                };
            }
        }
        clock.advance(interval);
    }
    // Each host's first call of the third interval rolls it and is judged
    // (the ejection happens at that admission; the call itself runs).
    for key in 0..5u64 {
        registry.handle(&key).try_acquire().unwrap().success();
    }
    let ejected: Vec<(u64, Option<failfast::OutlierRule>)> = (0..5u64)
        .map(|key| (key, registry.handle(&key).snapshot().outlier_ejection))
        .filter(|(_, rule)| rule.is_some())
        .collect();
    assert_eq!(ejected, [(0, Some(failfast::OutlierRule::SuccessRate))]);
    assert_eq!(registry.handle(&0).state(), failfast::State::Open);

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        MetricsExporter::new().export_registry(&registry)
    });
    let all = series(&snapshotter);
    let get = |name: &str, labels: &[(&str, &str)]| value(&all, name, labels);
    let by = |reason| [("pool", "default"), ("reason", reason)];
    assert_eq!(get(OUTLIER_EJECTIONS_TOTAL, &by("success_rate")), 1.0);
    assert_eq!(get(OUTLIER_EJECTIONS_TOTAL, &by("failure_percentage")), 0.0);
    assert_eq!(get(OUTLIER_EJECTIONS_TOTAL, &by("slow")), 0.0);
    assert_eq!(get(OUTLIER_DETECTED_TOTAL, &by("success_rate")), 1.0);
    assert_eq!(get(OUTLIER_DETECTED_TOTAL, &by("failure_percentage")), 1.0);
    assert_eq!(get(OUTLIER_DETECTED_TOTAL, &by("slow")), 0.0);
    let pool = [("pool", "default")];
    assert_eq!(get(OUTLIER_LATE_REPORTS_TOTAL, &pool), 0.0);
    assert_eq!(get(OUTLIER_POOL_HOSTS, &pool), 5.0);
    assert_eq!(get(OUTLIER_POOL_UNHEALTHY, &pool), 1.0);
    assert_eq!(get(OUTLIER_POOL_EJECTED, &pool), 1.0);
    assert_eq!(get(OUTLIER_POOL_PANICKING, &pool), 0.0);
    // Mean 0.82, population stdev 0.36: 0.82 − 1.9 × 0.36.
    let threshold = get(OUTLIER_SUCCESS_RATE_THRESHOLD_RATIO, &pool);
    assert!((threshold - 0.136).abs() < 1e-6, "{threshold}");
    assert_eq!(
        get(OUTLIER_SLOW_CALL_LIMIT_RATIO, &pool),
        -1.0,
        "no latency rule"
    );

    // Without pools, no outlier series at all.
    let plain = Registry::<u64>::builder(Breaker::builder().consecutive_failures(3))
        .build()
        .unwrap();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || MetricsExporter::new().export_registry(&plain));
    let all = series(&snapshotter);
    assert!(!all.is_empty());
    assert!(
        all.iter().all(|(n, _, _)| !n.contains("outlier")),
        "{all:?}"
    );
}
