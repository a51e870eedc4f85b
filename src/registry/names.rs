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

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::super::Registry;
    use crate::breaker::Breaker;
    use crate::hooks::{REMOVED_NAME, SHARED_NAME};
    use crate::observe::Transition;

    /// What a hook heard: the names, in order.
    fn listening(registry: &Registry<u64>) -> Arc<Mutex<Vec<String>>> {
        let heard = Arc::new(Mutex::new(Vec::new()));
        let log = heard.clone();
        registry.on_transition(move |name: &str, _: &Transition| {
            log.lock().unwrap().push(name.to_owned())
        });
        heard
    }

    #[test]
    fn a_tracked_breaker_by_its_key_a_shared_one_as_shared_a_removed_one_as_removed() {
        let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1))
            .shards(1)
            .capacity(1)
            .build()
            .unwrap();
        let heard = listening(&registry);
        let tracked = registry.handle(&7);
        let _ = tracked.try_acquire().unwrap().failure(); // 7 trips: open, so it stays
        let _ = registry.handle(&8).try_acquire().unwrap().failure(); // full: the overflow breaker
        assert!(registry.remove(&7));
        let _ = tracked.force_open(); // the holder's breaker, after it left the map
        assert_eq!(*heard.lock().unwrap(), ["7", SHARED_NAME, REMOVED_NAME]);
    }

    #[test]
    fn a_standalone_breakers_hook_hears_the_name_it_was_given() {
        let breaker = Breaker::builder().consecutive_failures(1).build().unwrap();
        let heard = Arc::new(Mutex::new(Vec::new()));
        let log = heard.clone();
        breaker.on_transition("payments", move |name: &str, t: &Transition| {
            log.lock().unwrap().push(format!("{name} {:?}", t.to))
        });
        let _ = breaker.force_open();
        assert_eq!(*heard.lock().unwrap(), ["payments ForcedOpen"]);
    }
}
