//! The guide's pingora recipe, compiled and run: a pingora proxy with one
//! failfast breaker per upstream host. The incident harness
//! (`incident/harness`) runs it beside the proxy example, nginx and HAProxy.
//!
//! ```sh
//! failfast-pingora --listen 127.0.0.1:8080 --route price=127.0.0.1:9101 [--timeout 900]
//! ```
//!
//! `GET /NAME/PATH` goes to `http://HOST:PORT/PATH`, as in the proxy
//! example. The breakers are the example's default template (50 % failures
//! or 50 % slow calls of 500 ms or more, over the last 20 calls, at least
//! 10) with the library's defaults for the rest: the recovery schedule, the
//! unanswered rule, `abandoned_after`. The pieces sit where the recipe puts
//! them, but for one: the admission is in `request_filter`, so that a
//! rejection is an answer (the client's connection is kept) rather than an
//! error (pingora's `fail_to_proxy` closes the connection).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use failfast::authority::{normalise, KeyBuf, DEFAULT_MAX_KEY_LEN};
use failfast::http::{retry_after_secs, HttpClassifier};
use failfast::registry::HostKey;
use failfast::{Breaker, Builder, Fault, Handle, Outcome, OwnedPermit, QuantaClock, Registry};
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::*;
use pingora::server::configuration::ServerConf;

/// One route's upstream.
struct Upstream {
    /// `host:port`, normalised: the breaker's key.
    key: String,
    addr: SocketAddr,
}

struct BreakerProxy {
    registry: Arc<Registry<HostKey>>,
    classifier: HttpClassifier,
    routes: HashMap<String, Upstream>,
    timeout: Duration,
}

type UpstreamPermit = OwnedPermit<QuantaClock, Handle<HostKey>>;

#[derive(Default)]
struct Ctx {
    /// The route's name, once `request_filter` found it.
    route: Option<String>,
    /// The path to send upstream (the route's prefix removed).
    upstream_path: String,
    /// The call in flight, until its verdict.
    permit: Option<UpstreamPermit>,
}

/// The example's default trip conditions, the library's defaults for the
/// rest (see `examples/proxy`'s `template`).
fn template() -> Builder {
    Breaker::builder()
        .failure_rate(0.5)
        .slow_call_rate(0.5)
        .slow_call_threshold(Duration::from_millis(500))
        .count_window(20)
        .min_calls(10)
        .count_calls(true)
}

impl BreakerProxy {
    async fn answer(
        &self,
        session: &mut Session,
        status: u16,
        mark: &str,
        retry_after: Option<u64>,
    ) -> Result<bool> {
        let mut answer = ResponseHeader::build(status, Some(3))?;
        answer.insert_header("x-failfast", mark)?;
        if let Some(secs) = retry_after {
            answer.insert_header("Retry-After", secs)?;
        }
        answer.insert_header("Content-Length", 0)?;
        session
            .write_response_header(Box::new(answer), true)
            .await?;
        Ok(true)
    }
}

#[async_trait]
impl ProxyHttp for BreakerProxy {
    type CTX = Ctx;

    fn new_ctx(&self) -> Ctx {
        Ctx::default()
    }

    /// The route, then the breaker: a rejection is answered here (503 with
    /// `Retry-After`), before any connection is made.
    async fn request_filter(&self, session: &mut Session, ctx: &mut Ctx) -> Result<bool> {
        let path = session.req_header().uri.path().to_owned();
        let trimmed = path.trim_start_matches('/');
        let (name, rest) = trimmed.split_once('/').unwrap_or((trimmed, ""));
        let Some(upstream) = self.routes.get(name) else {
            return self.answer(session, 404, "no-route", None).await;
        };
        let query = session
            .req_header()
            .uri
            .query()
            .map(|q| format!("?{q}"))
            .unwrap_or_default();
        ctx.upstream_path = format!("/{rest}{query}");
        ctx.route = Some(name.to_owned());
        let handle = self.registry.handle_from(upstream.key.as_str());
        let now = handle.now();
        match OwnedPermit::acquire_at(handle, now) {
            // Timed: dropped without a verdict, it is judged by its age.
            Ok(permit) => {
                ctx.permit = Some(permit);
                Ok(false)
            }
            Err(rejected) => {
                self.answer(session, 503, "rejected", retry_after_secs(&rejected))
                    .await
            }
        }
    }

    async fn upstream_peer(&self, _session: &mut Session, ctx: &mut Ctx) -> Result<Box<HttpPeer>> {
        let route = ctx.route.as_deref().unwrap_or_default();
        let upstream = &self.routes[route];
        let mut peer = HttpPeer::new(upstream.addr, false, String::new());
        peer.options.connection_timeout = Some(Duration::from_millis(250));
        peer.options.read_timeout = Some(self.timeout);
        peer.options.write_timeout = Some(self.timeout);
        Ok(Box::new(peer))
    }

    async fn upstream_request_filter(
        &self,
        _session: &mut Session,
        upstream_request: &mut RequestHeader,
        ctx: &mut Ctx,
    ) -> Result<()> {
        let uri = ctx
            .upstream_path
            .parse()
            .map_err(|e| Error::because(InternalError, "upstream path", e))?;
        upstream_request.set_uri(uri);
        if let Some(route) = &ctx.route {
            upstream_request.insert_header("Host", self.routes[route].key.as_str())?;
        }
        Ok(())
    }

    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ctx: &mut Ctx,
        mut e: Box<Error>,
    ) -> Box<Error> {
        // One upstream per route: no retry, which would connect again
        // without asking the breaker (the permit is spent).
        e.set_retry(false);
        if let Some(permit) = ctx.permit.take() {
            // Refused, timed out: the upstream's fault, unless the cause is
            // this host's own (out of file descriptors).
            let ours = e
                .cause
                .as_deref()
                .is_some_and(|cause| !Fault::of(cause).is_upstream());
            permit.record(if ours {
                Outcome::Neutral
            } else {
                Outcome::Failure
            });
        }
        e
    }

    async fn upstream_response_filter(
        &self,
        _session: &mut Session,
        upstream_response: &mut ResponseHeader,
        ctx: &mut Ctx,
    ) -> Result<()> {
        if upstream_response.status.is_informational() {
            return Ok(());
        }
        if let Some(permit) = ctx.permit.take() {
            permit.record(self.classifier.classify_status(upstream_response.status));
        }
        Ok(())
    }

    async fn logging(&self, _session: &mut Session, e: Option<&Error>, ctx: &mut Ctx) {
        // Still held: no response head came.
        if let Some(permit) = ctx.permit.take() {
            match e {
                // A reset or a read timeout on the upstream's side.
                Some(e) if *e.esource() == ErrorSource::Upstream => {
                    permit.failure();
                }
                // The client went away: judged by its age (`abandoned_after`).
                _ => drop(permit),
            }
        }
    }

    fn suppress_error_log(&self, _session: &Session, _ctx: &Ctx, _error: &Error) -> bool {
        true // the harness counts outcomes from its callers, not from logs
    }
}

const USAGE: &str = "usage: failfast-pingora --listen ADDR --route NAME=HOST:PORT [--route ...] \
[--timeout MS] [--threads N]";

fn main() {
    let mut listen = None;
    let mut routes = HashMap::new();
    let mut timeout = Duration::from_millis(900);
    let mut threads = 2;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| fail(&format!("{arg} needs a value")))
        };
        match arg.as_str() {
            "--listen" => listen = Some(value()),
            "--route" => {
                let spec = value();
                let (name, to) = spec.split_once('=').unwrap_or_else(|| fail(&spec));
                let addr: SocketAddr = to.parse().unwrap_or_else(|_| fail(to));
                assert!(addr.ip().is_loopback(), "loopback upstreams only");
                let mut buf = KeyBuf::new();
                let key = normalise(to.as_bytes(), None, DEFAULT_MAX_KEY_LEN, &mut buf)
                    .unwrap_or_else(|_| fail(to))
                    .to_owned();
                routes.insert(name.to_owned(), Upstream { key, addr });
            }
            "--timeout" => {
                let ms = value().parse().unwrap_or_else(|_| fail("--timeout MS"));
                timeout = Duration::from_millis(ms);
            }
            "--threads" => threads = value().parse().unwrap_or_else(|_| fail("--threads N")),
            _ => fail(&format!("unknown argument {arg}")),
        }
    }
    let listen = listen.unwrap_or_else(|| fail("--listen ADDR"));
    let registry = Registry::<HostKey>::builder(template())
        .build()
        .unwrap_or_else(|e| fail(&e.to_string()));
    let proxy = BreakerProxy {
        registry: Arc::new(registry),
        classifier: HttpClassifier::new(),
        routes,
        timeout,
    };
    let conf = ServerConf {
        threads,
        pid_file: format!("/tmp/failfast-pingora-{}.pid", std::process::id()),
        upgrade_sock: format!("/tmp/failfast-pingora-{}.sock", std::process::id()),
        // SIGTERM stops it at once (the harness stops its proxies between runs).
        grace_period_seconds: Some(0),
        graceful_shutdown_timeout_seconds: Some(1),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    let mut service = pingora::proxy::http_proxy_service(&server.configuration, proxy);
    service.add_tcp(&listen);
    server.add_service(service);
    eprintln!("failfast pingora proxy on http://{listen}");
    server.run_forever();
}

fn fail(what: &str) -> ! {
    eprintln!("error: {what}\n{USAGE}");
    std::process::exit(2);
}
