//! Who failed a call, at the door: errors that are not the upstream's fault
//! (a local resource running out, a client's request body) are neutral
//! through every shipped classifier and layer, and cannot open a healthy
//! upstream's breaker, nor keep a failing one closed.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use failfast::registry::HostKey;
use failfast::tower::{
    Classify, DefaultClassifier, DownstreamBody, FailFastLayer, GrpcClassifier, HttpClassifier,
    KeyedLayer,
};
use failfast::{
    Breaker, DownstreamError, DownstreamKind, Fault, ManualClock, Outcome, Registry, State,
};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::body::Bytes;
use tower::{BoxError, Layer, Service, ServiceExt};

/// An error as an HTTP client reports a failed call: its own error around
/// the cause (hyper-util's `client::legacy::Error` around `hyper::Error`
/// around the body's error or the connector's `io::Error`).
#[derive(Debug)]
struct ClientError(BoxError);

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("client error (SendRequest)")
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

fn client_error(cause: impl Into<BoxError>) -> ClientError {
    ClientError(Box::new(ClientError(cause.into())))
}

#[cfg(unix)]
fn emfile() -> io::Error {
    io::Error::from_raw_os_error(libc_emfile())
}

/// EMFILE, without a libc dependency in the tests: 24 on every Unix.
#[cfg(unix)]
fn libc_emfile() -> i32 {
    24
}

fn classify_err(c: &impl Classify<http::Response<()>, BoxError>, e: BoxError) -> Outcome {
    c.classify(&Err(e))
}

#[test]
fn every_shipped_classifier_blames_only_the_upstream() {
    let refused =
        || -> BoxError { client_error(io::Error::from(io::ErrorKind::ConnectionRefused)).into() };
    let broken_upload =
        || -> BoxError { client_error(DownstreamError::failed("invalid chunk size")).into() };
    let stalled =
        || -> BoxError { client_error(DownstreamError::stalled(Duration::from_secs(2))).into() };
    let http = HttpClassifier::new();
    let grpc = GrpcClassifier::new();
    for (name, outcome) in [
        ("http refused", classify_err(&http, refused())),
        ("grpc refused", classify_err(&grpc, refused())),
        (
            "default refused",
            DefaultClassifier.classify(&Err::<(), _>(refused())),
        ),
    ] {
        assert_eq!(outcome, Outcome::Failure, "{name}");
    }
    for (name, outcome) in [
        ("http upload", classify_err(&http, broken_upload())),
        ("http stalled", classify_err(&http, stalled())),
        ("grpc upload", classify_err(&grpc, broken_upload())),
        (
            "default upload",
            DefaultClassifier.classify(&Err::<(), _>(stalled())),
        ),
    ] {
        assert_eq!(outcome, Outcome::Neutral, "{name}");
    }
    #[cfg(unix)]
    {
        assert_eq!(
            classify_err(&http, client_error(emfile()).into()),
            Outcome::Neutral,
            "the proxy out of file descriptors"
        );
        assert_eq!(Fault::of(&client_error(emfile())), Fault::Local);
    }
    // `errors` sets the upstream's outcome only; the rest stay neutral.
    let lenient = HttpClassifier::new().errors(Outcome::Ignored);
    assert_eq!(classify_err(&lenient, refused()), Outcome::Ignored);
    assert_eq!(classify_err(&lenient, broken_upload()), Outcome::Neutral);
}

#[test]
fn a_fault_hook_overrides_who_is_blamed() {
    let blame_all = HttpClassifier::new().fault(|_| Fault::Upstream);
    let upload: BoxError = DownstreamError::failed("x").into();
    assert_eq!(classify_err(&blame_all, upload), Outcome::Failure);
    assert_ne!(blame_all, HttpClassifier::new(), "the hook is part of it");
    assert_eq!(HttpClassifier::new(), HttpClassifier::new());
}

/// A service failing every call with the error `make` builds.
fn failing(
    make: fn() -> BoxError,
) -> impl Service<
    http::Request<()>,
    Response = http::Response<()>,
    Error = BoxError,
    Future = std::future::Ready<Result<http::Response<()>, BoxError>>,
> + Clone {
    tower::service_fn(move |_req: http::Request<()>| std::future::ready(Err(make())))
}

#[tokio::test]
async fn clients_cannot_open_a_healthy_upstream_through_the_layers() {
    let breaker = Arc::new(
        Breaker::builder()
            .consecutive_failures(3)
            .count_calls(true)
            .build_with_clock(ManualClock::new())
            .unwrap(),
    );
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify(HttpClassifier::new())
        .layer(failing(|| {
            client_error(DownstreamError::failed("bad chunk")).into()
        }));
    for _ in 0..50 {
        let err = svc
            .ready()
            .await
            .unwrap()
            .call(http::Request::new(()))
            .await
            .unwrap_err();
        assert!(
            Fault::of(&*err) == Fault::Downstream,
            "the error passes through: {err}"
        );
    }
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().calls.unwrap().neutral, 50);

    // The keyed layer, the local fault.
    #[cfg(unix)]
    {
        let registry = Arc::new(
            Registry::<HostKey>::builder(Breaker::builder().consecutive_failures(3))
                .build_with_clock(ManualClock::new())
                .unwrap(),
        );
        let mut keyed = KeyedLayer::new(registry.clone())
            .classify(HttpClassifier::new())
            .layer(failing(|| client_error(emfile()).into()));
        for _ in 0..50 {
            let req = http::Request::get("http://healthy.example/")
                .body(())
                .unwrap();
            keyed.ready().await.unwrap().call(req).await.unwrap_err();
        }
        assert_eq!(
            registry.handle_from("healthy.example:80").state(),
            State::Closed
        );
    }
}

#[tokio::test]
async fn broken_requests_mixed_in_do_not_keep_a_failing_upstream_closed() {
    let breaker = Arc::new(
        Breaker::builder()
            .consecutive_failures(3)
            .build_with_clock(ManualClock::new())
            .unwrap(),
    );
    let mut n = 0;
    let svc = tower::service_fn(move |_req: http::Request<()>| {
        n += 1;
        // Every other call: the upstream refuses; in between, a client's
        // broken upload.
        let err: BoxError = if n % 2 == 0 {
            client_error(io::Error::from(io::ErrorKind::ConnectionRefused)).into()
        } else {
            client_error(DownstreamError::failed("bad chunk")).into()
        };
        std::future::ready(Err::<http::Response<()>, _>(err))
    });
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify(HttpClassifier::new())
        .layer(svc);
    for _ in 0..6 {
        let _ = svc
            .ready()
            .await
            .unwrap()
            .call(http::Request::new(()))
            .await;
    }
    assert_eq!(
        breaker.state(),
        State::Open,
        "three refusals in a row, neutral between"
    );
}

/// A body yielding `frames`, then `Pending` forever (a client that stops
/// sending), or an error.
struct Upload {
    frames: Vec<Result<Frame<Bytes>, io::Error>>,
}

impl Body for Upload {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        if self.frames.is_empty() {
            return Poll::Pending;
        }
        Poll::Ready(Some(self.frames.remove(0)))
    }
}

/// A body the test feeds through a channel: a frame per message, `Pending`
/// while none is there, the end when the sender goes.
struct Fed(tokio::sync::mpsc::UnboundedReceiver<Bytes>);

impl Body for Fed {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        self.0.poll_recv(cx).map(|m| m.map(|b| Ok(Frame::data(b))))
    }
}

fn chunk(s: &'static str) -> Result<Frame<Bytes>, io::Error> {
    Ok(Frame::data(Bytes::from_static(s.as_bytes())))
}

#[tokio::test(start_paused = true)]
async fn a_downstream_body_marks_stalls_breaks_and_excess_as_the_clients() {
    // Stalled: three bytes, then nothing for the idle timeout.
    let body = DownstreamBody::new(Upload {
        frames: vec![chunk("abc")],
    })
    .idle_timeout(Duration::from_secs(2));
    let started = tokio::time::Instant::now();
    let err = body.collect().await.unwrap_err();
    assert_eq!(err.kind(), DownstreamKind::Stalled(Duration::from_secs(2)));
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(2),
        "idle from the last frame"
    );

    // Each frame moves the idle deadline on. The first wait arms the timer
    // (2 s); frames come 1.5 s into it and 1.5 s after that (past the first
    // deadline); the body stalls 2 s after the last.
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let client = tokio::spawn(async move {
        for chunk in ["a", "b"] {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            tx.send(Bytes::from_static(chunk.as_bytes())).unwrap();
        }
        std::future::pending::<()>().await
    });
    let mut body = DownstreamBody::new(Fed(rx)).idle_timeout(Duration::from_secs(2));
    let started = tokio::time::Instant::now();
    for chunk in ["a", "b"] {
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), chunk);
    }
    let err = body.frame().await.unwrap().unwrap_err();
    assert_eq!(err.kind(), DownstreamKind::Stalled(Duration::from_secs(2)));
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    client.abort();

    // Broken: the inner error, kept as the source.
    let body = DownstreamBody::new(Upload {
        frames: vec![chunk("a"), Err(io::Error::other("invalid chunk size"))],
    });
    let err = body.collect().await.unwrap_err();
    assert_eq!(err.kind(), DownstreamKind::Failed);
    assert!(err.to_string().contains("invalid chunk size"), "{err}");
    assert_eq!(Fault::of(&client_error(err)), Fault::Downstream);

    // Too large: past the limit, and nothing after.
    let mut body = DownstreamBody::new(Upload {
        frames: vec![chunk("abcd"), chunk("e"), chunk("f")],
    })
    .max_bytes(4);
    assert!(body.frame().await.unwrap().is_ok(), "4 bytes fit");
    let err = body.frame().await.unwrap().unwrap_err();
    assert_eq!(err.kind(), DownstreamKind::TooLarge(4));
    assert!(body.frame().await.is_none(), "the body ends at its error");
    assert!(body.is_end_stream());
}

#[tokio::test]
async fn a_whole_upload_passes_through_unchanged() {
    let body = DownstreamBody::new(Upload {
        frames: vec![chunk("ab"), chunk("cd")],
    })
    .max_bytes(4)
    .idle_timeout(Duration::from_secs(1));
    let mut body = Box::pin(body);
    let mut got = Vec::new();
    for _ in 0..2 {
        got.push(body.frame().await.unwrap().unwrap().into_data().unwrap());
    }
    assert_eq!(got, ["ab", "cd"]);
}
