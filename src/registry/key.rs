//! A key as a caller passed it: borrowed (cloned only on a miss) or owned.

use core::borrow::Borrow;

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
