//! What a key must be, how an entry keeps it, and a key as a caller passed
//! it: borrowed (converted to the kept form only on a miss) or owned.

use core::borrow::Borrow;
use core::marker::PhantomData;

use super::host::HostKey;

/// How a [`Registry<K>`](crate::Registry) keeps a key of type `K` in its
/// entries: the form it stores, which borrows as `K`.
///
/// Every sized type is kept as itself, so a `Registry<u64>` or a
/// `Registry<MyKey>` needs nothing from this trait. `str` is kept as a
/// [`HostKey`]: a `Registry<str>` is a registry of text keys whose text (up
/// to 23 bytes, an ordinary `host:port`) lives inside the entry's own
/// allocation, with no allocation of its own, where a `Registry<String>`
/// allocates a heap buffer per key beside the entry (140 against 108 bytes
/// per host at a million hosts, `benches/README.md`). A `Registry<str>` is
/// looked up by `&str`, takes `&str` in
/// [`insert_with`](crate::Registry::insert_with) and
/// [`override_key`](super::RegistryBuilder::override_key), hands out `&str`
/// ([`Handle::key`](crate::Handle::key), [`retain`](crate::Registry::retain),
/// [`for_each_snapshot`](crate::Registry::for_each_snapshot)), and its
/// [`snapshots`](crate::Registry::snapshots) yield `HostKey`s.
///
/// The integrations that build keys themselves (the keyed tower layer,
/// configuration files, replicas) use sized keys; for them a
/// `Registry<HostKey>` stores the same bytes.
///
/// The contract, for an implementation on a type of your own: the stored
/// form borrows as the key, and the registry hashes and compares only that
/// borrowed key, so it must be the same key (a lookup [`Lookup`] turns into
/// the stored form must borrow back as an equal key).
///
/// ```
/// use failfast::{Breaker, Registry};
///
/// let registry = Registry::<str>::builder(Breaker::builder().consecutive_failures(5)).build()?;
/// let upstream = registry.handle("api.example.com:443");
/// assert_eq!(upstream.key(), Some("api.example.com:443"));
/// # Ok::<(), failfast::ConfigError>(())
/// ```
pub trait Key {
    /// What an entry holds: `K` itself, or [`HostKey`] for `str`.
    type Stored: Borrow<Self>;
}

/// The form a registry keeps a key of type `K` in.
pub(crate) type Stored<K> = <K as Key>::Stored;

/// The key a stored form stands for: what the registry hashes and compares.
#[inline]
pub(crate) fn key_of<K: Key + ?Sized>(stored: &Stored<K>) -> &K {
    stored.borrow()
}

impl<K> Key for K {
    type Stored = K;
}

impl Key for str {
    type Stored = HostKey;
}

/// A borrowed form `Q` of a key `K` that a lookup compares with the stored
/// keys and, when the key is new, turns into the stored form: any `Q` whose
/// `ToOwned` is `K` (`Q = str` for a `String` key, `Q = u64` for a `u64`
/// key), and `str` for a `Registry<str>`.
///
/// Because `str` is a lookup for both `String` and `str` keys, a registry
/// looked up by `&str` names its key type (`Registry::<String>` or
/// `Registry::<str>`): it is not inferred from the lookup.
pub trait Lookup<K: ?Sized + Key> {
    /// The stored form of this key (allocates for a `String`; copies up to 23
    /// bytes inline for `str`).
    fn to_stored(&self) -> K::Stored;
}

impl<K, Q> Lookup<K> for Q
where
    Q: ToOwned<Owned = K> + ?Sized,
{
    fn to_stored(&self) -> K {
        self.to_owned()
    }
}

impl Lookup<str> for str {
    fn to_stored(&self) -> HostKey {
        HostKey::from(self)
    }
}

/// The bytes a key's text occupies, for the registry's key-byte budget
/// ([`RegistryBuilder::max_key_bytes`](super::RegistryBuilder::max_key_bytes)).
///
/// ```
/// use failfast::registry::{HostKey, KeyBytes};
/// assert_eq!("db:5432".to_string().key_bytes(), 7);
/// assert_eq!(HostKey::from("db:5432").key_bytes(), 7);
/// ```
pub trait KeyBytes {
    /// The length of the key's text in bytes (inline or on the heap).
    fn key_bytes(&self) -> usize;
}

impl KeyBytes for String {
    fn key_bytes(&self) -> usize {
        self.len()
    }
}

impl KeyBytes for Box<str> {
    fn key_bytes(&self) -> usize {
        self.len()
    }
}

impl KeyBytes for Vec<u8> {
    fn key_bytes(&self) -> usize {
        self.len()
    }
}

impl KeyBytes for HostKey {
    fn key_bytes(&self) -> usize {
        self.len()
    }
}

#[cfg(feature = "tower")]
impl KeyBytes for http::uri::Authority {
    fn key_bytes(&self) -> usize {
        self.as_str().len()
    }
}

/// What a lookup needs from the caller's key: compare it with a stored key,
/// and turn it into an owned key when the lookup inserts.
pub(crate) trait KeyArg<K> {
    fn matches(&self, key: &K) -> bool;
    fn into_key(self) -> K;
}

/// A borrowed key `Q` of a key type `K` (`&str` for a `String` or a `str`
/// key): turned into `K`'s stored form only by `into_key`.
pub(crate) struct Borrowed<'a, K: ?Sized, Q: ?Sized> {
    key: &'a Q,
    of: PhantomData<fn(&K)>,
}

impl<'a, K: ?Sized, Q: ?Sized> Borrowed<'a, K, Q> {
    pub(crate) fn new(key: &'a Q) -> Self {
        Borrowed {
            key,
            of: PhantomData,
        }
    }
}

impl<K, Q> KeyArg<K::Stored> for Borrowed<'_, K, Q>
where
    K: Key + Borrow<Q> + ?Sized,
    Q: Eq + Lookup<K> + ?Sized,
{
    #[inline]
    fn matches(&self, key: &K::Stored) -> bool {
        key_of::<K>(key).borrow() == self.key
    }

    fn into_key(self) -> K::Stored {
        self.key.to_stored()
    }
}

/// A borrowed key whose owned form is built with `From` (`&str` for a
/// [`HostKey`]): converted only by `into_key`.
pub(crate) struct Converted<'a, Q: ?Sized>(pub(crate) &'a Q);

impl<K, Q> KeyArg<K> for Converted<'_, Q>
where
    K: Borrow<Q> + for<'q> From<&'q Q>,
    Q: Eq + ?Sized,
{
    #[inline]
    fn matches(&self, key: &K) -> bool {
        key.borrow() == self.0
    }

    fn into_key(self) -> K {
        K::from(self.0)
    }
}

/// An owned key: moved into the entry, never cloned.
pub(crate) struct Owned<K>(pub(crate) K);

impl<K: Eq> KeyArg<K> for Owned<K> {
    #[inline]
    fn matches(&self, key: &K) -> bool {
        *key == self.0
    }

    fn into_key(self) -> K {
        self.0
    }
}
