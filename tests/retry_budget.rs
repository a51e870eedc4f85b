//! Retry budgets bound to a breaker: gRPC's throttling to the token,
//! Finagle's budget (its share of first tries, its reserve, its TTL), the
//! breaker's rejections before the budget's, the upstream's remembered
//! hint, the load bound, the counts, and the memory each costs. Time is a
//! `ManualClock`'s or passed in: no sleeps.

use std::sync::Arc;
use std::time::Duration;

use failfast::{
    Breaker, Builder, ManualClock, Nanos, Outcome, Outliers, Registry, RejectReason, RetryBudget,
    State,
};

fn breaker(budget: RetryBudget) -> Breaker<ManualClock> {
    Breaker::builder()
        .consecutive_failures(1_000)
        .retry_budget(budget)
        .build_with_clock(ManualClock::new())
        .unwrap()
}

/// gRFC A6's own example: max 4, ratio 1.6 → failure (3), success (4),
/// failure (3), failure (2): no more retries.
#[test]
fn grpc_throttling_follows_its_specification() {
    let b = breaker(RetryBudget::tokens(4, 1.6));
    let room = |b: &Breaker<ManualClock>| b.snapshot().retry_room;
    assert_eq!(
        room(&b),
        Some(2),
        "4 tokens: two failures to the threshold (2)"
    );
    b.try_acquire().unwrap().failure();
    assert!(b.try_retry().is_ok(), "3 > 2");
    b.try_acquire().unwrap().success();
    assert_eq!(room(&b), Some(2), "4.6, capped at 4");
    b.try_acquire().unwrap().failure();
    assert!(b.try_retry().is_ok(), "3 > 2");
    b.try_acquire().unwrap().failure();
    let refused = b.try_retry().unwrap_err();
    assert_eq!(refused.reason(), RejectReason::RetryBudget);
    assert_eq!(
        refused.retry_after(),
        None,
        "only a success refills the bucket"
    );
    assert_eq!(room(&b), Some(0));
    // A first try still goes: the budget only throttles retries.
    let first = b.try_acquire().unwrap();
    first.success(); // 3.6 > 2
    assert!(b.try_retry().is_ok());
}

#[test]
fn grpc_throttling_counts_retries_verdicts_and_slow_successes() {
    let b = Breaker::builder()
        .consecutive_failures(1_000)
        .slow_call_threshold(Duration::from_millis(100))
        .retry_budget(RetryBudget::tokens(10, 0.5))
        .build_with_clock(ManualClock::new())
        .unwrap();
    let at = Nanos::from_millis;
    // A slow success takes a token, as a failure does.
    b.try_acquire_at(at(0)).unwrap().success_at(at(500));
    assert_eq!(b.snapshot_at(at(500)).retry_room, Some(4));
    // An ignored verdict (a business error) and a neutral drop move nothing.
    b.try_acquire_at(at(500)).unwrap().ignore_at(at(510));
    drop(b.try_acquire_at(at(510)).unwrap());
    assert_eq!(b.snapshot_at(at(510)).retry_room, Some(4));
    // A retry's own failure takes a token like any call's.
    for left in (0..4).rev() {
        b.try_retry_at(at(600)).unwrap().failure_at(at(610));
        assert_eq!(b.snapshot_at(at(610)).retry_room, Some(left));
    }
    assert!(b.try_retry_at(at(610)).is_err());
    // A fast success gives half a token back: 5.5 > 5.
    b.try_acquire_at(at(620)).unwrap().success_at(at(630));
    b.try_retry_at(at(630)).unwrap().failure_at(at(640));
    assert!(b.try_retry_at(at(640)).is_err(), "4.5 tokens");
}

/// Finagle's defaults: 20 % of first tries, plus 10 per second over a
/// 10 s TTL (100 retries) that is there before any traffic.
#[test]
fn finagle_allows_a_fifth_of_requests_on_top_of_its_reserve() {
    let b = breaker(RetryBudget::finagle());
    let now = Nanos::ZERO;
    assert_eq!(
        b.snapshot_at(now).retry_room,
        Some(100),
        "the reserve: 10/s × 10 s"
    );
    // The verdicts do not matter to a ratio budget: they are ignored here,
    // so that the breaker stays out of the way.
    for _ in 0..1_000 {
        b.try_acquire_at(now).unwrap().ignore_at(now);
    }
    assert_eq!(
        b.snapshot_at(now).retry_room,
        Some(300),
        "100 + 20 % of 1000"
    );
    let mut retries = 0;
    while let Ok(p) = b.try_retry_at(now) {
        p.success_at(now);
        retries += 1;
    }
    assert_eq!(retries, 300);
    assert_eq!(b.snapshot_at(now).retry_room, Some(0));
    // Retries deposit nothing: a retry's success makes no room.
    assert_eq!(b.snapshot_at(now).calls, None);
}

/// Deposits and withdrawals expire after the TTL (kept as two halves: an
/// entry counts until the end of the half after its own).
#[test]
fn finagle_deposits_and_withdrawals_expire_after_the_ttl() {
    let b = breaker(RetryBudget::ratio(0.5, Duration::from_secs(10), 0));
    let s = Nanos::from_secs;
    for _ in 0..10 {
        b.try_acquire_at(s(0)).unwrap().success_at(s(0));
    }
    assert_eq!(b.snapshot_at(s(0)).retry_room, Some(5));
    // Still there in the next half (5 s .. 10 s)...
    assert_eq!(b.snapshot_at(s(9)).retry_room, Some(5));
    b.try_retry_at(s(9)).unwrap().success_at(s(9));
    assert_eq!(b.snapshot_at(s(9)).retry_room, Some(4));
    // ...gone one TTL after their half began; the withdrawal at 9 s stays
    // until 20 s.
    for _ in 0..10 {
        b.try_acquire_at(s(10)).unwrap().success_at(s(10));
    }
    assert_eq!(
        b.snapshot_at(s(10)).retry_room,
        Some(4),
        "5 deposited, 1 withdrawn"
    );
    assert_eq!(
        b.snapshot_at(s(15)).retry_room,
        Some(5),
        "the withdrawal expired"
    );
    assert_eq!(
        b.snapshot_at(s(20)).retry_room,
        Some(0),
        "everything expired"
    );
    // After a long pause, the window starts empty: no stale sums.
    assert!(b.try_retry_at(s(3_600)).is_err());
    b.try_acquire_at(s(3_600)).unwrap().success_at(s(3_600));
    b.try_acquire_at(s(3_600)).unwrap().success_at(s(3_600));
    assert!(b.try_retry_at(s(3_600)).is_ok());
}

/// The reserve refills with time: after a TTL without retries, all of it
/// is there again.
#[test]
fn finagle_reserve_comes_back_after_the_ttl() {
    let b = breaker(RetryBudget::ratio(0.0, Duration::from_secs(2), 5));
    let ms = Nanos::from_millis;
    let mut spent = 0;
    while b.try_retry_at(ms(0)).is_ok() {
        spent += 1;
    }
    assert_eq!(spent, 10, "5 per second × 2 s");
    let refused = b.try_retry_at(ms(400)).unwrap_err();
    assert_eq!(
        refused.retry_after(),
        Some(Duration::from_millis(600)),
        "the half's end"
    );
    assert!(b.try_retry_at(ms(1_999)).is_err());
    assert_eq!(b.snapshot_at(ms(2_000)).retry_room, Some(10));
}

/// With a budget, what reaches the upstream is at most the offered first
/// tries plus `percent` of them plus the reserve, over any two consecutive
/// halves of the TTL, however eagerly callers retry.
#[test]
fn upstream_load_is_bounded_by_offered_load_plus_percent_plus_reserve() {
    let percent = 0.2;
    let ttl = Duration::from_secs(10);
    let per_second = 10;
    let b = breaker(RetryBudget::ratio(percent, ttl, per_second));
    let reserve = f64::from(per_second) * ttl.as_secs_f64();
    // 100 s of a failing upstream, 50 first tries every 100 ms (500/s),
    // each retried until the budget refuses. (The verdicts are ignored, so
    // that the breaker does not open: the budget alone bounds the load.)
    let mut per_half = Vec::new(); // (first tries, retries) per 5 s
    for tick in 0..1_000u64 {
        let now = Nanos::from_millis(tick * 100);
        let half = (tick / 50) as usize;
        if per_half.len() <= half {
            per_half.push((0u64, 0u64));
        }
        for _ in 0..50 {
            b.try_acquire_at(now).unwrap().ignore_at(now);
            per_half[half].0 += 1;
            while let Ok(p) = b.try_retry_at(now) {
                p.ignore_at(now);
                per_half[half].1 += 1;
            }
        }
    }
    for pair in per_half.windows(2) {
        let offered = (pair[0].0 + pair[1].0) as f64;
        let upstream = offered + (pair[0].1 + pair[1].1) as f64;
        let bound = (1.0 + percent) * offered + reserve;
        assert!(upstream <= bound, "{upstream} calls over {bound}");
    }
    // And the budget is used: at steady state retries are 20 % of first
    // tries in each TTL (the reserve included in the first).
    let (first, retries) = per_half[10];
    assert!(
        retries > 0 && retries <= first,
        "{retries} retries of {first}"
    );
}

/// The breaker's rejections come first, and take nothing from the budget.
#[test]
fn the_breakers_rejections_come_first_and_cost_no_budget() {
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(10))
        .retry_budget(RetryBudget::ratio(0.0, Duration::from_secs(10), 1))
        .build_with_clock(clock.clone())
        .unwrap();
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), State::Open);
    for _ in 0..100 {
        assert_eq!(b.try_retry().unwrap_err().reason(), RejectReason::Open);
    }
    assert_eq!(
        b.snapshot().retry_room,
        Some(10),
        "nothing withdrawn while open"
    );
    b.force_open();
    assert_eq!(
        b.try_retry().unwrap_err().reason(),
        RejectReason::ForcedOpen
    );
    b.reset();
    assert!(b.try_retry().is_ok());
    assert_eq!(b.snapshot().retry_room, Some(9));
}

/// A probe the budget refuses gives its slot back at once: the round is
/// not held by a permit that never ran.
#[test]
fn a_refused_retry_releases_its_probe_slot() {
    let b = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(1))
        .retry_budget(RetryBudget::tokens(2, 0.1))
        .build_with_clock(ManualClock::new())
        .unwrap();
    let s = Nanos::from_secs;
    b.try_acquire_at(s(0)).unwrap().failure_at(s(0)); // 1 token of 2: no retries
    assert_eq!(b.state(), State::Open);
    let refused = b.try_retry_at(s(2)).unwrap_err();
    assert_eq!(refused.reason(), RejectReason::RetryBudget);
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "the retry's admission began the round"
    );
    let probe = b.try_acquire_at(s(2)).expect("the slot was given back");
    assert!(probe.is_probe());
    probe.success_at(s(2));
    assert_eq!(b.state(), State::Closed);
}

/// A ratio budget's retry admitted outside Closed takes back the deposit
/// its admission made, and a refused one leaves the sums as they were.
#[test]
fn a_retry_outside_closed_deposits_nothing() {
    let b = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(Duration::from_secs(1))
        .half_open_probes(3)
        .retry_budget(RetryBudget::ratio(0.5, Duration::from_secs(10), 0))
        .build_with_clock(ManualClock::new())
        .unwrap();
    let s = Nanos::from_secs;
    for _ in 0..4 {
        b.try_acquire_at(s(0)).unwrap().success_at(s(0)); // 2 retries
    }
    b.try_acquire_at(s(0)).unwrap().failure_at(s(0)); // 2.5, open
    let probe = b.try_retry_at(s(2)).expect("a probe, and room");
    assert!(probe.is_probe());
    assert_eq!(
        b.snapshot_at(s(2)).retry_room,
        Some(1),
        "2.5 − 1, no deposit"
    );
    let probe2 = b.try_retry_at(s(2)).unwrap();
    let refused = b.try_retry_at(s(2)).unwrap_err();
    assert_eq!(refused.reason(), RejectReason::RetryBudget);
    assert_eq!(b.snapshot_at(s(2)).retry_room, Some(0));
    let first = b
        .try_acquire_at(s(2))
        .expect("the refused retry's slot is free");
    assert_eq!(
        b.snapshot_at(s(2)).retry_room,
        Some(1),
        "a first try deposits: 0.5 + 0.5"
    );
    for p in [probe, probe2, first] {
        p.success_at(s(2));
    }
    assert_eq!(b.state(), State::Closed);
}

/// With remembered hints, no retry goes before the upstream's hint has
/// passed, whether the hint opened the breaker or not.
#[test]
fn no_retry_before_a_remembered_hint_has_passed() {
    let b = Breaker::builder()
        .consecutive_failures(2)
        .open_duration(Duration::from_secs(1))
        .hints()
        .retry_budget(RetryBudget::finagle())
        .build_with_clock(ManualClock::new())
        .unwrap();
    let s = Nanos::from_secs;
    let hint = |d| Some(Duration::from_secs(d));
    b.try_acquire_at(s(0))
        .unwrap()
        .record_hinted_at(Outcome::Failure, hint(30), s(0));
    assert_eq!(b.state(), State::Closed);
    for t in [0, 1, 15, 29] {
        let refused = b.try_retry_at(s(t)).unwrap_err();
        assert_eq!(refused.reason(), RejectReason::RetryBudget);
        assert_eq!(refused.retry_after(), Some(Duration::from_secs(30 - t)));
    }
    assert_eq!(
        b.snapshot_at(s(29)).retry_room,
        Some(100),
        "the hint withdrew nothing"
    );
    b.try_retry_at(s(30)).unwrap().success_at(s(30));
    // A hint that opens the breaker: the open period covers it.
    b.try_acquire_at(s(31)).unwrap().failure_at(s(31));
    b.try_acquire_at(s(31))
        .unwrap()
        .record_hinted_at(Outcome::Failure, hint(60), s(31));
    assert_eq!(b.state(), State::Open);
    for t in [31, 60, 90] {
        let refused = b.try_retry_at(s(t)).unwrap_err();
        assert_eq!(refused.reason(), RejectReason::Open, "{t}");
    }
    // (A span is kept in units of 2^24 ns: the hint's end rounds up a little.)
    assert!(
        b.try_retry_at(s(92)).unwrap().is_probe(),
        "the probe, once the hint has passed"
    );
}

/// Refusals are counted as rejections, and apart.
#[test]
fn refused_retries_are_counted() {
    let b = Breaker::builder()
        .consecutive_failures(1_000)
        .count_calls(true)
        .retry_budget(RetryBudget::tokens(2, 1.0))
        .build_with_clock(ManualClock::new())
        .unwrap();
    b.try_acquire().unwrap().failure();
    for _ in 0..3 {
        assert!(b.try_retry().is_err());
    }
    let calls = b.snapshot().calls.unwrap();
    assert_eq!(calls.rejected, 3);
    assert_eq!(calls.retries_refused, 3);
    assert_eq!(calls.admitted, 1);
}

/// Off by default, and then a retry is a first try: same admission, no
/// byte more.
#[test]
fn off_by_default_costs_nothing_and_retries_are_first_tries() {
    let builders: Vec<fn() -> Builder> = vec![
        || Breaker::builder().consecutive_failures(5),
        || Breaker::builder().failure_rate(0.5).count_window(20),
        || {
            Breaker::builder()
                .failure_rate(0.5)
                .time_window(Duration::from_secs(10), 10)
        },
        || Breaker::builder().consecutive_failures(5).count_calls(true),
        || Breaker::builder().consecutive_failures(5).hints(),
        || {
            Breaker::builder()
                .consecutive_failures(5)
                .slow_call_threshold(Duration::from_secs(1))
        },
    ];
    for make in builders {
        let plain = make().build().unwrap();
        assert_eq!(plain.config().retry_budget(), None);
        let off = make()
            .retry_budget(RetryBudget::finagle())
            .retry_budget_off()
            .build()
            .unwrap();
        assert_eq!(off.memory_bytes(), plain.memory_bytes());
        assert_eq!(plain.snapshot().retry_room, None);
        // A retry is admitted exactly as a first try, as often as wanted.
        for _ in 0..1_000 {
            plain.try_retry().unwrap().success();
        }
        let tokens = make().retry_budget(RetryBudget::grpc()).build().unwrap();
        let ratio = make().retry_budget(RetryBudget::finagle()).build().unwrap();
        let counters = usize::from(plain.config().counts_calls()) * 8; // the refused count
        let extra = |b: &Breaker| b.memory_bytes() - plain.memory_bytes();
        if plain.memory_bytes() == std::mem::size_of::<Breaker>() {
            // A breaker with no storage pays the allocation's header too.
            assert!(extra(&tokens) <= 8 + 24 + counters);
        } else {
            assert_eq!(extra(&tokens), 8 + counters);
            assert_eq!(extra(&ratio), 16 + counters);
        }
    }
}

/// The owned twins: an `Arc`'s and a registry handle's permits.
#[test]
fn owned_retries_follow_the_same_budget() {
    let b = Arc::new(breaker(RetryBudget::tokens(2, 1.0)));
    assert!(b.try_retry_owned().is_ok());
    b.try_acquire_owned().unwrap().failure();
    assert!(b.try_retry_owned_at(Nanos::ZERO).is_err());

    let registry = Registry::<str>::builder(
        Breaker::builder()
            .consecutive_failures(100)
            .retry_budget(RetryBudget::tokens(2, 1.0)),
    )
    .build()
    .unwrap();
    let h = registry.handle("a");
    h.try_acquire_owned().unwrap().failure();
    assert_eq!(
        h.try_retry_owned().unwrap_err().reason(),
        RejectReason::RetryBudget
    );
    // Each host has its own budget.
    assert!(registry.handle("b").try_retry_owned_at(Nanos::ZERO).is_ok());
}

#[test]
fn reject_reason_names() {
    assert_eq!(RejectReason::RetryBudget.as_str(), "retry_budget");
    let b = breaker(RetryBudget::tokens(1, 1.0));
    b.try_acquire().unwrap().failure();
    let refused = b.try_retry().unwrap_err();
    assert_eq!(refused.to_string(), "retry refused by the retry budget");
}

/// A registry forgets only what a fresh breaker would do the same: a
/// token bucket below full is refilled by successes alone, never by idle
/// time, so its breaker is not pristine and a sweep past the idle TTL keeps
/// it (until `forget_after`); forgotten, the host would come back with a
/// full bucket and its retries allowed again.
#[test]
fn a_sweep_keeps_a_drained_token_bucket() {
    let clock = ManualClock::new();
    let registry = Registry::<str>::builder(
        Breaker::builder()
            .consecutive_failures(100)
            .retry_budget(RetryBudget::tokens(2, 0.1)),
    )
    .shards(1)
    .idle_ttl(Duration::from_secs(60))
    .forget_after(Duration::from_secs(3600))
    .build_with_clock(clock.clone())
    .unwrap();
    let drained = registry.handle("drained");
    drained.try_acquire().unwrap().failure();
    drained.try_acquire().unwrap().failure();
    drained.try_acquire().unwrap().success();
    assert_eq!(drained.snapshot().retry_room, Some(0), "0.1 tokens of 2");
    drop(drained);
    let full = registry.handle("full");
    full.try_acquire().unwrap().success();
    drop(full);

    clock.advance(Duration::from_secs(61));
    assert_eq!(
        registry.sweep(usize::MAX),
        1,
        "only the full bucket's breaker goes"
    );
    let drained = registry.handle("drained");
    assert_eq!(drained.snapshot().retry_room, Some(0), "still 0.1 tokens");
    assert_eq!(
        drained.try_retry().unwrap_err().reason(),
        RejectReason::RetryBudget
    );
    drop(drained);

    // Past `forget_after` every call it saw is an hour old: forgotten.
    clock.advance(Duration::from_secs(3601));
    assert_eq!(registry.sweep(usize::MAX), 1);
    assert_eq!(registry.handle("drained").snapshot().retry_room, Some(1));
}

/// A breaker in an outlier pool keeps its token bucket as any other: its
/// verdicts go to the pool's tally and to the bucket.
#[test]
fn a_pooled_breakers_bucket_moves() {
    let registry = Registry::<str>::builder(
        Breaker::builder()
            .consecutive_failures(100)
            .retry_budget(RetryBudget::tokens(2, 1.0)),
    )
    .outliers(Outliers::new())
    .build()
    .unwrap();
    let h = registry.handle("pooled");
    assert_eq!(h.snapshot().retry_room, Some(1));
    h.try_acquire().unwrap().failure();
    assert_eq!(h.snapshot().retry_room, Some(0), "1 token of 2");
    assert_eq!(
        h.try_retry().unwrap_err().reason(),
        RejectReason::RetryBudget
    );
    h.try_acquire().unwrap().success();
    assert_eq!(h.snapshot().retry_room, Some(1), "a success gives one back");
    assert!(h.try_retry().is_ok());
}
