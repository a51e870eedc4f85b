//! failfast against its peers, every one through the same adapter on the same
//! wrapped function: a successful call in CLOSED, a rejection in OPEN.

use std::hint::black_box;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};

#[cfg(feature = "coarse-clock")]
use crate::adapters::{ff_consecutive_on, trip, Failfast};
use crate::adapters::{with_peer, work, Guard, WithGuard, PEERS};

struct Measure<'a, 'g> {
    group: &'a mut BenchmarkGroup<'g, WallTime>,
}

impl WithGuard for Measure<'_, '_> {
    type Out = ();
    fn with<G: Guard>(self, name: &'static str, mut g: G) {
        self.group
            .bench_function(name, |b| b.iter(|| black_box(g.run(work))));
    }
}

pub fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("peers_closed");
    for name in PEERS {
        with_peer(name, false, Measure { group: &mut group });
    }
    group.finish();

    let mut group = c.benchmark_group("peers_open");
    // failsafe's default policy has a jittered 5–10 s backoff: it would go
    // half-open during the run, so its rejection is measured with the
    // consecutive policy only (the rejection path does not touch the policy).
    for name in PEERS.into_iter().filter(|n| *n != "failsafe_default") {
        with_peer(name, true, Measure { group: &mut group });
    }
    // failfast on the kernel's coarse clock (feature `coarse-clock`): not in
    // `PEERS`, since callgrind cannot see the vDSO code its read runs.
    #[cfg(feature = "coarse-clock")]
    {
        let mut g = Failfast(ff_consecutive_on(failfast::CoarseClock::new()));
        trip(&mut g);
        Measure { group: &mut group }.with("failfast_coarse", g);
    }
    group.finish();
}
