//! The tower `RetryPolicy` outside a `KeyedLayer` (feature `tower`), on
//! tokio's paused clock, which the breakers read too (`TokioClock`): each
//! retry goes through its host's retry budget, first tries pay into it, an
//! empty budget stops retries (the caller gets the answer before the
//! refused retry, or with `WhenRefused::Rejection` the
//! `RejectReason::RetryBudget`), hints are waited for, and only idempotent
//! requests, failures and at most `max_attempts` attempts are retried.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use failfast::registry::HostKey;
use failfast::tower::{
    retry_attempt, HttpClassifier, KeyedLayer, Retries, RetryPolicy, TokioClock, WhenRefused,
};
use failfast::{Breaker, Builder, Registry, RejectReason, RetryBudget, State};
use tokio::time::Instant;
use tower::retry::RetryLayer;
use tower::{ServiceBuilder, ServiceExt};

mod retry_client;
use retry_client::{get, rejection, send, Client};

type Hosts = Registry<HostKey, std::collections::hash_map::RandomState, TokioClock>;

/// Answers queued: a status and a `Retry-After`, if any.
type Answers = Arc<Mutex<VecDeque<(u16, Option<&'static str>)>>>;

/// The upstream: answers with the queued (status, Retry-After) pairs, then
/// 200; records each call's retry mark (0 for a first try).
#[derive(Clone, Default)]
struct Upstream {
    queued: Answers,
    marks: Arc<Mutex<Vec<u32>>>,
    default: Arc<Mutex<u16>>,
}

impl Upstream {
    fn new(default: u16) -> Upstream {
        let up = Upstream::default();
        *up.default.lock().unwrap() = default;
        up
    }

    fn queue(&self, answers: &[(u16, Option<&'static str>)]) {
        self.queued.lock().unwrap().extend(answers);
    }

    fn calls(&self) -> usize {
        self.marks.lock().unwrap().len()
    }

    fn marks(&self) -> Vec<u32> {
        self.marks.lock().unwrap().clone()
    }

    fn answer(&self, req: &http::Request<String>) -> http::Response<()> {
        let mark = retry_attempt(req.extensions()).map_or(0, |a| a.number());
        self.marks.lock().unwrap().push(mark);
        let default = *self.default.lock().unwrap();
        let (status, retry_after) = self
            .queued
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or((default, None));
        let mut response = http::Response::builder().status(status);
        if let Some(after) = retry_after {
            response = response.header(http::header::RETRY_AFTER, after);
        }
        response.body(()).unwrap()
    }
}

fn registry(template: Builder) -> Arc<Hosts> {
    Arc::new(
        Registry::<HostKey>::builder(template)
            .build_with_clock(TokioClock::new())
            .unwrap(),
    )
}

/// A breaker that never opens in these tests, with `budget`.
fn lenient(budget: Option<RetryBudget>) -> Builder {
    let b = Breaker::builder()
        .consecutive_failures(1000)
        .count_calls(true);
    match budget {
        Some(budget) => b.retry_budget(budget),
        None => b,
    }
}

fn client(registry: &Arc<Hosts>, up: &Upstream, policy: RetryPolicy) -> Client {
    let up = up.clone();
    let svc = ServiceBuilder::new()
        .layer(RetryLayer::new(policy))
        .layer(KeyedLayer::new(registry.clone()).classify(HttpClassifier::new()))
        .service_fn(move |req: http::Request<String>| {
            let answer = up.answer(&req);
            async move { Ok::<_, Infallible>(answer) }
        });
    tower::util::BoxService::new(svc)
}

/// The host's call counters.
fn counts(hosts: &Hosts) -> failfast::CallCounts {
    hosts
        .handle_from("api.example:80")
        .snapshot()
        .calls
        .expect("count_calls(true)")
}

/// The old rule: a refused retry returns the refusal.
fn rejection_policy() -> RetryPolicy {
    RetryPolicy::new(
        Retries::builder()
            .when_refused(WhenRefused::Rejection)
            .build()
            .unwrap(),
    )
}

#[test]
fn the_policy_is_clone_send_and_sync() {
    fn check<T: Clone + Send + Sync + 'static>() {}
    check::<RetryPolicy>();
    assert_eq!(
        RetryPolicy::default().retries().when_refused(),
        WhenRefused::LastAnswer
    );
}

#[tokio::test(start_paused = true)]
async fn a_failure_is_retried_and_the_retry_is_marked() {
    let up = Upstream::new(200);
    up.queue(&[(503, None), (502, None)]);
    let hosts = registry(lenient(None));
    let mut c = client(&hosts, &up, RetryPolicy::default());
    assert_eq!(send(&mut c, get()).await.unwrap(), 200);
    assert_eq!(up.marks(), [0, 1, 2]);
}

#[tokio::test(start_paused = true)]
async fn at_most_three_attempts_by_default() {
    let up = Upstream::new(503);
    let hosts = registry(lenient(None));
    let mut c = client(&hosts, &up, RetryPolicy::default());
    assert_eq!(send(&mut c, get()).await.unwrap(), 503);
    assert_eq!(up.calls(), 3);

    let up = Upstream::new(503);
    let five = Retries::builder().max_attempts(5).build().unwrap();
    let mut c = client(&hosts, &up, RetryPolicy::new(five));
    assert_eq!(send(&mut c, get()).await.unwrap(), 503);
    assert_eq!(up.calls(), 5);
}

#[tokio::test(start_paused = true)]
async fn first_tries_pay_in_and_an_empty_budget_stops_retries() {
    // Half a retry per first try, no reserve.
    let budget = RetryBudget::ratio(0.5, Duration::from_secs(10), 0);
    let up = Upstream::new(200);
    let hosts = registry(lenient(Some(budget)));
    let mut c = client(&hosts, &up, RetryPolicy::default());

    // Nothing paid in yet but this request's own first try: half a retry.
    // The retry is refused, unsent, and the caller gets the 503 it would
    // have got without retries.
    up.queue(&[(503, None)]);
    assert_eq!(send(&mut c, get()).await.unwrap(), 503);
    assert_eq!(up.marks(), [0], "the refused retry was not sent");
    assert_eq!(counts(&hosts).retries_refused, 1, "the refusal is counted");

    // Three more first tries: 2 retries in the budget (4 × 0.5).
    for _ in 0..3 {
        assert_eq!(send(&mut c, get()).await.unwrap(), 200);
    }
    up.queue(&[(503, None), (503, None), (503, None)]);
    let before = up.calls();
    // Its first try paid half a retry more (2.5): both retries went, and
    // the third attempt's answer is returned.
    assert_eq!(send(&mut c, get()).await.unwrap(), 503);
    assert_eq!(up.marks()[before..], [0, 1, 2]);
    assert_eq!(counts(&hosts).retries_refused, 1);

    // Half a retry left, half more from this first try: one retry, then
    // the budget is empty. The answer of the retry that went (the 502) is
    // returned, not the first one's.
    up.queue(&[(503, None), (502, None)]);
    let before = up.calls();
    assert_eq!(send(&mut c, get()).await.unwrap(), 502);
    assert_eq!(up.marks()[before..], [0, 1]);
    assert_eq!(counts(&hosts).retries_refused, 2);
}

#[tokio::test(start_paused = true)]
async fn with_when_refused_rejection_an_empty_budget_returns_the_rejection() {
    // The same sequence as above, under the old rule.
    let budget = RetryBudget::ratio(0.5, Duration::from_secs(10), 0);
    let up = Upstream::new(200);
    let hosts = registry(lenient(Some(budget)));
    let mut c = client(&hosts, &up, rejection_policy());

    up.queue(&[(503, None)]);
    let err = send(&mut c, get()).await.unwrap_err();
    assert_eq!(rejection(&err), RejectReason::RetryBudget);
    assert_eq!(up.calls(), 1, "the refused retry was not sent");
    assert_eq!(counts(&hosts).retries_refused, 1);

    for _ in 0..3 {
        assert_eq!(send(&mut c, get()).await.unwrap(), 200);
    }
    up.queue(&[(503, None), (503, None), (503, None)]);
    let before = up.calls();
    assert_eq!(send(&mut c, get()).await.unwrap(), 503);
    assert_eq!(up.marks()[before..], [0, 1, 2]);

    up.queue(&[(503, None), (503, None)]);
    let before = up.calls();
    let err = send(&mut c, get()).await.unwrap_err();
    assert_eq!(rejection(&err), RejectReason::RetryBudget);
    assert_eq!(up.marks()[before..], [0, 1]);
    assert_eq!(counts(&hosts).retries_refused, 2);
}

#[tokio::test(start_paused = true)]
async fn the_last_answer_is_returned_when_the_attempts_run_out() {
    let budget = RetryBudget::ratio(1.0, Duration::from_secs(10), 100);
    let up = Upstream::new(503);
    let hosts = registry(lenient(Some(budget)));
    let mut c = client(&hosts, &up, RetryPolicy::default());
    assert_eq!(send(&mut c, get()).await.unwrap(), 503);
    assert_eq!(up.calls(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_hint_within_the_limit_is_waited_for_a_longer_one_is_returned() {
    let up = Upstream::new(200);
    let hosts = registry(lenient(None));
    let mut c = client(&hosts, &up, RetryPolicy::default());

    up.queue(&[(503, Some("1"))]);
    let start = Instant::now();
    assert_eq!(send(&mut c, get()).await.unwrap(), 200);
    assert!(
        start.elapsed() >= Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(up.calls(), 2);

    up.queue(&[(429, Some("5"))]);
    let start = Instant::now();
    assert_eq!(send(&mut c, get()).await.unwrap(), 429);
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(up.calls(), 3, "not retried");

    // With a longer limit, the same answer is waited for.
    let five = Retries::builder()
        .max_hint_wait(Duration::from_secs(5))
        .build()
        .unwrap();
    let mut c = client(&hosts, &up, RetryPolicy::new(five));
    up.queue(&[(429, Some("5"))]);
    let start = Instant::now();
    assert_eq!(send(&mut c, get()).await.unwrap(), 200);
    assert!(start.elapsed() >= Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn the_backoff_is_jittered_between_half_and_all_of_its_step() {
    let up = Upstream::new(200);
    let hosts = registry(lenient(None));
    let mut c = client(&hosts, &up, RetryPolicy::default());
    up.queue(&[(503, None), (503, None)]);
    let start = Instant::now();
    assert_eq!(send(&mut c, get()).await.unwrap(), 200);
    // 25–50 ms, then 50–100 ms.
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(75) && waited <= Duration::from_millis(151),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn non_idempotent_requests_are_not_retried_unless_asked() {
    let up = Upstream::new(503);
    let hosts = registry(lenient(None));
    let post = || {
        http::Request::post("http://api.example/orders")
            .body("{}".to_string())
            .unwrap()
    };
    let mut c = client(&hosts, &up, RetryPolicy::default());
    assert_eq!(send(&mut c, post()).await.unwrap(), 503);
    assert_eq!(up.calls(), 1);

    let writes = Retries::builder().non_idempotent(true).build().unwrap();
    let mut c = client(&hosts, &up, RetryPolicy::new(writes));
    assert_eq!(send(&mut c, post()).await.unwrap(), 503);
    assert_eq!(up.calls(), 4);
}

#[tokio::test(start_paused = true)]
async fn client_errors_are_not_retried_but_429_is() {
    let up = Upstream::new(200);
    let hosts = registry(lenient(None));
    let mut c = client(&hosts, &up, RetryPolicy::default());
    up.queue(&[(404, None)]);
    assert_eq!(send(&mut c, get()).await.unwrap(), 404);
    assert_eq!(up.calls(), 1);
    up.queue(&[(429, None)]);
    assert_eq!(send(&mut c, get()).await.unwrap(), 200);
    assert_eq!(up.calls(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_retry_refused_by_the_breaker_its_failure_opened_returns_that_failure() {
    let up = Upstream::new(503);
    let hosts = registry(Breaker::builder().consecutive_failures(1).count_calls(true));
    let mut c = client(&hosts, &up, RetryPolicy::default());
    // The first 503 opens the breaker; the retry is refused, not sent, and
    // the caller gets the 503.
    assert_eq!(send(&mut c, get()).await.unwrap(), 503);
    assert_eq!(up.calls(), 1);
    assert_eq!(hosts.handle_from("api.example:80").state(), State::Open);
    assert_eq!(counts(&hosts).rejected, 1, "the refused retry is counted");
    // A first try refused by the open breaker: the rejection, at once (no
    // earlier answer, no retry loop around a rejection).
    let err = send(&mut c, get()).await.unwrap_err();
    assert_eq!(rejection(&err), RejectReason::Open);
    assert_eq!(up.calls(), 1);
    assert_eq!(counts(&hosts).rejected, 2);
}

#[tokio::test(start_paused = true)]
async fn a_retry_refused_after_an_error_returns_that_error() {
    let hosts = registry(Breaker::builder().consecutive_failures(1));
    let calls = Arc::new(Mutex::new(0));
    let seen = calls.clone();
    let svc = ServiceBuilder::new()
        .layer(RetryLayer::new(RetryPolicy::default()))
        .layer(KeyedLayer::new(hosts.clone()).classify(HttpClassifier::new()))
        .service_fn(move |_req: http::Request<String>| {
            *seen.lock().unwrap() += 1;
            async {
                Err::<http::Response<()>, _>(std::io::Error::new(
                    std::io::ErrorKind::ConnectionRefused,
                    "upstream down",
                ))
            }
        });
    // The error opens the breaker; the retry is refused and the caller
    // gets the upstream's error, not the rejection.
    let err = svc.oneshot(get()).await.unwrap_err();
    let io = err
        .downcast_ref::<std::io::Error>()
        .expect("the upstream's error");
    assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused);
    assert_eq!(*calls.lock().unwrap(), 1);
    assert_eq!(hosts.handle_from("api.example:80").state(), State::Open);
}

#[tokio::test(start_paused = true)]
async fn with_when_refused_rejection_a_retry_refused_by_an_open_breaker_returns_it() {
    let up = Upstream::new(503);
    let hosts = registry(Breaker::builder().consecutive_failures(1));
    let mut c = client(&hosts, &up, rejection_policy());
    // The first 503 opens the breaker; the retry is refused, not sent.
    let err = send(&mut c, get()).await.unwrap_err();
    assert_eq!(rejection(&err), RejectReason::Open);
    assert_eq!(up.calls(), 1);
    assert_eq!(hosts.handle_from("api.example:80").state(), State::Open);
    // Refused at once: no retry loop around a rejection.
    let err = send(&mut c, get()).await.unwrap_err();
    assert_eq!(rejection(&err), RejectReason::Open);
    assert_eq!(up.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_keyed_layer_without_a_budget_admits_retries_as_calls() {
    // No budget on the breaker: the retries are bounded by the attempts.
    let up = Upstream::new(503);
    let hosts = registry(lenient(None));
    let mut c = client(&hosts, &up, RetryPolicy::default());
    for _ in 0..3 {
        assert_eq!(send(&mut c, get()).await.unwrap(), 503);
    }
    assert_eq!(up.calls(), 9);
    let calls = hosts
        .handle_from("api.example:80")
        .snapshot()
        .calls
        .unwrap();
    assert_eq!(calls.admitted, 9);
}
