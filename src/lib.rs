//! # failfast
//!
//! A lock-free, timer-free circuit-breaker core for services and proxies that
//! keep one breaker per upstream host — tens of thousands to millions of them —
//! with no timer and no background task. A request to a known host takes no
//! lock and allocates nothing; the first request to a new host takes its
//! shard's lock and allocates its entry, and a tower layer's rejection
//! allocates its error ([what each path costs](crate::docs#what-each-request-path-costs)).
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
//! # Start here
//!
//! Which API for which program; each link leads to an example that CI
//! compiles and runs (the feature-gated pages are on docs.rs, built with
//! every feature).
//!
//! | your program | use | example |
//! |---|---|---|
//! | calls a function that can fail | [`Breaker::call`] / [`call_async`](Breaker::call_async) | [`Breaker::call`] |
//! | records each call's verdict itself | [`Breaker::try_acquire`], then [`Permit::record`] | [`Permit`], the example above |
//! | a tower service with one upstream | `tower::FailFastLayer` (feature `tower`) | [`FailFastLayer`](tower/struct.FailFastLayer.html) |
//! | a client or proxy for many hosts | `tower::KeyedLayer` over a `Registry<HostKey>` | [`KeyedLayer`](tower/struct.KeyedLayer.html), [`examples/proxy`](https://docs.rs/crate/failfast/latest/source/examples/proxy/main.rs) |
//! | a reqwest client | `reqwest::BreakerMiddleware` (feature `reqwest`) | [`failfast::reqwest`](reqwest/index.html) |
//! | an axum handler calling a dependency | [`Registry`] + [`call_async_or_else_with`](Breaker::call_async_or_else_with) + `http::HttpClassifier` | [`examples/axum.rs`](https://docs.rs/crate/failfast/latest/source/examples/axum.rs), [`failfast::http`](http/index.html) |
//! | a tonic client | `FailFastLayer` + `http::GrpcClassifier`, `classify_at_end` | [`examples/tonic.rs`](https://docs.rs/crate/failfast/latest/source/examples/tonic.rs) |
//! | breakers from a config file | `config::RegistryConfig` (feature `serde`) | [`failfast::config`](config/index.html) |
//! | retries that cannot multiply an outage | [`RetryBudget`] on the breakers, then `tower::RetryPolicy` or `reqwest::RetryMiddleware` | [`RetryBudget`], [`examples/retry_tower.rs`](https://docs.rs/crate/failfast/latest/source/examples/retry_tower.rs), [`examples/retry_reqwest.rs`](https://docs.rs/crate/failfast/latest/source/examples/retry_reqwest.rs) |
//!
//! # How every call ends
//!
//! A breaker that only hears clean verdicts fails *open* in a real proxy:
//! clients give up, outer timeouts drop futures, handlers panic. So every
//! ending counts, by how the call ended and how long it ran:
//!
//! | how the call ended | in CLOSED | a half-open probe |
//! |---|---|---|
//! | a verdict: [`success`](Permit::success), [`failure`](Permit::failure), [`record`](Permit::record) | counted as reported; slow if it took the slow-call threshold; ends a run of unanswered calls | a fast success counts toward closing; a failure or a slow success reopens |
//! | [`ignore`](Permit::ignore) (a business error: 4xx, a declined card) | not counted; ends a run of consecutive failures (and of unanswered calls) | frees its slot |
//! | [`Outcome::Neutral`]: not the dependency's doing — the caller out of file descriptors or buffers, the client's request body broken, stalled or too large (what the shipped classifiers record for such errors: [`Fault::of`]) | not counted; ends no run | frees its slot |
//! | dropped early: sooner than the slow-call threshold, [`abandoned_after`](Builder::abandoned_after) and the unanswered rule's age | neutral: not counted, runs stay | frees its slot at once |
//! | dropped early, before any answer, after the unanswered rule's age ([`Builder::unanswered`]; on by default: 20 calls, 250 ms or half the slow-call threshold) | one more unanswered call; `calls` of them in a row, with no answer between, trip the breaker ([`Reason::Unresponsive`]) | fails the round ([`Reason::ProbeAbandoned`]) |
//! | dropped late: after the slow-call threshold or `abandoned_after` (the caller gave up on a hung call) | a slow call if the policy has a slow-call rate, else a failure | fails the round ([`Reason::ProbeAbandoned`]); the next open period is one backoff step longer |
//! | a response stream (the tower layers' `classify_at_end`) dropped after its head while bytes kept coming | neutral, however long it ran | frees its slot |
//! | a response stream dropped after no bytes came for `abandoned_after` | as dropped late | fails the round ([`Reason::ProbeAbandoned`]) |
//! | a panic while the permit is held (in [`Breaker::call`], [`Breaker::call_async`], the tower layers) | a failure; the panic goes on unchanged | fails the round ([`Reason::ProbeFailed`]) |
//! | the tower layer's own `timeout` fires | a failure *and* a slow call, at the deadline | fails the round |
//! | a timeout outside the layer (`ServiceBuilder::timeout` before it, `tokio::time::timeout` around `call_async`) | as a drop: late → counted, early → neutral (or unanswered) | as a drop |
//!
//! `abandoned_after` defaults to the slow-call threshold, else the probe
//! lease: set it below the timeouts your callers apply from outside. A drop
//! can be judged only if the admission read the clock, so a permit is timed
//! whenever the breaker can judge its drop: with a slow-call threshold, an
//! explicit `abandoned_after` or an explicit unanswered rule, on every async path
//! (`call_async`, the tower layers), for half-open probes and `_at(now)`
//! admissions. Only a plain [`Breaker::try_acquire`] on a breaker that sets
//! none of these skips that read (the cheapest path): its drop is neutral. A stream is slow or
//! not by the time to its response head, never by the length of its body.
//! An observer or hook that panics runs after the transition is complete
//! and outside every CAS loop: the panic reaches the caller, the breaker
//! keeps the state it reached, and a probe slot taken by the admission that
//! ran the observer is given back. A [`Clock`] of your own that panics
//! reaches the caller the same way, and never aborts the process from a
//! drop (a permit's, a registry handle's, a layer's): a call whose drop
//! cannot read the clock either is neutral and frees its probe slot at once;
//! one whose drop can is judged as a panic (a failure). A success reported
//! through [`Permit::success`] or [`Permit::record`] whose clock read panics
//! is lost instead — the permit was settled first, so an observer's panic can
//! never count a verdict twice — and its probe slot comes back with the probe
//! lease. `tests/panicking_clock.rs`.
//!
//! **Order of tower layers**: give the call its deadline with the layer's
//! own `timeout` (inside the breaker, so an expired call is a failure and a
//! slow call); keep retries and a total request deadline *outside* it (a
//! rejection then stops the retry loop at once, and an outer deadline that
//! fires first is judged by `abandoned_after`).
//!
//! # Seeing what the breaker did
//!
//! Per call, the tower layers record the breaker's name, the state the
//! call met and how it ended on the request's span (`trace_calls`, feature
//! `tracing`: fields `circuitbreaker.name`, `circuitbreaker.state` from the
//! OpenTelemetry proposal, and our `circuitbreaker.outcome`), a rejection as
//! an event (INFO at most once per open period), and per-call series
//! (`call_metrics`, feature `metrics`). A rejected call can be answered by
//! a fallback that says so: [`Breaker::call_or_else`] returns an
//! [`Answer`], and the tower `FallbackLayer` marks a stale HTTP answer. The
//! [guide](guide#seeing-what-the-breaker-did) has a copyable example per
//! integration: spans, metrics, OpenTelemetry.
//!
//! The [`guide`] walks every integration with a compiled example, every
//! default and why, clocks, recovery and outliers.
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
//! | `http` | `http`: HTTP and gRPC classifiers (end of stream included), request keys, HTTP answers for rejections and a status view, with no tower: for an axum handler or a hand-written client | `http` |
//! | `tower` | `tower`: layers (one breaker, keyed per host, balancer-aware), the body that carries a permit to its end, a per-call timeout, a retry policy through each host's retry budget (implies `http` and `hyper`) | `tower` (`retry`), `http`, `http-body`, `bytes`, `pin-project-lite`, `tokio` (timer only) |
//! | `hyper` | [`Fault::of`] reads hyper's own error kinds: a call whose request body failed (a client's broken, stalled or oversized upload) is the client's, with nothing wrapped (on with `tower` and `reqwest`) | `hyper` (none of its features) |
//! | `tower-http` | an adapter from any `tower_http::classify::ClassifyResponse` (implies `tower`) | `tower-http` 0.7, no default features |
//! | `tracing` | `export::tracing`: an event per transition; with `tower`, what the breaker did to each call on its span (`trace_calls`) | `tracing` |
//! | `metrics` | `export::metrics`: gauges and counters through the `metrics` facade, exported at scrape time; with `tower`, per-call rejections, fallbacks and an opt-in duration histogram (`call_metrics`) | `metrics` |
//! | `reqwest` | `reqwest::BreakerMiddleware`: a `reqwest_middleware::Middleware` with one breaker per upstream host from a `Registry<HostKey>`; `reqwest::RetryMiddleware`, retries through each host's retry budget (implies `http` and `hyper`) | `reqwest` 0.13 (no default features, no TLS), `reqwest-middleware` 0.5, `async-trait`, `tokio` (timer only) |
//! | `serde` | `config`: breaker and registry configuration from files (TOML, YAML, JSON…) with per-host overrides, host keys normalised | `serde` (derive) |
//! | `redis` | `redis`: trips shared across replicas through Redis 7+ (single server or cluster), `RedisSync`, a tokio task you start | `redis` (redis-rs), `futures-util`, `tokio` (`sync`, `time`) |
//! | `coarse-clock` | `CoarseClock`: the kernel's coarse monotonic clock (1–10 ms steps), for the cheapest OPEN rejection that reads the time | `rustix` (Linux and Android; `time` only) |
//!
//! # Trips shared across replicas
//!
//! N replicas of a service can share *trips* with nothing on the request
//! path: a verdict that trips a breaker returns its [`Transition`], which
//! goes into a bounded lock-free [`share::Outbox`]; a [`share::Replica`],
//! driven by a task you start (`redis::RedisSync` with the `redis` feature),
//! publishes it and merges the others' news with
//! [`Breaker::apply_remote_at`] — a monotone merge that opens or extends,
//! never closes. Recovery stays local. See [`share`] and the [`docs`]
//! module.
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

pub mod authority;
mod breaker;
mod builder;
mod bulkhead;
mod call;
mod clock;
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub mod config;
mod counters;
pub mod docs;
mod error;
#[cfg(any(feature = "tracing", feature = "metrics"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "tracing", feature = "metrics"))))]
pub mod export;
mod fallback;
// A guide for users: prose and doctests, no code.
pub mod guide;
// Its docs link to `tower::DownstreamBody`, which exists with feature
// `tower` (as on docs.rs); without it, a plain `cargo doc` need not warn.
#[cfg_attr(not(feature = "tower"), allow(rustdoc::broken_intra_doc_links))]
mod fault;
// Its docs link to the classifiers that read hints (feature `http`, as on
// docs.rs); without it, a plain `cargo doc` need not warn about them.
#[cfg_attr(not(feature = "http"), allow(rustdoc::broken_intra_doc_links))]
pub mod hint;
pub mod hooks;
// Its docs link to the tower layers, which exist with feature `tower` (as on
// docs.rs); with `http` alone, a plain `cargo doc` need not warn about them.
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
#[cfg_attr(not(feature = "tower"), allow(rustdoc::broken_intra_doc_links))]
pub mod http;
mod machine;
mod observe;
mod outcome;
pub mod outlier;
mod permit;
mod policy;
mod ramp;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod redis;
pub mod registry;
mod remote;
#[cfg(feature = "reqwest")]
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest")))]
pub mod reqwest;
mod retry;
// The module's docs link to `Outbox::hook`, which exists with feature `tower`
// (as on docs.rs); without it, a plain `cargo doc` need not warn about it.
#[cfg_attr(not(feature = "tower"), allow(rustdoc::broken_intra_doc_links))]
pub mod share;
mod state;
mod storage;
mod sync;
mod ticket;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod tower;
mod window;

pub use breaker::Breaker;
pub use builder::{Builder, MAX_DURATION};
pub use bulkhead::{Bulkhead, BulkheadPermit};
pub use call::CallError;
#[cfg(feature = "coarse-clock")]
pub use clock::CoarseClock;
pub use clock::{Clock, ManualClock, Nanos, QuantaClock, StdClock};
pub use error::{ConfigError, RejectReason, Rejected};
pub use fallback::Answer;
pub use fault::{DownstreamError, DownstreamKind, Fault};
pub use hint::RetryHint;
pub use hooks::{OnTransition, REMOVED_NAME, SHARED_NAME};
pub use observe::{BreakerSnapshot, CallCounts, Observer, Reason, Transition};
pub use outcome::Outcome;
pub use outlier::{OutlierPoolSnapshot, OutlierRule, Outliers};
pub use permit::{OwnedPermit, Permit};
pub use policy::Config;
pub use registry::MaxOpen;
pub use registry::{Handle, Registry, RegistryBuilder, Snapshots};
pub use remote::RemoteTrip;
pub use retry::RetryBudget;
pub use state::State;
pub use window::{WindowCounts, WindowKind};
pub use window::{MAX_COUNT_WINDOW, MAX_TIME_BUCKETS};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
