//! S6 ★ Ten thousand breakers, zero threads.
//!
//! One breaker per upstream host in a [`Registry`], created on the host's
//! first request. The demo reads the process's thread count and resident
//! memory from `/proc/self/status` before and after, and shows recovery
//! happening lazily: no timer moves an open breaker; the first request after
//! the open time does.

use std::collections::hash_map::RandomState;
use std::fmt::Write;
use std::time::{Duration, Instant};

use failfast::{Breaker, Clock, ManualClock, Registry, State};

use crate::table::{int, title, Table};

type Hosts = Registry<String, RandomState, ManualClock>;

/// The registry of S6: threshold 1 failure, open one minute.
fn registry(clock: &ManualClock) -> Hosts {
    Registry::<String>::builder(
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_secs(60)),
    )
    .build_with_clock(clock.clone())
    .expect("valid configuration")
}

fn host(i: usize) -> String {
    format!("h{i}.example.com:443")
}

/// A field of `/proc/self/status` (`Threads:`, or `VmRSS:` in kB), if readable.
fn proc_status(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let rest = status.lines().find_map(|l| l.strip_prefix(field))?;
    rest.split_whitespace().next()?.parse().ok()
}

struct Fleet {
    hosts: usize,
    tracked: usize,
    created_in: Duration,
    threads_before: Option<u64>,
    threads_after: Option<u64>,
    rss_growth: Option<u64>,
    memory_bytes: usize,
}

/// Sends one successful request to each of `n` hosts: each creates its breaker.
fn fleet(n: usize, clock: &ManualClock) -> (Fleet, Hosts) {
    let threads_before = proc_status("Threads:");
    let rss_before = proc_status("VmRSS:");
    let started = Instant::now();
    let hosts = registry(clock);
    let mut name = String::with_capacity(32);
    for i in 0..n {
        name.clear();
        let _ = write!(name, "h{i}.example.com:443");
        hosts.with(name.as_str(), |b| {
            if let Ok(permit) = b.try_acquire() {
                let _ = permit.success();
            }
        });
    }
    let created_in = started.elapsed();
    let rss_after = proc_status("VmRSS:");
    let fleet = Fleet {
        hosts: n,
        tracked: hosts.len(),
        created_in,
        threads_before,
        threads_after: proc_status("Threads:"),
        rss_growth: rss_before
            .zip(rss_after)
            .map(|(b, a)| a.saturating_sub(b) * 1024),
        memory_bytes: hosts.with(host(0).as_str(), Breaker::memory_bytes),
    };
    (fleet, hosts)
}

pub fn show(big: usize) {
    title("S6 ★ Ten thousand breakers, zero threads");
    println!("  One breaker per upstream host in a Registry, created on the host's first request");
    println!("  (one successful call each; keys like \"h4242.example.com:443\").");
    println!();
    let clock = ManualClock::new();
    let (small, hosts) = fleet(10_000, &clock);
    let mut fleets = vec![small];
    if big > 10_000 {
        fleets.push(fleet(big, &ManualClock::new()).0); // dropped at once
    }
    let mut header = vec![String::new()];
    header.extend(
        fleets
            .iter()
            .map(|f| format!("{} hosts", int(f.hosts as u64))),
    );
    let mut t = Table::new(&header);
    let opt = |v: Option<u64>| v.map_or("n/a".to_string(), int);
    let mut row = |label: &str, f: &dyn Fn(&Fleet) -> String| {
        let mut cells = vec![label.to_string()];
        cells.extend(fleets.iter().map(f));
        t.row(&cells);
    };
    row("breakers tracked by the registry", &|f| {
        int(f.tracked as u64)
    });
    row("process threads before → after", &|f| {
        format!("{} → {}", opt(f.threads_before), opt(f.threads_after))
    });
    row("wall time to create them all", &|f| {
        format!("{:.0} ms", f.created_in.as_secs_f64() * 1e3)
    });
    row("bytes per breaker (Breaker::memory_bytes)", &|f| {
        format!("{} B", f.memory_bytes)
    });
    row("resident memory growth per host (key + entry)", &|f| {
        f.rss_growth
            .map_or("n/a".into(), |g| format!("{} B", g / f.hosts as u64))
    });
    t.print();

    println!();
    println!("  Lazy recovery (threshold 1 failure, open 1 min), one host among 10,000:");
    recovery(&hosts, &clock);
    println!(
        "    the other {} hosts: {} closed; threads now: {}",
        int(9_999u64),
        int(hosts.count_in(State::Closed) as u64 - 1),
        proc_status("Threads:").map_or("n/a".into(), int)
    );
}

/// Trips one host, moves the clock past its open time, and lets a request find out.
fn recovery(hosts: &Hosts, clock: &ManualClock) {
    let h = hosts.handle(host(4242).as_str());
    let step = |what: &str| {
        let snap = h.snapshot();
        let retry = snap.retry_after.map_or(String::new(), |r| {
            format!(", probe allowed in {} s", r.as_secs())
        });
        println!(
            "    t = {:>5}  {:<44} {:<10} registry: {} open, {} half-open{}",
            format!("{} s", clock.now().as_duration().as_secs()),
            what,
            snap.state.as_str().to_uppercase(),
            hosts.open_count(),
            hosts.half_open_count(),
            retry
        );
    };
    if let Ok(permit) = h.try_acquire() {
        let _ = permit.failure();
    }
    step("1 failure (say, connection refused)");
    step(if h.try_acquire().is_err() {
        "next request rejected without running"
    } else {
        "next request ADMITTED (unexpected)"
    });
    clock.advance(Duration::from_secs(120));
    step("clock moved 2 min: no timer, nothing ran");
    match h.try_acquire() {
        Ok(probe) => {
            step(if probe.is_probe() {
                "next request is admitted as the probe"
            } else {
                "next request admitted, NOT as the probe (unexpected)"
            });
            let _ = probe.success();
        }
        Err(_) => step("next request rejected (unexpected)"),
    }
    step("the probe succeeds");
}
