//! Configuration files (feature `serde`): every builder knob survives
//! builder → config → TOML → config → builder; bad values from a file give
//! the builder's own `ConfigError`, with the host named for an override;
//! unknown fields are refused; presets are a start that fields override;
//! `[hosts."…"]` keys of a `HostKey` registry are normalised as the keyed
//! layer normalises requests, and refused when they cannot name one host;
//! the recovery settings (ramp, half-open rate rule, hints) reach the built
//! `Config`, for one host when a host sets them; the `[outliers]` table and
//! a breaker's `outlier_pool` (issue 28) survive a round trip, reach the
//! registry's pools, and a bad value is the registry builder's error.

use std::collections::BTreeMap;
use std::time::Duration;

use failfast::config::{
    BackoffConfig, BreakerConfig, OutliersConfig, Preset, RampConfig, RegistryConfig,
    SlowOutliersConfig, TimeWindowConfig,
};
use failfast::registry::{HostKey, KeyBytes};
use failfast::{
    Breaker, Builder, Config, ConfigError, ManualClock, MaxOpen, Nanos, Outliers, Registry,
    WindowKind, MAX_DURATION,
};

/// Every getter of a validated config, to compare two of them whole.
fn getters(c: &Config) -> String {
    format!(
        "{:?} {:?} {:?}",
        (
            c.consecutive_failures(),
            c.failure_rate(),
            c.slow_call_rate(),
            c.slow_call_threshold(),
            c.window(),
            c.min_calls(),
            c.half_open_probes(),
            c.probe_lease(),
            c.abandoned_after(),
        ),
        (
            (1..=12).map(|t| c.open_duration(t)).collect::<Vec<_>>(),
            c.open_duration_base(),
            c.backoff_multiplier(),
            c.open_duration_cap(),
            c.jitter(),
            c.counts_calls(),
        ),
        (c.ramp(), c.half_open_rates(), c.max_hint()),
    )
}

/// builder → config → TOML → config → builder, checking each step.
#[track_caller]
fn round_trip(builder: &Builder) -> (BreakerConfig, String) {
    let config = BreakerConfig::from(builder);
    let text = toml::to_string(&config).expect("every config serialises");
    let read: BreakerConfig = toml::from_str(&text).unwrap_or_else(|e| panic!("{text}\n{e}"));
    assert_eq!(read, config, "TOML keeps every field:\n{text}");
    let rebuilt = read.to_builder().unwrap_or_else(|e| panic!("{text}\n{e}"));
    // The builder's Debug lists every knob, set or not (and the id).
    assert_eq!(format!("{rebuilt:?}"), format!("{builder:?}"), "{text}");
    let (want, got) = (
        builder.build_config().unwrap(),
        rebuilt.build_config().unwrap(),
    );
    assert_eq!(getters(&got), getters(&want), "{text}");
    (config, text)
}

#[test]
fn every_knob_survives_a_round_trip_through_toml() {
    let day = MAX_DURATION;
    let everything = Breaker::builder()
        .consecutive_failures(32767)
        .failure_rate(0.25)
        .slow_call_rate(1.0)
        .slow_call_threshold(day)
        .time_window(day, 1024)
        .min_calls(1_048_576)
        .half_open_probes(255)
        .probe_lease(day)
        .abandoned_after(day)
        .open_duration(day)
        .backoff(1000.0, day)
        .jitter(0.999)
        .count_calls(true)
        .id(u32::MAX);
    let (config, text) = round_trip(&everything);
    assert_eq!(config.slow_call_threshold.as_deref(), Some("1d"));
    assert_eq!(config.time_window, Some(TimeWindowConfig::new("1d", 1024)));
    assert!(text.contains("open_duration = \"1d\""), "{text}");
    let built = config.to_builder().unwrap().build_config().unwrap();
    assert_eq!(built.open_duration_cap(), MAX_DURATION);
    assert_eq!(
        built.window(),
        WindowKind::Time {
            length: day,
            buckets: 1024
        }
    );

    // Durations below a millisecond, and ones that are no whole unit.
    round_trip(
        &Breaker::builder()
            .slow_call_rate(0.5)
            .slow_call_threshold(Duration::from_micros(1500))
            .time_window(Duration::from_nanos(1_000_001), 1)
            .probe_lease(Duration::from_nanos(1))
            .abandoned_after(Duration::from_millis(90_001))
            .open_duration(Duration::from_secs(90))
            .backoff(1.5, Duration::from_secs(5400)),
    );
    // A count window, backoff off, the bottom of each range.
    let (config, _) = round_trip(
        &Breaker::builder()
            .failure_rate(f64::MIN_POSITIVE)
            .count_window(1)
            .min_calls(1)
            .open_duration(Duration::from_nanos(1))
            .backoff_off()
            .jitter(0.0)
            .count_calls(false),
    );
    assert_eq!(config.count_window, Some(1));
    assert_eq!(config.backoff, Some(BackoffConfig::Off));
    // Defaults stay unset: the file says only what was chosen.
    let (config, text) = round_trip(&Breaker::builder().consecutive_failures(5));
    assert_eq!(text, "consecutive_failures = 5\n");
    assert_eq!(config.jitter, None);
    // Presets come out as the values they stand for.
    for preset in [
        Builder::envoy_outlier_detection(),
        Builder::resilience4j_defaults(),
    ] {
        let (config, _) = round_trip(&preset);
        assert_eq!(config.preset, None);
    }
    // The rates a float can only nearly write in decimal.
    round_trip(&Breaker::builder().failure_rate(0.1 + 0.2).jitter(1.0 / 3.0));
}

#[test]
fn presets_read_from_a_file_equal_the_builder_presets() {
    for (name, preset) in [
        ("envoy", Builder::envoy_outlier_detection()),
        ("resilience4j", Builder::resilience4j_defaults()),
    ] {
        let config: BreakerConfig = toml::from_str(&format!("preset = \"{name}\"")).unwrap();
        let from_file = config.to_builder().unwrap();
        assert_eq!(format!("{from_file:?}"), format!("{preset:?}"));
        assert_eq!(
            toml::to_string(&config).unwrap(),
            format!("preset = \"{name}\"\n")
        );
    }
}

#[test]
fn a_preset_is_a_start_that_explicit_fields_override() {
    let config: BreakerConfig = toml::from_str(
        r#"
        preset = "envoy"
        consecutive_failures = 3
        open_duration = "10s"
        backoff = "off"
        "#,
    )
    .unwrap();
    assert_eq!(config.preset, Some(Preset::Envoy));
    let c = config.to_builder().unwrap().build_config().unwrap();
    assert_eq!(c.consecutive_failures(), Some(3)); // envoy: 5
    assert_eq!(c.open_duration(1), Duration::from_secs(10)); // envoy: 30 s
    assert_eq!(c.open_duration(4), Duration::from_secs(10)); // envoy: doubling
    assert_eq!(c.failure_rate(), None);

    let config: BreakerConfig = toml::from_str(
        r#"
        preset = "resilience4j"
        time_window = { length = "10s", buckets = 10 }
        min_calls = 5
        "#,
    )
    .unwrap();
    let c = config.to_builder().unwrap().build_config().unwrap();
    assert_eq!(
        c.window(),
        WindowKind::Time {
            length: Duration::from_secs(10),
            buckets: 10
        }
    ); // resilience4j: the last 100 calls
    assert_eq!(c.min_calls(), 5);
    assert_eq!(c.failure_rate(), Some(0.5)); // kept
    assert_eq!(c.half_open_probes(), 10); // kept
    assert_eq!(c.open_duration(3), Duration::from_secs(60)); // kept, no backoff
}

/// A breaker table's bad value, and the builder call with the same value.
fn bad_breaker_values() -> Vec<(String, Builder)> {
    let base = || Breaker::builder().consecutive_failures(5);
    let with_base = |text: &str| format!("consecutive_failures = 5\n{text}");
    let secs = Duration::from_secs;
    let day_and = |d: Duration| MAX_DURATION + d;
    vec![
        (
            "consecutive_failures = 0".to_string(),
            Builder::new().consecutive_failures(0),
        ),
        (
            "consecutive_failures = 32768".to_string(),
            Builder::new().consecutive_failures(32768),
        ),
        (with_base("failure_rate = 1.5"), base().failure_rate(1.5)),
        (with_base("failure_rate = 0"), base().failure_rate(0.0)),
        (
            with_base("failure_rate = nan"),
            base().failure_rate(f64::NAN),
        ),
        (
            with_base("failure_rate = -inf"),
            base().failure_rate(f64::NEG_INFINITY),
        ),
        (
            with_base("slow_call_rate = 2.0\nslow_call_threshold = \"1s\""),
            base().slow_call_rate(2.0).slow_call_threshold(secs(1)),
        ),
        (
            with_base("slow_call_rate = 0.5"),
            base().slow_call_rate(0.5),
        ),
        (
            with_base("slow_call_threshold = \"0s\""),
            base().slow_call_threshold(Duration::ZERO),
        ),
        (
            with_base("slow_call_threshold = \"1d1ns\""),
            base().slow_call_threshold(day_and(Duration::from_nanos(1))),
        ),
        ("".to_string(), Builder::new()),
        (
            with_base("failure_rate = 0.5\ncount_window = 0"),
            base().failure_rate(0.5).count_window(0),
        ),
        (
            with_base("failure_rate = 0.5\ncount_window = 4097"),
            base().failure_rate(0.5).count_window(4097),
        ),
        (
            with_base("failure_rate = 0.5\ntime_window = { length = \"10s\", buckets = 0 }"),
            base().failure_rate(0.5).time_window(secs(10), 0),
        ),
        (
            with_base("failure_rate = 0.5\ntime_window = { length = \"10s\", buckets = 1025 }"),
            base().failure_rate(0.5).time_window(secs(10), 1025),
        ),
        (
            with_base("failure_rate = 0.5\ntime_window = { length = \"1us\", buckets = 2 }"),
            base()
                .failure_rate(0.5)
                .time_window(Duration::from_micros(1), 2),
        ),
        (
            with_base("failure_rate = 0.5\ncount_window = 10\nmin_calls = 11"),
            base().failure_rate(0.5).count_window(10).min_calls(11),
        ),
        (with_base("min_calls = 0"), base().min_calls(0)),
        (
            with_base("half_open_probes = 0"),
            base().half_open_probes(0),
        ),
        (
            with_base("half_open_probes = 256"),
            base().half_open_probes(256),
        ),
        (
            with_base("open_duration = \"0ms\""),
            base().open_duration(Duration::ZERO),
        ),
        (
            with_base("open_duration = \"25h\""),
            base().open_duration(secs(25 * 3600)),
        ),
        (
            with_base("backoff = { multiplier = 0.5, cap = \"5m\" }"),
            base().backoff(0.5, secs(300)),
        ),
        (
            with_base("backoff = { multiplier = 1001, cap = \"5m\" }"),
            base().backoff(1001.0, secs(300)),
        ),
        (
            with_base("open_duration = \"10m\"\nbackoff = { multiplier = 2, cap = \"5m\" }"),
            base().open_duration(secs(600)).backoff(2.0, secs(300)),
        ),
        (
            with_base("backoff = { multiplier = 2, cap = \"1d1s\" }"),
            base().backoff(2.0, day_and(secs(1))),
        ),
        (with_base("jitter = 1.0"), base().jitter(1.0)),
        (with_base("jitter = -0.1"), base().jitter(-0.1)),
        (
            with_base("probe_lease = \"0s\""),
            base().probe_lease(Duration::ZERO),
        ),
        (
            with_base("probe_lease = \"2d\""),
            base().probe_lease(secs(2 * 86_400)),
        ),
        (
            with_base("abandoned_after = \"0s\""),
            base().abandoned_after(Duration::ZERO),
        ),
        (
            with_base("abandoned_after = \"86401s\""),
            base().abandoned_after(day_and(secs(1))),
        ),
        // The recovery settings.
        (
            with_base("ramp = { window = \"999us\" }"),
            base().ramp(Duration::from_micros(999)),
        ),
        (
            with_base("ramp = { window = \"1d1ns\" }"),
            base().ramp(day_and(Duration::from_nanos(1))),
        ),
        (
            with_base("ramp = { window = \"30s\", min_fraction = 1.5 }"),
            base().ramp_curve(secs(30), 1.5, 1.0),
        ),
        (
            with_base("ramp = { window = \"30s\", min_fraction = -0.1 }"),
            base().ramp_curve(secs(30), -0.1, 1.0),
        ),
        (
            with_base("ramp = { window = \"30s\", aggression = 0 }"),
            base().ramp_curve(secs(30), 0.1, 0.0),
        ),
        (
            with_base("ramp = { window = \"30s\", aggression = 100.5 }"),
            base().ramp_curve(secs(30), 0.1, 100.5),
        ),
        (
            with_base("ramp = { window = \"30s\", aggression = nan }"),
            base().ramp_curve(secs(30), 0.1, f64::NAN),
        ),
        (
            with_base("half_open_probes = 32\nhalf_open_rate_rule = true"),
            base().half_open_probes(32).half_open_rate_rule(),
        ),
        (
            with_base("half_open_probes = 32\nhalf_open_failure_rate = 0.5"),
            base().half_open_probes(32).half_open_failure_rate(0.5),
        ),
        (
            with_base("half_open_failure_rate = 0"),
            base().half_open_failure_rate(0.0),
        ),
        (
            with_base("half_open_failure_rate = 1.5"),
            base().half_open_failure_rate(1.5),
        ),
        (
            with_base("half_open_slow_call_rate = 2\nslow_call_threshold = \"1s\""),
            base()
                .half_open_slow_call_rate(2.0)
                .slow_call_threshold(secs(1)),
        ),
        (
            with_base("half_open_slow_call_rate = 0.5"),
            base().half_open_slow_call_rate(0.5),
        ),
        (
            with_base("max_hint = \"0s\""),
            base().max_hint(Duration::ZERO),
        ),
        (
            with_base("max_hint = \"39h1ns\""),
            base().max_hint(secs(39 * 3600) + Duration::from_nanos(1)),
        ),
    ]
}

#[test]
fn a_bad_value_in_a_file_is_the_builders_error_word_for_word() {
    for (text, builder) in bad_breaker_values() {
        let want = builder
            .build_config()
            .expect_err("the builder refuses this value");
        let config: BreakerConfig =
            toml::from_str(&text).unwrap_or_else(|e| panic!("{text:?} should parse: {e}"));
        let got = config.to_builder().expect_err(&text);
        assert_eq!(got, want, "{text:?}");
        assert_eq!(got.to_string(), want.to_string());
        assert_eq!(got.key(), None);
    }
}

#[test]
fn duration_text_that_does_not_parse_names_its_field() {
    for (text, field) in [
        ("open_duration = \"30 s\"", "open_duration"),
        ("probe_lease = \"1.5s\"", "probe_lease"),
        ("abandoned_after = \"5min\"", "abandoned_after"),
        ("slow_call_threshold = \"\"", "slow_call_threshold"),
        ("backoff = { multiplier = 2, cap = \"300\" }", "backoff.cap"),
        ("ramp = { window = \"30\" }", "ramp.window"),
        (
            "failure_rate = 0.5\ntime_window = { length = \"ten seconds\", buckets = 10 }",
            "time_window.length",
        ),
    ] {
        let config: BreakerConfig = toml::from_str(&format!("consecutive_failures = 5\n{text}"))
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        let err = config.to_builder().expect_err(text);
        assert_eq!(err.field(), field, "{err}");
        assert!(err.allowed().contains("\"30s\""), "{err}");
        assert!(err
            .to_string()
            .starts_with(&format!("invalid failfast config: {field} = \"")));
    }
    // A bare number is a type error of the format: seconds or milliseconds
    // would be a guess.
    let err = toml::from_str::<BreakerConfig>("open_duration = 30").unwrap_err();
    assert!(err.to_string().contains("open_duration"), "{err}");
    assert!(err.to_string().contains("expected a string"), "{err}");
}

#[test]
fn one_window_kind_per_table() {
    let config: BreakerConfig = toml::from_str(
        "failure_rate = 0.5\ncount_window = 20\ntime_window = { length = \"10s\", buckets = 10 }",
    )
    .unwrap();
    let err = config.to_builder().unwrap_err();
    assert_eq!(err.field(), "time_window");
    assert_eq!(
        err.to_string(),
        "invalid failfast config: time_window = TimeWindowConfig { length: \"10s\", buckets: 10 } \
         and count_window = 20; allowed: count_window or time_window, not both"
    );
}

#[test]
fn unknown_fields_are_refused_with_the_name_and_the_place() {
    for (text, unknown) in [
        ("failure_rates = 0.5", "failure_rates"),
        (
            "consecutive_failures = 5\nbackoff = { multiplier = 2, cap = \"5m\", max = \"1h\" }",
            "max",
        ),
        (
            "time_window = { length = \"10s\", buckets = 10, slices = 2 }",
            "slices",
        ),
        ("ramp = { window = \"30s\", floor = 0.1 }", "floor"),
        ("half_open_rule = true", "half_open_rule"),
        ("hints = false", "hints"),
    ] {
        let err = toml::from_str::<BreakerConfig>(text)
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("unknown field `{unknown}`")), "{err}");
        assert!(err.contains("expected"), "lists the fields it knows: {err}");
    }
    for (text, unknown) in [
        ("capacty = 10", "capacty"),
        ("[breaker]\nconsecutive_failure = 5", "consecutive_failure"),
        (
            "[hosts.\"a:80\"]\nopen_durations = \"1s\"",
            "open_durations",
        ),
        ("max_open = { percent = 10 }", "percent"),
    ] {
        let err = toml::from_str::<RegistryConfig>(text)
            .unwrap_err()
            .to_string();
        assert!(err.contains(unknown), "{err}");
        assert!(err.contains("unknown"), "{err}");
    }
    // Values of the wrong shape say what was expected.
    let err = toml::from_str::<BreakerConfig>("backoff = \"none\"")
        .unwrap_err()
        .to_string();
    assert!(err.contains(r#""off" or a table"#), "{err}");
    let err = toml::from_str::<BreakerConfig>("preset = \"hystrix\"")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("envoy") && err.contains("resilience4j"),
        "{err}"
    );
    let err = toml::from_str::<BreakerConfig>("consecutive_failures = -1")
        .unwrap_err()
        .to_string();
    assert!(err.contains("consecutive_failures"), "{err}");
    let err = toml::from_str::<BreakerConfig>("backoff = { multiplier = 2 }")
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing field `cap`"), "{err}");
    let err = toml::from_str::<BreakerConfig>("ramp = \"on\"")
        .unwrap_err()
        .to_string();
    assert!(err.contains(r#""off" or a table { window"#), "{err}");
    let err = toml::from_str::<BreakerConfig>("ramp = { min_fraction = 0.2 }")
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing field `window`"), "{err}");
    let err = toml::from_str::<BreakerConfig>("half_open_rate_rule = \"yes\"")
        .unwrap_err()
        .to_string();
    assert!(err.contains("half_open_rate_rule"), "{err}");
}

fn registry_config(text: &str) -> RegistryConfig {
    toml::from_str(text).unwrap_or_else(|e| panic!("{text}\n{e}"))
}

#[test]
fn a_registry_and_its_hosts_survive_a_round_trip_through_toml() {
    let mut config = RegistryConfig::default();
    config.capacity = Some(100_000);
    config.idle_ttl = Some("5m".into());
    config.forget_after = Some("1d".into());
    config.max_key_bytes = Some(6_400_000);
    config.max_open = Some(MaxOpen::Count(1));
    config.shards = Some(64);
    config.breaker = BreakerConfig::from(
        Breaker::builder()
            .failure_rate(0.5)
            .count_window(20)
            .min_calls(5)
            .open_duration(Duration::from_secs(10)),
    );
    let mut pay = BreakerConfig::from(Breaker::builder().consecutive_failures(2));
    pay.backoff = Some(BackoffConfig::Off);
    pay.time_window = Some(TimeWindowConfig::new("30s", 6));
    config.hosts = BTreeMap::from([
        ("pay.internal:443".to_string(), pay),
        ("Search:80".to_string(), BreakerConfig::default()),
    ]);
    let text = toml::to_string(&config).unwrap();
    let read = registry_config(&text);
    assert_eq!(read, config, "{text}");
    assert!(
        text.contains("max_open = { count = 1 }") || text.contains("[max_open]"),
        "{text}"
    );

    // The same builder as one written by hand.
    let by_hand = Registry::<String>::builder(
        Breaker::builder()
            .failure_rate(0.5)
            .count_window(20)
            .min_calls(5)
            .open_duration(Duration::from_secs(10)),
    )
    .capacity(100_000)
    .idle_ttl(Duration::from_secs(300))
    .forget_after(Duration::from_secs(86_400))
    .max_key_bytes(6_400_000)
    .max_open(MaxOpen::Count(1))
    .shards(64);
    let from_file = read.to_builder::<String>().unwrap();
    assert_eq!(
        format!("{from_file:?}"),
        format!("{by_hand:?}").replace("overrides: 0", "overrides: 2")
    );

    let registry = from_file.build_with_clock(ManualClock::new()).unwrap();
    assert_eq!(registry.capacity(), Some(100_000));
    assert_eq!(registry.idle_ttl(), Duration::from_secs(300));
    assert_eq!(registry.forget_after(), Duration::from_secs(86_400));
    assert_eq!(registry.max_key_bytes(), Some(6_400_000));
    assert_eq!(registry.shard_count(), 64);
    // A host's table is laid over the template, the window as one field.
    let pay = registry.handle("pay.internal:443");
    let c = pay.config();
    assert_eq!(c.consecutive_failures(), Some(2));
    assert_eq!(c.failure_rate(), Some(0.5));
    assert_eq!(
        c.window(),
        WindowKind::Time {
            length: Duration::from_secs(30),
            buckets: 6
        }
    );
    assert_eq!(c.min_calls(), 5);
    assert_eq!(c.open_duration(3), Duration::from_secs(10));
    // An empty host table is the template, under its own key.
    let search = registry.handle("Search:80");
    assert_eq!(
        getters(search.config()),
        getters(registry.handle("other:80").config())
    );
    // max_open = { count = 1 }: a second trip of a real upstream (seen
    // succeeding) is refused.
    for host in ["a:80", "b:80"] {
        let h = registry.handle(host);
        h.try_acquire_at(Nanos::ZERO)
            .unwrap()
            .success_at(Nanos::ZERO);
        // min_calls (5) is reached at the 4th failure: one trip each.
        for _ in 0..4 {
            if let Ok(p) = h.try_acquire_at(Nanos::ZERO) {
                p.failure_at(Nanos::ZERO);
            }
        }
    }
    assert_eq!((registry.open_count(), registry.refused_trips()), (1, 1));
}

#[test]
fn max_open_reads_each_form() {
    for (text, want) in [
        ("max_open = \"unlimited\"", MaxOpen::Unlimited),
        ("max_open = { count = 3 }", MaxOpen::Count(3)),
        ("max_open = { fraction = 0.25 }", MaxOpen::Fraction(0.25)),
    ] {
        let config = registry_config(text);
        assert_eq!(config.max_open, Some(want));
        assert_eq!(registry_config(&toml::to_string(&config).unwrap()), config);
    }
    assert!(toml::from_str::<RegistryConfig>("max_open = 0.2").is_err());
}

#[test]
fn a_bad_registry_value_is_the_registry_builders_error() {
    let template = || Breaker::builder().consecutive_failures(3);
    for (text, builder) in [
        (
            "capacity = 0",
            Registry::<String>::builder(template()).capacity(0),
        ),
        (
            "max_key_bytes = 0",
            Registry::builder(template()).max_key_bytes(0),
        ),
        (
            "idle_ttl = \"0s\"",
            Registry::builder(template()).idle_ttl(Duration::ZERO),
        ),
        (
            "forget_after = \"366d\"",
            Registry::builder(template()).forget_after(Duration::from_secs(366 * 86_400)),
        ),
        (
            "max_open = { count = 0 }",
            Registry::builder(template()).max_open(MaxOpen::Count(0)),
        ),
        (
            "max_open = { fraction = 1.5 }",
            Registry::builder(template()).max_open(MaxOpen::Fraction(1.5)),
        ),
        ("shards = 3", Registry::builder(template()).shards(3)),
        // The registry's limits are checked before the template, as `build` does.
        (
            "shards = 3\n[breaker]\nfailure_rate = 7",
            Registry::builder(Breaker::builder().failure_rate(7.0)).shards(3),
        ),
    ] {
        let want = builder.build().expect_err(text);
        let config = if text.contains("[breaker]") {
            registry_config(text)
        } else {
            registry_config(&format!("{text}\n[breaker]\nconsecutive_failures = 3"))
        };
        let got = config.to_builder::<String>().expect_err(text);
        assert_eq!(got, want, "{text}");
        assert_eq!(got.to_string(), want.to_string());
    }
    let err = registry_config("idle_ttl = \"forever\"\n[breaker]\nconsecutive_failures = 3")
        .to_builder::<String>()
        .unwrap_err();
    assert_eq!(err.field(), "idle_ttl");
}

#[test]
fn a_bad_host_value_names_the_host_and_matches_override_key() {
    for (text, builder) in bad_breaker_values() {
        if text.is_empty() {
            continue; // no trip condition: the template has one
        }
        // The template is valid, and every bad builder above starts from
        // it; the host's table breaks one value.
        let config = registry_config(&format!(
            "[breaker]\nconsecutive_failures = 5\n[hosts.\"api.example:443\"]\n{text}"
        ));
        let got = config
            .to_builder::<String>()
            .expect_err("refused at to_builder");
        let want = builder.build_config().unwrap_err();
        assert_eq!(got.key(), Some("\"api.example:443\""), "{got}");
        assert_eq!(
            (got.field(), got.allowed(), got.found()),
            (want.field(), want.allowed(), want.found())
        );
        assert_eq!(
            got.to_string(),
            want.to_string().replace(
                "invalid failfast config:",
                "invalid failfast config for key \"api.example:443\":"
            )
        );
    }
    // The same error as `override_key` with the same builder gives.
    let config = registry_config(
        "[breaker]\nconsecutive_failures = 5\n[hosts.\"api.example:443\"]\nfailure_rate = 1.5",
    );
    let got = config.to_builder::<String>().unwrap_err();
    let want = Registry::<String>::builder(Breaker::builder().consecutive_failures(5))
        .override_key(
            "api.example:443".into(),
            Breaker::builder().consecutive_failures(5).failure_rate(1.5),
        )
        .build()
        .unwrap_err();
    assert_eq!(got, want);
    assert_eq!(
        got.to_string(),
        r#"invalid failfast config for key "api.example:443": failure_rate = 1.5; allowed: (0, 1]"#
    );
    // A duration that does not parse, in a host's table.
    let err = registry_config(
        "[breaker]\nconsecutive_failures = 5\n[hosts.\"b:80\"]\nprobe_lease = \"soon\"",
    )
    .to_builder::<String>()
    .unwrap_err();
    assert_eq!((err.field(), err.key()), ("probe_lease", Some("\"b:80\"")));
    // The template's own error names no host.
    let err =
        registry_config("[breaker]\nfailure_rate = 1.5\n[hosts.\"b:80\"]\nfailure_rate = 0.5")
            .to_builder::<String>()
            .unwrap_err();
    assert_eq!((err.field(), err.key()), ("failure_rate", None));
}

#[test]
fn a_host_preset_replaces_the_templates() {
    let registry = registry_config(
        r#"
        [breaker]
        preset = "envoy"
        open_duration = "5s"
        [hosts."legacy:8080"]
        preset = "resilience4j"
        "#,
    )
    .to_builder::<String>()
    .unwrap()
    .build()
    .unwrap();
    let legacy = registry.handle("legacy:8080");
    assert_eq!(legacy.config().failure_rate(), Some(0.5));
    assert_eq!(legacy.config().consecutive_failures(), None);
    // The template's explicit fields still lie over the host's preset.
    assert_eq!(legacy.config().open_duration(1), Duration::from_secs(5));
    assert_eq!(
        registry.handle("x:1").config().consecutive_failures(),
        Some(5)
    );
}

/// A key type that refuses some text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Port(u16);

impl TryFrom<&str> for Port {
    type Error = std::num::ParseIntError;
    fn try_from(text: &str) -> Result<Self, Self::Error> {
        text.parse().map(Port)
    }
}

impl KeyBytes for Port {
    fn key_bytes(&self) -> usize {
        2
    }
}

#[test]
fn a_host_key_the_key_type_refuses_is_named() {
    let config = registry_config(
        "[breaker]\nconsecutive_failures = 5\n[hosts.\"443\"]\n[hosts.\"http\"]\nconsecutive_failures = 1",
    );
    let err = config.to_builder::<Port>().unwrap_err();
    assert_eq!((err.field(), err.key()), ("hosts", Some("\"http\"")));
    assert_eq!(
        err.to_string(),
        "invalid failfast config for key \"http\": hosts = invalid digit found in string; \
         allowed: a key the registry's key type accepts"
    );
    let registry = registry_config(
        "[breaker]\nconsecutive_failures = 5\n[hosts.\"443\"]\nconsecutive_failures = 1",
    )
    .to_builder::<Port>()
    .unwrap()
    .build()
    .unwrap();
    assert_eq!(
        registry.handle(&Port(443)).config().consecutive_failures(),
        Some(1)
    );
}

#[test]
fn config_errors_compare_whole() {
    // The tests above compare errors with `==`: it sees every part.
    let a: ConfigError = Breaker::builder()
        .failure_rate(1.5)
        .build_config()
        .unwrap_err();
    let b = Breaker::builder()
        .failure_rate(1.25)
        .build_config()
        .unwrap_err();
    assert_ne!(a, b);
}

// ---------------------------------------------------------------------------
// `[hosts."…"]` keys for a registry of `HostKey`s: normalised as the keyed
// layer normalises requests, refused when they cannot name one upstream.

/// A template of 5 failures in a row, and `[hosts.KEY]` of 1.
fn one_host(key: &str) -> RegistryConfig {
    registry_config(&format!(
        "[breaker]\nconsecutive_failures = 5\n[hosts.{key:?}]\nconsecutive_failures = 1"
    ))
}

/// The threshold `registry` gives `key`'s breaker (looked up as written).
fn threshold<K>(registry: &Registry<K>, key: &str) -> Option<u32>
where
    K: std::hash::Hash + Eq + std::borrow::Borrow<str> + for<'q> From<&'q str>,
{
    registry.handle_from(key).config().consecutive_failures()
}

#[test]
fn host_keys_are_normalised_as_the_keyed_layer_normalises_requests() {
    for written in [
        "api.example:443",
        "API.Example:443",
        "api.example.:443",
        "API.EXAMPLE.:0443",
    ] {
        let registry = one_host(written)
            .to_builder::<HostKey>()
            .unwrap_or_else(|e| panic!("{written}: {e}"))
            .build()
            .unwrap();
        assert_eq!(
            threshold(&registry, "api.example:443"),
            Some(1),
            "{written}"
        );
        assert_eq!(
            threshold(&registry, "other.example:443"),
            Some(5),
            "{written}"
        );
    }
    // An IP address: IPv6 in its RFC 5952 form, IPv4 as written.
    let registry = one_host("[2001:DB8:0::1]:8443")
        .to_builder::<HostKey>()
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(threshold(&registry, "[2001:db8::1]:8443"), Some(1));
    let registry = one_host("10.0.0.7:5432")
        .to_builder::<HostKey>()
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(threshold(&registry, "10.0.0.7:5432"), Some(1));
}

/// A manual clock that says it moves in 4 ms steps: a registry built on it
/// refuses an override's 1 ms threshold, naming the key `override_key` got.
#[derive(Clone, Default)]
struct Steps4ms(ManualClock);

impl failfast::Clock for Steps4ms {
    fn now(&self) -> Nanos {
        self.0.now()
    }

    fn resolution(&self) -> Duration {
        Duration::from_millis(4)
    }
}

#[test]
fn override_key_receives_the_normal_form() {
    let config = registry_config(
        "[breaker]\nconsecutive_failures = 5\n[hosts.\"API.Example.:0443\"]\n\
         slow_call_rate = 0.5\nslow_call_threshold = \"1ms\"",
    );
    // `to_builder` checks the table with the default clock: it passes. The
    // registry's own check names the key that `override_key` received.
    let err = config
        .to_builder::<HostKey>()
        .unwrap()
        .build_with_clock(Steps4ms::default())
        .unwrap_err();
    assert_eq!(
        (err.field(), err.key()),
        ("slow_call_threshold", Some("\"api.example:443\""))
    );
    // Built on an ordinary clock, the override is the normal form's, which
    // its handle shows; the text as written is just another key.
    let registry = config.to_builder::<HostKey>().unwrap().build().unwrap();
    let api = registry.handle_from("api.example:443");
    assert_eq!(api.config().slow_call_rate(), Some(0.5));
    assert_eq!(api.key().unwrap(), "api.example:443");
    assert_eq!(
        registry
            .handle_from("API.Example.:0443")
            .config()
            .slow_call_rate(),
        None
    );
}

#[test]
fn a_host_key_without_a_port_is_refused_with_a_suggestion() {
    for (written, https, http) in [
        ("api.example", "api.example:443", "api.example:80"),
        ("API.Example.", "api.example:443", "api.example:80"),
        ("api.example:", "api.example:443", "api.example:80"),
        ("[::1]", "[::1]:443", "[::1]:80"),
    ] {
        let err = one_host(written).to_builder::<HostKey>().unwrap_err();
        assert_eq!(
            (err.field(), err.key()),
            ("hosts", Some(&*format!("{written:?}")))
        );
        assert_eq!(
            err.found(),
            format!("{written:?} (no port: write {https:?} for https, {http:?} for http)")
        );
        assert!(err.allowed().starts_with("host:port"), "{err}");
    }
}

#[test]
fn a_host_key_that_is_not_a_host_is_refused_naming_it() {
    for (written, why) in [
        ("api example:443", "not a host name or an IP address"),
        ("api.example/v1:443", "not a host name or an IP address"),
        ("a..b:443", "not a host name or an IP address"),
        ("::1:443", "not a host name or an IP address"),
        ("127.1:80", "not a host name or an IP address"),
        (
            "https://api.example:443",
            "not a host name or an IP address",
        ),
        (
            "user@api.example:443",
            "not a host name or an IP address: a key has no user@ part",
        ),
        ("api.example:0", "the port is not a number in 1..=65535"),
        ("api.example:65536", "the port is not a number in 1..=65535"),
        ("api.example:https", "the port is not a number in 1..=65535"),
        ("", "empty"),
    ] {
        let err = one_host(written).to_builder::<HostKey>().unwrap_err();
        assert_eq!(err.key(), Some(&*format!("{written:?}")), "{err}");
        assert_eq!(err.found(), format!("{written:?} ({why})"));
        assert_eq!(
            err.to_string(),
            format!(
                "invalid failfast config for key {written:?}: hosts = {written:?} ({why}); \
                 allowed: host:port — a host name or an IP address and a port in 1..=65535, \
                 the port written out (a config has no scheme to imply one)"
            )
        );
    }
    let long = format!("{}:443", vec!["a".repeat(63); 5].join("."));
    let err = one_host(&long).to_builder::<HostKey>().unwrap_err();
    assert_eq!(err.key(), Some(&*format!("{long:?}")));
}

#[test]
fn two_spellings_of_one_host_are_refused_naming_both() {
    let config = registry_config(
        r#"
        [breaker]
        consecutive_failures = 5
        [hosts."api.example:443"]
        consecutive_failures = 1
        [hosts."API.Example.:443"]
        consecutive_failures = 9
        "#,
    );
    let err = config.to_builder::<HostKey>().unwrap_err();
    assert_eq!(
        (err.field(), err.key()),
        ("hosts", Some("\"api.example:443\""))
    );
    assert_eq!(
        err.to_string(),
        "invalid failfast config for key \"api.example:443\": hosts = \"API.Example.:443\" and \
         \"api.example:443\" name one key, \"api.example:443\"; allowed: one [hosts.\"…\"] table per key"
    );
    // Other key types: two texts that make one key are refused the same way.
    let config =
        registry_config("[breaker]\nconsecutive_failures = 5\n[hosts.\"443\"]\n[hosts.\"0443\"]");
    let err = config.to_builder::<Port>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid failfast config for key Port(443): hosts = \"0443\" and \"443\" name one key, \
         Port(443); allowed: one [hosts.\"…\"] table per key"
    );
}

#[test]
fn other_key_types_take_the_text_as_written() {
    // `String`: no normal form, no port required; the text is the key.
    let registry = one_host("API.Example")
        .to_builder::<String>()
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(threshold(&registry, "API.Example"), Some(1));
    assert_eq!(threshold(&registry, "api.example:443"), Some(5));
    // A number: its own parse.
    let registry = one_host("0443")
        .to_builder::<Port>()
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(
        registry.handle(&Port(443)).config().consecutive_failures(),
        Some(1)
    );
    // `Box<str>`: as written too.
    let registry = one_host("API.Example")
        .to_builder::<Box<str>>()
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(threshold(&registry, "API.Example"), Some(1));
}

#[test]
fn recovery_settings_survive_a_round_trip_through_toml() {
    let secs = Duration::from_secs;
    let base = || Breaker::builder().failure_rate(0.5).count_window(20);
    // The ramp: Envoy's curve, and each end of each range.
    let (config, text) = round_trip(&base().ramp(secs(30)));
    assert_eq!(config.ramp, Some(RampConfig::window("30s")));
    assert!(
        text.contains("ramp = { window = \"30s\" }") || text.contains("[ramp]"),
        "{text}"
    );
    let (config, _) = round_trip(&base().ramp_curve(Duration::from_millis(1), 0.0, 100.0));
    assert_eq!(
        config.ramp,
        Some(RampConfig::Curve {
            window: "1ms".into(),
            min_fraction: Some(0.0),
            aggression: Some(100.0)
        })
    );
    round_trip(&base().ramp_curve(MAX_DURATION, 1.0, f64::MIN_POSITIVE));
    round_trip(&base().ramp_curve(secs(90), 0.1, 1.0 / 3.0));
    // The rate rule: on with the closed state's rates, with its own, at P = 31.
    let (config, text) = round_trip(&base().half_open_probes(31).half_open_rate_rule());
    assert_eq!(
        (
            config.half_open_rate_rule,
            config.half_open_failure_rate,
            config.half_open_slow_call_rate
        ),
        (Some(true), None, None)
    );
    assert!(text.contains("half_open_rate_rule = true\n"), "{text}");
    let (config, _) = round_trip(
        &base()
            .slow_call_rate(0.8)
            .slow_call_threshold(secs(2))
            .half_open_failure_rate(0.25)
            .half_open_slow_call_rate(0.125),
    );
    assert_eq!(
        (
            config.half_open_rate_rule,
            config.half_open_failure_rate,
            config.half_open_slow_call_rate
        ),
        (Some(true), Some(0.25), Some(0.125))
    );
    // The rule with only consecutive failures falls back on 50 %.
    round_trip(
        &Breaker::builder()
            .consecutive_failures(3)
            .half_open_probes(10)
            .half_open_rate_rule(),
    );
    // Hints: a tripping verdict's (the default, left out), off, remembered,
    // and each end of the cap's range.
    let (config, text) = round_trip(&base());
    assert_eq!(config.max_hint, None);
    assert!(!text.contains("max_hint"), "{text}");
    let (config, _) = round_trip(&base().hints_off());
    assert_eq!(config.max_hint.as_deref(), Some("off"));
    let (config, _) = round_trip(&base().hints());
    assert_eq!(config.max_hint.as_deref(), Some("10m"));
    let (config, _) = round_trip(&base().max_hint(secs(39 * 3600)));
    assert_eq!(config.max_hint.as_deref(), Some("39h"));
    round_trip(&base().max_hint(Duration::from_nanos(1)));
    // All of them at once.
    round_trip(
        &base()
            .ramp_curve(secs(60), 0.05, 2.0)
            .half_open_probes(20)
            .half_open_failure_rate(0.2)
            .max_hint(secs(120)),
    );
}

#[test]
fn each_recovery_field_of_a_file_reaches_the_built_config() {
    let secs = Duration::from_secs;
    let built = |text: &str| {
        let config: BreakerConfig = toml::from_str(&format!(
            "failure_rate = 0.5\nslow_call_rate = 0.9\nslow_call_threshold = \"1s\"\n{text}"
        ))
        .unwrap_or_else(|e| panic!("{text}: {e}"));
        config
            .to_builder()
            .and_then(|b| b.build_config())
            .unwrap_or_else(|e| panic!("{text}: {e}"))
    };
    // Left out: no ramp, no rule, a tripping verdict's hint up to 10 min.
    let c = built("");
    assert_eq!(
        (c.ramp(), c.half_open_rates(), c.max_hint()),
        (None, None, Some(secs(600)))
    );
    assert!(!c.remembers_hints());

    assert_eq!(
        built("ramp = { window = \"45s\" }").ramp(),
        Some((secs(45), 0.1, 1.0))
    );
    assert_eq!(
        built("ramp = { window = \"2m\", min_fraction = 0.25, aggression = 3.0 }").ramp(),
        Some((secs(120), 0.25, 3.0))
    );
    assert_eq!(built("ramp = \"off\"").ramp(), None);
    // The rule's thresholds default to the closed state's.
    assert_eq!(
        built("half_open_rate_rule = true").half_open_rates(),
        Some((0.5, Some(0.9)))
    );
    assert_eq!(built("half_open_rate_rule = false").half_open_rates(), None);
    assert_eq!(
        built("half_open_failure_rate = 0.2").half_open_rates(),
        Some((0.2, Some(0.9)))
    );
    assert_eq!(
        built("half_open_slow_call_rate = 0.3").half_open_rates(),
        Some((0.5, Some(0.3)))
    );
    assert_eq!(
        built("half_open_rate_rule = true\nhalf_open_failure_rate = 0.1\nhalf_open_slow_call_rate = 0.4")
            .half_open_rates(),
        Some((0.1, Some(0.4)))
    );
    assert_eq!(built("max_hint = \"90s\"").max_hint(), Some(secs(90)));
    assert!(built("max_hint = \"90s\"").remembers_hints());
    assert_eq!(built("max_hint = \"off\"").max_hint(), None);

    // The same settings by the builder, knob for knob.
    let from_file: BreakerConfig = toml::from_str(
        r#"
        consecutive_failures = 5
        half_open_probes = 10
        ramp = { window = "30s", aggression = 2.0 }
        half_open_failure_rate = 0.3
        max_hint = "1h"
        "#,
    )
    .unwrap();
    let by_hand = Breaker::builder()
        .consecutive_failures(5)
        .half_open_probes(10)
        .ramp_curve(secs(30), 0.1, 2.0)
        .half_open_failure_rate(0.3)
        .max_hint(secs(3600));
    assert_eq!(
        format!("{:?}", from_file.to_builder().unwrap()),
        format!("{by_hand:?}")
    );
}

#[test]
fn a_bad_recovery_value_names_its_field() {
    let refused = |text: &str| {
        let config: BreakerConfig = toml::from_str(&format!("consecutive_failures = 5\n{text}"))
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        config.to_builder().expect_err(text)
    };
    for (text, field, allowed) in [
        ("ramp = { window = \"0s\" }", "ramp.window", "1 ms..=1 day"),
        ("ramp = { window = \"2d\" }", "ramp.window", "1 ms..=1 day"),
        (
            "ramp = { window = \"1m\", min_fraction = 2 }",
            "ramp.min_fraction",
            "[0, 1]",
        ),
        (
            "ramp = { window = \"1m\", aggression = -1 }",
            "ramp.aggression",
            "(0, 100]",
        ),
        (
            "half_open_probes = 32\nhalf_open_rate_rule = true",
            "half_open_probes",
            "1..=31 under the half-open rate rule",
        ),
        (
            "half_open_failure_rate = 1.01",
            "half_open_failure_rate",
            "(0, 1]",
        ),
        (
            "half_open_slow_call_rate = 0",
            "half_open_slow_call_rate",
            "(0, 1]",
        ),
        ("max_hint = \"0ms\"", "max_hint", "> 0 and ≤ 39 h"),
        ("max_hint = \"40h\"", "max_hint", "> 0 and ≤ 39 h"),
    ] {
        let err = refused(text);
        assert_eq!(
            (err.field(), err.allowed()),
            (field, allowed),
            "{text}: {err}"
        );
        assert!(err.to_string().contains(field), "{err}");
    }
    // Without the rule a round may have up to 255 probes.
    let config: BreakerConfig =
        toml::from_str("consecutive_failures = 5\nhalf_open_probes = 32").unwrap();
    assert_eq!(
        config
            .to_builder()
            .unwrap()
            .build_config()
            .unwrap()
            .half_open_probes(),
        32
    );

    // `max_hint` text that is neither "off" nor a duration says both forms.
    for text in ["ten minutes", "", "on", "10"] {
        let err = refused(&format!("max_hint = {text:?}"));
        assert_eq!(err.field(), "max_hint");
        assert_eq!(err.found(), format!("{text:?}"));
        assert!(err.allowed().starts_with("\"off\", or a duration"), "{err}");
    }
    // A rate beside `half_open_rate_rule = false` is a contradiction.
    for text in [
        "half_open_rate_rule = false\nhalf_open_failure_rate = 0.5",
        "half_open_rate_rule = false\nhalf_open_slow_call_rate = 0.5\nslow_call_threshold = \"1s\"",
    ] {
        let err = refused(text);
        assert_eq!(err.field(), "half_open_rate_rule", "{err}");
        assert_eq!(
            err.to_string(),
            "invalid failfast config: half_open_rate_rule = false; allowed: true, or left out, \
             beside half_open_failure_rate or half_open_slow_call_rate"
        );
    }
    // A host's bad recovery value names the host.
    let err = registry_config(
        "[breaker]\nconsecutive_failures = 5\n[hosts.\"api.example:443\"]\nramp = { window = \"0s\" }",
    )
    .to_builder::<HostKey>()
    .unwrap_err();
    assert_eq!(
        (err.field(), err.key()),
        ("ramp.window", Some("\"api.example:443\""))
    );
    // The template's rule with 32 probes on one host: the host's error.
    let err = registry_config(
        "[breaker]\nconsecutive_failures = 5\nhalf_open_rate_rule = true\n\
         [hosts.\"api.example:443\"]\nhalf_open_probes = 32",
    )
    .to_builder::<HostKey>()
    .unwrap_err();
    assert_eq!(
        (err.field(), err.key()),
        ("half_open_probes", Some("\"api.example:443\""))
    );
    assert!(err.allowed().contains("1..=31"), "{err}");
}

#[test]
fn a_hosts_recovery_settings_apply_to_that_host_only() {
    let secs = Duration::from_secs;
    let registry = registry_config(
        r#"
        [breaker]
        failure_rate = 0.5
        count_window = 20
        half_open_probes = 10
        half_open_failure_rate = 0.3
        max_hint = "2m"

        [hosts."ramped.internal:443"]
        ramp = { window = "1m", min_fraction = 0.2 }

        [hosts."strict.internal:443"]
        half_open_rate_rule = false
        max_hint = "off"

        [hosts."own-rate.internal:443"]
        half_open_slow_call_rate = 0.4
        slow_call_threshold = "1s"
        "#,
    )
    .to_builder::<HostKey>()
    .unwrap()
    .build_with_clock(ManualClock::new())
    .unwrap();
    let config_of = |host: &str| registry.handle_from(host).config().clone();

    let ramped = config_of("ramped.internal:443");
    assert_eq!(ramped.ramp(), Some((secs(60), 0.2, 1.0)));
    assert_eq!(ramped.half_open_rates(), Some((0.3, None))); // the template's
    assert_eq!(ramped.max_hint(), Some(secs(120))); // the template's

    let strict = config_of("strict.internal:443");
    assert_eq!(strict.ramp(), None);
    assert_eq!(strict.half_open_rates(), None, "the rule off, its rate too");
    assert_eq!(strict.max_hint(), None);
    assert_eq!(strict.half_open_probes(), 10); // the template's

    let own_rate = config_of("own-rate.internal:443");
    assert_eq!(own_rate.half_open_rates(), Some((0.3, Some(0.4))));

    // Every other host: the template's.
    let other = config_of("other.internal:443");
    assert_eq!(
        (other.ramp(), other.half_open_rates(), other.max_hint()),
        (None, Some((0.3, None)), Some(secs(120)))
    );

    // And the ramp works for that host alone: after a trip and a recovery
    // at the same instants, the ramped host turns calls away, the other not.
    let t0 = Nanos::ZERO;
    let closed = Nanos::from_secs(31);
    for host in ["ramped.internal:443", "other.internal:443"] {
        let h = registry.handle_from(host);
        for _ in 0..20 {
            if let Ok(p) = h.try_acquire_at(t0) {
                p.failure_at(t0);
            }
        }
        let probes: Vec<_> = (0..10).map(|_| h.try_acquire_at(closed).unwrap()).collect();
        for p in probes {
            p.success_at(closed);
        }
        assert_eq!(h.state(), failfast::State::Closed, "{host}");
    }
    let turned_away = |host: &str| {
        let h = registry.handle_from(host);
        (0..100)
            .filter(|_| {
                h.try_acquire_at(closed)
                    .map(|p| p.ignore_at(closed))
                    .is_err()
            })
            .count()
    };
    assert!(turned_away("ramped.internal:443") >= 70);
    assert_eq!(turned_away("other.internal:443"), 0);
    assert!(registry
        .handle_from("ramped.internal:443")
        .snapshot_at(closed)
        .ramp_fraction
        .is_some());
}

#[test]
fn a_template_rule_turned_off_comes_back_with_a_hosts_rate() {
    let registry = registry_config(
        r#"
        [breaker]
        consecutive_failures = 5
        half_open_rate_rule = false
        [hosts."a:443"]
        half_open_failure_rate = 0.2
        "#,
    )
    .to_builder::<HostKey>()
    .unwrap()
    .build()
    .unwrap();
    assert_eq!(
        registry.handle_from("a:443").config().half_open_rates(),
        Some((0.2, None))
    );
    assert_eq!(
        registry.handle_from("b:443").config().half_open_rates(),
        None
    );
}

#[test]
fn a_ramp_off_and_a_ramp_table_write_back_as_read() {
    let config: RegistryConfig = toml::from_str(
        r#"
        [breaker]
        consecutive_failures = 5
        ramp = { window = "30s", min_fraction = 0.0 }
        max_hint = "off"
        [hosts."a:443"]
        ramp = "off"
        "#,
    )
    .unwrap();
    let text = toml::to_string(&config).unwrap();
    assert_eq!(registry_config(&text), config, "{text}");
    assert_eq!(
        config.breaker.ramp,
        Some(RampConfig::Curve {
            window: "30s".into(),
            min_fraction: Some(0.0),
            aggression: None
        })
    );
    assert_eq!(config.hosts["a:443"].ramp, Some(RampConfig::Off));
}

// ===== Outlier detection (issue 28): `[outliers]` and `outlier_pool` =====

/// Every field of `Outliers` moved off its default, at the edges of its range.
fn every_outliers_field() -> Outliers {
    Outliers::new()
        .interval(Duration::from_millis(1500))
        .success_rate_request_volume(258_048)
        .success_rate_minimum_hosts(1)
        .stdev_factor(0.1 + 0.2)
        .enforcing_success_rate(0)
        .failure_percentage_threshold(100)
        .failure_percentage_request_volume(1)
        .failure_percentage_minimum_hosts(u32::MAX)
        .enforcing_failure_percentage(100)
        .slow_outliers(1000.0, 0.999)
        .enforcing_slow(0)
        .max_ejection_percent(100)
        .panic_threshold(0)
        .significance(1e-12)
        .ejection_time(Duration::from_millis(1), Duration::from_millis(254))
}

#[test]
fn outliers_survive_a_round_trip_through_toml() {
    for outliers in [
        every_outliers_field(),
        every_outliers_field().significance_off(),
        every_outliers_field().ejection_time_of_breaker(),
        Outliers::new(),
        Outliers::envoy(),
        Outliers::envoy().significance(0.01),
        Outliers::envoy().ejection_time(Duration::from_secs(10), Duration::from_secs(10)),
        Outliers::new().slow_outliers(1.0, 0.0),
        Outliers::new().interval(Duration::from_secs(86_400)),
    ] {
        let config = OutliersConfig::from(&outliers);
        let text = toml::to_string(&config).unwrap();
        let read: OutliersConfig = toml::from_str(&text).unwrap_or_else(|e| panic!("{text}\n{e}"));
        assert_eq!(read, config, "{text}");
        assert_eq!(read.to_outliers().unwrap(), outliers, "{text}");
    }
    // Defaults stay unset; the rest is written as set.
    assert_eq!(
        OutliersConfig::from(&Outliers::new()),
        OutliersConfig::default()
    );
    let config = OutliersConfig::from(&every_outliers_field());
    assert_eq!(config.interval.as_deref(), Some("1500ms"));
    assert_eq!(
        config.slow_outliers,
        Some(SlowOutliersConfig::On {
            factor: 1000.0,
            floor: 0.999
        })
    );
    let text = toml::to_string(&OutliersConfig::from(
        &Outliers::new().stdev_factor(1.5).slow_outliers(3.0, 0.1),
    ))
    .unwrap();
    let table: toml::Table = toml::from_str(&text).unwrap();
    assert_eq!(
        table.keys().collect::<Vec<_>>(),
        ["slow_outliers", "stdev_factor"],
        "{text}"
    );
    // Envoy's preset is written as the preset and what moved off it.
    let text =
        toml::to_string(&OutliersConfig::from(&Outliers::envoy().stdev_factor(1.5))).unwrap();
    assert_eq!(text, "preset = \"envoy\"\nstdev_factor = 1.5\n");
    // "off" reads as written, and is the default rule.
    let off: OutliersConfig = toml::from_str("slow_outliers = \"off\"").unwrap();
    assert_eq!(off.slow_outliers, Some(SlowOutliersConfig::Off));
    assert_eq!(toml::to_string(&off).unwrap(), "slow_outliers = \"off\"\n");
    assert_eq!(off.to_outliers().unwrap(), Outliers::new());
}

#[test]
fn an_outlier_pool_survives_a_round_trip_through_toml() {
    let (config, text) = round_trip(
        &Breaker::builder()
            .consecutive_failures(5)
            .outlier_pool("payments"),
    );
    assert_eq!(config.outlier_pool.as_deref(), Some("payments"));
    assert_eq!(
        text,
        "consecutive_failures = 5\noutlier_pool = \"payments\"\n"
    );
    let (config, _) = round_trip(&Breaker::builder().consecutive_failures(5));
    assert_eq!(config.outlier_pool, None);
}

#[test]
fn a_registry_with_outliers_and_pools_survives_a_round_trip_through_toml() {
    let mut config = RegistryConfig::default();
    config.outliers = Some(OutliersConfig::from(&every_outliers_field()));
    config.breaker = BreakerConfig::from(
        Breaker::builder()
            .consecutive_failures(5)
            .slow_call_threshold(Duration::from_millis(200)),
    );
    let mut pay = BreakerConfig::from(Breaker::builder().consecutive_failures(2));
    pay.outlier_pool = Some("payments".into());
    config.hosts = BTreeMap::from([
        ("pay-1:443".to_string(), pay.clone()),
        ("pay-2:443".to_string(), pay),
        ("search:80".to_string(), BreakerConfig::default()),
    ]);
    let text = toml::to_string(&config).unwrap();
    assert!(text.contains("[outliers]\n"), "{text}");
    let read = registry_config(&text);
    assert_eq!(read, config, "{text}");

    let registry = read
        .to_builder::<String>()
        .unwrap()
        .build_with_clock(ManualClock::new())
        .unwrap();
    for host in ["pay-1:443", "pay-2:443", "search:80", "other:80"] {
        registry.handle(host);
    }
    let pools = registry.outlier_pools();
    let members: Vec<(String, u64)> = pools
        .iter()
        .map(|p| (p.name.to_string(), p.members))
        .collect();
    // search:80 (its own empty table) and other:80 in the default pool,
    // the two payments hosts in theirs.
    assert_eq!(
        members,
        [("default".to_owned(), 2), ("payments".to_owned(), 2)]
    );
    let pay = registry.handle("pay-1:443");
    assert_eq!(pay.config().outlier_pool(), Some("payments"));
    assert_eq!(pay.config().consecutive_failures(), Some(2));
    assert_eq!(registry.handle("search:80").config().outlier_pool(), None);

    // An empty `[outliers]` is Envoy's defaults, on.
    let on = registry_config("[outliers]\n[breaker]\nconsecutive_failures = 5");
    assert_eq!(on.outliers, Some(OutliersConfig::default()));
    let registry = on.to_builder::<String>().unwrap().build().unwrap();
    registry.handle("a:80");
    assert_eq!(registry.outlier_pools()[0].members, 1);
    // No table: off.
    let off = registry_config("[breaker]\nconsecutive_failures = 5");
    assert!(off
        .to_builder::<String>()
        .unwrap()
        .build()
        .unwrap()
        .outlier_pools()
        .is_empty());
}

#[test]
fn a_hosts_outlier_pool_is_laid_over_the_templates() {
    let registry = registry_config(
        r#"
        [outliers]
        [breaker]
        consecutive_failures = 5
        outlier_pool = "web"
        [hosts."db-1:5432"]
        outlier_pool = "db"
        [hosts."web-9:80"]
        consecutive_failures = 3
        "#,
    )
    .to_builder::<String>()
    .unwrap()
    .build()
    .unwrap();
    let pool = |key: &str| {
        registry
            .handle(key)
            .config()
            .outlier_pool()
            .map(str::to_owned)
    };
    assert_eq!(pool("db-1:5432").as_deref(), Some("db"));
    assert_eq!(pool("web-9:80").as_deref(), Some("web"), "the template's");
    assert_eq!(pool("web-1:80").as_deref(), Some("web"));
    let names: Vec<String> = registry
        .outlier_pools()
        .iter()
        .map(|p| p.name.to_string())
        .collect();
    assert_eq!(names, ["web", "db"]);
}

/// A bad `[outliers]` value, and the same value given to the builder.
fn bad_outliers_values() -> Vec<(&'static str, Outliers)> {
    let o = Outliers::new;
    vec![
        ("interval = \"0s\"", o().interval(Duration::ZERO)),
        (
            "interval = \"2d\"",
            o().interval(Duration::from_secs(2 * 86_400)),
        ),
        (
            "success_rate_request_volume = 0",
            o().success_rate_request_volume(0),
        ),
        (
            "success_rate_request_volume = 258049",
            o().success_rate_request_volume(258_049),
        ),
        (
            "success_rate_minimum_hosts = 0",
            o().success_rate_minimum_hosts(0),
        ),
        ("stdev_factor = -1.0", o().stdev_factor(-1.0)),
        ("stdev_factor = nan", o().stdev_factor(f64::NAN)),
        (
            "enforcing_success_rate = 101",
            o().enforcing_success_rate(101),
        ),
        (
            "failure_percentage_threshold = 200",
            o().failure_percentage_threshold(200),
        ),
        (
            "failure_percentage_request_volume = 0",
            o().failure_percentage_request_volume(0),
        ),
        (
            "failure_percentage_minimum_hosts = 0",
            o().failure_percentage_minimum_hosts(0),
        ),
        (
            "enforcing_failure_percentage = 255",
            o().enforcing_failure_percentage(255),
        ),
        (
            "slow_outliers = { factor = 0.5, floor = 0.1 }",
            o().slow_outliers(0.5, 0.1),
        ),
        (
            "slow_outliers = { factor = 2.0, floor = 1.0 }",
            o().slow_outliers(2.0, 1.0),
        ),
        ("enforcing_slow = 101", o().enforcing_slow(101)),
        ("max_ejection_percent = 101", o().max_ejection_percent(101)),
        ("panic_threshold = 101", o().panic_threshold(101)),
    ]
}

#[test]
fn a_bad_outliers_value_is_the_registry_builders_error() {
    // Timed calls, so the latency rule's own check passes.
    let template = || {
        Breaker::builder()
            .consecutive_failures(3)
            .slow_call_threshold(Duration::from_secs(1))
    };
    for (line, outliers) in bad_outliers_values() {
        let want = Registry::<String>::builder(template())
            .outliers(outliers)
            .build()
            .expect_err(line);
        assert!(want.field().starts_with("outliers."), "{line}: {want}");
        let text = format!(
            "[outliers]\n{line}\n[breaker]\nconsecutive_failures = 3\nslow_call_threshold = \"1s\""
        );
        let got = registry_config(&text)
            .to_builder::<String>()
            .expect_err(line);
        assert_eq!(got, want, "{line}");
        assert_eq!(got.to_string(), want.to_string());
    }
    // Text that is no duration names the field.
    let err = registry_config("[outliers]\ninterval = \"10\"\n[breaker]\nconsecutive_failures = 3")
        .to_builder::<String>()
        .unwrap_err();
    assert_eq!(err.field(), "outliers.interval");
    // The registry's limits come first, then the outliers, then the
    // template, as `build` checks them.
    let text = "shards = 3\n[outliers]\nstdev_factor = -1.0\n[breaker]\nfailure_rate = 7";
    assert_eq!(
        registry_config(text)
            .to_builder::<String>()
            .unwrap_err()
            .field(),
        "shards"
    );
    let text = "[outliers]\nstdev_factor = -1.0\n[breaker]\nfailure_rate = 7";
    let want = Registry::<String>::builder(Breaker::builder().failure_rate(7.0))
        .outliers(Outliers::new().stdev_factor(-1.0))
        .build()
        .unwrap_err();
    assert_eq!(
        registry_config(text).to_builder::<String>().unwrap_err(),
        want
    );
}

#[test]
fn a_pool_without_outliers_and_a_latency_rule_without_timing_are_builds_errors() {
    // A host naming a pool in a registry without `[outliers]`: the file
    // reads, `build` refuses it as it refuses the same builder, naming the host.
    let config = registry_config(
        "[breaker]\nconsecutive_failures = 3\n[hosts.\"pay:443\"]\noutlier_pool = \"payments\"",
    );
    let got = config.to_builder::<String>().unwrap().build().unwrap_err();
    let want = Registry::<String>::builder(Breaker::builder().consecutive_failures(3))
        .override_key(
            "pay:443".to_string(),
            Breaker::builder()
                .consecutive_failures(3)
                .outlier_pool("payments"),
        )
        .build()
        .unwrap_err();
    assert_eq!(got, want);
    assert_eq!(got.field(), "outlier_pool");
    assert!(got.key().is_some_and(|k| k.contains("pay:443")), "{got}");
    // The latency rule over breakers that time no call.
    let config = registry_config(
        "[outliers]\nslow_outliers = { factor = 2.0, floor = 0.1 }\n[breaker]\nconsecutive_failures = 3",
    );
    let got = config.to_builder::<String>().unwrap().build().unwrap_err();
    let want = Registry::<String>::builder(Breaker::builder().consecutive_failures(3))
        .outliers(Outliers::new().slow_outliers(2.0, 0.1))
        .build()
        .unwrap_err();
    assert_eq!(got, want);
    assert_eq!(got.field(), "outliers.slow_outliers");
    // A breaker alone refuses a pool, from a file as from its builder.
    let alone =
        toml::from_str::<BreakerConfig>("consecutive_failures = 3\noutlier_pool = \"p\"").unwrap();
    let err = alone.to_builder().unwrap().build().unwrap_err();
    assert_eq!(err.field(), "outlier_pool");
}

#[test]
fn unknown_outliers_fields_are_refused() {
    for (text, unknown) in [
        ("[outliers]\nstdev = 1.0", "stdev"),
        ("[outliers]\nenforcing = 100", "enforcing"),
        (
            "[outliers]\nslow_outliers = { factor = 2.0, floor = 0.1, median = true }",
            "median",
        ),
        ("[breaker]\noutlier_pools = \"a\"", "outlier_pools"),
        ("[hosts.\"a:80\"]\npool = \"a\"", "pool"),
    ] {
        let err = toml::from_str::<RegistryConfig>(text)
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("unknown field `{unknown}`")), "{err}");
    }
    // Values of the wrong shape or type say what was expected.
    let err = toml::from_str::<OutliersConfig>("slow_outliers = \"on\"")
        .unwrap_err()
        .to_string();
    assert!(err.contains(r#""off" or a table { factor"#), "{err}");
    let err = toml::from_str::<OutliersConfig>("slow_outliers = { factor = 2.0 }")
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing field `floor`"), "{err}");
    let err = toml::from_str::<OutliersConfig>("enforcing_success_rate = 300")
        .unwrap_err()
        .to_string();
    assert!(err.contains("enforcing_success_rate"), "{err}");
    let err = toml::from_str::<OutliersConfig>("interval = 10")
        .unwrap_err()
        .to_string();
    assert!(err.contains("interval"), "{err}");
}
