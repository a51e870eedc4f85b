//! The price catalog: one HTTP/1.1 server per upstream address, answering
//! by a schedule shared with the callers, and counting every request that
//! reaches it, per host and per second.
//!
//! Healthy, a request gets `200` after 80 ms. A sick host, during the
//! incident, gives what the scenario's [`Mode`] says to every request that
//! *arrives* then. Every answer carries `x-upstream: served` (the callers
//! tell an upstream's answer from a proxy's by it) and `Cache-Control:
//! no-store` (prices at checkout are live).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpSocket;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// What a sick host does during the incident.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `200 OK` after 8 s: no error, only slow (a bad deploy).
    Slow,
    /// `503` at once.
    Fail503,
    /// The request is read and never answered.
    Hang,
    /// Nothing listens: its listener is closed and its connections dropped,
    /// so connects are refused; it listens again when the incident ends.
    Refused,
}

/// When the incident runs, in seconds from the run's start (`t0`).
#[derive(Copy, Clone, Debug)]
pub struct Plan {
    pub start: f64,
    pub end: f64,
    /// The whole run: calls are sent from 0 to here.
    pub length: f64,
}

/// Requests that reached the upstream, per host and per second (health
/// checks apart: a request for `/health`).
pub struct Tally {
    seconds: usize,
    calls: Vec<AtomicU32>,
    checks: Vec<AtomicU32>,
}

impl Tally {
    fn new(hosts: usize, seconds: usize) -> Tally {
        Tally {
            seconds,
            calls: (0..hosts * seconds).map(|_| AtomicU32::new(0)).collect(),
            checks: (0..seconds).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    fn add(&self, host: usize, second: usize, check: bool) {
        let second = second.min(self.seconds - 1);
        // Relaxed: counters read after the run.
        if check {
            self.checks[second].fetch_add(1, Ordering::Relaxed);
        } else {
            self.calls[host * self.seconds + second].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Calls host `host` got in second `second`.
    pub fn calls(&self, host: usize, second: usize) -> u32 {
        self.calls[host * self.seconds + second].load(Ordering::Relaxed)
    }

    /// Health checks in second `second`, all hosts together.
    pub fn checks(&self, second: usize) -> u32 {
        self.checks[second].load(Ordering::Relaxed)
    }
}

/// A running catalog; [`Catalog::stop`] ends every listener and connection.
pub struct Catalog {
    pub tally: Arc<Tally>,
    t0: Arc<OnceLock<Instant>>,
    tasks: Vec<JoinHandle<()>>,
    down: Vec<watch::Sender<bool>>,
}

impl Catalog {
    /// Starts the schedule: the plan's times are from `t0`. Until then
    /// every host is healthy.
    pub fn begin(&self, t0: Instant) {
        let _ = self.t0.set(t0);
    }

    /// Ends every listener and connection; returns once the listeners are
    /// closed (the next run may bind the same addresses).
    pub async fn stop(self) {
        for down in &self.down {
            down.send_replace(true);
        }
        for task in &self.tasks {
            task.abort();
        }
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// Starts one server per address in `addrs`; `sick[i]` says whether host
/// `i` follows `mode` during the incident. All listen before this returns.
pub async fn start(
    addrs: &[SocketAddr],
    sick: &[bool],
    mode: Mode,
    plan: Plan,
) -> std::io::Result<Catalog> {
    let t0 = Arc::new(OnceLock::new());
    let tally = Arc::new(Tally::new(addrs.len(), plan.length.ceil() as usize + 5));
    let mut tasks = Vec::new();
    let mut down = Vec::new();
    for (host, (&addr, &sick)) in addrs.iter().zip(sick).enumerate() {
        let listener = listen(addr)?;
        let (tx, rx) = watch::channel(false);
        let host = Host {
            index: host,
            mode: sick.then_some(mode),
            plan,
            t0: t0.clone(),
            tally: tally.clone(),
        };
        tasks.push(tokio::spawn(serve(listener, addr, host, tx.clone(), rx)));
        down.push(tx);
    }
    Ok(Catalog {
        tally,
        t0,
        tasks,
        down,
    })
}

fn listen(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

#[derive(Clone)]
struct Host {
    index: usize,
    /// What it does during the incident, if it is sick.
    mode: Option<Mode>,
    plan: Plan,
    /// Set when the run begins.
    t0: Arc<OnceLock<Instant>>,
    tally: Arc<Tally>,
}

impl Host {
    /// Seconds since t0 (before it, or before it is set: negative).
    fn at(&self, t: Instant) -> f64 {
        match self.t0.get() {
            Some(t0) if t >= *t0 => t.duration_since(*t0).as_secs_f64(),
            Some(t0) => -t0.duration_since(t).as_secs_f64(),
            None => -1.0,
        }
    }

    /// The mode a request arriving now gets (`None`: healthy).
    fn mode_now(&self) -> Option<Mode> {
        let t = self.at(Instant::now());
        self.mode
            .filter(|_| t >= self.plan.start && t < self.plan.end)
    }

    /// The instant `seconds` after t0, once t0 is set.
    async fn instant(&self, seconds: f64) -> Instant {
        loop {
            if let Some(t0) = self.t0.get() {
                return *t0 + Duration::from_secs_f64(seconds);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

async fn serve(
    mut listener: tokio::net::TcpListener,
    addr: SocketAddr,
    host: Host,
    down_tx: watch::Sender<bool>,
    down: watch::Receiver<bool>,
) {
    let refuses = host.mode == Some(Mode::Refused);
    let (close_at, open_at) = if refuses {
        (
            host.instant(host.plan.start).await,
            host.instant(host.plan.end).await,
        )
    } else {
        let far = Instant::now() + Duration::from_secs(86_400);
        (far, far)
    };
    loop {
        let accepted = if refuses && Instant::now() < open_at {
            tokio::select! {
                accepted = listener.accept() => accepted,
                () = tokio::time::sleep_until(close_at) => {
                    // The host dies: no listener, every connection cut.
                    drop(listener);
                    down_tx.send_replace(true);
                    tokio::time::sleep_until(open_at).await;
                    down_tx.send_replace(false);
                    listener = match relisten(addr).await {
                        Some(listener) => listener,
                        None => return,
                    };
                    continue;
                }
            }
        } else {
            listener.accept().await
        };
        let Ok((stream, _)) = accepted else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        let host = host.clone();
        let mut down = down.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| answer(req, host.clone()));
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = connection => {}
                _ = down.wait_for(|down| *down) => {}
            }
        });
    }
}

/// Listens on `addr` again (retrying for a second: the old socket's port
/// may take a moment to free).
async fn relisten(addr: SocketAddr) -> Option<tokio::net::TcpListener> {
    for _ in 0..100 {
        if let Ok(listener) = listen(addr) {
            return Some(listener);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

const BODY: &str = "{\"sku\":\"A-1\",\"price_cents\":1999}\n";

async fn answer(req: Request<Incoming>, host: Host) -> Result<Response<Full<Bytes>>, Infallible> {
    let now = Instant::now();
    let check = req.uri().path().contains("/health");
    let second = host.at(now).max(0.0) as usize;
    host.tally.add(host.index, second, check);
    let (status, delay) = match host.mode_now() {
        None => (
            StatusCode::OK,
            Duration::from_millis(if check { 0 } else { 80 }),
        ),
        Some(Mode::Slow) => (StatusCode::OK, Duration::from_secs(8)),
        Some(Mode::Fail503) => (StatusCode::SERVICE_UNAVAILABLE, Duration::from_millis(1)),
        // Never answered (a refused host's request slipped in before the
        // listener closed: its connection is cut).
        Some(Mode::Hang | Mode::Refused) => (StatusCode::OK, Duration::from_secs(3600)),
    };
    tokio::time::sleep(delay).await;
    let body = if status == StatusCode::OK {
        BODY
    } else {
        "{\"error\":\"unavailable\"}\n"
    };
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert("content-type", "application/json".parse().unwrap());
    headers.insert("cache-control", "no-store".parse().unwrap());
    headers.insert("x-upstream", "served".parse().unwrap());
    Ok(response)
}
