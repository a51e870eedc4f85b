//! [`AuthorityKey`]: one key per upstream, whatever the spelling — and
//! [`Keyless`], the error of a request whose key cannot be derived.

use core::fmt::{self, Write as _};
use core::marker::PhantomData;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::key::{KeyFn, KeySink, Keyless, KeylessReason};
use crate::registry::HostKey;

/// The longest text a normal form can take: a 253-byte name, `:` and a
/// 5-digit port.
pub const MAX_AUTHORITY_LEN: usize = 259;

/// The default [`AuthorityKey::max_len`]: 255 bytes, the DNS limit.
pub const DEFAULT_MAX_KEY_LEN: usize = 255;

/// Inputs longer than this are refused before they are read.
const MAX_INPUT: usize = 1024;

/// A stack buffer holding one normal form (see [`AuthorityKey`]): what
/// [`AuthorityKey::normalise`] returns, and where [`normalise_authority`]
/// writes, so deriving a key allocates nothing.
///
/// ```
/// use failfast::tower::{normalise_authority, AuthorityKey, KeyBuf};
///
/// let req = http::Request::get("https://Shop.example/cart").body(()).unwrap();
/// let key: KeyBuf = AuthorityKey::<String>::new().normalise(&req).unwrap();
/// assert_eq!(key.as_str(), "shop.example:443");
///
/// // One buffer serves many authorities: each is written over the last.
/// let mut buf = KeyBuf::new();
/// for authority in ["API.example", "api.example.:080", "user@api.example:80"] {
///     let key = normalise_authority(authority.as_bytes(), Some(80), 255, &mut buf).unwrap();
///     assert_eq!(key, "api.example:80");
/// }
/// ```
#[derive(Clone)]
pub struct KeyBuf {
    bytes: [u8; MAX_AUTHORITY_LEN],
    len: usize,
}

impl KeyBuf {
    /// An empty buffer.
    ///
    /// ```
    /// use failfast::tower::KeyBuf;
    /// assert_eq!(KeyBuf::new().as_str(), "");
    /// ```
    pub const fn new() -> KeyBuf {
        KeyBuf {
            bytes: [0; MAX_AUTHORITY_LEN],
            len: 0,
        }
    }

    /// The text written so far.
    pub fn as_str(&self) -> &str {
        // Only ASCII is ever written.
        core::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }

    fn push(&mut self, bytes: &[u8]) -> Result<(), Keyless> {
        let end = self.len + bytes.len();
        let Some(to) = self.bytes.get_mut(self.len..end) else {
            return Err(Keyless::new(KeylessReason::TooLong));
        };
        to.copy_from_slice(bytes);
        self.len = end;
        Ok(())
    }
}

impl Default for KeyBuf {
    fn default() -> KeyBuf {
        KeyBuf::new()
    }
}

impl fmt::Write for KeyBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push(s.as_bytes()).map_err(|_| fmt::Error)
    }
}

impl fmt::Debug for KeyBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// The default port of `scheme` (ASCII case-insensitive).
fn scheme_port(scheme: &str) -> Option<u16> {
    if scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("ws") {
        Some(80)
    } else if scheme.eq_ignore_ascii_case("https") || scheme.eq_ignore_ascii_case("wss") {
        Some(443)
    } else {
        None
    }
}

fn malformed() -> Keyless {
    Keyless::new(KeylessReason::Malformed)
}

/// A port's digits, leading zeros dropped; `None` when absent or empty.
fn parse_port(digits: &[u8]) -> Result<Option<u16>, Keyless> {
    if digits.is_empty() {
        return Ok(None);
    }
    let mut port: u32 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(Keyless::new(KeylessReason::BadPort));
        }
        port = port * 10 + u32::from(d - b'0');
        if port > 65_535 {
            return Err(Keyless::new(KeylessReason::BadPort));
        }
    }
    match u16::try_from(port) {
        Ok(p) if p > 0 => Ok(Some(p)),
        _ => Err(Keyless::new(KeylessReason::BadPort)),
    }
}

/// What a byte may be in a host name: 0 = not allowed, else the byte to
/// write (lowercased); `.` separates labels.
const NAME_BYTE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = match c {
            b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => c,
            b'A'..=b'Z' => c + 32,
            _ => 0,
        };
        b += 1;
    }
    table
};

/// Writes the normal form of a DNS name or IPv4 address: one pass that
/// lowercases, checks every byte and the label lengths.
fn push_name(host: &[u8], buf: &mut KeyBuf) -> Result<(), Keyless> {
    let host = host.strip_suffix(b".").unwrap_or(host);
    if host.is_empty() || host.len() > 253 {
        return Err(malformed());
    }
    let start = buf.len;
    let Some(out) = buf.bytes.get_mut(start..start + host.len()) else {
        return Err(Keyless::new(KeylessReason::TooLong));
    };
    let mut label = 0usize;
    let mut last_start = 0usize;
    for (i, (&b, o)) in host.iter().zip(out.iter_mut()).enumerate() {
        let c = NAME_BYTE[b as usize];
        if c == b'.' {
            if label == 0 {
                return Err(malformed());
            }
            label = 0;
            last_start = i + 1;
        } else if c == 0 || label == 63 {
            return Err(malformed());
        } else {
            label += 1;
        }
        *o = c;
    }
    if label == 0 {
        return Err(malformed());
    }
    buf.len = start + host.len();
    let last = &buf.bytes[start + last_start..buf.len];
    let numeric = last.iter().all(u8::is_ascii_digit)
        || (last.len() > 2
            && last.starts_with(b"0x")
            && last[2..].iter().all(u8::is_ascii_hexdigit));
    if numeric {
        // Only the plain dotted quad (std's parser refuses leading zeros and
        // short forms); its text is already canonical.
        let text = core::str::from_utf8(&buf.bytes[start..buf.len]).map_err(|_| malformed())?;
        text.parse::<Ipv4Addr>().map_err(|_| malformed())?;
    }
    Ok(())
}

/// Writes `:port` in decimal.
fn push_port(buf: &mut KeyBuf, port: u16) -> Result<(), Keyless> {
    let mut digits = [0u8; 6];
    let mut i = digits.len();
    let mut n = port;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    i -= 1;
    digits[i] = b':';
    buf.push(&digits[i..])
}

/// Writes the normal form of `authority` (`[userinfo@]host[:port]`) into
/// `buf`, `default_port` standing in for an absent or empty port, and
/// returns it. See [`AuthorityKey`] for the rules.
///
/// ```
/// use failfast::tower::{normalise_authority, KeyBuf};
///
/// let mut buf = KeyBuf::new();
/// let key = normalise_authority(b"u:p@API.Example.:080", Some(80), 255, &mut buf).unwrap();
/// assert_eq!(key, "api.example:80");
/// let key = normalise_authority(b"[0:0::1]", Some(443), 255, &mut buf).unwrap();
/// assert_eq!(key, "[::1]:443");
/// assert!(normalise_authority(b"api example", Some(80), 255, &mut buf).is_err());
/// ```
///
/// # Errors
///
/// [`Keyless`] with the reason the authority has no key.
pub fn normalise_authority<'b>(
    authority: &[u8],
    default_port: Option<u16>,
    max_len: usize,
    buf: &'b mut KeyBuf,
) -> Result<&'b str, Keyless> {
    buf.len = 0;
    if authority.len() > MAX_INPUT {
        return Err(Keyless::new(KeylessReason::TooLong));
    }
    if authority.is_empty() {
        return Err(Keyless::new(KeylessReason::Missing));
    }
    // Printable ASCII, none of `/ ? # \`; and where userinfo ends.
    let mut after_at = 0;
    for (i, &b) in authority.iter().enumerate() {
        if !b.is_ascii_graphic() || matches!(b, b'/' | b'?' | b'#' | b'\\') {
            return Err(malformed());
        }
        if b == b'@' {
            after_at = i + 1;
        }
    }
    let host_port = &authority[after_at..];
    let port_digits: &[u8];
    if let Some(rest) = host_port.strip_prefix(b"[") {
        let close = rest.iter().position(|&b| b == b']').ok_or_else(malformed)?;
        let text = core::str::from_utf8(&rest[..close]).map_err(|_| malformed())?;
        let ip: Ipv6Addr = text.parse().map_err(|_| malformed())?;
        port_digits = match &rest[close + 1..] {
            [] => &[],
            [b':', digits @ ..] => digits,
            _ => return Err(malformed()),
        };
        write!(buf, "[{ip}]").map_err(|_| malformed())?;
    } else {
        let (host, digits) = match host_port.iter().rposition(|&b| b == b':') {
            Some(colon) => (&host_port[..colon], &host_port[colon + 1..]),
            None => (host_port, &[][..]),
        };
        // A second `:` (or a bracket) is not a name byte: `push_name` refuses it.
        port_digits = digits;
        push_name(host, buf)?;
    }
    let port = match parse_port(port_digits)? {
        Some(port) => port,
        None => default_port.ok_or(Keyless::new(KeylessReason::UnknownScheme))?,
    };
    push_port(buf, port)?;
    if buf.len > max_len {
        return Err(Keyless::new(KeylessReason::TooLong));
    }
    Ok(buf.as_str())
}

/// A key type [`AuthorityKey`] can produce from a normal form: looked up by
/// the borrowed text where the type allows it (no allocation for a key
/// already tracked), else converted per request.
///
/// A key type of your own can shape the key: below, one breaker per host
/// name, whatever the port, looked up by the borrowed name.
///
/// ```
/// use failfast::tower::{FromAuthority, KeySink, KeyedLayer, Keyless};
/// use failfast::{Breaker, Registry};
/// use std::borrow::Borrow;
/// use std::sync::Arc;
/// use tower::{Layer, ServiceExt};
///
/// /// A host name without its port.
/// #[derive(PartialEq, Eq, Hash)] // hashed as its one field: as its text
/// struct Host(Box<str>);
///
/// impl Borrow<str> for Host {
///     fn borrow(&self) -> &str {
///         &self.0
///     }
/// }
///
/// impl From<&str> for Host {
///     fn from(name: &str) -> Host {
///         Host(name.into())
///     }
/// }
///
/// impl FromAuthority for Host {
///     fn deliver<S: KeySink<Host>>(normalised: &str, sink: S) -> Result<S::Output, Keyless> {
///         // A normal form always ends in `:port`.
///         let name = normalised.rsplit_once(':').map_or(normalised, |(name, _port)| name);
///         Ok(sink.converted(name)) // a new `Host` only for a new name
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower::BoxError> {
/// let registry = Arc::new(Registry::<Host>::builder(Breaker::builder().consecutive_failures(5)).build()?);
/// let upstream = tower::service_fn(|_req: http::Request<()>| async {
///     Ok::<_, std::io::Error>(http::Response::new(()))
/// });
/// let svc = KeyedLayer::new(registry.clone()).layer(upstream); // keyed by `AuthorityKey<Host>`
/// for uri in ["http://API.example/", "https://api.example/", "http://api.example:8080/"] {
///     svc.clone().oneshot(http::Request::get(uri).body(()).unwrap()).await?;
/// }
/// assert_eq!(registry.len(), 1);
/// registry.for_each_snapshot(|host, _| assert_eq!(&*host.0, "api.example"));
/// # Ok(())
/// # }
/// ```
pub trait FromAuthority: Sized {
    /// Sends the key for `normalised` (a normal form) to `sink`.
    ///
    /// # Errors
    ///
    /// [`Keyless`] if the type cannot hold the text.
    fn deliver<S: KeySink<Self>>(normalised: &str, sink: S) -> Result<S::Output, Keyless>;
}

impl FromAuthority for HostKey {
    fn deliver<S: KeySink<HostKey>>(normalised: &str, sink: S) -> Result<S::Output, Keyless> {
        Ok(sink.converted(normalised))
    }
}

impl FromAuthority for String {
    fn deliver<S: KeySink<String>>(normalised: &str, sink: S) -> Result<S::Output, Keyless> {
        Ok(sink.borrowed(normalised))
    }
}

impl FromAuthority for Box<str> {
    fn deliver<S: KeySink<Box<str>>>(normalised: &str, sink: S) -> Result<S::Output, Keyless> {
        Ok(sink.converted(normalised))
    }
}

/// An `http::uri::Authority` cannot be looked up by `&str`: one is built
/// (and allocated) per request. Prefer [`HostKey`].
impl FromAuthority for http::uri::Authority {
    fn deliver<S: KeySink<Self>>(normalised: &str, sink: S) -> Result<S::Output, Keyless> {
        let authority = http::uri::Authority::try_from(normalised).map_err(|_| malformed())?;
        Ok(sink.owned(authority))
    }
}

/// The default key of an `http::Request`: the normal form (below) of its
/// URI's authority (as a client or a forward proxy sees it), else of its
/// `Host` header (as a server or a reverse proxy sees it).
///
/// `K` is the registry's key type: [`HostKey`] is the compact choice (no
/// allocation per request, ordinary names inline in the entry); `String`
/// also looks up without allocating; `http::uri::Authority` (the default,
/// for compatibility) builds one per request.
///
/// ```
/// use failfast::registry::HostKey;
/// use failfast::tower::{AuthorityKey, KeylessReason};
///
/// let keys = AuthorityKey::<HostKey>::new();
/// let req = http::Request::get("http://API.example:8080/v1").body(()).unwrap();
/// assert_eq!(keys.normalise(&req).unwrap().as_str(), "api.example:8080");
/// let req = http::Request::get("/v1").header("host", "shop.example.").body(()).unwrap();
/// assert_eq!(keys.normalise(&req).unwrap().as_str(), "shop.example:80");
/// let req = http::Request::get("/v1").header("host", "shop.example:99999").body(()).unwrap();
/// assert_eq!(keys.normalise(&req).unwrap_err().reason(), KeylessReason::BadPort);
/// ```
///
/// # The normal form
///
/// `host:port`, always with the port:
///
/// * the **host** lowercased, one trailing dot removed; a name is letters,
///   digits, `-`, `_` and `.`-separated labels of 1..=63 bytes, at most 253
///   bytes in all (DNS); a name whose last label is numeric (`127.1`,
///   `0x7f.0.0.1`, `1.2.3.04`) must be a plain dotted-quad IPv4 address, since
///   resolvers read the other spellings as the same address in other bases;
///   an IPv6 literal is written in its RFC 5952 form (`[::1]`), zone ids are
///   not accepted;
/// * **userinfo** (`user:pass@`) removed;
/// * the **port** explicit: the scheme's default when absent or empty
///   (`http`, `ws` → 80; `https`, `wss` → 443; a request without a scheme —
///   origin-form, keyed by its `Host` header — is taken as `http` unless
///   [`default_port`](AuthorityKey::default_port) says otherwise), leading
///   zeros dropped (`080` is 80, as clients read it), and in 1..=65535.
///
/// Anything else — an empty or absent authority, spaces, `/`, a bad port, an
/// unknown scheme without a port, two `Host` headers, a key longer than
/// [`max_len`](AuthorityKey::max_len) — has no key: [`Keyless`].
///
/// The normal form is built in a stack buffer, so deriving a key allocates
/// nothing; a registry of [`HostKey`]s or `String`s is then looked up by the
/// borrowed text, and the key is allocated (or, for a short `HostKey`, copied
/// inline) only when it is new.
pub struct AuthorityKey<K = http::uri::Authority> {
    max_len: usize,
    default_port: Option<u16>,
    key: PhantomData<fn() -> K>,
}

impl<K> AuthorityKey<K> {
    /// Keys of at most [`DEFAULT_MAX_KEY_LEN`] bytes; requests without a
    /// scheme taken as `http`.
    pub const fn new() -> AuthorityKey<K> {
        AuthorityKey {
            max_len: DEFAULT_MAX_KEY_LEN,
            default_port: Some(80),
            key: PhantomData,
        }
    }

    /// Longer normal forms have no key ([`KeylessReason::TooLong`]); at most
    /// [`MAX_AUTHORITY_LEN`].
    ///
    /// ```
    /// # use failfast::tower::{AuthorityKey, KeylessReason};
    /// let keys = AuthorityKey::<String>::new().max_len(16);
    /// let req = http::Request::get("http://a-long-name.example/").body(()).unwrap();
    /// assert_eq!(keys.normalise(&req).unwrap_err().reason(), KeylessReason::TooLong);
    /// ```
    pub const fn max_len(mut self, max_len: usize) -> Self {
        self.max_len = if max_len < MAX_AUTHORITY_LEN {
            max_len
        } else {
            MAX_AUTHORITY_LEN
        };
        self
    }

    /// The port of a request without a scheme (origin-form, keyed by its
    /// `Host` header) when the header has none: 80 by default (`http`), 443
    /// behind a TLS listener, `None` to refuse such requests
    /// ([`KeylessReason::UnknownScheme`]).
    ///
    /// ```
    /// # use failfast::tower::AuthorityKey;
    /// let keys = AuthorityKey::<String>::new().default_port(Some(443));
    /// let req = http::Request::get("/").header("host", "shop.example").body(()).unwrap();
    /// assert_eq!(keys.normalise(&req).unwrap().as_str(), "shop.example:443");
    /// ```
    pub const fn default_port(mut self, port: Option<u16>) -> Self {
        self.default_port = port;
        self
    }

    /// The normal form of `req`'s key, in a stack buffer.
    ///
    /// # Errors
    ///
    /// [`Keyless`] when `req` has no key.
    pub fn normalise<B>(&self, req: &http::Request<B>) -> Result<KeyBuf, Keyless> {
        let mut buf = KeyBuf::new();
        self.normalise_into(req, &mut buf)?;
        Ok(buf)
    }

    fn normalise_into<'b, B>(
        &self,
        req: &http::Request<B>,
        buf: &'b mut KeyBuf,
    ) -> Result<&'b str, Keyless> {
        let uri = req.uri();
        if let Some(authority) = uri.authority() {
            let port = match uri.scheme_str() {
                Some(scheme) => scheme_port(scheme),
                None => self.default_port,
            };
            return normalise_authority(authority.as_str().as_bytes(), port, self.max_len, buf);
        }
        let mut hosts = req.headers().get_all(http::header::HOST).iter();
        let host = hosts.next().ok_or(Keyless::new(KeylessReason::Missing))?;
        if hosts.next().is_some() {
            return Err(malformed());
        }
        normalise_authority(host.as_bytes(), self.default_port, self.max_len, buf)
    }
}

impl<K> Default for AuthorityKey<K> {
    fn default() -> Self {
        AuthorityKey::new()
    }
}

impl<K> Clone for AuthorityKey<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for AuthorityKey<K> {}

impl<K> fmt::Debug for AuthorityKey<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthorityKey")
            .field("max_len", &self.max_len)
            .field("default_port", &self.default_port)
            .finish()
    }
}

impl<B, K: FromAuthority> KeyFn<http::Request<B>> for AuthorityKey<K> {
    type Key = K;

    fn key_into<S: KeySink<K>>(
        &self,
        req: &http::Request<B>,
        sink: S,
    ) -> Result<S::Output, Keyless> {
        let mut buf = KeyBuf::new();
        let normalised = self.normalise_into(req, &mut buf)?;
        K::deliver(normalised, sink)
    }
}
