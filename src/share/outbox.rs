//! [`Outbox`]: where the request path leaves news of a local trip for the
//! sync task: one lock-free push, only when a breaker trips.

use core::fmt;
use core::time::Duration;

use crossbeam_queue::ArrayQueue;

use crate::clock::Nanos;
use crate::observe::{Reason, Transition};
use crate::state::State;
use crate::sync::{AtomicU64, Ordering};

/// The longest key an [`Outbox`] carries, in bytes: a DNS name (253) and a
/// short suffix. A longer key is dropped and counted in
/// [`Outbox::dropped`].
pub const MAX_KEY_BYTES: usize = 255;

/// A local trip waiting in the outbox: the key inline (no allocation on the
/// request path), when the breaker opened and for how long.
#[derive(Copy, Clone)]
pub(crate) struct Report {
    key: [u8; MAX_KEY_BYTES],
    len: u8,
    /// When the breaker opened, on its clock.
    pub(crate) at: Nanos,
    /// How long it stays open (its jitter included).
    pub(crate) open_for: Duration,
    pub(crate) reason: Reason,
}

impl Report {
    /// The key's text.
    pub(crate) fn key(&self) -> &str {
        // Copied whole from a `&str`: valid UTF-8.
        core::str::from_utf8(&self.key[..usize::from(self.len)]).unwrap_or_default()
    }

    /// When the open period ends, on the breaker's clock.
    pub(crate) fn until(&self) -> Nanos {
        self.at.saturating_add(self.open_for)
    }
}

/// A bounded, lock-free queue of local trips, between the request path
/// (which [`report`](Outbox::report)s the transitions its verdicts return)
/// and the task that shares them with the other replicas.
///
/// A report is one push into a fixed ring allocated up front: no lock, no
/// allocation, no waiting. Only local trips are kept — a transition to Open
/// whose reason is not [`Reason::RemoteTrip`], so news from other replicas
/// is never echoed back. When the ring is full the report is dropped and
/// counted ([`dropped`](Outbox::dropped), the `sync_dropped` metric): the
/// other replicas then learn of the trip on their own, as without sharing.
///
/// ```
/// use failfast::share::Outbox;
/// use failfast::{Breaker, ManualClock, Nanos};
///
/// let outbox = Outbox::new(1024);
/// let breaker = Breaker::builder()
///     .consecutive_failures(1)
///     .build_with_clock(ManualClock::new())?;
/// let permit = breaker.try_acquire_at(Nanos::ZERO).unwrap();
/// // The verdict that trips the breaker returns the transition: report it.
/// if let Some(t) = permit.failure_at(Nanos::ZERO) {
///     assert!(outbox.report("db.example:5432", &t));
/// }
/// assert_eq!(outbox.len(), 1);
/// # Ok::<(), failfast::ConfigError>(())
/// ```
pub struct Outbox {
    queue: ArrayQueue<Report>,
    dropped: AtomicU64,
}

impl Outbox {
    /// An outbox holding up to `capacity` reports (at least one), allocated
    /// now: about 280 bytes each.
    pub fn new(capacity: usize) -> Outbox {
        Outbox {
            queue: ArrayQueue::new(capacity.max(1)),
            dropped: AtomicU64::new(0),
        }
    }

    /// Queues `transition` of `key`'s breaker if it is a local trip; `true`
    /// if it was queued. Not a trip, or news from another replica: `false`,
    /// nothing counted. Full, or a key longer than [`MAX_KEY_BYTES`]:
    /// `false`, counted in [`dropped`](Self::dropped).
    ///
    /// Lock-free and allocation-free: callable from the request path (the
    /// call whose verdict tripped the breaker).
    pub fn report(&self, key: &str, transition: &Transition) -> bool {
        let Some(open_for) = transition.open_for else {
            return false;
        };
        if transition.to != State::Open || transition.reason == Reason::RemoteTrip {
            return false;
        }
        let Ok(len) = u8::try_from(key.len()) else {
            self.count_dropped();
            return false;
        };
        let mut report = Report {
            key: [0; MAX_KEY_BYTES],
            len,
            at: transition.at,
            open_for,
            reason: transition.reason,
        };
        report.key[..key.len()].copy_from_slice(key.as_bytes());
        if self.queue.push(report).is_err() {
            self.count_dropped();
            return false;
        }
        true
    }

    /// Reports dropped: the outbox was full, the key too long, or the sync
    /// task's own table of trips to publish was full (`sync_dropped`).
    pub fn dropped(&self) -> u64 {
        // Relaxed: a statistic; nothing is published through it.
        self.dropped.load(Ordering::Relaxed)
    }

    /// Reports waiting.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether no report is waiting.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The most reports it holds.
    pub fn capacity(&self) -> usize {
        self.queue.capacity()
    }

    /// The oldest waiting report.
    pub(crate) fn pop(&self) -> Option<Report> {
        self.queue.pop()
    }

    /// Counts one dropped report.
    pub(crate) fn count_dropped(&self) {
        // Relaxed: a statistic.
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }
}

impl fmt::Debug for Outbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outbox")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("dropped", &self.dropped())
            .finish()
    }
}

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;
    use crate::window::WindowCounts;

    fn transition(to: State, reason: Reason, open_for: Option<Duration>) -> Transition {
        Transition {
            from: State::Closed,
            to,
            reason,
            generation: 1,
            at: Nanos::from_secs(3),
            breaker_id: 7,
            window: WindowCounts::default(),
            consecutive_failures: 0,
            unanswered_calls: 0,
            probe_successes: 0,
            trips_in_a_row: 1,
            open_for,
            outlier_rule: None,
        }
    }

    const TEN_S: Option<Duration> = Some(Duration::from_secs(10));

    #[test]
    fn keeps_local_trips_only() {
        let outbox = Outbox::new(8);
        let trip = transition(State::Open, Reason::FailureRate, TEN_S);
        assert!(outbox.report("a:1", &trip));
        assert!(!outbox.report("a:1", &transition(State::Open, Reason::RemoteTrip, TEN_S)));
        assert!(!outbox.report(
            "a:1",
            &transition(State::HalfOpen, Reason::OpenElapsed, None)
        ));
        assert!(!outbox.report(
            "a:1",
            &transition(State::Closed, Reason::ProbesSucceeded, None)
        ));
        assert_eq!((outbox.len(), outbox.dropped()), (1, 0));
        let r = outbox.pop().unwrap();
        assert_eq!(r.key(), "a:1");
        assert_eq!(
            (r.at, r.open_for, r.reason),
            (trip.at, Duration::from_secs(10), Reason::FailureRate)
        );
        assert_eq!(r.until(), Nanos::from_secs(13));
        assert!(outbox.pop().is_none());
    }

    #[test]
    fn full_or_too_long_is_dropped_and_counted() {
        let outbox = Outbox::new(2);
        let trip = transition(State::Open, Reason::ProbeFailed, TEN_S);
        assert!(outbox.report("a", &trip));
        assert!(outbox.report("b", &trip));
        assert!(!outbox.report("c", &trip));
        assert_eq!(outbox.dropped(), 1);
        let long = "x".repeat(MAX_KEY_BYTES + 1);
        assert!(!outbox.report(&long, &trip));
        assert_eq!(outbox.dropped(), 2);
        assert_eq!(outbox.pop().unwrap().key(), "a");
        let longest = "y".repeat(MAX_KEY_BYTES);
        assert!(outbox.report(&longest, &trip));
        assert_eq!(outbox.pop().unwrap().key(), "b");
        assert_eq!(outbox.pop().unwrap().key(), longest);
    }
}
