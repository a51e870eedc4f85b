//! An axum service whose handler calls a flaky dependency through a circuit
//! breaker, answers from a fallback while the breaker is open, and shows
//! its breakers on a status route. Everything listens on 127.0.0.1.
//!
//! ```sh
//! cargo run --example axum --features tower
//! ```
//!
//! walks through an outage of the pricing service the shop depends on, and
//! prints what the shop answered:
//!
//! ```text
//! GET /price/widget -> 200 {"sku":"widget","cents":1250,"source":"pricing"}
//! (pricing starts failing)
//! GET /price/widget -> 502 {"error":"pricing answered 503 Service Unavailable"}
//! GET /price/widget -> 502 {"error":"pricing answered 503 Service Unavailable"}
//! GET /price/widget -> 502 {"error":"pricing answered 503 Service Unavailable"}
//! GET /price/widget -> 200 {"sku":"widget","cents":1200,"source":"list price","why":"circuit open; retry after 30.0s"}
//! GET /_failfast -> 200 {"tracked":1,"open":1,"half_open":0,"shown":1,"omitted":0,"upstreams":[{"upstream":"127.0.0.1:41234","state":"open",...}]}
//! pricing was called 4 times
//! ```
//!
//! What it uses from failfast:
//!
//! * a [`Registry`]: one breaker per upstream host, created on first use
//!   (here one pricing host; the same code serves a thousand);
//! * [`call_async_or_else_with`](failfast::Breaker::call_async_or_else_with):
//!   the call to pricing runs only when the breaker admits it, its response
//!   is judged by [`HttpClassifier`] (5xx and 429 count against pricing,
//!   other 4xx are pricing's business answers and are ignored, a refused
//!   connection or the 2 s timeout counts against it), and while the breaker
//!   is open the fallback answers instead, labelled
//!   [`Answer::Fallback`] with the [`Rejected`](failfast::Rejected) that
//!   says why and for how long. A call that ran and failed is not answered
//!   by the fallback: the handler sees pricing's answer and says so (502);
//! * [`status_json`] on `/_failfast`: every breaker of the registry, the
//!   open ones first (keep this route private in a real service).
//!
//! `tests/example_axum.rs` includes this file and drives it.

#![allow(dead_code)] // `tests/example_axum.rs` includes this file.

use std::hash::RandomState;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use failfast::tower::{status_json, Classify, HttpClassifier};
use failfast::{Answer, Breaker, Clock, Registry};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::net::TcpListener;
use tower::BoxError;

/// How long a call to pricing may take before it counts as a failure.
pub const PRICING_TIMEOUT: Duration = Duration::from_secs(2);

/// The most upstreams the status route lists (the rest are counted).
pub const STATUS_LIMIT: usize = 100;

/// The status route.
pub const STATUS_PATH: &str = "/_failfast";

/// How the shop judges pricing's answers.
const CLASSIFY: HttpClassifier = HttpClassifier::new();

/// The example's breakers: open after three failures in a row, for 30
/// seconds (then one probe call decides).
pub fn breaker_template() -> failfast::Builder {
    Breaker::builder()
        .consecutive_failures(3)
        .open_duration(Duration::from_secs(30))
}

/// An HTTP/1 client for the dependencies (no TLS: they are on loopback).
pub type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// What the shop's handlers share.
pub struct Shop<C: Clock> {
    /// A breaker per upstream `host:port`.
    pub breakers: Registry<String, RandomState, C>,
    /// The pricing service's `host:port`.
    pub pricing: String,
    client: HttpClient,
}

impl<C: Clock> Shop<C> {
    /// A shop asking the pricing service at `pricing`, with its breakers in
    /// `breakers`.
    pub fn new(breakers: Registry<String, RandomState, C>, pricing: SocketAddr) -> Self {
        Shop {
            breakers,
            pricing: pricing.to_string(),
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }
}

/// The shop's routes: `GET /price/{sku}` and the status view.
pub fn router<C: Clock>(shop: Arc<Shop<C>>) -> Router {
    Router::new()
        .route("/price/{sku}", get(price::<C>))
        .route(STATUS_PATH, get(status::<C>))
        .with_state(shop)
}

/// `GET /price/{sku}`: the live price from pricing, or the list price while
/// pricing's breaker is open.
async fn price<C: Clock>(State(shop): State<Arc<Shop<C>>>, Path(sku): Path<String>) -> Response {
    // The SKU goes into a URI and a JSON string: refuse anything else before
    // any call, so a bad request is never a call to pricing.
    if sku.is_empty()
        || sku.len() > 64
        || !sku.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        return json(StatusCode::BAD_REQUEST, r#"{"error":"bad sku"}"#.to_owned());
    }
    let Ok(uri) = format!("http://{}/prices/{sku}", shop.pricing).parse() else {
        return json(StatusCode::BAD_REQUEST, r#"{"error":"bad sku"}"#.to_owned());
    };

    let breaker = shop.breakers.handle(shop.pricing.as_str());
    let answer = breaker
        .call_async_or_else_with(
            |result| CLASSIFY.classify(result),
            fetch(&shop.client, uri),
            // Runs only when the breaker rejects: pricing is not called.
            |_rejected| async { list_price(&sku) },
        )
        .await;

    let (reply, source, why) = match answer {
        Ok(Answer::Fresh(reply)) => (reply, "pricing", String::new()),
        Ok(Answer::Fallback { value, rejected }) => {
            (value, "list price", format!(r#","why":"{rejected}""#))
        }
        Err(err) => {
            // The details are for the log, not for the client.
            eprintln!("pricing unreachable: {err}");
            return json(
                StatusCode::BAD_GATEWAY,
                r#"{"error":"pricing unreachable"}"#.to_owned(),
            );
        }
    };
    match (reply.status(), cents(reply.body())) {
        (StatusCode::OK, Some(cents)) => json(
            StatusCode::OK,
            format!(r#"{{"sku":"{sku}","cents":{cents},"source":"{source}"{why}}}"#),
        ),
        (StatusCode::NOT_FOUND, _) => json(
            StatusCode::NOT_FOUND,
            r#"{"error":"no such sku"}"#.to_owned(),
        ),
        (status, _) => json(
            StatusCode::BAD_GATEWAY,
            format!(r#"{{"error":"pricing answered {status}"}}"#),
        ),
    }
}

/// The call to pricing: its answer with the whole body, or an error (no
/// connection, a broken body, [`PRICING_TIMEOUT`] passed).
async fn fetch(client: &HttpClient, uri: http::Uri) -> Result<http::Response<Bytes>, BoxError> {
    let call = async {
        let (head, body) = client.get(uri).await?.into_parts();
        let body = body.collect().await?.to_bytes();
        Ok(http::Response::from_parts(head, body))
    };
    tokio::time::timeout(PRICING_TIMEOUT, call).await?
}

/// Pricing's answer body: the price in cents, as text.
fn cents(body: &Bytes) -> Option<u64> {
    std::str::from_utf8(body).ok()?.trim().parse().ok()
}

/// The fallback: the catalogue's list price (a local table, possibly
/// behind the live price), in pricing's own format so the handler reads
/// either answer alike.
fn list_price(sku: &str) -> http::Response<Bytes> {
    let cents = match sku {
        "widget" => 1200,
        "gadget" => 4900,
        _ => {
            let mut not_found = http::Response::new(Bytes::new());
            *not_found.status_mut() = StatusCode::NOT_FOUND;
            return not_found;
        }
    };
    http::Response::new(Bytes::from(cents.to_string()))
}

/// `GET /_failfast`: the breakers as JSON, open ones first.
async fn status<C: Clock>(State(shop): State<Arc<Shop<C>>>) -> Response {
    json(StatusCode::OK, status_json(&shop.breakers, STATUS_LIMIT))
}

fn json(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

// ---------------------------------------------------------------------------
// The flaky dependency: a pricing service that can be told to fail.
// ---------------------------------------------------------------------------

/// The pricing service's behaviour, shared with whoever drives it.
#[derive(Debug, Default)]
pub struct Pricing {
    /// Answer `503 Service Unavailable` to every call.
    pub failing: AtomicBool,
    /// Calls that reached pricing.
    pub calls: AtomicUsize,
}

impl Pricing {
    /// Calls that reached pricing so far.
    pub fn calls(&self) -> usize {
        // Relaxed: a count read after the calls returned; it publishes
        // nothing else.
        self.calls.load(Ordering::Relaxed)
    }
}

/// Pricing's routes: `GET /prices/{sku}` answers the price in cents as
/// text, 404 for an unknown SKU, 503 while failing.
pub fn pricing_router(pricing: Arc<Pricing>) -> Router {
    async fn answer(State(pricing): State<Arc<Pricing>>, Path(sku): Path<String>) -> Response {
        // Relaxed: a count and a switch (see `Pricing::calls`).
        pricing.calls.fetch_add(1, Ordering::Relaxed);
        if pricing.failing.load(Ordering::Relaxed) {
            return StatusCode::SERVICE_UNAVAILABLE.into_response();
        }
        match sku.as_str() {
            "widget" => "1250".into_response(),
            "gadget" => "4999".into_response(),
            _ => StatusCode::NOT_FOUND.into_response(),
        }
    }
    Router::new()
        .route("/prices/{sku}", get(answer))
        .with_state(pricing)
}

/// Serves `router` on `listener` until the task is dropped.
///
/// # Errors
///
/// An accept loop's I/O error.
pub async fn serve(listener: TcpListener, router: Router) -> std::io::Result<()> {
    axum::serve(listener, router).await
}

// ---------------------------------------------------------------------------
// The walk-through.
// ---------------------------------------------------------------------------

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let pricing = Arc::new(Pricing::default());
    let pricing_listener = TcpListener::bind("127.0.0.1:0").await?;
    let pricing_addr = pricing_listener.local_addr()?;
    tokio::spawn(serve(pricing_listener, pricing_router(pricing.clone())));

    let breakers = Registry::builder(breaker_template()).build()?;
    let shop = Arc::new(Shop::new(breakers, pricing_addr));
    let shop_listener = TcpListener::bind("127.0.0.1:0").await?;
    let shop_addr = shop_listener.local_addr()?;
    tokio::spawn(serve(shop_listener, router(shop)));

    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let get = |path| show(&client, shop_addr, path);

    get("/price/widget").await?;
    println!("(pricing starts failing)");
    // Relaxed: a switch (see `Pricing::calls`).
    pricing.failing.store(true, Ordering::Relaxed);
    for _ in 0..4 {
        get("/price/widget").await?;
    }
    get(STATUS_PATH).await?;
    println!("pricing was called {} times", pricing.calls());
    Ok(())
}

/// `GET http://{addr}{path}`, printed with its answer.
async fn show(client: &HttpClient, addr: SocketAddr, path: &str) -> Result<(), BoxError> {
    let response = client.get(format!("http://{addr}{path}").parse()?).await?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await?.to_bytes();
    println!("GET {path} -> {status} {}", String::from_utf8_lossy(&body));
    Ok(())
}
