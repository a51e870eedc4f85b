//! The registry's `remove` racing a `handle` + verdict on the same key: no
//! lost breaker, no breaker tracked twice, and the fleet counters exact.
#![cfg(failfast_loom)]

use failfast::{Breaker, Handle, ManualClock, Nanos, Registry, State};
use failfast_loom_tests::{both_orders, go_second};
use loom::sync::Arc;
use loom::thread;

type Reg = Registry<u64, std::collections::hash_map::RandomState, ManualClock>;

fn registry() -> Arc<Reg> {
    let r = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1))
        .shards(1)
        .build_with_clock(ManualClock::new())
        .expect("valid registry");
    Arc::new(r)
}

/// The fleet counters agree with the map: as many breakers counted in some
/// state as entries, and as many counted OPEN as entries that are.
fn assert_counts_match_the_map(r: &Reg) {
    let (mut entries, mut open) = (0, 0);
    r.for_each_snapshot(|_, s| {
        entries += 1;
        open += usize::from(s.state == State::Open);
    });
    assert_eq!(r.len(), entries, "tracked count vs map");
    assert_eq!(r.open_count(), open, "open count vs map");
    let by_state: usize = State::all().iter().map(|s| r.count_in(*s)).sum();
    assert_eq!(by_state, entries, "per-state counts vs map");
}

/// One thread looks the key up and trips its breaker while the other removes
/// the key. Whatever the interleaving:
///
/// * the remove found the key exactly when the lookup's breaker is gone
///   from the map (the lookup came first), else the lookup inserted after the
///   remove and its breaker is tracked — never lost, never both;
/// * a departed breaker is never tracked again: a later lookup gets a fresh
///   one, while the holder's handle keeps its breaker and its behaviour (it
///   tripped it: it stays open for the holder);
/// * the fleet counters match the map (a removed breaker tripped by its
///   holder after the removal must not be counted OPEN).
#[test]
fn registry_remove_races_handle_and_verdict() {
    both_orders(|spawned_first| {
        let r = registry();
        let user = {
            let r = r.clone();
            thread::spawn(move || {
                let h = r.handle_at(&7, Nanos::ZERO);
                let permit = h.try_acquire_at(Nanos::ZERO).expect("admitted");
                let _ = permit.failure_at(Nanos::ZERO);
                h
            })
        };
        go_second(spawned_first);
        let removed = r.remove_at(&7, Nanos::ZERO);
        let h = user.join().unwrap();

        assert_counts_match_the_map(&r);
        let now = r.handle_at(&7, Nanos::ZERO);
        if removed {
            // The lookup came first: its breaker departed for good.
            assert!(
                !Handle::ptr_eq(&h, &now),
                "a departed breaker was re-tracked"
            );
            assert_eq!(now.state(), State::Closed);
            assert_eq!(
                h.state(),
                State::Open,
                "the holder's breaker keeps its behaviour"
            );
        } else {
            // The remove came first: the lookup's breaker is the tracked one.
            assert!(Handle::ptr_eq(&h, &now), "the lookup's breaker was lost");
            assert_eq!(now.state(), State::Open);
        }
        assert_eq!(r.len(), 1);
        assert_counts_match_the_map(&r);
    });
}
