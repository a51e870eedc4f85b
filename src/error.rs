//! The crate's two errors: [`Rejected`] (a call turned away) and [`ConfigError`].
//!
//! Both are small, hand-written, `Send + Sync + 'static`, so they travel inside
//! `tower::BoxError` and downcast back.

use core::fmt;
use core::time::Duration;
use std::sync::Arc;

use crate::clock::Nanos;

/// Why a call was turned away without running.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// The breaker is OPEN and its open duration has not passed.
    Open = 0,
    /// The breaker is HALF_OPEN and every probe slot of this round is taken.
    HalfOpenFull = 1,
    /// The breaker was forced open by an operator.
    ForcedOpen = 2,
    /// The bulkhead in front of the dependency is full.
    BulkheadFull = 3,
    /// The breaker closed a moment ago and is ramping up (slow start,
    /// [`Builder::ramp`](crate::Builder::ramp)): this call fell outside the
    /// share of calls it admits now. The retry time is one step of the curve.
    Ramp = 4,
    /// A retry ([`Breaker::try_retry`](crate::Breaker::try_retry)) the
    /// breaker's [retry budget](crate::RetryBudget) has no room for, or
    /// that comes before the upstream's remembered hint has passed. The
    /// retry time is the end of the hint, or of the current half of a
    /// ratio budget's TTL (when expiring withdrawals may make room); none
    /// for a token budget (only a success refills it).
    RetryBudget = 5,
}

impl RejectReason {
    /// A short lowercase name for logs and metrics labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            RejectReason::Open => "open",
            RejectReason::HalfOpenFull => "half_open_full",
            RejectReason::ForcedOpen => "forced_open",
            RejectReason::BulkheadFull => "bulkhead_full",
            RejectReason::Ramp => "ramp",
            RejectReason::RetryBudget => "retry_budget",
        }
    }
}

/// A call rejected without running, with the reason and when to try again.
///
/// ```
/// use failfast::{Breaker, ManualClock, Nanos, RejectReason};
/// use std::time::Duration;
///
/// let breaker = Breaker::builder()
///     .consecutive_failures(1)
///     .open_duration(Duration::from_secs(10))
///     .build_with_clock(ManualClock::new())
///     .unwrap();
/// breaker.try_acquire_at(Nanos::ZERO).unwrap().failure_at(Nanos::ZERO);
///
/// let rejected = breaker.try_acquire_at(Nanos::from_secs(4)).unwrap_err();
/// assert_eq!(rejected.reason(), RejectReason::Open);
/// assert_eq!(rejected.retry_after(), Some(Duration::from_secs(6)));
/// assert_eq!(rejected.to_string(), "circuit open; retry after 6.0s");
///
/// // The wait reads as a person reads it, rounded up: tenths of a second,
/// // milliseconds below one.
/// let later = breaker.try_acquire_at(Nanos::from_nanos(789_654_321)).unwrap_err();
/// assert_eq!(later.to_string(), "circuit open; retry after 9.3s");
/// let soon = breaker.try_acquire_at(Nanos::from_millis(9_649) + Duration::from_nanos(1)).unwrap_err();
/// assert_eq!(soon.to_string(), "circuit open; retry after 351ms");
/// ```
#[derive(Clone)]
pub struct Rejected {
    /// The reason (top three bits) and the nanoseconds until a call may be
    /// admitted (the rest; all ones when unknown): one word, so a rejection
    /// is three with the name below, and an admission's result stays small
    /// enough to be kept in registers on the rejection path.
    wait: u64,
    /// The upstream's name, when the code that asked the breaker knows it:
    /// anything `Display` behind an `Arc`, formatted only when shown. A
    /// layer's fixed name costs a reference count per rejection; a keyed
    /// layer's key a pointer to the registry entry that holds it.
    upstream: Option<UpstreamName>,
}

/// A name for [`Rejected::upstream`]: shared, displayed only when asked.
pub(crate) type UpstreamName = Arc<dyn fmt::Display + Send + Sync>;

const REASON_SHIFT: u32 = 61;
/// The low bits of `wait`: nanoseconds, or all ones for no known wait
/// (forced open, bulkhead). 2^61 ns is 73 years; every wait the breaker
/// computes is at most a day.
const RETRY_MASK: u64 = (1 << REASON_SHIFT) - 1;
const NO_RETRY: u64 = RETRY_MASK;

impl Rejected {
    /// A rejection for `reason`, `retry_nanos` (≥ [`NO_RETRY`]: no known
    /// wait) before a call may be admitted.
    #[inline(always)]
    const fn packed(reason: RejectReason, retry_nanos: u64) -> Rejected {
        let retry = if retry_nanos > NO_RETRY {
            NO_RETRY
        } else {
            retry_nanos
        };
        Rejected {
            wait: (reason as u64) << REASON_SHIFT | retry,
            upstream: None,
        }
    }

    pub(crate) fn new(reason: RejectReason, retry_after: Option<Duration>) -> Rejected {
        let retry_nanos = retry_after.map_or(NO_RETRY, |d| {
            u64::try_from(d.as_nanos()).map_or(NO_RETRY - 1, |n| n.min(NO_RETRY - 1))
        });
        Rejected::packed(reason, retry_nanos)
    }

    /// An OPEN breaker's rejection, `nanos` (> 0) before its period ends.
    #[inline(always)]
    pub(crate) const fn open_for(nanos: u64) -> Rejected {
        Rejected::packed(RejectReason::Open, nanos)
    }

    /// A rejection at `now` until `until` ([`Nanos::NEVER`]: no known end).
    #[inline(always)]
    pub(crate) const fn until(reason: RejectReason, until: Nanos, now: Nanos) -> Rejected {
        let retry_nanos = if until.as_nanos() == Nanos::NEVER.as_nanos() {
            NO_RETRY
        } else {
            let left = until.as_nanos().saturating_sub(now.as_nanos());
            if left >= NO_RETRY {
                NO_RETRY - 1
            } else {
                left
            }
        };
        Rejected::packed(reason, retry_nanos)
    }

    /// The same rejection, naming the upstream that turned the call away:
    /// the layers name theirs (a [`FailFastLayer`](crate::tower::FailFastLayer)'s
    /// name, a keyed layer's key); code that asks a breaker itself can name
    /// it here, and the name shows in [`Display`](fmt::Display).
    ///
    /// ```
    /// use failfast::{Breaker, RejectReason};
    ///
    /// let breaker = Breaker::builder().consecutive_failures(1).build()?;
    /// breaker.force_open();
    /// let rejected = breaker.try_acquire().unwrap_err().with_upstream("payments");
    /// assert_eq!(rejected.upstream().unwrap().to_string(), "payments");
    /// assert_eq!(rejected.to_string(), "payments: circuit forced open");
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    // The link to the tower layer resolves only with feature `tower` (as on
    // docs.rs); without it, a plain `cargo doc` need not warn about it.
    #[cfg_attr(not(feature = "tower"), allow(rustdoc::broken_intra_doc_links))]
    #[must_use]
    pub fn with_upstream(self, upstream: impl Into<String>) -> Rejected {
        self.named(Arc::new(upstream.into()))
    }

    /// [`with_upstream`](Self::with_upstream) with a name the layer already
    /// holds (a clone of its own `Arc`, or the registry entry it admitted
    /// through): no allocation.
    pub(crate) fn named(mut self, upstream: UpstreamName) -> Rejected {
        self.upstream = Some(upstream);
        self
    }

    /// Why the call was rejected.
    pub const fn reason(&self) -> RejectReason {
        match self.wait >> REASON_SHIFT {
            0 => RejectReason::Open,
            1 => RejectReason::HalfOpenFull,
            2 => RejectReason::ForcedOpen,
            3 => RejectReason::BulkheadFull,
            4 => RejectReason::Ramp,
            _ => RejectReason::RetryBudget,
        }
    }

    /// How long until a call may be admitted again, when the breaker knows:
    /// the rest of the open duration; while HALF_OPEN, the time until the
    /// probe round can end (its probes' slow-call threshold, or the probe
    /// lease, whichever comes first). `None` for a forced-open breaker or a
    /// full bulkhead.
    pub const fn retry_after(&self) -> Option<Duration> {
        match self.wait & RETRY_MASK {
            NO_RETRY => None,
            nanos => Some(Duration::from_nanos(nanos)),
        }
    }

    /// The upstream that turned the call away, when the code that asked the
    /// breaker named it (see [`with_upstream`](Self::with_upstream)): a
    /// layer's name, or a keyed layer's key. Formatted only when displayed.
    pub fn upstream(&self) -> Option<&(dyn fmt::Display + Send + Sync)> {
        self.upstream.as_deref()
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(upstream) = &self.upstream {
            write!(f, "{upstream}: ")?;
        }
        match self.reason() {
            RejectReason::Open => f.write_str("circuit open")?,
            RejectReason::HalfOpenFull => {
                f.write_str("circuit half-open and all probe slots taken")?
            }
            RejectReason::ForcedOpen => f.write_str("circuit forced open")?,
            RejectReason::BulkheadFull => f.write_str("bulkhead full")?,
            RejectReason::Ramp => f.write_str("circuit ramping up after a recovery")?,
            RejectReason::RetryBudget => f.write_str("retry refused by the retry budget")?,
        }
        if let Some(after) = self.retry_after() {
            write!(f, "; retry after {}", Wait(after))?;
        }
        Ok(())
    }
}

/// A wait as a person reads it, rounded up so that a caller who retries at
/// the time shown is never early: whole milliseconds below a second
/// (`350ms`), tenths of a second from one second on (`9.2s`, `30.0s`).
struct Wait(Duration);

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        const MS: u128 = 1_000_000;
        const TENTH: u128 = 100 * MS;
        let ms = nanos.div_ceil(MS);
        if ms < 1000 {
            write!(f, "{ms}ms")
        } else {
            let tenths = nanos.div_ceil(TENTH);
            write!(f, "{}.{}s", tenths / 10, tenths % 10)
        }
    }
}

impl fmt::Debug for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rejected")
            .field("reason", &self.reason())
            .field("retry_after", &self.retry_after())
            .field("upstream", &self.upstream().map(|u| u.to_string()))
            .finish()
    }
}

/// Equal when the reason, the wait and the upstream's name (as displayed)
/// are.
impl PartialEq for Rejected {
    fn eq(&self, other: &Rejected) -> bool {
        self.wait == other.wait
            && match (self.upstream(), other.upstream()) {
                (None, None) => true,
                (Some(a), Some(b)) => a.to_string() == b.to_string(),
                _ => false,
            }
    }
}

impl Eq for Rejected {}

impl std::error::Error for Rejected {}

/// An invalid configuration value, naming the field and the allowed range,
/// and the key when the value was a registry's per-key override.
///
/// ```
/// use failfast::{Breaker, Registry};
///
/// let err = Breaker::builder().failure_rate(1.5).build().unwrap_err();
/// assert_eq!(err.field(), "failure_rate");
/// assert_eq!(err.key(), None);
/// assert_eq!(err.to_string(), "invalid failfast config: failure_rate = 1.5; allowed: (0, 1]");
///
/// let err = Registry::<String>::builder(Breaker::builder().consecutive_failures(5))
///     .override_key("api.example:443".into(), Breaker::builder().failure_rate(1.5))
///     .build()
///     .unwrap_err();
/// assert_eq!(err.key(), Some(r#""api.example:443""#));
/// assert_eq!(
///     err.to_string(),
///     r#"invalid failfast config for key "api.example:443": failure_rate = 1.5; allowed: (0, 1]"#
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    field: &'static str,
    allowed: &'static str,
    found: String,
    /// The override's key, as `Debug` writes it.
    key: Option<String>,
}

impl ConfigError {
    pub(crate) fn new(
        field: &'static str,
        allowed: &'static str,
        found: impl fmt::Debug,
    ) -> ConfigError {
        ConfigError {
            field,
            allowed,
            found: format!("{found:?}"),
            key: None,
        }
    }

    /// This error, raised by the configuration of `key`'s override.
    pub(crate) fn with_key(mut self, key: &dyn fmt::Debug) -> ConfigError {
        self.key = Some(format!("{key:?}"));
        self
    }

    /// The builder method (and config field) that holds the bad value.
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// The allowed range, in words.
    pub fn allowed(&self) -> &'static str {
        self.allowed
    }

    /// The value that was given, formatted.
    pub fn found(&self) -> &str {
        &self.found
    }

    /// The key whose own configuration holds the bad value, as `Debug`
    /// writes it (a string key in quotes), or `None` for the template's or
    /// a standalone breaker's: see the example above.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid failfast config")?;
        if let Some(key) = &self.key {
            write!(f, " for key {key}")?;
        }
        write!(
            f,
            ": {} = {}; allowed: {}",
            self.field, self.found, self.allowed
        )
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_reads_in_milliseconds_then_tenths_rounded_up() {
        let shown = |nanos: u64| Wait(Duration::from_nanos(nanos)).to_string();
        assert_eq!(shown(0), "0ms");
        assert_eq!(shown(1), "1ms");
        assert_eq!(shown(1_000_000), "1ms");
        assert_eq!(shown(1_000_001), "2ms");
        assert_eq!(shown(998_000_001), "999ms");
        assert_eq!(shown(999_000_001), "1.0s", "1000 ms reads as a second");
        assert_eq!(shown(1_000_000_000), "1.0s");
        assert_eq!(shown(1_000_000_001), "1.1s");
        assert_eq!(shown(29_999_904_755), "30.0s");
        assert_eq!(shown(9_150_000_000), "9.2s");
        assert_eq!(shown(86_400_000_000_000), "86400.0s");
        assert_eq!(Wait(Duration::MAX).to_string(), "18446744073709551616.0s");
    }

    fn assert_send_sync_static<T: Send + Sync + 'static + std::error::Error>() {}

    #[test]
    fn errors_travel_in_a_box() {
        assert_send_sync_static::<Rejected>();
        assert_send_sync_static::<ConfigError>();
        let boxed: Box<dyn std::error::Error + Send + Sync> =
            Box::new(Rejected::new(RejectReason::BulkheadFull, None));
        let back = boxed.downcast_ref::<Rejected>().unwrap();
        assert_eq!(back.reason(), RejectReason::BulkheadFull);
        assert_eq!(back.to_string(), "bulkhead full");
    }
}
