//! When to sweep, and which shard is next: the schedule of idle eviction,
//! with no thread and no timer.
//!
//! A full pass over the shards should take about one idle TTL, so one shard is
//! due every `ttl / shards`. Whoever notices that a shard is due (an insert,
//! or an explicit `maintain`) tries one strong CAS on the last-sweep stamp;
//! only the winner sweeps, the losers go on with their request.

use core::fmt;

use crate::clock::Nanos;
use crate::sync::{AtomicU64, AtomicUsize, Ordering};

/// The sweep cursor and the stamp of the last scheduled sweep.
pub(crate) struct Schedule {
    /// The next shard to sweep (taken modulo the shard count).
    cursor: AtomicUsize,
    /// When the last scheduled sweep started, in ns.
    last: AtomicU64,
    /// ns between scheduled shard sweeps: `ttl / shards`, at least 1.
    interval: u64,
}

impl Schedule {
    pub(crate) fn new(interval: u64, now: Nanos) -> Schedule {
        Schedule {
            cursor: AtomicUsize::new(0),
            last: AtomicU64::new(now.as_nanos()),
            interval: interval.max(1),
        }
    }

    /// The next shard in round-robin order.
    pub(crate) fn next_shard(&self, shards: usize) -> usize {
        // Relaxed: the cursor only spreads sweeps over shards; it publishes
        // nothing, and two sweepers on one shard are safe (each takes its lock).
        self.cursor.fetch_add(1, Ordering::Relaxed) % shards
    }

    /// How many shards are due at `now`, at most `max`, claimed by one strong
    /// CAS on the last-sweep stamp: the winner gets the count, a loser (or a
    /// caller before the next due time) gets 0 and does not retry.
    pub(crate) fn claim(&self, now: Nanos, max: usize) -> usize {
        // Relaxed: the stamp is a schedule, not a publication; the shard locks
        // order the sweeps themselves.
        let last = self.last.load(Ordering::Relaxed);
        let elapsed = now.as_nanos().saturating_sub(last);
        if elapsed < self.interval {
            return 0;
        }
        let due = usize::try_from(elapsed / self.interval)
            .unwrap_or(usize::MAX)
            .min(max);
        // Relaxed (both): as above. Strong, because exactly one caller may win.
        match self
            .last
            .compare_exchange(last, now.as_nanos(), Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => due,
            Err(_) => 0,
        }
    }
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schedule")
            .field("interval_ns", &self.interval)
            .finish_non_exhaustive()
    }
}
