//! What the outlier rules trade: healthy hosts ejected against the time a
//! sick one stays in. Envoy's rule (`Outliers::envoy()`) and the default
//! (`Outliers::new()`, which weighs evidence) side by side, over a grid of
//! pools, on the pool's own code: each host's interval counts (binomial
//! draws from seeded generators) go through the real pool (its reports,
//! sums, seals, figures, judgement, evidence, enforcement, cap and
//! ejection time) as its first call of the next interval would bring them.
//!
//! ```text
//! cargo run --release --example outlier_tradeoff [-- SVG_PATH [SIGNIFICANCE]]
//! ```
//!
//! `SIGNIFICANCE` runs the default at another significance (e.g. `1e-4`),
//! to see what a setting would trade.
//!
//! For each pool size (5, 20, 100, 500 hosts), calls per host per interval
//! (100, 1,000, 10,000) and pool success rate (99.9, 99.5, 99, 95 %):
//!
//! - **false ejections per 1,000 host-hours**: a pool of healthy hosts
//!   only, run for at least 2,000 host-hours (10 s intervals) over 20
//!   seeds; every ejection is a false one.
//! - **intervals to detect** a host failing 2×, 3× and 5× as often as its
//!   pool, from the interval it turns bad (after 10 healthy ones) to its
//!   first ejection: 1 is the soonest (judged at its first call after that
//!   interval). The median over 20 seeds, and how many of the 20 were
//!   ejected within 2 intervals; a run stops 50 intervals after the host
//!   turned bad (`>50`).
//!
//! It prints the table (`benches/README.md` keeps it) and writes an SVG of
//! detection delay against false ejections (default
//! `target/outlier_tradeoff.svg`). About a minute in a release build.

use std::fmt::Write as _;
use std::time::Duration;

use failfast::outlier::sim::PoolSim;
use failfast::Outliers;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Binomial, Distribution};

const POOLS: [usize; 4] = [5, 20, 100, 500];
const VOLUMES: [u32; 3] = [100, 1_000, 10_000];
const SUCCESS: [f64; 4] = [0.999, 0.995, 0.99, 0.95];
const FACTORS: [f64; 3] = [2.0, 3.0, 5.0];
const SEEDS: u64 = 20;
const INTERVAL: Duration = Duration::from_secs(10);
/// Healthy intervals before the sick host turns bad.
const WARM: u64 = 10;
/// Intervals a detection run lasts after that.
const WATCH: u64 = 50;
/// Host-intervals of each healthy run, at least (2,000 host-hours).
const HEALTHY_HOST_INTERVALS: u64 = 720_000;

#[derive(Copy, Clone, PartialEq)]
enum Rule {
    Envoy,
    Default,
}

/// The default's significance, when the command line sets one.
static SIGNIFICANCE: std::sync::OnceLock<Option<f64>> = std::sync::OnceLock::new();

impl Rule {
    fn outliers(self) -> Outliers {
        match self {
            Rule::Envoy => Outliers::envoy(),
            Rule::Default => match SIGNIFICANCE.get().copied().flatten() {
                Some(alpha) => Outliers::new().significance(alpha),
                None => Outliers::new(),
            },
        }
        .interval(INTERVAL)
    }

    fn name(self) -> &'static str {
        match self {
            Rule::Envoy => "Envoy",
            Rule::Default => "default",
        }
    }
}

/// One pool's run: host 0 fails at `sick` from interval `bad_from` on (if
/// any), every other host at `p`. Returns the false ejections, the healthy
/// host-intervals, and the sick host's detection delay (intervals).
fn run(
    rule: Rule,
    hosts: usize,
    calls: u32,
    p: f64,
    sick: Option<(f64, u64)>,
    intervals: u64,
    seed: u64,
) -> (u64, u64, Option<u64>) {
    let mut sim = PoolSim::new(&rule.outliers(), hosts).expect("valid settings");
    let interval = sim.interval_nanos();
    let mut rng = SmallRng::seed_from_u64(seed);
    let healthy = Binomial::new(u64::from(calls), p).expect("a rate");
    let bad = sick.map(|(q, _)| Binomial::new(u64::from(calls), q.min(1.0)).expect("a rate"));
    // Until which interval each host is ejected.
    let mut out: Vec<Option<u64>> = vec![None; hosts];
    let (mut false_ejections, mut host_intervals) = (0, 0);
    for epoch in 1..=intervals {
        for (id, ejected) in out.iter_mut().enumerate() {
            if let Some(until) = *ejected {
                if epoch < until {
                    continue;
                }
                // Its first call after the ejection time starts the probe,
                // which closes it: back, and judged from its next roll on.
                sim.end(id, epoch);
                *ejected = None;
                continue;
            }
            let sick_now = match sick {
                Some((_, from)) if id == 0 => epoch > from,
                _ => false,
            };
            let draw = match (&bad, sick_now) {
                (Some(b), true) => b.sample(&mut rng),
                _ => healthy.sample(&mut rng),
            };
            if !sick_now {
                host_intervals += 1;
            }
            let Some((_, nanos)) = sim.roll(id, epoch, calls, draw as u32, 0) else {
                continue;
            };
            let nanos = nanos.expect("Envoy's ejection time");
            *ejected = Some(epoch + nanos / interval);
            if sick_now {
                // Judged on interval `epoch − 1`, bad from `from` on: 1 at
                // the first roll after the first bad interval.
                let from = sick.map_or(0, |(_, from)| from);
                return (false_ejections, host_intervals, Some(epoch - from));
            }
            false_ejections += 1;
        }
    }
    (false_ejections, host_intervals, None)
}

/// One row of the table for a rule: false ejections per 1,000 host-hours,
/// and per factor the median delay and the runs within 2 intervals.
struct Row {
    false_per_kh: f64,
    false_ejections: u64,
    detect: [(Option<u64>, u64); 3],
}

fn row(rule: Rule, hosts: usize, calls: u32, success: f64) -> Row {
    let p = 1.0 - success;
    let per_seed = HEALTHY_HOST_INTERVALS
        .div_ceil(SEEDS * hosts as u64)
        .max(WARM + WATCH);
    let (mut fe, mut hi) = (0, 0);
    for seed in 0..SEEDS {
        let (f, h, _) = run(rule, hosts, calls, p, None, per_seed, seed);
        fe += f;
        hi += h;
    }
    let hours = hi as f64 * INTERVAL.as_secs_f64() / 3600.0;
    let mut detect = [(None, 0); 3];
    for (i, factor) in FACTORS.iter().enumerate() {
        let mut delays: Vec<u64> = (0..SEEDS)
            .map(|seed| {
                let sick = Some((p * factor, WARM));
                run(rule, hosts, calls, p, sick, WARM + WATCH, 1_000 + seed)
                    .2
                    .unwrap_or(u64::MAX)
            })
            .collect();
        delays.sort_unstable();
        let median = delays[delays.len() / 2];
        let within = delays.iter().filter(|&&d| d <= 2).count() as u64;
        detect[i] = ((median != u64::MAX).then_some(median), within);
    }
    Row {
        false_per_kh: fe as f64 * 1_000.0 / hours,
        false_ejections: fe,
        detect,
    }
}

fn delay(d: Option<u64>) -> String {
    d.map_or(format!(">{WATCH}"), |d| d.to_string())
}

fn main() {
    let svg_path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/outlier_tradeoff.svg".into());
    let alpha = std::env::args()
        .nth(2)
        .map(|a| a.parse().expect("a significance"));
    SIGNIFICANCE.set(alpha).expect("set once");
    let mut table = String::new();
    let _ = writeln!(
        table,
        "| hosts | calls | success | rule | false / 1,000 h (n) | 2× median, ≤2 | 3× median, ≤2 | 5× median, ≤2 |"
    );
    let _ = writeln!(table, "|---:|---:|---:|---|---:|---:|---:|---:|");
    // (rule, false per 1,000 h, median delay at 3×, calls).
    let mut points = Vec::new();
    for &hosts in &POOLS {
        for &calls in &VOLUMES {
            for &success in &SUCCESS {
                let rows = std::thread::scope(|s| {
                    let envoy = s.spawn(|| row(Rule::Envoy, hosts, calls, success));
                    let default = row(Rule::Default, hosts, calls, success);
                    [
                        (Rule::Envoy, envoy.join().expect("the Envoy run")),
                        (Rule::Default, default),
                    ]
                });
                for (rule, r) in rows {
                    let cells: Vec<String> = r
                        .detect
                        .iter()
                        .map(|&(m, w)| format!("{}, {w}/{SEEDS}", delay(m)))
                        .collect();
                    let line = format!(
                        "| {hosts} | {calls} | {:.1} % | {} | {:.2} ({}) | {} | {} | {} |",
                        success * 100.0,
                        rule.name(),
                        r.false_per_kh,
                        r.false_ejections,
                        cells[0],
                        cells[1],
                        cells[2]
                    );
                    println!("{line}");
                    let _ = writeln!(table, "{line}");
                    points.push((rule, r.false_per_kh, r.detect[1].0, calls, hosts));
                }
            }
        }
    }
    println!();
    println!("{table}");
    let svg = plot(&points);
    if let Err(e) = std::fs::write(&svg_path, svg) {
        eprintln!("could not write {svg_path}: {e}");
    } else {
        println!("picture: {svg_path}");
    }
}

/// Detection delay of a 3× host (y, intervals, log scale) against false
/// ejections per 1,000 host-hours (x, log scale), one point per grid cell
/// and rule: Envoy's in red, the default's in blue; marker size by volume.
fn plot(points: &[(Rule, f64, Option<u64>, u32, usize)]) -> String {
    let (w, h, left, bottom, top, right) = (900.0, 600.0, 80.0, 60.0, 40.0, 180.0);
    let (x0, x1) = (0.01f64.log10(), 10_000f64.log10());
    let (y0, y1) = (0.8f64.log10(), 64f64.log10());
    let px = |x: f64| left + (x.max(0.01).log10() - x0) / (x1 - x0) * (w - left - right);
    let py = |y: f64| h - bottom - (y.log10() - y0) / (y1 - y0) * (h - bottom - top);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="13">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15">A host failing 3× its pool's rate: intervals to its ejection against healthy hosts ejected</text>"#,
        (w - right + left) / 2.0
    );
    // Grid and ticks.
    for x in [0.01, 0.1, 1.0, 10.0, 100.0, 1_000.0, 10_000.0] {
        let gx = px(x);
        let _ = writeln!(
            s,
            r##"<line x1="{gx}" y1="{top}" x2="{gx}" y2="{}" stroke="#ddd"/><text x="{gx}" y="{}" text-anchor="middle">{}</text>"##,
            h - bottom,
            h - bottom + 18.0,
            if x < 0.1 {
                "0".to_string()
            } else {
                format!("{x}")
            }
        );
    }
    for y in [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0] {
        let gy = py(y);
        let label = if y >= 64.0 {
            format!(">{WATCH}")
        } else {
            format!("{y}")
        };
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{gy}" x2="{}" y2="{gy}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{label}</text>"##,
            w - right,
            left - 16.0,
            gy + 4.0
        );
    }
    // The target: at most 1 false ejection per 1,000 host-hours.
    let tx = px(1.0);
    let _ = writeln!(
        s,
        r##"<line x1="{tx}" y1="{top}" x2="{tx}" y2="{}" stroke="#2a2" stroke-dasharray="6,4"/><text x="{}" y="{}" fill="#2a2">target ≤ 1</text>"##,
        h - bottom,
        tx + 4.0,
        top + 14.0
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">false ejections per 1,000 host-hours (healthy pools; 0 drawn at the left edge)</text>"#,
        (w - right + left) / 2.0,
        h - 16.0
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(22,{}) rotate(-90)" text-anchor="middle">median intervals to the first ejection</text>"#,
        (h - bottom + top) / 2.0
    );
    for &(rule, fpk, d, calls, hosts) in points {
        let color = match rule {
            Rule::Envoy => "#d33",
            Rule::Default => "#25c",
        };
        let r = match calls {
            100 => 3.0,
            1_000 => 5.0,
            _ => 7.5,
        };
        let y = d.map_or(64.0, |d| d as f64);
        // A little spread by pool size, so that equal points stay apart.
        let jitter = match hosts {
            5 => -6.0,
            20 => -2.0,
            100 => 2.0,
            _ => 6.0,
        };
        let _ = writeln!(
            s,
            r#"<circle cx="{}" cy="{}" r="{r}" fill="{color}" fill-opacity="0.55" stroke="{color}"/>"#,
            px(fpk) + jitter,
            py(y)
        );
    }
    // Legend.
    let lx = w - right + 20.0;
    let legend = [
        ("#d33", 5.0, "Envoy's rule"),
        ("#25c", 5.0, "default (evidence)"),
        ("#777", 3.0, "100 calls / interval"),
        ("#777", 5.0, "1,000"),
        ("#777", 7.5, "10,000"),
    ];
    for (i, (color, r, label)) in legend.iter().enumerate() {
        let y = top + 30.0 + 24.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<circle cx="{lx}" cy="{y}" r="{r}" fill="{color}" fill-opacity="0.55" stroke="{color}"/><text x="{}" y="{}">{label}</text>"#,
            lx + 14.0,
            y + 4.0
        );
    }
    let _ = writeln!(s, "</svg>");
    s
}
