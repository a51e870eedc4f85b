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
    /// The call says nothing about the dependency because something else
    /// failed it: the caller's own side (out of file descriptors or buffers,
    /// see [`Fault::Local`](crate::Fault::Local)) or the client a proxy
    /// serves (a request body that broke, stalled or ended early, see
    /// [`Fault::Downstream`](crate::Fault::Downstream)). It is not counted,
    /// it does **not** end a run of consecutive failures (unlike `Ignored`,
    /// so a client cannot keep a failing upstream closed by mixing in broken
    /// requests), and a probe that ends `Neutral` frees its slot.
    Neutral,
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
            Outcome::Neutral => "neutral",
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
/// | `Neutral` | reported (the caller's or the client's fault, not the dependency's) | nothing; the run stays | frees its slot |
/// | `Dropped` | dropped before the slow-call threshold and `abandoned_after`, or with no known start, or after the response head while bytes kept coming | nothing; the run stays | frees its slot |
/// | `Unanswered` | dropped early, before any answer, after at least the `unanswered` rule's age (the rule on) | adds one to the unanswered run; `K` in a row trip ([`Reason::Unresponsive`](crate::Reason::Unresponsive)) | reopens (`ProbeAbandoned`) |
/// | `AbandonedSlow` | dropped after the slow-call threshold, or after `abandoned_after` when the policy has a slow-call rate | a slow call; the run stays | reopens (`ProbeAbandoned`) |
/// | `AbandonedFailure` | dropped after `abandoned_after`, the policy has no slow-call rate | a failure (slow if past the threshold); extends the run | reopens (`ProbeAbandoned`) |
/// | `Panicked` | dropped while the thread panics | a failure; extends the run | reopens (`ProbeFailed`) |
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Success,
    Failure,
    Ignored,
    Neutral,
    Dropped,
    Unanswered,
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

    /// Whether it counts in a window at all (not ignored, neutral or
    /// dropped early).
    #[inline]
    pub(crate) const fn counts(self) -> bool {
        !matches!(
            self,
            Verdict::Ignored | Verdict::Neutral | Verdict::Dropped | Verdict::Unanswered
        )
    }

    /// Whether it is an answer from the dependency (a verdict its caller
    /// reported: success, failure, business error), which ends a run of
    /// unanswered calls. Drops, panics and neutral verdicts are not.
    #[inline]
    pub(crate) const fn is_answer(self) -> bool {
        matches!(self, Verdict::Success | Verdict::Failure | Verdict::Ignored)
    }
}

impl From<Outcome> for Verdict {
    #[inline]
    fn from(outcome: Outcome) -> Verdict {
        match outcome {
            Outcome::Success => Verdict::Success,
            Outcome::Failure => Verdict::Failure,
            Outcome::Ignored => Verdict::Ignored,
            Outcome::Neutral => Verdict::Neutral,
        }
    }
}
