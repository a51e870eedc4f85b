//! What a key must be, and a key as a caller passed it: borrowed (converted
//! to an owned key only on a miss) or owned.

use core::borrow::Borrow;

use super::host::HostKey;

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

/// A borrowed key (`&str` for a `String` key): cloned only by `into_key`.
pub(crate) struct Borrowed<'a, Q: ?Sized>(pub(crate) &'a Q);

impl<K, Q> KeyArg<K> for Borrowed<'_, Q>
where
    K: Borrow<Q>,
    Q: Eq + ToOwned<Owned = K> + ?Sized,
{
    #[inline]
    fn matches(&self, key: &K) -> bool {
        key.borrow() == self.0
    }

    fn into_key(self) -> K {
        self.0.to_owned()
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
