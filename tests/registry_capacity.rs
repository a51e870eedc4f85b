//! The registry's capacity: a slot per tracked key, given back by every
//! eviction; a full registry makes room only by evicting an unheld entry
//! that carries no information (pristine, or idle past its bounds), and
//! otherwise sends the key to its shard's overflow breaker and counts it.

use std::time::Duration;

use failfast::{Breaker, ManualClock, Nanos, Registry};

type Reg = Registry<u64, std::collections::hash_map::RandomState, ManualClock>;

fn registry(capacity: usize) -> Reg {
    Registry::<u64>::builder(Breaker::builder().consecutive_failures(1))
        .capacity(capacity)
        .shards(1)
        .idle_ttl(Duration::from_secs(60))
        .build_with_clock(ManualClock::new())
        .unwrap()
}

#[test]
fn the_capacity_is_what_was_configured() {
    assert_eq!(registry(3).capacity(), Some(3));
    let unbounded = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1))
        .build()
        .unwrap();
    assert_eq!(unbounded.capacity(), None);
}

/// Evictions give their slots back: after a sweep emptied a full registry,
/// as many new keys are tracked again.
#[test]
fn a_sweep_gives_the_slots_back() {
    let r = registry(2);
    for k in 0..2 {
        drop(r.handle_at(&k, Nanos::ZERO));
    }
    assert_eq!(r.sweep_at(1, Nanos::from_secs(61)), 2);
    assert!(r.is_empty());
    // Held, so that neither insert can make room by evicting the other.
    let later = Nanos::from_secs(61);
    let kept: Vec<_> = (10..12).map(|k| r.handle_at(&k, later)).collect();
    assert!(kept.iter().all(|h| h.is_tracked()), "both slots were free");
    assert_eq!((r.len(), r.untracked()), (2, 0));
    let over = r.handle_at(&12, later);
    assert!(!over.is_tracked(), "full again");
    assert_eq!(r.untracked(), 1);
}

/// A full registry never evicts a recent entry that holds information: a
/// released entry with a failure in its window stays, and the new key goes
/// to the overflow breaker instead. (A pristine entry would make room at
/// once: forgetting it loses nothing.)
#[test]
fn a_full_registry_never_evicts_a_recent_entry() {
    let r = Registry::<u64>::builder(Breaker::builder().consecutive_failures(2))
        .capacity(1)
        .shards(1)
        .idle_ttl(Duration::from_secs(60))
        .build_with_clock(ManualClock::new())
        .unwrap();
    let first = r.handle_at(&1, Nanos::ZERO);
    first
        .try_acquire_at(Nanos::ZERO)
        .unwrap()
        .failure_at(Nanos::ZERO);
    drop(first);
    let second = r.handle_at(&2, Nanos::from_secs(1));
    assert!(!second.is_tracked());
    assert_eq!((r.len(), r.untracked()), (1, 1));
    assert!(
        r.handle_at(&1, Nanos::from_secs(1)).is_tracked(),
        "key 1 kept"
    );
    // Once key 1's failure is older than `forget_after` (an hour by
    // default) and it is idle past the TTL, it makes room.
    drop(second);
    let third = r.handle_at(&3, Nanos::from_secs(3_700));
    assert!(third.is_tracked());
    assert_eq!((r.len(), r.untracked()), (1, 1));
}
