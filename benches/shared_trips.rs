//! Sharing trips off and on (`sharing.rs`): a CLOSED success and an OPEN
//! rejection through a registry handle cost the same with a replica sharing
//! the registry's trips, its task running on another thread.

use std::hint::black_box;

use criterion::Criterion;

use crate::adapters::work;
use crate::sharing::Sharing;

pub fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("sync");
    for (name, on) in [("off", false), ("on", true)] {
        let mut s = Sharing::new(on, false);
        s.run_task();
        g.bench_function(format!("closed_success/{name}"), |bn| {
            bn.iter(|| {
                let Ok(permit) = black_box(&s.handle).try_acquire() else {
                    return false;
                };
                let ok = work().is_ok();
                s.report(permit.success());
                black_box(ok)
            })
        });
        drop(s);
        let mut s = Sharing::new(on, true);
        s.run_task();
        g.bench_function(format!("open_rejection/{name}"), |bn| {
            bn.iter(|| black_box(black_box(&s.handle).try_acquire().is_err()))
        });
    }
    g.finish();
}
