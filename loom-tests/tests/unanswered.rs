//! The unanswered run (`Builder::unanswered`): calls dropped before any
//! answer extend a run in the state word, and any answer ends it. A drop
//! that would complete the run races a success that would end it: the
//! breaker trips only if no answer ended the run first (a trip's CAS checks
//! the run it was decided on still holds), a stale answer never touches the
//! breaker it tripped, and two racing drops both count and trip it once.
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
        // A window no rate ever judges (10 calls at least, two at most
        // here): it shows which successes were recorded.
        .failure_rate(1.0)
        .count_window(10)
        .min_calls(10)
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
    // A success first: the breaker is proven, so a success that is not news
    // takes the one-load path — which must see the run as news.
    let _ = b.try_acquire_at(secs(0)).unwrap().success_at(secs(0));
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
        // was of the old generation and changed nothing, not even the window.
        [t] => {
            assert_eq!(
                *t,
                Seen::new(State::Closed, State::Open, Reason::Unresponsive, 1)
            );
            assert!(answer.is_none(), "a stale success reports nothing");
            assert_eq!(snap.state, State::Open);
            assert_eq!(snap.window.calls, 1, "only the first success: {snap:?}");
        }
        // The success ended the run: before the drop counted (the drop
        // begins a new run of 1), or after it counted but before its trip
        // (the trip, decided on a run no longer there, does not happen).
        [] => {
            assert_eq!(snap.state, State::Closed);
            assert!(snap.unanswered_calls <= 1, "{snap:?}");
            assert_eq!(snap.window.calls, 2);
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
