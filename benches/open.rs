//! failfast in OPEN: a rejected call, per clock and per API.

use std::hint::black_box;

use criterion::Criterion;
use failfast::{Breaker, Clock, ManualClock, StdClock};

use crate::adapters::{ff_consecutive, ff_consecutive_on, trip, work, Failfast};

fn tripped<C: Clock>(b: Breaker<C>) -> Breaker<C> {
    let mut g = Failfast(b);
    trip(&mut g);
    g.0
}

pub fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("open");
    let b = tripped(ff_consecutive());
    g.bench_function("quanta/try_acquire", |bn| {
        bn.iter(|| black_box(black_box(&b).try_acquire().is_err()))
    });
    g.bench_function("quanta/call", |bn| {
        bn.iter(|| black_box(black_box(&b).call(work).is_err()))
    });
    let now = b.now();
    g.bench_function("quanta/try_acquire_at", |bn| {
        bn.iter(|| black_box(black_box(&b).try_acquire_at(now).is_err()))
    });
    let b = tripped(ff_consecutive_on(StdClock::new()));
    g.bench_function("std/try_acquire", |bn| {
        bn.iter(|| black_box(black_box(&b).try_acquire().is_err()))
    });
    #[cfg(feature = "coarse-clock")]
    {
        let b = tripped(ff_consecutive_on(failfast::CoarseClock::new()));
        g.bench_function("coarse/try_acquire", |bn| {
            bn.iter(|| black_box(black_box(&b).try_acquire().is_err()))
        });
        g.bench_function("coarse/call", |bn| {
            bn.iter(|| black_box(black_box(&b).call(work).is_err()))
        });
    }
    let b = tripped(ff_consecutive_on(ManualClock::new()));
    g.bench_function("manual/try_acquire", |bn| {
        bn.iter(|| black_box(black_box(&b).try_acquire().is_err()))
    });
    let b = tripped(ff_consecutive());
    b.force_open();
    g.bench_function("forced_open/try_acquire", |bn| {
        bn.iter(|| black_box(black_box(&b).try_acquire().is_err()))
    });
    g.finish();
}
