//! Retries that cannot make an incident worse: the rules the tower
//! [`RetryPolicy`](crate::tower::RetryPolicy) and the reqwest
//! [`RetryMiddleware`](crate::reqwest::RetryMiddleware) share ([`Retries`]),
//! and the mark a retry carries to its breaker ([`RetryAttempt`]).
//!
//! A retry is sent only when all of these hold (the last row: what the
//! caller gets when the breaker refuses one):
//!
//! | rule | default | why |
//! |---|---|---|
//! | the attempt before it failed in a way the breaker counts: a connection error, a timeout, a 5xx, a 429 (the [`HttpClassifier`]'s failures) | [`HttpClassifier::new`] | any other 4xx will fail again; a neutral ending (the client's own upload broke) is not the upstream's to repeat |
//! | the attempt was not refused by a breaker ([`Rejected`](crate::Rejected), whatever its reason) | always | the breaker or the budget already said no; asking again at once is the storm a breaker exists to stop |
//! | the method is idempotent (`GET`, `HEAD`, `OPTIONS`, `TRACE`, `PUT`, `DELETE`) | [`non_idempotent(false)`](RetriesBuilder::non_idempotent) | a `POST` may have been applied before the answer was lost |
//! | fewer than `max_attempts` attempts were made, the first included | [`DEFAULT_MAX_ATTEMPTS`] (3) | the common 3-try retry; the budget, not this, bounds the load |
//! | an upstream hint on the failed answer (`Retry-After` on a 429 or 503) is no longer than `max_hint_wait` | [`DEFAULT_MAX_HINT_WAIT`] (1 s) | the retry waits for it; a longer one is returned to the caller, who can decide |
//! | the host's breaker admits it through its retry budget ([`Breaker::try_retry`](crate::Breaker::try_retry)) | the budget the breaker was built with | retries stay a fraction of first tries, so they cannot multiply an outage's load |
//! | *when the breaker refuses a retry* (any [`Rejected`](crate::Rejected): the budget spent, the breaker open, a remembered upstream hint, a half-open breaker with no probe slot free), the caller gets the answer of the attempt that would have been retried (its response, or its error), not the refusal | [`WhenRefused::LastAnswer`] ([`when_refused`](RetriesBuilder::when_refused)) | Finagle's rule (a retry its budget refuses returns the original failure) and gRPC's (a throttled retry returns the original call's status): with retries on, a caller never gets a worse answer than without them |
//!
//! Between attempts the retry waits a jittered backoff: `d = min(max,
//! base · 2ⁿ⁻¹)` before the n-th retry, drawn uniformly from `[d/2, d]`
//! ([`DEFAULT_BACKOFF`] 50 ms, [`DEFAULT_MAX_BACKOFF`] 500 ms), or the
//! upstream's hint if that is longer. Half the delay is fixed so a retry
//! never follows its failure at once; the other half spreads callers that
//! failed together.
//!
//! A refused retry is not sent, and the breaker counts the refusal
//! whatever the caller gets: in `rejected`, and the budget's in
//! [`CallCounts::retries_refused`](crate::CallCounts::retries_refused)
//! (the metrics' `outcome="retry_refused"`). With
//! [`WhenRefused::Rejection`] the call ends with that
//! [`Rejected`](crate::Rejected) instead (for the budget,
//! [`RejectReason::RetryBudget`](crate::RejectReason::RetryBudget)), for a
//! caller that must tell a refused retry from the upstream's failure. A
//! first try's `Rejected` is always returned: there is no earlier answer.

use core::fmt;
use core::time::Duration;

use http::{Extensions, Method};

use crate::error::ConfigError;
use crate::http::HttpClassifier;
use crate::outcome::Outcome;

/// How many attempts a call makes at most by default, the first included:
/// 3, the common "retry twice".
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// The most attempts [`RetriesBuilder::max_attempts`] accepts: 10.
pub const MAX_ATTEMPTS: u32 = 10;

/// The longest upstream hint a retry waits for by default: 1 s. A failed
/// answer that asks for longer is returned to the caller.
pub const DEFAULT_MAX_HINT_WAIT: Duration = Duration::from_secs(1);

/// The backoff before the first retry, by default: 50 ms (jittered
/// between 25 and 50 ms), doubling per retry.
pub const DEFAULT_BACKOFF: Duration = Duration::from_millis(50);

/// The longest backoff by default: 500 ms (jittered between 250 and 500 ms).
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_millis(500);

/// The longest wait [`RetriesBuilder`] accepts for a backoff or a hint:
/// one minute. A retry is for a blip; a longer outage is the breaker's.
pub const MAX_RETRY_WAIT: Duration = Duration::from_secs(60);

/// The mark a retry carries in its request's extensions: it is the
/// `n`-th retry (`n ≥ 1`) of a call. The tower layers (keyed and fail-fast)
/// and the reqwest [`BreakerMiddleware`](crate::reqwest::BreakerMiddleware)
/// admit a marked
/// request with [`Breaker::try_retry`](crate::Breaker::try_retry) (through
/// the breaker's retry budget) instead of as a first try.
///
/// The shipped retries set it; a retry loop of your own sets it on each
/// request it sends again.
///
/// ```
/// use failfast::http::{retry_attempt, RetryAttempt};
///
/// let mut req = http::Request::get("http://api.example/").body(()).unwrap();
/// assert_eq!(retry_attempt(req.extensions()), None); // a first try
/// req.extensions_mut().insert(RetryAttempt::new(1));
/// assert_eq!(retry_attempt(req.extensions()).map(RetryAttempt::number), Some(1));
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct RetryAttempt(u32);

impl RetryAttempt {
    /// The `n`-th retry (0 is read as 1: a mark always means a retry).
    pub const fn new(n: u32) -> RetryAttempt {
        RetryAttempt(if n == 0 { 1 } else { n })
    }

    /// Which retry this is: 1 for the first.
    pub const fn number(self) -> u32 {
        self.0
    }
}

/// The retry mark in `extensions`, if any.
///
/// A request with no extensions (every first try a client builds) costs
/// one test; the search of the extensions' map is out of line, so the
/// keyed layer's request path stays as it was for ordinary requests.
#[inline(always)]
pub fn retry_attempt(extensions: &Extensions) -> Option<RetryAttempt> {
    if extensions.is_empty() {
        None
    } else {
        marked(extensions)
    }
}

#[cold]
#[inline(never)]
fn marked(extensions: &Extensions) -> Option<RetryAttempt> {
    extensions.get::<RetryAttempt>().copied()
}

/// What the caller gets when a retry is refused by its host's breaker (any
/// [`Rejected`](crate::Rejected): the retry budget spent, the breaker open,
/// a remembered upstream hint, a half-open breaker with no probe slot
/// free). Set with [`RetriesBuilder::when_refused`]; the refusal is counted
/// by the breaker either way, and nothing more is sent.
///
/// ```
/// use failfast::http::{Retries, WhenRefused};
///
/// assert_eq!(Retries::default().when_refused(), WhenRefused::LastAnswer);
/// let strict = Retries::builder().when_refused(WhenRefused::Rejection).build()?;
/// assert_eq!(strict.when_refused(), WhenRefused::Rejection);
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WhenRefused {
    /// The answer of the attempt that would have been retried: its
    /// response (a 503, say) or its error, as if retries were off. The
    /// default: Finagle's and gRPC's rule; with retries on, a caller never
    /// gets a worse answer than without them.
    #[default]
    LastAnswer,
    /// The refusal itself: the [`Rejected`](crate::Rejected) (for the
    /// budget, with [`RejectReason::RetryBudget`](crate::RejectReason::RetryBudget)),
    /// the earlier answer dropped. For a caller that must tell "the retry
    /// was refused" from "the upstream failed".
    Rejection,
}

/// The rules a retry follows (the table in the [module docs](self)), shared
/// by the tower [`RetryPolicy`](crate::tower::RetryPolicy) and the reqwest
/// [`RetryMiddleware`](crate::reqwest::RetryMiddleware).
///
/// ```
/// use failfast::http::Retries;
/// use std::time::Duration;
///
/// let retries = Retries::builder()
///     .max_attempts(4)
///     .max_hint_wait(Duration::from_secs(2))
///     .build()?;
/// assert_eq!(retries.max_attempts(), 4);
/// assert_eq!(Retries::default().max_attempts(), 3);
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Retries {
    max_attempts: u32,
    classify: HttpClassifier,
    max_hint_wait: Duration,
    backoff: Duration,
    max_backoff: Duration,
    non_idempotent: bool,
    when_refused: WhenRefused,
}

impl Default for Retries {
    fn default() -> Retries {
        Retries {
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            classify: HttpClassifier::new(),
            max_hint_wait: DEFAULT_MAX_HINT_WAIT,
            backoff: DEFAULT_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
            non_idempotent: false,
            when_refused: WhenRefused::LastAnswer,
        }
    }
}

impl fmt::Debug for Retries {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retries")
            .field("max_attempts", &self.max_attempts)
            .field("max_hint_wait", &self.max_hint_wait)
            .field("backoff", &self.backoff)
            .field("max_backoff", &self.max_backoff)
            .field("non_idempotent", &self.non_idempotent)
            .field("when_refused", &self.when_refused)
            .finish_non_exhaustive()
    }
}

/// Builds [`Retries`]; `build` checks the values.
#[derive(Clone, Debug, Default)]
#[must_use]
pub struct RetriesBuilder {
    retries: Retries,
}

impl Retries {
    /// A builder starting from the defaults.
    pub fn builder() -> RetriesBuilder {
        RetriesBuilder::default()
    }

    /// Attempts at most, the first included.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The longest upstream hint a retry waits for.
    pub fn max_hint_wait(&self) -> Duration {
        self.max_hint_wait
    }

    /// Whether non-idempotent methods are retried.
    pub fn retries_non_idempotent(&self) -> bool {
        self.non_idempotent
    }

    /// What the caller gets when a retry is refused.
    pub fn when_refused(&self) -> WhenRefused {
        self.when_refused
    }

    /// The classifier that says which endings are failures worth a retry.
    pub fn classifier(&self) -> &HttpClassifier {
        &self.classify
    }

    /// Whether a request with this method may be retried at all.
    pub fn allows(&self, method: &Method) -> bool {
        self.max_attempts > 1 && (self.non_idempotent || method.is_idempotent())
    }

    /// How long to wait before the next attempt, after `tries` attempts
    /// (`≥ 1`) of which the last ended with `outcome` and an upstream
    /// `hint` (already resolved to a delay); `None`: return that ending to
    /// the caller. `jitter` is any number (a hash); the backoff is drawn
    /// from it. A pure function: see the [module docs](self) for the rules.
    ///
    /// ```
    /// use failfast::http::Retries;
    /// use failfast::Outcome;
    /// use std::time::Duration;
    ///
    /// let retries = Retries::default();
    /// let ms = Duration::from_millis;
    /// // A failure, no hint: a backoff between 25 and 50 ms.
    /// let wait = retries.next_wait(1, Outcome::Failure, None, 7).unwrap();
    /// assert!(wait >= ms(25) && wait <= ms(50));
    /// // A hint within a second is waited for.
    /// assert_eq!(retries.next_wait(1, Outcome::Failure, Some(ms(800)), 7), Some(ms(800)));
    /// // A longer one goes back to the caller, as does a third failure or a 404.
    /// assert_eq!(retries.next_wait(1, Outcome::Failure, Some(ms(1500)), 7), None);
    /// assert_eq!(retries.next_wait(3, Outcome::Failure, None, 7), None);
    /// assert_eq!(retries.next_wait(1, Outcome::Ignored, None, 7), None);
    /// ```
    pub fn next_wait(
        &self,
        tries: u32,
        outcome: Outcome,
        hint: Option<Duration>,
        jitter: u64,
    ) -> Option<Duration> {
        if outcome != Outcome::Failure || tries >= self.max_attempts {
            return None;
        }
        let backoff = self.backoff(tries, jitter);
        match hint {
            Some(hint) if hint > self.max_hint_wait => None,
            Some(hint) => Some(hint.max(backoff)),
            None => Some(backoff),
        }
    }

    /// The backoff after `tries` attempts: `d = min(max, base · 2^(tries-1))`,
    /// drawn from `[d/2, d]` by `jitter`.
    fn backoff(&self, tries: u32, jitter: u64) -> Duration {
        let doublings = tries.saturating_sub(1).min(31);
        let full = self
            .backoff
            .saturating_mul(1u32 << doublings)
            .min(self.max_backoff);
        let half = full / 2;
        let spread = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
        half + Duration::from_nanos(jitter % spread.saturating_add(1))
    }

    /// The delay an upstream hint asks for, now, or none (a bad hint, a
    /// date passed). Not counted in
    /// [`hints_ignored_total`](crate::hint::hints_ignored_total): the
    /// breaker counts it when it records the verdict.
    #[cfg(any(feature = "tower", feature = "reqwest"))]
    pub(crate) fn hint_delay(hint: Option<crate::hint::RetryHint>) -> Option<Duration> {
        hint?.resolve(std::time::SystemTime::now()).ok().flatten()
    }
}

/// A fresh random number for a backoff's jitter (the standard library's
/// per-thread random keys; no RNG state of ours).
#[cfg(any(feature = "tower", feature = "reqwest"))]
pub(crate) fn jitter() -> u64 {
    use core::hash::BuildHasher as _;
    std::collections::hash_map::RandomState::new().hash_one(0u8)
}

impl RetriesBuilder {
    /// Attempts at most, the first included: 1 (never retry) to
    /// [`MAX_ATTEMPTS`]. Default [`DEFAULT_MAX_ATTEMPTS`].
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.retries.max_attempts = n;
        self
    }

    /// Which endings are failures worth a retry: the classifier's
    /// [`Outcome::Failure`]s. Default [`HttpClassifier::new`] (connection
    /// errors, timeouts, 5xx, 429). Give the breaker the same classifier.
    pub fn classify(mut self, classify: HttpClassifier) -> Self {
        self.retries.classify = classify;
        self
    }

    /// The longest upstream hint (`Retry-After` on a 429 or 503) a retry
    /// waits for, up to [`MAX_RETRY_WAIT`]; a failed answer asking for
    /// longer is returned. Default [`DEFAULT_MAX_HINT_WAIT`].
    pub fn max_hint_wait(mut self, wait: Duration) -> Self {
        self.retries.max_hint_wait = wait;
        self
    }

    /// The backoff before the first retry and the longest one (`base ≤ max
    /// ≤` [`MAX_RETRY_WAIT`]). Default [`DEFAULT_BACKOFF`],
    /// [`DEFAULT_MAX_BACKOFF`].
    pub fn backoff(mut self, base: Duration, max: Duration) -> Self {
        self.retries.backoff = base;
        self.retries.max_backoff = max;
        self
    }

    /// Retries non-idempotent methods (`POST`, `PATCH`, `CONNECT`) too:
    /// only for an API whose writes are idempotent by design (an
    /// idempotency key). Default `false`.
    pub fn non_idempotent(mut self, yes: bool) -> Self {
        self.retries.non_idempotent = yes;
        self
    }

    /// What the caller gets when a retry is refused by its host's breaker:
    /// the answer of the attempt before it ([`WhenRefused::LastAnswer`],
    /// the default) or the [`Rejected`](crate::Rejected)
    /// ([`WhenRefused::Rejection`], the behaviour before this setting).
    pub fn when_refused(mut self, when: WhenRefused) -> Self {
        self.retries.when_refused = when;
        self
    }

    /// The rules.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the field: `max_attempts` outside
    /// `1..=10`, `max_hint_wait` or `max_backoff` over a minute, a backoff
    /// base over its max.
    ///
    /// ```
    /// use failfast::http::Retries;
    ///
    /// let err = Retries::builder().max_attempts(0).build().unwrap_err();
    /// assert_eq!(err.field(), "max_attempts");
    /// ```
    pub fn build(self) -> Result<Retries, ConfigError> {
        let r = self.retries;
        if !(1..=MAX_ATTEMPTS).contains(&r.max_attempts) {
            return Err(ConfigError::new("max_attempts", "1..=10", r.max_attempts));
        }
        if r.max_hint_wait > MAX_RETRY_WAIT {
            return Err(ConfigError::new(
                "max_hint_wait",
                "at most 60 s",
                r.max_hint_wait,
            ));
        }
        if r.max_backoff > MAX_RETRY_WAIT {
            return Err(ConfigError::new(
                "max_backoff",
                "at most 60 s",
                r.max_backoff,
            ));
        }
        if r.backoff > r.max_backoff {
            return Err(ConfigError::new(
                "backoff",
                "at most max_backoff",
                r.backoff,
            ));
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn backoff_doubles_up_to_its_cap_and_keeps_half_fixed() {
        let r = Retries::default();
        for (tries, full) in [(1, 50), (2, 100), (3, 200), (4, 400), (5, 500), (40, 500)] {
            let lo = r.backoff(tries, 0);
            let hi = r.backoff(tries, u64::MAX - 1);
            assert_eq!(lo, MS(full) / 2, "tries {tries}");
            assert!(hi <= MS(full) && hi > lo, "tries {tries}: {hi:?}");
        }
    }

    #[test]
    fn a_hint_is_waited_for_when_longer_than_the_backoff() {
        let r = Retries::default();
        assert_eq!(
            r.next_wait(1, Outcome::Failure, Some(MS(10)), 0),
            Some(MS(25))
        );
        assert_eq!(
            r.next_wait(1, Outcome::Failure, Some(MS(1000)), 0),
            Some(MS(1000))
        );
        assert_eq!(r.next_wait(1, Outcome::Failure, Some(MS(1001)), 0), None);
    }

    #[test]
    fn only_failures_are_retried_and_only_below_the_attempt_limit() {
        let r = Retries::default();
        for outcome in [Outcome::Success, Outcome::Ignored, Outcome::Neutral] {
            assert_eq!(r.next_wait(1, outcome, None, 0), None);
        }
        assert!(r.next_wait(2, Outcome::Failure, None, 0).is_some());
        assert_eq!(r.next_wait(3, Outcome::Failure, None, 0), None);
    }

    #[test]
    fn idempotent_methods_only_unless_asked() {
        let r = Retries::default();
        assert!(r.allows(&Method::GET) && r.allows(&Method::PUT) && r.allows(&Method::DELETE));
        assert!(!r.allows(&Method::POST) && !r.allows(&Method::PATCH));
        let r = Retries::builder().non_idempotent(true).build().unwrap();
        assert!(r.allows(&Method::POST));
        let once = Retries::builder().max_attempts(1).build().unwrap();
        assert!(!once.allows(&Method::GET));
    }

    #[test]
    fn bad_values_name_their_field() {
        let field = |b: RetriesBuilder| b.build().unwrap_err().field();
        assert_eq!(field(Retries::builder().max_attempts(11)), "max_attempts");
        assert_eq!(
            field(Retries::builder().max_hint_wait(MS(60_001))),
            "max_hint_wait"
        );
        assert_eq!(
            field(Retries::builder().backoff(MS(10), MS(60_001))),
            "max_backoff"
        );
        assert_eq!(field(Retries::builder().backoff(MS(20), MS(10))), "backoff");
    }

    #[test]
    fn the_mark_reads_as_a_retry_number() {
        let mut ext = Extensions::new();
        assert_eq!(retry_attempt(&ext), None);
        ext.insert(7u8); // another extension: searched, not a mark
        assert_eq!(retry_attempt(&ext), None);
        ext.insert(RetryAttempt::new(0));
        assert_eq!(retry_attempt(&ext), Some(RetryAttempt::new(1)));
    }
}
