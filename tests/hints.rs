//! The upstream's hints reach the breaker through the tower layers: a
//! 503's `Retry-After` (delta-seconds, an HTTP-date resolved on the
//! breaker's pinned wall clock), gRPC's `grpc-retry-pushback-ms` at the
//! head and in the trailers, a deferred verdict's head hint kept to the end,
//! a success's hint not read, a bad hint ignored and counted, and the keyed
//! layer's per-host breakers. Time is a `ManualClock`'s: no sleeps.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use failfast::hint::hints_ignored_total;
use failfast::registry::HostKey;
use failfast::tower::{FailFastLayer, GrpcClassifier, HttpClassifier, KeyedLayer};
use failfast::{Breaker, Clock, ManualClock, Outcome, Registry, State};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::body::Bytes;
use tower::{Layer, Service, ServiceExt};

/// A body of fixed frames: one message, then trailers if any.
#[derive(Debug, Default)]
struct Scripted(VecDeque<Frame<Bytes>>);

impl Scripted {
    fn message_then(trailers: &[(&'static str, &'static str)]) -> Scripted {
        let mut frames = VecDeque::from([Frame::data(Bytes::from_static(b"message"))]);
        if !trailers.is_empty() {
            frames.push_back(Frame::trailers(headers(trailers)));
        }
        Scripted(frames)
    }
}

impl Body for Scripted {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        Poll::Ready(self.0.pop_front().map(Ok))
    }
}

fn headers(fields: &[(&'static str, &'static str)]) -> http::HeaderMap {
    let mut map = http::HeaderMap::new();
    for (name, value) in fields {
        map.append(*name, http::HeaderValue::from_static(value));
    }
    map
}

/// What the upstream answers: a status, head fields and trailers.
#[derive(Clone)]
struct Answer {
    status: u16,
    head: Vec<(&'static str, String)>,
    trailers: &'static [(&'static str, &'static str)],
}

fn answer(status: u16, head: &[(&'static str, &str)]) -> Answer {
    Answer {
        status,
        head: head.iter().map(|(n, v)| (*n, v.to_string())).collect(),
        trailers: &[],
    }
}

/// A service that answers each request with the next of `answers`.
fn upstream(
    answers: Vec<Answer>,
) -> impl Service<
    http::Request<()>,
    Response = http::Response<Scripted>,
    Error = Infallible,
    Future = impl std::future::Future<Output = Result<http::Response<Scripted>, Infallible>>,
> + Clone {
    let answers = Arc::new(std::sync::Mutex::new(VecDeque::from(answers)));
    tower::service_fn(move |_req: http::Request<()>| {
        let a = answers.lock().unwrap().pop_front().expect("an answer left");
        let mut response = http::Response::new(Scripted::message_then(a.trailers));
        *response.status_mut() = http::StatusCode::from_u16(a.status).unwrap();
        for (name, value) in a.head {
            response
                .headers_mut()
                .append(name, http::HeaderValue::from_str(&value).unwrap());
        }
        async move { Ok::<_, Infallible>(response) }
    })
}

fn breaker(clock: &ManualClock, trip_after: u32) -> Arc<Breaker<ManualClock>> {
    Arc::new(
        Breaker::builder()
            .consecutive_failures(trip_after)
            .open_duration(Duration::from_secs(5))
            .hints()
            .build_with_clock(clock.clone())
            .unwrap(),
    )
}

/// How long a call now would be told to wait, if it is rejected.
fn open_for(breaker: &Breaker<ManualClock>) -> Option<Duration> {
    match breaker.try_acquire() {
        Ok(_) => None, // dropped unused: neutral
        Err(rejected) => rejected.retry_after(),
    }
}

/// `d` is `secs`, give or take the breaker's stamp resolution (≤ 1 s).
fn about(d: Option<Duration>, secs: u64) -> bool {
    d.is_some_and(|d| d >= Duration::from_secs(secs) && d < Duration::from_secs(secs + 1))
}

async fn call<S>(svc: &mut S) -> S::Response
where
    S: Service<http::Request<()>>,
    S::Error: std::fmt::Debug,
{
    svc.ready()
        .await
        .unwrap()
        .call(http::Request::new(()))
        .await
        .unwrap()
}

#[tokio::test]
async fn a_503s_retry_after_opens_the_breaker_for_the_hint() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock, 1);
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify(HttpClassifier::new())
        .layer(upstream(vec![answer(503, &[("retry-after", "120")])]));
    assert_eq!(call(&mut svc).await.status(), 503);
    assert_eq!(breaker.state(), State::Open);
    assert!(about(open_for(&breaker), 120), "{:?}", open_for(&breaker));
    clock.advance(Duration::from_secs(119));
    assert!(open_for(&breaker).is_some(), "still open after 119 s");
}

#[tokio::test]
async fn without_a_hint_it_opens_for_its_own_duration() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock, 1);
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify(HttpClassifier::new())
        .layer(upstream(vec![answer(503, &[])]));
    call(&mut svc).await;
    assert!(about(open_for(&breaker), 5), "{:?}", open_for(&breaker));
}

#[tokio::test]
async fn a_retry_after_date_is_resolved_on_the_breakers_wall_clock() {
    let clock = ManualClock::new();
    clock.set_wall(std::time::UNIX_EPOCH + Duration::from_secs(1_750_000_000));
    let date = httpdate::fmt_http_date(clock.wall() + Duration::from_secs(90));
    let breaker = breaker(&clock, 1);
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify(HttpClassifier::new())
        .layer(upstream(vec![answer(429, &[("retry-after", &date)])]));
    call(&mut svc).await;
    assert!(about(open_for(&breaker), 90), "{:?}", open_for(&breaker));
}

/// The count of ignored hints is process-wide, and this file's tests run
/// side by side: those that send a bad hint take this lock, so each reads
/// its own count exactly.
static COUNTING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn a_bad_retry_after_is_ignored_and_counted() {
    let _alone = COUNTING.lock().await;
    for bad in ["1000000000000", "-5", "soon"] {
        let clock = ManualClock::new();
        let breaker = breaker(&clock, 1);
        let mut svc = FailFastLayer::new(breaker.clone())
            .classify(HttpClassifier::new())
            .layer(upstream(vec![answer(503, &[("retry-after", bad)])]));
        let before = hints_ignored_total();
        call(&mut svc).await;
        assert_eq!(hints_ignored_total(), before + 1, "{bad:?} counted once");
        assert!(about(open_for(&breaker), 5), "{bad:?}: its own duration");
    }
}

#[tokio::test]
async fn a_date_in_the_past_is_ignored_and_counted() {
    let _alone = COUNTING.lock().await;
    let clock = ManualClock::new();
    let breaker = breaker(&clock, 1);
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify(HttpClassifier::new())
        .layer(upstream(vec![answer(
            503,
            &[("retry-after", "Sun, 06 Nov 1994 08:49:37 GMT")],
        )]));
    let before = hints_ignored_total();
    call(&mut svc).await;
    assert_eq!(hints_ignored_total(), before + 1);
    assert!(about(open_for(&breaker), 5));
}

#[tokio::test]
async fn a_successs_hint_is_not_read() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock, 1);
    // This API's 503 means "served from a degraded path": a success.
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify(HttpClassifier::new().status(503, Outcome::Success))
        .layer(upstream(vec![
            answer(503, &[("retry-after", "120")]),
            answer(500, &[]),
        ]));
    call(&mut svc).await;
    assert_eq!(breaker.state(), State::Closed);
    call(&mut svc).await; // trips, with no hint remembered
    assert!(about(open_for(&breaker), 5), "{:?}", open_for(&breaker));
}

#[tokio::test]
async fn a_hint_on_a_verdict_that_does_not_trip_lengthens_the_next_trip() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock, 2);
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify(HttpClassifier::new())
        .layer(upstream(vec![
            answer(503, &[("retry-after", "60")]),
            answer(500, &[]),
        ]));
    call(&mut svc).await;
    assert_eq!(breaker.state(), State::Closed);
    clock.advance(Duration::from_secs(10));
    call(&mut svc).await;
    assert_eq!(breaker.state(), State::Open);
    assert!(about(open_for(&breaker), 50), "{:?}", open_for(&breaker));
}

const GRPC: (&str, &str) = ("content-type", "application/grpc");

#[tokio::test]
async fn grpc_pushback_at_the_head_of_a_trailers_only_response() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock, 1);
    let head = [
        GRPC,
        ("grpc-status", "14"),
        ("grpc-retry-pushback-ms", "30000"),
    ];
    // Both modes read it: at the head, and at the end where the head decides.
    let mut at_head = FailFastLayer::new(breaker.clone())
        .classify(GrpcClassifier::new())
        .layer(upstream(vec![answer(200, &head)]));
    call(&mut at_head).await;
    assert!(about(open_for(&breaker), 30), "{:?}", open_for(&breaker));

    let breaker = self::breaker(&clock, 1);
    let mut at_end = FailFastLayer::new(breaker.clone())
        .classify_at_end(GrpcClassifier::new())
        .layer(upstream(vec![answer(200, &head)]));
    let response = call(&mut at_end).await;
    assert!(!response.body().is_pending(), "the head decided");
    assert!(about(open_for(&breaker), 30), "{:?}", open_for(&breaker));
}

#[tokio::test]
async fn grpc_pushback_in_the_trailers() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock, 1);
    let mut unavailable = answer(200, &[GRPC]);
    unavailable.trailers = &[("grpc-status", "14"), ("grpc-retry-pushback-ms", "45000")];
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify_at_end(GrpcClassifier::new())
        .layer(upstream(vec![unavailable]));
    let response = call(&mut svc).await;
    assert!(response.body().is_pending());
    assert_eq!(breaker.state(), State::Closed, "nothing recorded yet");
    response.into_body().collect().await.unwrap();
    assert_eq!(breaker.state(), State::Open);
    assert!(about(open_for(&breaker), 45), "{:?}", open_for(&breaker));
}

#[tokio::test]
async fn grpc_ok_trailers_are_not_searched_for_pushback() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock, 1);
    let mut ok = answer(200, &[GRPC]);
    ok.trailers = &[("grpc-status", "0"), ("grpc-retry-pushback-ms", "45000")];
    let mut failed = answer(200, &[GRPC]);
    failed.trailers = &[("grpc-status", "14")];
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify_at_end(GrpcClassifier::new())
        .layer(upstream(vec![ok, failed]));
    call(&mut svc).await.into_body().collect().await.unwrap();
    call(&mut svc).await.into_body().collect().await.unwrap();
    assert!(about(open_for(&breaker), 5), "{:?}", open_for(&breaker));
}

#[tokio::test]
async fn a_deferred_verdict_keeps_the_heads_hint_to_the_end() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock, 1);
    // A 503 this API sends while it sheds load is not a failure here, so
    // its verdict waits for the body; its Retry-After goes with it.
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify_at_end(HttpClassifier::new().status(503, Outcome::Ignored))
        .layer(upstream(vec![
            answer(503, &[("retry-after", "60")]),
            answer(500, &[]),
        ]));
    let response = call(&mut svc).await;
    assert!(response.body().is_pending());
    response.into_body().collect().await.unwrap();
    assert_eq!(breaker.state(), State::Closed, "ignored: no trip");
    call(&mut svc).await; // a 500: trips at the head
    assert!(about(open_for(&breaker), 60), "{:?}", open_for(&breaker));
}

#[tokio::test]
async fn the_keyed_layer_hints_each_hosts_breaker() {
    let clock = ManualClock::new();
    let registry = Arc::new(
        Registry::<HostKey>::builder(
            Breaker::builder()
                .consecutive_failures(1)
                .open_duration(Duration::from_secs(5))
                .hints(),
        )
        .build_with_clock(clock.clone())
        .unwrap(),
    );
    let mut svc = KeyedLayer::new(registry.clone())
        .classify(HttpClassifier::new())
        .layer(upstream(vec![
            answer(503, &[("retry-after", "120")]),
            answer(503, &[]),
        ]));
    for host in ["a.example", "b.example"] {
        let request = http::Request::builder()
            .uri(format!("http://{host}/"))
            .body(())
            .unwrap();
        svc.ready().await.unwrap().call(request).await.unwrap();
    }
    let a = registry.handle("a.example:80");
    let b = registry.handle("b.example:80");
    let wait = |h: &failfast::Handle<HostKey, ManualClock>| {
        h.try_acquire().err().and_then(|r| r.retry_after())
    };
    assert!(about(wait(&a), 120), "{:?}", wait(&a));
    assert!(about(wait(&b), 5), "{:?}", wait(&b));
}

/// A breaker with every setting at its default but its trip condition (no
/// `hints()`): the hint of the verdict that trips travels with it.
fn default_breaker(clock: &ManualClock) -> Arc<Breaker<ManualClock>> {
    Arc::new(
        Breaker::builder()
            .consecutive_failures(1)
            .build_with_clock(clock.clone())
            .unwrap(),
    )
}

/// As the guide's layers are written, with the default breaker: a
/// tripping 503's `Retry-After` and a tripping gRPC pushback (at the head
/// and in the trailers) set the open period, and the keyed layer's
/// per-host breakers take their own hosts' hints. A hint that does not
/// trip is not remembered by default.
#[tokio::test]
async fn by_default_the_tripping_verdicts_hint_sets_the_open_period() {
    let clock = ManualClock::new();
    let breaker = default_breaker(&clock);
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify(HttpClassifier::new())
        .layer(upstream(vec![answer(503, &[("retry-after", "120")])]));
    assert_eq!(call(&mut svc).await.status(), 503);
    assert!(about(open_for(&breaker), 120), "{:?}", open_for(&breaker));

    let head = [
        GRPC,
        ("grpc-status", "14"),
        ("grpc-retry-pushback-ms", "30000"),
    ];
    let breaker = default_breaker(&clock);
    let mut at_head = FailFastLayer::new(breaker.clone())
        .classify(GrpcClassifier::new())
        .layer(upstream(vec![answer(200, &head)]));
    call(&mut at_head).await;
    assert!(about(open_for(&breaker), 30), "{:?}", open_for(&breaker));

    let breaker = default_breaker(&clock);
    let mut unavailable = answer(200, &[GRPC]);
    unavailable.trailers = &[("grpc-status", "14"), ("grpc-retry-pushback-ms", "45000")];
    let mut at_end = FailFastLayer::new(breaker.clone())
        .classify_at_end(GrpcClassifier::new())
        .layer(upstream(vec![unavailable]));
    call(&mut at_end).await.into_body().collect().await.unwrap();
    assert!(about(open_for(&breaker), 45), "{:?}", open_for(&breaker));

    let registry = Arc::new(
        Registry::<HostKey>::builder(Breaker::builder().consecutive_failures(1))
            .build_with_clock(clock.clone())
            .unwrap(),
    );
    let mut keyed = KeyedLayer::new(registry.clone())
        .classify(HttpClassifier::new())
        .layer(upstream(vec![
            answer(503, &[("retry-after", "120")]),
            answer(503, &[]),
        ]));
    for host in ["a.example", "b.example"] {
        let request = http::Request::builder()
            .uri(format!("http://{host}/"))
            .body(())
            .unwrap();
        keyed.ready().await.unwrap().call(request).await.unwrap();
    }
    let wait = |host: &str| {
        let h = registry.handle(host);
        h.try_acquire().err().and_then(|r| r.retry_after())
    };
    assert!(
        about(wait("a.example:80"), 120),
        "{:?}",
        wait("a.example:80")
    );
    let step = registry.handle("b.example:80").config().open_duration(1);
    assert_eq!(
        wait("b.example:80"),
        Some(step),
        "no hint: the schedule's step"
    );

    // A hint that does not trip is not remembered by default.
    let breaker = Arc::new(
        Breaker::builder()
            .consecutive_failures(2)
            .build_with_clock(clock.clone())
            .unwrap(),
    );
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify(HttpClassifier::new())
        .layer(upstream(vec![
            answer(503, &[("retry-after", "60")]),
            answer(500, &[]),
        ]));
    call(&mut svc).await;
    call(&mut svc).await;
    assert_eq!(open_for(&breaker), Some(breaker.config().open_duration(1)));
}
