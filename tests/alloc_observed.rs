//! Per-call observability allocates nothing of its own, proved by counting
//! (features `tower`, `tracing`, `metrics`): through a `KeyedLayer` with
//! `trace_calls` and `call_metrics` (the duration histogram on), with a
//! subscriber that wants every span field and event and a recorder that
//! keeps every series — both allocation-free themselves — a successful call
//! makes **no allocation**, and a rejected one makes **one**: the
//! `BoxError` every tower rejection is. A `FallbackLayer` whose recover
//! holds a cache does not copy it per call.
//!
//! A separate test binary: its counting global allocator (`counting_alloc`)
//! counts only the current thread's allocations while a check runs, like
//! `tests/alloc.rs`. First uses (a registry insert, a callsite's registration)
//! happen before counting.

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use failfast::export::metrics::CallMetrics;
use failfast::export::tracing::CallSpan;
use failfast::registry::HostKey;
use failfast::tower::{FallbackLayer, KeyedLayer};
use failfast::{Breaker, ManualClock, Registry};
use metrics::{Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, SharedString, Unit};
use tower::{BoxError, Layer, Service};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_core::span::Current;

mod counting_alloc;
use counting_alloc::allocations;

const REPS: usize = 1_000;

/// Drives one call to completion (the inner future is ready at once).
fn call<S, Req>(svc: &mut S, req: Req) -> Result<S::Response, S::Error>
where
    S: Service<Req>,
{
    let mut cx = Context::from_waker(Waker::noop());
    assert!(svc.poll_ready(&mut cx).is_ready());
    match pin!(svc.call(req)).poll(&mut cx) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("the no-op inner service is ready at once"),
    }
}

// ---------------------------------------------------------------------------
// A subscriber that wants everything and formats every value, into nothing

/// Counts the bytes written to it.
struct Bytes<'a>(&'a AtomicU64);

impl fmt::Write for Bytes<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.fetch_add(s.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

impl Visit for Bytes<'_> {
    fn record_debug(&mut self, _field: &Field, value: &dyn fmt::Debug) {
        let _ = write!(self, "{value:?}");
    }
}

/// One span at a time (the request's), every field recorded and formatted.
#[derive(Default)]
struct Wants {
    span: Mutex<Option<&'static tracing::Metadata<'static>>>,
    entered: AtomicBool,
    records: AtomicU64,
    events: AtomicU64,
    bytes: AtomicU64,
}

impl Subscriber for &'static Wants {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        *self.span.lock().unwrap() = Some(span.metadata());
        span.record(&mut Bytes(&self.bytes));
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, values: &Record<'_>) {
        self.records.fetch_add(1, Ordering::Relaxed);
        values.record(&mut Bytes(&self.bytes));
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        self.events.fetch_add(1, Ordering::Relaxed);
        event.record(&mut Bytes(&self.bytes));
    }
    fn enter(&self, _: &Id) {
        self.entered.store(true, Ordering::Relaxed);
    }
    fn exit(&self, _: &Id) {
        self.entered.store(false, Ordering::Relaxed);
    }
    fn current_span(&self) -> Current {
        match *self.span.lock().unwrap() {
            Some(meta) if self.entered.load(Ordering::Relaxed) => {
                Current::new(Id::from_u64(1), meta)
            }
            _ => Current::none(),
        }
    }
}

// ---------------------------------------------------------------------------
// A recorder that keeps every series in atomics

#[derive(Default)]
struct Observations(AtomicU64);

impl HistogramFn for Observations {
    fn record(&self, _value: f64) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Every counter adds to `counted`, every histogram to `observed`.
#[derive(Default)]
struct Keeps {
    counted: Arc<AtomicU64>,
    observed: Arc<Observations>,
}

impl metrics::Recorder for Keeps {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.counted.clone())
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.observed.clone())
    }
}

// ---------------------------------------------------------------------------

fn get(host: &str) -> http::Request<()> {
    http::Request::get("/v1")
        .header("host", host)
        .body(())
        .unwrap()
}

/// [`REPS`] requests for `host`, built before counting.
fn requests(host: &str) -> Vec<http::Request<()>> {
    (0..REPS).map(|_| get(host)).collect()
}

/// The upstream: `down.example` fails, every other host answers.
fn upstream(
) -> impl Service<http::Request<()>, Response = (), Error = &'static str, Future: Send> + Clone {
    tower::service_fn(|req: http::Request<()>| {
        let down = req.headers()["host"] == "down.example";
        std::future::ready(if down { Err("503") } else { Ok(()) })
    })
}

#[test]
fn traced_and_metered_calls_allocate_only_the_rejections_box() {
    let wants: &'static Wants = Box::leak(Box::default());
    let keeps = Keeps::default();
    let registry = Arc::new(
        Registry::<HostKey>::builder(
            Breaker::builder()
                .consecutive_failures(1)
                .open_duration(Duration::from_secs(60)),
        )
        .build_with_clock(ManualClock::new())
        .unwrap(),
    );
    // The layer registers its handles with the recorder when it is built.
    let layer = metrics::with_local_recorder(&keeps, || {
        KeyedLayer::new(registry.clone())
            .trace_calls(CallSpan::Current)
            .call_metrics(CallMetrics::new().call_duration(true))
    });
    let mut svc = layer.layer(upstream());
    let in_a_span = |svc: &mut _, req: http::Request<()>| {
        let span = tracing::info_span!(
            "request",
            circuitbreaker.name = tracing::field::Empty,
            circuitbreaker.state = tracing::field::Empty,
            circuitbreaker.outcome = tracing::field::Empty,
        );
        let _in = span.enter();
        call(svc, req)
    };
    tracing::subscriber::with_default(wants, || {
        // First uses: the hosts' entries, the callsites, the trip.
        assert!(in_a_span(&mut svc, get("api.example")).is_ok());
        assert!(in_a_span(&mut svc, get("down.example")).is_err());
        let err: BoxError = in_a_span(&mut svc, get("down.example")).unwrap_err();
        assert!(err.is::<failfast::Rejected>());
        let records = wants.records.load(Ordering::Relaxed);
        let events = wants.events.load(Ordering::Relaxed);
        let observed = keeps.observed.0.load(Ordering::Relaxed);
        let counted = keeps.counted.load(Ordering::Relaxed);

        let reqs = requests("api.example");
        let n = allocations(|| {
            for req in reqs {
                assert!(in_a_span(&mut svc, req).is_ok());
            }
        });
        assert_eq!(n, 0, "{n} allocations in {REPS} successful calls");
        // Each call recorded name, state and outcome, and its duration.
        let recorded = wants.records.load(Ordering::Relaxed) - records;
        assert_eq!(recorded, 3 * REPS as u64, "span records");
        let timed = keeps.observed.0.load(Ordering::Relaxed) - observed;
        assert_eq!(timed, REPS as u64, "durations observed");

        let reqs = requests("down.example");
        let n = allocations(|| {
            for req in reqs {
                let err = in_a_span(&mut svc, req).unwrap_err();
                assert!(err.is::<failfast::Rejected>());
            }
        });
        assert_eq!(
            n, REPS,
            "{n} allocations in {REPS} rejections: one each, the BoxError"
        );
        // Each rejection made its event and counted in the rejected series.
        let events = wants.events.load(Ordering::Relaxed) - events;
        assert_eq!(events, REPS as u64, "rejection events");
        let rejected = keeps.counted.load(Ordering::Relaxed) - counted;
        assert_eq!(rejected, REPS as u64, "rejections counted");
    });
    assert!(
        wants.bytes.load(Ordering::Relaxed) > 0,
        "values were formatted"
    );
}

#[test]
fn a_fallback_holding_a_cache_does_not_copy_it_per_call() {
    let registry = Arc::new(
        Registry::<HostKey>::builder(Breaker::builder().consecutive_failures(1))
            .build_with_clock(ManualClock::new())
            .unwrap(),
    );
    let cache: HashMap<String, String> = (0..100)
        .map(|i| (format!("/page/{i}"), format!("kept body {i}")))
        .collect();
    let fallback = FallbackLayer::new(move |_rejected: &failfast::Rejected| {
        cache
            .get("/page/1")
            .map(|body| http::Response::new(body.len()))
    });
    let answer_len = tower::service_fn(|_req: http::Request<()>| {
        std::future::ready(Ok::<_, &'static str>(http::Response::new(0usize)))
    });
    let mut svc = fallback.layer(KeyedLayer::new(registry).layer(answer_len));
    assert!(call(&mut svc, get("api.example")).is_ok());
    let reqs = requests("api.example");
    let n = allocations(|| {
        for req in reqs {
            let response = call(&mut svc, req).unwrap();
            assert_eq!(*response.body(), 0, "fresh");
        }
    });
    assert_eq!(n, 0, "{n} allocations in {REPS} calls through the fallback");
}
