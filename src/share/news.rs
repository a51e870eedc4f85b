//! What travels between replicas: [`LocalTrip`] (a replica to the store) and
//! [`News`] (the store to every replica), with the news' one-line wire form.

use core::fmt;
use core::time::Duration;

use crate::observe::Reason;

/// A replica's own trip on its way to the shared store.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LocalTrip {
    /// The upstream's key, as the registry's key type formats it.
    pub key: String,
    /// What is left of the open period now. The store adds it to its own
    /// clock: no replica's wall clock is ever shared.
    pub remaining: Duration,
    /// Why the breaker tripped.
    pub reason: Reason,
    /// The reporting replica.
    pub origin: String,
    /// How long a report counts toward the trip's reporters.
    pub window: Duration,
    /// How long the store keeps the record past the open period.
    pub slack: Duration,
}

impl LocalTrip {
    /// `origin`'s trip of `key` with `remaining` left, counted for
    /// [`DEFAULT_WINDOW`](super::DEFAULT_WINDOW) and kept
    /// [`DEFAULT_SLACK`](super::DEFAULT_SLACK) past its period (the
    /// replica's settings, when a replica sends it).
    pub fn new(
        key: impl Into<String>,
        remaining: Duration,
        reason: Reason,
        origin: impl Into<String>,
    ) -> LocalTrip {
        LocalTrip {
            key: key.into(),
            remaining,
            reason,
            origin: origin.into(),
            window: super::DEFAULT_WINDOW,
            slack: super::DEFAULT_SLACK,
        }
    }
}

/// A trip as the shared store announces it, published when it records a
/// trip and listed by reconciliation: what a replica applies.
///
/// ```
/// use failfast::share::News;
/// use failfast::Reason;
/// use std::time::Duration;
///
/// let news = News::new("db:5432", 42, Duration::from_millis(29_500), 2, Reason::FailureRate, "replica-a");
/// let wire = news.encode();
/// assert_eq!(wire, "42|29500|2|failure_rate|replica-a|db:5432");
/// assert_eq!(News::decode(&wire), Some(news));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct News {
    /// The upstream's key.
    pub key: String,
    /// The store's order of the key's news: a replica applies only an epoch
    /// newer than the last it applied for the key.
    pub epoch: u64,
    /// What is left of the open period when the store sent it (whole
    /// milliseconds, rounded up).
    pub remaining: Duration,
    /// Distinct replicas that reported the key within their window.
    pub reporters: u32,
    /// Why the last reporter tripped.
    pub reason: Reason,
    /// The last reporter.
    pub origin: String,
}

impl News {
    /// News of `key`.
    pub fn new(
        key: impl Into<String>,
        epoch: u64,
        remaining: Duration,
        reporters: u32,
        reason: Reason,
        origin: impl Into<String>,
    ) -> News {
        News {
            key: key.into(),
            epoch,
            remaining,
            reporters,
            reason,
            origin: origin.into(),
        }
    }

    /// The wire form: `epoch|remaining_ms|reporters|reason|origin|key`. The
    /// key comes last and may hold `|`; an origin may not
    /// ([`check_origin`]).
    pub fn encode(&self) -> String {
        format!(
            "{}|{}|{}|{}|{}|{}",
            self.epoch,
            ceil_millis(self.remaining),
            self.reporters,
            self.reason.as_str(),
            self.origin,
            self.key
        )
    }

    /// Parses the wire form; `None` if it is not one (an unknown reason
    /// too).
    pub fn decode(text: &str) -> Option<News> {
        let mut parts = text.splitn(6, '|');
        let epoch = parts.next()?.parse().ok()?;
        let remaining = Duration::from_millis(parts.next()?.parse().ok()?);
        let reporters = parts.next()?.parse().ok()?;
        let reason = trip_reason(parts.next()?)?;
        let origin = parts.next()?;
        let key = parts.next()?;
        if origin.is_empty() || key.is_empty() {
            return None;
        }
        Some(News::new(key, epoch, remaining, reporters, reason, origin))
    }
}

impl fmt::Display for News {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: open {} ms more ({}, epoch {}, {} reporter(s), last {})",
            self.key,
            ceil_millis(self.remaining),
            self.reason,
            self.epoch,
            self.reporters,
            self.origin
        )
    }
}

/// `d` in whole milliseconds, rounded up (a trip is never announced shorter
/// than it is).
pub(crate) fn ceil_millis(d: Duration) -> u64 {
    u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

/// The reasons news may carry: every reason a breaker opens for.
pub(crate) const TRIP_REASONS: [Reason; 7] = [
    Reason::ConsecutiveFailures,
    Reason::FailureRate,
    Reason::SlowCallRate,
    Reason::ProbeFailed,
    Reason::ProbeSlow,
    Reason::ProbeAbandoned,
    Reason::RemoteTrip,
];

/// The trip reason named `name` ([`Reason::as_str`]).
pub(crate) fn trip_reason(name: &str) -> Option<Reason> {
    TRIP_REASONS.into_iter().find(|r| r.as_str() == name)
}

/// The longest replica name, in bytes.
pub const MAX_ORIGIN_BYTES: usize = 64;

/// Whether `origin` can name a replica on the wire: 1 to
/// [`MAX_ORIGIN_BYTES`] bytes, printable ASCII without `|` or spaces.
pub fn check_origin(origin: &str) -> bool {
    (1..=MAX_ORIGIN_BYTES).contains(&origin.len())
        && origin.bytes().all(|b| b.is_ascii_graphic() && b != b'|')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_may_hold_the_separator() {
        let news = News::new(
            "a|b:1",
            1,
            Duration::from_millis(5),
            1,
            Reason::ProbeSlow,
            "r",
        );
        assert_eq!(News::decode(&news.encode()), Some(news));
    }

    #[test]
    fn remaining_rounds_up_to_whole_millis() {
        let news = News::new(
            "k",
            1,
            Duration::from_micros(1_001),
            1,
            Reason::FailureRate,
            "r",
        );
        assert_eq!(news.encode(), "1|2|1|failure_rate|r|k");
    }

    #[test]
    fn malformed_wire_is_refused() {
        for bad in [
            "",
            "1|2|1|failure_rate|r",
            "x|2|1|failure_rate|r|k",
            "1|-2|1|failure_rate|r|k",
            "1|2|1|reset|r|k",
            "1|2|1|no_such_reason|r|k",
            "1|2|1|failure_rate||k",
            "1|2|1|failure_rate|r|",
        ] {
            assert_eq!(News::decode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn origins_are_checked() {
        assert!(check_origin("replica-a.pod-7"));
        assert!(!check_origin(""));
        assert!(!check_origin("a|b"));
        assert!(!check_origin("a b"));
        assert!(!check_origin(&"a".repeat(MAX_ORIGIN_BYTES + 1)));
    }
}
