//! The demo's upstreams (and the end-to-end test's): healthy, slow,
//! failing or refusing, on loopback.

use super::*;

/// How a demo upstream answers.
pub const HEALTHY: u64 = 0;
/// 503 Service Unavailable.
pub const FAILING: u64 = 1;
/// Any other value: 200 OK after that many milliseconds.
pub const fn slow(ms: u64) -> u64 {
    ms
}

/// A local upstream whose behaviour can change while it runs.
pub struct Upstream {
    pub addr: SocketAddr,
    /// Requests served.
    pub hits: Arc<AtomicUsize>,
    /// Connections open right now.
    pub open: Arc<AtomicUsize>,
    pub mode: Arc<AtomicU64>,
}

/// Starts an upstream on 127.0.0.1 (ephemeral port) answering per `mode`,
/// once it has read the request's body.
pub async fn upstream(mode: u64) -> io::Result<Upstream> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let hits = Arc::new(AtomicUsize::new(0));
    let open = Arc::new(AtomicUsize::new(0));
    let mode = Arc::new(AtomicU64::new(mode));
    let (h, o, m) = (hits.clone(), open.clone(), mode.clone());
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                tokio::time::sleep(MIN_ACCEPT_BACKOFF).await;
                continue;
            };
            let (h, o, m) = (h.clone(), o.clone(), m.clone());
            o.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    h.fetch_add(1, Ordering::SeqCst);
                    let mode = m.load(Ordering::SeqCst);
                    async move {
                        // Reads the whole request body first, as a server
                        // handling an upload does.
                        let _ = req.into_body().collect().await;
                        let status = match mode {
                            HEALTHY => StatusCode::OK,
                            FAILING => StatusCode::SERVICE_UNAVAILABLE,
                            ms => {
                                tokio::time::sleep(Duration::from_millis(ms)).await;
                                StatusCode::OK
                            }
                        };
                        Ok::<_, Infallible>(text(status, "upstream\n"))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                o.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    Ok(Upstream {
        addr,
        hits,
        open,
        mode,
    })
}

/// A loopback address where nothing listens (connections are refused).
pub async fn refusing() -> io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    listener.local_addr() // dropped: the port is closed again
}
