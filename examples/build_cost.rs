//! What building a standalone breaker costs, for `benches/README.md`
//! ("Building breakers"): 100,000 breakers of the consecutive policy built
//! with the default clock (`Breaker::build`, a `QuantaClock` each), against
//! the same built on a `ManualClock` (no TSC clock at all) in the same run,
//! and `QuantaClock::new` alone. Three rounds; the ratio is the claim.
//!
//! Run: `cargo run --release --example build_cost`

use std::hint::black_box;
use std::time::{Duration, Instant};

use failfast::{Breaker, ManualClock, QuantaClock};

const N: u32 = 100_000;

fn per_item(f: impl Fn()) -> Duration {
    let start = Instant::now();
    for _ in 0..N {
        f();
    }
    start.elapsed() / N
}

fn main() {
    println!("| round | `build()` (QuantaClock) | `build_with_clock(ManualClock)` | ratio | `QuantaClock::new()` |");
    println!("|---|---:|---:|---:|---:|");
    for round in 1..=3 {
        let quanta = per_item(|| {
            black_box(Breaker::builder().consecutive_failures(5).build().unwrap());
        });
        let manual = per_item(|| {
            let b = Breaker::builder().consecutive_failures(5);
            black_box(b.build_with_clock(ManualClock::new()).unwrap());
        });
        let clock = per_item(|| {
            black_box(QuantaClock::new());
        });
        println!(
            "| {round} | {quanta:.2?} | {manual:.2?} | {:.1}× | {clock:.2?} |",
            quanta.as_secs_f64() / manual.as_secs_f64()
        );
    }
}
