//! What a keyed layer asks of a request: its key ([`KeyFn`], handing it to
//! a [`KeySink`]) or why it has none ([`Keyless`]).

use core::borrow::Borrow;
use core::fmt;
use core::hash::Hash;

/// Why a request has no key.
///
/// ```
/// use failfast::http::{AuthorityKey, KeylessReason};
///
/// let keys = AuthorityKey::<String>::new();
/// let reason = |req: http::Request<()>| keys.normalise(&req).unwrap_err().reason();
/// assert_eq!(reason(http::Request::get("/v1").body(()).unwrap()), KeylessReason::Missing);
/// assert_eq!(reason(http::Request::get("http://api.example:0/").body(()).unwrap()), KeylessReason::BadPort);
/// assert_eq!(reason(http::Request::get("ftp://files.example/").body(()).unwrap()), KeylessReason::UnknownScheme);
/// let two_hosts = http::Request::get("/v1").header("host", "a.example").header("host", "b.example");
/// assert_eq!(reason(two_hosts.body(()).unwrap()), KeylessReason::Malformed);
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeylessReason {
    /// No authority in the URI and no `Host` header (or the key function
    /// returned nothing).
    Missing,
    /// The authority does not parse: bad characters, an empty or malformed
    /// host, two `Host` headers.
    Malformed,
    /// The port is not a number in 1..=65535.
    BadPort,
    /// No port, and the scheme has no known default.
    UnknownScheme,
    /// Longer than the key length limit.
    TooLong,
}

impl KeylessReason {
    /// A short, stable name (for logs and metric labels).
    ///
    /// ```
    /// use failfast::http::KeylessReason;
    /// assert_eq!(KeylessReason::TooLong.as_str(), "too_long");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            KeylessReason::Missing => "missing",
            KeylessReason::Malformed => "malformed",
            KeylessReason::BadPort => "bad_port",
            KeylessReason::UnknownScheme => "unknown_scheme",
            KeylessReason::TooLong => "too_long",
        }
    }
}

impl fmt::Display for KeylessReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request whose breaker key cannot be derived. The keyed layer returns it
/// boxed in a [`BoxError`](super::BoxError) when its keyless policy is
/// [`KeylessPolicy::Reject`](crate::tower::KeylessPolicy::Reject) (the default): a
/// client error, which a proxy answers with 400 Bad Request.
///
/// ```
/// use failfast::http::{Keyless, KeylessReason};
///
/// let err: failfast::http::BoxError = Box::new(Keyless::new(KeylessReason::BadPort));
/// let keyless = err.downcast_ref::<Keyless>().unwrap();
/// assert_eq!(keyless.reason(), KeylessReason::BadPort);
/// assert_eq!(err.to_string(), "no breaker key for the request: bad_port");
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Keyless {
    reason: KeylessReason,
}

impl Keyless {
    /// A keyless request, for `reason`.
    pub const fn new(reason: KeylessReason) -> Keyless {
        Keyless { reason }
    }

    /// Why.
    pub const fn reason(&self) -> KeylessReason {
        self.reason
    }
}

impl fmt::Display for Keyless {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no breaker key for the request: {}", self.reason)
    }
}

impl std::error::Error for Keyless {}

/// Picks the key of a request: the upstream whose breaker guards it.
///
/// A key function hands the key it derived to a [`KeySink`] — borrowed when
/// it can, so a request for a key the registry already tracks allocates
/// nothing — or returns [`Keyless`] when the request has none; the layer's
/// [`KeylessPolicy`](crate::tower::KeylessPolicy) then decides.
///
/// Any `Fn(&Req) -> Option<K>` is a key function (an owned key per request;
/// `None` is [`KeylessReason::Missing`]); [`AuthorityKey`](super::AuthorityKey) is the default for
/// `http::Request`.
///
/// ```
/// use failfast::http::{KeyFn, KeySink, Keyless, KeylessReason};
///
/// /// Keys requests by their first path segment, borrowed.
/// struct FirstSegment;
///
/// impl<B> KeyFn<http::Request<B>> for FirstSegment {
///     type Key = String;
///     fn key_into<S: KeySink<String>>(&self, req: &http::Request<B>, sink: S) -> Result<S::Output, Keyless> {
///         match req.uri().path().split('/').nth(1) {
///             Some(segment) if !segment.is_empty() => Ok(sink.borrowed(segment)),
///             _ => Err(Keyless::new(KeylessReason::Missing)),
///         }
///     }
/// }
/// ```
pub trait KeyFn<Req> {
    /// The registry's key type.
    type Key;

    /// Derives `req`'s key and hands it to `sink`.
    ///
    /// # Errors
    ///
    /// [`Keyless`] when `req` has no key.
    fn key_into<S: KeySink<Self::Key>>(&self, req: &Req, sink: S) -> Result<S::Output, Keyless>;
}

/// Where a [`KeyFn`] sends the key it derived (the keyed layer's registry
/// lookup): the three ways a key can arrive.
///
/// A sink of your own puts a key function to other uses: below,
/// [`AuthorityKey`](super::AuthorityKey)'s normal form looks up a table of
/// per-upstream settings, without allocating.
///
/// ```
/// use failfast::http::{AuthorityKey, KeyFn, KeySink};
/// use std::borrow::Borrow;
/// use std::collections::HashMap;
/// use std::hash::Hash;
///
/// /// Finds a key's entry in a map.
/// struct Find<'m, V>(&'m HashMap<String, V>);
///
/// impl<'m, V> KeySink<String> for Find<'m, V> {
///     type Output = Option<&'m V>;
///
///     fn owned(self, key: String) -> Option<&'m V> {
///         self.0.get(&key)
///     }
///
///     fn borrowed<Q>(self, key: &Q) -> Option<&'m V>
///     where
///         String: Borrow<Q>,
///         Q: Hash + Eq + ToOwned<Owned = String> + ?Sized,
///     {
///         self.0.get(key)
///     }
///
///     fn converted<Q>(self, key: &Q) -> Option<&'m V>
///     where
///         String: Borrow<Q> + for<'q> From<&'q Q>,
///         Q: Hash + Eq + ?Sized,
///     {
///         self.0.get(key)
///     }
/// }
///
/// let max_in_flight = HashMap::from([("api.example:443".to_owned(), 100)]);
/// let keys = AuthorityKey::<String>::new();
/// let req = http::Request::get("https://API.example/v1").body(()).unwrap();
/// assert_eq!(keys.key_into(&req, Find(&max_in_flight)), Ok(Some(&100)));
/// let req = http::Request::get("https://other.example/").body(()).unwrap();
/// assert_eq!(keys.key_into(&req, Find(&max_in_flight)), Ok(None));
/// ```
pub trait KeySink<K> {
    /// What the lookup produces.
    type Output;

    /// An owned key: moved into the registry if new, dropped if not.
    fn owned(self, key: K) -> Self::Output;

    /// A borrowed key whose `ToOwned` is `K` (`&str` for `String`): cloned
    /// only if new.
    fn borrowed<Q>(self, key: &Q) -> Self::Output
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized;

    /// A borrowed key converted with `From` (`&str` for a
    /// [`HostKey`](crate::registry::HostKey)): converted only if new.
    fn converted<Q>(self, key: &Q) -> Self::Output
    where
        K: Borrow<Q> + for<'q> From<&'q Q>,
        Q: Hash + Eq + ?Sized;
}

impl<Req, K, F> KeyFn<Req> for F
where
    F: Fn(&Req) -> Option<K>,
{
    type Key = K;

    fn key_into<S: KeySink<K>>(&self, req: &Req, sink: S) -> Result<S::Output, Keyless> {
        match self(req) {
            Some(key) => Ok(sink.owned(key)),
            None => Err(Keyless::new(KeylessReason::Missing)),
        }
    }
}
