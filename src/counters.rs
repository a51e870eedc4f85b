//! Optional lifetime call counters (admitted, rejected, and how each call
//! ended), kept in the first slots of a breaker's [`Storage`](crate::storage).
//!
//! Off by default: each counter is a read-modify-write on the request path,
//! and invariant 8 promises none for a healthy call. Turn them on with
//! [`Builder::count_calls`](crate::Builder::count_calls) when a dashboard
//! needs totals per breaker.

use crate::observe::CallCounts;
use crate::outcome::Verdict;
use crate::sync::{AtomicU64, Ordering};

/// Slots the counters take.
pub(crate) const SLOTS: usize = 11;

const ADMITTED: usize = 0;
const REJECTED: usize = 1;
const SUCCESSES: usize = 2;
const FAILURES: usize = 3;
const IGNORED: usize = 4;
const DROPPED: usize = 5;
const ABANDONED: usize = 6;
const PANICKED: usize = 7;
const SLOW: usize = 8;
const NEUTRAL: usize = 9;
const UNANSWERED: usize = 10;

/// The counters in `slots` (exactly [`SLOTS`] of them).
#[derive(Copy, Clone)]
pub(crate) struct Counters<'a>(&'a [AtomicU64]);

// Relaxed throughout: each counter is a statistic, not a guard for other memory.
impl<'a> Counters<'a> {
    #[inline]
    pub(crate) fn new(slots: &'a [AtomicU64]) -> Counters<'a> {
        debug_assert_eq!(slots.len(), SLOTS);
        Counters(slots)
    }

    #[inline]
    fn bump(self, i: usize) {
        self.0[i].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn admitted(self) {
        self.bump(ADMITTED);
    }

    pub(crate) fn rejected(self) {
        self.bump(REJECTED);
    }

    pub(crate) fn verdict(self, verdict: Verdict, slow: bool) {
        self.bump(match verdict {
            Verdict::Success => SUCCESSES,
            Verdict::Failure => FAILURES,
            Verdict::Ignored => IGNORED,
            Verdict::Neutral => NEUTRAL,
            Verdict::Dropped => DROPPED,
            Verdict::Unanswered => UNANSWERED,
            Verdict::AbandonedSlow | Verdict::AbandonedFailure => ABANDONED,
            Verdict::Panicked => PANICKED,
        });
        if slow {
            self.bump(SLOW);
        }
    }

    pub(crate) fn read(self) -> CallCounts {
        let n = |i: usize| self.0[i].load(Ordering::Relaxed);
        CallCounts {
            admitted: n(ADMITTED),
            rejected: n(REJECTED),
            successes: n(SUCCESSES),
            failures: n(FAILURES),
            ignored: n(IGNORED),
            neutral: n(NEUTRAL),
            dropped: n(DROPPED),
            unanswered: n(UNANSWERED),
            abandoned: n(ABANDONED),
            panicked: n(PANICKED),
            slow: n(SLOW),
            // The budget keeps its own count, read beside these.
            retries_refused: 0,
        }
    }
}
