//! [`OutliersConfig`]: a registry's outlier detection ([`Outliers`]) as
//! plain data, the `[outliers]` table.

use core::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::duration;
use crate::error::ConfigError;
use crate::outlier::Outliers;

/// Outlier detection as data: the `[outliers]` table of a
/// [`RegistryConfig`](super::RegistryConfig), one field per [`Outliers`]
/// method, every field optional (left out: the default, as
/// [`Outliers::new`], or the preset's: `preset = "envoy"` starts from
/// [`Outliers::envoy`]). The table's presence turns detection on
/// ([`RegistryBuilder::outliers`](crate::RegistryBuilder::outliers)): an
/// empty `[outliers]` is the defaults.
///
/// [`to_outliers`](Self::to_outliers) checks it as the registry's `build`
/// does, with the same [`ConfigError`]s (fields named `outliers.…`);
/// `OutliersConfig::from(&outliers)` writes one back out.
///
/// ```
/// use failfast::config::{OutliersConfig, SlowOutliersConfig};
/// use failfast::Outliers;
/// use std::time::Duration;
///
/// let config: OutliersConfig = toml::from_str(r#"
///     interval = "5s"
///     stdev_factor = 1.5
///     enforcing_failure_percentage = 100
///     slow_outliers = { factor = 3.0, floor = 0.1 }
///     significance = 1e-9
///     ejection_time = { base = "1m", max = "10m" }
/// "#).unwrap();
/// assert_eq!(config.slow_outliers, Some(SlowOutliersConfig::On { factor: 3.0, floor: 0.1 }));
/// let outliers = config.to_outliers()?;
/// assert_eq!(
///     outliers,
///     Outliers::new()
///         .interval(Duration::from_secs(5))
///         .stdev_factor(1.5)
///         .enforcing_failure_percentage(100)
///         .slow_outliers(3.0, 0.1)
///         .significance(1e-9)
///         .ejection_time(Duration::from_secs(60), Duration::from_secs(600))
/// );
/// assert_eq!(OutliersConfig::from(&outliers), config);
///
/// // Envoy's rule exactly, and the ejections of the breaker's backoff:
/// let envoy: OutliersConfig = toml::from_str(r#"
///     preset = "envoy"
///     ejection_time = "breaker"
/// "#).unwrap();
/// let outliers = envoy.to_outliers()?;
/// assert_eq!(outliers, Outliers::envoy().ejection_time_of_breaker());
/// assert_eq!(OutliersConfig::from(&outliers), envoy);
///
/// let err = toml::from_str::<OutliersConfig>("stdev_factor = -1.0").unwrap().to_outliers().unwrap_err();
/// assert_eq!(err.field(), "outliers.stdev_factor");
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct OutliersConfig {
    /// Start from a preset instead of the defaults: `"envoy"` is
    /// [`Outliers::envoy`]. The other fields override it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preset: Option<OutliersPreset>,
    /// [`Outliers::interval`], as duration text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// [`Outliers::success_rate_request_volume`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success_rate_request_volume: Option<u32>,
    /// [`Outliers::success_rate_minimum_hosts`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success_rate_minimum_hosts: Option<u32>,
    /// [`Outliers::stdev_factor`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdev_factor: Option<f64>,
    /// [`Outliers::success_rate_minimum_gap`], a rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success_rate_minimum_gap: Option<f64>,
    /// [`Outliers::enforcing_success_rate`], a percentage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enforcing_success_rate: Option<u8>,
    /// [`Outliers::failure_percentage_threshold`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_percentage_threshold: Option<u8>,
    /// [`Outliers::failure_percentage_request_volume`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_percentage_request_volume: Option<u32>,
    /// [`Outliers::failure_percentage_minimum_hosts`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_percentage_minimum_hosts: Option<u32>,
    /// [`Outliers::enforcing_failure_percentage`], a percentage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enforcing_failure_percentage: Option<u8>,
    /// [`Outliers::slow_outliers`]: `{ factor = 3.0, floor = 0.1 }`, or
    /// `"off"` (the default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_outliers: Option<SlowOutliersConfig>,
    /// [`Outliers::enforcing_slow`], a percentage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enforcing_slow: Option<u8>,
    /// [`Outliers::max_ejection_percent`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_ejection_percent: Option<u8>,
    /// [`Outliers::panic_threshold`], a percentage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub panic_threshold: Option<u8>,
    /// [`Outliers::significance`]: a number (`1e-6`), or `"off"`
    /// ([`Outliers::significance_off`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub significance: Option<SignificanceConfig>,
    /// [`Outliers::ejection_time`]: `{ base = "30s", max = "5m" }`, or
    /// `"breaker"` ([`Outliers::ejection_time_of_breaker`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ejection_time: Option<EjectionTimeConfig>,
}

/// A preset for `[outliers]`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OutliersPreset {
    /// [`Outliers::envoy`]: Envoy's rules exactly, no evidence asked.
    Envoy,
}

impl OutliersConfig {
    /// The [`Outliers`] these fields describe: Envoy's defaults, then each
    /// field that is set. Checked as
    /// [`RegistryBuilder::build`](crate::RegistryBuilder::build) checks it.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the field, prefixed `outliers.`: an
    /// `interval` that does not parse, or the first value out of range (the
    /// error `build` gives for it), e.g. `outliers.enforcing_success_rate`
    /// above 100 or `outliers.slow_outliers.floor` outside `[0, 1)`.
    ///
    /// ```
    /// use failfast::config::OutliersConfig;
    ///
    /// let mut config = OutliersConfig::default();
    /// config.interval = Some("ten seconds".into());
    /// assert_eq!(config.to_outliers().unwrap_err().field(), "outliers.interval");
    /// config.interval = Some("10s".into());
    /// config.panic_threshold = Some(101);
    /// assert_eq!(config.to_outliers().unwrap_err().field(), "outliers.panic_threshold");
    /// ```
    pub fn to_outliers(&self) -> Result<Outliers, ConfigError> {
        let mut o = match self.preset {
            None => Outliers::new(),
            Some(OutliersPreset::Envoy) => Outliers::envoy(),
        };
        if let Some(text) = &self.interval {
            o = o.interval(duration::parse("outliers.interval", text)?);
        }
        if let Some(calls) = self.success_rate_request_volume {
            o = o.success_rate_request_volume(calls);
        }
        if let Some(hosts) = self.success_rate_minimum_hosts {
            o = o.success_rate_minimum_hosts(hosts);
        }
        if let Some(factor) = self.stdev_factor {
            o = o.stdev_factor(factor);
        }
        if let Some(gap) = self.success_rate_minimum_gap {
            o = o.success_rate_minimum_gap(gap);
        }
        if let Some(p) = self.enforcing_success_rate {
            o = o.enforcing_success_rate(p);
        }
        if let Some(p) = self.failure_percentage_threshold {
            o = o.failure_percentage_threshold(p);
        }
        if let Some(calls) = self.failure_percentage_request_volume {
            o = o.failure_percentage_request_volume(calls);
        }
        if let Some(hosts) = self.failure_percentage_minimum_hosts {
            o = o.failure_percentage_minimum_hosts(hosts);
        }
        if let Some(p) = self.enforcing_failure_percentage {
            o = o.enforcing_failure_percentage(p);
        }
        match self.slow_outliers {
            None | Some(SlowOutliersConfig::Off) => {}
            Some(SlowOutliersConfig::On { factor, floor }) => o = o.slow_outliers(factor, floor),
        }
        if let Some(p) = self.enforcing_slow {
            o = o.enforcing_slow(p);
        }
        if let Some(p) = self.max_ejection_percent {
            o = o.max_ejection_percent(p);
        }
        if let Some(p) = self.panic_threshold {
            o = o.panic_threshold(p);
        }
        match self.significance {
            None => {}
            Some(SignificanceConfig::Off) => o = o.significance_off(),
            Some(SignificanceConfig::Alpha(alpha)) => o = o.significance(alpha),
        }
        match &self.ejection_time {
            None => {}
            Some(EjectionTimeConfig::Breaker) => o = o.ejection_time_of_breaker(),
            Some(EjectionTimeConfig::Envoy { base, max }) => {
                o = o.ejection_time(
                    duration::parse("outliers.ejection_time.base", base)?,
                    duration::parse("outliers.ejection_time.max", max)?,
                );
            }
        }
        o.check()?;
        Ok(o)
    }
}

/// An [`Outliers`] written out: `preset = "envoy"` when it asks no evidence,
/// then each field moved off the default (or the preset), so
/// [`to_outliers`](OutliersConfig::to_outliers) gives back the same value.
/// The latency rule is written only when on (off is the default).
impl From<&Outliers> for OutliersConfig {
    fn from(o: &Outliers) -> OutliersConfig {
        fn changed<T: PartialEq>(value: T, default: T) -> Option<T> {
            (value != default).then_some(value)
        }
        let (preset, d) = match o.significance {
            None => (Some(OutliersPreset::Envoy), Outliers::envoy()),
            Some(_) => (None, Outliers::default()),
        };
        OutliersConfig {
            preset,
            significance: changed(o.significance, d.significance).map(|s| match s {
                Some(alpha) => SignificanceConfig::Alpha(alpha),
                None => SignificanceConfig::Off,
            }),
            ejection_time: changed(o.ejection_time, d.ejection_time).map(|e| match e {
                Some((base, max)) => EjectionTimeConfig::Envoy {
                    base: duration::format(base),
                    max: duration::format(max),
                },
                None => EjectionTimeConfig::Breaker,
            }),
            interval: changed(o.interval, d.interval).map(duration::format),
            success_rate_request_volume: changed(
                o.success_rate_request_volume,
                d.success_rate_request_volume,
            ),
            success_rate_minimum_hosts: changed(
                o.success_rate_minimum_hosts,
                d.success_rate_minimum_hosts,
            ),
            stdev_factor: changed(o.stdev_factor, d.stdev_factor),
            success_rate_minimum_gap: changed(
                o.success_rate_minimum_gap,
                d.success_rate_minimum_gap,
            ),
            enforcing_success_rate: changed(o.enforcing_success_rate, d.enforcing_success_rate),
            failure_percentage_threshold: changed(
                o.failure_percentage_threshold,
                d.failure_percentage_threshold,
            ),
            failure_percentage_request_volume: changed(
                o.failure_percentage_request_volume,
                d.failure_percentage_request_volume,
            ),
            failure_percentage_minimum_hosts: changed(
                o.failure_percentage_minimum_hosts,
                d.failure_percentage_minimum_hosts,
            ),
            enforcing_failure_percentage: changed(
                o.enforcing_failure_percentage,
                d.enforcing_failure_percentage,
            ),
            slow_outliers: o
                .slow
                .map(|(factor, floor)| SlowOutliersConfig::On { factor, floor }),
            enforcing_slow: changed(o.enforcing_slow, d.enforcing_slow),
            max_ejection_percent: changed(o.max_ejection_percent, d.max_ejection_percent),
            panic_threshold: changed(o.panic_threshold, d.panic_threshold),
        }
    }
}

impl From<Outliers> for OutliersConfig {
    fn from(outliers: Outliers) -> OutliersConfig {
        OutliersConfig::from(&outliers)
    }
}

/// The latency rule ([`Outliers::slow_outliers`]):
/// `slow_outliers = { factor = 3.0, floor = 0.1 }` (both fields required),
/// or `slow_outliers = "off"`, which is also the default.
///
/// ```
/// use failfast::config::{OutliersConfig, SlowOutliersConfig};
///
/// let on: OutliersConfig = toml::from_str("slow_outliers = { factor = 2.0, floor = 0.05 }").unwrap();
/// assert_eq!(on.slow_outliers, Some(SlowOutliersConfig::On { factor: 2.0, floor: 0.05 }));
/// let off: OutliersConfig = toml::from_str(r#"slow_outliers = "off""#).unwrap();
/// assert_eq!(off.slow_outliers, Some(SlowOutliersConfig::Off));
/// assert!(toml::from_str::<OutliersConfig>(r#"slow_outliers = "on""#).is_err());
/// ```
#[derive(Copy, Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum SlowOutliersConfig {
    /// No latency rule: `"off"`.
    Off,
    /// A host whose slow-call rate exceeds both `factor` times its pool's
    /// mean and `floor` is an outlier.
    On {
        /// The multiple of the pool's mean slow-call rate (1.0..=1000.0).
        factor: f64,
        /// The least slow-call rate that can be an outlier, in `[0, 1)`.
        floor: f64,
    },
}

/// The table form of [`SlowOutliersConfig::On`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct On {
    factor: f64,
    floor: f64,
}

impl Serialize for SlowOutliersConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            SlowOutliersConfig::Off => serializer.serialize_str("off"),
            SlowOutliersConfig::On { factor, floor } => {
                let mut table = serializer.serialize_struct("SlowOutliersConfig", 2)?;
                table.serialize_field("factor", factor)?;
                table.serialize_field("floor", floor)?;
                table.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for SlowOutliersConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SlowVisitor)
    }
}

/// Reads `"off"` or `{ factor, floor }`, with a message naming both forms.
struct SlowVisitor;

impl<'de> Visitor<'de> for SlowVisitor {
    type Value = SlowOutliersConfig;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(r#""off" or a table { factor = 3.0, floor = 0.1 }"#)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<SlowOutliersConfig, E> {
        match text {
            "off" => Ok(SlowOutliersConfig::Off),
            _ => Err(E::invalid_value(de::Unexpected::Str(text), &self)),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<SlowOutliersConfig, A::Error> {
        let On { factor, floor } = On::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(SlowOutliersConfig::On { factor, floor })
    }
}

/// The evidence asked ([`Outliers::significance`]): a number in
/// `[1e-12, 0.01]`, or `"off"` (Envoy's rules alone).
///
/// ```
/// use failfast::config::{OutliersConfig, SignificanceConfig};
///
/// let c: OutliersConfig = toml::from_str("significance = 1e-9").unwrap();
/// assert_eq!(c.significance, Some(SignificanceConfig::Alpha(1e-9)));
/// let c: OutliersConfig = toml::from_str(r#"significance = "off""#).unwrap();
/// assert_eq!(c.significance, Some(SignificanceConfig::Off));
/// assert!(toml::from_str::<OutliersConfig>(r#"significance = "on""#).is_err());
/// ```
#[derive(Copy, Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum SignificanceConfig {
    /// No evidence asked: `"off"`.
    Off,
    /// The significance, a probability.
    Alpha(f64),
}

impl Serialize for SignificanceConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            SignificanceConfig::Off => serializer.serialize_str("off"),
            SignificanceConfig::Alpha(alpha) => serializer.serialize_f64(*alpha),
        }
    }
}

impl<'de> Deserialize<'de> for SignificanceConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SignificanceVisitor)
    }
}

/// Reads `"off"` or a number.
struct SignificanceVisitor;

impl<'de> Visitor<'de> for SignificanceVisitor {
    type Value = SignificanceConfig;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(r#""off" or a probability such as 1e-6"#)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<SignificanceConfig, E> {
        match text {
            "off" => Ok(SignificanceConfig::Off),
            _ => Err(E::invalid_value(de::Unexpected::Str(text), &self)),
        }
    }

    fn visit_f64<E: de::Error>(self, alpha: f64) -> Result<SignificanceConfig, E> {
        Ok(SignificanceConfig::Alpha(alpha))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<SignificanceConfig, E> {
        Ok(SignificanceConfig::Alpha(n as f64))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<SignificanceConfig, E> {
        Ok(SignificanceConfig::Alpha(n as f64))
    }
}

/// How long a pool ejects a host ([`Outliers::ejection_time`]):
/// `ejection_time = { base = "30s", max = "5m" }` (both required), or
/// `"breaker"`: the breaker's own open duration and backoff.
///
/// ```
/// use failfast::config::{EjectionTimeConfig, OutliersConfig};
///
/// let c: OutliersConfig = toml::from_str(r#"ejection_time = { base = "10s", max = "2m" }"#).unwrap();
/// assert_eq!(c.ejection_time, Some(EjectionTimeConfig::Envoy { base: "10s".into(), max: "2m".into() }));
/// let c: OutliersConfig = toml::from_str(r#"ejection_time = "breaker""#).unwrap();
/// assert_eq!(c.ejection_time, Some(EjectionTimeConfig::Breaker));
/// let bad: OutliersConfig = toml::from_str(r#"ejection_time = { base = "1m", max = "10s" }"#).unwrap();
/// assert_eq!(bad.to_outliers().unwrap_err().field(), "outliers.ejection_time.max");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EjectionTimeConfig {
    /// The breaker's backoff: `"breaker"`.
    Breaker,
    /// Envoy's schedule, as duration text.
    Envoy {
        /// `base_ejection_time`.
        base: String,
        /// `max_ejection_time`.
        max: String,
    },
}

/// The table form of [`EjectionTimeConfig::Envoy`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Schedule {
    base: String,
    max: String,
}

impl Serialize for EjectionTimeConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            EjectionTimeConfig::Breaker => serializer.serialize_str("breaker"),
            EjectionTimeConfig::Envoy { base, max } => {
                let mut table = serializer.serialize_struct("EjectionTimeConfig", 2)?;
                table.serialize_field("base", base)?;
                table.serialize_field("max", max)?;
                table.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for EjectionTimeConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ScheduleVisitor)
    }
}

/// Reads `"breaker"` or `{ base, max }`.
struct ScheduleVisitor;

impl<'de> Visitor<'de> for ScheduleVisitor {
    type Value = EjectionTimeConfig;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(r#""breaker" or a table { base = "30s", max = "5m" }"#)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<EjectionTimeConfig, E> {
        match text {
            "breaker" => Ok(EjectionTimeConfig::Breaker),
            _ => Err(E::invalid_value(de::Unexpected::Str(text), &self)),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<EjectionTimeConfig, A::Error> {
        let Schedule { base, max } =
            Schedule::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(EjectionTimeConfig::Envoy { base, max })
    }
}
