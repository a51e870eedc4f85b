//! Reads take no lock: with every writer of a shard paused inside the write
//! path (its writer lock held), a reader of that shard still completes its
//! lookups, handles and calls. A read that took the writer lock, or waited
//! for writers, would never finish here.
//!
//! The reader runs on its own thread and reports when done; the test waits
//! for that report with a generous bound (a failure, not a sleep: a passing
//! run returns as soon as the reader does).

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use super::Registry;
use crate::breaker::Breaker;

/// How long a reader may take before the test calls it blocked.
const BLOCKED: Duration = Duration::from_secs(10);

#[test]
fn a_reader_completes_while_its_shards_writers_are_paused() {
    let registry = Arc::new(
        Registry::<u64>::builder(Breaker::builder().consecutive_failures(5))
            .shards(1)
            .build()
            .unwrap(),
    );
    for key in 0..1_000u64 {
        let _ = registry.handle(&key);
    }
    let paused = registry.shards[0].pause_writers();

    // A reader: lookups, handles and calls on known keys, all in the paused shard.
    let (done, report) = mpsc::channel();
    let reader = registry.clone();
    std::thread::spawn(move || {
        let mut admitted = 0u32;
        for round in 0..20u64 {
            for key in 0..1_000u64 {
                reader.with(&key, |b| assert!(b.try_acquire().is_ok()));
                let upstream = reader.handle(&((key + round) % 1_000));
                let settled = upstream.try_acquire().map(|permit| permit.success());
                admitted += u32::from(matches!(settled, Ok(None)));
            }
        }
        done.send(admitted).unwrap();
    });
    let admitted = report
        .recv_timeout(BLOCKED)
        .expect("the reader finished while every writer of its shard was paused");
    assert_eq!(admitted, 20_000, "every call admitted and settled");

    // A writer of the same shard (a new key) goes on once the pause ends.
    let (inserted, insert_report) = mpsc::channel();
    let writer = registry.clone();
    std::thread::spawn(move || {
        let _ = writer.handle(&1_000_000);
        inserted.send(()).unwrap();
    });
    drop(paused);
    insert_report
        .recv_timeout(BLOCKED)
        .expect("the insert finished once the writers went on");
    assert_eq!(registry.len(), 1_001);
}

/// A writer that found an entry stale, then lost the handshake to a reader
/// that cloned it meanwhile, keeps it: the entry stays in the map, and the
/// key's later lookups find it with no lock, as before (not through the
/// insert path, which waits for the writer lock). The race is staged by
/// hand: the eviction runs with a reader's clone alive, as if the clone came
/// after the sweep's scan.
#[test]
fn an_entry_kept_for_a_reader_is_found_with_no_lock_again() {
    let registry = Arc::new(
        Registry::<u64>::builder(Breaker::builder().consecutive_failures(5))
            .shards(1)
            .build()
            .unwrap(),
    );
    let reader = registry.handle(&7);
    let shard = &registry.shards[0];
    let victim = shard.entries().pop().unwrap();
    let evicted = shard.evict_now(&victim, registry.now(), &registry.fleet, &registry.budget);
    assert!(!evicted, "a reader holds it: the writer keeps it");
    drop((victim, reader));
    assert_eq!(registry.len(), 1);

    let paused = shard.pause_writers();
    let (done, report) = mpsc::channel();
    let lookup = registry.clone();
    std::thread::spawn(move || {
        let handle = lookup.handle(&7);
        done.send(handle.try_acquire().is_ok()).unwrap();
    });
    let admitted = report
        .recv_timeout(BLOCKED)
        .expect("the kept entry was found while the shard's writers were paused");
    assert!(admitted);
    drop(paused);
    assert_eq!(registry.len(), 1, "no second entry for the key");
}
