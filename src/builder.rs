//! The consuming, validating [`Builder`] for breakers (and the shared config
//! a [`Registry`](crate::Registry) stamps its breakers from).

use core::fmt;
use core::time::Duration;

use crate::breaker::{Breaker, Shared};
use crate::clock::{Clock, Nanos, QuantaClock};
use crate::error::ConfigError;
use crate::observe::Observer;
use crate::policy::{Backoff, Config, Rate, RoundRule, Unanswered};
use crate::ramp::Ramp;
use crate::retry::RetryBudget;
use crate::state::{COUNT_MAX, RULE_PROBES_MAX, SUCCESS_MAX};
use crate::sync::Arc;
use crate::window::{Shape, WindowKind, MAX_COUNT_WINDOW, MAX_TIME_BUCKETS};

/// Longest open duration, backoff cap, probe lease, slow-call threshold or
/// `abandoned_after`: one day. A longer value is almost always a unit mistake,
/// and a probe lease of years would let a lost probe wedge a breaker.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 60 * 60);

impl Breaker {
    /// A builder for a breaker on the default [`QuantaClock`] (or any clock,
    /// with [`Builder::build_with_clock`]).
    pub fn builder() -> Builder {
        Builder::new()
    }
}

/// Builds a [`Breaker`]: set the trip conditions, then `build()`.
///
/// Every value is checked in `build`, which names the field and the allowed
/// range of the first bad one. Defaults: no trip condition (at least one is
/// required), a count window of 100 calls when a rate is set without a
/// window, `min_calls` 10 (or the count window's size if smaller), 1 half-open
/// probe, an open duration of 1 s doubling per trip in a row up to 3 × the
/// base (1, 2, 3 s; see [`open_duration`](Self::open_duration) for why) with
/// no jitter, a probe lease equal to the base open duration but at least
/// 30 s, no slow-call threshold, `abandoned_after` equal to the slow-call
/// threshold (else the probe lease), the unanswered rule on for calls whose
/// admission reads the clock (20 calls in a row, each held 250 ms or half the
/// shorter of the slow-call threshold and `abandoned_after`: see
/// [`unanswered`](Builder::unanswered)), no call counters, a tripping
/// verdict's upstream hint taken (capped at 10 min) and no other remembered.
/// Durations are at most [`MAX_DURATION`].
///
/// ```
/// use failfast::Breaker;
/// use std::time::Duration;
///
/// let breaker = Breaker::builder()
///     .consecutive_failures(5)                       // K failures in a row, or
///     .failure_rate(0.5)                             // half the window failing, or
///     .slow_call_rate(0.5)                           // half the window slow,
///     .slow_call_threshold(Duration::from_millis(500))
///     .count_window(20)                              // over the last 20 calls,
///     .min_calls(10)                                 // once 10 were seen.
///     .half_open_probes(3)
///     .open_duration(Duration::from_secs(10))
///     .backoff(2.0, Duration::from_secs(300))
///     .jitter(0.2)
///     .build()?;
/// # let _ = breaker;
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[must_use = "a builder does nothing until `build`"]
#[derive(Clone)]
pub struct Builder {
    consecutive_failures: Option<u32>,
    failure_rate: Option<f64>,
    slow_call_rate: Option<f64>,
    slow_call_threshold: Option<Duration>,
    window: Option<WindowKind>,
    min_calls: Option<u32>,
    probes: u32,
    probe_lease: Option<Duration>,
    abandoned_after: Option<Duration>,
    /// The unanswered rule: the default, off, or `unanswered(calls, after)`,
    /// as called last.
    unanswered: UnansweredKnob,
    open_base: Duration,
    multiplier: f64,
    cap: Option<Duration>,
    jitter: f64,
    /// `backoff_off()`: the cap follows the base, whatever it is set to later.
    backoff_off: bool,
    count_calls: bool,
    observer: Option<std::sync::Arc<dyn Observer>>,
    id: Option<u32>,
    /// `ramp_curve(window, min_fraction, aggression)`, as called last.
    ramp: Option<(Duration, f64, f64)>,
    /// The half-open rate rule: `None` off; else its failure and slow-call
    /// rates, each `None` for the closed state's.
    half_open_rates: Option<(Option<f64>, Option<f64>)>,
    /// Which upstream hints are taken, and their cap.
    hints: Hints,
    /// The named outlier pool of a registry's key (see
    /// [`Builder::outlier_pool`]).
    outlier_pool: Option<std::sync::Arc<str>>,
    /// The retry budget; `None`: off (the default).
    retry_budget: Option<RetryBudget>,
}

/// The default base open duration ([`Builder::open_duration`]): 1 s.
pub(crate) const DEFAULT_OPEN: Duration = Duration::from_secs(1);

/// The default backoff ([`Builder::backoff`]): ×2 per trip in a row, up to
/// this many times the base open duration (1, 2, 3 s by default).
pub(crate) const DEFAULT_MULTIPLIER: f64 = 2.0;
pub(crate) const DEFAULT_CAP_BASES: u32 = 3;

/// The shortest default probe lease ([`Builder::probe_lease`]): 30 s, or
/// the base open duration if longer.
pub(crate) const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// How a builder was told about the unanswered rule.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum UnansweredKnob {
    /// Not told: the default rule, fitted to the slow-call threshold and
    /// `abandoned_after` ([`Unanswered::default_within`]).
    Default,
    /// `unanswered_off()`.
    Off,
    /// `unanswered(calls, after)`.
    Rule(u32, Duration),
}

/// The default [`Builder::max_hint`]: 10 minutes.
pub(crate) const DEFAULT_MAX_HINT: Duration = Duration::from_secs(600);

/// Which upstream hints a breaker takes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Hints {
    /// The default: the hint of a verdict that trips (or reopens) the
    /// breaker, capped at [`DEFAULT_MAX_HINT`]; nothing is remembered.
    Tripping,
    /// `hints()` / `max_hint(d)`: every verdict's hint, remembered until it
    /// elapses (a slot in the breaker's storage), capped at `d`.
    Remembered(Duration),
    /// `hints_off()`: none.
    Off,
}

/// The longest open period a span holds: (2²³ − 1) units of 2²⁴ ns, 39 h.
const MAX_HINT_LIMIT: Duration = Duration::from_secs(39 * 3600);

impl Default for Builder {
    fn default() -> Self {
        Builder {
            consecutive_failures: None,
            failure_rate: None,
            slow_call_rate: None,
            slow_call_threshold: None,
            window: None,
            min_calls: None,
            probes: 1,
            probe_lease: None,
            abandoned_after: None,
            unanswered: UnansweredKnob::Default,
            open_base: DEFAULT_OPEN,
            multiplier: DEFAULT_MULTIPLIER,
            cap: None,
            jitter: 0.0,
            backoff_off: false,
            count_calls: false,
            observer: None,
            id: None,
            ramp: None,
            half_open_rates: None,
            hints: Hints::Tripping,
            outlier_pool: None,
            retry_budget: None,
        }
    }
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("consecutive_failures", &self.consecutive_failures)
            .field("failure_rate", &self.failure_rate)
            .field("slow_call_rate", &self.slow_call_rate)
            .field("slow_call_threshold", &self.slow_call_threshold)
            .field("window", &self.window)
            .field("min_calls", &self.min_calls)
            .field("probes", &self.probes)
            .field("probe_lease", &self.probe_lease)
            .field("abandoned_after", &self.abandoned_after)
            .field("unanswered", &self.unanswered)
            .field("open_base", &self.open_base)
            .field("multiplier", &self.multiplier)
            .field("cap", &self.cap)
            .field("jitter", &self.jitter)
            .field("backoff_off", &self.backoff_off)
            .field("count_calls", &self.count_calls)
            .field("observer", &self.observer.is_some())
            .field("id", &self.id)
            .field("ramp", &self.ramp)
            .field("half_open_rates", &self.half_open_rates)
            .field("hints", &self.hints)
            .field("outlier_pool", &self.outlier_pool)
            .field("retry_budget", &self.retry_budget)
            .finish()
    }
}

impl Builder {
    /// A builder with the defaults listed above.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Envoy's outlier detection, as a breaker: ejected after 5 consecutive
    /// failures (`consecutive_5xx`), for a 30 s base ejection time growing
    /// with each ejection in a row up to 300 s (`max_ejection_time`). Envoy
    /// grows the time linearly (30, 60, 90 s …); this preset doubles it (30,
    /// 60, 120, 240, 300 s). Envoy's `max_ejection_percent` (10 %) is a
    /// registry setting here:
    /// [`RegistryBuilder::max_open`](crate::RegistryBuilder::max_open).
    ///
    /// ```
    /// use failfast::Builder;
    /// use std::time::Duration;
    ///
    /// let config = Builder::envoy_outlier_detection().build_config()?;
    /// assert_eq!(config.consecutive_failures(), Some(5));
    /// assert_eq!(config.open_duration(1), Duration::from_secs(30));
    /// assert_eq!(config.open_duration_cap(), Duration::from_secs(300));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn envoy_outlier_detection() -> Builder {
        Builder::new()
            .consecutive_failures(5)
            .open_duration(Duration::from_secs(30))
            .backoff(2.0, Duration::from_secs(300))
    }

    /// Resilience4j's default circuit breaker: open at a 50 % failure rate
    /// over the last 100 calls, once 100 were seen; slow calls are those of
    /// 60 s or more, and 100 % of them opens it; open for 60 s (no backoff),
    /// then 10 calls probe.
    ///
    /// ```
    /// use failfast::{Builder, WindowKind};
    /// use std::time::Duration;
    ///
    /// let config = Builder::resilience4j_defaults().build_config()?;
    /// assert_eq!(config.failure_rate(), Some(0.5));
    /// assert_eq!(config.window(), WindowKind::Count { size: 100 });
    /// assert_eq!(config.min_calls(), 100);
    /// assert_eq!(config.half_open_probes(), 10);
    /// assert_eq!(config.open_duration(3), Duration::from_secs(60));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn resilience4j_defaults() -> Builder {
        Builder::new()
            .failure_rate(0.5)
            .slow_call_rate(1.0)
            .slow_call_threshold(Duration::from_secs(60))
            .count_window(100)
            .min_calls(100)
            .open_duration(Duration::from_secs(60))
            .backoff_off()
            .half_open_probes(10)
    }

    /// Trip after `k` failures in a row (1..=32767). Ignored calls and
    /// successes end a run.
    pub fn consecutive_failures(mut self, k: u32) -> Self {
        self.consecutive_failures = Some(k);
        self
    }

    /// Trip when the window's failure rate reaches `rate`, in (0, 1].
    pub fn failure_rate(mut self, rate: f64) -> Self {
        self.failure_rate = Some(rate);
        self
    }

    /// Trip when the window's slow-call rate reaches `rate`, in (0, 1].
    /// Needs [`slow_call_threshold`](Self::slow_call_threshold).
    pub fn slow_call_rate(mut self, rate: f64) -> Self {
        self.slow_call_rate = Some(rate);
        self
    }

    /// A call that takes at least `threshold` is slow. Setting it turns on
    /// call timing (one clock read at admission, one at the verdict), and a
    /// slow probe reopens the breaker even without a slow-call rate.
    pub fn slow_call_threshold(mut self, threshold: Duration) -> Self {
        self.slow_call_threshold = Some(threshold);
        self
    }

    /// Measure rates over the last `size` calls (1..=4096).
    pub fn count_window(mut self, size: u32) -> Self {
        self.window = Some(WindowKind::Count { size });
        self
    }

    /// Measure rates over the last `length`, in `buckets` slices (1..=1024;
    /// each slice at least 1 µs). The window slides by `length / buckets`.
    pub fn time_window(mut self, length: Duration, buckets: u32) -> Self {
        self.window = Some(WindowKind::Time { length, buckets });
        self
    }

    /// Judge rates only once the window holds `n` calls (1..=window size).
    /// Rates are judged when a failure or a slow call is recorded.
    pub fn min_calls(mut self, n: u32) -> Self {
        self.min_calls = Some(n);
        self
    }

    /// Probes admitted per half-open round (1..=255); all must succeed fast to close.
    pub fn half_open_probes(mut self, p: u32) -> Self {
        self.probes = p;
        self
    }

    /// The half-open rate rule (Resilience4j's): a round of
    /// [`half_open_probes`](Self::half_open_probes) probes closes unless its
    /// probes' failure rate or slow-call rate reaches a threshold, instead of
    /// needing every probe to succeed fast. The thresholds are the closed
    /// state's ([`failure_rate`](Self::failure_rate), 50 % when the policy
    /// has none; [`slow_call_rate`](Self::slow_call_rate), none when it has
    /// none) unless set with [`half_open_failure_rate`](Self::half_open_failure_rate)
    /// and [`half_open_slow_call_rate`](Self::half_open_slow_call_rate).
    ///
    /// A probe dropped early, or ignored, frees its slot and counts toward
    /// neither rate; a probe abandoned after it hung, or still out when the
    /// probe lease ends, counts as a failure. A slow failure counts toward
    /// both rates (Resilience4j's `SLOW_ERROR`). The round is decided as
    /// soon as its outcome is certain: it reopens once a rate is reached,
    /// and closes once the answers still to come, were they all slow
    /// failures, could reach neither — at 50 % of ten probes, the sixth
    /// success of a clean round closes it, and the four probes still out
    /// then answer a round that is over (their verdicts change nothing).
    /// Under the rule a round has at most 31 probes (the counts share the
    /// state word).
    ///
    /// ```
    /// use failfast::{Breaker, ManualClock, Nanos, State};
    /// use std::time::Duration;
    ///
    /// let breaker = Breaker::builder()
    ///     .consecutive_failures(1)
    ///     .open_duration(Duration::from_secs(10))
    ///     .half_open_probes(10)
    ///     .half_open_rate_rule()
    ///     .build_with_clock(ManualClock::new())?;
    /// breaker.try_acquire_at(Nanos::ZERO)?.failure_at(Nanos::ZERO);
    /// let at = Nanos::from_secs(10);
    /// let probes: Vec<_> = (0..10).map(|_| breaker.try_acquire_at(at).unwrap()).collect();
    /// for (i, probe) in probes.into_iter().enumerate() {
    ///     // One flaky probe out of ten: 10 % < 50 %.
    ///     if i == 3 { probe.failure_at(at); } else { probe.success_at(at); }
    /// }
    /// assert_eq!(breaker.state(), State::Closed);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn half_open_rate_rule(mut self) -> Self {
        self.half_open_rates.get_or_insert((None, None));
        self
    }

    /// The half-open rate rule with this failure-rate threshold, in (0, 1].
    pub fn half_open_failure_rate(mut self, rate: f64) -> Self {
        self.half_open_rates.get_or_insert((None, None)).0 = Some(rate);
        self
    }

    /// The half-open rate rule with this slow-call-rate threshold, in (0, 1]
    /// (needs a [`slow_call_threshold`](Self::slow_call_threshold)).
    pub fn half_open_slow_call_rate(mut self, rate: f64) -> Self {
        self.half_open_rates.get_or_insert((None, None)).1 = Some(rate);
        self
    }

    /// Slow start after a recovery: when a probe round closes the breaker,
    /// it admits a rising share of calls over `window` and turns the rest
    /// away ([`RejectReason::Ramp`](crate::RejectReason::Ramp), with a
    /// retry time of one step of the curve), so an upstream that has just
    /// come back is not handed its whole backlog at once. Envoy's curve and
    /// defaults: from 10 % up in a straight line (see
    /// [`ramp_curve`](Self::ramp_curve)). Off by default. A trip during the
    /// ramp is a failed recovery: it reopens at the next backoff step.
    ///
    /// ```
    /// use failfast::{Breaker, ManualClock, Nanos, RejectReason, State};
    /// use std::time::Duration;
    ///
    /// let breaker = Breaker::builder()
    ///     .consecutive_failures(1)
    ///     .open_duration(Duration::from_secs(10))
    ///     .ramp(Duration::from_secs(30))
    ///     .build_with_clock(ManualClock::new())?;
    /// breaker.try_acquire_at(Nanos::ZERO)?.failure_at(Nanos::ZERO);
    /// let closed = Nanos::from_secs(10);
    /// breaker.try_acquire_at(closed)?.success_at(closed);
    /// assert_eq!(breaker.state(), State::Closed);
    /// // Just after the close, about one call in ten gets in.
    /// let admitted = (0..1000)
    ///     .filter(|_| breaker.try_acquire_at(closed).map(|p| p.ignore()).is_ok())
    ///     .count();
    /// assert!((90..=110).contains(&admitted), "{admitted}");
    /// let turned_away = (0..20).find_map(|_| breaker.try_acquire_at(closed).err()).unwrap();
    /// assert_eq!(turned_away.reason(), RejectReason::Ramp);
    /// // After the window, everyone.
    /// let after = Nanos::from_secs(40);
    /// assert!((0..1000).all(|_| breaker.try_acquire_at(after).map(|p| p.ignore()).is_ok()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ramp(self, window: Duration) -> Self {
        self.ramp_curve(window, Ramp::DEFAULT_MIN_FRACTION, Ramp::DEFAULT_AGGRESSION)
    }

    /// [`ramp`](Self::ramp) with Envoy's slow-start curve spelled out: at
    /// time `t` into the window the share admitted is
    /// `max(min_fraction, (t / window)^(1 / aggression))`. `window` from
    /// 1 ms to 1 day; `min_fraction` in [0, 1] (Envoy's
    /// `min_weight_percent`, default 10 %); `aggression` in (0, 100]
    /// (Envoy's default 1.0: a line; above 1 admits more early).
    pub fn ramp_curve(mut self, window: Duration, min_fraction: f64, aggression: f64) -> Self {
        self.ramp = Some((window, min_fraction, aggression));
        self
    }

    /// Remember the upstream's hints ("do not come back for `d`": a 429's
    /// or 503's `Retry-After`, a gRPC pushback, which the layers and the
    /// reqwest middleware pass on; see
    /// [`Permit::record_hinted`](crate::Permit::record_hinted)) of verdicts
    /// that do not trip, capped at 10 minutes ([`max_hint`](Self::max_hint)
    /// sets the cap).
    ///
    /// By default a breaker takes the hint of the verdict that trips it (or
    /// fails its probe) and no other: that hint travels with the verdict
    /// and costs no memory. With `hints()` a trip opens for at least the
    /// latest hint that has not elapsed (capped), never shorter than the
    /// backoff schedule's period, with or without
    /// [`backoff_off`](Self::backoff_off): the hint of a verdict that does
    /// not trip is remembered until it elapses and lengthens the next trip
    /// only. A hint never turns a call away while Closed. The breaker keeps
    /// the remembered hint in one slot: 8 bytes in its window's allocation,
    /// or a 32-byte allocation of its own for a policy with no window and
    /// no counters (see [`Breaker::memory_bytes`]). While a remembered hint
    /// runs, the breaker is not [pristine](crate::Breaker::is_pristine_at):
    /// a registry keeps it, so that its next trip still opens for the hint.
    ///
    /// ```
    /// use failfast::{Breaker, ManualClock, Nanos, Outcome};
    /// use std::time::Duration;
    ///
    /// let breaker = Breaker::builder()
    ///     .consecutive_failures(2)
    ///     .open_duration(Duration::from_secs(5))
    ///     .hints()
    ///     .build_with_clock(ManualClock::new())?;
    /// assert_eq!(breaker.config().max_hint(), Some(Duration::from_secs(600)));
    /// assert!(breaker.config().remembers_hints());
    /// // A 503 with `Retry-After: 120` that does not trip...
    /// let retry_after = Some(Duration::from_secs(120));
    /// breaker.try_acquire_at(Nanos::ZERO)?.record_hinted_at(Outcome::Failure, retry_after, Nanos::ZERO);
    /// // ...lengthens the next trip, a failure with no hint.
    /// breaker.try_acquire_at(Nanos::ZERO)?.failure_at(Nanos::ZERO);
    /// let rejected = breaker.try_acquire_at(Nanos::from_secs(20)).unwrap_err();
    /// assert!(rejected.retry_after() >= Some(Duration::from_secs(100)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hints(self) -> Self {
        self.max_hint(DEFAULT_MAX_HINT)
    }

    /// [`hints`](Self::hints), with the longest open period a hint may ask
    /// for: above 0, up to 39 hours. A cap below the open duration makes
    /// hints change nothing.
    pub fn max_hint(mut self, max: Duration) -> Self {
        self.hints = Hints::Remembered(max);
        self
    }

    /// Puts the breakers of this configuration in the outlier pool `name`
    /// of their registry, to be compared with that pool's hosts only (the
    /// endpoints of one service, say) instead of the registry's whole
    /// `"default"` pool. Set it on a key's override
    /// ([`RegistryBuilder::override_key`](crate::RegistryBuilder::override_key))
    /// or a registry's template; it needs
    /// [`RegistryBuilder::outliers`](crate::RegistryBuilder::outliers).
    /// A breaker built alone is in no pool: [`build`](Self::build) refuses
    /// the setting.
    ///
    /// ```
    /// use failfast::{Breaker, Outliers, Registry};
    ///
    /// let breaker = || Breaker::builder().consecutive_failures(5);
    /// let registry = Registry::<str>::builder(breaker())
    ///     .outliers(Outliers::new())
    ///     .override_key("payments-1", breaker().outlier_pool("payments"))
    ///     .build()?;
    /// let pools: Vec<_> = registry.outlier_pools().into_iter().map(|p| p.name).collect();
    /// assert_eq!(pools.len(), 2); // "default" and "payments"
    /// let alone = breaker().outlier_pool("payments").build().unwrap_err();
    /// assert_eq!(alone.field(), "outlier_pool");
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn outlier_pool(mut self, name: impl Into<std::sync::Arc<str>>) -> Self {
        self.outlier_pool = Some(name.into());
        self
    }

    /// Take no hint from upstreams, not even a tripping verdict's (the
    /// behaviour before hints were taken by default): every verdict's hint
    /// is ignored, and the breaker keeps no slot to remember one.
    ///
    /// ```
    /// use failfast::{Breaker, ManualClock, Nanos, Outcome};
    /// use std::time::Duration;
    ///
    /// let trip_with_a_hint = |breaker: Breaker<ManualClock>| {
    ///     let retry_after = Some(Duration::from_secs(120));
    ///     let t = breaker.try_acquire_at(Nanos::ZERO).unwrap()
    ///         .record_hinted_at(Outcome::Failure, retry_after, Nanos::ZERO);
    ///     t.and_then(|t| t.open_for)
    /// };
    /// let builder = Breaker::builder().consecutive_failures(1).open_duration(Duration::from_secs(5));
    /// // By default the tripping verdict's hint sets the open period...
    /// let taken = trip_with_a_hint(builder.clone().build_with_clock(ManualClock::new())?);
    /// assert!(taken >= Some(Duration::from_secs(120)));
    /// // ...and with hints off the schedule alone does.
    /// let off = trip_with_a_hint(builder.hints_off().build_with_clock(ManualClock::new())?);
    /// assert_eq!(off, Some(Duration::from_secs(5)));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn hints_off(mut self) -> Self {
        self.hints = Hints::Off;
        self
    }

    /// Gives each breaker of this configuration a retry budget (off by
    /// default): [`RetryBudget::tokens`] (gRPC's retry throttling) or
    /// [`RetryBudget::ratio`] (Finagle's budget). Retries then ask
    /// [`Breaker::try_retry`], which admits one only when the breaker
    /// admits a call and the budget has room; first tries go through
    /// [`try_acquire`](Breaker::try_acquire) as before (with a ratio budget
    /// each one deposits its share of a retry, and its admission reads the
    /// clock, so a permit dropped without a verdict is judged by its age,
    /// as in an outlier pool). The budget takes 8 bytes per breaker
    /// (tokens) or 16 (ratio), plus 8 for the count of refused retries when
    /// the breaker [counts calls](Self::count_calls).
    ///
    /// ```
    /// use failfast::{Breaker, ManualClock, Nanos, RejectReason, RetryBudget};
    /// use std::time::Duration;
    ///
    /// let breaker = Breaker::builder()
    ///     .consecutive_failures(5)
    ///     .retry_budget(RetryBudget::ratio(0.1, Duration::from_secs(10), 1))
    ///     .build_with_clock(ManualClock::new())?;
    /// let now = Nanos::ZERO;
    /// // The reserve: 1 per second × 10 s = 10 retries, before any traffic.
    /// for _ in 0..10 {
    ///     breaker.try_retry_at(now)?.success_at(now);
    /// }
    /// let refused = breaker.try_retry_at(now).unwrap_err();
    /// assert_eq!(refused.reason(), RejectReason::RetryBudget);
    /// assert_eq!(refused.retry_after(), Some(Duration::from_secs(5))); // the next half of the TTL
    /// // Ten first tries deposit one more retry.
    /// for _ in 0..10 {
    ///     breaker.try_acquire_at(now)?.success_at(now);
    /// }
    /// assert!(breaker.try_retry_at(now).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// A bad budget is refused by [`build`](Self::build), naming the field:
    ///
    /// ```
    /// use failfast::{Breaker, RetryBudget};
    ///
    /// let err = Breaker::builder().consecutive_failures(5).retry_budget(RetryBudget::tokens(2000, 0.1)).build().unwrap_err();
    /// assert_eq!(err.to_string(), "invalid failfast config: retry_budget.max_tokens = 2000; allowed: 1..=1000");
    /// ```
    pub fn retry_budget(mut self, budget: RetryBudget) -> Self {
        self.retry_budget = Some(budget);
        self
    }

    /// No retry budget (the default): [`Breaker::try_retry`] is then
    /// [`Breaker::try_acquire`], and the breaker keeps no slot for a budget.
    ///
    /// ```
    /// use failfast::{Breaker, RetryBudget};
    ///
    /// let plain = Breaker::builder().consecutive_failures(5).build()?;
    /// let off = Breaker::builder()
    ///     .consecutive_failures(5)
    ///     .retry_budget(RetryBudget::finagle())
    ///     .retry_budget_off()
    ///     .build()?;
    /// assert_eq!(off.config().retry_budget(), None);
    /// assert_eq!(off.memory_bytes(), plain.memory_bytes());
    /// assert!(off.try_retry().is_ok());
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn retry_budget_off(mut self) -> Self {
        self.retry_budget = None;
        self
    }

    /// How long a half-open round may stay unresolved (a probe hung or was
    /// forgotten) before the next request starts a new round. Default: the base
    /// open duration, but at least 30 s (a probe slower than a short open
    /// period must not be cut off: its success would come too late to
    /// count). Set it to your call timeout.
    pub fn probe_lease(mut self, lease: Duration) -> Self {
        self.probe_lease = Some(lease);
        self
    }

    /// A permit dropped without a verdict after being held at least `after`
    /// was abandoned: its caller gave up on a call that hung (a client that
    /// went away, an outer timeout, a cancelled future). It then counts
    /// against the dependency — as a slow call when the policy has a
    /// slow-call rate, else as a failure — and an abandoned probe fails its
    /// round. Dropped sooner it stays neutral. Default: the slow-call
    /// threshold if set, else the probe lease. Set it below your callers'
    /// outer timeouts (> 0, ≤ 1 day).
    ///
    /// Setting it makes every admission read the clock, so that a permit
    /// from a plain [`try_acquire`](Breaker::try_acquire) has an age too and
    /// its drop can be judged by it. Left unset, the age of a call is known
    /// when its admission read the clock anyway: [`call_async`](Breaker::call_async),
    /// the tower layers, half-open probes, `_at(now)` admissions, and
    /// breakers with a slow-call threshold or the unanswered rule; a plain
    /// `try_acquire` on a breaker that times nothing skips that read (the
    /// cheapest path), so its drop stays neutral.
    ///
    /// ```
    /// use failfast::{Breaker, ManualClock, State};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let breaker = Breaker::builder()
    ///     .consecutive_failures(1)
    ///     .abandoned_after(Duration::from_secs(1))
    ///     .build_with_clock(clock.clone())?;
    /// let permit = breaker.try_acquire().unwrap(); // timed: abandoned_after is set
    /// clock.advance(Duration::from_secs(5)); // the call hung; the caller gave up
    /// drop(permit);
    /// assert_eq!(breaker.state(), State::Open);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn abandoned_after(mut self, after: Duration) -> Self {
        self.abandoned_after = Some(after);
        self
    }

    /// The unanswered rule: `calls` in a row, each dropped by its caller
    /// before any answer came and after being held at least `after`, with no
    /// verdict between them, trip the breaker ([`Reason::Unresponsive`]).
    ///
    /// **On by default** for every call whose admission reads the clock
    /// anyway — the tower layers, [`call_async`](Breaker::call_async), the
    /// reqwest middleware, `_at(now)` admissions, half-open probes, and
    /// every call of a breaker with a slow-call threshold — with **20
    /// calls**, each held at least **250 ms, or half the shorter of the
    /// slow-call threshold and `abandoned_after`** when that is shorter (so
    /// the default fits any threshold, and never makes a configuration fail
    /// to build). A plain [`try_acquire`](Breaker::try_acquire) on a
    /// breaker that times nothing does not read the clock for it: its drop
    /// stays neutral. The default rule is not a trip condition of its own:
    /// a builder with none still fails to build. Setting the rule here
    /// makes it one, and makes every admission read the clock (as
    /// [`abandoned_after`](Self::abandoned_after) does), so that a plain
    /// `try_acquire`'s drop is judged too. [`unanswered_off`](Self::unanswered_off)
    /// turns it off.
    ///
    /// It sees a hung upstream behind impatient clients. Clients that give
    /// up at 300 ms on a breaker whose slow-call threshold is 500 ms drop
    /// every call early; early drops are neutral (a drop proves nothing
    /// alone), so without this rule the breaker never opens while every
    /// call reaches the hung upstream. Against a healthy upstream, cancels
    /// come before its answers (younger than `after`), and any answer —
    /// a success, a failure, a business error — ends the run.
    ///
    /// **Why 20 and 250 ms** (the simulation `examples/unanswered_default`,
    /// on a manual clock, Poisson arrivals, no slow-call threshold; pinned
    /// by `tests/unanswered_default.rs`): behind clients that give up at
    /// 300 ms, a hung upstream's breaker opens after 23 calls at 10 calls/s
    /// (2.3 s) and 49 at 100 calls/s (0.5 s); behind 1 s clients, after 29
    /// (3.0 s) and 109 (1.2 s). No control trips: a healthy upstream
    /// (median 50 ms, p99 0.5 s) whose clients cancel at random (30 % within
    /// 1 s), or all give up at 100 ms or 300 ms, over 200,000 calls; a slow
    /// upstream that answers (median 1.5 s) while 30 %, 50 % or 80 % of its
    /// clients give up, over 100,000 calls. Ten calls trip that last control
    /// (with 80 % giving up, runs of ten unanswered drops between two
    /// answers come by chance); twenty never did. A shorter `after` catches
    /// more impatient clients (at 100 ms, clients of 100 ms) but opens on
    /// shorter pauses of a healthy upstream: with 20 calls it rides out a
    /// 750 ms pause at 250 ms and 500 ms at 100 ms.
    ///
    /// `calls`: 1..=255. `after`: more than zero and shorter than
    /// `abandoned_after` and the slow-call threshold (a drop that old is
    /// already counted as abandoned). A half-open probe dropped unanswered
    /// after `after` fails its round ([`Reason::ProbeAbandoned`]). Only a
    /// call whose admission read the clock has an age (see
    /// [`abandoned_after`](Self::abandoned_after)); a response that began
    /// to arrive is answered (its stream is judged by its progress).
    ///
    /// The run lives in the breaker's state word and is written only by
    /// unanswered drops; a success that ends it is the first success after
    /// them, which takes the verdict's slower path once, as the first
    /// success after a failure does.
    ///
    /// ```
    /// use failfast::{Breaker, ManualClock, Nanos, Reason, State};
    /// use std::time::Duration;
    ///
    /// // The default: 20 calls, each held at least 250 ms (or half the
    /// // slow-call threshold, if shorter).
    /// let default = Breaker::builder().consecutive_failures(5).build_config()?;
    /// assert_eq!(default.unanswered(), Some((20, Duration::from_millis(250))));
    /// let fitted = Breaker::builder()
    ///     .consecutive_failures(5)
    ///     .slow_call_threshold(Duration::from_millis(300))
    ///     .build_config()?;
    /// assert_eq!(fitted.unanswered(), Some((20, Duration::from_millis(150))));
    ///
    /// let clock = ManualClock::new();
    /// let breaker = Breaker::builder()
    ///     .slow_call_threshold(Duration::from_millis(500))
    ///     .unanswered(3, Duration::from_millis(200))
    ///     .build_with_clock(clock.clone())?;
    /// for _ in 0..3 {
    ///     let permit = breaker.try_acquire().unwrap();
    ///     clock.advance(Duration::from_millis(300)); // the client gives up at 300 ms
    ///     drop(permit);
    /// }
    /// assert_eq!(breaker.state(), State::Open);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    ///
    /// [`Reason::Unresponsive`]: crate::Reason::Unresponsive
    /// [`Reason::ProbeAbandoned`]: crate::Reason::ProbeAbandoned
    pub fn unanswered(mut self, calls: u32, after: Duration) -> Self {
        self.unanswered = UnansweredKnob::Rule(calls, after);
        self
    }

    /// Turns the unanswered rule off, the default one included: a drop
    /// before the slow-call threshold and `abandoned_after` is neutral
    /// whatever its age (the behaviour before the rule was on by default).
    ///
    /// ```
    /// use failfast::Breaker;
    ///
    /// let config = Breaker::builder().consecutive_failures(5).unanswered_off().build_config()?;
    /// assert_eq!(config.unanswered(), None);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn unanswered_off(mut self) -> Self {
        self.unanswered = UnansweredKnob::Off;
        self
    }

    /// The first open period (> 0, ≤ 1 day). Default: 1 s, doubling per
    /// trip in a row up to 3 s (the default [`backoff`](Self::backoff) is
    /// ×2 up to 3 × the base): 1, 2, 3, 3 … s.
    ///
    /// Why so short: one probe per open period is all an open breaker
    /// sends, so a long period saves the sick host almost nothing and keeps
    /// every caller of a recovered one waiting. Replayed on a
    /// [`ManualClock`](crate::ManualClock) (`tests/incident_recovery.rs`:
    /// 100 calls/s, callers that give up at 1 s, an upstream slow, hung,
    /// answering 503 or refusing connections for 10 s to 30 min), this
    /// schedule lets the first call through at most 4.0 s after the
    /// upstream is back (3.0 s when it failed fast), and the sick host gets
    /// at most 0.41 calls per second of the outage after the trip. The old
    /// default, 30 s doubling up to 5 min, took 50–52 s after the measured
    /// 40 s incident and up to 159 s after a 30 min one (nginx and HAProxy
    /// took 4.9 s and 4.2 s in the real 40 s incident). The probe lease does
    /// not follow the base below 30 s, so a probe that takes a few seconds
    /// still closes the breaker.
    ///
    /// ```
    /// use failfast::Breaker;
    /// use std::time::Duration;
    ///
    /// let c = Breaker::builder().consecutive_failures(3).build_config()?;
    /// let secs = |trips| c.open_duration(trips).as_secs();
    /// assert_eq!([secs(1), secs(2), secs(3), secs(9)], [1, 2, 3, 3]);
    /// assert_eq!(c.probe_lease(), Duration::from_secs(30));
    /// // A base of your own keeps the shape: ×2 up to 3 × the base.
    /// let c = Breaker::builder()
    ///     .consecutive_failures(3)
    ///     .open_duration(Duration::from_secs(10))
    ///     .build_config()?;
    /// assert_eq!(c.open_duration_cap(), Duration::from_secs(30));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn open_duration(mut self, base: Duration) -> Self {
        self.open_base = base;
        self
    }

    /// [`open_duration`](Self::open_duration) and [`backoff`](Self::backoff)
    /// in one call: `base`, × `multiplier` per trip in a row up to `cap`.
    /// The schedule this crate used by default before its incident replay,
    /// 30 s doubling up to 5 min, is
    /// `open_schedule(Duration::from_secs(30), 2.0, Duration::from_secs(300))`.
    ///
    /// ```
    /// use failfast::Breaker;
    /// use std::time::Duration;
    ///
    /// let c = Breaker::builder()
    ///     .consecutive_failures(3)
    ///     .open_schedule(Duration::from_secs(30), 2.0, Duration::from_secs(300))
    ///     .build_config()?;
    /// let secs: Vec<u64> = (1..=6).map(|trips| c.open_duration(trips).as_secs()).collect();
    /// assert_eq!(secs, [30, 60, 120, 240, 300, 300]);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn open_schedule(self, base: Duration, multiplier: f64, cap: Duration) -> Self {
        self.open_duration(base).backoff(multiplier, cap)
    }

    /// Each trip in a row multiplies the open period by `multiplier` (1..=1000)
    /// up to `cap` (≥ the base, ≤ 1 day). Default: ×2 up to 3 × the base
    /// (at most a day). The step stops counting at the first step that
    /// opens for the cap (Envoy's ejection multiplier does), so each base
    /// period of healthy time takes one step off and `cap step × base` of
    /// health brings the period back to the base, however long the host
    /// flapped before.
    pub fn backoff(mut self, multiplier: f64, cap: Duration) -> Self {
        self.multiplier = multiplier;
        self.cap = Some(cap);
        self.backoff_off = false;
        self
    }

    /// Every open period lasts the base [`open_duration`](Self::open_duration)
    /// (minus jitter), however many trips in a row.
    ///
    /// ```
    /// use failfast::Breaker;
    /// use std::time::Duration;
    ///
    /// let b = Breaker::builder()
    ///     .consecutive_failures(3)
    ///     .open_duration(Duration::from_secs(10))
    ///     .backoff_off()
    ///     .build()?;
    /// assert_eq!(b.config().open_duration(5), Duration::from_secs(10));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn backoff_off(mut self) -> Self {
        self.multiplier = 1.0;
        self.cap = None;
        self.backoff_off = true;
        self
    }

    /// Shorten each open period by up to this fraction, in [0, 1), chosen by a
    /// hash of the breaker's id and generation: deterministic, no RNG, and
    /// different for each breaker, so hosts and replicas do not probe at once.
    pub fn jitter(mut self, fraction: f64) -> Self {
        self.jitter = fraction;
        self
    }

    /// Keep lifetime counters (admitted, rejected, outcomes, slow) per breaker,
    /// at the cost of one read-modify-write per admission and per verdict.
    pub fn count_calls(mut self, on: bool) -> Self {
        self.count_calls = on;
        self
    }

    /// Notify `observer` of every transition. A cloned builder shares it.
    pub fn observer(mut self, observer: impl Observer) -> Self {
        self.observer = Some(std::sync::Arc::new(observer));
        self
    }

    /// The breaker's id: the seed of its jitter, reported in each
    /// [`Transition`](crate::Transition). Without one, each breaker this
    /// builder builds gets its own, drawn from the process's random hash
    /// keys: breakers and replicas spread their probes without configuration.
    /// Set it for a reproducible schedule (tests, simulations).
    pub fn id(mut self, id: u32) -> Self {
        self.id = Some(id);
        self
    }

    /// Validates and builds a breaker on the default [`QuantaClock`].
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first invalid field and its allowed range.
    pub fn build(self) -> Result<Breaker<QuantaClock>, ConfigError> {
        self.build_with_clock(QuantaClock::new())
    }

    /// Validates and builds a breaker on `clock`.
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build).
    pub fn build_with_clock<C: Clock>(self, clock: C) -> Result<Breaker<C>, ConfigError> {
        if let Some(pool) = &self.outlier_pool {
            return Err(ConfigError::new(
                "outlier_pool",
                "only for a registry's keys (RegistryBuilder::outliers)",
                pool,
            ));
        }
        let id = self.id.unwrap_or_else(distinct_id);
        Ok(Breaker::from_shared(self.build_shared(clock)?, id))
    }

    /// Validates the configuration alone.
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build).
    pub fn build_config(&self) -> Result<Config, ConfigError> {
        self.validate()
    }

    pub(crate) fn build_shared<C: Clock>(self, clock: C) -> Result<Arc<Shared<C>>, ConfigError> {
        let config = self.validate()?;
        check_resolution(&config, clock.resolution())?;
        Ok(Arc::new(Shared::new(config, clock, self.observer)))
    }

    fn validate(&self) -> Result<Config, ConfigError> {
        fn rate(field: &'static str, r: Option<f64>) -> Result<Option<Rate>, ConfigError> {
            match r {
                Some(r) if !(r > 0.0 && r <= 1.0) => Err(ConfigError::new(field, "(0, 1]", r)),
                Some(r) => Ok(Some(Rate::new(r))),
                None => Ok(None),
            }
        }
        if let Some(k) = self.consecutive_failures {
            if k == 0 || k > COUNT_MAX {
                return Err(ConfigError::new("consecutive_failures", "1..=32767", k));
            }
        }
        let failure_rate = rate("failure_rate", self.failure_rate)?;
        let slow_call_rate = rate("slow_call_rate", self.slow_call_rate)?;
        if let Some(t) = self.slow_call_threshold {
            if t.is_zero() || t > MAX_DURATION {
                return Err(ConfigError::new(
                    "slow_call_threshold",
                    "> 0 and ≤ 1 day",
                    t,
                ));
            }
        }
        if slow_call_rate.is_some() && self.slow_call_threshold.is_none() {
            return Err(ConfigError::new(
                "slow_call_threshold",
                "a duration > 0 whenever slow_call_rate is set",
                self.slow_call_threshold,
            ));
        }
        if self.consecutive_failures.is_none()
            && failure_rate.is_none()
            && slow_call_rate.is_none()
            && !matches!(self.unanswered, UnansweredKnob::Rule(..))
        {
            return Err(ConfigError::new(
                "trip condition",
                "at least one of consecutive_failures, failure_rate, slow_call_rate, unanswered",
                "none",
            ));
        }
        let uses_rates = failure_rate.is_some() || slow_call_rate.is_some();
        let window = match self.window {
            Some(WindowKind::Count { size }) if size == 0 || size > MAX_COUNT_WINDOW => {
                return Err(ConfigError::new("count_window", "1..=4096 calls", size));
            }
            Some(WindowKind::Time { buckets, .. })
                if buckets == 0 || buckets > MAX_TIME_BUCKETS =>
            {
                return Err(ConfigError::new("time_window.buckets", "1..=1024", buckets));
            }
            Some(WindowKind::Time { length, buckets })
                if length.as_nanos() / u128::from(buckets) < 1_000 =>
            {
                return Err(ConfigError::new(
                    "time_window.length",
                    "at least 1 µs per bucket",
                    length,
                ));
            }
            Some(WindowKind::None) | None if uses_rates => WindowKind::Count { size: 100 },
            Some(w) => w,
            None => WindowKind::None,
        };
        let min_calls = match (window, self.min_calls) {
            (WindowKind::Count { size }, Some(n)) if n == 0 || n > size => {
                return Err(ConfigError::new(
                    "min_calls",
                    "1..=the count window's size",
                    n,
                ));
            }
            (WindowKind::Time { .. }, Some(n))
                if n == 0 || u64::from(n) > crate::window::time::BUCKET_LIMIT =>
            {
                return Err(ConfigError::new("min_calls", "1..=1048576", n));
            }
            (WindowKind::None, Some(0)) => {
                return Err(ConfigError::new("min_calls", "1..=u32::MAX (no window)", 0));
            }
            (_, Some(n)) => n,
            (WindowKind::Count { size }, None) => size.min(10),
            (_, None) => 10,
        };
        if self.probes == 0 || self.probes > SUCCESS_MAX {
            return Err(ConfigError::new("half_open_probes", "1..=255", self.probes));
        }
        if self.open_base.is_zero() || self.open_base > MAX_DURATION {
            return Err(ConfigError::new(
                "open_duration",
                "> 0 and ≤ 1 day",
                self.open_base,
            ));
        }
        if !(self.multiplier >= 1.0 && self.multiplier <= 1000.0) {
            return Err(ConfigError::new(
                "backoff.multiplier",
                "1.0..=1000.0",
                self.multiplier,
            ));
        }
        let cap = match (self.cap, self.backoff_off) {
            (_, true) => self.open_base,
            (Some(cap), false) => cap,
            (None, false) => self
                .open_base
                .saturating_mul(DEFAULT_CAP_BASES)
                .min(MAX_DURATION.max(self.open_base)),
        };
        if cap < self.open_base || cap > MAX_DURATION {
            return Err(ConfigError::new(
                "backoff.cap",
                "at least open_duration and ≤ 1 day",
                cap,
            ));
        }
        if !(self.jitter >= 0.0 && self.jitter < 1.0) {
            return Err(ConfigError::new("jitter", "[0, 1)", self.jitter));
        }
        let probe_lease = self
            .probe_lease
            .unwrap_or(self.open_base.max(DEFAULT_LEASE));
        if probe_lease.is_zero() || probe_lease > MAX_DURATION {
            return Err(ConfigError::new(
                "probe_lease",
                "> 0 and ≤ 1 day",
                probe_lease,
            ));
        }
        let abandoned_after = self
            .abandoned_after
            .or(self.slow_call_threshold)
            .unwrap_or(probe_lease);
        if abandoned_after.is_zero() || abandoned_after > MAX_DURATION {
            return Err(ConfigError::new(
                "abandoned_after",
                "> 0 and ≤ 1 day",
                abandoned_after,
            ));
        }
        // A drop at least this old is already counted (abandoned, or slow).
        let limit = self
            .slow_call_threshold
            .map_or(abandoned_after, |t| t.min(abandoned_after));
        let unanswered = match self.unanswered {
            UnansweredKnob::Off => None,
            UnansweredKnob::Default => Unanswered::default_within(limit),
            UnansweredKnob::Rule(calls, _) if !(1..=SUCCESS_MAX).contains(&calls) => {
                return Err(ConfigError::new("unanswered.calls", "1..=255", calls));
            }
            UnansweredKnob::Rule(calls, after) => {
                if after.is_zero() || after >= limit {
                    return Err(ConfigError::new(
                        "unanswered.after",
                        "> 0 and shorter than abandoned_after and the slow-call threshold",
                        format_args!("{after:?} (the shorter of the two is {limit:?})"),
                    ));
                }
                Some(Unanswered { calls, after })
            }
        };
        let ramp = match self.ramp {
            None => None,
            Some((window, _, _)) if window < Duration::from_millis(1) || window > MAX_DURATION => {
                return Err(ConfigError::new("ramp.window", "1 ms..=1 day", window));
            }
            Some((_, floor, _)) if !(0.0..=1.0).contains(&floor) => {
                return Err(ConfigError::new("ramp.min_fraction", "[0, 1]", floor));
            }
            Some((_, _, aggression)) if !(aggression > 0.0 && aggression <= 100.0) => {
                return Err(ConfigError::new("ramp.aggression", "(0, 100]", aggression));
            }
            Some((window, floor, aggression)) => Some(Ramp::new(window, floor, aggression)),
        };
        let rule = match self.half_open_rates {
            None => None,
            Some(_) if self.probes > RULE_PROBES_MAX => {
                return Err(ConfigError::new(
                    "half_open_probes",
                    "1..=31 under the half-open rate rule",
                    self.probes,
                ));
            }
            Some((failure, slow)) => {
                let failure = rate("half_open_failure_rate", failure)?
                    .or(failure_rate)
                    .unwrap_or(Rate::new(0.5));
                let slow = match rate("half_open_slow_call_rate", slow)? {
                    Some(_) if self.slow_call_threshold.is_none() => {
                        return Err(ConfigError::new(
                            "slow_call_threshold",
                            "a duration > 0 whenever half_open_slow_call_rate is set",
                            "none",
                        ));
                    }
                    Some(r) => Some(r),
                    None => slow_call_rate,
                };
                Some(RoundRule::new(self.probes, failure, slow))
            }
        };
        let retry = self.retry_budget.map(RetryBudget::validate).transpose()?;
        let (max_hint, remembers_hints) = match self.hints {
            Hints::Tripping => (Some(DEFAULT_MAX_HINT), false),
            Hints::Remembered(max) if max.is_zero() || max > MAX_HINT_LIMIT => {
                return Err(ConfigError::new("max_hint", "> 0 and ≤ 39 h", max));
            }
            Hints::Remembered(max) => (Some(max), true),
            Hints::Off => (None, false),
        };
        Ok(Config {
            consecutive_failures: self.consecutive_failures,
            failure_rate,
            slow_call_rate,
            slow_call_threshold: self.slow_call_threshold,
            slow_nanos: self
                .slow_call_threshold
                .map_or(0, |t| Nanos::from_duration(t).as_nanos()),
            window,
            shape: Shape::of(window),
            min_calls,
            probes: self.probes,
            probe_lease,
            abandoned_after,
            unanswered,
            // The default rule judges the drops of calls whose admission
            // reads the clock anyway; a rule the user set dates them all.
            dates_drops: self.abandoned_after.is_some()
                || matches!(self.unanswered, UnansweredKnob::Rule(..)),
            backoff: Backoff::new(self.open_base, self.multiplier, cap, self.jitter),
            count_calls: self.count_calls,
            plain: window == WindowKind::None
                && self.slow_call_threshold.is_none()
                && !self.count_calls,
            ramp,
            rule,
            max_hint,
            remembers_hints,
            outlier_pool: self.outlier_pool.clone(),
            retry_budget: self.retry_budget,
            retry,
        })
    }
}

/// An id for a breaker built without one: a hash of nothing under a fresh
/// `RandomState`, whose keys are random per process and advance with each
/// call. Distinct for each breaker and each replica, with no shared state.
fn distinct_id() -> u32 {
    use std::hash::BuildHasher;
    let h = std::collections::hash_map::RandomState::new().hash_one(());
    (h ^ (h >> 32)) as u32
}

/// A builder's knobs as they were set (`None`: left to the default), read by
/// the config files to write a builder out.
#[cfg(feature = "serde")]
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Knobs {
    pub(crate) consecutive_failures: Option<u32>,
    pub(crate) failure_rate: Option<f64>,
    pub(crate) slow_call_rate: Option<f64>,
    pub(crate) slow_call_threshold: Option<Duration>,
    pub(crate) window: Option<WindowKind>,
    pub(crate) min_calls: Option<u32>,
    pub(crate) probes: u32,
    pub(crate) probe_lease: Option<Duration>,
    pub(crate) abandoned_after: Option<Duration>,
    pub(crate) unanswered: UnansweredKnob,
    pub(crate) open_base: Duration,
    /// `backoff(multiplier, cap)` as called last; `None` for the default
    /// backoff and after `backoff_off()`.
    pub(crate) backoff: Option<(f64, Duration)>,
    pub(crate) backoff_off: bool,
    pub(crate) jitter: f64,
    pub(crate) count_calls: bool,
    pub(crate) id: Option<u32>,
    /// `ramp_curve(window, min_fraction, aggression)`, as called last.
    pub(crate) ramp: Option<(Duration, f64, f64)>,
    /// The half-open rate rule: `None` off; else its two rates as set.
    pub(crate) half_open_rates: Option<(Option<f64>, Option<f64>)>,
    pub(crate) hints: Hints,
    pub(crate) outlier_pool: Option<std::sync::Arc<str>>,
    pub(crate) retry_budget: Option<RetryBudget>,
}

#[cfg(feature = "serde")]
impl Builder {
    /// The knobs as set (the observer aside: it is code, not data).
    pub(crate) fn knobs(&self) -> Knobs {
        Knobs {
            consecutive_failures: self.consecutive_failures,
            failure_rate: self.failure_rate,
            slow_call_rate: self.slow_call_rate,
            slow_call_threshold: self.slow_call_threshold,
            window: self.window,
            min_calls: self.min_calls,
            probes: self.probes,
            probe_lease: self.probe_lease,
            abandoned_after: self.abandoned_after,
            unanswered: self.unanswered,
            open_base: self.open_base,
            // `backoff()` is the only setter of the cap, and sets it always.
            backoff: match (self.backoff_off, self.cap) {
                (false, Some(cap)) => Some((self.multiplier, cap)),
                _ => None,
            },
            backoff_off: self.backoff_off,
            jitter: self.jitter,
            count_calls: self.count_calls,
            id: self.id,
            ramp: self.ramp,
            half_open_rates: self.half_open_rates,
            hints: self.hints,
            outlier_pool: self.outlier_pool.clone(),
            retry_budget: self.retry_budget,
        }
    }
}

/// Refuses durations that `clock`'s steps cannot tell from zero: a slow-call
/// threshold or a time-window bucket shorter than the clock's resolution (a
/// coarse clock's tick). Every clock but a coarse one has a resolution of
/// 1 ns, which every valid duration meets.
fn check_resolution(config: &Config, resolution: Duration) -> Result<(), ConfigError> {
    if let Some(threshold) = config.slow_call_threshold {
        if threshold < resolution {
            return Err(ConfigError::new(
                "slow_call_threshold",
                "at least the clock's resolution",
                format_args!("{threshold:?} on a clock of {resolution:?} steps"),
            ));
        }
    }
    // The bucket width the window itself uses (`Shape::Time`), not a second
    // division of the length.
    if let (WindowKind::Time { length, buckets }, Shape::Time { width, .. }) =
        (config.window, config.shape)
    {
        let bucket = Duration::from_nanos(width.get());
        if bucket < resolution {
            return Err(ConfigError::new(
                "time_window.length",
                "at least buckets × the clock's resolution",
                format_args!("{length:?} in {buckets} buckets of {bucket:?}, on a clock of {resolution:?} steps"),
            ));
        }
    }
    Ok(())
}
