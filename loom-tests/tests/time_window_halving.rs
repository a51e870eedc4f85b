//! A full time-window bucket is halved by one CAS right after the call whose
//! `fetch_add` found it full (the bucket limit is 4 under loom): two calls
//! that race there halve it once between them and neither is lost.
#![cfg(failfast_loom)]

use std::time::Duration;

use failfast::{Breaker, ManualClock, WindowCounts};
use failfast_loom_tests::{both_orders, go_second, secs};
use loom::sync::Arc;
use loom::thread;

fn two_calls_at_a_full_bucket(spawned_first: bool) {
    // A slow-call rate that fast calls never reach: the window records,
    // nothing trips.
    let b = Arc::new(
        Breaker::builder()
            .slow_call_rate(1.0)
            .slow_call_threshold(Duration::from_secs(1))
            .time_window(Duration::from_secs(10), 1)
            .min_calls(4)
            .build_with_clock(ManualClock::new())
            .unwrap(),
    );
    for _ in 0..4 {
        let _ = b.try_acquire_at(secs(1)).unwrap().failure_at(secs(1));
    }
    let other = {
        let b = b.clone();
        thread::spawn(move || {
            go_second(spawned_first);
            let _ = b.try_acquire_at(secs(1)).unwrap().success_at(secs(1));
        })
    };
    let _ = b.try_acquire_at(secs(1)).unwrap().success_at(secs(1));
    other.join().unwrap();
    // 4 failures and the first success to add (5 calls) halved once to
    // 2 calls / 2 failures, then the other success; or both added first
    // (6 calls) and halved once to 3 / 2. Either way 3 calls, 2 failures: a
    // second halving or a lost call would show.
    assert_eq!(b.snapshot_at(secs(1)).window, WindowCounts::new(3, 2, 0));
}

#[test]
fn time_window_bucket_halving_loses_no_call() {
    both_orders(two_calls_at_a_full_bucket);
}
