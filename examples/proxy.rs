//! A real HTTP reverse proxy with one circuit breaker per upstream host.
//!
//! ```sh
//! # Start four local upstreams (healthy, slow, failing, down) and the proxy:
//! cargo run --example proxy --features tower -- --demo
//! curl -i localhost:8080/slow/       # 200 after 800 ms ... then 503 + Retry-After, at once
//! curl -s localhost:8080/_failfast   # the breakers, as JSON (open ones first, 100 at most)
//! # Route to your own (loopback) upstreams, status page on its own address:
//! cargo run --example proxy --features tower -- --listen 127.0.0.1:8080 \
//!     --route api=127.0.0.1:9001 --route auth=127.0.0.1:9002 --admin 127.0.0.1:9900
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
//! [`error_response`] (503 + `Retry-After` for a rejection) and
//! [`status_json`]. The rest is the hyper glue, with what a proxy exposed to
//! real clients needs:
//!
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
//!   the count of the rest), which `--admin` moves to its own address (keep
//!   that one private: it has no authentication);
//! * **an argument parser**: `--help`; a bad argument prints the usage and
//!   exits with status 2; a route name given twice is an error;
//! * **stale answers while an upstream is open**: the last good answer to
//!   each idempotent `GET` is kept (a bounded cache: [`Settings::stale_entries`]
//!   entries of at most [`Settings::stale_max_body`] bytes), and a `GET` the
//!   breaker rejects is answered from it through a [`FallbackLayer`], marked
//!   stale (`x-failfast: fallback`, `Cache-Status`, `Age`: see
//!   [`mark_stale`]); anything else rejected is a 503 with `Retry-After`.
//! * **trips shared with other proxies** (`--redis URL`, feature `redis`):
//!   the layer's transition hook reports local trips into an
//!   [`Outbox`](failfast::share::Outbox), and a `RedisSync` task publishes
//!   them and applies the other proxies' (the request path never waits on
//!   Redis). Both proxies of the `--demo` lines above route to upstreams of
//!   their own, so each shares trips of different authorities; give them the
//!   same `--route` to see one proxy's trip reject on the other.
//!
//! The end-to-end test (`tests/e2e_proxy.rs`) includes this file as a
//! module and covers each of these.

#![allow(dead_code)] // `tests/e2e_proxy.rs` includes this file and uses part of it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use failfast::share::Outbox;
use failfast::tower::{
    error_response, mark_stale, status_json, DownstreamBody, Fallback, FallbackLayer,
    HttpClassifier, Keyed, KeyedLayer, Recover,
};
use failfast::{Breaker, Builder, DownstreamError, DownstreamKind, Fault, Registry, Transition};
use http::uri::{Authority, Scheme, Uri};
use http::HeaderValue;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tower::{Layer, ServiceExt};

type Body = BoxBody<Bytes, hyper::Error>;
/// A client's request body as it goes upstream: its errors, stalls and
/// excess marked as the client's, so they never count against an upstream.
type Upload = DownstreamBody<Incoming>;
type Breakers =
    Keyed<Client<HttpConnector, Upload>, Authority, failfast::tower::AuthorityKey, HttpClassifier>;
/// The breakers, their answers' bodies boxed, and the stale answers in front.
type Upstreams = Fallback<
    tower::util::MapResponse<Breakers, fn(Response<Incoming>) -> Response<Body>>,
    StaleAnswers,
>;

/// Where the status page answers.
pub const STATUS_PATH: &str = "/_failfast";
/// The longest URI forwarded upstream; longer ones get `414 URI Too Long`
/// (8 KiB, as common servers allow for a request line).
pub const MAX_URI: usize = 8 * 1024;
/// The longest the accept loop waits after a failed `accept`.
pub const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);
const MIN_ACCEPT_BACKOFF: Duration = Duration::from_millis(5);
/// How many transitions [`Proxy::transitions`] keeps (the most recent).
const KEPT_TRANSITIONS: usize = 1024;

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
    /// The most upstreams the status page shows (and its default).
    pub status_limit: usize,
    /// Whether the status page is on its own (admin) listener only.
    pub admin_listener: bool,
    /// Whether transitions are printed.
    pub verbose: bool,
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
            status_limit: 100,
            admin_listener: false,
            verbose: false,
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
    /// The most recent transitions the layer saw, with their upstream.
    pub transitions: Mutex<VecDeque<(String, Transition)>>,
    /// The knobs it was built with.
    pub settings: Settings,
    /// The last good answer of each `GET`, for when its upstream is open.
    pub stale: Arc<StaleCache>,
    /// Where the layer reports local trips, if they are shared.
    pub outbox: Option<Arc<Outbox>>,
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
                    if let Some(outbox) = &proxy.outbox {
                        // Only local trips are kept; one lock-free push.
                        outbox.report(upstream, t);
                    }
                    if proxy.settings.verbose {
                        eprintln!("{upstream}: {} -> {} ({})", t.from, t.to, t.reason);
                    }
                    let mut kept = proxy.transitions.lock().unwrap_or_else(|p| p.into_inner());
                    if kept.len() == KEPT_TRANSITIONS {
                        kept.pop_front();
                    }
                    kept.push_back((upstream.to_owned(), *t));
                }
            })
            .layer(client);
        let stale = Arc::new(StaleCache::new(
            settings.stale_entries,
            settings.stale_max_body,
        ));
        let boxed: fn(Response<Incoming>) -> Response<Body> = |r| r.map(|body| body.boxed());
        let service = FallbackLayer::from_recover(StaleAnswers(stale.clone()))
            .layer(tower::util::MapResponse::new(service, boxed));
        Proxy {
            routes,
            registry,
            transitions: Mutex::new(VecDeque::new()),
            settings,
            stale,
            outbox,
            service,
        }
    }))
}

/// What a listener answers.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Role {
    /// Routes, and the status page unless an admin listener has it.
    Main,
    /// The status page only.
    Admin,
}

/// Serves the routes on `listener` until the runtime stops.
pub async fn serve(listener: TcpListener, proxy: Arc<Proxy>) {
    accept_loop(listener, proxy, Role::Main).await
}

/// Serves the status page (only) on `listener` until the runtime stops.
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

async fn accept_loop(listener: TcpListener, proxy: Arc<Proxy>, role: Role) {
    let mut backoff = Duration::ZERO;
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(err) if is_connection_error(&err) => continue,
            Err(err) => {
                // EMFILE, ENFILE, ENOBUFS, ENOMEM: the same call would fail
                // again at once. Wait for connections to close instead.
                if backoff.is_zero() {
                    eprintln!("accept: {err}; backing off (up to {MAX_ACCEPT_BACKOFF:?})");
                }
                backoff = (backoff * 2).clamp(MIN_ACCEPT_BACKOFF, MAX_ACCEPT_BACKOFF);
                tokio::time::sleep(backoff).await;
                continue;
            }
        };
        if !backoff.is_zero() {
            eprintln!("accept: recovered");
            backoff = Duration::ZERO;
        }
        let proxy = proxy.clone();
        tokio::spawn(async move {
            let header_timeout = proxy.settings.header_timeout;
            let service = hyper::service::service_fn(move |req| handle(req, proxy.clone(), role));
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
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
    req: Request<Incoming>,
    proxy: Arc<Proxy>,
    role: Role,
) -> Result<Response<Body>, Infallible> {
    let status_here = match role {
        Role::Admin => true,
        Role::Main => !proxy.settings.admin_listener,
    };
    if req.uri().path() == STATUS_PATH && status_here {
        return Ok(status_page(req.uri().query(), &proxy));
    }
    if role == Role::Admin {
        return Ok(text(
            StatusCode::NOT_FOUND,
            "the admin address serves /_failfast only\n",
        ));
    }
    Ok(forward(req, &proxy).await)
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
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The upstream URI for `/{route}/{rest}?{query}`, or the answer to give
/// instead (404 no such route, 414 too long, 400 unparsable).
fn upstream_uri(proxy: &Proxy, uri: &Uri) -> Result<Uri, (StatusCode, &'static str)> {
    let mut parts = uri.path().trim_start_matches('/').splitn(2, '/');
    let route = parts.next().unwrap_or_default();
    let rest = parts.next().unwrap_or_default();
    let Some(authority) = proxy.routes.get(route) else {
        return Err((StatusCode::NOT_FOUND, "no such route\n"));
    };
    let query = uri.query();
    let len = "http://".len()
        + authority.as_str().len()
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
        .authority(authority.clone())
        .path_and_query(path_and_query)
        .build()
        .map_err(|_| (StatusCode::BAD_REQUEST, "bad request URI\n"))
}

async fn forward(mut req: Request<Incoming>, proxy: &Proxy) -> Response<Body> {
    match upstream_uri(proxy, req.uri()) {
        Ok(uri) => *req.uri_mut() = uri,
        Err((status, why)) => return text(status, why),
    }
    req.headers_mut().remove(http::header::HOST);
    let settings = &proxy.settings;
    let req = req.map(|body| {
        DownstreamBody::new(body)
            .idle_timeout(settings.body_timeout)
            .max_bytes(settings.max_body)
    });
    let key = stale_key(&req);
    match proxy.service.clone().oneshot(req).await {
        Ok(response) => match key {
            Some(key) => proxy.stale.keep(key, response).await,
            None => response,
        },
        Err(err) => match error_response(&err, || {
            Full::new(Bytes::new())
                .map_err(|never| match never {})
                .boxed()
        }) {
            Some(response) => response, // 503 + Retry-After, or 504
            None => failed_call(&err),
        },
    }
}

/// The answer to a call that failed: the client's fault (its body broke,
/// stalled or was too large: neutral for the breaker) as a 4xx, the
/// proxy's own (out of file descriptors: neutral too) as a 503, the
/// upstream's as a 502.
fn failed_call(err: &tower::BoxError) -> Response<Body> {
    let status = match Fault::of(&**err) {
        Fault::Downstream => match downstream_kind(err) {
            Some(DownstreamKind::Stalled(_)) => StatusCode::REQUEST_TIMEOUT,
            Some(DownstreamKind::TooLarge(_)) => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::BAD_REQUEST,
        },
        Fault::Local => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::BAD_GATEWAY,
    };
    text(status, format!("{err}\n"))
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
// Stale answers

/// The cache key of a request whose answer may be kept: its upstream URI, for
/// a `GET` (idempotent: its last good answer stands in for a fresh one).
fn stale_key<B>(req: &Request<B>) -> Option<String> {
    (req.method() == http::Method::GET).then(|| req.uri().to_string())
}

/// A kept answer: its head, its whole body, and when it was fresh.
struct Kept {
    status: StatusCode,
    headers: http::HeaderMap,
    body: Bytes,
    stored: Instant,
}

/// The last good answer of each `GET`, bounded: at most `entries` answers
/// (the oldest key goes first), each body at most `max_body` bytes.
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

    /// Keeps a fresh `200` answer to `key` (unless too large, stale itself,
    /// or marked `no-store`) and gives it back, its body read whole when
    /// kept.
    async fn keep(&self, key: String, response: Response<Body>) -> Response<Body> {
        let fits = hyper::body::Body::size_hint(response.body())
            .upper()
            .is_some_and(|n| n as usize <= self.max_body);
        let no_store = response
            .headers()
            .get_all(http::header::CACHE_CONTROL)
            .iter()
            .any(|v| {
                v.to_str()
                    .is_ok_and(|v| v.contains("no-store") || v.contains("private"))
            });
        if self.entries == 0
            || response.status() != StatusCode::OK
            || failfast::tower::is_stale(&response)
            || no_store
            || !fits
        {
            return response;
        }
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
        };
        let mut guard = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let (map, order) = &mut *guard;
        if map.insert(key.clone(), kept).is_none() {
            order.push_back(key);
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

    /// The kept answer to `key`, marked stale, if there is one.
    fn answer(&self, key: &str, rejected: &failfast::Rejected) -> Option<Response<Body>> {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let kept = kept.0.get(key)?;
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

/// The proxy's fallback: a rejected `GET` answered from the stale cache; any
/// other rejection (a miss, another method) left to become a 503.
#[derive(Clone)]
pub struct StaleAnswers(Arc<StaleCache>);

impl Recover<Request<Upload>, Response<Body>> for StaleAnswers {
    type Memo = Option<String>;

    fn remember(&self, req: &Request<Upload>) -> Option<String> {
        stale_key(req)
    }

    fn answer(&self, key: Option<String>, rejected: &failfast::Rejected) -> Option<Response<Body>> {
        self.0.answer(&key?, rejected)
    }
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
forwarded to http://HOST:PORT/PATH.

options:
  --route NAME=HOST:PORT  forward /NAME/... to HOST:PORT; repeat for more
                          routes, each NAME once
  --demo                  start local upstreams and route to them: healthy,
                          slow (800 ms), failing (503), down (refused)
  --listen ADDR           where clients connect [default: 127.0.0.1:8080]
  --admin ADDR            serve the status page (/_failfast) here only
                          [default: on --listen]
  --timeout MS            per-call timeout [default: 5000]
  --body-timeout MS       fail a call whose request body sends nothing this
                          long, as the client's fault (408); shorter than
                          --timeout [default: 2000, or half of --timeout]
  --header-timeout MS     close a connection whose request head is not
                          complete by then [default: 10000]
  --idle-timeout MS       close pooled upstream connections idle this long
                          [default: 30000]
  --status-limit N        upstreams on the status page at most [default: 100]
  --redis URL             share trips with other proxies through Redis 7+
                          (redis://HOST:PORT/ or redis+unix:///PATH; needs
                          the example built with --features tower,redis)
  --replica NAME          this proxy's name among them [default: random]
  -h, --help              print this and exit

Addresses must be loopback: this is an example.
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
            ..Settings::default()
        },
        redis: None,
        replica: None,
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
                let (name, to) = spec
                    .split_once('=')
                    .filter(|(name, _)| valid_route_name(name))
                    .ok_or_else(|| {
                        format!("--route {spec:?}: expected NAME=HOST:PORT, NAME without '/'")
                    })?;
                let to: Authority = to
                    .parse()
                    .ok()
                    .filter(|a: &Authority| a.port().is_some())
                    .ok_or_else(|| format!("--route {spec:?}: {to:?} is not HOST:PORT"))?;
                if options.routes.insert(name.to_owned(), to).is_some() {
                    return Err(format!("--route {name} given twice"));
                }
            }
            "--timeout" => options.settings.timeout = millis(&arg, &value("MS")?)?,
            "--body-timeout" => body_timeout = Some(millis(&arg, &value("MS")?)?),
            "--header-timeout" => options.settings.header_timeout = millis(&arg, &value("MS")?)?,
            "--idle-timeout" => options.settings.idle_timeout = millis(&arg, &value("MS")?)?,
            "--status-limit" => {
                let n = value("N")?;
                options.settings.status_limit = n
                    .parse()
                    .map_err(|_| format!("--status-limit {n:?}: expected a number"))?;
            }
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

fn valid_route_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('/')
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

/// The breaker every upstream gets. Five calls in a row that clients gave
/// up on after 250 ms, with no answer between them, open it: a hung
/// upstream behind clients more impatient than the slow-call threshold.
pub fn template() -> Builder {
    Breaker::builder()
        .failure_rate(0.5)
        .slow_call_rate(0.5)
        .slow_call_threshold(Duration::from_millis(500))
        .unanswered(5, Duration::from_millis(250))
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

async fn run(options: Options) -> io::Result<()> {
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
    let proxy = proxy(routes, template(), options.settings)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    #[cfg(feature = "redis")]
    if let (Some(url), Some(outbox)) = (&options.redis, &proxy.outbox) {
        share_trips(&proxy, outbox.clone(), url, options.replica.as_deref())?;
    }
    let listener = TcpListener::bind(options.listen).await?;
    eprintln!("failfast proxy on http://{}", listener.local_addr()?);
    let admin = match options.admin {
        Some(addr) => {
            let admin = TcpListener::bind(addr).await?;
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
    if let Some(admin) = admin {
        tokio::spawn(serve_admin(admin, proxy.clone()));
    }
    serve(listener, proxy).await;
    Ok(())
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
