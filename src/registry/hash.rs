//! How keys are hashed: once, into the 64 bits a shard's table stores an
//! entry under, which also carry the entry's breaker id.

use core::hash::{BuildHasher, Hash};

/// The hash a key is stored under: the hasher's 64 bits folded to the
/// breaker's 32-bit id (its jitter seed, so two hosts' open periods differ),
/// then spread back over 64 bits. The id is the hash's high half, so the
/// table rehashes an entry from its breaker alone and never hashes a key
/// twice; the low half is a multiplicative mix of it for the map's bucket
/// bits. A keyed hasher's output is unpredictable, and so is any half of it.
pub(crate) fn key_hash<S: BuildHasher, Q: Hash + ?Sized>(hasher: &S, key: &Q) -> u64 {
    table_hash(fold_hash(hasher.hash_one(key)))
}

/// 64 hash bits folded to 32.
pub(crate) fn fold_hash(h: u64) -> u32 {
    (h ^ (h >> 32)) as u32
}

/// The table hash of a breaker id (see [`key_hash`]).
pub(crate) fn table_hash(id: u32) -> u64 {
    (u64::from(id) << 32) | u64::from(id.wrapping_mul(0x9E37_79B9))
}

/// The breaker id a table hash carries.
pub(crate) fn id_of(hash: u64) -> u32 {
    (hash >> 32) as u32
}
