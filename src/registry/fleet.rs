//! Counters shared by the breakers of one registry: breakers per state, and
//! the fleet-wide cap on open breakers (Envoy's max ejection percent), as the
//! breakers' [`TripGate`].
//!
//! Touched only on transitions and on registry inserts and evictions, never
//! per call. A breaker is *ejected* while Open or HalfOpen. A trip from Closed
//! of a breaker that has been seen succeeding first reserves an ejection slot
//! and is refused (the breaker stays Closed, the refusal is counted) when
//! none is left. A breaker never seen succeeding — junk keys that never
//! worked, a host that is down from the start — trips without a slot: it
//! cannot use up the budget the real upstreams need. The slot travels with
//! the ejection in the breaker's state word and is given back when the
//! breaker closes, is forced, reset, or leaves the registry.

use crate::breaker::TripGate;
use crate::state::State;
use crate::sync::{AtomicU64, AtomicUsize, Ordering};

/// The most breakers that may be ejected at once.
#[derive(Copy, Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum MaxOpen {
    /// No cap.
    Unlimited,
    /// At most this many.
    Count(usize),
    /// At most this fraction of the tracked breakers, and never fewer than one.
    Fraction(f64),
}

/// Fleet-wide counters. All Relaxed: they are statistics and a budget; no
/// other memory is published through them.
#[derive(Debug)]
pub(crate) struct Fleet {
    by_state: [AtomicUsize; 6],
    ejected: AtomicUsize,
    tracked: AtomicUsize,
    refused: AtomicU64,
    max_open: MaxOpen,
}

fn index(state: State) -> usize {
    State::all().iter().position(|s| *s == state).unwrap_or(0)
}

impl Fleet {
    pub(crate) fn new(max_open: MaxOpen) -> Fleet {
        Fleet {
            by_state: Default::default(),
            ejected: AtomicUsize::new(0),
            tracked: AtomicUsize::new(0),
            refused: AtomicU64::new(0),
            max_open,
        }
    }

    fn limit(&self) -> usize {
        match self.max_open {
            MaxOpen::Unlimited => usize::MAX,
            MaxOpen::Count(n) => n,
            MaxOpen::Fraction(f) => {
                let tracked = self.tracked.load(Ordering::Relaxed);
                ((tracked as f64 * f) as usize).max(1)
            }
        }
    }

    /// Takes an ejection slot, or counts a refusal.
    fn try_reserve(&self) -> bool {
        let limit = self.limit();
        let reserved = self
            .ejected
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |e| {
                (e < limit).then_some(e + 1)
            })
            .is_ok();
        if !reserved {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        reserved
    }

    /// Gives an ejection slot back.
    fn release(&self) {
        self.ejected.fetch_sub(1, Ordering::Relaxed);
    }

    /// A new breaker (Closed) joined the fleet.
    pub(crate) fn on_insert(&self) {
        self.by_state[index(State::Closed)].fetch_add(1, Ordering::Relaxed);
        self.tracked.fetch_add(1, Ordering::Relaxed);
    }

    /// A breaker in `state` left the fleet, holding an ejection slot or not.
    pub(crate) fn on_remove(&self, state: State, held_slot: bool) {
        self.by_state[index(state)].fetch_sub(1, Ordering::Relaxed);
        self.tracked.fetch_sub(1, Ordering::Relaxed);
        if held_slot {
            self.release();
        }
    }

    pub(crate) fn count(&self, state: State) -> usize {
        self.by_state[index(state)].load(Ordering::Relaxed)
    }

    pub(crate) fn tracked(&self) -> usize {
        self.tracked.load(Ordering::Relaxed)
    }

    pub(crate) fn refused_trips(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

impl TripGate for Fleet {
    fn admit_trip(&self, proven: bool) -> Option<bool> {
        if !proven {
            return Some(false); // ejected, but not out of the budget
        }
        self.try_reserve().then_some(true)
    }

    fn cancel_trip(&self) {
        self.release();
    }

    fn on_transition(&self, from: State, to: State, released_slot: bool) {
        if from != to {
            self.by_state[index(from)].fetch_sub(1, Ordering::Relaxed);
            self.by_state[index(to)].fetch_add(1, Ordering::Relaxed);
        }
        if released_slot {
            self.release();
        }
    }
}
