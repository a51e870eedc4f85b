//! Registry measurements for `benches/README.md` ("Registry"):
//!
//! 1. memory per entry (RSS growth ÷ entries) at 1M host keys of up to 24
//!    bytes, for the consecutive, count-window and time-window policies, with
//!    `String` keys, as a `Registry<str>` (text kept as a `HostKey`: up to
//!    23 bytes inside the entry, which holds every key here but the 24-byte
//!    ones), with `HostKey` keys and with a 24-byte inline key — each in a
//!    fresh child process so no earlier heap skews it;
//! 2. the worst single lookup stall on another thread while 1M idle entries
//!    are swept shard by shard.
//!
//! Run: `cargo run --release --example registry_memory`

use std::fmt::Write as _;
use std::hash::Hash;
use std::process::Command;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use failfast::registry::HostKey;
use failfast::{Breaker, Builder, Clock, ManualClock, Registry};

const N: usize = 1_000_000;

fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("procfs");
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("resident pages");
    pages * 4096
}

fn policy(name: &str) -> Builder {
    let b = Breaker::builder().open_duration(Duration::from_secs(60));
    match name {
        "consecutive" => b.consecutive_failures(5),
        "count100" => b.failure_rate(0.5).count_window(100),
        "time10x1s" => b.failure_rate(0.5).time_window(Duration::from_secs(10), 10),
        other => panic!("unknown policy {other}"),
    }
}

/// A host name of up to 23 bytes stored inline: 24 bytes, no heap.
#[derive(Clone, PartialEq, Eq, Hash)]
struct InlineKey {
    len: u8,
    bytes: [u8; 23],
}

impl InlineKey {
    fn new(s: &str) -> InlineKey {
        let mut bytes = [0; 23];
        bytes[..s.len()].copy_from_slice(s.as_bytes());
        InlineKey {
            len: s.len() as u8,
            bytes,
        }
    }
}

fn host(i: usize, buf: &mut String) {
    buf.clear();
    let _ = write!(buf, "h{i}.example.com:443"); // 19–24 bytes
}

fn fill<K: Hash + Eq>(
    registry: &Registry<K, std::collections::hash_map::RandomState, ManualClock>,
    key: impl Fn(&str) -> K,
) {
    let mut buf = String::with_capacity(32);
    for i in 0..N {
        host(i, &mut buf);
        drop(registry.get_or_insert(key(&buf)));
    }
}

fn child(policy_name: &str, key: &str) {
    let before = rss_bytes();
    let registry_builder = Registry::builder(policy(policy_name)).capacity(N);
    match key {
        "string" => {
            let r = registry_builder
                .build_with_clock(ManualClock::new())
                .unwrap();
            fill(&r, |s| s.to_string());
            report(policy_name, key, before, r.len());
        }
        "str" => {
            let r = Registry::<str>::builder(policy(policy_name))
                .capacity(N)
                .build_with_clock(ManualClock::new())
                .unwrap();
            let mut buf = String::with_capacity(32);
            for i in 0..N {
                host(i, &mut buf);
                drop(r.handle(buf.as_str()));
            }
            report(policy_name, key, before, r.len());
        }
        "hostkey" => {
            let r = Registry::builder(policy(policy_name))
                .capacity(N)
                .build_with_clock(ManualClock::new())
                .unwrap();
            fill(&r, |s: &str| HostKey::from(s));
            report(policy_name, key, before, r.len());
        }
        "inline24" => {
            let r = Registry::builder(policy(policy_name))
                .capacity(N)
                .build_with_clock(ManualClock::new())
                .unwrap();
            fill(&r, InlineKey::new);
            report(policy_name, key, before, r.len());
        }
        other => panic!("unknown key type {other}"),
    }
}

fn report(policy_name: &str, key: &str, before: usize, len: usize) {
    let per = (rss_bytes() - before) as f64 / len as f64;
    println!("| {policy_name} | {key} | {len} | {per:.0} |");
}

fn stall(shards: usize) {
    let clock = ManualClock::new();
    let registry = Arc::new(
        Registry::<String>::builder(policy("consecutive"))
            .capacity(N)
            .shards(shards)
            .idle_ttl(Duration::from_secs(60))
            .build_with_clock(clock.clone())
            .unwrap(),
    );
    let mut names = Vec::with_capacity(N);
    let mut buf = String::new();
    for i in 0..N {
        host(i, &mut buf);
        names.push(buf.clone());
        drop(registry.handle(buf.as_str()));
    }
    // Every entry idle (or, with `scan-only`, none: the sweep then only reads).
    let idle = std::env::args().nth(3).as_deref() != Some("scan-only");
    clock.advance(Duration::from_secs(if idle { 120 } else { 30 }));
    // Phase 0: the reader alone (baseline); 1: while sweeping; 2: stop.
    let phase = Arc::new(AtomicU8::new(0));
    let reader = {
        let (registry, phase) = (registry.clone(), phase.clone());
        // The reader looks up 1 in 100 hosts (so those stay), at random.
        let names: Vec<String> = names.iter().step_by(100).cloned().collect();
        std::thread::spawn(move || {
            // Per phase: (worst, lookups over 250 µs, lookups).
            let mut stats = [(Duration::ZERO, 0u64, 0u64); 2];
            let mut x = 0x2545_F491_4F6C_DD1Du64;
            loop {
                let p = phase.load(Ordering::Relaxed);
                if p >= 2 {
                    return stats;
                }
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let key = names[(x % names.len() as u64) as usize].as_str();
                let t = Instant::now();
                registry.with(key, |b| b.state());
                let dt = t.elapsed();
                let s = &mut stats[p as usize];
                s.0 = s.0.max(dt);
                s.1 += u64::from(dt > Duration::from_micros(250));
                s.2 += 1;
            }
        })
    };
    std::thread::sleep(Duration::from_millis(400));
    phase.store(1, Ordering::Relaxed);
    let mut per_shard = Vec::with_capacity(shards);
    let started = Instant::now();
    let mut evicted = 0;
    for _ in 0..shards {
        let t = Instant::now();
        evicted += registry.sweep_at(1, clock.now());
        per_shard.push(t.elapsed());
    }
    let pass = started.elapsed();
    phase.store(2, Ordering::Relaxed);
    let [base, during] = reader.join().unwrap();
    per_shard.sort();
    println!(
        "| {shards} | {evicted} | {pass:.0?} | {:.0?} | {:.0?} | {:.0?} ({} of {}) | {:.0?} ({} of {}) |",
        per_shard[shards / 2],
        per_shard[shards - 1],
        during.0,
        during.1,
        during.2,
        base.0,
        base.1,
        base.2,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("child") => return child(&args[2], &args[3]),
        Some("stall") => return stall(args[2].parse().unwrap()),
        _ => {}
    }
    let exe = std::env::current_exe().unwrap();
    println!(
        "size_of::<Breaker>() = {} B, size_of::<String>() = {} B, size_of::<HostKey>() = {} B",
        std::mem::size_of::<Breaker<ManualClock>>(),
        std::mem::size_of::<String>(),
        std::mem::size_of::<HostKey>()
    );
    println!("| policy | key | entries | RSS growth B/entry |\n|---|---|---|---|");
    for policy_name in ["consecutive", "count100", "time10x1s"] {
        for key in ["string", "str", "hostkey", "inline24"] {
            let out = Command::new(&exe)
                .args(["child", policy_name, key])
                .output()
                .unwrap();
            print!("{}", String::from_utf8_lossy(&out.stdout));
        }
    }
    println!(
        "\n| shards | evicted | full pass | per-shard sweep median | max | worst lookup while sweeping (> 250 µs of lookups) | worst lookup, reader alone 400 ms |"
    );
    println!("|---|---|---|---|---|---|---|");
    for shards in [1024, 1024, 1024, 4096, 4096, 4096] {
        let out = Command::new(&exe)
            .args(["stall", &shards.to_string()])
            .output()
            .unwrap();
        print!("{}", String::from_utf8_lossy(&out.stdout));
    }
}
