//! What a call's result means to the breaker: [`Outcome`] and the default classifier.

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
