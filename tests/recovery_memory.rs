//! What each recovery feature of issue 27 adds to a breaker's memory, as
//! the design notes state it (`failfast::docs`, "Recovery"): the ramp, the
//! half-open rate rule, the decaying backoff and a tripping verdict's hint
//! (taken by default) nothing per breaker; remembered hints (`hints()`) one
//! 8-byte slot in the breaker's storage, or a 32-byte allocation for a
//! breaker that otherwise has none; and when a recovered breaker is
//! pristine again.

use std::time::Duration;

use failfast::{Breaker, Builder, Config, ManualClock, Nanos, QuantaClock, State};

fn bytes(builder: Builder) -> usize {
    builder
        .build_with_clock(ManualClock::new())
        .unwrap()
        .memory_bytes()
}

#[cfg(target_pointer_width = "64")]
#[test]
fn a_breaker_is_48_bytes_and_the_consecutive_policy_has_no_heap_by_default() {
    assert_eq!(std::mem::size_of::<Breaker<QuantaClock>>(), 48);
    assert_eq!(std::mem::size_of::<Breaker<ManualClock>>(), 48);
    let plain = || Breaker::builder().consecutive_failures(5);
    // A tripping verdict's hint, taken by default, travels with the verdict.
    assert_eq!(bytes(plain()), 48);
    assert_eq!(bytes(plain().hints().hints_off()), 48);
    // The ramp and the rate rule add nothing to it.
    assert_eq!(
        bytes(
            plain()
                .ramp(Duration::from_secs(30))
                .half_open_probes(31)
                .half_open_rate_rule()
        ),
        48
    );
}

#[cfg(target_pointer_width = "64")]
#[test]
fn hints_take_one_slot_or_an_allocation_of_32_bytes() {
    // No other storage: the hint slot needs the allocation's header too
    // (reference count, head word, length: 24 bytes) and its own 8.
    let consecutive = || Breaker::builder().consecutive_failures(5);
    assert_eq!(bytes(consecutive().hints()) - bytes(consecutive()), 32);
    // A breaker with a window (or counters) has the allocation already.
    for with_storage in [
        Breaker::builder().failure_rate(0.5).count_window(100),
        Breaker::builder()
            .failure_rate(0.5)
            .time_window(Duration::from_secs(10), 10),
        Breaker::builder().consecutive_failures(5).count_calls(true),
    ] {
        let on = bytes(with_storage.clone().hints());
        let off = bytes(with_storage);
        assert_eq!(on - off, 8);
    }
    // The cap changes nothing of it.
    assert_eq!(
        bytes(consecutive().max_hint(Duration::from_secs(39 * 3600))),
        bytes(consecutive().hints())
    );
}

#[test]
fn the_ramp_and_the_rate_rule_add_nothing_per_breaker() {
    for base in [
        Breaker::builder().consecutive_failures(5),
        Breaker::builder().failure_rate(0.5).count_window(100),
        Breaker::builder()
            .failure_rate(0.5)
            .slow_call_rate(0.5)
            .slow_call_threshold(Duration::from_millis(100))
            .time_window(Duration::from_secs(10), 10)
            .count_calls(true),
    ] {
        let without = bytes(base.clone());
        assert_eq!(bytes(base.clone().ramp(Duration::from_secs(30))), without);
        assert_eq!(
            bytes(base.clone().ramp_curve(Duration::from_secs(1), 0.0, 100.0)),
            without
        );
        assert_eq!(bytes(base.clone().half_open_rate_rule()), without);
        assert_eq!(bytes(base.half_open_failure_rate(0.2)), without);
    }
}

#[test]
fn the_ramps_curve_is_in_the_shared_configuration() {
    // The curve (128 steps of 4 bytes) is part of the configuration every
    // breaker built from it shares; the breaker holds a pointer to it.
    const CURVE: usize = 128 * 4;
    // The configuration also holds the backoff table (64 steps of 8 bytes).
    const BACKOFF: usize = 64 * 8;
    assert!(std::mem::size_of::<Config>() >= CURVE + BACKOFF);
}

#[test]
fn a_decaying_step_lives_in_the_state_word() {
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(10))
        .build_with_clock(clock)
        .unwrap();
    let before = b.memory_bytes();
    let mut t = Nanos::ZERO;
    // Three trips in a row, then a close that keeps the step.
    for _ in 0..3 {
        b.try_acquire_at(t).unwrap().failure_at(t);
        t = t.saturating_add(b.snapshot_at(t).retry_after.unwrap());
    }
    b.try_acquire_at(t).unwrap().success_at(t);
    let s = b.snapshot_at(t);
    assert_eq!((s.state, s.backoff_step), (State::Closed, 3));
    assert_eq!(b.memory_bytes(), before);
    // And it is not pristine until the step has decayed.
    assert!(!b.is_pristine_at(t));
    assert!(!b.is_pristine_at(t.saturating_add(Duration::from_secs(29))));
    assert!(b.is_pristine_at(t.saturating_add(Duration::from_secs(30))));
}

#[test]
fn a_ramped_breaker_is_pristine_once_its_window_has_passed_asked_or_not() {
    let b = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(10))
        .ramp(Duration::from_secs(60))
        .build_with_clock(ManualClock::new())
        .unwrap();
    let t0 = Nanos::ZERO;
    b.try_acquire_at(t0).unwrap().failure_at(t0);
    let closed = Nanos::from_secs(10);
    b.try_acquire_at(closed).unwrap().success_at(closed);
    assert!(b.snapshot_at(closed).ramp_fraction.is_some());
    assert!(!b.is_pristine_at(closed), "ramping");
    // Long after the window and the step's decay, the word is still marked
    // ramping (nothing has admitted a call since), and it is as pristine as
    // one that was asked: an idle host is evicted after the TTL.
    let later = Nanos::from_secs(3600);
    assert_eq!(b.snapshot_at(later).ramp_fraction, None);
    assert_eq!(b.snapshot_at(later).backoff_step, 0);
    assert!(b.is_pristine_at(later));
    // The first admission after the window ends the mark; still pristine.
    b.try_acquire_at(later).unwrap().ignore_at(later);
    assert!(b.is_pristine_at(later));
}
