//! The registry: exactly one breaker per key under an insert race, and an
//! eviction never splits a key's state from a handle obtained concurrently.
#![cfg(failfast_loom)]

use std::time::Duration;

use failfast::{Breaker, Handle, ManualClock, Registry};
use loom::sync::Arc;
use loom::thread;

fn registry(
    clock: &ManualClock,
) -> Registry<u64, std::collections::hash_map::RandomState, ManualClock> {
    Registry::<u64>::builder(Breaker::builder().consecutive_failures(1))
        .shards(1)
        .idle_ttl(Duration::from_secs(1))
        .build_with_clock(clock.clone())
        .expect("valid")
}

/// Two threads miss on the same key at once: both get the same breaker.
#[test]
fn racing_inserts_make_one_breaker() {
    loom::model(|| {
        let clock = ManualClock::new();
        let r = Arc::new(registry(&clock));
        let other = {
            let r = r.clone();
            thread::spawn(move || r.handle(&7))
        };
        let mine = r.handle(&7);
        let theirs = other.join().unwrap();
        assert!(Handle::ptr_eq(&mine, &theirs));
        assert_eq!(r.len(), 1);
    });
}

/// A sweep races a lookup of an idle, pristine, unheld key: whichever wins,
/// the handle the lookup returns is the breaker the registry tracks.
#[test]
fn sweep_never_splits_a_handle_from_the_map() {
    loom::model(|| {
        let clock = ManualClock::new();
        let r = Arc::new(registry(&clock));
        drop(r.handle(&7));
        clock.advance(Duration::from_secs(5)); // idle past the TTL
        let sweeper = {
            let r = r.clone();
            thread::spawn(move || r.sweep(1))
        };
        let held = r.handle(&7);
        let evicted = sweeper.join().unwrap();
        assert!(evicted <= 1);
        assert_eq!(r.len(), 1);
        assert!(
            Handle::ptr_eq(&held, &r.handle(&7)),
            "the held handle is the tracked one"
        );
    });
}
