//! The registry: finding an existing host's breaker among 10k, 100k and 1M,
//! and inserting a new host, against a plain `DashMap` of the same payload
//! with the same hasher (std's keyed SipHash `RandomState`, both defaults).
//!
//! Keys are host:port strings of 21–25 bytes, looked up in a shuffled order
//! (a fixed-seed LCG) so each lookup misses the caches a real proxy misses.
//! `with` runs a closure on the borrowed breaker (one shard read lock, no
//! clone); `handle` clones the entry's `Arc` (what a caller does once per
//! upstream, not per request); `handle_hostkey` is `handle` on a registry of
//! [`HostKey`]s, whose bytes sit in the entry (what `KeyedLayer` looks up per
//! request); the DashMap baseline is `get` + the same closure. The per-request cost on a kept handle is `closed/*`.

use std::collections::hash_map::RandomState;
use std::hint::black_box;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use dashmap::DashMap;
use failfast::registry::HostKey;
use failfast::{Breaker, Builder, Registry, State};

fn template() -> Builder {
    Breaker::builder().consecutive_failures(5)
}

fn host(i: u64) -> String {
    format!("host-{i}.example.com:443")
}

/// A fixed pseudo-random order over `0..n`, `len` lookups long.
fn order(n: u64, len: usize) -> Vec<String> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            host((x >> 33) % n)
        })
        .collect()
}

/// 4096 keys in [`order`], handed out round and round.
struct Lookups {
    keys: Vec<String>,
    i: usize,
}

impl Lookups {
    fn over(n: u64) -> Lookups {
        Lookups {
            keys: order(n, 4096),
            i: 0,
        }
    }

    fn next(&mut self) -> &str {
        self.i = (self.i + 1) & 4095;
        &self.keys[self.i]
    }
}

/// Times `handle` on `iters` keys never seen before, `next` onwards (the
/// keys are built outside the timing).
fn time_new_keys(iters: u64, next: &mut u64, mut handle: impl FnMut(&str)) -> Duration {
    let keys: Vec<String> = (0..iters).map(|k| host(*next + k)).collect();
    *next += iters;
    let start = Instant::now();
    for k in &keys {
        handle(k);
    }
    start.elapsed()
}

/// The DashMap insert baseline's payload: the bytes of a breaker, without
/// the config validation and `Arc` a standalone `Breaker::build` adds (the
/// registry stamps its breakers from one shared, pre-validated template).
struct Payload(#[allow(dead_code)] [AtomicU64; std::mem::size_of::<Breaker>() / 8]); // only its size matters

pub fn bench(c: &mut Criterion) {
    assert_eq!(
        std::mem::size_of::<Payload>(),
        std::mem::size_of::<Breaker>()
    );
    let mut g = c.benchmark_group("registry");
    for n in [10_000u64, 100_000, 1_000_000] {
        let registry: Registry<String> = Registry::builder(template()).build().unwrap();
        let hosts: Registry<HostKey> = Registry::builder(template()).build().unwrap();
        let map: DashMap<String, Breaker, RandomState> = DashMap::with_hasher(RandomState::new());
        for i in 0..n {
            drop(registry.get_or_insert(host(i)));
            drop(hosts.handle_from(host(i).as_str()));
            map.insert(host(i), template().build().unwrap());
        }
        let mut keys = Lookups::over(n);
        g.bench_with_input(BenchmarkId::new("with", n), &n, |b, _| {
            b.iter(|| registry.with(keys.next(), |b| black_box(b.state())))
        });
        g.bench_with_input(BenchmarkId::new("handle", n), &n, |b, _| {
            b.iter(|| black_box(registry.handle(keys.next())))
        });
        g.bench_with_input(BenchmarkId::new("handle_hostkey", n), &n, |b, _| {
            b.iter(|| black_box(hosts.handle_from(keys.next())))
        });
        g.bench_with_input(BenchmarkId::new("dashmap_get", n), &n, |b, _| {
            b.iter(|| map.get(keys.next()).map(|b| black_box(b.state())))
        });
        assert_eq!((registry.len(), hosts.len()), (n as usize, n as usize));
        assert_eq!(
            registry.with("host-0.example.com:443", |b| b.state()),
            State::Closed
        );
    }

    // Inserting new keys: into a registry / map that already holds 100k.
    let registry: Registry<String> = Registry::builder(template()).build().unwrap();
    let map: DashMap<String, Payload, RandomState> = DashMap::with_hasher(RandomState::new());
    for i in 0..100_000 {
        drop(registry.get_or_insert(host(i)));
        map.insert(host(i), Payload(std::array::from_fn(|_| AtomicU64::new(0))));
    }
    let mut next_registry = 100_000u64;
    g.bench_function("get_or_insert_new/registry", |b| {
        b.iter_custom(|iters| {
            let keys: Vec<String> = (0..iters).map(|k| host(next_registry + k)).collect();
            next_registry += iters;
            let start = Instant::now();
            for k in keys {
                black_box(registry.get_or_insert(k));
            }
            start.elapsed()
        })
    });
    let mut next_map = 100_000u64;
    g.bench_function("get_or_insert_new/dashmap", |b| {
        b.iter_custom(|iters| {
            let keys: Vec<String> = (0..iters).map(|k| host(next_map + k)).collect();
            next_map += iters;
            let start = Instant::now();
            for k in keys {
                // The same miss-then-insert a registry does: `get` first, so
                // an existing key is never cloned; `entry` on the miss.
                if map.get(k.as_str()).is_none() {
                    black_box(
                        map.entry(k)
                            .or_insert_with(|| Payload(std::array::from_fn(|_| AtomicU64::new(0)))),
                    );
                }
            }
            start.elapsed()
        })
    });
    g.finish();
}

pub fn bench_str_keys(c: &mut Criterion) {
    let mut g = c.benchmark_group("registry_str");
    for n in [10_000u64, 100_000, 1_000_000] {
        let strings: Registry<String> = Registry::builder(template()).build().unwrap();
        let texts: Registry<str> = Registry::builder(template()).build().unwrap();
        let map: DashMap<String, Breaker, RandomState> = DashMap::with_hasher(RandomState::new());
        for i in 0..n {
            drop(strings.handle(host(i).as_str()));
            drop(texts.handle(host(i).as_str()));
            map.insert(host(i), template().build().unwrap());
        }
        let mut keys = Lookups::over(n);
        g.bench_with_input(BenchmarkId::new("handle_string", n), &n, |b, _| {
            b.iter(|| black_box(strings.handle(keys.next())))
        });
        g.bench_with_input(BenchmarkId::new("handle_str", n), &n, |b, _| {
            b.iter(|| black_box(texts.handle(keys.next())))
        });
        g.bench_with_input(BenchmarkId::new("dashmap_get", n), &n, |b, _| {
            b.iter(|| map.get(keys.next()).map(|b| black_box(b.state())))
        });
        assert_eq!((strings.len(), texts.len()), (n as usize, n as usize));
    }

    // Inserting new keys by `&str` into registries that already hold 100k.
    let strings: Registry<String> = Registry::builder(template()).build().unwrap();
    let texts: Registry<str> = Registry::builder(template()).build().unwrap();
    for i in 0..100_000 {
        drop(strings.handle(host(i).as_str()));
        drop(texts.handle(host(i).as_str()));
    }
    let mut next_string = 100_000u64;
    g.bench_function("insert_new/string", |b| {
        b.iter_custom(|iters| {
            time_new_keys(iters, &mut next_string, |k| {
                black_box(strings.handle(k));
            })
        })
    });
    let mut next_str = 100_000u64;
    g.bench_function("insert_new/str", |b| {
        b.iter_custom(|iters| {
            time_new_keys(iters, &mut next_str, |k| {
                black_box(texts.handle(k));
            })
        })
    });
    g.finish();
}
