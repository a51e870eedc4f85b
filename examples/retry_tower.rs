//! Retries through tower that cannot make an outage worse: tower's `Retry`
//! with failfast's [`RetryPolicy`], outside a [`KeyedLayer`] whose breakers
//! carry a retry budget. Everything listens on 127.0.0.1.
//!
//! ```sh
//! cargo run --example retry_tower --features tower
//! ```
//!
//! The upstream first answers every third call with a 503, then only with
//! 503s. A retry the budget refuses is not sent, and its caller gets the
//! 503 before it, as without retries; the breaker counts the refusals
//! (`retries_refused`).

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use failfast::registry::HostKey;
use failfast::tower::{HttpClassifier, KeyedLayer, RetryPolicy};
use failfast::{Breaker, Registry, RetryBudget};
use http_body_util::{Empty, Full};
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tower::retry::RetryLayer;
use tower::{Service, ServiceBuilder, ServiceExt};

/// An upstream on loopback: a 503 for every call when `down`, else for
/// every third call. Returns its address and its call count.
async fn upstream(down: Arc<AtomicUsize>) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (seen, down) = (seen.clone(), down.clone());
            let service = service_fn(move |_req| {
                // Relaxed: counters read by the example between rounds.
                let n = seen.fetch_add(1, Ordering::Relaxed);
                let failing = down.load(Ordering::Relaxed) == 1 || n % 3 == 0;
                let status = if failing { 503 } else { 200 };
                async move {
                    let mut response = http::Response::new(Empty::<Bytes>::new());
                    *response.status_mut() = http::StatusCode::from_u16(status).unwrap();
                    Ok::<_, Infallible>(response)
                }
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
        }
    });
    (addr, calls)
}

/// The retries the host's budget has refused so far.
fn refused(registry: &Registry<HostKey>, addr: std::net::SocketAddr) -> u64 {
    let snapshot = registry.handle_from(&addr.to_string()).snapshot();
    snapshot.calls.map_or(0, |calls| calls.retries_refused)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), tower::BoxError> {
    let down = Arc::new(AtomicUsize::new(0));
    let (addr, calls) = upstream(down.clone()).await;

    // One breaker per host, each with a budget: retries ≤ 50 % of first
    // tries over 10 s, no reserve (so the ratio shows).
    let template = Breaker::builder()
        .failure_rate(0.9)
        .min_calls(100)
        .count_calls(true) // for the refusals
        .retry_budget(RetryBudget::ratio(0.5, Duration::from_secs(10), 0));
    let registry = Arc::new(Registry::<HostKey>::builder(template).build()?);
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut service = ServiceBuilder::new()
        .layer(RetryLayer::new(RetryPolicy::default()))
        .layer(KeyedLayer::new(registry.clone()).classify(HttpClassifier::new()))
        .service_fn(move |req| client.request(req));

    for (round, is_down) in [("flaky", 0), ("down", 1)] {
        down.store(is_down, Ordering::Relaxed);
        let before = calls.load(Ordering::Relaxed);
        let refused_before = refused(&registry, addr);
        let mut ok = 0;
        for _ in 0..20 {
            let req =
                http::Request::get(format!("http://{addr}/")).body(Full::new(Bytes::new()))?;
            if service.ready().await?.call(req).await?.status() == 200 {
                ok += 1;
            }
        }
        let refused = refused(&registry, addr) - refused_before;
        let seen = calls.load(Ordering::Relaxed) - before;
        println!(
            "{round}: 20 requests → {ok} answered 200; the upstream saw {seen} calls ({} retries); refused by the budget: {refused}",
            seen - 20
        );
    }
    Ok(())
}
