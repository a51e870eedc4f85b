//! Helpers shared by the loom models in `tests/`; everything here compiles only
//! under `RUSTFLAGS="--cfg failfast_loom"` (see `README.md` and `.ci/run`).
//!
//! The models build every breaker *inside* `loom::model` (its atomics are loom
//! atomics, valid for one execution only), share it with `loom::sync::Arc`,
//! and pass time explicitly with the `_at(now)` methods: loom has no clock.

#![cfg(failfast_loom)]

use std::sync::Mutex;
use std::time::Duration;

use failfast::{Breaker, Builder, ManualClock, Nanos, Reason, State, Transition};
use loom::sync::Arc;

/// The breaker every model uses: manual clock, never read (time is passed in).
pub type Cb = Breaker<ManualClock>;

/// The base open duration of every model.
pub const OPEN: Duration = Duration::from_secs(10);

/// `s` seconds after the clock's origin.
pub const fn secs(s: u64) -> Nanos {
    Nanos::from_secs(s)
}

/// One observed transition, reduced to what the models compare.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// State before.
    pub from: State,
    /// State after.
    pub to: State,
    /// Why.
    pub reason: Reason,
    /// Generation entered.
    pub generation: u32,
}

impl Seen {
    /// A transition as the models spell it.
    pub const fn new(from: State, to: State, reason: Reason, generation: u32) -> Seen {
        Seen {
            from,
            to,
            reason,
            generation,
        }
    }
}

impl From<&Transition> for Seen {
    fn from(t: &Transition) -> Seen {
        Seen::new(t.from, t.to, t.reason, t.generation)
    }
}

/// Every observer call, in order. A std `Mutex` on purpose: it adds no
/// interleavings for loom to explore, and loom runs one thread at a time.
pub type Log = std::sync::Arc<Mutex<Vec<Seen>>>;

/// Builds `builder` with a logging observer, a constant open duration of
/// [`OPEN`] (multiplier 1, so every trip opens for the same time) unless the
/// model set its own backoff afterwards, and no jitter.
pub fn build(builder: Builder) -> (Arc<Cb>, Log) {
    let log: Log = Default::default();
    let sink = log.clone();
    let breaker = builder
        .observer(move |t: &Transition| sink.lock().unwrap().push(t.into()))
        .build_with_clock(ManualClock::new())
        .expect("valid model config");
    (Arc::new(breaker), log)
}

/// A builder with the models' common timing: open for [`OPEN`], constant
/// backoff, a probe lease of [`OPEN`] too.
pub fn base() -> Builder {
    Breaker::builder()
        .open_duration(OPEN)
        .backoff(1.0, OPEN)
        .probe_lease(OPEN)
}

/// The observer's log so far.
pub fn seen(log: &Log) -> Vec<Seen> {
    log.lock().unwrap().clone()
}

/// Trips a breaker with `consecutive_failures(1)` at `at` (sequential set-up).
pub fn trip(b: &Cb, at: Nanos) {
    let t = b
        .try_acquire_at(at)
        .expect("closed: admitted")
        .failure_at(at)
        .expect("one failure trips");
    assert_eq!((t.from, t.to), (State::Closed, State::Open));
}

/// Sequential set-up: trips at `at`, then takes the first probe at `at + OPEN`
/// and reports `success` (or failure) for it. Returns the state reached.
pub fn trip_and_probe(b: &Cb, at: Nanos, success: bool) -> State {
    trip(b, at);
    let probe = b.try_acquire_at(at + OPEN).expect("open time over: probe");
    assert!(probe.is_probe());
    let t = if success {
        probe.success_at(at + OPEN)
    } else {
        probe.failure_at(at + OPEN)
    };
    t.expect("a single probe decides the round").to
}

/// Tries to take a permit at `now` and, if admitted, keeps it in flight
/// forever (`mem::forget`: no verdict, no drop, the slot stays taken).
/// Returns `Ok((is_probe, generation))` or the rejection.
pub fn take_and_hold(b: &Cb, now: Nanos) -> Result<(bool, u32), failfast::Rejected> {
    b.try_acquire_at(now).map(|p| {
        let got = (p.is_probe(), p.generation());
        core::mem::forget(p);
        got
    })
}

/// Runs `model` under `loom::model` twice: once with the main thread first
/// (`spawned_first == false`) and once with the spawned thread first (the
/// model calls [`go_second`] right after spawning).
///
/// Why: loom 0.7's DPOR keeps one last access per atomic, so a thread's
/// *first* load is never moved after another thread's load-then-CAS
/// (tokio-rs/loom#392, #166); it only explores loads moved *earlier* than
/// writes that ran before them. Starting each side first once covers both.
pub fn both_orders(model: fn(bool)) {
    for spawned_first in [false, true] {
        loom::model(move || model(spawned_first));
    }
}

/// In a [`both_orders`] model: let the spawned thread run first.
pub fn go_second(spawned_first: bool) {
    if spawned_first {
        loom::thread::yield_now();
    }
}
