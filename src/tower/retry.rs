//! [`RetryPolicy`]: a `tower::retry::Policy` whose every retry is admitted
//! by its host's breaker through the host's retry budget.

use core::time::Duration;

use tokio::time::Sleep;
use tower::retry::Policy;
use tower::BoxError;

use super::timeout::TimedOut;
use crate::error::Rejected;
use crate::http::{jitter, retry_attempt, Classify, Keyless, Retries, RetryAttempt};
use crate::outcome::Outcome;

/// A [`tower::retry::Policy`] for HTTP that cannot make an incident worse:
/// put it outside a [`KeyedLayer`](super::KeyedLayer) and each retry is
/// admitted by its host's breaker through the host's retry budget
/// ([`Breaker::try_retry`](crate::Breaker::try_retry)).
///
/// ```text
/// ServiceBuilder::new()
///     .layer(RetryLayer::new(RetryPolicy::default()))   // outside: decides and marks
///     .layer(KeyedLayer::new(registry))                 // inside: admits each attempt
///     .service(client)
/// ```
///
/// * **What is retried** ([`Retries`], whose table has the defaults and
///   why): a failure the breaker counts (a connection error, a timeout, a
///   5xx, a 429) on an idempotent request, at most 3 attempts in all, after
///   a jittered backoff (25–50 ms, doubling), or after the upstream's
///   `Retry-After` when it asks for up to a second (longer: the answer goes
///   back to the caller). A 4xx, a neutral ending, a [`Keyless`] request or
///   any [`Rejected`] — the breaker open, the budget spent — is never
///   retried.
/// * **How the keyed layer knows.** `retry` marks the request it will send
///   again with a [`RetryAttempt`] extension; the keyed layer admits a
///   marked request with `try_retry` (a refusal by the budget is a
///   [`Rejected`] with [`RejectReason::RetryBudget`](crate::RejectReason::RetryBudget),
///   returned to the caller: nothing more is sent) and an unmarked one as a
///   first try, which pays into the budget.
/// * **Bodies.** A request is kept for a retry by cloning it, so its body
///   must be `Clone` (`String`, `Bytes`, `http_body_util::Full`): a
///   streamed body cannot be sent twice. A request that may not be retried
///   (a `POST`, or `max_attempts` 1) is not cloned at all.
///
/// Only the keyed layer reads the mark: a [`FailFastLayer`](super::FailFastLayer)
/// under the policy admits every attempt as a first try.
///
/// Without a retry budget on the breakers ([`Builder::retry_budget`](crate::Builder::retry_budget),
/// off by default) a retry is admitted like a first try: the breaker and
/// `max_attempts` are then the only bounds.
///
/// ```
/// use failfast::registry::HostKey;
/// use failfast::tower::{HttpClassifier, KeyedLayer, RetryPolicy};
/// use failfast::{Breaker, Registry, RetryBudget};
/// use std::sync::Arc;
/// use tower::{retry::RetryLayer, ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower::BoxError> {
/// let template = Breaker::builder()
///     .failure_rate(0.5)
///     .min_calls(20)
///     .retry_budget(RetryBudget::finagle()); // retries ≤ 20 % of first tries (+10/s)
/// let registry = Arc::new(Registry::<HostKey>::builder(template).build()?);
/// let client = ServiceBuilder::new()
///     .layer(RetryLayer::new(RetryPolicy::default()))
///     .layer(KeyedLayer::new(registry).classify(HttpClassifier::new()))
///     .service_fn(|_req: http::Request<String>| async {
///         Ok::<_, std::io::Error>(http::Response::new(()))
///     });
/// let req = http::Request::get("http://api.example/items").body(String::new())?;
/// assert_eq!(client.oneshot(req).await?.status(), 200);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct RetryPolicy {
    retries: Retries,
}

impl RetryPolicy {
    /// A policy following `retries` (see [`Retries::builder`]).
    pub fn new(retries: Retries) -> RetryPolicy {
        RetryPolicy { retries }
    }

    /// The rules it follows.
    pub fn retries(&self) -> &Retries {
        &self.retries
    }

    /// How long to wait before sending `req` again after `result`, or
    /// `None` to return `result`.
    fn wait<B, Rb>(
        &self,
        req: &http::Request<B>,
        result: &Result<http::Response<Rb>, BoxError>,
    ) -> Option<Duration> {
        if let Err(e) = result {
            if e.is::<Rejected>() || e.is::<Keyless>() {
                return None;
            }
        }
        let outcome = match result {
            // The layer's own deadline: a failure it records at once.
            Err(e) if e.is::<TimedOut>() => Outcome::Failure,
            _ => self.retries.classifier().classify(result),
        };
        let hint = match result {
            Ok(response) if outcome == Outcome::Failure => Retries::hint_delay(
                self.retries
                    .classifier()
                    .hint_of(response.status(), response.headers()),
            ),
            _ => None,
        };
        let tries = retry_attempt(req.extensions()).map_or(1, |a| a.number() + 1);
        self.retries.next_wait(tries, outcome, hint, jitter())
    }
}

impl<B, Rb> Policy<http::Request<B>, http::Response<Rb>, BoxError> for RetryPolicy
where
    B: Clone,
{
    type Future = Sleep;

    fn retry(
        &mut self,
        req: &mut http::Request<B>,
        result: &mut Result<http::Response<Rb>, BoxError>,
    ) -> Option<Sleep> {
        let wait = self.wait(req, result)?;
        let next = retry_attempt(req.extensions()).map_or(1, |a| a.number() + 1);
        req.extensions_mut().insert(RetryAttempt::new(next));
        Some(tokio::time::sleep(wait))
    }

    fn clone_request(&mut self, req: &http::Request<B>) -> Option<http::Request<B>> {
        if !self.retries.allows(req.method()) {
            return None;
        }
        Some(req.clone())
    }
}

/// What a [`Keyed`](super::Keyed) service asks each request: is it a retry?
/// A retry ([`RetryAttempt`] in an HTTP request's extensions) is admitted
/// through its host's retry budget
/// ([`Breaker::try_retry`](crate::Breaker::try_retry)); anything else is a
/// first try.
///
/// Implemented for `http::Request<B>`. A keyed layer over requests of
/// another type needs it too; the provided method says "a first try":
///
/// ```
/// struct Job(u64);
/// impl failfast::tower::Attempt for Job {}
/// ```
pub trait Attempt {
    /// The retry mark, or `None` for a first try.
    #[inline(always)]
    fn retry_attempt(&self) -> Option<RetryAttempt> {
        None
    }
}

impl<B> Attempt for http::Request<B> {
    #[inline(always)]
    fn retry_attempt(&self) -> Option<RetryAttempt> {
        retry_attempt(self.extensions())
    }
}
