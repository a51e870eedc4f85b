//! [`RemoteTrip`]: news from another replica that an upstream is down.
//!
//! A service that runs as several replicas can share trips (the `redis`
//! feature does; any transport can): a replica that trips tells the others
//! how much of its open period is left, and each applies the news with
//! [`Breaker::apply_remote_at`](crate::Breaker::apply_remote_at) or
//! [`Registry::apply_remote_at`](crate::Registry::apply_remote_at). The
//! merge is monotone — it opens a closed breaker or extends an open period
//! to the later end, and never closes, half-opens or shortens anything —
//! and recovery stays local: each replica probes for itself when its period
//! ends, shortened by its own jitter.
//!
//! What travels is the *remaining* time, never a wall-clock instant (the
//! replicas' clocks differ): the receiver opens until its own now plus what
//! is left. Duplicates and reordering are the transport's to filter, by
//! `epoch` (a late duplicate would extend a period by its delay).

use core::time::Duration;

use crate::observe::Reason;

/// A trip reported by another replica.
///
/// ```
/// use failfast::{Breaker, ManualClock, Nanos, Reason, RemoteTrip, State};
/// use std::time::Duration;
///
/// let breaker = Breaker::builder()
///     .consecutive_failures(5)
///     .build_with_clock(ManualClock::new())?;
/// let news = RemoteTrip::new(7, Duration::from_secs(20), Reason::ConsecutiveFailures);
/// let t = breaker.apply_remote_at(&news, Nanos::from_secs(100)).unwrap();
/// assert_eq!((t.to, t.reason), (State::Open, Reason::RemoteTrip));
/// // Rejected until its own now + what was left (rounded up to 16.8 ms).
/// assert!(breaker.try_acquire_at(Nanos::from_secs(119)).is_err());
/// assert!(breaker.try_acquire_at(Nanos::from_secs(121)).unwrap().is_probe());
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteTrip {
    /// Orders the news of one upstream: the transport applies only a newer
    /// epoch than it applied last for that upstream.
    pub epoch: u64,
    /// How much of the open period was left when the news left its replica.
    pub remaining: Duration,
    /// Why the replica tripped.
    pub reason: Reason,
}

impl RemoteTrip {
    /// News of a trip with `remaining` of its open period left.
    pub const fn new(epoch: u64, remaining: Duration, reason: Reason) -> RemoteTrip {
        RemoteTrip {
            epoch,
            remaining,
            reason,
        }
    }
}
