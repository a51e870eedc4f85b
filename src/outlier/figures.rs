//! A sealed interval's figures, computed in integers from its sums, and how
//! a host is judged against them.
//!
//! Success rate (Envoy's rule): over the `n` hosts with the volume, with
//! `S₁ = Σr` and `S₂ = Σr²` (r in ppm), the population standard deviation is
//! `√(n·S₂ − S₁²) / n`, so the threshold `mean − f·stdev` is
//!
//! ```text
//! threshold = (1000·S₁ − f_milli · ⌊√(n·S₂ − S₁²)⌋) / (1000·n)      (floored, ≥ 0)
//! ```
//!
//! all in `u128` (n·S₂ < 2⁸⁴ for 4 million hosts), with `isqrt`, and no
//! higher than `⌊S₁ / n⌋ − gap` (`success_rate_minimum_gap`, 0 by default).
//! A host is an outlier when its rate is below it. Every reader of one interval
//! computes the same threshold, and a direct computation over the same hosts
//! gives it too (the property test in `tests/outliers.rs`).
//!
//! With a significance (the default), a host must also carry the
//! [evidence](super::evidence) that it fails (or is slow) more often than
//! its pool, given its calls: the figures keep the pool's mean failure and
//! slow rates and its calls for that.

use super::config::Rules;
use super::evidence::{self, Reference};
use super::mark::Evidence;
use super::rule::OutlierRule;
use super::sums::{Totals, PPM};
use super::tally::Counts;

/// What the hosts of a pool are judged against in one interval.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Figures {
    /// The success-rate threshold (ppm), when enough hosts had the volume.
    pub(crate) success_threshold: Option<u32>,
    /// Whether enough hosts had the failure-percentage rule's volume.
    pub(crate) failure_rule: bool,
    /// The slow-rate limit (ppm), when the latency rule is on and enough
    /// hosts had the volume.
    pub(crate) slow_limit: Option<u32>,
    /// The pool's failures, when one host at least had a success rate.
    pub(crate) failures: Option<Reference>,
    /// The pool's slow calls, with the slow limit.
    pub(crate) slow: Option<Reference>,
}

/// The most calls the cached figures keep (fewer weigh as less certain).
const CALLS_MAX: u64 = (1 << 28) - 1;

impl Figures {
    /// The figures of `totals` under `rules`.
    pub(crate) fn of(totals: &Totals, rules: &Rules) -> Figures {
        let n = totals.hosts;
        let success_threshold = (n >= rules.sr_min_hosts).then(|| {
            let n = u128::from(n);
            let spread = (n * totals.success_squares).saturating_sub(totals.success_sum.pow(2));
            let deviation = u128::from(rules.stdev_milli) * spread.isqrt();
            let threshold = (1000 * totals.success_sum).saturating_sub(deviation) / (1000 * n);
            // The minimum gap below the mean (0 by default: Envoy's rule).
            let gapped = (totals.success_sum / n).saturating_sub(u128::from(rules.sr_gap_ppm));
            threshold.min(gapped).min(u128::from(PPM)) as u32
        });
        let slow_limit = rules.slow.and_then(|(factor_milli, floor_ppm)| {
            (totals.slow_hosts >= rules.sr_min_hosts).then(|| {
                let mean_times = u128::from(factor_milli) * totals.slow_sum
                    / (1000 * u128::from(totals.slow_hosts));
                mean_times.max(u128::from(floor_ppm)).min(u128::from(PPM)) as u32
            })
        });
        let calls = totals.calls.min(CALLS_MAX);
        // The pool's rates rounded up: a higher rate only weighs a host's
        // events as less surprising.
        let failures = (n > 0 && calls > 0).then(|| Reference {
            rate_ppm: (PPM as u128 - (totals.success_sum / u128::from(n)).min(PPM as u128)) as u32,
            calls,
        });
        let slow = slow_limit.and((totals.slow_hosts > 0 && calls > 0).then(|| {
            Reference {
                rate_ppm: totals
                    .slow_sum
                    .div_ceil(u128::from(totals.slow_hosts))
                    .min(u128::from(PPM)) as u32,
                calls,
            }
        }));
        Figures {
            success_threshold,
            failure_rule: totals.failure_hosts >= rules.fp_min_hosts,
            slow_limit,
            failures,
            slow,
        }
    }

    /// Packed with interval tag `tag` (16 bits) for the pool's cache word:
    /// tag (16) | threshold (21) | failure rule (1) | slow limit (21) |
    /// failure rate (20) | slow rate (20) | calls (28); an absent reference
    /// has 0 calls.
    pub(crate) fn pack(self, tag: u64) -> u128 {
        let opt = |v: Option<u32>| v.map_or(0, |v| u128::from(v) | 1 << 20);
        let rate = |r: Option<Reference>| r.map_or(0, |r| u128::from(r.rate_ppm));
        let calls = self.failures.map_or(0, |r| u128::from(r.calls));
        u128::from(tag & 0xffff)
            | opt(self.success_threshold) << 16
            | u128::from(self.failure_rule) << 37
            | opt(self.slow_limit) << 38
            | rate(self.failures) << 59
            | rate(self.slow) << 79
            | calls << 99
    }

    /// The figures and tag of a packed word.
    pub(crate) fn unpack(word: u128) -> (u64, Figures) {
        let field = |shift: u32, bits: u32| (word >> shift) & ((1 << bits) - 1);
        let opt = |v: u128| (v & 1 << 20 != 0).then_some((v & ((1 << 20) - 1)) as u32);
        let calls = field(99, 28) as u64;
        let success_threshold = opt(field(16, 21));
        let slow_limit = opt(field(38, 21));
        let reference = |rate: u128| Reference {
            rate_ppm: rate as u32,
            calls,
        };
        (
            field(0, 16) as u64,
            Figures {
                success_threshold,
                failure_rule: field(37, 1) != 0,
                slow_limit,
                failures: (calls > 0).then(|| reference(field(59, 20))),
                slow: (calls > 0 && slow_limit.is_some()).then(|| reference(field(79, 20))),
            },
        )
    }
}

/// `part / whole` in ppm (0 for no calls).
pub(crate) fn ppm(part: u32, whole: u32) -> u32 {
    if whole == 0 {
        return 0;
    }
    (u64::from(part) * PPM / u64::from(whole)) as u32
}

/// The rules that find a host with `counts` an outlier against `figures`,
/// in [`OutlierRule::ALL`]'s order, as a bit set, and the host's evidence
/// after this interval (`before`, stepped when the rules weigh evidence).
pub(crate) fn judge(
    counts: Counts,
    figures: &Figures,
    rules: &Rules,
    before: Evidence,
) -> (u8, Evidence) {
    let mut e = before;
    if let Some(h) = rules.evidence {
        if let Some(pool) = figures.failures {
            if counts.calls >= rules.sr_volume.min(rules.fp_volume) {
                e.fail = evidence::step(e.fail, counts.failures, counts.calls, pool, h);
            }
        }
        if let Some(pool) = figures.slow {
            if counts.calls >= rules.sr_volume {
                e.slow = evidence::step(e.slow, counts.slow, counts.calls, pool, h);
            }
        }
    }
    let evident = |sum: u32| rules.evidence.is_none_or(|h| sum >= h);
    let mut found = 0;
    let success = ppm(counts.calls - counts.failures, counts.calls);
    if let Some(t) = figures.success_threshold {
        if counts.calls >= rules.sr_volume && success < t && evident(e.fail) {
            found |= 1 << OutlierRule::SuccessRate.index();
        }
    }
    if figures.failure_rule
        && counts.calls >= rules.fp_volume
        && u64::from(ppm(counts.failures, counts.calls)) >= rules.fp_threshold_ppm
        && evident(e.fail)
    {
        found |= 1 << OutlierRule::FailurePercentage.index();
    }
    if let Some(limit) = figures.slow_limit {
        if counts.calls >= rules.sr_volume
            && ppm(counts.slow, counts.calls) > limit
            && evident(e.slow)
        {
            found |= 1 << OutlierRule::Slow.index();
        }
    }
    (found, e)
}

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::super::evidence::Reference;
    use super::*;
    use crate::outlier::sums::Report;
    use crate::Outliers;

    fn totals(rates_percent: &[u32]) -> Totals {
        let mut t = Totals::default();
        for &r in rates_percent {
            t.add(Report {
                success_ppm: Some(r * 10_000),
                failure_volume: true,
                slow_ppm: None,
                calls: 100,
            });
        }
        t
    }

    /// Envoy's `SuccessRate` case: rates 50, 100, 100, 100, 100 give a
    /// mean of 90, a population stdev of 20, and 90 − 1.9·20 = 52.
    #[test]
    fn envoys_five_hosts_give_a_threshold_of_52() {
        let rules = Outliers::envoy().rules();
        let f = Figures::of(&totals(&[50, 100, 100, 100, 100]), &rules);
        assert_eq!(f.success_threshold, Some(520_000));
        let host = |ok: u32| Counts {
            calls: 100,
            failures: 100 - ok,
            slow: 0,
        };
        let judged = |ok| judge(host(ok), &f, &rules, Evidence::default()).0;
        assert_eq!(judged(50), 1, "the host at 50 % is out");
        assert_eq!(judged(52), 0, "52 % is not below 52 %");
        // With evidence weighed, 50 failures of 100 against a pool failing
        // 10 % of 500 calls are enough at once at one in a million
        // (ℓ = 50·ln 2 − (50 + 50)·100/600 ≈ 18.0 nats ≥ 13.8), not at one
        // in 10¹⁰ (23.0 nats), which a second such interval reaches.
        let careful = Outliers::new().rules();
        let f = Figures::of(&totals(&[50, 100, 100, 100, 100]), &careful);
        assert_eq!(f.success_threshold, Some(520_000), "the same threshold");
        let (found, e) = judge(host(50), &f, &careful, Evidence::default());
        assert_eq!(found, 1);
        assert!(e.fail >= careful.evidence.unwrap());
        let strict = Outliers::new().significance(1e-10).rules();
        let (found, e) = judge(host(50), &f, &strict, Evidence::default());
        assert_eq!(found, 0, "not yet: {e:?}");
        let (found, _) = judge(host(50), &f, &strict, e);
        assert_eq!(found, 1, "the second interval adds to the first");
    }

    #[test]
    fn the_minimum_gap_keeps_a_tight_pool_from_ejecting_noise() {
        // Four hosts at 100 %, one at 99 %: Envoy's threshold is 99.04 %.
        let mut t = totals(&[100, 100, 100, 100]);
        t.add(Report {
            success_ppm: Some(990_000),
            failure_volume: true,
            slow_ppm: None,
            calls: 100,
        });
        let envoy = Figures::of(&t, &Outliers::envoy().rules());
        assert_eq!(envoy.success_threshold, Some(990_400));
        let gapped = Figures::of(
            &t,
            &Outliers::envoy().success_rate_minimum_gap(0.02).rules(),
        );
        assert_eq!(
            gapped.success_threshold,
            Some(978_000),
            "mean 99.8 % − 2 points"
        );
    }

    #[test]
    fn the_slow_limit_is_the_factor_times_the_mean_or_the_floor() {
        let rules = Outliers::new().slow_outliers(3.0, 0.05).rules();
        let slow = |rates: &[u32]| {
            let mut t = Totals::default();
            for &r in rates {
                t.add(Report {
                    success_ppm: Some(1_000_000),
                    failure_volume: true,
                    slow_ppm: Some(r),
                    calls: 100,
                });
            }
            Figures::of(&t, &rules).slow_limit
        };
        // Mean 20 %: three times it.
        assert_eq!(
            slow(&[100_000, 100_000, 100_000, 100_000, 600_000]),
            Some(600_000)
        );
        // Mean 1 %: the floor.
        assert_eq!(slow(&[10_000; 5]), Some(50_000));
        assert_eq!(slow(&[10_000; 4]), None, "too few hosts");
    }

    #[test]
    fn too_few_hosts_give_no_threshold() {
        let rules = Outliers::new().rules();
        assert_eq!(
            Figures::of(&totals(&[50, 100, 100, 100]), &rules).success_threshold,
            None
        );
    }

    #[test]
    fn a_threshold_below_zero_is_zero() {
        let rules = Outliers::new().stdev_factor(10.0).rules();
        let f = Figures::of(&totals(&[0, 100, 100, 100, 100]), &rules);
        assert_eq!(f.success_threshold, Some(0), "nobody is below 0 %");
    }

    #[test]
    fn figures_survive_packing() {
        for f in [
            Figures::default(),
            Figures {
                success_threshold: Some(999_999),
                failure_rule: true,
                slow_limit: Some(0),
                failures: Some(Reference {
                    rate_ppm: 1_000_000,
                    calls: CALLS_MAX,
                }),
                slow: Some(Reference {
                    rate_ppm: 7,
                    calls: CALLS_MAX,
                }),
            },
            Figures {
                success_threshold: Some(0),
                failure_rule: false,
                slow_limit: Some(1_000_000),
                failures: Some(Reference {
                    rate_ppm: 0,
                    calls: 1,
                }),
                slow: Some(Reference {
                    rate_ppm: 999_999,
                    calls: 1,
                }),
            },
            Figures {
                success_threshold: None,
                failure_rule: false,
                slow_limit: None,
                failures: Some(Reference {
                    rate_ppm: 3,
                    calls: 77,
                }),
                slow: None,
            },
        ] {
            assert_eq!(Figures::unpack(f.pack(0xbeef)), (0xbeef, f));
        }
    }
}
