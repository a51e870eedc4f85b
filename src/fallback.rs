//! Explicit fallbacks: [`Breaker::call_or_else`] and
//! [`Breaker::call_async_or_else`] answer a rejected call from somewhere
//! else — a cached value, a partial answer, a secondary provider — and say
//! so in the type: an [`Answer`] is either [`Fresh`](Answer::Fresh) (the
//! dependency answered) or a [`Fallback`](Answer::Fallback) (the breaker
//! turned the call away and the fallback answered instead), so stale data is
//! never passed off as fresh by accident.

use core::future::Future;

use crate::breaker::Breaker;
use crate::clock::Clock;
use crate::error::Rejected;
use crate::outcome::Outcome;

/// A value and where it came from: the dependency, or a fallback after the
/// breaker rejected the call.
///
/// It is exhaustive on purpose: a caller matches on it at every call, and
/// a wildcard arm is where a new kind of answer would be passed off
/// unlabelled.
///
/// ```
/// use failfast::{Answer, Breaker};
///
/// let breaker = Breaker::builder().consecutive_failures(1).build()?;
/// let _ = breaker.call(|| Err::<(), _>("down")); // opens
///
/// let answer = breaker.call_or_else(|| Ok::<_, ()>("live price"), |_rejected| "price from 5 min ago");
/// match answer {
///     Ok(Answer::Fresh(price)) => println!("{price}"),
///     Ok(Answer::Fallback { value, rejected }) => {
///         println!("{value} (stale: {rejected})");
///     }
///     Err(()) => println!("the call ran and failed"),
/// }
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "an answer may be a fallback: look at which one it is"]
pub enum Answer<T> {
    /// The call ran and the dependency answered this.
    Fresh(T),
    /// The breaker rejected the call (it did not run); the fallback answered
    /// `value` instead.
    Fallback {
        /// What the fallback returned.
        value: T,
        /// Why the call was turned away, and when to try again.
        rejected: Rejected,
    },
}

impl<T> Answer<T> {
    /// Whether the dependency answered.
    pub fn is_fresh(&self) -> bool {
        matches!(self, Answer::Fresh(_))
    }

    /// Whether a fallback answered (the call was rejected).
    pub fn is_fallback(&self) -> bool {
        matches!(self, Answer::Fallback { .. })
    }

    /// The rejection that made the fallback answer, if it did.
    pub fn rejected(&self) -> Option<&Rejected> {
        match self {
            Answer::Fresh(_) => None,
            Answer::Fallback { rejected, .. } => Some(rejected),
        }
    }

    /// The value, if fresh.
    pub fn fresh(self) -> Option<T> {
        match self {
            Answer::Fresh(value) => Some(value),
            Answer::Fallback { .. } => None,
        }
    }

    /// The value, fresh or not: an explicit decision to stop telling them
    /// apart (for a caller that has already labelled it, say).
    pub fn into_inner(self) -> T {
        match self {
            Answer::Fresh(value) | Answer::Fallback { value, .. } => value,
        }
    }

    /// A reference to the value, fresh or not, keeping the label (the
    /// rejection is cloned: three words, and a reference count when it names
    /// its upstream).
    pub fn as_ref(&self) -> Answer<&T> {
        match self {
            Answer::Fresh(value) => Answer::Fresh(value),
            Answer::Fallback { value, rejected } => Answer::Fallback {
                value,
                rejected: rejected.clone(),
            },
        }
    }

    /// Maps the value, keeping the label.
    ///
    /// ```
    /// use failfast::Answer;
    ///
    /// let answer = Answer::Fresh(2).map(|n| n * 10);
    /// assert_eq!(answer, Answer::Fresh(20));
    /// ```
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Answer<U> {
        match self {
            Answer::Fresh(value) => Answer::Fresh(f(value)),
            Answer::Fallback { value, rejected } => Answer::Fallback {
                value: f(value),
                rejected,
            },
        }
    }
}

impl<C: Clock> Breaker<C> {
    /// [`call`](Self::call), with a fallback for a rejected call: `fallback`
    /// gets the [`Rejected`] (why, and when to retry) and its value comes
    /// back as [`Answer::Fallback`]; an admitted call's value comes back as
    /// [`Answer::Fresh`]. `fallback` runs only when the breaker rejects, and
    /// the rejected call does not run. A call that runs and fails is not
    /// answered by the fallback: its error comes back (it counted against
    /// the dependency like any failure).
    ///
    /// ```
    /// use failfast::{Answer, Breaker, RejectReason};
    ///
    /// let breaker = Breaker::builder().consecutive_failures(1).build()?;
    /// let cached = "yesterday's rates";
    ///
    /// // Closed: the call runs; the fallback does not.
    /// let answer = breaker.call_or_else(|| Ok::<_, &str>("today's rates"), |_| unreachable!());
    /// assert_eq!(answer, Ok(Answer::Fresh("today's rates")));
    ///
    /// // A failure opens the breaker; it comes back as the error.
    /// assert_eq!(breaker.call_or_else(|| Err::<&str, _>("503"), |_| cached), Err("503"));
    ///
    /// // Open: the fallback answers, and says so.
    /// let answer = breaker.call_or_else(|| -> Result<&str, &str> { unreachable!() }, |_| cached);
    /// let answer = answer.unwrap();
    /// assert!(answer.is_fallback());
    /// assert_eq!(answer.rejected().unwrap().reason(), RejectReason::Open);
    /// assert_eq!(answer.into_inner(), cached);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `f`'s error, when it ran and failed.
    pub fn call_or_else<T, E>(
        &self,
        f: impl FnOnce() -> Result<T, E>,
        fallback: impl FnOnce(Rejected) -> T,
    ) -> Result<Answer<T>, E> {
        self.call_or_else_with(Outcome::of_result, f, fallback)
    }

    /// [`call_or_else`](Self::call_or_else) with a classifier, as
    /// [`call_with`](Self::call_with) is [`call`](Self::call) with one: an
    /// `Ok` that is a failure to the breaker (an HTTP 503 in a response) is
    /// recorded as one, and a business error as ignored.
    ///
    /// ```
    /// use failfast::{Answer, Breaker, Outcome};
    ///
    /// let breaker = Breaker::builder().consecutive_failures(1).build()?;
    /// let status = |r: &Result<u16, ()>| match r {
    ///     Ok(500..=599) | Err(_) => Outcome::Failure,
    ///     Ok(400..=499) => Outcome::Ignored,
    ///     Ok(_) => Outcome::Success,
    /// };
    /// // A 404 is ignored: the breaker stays closed and the answer is fresh.
    /// assert_eq!(breaker.call_or_else_with(status, || Ok(404), |_| 0), Ok(Answer::Fresh(404)));
    /// // A 503 is a failure that opens it; the next call gets the fallback.
    /// assert_eq!(breaker.call_or_else_with(status, || Ok(503), |_| 0), Ok(Answer::Fresh(503)));
    /// let answer = breaker.call_or_else_with(status, || Ok(200), |_| 0).unwrap();
    /// assert!(answer.is_fallback());
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `f`'s error, when it ran and failed.
    pub fn call_or_else_with<T, E>(
        &self,
        classify: impl FnOnce(&Result<T, E>) -> Outcome,
        f: impl FnOnce() -> Result<T, E>,
        fallback: impl FnOnce(Rejected) -> T,
    ) -> Result<Answer<T>, E> {
        match self.call_with(classify, f) {
            Ok(value) => Ok(Answer::Fresh(value)),
            Err(crate::call::CallError::Inner(e)) => Err(e),
            Err(crate::call::CallError::Rejected(rejected)) => {
                Ok(fallen_back(fallback(rejected.clone()), rejected))
            }
        }
    }

    /// [`call_async`](Self::call_async), with an asynchronous fallback for a
    /// rejected call (a secondary provider, a cache across the network):
    /// `fallback` gets the [`Rejected`] and its future's value comes back as
    /// [`Answer::Fallback`]. As `call_async`, the admission reads the clock,
    /// so an abandoned call is judged by its age.
    ///
    /// ```
    /// use failfast::{Answer, Breaker};
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     let mut f = std::pin::pin!(f);
    /// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    /// #     loop { if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
    /// # }
    ///
    /// let breaker = Breaker::builder().consecutive_failures(1).build()?;
    /// breaker.force_open();
    /// let answer = block_on(breaker.call_async_or_else(
    ///     async { Ok::<_, ()>("primary") },
    ///     |_rejected| async { "secondary" },
    /// ));
    /// assert!(matches!(answer, Ok(Answer::Fallback { value: "secondary", .. })));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `fut`'s error, when it ran and failed.
    pub async fn call_async_or_else<T, E, F>(
        &self,
        fut: impl Future<Output = Result<T, E>>,
        fallback: impl FnOnce(Rejected) -> F,
    ) -> Result<Answer<T>, E>
    where
        F: Future<Output = T>,
    {
        self.call_async_or_else_with(Outcome::of_result, fut, fallback)
            .await
    }

    /// [`call_async_or_else`](Self::call_async_or_else) with a classifier:
    /// an HTTP client's `Ok(response)` with a 503 goes through the
    /// classifier (for instance `HttpClassifier::classify_status`, feature
    /// `tower`) and counts as the failure it is.
    ///
    /// ```
    /// use failfast::{Answer, Breaker, Outcome};
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     let mut f = std::pin::pin!(f);
    /// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    /// #     loop { if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
    /// # }
    ///
    /// let breaker = Breaker::builder().consecutive_failures(1).build()?;
    /// let status = |r: &Result<u16, ()>| match r {
    ///     Ok(500..=599) | Err(_) => Outcome::Failure,
    ///     Ok(_) => Outcome::Success,
    /// };
    /// let answer = block_on(breaker.call_async_or_else_with(status, async { Ok(503) }, |_| async { 0 }));
    /// assert_eq!(answer, Ok(Answer::Fresh(503))); // ran: its 503 opened the breaker
    /// let answer = block_on(breaker.call_async_or_else_with(status, async { Ok(200) }, |_| async { 0 }));
    /// assert!(answer.unwrap().is_fallback());
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `fut`'s error, when it ran and failed.
    pub async fn call_async_or_else_with<T, E, F>(
        &self,
        classify: impl FnOnce(&Result<T, E>) -> Outcome,
        fut: impl Future<Output = Result<T, E>>,
        fallback: impl FnOnce(Rejected) -> F,
    ) -> Result<Answer<T>, E>
    where
        F: Future<Output = T>,
    {
        match self.call_async_with(classify, fut).await {
            Ok(value) => Ok(Answer::Fresh(value)),
            Err(crate::call::CallError::Inner(e)) => Err(e),
            Err(crate::call::CallError::Rejected(rejected)) => {
                Ok(fallen_back(fallback(rejected.clone()).await, rejected))
            }
        }
    }
}

fn fallen_back<T>(value: T, rejected: Rejected) -> Answer<T> {
    Answer::Fallback { value, rejected }
}
