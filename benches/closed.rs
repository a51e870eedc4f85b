//! failfast in CLOSED: an admitted, successful call per policy; a failure.
//!
//! `permit` reads the clock inside the breaker where the policy needs it;
//! `permit_at` passes a time in (a proxy reading its clock once per tick).
//! For the time window the passed time advances 1 µs per call, as a real
//! clock would under load, so buckets rotate as they do in production.

use std::hint::black_box;
use std::time::Duration;

use criterion::Criterion;
use failfast::{Breaker, Nanos};

use crate::adapters::{
    ff_consecutive, ff_consecutive_slow, ff_count, ff_count_slow, ff_time, ff_time_slow, work,
};

/// Admitted + success through the permit API, clock read inside.
fn permit(b: &Breaker) -> Option<u64> {
    let p = b.try_acquire().ok()?;
    let r = work().ok();
    let _ = p.success();
    r
}

/// Admitted + success with the time passed in.
fn permit_at(b: &Breaker, now: Nanos) -> Option<u64> {
    let p = b.try_acquire_at(now).ok()?;
    let r = work().ok();
    let _ = p.success_at(now);
    r
}

pub fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("closed");
    type Make = fn() -> Breaker;
    let policies: [(&str, Make, bool); 6] = [
        ("consecutive", ff_consecutive, false),
        ("count", ff_count, false),
        ("time", ff_time, true),
        ("consecutive+slow", ff_consecutive_slow, false),
        ("count+slow", ff_count_slow, false),
        ("time+slow", ff_time_slow, true),
    ];
    for (name, make, advancing) in policies {
        let b = make();
        g.bench_function(format!("{name}/permit"), |bn| {
            bn.iter(|| black_box(permit(black_box(&b))))
        });
        let b = make();
        let mut now = b.now();
        let step = if advancing {
            Duration::from_micros(1)
        } else {
            Duration::ZERO
        };
        g.bench_function(format!("{name}/permit_at"), |bn| {
            bn.iter(|| {
                now += step;
                black_box(permit_at(black_box(&b), now))
            })
        });
    }

    // The `call` wrapper and the owned permit, consecutive and count window.
    for (name, make) in [
        ("consecutive", ff_consecutive as fn() -> Breaker),
        ("count", ff_count),
    ] {
        let b = make();
        g.bench_function(format!("{name}/call"), |bn| {
            bn.iter(|| black_box(black_box(&b).call(work)))
        });
        let b = std::sync::Arc::new(make());
        g.bench_function(format!("{name}/owned_permit"), |bn| {
            bn.iter(|| {
                let p = black_box(&b).try_acquire_owned().ok()?;
                let r = work().ok();
                let _ = p.success();
                black_box(r)
            })
        });
    }

    // A failure recorded (and not tripping). Consecutive: a run of failures
    // that never reaches K (a success every 1024 calls ends it); count window:
    // a failing dependency (one success in 64 keeps the rate under 100%).
    let b = Breaker::builder()
        .consecutive_failures(2000)
        .build()
        .unwrap();
    let mut i = 0u32;
    g.bench_function("consecutive/failure", |bn| {
        bn.iter(|| {
            i = i.wrapping_add(1);
            let p = black_box(&b).try_acquire().ok()?;
            black_box(if i.is_multiple_of(1024) {
                p.success()
            } else {
                p.failure()
            });
            Some(())
        })
    });
    let b = Breaker::builder()
        .failure_rate(1.0)
        .count_window(100)
        .build()
        .unwrap();
    let mut i = 0u32;
    g.bench_function("count/failure", |bn| {
        bn.iter(|| {
            i = i.wrapping_add(1);
            let p = black_box(&b).try_acquire().ok()?;
            black_box(if i.is_multiple_of(64) {
                p.success()
            } else {
                p.failure()
            });
            Some(())
        })
    });
    g.finish();
}
