//! The registry builder's limits at their edges, per-key overrides, and what
//! the built registry reports about its configuration.

use std::time::Duration;

use failfast::{Breaker, MaxOpen, Nanos, Registry, RegistryBuilder, State};

fn template() -> failfast::Builder {
    Breaker::builder().consecutive_failures(3)
}

fn field(b: RegistryBuilder<u64>) -> Option<&'static str> {
    b.build().err().map(|e| e.field())
}

#[test]
fn idle_ttl_is_at_most_a_year() {
    let year = Duration::from_secs(365 * 24 * 3600);
    assert_eq!(field(Registry::builder(template()).idle_ttl(year)), None);
    assert_eq!(
        field(Registry::builder(template()).idle_ttl(year + Duration::from_nanos(1))),
        Some("idle_ttl")
    );
}

#[test]
fn shards_are_at_most_65536() {
    let r = Registry::<u64>::builder(template())
        .shards(1 << 16)
        .build()
        .unwrap();
    assert_eq!(r.shard_count(), 1 << 16);
    assert_eq!(
        field(Registry::builder(template()).shards(1 << 17)),
        Some("shards")
    );
}

#[test]
fn a_fractional_open_cap_must_be_above_zero() {
    assert_eq!(
        field(Registry::builder(template()).max_open(MaxOpen::Fraction(0.0))),
        Some("max_open")
    );
    assert_eq!(
        field(Registry::builder(template()).max_open(MaxOpen::Fraction(1.0))),
        None
    );
}

#[test]
fn the_registry_reports_its_configuration() {
    let r = Registry::<u64>::builder(template())
        .idle_ttl(Duration::from_secs(90))
        .shards(4)
        .capacity(100)
        .build()
        .unwrap();
    assert_eq!(r.idle_ttl(), Duration::from_secs(90));
    assert_eq!(r.shard_count(), 4);
    assert_eq!(r.capacity(), Some(100));
    assert_eq!(r.max_key_bytes(), None, "no key-byte budget unless asked");
    let strings = Registry::<String>::builder(template())
        .max_key_bytes(4096)
        .build()
        .unwrap();
    assert_eq!(strings.max_key_bytes(), Some(4096));
}

/// A key overridden twice gets the last override, for every lookup.
#[test]
fn the_last_override_of_a_key_wins() {
    let r = Registry::<u64>::builder(template())
        .override_key(7, Breaker::builder().consecutive_failures(5))
        .override_key(7, Breaker::builder().consecutive_failures(1))
        .build()
        .unwrap();
    let h = r.handle_at(&7, Nanos::ZERO);
    assert_eq!(h.config().consecutive_failures(), Some(1));
    h.try_acquire_at(Nanos::ZERO)
        .unwrap()
        .failure_at(Nanos::ZERO);
    assert_eq!(h.state(), State::Open);
    assert_eq!(
        r.handle_at(&8, Nanos::ZERO).config().consecutive_failures(),
        Some(3)
    );
}

/// `Debug` output names what a reader needs: not pinned, only present.
#[test]
fn debug_output_names_the_key_facts() {
    let builder = Registry::<u64>::builder(template()).capacity(100);
    let text = format!("{builder:?}");
    assert!(
        text.starts_with("RegistryBuilder") && text.contains("capacity: Some(100)"),
        "{text}"
    );
    let r = builder.shards(2).build().unwrap();
    let h = r.handle_at(&42, Nanos::ZERO);
    let text = format!("{r:?}");
    assert!(
        text.starts_with("Registry")
            && text.contains("len: 1")
            && text.contains("shards: 2")
            && text.contains("capacity: Some(100)"),
        "{text}"
    );
    let text = format!("{h:?}");
    assert!(
        text.starts_with("Handle") && text.contains("key: Some(42)"),
        "{text}"
    );
    let text = format!("{:?}", r.snapshots());
    assert!(
        text.starts_with("Snapshots") && text.contains("next_shard: 0"),
        "{text}"
    );
}
