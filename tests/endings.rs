//! Every way a call can end is counted — the crate docs' table of endings,
//! row by row, for each policy, in CLOSED and in HALF_OPEN, through the
//! permit API, `call` and `call_async`, on a `ManualClock`.
//!
//! Each breaker here trips on the first failure-equivalent (one failure, or
//! one slow call for the slow-rate policy), with `abandoned_after` = 1 s, so
//! every row shows at once whether it counted against the dependency.

mod common;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use common::{Log, LogTransitions};
use failfast::{Breaker, CallError, ManualClock, Nanos, Reason, State, Transition};

const ABANDONED_AFTER: Duration = Duration::from_secs(1);
const OPEN: Duration = Duration::from_secs(10);
/// Sooner than every age a drop is judged by: `abandoned_after` and the
/// default unanswered rule's (250 ms, or half of `abandoned_after`).
const EARLY: Duration = Duration::from_millis(200);
const LATE: Duration = Duration::from_millis(1500);

/// The policies under test: each trips on one failure-equivalent.
#[derive(Clone, Copy, Debug)]
enum Policy {
    Consecutive,
    CountWindow,
    TimeWindow,
    /// A slow-call rate: an abandoned call counts as slow, not as a failure.
    SlowRate,
}

const POLICIES: [Policy; 4] = [
    Policy::Consecutive,
    Policy::CountWindow,
    Policy::TimeWindow,
    Policy::SlowRate,
];

struct Fixture {
    breaker: Breaker<ManualClock>,
    clock: ManualClock,
    log: Log,
}

impl Fixture {
    fn new(policy: Policy) -> Fixture {
        let log = Log::default();
        let b = Breaker::builder()
            .abandoned_after(ABANDONED_AFTER)
            .open_duration(OPEN)
            .count_calls(true)
            .log_transitions(&log);
        let b = match policy {
            Policy::Consecutive => b.consecutive_failures(1),
            Policy::CountWindow => b.failure_rate(1.0).count_window(5).min_calls(1),
            Policy::TimeWindow => b
                .failure_rate(1.0)
                .time_window(Duration::from_secs(60), 6)
                .min_calls(1),
            Policy::SlowRate => b
                .slow_call_rate(1.0)
                .slow_call_threshold(Duration::from_secs(5))
                .count_window(5)
                .min_calls(1),
        };
        let clock = ManualClock::starting_at(Nanos::from_secs(100));
        Fixture {
            breaker: b.build_with_clock(clock.clone()).unwrap(),
            clock,
            log,
        }
    }

    /// A breaker of `policy` in HALF_OPEN, with the first probe's slot free:
    /// tripped, then the open period waited out (the next admission probes).
    fn half_open(policy: Policy) -> Fixture {
        let f = Fixture::new(policy);
        let p = f.breaker.try_acquire().unwrap();
        match policy {
            Policy::SlowRate => {
                f.clock.advance(Duration::from_secs(6));
                let _ = p.success();
            }
            _ => {
                let _ = p.failure();
            }
        }
        assert_eq!(f.breaker.state(), State::Open);
        f.clock.advance(OPEN);
        f.log.lock().unwrap().clear();
        f
    }

    fn reasons(&self) -> Vec<Reason> {
        self.log.lock().unwrap().iter().map(|t| t.reason).collect()
    }

    fn calls(&self) -> failfast::CallCounts {
        self.breaker.snapshot().calls.unwrap()
    }
}

/// The reason a CLOSED breaker of `policy` trips for with a call that
/// counts against the dependency.
fn trip_reason(policy: Policy) -> Reason {
    match policy {
        Policy::Consecutive => Reason::ConsecutiveFailures,
        Policy::CountWindow | Policy::TimeWindow => Reason::FailureRate,
        Policy::SlowRate => Reason::SlowCallRate,
    }
}

/// Runs `f` and catches its panic, keeping the default hook quiet for the
/// deliberate ones.
fn catch(f: impl FnOnce()) {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&"deliberate") {
                default(info);
            }
        }));
    });
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    assert!(caught.is_err(), "the panic propagates unchanged");
}

fn poll_once<F: Future>(fut: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}

// ===== CLOSED =====

#[test]
fn closed_a_permit_dropped_early_is_neutral() {
    for policy in POLICIES {
        let f = Fixture::new(policy);
        let p = f.breaker.try_acquire_at(f.breaker.now()).unwrap();
        f.clock.advance(EARLY);
        drop(p);
        assert_eq!(f.breaker.state(), State::Closed, "{policy:?}");
        let s = f.breaker.snapshot();
        assert_eq!(s.window.calls, 0, "{policy:?}: not a call of the window");
        assert_eq!(s.calls.unwrap().dropped, 1, "{policy:?}");
    }
}

#[test]
fn closed_a_permit_dropped_late_counts_against_the_dependency() {
    for policy in POLICIES {
        let f = Fixture::new(policy);
        let p = f.breaker.try_acquire_at(f.breaker.now()).unwrap();
        f.clock.advance(LATE);
        drop(p);
        assert_eq!(f.breaker.state(), State::Open, "{policy:?}");
        assert_eq!(f.reasons(), [trip_reason(policy)], "{policy:?}");
        let t = f.log.lock().unwrap()[0];
        assert_eq!(t.at, Nanos::from_secs(100) + LATE, "tripped at the drop");
        let (failures, slow) = match policy {
            // With a slow-call rate, an abandoned call is slowness.
            Policy::SlowRate => (0, 1),
            _ => (1, 0),
        };
        assert_eq!(
            (t.window.failures, t.window.slow),
            match policy {
                Policy::Consecutive => (0, 0), // no window
                _ => (failures, slow),
            },
            "{policy:?}"
        );
        let c = f.calls();
        assert_eq!(
            (c.abandoned, c.dropped, c.failures),
            (1, 0, 0),
            "{policy:?}"
        );
    }
}

#[test]
fn closed_a_panic_while_the_permit_is_held_is_a_failure() {
    for policy in [Policy::Consecutive, Policy::CountWindow, Policy::TimeWindow] {
        let f = Fixture::new(policy);
        catch(|| {
            let _p = f.breaker.try_acquire().unwrap();
            panic!("deliberate");
        });
        assert_eq!(f.breaker.state(), State::Open, "{policy:?}");
        assert_eq!(f.reasons(), [trip_reason(policy)], "{policy:?}");
        assert_eq!(f.calls().panicked, 1, "{policy:?}");
    }
    // The slow-rate policy counts failures in its window, but trips on slowness.
    let f = Fixture::new(Policy::SlowRate);
    catch(|| {
        let _p = f.breaker.try_acquire().unwrap();
        panic!("deliberate");
    });
    assert_eq!(f.breaker.snapshot().window.failures, 1);
    assert_eq!(f.breaker.state(), State::Closed);
}

#[test]
fn closed_fifty_panics_in_call_trip_the_breaker() {
    let f = Fixture::new(Policy::CountWindow);
    let b = Breaker::builder()
        .consecutive_failures(50)
        .count_calls(true)
        .build_with_clock(f.clock.clone())
        .unwrap();
    for i in 0..50 {
        assert_eq!(b.state(), State::Closed, "after {i} panics");
        catch(|| {
            let _ = b.call(|| -> Result<(), ()> { panic!("deliberate") });
        });
    }
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.snapshot().calls.unwrap().panicked, 50);
}

#[test]
fn closed_a_reported_verdict_and_an_ignore_are_counted_as_reported() {
    for policy in POLICIES {
        let f = Fixture::new(policy);
        let _ = f.breaker.try_acquire().unwrap().ignore();
        let now = f.breaker.now();
        let _ = f.breaker.try_acquire_at(now).unwrap().ignore_at(now);
        let _ = f.breaker.try_acquire().unwrap().success();
        assert_eq!(f.breaker.state(), State::Closed, "{policy:?}");
        let c = f.calls();
        assert_eq!((c.ignored, c.successes, c.dropped), (2, 1, 0), "{policy:?}");
    }
}

#[test]
fn closed_a_plain_permit_is_timed_once_abandoned_after_is_set() {
    // The trap a user fell into: `abandoned_after(1s)` and the plain permit
    // API on a breaker that times nothing. Setting `abandoned_after` makes
    // `try_acquire` read the clock, so the hung call's drop counts.
    let f = Fixture::new(Policy::Consecutive); // abandoned_after(ABANDONED_AFTER)
    let p = f.breaker.try_acquire().unwrap();
    assert_ne!(p.started_at(), Nanos::NEVER, "timed");
    f.clock.advance(Duration::from_secs(5));
    drop(p);
    assert_eq!(
        f.breaker.state(),
        State::Open,
        "the abandoned call is a failure"
    );
    assert_eq!(f.calls().abandoned, 1);
}

#[test]
fn closed_an_untimed_permit_dropped_late_is_neutral() {
    // `try_acquire` on a breaker that times nothing and was not asked to
    // judge drops skips the clock: the permit has no age, so its drop
    // cannot be judged by one (the cheapest path keeps its single load).
    let clock = ManualClock::starting_at(Nanos::from_secs(100));
    let b = Breaker::builder()
        .consecutive_failures(1)
        .count_calls(true)
        .build_with_clock(clock.clone())
        .unwrap();
    let p = b.try_acquire().unwrap();
    assert_eq!(p.started_at(), Nanos::NEVER);
    clock.advance(Duration::from_secs(3600));
    drop(p);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().calls.unwrap().dropped, 1);
}

#[test]
fn closed_an_abandoned_call_does_not_end_a_failure_run_when_slow_only() {
    // A slow-rate policy with consecutive failures: a slow abandonment is
    // slowness, neither ending nor extending the run.
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .consecutive_failures(2)
        .slow_call_rate(1.0)
        .slow_call_threshold(Duration::from_secs(5))
        .count_window(10)
        .min_calls(10)
        .build_with_clock(clock.clone())
        .unwrap();
    let _ = b.try_acquire().unwrap().failure();
    let p = b.try_acquire().unwrap();
    clock.advance(Duration::from_secs(6));
    drop(p);
    assert_eq!(b.snapshot().consecutive_failures, 1, "the run stays");
    assert_eq!(b.snapshot().window.slow, 1);
    let _ = b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), State::Open, "the run went on to 2");
}

// ===== HALF_OPEN =====

#[test]
fn half_open_a_probe_dropped_early_frees_its_slot() {
    for policy in POLICIES {
        let f = Fixture::half_open(policy);
        let probe = f.breaker.try_acquire().unwrap();
        assert!(probe.is_probe());
        f.clock.advance(EARLY);
        drop(probe);
        assert_eq!(f.breaker.state(), State::HalfOpen, "{policy:?}");
        let next = f.breaker.try_acquire().expect("the slot is free at once");
        assert!(next.is_probe(), "{policy:?}");
        assert_eq!(f.reasons(), [Reason::OpenElapsed], "{policy:?}");
    }
}

#[test]
fn half_open_a_probe_dropped_late_fails_the_round_with_backoff() {
    for policy in POLICIES {
        let f = Fixture::half_open(policy);
        let probe = f.breaker.try_acquire().unwrap();
        f.clock.advance(LATE);
        drop(probe);
        assert_eq!(f.breaker.state(), State::Open, "{policy:?}");
        assert_eq!(
            f.reasons(),
            [Reason::OpenElapsed, Reason::ProbeAbandoned],
            "{policy:?}"
        );
        let t = *f.log.lock().unwrap().last().unwrap();
        assert_eq!(t.trips_in_a_row, 2, "{policy:?}: the next backoff step");
        assert_eq!(t.open_for, Some(2 * OPEN), "{policy:?}");
        // No new probe until that open period ends.
        let r = f.breaker.try_acquire().unwrap_err();
        assert_eq!(r.retry_after(), Some(2 * OPEN), "{policy:?}");
        f.clock.advance(2 * OPEN - Duration::from_nanos(1));
        assert!(f.breaker.try_acquire().is_err(), "{policy:?}");
        f.clock.advance(Duration::from_nanos(1));
        assert!(f.breaker.try_acquire().unwrap().is_probe(), "{policy:?}");
    }
}

#[test]
fn half_open_a_panicking_probe_fails_the_round() {
    for policy in POLICIES {
        let f = Fixture::half_open(policy);
        catch(|| {
            let _ = f
                .breaker
                .call(|| -> Result<(), ()> { panic!("deliberate") });
        });
        assert_eq!(f.breaker.state(), State::Open, "{policy:?}");
        assert_eq!(
            f.reasons(),
            [Reason::OpenElapsed, Reason::ProbeFailed],
            "{policy:?}"
        );
        assert!(
            f.breaker.try_acquire().is_err(),
            "{policy:?}: not followed at once by another probe"
        );
    }
}

#[test]
fn half_open_an_ignored_probe_frees_its_slot() {
    for policy in POLICIES {
        let f = Fixture::half_open(policy);
        let _ = f.breaker.try_acquire().unwrap().ignore();
        assert!(f.breaker.try_acquire().unwrap().is_probe(), "{policy:?}");
    }
}

// ===== call_async =====

#[test]
fn call_async_dropped_late_counts_and_dropped_early_does_not() {
    for policy in POLICIES {
        for (held, state) in [(EARLY, State::Closed), (LATE, State::Open)] {
            let f = Fixture::new(policy);
            {
                let mut fut = pin!(f
                    .breaker
                    .call_async(std::future::pending::<Result<(), ()>>()));
                assert!(poll_once(fut.as_mut()).is_pending());
                f.clock.advance(held);
            } // dropped: an outer timeout fired, or the client went away
            assert_eq!(f.breaker.state(), state, "{policy:?} held {held:?}");
        }
    }
}

#[test]
fn call_async_a_probe_dropped_late_fails_the_round() {
    let f = Fixture::half_open(Policy::Consecutive);
    {
        let mut fut = pin!(f
            .breaker
            .call_async(std::future::pending::<Result<(), ()>>()));
        assert!(poll_once(fut.as_mut()).is_pending());
        f.clock.advance(LATE);
    }
    assert_eq!(f.reasons(), [Reason::OpenElapsed, Reason::ProbeAbandoned]);
}

#[test]
fn call_async_a_panic_while_awaiting_is_a_failure() {
    for policy in [Policy::Consecutive, Policy::CountWindow, Policy::TimeWindow] {
        let f = Fixture::new(policy);
        catch(|| {
            let mut fut = pin!(f.breaker.call_async(async {
                panic!("deliberate");
                #[allow(unreachable_code)]
                Ok::<(), ()>(())
            }));
            let _ = poll_once(fut.as_mut());
        });
        assert_eq!(f.breaker.state(), State::Open, "{policy:?}");
        assert_eq!(f.calls().panicked, 1, "{policy:?}");
    }
}

#[test]
fn call_async_a_result_is_recorded_as_reported() {
    let f = Fixture::new(Policy::Consecutive);
    let mut fut = pin!(f.breaker.call_async(async { Err::<(), _>("refused") }));
    assert_eq!(
        poll_once(fut.as_mut()),
        Poll::Ready(Err(CallError::Inner("refused")))
    );
    assert_eq!(f.breaker.state(), State::Open);
}

// ===== Observers =====

#[test]
fn a_panicking_observer_on_open_to_half_open_leaves_the_probe_slot_usable() {
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(OPEN)
        .probe_lease(Duration::from_secs(24 * 3600))
        .observer(|t: &Transition| {
            if t.to == State::HalfOpen {
                panic!("deliberate");
            }
        })
        .build_with_clock(clock.clone())
        .unwrap();
    let _ = b.try_acquire().unwrap().failure();
    clock.advance(OPEN);
    catch(|| {
        let _ = b.try_acquire();
    });
    // The transition happened; the winner's slot was given back.
    assert_eq!(b.state(), State::HalfOpen);
    let probe = b.try_acquire().expect("the probe slot is usable at once");
    assert!(probe.is_probe());
    let _ = probe.success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn a_panicking_observer_on_a_trip_leaves_the_breaker_open() {
    let b = Breaker::builder()
        .consecutive_failures(1)
        .observer(|_: &Transition| panic!("deliberate"))
        .build_with_clock(ManualClock::new())
        .unwrap();
    catch(|| {
        let _ = b.try_acquire().unwrap().failure();
    });
    assert_eq!(b.state(), State::Open, "the state it reached");
}

#[test]
fn a_panicking_observer_while_a_call_panics_does_not_abort() {
    // The failure of a panicking call is recorded while the thread unwinds;
    // an observer panicking then would be a second panic (an abort): its
    // panic is swallowed, the transition stands.
    let b = Breaker::builder()
        .consecutive_failures(1)
        .observer(|_: &Transition| panic!("deliberate"))
        .build_with_clock(ManualClock::new())
        .unwrap();
    catch(|| {
        let _ = b.call(|| -> Result<(), ()> { panic!("deliberate") });
    });
    assert_eq!(b.state(), State::Open);
}
