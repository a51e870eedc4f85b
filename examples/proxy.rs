//! A real HTTP reverse proxy with one circuit breaker per upstream host.
//!
//! ```sh
//! # Start three local upstreams (healthy, slow, failing) and the proxy:
//! cargo run --example proxy --features tower -- --demo
//! curl -i localhost:8080/slow/       # 200 after 800 ms ... then 503 + Retry-After, at once
//! curl -s localhost:8080/_failfast   # each upstream's breaker, as JSON
//! # Or route to your own (loopback) upstreams:
//! cargo run --example proxy --features tower -- --listen 127.0.0.1:8080 --route api=127.0.0.1:9001
//! ```
//!
//! `GET /{route}/{path}` is forwarded to `http://{upstream}/{path}`. The
//! breaking is the library's: [`KeyedLayer`] (a breaker per upstream
//! authority, from a [`Registry`]), [`HttpClassifier`] (5xx, 429, timeouts
//! and connection errors fail; other 4xx are ignored), a per-call timeout,
//! [`error_response`] (503 + `Retry-After` for a rejection) and
//! [`status_json`]. This file is only the hyper glue. The end-to-end test
//! (`tests/e2e_proxy.rs`) includes it as a module.

#![allow(dead_code)] // `tests/e2e_proxy.rs` includes this file and uses part of it.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use failfast::tower::{error_response, status_json, HttpClassifier, Keyed, KeyedLayer};
use failfast::{Breaker, Builder, Registry, Transition};
use http::uri::Authority;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tower::{Layer, ServiceExt};

type Body = BoxBody<Bytes, hyper::Error>;
type Upstreams = Keyed<
    Client<HttpConnector, Incoming>,
    Authority,
    failfast::tower::AuthorityKey,
    HttpClassifier,
>;

/// What the proxy shares between connections.
pub struct Proxy {
    /// Route name → upstream authority.
    pub routes: HashMap<String, Authority>,
    /// The breakers, one per upstream authority.
    pub registry: Arc<Registry<Authority>>,
    /// Every transition the layer saw, with its upstream.
    pub transitions: Mutex<Vec<(String, Transition)>>,
    service: Upstreams,
    verbose: bool,
}

/// Builds the proxy: `template` configures every upstream's breaker.
pub fn proxy(
    routes: HashMap<String, Authority>,
    template: Builder,
    timeout: Duration,
    verbose: bool,
) -> Arc<Proxy> {
    let registry = Arc::new(
        Registry::<Authority>::builder(template)
            .build()
            .expect("valid breaker config"),
    );
    Arc::new_cyclic(|me: &std::sync::Weak<Proxy>| {
        let me = me.clone();
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build_http::<Incoming>();
        let service = KeyedLayer::new(registry.clone())
            .classify(HttpClassifier::new())
            .timeout(timeout)
            .on_transition(move |upstream: &str, t: &Transition| {
                if let Some(proxy) = me.upgrade() {
                    if proxy.verbose {
                        eprintln!("{upstream}: {} -> {} ({})", t.from, t.to, t.reason);
                    }
                    proxy
                        .transitions
                        .lock()
                        .unwrap()
                        .push((upstream.to_owned(), *t));
                }
            })
            .layer(client);
        Proxy {
            routes,
            registry,
            transitions: Mutex::new(Vec::new()),
            service,
            verbose,
        }
    })
}

/// Accepts connections on `listener` until the runtime stops.
pub async fn serve(listener: TcpListener, proxy: Arc<Proxy>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let proxy = proxy.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(req, proxy.clone()));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut response = Response::new(
        Full::new(body.into())
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response
}

async fn handle(
    mut req: Request<Incoming>,
    proxy: Arc<Proxy>,
) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_owned();
    if path == "/_failfast" {
        let mut response = text(StatusCode::OK, status_json(&proxy.registry));
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            "application/json".parse().unwrap(),
        );
        return Ok(response);
    }
    let mut parts = path.trim_start_matches('/').splitn(2, '/');
    let route = parts.next().unwrap_or_default();
    let rest = parts.next().unwrap_or_default();
    let Some(authority) = proxy.routes.get(route) else {
        return Ok(text(StatusCode::NOT_FOUND, "no such route\n"));
    };
    let query = req
        .uri()
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    *req.uri_mut() = format!("http://{authority}/{rest}{query}").parse().unwrap();
    req.headers_mut().remove(http::header::HOST);

    Ok(match proxy.service.clone().oneshot(req).await {
        Ok(response) => response.map(|body| body.boxed()),
        Err(err) => match error_response(&err, || {
            Full::new(Bytes::new())
                .map_err(|never| match never {})
                .boxed()
        }) {
            Some(response) => response, // 503 + Retry-After, or 504
            None => text(StatusCode::BAD_GATEWAY, format!("{err}\n")),
        },
    })
}

/// How a demo upstream answers.
pub const HEALTHY: u64 = 0;
/// 503 Service Unavailable.
pub const FAILING: u64 = 1;
/// Any other value: 200 OK after that many milliseconds.
pub const fn slow(ms: u64) -> u64 {
    ms
}

/// A local upstream whose behaviour can change while it runs.
pub struct Upstream {
    pub addr: SocketAddr,
    pub hits: Arc<AtomicUsize>,
    pub mode: Arc<AtomicU64>,
}

/// Starts an upstream on 127.0.0.1 (ephemeral port) answering per `mode`.
pub async fn upstream(mode: u64) -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let mode = Arc::new(AtomicU64::new(mode));
    let (h, m) = (hits.clone(), mode.clone());
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (h, m) = (h.clone(), m.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |_req: Request<Incoming>| {
                    h.fetch_add(1, Ordering::SeqCst);
                    let mode = m.load(Ordering::SeqCst);
                    async move {
                        let status = match mode {
                            HEALTHY => StatusCode::OK,
                            FAILING => StatusCode::SERVICE_UNAVAILABLE,
                            ms => {
                                tokio::time::sleep(Duration::from_millis(ms)).await;
                                StatusCode::OK
                            }
                        };
                        Ok::<_, Infallible>(text(status, "upstream\n"))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Upstream { addr, hits, mode }
}

/// A loopback address where nothing listens (connections are refused).
pub async fn refusing() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap() // dropped: the port is closed again
}

fn authority(addr: SocketAddr) -> Authority {
    addr.to_string().parse().unwrap()
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let mut listen: SocketAddr = "127.0.0.1:8080".parse().unwrap();
    let mut routes = HashMap::new();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => {
                listen = args
                    .next()
                    .expect("--listen ADDR")
                    .parse()
                    .expect("an address")
            }
            "--route" => {
                let spec = args.next().expect("--route NAME=HOST:PORT");
                let (name, to) = spec.split_once('=').expect("--route NAME=HOST:PORT");
                routes.insert(name.to_owned(), to.parse().expect("an authority"));
            }
            "--demo" => {
                for (name, mode) in [
                    ("healthy", HEALTHY),
                    ("slow", slow(800)),
                    ("failing", FAILING),
                ] {
                    routes.insert(name.to_owned(), authority(upstream(mode).await.addr));
                }
                routes.insert("down".to_owned(), authority(refusing().await));
            }
            other => panic!("unknown argument {other}; see the header of examples/proxy.rs"),
        }
    }
    assert!(
        listen.ip().is_loopback(),
        "this example listens on loopback only"
    );
    let template = Breaker::builder()
        .failure_rate(0.5)
        .slow_call_rate(0.5)
        .slow_call_threshold(Duration::from_millis(500))
        .count_window(20)
        .min_calls(10)
        .open_duration(Duration::from_secs(10))
        .count_calls(true);
    let proxy = proxy(routes, template, Duration::from_secs(5), true);
    let listener = TcpListener::bind(listen).await.expect("bind");
    eprintln!("failfast proxy on http://{listen}  (status: /_failfast)");
    let mut names: Vec<_> = proxy.routes.iter().collect();
    names.sort_by_key(|(name, _)| name.as_str());
    for (name, to) in names {
        eprintln!("  /{name}/  ->  http://{to}/");
    }
    serve(listener, proxy).await;
}
