//! Headers between hops: hop-by-hop fields removed both ways,
//! `X-Forwarded-For` and `Via` added.

use super::*;

/// The hop-by-hop fields of RFC 9110 §7.6.1, with `Proxy-Connection` (its
/// pre-standard spelling): each describes one connection, and a proxy
/// forwards none of them.
pub const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHORIZATION,
    header::PROXY_AUTHENTICATE,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    HeaderName::from_static("proxy-connection"),
];

/// `X-Forwarded-For`: the clients a request came through, nearest last.
pub const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// Removes the hop-by-hop fields: those `Connection` names, then
/// [`HOP_BY_HOP`]. hyper frames each hop's body itself.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .flat_map(|value| value.as_bytes().split(|b| *b == b','))
        .filter_map(|name| HeaderName::from_bytes(name.trim_ascii()).ok())
        .collect();
    for name in named.iter().chain(&HOP_BY_HOP) {
        headers.remove(name);
    }
}

/// Adds `received` (the protocol version it came in) and this proxy's name
/// to `Via` (RFC 9110 §7.6.3), after any earlier proxies'.
pub(crate) fn append_via(headers: &mut HeaderMap, received: Version) {
    let via = match received {
        Version::HTTP_09 => "0.9 failfast",
        Version::HTTP_10 => "1.0 failfast",
        Version::HTTP_2 => "2 failfast",
        Version::HTTP_3 => "3 failfast",
        _ => "1.1 failfast",
    };
    headers.append(header::VIA, HeaderValue::from_static(via));
}

/// Appends `client` to `X-Forwarded-For`, after any addresses the request
/// already carried (one field, comma-separated).
pub(crate) fn append_forwarded_for(headers: &mut HeaderMap, client: IpAddr) {
    let client = client.to_string();
    let mut value = Vec::new();
    for earlier in headers.get_all(&X_FORWARDED_FOR) {
        value.extend_from_slice(earlier.as_bytes());
        value.extend_from_slice(b", ");
    }
    value.extend_from_slice(client.as_bytes());
    // The earlier values were valid field values, and so are ", " and an
    // address: this always parses.
    if let Ok(value) = HeaderValue::from_bytes(&value) {
        headers.insert(X_FORWARDED_FOR, value);
    }
}

/// A client's request made ready for the upstream: `Host` left to the
/// upstream URI, the hop-by-hop fields removed, `X-Forwarded-For` and `Via`
/// added.
pub(crate) fn to_upstream<B>(req: &mut Request<B>, client: IpAddr) {
    let version = req.version();
    let headers = req.headers_mut();
    headers.remove(header::HOST);
    strip_hop_by_hop(headers);
    append_forwarded_for(headers, client);
    append_via(headers, version);
}

/// An upstream's answer made ready for the client: the hop-by-hop fields
/// removed, `Via` added, the body boxed.
pub(crate) fn from_upstream(response: Response<Incoming>) -> Response<Body> {
    let (mut head, body) = response.into_parts();
    strip_hop_by_hop(&mut head.headers);
    append_via(&mut head.headers, head.version);
    Response::from_parts(head, body.boxed())
}
