//! `/metrics` (feature `metrics`): the breakers, the requests per route
//! and decision, the calls in flight, in Prometheus' text format.

use super::*;

/// The proxy's own Prometheus recorder. Not the process's global one: a
/// process may run several proxies (the tests do). Everything is published
/// into it at scrape time, but transitions, counted as they happen.
#[cfg(feature = "metrics")]
pub(crate) struct Metrics {
    pub(crate) recorder: metrics_exporter_prometheus::PrometheusRecorder,
    pub(crate) handle: metrics_exporter_prometheus::PrometheusHandle,
}

#[cfg(feature = "metrics")]
impl Metrics {
    pub(crate) fn new() -> Metrics {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let metrics = Metrics { recorder, handle };
        metrics.record(|| {
            failfast::export::metrics::describe();
            metrics::describe_counter!(REQUESTS_TOTAL, "Requests by route and decision");
            metrics::describe_gauge!(IN_FLIGHT, "Calls in flight to each upstream");
            metrics::describe_gauge!(MAX_IN_FLIGHT, "The cap on calls in flight to each upstream");
        });
        metrics
    }

    /// Runs `f` with this recorder as the `metrics` facade's.
    pub(crate) fn record<T>(&self, f: impl FnOnce() -> T) -> T {
        metrics::with_local_recorder(&self.recorder, f)
    }
}

/// `failfast_proxy_requests_total{route,decision}`
pub const REQUESTS_TOTAL: &str = "failfast_proxy_requests_total";
/// `failfast_proxy_in_flight{upstream}`
pub const IN_FLIGHT: &str = "failfast_proxy_in_flight";
/// `failfast_proxy_max_in_flight{upstream}`
pub const MAX_IN_FLIGHT: &str = "failfast_proxy_max_in_flight";

/// `/metrics`: the breakers (per upstream: the routes are few), the
/// requests per route and decision, the calls in flight, as Prometheus
/// text.
#[cfg(feature = "metrics")]
pub(crate) fn metrics_page(proxy: &Proxy) -> Response<Body> {
    use failfast::export::metrics::MetricsExporter;

    proxy.metrics.record(|| {
        MetricsExporter::new()
            .per_host(true)
            .export_registry(&proxy.registry);
        for (route, decisions) in &proxy.requests {
            for decision in Decision::ALL {
                metrics::counter!(
                    REQUESTS_TOTAL,
                    "route" => route.clone(),
                    "decision" => decision.as_str()
                )
                .absolute(decisions.get(decision));
            }
        }
        for (upstream, bulkhead) in &proxy.bulkheads {
            let upstream = upstream.to_string();
            metrics::gauge!(IN_FLIGHT, "upstream" => upstream.clone())
                .set(bulkhead.in_flight() as f64);
            metrics::gauge!(MAX_IN_FLIGHT, "upstream" => upstream).set(bulkhead.max() as f64);
        }
    });
    let mut response = text(StatusCode::OK, proxy.metrics.handle.render());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

/// `/metrics` in a build without the `metrics` feature: a 404 that says so.
#[cfg(not(feature = "metrics"))]
pub(crate) fn metrics_page(_proxy: &Proxy) -> Response<Body> {
    text(
        StatusCode::NOT_FOUND,
        "no metrics in this build: build with --features tower,metrics\n",
    )
}
