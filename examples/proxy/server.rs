//! The proxy's shared state, its listeners and connections, and the
//! handler every request goes through (routing to [`forward`](super::forward),
//! the status and metrics pages).

use super::*;

/// What the proxy shares between connections.
pub struct Proxy {
    /// Route name → upstream authority.
    pub routes: FnvMap<String, Authority>,
    /// The breakers, one per upstream, keyed by its `host:port` normal form.
    pub registry: Arc<Registry<HostKey>>,
    /// The cap on calls in flight, one per upstream authority.
    pub bulkheads: FnvMap<Authority, Bulkhead>,
    /// Requests per route, by [`Decision`].
    pub requests: FnvMap<String, Decisions>,
    /// The most recent transitions the layer saw, with their upstream.
    pub transitions: Mutex<VecDeque<(String, Transition)>>,
    /// The knobs it was built with.
    pub settings: Settings,
    /// The last good answer of each anonymous `GET`, for when its upstream
    /// is open.
    pub stale: Arc<StaleCache>,
    /// Where the layer reports local trips, if they are shared.
    pub outbox: Option<Arc<Outbox>>,
    /// The access log and the transitions, on stderr.
    pub log: Log,
    /// Whether `accept` is failing for want of a resource: the workers'
    /// accept loops share it, so that the log says once that the proxy
    /// backs off, and once that it accepts again, whichever worker sees it.
    pub(crate) accept_failing: Mutex<bool>,
    /// `true` once asked to stop; every accept loop and connection holds a
    /// receiver, so the count of receivers is what is still open.
    pub(crate) stop: watch::Sender<bool>,
    /// The proxy's own Prometheus recorder.
    #[cfg(feature = "metrics")]
    pub(crate) metrics: Metrics,
    pub(crate) service: Upstreams,
}

/// Builds the proxy: `template` configures every upstream's breaker.
pub fn proxy(
    routes: HashMap<String, Authority>,
    template: Builder,
    settings: Settings,
) -> Result<Arc<Proxy>, failfast::ConfigError> {
    proxy_with(routes, Registry::<HostKey>::builder(template), settings)
}

/// Builds the proxy with its breakers' registry as `breakers` describes
/// (a template, per-host overrides: see [`breakers`](super::breakers)).
pub fn proxy_with(
    routes: HashMap<String, Authority>,
    breakers: RegistryBuilder<HostKey>,
    settings: Settings,
) -> Result<Arc<Proxy>, failfast::ConfigError> {
    let registry = Arc::new(breakers.build()?);
    let routes: FnvMap<String, Authority> = routes.into_iter().collect();
    let outbox = settings.share_trips.then(|| Arc::new(Outbox::new(1024)));
    // Routes are known at start: one bulkhead per upstream (routes to the
    // same upstream share it), one row of counters per route.
    let bulkheads = routes
        .values()
        .map(|upstream| (upstream.clone(), Bulkhead::new(settings.max_in_flight)))
        .collect();
    let requests = routes
        .keys()
        .map(|name| (name.clone(), Decisions::default()))
        .collect();
    Ok(Arc::new_cyclic(|me: &std::sync::Weak<Proxy>| {
        let me = me.clone();
        let client = UpstreamClient::new(routes.values(), &settings);
        if !settings.breakers {
            let stale = Arc::new(StaleCache::new(0, 0, Duration::ZERO));
            return Proxy::new(
                routes,
                registry,
                bulkheads,
                requests,
                settings,
                stale,
                outbox,
                Upstreams::Unguarded(client),
            );
        }
        let service = KeyedLayer::new(registry.clone())
            .classify(HttpClassifier::new())
            .timeout(settings.timeout)
            .name_rejections()
            .on_transition(move |upstream: &str, t: &Transition| {
                if let Some(proxy) = me.upgrade() {
                    proxy.heard(upstream, t);
                }
            })
            .layer(client);
        let stale = Arc::new(StaleCache::new(
            settings.stale_entries,
            settings.stale_max_body,
            settings.stale_max_age,
        ));
        let from_upstream: fn(Response<Pooled>) -> Response<Body> = from_upstream;
        let service = FallbackLayer::from_recover(StaleAnswers(stale.clone()))
            .layer(tower::util::MapResponse::new(service, from_upstream));
        Proxy::new(
            routes,
            registry,
            bulkheads,
            requests,
            settings,
            stale,
            outbox,
            Upstreams::Guarded(service),
        )
    }))
}

impl Proxy {
    #[allow(clippy::too_many_arguments)]
    fn new(
        routes: FnvMap<String, Authority>,
        registry: Arc<Registry<HostKey>>,
        bulkheads: FnvMap<Authority, Bulkhead>,
        requests: FnvMap<String, Decisions>,
        settings: Settings,
        stale: Arc<StaleCache>,
        outbox: Option<Arc<Outbox>>,
        service: Upstreams,
    ) -> Proxy {
        Proxy {
            routes,
            registry,
            bulkheads,
            requests,
            transitions: Mutex::new(VecDeque::new()),
            settings,
            stale,
            outbox,
            log: Log::new(),
            accept_failing: Mutex::new(false),
            stop: watch::Sender::new(false),
            #[cfg(feature = "metrics")]
            metrics: Metrics::new(),
            service,
        }
    }

    /// A transition the layer caused: shared, printed, counted, kept.
    fn heard(&self, upstream: &str, t: &Transition) {
        if let Some(outbox) = &self.outbox {
            // Only local trips are kept; one lock-free push.
            outbox.report(upstream, t);
        }
        if self.settings.verbose {
            self.log.line("transition", |line| {
                use std::fmt::Write as _;
                let _ = write!(
                    line,
                    " upstream={upstream} from={} to={} reason={}",
                    t.from, t.to, t.reason
                );
            });
        }
        #[cfg(feature = "metrics")]
        self.metrics
            .record(|| failfast::export::metrics::record_transition_per_host(upstream, t));
        let mut kept = self.transitions.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() == KEPT_TRANSITIONS {
            kept.pop_front();
        }
        kept.push_back((upstream.to_owned(), *t));
    }

    /// Stops serving: every accept loop returns (its listener closes, so new
    /// connections are refused), and every connection closes once the
    /// request it is serving, if any, has been answered.
    pub fn shutdown(&self) {
        self.stop.send_replace(true);
    }

    /// Accept loops and connections still open.
    pub fn open_connections(&self) -> usize {
        self.stop.receiver_count()
    }

    /// Resolves once every accept loop and connection has closed.
    pub async fn drained(&self) {
        self.stop.closed().await
    }

    /// Records whether `accept` is failing and, if that changed, says so
    /// with `say`, under the lock: the log's order is the flag's, whichever
    /// workers change it.
    fn accept_failing(&self, failing: bool, say: impl FnOnce()) {
        let mut flag = self
            .accept_failing
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if std::mem::replace(&mut *flag, failing) != failing {
            say();
        }
    }

    pub(crate) fn count(&self, route: &str, decision: Decision) {
        if let Some(decisions) = self.requests.get(route) {
            decisions.add(decision);
        }
    }
}

/// What a listener answers.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// Routes, and the status and metrics pages unless an admin listener
    /// has them.
    Main,
    /// The status and metrics pages only.
    Admin,
}

/// Serves the routes on `listener` until [`Proxy::shutdown`].
pub async fn serve(listener: TcpListener, proxy: Arc<Proxy>) {
    accept_loop(listener, proxy, Role::Main).await
}

/// Serves the status and metrics pages (only) on `listener` until
/// [`Proxy::shutdown`].
pub async fn serve_admin(listener: TcpListener, proxy: Arc<Proxy>) {
    accept_loop(listener, proxy, Role::Admin).await
}

/// Errors that concern one connection (it went away before we took it):
/// the next `accept` may succeed at once.
pub(crate) fn is_connection_error(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Resolves once the proxy is asked to stop (or is gone).
pub(crate) async fn stopping(stop: &mut watch::Receiver<bool>) {
    // The borrow the wait returns is dropped here, not held by the caller.
    let _ = stop.wait_for(|stopping| *stopping).await;
}

pub(crate) async fn accept_loop(listener: TcpListener, proxy: Arc<Proxy>, role: Role) {
    let mut stop = proxy.stop.subscribe();
    let mut backoff = Duration::ZERO;
    loop {
        let accepted = tokio::select! {
            // Once asked to stop, take no new connection: returning drops
            // the listener, and the kernel refuses the next ones.
            biased;
            () = stopping(&mut stop) => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, client) = match accepted {
            Ok(accepted) => accepted,
            Err(err) if is_connection_error(&err) => continue,
            Err(err) => {
                // EMFILE, ENFILE, ENOBUFS, ENOMEM: the same call would fail
                // again at once. Wait for connections to close instead.
                proxy.accept_failing(true, || {
                    eprintln!("accept: {err}; backing off (up to {MAX_ACCEPT_BACKOFF:?})");
                });
                backoff = (backoff * 2).clamp(MIN_ACCEPT_BACKOFF, MAX_ACCEPT_BACKOFF);
                tokio::select! {
                    () = stopping(&mut stop) => return,
                    () = tokio::time::sleep(backoff) => continue,
                }
            }
        };
        backoff = Duration::ZERO;
        proxy.accept_failing(false, || eprintln!("accept: recovered"));
        tokio::spawn(serve_connection(stream, client, proxy.clone(), role));
    }
}

/// One client connection, until it closes, or until the proxy stops and
/// the request in flight on it (if any) has been answered.
pub(crate) async fn serve_connection(
    stream: TcpStream,
    client: SocketAddr,
    proxy: Arc<Proxy>,
    role: Role,
) {
    let mut stop = proxy.stop.subscribe();
    let header_timeout = proxy.settings.header_timeout;
    // Answers go out in one write each; nothing to gain from Nagle's delay.
    let _ = stream.set_nodelay(true);
    let peer = Arc::new(Peer::new(client));
    let service =
        hyper::service::service_fn(move |req| handle(req, proxy.clone(), role, peer.clone()));
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        () = stopping(&mut stop) => {
            // Answers the request in flight, then closes; an idle
            // keep-alive connection closes now.
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}

pub(crate) fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut response = Response::new(
        Full::new(body.into())
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response
}

pub(crate) async fn handle(
    req: Request<Incoming>,
    proxy: Arc<Proxy>,
    role: Role,
    client: Arc<Peer>,
) -> Result<Response<Body>, Infallible> {
    // Counted and logged when answered, or when the client goes away first
    // (hyper then drops this future, and `pending` with it).
    let mut pending = Pending::new(&proxy, &client, req.method().clone(), req.uri().clone());
    if role == Role::Main {
        pending.route = route_of(&proxy, req.uri().path());
    }
    let answer = answer(req, &proxy, role, &client, pending.route).await;
    pending.route = answer.route;
    pending.answered(answer.response.status(), answer.decision);
    Ok(answer.response)
}

/// A request's answer, what became of it, and its route.
pub(crate) struct Answer<'p> {
    pub(crate) response: Response<Body>,
    pub(crate) decision: Decision,
    /// The route's name and upstream, if the path named a route.
    pub(crate) route: Option<(&'p str, &'p Authority)>,
}

impl Answer<'_> {
    /// An answer the proxy gives itself, for no route.
    pub(crate) fn here(response: Response<Body>) -> Self {
        Answer {
            response,
            decision: Decision::NotForwarded,
            route: None,
        }
    }
}

/// `route`: the route the path names, if any (looked up once, by
/// [`handle`]).
pub(crate) async fn answer<'p>(
    req: Request<Incoming>,
    proxy: &'p Proxy,
    role: Role,
    client: &Peer,
    route: Option<(&'p str, &'p Authority)>,
) -> Answer<'p> {
    let pages_here = match role {
        Role::Admin => true,
        Role::Main => !proxy.settings.admin_listener,
    };
    if pages_here && req.uri().path() == STATUS_PATH {
        return Answer::here(status_page(req.uri().query(), proxy));
    }
    if pages_here && req.uri().path() == METRICS_PATH {
        return Answer::here(metrics_page(proxy));
    }
    if role == Role::Admin {
        return Answer::here(text(
            StatusCode::NOT_FOUND,
            "the admin address serves /_failfast and /metrics only\n",
        ));
    }
    forward(req, proxy, client, route).await
}

/// `/_failfast?limit=N`: at most `N` upstreams (default and cap:
/// `--status-limit`), open ones first, and how many were left out.
pub(crate) fn status_page(query: Option<&str>, proxy: &Proxy) -> Response<Body> {
    let cap = proxy.settings.status_limit;
    let mut limit = cap;
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        match pair.split_once('=') {
            Some(("limit", n)) => match n.parse::<usize>() {
                Ok(n) => limit = n.min(cap),
                Err(_) => return text(StatusCode::BAD_REQUEST, "limit: a number\n"),
            },
            _ => {
                return text(
                    StatusCode::BAD_REQUEST,
                    "the status page takes ?limit=N only\n",
                )
            }
        }
    }
    let mut response = text(StatusCode::OK, status_json(&proxy.registry, limit));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
