//! **redis.** The example proxy's `--redis`: two real proxies
//! (`examples/proxy`) in front of one failing upstream share trips
//! through a real `redis-server` (started by the test, see `redis_server/`):
//! once the first trips, the second rejects without calling the upstream.
//! Needs `--features tower,redis` (the proxy is built on the layers);
//! skipped, with a notice, where `redis-server` is missing.

mod redis_server;

#[path = "../examples/proxy/main.rs"]
#[allow(unreachable_pub, missing_docs)]
mod proxy;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_proxies_share_a_trip() {
    use std::collections::HashMap;
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};

    use failfast::State;
    use http::uri::Authority;
    use http_body_util::Empty;
    use hyper::body::Bytes;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    use tokio::net::TcpListener;

    let Some(server) = redis_server::Server::start() else {
        return;
    };
    let failing = proxy::upstream(proxy::FAILING).await.unwrap();
    let upstream = Authority::try_from(failing.addr.to_string()).unwrap();
    let routes = HashMap::from([("pay".to_owned(), upstream.clone())]);
    let settings = proxy::Settings {
        share_trips: true,
        ..proxy::Settings::default()
    };
    let mut urls = Vec::new();
    let mut proxies = Vec::new();
    let mut stats = Vec::new();
    for name in ["a", "b"] {
        let p = proxy::proxy(routes.clone(), proxy::template(), settings.clone()).unwrap();
        let outbox = p.outbox.clone().expect("an outbox with share_trips");
        stats.push(proxy::share_trips(&p, outbox, &server.url(), Some(name)).unwrap());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        urls.push(format!("http://{}/pay/", listener.local_addr().unwrap()));
        tokio::spawn(proxy::serve(listener, p.clone()));
        proxies.push(p);
    }
    // Both connected and subscribed: each reconciled once.
    let start = Instant::now();
    while stats.iter().any(|s| s.reconciled() == 0) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "sync tasks connect"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let get = |url: &str| client.get(url.parse().unwrap());
    // A: ten 503s from the upstream trip its breaker (failure rate over 10 calls).
    for _ in 0..10 {
        let response = get(&urls[0]).await.unwrap();
        assert_eq!(response.status(), 503);
        assert!(
            response.headers().get("x-failfast").is_none(),
            "A called upstream"
        );
    }
    let state = |p: &proxy::Proxy| p.registry.handle_from(upstream.as_str()).state();
    assert_eq!(state(&proxies[0]), State::Open);
    let hits = failing.hits.load(Ordering::SeqCst);
    assert_eq!(hits, 10);
    // B hears of it and rejects without a call of its own.
    let start = Instant::now();
    while state(&proxies[1]) != State::Open {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "B learns of A's trip"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let response = get(&urls[1]).await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(
        response.headers().get("x-failfast").map(|v| v.as_bytes()),
        Some(&b"rejected"[..])
    );
    assert!(response.headers().get("retry-after").is_some());
    assert_eq!(
        failing.hits.load(Ordering::SeqCst),
        hits,
        "B never called it"
    );
    // A counts its trip as published when the store's reply comes back; the
    // script's SPUBLISH can reach B before that reply reaches A.
    let start = Instant::now();
    while stats[0].published() == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "A hears the store's reply"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!((stats[0].published(), stats[1].applied()), (1, 1));
}
