//! A clock that panics: a user's `Clock` (a test double with an `expect`, a
//! clock reading a source that can fail) may panic inside a verdict, or while
//! the thread already unwinds with a permit held. The panic reaches the
//! caller; the process never aborts on a second panic from a permit's drop;
//! the call is neutral (there is no time to judge it by), except a success
//! whose verdict was under way, which is lost; and the breaker never wedges:
//! a probe's slot is freed at once, or by the probe lease.

#[cfg(all(feature = "tower", feature = "metrics"))]
mod poll;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use failfast::{Breaker, Builder, Clock, ManualClock, Nanos, State};

/// A manual clock that panics while `broken` is set, and on the one read
/// after `break_once`.
#[derive(Clone)]
struct Flaky {
    time: ManualClock,
    broken: Arc<AtomicBool>,
    once: Arc<AtomicBool>,
}

impl Clock for Flaky {
    fn now(&self) -> Nanos {
        // SeqCst: test code; the flags are set and read on one thread.
        assert!(!self.broken.load(Ordering::SeqCst), "clock broken");
        assert!(!self.once.swap(false, Ordering::SeqCst), "clock broken");
        self.time.now()
    }
}

impl Flaky {
    fn new() -> Flaky {
        Flaky {
            time: ManualClock::new(),
            broken: Arc::new(AtomicBool::new(false)),
            once: Arc::new(AtomicBool::new(false)),
        }
    }

    fn break_once(&self) {
        self.once.store(true, Ordering::SeqCst);
    }

    fn set_broken(&self, broken: bool) {
        self.broken.store(broken, Ordering::SeqCst);
    }
}

const OPEN: Duration = Duration::from_secs(10);

/// `builder`, timing its calls (a 1 s slow-call threshold) when `slow`: a
/// timed admission reads the clock, so its permit's drop reads it too.
fn timed_if(builder: Builder, slow: bool) -> Builder {
    if slow {
        builder.slow_call_threshold(Duration::from_secs(1))
    } else {
        builder
    }
}

/// A consecutive breaker on `clock`, tripped and then past its open period:
/// the next permit is the probe.
fn ready_to_probe(clock: &Flaky, slow: bool) -> Breaker<Flaky> {
    let builder = timed_if(
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(OPEN)
            .jitter(0.0),
        slow,
    );
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
        // stays taken until the probe lease (default: the open duration,
        // at least 30 s).
        must_panic(|| {
            probe.success();
        });
        clock.set_broken(false);
        assert_eq!(breaker.state(), State::HalfOpen, "slow = {slow}");
        assert!(
            breaker.try_acquire().is_err(),
            "slow = {slow}: the slot is held"
        );
        clock.time.advance(breaker.config().probe_lease());
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
        let builder = timed_if(Breaker::builder().consecutive_failures(2), slow);
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

#[test]
fn a_clock_that_panics_once_in_a_failure_is_read_again_by_the_drop_and_counts_a_panic() {
    for slow in [false, true] {
        let clock = Flaky::new();
        let builder = timed_if(Breaker::builder().consecutive_failures(1), slow);
        let breaker = builder.build_with_clock(clock.clone()).unwrap();
        let permit = breaker.try_acquire().expect("closed");
        // The failure's clock read panics; the permit's drop, unwinding,
        // reads the clock again, which works: the call is judged as a panic,
        // a failure, and the breaker trips.
        clock.break_once();
        must_panic(|| {
            permit.failure();
        });
        assert_eq!(breaker.state(), State::Open, "slow = {slow}");
    }
}

/// A consecutive registry (one failure trips) on `clock`.
fn registry(
    clock: &Flaky,
    slow: bool,
) -> failfast::Registry<u64, std::collections::hash_map::RandomState, Flaky> {
    let builder = timed_if(Breaker::builder().consecutive_failures(1), slow);
    failfast::Registry::<u64>::builder(builder)
        .build_with_clock(clock.clone())
        .unwrap()
}

/// After a clock panic: the key's breaker is still CLOSED (the call whose
/// verdict the clock broke was neutral) and still trips on a failure.
fn still_works(registry: &failfast::Registry<u64, std::collections::hash_map::RandomState, Flaky>) {
    let h = registry.handle(&1);
    assert_eq!(h.state(), State::Closed, "the broken call was neutral");
    h.try_acquire().unwrap().failure();
    assert_eq!(h.state(), State::Open);
}

#[test]
fn a_clock_that_panics_with_a_registry_handle_alive_does_not_abort() {
    for slow in [false, true] {
        let clock = Flaky::new();
        let registry = registry(&clock, slow);
        // A handle and a borrowed permit on the stack: the failure's clock
        // read panics, and the handle drops while the thread unwinds.
        must_panic(|| {
            let handle = registry.handle(&1);
            let permit = handle.try_acquire().unwrap();
            clock.set_broken(true);
            permit.failure();
        });
        clock.set_broken(false);
        still_works(&registry);
    }
}

#[test]
fn a_clock_that_panics_with_a_permit_owning_its_handle_does_not_abort() {
    for slow in [false, true] {
        let clock = Flaky::new();
        let registry = registry(&clock, slow);
        // The permit owns a clone of the handle: it drops with the permit,
        // after the breaker's own drop, while the thread unwinds.
        let permit = registry.handle(&1).try_acquire_owned().unwrap();
        must_panic(|| {
            clock.set_broken(true);
            permit.failure();
        });
        clock.set_broken(false);
        still_works(&registry);

        // Dropped without a verdict, not unwinding: a timed permit's drop
        // reads the clock, whose panic goes on; the handle inside it then
        // drops during that unwinding.
        let clock = Flaky::new();
        let registry = self::registry(&clock, slow);
        let permit = registry.handle(&1).try_acquire_owned().unwrap();
        clock.set_broken(true);
        // (An untimed permit's drop reads no clock; only its handle's does,
        // and that panic goes on as well.)
        must_panic(|| drop(permit));
        clock.set_broken(false);
        still_works(&registry);
    }
}

#[cfg(all(feature = "tower", feature = "metrics"))]
mod layers {
    use failfast::export::metrics::CallMetrics;
    use failfast::tower::FailFastLayer;
    use tower::{Layer, Service};

    use super::poll::block_on;
    use super::*;

    #[test]
    fn a_clock_that_panics_under_a_measured_layer_call_does_not_abort() {
        for measured in [false, true] {
            let clock = Flaky::new();
            let breaker = Arc::new(
                Breaker::builder()
                    .consecutive_failures(1)
                    .build_with_clock(clock.clone())
                    .unwrap(),
            );
            let inner_clock = clock.clone();
            let inner = tower::service_fn(move |_: u32| {
                let clock = inner_clock.clone();
                async move {
                    // The handler panics with the clock broken: the layer's
                    // permit drops while the thread unwinds.
                    clock.set_broken(true);
                    if clock.broken.load(Ordering::SeqCst) {
                        panic!("deliberate");
                    }
                    Ok::<u32, std::io::Error>(1)
                }
            });
            let layer = FailFastLayer::new(breaker.clone());
            let layer = if measured {
                layer.call_metrics(CallMetrics::new().call_duration(true))
            } else {
                layer
            };
            let mut service = layer.layer(inner);
            must_panic(|| {
                let _ = block_on(service.call(1));
            });
            clock.set_broken(false);
            // The permit's drop had no time to judge the call by: neutral.
            assert_eq!(breaker.state(), State::Closed, "measured = {measured}");
            breaker.try_acquire().unwrap().failure();
            assert_eq!(breaker.state(), State::Open, "measured = {measured}");
        }
    }
}
