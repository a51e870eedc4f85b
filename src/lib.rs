//! # failfast
//!
//! A lock-free, timer-free circuit-breaker core for services and proxies that
//! keep one breaker per upstream host — tens of thousands to millions of them —
//! with no lock, no timer, no background task and no allocation on any request
//! path.
//!
//! It protects callers from a dependency that is **down** (errors come fast)
//! and from one that is **slow** (200 OK after 8 s: no error ever arrives, the
//! connection pool just drains). It opens on the failure rate, the slow-call
//! rate or a run of consecutive failures; recovers lazily on the request path
//! with exactly one probe winner; and never wedges.
//!
//! ```
//! use failfast::{Breaker, ManualClock, Nanos, Outcome, State};
//! use std::time::Duration;
//!
//! let clock = ManualClock::new();
//! let breaker = Breaker::builder()
//!     .slow_call_rate(0.5)                              // open when half the calls
//!     .slow_call_threshold(Duration::from_millis(500))  // take 500 ms or more,
//!     .count_window(20)                                 // over the last 20 calls,
//!     .min_calls(10)                                    // once 10 were seen.
//!     .open_duration(Duration::from_secs(10))
//!     .build_with_clock(clock.clone())?;
//!
//! // The dependency answers 200 OK — after 800 ms, ten times in a row.
//! for _ in 0..10 {
//!     let permit = breaker.try_acquire().unwrap();
//!     clock.advance(Duration::from_millis(800));
//!     permit.record(Outcome::Success);
//! }
//! assert_eq!(breaker.state(), State::Open);
//! // The 11th call is rejected without running.
//! assert!(breaker.try_acquire().is_err());
//! # Ok::<(), failfast::ConfigError>(())
//! ```
//!
//! Start with [`Breaker`] and its [`Builder`]; wrap calls with
//! [`Breaker::call`] / [`Breaker::call_async`] or use the [`Permit`] API; put a
//! [`Bulkhead`] in front to cap calls in flight. The [`docs`] module holds the
//! design: the state diagram, the state word, the invariants and the memory
//! ordering argument.
//!
//! # Feature flags
//!
//! The core (breakers, registry, bulkhead, clocks) needs none; each
//! integration is opt-in, so a service that uses none of them builds no async
//! runtime, no `http` and no exporter.
//!
//! | feature | adds | pulls in |
//! |---|---|---|
//! | `tower` | `tower`: layers (one breaker, keyed per host, balancer-aware), HTTP and gRPC classifiers, end-of-stream classification of response bodies, a per-call timeout, HTTP answers for rejections and a status view | `tower`, `http`, `http-body`, `pin-project-lite`, `tokio` (timer only) |
//! | `tower-http` | an adapter from any `tower_http::classify::ClassifyResponse` (implies `tower`) | `tower-http` 0.7, no default features |
//! | `tracing` | `export::tracing`: an event per transition | `tracing` |
//! | `metrics` | `export::metrics`: gauges and counters through the `metrics` facade, exported at scrape time | `metrics` |
//!
//! The minimum supported Rust version is 1.87 (set by `quanta`, the default
//! clock's dependency), for every feature.

#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    rust_2018_idioms
)]

mod breaker;
mod builder;
mod bulkhead;
mod call;
mod clock;
mod counters;
pub mod docs;
mod error;
#[cfg(any(feature = "tracing", feature = "metrics"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "tracing", feature = "metrics"))))]
pub mod export;
mod fleet;
mod observe;
mod outcome;
mod permit;
mod policy;
pub mod registry;
mod state;
mod sync;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod tower;
mod window;

pub use breaker::Breaker;
pub use builder::{Builder, MAX_COUNT_WINDOW, MAX_TIME_BUCKETS};
pub use bulkhead::{Bulkhead, BulkheadPermit};
pub use call::CallError;
pub use clock::{Clock, ManualClock, Nanos, QuantaClock, StdClock};
pub use error::{ConfigError, RejectReason, Rejected};
pub use fleet::MaxOpen;
pub use observe::{BreakerSnapshot, CallCounts, Observer, Reason, Transition};
pub use outcome::Outcome;
pub use permit::{OwnedPermit, Permit};
pub use policy::{Config, WindowCounts, WindowKind};
pub use registry::{Handle, Registry, RegistryBuilder, Snapshots};
pub use state::State;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
