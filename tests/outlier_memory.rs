//! What an outlier pool (issue 28) adds to a host's memory: two 8-byte
//! slots in the breaker's storage (the interval's tally and the ejection
//! mark), so 16 bytes for a breaker that has the allocation already (a
//! window, hints, call counters), or a 40-byte allocation for a
//! consecutive breaker that had none (the allocation's 24-byte header:
//! reference count, head word, length; then the two slots). The breaker
//! itself stays 48 bytes, so a registry's entry does not grow. Pools off,
//! every breaker is byte for byte what it was before issue 28 (the figures
//! of `tests/recovery_memory.rs` and benches/README.md, "Memory per
//! breaker").

use std::collections::hash_map::RandomState;
use std::time::Duration;

use failfast::{Breaker, Builder, ManualClock, Outliers, QuantaClock, Registry};

type Reg = Registry<u64, RandomState, ManualClock>;

/// A registry of `template` on a manual clock, pooled or not.
fn registry(template: Builder, pooled: bool) -> Reg {
    let builder = Registry::<u64>::builder(template);
    let builder = if pooled {
        builder.outliers(Outliers::new())
    } else {
        builder
    };
    builder.build_with_clock(ManualClock::new()).unwrap()
}

/// The bytes of key 7's breaker in a registry of `template`.
fn host_bytes(template: Builder, pooled: bool) -> usize {
    registry(template, pooled).handle(&7).memory_bytes()
}

/// The bytes of a standalone breaker of `template`.
fn standalone_bytes(template: Builder) -> usize {
    template
        .build_with_clock(ManualClock::new())
        .unwrap()
        .memory_bytes()
}

/// Every policy with its storage, and its `memory_bytes` before issue 28
/// (benches/README.md, "Memory per breaker").
fn policies() -> [(&'static str, Builder, usize); 5] {
    [
        (
            "consecutive",
            Breaker::builder().consecutive_failures(5),
            48,
        ),
        (
            "count window 100",
            Breaker::builder().failure_rate(0.5).count_window(100),
            104,
        ),
        (
            "time window 10 s × 10",
            Breaker::builder()
                .failure_rate(0.5)
                .time_window(Duration::from_secs(10), 10),
            160,
        ),
        (
            "consecutive + hints",
            Breaker::builder().consecutive_failures(5).hints(),
            80,
        ),
        (
            "consecutive + count_calls",
            Breaker::builder().consecutive_failures(5).count_calls(true),
            160,
        ),
    ]
}

#[cfg(target_pointer_width = "64")]
#[test]
fn a_pooled_host_takes_two_slots_or_a_40_byte_allocation() {
    for (name, template, before) in policies() {
        let pooled = host_bytes(template.clone(), true);
        let unpooled = host_bytes(template, false);
        assert_eq!(unpooled, before, "{name}: unpooled, as before issue 28");
        let expected = if name == "consecutive" {
            // No storage before: the header (24) and the two slots (16).
            40
        } else {
            // The two slots in the allocation the breaker already has.
            16
        };
        assert_eq!(pooled - unpooled, expected, "{name}: what the pool adds");
    }
    // The slow-call threshold the latency rule needs adds nothing of its own.
    let slow = || {
        Breaker::builder()
            .consecutive_failures(5)
            .slow_call_threshold(Duration::from_secs(1))
    };
    let latency = registry(slow(), false);
    let pooled = Registry::<u64>::builder(slow())
        .outliers(Outliers::new().slow_outliers(2.0, 0.1))
        .build_with_clock(ManualClock::new())
        .unwrap();
    assert_eq!(
        pooled.handle(&7).memory_bytes() - latency.handle(&7).memory_bytes(),
        40
    );
}

#[cfg(target_pointer_width = "64")]
#[test]
fn the_breaker_stays_48_bytes_pooled_or_not() {
    // The pool is reached through the configuration every breaker of a
    // template shares (one pointer there), not through the breaker: a
    // registry's entry holds the same 48-byte breaker either way.
    assert_eq!(std::mem::size_of::<Breaker<QuantaClock>>(), 48);
    assert_eq!(std::mem::size_of::<Breaker<ManualClock>>(), 48);
    let pooled = registry(Breaker::builder().consecutive_failures(5), true);
    let h = pooled.handle(&7);
    assert_eq!(std::mem::size_of_val(h.breaker()), 48);
}

#[test]
fn pools_off_nothing_is_added() {
    for (name, template, _) in policies() {
        assert_eq!(
            host_bytes(template.clone(), false),
            standalone_bytes(template),
            "{name}: a registry's host without outliers is a standalone breaker"
        );
    }
}

#[test]
fn a_named_pool_costs_a_host_what_the_default_pool_does() {
    let template = || Breaker::builder().consecutive_failures(5);
    let r = Registry::<u64>::builder(template())
        .outliers(Outliers::new())
        .override_key(8, template().outlier_pool("payments"))
        .build_with_clock(ManualClock::new())
        .unwrap();
    assert_eq!(r.handle(&7).memory_bytes(), r.handle(&8).memory_bytes());
    assert_eq!(
        r.outlier_pools().len(),
        2,
        "the default pool and \"payments\""
    );
    // Every host is in one pool and is counted once.
    let members: u64 = r.outlier_pools().iter().map(|p| p.members).sum();
    assert_eq!(members, 2);
}
