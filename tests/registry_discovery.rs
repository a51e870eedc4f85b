//! The registry under discovery and pressure: `remove`, `retain` and
//! `insert_with` keep the fleet counters exact and never re-track a departed
//! breaker; eviction goes by information (`forget_after`, TTL + backoff cap);
//! a full registry sends new keys to one overflow breaker per shard and
//! makes room by least recent use.

use std::collections::hash_map::RandomState;
use std::time::Duration;

use failfast::registry::HostKey;
use failfast::{Breaker, Builder, Handle, ManualClock, MaxOpen, Outcome, Registry, State};

type Reg<K> = Registry<K, RandomState, ManualClock>;

fn consecutive(n: u32) -> Builder {
    Breaker::builder()
        .consecutive_failures(n)
        .open_duration(Duration::from_secs(60))
}

/// A real upstream: seen succeeding once (so the fleet cap counts it), then
/// failing until it opens.
fn trip<K>(h: &Handle<K, ManualClock>) {
    h.try_acquire().unwrap().success();
    while h.state() == State::Closed {
        h.try_acquire().unwrap().failure();
    }
}

#[test]
fn removing_an_open_breaker_frees_its_place_at_once_and_its_holders_keep_working() {
    let registry: Reg<u64> = Registry::builder(consecutive(1))
        .max_open(MaxOpen::Count(1))
        .build_with_clock(ManualClock::new())
        .unwrap();
    let old = registry.handle(&1);
    trip(&old);
    assert_eq!((registry.len(), registry.open_count()), (1, 1));
    // The cap is used up: another real host's trip is refused.
    let other = registry.handle(&2);
    other.try_acquire().unwrap().success();
    other.try_acquire().unwrap().failure();
    assert_eq!(other.state(), State::Closed);
    assert_eq!(registry.refused_trips(), 1);

    assert!(registry.remove(&1));
    assert_eq!((registry.len(), registry.open_count()), (1, 0));
    assert_eq!(
        registry.count_in(State::Disabled),
        0,
        "the departed one is counted nowhere"
    );
    // Its place in the cap is free: the other host may trip now.
    other.try_acquire().unwrap().failure();
    assert_eq!(other.state(), State::Open);
    assert_eq!(registry.open_count(), 1);

    // The holder keeps a working breaker — still open, still recovering on
    // its own — that no lookup returns again and no counter sees.
    assert!(old.try_acquire().is_err(), "still open for its holder");
    let _ = old.reset();
    old.try_acquire().unwrap().failure();
    assert_eq!(old.state(), State::Open, "tripped again, for its holder");
    assert_eq!(
        registry.open_count(),
        1,
        "its transitions touch no fleet counter"
    );
    let fresh = registry.handle(&1);
    assert!(!Handle::ptr_eq(&old, &fresh));
    assert_eq!(fresh.state(), State::Closed);
    assert_eq!(registry.len(), 2);
    assert!(!registry.remove(&99));
    assert_eq!(registry.removed(), 1);
}

#[test]
fn removing_an_unheld_breaker_settles_it_at_once() {
    let registry: Reg<u64> = Registry::builder(consecutive(1))
        .capacity(2)
        .build_with_clock(ManualClock::new())
        .unwrap();
    trip(&registry.handle(&1));
    assert_eq!(registry.open_count(), 1);
    assert!(registry.remove(&1));
    assert_eq!(
        (
            registry.len(),
            registry.open_count(),
            registry.count_in(State::Closed)
        ),
        (0, 0, 0)
    );
    // Its capacity slot is back.
    let a = registry.handle(&2);
    let b = registry.handle(&3);
    assert!(a.is_tracked() && b.is_tracked());
}

#[test]
fn retain_keeps_what_discovery_still_lists() {
    let registry: Reg<String> = Registry::builder(consecutive(1))
        .build_with_clock(ManualClock::new())
        .unwrap();
    for host in ["a:80", "b:80", "c:80", "d:80"] {
        drop(registry.handle(host));
    }
    // b is held while it goes: it leaves the fleet's counts when retain
    // settles it, after the shard's lock is released.
    let open = registry.handle("b:80");
    trip(&open);
    let held = registry.handle("d:80");
    let listed = ["a:80", "c:80"];
    let mut seen = Vec::new();
    let removed = registry.retain(|key, snapshot| {
        seen.push((key.clone(), snapshot.state));
        listed.contains(&key.as_str())
    });
    assert_eq!((removed, registry.removed()), (2, 2));
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(seen[1], ("b:80".to_string(), State::Open));
    let mut left: Vec<String> = registry.snapshots().map(|(k, _)| k).collect();
    left.sort();
    assert_eq!(left, ["a:80", "c:80"]);
    assert_eq!((registry.len(), registry.open_count()), (2, 0));
    assert_eq!(registry.count_in(State::Closed), 2, "d left the counts too");
    assert!(held.try_acquire().is_ok());
    assert!(open.try_acquire().is_err(), "still open for its holder");
}

#[test]
fn insert_with_overrides_pins_and_names_the_key_in_errors() {
    let clock = ManualClock::new();
    let registry: Reg<String> = Registry::builder(consecutive(5))
        .idle_ttl(Duration::from_secs(60))
        .build_with_clock(clock.clone())
        .unwrap();
    let before = registry.handle("pay:443");
    let pinned = registry
        .insert_with("pay:443".to_string(), consecutive(1))
        .unwrap();
    assert!(!Handle::ptr_eq(&before, &pinned), "replaced");
    assert!(Handle::ptr_eq(&pinned, &registry.handle("pay:443")));
    assert_eq!(
        registry.handle("pay:443").config().consecutive_failures(),
        Some(1)
    );
    assert_eq!((registry.len(), registry.removed()), (1, 1));
    drop((before, pinned));
    // Pinned: never evicted, however idle.
    clock.advance(Duration::from_secs(30 * 24 * 3600));
    assert_eq!(registry.sweep(usize::MAX), 0);
    assert_eq!(registry.len(), 1);
    assert!(registry.remove("pay:443"));
    assert!(registry.is_empty());

    let err = registry
        .insert_with("bad:443".to_string(), Breaker::builder().failure_rate(1.5))
        .unwrap_err();
    assert_eq!(err.field(), "failure_rate");
    assert_eq!(err.key(), Some("\"bad:443\""), "{err}");
    assert_eq!(
        err.found(),
        "1.5",
        "the value alone: the key has its own place"
    );
    assert!(registry.is_empty());

    let err = Registry::<String>::builder(consecutive(5))
        .override_key(
            "worse:443".to_string(),
            Breaker::builder().min_calls(0).failure_rate(0.5),
        )
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("\"worse:443\""), "{err}");
}

#[test]
fn failures_older_than_forget_after_are_forgotten_open_ones_after_ttl_plus_their_period() {
    let clock = ManualClock::new();
    let registry: Reg<u64> =
        Registry::builder(consecutive(3).open_duration(Duration::from_secs(600)))
            .idle_ttl(Duration::from_secs(60))
            .forget_after(Duration::from_secs(3600))
            .shards(1)
            .build_with_clock(clock.clone())
            .unwrap();
    registry.handle(&1).try_acquire().unwrap().failure(); // a failure in the window
    trip(&registry.handle(&2)); // open for 600 s
    let busy = registry.handle(&3);
    trip(&busy);
    drop(busy);

    clock.advance(Duration::from_secs(600));
    // 3 stays busy: an OPEN breaker that still sees traffic is never evicted.
    drop(registry.handle(&3));
    assert_eq!(
        registry.sweep(1),
        0,
        "past the TTL, but the failure is fresh and 2 is open"
    );
    clock.advance(Duration::from_secs(62));
    drop(registry.handle(&3));
    assert_eq!(registry.sweep(1), 1, "2: idle past TTL + its open period");
    assert_eq!(registry.with(&1, |b| b.state()), State::Closed);
    assert!(registry.with(&1, |b| !b.is_pristine_at(failfast::Clock::now(&clock))));
    // (that lookup stamped 1 again)
    clock.advance(Duration::from_secs(3601));
    drop(registry.handle(&3));
    assert_eq!(
        registry.sweep(1),
        1,
        "1: its failure is older than forget_after"
    );
    assert_eq!(registry.len(), 1);
    assert_eq!(registry.with(&3, |b| b.state()), State::Open);
    assert_eq!(registry.evicted(), 2);
}

/// An OPEN breaker is kept for the TTL plus its own open period: a trip on
/// the schedule's step is forgotten soon after, one an upstream's hint
/// (`Retry-After: 600`, taken by default) holds open is kept as long as
/// the hint asks, so a fresh breaker does not call the upstream early.
#[test]
fn an_open_breaker_is_kept_for_the_ttl_plus_its_own_period_a_hinted_one_too() {
    let clock = ManualClock::new();
    let registry: Reg<u64> = Registry::builder(Breaker::builder().consecutive_failures(1))
        .idle_ttl(Duration::from_secs(60))
        .shards(1)
        .build_with_clock(clock.clone())
        .unwrap();
    let step = registry.handle(&1);
    step.try_acquire().unwrap().failure();
    let hinted = registry.handle(&2);
    hinted
        .try_acquire()
        .unwrap()
        .record_hinted(failfast::Outcome::Failure, Some(Duration::from_secs(600)));
    assert_eq!((step.state(), hinted.state()), (State::Open, State::Open));
    drop((step, hinted));
    let base = Breaker::builder().consecutive_failures(1).build_config();
    let base = base.unwrap().open_duration(1);
    clock.advance(Duration::from_secs(60) + base + Duration::from_secs(1));
    assert_eq!(registry.sweep(1), 1, "1: idle past the TTL + its 1 s");
    assert_eq!(registry.len(), 1, "2: not yet");
    clock.advance(Duration::from_secs(600));
    assert_eq!(registry.sweep(1), 1, "2: idle past the TTL + its hint");
    assert!(registry.is_empty());
}

#[test]
fn a_full_registry_shares_one_overflow_breaker_per_shard_that_still_trips() {
    let registry: Reg<u64> = Registry::builder(consecutive(3))
        .capacity(1)
        .shards(1)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let held = registry.handle(&1);
    registry.handle(&1).try_acquire().unwrap().failure(); // not evictable either
    let overflow: Vec<_> = (2..10u64).map(|k| registry.handle(&k)).collect();
    assert!(overflow
        .iter()
        .all(|h| !h.is_tracked() && h.key().is_none()));
    assert!(overflow.windows(2).all(|w| Handle::ptr_eq(&w[0], &w[1])));
    assert_eq!((registry.len(), registry.untracked()), (1, 8));
    // Failing new keys trip it, and then every new key of the shard is rejected.
    for k in 10..13u64 {
        registry.handle(&k).try_acquire().unwrap().failure();
    }
    assert!(registry.handle(&13).try_acquire().is_err());
    assert_eq!(
        registry.open_count(),
        0,
        "not a key's breaker: outside the fleet"
    );
    drop(held);
}

#[test]
fn pressure_evicts_the_least_recently_used_pristine_entry() {
    let clock = ManualClock::new();
    let registry: Reg<HostKey> = Registry::builder(consecutive(3))
        .capacity(3)
        .shards(1)
        .build_with_clock(clock.clone())
        .unwrap();
    for host in ["a:80", "b:80", "c:80"] {
        drop(registry.handle_from(host));
        clock.advance(Duration::from_millis(100));
    }
    drop(registry.handle_from("a:80")); // a is now the most recent
    clock.advance(Duration::from_millis(100));
    let d = registry.handle_from("d:80");
    assert!(d.is_tracked());
    let mut left: Vec<String> = registry.snapshots().map(|(k, _)| k.to_string()).collect();
    left.sort();
    assert_eq!(
        left,
        ["a:80", "c:80", "d:80"],
        "b was the least recently used"
    );
    assert_eq!(registry.evicted(), 1);
}

#[test]
fn the_key_byte_budget_bounds_key_text() {
    let clock = ManualClock::new();
    let registry: Reg<String> = Registry::builder(consecutive(1))
        .max_key_bytes(20)
        .shards(1)
        .build_with_clock(clock.clone())
        .unwrap();
    let a = registry.handle("0123456789");
    a.try_acquire().unwrap().failure(); // holds information: not evictable
    let b = registry.handle("abcdefghij");
    assert!(b.is_tracked());
    assert_eq!(registry.key_bytes(), 20);
    let c = registry.handle("k");
    assert!(!c.is_tracked(), "no byte left and nothing evictable");
    drop(b);
    // A shard that found nothing to evict is not scanned again in the same
    // idle tick (≈ 16.8 ms).
    clock.advance(Duration::from_millis(20));
    let c = registry.handle("k");
    assert!(c.is_tracked(), "the pristine, unheld one made room");
    assert_eq!(registry.key_bytes(), 11);
}

/// A key inserted through discovery takes its entry slot and its key bytes
/// even past the bounds (the operator asked for it), and they count against
/// what request-chosen keys may still take.
#[test]
fn insert_with_takes_its_slot_and_its_bytes_even_past_the_bounds() {
    let registry: Reg<String> = Registry::builder(consecutive(1))
        .capacity(2)
        .max_key_bytes(100)
        .shards(1)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let pinned = registry
        .insert_with("pay:443".to_string(), consecutive(3))
        .unwrap();
    assert_eq!((registry.len(), registry.key_bytes()), (1, 7));
    let first = registry.handle("a:80");
    assert!(first.is_tracked());
    let second = registry.handle("b:80");
    assert!(
        !second.is_tracked(),
        "the pinned key holds one of the two slots"
    );
    assert_eq!((registry.len(), registry.key_bytes()), (2, 11));
    drop((first, second, pinned));
}

#[test]
fn a_host_inserted_through_discovery_counts_against_the_open_cap_at_once() {
    let registry: Reg<u64> = Registry::builder(consecutive(1))
        .max_open(MaxOpen::Count(1))
        .build_with_clock(ManualClock::new())
        .unwrap();
    // Known upstreams, never called yet: the first trip takes the slot, the
    // second is refused.
    let a = registry.insert_with(1, consecutive(1)).unwrap();
    let b = registry.insert_with(2, consecutive(1)).unwrap();
    a.try_acquire().unwrap().failure();
    b.try_acquire().unwrap().failure();
    assert_eq!((a.state(), b.state()), (State::Open, State::Closed));
    assert_eq!(registry.refused_trips(), 1);
}

/// The registry's lifetime totals hold every kind of count — dropped,
/// abandoned and panicked calls included — and keep them when the breaker
/// that made them leaves.
#[test]
fn lifetime_totals_keep_every_kind_of_count_through_a_removal() {
    let clock = ManualClock::new();
    let registry: Reg<u64> = Registry::builder(
        consecutive(100)
            .count_calls(true)
            .slow_call_threshold(Duration::from_secs(1)),
    )
    .build_with_clock(clock.clone())
    .unwrap();
    let h = registry.handle(&1);
    h.try_acquire().unwrap().success();
    h.try_acquire().unwrap().failure();
    let _ = h.try_acquire().unwrap().ignore();
    drop(h.try_acquire().unwrap()); // dropped at once: neutral
    let hung = h.try_acquire().unwrap();
    clock.advance(Duration::from_secs(2));
    drop(hung); // dropped after the slow-call threshold: abandoned
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _permit = h.try_acquire().unwrap();
        panic!("deliberate");
    }));
    let before = registry.lifetime_calls().unwrap();
    assert_eq!(
        (
            before.successes,
            before.failures,
            before.ignored,
            before.dropped,
            before.abandoned,
            before.panicked
        ),
        (1, 1, 1, 1, 1, 1)
    );
    assert!(before.slow >= 1, "the abandoned call was slow");
    assert_eq!(
        before,
        h.snapshot().calls.unwrap(),
        "one breaker: its own counts"
    );
    drop(h);
    assert!(registry.remove(&1));
    assert_eq!(registry.lifetime_calls().unwrap(), before);
}

/// The same for the counts only some settings make: neutral verdicts (the
/// caller's fault, not the upstream's) and calls dropped unanswered under
/// the `unanswered` rule.
#[test]
fn lifetime_totals_keep_neutral_and_unanswered_counts_through_a_removal() {
    let clock = ManualClock::new();
    let registry: Reg<u64> = Registry::builder(
        consecutive(100)
            .count_calls(true)
            .unanswered(100, Duration::from_millis(200)),
    )
    .build_with_clock(clock.clone())
    .unwrap();
    let h = registry.handle(&1);
    h.try_acquire().unwrap().record(Outcome::Neutral);
    h.try_acquire().unwrap().record(Outcome::Neutral);
    let waiting = h.try_acquire().unwrap();
    clock.advance(Duration::from_millis(300));
    drop(waiting); // given up on after the rule's age: unanswered
    let before = registry.lifetime_calls().unwrap();
    assert_eq!(
        (before.admitted, before.neutral, before.unanswered),
        (3, 2, 1)
    );
    drop(h);
    assert!(registry.remove(&1));
    assert_eq!(registry.lifetime_calls().unwrap(), before);
}
