//! The measurement the unanswered rule's default was chosen from
//! (`Builder::unanswered`; the crate docs' "Silence is evidence").
//!
//! ```sh
//! cargo run --release --example unanswered_default            # the grid (about a minute)
//! cargo run --release --example unanswered_default -- --calls 1000000
//! ```
//!
//! For each rule — `calls` unanswered drops in a row, each held at least
//! `after` — it runs, on a manual clock (`sim.rs`):
//!
//! - **a hung upstream** behind clients that all give up after 100 ms,
//!   300 ms, 1 s or 5 s, at 10 and at 100 calls a second: how many calls
//!   reach it before its breaker opens ("-": not within a minute);
//! - **the controls**, which must never trip `Unresponsive`: a healthy
//!   upstream (median 50 ms, p99 0.5 s) whose clients cancel at random
//!   (30 % within 1 s), the same upstream behind clients that all give up
//!   at 100 ms or at 300 ms (a hedged request's loser is cancelled about
//!   then), and a slow upstream that answers (median 1.5 s) while 30 %,
//!   50 % or 80 % of its clients give up at a random moment within 3 s.
//!
//! The breaker is otherwise the default one with `consecutive_failures(5)`
//! (no failure happens here: the only trips are the rule's). With no
//! slow-call threshold, `abandoned_after` is the probe lease, 30 s, so
//! without the rule no drop here counts and no breaker ever opens.

mod sim;

use std::time::Duration;

use failfast::Breaker;
use sim::{healthy, healthy_fixed, hung, run, slow, stalled, Scenario};

const MS: Duration = Duration::from_millis(1);

fn main() {
    let mut calls = 200_000u64;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--calls" => {
                calls = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--calls needs a number");
            }
            other => {
                eprintln!("usage: unanswered_default [--calls N]  (unknown: {other})");
                std::process::exit(2);
            }
        }
    }
    let rules: Vec<(u32, Duration)> = [3, 5, 10, 20, 30]
        .into_iter()
        .flat_map(|k| [50 * MS, 100 * MS, 250 * MS, 500 * MS, 1000 * MS].map(|a| (k, a)))
        .collect();
    let patience = [100 * MS, 300 * MS, 1000 * MS, 5000 * MS];
    let controls: Vec<(String, Scenario)> = vec![
        ("healthy, 30% cancel".into(), healthy(calls)),
        (
            "healthy, all give up 100ms".into(),
            healthy_fixed(calls, 100 * MS),
        ),
        (
            "healthy, all give up 300ms".into(),
            healthy_fixed(calls, 300 * MS),
        ),
        ("slow, 30% give up".into(), slow(calls / 2, 0.3)),
        ("slow, 50% give up".into(), slow(calls / 2, 0.5)),
        ("slow, 80% give up".into(), slow(calls / 2, 0.8)),
    ];

    println!(
        "Calls reaching a hung upstream before its breaker opens (\"-\": not within a minute)"
    );
    print!("{:>6} {:>7} |", "calls", "after");
    for rate in [10, 100] {
        for p in patience {
            print!(" {:>10}", format!("{rate}/s {}", short(p)));
        }
    }
    println!();
    for &(k, after) in &rules {
        print!("{k:>6} {:>7} |", short(after));
        for rate in [10.0, 100.0] {
            for p in patience {
                let seen = run(rule(k, after), &hung(rate, p), 7);
                match seen.first_trip {
                    Some(at) => print!(
                        " {:>10}",
                        format!("{} {:.1}s", seen.reached, at.as_secs_f64())
                    ),
                    None => print!(" {:>10}", "-"),
                }
            }
        }
        println!();
    }

    println!();
    println!("The longest pause of the healthy upstream that trips nothing (its clients as in \"healthy, 30% cancel\")");
    let pauses: Vec<Duration> = [100, 200, 300, 400, 500, 750, 1000, 1500, 2000, 3000, 5000]
        .into_iter()
        .map(|ms| ms * MS)
        .collect();
    for &(k, after) in &rules {
        let survived = pauses
            .iter()
            .take_while(|&&p| run(rule(k, after), &stalled(p), 13).unresponsive == 0)
            .last();
        println!(
            "{k:>6} {:>7} | {}",
            short(after),
            survived.map_or("< 100ms".into(), |&p| short(p))
        );
    }

    println!();
    println!(
        "Unresponsive trips of the controls ({calls} calls each; the slow ones {})",
        calls / 2
    );
    print!("{:>6} {:>7} |", "calls", "after");
    for (name, _) in &controls {
        print!(" {name:>27}");
    }
    println!();
    for &(k, after) in &rules {
        print!("{k:>6} {:>7} |", short(after));
        for (_, scenario) in &controls {
            let seen = run(rule(k, after), scenario, 11);
            print!(" {:>27}", seen.unresponsive);
        }
        println!();
    }
}

/// The breaker of the grid: the default one, `consecutive_failures(5)`,
/// with this rule.
fn rule(calls: u32, after: Duration) -> failfast::Builder {
    Breaker::builder()
        .consecutive_failures(5)
        .unanswered(calls, after)
}

fn short(d: Duration) -> String {
    if d >= Duration::from_secs(1) && d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else if d >= Duration::from_secs(1) {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}ms", d.as_millis())
    }
}
