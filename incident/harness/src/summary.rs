//! One run's numbers: what the callers saw and what reached the sick
//! upstream, over the calls *sent* during the incident.

use crate::callers::{Answered, Call, Ending};
use crate::upstream::{Plan, Tally};

/// An answer under this is "fast".
pub const FAST: f64 = 0.050;

/// What became of a call.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// A fresh 200 from the catalog.
    Ok,
    /// A stale 200 from the proxy's cache.
    Stale,
    /// A 5xx in under 50 ms that the proxy gave without calling the catalog.
    Rejected,
    /// Another 5xx in under 50 ms (the catalog's 503 passed on, a refused
    /// connect), or a connection error.
    Fast5xx,
    /// A 5xx after 50 ms or more (a read timeout's 504).
    Slow5xx,
    /// The caller's patience ran out.
    GaveUp,
}

impl Outcome {
    pub const ALL: [Outcome; 6] = [
        Outcome::Ok,
        Outcome::Stale,
        Outcome::Rejected,
        Outcome::Fast5xx,
        Outcome::Slow5xx,
        Outcome::GaveUp,
    ];

    pub fn of(call: &Call) -> Outcome {
        match call.ending {
            Ending::GaveUp => Outcome::GaveUp,
            Ending::ConnectionError => Outcome::Fast5xx,
            Ending::Status(200) if call.answered == Answered::Stale => Outcome::Stale,
            Ending::Status(s) if s < 500 => Outcome::Ok,
            Ending::Status(_) if call.last_latency >= FAST => Outcome::Slow5xx,
            Ending::Status(_) if call.answered == Answered::ProxyAlone => Outcome::Rejected,
            Ending::Status(_) => Outcome::Fast5xx,
        }
    }

    /// One letter for the text timeline.
    pub fn letter(self) -> char {
        match self {
            Outcome::Ok => '.',
            Outcome::Stale => 's',
            Outcome::Rejected => 'r',
            Outcome::Fast5xx => 'f',
            Outcome::Slow5xx => 'e',
            Outcome::GaveUp => 'T',
        }
    }
}

/// One proxy in one scenario.
#[derive(Clone, Debug)]
pub struct Summary {
    pub proxy: &'static str,
    pub failfast: bool,
    /// Calls sent during the incident to sick hosts, by outcome.
    pub counts: [u32; 6],
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Requests that reached a sick host while it was sick.
    pub reached_sick: u32,
    /// Health checks that reached the catalog during the incident.
    pub checks: u32,
    /// Connects refused during the incident (the kernel's count).
    pub refused_connects: Option<u64>,
    /// Attempts the callers made during the incident (retries included).
    pub attempts: u32,
    /// When the first call the proxy answered alone was sent, from the
    /// incident's start.
    pub first_rejection: Option<f64>,
    /// When the first call to get a fresh 200 from a sick host was sent,
    /// from the incident's end.
    pub first_ok_after: Option<f64>,
    /// Share of the healthy hosts' incident calls that got a fresh 200.
    pub healthy_ok: Option<f64>,
    /// Per second: outcome counts of the sick hosts' calls, and requests
    /// that reached a sick host.
    pub seconds: Vec<([u32; 6], u32)>,
}

/// Summarises one run.
pub fn summarise(
    proxy: &'static str,
    failfast: bool,
    calls: &[Call],
    sick: &[bool],
    tally: &Tally,
    plan: Plan,
    refused_connects: Option<u64>,
) -> Summary {
    let in_incident = |c: &&Call| c.sched >= plan.start && c.sched < plan.end;
    let sick_calls: Vec<&Call> = calls.iter().filter(|c| sick[c.host as usize]).collect();
    let incident: Vec<&Call> = sick_calls.iter().copied().filter(in_incident).collect();
    let mut counts = [0u32; 6];
    for c in &incident {
        counts[Outcome::of(c) as usize] += 1;
    }
    let mut latencies: Vec<f64> = incident.iter().map(|c| c.latency).collect();
    latencies.sort_by(f64::total_cmp);
    let pct = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(f64::NAN, |s| s * 1e3)
    };
    let whole = plan.length.ceil() as usize;
    let (start, end) = (plan.start as usize, plan.end as usize);
    let mut reached_sick = 0;
    let mut checks = 0;
    let mut seconds = vec![([0u32; 6], 0u32); whole];
    for (second, row) in seconds.iter_mut().enumerate() {
        for (host, is_sick) in sick.iter().enumerate() {
            if *is_sick {
                let n = tally.calls(host, second);
                row.1 += n;
                if (start..end).contains(&second) {
                    reached_sick += n;
                }
            }
        }
        if (start..end).contains(&second) {
            checks += tally.checks(second);
        }
    }
    for c in &sick_calls {
        if let Some(row) = seconds.get_mut(c.sched as usize) {
            row.0[Outcome::of(c) as usize] += 1;
        }
    }
    let first_rejection = incident
        .iter()
        .filter(|c| matches!(Outcome::of(c), Outcome::Rejected | Outcome::Stale))
        .map(|c| c.sched - plan.start)
        .reduce(f64::min);
    let first_ok_after = sick_calls
        .iter()
        .filter(|c| c.sched >= plan.end && Outcome::of(c) == Outcome::Ok)
        .map(|c| c.sched - plan.end)
        .reduce(f64::min);
    let healthy: Vec<&Call> = calls
        .iter()
        .filter(|c| !sick[c.host as usize])
        .filter(in_incident)
        .collect();
    let healthy_ok = (!healthy.is_empty()).then(|| {
        healthy
            .iter()
            .filter(|c| Outcome::of(c) == Outcome::Ok)
            .count() as f64
            / healthy.len() as f64
    });
    Summary {
        proxy,
        failfast,
        counts,
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
        reached_sick,
        checks,
        refused_connects,
        attempts: incident.iter().map(|c| u32::from(c.attempts)).sum(),
        first_rejection,
        first_ok_after,
        healthy_ok,
        seconds,
    }
}

impl Summary {
    /// What reached the sick host: requests, or for a refused host the
    /// connects the kernel refused.
    pub fn load_on_sick(&self) -> u64 {
        self.refused_connects
            .unwrap_or(u64::from(self.reached_sick))
    }

    pub fn count(&self, outcome: Outcome) -> u32 {
        self.counts[outcome as usize]
    }

    /// The text timeline: per second, the majority outcome.
    pub fn timeline(&self) -> String {
        self.seconds
            .iter()
            .map(|(counts, _)| {
                let (best, n) = counts
                    .iter()
                    .enumerate()
                    .max_by_key(|(i, n)| (**n, std::cmp::Reverse(*i)))
                    .unwrap();
                if *n == 0 {
                    ' '
                } else {
                    Outcome::ALL[best].letter()
                }
            })
            .collect()
    }
}

/// The kernel's count of failed connects (refused ones among them), for
/// this network namespace.
pub fn attempt_fails() -> Option<u64> {
    let snmp = std::fs::read_to_string("/proc/net/snmp").ok()?;
    let mut rows = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let names: Vec<&str> = rows.next()?.split_whitespace().collect();
    let values: Vec<&str> = rows.next()?.split_whitespace().collect();
    let i = names.iter().position(|n| *n == "AttemptFails")?;
    values.get(i)?.parse().ok()
}
