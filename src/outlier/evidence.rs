//! How much a host's failures (or slow calls) say that it is worse than its
//! pool, given how many calls it made: a cumulative sum of log-likelihood
//! ratios (a CUSUM), one step per interval, in integers.
//!
//! # The test
//!
//! In one interval the host made `n` calls and `k` of them failed; the pool
//! (the sealed interval it is judged against) made `N` calls with a mean
//! failure rate `p`, so about `F = p·N` failures. If the host is like its
//! pool, its failures and the pool's are Poisson with one rate, and given
//! their total `T = k + F`, the host's share is binomial:
//! `k ~ Bin(T, π)` with `π = n / (n + N)` (the conditional test of two
//! Poisson rates: it needs no knowledge of the rate itself, and a small or
//! quiet pool, whose `p` is uncertain, is weighed as such). Against the
//! alternative that the host fails `ρ = 2` times as often, one interval's
//! log-likelihood ratio is at least
//!
//! ```text
//! ℓ = k·ln ρ − (ρ − 1)·T·π = k·ln 2 − (k + p·N)·n / (n + N)
//! ```
//!
//! (the binomial ratio is `k·ln ρ − T·ln(1 + (ρ − 1)π)`, and `ln(1 + x) ≤ x`).
//! The host's evidence is `S ← max(0, S + ℓ)`, kept in its mark between
//! intervals and capped at the threshold `h = ln(1/α)`. It is an outlier by
//! the evidence when `S` reaches `h`.
//!
//! # Why it holds the false ejections to α
//!
//! Under the null hypothesis `e^ℓ` has expectation at most one, so from
//! each time the sum leaves zero, `e^S` is a non-negative supermartingale,
//! and the chance that it ever reaches `e^h = 1/α` is at most `α` (Ville's
//! inequality; Lorden's bound on the CUSUM's run length). At most one such
//! climb starts per interval: a healthy host reaches the threshold in at
//! most a fraction `α` of its intervals, whatever its volume, its pool's
//! size or their rates. The rounding below only lowers `S`.
//!
//! # Why a sum over intervals
//!
//! One interval of 1,000 calls at 99.5 % holds 5 ± 2.2 failures; a host
//! failing three times as often holds 15 ± 3.9. Any rule deciding on that
//! one interval, with at most one false ejection in a million intervals,
//! needs about 20 failures, which the sick host reaches one interval in
//! eight. The sum keeps what each interval says: the sick host adds about
//! 0.7·15 − 5 ≈ 5.4 nats an interval and reaches `h = 13.8` in about
//! three, while a healthy host's steps average `5·(ln 2 − 1) < 0`.
//! `ρ = 2` is the smallest ratio the sum sees at all: a host failing `m`
//! times its pool's rate climbs only when `m·ln 2 > 1`, that is `m > 1.44`.
//!
//! # In integers
//!
//! `S` is kept in 1/64 of a nat (11 bits of the mark: up to 32 nats), and a
//! step is computed in 2⁻¹⁶ nat with `ln 2` rounded down and the pool's
//! term rounded up, in `u128`: no float and no division but one.

use super::sums::PPM;

/// Evidence units per nat.
pub(crate) const UNIT: f64 = 64.0;
/// A step's extra fraction bits below the unit.
const FRACTION: u32 = 10;
/// ⌊ln 2 · 2¹⁶⌋.
const LN2: u128 = 45_426;
const _: () = assert!(1 << (16 - FRACTION) == UNIT as u32);

/// What the pool says about one rule's events (failures, or slow calls):
/// its mean rate and the calls behind it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reference {
    /// The pool's mean rate, in ppm, rounded up.
    pub(crate) rate_ppm: u32,
    /// The pool's calls (of the hosts with the volume).
    pub(crate) calls: u64,
}

/// The evidence `before` (in units) after an interval in which the host had
/// `events` in `calls`, against `pool`, capped at `cap` units.
pub(crate) fn step(before: u32, events: u32, calls: u32, pool: Reference, cap: u32) -> u32 {
    let (k, n, big_n) = (
        u128::from(events),
        u128::from(calls),
        u128::from(pool.calls),
    );
    let gain = k * LN2;
    let pool_failures = k * u128::from(PPM) + u128::from(pool.rate_ppm) * big_n;
    let cost = ((pool_failures * n) << 16).div_ceil((n + big_n).max(1) * u128::from(PPM));
    let s = (u128::from(before) << FRACTION) + gain;
    let s = s.saturating_sub(cost) >> FRACTION;
    s.min(u128::from(cap)) as u32
}

/// The threshold for a significance `alpha`: `⌈ln(1/α)⌉` in units.
pub(crate) fn threshold(alpha: f64) -> u32 {
    (-alpha.ln() * UNIT).ceil() as u32
}

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;

    fn pool(rate_ppm: u32, calls: u64) -> Reference {
        Reference { rate_ppm, calls }
    }

    /// The step against a direct computation in floating point.
    #[test]
    fn a_step_is_the_log_likelihood_ratio_rounded_down() {
        for (k, n, p, big_n) in [
            (15u32, 1_000u32, 5_000u32, 20_000u64),
            (0, 1_000, 5_000, 20_000),
            (3, 100, 1_000, 500),
            (90, 10_000, 5_000, 5_000_000),
            (43, 50, 10_000, 250),
        ] {
            let exact = f64::from(k) * 2f64.ln()
                - (f64::from(k) + f64::from(p) / 1e6 * big_n as f64) * f64::from(n)
                    / (f64::from(n) + big_n as f64);
            let before = 1_000u32;
            let got = step(before, k, n, pool(p, big_n), u32::MAX);
            let want = (f64::from(before) + exact * UNIT).max(0.0);
            assert!(
                f64::from(got) <= want && want - f64::from(got) < 1.01,
                "{k}/{n} against {p} ppm of {big_n}: {got} units, {want:.3} exact"
            );
        }
    }

    #[test]
    fn the_sum_stays_between_zero_and_its_cap() {
        assert_eq!(step(10, 0, 1_000, pool(5_000, 20_000), 900), 0);
        assert_eq!(step(10, 1_000, 1_000, pool(5_000, 20_000), 900), 900);
    }

    #[test]
    fn a_quiet_pool_is_weighed_as_uncertain() {
        // Five failures of 100 where four peers' 400 calls failed once:
        // against a pool rate known exactly (1 in 400 of a million calls)
        // that is much more evidence.
        let uncertain = step(0, 5, 100, pool(2_500, 400), u32::MAX);
        let known = step(0, 5, 100, pool(2_500, 1_000_000), u32::MAX);
        assert!(uncertain < known, "{uncertain} < {known}");
    }

    #[test]
    fn one_in_a_million_is_13_8_nats() {
        assert_eq!(threshold(1e-6), 885, "⌈13.8155 × 64⌉");
    }
}
