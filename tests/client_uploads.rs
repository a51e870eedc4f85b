//! A client's broken, stalled or oversized upload never counts against a
//! healthy upstream, with nothing wrapped by the user: real HTTP clients
//! against a real server on loopback — hyper-util's legacy client under a
//! plain `FailFastLayer` and a plain `KeyedLayer`, and reqwest under
//! `BreakerMiddleware` — and a hyper proxy whose clients hang up mid-upload.
//!
//! Each body fails the way the user's own limits fail it: its stream's own
//! error (a client gone), tower-http's idle limit (`TimeoutBody`, on tokio's
//! paused clock) and http-body-util's size limit (`Limited`). hyper reports
//! each as an error of the request's own making (`hyper::Error::is_user`,
//! inside reqwest's error too), which `Fault::of` reads: the calls are
//! neutral. A dead upstream behind the same stacks still opens the breaker.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use failfast::registry::HostKey;
use failfast::reqwest::BreakerMiddleware;
use failfast::tower::{FailFastLayer, KeyedLayer};
use failfast::{Breaker, Builder, CallCounts, Fault, ManualClock, Registry, Rejected, State};
use http_body::{Body, Frame};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::{Bytes, Incoming};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tower::util::BoxCloneService;
use tower::{BoxError, Layer, ServiceExt};
use tower_http::timeout::TimeoutBody;

/// How long a body may send nothing before the user's idle limit fails it.
const IDLE: Duration = Duration::from_secs(5);
/// The largest body the user's size limit lets through.
const LIMIT: usize = 2048;
/// The uploads each test sends: more than the breakers' three failures in a
/// row, so each would open it if it counted.
const CLIENTS: usize = 5;

type Upload = BoxBody<Bytes, BoxError>;
type Hosts = Registry<HostKey, std::collections::hash_map::RandomState, ManualClock>;

/// How a client's upload goes.
#[derive(Copy, Clone, Debug)]
enum Sent {
    /// Half of it, then its stream fails (a client that hung up).
    Broken,
    /// Half of it, then nothing: tower-http's idle limit fails it.
    Stalled,
    /// More than `LIMIT` bytes: http-body-util's size limit fails it.
    Oversized,
    /// All of it.
    Whole,
}

/// A body yielding `frames`, then the end (`ends`) or nothing ever again.
struct Script {
    frames: Vec<Result<Frame<Bytes>, io::Error>>,
    ends: bool,
}

impl Body for Script {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        if self.frames.is_empty() {
            return if self.ends {
                Poll::Ready(None)
            } else {
                Poll::Pending
            };
        }
        Poll::Ready(Some(self.frames.remove(0)))
    }
}

fn kib() -> Result<Frame<Bytes>, io::Error> {
    Ok(Frame::data(Bytes::from(vec![b'x'; 1024])))
}

/// The upload's body, with the limits a server puts on its clients' bodies.
fn upload(sent: Sent) -> Upload {
    let script = |frames, ends| Script { frames, ends };
    match sent {
        Sent::Broken => script(
            vec![kib(), Err(io::Error::from(io::ErrorKind::UnexpectedEof))],
            true,
        )
        .map_err(Into::into)
        .boxed(),
        Sent::Stalled => TimeoutBody::new(IDLE, script(vec![kib()], false)).boxed(),
        Sent::Oversized => Limited::new(script(vec![kib(), kib(), kib()], true), LIMIT).boxed(),
        Sent::Whole => script(vec![kib(), kib()], true).map_err(Into::into).boxed(),
    }
}

/// A healthy upstream on loopback: reads each request's whole body, then
/// answers 200; counts the bodies it received whole.
struct Upstream {
    addr: SocketAddr,
    whole: Arc<AtomicUsize>,
}

impl Upstream {
    async fn start() -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let whole = Arc::new(AtomicUsize::new(0));
        let counted = whole.clone();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let counted = counted.clone();
                let service = hyper::service::service_fn(move |req: http::Request<Incoming>| {
                    let counted = counted.clone();
                    async move {
                        if req.into_body().collect().await.is_ok() {
                            // SeqCst: test bookkeeping read by the test task.
                            counted.fetch_add(1, Ordering::SeqCst);
                        }
                        Ok::<_, Infallible>(http::Response::new(Empty::<Bytes>::new()))
                    }
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service),
                );
            }
        });
        Upstream { addr, whole }
    }

    fn whole(&self) -> usize {
        self.whole.load(Ordering::SeqCst)
    }
}

/// An address where nothing listens: a port that was just free.
async fn dead_upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    addr
}

fn policy() -> Builder {
    Breaker::builder().consecutive_failures(3).count_calls(true)
}

fn hosts() -> Arc<Hosts> {
    Arc::new(
        Registry::<HostKey>::builder(policy())
            .build_with_clock(ManualClock::new())
            .unwrap(),
    )
}

fn hyper_client() -> Client<HttpConnector, Upload> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// How a call through a breaker ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Ended {
    /// The upstream answered with this status.
    Answered(u16),
    /// The call failed, by this one's fault (`Fault::of` its error).
    Failed(Fault),
    /// The breaker refused it.
    Rejected,
}

impl Ended {
    fn of(result: Result<http::Response<Incoming>, BoxError>) -> Ended {
        match result {
            Ok(response) => Ended::Answered(response.status().as_u16()),
            Err(e) if e.is::<Rejected>() => Ended::Rejected,
            Err(e) => Ended::Failed(Fault::of(&*e)),
        }
    }
}

/// A client behind a breaker, as a user builds it, with nothing wrapped.
enum Door {
    /// A plain `FailFastLayer` over hyper-util's client.
    FailFast(
        BoxCloneService<http::Request<Upload>, http::Response<Incoming>, BoxError>,
        Arc<Breaker<ManualClock>>,
    ),
    /// A plain `KeyedLayer` over hyper-util's client.
    Keyed(
        BoxCloneService<http::Request<Upload>, http::Response<Incoming>, BoxError>,
        Arc<Hosts>,
    ),
    /// reqwest with the middleware.
    Reqwest(reqwest_middleware::ClientWithMiddleware, Arc<Hosts>),
}

impl Door {
    fn all() -> [fn() -> Door; 3] {
        [
            || {
                let breaker = Arc::new(policy().build_with_clock(ManualClock::new()).unwrap());
                let layer = FailFastLayer::new(breaker.clone());
                Door::FailFast(BoxCloneService::new(layer.layer(hyper_client())), breaker)
            },
            || {
                let registry = hosts();
                let layer = KeyedLayer::new(registry.clone());
                Door::Keyed(BoxCloneService::new(layer.layer(hyper_client())), registry)
            },
            || {
                let registry = hosts();
                let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
                    .with(BreakerMiddleware::new(registry.clone()))
                    .build();
                Door::Reqwest(client, registry)
            },
        ]
    }

    fn name(&self) -> &'static str {
        match self {
            Door::FailFast(..) => "FailFastLayer over hyper",
            Door::Keyed(..) => "KeyedLayer over hyper",
            Door::Reqwest(..) => "reqwest middleware",
        }
    }

    /// Sends `sent` to `upstream`: how the call ended.
    async fn send(&self, upstream: SocketAddr, sent: Sent) -> Ended {
        let url = format!("http://{upstream}/upload");
        match self {
            Door::FailFast(service, _) | Door::Keyed(service, _) => {
                let req = http::Request::post(url).body(upload(sent)).unwrap();
                Ended::of(service.clone().oneshot(req).await)
            }
            Door::Reqwest(client, _) => {
                let body = reqwest::Body::wrap(upload(sent));
                match client.post(url).body(body).send().await {
                    Ok(response) => Ended::Answered(response.status().as_u16()),
                    Err(reqwest_middleware::Error::Reqwest(e)) => Ended::Failed(Fault::of(&e)),
                    Err(reqwest_middleware::Error::Middleware(e)) => {
                        assert!(e.is::<Rejected>(), "{e}");
                        Ended::Rejected
                    }
                }
            }
        }
    }

    /// The state of `upstream`'s breaker and its call counts.
    fn breaker(&self, upstream: SocketAddr) -> (State, CallCounts) {
        let key = upstream.to_string();
        let snapshot = match self {
            Door::FailFast(_, breaker) => breaker.snapshot(),
            Door::Keyed(_, registry) | Door::Reqwest(_, registry) => {
                registry.handle_from(&key).snapshot()
            }
        };
        (snapshot.state, snapshot.calls.unwrap())
    }
}

/// Five clients send `sent` through each door to a healthy upstream: every
/// call fails as the client's (`Fault::Downstream`) and is neutral, the
/// breaker stays closed, and a whole upload after them gets through.
async fn uploads_leave_a_healthy_upstream_closed(sent: Sent) {
    let upstream = Upstream::start().await;
    for door in Door::all() {
        let door = door();
        let name = door.name();
        let mut blamed = Vec::new();
        for _ in 0..CLIENTS {
            blamed.push(door.send(upstream.addr, sent).await);
        }
        let (state, calls) = door.breaker(upstream.addr);
        assert_eq!(state, State::Closed, "{name}: {sent:?} uploads: {calls:?}");
        assert_eq!(
            (calls.neutral, calls.failures),
            (CLIENTS as u64, 0),
            "{name}: {sent:?}"
        );
        assert_eq!(
            blamed,
            [Ended::Failed(Fault::Downstream); CLIENTS],
            "{name}: each {sent:?} upload is the client's"
        );
        let before = upstream.whole();
        assert_eq!(
            door.send(upstream.addr, Sent::Whole).await,
            Ended::Answered(200),
            "{name}"
        );
        assert_eq!(upstream.whole(), before + 1, "{name}: the upstream got it");
        assert_eq!(door.breaker(upstream.addr).1.successes, 1, "{name}");
    }
    assert_eq!(upstream.whole(), 3, "no failed upload reached it whole");
}

#[tokio::test]
async fn broken_uploads_never_open_a_healthy_upstream() {
    uploads_leave_a_healthy_upstream_closed(Sent::Broken).await;
}

/// On tokio's paused clock: each stalled body waits out the idle limit at
/// once (its timer is the only one armed), so no test sleeps.
#[tokio::test(start_paused = true)]
async fn stalled_uploads_never_open_a_healthy_upstream() {
    let started = tokio::time::Instant::now();
    uploads_leave_a_healthy_upstream_closed(Sent::Stalled).await;
    assert!(
        started.elapsed() >= IDLE * (3 * CLIENTS as u32),
        "each stalled upload waited out the idle limit"
    );
}

#[tokio::test]
async fn oversized_uploads_never_open_a_healthy_upstream() {
    uploads_leave_a_healthy_upstream_closed(Sent::Oversized).await;
}

/// The control: the same doors count an upstream that is down, so the
/// uploads above were neutral for being the client's, not for going
/// uncounted.
#[tokio::test]
async fn a_dead_upstream_still_opens_the_breaker_through_each_door() {
    let dead = dead_upstream().await;
    for door in Door::all() {
        let door = door();
        for _ in 0..3 {
            assert_eq!(
                door.send(dead, Sent::Whole).await,
                Ended::Failed(Fault::Upstream),
                "{}",
                door.name()
            );
        }
        let (state, calls) = door.breaker(dead);
        assert_eq!(state, State::Open, "{}: {calls:?}", door.name());
        assert_eq!(calls.failures, 3, "{}", door.name());
    }
}

/// A reverse proxy as the user wrote it: a hyper server whose
/// handler forwards each request, its body hyper's own `Incoming`, through
/// a plain `KeyedLayer` over hyper-util's client. Five clients send a head
/// promising 4 KiB, 1 KiB of it, and hang up: the upstream stays closed.
/// Each forwarded call runs in its own task, which reports how it ended,
/// so a handler dropped when its client left cannot hide the verdict.
#[tokio::test]
async fn clients_hanging_up_mid_upload_through_a_hyper_proxy_never_open_the_upstream() {
    let upstream = Upstream::start().await;
    let registry = hosts();
    let client: Client<HttpConnector, Incoming> =
        Client::builder(TokioExecutor::new()).build_http();
    let forward = KeyedLayer::new(registry.clone()).layer(client);
    let (ended, mut endings) = tokio::sync::mpsc::unbounded_channel();

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = listener.local_addr().unwrap();
    let to = upstream.addr;
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (forward, ended) = (forward.clone(), ended.clone());
            let handler = hyper::service::service_fn(move |mut req: http::Request<Incoming>| {
                *req.uri_mut() = format!("http://{to}/upload").parse().unwrap();
                let (forward, ended) = (forward.clone(), ended.clone());
                let call = tokio::spawn(async move {
                    ended.send(Ended::of(forward.oneshot(req).await)).unwrap();
                });
                async move {
                    let _ = call.await;
                    Ok::<_, Infallible>(http::Response::new(Empty::<Bytes>::new()))
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), handler),
            );
        }
    });

    let head = "POST /upload HTTP/1.1\r\nhost: proxy\r\ncontent-length: 4096\r\n\r\n";
    let mut blamed = Vec::new();
    for _ in 0..CLIENTS {
        let mut conn = TcpStream::connect(proxy).await.unwrap();
        conn.write_all(head.as_bytes()).await.unwrap();
        conn.write_all(&[b'x'; 1024]).await.unwrap();
        drop(conn); // gone mid-upload
        blamed.push(endings.recv().await.unwrap());
    }
    let key = upstream.addr.to_string();
    let snapshot = registry.handle_from(&key).snapshot();
    let calls = snapshot.calls.unwrap();
    assert_eq!(snapshot.state, State::Closed, "{calls:?}");
    assert_eq!((calls.neutral, calls.failures), (CLIENTS as u64, 0));
    assert_eq!(blamed, [Ended::Failed(Fault::Downstream); CLIENTS]);

    // A client that sends its whole body is forwarded as before.
    let mut conn = TcpStream::connect(proxy).await.unwrap();
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(&[b'x'; 4096]).await.unwrap();
    assert_eq!(endings.recv().await.unwrap(), Ended::Answered(200));
    assert_eq!(upstream.whole(), 1);
}

/// The limit the docs state: over HTTP/2 hyper answers a request body's
/// error by resetting the stream, and the call's error says only that the
/// stream was reset — the body's own error is not in it, `DownstreamBody`'s
/// mark neither — so it is blamed on the upstream. When this fails, hyper
/// keeps the body's error: say so in the `tower` module's "Who failed".
#[tokio::test]
async fn over_http2_a_broken_upload_is_a_reset_that_names_no_one() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let service = hyper::service::service_fn(|req: http::Request<Incoming>| async move {
                let _ = req.into_body().collect().await;
                Ok::<_, Infallible>(http::Response::new(Empty::<Bytes>::new()))
            });
            tokio::spawn(
                hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    let client: Client<HttpConnector, Upload> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let marked = || {
        failfast::tower::DownstreamBody::new(upload(Sent::Broken))
            .map_err(Into::into)
            .boxed()
    };
    for body in [upload(Sent::Broken), marked()] {
        let req = http::Request::post(format!("http://{addr}/upload"))
            .body(body)
            .unwrap();
        let err = client.request(req).await.unwrap_err();
        assert_eq!(Fault::of(&err), Fault::Upstream, "{err:?}");
    }
    // The same bodies over HTTP/1.1 are the client's.
    let upstream = Upstream::start().await;
    for body in [upload(Sent::Broken), marked()] {
        let req = http::Request::post(format!("http://{}/upload", upstream.addr))
            .body(body)
            .unwrap();
        let err = hyper_client().request(req).await.unwrap_err();
        assert_eq!(Fault::of(&err), Fault::Downstream, "{err:?}");
    }
}
