//! What a build without a feature leaves out, said where `cargo test` shows it.
//!
//! A test file whose `required-features` are off is skipped by cargo without a
//! word: a plain `cargo test` would pass with the tower layers never run. For
//! each such file this one has a test of the same name that exists only while
//! the feature is off, marked ignored with the feature it needs, so the run
//! lists it as `test tower_layers ... ignored, needs --features tower`.
//! Asked to run anyway (`cargo test -- --ignored`) it fails with the command
//! that runs the real file.
//!
//! With every feature on, [`every_feature_gated_file_is_named_here`] holds the
//! list below to the `[[test]]` entries of `Cargo.toml`.

macro_rules! needs {
    // A file that needs several features: `needs!(file, "a" + "b", ...)`.
    ($file:ident, $first:literal $(+ $more:literal)+, $reason:literal) => {
        #[cfg(not(all(feature = $first $(, feature = $more)+)))]
        #[test]
        #[ignore = $reason]
        fn $file() {
            panic!(concat!(
                "skipped without its features: run `cargo test --features ",
                $first,
                $(",", $more,)+
                " --test ",
                stringify!($file),
                "`"
            ));
        }
    };
    ($file:ident, $feature:literal, $reason:literal) => {
        #[cfg(not(feature = $feature))]
        #[test]
        #[ignore = $reason]
        fn $file() {
            panic!(concat!(
                "skipped without its feature: run `cargo test --features ",
                $feature,
                " --test ",
                stringify!($file),
                "`"
            ));
        }
    };
}

needs!(e2e_proxy, "tower" + "serde", "needs --features tower,serde");
needs!(example_axum, "tower", "needs --features tower");
needs!(example_tonic, "tower", "needs --features tower");
needs!(tower_layers, "tower", "needs --features tower");
needs!(eject_ramp, "tower", "needs --features tower");
needs!(hints, "tower", "needs --features tower");
needs!(tower_eos, "tower", "needs --features tower");
needs!(faults, "tower", "needs --features tower");
needs!(unanswered, "tower", "needs --features tower");
needs!(stream_progress, "tower", "needs --features tower");
needs!(hostile_clients, "tower", "needs --features tower");
needs!(hostile_keys, "tower", "needs --features tower");
needs!(key_normalisation, "tower", "needs --features tower");
needs!(alloc_keyed, "tower", "needs --features tower");
needs!(metrics_totals, "metrics", "needs --features metrics");
needs!(config_file, "serde", "needs --features serde");
needs!(fallback_layer, "tower", "needs --features tower");
needs!(
    trace_calls,
    "tower" + "tracing",
    "needs --features tower,tracing"
);
needs!(
    hook_every_cause,
    "tower" + "tracing" + "metrics",
    "needs --features tower,tracing,metrics"
);
needs!(
    otel_export,
    "tower" + "tracing",
    "needs --features tower,tracing"
);
needs!(
    alloc_observed,
    "tower" + "tracing" + "metrics",
    "needs --features tower,tracing,metrics"
);
needs!(
    call_metrics,
    "tower" + "metrics",
    "needs --features tower,metrics"
);
needs!(redis_sync, "redis", "needs --features redis");
needs!(redis_cluster, "redis", "needs --features redis");
needs!(redis_faults, "redis", "needs --features redis");
needs!(redis_store_rules, "redis", "needs --features redis");
needs!(
    reqwest_middleware,
    "reqwest" + "tower",
    "needs --features reqwest,tower"
);
needs!(
    unanswered_default,
    "reqwest" + "tower" + "serde",
    "needs --features reqwest,tower,serde"
);
needs!(
    client_uploads,
    "tower" + "reqwest",
    "needs --features tower,reqwest"
);
needs!(
    redis_proxy,
    "tower" + "redis" + "serde",
    "needs --features tower,redis,serde"
);
needs!(downstream_time, "tower", "needs --features tower");
needs!(reqwest_chain, "reqwest", "needs --features reqwest");
needs!(retry_tower, "tower", "needs --features tower");
needs!(retry_single, "tower", "needs --features tower");
needs!(retry_reqwest, "reqwest", "needs --features reqwest");

/// Every `[[test]]` of `Cargo.toml` with `required-features` has its
/// `needs!` line above, naming the same features (joined by `+`).
#[test]
fn every_feature_gated_file_is_named_here() {
    let root = env!("CARGO_MANIFEST_DIR");
    let manifest = std::fs::read_to_string(format!("{root}/Cargo.toml")).unwrap();
    let this = std::fs::read_to_string(format!("{root}/tests/feature_gated.rs")).unwrap();
    let mut gated = Vec::new();
    for entry in manifest.split("[[test]]").skip(1) {
        let entry = entry.split("\n[").next().unwrap();
        let value = |key: &str| {
            entry.lines().find_map(|line| {
                let rest = line
                    .trim()
                    .strip_prefix(key)?
                    .trim_start()
                    .strip_prefix('=')?;
                Some(rest.trim().trim_matches(['[', ']', '"']).to_owned())
            })
        };
        if let (Some(name), Some(feature)) = (value("name"), value("required-features")) {
            gated.push((name, feature));
        }
    }
    assert!(gated.len() >= 9, "found only {gated:?} in Cargo.toml");
    for (name, features) in gated {
        let features: Vec<&str> = features
            .split(',')
            .map(|f| f.trim().trim_matches('"'))
            .collect();
        let quoted: Vec<String> = features.iter().map(|f| format!("\"{f}\"")).collect();
        let line = format!(
            "needs!({name}, {}, \"needs --features {}\");",
            quoted.join(" + "),
            features.join(",")
        );
        // Whitespace aside: rustfmt spreads a long `needs!` over lines.
        let squeezed = |s: &str| s.split_whitespace().collect::<String>();
        assert!(
            squeezed(&this).contains(&squeezed(&line)),
            "tests/feature_gated.rs lacks `{line}`"
        );
    }
}
