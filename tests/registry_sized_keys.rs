//! Sized keys after `Registry<str>`: the code a user wrote against a
//! `Registry<K>` before the key's stored form had a name ([`Key`]) still
//! compiles and means the same. Each function here is a pattern from user
//! code — generic over `K`, inferred from an argument, a struct holding a
//! handle or a `Snapshots` — and the tests run them.
//!
//! Two things did change: a registry built with its key type left to be
//! inferred from a later call (`handle("x")`, `insert_with(key)`) must name
//! it now (`Registry::<String>`), since both `String` and `str` fit; and
//! code that builds a registry of a generic key must say the key is
//! `Send + Sync + 'static` (lookups read the map with no lock, so an entry a
//! reader saw is freed later, maybe on another thread).

use std::borrow::Borrow;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

use failfast::registry::{KeyBytes, Snapshots};
use failfast::{Breaker, Builder, Clock, Handle, ManualClock, Registry, State};

fn template() -> Builder {
    Breaker::builder().consecutive_failures(1)
}

/// Generic code over any sized key and a borrowed form of it.
fn every_lookup<K, Q>(registry: &Registry<K>, query: &Q, owned: K) -> Vec<K>
where
    K: Hash + Eq + Clone + Debug + Borrow<Q>,
    Q: Hash + Eq + failfast::registry::Lookup<K> + ?Sized,
{
    let handle: Handle<K> = registry.handle(query);
    assert_eq!(handle.key(), Some(&owned));
    assert_eq!(registry.with(query, |b| b.state()), State::Closed);
    handle.try_acquire().unwrap().failure();
    let mut open = Vec::new();
    registry.for_each_snapshot(|key: &K, s| {
        if s.state == State::Open {
            open.push(key.clone());
        }
    });
    assert_eq!(open, std::slice::from_ref(&owned));
    assert!(registry.remove(query));
    registry.insert_with(owned.clone(), template()).unwrap();
    assert_eq!(registry.retain(|key: &K, _| key != &owned), 1);
    drop(registry.get_or_insert(owned));
    registry.snapshots().map(|(key, _)| key).collect()
}

fn builder_with_override<K>(key: K) -> Registry<K>
where
    K: Hash + Eq + Debug + KeyBytes + Send + Sync + 'static,
{
    Registry::<K>::builder(template())
        .override_key(key, Breaker::builder().consecutive_failures(7))
        .max_key_bytes(100)
        .build()
        .unwrap()
}

/// A user's struct holding a handle and a registry of any key.
struct Upstream<K, C: Clock> {
    handle: Handle<K, C>,
    registry: Arc<Registry<K>>,
}

/// A user's struct naming the snapshot iterator, with no bound on the key.
struct Listing<'a, K, S, C: Clock>(Snapshots<'a, K, S, C>);

fn describe<K, S, C: Clock>(listing: &Listing<'_, K, S, C>) -> String {
    format!("{:?}", listing.0)
}

#[derive(PartialEq, Eq, Hash, Debug)]
struct NotClone(u32);

#[test]
fn generic_code_over_sized_keys_compiles_and_runs() {
    let strings = Registry::<String>::builder(template()).build().unwrap();
    assert_eq!(every_lookup(&strings, "a:80", "a:80".to_string()), ["a:80"]);
    let numbers = Registry::<u64>::builder(template()).build().unwrap();
    assert_eq!(every_lookup(&numbers, &7, 7), [7]);

    let overridden = builder_with_override("x".to_string());
    assert_eq!(
        overridden.handle("x").config().consecutive_failures(),
        Some(7)
    );
}

#[test]
fn structs_holding_handles_and_snapshots_compile_and_run() {
    let registry = Arc::new(Registry::<NotClone>::builder(template()).build().unwrap());
    let upstream: Upstream<NotClone, _> = Upstream {
        handle: registry.get_or_insert(NotClone(1)),
        registry: registry.clone(),
    };
    assert_eq!(upstream.handle.key(), Some(&NotClone(1)));
    assert_eq!(upstream.registry.len(), 1);
    // `describe` is generic over a key without `Clone`; any key can fill it.
    let strings = Registry::<String>::builder(template())
        .build_with_clock(ManualClock::new())
        .unwrap();
    let listing = Listing(strings.snapshots());
    assert!(describe(&listing).starts_with("Snapshots"));
}
