//! [`DownstreamBody`]: a client's request body, marked so that an upstream
//! call it breaks is not blamed on the upstream.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{ready, Context, Poll};
use core::time::Duration;

use bytes::Buf;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};
use tower::BoxError;

use crate::fault::DownstreamError;

pin_project! {
    /// A request body a proxy received from its client and forwards
    /// upstream, whose every error is a [`DownstreamError`]: the body's own
    /// stream failing (a malformed chunk, a client that hung up mid-upload),
    /// no bytes for [`idle_timeout`](Self::idle_timeout), or more than
    /// [`max_bytes`](Self::max_bytes).
    ///
    /// Over a hyper-based client nothing needs it to be neutral: hyper's
    /// own error already marks a call its request body failed, and
    /// [`Fault::of`] reads it (feature `hyper`, on with `tower`). It serves
    /// a proxy as its clients' idle and size limits, with the
    /// [`DownstreamKind`](crate::DownstreamKind) to answer by (408 for a
    /// stall, 413 for an excess, 400 for the rest), and any other HTTP
    /// client that keeps the body's error as the source of its own: the
    /// shipped classifiers find the mark and record the call as
    /// [`Outcome::Neutral`], so a client that sends broken or stalled
    /// uploads cannot open a healthy upstream's breaker.
    ///
    /// Set the idle timeout below the layer's call
    /// [`timeout`](super::FailFastLayer::timeout): a call the layer cuts
    /// first is a failure, since the layer cannot tell whose wait it was.
    ///
    /// The body is `Unpin` when the inner body is (hyper's client needs
    /// that): its idle timer is boxed, once, at the first wait for a frame
    /// — a body whose bytes come with its head never waits and never
    /// allocates.
    ///
    /// ```
    /// use failfast::tower::DownstreamBody;
    /// use failfast::{DownstreamError, DownstreamKind};
    /// use http_body_util::{BodyExt, Full};
    /// use hyper::body::Bytes;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let body = DownstreamBody::new(Full::new(Bytes::from("0123456789"))).max_bytes(4);
    /// let err: DownstreamError = body.collect().await.unwrap_err();
    /// assert_eq!(err.kind(), DownstreamKind::TooLarge(4));
    /// # }
    /// ```
    ///
    /// [`Fault::of`]: crate::Fault::of
    /// [`Outcome::Neutral`]: crate::Outcome::Neutral
    pub struct DownstreamBody<B> {
        #[pin]
        inner: B,
        // Armed at the first wait for a frame (so the body can be made
        // outside a runtime), and moved on at each frame.
        idle: Option<Pin<Box<Sleep>>>,
        idle_after: Option<Duration>,
        max_bytes: Option<u64>,
        seen: u64,
        // An error was returned: the body ends there.
        failed: bool,
    }
}

impl<B> DownstreamBody<B> {
    /// Marks `inner`'s errors as the downstream's; no idle timeout, no size
    /// limit.
    pub fn new(inner: B) -> Self {
        DownstreamBody {
            inner,
            idle: None,
            idle_after: None,
            max_bytes: None,
            seen: 0,
            failed: false,
        }
    }

    /// Fails the body with [`DownstreamKind::Stalled`](crate::DownstreamKind::Stalled)
    /// when no frame arrives for `idle` (a client that declared more bytes
    /// than it sends). Needs a tokio runtime with the time driver.
    pub fn idle_timeout(mut self, idle: Duration) -> Self {
        self.idle_after = Some(idle);
        self
    }

    /// Fails the body with [`DownstreamKind::TooLarge`](crate::DownstreamKind::TooLarge)
    /// once more than `limit` bytes of data have arrived.
    pub fn max_bytes(mut self, limit: u64) -> Self {
        self.max_bytes = Some(limit);
        self
    }

    /// The inner body.
    pub fn get_ref(&self) -> &B {
        &self.inner
    }
}

impl<B> Body for DownstreamBody<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = DownstreamError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, DownstreamError>>> {
        let mut this = self.project();
        if *this.failed {
            return Poll::Ready(None);
        }
        let polled = this.inner.as_mut().poll_frame(cx);
        let Poll::Ready(frame) = polled else {
            let Some(after) = *this.idle_after else {
                return Poll::Pending;
            };
            let idle = this
                .idle
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(after)));
            ready!(idle.as_mut().poll(cx));
            *this.failed = true;
            return Poll::Ready(Some(Err(DownstreamError::stalled(after))));
        };
        let frame = match frame {
            None => return Poll::Ready(None),
            Some(Err(e)) => {
                *this.failed = true;
                return Poll::Ready(Some(Err(DownstreamError::failed(e))));
            }
            Some(Ok(frame)) => frame,
        };
        if let Some(data) = frame.data_ref() {
            *this.seen = this.seen.saturating_add(data.remaining() as u64);
            if let Some(limit) = *this.max_bytes {
                if *this.seen > limit {
                    *this.failed = true;
                    return Poll::Ready(Some(Err(DownstreamError::too_large(limit))));
                }
            }
        }
        if let (Some(after), Some(idle)) = (*this.idle_after, this.idle.as_mut()) {
            idle.as_mut().reset(Instant::now() + after);
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B: fmt::Debug> fmt::Debug for DownstreamBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DownstreamBody")
            .field("inner", &self.inner)
            .field("idle_after", &self.idle_after)
            .field("max_bytes", &self.max_bytes)
            .field("seen", &self.seen)
            .finish()
    }
}
