//! How a registry names the breaker behind a transition for its hooks: by
//! the breaker's key, found from the breaker itself.
//!
//! A key's breaker is stored under its id's table hash, so the breaker that
//! reports a transition leads back to its shard and its map slot: one
//! lock-free lookup per transition, nothing per call and nothing per entry
//! (no back pointer). A breaker many keys share is [`SHARED_NAME`]; one the
//! map no longer holds (removed, or the registry dropped) is
//! [`REMOVED_NAME`].

use core::fmt::{self, Write};
use std::sync::Weak;

use crossbeam_utils::CachePadded;

use super::hash::table_hash;
use super::shard::{shard_index, Shard};
use crate::breaker::Breaker;
use crate::clock::Clock;
use crate::hooks::{NameBuf, Namer, REMOVED_NAME, SHARED_NAME};

/// Names a registry's breakers by their keys.
pub(crate) struct KeyNames<K, C: Clock> {
    /// The registry's shards: weak, so the names do not keep a dropped
    /// registry's maps alive (its breakers may outlive it in handles).
    pub(crate) shards: Weak<[CachePadded<Shard<K, C>>]>,
    /// The address of the configuration the shared breakers (overflow,
    /// unkeyed) are built from.
    pub(crate) shared: usize,
}

impl<K, C> Namer<Breaker<C>> for KeyNames<K, C>
where
    K: fmt::Display + Send + Sync + 'static,
    C: Clock,
{
    fn name(&self, breaker: &Breaker<C>, out: &mut NameBuf) {
        if breaker.shared_address() == self.shared {
            let _ = out.write_str(SHARED_NAME);
            return;
        }
        let found = self.shards.upgrade().and_then(|shards| {
            let hash = table_hash(breaker.id());
            let shard = &shards[shard_index(hash, shards.len())];
            shard.find_breaker(hash, breaker, |e| write!(out, "{}", &**e))
        });
        if found.is_none() {
            let _ = out.write_str(REMOVED_NAME);
        }
    }
}
