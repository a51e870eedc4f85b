//! Classification at the end of the response stream (`AtEnd` mode): gRPC
//! statuses in trailers and in trailers-only heads, bodies that fail
//! halfway, bodies dropped unread, slowness judged at the head, and the adapter
//! from tower-http's classifiers, through `FailFastLayer` (and, last, the
//! keyed layer's own `classify_at_end`).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use failfast::tower::{FailFastLayer, GrpcClassifier, HttpClassifier};
use failfast::{Breaker, ManualClock, Rejected, State};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::body::Bytes;
use tower::{Layer, Service, ServiceExt};

/// A body that yields a fixed script of frames and errors, and never says
/// it ended before it did (like a chunked HTTP/1 body or an HTTP/2 stream).
#[derive(Debug, Default)]
struct Scripted(VecDeque<Result<Frame<Bytes>, io::Error>>);

impl Scripted {
    fn data(mut self, s: &'static str) -> Self {
        self.0
            .push_back(Ok(Frame::data(Bytes::from_static(s.as_bytes()))));
        self
    }

    fn grpc_status(mut self, code: &'static str) -> Self {
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static(code));
        self.0.push_back(Ok(Frame::trailers(trailers)));
        self
    }

    fn error(mut self) -> Self {
        self.0
            .push_back(Err(io::Error::from(io::ErrorKind::ConnectionReset)));
        self
    }
}

impl Body for Scripted {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        Poll::Ready(self.0.pop_front())
    }
}

/// A server answering 200 with `make()`'s body (and `head` headers), counting calls.
fn server(
    calls: Arc<AtomicUsize>,
    head: &'static [(&'static str, &'static str)],
    make: fn() -> Scripted,
) -> impl Service<
    http::Request<()>,
    Response = http::Response<Scripted>,
    Error = Infallible,
    Future = impl std::future::Future<Output = Result<http::Response<Scripted>, Infallible>>,
> + Clone {
    tower::service_fn(move |_req: http::Request<()>| {
        calls.fetch_add(1, Ordering::SeqCst);
        let mut response = http::Response::new(make());
        for (name, value) in head {
            response
                .headers_mut()
                .insert(*name, http::HeaderValue::from_static(value));
        }
        async move { Ok::<_, Infallible>(response) }
    })
}

/// A tonic-style unary answer: headers, one message, then `grpc-status: 14`.
fn unavailable_in_trailers() -> Scripted {
    Scripted::default().data("message").grpc_status("14")
}

fn breaker(consecutive: u32) -> Arc<Breaker> {
    Arc::new(
        Breaker::builder()
            .consecutive_failures(consecutive)
            .open_duration(Duration::from_secs(30))
            .count_calls(true)
            .build()
            .unwrap(),
    )
}

const GRPC: &[(&str, &str)] = &[("content-type", "application/grpc")];

#[tokio::test]
async fn grpc_unavailable_in_trailers_trips_the_breaker() {
    let calls = Arc::new(AtomicUsize::new(0));
    let breaker = breaker(3);
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify_at_end(GrpcClassifier::new())
        .layer(server(calls.clone(), GRPC, unavailable_in_trailers));

    for i in 0..3 {
        let response = svc
            .ready()
            .await
            .unwrap()
            .call(http::Request::new(()))
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert!(response.body().is_pending(), "the head cannot tell");
        assert!(!response.body().is_end_stream());
        assert!(format!("{:?}", response.body()).contains("pending: true"));
        assert_eq!(
            breaker.snapshot().consecutive_failures,
            i,
            "nothing recorded yet"
        );
        let body = response.into_body().collect().await.unwrap();
        assert_eq!(
            body.trailers().unwrap()["grpc-status"],
            "14",
            "trailers pass through"
        );
    }
    assert_eq!(breaker.state(), State::Open);

    let err = svc
        .ready()
        .await
        .unwrap()
        .call(http::Request::new(()))
        .await
        .unwrap_err();
    assert!(err.downcast_ref::<Rejected>().is_some());
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "the rejected call never ran"
    );
}

#[tokio::test]
async fn at_the_head_the_same_trailers_go_unseen() {
    let breaker = breaker(3);
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify(GrpcClassifier::new())
        .layer(server(Arc::default(), GRPC, unavailable_in_trailers));
    for _ in 0..3 {
        let response = svc
            .ready()
            .await
            .unwrap()
            .call(http::Request::new(()))
            .await
            .unwrap();
        response.into_body().collect().await.unwrap();
    }
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().calls.unwrap().successes, 3);
}

#[tokio::test]
async fn a_trailers_only_grpc_status_is_recorded_at_the_head() {
    let breaker = breaker(1);
    const UNAVAILABLE: &[(&str, &str)] =
        &[("content-type", "application/grpc"), ("grpc-status", "14")];
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify_at_end(GrpcClassifier::new())
        .layer(server(Arc::default(), UNAVAILABLE, Scripted::default));
    let response = svc
        .ready()
        .await
        .unwrap()
        .call(http::Request::new(()))
        .await
        .unwrap();
    assert!(!response.body().is_pending());
    assert_eq!(breaker.state(), State::Open, "before the body is read");
}

#[tokio::test]
async fn grpc_ok_in_trailers_is_a_success_and_not_found_is_ignored() {
    for (code, successes, ignored) in [("0", 1, 0), ("5", 0, 1)] {
        let breaker = breaker(1);
        let make: fn() -> Scripted = match code {
            "0" => || Scripted::default().data("m").grpc_status("0"),
            _ => || Scripted::default().data("m").grpc_status("5"),
        };
        let mut svc = FailFastLayer::new(breaker.clone())
            .classify_at_end(GrpcClassifier::new())
            .layer(server(Arc::default(), GRPC, make));
        let response = svc
            .ready()
            .await
            .unwrap()
            .call(http::Request::new(()))
            .await
            .unwrap();
        response.into_body().collect().await.unwrap();
        let counts = breaker.snapshot().calls.unwrap();
        assert_eq!(
            (counts.successes, counts.ignored, counts.failures),
            (successes, ignored, 0)
        );
        assert_eq!(breaker.state(), State::Closed, "grpc-status {code}");
    }
}

#[tokio::test]
async fn a_body_that_fails_halfway_is_a_failure() {
    let breaker = breaker(2);
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify_at_end(HttpClassifier::new())
        .layer(server(Arc::default(), &[], || {
            Scripted::default().data("half").error()
        }));
    for _ in 0..2 {
        let response = svc
            .ready()
            .await
            .unwrap()
            .call(http::Request::new(()))
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let err = response.into_body().collect().await.unwrap_err();
        assert_eq!(
            err.kind(),
            io::ErrorKind::ConnectionReset,
            "the error passes through"
        );
    }
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(breaker.snapshot().calls.unwrap().successes, 0);
}

#[tokio::test]
async fn a_whole_body_keeps_the_heads_outcome() {
    let breaker = breaker(1);
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify_at_end(HttpClassifier::new())
        .layer(server(Arc::default(), &[], || {
            Scripted::default().data("a").data("b")
        }));
    let response = svc
        .ready()
        .await
        .unwrap()
        .call(http::Request::new(()))
        .await
        .unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"ab");
    assert_eq!(breaker.snapshot().calls.unwrap().successes, 1);
}

#[tokio::test]
async fn a_body_dropped_unread_at_once_is_neutral() {
    let breaker = breaker(1);
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify_at_end(GrpcClassifier::new())
        .layer(server(Arc::default(), GRPC, unavailable_in_trailers));
    let response = svc
        .ready()
        .await
        .unwrap()
        .call(http::Request::new(()))
        .await
        .unwrap();
    assert_eq!(breaker.snapshot().calls.unwrap().dropped, 0);
    drop(response); // dropped at once: like any permit dropped early, neutral
    let counts = breaker.snapshot().calls.unwrap();
    assert_eq!((counts.dropped, counts.failures), (1, 0));
    assert_eq!(breaker.state(), State::Closed);
}

#[tokio::test]
async fn a_body_that_ends_by_saying_so_is_recorded_without_a_last_poll() {
    // `Full` says `is_end_stream` after its one frame; hyper then stops polling.
    let breaker = breaker(1);
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify_at_end(HttpClassifier::new())
        .layer(tower::service_fn(|_req: http::Request<()>| async {
            Ok::<_, Infallible>(http::Response::new(http_body_util::Full::new(
                Bytes::from_static(b"whole"),
            )))
        }));
    let response = svc
        .ready()
        .await
        .unwrap()
        .call(http::Request::new(()))
        .await
        .unwrap();
    assert_eq!(
        response.body().size_hint().exact(),
        Some(5),
        "passed through"
    );
    let mut body = response.into_body();
    let frame = body.frame().await.unwrap().unwrap();
    assert_eq!(frame.into_data().unwrap(), "whole");
    assert!(body.is_end_stream());
    assert!(!body.is_pending(), "recorded with the last frame");
    assert_eq!(breaker.snapshot().calls.unwrap().successes, 1);
}

#[tokio::test]
async fn an_empty_body_is_recorded_at_the_head() {
    let breaker = breaker(1);
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify_at_end(HttpClassifier::new())
        .layer(tower::service_fn(|_req: http::Request<()>| async {
            Ok::<_, Infallible>(http::Response::new(http_body_util::Empty::<Bytes>::new()))
        }));
    let response = svc
        .ready()
        .await
        .unwrap()
        .call(http::Request::new(()))
        .await
        .unwrap();
    assert!(!response.body().is_pending(), "nothing to wait for");
    assert!(format!("{:?}", response.body()).contains("pending: false"));
    assert_eq!(breaker.snapshot().calls.unwrap().successes, 1);
}

#[tokio::test]
async fn a_stream_is_slow_by_its_head_not_by_the_length_of_its_body() {
    let clock = ManualClock::new();
    let breaker = Arc::new(
        Breaker::builder()
            .slow_call_rate(0.5)
            .slow_call_threshold(Duration::from_millis(100))
            .count_window(10)
            .min_calls(10)
            .build_with_clock(clock.clone())
            .unwrap(),
    );
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify_at_end(GrpcClassifier::new())
        .layer(server(Arc::default(), GRPC, || {
            Scripted::default().data("m").grpc_status("0")
        }));
    // A fast head and a body that takes its time: a healthy stream.
    let response = svc
        .ready()
        .await
        .unwrap()
        .call(http::Request::new(()))
        .await
        .unwrap();
    clock.advance(Duration::from_millis(250));
    response.into_body().collect().await.unwrap();
    let window = breaker.snapshot().window;
    assert_eq!((window.calls, window.slow, window.failures), (1, 0, 0));

    // A head that came after the threshold: slow, however quick the body.
    let call = svc.ready().await.unwrap().call(http::Request::new(()));
    clock.advance(Duration::from_millis(250));
    let response = call.await.unwrap();
    response.into_body().collect().await.unwrap();
    let window = breaker.snapshot().window;
    assert_eq!((window.calls, window.slow, window.failures), (2, 1, 0));
}

#[cfg(feature = "tower-http")]
mod tower_http_adapter {
    use super::*;
    use failfast::tower::FromTowerHttp;
    use tower_http::classify::{GrpcErrorsAsFailures, ServerErrorsAsFailures};

    #[tokio::test]
    async fn grpc_errors_as_failures_at_the_end_of_the_stream() {
        let breaker = breaker(2);
        let mut svc = FailFastLayer::new(breaker.clone())
            .classify_at_end(FromTowerHttp::new(GrpcErrorsAsFailures::new()))
            .layer(server(Arc::default(), GRPC, unavailable_in_trailers));
        for _ in 0..2 {
            let response = svc
                .ready()
                .await
                .unwrap()
                .call(http::Request::new(()))
                .await
                .unwrap();
            assert!(response.body().is_pending());
            response.into_body().collect().await.unwrap();
        }
        assert_eq!(breaker.state(), State::Open);
    }

    #[tokio::test]
    async fn server_errors_as_failures_at_the_head() {
        let breaker = breaker(1);
        let failing = tower::service_fn(|_req: http::Request<()>| async {
            Ok::<_, Infallible>(http::Response::builder().status(503).body(()).unwrap())
        });
        let mut svc = FailFastLayer::new(breaker.clone())
            .classify(FromTowerHttp::new(ServerErrorsAsFailures::new()))
            .layer(failing);
        let response = svc
            .ready()
            .await
            .unwrap()
            .call(http::Request::new(()))
            .await
            .unwrap();
        assert_eq!(response.status(), 503);
        assert_eq!(breaker.state(), State::Open);
    }
}

/// The keyed layer classifies at the end of the stream too: each host's
/// `grpc-status` arrives in the trailers, after the head, and counts against
/// that host's breaker only once the body ends.
#[tokio::test]
async fn keyed_layer_counts_grpc_unavailable_in_trailers_against_that_host() {
    use failfast::registry::HostKey;
    use failfast::tower::KeyedLayer;
    use failfast::Registry;
    let registry = Arc::new(
        Registry::<HostKey>::builder(
            Breaker::builder()
                .consecutive_failures(2)
                .open_duration(Duration::from_secs(30)),
        )
        .build()
        .unwrap(),
    );
    let calls = Arc::new(AtomicUsize::new(0));
    let mut svc = KeyedLayer::new(registry.clone())
        .classify_at_end(GrpcClassifier::new())
        .name_rejections()
        .layer(server(calls.clone(), GRPC, unavailable_in_trailers));
    let get = |host: &str| {
        http::Request::get(format!("http://{host}:50051/svc/M"))
            .body(())
            .unwrap()
    };
    for n in 1..=2 {
        let response = svc
            .ready()
            .await
            .unwrap()
            .call(get("a.example"))
            .await
            .unwrap();
        let a = registry.handle_from("a.example:50051").snapshot();
        assert_eq!(
            a.consecutive_failures,
            n - 1,
            "no verdict before the trailers"
        );
        response.into_body().collect().await.unwrap();
    }
    assert_eq!(registry.handle_from("a.example:50051").state(), State::Open);
    let err = svc
        .ready()
        .await
        .unwrap()
        .call(get("a.example"))
        .await
        .unwrap_err();
    let rejected = err.downcast_ref::<Rejected>().unwrap();
    assert_eq!(rejected.upstream().unwrap().to_string(), "a.example:50051");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the open host was not called"
    );

    let response = svc
        .ready()
        .await
        .unwrap()
        .call(get("b.example"))
        .await
        .unwrap();
    response.into_body().collect().await.unwrap();
    assert_eq!(
        registry.handle_from("b.example:50051").state(),
        State::Closed
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}
