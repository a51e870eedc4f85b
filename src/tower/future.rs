//! [`ResponseFuture`]: carries the permit to the end of the call.

use core::fmt;
use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{ready, Context, Poll};
use core::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tower::BoxError;

use super::mode::AtHead;
use super::timeout::TimedOut;
use super::watch::{hint_unless_success, Held, Inside, Polling};
use crate::clock::Clock;
use crate::error::Rejected;
use crate::http::Classify;
use crate::outcome::Outcome;

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
    /// (or when its deadline fires). Dropped before it resolves, its permit
    /// is judged as a drop (the table "How every call ends" on the crate's
    /// front page): neutral when early, counted when late.
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
    /// drop(svc.call(3)); // a future dropped at once records nothing
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
        permit: Option<Held<K, C>>,
        classify: Cl,
        timeout: Duration,
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
            mode: PhantomData,
        }
    }

    /// What every layer's `call` does with its admission: a ready rejection
    /// (the inner service untouched), or the inner call with its permit.
    #[inline(always)]
    pub(crate) fn admitted(
        admission: Result<Held<K, C>, Rejected>,
        call: impl FnOnce() -> F,
        classify: Cl,
        timeout: Option<Duration>,
    ) -> Self {
        match admission {
            Err(rejected) => ResponseFuture::rejected(rejected, classify),
            Ok(permit) => {
                let fut = {
                    let _inside = Inside::new(&permit);
                    call()
                };
                ResponseFuture::called(fut, permit, classify, timeout)
            }
        }
    }

    pub(crate) fn called(
        fut: F,
        permit: Held<K, C>,
        classify: Cl,
        timeout: Option<Duration>,
    ) -> Self {
        ResponseFuture {
            kind: Kind::Called { fut },
            deadline: timeout.map(tokio::time::sleep),
            permit: Some(permit),
            classify,
            timeout: timeout.unwrap_or_default(),
            mode: PhantomData,
        }
    }
}

impl<F, Cl, C, K, T, E> Future for ResponseFuture<F, Cl, C, K>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
    Cl: Classify<T, BoxError>,
    C: Clock,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.poll_call(cx, |classify, result, permit| {
            if let Some(permit) = permit {
                let outcome = classify.classify(&result);
                let hint = hint_unless_success(outcome, || classify.hint(&result));
                permit.record(outcome, hint, None);
            }
            result
        })
    }
}

impl<F, Cl, C: Clock, K, M> ResponseFuture<F, Cl, C, K, M> {
    /// Polls the call. When it resolves, `finish` gets the classifier, the
    /// result with its error boxed (what the caller receives anyway, and
    /// what a classifier reads the error's source chain from), the permit
    /// (`None` when unguarded), and decides what the
    /// caller receives; at the deadline the permit records a failure here.
    pub(super) fn poll_call<T, E, U>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        finish: impl FnOnce(&Cl, Result<T, BoxError>, Option<Held<K, C>>) -> Result<U, BoxError>,
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
            let _guard = Polling::new(this.permit);
            fut.poll(cx)
        };
        if let Poll::Ready(result) = polled {
            let permit = this.permit.take();
            let result = result.map_err(Into::into);
            return Poll::Ready(finish(this.classify, result, permit));
        }
        if let Some(deadline) = this.deadline.as_pin_mut() {
            ready!(deadline.poll(cx));
            if let Some(permit) = this.permit.take() {
                // The instant the deadline fired, not the instant we noticed.
                let fired = permit.started_at().saturating_add(*this.timeout);
                permit.record(Outcome::Failure, None, Some(fired));
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
