//! What a call's result means to the breaker: [`Outcome`], the default
//! classifier, and the crate's own [`Verdict`] for calls that ended without one.

/// The verdict on one admitted call.
///
/// Slowness is not an outcome: it is derived from the call's measured duration
/// against the slow-call threshold, and counted beside the outcome (a slow
/// success is a success *and* a slow call).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The dependency did its job.
    Success,
    /// The dependency failed: 5xx, timeout, connection refused.
    Failure,
    /// A business error (HTTP 4xx, a declined card). It proves the dependency is
    /// up: it never counts against it, and it ends a run of consecutive failures
    /// like a success. A probe that ends `Ignored` frees its slot.
    Ignored,
}

impl Outcome {
    /// The default classification: `Ok` is a success, `Err` a failure.
    ///
    /// ```
    /// use failfast::Outcome;
    /// assert_eq!(Outcome::of_result::<u8, ()>(&Ok(1)), Outcome::Success);
    /// assert_eq!(Outcome::of_result::<u8, ()>(&Err(())), Outcome::Failure);
    /// ```
    pub fn of_result<T, E>(result: &Result<T, E>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Failure,
        }
    }

    /// A short lowercase name for logs and metrics labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failure => "failure",
            Outcome::Ignored => "ignored",
        }
    }
}

/// What the breaker records for one admitted call: an [`Outcome`] its caller
/// reported, or how a call that got no verdict ended — its permit was dropped
/// (a client gave up, an outer timeout fired, a future was cancelled) or a
/// panic unwound through it.
///
/// | verdict | when | in CLOSED | a half-open probe |
/// |---|---|---|---|
/// | `Success` | reported | a success (slow if past the threshold); ends a failure run | counts toward closing; slow → reopens |
/// | `Failure` | reported | a failure; extends the run | reopens (`ProbeFailed`) |
/// | `Ignored` | reported (business error) | nothing; ends the run | frees its slot |
/// | `Dropped` | dropped before the slow-call threshold and `abandoned_after`, or with no known start | nothing; the run stays | frees its slot |
/// | `AbandonedSlow` | dropped after the slow-call threshold, or after `abandoned_after` when the policy has a slow-call rate | a slow call; the run stays | reopens (`ProbeAbandoned`) |
/// | `AbandonedFailure` | dropped after `abandoned_after`, the policy has no slow-call rate | a failure (slow if past the threshold); extends the run | reopens (`ProbeAbandoned`) |
/// | `Panicked` | dropped while the thread panics | a failure; extends the run | reopens (`ProbeFailed`) |
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Success,
    Failure,
    Ignored,
    Dropped,
    AbandonedSlow,
    AbandonedFailure,
    Panicked,
}

impl Verdict {
    /// Whether it counts as a failure of the dependency.
    #[inline]
    pub(crate) const fn is_failure(self) -> bool {
        matches!(
            self,
            Verdict::Failure | Verdict::AbandonedFailure | Verdict::Panicked
        )
    }

    /// Whether it counts in a window at all (not ignored, not dropped early).
    #[inline]
    pub(crate) const fn counts(self) -> bool {
        !matches!(self, Verdict::Ignored | Verdict::Dropped)
    }
}

impl From<Outcome> for Verdict {
    #[inline]
    fn from(outcome: Outcome) -> Verdict {
        match outcome {
            Outcome::Success => Verdict::Success,
            Outcome::Failure => Verdict::Failure,
            Outcome::Ignored => Verdict::Ignored,
        }
    }
}
