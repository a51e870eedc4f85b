//! A clock that panics: a user's `Clock` (a test double with an `expect`, a
//! clock reading a source that can fail) may panic inside a verdict, or while
//! the thread already unwinds with a permit held. The panic reaches the
//! caller; the process never aborts on a second panic from a permit's drop;
//! the call is neutral (there is no time to judge it by), except a success
//! whose verdict was under way, which is lost; and the breaker never wedges:
//! a probe's slot is freed at once, or by the probe lease.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use failfast::{Breaker, Clock, ManualClock, Nanos, State};

/// A manual clock that panics while `broken` is set.
#[derive(Clone)]
struct Flaky {
    time: ManualClock,
    broken: Arc<AtomicBool>,
}

impl Clock for Flaky {
    fn now(&self) -> Nanos {
        // SeqCst: test code; the flag is set and read on one thread.
        assert!(!self.broken.load(Ordering::SeqCst), "clock broken");
        self.time.now()
    }
}

impl Flaky {
    fn new() -> Flaky {
        Flaky {
            time: ManualClock::new(),
            broken: Arc::new(AtomicBool::new(false)),
        }
    }

    fn set_broken(&self, broken: bool) {
        self.broken.store(broken, Ordering::SeqCst);
    }
}

const OPEN: Duration = Duration::from_secs(10);

/// A consecutive breaker on `clock`, tripped and then past its open period:
/// the next permit is the probe.
fn ready_to_probe(clock: &Flaky, slow: bool) -> Breaker<Flaky> {
    let mut builder = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(OPEN)
        .jitter(0.0);
    if slow {
        builder = builder.slow_call_threshold(Duration::from_secs(1));
    }
    let breaker = builder.build_with_clock(clock.clone()).unwrap();
    breaker.try_acquire().unwrap().failure();
    assert_eq!(breaker.state(), State::Open);
    clock.time.advance(OPEN);
    breaker
}

/// Runs `f`, which must panic, with the default hook quiet for this test's
/// own panics.
fn must_panic(f: impl FnOnce()) {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let ours = [Some("clock broken"), Some("deliberate")];
            let text = info
                .payload()
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str));
            if !ours.contains(&text) {
                default(info);
            }
        }));
    });
    assert!(
        catch_unwind(AssertUnwindSafe(f)).is_err(),
        "the panic reaches the caller"
    );
}

#[test]
fn a_clock_that_panics_in_a_probes_failure_frees_the_probe_at_once() {
    for slow in [false, true] {
        let clock = Flaky::new();
        let breaker = ready_to_probe(&clock, slow);
        let probe = breaker.try_acquire().expect("the probe");
        assert_eq!(breaker.state(), State::HalfOpen);
        clock.set_broken(true);
        // The failure reads the clock before it is recorded; the clock
        // panics; the permit's drop runs while the thread unwinds, must not
        // panic again, and has no time to judge the call by: neutral.
        must_panic(|| {
            probe.failure();
        });
        clock.set_broken(false);
        assert_eq!(breaker.state(), State::HalfOpen, "slow = {slow}");
        let next = breaker.try_acquire();
        assert!(
            next.is_ok(),
            "slow = {slow}: the probe's slot is free again"
        );
        next.unwrap().success();
        assert_eq!(breaker.state(), State::Closed, "slow = {slow}");
    }
}

#[test]
fn a_clock_that_panics_in_a_probes_success_loses_it_until_the_lease_ends() {
    for slow in [false, true] {
        let clock = Flaky::new();
        let breaker = ready_to_probe(&clock, slow);
        let probe = breaker.try_acquire().expect("the probe");
        clock.set_broken(true);
        // A success's fast path marks the permit done before the breaker
        // reads the clock (so an observer's panic can never count a verdict
        // twice): the clock's panic loses the verdict, and the probe's slot
        // stays taken until the probe lease (default: the open duration).
        must_panic(|| {
            probe.success();
        });
        clock.set_broken(false);
        assert_eq!(breaker.state(), State::HalfOpen, "slow = {slow}");
        assert!(
            breaker.try_acquire().is_err(),
            "slow = {slow}: the slot is held"
        );
        clock.time.advance(OPEN);
        let next = breaker.try_acquire();
        assert!(next.is_ok(), "slow = {slow}: a new round after the lease");
        next.unwrap().success();
        assert_eq!(breaker.state(), State::Closed, "slow = {slow}");
    }
}

#[test]
fn a_clock_that_panics_while_a_panicking_call_unwinds_frees_the_probe() {
    for slow in [false, true] {
        let clock = Flaky::new();
        let breaker = ready_to_probe(&clock, slow);
        must_panic(|| {
            let _probe = breaker.try_acquire().expect("the probe");
            clock.set_broken(true);
            panic!("deliberate");
        });
        clock.set_broken(false);
        assert!(
            breaker.try_acquire().is_ok(),
            "slow = {slow}: the probe's slot is free again"
        );
    }
}

#[test]
fn a_clock_that_panics_while_a_closed_call_unwinds_leaves_the_breaker_closed_and_working() {
    for slow in [false, true] {
        let clock = Flaky::new();
        let mut builder = Breaker::builder().consecutive_failures(2);
        if slow {
            builder = builder.slow_call_threshold(Duration::from_secs(1));
        }
        let breaker = builder.build_with_clock(clock.clone()).unwrap();
        must_panic(|| {
            let _permit = breaker.try_acquire().expect("closed");
            clock.set_broken(true);
            panic!("deliberate");
        });
        clock.set_broken(false);
        assert_eq!(breaker.state(), State::Closed, "slow = {slow}");
        breaker.try_acquire().unwrap().failure();
        assert_eq!(
            breaker.state(),
            State::Closed,
            "slow = {slow}: the unwound call was neutral, not a failure"
        );
        breaker.try_acquire().unwrap().failure();
        assert_eq!(
            breaker.state(),
            State::Open,
            "slow = {slow}: it still counts and trips"
        );
    }
}
