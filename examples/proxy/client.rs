//! The upstream client: HTTP/1.1 over hyper's connection API, with a
//! bounded pool of idle keep-alive connections per upstream.
//!
//! A call takes its upstream's most recently used idle connection (a
//! mutex held for a `pop`), or opens one; sends its request on it; and,
//! once the answer's body has ended, puts the connection back (a `push`).
//! Each connection is driven by one task of its own, on the worker thread
//! that opened it, and its idle list is that worker's: a request, its
//! connection's task and its answer stay on one thread (see
//! [`run`](mod@super::run)). hyper-util's pooled `Client` costs about the
//! same per call (54.5k instructions per proxied request with either,
//! callgrind), but its pool is one for all threads, so a connection opened
//! by one worker would carry another's calls, each a wake across threads.
//!
//! What it keeps of a pooled client's behaviour:
//!
//! * **bounded**: at most [`Settings::max_in_flight`] idle connections per
//!   upstream and worker (no more can be busy at once: the in-flight cap is
//!   taken first); a connection coming back to a full list is closed;
//! * **idle connections close** after [`Settings::idle_timeout`]: a sweeper
//!   task, started with the first pooled connection, looks at the pools
//!   every quarter of it (at most every second);
//! * **never a dead connection silently**: a pooled connection is checked
//!   ready (hyper: its task is waiting for a request, so it has not seen
//!   the upstream close it) before it is used; if the upstream closed it in
//!   the meantime and the request was not sent, the request goes once more
//!   on a new connection, as a pooled client retries it. If it was sent as
//!   the upstream closed the connection (no answer, not a byte of one), a
//!   request with no body and an idempotent method goes once more too, as
//!   Go's `net/http` does: the upstream closed an idle connection, it did
//!   not fail the request;
//! * **connection errors are the upstream's**: a refused or reset connect,
//!   a broken connection, an answer hyper cannot parse fail the call, and
//!   the breaker counts them ([`Fault::of`] reads the `io::Error` or
//!   `hyper::Error` in the chain); running out of descriptors is the
//!   proxy's own (`EMFILE`: neutral);
//! * **the request as an origin server expects it**: `Host` from the
//!   upstream URI's authority, the request line in origin form
//!   (`GET /path?query`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::client::conn::http1::{self as conn, SendRequest};

use super::*;

/// The client: one pool of idle connections per upstream (the routes'
/// upstreams, known at start). Cloning it is cheap (one `Arc`).
#[derive(Clone)]
pub struct UpstreamClient {
    pools: Arc<FnvMap<Authority, Arc<Pool>>>,
}

/// One upstream's idle connections: one list per worker (a connection's
/// task runs on the worker that opened it, so it serves that worker's
/// calls only), the most recently used last.
pub(crate) struct Pool {
    idle: Box<[Mutex<Vec<Idle>>]>,
    max_idle: usize,
    idle_timeout: Duration,
    /// Set once the sweeper task runs.
    swept: std::sync::Once,
}

struct Idle {
    sender: SendRequest<Upload>,
    since: Instant,
}

/// A connect that failed: which upstream, and the OS's error (its source,
/// so that [`Fault::of`] tells a refused connect from the proxy's own
/// shortage of descriptors).
#[derive(Debug)]
pub struct ConnectError {
    upstream: Authority,
    source: io::Error,
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "connect to {}: {}", self.upstream, self.source)
    }
}

impl std::error::Error for ConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// A request for an authority the client has no pool for (never from the
/// proxy: every route's upstream has one).
#[derive(Debug)]
pub struct UnknownUpstream;

impl std::fmt::Display for UnknownUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no such upstream")
    }
}

impl std::error::Error for UnknownUpstream {}

impl UpstreamClient {
    /// A client for `upstreams`, pooling per [`Settings::max_in_flight`]
    /// and [`Settings::idle_timeout`].
    pub fn new<'a>(
        upstreams: impl IntoIterator<Item = &'a Authority>,
        settings: &Settings,
    ) -> UpstreamClient {
        let pools = upstreams
            .into_iter()
            .map(|upstream| {
                let pool = Pool {
                    idle: (0..settings.workers.max(1))
                        .map(|_| Mutex::new(Vec::new()))
                        .collect(),
                    max_idle: settings.max_in_flight,
                    idle_timeout: settings.idle_timeout,
                    swept: std::sync::Once::new(),
                };
                (upstream.clone(), Arc::new(pool))
            })
            .collect();
        UpstreamClient {
            pools: Arc::new(pools),
        }
    }

    /// Sends `req` (its URI absolute: `http://host:port/path`) to its
    /// upstream.
    pub async fn request(
        &self,
        mut req: Request<Upload>,
    ) -> Result<Response<Pooled>, tower::BoxError> {
        let pool = req
            .uri()
            .authority()
            .and_then(|upstream| self.pools.get_key_value(upstream));
        let Some((upstream, pool)) = pool else {
            return Err(UnknownUpstream.into());
        };
        if !req.headers().contains_key(header::HOST) {
            // An authority is a valid field value.
            if let Ok(host) = HeaderValue::from_str(upstream.as_str()) {
                req.headers_mut().insert(header::HOST, host);
            }
        }
        let origin_form = req
            .uri()
            .path_and_query()
            .cloned()
            .map_or_else(|| Uri::from_static("/"), Uri::from);
        *req.uri_mut() = origin_form;
        let (mut sender, pooled) = match pool.take().await {
            Some(sender) => (sender, true),
            None => (connect(upstream).await?, false),
        };
        let again = if pooled { replayable(&req) } else { None };
        let response = match sender.try_send_request(req).await {
            Ok(response) => response,
            Err(mut err) => match (err.take_message(), again) {
                // The pooled connection closed before the request went out
                // on it: once more, on a new connection.
                (Some(req), _) if pooled => {
                    sender = connect(upstream).await?;
                    sender.send_request(req).await?
                }
                // It closed as the request went out, before any answer.
                (None, Some(req)) if err.error().is_incomplete_message() => {
                    sender = connect(upstream).await?;
                    sender.send_request(req).await?
                }
                _ => return Err(err.into_error().into()),
            },
        };
        Ok(Pooled::new(response, sender, pool))
    }
}

impl tower::Service<Request<Upload>> for UpstreamClient {
    type Response = Response<Pooled>;
    type Error = tower::BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Pooled>, tower::BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Upload>) -> Self::Future {
        let client = self.clone();
        Box::pin(async move { client.request(req).await })
    }
}

/// A copy of `req` to send again if a pooled connection closes under it:
/// only a request with no body and an idempotent method (RFC 9110, 9.2.2),
/// which the upstream may receive twice.
fn replayable(req: &Request<Upload>) -> Option<Request<Upload>> {
    let idempotent = matches!(
        *req.method(),
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    );
    if !idempotent || !hyper::body::Body::is_end_stream(req.body()) {
        return None;
    }
    let mut again = Request::new(DownstreamBody::new(Either::Right(Empty::new())));
    *again.method_mut() = req.method().clone();
    *again.uri_mut() = req.uri().clone();
    *again.version_mut() = req.version();
    *again.headers_mut() = req.headers().clone();
    Some(again)
}

/// A new connection to `upstream`, its task started.
async fn connect(upstream: &Authority) -> Result<SendRequest<Upload>, tower::BoxError> {
    let connect_error = |source| ConnectError {
        upstream: upstream.clone(),
        source,
    };
    let stream = TcpStream::connect(upstream.as_str())
        .await
        .map_err(connect_error)?;
    // A request goes out in one write; no reason to hold back a small one.
    stream.set_nodelay(true).map_err(connect_error)?;
    let (sender, connection) = conn::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        // Ends when the upstream closes it, or when its `SendRequest` is
        // dropped (closed by the pool, or the call was cut) while idle.
        let _ = connection.await;
    });
    Ok(sender)
}

impl Pool {
    /// The most recently used idle connection that is ready for a request;
    /// the closed ones met on the way are dropped.
    async fn take(&self) -> Option<SendRequest<Upload>> {
        loop {
            let Idle { mut sender, .. } = self.lock().pop()?;
            // At once: ready, or closed (a connection is put back only
            // once its answer has ended, and its task then asks for the
            // next request).
            if sender.ready().await.is_ok() {
                return Some(sender);
            }
        }
    }

    /// Puts `sender` back, unless it is closed or the pool is full (then it
    /// is dropped, and its connection closes).
    fn put(self: &Arc<Self>, sender: SendRequest<Upload>) {
        if sender.is_closed() {
            return;
        }
        let mut idle = self.lock();
        if idle.len() < self.max_idle {
            idle.push(Idle {
                sender,
                since: Instant::now(),
            });
        }
        drop(idle);
        self.swept.call_once(|| {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(sweep(Arc::downgrade(self)));
            }
        });
    }

    /// The current worker's idle list.
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Idle>> {
        self.shard(worker() % self.idle.len())
    }

    fn shard(&self, index: usize) -> std::sync::MutexGuard<'_, Vec<Idle>> {
        self.idle[index].lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Closes `pool`'s connections idle for its `idle_timeout`, until the pool
/// is dropped.
async fn sweep(pool: std::sync::Weak<Pool>) {
    let every = match pool.upgrade() {
        Some(pool) => {
            (pool.idle_timeout / 4).clamp(Duration::from_millis(1), Duration::from_secs(1))
        }
        None => return,
    };
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(pool) = pool.upgrade() else { return };
        let now = Instant::now();
        for index in 0..pool.idle.len() {
            // Oldest first: the stale ones are at the front.
            let expired: Vec<Idle> = {
                let mut idle = pool.shard(index);
                let fresh = idle
                    .iter()
                    .position(|c| now.duration_since(c.since) < pool.idle_timeout)
                    .unwrap_or(idle.len());
                idle.drain(..fresh).collect()
            };
            drop(expired); // outside the lock: each drop wakes a connection's task
        }
    }
}

/// An upstream's answer body; once it has ended, its connection goes back
/// to the pool. Dropped before its end (the client went away, the call was
/// cut), the connection closes with it.
pub struct Pooled {
    body: Incoming,
    back: Option<(SendRequest<Upload>, Arc<Pool>)>,
}

impl Pooled {
    fn new(
        response: Response<Incoming>,
        sender: SendRequest<Upload>,
        pool: &Arc<Pool>,
    ) -> Response<Pooled> {
        let (head, body) = response.into_parts();
        let mut pooled = Pooled {
            body,
            back: Some((sender, pool.clone())),
        };
        // An answer with no body (204, `Content-Length: 0`) is over already:
        // hyper's server never polls such a body.
        if hyper::body::Body::is_end_stream(&pooled.body) {
            pooled.check_in();
        }
        Response::from_parts(head, pooled)
    }

    fn check_in(&mut self) {
        if let Some((sender, pool)) = self.back.take() {
            pool.put(sender);
        }
    }
}

impl hyper::body::Body for Pooled {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, hyper::Error>>> {
        let frame = std::task::ready!(Pin::new(&mut self.body).poll_frame(cx));
        match &frame {
            // hyper's server stops polling once `is_end_stream` says so.
            Some(Ok(_)) if self.body.is_end_stream() => self.check_in(),
            None => self.check_in(),
            _ => {}
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::sync::{mpsc, Notify};

    use super::*;

    /// An upstream that answers each connection's first request as
    /// keep-alive (HTTP/1.1, no `Connection: close`), then closes the
    /// connection when `close` is notified and says so on `closed`.
    struct Closing {
        addr: SocketAddr,
        accepted: Arc<AtomicUsize>,
        close: Arc<Notify>,
        closed: mpsc::UnboundedReceiver<()>,
    }

    async fn closing_upstream() -> Closing {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let close = Arc::new(Notify::new());
        let (closed_tx, closed) = mpsc::unbounded_channel();
        let (count, notify) = (accepted.clone(), close.clone());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let (close, closed) = (notify.clone(), closed_tx.clone());
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0; 1024];
                    while !head.ends_with(b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nok\n";
                    let _ = stream.write_all(answer).await;
                    close.notified().await;
                    drop(stream);
                    let _ = closed.send(());
                });
            }
        });
        Closing {
            addr,
            accepted,
            close,
            closed,
        }
    }

    /// One request on a connection of its own; the answer's status.
    async fn get(proxy: SocketAddr) -> u16 {
        let request = b"GET /closing/ HTTP/1.1\r\nhost: proxy\r\nconnection: close\r\n\r\n";
        send(proxy, request).await
    }

    /// `request` on a connection of its own; the answer's status.
    async fn send(proxy: SocketAddr, request: &[u8]) -> u16 {
        let mut stream = TcpStream::connect(proxy).await.unwrap();
        stream.write_all(request).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer[9..12].parse().unwrap()
    }

    /// An upstream that answers each connection's first request as
    /// keep-alive, then reads the next request's head and closes the
    /// connection without a byte of answer: a keep-alive connection the
    /// upstream closes just as the next request reaches it.
    async fn closing_under_the_second_request() -> (SocketAddr, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = [0; 4096];
                    for answer in [true, false] {
                        let mut head = Vec::new();
                        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                            match stream.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => head.extend_from_slice(&buf[..n]),
                            }
                        }
                        if answer {
                            let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nok\n";
                            let _ = stream.write_all(ok).await;
                        }
                    }
                });
            }
        });
        (addr, accepted)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_idempotent_request_a_pooled_connection_drops_goes_once_more() {
        let (upstream, accepted) = closing_under_the_second_request().await;
        let routes = HashMap::from([("closing".to_owned(), authority(upstream))]);
        let proxy = proxy(routes, template(), Settings::default()).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve(listener, proxy.clone()));
        // The first call opens a connection and leaves it in the pool; the
        // second is sent on it and the upstream closes it: a GET goes again
        // on a new connection, which the third (a POST with a body) finds in
        // the pool. The POST is not sent twice: the upstream may have acted
        // on it.
        assert_eq!(get(addr).await, 200, "the first call");
        assert_eq!(get(addr).await, 200, "the GET went again");
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
        let post = b"POST /closing/ HTTP/1.1\r\nhost: proxy\r\nconnection: close\r\n\
            content-length: 2\r\n\r\nhi";
        assert_eq!(send(addr, post).await, 502, "a POST is not sent twice");
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
        let snapshot = proxy
            .registry
            .handle_from(upstream.to_string().as_str())
            .snapshot();
        let calls = snapshot.calls.expect("the template counts calls");
        assert_eq!((calls.successes, calls.failures), (2, 1), "{calls:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pooled_connection_the_upstream_closed_is_never_used() {
        let mut upstream = closing_upstream().await;
        let routes = HashMap::from([("closing".to_owned(), authority(upstream.addr))]);
        let proxy = proxy(routes, template(), Settings::default()).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve(listener, proxy.clone()));
        // Each call after the first finds the last one's connection in the
        // pool, closed by the upstream since: whether or not the proxy has
        // seen the close yet, the call must go on a new connection, never
        // answer 502.
        for call in 0..20 {
            assert_eq!(get(addr).await, 200, "call {call}");
            upstream.close.notify_one();
            upstream.closed.recv().await.unwrap();
        }
        assert_eq!(
            upstream.accepted.load(Ordering::SeqCst),
            20,
            "a connection per call"
        );
        let snapshot = proxy
            .registry
            .handle_from(upstream.addr.to_string().as_str())
            .snapshot();
        let calls = snapshot.calls.expect("the template counts calls");
        assert_eq!((calls.successes, calls.failures), (20, 0), "{calls:?}");
    }
}
