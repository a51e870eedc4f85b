//! A real HTTP reverse proxy with one circuit breaker per upstream host,
//! written to be copied: what it does to a request, and why, is below.
//!
//! ```sh
//! # Start four local upstreams (healthy, slow, failing, down) and the proxy:
//! cargo run --example proxy --features tower -- --demo
//! curl -i localhost:8080/slow/       # 200 after 800 ms ... then 503 + Retry-After, at once
//! curl -s localhost:8080/_failfast   # the breakers, as JSON (open ones first, 100 at most)
//! # Route to your own (loopback) upstreams, status and metrics on their own address:
//! cargo run --example proxy --features tower,metrics -- --listen 127.0.0.1:8080 \
//!     --route api=127.0.0.1:9001 --route auth=127.0.0.1:9002 --admin 127.0.0.1:9900
//! curl -s 127.0.0.1:9900/metrics     # Prometheus text (feature `metrics`)
//! cargo run --example proxy --features tower -- --help
//! # Two proxies sharing trips through Redis (feature `redis`):
//! cargo run --example proxy --features tower,redis -- --demo --redis redis://127.0.0.1:6379/
//! cargo run --example proxy --features tower,redis -- --demo --listen 127.0.0.1:8081 \
//!     --redis redis://127.0.0.1:6379/
//! ```
//!
//! `GET /{route}/{path}` is forwarded to `http://{upstream}/{path}`. The
//! breaking is the library's: [`KeyedLayer`] (a breaker per upstream
//! authority, from a [`Registry`]), [`HttpClassifier`] (5xx, 429, timeouts
//! and connection errors fail; other 4xx are ignored), a per-call timeout,
//! [`DownstreamBody`] (a client's broken, stalled or oversized upload is the
//! client's fault: 400, 408 or 413, neutral for the breaker, as is the
//! proxy's own shortage of file descriptors: 503), [`error_response`] (503 +
//! `Retry-After` for a rejection) and [`status_json`]. The rest is the hyper
//! glue, with what a proxy exposed to real clients needs:
//!
//! * **hop-by-hop headers removed both ways** (RFC 9110 §7.6.1):
//!   `Connection` and every field it names, `Keep-Alive`,
//!   `Proxy-Authorization`, `Proxy-Authenticate`, `TE`, `Trailer`,
//!   `Transfer-Encoding`, `Upgrade` and `Proxy-Connection` are this hop's,
//!   never forwarded (so no protocol upgrade, WebSocket included, goes
//!   through); the client's address is appended to `X-Forwarded-For` (after
//!   any it sent, which it may have forged: trust only the entries your own
//!   proxies added), and `Via: 1.1 failfast` is added to the request and to
//!   the answer;
//! * **a cap on calls in flight to each upstream** (`--max-in-flight`,
//!   default 1,024 as Envoy's clusters): a [`Bulkhead`] per upstream, taken
//!   *before* the breaker, so a call it turns away (503, `x-failfast:
//!   overloaded`) never takes a breaker permit and never counts in its
//!   window. A call holds its slot until its answer's head is back (the body
//!   then streams outside the cap: a [`BulkheadPermit`] borrows its
//!   bulkhead, and a response body must own what it holds);
//! * **graceful shutdown**: on SIGTERM or SIGINT the proxy stops accepting
//!   (its listeners close, so new connections are refused), lets requests in
//!   flight finish, closes idle keep-alive connections, and exits 0 when the
//!   last connection closes or at the `--drain` deadline, whichever is first;
//! * **an access log**: one logfmt line per request on stderr (`access
//!   client=… method=… path="…" route=… upstream=… status=… duration_ms=…
//!   decision=…`), the path without its query (which may carry secrets), the
//!   duration up to the answer's head; the decision is one of `admitted`,
//!   `rejected`, `fallback`, `overloaded`, `client-fault`, `local-fault`
//!   ([`Decision`]), or `not-forwarded` (no such route, a bad URI, a page of
//!   the proxy's own);
//! * **metrics at `/metrics`** (feature `metrics`): the breakers through
//!   the crate's [`metrics` export](failfast::export::metrics) (per
//!   upstream: state, calls, rates, transitions), the requests per route and
//!   decision, and each upstream's calls in flight, in Prometheus' text
//!   format. The proxy keeps a recorder of its own and publishes to it at
//!   scrape time (nothing per request but one relaxed increment);
//! * **loopback upstreams only**, unless `--allow-remote-upstreams`: this is
//!   an example, and a route to another machine should be a decision;
//! * **a header-read timeout**: a client that never finishes its request
//!   head (slowloris) is disconnected after `--header-timeout`;
//! * **accept back-off**: when `accept` fails for want of a resource (out of
//!   file descriptors: `EMFILE`), the loop waits 5 ms, doubling to 1 s,
//!   instead of spinning on the same error; it resumes when descriptors free;
//! * **no panic on request data**: a rewritten URI longer than 8 KiB is a
//!   `414`, one that does not parse a `400`;
//! * **a pool timer**, without which hyper ignores `pool_idle_timeout` and
//!   keeps every idle upstream connection forever;
//! * **a bounded status page** (`?limit=N`, capped by `--status-limit`, with
//!   the count of the rest), which `--admin` moves to its own address with
//!   `/metrics` (keep that one private: it has no authentication);
//! * **an argument parser**: `--help`; a bad argument prints the usage and
//!   exits with status 2; a route name given twice is an error;
//! * **stale answers while an upstream is open, never someone else's**: the
//!   last good answer to each anonymous `GET` is kept (a bounded cache:
//!   [`Settings::stale_entries`] entries of at most [`Settings::stale_max_body`]
//!   bytes), and a `GET` the breaker rejects is answered from it through a
//!   [`FallbackLayer`], marked stale (`x-failfast: fallback`, `Cache-Status`,
//!   `Age`: see [`mark_stale`]); anything else rejected is a 503 with
//!   `Retry-After`. Nothing personal is kept or served (RFC 9111 §3.5,
//!   §4.2.4): not for a request that carries `Authorization` or `Cookie` (or
//!   asks `no-store` / `no-cache`), nor an answer that is `private`,
//!   `no-store`, `no-cache`, `must-revalidate`, `proxy-revalidate` or
//!   `s-maxage`, sets a cookie, or `Vary`s on `*`, `Authorization` or
//!   `Cookie`; an answer that varies on other fields is served only to a
//!   request that sends the same values;
//! * **trips shared with other proxies** (`--redis URL`, feature `redis`):
//!   the layer's transition hook reports local trips into an
//!   [`Outbox`](failfast::share::Outbox), and a `RedisSync` task publishes
//!   them and applies the other proxies' (the request path never waits on
//!   Redis). Both proxies of the `--demo` lines above route to upstreams of
//!   their own, so each shares trips of different authorities; give them the
//!   same `--route` to see one proxy's trip reject on the other.
//!
//! What it still lacks for the open internet: TLS, HTTP/2, a request-body
//! read limit per connection, and authentication for the status page.
//!
//! The end-to-end test (`tests/e2e_proxy.rs`) includes this file as a
//! module and covers each of these.

#![allow(dead_code)] // `tests/e2e_proxy.rs` includes this file and uses part of it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use failfast::share::Outbox;
use failfast::tower::{
    error_response, is_stale, mark_stale, status_json, DownstreamBody, Fallback, FallbackLayer,
    HttpClassifier, Keyed, KeyedLayer, Recover, TimedOut, X_FAILFAST,
};
use failfast::{
    Breaker, Builder, Bulkhead, BulkheadPermit, DownstreamError, DownstreamKind, Fault, Registry,
    Rejected, Transition,
};
use http::header::{self, HeaderName};
use http::uri::{Authority, Scheme, Uri};
use http::{HeaderMap, HeaderValue, Method, Version};
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tower::{Layer, ServiceExt};

type Body = BoxBody<Bytes, hyper::Error>;
/// A client's request body as it goes upstream: its errors, stalls and
/// excess marked as the client's, so they never count against an upstream.
type Upload = DownstreamBody<Incoming>;
type Breakers =
    Keyed<Client<HttpConnector, Upload>, Authority, failfast::tower::AuthorityKey, HttpClassifier>;
/// The breakers, their answers' hop-by-hop headers removed and bodies
/// boxed, and the stale answers in front.
type Upstreams = Fallback<
    tower::util::MapResponse<Breakers, fn(Response<Incoming>) -> Response<Body>>,
    StaleAnswers,
>;

/// Where the status page answers.
pub const STATUS_PATH: &str = "/_failfast";
/// Where the metrics answer (Prometheus' text format; feature `metrics`).
pub const METRICS_PATH: &str = "/metrics";
/// The longest URI forwarded upstream; longer ones get `414 URI Too Long`
/// (8 KiB, as common servers allow for a request line).
pub const MAX_URI: usize = 8 * 1024;
/// The longest the accept loop waits after a failed `accept`.
pub const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);
const MIN_ACCEPT_BACKOFF: Duration = Duration::from_millis(5);
/// How many transitions [`Proxy::transitions`] keeps (the most recent).
const KEPT_TRANSITIONS: usize = 1024;
/// The calls in flight to one upstream by default (Envoy's default per
/// cluster).
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1024;

/// The proxy's knobs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The per-call timeout (a timed-out call is a failure, and slow).
    pub timeout: Duration,
    /// How long a client's request body may send no bytes before the call
    /// is failed as the client's fault (408, neutral for the breaker);
    /// shorter than `timeout`, so a stalled upload is never cut as the
    /// upstream's timeout.
    pub body_timeout: Duration,
    /// The largest request body forwarded (413 past it, neutral).
    pub max_body: u64,
    /// How long a client may take to send a whole request head.
    pub header_timeout: Duration,
    /// How long a pooled upstream connection may stay idle.
    pub idle_timeout: Duration,
    /// The most calls in flight to one upstream; past it, 503 `x-failfast:
    /// overloaded` before the breaker is asked.
    pub max_in_flight: usize,
    /// How long a shutdown waits for requests in flight.
    pub drain: Duration,
    /// The most upstreams the status page shows (and its default).
    pub status_limit: usize,
    /// Whether the status page is on its own (admin) listener only.
    pub admin_listener: bool,
    /// Whether transitions are printed.
    pub verbose: bool,
    /// Whether each request is logged on stderr.
    pub access_log: bool,
    /// How many `GET` answers the stale cache keeps (0: none).
    pub stale_entries: usize,
    /// The largest body the stale cache keeps, in bytes.
    pub stale_max_body: usize,
    /// Whether local trips go into [`Proxy::outbox`] for a sync task to
    /// share with other proxies (`--redis`).
    pub share_trips: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            timeout: Duration::from_secs(5),
            body_timeout: Duration::from_secs(2),
            max_body: 16 * 1024 * 1024,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            drain: Duration::from_secs(10),
            status_limit: 100,
            admin_listener: false,
            verbose: false,
            access_log: false,
            stale_entries: 1024,
            stale_max_body: 64 * 1024,
            share_trips: false,
        }
    }
}

/// What the proxy shares between connections.
pub struct Proxy {
    /// Route name → upstream authority.
    pub routes: HashMap<String, Authority>,
    /// The breakers, one per upstream authority.
    pub registry: Arc<Registry<Authority>>,
    /// The cap on calls in flight, one per upstream authority.
    pub bulkheads: HashMap<Authority, Bulkhead>,
    /// Requests per route, by [`Decision`].
    pub requests: HashMap<String, Decisions>,
    /// The most recent transitions the layer saw, with their upstream.
    pub transitions: Mutex<VecDeque<(String, Transition)>>,
    /// The knobs it was built with.
    pub settings: Settings,
    /// The last good answer of each anonymous `GET`, for when its upstream
    /// is open.
    pub stale: Arc<StaleCache>,
    /// Where the layer reports local trips, if they are shared.
    pub outbox: Option<Arc<Outbox>>,
    /// `true` once asked to stop; every accept loop and connection holds a
    /// receiver, so the count of receivers is what is still open.
    stop: watch::Sender<bool>,
    /// The proxy's own Prometheus recorder.
    #[cfg(feature = "metrics")]
    metrics: Metrics,
    service: Upstreams,
}

/// Builds the proxy: `template` configures every upstream's breaker.
pub fn proxy(
    routes: HashMap<String, Authority>,
    template: Builder,
    settings: Settings,
) -> Result<Arc<Proxy>, failfast::ConfigError> {
    let registry = Arc::new(Registry::<Authority>::builder(template).build()?);
    let outbox = settings.share_trips.then(|| Arc::new(Outbox::new(1024)));
    // Routes are known at start: one bulkhead per upstream (routes to the
    // same upstream share it), one row of counters per route.
    let bulkheads = routes
        .values()
        .map(|upstream| (upstream.clone(), Bulkhead::new(settings.max_in_flight)))
        .collect();
    let requests = routes
        .keys()
        .map(|name| (name.clone(), Decisions::default()))
        .collect();
    Ok(Arc::new_cyclic(|me: &std::sync::Weak<Proxy>| {
        let me = me.clone();
        let client = Client::builder(TokioExecutor::new())
            // Without a timer hyper never closes idle pooled connections.
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(settings.idle_timeout)
            .build_http::<Upload>();
        let service = KeyedLayer::new(registry.clone())
            .classify(HttpClassifier::new())
            .timeout(settings.timeout)
            .name_rejections()
            .on_transition(move |upstream: &str, t: &Transition| {
                if let Some(proxy) = me.upgrade() {
                    proxy.heard(upstream, t);
                }
            })
            .layer(client);
        let stale = Arc::new(StaleCache::new(
            settings.stale_entries,
            settings.stale_max_body,
        ));
        let from_upstream: fn(Response<Incoming>) -> Response<Body> = from_upstream;
        let service = FallbackLayer::from_recover(StaleAnswers(stale.clone()))
            .layer(tower::util::MapResponse::new(service, from_upstream));
        Proxy {
            routes,
            registry,
            bulkheads,
            requests,
            transitions: Mutex::new(VecDeque::new()),
            settings,
            stale,
            outbox,
            stop: watch::Sender::new(false),
            #[cfg(feature = "metrics")]
            metrics: Metrics::new(),
            service,
        }
    }))
}

impl Proxy {
    /// A transition the layer caused: shared, printed, counted, kept.
    fn heard(&self, upstream: &str, t: &Transition) {
        if let Some(outbox) = &self.outbox {
            // Only local trips are kept; one lock-free push.
            outbox.report(upstream, t);
        }
        if self.settings.verbose {
            eprintln!("{upstream}: {} -> {} ({})", t.from, t.to, t.reason);
        }
        #[cfg(feature = "metrics")]
        self.metrics
            .record(|| failfast::export::metrics::record_transition_per_host(upstream, t));
        let mut kept = self.transitions.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() == KEPT_TRANSITIONS {
            kept.pop_front();
        }
        kept.push_back((upstream.to_owned(), *t));
    }

    /// Stops serving: every accept loop returns (its listener closes, so new
    /// connections are refused), and every connection closes once the
    /// request it is serving, if any, has been answered.
    pub fn shutdown(&self) {
        self.stop.send_replace(true);
    }

    /// Accept loops and connections still open.
    pub fn open_connections(&self) -> usize {
        self.stop.receiver_count()
    }

    /// Resolves once every accept loop and connection has closed.
    pub async fn drained(&self) {
        self.stop.closed().await
    }

    fn count(&self, route: &str, decision: Decision) {
        if let Some(decisions) = self.requests.get(route) {
            decisions.add(decision);
        }
    }
}

/// What a listener answers.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Role {
    /// Routes, and the status and metrics pages unless an admin listener
    /// has them.
    Main,
    /// The status and metrics pages only.
    Admin,
}

/// Serves the routes on `listener` until [`Proxy::shutdown`].
pub async fn serve(listener: TcpListener, proxy: Arc<Proxy>) {
    accept_loop(listener, proxy, Role::Main).await
}

/// Serves the status and metrics pages (only) on `listener` until
/// [`Proxy::shutdown`].
pub async fn serve_admin(listener: TcpListener, proxy: Arc<Proxy>) {
    accept_loop(listener, proxy, Role::Admin).await
}

/// Errors that concern one connection (it went away before we took it):
/// the next `accept` may succeed at once.
fn is_connection_error(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Resolves once the proxy is asked to stop (or is gone).
async fn stopping(stop: &mut watch::Receiver<bool>) {
    // The borrow the wait returns is dropped here, not held by the caller.
    let _ = stop.wait_for(|stopping| *stopping).await;
}

async fn accept_loop(listener: TcpListener, proxy: Arc<Proxy>, role: Role) {
    let mut stop = proxy.stop.subscribe();
    let mut backoff = Duration::ZERO;
    loop {
        let accepted = tokio::select! {
            // Once asked to stop, take no new connection: returning drops
            // the listener, and the kernel refuses the next ones.
            biased;
            () = stopping(&mut stop) => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, client) = match accepted {
            Ok(accepted) => accepted,
            Err(err) if is_connection_error(&err) => continue,
            Err(err) => {
                // EMFILE, ENFILE, ENOBUFS, ENOMEM: the same call would fail
                // again at once. Wait for connections to close instead.
                if backoff.is_zero() {
                    eprintln!("accept: {err}; backing off (up to {MAX_ACCEPT_BACKOFF:?})");
                }
                backoff = (backoff * 2).clamp(MIN_ACCEPT_BACKOFF, MAX_ACCEPT_BACKOFF);
                tokio::select! {
                    () = stopping(&mut stop) => return,
                    () = tokio::time::sleep(backoff) => continue,
                }
            }
        };
        if !backoff.is_zero() {
            eprintln!("accept: recovered");
            backoff = Duration::ZERO;
        }
        tokio::spawn(serve_connection(stream, client, proxy.clone(), role));
    }
}

/// One client connection, until it closes, or until the proxy stops and
/// the request in flight on it (if any) has been answered.
async fn serve_connection(stream: TcpStream, client: SocketAddr, proxy: Arc<Proxy>, role: Role) {
    let mut stop = proxy.stop.subscribe();
    let header_timeout = proxy.settings.header_timeout;
    let service = hyper::service::service_fn(move |req| handle(req, proxy.clone(), role, client));
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        () = stopping(&mut stop) => {
            // Answers the request in flight, then closes; an idle
            // keep-alive connection closes now.
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
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
    req: Request<Incoming>,
    proxy: Arc<Proxy>,
    role: Role,
    client: SocketAddr,
) -> Result<Response<Body>, Infallible> {
    let started = Instant::now();
    let logged = proxy
        .settings
        .access_log
        .then(|| (req.method().clone(), req.uri().path().to_owned()));
    let answer = answer(req, &proxy, role, client).await;
    if let Some((route, _)) = answer.route {
        proxy.count(route, answer.decision);
    }
    if let Some((method, path)) = logged {
        log_access(client, &method, &path, &answer, started.elapsed());
    }
    Ok(answer.response)
}

/// A request's answer, what became of it, and its route.
struct Answer<'p> {
    response: Response<Body>,
    decision: Decision,
    /// The route's name and upstream, if the path named a route.
    route: Option<(&'p str, &'p Authority)>,
}

impl Answer<'_> {
    /// An answer the proxy gives itself, for no route.
    fn here(response: Response<Body>) -> Self {
        Answer {
            response,
            decision: Decision::NotForwarded,
            route: None,
        }
    }
}

async fn answer<'p>(
    req: Request<Incoming>,
    proxy: &'p Proxy,
    role: Role,
    client: SocketAddr,
) -> Answer<'p> {
    let pages_here = match role {
        Role::Admin => true,
        Role::Main => !proxy.settings.admin_listener,
    };
    if pages_here && req.uri().path() == STATUS_PATH {
        return Answer::here(status_page(req.uri().query(), proxy));
    }
    if pages_here && req.uri().path() == METRICS_PATH {
        return Answer::here(metrics_page(proxy));
    }
    if role == Role::Admin {
        return Answer::here(text(
            StatusCode::NOT_FOUND,
            "the admin address serves /_failfast and /metrics only\n",
        ));
    }
    forward(req, proxy, client).await
}

/// `/_failfast?limit=N`: at most `N` upstreams (default and cap:
/// `--status-limit`), open ones first, and how many were left out.
fn status_page(query: Option<&str>, proxy: &Proxy) -> Response<Body> {
    let cap = proxy.settings.status_limit;
    let mut limit = cap;
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        match pair.split_once('=') {
            Some(("limit", n)) => match n.parse::<usize>() {
                Ok(n) => limit = n.min(cap),
                Err(_) => return text(StatusCode::BAD_REQUEST, "limit: a number\n"),
            },
            _ => {
                return text(
                    StatusCode::BAD_REQUEST,
                    "the status page takes ?limit=N only\n",
                )
            }
        }
    }
    let mut response = text(StatusCode::OK, status_json(&proxy.registry, limit));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

// ---------------------------------------------------------------------------
// Forwarding

/// What became of a request: the access log's `decision`, and a label of
/// `failfast_proxy_requests_total`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The breaker let the call through: the upstream's answer, or 502/504
    /// when it failed or timed out.
    Admitted,
    /// The breaker rejected it: 503 + `Retry-After`, the upstream not called.
    Rejected,
    /// The breaker rejected it and the stale cache answered.
    Fallback,
    /// The upstream's in-flight cap was full: 503 `x-failfast: overloaded`,
    /// the breaker not asked.
    Overloaded,
    /// The client's request body broke, stalled or was too large (400, 408,
    /// 413): neutral for the breaker.
    ClientFault,
    /// The proxy ran short of a resource of its own (503): neutral.
    LocalFault,
    /// Not forwarded: no such route, a bad URI, a page of the proxy's own.
    NotForwarded,
}

impl Decision {
    /// Every decision, in the order of [`Decisions`]' counters.
    pub const ALL: [Decision; 7] = [
        Decision::Admitted,
        Decision::Rejected,
        Decision::Fallback,
        Decision::Overloaded,
        Decision::ClientFault,
        Decision::LocalFault,
        Decision::NotForwarded,
    ];

    /// Its name in the access log and the metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Admitted => "admitted",
            Decision::Rejected => "rejected",
            Decision::Fallback => "fallback",
            Decision::Overloaded => "overloaded",
            Decision::ClientFault => "client-fault",
            Decision::LocalFault => "local-fault",
            Decision::NotForwarded => "not-forwarded",
        }
    }
}

/// One route's requests, counted by [`Decision`].
#[derive(Debug, Default)]
pub struct Decisions([AtomicU64; Decision::ALL.len()]);

impl Decisions {
    fn add(&self, decision: Decision) {
        // Relaxed: a statistic read at scrape time; it orders nothing.
        self.0[decision as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The requests counted with `decision`.
    pub fn get(&self, decision: Decision) -> u64 {
        // Relaxed: see `add`.
        self.0[decision as usize].load(Ordering::Relaxed)
    }
}

/// The route a path names (its first segment), with its upstream.
fn route_of<'p>(proxy: &'p Proxy, path: &str) -> Option<(&'p str, &'p Authority)> {
    let name = path.trim_start_matches('/').split('/').next()?;
    let (name, upstream) = proxy.routes.get_key_value(name)?;
    Some((name.as_str(), upstream))
}

/// The upstream URI for `/{route}/{rest}?{query}`, or the answer to give
/// instead (414 too long, 400 unparsable).
fn upstream_uri(upstream: &Authority, uri: &Uri) -> Result<Uri, (StatusCode, &'static str)> {
    let path = uri.path().trim_start_matches('/');
    let rest = path.split_once('/').map_or("", |(_, rest)| rest);
    let query = uri.query();
    let len = "http://".len()
        + upstream.as_str().len()
        + 1
        + rest.len()
        + query.map_or(0, |q| q.len() + 1);
    if len > MAX_URI {
        return Err((StatusCode::URI_TOO_LONG, "URI too long\n"));
    }
    let mut path_and_query = String::with_capacity(len);
    path_and_query.push('/');
    path_and_query.push_str(rest);
    if let Some(q) = query {
        path_and_query.push('?');
        path_and_query.push_str(q);
    }
    Uri::builder()
        .scheme(Scheme::HTTP)
        .authority(upstream.clone())
        .path_and_query(path_and_query)
        .build()
        .map_err(|_| (StatusCode::BAD_REQUEST, "bad request URI\n"))
}

async fn forward<'p>(
    mut req: Request<Incoming>,
    proxy: &'p Proxy,
    client: SocketAddr,
) -> Answer<'p> {
    let Some((route, upstream)) = route_of(proxy, req.uri().path()) else {
        return Answer::here(text(StatusCode::NOT_FOUND, "no such route\n"));
    };
    let answer = |response, decision| Answer {
        response,
        decision,
        route: Some((route, upstream)),
    };
    match upstream_uri(upstream, req.uri()) {
        Ok(uri) => *req.uri_mut() = uri,
        Err((status, why)) => return answer(text(status, why), Decision::NotForwarded),
    }
    // The cap comes before the breaker: a call it turns away takes no
    // breaker permit, so it never enters the breaker's window.
    let _slot: Option<BulkheadPermit<'_>> = match proxy.bulkheads.get(upstream) {
        Some(bulkhead) => match bulkhead.try_acquire() {
            Ok(slot) => Some(slot),
            Err(_) => return answer(overloaded(upstream, bulkhead), Decision::Overloaded),
        },
        None => None, // every route's upstream has one
    };
    to_upstream(&mut req, client.ip());
    let settings = &proxy.settings;
    let req = req.map(|body| {
        DownstreamBody::new(body)
            .idle_timeout(settings.body_timeout)
            .max_bytes(settings.max_body)
    });
    let key = stale_key(&req);
    let (response, decision) = match proxy.service.clone().oneshot(req).await {
        Ok(response) if is_stale(&response) => (response, Decision::Fallback),
        Ok(response) => match key {
            Some(key) => (proxy.stale.keep(key, response).await, Decision::Admitted),
            None => (response, Decision::Admitted),
        },
        Err(err) => failed_call(&err),
    };
    answer(response, decision)
}

/// `503 Service Unavailable`, `x-failfast: overloaded`: the upstream has as
/// many calls in flight as the proxy sends it.
fn overloaded(upstream: &Authority, bulkhead: &Bulkhead) -> Response<Body> {
    let mut response = text(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "{upstream}: {} calls in flight, the most this proxy sends it\n",
            bulkhead.max()
        ),
    );
    response
        .headers_mut()
        .insert(X_FAILFAST, HeaderValue::from_static("overloaded"));
    response
}

/// The answer to a call that did not come back with a response: a
/// rejection (503 + `Retry-After`), a timeout (504), the client's fault
/// (its body broke, stalled or was too large: neutral for the breaker) as a
/// 4xx, the proxy's own (out of file descriptors: neutral too) as a 503,
/// the upstream's as a 502.
fn failed_call(err: &tower::BoxError) -> (Response<Body>, Decision) {
    let empty = || {
        Full::new(Bytes::new())
            .map_err(|never| match never {})
            .boxed()
    };
    if let Some(response) = error_response(err, empty) {
        let decision = if err.is::<Rejected>() {
            Decision::Rejected
        } else if err.is::<TimedOut>() {
            Decision::Admitted // and cut by the call timeout: 504
        } else {
            Decision::NotForwarded // no upstream key (400): never here, the URI has one
        };
        return (response, decision);
    }
    let (status, decision) = match Fault::of(&**err) {
        Fault::Downstream => match downstream_kind(err) {
            Some(DownstreamKind::Stalled(_)) => {
                (StatusCode::REQUEST_TIMEOUT, Decision::ClientFault)
            }
            Some(DownstreamKind::TooLarge(_)) => {
                (StatusCode::PAYLOAD_TOO_LARGE, Decision::ClientFault)
            }
            _ => (StatusCode::BAD_REQUEST, Decision::ClientFault),
        },
        Fault::Local => (StatusCode::SERVICE_UNAVAILABLE, Decision::LocalFault),
        _ => (StatusCode::BAD_GATEWAY, Decision::Admitted),
    };
    (text(status, format!("{err}\n")), decision)
}

/// What went wrong with the client's body, read off the error's chain.
fn downstream_kind(err: &tower::BoxError) -> Option<DownstreamKind> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(&**err);
    while let Some(e) = next {
        if let Some(d) = e.downcast_ref::<DownstreamError>() {
            return Some(d.kind());
        }
        next = e.source();
    }
    None
}

// ---------------------------------------------------------------------------
// Headers between hops

/// The hop-by-hop fields of RFC 9110 §7.6.1, with `Proxy-Connection` (its
/// pre-standard spelling): each describes one connection, and a proxy
/// forwards none of them.
pub const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHORIZATION,
    header::PROXY_AUTHENTICATE,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    HeaderName::from_static("proxy-connection"),
];

/// `X-Forwarded-For`: the clients a request came through, nearest last.
pub const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// Removes the hop-by-hop fields: those `Connection` names, then
/// [`HOP_BY_HOP`]. hyper frames each hop's body itself.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .flat_map(|value| value.as_bytes().split(|b| *b == b','))
        .filter_map(|name| HeaderName::from_bytes(name.trim_ascii()).ok())
        .collect();
    for name in named.iter().chain(&HOP_BY_HOP) {
        headers.remove(name);
    }
}

/// Adds `received` (the protocol version it came in) and this proxy's name
/// to `Via` (RFC 9110 §7.6.3), after any earlier proxies'.
fn append_via(headers: &mut HeaderMap, received: Version) {
    let via = match received {
        Version::HTTP_09 => "0.9 failfast",
        Version::HTTP_10 => "1.0 failfast",
        Version::HTTP_2 => "2 failfast",
        Version::HTTP_3 => "3 failfast",
        _ => "1.1 failfast",
    };
    headers.append(header::VIA, HeaderValue::from_static(via));
}

/// Appends `client` to `X-Forwarded-For`, after any addresses the request
/// already carried (one field, comma-separated).
fn append_forwarded_for(headers: &mut HeaderMap, client: IpAddr) {
    let client = client.to_string();
    let mut value = Vec::new();
    for earlier in headers.get_all(&X_FORWARDED_FOR) {
        value.extend_from_slice(earlier.as_bytes());
        value.extend_from_slice(b", ");
    }
    value.extend_from_slice(client.as_bytes());
    // The earlier values were valid field values, and so are ", " and an
    // address: this always parses.
    if let Ok(value) = HeaderValue::from_bytes(&value) {
        headers.insert(X_FORWARDED_FOR, value);
    }
}

/// A client's request made ready for the upstream: `Host` left to the
/// upstream URI, the hop-by-hop fields removed, `X-Forwarded-For` and `Via`
/// added.
fn to_upstream<B>(req: &mut Request<B>, client: IpAddr) {
    let version = req.version();
    let headers = req.headers_mut();
    headers.remove(header::HOST);
    strip_hop_by_hop(headers);
    append_forwarded_for(headers, client);
    append_via(headers, version);
}

/// An upstream's answer made ready for the client: the hop-by-hop fields
/// removed, `Via` added, the body boxed.
fn from_upstream(response: Response<Incoming>) -> Response<Body> {
    let (mut head, body) = response.into_parts();
    strip_hop_by_hop(&mut head.headers);
    append_via(&mut head.headers, head.version);
    Response::from_parts(head, body.boxed())
}

// ---------------------------------------------------------------------------
// Access log

/// One logfmt line on stderr: who asked what, where it went, the status,
/// how long until the answer's head, and what became of it.
fn log_access(
    client: SocketAddr,
    method: &Method,
    path: &str,
    answer: &Answer<'_>,
    took: Duration,
) {
    let (route, upstream) = match answer.route {
        Some((route, upstream)) => (route, upstream.as_str()),
        None => ("-", "-"),
    };
    eprintln!(
        "access client={} method={method} path={path:?} route={route} upstream={upstream} \
         status={} duration_ms={:.3} decision={}",
        client.ip(),
        answer.response.status().as_u16(),
        took.as_secs_f64() * 1e3,
        answer.decision.as_str(),
    );
}

// ---------------------------------------------------------------------------
// Stale answers, never someone else's

/// What a `GET`'s stale answer is filed under: its upstream URI, and the
/// request's fields (an answer that `Vary`s on some of them is served only
/// to requests that send the same values).
pub struct StaleKey {
    uri: String,
    headers: HeaderMap,
}

/// The stale key of a request whose answer may be kept and served to
/// others: an idempotent `GET` that carries nothing personal — no
/// `Authorization`, no `Cookie` (a shared cache must not reuse such an
/// answer: RFC 9111 §3.5) — and does not ask `no-store` or `no-cache`.
fn stale_key<B>(req: &Request<B>) -> Option<StaleKey> {
    let headers = req.headers();
    let personal =
        headers.contains_key(header::AUTHORIZATION) || headers.contains_key(header::COOKIE);
    let uncached = has_directive(headers, &["no-store", "no-cache"]);
    (req.method() == Method::GET && !personal && !uncached).then(|| StaleKey {
        uri: req.uri().to_string(),
        headers: headers.clone(),
    })
}

/// Response directives under which a shared cache may not keep an answer,
/// or may not serve it stale: `no-store` and `private` (RFC 9111 §5.2.2.5,
/// §5.2.2.7), `no-cache` and `must-revalidate`, `proxy-revalidate`,
/// `s-maxage` (§4.2.4: no stale answer without revalidation).
const NOT_KEPT: [&str; 6] = [
    "no-store",
    "private",
    "no-cache",
    "must-revalidate",
    "proxy-revalidate",
    "s-maxage",
];

/// Whether `Cache-Control` holds any of `directives` (by name, any case;
/// `private="x"` counts as `private`).
fn has_directive(headers: &HeaderMap, directives: &[&str]) -> bool {
    headers
        .get_all(header::CACHE_CONTROL)
        .iter()
        .flat_map(|value| value.as_bytes().split(|b| *b == b','))
        .map(|directive| {
            directive
                .split(|b| *b == b'=')
                .next()
                .unwrap_or_default()
                .trim_ascii()
        })
        .any(|name| {
            directives
                .iter()
                .any(|d| name.eq_ignore_ascii_case(d.as_bytes()))
        })
}

/// The request fields an answer varies on, or `None` if it may not be
/// served to anyone else: `Vary: *`, `Vary` on `Authorization` or
/// `Cookie`, or a `Vary` that does not parse.
fn varied_fields(headers: &HeaderMap) -> Option<Vec<HeaderName>> {
    let mut fields = Vec::new();
    for token in headers
        .get_all(header::VARY)
        .iter()
        .flat_map(|value| value.as_bytes().split(|b| *b == b','))
        .map(<[u8]>::trim_ascii)
        .filter(|token| !token.is_empty())
    {
        if token == b"*" {
            return None; // it varies on more than the request's fields
        }
        let field = HeaderName::from_bytes(token).ok()?;
        if field == header::AUTHORIZATION || field == header::COOKIE {
            return None;
        }
        fields.push(field);
    }
    Some(fields)
}

/// The fields the answer to `request` varies on, with the request's values
/// for them: what a later request must send to be served the same answer.
/// `None` if the answer may not be kept for anyone else (see [`NOT_KEPT`],
/// [`varied_fields`]; an answer that sets a cookie is someone's too).
fn keepable(
    answer: &HeaderMap,
    request: &HeaderMap,
) -> Option<Vec<(HeaderName, Vec<HeaderValue>)>> {
    if has_directive(answer, &NOT_KEPT) || answer.contains_key(header::SET_COOKIE) {
        return None;
    }
    let fields = varied_fields(answer)?;
    Some(
        fields
            .into_iter()
            .map(|field| {
                let values = request.get_all(&field).iter().cloned().collect();
                (field, values)
            })
            .collect(),
    )
}

/// A kept answer: its head, its whole body, when it was fresh, and the
/// request fields it was selected by.
struct Kept {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    stored: Instant,
    selected: Vec<(HeaderName, Vec<HeaderValue>)>,
}

impl Kept {
    /// Whether `request` sends the values this answer was selected by.
    fn selected_by(&self, request: &HeaderMap) -> bool {
        self.selected
            .iter()
            .all(|(field, values)| request.get_all(field).iter().eq(values.iter()))
    }
}

/// The last good answer of each anonymous `GET`, bounded: at most `entries`
/// answers (the oldest key goes first), each body at most `max_body` bytes.
pub struct StaleCache {
    entries: usize,
    max_body: usize,
    kept: Mutex<(HashMap<String, Kept>, VecDeque<String>)>,
}

impl StaleCache {
    fn new(entries: usize, max_body: usize) -> StaleCache {
        StaleCache {
            entries,
            max_body,
            kept: Mutex::new((HashMap::new(), VecDeque::new())),
        }
    }

    /// How many answers are kept.
    pub fn len(&self) -> usize {
        self.kept.lock().unwrap_or_else(|p| p.into_inner()).0.len()
    }

    /// Whether no answer is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keeps a fresh `200` answer to `key` and gives it back, its body read
    /// whole when kept. A fresh `200` that may not be kept (too large, or
    /// someone's own: see [`keepable`]) drops the answer kept before it,
    /// which is no longer the last good one.
    async fn keep(&self, key: StaleKey, response: Response<Body>) -> Response<Body> {
        if self.entries == 0 || response.status() != StatusCode::OK || is_stale(&response) {
            return response;
        }
        let fits = hyper::body::Body::size_hint(response.body())
            .upper()
            .is_some_and(|n| n <= self.max_body as u64);
        let selected = keepable(response.headers(), &key.headers).filter(|_| fits);
        let Some(selected) = selected else {
            self.forget(&key.uri);
            return response;
        };
        let (head, body) = response.into_parts();
        let body = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(err) => return text(StatusCode::BAD_GATEWAY, format!("{err}\n")),
        };
        let kept = Kept {
            status: head.status,
            headers: head.headers.clone(),
            body: body.clone(),
            stored: Instant::now(),
            selected,
        };
        let mut guard = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let (map, order) = &mut *guard;
        if map.insert(key.uri.clone(), kept).is_none() {
            order.push_back(key.uri);
            if order.len() > self.entries {
                if let Some(oldest) = order.pop_front() {
                    map.remove(&oldest);
                }
            }
        }
        drop(guard);
        Response::from_parts(
            head,
            Full::new(body).map_err(|never| match never {}).boxed(),
        )
    }

    fn forget(&self, uri: &str) {
        let mut guard = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let (map, order) = &mut *guard;
        if map.remove(uri).is_some() {
            order.retain(|kept| kept != uri);
        }
    }

    /// The kept answer to `key`, marked stale, if there is one and the
    /// request sends what it was selected by.
    fn answer(&self, key: &StaleKey, rejected: &Rejected) -> Option<Response<Body>> {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let kept = kept.0.get(&key.uri)?;
        if !kept.selected_by(&key.headers) {
            return None;
        }
        let mut response = Response::new(
            Full::new(kept.body.clone())
                .map_err(|never| match never {})
                .boxed(),
        );
        *response.status_mut() = kept.status;
        *response.headers_mut() = kept.headers.clone();
        mark_stale(&mut response, rejected, Some(kept.stored.elapsed()));
        Some(response)
    }
}

/// The proxy's fallback: a rejected anonymous `GET` answered from the stale
/// cache; any other rejection (a miss, another method, a personal request)
/// left to become a 503.
#[derive(Clone)]
pub struct StaleAnswers(Arc<StaleCache>);

impl Recover<Request<Upload>, Response<Body>> for StaleAnswers {
    type Memo = Option<StaleKey>;

    fn remember(&self, req: &Request<Upload>) -> Option<StaleKey> {
        stale_key(req)
    }

    fn answer(&self, key: Option<StaleKey>, rejected: &Rejected) -> Option<Response<Body>> {
        self.0.answer(&key?, rejected)
    }
}

// ---------------------------------------------------------------------------
// Metrics (feature `metrics`)

/// The proxy's own Prometheus recorder. Not the process's global one: a
/// process may run several proxies (the tests do). Everything is published
/// into it at scrape time, but transitions, counted as they happen.
#[cfg(feature = "metrics")]
struct Metrics {
    recorder: metrics_exporter_prometheus::PrometheusRecorder,
    handle: metrics_exporter_prometheus::PrometheusHandle,
}

#[cfg(feature = "metrics")]
impl Metrics {
    fn new() -> Metrics {
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
    fn record<T>(&self, f: impl FnOnce() -> T) -> T {
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
fn metrics_page(proxy: &Proxy) -> Response<Body> {
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
fn metrics_page(_proxy: &Proxy) -> Response<Body> {
    text(
        StatusCode::NOT_FOUND,
        "no metrics in this build: build with --features tower,metrics\n",
    )
}

// ---------------------------------------------------------------------------
// Demo upstreams

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
    /// Requests served.
    pub hits: Arc<AtomicUsize>,
    /// Connections open right now.
    pub open: Arc<AtomicUsize>,
    pub mode: Arc<AtomicU64>,
}

/// Starts an upstream on 127.0.0.1 (ephemeral port) answering per `mode`,
/// once it has read the request's body.
pub async fn upstream(mode: u64) -> io::Result<Upstream> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let hits = Arc::new(AtomicUsize::new(0));
    let open = Arc::new(AtomicUsize::new(0));
    let mode = Arc::new(AtomicU64::new(mode));
    let (h, o, m) = (hits.clone(), open.clone(), mode.clone());
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(MIN_ACCEPT_BACKOFF).await;
                continue;
            };
            let (h, o, m) = (h.clone(), o.clone(), m.clone());
            o.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    h.fetch_add(1, Ordering::SeqCst);
                    let mode = m.load(Ordering::SeqCst);
                    async move {
                        // Reads the whole request body first, as a server
                        // handling an upload does.
                        let _ = req.into_body().collect().await;
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
                o.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    Ok(Upstream {
        addr,
        hits,
        open,
        mode,
    })
}

/// A loopback address where nothing listens (connections are refused).
pub async fn refusing() -> io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    listener.local_addr() // dropped: the port is closed again
}

// ---------------------------------------------------------------------------
// Command line

/// The usage text, printed by `--help` and after a bad argument.
pub const USAGE: &str = "\
usage: proxy [OPTIONS]

A reverse proxy with one circuit breaker per upstream: GET /NAME/PATH is
forwarded to http://HOST:PORT/PATH. It logs one line per request on stderr,
serves its breakers at /_failfast and, built with the metrics feature,
Prometheus metrics at /metrics; SIGTERM or SIGINT drains it and exits 0.

options:
  --route NAME=HOST:PORT  forward /NAME/... to HOST:PORT; repeat for more
                          routes, each NAME once (letters, digits, - . _ ~);
                          HOST must be loopback (127.0.0.0/8, ::1, localhost)
  --allow-remote-upstreams
                          allow a --route to any other host
  --demo                  start local upstreams and route to them: healthy,
                          slow (800 ms), failing (503), down (refused)
  --listen ADDR           where clients connect [default: 127.0.0.1:8080]
  --admin ADDR            serve /_failfast and /metrics here only
                          [default: on --listen]
  --timeout MS            per-call timeout [default: 5000]
  --body-timeout MS       fail a call whose request body sends nothing this
                          long, as the client's fault (408); shorter than
                          --timeout [default: 2000, or half of --timeout]
  --max-in-flight N       calls in flight to one upstream at most; past it,
                          503 with x-failfast: overloaded [default: 1024]
  --drain MS              on SIGTERM or SIGINT, stop accepting and wait this
                          long at most for requests in flight [default: 10000]
  --header-timeout MS     close a connection whose request head is not
                          complete by then [default: 10000]
  --idle-timeout MS       close pooled upstream connections idle this long
                          [default: 30000]
  --status-limit N        upstreams on the status page at most [default: 100]
  --no-access-log         do not log each request
  --redis URL             share trips with other proxies through Redis 7+
                          (redis://HOST:PORT/ or redis+unix:///PATH; needs
                          the example built with --features tower,redis)
  --replica NAME          this proxy's name among them [default: random]
  -h, --help              print this and exit

Listen addresses must be loopback: this is an example.
";

/// What the command line asks for.
#[derive(Clone, Debug)]
pub struct Options {
    pub listen: SocketAddr,
    pub admin: Option<SocketAddr>,
    /// Route name → upstream, in name order.
    pub routes: BTreeMap<String, Authority>,
    pub demo: bool,
    pub settings: Settings,
    /// `--redis`: where trips are shared, and this proxy's name there.
    pub redis: Option<String>,
    pub replica: Option<String>,
    /// `--allow-remote-upstreams`: routes may leave the machine.
    pub remote_upstreams: bool,
}

/// The outcome of parsing the command line.
#[derive(Clone, Debug)]
pub enum Cli {
    Run(Box<Options>),
    Help,
}

/// Parses the arguments (without the program name). `Err` says what is wrong.
pub fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Cli, String> {
    let mut args = args.into_iter();
    let mut options = Options {
        listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
        admin: None,
        routes: BTreeMap::new(),
        demo: false,
        settings: Settings {
            verbose: true,
            access_log: true,
            ..Settings::default()
        },
        redis: None,
        replica: None,
        remote_upstreams: false,
    };
    let mut body_timeout = None;
    while let Some(arg) = args.next() {
        let mut value = |what: &str| {
            args.next()
                .ok_or_else(|| format!("{arg} needs a value: {arg} {what}"))
        };
        match arg.as_str() {
            "-h" | "--help" => return Ok(Cli::Help),
            "--demo" => options.demo = true,
            "--listen" => options.listen = address(&arg, &value("ADDR")?)?,
            "--admin" => options.admin = Some(address(&arg, &value("ADDR")?)?),
            "--route" => {
                let spec = value("NAME=HOST:PORT")?;
                let (name, to) = route(&spec)?;
                if options.routes.insert(name.to_owned(), to).is_some() {
                    return Err(format!("--route {name} given twice"));
                }
            }
            "--allow-remote-upstreams" => options.remote_upstreams = true,
            "--timeout" => options.settings.timeout = millis(&arg, &value("MS")?)?,
            "--body-timeout" => body_timeout = Some(millis(&arg, &value("MS")?)?),
            "--max-in-flight" => options.settings.max_in_flight = count(&arg, &value("N")?)?,
            "--drain" => options.settings.drain = millis(&arg, &value("MS")?)?,
            "--header-timeout" => options.settings.header_timeout = millis(&arg, &value("MS")?)?,
            "--idle-timeout" => options.settings.idle_timeout = millis(&arg, &value("MS")?)?,
            "--status-limit" => {
                let n = value("N")?;
                options.settings.status_limit = n
                    .parse()
                    .map_err(|_| format!("--status-limit {n:?}: expected a number"))?;
            }
            "--no-access-log" => options.settings.access_log = false,
            "--redis" => options.redis = Some(value("URL")?),
            "--replica" => options.replica = Some(value("NAME")?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if options.demo {
        for name in DEMO_ROUTES {
            if options.routes.contains_key(name) {
                return Err(format!("--route {name} clashes with --demo's route {name}"));
            }
        }
    } else if options.routes.is_empty() {
        return Err("no routes: give --route NAME=HOST:PORT or --demo".to_owned());
    }
    if !options.remote_upstreams {
        if let Some((name, to)) = options
            .routes
            .iter()
            .find(|(_, to)| !is_loopback_host(to.host()))
        {
            return Err(format!(
                "--route {name}={to}: {} is not a loopback address; this example sends \
                 traffic to this machine only, unless given --allow-remote-upstreams",
                to.host()
            ));
        }
    }
    let timeout = options.settings.timeout;
    options.settings.body_timeout = match body_timeout {
        Some(body) if body >= timeout => {
            return Err("--body-timeout must be shorter than --timeout".to_owned());
        }
        Some(body) => body,
        // The default, kept below the call timeout.
        None => options.settings.body_timeout.min(timeout / 2),
    };
    if options.admin == Some(options.listen) && options.listen.port() != 0 {
        return Err("--admin must differ from --listen".to_owned());
    }
    if options.replica.is_some() && options.redis.is_none() {
        return Err("--replica needs --redis".to_owned());
    }
    if options.redis.is_some() && !cfg!(feature = "redis") {
        return Err(
            "--redis: this build has no Redis support; build with --features tower,redis"
                .to_owned(),
        );
    }
    options.settings.admin_listener = options.admin.is_some();
    options.settings.share_trips = options.redis.is_some();
    Ok(Cli::Run(Box::new(options)))
}

const DEMO_ROUTES: [&str; 4] = ["healthy", "slow", "failing", "down"];

/// `NAME=HOST:PORT`: a name of URI-unreserved characters (it is a path
/// segment, a log field and a metrics label), a host, a port other than 0,
/// no user information.
fn route(spec: &str) -> Result<(&str, Authority), String> {
    let (name, to) = spec
        .split_once('=')
        .filter(|(name, _)| valid_route_name(name))
        .ok_or_else(|| {
            format!("--route {spec:?}: expected NAME=HOST:PORT, NAME of letters, digits, - . _ ~")
        })?;
    let to: Authority = to
        .parse()
        .ok()
        .filter(|a: &Authority| {
            a.port_u16().is_some_and(|port| port != 0)
                && !a.host().is_empty()
                && !a.as_str().contains('@')
        })
        .ok_or_else(|| format!("--route {spec:?}: {to:?} is not HOST:PORT (port 1 to 65535)"))?;
    Ok((name, to))
}

fn valid_route_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
}

/// Whether `host` (an authority's host: a name, an IPv4 address or a
/// bracketed IPv6 one) is this machine's loopback: `localhost`, 127.0.0.0/8
/// or `::1` (also as `::ffff:127.x.y.z`).
fn is_loopback_host(host: &str) -> bool {
    let unbracketed = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.trim_end_matches('.').eq_ignore_ascii_case("localhost")
        || unbracketed
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.to_canonical().is_loopback())
}

fn address(flag: &str, s: &str) -> Result<SocketAddr, String> {
    let addr: SocketAddr = s
        .parse()
        .map_err(|_| format!("{flag} {s:?}: expected IP:PORT, e.g. 127.0.0.1:8080"))?;
    if !addr.ip().is_loopback() {
        return Err(format!("{flag} {s}: this example listens on loopback only"));
    }
    Ok(addr)
}

fn millis(flag: &str, s: &str) -> Result<Duration, String> {
    match s.parse::<u64>() {
        Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
        _ => Err(format!("{flag} {s:?}: expected milliseconds, at least 1")),
    }
}

fn count(flag: &str, s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{flag} {s:?}: expected a number, at least 1")),
    }
}

/// The breaker every upstream gets. A hung upstream behind clients more
/// impatient than the slow-call threshold opens it by the default
/// unanswered rule: twenty calls in a row that clients gave up on after
/// 250 ms (half the threshold), with no answer between them.
pub fn template() -> Builder {
    Breaker::builder()
        .failure_rate(0.5)
        .slow_call_rate(0.5)
        .slow_call_threshold(Duration::from_millis(500))
        .count_window(20)
        .min_calls(10)
        .open_duration(Duration::from_secs(10))
        .count_calls(true)
}

/// Runs the proxy as the command line asks; the process exit status.
pub fn main_with(args: impl IntoIterator<Item = String>) -> i32 {
    let options = match parse_args(args) {
        Ok(Cli::Run(options)) => *options,
        Ok(Cli::Help) => {
            print!("{USAGE}");
            return 0;
        }
        Err(err) => {
            eprintln!("error: {err}\n\n{USAGE}");
            return 2;
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the runtime: {err}");
            return 1;
        }
    };
    match runtime.block_on(run(options)) {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("error: {err}");
            1
        }
    }
}

/// Serves until SIGTERM or SIGINT, then drains (see [`Proxy::shutdown`]).
async fn run(options: Options) -> io::Result<()> {
    // Installed first: a signal from now on drains rather than kills.
    let mut stop = StopSignals::new()?;
    let mut routes: HashMap<String, Authority> = options.routes.into_iter().collect();
    if options.demo {
        for (name, mode) in [
            ("healthy", HEALTHY),
            ("slow", slow(800)),
            ("failing", FAILING),
        ] {
            let addr = upstream(mode).await?.addr;
            routes.insert(name.to_owned(), authority(addr));
        }
        routes.insert("down".to_owned(), authority(refusing().await?));
    }
    let drain = options.settings.drain;
    let proxy = proxy(routes, template(), options.settings)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    #[cfg(feature = "redis")]
    if let (Some(url), Some(outbox)) = (&options.redis, &proxy.outbox) {
        share_trips(&proxy, outbox.clone(), url, options.replica.as_deref())?;
    }
    let listener = bind(options.listen).await?;
    eprintln!("failfast proxy on http://{}", listener.local_addr()?);
    let admin = match options.admin {
        Some(addr) => {
            let admin = bind(addr).await?;
            eprintln!("status on http://{}{STATUS_PATH}", admin.local_addr()?);
            Some(admin)
        }
        None => {
            eprintln!("status on http://{}{STATUS_PATH}", listener.local_addr()?);
            None
        }
    };
    let mut names: Vec<_> = proxy.routes.iter().collect();
    names.sort_by_key(|(name, _)| name.as_str());
    for (name, to) in names {
        eprintln!("  /{name}/  ->  http://{to}/");
    }
    let mut loops = vec![tokio::spawn(serve(listener, proxy.clone()))];
    if let Some(admin) = admin {
        loops.push(tokio::spawn(serve_admin(admin, proxy.clone())));
    }

    let signal = stop.next().await;
    proxy.shutdown();
    for accept_loop in loops {
        let _ = accept_loop.await; // its listener is closed once it returns
    }
    eprintln!(
        "{signal}: stopped accepting; draining {} connections (at most {drain:?})",
        proxy.open_connections()
    );
    match tokio::time::timeout(drain, proxy.drained()).await {
        Ok(()) => eprintln!("drained; exiting"),
        Err(_) => eprintln!(
            "drain deadline: closing {} connections still open; exiting",
            proxy.open_connections()
        ),
    }
    Ok(())
}

/// Binds `addr`, naming it in the error (the OS's "Address already in
/// use" does not).
async fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|err| io::Error::new(err.kind(), format!("cannot listen on {addr}: {err}")))
}

/// SIGTERM (how process managers and Kubernetes stop a process) and SIGINT
/// (Ctrl-C), each caught from the moment this is made.
struct StopSignals {
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn new() -> io::Result<StopSignals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(StopSignals {
                terminate: signal(SignalKind::terminate())?,
                interrupt: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        Ok(StopSignals {})
    }

    /// The next stop signal's name.
    async fn next(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.terminate.recv() => "SIGTERM",
                _ = self.interrupt.recv() => "SIGINT",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}

/// Starts the task that shares this proxy's trips through Redis at `url`
/// (on the current tokio runtime); its counters.
#[cfg(feature = "redis")]
pub fn share_trips(
    proxy: &Proxy,
    outbox: Arc<Outbox>,
    url: &str,
    name: Option<&str>,
) -> io::Result<Arc<failfast::share::SyncStats>> {
    use failfast::redis::RedisSyncBuilder;
    use failfast::share::Replica;

    let invalid =
        |e: failfast::ConfigError| io::Error::new(io::ErrorKind::InvalidInput, e.to_string());
    let mut replica = Replica::builder(proxy.registry.clone(), outbox);
    if let Some(name) = name {
        replica = replica.origin(name);
    }
    let replica = replica.build().map_err(invalid)?;
    eprintln!("sharing trips through {url} as {}", replica.origin());
    let sync = RedisSyncBuilder::new(url).build(replica).map_err(invalid)?;
    let stats = sync.stats();
    tokio::spawn(sync.run());
    Ok(stats)
}

fn authority(addr: SocketAddr) -> Authority {
    Authority::try_from(addr.to_string()).expect("a socket address is an authority")
}

fn main() {
    std::process::exit(main_with(std::env::args().skip(1)));
}
