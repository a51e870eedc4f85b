//! [`RetryPolicy`]: a `tower::retry::Policy` whose every retry is admitted
//! by its host's breaker through the host's retry budget.

use core::any::Any;
use core::fmt;
use core::time::Duration;
use std::sync::{Mutex, PoisonError};

use tokio::time::Sleep;
use tower::retry::Policy;
use tower::BoxError;

use super::timeout::TimedOut;
use crate::error::Rejected;
use crate::http::{jitter, retry_attempt, Classify, Keyless, Retries, RetryAttempt, WhenRefused};
use crate::outcome::Outcome;

/// A [`tower::retry::Policy`] for HTTP that cannot make an incident worse:
/// put it outside a [`KeyedLayer`](super::KeyedLayer) (or, for one
/// upstream, a [`FailFastLayer`](super::FailFastLayer)) and each retry is
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
/// * **How the layer knows.** `retry` marks the request it will send
///   again with a [`RetryAttempt`] extension; the keyed layer and the
///   fail-fast layer both admit a marked request with `try_retry` and an
///   unmarked one as a first try, which pays into the budget.
/// * **A refused retry** (a [`Rejected`] for a marked request: the budget
///   spent, the breaker open, a remembered hint, no probe slot free) is
///   not sent, and nothing more is. The caller gets the answer of the
///   attempt before it — the 503, the connection error — as it would have
///   without retries ([`WhenRefused::LastAnswer`], the default; the breaker
///   still counts the refusal). So the policy holds that failed answer,
///   unread (a response's body, and its connection, with it), through the
///   backoff and until the retry's outcome is known, then drops it. With
///   [`WhenRefused::Rejection`](crate::http::WhenRefused::Rejection) the
///   caller gets the [`Rejected`] itself (for the budget,
///   [`RejectReason::RetryBudget`](crate::RejectReason::RetryBudget)), and
///   the failed answer is dropped before the wait. A first try's
///   `Rejected` is returned either way.
/// * **Bodies.** A request is kept for a retry by cloning it, so its body
///   must be `Clone` (`String`, `Bytes`, `http_body_util::Full`): a
///   streamed body cannot be sent twice. A request that may not be retried
///   (a `POST`, or `max_attempts` 1) is not cloned at all. A response's
///   body must be `Send + 'static` (every body a hyper client returns is),
///   so that the failed answer can wait in the policy, which is not
///   generic over the body.
///
/// Both layers read the mark: a [`FailFastLayer`](super::FailFastLayer)
/// under the policy admits each retry through its one breaker's retry
/// budget, as a [`KeyedLayer`](super::KeyedLayer) does through each
/// host's.
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
#[derive(Clone, Default)]
pub struct RetryPolicy {
    retries: Retries,
    kept: Kept,
}

impl fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("retries", &self.retries)
            .finish_non_exhaustive()
    }
}

/// The answer a retry would replace (a `Result<http::Response<Rb>,
/// BoxError>`, type-erased: the policy is not generic over the body), kept
/// from the `retry` that sent the retry to the one that sees its outcome.
/// tower clones the policy per call, so each call has its own; a clone
/// starts empty.
///
/// In a `Mutex` only so the policy stays `Sync` (a `Box<dyn Any + Send>`
/// is not, and `Sync` would ask it of every body): it is reached only
/// through `get_mut`, under `&mut self`, so it is never locked.
#[derive(Default)]
struct Kept(Mutex<Option<Box<dyn Any + Send>>>);

impl Kept {
    fn slot(&mut self) -> &mut Option<Box<dyn Any + Send>> {
        // Never locked, so never poisoned; and a poisoned slot is still a slot.
        self.0.get_mut().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Clone for Kept {
    fn clone(&self) -> Kept {
        Kept::default()
    }
}

/// What tower drops in place of an answer the policy kept for a retry:
/// never seen by a caller.
#[derive(Debug)]
struct KeptForRetry;

impl fmt::Display for KeptForRetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the answer was kept while its retry was sent")
    }
}

impl std::error::Error for KeptForRetry {}

impl RetryPolicy {
    /// A policy following `retries` (see [`Retries::builder`]).
    pub fn new(retries: Retries) -> RetryPolicy {
        RetryPolicy {
            retries,
            kept: Kept::default(),
        }
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
    Rb: Send + 'static,
{
    type Future = Sleep;

    fn retry(
        &mut self,
        req: &mut http::Request<B>,
        result: &mut Result<http::Response<Rb>, BoxError>,
    ) -> Option<Sleep> {
        // An answer kept means `result` is the outcome of a retry this
        // policy marked and sent: if the breaker refused it, the caller
        // gets the kept answer instead (a failed downcast: the refusal).
        if let Some(kept) = self.kept.slot().take() {
            if matches!(result, Err(e) if e.is::<Rejected>()) {
                if let Ok(kept) = kept.downcast::<Result<http::Response<Rb>, BoxError>>() {
                    *result = *kept;
                }
                return None;
            }
        }
        let wait = self.wait(req, result)?;
        let next = retry_attempt(req.extensions()).map_or(1, |a| a.number() + 1);
        req.extensions_mut().insert(RetryAttempt::new(next));
        if self.retries.when_refused() == WhenRefused::LastAnswer {
            // tower drops `result` once this returns `Some`: keep it, and
            // leave a placeholder that allocates nothing.
            let answer = core::mem::replace(result, Err(Box::new(KeptForRetry)));
            *self.kept.slot() = Some(Box::new(answer));
        }
        Some(tokio::time::sleep(wait))
    }

    fn clone_request(&mut self, req: &http::Request<B>) -> Option<http::Request<B>> {
        if !self.retries.allows(req.method()) {
            return None;
        }
        Some(req.clone())
    }
}

/// What a [`Keyed`](super::Keyed) or a [`FailFast`](super::FailFast)
/// service asks each request: is it a retry? A retry ([`RetryAttempt`] in
/// an HTTP request's extensions) is admitted through its breaker's retry
/// budget ([`Breaker::try_retry`](crate::Breaker::try_retry)); anything
/// else is a first try.
///
/// Implemented for `http::Request<B>` (the mark is read from its
/// extensions), and as "a first try" for the standard library's types a
/// request often is in tests and small services: `()`, `bool`, `char`, the
/// integers and floats, `String`, `&str`, `Box<str>` and `Vec<T>`. A layer
/// over requests of another type needs it too; the provided method says
/// "a first try":
///
/// ```
/// struct Job(u64);
/// impl failfast::tower::Attempt for Job {}
/// ```
///
/// A type of another crate that has no implementation goes in a newtype
/// of your own, as `Job` above.
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

/// Requests that carry no extensions: always a first try.
macro_rules! first_tries {
    ($($ty:ty),* $(,)?) => {
        $(impl Attempt for $ty {})*
    };
}

first_tries!(
    (),
    bool,
    char,
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64,
    String,
    &str,
    Box<str>,
);

impl<T> Attempt for Vec<T> {}

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;
    use crate::Breaker;

    fn rejected() -> BoxError {
        let breaker = Breaker::builder().consecutive_failures(1).build().unwrap();
        breaker.force_open();
        Box::new(breaker.try_acquire().unwrap_err())
    }

    fn get() -> http::Request<()> {
        http::Request::get("http://api.example/").body(()).unwrap()
    }

    fn failed<Rb: Default>() -> Result<http::Response<Rb>, BoxError> {
        let mut response = http::Response::new(Rb::default());
        *response.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
        Ok(response)
    }

    fn retry<Rb: Send + 'static>(
        policy: &mut RetryPolicy,
        req: &mut http::Request<()>,
        result: &mut Result<http::Response<Rb>, BoxError>,
    ) -> bool {
        Policy::retry(policy, req, result).is_some()
    }

    #[tokio::test]
    async fn a_refused_retry_gets_the_kept_answer_and_a_clone_keeps_nothing() {
        let mut policy = RetryPolicy::default();
        let mut req = get();
        let mut result = failed::<()>();
        assert!(retry(&mut policy, &mut req, &mut result));
        assert!(
            result.unwrap_err().is::<KeptForRetry>(),
            "taken, not copied"
        );
        assert!(
            policy.clone().kept.slot().is_none(),
            "a clone keeps nothing"
        );

        let mut result = Err(rejected());
        assert!(!retry::<()>(&mut policy, &mut req, &mut result));
        assert_eq!(result.unwrap().status(), 503);
        assert!(policy.kept.slot().is_none(), "given back");
    }

    #[tokio::test]
    async fn a_kept_answer_of_another_type_leaves_the_refusal() {
        let mut policy = RetryPolicy::default();
        let mut req = get();
        assert!(retry(&mut policy, &mut req, &mut failed::<()>()));
        let mut result = Err(rejected());
        assert!(!retry::<String>(&mut policy, &mut req, &mut result));
        assert!(result.unwrap_err().is::<Rejected>());
        assert!(policy.kept.slot().is_none(), "dropped");
    }

    #[tokio::test]
    async fn nothing_is_kept_when_the_refusal_is_asked_for() {
        let rules = Retries::builder()
            .when_refused(WhenRefused::Rejection)
            .build()
            .unwrap();
        let mut policy = RetryPolicy::new(rules);
        let mut req = get();
        let mut result = failed::<()>();
        assert!(retry(&mut policy, &mut req, &mut result));
        assert_eq!(result.unwrap().status(), 503, "left to tower to drop");
        assert!(policy.kept.slot().is_none());
        let mut result = Err(rejected());
        assert!(!retry::<()>(&mut policy, &mut req, &mut result));
        assert!(result.unwrap_err().is::<Rejected>());
    }

    #[test]
    fn debug_shows_the_rules_and_not_the_kept_answer() {
        let policy = RetryPolicy::default();
        let shown = format!("{policy:?}");
        assert!(shown.starts_with("RetryPolicy {"), "{shown}");
        assert!(
            shown.contains("retries: Retries { max_attempts: 3,"),
            "{shown}"
        );
        assert!(shown.contains("when_refused: LastAnswer"), "{shown}");
        assert!(!shown.contains("kept"), "{shown}");
    }
}
