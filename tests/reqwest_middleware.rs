//! The reqwest middleware (feature `reqwest`) against a real HTTP server on
//! loopback (hyper), on a `ManualClock`: 503s open the upstream's breaker and
//! a rejected call sends nothing; a 404 never opens it; a refused connection
//! counts; a probe closes it; a dropped call is judged as the keyed tower
//! layer judges one; a 503's `Retry-After` opens it for the hint (the
//! tripping one by default, any with `hints()`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use failfast::registry::HostKey;
use failfast::reqwest::BreakerMiddleware;
use failfast::{Breaker, Builder, ManualClock, Registry, Rejected, State};
use http_body_util::Empty;
use hyper::body::Bytes;
use tokio::net::TcpListener;

mod loopback;
use loopback::Upstream;

type Hosts = Registry<HostKey, std::collections::hash_map::RandomState, ManualClock>;

fn hosts(template: Builder, clock: &ManualClock) -> Arc<Hosts> {
    Arc::new(
        Registry::<HostKey>::builder(template)
            .build_with_clock(clock.clone())
            .unwrap(),
    )
}

fn client(registry: &Arc<Hosts>) -> reqwest_middleware::ClientWithMiddleware {
    reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(BreakerMiddleware::new(registry.clone()))
        .build()
}

fn state(registry: &Hosts, key: &str) -> State {
    registry.handle_from(key).state()
}

fn rejected(err: &reqwest_middleware::Error) -> Option<&Rejected> {
    match err {
        reqwest_middleware::Error::Middleware(e) => e.downcast_ref::<Rejected>(),
        reqwest_middleware::Error::Reqwest(_) => None,
    }
}

#[tokio::test]
async fn server_errors_open_the_breaker_and_a_rejected_call_sends_nothing() {
    let clock = ManualClock::new();
    let registry = hosts(
        Breaker::builder()
            .consecutive_failures(3)
            .open_duration(Duration::from_secs(30)),
        &clock,
    );
    let client = client(&registry);
    let up = Upstream::start(503).await;
    for sent in 1..=3 {
        let response = client.get(up.url("/v1")).send().await.unwrap();
        assert_eq!(response.status(), 503);
        assert_eq!(up.requests(), sent);
    }
    assert_eq!(state(&registry, &up.key()), State::Open);
    // Open: refused before anything is sent.
    let err = client.get(up.url("/v1")).send().await.unwrap_err();
    let rejected = rejected(&err).expect("a Rejected inside Error::Middleware");
    assert_eq!(
        rejected.upstream().map(|u| u.to_string()),
        Some(up.key()),
        "named by its upstream"
    );
    assert_eq!(up.requests(), 3, "a rejected call sends nothing");
    // A 429 is a failure too (a fresh upstream, one breaker per host).
    let busy = Upstream::start(429).await;
    for _ in 0..3 {
        client.get(busy.url("/")).send().await.unwrap();
    }
    assert_eq!(state(&registry, &busy.key()), State::Open);
    assert_eq!(registry.len(), 2);
}

#[tokio::test]
async fn client_errors_never_open_it() {
    let clock = ManualClock::new();
    let registry = hosts(Breaker::builder().consecutive_failures(1), &clock);
    let client = client(&registry);
    let up = Upstream::start(404).await;
    for sent in 1..=10 {
        let response = client.get(up.url("/missing")).send().await.unwrap();
        assert_eq!(response.status(), 404);
        assert_eq!(up.requests(), sent);
    }
    assert_eq!(state(&registry, &up.key()), State::Closed);
    // And a success after them still finds it closed; one 500 opens it.
    up.answer(500);
    client.get(up.url("/")).send().await.unwrap();
    assert_eq!(state(&registry, &up.key()), State::Open);
}

#[tokio::test]
async fn a_refused_connection_counts_as_a_failure() {
    let clock = ManualClock::new();
    let registry = hosts(Breaker::builder().consecutive_failures(2), &clock);
    let client = client(&registry);
    // A port that was just free: nothing listens there.
    let closed = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let url = format!("http://{closed}/");
    for _ in 0..2 {
        let err = client.get(&url).send().await.unwrap_err();
        assert!(
            matches!(&err, reqwest_middleware::Error::Reqwest(e) if e.is_connect()),
            "{err:?}"
        );
    }
    assert_eq!(state(&registry, &closed.to_string()), State::Open);
    let err = client.get(&url).send().await.unwrap_err();
    assert!(rejected(&err).is_some(), "{err:?}");
}

#[tokio::test]
async fn a_probe_closes_it() {
    let clock = ManualClock::new();
    let registry = hosts(
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_secs(10))
            .backoff_off(),
        &clock,
    );
    let client = client(&registry);
    let up = Upstream::start(502).await;
    client.get(up.url("/")).send().await.unwrap();
    assert_eq!(state(&registry, &up.key()), State::Open);
    clock.advance(Duration::from_secs(9));
    assert!(rejected(&client.get(up.url("/")).send().await.unwrap_err()).is_some());
    assert_eq!(up.requests(), 1);
    // The open duration has passed: the next call is the probe, and it succeeds.
    clock.advance(Duration::from_secs(1));
    up.answer(200);
    let response = client.get(up.url("/")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(up.requests(), 2);
    assert_eq!(state(&registry, &up.key()), State::Closed);
}

/// Starts `call`, waits until the upstream has the request, lets `held` pass
/// on the clock, and drops the call unanswered.
async fn drop_after<F: Future>(call: F, up: &Upstream, clock: &ManualClock, held: Duration) {
    let mut call = Box::pin(call);
    tokio::select! {
        _ = &mut call => panic!("the upstream never answers"),
        () = up.arrived.notified() => {}
    }
    clock.advance(held);
    drop(call);
}

/// A dropped call is judged by its age, as the keyed layer judges one: the
/// same upstream behind the middleware and behind the layer, dropped early
/// (neutral) and late (past `abandoned_after`: a failure).
#[tokio::test]
async fn a_dropped_call_is_judged_as_the_keyed_layers_drop() {
    use tower::{Layer, Service, ServiceExt};

    let template = || {
        Breaker::builder()
            .consecutive_failures(1)
            .abandoned_after(Duration::from_secs(5))
    };
    for (held, expected) in [
        (Duration::from_secs(1), State::Closed),
        (Duration::from_secs(6), State::Open),
    ] {
        // Through the middleware.
        let clock = ManualClock::new();
        let registry = hosts(template(), &clock);
        let up = Upstream::start(0).await;
        drop_after(client(&registry).get(up.url("/")).send(), &up, &clock, held).await;
        let through_middleware = state(&registry, &up.key());

        // Through the keyed layer, over a hyper client to the same kind of upstream.
        let clock = ManualClock::new();
        let layered = hosts(template(), &clock);
        let up = Upstream::start(0).await;
        let hyper_client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<Empty<Bytes>>();
        let mut svc = failfast::tower::KeyedLayer::new(layered.clone()).layer(hyper_client);
        let request = http::Request::get(up.url("/"))
            .body(Empty::<Bytes>::new())
            .unwrap();
        let call = svc.ready().await.unwrap().call(request);
        drop_after(call, &up, &clock, held).await;
        let through_layer = state(&layered, &up.key());

        assert_eq!(through_middleware, through_layer, "held {held:?}");
        assert_eq!(through_middleware, expected, "held {held:?}");
    }
}

#[tokio::test]
async fn a_503s_retry_after_opens_the_breaker_for_the_hint() {
    let clock = ManualClock::new();
    clock.set_wall(std::time::UNIX_EPOCH + Duration::from_secs(1_750_000_000));
    let registry = hosts(
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_secs(5))
            .hints(),
        &clock,
    );
    let client = client(&registry);
    let wait = |up: &Upstream| {
        registry
            .handle_from(&up.key())
            .try_acquire()
            .err()
            .and_then(|r| r.retry_after())
    };
    let within = |d: Option<Duration>, secs: u64| {
        d.is_some_and(|d| d >= Duration::from_secs(secs) && d < Duration::from_secs(secs + 1))
    };

    // Delta-seconds.
    let up = Upstream::start(503).await;
    up.retry_after("120");
    assert_eq!(client.get(up.url("/")).send().await.unwrap().status(), 503);
    assert!(within(wait(&up), 120), "{:?}", wait(&up));

    // An HTTP-date, on the breaker's pinned wall clock.
    use failfast::Clock;
    let up = Upstream::start(429).await;
    up.retry_after(&httpdate::fmt_http_date(
        clock.wall() + Duration::from_secs(90),
    ));
    client.get(up.url("/")).send().await.unwrap();
    assert!(within(wait(&up), 90), "{:?}", wait(&up));

    // A bad one: ignored, counted, the breaker's own duration.
    let up = Upstream::start(503).await;
    up.retry_after("1000000000000");
    let before = failfast::hint::hints_ignored_total();
    client.get(up.url("/")).send().await.unwrap();
    // The only bad hint of this file's tests: counted once.
    assert_eq!(failfast::hint::hints_ignored_total(), before + 1);
    assert!(within(wait(&up), 5), "{:?}", wait(&up));

    // Not read on other statuses: a 500 opens for the breaker's own.
    let up = Upstream::start(500).await;
    up.retry_after("120");
    client.get(up.url("/")).send().await.unwrap();
    assert!(within(wait(&up), 5), "{:?}", wait(&up));
}

/// With the default breaker (no `hints()`), a real 503 with
/// `Retry-After: 120` that trips opens its host's breaker for 120 s, as a
/// user who copies the guide gets it.
#[tokio::test]
async fn by_default_a_tripping_503s_retry_after_opens_the_breaker_for_the_hint() {
    let clock = ManualClock::new();
    let registry = hosts(Breaker::builder().consecutive_failures(1), &clock);
    let client = client(&registry);
    let up = Upstream::start(503).await;
    up.retry_after("120");
    assert_eq!(client.get(up.url("/")).send().await.unwrap().status(), 503);
    let wait = registry
        .handle_from(&up.key())
        .try_acquire()
        .err()
        .and_then(|r| r.retry_after());
    assert!(
        wait.is_some_and(|d| d >= Duration::from_secs(120) && d < Duration::from_secs(121)),
        "{wait:?}"
    );
}
