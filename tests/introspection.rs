//! What a breaker says about itself: its configuration read back, its
//! memory footprint, whether it is pristine (the registry's eviction test),
//! its `Debug` output, and which states reject.

use failfast::{Breaker, ManualClock, Nanos, Outcome, State, WindowKind};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn config_getters_return_what_was_built() {
    let b = Breaker::builder()
        .consecutive_failures(4)
        .failure_rate(0.25)
        .slow_call_rate(0.75)
        .slow_call_threshold(Duration::from_millis(300))
        .count_window(50)
        .min_calls(7)
        .half_open_probes(3)
        .probe_lease(Duration::from_secs(9))
        .open_duration(Duration::from_secs(2))
        .backoff(3.0, Duration::from_secs(40))
        .jitter(0.25)
        .count_calls(true)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let c = b.config();
    assert_eq!(c.consecutive_failures(), Some(4));
    assert_eq!(c.failure_rate(), Some(0.25));
    assert_eq!(c.slow_call_rate(), Some(0.75));
    assert_eq!(c.slow_call_threshold(), Some(Duration::from_millis(300)));
    assert_eq!(c.window(), WindowKind::Count { size: 50 });
    assert_eq!(c.min_calls(), 7);
    assert_eq!(c.half_open_probes(), 3);
    assert_eq!(c.probe_lease(), Duration::from_secs(9));
    assert_eq!(c.open_duration_base(), Duration::from_secs(2));
    assert_eq!(c.open_duration(1), Duration::from_secs(2));
    assert_eq!(c.open_duration(2), Duration::from_secs(6));
    assert_eq!(c.open_duration(3), Duration::from_secs(18));
    assert_eq!(c.open_duration(4), Duration::from_secs(40));
    assert_eq!(c.backoff_multiplier(), 3.0);
    assert_eq!(c.open_duration_cap(), Duration::from_secs(40));
    assert_eq!(c.jitter(), 0.25);
    assert!(c.counts_calls());

    let d = Breaker::builder()
        .consecutive_failures(2)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let c = d.config();
    assert_eq!(c.failure_rate(), None);
    assert_eq!(c.slow_call_rate(), None);
    assert_eq!(c.slow_call_threshold(), None);
    assert_eq!(c.window(), WindowKind::None);
    assert!(!c.counts_calls());
}

#[test]
fn memory_bytes_counts_the_window_and_the_counters() {
    let base = std::mem::size_of::<Breaker<ManualClock>>();
    let build = |b: failfast::Builder| b.build_with_clock(ManualClock::new()).unwrap();
    let none = build(Breaker::builder().consecutive_failures(1));
    assert_eq!(
        none.memory_bytes(),
        base,
        "no window, no counters, no hints: no heap"
    );
    // The one heap allocation: a header (reference count, the window's head
    // word, length), then the slots.
    const HEADER: usize = 24;
    // An upstream's remembered hint: one slot, with hints on.
    const HINT: usize = 8;
    let hinted = build(Breaker::builder().consecutive_failures(1).hints());
    assert_eq!(hinted.memory_bytes(), base + HEADER + HINT);
    // 100 entries: the cursor in the header and ceil(100 / 32) = 4 words of
    // 2-bit entries.
    let count = build(Breaker::builder().failure_rate(0.5).count_window(100));
    assert_eq!(count.memory_bytes(), base + HEADER + 4 * 8);
    let count_hinted = build(
        Breaker::builder()
            .failure_rate(0.5)
            .count_window(100)
            .hints(),
    );
    assert_eq!(count_hinted.memory_bytes(), count.memory_bytes() + HINT);
    // The epoch in the header; the bucket width and 10 buckets.
    let time = build(
        Breaker::builder()
            .failure_rate(0.5)
            .time_window(Duration::from_secs(10), 10),
    );
    assert_eq!(time.memory_bytes(), base + HEADER + 11 * 8);
    let counted = build(
        Breaker::builder()
            .failure_rate(0.5)
            .count_window(100)
            .count_calls(true),
    );
    // Eleven counters, in the same allocation.
    assert_eq!(counted.memory_bytes(), count.memory_bytes() + 11 * 8);
}

#[test]
fn pristine_means_closed_with_no_run_and_a_clean_window() {
    let t = Nanos::from_secs(1);
    // No window: only the run can make it not pristine.
    let b = Breaker::builder()
        .consecutive_failures(3)
        .build_with_clock(ManualClock::new())
        .unwrap();
    assert!(b.is_pristine_at(t));
    b.try_acquire_at(t).unwrap().failure_at(t);
    assert!(!b.is_pristine_at(t), "a run of 1");
    b.try_acquire_at(t).unwrap().success_at(t);
    assert!(b.is_pristine_at(t), "the run ended");
    b.force_open_at(t);
    assert!(!b.is_pristine_at(t), "forced open (trips 0, count 0)");

    // A window: a failure or a slow call in it is remembered.
    let b = Breaker::builder()
        .consecutive_failures(3)
        .failure_rate(1.0)
        .slow_call_threshold(Duration::from_secs(1))
        .count_window(10)
        .build_with_clock(ManualClock::new())
        .unwrap();
    assert!(b.is_pristine_at(t));
    b.try_acquire_at(t).unwrap().failure_at(t);
    b.try_acquire_at(t).unwrap().success_at(t);
    assert_eq!(b.snapshot_at(t).consecutive_failures, 0);
    assert!(!b.is_pristine_at(t), "a failure in the window");
    b.reset_at(t);
    assert!(b.is_pristine_at(t));
    b.try_acquire_at(t)
        .unwrap()
        .success_at(t + Duration::from_secs(2));
    assert!(!b.is_pristine_at(t), "a slow call in the window");
}

#[test]
fn a_remembered_hint_is_not_pristine_until_it_runs_out() {
    let t = Nanos::from_secs(1);
    let hint = Some(Duration::from_secs(10));
    let b = Breaker::builder()
        .consecutive_failures(3)
        .hints()
        .build_with_clock(ManualClock::new())
        .unwrap();
    // An ignored call's hint is remembered: the next trip opens for it.
    b.try_acquire_at(t)
        .unwrap()
        .record_hinted_at(Outcome::Ignored, hint, t);
    assert!(!b.is_pristine_at(t), "a hint remembered");
    assert!(!b.is_pristine_at(t + Duration::from_millis(9_999)));
    assert!(b.is_pristine_at(t + Duration::from_secs(10)), "run out");
    // With hints off, nothing is remembered.
    let off = Breaker::builder()
        .consecutive_failures(3)
        .build_with_clock(ManualClock::new())
        .unwrap();
    off.try_acquire_at(t)
        .unwrap()
        .record_hinted_at(Outcome::Ignored, hint, t);
    assert!(off.is_pristine_at(t));
}

#[test]
fn only_open_and_forced_open_reject() {
    let rejecting: Vec<State> = State::all().into_iter().filter(|s| s.rejects()).collect();
    assert_eq!(rejecting, [State::Open, State::ForcedOpen]);
}

/// The `name: value` fields of a `{:?}` rendering whose value is not itself
/// a struct, wherever they are nested, in order.
fn debug_leaves(rendered: &str) -> Vec<(String, String)> {
    let mut leaves = Vec::new();
    let mut from = 0;
    while let Some(found) = rendered[from..].find(": ") {
        let colon = from + found;
        let name_start = rendered[..colon]
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map_or(0, |p| p + 1);
        let rest = &rendered[colon + 2..];
        // The value ends at the `,` or closing bracket of its own level.
        let mut depth = 0;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            match c {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' | ',' if depth == 0 => {
                    end = i;
                    break;
                }
                ')' | ']' | '}' => depth -= 1,
                _ => {}
            }
        }
        let value = rest[..end].trim();
        if !value.contains('{') {
            leaves.push((rendered[name_start..colon].to_owned(), value.to_owned()));
        }
        from = colon + 2; // a struct value's own fields come next
    }
    leaves
}

/// The one leaf field `name` of `rendered` (see [`debug_leaves`]).
#[track_caller]
fn debug_field(rendered: &str, name: &str) -> String {
    let found: Vec<String> = debug_leaves(rendered)
        .into_iter()
        .filter(|(n, _)| n == name)
        .map(|(_, v)| v)
        .collect();
    assert_eq!(found.len(), 1, "one {name:?} field in {rendered}");
    found.into_iter().next().unwrap()
}

#[test]
fn debug_output_shows_the_state_the_window_and_the_permit() {
    let b = Breaker::builder()
        .consecutive_failures(1)
        .count_window(40)
        .failure_rate(1.0)
        .id(7)
        .build_with_clock(ManualClock::new())
        .unwrap();
    b.try_acquire_at(Nanos::ZERO)
        .unwrap()
        .failure_at(Nanos::from_secs(5));
    let s = format!("{b:?}");
    let at = Nanos::from_secs(50);
    let snap = b.snapshot_at(at);
    assert!(s.starts_with("Breaker "), "{s}");
    assert_eq!(debug_field(&s, "id"), format!("{:?}", b.id()));
    assert_eq!(debug_field(&s, "state"), format!("{:?}", snap.state));
    assert_eq!(
        debug_field(&s, "generation"),
        format!("{:?}", snap.generation)
    );
    assert_eq!(
        debug_field(&s, "trips"),
        format!("{:?}", snap.trips_in_a_row)
    );
    assert_eq!(
        debug_field(&s, "since"),
        format!("{:?}", at - snap.time_in_state)
    );
    // The window's body: what it adds to the breaker's size past the
    // allocation's 24-byte header (reference count, the window's head, the
    // length), in u64s.
    let words = (b.memory_bytes() - std::mem::size_of::<Breaker<ManualClock>>() - 24) / 8;
    assert_eq!(debug_field(&s, "slots"), format!("{words:?}"));

    let probe = b.try_acquire_at(Nanos::from_secs(100)).unwrap();
    let s = format!("{probe:?}");
    // One permit type: the borrowed `Permit` is an `OwnedPermit` over a reference.
    assert!(s.starts_with("OwnedPermit "), "{s}");
    assert_eq!(
        debug_field(&s, "generation"),
        format!("{:?}", probe.generation())
    );
    assert_eq!(debug_field(&s, "probe"), format!("{:?}", probe.is_probe()));
    assert_eq!(
        debug_field(&s, "start"),
        format!("{:?}", probe.started_at())
    );
    drop(probe);

    let shared = Arc::new(b);
    let owned = shared.try_acquire_owned_at(Nanos::from_secs(101)).unwrap();
    let s = format!("{owned:?}");
    assert!(s.starts_with("OwnedPermit "), "{s}");
    assert_eq!(
        debug_field(&s, "generation"),
        format!("{:?}", owned.generation())
    );
    assert_eq!(debug_field(&s, "probe"), format!("{:?}", owned.is_probe()));
    assert_eq!(
        debug_field(&s, "start"),
        format!("{:?}", owned.started_at())
    );
}

#[test]
fn builder_debug_shows_what_it_will_build() {
    let builder = || {
        Breaker::builder()
            .consecutive_failures(4)
            .half_open_probes(2)
            .id(9)
    };
    let s = format!("{:?}", builder());
    let b = builder().build_with_clock(ManualClock::new()).unwrap();
    assert!(s.starts_with("Builder "), "{s}");
    assert_eq!(
        debug_field(&s, "consecutive_failures"),
        format!("{:?}", b.config().consecutive_failures())
    );
    assert_eq!(
        debug_field(&s, "probes"),
        format!("{:?}", b.config().half_open_probes())
    );
    assert_eq!(debug_field(&s, "id"), format!("{:?}", Some(b.id())));
    assert_eq!(debug_field(&s, "observer"), "false");
    let observed = builder().observer(|_: &failfast::Transition| {});
    assert_eq!(debug_field(&format!("{observed:?}"), "observer"), "true");
}
