//! [`BreakerConfig`]: a breaker [`Builder`]'s knobs as plain data.

use core::time::Duration;

use serde::{Deserialize, Serialize};

use super::parts::{BackoffConfig, Preset, TimeWindowConfig, UnansweredConfig};
use super::{duration, Text};
use crate::builder::Builder;
use crate::error::ConfigError;
use crate::window::WindowKind;

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
    /// [`Builder::unanswered`]: `{ calls = 5, after = "250ms" }`.
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
        if let Some(rule) = &self.unanswered {
            b = b.unanswered(
                rule.calls,
                duration::parse("unanswered.after", &rule.after)?,
            );
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
        if let Some(id) = self.id {
            b = b.id(id);
        }
        Ok(b)
    }

    /// These fields, with each one `over` sets taken from `over` instead
    /// (the window as one field: a `count_window` or `time_window` there
    /// replaces both here).
    pub(crate) fn layered(&self, over: &BreakerConfig) -> BreakerConfig {
        let window_over = over.count_window.is_some() || over.time_window.is_some();
        let (count_window, time_window) = if window_over {
            (over.count_window, over.time_window.clone())
        } else {
            (self.count_window, self.time_window.clone())
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
            id: over.id.or(self.id),
        }
    }
}

/// A builder's knobs written out: each one set away from the default
/// builder's, so `to_builder` gives back a builder with the same knobs. The
/// observer is not data and is left behind. Presets are not remembered: a
/// preset's values come out as explicit fields.
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
            unanswered: k
                .unanswered
                .map(|(calls, after)| UnansweredConfig::new(calls, duration::format(after))),
            open_duration: changed(k.open_base, default.open_base).map(duration::format),
            backoff,
            jitter: changed(k.jitter, default.jitter),
            count_calls: changed(k.count_calls, default.count_calls),
            id: k.id,
        }
    }
}

impl From<Builder> for BreakerConfig {
    fn from(builder: Builder) -> BreakerConfig {
        BreakerConfig::from(&builder)
    }
}
