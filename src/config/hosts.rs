//! The `[hosts."…"]` keys: made into the registry's key type, through the
//! keyed layer's normaliser when that type is a host key, and refused when
//! two of them name one key.

use core::any::TypeId;
use core::fmt;
use core::hash::Hash;
use std::collections::HashMap;

use super::Text;
use crate::authority::{normalise, AuthorityError, KeyBuf, MAX_AUTHORITY_LEN};
use crate::error::ConfigError;
use crate::registry::HostKey;

/// What a host key must be, for the error that refuses one.
const HOST_PORT: &str = "host:port — a host name or an IP address and a port in 1..=65535, \
     the port written out (a config has no scheme to imply one)";

/// Whether `K` is a host key type: [`HostKey`], or `http::uri::Authority`
/// (feature `tower`). The keyed layer keys requests by their normal form,
/// so a configuration's keys of these types are normalised too; other
/// types (`u64`, `String`, a type of the user's) keep their text as written.
pub(super) fn is_host_key<K: 'static>() -> bool {
    let key = TypeId::of::<K>();
    if key == TypeId::of::<HostKey>() {
        return true;
    }
    #[cfg(feature = "tower")]
    if key == TypeId::of::<http::uri::Authority>() {
        return true;
    }
    false
}

/// The normal form of the host key `name` (written in `buf`), or a
/// [`ConfigError`] naming it: a text without a port (suggesting one), or
/// with userinfo, or that is not a host name or an IP address.
pub(super) fn normal_form<'b>(name: &str, buf: &'b mut KeyBuf) -> Result<&'b str, ConfigError> {
    let refuse = |why: &str| {
        ConfigError::new("hosts", HOST_PORT, Text(&format!("{name:?} ({why})"))).with_key(&name)
    };
    if name.contains('@') {
        return Err(refuse(
            "not a host name or an IP address: a key has no user@ part",
        ));
    }
    match normalise(name.as_bytes(), None, MAX_AUTHORITY_LEN, buf) {
        Ok(_) => Ok(buf.as_str()),
        Err(AuthorityError::NoPort) => {
            let mut with_port = KeyBuf::new();
            let https = normalise(
                name.as_bytes(),
                Some(443),
                MAX_AUTHORITY_LEN,
                &mut with_port,
            )
            .map(str::to_owned)
            .unwrap_or_else(|_| format!("{name}:443"));
            let http = https.strip_suffix(":443").unwrap_or(&https);
            Err(refuse(&format!(
                "no port: write {https:?} for https, \"{http}:80\" for http"
            )))
        }
        Err(AuthorityError::Malformed) => Err(refuse("not a host name or an IP address")),
        Err(AuthorityError::BadPort) => Err(refuse("the port is not a number in 1..=65535")),
        Err(AuthorityError::Empty) => Err(refuse("empty")),
        Err(AuthorityError::TooLong) => Err(refuse("longer than a host name and a port can be")),
    }
}

/// Refuses two `[hosts."…"]` keys that made one key (two spellings of one
/// host, or `"1"` and `"01"` for a number): an error naming both.
pub(super) fn one_table_per_key<'a, K: Hash + Eq + fmt::Debug + 'a>(
    keys: impl IntoIterator<Item = (&'a K, &'a str)>,
) -> Result<(), ConfigError> {
    let mut seen: HashMap<&K, &str> = HashMap::new();
    for (key, name) in keys {
        if let Some(first) = seen.insert(key, name) {
            let found = format!("{first:?} and {name:?} name one key, {key:?}");
            return Err(
                ConfigError::new("hosts", "one [hosts.\"…\"] table per key", Text(&found))
                    .with_key(key),
            );
        }
    }
    Ok(())
}
