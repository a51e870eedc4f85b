//! The cost of each proxy when nothing is wrong: wrk at a fixed concurrency
//! through each proxy to an nginx upstream that answers at once
//! (`conf/nginx-upstream.conf`). Runs are interleaved (round 1 of every
//! proxy, then round 2, ...) so that the shared machine's drift hits them
//! alike; only ratios inside one round are claims.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};

use crate::proxies::{self, Kind, Route, Tools};

const UPSTREAM: u16 = 19_990;

/// What one wrk run printed, and the CPU it took.
struct Run {
    rps: f64,
    p50_ms: f64,
    p99_ms: f64,
    non2xx: u64,
    /// Requests completed.
    requests: u64,
    /// CPU microseconds per request: the proxy, the upstream, wrk.
    cpu_us: [Option<f64>; 3],
}

/// Linux's `USER_HZ`: `/proc`'s CPU times are in hundredths of a second.
const TICKS_PER_SECOND: f64 = 100.0;

/// The fields of `/proc/PID/stat` after the command's name, from `state`
/// (so `utime` is index 11; see proc(5)).
fn stat_fields(pid: &str) -> Option<Vec<u64>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &text[text.rfind(')')? + 2..];
    Some(
        after_name
            .split_whitespace()
            .map(|f| f.parse().unwrap_or(0))
            .collect(),
    )
}

/// The CPU time (user + system, in ticks) of process `pid`, every thread of
/// it, and its child processes (nginx's workers).
fn cpu_ticks(pid: u32) -> Option<u64> {
    let own = |fields: &[u64]| {
        fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0)
    };
    let mut total = own(&stat_fields(&pid.to_string())?);
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        let Some(name) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if let Some(fields) = stat_fields(name).filter(|f| f.get(1) == Some(&u64::from(pid))) {
            total += own(&fields);
        }
    }
    Some(total)
}

/// The CPU time (in ticks) of this process's children that have been
/// waited for: wrk's, once its run has ended.
fn waited_children_ticks() -> Option<u64> {
    let fields = stat_fields("self")?;
    Some(fields.get(13)? + fields.get(14)?)
}

/// One wrk run against `url`, with the CPU per request of `proxy` and
/// `upstream` (process ids) and of wrk itself.
fn measured_wrk(
    url: &str,
    seconds: u32,
    connections: u32,
    proxy: Option<u32>,
    upstream: u32,
) -> Option<Run> {
    let before = (
        proxy.and_then(cpu_ticks),
        cpu_ticks(upstream),
        waited_children_ticks(),
    );
    let mut run = wrk(url, seconds, connections)?;
    let after = (
        proxy.and_then(cpu_ticks),
        cpu_ticks(upstream),
        waited_children_ticks(),
    );
    let per_request = |b: Option<u64>, a: Option<u64>| {
        let ticks = a?.checked_sub(b?)?;
        (run.requests > 0).then(|| ticks as f64 / TICKS_PER_SECOND * 1e6 / run.requests as f64)
    };
    run.cpu_us = [
        per_request(before.0, after.0),
        per_request(before.1, after.1),
        per_request(before.2, after.2),
    ];
    Some(run)
}

fn wrk(url: &str, seconds: u32, connections: u32) -> Option<Run> {
    let out = Command::new("wrk")
        .args([
            "-t1",
            &format!("-c{connections}"),
            &format!("-d{seconds}s"),
            "--latency",
            url,
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |prefix: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(prefix))
            .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
    };
    let ms = |v: String| {
        let (n, unit) = v.split_at(v.find(|c: char| c.is_ascii_alphabetic())?);
        let n: f64 = n.parse().ok()?;
        Some(match unit {
            "us" => n / 1e3,
            "ms" => n,
            "s" => n * 1e3,
            _ => return None,
        })
    };
    Some(Run {
        rps: field("Requests/sec:")?.parse().ok()?,
        p50_ms: ms(field("50%")?)?,
        p99_ms: ms(field("99%")?)?,
        non2xx: text
            .lines()
            .find_map(|l| l.trim().strip_prefix("Non-2xx or 3xx responses: "))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
        // "  123456 requests in 10.00s, 17.2MB read"
        requests: text
            .lines()
            .find(|l| l.contains(" requests in "))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
        cpu_us: [None; 3],
    })
}

/// Runs the overhead comparison; the report (Markdown).
pub fn run(
    tools: &Tools,
    kinds: &[Kind],
    rounds: u32,
    seconds: u32,
    out: &std::path::Path,
) -> String {
    let scratch = out.join("runs/overhead");
    let _ = std::fs::create_dir_all(scratch.join("upstream/tmp"));
    let conf = proxies::read(tools, "nginx-upstream.conf")
        .expect("conf/nginx-upstream.conf")
        .replace("@RUN@", &scratch.join("upstream").display().to_string())
        .replace("@LISTEN@", &UPSTREAM.to_string());
    let conf_path = scratch.join("upstream/nginx.conf");
    std::fs::write(&conf_path, conf).expect("the upstream's config");
    let mut upstream = Command::new("nginx")
        .arg("-p")
        .arg(scratch.join("upstream"))
        .arg("-c")
        .arg(&conf_path)
        .args(["-g", "daemon off;"])
        .spawn()
        .expect("nginx for the upstream");
    let route = [Route {
        name: "price".into(),
        upstream: SocketAddr::from((Ipv4Addr::LOCALHOST, UPSTREAM)),
    }];
    let mut running = Vec::new();
    for (k, kind) in kinds.iter().enumerate() {
        let listen = 18_500 + 20 * k as u16;
        match proxies::start(*kind, tools, &route, listen, &scratch.join(kind.name())) {
            Ok(proxy) => running.push((proxy, format!("http://127.0.0.1:{listen}/price/sku/A-1"))),
            Err(err) => eprintln!("  {err}"),
        }
    }
    let pids: Vec<Option<u32>> = std::iter::once(None)
        .chain(running.iter().map(|(p, _)| Some(p.pid())))
        .collect();
    let direct = format!("http://127.0.0.1:{UPSTREAM}/sku/A-1");
    // Warm up: connections, pools, caches.
    let _ = wrk(&direct, 2, 32);
    for (_, url) in &running {
        let _ = wrk(url, 2, 32);
    }
    let mut table: Vec<(String, Vec<Run>)> = std::iter::once("direct".to_owned())
        .chain(running.iter().map(|(p, _)| p.kind.name().to_owned()))
        .map(|n| (n, Vec::new()))
        .collect();
    for round in 1..=rounds {
        for (i, url) in std::iter::once(&direct)
            .chain(running.iter().map(|(_, u)| u))
            .enumerate()
        {
            if let Some(run) = measured_wrk(url, seconds, 32, pids[i], upstream.id()) {
                let us = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.1}"));
                eprintln!(
                    "round {round} {:22} {:8.0} req/s  p50 {:.2} ms  p99 {:.2} ms  \
                     CPU µs/request: proxy {} upstream {} wrk {}",
                    table[i].0,
                    run.rps,
                    run.p50_ms,
                    run.p99_ms,
                    us(run.cpu_us[0]),
                    us(run.cpu_us[1]),
                    us(run.cpu_us[2])
                );
                table[i].1.push(run);
            }
        }
    }
    for (proxy, _) in running {
        proxy.stop();
    }
    let _ = Command::new("kill")
        .args(["-TERM", &upstream.id().to_string()])
        .status();
    let _ = upstream.wait();

    let mut text = format!(
        "### Overhead: wrk -t1 -c32 -d{seconds}s, {rounds} interleaved rounds\n\n\
         | target | req/s per round | p50 ms | p99 ms | non-2xx | CPU µs/req: proxy | upstream | wrk |\n\
         |---|---|---:|---:|---:|---:|---:|---:|\n"
    );
    for (name, runs) in &table {
        let rps: Vec<String> = runs.iter().map(|r| format!("{:.0}", r.rps)).collect();
        let median = |f: fn(&Run) -> f64| {
            let mut v: Vec<f64> = runs.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
        };
        let cpu = |k: usize| {
            let mut v: Vec<f64> = runs.iter().filter_map(|r| r.cpu_us[k]).collect();
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2)
                .map_or("–".to_owned(), |m| format!("{m:.1}"))
        };
        let _ = writeln!(
            text,
            "| {name} | {} | {:.2} | {:.2} | {} | {} | {} | {} |",
            rps.join(" / "),
            median(|r| r.p50_ms),
            median(|r| r.p99_ms),
            runs.iter().map(|r| r.non2xx).sum::<u64>(),
            cpu(0),
            cpu(1),
            cpu(2)
        );
    }
    let rps = |name: &str, round: usize| {
        table
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, runs)| runs.get(round))
            .map(|r| r.rps)
    };
    let pairs = [
        (
            "failfast-example",
            "failfast-example-off",
            "breakers on / off",
        ),
        ("failfast-example", "nginx", "example / nginx"),
        (
            "failfast-example-off",
            "nginx",
            "example, breakers off / nginx",
        ),
        ("failfast-pingora", "nginx", "pingora with failfast / nginx"),
        ("failfast-example", "haproxy", "example / HAProxy"),
    ];
    let _ = writeln!(
        text,
        "\n| ratio (same round) |{}\n|---|{}",
        (1..=rounds)
            .map(|r| format!(" round {r} |"))
            .collect::<String>(),
        "---:|".repeat(rounds as usize)
    );
    for (a, b, label) in pairs {
        let cells: Vec<String> = (0..rounds as usize)
            .map(|r| match (rps(a, r), rps(b, r)) {
                (Some(x), Some(y)) => format!("{:.2}", x / y),
                _ => "–".into(),
            })
            .collect();
        if cells.iter().any(|c| c != "–") {
            let _ = writeln!(text, "| {label} | {} |", cells.join(" | "));
        }
    }
    text
}
