//! HTTP without tower (feature `http`, which `tower` turns on): what an
//! axum handler, a hyper or reqwest client, or a tower layer needs to judge
//! an HTTP or gRPC answer, key a request by its upstream, and answer a
//! rejected call.
//!
//! | item | what |
//! |---|---|
//! | [`Classify`], [`HttpClassifier`], [`GrpcClassifier`], [`DefaultClassifier`] | a result → an [`Outcome`](crate::Outcome), by status, `grpc-status` and who failed ([`Fault`](crate::Fault)) |
//! | [`ClassifyStream`], [`ClassifyEos`], [`Verdict`] | a verdict that waits for the end of the body (the trailers) |
//! | [`AuthorityKey`], [`KeyFn`], [`Keyless`] | a request's upstream key, in the [normal form](crate::authority) |
//! | [`unavailable`], [`retry_after_secs`], [`mark_stale`], [`is_stale`] | the HTTP answer for a rejected call, and the marks of a fallback |
//! | [`Retries`], [`RetryAttempt`], [`WhenRefused`] ([`retries`]) | when a failed call may be retried through its host's retry budget: the rules the tower `RetryPolicy` and the reqwest `RetryMiddleware` share, and the mark a retry carries |
//! | [`status_json`] | a JSON view of a [`Registry`](crate::Registry) for a status endpoint |
//!
//! The tower layers ([`failfast::tower`](crate::tower), feature `tower`)
//! take these classifiers and key functions, and re-export every item here
//! under their own path: `failfast::tower::HttpClassifier` is this
//! [`HttpClassifier`]. What needs tower's own types stays there:
//! [`error_response`](crate::tower::error_response) (it knows the layers'
//! errors), the response-body wrappers and the layer modes.
//!
//! ```
//! use failfast::http::{unavailable, HttpClassifier};
//! use failfast::{Breaker, Outcome};
//!
//! // An axum-style handler: a permit per call, the status judged, a 503 when open.
//! fn handle(breaker: &Breaker, call: impl FnOnce() -> http::StatusCode) -> http::Response<String> {
//!     let permit = match breaker.try_acquire() {
//!         Ok(permit) => permit,
//!         Err(rejected) => return unavailable(&rejected),
//!     };
//!     let status = call();
//!     permit.record(HttpClassifier::new().classify_status(status));
//!     http::Response::builder().status(status).body(String::new()).unwrap()
//! }
//!
//! let breaker = Breaker::builder().consecutive_failures(1).build()?;
//! assert_eq!(handle(&breaker, || http::StatusCode::NOT_FOUND).status(), 404); // ignored
//! assert_eq!(handle(&breaker, || http::StatusCode::BAD_GATEWAY).status(), 502); // opens it
//! assert_eq!(handle(&breaker, || http::StatusCode::OK).status(), 503); // not called
//! # Ok::<(), failfast::ConfigError>(())
//! ```
//!
//! # Classifiers
//!
//! | classifier | reads | when |
//! |---|---|---|
//! | [`DefaultClassifier`] | `Ok` / `Err` | head |
//! | [`HttpClassifier`] | the HTTP status (5xx, 429 fail; other 4xx ignored); an `Err` by who caused it | head; with [`AtEnd`](crate::tower::AtEnd), a body that fails halfway is a failure |
//! | [`GrpcClassifier`] | `grpc-status` (see its table) | head (trailers-only responses); with [`AtEnd`](crate::tower::AtEnd), the trailers |
//! | [`FromTowerHttp`](crate::tower::FromTowerHttp) (feature `tower-http`) | any `tower_http::classify::ClassifyResponse` | head; with [`AtEnd`](crate::tower::AtEnd), its `ClassifyEos` |
//! | any `Fn(&Result<T, E>) -> Outcome` | anything | head |
//!
//! # Upstream hints
//!
//! A verdict may carry the upstream's own word on when to come back
//! ([`RetryHint`](crate::RetryHint)), read by the classifiers beside the
//! outcome ([`Classify::hint`], [`ClassifyStream::head_hint`],
//! [`ClassifyEos::eos_hint`]; none unless a classifier reads one):
//!
//! | classifier | reads | on |
//! |---|---|---|
//! | [`HttpClassifier`] | the first `Retry-After`: delta-seconds or an HTTP-date (IMF-fixdate, rfc850, asctime) | 429 and 503 only, at the head; other statuses are not searched |
//! | [`GrpcClassifier`] | the first [`grpc-retry-pushback-ms`](GRPC_RETRY_PUSHBACK_MS) (milliseconds) | where the status is read — the head of a trailers-only or non-200 response, else the trailers ([`GrpcEos`]) — when it is not `OK` |
//!
//! A hint is trusted up to one day ([`MAX_TRUSTED_HINT`](crate::hint::MAX_TRUSTED_HINT))
//! and from a value of at most 64 bytes ([`MAX_HINT_LEN`](crate::hint::MAX_HINT_LEN));
//! a date is resolved against the breaker's wall clock
//! ([`Clock::wall`](crate::Clock::wall)), so it must lie ahead of it. A bad
//! hint — negative (gRPC's "do not retry" included), malformed, absurd,
//! too long, a date now or past — is ignored and counted in
//! [`hints_ignored_total`](crate::hint::hints_ignored_total); a missing one
//! is neither. The [`hint`](crate::hint) module has the details.
//!
//! By default a breaker takes the hint of the verdict that trips it (or
//! fails its probe): that trip opens for at least the hint, capped at 10
//! minutes ([`Builder::max_hint`](crate::Builder::max_hint) sets the cap).
//! With [`Builder::hints`](crate::Builder::hints) it also remembers a hint
//! that did not trip, for the next trip; with
//! [`Builder::hints_off`](crate::Builder::hints_off) it takes none.
//!
//! # A client without tower: reqwest by hand
//!
//! reqwest's client is not a tower service. The `reqwest` feature's
//! [`BreakerMiddleware`](crate::reqwest::BreakerMiddleware) keeps one
//! breaker per host; by hand, take a permit per request and let
//! [`HttpClassifier`] read the status (reqwest uses `http` 1's
//! `StatusCode`). The example below compiles against a stand-in with
//! reqwest's signatures, so the crate does not build reqwest and a TLS
//! stack for its tests.
//!
//! ```
//! # mod reqwest {
//! #     pub struct Client;
//! #     pub struct RequestBuilder;
//! #     pub struct Response;
//! #     #[derive(Debug)]
//! #     pub struct Error;
//! #     impl Client {
//! #         pub fn get(&self, _url: &str) -> RequestBuilder { RequestBuilder }
//! #     }
//! #     impl RequestBuilder {
//! #         pub async fn send(self) -> Result<Response, Error> { Ok(Response) }
//! #     }
//! #     impl Response {
//! #         pub fn status(&self) -> http::StatusCode { http::StatusCode::OK }
//! #     }
//! #     impl Error {
//! #         pub fn is_builder(&self) -> bool { false }
//! #     }
//! #     impl std::fmt::Display for Error {
//! #         fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("error") }
//! #     }
//! #     impl std::error::Error for Error {}
//! # }
//! use failfast::http::HttpClassifier;
//! use failfast::{Breaker, Outcome};
//!
//! const CLASSIFY: HttpClassifier = HttpClassifier::new();
//!
//! async fn get(
//!     client: &reqwest::Client,
//!     breaker: &Breaker,
//!     url: &str,
//! ) -> Result<reqwest::Response, Box<dyn std::error::Error + Send + Sync>> {
//!     let permit = breaker.try_acquire()?; // `Rejected`: not sent
//!     match client.get(url).send().await {
//!         Ok(response) => {
//!             permit.record(CLASSIFY.classify_status(response.status()));
//!             Ok(response)
//!         }
//!         // A request we could not even build says nothing about the server.
//!         Err(e) if e.is_builder() => Err(e.into()), // the permit drops: neutral
//!         Err(e) => {
//!             permit.record(Outcome::Failure); // connect, timeout, reset
//!             Err(e.into())
//!         }
//!     }
//! }
//! # let breaker = Breaker::builder().consecutive_failures(5).build().unwrap();
//! # let response = futures_executor(get(&reqwest::Client, &breaker, "http://api.internal/"));
//! # assert_eq!(response.unwrap().status(), 200);
//! # fn futures_executor<F: std::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
//! # }
//! ```
//!
//! # Saying an answer is a fallback
//!
//! A fallback must never pass off stale data as fresh. For HTTP the marks
//! are headers a client or a cache can read, and a typed extension for
//! in-process callers ([`mark_stale`]):
//!
//! * **`x-failfast: fallback`** — the crate's own header (the one
//!   [`error_response`](crate::tower::error_response) sets to `rejected` or
//!   `timeout`): one lookup for a client to tell the answer apart.
//! * **`Cache-Status: failfast; hit; detail=circuit-open`** (RFC 9211) — the
//!   standard way for an intermediary to say it answered from its cache, and
//!   why; HTTP debugging tools and CDNs show it.
//! * **`Age`** (RFC 9111 §5.1) — how long ago the copy was stored.
//!
//! Not `Warning: 110 - "Response is Stale"`: RFC 9111 obsoleted the
//! `Warning` header (no cache or client acted on it consistently), so a
//! client written today would not look for it.

mod answer;
mod authority;
mod classify;
mod grpc;
mod key;
pub mod retries;
mod status;
mod stream;

#[cfg(feature = "tower")]
pub(crate) use answer::rejected_response;
pub use answer::{
    is_stale, mark_stale, retry_after_secs, unavailable, Stale, CACHE_STATUS_STALE, X_FAILFAST,
};
pub use authority::{
    normalise_authority, AuthorityKey, FromAuthority, KeyBuf, DEFAULT_MAX_KEY_LEN,
    MAX_AUTHORITY_LEN,
};
#[cfg(feature = "tower-http")]
pub(crate) use classify::outcome_of_error;
pub use classify::{Classify, DefaultClassifier, FaultFn, HttpClassifier};
pub use grpc::{GrpcClassifier, GrpcEos, GRPC_RETRY_PUSHBACK_MS, GRPC_STATUS};
pub use key::{KeyFn, KeySink, Keyless, KeylessReason};
#[cfg(any(feature = "tower", feature = "reqwest"))]
pub(crate) use retries::jitter;
pub use retries::{
    retry_attempt, Retries, RetriesBuilder, RetryAttempt, WhenRefused, DEFAULT_BACKOFF,
    DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_BACKOFF, DEFAULT_MAX_HINT_WAIT, MAX_ATTEMPTS, MAX_RETRY_WAIT,
};
pub use status::status_json;
pub use stream::{ClassifyEos, ClassifyStream, HeadOutcome, Verdict};

/// An error of any type, boxed: the error side of the results the
/// classifiers read. The same type as `tower::BoxError`, so a layer's
/// results and a hand-made one classify alike.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
