//! The callgrind driver: `callgrind <impl> <closed|open> <N>` makes N calls
//! through one breaker and exits; `callgrind.sh` runs it under
//! `valgrind --tool=callgrind` for N = 0 and N = 10⁶ and prints
//! (Ir(N) − Ir(0)) / N, the instructions per call with setup subtracted.
//!
//! `<impl>` is a name from `adapters::PEERS`, a failfast policy variant
//! (`ff_*`, permit API), a request through the keyed tower layer
//! (`ff_keyed*`, built with `--features tower`), or a floor (`floor_*`).
//! `callgrind list` prints them.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use failfast::{Breaker, Nanos, RetryBudget, StdClock};

mod adapters;
mod sharing;

use adapters::{
    ff_consecutive, ff_consecutive_on, ff_consecutive_slow, ff_count, ff_count_slow, ff_time,
    ff_time_slow, trip, with_peer, work, Failfast, Guard, WithGuard, PEERS,
};

const VARIANTS: [&str; 20] = [
    "ff_consecutive_at",
    "ff_count",
    "ff_count_at",
    "ff_time",
    "ff_time_at",
    "ff_consecutive_slow",
    "ff_count_slow",
    "ff_time_slow",
    "ff_std",
    "ff_failure",
    "ff_ramp",
    "ff_pool_count",
    "ff_pool_slow",
    "ff_budget",
    "ff_budget_at",
    "ff_budget_tokens",
    "ff_budget_tokens_at",
    "ff_retry",
    "ff_retry_at",
    "ff_retry_tokens",
];
/// Requests through `KeyedLayer` over a held registry (feature `tower`): a
/// `Host` header normalised by `AuthorityKey`, looked up among 1000 tracked
/// hosts, a consecutive-failures breaker, a no-op inner service that hands
/// the request back (so no request is built inside the measured loop).
/// `ff_keyed`: `HostKey` keys; `ff_keyed_hook`: the same with a transition
/// hook set; `ff_keyed_outbox`: the hook that reports trips into a sharing
/// replica's outbox (`Outbox::hook`); `ff_keyed_authority`:
/// `http::uri::Authority` keys (one built per request). With `--features tracing`, `ff_keyed_traced`: `trace_calls` on
/// the current span with no subscriber; with `--features metrics`,
/// `ff_keyed_metrics`: `call_metrics` (histogram off) and
/// `ff_keyed_histogram` (histogram on), no recorder installed.
fn layers() -> Vec<&'static str> {
    let mut rows = Vec::new();
    if cfg!(feature = "tower") {
        rows.extend([
            "ff_keyed",
            "ff_keyed_hook",
            "ff_keyed_outbox",
            "ff_keyed_authority",
        ]);
        if cfg!(feature = "tracing") {
            rows.push("ff_keyed_traced");
        }
        if cfg!(feature = "metrics") {
            rows.extend(["ff_keyed_metrics", "ff_keyed_histogram"]);
        }
    }
    rows
}
/// Registry lookups and inserts (`Registry<String>`, 100k keys, std's
/// SipHash): `reg_with` runs `Breaker::state` on a borrowed lookup,
/// `reg_handle` clones and drops a handle, both over a fixed pseudo-random
/// order of 4096 keys; `reg_insert` inserts N new keys (built before).
const REGISTRY_ROWS: [&str; 3] = ["reg_with", "reg_handle", "reg_insert"];
/// A registry handle with trip sharing off and on (`sharing.rs`): the same
/// CLOSED success and OPEN rejection, the verdict's transition handed to an
/// outbox when on.
const SHARING: [&str; 2] = ["ff_handle", "ff_handle_sync"];
const FLOORS: [&str; 4] = [
    "floor_load",
    "floor_fetch_add",
    "floor_raw_2loads",
    "floor_cas",
];

/// The measured section: `callgrind.sh` collects only inside this function
/// (`--toggle-collect`), so setup (quanta's calibration, building and
/// tripping breakers) is not counted.
#[inline(never)]
fn measured<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// N calls through the adapter.
struct Loop(u64);

impl WithGuard for Loop {
    type Out = u64;
    fn with<G: Guard>(self, _: &'static str, mut g: G) -> u64 {
        measured(|| {
            let mut ran = 0;
            for _ in 0..self.0 {
                ran += u64::from(black_box(g.run(work)).is_some());
            }
            ran
        })
    }
}

/// N admitted successes through the permit API, time read inside or passed.
fn permits(b: &Breaker, n: u64, at: bool, step: u64) -> u64 {
    let start = b.now();
    measured(move || {
        let mut now = start;
        let mut ran = 0;
        for _ in 0..n {
            let p = if at {
                now = Nanos::from_nanos(now.as_nanos() + step);
                black_box(&b).try_acquire_at(now)
            } else {
                black_box(&b).try_acquire()
            };
            let Ok(p) = p else { continue };
            ran += u64::from(work().is_ok());
            let _ = if at { p.success_at(now) } else { p.success() };
        }
        ran
    })
}

/// `ff_consecutive_slow`'s breaker with a retry budget.
fn ff_budget(budget: RetryBudget) -> Breaker {
    Breaker::builder()
        .consecutive_failures(5)
        .slow_call_threshold(std::time::Duration::from_secs(1))
        .open_duration(adapters::LONG)
        .retry_budget(budget)
        .build()
        .unwrap()
}

/// `ff_count`'s breaker with Finagle's retry budget.
fn ff_count_budget() -> Breaker {
    ff_count_budget_with(RetryBudget::finagle())
}

/// `ff_count`'s breaker with a retry budget.
fn ff_count_budget_with(budget: RetryBudget) -> Breaker {
    Breaker::builder()
        .failure_rate(0.5)
        .count_window(100)
        .open_duration(adapters::LONG)
        .retry_budget(budget)
        .build()
        .unwrap()
}

/// A ratio budget whose reserve alone admits 600 000 retries.
const RESERVED: RetryBudget = RetryBudget::ratio(0.2, std::time::Duration::from_secs(60), 10_000);

/// N retries admitted (and their successes), time read inside or passed.
fn retries(b: &Breaker, n: u64, at: bool) -> u64 {
    let start = b.now();
    measured(move || {
        let mut ran = 0;
        for _ in 0..n {
            let p = if at {
                black_box(&b).try_retry_at(start)
            } else {
                black_box(&b).try_retry()
            };
            let Ok(p) = p else { continue };
            ran += u64::from(work().is_ok());
            let _ = if at { p.success_at(start) } else { p.success() };
        }
        ran
    })
}

/// N successes of one key's breaker in a registry pooled by `outliers`.
fn pooled(template: failfast::Builder, outliers: failfast::Outliers, n: u64) -> u64 {
    let registry = failfast::Registry::<u64>::builder(template)
        .outliers(outliers)
        .build()
        .unwrap();
    let handle = registry.handle(&7);
    permits(&handle, n, false, 0)
}

fn variant(name: &str, open: bool, n: u64) -> u64 {
    if open {
        return match name {
            // Rejections without a clock read: the caller passes the time.
            "ff_consecutive_at" => {
                let b = ff_consecutive();
                let mut g = Failfast(b);
                trip(&mut g);
                permits(&g.0, n, true, 0)
            }
            // Rejections on the std clock (the quanta one is `failfast`).
            "ff_std" => {
                let mut g = Failfast(ff_consecutive_on(StdClock::new()));
                trip(&mut g);
                Loop(n).with("ff_std", g)
            }
            _ => panic!("open variants: ff_consecutive_at, ff_std (others via PEERS)"),
        };
    }
    match name {
        "ff_consecutive_at" => permits(&ff_consecutive(), n, true, 0),
        "ff_count" => permits(&ff_count(), n, false, 0),
        "ff_count_at" => permits(&ff_count(), n, true, 0),
        "ff_time" => permits(&ff_time(), n, false, 0),
        "ff_time_at" => permits(&ff_time(), n, true, 1_000),
        "ff_consecutive_slow" => permits(&ff_consecutive_slow(), n, false, 0),
        "ff_count_slow" => permits(&ff_count_slow(), n, false, 0),
        "ff_time_slow" => permits(&ff_time_slow(), n, false, 0),
        "ff_std" => Loop(n).with("ff_std", Failfast(ff_consecutive_on(StdClock::new()))),
        // A success inside a ramp (slow start), clock read included: a
        // breaker tripped and recovered in the setup, ramping for a day with
        // a floor of 100 % so that every call is admitted and the row is
        // the admitted path alone (the share decided, the turn taken).
        "ff_ramp" => {
            let b = Breaker::builder()
                .consecutive_failures(1)
                .open_duration(std::time::Duration::from_millis(1))
                .ramp_curve(std::time::Duration::from_secs(86_400), 1.0, 1.0)
                .build()
                .unwrap();
            b.try_acquire().unwrap().failure();
            std::thread::sleep(std::time::Duration::from_millis(2));
            b.try_acquire().expect("the probe").success();
            assert_eq!(b.snapshot().ramp_fraction, Some(1.0), "ramping");
            permits(&b, n, false, 0)
        }
        // A success of a host in an outlier pool (issue 28): a registry's
        // breaker with `ff_count`'s configuration (count window 100) in the
        // registry's pool: the general path, the clock read at the verdict,
        // the tally's one `fetch_add`. Interval 10 s: the loop never rolls.
        "ff_pool_count" => pooled(
            Breaker::builder()
                .failure_rate(0.5)
                .count_window(100)
                .open_duration(adapters::LONG),
            failfast::Outliers::new(),
            n,
        ),
        // The same with `ff_consecutive_slow`'s configuration and the
        // latency rule on: every call timed, its slowness in the tally.
        "ff_pool_slow" => pooled(
            Breaker::builder()
                .consecutive_failures(5)
                .slow_call_threshold(std::time::Duration::from_secs(1))
                .open_duration(adapters::LONG),
            failfast::Outliers::new().slow_outliers(3.0, 0.1),
            n,
        ),
        // First tries with Finagle's retry budget: `ff_consecutive_slow`'s
        // breaker (its admission reads the clock anyway), each admission
        // depositing its share of a retry.
        "ff_budget" => permits(&ff_budget(RetryBudget::finagle()), n, false, 0),
        // `ff_count_at`'s breaker with Finagle's budget, the time passed in.
        "ff_budget_at" => permits(&ff_count_budget(), n, true, 0),
        // The same first tries with gRPC's token budget (a full bucket: a
        // success has nothing to give it).
        "ff_budget_tokens" => permits(&ff_budget(RetryBudget::grpc()), n, false, 0),
        "ff_budget_tokens_at" => permits(&ff_count_budget_with(RetryBudget::grpc()), n, true, 0),
        // Retries admitted with room, and their successes: `ff_budget`'s
        // breaker with a reserve of 600 000 retries (10 000/s over 60 s),
        // so N ≤ 600 000 (the row checks that every call ran).
        "ff_retry" => retries(&ff_budget(RESERVED), n, false),
        // The same on `ff_count_at`'s breaker, the time passed in.
        "ff_retry_at" => retries(&ff_count_budget_with(RESERVED), n, true),
        // Retries with gRPC's token budget, kept full by the successes.
        "ff_retry_tokens" => retries(&ff_budget(RetryBudget::grpc()), n, false),
        "ff_failure" => {
            let b = Breaker::builder()
                .consecutive_failures(2000)
                .build()
                .unwrap();
            measured(|| {
                let mut ran = 0;
                for i in 0..n {
                    let Ok(p) = black_box(&b).try_acquire() else {
                        continue;
                    };
                    ran += 1;
                    let _ = if i % 1024 == 1023 {
                        p.success()
                    } else {
                        p.failure()
                    };
                }
                ran
            })
        }
        _ => unreachable!(),
    }
}

#[cfg(feature = "tower")]
fn keyed(name: &str, n: u64) -> u64 {
    use std::convert::Infallible;
    use std::future::Future;
    use std::pin::pin;
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};

    use failfast::registry::HostKey;
    use failfast::tower::{FromAuthority, KeyedLayer};
    use failfast::Registry;
    use tower::{Layer, Service};

    /// One call to completion; the no-op inner service hands the request back.
    fn call<S>(svc: &mut S, req: http::Request<()>) -> Option<http::Request<()>>
    where
        S: Service<http::Request<()>, Response = http::Request<()>>,
    {
        let mut cx = Context::from_waker(Waker::noop());
        match pin!(svc.call(req)).poll(&mut cx) {
            Poll::Ready(Ok(req)) => Some(req),
            _ => None,
        }
    }

    fn run<K: FromAuthority + std::hash::Hash + Eq + Send + Sync + std::fmt::Display + 'static>(
        row: &str,
        n: u64,
    ) -> u64 {
        let hook = row == "ff_keyed_hook";
        let registry = Arc::new(
            Registry::<K>::builder(Breaker::builder().consecutive_failures(5))
                .build()
                .unwrap(),
        );
        let layer = KeyedLayer::new(registry.clone());
        let layer = if hook {
            layer.on_transition(|_: &str, t: &failfast::Transition| {
                black_box(t);
            })
        } else {
            layer
        };
        // The sharing replica lives as long as the measured loop.
        let mut _replica = None;
        let layer = if row == "ff_keyed_outbox" {
            let outbox = Arc::new(failfast::share::Outbox::new(1024));
            _replica = Some(
                failfast::share::Replica::builder(registry.clone(), outbox.clone())
                    .origin("bench")
                    .build()
                    .unwrap(),
            );
            layer.on_transition(outbox.hook())
        } else {
            layer
        };
        #[cfg(feature = "tracing")]
        let layer = if row == "ff_keyed_traced" {
            layer.trace_calls(failfast::export::tracing::CallSpan::Current)
        } else {
            layer
        };
        #[cfg(feature = "metrics")]
        let layer = match row {
            "ff_keyed_metrics" => layer.call_metrics(failfast::export::metrics::CallMetrics::new()),
            "ff_keyed_histogram" => layer
                .call_metrics(failfast::export::metrics::CallMetrics::new().call_duration(true)),
            _ => layer,
        };
        let inner = tower::service_fn(|req: http::Request<()>| {
            std::future::ready(Ok::<_, Infallible>(req))
        });
        drive(layer.layer(inner), n)
    }

    /// 1000 hosts tracked through `svc`, then N requests to one of them.
    fn drive<S>(mut svc: S, n: u64) -> u64
    where
        S: Service<http::Request<()>, Response = http::Request<()>>,
    {
        let host = |i: u32| format!("host-{i}.example.com:443");
        for i in 0..1000 {
            let req = http::Request::get("/")
                .header("host", host(i))
                .body(())
                .unwrap();
            call(&mut svc, req).unwrap();
        }
        // A spelling that needs normalising: case, trailing dot.
        let mut slot = Some(
            http::Request::get("/v1")
                .header("host", "Host-500.Example.com.:443")
                .body(())
                .unwrap(),
        );
        measured(|| {
            let mut ran = 0;
            for _ in 0..n {
                let Some(req) = slot.take() else { break };
                slot = call(black_box(&mut svc), req);
                ran += u64::from(slot.is_some());
            }
            ran
        })
    }
    match name {
        "ff_keyed_authority" => run::<http::uri::Authority>(name, n),
        _ => run::<HostKey>(name, n),
    }
}

#[cfg(not(feature = "tower"))]
fn keyed(_: &str, _: u64) -> u64 {
    unreachable!("built without the tower feature: no ff_keyed rows")
}

fn sharing(name: &str, open: bool, n: u64) -> u64 {
    let s = sharing::Sharing::new(name == "ff_handle_sync", open);
    measured(|| {
        let mut ran = 0;
        for _ in 0..n {
            let Ok(p) = black_box(&s.handle).try_acquire() else {
                continue;
            };
            ran += u64::from(work().is_ok());
            s.report(p.success());
        }
        ran
    })
}

fn registry_row(name: &str, n: u64) -> u64 {
    use failfast::Registry;
    let host = |i: u64| format!("host-{i}.example.com:443");
    let registry: Registry<String> = Registry::builder(Breaker::builder().consecutive_failures(5))
        .build()
        .unwrap();
    for i in 0..100_000 {
        drop(registry.get_or_insert(host(i)));
    }
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let order: Vec<String> = (0..4096)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            host((x >> 33) % 100_000)
        })
        .collect();
    match name {
        "reg_with" => measured(|| {
            let mut ran = 0;
            for i in 0..n as usize {
                let key = black_box(order[i & 4095].as_str());
                ran += u64::from(registry.with(key, |b| b.state()) == failfast::State::Closed);
            }
            ran
        }),
        "reg_handle" => measured(|| {
            let mut ran = 0;
            for i in 0..n as usize {
                let h = registry.handle(black_box(order[i & 4095].as_str()));
                ran += u64::from(h.is_tracked());
            }
            ran
        }),
        "reg_insert" => {
            let keys: Vec<String> = (0..n).map(|i| host(100_000 + i)).collect();
            measured(|| {
                let mut ran = 0;
                for k in keys {
                    ran += u64::from(registry.get_or_insert(k).is_tracked());
                }
                ran
            })
        }
        _ => unreachable!(),
    }
}

fn floor(name: &str, n: u64) -> u64 {
    let (a, b) = (AtomicU64::new(0), AtomicU64::new(0));
    let clock = quanta::Clock::new();
    /// N rounds of `f`, the dispatch on the name hoisted out of the loop.
    fn rounds(n: u64, mut f: impl FnMut() -> u64) -> u64 {
        measured(|| {
            let mut acc = 0u64;
            for _ in 0..n {
                acc = acc.wrapping_add(f());
            }
            acc
        })
    }
    let load = || black_box(&a).load(Ordering::Acquire);
    match name {
        "floor_load" => rounds(n, || load() ^ work().unwrap_or(0)),
        "floor_fetch_add" => rounds(n, || {
            let s = load();
            let r = work().unwrap_or(0);
            black_box(&b).fetch_add(1, Ordering::Relaxed) ^ r ^ s
        }),
        "floor_cas" => rounds(n, || {
            let s = load();
            let r = work().unwrap_or(0);
            match black_box(&a).compare_exchange(s, s + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(v) | Err(v) => v ^ r,
            }
        }),
        "floor_raw_2loads" => rounds(n, || {
            let s = load();
            let t = black_box(&b).load(Ordering::Relaxed);
            black_box(&clock).raw().wrapping_sub(t) ^ s
        }),
        _ => unreachable!(),
    }
}

/// Bytes per breaker: `size_of` and `Breaker::memory_bytes` (struct plus
/// its window on the heap; the shared config is one per registry/template).
fn sizes() {
    use std::time::Duration;
    println!("| policy | size_of | memory_bytes |");
    println!("|---|---:|---:|");
    let rate = || Breaker::builder().failure_rate(0.5);
    let rows: [(&str, Breaker); 9] = [
        ("consecutive", ff_consecutive()),
        ("count window 32", rate().count_window(32).build().unwrap()),
        ("count window 100", ff_count()),
        (
            "count window 224",
            rate().count_window(224).build().unwrap(),
        ),
        (
            "count window 1000",
            rate().count_window(1000).build().unwrap(),
        ),
        (
            "time window, 7 buckets",
            rate()
                .time_window(Duration::from_secs(7), 7)
                .build()
                .unwrap(),
        ),
        ("time window, 10 buckets", ff_time()),
        (
            "time window, 60 buckets",
            rate()
                .time_window(Duration::from_secs(60), 60)
                .build()
                .unwrap(),
        ),
        (
            "consecutive + count_calls",
            Breaker::builder()
                .consecutive_failures(5)
                .count_calls(true)
                .build()
                .unwrap(),
        ),
    ];
    for (name, b) in rows {
        println!(
            "| {name} | {} | {} |",
            std::mem::size_of_val(&b),
            b.memory_bytes()
        );
    }
    println!();
    println!(
        "returned per verdict: Option<Transition> = {} B; per call(): Result<u64, CallError<u64>> = {} B",
        std::mem::size_of::<Option<failfast::Transition>>(),
        std::mem::size_of::<Result<u64, failfast::CallError<u64>>>()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes `--bench`: nothing to do without explicit arguments.
    if args.first().map(String::as_str) == Some("sizes") {
        sizes();
        return;
    }
    if args.first().map(String::as_str) == Some("list") {
        for n in PEERS
            .iter()
            .chain(&VARIANTS)
            .chain(&layers())
            .chain(&REGISTRY_ROWS)
            .chain(&SHARING)
            .chain(&FLOORS)
        {
            println!("{n}");
        }
        return;
    }
    let [name, state, n] = &args[..] else {
        eprintln!("usage: callgrind <impl> <closed|open> <N> | callgrind list");
        return;
    };
    let open = match state.as_str() {
        "closed" => false,
        "open" => true,
        s => panic!("state must be closed or open, not {s}"),
    };
    let n: u64 = n.parse().expect("N");
    let out = if PEERS.contains(&name.as_str()) {
        with_peer(name, open, Loop(n))
    } else if VARIANTS.contains(&name.as_str()) {
        variant(name, open, n)
    } else if layers().contains(&name.as_str()) {
        keyed(name, n)
    } else if REGISTRY_ROWS.contains(&name.as_str()) {
        registry_row(name, n)
    } else if SHARING.contains(&name.as_str()) {
        sharing(name, open, n)
    } else if FLOORS.contains(&name.as_str()) {
        floor(name, n)
    } else {
        panic!("unknown impl {name}: see `callgrind list`");
    };
    if !FLOORS.contains(&name.as_str()) {
        // Every call ran while closed; none while open.
        assert_eq!(
            out,
            if open { 0 } else { n },
            "{name} {state}: {out} of {n} calls ran"
        );
    }
    black_box(out);
}
