//! The table, the text timelines, the per-second picture (SVG) and the CI
//! gate.

use std::fmt::Write as _;

use crate::summary::{Outcome, Summary};
use crate::Scenario;

fn secs(v: Option<f64>) -> String {
    v.map_or("–".to_owned(), |s| format!("{s:.2} s"))
}

/// One scenario's table, in Markdown.
pub fn table(scenario: &Scenario, rows: &[Summary]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### {}: {}\n", scenario.name, scenario.title);
    let load = if scenario.counts_refused() {
        "refused connects"
    } else {
        "reached the sick upstream"
    };
    let many = rows.iter().any(|r| r.healthy_ok.is_some());
    let _ = write!(
        out,
        "| proxy | 200 | stale 200 | rejected fast | other fast 5xx | slow 5xx | gave up \
         | p50 ms | p99 ms | {load} | 1st rejection | 1st 200 after recovery |"
    );
    if many {
        out.push_str(" healthy hosts' 200 |");
    }
    out.push('\n');
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    if many {
        out.push_str("---:|");
    }
    out.push('\n');
    for r in rows {
        let checks = if r.checks > 0 && !scenario.counts_refused() {
            format!(" (+{} checks)", r.checks)
        } else {
            String::new()
        };
        let _ = write!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {}{checks} | {} | {} |",
            r.proxy,
            r.count(Outcome::Ok),
            r.count(Outcome::Stale),
            r.count(Outcome::Rejected),
            r.count(Outcome::Fast5xx),
            r.count(Outcome::Slow5xx),
            r.count(Outcome::GaveUp),
            r.p50_ms,
            r.p99_ms,
            r.load_on_sick(),
            secs(r.first_rejection),
            secs(r.first_ok_after),
        );
        if many {
            let _ = write!(
                out,
                " {} |",
                r.healthy_ok
                    .map_or("–".into(), |s| format!("{:.1} %", s * 100.0))
            );
        }
        out.push('\n');
    }
    if scenario.retries > 0 {
        out.push_str("\nAttempts (retries included) sent during the incident: ");
        let parts: Vec<String> = rows
            .iter()
            .map(|r| format!("{} {}", r.proxy, r.attempts))
            .collect();
        out.push_str(&parts.join(", "));
        out.push('\n');
    }
    out.push_str("\n```\n");
    let width = rows.iter().map(|r| r.proxy.len()).max().unwrap_or(0);
    for r in rows {
        let _ = writeln!(out, "{:width$}  {}", r.proxy, r.timeline());
    }
    out.push_str("```\n\n");
    out
}

/// The CI gate's margin: a failfast proxy may let at most this much more
/// load reach the sick host than the best incumbent...
pub const MARGIN: f64 = 0.25;
/// ... plus this many calls (a count window needs `min_calls` = 10 calls
/// where nginx's `max_fails` needs 3) ...
pub const SLACK: u64 = 10;
/// ... plus the probes of the library's default schedule: one per open
/// period of 1, 2, then 3 s, at most 0.41 calls per second of the outage per
/// sick host (the crate's design docs, "The default schedule"), where nginx
/// with `fail_timeout=10s` sends 0.1. The schedule trades them for a first
/// 200 within about 4 s of the upstream's return; the gate holds it to that
/// trade, not to nginx's rate.
pub const PROBES_PER_SECOND: f64 = 0.41;

/// The gate's verdicts for one scenario: an empty list when it passes.
pub fn gate(scenario: &Scenario, rows: &[Summary]) -> Vec<String> {
    let incumbents: Vec<&Summary> = rows.iter().filter(|r| !r.failfast).collect();
    let mut failures = Vec::new();
    if incumbents.is_empty() {
        return failures;
    }
    let best = incumbents
        .iter()
        .map(|r| r.load_on_sick())
        .min()
        .unwrap_or(0);
    let sick_hosts = scenario.hosts.div_ceil(scenario.sick_every);
    let probes = PROBES_PER_SECOND * (scenario.plan.end - scenario.plan.start) * sick_hosts as f64;
    let bound = ((best as f64 * (1.0 + MARGIN)) as u64).max(best + SLACK) + probes.ceil() as u64;
    // An incumbent that never recovered in the run counts as the run's end.
    let slowest = incumbents
        .iter()
        .map(|r| {
            r.first_ok_after
                .unwrap_or(scenario.plan.length - scenario.plan.end)
        })
        .fold(0.0, f64::max);
    for r in rows.iter().filter(|r| r.failfast) {
        if r.load_on_sick() > bound {
            failures.push(format!(
                "{}: {}: {} reached the sick upstream; the best incumbent let {best} \
                 (bound: {bound})",
                scenario.name,
                r.proxy,
                r.load_on_sick()
            ));
        }
        match r.first_ok_after {
            Some(t) if t <= slowest + 0.5 => {}
            t => failures.push(format!(
                "{}: {}: first 200 after recovery at {}; the slowest incumbent's at {slowest:.2} s",
                scenario.name,
                r.proxy,
                secs(t)
            )),
        }
    }
    failures
}

const COLOURS: [&str; 6] = [
    "#43a047", // 200
    "#00acc1", // stale 200
    "#1e88e5", // rejected fast
    "#fb8c00", // other fast 5xx
    "#e53935", // slow 5xx
    "#4a148c", // gave up
];
const LABELS: [&str; 6] = [
    "200",
    "stale 200",
    "rejected fast",
    "other fast 5xx",
    "slow 5xx (timeout)",
    "gave up (1 s)",
];

/// Every scenario's per-second picture: for each proxy, a bar per second
/// split by the outcomes of that second's calls to sick hosts, and under
/// it the calls that reached a sick host that second (darker is more).
pub fn svg(results: &[(Scenario, Vec<Summary>)]) -> String {
    let label = 150.0;
    let bar = 18.0;
    let strip = 5.0;
    let row = bar + strip + 6.0;
    let longest = results
        .iter()
        .map(|(s, _)| s.plan.length.ceil())
        .fold(0.0, f64::max);
    // At least 700 px of seconds, and room for the legend and titles.
    let cell = (700.0 / longest).max(4.0).floor();
    let width = (label + longest * cell + 20.0).max(900.0);
    let mut height = 50.0;
    for (_, rows) in results {
        height += 34.0 + rows.len() as f64 * row + 10.0;
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let mut x = 10.0;
    for (colour, name) in COLOURS.iter().zip(LABELS) {
        let _ = writeln!(
            out,
            r#"<rect x="{x}" y="10" width="10" height="10" fill="{colour}"/><text x="{}" y="19">{name}</text>"#,
            x + 13.0
        );
        x += 13.0 + name.len() as f64 * 6.5 + 12.0;
    }
    let _ = writeln!(
        out,
        r#"<text x="10" y="36">Each second's calls to the sick upstream, by outcome; under each bar, the requests it got (black: the most). Dashed: the incident.</text>"#
    );
    let mut y = 50.0;
    for (scenario, rows) in results {
        let _ = writeln!(
            out,
            r#"<text x="10" y="{}" font-weight="bold">{}: {}</text>"#,
            y + 14.0,
            scenario.name,
            escape(&scenario.title)
        );
        y += 24.0;
        let peak = rows
            .iter()
            .flat_map(|r| r.seconds.iter().map(|s| s.1))
            .max()
            .unwrap_or(0)
            .max(1);
        let top = y;
        for r in rows {
            let _ = writeln!(
                out,
                r#"<text x="10" y="{}">{}</text>"#,
                y + bar - 5.0,
                r.proxy
            );
            for (second, (counts, reached)) in r.seconds.iter().enumerate() {
                let total: u32 = counts.iter().sum();
                let x = label + second as f64 * cell;
                let mut h = y;
                if total > 0 {
                    for (i, n) in counts.iter().enumerate() {
                        if *n == 0 {
                            continue;
                        }
                        let part = bar * f64::from(*n) / f64::from(total);
                        let _ = writeln!(
                            out,
                            r#"<rect x="{x:.1}" y="{h:.2}" width="{cell}" height="{part:.2}" fill="{}"/>"#,
                            COLOURS[i]
                        );
                        h += part;
                    }
                }
                if *reached > 0 {
                    let shade = 230.0 - 230.0 * (f64::from(*reached) / f64::from(peak)).sqrt();
                    let _ = writeln!(
                        out,
                        r#"<rect x="{x:.1}" y="{:.1}" width="{cell}" height="{strip}" fill="rgb({s},{s},{s})"/>"#,
                        y + bar + 1.0,
                        s = shade as u8
                    );
                }
            }
            y += row;
        }
        for t in [scenario.plan.start, scenario.plan.end] {
            let x = label + t * cell;
            let _ = writeln!(
                out,
                r#"<line x1="{x}" y1="{}" x2="{x}" y2="{y}" stroke="black" stroke-dasharray="3,2"/>"#,
                top - 3.0
            );
        }
        for t in (0..=scenario.plan.length as usize).step_by(10) {
            let _ = writeln!(
                out,
                r##"<text x="{}" y="{}" font-size="9" fill="#555">{t} s</text>"##,
                label + t as f64 * cell,
                y + 8.0
            );
        }
        y += 20.0;
    }
    out.push_str("</svg>\n");
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
