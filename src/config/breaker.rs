//! [`BreakerConfig`]: a breaker [`Builder`]'s knobs as plain data.

use core::time::Duration;

use serde::{Deserialize, Serialize};

use super::parts::{BackoffConfig, Preset, RampConfig, TimeWindowConfig, UnansweredConfig};
use super::retry::RetryBudgetConfig;
use super::{duration, Text};
use crate::builder::{Builder, Hints, UnansweredKnob};
use crate::error::ConfigError;
use crate::ramp::Ramp;
use crate::window::WindowKind;

/// What `max_hint` may be, for the error that refuses its text.
const MAX_HINT_FORMAT: &str =
    "\"off\", or a duration: integers with units ns, us, ms, s, m, h, d, \
     e.g. \"10m\"";

/// A breaker's configuration as data, one field per [`Builder`] method,
/// every field optional: what is left out keeps the builder's default (or
/// the preset's). Durations are text (`"500ms"`, `"30s"`, `"5m"`, `"1h30m"`,
/// `"1d"`); see the [module docs](super) for the whole schema.
///
/// [`to_builder`](Self::to_builder) turns it into a [`Builder`] and validates
/// it as [`Builder::build`] does, with the same [`ConfigError`]s;
/// `BreakerConfig::from(&builder)` writes a builder back out. An observer is
/// code, not data: add it to the builder `to_builder` returns.
///
/// ```
/// use failfast::config::BreakerConfig;
/// use std::time::Duration;
///
/// let config: BreakerConfig = toml::from_str(r#"
///     failure_rate = 0.5
///     count_window = 20
///     open_duration = "10s"
///     backoff = { multiplier = 2.0, cap = "5m" }
/// "#).unwrap();
/// let breaker = config.to_builder()?.build()?;
/// assert_eq!(breaker.config().failure_rate(), Some(0.5));
/// assert_eq!(breaker.config().open_duration(2), Duration::from_secs(20));
///
/// let err = toml::from_str::<BreakerConfig>("failure_rate = 1.5").unwrap().to_builder().unwrap_err();
/// assert_eq!(err.to_string(), "invalid failfast config: failure_rate = 1.5; allowed: (0, 1]");
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct BreakerConfig {
    /// Start from a preset instead of the builder's defaults; the other
    /// fields override it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preset: Option<Preset>,
    /// [`Builder::consecutive_failures`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consecutive_failures: Option<u32>,
    /// [`Builder::failure_rate`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_rate: Option<f64>,
    /// [`Builder::slow_call_rate`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_call_rate: Option<f64>,
    /// [`Builder::slow_call_threshold`], as duration text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_call_threshold: Option<String>,
    /// [`Builder::count_window`]: the last N calls. Not with `time_window`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count_window: Option<u32>,
    /// [`Builder::time_window`]. Not with `count_window`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_window: Option<TimeWindowConfig>,
    /// [`Builder::min_calls`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_calls: Option<u32>,
    /// [`Builder::half_open_probes`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub half_open_probes: Option<u32>,
    /// [`Builder::probe_lease`], as duration text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_lease: Option<String>,
    /// [`Builder::abandoned_after`], as duration text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abandoned_after: Option<String>,
    /// [`Builder::unanswered`]: `{ calls = 5, after = "250ms" }`, or `"off"`
    /// for [`Builder::unanswered_off`]; left out, the default rule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unanswered: Option<UnansweredConfig>,
    /// [`Builder::open_duration`], as duration text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_duration: Option<String>,
    /// [`Builder::backoff`] or [`Builder::backoff_off`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff: Option<BackoffConfig>,
    /// [`Builder::jitter`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<f64>,
    /// [`Builder::count_calls`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count_calls: Option<bool>,
    /// [`Builder::ramp`] / [`Builder::ramp_curve`]: `{ window = "30s" }`
    /// (with `min_fraction` and `aggression` if wanted), or `"off"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ramp: Option<RampConfig>,
    /// [`Builder::half_open_rate_rule`]: `true` turns the rule on (setting
    /// one of its rates does too); `false` keeps it off, and is refused
    /// beside a rate of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub half_open_rate_rule: Option<bool>,
    /// [`Builder::half_open_failure_rate`] (turns the rule on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub half_open_failure_rate: Option<f64>,
    /// [`Builder::half_open_slow_call_rate`] (turns the rule on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub half_open_slow_call_rate: Option<f64>,
    /// [`Builder::max_hint`] (hints remembered, with this cap), as duration
    /// text, or `"off"` for [`Builder::hints_off`] (no hint taken, not even
    /// a tripping verdict's). Left out, the default: a tripping verdict's
    /// hint is taken, capped at 10 minutes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_hint: Option<String>,
    /// [`Builder::outlier_pool`]: the outlier pool the key's breaker is
    /// judged in, by name, instead of the registry's `"default"` pool. Needs
    /// the registry's `[outliers]` table; a breaker built alone refuses it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outlier_pool: Option<String>,
    /// [`Builder::retry_budget`] / [`Builder::retry_budget_off`]:
    /// `{ kind = "tokens", max_tokens = 10, token_ratio = 0.1 }`,
    /// `{ kind = "ratio", percent = 20, ttl = "10s", min_per_second = 10 }`,
    /// `"finagle"`, `"grpc"`, or `"off"` (see [`RetryBudgetConfig`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_budget: Option<RetryBudgetConfig>,
    /// [`Builder::id`]: a fixed jitter seed, for reproducible schedules in
    /// tests and simulations. Leave it out in production (each breaker then
    /// draws its own; a registry's breakers always take their key's hash).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<u32>,
}

impl BreakerConfig {
    /// The [`Builder`] these fields describe: the preset's (or a default
    /// builder), then each field that is set, in the order listed. Checked
    /// as [`Builder::build`] checks it.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the field: duration text that does not
    /// parse, `count_window` and `time_window` both set, or the first value
    /// the builder refuses (the same error `build` gives for that value).
    ///
    /// ```
    /// use failfast::config::BreakerConfig;
    ///
    /// let mut config = BreakerConfig::default();
    /// config.consecutive_failures = Some(5);
    /// config.open_duration = Some("5 minutes".into());
    /// let err = config.to_builder().unwrap_err();
    /// assert_eq!(err.field(), "open_duration");
    /// assert_eq!(err.found(), r#""5 minutes""#);
    /// ```
    pub fn to_builder(&self) -> Result<Builder, ConfigError> {
        let builder = self.apply()?;
        builder.build_config()?;
        Ok(builder)
    }

    /// The builder, unchecked beyond parsing.
    pub(super) fn apply(&self) -> Result<Builder, ConfigError> {
        let mut b = match self.preset {
            None => Builder::new(),
            Some(Preset::Envoy) => Builder::envoy_outlier_detection(),
            Some(Preset::Resilience4j) => Builder::resilience4j_defaults(),
        };
        if let Some(k) = self.consecutive_failures {
            b = b.consecutive_failures(k);
        }
        if let Some(rate) = self.failure_rate {
            b = b.failure_rate(rate);
        }
        if let Some(rate) = self.slow_call_rate {
            b = b.slow_call_rate(rate);
        }
        if let Some(t) = &self.slow_call_threshold {
            b = b.slow_call_threshold(duration::parse("slow_call_threshold", t)?);
        }
        match (self.count_window, &self.time_window) {
            (Some(size), Some(time)) => {
                return Err(ConfigError::new(
                    "time_window",
                    "count_window or time_window, not both",
                    Text(&format_args!("{time:?} and count_window = {size}")),
                ));
            }
            (Some(size), None) => b = b.count_window(size),
            (None, Some(time)) => {
                let length = duration::parse("time_window.length", &time.length)?;
                b = b.time_window(length, time.buckets);
            }
            (None, None) => {}
        }
        if let Some(n) = self.min_calls {
            b = b.min_calls(n);
        }
        if let Some(p) = self.half_open_probes {
            b = b.half_open_probes(p);
        }
        if let Some(lease) = &self.probe_lease {
            b = b.probe_lease(duration::parse("probe_lease", lease)?);
        }
        if let Some(after) = &self.abandoned_after {
            b = b.abandoned_after(duration::parse("abandoned_after", after)?);
        }
        match &self.unanswered {
            None => {}
            Some(UnansweredConfig::Off) => b = b.unanswered_off(),
            Some(UnansweredConfig::Rule { calls, after }) => {
                b = b.unanswered(*calls, duration::parse("unanswered.after", after)?);
            }
        }
        if let Some(base) = &self.open_duration {
            b = b.open_duration(duration::parse("open_duration", base)?);
        }
        match &self.backoff {
            None => {}
            Some(BackoffConfig::Off) => b = b.backoff_off(),
            Some(BackoffConfig::Exponential { multiplier, cap }) => {
                b = b.backoff(*multiplier, duration::parse("backoff.cap", cap)?);
            }
        }
        if let Some(fraction) = self.jitter {
            b = b.jitter(fraction);
        }
        if let Some(on) = self.count_calls {
            b = b.count_calls(on);
        }
        b = self.apply_recovery(b)?;
        if let Some(pool) = &self.outlier_pool {
            b = b.outlier_pool(pool.as_str());
        }
        if let Some(budget) = &self.retry_budget {
            b = match budget.budget()? {
                Some(budget) => b.retry_budget(budget),
                None => b.retry_budget_off(),
            };
        }
        if let Some(id) = self.id {
            b = b.id(id);
        }
        Ok(b)
    }

    /// The recovery settings: the ramp, the half-open rate rule, the
    /// hints' cap.
    fn apply_recovery(&self, mut b: Builder) -> Result<Builder, ConfigError> {
        match &self.ramp {
            None | Some(RampConfig::Off) => {}
            Some(RampConfig::Curve {
                window,
                min_fraction,
                aggression,
            }) => {
                b = b.ramp_curve(
                    duration::parse("ramp.window", window)?,
                    min_fraction.unwrap_or(Ramp::DEFAULT_MIN_FRACTION),
                    aggression.unwrap_or(Ramp::DEFAULT_AGGRESSION),
                );
            }
        }
        let rates =
            self.half_open_failure_rate.is_some() || self.half_open_slow_call_rate.is_some();
        match self.half_open_rate_rule {
            Some(false) if rates => {
                return Err(ConfigError::new(
                    "half_open_rate_rule",
                    "true, or left out, beside half_open_failure_rate or half_open_slow_call_rate",
                    false,
                ));
            }
            Some(true) => b = b.half_open_rate_rule(),
            Some(false) | None => {}
        }
        if let Some(rate) = self.half_open_failure_rate {
            b = b.half_open_failure_rate(rate);
        }
        if let Some(rate) = self.half_open_slow_call_rate {
            b = b.half_open_slow_call_rate(rate);
        }
        match self.max_hint.as_deref() {
            None => {}
            Some("off") => b = b.hints_off(),
            Some(text) => {
                let max = duration::parse("max_hint", text)
                    .map_err(|_| ConfigError::new("max_hint", MAX_HINT_FORMAT, text))?;
                b = b.max_hint(max);
            }
        }
        Ok(b)
    }

    /// These fields, with each one `over` sets taken from `over` instead
    /// (the window as one field: a `count_window` or `time_window` there
    /// replaces both here; the ramp as one field; `half_open_rate_rule =
    /// false` there turns the rule off with the rates set here, and a rate
    /// set there turns it on even where this says `false`).
    pub(crate) fn layered(&self, over: &BreakerConfig) -> BreakerConfig {
        let window_over = over.count_window.is_some() || over.time_window.is_some();
        let (count_window, time_window) = if window_over {
            (over.count_window, over.time_window.clone())
        } else {
            (self.count_window, self.time_window.clone())
        };
        // The rule field by field, but for `false` over it (the rule off,
        // with the rates it would have used) and a rate over a template's
        // `false` (a rate turns the rule on).
        let (half_open_rate_rule, half_open_failure_rate, half_open_slow_call_rate) =
            if over.half_open_rate_rule == Some(false) {
                (
                    Some(false),
                    over.half_open_failure_rate,
                    over.half_open_slow_call_rate,
                )
            } else {
                let rate_over = over.half_open_failure_rate.is_some()
                    || over.half_open_slow_call_rate.is_some();
                let template = if rate_over {
                    self.half_open_rate_rule.filter(|on| *on)
                } else {
                    self.half_open_rate_rule
                };
                (
                    over.half_open_rate_rule.or(template),
                    over.half_open_failure_rate.or(self.half_open_failure_rate),
                    over.half_open_slow_call_rate
                        .or(self.half_open_slow_call_rate),
                )
            };
        BreakerConfig {
            preset: over.preset.or(self.preset),
            consecutive_failures: over.consecutive_failures.or(self.consecutive_failures),
            failure_rate: over.failure_rate.or(self.failure_rate),
            slow_call_rate: over.slow_call_rate.or(self.slow_call_rate),
            slow_call_threshold: over
                .slow_call_threshold
                .clone()
                .or_else(|| self.slow_call_threshold.clone()),
            count_window,
            time_window,
            min_calls: over.min_calls.or(self.min_calls),
            half_open_probes: over.half_open_probes.or(self.half_open_probes),
            probe_lease: over
                .probe_lease
                .clone()
                .or_else(|| self.probe_lease.clone()),
            abandoned_after: over
                .abandoned_after
                .clone()
                .or_else(|| self.abandoned_after.clone()),
            unanswered: over.unanswered.clone().or_else(|| self.unanswered.clone()),
            open_duration: over
                .open_duration
                .clone()
                .or_else(|| self.open_duration.clone()),
            backoff: over.backoff.clone().or_else(|| self.backoff.clone()),
            jitter: over.jitter.or(self.jitter),
            count_calls: over.count_calls.or(self.count_calls),
            ramp: over.ramp.clone().or_else(|| self.ramp.clone()),
            half_open_rate_rule,
            half_open_failure_rate,
            half_open_slow_call_rate,
            max_hint: over.max_hint.clone().or_else(|| self.max_hint.clone()),
            outlier_pool: over
                .outlier_pool
                .clone()
                .or_else(|| self.outlier_pool.clone()),
            retry_budget: over
                .retry_budget
                .clone()
                .or_else(|| self.retry_budget.clone()),
            id: over.id.or(self.id),
        }
    }
}

/// A builder's knobs written out: each one set away from the default
/// builder's, so `to_builder` gives back a builder with the same knobs. The
/// observer is not data and is left behind. Presets are not remembered: a
/// preset's values come out as explicit fields.
///
/// The recovery settings (`ramp`, the half-open rate rule, `max_hint`) are
/// read off the configuration the builder builds, so a builder that does not
/// build writes none of them, and a half-open rate is written as the
/// configuration keeps it (to a millionth) and left out when it equals the
/// closed state's rate the rule falls back on: `to_builder` on the result
/// builds the same configuration.
///
/// ```
/// use failfast::config::BreakerConfig;
/// use failfast::Builder;
/// use std::time::Duration;
///
/// let builder = Builder::new().consecutive_failures(3).open_duration(Duration::from_secs(90));
/// let config = BreakerConfig::from(&builder);
/// assert_eq!(config.consecutive_failures, Some(3));
/// assert_eq!(config.open_duration.as_deref(), Some("90s"));
/// assert_eq!(config.jitter, None); // the default
/// assert_eq!(toml::to_string(&config).unwrap(), "consecutive_failures = 3\nopen_duration = \"90s\"\n");
/// ```
impl From<&Builder> for BreakerConfig {
    fn from(builder: &Builder) -> BreakerConfig {
        fn changed<T: PartialEq>(value: T, default: T) -> Option<T> {
            (value != default).then_some(value)
        }
        let text = |d: Option<Duration>| d.map(duration::format);
        let k = builder.knobs();
        let default = Builder::new().knobs();
        let recovery = Recovery::of(builder);
        let (count_window, time_window) = match k.window {
            Some(WindowKind::Count { size }) => (Some(size), None),
            Some(WindowKind::Time { length, buckets }) => (
                None,
                Some(TimeWindowConfig::new(duration::format(length), buckets)),
            ),
            Some(WindowKind::None) | None => (None, None),
        };
        let backoff = match (k.backoff_off, k.backoff) {
            (true, _) => Some(BackoffConfig::Off),
            (false, Some((multiplier, cap))) => Some(BackoffConfig::Exponential {
                multiplier,
                cap: duration::format(cap),
            }),
            (false, None) => None,
        };
        BreakerConfig {
            preset: None,
            consecutive_failures: k.consecutive_failures,
            failure_rate: k.failure_rate,
            slow_call_rate: k.slow_call_rate,
            slow_call_threshold: text(k.slow_call_threshold),
            count_window,
            time_window,
            min_calls: k.min_calls,
            half_open_probes: changed(k.probes, default.probes),
            probe_lease: text(k.probe_lease),
            abandoned_after: text(k.abandoned_after),
            unanswered: match k.unanswered {
                UnansweredKnob::Default => None,
                UnansweredKnob::Off => Some(UnansweredConfig::Off),
                UnansweredKnob::Rule(calls, after) => {
                    Some(UnansweredConfig::new(calls, duration::format(after)))
                }
            },
            open_duration: changed(k.open_base, default.open_base).map(duration::format),
            backoff,
            jitter: changed(k.jitter, default.jitter),
            count_calls: changed(k.count_calls, default.count_calls),
            ramp: recovery.ramp,
            half_open_rate_rule: recovery.rule,
            half_open_failure_rate: recovery.failure_rate,
            half_open_slow_call_rate: recovery.slow_call_rate,
            max_hint: recovery.max_hint,
            outlier_pool: k.outlier_pool.as_deref().map(str::to_owned),
            retry_budget: k.retry_budget.map(RetryBudgetConfig::from),
            id: k.id,
        }
    }
}

/// The recovery settings of a builder, as a config file writes them.
#[derive(Default)]
struct Recovery {
    ramp: Option<RampConfig>,
    rule: Option<bool>,
    failure_rate: Option<f64>,
    slow_call_rate: Option<f64>,
    max_hint: Option<String>,
}

impl Recovery {
    /// The recovery settings as `builder` has them set (its knobs), each
    /// one moved off the default: a rule turned on with its defaults writes
    /// only `half_open_rate_rule = true`, and a rate set explicitly is
    /// written even when it equals the closed state's.
    fn of(builder: &Builder) -> Recovery {
        let k = builder.knobs();
        let ramp = k.ramp.map(|(window, floor, aggression)| RampConfig::Curve {
            window: duration::format(window),
            min_fraction: (floor != Ramp::DEFAULT_MIN_FRACTION).then_some(floor),
            aggression: (aggression != Ramp::DEFAULT_AGGRESSION).then_some(aggression),
        });
        let (rule, failure_rate, slow_call_rate) = match k.half_open_rates {
            None => (None, None, None),
            Some((failure, slow)) => (Some(true), failure, slow),
        };
        // By default a breaker takes only a tripping verdict's hint: left
        // out then; "off" for none, the cap when it remembers hints.
        let max_hint = match k.hints {
            Hints::Tripping => None,
            Hints::Off => Some("off".to_owned()),
            Hints::Remembered(max) => Some(duration::format(max)),
        };
        Recovery {
            ramp,
            rule,
            failure_rate,
            slow_call_rate,
            max_hint,
        }
    }
}

impl From<Builder> for BreakerConfig {
    fn from(builder: Builder) -> BreakerConfig {
        BreakerConfig::from(&builder)
    }
}
