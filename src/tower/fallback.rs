//! [`FallbackLayer`]: turns a breaker's rejection into a response — a 503
//! with `Retry-After` ([`unavailable`](crate::http::unavailable)), or a
//! stale copy from a cache, marked as such
//! ([`mark_stale`](crate::http::mark_stale); the marks, and why these, are
//! in [`failfast::http`](crate::http#saying-an-answer-is-a-fallback)).

use core::fmt;
use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{ready, Context, Poll};
use std::sync::Arc;

use pin_project_lite::pin_project;
use tower::{BoxError, Layer, Service};

use crate::error::Rejected;

/// `circuit_breaker_fallback_total{upstream}` (feature `metrics`): a handle
/// registered when the layer is built; nothing without the feature.
#[derive(Clone)]
struct Count {
    #[cfg(feature = "metrics")]
    counter: metrics::Counter,
}

impl Count {
    fn new(upstream: Option<&str>) -> Count {
        #[cfg(not(feature = "metrics"))]
        let _ = upstream;
        Count {
            #[cfg(feature = "metrics")]
            counter: crate::export::meters::fallback_counter(upstream),
        }
    }

    #[inline]
    fn increment(&self) {
        #[cfg(feature = "metrics")]
        self.counter.increment(1);
    }
}

/// What a [`FallbackLayer`] answers a rejected request with.
///
/// `remember` runs for **every** request, before the inner service takes
/// it, and keeps what an answer may need (a cache key, say): keep it cheap.
/// `answer` runs only for a request the breaker rejected (the inner service
/// was not called); `None` lets the rejection through unchanged (a cache
/// miss, say).
///
/// Closures make recovers: see [`FallbackLayer::new`] and
/// [`FallbackLayer::with_request`]. A type of your own, given to
/// [`FallbackLayer::from_recover`], can be named (in a struct field, a
/// service's type):
///
/// ```
/// use failfast::tower::{unavailable, FailFastLayer, FallbackLayer, Recover};
/// use failfast::{Breaker, Rejected};
/// use std::sync::Arc;
/// use tower::{ServiceBuilder, ServiceExt};
///
/// /// A 503 that carries the request's `x-request-id` back.
/// struct Unavailable;
///
/// impl<B> Recover<http::Request<B>, http::Response<String>> for Unavailable {
///     type Memo = Option<http::HeaderValue>;
///
///     fn remember(&self, req: &http::Request<B>) -> Self::Memo {
///         req.headers().get("x-request-id").cloned()
///     }
///
///     fn answer(&self, id: Self::Memo, rejected: &Rejected) -> Option<http::Response<String>> {
///         let mut response = unavailable::<String>(rejected);
///         if let Some(id) = id {
///             response.headers_mut().insert("x-request-id", id);
///         }
///         Some(response)
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower::BoxError> {
/// let breaker = Arc::new(Breaker::builder().consecutive_failures(1).build()?);
/// let svc = ServiceBuilder::new()
///     .layer(FallbackLayer::from_recover(Unavailable))
///     .layer(FailFastLayer::new(breaker.clone()))
///     .service_fn(|_req: http::Request<()>| async {
///         Ok::<_, std::io::Error>(http::Response::new("fresh".to_owned()))
///     });
/// breaker.force_open();
/// let req = http::Request::get("/").header("x-request-id", "7f3a").body(()).unwrap();
/// let answer = svc.oneshot(req).await?;
/// assert_eq!(answer.status(), 503);
/// assert_eq!(answer.headers()["x-request-id"], "7f3a");
/// # Ok(())
/// # }
/// ```
pub trait Recover<Req, Res> {
    /// What is kept of each request.
    type Memo;

    /// Keeps what [`answer`](Self::answer) may need of `req`.
    fn remember(&self, req: &Req) -> Self::Memo;

    /// The response for a rejected request, or `None` to let `rejected`
    /// through.
    fn answer(&self, memo: Self::Memo, rejected: &Rejected) -> Option<Res>;
}

/// A recover from the rejection alone (see [`FallbackLayer::new`]): the
/// answer function, wrapped. With a function pointer the layer's type can be
/// written out.
///
/// ```
/// use failfast::tower::{unavailable, FailFastLayer, FallbackLayer, OnRejected};
/// use failfast::{Breaker, Rejected};
/// use std::sync::Arc;
/// use tower::{ServiceBuilder, ServiceExt};
///
/// type Answer = fn(&Rejected) -> Option<http::Response<String>>;
///
/// fn busy(rejected: &Rejected) -> Option<http::Response<String>> {
///     let mut response = unavailable::<String>(rejected);
///     *response.body_mut() = format!("busy: {rejected}");
///     Some(response)
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower::BoxError> {
/// let fallback: FallbackLayer<OnRejected<Answer>> = FallbackLayer::new(busy);
/// let breaker = Arc::new(Breaker::builder().consecutive_failures(1).build()?);
/// let svc = ServiceBuilder::new()
///     .layer(fallback)
///     .layer(FailFastLayer::new(breaker.clone()))
///     .service_fn(|_req: http::Request<()>| async {
///         Ok::<_, std::io::Error>(http::Response::new("fresh".to_owned()))
///     });
/// breaker.force_open();
/// let answer = svc.oneshot(http::Request::new(())).await?;
/// assert_eq!(answer.status(), 503);
/// assert_eq!(answer.body(), "busy: circuit forced open");
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy)]
pub struct OnRejected<F>(F);

impl<F, Req, Res> Recover<Req, Res> for OnRejected<F>
where
    F: Fn(&Rejected) -> Option<Res>,
{
    type Memo = ();

    fn remember(&self, _req: &Req) {}

    fn answer(&self, (): (), rejected: &Rejected) -> Option<Res> {
        (self.0)(rejected)
    }
}

impl<F> fmt::Debug for OnRejected<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OnRejected")
    }
}

/// A recover from what was kept of the request and the rejection (see
/// [`FallbackLayer::with_request`]): the two functions, wrapped.
///
/// ```
/// use failfast::tower::{is_stale, mark_stale, FailFastLayer, FallbackLayer, WithRequest};
/// use failfast::{Breaker, Rejected};
/// use std::sync::Arc;
/// use tower::{ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower::BoxError> {
/// // Kept of each request: its path. Answered: a stale copy of `/rates`, nothing else.
/// let fallback: FallbackLayer<WithRequest<_, _>> = FallbackLayer::with_request(
///     |req: &http::Request<()>| req.uri().path().to_owned(),
///     |path: String, rejected: &Rejected| {
///         (path == "/rates").then(|| {
///             let mut copy = http::Response::new("1.09".to_owned());
///             mark_stale(&mut copy, rejected, None);
///             copy
///         })
///     },
/// );
/// let breaker = Arc::new(Breaker::builder().consecutive_failures(1).build()?);
/// let svc = ServiceBuilder::new()
///     .layer(fallback)
///     .layer(FailFastLayer::new(breaker.clone()))
///     .service_fn(|_req: http::Request<()>| async {
///         Ok::<_, std::io::Error>(http::Response::new("fresh".to_owned()))
///     });
/// breaker.force_open();
/// let answer = svc.clone().oneshot(http::Request::get("/rates").body(())?).await?;
/// assert!(is_stale(&answer));
/// let err = svc.oneshot(http::Request::get("/orders").body(())?).await.unwrap_err();
/// assert!(err.is::<Rejected>()); // no copy: the rejection goes through
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy)]
pub struct WithRequest<R, A> {
    remember: R,
    answer: A,
}

impl<R, A, Req, Res, M> Recover<Req, Res> for WithRequest<R, A>
where
    R: Fn(&Req) -> M,
    A: Fn(M, &Rejected) -> Option<Res>,
{
    type Memo = M;

    fn remember(&self, req: &Req) -> M {
        (self.remember)(req)
    }

    fn answer(&self, memo: M, rejected: &Rejected) -> Option<Res> {
        (self.answer)(memo, rejected)
    }
}

impl<R, A> fmt::Debug for WithRequest<R, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WithRequest")
    }
}

/// Wraps a service whose errors may be a breaker's [`Rejected`] (any
/// failfast layer's, boxed in [`BoxError`]) in a [`Fallback`]: a rejected
/// request is answered by the [`Recover`] instead of failing. Every other
/// error, and every response of a call that ran, passes through unchanged.
///
/// Put it **outside** the failfast layer. With feature `metrics`, each
/// answer counts in `circuit_breaker_fallback_total{upstream}` (the label
/// from [`upstream`](Self::upstream); the handle is registered when the
/// layer is built: install the recorder first).
///
/// ```
/// use failfast::tower::{unavailable, FailFastLayer, FallbackLayer};
/// use failfast::Breaker;
/// use std::sync::Arc;
/// use tower::{Service, ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower::BoxError> {
/// let breaker = Arc::new(Breaker::builder().consecutive_failures(1).build()?);
/// let mut svc = ServiceBuilder::new()
///     .layer(FallbackLayer::new(|rejected| Some(unavailable::<String>(rejected))))
///     .layer(FailFastLayer::new(breaker.clone()))
///     .service_fn(|_req: http::Request<()>| async {
///         Ok::<_, std::io::Error>(http::Response::new("fresh".to_owned()))
///     });
/// assert_eq!(svc.ready().await?.call(http::Request::new(())).await?.body(), "fresh");
///
/// breaker.force_open();
/// let answer = svc.ready().await?.call(http::Request::new(())).await?;
/// assert_eq!(answer.status(), 503);
/// assert_eq!(answer.headers()["x-failfast"], "rejected");
/// # Ok(())
/// # }
/// ```
pub struct FallbackLayer<F> {
    /// Shared by the layer's services and their calls: a call takes a
    /// reference count, never a copy of what the recover holds (a cache).
    recover: Arc<F>,
    upstream: Option<Arc<str>>,
    count: Count,
}

impl<F> Clone for FallbackLayer<F> {
    fn clone(&self) -> Self {
        FallbackLayer {
            recover: self.recover.clone(),
            upstream: self.upstream.clone(),
            count: self.count.clone(),
        }
    }
}

impl<F> FallbackLayer<F> {
    /// A fallback answered by `recover`, any [`Recover`] (a type of your
    /// own, nameable in a service's type, unlike a closure).
    pub fn from_recover(recover: F) -> FallbackLayer<F> {
        FallbackLayer {
            recover: Arc::new(recover),
            upstream: None,
            count: Count::new(None),
        }
    }

    /// Names the upstream in `circuit_breaker_fallback_total{upstream}`
    /// (feature `metrics`); without it the series has no `upstream` label.
    pub fn upstream(mut self, name: impl Into<Arc<str>>) -> Self {
        let name = name.into();
        self.count = Count::new(Some(&name));
        self.upstream = Some(name);
        self
    }
}

impl<G> FallbackLayer<OnRejected<G>> {
    /// A fallback from the rejection alone: `answer(&rejected)` is the
    /// response, or `None` to let the rejection through. For HTTP,
    /// [`unavailable`](crate::http::unavailable) is the usual answer.
    pub fn new<Res>(answer: G) -> Self
    where
        G: Fn(&Rejected) -> Option<Res>,
    {
        FallbackLayer::from_recover(OnRejected(answer))
    }
}

impl<R, A> FallbackLayer<WithRequest<R, A>> {
    /// A fallback that needs something of the request: `remember(&req)`
    /// runs for every request and keeps a memo; `answer(memo, &rejected)`
    /// runs for a rejected one.
    ///
    /// ```
    /// use failfast::tower::{mark_stale, FallbackLayer};
    /// use std::time::Duration;
    ///
    /// // Answer a rejected GET from a cache of last good bodies, marked stale.
    /// let cache = std::collections::HashMap::from([("/rates".to_owned(), "1.09".to_owned())]);
    /// let layer = FallbackLayer::with_request(
    ///     |req: &http::Request<()>| (req.method() == http::Method::GET).then(|| req.uri().path().to_owned()),
    ///     move |path: Option<String>, rejected| {
    ///         let body = cache.get(&path?)?.clone();
    ///         let mut response = http::Response::new(body);
    ///         mark_stale(&mut response, rejected, Some(Duration::from_secs(42)));
    ///         Some(response)
    ///     },
    /// );
    /// # let _ = layer;
    /// ```
    pub fn with_request<Req, M, Res>(remember: R, answer: A) -> Self
    where
        R: Fn(&Req) -> M,
        A: Fn(M, &Rejected) -> Option<Res>,
    {
        FallbackLayer::from_recover(WithRequest { remember, answer })
    }
}

impl<F: fmt::Debug> fmt::Debug for FallbackLayer<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FallbackLayer")
            .field("recover", &self.recover)
            .field("upstream", &self.upstream)
            .finish()
    }
}

impl<S, F> Layer<S> for FallbackLayer<F> {
    type Service = Fallback<S, F>;

    fn layer(&self, inner: S) -> Fallback<S, F> {
        Fallback {
            inner,
            recover: self.recover.clone(),
            count: self.count.clone(),
        }
    }
}

/// A service whose breaker rejections are answered by a [`Recover`]; see
/// [`FallbackLayer`]. Only rejections: the errors of calls that ran pass
/// through unchanged.
///
/// ```
/// use failfast::tower::{unavailable, FailFast, Fallback, FallbackLayer};
/// use failfast::{Breaker, State};
/// use std::sync::Arc;
/// use tower::{Layer, Service, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower::BoxError> {
/// let breaker = Arc::new(Breaker::builder().consecutive_failures(1).build()?);
/// let upstream = tower::service_fn(|_req: http::Request<()>| async {
///     Err::<http::Response<()>, _>(std::io::Error::other("connection reset"))
/// });
/// let fallback = FallbackLayer::new(|rejected| Some(unavailable::<()>(rejected)));
/// let mut svc: Fallback<_, _> = fallback.layer(FailFast::new(upstream, breaker));
///
/// // The call ran and failed: its error, and the breaker trips.
/// let err = svc.ready().await?.call(http::Request::new(())).await.unwrap_err();
/// assert_eq!(err.to_string(), "connection reset");
/// assert_eq!(svc.get_ref().breaker().state(), State::Open);
/// // Rejected: answered.
/// let answer = svc.ready().await?.call(http::Request::new(())).await?;
/// assert_eq!(answer.status(), 503);
/// # Ok(())
/// # }
/// ```
pub struct Fallback<S, F> {
    inner: S,
    recover: Arc<F>,
    count: Count,
}

impl<S: Clone, F> Clone for Fallback<S, F> {
    fn clone(&self) -> Self {
        Fallback {
            inner: self.inner.clone(),
            recover: self.recover.clone(),
            count: self.count.clone(),
        }
    }
}

impl<S: fmt::Debug, F: fmt::Debug> fmt::Debug for Fallback<S, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fallback")
            .field("inner", &self.inner)
            .field("recover", &self.recover)
            .finish()
    }
}

impl<S, F> Fallback<S, F> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, F, Req> Service<Req> for Fallback<S, F>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    F: Recover<Req, S::Response>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = FallbackFuture<S::Future, F, F::Memo, Req>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let memo = self.recover.remember(&req);
        FallbackFuture {
            inner: self.inner.call(req),
            recover: Some((self.recover.clone(), memo)),
            count: self.count.clone(),
            request: PhantomData,
        }
    }
}

pin_project! {
    /// The response future of a [`Fallback`]: the inner call's future, and
    /// what [`Recover::remember`] kept of the request (taken when `call`
    /// was made) for the answer if that future fails with a rejection.
    ///
    /// ```
    /// use failfast::tower::{unavailable, FailFast, FallbackFuture, FallbackLayer};
    /// use failfast::Breaker;
    /// use std::sync::Arc;
    /// use tower::{Layer, Service, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), tower::BoxError> {
    /// let breaker = Arc::new(Breaker::builder().consecutive_failures(1).build()?);
    /// let upstream = tower::service_fn(|_req: http::Request<()>| async {
    ///     Ok::<_, std::io::Error>(http::Response::new(()))
    /// });
    /// let fallback = FallbackLayer::new(|rejected| Some(unavailable::<()>(rejected)));
    /// let mut svc = fallback.layer(FailFast::new(upstream, breaker.clone()));
    /// breaker.force_open();
    /// let future: FallbackFuture<_, _, _, _> = svc.ready().await?.call(http::Request::new(()));
    /// assert_eq!(future.await?.status(), 503);
    /// # Ok(())
    /// # }
    /// ```
    pub struct FallbackFuture<Fut, F, M, Req> {
        #[pin]
        inner: Fut,
        recover: Option<(Arc<F>, M)>,
        count: Count,
        request: PhantomData<fn(Req)>,
    }
}

impl<Fut, F, M, Req> fmt::Debug for FallbackFuture<Fut, F, M, Req> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FallbackFuture")
    }
}

impl<Fut, F, M, Res, E, Req> Future for FallbackFuture<Fut, F, M, Req>
where
    Fut: Future<Output = Result<Res, E>>,
    E: Into<BoxError>,
    F: Recover<Req, Res, Memo = M>,
{
    type Output = Result<Res, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let err = match ready!(this.inner.poll(cx)) {
            Ok(response) => return Poll::Ready(Ok(response)),
            Err(err) => err.into(),
        };
        let Some(rejected) = err.downcast_ref::<Rejected>() else {
            return Poll::Ready(Err(err));
        };
        let Some((recover, memo)) = this.recover.take() else {
            return Poll::Ready(Err(err));
        };
        match recover.answer(memo, rejected) {
            Some(response) => {
                this.count.increment();
                Poll::Ready(Ok(response))
            }
            None => Poll::Ready(Err(err)),
        }
    }
}
