//! What a user sets for outlier detection ([`Outliers`]), its checks, and the
//! fixed-point form the pool computes with ([`Rules`]).

use core::time::Duration;

use super::evidence;
use super::mark::TIMES_MAX;
use super::rule::OutlierRule;
use super::sums::PPM;
use crate::error::ConfigError;

/// Outlier detection across a registry's hosts: each host is compared with
/// the other hosts of its pool (Envoy's outlier detection, without its
/// timer, and with one change). Set on a registry with
/// [`RegistryBuilder::outliers`](crate::RegistryBuilder::outliers).
///
/// The defaults are Envoy's, but for one: a 10 s interval, the
/// success-rate rule on (`request_volume` 100, `minimum_hosts` 5,
/// `stdev_factor` 1.9, enforced 100 %), the failure-percentage rule
/// observed only (threshold 85 %, `request_volume` 50, `minimum_hosts` 5,
/// enforced 0 %), at most 10 % of a pool ejected (at least one host), panic
/// below 50 % healthy, and Envoy's ejection time (30 s × the times the host
/// was ejected, at most 300 s, one time forgiven per interval back). The
/// latency rule, which Envoy does not have, is off until
/// [`slow_outliers`](Self::slow_outliers) turns it on.
///
/// **The change: a host is ejected only on evidence**
/// ([`significance`](Self::significance), one in a million by default).
/// Envoy's rule looks at the spread of the hosts' success rates and not at
/// how many calls each rate rests on, so in a tight, healthy pool it ejects
/// hosts for their noise: 20 healthy hosts at 99.5 % with 1,000 calls an
/// interval lose a host to it about every 2 intervals, as often as its cap
/// and ejection time allow. Every rule of the
/// default also asks that the host's failures (or slow calls), summed over
/// its recent intervals, be more than its pool's rate explains at the
/// significance (see [`significance`](Self::significance)). The harness
/// `examples/outlier_tradeoff.rs` measures both over pool sizes, volumes and
/// rates (its table is in `benches/outlier_tradeoff.md`). [`Outliers::envoy`] is
/// Envoy's rule exactly.
///
/// ```
/// use failfast::Outliers;
/// use std::time::Duration;
///
/// let outliers = Outliers::new()
///     .interval(Duration::from_secs(5))
///     .stdev_factor(1.5)
///     .enforcing_failure_percentage(100)
///     .slow_outliers(3.0, 0.1);
/// assert_eq!(outliers.get_interval(), Duration::from_secs(5));
/// assert_eq!(outliers.get_significance(), Some(1e-6));
/// assert_eq!(Outliers::envoy().get_significance(), None);
/// assert_eq!(
///     outliers.get_ejection_time(),
///     Some((Duration::from_secs(30), Duration::from_secs(300)))
/// );
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Outliers {
    pub(crate) interval: Duration,
    pub(crate) success_rate_request_volume: u32,
    pub(crate) success_rate_minimum_hosts: u32,
    pub(crate) stdev_factor: f64,
    pub(crate) success_rate_minimum_gap: f64,
    pub(crate) enforcing_success_rate: u8,
    pub(crate) failure_percentage_threshold: u8,
    pub(crate) failure_percentage_request_volume: u32,
    pub(crate) failure_percentage_minimum_hosts: u32,
    pub(crate) enforcing_failure_percentage: u8,
    pub(crate) slow: Option<(f64, f64)>,
    pub(crate) enforcing_slow: u8,
    pub(crate) max_ejection_percent: u8,
    pub(crate) panic_threshold: u8,
    /// The significance of the evidence a host must carry (`None`: Envoy's
    /// rules alone).
    pub(crate) significance: Option<f64>,
    /// Envoy's ejection time, (base, max); `None`: the breaker's backoff.
    pub(crate) ejection_time: Option<(Duration, Duration)>,
}

/// The default significance: one false ejection in a million intervals of
/// a healthy host at most.
const SIGNIFICANCE: f64 = 1e-6;
/// Envoy's `base_ejection_time`.
const BASE_EJECTION: Duration = Duration::from_secs(30);
/// Envoy's `max_ejection_time`.
const MAX_EJECTION: Duration = Duration::from_secs(300);

impl Default for Outliers {
    fn default() -> Self {
        Outliers {
            interval: Duration::from_secs(10),
            success_rate_request_volume: 100,
            success_rate_minimum_hosts: 5,
            stdev_factor: 1.9,
            success_rate_minimum_gap: 0.0,
            enforcing_success_rate: 100,
            failure_percentage_threshold: 85,
            failure_percentage_request_volume: 50,
            failure_percentage_minimum_hosts: 5,
            enforcing_failure_percentage: 0,
            slow: None,
            enforcing_slow: 100,
            max_ejection_percent: 10,
            panic_threshold: 50,
            significance: Some(SIGNIFICANCE),
            ejection_time: Some((BASE_EJECTION, MAX_EJECTION)),
        }
    }
}

/// The longest interval: a day.
const MAX_INTERVAL: Duration = Duration::from_secs(86_400);
/// The shortest: a millisecond.
const MIN_INTERVAL: Duration = Duration::from_millis(1);

impl Outliers {
    /// The defaults (see the type's docs): Envoy's, with evidence weighed.
    pub fn new() -> Outliers {
        Outliers::default()
    }

    /// Envoy's outlier detection exactly: its rules and defaults with no
    /// evidence asked ([`significance_off`](Self::significance_off)) and its
    /// ejection time, so that a pool moved from Envoy ejects the hosts Envoy
    /// would, for as long. (Envoy judges each interval on its timer;
    /// failfast judges a host at its first call after the interval, against
    /// the pool's interval before: see [`RegistryBuilder::outliers`].)
    ///
    /// [`RegistryBuilder::outliers`]: crate::RegistryBuilder::outliers
    ///
    /// ```
    /// use failfast::Outliers;
    ///
    /// assert_eq!(Outliers::envoy(), Outliers::new().significance_off());
    /// ```
    pub fn envoy() -> Outliers {
        Outliers::default().significance_off()
    }

    /// Asks every rule for evidence at significance `alpha` (default
    /// 10⁻⁶; allowed 10⁻¹² to 0.01): a host is ejected only when its
    /// failures (for the success-rate and failure-percentage rules) or its
    /// slow calls (the latency rule), summed over its recent intervals, are
    /// more than its pool's rate explains, so that a healthy host's noise
    /// ejects it in at most a fraction `alpha` of its intervals, whatever its
    /// volume and its pool's size.
    ///
    /// The sum is a CUSUM of log-likelihood ratios (failing twice as often
    /// as the pool, against as often), kept in the host's own storage and
    /// stepped at its own roll; a host is an outlier by the evidence when
    /// the sum reaches `ln(1/alpha)` (13.8 nats at 10⁻⁶), and it must still
    /// be below the stdev threshold (or at the failure percentage, or over
    /// the slow limit) in the interval that decides. In 20-host pools at
    /// 99.5 %, a host failing three times as often as its pool is found in
    /// 1 interval at 10,000 calls an interval, 4 at 1,000 and about 30 at
    /// 100, where one interval holds half a failure (medians of
    /// `examples/outlier_tradeoff.rs`, which found no healthy host ejected
    /// in 48 pools; its table is in `benches/outlier_tradeoff.md`).
    ///
    /// ```
    /// use failfast::Outliers;
    ///
    /// let stricter = Outliers::new().significance(1e-9);
    /// assert_eq!(stricter.get_significance(), Some(1e-9));
    /// ```
    pub fn significance(mut self, alpha: f64) -> Self {
        self.significance = Some(alpha);
        self
    }

    /// Envoy's rules alone: a host is judged on the interval's rates, with
    /// no evidence asked (see [`Outliers::envoy`]).
    pub fn significance_off(mut self) -> Self {
        self.significance = None;
        self
    }

    /// The significance asked, if any.
    pub fn get_significance(&self) -> Option<f64> {
        self.significance
    }

    /// Envoy's ejection time (the default: 30 s and 300 s): a host is ejected
    /// for `base` × the times it was ejected, at most `max` (at least `base`,
    /// at most 254 × `base`), and each interval it spends back after an
    /// ejection, judged or not, forgives one time. Its recovery then goes
    /// through the breaker's probe, as any trip's.
    ///
    /// ```
    /// use failfast::Outliers;
    /// use std::time::Duration;
    ///
    /// let longer = Outliers::new().ejection_time(Duration::from_secs(60), Duration::from_secs(600));
    /// assert_eq!(longer.get_ejection_time(), Some((Duration::from_secs(60), Duration::from_secs(600))));
    /// ```
    pub fn ejection_time(mut self, base: Duration, max: Duration) -> Self {
        self.ejection_time = Some((base, max));
        self
    }

    /// Ejections for the breaker's own open duration and backoff instead
    /// (the breaker's `open_duration`, `backoff` and its decay): an ejection
    /// is then one more trip of the host's breaker.
    pub fn ejection_time_of_breaker(mut self) -> Self {
        self.ejection_time = None;
        self
    }

    /// Envoy's ejection time `(base, max)`, or `None` when ejections follow
    /// the breaker's backoff.
    pub fn get_ejection_time(&self) -> Option<(Duration, Duration)> {
        self.ejection_time
    }

    /// How often each host is judged against its pool (default 10 s): every
    /// host rolls its own interval on its first call after one ends.
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The interval set.
    pub fn get_interval(&self) -> Duration {
        self.interval
    }

    /// Calls a host needs in an interval to be judged by its success rate
    /// (default 100). Also the latency rule's volume.
    pub fn success_rate_request_volume(mut self, calls: u32) -> Self {
        self.success_rate_request_volume = calls;
        self
    }

    /// Hosts of a pool that must have the volume for the success-rate rule
    /// (and the latency rule) to judge anyone (default 5).
    pub fn success_rate_minimum_hosts(mut self, hosts: u32) -> Self {
        self.success_rate_minimum_hosts = hosts;
        self
    }

    /// A host is an outlier when its success rate is below the pool's mean
    /// minus this many standard deviations (default 1.9).
    pub fn stdev_factor(mut self, factor: f64) -> Self {
        self.stdev_factor = factor;
        self
    }

    /// A host is a success-rate outlier only if it is also at least `gap`
    /// (a rate in `[0, 1)`) below the pool's mean (default 0, Envoy's rule).
    ///
    /// Envoy's rule alone ejects healthy hosts of a pool that is healthy
    /// and alike: when every host fails about 0.1 % of 200 calls, the
    /// standard deviation is about 0.2 points, and a host with two failures
    /// instead of none falls 1.9 deviations below the mean (envoyproxy/envoy
    /// issues 37723 and 18752). A gap of a point or two keeps the rule for
    /// hosts that are really apart; the demo's `outliers` scene runs with
    /// 0.02 and shows both.
    ///
    /// ```
    /// use failfast::Outliers;
    ///
    /// let outliers = Outliers::new().success_rate_minimum_gap(0.02);
    /// # let _ = outliers;
    /// ```
    pub fn success_rate_minimum_gap(mut self, gap: f64) -> Self {
        self.success_rate_minimum_gap = gap;
        self
    }

    /// The share (0..=100 %) of success-rate outliers actually ejected
    /// (default 100); the rest are only counted, for a shadow roll-out.
    pub fn enforcing_success_rate(mut self, percent: u8) -> Self {
        self.enforcing_success_rate = percent;
        self
    }

    /// Turns the success-rate rule off (its enforcement to 0 %: outliers
    /// are still counted).
    pub fn success_rate_off(self) -> Self {
        self.enforcing_success_rate(0)
    }

    /// A host failing at least this percentage of its calls is an outlier
    /// (default 85).
    pub fn failure_percentage_threshold(mut self, percent: u8) -> Self {
        self.failure_percentage_threshold = percent;
        self
    }

    /// Calls a host needs in an interval for the failure-percentage rule
    /// (default 50).
    pub fn failure_percentage_request_volume(mut self, calls: u32) -> Self {
        self.failure_percentage_request_volume = calls;
        self
    }

    /// Hosts of a pool that must have that volume (default 5).
    pub fn failure_percentage_minimum_hosts(mut self, hosts: u32) -> Self {
        self.failure_percentage_minimum_hosts = hosts;
        self
    }

    /// The share of failure-percentage outliers ejected (default 0: observed
    /// only, as in Envoy).
    pub fn enforcing_failure_percentage(mut self, percent: u8) -> Self {
        self.enforcing_failure_percentage = percent;
        self
    }

    /// Turns the latency rule on: a host whose slow-call rate exceeds both
    /// `factor` times its pool's mean and `floor` (a rate in `[0, 1)`) is
    /// ejected with [`Reason::SlowOutlier`](crate::Reason::SlowOutlier). A
    /// call is slow by the breakers' `slow_call_threshold`, which the
    /// pool's configurations must then set.
    pub fn slow_outliers(mut self, factor: f64, floor: f64) -> Self {
        self.slow = Some((factor, floor));
        self
    }

    /// The share of latency outliers ejected (default 100).
    pub fn enforcing_slow(mut self, percent: u8) -> Self {
        self.enforcing_slow = percent;
        self
    }

    /// At most this percentage of a pool's hosts are ejected as outliers at
    /// once (default 10), and always at least one (Envoy's rule).
    pub fn max_ejection_percent(mut self, percent: u8) -> Self {
        self.max_ejection_percent = percent;
        self
    }

    /// When fewer than this percentage of a pool's hosts are healthy (not
    /// open, half-open or forced open), the pool panics: its outlier
    /// ejections are lifted, calls reach those hosts, and no host is ejected
    /// until the share is back (default 50; 0 never panics).
    pub fn panic_threshold(mut self, percent: u8) -> Self {
        self.panic_threshold = percent;
        self
    }

    /// Checks every field, naming the first out of range.
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        if !(MIN_INTERVAL..=MAX_INTERVAL).contains(&self.interval) {
            return Err(ConfigError::new(
                "outliers.interval",
                "1 ms to 1 day",
                self.interval,
            ));
        }
        let volume = |name: &'static str, v: u32| {
            if (1..=super::tally::CAP).contains(&v) {
                Ok(())
            } else {
                Err(ConfigError::new(name, "1..=258048 calls", v))
            }
        };
        volume(
            "outliers.success_rate_request_volume",
            self.success_rate_request_volume,
        )?;
        volume(
            "outliers.failure_percentage_request_volume",
            self.failure_percentage_request_volume,
        )?;
        for (name, hosts) in [
            (
                "outliers.success_rate_minimum_hosts",
                self.success_rate_minimum_hosts,
            ),
            (
                "outliers.failure_percentage_minimum_hosts",
                self.failure_percentage_minimum_hosts,
            ),
        ] {
            if hosts == 0 {
                return Err(ConfigError::new(name, "≥ 1 host", hosts));
            }
        }
        if !(0.0..=100.0).contains(&self.stdev_factor) {
            return Err(ConfigError::new(
                "outliers.stdev_factor",
                "0.0..=100.0",
                self.stdev_factor,
            ));
        }
        if !(0.0..1.0).contains(&self.success_rate_minimum_gap) {
            return Err(ConfigError::new(
                "outliers.success_rate_minimum_gap",
                "a rate in [0, 1)",
                self.success_rate_minimum_gap,
            ));
        }
        for (name, p) in [
            (
                "outliers.enforcing_success_rate",
                self.enforcing_success_rate,
            ),
            (
                "outliers.failure_percentage_threshold",
                self.failure_percentage_threshold,
            ),
            (
                "outliers.enforcing_failure_percentage",
                self.enforcing_failure_percentage,
            ),
            ("outliers.enforcing_slow", self.enforcing_slow),
            ("outliers.max_ejection_percent", self.max_ejection_percent),
            ("outliers.panic_threshold", self.panic_threshold),
        ] {
            if p > 100 {
                return Err(ConfigError::new(name, "0..=100 %", p));
            }
        }
        if let Some(alpha) = self.significance {
            if !(1e-12..=0.01).contains(&alpha) {
                return Err(ConfigError::new(
                    "outliers.significance",
                    "1e-12..=0.01",
                    alpha,
                ));
            }
        }
        if let Some((base, max)) = self.ejection_time {
            if !(MIN_INTERVAL..=MAX_INTERVAL).contains(&base) {
                return Err(ConfigError::new(
                    "outliers.ejection_time.base",
                    "1 ms to 1 day",
                    base,
                ));
            }
            if max < base || max > base * (TIMES_MAX - 1) {
                return Err(ConfigError::new(
                    "outliers.ejection_time.max",
                    "base..=254 × base",
                    max,
                ));
            }
        }
        if let Some((factor, floor)) = self.slow {
            if !(1.0..=1000.0).contains(&factor) {
                return Err(ConfigError::new(
                    "outliers.slow_outliers.factor",
                    "1.0..=1000.0",
                    factor,
                ));
            }
            if !(0.0..1.0).contains(&floor) {
                return Err(ConfigError::new(
                    "outliers.slow_outliers.floor",
                    "a rate in [0, 1)",
                    floor,
                ));
            }
        }
        Ok(())
    }

    /// The fixed-point rules (after [`check`](Self::check)).
    pub(crate) fn rules(&self) -> Rules {
        let milli = |f: f64| (f * 1000.0).round() as u64;
        let interval_nanos = u64::try_from(self.interval.as_nanos()).unwrap_or(u64::MAX);
        Rules {
            interval_nanos,
            per_nanos: u64::MAX / interval_nanos + 1,
            sr_volume: self.success_rate_request_volume,
            sr_min_hosts: self.success_rate_minimum_hosts.into(),
            stdev_milli: milli(self.stdev_factor),
            sr_gap_ppm: (self.success_rate_minimum_gap * PPM as f64).round() as u64,
            sr_enforce: self.enforcing_success_rate,
            fp_threshold_ppm: u64::from(self.failure_percentage_threshold) * (PPM / 100),
            fp_volume: self.failure_percentage_request_volume,
            fp_min_hosts: self.failure_percentage_minimum_hosts.into(),
            fp_enforce: self.enforcing_failure_percentage,
            slow: self
                .slow
                .map(|(factor, floor)| (milli(factor), (floor * PPM as f64).round() as u64)),
            slow_enforce: self.enforcing_slow,
            max_ejection_percent: self.max_ejection_percent.into(),
            panic_threshold: self.panic_threshold.into(),
            evidence: self.significance.map(evidence::threshold),
            ejection: self.ejection_time.map(|(base, max)| {
                let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
                (nanos(base), nanos(max))
            }),
        }
    }
}

/// [`Outliers`] in the units the pool computes with: nanoseconds, parts per
/// million, thousandths.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Rules {
    pub(crate) interval_nanos: u64,
    /// ⌈2⁶⁴ / interval⌉: an interval number is a multiply, not a division
    /// (see `Pool::epoch`).
    pub(crate) per_nanos: u64,
    pub(crate) sr_volume: u32,
    pub(crate) sr_min_hosts: u64,
    pub(crate) stdev_milli: u64,
    /// The minimum gap below the mean, in ppm.
    pub(crate) sr_gap_ppm: u64,
    pub(crate) sr_enforce: u8,
    pub(crate) fp_threshold_ppm: u64,
    pub(crate) fp_volume: u32,
    pub(crate) fp_min_hosts: u64,
    pub(crate) fp_enforce: u8,
    /// The latency rule's factor (thousandths) and floor (ppm).
    pub(crate) slow: Option<(u64, u64)>,
    pub(crate) slow_enforce: u8,
    pub(crate) max_ejection_percent: u64,
    pub(crate) panic_threshold: u64,
    /// The evidence a host must carry, in units of the
    /// [evidence](super::evidence) (`ln(1/significance)`); `None`: none.
    pub(crate) evidence: Option<u32>,
    /// Envoy's ejection time in nanoseconds, (base, max); `None`: the
    /// breaker's backoff.
    pub(crate) ejection: Option<(u64, u64)>,
}

impl Rules {
    /// `rule`'s enforcement percentage.
    pub(crate) fn enforcing(&self, rule: OutlierRule) -> u8 {
        match rule {
            OutlierRule::SuccessRate => self.sr_enforce,
            OutlierRule::FailurePercentage => self.fp_enforce,
            OutlierRule::Slow => self.slow_enforce,
        }
    }

    /// How long an ejection that is the host's `times`-th (decayed, counting
    /// this one) lasts under Envoy's schedule: `min(base × times, max)`.
    pub(crate) fn ejection_nanos(&self, times: u32) -> Option<u64> {
        let (base, max) = self.ejection?;
        Some(base.saturating_mul(u64::from(times)).min(max))
    }

    /// The multiplier of an ejection whose host had `times` left: Envoy's
    /// `ejectTimeBackoff`, raised by one while `times × base < max + base`.
    pub(crate) fn next_times(&self, times: u32) -> u32 {
        match self.ejection {
            Some((base, max))
                if u128::from(times) * u128::from(base) < u128::from(max) + u128::from(base) =>
            {
                (times + 1).min(TIMES_MAX)
            }
            _ => times,
        }
    }
}

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;

    #[test]
    fn each_bad_field_is_named() {
        let field = |o: Outliers| o.check().unwrap_err().field();
        assert_eq!(
            field(Outliers::new().interval(Duration::ZERO)),
            "outliers.interval"
        );
        assert_eq!(
            field(Outliers::new().success_rate_request_volume(0)),
            "outliers.success_rate_request_volume"
        );
        assert_eq!(
            field(Outliers::new().failure_percentage_minimum_hosts(0)),
            "outliers.failure_percentage_minimum_hosts"
        );
        assert_eq!(
            field(Outliers::new().stdev_factor(f64::NAN)),
            "outliers.stdev_factor"
        );
        assert_eq!(
            field(Outliers::new().success_rate_minimum_gap(1.0)),
            "outliers.success_rate_minimum_gap"
        );
        assert_eq!(
            field(Outliers::new().enforcing_success_rate(101)),
            "outliers.enforcing_success_rate"
        );
        assert_eq!(
            field(Outliers::new().panic_threshold(200)),
            "outliers.panic_threshold"
        );
        assert_eq!(
            field(Outliers::new().slow_outliers(0.5, 0.1)),
            "outliers.slow_outliers.factor"
        );
        assert_eq!(
            field(Outliers::new().slow_outliers(2.0, 1.0)),
            "outliers.slow_outliers.floor"
        );
        assert_eq!(
            field(Outliers::new().significance(0.5)),
            "outliers.significance"
        );
        assert_eq!(
            field(Outliers::new().ejection_time(Duration::ZERO, Duration::from_secs(1))),
            "outliers.ejection_time.base"
        );
        assert_eq!(
            field(Outliers::new().ejection_time(Duration::from_secs(2), Duration::from_secs(1))),
            "outliers.ejection_time.max"
        );
        assert_eq!(
            field(Outliers::new().ejection_time(Duration::from_secs(1), Duration::from_secs(255))),
            "outliers.ejection_time.max"
        );
        assert!(Outliers::new().check().is_ok());
        assert!(Outliers::envoy().check().is_ok());
    }

    /// Envoy's schedule: 30, 60, 90 … 300 s; the multiplier climbs to 11
    /// (one step past the cap, as Envoy's does) and the time stays 300 s.
    #[test]
    fn envoys_ejection_time_grows_by_the_base_to_the_cap() {
        let rules = Outliers::new().rules();
        let mut times = 0;
        let mut seen = Vec::new();
        for _ in 0..12 {
            times = rules.next_times(times);
            seen.push((times, rules.ejection_nanos(times).unwrap() / 1_000_000_000));
        }
        assert_eq!(
            seen,
            [
                (1, 30),
                (2, 60),
                (3, 90),
                (4, 120),
                (5, 150),
                (6, 180),
                (7, 210),
                (8, 240),
                (9, 270),
                (10, 300),
                (11, 300),
                (11, 300)
            ]
        );
        assert_eq!(
            Outliers::new()
                .ejection_time_of_breaker()
                .rules()
                .ejection_nanos(1),
            None
        );
    }
}
