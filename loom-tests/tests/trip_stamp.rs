//! Invariant 3 under a trip race with different reported times: every racer
//! stamps `tripped_at` before its CAS, and a stamp only moves forward. A
//! loser that reports an *earlier* time (a verdict that took longer to arrive)
//! must not pull the winner's stamp back, or a reader after both would be
//! admitted as a probe before the winner's open period ends.
//!
//! Both racers fail at once, one reporting 100 s and one 40 s. Whichever wins,
//! the stamp the readers see lies between the winner's time and the later of
//! the two (100 s): a caller at `winner + OPEN - 1 s` is turned away, a caller
//! at `100 s + OPEN` probes.
#![cfg(failfast_loom)]

use std::time::Duration;

use failfast::{Builder, Nanos, OwnedPermit, RejectReason, State, Transition};
use failfast_loom_tests::{base, both_orders, build, go_second, secs, OPEN};
use loom::thread;

/// The race, then the checks on the breaker the race left behind.
fn race(builder: Builder, spawned_first: bool) {
    let (b, _log) = build(builder);
    let late = secs(100);
    let early = secs(40);
    // Two calls of the closed state, admitted before the race.
    let slow_report = OwnedPermit::acquire_at(b.clone(), secs(0)).expect("closed");
    let fast_report = OwnedPermit::acquire_at(b.clone(), secs(0)).expect("closed");
    let other = thread::spawn(move || slow_report.failure_at(late));
    go_second(spawned_first);
    let mine = fast_report.failure_at(early);
    let theirs = other.join().unwrap();

    let trips: Vec<Transition> = [mine, theirs].into_iter().flatten().collect();
    assert_eq!(trips.len(), 1, "exactly one verdict trips: {trips:?}");
    let won = trips[0];
    assert_eq!((won.to, won.generation), (State::Open, 1));
    check_stamp(&b, won.at);
}

/// A reader after both racers: the stamp is at least the winner's time and
/// at most the later reported time.
fn check_stamp(b: &failfast_loom_tests::Cb, won_at: Nanos) {
    let before_end = won_at + OPEN - Duration::from_secs(1);
    match b.try_acquire_at(before_end) {
        Ok(p) => panic!(
            "admitted at {before_end:?} (probe: {}), before the winner's open period ({won_at:?} + {OPEN:?}) ended: the stamp moved back",
            p.is_probe()
        ),
        Err(r) => {
            assert_eq!(r.reason(), RejectReason::Open);
            // 1 s: the winner's own stamp. 61 s: the winner reported 40 s
            // and the loser's 100 s stamp moved it forward.
            let wait = r.retry_after().expect("an open breaker says when");
            let moved_forward = won_at == secs(40) && wait == Duration::from_secs(61);
            assert!(wait == Duration::from_secs(1) || moved_forward, "{wait:?}");
        }
    }
    let probe = b
        .try_acquire_at(secs(100) + OPEN)
        .expect("the stamp is no later than the later report");
    assert_eq!((probe.is_probe(), probe.generation()), (true, 2));
    core::mem::forget(probe);
}

/// Two failures race to trip a `consecutive_failures(1)` breaker.
#[test]
fn trip_race_stamp_only_moves_forward_consecutive() {
    both_orders(|spawned_first| race(base().consecutive_failures(1), spawned_first));
}

/// The same race through a failure-rate count window: both racers may see the
/// threshold and try the trip from generation 0.
#[test]
fn trip_race_stamp_only_moves_forward_window() {
    both_orders(|spawned_first| {
        race(
            base().failure_rate(0.5).count_window(2).min_calls(2),
            spawned_first,
        )
    });
}
