//! S10: the probe that never comes back. A dropped probe frees its slot at
//! once; a hung one is superseded after the probe lease, lazily, by the next
//! request; the old probe's late verdict changes nothing.

use failfast::{Breaker, ManualClock, Nanos, Reason, RejectReason, State};
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::Duration;

mod common;
use common::{Log, LogTransitions};

const OPEN: Duration = Duration::from_secs(10);
const LEASE: Duration = Duration::from_secs(3);

struct Fixture {
    clock: ManualClock,
    breaker: Breaker<ManualClock>,
    events: Log,
    half_open_at: Nanos,
}

/// A breaker tripped at t = 100 s and now half-open-ready at t = 110 s.
fn tripped(lease: Option<Duration>) -> Fixture {
    let clock = ManualClock::starting_at(Nanos::from_secs(100));
    let events = Log::default();
    let mut builder = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(OPEN)
        .count_calls(true)
        .log_transitions(&events);
    if let Some(lease) = lease {
        builder = builder.probe_lease(lease);
    }
    let breaker = builder.build_with_clock(clock.clone()).unwrap();
    let _ = breaker.try_acquire().unwrap().failure();
    assert_eq!(breaker.state(), State::Open);
    clock.advance(OPEN);
    Fixture {
        half_open_at: Nanos::from_secs(110),
        clock,
        breaker,
        events,
    }
}

impl Fixture {
    fn reasons(&self) -> Vec<Reason> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .map(|t| t.reason)
            .collect()
    }
}

#[test]
fn a_dropped_probe_frees_its_slot_at_once() {
    let f = tripped(Some(LEASE));
    let probe = f.breaker.try_acquire().unwrap();
    assert!(probe.is_probe());
    let gen = probe.generation();
    let full = f.breaker.try_acquire().unwrap_err();
    assert_eq!(full.reason(), RejectReason::HalfOpenFull);
    assert_eq!(full.retry_after(), Some(LEASE));

    drop(probe); // the client went away
                 // Same instant, no lease wait, no new round: the slot is simply free.
    let again = f.breaker.try_acquire().expect("slot freed at once");
    assert!(again.is_probe());
    assert_eq!(again.generation(), gen, "the same round");
    assert_eq!(
        f.reasons(),
        [Reason::ConsecutiveFailures, Reason::OpenElapsed]
    );
    assert!(again.success().is_some());
    assert_eq!(f.breaker.state(), State::Closed);
    let calls = f.breaker.snapshot().calls.unwrap();
    assert_eq!(
        (calls.dropped, calls.ignored),
        (1, 0),
        "the dropped probe counts as dropped, not as a business error"
    );
}

#[test]
fn a_dropped_probe_future_frees_its_slot() {
    let f = tripped(Some(LEASE));
    {
        // The probe's future never completes, and the caller drops it.
        let fut = f
            .breaker
            .call_async(std::future::pending::<Result<(), ()>>());
        let mut fut = pin!(fut);
        let mut cx = Context::from_waker(Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        assert_eq!(
            f.breaker.try_acquire().unwrap_err().reason(),
            RejectReason::HalfOpenFull,
            "the pending future holds the probe slot"
        );
    }
    let probe = f
        .breaker
        .try_acquire()
        .expect("dropping the future freed the slot");
    assert!(probe.is_probe());
    drop(probe);
}

#[test]
fn a_dropped_owned_probe_on_another_thread_frees_its_slot() {
    let f = tripped(Some(LEASE));
    let breaker = Arc::new(f.breaker);
    let probe = breaker.try_acquire_owned().unwrap();
    assert!(breaker.try_acquire().is_err());
    std::thread::spawn(move || drop(probe)).join().unwrap();
    assert!(breaker.try_acquire().unwrap().is_probe());
}

#[test]
fn a_hung_probe_is_superseded_after_the_lease() {
    let f = tripped(Some(LEASE));
    let hung = f.breaker.try_acquire().unwrap();
    assert_eq!(hung.started_at(), f.half_open_at);

    // Until the lease ends, others fail fast and are told how long to wait.
    f.clock.advance(LEASE - Duration::from_nanos(1));
    let rejected = f.breaker.try_acquire().unwrap_err();
    assert_eq!(rejected.reason(), RejectReason::HalfOpenFull);
    assert_eq!(rejected.retry_after(), Some(Duration::from_nanos(1)));
    assert_eq!(f.breaker.state(), State::HalfOpen);

    // At the lease's end the next request, lazily, starts a new round.
    f.clock.advance(Duration::from_nanos(1));
    let fresh = f.breaker.try_acquire().expect("a new round");
    assert!(fresh.is_probe());
    assert_eq!(fresh.generation(), hung.generation() + 1);
    let e = *f.events.lock().unwrap().last().unwrap();
    assert_eq!(
        (e.from, e.to, e.reason, e.at),
        (
            State::HalfOpen,
            State::HalfOpen,
            Reason::ProbeLeaseExpired,
            f.half_open_at + LEASE
        )
    );
    assert_eq!(f.breaker.snapshot().time_in_state, Duration::ZERO);

    // The hung probe finally fails: too late, nothing changes.
    f.clock.advance(Duration::from_secs(1));
    assert!(hung.failure().is_none());
    assert_eq!(f.breaker.state(), State::HalfOpen);
    assert_eq!(
        f.breaker.try_acquire().unwrap_err().reason(),
        RejectReason::HalfOpenFull,
        "the stale verdict freed no slot of the new round"
    );
    let closed = fresh.success().expect("the new probe decides");
    assert_eq!(closed.to, State::Closed);
    assert_eq!(
        f.reasons(),
        [
            Reason::ConsecutiveFailures,
            Reason::OpenElapsed,
            Reason::ProbeLeaseExpired,
            Reason::ProbesSucceeded
        ]
    );
}

#[test]
fn a_hung_probes_late_success_cannot_close() {
    let f = tripped(Some(LEASE));
    let hung = f.breaker.try_acquire().unwrap();
    f.clock.advance(LEASE);
    let fresh = f.breaker.try_acquire().unwrap();
    assert!(hung.success().is_none());
    assert_eq!(f.breaker.state(), State::HalfOpen);
    assert!(fresh.failure().is_some());
    assert_eq!(f.breaker.state(), State::Open);
}

#[test]
fn the_default_lease_is_the_open_duration_and_at_least_30_s() {
    // 30 s: longer than the 10 s open duration, so a probe that takes a
    // while is not cut off by a short open period.
    let default = Duration::from_secs(30);
    let f = tripped(None);
    assert_eq!(f.breaker.config().probe_lease(), default);
    let hung = f.breaker.try_acquire().unwrap();
    f.clock.advance(default - Duration::from_nanos(1));
    assert!(f.breaker.try_acquire().is_err());
    f.clock.advance(Duration::from_nanos(1));
    let fresh = f
        .breaker
        .try_acquire()
        .expect("superseded after the default lease");
    assert_ne!(fresh.generation(), hung.generation());
    drop(hung);
    drop(fresh);
    // Neither drop decided anything, and the breaker never wedged.
    assert_eq!(f.breaker.state(), State::HalfOpen);
    assert!(f.breaker.try_acquire().is_ok());
}
