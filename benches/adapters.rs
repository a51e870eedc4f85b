//! The one adapter every breaker is measured through, and the breakers.
//!
//! Every implementation runs the same wrapped function (`work`, which returns
//! `Ok(42)` at once; `fail` for trips) through its own wrapper API, so the
//! differences measured are the breakers' own costs. Shared by the criterion
//! harness (`main.rs`) and the callgrind driver (`callgrind.rs`).
#![allow(dead_code)] // each bench target uses a different subset

use std::hint::black_box;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use failfast::{Breaker, CallError, Clock, QuantaClock};
use tower::Service;

/// What the wrapped call returns.
pub type Res = Result<u64, u64>;
/// The wrapped call, passed by pointer so every peer gets exactly the same one.
pub type Work = fn() -> Res;

/// The call being protected: returns at once.
#[inline(always)]
pub fn work() -> Res {
    Ok(black_box(42))
}

/// A failing call, used only to trip breakers.
#[inline(always)]
pub fn fail() -> Res {
    Err(black_box(7))
}

/// How long a tripped breaker stays open in the benches: far longer than a run.
pub const LONG: Duration = Duration::from_secs(3600);

/// One call through a breaker: `Some(result)` if it ran, `None` if rejected.
pub trait Guard {
    fn run(&mut self, f: Work) -> Option<Res>;
}

/// No breaker at all: the floor.
pub struct Bare;

impl Guard for Bare {
    #[inline]
    fn run(&mut self, f: Work) -> Option<Res> {
        Some(f())
    }
}

/// failfast through its `call` wrapper.
pub struct Failfast<C: Clock = QuantaClock>(pub Breaker<C>);

impl<C: Clock> Guard for Failfast<C> {
    #[inline]
    fn run(&mut self, f: Work) -> Option<Res> {
        match self.0.call(f) {
            Ok(v) => Some(Ok(v)),
            Err(CallError::Inner(e)) => Some(Err(e)),
            Err(CallError::Rejected(_)) => None,
        }
    }
}

/// failfast through the permit API (`try_acquire` + a verdict).
pub struct FailfastPermit<C: Clock = QuantaClock>(pub Breaker<C>);

impl<C: Clock> Guard for FailfastPermit<C> {
    #[inline]
    fn run(&mut self, f: Work) -> Option<Res> {
        let permit = self.0.try_acquire().ok()?;
        let r = f();
        let _ = match r {
            Ok(_) => permit.success(),
            Err(_) => permit.failure(),
        };
        Some(r)
    }
}

/// failsafe through its `call` (any policy).
pub struct Failsafe<T>(pub T);

impl<T: failsafe::CircuitBreaker> Guard for Failsafe<T> {
    #[inline]
    fn run(&mut self, f: Work) -> Option<Res> {
        match self.0.call(f) {
            Ok(v) => Some(Ok(v)),
            Err(failsafe::Error::Inner(e)) => Some(Err(e)),
            Err(failsafe::Error::Rejected) => None,
        }
    }
}

/// recloser through its `call`.
pub struct Recloser(pub recloser::Recloser);

impl Guard for Recloser {
    #[inline]
    fn run(&mut self, f: Work) -> Option<Res> {
        match self.0.call(f) {
            Ok(v) => Some(Ok(v)),
            Err(recloser::Error::Inner(e)) => Some(Err(e)),
            Err(recloser::Error::Rejected) => None,
        }
    }
}

/// The inner tower service: runs the function it is sent.
#[derive(Clone, Copy)]
pub struct RunFn;

impl Service<Work> for RunFn {
    type Response = u64;
    type Error = u64;
    type Future = std::future::Ready<Res>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), u64>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, f: Work) -> Self::Future {
        std::future::ready(f())
    }
}

type TowerCb = tower_resilience_circuitbreaker::CircuitBreaker<
    RunFn,
    tower_resilience_circuitbreaker::DefaultClassifier,
>;

/// tower-resilience-circuitbreaker: `poll_ready`, `call`, and one poll of the
/// boxed future, with a no-op waker and no runtime (valid in its default
/// reject mode: nothing ever waits).
pub struct Tower(pub TowerCb);

impl Guard for Tower {
    #[inline]
    fn run(&mut self, f: Work) -> Option<Res> {
        use tower_resilience_circuitbreaker::CircuitBreakerError as E;
        let mut cx = Context::from_waker(Waker::noop());
        match self.0.poll_ready(&mut cx) {
            Poll::Ready(Ok(())) => {}
            _ => panic!("tower breaker not ready"),
        }
        let mut fut = self.0.call(f);
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(Ok(v)) => Some(Ok(v)),
            Poll::Ready(Err(E::Inner(e))) => Some(Err(e)),
            Poll::Ready(Err(E::OpenCircuit)) => None,
            Poll::Pending => panic!("tower breaker future pending without a runtime"),
        }
    }
}

// ---- the breakers, as configured for every bench ----

/// failfast, 5 consecutive failures.
pub fn ff_consecutive() -> Breaker {
    Breaker::builder()
        .consecutive_failures(5)
        .open_duration(LONG)
        .build()
        .unwrap()
}

/// failfast, consecutive failures on `clock`.
pub fn ff_consecutive_on<C: Clock>(clock: C) -> Breaker<C> {
    Breaker::builder()
        .consecutive_failures(5)
        .open_duration(LONG)
        .build_with_clock(clock)
        .unwrap()
}

/// failfast, a 50% failure rate over the last 100 calls.
pub fn ff_count() -> Breaker {
    Breaker::builder()
        .failure_rate(0.5)
        .count_window(100)
        .open_duration(LONG)
        .build()
        .unwrap()
}

/// failfast, a 50% failure rate over the last 100 ms in 10 buckets (10 ms
/// buckets: short enough that a bucket never reaches its 2^20-call cap in a
/// bench, where calls come every ~10 ns).
pub fn ff_time() -> Breaker {
    Breaker::builder()
        .failure_rate(0.5)
        .time_window(Duration::from_millis(100), 10)
        .open_duration(LONG)
        .build()
        .unwrap()
}

/// failfast, consecutive failures plus a 1 s slow-call threshold (timed calls).
pub fn ff_consecutive_slow() -> Breaker {
    Breaker::builder()
        .consecutive_failures(5)
        .slow_call_threshold(Duration::from_secs(1))
        .open_duration(LONG)
        .build()
        .unwrap()
}

/// failfast, failure and slow-call rates over the last 100 calls.
pub fn ff_count_slow() -> Breaker {
    Breaker::builder()
        .failure_rate(0.5)
        .slow_call_rate(0.5)
        .slow_call_threshold(Duration::from_secs(1))
        .count_window(100)
        .open_duration(LONG)
        .build()
        .unwrap()
}

/// failfast, failure and slow-call rates over a 100 ms time window.
pub fn ff_time_slow() -> Breaker {
    Breaker::builder()
        .failure_rate(0.5)
        .slow_call_rate(0.5)
        .slow_call_threshold(Duration::from_secs(1))
        .time_window(Duration::from_millis(100), 10)
        .open_duration(LONG)
        .build()
        .unwrap()
}

/// failsafe, 5 consecutive failures, constant 1 h backoff.
pub fn failsafe_consecutive() -> Failsafe<impl failsafe::CircuitBreaker> {
    let policy =
        failsafe::failure_policy::consecutive_failures(5, failsafe::backoff::constant(LONG));
    Failsafe(failsafe::Config::new().failure_policy(policy).build())
}

/// failsafe, its default policy (success rate over a time window, jittered backoff).
pub fn failsafe_default() -> Failsafe<impl failsafe::CircuitBreaker> {
    Failsafe(failsafe::Config::new().build())
}

/// recloser, 50% error rate over 10 calls, open for 1 h.
pub fn recloser() -> Recloser {
    Recloser(
        recloser::Recloser::custom()
            .error_rate(0.5)
            .closed_len(10)
            .open_wait(LONG)
            .build(),
    )
}

/// tower-resilience-circuitbreaker, its default (rate) policy, tripping after
/// 10 calls at 50%, open for 1 h.
pub fn tower_default() -> Tower {
    let layer = tower_resilience_circuitbreaker::circuit_breaker_builder()
        .failure_rate_threshold(0.5)
        .sliding_window_size(10)
        .minimum_number_of_calls(10)
        .wait_duration_in_open(LONG)
        .build()
        .unwrap();
    Tower(layer.layer_fn(RunFn))
}

/// tower-resilience-circuitbreaker, 5 consecutive failures, open for 1 h.
pub fn tower_consecutive() -> Tower {
    let layer = tower_resilience_circuitbreaker::circuit_breaker_builder()
        .consecutive_failures(5)
        .wait_duration_in_open(LONG)
        .build()
        .unwrap();
    Tower(layer.layer_fn(RunFn))
}

/// Fails calls until the breaker rejects one; panics if it never opens.
pub fn trip(g: &mut impl Guard) {
    for _ in 0..1_000 {
        if g.run(fail).is_none() {
            assert!(g.run(work).is_none(), "tripped breaker must reject");
            return;
        }
    }
    panic!("breaker did not open after 1000 failures");
}

/// Asserts the breaker admits and runs a call.
pub fn check_closed(g: &mut impl Guard) {
    assert_eq!(
        g.run(work),
        Some(Ok(42)),
        "closed breaker must run the call"
    );
}

/// Every adapter by name, in a fixed order.
pub const PEERS: [&str; 8] = [
    "bare",
    "failfast",
    "failfast_permit",
    "failsafe_consecutive",
    "failsafe_default",
    "recloser",
    "tower_default",
    "tower_consecutive",
];

/// Something to do with one adapter, monomorphized per adapter (no dynamic
/// dispatch on the measured path).
pub trait WithGuard {
    type Out;
    fn with<G: Guard>(self, name: &'static str, g: G) -> Self::Out;
}

/// Builds the named adapter, trips it first if `open` (the bare call has no
/// open state and is passed as is), checks it, and hands it to `w`.
pub fn with_peer<W: WithGuard>(name: &str, open: bool, w: W) -> W::Out {
    fn prep<G: Guard>(mut g: G, open: bool) -> G {
        if open {
            trip(&mut g);
        } else {
            check_closed(&mut g);
        }
        g
    }
    match name {
        "bare" => w.with("bare", prep(Bare, false)),
        "failfast" => w.with("failfast", prep(Failfast(ff_consecutive()), open)),
        "failfast_permit" => w.with(
            "failfast_permit",
            prep(FailfastPermit(ff_consecutive()), open),
        ),
        "failsafe_consecutive" => {
            w.with("failsafe_consecutive", prep(failsafe_consecutive(), open))
        }
        "failsafe_default" => w.with("failsafe_default", prep(failsafe_default(), open)),
        "recloser" => w.with("recloser", prep(recloser(), open)),
        "tower_default" => w.with("tower_default", prep(tower_default(), open)),
        "tower_consecutive" => w.with("tower_consecutive", prep(tower_consecutive(), open)),
        other => panic!("unknown breaker {other}; known: {PEERS:?}"),
    }
}
