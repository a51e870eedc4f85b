//! The axum example of `examples/axum.rs`, driven over real loopback
//! sockets: the shop's router served by axum, its flaky pricing dependency
//! served by axum too, and an HTTP client asking the shop.
//!
//! Pricing fails (503), the shop's breaker for it opens on the third
//! failure, and from then on the fallback answers with the list price
//! without calling pricing, while the status route shows the breaker open;
//! once the open period has passed a probe reaches pricing and closes it.
//! Business answers (404) and bad requests never open it; a pricing server
//! that refuses connections opens it too. The breakers run on a
//! `ManualClock`: nothing waits for time to pass.

#[path = "../examples/axum.rs"]
#[allow(unreachable_pub, missing_docs)]
mod example;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use example::{HttpClient, Pricing, Shop};
use failfast::{ManualClock, Registry, State};
use http_body_util::BodyExt;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::net::TcpListener;

/// The shop on a free loopback port, in front of `pricing_addr`.
struct Scene {
    shop: Arc<Shop<ManualClock>>,
    addr: SocketAddr,
    clock: ManualClock,
    client: HttpClient,
}

impl Scene {
    async fn new(pricing_addr: SocketAddr) -> Scene {
        let clock = ManualClock::new();
        let breakers = Registry::builder(example::breaker_template())
            .build_with_clock(clock.clone())
            .unwrap();
        let shop = Arc::new(Shop::new(breakers, pricing_addr));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(example::serve(listener, example::router(shop.clone())));
        Scene {
            shop,
            addr,
            clock,
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// `GET path` on the shop: the status and the body.
    async fn get(&self, path: &str) -> (u16, String) {
        let uri = format!("http://{}{path}", self.addr).parse().unwrap();
        let response = self.client.get(uri).await.expect("the shop answers");
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    /// The state of pricing's breaker.
    fn pricing_state(&self) -> State {
        self.shop
            .breakers
            .handle(self.shop.pricing.as_str())
            .state()
    }
}

/// A pricing service on a free loopback port.
async fn pricing() -> (Arc<Pricing>, SocketAddr) {
    let pricing = Arc::new(Pricing::default());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(example::serve(
        listener,
        example::pricing_router(pricing.clone()),
    ));
    (pricing, addr)
}

fn set_failing(pricing: &Pricing, on: bool) {
    // Relaxed: the server reads it in a later call (the call's own
    // connection orders it).
    pricing.failing.store(on, Ordering::Relaxed);
}

const FRESH: &str = r#"{"sku":"widget","cents":1250,"source":"pricing"}"#;
const FALLBACK: &str = r#"{"sku":"widget","cents":1200,"source":"list price","why":"circuit open; retry after 30.0s"}"#;
const FAILED: &str = r#"{"error":"pricing answered 503 Service Unavailable"}"#;

#[tokio::test]
async fn an_outage_opens_the_breaker_the_fallback_answers_and_the_status_route_shows_it() {
    let (pricing, pricing_addr) = pricing().await;
    let scene = Scene::new(pricing_addr).await;

    assert_eq!(scene.get("/price/widget").await, (200, FRESH.to_owned()));
    let status = scene.get(example::STATUS_PATH).await.1;
    assert!(
        status.contains(&format!(
            r#""upstreams":[{{"upstream":"{pricing_addr}","state":"closed""#
        )),
        "{status}"
    );

    set_failing(&pricing, true);
    for nth in 1..=3 {
        assert_eq!(
            scene.get("/price/widget").await,
            (502, FAILED.to_owned()),
            "call {nth}"
        );
    }
    assert_eq!(scene.pricing_state(), State::Open);
    assert_eq!(pricing.calls(), 4);

    for _ in 0..5 {
        assert_eq!(scene.get("/price/widget").await, (200, FALLBACK.to_owned()));
    }
    assert_eq!(
        pricing.calls(),
        4,
        "the fallback answered without calling pricing"
    );

    let (code, status) = scene.get(example::STATUS_PATH).await;
    assert_eq!(code, 200);
    let expected = format!(
        r#"{{"tracked":1,"open":1,"half_open":0,"shown":1,"omitted":0,"upstreams":[{{"upstream":"{pricing_addr}","state":"open","retry_after_ms":30000,"#
    );
    assert!(status.starts_with(&expected), "{status}");
    assert!(
        status.contains(r#""trips_in_a_row":1,"backoff_step":1,"ramp_fraction":null}]}"#),
        "{status}"
    );
}

#[tokio::test]
async fn after_the_open_period_a_probe_reaches_pricing_and_closes_the_breaker() {
    let (pricing, pricing_addr) = pricing().await;
    let scene = Scene::new(pricing_addr).await;
    set_failing(&pricing, true);
    for _ in 0..3 {
        assert_eq!(scene.get("/price/widget").await.0, 502);
    }
    assert_eq!(scene.pricing_state(), State::Open);

    set_failing(&pricing, false);
    scene.clock.advance(Duration::from_millis(29_999));
    let (code, body) = scene.get("/price/widget").await;
    assert_eq!(
        (code, body.as_str()),
        (
            200,
            r#"{"sku":"widget","cents":1200,"source":"list price","why":"circuit open; retry after 1ms"}"#
        )
    );
    assert_eq!(pricing.calls(), 3, "still open 1 ms before the end");

    scene.clock.advance(Duration::from_millis(1));
    assert_eq!(scene.get("/price/widget").await, (200, FRESH.to_owned()));
    assert_eq!(pricing.calls(), 4, "the probe reached pricing");
    assert_eq!(scene.pricing_state(), State::Closed);
    let status = scene.get(example::STATUS_PATH).await.1;
    assert!(status.contains(r#""open":0,"#), "{status}");
}

#[tokio::test]
async fn business_answers_and_bad_requests_never_open_the_breaker() {
    let (pricing, pricing_addr) = pricing().await;
    let scene = Scene::new(pricing_addr).await;
    for _ in 0..5 {
        let (code, body) = scene.get("/price/no-such-thing").await;
        assert_eq!((code, body.as_str()), (404, r#"{"error":"no such sku"}"#));
    }
    assert_eq!(pricing.calls(), 5, "pricing answered each");
    assert_eq!(scene.pricing_state(), State::Closed);

    for path in ["/price/a.b", "/price/%22quoted%22", "/price/%2Fetc"] {
        let (code, body) = scene.get(path).await;
        assert_eq!(
            (code, body.as_str()),
            (400, r#"{"error":"bad sku"}"#),
            "{path}"
        );
    }
    assert_eq!(pricing.calls(), 5, "a bad request is not a call");
    assert_eq!(scene.pricing_state(), State::Closed);
}

#[tokio::test]
async fn a_pricing_service_that_refuses_connections_opens_the_breaker_too() {
    // A port that was just free: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let pricing_addr = listener.local_addr().unwrap();
    drop(listener);
    let scene = Scene::new(pricing_addr).await;
    for nth in 1..=3 {
        let (code, body) = scene.get("/price/widget").await;
        assert_eq!(
            (code, body.as_str()),
            (502, r#"{"error":"pricing unreachable"}"#),
            "call {nth}"
        );
    }
    assert_eq!(scene.pricing_state(), State::Open);
    assert_eq!(scene.get("/price/widget").await, (200, FALLBACK.to_owned()));
}
