//! Per-call tracing through the tower layers (features `tower`, `tracing`):
//! a subscriber that keeps every span's fields and every event sees what
//! the breaker did to each call — a success, a failure, a slow call, a
//! rejection (an event, and nothing of a remote call), the endings without
//! a verdict — and at most one INFO rejection per open period; a breaker
//! ramping up after a recovery adds the share it admits to the span.

mod poll;

use poll::block_on;
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};
use std::time::Duration;

use failfast::export::tracing::{CallSpan, REJECTED};
use failfast::tower::{FailFastLayer, KeyedLayer};
use failfast::{Breaker, ManualClock, Registry, State};
use tower::{Layer, Service};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context as LayerCx, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

// ---------------------------------------------------------------------------
// A subscriber that keeps everything

#[derive(Clone, Debug)]
struct SpanRec {
    name: &'static str,
    parent: Option<&'static str>,
    fields: BTreeMap<String, String>,
}

#[derive(Clone, Debug)]
struct EventRec {
    level: Level,
    span: Option<&'static str>,
    fields: BTreeMap<String, String>,
}

#[derive(Clone, Default)]
struct Captured {
    spans: Arc<Mutex<Vec<SpanRec>>>,
    events: Arc<Mutex<Vec<EventRec>>>,
}

impl Captured {
    fn spans(&self, name: &str) -> Vec<SpanRec> {
        self.spans
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.name == name)
            .cloned()
            .collect()
    }

    fn rejections(&self) -> Vec<EventRec> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.fields.get("message").map(String::as_str) == Some(REJECTED))
            .cloned()
            .collect()
    }
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

/// The index of a span's record in `Captured::spans`.
struct Index(usize);

impl<S: Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Captured {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: LayerCx<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let span = ctx.span(id).unwrap();
        let parent = span.parent().map(|p| p.name());
        let mut spans = self.spans.lock().unwrap();
        span.extensions_mut().insert(Index(spans.len()));
        spans.push(SpanRec {
            name: attrs.metadata().name(),
            parent,
            fields,
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: LayerCx<'_, S>) {
        let span = ctx.span(id).unwrap();
        let ext = span.extensions();
        let i = ext.get::<Index>().unwrap().0;
        values.record(&mut Fields(&mut self.spans.lock().unwrap()[i].fields));
    }

    fn on_event(&self, event: &Event<'_>, ctx: LayerCx<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.events.lock().unwrap().push(EventRec {
            level: *event.metadata().level(),
            span: ctx.event_span(event).map(|s| s.name()),
            fields,
        });
    }
}

fn capturing() -> (Captured, impl Subscriber + Send + Sync) {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::registry().with(captured.clone());
    (captured, subscriber)
}

// ---------------------------------------------------------------------------
// Services and calls

/// What the inner (remote) service does with a request.
#[derive(Copy, Clone)]
enum Upstream {
    Ok,
    Fails,
    /// Answers after the manual clock moved this many milliseconds.
    Slow(u64),
}

/// The upstream: opens a client span of its own with a remote-call
/// attribute, as an HTTP client would.
fn upstream(
    clock: ManualClock,
    how: Upstream,
) -> impl Service<
    u32,
    Response = u32,
    Error = &'static str,
    Future = impl Future<Output = Result<u32, &'static str>>,
> + Clone {
    tower::service_fn(move |req: u32| {
        let span = tracing::info_span!("upstream call", server.address = "10.0.0.7");
        let clock = clock.clone();
        async move {
            let _in = span.enter();
            match how {
                Upstream::Ok => Ok(req),
                Upstream::Fails => Err("503"),
                Upstream::Slow(ms) => {
                    clock.advance(Duration::from_millis(ms));
                    Ok(req)
                }
            }
        }
    })
}

/// The user's span for a request, declaring the breaker's fields (what a
/// `tower_http::trace` make-span would do).
fn request_span() -> tracing::Span {
    tracing::info_span!(
        "request",
        circuitbreaker.name = tracing::field::Empty,
        circuitbreaker.state = tracing::field::Empty,
        circuitbreaker.outcome = tracing::field::Empty,
    )
}

/// Calls `svc` inside a fresh request span; the call's result.
fn call_in_span<S: Service<u32>>(svc: &mut S, req: u32) -> Result<S::Response, S::Error> {
    let span = request_span();
    let _in = span.enter();
    block_on(svc.call(req))
}

fn breaker(clock: &ManualClock) -> Arc<Breaker<ManualClock>> {
    Arc::new(
        Breaker::builder()
            .consecutive_failures(1)
            .slow_call_threshold(Duration::from_millis(100))
            .open_duration(Duration::from_secs(30))
            .jitter(0.0)
            .build_with_clock(clock.clone())
            .unwrap(),
    )
}

fn field<'a>(span: &'a SpanRec, name: &str) -> Option<&'a str> {
    span.fields.get(name).map(String::as_str)
}

// ---------------------------------------------------------------------------

#[test]
fn a_successful_call_records_name_state_and_outcome_on_the_current_span() {
    let (captured, subscriber) = capturing();
    tracing::subscriber::with_default(subscriber, || {
        let clock = ManualClock::new();
        let mut svc = FailFastLayer::new(breaker(&clock))
            .upstream("payments")
            .trace_calls(CallSpan::Current)
            .layer(upstream(clock.clone(), Upstream::Ok));
        assert_eq!(call_in_span(&mut svc, 7).unwrap(), 7);
    });
    let [request] = &captured.spans("request")[..] else {
        panic!("one request span: {:?}", captured.spans("request"));
    };
    assert_eq!(field(request, "circuitbreaker.name"), Some("payments"));
    assert_eq!(field(request, "circuitbreaker.state"), Some("closed"));
    assert_eq!(field(request, "circuitbreaker.outcome"), Some("success"));
    assert_eq!(captured.spans("upstream call").len(), 1, "the call ran");
    assert!(captured.rejections().is_empty());
}

#[test]
fn a_failed_call_and_a_slow_call_say_so() {
    let (captured, subscriber) = capturing();
    tracing::subscriber::with_default(subscriber, || {
        let clock = ManualClock::new();
        let b = breaker(&clock);
        let mut slow = FailFastLayer::new(b.clone())
            .upstream("payments")
            .trace_calls(CallSpan::Current)
            .layer(upstream(clock.clone(), Upstream::Slow(250)));
        assert_eq!(call_in_span(&mut slow, 1).unwrap(), 1);
        let mut failing = FailFastLayer::new(b.clone())
            .upstream("payments")
            .trace_calls(CallSpan::Current)
            .layer(upstream(clock.clone(), Upstream::Fails));
        assert_eq!(
            call_in_span(&mut failing, 2).unwrap_err().to_string(),
            "503"
        );
        assert_eq!(b.state(), State::Open);
    });
    let requests = captured.spans("request");
    let outcomes: Vec<_> = requests
        .iter()
        .map(|s| field(s, "circuitbreaker.outcome"))
        .collect();
    assert_eq!(outcomes, [Some("slow"), Some("failure")]);
    assert!(requests
        .iter()
        .all(|s| field(s, "circuitbreaker.state") == Some("closed")));
}

#[test]
fn a_rejection_is_an_event_on_the_span_and_no_remote_call() {
    let (captured, subscriber) = capturing();
    tracing::subscriber::with_default(subscriber, || {
        let clock = ManualClock::new();
        let b = breaker(&clock);
        let mut svc = FailFastLayer::new(b.clone())
            .upstream("payments")
            .trace_calls(CallSpan::Current)
            .layer(upstream(clock.clone(), Upstream::Fails));
        let _ = call_in_span(&mut svc, 1); // trips
        clock.advance(Duration::from_secs(12));
        let err = call_in_span(&mut svc, 2).unwrap_err();
        assert!(err.is::<failfast::Rejected>());
    });
    let requests = captured.spans("request");
    let rejected = &requests[1];
    assert_eq!(field(rejected, "circuitbreaker.name"), Some("payments"));
    assert_eq!(field(rejected, "circuitbreaker.state"), Some("open"));
    assert_eq!(field(rejected, "circuitbreaker.outcome"), Some("rejected"));
    // Nothing of a remote call: the only upstream span is the first call's.
    assert_eq!(captured.spans("upstream call").len(), 1);
    assert!(!rejected.fields.contains_key("server.address"));
    let events = captured.rejections();
    let [event] = &events[..] else {
        panic!("one rejection event: {events:?}");
    };
    assert_eq!(event.level, Level::INFO, "the first of its open period");
    assert_eq!(event.span, Some("request"), "on the request's span");
    assert_eq!(event.fields["reason"], "open");
    assert_eq!(event.fields["retry_after_ms"], "18000");
    assert_eq!(event.fields["circuitbreaker.name"], "payments");
}

#[test]
fn ten_thousand_rejections_in_one_open_period_make_at_most_one_info_event() {
    let (captured, subscriber) = capturing();
    tracing::subscriber::with_default(subscriber, || {
        let clock = ManualClock::new();
        let b = breaker(&clock);
        let layer = FailFastLayer::new(b.clone())
            .upstream("payments")
            .trace_calls(CallSpan::Current);
        let _ = call_in_span(
            &mut layer.layer(upstream(clock.clone(), Upstream::Fails)),
            0,
        );
        // Services of one layer share its log: a fresh service per call.
        for i in 0..10_000u32 {
            clock.advance(Duration::from_micros(2_000)); // 20 s in all, within the 30 s period
            let mut svc = layer.layer(upstream(clock.clone(), Upstream::Ok));
            assert!(call_in_span(&mut svc, i).is_err());
        }
        // The next open period gets its own INFO.
        clock.advance(Duration::from_secs(10));
        let mut probe = layer.layer(upstream(clock.clone(), Upstream::Fails));
        let _ = call_in_span(&mut probe, 0); // the probe fails: open again
        assert_eq!(b.state(), State::Open);
        clock.advance(Duration::from_secs(1));
        assert!(call_in_span(&mut probe, 1).is_err());
    });
    let events = captured.rejections();
    assert_eq!(events.len(), 10_001);
    let info = events.iter().filter(|e| e.level == Level::INFO).count();
    let debug = events.iter().filter(|e| e.level == Level::DEBUG).count();
    assert_eq!(
        (info, debug),
        (2, 9_999),
        "one INFO per open period, the rest DEBUG"
    );
    assert_eq!(events[0].level, Level::INFO);
    assert_eq!(
        events[10_000].level,
        Level::INFO,
        "the second period's first"
    );
}

#[test]
fn a_span_of_its_own_holds_the_inner_call() {
    let (captured, subscriber) = capturing();
    tracing::subscriber::with_default(subscriber, || {
        let clock = ManualClock::new();
        let b = breaker(&clock);
        let mut svc = FailFastLayer::new(b.clone())
            .upstream("payments")
            .trace_calls(CallSpan::Own)
            .layer(upstream(clock.clone(), Upstream::Fails));
        let _ = call_in_span(&mut svc, 1);
        let _ = call_in_span(&mut svc, 2); // rejected
    });
    let own = captured.spans("circuitbreaker");
    assert_eq!(own.len(), 2);
    assert!(own.iter().all(|s| s.parent == Some("request")));
    assert_eq!(field(&own[0], "circuitbreaker.outcome"), Some("failure"));
    assert_eq!(field(&own[0], "otel.status_code"), Some("error"));
    assert_eq!(field(&own[1], "circuitbreaker.state"), Some("open"));
    assert_eq!(field(&own[1], "circuitbreaker.outcome"), Some("rejected"));
    let upstream = captured.spans("upstream call");
    assert_eq!(upstream.len(), 1);
    assert_eq!(
        upstream[0].parent,
        Some("circuitbreaker"),
        "the inner call nests inside"
    );
    assert_eq!(captured.rejections()[0].span, Some("circuitbreaker"));
    // The request span declared the fields but the layer wrote its own span.
    assert_eq!(
        field(&captured.spans("request")[0], "circuitbreaker.outcome"),
        None
    );
}

#[test]
fn endings_without_a_verdict_are_named() {
    let (captured, subscriber) = capturing();
    tracing::subscriber::with_default(subscriber, || {
        let clock = ManualClock::new();
        let b = Arc::new(
            Breaker::builder()
                .consecutive_failures(5)
                .abandoned_after(Duration::from_secs(1))
                .build_with_clock(clock.clone())
                .unwrap(),
        );
        let pending =
            tower::service_fn(|_: u32| std::future::pending::<Result<u32, &'static str>>());
        let mut svc = FailFastLayer::new(b.clone())
            .upstream("payments")
            .trace_calls(CallSpan::Current)
            .layer(pending);
        let mut cx = Context::from_waker(Waker::noop());
        for wait in [Duration::from_millis(10), Duration::from_secs(2)] {
            let span = request_span();
            let _in = span.enter();
            let mut fut = Box::pin(svc.call(1));
            assert!(fut.as_mut().poll(&mut cx).is_pending());
            clock.advance(wait);
            drop(fut); // the client went away: early, then after it hung
        }
        let panicking = tower::service_fn(|_: u32| async {
            if true {
                panic!("in the upstream");
            }
            Ok::<u32, &'static str>(0)
        });
        let mut svc = FailFastLayer::new(b.clone())
            .upstream("payments")
            .trace_calls(CallSpan::Current)
            .layer(panicking);
        let span = request_span();
        let _in = span.enter();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            block_on(svc.call(1)).map(|_| ())
        }));
        assert!(caught.is_err());
    });
    let outcomes: Vec<_> = captured
        .spans("request")
        .iter()
        .map(|s| field(s, "circuitbreaker.outcome").map(str::to_owned))
        .collect();
    assert_eq!(
        outcomes,
        [
            Some("dropped".into()),
            Some("abandoned".into()),
            Some("panicked".into())
        ]
    );
}

#[test]
fn a_keyed_layer_names_each_host_and_logs_each_hosts_period_once() {
    keyed_hosts_each_log_their_period_once(|layer| layer);
}

/// Per-call metrics configured after the tracing leave the keyed layer's
/// rejection log its size (with one slot, three hosts open at once would
/// share one INFO).
#[cfg(feature = "metrics")]
#[test]
fn metrics_after_tracing_keep_the_keyed_layers_log() {
    keyed_hosts_each_log_their_period_once(|layer| {
        layer.call_metrics(failfast::export::metrics::CallMetrics::new())
    });
}

type HostKeyFn = fn(&http::Request<()>) -> Option<String>;
type ByHost = KeyedLayer<
    String,
    HostKeyFn,
    failfast::tower::DefaultClassifier,
    std::collections::hash_map::RandomState,
    ManualClock,
>;

fn keyed_hosts_each_log_their_period_once(more: impl FnOnce(ByHost) -> ByHost) {
    let (captured, subscriber) = capturing();
    tracing::subscriber::with_default(subscriber, || {
        let clock = ManualClock::new();
        let registry = Arc::new(
            Registry::<String>::builder(
                Breaker::builder()
                    .consecutive_failures(1)
                    .open_duration(Duration::from_secs(30))
                    .jitter(0.0),
            )
            .build_with_clock(clock.clone())
            .unwrap(),
        );
        let hosts = ["a.example:443", "b.example:443", "c.example:443"];
        let failing = tower::service_fn(|_req: http::Request<()>| async { Err::<(), _>("503") });
        let by_host: HostKeyFn = |req| {
            req.headers()
                .get("host")
                .map(|h| h.to_str().unwrap().to_owned())
        };
        let layer = KeyedLayer::new(registry.clone())
            .key_fn(by_host)
            .trace_calls(CallSpan::Current);
        let mut svc = more(layer).layer(failing);
        for round in 0..1_000 {
            for host in hosts {
                let req = http::Request::get("/")
                    .header("host", host)
                    .body(())
                    .unwrap();
                let span = request_span();
                let _in = span.enter();
                let result = block_on(svc.call(req));
                assert!(result.is_err(), "round {round}");
            }
            clock.advance(Duration::from_millis(10));
        }
    });
    let requests = captured.spans("request");
    assert_eq!(
        field(&requests[0], "circuitbreaker.name"),
        Some("a.example:443")
    );
    assert_eq!(
        field(&requests[1], "circuitbreaker.name"),
        Some("b.example:443")
    );
    assert_eq!(
        field(&requests[0], "circuitbreaker.outcome"),
        Some("failure")
    );
    assert_eq!(
        field(&requests[3], "circuitbreaker.outcome"),
        Some("rejected")
    );
    let events = captured.rejections();
    assert_eq!(events.len(), 3 * 999);
    let mut info: Vec<_> = events
        .iter()
        .filter(|e| e.level == Level::INFO)
        .map(|e| e.fields["circuitbreaker.name"].clone())
        .collect();
    info.sort();
    assert_eq!(
        info,
        ["a.example:443", "b.example:443", "c.example:443"],
        "one INFO per host"
    );
}

#[test]
fn without_a_subscriber_the_layer_records_nothing_and_calls_flow() {
    let clock = ManualClock::new();
    let b = breaker(&clock);
    let mut svc = FailFastLayer::new(b.clone())
        .upstream("payments")
        .trace_calls(CallSpan::Own)
        .layer(upstream(clock.clone(), Upstream::Ok));
    assert_eq!(block_on(svc.call(3)).unwrap(), 3);
    assert_eq!(b.snapshot().consecutive_failures, 0);
}

// ---------------------------------------------------------------------------
// A breaker ramping up after a recovery

/// A request span that also declares the ramp's field.
fn ramp_request_span() -> tracing::Span {
    tracing::info_span!(
        "request",
        circuitbreaker.name = tracing::field::Empty,
        circuitbreaker.state = tracing::field::Empty,
        circuitbreaker.outcome = tracing::field::Empty,
        circuitbreaker.ramp_fraction = tracing::field::Empty,
    )
}

/// A breaker that ramps over 128 s (one curve step a second) from half
/// of the calls: exact binary fractions on the span.
fn ramping_builder() -> failfast::Builder {
    Breaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(30))
        .jitter(0.0)
        .ramp_curve(Duration::from_secs(128), 0.5, 1.0)
}

#[test]
fn a_ramping_breaker_records_its_share_on_admitted_and_turned_away_calls() {
    let (captured, subscriber) = capturing();
    let clock = ManualClock::new();
    let b = Arc::new(ramping_builder().build_with_clock(clock.clone()).unwrap());
    let mut calls = 0;
    tracing::subscriber::with_default(subscriber, || {
        let layer = FailFastLayer::new(b.clone())
            .upstream("payments")
            .trace_calls(CallSpan::Current);
        let mut ok = layer.clone().layer(upstream(clock.clone(), Upstream::Ok));
        let mut failing = layer.layer(upstream(clock.clone(), Upstream::Fails));
        let mut call = |svc: &mut dyn FnMut() -> bool| {
            let span = ramp_request_span();
            let _in = span.enter();
            calls += 1;
            svc()
        };
        assert!(call(&mut || block_on(ok.call(1)).is_ok())); // before any trip
        assert!(!call(&mut || block_on(failing.call(2)).is_ok())); // trips
        clock.advance(Duration::from_secs(30));
        assert!(call(&mut || block_on(ok.call(3)).is_ok())); // the probe closes it
        assert_eq!(b.snapshot().ramp_fraction, Some(0.5));
        // Half of the calls get in, at the start of the ramp.
        let admitted = (0..40)
            .filter(|_| call(&mut || block_on(ok.call(4)).is_ok()))
            .count();
        assert!((10..=30).contains(&admitted), "{admitted}");
        // 100 s into the ramp: (100.5 / 128) of them.
        clock.advance(Duration::from_secs(100));
        while !call(&mut || block_on(ok.call(5)).is_ok()) {}
        // After the ramp: everyone, and no share recorded.
        clock.advance(Duration::from_secs(28));
        assert!(call(&mut || block_on(ok.call(6)).is_ok()));
        assert_eq!(b.snapshot().ramp_fraction, None);
    });
    let requests = captured.spans("request");
    assert_eq!(requests.len(), calls);
    let fields = |s: &SpanRec| {
        (
            field(s, "circuitbreaker.state").map(str::to_owned),
            field(s, "circuitbreaker.outcome").map(str::to_owned),
            field(s, "circuitbreaker.ramp_fraction").map(str::to_owned),
        )
    };
    let none = |state: &str, outcome: &str| (Some(state.into()), Some(outcome.into()), None);
    assert_eq!(fields(&requests[0]), none("closed", "success"));
    assert_eq!(fields(&requests[1]), none("closed", "failure"));
    assert_eq!(
        fields(&requests[2]),
        none("half_open", "success"),
        "a probe"
    );
    // The start of the ramp (40 calls), then 100 s in (until one got in).
    let in_ramp = |calls: &[SpanRec], share: &str| {
        calls.iter().all(|s| {
            let (state, outcome, recorded) = fields(s);
            state.as_deref() == Some("closed")
                && matches!(outcome.as_deref(), Some("success" | "rejected"))
                && recorded.as_deref() == Some(share)
        })
    };
    let (start, later) = requests[3..requests.len() - 1].split_at(40);
    assert!(in_ramp(start, "0.5"), "{start:#?}");
    assert!(in_ramp(later, "0.78515625"), "{later:#?}");
    assert_eq!(
        field(later.last().unwrap(), "circuitbreaker.outcome"),
        Some("success")
    );
    let turned_away = requests
        .iter()
        .filter(|s| field(s, "circuitbreaker.outcome") == Some("rejected"))
        .count();
    assert!(turned_away >= 10, "{turned_away}");
    assert_eq!(fields(requests.last().unwrap()), none("closed", "success"));
    // Each turned-away call's event says `ramp`, at DEBUG: the close that
    // began the ramp was the news.
    let events = captured.rejections();
    assert_eq!(events.len(), turned_away, "{events:?}");
    assert!(events
        .iter()
        .all(|e| e.fields["reason"] == "ramp" && e.level == Level::DEBUG));
    assert!(
        events.iter().all(|e| e.fields["retry_after_ms"] == "1000"),
        "one curve step: {events:?}"
    );
}

#[test]
fn a_keyed_layers_own_span_records_a_ramp_rejection_of_its_host() {
    let (captured, subscriber) = capturing();
    let clock = ManualClock::new();
    tracing::subscriber::with_default(subscriber, || {
        let registry = Arc::new(
            Registry::<String>::builder(ramping_builder())
                .build_with_clock(clock.clone())
                .unwrap(),
        );
        let fails = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let answer = fails.clone();
        let inner = tower::service_fn(move |_req: http::Request<()>| {
            let fail = answer.load(std::sync::atomic::Ordering::Relaxed);
            async move {
                if fail {
                    Err::<(), _>("503")
                } else {
                    Ok(())
                }
            }
        });
        let by_host: HostKeyFn = |req| {
            req.headers()
                .get("host")
                .map(|h| h.to_str().unwrap().to_owned())
        };
        let mut svc = KeyedLayer::new(registry.clone())
            .key_fn(by_host)
            .trace_calls(CallSpan::Own)
            .layer(inner);
        let mut call = || {
            let req = http::Request::get("/")
                .header("host", "a.example:443")
                .body(())
                .unwrap();
            block_on(svc.call(req)).is_ok()
        };
        assert!(!call()); // trips
        fails.store(false, std::sync::atomic::Ordering::Relaxed);
        clock.advance(Duration::from_secs(30));
        assert!(call()); // the probe closes it: the ramp begins
        while call() {}
    });
    let own = captured.spans("circuitbreaker");
    let last = own.last().unwrap();
    assert_eq!(field(last, "circuitbreaker.name"), Some("a.example:443"));
    assert_eq!(field(last, "circuitbreaker.state"), Some("closed"));
    assert_eq!(field(last, "circuitbreaker.outcome"), Some("rejected"));
    assert_eq!(field(last, "circuitbreaker.ramp_fraction"), Some("0.5"));
    assert_eq!(field(last, "otel.status_code"), Some("error"));
    // The trip and the probe met no ramp.
    assert!(own[..2]
        .iter()
        .all(|s| field(s, "circuitbreaker.ramp_fraction").is_none()));
    let events = captured.rejections();
    assert_eq!(events.last().unwrap().fields["reason"], "ramp");
    assert_eq!(
        events.last().unwrap().fields["circuitbreaker.name"],
        "a.example:443"
    );
}
