//! [`PermitBody`]: a response body that carries its call's permit to the end
//! of the stream, and the [`AtEnd`] response future that hands it over.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{ready, Context, Poll};

use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tower::BoxError;

use super::future::ResponseFuture;
use super::mode::AtEnd;
use super::watch::{hint_unless_success, Held};
use crate::clock::{Clock, QuantaClock};
use crate::http::{ClassifyEos, ClassifyStream, Verdict};

/// How a body with a verdict still to come ended.
#[derive(Copy, Clone)]
enum End<'a> {
    /// At its end, with these trailers if it had any.
    Trailers(Option<&'a HeaderMap>),
    /// It failed before its end.
    BodyError,
}

/// A verdict still to come: the permit and what classifies the end.
struct Pending<Eos, K, C: Clock> {
    permit: Held<K, C>,
    eos: Eos,
}

impl<Eos: ClassifyEos, K, C: Clock> Pending<Eos, K, C> {
    /// Records the end's verdict, with the hint the end gives (asked
    /// first: judging the end consumes the classifier). A success's hint
    /// is dropped, as at the head.
    fn settle(self, end: End<'_>) {
        let (hint, outcome) = match end {
            End::Trailers(trailers) => {
                (self.eos.eos_hint(trailers), self.eos.classify_eos(trailers))
            }
            End::BodyError => (self.eos.eos_hint(None), self.eos.classify_body_error()),
        };
        let hint = hint_unless_success(outcome, || hint);
        self.permit.record(outcome, hint, None);
    }
}

impl<Eos, K, C: Clock> Pending<Eos, K, C> {
    /// A frame arrived: the stream is making progress now. One clock read
    /// per frame, and only while a verdict is pending.
    fn progress(&mut self) {
        self.permit.progress_now();
    }
}

pin_project! {
    /// The body of a response from a layer in [`AtEnd`] mode: the inner body
    /// unchanged, frame for frame, carrying the call's permit until the
    /// verdict is known.
    ///
    /// | the body | recorded |
    /// |---|---|
    /// | yields a trailers frame | what [`ClassifyEos::classify_eos`] says of the trailers |
    /// | ends without trailers (or says [`is_end_stream`](Body::is_end_stream) after its last data frame) | `classify_eos(None)` |
    /// | yields an error | [`ClassifyEos::classify_body_error`] (a failure by default) |
    /// | is dropped before its end while bytes kept coming (the client went away) | nothing: neutral, and a probe frees its slot |
    /// | is dropped before its end after no bytes came for `abandoned_after` or more (the upstream stalled) | as a call abandoned after it hung: a slow call when the policy has a slow-call rate, else a failure; a probe's round fails |
    ///
    /// A stream is judged by its progress, not its age: from the head on,
    /// each frame restarts the time a drop is judged by (one clock read per
    /// frame, only while the verdict is pending), so a long download, a
    /// server-streaming RPC or an event stream that a client cancels after
    /// minutes of healthy bytes counts for nothing. Whether the call was
    /// slow is decided at the head (the time to the response head against
    /// the slow-call threshold), not by the length of the body.
    ///
    /// When the head decided (a trailers-only gRPC response, a 5xx), or the
    /// body was empty to begin with, the verdict was recorded at the head and
    /// this body only passes frames through; so does the body of a call
    /// that was not guarded.
    ///
    /// ```
    /// use failfast::tower::{FailFastLayer, GrpcClassifier, GrpcEos, PermitBody};
    /// use failfast::Breaker;
    /// use http_body_util::{BodyExt, Full};
    /// use hyper::body::Bytes;
    /// use std::sync::Arc;
    /// use tower::{Layer, Service, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), tower::BoxError> {
    /// let breaker = Arc::new(Breaker::builder().consecutive_failures(3).build()?);
    /// let mut grpc = FailFastLayer::new(breaker.clone())
    ///     .classify_at_end(GrpcClassifier::new())
    ///     .layer(tower::service_fn(|_req: http::Request<()>| async {
    ///         // A 200 whose body ends without the grpc-status trailer.
    ///         Ok::<_, std::io::Error>(http::Response::new(Full::new(Bytes::from("message"))))
    ///     }));
    /// let response: http::Response<PermitBody<Full<Bytes>, GrpcEos>> =
    ///     grpc.ready().await?.call(http::Request::new(())).await?;
    /// assert!(response.body().is_pending());
    /// assert_eq!(breaker.snapshot().consecutive_failures, 0);
    ///
    /// response.into_body().collect().await?; // the end: no status, a protocol error
    /// assert_eq!(breaker.snapshot().consecutive_failures, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub struct PermitBody<B, Eos, C = QuantaClock, K = ()>
    where
        C: Clock,
    {
        #[pin]
        inner: B,
        pending: Option<Pending<Eos, K, C>>,
    }
}

impl<B, Eos, C: Clock, K> PermitBody<B, Eos, C, K> {
    /// A body that records nothing.
    fn passing(inner: B) -> Self {
        PermitBody {
            inner,
            pending: None,
        }
    }

    /// Whether the verdict is still to come.
    pub fn is_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// The inner body.
    pub fn get_ref(&self) -> &B {
        &self.inner
    }
}

impl<B, Eos, C, K> Body for PermitBody<B, Eos, C, K>
where
    B: Body,
    Eos: ClassifyEos,
    C: Clock,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let mut this = self.project();
        let frame = ready!(this.inner.as_mut().poll_frame(cx));
        let Some(mut pending) = this.pending.take() else {
            return Poll::Ready(frame);
        };
        match &frame {
            Some(Ok(f)) => match f.trailers_ref() {
                Some(trailers) => pending.settle(End::Trailers(Some(trailers))),
                // A consumer may stop polling once the body says it ended.
                None if this.inner.is_end_stream() => pending.settle(End::Trailers(None)),
                None => {
                    pending.progress();
                    *this.pending = Some(pending);
                }
            },
            Some(Err(_)) => pending.settle(End::BodyError),
            None => pending.settle(End::Trailers(None)),
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B: fmt::Debug, Eos, C: Clock, K> fmt::Debug for PermitBody<B, Eos, C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitBody")
            .field("inner", &self.inner)
            .field("pending", &self.pending.is_some())
            .finish()
    }
}

/// A response whose body carries the permit.
type Carried<B, Eos, C, K> = http::Response<PermitBody<B, Eos, C, K>>;

/// What an [`AtEnd`] response future does with a resolved call: record the
/// head's verdict now, or move the permit into the body.
fn hand_off<B, G, C, K>(
    classify: &G,
    result: Result<http::Response<B>, BoxError>,
    permit: Option<Held<K, C>>,
) -> Result<Carried<B, G::Eos, C, K>, BoxError>
where
    B: Body,
    G: ClassifyStream<B, BoxError>,
    C: Clock,
{
    let Some(permit) = permit else {
        return result.map(|r| r.map(PermitBody::passing));
    };
    let eos = match classify.classify_head(&result) {
        Verdict::Ready(outcome) => {
            let hint = hint_unless_success(outcome, || classify.head_hint(&result));
            permit.record(outcome, hint, None);
            return result.map(|r| r.map(PermitBody::passing));
        }
        // A hint in the head of a deferred verdict is the `Eos`'s to keep
        // (`HttpClassifier`'s does): `head_hint` is not asked here.
        Verdict::AtEndOfStream(eos) => eos,
    };
    let pending = Pending { permit, eos };
    match result {
        Ok(response) if response.body().is_end_stream() => {
            pending.settle(End::Trailers(None));
            Ok(response.map(PermitBody::passing))
        }
        Ok(response) => {
            // The head came: from here the call is a stream, judged by its
            // progress (and slow or not by the time to this head).
            let mut pending = pending;
            pending.permit.answered_now();
            Ok(response.map(|inner| PermitBody {
                inner,
                pending: Some(pending),
            }))
        }
        Err(err) => {
            // No body to wait for: the classifier deferred an error.
            pending.settle(End::BodyError);
            Err(err)
        }
    }
}

impl<F, G, C, K, B, E> Future for ResponseFuture<F, G, C, K, AtEnd>
where
    F: Future<Output = Result<http::Response<B>, E>>,
    E: Into<BoxError>,
    B: Body,
    G: ClassifyStream<B, BoxError>,
    C: Clock,
{
    type Output = Result<Carried<B, G::Eos, C, K>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.poll_call(cx, hand_off)
    }
}
