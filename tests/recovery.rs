//! Recovery (issue 27): slow start after a close (the ramp), the half-open
//! rate rule, the upstream's hints, and a backoff that decays while healthy.
//! Every clock here is a `ManualClock`.

use std::time::Duration;

use failfast::{Breaker, Builder, ManualClock, Nanos, Reason, RejectReason, State};
use proptest::prelude::*;

const OPEN: Duration = Duration::from_secs(10);
const WINDOW: Duration = Duration::from_secs(30);

fn secs(s: u64) -> Nanos {
    Nanos::from_secs(s)
}

/// Trips `b` with one failure at `at`; the breaker must trip on one.
fn trip_at(b: &Breaker<ManualClock>, at: Nanos) {
    b.try_acquire_at(at).expect("closed").failure_at(at);
    assert_eq!(b.state(), State::Open);
}

/// Trips `b` at `at`, then closes it with one probe at the end of its open
/// period; returns the instant of the close.
fn trip_and_recover(b: &Breaker<ManualClock>, at: Nanos) -> Nanos {
    trip_at(b, at);
    let open_for = b.snapshot_at(at).retry_after.expect("open");
    let close = at + open_for;
    b.try_acquire_at(close)
        .expect("the probe")
        .success_at(close);
    assert_eq!(b.state(), State::Closed);
    close
}

// ===== The ramp =====

fn ramping(clock: &ManualClock) -> Breaker<ManualClock> {
    Breaker::builder()
        .consecutive_failures(1)
        .open_duration(OPEN)
        .ramp(WINDOW)
        .build_with_clock(clock.clone())
        .unwrap()
}

/// Envoy's default curve, `max(0.1, t / window)`, averaged over `[a, b]`
/// (fractions of the window), by a fine sum.
fn mean_curve(a: f64, b: f64) -> f64 {
    let n = 10_000;
    (0..n)
        .map(|i| {
            let t = a + (b - a) * (i as f64 + 0.5) / n as f64;
            t.max(0.1)
        })
        .sum::<f64>()
        / n as f64
}

#[test]
fn the_admitted_share_tracks_envoys_curve_within_two_points_at_ten_points() {
    let clock = ManualClock::new();
    let b = ramping(&clock);
    let close = trip_and_recover(&b, Nanos::ZERO);
    clock.set(close);
    let calls = 10_000u32;
    let step = WINDOW / calls;
    let mut admitted = [0u32; 10];
    for i in 0..calls {
        if let Ok(permit) = b.try_acquire() {
            permit.success();
            admitted[(i * 10 / calls) as usize] += 1;
        }
        clock.advance(step);
    }
    for (decile, &n) in admitted.iter().enumerate() {
        let share = f64::from(n) / f64::from(calls / 10);
        let curve = mean_curve(decile as f64 / 10.0, (decile + 1) as f64 / 10.0);
        assert!(
            (share - curve).abs() <= 0.02,
            "decile {decile}: admitted {share:.3}, curve {curve:.3}"
        );
    }
    assert_eq!(b.snapshot().ramp_fraction, None, "the window is over");
    assert!((0..100).all(|_| b.try_acquire().map(|p| p.success()).is_ok()));
}

#[test]
fn a_ramp_rejection_says_ramp_and_waits_one_step_of_the_curve() {
    let clock = ManualClock::new();
    let b = ramping(&clock);
    let close = trip_and_recover(&b, Nanos::ZERO);
    let rejected = (0..100)
        .find_map(|_| b.try_acquire_at(close).err())
        .expect("at 10 %, most calls are turned away");
    assert_eq!(rejected.reason(), RejectReason::Ramp);
    // 30 s over the curve's 128 steps: 234.375 ms.
    assert_eq!(rejected.retry_after(), Some(WINDOW.div_f64(128.0)));
    let snapshot = b.snapshot_at(close + Duration::from_secs(15));
    assert_eq!(snapshot.state, State::Closed);
    let fraction = snapshot.ramp_fraction.expect("ramping");
    assert!((fraction - 0.5).abs() < 0.01, "{fraction}");
}

#[test]
fn without_a_ramp_every_call_is_admitted_at_once_after_the_close() {
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(OPEN)
        .build_with_clock(clock.clone())
        .unwrap();
    let close = trip_and_recover(&b, Nanos::ZERO);
    assert!((0..1000).all(|_| b.try_acquire_at(close).map(|p| p.success()).is_ok()));
    assert_eq!(b.snapshot_at(close).ramp_fraction, None);
}

#[test]
fn a_trip_during_the_ramp_is_a_failed_recovery_and_takes_the_next_backoff_step() {
    let clock = ManualClock::new();
    let b = ramping(&clock);
    let close = trip_and_recover(&b, Nanos::ZERO);
    let during = close + Duration::from_secs(5);
    let permit = (0..100)
        .find_map(|_| b.try_acquire_at(during).ok())
        .expect("some calls get in");
    let t = permit.failure_at(during).expect("trips");
    assert_eq!((t.from, t.to), (State::Closed, State::Open));
    assert_eq!(t.trips_in_a_row, 2, "the step after the first trip's");
    assert_eq!(t.open_for, Some(OPEN * 2));
}

#[test]
fn a_trip_after_the_ramp_is_an_ordinary_one() {
    let clock = ManualClock::new();
    let b = ramping(&clock);
    let close = trip_and_recover(&b, Nanos::ZERO);
    // Past the window (30 s = 3 base periods of healthy time): the step
    // decays to the base before the trip adds one.
    let after = close + WINDOW + Duration::from_secs(1);
    let t = b
        .try_acquire_at(after)
        .expect("the ramp is over")
        .failure_at(after)
        .expect("trips");
    assert_eq!(t.trips_in_a_row, 1);
}

#[test]
fn the_ramp_is_configured_and_refused_by_field() {
    // The field a consecutive-failures breaker with `ramp` is refused on.
    let refused = |ramp: fn(Builder) -> Builder| {
        ramp(Breaker::builder().consecutive_failures(1))
            .build()
            .unwrap_err()
            .field()
    };
    assert_eq!(
        refused(|b| b.ramp(Duration::from_micros(10))),
        "ramp.window"
    );
    assert_eq!(
        refused(|b| b.ramp_curve(WINDOW, 1.5, 1.0)),
        "ramp.min_fraction"
    );
    assert_eq!(
        refused(|b| b.ramp_curve(WINDOW, 0.1, 0.0)),
        "ramp.aggression"
    );
    let config = Builder::new()
        .consecutive_failures(1)
        .ramp(WINDOW)
        .build_config()
        .unwrap();
    assert_eq!(config.ramp(), Some((WINDOW, 0.1, 1.0)));
}

// ===== The half-open rate rule =====

fn rule_breaker(clock: &ManualClock) -> Breaker<ManualClock> {
    Breaker::builder()
        .consecutive_failures(1)
        .open_duration(OPEN)
        .half_open_probes(10)
        .half_open_failure_rate(0.5)
        .build_with_clock(clock.clone())
        .unwrap()
}

/// Runs a round of 10 probes at `at` on `b`, `failures` of them failing
/// (the first ones), and returns the transitions they caused.
fn round(b: &Breaker<ManualClock>, at: Nanos, failures: usize) -> Vec<failfast::Transition> {
    let probes: Vec<_> = (0..10)
        .map(|_| b.try_acquire_at(at).expect("a probe slot"))
        .collect();
    assert!(b.try_acquire_at(at).is_err(), "the round holds 10");
    let mut transitions = Vec::new();
    for (i, probe) in probes.into_iter().enumerate() {
        let t = if i < failures {
            probe.failure_at(at)
        } else {
            probe.success_at(at)
        };
        transitions.extend(t);
    }
    transitions
}

#[test]
fn a_round_of_ten_with_one_failure_closes_at_a_threshold_of_one_half() {
    let clock = ManualClock::new();
    let b = rule_breaker(&clock);
    trip_at(&b, Nanos::ZERO);
    let t = round(&b, secs(10), 1);
    assert_eq!(t.len(), 1, "{t:?}");
    assert_eq!(
        (t[0].to, t[0].reason),
        (State::Closed, Reason::ProbesSucceeded)
    );
    // Decided as soon as certain: after the failure, the sixth success
    // leaves three answers to come, and 1 + 3 failures cannot reach five.
    // The three probes still out are then of a closed round (stale).
    assert_eq!(t[0].probe_successes, 6);
}

#[test]
fn a_round_of_ten_with_five_failures_reopens_at_the_fifth() {
    let clock = ManualClock::new();
    let b = rule_breaker(&clock);
    trip_at(&b, Nanos::ZERO);
    let t = round(&b, secs(10), 5);
    assert_eq!(t.len(), 1, "{t:?}");
    assert_eq!((t[0].to, t[0].reason), (State::Open, Reason::ProbeFailed));
    assert_eq!(t[0].trips_in_a_row, 2);
}

#[test]
fn without_the_rule_one_failed_probe_reopens_the_round() {
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(OPEN)
        .half_open_probes(10)
        .build_with_clock(clock.clone())
        .unwrap();
    trip_at(&b, Nanos::ZERO);
    let t = round(&b, secs(10), 1);
    assert_eq!((t[0].to, t[0].reason), (State::Open, Reason::ProbeFailed));
}

#[test]
fn a_dropped_or_ignored_probe_counts_toward_neither_rate() {
    let clock = ManualClock::new();
    let b = rule_breaker(&clock);
    trip_at(&b, Nanos::ZERO);
    let at = secs(10);
    // Two probes go away early (dropped unanswered, neutral), one is a
    // business error: their slots are freed for three more.
    let early: Vec<_> = (0..3).map(|_| b.try_acquire_at(at).unwrap()).collect();
    let mut early = early.into_iter();
    drop(early.next());
    early.next().unwrap().ignore_at(at);
    early
        .next()
        .unwrap()
        .record_at(failfast::Outcome::Neutral, at);
    // Ten answered probes, four failing: 40 % < 50 %.
    let t = round(&b, at, 4);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].to, State::Closed);
}

#[test]
fn probes_still_out_when_the_lease_ends_count_as_failures() {
    // Five answered well; two, or five, still out (three slots never taken
    // in the first case: a round undecided with every slot taken always
    // fails at the lease, its probes out being enough to fail it).
    for (answered_ok, out, reopens) in [(5, 2, false), (5, 5, true)] {
        let clock = ManualClock::new();
        let b = rule_breaker(&clock);
        trip_at(&b, Nanos::ZERO);
        let at = secs(10);
        let probes: Vec<_> = (0..answered_ok + out)
            .map(|_| b.try_acquire_at(at).unwrap())
            .collect();
        let mut probes = probes.into_iter();
        for p in probes.by_ref().take(answered_ok) {
            assert!(p.success_at(at).is_none());
        }
        let hung: Vec<_> = probes.collect();
        assert_eq!(hung.len(), out);
        // The lease (the default: 30 s) ends with `out` probes out.
        let late = at + b.config().probe_lease();
        let next = b.try_acquire_at(late);
        if reopens {
            let rejected = next.expect_err("five failures of ten: the round reopens");
            assert_eq!(rejected.reason(), RejectReason::Open);
            assert_eq!(b.state(), State::Open);
            assert_eq!(b.snapshot_at(late).trips_in_a_row, 2);
        } else {
            let probe = next.expect("two of ten: a new round starts");
            assert!(probe.is_probe());
            assert_eq!(b.state(), State::HalfOpen);
        }
        drop(hung);
    }
}

#[test]
fn the_rule_allows_at_most_31_probes_and_a_slow_rate_needs_a_threshold() {
    let err = Breaker::builder()
        .consecutive_failures(1)
        .half_open_probes(32)
        .half_open_rate_rule()
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "half_open_probes");
    assert!(err.to_string().contains("1..=31"), "{err}");
    assert!(Breaker::builder()
        .consecutive_failures(1)
        .half_open_probes(31)
        .half_open_rate_rule()
        .build()
        .is_ok());
    let err = Breaker::builder()
        .consecutive_failures(1)
        .half_open_slow_call_rate(0.5)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "slow_call_threshold");
    let config = Builder::new()
        .failure_rate(0.25)
        .half_open_probes(8)
        .half_open_rate_rule()
        .build_config()
        .unwrap();
    assert_eq!(
        config.half_open_rates(),
        Some((0.25, None)),
        "the closed state's thresholds"
    );
}

#[test]
fn slow_probes_reopen_on_the_slow_call_rate() {
    let clock = ManualClock::new();
    let b = Breaker::builder()
        .consecutive_failures(1)
        .slow_call_threshold(Duration::from_secs(1))
        .open_duration(OPEN)
        .half_open_probes(4)
        .half_open_slow_call_rate(0.5)
        .build_with_clock(clock.clone())
        .unwrap();
    trip_at(&b, Nanos::ZERO);
    let at = secs(10);
    let probes: Vec<_> = (0..4).map(|_| b.try_acquire_at(at).unwrap()).collect();
    let slow = at + Duration::from_secs(2);
    let mut transitions = Vec::new();
    for p in probes {
        transitions.extend(p.success_at(slow));
    }
    assert_eq!(transitions.len(), 1);
    assert_eq!(
        (transitions[0].to, transitions[0].reason),
        (State::Open, Reason::ProbeSlow)
    );
}

// ===== Hints =====

fn hinted(clock: &ManualClock, builder: Builder) -> Breaker<ManualClock> {
    builder
        .consecutive_failures(2)
        .open_duration(OPEN)
        .build_with_clock(clock.clone())
        .unwrap()
}

/// The open period of the trip `b` is in at `at`.
fn open_for(b: &Breaker<ManualClock>, at: Nanos) -> Duration {
    b.snapshot_at(at).retry_after.expect("open")
}

#[test]
fn a_hinted_trip_opens_for_the_hint_clamped_to_open_duration_and_max_hint() {
    for (hint, expected) in [
        (Duration::from_secs(3), OPEN), // shorter than the schedule
        (OPEN, OPEN),                   // as long: the schedule's, exactly
        (Duration::from_secs(120), Duration::from_secs(120)),
        (Duration::from_secs(3600), Duration::from_secs(600)), // max_hint
    ] {
        let clock = ManualClock::new();
        let b = hinted(&clock, Builder::new().hints());
        b.try_acquire_at(Nanos::ZERO)
            .unwrap()
            .failure_at(Nanos::ZERO);
        let t = b
            .try_acquire_at(Nanos::ZERO)
            .unwrap()
            .record_hinted_at(failfast::Outcome::Failure, Some(hint), Nanos::ZERO)
            .expect("trips");
        let open = open_for(&b, Nanos::ZERO);
        assert!(
            open >= expected && open < expected + Duration::from_millis(17),
            "hint {hint:?}: open {open:?}"
        );
        if hint <= OPEN {
            // No span: the schedule's own period, not rounded to 2^24 ns.
            assert_eq!(open, OPEN, "hint {hint:?}");
        }
        assert_eq!(t.open_for, Some(open));
        let rejected = b.try_acquire_at(secs(1)).unwrap_err();
        assert_eq!(rejected.retry_after(), Some(open - Duration::from_secs(1)));
    }
}

#[test]
fn a_hint_that_does_not_trip_lengthens_only_the_next_trip_and_never_rejects() {
    let clock = ManualClock::new();
    let b = hinted(&clock, Builder::new().hints());
    let hint = Some(Duration::from_secs(120));
    b.try_acquire_at(Nanos::ZERO).unwrap().record_hinted_at(
        failfast::Outcome::Failure,
        hint,
        Nanos::ZERO,
    );
    assert_eq!(b.state(), State::Closed);
    assert!(
        b.try_acquire_at(secs(1)).is_ok(),
        "a hint never rejects while Closed"
    );
    // The next trip, a failure with no hint, 10 s on: 110 s of the hint left.
    b.try_acquire_at(secs(10)).unwrap().failure_at(secs(10));
    let open = open_for(&b, secs(10));
    assert!(open >= Duration::from_secs(110), "{open:?}");
    // Recover; the trip after carries no hint any more.
    let close = secs(10) + open;
    b.try_acquire_at(close).unwrap().success_at(close);
    b.try_acquire_at(close).unwrap().failure_at(close);
    b.try_acquire_at(close).unwrap().failure_at(close);
    assert!(open_for(&b, close) <= OPEN * 2, "{:?}", open_for(&b, close));
}

#[test]
fn an_elapsed_hint_is_forgotten_and_the_latest_hint_wins() {
    let clock = ManualClock::new();
    let b = hinted(&clock, Builder::new().hints());
    let f = failfast::Outcome::Failure;
    b.try_acquire_at(Nanos::ZERO).unwrap().record_hinted_at(
        f,
        Some(Duration::from_secs(60)),
        Nanos::ZERO,
    );
    // 70 s later the hint has elapsed.
    b.try_acquire_at(secs(70)).unwrap().failure_at(secs(70));
    assert_eq!(open_for(&b, secs(70)), OPEN);

    let b = hinted(&clock, Builder::new().hints());
    b.try_acquire_at(Nanos::ZERO).unwrap().record_hinted_at(
        f,
        Some(Duration::from_secs(300)),
        Nanos::ZERO,
    );
    // A later, shorter hint replaces it.
    let t = b
        .try_acquire_at(Nanos::ZERO)
        .unwrap()
        .record_hinted_at(f, Some(Duration::from_secs(40)), Nanos::ZERO)
        .expect("trips");
    let open = t.open_for.unwrap();
    assert!(open >= Duration::from_secs(40) && open < Duration::from_secs(41));
}

#[test]
fn hints_work_with_backoff_off_and_not_at_all_when_off() {
    let clock = ManualClock::new();
    let hint = Some(Duration::from_secs(90));
    let f = failfast::Outcome::Failure;
    let b = hinted(&clock, Builder::new().hints().backoff_off());
    b.try_acquire_at(Nanos::ZERO)
        .unwrap()
        .failure_at(Nanos::ZERO);
    b.try_acquire_at(Nanos::ZERO)
        .unwrap()
        .record_hinted_at(f, hint, Nanos::ZERO);
    assert!(open_for(&b, Nanos::ZERO) >= Duration::from_secs(90));

    let b = hinted(&clock, Builder::new().hints_off());
    b.try_acquire_at(Nanos::ZERO)
        .unwrap()
        .failure_at(Nanos::ZERO);
    b.try_acquire_at(Nanos::ZERO)
        .unwrap()
        .record_hinted_at(f, hint, Nanos::ZERO);
    assert_eq!(open_for(&b, Nanos::ZERO), OPEN, "a tripping hint, off");
    assert_eq!(b.config().max_hint(), None);
    let off = Builder::new().hints().hints_off().consecutive_failures(1);
    assert_eq!(off.build_config().unwrap().max_hint(), None);
}

// ===== A tripping verdict's own hint, by default =====

/// With every setting at its default but the trip condition, the hint of
/// the verdict that trips sets the open period's floor, clamped to [the
/// schedule's step, 10 min], and a hint that does not trip is not
/// remembered (that costs a slot: `hints()`).
#[test]
fn by_default_a_tripping_verdicts_hint_sets_the_open_period_within_the_step_and_10_min() {
    let f = failfast::Outcome::Failure;
    let step = Builder::new()
        .consecutive_failures(1)
        .build_config()
        .unwrap()
        .open_duration(1);
    for (hint, expected) in [
        (Duration::from_secs(120), Duration::from_secs(120)),
        (Duration::from_secs(3600), Duration::from_secs(600)), // 10 min
        (Duration::from_millis(10), step),                     // the step
    ] {
        let b = Breaker::builder()
            .consecutive_failures(1)
            .build_with_clock(ManualClock::new())
            .unwrap();
        let t = b
            .try_acquire_at(Nanos::ZERO)
            .unwrap()
            .record_hinted_at(f, Some(hint), Nanos::ZERO)
            .expect("trips");
        let open = t.open_for.expect("open");
        assert!(
            open >= expected && open < expected + Duration::from_millis(17),
            "hint {hint:?}: open {open:?}"
        );
        let rejected = b.try_acquire_at(Nanos::from_millis(500)).unwrap_err();
        assert_eq!(
            rejected.retry_after(),
            Some(open - Duration::from_millis(500))
        );
        // No slot: the default breaker's memory is that of a breaker that
        // takes no hint.
        let off = Breaker::builder()
            .consecutive_failures(1)
            .hints_off()
            .build()
            .unwrap();
        assert_eq!(b.memory_bytes(), off.memory_bytes());
    }
    // A probe that fails with a hint reopens for it, too.
    let b = Breaker::builder()
        .consecutive_failures(1)
        .build_with_clock(ManualClock::new())
        .unwrap();
    trip_at(&b, Nanos::ZERO);
    let probe_at = Nanos::ZERO + step;
    let t = b
        .try_acquire_at(probe_at)
        .unwrap()
        .record_hinted_at(f, Some(Duration::from_secs(200)), probe_at)
        .expect("reopens");
    assert_eq!((t.from, t.to), (State::HalfOpen, State::Open));
    assert!(t.open_for.unwrap() >= Duration::from_secs(200));
}

/// The default takes no hint that does not trip: the next trip opens for
/// the schedule alone.
#[test]
fn by_default_a_hint_that_does_not_trip_is_not_remembered() {
    let f = failfast::Outcome::Failure;
    let b = Breaker::builder()
        .consecutive_failures(2)
        .build_with_clock(ManualClock::new())
        .unwrap();
    assert!(!b.config().remembers_hints());
    b.try_acquire_at(Nanos::ZERO).unwrap().record_hinted_at(
        f,
        Some(Duration::from_secs(120)),
        Nanos::ZERO,
    );
    assert_eq!(b.state(), State::Closed);
    let t = b
        .try_acquire_at(Nanos::ZERO)
        .unwrap()
        .failure_at(Nanos::ZERO)
        .expect("the second failure trips");
    assert_eq!(t.open_for, Some(b.config().open_duration(1)));
}

#[test]
fn record_hinted_reads_the_breakers_clock_and_returns_the_trip() {
    let clock = ManualClock::new();
    clock.set(secs(50));
    let b = hinted(&clock, Builder::new().hints());
    b.try_acquire().unwrap().failure();
    let t = b
        .try_acquire()
        .unwrap()
        .record_hinted(failfast::Outcome::Failure, Some(Duration::from_secs(120)))
        .expect("the second failure trips");
    assert_eq!(t.at, secs(50));
    assert!(t.open_for.unwrap() >= Duration::from_secs(120));
    // Without a hint, record_hinted is record.
    let b = hinted(&clock, Builder::new().hints());
    b.try_acquire().unwrap().failure();
    let t = b
        .try_acquire()
        .unwrap()
        .record_hinted(failfast::Outcome::Failure, None)
        .expect("trips");
    assert_eq!(t.open_for, Some(OPEN));
}

#[test]
fn a_trip_takes_the_remembered_hint_with_it() {
    let clock = ManualClock::new();
    let b = hinted(&clock, Builder::new().hints());
    let f = failfast::Outcome::Failure;
    b.try_acquire_at(Nanos::ZERO)
        .unwrap()
        .failure_at(Nanos::ZERO);
    b.try_acquire_at(Nanos::ZERO).unwrap().record_hinted_at(
        f,
        Some(Duration::from_secs(300)),
        Nanos::ZERO,
    );
    assert!(open_for(&b, Nanos::ZERO) >= Duration::from_secs(300));
    // An operator resets it at once; the next trip, with 290 s of the old
    // hint still to run, is an ordinary one: the hint went with its trip.
    b.reset_at(secs(10));
    b.try_acquire_at(secs(10)).unwrap().failure_at(secs(10));
    b.try_acquire_at(secs(10)).unwrap().failure_at(secs(10));
    assert_eq!(open_for(&b, secs(10)), OPEN);
}

#[test]
fn max_hint_and_the_ramp_window_are_refused_just_past_their_limits() {
    let build = |b: Builder| b.consecutive_failures(1).build_config();
    let hours = |h: u64| Duration::from_secs(h * 3600);
    assert!(build(Builder::new().max_hint(hours(39))).is_ok());
    let err = build(Builder::new().max_hint(hours(39) + Duration::from_secs(1))).unwrap_err();
    assert_eq!(err.field(), "max_hint");
    assert_eq!(
        build(Builder::new().max_hint(Duration::ZERO))
            .unwrap_err()
            .field(),
        "max_hint"
    );
    assert!(build(Builder::new().ramp(Duration::from_millis(1))).is_ok());
    let err = build(Builder::new().ramp(Duration::from_micros(999))).unwrap_err();
    assert_eq!(err.field(), "ramp.window");
    assert!(build(Builder::new().ramp(Duration::from_secs(86_400))).is_ok());
    let err = build(Builder::new().ramp(Duration::from_secs(86_401))).unwrap_err();
    assert_eq!(err.field(), "ramp.window");
}

#[test]
fn a_probe_that_fails_with_a_hint_reopens_for_the_hint() {
    let clock = ManualClock::new();
    let b = hinted(&clock, Builder::new().hints());
    b.try_acquire_at(Nanos::ZERO)
        .unwrap()
        .failure_at(Nanos::ZERO);
    b.try_acquire_at(Nanos::ZERO)
        .unwrap()
        .failure_at(Nanos::ZERO);
    let t = b
        .try_acquire_at(secs(10))
        .unwrap()
        .record_hinted_at(
            failfast::Outcome::Failure,
            Some(Duration::from_secs(200)),
            secs(10),
        )
        .expect("reopens");
    assert_eq!((t.from, t.to), (State::HalfOpen, State::Open));
    assert!(t.open_for.unwrap() >= Duration::from_secs(200));
}

proptest! {
    /// Whatever the hints and their timing, a trip opens for at least the
    /// schedule's period and at most the longer of that and `max_hint`; a
    /// hint that elapsed before the trip adds nothing.
    #[test]
    fn the_open_time_stays_within_the_clamp_and_never_grows_from_an_elapsed_hint(
        hint_secs in 0u64..100_000,
        hint_at in 0u64..1000,
        trip_after in 0u64..2000,
        max_hint_secs in 1u64..3600,
        backoff_off in any::<bool>(),
    ) {
        let clock = ManualClock::new();
        let mut builder = Builder::new().max_hint(Duration::from_secs(max_hint_secs));
        if backoff_off {
            builder = builder.backoff_off();
        }
        let b = hinted(&clock, builder);
        let hint = Duration::from_secs(hint_secs);
        let at = secs(hint_at);
        b.try_acquire_at(at).unwrap().record_hinted_at(failfast::Outcome::Failure, Some(hint), at);
        let trip = secs(hint_at + trip_after);
        b.try_acquire_at(trip).unwrap().failure_at(trip);
        let open = open_for(&b, trip);
        let schedule = OPEN;
        let max = Duration::from_secs(max_hint_secs);
        prop_assert!(open >= schedule, "{:?}", open);
        prop_assert!(open <= schedule.max(max) + Duration::from_millis(17), "{:?}", open);
        let left = (at + hint.min(max)).saturating_duration_since(trip);
        if left.is_zero() {
            prop_assert_eq!(open, schedule, "an elapsed hint");
        } else {
            prop_assert!(open >= left.max(schedule));
        }
    }
}

// ===== Backoff decay =====

#[test]
fn over_an_hour_a_flapping_host_keeps_long_open_periods_and_a_steady_one_returns_to_the_base() {
    let config = || {
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(OPEN)
            .backoff(2.0, Duration::from_secs(300))
    };
    let clock = ManualClock::new();
    let flapping = config().build_with_clock(clock.clone()).unwrap();
    let steady = config().build_with_clock(clock.clone()).unwrap();
    let mut flaps = Vec::new();
    // The flapping host trips again 5 s after each recovery, for an hour.
    let mut now = Nanos::ZERO;
    while now < secs(3600) {
        let close = trip_and_recover(&flapping, now);
        flaps.push(flapping.snapshot_at(close).backoff_step);
        now = close + Duration::from_secs(5);
    }
    assert!(
        flaps.windows(2).all(|w| w[1] >= w[0]),
        "the step never falls while the host flaps: {flaps:?}"
    );
    let last = *flaps.last().unwrap();
    assert_eq!(
        flapping.config().open_duration(last + 1),
        Duration::from_secs(300),
        "the flapping host opens for the cap"
    );
    // The steady host trips twice, an hour apart, healthy in between.
    let close = trip_and_recover(&steady, Nanos::ZERO);
    let close = trip_and_recover(&steady, close); // again at once: step 2
    assert_eq!(steady.snapshot_at(close).backoff_step, 2);
    assert_eq!(
        steady.snapshot_at(close + OPEN).backoff_step,
        1,
        "one base period: one step off"
    );
    let later = close + Duration::from_secs(3600);
    assert_eq!(steady.snapshot_at(later).backoff_step, 0);
    assert!(steady.is_pristine_at(later));
    assert!(
        !steady.is_pristine_at(close),
        "not pristine while it decays"
    );
    trip_at(&steady, later);
    assert_eq!(open_for(&steady, later), OPEN, "back to the base");
}

/// The first backoff step that opens for the cap.
fn cap_step(b: &Breaker<ManualClock>) -> u32 {
    let c = b.config();
    (1..=63)
        .find(|&k| c.open_duration(k) == c.open_duration_cap())
        .expect("a schedule reaches its cap")
}

/// A long flap, on the default schedule and on 10 s ×2 up to 80 s: the host
/// trips again the moment each probe closes it, 30 times. The step stops at
/// the cap's (Envoy's multiplier does), so `cap step × base` of health
/// brings the open period back to the base; a step that had counted on to
/// 30 would still open for the cap after twice that.
#[test]
fn after_a_long_flap_cap_step_base_periods_of_health_bring_back_the_base() {
    for builder in [
        Breaker::builder().consecutive_failures(1),
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_secs(10))
            .backoff(2.0, Duration::from_secs(80)),
    ] {
        let make = || {
            builder
                .clone()
                .build_with_clock(ManualClock::new())
                .unwrap()
        };
        let b = make();
        let (cap, base) = (cap_step(&b), b.config().open_duration_base());
        let mut close = Nanos::ZERO;
        for flap in 1..=30u32 {
            close = trip_and_recover(&b, close);
            assert_eq!(
                b.snapshot_at(close).backoff_step,
                flap.min(cap),
                "flap {flap}"
            );
        }
        let schedule = b.config();
        assert_eq!(schedule.open_duration(cap), schedule.open_duration_cap());
        // One base period short of cap step × base: one step above the base.
        let trip = |healthy: u32| {
            let b = make();
            let mut close = Nanos::ZERO;
            for _ in 0..30 {
                close = trip_and_recover(&b, close);
            }
            let at = close + base * healthy;
            trip_at(&b, at);
            open_for(&b, at)
        };
        assert_eq!(trip(cap - 1), schedule.open_duration(2));
        assert_eq!(trip(cap), base, "{cap} base periods of health");
        assert_eq!(trip(2 * cap), base);
    }
}

/// The default open period is short (1 s), the default probe lease is not
/// (30 s): a probe that takes 2.5 s to answer, as a healthy but slow
/// upstream does, closes the breaker; a lease as short as the period would
/// supersede its round before it answered, and no probe slower than 1 s
/// could ever close it.
#[test]
fn under_the_default_schedule_a_probe_slower_than_the_open_period_closes_the_breaker() {
    let b = Breaker::builder()
        .consecutive_failures(1)
        .build_with_clock(ManualClock::new())
        .unwrap();
    trip_at(&b, Nanos::ZERO);
    let at = Nanos::ZERO + b.config().open_duration(1);
    let probe = b.try_acquire_at(at).expect("the probe");
    for waited in [500, 1_000, 2_000] {
        let later = at + Duration::from_millis(waited);
        let rejected = b.try_acquire_at(later).unwrap_err();
        assert_eq!(rejected.reason(), RejectReason::HalfOpenFull, "{waited} ms");
    }
    let answered = at + Duration::from_millis(2_500);
    let t = probe.success_at(answered).expect("closes");
    assert_eq!((t.to, t.reason), (State::Closed, Reason::ProbesSucceeded));
}
