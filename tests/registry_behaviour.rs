//! Registry behaviour: one breaker per key under a race, eviction rules,
//! capacity, the open cap under a storm, key isolation (S5).

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use failfast::{Breaker, Handle, ManualClock, MaxOpen, Nanos, Registry, State};

fn consecutive(k: u32) -> failfast::Builder {
    Breaker::builder()
        .consecutive_failures(k)
        .open_duration(Duration::from_secs(60))
}

#[test]
fn concurrent_insert_of_one_key_yields_one_breaker() {
    for round in 0..50 {
        let registry = Arc::new(Registry::<String>::builder(consecutive(1)).build().unwrap());
        let barrier = Arc::new(Barrier::new(4));
        let joins: Vec<_> = (0..4)
            .map(|t| {
                let (registry, barrier) = (registry.clone(), barrier.clone());
                thread::spawn(move || {
                    barrier.wait();
                    if t % 2 == 0 {
                        registry.handle("same-host:443")
                    } else {
                        registry.get_or_insert("same-host:443".to_string())
                    }
                })
            })
            .collect();
        let handles: Vec<Handle<String>> = joins.into_iter().map(|j| j.join().unwrap()).collect();
        for h in &handles[1..] {
            assert!(Handle::ptr_eq(&handles[0], h), "round {round}");
        }
        assert_eq!(registry.len(), 1);
    }
}

#[test]
fn keys_isolate_circuits_s5() {
    let registry = Registry::<&'static str>::builder(consecutive(1))
        .build()
        .unwrap();
    let checkout = registry.handle(&"checkout");
    checkout.try_acquire().unwrap().failure();
    assert_eq!(checkout.state(), State::Open);
    assert!(checkout.try_acquire().is_err());
    let shipping = registry.handle(&"shipping");
    assert!(shipping.try_acquire().is_ok());
    assert!(registry.with(&"shipping", |b| b.try_acquire().is_ok()));
    assert_ne!(
        checkout.id(),
        shipping.id(),
        "ids are key hashes: jitter differs per host"
    );
}

#[test]
fn eviction_spares_open_half_open_dirty_and_held_breakers() {
    let clock = ManualClock::new();
    let registry = Registry::<u64>::builder(
        Breaker::builder()
            .consecutive_failures(3)
            .failure_rate(0.5)
            .count_window(20)
            .min_calls(10)
            .open_duration(Duration::from_secs(60)),
    )
    .idle_ttl(Duration::from_secs(10))
    .shards(8)
    .build_with_clock(clock.clone())
    .unwrap();

    let open = registry.handle(&1);
    for _ in 0..3 {
        open.try_acquire().unwrap().failure();
    }
    let half_open = registry.handle(&2);
    for _ in 0..3 {
        half_open.try_acquire().unwrap().failure();
    }
    registry.handle(&3).try_acquire().unwrap().failure(); // a failure in the window
    let held = registry.handle(&4);
    for k in 100..200u64 {
        registry.handle(&k).try_acquire().unwrap().success();
    }
    clock.advance(Duration::from_secs(61));
    let probe = half_open.try_acquire().unwrap();
    assert!(probe.is_probe());
    drop(probe); // frees the slot; still HalfOpen
    assert_eq!(half_open.state(), State::HalfOpen);
    drop((open, half_open));

    // Idle past the TTL, but not past `forget_after` (1 h) nor the TTL plus
    // the longest open period (60 s): only pristine entries carry nothing.
    clock.advance(Duration::from_secs(65));
    assert_eq!(
        registry.sweep(8),
        100,
        "only the 100 pristine, idle, unheld go"
    );
    assert_eq!(registry.len(), 4);
    assert_eq!(registry.with(&1, |b| b.state()), State::Open);
    assert_eq!(registry.with(&2, |b| b.state()), State::HalfOpen);
    assert!(Handle::ptr_eq(&held, &registry.handle(&4)));
    assert!(!registry.with(&3, |b| b.is_pristine_at(clock_now(&clock))));
    assert_eq!((registry.open_count(), registry.half_open_count()), (1, 1));

    // A lookup through the map restarts the idle clock.
    drop(held);
    clock.advance(Duration::from_secs(5));
    let _ = registry.with(&4, |b| b.state());
    clock.advance(Duration::from_secs(6));
    assert_eq!(registry.sweep(8), 0, "seen 6 s ago: not idle");
    clock.advance(Duration::from_secs(5));
    assert_eq!(registry.sweep(8), 1);
}

fn clock_now(clock: &ManualClock) -> Nanos {
    use failfast::Clock;
    clock.now()
}

#[test]
fn piggybacked_sweep_runs_on_inserts() {
    let clock = ManualClock::new();
    let registry = Registry::<u64>::builder(consecutive(1))
        .idle_ttl(Duration::from_secs(8))
        .shards(8) // one shard due every second
        .build_with_clock(clock.clone())
        .unwrap();
    for k in 0..64u64 {
        drop(registry.handle(&k));
    }
    // Past the TTL, each insert a second apart sweeps one shard: the first
    // eight sweep every shard once, so none of the 64 idle keys is left.
    clock.advance(Duration::from_secs(9));
    for k in 1000..1016u64 {
        clock.advance(Duration::from_secs(1));
        drop(registry.handle(&k));
    }
    let mut left = Vec::new();
    registry.for_each_snapshot(|k, _| left.push(*k));
    left.sort_unstable();
    assert!(left.iter().all(|k| *k >= 1000), "idle keys left: {left:?}");
    assert!(left.len() <= 16, "{} left", left.len());
}

#[test]
fn capacity_bound_prefers_idle_entries_then_detaches() {
    let clock = ManualClock::new();
    let registry = Registry::<u64>::builder(consecutive(1))
        .capacity(64)
        .shards(1)
        .idle_ttl(Duration::from_secs(10))
        .build_with_clock(clock.clone())
        .unwrap();
    let held: Vec<_> = (0..64u64).map(|k| registry.handle(&k)).collect();
    let extra = registry.handle(&1000);
    assert!(!extra.is_tracked());
    assert_eq!((registry.len(), registry.untracked()), (64, 1));
    // A detached breaker still decides, and does not touch the fleet.
    extra.try_acquire().unwrap().failure();
    assert_eq!(extra.state(), State::Open);
    assert_eq!(registry.open_count(), 0);

    drop(held);
    clock.advance(Duration::from_secs(11));
    let fresh = registry.handle(&2000);
    assert!(fresh.is_tracked(), "an idle entry made room");
    // The insert also ran the due sweep step, which took the other idle ones.
    assert_eq!(registry.len(), 1);
    assert_eq!(registry.untracked(), 1);
}

#[test]
fn capacity_and_open_cap_hold_under_a_concurrent_storm() {
    let registry = Arc::new(
        Registry::<u64>::builder(consecutive(1))
            .capacity(1_000)
            .max_open(MaxOpen::Count(10))
            .build()
            .unwrap(),
    );
    let threads = 4;
    let barrier = Arc::new(Barrier::new(threads));
    let joins: Vec<_> = (0..threads as u64)
        .map(|t| {
            let (registry, barrier) = (registry.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                let mut kept = Vec::new();
                for i in 0..5_000u64 {
                    let h = registry.handle(&(t * 1_000_000 + i % 2_000));
                    // Real upstreams (seen working) that then fail: the cap
                    // counts every one of them.
                    if let Ok(p) = h.try_acquire() {
                        p.success();
                    }
                    if let Ok(p) = h.try_acquire() {
                        p.failure();
                    }
                    assert!(registry.len() <= 1_000);
                    assert!(registry.open_count() + registry.half_open_count() <= 10);
                    if i % 3 == 0 {
                        kept.push(h);
                    }
                }
            })
        })
        .collect();
    for j in joins {
        j.join().unwrap();
    }
    assert!(registry.len() <= 1_000);
    let mut open = 0;
    registry.for_each_snapshot(|_, s| open += usize::from(s.state == State::Open));
    assert_eq!(open, registry.open_count());
    assert!(open <= 10);
    assert!(registry.refused_trips() > 0);
    assert!(registry.untracked() > 0);
    assert_eq!(registry.snapshots().count(), registry.len());
}

#[test]
fn open_cap_as_a_fraction_of_tracked() {
    let registry = Registry::<u64>::builder(consecutive(1))
        .max_open(MaxOpen::Fraction(0.1))
        .build()
        .unwrap();
    let hs: Vec<_> = (0..100u64).map(|k| registry.handle(&k)).collect();
    for h in &hs {
        h.try_acquire().unwrap().success(); // real upstreams: seen working
        h.try_acquire().unwrap().failure();
    }
    assert_eq!(registry.open_count(), 10);
    assert_eq!(registry.refused_trips(), 90);
}

#[test]
fn the_open_cap_counts_only_upstreams_seen_succeeding() {
    let registry = Registry::<u64>::builder(consecutive(1))
        .max_open(MaxOpen::Count(5))
        .build()
        .unwrap();
    // Junk that never worked: every one opens (and is rejected from then
    // on), none takes a slot of the cap.
    for k in 0..50u64 {
        registry.handle(&k).try_acquire().unwrap().failure();
    }
    assert_eq!((registry.open_count(), registry.refused_trips()), (50, 0));
    // A real upstream that fails is still ejected, within the cap.
    let real = registry.handle(&1000);
    real.try_acquire().unwrap().success();
    real.try_acquire().unwrap().failure();
    assert_eq!(real.state(), State::Open);
    // Five real ones fill the cap; the sixth is refused.
    for k in 1001..1005u64 {
        let h = registry.handle(&k);
        h.try_acquire().unwrap().success();
        h.try_acquire().unwrap().failure();
        assert_eq!(h.state(), State::Open);
    }
    let sixth = registry.handle(&1005);
    sixth.try_acquire().unwrap().success();
    sixth.try_acquire().unwrap().failure();
    assert_eq!(sixth.state(), State::Closed);
    assert_eq!(registry.refused_trips(), 1);
}

#[test]
fn config_errors_name_the_field() {
    let err = |b: failfast::RegistryBuilder<u64>| b.build().unwrap_err().field();
    assert_eq!(
        err(Registry::builder(consecutive(1)).capacity(0)),
        "capacity"
    );
    assert_eq!(
        err(Registry::builder(consecutive(1)).idle_ttl(Duration::ZERO)),
        "idle_ttl"
    );
    assert_eq!(
        err(Registry::builder(consecutive(1)).max_open(MaxOpen::Fraction(1.5))),
        "max_open"
    );
    assert_eq!(
        err(Registry::builder(consecutive(1)).max_open(MaxOpen::Count(0))),
        "max_open"
    );
    assert_eq!(err(Registry::builder(consecutive(1)).shards(3)), "shards");
    assert_eq!(
        err(Registry::builder(consecutive(0))),
        "consecutive_failures"
    );
    assert_eq!(
        err(Registry::<u64>::builder(consecutive(1))
            .override_key(1, Breaker::builder().failure_rate(2.0))),
        "failure_rate"
    );
}

#[test]
fn handles_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Handle<String>>();
    assert_send_sync::<Registry<String>>();
}
