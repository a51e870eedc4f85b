//! Turning a service's result into an [`Outcome`]: [`Classify`],
//! [`DefaultClassifier`] and [`HttpClassifier`].

use http::StatusCode;

use super::stream::{ClassifyStream, HeadOutcome, Verdict};
use crate::outcome::Outcome;

/// Decides what a call's result means to the breaker.
///
/// Any `Fn(&Result<T, E>) -> Outcome` classifies; so do [`DefaultClassifier`]
/// (`Ok` = success, `Err` = failure) and [`HttpClassifier`].
///
/// ```
/// use failfast::tower::Classify;
/// use failfast::Outcome;
///
/// // A gRPC-ish status carried in the response: 8 (RESOURCE_EXHAUSTED) is a soft failure.
/// let classify = |r: &Result<u32, std::io::Error>| match r {
///     Ok(0) => Outcome::Success,
///     Ok(8) | Err(_) => Outcome::Failure,
///     Ok(_) => Outcome::Ignored,
/// };
/// assert_eq!(classify.classify(&Ok(8)), Outcome::Failure);
/// ```
pub trait Classify<T, E> {
    /// The outcome of one result.
    fn classify(&self, result: &Result<T, E>) -> Outcome;
}

impl<T, E, F> Classify<T, E> for F
where
    F: Fn(&Result<T, E>) -> Outcome,
{
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        self(result)
    }
}

/// `Ok` is a success, `Err` a failure ([`Outcome::of_result`]).
///
/// ```
/// use failfast::tower::{Classify, DefaultClassifier};
/// use failfast::Outcome;
///
/// assert_eq!(DefaultClassifier.classify(&Ok::<_, ()>(503)), Outcome::Success); // it reads no status
/// assert_eq!(DefaultClassifier.classify(&Err::<(), _>("reset")), Outcome::Failure);
/// ```
#[derive(Copy, Clone, Debug, Default)]
pub struct DefaultClassifier;

impl<T, E> Classify<T, E> for DefaultClassifier {
    fn classify(&self, result: &Result<T, E>) -> Outcome {
        Outcome::of_result(result)
    }
}

/// Classifies `Result<http::Response<B>, E>`.
///
/// | result | default outcome | set with |
/// |---|---|---|
/// | `Err(_)`: connection refused or reset, timeout, protocol error | failure | [`errors`](Self::errors) |
/// | 5xx | failure | [`server_errors`](Self::server_errors) |
/// | 429 Too Many Requests | failure (the upstream asks for less load) | [`too_many_requests`](Self::too_many_requests) |
/// | other 4xx | ignored (the upstream answered: a business error) | [`client_errors`](Self::client_errors) |
/// | 1xx, 2xx, 3xx | success | [`successes`](Self::successes) |
/// | one status code | — | [`status`](Self::status), up to 8 overrides, checked first |
///
/// ```
/// use failfast::tower::{Classify, HttpClassifier};
/// use failfast::Outcome;
///
/// let classify = HttpClassifier::new().status(404, Outcome::Failure);
/// let response = |code: u16| Ok::<_, ()>(http::Response::builder().status(code).body(()).unwrap());
/// assert_eq!(classify.classify(&response(200)), Outcome::Success);
/// assert_eq!(classify.classify(&response(422)), Outcome::Ignored);
/// assert_eq!(classify.classify(&response(429)), Outcome::Failure);
/// assert_eq!(classify.classify(&response(404)), Outcome::Failure);
/// assert_eq!(classify.classify(&response(503)), Outcome::Failure);
/// assert_eq!(classify.classify(&Err::<http::Response<()>, _>(())), Outcome::Failure);
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct HttpClassifier {
    successes: Outcome,
    client_errors: Outcome,
    too_many_requests: Outcome,
    server_errors: Outcome,
    errors: Outcome,
    overrides: [(u16, Outcome); HttpClassifier::MAX_OVERRIDES],
    len: usize,
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

    /// The outcome of an `Err` from the service (no response at all).
    pub const fn errors(mut self, outcome: Outcome) -> Self {
        self.errors = outcome;
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

impl<B, E> Classify<http::Response<B>, E> for HttpClassifier {
    fn classify(&self, result: &Result<http::Response<B>, E>) -> Outcome {
        match result {
            Ok(response) => self.classify_status(response.status()),
            Err(_) => self.errors,
        }
    }
}

/// With [`AtEnd`](super::AtEnd): the status decides, but a response whose
/// body fails before its end counts as the classifier's
/// [`errors`](HttpClassifier::errors) outcome (a failure by default). A
/// failing status is recorded at the head; there is nothing to wait for.
impl<B, E> ClassifyStream<B, E> for HttpClassifier {
    type Eos = HeadOutcome;

    fn classify_head(&self, result: &Result<http::Response<B>, E>) -> Verdict<HeadOutcome> {
        match result {
            Ok(response) => match self.classify_status(response.status()) {
                Outcome::Failure => Verdict::Ready(Outcome::Failure),
                head => Verdict::AtEndOfStream(HeadOutcome {
                    head,
                    body_error: self.errors,
                }),
            },
            Err(_) => Verdict::Ready(self.errors),
        }
    }
}
