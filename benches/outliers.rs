//! Outlier pools (issue 28): what the request that pays an interval's work
//! costs, against an ordinary pooled call. Its target: "no request pays
//! more than 50 µs of the interval's work" (a benchmark row, not a timed
//! test; `tests/outliers_scale.rs` checks the detection itself).
//!
//! A pool here is a registry with outliers (`success_rate_request_volume(1)`
//! and `failure_percentage_request_volume(1)`, so every host reports both
//! words; minimum hosts 5; interval 10 s) over consecutive-policy hosts,
//! driven through kept handles with the time passed in (`try_acquire_at`,
//! `success_at`). Every host calls in every interval and succeeds, so the
//! figures exist and nobody is ejected. Each interval, in every pool, in
//! this order:
//!
//! 1. **`interval_work`**: host 0's first call of the interval. It rolls its
//!    tally (one CAS), adds its report to the sums of the interval it left
//!    (two 128-bit CASes), and, being the pool's first caller of the
//!    interval, seals the sums of the interval before (16 stripes, 32
//!    CASes), computes the figures (an `isqrt`), caches them (one CAS) and
//!    judges itself. The admission and the success are both in the row.
//! 2. **`count`**: host 0's second call: an ordinary pooled admission and
//!    success (the tally's `fetch_add`).
//! 3. **`roll_cached`**: host 1's first call: a roll that finds the figures
//!    cached (the tally's CAS, the two CASes of its report, the judgement).
//! 4. The other hosts' first calls, untimed.
//!
//! Rows 1–3 are timed as one block over 64 pools of 5 hosts (one `Instant`
//! pair per 64 requests), so the three compare like with like: the same
//! interval, the same cache state, ns per request. The rest of each
//! interval runs outside the timing (`iter_custom`).
//!
//! **`interval_work_alone/{5,10000,1000000}`**: row 1 in one pool of that
//! many hosts, one request per interval, timed alone (its `Instant` pair
//! included: see `timer`). Every other host's call of the interval runs
//! between two timed requests, untimed: at a million hosts that is enough
//! traffic to push the pool's words (and host 0's) out of every cache.
//! **`interval_work_cold/5`** is the 5-host pool with the caches emptied
//! before each interval (a 64 MiB buffer written through), to tell the
//! hosts' number from the caches' state: a seal reads 16 stripes whatever
//! the number of hosts that reported into them. After each of these rows
//! the spread of its single requests is printed (quantiles, the longest,
//! and how many took over 50 µs: on a shared guest, preemptions).

use std::collections::hash_map::RandomState;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode};
use failfast::{Breaker, Handle, ManualClock, Nanos, Outliers, Registry};

const INTERVAL: Duration = Duration::from_secs(10);

type Host = Handle<u64, ManualClock>;

/// One pool: a registry of `hosts` keys, and a handle to each.
struct Pool {
    hosts: Vec<Host>,
    registry: Registry<u64, RandomState, ManualClock>,
    /// The registry's clock, kept at the time passed to the calls.
    clock: ManualClock,
}

impl Pool {
    fn new(hosts: usize) -> Pool {
        let clock = ManualClock::new();
        let registry = Registry::<u64>::builder(
            Breaker::builder()
                .consecutive_failures(5)
                .open_duration(Duration::from_secs(3600)),
        )
        .capacity(hosts)
        .outliers(
            Outliers::new()
                .interval(INTERVAL)
                .success_rate_request_volume(1)
                .failure_percentage_request_volume(1)
                .success_rate_minimum_hosts(5),
        )
        .build_with_clock(clock.clone())
        .expect("valid configuration");
        let hosts = (0..hosts as u64).map(|k| registry.handle(&k)).collect();
        Pool {
            hosts,
            registry,
            clock,
        }
    }
}

/// A call admitted and successful at `now`: 1, or 0 if it was rejected.
#[inline(always)]
fn call(host: &Host, now: Nanos) -> u64 {
    match black_box(host).try_acquire_at(now) {
        Ok(p) => {
            let _ = p.success_at(now);
            1
        }
        Err(_) => 0,
    }
}

/// Which call of an interval a row times (see the module's docs).
#[derive(Copy, Clone, PartialEq, Eq)]
enum Step {
    /// Host 0's first call: the roll that seals and computes the figures.
    IntervalWork,
    /// Host 0's second call: an ordinary count.
    Count,
    /// Host 1's first call: a roll that finds the figures cached.
    RollCached,
}

/// Pools driven interval by interval.
struct Fleet {
    pools: Vec<Pool>,
    epoch: u64,
    /// Calls made and calls admitted: every call must be admitted.
    calls: u64,
    admitted: u64,
    /// The time of each request timed alone, in ns.
    alone: Vec<u32>,
    /// Written through before each interval, when set: the caches hold
    /// none of the pools' lines at its first call.
    evict: Option<Vec<u8>>,
}

impl Fleet {
    /// `pools` pools of `hosts` hosts, after three intervals of traffic:
    /// the figures exist, and the next interval's first roll finds an
    /// interval of every host's reports to seal.
    fn new(pools: usize, hosts: usize) -> Fleet {
        assert!(hosts >= 5, "the pools' minimum hosts");
        let mut fleet = Fleet {
            pools: (0..pools).map(|_| Pool::new(hosts)).collect(),
            epoch: 0,
            calls: 0,
            admitted: 0,
            alone: Vec::new(),
            evict: None,
        };
        for _ in 0..3 {
            fleet.interval(None);
        }
        for pool in &fleet.pools {
            let figures = &pool.registry.outlier_pools()[0];
            assert_eq!(figures.success_rate_threshold, Some(1.0), "computed");
            assert_eq!(figures.members, hosts as u64);
        }
        fleet
    }

    /// Runs the next interval; times `timed`'s call in its first `n` pools
    /// (one block) and returns that time.
    fn interval(&mut self, timed: Option<(Step, usize)>) -> Duration {
        self.epoch += 1;
        let now = Nanos::from_secs(INTERVAL.as_secs() * self.epoch) + Duration::from_millis(1);
        for pool in &self.pools {
            pool.clock.set(now);
        }
        if let Some(buffer) = &mut self.evict {
            for line in buffer.iter_mut().step_by(64) {
                *line = line.wrapping_add(1);
            }
            black_box(&buffer);
        }
        let hosts = self.pools[0].hosts.len();
        let steps = [
            (Some(Step::IntervalWork), 0),
            (Some(Step::Count), 0),
            (Some(Step::RollCached), 1),
        ]
        .into_iter()
        .chain((2..hosts).map(|h| (None, h)));
        let mut elapsed = Duration::ZERO;
        for (step, host) in steps {
            let n = match timed {
                Some((t, n)) if Some(t) == step => n,
                _ => 0,
            };
            let mut admitted = 0;
            if n > 0 {
                let start = Instant::now();
                for pool in &self.pools[..n] {
                    admitted += call(&pool.hosts[host], now);
                }
                elapsed = start.elapsed();
            }
            for pool in &self.pools[n..] {
                admitted += call(&pool.hosts[host], now);
            }
            self.admitted += admitted;
            self.calls += self.pools.len() as u64;
        }
        if timed.is_some_and(|(_, n)| n == 1) {
            self.alone
                .push(u32::try_from(elapsed.as_nanos()).unwrap_or(u32::MAX));
        }
        elapsed
    }

    /// The time of `iters` requests of `step`, a block of up to one per
    /// pool per interval.
    fn time(&mut self, step: Step, iters: u64) -> Duration {
        let per_interval = self.pools.len() as u64;
        let mut left = iters;
        let mut total = Duration::ZERO;
        while left > 0 {
            let n = left.min(per_interval);
            total += self.interval(Some((step, n as usize)));
            left -= n;
        }
        assert_eq!(self.admitted, self.calls, "every call admitted");
        total
    }
}

/// Twice the guest's 32 MiB L3: written through, it leaves none of the
/// pools' lines in any cache.
const EVICT_BYTES: usize = 64 << 20;

/// The spread of requests timed alone (ns): quantiles, the longest, and how
/// many took over 50 µs.
fn spread(mut ns: Vec<u32>) -> String {
    if ns.is_empty() {
        return "no request timed".into();
    }
    ns.sort_unstable();
    let q = |p: f64| ns[((ns.len() - 1) as f64 * p) as usize];
    format!(
        "{} requests timed alone: p50 {} ns, p99 {} ns, p99.9 {} ns, max {} ns; {} over 50 µs",
        ns.len(),
        q(0.5),
        q(0.99),
        q(0.999),
        ns[ns.len() - 1],
        ns.iter().filter(|&&t| t > 50_000).count()
    )
}

pub fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("outliers");
    let mut fleet = Fleet::new(64, 5);
    for (name, step) in [
        ("interval_work", Step::IntervalWork),
        ("count", Step::Count),
        ("roll_cached", Step::RollCached),
    ] {
        g.bench_function(name, |b| b.iter_custom(|iters| fleet.time(step, iters)));
    }
    drop(fleet);

    // The floor of a request timed alone: an empty `Instant` pair. Its
    // longest pairs are the guest's preemptions, which requests timed alone
    // see too.
    let (mut pairs, mut over, mut longest) = (0u64, 0u64, Duration::ZERO);
    g.bench_function("timer", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                let t = black_box(start).elapsed();
                over += u64::from(t > Duration::from_micros(50));
                longest = longest.max(t);
                total += t;
            }
            pairs += iters;
            total
        })
    });
    println!(
        "outliers/timer: {pairs} empty pairs: max {} ns; {over} over 50 µs",
        longest.as_nanos()
    );

    let rows = [
        ("interval_work_alone", 5, false),
        ("interval_work_alone", 10_000, false),
        ("interval_work_cold", 5, true),
        ("interval_work_alone", 1_000_000, false),
    ];
    for (name, hosts, cold) in rows {
        if hosts == 1_000_000 {
            // An interval of a million calls per iteration (≈ 0.1–0.3 s).
            g.sample_size(10).sampling_mode(SamplingMode::Flat);
        }
        let mut fleet = None;
        g.bench_function(BenchmarkId::new(name, hosts), |b| {
            let fleet = fleet.get_or_insert_with(|| {
                let mut f = Fleet::new(1, hosts);
                f.evict = cold.then(|| vec![0; EVICT_BYTES]);
                f
            });
            b.iter_custom(|iters| fleet.time(Step::IntervalWork, iters))
        });
        if let Some(f) = fleet {
            println!("outliers/{name}/{hosts}: {}", spread(f.alone));
        }
    }
    g.finish();
}
