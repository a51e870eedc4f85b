//! The guide: every way in, with a compiled example each, and what a
//! breaker does when you do not say. This module holds no code; the design
//! behind it is in [`docs`](crate::docs).
//!
//! # Integrations
//!
//! Each integration below is a few lines; the optional ones sit behind a Cargo
//! feature so the core stays runtime-free ([the features, what each adds and
//! pulls in](crate#feature-flags)):
//!
//! ```toml
//! [dependencies]
//! failfast = { version = "0.1", features = ["tower"] }
//! ```
//!
//! The minimum supported Rust version is **1.87** (set by `quanta`, the default
//! clock's dependency) for every feature; CI checks every dependency's declared
//! `rust-version` against it (`.ci/msrv.sh`).
//!
//! ## Plain permit API
//!
//! Ask, run, report. A permit dropped without a verdict is judged by how long it
//! was held (see "How every call ends" below) when the breaker can judge it: with
//! `abandoned_after`, a slow-call threshold or an unanswered rule set explicitly. Dropped early
//! it is neutral and frees a half-open probe slot at once, so a cancelled call
//! never wedges the breaker; dropped after `abandoned_after`, it counts against
//! the dependency. A breaker that sets none of these skips the clock, and every
//! drop is neutral.
//!
//! ```rust
//! use failfast::{Breaker, Outcome};
//! use std::time::Duration;
//!
//! let breaker = Breaker::builder()
//!     .consecutive_failures(3)
//!     .abandoned_after(Duration::from_secs(5)) // a call dropped after 5 s failed
//!     .build()?;
//! match breaker.try_acquire() {
//!     Ok(permit) => {
//!         let status = 503; // ... make the call ...
//!         permit.record(if status >= 500 { Outcome::Failure } else { Outcome::Success });
//!     }
//!     Err(rejected) => println!("not called; retry after {:?}", rejected.retry_after()),
//! }
//! # Ok::<(), failfast::ConfigError>(())
//! ```
//!
//! ## Many upstream hosts: the `Registry`
//!
//! One breaker per host, created on first use, sharded, with no thread and no
//! timer: idle breakers are evicted lazily (never an open one), the number of
//! tracked hosts can be capped, and so can the number of open breakers across the
//! fleet (Envoy's max ejection percent). Keep the handle per upstream or
//! connection: each request then touches only that breaker's atomics.
//!
//! **Host names are `HostKey`s.** A `Registry<HostKey>` is looked up by `&str`
//! (`registry.handle_from("pay-1.internal:443")`), keeps each key's text (up to 23
//! bytes) inside its entry — about 141 bytes per host at a million hosts, where
//! a `Registry<String>` takes 173 (`benches/README.md`, "Registry") — and is the
//! registry the keyed tower layer and configuration files are built for.
//! Write a key in its normal form, `host:port` with the port written out and
//! the host in lowercase, as the keyed layer and the configuration do
//! (`failfast::authority::normalise` makes it from any spelling); the registry
//! itself compares keys byte for byte. Other keys (`u64`, a type of your own)
//! are kept as themselves.
//!
//! ```rust
//! use failfast::registry::HostKey;
//! use failfast::{Breaker, MaxOpen, Registry};
//!
//! let registry = Registry::<HostKey>::builder(Breaker::builder().consecutive_failures(5))
//!     .capacity(100_000)                   // hosts tracked at most
//!     .max_open(MaxOpen::Fraction(0.5))    // never eject more than half the fleet
//!     .build()?;
//!
//! let upstream = registry.handle_from("pay-1.internal:443"); // once per upstream
//! if let Ok(permit) = upstream.try_acquire() {           // per request: no map access
//!     permit.success();
//! }
//! assert_eq!((registry.len(), registry.open_count()), (1, 0));
//! # Ok::<(), failfast::ConfigError>(())
//! ```
//!
//! ## A bulkhead in front
//!
//! A `Bulkhead` caps calls in flight (one counter, no queue). Take it *before* the
//! breaker, so its rejections never enter the breaker's window:
//!
//! ```rust
//! use failfast::{Breaker, Bulkhead};
//!
//! let bulkhead = Bulkhead::new(20);
//! let breaker = Breaker::builder().consecutive_failures(3).build()?;
//! if let Ok(_slot) = bulkhead.try_acquire() {
//!     let _ = breaker.call(|| Ok::<_, ()>("priced"));
//! }
//! # Ok::<(), failfast::ConfigError>(())
//! ```
//!
//! ## `call`
//!
//! ```rust
//! use failfast::{Breaker, CallError, Outcome};
//!
//! let breaker = Breaker::builder().consecutive_failures(3).build()?;
//! // A declined card (402) proves the service is up: ignored, not a failure.
//! let classify = |r: &Result<u16, u16>| match r {
//!     Ok(_) => Outcome::Success,
//!     Err(code) if *code < 500 => Outcome::Ignored,
//!     Err(_) => Outcome::Failure,
//! };
//! let result = breaker.call_with(classify, || Err::<u16, u16>(402));
//! assert!(matches!(result, Err(CallError::Inner(402))));
//! # Ok::<(), failfast::ConfigError>(())
//! ```
//!
//! ## Tower layer (feature `tower`)
//!
//! `poll_ready` only forwards the inner service's readiness; `call` rejects at
//! once with `Rejected` (downcast it from `tower::BoxError`) without calling the
//! inner service. The permit rides in the response future; `HttpClassifier`
//! counts 5xx, 429, timeouts and connection errors as failures and other 4xx as
//! ignored; `timeout` records an expired call as a failure *and* a slow call.
//! A call whose own request body failed — a client gone mid-upload, an upload
//! cut by your server's idle or size limit — is neutral, with no body to wrap:
//! hyper's error says so, over HTTP/1.1 (see the `tower` module's "Who
//! failed"). Keep the idle limit below the layer's `timeout`.
//!
//! ```rust
//! # #[cfg(feature = "tower")] {
//! use failfast::tower::{FailFastLayer, HttpClassifier};
//! use failfast::{Breaker, Rejected};
//! use std::{sync::Arc, time::Duration};
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! let breaker = Arc::new(Breaker::builder().consecutive_failures(5).build()?);
//! let mut client = ServiceBuilder::new()
//!     .layer(
//!         FailFastLayer::new(breaker)
//!             .classify(HttpClassifier::new())
//!             .timeout(Duration::from_secs(2)),
//!     )
//!     .service_fn(|_req: http::Request<()>| async {
//!         Ok::<_, std::io::Error>(http::Response::new(()))
//!     });
//! # let _ = async move {
//! match client.ready().await?.call(http::Request::new(())).await {
//!     Ok(response) => println!("{}", response.status()),
//!     Err(e) if e.is::<Rejected>() => println!("failed fast: {e}"), // map to 503 + Retry-After
//!     Err(e) => println!("called and failed: {e}"),
//! }
//! # Ok::<(), tower::BoxError>(())
//! # };
//! # }
//! # Ok::<(), failfast::ConfigError>(())
//! ```
//!
//! ## gRPC, streaming bodies, tower-http classifiers (feature `tower`)
//!
//! A gRPC status usually arrives in the *trailers*, after the body; an HTTP body
//! can fail halfway. `classify_at_end` keeps the permit in the response body
//! (a `PermitBody`) until it ends: `GrpcClassifier` counts `UNAVAILABLE`,
//! `DEADLINE_EXCEEDED`, `RESOURCE_EXHAUSTED`, `UNKNOWN`, `INTERNAL` and
//! `DATA_LOSS` as failures and the caller's own errors (`NOT_FOUND`,
//! `INVALID_ARGUMENT`, ...) as ignored, from a trailers-only head or from the
//! trailers; a body error mid-stream is a failure; a body dropped while bytes
//! keep coming is neutral, one dropped after it stalled for `abandoned_after`
//! counts as abandoned (see "How every call ends"). Any
//! `tower_http::classify::ClassifyResponse` plugs in through
//! `FromTowerHttp` (feature `tower-http`).
//!
//! ```rust
//! # #[cfg(feature = "tower")] {
//! use failfast::tower::{FailFastLayer, GrpcClassifier};
//! use failfast::Breaker;
//! use std::sync::Arc;
//!
//! let breaker = Arc::new(Breaker::builder().failure_rate(0.5).min_calls(20).build()?);
//! // e.g. around a tonic `Channel`: tower::ServiceBuilder::new().layer(layer).service(channel)
//! let layer = FailFastLayer::new(breaker).classify_at_end(GrpcClassifier::new());
//! # let _ = layer;
//! # }
//! # Ok::<(), failfast::ConfigError>(())
//! ```
//!
//! Without tower (a hand-made client), take a permit and classify the
//! status yourself: `HttpClassifier::new().classify_status(response.status())`.
//! A reqwest client has its own middleware: see [reqwest](#reqwest-feature-reqwest).
//!
//! ## Keyed layer: one breaker per upstream host (feature `tower`)
//!
//! One client service fans out to many hosts; the key function (default: the URI
//! authority, else the `Host` header) picks each request's breaker in a
//! `Registry`. One open host never rejects another's calls while the registry
//! has room; past its `capacity`, new hosts share their shard's overflow
//! breaker (`SHARED_NAME` in hooks and snapshots) until room frees up. With
//! `name_rejections()` every `Rejected` names its host (`Rejected::upstream`,
//! and its `Display`); a `FailFastLayer` names its rejections with its
//! `upstream(..)` name.
//! `cargo run --example proxy --features tower,serde -- --demo` runs a real reverse
//! proxy built this way, answering 503 + `Retry-After` for an open upstream and
//! showing the breakers at `/_failfast` (open ones first, bounded; `--admin`
//! moves the page to its own address). It is written to be copied, and
//! `tests/e2e_proxy.rs` covers each of these:
//!
//! * the breakers come from `--config FILE` (the crate's `RegistryConfig`) or
//!   `--breaker KEY=VALUE`; the default template sets only the trip
//!   conditions and takes the library's recovery schedule; `--no-breakers`
//!   turns them off, to measure them; the call timeout is 900 ms, just below
//!   a caller that waits 1 s (`--timeout`; `--help` says how to choose it);
//! * on the routes named with `--stale ROUTE` (none by default), a rejected
//!   `GET` is answered with its last good answer (at most 60 s old), marked
//!   stale, but never someone else's: nothing is kept for a request with `Authorization`
//!   or `Cookie`, nor an answer that is `private`, `no-store` (or may not be
//!   served stale), sets a cookie, or `Vary`s on `*`, `Authorization` or
//!   `Cookie`;
//! * hop-by-hop headers (`Connection` and those it names, `Keep-Alive`,
//!   `Proxy-Authorization`, `Proxy-Authenticate`, `TE`, `Trailer`,
//!   `Transfer-Encoding`, `Upgrade`, `Proxy-Connection`) are removed both ways;
//!   the client's address is appended to `X-Forwarded-For`, and `Via` is added;
//! * a `Bulkhead` per upstream, taken before the breaker, caps the calls in
//!   flight (`--max-in-flight`, default 1,024): past it, 503 `x-failfast:
//!   overloaded`, which the breaker never counts;
//! * SIGTERM or SIGINT stops accepting, lets the requests in flight finish (up
//!   to `--drain`) and exits 0;
//! * one timestamped access-log line per request on stderr (route, upstream,
//!   status, duration, and the decision: `admitted`, `rejected`, `fallback`,
//!   `overloaded`, `client-fault`, `local-fault`, or `abandoned` with status
//!   499 when the client went away first), written in batches by a thread of
//!   its own; with `--features tower,serde,metrics`, Prometheus metrics at
//!   `/metrics`;
//! * a client's broken, stalled or oversized upload (400, 408, 413) and the
//!   proxy's own shortage of file descriptors (503) never count against an
//!   upstream;
//! * upstreams must be loopback unless `--allow-remote-upstreams`; a
//!   header-read timeout, accept back-off when file descriptors run out, 414
//!   instead of a panic on a huge URI, a pool timer so idle upstream
//!   connections close, and a real argument parser (`--help`).
//!
//! ```rust
//! # #[cfg(feature = "tower")] {
//! use failfast::registry::HostKey;
//! use failfast::tower::{HttpClassifier, KeyedLayer};
//! use failfast::{Breaker, Registry};
//! use std::sync::Arc;
//!
//! let registry = Arc::new(
//!     Registry::<HostKey>::builder(
//!         Breaker::builder().failure_rate(0.5).min_calls(20).count_window(50),
//!     )
//!     .build()?,
//! );
//! let client = tower::ServiceBuilder::new()
//!     .layer(
//!         KeyedLayer::new(registry.clone())
//!             .classify(HttpClassifier::new())
//!             // "api.example:443: circuit open; retry after 920ms"
//!             .name_rejections(),
//!     )
//!     .service_fn(|_req: http::Request<()>| async {
//!         Ok::<_, std::io::Error>(http::Response::new(()))
//!     });
//! # let _ = client;
//! # }
//! # Ok::<(), failfast::ConfigError>(())
//! ```
//!
//! ## Balancer layer (feature `tower`)
//!
//! Under `tower::balance`, an endpoint whose breaker is open is **`Pending`**
//! (never `Err`, which would make the balancer drop it for good), and is woken
//! when its probe time comes; the balancer simply picks another endpoint.
//! Its endpoints' breakers are standalone, so they are in no outlier pool (see
//! [Outliers](#outliers-each-host-against-its-pool)): to compare endpoints with
//! each other, key them in a `Registry` built with `outliers`.
//!
//! ```rust
//! # #[cfg(feature = "tower")] {
//! use failfast::tower::EjectLayer;
//! use failfast::Breaker;
//! use std::sync::Arc;
//! use tower::{load::Constant, Layer};
//!
//! let endpoints: Vec<_> = (0..3)
//!     .map(|i| {
//!         let breaker = Arc::new(Breaker::builder().consecutive_failures(5).build().unwrap());
//!         let endpoint = tower::service_fn(move |_req: ()| async move { Ok::<_, tower::BoxError>(i) });
//!         Constant::new(EjectLayer::new(breaker).layer(endpoint), 0)
//!     })
//!     .collect();
//! let balancer = tower::balance::p2c::Balance::new(tower::discover::ServiceList::new(endpoints));
//! # let _ = balancer;
//! # }
//! ```
//!
//! ## reqwest (feature `reqwest`)
//!
//! A `reqwest_middleware::Middleware` with one breaker per upstream host, from a
//! `Registry<HostKey>` keyed by the URL's `host:port` in the keyed layer's normal
//! form (`https://API.example/v1` is `api.example:443`). 5xx and 429 are
//! failures, other 4xx are ignored, a refused connection or a timeout is a
//! failure; a streaming upload that broke, or that your idle or size limit cut,
//! is neutral, with nothing to wrap; a dropped call is judged by its age, as in
//! the tower layers. A rejected request is not sent: the error is `Error::Middleware` holding a
//! `Rejected`. reqwest comes without default features (no TLS stack: your own
//! reqwest dependency picks one).
//!
//! ```rust
//! # #[cfg(feature = "reqwest")] {
//! use failfast::registry::HostKey;
//! use failfast::reqwest::BreakerMiddleware;
//! use failfast::{Breaker, Rejected, Registry};
//! use std::sync::Arc;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let registry = Arc::new(
//!     Registry::<HostKey>::builder(Breaker::builder().failure_rate(0.5).min_calls(20)).build()?,
//! );
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
//!     .with(BreakerMiddleware::new(registry.clone()))
//!     .build();
//!
//! registry.handle_from("api.example:443").force_open(); // as if it had tripped
//! let err = client.get("https://API.example/v1").send().await.unwrap_err();
//! let reqwest_middleware::Error::Middleware(err) = err else { panic!("{err}") };
//! let rejected: &Rejected = err.downcast_ref().expect("refused, nothing sent");
//! assert_eq!(rejected.upstream().unwrap().to_string(), "api.example:443");
//! # Ok::<(), failfast::ConfigError>(())
//! # })?;
//! # }
//! # Ok::<(), failfast::ConfigError>(())
//! ```
//!
//! ## pingora (recipe, no feature)
//!
//! A [pingora](https://github.com/cloudflare/pingora) proxy plugs a breaker per
//! upstream into its `ProxyHttp` trait (pingora 0.8; the signatures below are
//! pingora-proxy 0.8.1's). Each piece has one place:
//!
//! * **`upstream_peer`** takes the permit, keyed by the chosen upstream's
//!   `host:port` normal form (`Upstream.Example:443` is
//!   `upstream.example:443`, the key the keyed layer, the reqwest middleware and
//!   a configuration file's `[hosts."…"]` use). It is a timed, owned permit (the
//!   `Handle` inside keeps the entry from eviction), kept in the per-request
//!   `CTX`. A rejection answers 503 with `Retry-After` and returns an error
//!   before any connection is made; pingora's default `fail_to_proxy` sees the
//!   answer already written and sends nothing more.
//! * **`fail_to_connect`** records a failure: a refused or timed-out connection
//!   (or a failed TLS handshake) is the upstream's fault, unless the cause is
//!   this host's own shortage (out of file descriptors: `Fault::Local`,
//!   neutral). Marking the error retryable makes pingora call `upstream_peer`
//!   again, which here moves on to the next upstream, once per upstream; mark
//!   it non-retryable to answer 502 at once.
//! * **`upstream_response_filter`** classifies the final response head as
//!   `HttpClassifier` does (5xx and 429 failures, other 4xx ignored, the rest
//!   successes; a 1xx head is skipped) and records the verdict. The verdict is
//!   taken at the head: a body that breaks later is not counted.
//! * **`logging`** runs once per request, whatever happened. A permit still
//!   held there never got a head: an error from the upstream's side
//!   (`ErrorSource::Upstream`: a reset, a read timeout) is a failure; anything
//!   else (the client went away) drops the permit, judged by its age as the
//!   tower layers judge a dropped call: neutral when younger than
//!   `abandoned_after` (default: the slow-call threshold, else the probe lease,
//!   30 s), a failure (a slow call, with a slow-call rate) when older, since the
//!   upstream hung until the client gave up.
//! * `error_while_proxy` (an error after connecting) keeps pingora's default:
//!   its error reaches `logging`, and when pingora retries it on a new
//!   connection, `upstream_peer` replaces the permit (the first attempt's
//!   permit drops young, so neutral).
//!
//! A proxy that should skip an open upstream rather than answer 503 can try the
//! next upstream inside `upstream_peer`, or admit inside
//! `pingora-load-balancing`'s `LoadBalancer::select_with` accept hook.
//!
//! failfast has no pingora feature: pingora 0.8.1 with only its `proxy`
//! feature adds 94 crates, and C code (zlib-ng, which needs `cmake`, through
//! `flate2`'s `zlib-ng` feature, and `zstd-sys`), whatever TLS stack is chosen.
//! The recipe is compiled and run, outside failfast's own build, in
//! `incident/pingora` (in the repository) (its own workspace; CI
//! installs cmake and builds it), where the incident harness runs it against
//! nginx and HAProxy. There the admission sits in `request_filter` rather than
//! `upstream_peer`, so that a rejection is an answer and the client's
//! connection is kept (pingora's `fail_to_proxy` closes it); and its lockfile
//! keeps tokio below 1.54, which panics on the zero-capacity buffer pingora
//! 0.8.1 makes for each accepted connection. Add to your own crate:
//! `pingora = { version = "0.8", features = ["proxy"] }` (plus one of its TLS
//! features, `openssl`, `boringssl`, `rustls` or `s2n`, for TLS upstreams),
//! `async-trait = "0.1"`, and `failfast = { version = "0.1", features =
//! ["http"] }` (for `HttpClassifier` and `retry_after_secs`; no tower).
//!
//! ```rust,ignore
//! use std::net::SocketAddr;
//! use std::sync::Arc;
//!
//! use async_trait::async_trait;
//! use failfast::authority::{normalise, KeyBuf, DEFAULT_MAX_KEY_LEN};
//! use failfast::registry::HostKey;
//! use failfast::http::{retry_after_secs, HttpClassifier};
//! use failfast::{Fault, Handle, Outcome, OwnedPermit, QuantaClock, Registry};
//! use pingora::http::ResponseHeader;
//! use pingora::prelude::*; // ProxyHttp, Session, HttpPeer, Error, ErrorSource, ErrorType::*, Result
//!
//! /// One upstream: the `host:port` its breaker is keyed by, and where to connect.
//! pub struct Upstream {
//!     pub authority: String, // "Upstream.Example:443"
//!     pub addr: SocketAddr,  // from your resolver or service discovery
//!     pub tls: bool,
//!     pub sni: String,
//! }
//!
//! pub struct BreakerProxy {
//!     pub registry: Arc<Registry<HostKey>>,
//!     pub classifier: HttpClassifier,
//!     pub upstreams: Vec<Upstream>,
//! }
//!
//! /// The call in flight: it owns its registry entry and its admission time.
//! type UpstreamPermit = OwnedPermit<QuantaClock, Handle<HostKey>>;
//!
//! #[derive(Default)]
//! pub struct Ctx {
//!     /// The attempt in flight, until its verdict.
//!     permit: Option<UpstreamPermit>,
//!     /// Attempts made: a retry moves on to the next upstream.
//!     tries: usize,
//!     /// The breaker refused: answered 503, not an error worth a log line.
//!     rejected: bool,
//! }
//!
//! #[async_trait]
//! impl ProxyHttp for BreakerProxy {
//!     type CTX = Ctx;
//!
//!     fn new_ctx(&self) -> Ctx {
//!         Ctx::default()
//!     }
//!
//!     async fn upstream_peer(&self, session: &mut Session, ctx: &mut Ctx) -> Result<Box<HttpPeer>> {
//!         let upstream = &self.upstreams[ctx.tries % self.upstreams.len()];
//!         ctx.tries += 1;
//!         let mut buf = KeyBuf::new();
//!         let key = normalise(upstream.authority.as_bytes(), None, DEFAULT_MAX_KEY_LEN, &mut buf)
//!             .map_err(|e| Error::because(InternalError, "upstream without a host:port form", e))?;
//!         let handle = self.registry.handle_from(key);
//!         let now = handle.now();
//!         match OwnedPermit::acquire_at(handle, now) {
//!             // Timed: dropped without a verdict, it is judged by its age.
//!             Ok(permit) => ctx.permit = Some(permit),
//!             Err(rejected) => {
//!                 // Nothing is sent upstream: answer 503 now.
//!                 ctx.rejected = true;
//!                 let mut answer = ResponseHeader::build(503, Some(2))?;
//!                 if let Some(secs) = retry_after_secs(&rejected) {
//!                     answer.insert_header("Retry-After", secs)?;
//!                 }
//!                 answer.insert_header("Content-Length", 0)?;
//!                 session.write_response_header(Box::new(answer), true).await?;
//!                 let why = rejected.with_upstream(key).to_string(); // "upstream.example:443: circuit open; retry after 9.2s"
//!                 return Err(Error::explain(HTTPStatus(503), why));
//!             }
//!         }
//!         Ok(Box::new(HttpPeer::new(upstream.addr, upstream.tls, upstream.sni.clone())))
//!     }
//!
//!     fn fail_to_connect(
//!         &self,
//!         _session: &mut Session,
//!         _peer: &HttpPeer,
//!         ctx: &mut Ctx,
//!         mut e: Box<Error>,
//!     ) -> Box<Error> {
//!         if let Some(permit) = ctx.permit.take() {
//!             // Refused, timed out, TLS failed: the upstream's fault, unless the
//!             // cause is this host's own (out of file descriptors).
//!             let ours = e.cause.as_deref().is_some_and(|cause| !Fault::of(cause).is_upstream());
//!             permit.record(if ours { Outcome::Neutral } else { Outcome::Failure });
//!         }
//!         // Try the next upstream, once each; `false` answers 502 at once.
//!         e.set_retry(ctx.tries < self.upstreams.len());
//!         e
//!     }
//!
//!     async fn upstream_response_filter(
//!         &self,
//!         _session: &mut Session,
//!         upstream_response: &mut ResponseHeader,
//!         ctx: &mut Ctx,
//!     ) -> Result<()> {
//!         if upstream_response.status.is_informational() {
//!             return Ok(()); // a 1xx: the final head is still to come
//!         }
//!         if let Some(permit) = ctx.permit.take() {
//!             permit.record(self.classifier.classify_status(upstream_response.status));
//!         }
//!         Ok(())
//!     }
//!
//!     async fn logging(&self, _session: &mut Session, e: Option<&Error>, ctx: &mut Ctx) {
//!         // Still held: no response head came.
//!         if let Some(permit) = ctx.permit.take() {
//!             match e {
//!                 // A reset or a read timeout on the upstream's side.
//!                 Some(e) if *e.esource() == ErrorSource::Upstream => {
//!                     permit.failure();
//!                 }
//!                 // The client went away: judged by its age (`abandoned_after`).
//!                 _ => drop(permit),
//!             }
//!         }
//!     }
//!
//!     fn suppress_error_log(&self, _session: &Session, ctx: &Ctx, _error: &Error) -> bool {
//!         ctx.rejected // an open breaker refuses many requests: one log line each is noise
//!     }
//! }
//! ```
//!
//! The failfast half of the recipe, compiled and run here with plain values:
//!
//! ```rust
//! # #[cfg(feature = "http")] {
//! use failfast::authority::{normalise, KeyBuf, DEFAULT_MAX_KEY_LEN};
//! use failfast::registry::HostKey;
//! use failfast::http::{retry_after_secs, HttpClassifier};
//! use failfast::{Breaker, Clock, Fault, Handle, ManualClock, Outcome, OwnedPermit, QuantaClock, Registry};
//! use std::time::Duration;
//!
//! // pingora asks `CTX: Send + Sync`: the permit (and its handle) are.
//! type UpstreamPermit<C = QuantaClock> = OwnedPermit<C, Handle<HostKey, C>>;
//! fn send_sync<T: Send + Sync>() {}
//! send_sync::<Option<UpstreamPermit>>();
//!
//! let clock = ManualClock::new();
//! let registry = Registry::<HostKey>::builder(
//!     Breaker::builder()
//!         .consecutive_failures(2)
//!         .abandoned_after(Duration::from_secs(10))
//!         .open_duration(Duration::from_secs(30))
//!         .count_calls(true),
//! )
//! .build_with_clock(clock.clone())?;
//! let classifier = HttpClassifier::new();
//!
//! // upstream_peer: the key, then a timed, owned permit for the CTX.
//! let mut buf = KeyBuf::new();
//! let key = normalise(b"Upstream.Example:443", None, DEFAULT_MAX_KEY_LEN, &mut buf).unwrap();
//! assert_eq!(key, "upstream.example:443");
//! let handle = registry.handle_from(key);
//! let now = handle.now();
//! let permit: UpstreamPermit<ManualClock> = OwnedPermit::acquire_at(handle, now).unwrap();
//!
//! // upstream_response_filter: a 503 is a failure, a 404 is ignored.
//! let outcome = classifier.classify_status(http::StatusCode::SERVICE_UNAVAILABLE);
//! assert_eq!(outcome, Outcome::Failure);
//! assert_eq!(classifier.classify_status(http::StatusCode::NOT_FOUND), Outcome::Ignored);
//! permit.record(outcome);
//!
//! // fail_to_connect: a refused connection is the upstream's; out of file
//! // descriptors is ours (the cause is read as pingora's `Error::cause` holds it).
//! let cause: Box<dyn std::error::Error + Send + Sync> =
//!     Box::new(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
//! assert!(Fault::of(cause.as_ref()).is_upstream());
//! let cause: Box<dyn std::error::Error + Send + Sync> = Box::new(std::io::Error::from_raw_os_error(24));
//! assert!(!Fault::of(cause.as_ref()).is_upstream());
//!
//! // logging: a permit dropped young is neutral...
//! let handle = registry.handle_from(key);
//! drop(OwnedPermit::acquire_at(handle.clone(), clock.now()).unwrap());
//! // ...one held past `abandoned_after` (the client gave up on a hung upstream)
//! // counts as a failure: with the 503 above, two in a row, and the breaker opens.
//! let permit = OwnedPermit::acquire_at(handle.clone(), clock.now()).unwrap();
//! clock.advance(Duration::from_secs(11));
//! drop(permit);
//! let calls = handle.snapshot().calls.unwrap();
//! assert_eq!((calls.failures, calls.dropped, calls.abandoned), (1, 1, 1));
//!
//! // The next upstream_peer is refused: 503 with `Retry-After: 30`.
//! let rejected = OwnedPermit::acquire_at(registry.handle_from(key), clock.now()).unwrap_err();
//! assert_eq!(retry_after_secs(&rejected), Some(30));
//! assert_eq!(
//!     rejected.with_upstream(key).to_string(),
//!     "upstream.example:443: circuit open; retry after 30.0s"
//! );
//! # }
//! # Ok::<(), failfast::ConfigError>(())
//! ```
//!
//! ## tracing (feature `tracing`)
//!
//! One event per transition (INFO for trips and recoveries, DEBUG for
//! Open → HalfOpen), never per call: fields `upstream`, `from`, `to`, `reason`,
//! `generation`, `open_for_ms` and the counts that caused it. A transition hook
//! knows the upstream's name and hands it over, once per transition whatever
//! caused it (a verdict, a drop, a timeout, another replica's news, `force_open`):
//! `.on_transition(failfast::export::tracing::emit)` on a layer, a
//! `Registry` or a `Breaker`; `tests/hook_every_cause.rs` pins it.
//! For a breaker used without a layer, name it in an observer:
//!
//! ```rust
//! # #[cfg(feature = "tracing")] {
//! use failfast::export::tracing::TracingObserver;
//! use failfast::Breaker;
//!
//! let breaker = Breaker::builder()
//!     .consecutive_failures(3)
//!     .observer(TracingObserver::new().upstream("payments"))
//!     .build()?;
//! # let _ = breaker;
//! # }
//! # Ok::<(), failfast::ConfigError>(())
//! ```
//!
//! ## metrics (feature `metrics`)
//!
//! Read at scrape time from the breakers' own atomics — no label hashing per
//! call: `circuit_breaker_state{upstream,state}`,
//! `circuit_breaker_calls_total{upstream,outcome}` (with `count_calls(true)`),
//! `circuit_breaker_failure_ratio`, `circuit_breaker_slow_call_ratio`,
//! `circuit_breaker_ramp_admitted_ratio` and `circuit_breaker_backoff_step`
//! (see [Recovery](#recovery-slow-start-the-half-open-rate-rule-upstream-hints-decaying-backoff)), and the
//! registry aggregates `circuit_breaker_open`, `circuit_breaker_half_open`,
//! `circuit_breaker_tracked` and `circuit_breaker_registry_calls_total{outcome}`
//! (lifetime totals: evicted and removed breakers stay counted); per-host series
//! are opt-in. A replica that shares trips exports its counters with
//! `stats.export_metrics()`: `circuit_breaker_sync_{published,errors,dropped,received,applied,...}_total`. Transitions are counted
//! as they happen in `circuit_breaker_transitions_total{from,to,reason}`.
//!
//! ```rust
//! # #[cfg(feature = "metrics")] {
//! use failfast::export::metrics::{MetricsExporter, MetricsObserver};
//! use failfast::registry::HostKey;
//! use failfast::{Breaker, Registry};
//!
//! let registry = Registry::<HostKey>::builder(
//!     Breaker::builder().consecutive_failures(5).count_calls(true).observer(MetricsObserver),
//! )
//! .build()?;
//! let _upstream = registry.handle_from("api.internal:443");
//! // In the scrape handler, before rendering:
//! MetricsExporter::new().export_registry(&registry); // aggregates
//! MetricsExporter::new().per_host(true).export_registry(&registry); // + per host
//! # }
//! # Ok::<(), failfast::ConfigError>(())
//! ```
//!
//! ## Configuration from a file (feature `serde`)
//!
//! `failfast::config::{BreakerConfig, RegistryConfig}` are the builders' knobs
//! as plain data, for TOML, YAML or JSON through serde. `to_builder()` checks
//! them exactly as `build()` does — a bad value gives the builder's own
//! `ConfigError`, and one in a host's table names the host. Durations are text
//! (`"500ms"`, `"30s"`, `"5m"`, `"1h30m"`); a `preset` (`"envoy"` or
//! `"resilience4j"`) is a start that the other fields override; each
//! `[hosts."…"]` table is laid over `[breaker]` field by field. For a registry
//! of `HostKey`s, each `[hosts."…"]` key is normalised as the keyed layer
//! normalises requests (`"API.Example:443"` names the breaker of
//! `api.example:443`), and a key without a port, one that is not a host name
//! or an IP address, or two spellings of one host are refused by name. The
//! full schema is in the `config` module's docs.
//!
//! ```rust
//! # #[cfg(feature = "serde")] {
//! use failfast::config::RegistryConfig;
//! use failfast::registry::HostKey;
//!
//! let config: RegistryConfig = toml::from_str(r#"
//!     capacity = 100000             # hosts tracked at most
//!     idle_ttl = "10m"
//!     max_open = { fraction = 0.5 } # never eject more than half the fleet
//!
//!     [breaker]                     # every host's breaker
//!     failure_rate = 0.5
//!     slow_call_rate = 0.5
//!     slow_call_threshold = "500ms"
//!     count_window = 20
//!     min_calls = 10
//!     open_duration = "10s"
//!     backoff = { multiplier = 2.0, cap = "5m" }
//!     ramp = { window = "30s" }     # slow start after each recovery (see Recovery)
//!     max_hint = "2m"               # an upstream's Retry-After may hold it open up to 2 min
//!
//!     [hosts."Payments.Internal:443"]   # this host's own, over [breaker]
//!     consecutive_failures = 3
//!     backoff = "off"
//!     ramp = "off"
//! "#).expect("valid TOML");
//! let registry = config.to_builder::<HostKey>()?.build()?;
//! let pay = registry.handle_from("payments.internal:443"); // the normal form
//! assert_eq!(pay.config().consecutive_failures(), Some(3));
//! assert_eq!(pay.config().failure_rate(), Some(0.5)); // from [breaker]
//! assert_eq!(pay.config().ramp(), None);
//! assert!(registry.handle_from("search.internal:443").config().ramp().is_some());
//!
//! let bad: RegistryConfig = toml::from_str(r#"
//!     [breaker]
//!     consecutive_failures = 5
//!     [hosts."api.example:443"]
//!     failure_rate = 1.5
//! "#).expect("valid TOML");
//! assert_eq!(
//!     bad.to_builder::<HostKey>().unwrap_err().to_string(),
//!     r#"invalid failfast config for key "api.example:443": failure_rate = 1.5; allowed: (0, 1]"#,
//! );
//! let bad: RegistryConfig = toml::from_str(r#"
//!     [breaker]
//!     consecutive_failures = 5
//!     [hosts."db.internal"]
//!     consecutive_failures = 3
//! "#).expect("valid TOML");
//! assert!(bad.to_builder::<HostKey>().unwrap_err().to_string().contains(
//!     r#"hosts = "db.internal" (no port: write "db.internal:443" for https, "db.internal:80" for http)"#,
//! ));
//! # }
//! # Ok::<(), failfast::ConfigError>(())
//! ```
//!
//! # Defaults
//!
//! What a setting is when you do not set it. `build()` checks every value and
//! names the field and its allowed range in a `ConfigError`.
//!
//! | setting | default |
//! |---|---|
//! | trip condition (`consecutive_failures`, `failure_rate`, `slow_call_rate`, `unanswered`) | none: at least one is required (the default unanswered rule is not one) |
//! | window (with a rate and no window) | a count window of 100 calls |
//! | `min_calls` | 10, or the count window's size if smaller |
//! | `slow_call_threshold` | none (no call is slow) |
//! | `half_open_probes` | 1 |
//! | `open_duration` | 1 s, doubling per trip in a row (`backoff`) up to 3 × the base: 1, 2, 3 s. Replayed over slow, hung, 503 and refusing upstreams down 10 s to 30 min at 100 calls/s, the first call gets through at most 4.0 s after the upstream is back (3.0 s if it failed fast; the old 30 s doubling to 5 min: up to 159 s), and the sick host gets at most 0.41 calls per second of the outage ([the design docs](https://docs.rs/failfast/latest/failfast/docs/index.html#the-default-schedule) have the table). The old schedule: `open_schedule(30 s, 2.0, 5 min)` |
//! | backoff step | stops at the cap step, so `cap step × base` of health brings the base back |
//! | `jitter` | 0 (no jitter) |
//! | `probe_lease` | the base open duration, at least 30 s |
//! | `abandoned_after` | the slow-call threshold, else the probe lease |
//! | unanswered rule (`unanswered`, `unanswered_off`) | on where the admission reads the clock (the layers, `call_async`, the reqwest middleware, `_at(now)`, probes, a slow-call threshold): 20 calls in a row given up unanswered, each after 250 ms or half the shorter of the slow-call threshold and `abandoned_after` |
//! | `count_calls` | off |
//! | `ramp` (slow start after a recovery) | off; with a window, Envoy's curve: `min_fraction` 0.1, `aggression` 1.0 (a line) |
//! | half-open rate rule (`half_open_rate_rule`) | off: every probe must succeed fast; on, the closed state's rates (failure 50 % when it has none) |
//! | upstream hints | a tripping verdict's hint (`Retry-After`, gRPC pushback) sets the open period's floor, capped at 10 min, at no memory cost; `hints()` / `max_hint(d)` also remember hints that do not trip (one slot); `hints_off()` takes none |
//! | registry `capacity`, `max_open` | unlimited |
//! | registry `idle_ttl` / `forget_after` | 10 min / 1 h |
//! | registry `shards` | 256 |
//! | outlier pools (`Outliers::new()`) | Envoy's rules (10 s interval; success rate `mean − 1.9 stdev` over hosts with 100 calls, 5 hosts; failure percentage 85 % observed only; cap 10 %; panic below 50 %) **with evidence asked**: `significance` 10⁻⁶ (`Outliers::envoy()` or `significance_off()` for Envoy's rule alone) |
//! | outlier ejection time | Envoy's: 30 s × the times ejected, at most 300 s, one time forgiven per interval back (`ejection_time_of_breaker()` for the breaker's backoff) |
//!
//! ```rust
//! use failfast::{Breaker, Registry, WindowKind};
//! use std::time::Duration;
//!
//! let breaker = Breaker::builder().failure_rate(0.5).build()?;
//! let c = breaker.config();
//! assert_eq!(c.window(), WindowKind::Count { size: 100 });
//! assert_eq!(c.min_calls(), 10);
//! assert_eq!(c.slow_call_threshold(), None);
//! assert_eq!(c.half_open_probes(), 1);
//! assert_eq!(c.open_duration(1), Duration::from_secs(1));
//! assert_eq!(c.open_duration(2), Duration::from_secs(2));
//! assert_eq!(c.open_duration_cap(), Duration::from_secs(3));
//! assert_eq!(c.jitter(), 0.0);
//! assert_eq!(c.probe_lease(), Duration::from_secs(30));
//! assert_eq!(c.abandoned_after(), Duration::from_secs(30));
//! assert_eq!(c.unanswered(), Some((20, Duration::from_millis(250))));
//! let fitted = Breaker::builder().failure_rate(0.5).slow_call_threshold(Duration::from_millis(300)).build()?;
//! assert_eq!(fitted.config().unanswered(), Some((20, Duration::from_millis(150))));
//! assert!(!c.counts_calls());
//! assert_eq!(c.ramp(), None);
//! assert_eq!(c.half_open_rates(), None);
//! assert_eq!(c.max_hint(), Some(Duration::from_secs(600)));
//! assert!(!c.remembers_hints());
//! assert!(Breaker::builder().failure_rate(0.5).hints().build()?.config().remembers_hints());
//! assert_eq!(Breaker::builder().failure_rate(0.5).hints_off().build()?.config().max_hint(), None);
//! let old = Breaker::builder().failure_rate(0.5).open_schedule(Duration::from_secs(30), 2.0, Duration::from_secs(300)).build()?;
//! assert_eq!(old.config().open_duration(5), Duration::from_secs(300));
//! let ramped = Breaker::builder().failure_rate(0.5).ramp(Duration::from_secs(30)).half_open_rate_rule().build()?;
//! assert_eq!(ramped.config().ramp(), Some((Duration::from_secs(30), 0.1, 1.0)));
//! assert_eq!(ramped.config().half_open_rates(), Some((0.5, None)));
//! assert!(Breaker::builder().build().is_err(), "a trip condition is required");
//!
//! let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(5)).build()?;
//! assert_eq!((registry.capacity(), registry.shard_count()), (None, 256));
//! assert_eq!(registry.idle_ttl(), Duration::from_secs(600));
//! assert_eq!(registry.forget_after(), Duration::from_secs(3600));
//! let outliers = failfast::Outliers::new();
//! assert_eq!(outliers.get_interval(), Duration::from_secs(10));
//! assert_eq!(outliers.get_significance(), Some(1e-6));
//! assert_eq!(outliers.get_ejection_time(), Some((Duration::from_secs(30), Duration::from_secs(300))));
//! assert_eq!(failfast::Outliers::envoy().get_significance(), None);
//! # Ok::<(), failfast::ConfigError>(())
//! ```
//!
//! # Clocks
//!
//! A breaker reads its clock only where it needs the time: an admission outside
//! CLOSED, a timed call, a time window's write. Every such method has an
//! `_at(now)` twin, so a proxy can read the time once per event-loop turn and pass
//! it in. The clocks:
//!
//! | clock | reads | resolution | use |
//! |---|---|---|---|
//! | `QuantaClock` (the default) | the TSC (`quanta`'s raw read, scaled once), no upkeep thread | sub-ns | everything |
//! | `StdClock` | `std::time::Instant` | 1 ns | where the TSC is not trusted |
//! | `ManualClock` | a number you set | 1 ns | tests: every scenario test drives time by hand |
//! | `CoarseClock` (feature `coarse-clock`) | the kernel's `CLOCK_MONOTONIC_COARSE`, through the vDSO | the scheduler tick, 1–10 ms | many breakers, most of them rejecting: the cheapest rejection that reads the time |
//!
//! On the 2-vCPU virtual machine the benchmarks ran on, an OPEN rejection costs
//! 11.4 ns on `QuantaClock` and 7.3 ns on `CoarseClock`, whose read is 4.9 ns
//! against 11.5 ns for a TSC read and 28.9 ns for `Instant::now`
//! (`benches/README.md`, "A coarse clock"). A coarse clock's step is its
//! precision: an open period ends up to one step late, a call's duration is known
//! to one step, and a slow-call threshold or a time-window bucket shorter than one
//! step is refused at build with a `ConfigError` (`Clock::resolution`).
//!
//! # Seeing what the breaker did
//!
//! Transitions are one event each (above). To debug *one request* — was it
//! rejected, did it meet a half-open breaker, was it slow — the tower layers
//! record what the breaker did to each call, and a rejected call is never
//! shown as if it had reached the upstream.
//!
//! **On the request's span** (feature `tracing`, `.trace_calls(..)`): three
//! fields, and a fourth while the breaker ramps up after a recovery, recorded
//! on the current span (declare them) or on a span the layer opens
//! (`CallSpan::Own`, child of the current one, around the inner call):
//!
//! | field | values | name from |
//! |---|---|---|
//! | `circuitbreaker.name` | the layer's `upstream`, or the request's key | the OpenTelemetry semantic-conventions proposal for resilience attributes ([#2355](https://github.com/open-telemetry/semantic-conventions/issues/2355)) |
//! | `circuitbreaker.state` | the state met at admission: `closed`, `half_open`, `open`, `forced_open`, `disabled`, `metrics_only` | the same proposal (the values are ours: `State::as_str`) |
//! | `circuitbreaker.outcome` | `success`, `slow`, `failure`, `ignored`, `neutral` (failed by no fault of the upstream), `rejected`, `dropped` (the client went away early), `unanswered` (went away before any answer, after the unanswered rule's age), `abandoned` (went away after the call hung), `panicked` | ours (the proposal has none; `success`/`failure`/`rejected` as in OpenTelemetry's Java agent for Resilience4j) |
//! | `circuitbreaker.ramp_fraction` | while ramping up after a recovery (`ramp`): the share of calls the breaker admitted when the call met it, in (0, 1]; absent otherwise | ours |
//!
//! A rejected call gets `outcome = rejected` and an event *"rejected by circuit
//! breaker"* with `reason` (`open`, `half_open_full`, `forced_open`, `ramp`) and
//! `retry_after_ms`; the inner service is not called, so no client span or
//! remote attribute appears. At 50k rejections a second the event is **INFO at
//! most once per open period per breaker** and DEBUG for the rest
//! (`export::tracing::RejectionLog` says how, with no memory in the breaker).
//! With no subscriber interested, a call pays a span lookup and an `enabled!`
//! check.
//!
//! ```rust
//! # #[cfg(all(feature = "tower", feature = "tracing"))] {
//! use failfast::export::tracing::CallSpan;
//! use failfast::tower::{FailFastLayer, HttpClassifier};
//! use failfast::Breaker;
//! use std::sync::Arc;
//! use tower_http::trace::TraceLayer;
//!
//! let breaker = Arc::new(Breaker::builder().consecutive_failures(5).build()?);
//! let client = tower::ServiceBuilder::new()
//!     .layer(TraceLayer::new_for_http().make_span_with(|req: &http::Request<String>| {
//!         tracing::info_span!(
//!             "request",
//!             http.request.method = %req.method(),
//!             circuitbreaker.name = tracing::field::Empty,
//!             circuitbreaker.state = tracing::field::Empty,
//!             circuitbreaker.outcome = tracing::field::Empty,
//!         )
//!     }))
//!     .layer(
//!         FailFastLayer::new(breaker)
//!             .upstream("inventory")
//!             .classify(HttpClassifier::new())
//!             .trace_calls(CallSpan::Current),
//!     )
//!     .service_fn(|_req: http::Request<String>| async {
//!         Ok::<_, std::io::Error>(http::Response::new(String::new()))
//!     });
//! # let _ = client;
//! # }
//! # Ok::<(), failfast::ConfigError>(())
//! ```
//!
//! **In metrics** (feature `metrics`, `.call_metrics(..)`):
//! `circuit_breaker_rejected_total{upstream,reason}` for each rejected call,
//! `circuit_breaker_fallback_total{upstream}` for each rejection a fallback
//! answered, and opt-in `circuit_breaker_call_duration_seconds{upstream,outcome}`
//! from the permit's start (the layers always admit at a clock reading; with the
//! histogram off no clock read is added). At scrape time,
//! `circuit_breaker_open_age_seconds{upstream}` says how long the current open
//! period has lasted, and the transition hook counts
//! `circuit_breaker_open_seconds_total` (each open period's length, when it
//! begins). A keyed layer aggregates its hosts unless asked per host. Install
//! the recorder before building the layers (they register their handles then).
//!
//! ```rust
//! # #[cfg(all(feature = "tower", feature = "metrics"))] {
//! use failfast::export::metrics::{record_transition_per_host, CallMetrics, MetricsExporter};
//! use failfast::tower::{unavailable, FailFastLayer, FallbackLayer};
//! use failfast::Breaker;
//! use std::sync::Arc;
//!
//! let breaker = Arc::new(Breaker::builder().consecutive_failures(5).build()?);
//! let client = tower::ServiceBuilder::new()
//!     .layer(FallbackLayer::new(|rejected| Some(unavailable::<String>(rejected))).upstream("inventory"))
//!     .layer(
//!         FailFastLayer::new(breaker.clone())
//!             .upstream("inventory")
//!             .on_transition(record_transition_per_host) // transitions, open seconds
//!             .call_metrics(CallMetrics::new().call_duration(true)),
//!     )
//!     .service_fn(|_req: http::Request<String>| async {
//!         Ok::<_, std::io::Error>(http::Response::new(String::new()))
//!     });
//! // In the scrape handler: state, ratios, open age.
//! MetricsExporter::new().export_breaker("inventory", &breaker);
//! # let _ = client;
//! # }
//! # Ok::<(), failfast::ConfigError>(())
//! ```
//!
//! **In OpenTelemetry**: the span fields above become span attributes and the
//! rejection a span event through `tracing-opentelemetry`; swap the in-memory
//! exporter for OTLP. `examples/otel_spans.rs` runs this end to end (and
//! `tests/otel_export.rs` checks what it exports).
//!
//! ```rust
//! # #[cfg(feature = "tracing")] {
//! use opentelemetry::trace::TracerProvider as _;
//! use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
//! use tracing_subscriber::layer::SubscriberExt;
//!
//! let exporter = InMemorySpanExporter::default(); // your OTLP exporter here
//! let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
//! let subscriber = tracing_subscriber::registry()
//!     .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("my-service")));
//! tracing::subscriber::with_default(subscriber, || {
//!     // ... requests through a layer with `.trace_calls(CallSpan::Current)` ...
//! });
//! let spans = exporter.get_finished_spans().unwrap(); // attributes: circuitbreaker.*
//! # let _ = spans;
//! # }
//! ```
//!
//! ## Fallbacks that say so
//!
//! When the breaker rejects, answer from somewhere else — and say it is a
//! fallback. `Breaker::call_or_else` returns an `Answer`: `Fresh(value)` or
//! `Fallback { value, rejected }`. In tower, a `FallbackLayer` turns a
//! rejection into a response: `unavailable` (503 + `Retry-After`), or a cached
//! copy marked by `mark_stale` — `x-failfast: fallback`, `Cache-Status:
//! failfast; hit; detail=circuit-open` (RFC 9211) and `Age`, not the `Warning`
//! header RFC 9111 dropped. The proxy example, on the routes named with
//! `--stale ROUTE`, serves the last good answer of each anonymous `GET` whose
//! answer may be shared this way while its upstream is open (never one to or
//! from a request with credentials).
//!
//! ```rust
//! use failfast::{Answer, Breaker};
//!
//! let breaker = Breaker::builder().consecutive_failures(1).build()?;
//! breaker.force_open();
//! let answer = breaker.call_or_else(|| Ok::<_, ()>("live rates"), |_rejected| "cached rates");
//! match answer {
//!     Ok(Answer::Fresh(rates)) => println!("{rates}"),
//!     Ok(Answer::Fallback { value, rejected }) => println!("{value} (stale: {rejected})"),
//!     Err(()) => println!("the call ran and failed"),
//! }
//! # Ok::<(), failfast::ConfigError>(())
//! ```
//!
//! # Recovery: slow start, the half-open rate rule, upstream hints, decaying backoff
//!
//! How a breaker comes back, beyond "one probe, then everyone":
//!
//! * **Slow start** (`ramp(window)`, off by default). When a probe round
//!   closes the breaker, it admits a rising share of calls over `window` —
//!   Envoy's slow-start curve, from 10 % in a straight line by default
//!   (`ramp_curve(window, min_fraction, aggression)`) — and turns the rest away
//!   with `RejectReason::Ramp` and a retry time of one step of the curve. An
//!   upstream that has just come back, with cold caches, is not handed its whole
//!   backlog at once. A trip during the ramp is a failed recovery: the next
//!   backoff step. Which calls get in is decided with no RNG and no shared
//!   write (a per-thread turn), and the success path of a breaker that is not
//!   ramping is unchanged.
//! * **The half-open rate rule** (`half_open_rate_rule()`, opt-in). A round of
//!   `half_open_probes(P)` probes closes unless its probes' failure rate (or
//!   slow-call rate) reaches a threshold — the closed state's by default, or
//!   `half_open_failure_rate(r)` / `half_open_slow_call_rate(r)` — instead of
//!   needing every probe to succeed, so one flaky probe in ten does not keep a
//!   recovered upstream out. P is at most 31 under the rule.
//! * **The upstream's hints** (on by default for the verdict that trips).
//!   A verdict recorded with `Permit::record_hinted(outcome, Some(d))` (a
//!   `Retry-After`, a gRPC pushback: the layers and the reqwest middleware pass
//!   them on) that trips the breaker, or fails its probe, opens it for at least
//!   `d`, clamped between the schedule's period and 10 min (`max_hint(d)` sets
//!   the cap): the hint travels with the verdict and costs nothing. `hints()`
//!   also remembers the hint of a verdict that does not trip, for the next
//!   trip (one 8-byte slot); `hints_off()` takes none. A hint never rejects
//!   while the breaker is closed.
//! * **Backoff that decays.** A close keeps the backoff step; each base open
//!   duration of healthy time since (ramp included) takes one step off, as
//!   Envoy's ejection time does, and the step stops counting at the cap's, so
//!   `cap step × base` of health brings the base back however long a host
//!   flapped. A host that flaps keeps its longer open periods; one that stays
//!   healthy returns to the base. A breaker whose step has not decayed back is
//!   not pristine, so the registry does not evict it early.
//! * **A short default schedule** (1, 2, 3 s; see [Defaults](#defaults)): an
//!   open breaker sends one probe per period, so a long period spares a sick
//!   host almost nothing and keeps the callers of a recovered one waiting.
//!
//! Each shows in snapshots (`ramp_fraction`, `backoff_step`), metrics
//! (`circuit_breaker_ramp_admitted_ratio`, `circuit_breaker_backoff_step`,
//! `circuit_breaker_rejected_total{reason="ramp"}`), the tracing span fields
//! (`circuitbreaker.ramp_fraction`) and the config files (`ramp`,
//! `half_open_rate_rule`, `half_open_failure_rate`, `half_open_slow_call_rate`,
//! `max_hint`). What each adds to a breaker's memory: the ramp and the rate rule
//! nothing (the ramp's curve is a 512-byte table in the shared configuration),
//! a tripping verdict's hint nothing, remembered hints one 8-byte slot (32 bytes
//! for a breaker that otherwise has no heap storage), the decay nothing. With the
//! defaults, a breaker is 48 bytes as before.
//!
//! ```rust
//! use failfast::{Breaker, ManualClock, Nanos, Outcome, RejectReason, State};
//! use std::time::Duration;
//!
//! let breaker = Breaker::builder()
//!     .consecutive_failures(1)
//!     .open_duration(Duration::from_secs(10))
//!     .half_open_probes(10)
//!     .half_open_rate_rule()               // a round closes unless half its probes fail
//!     .ramp(Duration::from_secs(30))       // then 10 % → 100 % of calls over 30 s
//!     .max_hint(Duration::from_secs(120))  // a hint may hold it open up to 2 min
//!     .build_with_clock(ManualClock::new())?;
//!
//! // A 503 with `Retry-After: 60` trips it for 60 s (to 17 ms), not the 10 s schedule.
//! let t0 = Nanos::ZERO;
//! breaker.try_acquire_at(t0)?.record_hinted_at(Outcome::Failure, Some(Duration::from_secs(60)), t0);
//! let wait = breaker.try_acquire_at(t0).unwrap_err().retry_after().unwrap();
//! assert!(wait >= Duration::from_secs(60) && wait < Duration::from_millis(60_020), "{wait:?}");
//!
//! // One flaky probe in ten: the round still closes.
//! let back = Nanos::from_millis(60_020);
//! let probes: Vec<_> = (0..10).map(|_| breaker.try_acquire_at(back).unwrap()).collect();
//! for (i, probe) in probes.into_iter().enumerate() {
//!     if i == 0 { probe.failure_at(back); } else { probe.success_at(back); }
//! }
//! assert_eq!(breaker.state(), State::Closed);
//!
//! // Slow start: most calls are turned away just after the close.
//! let snapshot = breaker.snapshot_at(back);
//! assert!(snapshot.ramp_fraction.unwrap() < 0.15);
//! assert_eq!(snapshot.backoff_step, 1); // kept by the close
//! let turned_away = (0..100).filter_map(|_| breaker.try_acquire_at(back).err()).count();
//! assert!(turned_away > 80, "{turned_away}");
//! let rejected = (0..20).find_map(|_| breaker.try_acquire_at(back).err()).unwrap();
//! assert_eq!(rejected.reason(), RejectReason::Ramp);
//!
//! // After the ramp, everyone; after one base period of health the step is gone.
//! let later = Nanos::from_millis(60_020 + 30_000);
//! assert!((0..100).all(|_| breaker.try_acquire_at(later).map(|p| p.ignore_at(later)).is_ok()));
//! let snapshot = breaker.snapshot_at(later);
//! assert_eq!((snapshot.ramp_fraction, snapshot.backoff_step), (None, 0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Outliers: each host against its pool
//!
//! A breaker judges its host alone, by fixed thresholds. In a pool of 50
//! replicas, the one failing 8 % while its peers fail 0.1 % is the broken one,
//! and no fixed threshold catches it without tripping the whole pool on a bad
//! day. `RegistryBuilder::outliers(Outliers)` compares each host with the
//! others of its pool (the registry's keys, or a named group:
//! `Builder::outlier_pool("payments")` on a key's override), Envoy's way but with
//! no timer and no scan:
//!
//! * **Success rate** (Envoy's rule and defaults): every `interval` (10 s),
//!   among hosts with 100 calls, provided 5 have them, a host below
//!   `mean − 1.9 × stdev` is ejected.
//! * **Evidence** (the default, not Envoy's): a host is ejected only when its
//!   failures, summed over its recent intervals, are more than its pool's rate
//!   explains at `significance` 10⁻⁶, given how many calls it made. Envoy's rule
//!   looks at the spread of the rates alone, so a tight healthy pool loses hosts
//!   to its own noise; `examples/outlier_tradeoff.rs` measures both over 48
//!   pools (`benches/README.md`). `Outliers::envoy()` is Envoy's rule exactly.
//! * **Failure percentage**: a host failing 85 % of 50 calls, observed only by
//!   default (`enforcing_failure_percentage(100)` ejects).
//! * **Latency** (`slow_outliers(factor, floor)`): a host whose slow-call rate
//!   is over `factor` times its pool's mean, and over `floor`.
//! * **Fleet safety**: enforcement percentages per rule (a shadow roll-out),
//!   at most `max_ejection_percent` (10 %) of a pool ejected, and panic mode:
//!   below `panic_threshold` (50 %) healthy hosts, outlier ejections are lifted.
//! * **Ejection time** (Envoy's): 30 s × the times the host was ejected, at most
//!   300 s, one time forgiven per interval it is back
//!   (`ejection_time(base, max)`, or `ejection_time_of_breaker()`).
//!
//! Each host keeps a tally of the current interval in its own storage. Its first
//! call of the next interval adds its rates to the pool's exact, integer sums and
//! judges it against the pool's figures of the interval before, computed once by
//! whichever host needs them first. An outlier trips its own breaker
//! (`Reason::Outlier`, `Reason::SlowOutlier`) and comes back through the lazy
//! probe. A host that goes quiet is never ejected for its silence. A pooled call
//! costs a clock read and one `fetch_add` on its host's own cache line
//! (`benches/README.md`); a breaker in no pool does no extra work. Pools are a
//! registry's: a balancer's `EjectLayer` endpoints are standalone breakers, in no
//! pool.
//!
//! ```rust
//! use failfast::{Breaker, ManualClock, OutlierRule, Outliers, Registry, State};
//! use std::time::Duration;
//!
//! let clock = ManualClock::new();
//! let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1000))
//!     .outliers(Outliers::new())
//!     .build_with_clock(clock.clone())?;
//! // Two intervals of traffic: host 0 succeeds half the time, hosts 1–4 always.
//! for _ in 0..2 {
//!     for host in 0..5u64 {
//!         let breaker = registry.handle(&host);
//!         for call in 0..100 {
//!             let permit = breaker.try_acquire()?;
//!             if host == 0 && call % 2 == 0 { permit.failure(); } else { permit.success(); }
//!         }
//!     }
//!     clock.advance(Duration::from_secs(10));
//! }
//! // Each host's next call rolls its interval and is judged: the pool's mean is
//! // 90 %, its stdev 20 points, so the threshold is 52 % and host 0 is out.
//! for host in 0..5u64 {
//!     let _ = registry.handle(&host).try_acquire().map(|p| p.success());
//! }
//! assert_eq!(registry.handle(&0).state(), State::Open);
//! assert_eq!(registry.handle(&0).snapshot().outlier_ejection, Some(OutlierRule::SuccessRate));
//! assert_eq!(registry.outlier_pools()[0].success_rate_threshold, Some(0.52));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Trips shared across replicas (feature `redis`)
//!
//! A service that runs as N replicas has N breakers per upstream: when the
//! upstream dies, each replica pays the trip threshold on its own, and N
//! replicas probe it again together. Sharing *trips* fixes that with **nothing
//! on the request path**: admission and verdicts are the same atomics as
//! without sharing; a verdict that trips a breaker pushes one record into a
//! bounded lock-free `Outbox` (full: dropped and counted). A tokio task that
//! *you* start (`RedisSync`, one per registry) publishes each trip with one Lua
//! script, hears the others' over sharded pub/sub, and reconciles every few
//! seconds.
//!
//! ```rust,no_run
//! # #[cfg(all(feature = "redis", feature = "tower"))] {
//! use failfast::redis::RedisSyncBuilder;
//! use failfast::registry::HostKey;
//! use failfast::share::{Outbox, Replica};
//! use failfast::tower::{HttpClassifier, KeyedLayer};
//! use failfast::{Breaker, Registry};
//! use std::{sync::Arc, time::Duration};
//!
//! # async fn start() -> Result<(), failfast::ConfigError> {
//! let registry = Arc::new(
//!     Registry::<HostKey>::builder(Breaker::builder().failure_rate(0.5).min_calls(20)).build()?,
//! );
//! let outbox = Arc::new(Outbox::new(1024));
//! let layer = KeyedLayer::new(registry.clone())
//!     .classify(HttpClassifier::new())
//!     .on_transition(outbox.hook()); // local trips go to the outbox
//! let replica = Replica::builder(registry, outbox)
//!     .origin("checkout-7f9c")                      // this replica's name
//!     .min_reporters(2, Duration::from_secs(60))    // two replicas must agree
//!     .probe_spread(0.1, Duration::from_secs(5))    // the default: end remote periods up to 10 % (≤ 5 s) early
//!     .build()?;
//! let sync = RedisSyncBuilder::new("redis://127.0.0.1:6379/") // or ::cluster([...])
//!     .prefix("checkout")                           // one prefix per group of replicas
//!     .build(replica)?;
//! let stats = sync.stats();                         // published, errors, dropped, applied...
//! // With `metrics`: stats.export_metrics() at scrape time.
//! tokio::spawn(sync.run());
//! # let _ = (layer, stats);
//! # Ok(())
//! # }
//! # }
//! ```
//!
//! What it promises, and how each promise is checked:
//!
//! * **A monotone merge**: news opens a Closed breaker or moves an Open
//!   period's end later; it never closes, half-opens or shortens anything.
//!   Recovery stays local: each replica probes when its own period ends,
//!   shortened by its own probe offset — drawn from its name, the key and the
//!   epoch, up to 10 % of what is left and at most 5 s by default
//!   (`probe_spread`) — so replicas that heard the same trip probe apart even
//!   with the breakers' jitter at 0, as above. (A property test across three
//!   replicas under reordered, duplicated, delayed and lost messages; a loom
//!   model of the merge racing admissions, verdicts and local trips; a test
//!   that eight replicas applying the same news end its period at eight
//!   instants.)
//! * **What travels is the time left**, never an instant: the script ends the
//!   period at the server's `TIME` + remaining, a receiver at its own now +
//!   remaining. Replicas' clocks never meet.
//! * **Epochs** from the server make duplicates, reordered and stale news
//!   no-ops; **reconciliation** (on connect, after a lost connection, every
//!   5 s) heals lost messages, killed subscriptions, cold starts and
//!   partitions; every key expires. (Against a real `redis-server`: B rejects within 50 ms of A's trip,
//!   within one reconcile interval after `CLIENT KILL TYPE pubsub`; injected stale
//!   epochs change nothing; 10k trips leave `DBSIZE` at 0; `SHUTDOWN` and a restart;
//!   `DEBUG SLEEP` does not slow the request path.)
//! * **Rails**: `min_reporters(k, window)`, the registry's `max_open` cap, an
//!   untracked key never opens the shared overflow breaker, and Redis
//!   unreachable or slow leaves the replica local-only (counted in
//!   `stats.errors()`, `circuit_breaker_sync_errors_total`; a full outbox in
//!   `circuit_breaker_sync_dropped_total`), its open trips published again when
//!   Redis is back.
//! * **Redis Cluster**: keys are hash-tagged per shard, so each script touches
//!   one slot; news goes over sharded pub/sub (Redis 7+).
//!
//! Without Redis, `share::MemoryStore` runs the same rules in process (the
//! demo's S13 scene uses it), and `share::Replica` can be driven by any
//! transport: `publish_to`, `receive`, `reconcile_with`. The `share` and
//! `redis` module docs hold the protocol: keys, scripts, what runs where.
//! Two proxies that share trips, each in its own terminal (a proxy needs
//! routes: `--demo` starts demo upstreams and routes to them):
//!
//! ```sh
//! cargo run --example proxy --features tower,serde,redis -- --demo --redis redis://127.0.0.1:6379/
//! cargo run --example proxy --features tower,serde,redis -- --demo --listen 127.0.0.1:8081 \
//!     --redis redis://127.0.0.1:6379/
//! ```
//!
//! The Redis tests start their own `redis-server` (a unix socket in a temporary
//! directory; three cluster nodes on loopback ports). Where it is not installed,
//! `cargo test --all-features` still passes and prints that they were skipped;
//! `apt-get install -y redis-server` enables them, and `FAILFAST_REQUIRE_REDIS=1`
//! (set by CI) makes a missing server a failure.
//!
//! # How every call ends
//!
//! In a real proxy, calls rarely end with a clean verdict: clients give up,
//! outer timeouts drop futures, handlers panic. failfast counts every ending:
//!
//! | how the call ended | in CLOSED | a half-open probe |
//! |---|---|---|
//! | a verdict (`success`, `failure`, `record`) | counted as reported; slow if it took the slow-call threshold; ends a run of unanswered calls | a fast success counts toward closing; a failure or slow success reopens |
//! | `ignore()` (a business error) | not counted; ends a run of consecutive failures (and of unanswered calls) | frees its slot |
//! | `Outcome::Neutral`: not the dependency's doing — the caller out of file descriptors or buffers, the client's request body broken, stalled or too large (what the shipped classifiers record for such errors: `Fault::of`) | not counted; ends no run | frees its slot |
//! | dropped early (sooner than the slow-call threshold, `abandoned_after` and the unanswered rule's age) | neutral: not counted; runs stay | frees its slot at once |
//! | dropped early, before any answer, after the unanswered rule's age (on by default: 20 calls, 250 ms or half the slow-call threshold; `unanswered(calls, after)`, `unanswered_off()`) | one more unanswered call; `calls` of them in a row, with no answer between, trip the breaker (`unresponsive`) | fails the round (`probe_abandoned`) |
//! | dropped late (after the slow-call threshold or `abandoned_after`: the caller gave up on a hung call) | a slow call if the policy has a slow-call rate, else a failure | fails the round (`probe_abandoned`), next backoff step |
//! | a response stream (`classify_at_end`) dropped after its head while bytes kept coming | neutral, however long it ran | frees its slot |
//! | a response stream dropped after no bytes came for `abandoned_after` | as dropped late | fails the round (`probe_abandoned`) |
//! | a panic while the permit is held (`call`, `call_async`, the tower layers) | a failure; the panic goes on unchanged | fails the round (`probe_failed`) |
//! | the tower layer's own `timeout` fires | a failure *and* a slow call, at the deadline | fails the round |
//! | a timeout outside the layer (`ServiceBuilder::timeout` before it, `tokio::time::timeout` around `call_async`) | as a drop: late → counted, early → neutral (or unanswered) | as a drop |
//!
//! `abandoned_after` defaults to the slow-call threshold, else the probe lease:
//! set it below the timeouts your callers apply from outside. A permit is timed
//! whenever the breaker can judge its drop: with a slow-call threshold, an
//! explicit `abandoned_after` or an explicit unanswered rule, on every async path
//! (`call_async`, the tower layers), for probes and for `_at(now)` admissions.
//! Only a plain `try_acquire()` on a breaker that sets none of these skips the
//! clock (the cheapest path): its permit has no age and its drop is neutral. A stream is slow or not by the time to its
//! response head, never by the length of its body. A panicking observer or
//! hook cannot wedge a breaker: it runs after the transition is complete,
//! outside every CAS loop, and a probe slot its admission took is given back.
//!
//! **Order of tower layers**: retries and a total request deadline outside,
//! the breaker inside them with its own call `timeout`:
//!
//! ```rust
//! # #[cfg(feature = "tower")] {
//! use failfast::tower::{FailFastLayer, HttpClassifier};
//! use failfast::Breaker;
//! use std::{sync::Arc, time::Duration};
//!
//! let breaker = Arc::new(
//!     Breaker::builder()
//!         .consecutive_failures(5)
//!         .abandoned_after(Duration::from_millis(1500)) // below the outer deadline
//!         .build()?,
//! );
//! let client = tower::ServiceBuilder::new()
//!     // .layer(retry) — outside: a rejection stops the retries at once
//!     .timeout(Duration::from_secs(3)) // the whole request's deadline
//!     .layer(
//!         FailFastLayer::new(breaker)
//!             .classify(HttpClassifier::new())
//!             .timeout(Duration::from_secs(2)), // each call's: a failure and a slow call
//!     )
//!     .service_fn(|_req: http::Request<()>| async {
//!         Ok::<_, std::io::Error>(http::Response::new(()))
//!     });
//! # let _ = client;
//! # }
//! # Ok::<(), failfast::ConfigError>(())
//! ```
