//! `Registry<str>`: a registry of text keys kept inside their entries (as a
//! `HostKey`). It must behave exactly like a `Registry<String>`: the same
//! lookups, the same keys handed back, the same eviction, capacity, removal
//! and fleet counts. The unit tests pin the API; the proptest runs one script
//! of lookups, verdicts, removals, sweeps and clock jumps through both and
//! compares everything observable after every step.

use std::collections::BTreeMap;
use std::hash::{BuildHasherDefault, DefaultHasher, Hash};
use std::time::Duration;

use failfast::registry::{Key, KeyBytes, RegistryBuilder};
use failfast::{Breaker, Builder, Handle, ManualClock, Reason, Registry, RemoteTrip, State};
use proptest::prelude::*;

/// A fixed hasher, so both registries put a key in the same shard with the
/// same breaker id (a `String`, a `str` and a `HostKey` hash alike).
type Fixed = BuildHasherDefault<DefaultHasher>;
type Reg<K> = Registry<K, Fixed, ManualClock>;

fn consecutive(n: u32) -> Builder {
    Breaker::builder()
        .consecutive_failures(n)
        .open_duration(Duration::from_secs(10))
}

fn str_registry(template: Builder) -> Reg<str> {
    Registry::<str>::builder(template)
        .hasher(Fixed::default())
        .build_with_clock(ManualClock::new())
        .unwrap()
}

/// 23 bytes fit inside the entry, 24 do not: both sides of the boundary.
const INLINE: &str = "a-23-byte-host.test:443";
const SPILLED: &str = "a-24-byte-host.test:8443";

#[test]
fn a_str_registry_looks_up_by_str_and_hands_back_str() {
    assert_eq!((INLINE.len(), SPILLED.len()), (23, 24));
    let registry = str_registry(consecutive(1));
    for key in [INLINE, SPILLED, ""] {
        let a = registry.handle(key);
        let b = registry.handle(key);
        assert!(Handle::ptr_eq(&a, &b), "{key:?}: one breaker per key");
        assert_eq!(a.key(), Some(key));
    }
    assert_eq!(registry.len(), 3);
    // A different key is a different breaker, also when one is a prefix.
    let short = registry.handle(&INLINE[..22]);
    assert!(!Handle::ptr_eq(&short, &registry.handle(INLINE)));
    assert_eq!(registry.unkeyed().key(), None);
}

#[test]
fn a_str_registry_and_its_handles_cross_threads() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    let registry = std::sync::Arc::new(str_registry(consecutive(1)));
    let handle = registry.handle(INLINE);
    send_sync(&registry);
    send_sync(&handle);
    let other = registry.clone();
    let seen = std::thread::spawn(move || {
        let h = other.handle(INLINE);
        h.try_acquire().unwrap().failure();
        h.key().map(str::to_owned)
    })
    .join()
    .unwrap();
    assert_eq!(seen.as_deref(), Some(INLINE));
    assert_eq!(
        handle.state(),
        State::Open,
        "one breaker for the key on both threads"
    );
}

#[test]
fn a_str_registry_removes_retains_and_lists_by_str() {
    let registry = str_registry(consecutive(1));
    for key in ["a:80", "b:80", SPILLED] {
        drop(registry.handle(key));
    }
    registry.handle("b:80").try_acquire().unwrap().failure();
    let mut open = Vec::new();
    registry.for_each_snapshot(|key, s| {
        if s.state == State::Open {
            open.push(key.to_owned());
        }
    });
    assert_eq!(open, ["b:80"]);
    let mut listed: Vec<String> = registry
        .snapshots()
        .map(|(key, _)| key.to_string())
        .collect();
    listed.sort();
    assert_eq!(listed, [SPILLED, "a:80", "b:80"]);

    assert!(registry.remove(SPILLED));
    assert!(!registry.remove(SPILLED));
    assert_eq!(registry.retain(|key, _| key != "a:80"), 1);
    let left: Vec<String> = registry
        .snapshots()
        .map(|(key, _)| key.to_string())
        .collect();
    assert_eq!(left, ["b:80"]);
    assert_eq!(registry.open_count(), 1);
}

#[test]
fn a_str_registry_takes_overrides_pins_and_a_key_byte_budget() {
    let registry = Registry::<str>::builder(consecutive(5))
        .hasher(Fixed::default())
        .override_key("flaky:443", consecutive(1))
        .override_key(SPILLED, consecutive(3))
        .max_key_bytes(3 * SPILLED.len())
        .build_with_clock(ManualClock::new())
        .unwrap();
    assert_eq!(
        registry.handle("flaky:443").config().consecutive_failures(),
        Some(1)
    );
    assert_eq!(
        registry.handle(SPILLED).config().consecutive_failures(),
        Some(3)
    );
    assert_eq!(
        registry.handle("other").config().consecutive_failures(),
        Some(5)
    );
    // The budget counts the text, inline or not.
    assert_eq!(
        registry.key_bytes(),
        "flaky:443".len() + SPILLED.len() + "other".len()
    );

    // A pin replaces the key's current entry, whose holders keep the old one.
    let old = registry.handle(SPILLED);
    let pinned = registry.insert_with(SPILLED, consecutive(2)).unwrap();
    assert_eq!(pinned.key(), Some(SPILLED));
    assert!(!Handle::ptr_eq(&old, &pinned));
    assert!(Handle::ptr_eq(&pinned, &registry.handle(SPILLED)));
    assert_eq!(
        registry.handle(SPILLED).config().consecutive_failures(),
        Some(2)
    );
    assert_eq!(registry.len(), 3);

    // An invalid override names the key as text.
    let err = registry
        .insert_with("bad:443", Breaker::builder().failure_rate(2.0))
        .unwrap_err();
    assert_eq!(err.key(), Some(r#""bad:443""#));
}

#[test]
fn a_str_registry_runs_closures_applies_remote_trips_and_prints_its_keys() {
    let registry = str_registry(consecutive(1));
    assert!(registry.with(SPILLED, |b| b.try_acquire().is_ok()));
    assert_eq!(registry.with(SPILLED, |b| b.state()), State::Closed);
    let news = RemoteTrip::new(1, Duration::from_secs(30), Reason::FailureRate);
    let t = registry.apply_remote(INLINE, &news).unwrap();
    assert_eq!(t.to, State::Open);
    let h = registry.handle(INLINE);
    assert_eq!(h.state(), State::Open);
    let debug = format!("{h:?}");
    assert!(debug.contains(&format!("{INLINE:?}")), "{debug}");
    assert!(h.try_acquire().is_err(), "the remote trip rejects here too");
    let mut keys: Vec<String> = registry
        .snapshots()
        .map(|(k, _)| k.as_str().to_owned())
        .collect();
    keys.sort();
    assert_eq!(keys, [INLINE, SPILLED]);
}

/// One step of a script run through both registries.
#[derive(Clone, Debug)]
enum Step {
    /// Look the key up and run one call with this verdict (`true`: success).
    Call(usize, bool),
    /// Look the key up and keep the handle until the script ends.
    Hold(usize),
    Remove(usize),
    /// Pin the key with its own configuration (`insert_with`).
    Pin(usize),
    /// Run one call through `with`, with this verdict.
    With(usize, bool),
    /// Keep the keys whose bit is set.
    Retain(u8),
    Sweep,
    Advance(u64),
}

/// Text of every kind: inline, spilled, empty, and two that differ in their
/// last byte only.
const KEYS: [&str; 7] = [
    "api.example:443",
    "api.example:444",
    "",
    INLINE,
    SPILLED,
    "a-much-longer-upstream-name.internal.example:8443",
    "db:5432",
];

fn step() -> impl Strategy<Value = Step> {
    let key = 0..KEYS.len();
    prop_oneof![
        6 => (key.clone(), any::<bool>()).prop_map(|(k, ok)| Step::Call(k, ok)),
        1 => key.clone().prop_map(Step::Hold),
        1 => key.clone().prop_map(Step::Remove),
        1 => key.clone().prop_map(Step::Pin),
        2 => (key, any::<bool>()).prop_map(|(k, ok)| Step::With(k, ok)),
        1 => any::<u8>().prop_map(Step::Retain),
        1 => Just(Step::Sweep),
        2 => (1u64..30).prop_map(Step::Advance),
    ]
}

/// Everything a user can observe of a registry, keyed by text.
#[derive(Debug, PartialEq)]
struct Seen {
    len: usize,
    open: usize,
    half_open: usize,
    untracked: u64,
    evicted: u64,
    removed: u64,
    key_bytes: usize,
    keys: BTreeMap<String, State>,
}

fn seen<K, F>(registry: &Reg<K>, text: F) -> Seen
where
    K: ?Sized + Key + Hash + Eq,
    F: Fn(&K) -> String,
{
    let mut keys = BTreeMap::new();
    registry.for_each_snapshot(|key, s| {
        keys.insert(text(key), s.state);
    });
    Seen {
        len: registry.len(),
        open: registry.open_count(),
        half_open: registry.half_open_count(),
        untracked: registry.untracked(),
        evicted: registry.evicted(),
        removed: registry.removed(),
        key_bytes: registry.key_bytes(),
        keys,
    }
}

/// One shard, a small capacity and key-byte budget, short TTLs: the script
/// reaches the overflow breaker, pressure eviction and idle eviction.
fn limited<K>(capacity: usize) -> RegistryBuilder<K, Fixed>
where
    K: ?Sized + Key + Hash + Eq,
    K::Stored: KeyBytes,
{
    Registry::<K>::builder(consecutive(2))
        .hasher(Fixed::default())
        .shards(1)
        .capacity(capacity)
        .max_key_bytes(80)
        .idle_ttl(Duration::from_secs(20))
        .forget_after(Duration::from_secs(40))
}

proptest! {
    #[test]
    fn a_str_registry_behaves_like_a_string_registry(
        steps in proptest::collection::vec(step(), 1..60),
        capacity in 2usize..6,
    ) {
        let clock = ManualClock::new();
        let strings: Reg<String> = limited(capacity).build_with_clock(clock.clone()).unwrap();
        let texts: Reg<str> = limited(capacity).build_with_clock(clock.clone()).unwrap();
        let mut held = (Vec::new(), Vec::new());
        for step in steps {
            match step {
                Step::Call(k, ok) => {
                    let (a, b) = (strings.handle(KEYS[k]), texts.handle(KEYS[k]));
                    prop_assert_eq!(a.key().map(String::as_str), b.key());
                    prop_assert_eq!(a.is_tracked(), b.is_tracked());
                    let admitted = match (a.try_acquire(), b.try_acquire()) {
                        (Ok(pa), Ok(pb)) if ok => { pa.success(); pb.success(); (true, true) }
                        (Ok(pa), Ok(pb)) => { pa.failure(); pb.failure(); (true, true) }
                        (pa, pb) => (pa.is_ok(), pb.is_ok()),
                    };
                    prop_assert_eq!(admitted.0, admitted.1);
                }
                Step::Hold(k) => {
                    held.0.push(strings.handle(KEYS[k]));
                    held.1.push(texts.handle(KEYS[k]));
                }
                Step::Pin(k) => {
                    let a = strings.insert_with(KEYS[k].to_string(), consecutive(1)).unwrap();
                    let b = texts.insert_with(KEYS[k], consecutive(1)).unwrap();
                    prop_assert_eq!(a.key().map(String::as_str), b.key());
                }
                Step::With(k, ok) => {
                    let verdict = |b: &Breaker<ManualClock>| match b.try_acquire() {
                        Ok(p) if ok => { p.success(); true }
                        Ok(p) => { p.failure(); true }
                        Err(_) => false,
                    };
                    prop_assert_eq!(strings.with(KEYS[k], verdict), texts.with(KEYS[k], verdict));
                }
                Step::Remove(k) => {
                    prop_assert_eq!(strings.remove(KEYS[k]), texts.remove(KEYS[k]));
                }
                Step::Retain(mask) => {
                    let keep = |key: &str| {
                        KEYS.iter().position(|k| *k == key).is_some_and(|i| mask & (1 << i) != 0)
                    };
                    prop_assert_eq!(
                        strings.retain(|key, _| keep(key)),
                        texts.retain(|key, _| keep(key))
                    );
                }
                Step::Sweep => prop_assert_eq!(strings.maintain(), texts.maintain()),
                Step::Advance(secs) => clock.advance(Duration::from_secs(secs)),
            }
            prop_assert_eq!(seen(&strings, String::clone), seen(&texts, str::to_owned));
        }
    }
}
