//! No allocation per call and no thread, proved by counting.
//!
//! A counting global allocator (`counting_alloc`) counts the allocations made
//! *on the current thread* while a check runs (tests run in parallel; each
//! counts only its own), over many repetitions of every breaker path: CLOSED
//! success, failure and ignore per policy, the `call` wrapper, owned permits,
//! permit drop, OPEN and half-open rejections, every transition (trip, probe,
//! close, reopen, lease expiry), permits dropped early, late and while
//! panicking, and the manual modes. Observers are excluded (none is set:
//! transitions are returned by value). Building a breaker allocates (its window
//! and shared config), and is done outside the counted section.
//!
//! The thread check runs in a child process (this test binary re-executed on
//! that one test), so no other test's thread can come or go while it counts.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use failfast::{Breaker, Builder, Bulkhead, CallError, ManualClock, Nanos, Outcome, State};

mod counting_alloc;
mod poll;
use counting_alloc::allocations;
use poll::block_on;

const REPS: usize = 1_000;

#[track_caller]
fn assert_no_alloc(what: &str, f: impl FnOnce()) {
    let n = allocations(f);
    assert_eq!(n, 0, "{what}: {n} allocations");
}

fn ok() -> Result<u32, u32> {
    Ok(black_box(1))
}

fn err() -> Result<u32, u32> {
    Err(black_box(2))
}

/// Every policy the builder offers, configured never to trip in the
/// closed-path checks (a failure every other call stays under the rates).
fn policies() -> Vec<(&'static str, Builder)> {
    let slow = Duration::from_secs(1);
    vec![
        ("consecutive", Breaker::builder().consecutive_failures(1000)),
        (
            "count window",
            Breaker::builder().failure_rate(0.9).count_window(100),
        ),
        (
            "time window",
            Breaker::builder()
                .failure_rate(0.9)
                .time_window(Duration::from_secs(10), 10),
        ),
        (
            "consecutive + slow",
            Breaker::builder()
                .consecutive_failures(1000)
                .slow_call_threshold(slow),
        ),
        (
            "count window + slow",
            Breaker::builder()
                .failure_rate(0.9)
                .slow_call_rate(0.9)
                .slow_call_threshold(slow)
                .count_window(100),
        ),
        (
            "time window + slow",
            Breaker::builder()
                .failure_rate(0.9)
                .slow_call_rate(0.9)
                .slow_call_threshold(slow)
                .time_window(Duration::from_secs(10), 10),
        ),
        (
            "all conditions + counters",
            Breaker::builder()
                .consecutive_failures(1000)
                .failure_rate(0.9)
                .slow_call_rate(0.9)
                .slow_call_threshold(slow)
                .count_window(100)
                .count_calls(true),
        ),
    ]
}

#[test]
fn closed_paths_allocate_nothing_on_any_policy() {
    for (name, builder) in policies() {
        let b = builder.build().unwrap();
        let owned = Arc::new(
            policies()
                .into_iter()
                .find(|(n, _)| *n == name)
                .unwrap()
                .1
                .build()
                .unwrap(),
        );
        assert_no_alloc(
            &format!("{name}: permit success/failure/ignore/drop"),
            || {
                for i in 0..REPS {
                    let p = b.try_acquire().unwrap();
                    black_box(match i % 4 {
                        0 => p.success(),
                        1 => p.failure(),
                        2 => p.ignore(),
                        _ => {
                            drop(p);
                            None
                        }
                    });
                }
            },
        );
        assert_no_alloc(&format!("{name}: _at(now) twins"), || {
            let now = b.now();
            for i in 0..REPS {
                let p = b.try_acquire_at(now).unwrap();
                black_box(match i % 3 {
                    0 => p.success_at(now),
                    1 => p.failure_at(now),
                    _ => p.record_at(Outcome::Ignored, now),
                });
            }
        });
        assert_no_alloc(&format!("{name}: call wrapper"), || {
            for i in 0..REPS {
                let r = if i % 2 == 0 { b.call(ok) } else { b.call(err) };
                assert!(!matches!(r, Err(CallError::Rejected(_))));
                black_box(r).ok();
            }
        });
        assert_no_alloc(&format!("{name}: call_async"), || {
            for _ in 0..REPS {
                black_box(block_on(b.call_async(async { ok() }))).ok();
            }
        });
        assert_no_alloc(&format!("{name}: owned permits"), || {
            for i in 0..REPS {
                let p = owned.try_acquire_owned().unwrap();
                black_box(if i % 2 == 0 { p.success() } else { p.failure() });
                drop(owned.try_acquire_owned().unwrap());
            }
        });
        assert_no_alloc(&format!("{name}: snapshot"), || {
            for _ in 0..REPS {
                black_box(b.snapshot());
            }
        });
        assert_eq!(
            b.state(),
            State::Closed,
            "{name}: the checks must not trip it"
        );
    }
}

/// A breaker on a manual clock that trips on one failure, with `probes` probes.
fn manual(probes: u32) -> (Breaker<ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .consecutive_failures(1)
        .half_open_probes(probes)
        .open_duration(Duration::from_secs(10))
        .backoff(1.0, Duration::from_secs(10))
        .probe_lease(Duration::from_secs(5))
        .build_with_clock(clock.clone())
        .unwrap();
    (b, clock)
}

#[test]
fn open_half_open_and_every_transition_allocate_nothing() {
    let (b, clock) = manual(2);
    let step = Duration::from_secs(11);
    assert_no_alloc("trip, reject, probe, close, reopen, lease expiry", || {
        for _ in 0..REPS {
            // Closed → Open.
            assert!(b.try_acquire().unwrap().failure().is_some());
            // Open: rejections, through the permit API and the wrapper.
            for _ in 0..10 {
                assert!(b.try_acquire().is_err());
                assert!(matches!(b.call(ok), Err(CallError::Rejected(_))));
            }
            // Open → HalfOpen: the first caller probes; a second probe; a third is turned away.
            clock.advance(step);
            let p1 = b.try_acquire().unwrap();
            assert!(p1.is_probe());
            let p2 = b.try_acquire().unwrap();
            assert!(b.try_acquire().is_err(), "half-open full");
            // A dropped probe frees its slot; the round then closes on two successes.
            drop(p2);
            let p2 = b.try_acquire().unwrap();
            black_box(p1.success());
            assert!(p2.success().is_some(), "HalfOpen → Closed");
            // Trip again; a failed probe reopens.
            assert!(b.try_acquire().unwrap().failure().is_some());
            clock.advance(step * 2);
            assert!(b.try_acquire().unwrap().failure().is_some(), "probe failed");
            // A probe that never reports is superseded after the lease.
            clock.advance(step * 3);
            let hung = b.try_acquire().unwrap();
            clock.advance(Duration::from_secs(6));
            let fresh = b.try_acquire().unwrap();
            assert!(fresh.is_probe());
            black_box(hung.success()); // stale: changes nothing
            let p = b.try_acquire().unwrap();
            black_box(fresh.success());
            assert!(p.success().is_some());
            assert_eq!(b.state(), State::Closed);
        }
    });
}

#[test]
fn drops_judged_by_age_allocate_nothing() {
    let (b, clock) = manual(1);
    let abandoned = Duration::from_secs(5); // the probe lease: the default bound
    assert_no_alloc("early and late drops, in CLOSED and as probes", || {
        for _ in 0..REPS {
            // CLOSED: an early drop (neutral), a late one (a failure: trips).
            drop(b.try_acquire_at(b.now()).unwrap());
            let late = b.try_acquire_at(b.now()).unwrap();
            clock.advance(abandoned);
            drop(late);
            assert_eq!(b.state(), State::Open);
            // HALF_OPEN: an early drop frees the slot; a late one reopens.
            clock.advance(Duration::from_secs(11));
            drop(b.try_acquire().unwrap());
            let probe = b.try_acquire().unwrap();
            clock.advance(abandoned);
            drop(probe);
            assert_eq!(b.state(), State::Open);
            clock.advance(Duration::from_secs(11));
            assert!(b.try_acquire().unwrap().success().is_some());
        }
    });
}

#[test]
fn a_permit_dropped_while_panicking_adds_no_allocation_to_the_panic() {
    // Unwinding allocates (the payload's box); the breaker's failure
    // recorded during the unwind adds nothing to it. (`resume_unwind` runs
    // no panic hook: nothing is printed.)
    let (b, _clock) = manual(1);
    let bare = allocations(|| {
        let _ = std::panic::catch_unwind(|| std::panic::resume_unwind(Box::new(0u8)));
    });
    let with_permit = allocations(|| {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _held = b.try_acquire().unwrap();
            std::panic::resume_unwind(Box::new(0u8))
        }));
    });
    assert_eq!(
        b.state(),
        State::Open,
        "the panic was recorded as a failure"
    );
    assert_eq!(with_permit, bare);
}

#[test]
fn manual_modes_allocate_nothing() {
    let (b, _clock) = manual(1);
    let w = Breaker::builder()
        .failure_rate(0.5)
        .time_window(Duration::from_secs(10), 10)
        .build()
        .unwrap();
    assert_no_alloc("force_open, disable, metrics_only, reset", || {
        for _ in 0..REPS {
            for b in [&b as &dyn Modes, &w] {
                b.cycle();
            }
        }
    });
}

/// The manual-mode cycle, for breakers on any clock.
trait Modes {
    fn cycle(&self);
}

impl<C: failfast::Clock> Modes for Breaker<C> {
    fn cycle(&self) {
        assert!(self.force_open().is_some());
        assert!(self.try_acquire().is_err());
        assert!(self.disable().is_some());
        black_box(self.try_acquire().unwrap().failure());
        assert!(self.metrics_only().is_some());
        for _ in 0..20 {
            black_box(self.try_acquire().unwrap().failure()); // shadow trips, never rejects
        }
        assert!(self.reset().is_some());
        black_box(self.try_acquire().unwrap().success());
    }
}

#[test]
fn bulkhead_allocates_nothing() {
    let bulkhead = Bulkhead::new(2);
    assert_no_alloc("bulkhead acquire, full, release", || {
        for _ in 0..REPS {
            let a = bulkhead.try_acquire().unwrap();
            let c = bulkhead.try_acquire().unwrap();
            assert!(bulkhead.try_acquire().is_err());
            drop((a, c));
        }
    });
}

#[test]
fn a_trip_reported_to_the_outbox_allocates_nothing() {
    // Trip sharing's one step on the request path: the verdict that trips
    // hands its transition to the outbox (full or not, the key inline).
    let outbox = failfast::share::Outbox::new(REPS / 2);
    let (b, clock) = manual(1);
    let key = "pricing.internal.example.com:443";
    assert_no_alloc("trip, report into the outbox (queued, then full)", || {
        for _ in 0..REPS {
            let t = b.try_acquire().unwrap().failure().expect("a trip");
            black_box(outbox.report(black_box(key), &t));
            b.reset();
            clock.advance(Duration::from_millis(1));
        }
    });
    assert_eq!(outbox.len(), REPS / 2);
    assert_eq!(outbox.dropped(), (REPS - REPS / 2) as u64);
}

#[test]
fn the_counter_counts() {
    // The harness itself: a Vec allocation is seen.
    assert_eq!(allocations(|| drop(black_box(vec![1u8; 16]))), 1);
}

#[cfg(target_os = "linux")]
fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Set in the child process that does the thread count.
const CHILD: &str = "FAILFAST_THREADS_CHILD";

/// One test, two roles. In a test run it re-executes this test binary on
/// itself alone (`--exact`, one test thread), so no other test's thread can
/// come or go while it counts; in that child (marked by `CHILD`) it counts.
#[test]
#[cfg(target_os = "linux")]
fn no_thread_after_100k_breakers() {
    if std::env::var_os(CHILD).is_some() {
        return count_threads_around_100k_breakers();
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "no_thread_after_100k_breakers",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("threads unchanged"),
        "child failed: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The child's check: the thread count before and after building and
/// driving 100k breakers (and 1k on the default clock).
#[cfg(target_os = "linux")]
fn count_threads_around_100k_breakers() {
    let before = threads();
    let clock = ManualClock::new();
    let breakers: Vec<Breaker<ManualClock>> = (0..100_000u32)
        .map(|id| {
            Breaker::builder()
                .consecutive_failures(2)
                .failure_rate(0.5)
                .count_window(10)
                .slow_call_threshold(Duration::from_millis(100))
                .id(id)
                .jitter(0.5)
                .build_with_clock(clock.clone())
                .unwrap()
        })
        .collect();
    let quanta: Vec<Breaker> = (0..1_000)
        .map(|_| Breaker::builder().consecutive_failures(1).build().unwrap())
        .collect();
    for (i, b) in breakers.iter().enumerate() {
        black_box(b.try_acquire().unwrap().success());
        if i % 2 == 0 {
            black_box(b.try_acquire().unwrap().failure());
            black_box(b.try_acquire().unwrap().failure()); // trips
            assert!(b.try_acquire().is_err());
        }
    }
    for b in &quanta {
        black_box(b.call(err)).ok();
        assert!(b.call(ok).is_err());
    }
    clock.advance(Duration::from_secs(3600));
    for b in breakers.iter().step_by(2) {
        assert!(b
            .try_acquire_at(Nanos::from_secs(3600))
            .unwrap()
            .success()
            .is_some());
    }
    let after = threads();
    assert_eq!(before, after, "threads before and after 100k breakers");
    println!("threads unchanged: {before} -> {after}");
    // Keep them alive until after the count.
    black_box((&breakers, &quanta));
}
