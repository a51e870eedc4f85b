//! The registry's concurrent get-or-insert: one key, one breaker.
#![cfg(failfast_loom)]

use failfast::{Breaker, Handle, ManualClock, Nanos, Registry, State};
use failfast_loom_tests::{both_orders, go_second};
use loom::sync::Arc;
use loom::thread;

fn registry() -> Arc<Registry<u64, std::collections::hash_map::RandomState, ManualClock>> {
    let r = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1))
        .shards(1)
        .build_with_clock(ManualClock::new())
        .expect("valid registry");
    Arc::new(r)
}

/// Two threads insert the same key at once (one by value, one by
/// reference): both get the same breaker, the registry tracks one entry, and
/// a trip through one handle is seen through the other.
#[test]
fn registry_get_or_insert_one_key_one_breaker() {
    both_orders(|spawned_first| {
        let r = registry();
        let other = {
            let r = r.clone();
            thread::spawn(move || r.get_or_insert_at(7, Nanos::ZERO))
        };
        go_second(spawned_first);
        let mine = r.handle_at(&7, Nanos::ZERO);
        let theirs = other.join().unwrap();

        assert!(Handle::ptr_eq(&mine, &theirs), "two breakers for one key");
        assert!(mine.is_tracked() && theirs.is_tracked());
        assert_eq!(r.len(), 1);
        mine.try_acquire_at(Nanos::ZERO)
            .unwrap()
            .failure_at(Nanos::ZERO)
            .expect("trips");
        assert_eq!(theirs.state(), State::Open);
    });
}
