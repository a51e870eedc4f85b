//! The reqwest `RetryMiddleware` before a `BreakerMiddleware` (feature
//! `reqwest`), against a real HTTP server on loopback (hyper), on tokio's
//! paused clock, which the breakers read too: each retry goes through its
//! host's retry budget, first tries pay into it, an empty budget stops
//! retries (nothing sent; the caller gets the answer before the refused
//! retry, or with `WhenRefused::Rejection` the `RejectReason::RetryBudget`),
//! hints are waited for, and only idempotent requests, failures and at most
//! `max_attempts` attempts are retried. Without a breaker after it, the
//! middleware does not retry at all.

use std::sync::Arc;
use std::time::Duration;

use failfast::http::{Retries, WhenRefused};
use failfast::registry::HostKey;
use failfast::reqwest::{BreakerMiddleware, RetryMiddleware};
use failfast::{
    Breaker, Builder, Clock, Nanos, Registry, RejectReason, Rejected, RetryBudget, State,
};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use tokio::net::TcpListener;
use tokio::time::Instant;

mod loopback;
use loopback::Upstream;

/// Tokio's clock as the breakers' clock (paused here).
#[derive(Clone, Copy)]
struct TokioTime(Instant);

impl Clock for TokioTime {
    fn now(&self) -> Nanos {
        Nanos::from_duration(self.0.elapsed())
    }
}

type Hosts = Registry<HostKey, std::collections::hash_map::RandomState, TokioTime>;

fn hosts(template: Builder) -> Arc<Hosts> {
    Arc::new(
        Registry::<HostKey>::builder(template.count_calls(true))
            .build_with_clock(TokioTime(Instant::now()))
            .unwrap(),
    )
}

/// A breaker that never opens in these tests, with `budget`.
fn lenient(budget: Option<RetryBudget>) -> Builder {
    let b = Breaker::builder().consecutive_failures(1000);
    match budget {
        Some(budget) => b.retry_budget(budget),
        None => b,
    }
}

/// The chain: retries, then the breaker.
fn client(registry: &Arc<Hosts>, retries: Retries) -> ClientWithMiddleware {
    ClientBuilder::new(reqwest::Client::new())
        .with(RetryMiddleware::new(retries))
        .with(BreakerMiddleware::new(registry.clone()))
        .build()
}

async fn get(client: &ClientWithMiddleware, up: &Upstream) -> reqwest_middleware::Result<u16> {
    Ok(client.get(up.url("/")).send().await?.status().as_u16())
}

/// A `POST` with a body: not idempotent.
async fn post(client: &ClientWithMiddleware, up: &Upstream) -> reqwest_middleware::Result<u16> {
    let sent = client.post(up.url("/")).body("{}").send().await?;
    Ok(sent.status().as_u16())
}

fn rejection(err: &reqwest_middleware::Error) -> RejectReason {
    match err {
        reqwest_middleware::Error::Middleware(e) => {
            e.downcast_ref::<Rejected>().expect("a rejection").reason()
        }
        other => panic!("not a rejection: {other}"),
    }
}

/// The host's call counters.
fn counts(registry: &Hosts, up: &Upstream) -> failfast::CallCounts {
    registry
        .handle_from(&up.addr.to_string())
        .snapshot()
        .calls
        .expect("count_calls(true)")
}

/// The old rule: a refused retry returns the refusal.
fn rejection_rules() -> Retries {
    Retries::builder()
        .when_refused(WhenRefused::Rejection)
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn failures_are_retried_up_to_three_attempts() {
    let up = Upstream::start(200).await;
    let registry = hosts(lenient(None));
    let c = client(&registry, Retries::default());
    up.queue(&[503, 500]);
    assert_eq!(get(&c, &up).await.unwrap(), 200);
    assert_eq!(up.requests(), 3);

    up.queue(&[503; 5]);
    assert_eq!(get(&c, &up).await.unwrap(), 503);
    assert_eq!(up.requests(), 6, "three attempts, the last answer returned");
    let calls = registry
        .handle_from(&up.addr.to_string())
        .snapshot()
        .calls
        .unwrap();
    assert_eq!(calls.admitted, 6, "each attempt passed the breaker");
}

#[tokio::test(start_paused = true)]
async fn first_tries_pay_in_and_an_empty_budget_stops_retries_unsent() {
    let up = Upstream::start(200).await;
    // Half a retry per first try, no reserve.
    let budget = RetryBudget::ratio(0.5, Duration::from_secs(10), 0);
    let registry = hosts(lenient(Some(budget)));
    let c = client(&registry, Retries::default());

    // The retry is refused, unsent, and the caller gets the 503 it would
    // have got without retries.
    up.queue(&[503]);
    assert_eq!(get(&c, &up).await.unwrap(), 503);
    assert_eq!(up.requests(), 1, "the refused retry was not sent");
    assert_eq!(counts(&registry, &up).retries_refused, 1, "counted");

    // Three more first tries: 2 retries paid in (4 × 0.5), and the failing
    // request's own first try half of one more.
    for _ in 0..3 {
        assert_eq!(get(&c, &up).await.unwrap(), 200);
    }
    up.queue(&[503; 3]);
    assert_eq!(get(&c, &up).await.unwrap(), 503);
    assert_eq!(up.requests(), 4 + 3);
    // Half a retry left, half more from this first try: one retry, then
    // the budget is empty. The answer of the retry that went (the 502) is
    // returned, not the first one's.
    up.queue(&[503, 502]);
    assert_eq!(get(&c, &up).await.unwrap(), 502);
    assert_eq!(up.requests(), 7 + 2);
    assert_eq!(counts(&registry, &up).retries_refused, 2);
}

#[tokio::test(start_paused = true)]
async fn with_when_refused_rejection_an_empty_budget_returns_the_rejection() {
    // The same sequence as above, under the old rule.
    let up = Upstream::start(200).await;
    let budget = RetryBudget::ratio(0.5, Duration::from_secs(10), 0);
    let registry = hosts(lenient(Some(budget)));
    let c = client(&registry, rejection_rules());

    up.queue(&[503]);
    let err = get(&c, &up).await.unwrap_err();
    assert_eq!(rejection(&err), RejectReason::RetryBudget);
    assert_eq!(up.requests(), 1, "the refused retry was not sent");

    for _ in 0..3 {
        assert_eq!(get(&c, &up).await.unwrap(), 200);
    }
    up.queue(&[503; 3]);
    assert_eq!(get(&c, &up).await.unwrap(), 503);
    assert_eq!(up.requests(), 4 + 3);
    up.queue(&[503; 2]);
    let err = get(&c, &up).await.unwrap_err();
    assert_eq!(rejection(&err), RejectReason::RetryBudget);
    assert_eq!(up.requests(), 7 + 2);
    assert_eq!(counts(&registry, &up).retries_refused, 2);
}

#[tokio::test(start_paused = true)]
async fn a_hint_within_the_limit_is_waited_for_a_longer_one_is_returned() {
    let up = Upstream::start(200).await;
    let registry = hosts(lenient(None));
    let c = client(&registry, Retries::default());

    up.queue_hinted(&[(503, "1")]);
    let start = Instant::now();
    assert_eq!(get(&c, &up).await.unwrap(), 200);
    assert!(
        start.elapsed() >= Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(up.requests(), 2);

    up.queue_hinted(&[(429, "5")]);
    assert_eq!(get(&c, &up).await.unwrap(), 429);
    assert_eq!(up.requests(), 3, "a hint over the limit: not retried");
}

#[tokio::test(start_paused = true)]
async fn non_idempotent_requests_and_client_errors_are_not_retried() {
    let up = Upstream::start(503).await;
    let registry = hosts(lenient(None));
    let c = client(&registry, Retries::default());
    assert_eq!(post(&c, &up).await.unwrap(), 503);
    assert_eq!(up.requests(), 1);

    up.queue(&[404]);
    assert_eq!(get(&c, &up).await.unwrap(), 404);
    assert_eq!(up.requests(), 2);

    let writes = client(
        &registry,
        Retries::builder().non_idempotent(true).build().unwrap(),
    );
    assert_eq!(post(&writes, &up).await.unwrap(), 503);
    assert_eq!(up.requests(), 5);
}

#[tokio::test(start_paused = true)]
async fn a_retry_refused_by_the_breaker_its_failure_opened_returns_that_failure() {
    let up = Upstream::start(503).await;
    let registry = hosts(Breaker::builder().consecutive_failures(1));
    let c = client(&registry, Retries::default());
    // The first 503 opens the breaker; the retry is refused, not sent, and
    // the caller gets the 503.
    assert_eq!(get(&c, &up).await.unwrap(), 503);
    assert_eq!(up.requests(), 1);
    assert_eq!(
        registry.handle_from(&up.addr.to_string()).state(),
        State::Open
    );
    assert_eq!(counts(&registry, &up).rejected, 1, "the refusal is counted");
    // A first try refused by the open breaker: the rejection, at once.
    let err = get(&c, &up).await.unwrap_err();
    assert_eq!(rejection(&err), RejectReason::Open);
    assert_eq!(up.requests(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_retry_refused_after_a_connection_error_returns_that_error() {
    // A port nothing listens on: the connection is refused.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let registry = hosts(Breaker::builder().consecutive_failures(1));
    let c = client(&registry, Retries::default());
    let err = c.get(format!("http://{addr}/")).send().await.unwrap_err();
    assert!(
        matches!(&err, reqwest_middleware::Error::Reqwest(e) if e.is_connect()),
        "the connection error, not the rejection: {err:?}"
    );
    let breaker = registry.handle_from(&addr.to_string());
    assert_eq!(breaker.state(), State::Open);
    let calls = breaker.snapshot().calls.unwrap();
    assert_eq!(
        (calls.admitted, calls.rejected),
        (1, 1),
        "one try, one refusal"
    );
}

#[tokio::test(start_paused = true)]
async fn with_when_refused_rejection_a_retry_refused_by_an_open_breaker_returns_it() {
    let up = Upstream::start(503).await;
    let registry = hosts(Breaker::builder().consecutive_failures(1));
    let c = client(&registry, rejection_rules());
    let err = get(&c, &up).await.unwrap_err();
    assert_eq!(rejection(&err), RejectReason::Open);
    assert_eq!(up.requests(), 1);
    assert_eq!(
        registry.handle_from(&up.addr.to_string()).state(),
        State::Open
    );
}

#[tokio::test(start_paused = true)]
async fn without_a_breaker_after_it_nothing_is_retried() {
    let up = Upstream::start(503).await;
    let registry = hosts(lenient(None));
    // The breaker first: the retries would pass it as one call.
    let wrong_order = ClientBuilder::new(reqwest::Client::new())
        .with(BreakerMiddleware::new(registry.clone()))
        .with(RetryMiddleware::default())
        .build();
    assert_eq!(get(&wrong_order, &up).await.unwrap(), 503);
    assert_eq!(up.requests(), 1);
    let alone = ClientBuilder::new(reqwest::Client::new())
        .with(RetryMiddleware::default())
        .build();
    assert_eq!(get(&alone, &up).await.unwrap(), 503);
    assert_eq!(up.requests(), 2);
}
