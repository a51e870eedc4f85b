//! Stale answers while an upstream is open, never someone else's.

use super::*;

/// What a `GET`'s stale answer is filed under: its upstream URI, and the
/// request's fields (an answer that `Vary`s on some of them is served only
/// to requests that send the same values).
pub struct StaleKey {
    uri: String,
    headers: HeaderMap,
}

/// The stale key of a request whose answer may be kept and served to
/// others: an idempotent `GET` that carries nothing personal — no
/// `Authorization`, no `Cookie` (a shared cache must not reuse such an
/// answer: RFC 9111 §3.5) — and does not ask `no-store` or `no-cache`.
pub(crate) fn stale_key<B>(req: &Request<B>) -> Option<StaleKey> {
    let headers = req.headers();
    let personal =
        headers.contains_key(header::AUTHORIZATION) || headers.contains_key(header::COOKIE);
    let uncached = has_directive(headers, &["no-store", "no-cache"]);
    (req.method() == Method::GET && !personal && !uncached).then(|| StaleKey {
        uri: req.uri().to_string(),
        headers: headers.clone(),
    })
}

/// Response directives under which a shared cache may not keep an answer,
/// or may not serve it stale: `no-store` and `private` (RFC 9111 §5.2.2.5,
/// §5.2.2.7), `no-cache` and `must-revalidate`, `proxy-revalidate`,
/// `s-maxage` (§4.2.4: no stale answer without revalidation).
pub(crate) const NOT_KEPT: [&str; 6] = [
    "no-store",
    "private",
    "no-cache",
    "must-revalidate",
    "proxy-revalidate",
    "s-maxage",
];

/// Whether `Cache-Control` holds any of `directives` (by name, any case;
/// `private="x"` counts as `private`).
pub(crate) fn has_directive(headers: &HeaderMap, directives: &[&str]) -> bool {
    headers
        .get_all(header::CACHE_CONTROL)
        .iter()
        .flat_map(|value| value.as_bytes().split(|b| *b == b','))
        .map(|directive| {
            directive
                .split(|b| *b == b'=')
                .next()
                .unwrap_or_default()
                .trim_ascii()
        })
        .any(|name| {
            directives
                .iter()
                .any(|d| name.eq_ignore_ascii_case(d.as_bytes()))
        })
}

/// The request fields an answer varies on, or `None` if it may not be
/// served to anyone else: `Vary: *`, `Vary` on `Authorization` or
/// `Cookie`, or a `Vary` that does not parse.
pub(crate) fn varied_fields(headers: &HeaderMap) -> Option<Vec<HeaderName>> {
    let mut fields = Vec::new();
    for token in headers
        .get_all(header::VARY)
        .iter()
        .flat_map(|value| value.as_bytes().split(|b| *b == b','))
        .map(<[u8]>::trim_ascii)
        .filter(|token| !token.is_empty())
    {
        if token == b"*" {
            return None; // it varies on more than the request's fields
        }
        let field = HeaderName::from_bytes(token).ok()?;
        if field == header::AUTHORIZATION || field == header::COOKIE {
            return None;
        }
        fields.push(field);
    }
    Some(fields)
}

/// The fields the answer to `request` varies on, with the request's values
/// for them: what a later request must send to be served the same answer.
/// `None` if the answer may not be kept for anyone else (see [`NOT_KEPT`],
/// [`varied_fields`]; an answer that sets a cookie is someone's too).
pub(crate) fn keepable(
    answer: &HeaderMap,
    request: &HeaderMap,
) -> Option<Vec<(HeaderName, Vec<HeaderValue>)>> {
    if has_directive(answer, &NOT_KEPT) || answer.contains_key(header::SET_COOKIE) {
        return None;
    }
    let fields = varied_fields(answer)?;
    Some(
        fields
            .into_iter()
            .map(|field| {
                let values = request.get_all(&field).iter().cloned().collect();
                (field, values)
            })
            .collect(),
    )
}

/// A kept answer: its head, its whole body, when it was fresh, and the
/// request fields it was selected by.
pub(crate) struct Kept {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    stored: Instant,
    selected: Vec<(HeaderName, Vec<HeaderValue>)>,
}

impl Kept {
    /// Whether `request` sends the values this answer was selected by.
    fn selected_by(&self, request: &HeaderMap) -> bool {
        self.selected
            .iter()
            .all(|(field, values)| request.get_all(field).iter().eq(values.iter()))
    }
}

/// The last good answer of each anonymous `GET`, bounded: at most `entries`
/// answers (the oldest key goes first), each body at most `max_body` bytes,
/// served at most `max_age` after it was fresh.
pub struct StaleCache {
    entries: usize,
    max_body: usize,
    max_age: Duration,
    kept: Mutex<(HashMap<String, Kept>, VecDeque<String>)>,
}

impl StaleCache {
    pub(crate) fn new(entries: usize, max_body: usize, max_age: Duration) -> StaleCache {
        StaleCache {
            entries,
            max_body,
            max_age,
            kept: Mutex::new((HashMap::new(), VecDeque::new())),
        }
    }

    /// How many answers are kept.
    pub fn len(&self) -> usize {
        self.kept.lock().unwrap_or_else(|p| p.into_inner()).0.len()
    }

    /// Whether no answer is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keeps a fresh `200` answer to `key` and gives it back, its body read
    /// whole when kept. A fresh `200` that may not be kept (too large, or
    /// someone's own: see [`keepable`]) drops the answer kept before it,
    /// which is no longer the last good one.
    pub(crate) async fn keep(&self, key: StaleKey, response: Response<Body>) -> Response<Body> {
        if self.entries == 0 || response.status() != StatusCode::OK || is_stale(&response) {
            return response;
        }
        let fits = hyper::body::Body::size_hint(response.body())
            .upper()
            .is_some_and(|n| n <= self.max_body as u64);
        let selected = keepable(response.headers(), &key.headers).filter(|_| fits);
        let Some(selected) = selected else {
            self.forget(&key.uri);
            return response;
        };
        let (head, body) = response.into_parts();
        let body = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(err) => return text(StatusCode::BAD_GATEWAY, format!("{err}\n")),
        };
        let kept = Kept {
            status: head.status,
            headers: head.headers.clone(),
            body: body.clone(),
            stored: Instant::now(),
            selected,
        };
        let mut guard = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let (map, order) = &mut *guard;
        if map.insert(key.uri.clone(), kept).is_none() {
            order.push_back(key.uri);
            if order.len() > self.entries {
                if let Some(oldest) = order.pop_front() {
                    map.remove(&oldest);
                }
            }
        }
        drop(guard);
        Response::from_parts(
            head,
            Full::new(body).map_err(|never| match never {}).boxed(),
        )
    }

    fn forget(&self, uri: &str) {
        let mut guard = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let (map, order) = &mut *guard;
        if map.remove(uri).is_some() {
            order.retain(|kept| kept != uri);
        }
    }

    /// The kept answer to `key`, marked stale, if there is one and the
    /// request sends what it was selected by.
    fn answer(&self, key: &StaleKey, rejected: &Rejected) -> Option<Response<Body>> {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let kept = kept.0.get(&key.uri)?;
        if !kept.selected_by(&key.headers) || kept.stored.elapsed() > self.max_age {
            return None;
        }
        let mut response = Response::new(
            Full::new(kept.body.clone())
                .map_err(|never| match never {})
                .boxed(),
        );
        *response.status_mut() = kept.status;
        *response.headers_mut() = kept.headers.clone();
        mark_stale(&mut response, rejected, Some(kept.stored.elapsed()));
        Some(response)
    }
}

/// The proxy's fallback: a rejected anonymous `GET` answered from the stale
/// cache; any other rejection (a miss, another method, a personal request)
/// left to become a 503.
#[derive(Clone)]
pub struct StaleAnswers(pub(crate) Arc<StaleCache>);

impl Recover<Request<Upload>, Response<Body>> for StaleAnswers {
    type Memo = Option<StaleKey>;

    fn remember(&self, req: &Request<Upload>) -> Option<StaleKey> {
        req.extensions().get::<StaleRoute>()?;
        stale_key(req)
    }

    fn answer(&self, key: Option<StaleKey>, rejected: &Rejected) -> Option<Response<Body>> {
        self.0.answer(&key?, rejected)
    }
}
