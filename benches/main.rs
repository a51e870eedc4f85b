//! The criterion harness: every scenario in one run, so every ratio in
//! `benches/README.md` compares numbers taken minutes apart on the same
//! machine. One module per scenario.
//!
//! ```text
//! CARGO_TARGET_DIR=target/bench cargo bench --bench main -- --noplot
//! ```

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};

mod adapters;
mod closed;
mod contended;
mod floors;
mod open;
mod outliers;
mod peers;
mod registry;
mod shared_trips;
mod sharing;

/// Short runs: the whole harness must finish in a few minutes on 2 cores.
fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_millis(1500))
        .sample_size(40)
}

criterion_group! {
    name = benches;
    config = config();
    targets = floors::bench, closed::bench, open::bench, peers::bench, contended::bench, registry::bench, registry::bench_str_keys, shared_trips::bench, outliers::bench
}
criterion_main!(benches);
