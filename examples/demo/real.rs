//! `--real`: real HTTP through the real per-host proxy, in real time.
//!
//! The proxy is `examples/proxy` (hyper + tokio + the `tower` feature).
//! Started with `--demo` it runs three local upstreams — `healthy` (200 at
//! once), `slow` (200 OK after 800 ms) and `failing` (503) — with one
//! failfast breaker per upstream (slow-call rate and failure rate ≥ 50 % of
//! the last 20 calls, once 10 were seen; slow = 500 ms; open 10 s).
//!
//! This mode starts that proxy binary on a free loopback port (it must be
//! built: it needs the `tower` feature, which this example does not), drives
//! a few paced client threads at each route with plain `std::net` HTTP/1.1,
//! prints what the callers saw second by second, and stops the proxy.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::sim::Latencies;
use crate::table::{dur, Table};

const ROUTES: [&str; 3] = ["healthy", "slow", "failing"];
/// Client threads per route.
const CLIENTS: usize = 8;
/// Each client sends at most one request per this interval.
const PACE: Duration = Duration::from_millis(50);

const HOW: &str = "\
--real drives real HTTP through the per-host proxy (examples/proxy), which needs
the `tower` feature. Build it once, then run the demo again:

    cargo build --release --example proxy --features tower,serde
    cargo run --release --example demo -- --real

Or run the proxy yourself and try it with curl:

    cargo run --release --example proxy --features tower,serde -- --demo";

/// What a caller saw.
#[derive(Copy, Clone, PartialEq)]
enum Seen {
    /// 2xx from the upstream.
    Ok,
    /// 503 from the breaker, without calling the upstream (`x-failfast: rejected`).
    Rejected,
    /// Any other answer or a transport error.
    Error,
}

struct Sample {
    route: usize,
    second: u64,
    seen: Seen,
    latency: Duration,
}

pub fn run(seconds: u64) -> ExitCode {
    let Some(proxy) = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("proxy")))
        .filter(|p| p.exists())
    else {
        eprintln!("{HOW}");
        return ExitCode::from(2);
    };
    let addr = match free_port() {
        Ok(addr) => addr,
        Err(e) => {
            eprintln!("no free loopback port: {e}");
            return ExitCode::FAILURE;
        }
    };
    let child = Command::new(&proxy)
        .args(["--demo", "--listen", &addr.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(child) => Proxy(child),
        Err(e) => {
            eprintln!("could not start {}: {e}\n\n{HOW}", proxy.display());
            return ExitCode::FAILURE;
        }
    };
    if !wait_ready(addr, Duration::from_secs(10)) {
        eprintln!("the proxy did not accept connections on {addr} within 10 s\n\n{HOW}");
        return ExitCode::FAILURE;
    }
    println!(
        "failfast demo --real: {} (pid {}) on http://{addr}, {CLIENTS} clients per route, {seconds} s of real time.",
        proxy.display(),
        child.0.id()
    );
    println!("  Upstreams: healthy (200 at once), slow (200 OK after 800 ms), failing (503).");
    println!("  Each cell: answered ok / rejected at once by the breaker (503, x-failfast) / other, and p50 latency.");
    println!();
    let samples = drive(addr, Duration::from_secs(seconds));
    let status = get(addr, "/_failfast").map(|(_, body)| body);
    child.stop();
    report(&samples, seconds);
    if let Ok(body) = status {
        println!();
        println!("  The proxy's /_failfast at the end:");
        println!("  {}", body.trim().replace("},{", "},\n   {"));
    }
    ExitCode::SUCCESS
}

/// The proxy child, stopped when dropped (it serves until killed).
struct Proxy(Child);

impl Proxy {
    fn stop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop();
    }
}

fn free_port() -> std::io::Result<SocketAddr> {
    TcpListener::bind("127.0.0.1:0")?.local_addr()
}

fn wait_ready(addr: SocketAddr, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return true;
        }
        thread::sleep(Duration::from_millis(50));
    }
    false
}

/// One HTTP/1.1 GET on a fresh connection: the status and the body (with headers).
fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    let headers = text
        .split_once("\r\n\r\n")
        .map_or(text.as_str(), |(h, _)| h);
    let rejected = headers
        .lines()
        .any(|l| l.to_ascii_lowercase().starts_with("x-failfast: rejected"));
    Ok((if rejected { 1 } else { status }, body))
}

/// Paced clients on every route until `length` has passed.
fn drive(addr: SocketAddr, length: Duration) -> Vec<Sample> {
    let start = Instant::now();
    let (tx, rx) = mpsc::channel();
    thread::scope(|scope| {
        for (route, name) in ROUTES.iter().enumerate() {
            for _ in 0..CLIENTS {
                let tx = tx.clone();
                scope.spawn(move || {
                    let path = format!("/{name}/");
                    while start.elapsed() < length {
                        let sent = Instant::now();
                        let seen = match get(addr, &path) {
                            Ok((1, _)) => Seen::Rejected,
                            Ok((200..=299, _)) => Seen::Ok,
                            _ => Seen::Error,
                        };
                        let _ = tx.send(Sample {
                            route,
                            second: sent.duration_since(start).as_secs(),
                            seen,
                            latency: sent.elapsed(),
                        });
                        thread::sleep(PACE.saturating_sub(sent.elapsed()));
                    }
                });
            }
        }
        drop(tx);
    });
    rx.into_iter().collect()
}

fn report(samples: &[Sample], seconds: u64) {
    let mut header = vec!["t".to_string()];
    header.extend(ROUTES.iter().map(|r| format!("/{r}/")));
    let mut t = Table::new(&header);
    for second in 0..seconds {
        let mut row = vec![format!("{second}s")];
        for route in 0..ROUTES.len() {
            let here = || {
                samples
                    .iter()
                    .filter(move |s| s.route == route && s.second == second)
            };
            let count = |seen: Seen| here().filter(|s| s.seen == seen).count();
            let mut latency = Latencies::default();
            here().for_each(|s| latency.push(s.latency));
            row.push(format!(
                "{:>3} / {:>3} / {:>3}   p50 {:>7}",
                count(Seen::Ok),
                count(Seen::Rejected),
                count(Seen::Error),
                dur(latency.quantile(0.5))
            ));
        }
        t.row(&row);
    }
    t.print();
}
