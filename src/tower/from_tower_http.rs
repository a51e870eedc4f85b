//! [`FromTowerHttp`]: any `tower_http::classify::ClassifyResponse` as a
//! failfast classifier (feature `tower-http`).

use ::tower_http::classify::{ClassifiedResponse, ClassifyEos as TowerHttpEos, ClassifyResponse};
use http::HeaderMap;
use tower::BoxError;

use crate::fault::Fault;
use crate::http::{outcome_of_error, Classify};
use crate::http::{ClassifyEos, ClassifyStream, Verdict};
use crate::outcome::Outcome;

/// Uses a `tower_http::classify::ClassifyResponse` (tower-http 0.7) to
/// classify calls: its `Ok` is a success, its failure class a failure, an
/// `Err` from the service a failure when it is the upstream's fault
/// ([`Fault::of`]) and neutral when it is not. tower-http has no "ignored".
///
/// With [`FailFastLayer::classify_at_end`](super::FailFastLayer::classify_at_end)
/// a response it classifies at the end of the stream (`RequiresEos`, e.g.
/// `GrpcErrorsAsFailures` waiting for the trailers) is classified there, and
/// a body error is a failure. As a plain [`Classify`] it sees the head only,
/// and a response that needs its end counts as a success.
///
/// ```
/// use failfast::tower::{Classify, FromTowerHttp};
/// use failfast::Outcome;
/// use tower_http::classify::{ServerErrorsAsFailures, StatusInRangeAsFailures};
///
/// let classify = FromTowerHttp::new(ServerErrorsAsFailures::new());
/// let response = |code: u16| Ok::<_, tower::BoxError>(http::Response::builder().status(code).body(()).unwrap());
/// assert_eq!(classify.classify(&response(200)), Outcome::Success);
/// assert_eq!(classify.classify(&response(404)), Outcome::Success);
/// assert_eq!(classify.classify(&response(503)), Outcome::Failure);
///
/// let classify = FromTowerHttp::new(StatusInRangeAsFailures::new(400..=599));
/// assert_eq!(classify.classify(&response(404)), Outcome::Failure);
/// ```
#[derive(Copy, Clone, Debug, Default)]
pub struct FromTowerHttp<T>(T);

impl<T> FromTowerHttp<T> {
    /// Wraps `classifier`.
    pub const fn new(classifier: T) -> Self {
        FromTowerHttp(classifier)
    }

    /// The tower-http classifier.
    pub fn into_inner(self) -> T {
        self.0
    }
}

fn outcome<F>(result: Result<(), F>) -> Outcome {
    match result {
        Ok(()) => Outcome::Success,
        Err(_) => Outcome::Failure,
    }
}

/// Head only: `RequiresEos` counts as a success.
impl<T, B> Classify<http::Response<B>, BoxError> for FromTowerHttp<T>
where
    T: ClassifyResponse + Clone,
{
    fn classify(&self, result: &Result<http::Response<B>, BoxError>) -> Outcome {
        match result {
            Ok(response) => match self.0.clone().classify_response(response) {
                ClassifiedResponse::Ready(result) => outcome(result),
                ClassifiedResponse::RequiresEos(_) => Outcome::Success,
            },
            Err(e) => outcome_of_error(Fault::of, e, Outcome::Failure),
        }
    }
}

impl<T, B> ClassifyStream<B, BoxError> for FromTowerHttp<T>
where
    T: ClassifyResponse + Clone,
{
    type Eos = FromTowerHttp<T::ClassifyEos>;

    fn classify_head(&self, result: &Result<http::Response<B>, BoxError>) -> Verdict<Self::Eos> {
        match result {
            Ok(response) => match self.0.clone().classify_response(response) {
                ClassifiedResponse::Ready(result) => Verdict::Ready(outcome(result)),
                ClassifiedResponse::RequiresEos(eos) => Verdict::AtEndOfStream(FromTowerHttp(eos)),
            },
            Err(e) => Verdict::Ready(outcome_of_error(Fault::of, e, Outcome::Failure)),
        }
    }
}

/// The end of the stream, as the tower-http `ClassifyEos` sees it.
impl<T: TowerHttpEos> ClassifyEos for FromTowerHttp<T> {
    fn classify_eos(self, trailers: Option<&HeaderMap>) -> Outcome {
        outcome(self.0.classify_eos(trailers))
    }
}
