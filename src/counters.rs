//! Optional lifetime call counters (admitted, rejected, outcomes).
//!
//! Off by default: each counter is a read-modify-write on the request path,
//! and invariant 8 promises none for a healthy call. Turn them on with
//! [`Builder::count_calls`](crate::Builder::count_calls) when a dashboard
//! needs totals per breaker.

use crate::observe::CallCounts;
use crate::outcome::Verdict;
use crate::sync::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub(crate) struct CallCounters {
    admitted: AtomicU64,
    rejected: AtomicU64,
    successes: AtomicU64,
    failures: AtomicU64,
    ignored: AtomicU64,
    dropped: AtomicU64,
    abandoned: AtomicU64,
    panicked: AtomicU64,
    slow: AtomicU64,
}

// Relaxed throughout: each counter is a statistic, not a guard for other memory.
impl CallCounters {
    pub(crate) fn admitted(&self) {
        self.admitted.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn rejected(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn verdict(&self, verdict: Verdict, slow: bool) {
        let counter = match verdict {
            Verdict::Success => &self.successes,
            Verdict::Failure => &self.failures,
            Verdict::Ignored => &self.ignored,
            Verdict::Dropped => &self.dropped,
            Verdict::AbandonedSlow | Verdict::AbandonedFailure => &self.abandoned,
            Verdict::Panicked => &self.panicked,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if slow {
            self.slow.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn read(&self) -> CallCounts {
        CallCounts {
            admitted: self.admitted.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            successes: self.successes.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            ignored: self.ignored.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            abandoned: self.abandoned.load(Ordering::Relaxed),
            panicked: self.panicked.load(Ordering::Relaxed),
            slow: self.slow.load(Ordering::Relaxed),
        }
    }
}
