//! The tower fallback (feature `tower`): a breaker's rejection becomes the
//! recover's answer — a 503 with `Retry-After`, or a stale copy marked as
//! such — and nothing else changes: admitted calls, their errors, and a
//! rejection the recover declines pass through.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use failfast::tower::{
    is_stale, mark_stale, unavailable, FailFastLayer, FallbackLayer, Stale, CACHE_STATUS_STALE,
};
use failfast::{Breaker, ManualClock, RejectReason, Rejected};
use tower::{BoxError, Layer, Service, ServiceExt};

type Response = http::Response<String>;

fn breaker(clock: &ManualClock) -> Arc<Breaker<ManualClock>> {
    Arc::new(
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_secs(10))
            .jitter(0.0)
            .build_with_clock(clock.clone())
            .unwrap(),
    )
}

/// An upstream answering `body` with `status`, counting its calls.
fn upstream(
    calls: Arc<AtomicUsize>,
    status: Arc<Mutex<u16>>,
) -> impl Service<
    http::Request<()>,
    Response = Response,
    Error = BoxError,
    Future = impl std::future::Future<Output = Result<Response, BoxError>> + Send,
> + Clone {
    tower::service_fn(move |req: http::Request<()>| {
        calls.fetch_add(1, Ordering::SeqCst);
        let status = *status.lock().unwrap();
        async move {
            if status >= 500 {
                return Err::<Response, BoxError>(format!("upstream {status}").into());
            }
            Ok(http::Response::new(format!("fresh {}", req.uri().path())))
        }
    })
}

fn get(path: &str) -> http::Request<()> {
    http::Request::get(path).body(()).unwrap()
}

#[tokio::test]
async fn an_open_breaker_calls_the_fallback_with_the_rejection_and_the_answer_is_marked() {
    let clock = ManualClock::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let status = Arc::new(Mutex::new(200));
    let seen: Arc<Mutex<Vec<Rejected>>> = Arc::default();
    let cache = Arc::new(Mutex::new(
        HashMap::<String, (String, std::time::Duration)>::new(),
    ));
    let (log, c) = (seen.clone(), cache.clone());
    let fallback = FallbackLayer::with_request(
        |req: &http::Request<()>| req.uri().path().to_owned(),
        move |path: String, rejected: &Rejected| {
            log.lock().unwrap().push(rejected.clone());
            let (body, age) = c.lock().unwrap().get(&path)?.clone();
            let mut response = http::Response::new(body);
            mark_stale(&mut response, rejected, Some(age));
            Some(response)
        },
    );
    let mut svc = fallback
        .layer(FailFastLayer::new(breaker(&clock)).layer(upstream(calls.clone(), status.clone())));

    let fresh = svc
        .ready()
        .await
        .unwrap()
        .call(get("/rates"))
        .await
        .unwrap();
    assert_eq!(fresh.body(), "fresh /rates");
    assert!(!is_stale(&fresh) && !fresh.headers().contains_key("x-failfast"));
    cache
        .lock()
        .unwrap()
        .insert("/rates".into(), (fresh.into_body(), Duration::from_secs(3)));
    assert!(
        seen.lock().unwrap().is_empty(),
        "closed: the fallback was never called"
    );

    *status.lock().unwrap() = 503;
    let failed = svc
        .ready()
        .await
        .unwrap()
        .call(get("/rates"))
        .await
        .unwrap_err();
    assert_eq!(
        failed.to_string(),
        "upstream 503",
        "a call that ran and failed is not answered"
    );
    assert!(seen.lock().unwrap().is_empty());

    clock.advance(Duration::from_secs(4));
    let stale = svc
        .ready()
        .await
        .unwrap()
        .call(get("/rates"))
        .await
        .unwrap();
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the rejected call did not run"
    );
    assert_eq!(stale.body(), "fresh /rates");
    assert!(is_stale(&stale));
    assert_eq!(stale.headers()["x-failfast"], "fallback");
    assert_eq!(stale.headers()["cache-status"], CACHE_STATUS_STALE);
    assert_eq!(stale.headers()["age"], "3");
    let mark = stale.extensions().get::<Stale>().unwrap();
    assert_eq!(mark.age, Some(Duration::from_secs(3)));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].reason(), RejectReason::Open);
    assert_eq!(seen[0].retry_after(), Some(Duration::from_secs(6)));
    assert_eq!(mark.rejected, seen[0]);

    // A cache miss: the recover declines and the rejection goes through.
    let err = svc
        .ready()
        .await
        .unwrap()
        .call(get("/other"))
        .await
        .unwrap_err();
    assert!(err.is::<Rejected>());
}

#[tokio::test]
async fn the_ready_made_answer_is_a_503_with_retry_after() {
    let clock = ManualClock::new();
    let b = breaker(&clock);
    let calls = Arc::new(AtomicUsize::new(0));
    let called = Arc::new(AtomicUsize::new(0));
    let counter = called.clone();
    let mut svc = FallbackLayer::new(move |rejected: &Rejected| {
        counter.fetch_add(1, Ordering::SeqCst);
        Some(unavailable::<String>(rejected))
    })
    .layer(FailFastLayer::new(b.clone()).layer(upstream(calls.clone(), Arc::new(Mutex::new(200)))));
    for _ in 0..5 {
        assert_eq!(
            svc.ready()
                .await
                .unwrap()
                .call(get("/"))
                .await
                .unwrap()
                .status(),
            200
        );
    }
    assert_eq!(called.load(Ordering::SeqCst), 0, "closed: never called");
    b.force_open();
    let answer = svc.ready().await.unwrap().call(get("/")).await.unwrap();
    assert_eq!(answer.status(), 503);
    assert_eq!(answer.headers()["x-failfast"], "rejected");
    assert!(
        !answer.headers().contains_key("retry-after"),
        "forced open names no time"
    );
    b.reset();
    b.try_acquire().unwrap().failure(); // opens for 10 s
    clock.advance(Duration::from_millis(1_500));
    let answer = svc.ready().await.unwrap().call(get("/")).await.unwrap();
    assert_eq!(answer.headers()["retry-after"], "9", "8.5 s, rounded up");
    assert_eq!(called.load(Ordering::SeqCst), 2);
    assert_eq!(calls.load(Ordering::SeqCst), 5);
}
