//! [`RegistryConfig`]: a [`RegistryBuilder`]'s knobs, the template breaker
//! and the per-host overrides, as plain data.

use core::fmt;
use core::hash::Hash;
use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::breaker::BreakerConfig;
use super::outliers::OutliersConfig;
use super::{duration, hosts, Text};
use crate::authority::KeyBuf;
use crate::error::ConfigError;
use crate::registry::MaxOpen;
use crate::registry::{KeyBytes, Registry, RegistryBuilder};

/// A registry's configuration as data: the `[breaker]` template, the
/// registry's own limits (each optional, as [`RegistryBuilder`]'s methods),
/// and `[hosts."name"]` tables that override the template for one key.
///
/// A host's table is laid over `[breaker]` field by field: what it sets
/// replaces the template's value, the rest is the template's (the window
/// counts as one field: a host's `count_window` or `time_window` replaces
/// the template's window, whichever kind it was; so does the ramp, and a
/// host's `half_open_rate_rule = false` turns off the template's rule with
/// its rates). So `[hosts."pay:443"] consecutive_failures = 2` changes one
/// knob for one host. See the [module docs](super) for the whole schema.
///
/// ```
/// use failfast::config::RegistryConfig;
/// use failfast::registry::HostKey;
///
/// let config: RegistryConfig = toml::from_str(r#"
///     capacity = 10000
///     max_open = { fraction = 0.2 }
///
///     [breaker]
///     consecutive_failures = 5
///
///     [hosts."pay.internal:443"]
///     consecutive_failures = 2
/// "#).unwrap();
/// let registry = config.to_builder::<HostKey>()?.build()?;
/// assert_eq!(registry.capacity(), Some(10_000));
/// assert_eq!(registry.handle_from("pay.internal:443").config().consecutive_failures(), Some(2));
/// assert_eq!(registry.handle_from("other:443").config().consecutive_failures(), Some(5));
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct RegistryConfig {
    /// [`RegistryBuilder::capacity`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<usize>,
    /// [`RegistryBuilder::idle_ttl`], as duration text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_ttl: Option<String>,
    /// [`RegistryBuilder::forget_after`], as duration text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forget_after: Option<String>,
    /// [`RegistryBuilder::max_key_bytes`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_key_bytes: Option<usize>,
    /// [`RegistryBuilder::max_open`]: `"unlimited"`, `{ count = 10 }` or
    /// `{ fraction = 0.2 }`.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "max_open_out",
        deserialize_with = "max_open_in"
    )]
    pub max_open: Option<MaxOpen>,
    /// [`RegistryBuilder::shards`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shards: Option<usize>,
    /// [`RegistryBuilder::outliers`]: the `[outliers]` table turns outlier
    /// detection on (an empty one: Envoy's defaults); left out, it is off.
    /// A key's breaker joins the pool its `outlier_pool` names, or the
    /// registry's `"default"` one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outliers: Option<OutliersConfig>,
    /// The template every key's breaker is built from
    /// ([`Registry::builder`]'s argument).
    pub breaker: BreakerConfig,
    /// Per-key overrides laid over `breaker`
    /// ([`RegistryBuilder::override_key`]), by the key's text.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub hosts: BTreeMap<String, BreakerConfig>,
}

impl RegistryConfig {
    /// The [`RegistryBuilder`] this describes, for keys of type `K` made
    /// from each host's text: [`HostKey`](crate::registry::HostKey) for host names (the type the keyed
    /// tower layer and the guide use), or `String`, `u64`, `Box<str>`,
    /// `http::uri::Authority`, a type of your own. Checked as
    /// [`RegistryBuilder::build`] checks it: the registry's limits, then the
    /// `[outliers]` table, then the template, then each override in the
    /// keys' order. Two checks that need the built breakers are left to
    /// `build`, which makes them with the same errors: an `outlier_pool`
    /// without an `[outliers]` table, and a latency rule
    /// (`slow_outliers`) over breakers without a `slow_call_threshold`.
    /// Add a hasher or an observer to the builder it returns.
    ///
    /// # Host keys are normalised
    ///
    /// For a host key type — [`HostKey`](crate::registry::HostKey), or `http::uri::Authority` (feature
    /// `tower`) — each `[hosts."…"]` key goes through the normaliser the
    /// keyed layer keys requests by ([`authority`](crate::authority)), so
    /// `[hosts."API.Example:443"]` overrides the breaker of
    /// `api.example:443`, the key the layer looks up, and
    /// [`override_key`](RegistryBuilder::override_key) receives that normal
    /// form (what a status view then shows). A configuration has no scheme,
    /// so the port must be written. Every other type takes its text as
    /// written, with `K::try_from(&str)`: write such keys as the registry
    /// will look them up.
    ///
    /// ```
    /// use failfast::config::RegistryConfig;
    /// use failfast::registry::HostKey;
    ///
    /// let config: RegistryConfig = toml::from_str(r#"
    ///     [breaker]
    ///     consecutive_failures = 5
    ///     [hosts."API.Example.:0443"]
    ///     consecutive_failures = 2
    /// "#).unwrap();
    /// let registry = config.to_builder::<HostKey>()?.build()?;
    /// assert_eq!(registry.handle_from("api.example:443").config().consecutive_failures(), Some(2));
    ///
    /// let no_port: RegistryConfig = toml::from_str(r#"
    ///     [breaker]
    ///     consecutive_failures = 5
    ///     [hosts."api.example"]
    ///     consecutive_failures = 2
    /// "#).unwrap();
    /// assert_eq!(
    ///     no_port.to_builder::<HostKey>().unwrap_err().to_string(),
    ///     "invalid failfast config for key \"api.example\": hosts = \"api.example\" \
    ///      (no port: write \"api.example:443\" for https, \"api.example:80\" for http); \
    ///      allowed: host:port — a host name or an IP address and a port in 1..=65535, \
    ///      the port written out (a config has no scheme to imply one)"
    /// );
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the field, as [`BreakerConfig::to_builder`]
    /// and [`RegistryBuilder::build`] give it; for a host's table,
    /// [`key`](ConfigError::key) names the host as written. A host's text
    /// that `K` refuses, or (for a host key type) that has no port or is not
    /// a host name or an IP address, is an error of the field `hosts` naming
    /// that key; so are two keys that make one key (`"API.example:443"` and
    /// `"api.example:443"` for a host key type), naming both.
    ///
    /// ```
    /// use failfast::config::RegistryConfig;
    /// use failfast::registry::HostKey;
    ///
    /// let config: RegistryConfig = toml::from_str(r#"
    ///     [breaker]
    ///     consecutive_failures = 5
    ///     [hosts."api.example:443"]
    ///     failure_rate = 1.5
    /// "#).unwrap();
    /// let err = config.to_builder::<HostKey>().unwrap_err();
    /// assert_eq!(err.key(), Some(r#""api.example:443""#));
    /// assert_eq!(
    ///     err.to_string(),
    ///     r#"invalid failfast config for key "api.example:443": failure_rate = 1.5; allowed: (0, 1]"#
    /// );
    /// ```
    pub fn to_builder<K>(&self) -> Result<RegistryBuilder<K>, ConfigError>
    where
        K: Hash + Eq + fmt::Debug + KeyBytes + for<'a> TryFrom<&'a str> + 'static,
        for<'a> <K as TryFrom<&'a str>>::Error: fmt::Display,
    {
        let template = self.breaker.apply()?;
        let mut registry = Registry::<K>::builder(template.clone());
        if let Some(max) = self.capacity {
            registry = registry.capacity(max);
        }
        if let Some(ttl) = &self.idle_ttl {
            registry = registry.idle_ttl(duration::parse("idle_ttl", ttl)?);
        }
        if let Some(after) = &self.forget_after {
            registry = registry.forget_after(duration::parse("forget_after", after)?);
        }
        if let Some(max) = self.max_key_bytes {
            registry = registry.max_key_bytes(max);
        }
        if let Some(max_open) = self.max_open {
            registry = registry.max_open(max_open);
        }
        if let Some(n) = self.shards {
            registry = registry.shards(n);
        }
        registry.check_limits()?;
        if let Some(outliers) = &self.outliers {
            registry = registry.outliers(outliers.to_outliers()?);
        }
        template.build_config()?;
        let host_keys = hosts::is_host_key::<K>();
        let mut keys = Vec::with_capacity(self.hosts.len());
        for (name, host) in &self.hosts {
            let mut buf = KeyBuf::new();
            let text = if host_keys {
                hosts::normal_form(name, &mut buf)?
            } else {
                name.as_str()
            };
            let key = K::try_from(text).map_err(|e| {
                ConfigError::new("hosts", "a key the registry's key type accepts", Text(&e))
                    .with_key(&name.as_str())
            })?;
            let breaker = self
                .breaker
                .layered(host)
                .to_builder()
                .map_err(|e| e.with_key(&name.as_str()))?;
            keys.push((key, name.as_str(), breaker));
        }
        hosts::one_table_per_key(keys.iter().map(|(key, name, _)| (key, *name)))?;
        for (key, _, breaker) in keys {
            registry = registry.override_key(key, breaker);
        }
        Ok(registry)
    }
}

/// [`MaxOpen`] as a config file writes it.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum MaxOpenText {
    Unlimited,
    Count(usize),
    Fraction(f64),
}

fn max_open_out<S: Serializer>(max_open: &Option<MaxOpen>, out: S) -> Result<S::Ok, S::Error> {
    max_open
        .map(|m| match m {
            MaxOpen::Unlimited => MaxOpenText::Unlimited,
            MaxOpen::Count(n) => MaxOpenText::Count(n),
            MaxOpen::Fraction(f) => MaxOpenText::Fraction(f),
        })
        .serialize(out)
}

fn max_open_in<'de, D: Deserializer<'de>>(input: D) -> Result<Option<MaxOpen>, D::Error> {
    Ok(Some(match MaxOpenText::deserialize(input)? {
        MaxOpenText::Unlimited => MaxOpen::Unlimited,
        MaxOpenText::Count(n) => MaxOpen::Count(n),
        MaxOpenText::Fraction(f) => MaxOpen::Fraction(f),
    }))
}
