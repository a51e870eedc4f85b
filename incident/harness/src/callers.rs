//! The checkout's calls: open loop. Call `i` is sent at `t0 + i / rate`
//! whatever the earlier calls are doing (each is a task of its own), and
//! gives up after the caller's patience (its connection is dropped). A
//! retrying caller tries again at once after a 5xx, a connection error or
//! giving up, up to its retries, each attempt with the same patience.

use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use tokio::time::Instant;

/// How one attempt ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    /// An HTTP status.
    Status(u16),
    /// The caller's patience ran out.
    GaveUp,
    /// The connection failed (refused, reset before an answer).
    ConnectionError,
}

/// Who answered: the upstream, or the proxy by itself.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Answered {
    Upstream,
    /// The proxy answered from its stale cache.
    Stale,
    /// The proxy answered without calling the upstream (a breaker's or a
    /// health check's rejection).
    ProxyAlone,
    /// The proxy answered after calling the upstream (a 502, a 504), or no
    /// answer came.
    Other,
}

/// One caller's call (all its attempts).
#[derive(Copy, Clone, Debug)]
pub struct Call {
    pub host: u32,
    /// When it was due, in seconds from t0.
    pub sched: f64,
    /// From the first send to the last attempt's end.
    pub latency: f64,
    pub attempts: u8,
    /// How the last attempt ended, and who answered it.
    pub ending: Ending,
    pub answered: Answered,
    /// How long the last attempt took.
    pub last_latency: f64,
}

/// How a proxy marks an answer it gave without calling the upstream.
#[derive(Copy, Clone, Debug)]
pub enum Marks {
    /// `x-failfast: rejected | overloaded | fallback`.
    Failfast,
    /// nginx's `x-tried: $upstream_addr` names no catalog address (the
    /// local backup, or no live peer): the catalog's port is not in it.
    Nginx { upstream_port: u16 },
    /// HAProxy's `x-tried: %s` is `<NOSRV>`.
    Haproxy,
}

impl Marks {
    fn read(self, headers: &hyper::HeaderMap) -> Answered {
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        if text("x-upstream") == Some("served") {
            if text("x-failfast") == Some("fallback") {
                return Answered::Stale;
            }
            return Answered::Upstream;
        }
        match self {
            Marks::Failfast => match text("x-failfast") {
                Some("rejected" | "overloaded") => Answered::ProxyAlone,
                Some("fallback") => Answered::Stale,
                _ => Answered::Other,
            },
            Marks::Nginx { upstream_port } => match text("x-tried") {
                Some(tried) if !tried.contains(&format!(":{upstream_port}")) => {
                    Answered::ProxyAlone
                }
                _ => Answered::Other,
            },
            Marks::Haproxy => match text("x-tried") {
                Some("<NOSRV>") => Answered::ProxyAlone,
                _ => Answered::Other,
            },
        }
    }
}

/// What the callers do.
#[derive(Clone, Debug)]
pub struct Load {
    pub rate: f64,
    pub seconds: f64,
    pub patience: Duration,
    pub retries: u8,
    /// The URL of host `i`'s calls.
    pub urls: Vec<String>,
    /// Which host call `i` goes to (`None`: host 0).
    pub spread: bool,
    pub marks: Marks,
}

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// Runs the callers from `t0`; every call, in send order.
pub async fn run(load: Load, t0: Instant) -> Vec<Call> {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: HttpClient = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector);
    let n = (load.rate * load.seconds) as u64;
    let mut tasks = Vec::with_capacity(n as usize);
    let mut rng = 0x9E37_79B9_7F4A_7C15_u64;
    for i in 0..n {
        let sched = i as f64 / load.rate;
        tokio::time::sleep_until(t0 + Duration::from_secs_f64(sched)).await;
        let host = if load.spread {
            // xorshift64*: the same hosts in the same order every run.
            rng ^= rng >> 12;
            rng ^= rng << 25;
            rng ^= rng >> 27;
            (rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % load.urls.len()
        } else {
            0
        };
        let (client, load) = (client.clone(), load.clone());
        tasks.push(tokio::spawn(async move {
            call(&client, &load, host, sched).await
        }));
    }
    let mut calls = Vec::with_capacity(tasks.len());
    for task in tasks {
        if let Ok(call) = task.await {
            calls.push(call);
        }
    }
    calls
}

async fn call(client: &HttpClient, load: &Load, host: usize, sched: f64) -> Call {
    let started = Instant::now();
    let url: hyper::Uri = load.urls[host].parse().expect("a URL");
    let mut attempts = 0;
    loop {
        attempts += 1;
        let sent = Instant::now();
        let (ending, answered) = attempt(client, &url, load).await;
        let retry = match ending {
            Ending::Status(status) => status >= 500,
            Ending::GaveUp | Ending::ConnectionError => true,
        };
        if !retry || attempts > load.retries {
            return Call {
                host: host as u32,
                sched,
                latency: started.elapsed().as_secs_f64(),
                attempts,
                ending,
                answered,
                last_latency: sent.elapsed().as_secs_f64(),
            };
        }
    }
}

async fn attempt(client: &HttpClient, url: &hyper::Uri, load: &Load) -> (Ending, Answered) {
    let exchange = async {
        let response = client.get(url.clone()).await?;
        let status = response.status().as_u16();
        let answered = load.marks.read(response.headers());
        response.into_body().collect().await?;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>((status, answered))
    };
    match tokio::time::timeout(load.patience, exchange).await {
        Ok(Ok((status, answered))) => (Ending::Status(status), answered),
        Ok(Err(_)) => (Ending::ConnectionError, Answered::Other),
        Err(_) => (Ending::GaveUp, Answered::Other),
    }
}
