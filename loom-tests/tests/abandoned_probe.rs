//! Invariant 5, the abandoned probe: a probe whose caller gave up on it
//! (dropped without a verdict after `abandoned_after`) fails the round, while
//! a new request races it. Exactly one of them decides the round.
#![cfg(failfast_loom)]

use std::sync::Mutex;
use std::time::Duration;

use failfast::{Breaker, ManualClock, Nanos, Reason, RejectReason, State, Transition};
use failfast_loom_tests::{both_orders, go_second, secs, Seen, OPEN};
use loom::sync::Arc;
use loom::thread;

type Log = std::sync::Arc<Mutex<Vec<Seen>>>;

/// A breaker that trips on one failure, opens for 10 s doubling per trip,
/// leases a probe round for 10 s and judges a probe held 1 s abandoned;
/// tripped at 0 s.
fn tripped() -> (Arc<Breaker<ManualClock>>, ManualClock, Log) {
    let log: Log = Default::default();
    let sink = log.clone();
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(OPEN)
        .backoff(2.0, Duration::from_secs(60))
        .probe_lease(OPEN)
        .abandoned_after(Duration::from_secs(1))
        .observer(move |t: &Transition| sink.lock().unwrap().push(t.into()))
        .build_with_clock(clock.clone())
        .unwrap();
    let _ = b.try_acquire_at(secs(0)).unwrap().failure_at(secs(0));
    (Arc::new(b), clock, log)
}

/// Asks for a permit at `now` on another thread, keeping an admitted one
/// in flight (no verdict, no drop).
fn ask(
    b: &Arc<Breaker<ManualClock>>,
    now: Nanos,
    spawned_first: bool,
) -> thread::JoinHandle<Result<(bool, u32), failfast::Rejected>> {
    let b = b.clone();
    thread::spawn(move || {
        go_second(spawned_first);
        b.try_acquire_at(now).map(|p| {
            let got = (p.is_probe(), p.generation());
            core::mem::forget(p);
            got
        })
    })
}

fn after_the_round_started(log: &Log) -> Vec<Seen> {
    log.lock().unwrap()[2..].to_vec()
}

/// The probe (admitted at 10 s) is dropped at 15 s, inside its round's
/// lease, while a request arrives at 15 s. The abandoned probe always fails
/// the round; the request never gets a slot of it (it finds the slot taken,
/// or the breaker open again for the next step, 20 s).
fn abandoned_probe_fails_its_round_against_a_racing_request(spawned_first: bool) {
    let (b, clock, log) = tripped();
    let probe = b.try_acquire_at(secs(10)).unwrap();
    assert!(probe.is_probe());
    clock.set(secs(15));
    let asker = ask(&b, secs(15), spawned_first);
    drop(probe); // the caller gave up on it, 5 s in
    let asked = asker
        .join()
        .unwrap()
        .expect_err("no slot of a failed round");
    match asked.reason() {
        RejectReason::HalfOpenFull => {}
        RejectReason::Open => assert_eq!(asked.retry_after(), Some(Duration::from_secs(20))),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        after_the_round_started(&log),
        [Seen::new(
            State::HalfOpen,
            State::Open,
            Reason::ProbeAbandoned,
            3
        )]
    );
    assert_eq!(b.state(), State::Open);
}

#[test]
fn protocol_abandoned_probe_fails_its_round_against_a_racing_request() {
    both_orders(abandoned_probe_fails_its_round_against_a_racing_request);
}

/// The probe is dropped at 25 s, after its round's lease ran out (20 s),
/// while a request arrives at 25 s: the request may supersede the round or
/// the abandoned probe may fail it — exactly one of them decides, once.
fn abandoned_probe_races_a_superseding_request(spawned_first: bool) {
    let (b, clock, log) = tripped();
    let probe = b.try_acquire_at(secs(10)).unwrap();
    clock.set(secs(25));
    let asker = ask(&b, secs(25), spawned_first);
    drop(probe);
    match asker.join().unwrap() {
        // The request came first: it superseded the round and probes; the
        // abandoned probe's verdict was stale.
        Ok(got) => {
            assert_eq!(got, (true, 3));
            assert_eq!(
                after_the_round_started(&log),
                [Seen::new(
                    State::HalfOpen,
                    State::HalfOpen,
                    Reason::ProbeLeaseExpired,
                    3
                )]
            );
            assert_eq!(b.state(), State::HalfOpen);
        }
        // The abandoned probe came first: it reopened the breaker for the
        // next backoff step (20 s) and the request is turned away.
        Err(r) => {
            assert_eq!(r.reason(), RejectReason::Open);
            assert_eq!(r.retry_after(), Some(Duration::from_secs(20)));
            assert_eq!(
                after_the_round_started(&log),
                [Seen::new(
                    State::HalfOpen,
                    State::Open,
                    Reason::ProbeAbandoned,
                    3
                )]
            );
            assert_eq!(b.state(), State::Open);
        }
    }
}

#[test]
fn protocol_abandoned_probe_races_a_superseding_request() {
    both_orders(abandoned_probe_races_a_superseding_request);
}
