//! What a key must be, how an entry keeps it, and a key as a caller passed
//! it: borrowed (converted to the kept form only on a miss) or owned.

use core::borrow::Borrow;
use core::marker::PhantomData;

use super::host::HostKey;

/// How a [`Registry<K>`](crate::Registry) keeps a key of type `K` in its
/// entries: the form it stores, which borrows as `K`.
///
/// Every sized type is kept as itself, so a `Registry<u64>`, a
/// `Registry<HostKey>` or a `Registry<MyKey>` needs nothing from this
/// trait. `str` is kept as a [`HostKey`]: a `Registry<str>` is the same
/// registry as a `Registry<HostKey>` (the same entries, text up to 23 bytes
/// inside the entry's own allocation), with `&str` where a
/// `Registry<HostKey>` has `HostKey`: in
/// [`insert_with`](crate::Registry::insert_with),
/// [`override_key`](super::RegistryBuilder::override_key),
/// [`Handle::key`](crate::Handle::key), [`retain`](crate::Registry::retain)
/// and [`for_each_snapshot`](crate::Registry::for_each_snapshot). Prefer
/// `Registry<HostKey>` for host names: it is the type the keyed tower
/// layer, configuration files and replicas build, and the only one a
/// configuration normalises (`RegistryConfig::to_builder`, feature
/// `serde`). A `Registry<String>` allocates a heap buffer per key beside
/// the entry (173 against 141 bytes per host at a million hosts,
/// `benches/README.md`).
///
/// The contract, for an implementation on a type of your own: the stored
/// form borrows as the key, and the registry hashes the key a caller passed
/// and compares it with the stored forms through [`Lookup`], so a lookup
/// must hash like the stored key's borrowed form and match exactly the
/// stored keys equal to it.
///
/// ```
/// use failfast::registry::HostKey;
/// use failfast::{Breaker, Registry};
///
/// let hosts = Registry::<HostKey>::builder(Breaker::builder().consecutive_failures(5)).build()?;
/// assert_eq!(hosts.handle_from("api.example.com:443").key().unwrap(), "api.example.com:443");
/// // The same entries, with `&str` in and out.
/// let text = Registry::<str>::builder(Breaker::builder().consecutive_failures(5)).build()?;
/// assert_eq!(text.handle("api.example.com:443").key(), Some("api.example.com:443"));
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
/// keys and, when the key is new, turns into the stored form: any sized `Q`
/// whose `ToOwned` is `K` (`Q = u64` for a `u64` key), and `str` for a
/// `String`, `str`, [`HostKey`] or `Box<str>` key (std's other borrowed
/// forms too: `[T]` for `Vec<T>`, `Path`, `OsStr`, `CStr`).
///
/// ```
/// use failfast::registry::HostKey;
/// use failfast::{Breaker, Handle, Registry};
///
/// let hosts = Registry::<HostKey>::builder(Breaker::builder().consecutive_failures(5)).build()?;
/// let upstream = hosts.handle("api.example.com:443");
/// assert!(Handle::ptr_eq(&upstream, &hosts.handle_from("api.example.com:443")));
/// # Ok::<(), failfast::ConfigError>(())
/// ```
///
/// A key type of your own made from `&str` is looked up with
/// [`handle_from`](crate::Registry::handle_from); `handle` with a `&str`
/// does not compile for it, and the error names `handle_from`:
///
/// ```compile_fail
/// use failfast::{Breaker, Registry};
///
/// #[derive(Clone, PartialEq, Eq, Hash)]
/// struct Host(String);
/// impl From<&str> for Host {
///     fn from(text: &str) -> Host { Host(text.to_owned()) }
/// }
/// impl std::borrow::Borrow<str> for Host {
///     fn borrow(&self) -> &str { &self.0 }
/// }
///
/// let hosts = Registry::<Host>::builder(Breaker::builder().consecutive_failures(5)).build()?;
/// // error[E0277]: a `Registry<Host>` is not looked up by `&str` with `handle`, …
/// //   = note: a key type made from `&str` with `From` … is looked up with
/// //           `registry.handle_from(key)`; `handle` takes a `&Host`
/// let upstream = hosts.handle("api.example.com:443");
/// # Ok::<(), failfast::ConfigError>(())
/// ```
///
/// Because `str` is a lookup for several key types, a registry looked up
/// by `&str` names its key type (`Registry::<HostKey>`,
/// `Registry::<String>`…): it is not inferred from the lookup.
#[diagnostic::on_unimplemented(
    message = "a `Registry<{K}>` is not looked up by `&{Self}` with `handle`, `with` or `apply_remote`",
    label = "`&{Self}` is not a borrowed form of `{K}`",
    note = "a key type made from `&{Self}` with `From` is looked up with `registry.handle_from(key)`; `handle` takes a `&{K}`"
)]
pub trait Lookup<K: ?Sized + Key> {
    /// Whether `stored` is this key. The registry asks only about a stored
    /// key whose hash equals this key's.
    fn matches(&self, stored: &K::Stored) -> bool;

    /// The stored form of this key (allocates for a `String`; copies up to 23
    /// bytes inline for `str`).
    fn to_stored(&self) -> K::Stored;
}

// `do_not_recommend`: a failed lookup (`&str` for a `String`-less key type)
// reports the trait's own message instead of a type mismatch of
// `<str as ToOwned>::Owned` (E0271).
/// Every sized `Q` whose `ToOwned` is `K`: `u64` for a `u64` key, a key
/// type of your own for itself. (Unsized borrowed forms — `str`, `[T]`,
/// `Path`… — have their own impls below, so that `str` can look up
/// `String`, `str`, `HostKey` and `Box<str>` registries.)
#[diagnostic::do_not_recommend]
impl<K, Q> Lookup<K> for Q
where
    K: Borrow<Q>,
    Q: ToOwned<Owned = K> + Eq,
{
    #[inline]
    fn matches(&self, stored: &K) -> bool {
        stored.borrow() == self
    }

    fn to_stored(&self) -> K {
        self.to_owned()
    }
}

/// The borrowed forms of std's owned types (`String` by `&str`, `Vec<T>` by
/// `&[T]`, `PathBuf` by `&Path`…): compared as the borrowed type compares,
/// converted with `ToOwned` only when the key is new.
macro_rules! lookup_by_to_owned {
    ($(impl$([$($g:tt)*])? Lookup<$owned:ty> for $borrowed:ty;)*) => {$(
        impl$(<$($g)*>)? Lookup<$owned> for $borrowed {
            #[inline]
            fn matches(&self, stored: &$owned) -> bool {
                Borrow::<$borrowed>::borrow(stored) == self
            }

            fn to_stored(&self) -> $owned {
                self.to_owned()
            }
        }
    )*};
}

lookup_by_to_owned! {
    impl Lookup<String> for str;
    impl[T: Clone + Eq] Lookup<Vec<T>> for [T];
    impl Lookup<std::path::PathBuf> for std::path::Path;
    impl Lookup<std::ffi::OsString> for std::ffi::OsStr;
    impl Lookup<std::ffi::CString> for std::ffi::CStr;
}

/// A `Registry<HostKey>` is looked up by `&str`
/// (`registry.handle("db:5432")`): compared by bytes, with no UTF-8 check
/// of the stored key, and made a `HostKey` only when the key is new.
impl Lookup<HostKey> for str {
    #[inline]
    fn matches(&self, stored: &HostKey) -> bool {
        stored == self
    }

    fn to_stored(&self) -> HostKey {
        HostKey::from(self)
    }
}

/// A `Registry<Box<str>>` is looked up by `&str` too.
impl Lookup<Box<str>> for str {
    #[inline]
    fn matches(&self, stored: &Box<str>) -> bool {
        **stored == *self
    }

    fn to_stored(&self) -> Box<str> {
        self.into()
    }
}

/// A `Registry<str>` keeps [`HostKey`]s: compared by their bytes, with no
/// UTF-8 check of the stored key.
impl Lookup<str> for str {
    #[inline]
    fn matches(&self, stored: &HostKey) -> bool {
        stored == self
    }

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

/// A borrowed key `Q` of a key type `K` (`&str` for a `HostKey`, a `String`
/// or a `str` key): compared through [`Lookup`], turned into `K`'s stored
/// form only by `into_key`.
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
    K: Key + ?Sized,
    Q: Lookup<K> + ?Sized,
{
    /// [`Lookup::matches`]: for text keys, a comparison of bytes.
    #[inline]
    fn matches(&self, key: &K::Stored) -> bool {
        self.key.matches(key)
    }

    fn into_key(self) -> K::Stored {
        self.key.to_stored()
    }
}

/// A borrowed key whose owned form is built with `From` (`&str` for a key
/// type of the user's, or a [`HostKey`] through `handle_from` and the keyed
/// layer): compared through `Borrow` (for a `HostKey`, its checked
/// `as_str`), converted only by `into_key`.
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

/// A borrowed key whose `ToOwned` is `K`, whatever `Q` is (the keyed
/// layer's `KeySink::borrowed`): compared through `Borrow`, cloned only by
/// `into_key`.
#[cfg(feature = "tower")]
pub(crate) struct Cloned<'a, Q: ?Sized>(pub(crate) &'a Q);

#[cfg(feature = "tower")]
impl<K, Q> KeyArg<K> for Cloned<'_, Q>
where
    K: Borrow<Q>,
    Q: ToOwned<Owned = K> + Eq + ?Sized,
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
