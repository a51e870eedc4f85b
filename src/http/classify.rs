//! Turning a service's result into an [`Outcome`]: [`Classify`],
//! [`DefaultClassifier`] and [`HttpClassifier`], and who an error is the
//! fault of ([`FaultFn`]).

use core::fmt;
use std::error::Error;

use super::BoxError;
use http::{HeaderMap, StatusCode};

use super::stream::{ClassifyStream, HeadOutcome, Verdict};
use crate::fault::Fault;
use crate::hint::{parse_retry_after, RetryHint};
use crate::outcome::Outcome;

/// Decides what a call's result means to the breaker.
///
/// Any `Fn(&Result<T, E>) -> Outcome` classifies; so do [`DefaultClassifier`]
/// (`Ok` = success, an upstream's `Err` = failure) and [`HttpClassifier`].
///
/// The layers convert the inner service's error into a [`BoxError`] before
/// they classify (they return it boxed anyway), so a classifier in a layer
/// sees `Result<S::Response, BoxError>` and can read the error's `source()`
/// chain: who failed the call ([`Fault::of`]), a downcast to the client's
/// own error types.
///
/// ```
/// use failfast::http::Classify;
/// use failfast::{Fault, Outcome};
/// use failfast::http::BoxError;
///
/// // A gRPC-ish status carried in the response: 8 (RESOURCE_EXHAUSTED) is a soft failure.
/// let classify = |r: &Result<u32, BoxError>| match r {
///     Ok(0) => Outcome::Success,
///     Ok(8) => Outcome::Failure,
///     Ok(_) => Outcome::Ignored,
///     Err(e) if Fault::of(&**e).is_upstream() => Outcome::Failure,
///     Err(_) => Outcome::Neutral, // the proxy's own fault, or its client's
/// };
/// assert_eq!(classify.classify(&Ok(8)), Outcome::Failure);
/// ```
pub trait Classify<T, E> {
    /// The outcome of one result.
    fn classify(&self, result: &Result<T, E>) -> Outcome;

    /// When the upstream said to come back, if it did (see
    /// [`hint`](crate::hint)): none unless overridden.
    /// [`HttpClassifier`] reads a 429's or 503's `Retry-After`,
    /// [`GrpcClassifier`](super::GrpcClassifier) a failed call's
    /// `grpc-retry-pushback-ms`.
    ///
    /// The layers and the reqwest middleware ask it only when
    /// [`classify`](Self::classify) said something other than a success
    /// (an upstream that served the call is not asking to be left alone,
    /// and a successful call's headers are not searched), and pass it to
    /// [`Permit::record_hinted`](crate::Permit::record_hinted), resolved on
    /// the breaker's [`wall`](crate::Breaker::wall) clock.
    ///
    /// ```
    /// use failfast::http::{BoxError, Classify};
    /// use failfast::hint::parse_retry_after;
    /// use failfast::{Outcome, RetryHint};
    /// use std::time::Duration;
    ///
    /// /// Reads an API's own header on its "slow down" answers.
    /// struct SlowDown;
    ///
    /// impl Classify<http::Response<()>, BoxError> for SlowDown {
    ///     fn classify(&self, r: &Result<http::Response<()>, BoxError>) -> Outcome {
    ///         match r {
    ///             Ok(r) if r.status() == 420 => Outcome::Failure,
    ///             Ok(_) => Outcome::Success,
    ///             Err(_) => Outcome::Failure,
    ///         }
    ///     }
    ///     fn hint(&self, r: &Result<http::Response<()>, BoxError>) -> Option<RetryHint> {
    ///         let r = r.as_ref().ok().filter(|r| r.status() == 420)?;
    ///         parse_retry_after(r.headers().get("x-calm-down-for")?.as_bytes())
    ///     }
    /// }
    ///
    /// let answer = http::Response::builder().status(420).header("x-calm-down-for", "90").body(()).unwrap();
    /// assert_eq!(SlowDown.hint(&Ok(answer)), Some(RetryHint::After(Duration::from_secs(90))));
    /// ```
    fn hint(&self, result: &Result<T, E>) -> Option<RetryHint> {
        let _ = result;
        None
    }
}

impl<T, E, F> Classify<T, E> for F
where
    F: Fn(&Result<T, E>) -> Outcome,
{
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        self(result)
    }
}

/// Who an error is the fault of: [`Fault::of`] by default; give a shipped
/// classifier your own (`HttpClassifier::new().fault(..)`) to recognise an
/// error type it cannot see through.
pub type FaultFn = fn(&(dyn Error + 'static)) -> Fault;

/// What an error from the service counts as: `upstream` when `fault` blames
/// the upstream, else [`Outcome::Neutral`] (the caller's own side or its
/// client's: not the dependency's doing, and not evidence it is up).
pub(crate) fn outcome_of_error(fault: FaultFn, error: &BoxError, upstream: Outcome) -> Outcome {
    if fault(&**error).is_upstream() {
        upstream
    } else {
        Outcome::Neutral
    }
}

/// `Ok` is a success; an `Err` is a failure when it is the upstream's fault
/// ([`Fault::of`]) and neutral when it is not (the proxy out of file
/// descriptors, a client's broken request body).
///
/// ```
/// use failfast::http::{Classify, DefaultClassifier};
/// use failfast::{DownstreamError, Outcome};
/// use failfast::http::BoxError;
///
/// let ok: Result<u16, BoxError> = Ok(503);
/// assert_eq!(DefaultClassifier.classify(&ok), Outcome::Success); // it reads no status
/// let reset: Result<(), BoxError> = Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset).into());
/// assert_eq!(DefaultClassifier.classify(&reset), Outcome::Failure);
/// let broken_upload: Result<(), BoxError> = Err(DownstreamError::failed("bad chunk").into());
/// assert_eq!(DefaultClassifier.classify(&broken_upload), Outcome::Neutral);
/// ```
#[derive(Copy, Clone, Debug, Default)]
pub struct DefaultClassifier;

impl<T> Classify<T, BoxError> for DefaultClassifier {
    fn classify(&self, result: &Result<T, BoxError>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(e) => outcome_of_error(Fault::of, e, Outcome::Failure),
        }
    }
}

/// Classifies `Result<http::Response<B>, BoxError>`.
///
/// | result | default outcome | set with |
/// |---|---|---|
/// | `Err(_)` the upstream's fault: connection refused or reset, timeout, protocol error | failure | [`errors`](Self::errors) |
/// | `Err(_)` not the upstream's fault: the caller out of file descriptors or buffers, the client's request body broken or stalled | neutral | [`fault`](Self::fault) decides whose fault it is |
/// | 5xx | failure | [`server_errors`](Self::server_errors) |
/// | 429 Too Many Requests | failure (the upstream asks for less load) | [`too_many_requests`](Self::too_many_requests) |
/// | other 4xx | ignored (the upstream answered: a business error) | [`client_errors`](Self::client_errors) |
/// | 1xx, 2xx, 3xx | success | [`successes`](Self::successes) |
/// | one status code | — | [`status`](Self::status), up to 8 overrides, checked first |
///
/// ```
/// use failfast::http::{Classify, HttpClassifier};
/// use failfast::Outcome;
/// use failfast::http::BoxError;
///
/// let classify = HttpClassifier::new().status(404, Outcome::Failure);
/// let response = |code: u16| Ok::<_, BoxError>(http::Response::builder().status(code).body(()).unwrap());
/// assert_eq!(classify.classify(&response(200)), Outcome::Success);
/// assert_eq!(classify.classify(&response(422)), Outcome::Ignored);
/// assert_eq!(classify.classify(&response(429)), Outcome::Failure);
/// assert_eq!(classify.classify(&response(404)), Outcome::Failure);
/// assert_eq!(classify.classify(&response(503)), Outcome::Failure);
/// let refused: BoxError = std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into();
/// assert_eq!(classify.classify(&Err::<http::Response<()>, _>(refused)), Outcome::Failure);
/// ```
#[derive(Copy, Clone)]
pub struct HttpClassifier {
    successes: Outcome,
    client_errors: Outcome,
    too_many_requests: Outcome,
    server_errors: Outcome,
    errors: Outcome,
    fault: FaultFn,
    overrides: [(u16, Outcome); HttpClassifier::MAX_OVERRIDES],
    len: usize,
}

impl PartialEq for HttpClassifier {
    fn eq(&self, other: &Self) -> bool {
        self.successes == other.successes
            && self.client_errors == other.client_errors
            && self.too_many_requests == other.too_many_requests
            && self.server_errors == other.server_errors
            && self.errors == other.errors
            && core::ptr::fn_addr_eq(self.fault, other.fault)
            && self.overrides[..self.len] == other.overrides[..other.len]
    }
}

impl Eq for HttpClassifier {}

impl fmt::Debug for HttpClassifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClassifier")
            .field("successes", &self.successes)
            .field("client_errors", &self.client_errors)
            .field("too_many_requests", &self.too_many_requests)
            .field("server_errors", &self.server_errors)
            .field("errors", &self.errors)
            .field("overrides", &&self.overrides[..self.len])
            .finish_non_exhaustive()
    }
}

impl Default for HttpClassifier {
    fn default() -> Self {
        HttpClassifier::new()
    }
}

impl HttpClassifier {
    /// How many [`status`](Self::status) overrides fit.
    pub const MAX_OVERRIDES: usize = 8;

    /// The defaults in the table above.
    pub const fn new() -> HttpClassifier {
        HttpClassifier {
            successes: Outcome::Success,
            client_errors: Outcome::Ignored,
            too_many_requests: Outcome::Failure,
            server_errors: Outcome::Failure,
            errors: Outcome::Failure,
            fault: Fault::of,
            overrides: [(0, Outcome::Ignored); HttpClassifier::MAX_OVERRIDES],
            len: 0,
        }
    }

    /// The outcome of 1xx, 2xx and 3xx responses.
    pub const fn successes(mut self, outcome: Outcome) -> Self {
        self.successes = outcome;
        self
    }

    /// The outcome of 4xx responses other than 429.
    pub const fn client_errors(mut self, outcome: Outcome) -> Self {
        self.client_errors = outcome;
        self
    }

    /// The outcome of 429 Too Many Requests.
    pub const fn too_many_requests(mut self, outcome: Outcome) -> Self {
        self.too_many_requests = outcome;
        self
    }

    /// The outcome of 5xx responses.
    pub const fn server_errors(mut self, outcome: Outcome) -> Self {
        self.server_errors = outcome;
        self
    }

    /// The outcome of an `Err` from the service (no response at all) that
    /// is the upstream's fault; an error that is not (see
    /// [`fault`](Self::fault)) is neutral.
    pub const fn errors(mut self, outcome: Outcome) -> Self {
        self.errors = outcome;
        self
    }

    /// Who an `Err` from the service is the fault of (default [`Fault::of`]:
    /// the error's `source()` chain read for a [`DownstreamError`] and for
    /// local I/O resources running out). An error blamed on anyone but the
    /// upstream is [`Outcome::Neutral`].
    ///
    /// ```
    /// use failfast::http::{Classify, HttpClassifier};
    /// use failfast::{Fault, Outcome};
    /// use failfast::http::BoxError;
    ///
    /// #[derive(Debug)]
    /// struct QuotaExceeded; // the caller's own rate limiter refused to send
    /// impl std::fmt::Display for QuotaExceeded {
    ///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("quota") }
    /// }
    /// impl std::error::Error for QuotaExceeded {}
    ///
    /// let classify = HttpClassifier::new().fault(|e| {
    ///     if e.is::<QuotaExceeded>() { Fault::Local } else { Fault::of(e) }
    /// });
    /// let err: Result<http::Response<()>, BoxError> = Err(QuotaExceeded.into());
    /// assert_eq!(classify.classify(&err), Outcome::Neutral);
    /// ```
    ///
    /// [`DownstreamError`]: crate::DownstreamError
    pub const fn fault(mut self, fault: FaultFn) -> Self {
        self.fault = fault;
        self
    }

    /// The outcome of one status code, checked before the classes. A later
    /// override of the same code replaces the earlier one.
    ///
    /// # Panics
    ///
    /// With more than [`MAX_OVERRIDES`](Self::MAX_OVERRIDES) distinct codes.
    pub fn status(mut self, code: u16, outcome: Outcome) -> Self {
        if let Some(slot) = self.overrides[..self.len].iter_mut().find(|o| o.0 == code) {
            slot.1 = outcome;
            return self;
        }
        assert!(
            self.len < Self::MAX_OVERRIDES,
            "HttpClassifier holds at most {} status overrides",
            Self::MAX_OVERRIDES
        );
        self.overrides[self.len] = (code, outcome);
        self.len += 1;
        self
    }

    /// The upstream's hint in a response with this status and these
    /// headers: the first `Retry-After` of a 429 or a 503 (see
    /// [`hint`](crate::hint), "Upstream hints"); none for any other status,
    /// whose headers are not searched. A bad value is `None`, and counted.
    ///
    /// What [`Classify::hint`] and [`ClassifyStream::head_hint`] read, for a
    /// client that has a status and headers but no `http::Response` (the
    /// reqwest middleware, a pingora filter).
    ///
    /// ```
    /// use failfast::http::HttpClassifier;
    /// use failfast::RetryHint;
    /// use http::{header::RETRY_AFTER, HeaderMap, StatusCode};
    /// use std::time::Duration;
    ///
    /// let mut headers = HeaderMap::new();
    /// headers.insert(RETRY_AFTER, "120".parse().unwrap());
    /// let classify = HttpClassifier::new();
    /// let two_minutes = Some(RetryHint::After(Duration::from_secs(120)));
    /// assert_eq!(classify.hint_of(StatusCode::SERVICE_UNAVAILABLE, &headers), two_minutes);
    /// assert_eq!(classify.hint_of(StatusCode::TOO_MANY_REQUESTS, &headers), two_minutes);
    /// assert_eq!(classify.hint_of(StatusCode::MOVED_PERMANENTLY, &headers), None); // not read
    /// assert_eq!(classify.hint_of(StatusCode::SERVICE_UNAVAILABLE, &HeaderMap::new()), None);
    /// ```
    pub fn hint_of(&self, status: StatusCode, headers: &HeaderMap) -> Option<RetryHint> {
        match status {
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => {
                parse_retry_after(headers.get(http::header::RETRY_AFTER)?.as_bytes())
            }
            _ => None,
        }
    }

    /// The outcome of a response with this status.
    pub fn classify_status(&self, status: StatusCode) -> Outcome {
        let code = status.as_u16();
        if let Some((_, outcome)) = self.overrides[..self.len].iter().find(|o| o.0 == code) {
            return *outcome;
        }
        match code {
            429 => self.too_many_requests,
            500..=599 => self.server_errors,
            400..=499 => self.client_errors,
            _ => self.successes,
        }
    }
}

impl HttpClassifier {
    /// The outcome of a call that ended in `error`, without a response: the
    /// [`errors`](Self::errors) outcome when the classifier's fault function
    /// blames the upstream, else neutral. What `Classify` does for an `Err`,
    /// for a client whose error is not a `BoxError` (the reqwest middleware).
    #[cfg(feature = "reqwest")]
    pub(crate) fn classify_error(&self, error: &(dyn Error + 'static)) -> Outcome {
        if (self.fault)(error).is_upstream() {
            self.errors
        } else {
            Outcome::Neutral
        }
    }
}

impl<B> Classify<http::Response<B>, BoxError> for HttpClassifier {
    fn classify(&self, result: &Result<http::Response<B>, BoxError>) -> Outcome {
        match result {
            Ok(response) => self.classify_status(response.status()),
            Err(e) => outcome_of_error(self.fault, e, self.errors),
        }
    }

    /// The first `Retry-After` of a 429 or 503 ([`hint_of`](Self::hint_of)).
    fn hint(&self, result: &Result<http::Response<B>, BoxError>) -> Option<RetryHint> {
        let response = result.as_ref().ok()?;
        self.hint_of(response.status(), response.headers())
    }
}

/// With [`AtEnd`](crate::tower::AtEnd): the status decides, but a response whose
/// body fails before its end counts as the classifier's
/// [`errors`](HttpClassifier::errors) outcome (a failure by default). A
/// failing status is recorded at the head; there is nothing to wait for.
impl<B> ClassifyStream<B, BoxError> for HttpClassifier {
    type Eos = HeadOutcome;

    fn classify_head(&self, result: &Result<http::Response<B>, BoxError>) -> Verdict<HeadOutcome> {
        match result {
            Ok(response) => match self.classify_status(response.status()) {
                Outcome::Failure => Verdict::Ready(Outcome::Failure),
                head => Verdict::AtEndOfStream(HeadOutcome {
                    head,
                    body_error: self.errors,
                    // Kept for the end (a 429 or 503 not counted as a failure).
                    hint: self.hint_of(response.status(), response.headers()),
                }),
            },
            Err(e) => Verdict::Ready(outcome_of_error(self.fault, e, self.errors)),
        }
    }

    /// The first `Retry-After` of a 429 or 503 ([`hint_of`](Self::hint_of)),
    /// at the head: nothing is read at the end.
    fn head_hint(&self, result: &Result<http::Response<B>, BoxError>) -> Option<RetryHint> {
        let response = result.as_ref().ok()?;
        self.hint_of(response.status(), response.headers())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hint::ignored_on_this_thread;
    use core::time::Duration;
    use http::header::RETRY_AFTER;
    use std::time::UNIX_EPOCH;

    fn response(status: u16, retry_after: &[&str]) -> Result<http::Response<()>, BoxError> {
        let mut builder = http::Response::builder().status(status);
        for value in retry_after {
            builder = builder.header(RETRY_AFTER, *value);
        }
        Ok(builder.body(()).unwrap())
    }

    /// The hint `HttpClassifier` reads from `result`, the same through
    /// `Classify` and `ClassifyStream`, and how many bad hints it counted.
    fn hint(result: &Result<http::Response<()>, BoxError>) -> (Option<RetryHint>, u64) {
        let c = HttpClassifier::new();
        let before = ignored_on_this_thread();
        let hint = Classify::hint(&c, result);
        let counted = ignored_on_this_thread() - before;
        assert_eq!(ClassifyStream::head_hint(&c, result), hint);
        (hint, counted)
    }

    fn after(secs: u64) -> Option<RetryHint> {
        Some(RetryHint::After(Duration::from_secs(secs)))
    }

    #[test]
    fn retry_after_is_read_on_429_and_503() {
        assert_eq!(hint(&response(503, &["120"])), (after(120), 0));
        assert_eq!(hint(&response(429, &["3"])), (after(3), 0));
        let date = RetryHint::At(UNIX_EPOCH + Duration::from_secs(784_111_777));
        assert_eq!(
            hint(&response(503, &["Sun, 06 Nov 1994 08:49:37 GMT"])),
            (Some(date), 0)
        );
    }

    #[test]
    fn a_503_without_the_header_has_no_hint_and_counts_nothing() {
        assert_eq!(hint(&response(503, &[])), (None, 0));
        assert_eq!(hint(&response(429, &[])), (None, 0));
    }

    #[test]
    fn other_statuses_are_not_read_even_with_a_bad_value() {
        for status in [200, 301, 404, 500, 502, 504] {
            assert_eq!(hint(&response(status, &["30"])), (None, 0), "{status}");
            assert_eq!(hint(&response(status, &["-1"])), (None, 0), "{status}");
        }
        // An overridden outcome changes nothing: the status decides.
        let c = HttpClassifier::new().status(503, Outcome::Ignored);
        assert_eq!(Classify::hint(&c, &response(503, &["9"])), after(9));
    }

    #[test]
    fn an_error_has_no_hint() {
        let refused: BoxError = std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into();
        assert_eq!(hint(&Err(refused)), (None, 0));
    }

    #[test]
    fn the_first_retry_after_is_read() {
        assert_eq!(hint(&response(503, &["5", "10"])), (after(5), 0));
        // A bad first field is counted and not replaced by the next.
        assert_eq!(hint(&response(429, &["soon", "10"])), (None, 1));
    }

    #[test]
    fn a_bad_retry_after_is_ignored_and_counted() {
        for bad in [
            "-5",
            "1000000000000",
            "",
            "   ",
            "Mon, 06 Nov 1994 08:49:37 GMT",
        ] {
            assert_eq!(hint(&response(503, &[bad])), (None, 1), "{bad:?}");
        }
        let huge = "1".repeat(64 * 1024);
        assert_eq!(hint(&response(429, &[huge.as_str()])), (None, 1));
    }

    #[test]
    fn hint_of_is_what_the_traits_read() {
        let r = response(429, &["42"]).unwrap();
        let c = HttpClassifier::new();
        assert_eq!(c.hint_of(r.status(), r.headers()), after(42));
        assert_eq!(c.hint_of(StatusCode::OK, r.headers()), None);
    }

    #[test]
    fn a_closure_classifier_gives_no_hint() {
        let classify = |_: &Result<http::Response<()>, BoxError>| Outcome::Failure;
        assert_eq!(classify.hint(&response(503, &["5"])), None);
    }
}
