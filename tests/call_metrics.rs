//! Per-call metrics through the tower layers and the new scrape-time series
//! (features `tower`, `metrics`), read back from `metrics-util`'s debugging
//! recorder: every name, label and unit, each name checked against
//! Prometheus' naming rules; and the duration histogram, off, reads no
//! clock (a counting clock proves it); a ramp shows in its gauges and its
//! rejections are counted under `reason = "ramp"`.

mod poll;

use poll::block_on;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use failfast::export::metrics::{
    self as fm, describe, record_transition_per_host, CallMetrics, MetricsExporter,
};
use failfast::tower::{unavailable, FailFastLayer, FallbackLayer, KeyedLayer};
use failfast::{Breaker, Clock, ManualClock, Nanos, Registry, Rejected, State};
use metrics::Unit;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::MetricKind;
use tower::{Layer, Service};

/// A manual clock that counts its reads.
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

/// One recorded series: kind, unit, labels and value.
#[derive(Debug)]
struct Series {
    kind: MetricKind,
    unit: Option<Unit>,
    labels: BTreeMap<String, String>,
    value: DebugValue,
}

fn collect(recorder: &DebuggingRecorder) -> BTreeMap<String, Vec<Series>> {
    let mut out: BTreeMap<String, Vec<Series>> = BTreeMap::new();
    for (key, unit, _, value) in recorder.snapshotter().snapshot().into_vec() {
        let (kind, key) = key.into_parts();
        let labels = key
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        out.entry(key.name().to_owned()).or_default().push(Series {
            kind,
            unit,
            labels,
            value,
        });
    }
    out
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn find<'a>(
    all: &'a BTreeMap<String, Vec<Series>>,
    name: &str,
    want: &[(&str, &str)],
) -> &'a Series {
    let want = labels(want);
    all.get(name)
        .and_then(|s| s.iter().find(|s| s.labels == want))
        .unwrap_or_else(|| panic!("no {name} {want:?} in {:#?}", all.get(name)))
}

/// An upstream that answers `Ok` after `ms` milliseconds of the clock, or
/// fails when `ms` is `u64::MAX`.
fn upstream(
    clock: ManualClock,
) -> impl Service<
    u64,
    Response = u64,
    Error = &'static str,
    Future = impl Future<Output = Result<u64, &'static str>>,
> + Clone {
    tower::service_fn(move |ms: u64| {
        let clock = clock.clone();
        async move {
            if ms == u64::MAX {
                return Err("503");
            }
            clock.advance(Duration::from_millis(ms));
            Ok(ms)
        }
    })
}

#[test]
fn every_series_has_its_name_labels_and_unit() {
    let recorder = DebuggingRecorder::new();
    let clock = ManualClock::new();
    metrics::with_local_recorder(&recorder, || {
        describe();
        let b = Arc::new(
            Breaker::builder()
                .consecutive_failures(2)
                .slow_call_threshold(Duration::from_millis(100))
                .open_duration(Duration::from_secs(20))
                .jitter(0.0)
                .count_calls(true)
                .build_with_clock(clock.clone())
                .unwrap(),
        );
        let layer = FailFastLayer::new(b.clone())
            .upstream("payments")
            .on_transition(record_transition_per_host)
            .call_metrics(CallMetrics::new().call_duration(true));
        let mut svc =
            FallbackLayer::new(|r: &Rejected| Some(unavailable::<()>(r).status().as_u16() as u64))
                .upstream("payments")
                .layer(layer.layer(upstream(clock.clone())));
        assert_eq!(block_on(svc.call(10)).unwrap(), 10); // success, 10 ms
        assert_eq!(block_on(svc.call(250)).unwrap(), 250); // slow, 250 ms
        assert!(block_on(svc.call(u64::MAX)).is_err()); // failure
        assert!(block_on(svc.call(u64::MAX)).is_err()); // failure: trips (20 s)
        assert_eq!(b.state(), State::Open);
        clock.advance(Duration::from_millis(1_500));
        assert_eq!(block_on(svc.call(1)).unwrap(), 503, "the fallback answered");
        assert_eq!(block_on(svc.call(1)).unwrap(), 503);
        MetricsExporter::new().export_breaker("payments", &b);
    });
    let all = collect(&recorder);

    let rejected = find(
        &all,
        fm::REJECTED_TOTAL,
        &[("upstream", "payments"), ("reason", "open")],
    );
    assert_eq!(
        (rejected.kind, rejected.unit, &rejected.value),
        (
            MetricKind::Counter,
            Some(Unit::Count),
            &DebugValue::Counter(2)
        )
    );
    for reason in ["half_open_full", "forced_open", "ramp"] {
        let other = find(
            &all,
            fm::REJECTED_TOTAL,
            &[("upstream", "payments"), ("reason", reason)],
        );
        assert_eq!(other.value, DebugValue::Counter(0));
    }

    let fallback = find(&all, fm::FALLBACK_TOTAL, &[("upstream", "payments")]);
    assert_eq!(
        (fallback.kind, fallback.unit, &fallback.value),
        (
            MetricKind::Counter,
            Some(Unit::Count),
            &DebugValue::Counter(2)
        )
    );

    let seconds = |outcome: &str| {
        let s = find(
            &all,
            fm::CALL_DURATION_SECONDS,
            &[("upstream", "payments"), ("outcome", outcome)],
        );
        assert_eq!(
            (s.kind, s.unit),
            (MetricKind::Histogram, Some(Unit::Seconds))
        );
        match &s.value {
            DebugValue::Histogram(v) => v.iter().map(|x| x.into_inner()).collect::<Vec<f64>>(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(seconds("success"), [0.01]);
    assert_eq!(seconds("slow"), [0.25]);
    assert_eq!(seconds("failure"), [0.0, 0.0]);
    for outcome in ["ignored", "dropped", "abandoned", "panicked"] {
        assert!(
            seconds(outcome).is_empty(),
            "{outcome}: registered, nothing recorded"
        );
    }
    assert!(
        all[fm::CALL_DURATION_SECONDS]
            .iter()
            .all(|s| s.labels["outcome"] != "rejected"),
        "a rejected call has no duration"
    );

    let open = find(&all, fm::OPEN_SECONDS_TOTAL, &[("upstream", "payments")]);
    assert_eq!(
        (open.kind, open.unit, &open.value),
        (
            MetricKind::Counter,
            Some(Unit::Seconds),
            &DebugValue::Counter(20)
        )
    );
    let age = find(&all, fm::OPEN_AGE_SECONDS, &[("upstream", "payments")]);
    assert_eq!(
        (age.kind, age.unit),
        (MetricKind::Gauge, Some(Unit::Seconds))
    );
    assert_eq!(age.value, DebugValue::Gauge(1.5.into()));
}

#[test]
fn a_keyed_layer_aggregates_or_names_each_host() {
    let recorder = DebuggingRecorder::new();
    let clock = ManualClock::new();
    metrics::with_local_recorder(&recorder, || {
        let registry = Arc::new(
            Registry::<String>::builder(Breaker::builder().consecutive_failures(1))
                .build_with_clock(clock.clone())
                .unwrap(),
        );
        let key = |req: &http::Request<()>| {
            req.headers()
                .get("host")
                .map(|h| h.to_str().unwrap().to_owned())
        };
        let failing = tower::service_fn(|_req: http::Request<()>| async { Err::<(), _>("503") });
        let mut aggregate = KeyedLayer::new(registry.clone())
            .key_fn(key)
            .call_metrics(CallMetrics::new())
            .layer(failing);
        let mut per_host = KeyedLayer::new(registry.clone())
            .key_fn(key)
            .call_metrics(CallMetrics::new().per_host(true).call_duration(true))
            .layer(failing);
        for host in ["a:80", "b:80"] {
            let order = if host == "a:80" {
                [&mut aggregate, &mut per_host]
            } else {
                [&mut per_host, &mut aggregate]
            };
            for svc in order {
                for _ in 0..2 {
                    let req = http::Request::get("/")
                        .header("host", host)
                        .body(())
                        .unwrap();
                    let _ = block_on(svc.call(req));
                }
            }
        }
    });
    let all = collect(&recorder);
    // a:80 through the aggregate layer first: a failure (it trips) and a
    // rejection there, two rejections per host; b:80 the other way round.
    assert_eq!(
        find(&all, fm::REJECTED_TOTAL, &[("reason", "open")]).value,
        DebugValue::Counter(3)
    );
    let per_host = |host| {
        find(
            &all,
            fm::REJECTED_TOTAL,
            &[("upstream", host), ("reason", "open")],
        )
    };
    assert_eq!(per_host("a:80").value, DebugValue::Counter(2));
    assert_eq!(per_host("b:80").value, DebugValue::Counter(1));
    let durations = &all[fm::CALL_DURATION_SECONDS];
    assert_eq!(
        durations.len(),
        1,
        "only the per-host layer times calls: {durations:?}"
    );
    assert_eq!(
        durations[0].labels,
        labels(&[("upstream", "b:80"), ("outcome", "failure")])
    );
}

#[test]
fn prometheus_naming_rules_hold_for_every_series() {
    let recorder = DebuggingRecorder::new();
    let clock = ManualClock::new();
    metrics::with_local_recorder(&recorder, || {
        describe();
        let registry = Registry::<String>::builder(
            Breaker::builder().consecutive_failures(1).count_calls(true),
        )
        .build_with_clock(clock.clone())
        .unwrap();
        let trip = registry
            .handle("a:80")
            .try_acquire()
            .unwrap()
            .failure()
            .unwrap();
        fm::record_transition("", &trip);
        MetricsExporter::new()
            .per_host(true)
            .export_registry(&registry);
        fm::record_transition("", &registry.handle("b:80").force_open().unwrap());
        let b = Arc::new(
            Breaker::builder()
                .consecutive_failures(1)
                .build_with_clock(clock.clone())
                .unwrap(),
        );
        let mut svc = FallbackLayer::new(|_: &Rejected| Some(0u64))
            .upstream("x")
            .layer(
                FailFastLayer::new(b.clone())
                    .upstream("x")
                    .call_metrics(CallMetrics::new().call_duration(true))
                    .layer(upstream(clock.clone())),
            );
        let _ = block_on(svc.call(u64::MAX));
        let _ = block_on(svc.call(1));
        fm::record_rejection("y", &b.try_acquire().unwrap_err());
        fm::record_fallback("y");
    });
    let all = collect(&recorder);
    let expected = [
        fm::STATE,
        fm::CALLS_TOTAL,
        fm::TRANSITIONS_TOTAL,
        fm::FAILURE_RATIO,
        fm::SLOW_CALL_RATIO,
        fm::RAMP_ADMITTED_RATIO,
        fm::BACKOFF_STEP,
        fm::OPEN,
        fm::HALF_OPEN,
        fm::TRACKED,
        fm::OPEN_AGE_SECONDS,
        fm::OPEN_SECONDS_TOTAL,
        fm::REJECTED_TOTAL,
        fm::CALL_DURATION_SECONDS,
        fm::FALLBACK_TOTAL,
        fm::REGISTRY_CALLS_TOTAL,
        fm::REGISTRY_EVICTED_TOTAL,
        fm::REGISTRY_REMOVED_TOTAL,
        fm::REGISTRY_UNTRACKED_TOTAL,
        fm::REGISTRY_KEYLESS_TOTAL,
        fm::REGISTRY_REFUSED_TRIPS_TOTAL,
    ];
    for name in expected {
        assert!(all.contains_key(name), "{name} was recorded");
    }
    let name_ok = |s: &str| {
        let mut chars = s.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    for (name, series) in &all {
        // The metric name grammar, and no exporter-reserved suffix.
        assert!(name_ok(name), "{name}: [a-zA-Z_:][a-zA-Z0-9_:]*");
        assert!(
            name.starts_with("circuit_breaker_"),
            "{name}: one namespace"
        );
        assert!(
            !name.contains("__") && !name.contains(':'),
            "{name}: colons are for recording rules"
        );
        for suffix in ["_count", "_sum", "_bucket", "_created", "_info"] {
            assert!(
                !name.ends_with(suffix),
                "{name}: {suffix} is reserved for exporters"
            );
        }
        for s in series {
            // Counters, and only counters, end in `_total`.
            assert_eq!(
                name.ends_with("_total"),
                s.kind == MetricKind::Counter,
                "{name}: `_total` iff a counter ({:?})",
                s.kind
            );
            // Base units, named in the name: seconds end in `_seconds` (before `_total`).
            let base = name.trim_end_matches("_total");
            match s.unit {
                Some(Unit::Seconds) => {
                    assert!(base.ends_with("_seconds"), "{name}: unit in the name")
                }
                Some(Unit::Count) | None => {
                    for unit in ["_seconds", "_milliseconds", "_bytes", "_ratio_percent"] {
                        assert!(
                            !base.ends_with(unit),
                            "{name}: a {unit} series needs its unit"
                        );
                    }
                }
                Some(other) => panic!("{name}: a non-base unit {other:?}"),
            }
            assert!(
                !base.contains("_milliseconds"),
                "{name}: seconds, not milliseconds"
            );
            for label in s.labels.keys() {
                assert!(
                    name_ok(label) && !label.contains(':'),
                    "{name}: label {label}"
                );
                assert!(
                    !label.starts_with("__"),
                    "{name}: label {label} is reserved"
                );
                assert_ne!(label, "le", "{name}: `le` is the histogram buckets' label");
            }
        }
    }
}

#[test]
fn the_histogram_off_adds_no_clock_read() {
    // Reads per successful call through the layer: its one admission
    // reading (a consecutive-failures breaker times nothing else).
    let reads_per_call = |metrics: Option<CallMetrics>| {
        let recorder = DebuggingRecorder::new();
        metrics::with_local_recorder(&recorder, || {
            let clock = CountingClock::default();
            let b = Arc::new(
                Breaker::builder()
                    .consecutive_failures(3)
                    .build_with_clock(clock.clone())
                    .unwrap(),
            );
            let layer = FailFastLayer::new(b).upstream("payments");
            let layer = match metrics {
                Some(m) => layer.call_metrics(m),
                None => layer,
            };
            let mut svc = layer.layer(upstream(clock.time.clone()));
            let before = clock.reads();
            for _ in 0..100 {
                assert_eq!(block_on(svc.call(1)).unwrap(), 1);
            }
            (clock.reads() - before) as f64 / 100.0
        })
    };
    let without = reads_per_call(None);
    assert_eq!(without, 1.0, "the layer's admission reads the clock once");
    assert_eq!(
        reads_per_call(Some(CallMetrics::new())),
        without,
        "the histogram off: no read added"
    );
    assert_eq!(
        reads_per_call(Some(CallMetrics::new().call_duration(true))),
        without + 1.0,
        "the histogram on: one read, at the verdict"
    );

    // A breaker that times calls already reads at the verdict: the histogram
    // shares that reading.
    let clock = CountingClock::default();
    let recorder = DebuggingRecorder::new();
    metrics::with_local_recorder(&recorder, || {
        let b = Arc::new(
            Breaker::builder()
                .consecutive_failures(3)
                .slow_call_threshold(Duration::from_millis(100))
                .build_with_clock(clock.clone())
                .unwrap(),
        );
        let plain = FailFastLayer::new(b.clone()).layer(upstream(clock.time.clone()));
        let timed = FailFastLayer::new(b)
            .call_metrics(CallMetrics::new().call_duration(true))
            .layer(upstream(clock.time.clone()));
        for mut svc in [plain, timed] {
            let before = clock.reads();
            assert_eq!(block_on(svc.call(5)).unwrap(), 5);
            assert_eq!(
                clock.reads() - before,
                2,
                "admission and verdict, histogram or not"
            );
        }
    });
}

/// A gauge's value.
fn gauge(all: &BTreeMap<String, Vec<Series>>, name: &str, want: &[(&str, &str)]) -> f64 {
    let s = find(all, name, want);
    assert_eq!(
        (s.kind, s.unit),
        (MetricKind::Gauge, Some(Unit::Count)),
        "{name}"
    );
    match &s.value {
        DebugValue::Gauge(v) => v.into_inner(),
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn a_ramp_shows_in_its_gauges_and_its_rejections_under_their_reason() {
    let clock = ManualClock::new();
    let b = Arc::new(
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_secs(30))
            .jitter(0.0)
            .ramp_curve(Duration::from_secs(10), 0.5, 1.0)
            .build_with_clock(clock.clone())
            .unwrap(),
    );
    // The recovery gauges at a scrape, (ramp share, backoff step).
    let scrape = || {
        let recorder = DebuggingRecorder::new();
        metrics::with_local_recorder(&recorder, || {
            describe();
            MetricsExporter::new().export_breaker("payments", &b);
        });
        let all = collect(&recorder);
        let up = [("upstream", "payments")];
        (
            gauge(&all, fm::RAMP_ADMITTED_RATIO, &up),
            gauge(&all, fm::BACKOFF_STEP, &up),
        )
    };
    assert_eq!(scrape(), (0.0, 0.0), "fresh");
    let recorder = DebuggingRecorder::new();
    let turned_away = metrics::with_local_recorder(&recorder, || {
        let layer = FailFastLayer::new(b.clone())
            .upstream("payments")
            .call_metrics(CallMetrics::new());
        let mut svc = layer.layer(upstream(clock.clone()));
        assert!(block_on(svc.call(u64::MAX)).is_err()); // trips
        assert_eq!(scrape(), (0.0, 1.0), "open, at the first step");
        clock.advance(Duration::from_secs(30));
        assert_eq!(block_on(svc.call(0)).unwrap(), 0); // the probe closes it
        assert_eq!(scrape(), (0.5, 1.0), "ramping, the step kept");
        let turned_away = (0..40).filter(|_| block_on(svc.call(0)).is_err()).count();
        assert!((10..=30).contains(&turned_away), "{turned_away}");
        // Calls outside a layer, counted by hand.
        let rejected = (0..10).find_map(|_| b.try_acquire().err()).unwrap();
        fm::record_rejection("by-hand", &rejected);
        turned_away
    });
    let all = collect(&recorder);
    let count = |labels: &[(&str, &str)]| match find(&all, fm::REJECTED_TOTAL, labels).value {
        DebugValue::Counter(n) => n,
        ref other => panic!("{other:?}"),
    };
    assert_eq!(
        count(&[("upstream", "payments"), ("reason", "ramp")]),
        turned_away as u64
    );
    assert_eq!(count(&[("upstream", "payments"), ("reason", "open")]), 0);
    assert_eq!(count(&[("upstream", "by-hand"), ("reason", "ramp")]), 1);
    // After the ramp the share goes back to 0; healthy time takes the step
    // off, one per base open duration since the close.
    clock.advance(Duration::from_secs(11));
    assert_eq!(scrape(), (0.0, 1.0));
    clock.advance(Duration::from_secs(19));
    assert_eq!(scrape(), (0.0, 0.0));
}

#[test]
fn a_keyed_layer_counts_ramp_rejections_per_host_or_in_aggregate() {
    let clock = ManualClock::new();
    let registry = Arc::new(
        Registry::<String>::builder(
            Breaker::builder()
                .consecutive_failures(1)
                .open_duration(Duration::from_secs(30))
                .ramp_curve(Duration::from_secs(10), 0.5, 1.0),
        )
        .build_with_clock(clock.clone())
        .unwrap(),
    );
    let recorder = DebuggingRecorder::new();
    let turned_away = metrics::with_local_recorder(&recorder, || {
        let key = |req: &http::Request<u64>| {
            req.headers()
                .get("host")
                .map(|h| h.to_str().unwrap().to_owned())
        };
        let inner = tower::service_fn(|req: http::Request<u64>| async move {
            if *req.body() == u64::MAX {
                Err("503")
            } else {
                Ok(())
            }
        });
        let mut aggregate = KeyedLayer::new(registry.clone())
            .key_fn(key)
            .call_metrics(CallMetrics::new())
            .layer(inner);
        let mut per_host = KeyedLayer::new(registry.clone())
            .key_fn(key)
            .call_metrics(CallMetrics::new().per_host(true))
            .layer(inner);
        let req = |body: u64| {
            http::Request::get("/")
                .header("host", "a:80")
                .body(body)
                .unwrap()
        };
        assert!(block_on(aggregate.call(req(u64::MAX))).is_err()); // trips
        clock.advance(Duration::from_secs(30));
        assert!(block_on(aggregate.call(req(0))).is_ok()); // closes: the ramp
        let a = (0..40)
            .filter(|_| block_on(aggregate.call(req(0))).is_err())
            .count();
        let p = (0..40)
            .filter(|_| block_on(per_host.call(req(0))).is_err())
            .count();
        (a, p)
    });
    assert!(turned_away.0 > 0 && turned_away.1 > 0, "{turned_away:?}");
    let all = collect(&recorder);
    assert_eq!(
        find(&all, fm::REJECTED_TOTAL, &[("reason", "ramp")]).value,
        DebugValue::Counter(turned_away.0 as u64)
    );
    assert_eq!(
        find(
            &all,
            fm::REJECTED_TOTAL,
            &[("upstream", "a:80"), ("reason", "ramp")]
        )
        .value,
        DebugValue::Counter(turned_away.1 as u64)
    );
}
