//! The tonic example of `examples/tonic.rs`, driven: a real tonic server on
//! 127.0.0.1 in this process, a real tonic client whose channel is wrapped
//! in `FailFastLayer::classify_at_end(GrpcClassifier::new())`.
//!
//! The server answers `UNAVAILABLE`, the breaker opens on the third, and the
//! calls after it fail fast with `UNAVAILABLE` and the `Rejected` as the
//! status's source, without reaching the server; business answers
//! (`NOT_FOUND`) never open it; a refused connection counts against the
//! server; once the open period has passed, one probe reaches the server
//! and its answer, judged from the trailers, closes the breaker. The
//! breaker runs on a `ManualClock`: nothing waits for time to pass.

#[path = "../examples/tonic.rs"]
#[allow(unreachable_pub, missing_docs)]
mod example;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use example::shop::{PriceRequest, PricesClient};
use example::{GuardedChannel, Pricing};
use failfast::{Breaker, ManualClock, RejectReason, State};
use tokio::net::TcpListener;
use tonic::{Code, Status};

/// A pricing server on a free loopback port, and the clock and breaker of
/// a client of it.
struct Scene {
    pricing: Arc<Pricing>,
    addr: SocketAddr,
    clock: ManualClock,
    breaker: Arc<Breaker<ManualClock>>,
}

impl Scene {
    async fn new() -> Scene {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let pricing = Arc::new(Pricing::default());
        tokio::spawn(example::serve(listener, pricing.clone()));
        let clock = ManualClock::new();
        let breaker = example::breaker_template()
            .count_calls(true)
            .build_with_clock(clock.clone())
            .unwrap();
        Scene {
            pricing,
            addr,
            clock,
            breaker: Arc::new(breaker),
        }
    }

    fn client(&self) -> PricesClient<GuardedChannel<ManualClock>> {
        example::client(self.addr, self.breaker.clone())
    }

    fn set_unavailable(&self, on: bool) {
        // Relaxed: the server reads it in a later call (the call's own
        // channel orders it).
        self.pricing.unavailable.store(on, Ordering::Relaxed);
    }
}

async fn price(
    client: &mut PricesClient<GuardedChannel<ManualClock>>,
    sku: &str,
) -> Result<u64, Status> {
    let request = PriceRequest { sku: sku.into() };
    client
        .price(request)
        .await
        .map(|reply| reply.get_ref().cents)
}

fn counts(breaker: &Breaker<ManualClock>) -> failfast::CallCounts {
    breaker.snapshot().calls.expect("count_calls is on")
}

#[tokio::test]
async fn unavailable_opens_the_breaker_and_later_calls_fail_fast_without_reaching_the_server() {
    let scene = Scene::new().await;
    let mut client = scene.client();

    assert_eq!(price(&mut client, "widget").await.unwrap(), 1250);
    assert_eq!(
        counts(&scene.breaker).successes,
        1,
        "judged from the trailers"
    );

    scene.set_unavailable(true);
    for nth in 1..=3 {
        let status = price(&mut client, "widget").await.unwrap_err();
        assert_eq!(status.code(), Code::Unavailable, "call {nth}");
        assert_eq!(
            status.message(),
            "pricing is restarting",
            "the server's own"
        );
        assert!(example::rejection(&status).is_none(), "call {nth} was sent");
        let expected = if nth < 3 { State::Closed } else { State::Open };
        assert_eq!(scene.breaker.state(), expected, "after call {nth}");
    }
    assert_eq!(scene.pricing.calls(), 4);
    assert_eq!(counts(&scene.breaker).failures, 3);

    for _ in 0..5 {
        let status = price(&mut client, "widget").await.unwrap_err();
        assert_eq!(
            status.code(),
            Code::Unavailable,
            "a rejection is UNAVAILABLE"
        );
        let rejected = example::rejection(&status).expect("the breaker's rejection");
        assert_eq!(rejected.reason(), RejectReason::Open);
        assert_eq!(rejected.retry_after(), Some(Duration::from_secs(10)));
        assert_eq!(
            rejected.upstream().map(|u| u.to_string()).as_deref(),
            Some("pricing")
        );
        assert_eq!(status.message(), rejected.to_string());
    }
    assert_eq!(
        scene.pricing.calls(),
        4,
        "no rejected call reached the server"
    );
    let counts = counts(&scene.breaker);
    assert_eq!((counts.admitted, counts.rejected), (4, 5));
}

#[tokio::test]
async fn business_answers_prove_the_server_up_and_never_open_it() {
    let scene = Scene::new().await;
    let mut client = scene.client();
    for _ in 0..10 {
        let status = price(&mut client, "no-such-sku").await.unwrap_err();
        assert_eq!(status.code(), Code::NotFound);
    }
    assert_eq!(scene.breaker.state(), State::Closed);
    assert_eq!(counts(&scene.breaker).ignored, 10);
    assert_eq!(scene.pricing.calls(), 10);
}

#[tokio::test]
async fn a_refused_connection_counts_against_the_server() {
    // A port that was just free: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let breaker = Arc::new(
        example::breaker_template()
            .count_calls(true)
            .build_with_clock(ManualClock::new())
            .unwrap(),
    );
    let mut client = example::client(addr, breaker.clone());
    for _ in 0..3 {
        let status = price(&mut client, "widget").await.unwrap_err();
        assert!(example::rejection(&status).is_none(), "sent: {status:?}");
    }
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(counts(&breaker).failures, 3);
    let status = price(&mut client, "widget").await.unwrap_err();
    assert!(example::rejection(&status).is_some(), "{status:?}");
}

#[tokio::test]
async fn after_the_open_period_one_probe_reaches_the_server_and_closes_it() {
    let scene = Scene::new().await;
    let mut client = scene.client();
    scene.set_unavailable(true);
    for _ in 0..3 {
        price(&mut client, "widget").await.unwrap_err();
    }
    assert_eq!(scene.breaker.state(), State::Open);

    scene.clock.advance(Duration::from_millis(9_999));
    let status = price(&mut client, "widget").await.unwrap_err();
    assert!(
        example::rejection(&status).is_some(),
        "still open 1 ms early"
    );
    assert_eq!(scene.pricing.calls(), 3);

    scene.set_unavailable(false);
    scene.clock.advance(Duration::from_millis(1));
    assert_eq!(price(&mut client, "gadget").await.unwrap(), 4999);
    assert_eq!(scene.pricing.calls(), 4, "the probe reached the server");
    assert_eq!(
        scene.breaker.state(),
        State::Closed,
        "the probe's OK, read from its trailers, closed the breaker"
    );
    assert_eq!(price(&mut client, "widget").await.unwrap(), 1250);
}
