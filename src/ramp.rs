//! Slow start after a recovery: the share of calls a breaker admits while it
//! ramps up, and which calls those are.
//!
//! When a probe round closes a breaker that has a ramp, the breaker admits a
//! rising fraction of calls over the ramp window and turns the rest away
//! ([`RejectReason::Ramp`](crate::RejectReason::Ramp)), so an upstream that
//! has just come back, with cold caches and a backlog in front of it, is not
//! handed all of its traffic at once.
//!
//! # The curve
//!
//! Envoy's slow-start curve: at time `t` into a window `w`, the fraction is
//! `max(min_fraction, (t / w)^(1 / aggression))`. With Envoy's defaults
//! (aggression 1.0, minimum 10 %) it rises in a line from 10 % to 100 %; an
//! aggression above 1 admits more early, below 1 less. The curve is computed
//! once, when the configuration is built, into a table of [`STEPS`] values,
//! each the curve at the middle of its step: a call pays one division and a
//! table read, never a `powf`.
//!
//! # Which calls get in
//!
//! Without an RNG, and without hashing the time alone (calls at one instant
//! would all decide alike): each thread counts the ramp admissions it has
//! decided (a thread-local counter, touched only during a ramp), and the
//! call with turn `n` gets in when the `n`th point of a Weyl sequence,
//! `frac(n · φ + id · φ²)`, lies below the fraction. The points of a Weyl
//! sequence, and of any arithmetic progression of it, spread evenly over
//! `[0, 1)`: a thread that alternates between two ramping breakers still
//! admits each one's share, where a plain counter (admit every `1/f`th)
//! would starve one of them. The breaker's id shifts its sequence so that
//! breakers ramping together do not admit in step.

use crate::sync::RAMP_TURN;
use core::time::Duration;

/// Steps in the precomputed curve.
pub(crate) const STEPS: usize = 128;

/// The fixed-point unit of a fraction: 1.0 is `ONE`.
pub(crate) const ONE: u32 = 1 << 16;

/// A ramp's precomputed curve.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Ramp {
    /// The window, in nanoseconds (at least [`STEPS`]).
    window_nanos: u64,
    /// One step of the curve: `window_nanos / STEPS`, rounded up.
    step_nanos: u64,
    /// The fraction admitted in each step, in units of `1 / ONE`.
    table: [u32; STEPS],
    pub(crate) window: Duration,
    pub(crate) min_fraction: f64,
    pub(crate) aggression: f64,
}

impl Ramp {
    /// Envoy's default aggression: a straight line.
    pub(crate) const DEFAULT_AGGRESSION: f64 = 1.0;
    /// Envoy's default floor (`min_weight_percent`, 10 %).
    pub(crate) const DEFAULT_MIN_FRACTION: f64 = 0.1;

    /// The curve for a validated window (≥ 1 ms), floor in `[0, 1]` and
    /// aggression in `(0, 100]` (checked by the builder).
    pub(crate) fn new(window: Duration, min_fraction: f64, aggression: f64) -> Ramp {
        let window_nanos = u64::try_from(window.as_nanos())
            .unwrap_or(u64::MAX)
            .max(STEPS as u64);
        let step_nanos = window_nanos.div_ceil(STEPS as u64);
        let mut table = [0; STEPS];
        for (i, slot) in table.iter_mut().enumerate() {
            let t = (i as f64 + 0.5) / STEPS as f64;
            *slot = to_fixed(curve(t, min_fraction, aggression));
        }
        Ramp {
            window_nanos,
            step_nanos,
            table,
            window,
            min_fraction,
            aggression,
        }
    }

    /// The fraction admitted `elapsed` nanoseconds after the close, in
    /// units of `1 / ONE`; `None` once the window has passed.
    #[inline]
    pub(crate) fn fraction_at(&self, elapsed: u64) -> Option<u32> {
        if elapsed >= self.window_nanos {
            return None;
        }
        // elapsed < window ≤ STEPS · step, so the index is below STEPS.
        self.table
            .get((elapsed / self.step_nanos) as usize)
            .copied()
    }

    /// One step of the curve: how long a turned-away call is told to wait.
    #[inline]
    pub(crate) fn step_nanos(&self) -> u64 {
        self.step_nanos
    }

    /// The window, in nanoseconds.
    #[inline]
    pub(crate) fn window_nanos(&self) -> u64 {
        self.window_nanos
    }
}

/// The curve at `t` (a fraction of the window, in `[0, 1]`).
pub(crate) fn curve(t: f64, min_fraction: f64, aggression: f64) -> f64 {
    t.powf(1.0 / aggression).max(min_fraction).min(1.0)
}

fn to_fixed(fraction: f64) -> u32 {
    (fraction * f64::from(ONE))
        .round()
        .clamp(0.0, f64::from(ONE)) as u32
}

/// Whether the call with turn `turn` of a breaker with jitter seed `seed`
/// gets in at `fraction` (pure): the turn's point of the breaker's Weyl
/// sequence lies below the fraction.
#[inline]
pub(crate) fn admits(turn: u32, seed: u32, fraction: u32) -> bool {
    // 2³² / φ and 2³² / φ², odd: multiplying by them walks the circle in
    // steps that never fall into a short cycle.
    const PHI: u32 = 0x9E37_79B9;
    const PHI2: u32 = 0x61C8_8647;
    let point = turn.wrapping_mul(PHI).wrapping_add(seed.wrapping_mul(PHI2));
    (point >> 16) < fraction
}

/// This thread's next turn (a ramp admission it decides).
#[inline]
pub(crate) fn next_turn() -> u32 {
    RAMP_TURN.with(|turn| {
        let n = turn.get();
        turn.set(n.wrapping_add(1));
        n
    })
}

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;

    fn ramp() -> Ramp {
        Ramp::new(
            Duration::from_secs(30),
            Ramp::DEFAULT_MIN_FRACTION,
            Ramp::DEFAULT_AGGRESSION,
        )
    }

    #[test]
    fn the_default_curve_is_a_line_from_the_floor_to_one() {
        let r = ramp();
        let at = |secs: f64| r.fraction_at((secs * 1e9) as u64).unwrap();
        assert_eq!(at(0.0), to_fixed(0.1), "the floor");
        assert_eq!(at(1.0), to_fixed(0.1), "still the floor at 1/30");
        let mid = f64::from(at(15.0)) / f64::from(ONE);
        assert!((mid - 0.5).abs() < 0.01, "{mid}");
        assert!(at(29.99) > to_fixed(0.99));
        assert_eq!(r.fraction_at(30_000_000_000), None, "the window is over");
    }

    #[test]
    fn aggression_bends_the_curve() {
        let eager = Ramp::new(Duration::from_secs(10), 0.0, 4.0);
        let shy = Ramp::new(Duration::from_secs(10), 0.0, 0.5);
        let quarter = 2_500_000_000;
        let f = |r: &Ramp| f64::from(r.fraction_at(quarter).unwrap()) / f64::from(ONE);
        assert!(
            (f(&eager) - 0.25f64.powf(0.25)).abs() < 0.01,
            "{}",
            f(&eager)
        );
        assert!((f(&shy) - 0.0625).abs() < 0.01, "{}", f(&shy));
    }

    #[test]
    fn a_window_shorter_than_the_table_still_has_whole_steps() {
        let r = Ramp::new(Duration::from_nanos(10), 0.1, 1.0);
        assert_eq!(r.step_nanos(), 1);
        assert!(r.fraction_at(STEPS as u64 - 1).is_some());
        assert_eq!(r.fraction_at(STEPS as u64), None);
    }

    #[test]
    fn the_weyl_sequence_admits_the_fraction_in_every_run_of_turns() {
        for fraction in [0.1, 0.37, 0.5, 0.9] {
            let f = to_fixed(fraction);
            for (start, stride) in [(0u32, 1u32), (7, 2), (1_000_003, 3), (u32::MAX - 500, 1)] {
                let admitted = (0..1000u32)
                    .filter(|i| admits(start.wrapping_add(i * stride), 42, f))
                    .count();
                let share = admitted as f64 / 1000.0;
                assert!(
                    (share - fraction).abs() <= 0.01,
                    "fraction {fraction}, start {start}, stride {stride}: {share}"
                );
            }
        }
    }

    #[test]
    fn no_call_gets_in_at_zero_and_every_call_at_one() {
        assert!((0..10_000).all(|t| !admits(t, 9, 0)));
        assert!((0..10_000).all(|t| admits(t, 9, ONE)));
    }

    #[test]
    fn breakers_ramping_together_do_not_admit_in_step() {
        let f = to_fixed(0.1);
        let a: Vec<bool> = (0..100).map(|t| admits(t, 1, f)).collect();
        let b: Vec<bool> = (0..100).map(|t| admits(t, 2, f)).collect();
        assert_ne!(a, b);
    }

    #[test]
    fn turns_count_up_per_thread() {
        let first = next_turn();
        assert_eq!(next_turn(), first.wrapping_add(1));
        assert_eq!(next_turn(), first.wrapping_add(2));
    }
}
