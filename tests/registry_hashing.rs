//! The registry's use of the key's hash, with hashers that pick it: keys
//! whose hashes collide still get a breaker each, the hash's top bits choose
//! the shard, and a lookup that finds its key never takes the insert path.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use failfast::{Breaker, Handle, ManualClock, Nanos, Registry, State};

/// Hashes a `u64` key to `key >> shift`: with `shift = 0` the hash is the key
/// itself, with `shift = 4` keys 16..=31 all hash to 1.
#[derive(Clone, Copy, Default)]
struct ShiftHash {
    shift: u32,
}

struct ShiftHasher {
    shift: u32,
    value: u64,
}

impl Hasher for ShiftHasher {
    fn finish(&self) -> u64 {
        self.value >> self.shift
    }
    /// Other values (the registry hashes a few of its own, such as the
    /// names of its shared breakers) fold their bytes in.
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.value = self.value.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.value = v;
    }
}

impl BuildHasher for ShiftHash {
    type Hasher = ShiftHasher;
    fn build_hasher(&self) -> ShiftHasher {
        ShiftHasher {
            shift: self.shift,
            value: 0,
        }
    }
}

type Reg = Registry<u64, ShiftHash, ManualClock>;

fn registry(shift: u32, shards: usize) -> Reg {
    Registry::<u64>::builder(
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_secs(10)),
    )
    .hasher(ShiftHash { shift })
    .shards(shards)
    .idle_ttl(Duration::from_secs(60))
    .build_with_clock(ManualClock::new())
    .unwrap()
}

fn fail(h: &Handle<u64, ManualClock>) {
    h.try_acquire_at(Nanos::ZERO)
        .unwrap()
        .failure_at(Nanos::ZERO);
}

#[test]
fn colliding_keys_get_a_breaker_each() {
    let r = registry(4, 1);
    let a = r.handle_at(&16, Nanos::ZERO);
    // 17 hashes like 16: the insert must compare keys, not only hashes.
    let b = r.get_or_insert_at(17, Nanos::ZERO);
    assert!(!Handle::ptr_eq(&a, &b));
    assert_eq!((a.key(), b.key()), (Some(&16), Some(&17)));
    assert_eq!(r.len(), 2);
    fail(&a);
    // Lookups must compare keys too, by reference and by value.
    assert_eq!(r.handle_at(&17, Nanos::ZERO).state(), State::Closed);
    assert_eq!(r.get_or_insert_at(17, Nanos::ZERO).state(), State::Closed);
    assert_eq!(r.with_at(&17, Nanos::ZERO, |b| b.state()), State::Closed);
    assert_eq!(r.handle_at(&16, Nanos::ZERO).state(), State::Open);
    assert!(Handle::ptr_eq(&b, &r.handle_at(&17, Nanos::ZERO)));
    // Removal compares keys as well: with 16..=19 all hashing alike, taking
    // out each one, in either order, leaves exactly the others.
    for order in [[16u64, 17, 18, 19], [19, 18, 17, 16]] {
        let r = registry(4, 1);
        let held: Vec<_> = (16..=19u64).map(|k| r.handle_at(&k, Nanos::ZERO)).collect();
        for (i, k) in order.iter().enumerate() {
            assert!(r.remove(k), "{k} was there");
            for (h, other) in held.iter().zip(16..=19u64) {
                let gone = order[..=i].contains(&other);
                assert_eq!(
                    r.snapshots().any(|(key, _)| key == other),
                    !gone,
                    "after removing {:?}: {other}",
                    &order[..=i]
                );
                assert_eq!(h.key(), Some(&other));
            }
        }
        assert!(r.is_empty());
    }
}

#[test]
fn handles_of_different_keys_are_not_ptr_eq() {
    let r = registry(0, 1);
    let (a, b) = (r.handle_at(&1, Nanos::ZERO), r.handle_at(&2, Nanos::ZERO));
    assert!(!Handle::ptr_eq(&a, &b));
    assert!(Handle::ptr_eq(&a, &a.clone()));
}

/// With two shards, the hash picks the shard: one sweep step covers one
/// shard and leaves the other's idle keys alone. (Keys spread over all 64
/// hash bits, so any choice of bits splits them.)
#[test]
fn the_hash_picks_the_shard_and_a_sweep_step_covers_one() {
    let r = registry(0, 2);
    assert_eq!(r.shard_count(), 2);
    let keys: Vec<u64> = (1..=64u64)
        .map(|k| k.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .collect();
    for k in &keys {
        drop(r.handle_at(k, Nanos::ZERO));
    }
    let idle = Nanos::from_secs(120);
    let first = r.sweep_at(1, idle);
    assert!(0 < first && first < 64, "one shard's keys: {first}");
    assert_eq!(r.len(), 64 - first, "the other shard's keys stay");
    let second = r.sweep_at(1, idle);
    assert_eq!(first + second, 64, "the second step sweeps the other shard");
    assert!(r.is_empty());
}

/// The shard comes from bits 25..57 of the table hash (the 32-bit breaker id
/// above a mix of it: `registry/hash.rs`), so the id bits hashbrown keeps as
/// its 7-bit tag (the id's top 7) never pick it. With two shards the pick is
/// bit 56: the id's bit 24. Under this identity hasher a key below 2³² is
/// its own id.
#[test]
fn the_shard_comes_from_the_middle_bits_of_the_hash() {
    let one_shard = |keys: &[u64]| {
        let r = registry(0, 2);
        for k in keys {
            drop(r.handle_at(k, Nanos::ZERO));
        }
        let first = r.sweep_at(1, Nanos::from_secs(120));
        assert_eq!(first + r.sweep_at(1, Nanos::from_secs(120)), keys.len());
        first == 0 || first == keys.len()
    };
    let tag: Vec<u64> = (25..32).map(|bit| 1 << bit).collect();
    let low: Vec<u64> = (0..24).map(|bit| 1 << bit).collect();
    assert!(one_shard(&tag), "the tag's bits do not pick the shard");
    assert!(
        one_shard(&low),
        "with two shards, the id's low 24 bits do not either"
    );
    assert!(
        !one_shard(&[0, 1 << 24]),
        "the id's bit 24 picks one of two shards"
    );
}

/// A lookup that finds its key takes the read lock only: it never runs the
/// insert path, whose piggybacked sweep step would evict the idle key here.
#[test]
fn a_lookup_hit_never_sweeps() {
    let r = registry(0, 1);
    drop(r.handle_at(&1, Nanos::ZERO));
    let held = r.handle_at(&2, Nanos::ZERO);
    let later = Nanos::from_secs(120); // key 1 idle past the TTL, a sweep due
    let again = r.handle_at(&2, later);
    assert!(Handle::ptr_eq(&held, &again));
    assert_eq!(r.len(), 2, "the hit did not sweep");
    r.with_at(&2, later, |_| ());
    assert_eq!(r.len(), 2);
    // A miss does sweep (one step, piggybacked on the insert).
    drop(r.handle_at(&3, later));
    assert_eq!(r.len(), 2, "key 1 went, key 3 came");
}
