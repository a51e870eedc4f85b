//! Classifying a response at the end of its body: [`ClassifyStream`],
//! [`ClassifyEos`], [`Verdict`], and the two modes a layer runs in,
//! [`AtHead`] and [`AtEnd`].
//!
//! A gRPC call's status usually arrives in the trailers, after the body; an
//! HTTP body can fail halfway. With [`AtEnd`] (see
//! [`FailFastLayer::classify_at_end`](crate::tower::FailFastLayer::classify_at_end))
//! the layer's response future classifies the head, and when the head cannot
//! tell, it moves the permit into the response body, a
//! [`PermitBody`](crate::tower::PermitBody), which records the verdict when the body
//! ends, fails, or is dropped.

use http::HeaderMap;

use crate::hint::RetryHint;
use crate::outcome::Outcome;

/// What the head of a response says.
///
/// ```
/// use failfast::http::{ClassifyStream, GrpcClassifier, Verdict};
/// use failfast::Outcome;
///
/// let trailers_only = Ok::<_, failfast::http::BoxError>(
///     http::Response::builder().header("grpc-status", "14").body(()).unwrap(),
/// );
/// assert_eq!(GrpcClassifier::new().classify_head(&trailers_only), Verdict::Ready(Outcome::Failure));
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict<Eos> {
    /// The head decides: record this outcome now.
    Ready(Outcome),
    /// Wait for the end of the body, then ask `Eos`.
    AtEndOfStream(Eos),
}

/// Classifies `Result<http::Response<B>, E>` by its head, or defers to the
/// end of its body ([`Verdict::AtEndOfStream`]).
///
/// Implemented by [`GrpcClassifier`](super::GrpcClassifier) (status in the
/// headers or the trailers), [`HttpClassifier`](super::HttpClassifier) (the
/// status decides, but a body that fails halfway is a failure) and, with
/// feature `tower-http`, [`FromTowerHttp`](crate::tower::FromTowerHttp).
///
/// ```
/// use failfast::http::{ClassifyEos, ClassifyStream, Verdict};
/// use failfast::Outcome;
///
/// /// A 200 is a success only if its body arrives whole.
/// #[derive(Clone)]
/// struct WholeBody;
///
/// struct Whole;
///
/// impl ClassifyEos for Whole {
///     fn classify_eos(self, _trailers: Option<&http::HeaderMap>) -> Outcome {
///         Outcome::Success
///     }
///     // classify_body_error: a failure (the default)
/// }
///
/// impl<B, E> ClassifyStream<B, E> for WholeBody {
///     type Eos = Whole;
///     fn classify_head(&self, result: &Result<http::Response<B>, E>) -> Verdict<Whole> {
///         match result {
///             Ok(r) if r.status().is_success() => Verdict::AtEndOfStream(Whole),
///             Ok(r) if r.status().is_server_error() => Verdict::Ready(Outcome::Failure),
///             Ok(_) => Verdict::Ready(Outcome::Ignored),
///             Err(_) => Verdict::Ready(Outcome::Failure),
///         }
///     }
/// }
///
/// let ok = Ok::<_, failfast::http::BoxError>(http::Response::new(()));
/// assert!(matches!(WholeBody.classify_head(&ok), Verdict::AtEndOfStream(_)));
/// ```
pub trait ClassifyStream<B, E> {
    /// Classifies the end of the body.
    type Eos: ClassifyEos;

    /// The verdict on the head (or the error).
    fn classify_head(&self, result: &Result<http::Response<B>, E>) -> Verdict<Self::Eos>;

    /// When the upstream said to come back, in the head (see
    /// [`hint`](crate::hint)): none unless overridden.
    ///
    /// The layers ask it when the head decides ([`Verdict::Ready`]) an
    /// outcome other than a success. A deferred verdict's hint comes from
    /// its `Eos` at the end ([`ClassifyEos::eos_hint`]): one that wants the
    /// head's hint kept carries it, as
    /// [`HttpClassifier`](super::HttpClassifier)'s [`HeadOutcome`] does.
    ///
    /// ```
    /// use failfast::http::{BoxError, ClassifyStream, GrpcClassifier, HttpClassifier};
    /// use failfast::RetryHint;
    /// use std::time::Duration;
    ///
    /// let busy = Ok::<_, BoxError>(
    ///     http::Response::builder().status(429).header("retry-after", "7").body(()).unwrap(),
    /// );
    /// let seven = Some(RetryHint::After(Duration::from_secs(7)));
    /// assert_eq!(HttpClassifier::new().head_hint(&busy), seven);
    ///
    /// let trailers_only = Ok::<_, BoxError>(
    ///     http::Response::builder()
    ///         .header("grpc-status", "14")
    ///         .header("grpc-retry-pushback-ms", "250")
    ///         .body(())
    ///         .unwrap(),
    /// );
    /// let quarter = Some(RetryHint::After(Duration::from_millis(250)));
    /// assert_eq!(GrpcClassifier::new().head_hint(&trailers_only), quarter);
    /// ```
    fn head_hint(&self, result: &Result<http::Response<B>, E>) -> Option<RetryHint> {
        let _ = result;
        None
    }
}

/// Classifies the end of a response body.
///
/// ```
/// use failfast::http::{ClassifyEos, GrpcClassifier, ClassifyStream, Verdict};
/// use failfast::Outcome;
///
/// let head = Ok::<_, failfast::http::BoxError>(http::Response::new(()));
/// let Verdict::AtEndOfStream(eos) = GrpcClassifier::new().classify_head(&head) else { panic!() };
/// let mut trailers = http::HeaderMap::new();
/// trailers.insert("grpc-status", "14".parse().unwrap()); // UNAVAILABLE
/// assert_eq!(eos.classify_eos(Some(&trailers)), Outcome::Failure);
/// ```
pub trait ClassifyEos {
    /// The body ended, with these trailers if it had any.
    fn classify_eos(self, trailers: Option<&HeaderMap>) -> Outcome;

    /// The body failed before its end (a reset connection, a broken stream):
    /// a failure unless overridden.
    fn classify_body_error(self) -> Outcome
    where
        Self: Sized,
    {
        Outcome::Failure
    }

    /// When the upstream said to come back, at the end (see
    /// [`hint`](crate::hint)): none unless overridden.
    ///
    /// The layers ask it once, first (judging the end consumes the `Eos`):
    /// before [`classify_eos`](Self::classify_eos) with the same trailers,
    /// or before [`classify_body_error`](Self::classify_body_error) with
    /// `None`. A success's hint is then dropped. [`GrpcEos`](super::GrpcEos)
    /// reads a failed call's `grpc-retry-pushback-ms` in the trailers;
    /// [`HeadOutcome`] gives back the head's hint.
    ///
    /// ```
    /// use failfast::http::{BoxError, ClassifyEos, ClassifyStream, GrpcClassifier, Verdict};
    /// use failfast::RetryHint;
    /// use std::time::Duration;
    ///
    /// let head = Ok::<_, BoxError>(http::Response::new(()));
    /// let Verdict::AtEndOfStream(eos) = GrpcClassifier::new().classify_head(&head) else { panic!() };
    /// let mut trailers = http::HeaderMap::new();
    /// trailers.insert("grpc-status", "8".parse().unwrap()); // RESOURCE_EXHAUSTED
    /// trailers.insert("grpc-retry-pushback-ms", "2000".parse().unwrap());
    /// assert_eq!(eos.eos_hint(Some(&trailers)), Some(RetryHint::After(Duration::from_secs(2))));
    /// ```
    fn eos_hint(&self, trailers: Option<&HeaderMap>) -> Option<RetryHint> {
        let _ = trailers;
        None
    }
}

/// The [`ClassifyEos`] of [`HttpClassifier`](super::HttpClassifier): the
/// outcome its status gave, unless the body fails before its end (then the
/// classifier's [`errors`](super::HttpClassifier::errors) outcome).
///
/// ```
/// use failfast::http::{ClassifyEos, ClassifyStream, HttpClassifier, Verdict};
/// use failfast::Outcome;
///
/// let ok = Ok::<_, failfast::http::BoxError>(http::Response::new(()));
/// let Verdict::AtEndOfStream(eos) = HttpClassifier::new().classify_head(&ok) else { panic!() };
/// assert_eq!(eos.classify_eos(None), Outcome::Success);
/// assert_eq!(eos.classify_body_error(), Outcome::Failure);
/// ```
///
/// It keeps the head's hint, if the head had one (a 429 or 503 that the
/// classifier does not count as a failure, so its verdict waits for the
/// end): [`eos_hint`](ClassifyEos::eos_hint) gives it back at the end,
/// where it is resolved into a delay.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct HeadOutcome {
    pub(crate) head: Outcome,
    pub(crate) body_error: Outcome,
    pub(crate) hint: Option<RetryHint>,
}

impl ClassifyEos for HeadOutcome {
    fn classify_eos(self, _trailers: Option<&HeaderMap>) -> Outcome {
        self.head
    }

    fn classify_body_error(self) -> Outcome {
        self.body_error
    }

    /// The head's hint, kept.
    fn eos_hint(&self, _trailers: Option<&HeaderMap>) -> Option<RetryHint> {
        self.hint
    }
}
