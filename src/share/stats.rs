//! [`SyncStats`]: what a replica's sharing did, readable while its task runs.

use core::fmt;
use std::sync::Arc;

use super::outbox::Outbox;
use crate::sync::{AtomicU64, Ordering};

/// Counters of one replica's sharing, shared with the task that runs it
/// (`Replica::stats`). All are totals since the replica was built.
///
/// ```
/// use failfast::share::{Outbox, Replica};
/// use failfast::{Breaker, Registry};
/// use std::sync::Arc;
///
/// let registry = Arc::new(Registry::<String>::builder(Breaker::builder().consecutive_failures(5)).build()?);
/// let replica = Replica::builder(registry, Arc::new(Outbox::new(64))).build()?;
/// let stats = replica.stats();
/// assert_eq!((stats.published(), stats.errors(), stats.dropped()), (0, 0, 0));
/// # Ok::<(), failfast::ConfigError>(())
/// ```
pub struct SyncStats {
    outbox: Arc<Outbox>,
    published: AtomicU64,
    errors: AtomicU64,
    received: AtomicU64,
    applied: AtomicU64,
    stale: AtomicU64,
    below_min_reporters: AtomicU64,
    ignored: AtomicU64,
    reconciled: AtomicU64,
    bad_records: AtomicU64,
}

/// Which counter to bump.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Count {
    Published,
    Errors,
    Received,
    Applied,
    Stale,
    BelowMinReporters,
    Ignored,
    Reconciled,
    BadRecords,
}

impl SyncStats {
    pub(crate) fn new(outbox: Arc<Outbox>) -> SyncStats {
        SyncStats {
            outbox,
            published: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            received: AtomicU64::new(0),
            applied: AtomicU64::new(0),
            stale: AtomicU64::new(0),
            below_min_reporters: AtomicU64::new(0),
            ignored: AtomicU64::new(0),
            reconciled: AtomicU64::new(0),
            bad_records: AtomicU64::new(0),
        }
    }

    fn cell(&self, which: Count) -> &AtomicU64 {
        match which {
            Count::Published => &self.published,
            Count::Errors => &self.errors,
            Count::Received => &self.received,
            Count::Applied => &self.applied,
            Count::Stale => &self.stale,
            Count::BelowMinReporters => &self.below_min_reporters,
            Count::Ignored => &self.ignored,
            Count::Reconciled => &self.reconciled,
            Count::BadRecords => &self.bad_records,
        }
    }

    pub(crate) fn add(&self, which: Count, n: u64) {
        // Relaxed: statistics; nothing is published through them.
        self.cell(which).fetch_add(n, Ordering::Relaxed);
    }

    fn get(&self, which: Count) -> u64 {
        // Relaxed: statistics.
        self.cell(which).load(Ordering::Relaxed)
    }

    /// Local trips the store accepted (`sync_published`).
    pub fn published(&self) -> u64 {
        self.get(Count::Published)
    }

    /// Store operations that failed or timed out: the replica went on
    /// local-only meanwhile (`sync_errors`).
    pub fn errors(&self) -> u64 {
        self.get(Count::Errors)
    }

    /// Local trips never shared: the outbox was full, a key too long, or
    /// the table of trips waiting to be published was full
    /// (`sync_dropped`, [`Outbox::dropped`]).
    pub fn dropped(&self) -> u64 {
        self.outbox.dropped()
    }

    /// News received, by subscription or reconciliation.
    pub fn received(&self) -> u64 {
        self.get(Count::Received)
    }

    /// News that changed a breaker: opened it or extended its open period.
    pub fn applied(&self) -> u64 {
        self.get(Count::Applied)
    }

    /// News not newer than the last applied for its key (duplicates,
    /// reordered, stale).
    pub fn stale(&self) -> u64 {
        self.get(Count::Stale)
    }

    /// News reported by fewer replicas than `min_reporters`.
    pub fn below_min_reporters(&self) -> u64 {
        self.get(Count::BelowMinReporters)
    }

    /// Well-formed news set aside otherwise: a key the registry's key type
    /// refuses or cannot track (full), or this replica's own trip.
    pub fn ignored(&self) -> u64 {
        self.get(Count::Ignored)
    }

    /// Reconciliations done: rounds in which the open trips of every part
    /// of the store (every shard, with Redis) were read and applied.
    pub fn reconciled(&self) -> u64 {
        self.get(Count::Reconciled)
    }

    /// Malformed records and messages found in the store and set aside,
    /// never fatal (`sync_bad_records`): a record with a field missing or of
    /// the wrong type, a key of the wrong Redis type under the store's
    /// names, a pub/sub message that is not news. Reconciliation skips
    /// them; a trip replaces a bad record of its key. The other keys go on
    /// sharing as usual.
    pub fn bad_records(&self) -> u64 {
        self.get(Count::BadRecords)
    }

    /// Publishes these counters through the `metrics` facade (feature
    /// `metrics`) as the absolute counters `circuit_breaker_sync_*_total`
    /// (named in [`export::metrics`](crate::export::metrics)); no labels
    /// (one replica per process is the usual case). Call it at scrape time,
    /// beside [`MetricsExporter`](crate::export::metrics::MetricsExporter).
    ///
    /// ```
    /// use failfast::share::{Outbox, Replica};
    /// use failfast::{Breaker, Registry};
    /// use std::sync::Arc;
    ///
    /// let registry = Arc::new(Registry::<String>::builder(Breaker::builder().consecutive_failures(3)).build()?);
    /// let replica = Replica::builder(registry, Arc::new(Outbox::new(64))).build()?;
    /// let stats = replica.stats(); // keep it; the replica goes to its task
    /// // In the scrape handler, before rendering:
    /// stats.export_metrics();
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn export_metrics(&self) {
        let values = [
            self.published(),
            self.errors(),
            self.dropped(),
            self.received(),
            self.applied(),
            self.stale(),
            self.below_min_reporters(),
            self.ignored(),
            self.reconciled(),
            self.bad_records(),
        ];
        for ((name, _), value) in crate::export::metrics::SYNC.into_iter().zip(values) {
            metrics::counter!(name).absolute(value);
        }
    }
}

impl fmt::Debug for SyncStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SyncStats")
            .field("published", &self.published())
            .field("errors", &self.errors())
            .field("dropped", &self.dropped())
            .field("received", &self.received())
            .field("applied", &self.applied())
            .field("stale", &self.stale())
            .field("below_min_reporters", &self.below_min_reporters())
            .field("ignored", &self.ignored())
            .field("reconciled", &self.reconciled())
            .field("bad_records", &self.bad_records())
            .finish()
    }
}
