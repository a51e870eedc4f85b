//! Idle eviction, step by step: when an entry counts as idle, when a sweep is
//! due, what `maintain` and `sweep` return, and how releasing a handle
//! restarts the idle clock.

use std::time::Duration;

use failfast::{Breaker, ManualClock, Nanos, Outcome, Outliers, Registry, State};

type Reg = Registry<u64, std::collections::hash_map::RandomState, ManualClock>;

/// One idle tick of the registry: 2^24 ns.
const TICK: u64 = 1 << 24;

fn registry(clock: &ManualClock, ttl: Duration, shards: usize) -> Reg {
    Registry::<u64>::builder(
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_secs(10)),
    )
    .idle_ttl(ttl)
    .shards(shards)
    .build_with_clock(clock.clone())
    .unwrap()
}

#[test]
fn idle_means_longer_than_the_ttl() {
    let clock = ManualClock::new();
    // A TTL of exactly 3 idle ticks.
    let r = registry(&clock, Duration::from_nanos(3 * TICK), 1);
    drop(r.handle_at(&1, Nanos::ZERO));
    assert_eq!(
        r.sweep_at(1, Nanos::from_nanos(3 * TICK)),
        0,
        "idle for exactly the TTL: kept"
    );
    assert_eq!(r.len(), 1);
    assert_eq!(
        r.sweep_at(1, Nanos::from_nanos(4 * TICK)),
        1,
        "one tick longer: evicted"
    );
    assert!(r.is_empty());
}

#[test]
fn is_empty_follows_inserts_and_evictions() {
    let clock = ManualClock::new();
    let r = registry(&clock, Duration::from_secs(60), 1);
    assert!(r.is_empty());
    drop(r.handle_at(&1, Nanos::ZERO));
    assert!(!r.is_empty());
    assert_eq!(r.sweep_at(1, Nanos::from_secs(61)), 1);
    assert!(r.is_empty());
}

/// One shard, TTL 60 s: a sweep is due 60 s after the last one (the first
/// "last" is the registry's creation), never sooner, and `maintain_at`
/// returns what it evicted.
#[test]
fn a_sweep_is_due_one_interval_after_the_last() {
    let clock = ManualClock::new();
    let r = registry(&clock, Duration::from_secs(60), 1);
    let h = r.handle_at(&1, Nanos::ZERO);
    h.try_acquire_at(Nanos::ZERO)
        .unwrap()
        .failure_at(Nanos::ZERO);
    // Due at 60 s; key 1 is open (and held), so nothing goes.
    assert_eq!(r.maintain_at(Nanos::from_secs(60)), 0);
    // Key 1 recovers and is released: pristine, last seen at 0 s.
    let probe = h.try_acquire_at(Nanos::from_secs(70)).unwrap();
    assert_eq!(
        probe.success_at(Nanos::from_secs(70)).unwrap().to,
        State::Closed
    );
    drop(h); // the clock still reads 0 s: the idle stamp stays at 0 s
             // Idle past the TTL at 100 s, but the next sweep is not due before 120 s.
    assert_eq!(r.maintain_at(Nanos::from_secs(100)), 0, "not due yet");
    assert_eq!(r.len(), 1);
    assert_eq!(r.maintain_at(Nanos::from_secs(120)), 1, "due exactly now");
    assert!(r.is_empty());
}

#[test]
fn maintain_reads_the_clock_and_returns_the_evicted_count() {
    let clock = ManualClock::new();
    let r = registry(&clock, Duration::from_secs(60), 1);
    for k in 0..3 {
        drop(r.handle(&k));
    }
    clock.advance(Duration::from_secs(30));
    assert_eq!(r.maintain(), 0, "not due");
    clock.advance(Duration::from_secs(31));
    assert_eq!(r.maintain(), 3);
    assert!(r.is_empty());
}

/// Releasing a handle counts as a use: a breaker held past the TTL is not
/// evicted the moment it is let go.
#[test]
fn releasing_a_handle_restarts_the_idle_clock() {
    let clock = ManualClock::new();
    let r = registry(&clock, Duration::from_secs(60), 1);
    let h = r.handle(&1);
    clock.set(Nanos::from_secs(100));
    drop(h);
    assert_eq!(
        r.sweep_at(1, Nanos::from_secs(150)),
        0,
        "idle for 50 s only"
    );
    assert_eq!(r.sweep_at(1, Nanos::from_secs(161)), 1);
}

/// The same when the handle is dropped while its thread unwinds (the drop
/// takes another path then, which must still stamp the entry).
#[test]
fn releasing_a_handle_during_a_panic_restarts_the_idle_clock() {
    let clock = ManualClock::new();
    let r = registry(&clock, Duration::from_secs(60), 1);
    let h = r.handle(&1);
    clock.set(Nanos::from_secs(100));
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _held = h;
        std::panic::resume_unwind(Box::new("deliberate, without the panic hook"));
    }));
    assert!(unwound.is_err());
    assert_eq!(
        r.sweep_at(1, Nanos::from_secs(150)),
        0,
        "idle for 50 s only"
    );
    assert_eq!(r.sweep_at(1, Nanos::from_secs(161)), 1);
}

/// The two other idle rules, at their edges: an entry whose window holds a
/// failure goes once it is idle *longer* than `forget_after`, and an OPEN one
/// once it is idle longer than the TTL plus its longest open period.
#[test]
fn information_is_forgotten_only_past_its_edges() {
    let clock = ManualClock::new();
    let r = Registry::<u64>::builder(
        Breaker::builder()
            .consecutive_failures(2)
            .open_duration(Duration::from_nanos(4 * TICK))
            .backoff_off(), // the longest open period is the base one
    )
    .idle_ttl(Duration::from_nanos(3 * TICK))
    .forget_after(Duration::from_nanos(5 * TICK))
    .shards(1)
    .build_with_clock(clock.clone())
    .unwrap();
    let at = Nanos::from_nanos;
    // Key 1: one failure, CLOSED (a run of 1 of 2). Key 2: OPEN.
    let failed = r.handle_at(&1, at(0));
    failed.try_acquire_at(at(0)).unwrap().failure_at(at(0));
    let open = r.handle_at(&2, at(0));
    for _ in 0..2 {
        open.try_acquire_at(at(0)).unwrap().failure_at(at(0));
    }
    assert_eq!((failed.state(), open.state()), (State::Closed, State::Open));
    drop((failed, open));
    assert_eq!(
        r.sweep_at(1, at(5 * TICK)),
        0,
        "idle for exactly forget_after: kept"
    );
    assert_eq!(
        r.sweep_at(1, at(6 * TICK)),
        1,
        "one tick longer: the failure is forgotten"
    );
    assert_eq!(
        r.sweep_at(1, at(7 * TICK)),
        0,
        "OPEN, idle for exactly TTL + open: kept"
    );
    assert_eq!(r.sweep_at(1, at(8 * TICK)), 1, "one tick longer: gone");
    assert!(r.is_empty());
}

#[test]
fn a_remembered_hint_keeps_its_breaker_until_it_runs_out() {
    // An upstream said "not for 100 s" with a failure that did not trip, and
    // a success ended the run: the breaker is CLOSED with a clean run, but
    // its next trip opens for what is left of the hint. A fresh breaker's
    // would not, so an idle sweep keeps it until the hint has run out.
    let clock = ManualClock::new();
    let r = Registry::<u64>::builder(
        Breaker::builder()
            .consecutive_failures(2)
            .open_duration(Duration::from_secs(10))
            .hints(),
    )
    .idle_ttl(Duration::from_secs(1))
    .shards(1)
    .build_with_clock(clock.clone())
    .unwrap();
    let start = Nanos::ZERO;
    for key in [1, 2] {
        r.with_at(&key, start, |b| {
            b.try_acquire_at(start).unwrap().record_hinted_at(
                Outcome::Failure,
                Some(Duration::from_secs(100)),
                start,
            );
            b.try_acquire_at(start).unwrap().success_at(start);
        });
    }
    let idle = Nanos::from_secs(50);
    assert_eq!(
        r.sweep_at(1, idle),
        0,
        "idle past the TTL, with 50 s of a hint left: kept"
    );
    clock.advance(Duration::from_secs(50)); // the handle's release stamps the clock's time
    let host = r.handle_at(&1, idle);
    for _ in 0..2 {
        host.try_acquire_at(idle).unwrap().failure_at(idle);
    }
    let open_for = host.snapshot_at(idle).retry_after.unwrap();
    assert!(
        open_for >= Duration::from_secs(50),
        "the kept breaker opens for the rest of the hint, not the base 10 s: {open_for:?}"
    );
    drop(host);
    assert_eq!(
        r.sweep_at(1, Nanos::from_millis(100_500)),
        1,
        "the other key, once its hint has run out; the first is OPEN for the hint's rest"
    );
    assert_eq!(r.len(), 1);
    assert_eq!(
        r.sweep_at(1, Nanos::from_secs(50 + 50 + 2)),
        1,
        "the first once its open period and the TTL are over"
    );
    assert!(r.is_empty());
}

#[test]
fn an_ejected_host_is_kept_while_its_ejection_runs() {
    // Envoy's ejection time (30 s the first time) is the pool's, not the
    // breaker's: here a breaker's own open period is 1 s at most, and its
    // registry forgets idle hosts after 1 s.
    let clock = ManualClock::new();
    let r = Registry::<u64>::builder(
        Breaker::builder()
            .consecutive_failures(1000)
            .open_duration(Duration::from_secs(1))
            .backoff_off(),
    )
    .idle_ttl(Duration::from_secs(1))
    .shards(1)
    .outliers(Outliers::envoy().interval(Duration::from_secs(10)))
    .build_with_clock(clock.clone())
    .unwrap();
    // Two intervals of traffic: host 0 fails half its calls, 1..5 none.
    for interval in 0..2 {
        let now = Nanos::from_secs(10 * interval);
        for key in 0..5u64 {
            r.with_at(&key, now, |b| {
                for i in 0..100 {
                    let p = b.try_acquire_at(now).unwrap();
                    let failed = key == 0 && i % 2 == 0;
                    let outcome = if failed {
                        Outcome::Failure
                    } else {
                        Outcome::Success
                    };
                    let _ = p.record_at(outcome, now);
                }
            });
        }
    }
    // Its next call rolls its interval: ejected, for 30 s.
    let ejected = Nanos::from_secs(20);
    let open_for = r.with_at(&0, ejected, |b| {
        b.try_acquire_at(ejected).unwrap().success_at(ejected);
        b.snapshot_at(ejected).retry_after
    });
    assert!(
        open_for.is_some_and(|d| d >= Duration::from_secs(30)),
        "ejected for Envoy's 30 s (in whole 2^24 ns units): {open_for:?}"
    );
    let idle = Nanos::from_secs(25);
    assert_eq!(
        r.sweep_at(1, idle),
        4,
        "idle past the TTL and the breaker's own schedule: the healthy hosts go"
    );
    assert_eq!(
        (r.len(), r.open_count()),
        (1, 1),
        "the ejected host stays while its ejection runs"
    );
    let mut kept = Vec::new();
    r.for_each_snapshot(|k, snap| kept.push((*k, snap.outlier_ejection.is_some())));
    assert_eq!(kept, [(0, true)], "still ejected");
    // The rule waits out the ejection's own span (30 s) and the TTL.
    assert_eq!(r.sweep_at(1, Nanos::from_secs(20 + 30)), 0);
    assert_eq!(r.sweep_at(1, Nanos::from_secs(20 + 30 + 2)), 1);
    assert!(r.is_empty());
}
