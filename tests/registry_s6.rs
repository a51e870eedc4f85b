//! S6 end to end: ten thousand and a million breakers, created on first use,
//! with the process's thread count unchanged and memory per entry bounded.
//!
//! One test in this binary, so no other test's thread or allocation skews the
//! thread count or the resident-memory growth. Linux only: both are read from
//! `/proc/self`.
#![cfg(target_os = "linux")]

use std::time::{Duration, Instant};

use failfast::{Breaker, ManualClock, Registry, State};

fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("procfs");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("a Threads: line")
}

fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("procfs");
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("resident pages");
    pages * 4096
}

/// Creates `n` hosts on first use (a request each), returns RSS growth per entry.
fn create_hosts(
    n: usize,
    clock: &ManualClock,
) -> (
    Registry<String, std::collections::hash_map::RandomState, ManualClock>,
    f64,
) {
    let before = rss_bytes();
    let registry = Registry::<String>::builder(
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_secs(60)),
    )
    .capacity(n)
    .build_with_clock(clock.clone())
    .expect("valid config");
    let mut name = String::with_capacity(32);
    for i in 0..n {
        use std::fmt::Write;
        name.clear();
        let _ = write!(name, "h{i}.example.com:443");
        registry.with(name.as_str(), |b| {
            b.try_acquire().expect("closed").success()
        });
    }
    assert_eq!(registry.len(), n);
    assert_eq!(registry.untracked(), 0);
    let per_entry = (rss_bytes().saturating_sub(before)) as f64 / n as f64;
    (registry, per_entry)
}

/// The most resident memory a million `String`-keyed hosts (consecutive
/// policy) may add per entry: RSS growth over their creation, divided by
/// their number, in this test's build. Not the memory target (≤ 128 B per
/// host, measured in release by `examples/registry_memory.rs` and recorded
/// in benches/README.md) but twice it: room for a `String` key's own heap
/// chunk, the map's share and allocator noise, while an entry grown past
/// twice the target fails.
const MAX_BYTES_PER_ENTRY: f64 = 256.0;

#[test]
fn s6_ten_thousand_and_a_million_hosts_zero_threads_lazy_recovery() {
    let threads_before = threads();
    let clock = ManualClock::new();

    // 10,000 hosts: created on first use, then every other one trips.
    let (registry, per_entry) = create_hosts(10_000, &clock);
    println!("S6: 10,000 hosts, RSS growth {per_entry:.0} B/entry (debug build, String keys)");
    for i in (0..10_000).step_by(2) {
        let h = registry.handle(format!("h{i}.example.com:443").as_str());
        h.try_acquire().expect("closed").failure();
        assert_eq!(h.state(), State::Open);
    }
    assert_eq!(registry.open_count(), 5_000);
    // Lazy recovery: nothing happens until a request arrives, two minutes on.
    clock.advance(Duration::from_secs(120));
    assert_eq!(registry.open_count(), 5_000, "no timer closed anything");
    for i in (0..10_000).step_by(2) {
        let h = registry.handle(format!("h{i}.example.com:443").as_str());
        let probe = h.try_acquire().expect("the next request is the probe");
        assert!(probe.is_probe());
        probe.success();
        assert_eq!(h.state(), State::Closed);
    }
    assert_eq!((registry.open_count(), registry.half_open_count()), (0, 0));
    drop(registry);

    // 1,000,000 hosts.
    let started = Instant::now();
    let (registry, per_entry) = create_hosts(1_000_000, &clock);
    println!(
        "S6: 1,000,000 hosts in {:?}, RSS growth {per_entry:.0} B/entry (debug build, String keys; \
         release numbers: `cargo run --release --example registry_memory`)",
        started.elapsed()
    );
    assert_eq!(registry.shard_count(), 1250, "800 keys a shard at capacity");
    assert!(
        per_entry <= MAX_BYTES_PER_ENTRY,
        "{per_entry:.0} B/entry at 1,000,000 hosts, bound {MAX_BYTES_PER_ENTRY}"
    );
    assert_eq!(
        threads(),
        threads_before,
        "no thread started for any breaker"
    );
}
