//! The values of a [`BreakerConfig`](super::BreakerConfig) that are more than
//! a number: the preset, the time window, the backoff and the ramp.

use core::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A well-known set of defaults to start from: `preset = "envoy"` or
/// `preset = "resilience4j"`. The other fields of the same table then
/// override the preset's values one by one.
///
/// ```
/// use failfast::config::{BreakerConfig, Preset};
///
/// let mut config = BreakerConfig::default();
/// config.preset = Some(Preset::Envoy);
/// config.consecutive_failures = Some(3);
/// let built = config.to_builder()?.build_config()?;
/// assert_eq!(built.consecutive_failures(), Some(3)); // the preset says 5
/// assert_eq!(built.open_duration_cap().as_secs(), 300); // the preset's
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Preset {
    /// [`Builder::envoy_outlier_detection`](crate::Builder::envoy_outlier_detection):
    /// 5 failures in a row, ejected 30 s doubling up to 300 s.
    Envoy,
    /// [`Builder::resilience4j_defaults`](crate::Builder::resilience4j_defaults):
    /// 50 % failures (or 100 % calls of 60 s or more) over the last 100
    /// calls, open 60 s, 10 probes.
    Resilience4j,
}

/// A time window: `time_window = { length = "60s", buckets = 60 }`, as
/// [`Builder::time_window`](crate::Builder::time_window). Both fields are
/// required.
///
/// ```
/// use failfast::config::TimeWindowConfig;
///
/// let window = TimeWindowConfig::new("60s", 12);
/// assert_eq!(window.length, "60s");
/// assert_eq!(window.buckets, 12);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TimeWindowConfig {
    /// The window's length, as text (`"60s"`).
    pub length: String,
    /// How many slices it is kept in (the window slides by `length / buckets`).
    pub buckets: u32,
}

impl TimeWindowConfig {
    /// A window of `length` (duration text) in `buckets` slices.
    pub fn new(length: impl Into<String>, buckets: u32) -> TimeWindowConfig {
        TimeWindowConfig {
            length: length.into(),
            buckets,
        }
    }
}

/// The unanswered rule: `unanswered = { calls = 5, after = "250ms" }`
/// ([`Builder::unanswered`](crate::Builder::unanswered); both fields
/// required), or `unanswered = "off"`
/// ([`Builder::unanswered_off`](crate::Builder::unanswered_off)). Left out,
/// the default rule applies; `"off"` is how a host's table turns off the
/// template's rule, or the default one.
///
/// ```
/// use failfast::config::{BreakerConfig, UnansweredConfig};
/// use std::time::Duration;
///
/// let rule = UnansweredConfig::new(5, "250ms");
/// assert_eq!(rule, UnansweredConfig::Rule { calls: 5, after: "250ms".into() });
/// let config: BreakerConfig = toml::from_str(r#"
///     consecutive_failures = 5
///     unanswered = "off"
/// "#).unwrap();
/// assert_eq!(config.unanswered, Some(UnansweredConfig::Off));
/// assert_eq!(config.to_builder()?.build_config()?.unanswered(), None);
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnansweredConfig {
    /// No unanswered rule, not even the default one: `"off"`.
    Off,
    /// `calls` in a row, each held at least `after`, trip the breaker.
    Rule {
        /// How many unanswered calls in a row trip the breaker (1..=255).
        calls: u32,
        /// How long a call must be held before its drop counts as
        /// unanswered, as text (`"250ms"`).
        after: String,
    },
}

impl UnansweredConfig {
    /// `calls` in a row, each held at least `after` (duration text).
    pub fn new(calls: u32, after: impl Into<String>) -> UnansweredConfig {
        UnansweredConfig::Rule {
            calls,
            after: after.into(),
        }
    }
}

/// The table form of [`UnansweredConfig::Rule`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UnansweredRule {
    calls: u32,
    after: String,
}

impl Serialize for UnansweredConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            UnansweredConfig::Off => serializer.serialize_str("off"),
            UnansweredConfig::Rule { calls, after } => {
                let mut table = serializer.serialize_struct("UnansweredConfig", 2)?;
                table.serialize_field("calls", calls)?;
                table.serialize_field("after", after)?;
                table.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for UnansweredConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UnansweredVisitor)
    }
}

/// Reads `"off"` or `{ calls, after }`, with a message naming both forms.
struct UnansweredVisitor;

impl<'de> Visitor<'de> for UnansweredVisitor {
    type Value = UnansweredConfig;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(r#""off" or a table { calls = 5, after = "250ms" }"#)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<UnansweredConfig, E> {
        match text {
            "off" => Ok(UnansweredConfig::Off),
            _ => Err(E::invalid_value(de::Unexpected::Str(text), &self)),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<UnansweredConfig, A::Error> {
        let UnansweredRule { calls, after } =
            UnansweredRule::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(UnansweredConfig::Rule { calls, after })
    }
}

/// How the open period grows with each trip in a row: `backoff = "off"`
/// ([`Builder::backoff_off`](crate::Builder::backoff_off)) or
/// `backoff = { multiplier = 2.0, cap = "5m" }`
/// ([`Builder::backoff`](crate::Builder::backoff); both fields required).
/// Left out, the builder's default (×2 up to 3 × the base) applies.
///
/// ```
/// use failfast::config::BackoffConfig;
///
/// let grow = BackoffConfig::Exponential { multiplier: 2.0, cap: "10m".into() };
/// assert_ne!(grow, BackoffConfig::Off);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum BackoffConfig {
    /// Every open period lasts the base open duration: `"off"`.
    Off,
    /// Each trip in a row multiplies the open period by `multiplier`, up to `cap`.
    Exponential {
        /// The factor per trip in a row (1..=1000).
        multiplier: f64,
        /// The longest open period, as duration text.
        cap: String,
    },
}

/// The table form of [`BackoffConfig::Exponential`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Exponential {
    multiplier: f64,
    cap: String,
}

impl Serialize for BackoffConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            BackoffConfig::Off => serializer.serialize_str("off"),
            BackoffConfig::Exponential { multiplier, cap } => {
                let mut table = serializer.serialize_struct("BackoffConfig", 2)?;
                table.serialize_field("multiplier", multiplier)?;
                table.serialize_field("cap", cap)?;
                table.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for BackoffConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(BackoffVisitor)
    }
}

/// Reads `"off"` or `{ multiplier, cap }`, with a message naming both forms.
struct BackoffVisitor;

impl<'de> Visitor<'de> for BackoffVisitor {
    type Value = BackoffConfig;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(r#""off" or a table { multiplier = 2.0, cap = "5m" }"#)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<BackoffConfig, E> {
        match text {
            "off" => Ok(BackoffConfig::Off),
            _ => Err(E::invalid_value(de::Unexpected::Str(text), &self)),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<BackoffConfig, A::Error> {
        let Exponential { multiplier, cap } =
            Exponential::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(BackoffConfig::Exponential { multiplier, cap })
    }
}

/// Slow start after a recovery: `ramp = { window = "30s" }`
/// ([`Builder::ramp`](crate::Builder::ramp)), with `min_fraction` and
/// `aggression` as well for
/// [`Builder::ramp_curve`](crate::Builder::ramp_curve) (each optional:
/// Envoy's 0.1 and 1.0 when left out), or `ramp = "off"`. Left out, there
/// is no ramp (the builder's default); `"off"` says so explicitly, which a
/// host's table uses to turn off the template's ramp.
///
/// ```
/// use failfast::config::{BreakerConfig, RampConfig};
/// use std::time::Duration;
///
/// let config: BreakerConfig = toml::from_str(r#"
///     consecutive_failures = 5
///     ramp = { window = "30s", aggression = 2.0 }
/// "#).unwrap();
/// assert_eq!(config.ramp, Some(RampConfig::Curve {
///     window: "30s".into(),
///     min_fraction: None,
///     aggression: Some(2.0),
/// }));
/// let built = config.to_builder()?.build_config()?;
/// assert_eq!(built.ramp(), Some((Duration::from_secs(30), 0.1, 2.0)));
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RampConfig {
    /// No ramp: `"off"`.
    Off,
    /// Admit a share of calls rising over `window` after each recovery.
    Curve {
        /// The ramp's length, as duration text (1 ms to 1 day).
        window: String,
        /// The share admitted at the start, in [0, 1]; `None`: 0.1.
        min_fraction: Option<f64>,
        /// The curve's shape, in (0, 100]; `None`: 1.0 (a straight line).
        aggression: Option<f64>,
    },
}

impl RampConfig {
    /// A ramp over `window` (duration text) with Envoy's curve.
    ///
    /// ```
    /// use failfast::config::RampConfig;
    ///
    /// assert_eq!(
    ///     RampConfig::window("30s"),
    ///     RampConfig::Curve { window: "30s".into(), min_fraction: None, aggression: None }
    /// );
    /// ```
    pub fn window(window: impl Into<String>) -> RampConfig {
        RampConfig::Curve {
            window: window.into(),
            min_fraction: None,
            aggression: None,
        }
    }
}

/// The table form of [`RampConfig::Curve`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Curve {
    window: String,
    #[serde(default)]
    min_fraction: Option<f64>,
    #[serde(default)]
    aggression: Option<f64>,
}

impl Serialize for RampConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            RampConfig::Off => serializer.serialize_str("off"),
            RampConfig::Curve {
                window,
                min_fraction,
                aggression,
            } => {
                let fields =
                    1 + usize::from(min_fraction.is_some()) + usize::from(aggression.is_some());
                let mut table = serializer.serialize_struct("RampConfig", fields)?;
                table.serialize_field("window", window)?;
                match min_fraction {
                    Some(f) => table.serialize_field("min_fraction", f)?,
                    None => table.skip_field("min_fraction")?,
                }
                match aggression {
                    Some(a) => table.serialize_field("aggression", a)?,
                    None => table.skip_field("aggression")?,
                }
                table.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for RampConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(RampVisitor)
    }
}

/// Reads `"off"` or `{ window, min_fraction, aggression }`, with a message
/// naming both forms.
struct RampVisitor;

impl<'de> Visitor<'de> for RampVisitor {
    type Value = RampConfig;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(r#""off" or a table { window = "30s", min_fraction = 0.1, aggression = 1.0 }"#)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<RampConfig, E> {
        match text {
            "off" => Ok(RampConfig::Off),
            _ => Err(E::invalid_value(de::Unexpected::Str(text), &self)),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RampConfig, A::Error> {
        let Curve {
            window,
            min_fraction,
            aggression,
        } = Curve::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(RampConfig::Curve {
            window,
            min_fraction,
            aggression,
        })
    }
}
