//! The per-call deadline: [`TimedOut`].
//!
//! Set with [`FailFastLayer::timeout`](super::FailFastLayer::timeout) or
//! [`KeyedLayer::timeout`](super::KeyedLayer::timeout). The deadline is a
//! `tokio::time::Sleep` inside the response future (created only when a
//! timeout is set, polled only by whoever polls the response): no task, no
//! background timer. When it fires first, the inner future is dropped, the
//! call is recorded as a **failure that ended at admission + timeout**,
//! whatever the poll latency (the `Sleep` itself is armed when the response
//! future is created, just after the inner `call`; for [`Eject`](super::Eject),
//! whose permit is taken in `poll_ready`, admission can precede the call) — so it is also a
//! **slow call** whenever the timeout is at least the slow-call threshold —
//! and the caller gets [`TimedOut`] boxed in [`tower::BoxError`].

use core::fmt;
use core::time::Duration;

/// A call cut at its deadline. Downcast it from [`tower::BoxError`].
///
/// ```
/// use failfast::tower::TimedOut;
/// use std::time::Duration;
///
/// let err: tower::BoxError = Box::new(TimedOut::new(Duration::from_secs(2)));
/// let timed_out = err.downcast_ref::<TimedOut>().unwrap();
/// assert_eq!(timed_out.after(), Duration::from_secs(2));
/// assert_eq!(err.to_string(), "call timed out after 2s");
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TimedOut {
    after: Duration,
}

impl TimedOut {
    /// A timeout that fired `after` the call was admitted.
    pub const fn new(after: Duration) -> TimedOut {
        TimedOut { after }
    }

    /// The configured timeout.
    pub const fn after(&self) -> Duration {
        self.after
    }
}

impl fmt::Display for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "call timed out after {:?}", self.after)
    }
}

impl std::error::Error for TimedOut {}
