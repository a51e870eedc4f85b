//! Trips shared across replicas, with nothing on the request path.
//!
//! A service that runs as N replicas has N sets of breakers. When an
//! upstream dies, each replica finds out on its own — N × the trip
//! threshold calls hit the dying host — and after the open period all N
//! probe it at once. Sharing *trips* fixes both: the first replica that
//! trips tells the others, which reject the host at once, each for what is
//! left of that period and each probing at its own time: a replica ends a
//! remote period early by its own probe offset (see [Probes spread](#probes-spread)).
//!
//! # What runs where
//!
//! | where | what | cost |
//! |---|---|---|
//! | the request path | admission and verdicts, as without sharing; a verdict that *trips* a breaker returns its [`Transition`](crate::Transition), which goes into an [`Outbox`] ([`Outbox::report`], or [`Outbox::hook`] on a keyed layer) | one lock-free push per trip; nothing per call |
//! | one task per registry | a [`Replica`] drains the outbox and publishes each trip; merges news from the store into the registry; reconciles every few seconds | the task's own; never waited on |
//! | the store | records trips, orders them (epochs), counts reporters, expires them, announces them | [`MemoryStore`] in process; Redis with the `redis` feature |
//!
//! The core spawns nothing: the user starts the task (with the `redis`
//! feature, `tokio::spawn(sync.run())`), or a simulation calls
//! [`Replica::publish_to`], [`Replica::receive`] and
//! [`Replica::reconcile_with`] itself.
//!
//! # The rules
//!
//! * **Only local trips travel.** The outbox keeps a transition to Open
//!   whose reason is not [`Reason::RemoteTrip`](crate::Reason::RemoteTrip):
//!   news is never echoed back.
//! * **What travels is the time left, never an instant.** A replica sends
//!   what is left of its open period; the store adds it to its own clock;
//!   news carries what is left when it is sent; a receiver opens until *its
//!   own* now plus that. Replicas' clocks never meet.
//! * **A monotone merge.** News opens a Closed breaker or extends an Open
//!   period to the later end; it never closes, half-opens, shortens a
//!   period or touches a probe round
//!   ([`Breaker::apply_remote_at`](crate::Breaker::apply_remote_at)).
//!   Recovery stays local: each replica probes when its own period ends,
//!   shortened by its own probe offset (and its breakers' jitter, if any),
//!   so the fleet does not probe in the same instant.
//! * **Epochs.** The store gives each key's news an epoch, greater than any
//!   before it for that key; a replica applies only an epoch newer than the
//!   last it applied for the key. Duplicates, reordered and stale messages
//!   change nothing (a late duplicate would otherwise extend a period by its
//!   delay), and reconciling the same record twice applies it once.
//! * **Safety rails.** `min_reporters(k, window)`: news counts only once k
//!   distinct replicas reported the key within the window, so one replica
//!   cut off from an upstream by its own network cannot eject it
//!   everywhere. The registry's `max_open` cap applies to remote trips as to
//!   local ones. A key the registry cannot track (it is full) is not
//!   opened: its overflow breaker is shared. An unreachable or slow store
//!   leaves the replica local-only, counted in [`SyncStats::errors`]; its
//!   trips are handed again when the store is back, while they last. A
//!   malformed record or message is skipped and counted
//!   ([`SyncStats::bad_records`]), never fatal.
//!
//! # Probes spread
//!
//! A replica that applies news ends the open period a little earlier than
//! the news says: by its own offset, in `[0, min(remaining × 10 %, 5 s))`
//! by default ([`ReplicaBuilder::probe_spread`]), drawn from a hash of its
//! name, the key and the epoch. So replicas that heard the same trip probe
//! at different instants even with the breakers' jitter at 0 (the default),
//! which first changes from trip to trip, and news of a failed probe (a
//! trip, shared in milliseconds) pushes the others' ends back before they
//! probe. The offset is applied when the news is applied, off the request
//! path: the local OPEN path is unchanged, and a local trip keeps its exact
//! period. It only ever shortens what the news says is left.
//!
//! ```
//! use failfast::share::{News, Outbox, Replica};
//! use failfast::{Breaker, ManualClock, Nanos, Reason, Registry};
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! let clock = ManualClock::starting_at(Nanos::from_secs(100));
//! let news = News::new("db:5432", 7, Duration::from_secs(30), 1, Reason::FailureRate, "checkout-0");
//! let mut ends = Vec::new();
//! for name in ["checkout-1", "checkout-2", "checkout-3", "checkout-4"] {
//!     // The guide's breakers: no jitter.
//!     let registry = Arc::new(
//!         Registry::<String>::builder(Breaker::builder().failure_rate(0.5).jitter(0.0))
//!             .build_with_clock(clock.clone())?,
//!     );
//!     let mut replica = Replica::builder(registry.clone(), Arc::new(Outbox::new(64)))
//!         .origin(name)
//!         .build()?;
//!     replica.receive(&news); // the same news, at the same instant
//!     ends.push(registry.with("db:5432", |b| b.snapshot().retry_after).unwrap());
//! }
//! // Four ends, apart, within the last 3 s (10 % of 30 s) of the period.
//! ends.sort();
//! ends.dedup();
//! assert_eq!(ends.len(), 4);
//! assert!(ends[0] > Duration::from_secs(27) && ends[3] <= Duration::from_secs(30));
//! # Ok::<(), failfast::ConfigError>(())
//! ```
//!
//! # In-process example
//!
//! [`MemoryStore`] runs the store's rules in process (the demo's third scene
//! uses it); see its example. The `redis` module runs them in Redis.

mod hook;
mod memory;
mod news;
mod outbox;
mod replica;
mod spread;
mod stats;
mod store;

pub use hook::OutboxHook;
pub use memory::{MemoryStore, Unreachable};
#[cfg(feature = "redis")]
pub(crate) use news::{ceil_millis, TRIP_REASONS};
pub use news::{check_origin, LocalTrip, News, MAX_ORIGIN_BYTES};
pub use outbox::{Outbox, MAX_KEY_BYTES};
pub use replica::{Replica, ReplicaBuilder, DEFAULT_SLACK, DEFAULT_WINDOW, MAX_OWN_TRIPS};
pub use spread::{DEFAULT_PROBE_SPREAD, DEFAULT_PROBE_SPREAD_CAP};
pub use stats::SyncStats;
pub use store::Store;
