//! The count window's clean mark (`window/count.rs`, "The clean mark"): a
//! healthy call into a full, all-healthy ring writes nothing. The mark must
//! never stay set over an unhealthy entry, or the calls it skips would keep
//! that failure in the window for good. Each model races the mark against an
//! unhealthy entry, then checks that as many healthy calls as the ring holds
//! leave no failure in the window.
#![cfg(failfast_loom)]

use std::time::Duration;

use failfast::{Breaker, ManualClock, WindowCounts};
use failfast_loom_tests::{both_orders, go_second, secs};
use loom::sync::Arc;
use loom::thread;

/// A ring of 2 whose last lap ended over a failure, then overwrote it: full,
/// all healthy, not yet marked. The next call is a lap's last: a healthy one
/// there sets the mark while the other thread writes a failure.
fn mark_races_a_failure(spawned_first: bool) {
    let b = Arc::new(
        Breaker::builder()
            .failure_rate(1.0)
            .count_window(2)
            .min_calls(2)
            .build_with_clock(ManualClock::new())
            .unwrap(),
    );
    let at = secs(1);
    assert!(b.try_acquire_at(at).unwrap().failure_at(at).is_none());
    for _ in 0..2 {
        assert!(b.try_acquire_at(at).unwrap().success_at(at).is_none());
    }
    assert_eq!(b.snapshot_at(at).window, WindowCounts::new(2, 0, 0));
    let other = {
        let b = b.clone();
        thread::spawn(move || {
            go_second(spawned_first);
            // One failure in a ring of 2 is a rate of 0.5: no trip.
            b.try_acquire_at(at).unwrap().failure_at(at)
        })
    };
    assert!(b.try_acquire_at(at).unwrap().success_at(at).is_none());
    assert!(other.join().unwrap().is_none());
    assert_eq!(b.snapshot_at(at).window, WindowCounts::new(2, 1, 0));
    for _ in 0..2 {
        assert!(b.try_acquire_at(at).unwrap().success_at(at).is_none());
    }
    assert_eq!(
        b.snapshot_at(at).window,
        WindowCounts::new(2, 0, 0),
        "two healthy calls later the failure is out of a ring of 2"
    );
}

#[test]
fn count_window_clean_mark_never_hides_a_failure() {
    both_orders(mark_races_a_failure);
}

/// A ring of 1 holding a failure, under a slow-call rate that fast calls
/// never reach (the window records, nothing trips). Two healthy calls both
/// read the failure and both XOR it away: the second XOR flips the entry back
/// to a failure (the racing skew the window's docs allow), after the first
/// writer may have marked the ring clean. The writer whose XOR left the entry
/// unhealthy must clear the mark, though its own call was healthy.
fn double_flip_after_a_mark(spawned_first: bool) {
    let b = Arc::new(
        Breaker::builder()
            .slow_call_rate(1.0)
            .slow_call_threshold(Duration::from_secs(1))
            .count_window(1)
            .build_with_clock(ManualClock::new())
            .unwrap(),
    );
    let at = secs(1);
    assert!(b.try_acquire_at(at).unwrap().failure_at(at).is_none());
    assert_eq!(b.snapshot_at(at).window, WindowCounts::new(1, 1, 0));
    let other = {
        let b = b.clone();
        thread::spawn(move || {
            go_second(spawned_first);
            b.try_acquire_at(at).unwrap().success_at(at)
        })
    };
    assert!(b.try_acquire_at(at).unwrap().success_at(at).is_none());
    assert!(other.join().unwrap().is_none());
    assert!(b.try_acquire_at(at).unwrap().success_at(at).is_none());
    assert_eq!(
        b.snapshot_at(at).window,
        WindowCounts::new(1, 0, 0),
        "a healthy call later the ring of 1 is healthy"
    );
}

#[test]
fn count_window_clean_mark_cleared_by_a_skewed_entry() {
    both_orders(double_flip_after_a_mark);
}
