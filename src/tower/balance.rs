//! [`EjectLayer`] / [`Eject`]: a breaker per endpoint under `tower::balance`.

use core::fmt;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::future::Future;
use std::sync::Arc;

use tokio::time::{Instant, Sleep};
use tower::{BoxError, Layer, Service};

use super::future::ResponseFuture;
use super::hook::LayerHooks;
use super::permit::{admit, LayerPermit, Naming, Owner};
use super::watch::Watcher;
use crate::breaker::Breaker;
use crate::clock::{Clock, QuantaClock};
use crate::hooks::OnTransition;
use crate::http::{Classify, DefaultClassifier};

/// The longest an ejected endpoint sleeps before it looks at its breaker
/// again (see [`EjectLayer::recheck`]).
pub const DEFAULT_RECHECK: Duration = Duration::from_secs(1);

/// Wraps an endpoint in an [`Eject`] on `breaker`. Use one breaker per
/// endpoint, e.g. from a [`Registry`](crate::Registry) keyed by address.
///
/// ```
/// use failfast::tower::EjectLayer;
/// use failfast::Breaker;
/// use std::sync::Arc;
/// use tower::Layer;
///
/// let endpoint = tower::service_fn(|req: u32| async move { Ok::<_, std::io::Error>(req) });
/// let breaker = Arc::new(Breaker::builder().consecutive_failures(5).build()?);
/// let endpoint = EjectLayer::new(breaker).layer(endpoint);
/// // Hand `endpoint` (wrapped in a `tower::load` measure) to `tower::balance::p2c::Balance`.
/// # let _ = endpoint;
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct EjectLayer<Cl = DefaultClassifier, C: Clock = QuantaClock> {
    breaker: Arc<Breaker<C>>,
    classify: Cl,
    timeout: Option<Duration>,
    recheck: Duration,
    hooks: LayerHooks,
    upstream: Arc<str>,
    naming: Naming<(), C>,
    watch: Watcher<()>,
}

impl<C: Clock> EjectLayer<DefaultClassifier, C> {
    /// A layer on `breaker`, classifying `Ok` as success and `Err` as failure.
    pub fn new(breaker: Arc<Breaker<C>>) -> Self {
        EjectLayer {
            breaker,
            classify: DefaultClassifier,
            timeout: None,
            recheck: DEFAULT_RECHECK,
            hooks: LayerHooks::default(),
            upstream: Arc::from(""),
            naming: Naming::Unnamed,
            watch: Watcher::none(),
        }
    }
}

impl<Cl, C: Clock> EjectLayer<Cl, C> {
    /// Classifies results with `classify` instead.
    pub fn classify<Cl2>(self, classify: Cl2) -> EjectLayer<Cl2, C> {
        EjectLayer {
            breaker: self.breaker,
            classify,
            timeout: self.timeout,
            recheck: self.recheck,
            hooks: self.hooks,
            upstream: self.upstream,
            naming: self.naming,
            watch: self.watch,
        }
    }

    /// Cuts each admitted call after `timeout` (see [`TimedOut`](super::TimedOut)).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The longest `poll_ready` stays `Pending` before it asks the breaker
    /// again, even when the breaker names a later retry time (default
    /// [`DEFAULT_RECHECK`]). It bounds how long a manual
    /// [`reset`](crate::Breaker::reset), a closed probe round or a forced-open
    /// breaker (which names no retry time) goes unnoticed. At least 1 ms.
    pub fn recheck(mut self, recheck: Duration) -> Self {
        self.recheck = recheck.max(Duration::from_millis(1));
        self
    }

    /// The upstream's name, passed to the [`on_transition`](Self::on_transition)
    /// hook, recorded by [`trace_calls`](Self::trace_calls) and
    /// [`call_metrics`](Self::call_metrics), and named by a
    /// [`Rejected`](crate::Rejected) a `call` without a ready permit returns.
    pub fn upstream(mut self, name: impl Into<Arc<str>>) -> Self {
        self.upstream = name.into();
        self.naming = Naming::fixed(&self.upstream);
        self.watch = self.watch.upstream(self.upstream.clone());
        let (breaker, name) = (&self.breaker, &self.upstream);
        self.hooks
            .relend(|hook| breaker.hooks().lend(name.clone(), hook));
        self
    }

    /// Calls `hook` on every transition of the endpoint's breaker, with the
    /// upstream's name, whatever caused it, as
    /// [`FailFastLayer::on_transition`](super::FailFastLayer::on_transition).
    pub fn on_transition(mut self, hook: impl OnTransition) -> Self {
        let (breaker, name) = (&self.breaker, &self.upstream);
        self.hooks.add(Arc::new(hook), |hook| {
            breaker.hooks().lend(name.clone(), hook)
        });
        self
    }

    /// Records what the breaker did to each call on a span (feature
    /// `tracing`), as [`FailFastLayer::trace_calls`](super::FailFastLayer::trace_calls).
    /// An endpoint ejected in `poll_ready` has no call to record: only a
    /// call made without a ready `poll_ready` can be rejected (and logged).
    #[cfg(feature = "tracing")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tracing")))]
    pub fn trace_calls(mut self, span: crate::export::tracing::CallSpan) -> Self {
        self.watch = self.watch.upstream(self.upstream.clone()).trace(span);
        self
    }

    /// Records per-call series (feature `metrics`), as
    /// [`FailFastLayer::call_metrics`](super::FailFastLayer::call_metrics).
    /// Ejection in `poll_ready` is not a rejected call and is not counted.
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn call_metrics(mut self, metrics: crate::export::metrics::CallMetrics) -> Self {
        self.watch = self.watch.upstream(self.upstream.clone()).metrics(metrics);
        self
    }
}

impl<S, Cl: Clone, C: Clock> Layer<S> for EjectLayer<Cl, C> {
    type Service = Eject<S, Cl, C>;

    fn layer(&self, inner: S) -> Self::Service {
        Eject {
            inner,
            breaker: self.breaker.clone(),
            classify: self.classify.clone(),
            timeout: self.timeout,
            recheck: self.recheck,
            _hooks: self.hooks.clone(),
            naming: self.naming.clone(),
            watch: self.watch.clone(),
            permit: None,
            sleep: None,
        }
    }
}

/// An endpoint that a balancer skips while its breaker is open (linkerd's
/// gate semantics, without a task per endpoint).
///
/// * `poll_ready` asks the breaker for a permit first. Refused (Open,
///   ForcedOpen, HalfOpen with every probe slot taken) it returns
///   **`Pending`**, never `Err` — `tower::ready_cache::ReadyCache`, under
///   `p2c::Balance`, drops an endpoint for good on `Err` — and arms a
///   `tokio::time::Sleep` for the breaker's `retry_after` (capped by
///   [`recheck`](EjectLayer::recheck)): the task is woken when the probe time
///   comes, the next `poll_ready` wins the Open → HalfOpen CAS and the
///   endpoint becomes ready as the probe. Admitted, it forwards the inner
///   service's readiness (an inner `Err` passes through unchanged).
/// * The permit is held between `poll_ready` and `call` (and timed from the
///   admission). A repeated `poll_ready` keeps the permit while the breaker
///   has made no transition since admitting it (same generation); otherwise
///   it gives it back unused (neutral, however long it sat idle) — a verdict
///   on it would no longer count — and asks again, so an endpoint left idle
///   across a trip and a recovery calls on a fresh permit, and a stale
///   readiness check never holds a probe slot for longer than the next poll.
/// * `call` uses the held permit; called without a ready `poll_ready` it
///   asks the breaker itself and may return [`Rejected`](crate::Rejected)
///   like [`FailFast`](super::FailFast).
///
/// Put a failfast or queue timeout in front of the balancer: when every
/// endpoint is open, the balancer is `Pending` until the first probe time.
///
/// ```
/// use failfast::tower::Eject;
/// use failfast::Breaker;
/// use std::sync::Arc;
/// use std::task::Poll;
/// use tower::{Service, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower::BoxError> {
/// let breaker = Arc::new(Breaker::builder().consecutive_failures(5).build()?);
/// let endpoint = tower::service_fn(|req: u32| async move { Ok::<_, std::io::Error>(req * 2) });
/// let mut endpoint = Eject::new(endpoint, breaker.clone()); // or EjectLayer::new(breaker).layer(endpoint)
///
/// // Closed: ready, holding the permit its next call uses.
/// endpoint.ready().await?;
/// assert!(endpoint.holds_permit());
/// assert_eq!(endpoint.call(21).await?, 42);
///
/// // Open: not ready, and not an error either, so a balancer keeps it and picks another.
/// breaker.force_open();
/// let ready = std::future::poll_fn(|cx| Poll::Ready(endpoint.poll_ready(cx))).await;
/// assert!(ready.is_pending());
/// # Ok(())
/// # }
/// ```
pub struct Eject<S, Cl = DefaultClassifier, C: Clock = QuantaClock> {
    inner: S,
    breaker: Arc<Breaker<C>>,
    classify: Cl,
    timeout: Option<Duration>,
    recheck: Duration,
    /// Keeps the layer's hooks heard while this service lives.
    _hooks: LayerHooks,
    naming: Naming<(), C>,
    watch: Watcher<()>,
    permit: Option<LayerPermit<(), C>>,
    sleep: Option<Pin<Box<Sleep>>>,
}

impl<S, C: Clock> Eject<S, DefaultClassifier, C> {
    /// `inner` behind `breaker`, with the default classifier.
    pub fn new(inner: S, breaker: Arc<Breaker<C>>) -> Self {
        EjectLayer::new(breaker).layer(inner)
    }
}

impl<S, Cl, C: Clock> Eject<S, Cl, C> {
    /// The breaker.
    pub fn breaker(&self) -> &Arc<Breaker<C>> {
        &self.breaker
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Whether a permit is held for the next `call`.
    pub fn holds_permit(&self) -> bool {
        self.permit.is_some()
    }

    /// Keeps a held permit only while the breaker is still in the generation
    /// that admitted it. Every transition starts a new generation, and the
    /// breaker discards a verdict from an older one: an endpoint left idle
    /// while its breaker went Closed → Open → HalfOpen → Closed would
    /// otherwise make its next call on a permit whose verdict no longer counts.
    fn drop_stale_permit(&mut self) {
        let stale = match &self.permit {
            None => return,
            Some(p) => self.breaker.generation() != p.generation(),
        };
        if stale {
            if let Some(unused) = self.permit.take() {
                // Given back neutrally: however long it sat idle, no call
                // ran on it, so it says nothing about the endpoint.
                unused.release();
            }
        }
    }

    /// Arms the wake-up `wait` from now; `Ready` if it already passed.
    fn sleep(&mut self, wait: Duration, cx: &mut Context<'_>) -> Poll<()> {
        let deadline = Instant::now() + wait;
        let sleep = match &mut self.sleep {
            Some(sleep) => {
                sleep.as_mut().reset(deadline);
                sleep
            }
            None => self
                .sleep
                .insert(Box::pin(tokio::time::sleep_until(deadline))),
        };
        sleep.as_mut().poll(cx)
    }
}

impl<S, Cl, C: Clock> Drop for Eject<S, Cl, C> {
    /// A permit held for a `call` that never came is given back neutrally:
    /// the balancer dropped the endpoint (discovery removed it, or the
    /// balancer itself went away), and no call ran on the permit.
    fn drop(&mut self) {
        if let Some(unused) = self.permit.take() {
            unused.release();
        }
    }
}

impl<S: Clone, Cl: Clone, C: Clock> Clone for Eject<S, Cl, C> {
    /// A clone holds no permit and no timer of its own yet.
    fn clone(&self) -> Self {
        Eject {
            inner: self.inner.clone(),
            breaker: self.breaker.clone(),
            classify: self.classify.clone(),
            timeout: self.timeout,
            recheck: self.recheck,
            _hooks: self._hooks.clone(),
            naming: self.naming.clone(),
            watch: self.watch.clone(),
            permit: None,
            sleep: None,
        }
    }
}

impl<S: fmt::Debug, Cl, C: Clock> fmt::Debug for Eject<S, Cl, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Eject")
            .field("inner", &self.inner)
            .field("breaker", &self.breaker)
            .field("permit", &self.permit)
            .finish_non_exhaustive()
    }
}

impl<S, Req, Cl, C> Service<Req> for Eject<S, Cl, C>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    Cl: Classify<S::Response, BoxError> + Clone,
    C: Clock,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future, Cl, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.drop_stale_permit();
        // Bounded: a wake-up already due is retried a few times, then left
        // to the timer (a 1 ms floor keeps this from spinning).
        for _ in 0..4 {
            if self.permit.is_some() {
                break;
            }
            match admit(
                Owner::Shared(self.breaker.clone()),
                self.breaker.now(),
                &Naming::Unnamed, // a rejection here is a wait, never returned
            ) {
                Ok(permit) => self.permit = Some(permit),
                Err(rejected) => {
                    let wait = rejected
                        .retry_after()
                        .map_or(self.recheck, |after| after.min(self.recheck))
                        .max(Duration::from_millis(1));
                    if self.sleep(wait, cx).is_pending() {
                        return Poll::Pending;
                    }
                }
            }
        }
        if self.permit.is_none() {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let now = self.breaker.now();
        let (watching, admitted) = match self.permit.take() {
            Some(mut permit) => {
                // The call starts now, not when `poll_ready` took the permit:
                // time spent idle in the balancer is neither slowness nor
                // abandonment.
                permit.restart_at(now);
                (self.watch.begin(permit.breaker()), Ok(permit))
            }
            None => {
                let owner = Owner::Shared(self.breaker.clone());
                let watching = self.watch.begin(&owner);
                (watching, admit(owner, now, &self.naming))
            }
        };
        ResponseFuture::admitted(
            watching.admitted(&self.watch, admitted, now),
            || self.inner.call(req),
            self.classify.clone(),
            self.timeout,
        )
    }
}
