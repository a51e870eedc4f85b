//! Retry budgets: how many retries a host may take, bound to its breaker.
//!
//! A retry that goes to a host already failing adds load where load hurts
//! most. A [`RetryBudget`] lets retries through only while they are a small
//! part of the host's traffic, so retries can never make an outage worse:
//!
//! * [`RetryBudget::tokens`] — gRPC's retry throttling: a bucket of tokens
//!   per host, drained by failures, refilled by successes; retries stop
//!   while the bucket is at most half full.
//! * [`RetryBudget::ratio`] — Finagle's retry budget: each first try
//!   deposits a fraction of a retry, each retry withdraws one, deposits and
//!   withdrawals expire after a TTL, and a small reserve per second is
//!   always there.
//!
//! The budget lives in the breaker's own storage (8 or 16 bytes per host,
//! none when off) and is asked by [`Breaker::try_retry`](crate::Breaker::try_retry): a retry is
//! admitted only when the breaker admits a call *and* the budget has room.
//! The crate docs' [Retry budgets](crate::docs#retry-budgets) section has
//! the numbers and the load bound.

use core::time::Duration;

use crate::clock::Nanos;
use crate::error::ConfigError;

mod admit;
pub(crate) mod ratio;
pub(crate) mod tokens;

/// A retry budget per host: [`tokens`](Self::tokens) (gRPC's retry
/// throttling) or [`ratio`](Self::ratio) (Finagle's budget). Set on a
/// breaker with [`Builder::retry_budget`](crate::Builder::retry_budget);
/// off by default. Retries then go through [`Breaker::try_retry`](crate::Breaker::try_retry).
///
/// ```
/// use failfast::{Breaker, RetryBudget};
/// use std::time::Duration;
///
/// let budget = RetryBudget::finagle();
/// assert_eq!(budget, RetryBudget::ratio(0.2, Duration::from_secs(10), 10));
/// let breaker = Breaker::builder().consecutive_failures(5).retry_budget(budget).build()?;
/// assert_eq!(breaker.config().retry_budget(), Some(budget));
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Copy, Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RetryBudget {
    /// gRPC's retry throttling ([`RetryBudget::tokens`]).
    Tokens {
        /// The bucket's size, in tokens: 1 to 1000.
        max_tokens: u32,
        /// Tokens a success returns (to three decimals): 0.001 to 1000.
        token_ratio: f64,
    },
    /// Finagle's retry budget ([`RetryBudget::ratio`]).
    Ratio {
        /// Retries each first try deposits (0.2: one retry per five first
        /// tries): 0 to 1000.
        percent: f64,
        /// How long a deposit or a withdrawal counts: 1 s to 60 s.
        ttl: Duration,
        /// Retries per second always allowed, whatever the traffic: 0 to
        /// 10 000.
        min_per_second: u32,
    },
}

impl RetryBudget {
    /// gRPC's retry throttling (gRFC A6), exactly: one bucket of
    /// `max_tokens` per host, full at first. Each failed call takes one
    /// token, each successful call gives `token_ratio` back (kept to three
    /// decimals, as gRPC keeps it; the bucket never holds more than
    /// `max_tokens`). A retry is allowed only while the bucket holds more
    /// than `max_tokens / 2`.
    ///
    /// Failures are the breaker's: a failure, a slow success (slow calls
    /// count against the host) and a call abandoned or panicked; a neutral
    /// verdict or an ignored one (a business error) moves no token. A retry
    /// itself costs nothing: its own verdict moves the tokens like any
    /// call's.
    ///
    /// ```
    /// use failfast::{Breaker, ManualClock, RejectReason, RetryBudget};
    ///
    /// // gRPC's own example: 4 tokens, 1.6 back per success.
    /// let breaker = Breaker::builder()
    ///     .consecutive_failures(100)
    ///     .retry_budget(RetryBudget::tokens(4, 1.6))
    ///     .build_with_clock(ManualClock::new())?;
    /// breaker.try_acquire()?.failure(); // 3 tokens
    /// breaker.try_acquire()?.success(); // 4 (4.6, capped)
    /// breaker.try_acquire()?.failure(); // 3
    /// assert!(breaker.try_retry().is_ok()); // 3 > 2: a retry may go
    /// breaker.try_acquire()?.failure(); // 2
    /// let refused = breaker.try_retry().unwrap_err(); // 2 is not > 2
    /// assert_eq!(refused.reason(), RejectReason::RetryBudget);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub const fn tokens(max_tokens: u32, token_ratio: f64) -> RetryBudget {
        RetryBudget::Tokens {
            max_tokens,
            token_ratio,
        }
    }

    /// Finagle's retry budget: each first try deposits `percent` of a retry
    /// (0.2: one retry per five first tries; Finagle's `percentCanRetry`),
    /// each retry withdraws one; both expire after about `ttl`; and a
    /// reserve of `min_per_second × ttl` retries is always there, for a
    /// host with little traffic. A retry is allowed while the deposits
    /// plus the reserve cover one more withdrawal.
    ///
    /// The TTL is kept as two halves, without a timer: the budget sums the
    /// current half and the one before, so a deposit counts for between
    /// `ttl / 2` and `ttl` (Finagle's ten slices keep it between 0.9 × and
    /// 1 × `ttl`). Over any two consecutive halves, retries are at most
    /// `percent` × first tries + `min_per_second × ttl`.
    ///
    /// ```
    /// use failfast::{Breaker, ManualClock, Nanos, RetryBudget};
    /// use std::time::Duration;
    ///
    /// // 50 % of first tries, no reserve.
    /// let breaker = Breaker::builder()
    ///     .consecutive_failures(100)
    ///     .retry_budget(RetryBudget::ratio(0.5, Duration::from_secs(10), 0))
    ///     .build_with_clock(ManualClock::new())?;
    /// let now = Nanos::ZERO;
    /// assert!(breaker.try_retry_at(now).is_err()); // nothing deposited yet
    /// for _ in 0..4 {
    ///     breaker.try_acquire_at(now)?.success_at(now); // 4 × 0.5 retries
    /// }
    /// assert!(breaker.try_retry_at(now).is_ok());
    /// assert!(breaker.try_retry_at(now).is_ok());
    /// assert!(breaker.try_retry_at(now).is_err()); // two retries spent
    /// // Ten seconds on, every deposit and withdrawal has expired.
    /// assert!(breaker.try_retry_at(Nanos::from_secs(10)).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub const fn ratio(percent: f64, ttl: Duration, min_per_second: u32) -> RetryBudget {
        RetryBudget::Ratio {
            percent,
            ttl,
            min_per_second,
        }
    }

    /// Finagle's defaults: [`ratio`](Self::ratio)`(0.2, 10 s, 10)` — about
    /// 20 % of requests may be retried, on top of 10 retries per second.
    ///
    /// ```
    /// use failfast::RetryBudget;
    /// use std::time::Duration;
    ///
    /// assert_eq!(
    ///     RetryBudget::finagle(),
    ///     RetryBudget::Ratio { percent: 0.2, ttl: Duration::from_secs(10), min_per_second: 10 },
    /// );
    /// ```
    pub const fn finagle() -> RetryBudget {
        RetryBudget::ratio(0.2, Duration::from_secs(10), 10)
    }

    /// gRPC's values from its service-config example,
    /// [`tokens`](Self::tokens)`(10, 0.1)`: retries stop after five
    /// failures more than a tenth of the successes.
    ///
    /// ```
    /// use failfast::RetryBudget;
    ///
    /// assert_eq!(RetryBudget::grpc(), RetryBudget::tokens(10, 0.1));
    /// ```
    pub const fn grpc() -> RetryBudget {
        RetryBudget::tokens(10, 0.1)
    }

    /// The budget checked, as the breaker keeps it.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the field out of range.
    pub(crate) fn validate(self) -> Result<Rules, ConfigError> {
        match self {
            RetryBudget::Tokens {
                max_tokens,
                token_ratio,
            } => {
                if !(1..=tokens::MAX_TOKENS).contains(&max_tokens) {
                    return Err(ConfigError::new(
                        "retry_budget.max_tokens",
                        "1..=1000",
                        max_tokens,
                    ));
                }
                // Three decimals, as gRPC keeps them (the rest is dropped).
                let ratio = token_ratio * 1000.0;
                if !(1.0..=1_000_000.0).contains(&ratio) {
                    return Err(ConfigError::new(
                        "retry_budget.token_ratio",
                        "0.001..=1000 (three decimals kept)",
                        token_ratio,
                    ));
                }
                Ok(Rules::Tokens(tokens::Tokens::new(max_tokens, ratio as u64)))
            }
            RetryBudget::Ratio {
                percent,
                ttl,
                min_per_second,
            } => {
                if !(0.0..=1000.0).contains(&percent) {
                    return Err(ConfigError::new(
                        "retry_budget.percent",
                        "0..=1000 retries per first try (0.2: 20 %)",
                        percent,
                    ));
                }
                if ttl < Duration::from_secs(1) || ttl > Duration::from_secs(60) {
                    return Err(ConfigError::new("retry_budget.ttl", "1 s ..= 60 s", ttl));
                }
                if min_per_second > ratio::MAX_PER_SECOND {
                    return Err(ConfigError::new(
                        "retry_budget.min_per_second",
                        "0..=10000",
                        min_per_second,
                    ));
                }
                Ok(Rules::Ratio(ratio::Ratio::new(
                    (percent * 1000.0).round() as u64,
                    ttl,
                    min_per_second,
                )))
            }
        }
    }
}

/// A validated budget, in the integers the request path computes with.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Rules {
    Tokens(tokens::Tokens),
    Ratio(ratio::Ratio),
}

impl Rules {
    /// The slots the budget takes in a breaker's storage.
    pub(crate) const fn slots(self) -> usize {
        match self {
            Rules::Tokens(_) => tokens::SLOTS,
            Rules::Ratio(_) => ratio::SLOTS,
        }
    }

    /// The slots' initial values, when the breaker is built at `now`.
    pub(crate) fn initial(self, i: usize, now: Nanos) -> u64 {
        match self {
            Rules::Tokens(t) => t.initial(),
            Rules::Ratio(r) => r.initial(i, now),
        }
    }
}
