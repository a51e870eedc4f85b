//! [`HostKey`]: a compact string key that keeps short text inside the
//! registry entry itself.

use core::borrow::Borrow;
use core::cmp::Ordering;
use core::fmt;
use core::hash::{Hash, Hasher};
use core::ops::Deref;

/// Bytes a [`HostKey`] keeps inline.
const INLINE: usize = 23;

/// The length of inline text: a byte with 24 valid values, so the enum
/// around it can keep its discriminant in the other 232 (the key stays 24
/// bytes, no larger than a `String` header).
#[derive(Copy, Clone, PartialEq, Eq)]
#[repr(u8)]
#[rustfmt::skip]
enum Len {
    L0, L1, L2, L3, L4, L5, L6, L7, L8, L9, L10, L11,
    L12, L13, L14, L15, L16, L17, L18, L19, L20, L21, L22, L23,
}

impl Len {
    #[rustfmt::skip]
    const ALL: [Len; INLINE + 1] = [
        Len::L0, Len::L1, Len::L2, Len::L3, Len::L4, Len::L5, Len::L6, Len::L7, Len::L8,
        Len::L9, Len::L10, Len::L11, Len::L12, Len::L13, Len::L14, Len::L15, Len::L16,
        Len::L17, Len::L18, Len::L19, Len::L20, Len::L21, Len::L22, Len::L23,
    ];
}

#[derive(Clone)]
enum Repr {
    Inline { bytes: [u8; INLINE], len: Len },
    Heap(Box<str>),
}

/// The key type for host names: a [`Registry<HostKey>`](crate::Registry)
/// is what the keyed tower layer, configuration files and the examples use,
/// and what a program that keeps one breaker per upstream should use.
///
/// Up to 23 bytes are stored inline — in the registry's entry, no
/// allocation of their own — and longer text in one boxed `str`. 24 bytes,
/// like a `String` header.
///
/// It borrows as `str`, hashes like one and compares with one byte for
/// byte (no UTF-8 check), so a registry of `HostKey`s is looked up by
/// `&str` with [`Registry::handle_from`](crate::Registry::handle_from),
/// which converts the text only when the key is new. It is what the keyed
/// layer's `AuthorityKey` produces for a normalised `host:port`, and what
/// `RegistryConfig::to_builder` normalises a configuration's keys for
/// (feature `serde`).
///
/// ```
/// use failfast::registry::HostKey;
/// use failfast::{Breaker, Registry};
///
/// let registry = Registry::<HostKey>::builder(Breaker::builder().consecutive_failures(5)).build()?;
/// let upstream = registry.handle_from("api.example.com:443");
/// assert_eq!(upstream.key().unwrap(), "api.example.com:443");
///
/// let key = HostKey::from("api.example.com:443");
/// assert_eq!(key.as_str(), "api.example.com:443");
/// assert!(key.is_inline());
/// assert!(!HostKey::from("a-much-longer-host.example.com:443").is_inline());
/// assert_eq!(std::mem::size_of::<HostKey>(), 24);
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct HostKey(Repr);

// The niche the layout relies on: one word less would cost every entry.
const _: () = assert!(core::mem::size_of::<HostKey>() == 24);

impl HostKey {
    /// The key's text.
    ///
    /// ```
    /// # use failfast::registry::HostKey;
    /// assert_eq!(HostKey::from("db:5432").as_str(), "db:5432");
    /// ```
    pub fn as_str(&self) -> &str {
        match &self.0 {
            // Inline text was copied from a `&str` at a char boundary: valid.
            Repr::Inline { bytes, len } => {
                core::str::from_utf8(&bytes[..*len as usize]).unwrap_or_default()
            }
            Repr::Heap(text) => text,
        }
    }

    /// The text's bytes, read without the UTF-8 check [`as_str`](Self::as_str)
    /// makes: what a lookup compares.
    ///
    /// ```
    /// # use failfast::registry::HostKey;
    /// assert_eq!(HostKey::from("db:5432").as_bytes(), b"db:5432");
    /// ```
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { bytes, len } => &bytes[..*len as usize],
            Repr::Heap(text) => text.as_bytes(),
        }
    }

    /// The text's length in bytes.
    ///
    /// ```
    /// # use failfast::registry::HostKey;
    /// assert_eq!(HostKey::from("db:5432").len(), 7);
    /// ```
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Inline { len, .. } => *len as usize,
            Repr::Heap(text) => text.len(),
        }
    }

    /// Whether the text is empty.
    ///
    /// ```
    /// # use failfast::registry::HostKey;
    /// assert!(HostKey::from("").is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the text is stored inline (23 bytes or fewer).
    ///
    /// ```
    /// # use failfast::registry::HostKey;
    /// assert!(HostKey::from("x.example:80").is_inline());
    /// ```
    pub fn is_inline(&self) -> bool {
        matches!(self.0, Repr::Inline { .. })
    }
}

impl From<&str> for HostKey {
    fn from(text: &str) -> HostKey {
        match Len::ALL.get(text.len()) {
            Some(&len) => {
                let mut bytes = [0; INLINE];
                bytes[..text.len()].copy_from_slice(text.as_bytes());
                HostKey(Repr::Inline { bytes, len })
            }
            None => HostKey(Repr::Heap(text.into())),
        }
    }
}

impl From<String> for HostKey {
    fn from(text: String) -> HostKey {
        if text.len() <= INLINE {
            HostKey::from(text.as_str())
        } else {
            HostKey(Repr::Heap(text.into_boxed_str()))
        }
    }
}

impl Borrow<str> for HostKey {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for HostKey {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

/// A `HostKey` reads as its text: `key.starts_with("api.")`, `&*key`.
impl Deref for HostKey {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

/// Hashes exactly like the `str` it borrows as (the registry's contract:
/// a lookup by `&str` hashes the text itself).
impl Hash for HostKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

/// Compares bytes, as `str`'s `==` does, without the UTF-8 check of
/// [`as_str`](HostKey::as_str): equal exactly when the texts are.
impl PartialEq for HostKey {
    fn eq(&self, other: &HostKey) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for HostKey {}

/// Compares bytes (see `PartialEq for HostKey`): what a registry lookup by
/// `&str` runs on the stored key.
///
/// ```
/// # use failfast::registry::HostKey;
/// let key = HostKey::from("db:5432");
/// assert!(key == *"db:5432" && key == "db:5432" && "db:5432" == key);
/// assert!(key != "db:5433" && key == String::from("db:5432"));
/// ```
impl PartialEq<str> for HostKey {
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<&str> for HostKey {
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<String> for HostKey {
    fn eq(&self, other: &String) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<HostKey> for str {
    fn eq(&self, other: &HostKey) -> bool {
        other == self
    }
}

impl PartialEq<HostKey> for &str {
    fn eq(&self, other: &HostKey) -> bool {
        other == self
    }
}

impl PartialEq<HostKey> for String {
    fn eq(&self, other: &HostKey) -> bool {
        other == self
    }
}

impl PartialOrd for HostKey {
    fn partial_cmp(&self, other: &HostKey) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The texts' order (`str`'s order is its bytes').
impl Ord for HostKey {
    fn cmp(&self, other: &HostKey) -> Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl fmt::Display for HostKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for HostKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::hash_map::RandomState;
    use std::hash::BuildHasher;

    #[test]
    fn inline_up_to_23_bytes_then_boxed_and_equal_either_way() {
        for n in 0..40 {
            let text: String = "abcdefghijklmnopqrstuvwxyz0123456789abcd"[..n].to_owned();
            let key = HostKey::from(text.as_str());
            assert_eq!(key.is_inline(), n <= 23, "{n}");
            assert_eq!(key.as_str(), text);
            assert_eq!(key.len(), n);
            assert_eq!(HostKey::from(text.clone()), key);
            assert_eq!(key.as_bytes(), text.as_bytes());
            assert!(key == *text.as_str() && key == text && *text.as_str() == key);
            let s = RandomState::new();
            assert_eq!(s.hash_one(&key), s.hash_one(text.as_str()));
        }
    }

    /// Byte comparison agrees with `str`'s `==` and order, inline or boxed,
    /// on keys that differ in their last byte, their length or their case.
    #[test]
    fn bytes_compare_as_str_does() {
        let long = "a-much-longer-host.example.com:443";
        let texts = [
            "",
            "a",
            "b",
            "ab",
            "db:5432",
            "db:5433",
            "DB:5432",
            long,
            &long[..33],
        ];
        for a in texts {
            for b in texts {
                let (ka, kb) = (HostKey::from(a), HostKey::from(b));
                assert_eq!(ka == kb, a == b, "{a:?} == {b:?}");
                assert_eq!(ka == *b, a == b, "{a:?} == str {b:?}");
                assert_eq!(ka.cmp(&kb), a.cmp(b), "{a:?} cmp {b:?}");
            }
        }
    }
}
