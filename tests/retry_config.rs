//! The retry budget through the serde configuration: every form, the
//! errors that name the field and the range, the round trip from a
//! builder, and per-host overrides in a registry's file.

#![cfg(feature = "serde")]

use std::time::Duration;

use failfast::config::{BreakerConfig, RegistryConfig, RetryBudgetConfig};
use failfast::registry::HostKey;
use failfast::{Breaker, RetryBudget};

fn budget(toml: &str) -> Result<Option<RetryBudget>, failfast::ConfigError> {
    let config: BreakerConfig =
        toml::from_str(&format!("consecutive_failures = 5\n{toml}")).unwrap();
    Ok(config.to_builder()?.build_config()?.retry_budget())
}

#[test]
fn every_form_reads() {
    assert_eq!(budget("").unwrap(), None);
    assert_eq!(budget(r#"retry_budget = "off""#).unwrap(), None);
    assert_eq!(
        budget(r#"retry_budget = "finagle""#).unwrap(),
        Some(RetryBudget::finagle())
    );
    assert_eq!(
        budget(r#"retry_budget = "grpc""#).unwrap(),
        Some(RetryBudget::tokens(10, 0.1))
    );
    assert_eq!(
        budget(r#"retry_budget = { kind = "tokens", max_tokens = 4, token_ratio = 1.6 }"#).unwrap(),
        Some(RetryBudget::tokens(4, 1.6))
    );
    assert_eq!(
        budget(
            r#"retry_budget = { kind = "ratio", percent = 12.5, ttl = "30s", min_per_second = 0 }"#
        )
        .unwrap(),
        Some(RetryBudget::ratio(0.125, Duration::from_secs(30), 0))
    );
}

#[test]
fn bad_values_name_the_field_and_the_range() {
    let cases = [
        (
            r#"retry_budget = { kind = "tokens", max_tokens = 0, token_ratio = 0.1 }"#,
            "invalid failfast config: retry_budget.max_tokens = 0; allowed: 1..=1000",
        ),
        (
            r#"retry_budget = { kind = "tokens", max_tokens = 1001, token_ratio = 0.1 }"#,
            "invalid failfast config: retry_budget.max_tokens = 1001; allowed: 1..=1000",
        ),
        (
            r#"retry_budget = { kind = "tokens", max_tokens = 10, token_ratio = 0.0004 }"#,
            "invalid failfast config: retry_budget.token_ratio = 0.0004; allowed: 0.001..=1000 (three decimals kept)",
        ),
        (
            r#"retry_budget = { kind = "ratio", percent = -1, ttl = "10s", min_per_second = 10 }"#,
            "invalid failfast config: retry_budget.percent = -1.0; allowed: 0..=100000 (percent of first tries)",
        ),
        (
            r#"retry_budget = { kind = "ratio", percent = 20, ttl = "500ms", min_per_second = 10 }"#,
            "invalid failfast config: retry_budget.ttl = 500ms; allowed: 1 s ..= 60 s",
        ),
        (
            r#"retry_budget = { kind = "ratio", percent = 20, ttl = "2m", min_per_second = 10 }"#,
            "invalid failfast config: retry_budget.ttl = 120s; allowed: 1 s ..= 60 s",
        ),
        (
            r#"retry_budget = { kind = "ratio", percent = 20, ttl = "10s", min_per_second = 10001 }"#,
            "invalid failfast config: retry_budget.min_per_second = 10001; allowed: 0..=10000",
        ),
    ];
    for (toml, message) in cases {
        assert_eq!(budget(toml).unwrap_err().to_string(), message, "{toml}");
    }
    let ttl = budget(
        r#"retry_budget = { kind = "ratio", percent = 20, ttl = "ten", min_per_second = 10 }"#,
    )
    .unwrap_err();
    assert_eq!(ttl.field(), "retry_budget.ttl");
    // The builder's own range, in its unit (a fraction).
    let err = Breaker::builder()
        .consecutive_failures(5)
        .retry_budget(RetryBudget::ratio(1000.5, Duration::from_secs(10), 0))
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "retry_budget.percent");
    assert_eq!(err.allowed(), "0..=1000 retries per first try (0.2: 20 %)");
}

#[test]
fn unknown_fields_and_kinds_are_refused() {
    for toml in [
        r#"retry_budget = { kind = "tokens", max_tokens = 4, token_ratio = 1.6, percent = 2 }"#,
        r#"retry_budget = { kind = "bucket", max_tokens = 4, token_ratio = 1.6 }"#,
        r#"retry_budget = { kind = "tokens", max_tokens = 4 }"#,
        r#"retry_budget = "on""#,
    ] {
        assert!(toml::from_str::<BreakerConfig>(toml).is_err(), "{toml}");
    }
}

#[test]
fn a_builder_writes_its_budget_out_and_reads_it_back() {
    for budget in [
        RetryBudget::finagle(),
        RetryBudget::grpc(),
        RetryBudget::ratio(0.35, Duration::from_millis(2500), 3),
        RetryBudget::tokens(1000, 0.001),
    ] {
        let builder = Breaker::builder()
            .consecutive_failures(3)
            .retry_budget(budget);
        let config = BreakerConfig::from(&builder);
        let text = toml::to_string(&config).unwrap();
        let back: BreakerConfig = toml::from_str(&text).unwrap();
        assert_eq!(back, config, "{text}");
        let built = back.to_builder().unwrap().build_config().unwrap();
        assert_eq!(built.retry_budget(), Some(budget), "{text}");
    }
    let finagle = BreakerConfig::from(&Breaker::builder().retry_budget(RetryBudget::finagle()));
    // (A builder need not build to be written out.)
    assert_eq!(
        toml::to_string(&finagle).unwrap(),
        "[retry_budget]\nkind = \"ratio\"\npercent = 20.0\nttl = \"10s\"\nmin_per_second = 10\n"
    );
    assert_eq!(BreakerConfig::from(&Breaker::builder()).retry_budget, None);
    assert_eq!(
        RetryBudgetConfig::from(RetryBudget::grpc()),
        RetryBudgetConfig::Tokens {
            max_tokens: 10,
            token_ratio: 0.1
        }
    );
}

#[test]
fn hosts_override_the_templates_budget() {
    let config: RegistryConfig = toml::from_str(
        r#"
        [breaker]
        consecutive_failures = 5
        retry_budget = "grpc"

        [hosts."off.internal:443"]
        retry_budget = "off"

        [hosts."ratio.internal:443"]
        retry_budget = { kind = "ratio", percent = 50, ttl = "5s", min_per_second = 1 }

        [hosts."other.internal:443"]
        consecutive_failures = 2
        "#,
    )
    .unwrap();
    let registry = config.to_builder::<HostKey>().unwrap().build().unwrap();
    let budget = |host: &str| registry.handle_from(host).config().retry_budget();
    assert_eq!(budget("off.internal:443"), None);
    assert_eq!(
        budget("ratio.internal:443"),
        Some(RetryBudget::ratio(0.5, Duration::from_secs(5), 1))
    );
    assert_eq!(budget("other.internal:443"), Some(RetryBudget::grpc()));
    assert_eq!(budget("new.internal:443"), Some(RetryBudget::grpc()));

    let bad: RegistryConfig = toml::from_str(
        r#"
        [breaker]
        consecutive_failures = 5

        [hosts."bad.internal:443"]
        retry_budget = { kind = "tokens", max_tokens = 0, token_ratio = 1 }
        "#,
    )
    .unwrap();
    let err = bad.to_builder::<HostKey>().unwrap_err();
    assert_eq!(err.field(), "retry_budget.max_tokens");
    assert_eq!(err.key(), Some(r#""bad.internal:443""#));
}
