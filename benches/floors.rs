//! Floors: what the machine charges for the pieces a breaker is made of.
//!
//! Each breaker path is compared with the floor it is built from: a bare call,
//! a call plus one atomic load (CLOSED, consecutive), a call plus one
//! `fetch_add` (CLOSED, window), one raw clock read plus two loads (OPEN).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::Criterion;

use crate::adapters::work;

pub fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("floors");
    let word = AtomicU64::new(0);
    let second = AtomicU64::new(0);
    let clock = quanta::Clock::new();

    g.bench_function("bare_call", |b| b.iter(|| black_box(work())));
    g.bench_function("load", |b| {
        b.iter(|| black_box(&word).load(Ordering::Acquire))
    });
    g.bench_function("fetch_add", |b| {
        b.iter(|| black_box(&word).fetch_add(1, Ordering::Relaxed))
    });
    g.bench_function("compare_exchange", |b| {
        let mut v = word.load(Ordering::Relaxed);
        b.iter(|| {
            let w = black_box(&word);
            match w.compare_exchange(v, v + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => v += 1,
                Err(actual) => v = actual,
            }
        })
    });
    g.bench_function("quanta_raw", |b| b.iter(|| black_box(&clock).raw()));
    g.bench_function("instant_now", |b| b.iter(std::time::Instant::now));
    // The coarse clock's read, through the `Clock` trait (feature
    // `coarse-clock`): the floor of a rejection on `CoarseClock`.
    #[cfg(feature = "coarse-clock")]
    {
        use failfast::Clock;
        let coarse = failfast::CoarseClock::new();
        g.bench_function("coarse_now", |b| b.iter(|| black_box(&coarse).now()));
    }

    // Composite floors: the least any breaker path could cost.
    g.bench_function("call+load", |b| {
        b.iter(|| {
            let s = black_box(&word).load(Ordering::Acquire);
            (black_box(s), work())
        })
    });
    g.bench_function("call+fetch_add", |b| {
        b.iter(|| {
            let s = black_box(&word).load(Ordering::Acquire);
            let r = work();
            black_box(&second).fetch_add(1, Ordering::Relaxed);
            (black_box(s), r)
        })
    });
    g.bench_function("raw+2loads", |b| {
        b.iter(|| {
            let s = black_box(&word).load(Ordering::Acquire);
            let t = black_box(&second).load(Ordering::Relaxed);
            let now = black_box(&clock).raw();
            black_box(now.wrapping_sub(t) ^ s)
        })
    });
    g.finish();
}
