//! The upstream the reqwest tests call: an HTTP server (hyper) on loopback
//! that answers with the answers queued, then with its current default,
//! counting the requests that reach it.
//!
//! ```ignore
//! mod loopback;
//! use loopback::Upstream;
//!
//! let up = Upstream::start(200).await;
//! up.queue(&[503, 503]);                  // the next two requests
//! up.queue_hinted(&[(429, "5")]);         // then a 429 with `Retry-After: 5`
//! client.get(up.url("/")).send().await?;  // 503
//! assert_eq!(up.requests(), 1);
//! ```

#![allow(dead_code)] // Each test file uses part of it.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use http_body_util::Empty;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// An answer: a status (0: never answers) and a `Retry-After`, if any.
type Answer = (u16, Option<String>);

/// A loopback server. Every field is shared with its serving task; the
/// test sets them between calls (all `SeqCst`: test bookkeeping).
pub struct Upstream {
    pub addr: SocketAddr,
    /// The answers of the next requests, in order.
    queued: Arc<Mutex<VecDeque<Answer>>>,
    /// The status once the queue is empty (0: never answers).
    status: Arc<AtomicU16>,
    /// The `Retry-After` sent with the default status, if any.
    retry_after: Arc<Mutex<Option<String>>>,
    requests: Arc<AtomicUsize>,
    /// Woken as each request arrives.
    pub arrived: Arc<Notify>,
}

impl Upstream {
    /// Starts a server that answers `default` (0: never answers) to every
    /// request not queued.
    pub async fn start(default: u16) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let up = Upstream {
            addr: listener.local_addr().unwrap(),
            queued: Arc::default(),
            status: Arc::new(AtomicU16::new(default)),
            retry_after: Arc::default(),
            requests: Arc::default(),
            arrived: Arc::default(),
        };
        let (queued, status, retry_after, requests, arrived) = (
            up.queued.clone(),
            up.status.clone(),
            up.retry_after.clone(),
            up.requests.clone(),
            up.arrived.clone(),
        );
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let (queued, status, retry_after, requests, arrived) = (
                    queued.clone(),
                    status.clone(),
                    retry_after.clone(),
                    requests.clone(),
                    arrived.clone(),
                );
                let service = service_fn(move |_req: http::Request<Incoming>| {
                    requests.fetch_add(1, Ordering::SeqCst);
                    arrived.notify_one();
                    let (code, after) = queued.lock().unwrap().pop_front().unwrap_or_else(|| {
                        let after = retry_after.lock().unwrap().clone();
                        (status.load(Ordering::SeqCst), after)
                    });
                    async move {
                        if code == 0 {
                            std::future::pending::<()>().await;
                        }
                        let mut response = http::Response::new(Empty::<Bytes>::new());
                        *response.status_mut() = http::StatusCode::from_u16(code).unwrap();
                        if let Some(after) = after {
                            response.headers_mut().insert(
                                http::header::RETRY_AFTER,
                                http::HeaderValue::from_str(&after).unwrap(),
                            );
                        }
                        Ok::<_, Infallible>(response)
                    }
                });
                tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
            }
        });
        up
    }

    /// Answers the next requests with `statuses`, in order.
    pub fn queue(&self, statuses: &[u16]) {
        let answers = statuses.iter().map(|&code| (code, None));
        self.queued.lock().unwrap().extend(answers);
    }

    /// Answers the next requests with these statuses and `Retry-After`s.
    pub fn queue_hinted(&self, answers: &[(u16, &str)]) {
        let answers = answers
            .iter()
            .map(|&(code, after)| (code, Some(after.to_owned())));
        self.queued.lock().unwrap().extend(answers);
    }

    /// Answers `status` from now on, once the queue is empty.
    pub fn answer(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }

    /// Sends `Retry-After: value` with the default status from now on.
    pub fn retry_after(&self, value: &str) {
        *self.retry_after.lock().unwrap() = Some(value.to_owned());
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The upstream's key, as the middleware derives it.
    pub fn key(&self) -> String {
        self.addr.to_string()
    }

    /// The requests that reached it so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}
