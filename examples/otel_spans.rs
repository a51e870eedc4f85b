//! What the breaker did to each request, as OpenTelemetry spans: a
//! `tower_http` trace layer opens the request's span (declaring the
//! breaker's fields), the failfast layer records on it, and
//! `tracing-opentelemetry` exports the spans — here to the SDK's in-memory
//! exporter, which a real service would swap for OTLP.
//!
//! ```sh
//! cargo run --example otel_spans --features tower,tracing
//! ```
//!
//! prints one line per exported span:
//!
//! ```text
//! request GET /ok      circuitbreaker.name=inventory circuitbreaker.state=closed circuitbreaker.outcome=success
//! request GET /fail    circuitbreaker.name=inventory circuitbreaker.state=closed circuitbreaker.outcome=failure
//! request GET /ok      circuitbreaker.name=inventory circuitbreaker.state=open circuitbreaker.outcome=rejected
//!     event "rejected by circuit breaker" reason=open retry_after_ms=30000 ...
//! ```
//!
//! The test `tests/otel_export.rs` includes this file and checks the
//! exported attributes.

#![allow(dead_code)] // `tests/otel_export.rs` includes this file.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use failfast::export::tracing::CallSpan;
use failfast::tower::{FailFastLayer, HttpClassifier};
use failfast::Breaker;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_http::trace::TraceLayer;
use tracing_subscriber::layer::SubscriberExt;

/// The request's span, as an application declares it: its own fields and
/// the breaker's, empty until the failfast layer records them.
fn request_span(req: &http::Request<String>) -> tracing::Span {
    tracing::info_span!(
        "request",
        http.request.method = %req.method(),
        url.path = req.uri().path(),
        circuitbreaker.name = tracing::field::Empty,
        circuitbreaker.state = tracing::field::Empty,
        circuitbreaker.outcome = tracing::field::Empty,
    )
}

/// Three requests through a breaker that opens on one failure — a success,
/// a failure (it trips), a rejection — and the spans they exported.
pub fn exported_spans() -> Vec<SpanData> {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("failfast-example")));
    tracing::subscriber::with_default(subscriber, || {
        let breaker = Arc::new(
            Breaker::builder()
                .consecutive_failures(1)
                .open_duration(Duration::from_secs(30))
                .jitter(0.0)
                .build()
                .expect("a valid breaker"),
        );
        let mut service = ServiceBuilder::new()
            .layer(TraceLayer::new_for_http().make_span_with(request_span))
            .layer(
                FailFastLayer::new(breaker)
                    .upstream("inventory")
                    .classify(HttpClassifier::new())
                    .trace_calls(CallSpan::Current),
            )
            .service_fn(|req: http::Request<String>| async move {
                let status = if req.uri().path() == "/fail" {
                    503
                } else {
                    200
                };
                Ok::<_, std::io::Error>(
                    http::Response::builder()
                        .status(status)
                        .body(String::new())
                        .unwrap(),
                )
            });
        for path in ["/ok", "/fail", "/ok"] {
            let request = http::Request::get(path).body(String::new()).unwrap();
            let _ = block_on(async { service.ready().await?.call(request).await });
        }
    });
    let _ = provider.force_flush();
    exporter
        .get_finished_spans()
        .expect("the in-memory exporter keeps its spans")
}

fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

fn main() {
    for span in exported_spans() {
        let attributes: Vec<String> = span
            .attributes
            .iter()
            .map(|kv| format!("{}={}", kv.key, kv.value))
            .collect();
        println!("{} {}", span.name, attributes.join(" "));
        for event in span.events.iter() {
            let attributes: Vec<String> = event
                .attributes
                .iter()
                .map(|kv| format!("{}={}", kv.key, kv.value))
                .collect();
            println!("    event {:?} {}", event.name, attributes.join(" "));
        }
    }
}
