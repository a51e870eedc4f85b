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
//! and a client's request body that broke, stalled or grew too large are
//! [`Outcome::Neutral`](crate::Outcome::Neutral), so a client cannot open a
//! healthy upstream's breaker with broken uploads.
//!
//! **Nothing needs wrapping for that.** A hyper-based client (hyper-util's,
//! reqwest) fails a call whose request body failed with an error of the
//! request's own making, `hyper::Error::is_user`, which `Fault::of` reads
//! (feature `hyper`, on with `tower`). The layers leave the request alone:
//! they are generic over it, and the inner service takes the request type
//! the user gave it, HTTP or not. A body that *stalls* or grows too large
//! is a body error once something limits it: the server's idle and size
//! limits on its clients' bodies (tower-http's `RequestBodyTimeoutLayer`
//! and `RequestBodyLimitLayer`, or [`DownstreamBody`], which also says
//! which limit it was), the idle limit below the layer's
//! [`timeout`](FailFastLayer::timeout) — a call the layer cuts first counts
//! against the upstream, since the layer cannot tell whose wait it was.
//! `tests/client_uploads.rs` sends broken, stalled and oversized uploads
//! through both layers over hyper-util's client and through the reqwest
//! middleware to a healthy server on loopback: none opens its breaker.
//!
//! Over HTTP/2 hyper answers a request body's error by resetting the
//! stream, and the call's error says only that the stream was reset: it
//! counts against the upstream, `DownstreamBody` or not.
//!
//! # Classifiers
//!
//! The classifiers, and the traits a layer calls them through
//! ([`Classify`], [`ClassifyStream`]), live in [`failfast::http`](crate::http)
//! and need no tower (they are re-exported here): its table says which reads
//! what. The layers add the mode ([`AtHead`], [`AtEnd`]) and `FromTowerHttp`
//! (feature `tower-http`).
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
//! # Retries
//!
//! [`RetryPolicy`] is a `tower::retry::Policy` for HTTP: put tower's
//! `RetryLayer` with it *outside* a [`KeyedLayer`] or a [`FailFastLayer`],
//! and either layer admits each retry (a request the policy marked with a
//! [`RetryAttempt`]) through its breaker's retry budget
//! ([`Breaker::try_retry`](crate::Breaker::try_retry)), while first tries
//! pay into it. Both read the mark through [`Attempt`], which every
//! `http::Request<B>` implements. A retry the breaker refuses (the budget
//! spent, the breaker open) is not sent, and the caller gets the answer of
//! the attempt before it, as without retries; with
//! [`WhenRefused::Rejection`] it gets the [`Rejected`](crate::Rejected)
//! (for the budget,
//! [`RejectReason::RetryBudget`](crate::RejectReason::RetryBudget)). No
//! rejection is ever retried. [`Retries`] has the rules and defaults.
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

mod balance;
mod body;
mod clock;
mod downstream;
mod fallback;
#[cfg(feature = "tower-http")]
mod from_tower_http;
mod future;
mod hook;
#[cfg(all(test, not(failfast_loom)))]
mod hook_model;
mod keyed;
mod layer;
mod mode;
mod permit;
mod respond;
mod retry;
mod timeout;
mod watch;

// At home in `failfast::http` (no tower needed); here under the paths the
// layers' users already have.
pub use crate::http::{
    is_stale, mark_stale, normalise_authority, retry_after_secs, retry_attempt, status_json,
    unavailable, AuthorityKey, Classify, ClassifyEos, ClassifyStream, DefaultClassifier, FaultFn,
    FromAuthority, GrpcClassifier, GrpcEos, HeadOutcome, HttpClassifier, KeyBuf, KeyFn, KeySink,
    Keyless, KeylessReason, Retries, RetriesBuilder, RetryAttempt, Stale, Verdict, WhenRefused,
    CACHE_STATUS_STALE, DEFAULT_MAX_KEY_LEN, GRPC_STATUS, MAX_AUTHORITY_LEN, X_FAILFAST,
};

pub use crate::hooks::OnTransition;
pub use balance::{Eject, EjectLayer, DEFAULT_RECHECK};
pub use body::PermitBody;
pub use clock::TokioClock;
pub use downstream::DownstreamBody;
pub use fallback::{Fallback, FallbackFuture, FallbackLayer, OnRejected, Recover, WithRequest};
#[cfg(feature = "tower-http")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower-http")))]
pub use from_tower_http::FromTowerHttp;
pub use future::ResponseFuture;
pub use keyed::{Keyed, KeyedLayer, KeylessPolicy};
pub use layer::{FailFast, FailFastLayer};
pub use mode::{AtEnd, AtHead};
pub use respond::error_response;
pub use retry::{Attempt, RetryPolicy};
pub use timeout::TimedOut;
