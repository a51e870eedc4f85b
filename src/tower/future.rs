//! [`ResponseFuture`]: carries the permit to the end of the call.

use core::fmt;
use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{ready, Context, Poll};
use core::time::Duration;
use std::sync::Arc;

use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tower::BoxError;

use super::classify::Classify;
use super::keyed::KeyedPermit;
use super::stream::AtHead;
use super::timeout::TimedOut;
use super::Hook;
use crate::breaker::Breaker;
use crate::clock::{Clock, Nanos};
use crate::error::Rejected;
use crate::observe::Transition;
use crate::outcome::Outcome;
use crate::permit::OwnedPermit;

/// Where a layer's verdict transitions go: the hook and how to name the upstream.
pub(crate) struct Reporter<K> {
    pub(crate) hook: Hook,
    /// The name of a single-breaker layer's upstream.
    pub(crate) upstream: Arc<str>,
    /// How a keyed layer names a key (on transitions only: it allocates).
    pub(crate) name_of: Option<fn(&K) -> String>,
}

impl<K> Clone for Reporter<K> {
    fn clone(&self) -> Self {
        Reporter {
            hook: self.hook.clone(),
            upstream: self.upstream.clone(),
            name_of: self.name_of,
        }
    }
}

impl<K> fmt::Debug for Reporter<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reporter")
            .field("upstream", &self.upstream)
            .finish_non_exhaustive()
    }
}

impl<K> Reporter<K> {
    pub(crate) fn new(hook: Hook, upstream: Arc<str>) -> Reporter<K> {
        Reporter {
            hook,
            upstream,
            name_of: None,
        }
    }

    pub(crate) fn report(&self, key: Option<&K>, transition: &Transition) {
        match (key, self.name_of) {
            (Some(key), Some(name_of)) => self.hook.0.on_transition(&name_of(key), transition),
            _ => self.hook.0.on_transition(&self.upstream, transition),
        }
    }
}

/// The permit a layer carries into its response future.
pub(crate) enum LayerPermit<K, C: Clock> {
    /// From an `Arc<Breaker>`.
    Owned(OwnedPermit<C>),
    /// From a registry handle.
    Keyed(KeyedPermit<K, C>),
}

impl<K, C: Clock> LayerPermit<K, C> {
    fn started_at(&self) -> Nanos {
        match self {
            LayerPermit::Owned(p) => p.started_at(),
            LayerPermit::Keyed(p) => p.started_at(),
        }
    }

    /// Restarts the call's clock at `now` (a permit taken ahead of its call).
    pub(crate) fn restart_at(&mut self, now: Nanos) {
        match self {
            LayerPermit::Owned(p) => p.restart_at(now),
            LayerPermit::Keyed(p) => p.restart_at(now),
        }
    }

    /// The registry key the permit's breaker belongs to, if any.
    pub(crate) fn key(&self) -> Option<&K> {
        match self {
            LayerPermit::Owned(_) => None,
            LayerPermit::Keyed(p) => p.key(),
        }
    }

    /// Gives the permit back neutrally, whatever its age (see [`shielded`]).
    pub(crate) fn release(self) {
        match self {
            LayerPermit::Owned(p) => p.release(),
            LayerPermit::Keyed(p) => p.release(),
        }
    }

    /// Records `outcome` (at `at`, or now) and reports any transition.
    pub(super) fn record(
        self,
        outcome: Outcome,
        at: Option<Nanos>,
        reporter: Option<&Reporter<K>>,
    ) {
        match self {
            LayerPermit::Owned(p) => {
                let t = match at {
                    Some(at) => p.record_at(outcome, at),
                    None => p.record(outcome),
                };
                if let (Some(t), Some(r)) = (t, reporter) {
                    r.report(None, &t);
                }
            }
            LayerPermit::Keyed(p) => p.record(outcome, at, reporter),
        }
    }
}

impl<K, C: Clock> fmt::Debug for LayerPermit<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayerPermit::Owned(p) => p.fmt(f),
            LayerPermit::Keyed(p) => p.fmt(f),
        }
    }
}

/// Admits a call on `breaker` and reports the transition the admission
/// itself caused (Open → HalfOpen).
///
/// The admission always reads the clock: a call through a layer can be
/// abandoned (an outer timeout, a client that goes away), and only a permit
/// that knows when it started can be judged by its age when it is dropped.
pub(crate) fn admit<K, C: Clock>(
    breaker: &Arc<Breaker<C>>,
    reporter: Option<&Reporter<K>>,
) -> Result<LayerPermit<K, C>, Rejected> {
    let permit = breaker.try_acquire_owned_at(breaker.now())?;
    let transition = permit.transition();
    let permit = LayerPermit::Owned(permit);
    Ok(match (transition, reporter) {
        (Some(t), Some(r)) => shielded(permit, |_| r.report(None, &t)),
        _ => permit,
    })
}

/// Runs user code (a transition hook) while `permit` is held. Should it
/// panic, the permit is given back neutrally — the hook's panic says nothing
/// about the dependency, and a probe's slot must not stay taken until the
/// lease ends — and the panic goes on unchanged.
pub(crate) fn shielded<K, C: Clock>(
    permit: LayerPermit<K, C>,
    hook: impl FnOnce(&LayerPermit<K, C>),
) -> LayerPermit<K, C> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(&permit))) {
        Ok(()) => permit,
        Err(panic) => {
            permit.release();
            std::panic::resume_unwind(panic)
        }
    }
}

/// Drops the permit if the inner future panics while it is polled, so the
/// drop happens *during* the unwind and counts the call as a failure. Without
/// it the permit would wait in the future until whoever caught the panic
/// (tokio's task harness, say) drops the future — no longer panicking, so the
/// call would be judged by its age instead.
struct FailOnUnwind<'a, K, C: Clock>(&'a mut Option<LayerPermit<K, C>>);

impl<K, C: Clock> Drop for FailOnUnwind<'_, K, C> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            drop(self.0.take());
        }
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F> {
        Called { #[pin] fut: F },
        Rejected { rejected: Option<Rejected> },
        Failed { error: Option<BoxError> },
    }
}

pin_project! {
    /// The response future of every failfast layer: a rejection ready at
    /// once, or the inner call with its permit, recorded when it resolves
    /// (or when its deadline fires). Dropped early, the permit counts as
    /// ignored.
    ///
    /// `M` is when the verdict is taken: [`AtHead`] (the default), or
    /// [`AtEnd`](super::AtEnd), where a response whose head cannot tell
    /// carries the permit on in its body.
    ///
    /// ```
    /// use failfast::tower::{FailFastLayer, ResponseFuture};
    /// use failfast::{Breaker, Rejected};
    /// use std::sync::Arc;
    /// use tower::{Layer, Service};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), failfast::ConfigError> {
    /// let breaker = Arc::new(Breaker::builder().consecutive_failures(1).build()?);
    /// let mut svc = FailFastLayer::new(breaker.clone())
    ///     .layer(tower::service_fn(|x: u32| async move { Err::<u32, _>(format!("{x} failed")) }));
    ///
    /// let call = svc.call(1); // admitted: the permit is inside the future
    /// assert!(call.await.is_err()); // resolved: the failure is recorded, the breaker opens
    /// let err = svc.call(2).await.unwrap_err(); // ready at once, the service untouched
    /// assert!(err.is::<Rejected>());
    ///
    /// drop(svc.call(3)); // a future dropped before it resolves records nothing
    /// # Ok(())
    /// # }
    /// ```
    pub struct ResponseFuture<F, Cl, C, K = (), M = AtHead>
    where
        C: Clock,
    {
        #[pin]
        kind: Kind<F>,
        #[pin]
        deadline: Option<Sleep>,
        permit: Option<LayerPermit<K, C>>,
        classify: Cl,
        timeout: Duration,
        reporter: Option<Reporter<K>>,
        mode: PhantomData<fn() -> M>,
    }
}

impl<F, Cl, C: Clock, K, M> ResponseFuture<F, Cl, C, K, M> {
    pub(crate) fn rejected(rejected: Rejected, classify: Cl) -> Self {
        ResponseFuture {
            kind: Kind::Rejected {
                rejected: Some(rejected),
            },
            deadline: None,
            permit: None,
            classify,
            timeout: Duration::ZERO,
            reporter: None,
            mode: PhantomData,
        }
    }

    /// Refused before any breaker was asked (a keyed layer found no key):
    /// ready with `error`, the inner service untouched.
    pub(crate) fn failed(error: BoxError, classify: Cl) -> Self {
        ResponseFuture {
            kind: Kind::Failed { error: Some(error) },
            deadline: None,
            permit: None,
            classify,
            timeout: Duration::ZERO,
            reporter: None,
            mode: PhantomData,
        }
    }

    /// What every layer's `call` does with its admission: a ready rejection
    /// (the inner service untouched), or the inner call with its permit.
    pub(crate) fn admitted(
        admission: Result<LayerPermit<K, C>, Rejected>,
        call: impl FnOnce() -> F,
        classify: Cl,
        timeout: Option<Duration>,
        reporter: Option<Reporter<K>>,
    ) -> Self {
        match admission {
            Err(rejected) => ResponseFuture::rejected(rejected, classify),
            Ok(permit) => ResponseFuture::called(call(), permit, classify, timeout, reporter),
        }
    }

    pub(crate) fn called(
        fut: F,
        permit: LayerPermit<K, C>,
        classify: Cl,
        timeout: Option<Duration>,
        reporter: Option<Reporter<K>>,
    ) -> Self {
        ResponseFuture {
            kind: Kind::Called { fut },
            deadline: timeout.map(tokio::time::sleep),
            permit: Some(permit),
            classify,
            timeout: timeout.unwrap_or_default(),
            reporter,
            mode: PhantomData,
        }
    }
}

impl<F, Cl, C, K, T, E> Future for ResponseFuture<F, Cl, C, K>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
    Cl: Classify<T, E>,
    C: Clock,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.poll_call(cx, |classify, result, permit, reporter| {
            if let Some(permit) = permit {
                permit.record(classify.classify(&result), None, reporter.as_ref());
            }
            result
        })
    }
}

impl<F, Cl, C: Clock, K, M> ResponseFuture<F, Cl, C, K, M> {
    /// Polls the call. When it resolves, `finish` gets the classifier, the
    /// result, the permit (`None` when unguarded) and the reporter, and
    /// decides what the caller receives; at the deadline the permit records
    /// a failure here.
    pub(super) fn poll_call<T, E, U>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        finish: impl FnOnce(
            &Cl,
            Result<T, E>,
            Option<LayerPermit<K, C>>,
            Option<Reporter<K>>,
        ) -> Result<U, E>,
    ) -> Poll<Result<U, BoxError>>
    where
        F: Future<Output = Result<T, E>>,
        E: Into<BoxError>,
    {
        let this = self.project();
        let fut = match this.kind.project() {
            KindProj::Rejected { rejected } => {
                let rejected = rejected
                    .take()
                    .expect("ResponseFuture polled after completion");
                return Poll::Ready(Err(Box::new(rejected)));
            }
            KindProj::Failed { error } => {
                let error = error
                    .take()
                    .expect("ResponseFuture polled after completion");
                return Poll::Ready(Err(error));
            }
            KindProj::Called { fut } => fut,
        };
        let polled = {
            let _guard = FailOnUnwind(this.permit);
            fut.poll(cx)
        };
        if let Poll::Ready(result) = polled {
            let permit = this.permit.take();
            let result = finish(this.classify, result, permit, this.reporter.take());
            return Poll::Ready(result.map_err(Into::into));
        }
        if let Some(deadline) = this.deadline.as_pin_mut() {
            ready!(deadline.poll(cx));
            if let Some(permit) = this.permit.take() {
                // The instant the deadline fired, not the instant we noticed.
                let fired = permit.started_at().saturating_add(*this.timeout);
                permit.record(Outcome::Failure, Some(fired), this.reporter.as_ref());
            }
            return Poll::Ready(Err(Box::new(TimedOut::new(*this.timeout))));
        }
        Poll::Pending
    }
}

impl<F, Cl, C: Clock, K, M> fmt::Debug for ResponseFuture<F, Cl, C, K, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("permit", &self.permit)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}
