//! Tower integration (feature `tower`): layers that put a breaker in front of
//! a [`tower::Service`].
//!
//! | layer | one breaker per | `poll_ready` | a rejected call |
//! |---|---|---|---|
//! | [`FailFastLayer`] | service | the inner service's readiness, nothing else | `call` returns a ready `Err(`[`Rejected`](crate::Rejected)`)` boxed in [`tower::BoxError`]; the inner service is not called |
//! | [`KeyedLayer`] | key taken from the request (default: the URI authority), in a [`Registry`](crate::Registry) | the inner service's readiness, nothing else | as above |
//! | [`EjectLayer`] | endpoint under `tower::balance` | `Pending` while the breaker would reject, woken when the probe time comes; **never** `Err` from the breaker | never, if `poll_ready` was honoured |
//!
//! In every layer the permit (an [`OwnedPermit`](crate::OwnedPermit), or for
//! [`KeyedLayer`] one holding the registry handle) travels into the
//! response future and the verdict is recorded there, when the inner future
//! resolves, through a [`Classify`] (default: `Ok` = success, `Err` =
//! failure; [`HttpClassifier`] for HTTP). A response future dropped before it
//! resolves (the client went away) drops its permit: the call counts as
//! *ignored* and frees its probe slot (invariant 5).
//!
//! The verdict is taken when the response *head* arrives; a slow body is not
//! timed.
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
//! a registry. The layers know the name, so they report every transition
//! their calls cause to an [`OnTransition`] hook, with the name: the ones the
//! verdicts return — every trip (Closed → Open, HalfOpen → Open) and every
//! recovery (HalfOpen → Closed) — and the ones admission causes (Open →
//! HalfOpen, a superseded probe round), read from
//! [`Permit::transition`](crate::Permit::transition). The name is
//! [`FailFastLayer::upstream`] for a single breaker, the request's key
//! (formatted with `Display`, on transitions only) for [`KeyedLayer`].

mod balance;
mod body;
mod classify;
#[cfg(feature = "tower-http")]
mod from_tower_http;
mod future;
mod grpc;
mod keyed;
mod layer;
mod respond;
mod stream;
mod timeout;

pub use balance::{Eject, EjectLayer, DEFAULT_RECHECK};
pub use body::PermitBody;
pub use classify::{Classify, DefaultClassifier, HttpClassifier};
#[cfg(feature = "tower-http")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower-http")))]
pub use from_tower_http::FromTowerHttp;
pub use future::ResponseFuture;
pub use grpc::{GrpcClassifier, GrpcEos, GRPC_STATUS};
pub use keyed::{AuthorityKey, KeyFn, Keyed, KeyedLayer};
pub use layer::{FailFast, FailFastLayer};
pub use respond::{error_response, retry_after_secs, status_json, X_FAILFAST};
pub use stream::{AtEnd, AtHead, ClassifyEos, ClassifyStream, HeadOutcome, Verdict};
pub use timeout::TimedOut;

use std::fmt;
use std::sync::Arc;

use crate::observe::Transition;

/// Told about each transition a layer's verdicts cause, with the upstream's
/// name. Runs on the request path of the call that caused it: must not block.
///
/// Any `Fn(&str, &Transition) + Send + Sync + 'static` is a hook, for
/// instance `failfast::export::tracing::emit` (feature `tracing`) or
/// `failfast::export::metrics::record_transition` (feature `metrics`).
pub trait OnTransition: Send + Sync + 'static {
    /// Called once per transition the layer's verdict caused.
    fn on_transition(&self, upstream: &str, transition: &Transition);
}

impl<F> OnTransition for F
where
    F: Fn(&str, &Transition) + Send + Sync + 'static,
{
    fn on_transition(&self, upstream: &str, transition: &Transition) {
        self(upstream, transition)
    }
}

/// A shared hook, cloned into every service of a layer.
#[derive(Clone)]
pub(crate) struct Hook(pub(crate) Arc<dyn OnTransition>);

impl fmt::Debug for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Hook")
    }
}
