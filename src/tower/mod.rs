//! Tower integration (feature `tower`): layers that put a breaker in front of
//! a [`tower::Service`].
//!
//! | layer | one breaker per | `poll_ready` | a rejected call |
//! |---|---|---|---|
//! | [`FailFastLayer`] | service | the inner service's readiness, nothing else | `call` returns a ready `Err(`[`Rejected`](crate::Rejected)`)` boxed in [`tower::BoxError`]; the inner service is not called |
//! | [`KeyedLayer`] | key taken from the request (default: the normalised URI authority or `Host`, [`AuthorityKey`]), in a [`Registry`](crate::Registry) | the inner service's readiness, nothing else | as above; a request without a key is rejected with [`Keyless`] (or shares one breaker: [`KeylessPolicy`]) |
//! | [`EjectLayer`] | endpoint under `tower::balance` | `Pending` while the breaker would reject, woken when the probe time comes; **never** `Err` from the breaker | never, if `poll_ready` was honoured |
//!
//! In every layer the permit (an [`OwnedPermit`](crate::OwnedPermit), or for
//! [`KeyedLayer`] one holding the registry handle) travels into the
//! response future and the verdict is recorded there, when the inner future
//! resolves, through a [`Classify`] (default: `Ok` = success, an `Err` that
//! is the upstream's fault = failure, any other `Err` = neutral, see
//! [`Fault`](crate::Fault); [`HttpClassifier`] for HTTP). A response future
//! dropped before it resolves (the client went away, an outer timeout fired)
//! drops its permit, which is judged by its age (the table "How every call
//! ends" on the crate's front page): early it is neutral and frees its probe
//! slot (invariant 5); late it counts against the upstream; with the
//! unanswered rule, early but after the rule's age it is unanswered.
//!
//! The verdict is taken when the response *head* arrives; a slow body is not
//! timed. [`FailFastLayer::classify_at_end`] takes it at the end of the body
//! instead, when the head cannot tell (see [`AtEnd`]); the body is then
//! judged by its progress, not its age.
//!
//! # Who failed
//!
//! The layers box the inner service's error before they classify it, so a
//! classifier reads its `source()` chain. The shipped classifiers count an
//! error against the upstream only when [`Fault::of`](crate::Fault::of)
//! blames it: the caller's own resources running out (`EMFILE`, `ENOBUFS`)
//! and a client's request body that broke, stalled or grew too large
//! ([`DownstreamBody`] marks them) are [`Outcome::Neutral`](crate::Outcome::Neutral),
//! so a client cannot open a healthy upstream's breaker with broken uploads.
//!
//! # Classifiers
//!
//! | classifier | reads | when |
//! |---|---|---|
//! | [`DefaultClassifier`] | `Ok` / `Err` | head |
//! | [`HttpClassifier`] | the HTTP status (5xx, 429 fail; other 4xx ignored); an `Err` by who caused it | head; with [`AtEnd`], a body that fails halfway is a failure |
//! | [`GrpcClassifier`] | `grpc-status` (see its table) | head (trailers-only responses); with [`AtEnd`], the trailers |
//! | `FromTowerHttp` (feature `tower-http`) | any `tower_http::classify::ClassifyResponse` | head; with [`AtEnd`], its `ClassifyEos` |
//! | any `Fn(&Result<T, E>) -> Outcome` | anything | head |
//!
//! # Without tower: reqwest
//!
//! reqwest's client is not a tower service; take a permit per request and
//! let [`HttpClassifier`] read the status (reqwest 0.12 uses `http` 1's
//! `StatusCode`). The example below compiles against a stand-in with
//! reqwest's signatures, so the crate does not build reqwest and a TLS stack
//! for its tests.
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
//! use failfast::tower::HttpClassifier;
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
//! # Time
//!
//! The core never reads a timer. Two things here do, both on the tokio timer
//! of the runtime that polls them, both optional, and neither spawns a task:
//! the per-call deadline of [`FailFastLayer::timeout`] / [`KeyedLayer::timeout`]
//! (a `tokio::time::Sleep` inside the response future, only when a timeout is
//! set), and the wake-up of [`Eject`]'s `poll_ready` while the breaker is open
//! (one reusable `Sleep` per endpoint, armed only while it rejects).
//!
//! # Transitions and upstream names
//!
//! An [`Observer`](crate::Observer) set on a breaker (or a registry) sees every
//! transition but not the upstream's name: one observer serves all breakers of
//! a registry. An [`OnTransition`] hook hears every transition *with* the
//! name, whatever caused it — a verdict, a drop, a panic, a timeout, an
//! admission that starts a probe round, news from another replica,
//! `force_open` or `reset` — at the one place every transition passes
//! ([`hooks`](crate::hooks)). A layer's `on_transition` adds its hook there:
//! the breaker's ([`Breaker::on_transition`](crate::Breaker::on_transition))
//! for [`FailFastLayer`], named by [`FailFastLayer::upstream`]; the registry's
//! ([`Registry::on_transition`](crate::Registry::on_transition)) for
//! [`KeyedLayer`], named by the key (formatted with `Display`, on
//! transitions only). The hook is heard while the layer or a service it
//! built lives; nothing travels with a call. `tests/hook_every_cause.rs`
//! checks each cause against every hook, the tracing event and the metrics
//! counter: each hears each transition once.

mod authority;
mod balance;
mod body;
mod classify;
mod clock;
mod downstream;
mod fallback;
#[cfg(feature = "tower-http")]
mod from_tower_http;
mod future;
mod grpc;
mod hook;
mod key;
mod keyed;
mod layer;
mod permit;
mod respond;
mod stream;
mod timeout;
mod watch;

pub use crate::hooks::OnTransition;
pub use authority::{
    normalise_authority, AuthorityKey, FromAuthority, KeyBuf, DEFAULT_MAX_KEY_LEN,
    MAX_AUTHORITY_LEN,
};
pub use balance::{Eject, EjectLayer, DEFAULT_RECHECK};
pub use body::PermitBody;
pub use classify::{Classify, DefaultClassifier, FaultFn, HttpClassifier};
pub use clock::TokioClock;
pub use downstream::DownstreamBody;
pub use fallback::{
    is_stale, mark_stale, unavailable, Fallback, FallbackFuture, FallbackLayer, OnRejected,
    Recover, Stale, WithRequest, CACHE_STATUS_STALE,
};
#[cfg(feature = "tower-http")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower-http")))]
pub use from_tower_http::FromTowerHttp;
pub use future::ResponseFuture;
pub use grpc::{GrpcClassifier, GrpcEos, GRPC_STATUS};
pub use key::{KeyFn, KeySink, Keyless, KeylessReason};
pub use keyed::{Keyed, KeyedLayer, KeylessPolicy};
pub use layer::{FailFast, FailFastLayer};
pub use respond::{error_response, retry_after_secs, status_json, X_FAILFAST};
pub use stream::{AtEnd, AtHead, ClassifyEos, ClassifyStream, HeadOutcome, Verdict};
pub use timeout::TimedOut;
