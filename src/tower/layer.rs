//! [`FailFastLayer`] / [`FailFast`]: one breaker in front of one service.

use core::marker::PhantomData;
use core::task::{Context, Poll};
use core::time::Duration;
use std::sync::Arc;

use tower::{BoxError, Layer, Service};

use super::body::PermitBody;
use super::future::ResponseFuture;
use super::hook::LayerHooks;
use super::mode::{AtEnd, AtHead};
use super::permit::{admit_attempt, Naming, Owner};
use super::retry::Attempt;
use super::watch::Watcher;
use crate::breaker::Breaker;
use crate::clock::{Clock, QuantaClock};
use crate::hooks::OnTransition;
use crate::http::ClassifyStream;
use crate::http::{Classify, DefaultClassifier};

/// Wraps a service in a [`FailFast`] on one shared breaker.
///
/// ```
/// use failfast::tower::{FailFastLayer, HttpClassifier};
/// use failfast::Breaker;
/// use std::{sync::Arc, time::Duration};
///
/// let breaker = Arc::new(Breaker::builder().consecutive_failures(5).build()?);
/// let layer = FailFastLayer::new(breaker)
///     .classify(HttpClassifier::new())
///     .timeout(Duration::from_secs(2))
///     .upstream("payments");
/// let service = tower::ServiceBuilder::new()
///     .layer(layer)
///     .service_fn(|_req: http::Request<()>| async {
///         Ok::<_, std::io::Error>(http::Response::new(()))
///     });
/// # let _ = service;
/// # Ok::<(), failfast::ConfigError>(())
/// ```
///
/// `M` is when the verdict is taken: [`AtHead`] (the default), or [`AtEnd`]
/// after [`classify_at_end`](Self::classify_at_end).
///
/// The layer takes any request that implements [`Attempt`] (every
/// `http::Request<B>` does, and so do `()`, the integers, `String` and the
/// other standard types [`Attempt`] lists) and hands it on unchanged. A call that fails
/// because its own request body failed (a client gone mid-upload, an upload
/// cut by an idle or size limit) is neutral with every shipped classifier,
/// the default one included: hyper says so in its error, and
/// [`Fault::of`](crate::Fault::of) reads it (see [who failed](super#who-failed)).
///
/// Put tower's `RetryLayer` with a [`RetryPolicy`](super::RetryPolicy)
/// outside it, and each retry is admitted through the breaker's retry
/// budget ([`Builder::retry_budget`](crate::Builder::retry_budget)), as in
/// a [`KeyedLayer`](super::KeyedLayer).
#[derive(Clone, Debug)]
pub struct FailFastLayer<Cl = DefaultClassifier, C: Clock = QuantaClock, M = AtHead> {
    breaker: Arc<Breaker<C>>,
    classify: Cl,
    timeout: Option<Duration>,
    hooks: LayerHooks,
    upstream: Arc<str>,
    naming: Naming<(), C>,
    watch: Watcher<()>,
    mode: PhantomData<fn() -> M>,
}

impl<C: Clock> FailFastLayer<DefaultClassifier, C> {
    /// A layer on `breaker`, classifying `Ok` as success and `Err` as failure.
    pub fn new(breaker: Arc<Breaker<C>>) -> Self {
        FailFastLayer {
            breaker,
            classify: DefaultClassifier,
            timeout: None,
            hooks: LayerHooks::default(),
            upstream: Arc::from(""),
            naming: Naming::Unnamed,
            watch: Watcher::none(),
            mode: PhantomData,
        }
    }
}

impl<Cl, C: Clock, M> FailFastLayer<Cl, C, M> {
    /// Classifies results with `classify` instead, when the response head
    /// arrives ([`AtHead`]).
    pub fn classify<Cl2>(self, classify: Cl2) -> FailFastLayer<Cl2, C> {
        self.with_classifier(classify)
    }

    /// Classifies HTTP responses with `classify` ([`AtEnd`]): the head's
    /// verdict when it tells (a trailers-only gRPC status, a 5xx), else the
    /// verdict at the end of the body, which carries the permit until then
    /// (a [`PermitBody`]). The service's responses become
    /// `http::Response<PermitBody<B, _>>`.
    ///
    /// ```
    /// use failfast::tower::{FailFastLayer, GrpcClassifier};
    /// use failfast::Breaker;
    /// use std::sync::Arc;
    ///
    /// let breaker = Arc::new(Breaker::builder().failure_rate(0.5).min_calls(20).build()?);
    /// // grpc-status from the trailers (or a trailers-only head).
    /// let layer = FailFastLayer::new(breaker).classify_at_end(GrpcClassifier::new());
    /// # let _ = layer;
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn classify_at_end<G>(self, classify: G) -> FailFastLayer<G, C, AtEnd> {
        self.with_classifier(classify)
    }

    fn with_classifier<Cl2, M2>(self, classify: Cl2) -> FailFastLayer<Cl2, C, M2> {
        FailFastLayer {
            breaker: self.breaker,
            classify,
            timeout: self.timeout,
            hooks: self.hooks,
            upstream: self.upstream,
            naming: self.naming,
            watch: self.watch,
            mode: PhantomData,
        }
    }

    /// Cuts each admitted call after `timeout`: see [`TimedOut`](super::TimedOut).
    /// Needs a tokio runtime with the time driver.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The upstream's name, passed to the [`on_transition`](Self::on_transition)
    /// hook, recorded as `circuitbreaker.name` by
    /// [`trace_calls`](Self::trace_calls) and as the `upstream` label by
    /// [`call_metrics`](Self::call_metrics), and named by every
    /// [`Rejected`](crate::Rejected) the layer returns
    /// ([`Rejected::upstream`](crate::Rejected::upstream), and its `Display`:
    /// `payments: circuit open; retry after 9.2s`).
    pub fn upstream(mut self, name: impl Into<Arc<str>>) -> Self {
        self.upstream = name.into();
        self.naming = Naming::fixed(&self.upstream);
        self.watch = self.watch.upstream(self.upstream.clone());
        let (breaker, name) = (&self.breaker, &self.upstream);
        self.hooks
            .relend(|hook| breaker.hooks().lend(name.clone(), hook));
        self
    }

    /// Calls `hook` on every transition of the layer's breaker, with the
    /// upstream's name, whatever caused it: a call through this layer or
    /// another, a drop, a timeout, news from another replica, `force_open`
    /// or `reset` (see [`Breaker::on_transition`]). Several hooks are
    /// called in the order they were added, after the breaker's observer.
    ///
    /// The hook is heard while this layer or a service it built lives, and
    /// nothing travels with a call. Build the layer once and clone it: each
    /// layer built with a hook adds it again.
    pub fn on_transition(mut self, hook: impl OnTransition) -> Self {
        let (breaker, name) = (&self.breaker, &self.upstream);
        self.hooks.add(Arc::new(hook), |hook| {
            breaker.hooks().lend(name.clone(), hook)
        });
        self
    }

    /// Records what the breaker did to each call on a span (feature
    /// `tracing`): `circuitbreaker.name`, `circuitbreaker.state`,
    /// `circuitbreaker.outcome`, and for a rejected call an event with its
    /// reason and retry-after, INFO at most once per open period (see
    /// [`export::tracing`](crate::export::tracing)).
    ///
    /// ```
    /// use failfast::export::tracing::CallSpan;
    /// use failfast::tower::FailFastLayer;
    /// use failfast::Breaker;
    /// use std::sync::Arc;
    ///
    /// let breaker = Arc::new(Breaker::builder().consecutive_failures(5).build()?);
    /// let layer = FailFastLayer::new(breaker).upstream("payments").trace_calls(CallSpan::Current);
    /// # let _ = layer;
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    #[cfg(feature = "tracing")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tracing")))]
    pub fn trace_calls(mut self, span: crate::export::tracing::CallSpan) -> Self {
        self.watch = self.watch.upstream(self.upstream.clone()).trace(span);
        self
    }

    /// Records per-call series (feature `metrics`): rejections by reason,
    /// and the call duration histogram if asked (see
    /// [`export::metrics`](crate::export::metrics)). The series' handles are
    /// registered now, with the recorder installed now: install it first.
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn call_metrics(mut self, metrics: crate::export::metrics::CallMetrics) -> Self {
        self.watch = self.watch.upstream(self.upstream.clone()).metrics(metrics);
        self
    }

    /// The breaker.
    pub fn breaker(&self) -> &Arc<Breaker<C>> {
        &self.breaker
    }
}

impl<S, Cl: Clone, C: Clock, M> Layer<S> for FailFastLayer<Cl, C, M> {
    type Service = FailFast<S, Cl, C, M>;

    fn layer(&self, inner: S) -> Self::Service {
        FailFast {
            inner,
            breaker: self.breaker.clone(),
            classify: self.classify.clone(),
            timeout: self.timeout,
            _hooks: self.hooks.clone(),
            naming: self.naming.clone(),
            watch: self.watch.clone(),
            mode: PhantomData,
        }
    }
}

/// A service behind a breaker, failing fast while it is open.
///
/// * `poll_ready` forwards the inner service's readiness and nothing else: an
///   open breaker never makes it `Pending` or `Err` (tower's `LoadShed`
///   precedent), so callers learn of the rejection at once.
/// * `call` asks the breaker for an [`OwnedPermit`](crate::OwnedPermit). When
///   refused it returns a future that is ready with
///   [`Rejected`](crate::Rejected) boxed in [`BoxError`] (downcast it back; it
///   carries `retry_after`) and **does not call the inner service**; the
///   readiness reserved by `poll_ready` stays with the inner service for the
///   next call.
/// * Admitted, the permit moves into the [`ResponseFuture`], which records
///   the classified result when the inner future resolves, or a failure at
///   the deadline; dropped first, its permit is judged as a drop (neutral
///   when early, counted when late: the crate's table of endings). In
///   [`AtEnd`] mode a response whose head cannot tell carries the permit on
///   in its body, a [`PermitBody`].
/// * A request marked as a retry (a [`RetryAttempt`](crate::http::RetryAttempt)
///   in its extensions, as [`RetryPolicy`](super::RetryPolicy) marks it) is
///   admitted through the breaker's retry budget
///   ([`Breaker::try_retry`](crate::Breaker::try_retry)): refused with
///   [`RejectReason::RetryBudget`](crate::RejectReason::RetryBudget) when the
///   budget has no room. Any other request is a first try, which pays into
///   the budget. The request type says which it is ([`Attempt`]).
///
/// ```
/// use failfast::tower::{FailFast, HttpClassifier};
/// use failfast::{Breaker, Rejected};
/// use std::sync::Arc;
/// use tower::{Service, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower::BoxError> {
/// let breaker = Arc::new(Breaker::builder().consecutive_failures(2).build()?);
/// let upstream = tower::service_fn(|_req: http::Request<()>| async {
///     Ok::<_, std::io::Error>(http::Response::builder().status(503).body(()).unwrap())
/// });
/// let mut svc = FailFast::new(upstream, breaker); // or FailFastLayer::new(breaker).layer(upstream)
/// for _ in 0..2 {
///     // The default classifier: any `Ok` is a success, even a 503.
///     assert_eq!(svc.ready().await?.call(http::Request::new(())).await?.status(), 503);
/// }
/// assert_eq!(svc.breaker().state(), failfast::State::Closed);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct FailFast<S, Cl = DefaultClassifier, C: Clock = QuantaClock, M = AtHead> {
    inner: S,
    breaker: Arc<Breaker<C>>,
    classify: Cl,
    timeout: Option<Duration>,
    /// Keeps the layer's hooks heard while this service lives.
    _hooks: LayerHooks,
    naming: Naming<(), C>,
    watch: Watcher<()>,
    mode: PhantomData<fn() -> M>,
}

impl<S, C: Clock> FailFast<S, DefaultClassifier, C> {
    /// `inner` behind `breaker`, with the default classifier.
    pub fn new(inner: S, breaker: Arc<Breaker<C>>) -> Self {
        FailFastLayer::new(breaker).layer(inner)
    }
}

impl<S, Cl, C: Clock, M> FailFast<S, Cl, C, M> {
    /// The breaker.
    pub fn breaker(&self) -> &Arc<Breaker<C>> {
        &self.breaker
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// What `call` does in either mode: one clock reading, the admission,
    /// then a ready rejection or the inner call with its permit.
    fn guard<Req>(&mut self, req: Req) -> ResponseFuture<S::Future, Cl, C, (), M>
    where
        S: Service<Req>,
        Req: Attempt,
        Cl: Clone,
    {
        let owner = Owner::Shared(self.breaker.clone());
        let now = self.breaker.now();
        let watching = self.watch.begin(&owner);
        // A retry ([`RetryAttempt`](crate::http::RetryAttempt)) goes through
        // the breaker's retry budget, as in the keyed layer: one test for a
        // request without extensions, the search out of line.
        let retry = req.retry_attempt().is_some();
        let admission = admit_attempt(owner, now, &self.naming, retry);
        ResponseFuture::admitted(
            watching.admitted(&self.watch, admission, now),
            || self.inner.call(req),
            self.classify.clone(),
            self.timeout,
        )
    }
}

impl<S, Req, Cl, C> Service<Req> for FailFast<S, Cl, C>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    Req: Attempt,
    Cl: Classify<S::Response, BoxError> + Clone,
    C: Clock,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future, Cl, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        self.guard(req)
    }
}

impl<S, Req, G, C, B> Service<Req> for FailFast<S, G, C, AtEnd>
where
    S: Service<Req, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
    Req: Attempt,
    B: http_body::Body,
    G: ClassifyStream<B, BoxError> + Clone,
    C: Clock,
{
    type Response = http::Response<PermitBody<B, G::Eos, C>>;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future, G, C, (), AtEnd>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        self.guard(req)
    }
}
