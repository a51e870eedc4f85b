//! The crate's two errors: [`Rejected`] (a call turned away) and [`ConfigError`].
//!
//! Both are small, hand-written, `Send + Sync + 'static`, so they travel inside
//! `tower::BoxError` and downcast back.

use core::fmt;
use core::time::Duration;

/// Why a call was turned away without running.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// The breaker is OPEN and its open duration has not passed.
    Open,
    /// The breaker is HALF_OPEN and every probe slot of this round is taken.
    HalfOpenFull,
    /// The breaker was forced open by an operator.
    ForcedOpen,
    /// The bulkhead in front of the dependency is full.
    BulkheadFull,
}

impl RejectReason {
    /// A short lowercase name for logs and metrics labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            RejectReason::Open => "open",
            RejectReason::HalfOpenFull => "half_open_full",
            RejectReason::ForcedOpen => "forced_open",
            RejectReason::BulkheadFull => "bulkhead_full",
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
/// assert_eq!(rejected.to_string(), "circuit open; retry after 6s");
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Rejected {
    reason: RejectReason,
    retry_after: Option<Duration>,
}

impl Rejected {
    pub(crate) const fn new(reason: RejectReason, retry_after: Option<Duration>) -> Rejected {
        Rejected {
            reason,
            retry_after,
        }
    }

    /// Why the call was rejected.
    pub const fn reason(&self) -> RejectReason {
        self.reason
    }

    /// How long until a call may be admitted again, when the breaker knows:
    /// the rest of the open duration, or of the probe lease while HALF_OPEN.
    /// `None` for a forced-open breaker or a full bulkhead.
    pub const fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            RejectReason::Open => f.write_str("circuit open")?,
            RejectReason::HalfOpenFull => {
                f.write_str("circuit half-open and all probe slots taken")?
            }
            RejectReason::ForcedOpen => f.write_str("circuit forced open")?,
            RejectReason::BulkheadFull => f.write_str("bulkhead full")?,
        }
        if let Some(after) = self.retry_after {
            write!(f, "; retry after {after:?}")?;
        }
        Ok(())
    }
}

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
