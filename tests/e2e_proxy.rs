//! End to end: real upstream servers on 127.0.0.1 (healthy, slow, failing,
//! refusing), the real proxy of `examples/proxy.rs`, bounded concurrent
//! traffic through it. Loopback only; bounded in requests and time (a few
//! seconds); it stops by itself.

#[path = "../examples/proxy.rs"]
#[allow(unreachable_pub, missing_docs)]
mod proxy;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use failfast::{Breaker, Reason, State};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::net::TcpListener;

const SLOW_MS: u64 = 300;

#[derive(Debug)]
struct Sample {
    status: u16,
    retry_after: Option<u64>,
    rejected: bool,
    latency: Duration,
}

type HttpClient = Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>;

async fn get(client: &HttpClient, url: &str) -> Sample {
    let started = Instant::now();
    let response = client
        .get(url.parse().unwrap())
        .await
        .expect("the proxy answers");
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().parse().unwrap());
    let rejected = response
        .headers()
        .get("x-failfast")
        .is_some_and(|v| v == "rejected");
    let _ = response.into_body().collect().await;
    Sample {
        status,
        retry_after,
        rejected,
        latency: started.elapsed(),
    }
}

/// `workers` concurrent loops of `each` sequential requests to `url`.
async fn drive(client: &HttpClient, url: String, workers: usize, each: usize) -> Vec<Sample> {
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (client, url) = (client.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for _ in 0..each {
                out.push(get(&client, &url).await);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            out
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

fn trips(proxy: &proxy::Proxy, upstream: SocketAddr) -> Vec<(State, State, Reason)> {
    proxy
        .transitions
        .lock()
        .unwrap()
        .iter()
        .filter(|(u, _)| *u == upstream.to_string())
        .map(|(_, t)| (t.from, t.to, t.reason))
        .collect()
}

fn assert_rejections_are_immediate_503s(name: &str, samples: &[Sample]) {
    let rejected: Vec<_> = samples.iter().filter(|s| s.rejected).collect();
    assert!(!rejected.is_empty(), "{name}: some calls were rejected");
    for s in rejected {
        assert_eq!(s.status, 503, "{name}: a rejection is a 503");
        assert!(
            s.retry_after.is_some_and(|secs| secs >= 1),
            "{name}: with Retry-After"
        );
        assert!(
            s.latency < Duration::from_millis(150),
            "{name}: rejected at once, not after {:?}",
            s.latency
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_host_breakers_through_a_real_proxy() {
    let deadline = Instant::now();
    let healthy = proxy::upstream(proxy::HEALTHY).await;
    let slow = proxy::upstream(proxy::slow(SLOW_MS)).await;
    let failing = proxy::upstream(proxy::FAILING).await;
    let down = proxy::refusing().await;
    for addr in [healthy.addr, slow.addr, failing.addr, down] {
        assert!(addr.ip().is_loopback());
    }
    let routes: HashMap<String, http::uri::Authority> = [
        ("healthy", healthy.addr),
        ("slow", slow.addr),
        ("failing", failing.addr),
        ("down", down),
    ]
    .into_iter()
    .map(|(name, addr)| (name.to_owned(), addr.to_string().parse().unwrap()))
    .collect();
    let template = Breaker::builder()
        .failure_rate(0.5)
        .slow_call_rate(0.5)
        .slow_call_threshold(Duration::from_millis(150))
        .count_window(10)
        .min_calls(5)
        .open_duration(Duration::from_millis(1500))
        .count_calls(true);
    let proxy = proxy::proxy(routes, template, Duration::from_secs(2), false);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(proxy::serve(listener, proxy.clone()));
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();

    // Phase 1: all four upstreams at once, 4 workers × 8 requests each.
    let (h, s, f, d) = tokio::join!(
        drive(&client, format!("{base}/healthy/"), 4, 8),
        drive(&client, format!("{base}/slow/"), 4, 8),
        drive(&client, format!("{base}/failing/"), 4, 8),
        drive(&client, format!("{base}/down/"), 4, 8),
    );
    let registry = &proxy.registry;
    let state_of = |addr: SocketAddr| {
        let key: http::uri::Authority = addr.to_string().parse().unwrap();
        registry.handle(&key).state()
    };

    // The slow upstream: tripped by the slow-call rate while it still answered 200.
    assert_eq!(state_of(slow.addr), State::Open);
    assert_eq!(
        trips(&proxy, slow.addr),
        [(State::Closed, State::Open, Reason::SlowCallRate)]
    );
    let admitted: Vec<_> = s.iter().filter(|x| !x.rejected).collect();
    assert!(admitted.len() >= 5, "min_calls slow calls went through");
    assert!(
        admitted.iter().all(|x| x.status == 200),
        "the slow upstream never failed"
    );
    assert!(admitted
        .iter()
        .all(|x| x.latency >= Duration::from_millis(SLOW_MS)));
    assert_rejections_are_immediate_503s("slow", &s);
    assert_eq!(
        slow.hits.load(Ordering::SeqCst),
        admitted.len(),
        "rejections never reached it"
    );

    // The failing upstream: tripped by the failure rate.
    assert_eq!(state_of(failing.addr), State::Open);
    assert_eq!(
        trips(&proxy, failing.addr),
        [(State::Closed, State::Open, Reason::FailureRate)]
    );
    assert!(f
        .iter()
        .filter(|x| !x.rejected)
        .all(|x| x.status == 503 && x.retry_after.is_none()));
    assert_rejections_are_immediate_503s("failing", &f);

    // The refusing one: connection errors are failures (502 from the proxy), then rejections.
    assert_eq!(state_of(down), State::Open);
    assert_eq!(
        trips(&proxy, down),
        [(State::Closed, State::Open, Reason::FailureRate)]
    );
    assert!(d.iter().filter(|x| !x.rejected).all(|x| x.status == 502));
    assert_rejections_are_immediate_503s("down", &d);

    // The healthy upstream: every call succeeded, fast, its breaker untouched.
    assert_eq!(state_of(healthy.addr), State::Closed);
    assert!(trips(&proxy, healthy.addr).is_empty());
    assert!(
        h.iter().all(|x| x.status == 200 && !x.rejected),
        "healthy: 100% success"
    );
    let mut latencies: Vec<_> = h.iter().map(|x| x.latency).collect();
    latencies.sort();
    assert!(
        latencies[latencies.len() / 2] < Duration::from_millis(SLOW_MS / 3),
        "healthy median latency unaffected: {:?}",
        latencies[latencies.len() / 2]
    );
    assert_eq!(healthy.hits.load(Ordering::SeqCst), 32);

    // The status endpoint shows each upstream's state.
    let status = get_body(&client, &format!("{base}/_failfast")).await;
    assert!(
        status.contains(&format!(
            "\"upstream\":\"{}\",\"state\":\"open\"",
            slow.addr
        )),
        "{status}"
    );
    assert!(status.contains(&format!(
        "\"upstream\":\"{}\",\"state\":\"closed\"",
        healthy.addr
    )));
    assert!(status.starts_with("{\"tracked\":4,\"open\":3,"), "{status}");

    // Phase 2: the failing upstream heals; after Retry-After, one probe closes it.
    failing.mode.store(proxy::HEALTHY, Ordering::SeqCst);
    let wait = get(&client, &format!("{base}/failing/")).await;
    assert!(wait.rejected);
    let hits_before = failing.hits.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let probe = get(&client, &format!("{base}/failing/")).await;
    assert_eq!(probe.status, 200);
    assert_eq!(
        failing.hits.load(Ordering::SeqCst),
        hits_before + 1,
        "exactly one probe"
    );
    assert_eq!(state_of(failing.addr), State::Closed);
    assert_eq!(
        trips(&proxy, failing.addr).last(),
        Some(&(State::HalfOpen, State::Closed, Reason::ProbesSucceeded))
    );
    let after = drive(&client, format!("{base}/failing/"), 2, 3).await;
    assert!(after.iter().all(|x| x.status == 200));

    assert!(
        deadline.elapsed() < Duration::from_secs(15),
        "took {:?}",
        deadline.elapsed()
    );
}

async fn get_body(client: &HttpClient, url: &str) -> String {
    let response = client.get(url.parse().unwrap()).await.unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(body.to_vec()).unwrap()
}
