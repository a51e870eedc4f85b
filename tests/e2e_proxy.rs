//! End to end: real upstream servers on 127.0.0.1 (healthy, slow, failing,
//! refusing), the real proxy of `examples/proxy`, bounded concurrent
//! traffic through it; then what a proxy exposed to real clients must
//! survive: a slowloris client, a 65 KB URI, 300 idle upstream connections,
//! running out of file descriptors, bad arguments, malformed and stalled
//! uploads and the proxy's own shortage of descriptors (neither opens a
//! healthy upstream's breaker), the status page on an admin address, and a
//! `GET` answered stale from the proxy's cache while its upstream is open
//! (fresh again after recovery). Then what makes it safe to copy: no stale
//! answer that is someone's own (Alice's answer never reaches Bob), hop-by-hop
//! headers removed both ways with `X-Forwarded-For` and `Via` added, a cap on
//! calls in flight per upstream that the breaker never hears of, a drain on
//! SIGTERM/SIGINT that answers the requests in flight and exits 0, one access
//! log line per request with the breaker's decision, `/metrics` (feature
//! `metrics`), and non-loopback upstreams refused. Loopback only (the
//! non-loopback addresses are parsed, never dialled); each test is bounded in
//! requests and time (a few seconds) and stops by itself.
//!
//! The tests that need a process of their own (a small `ulimit -n`, an exit
//! status) run this test binary again as the proxy: see [`proxy_child`].

#[path = "../examples/proxy/main.rs"]
#[allow(unreachable_pub, missing_docs)]
mod proxy;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use failfast::{Breaker, Reason, State};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

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
    let healthy = proxy::upstream(proxy::HEALTHY).await.unwrap();
    let slow = proxy::upstream(proxy::slow(SLOW_MS)).await.unwrap();
    let failing = proxy::upstream(proxy::FAILING).await.unwrap();
    let down = proxy::refusing().await.unwrap();
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
    let settings = proxy::Settings {
        timeout: Duration::from_secs(2),
        // Rejections as 503s here; stale answers have a test of their own.
        stale_entries: 0,
        ..proxy::Settings::default()
    };
    let proxy = proxy::proxy(routes, template, settings).unwrap();
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
    let state_of = |addr: SocketAddr| registry.handle_from(addr.to_string().as_str()).state();

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

/// One request: its status, headers and body.
async fn fetch(
    client: &HttpClient,
    method: http::Method,
    url: &str,
) -> (u16, http::HeaderMap, String) {
    fetch_with(client, method, url, &[]).await
}

/// One request with these header fields: its status, headers and body.
async fn fetch_with(
    client: &HttpClient,
    method: http::Method,
    url: &str,
    fields: &[(&str, &str)],
) -> (u16, http::HeaderMap, String) {
    let mut request = http::Request::builder().method(method).uri(url);
    for (name, value) in fields {
        request = request.header(*name, *value);
    }
    let request = request.body(Empty::new()).unwrap();
    let response = client.request(request).await.expect("the proxy answers");
    let (head, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (
        head.status.as_u16(),
        head.headers,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_is_answered_stale_while_its_upstream_is_open_and_fresh_after_recovery() {
    let upstream = proxy::upstream(proxy::HEALTHY).await.unwrap();
    let routes = [("api".to_owned(), upstream.addr.to_string().parse().unwrap())].into();
    let template = Breaker::builder()
        .consecutive_failures(3)
        .open_duration(Duration::from_millis(400))
        .jitter(0.0);
    let settings = proxy::Settings {
        stale_routes: vec!["api".to_owned()],
        ..proxy::Settings::default()
    };
    let proxy = proxy::proxy(routes, template, settings).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(proxy::serve(listener, proxy.clone()));
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let rates = format!("{base}/api/rates?currency=eur");
    let get = http::Method::GET;

    // Fresh: forwarded, unmarked, and kept.
    let (status, headers, body) = fetch(&client, get.clone(), &rates).await;
    assert_eq!((status, body.as_str()), (200, "upstream\n"));
    assert!(!headers.contains_key("x-failfast") && !headers.contains_key("cache-status"));
    assert_eq!(proxy.stale.len(), 1);

    // The upstream fails: its 503s pass through (and are not kept) until
    // the breaker opens.
    upstream.mode.store(proxy::FAILING, Ordering::SeqCst);
    for _ in 0..3 {
        let (status, headers, _) = fetch(&client, get.clone(), &rates).await;
        assert_eq!(status, 503);
        assert!(
            !headers.contains_key("x-failfast"),
            "the upstream's own 503"
        );
    }
    let key = upstream.addr.to_string();
    assert_eq!(
        proxy.registry.handle_from(key.as_str()).state(),
        State::Open
    );

    // Open: the GET is answered from the cache, marked stale, not forwarded.
    let hits = upstream.hits.load(Ordering::SeqCst);
    let (status, headers, body) = fetch(&client, get.clone(), &rates).await;
    assert_eq!(
        (status, body.as_str()),
        (200, "upstream\n"),
        "the last good answer"
    );
    assert_eq!(headers["x-failfast"], "fallback");
    assert_eq!(headers["cache-status"], failfast::tower::CACHE_STATUS_STALE);
    assert!(headers["age"].to_str().unwrap().parse::<u64>().is_ok());
    assert_eq!(
        upstream.hits.load(Ordering::SeqCst),
        hits,
        "the upstream was not called"
    );
    // Nothing kept for it, or not idempotent: a 503 with Retry-After.
    for (method, url) in [
        (get.clone(), format!("{base}/api/never-seen")),
        (http::Method::POST, rates.clone()),
    ] {
        let (status, headers, _) = fetch(&client, method.clone(), &url).await;
        assert_eq!(status, 503, "{method} {url}");
        assert_eq!(headers["x-failfast"], "rejected");
        assert!(headers.contains_key("retry-after"));
    }

    // The upstream heals: once the open period ends the GET is forwarded
    // again (the probe), fresh and unmarked; stale until then.
    upstream.mode.store(proxy::HEALTHY, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (status, headers, body) = fetch(&client, get.clone(), &rates).await;
        assert_eq!((status, body.as_str()), (200, "upstream\n"));
        match headers.get("x-failfast") {
            None => break,
            Some(mark) => assert_eq!(mark, "fallback", "stale while still open"),
        }
        assert!(
            Instant::now() < deadline,
            "recovered within the open period"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        proxy.registry.handle_from(key.as_str()).state(),
        State::Closed
    );
    assert!(
        upstream.hits.load(Ordering::SeqCst) > hits,
        "forwarded again"
    );
}

async fn get_body(client: &HttpClient, url: &str) -> String {
    let response = client.get(url.parse().unwrap()).await.unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(body.to_vec()).unwrap()
}

// ---------------------------------------------------------------------------
// Hardening: each test starts its own proxy.

/// A proxy in this process routing `/healthy/` to `upstream`; its address.
async fn start(upstream: SocketAddr, settings: proxy::Settings) -> (Arc<proxy::Proxy>, SocketAddr) {
    let routes = [("healthy".to_owned(), upstream.to_string().parse().unwrap())].into();
    let proxy = proxy::proxy(routes, proxy::template(), settings).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(proxy::serve(listener, proxy.clone()));
    (proxy, addr)
}

/// One request on a fresh connection, written by hand (no client-side URI
/// limits); the status code, or `None` if the connection closed first.
async fn raw_status(addr: SocketAddr, target: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {target} HTTP/1.1\r\nhost: proxy\r\nconnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
        .await
        .expect("the proxy answers or closes within 5 s")
        .ok()?;
    let head = std::str::from_utf8(answer.get(..12)?).ok()?;
    head.strip_prefix("HTTP/1.1 ")?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slowloris_client_is_cut_at_the_header_timeout() {
    let upstream = proxy::upstream(proxy::HEALTHY).await.unwrap();
    let header_timeout = Duration::from_millis(300);
    let settings = proxy::Settings {
        header_timeout,
        ..proxy::Settings::default()
    };
    let (_proxy, addr) = start(upstream.addr, settings).await;

    // 30 clients that start a request head and never finish it, and one that
    // sends nothing at all.
    let started = Instant::now();
    let mut clients = Vec::new();
    for i in 0..31 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        if i > 0 {
            stream
                .write_all(b"GET /healthy/ HTTP/1.1\r\nhost: proxy\r\nx-slow: ")
                .await
                .unwrap();
        }
        clients.push(tokio::spawn(async move {
            let mut rest = Vec::new();
            let closed =
                tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest)).await;
            (closed.is_ok(), started.elapsed())
        }));
    }
    // Meanwhile a well-formed request is served at once.
    assert_eq!(raw_status(addr, "/healthy/").await, Some(200));

    for client in clients {
        let (closed, after) = client.await.unwrap();
        assert!(closed, "the proxy closed the half-sent request");
        assert!(
            after >= header_timeout - Duration::from_millis(50) && after < Duration::from_secs(3),
            "closed after {after:?}, the header timeout is {header_timeout:?}"
        );
    }
    assert_eq!(
        upstream.hits.load(Ordering::SeqCst),
        1,
        "no half request reached the upstream"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_65_kb_uri_is_refused_not_a_panic() {
    let upstream = proxy::upstream(proxy::HEALTHY).await.unwrap();
    let (_proxy, addr) = start(upstream.addr, proxy::Settings::default()).await;
    // 65 KB: past what `http::Uri` holds (hyper answers); 65 000 bytes: a
    // request URI hyper accepts but whose rewrite with the upstream's
    // authority would not fit (the old `unwrap` panicked there); 9 KB: over
    // the proxy's own limit.
    for len in [65 * 1024, 65_000, 9 * 1024] {
        let target = format!("/healthy/{}", "a".repeat(len));
        let status = raw_status(addr, &target).await;
        assert!(matches!(status, Some(400 | 414)), "{len} bytes: {status:?}");
    }
    let at_the_limit = format!("/healthy/{}", "a".repeat(proxy::MAX_URI - 64));
    assert_eq!(raw_status(addr, &at_the_limit).await, Some(200));
    assert_eq!(
        raw_status(addr, "/healthy/?q=1").await,
        Some(200),
        "still serving"
    );
    assert_eq!(upstream.hits.load(Ordering::SeqCst), 2);
}

/// An upstream that holds every request until `n` are in flight, so `n`
/// concurrent calls need `n` connections; it counts its open connections.
async fn gathering_upstream(n: usize) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let open = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(tokio::sync::Barrier::new(n));
    let counter = open.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (open, barrier) = (counter.clone(), barrier.clone());
            open.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |_req| {
                    let barrier = barrier.clone();
                    async move {
                        barrier.wait().await;
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(
                            Empty::<Bytes>::new(),
                        ))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
                open.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (addr, open)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_upstream_connections_close_after_the_idle_timeout() {
    const CALLS: usize = 300;
    let (upstream, open) = gathering_upstream(CALLS).await;
    let idle_timeout = Duration::from_millis(400);
    let settings = proxy::Settings {
        idle_timeout,
        // 300 calls gather at the upstream before any is answered.
        timeout: Duration::from_secs(5),
        body_timeout: Duration::from_secs(2),
        ..proxy::Settings::default()
    };
    let (proxy, addr) = start(upstream, settings).await;
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let url = format!("http://{addr}/healthy/");
    let calls: Vec<_> = (0..CALLS)
        .map(|_| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move { get(&client, &url).await.status })
        })
        .collect();
    for call in calls {
        assert_eq!(call.await.unwrap(), 200);
    }
    let idle_since = Instant::now();
    assert_eq!(
        open.load(Ordering::SeqCst),
        CALLS,
        "one pooled connection per call"
    );

    let deadline = idle_since + Duration::from_secs(5);
    while open.load(Ordering::SeqCst) > 0 {
        assert!(
            Instant::now() < deadline,
            "{} still open",
            open.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(20)).await; // polling
    }
    let closed_after = idle_since.elapsed();
    assert!(
        closed_after >= idle_timeout - Duration::from_millis(100),
        "closed after {closed_after:?}: by the idle timeout ({idle_timeout:?}), not at once"
    );
    eprintln!("{CALLS} idle upstream connections closed {closed_after:?} after the last call");
    assert_eq!(proxy.registry.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_is_bounded_and_can_live_on_an_admin_address() {
    let upstream = proxy::upstream(proxy::HEALTHY).await.unwrap();
    let settings = proxy::Settings {
        admin_listener: true,
        status_limit: 3,
        ..proxy::Settings::default()
    };
    let (proxy, addr) = start(upstream.addr, settings).await;
    let admin = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin_addr = admin.local_addr().unwrap();
    tokio::spawn(proxy::serve_admin(admin, proxy.clone()));
    for i in 0..5 {
        let other = format!("10.0.0.{i}:80");
        proxy.registry.handle_from(other.as_str()); // tracked, never called
    }
    assert_eq!(raw_status(addr, "/healthy/").await, Some(200));

    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    assert_eq!(
        get(&client, &format!("http://{addr}/_failfast"))
            .await
            .status,
        404,
        "not on the main address"
    );
    let page = get_body(&client, &format!("http://{admin_addr}/_failfast")).await;
    assert!(
        page.starts_with("{\"tracked\":6,\"open\":0,\"half_open\":0,\"shown\":3,\"omitted\":3,"),
        "{page}"
    );
    let page = get_body(&client, &format!("http://{admin_addr}/_failfast?limit=1")).await;
    assert!(page.contains("\"shown\":1,\"omitted\":5,"), "{page}");
    let page = get_body(
        &client,
        &format!("http://{admin_addr}/_failfast?limit=1000"),
    )
    .await;
    assert!(
        page.contains("\"shown\":3,"),
        "capped by --status-limit: {page}"
    );
    assert_eq!(
        raw_status(admin_addr, "/_failfast?limit=x").await,
        Some(400)
    );
    assert_eq!(
        raw_status(admin_addr, "/healthy/").await,
        Some(404),
        "the admin address does not proxy"
    );
    assert_eq!(upstream.hits.load(Ordering::SeqCst), 1);
}

#[test]
fn arguments_parse_or_say_what_is_wrong() {
    let parse = |args: &[&str]| proxy::parse_args(args.iter().map(|a| a.to_string()));
    let proxy::Cli::Run(options) = parse(&[
        "--route",
        "a=127.0.0.1:1",
        "--route",
        "b=127.0.0.1:2",
        "--admin",
        "127.0.0.1:9",
        "--timeout",
        "250",
        "--max-in-flight",
        "64",
        "--drain",
        "1500",
    ])
    .unwrap() else {
        panic!("a run")
    };
    assert_eq!(options.routes.len(), 2);
    assert_eq!(options.settings.timeout, Duration::from_millis(250));
    assert!(options.settings.admin_listener);
    assert_eq!(options.settings.max_in_flight, 64);
    assert_eq!(options.settings.drain, Duration::from_millis(1500));
    assert!(options.settings.access_log, "on by default");
    let proxy::Cli::Run(defaults) = parse(&["--demo", "--no-access-log"]).unwrap() else {
        panic!("a run")
    };
    assert_eq!(defaults.settings.max_in_flight, 1024, "Envoy's default");
    assert_eq!(defaults.settings.drain, Duration::from_secs(10));
    assert!(!defaults.settings.access_log);
    assert!(matches!(parse(&["--help"]), Ok(proxy::Cli::Help)));
    for (args, says) in [
        (
            &["--route", "a=127.0.0.1:1", "--route", "a=127.0.0.1:2"][..],
            "given twice",
        ),
        (&["--route", "a"], "NAME=HOST:PORT"),
        (&["--route", "a=localhost"], "not HOST:PORT"),
        (&["--route"], "needs a value"),
        (&["--demo", "--route", "slow=127.0.0.1:1"], "clashes"),
        (&["--demo", "--listen", "10.1.2.3:80"], "loopback only"),
        (&["--demo", "--timeout", "0"], "at least 1"),
        (&["--demo", "--status-limit", "many"], "a number"),
        (&["--demo", "--verbose"], "unknown argument"),
        (&["--demo", "--replica", "a"], "needs --redis"),
        (&["--demo", "--max-in-flight", "0"], "at least 1"),
        (&["--demo", "--drain", "soon"], "milliseconds"),
        (&["--route", "a b=127.0.0.1:1"], "letters, digits"),
        (&["--route", "a=127.0.0.1:0"], "port 1 to 65535"),
        (&["--route", "a=user@127.0.0.1:80"], "not HOST:PORT"),
        (&[], "no routes"),
    ] {
        let err = parse(args).unwrap_err();
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

// ---------------------------------------------------------------------------
// The proxy as a process of its own.

const CHILD_ARGS: &str = "FAILFAST_E2E_PROXY_ARGS";

/// Not a test: the proxy's `main` when the tests below run this binary again
/// (`proxy_child --exact --ignored`), with the arguments in
/// `FAILFAST_E2E_PROXY_ARGS`, one per line. Ignored in normal runs.
#[test]
#[ignore = "the proxy child process of the tests below; they start it"]
fn proxy_child() {
    let Ok(args) = std::env::var(CHILD_ARGS) else {
        return;
    };
    let args = args.lines().map(str::to_owned).collect::<Vec<_>>();
    std::process::exit(proxy::main_with(args));
}

/// A proxy process, killed when dropped.
struct Child {
    process: std::process::Child,
    stderr: mpsc::Receiver<String>,
}

impl Child {
    /// Starts the proxy with `args`, under `ulimit -n fds` if given.
    fn start(args: &[&str], fds: Option<u32>) -> Child {
        let exe = std::env::current_exe().unwrap();
        let mut command = match fds {
            Some(fds) => {
                let mut sh = Command::new("sh");
                sh.args(["-c", r#"ulimit -n "$0" && exec "$@""#, &fds.to_string()])
                    .arg(&exe);
                sh
            }
            None => Command::new(&exe),
        };
        let mut process = command
            .args([
                "proxy_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ARGS, args.join("\n"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, stderr) = mpsc::channel();
        let pipe = process.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Child { process, stderr }
    }

    /// Waits (up to `within`) for a line of its stderr containing `needle`.
    fn wait_for(&self, needle: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => continue,
                Err(_) => panic!("no line with {needle:?} within {within:?}"),
            }
        }
    }

    /// The next `n` lines of its stderr that start with `prefix`, waiting
    /// up to `within` for them.
    fn lines_starting(&self, prefix: &str, n: usize, within: Duration) -> Vec<String> {
        let deadline = Instant::now() + within;
        let mut lines = Vec::new();
        while lines.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => lines.push(line),
                Ok(_) => continue,
                Err(_) => panic!(
                    "{} of {n} {prefix:?} lines within {within:?}: {lines:#?}",
                    lines.len()
                ),
            }
        }
        lines
    }

    /// Sends it the signal `name` (`TERM`, `INT`).
    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args(["-s", name, &self.process.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -s {name}");
    }

    /// The address it listens on, from its start-up line.
    fn address(&self) -> SocketAddr {
        let line = self.wait_for("failfast proxy on http://", Duration::from_secs(10));
        line.rsplit("http://").next().unwrap().parse().unwrap()
    }

    /// CPU time it used so far (user + system, all threads), from /proc.
    fn cpu_time(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.process.id())).unwrap();
        // Fields after the command name (which may hold spaces): state is the
        // first, utime the 12th, stime the 13th.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        Duration::from_secs_f64(ticks as f64 / clock_ticks_per_second())
    }

    /// Its exit status and everything it printed, once it exits by itself.
    fn finish(mut self) -> (i32, String, String) {
        let status = self.process.wait().unwrap();
        let mut stdout = String::new();
        std::io::Read::read_to_string(&mut self.process.stdout.take().unwrap(), &mut stdout)
            .unwrap();
        let stderr: Vec<String> = self.stderr.iter().collect();
        (status.code().unwrap_or(-1), stdout, stderr.join("\n"))
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

fn clock_ticks_per_second() -> f64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn bad_arguments_exit_2_with_the_usage() {
    for args in [
        &["--route", "x"][..],
        &["--route", "a=127.0.0.1:1", "--route", "a=127.0.0.1:2"],
        &["--nope"],
    ] {
        let (code, _, stderr) = Child::start(args, None).finish();
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(
            stderr.contains("error: ") && stderr.contains("usage: proxy"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let (code, stdout, _) = Child::start(&["--help"], None).finish();
    assert_eq!(code, 0);
    assert!(stdout.contains("usage: proxy") && stdout.contains("--route NAME=HOST:PORT"));
}

#[test]
fn non_loopback_upstreams_are_refused_unless_allowed() {
    // Parsed only: no test ever sends traffic to these addresses.
    let parse = |args: &[&str]| proxy::parse_args(args.iter().map(|a| a.to_string()));
    for remote in [
        "10.0.0.1:80",
        "192.168.1.1:8080",
        "example.com:80",
        "[2001:db8::1]:80",
    ] {
        let route = format!("a={remote}");
        let err = parse(&["--route", &route]).unwrap_err();
        assert!(
            err.contains("not a loopback address") && err.contains("--allow-remote-upstreams"),
            "{remote}: {err}"
        );
        let allowed = parse(&["--route", &route, "--allow-remote-upstreams"]);
        assert!(
            matches!(allowed, Ok(proxy::Cli::Run(_))),
            "{remote}: {allowed:?}"
        );
    }
    for local in [
        "127.0.0.1:80",
        "127.8.9.10:80",
        "localhost:80",
        "LocalHost:80",
        "[::1]:80",
        "[::ffff:127.0.0.1]:80",
    ] {
        let route = format!("a={local}");
        assert!(
            matches!(parse(&["--route", &route]), Ok(proxy::Cli::Run(_))),
            "{local} is loopback"
        );
    }
    // The process: exit status 2 and the reason, before it listens.
    let (code, _, stderr) = Child::start(&["--route", "a=10.0.0.1:80"], None).finish();
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("error: --route a=10.0.0.1:80: 10.0.0.1 is not a loopback address"),
        "{stderr}"
    );
    assert!(!stderr.contains("failfast proxy on"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_file_descriptors_the_proxy_backs_off_and_recovers() {
    let upstream = proxy::upstream(proxy::HEALTHY).await.unwrap();
    let route = format!("healthy={}", upstream.addr);
    // 40 descriptors: the runtime and the listener take about a dozen.
    let child = Child::start(
        &[
            "--listen",
            "127.0.0.1:0",
            "--route",
            &route,
            "--header-timeout",
            "30000",
        ],
        Some(40),
    );
    let addr = child.address();

    // Connections the proxy accepts and holds (no request yet), until
    // `accept` fails with EMFILE; the rest wait in the listen backlog.
    let mut held = Vec::new();
    let mut out_of_fds = None;
    while out_of_fds.is_none() {
        assert!(
            held.len() < 200,
            "no EMFILE after {} connections",
            held.len()
        );
        for _ in 0..10 {
            held.push(std::net::TcpStream::connect(addr).unwrap());
        }
        while let Ok(line) = child.stderr.recv_timeout(Duration::from_millis(100)) {
            if line.contains("accept:") {
                out_of_fds = Some(line);
                break;
            }
        }
    }
    let line = out_of_fds.unwrap();
    assert!(line.contains("Too many open files"), "{line}");

    // While it cannot accept, it waits rather than spins: measure its CPU.
    let before = child.cpu_time();
    let window = Duration::from_secs(1);
    std::thread::sleep(window); // the measurement window, not a wait for a condition
    let used = child.cpu_time() - before;
    assert!(
        used < window / 10,
        "{used:?} of CPU in {window:?} while out of descriptors: a busy loop"
    );

    // Clients go away: it accepts again and serves.
    let freed = Instant::now();
    drop(held);
    assert_eq!(raw_status(addr, "/healthy/").await, Some(200));
    child.wait_for("accept: recovered", Duration::from_secs(5));
    assert!(
        freed.elapsed() < Duration::from_secs(4),
        "recovered after {:?}",
        freed.elapsed()
    );
    eprintln!(
        "out of fds: {used:?} CPU in {window:?}; served again {:?} after the clients left",
        freed.elapsed()
    );
}

// ---------------------------------------------------------------------------
// Who failed: the client's broken requests and the proxy's own shortage of
// descriptors never open a healthy upstream's breaker.

/// Writes `request` on a fresh connection, keeps it open sending nothing
/// more, and reads the answer's status (`None` if the proxy closed first).
async fn raw_request(addr: SocketAddr, request: &[u8]) -> Option<u16> {
    let mut stream = TcpStream::connect(addr)
        .await
        .expect("the proxy listens (refused: it has exited)");
    stream.write_all(request).await.ok()?;
    let mut answer = vec![0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut answer))
        .await
        .expect("the proxy answers within 5 s")
        .ok()?;
    let head = std::str::from_utf8(answer.get(..n.min(12))?).ok()?;
    head.strip_prefix("HTTP/1.1 ")?.parse().ok()
}

/// The healthy upstream's breaker in `proxy`: its state and counted calls.
fn upstream_breaker(proxy: &proxy::Proxy, upstream: SocketAddr) -> (State, failfast::CallCounts) {
    let snapshot = proxy
        .registry
        .handle_from(upstream.to_string().as_str())
        .snapshot();
    (
        snapshot.state,
        snapshot.calls.expect("the template counts calls"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_and_stalled_uploads_never_open_a_healthy_upstream() {
    let upstream = proxy::upstream(proxy::HEALTHY).await.unwrap();
    let settings = proxy::Settings {
        timeout: Duration::from_secs(3),
        body_timeout: Duration::from_millis(300),
        ..proxy::Settings::default()
    };
    let (proxy, addr) = start(upstream.addr, settings).await;

    // A malformed chunked body: an invalid chunk size after the head. Before
    // the fix, 9 of these opened the upstream's breaker in 11 ms (502s).
    let bad_chunk = b"POST /healthy/upload HTTP/1.1\r\nhost: proxy\r\n\
        transfer-encoding: chunked\r\n\r\n3\r\nabc\r\nZZZ\r\n\r\n";
    for _ in 0..20 {
        let status = raw_request(addr, bad_chunk).await;
        assert!(
            matches!(status, Some(400) | None),
            "the client's fault: {status:?}"
        );
    }
    // A body that declares 1,000 bytes and sends 3, then nothing: cut by the
    // body timeout as the client's stall (408), never the upstream's 504.
    let stalled = b"POST /healthy/upload HTTP/1.1\r\nhost: proxy\r\n\
        content-length: 1000\r\n\r\nabc";
    let mut tasks = Vec::new();
    for _ in 0..12 {
        tasks.push(tokio::spawn(raw_request(addr, stalled)));
    }
    for task in tasks {
        assert_eq!(
            task.await.unwrap(),
            Some(408),
            "a stalled upload is the client's"
        );
    }
    let (state, calls) = upstream_breaker(&proxy, upstream.addr);
    assert_eq!(state, State::Closed, "{calls:?}");
    assert_eq!(calls.failures, 0, "{calls:?}");
    assert!(calls.neutral >= 12, "counted as neutral: {calls:?}");
    assert!(trips(&proxy, upstream.addr).is_empty());
    // And the upstream serves the next client.
    assert_eq!(raw_status(addr, "/healthy/").await, Some(200));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxys_own_fd_shortage_never_opens_a_healthy_upstream() {
    let upstream = proxy::upstream(proxy::HEALTHY).await.unwrap();
    let route = format!("healthy={}", upstream.addr);
    // 40 descriptors: about a dozen for the runtime and the listener, the
    // rest for clients and upstream connections.
    let child = Child::start(
        &[
            "--listen",
            "127.0.0.1:0",
            "--route",
            &route,
            "--admin",
            "127.0.0.1:0",
        ],
        Some(40),
    );
    let addr = child.address();
    let admin: SocketAddr = child
        .wait_for("status on http://", Duration::from_secs(10))
        .rsplit("http://")
        .next()
        .unwrap()
        .trim_end_matches("/_failfast")
        .parse()
        .unwrap();
    // Many clients at once: each takes a descriptor, and its call needs
    // another for the upstream; past the limit the connect fails with EMFILE.
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let mut tasks = Vec::new();
        for _ in 0..24 {
            tasks.push(tokio::spawn(async move {
                let request = b"GET /healthy/ HTTP/1.1\r\nhost: proxy\r\nconnection: close\r\n\r\n";
                raw_request(addr, request).await
            }));
        }
        for task in tasks {
            statuses.push(task.await.unwrap());
        }
    }
    let short = statuses.iter().filter(|s| **s == Some(503)).count();
    assert!(short > 0, "no call ran out of descriptors: {statuses:?}");
    // The status page: the upstream's breaker never opened.
    let page = loop {
        let mut stream = TcpStream::connect(admin).await.unwrap();
        stream
            .write_all(b"GET /_failfast HTTP/1.1\r\nhost: proxy\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut body = String::new();
        if stream.read_to_string(&mut body).await.is_ok() && body.starts_with("HTTP/1.1 200") {
            break body;
        }
    };
    assert!(page.contains("\"open\":0"), "{page}");
    assert!(!page.contains("\"state\":\"open\""), "{page}");
    // The access log says whose fault each of those 503s was.
    let line = child.wait_for("status=503 ", Duration::from_secs(5));
    assert!(line.ends_with(" decision=local-fault"), "{line}");
    eprintln!(
        "fd shortage: {short} of {} calls answered 503, the breaker stayed closed",
        statuses.len()
    );
}

// ---------------------------------------------------------------------------
// Safe to copy: nobody's answer served to another, hop-by-hop headers kept to
// their hop, a cap on calls in flight, a drain on SIGTERM, a line per request,
// metrics.

/// An upstream that answers "you are {Authorization} (cookie {Cookie})",
/// adds to its answer each field the request names as `x-respond-NAME:
/// VALUE`, keeps the head of every request it is sent, and answers 503
/// while `failing`.
struct Echo {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
    failing: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<http::HeaderMap>>>,
}

async fn echo_upstream() -> Echo {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let echo = Echo {
        addr: listener.local_addr().unwrap(),
        hits: Arc::default(),
        failing: Arc::default(),
        seen: Arc::default(),
    };
    let (hits, failing, seen) = (echo.hits.clone(), echo.failing.clone(), echo.seen.clone());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (hits, failing, seen) = (hits.clone(), failing.clone(), seen.clone());
            let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                hits.fetch_add(1, Ordering::SeqCst);
                seen.lock().unwrap().push(req.headers().clone());
                let field = |name: &str, none: &str| {
                    req.headers()
                        .get(name)
                        .map_or(none.to_owned(), |v| v.to_str().unwrap().to_owned())
                };
                let body = format!(
                    "you are {} (cookie {})",
                    field("authorization", "anonymous"),
                    field("cookie", "none")
                );
                let mut response = hyper::Response::new(Full::new(Bytes::from(body)));
                if failing.load(Ordering::SeqCst) {
                    *response.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
                }
                for (name, value) in req.headers() {
                    if let Some(respond) = name.as_str().strip_prefix("x-respond-") {
                        let name = http::HeaderName::from_bytes(respond.as_bytes()).unwrap();
                        response.headers_mut().append(name, value.clone());
                    }
                }
                async move { Ok::<_, std::convert::Infallible>(response) }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
            );
        }
    });
    echo
}

/// A proxy in this process with these routes and settings, the template
/// breaker given; its address.
async fn start_routes(
    routes: &[(&str, SocketAddr)],
    template: failfast::Builder,
    settings: proxy::Settings,
) -> (Arc<proxy::Proxy>, SocketAddr) {
    let routes = routes
        .iter()
        .map(|(name, addr)| (name.to_string(), addr.to_string().parse().unwrap()))
        .collect();
    let proxy = proxy::proxy(routes, template, settings).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(proxy::serve(listener, proxy.clone()));
    (proxy, addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_stale_answer_is_ever_someone_elses() {
    let echo = echo_upstream().await;
    let template = Breaker::builder()
        .consecutive_failures(3)
        .open_duration(Duration::from_secs(30))
        .jitter(0.0);
    let settings = proxy::Settings {
        stale_routes: vec!["api".to_owned()],
        ..Default::default()
    };
    let (proxy, addr) = start_routes(&[("api", echo.addr)], template, settings).await;
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let url = |path: &str| format!("http://{addr}/api/{path}");
    let get = |path: &'static str, fields: &'static [(&'static str, &'static str)]| {
        let (client, url) = (client.clone(), url(path));
        async move { fetch_with(&client, http::Method::GET, &url, fields).await }
    };
    const ALICE: &[(&str, &str)] = &[
        ("authorization", "Bearer alice-token"),
        ("cookie", "session=alice"),
    ];
    const BOB: &[(&str, &str)] = &[("authorization", "Bearer bob-token")];
    const ANONYMOUS: &[(&str, &str)] = &[];

    // Fresh answers while the upstream is healthy: each forwarded.
    let (status, _, body) = get("me", ALICE).await;
    assert_eq!(
        (status, body.as_str()),
        (200, "you are Bearer alice-token (cookie session=alice)")
    );
    // Anonymous requests whose answers are someone's own, or may not be
    // served without asking the upstream (the upstream adds the field).
    let not_kept: [(&str, &[(&str, &str)]); 10] = [
        ("private", &[("x-respond-cache-control", "private")]),
        (
            "no-store",
            &[("x-respond-cache-control", "max-age=60, No-Store")],
        ),
        ("no-cache", &[("x-respond-cache-control", "no-cache")]),
        (
            "must-revalidate",
            &[("x-respond-cache-control", "must-revalidate")],
        ),
        (
            "vary-authorization",
            &[("x-respond-vary", "accept, Authorization")],
        ),
        ("vary-cookie", &[("x-respond-vary", "cookie")]),
        ("vary-star", &[("x-respond-vary", "*")]),
        ("set-cookie", &[("x-respond-set-cookie", "session=new")]),
        ("asks-no-store", &[("cache-control", "no-store")]),
        ("cookie-only", &[("cookie", "theme=dark")]),
    ];
    for (path, fields) in not_kept {
        assert_eq!(get(path, fields).await.0, 200, "{path}");
    }
    // Answers that may be kept: a public one, one that varies on the
    // language, and one that turns private on its next fetch.
    assert_eq!(get("public", ANONYMOUS).await.0, 200);
    let french: &[(&str, &str)] = &[
        ("accept-language", "fr"),
        ("x-respond-vary", "Accept-Language"),
    ];
    assert_eq!(get("by-language", french).await.0, 200);
    assert_eq!(get("turned-private", ANONYMOUS).await.0, 200);
    assert_eq!(proxy.stale.len(), 3, "public, by-language, turned-private");
    let (status, _, _) = get("turned-private", &[("x-respond-cache-control", "private")]).await;
    assert_eq!(status, 200);
    assert_eq!(
        proxy.stale.len(),
        2,
        "the earlier copy of turned-private is forgotten"
    );

    // The upstream fails; three 503s open its breaker.
    echo.failing.store(true, Ordering::SeqCst);
    for _ in 0..3 {
        assert_eq!(get("trip", ANONYMOUS).await.0, 503);
    }
    let upstream = echo.addr.to_string();
    assert_eq!(
        proxy.registry.handle_from(upstream.as_str()).state(),
        State::Open
    );
    let hits = echo.hits.load(Ordering::SeqCst);

    // Open. Nobody is served Alice's answer: not Bob, not an anonymous
    // client, not even Alice (a personal request is never served stale).
    for (who, fields) in [("bob", BOB), ("anonymous", ANONYMOUS), ("alice", ALICE)] {
        let (status, headers, body) = get("me", fields).await;
        assert_eq!(status, 503, "{who}: {body}");
        assert_eq!(headers["x-failfast"], "rejected", "{who}");
        assert!(!body.contains("alice"), "{who} got {body:?}");
    }
    for (path, _) in not_kept {
        let (status, headers, body) = get(path, ANONYMOUS).await;
        assert_eq!(status, 503, "{path}: {body}");
        assert_eq!(headers["x-failfast"], "rejected", "{path}");
    }
    assert_eq!(get("turned-private", ANONYMOUS).await.0, 503);
    // What may be shared is: the public answer, to anonymous clients.
    let (status, headers, body) = get("public", ANONYMOUS).await;
    assert_eq!(
        (status, body.as_str()),
        (200, "you are anonymous (cookie none)")
    );
    assert_eq!(headers["x-failfast"], "fallback");
    assert_eq!(get("public", BOB).await.0, 503, "not to a personal request");
    // The language-varying answer, to a request in the same language only.
    let english: &[(&str, &str)] = &[("accept-language", "en")];
    assert_eq!(get("by-language", english).await.0, 503);
    assert_eq!(get("by-language", ANONYMOUS).await.0, 503);
    let (status, headers, _) = get("by-language", &[("accept-language", "fr")]).await;
    assert_eq!(status, 200);
    assert_eq!(headers["x-failfast"], "fallback");
    assert_eq!(
        echo.hits.load(Ordering::SeqCst),
        hits,
        "the upstream was not called while open"
    );
}

/// Sends `request` on a fresh connection (it asks `Connection: close`) and
/// reads the whole answer; its head, lower-cased.
async fn raw_head(addr: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
        .await
        .expect("answered within 5 s")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer).to_ascii_lowercase();
    answer.split("\r\n\r\n").next().unwrap().to_owned()
}

/// The values of `name` in a lower-cased head, in order.
fn field_values<'h>(head: &'h str, name: &str) -> Vec<&'h str> {
    head.lines()
        .filter_map(|line| line.split_once(':'))
        .filter(|(field, _)| *field == name)
        .map(|(_, value)| value.trim())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hop_by_hop_headers_stay_on_their_hop_and_forwarding_is_recorded() {
    let echo = echo_upstream().await;
    let (_proxy, addr) =
        start_routes(&[("api", echo.addr)], proxy::template(), Default::default()).await;
    // The upstream answers with hop-by-hop fields of its own (asked for by
    // the x-respond-* fields), and one `Connection` names.
    let respond = "x-respond-connection: x-up-secret\r\nx-respond-x-up-secret: 1\r\n\
        x-respond-keep-alive: timeout=5\r\nx-respond-proxy-authenticate: Basic\r\n\
        x-respond-upgrade: h2c\r\nx-respond-trailer: x-checksum\r\n\
        x-respond-proxy-connection: keep-alive\r\nx-respond-x-up-kept: 1\r\n";
    let request = format!(
        "GET /api/x HTTP/1.1\r\nhost: proxy\r\nconnection: close, X-Secret\r\n\
         x-secret: s\r\nkeep-alive: timeout=5\r\nproxy-authorization: Basic YTpi\r\n\
         proxy-connection: keep-alive\r\nte: trailers\r\nupgrade: websocket\r\n\
         trailer: x-checksum\r\nx-forwarded-for: 203.0.113.7\r\n\
         x-forwarded-for: 198.51.100.2\r\nvia: 1.0 edge\r\nx-kept: 1\r\n{respond}\r\n"
    );

    // Direct, the upstream does send them (so their absence below is the
    // proxy's doing).
    let direct = raw_head(
        echo.addr,
        &format!("GET / HTTP/1.1\r\nhost: u\r\n{respond}connection: close\r\n\r\n"),
    )
    .await;
    for field in [
        "x-up-secret",
        "keep-alive",
        "proxy-authenticate",
        "upgrade",
        "trailer",
        "proxy-connection",
    ] {
        assert!(
            !field_values(&direct, field).is_empty(),
            "the upstream sends {field}: {direct}"
        );
    }

    let head = raw_head(addr, &request).await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    // The request as the upstream got it.
    let seen = echo.seen.lock().unwrap().last().unwrap().clone();
    for field in [
        "connection",
        "x-secret",
        "keep-alive",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "upgrade",
        "trailer",
    ] {
        assert!(!seen.contains_key(field), "{field} forwarded: {seen:?}");
    }
    assert_eq!(seen["x-kept"], "1");
    assert_eq!(
        seen.get_all("x-forwarded-for").iter().collect::<Vec<_>>(),
        ["203.0.113.7, 198.51.100.2, 127.0.0.1"],
        "the client's address appended to those it sent"
    );
    assert_eq!(
        seen.get_all("via").iter().collect::<Vec<_>>(),
        ["1.0 edge", "1.1 failfast"]
    );
    // The answer as the client got it.
    for field in [
        "x-up-secret",
        "keep-alive",
        "proxy-authenticate",
        "upgrade",
        "trailer",
        "proxy-connection",
    ] {
        assert!(
            field_values(&head, field).is_empty(),
            "{field} passed back: {head}"
        );
    }
    assert_eq!(field_values(&head, "x-up-kept"), ["1"]);
    assert_eq!(field_values(&head, "via"), ["1.1 failfast"]);

    // A client that sent none: the forwarding fields start with it.
    let head = raw_head(addr, "GET /api/y HTTP/1.0\r\nhost: proxy\r\n\r\n").await;
    assert!(
        head.starts_with("http/1.0 200") || head.starts_with("http/1.1 200"),
        "{head}"
    );
    let seen = echo.seen.lock().unwrap().last().unwrap().clone();
    assert_eq!(seen["x-forwarded-for"], "127.0.0.1");
    assert_eq!(seen["via"], "1.0 failfast", "the version the client spoke");
}

/// An upstream that holds each request until the test adds a permit to
/// the semaphore; it counts the requests it got.
async fn held_upstream() -> (SocketAddr, Arc<AtomicUsize>, Arc<tokio::sync::Semaphore>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (h, g) = (hits.clone(), gate.clone());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (hits, gate) = (h.clone(), g.clone());
            let service = hyper::service::service_fn(move |_req| {
                hits.fetch_add(1, Ordering::SeqCst);
                let gate = gate.clone();
                async move {
                    gate.acquire().await.unwrap().forget();
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                        Bytes::from_static(b"held\n"),
                    )))
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
            );
        }
    });
    (addr, hits, gate)
}

/// Waits (5 s at most) until `counter` reaches `n`.
async fn until_count(counter: &AtomicUsize, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while counter.load(Ordering::SeqCst) < n {
        assert!(
            Instant::now() < deadline,
            "{} of {n}",
            counter.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(5)).await; // polling
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_past_the_in_flight_cap_get_503_overloaded_and_never_reach_the_breaker() {
    let (held, hits, gate) = held_upstream().await;
    let healthy = proxy::upstream(proxy::HEALTHY).await.unwrap();
    let settings = proxy::Settings {
        max_in_flight: 2,
        ..proxy::Settings::default()
    };
    let (proxy, addr) = start_routes(
        &[("held", held), ("healthy", healthy.addr)],
        proxy::template(),
        settings,
    )
    .await;
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let url = format!("http://{addr}/held/");

    // Two calls in flight: the cap.
    let in_flight: Vec<_> = (0..2)
        .map(|_| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move { fetch(&client, http::Method::GET, &url).await.0 })
        })
        .collect();
    until_count(&hits, 2).await;
    // More than the template's min_calls: they would open the breaker if
    // they counted as failures.
    for _ in 0..12 {
        let (status, headers, body) = fetch(&client, http::Method::GET, &url).await;
        assert_eq!(status, 503);
        assert_eq!(headers["x-failfast"], "overloaded");
        assert!(body.contains(": 2 calls in flight"), "{body}");
    }
    assert_eq!(
        hits.load(Ordering::SeqCst),
        2,
        "turned away before the upstream"
    );
    // Another upstream has a cap of its own.
    let healthy_url = format!("http://{addr}/healthy/");
    assert_eq!(fetch(&client, http::Method::GET, &healthy_url).await.0, 200);
    let (state, calls) = upstream_breaker(&proxy, held);
    assert_eq!(state, State::Closed);
    assert_eq!(
        (
            calls.successes,
            calls.failures,
            calls.rejected,
            calls.neutral
        ),
        (0, 0, 0, 0),
        "the breaker never heard of them: {calls:?}"
    );

    // The upstream answers: the slots free up.
    gate.add_permits(3);
    for call in in_flight {
        assert_eq!(call.await.unwrap(), 200);
    }
    assert_eq!(fetch(&client, http::Method::GET, &url).await.0, 200);
    let (_, calls) = upstream_breaker(&proxy, held);
    assert_eq!((calls.successes, calls.rejected), (3, 0), "{calls:?}");
    let held_requests = &proxy.requests["held"];
    assert_eq!(held_requests.get(proxy::Decision::Overloaded), 12);
    assert_eq!(held_requests.get(proxy::Decision::Admitted), 3);
    assert_eq!(
        proxy
            .bulkheads
            .values()
            .map(|b| b.in_flight())
            .sum::<usize>(),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_requests_in_flight_refuses_new_connections_and_exits_0() {
    let (held, hits, gate) = held_upstream().await;
    let route = format!("held={held}");
    let child = Child::start(
        &[
            "--listen",
            "127.0.0.1:0",
            "--route",
            &route,
            "--drain",
            "5000",
        ],
        None,
    );
    let addr = child.address();
    // An idle keep-alive connection (it was answered a 404).
    let mut idle = TcpStream::connect(addr).await.unwrap();
    idle.write_all(b"GET /nowhere/ HTTP/1.1\r\nhost: proxy\r\n\r\n")
        .await
        .unwrap();
    let mut answer = [0u8; 12];
    idle.read_exact(&mut answer).await.unwrap();
    assert_eq!(&answer, b"HTTP/1.1 404");
    // Three requests in flight at the upstream.
    let in_flight: Vec<_> = (0..3)
        .map(|_| tokio::spawn(raw_status(addr, "/held/")))
        .collect();
    until_count(&hits, 3).await;

    child.signal("TERM");
    child.wait_for(
        "SIGTERM: stopped accepting; draining",
        Duration::from_secs(5),
    );
    let refused = TcpStream::connect(addr).await;
    assert_eq!(
        refused.map(|_| ()).unwrap_err().kind(),
        std::io::ErrorKind::ConnectionRefused,
        "no new connection once draining"
    );
    // The idle connection is closed (after the rest of the 404, nothing).
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(2), idle.read_to_end(&mut rest))
        .await
        .expect("the idle connection is closed at once")
        .unwrap();

    // The upstream answers: every request in flight gets its 200.
    gate.add_permits(3);
    for call in in_flight {
        assert_eq!(call.await.unwrap(), Some(200), "answered during the drain");
    }
    let (code, _, stderr) = child.finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("drained; exiting"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_ends_at_its_deadline_with_status_0() {
    let (held, hits, gate) = held_upstream().await;
    let route = format!("held={held}");
    let child = Child::start(
        &[
            "--listen",
            "127.0.0.1:0",
            "--route",
            &route,
            "--drain",
            "300",
        ],
        None,
    );
    let addr = child.address();
    let stuck = tokio::spawn(raw_status(addr, "/held/"));
    until_count(&hits, 1).await;
    let signalled = Instant::now();
    child.signal("INT");
    let (code, _, stderr) = child.finish();
    let took = signalled.elapsed();
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("drain deadline: closing 1 connections still open"),
        "{stderr}"
    );
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(3),
        "exited {took:?} after the signal; the deadline is 300 ms"
    );
    assert_eq!(
        stuck.await.unwrap(),
        None,
        "cut at the deadline, unanswered"
    );
    gate.add_permits(1);
}

/// The fields of a logfmt line (`key=value`, a value maybe quoted).
fn logfmt(line: &str) -> HashMap<&str, &str> {
    line.split(' ')
        .filter_map(|pair| pair.split_once('='))
        .map(|(key, value)| (key, value.trim_matches('"')))
        .collect()
}

/// One `GET` on a fresh connection: its status and `x-failfast` mark.
async fn raw_get(addr: SocketAddr, target: &str) -> (u16, Option<String>) {
    let request = format!("GET {target} HTTP/1.1\r\nhost: proxy\r\nconnection: close\r\n\r\n");
    let head = raw_head(addr, &request).await;
    let status = head.get(9..12).and_then(|s| s.parse().ok());
    let mark = field_values(&head, "x-failfast")
        .first()
        .map(|v| v.to_string());
    (status.unwrap_or_else(|| panic!("{head}")), mark)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_gets_one_access_log_line_with_the_breakers_decision() {
    let ok = proxy::upstream(proxy::HEALTHY).await.unwrap();
    let flaky = proxy::upstream(proxy::HEALTHY).await.unwrap();
    let (held, hits, gate) = held_upstream().await;
    let routes = [
        format!("ok={}", ok.addr),
        format!("flaky={}", flaky.addr),
        format!("held={held}"),
    ];
    let upstreams: HashMap<&str, String> = [
        ("ok", ok.addr.to_string()),
        ("flaky", flaky.addr.to_string()),
        ("held", held.to_string()),
        ("-", "-".to_owned()),
    ]
    .into();
    let child = Child::start(
        &[
            "--listen",
            "127.0.0.1:0",
            "--route",
            &routes[0],
            "--route",
            &routes[1],
            "--route",
            &routes[2],
            "--max-in-flight",
            "1",
            "--stale",
            "flaky",
        ],
        None,
    );
    let addr = child.address();
    // What each request should log: method, route, path, status, decision.
    let mut expected: Vec<(&str, &str, &str, u16, &str)> = Vec::new();

    assert_eq!(raw_get(addr, "/ok/").await, (200, None));
    expected.push(("GET", "ok", "/ok/", 200, "admitted"));
    assert_eq!(raw_get(addr, "/flaky/page").await, (200, None));
    expected.push(("GET", "flaky", "/flaky/page", 200, "admitted"));
    // The flaky upstream fails (its own 503s) until its breaker opens.
    flaky.mode.store(proxy::FAILING, Ordering::SeqCst);
    let mut rejected = false;
    for _ in 0..20 {
        match raw_get(addr, "/flaky/x").await {
            (503, None) => expected.push(("GET", "flaky", "/flaky/x", 503, "admitted")),
            (503, Some(mark)) if mark == "rejected" => {
                expected.push(("GET", "flaky", "/flaky/x", 503, "rejected"));
                rejected = true;
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(rejected, "the breaker opened");
    assert_eq!(
        raw_get(addr, "/flaky/page").await,
        (200, Some("fallback".to_owned()))
    );
    expected.push(("GET", "flaky", "/flaky/page", 200, "fallback"));
    // One call in flight to `held` fills its cap of 1.
    let stuck = tokio::spawn(raw_get(addr, "/held/"));
    until_count(&hits, 1).await;
    assert_eq!(
        raw_get(addr, "/held/").await,
        (503, Some("overloaded".to_owned()))
    );
    expected.push(("GET", "held", "/held/", 503, "overloaded"));
    gate.add_permits(1);
    assert_eq!(stuck.await.unwrap(), (200, None));
    expected.push(("GET", "held", "/held/", 200, "admitted"));
    // A malformed upload: the client's fault.
    let bad_chunk = b"POST /ok/upload HTTP/1.1\r\nhost: proxy\r\n\
        transfer-encoding: chunked\r\n\r\n3\r\nabc\r\nZZZ\r\n\r\n";
    assert_eq!(raw_request(addr, bad_chunk).await, Some(400));
    expected.push(("POST", "ok", "/ok/upload", 400, "client-fault"));
    // Not forwarded; the query (which may hold secrets) is not logged.
    assert_eq!(raw_get(addr, "/nowhere/x?token=secret").await.0, 404);
    expected.push(("GET", "-", "/nowhere/x", 404, "not-forwarded"));
    assert_eq!(raw_get(addr, "/_failfast").await.0, 200);
    expected.push(("GET", "-", "/_failfast", 200, "not-forwarded"));
    // A last request: the line after the others' (each is logged before
    // its answer is sent), so no request was logged twice.
    assert_eq!(raw_get(addr, "/ok/last").await.0, 200);

    let lines = child.lines_starting("access ", expected.len() + 1, Duration::from_secs(5));
    assert!(
        lines.last().unwrap().contains(" path=\"/ok/last\" "),
        "{lines:#?}"
    );
    let mut logged = Vec::new();
    for line in &lines[..expected.len()] {
        let fields = logfmt(line);
        assert_eq!(fields["client"], "127.0.0.1", "{line}");
        assert_time(fields["time"]);
        assert_eq!(fields["upstream"], upstreams[fields["route"]], "{line}");
        assert!(
            fields["duration_ms"].parse::<f64>().unwrap() >= 0.0,
            "{line}"
        );
        assert!(!line.contains("secret"), "{line}");
        logged.push((
            fields["method"],
            fields["route"],
            fields["path"],
            fields["status"].parse::<u16>().unwrap(),
            fields["decision"],
        ));
    }
    // In request order but for the call held while another was turned away.
    logged.sort();
    expected.sort();
    assert_eq!(logged, expected);
}

/// The samples of a Prometheus text page: (name, labels, value); panics on
/// a line that is not a comment, blank, or `name{labels} value`.
#[cfg(feature = "metrics")]
fn prometheus_samples(
    page: &str,
) -> Vec<(String, std::collections::BTreeMap<String, String>, f64)> {
    let mut samples = Vec::new();
    for line in page
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        let (name, labels) = match series.split_once('{') {
            Some((name, labels)) => (
                name,
                labels.strip_suffix('}').unwrap_or_else(|| panic!("{line}")),
            ),
            None => (series, ""),
        };
        assert!(
            name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "{line}"
        );
        let labels = labels
            .split(',')
            .filter(|l| !l.is_empty())
            .map(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or_else(|| panic!("{line}"));
                (key.to_owned(), value.trim_matches('"').to_owned())
            })
            .collect();
        samples.push((
            name.to_owned(),
            labels,
            value.parse().unwrap_or_else(|_| panic!("{line}")),
        ));
    }
    samples
}

#[cfg(feature = "metrics")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_show_breakers_decisions_and_calls_in_flight() {
    let healthy = proxy::upstream(proxy::HEALTHY).await.unwrap();
    let down = proxy::refusing().await.unwrap();
    let settings = proxy::Settings {
        max_in_flight: 7,
        ..proxy::Settings::default()
    };
    let (_proxy, addr) = start_routes(
        &[("ok", healthy.addr), ("down", down)],
        proxy::template(),
        settings,
    )
    .await;
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    assert_eq!(
        get(&client, &format!("http://{addr}/ok/")).await.status,
        200
    );
    let (mut failed, mut rejected) = (0, 0);
    for _ in 0..12 {
        let sample = get(&client, &format!("http://{addr}/down/")).await;
        match (sample.status, sample.rejected) {
            (502, false) => failed += 1,
            (503, true) => rejected += 1,
            other => panic!("{other:?}"),
        }
    }
    assert!(rejected > 0, "the down upstream's breaker opened");

    let response = client
        .get(format!("http://{addr}/metrics").parse().unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));
    let page = String::from_utf8(
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap();
    let samples = prometheus_samples(&page);
    let value = |name: &str, labels: &[(&str, &str)]| {
        samples
            .iter()
            .find(|(n, l, _)| {
                n == name
                    && labels.len() == l.len()
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).is_some_and(|x| x == v))
            })
            .map(|(_, _, value)| *value)
            .unwrap_or_else(|| panic!("no {name} {labels:?} in\n{page}"))
    };
    let (ok, down) = (healthy.addr.to_string(), down.to_string());
    // The breakers, through the crate's export.
    assert_eq!(
        value(
            "circuit_breaker_state",
            &[("upstream", &down), ("state", "open")]
        ),
        1.0
    );
    assert_eq!(
        value(
            "circuit_breaker_state",
            &[("upstream", &ok), ("state", "closed")]
        ),
        1.0
    );
    assert_eq!(
        value(
            "circuit_breaker_transitions_total",
            &[
                ("upstream", &down),
                ("from", "closed"),
                ("to", "open"),
                ("reason", "failure_rate")
            ]
        ),
        1.0
    );
    assert_eq!(
        value(
            "circuit_breaker_calls_total",
            &[("upstream", &down), ("outcome", "failure")]
        ),
        failed as f64
    );
    assert_eq!(value("circuit_breaker_open", &[]), 1.0);
    // The proxy's own: requests by route and decision, the caps.
    let requests = |route: &str, decision: &str| {
        value(
            "failfast_proxy_requests_total",
            &[("route", route), ("decision", decision)],
        )
    };
    assert_eq!(requests("ok", "admitted"), 1.0);
    assert_eq!(requests("down", "admitted"), failed as f64);
    assert_eq!(requests("down", "rejected"), rejected as f64);
    assert_eq!(requests("down", "overloaded"), 0.0);
    assert_eq!(
        value("failfast_proxy_max_in_flight", &[("upstream", &ok)]),
        7.0
    );
    assert_eq!(value("failfast_proxy_in_flight", &[("upstream", &ok)]), 0.0);
    assert!(
        page.contains("# TYPE failfast_proxy_requests_total counter"),
        "{page}"
    );
}

#[cfg(not(feature = "metrics"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_metrics_feature_the_metrics_page_says_how_to_get_it() {
    let healthy = proxy::upstream(proxy::HEALTHY).await.unwrap();
    let (_proxy, addr) = start(healthy.addr, proxy::Settings::default()).await;
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let (status, _, body) = fetch(
        &client,
        http::Method::GET,
        &format!("http://{addr}/metrics"),
    )
    .await;
    assert_eq!(status, 404);
    assert!(body.contains("--features tower,metrics"), "{body}");
}

// ---------------------------------------------------------------------------
// The production shape: breakers configured from the command line or a
// file, the library's own recovery schedule, a switch that turns the
// breakers off, the stale answers off unless asked for, and a log line for
// every call, abandoned ones included.

#[test]
fn every_breaker_setting_comes_from_the_command_line_or_a_config_file() {
    let parse = |args: &[&str]| proxy::parse_args(args.iter().map(|a| a.to_string()));
    let run = |args: &[&str]| match parse(args).unwrap() {
        proxy::Cli::Run(options) => *options,
        proxy::Cli::Help => panic!("a run"),
    };
    let registry = |options: &proxy::Options| {
        proxy::breakers(options.config.as_deref(), &options.breaker_sets)
            .unwrap()
            .build()
            .unwrap()
    };

    // The defaults: the template's trip conditions, the library's recovery
    // schedule (no open period, backoff or unanswered rule of its own).
    let defaults = run(&["--route", "a=127.0.0.1:1"]);
    assert_eq!(defaults.settings.timeout, Duration::from_millis(900));
    assert_eq!(defaults.settings.body_timeout, Duration::from_millis(450));
    assert!(defaults.settings.breakers);
    assert!(
        defaults.settings.stale_routes.is_empty(),
        "no stale answers"
    );
    let library = Breaker::builder()
        .failure_rate(0.5)
        .slow_call_rate(0.5)
        .slow_call_threshold(Duration::from_millis(500))
        .count_window(20)
        .min_calls(10)
        .build()
        .unwrap();
    let ours = registry(&defaults);
    let ours = ours.handle_from("127.0.0.1:1");
    let (ours, library) = (ours.config(), library.config());
    assert_eq!(ours.failure_rate(), Some(0.5));
    assert_eq!(ours.slow_call_threshold(), Some(Duration::from_millis(500)));
    for trips in 0..8 {
        assert_eq!(
            ours.open_duration(trips),
            library.open_duration(trips),
            "the library's schedule, trip {trips}"
        );
    }
    assert_eq!(ours.unanswered(), library.unanswered());
    assert_eq!(ours.abandoned_after(), library.abandoned_after());

    // `--breaker KEY=VALUE`: any field of the [breaker] table.
    let tuned = run(&[
        "--route",
        "a=127.0.0.1:1",
        "--breaker",
        "slow_call_threshold=2s",
        "--breaker",
        "open_duration=7s",
        "--breaker",
        "backoff=off",
        "--breaker",
        "unanswered={ calls = 3, after = \"1500ms\" }",
        "--breaker",
        "min_calls=4",
    ]);
    let tuned = registry(&tuned);
    let tuned = tuned.handle_from("127.0.0.1:1");
    let config = tuned.config();
    assert_eq!(config.slow_call_threshold(), Some(Duration::from_secs(2)));
    assert_eq!(config.open_duration(0), Duration::from_secs(7));
    assert_eq!(
        config.open_duration(5),
        Duration::from_secs(7),
        "no backoff"
    );
    assert_eq!(config.unanswered(), Some((3, Duration::from_millis(1500))));
    assert_eq!(config.failure_rate(), Some(0.5), "the template's");

    // `--config FILE`: the template and one host's own settings.
    let dir = std::env::temp_dir().join(format!("failfast-e2e-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("breakers.toml");
    std::fs::write(
        &file,
        r#"
            capacity = 1000
            [breaker]
            consecutive_failures = 4
            open_duration = "3s"
            [hosts."127.0.0.1:2"]
            consecutive_failures = 2
        "#,
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let from_file = run(&[
        "--route",
        "a=127.0.0.1:1",
        "--config",
        file,
        "--breaker",
        "jitter=0.0",
    ]);
    let from_file = registry(&from_file);
    let a = from_file.handle_from("127.0.0.1:1");
    let b = from_file.handle_from("127.0.0.1:2");
    assert_eq!(a.config().consecutive_failures(), Some(4));
    assert_eq!(a.config().failure_rate(), None, "the file's template only");
    assert_eq!(a.config().open_duration(0), Duration::from_secs(3));
    assert_eq!(b.config().consecutive_failures(), Some(2), "its own");

    // Bad settings are usage errors that name the field.
    for (args, says) in [
        (&["--breaker", "failure_rate=1.5"][..], "failure_rate"),
        (&["--breaker", "open_duration=soon"], "open_duration"),
        (&["--breaker", "failure_rates=0.5"], "failure_rates"),
        (&["--breaker", "no-equals"], "KEY=VALUE"),
        (&["--config", "/nonexistent/breakers.toml"], "--config"),
        (&["--stale", "nowhere"], "no such route"),
    ] {
        let mut all = vec!["--route", "a=127.0.0.1:1"];
        all.extend_from_slice(args);
        let err = parse(&all).unwrap_err();
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // Switches.
    let off = run(&["--route", "a=127.0.0.1:1", "--no-breakers", "--stale", "a"]);
    assert!(!off.settings.breakers);
    assert_eq!(off.settings.stale_routes, ["a"]);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_help_says_how_to_choose_the_timeout_and_shows_the_template() {
    for needle in [
        "just below your callers' own",
        "[default: 900",
        "--breaker KEY=VALUE",
        "--config FILE",
        "--no-breakers",
        "--stale ROUTE",
        proxy::TEMPLATE.lines().next().unwrap(),
    ] {
        assert!(proxy::USAGE.contains(needle), "{needle:?} not in --help");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_breakers_off_every_call_reaches_the_upstream() {
    let failing = proxy::upstream(proxy::FAILING).await.unwrap();
    let settings = proxy::Settings {
        breakers: false,
        ..proxy::Settings::default()
    };
    let (proxy, addr) = start(failing.addr, settings).await;
    for _ in 0..30 {
        assert_eq!(raw_get(addr, "/healthy/").await, (503, None), "forwarded");
    }
    assert_eq!(failing.hits.load(Ordering::SeqCst), 30);
    assert_eq!(proxy.registry.len(), 0, "no breaker was asked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_client_abandons_is_logged_and_counted() {
    let (held, hits, gate) = held_upstream().await;
    let route = format!("held={held}");
    let child = Child::start(&["--listen", "127.0.0.1:0", "--route", &route], None);
    let addr = child.address();
    // A client that gives up after 200 ms (the call is still in flight).
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /held/slow?q=secret HTTP/1.1\r\nhost: proxy\r\n\r\n")
        .await
        .unwrap();
    until_count(&hits, 1).await;
    drop(stream);
    let line = child.wait_for("access ", Duration::from_secs(5));
    let fields = logfmt(&line);
    assert_eq!(fields["status"], "499", "{line}");
    assert_eq!(fields["decision"], "abandoned", "{line}");
    assert_eq!(fields["route"], "held", "{line}");
    assert_eq!(fields["path"], "/held/slow", "{line}");
    assert!(!line.contains("secret"), "{line}");
    assert_time(fields["time"]);
    gate.add_permits(1);
}

/// `2026-12-06T14:03:00.123Z`, within a minute of now.
fn assert_time(time: &str) {
    let bytes = time.as_bytes();
    assert!(
        time.len() == 24 && bytes[10] == b'T' && bytes[19] == b'.' && time.ends_with('Z'),
        "{time}"
    );
    let num = |range: std::ops::Range<usize>| time[range].parse::<i64>().unwrap();
    let (y, m, d) = (num(0..4), num(5..7), num(8..10));
    // Days from 1970-01-01 (Howard Hinnant's days_from_civil).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + num(11..13) * 3600 + num(14..16) * 60 + num(17..19);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!((now - secs).abs() < 60, "{time} is not now ({now})");
}
