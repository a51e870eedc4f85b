//! `call` and `call_async`: run a closure or a future under a breaker.

use core::fmt;
use core::future::Future;

use crate::breaker::Breaker;
use crate::clock::Clock;
use crate::error::Rejected;
use crate::outcome::Outcome;

/// The error of [`Breaker::call`] and friends: the breaker turned the call
/// away, or the call ran and failed.
#[derive(Debug, PartialEq, Eq)]
pub enum CallError<E> {
    /// Not run: the breaker rejected it.
    Rejected(Rejected),
    /// Run, and it returned this error.
    Inner(E),
}

impl<E> CallError<E> {
    /// The inner error, if the call ran.
    pub fn into_inner(self) -> Option<E> {
        match self {
            CallError::Inner(e) => Some(e),
            CallError::Rejected(_) => None,
        }
    }

    /// The rejection, if the call did not run.
    pub fn rejected(&self) -> Option<&Rejected> {
        match self {
            CallError::Rejected(r) => Some(r),
            CallError::Inner(_) => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for CallError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Rejected(r) => r.fmt(f),
            CallError::Inner(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for CallError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CallError::Rejected(r) => Some(r),
            CallError::Inner(e) => Some(e),
        }
    }
}

impl<C: Clock> Breaker<C> {
    /// Runs `f` if the breaker admits it, and records its result (`Ok` =
    /// success, `Err` = failure), timed if a slow-call threshold is set.
    /// A panic in `f` counts as a failure, then propagates unchanged.
    ///
    /// ```
    /// use failfast::{Breaker, CallError};
    ///
    /// let breaker = Breaker::builder().consecutive_failures(1).build()?;
    /// assert_eq!(breaker.call(|| Ok::<_, ()>(7)), Ok(7));
    /// assert_eq!(breaker.call(|| Err::<u8, _>("refused")), Err(CallError::Inner("refused")));
    /// // Open now: the closure does not run.
    /// assert!(matches!(breaker.call(|| -> Result<u8, &str> { unreachable!() }), Err(CallError::Rejected(_))));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`CallError::Rejected`] without running `f`, or [`CallError::Inner`]
    /// with `f`'s error.
    #[inline(always)]
    pub fn call<T, E>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<T, CallError<E>> {
        self.call_with(Outcome::of_result, f)
    }

    /// [`call`](Self::call) with a classifier: which results are successes,
    /// failures, or ignored (business errors).
    ///
    /// ```
    /// use failfast::{Breaker, Outcome};
    ///
    /// let breaker = Breaker::builder().consecutive_failures(1).build()?;
    /// // A declined card (HTTP 402) proves the service is up.
    /// let classify = |r: &Result<u16, u16>| match r {
    ///     Ok(_) => Outcome::Success,
    ///     Err(code) if *code < 500 => Outcome::Ignored,
    ///     Err(_) => Outcome::Failure,
    /// };
    /// let _ = breaker.call_with(classify, || Err::<u16, u16>(402));
    /// assert!(breaker.call_with(classify, || Ok::<u16, u16>(200)).is_ok());
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`call`](Self::call).
    #[inline(always)]
    pub fn call_with<T, E>(
        &self,
        classify: impl FnOnce(&Result<T, E>) -> Outcome,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>> {
        let permit = self.try_acquire().map_err(CallError::Rejected)?;
        let result = f();
        let _ = permit.record(classify(&result));
        result.map_err(CallError::Inner)
    }

    /// Awaits `fut` if the breaker admits it, and records its result. No
    /// runtime needed.
    ///
    /// The admission reads the clock, so a call that never finishes is judged
    /// by its age: if the returned future is dropped (an outer timeout, a
    /// client that went away) after the call ran for the slow-call threshold
    /// or [`abandoned_after`](crate::Builder::abandoned_after), it counts
    /// against the dependency and a probe's round fails; dropped sooner it is
    /// neutral and frees any probe slot. A panic while awaiting `fut` counts
    /// as a failure, then propagates unchanged.
    ///
    /// ```
    /// use failfast::Breaker;
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     let mut f = std::pin::pin!(f);
    /// #     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    /// #     loop { if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
    /// # }
    ///
    /// let breaker = Breaker::builder().consecutive_failures(3).build()?;
    /// let answer = block_on(breaker.call_async(async { Ok::<_, ()>(42) }));
    /// assert_eq!(answer, Ok(42));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`call`](Self::call).
    pub async fn call_async<T, E>(
        &self,
        fut: impl Future<Output = Result<T, E>>,
    ) -> Result<T, CallError<E>> {
        self.call_async_with(Outcome::of_result, fut).await
    }

    /// [`call_async`](Self::call_async) with a classifier.
    ///
    /// # Errors
    ///
    /// As [`call`](Self::call).
    pub async fn call_async_with<T, E>(
        &self,
        classify: impl FnOnce(&Result<T, E>) -> Outcome,
        fut: impl Future<Output = Result<T, E>>,
    ) -> Result<T, CallError<E>> {
        // Timed even when calls are not: an async call can be abandoned.
        let permit = self
            .try_acquire_at(self.now())
            .map_err(CallError::Rejected)?;
        let result = fut.await;
        let _ = permit.record(classify(&result));
        result.map_err(CallError::Inner)
    }
}
