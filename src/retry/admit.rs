//! The retry's admissions: [`Breaker::try_retry`] and its twins, beside
//! [`try_acquire`](Breaker::try_acquire)'s.

use core::ops::Deref;

use crate::breaker::Breaker;
use crate::clock::{Clock, Nanos};
use crate::error::Rejected;
use crate::permit::{OwnedPermit, Permit};

impl<C: Clock> Breaker<C> {
    /// Asks to make a retry now; see [`try_retry_at`](Self::try_retry_at).
    ///
    /// # Errors
    ///
    /// As [`try_retry_at`](Self::try_retry_at).
    #[inline]
    pub fn try_retry(&self) -> Result<Permit<'_, C>, Rejected> {
        OwnedPermit::acquire_retry(self)
    }

    /// Asks to make a retry (a call that repeats one that failed) at `now`:
    /// admitted only when the breaker admits a call *and* its
    /// [retry budget](crate::RetryBudget) has room. The permit reports the
    /// retry's outcome like any other.
    ///
    /// * The breaker's own rejections come first (open, half-open full,
    ///   forced open, ramp): the budget is not touched then.
    /// * With [remembered hints](crate::Builder::hints), a retry is refused
    ///   until the upstream's last hint (a `Retry-After`, a gRPC pushback)
    ///   has passed, even while the breaker is Closed (a first try is not).
    /// * Then the budget: a ratio budget withdraws one retry, a token budget
    ///   needs more than half its tokens. A refusal is a [`Rejected`] with
    ///   [`RejectReason::RetryBudget`](crate::RejectReason::RetryBudget),
    ///   counted in the snapshot's [`CallCounts::retries_refused`](crate::CallCounts::retries_refused).
    ///
    /// With the budget off (the default) this is exactly
    /// [`try_acquire_at`](Self::try_acquire_at).
    ///
    /// ```
    /// use failfast::{Breaker, ManualClock, Nanos, Outcome, RejectReason, RetryBudget};
    /// use std::time::Duration;
    ///
    /// let breaker = Breaker::builder()
    ///     .consecutive_failures(10)
    ///     .hints()
    ///     .retry_budget(RetryBudget::finagle())
    ///     .build_with_clock(ManualClock::new())?;
    /// let now = Nanos::ZERO;
    /// // A 503 with `Retry-After: 30`: the breaker stays Closed...
    /// let hint = Some(Duration::from_secs(30));
    /// breaker.try_acquire_at(now)?.record_hinted_at(Outcome::Failure, hint, now);
    /// assert!(breaker.try_acquire_at(now).is_ok());
    /// // ...but no retry goes before the upstream said.
    /// let refused = breaker.try_retry_at(Nanos::from_secs(29)).unwrap_err();
    /// assert_eq!(refused.reason(), RejectReason::RetryBudget);
    /// assert_eq!(refused.retry_after(), Some(Duration::from_secs(1)));
    /// assert!(breaker.try_retry_at(Nanos::from_secs(30)).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Rejected`] when the breaker rejects the call, or the budget (or a
    /// remembered hint) refuses the retry.
    #[inline]
    pub fn try_retry_at(&self, now: Nanos) -> Result<Permit<'_, C>, Rejected> {
        OwnedPermit::acquire_retry_at(self, now)
    }

    /// [`try_retry`](Self::try_retry) for a breaker held in an `Arc`: the
    /// permit owns a clone of the `Arc`.
    ///
    /// ```
    /// use failfast::{Breaker, RetryBudget};
    /// use std::sync::Arc;
    ///
    /// let breaker = Arc::new(Breaker::builder().consecutive_failures(5).retry_budget(RetryBudget::grpc()).build()?);
    /// let retry = breaker.try_retry_owned().expect("a full bucket");
    /// std::thread::spawn(move || { retry.success(); }).join().unwrap();
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`try_retry_at`](Self::try_retry_at).
    #[inline]
    pub fn try_retry_owned(self: &std::sync::Arc<Self>) -> Result<OwnedPermit<C>, Rejected> {
        OwnedPermit::acquire_retry(self.clone())
    }

    /// [`try_retry_at`](Self::try_retry_at) with an owned permit.
    ///
    /// # Errors
    ///
    /// As [`try_retry_at`](Self::try_retry_at).
    #[inline]
    pub fn try_retry_owned_at(
        self: &std::sync::Arc<Self>,
        now: Nanos,
    ) -> Result<OwnedPermit<C>, Rejected> {
        OwnedPermit::acquire_retry_at(self.clone(), now)
    }
}

impl<C: Clock, B: Deref<Target = Breaker<C>>> OwnedPermit<C, B> {
    /// Asks `breaker` to admit a retry now ([`Breaker::try_retry`]),
    /// keeping `breaker` in the permit (an `Arc`, a registry
    /// [`Handle`](crate::Handle), a reference).
    ///
    /// ```
    /// use failfast::{Breaker, OwnedPermit, Registry, RetryBudget};
    ///
    /// let registry = Registry::<str>::builder(Breaker::builder().consecutive_failures(5).retry_budget(RetryBudget::grpc())).build()?;
    /// let retry = OwnedPermit::acquire_retry(registry.handle("api:443")).expect("a full bucket");
    /// retry.success();
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Breaker::try_retry_at`].
    #[inline]
    pub fn acquire_retry(breaker: B) -> Result<OwnedPermit<C, B>, Rejected> {
        if !breaker.has_retry_budget() {
            return OwnedPermit::acquire(breaker);
        }
        let now = breaker.now();
        let ticket = breaker.retry_ticket(now)?;
        Ok(OwnedPermit::new(breaker, ticket))
    }

    /// Asks `breaker` to admit a retry at `now` ([`Breaker::try_retry_at`]),
    /// keeping `breaker` in the permit.
    ///
    /// # Errors
    ///
    /// As [`Breaker::try_retry_at`].
    #[inline]
    pub fn acquire_retry_at(breaker: B, now: Nanos) -> Result<OwnedPermit<C, B>, Rejected> {
        let ticket = breaker.retry_or_call_ticket(now)?;
        Ok(OwnedPermit::new(breaker, ticket))
    }
}
