//! S7: one probe, many racers. Threads arrive at the same instant after the
//! open time: exactly one becomes the probe, all others fail fast and are told
//! when to retry. A successful probe closes the breaker; a failed one reopens
//! it and the wait starts again from that moment.

use failfast::{Breaker, ManualClock, Nanos, Reason, RejectReason, Rejected, State};
use std::sync::Barrier;
use std::time::Duration;

mod common;
use common::{Log, LogTransitions};

const THREADS: usize = 8;
const OPEN: Duration = Duration::from_secs(5);
const LEASE: Duration = Duration::from_secs(1);
const ROUNDS: u32 = 200;

fn breaker() -> (Breaker<ManualClock>, Log) {
    let events = Log::default();
    let b = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(OPEN)
        .backoff(1.0, OPEN)
        .probe_lease(LEASE)
        .count_calls(true)
        .log_transitions(&events)
        .build_with_clock(ManualClock::new())
        .unwrap();
    (b, events)
}

/// All threads try to acquire at `now`, released together by a barrier.
/// Returns how many threads were admitted as probes, and the rejections.
/// The winner reports `verdict` at `now` + 10 ms, after every racer has tried.
fn race(b: &Breaker<ManualClock>, now: Nanos, probe_succeeds: bool) -> (usize, Vec<Rejected>) {
    let start = Barrier::new(THREADS);
    let tried = Barrier::new(THREADS);
    let results: Vec<Result<bool, Rejected>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                scope.spawn(|| {
                    start.wait();
                    let r = b.try_acquire_at(now);
                    tried.wait(); // nobody reports before everyone has raced
                    match r {
                        Ok(permit) => {
                            assert!(permit.is_probe());
                            let end = now + Duration::from_millis(10);
                            let t = if probe_succeeds {
                                permit.success_at(end)
                            } else {
                                permit.failure_at(end)
                            };
                            assert!(t.is_some(), "the probe's verdict decides the round");
                            Ok(true)
                        }
                        Err(rejected) => Err(rejected),
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let probes = results.iter().filter(|r| r.is_ok()).count();
    let rejections = results.into_iter().filter_map(Result::err).collect();
    (probes, rejections)
}

fn trip(b: &Breaker<ManualClock>, at: Nanos) {
    let t = b.try_acquire_at(at).unwrap().failure_at(at).unwrap();
    assert_eq!(t.to, State::Open);
}

#[test]
fn exactly_one_racer_probes_and_its_success_closes() {
    let (b, events) = breaker();
    let mut now = Nanos::from_secs(1);
    for round in 0..ROUNDS {
        trip(&b, now);
        now += OPEN;
        let (probes, rejected) = race(&b, now, true);
        assert_eq!(probes, 1, "round {round}: exactly one probe");
        assert_eq!(rejected.len(), THREADS - 1);
        for r in &rejected {
            assert_eq!(
                r.reason(),
                RejectReason::HalfOpenFull,
                "round {round}: {r:?}"
            );
            assert_eq!(r.retry_after(), Some(LEASE), "told when to retry");
        }
        assert_eq!(b.state(), State::Closed, "round {round}");
        now += Duration::from_secs(1);
    }
    let events = events.lock().unwrap();
    assert_eq!(
        events.len() as u32,
        3 * ROUNDS,
        "trip, half-open, close per round"
    );
    let half_opens = events
        .iter()
        .filter(|e| e.reason == Reason::OpenElapsed)
        .count();
    assert_eq!(half_opens as u32, ROUNDS, "one winner per Open -> HalfOpen");
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.generation, i as u32 + 1);
    }
    let calls = b.snapshot_at(now).calls.unwrap();
    assert_eq!(calls.rejected, u64::from(ROUNDS) * (THREADS as u64 - 1));
}

#[test]
fn a_failed_probe_reopens_and_the_wait_restarts_from_that_moment() {
    let (b, events) = breaker();
    let mut now = Nanos::from_secs(1);
    trip(&b, now);
    for round in 0..30u32 {
        now += OPEN;
        let (probes, rejected) = race(&b, now, false);
        assert_eq!(probes, 1, "round {round}");
        assert!(rejected
            .iter()
            .all(|r| r.reason() == RejectReason::HalfOpenFull));
        assert_eq!(b.state(), State::Open);
        // The probe failed at now + 10 ms: the new open period starts there.
        let failed_at = now + Duration::from_millis(10);
        let e = *events.lock().unwrap().last().unwrap();
        assert_eq!((e.reason, e.at), (Reason::ProbeFailed, failed_at));
        let early = b.try_acquire_at(failed_at + OPEN - Duration::from_nanos(1));
        let early = early.unwrap_err();
        assert_eq!(early.reason(), RejectReason::Open);
        assert_eq!(early.retry_after(), Some(Duration::from_nanos(1)));
        now = failed_at;
    }
    assert_eq!(events.lock().unwrap().len(), 1 + 30 * 2);
}

#[test]
fn racers_before_the_open_time_are_all_rejected_with_the_remaining_wait() {
    let (b, events) = breaker();
    trip(&b, Nanos::from_secs(1));
    let now = Nanos::from_secs(1) + OPEN - Duration::from_millis(250);
    let (probes, rejected) = race(&b, now, true);
    assert_eq!(probes, 0);
    for r in rejected {
        assert_eq!(r.reason(), RejectReason::Open);
        assert_eq!(r.retry_after(), Some(Duration::from_millis(250)));
    }
    assert_eq!(b.state(), State::Open);
    assert_eq!(events.lock().unwrap().len(), 1);
}

#[test]
fn with_three_probes_exactly_three_racers_get_in() {
    let b = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(OPEN)
        .half_open_probes(3)
        .probe_lease(LEASE)
        // Each round trips again at once: a decaying backoff would grow
        // the open period every round; this test is about the race.
        .backoff_off()
        .build_with_clock(ManualClock::new())
        .unwrap();
    let mut now = Nanos::from_secs(1);
    for round in 0..100 {
        trip(&b, now);
        now += OPEN;
        let (start, tried) = (Barrier::new(THREADS), Barrier::new(THREADS));
        let results: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..THREADS)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        let r = b.try_acquire_at(now);
                        tried.wait(); // hold the permit until everyone has raced
                        r.map(|p| (p.is_probe(), p.generation()))
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        // The permits were dropped in their threads (ignored): slots freed.
        let admitted: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(admitted.len(), 3, "round {round}: {results:?}");
        assert!(admitted.iter().all(|(probe, _)| *probe));
        assert!(admitted.windows(2).all(|w| w[0].1 == w[1].1), "one round");
        for r in results.iter().filter_map(|r| r.as_ref().err()) {
            assert_eq!(r.reason(), RejectReason::HalfOpenFull, "round {round}");
        }
        // Close it for the next round: three fast successes.
        for _ in 0..3 {
            let _ = b.try_acquire_at(now).unwrap().success_at(now);
        }
        assert_eq!(b.state(), State::Closed);
        now += Duration::from_secs(1);
    }
}
