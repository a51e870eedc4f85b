//! [`Store`]: the shared side of trip sharing, as a replica drives it
//! synchronously (the in-process [`MemoryStore`](super::MemoryStore); the
//! `redis` module drives the same [`Replica`](super::Replica) over the
//! network instead).

use super::news::{LocalTrip, News};

/// Where replicas record their trips and read the open ones: the rules the
/// `redis` module's Lua scripts run, for a store a replica calls directly.
///
/// Its rules, per key:
///
/// * [`trip`](Store::trip) adds the reporter (replicas that reported the key
///   within their window are its *reporters*) and ends the key's period at
///   the later of its current end and the store's now plus the trip's
///   `remaining`. If that changes nothing — the end is not later and the
///   reporters are not more — it returns `None`; otherwise the key gets a
///   new epoch, greater than any before it, and the news to deliver to every
///   replica.
/// * A record outlives its period by the trip's slack, then vanishes.
/// * [`open_trips`](Store::open_trips) lists every key whose period has not
///   ended, with what is left of it (reconciliation).
pub trait Store {
    /// Why the store could not be reached.
    type Error;

    /// Records a local trip; the news to deliver to every replica if the
    /// store learned something (see the rules above).
    fn trip(&mut self, trip: &LocalTrip) -> Result<Option<News>, Self::Error>;

    /// The news of every key still open.
    fn open_trips(&mut self) -> Result<Vec<News>, Self::Error>;

    /// How many malformed records the store found and set aside since the
    /// last call (which forgets them): skipped by
    /// [`open_trips`](Store::open_trips), or replaced by a
    /// [`trip`](Store::trip) of their key. A bad record is never an error:
    /// the other keys go on. The replica adds them to
    /// [`SyncStats::bad_records`](super::SyncStats::bad_records). A store
    /// of typed records ([`MemoryStore`](super::MemoryStore)) has none: the
    /// default is 0.
    fn take_bad_records(&mut self) -> u64 {
        0
    }
}
