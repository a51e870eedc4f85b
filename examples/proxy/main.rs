//! A real HTTP reverse proxy with one circuit breaker per upstream host,
//! written to be copied: what it does to a request, and why, is below.
//!
//! ```sh
//! # Start four local upstreams (healthy, slow, failing, down) and the proxy:
//! cargo run --example proxy --features tower,serde -- --demo
//! curl -i localhost:8080/slow/       # 200 after 800 ms ... then 503 + Retry-After, at once
//! curl -s localhost:8080/_failfast   # the breakers, as JSON (open ones first, 100 at most)
//! # Route to your own (loopback) upstreams, status and metrics on their own address:
//! cargo run --example proxy --features tower,serde,metrics -- --listen 127.0.0.1:8080 \
//!     --route api=127.0.0.1:9001 --route auth=127.0.0.1:9002 --admin 127.0.0.1:9900
//! curl -s 127.0.0.1:9900/metrics     # Prometheus text (feature `metrics`)
//! cargo run --example proxy --features tower,serde -- --help
//! # Two proxies sharing trips through Redis (feature `redis`):
//! cargo run --example proxy --features tower,serde,redis -- --demo --redis redis://127.0.0.1:6379/
//! cargo run --example proxy --features tower,serde,redis -- --demo --listen 127.0.0.1:8081 \
//!     --redis redis://127.0.0.1:6379/
//! ```
//!
//! `GET /{route}/{path}` is forwarded to `http://{upstream}/{path}`. The
//! breaking is the library's: [`KeyedLayer`] (a breaker per upstream, from
//! a [`Registry`] of [`HostKey`]s: its `host:port` normal form), [`HttpClassifier`] (5xx, 429, timeouts
//! and connection errors fail; other 4xx are ignored), a per-call timeout,
//! [`DownstreamBody`] (a client's broken, stalled or oversized upload is the
//! client's fault: 400, 408 or 413, neutral for the breaker, as is the
//! proxy's own shortage of file descriptors: 503), [`error_response`] (503 +
//! `Retry-After` for a rejection) and [`status_json`]. The rest is the hyper
//! glue, with what a proxy exposed to real clients needs:
//!
//! * **the breakers configured from the command line or a file**: the
//!   crate's serde configuration ([`RegistryConfig`](failfast::config::RegistryConfig))
//!   from `--config FILE` (a `[breaker]` template, `[hosts."HOST:PORT"]`
//!   overrides, the registry's settings), and any field of the template
//!   with `--breaker KEY=VALUE`. The default template ([`TEMPLATE`]) sets
//!   only the trip conditions; the open period, its backoff, the unanswered
//!   rule and `abandoned_after` are the library's defaults, so the proxy
//!   recovers on the library's schedule. `--no-breakers` sends every call
//!   straight through (the same call timeout), to measure what the breakers
//!   cost;
//! * **a call timeout that fits the callers' patience** (`--timeout`,
//!   default [`DEFAULT_TIMEOUT`], 900 ms): set just below the callers' own
//!   timeout, a slow upstream's call ends as a 504 the caller can act on
//!   and the breaker counts as a failure, instead of the caller giving up
//!   first;
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
//!   time=… client=… method=… path="…" route=… upstream=… status=…
//!   duration_ms=… decision=…`), with its UTC time to the millisecond, the
//!   path without its query (which may carry secrets), the duration up to
//!   the answer's head; the decision is one of `admitted`, `rejected`,
//!   `fallback`, `overloaded`, `client-fault`, `local-fault` ([`Decision`]),
//!   `not-forwarded` (no such route, a bad URI, a page of the proxy's own),
//!   or `abandoned` (status 499: the client went away before its answer;
//!   the line is written when hyper drops the request's future). Breaker
//!   transitions get a `transition time=… upstream=… from=… to=… reason=…`
//!   line. The lines are buffered and written by a thread of their own, at
//!   most one `write(2)` per 20 ms under load ([`access_log`]);
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
//! * **an upstream client of its own** ([`UpstreamClient`]), on hyper's
//!   connection API: a bounded pool of idle keep-alive connections per
//!   upstream and worker, closed after `--idle-timeout`, a pooled
//!   connection checked before use (and the request sent once more on a
//!   new one if the upstream had closed it);
//! * **a thread per CPU** (`--workers`), each with a single-threaded
//!   runtime accepting from the one listening socket, as nginx's workers
//!   do: a request never changes threads (see [`run`](mod@run));
//! * **a bounded status page** (`?limit=N`, capped by `--status-limit`, with
//!   the count of the rest), which `--admin` moves to its own address with
//!   `/metrics` (keep that one private: it has no authentication);
//! * **an argument parser**: `--help`; a bad argument prints the usage and
//!   exits with status 2; a route name given twice is an error;
//! * **stale answers while an upstream is open, never someone else's**,
//!   for the routes named with `--stale ROUTE` only (off by default: a
//!   price minutes old at checkout is worse than a 503), at most
//!   `--stale-max-age` old (default 60 s): the
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

mod access_log;
#[macro_use]
mod breakers;
mod cli;
mod client;
mod demo;
mod fnv;
mod forward;
mod headers;
mod peer;
mod prometheus;
mod run;
mod server;
mod stale;

pub use access_log::*;
pub use breakers::*;
pub use cli::*;
pub use client::*;
pub use demo::*;
pub use fnv::*;
pub use forward::*;
pub use headers::*;
pub use peer::*;
pub use prometheus::*;
pub use run::*;
pub use server::*;
pub use stale::*;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use failfast::registry::HostKey;
use failfast::share::Outbox;
use failfast::tower::{
    error_response, is_stale, mark_stale, status_json, DownstreamBody, Fallback, FallbackLayer,
    HttpClassifier, Keyed, KeyedLayer, Recover, TimedOut, X_FAILFAST,
};
use failfast::{
    Builder, Bulkhead, BulkheadPermit, DownstreamError, DownstreamKind, Fault, Registry,
    RegistryBuilder, Rejected, Transition,
};
use http::header::{self, HeaderName};
use http::uri::{Authority, Scheme, Uri};
use http::{HeaderMap, HeaderValue, Method, Version};
use http_body_util::{combinators::BoxBody, BodyExt, Either, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tower::{Layer, ServiceExt};

type Body = BoxBody<Bytes, hyper::Error>;
/// A client's request body as it goes upstream: its errors, stalls and
/// excess marked as the client's, so they never count against an upstream.
/// `Right` is the empty body of a request the client sends again.
type Upload = DownstreamBody<Either<Incoming, Empty<Bytes>>>;
/// One breaker per upstream, keyed by its `host:port` normal form.
pub(crate) type Breakers =
    Keyed<UpstreamClient, HostKey, failfast::tower::AuthorityKey<HostKey>, HttpClassifier>;
/// The breakers, their answers' hop-by-hop headers removed and bodies
/// boxed, and the stale answers in front.
pub(crate) type Guarded = Fallback<
    tower::util::MapResponse<Breakers, fn(Response<Pooled>) -> Response<Body>>,
    StaleAnswers,
>;

/// How calls reach the upstreams: through the breakers, or (`--no-breakers`,
/// for measuring what they cost) straight through the client with the same
/// call timeout.
#[derive(Clone)]
#[allow(clippy::large_enum_variant)] // one per proxy, never moved
pub(crate) enum Upstreams {
    Guarded(Guarded),
    Unguarded(UpstreamClient),
}

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
/// The call timeout by default: answer 504 at 900 ms, just before a caller
/// with a 1 s timeout gives up (Hystrix's and Resilience4j's `TimeLimiter`'s
/// default). A caller that gives up first gets nothing it can act on, and a
/// proxy that waits longer holds a connection for nobody. Set it just
/// below your callers' own timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(900);
/// The calls in flight to one upstream by default (Envoy's default per
/// cluster).
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1024;

/// The proxy's knobs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The per-call timeout (a timed-out call is a failure, and slow).
    pub timeout: Duration,
    /// Whether calls go through the breakers (off only to measure them).
    pub breakers: bool,
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
    /// The threads that serve clients, each with its runtime and its own
    /// idle upstream connections (see [`run`](mod@run)).
    pub workers: usize,
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
    /// The routes whose `GET`s may be answered stale while their upstream
    /// is open (none by default: a stale price at checkout is worse than a
    /// 503).
    pub stale_routes: Vec<String>,
    /// The oldest a stale answer may be.
    pub stale_max_age: Duration,
    /// The largest body the stale cache keeps, in bytes.
    pub stale_max_body: usize,
    /// Whether local trips go into [`Proxy::outbox`] for a sync task to
    /// share with other proxies (`--redis`).
    pub share_trips: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            timeout: DEFAULT_TIMEOUT,
            breakers: true,
            body_timeout: DEFAULT_TIMEOUT / 2,
            max_body: 16 * 1024 * 1024,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            drain: Duration::from_secs(10),
            workers: default_workers(),
            status_limit: 100,
            admin_listener: false,
            verbose: false,
            access_log: false,
            stale_entries: 1024,
            stale_routes: Vec::new(),
            stale_max_age: Duration::from_secs(60),
            stale_max_body: 64 * 1024,
            share_trips: false,
        }
    }
}

fn main() {
    std::process::exit(main_with(std::env::args().skip(1)));
}
