//! The unanswered run (`Builder::unanswered`): calls dropped before any
//! answer extend a run in the state word, and any answer ends it. A drop
//! that would complete the run races a success that would end it: exactly
//! one order wins, with exactly the transitions of that order; the run is
//! never lost, never trips twice, and a stale answer never touches the
//! breaker it tripped.
#![cfg(failfast_loom)]

use std::sync::Mutex;
use std::time::Duration;

use failfast::{ManualClock, OwnedPermit, Reason, State, Transition};
use failfast_loom_tests::{base, both_orders, go_second, secs, seen, Cb, Log, Seen};
use loom::sync::Arc;
use loom::thread;

/// Two unanswered calls in a row trip it; a drop after 1 s is unanswered.
/// Returns the clock too: a drop reads it (set before each race: loom
/// explores the atomics, time stands still while the threads run).
fn build() -> (Arc<Cb>, ManualClock, Log) {
    let log: Log = std::sync::Arc::new(Mutex::new(Vec::new()));
    let sink = log.clone();
    let clock = ManualClock::new();
    let b = base()
        .consecutive_failures(100)
        .abandoned_after(Duration::from_secs(5))
        .unanswered(2, Duration::from_secs(1))
        .observer(move |t: &Transition| sink.lock().unwrap().push(t.into()))
        .build_with_clock(clock.clone())
        .unwrap();
    (Arc::new(b), clock, log)
}

/// One unanswered drop already (sequential set-up at 0 s → 2 s); then, at
/// 4 s, a second unanswered drop (admitted at 2 s) races a success
/// (admitted at 2 s). Time is the shared `ManualClock`, set before the race:
/// a drop reads the clock, a verdict is given its time.
fn unanswered_drop_races_a_success(spawned_first: bool) {
    let (b, clock, log) = build();
    let first = b.try_acquire_at(secs(0)).unwrap();
    clock.set(secs(2));
    drop(first); // unanswered: held 2 s
    assert_eq!(b.snapshot_at(secs(2)).unanswered_calls, 1);
    // Owned by the thread that drops it (an `Arc` owner, as a layer's permit).
    let hung = OwnedPermit::acquire_at(b.clone(), secs(2)).unwrap();
    let answered = b.try_acquire_at(secs(2)).unwrap();
    clock.set(secs(4));
    let dropper = thread::spawn(move || {
        go_second(spawned_first);
        drop(hung); // unanswered: held 2 s
    });
    let answer = answered.success_at(secs(4));
    dropper.join().unwrap();
    let snap = b.snapshot_at(secs(4));
    match seen(&log).as_slice() {
        // The drop came first: the run reached 2 and tripped; the success
        // was of the old generation and changed nothing.
        [t] => {
            assert_eq!(
                *t,
                Seen::new(State::Closed, State::Open, Reason::Unresponsive, 1)
            );
            assert!(answer.is_none(), "a stale success reports nothing");
            assert_eq!(snap.state, State::Open);
        }
        // The success came first: it ended the run; the drop began a new one.
        [] => {
            assert_eq!(snap.state, State::Closed);
            assert_eq!(snap.unanswered_calls, 1, "the drop after the answer");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn protocol_unanswered_drop_races_a_success() {
    both_orders(unanswered_drop_races_a_success);
}

/// Two unanswered drops race from a run of 0 with a rule of 2: both count,
/// and exactly one of them trips it (once).
fn two_unanswered_drops_trip_once(spawned_first: bool) {
    let (b, clock, log) = build();
    let one = b.try_acquire_at(secs(0)).unwrap();
    let two = OwnedPermit::acquire_at(b.clone(), secs(0)).unwrap();
    clock.set(secs(2));
    let dropper = thread::spawn(move || {
        go_second(spawned_first);
        drop(two);
    });
    drop(one);
    dropper.join().unwrap();
    assert_eq!(
        seen(&log),
        [Seen::new(
            State::Closed,
            State::Open,
            Reason::Unresponsive,
            1
        )]
    );
    assert_eq!(b.state(), State::Open);
}

#[test]
fn protocol_two_unanswered_drops_trip_once() {
    both_orders(two_unanswered_drops_trip_once);
}
