//! [`Ending`]: how a call through a layer ended, as its span and its
//! duration metric name it.

use core::fmt;

/// How a call through a layer ended, as its span and its duration metric
/// say it: the recorded outcome, slowness, or how a call without a verdict
/// ended.
///
/// | ending | the call | the breaker counted |
/// |---|---|---|
/// | `success` | ran, classified a success, faster than the slow-call threshold | a success |
/// | `slow` | ran, classified a success, at or past the slow-call threshold | a success and a slow call |
/// | `failure` | ran and failed (or timed out in the layer) | a failure (slow too if past the threshold) |
/// | `ignored` | ran, a business error (4xx) | nothing |
/// | `neutral` | ran, and failed by no fault of the upstream (the caller's own resources, the client's request body) | nothing |
/// | `rejected` | did not run: the breaker turned it away | a rejection |
/// | `dropped` | its future was dropped early (the client went away), or its stream while bytes kept coming | nothing |
/// | `unanswered` | its future was dropped early, before any answer, after the `unanswered` rule's age | one more unanswered call in a row |
/// | `abandoned` | its future was dropped after the slow-call threshold or `abandoned_after`, or its stream after no bytes came for `abandoned_after` | a slow call or a failure |
/// | `panicked` | a panic unwound through it | a failure |
///
/// ```
/// use failfast::export::Ending;
///
/// // The `outcome` labels of the call duration histogram: every ending but `rejected`.
/// let labels = Ending::TIMED.map(Ending::as_str);
/// assert_eq!(
///     labels,
///     ["success", "slow", "failure", "ignored", "neutral", "dropped", "unanswered", "abandoned", "panicked"]
/// );
/// // A span's OpenTelemetry status: a rejection is an error, a business error is not.
/// assert!(Ending::Rejected.is_error());
/// assert!(!Ending::Ignored.is_error());
/// assert_eq!(Ending::Abandoned.to_string(), "abandoned");
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Ending {
    /// Ran and succeeded, fast.
    Success,
    /// Ran and succeeded, slowly.
    Slow,
    /// Ran and failed.
    Failure,
    /// Ran; a business error.
    Ignored,
    /// Ran; failed by no fault of the upstream.
    Neutral,
    /// Turned away by the breaker.
    Rejected,
    /// Given up early, without a verdict.
    Dropped,
    /// Given up early, before any answer, after the `unanswered` rule's age.
    Unanswered,
    /// Given up after it hung, without a verdict.
    Abandoned,
    /// A panic unwound through it.
    Panicked,
}

impl Ending {
    /// Every ending, in a fixed order.
    pub const ALL: [Ending; 10] = [
        Ending::Success,
        Ending::Slow,
        Ending::Failure,
        Ending::Ignored,
        Ending::Neutral,
        Ending::Rejected,
        Ending::Dropped,
        Ending::Unanswered,
        Ending::Abandoned,
        Ending::Panicked,
    ];

    /// The endings of admitted calls (all but `Rejected`): the `outcome`
    /// labels of the call duration histogram, in a fixed order.
    pub const TIMED: [Ending; 9] = [
        Ending::Success,
        Ending::Slow,
        Ending::Failure,
        Ending::Ignored,
        Ending::Neutral,
        Ending::Dropped,
        Ending::Unanswered,
        Ending::Abandoned,
        Ending::Panicked,
    ];

    /// This ending's place in [`TIMED`](Self::TIMED), if it is one.
    #[cfg(all(feature = "metrics", feature = "tower"))]
    pub(crate) fn timed_index(self) -> Option<usize> {
        Ending::TIMED.iter().position(|e| *e == self)
    }

    /// The lowercase name recorded as `circuitbreaker.outcome` and as the
    /// `outcome` label.
    pub const fn as_str(self) -> &'static str {
        match self {
            Ending::Success => "success",
            Ending::Slow => "slow",
            Ending::Failure => "failure",
            Ending::Ignored => "ignored",
            Ending::Neutral => "neutral",
            Ending::Rejected => "rejected",
            Ending::Dropped => "dropped",
            Ending::Unanswered => "unanswered",
            Ending::Abandoned => "abandoned",
            Ending::Panicked => "panicked",
        }
    }

    /// Whether this ending is an error for OpenTelemetry's span status.
    pub const fn is_error(self) -> bool {
        matches!(
            self,
            Ending::Failure | Ending::Rejected | Ending::Abandoned | Ending::Panicked
        )
    }
}

impl Ending {
    /// The ending of a permit dropped without a verdict, as the breaker
    /// judged the drop.
    #[cfg(all(feature = "tower", any(feature = "tracing", feature = "metrics")))]
    pub(crate) fn of_drop(verdict: crate::outcome::Verdict) -> Ending {
        use crate::outcome::Verdict;
        match verdict {
            Verdict::Unanswered => Ending::Unanswered,
            Verdict::AbandonedSlow | Verdict::AbandonedFailure => Ending::Abandoned,
            Verdict::Panicked => Ending::Panicked,
            _ => Ending::Dropped,
        }
    }
}

impl fmt::Display for Ending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
