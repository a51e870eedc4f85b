//! The key space: which Redis keys and channel hold an upstream's trip.

use core::fmt;

/// Names the keys of the shared state: `shards` groups, each one hash tag
/// (`{prefix:n}`), so every key a script touches lives in one Redis Cluster
/// slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Keyspace {
    prefix: String,
    shards: u16,
}

/// One shard's names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Shard {
    tag: String,
}

impl Keyspace {
    pub(crate) fn new(prefix: &str, shards: u16) -> Keyspace {
        Keyspace {
            prefix: prefix.to_owned(),
            shards: shards.max(1),
        }
    }

    /// Every shard, in order.
    pub(crate) fn shards(&self) -> impl Iterator<Item = Shard> + '_ {
        (0..self.shards).map(|n| self.shard_at(n))
    }

    /// How many shards.
    pub(crate) fn len(&self) -> u16 {
        self.shards
    }

    /// Shard `n` (in `0..len()`).
    pub(crate) fn shard_at(&self, n: u16) -> Shard {
        Shard {
            tag: format!("{{{}:{}}}", self.prefix, n),
        }
    }

    /// The shard of `key`: see [`index_of`](Self::index_of).
    pub(crate) fn shard_of(&self, key: &str) -> Shard {
        self.shard_at(self.index_of(key))
    }

    /// The number of `key`'s shard: FNV-1a of its bytes (the same in every
    /// process and version, unlike std's hashers), modulo the shards.
    pub(crate) fn index_of(&self, key: &str) -> u16 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in key.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        (h % u64::from(self.shards)) as u16
    }

    /// The number of the shard whose channel is `channel`, if it is one of
    /// ours.
    pub(crate) fn index_of_channel(&self, channel: &str) -> Option<u16> {
        let rest = channel
            .strip_prefix('{')?
            .strip_prefix(self.prefix.as_str())?;
        let n: u16 = rest
            .strip_prefix(':')?
            .strip_suffix("}:trips")?
            .parse()
            .ok()?;
        (n < self.shards).then_some(n)
    }
}

impl Shard {
    /// The hash holding `key`'s record: `{epoch, until, reporters, reason, origin}`.
    pub(crate) fn trip(&self, key: &str) -> String {
        format!("{}:trip:{key}", self.tag)
    }

    /// The prefix of the records' keys (the reconciliation script appends the key).
    pub(crate) fn trip_prefix(&self) -> String {
        format!("{}:trip:", self.tag)
    }

    /// The sorted set of `key`'s reporters, scored by when they reported.
    pub(crate) fn reporters(&self, key: &str) -> String {
        format!("{}:rep:{key}", self.tag)
    }

    /// The sorted set of the shard's open keys, scored by their period's end.
    pub(crate) fn index(&self) -> String {
        format!("{}:open", self.tag)
    }

    /// The sharded pub/sub channel of the shard's news.
    pub(crate) fn channel(&self) -> String {
        format!("{}:trips", self.tag)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_share_the_shard_tag() {
        let ks = Keyspace::new("failfast", 16);
        let s = ks.shard_of("db.example:5432");
        assert_eq!(s, ks.shard_of("db.example:5432"));
        for name in [
            s.trip("db.example:5432"),
            s.reporters("db.example:5432"),
            s.index(),
            s.channel(),
        ] {
            assert!(name.starts_with(&s.tag), "{name}");
        }
        assert_eq!(s.trip("k"), format!("{}k", s.trip_prefix()));
        let n = ks.index_of("db.example:5432");
        assert_eq!(ks.shard_at(n), s);
        assert_eq!(ks.index_of_channel(&s.channel()), Some(n));
        assert_eq!(ks.index_of_channel("{failfast:16}:trips"), None);
        assert_eq!(ks.index_of_channel("{other:1}:trips"), None);
        assert_eq!(ks.index_of_channel("{failfast:1}:open"), None);
    }

    #[test]
    fn fnv_is_stable_and_spreads() {
        let ks = Keyspace::new("p", 16);
        // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c: shard 0xc = 12.
        assert_eq!(ks.shard_of("a").to_string(), "{p:12}");
        let mut seen = std::collections::HashSet::new();
        for i in 0..1000 {
            seen.insert(ks.shard_of(&format!("h{i}.example:443")).to_string());
        }
        assert_eq!(seen.len(), 16);
        assert_eq!(ks.shards().count(), 16);
    }
}
