//! The tower `RetryPolicy` outside a `FailFastLayer` (feature `tower`): one
//! upstream, one breaker, on tokio's paused clock, which the breaker reads
//! too (`TokioClock`). Each retry the policy marks goes through the
//! breaker's retry budget as it does through a `KeyedLayer`
//! (`retry_tower.rs`): a token or a ratio budget with no room refuses it,
//! unsent; the caller gets the answer before it (or with
//! `WhenRefused::Rejection` the `RejectReason::RetryBudget`); the refusal is
//! counted; a first try is admitted whatever the budget holds. The same in
//! `AtEnd` mode, and for a request type of the user's own that says it is a
//! retry (`Attempt`).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use failfast::tower::{
    retry_attempt, Attempt, FailFastLayer, HttpClassifier, Retries, RetryAttempt, RetryPolicy,
    TokioClock, WhenRefused,
};
use failfast::{Breaker, Builder, CallCounts, RejectReason, RetryBudget};
use http_body_util::Empty;
use hyper::body::Bytes;
use tower::retry::RetryLayer;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

mod retry_client;
use retry_client::{get, rejection, send, Client};

type Single = Arc<Breaker<TokioClock>>;

/// The upstream: answers with the queued statuses, then `default`; records
/// each call's retry mark (0 for a first try).
#[derive(Clone, Default)]
struct Upstream {
    queued: Arc<Mutex<VecDeque<u16>>>,
    marks: Arc<Mutex<Vec<u32>>>,
    default: u16,
}

impl Upstream {
    fn new(default: u16) -> Upstream {
        Upstream {
            default,
            ..Upstream::default()
        }
    }

    fn queue(&self, answers: &[u16]) {
        self.queued.lock().unwrap().extend(answers);
    }

    fn calls(&self) -> usize {
        self.marks.lock().unwrap().len()
    }

    fn marks(&self) -> Vec<u32> {
        self.marks.lock().unwrap().clone()
    }

    fn status(&self, req: &http::Request<String>) -> u16 {
        let mark = retry_attempt(req.extensions()).map_or(0, |a| a.number());
        self.marks.lock().unwrap().push(mark);
        let next = self.queued.lock().unwrap().pop_front();
        next.unwrap_or(self.default)
    }
}

/// A breaker that never opens in these tests, counting calls, with `budget`.
fn breaker(budget: RetryBudget) -> Single {
    let template: Builder = Breaker::builder()
        .consecutive_failures(1000)
        .count_calls(true)
        .retry_budget(budget);
    Arc::new(template.build_with_clock(TokioClock::new()).unwrap())
}

/// `RetryLayer` outside a `FailFastLayer` on `breaker`, over `up`.
fn client(breaker: &Single, up: &Upstream, policy: RetryPolicy) -> Client {
    let up = up.clone();
    let svc = ServiceBuilder::new()
        .layer(RetryLayer::new(policy))
        .layer(FailFastLayer::new(breaker.clone()).classify(HttpClassifier::new()))
        .service_fn(move |req: http::Request<String>| {
            let status = up.status(&req);
            let answer = http::Response::builder().status(status).body(()).unwrap();
            async move { Ok::<_, Infallible>(answer) }
        });
    tower::util::BoxService::new(svc)
}

fn counts(breaker: &Single) -> CallCounts {
    breaker.snapshot().calls.expect("count_calls(true)")
}

#[tokio::test(start_paused = true)]
async fn a_token_budget_refuses_a_retry_through_the_single_layer() {
    // gRPC's throttling: 4 tokens, a retry while more than 2 are left; each
    // failure takes one, retries' included.
    let b = breaker(RetryBudget::tokens(4, 1.6));
    let up = Upstream::new(503);
    let mut c = client(&b, &up, RetryPolicy::default());

    // The first try's 503 leaves 3 tokens: the retry goes. Its 503 leaves
    // 2: the third attempt is refused, unsent, and the caller gets the 503
    // of the retry that went.
    assert_eq!(send(&mut c, get()).await.unwrap(), 503);
    assert_eq!(up.marks(), [0, 1], "the refused retry was not sent");
    let calls = counts(&b);
    assert_eq!(calls.retries_refused, 1, "the refusal is counted");
    assert_eq!(calls.admitted, 2);
    assert_eq!(b.snapshot().retry_room, Some(0));

    // The budget is empty: a first try still goes, and its retry does not.
    assert_eq!(send(&mut c, get()).await.unwrap(), 503);
    assert_eq!(up.marks()[2..], [0], "a first try, its retry refused");
    assert_eq!(counts(&b).retries_refused, 2);

    // A first try is admitted whatever the budget holds, and its success
    // pays in (1.6 tokens: 2.6 > 2, room for a retry again).
    up.queue(&[200]);
    assert_eq!(send(&mut c, get()).await.unwrap(), 200);
    assert_eq!(up.marks()[3..], [0]);
    assert_eq!(counts(&b).admitted, 4);
    assert_eq!(b.snapshot().retry_room, Some(1));
}

#[tokio::test(start_paused = true)]
async fn first_tries_pay_into_a_ratio_budget_and_an_empty_one_stops_retries() {
    // Half a retry per first try, no reserve: the sequence retry_tower.rs
    // runs through a keyed layer, through the single one.
    let b = breaker(RetryBudget::ratio(0.5, Duration::from_secs(10), 0));
    let up = Upstream::new(200);
    let mut c = client(&b, &up, RetryPolicy::default());

    // Only this request's own first try paid in: half a retry. The retry is
    // refused, unsent, and the caller gets the 503.
    up.queue(&[503]);
    assert_eq!(send(&mut c, get()).await.unwrap(), 503);
    assert_eq!(up.marks(), [0], "the refused retry was not sent");
    assert_eq!(counts(&b).retries_refused, 1, "the refusal is counted");

    // Three more first tries: 2 retries in the budget (4 × 0.5).
    for _ in 0..3 {
        assert_eq!(send(&mut c, get()).await.unwrap(), 200);
    }
    // Its first try pays half a retry more (2.5): both retries go, and the
    // third attempt's answer is returned.
    up.queue(&[503, 503, 503]);
    let before = up.calls();
    assert_eq!(send(&mut c, get()).await.unwrap(), 503);
    assert_eq!(up.marks()[before..], [0, 1, 2]);
    assert_eq!(counts(&b).retries_refused, 1);

    // Half a retry left, half more from this first try: one retry, then the
    // budget is empty. The answer of the retry that went (the 502) is
    // returned, not the first one's.
    up.queue(&[503, 502]);
    let before = up.calls();
    assert_eq!(send(&mut c, get()).await.unwrap(), 502);
    assert_eq!(up.marks()[before..], [0, 1]);
    assert_eq!(counts(&b).retries_refused, 2);
    // Every attempt sent was admitted; the two refused retries were not.
    assert_eq!(counts(&b).admitted, up.calls() as u64);
}

#[tokio::test(start_paused = true)]
async fn with_when_refused_rejection_an_empty_budget_returns_the_rejection() {
    let b = breaker(RetryBudget::ratio(0.5, Duration::from_secs(10), 0));
    let up = Upstream::new(503);
    let rules = Retries::builder()
        .when_refused(WhenRefused::Rejection)
        .build()
        .unwrap();
    let mut c = client(&b, &up, RetryPolicy::new(rules));
    let err = send(&mut c, get()).await.unwrap_err();
    assert_eq!(rejection(&err), RejectReason::RetryBudget);
    assert_eq!(up.calls(), 1, "the refused retry was not sent");
    assert_eq!(counts(&b).retries_refused, 1);
}

#[tokio::test(start_paused = true)]
async fn classified_at_the_end_a_retry_goes_through_the_budget_too() {
    let b = breaker(RetryBudget::tokens(4, 1.6));
    let up = Upstream::new(503);
    let seen = up.clone();
    let svc = ServiceBuilder::new()
        .layer(RetryLayer::new(RetryPolicy::default()))
        .layer(FailFastLayer::new(b.clone()).classify_at_end(HttpClassifier::new()))
        .service_fn(move |req: http::Request<String>| {
            let status = seen.status(&req);
            let answer = http::Response::builder()
                .status(status)
                .body(Empty::<Bytes>::new())
                .unwrap();
            async move { Ok::<_, Infallible>(answer) }
        });
    // A 503 head tells: each attempt's verdict is taken at its head, as in
    // the AtHead test above. Two attempts, the third refused.
    let response = svc.oneshot(get()).await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(up.marks(), [0, 1], "the refused retry was not sent");
    assert_eq!(counts(&b).retries_refused, 1);
}

/// A request type of the user's own that knows whether it is a retry.
struct Job {
    retry: bool,
}

impl Attempt for Job {
    fn retry_attempt(&self) -> Option<RetryAttempt> {
        self.retry.then(|| RetryAttempt::new(1))
    }
}

#[tokio::test(start_paused = true)]
async fn a_request_type_of_its_own_says_which_attempts_are_retries() {
    // 4 tokens, a retry while more than 2 are left; each failure takes one.
    let b = breaker(RetryBudget::tokens(4, 1.0));
    let calls = Arc::new(Mutex::new(0));
    let seen = calls.clone();
    let mut svc = FailFastLayer::new(b.clone()).layer(tower::service_fn(move |_: Job| {
        *seen.lock().unwrap() += 1;
        async { Err::<(), _>(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)) }
    }));
    let first = |retry| Job { retry };
    assert!(svc.ready().await.unwrap().call(first(false)).await.is_err());
    // 3 tokens left: a retry goes; its failure leaves 2.
    let err = svc.ready().await.unwrap().call(first(true)).await;
    assert!(err.unwrap_err().is::<std::io::Error>(), "sent");
    let err = svc.ready().await.unwrap().call(first(true)).await;
    assert_eq!(rejection(&err.unwrap_err()), RejectReason::RetryBudget);
    assert_eq!(*calls.lock().unwrap(), 2, "the refused retry was not sent");
    // A first try is not throttled.
    let err = svc.ready().await.unwrap().call(first(false)).await;
    assert!(err.unwrap_err().is::<std::io::Error>(), "sent");
    assert_eq!(*calls.lock().unwrap(), 3);
    assert_eq!(counts(&b).retries_refused, 1);
}
