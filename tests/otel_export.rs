//! Spans exported through `tracing-opentelemetry` to the SDK's in-memory
//! exporter (features `tower`, `tracing`) carry the breaker's attributes:
//! `examples/otel_spans.rs` makes three requests — a success, a failure that
//! trips the breaker, a rejection — and this test reads what was exported.

#[path = "../examples/otel_spans.rs"]
#[allow(unreachable_pub, missing_docs)]
mod otel_spans;

use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::trace::SpanData;

fn attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a Value> {
    attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn text(attributes: &[KeyValue], key: &str) -> Option<String> {
    attribute(attributes, key).map(|v| v.as_str().into_owned())
}

fn requests(spans: &[SpanData]) -> Vec<&SpanData> {
    spans.iter().filter(|s| s.name == "request").collect()
}

#[test]
fn the_exported_spans_have_the_breakers_attributes() {
    let spans = otel_spans::exported_spans();
    let requests = requests(&spans);
    assert_eq!(requests.len(), 3, "one span per request: {spans:#?}");
    let seen: Vec<_> = requests
        .iter()
        .map(|s| {
            (
                text(&s.attributes, "url.path").unwrap(),
                text(&s.attributes, "circuitbreaker.name").unwrap(),
                text(&s.attributes, "circuitbreaker.state").unwrap(),
                text(&s.attributes, "circuitbreaker.outcome").unwrap(),
            )
        })
        .collect();
    let row = |p: &str, s: &str, o: &str| {
        (
            p.to_owned(),
            "inventory".to_owned(),
            s.to_owned(),
            o.to_owned(),
        )
    };
    assert_eq!(
        seen,
        [
            row("/ok", "closed", "success"),
            row("/fail", "closed", "failure"),
            row("/ok", "open", "rejected"),
        ]
    );
}

#[test]
fn a_rejection_is_a_span_event_with_its_reason_and_retry_time() {
    let spans = otel_spans::exported_spans();
    let requests = requests(&spans);
    for admitted in &requests[..2] {
        assert!(
            admitted
                .events
                .iter()
                .all(|e| e.name != "rejected by circuit breaker"),
            "no rejection event on an admitted call"
        );
    }
    let rejected = requests[2];
    let event = rejected
        .events
        .iter()
        .find(|e| e.name == "rejected by circuit breaker")
        .expect("the rejection event");
    assert_eq!(text(&event.attributes, "reason").as_deref(), Some("open"));
    assert_eq!(
        text(&event.attributes, "circuitbreaker.name").as_deref(),
        Some("inventory")
    );
    match attribute(&event.attributes, "retry_after_ms") {
        Some(Value::I64(ms)) => assert!((29_000..=30_000).contains(ms), "{ms}"),
        other => panic!("retry_after_ms: {other:?}"),
    }
    assert_eq!(
        text(&event.attributes, "level").as_deref(),
        Some("INFO"),
        "the first of its open period"
    );
}
