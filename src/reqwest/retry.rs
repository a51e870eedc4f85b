//! [`RetryMiddleware`]: retries through a [`BreakerMiddleware`](super::BreakerMiddleware) after it,
//! each retry admitted by its host's retry budget.

use http::Extensions;
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};

use crate::error::Rejected;
use crate::http::{jitter, Retries, RetryAttempt, WhenRefused};
use crate::outcome::Outcome;

/// A `reqwest_middleware::Middleware` that retries a failed request through
/// the [`BreakerMiddleware`](super::BreakerMiddleware) after it in the chain, which admits each retry
/// through the host's retry budget
/// ([`Breaker::try_retry`](crate::Breaker::try_retry)).
///
/// ```
/// use failfast::registry::HostKey;
/// use failfast::reqwest::{BreakerMiddleware, RetryMiddleware};
/// use failfast::{Breaker, Registry, RetryBudget};
/// use std::sync::Arc;
///
/// let template = Breaker::builder()
///     .failure_rate(0.5)
///     .min_calls(20)
///     .retry_budget(RetryBudget::finagle()); // retries ≤ 20 % of first tries (+10/s)
/// let registry = Arc::new(Registry::<HostKey>::builder(template).build()?);
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(RetryMiddleware::default())            // first: decides, waits, marks
///     .with(BreakerMiddleware::new(registry))      // after it: admits every attempt
///     .build();
/// # let _ = client;
/// # Ok::<(), failfast::ConfigError>(())
/// ```
///
/// The same rules as the tower [`RetryPolicy`](crate::tower::RetryPolicy)
/// ([`Retries`]: failures the breaker counts, idempotent methods, 3
/// attempts, a jittered backoff, an upstream's `Retry-After` up to a second
/// waited for); a [`Rejected`] is never retried.
///
/// **A refused retry** (a [`Rejected`] for a marked attempt: the budget
/// spent, the breaker open, a remembered hint, no probe slot free) is not
/// sent, and nothing more is. The caller gets the answer of the attempt
/// before it — the 503, the connection error — as it would have without
/// retries ([`WhenRefused::LastAnswer`], the default; the breaker still
/// counts the refusal). So the middleware holds that failed answer,
/// unread (a response's body, and its connection, with it), through the
/// backoff and until the retry's outcome is known, then drops it. With
/// [`WhenRefused::Rejection`] the caller gets the [`Rejected`] itself (for
/// the budget, [`RejectReason::RetryBudget`](crate::RejectReason::RetryBudget)),
/// and the failed answer is dropped before the wait. A first try's
/// `Rejected` is returned either way.
///
/// **Why a middleware, not a `reqwest-retry` strategy.** A
/// `RetryableStrategy` only classifies an outcome once it has happened; the
/// retry loop around it cannot ask anyone whether the *next* attempt may
/// go. The budget is that question, asked per host at send time, and the
/// breaker after this middleware asks it for each marked attempt: a retry
/// refused there was never sent.
///
/// **Order.** Put it *before* the `BreakerMiddleware`: each attempt then
/// passes the breaker, the first as a first try (paying into the budget),
/// the others marked with a [`RetryAttempt`] in the request's extensions.
/// With no `BreakerMiddleware` after it (none in the chain, or one before
/// it), nothing would bound the retries: the middleware sees that the first
/// attempt went through no breaker and does not retry at all.
///
/// A request whose body cannot be cloned (a stream) is sent once.
#[derive(Clone, Debug, Default)]
pub struct RetryMiddleware {
    retries: Retries,
}

impl RetryMiddleware {
    /// A middleware following `retries` (see [`Retries::builder`]).
    pub fn new(retries: Retries) -> RetryMiddleware {
        RetryMiddleware { retries }
    }

    /// The rules it follows.
    pub fn retries(&self) -> &Retries {
        &self.retries
    }

    /// How long to wait before attempt `tries + 1` after `result`, or
    /// `None` to return `result`.
    fn wait(
        &self,
        tries: u32,
        result: &reqwest_middleware::Result<Response>,
    ) -> Option<core::time::Duration> {
        let classify = self.retries.classifier();
        let outcome = match result {
            Ok(response) => classify.classify_status(response.status()),
            // Never sent: reqwest could not build the request.
            Err(reqwest_middleware::Error::Reqwest(e)) if e.is_builder() => Outcome::Neutral,
            Err(reqwest_middleware::Error::Reqwest(e)) => classify.classify_error(e),
            // A rejection (the breaker, the budget), a keyless URL, or any
            // other middleware's refusal: not the upstream's answer.
            Err(reqwest_middleware::Error::Middleware(_)) => return None,
        };
        let hint = match result {
            Ok(response) if outcome == Outcome::Failure => {
                Retries::hint_delay(classify.hint_of(response.status(), response.headers()))
            }
            _ => None,
        };
        self.retries.next_wait(tries, outcome, hint, jitter())
    }
}

/// Whether `result` is a breaker's refusal ([`Rejected`]).
fn refused(result: &reqwest_middleware::Result<Response>) -> bool {
    matches!(result, Err(reqwest_middleware::Error::Middleware(e)) if e.is::<Rejected>())
}

/// Set by a [`BreakerMiddleware`](super::BreakerMiddleware) that admitted an attempt of a
/// [`RetryMiddleware`] before it: a breaker guards the retries.
#[derive(Clone, Debug)]
pub(super) struct Guarded(pub(super) bool);

/// Clears the marks this middleware put in the caller's extensions.
fn unmark(extensions: &mut Extensions) {
    extensions.remove::<Guarded>();
    extensions.remove::<RetryAttempt>();
}

#[async_trait::async_trait]
impl Middleware for RetryMiddleware {
    async fn handle(
        &self,
        req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        if !self.retries.allows(req.method()) {
            return next.run(req, extensions).await;
        }
        extensions.insert(Guarded(false));
        let keep = self.retries.when_refused() == WhenRefused::LastAnswer;
        let mut tries = 0;
        // The answer the retry in flight would replace (`LastAnswer` only).
        let mut kept = None;
        loop {
            // The original stays here for the next attempt; a request
            // whose body cannot be cloned is sent once.
            let Some(attempt) = req.try_clone() else {
                unmark(extensions);
                return next.run(req, extensions).await;
            };
            let result = next.clone().run(attempt, extensions).await;
            tries += 1;
            if let Some(kept) = kept.take() {
                if refused(&result) {
                    unmark(extensions);
                    return kept;
                }
            }
            let guarded = matches!(extensions.get::<Guarded>(), Some(Guarded(true)));
            let wait = if guarded {
                self.wait(tries, &result)
            } else {
                None
            };
            let Some(wait) = wait else {
                unmark(extensions);
                return result;
            };
            if keep {
                kept = Some(result);
            } else {
                drop(result);
            }
            tokio::time::sleep(wait).await;
            extensions.insert(RetryAttempt::new(tries));
        }
    }
}
