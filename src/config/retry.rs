//! [`RetryBudgetConfig`]: a breaker's retry budget as data.

use core::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::duration;
use crate::error::ConfigError;
use crate::retry::RetryBudget;

/// A retry budget ([`Builder::retry_budget`](crate::Builder::retry_budget)):
/// `"off"`, `"finagle"` or `"grpc"` (their defaults), or a table:
/// `{ kind = "tokens", max_tokens = 10, token_ratio = 0.1 }` (gRPC's
/// throttling) or `{ kind = "ratio", percent = 20, ttl = "10s",
/// min_per_second = 10 }` (Finagle's budget; `percent` in percent, as the
/// outlier settings take theirs: 20 is [`RetryBudget::ratio`]'s 0.2). Left
/// out, no budget (the default); `"off"` says so explicitly, which a host's
/// table uses to turn off the template's budget.
///
/// ```
/// use failfast::config::{BreakerConfig, RetryBudgetConfig};
/// use failfast::RetryBudget;
/// use std::time::Duration;
///
/// let config: BreakerConfig = toml::from_str(r#"
///     consecutive_failures = 5
///     retry_budget = { kind = "ratio", percent = 20, ttl = "10s", min_per_second = 10 }
/// "#).unwrap();
/// let built = config.to_builder()?.build_config()?;
/// assert_eq!(built.retry_budget(), Some(RetryBudget::finagle()));
///
/// let grpc: BreakerConfig = toml::from_str(r#"
///     consecutive_failures = 5
///     retry_budget = "grpc"
/// "#).unwrap();
/// assert_eq!(grpc.retry_budget, Some(RetryBudgetConfig::Tokens { max_tokens: 10, token_ratio: 0.1 }));
///
/// let bad: BreakerConfig = toml::from_str(r#"
///     consecutive_failures = 5
///     retry_budget = { kind = "tokens", max_tokens = 10, token_ratio = 0 }
/// "#).unwrap();
/// let err = bad.to_builder().unwrap_err();
/// assert_eq!(err.to_string(), "invalid failfast config: retry_budget.token_ratio = 0.0; allowed: 0.001..=1000 (three decimals kept)");
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RetryBudgetConfig {
    /// No budget: `"off"`.
    Off,
    /// [`RetryBudget::tokens`]; `"grpc"` is `max_tokens = 10, token_ratio = 0.1`.
    Tokens {
        /// The bucket's size: 1 to 1000.
        max_tokens: u32,
        /// Tokens a success returns: 0.001 to 1000.
        token_ratio: f64,
    },
    /// [`RetryBudget::ratio`]; `"finagle"` is `percent = 20, ttl = "10s",
    /// min_per_second = 10`.
    Ratio {
        /// Retries per 100 first tries: 0 to 100 000.
        percent: f64,
        /// How long deposits and withdrawals count, as duration text (1 s to 60 s).
        ttl: String,
        /// Retries per second always allowed: 0 to 10 000.
        min_per_second: u32,
    },
}

impl RetryBudgetConfig {
    /// The budget these values describe (`None`: off).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `retry_budget.ttl` when its text does not
    /// parse, or `retry_budget.percent` out of range (in percent, as
    /// written). The other ranges are checked when the builder builds.
    pub(crate) fn budget(&self) -> Result<Option<RetryBudget>, ConfigError> {
        Ok(match self {
            RetryBudgetConfig::Off => None,
            RetryBudgetConfig::Tokens {
                max_tokens,
                token_ratio,
            } => Some(RetryBudget::tokens(*max_tokens, *token_ratio)),
            RetryBudgetConfig::Ratio {
                percent,
                ttl,
                min_per_second,
            } if !(0.0..=100_000.0).contains(percent) => {
                // In the file's unit, not the builder's fraction.
                return Err(ConfigError::new(
                    "retry_budget.percent",
                    "0..=100000 (percent of first tries)",
                    percent,
                ));
            }
            RetryBudgetConfig::Ratio {
                percent,
                ttl,
                min_per_second,
            } => Some(RetryBudget::ratio(
                percent / 100.0,
                duration::parse("retry_budget.ttl", ttl)?,
                *min_per_second,
            )),
        })
    }
}

impl From<RetryBudget> for RetryBudgetConfig {
    fn from(budget: RetryBudget) -> RetryBudgetConfig {
        match budget {
            RetryBudget::Tokens {
                max_tokens,
                token_ratio,
            } => RetryBudgetConfig::Tokens {
                max_tokens,
                token_ratio,
            },
            RetryBudget::Ratio {
                percent,
                ttl,
                min_per_second,
            } => RetryBudgetConfig::Ratio {
                // To a millionth of a percent, so that 0.2 is written 20.
                percent: (percent * 1e8).round() / 1e6,
                ttl: duration::format(ttl),
                min_per_second,
            },
        }
    }
}

/// The table forms.
#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum Table {
    Tokens {
        max_tokens: u32,
        token_ratio: f64,
    },
    Ratio {
        percent: f64,
        ttl: String,
        min_per_second: u32,
    },
}

impl Serialize for RetryBudgetConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            RetryBudgetConfig::Off => serializer.serialize_str("off"),
            RetryBudgetConfig::Tokens {
                max_tokens,
                token_ratio,
            } => {
                let mut table = serializer.serialize_struct("RetryBudgetConfig", 3)?;
                table.serialize_field("kind", "tokens")?;
                table.serialize_field("max_tokens", max_tokens)?;
                table.serialize_field("token_ratio", token_ratio)?;
                table.end()
            }
            RetryBudgetConfig::Ratio {
                percent,
                ttl,
                min_per_second,
            } => {
                let mut table = serializer.serialize_struct("RetryBudgetConfig", 4)?;
                table.serialize_field("kind", "ratio")?;
                table.serialize_field("percent", percent)?;
                table.serialize_field("ttl", ttl)?;
                table.serialize_field("min_per_second", min_per_second)?;
                table.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for RetryBudgetConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(BudgetVisitor)
    }
}

/// Reads `"off"`, `"finagle"`, `"grpc"` or a table, with a message naming
/// every form.
struct BudgetVisitor;

impl<'de> Visitor<'de> for BudgetVisitor {
    type Value = RetryBudgetConfig;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            r#""off", "finagle", "grpc", or a table { kind = "tokens", max_tokens = 10, token_ratio = 0.1 } or { kind = "ratio", percent = 20, ttl = "10s", min_per_second = 10 }"#,
        )
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<RetryBudgetConfig, E> {
        match text {
            "off" => Ok(RetryBudgetConfig::Off),
            "finagle" => Ok(RetryBudget::finagle().into()),
            "grpc" => Ok(RetryBudget::grpc().into()),
            _ => Err(E::invalid_value(de::Unexpected::Str(text), &self)),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RetryBudgetConfig, A::Error> {
        Ok(
            match Table::deserialize(de::value::MapAccessDeserializer::new(map))? {
                Table::Tokens {
                    max_tokens,
                    token_ratio,
                } => RetryBudgetConfig::Tokens {
                    max_tokens,
                    token_ratio,
                },
                Table::Ratio {
                    percent,
                    ttl,
                    min_per_second,
                } => RetryBudgetConfig::Ratio {
                    percent,
                    ttl,
                    min_per_second,
                },
            },
        )
    }
}
