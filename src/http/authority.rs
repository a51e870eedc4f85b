//! [`AuthorityKey`]: one key per upstream, whatever the spelling — and
//! [`Keyless`], the error of a request whose key cannot be derived.

use core::fmt;
use core::marker::PhantomData;

use super::key::{KeyFn, KeySink, Keyless, KeylessReason};
use crate::authority::{normalise, AuthorityError};
use crate::registry::HostKey;

/// Re-exported from [`failfast::authority`](crate::authority), where the
/// normaliser lives (it needs no feature).
pub use crate::authority::{KeyBuf, DEFAULT_MAX_KEY_LEN, MAX_AUTHORITY_LEN};

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

/// A text without a normal form is a request without a key; without a
/// port, the request's scheme had no default ([`KeylessReason::UnknownScheme`]).
impl From<AuthorityError> for Keyless {
    fn from(error: AuthorityError) -> Keyless {
        Keyless::new(match error {
            AuthorityError::Empty => KeylessReason::Missing,
            AuthorityError::Malformed => KeylessReason::Malformed,
            AuthorityError::BadPort => KeylessReason::BadPort,
            AuthorityError::NoPort => KeylessReason::UnknownScheme,
            AuthorityError::TooLong => KeylessReason::TooLong,
        })
    }
}

/// Writes the normal form of `authority` (`[userinfo@]host[:port]`) into
/// `buf`, `default_port` standing in for an absent or empty port, and
/// returns it: [`failfast::authority::normalise`](crate::authority::normalise)
/// with the keyed layer's error. See [`AuthorityKey`] for the rules.
///
/// ```
/// use failfast::http::{normalise_authority, AuthorityKey, KeyBuf, KeylessReason};
///
/// let mut buf = KeyBuf::new();
/// let key = normalise_authority(b"u:p@API.Example.:080", Some(80), 255, &mut buf).unwrap();
/// assert_eq!(key, "api.example:80");
/// let key = normalise_authority(b"[0:0::1]", Some(443), 255, &mut buf).unwrap();
/// assert_eq!(key, "[::1]:443");
/// assert!(normalise_authority(b"api example", Some(80), 255, &mut buf).is_err());
/// let no_port = normalise_authority(b"api.example", None, 255, &mut buf).unwrap_err();
/// assert_eq!(no_port.reason(), KeylessReason::UnknownScheme);
///
/// // `AuthorityKey::normalise` hands back the buffer.
/// let req = http::Request::get("https://Shop.example/cart").body(()).unwrap();
/// let key: KeyBuf = AuthorityKey::<HostKey>::new().normalise(&req).unwrap();
/// assert_eq!(key.as_str(), "shop.example:443");
/// # use failfast::registry::HostKey;
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
    normalise(authority, default_port, max_len, buf).map_err(Keyless::from)
}

/// A key type [`AuthorityKey`] can produce from a normal form: looked up by
/// the borrowed text where the type allows it (no allocation for a key
/// already tracked), else converted per request.
///
/// A key type of your own can shape the key: below, one breaker per host
/// name, whatever the port, looked up by the borrowed name (in the keyed
/// layer, feature `tower`).
///
/// ```
/// use failfast::http::{FromAuthority, KeySink, Keyless};
/// use std::borrow::Borrow;
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
/// # #[cfg(not(feature = "tower"))]
/// # fn main() {}
/// # #[cfg(feature = "tower")]
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower::BoxError> {
/// use failfast::tower::KeyedLayer;
/// use failfast::{Breaker, Registry};
/// use std::sync::Arc;
/// use tower::{Layer, ServiceExt};
///
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
/// `K` is the registry's key type. Use [`HostKey`], the crate's key type
/// for hosts: no allocation per request, ordinary names inline in the
/// entry, looked up by the borrowed normal form, and a configuration
/// file's `[hosts."…"]` keys are normalised the same way for it
/// (`RegistryConfig::to_builder`, feature `serde`).
/// `String` also looks up without allocating; `http::uri::Authority` (the
/// type's default, kept for compatibility) builds one per request.
///
/// ```
/// use failfast::registry::HostKey;
/// use failfast::http::{AuthorityKey, KeylessReason};
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
/// `host:port`, always with the port, as the [`authority`](crate::authority)
/// module defines it (lowercase host, no trailing dot, no userinfo, IPv6 in
/// its RFC 5952 form, the port explicit and without leading zeros). The
/// port of a request without one is its scheme's default (`http`, `ws` →
/// 80; `https`, `wss` → 443); a request without a scheme — origin-form,
/// keyed by its `Host` header — is taken as `http` unless
/// [`default_port`](AuthorityKey::default_port) says otherwise.
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
    /// # use failfast::http::{AuthorityKey, KeylessReason};
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
    /// # use failfast::http::AuthorityKey;
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

    #[inline]
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

    #[inline]
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
