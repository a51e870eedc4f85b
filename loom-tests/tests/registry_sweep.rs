//! The registry's sweep against a lookup that reads a *later* clock than the
//! sweep: an entry is never evicted while a handle to it is alive.
//!
//! The sweep (the shard's writer, under its writer lock) picks its victims
//! while lock-free lookups go on. Its idle test compares the entry's
//! last-seen tick with the sweep's own `now`; a lookup that ran in between
//! stamped a tick *after* that `now`, so the wrapping idle arithmetic makes
//! the entry look idle for about 2³² ticks. Only the reference count, read
//! in the handshake after the entry is marked leaving
//! (`Entry::begin_leaving` against the reader's `Entry::claim`), tells the
//! sweep that a handle was taken meanwhile.
#![cfg(failfast_loom)]

use std::time::Duration;

use failfast::{Breaker, Handle, ManualClock, Nanos, Registry};
use failfast_loom_tests::{both_orders, go_second, secs};
use loom::sync::Arc;
use loom::thread;

/// One idle tick of the registry (2²⁴ ns, about 16.8 ms).
const TICK: Duration = Duration::from_nanos(1 << 24);

type Reg = Registry<u64, std::collections::hash_map::RandomState, ManualClock>;

fn registry() -> Arc<Reg> {
    let r = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1))
        .shards(1)
        .idle_ttl(Duration::from_secs(1))
        .build_with_clock(ManualClock::new())
        .expect("valid registry");
    Arc::new(r)
}

/// Key 7 was last used at 0 s and has no handle: at 5 s it is idle past the
/// 1 s TTL and pristine, so the sweep at 5 s may evict it. A lookup at
/// 5 s + one tick races the sweep. Whatever the order, the handle it returns
/// is the breaker the registry tracks afterwards: if the sweep evicted the old
/// entry first, the lookup created a new one.
#[test]
fn sweep_never_evicts_under_a_later_lookup() {
    both_orders(|spawned_first| {
        let r = registry();
        drop(r.handle_at(&7, Nanos::ZERO));
        let sweep_at = secs(5);
        let lookup_at = sweep_at + TICK;
        let sweeper = {
            let r = r.clone();
            thread::spawn(move || r.sweep_at(1, sweep_at))
        };
        go_second(spawned_first);
        let held = r.handle_at(&7, lookup_at);
        let evicted = sweeper.join().unwrap();

        assert!(evicted <= 1);
        assert!(held.is_tracked());
        assert_eq!(r.len(), 1, "the held key is tracked (evicted: {evicted})");
        let again = r.handle_at(&7, lookup_at);
        assert!(
            Handle::ptr_eq(&held, &again),
            "the entry was evicted while a handle to it was alive"
        );
        assert_eq!(r.len(), 1);
    });
}
