//! [`TokioClock`]: breaker time that follows tokio's clock.

use crate::clock::{Clock, Nanos};

/// A [`Clock`] on `tokio::time::Instant`: the breaker's time follows tokio's,
/// so a test on a paused runtime (`#[tokio::test(start_paused = true)]`,
/// `tokio::time::advance`) moves the breakers' open periods, probe leases and
/// slow-call timing together with its timers — no sleeps, no drift between
/// a layer's timeout and the breaker behind it.
///
/// Outside a paused runtime it reads the monotonic clock, like
/// [`StdClock`](crate::StdClock).
///
/// Its wall clock ([`Clock::wall`]) is the system's, paused or not: an
/// upstream's `Retry-After` date was written on the upstream's wall clock,
/// which tokio's paused time does not move either. A test that needs both
/// pinned uses [`ManualClock`](crate::ManualClock).
///
/// ```
/// use failfast::tower::TokioClock;
/// use failfast::Breaker;
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), failfast::ConfigError> {
/// let breaker = Breaker::builder()
///     .consecutive_failures(1)
///     .open_duration(Duration::from_secs(30))
///     .build_with_clock(TokioClock::new())?;
/// let _ = breaker.try_acquire().unwrap().failure();
/// tokio::time::advance(Duration::from_secs(30)).await;
/// assert!(breaker.try_acquire().unwrap().is_probe());
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl TokioClock {
    /// A clock whose origin is tokio's now.
    pub fn new() -> TokioClock {
        TokioClock {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        TokioClock::new()
    }
}

impl Clock for TokioClock {
    #[inline]
    fn now(&self) -> Nanos {
        Nanos::from_duration(self.origin.elapsed())
    }
}
