//! Two threads: on one shared breaker, and each on its own breaker; and
//! `FAILFAST_BENCH_THREADS` threads (default 2) through a registry to one
//! hot host or each to its own (the `keyed` rows).
//!
//! `iter_custom`: two threads wait on a barrier, each makes `iters` calls,
//! and the time from the start barrier to the end barrier is reported, so
//! the figure is nanoseconds per call *per thread* (both run at once). The
//! same closure on one thread is the reference. Every breaker is driven
//! through its `call` wrapper; failsafe and recloser are shared the same
//! way. On a 2-core machine shared with other jobs the second thread may
//! not get a core of its own: read these as an upper bound on the
//! contention cost.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::Criterion;
use crossbeam_utils::CachePadded;
use failfast::registry::HostKey;
use failfast::{Breaker, Registry};

use crate::adapters::{self, ff_consecutive, ff_count, work};

/// Runs `op(target)` `iters` times on each thread, one thread per target,
/// all at once; returns the wall time.
fn threads<T: Sync>(iters: u64, targets: &[&T], op: impl Fn(&T) + Sync) -> Duration {
    let barrier = Barrier::new(targets.len() + 1);
    std::thread::scope(|s| {
        for t in targets {
            let (barrier, op) = (&barrier, &op);
            s.spawn(move || {
                barrier.wait();
                for _ in 0..iters {
                    op(t);
                }
                barrier.wait();
            });
        }
        barrier.wait();
        let start = Instant::now();
        barrier.wait();
        start.elapsed()
    })
}

/// One successful call through failfast's `call` wrapper.
fn success(b: &Breaker) {
    let _ = black_box(b.call(work));
}

pub fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("contended");
    for (policy, make) in [
        ("consecutive", ff_consecutive as fn() -> Breaker),
        ("count", ff_count),
    ] {
        let one = make();
        let (a, b) = (CachePadded::new(make()), CachePadded::new(make()));
        g.bench_function(format!("{policy}/1_thread"), |bn| {
            bn.iter_custom(|iters| threads(iters, &[&one], success))
        });
        g.bench_function(format!("{policy}/2_threads_shared"), |bn| {
            bn.iter_custom(|iters| threads(iters, &[&one, &one], success))
        });
        g.bench_function(format!("{policy}/2_threads_separate"), |bn| {
            bn.iter_custom(|iters| threads(iters, &[&*a, &*b], success))
        });
    }
    // Peers through their `call`, shared by both threads as a proxy would.
    let fs = adapters::failsafe_consecutive().0;
    let (fs_a, fs_b) = (
        adapters::failsafe_consecutive().0,
        adapters::failsafe_consecutive().0,
    );
    let fs_call = |cb: &_| {
        let _ = black_box(failsafe::CircuitBreaker::call(cb, work));
    };
    g.bench_function("failsafe_consecutive/1_thread", |bn| {
        bn.iter_custom(|iters| threads(iters, &[&fs], fs_call))
    });
    g.bench_function("failsafe_consecutive/2_threads_shared", |bn| {
        bn.iter_custom(|iters| threads(iters, &[&fs, &fs], fs_call))
    });
    g.bench_function("failsafe_consecutive/2_threads_separate", |bn| {
        bn.iter_custom(|iters| threads(iters, &[&fs_a, &fs_b], fs_call))
    });
    let rc = adapters::recloser().0;
    let rc_call = |r: &recloser::Recloser| {
        let _ = black_box(r.call(work));
    };
    g.bench_function("recloser/1_thread", |bn| {
        bn.iter_custom(|iters| threads(iters, &[&rc], rc_call))
    });
    g.bench_function("recloser/2_threads_shared", |bn| {
        bn.iter_custom(|iters| threads(iters, &[&rc, &rc], rc_call))
    });

    keyed(&mut g);

    // The floor: one fetch_add per call, on a shared word and on two words.
    let one = CachePadded::new(AtomicU64::new(0));
    let two = [
        CachePadded::new(AtomicU64::new(0)),
        CachePadded::new(AtomicU64::new(0)),
    ];
    let add = |w: &CachePadded<AtomicU64>| {
        black_box(w.fetch_add(1, Ordering::Relaxed));
    };
    g.bench_function("fetch_add/1_thread", |bn| {
        bn.iter_custom(|iters| threads(iters, &[&one], add))
    });
    g.bench_function("fetch_add/2_threads_shared", |bn| {
        bn.iter_custom(|iters| threads(iters, &[&one, &one], add))
    });
    g.bench_function("fetch_add/2_threads_separate", |bn| {
        bn.iter_custom(|iters| threads(iters, &[&two[0], &two[1]], add))
    });
    g.finish();
}

/// How many threads the keyed rows run: `FAILFAST_BENCH_THREADS` (default
/// 2), so the same rows run at 16 or 64 threads on a bigger machine.
fn thread_count() -> usize {
    std::env::var("FAILFAST_BENCH_THREADS")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(2)
}

/// The hot host every thread of a `shared` row asks for.
const HOT: &str = "hot.example.com:443";

/// What a proxy does per request to a known host, without the tower layer
/// around it: look the key up, admit, record a success. `key` names the host.
fn keyed_success(r: &(&Registry<HostKey>, &'static str)) {
    let (registry, key) = *r;
    let upstream = registry.handle_from(black_box(key));
    let settled = upstream.try_acquire().map(|permit| permit.success());
    black_box(settled.is_ok());
}

/// A registry of 10k hosts (the hot one among them), with or without a
/// transition hook.
fn hosts(hooked: bool) -> Registry<HostKey> {
    let registry = Registry::<HostKey>::builder(Breaker::builder().consecutive_failures(5))
        .build()
        .expect("valid");
    if hooked {
        registry.on_transition(|_: &str, t: &failfast::Transition| {
            black_box(t);
        });
    }
    for i in 0..10_000 {
        let _ = registry.handle_from(format!("host-{i}.example.com:443").as_str());
    }
    let _ = registry.handle_from(HOT);
    registry
}

/// The keyed rows (issue 26): `keyed[_hooked]/1_thread`, and
/// `/{n}_threads_shared` (every thread on the hot host) and
/// `/{n}_threads_separate` (each thread on a host of its own).
fn keyed(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    let n = thread_count();
    let own: Vec<&'static str> = (0..n)
        .map(|i| &*Box::leak(format!("own-{i}.example.com:443").into_boxed_str()))
        .collect();
    for (name, hooked) in [("keyed", false), ("keyed_hooked", true)] {
        let registry = hosts(hooked);
        let hot = (&registry, HOT);
        let separate: Vec<_> = own.iter().map(|k| (&registry, *k)).collect();
        g.bench_function(format!("{name}/1_thread"), |bn| {
            bn.iter_custom(|iters| threads(iters, &[&hot], keyed_success))
        });
        let shared: Vec<_> = (0..n).map(|_| &hot).collect();
        g.bench_function(format!("{name}/{n}_threads_shared"), |bn| {
            bn.iter_custom(|iters| threads(iters, &shared, keyed_success))
        });
        let separate: Vec<_> = separate.iter().collect();
        g.bench_function(format!("{name}/{n}_threads_separate"), |bn| {
            bn.iter_custom(|iters| threads(iters, &separate, keyed_success))
        });
    }
}
