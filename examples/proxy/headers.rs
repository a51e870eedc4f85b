//! Headers between hops: hop-by-hop fields removed both ways,
//! `X-Forwarded-For` and `Via` added.

use super::*;

/// How many fields [`HOP_BY_HOP`] names.
const HOPS: usize = 9;

/// The hop-by-hop fields of RFC 9110 §7.6.1, with `Proxy-Connection` (its
/// pre-standard spelling): each describes one connection, and a proxy
/// forwards none of them.
pub const HOP_BY_HOP: [HeaderName; HOPS] = [
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
///
/// Done with one look at each field, and a removal (a hash) only for a
/// field that is there: most messages carry one hop-by-hop field
/// (`Connection: keep-alive`) or none.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // `Vec::new` allocates nothing until a name is pushed: `keep-alive` is
    // removed below anyway, and `close` names a field only if there is one.
    let mut named: Vec<HeaderName> = Vec::new();
    for token in headers
        .get_all(header::CONNECTION)
        .iter()
        .flat_map(|value| value.as_bytes().split(|b| *b == b','))
        .map(<[u8]>::trim_ascii)
    {
        let skip = token.eq_ignore_ascii_case(b"keep-alive")
            || (token.eq_ignore_ascii_case(b"close") && !headers.contains_key("close"));
        if !skip {
            named.extend(HeaderName::from_bytes(token).ok());
        }
    }
    for name in &named {
        headers.remove(name);
    }
    let mut present = [false; HOPS];
    for name in headers.keys() {
        if let Some(i) = HOP_BY_HOP.iter().position(|hop| hop == name) {
            present[i] = true;
        }
    }
    for (name, here) in HOP_BY_HOP.iter().zip(present) {
        if here {
            headers.remove(name);
        }
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

/// Appends `client` (an IP address's text) to `X-Forwarded-For`, after any
/// addresses the request already carried (one field, comma-separated).
pub(crate) fn append_forwarded_for(headers: &mut HeaderMap, client: &HeaderValue) {
    if !headers.contains_key(&X_FORWARDED_FOR) {
        // The common case: the client's address alone (a reference count).
        headers.insert(X_FORWARDED_FOR, client.clone());
        return;
    }
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
pub(crate) fn to_upstream<B>(req: &mut Request<B>, client: &Peer) {
    let version = req.version();
    let headers = req.headers_mut();
    headers.remove(header::HOST);
    strip_hop_by_hop(headers);
    append_forwarded_for(headers, &client.ip);
    append_via(headers, version);
}

/// An upstream's answer made ready for the client: the hop-by-hop fields
/// removed, `Via` added, the body boxed.
pub(crate) fn from_upstream(response: Response<Pooled>) -> Response<Body> {
    let (mut head, body) = response.into_parts();
    strip_hop_by_hop(&mut head.headers);
    append_via(&mut head.headers, head.version);
    Response::from_parts(head, body.boxed())
}
