//! Forwarding: the route, the in-flight cap, the breaker, and what
//! became of the call ([`Decision`](super::Decision)).

use super::*;

/// What became of a request: the access log's `decision`, and a label of
/// `failfast_proxy_requests_total`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The breaker let the call through: the upstream's answer, or 502/504
    /// when it failed or timed out.
    Admitted,
    /// The breaker rejected it: 503 + `Retry-After`, the upstream not called.
    Rejected,
    /// The breaker rejected it and the stale cache answered.
    Fallback,
    /// The upstream's in-flight cap was full: 503 `x-failfast: overloaded`,
    /// the breaker not asked.
    Overloaded,
    /// The client's request body broke, stalled or was too large (400, 408,
    /// 413): neutral for the breaker.
    ClientFault,
    /// The proxy ran short of a resource of its own (503): neutral.
    LocalFault,
    /// Not forwarded: no such route, a bad URI, a page of the proxy's own.
    NotForwarded,
    /// The client went away before its answer (logged with status 499); a
    /// call in flight is judged by the breaker from its age.
    Abandoned,
}

impl Decision {
    /// Every decision, in the order of [`Decisions`]' counters.
    pub const ALL: [Decision; 8] = [
        Decision::Admitted,
        Decision::Rejected,
        Decision::Fallback,
        Decision::Overloaded,
        Decision::ClientFault,
        Decision::LocalFault,
        Decision::NotForwarded,
        Decision::Abandoned,
    ];

    /// Its name in the access log and the metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Admitted => "admitted",
            Decision::Rejected => "rejected",
            Decision::Fallback => "fallback",
            Decision::Overloaded => "overloaded",
            Decision::ClientFault => "client-fault",
            Decision::LocalFault => "local-fault",
            Decision::NotForwarded => "not-forwarded",
            Decision::Abandoned => "abandoned",
        }
    }
}

/// One route's requests, counted by [`Decision`].
#[derive(Debug, Default)]
pub struct Decisions([AtomicU64; Decision::ALL.len()]);

impl Decisions {
    pub(crate) fn add(&self, decision: Decision) {
        // Relaxed: a statistic read at scrape time; it orders nothing.
        self.0[decision as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The requests counted with `decision`.
    pub fn get(&self, decision: Decision) -> u64 {
        // Relaxed: see `add`.
        self.0[decision as usize].load(Ordering::Relaxed)
    }
}

/// The route a path names (its first segment), with its upstream.
pub(crate) fn route_of<'p>(proxy: &'p Proxy, path: &str) -> Option<(&'p str, &'p Authority)> {
    let name = path.trim_start_matches('/').split('/').next()?;
    let (name, upstream) = proxy.routes.get_key_value(name)?;
    Some((name.as_str(), upstream))
}

/// The upstream URI for `/{route}/{rest}?{query}`, or the answer to give
/// instead (414 too long, 400 unparsable).
pub(crate) fn upstream_uri(
    upstream: &Authority,
    uri: &Uri,
) -> Result<Uri, (StatusCode, &'static str)> {
    let path = uri.path().trim_start_matches('/');
    let rest = path.split_once('/').map_or("", |(_, rest)| rest);
    let query = uri.query();
    let len = "http://".len()
        + upstream.as_str().len()
        + 1
        + rest.len()
        + query.map_or(0, |q| q.len() + 1);
    if len > MAX_URI {
        return Err((StatusCode::URI_TOO_LONG, "URI too long\n"));
    }
    let mut path_and_query = String::with_capacity(len);
    path_and_query.push('/');
    path_and_query.push_str(rest);
    if let Some(q) = query {
        path_and_query.push('?');
        path_and_query.push_str(q);
    }
    Uri::builder()
        .scheme(Scheme::HTTP)
        .authority(upstream.clone())
        .path_and_query(path_and_query)
        .build()
        .map_err(|_| (StatusCode::BAD_REQUEST, "bad request URI\n"))
}

pub(crate) async fn forward<'p>(
    mut req: Request<Incoming>,
    proxy: &'p Proxy,
    client: &Peer,
    route: Option<(&'p str, &'p Authority)>,
) -> Answer<'p> {
    let Some((route, upstream)) = route else {
        return Answer::here(text(StatusCode::NOT_FOUND, "no such route\n"));
    };
    let answer = |response, decision| Answer {
        response,
        decision,
        route: Some((route, upstream)),
    };
    match upstream_uri(upstream, req.uri()) {
        Ok(uri) => *req.uri_mut() = uri,
        Err((status, why)) => return answer(text(status, why), Decision::NotForwarded),
    }
    // The cap comes before the breaker: a call it turns away takes no
    // breaker permit, so it never enters the breaker's window.
    let _slot: Option<BulkheadPermit<'_>> = match proxy.bulkheads.get(upstream) {
        Some(bulkhead) => match bulkhead.try_acquire() {
            Ok(slot) => Some(slot),
            Err(_) => return answer(overloaded(upstream, bulkhead), Decision::Overloaded),
        },
        None => None, // every route's upstream has one
    };
    to_upstream(&mut req, client);
    let settings = &proxy.settings;
    let req = req.map(|body| {
        DownstreamBody::new(Either::Left(body))
            .idle_timeout(settings.body_timeout)
            .max_bytes(settings.max_body)
    });
    let service = match &proxy.service {
        Upstreams::Guarded(service) => service.clone(),
        Upstreams::Unguarded(client) => {
            let (response, decision) = unguarded(client, req, settings.timeout).await;
            return answer(response, decision);
        }
    };
    let mut req = req;
    let key = if settings.stale_routes.iter().any(|r| r == route) {
        req.extensions_mut().insert(StaleRoute);
        stale_key(&req)
    } else {
        None
    };
    let (response, decision) = match service.oneshot(req).await {
        Ok(response) if is_stale(&response) => (response, Decision::Fallback),
        Ok(response) => match key {
            Some(key) => (proxy.stale.keep(key, response).await, Decision::Admitted),
            None => (response, Decision::Admitted),
        },
        Err(err) => failed_call(&err),
    };
    answer(response, decision)
}

/// A call with the breakers off (`--no-breakers`): the client, the same
/// call timeout (504), a failed call a 502.
async fn unguarded(
    client: &UpstreamClient,
    req: Request<Upload>,
    timeout: Duration,
) -> (Response<Body>, Decision) {
    match tokio::time::timeout(timeout, client.request(req)).await {
        Ok(Ok(response)) => (from_upstream(response), Decision::Admitted),
        Ok(Err(err)) => (
            text(StatusCode::BAD_GATEWAY, format!("{err}\n")),
            Decision::Admitted,
        ),
        Err(_) => (
            text(StatusCode::GATEWAY_TIMEOUT, "upstream timed out\n"),
            Decision::Admitted,
        ),
    }
}

/// Marks a request whose route answers stale while its upstream is open.
#[derive(Copy, Clone, Debug)]
pub struct StaleRoute;

/// `503 Service Unavailable`, `x-failfast: overloaded`: the upstream has as
/// many calls in flight as the proxy sends it.
pub(crate) fn overloaded(upstream: &Authority, bulkhead: &Bulkhead) -> Response<Body> {
    let mut response = text(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "{upstream}: {} calls in flight, the most this proxy sends it\n",
            bulkhead.max()
        ),
    );
    response
        .headers_mut()
        .insert(X_FAILFAST, HeaderValue::from_static("overloaded"));
    response
}

/// The answer to a call that did not come back with a response: a
/// rejection (503 + `Retry-After`), a timeout (504), the client's fault
/// (its body broke, stalled or was too large: neutral for the breaker) as a
/// 4xx, the proxy's own (out of file descriptors: neutral too) as a 503,
/// the upstream's as a 502.
pub(crate) fn failed_call(err: &tower::BoxError) -> (Response<Body>, Decision) {
    let empty = || {
        Full::new(Bytes::new())
            .map_err(|never| match never {})
            .boxed()
    };
    if let Some(response) = error_response(err, empty) {
        let decision = if err.is::<Rejected>() {
            Decision::Rejected
        } else if err.is::<TimedOut>() {
            Decision::Admitted // and cut by the call timeout: 504
        } else {
            Decision::NotForwarded // no upstream key (400): never here, the URI has one
        };
        return (response, decision);
    }
    let (status, decision) = match Fault::of(&**err) {
        Fault::Downstream => match downstream_kind(err) {
            Some(DownstreamKind::Stalled(_)) => {
                (StatusCode::REQUEST_TIMEOUT, Decision::ClientFault)
            }
            Some(DownstreamKind::TooLarge(_)) => {
                (StatusCode::PAYLOAD_TOO_LARGE, Decision::ClientFault)
            }
            _ => (StatusCode::BAD_REQUEST, Decision::ClientFault),
        },
        Fault::Local => (StatusCode::SERVICE_UNAVAILABLE, Decision::LocalFault),
        _ => (StatusCode::BAD_GATEWAY, Decision::Admitted),
    };
    (text(status, format!("{err}\n")), decision)
}

/// What went wrong with the client's body, read off the error's chain.
pub(crate) fn downstream_kind(err: &tower::BoxError) -> Option<DownstreamKind> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(&**err);
    while let Some(e) = next {
        if let Some(d) = e.downcast_ref::<DownstreamError>() {
            return Some(d.kind());
        }
        next = e.source();
    }
    None
}
