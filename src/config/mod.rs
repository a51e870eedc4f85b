//! Configuration from files (feature `serde`): [`BreakerConfig`] for a
//! breaker, [`RegistryConfig`] for a registry with per-host overrides and
//! its outlier detection ([`OutliersConfig`]), in any serde format (TOML,
//! YAML, JSON…).
//!
//! They are plain data, one field per builder method, every field optional.
//! `to_builder()` turns one into the [`Builder`](crate::Builder) or
//! [`RegistryBuilder`](crate::RegistryBuilder) it describes and checks it
//! exactly as `build()` would: the same [`ConfigError`](crate::ConfigError)
//! naming the field and the allowed range, and for a host's override
//! [`ConfigError::key`](crate::ConfigError::key) naming the host. There is
//! no second set of range checks here to drift from the builder's.
//!
//! # The schema
//!
//! Every field, with the builder method it sets:
//!
//! ```
//! use failfast::config::RegistryConfig;
//! use failfast::registry::HostKey;
//!
//! let toml = r#"
//! ## The registry (RegistryBuilder).
//! capacity = 100000               # .capacity(100_000)
//! idle_ttl = "10m"                # .idle_ttl(…)
//! forget_after = "1h"             # .forget_after(…)
//! max_key_bytes = 6400000         # .max_key_bytes(…)
//! max_open = { fraction = 0.2 }   # .max_open(MaxOpen::Fraction(0.2)); or { count = 10 }, or "unlimited"
//! shards = 256                    # .shards(256)
//!
//! ## Outlier detection: each host judged against its pool
//! ## (RegistryBuilder::outliers(Outliers)); an empty table is the defaults.
//! [outliers]
//! # preset = "envoy"                      # Outliers::envoy(): Envoy's rules exactly
//! interval = "10s"                        # .interval(10 s)
//! success_rate_request_volume = 100       # .success_rate_request_volume(100)
//! success_rate_minimum_hosts = 5          # .success_rate_minimum_hosts(5)
//! stdev_factor = 1.9                      # .stdev_factor(1.9)
//! success_rate_minimum_gap = 0.02        # .success_rate_minimum_gap(0.02); 0 by default
//! enforcing_success_rate = 100            # .enforcing_success_rate(100)
//! failure_percentage_threshold = 85       # .failure_percentage_threshold(85)
//! failure_percentage_request_volume = 50  # .failure_percentage_request_volume(50)
//! failure_percentage_minimum_hosts = 5    # .failure_percentage_minimum_hosts(5)
//! enforcing_failure_percentage = 0        # .enforcing_failure_percentage(0)
//! slow_outliers = { factor = 3.0, floor = 0.1 }  # .slow_outliers(3.0, 0.1); or "off" (the default)
//! enforcing_slow = 100                    # .enforcing_slow(100)
//! max_ejection_percent = 10               # .max_ejection_percent(10)
//! panic_threshold = 50                    # .panic_threshold(50)
//! significance = 1e-6                     # .significance(1e-6); or "off" (Envoy's rules alone)
//! ejection_time = { base = "30s", max = "5m" }  # .ejection_time(30 s, 5 min); or "breaker"
//!
//! ## The template of every host's breaker (Builder).
//! [breaker]
//! preset = "resilience4j"         # start from Builder::resilience4j_defaults(); or "envoy"
//! consecutive_failures = 5        # .consecutive_failures(5)
//! failure_rate = 0.5              # .failure_rate(0.5)
//! slow_call_rate = 0.8            # .slow_call_rate(0.8)
//! slow_call_threshold = "2s"      # .slow_call_threshold(2 s)
//! time_window = { length = "60s", buckets = 12 }  # .time_window(60 s, 12); or count_window = 100
//! min_calls = 20                  # .min_calls(20)
//! half_open_probes = 3            # .half_open_probes(3)
//! probe_lease = "10s"             # .probe_lease(10 s)
//! abandoned_after = "3s"          # .abandoned_after(3 s)
//! unanswered = { calls = 5, after = "500ms" }     # .unanswered(5, 500 ms); or "off": .unanswered_off()
//! open_duration = "30s"           # .open_duration(30 s)
//! backoff = { multiplier = 2.0, cap = "5m" }      # .backoff(2.0, 5 min); or "off"
//! jitter = 0.2                    # .jitter(0.2)
//! count_calls = true              # .count_calls(true)
//! ramp = { window = "30s" }       # .ramp(30 s); with min_fraction = 0.1, aggression = 1.0: .ramp_curve(…); or "off"
//! half_open_rate_rule = true      # .half_open_rate_rule()
//! half_open_failure_rate = 0.3    # .half_open_failure_rate(0.3) (turns the rule on)
//! half_open_slow_call_rate = 0.6  # .half_open_slow_call_rate(0.6) (turns the rule on)
//! max_hint = "5m"                 # .max_hint(5 min): hints remembered; "off": .hints_off()
//! retry_budget = { kind = "ratio", percent = 20, ttl = "10s", min_per_second = 10 }  # .retry_budget(RetryBudget::ratio(0.2, 10 s, 10)); or "finagle", "grpc", { kind = "tokens", max_tokens = 10, token_ratio = 0.1 }, "off"
//! ## id = 7                       # .id(7): tests and simulations only
//!
//! ## One host's own breaker (RegistryBuilder::override_key): laid over [breaker].
//! ## `host:port`, the port written out; normalised for HostKey keys.
//! [hosts."payments.internal:443"]
//! consecutive_failures = 2
//! backoff = "off"
//! ramp = "off"
//! outlier_pool = "payments"       # .outlier_pool("payments"): judged among that pool's hosts
//! retry_budget = "off"            # .retry_budget_off(): no budget for this host
//! "#;
//! let config: RegistryConfig = toml::from_str(toml).unwrap();
//! let registry = config.to_builder::<HostKey>()?.build()?;
//! let pay = registry.handle_from("payments.internal:443");
//! assert_eq!(pay.config().consecutive_failures(), Some(2));
//! assert_eq!(pay.config().failure_rate(), Some(0.5)); // the template's
//! assert_eq!(pay.config().ramp(), None);
//! assert_eq!(pay.config().half_open_rates(), Some((0.3, Some(0.6)))); // the template's
//! let other = registry.handle_from("other.internal:443");
//! assert_eq!(other.config().ramp().map(|(window, ..)| window.as_secs()), Some(30));
//! assert_eq!(other.config().max_hint().map(|d| d.as_secs()), Some(300));
//! assert_eq!(pay.config().outlier_pool(), Some("payments"));
//! let pools: Vec<String> = registry.outlier_pools().iter().map(|p| p.name.to_string()).collect();
//! assert_eq!(pools, ["default", "payments"]);
//! assert_eq!(pay.config().retry_budget(), None);
//! assert_eq!(other.config().retry_budget(), Some(failfast::RetryBudget::finagle()));
//! # Ok::<(), failfast::ConfigError>(())
//! ```
//!
//! A [`BreakerConfig`] alone is the `[breaker]` table's fields at the top level.
//!
//! # Rules
//!
//! - **Durations are text**: integers with units `ns`, `us` (or `µs`), `ms`,
//!   `s`, `m`, `h`, `d`, summed: `"500ms"`, `"30s"`, `"1h30m"`, `"1d"`. No
//!   fractions, no bare numbers — `open_duration = 30` is refused, since
//!   seconds or milliseconds would be a guess. Text that does not parse is a
//!   `ConfigError` naming the field. (A dozen lines of our own rather than a
//!   dependency: the format is small, and its errors are ours.) Written out,
//!   a duration takes its largest exact unit (`"90s"`, `"1500ms"`, `"1d"`),
//!   so a round trip is exact.
//! - **A preset, then the fields**: with `preset`, the table starts from
//!   [`Builder::envoy_outlier_detection`](crate::Builder::envoy_outlier_detection)
//!   or [`Builder::resilience4j_defaults`](crate::Builder::resilience4j_defaults),
//!   and each field set replaces the preset's value. A preset's trip
//!   condition cannot be removed, only changed: leave `preset` out to choose
//!   them all.
//! - **One window**: `count_window = N` or `time_window = { length, buckets }`,
//!   not both. Set neither, and a rate gets the builder's default window.
//! - **The unanswered rule**: `"off"` or `{ calls, after }` (both
//!   required); left out, the builder's default rule (fitted to the
//!   slow-call threshold and `abandoned_after`).
//! - **Backoff**: `"off"` or `{ multiplier, cap }` (both required); left out,
//!   the builder's default (×2 up to 3 × the base) or the preset's.
//! - **Recovery**: `ramp = "off"` or `{ window, min_fraction, aggression }`
//!   (`window` required; the other two default to Envoy's 0.1 and 1.0); left
//!   out, no ramp. The half-open rate rule is on with
//!   `half_open_rate_rule = true` or with either of its rates;
//!   `half_open_rate_rule = false` beside a rate in the same table is
//!   refused. `max_hint` is a duration (hints remembered, capped at it) or
//!   `"off"` (no hint taken); left out, a tripping verdict's hint is taken,
//!   capped at 10 min. A bad value is the builder's error, naming `ramp.window`,
//!   `ramp.min_fraction`, `ramp.aggression`, `half_open_probes` (at most 31
//!   under the rule), `half_open_failure_rate`, `half_open_slow_call_rate`
//!   or `max_hint`.
//! - **Retry budget**: `retry_budget = "off"`, `"finagle"`, `"grpc"`, or a
//!   table with `kind = "tokens"` (`max_tokens`, `token_ratio`) or
//!   `kind = "ratio"` (`percent` in percent — 20 for a fifth —, `ttl` as
//!   duration text, `min_per_second`), every field of the table required;
//!   left out, no budget. A bad value is the builder's error, naming
//!   `retry_budget.max_tokens`, `retry_budget.token_ratio`,
//!   `retry_budget.percent`, `retry_budget.ttl` or
//!   `retry_budget.min_per_second`.
//! - **Hosts lay over the template** field by field (the window as one
//!   field, the ramp as one field), and a host's `preset` replaces the
//!   template's. A host's `half_open_rate_rule = false` turns off the
//!   template's rule, rates and all; a host's rate turns the rule on even
//!   where the template says `false`.
//! - **Host keys are `host:port`, normalised.** For a registry of
//!   [`HostKey`](crate::registry::HostKey)s (the key type for host names)
//!   each `[hosts."…"]` key goes through the normaliser the keyed tower
//!   layer keys requests by ([`authority`](crate::authority)):
//!   `"API.Example.:0443"` is `api.example:443`, the breaker the layer
//!   uses. A file has no scheme, so a key without a port is refused with a
//!   suggestion (`"api.example:443" for https`); so is a key that is not a
//!   host name or an IP address, one with a `user@` part, and two keys that
//!   name one host (the error names both). Other key types (`u64`,
//!   `String`, your own) take the text as written, with `K::try_from(&str)`.
//! - **Unknown fields are refused** by the deserializer (a misspelt
//!   `failure_rates` would otherwise be a silent default), as are values of
//!   the wrong type (`consecutive_failures = -1`, `count_window = "20"`):
//!   those errors are the format's (for TOML, with the line and the key).
//!   Values of the right type that the builder refuses are the builder's
//!   `ConfigError`, word for word.
//! - **Outliers**: the registry's `[outliers]` table ([`OutliersConfig`])
//!   turns outlier detection on, each field as its [`Outliers`](crate::Outliers)
//!   method; `slow_outliers` is `{ factor, floor }` (both required) or
//!   `"off"`. A bad value is the registry builder's error, naming
//!   `outliers.interval`, `outliers.stdev_factor`,
//!   `outliers.slow_outliers.floor` and so on. A breaker's `outlier_pool`
//!   (in `[breaker]` or a host's table, laid over like any field) names the
//!   pool its host is judged in; without an `[outliers]` table the
//!   registry's `build` refuses it.
//! - **An observer, a clock or a hasher is code**: add it to the builder
//!   that `to_builder` returns.
//! - **Writing a builder out**: `BreakerConfig::from(&builder)` sets each
//!   field the builder moved off its default; `to_builder` on the result
//!   gives a builder with the same knobs. The recovery settings are read off
//!   the configuration the builder builds (see [`BreakerConfig`]'s `From`).
//!   Likewise `OutliersConfig::from(&outliers)`, and `to_outliers`.

mod breaker;
mod duration;
mod hosts;
mod outliers;
mod parts;
mod registry;
mod retry;

use core::fmt;

pub use breaker::BreakerConfig;
pub use outliers::{
    EjectionTimeConfig, OutliersConfig, OutliersPreset, SignificanceConfig, SlowOutliersConfig,
};
pub use parts::{BackoffConfig, Preset, RampConfig, TimeWindowConfig, UnansweredConfig};
pub use registry::RegistryConfig;
pub use retry::RetryBudgetConfig;

/// Text a [`ConfigError`](crate::ConfigError) shows as it is (it formats the
/// value it was given with `Debug`).
struct Text<'a, T: ?Sized>(&'a T);

impl<T: fmt::Display + ?Sized> fmt::Debug for Text<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.0, f)
    }
}
