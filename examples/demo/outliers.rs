//! Outliers ★ 50 replicas of one service, one failing 8 % of its calls and
//! one twice as slow: judged against their peers, not by fixed thresholds
//! (issue 28).
//!
//! The model, one event at a time on a [`ManualClock`]:
//!
//! - 50 hosts (`h00` … `h49`) behind one client, one breaker per host in a
//!   [`Registry`]. Each host is offered a call every 50 ms (20 calls/s,
//!   200 per 10 s interval), host `h` at `h` ms past each 50 ms. A call its
//!   breaker rejects goes to another host (the next that admits it, 17
//!   hosts on at a time), as a balancer would send it.
//! - A healthy host fails 0.1 % of its calls. Nine in ten answer in
//!   40 ms + an exponential of mean 8 ms, one in ten in 80 ms + an
//!   exponential of mean 15 ms (p50 ≈ 46 ms, p99 ≈ 115 ms). A failed call
//!   answers as fast. Everything is drawn from a seeded xorshift: the
//!   output is the same every run.
//! - Host A (`h07`) fails 8 % of its calls; host B (`h31`) takes twice as
//!   long for every call. Both are repaired at 90 s.
//!
//! Two registries over the same template: failure rate ≥ 50 % or slow-call
//! rate ≥ 50 % of the last 100 calls, judged from 20, a call slow from
//! 120 ms (just above the healthy hosts' p99), open 30 s doubling per trip
//! in a row. **fixed**: that alone.
//! **outliers**: the same, plus [`RegistryBuilder::outliers`] with the
//! defaults (Envoy's: success rate below the pool's mean − 1.9 stdev, at
//! least 100 calls and 5 such hosts, at most 10 % of the pool ejected; and
//! evidence asked at one in a million) and the latency rule
//! `slow_outliers(3.0, 0.05)`: a host whose share of slow calls exceeds
//! 3 × the pool's mean share, and 5 %, is ejected. A third run,
//! `Outliers::envoy()`, shows what Envoy's rule alone does to this pool.
//!
//! A host's calls of interval k are judged at its first verdict of k + 1,
//! against the pool's figures of k − 1: the pool needs two intervals of
//! traffic before it judges anyone, so the first ejection can come at 20 s;
//! A's 16 failures in 200 calls are 10 nats of evidence, which its second
//! interval makes enough, at 30 s.
//!
//! [`RegistryBuilder::outliers`]: failfast::RegistryBuilder::outliers

use std::collections::hash_map::RandomState;
use std::time::Duration;

use failfast::{
    Breaker, Builder, Handle, ManualClock, Nanos, OutlierPoolSnapshot, OutlierRule, Outliers,
    Permit, Reason, Registry, State, Transition,
};

use crate::sim::{Latencies, Sim};
use crate::table::{dur, int, title, Table};

const HOSTS: u32 = 50;
/// Host A: fails 8 % of its calls until [`REPAIRED_AT`].
const A: u32 = 7;
/// Host B: twice as slow until [`REPAIRED_AT`].
const B: u32 = 31;
/// Calls offered to each host per second.
const CALLS_PER_S: u64 = 20;
const INTERVAL: Duration = Duration::from_secs(10);
/// A call is slow from here (both registries, and the latency rule).
const SLOW: Duration = Duration::from_millis(120);
const OPEN: Duration = Duration::from_secs(30);
/// A and B are repaired here.
const REPAIRED_AT: Duration = Duration::from_secs(90);
const HORIZON: Duration = Duration::from_secs(180);
/// The pool is shown this long into each interval: after its judgements,
/// made at each host's first verdict of the interval.
const SNAPSHOT_AFTER: Duration = Duration::from_secs(1);
/// Failure rates, in calls per million.
const HEALTHY_FAILS_PPM: u64 = 1_000;
const A_FAILS_PPM: u64 = 80_000;
/// The latency rule: `factor × the pool's mean slow share`, at least `floor`.
const SLOW_FACTOR: f64 = 3.0;
const SLOW_FLOOR: f64 = 0.05;

type Hosts = Registry<u32, RandomState, ManualClock>;

#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Host `h`'s next call is offered.
    Arrive(u32),
    /// Call `id` is answered.
    Answered(u32),
}

/// The breakers' template, shared by both runs.
fn template() -> Builder {
    Breaker::builder()
        .failure_rate(0.5)
        .slow_call_rate(0.5)
        .slow_call_threshold(SLOW)
        .count_window(100)
        .min_calls(20)
        .open_duration(OPEN)
        .backoff(2.0, Duration::from_secs(300))
}

fn outliers() -> Outliers {
    Outliers::new()
        .interval(INTERVAL)
        .slow_outliers(SLOW_FACTOR, SLOW_FLOOR)
}

/// Envoy's rule alone, with the same latency rule.
fn envoys() -> Outliers {
    Outliers::envoy()
        .interval(INTERVAL)
        .slow_outliers(SLOW_FACTOR, SLOW_FLOOR)
}

/// The upstream hosts' behaviour (xorshift64*, seeded).
struct Upstream {
    rng: u64,
}

impl Upstream {
    fn uniform(&mut self) -> f64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
        ((r >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn exp_ms(&mut self, mean: f64) -> f64 {
        -mean * self.uniform().ln()
    }

    /// Host `h`'s answer to a call at `now`: failed?, and how long it took.
    fn answer(&mut self, h: u32, now: Nanos) -> (bool, Duration) {
        let broken = now < Nanos::from_duration(REPAIRED_AT);
        let fails = if h == A && broken {
            A_FAILS_PPM
        } else {
            HEALTHY_FAILS_PPM
        };
        let failed = self.uniform() * 1e6 < fails as f64;
        let mut ms = if self.uniform() < 0.9 {
            40.0 + self.exp_ms(8.0)
        } else {
            80.0 + self.exp_ms(15.0)
        };
        if h == B && broken {
            ms *= 2.0;
        }
        (failed, Duration::from_secs_f64(ms / 1e3))
    }
}

/// One host's calls before the repair.
#[derive(Copy, Clone, Default)]
struct Served {
    calls: u64,
    failed: u64,
    slow: u64,
}

/// What one run saw.
#[derive(Default)]
struct Run {
    /// Every transition, with its host.
    transitions: Vec<(u32, Transition)>,
    served: Vec<Served>,
    /// What the client saw: every call answered, failed, or slow.
    calls: u64,
    failed: u64,
    slow: u64,
    latency: Latencies,
    /// Calls their first host rejected and another took.
    moved: u64,
    /// The peak failure rate of A's window and slow rate of B's (breaker
    /// snapshots after each of their verdicts).
    peak_a_failure_rate: f64,
    peak_b_slow_rate: f64,
    /// The pool 1 s into each interval from the third (after that
    /// interval's judgements), and at the end (outliers run only).
    pools: Vec<(Nanos, OutlierPoolSnapshot)>,
    /// B's slow findings that did not eject it: when, and how many hosts
    /// were ejected then (outliers run only).
    b_kept: Vec<(Nanos, u64)>,
}

impl Run {
    /// The trips of host `h`, with their reasons.
    fn trips(&self, h: u32) -> impl Iterator<Item = &Transition> {
        self.transitions
            .iter()
            .filter(move |(host, t)| *host == h && t.to == State::Open && t.from == State::Closed)
            .map(|(_, t)| t)
    }

    /// Healthy hosts (neither A nor B) that were ever taken out.
    fn healthy_out(&self) -> Vec<(u32, Transition)> {
        self.transitions
            .iter()
            .filter(|(h, t)| *h != A && *h != B && t.from == State::Closed && t.to == State::Open)
            .copied()
            .collect()
    }

    /// The transitions of A and B, in time order.
    fn story(&self) -> impl Iterator<Item = &(u32, Transition)> {
        self.transitions.iter().filter(|(h, _)| *h == A || *h == B)
    }

    /// The healthy hosts' calls before the repair, summed.
    fn healthy_served(&self) -> Served {
        let mut sum = Served::default();
        for (h, s) in self.served.iter().enumerate() {
            if h as u32 != A && h as u32 != B {
                sum.calls += s.calls;
                sum.failed += s.failed;
                sum.slow += s.slow;
            }
        }
        sum
    }
}

/// A call on its way: its permit, its host, and the answer it will get.
struct InFlight<'a> {
    permit: Permit<'a, ManualClock>,
    host: u32,
    failed: bool,
    took: Duration,
}

fn run(outliers: Option<Outliers>) -> Run {
    let clock = ManualClock::new();
    let with_outliers = outliers.is_some();
    let mut builder = Registry::<u32>::builder(template());
    if let Some(outliers) = outliers {
        builder = builder.outliers(outliers);
    }
    let hosts: Hosts = builder
        .build_with_clock(clock.clone())
        .expect("valid configuration");
    let handles: Vec<Handle<u32, ManualClock>> = (0..HOSTS).map(|h| hosts.handle(&h)).collect();
    // Every transition, whatever caused it: an ejection happens at the
    // admission that rolls a host's interval, which returns none.
    let heard: std::sync::Arc<std::sync::Mutex<Vec<(u32, Transition)>>> = Default::default();
    let log = heard.clone();
    hosts.on_transition(move |host: &str, t: &Transition| {
        if let Ok(h) = host.parse() {
            log.lock().unwrap_or_else(|e| e.into_inner()).push((h, *t));
        }
    });
    let mut sim = Sim::new(clock);
    let mut upstream = Upstream {
        rng: 0x9E37_79B9_7F4A_7C15,
    };
    let mut run = Run {
        served: vec![Served::default(); HOSTS as usize],
        ..Run::default()
    };
    let period = Duration::from_secs(1) / CALLS_PER_S as u32;
    for h in 0..HOSTS {
        sim.at(
            Nanos::from_duration(Duration::from_millis(h.into())),
            Event::Arrive(h),
        );
    }
    let repaired = Nanos::from_duration(REPAIRED_AT);
    let horizon = Nanos::from_duration(HORIZON);
    let mut next_snapshot = Nanos::from_duration(2 * INTERVAL + SNAPSHOT_AFTER);
    let mut calls: Vec<Option<InFlight<'_>>> = Vec::new();
    let interval = Nanos::from_duration(INTERVAL).as_nanos();
    let (mut b_interval, mut b_found) = (0, 0);
    while let Some((now, event)) = sim.next_event() {
        if with_outliers && now >= next_snapshot {
            if let Some(pool) = hosts.outlier_pools().into_iter().next() {
                run.pools.push((next_snapshot, pool));
            }
            next_snapshot += INTERVAL;
        }
        match event {
            Event::Arrive(first) => {
                if now + period < horizon {
                    sim.after(period, Event::Arrive(first));
                }
                // The first host that admits it, 17 hosts on at a time.
                let admitted = (0..HOSTS).find_map(|k| {
                    let h = (first + 17 * k) % HOSTS;
                    let permit = handles[h as usize].try_acquire_at(now).ok()?;
                    Some((h, permit, k > 0))
                });
                let Some((h, permit, moved)) = admitted else {
                    continue; // every host refused it
                };
                run.moved += u64::from(moved);
                if with_outliers && h == B && now.as_nanos() / interval != b_interval {
                    // B's first call of an interval: it was judged.
                    b_interval = now.as_nanos() / interval;
                    if let Some(p) = hosts.outlier_pools().into_iter().next() {
                        let found = p.detected(OutlierRule::Slow);
                        if found > b_found
                            && handles[B as usize]
                                .snapshot_at(now)
                                .outlier_ejection
                                .is_none()
                        {
                            run.b_kept.push((now, p.ejected));
                        }
                        b_found = found;
                    }
                }
                let (failed, took) = upstream.answer(h, now);
                let id = calls.len() as u32;
                calls.push(Some(InFlight {
                    permit,
                    host: h,
                    failed,
                    took,
                }));
                sim.after(took, Event::Answered(id));
            }
            Event::Answered(id) => {
                let Some(InFlight {
                    permit,
                    host: h,
                    failed,
                    took,
                }) = calls[id as usize].take()
                else {
                    continue;
                };
                let started = now.saturating_duration_since(Nanos::ZERO) - took;
                let slow = took >= SLOW;
                run.calls += 1;
                run.failed += u64::from(failed);
                run.slow += u64::from(slow);
                run.latency.push(took);
                if started < REPAIRED_AT {
                    let s = &mut run.served[h as usize];
                    s.calls += 1;
                    s.failed += u64::from(failed);
                    s.slow += u64::from(slow);
                }
                if failed {
                    permit.failure_at(now);
                } else {
                    permit.success_at(now);
                }
                if now < repaired && (h == A || h == B) {
                    let snap = handles[h as usize].snapshot_at(now);
                    if h == A {
                        let rate = snap.failure_rate.unwrap_or(0.0);
                        run.peak_a_failure_rate = run.peak_a_failure_rate.max(rate);
                    } else {
                        let rate = snap.slow_call_rate.unwrap_or(0.0);
                        run.peak_b_slow_rate = run.peak_b_slow_rate.max(rate);
                    }
                }
            }
        }
    }
    if with_outliers {
        if let Some(pool) = hosts.outlier_pools().into_iter().next() {
            run.pools.push((sim.now(), pool));
        }
    }
    run.transitions = std::mem::take(&mut *heard.lock().unwrap_or_else(|e| e.into_inner()));
    run
}

// ===== Printing =====

fn name(h: u32) -> String {
    format!("h{h:02}")
}

fn secs(at: Nanos) -> String {
    format!(
        "{:.1} s",
        at.saturating_duration_since(Nanos::ZERO).as_secs_f64()
    )
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "–".into();
    }
    let p = part as f64 * 100.0 / whole as f64;
    if p < 1.0 {
        format!("{p:.2} %")
    } else {
        format!("{p:.1} %")
    }
}

/// `20.0 s (outlier)`, … or `never`.
fn trips(run: &Run, h: u32) -> String {
    let list: Vec<String> = run
        .trips(h)
        .map(|t| format!("{} ({})", secs(t.at), t.reason))
        .collect();
    if list.is_empty() {
        "never".into()
    } else {
        list.join(", ")
    }
}

/// Prints the scene. Returns whether its claims held (see [`checks`]).
pub fn show() -> bool {
    title(
        "Outliers ★ 50 replicas, one failing 8 % and one twice as slow: judged against their peers",
    );
    println!(
        "  50 hosts, {} calls/s each ({} per {} s interval); a call a host's breaker rejects goes to another host.",
        CALLS_PER_S,
        CALLS_PER_S * INTERVAL.as_secs(),
        INTERVAL.as_secs()
    );
    println!("  Healthy hosts fail 0.1 % and answer in ~46 ms (p99 ~115 ms). A = {} fails 8 %; B = {} takes twice", name(A), name(B));
    println!(
        "  as long for every call. Both are repaired at {} s. Breakers: failure rate or slow-call rate ≥ 50 % of",
        REPAIRED_AT.as_secs()
    );
    println!(
        "  the last 100 calls (slow from {}), open {} s, ×2 per trip in a row. Outliers: the same, plus Envoy's",
        dur(SLOW),
        OPEN.as_secs()
    );
    println!(
        "  success-rate rule (mean − 1.9 stdev) with evidence asked (the default: one false ejection in 10⁶ intervals)"
    );
    println!(
        "  and slow_outliers({SLOW_FACTOR:.1}, {SLOW_FLOOR:.2}) over {} s intervals.",
        INTERVAL.as_secs()
    );
    println!();
    let mut runs = [run(None), run(Some(outliers()))];
    let envoy = run(Some(envoys()));
    let latencies: Vec<String> = runs
        .iter_mut()
        .map(|r| {
            format!(
                "{} / {} / {}",
                dur(r.latency.quantile(0.5)),
                dur(r.latency.quantile(0.99)),
                dur(r.latency.quantile(0.999))
            )
        })
        .collect();
    let [fixed, pooled] = &runs;
    let mut t = Table::new(&[
        format!("first {} s", HORIZON.as_secs()),
        "fixed thresholds".to_string(),
        "outliers".to_string(),
    ]);
    let mut row = |label: &str, f: &dyn Fn(&Run) -> String| {
        let cells: Vec<String> = std::iter::once(label.to_string())
            .chain(runs.iter().map(f))
            .collect();
        t.row(&cells);
    };
    row(&format!("A ({}, fails 8 %) taken out at", name(A)), &|r| {
        trips(r, A)
    });
    row(
        &format!("B ({}, twice as slow) taken out at", name(B)),
        &|r| trips(r, B),
    );
    row("healthy hosts taken out", &|r| {
        r.healthy_out().len().to_string()
    });
    row("calls A answered before its repair / failed", &|r| {
        let s = r.served[A as usize];
        format!("{} / {}", int(s.calls), int(s.failed))
    });
    row("calls B answered before its repair / slow", &|r| {
        let s = r.served[B as usize];
        format!("{} / {}", int(s.calls), int(s.slow))
    });
    row("A's worst failure rate, last 100 calls", &|r| {
        format!("{:.1} %", r.peak_a_failure_rate * 100.0)
    });
    row("B's worst slow-call rate, last 100 calls", &|r| {
        format!("{:.1} %", r.peak_b_slow_rate * 100.0)
    });
    row("calls moved to another host", &|r| int(r.moved));
    row("calls that failed, of all", &|r| {
        format!("{} of {}", int(r.failed), int(r.calls))
    });
    row(&format!("calls ≥ {}", dur(SLOW)), &|r| int(r.slow));
    t.row(&[
        "latency p50 / p99 / p99.9".to_string(),
        latencies[0].clone(),
        latencies[1].clone(),
    ]);
    t.print();

    let healthy = pooled.healthy_served();
    let b = pooled.served[B as usize];
    println!();
    println!(
        "  Before the repair, healthy hosts failed {} of their calls and answered {} of them slow (≥ {});",
        pct(healthy.failed, healthy.calls),
        pct(healthy.slow, healthy.calls),
        dur(SLOW)
    );
    println!(
        "  A failed {}, B answered {} slow. Fixed thresholds at 50 % never see either.",
        pct(
            pooled.served[A as usize].failed,
            pooled.served[A as usize].calls
        ),
        pct(b.slow, b.calls)
    );

    println!();
    println!("  Outliers, interval by interval: each host is judged at its first call of an interval, against the");
    println!("  pool's figures of the interval before the one it leaves. The pool 1 s into each interval:");
    println!();
    show_intervals(pooled);

    println!();
    println!("  A's and B's breakers in the outliers run:");
    println!();
    let mut t = Table::new(&["at", "host", "from → to", "reason", "open for"]).left(&[1, 2, 3]);
    for (h, tr) in pooled.story() {
        t.row(&[
            secs(tr.at),
            format!("{} {}", if *h == A { "A" } else { "B" }, name(*h)),
            format!("{} → {}", tr.from.as_str(), tr.to.as_str()),
            tr.reason.as_str().to_string(),
            tr.open_for.map_or(String::new(), dur),
        ]);
    }
    t.print();

    let healthy_out = pooled.healthy_out();
    let last = pooled.pools.last().map(|(_, p)| p);
    let found = |rule| last.map_or(0, |p| p.detected(rule));
    let ejected = |rule| last.map_or(0, |p| p.enforced(rule));
    println!();
    println!(
        "  A probe that succeeds closes the breaker, ejected or not; a host still bad is judged again on its next"
    );
    println!(
        "  interval and ejected again, for the backoff's next open period. Over {} s the pool found {} success-rate",
        HORIZON.as_secs(),
        found(OutlierRule::SuccessRate),
    );
    println!(
        "  and {} slow outliers and ejected {} and {}; {}, and {} reports missed their interval.",
        found(OutlierRule::Slow),
        ejected(OutlierRule::SuccessRate),
        ejected(OutlierRule::Slow),
        if pooled.pools.iter().any(|(_, p)| p.panicking) {
            "it panicked"
        } else {
            "it never panicked"
        },
        last.map_or(0, |p| p.late_reports),
    );
    println!(
        "  {} healthy hosts were ejected. Envoy's rule alone (Outliers::envoy()) ejects {} in the same run, all",
        healthy_out.len(),
        envoy.healthy_out().len()
    );
    println!("  by the success rate: while A is out of the figures, the pool's spread is the noise of 0.1 % failures");
    println!("  over 200 calls (0 or 1 failure, a stdev of ~0.2 points), and a host that fails 2 of its 200 calls falls");
    println!("  1.9 stdevs below the mean (envoyproxy/envoy#37723: healthy pods ejected, still at a factor of 5). The");
    println!("  default also asks for evidence: 2 failures in 200 against a pool failing 0.1 % are none; A's 16 are.");
    if !pooled.b_kept.is_empty() {
        println!(
            "  B, slow until {} s, was found {} more times after its probe and not ejected (the cap, {} of {}).",
            REPAIRED_AT.as_secs(),
            pooled.b_kept.len(),
            ejection_cap(),
            HOSTS
        );
    }

    let failed = checks(fixed, pooled, &envoy);
    println!();
    if failed.is_empty() {
        println!("  Checked: fixed thresholds never take A or B out; the pool ejects A (outlier) and B (slow_outlier)");
        println!(
            "  by {}, no healthy host (Envoy's rule alone does eject some), and never more than the cap.",
            secs(first_judged_by())
        );
    } else {
        for f in &failed {
            println!("  CHECK FAILED: {f}");
        }
    }
    failed.is_empty()
}

/// Envoy's cap: 10 % of the pool, at least one.
fn ejection_cap() -> u64 {
    (u64::from(HOSTS) / 10).max(1)
}

/// Who is out (OPEN or HALF_OPEN) at `at`, by the transitions before it.
fn out_at(run: &Run, at: Nanos) -> Vec<u32> {
    let mut out = vec![false; HOSTS as usize];
    for (h, t) in run.transitions.iter().filter(|(_, t)| t.at <= at) {
        out[*h as usize] = matches!(t.to, State::Open | State::HalfOpen);
    }
    (0..HOSTS).filter(|h| out[*h as usize]).collect()
}

/// The outliers run's pool, one row per interval.
fn show_intervals(run: &Run) {
    let mut t = Table::new(&[
        "at",
        "success-rate threshold",
        "slow limit",
        "found: rate / slow",
        "ejected",
        "out now",
    ])
    .left(&[5]);
    let mut before: Option<&OutlierPoolSnapshot> = None;
    for (at, p) in &run.pools {
        let found = |rule| p.detected(rule) - before.map_or(0, |b| b.detected(rule));
        let who: Vec<String> = out_at(run, *at)
            .into_iter()
            .map(|h| match h {
                A => "A".to_string(),
                B => "B".to_string(),
                h => name(h),
            })
            .collect();
        t.row(&[
            secs(*at),
            p.success_rate_threshold
                .map_or("–".into(), |v| format!("{:.2} %", v * 100.0)),
            p.slow_rate_limit
                .map_or("–".into(), |v| format!("{:.1} %", v * 100.0)),
            format!(
                "{} / {}",
                found(OutlierRule::SuccessRate),
                found(OutlierRule::Slow)
            ),
            format!("{} of {}", p.ejected, ejection_cap()),
            who.join(" "),
        ]);
        before = Some(p);
    }
    t.print();
}

/// Both are judged at their first verdict after 20 s, and their second
/// interval is evidence enough; allow the first second of that interval.
fn first_judged_by() -> Nanos {
    Nanos::from_duration(3 * INTERVAL + Duration::from_secs(1))
}

/// The scene's claims; the ones that do not hold.
fn checks(fixed: &Run, pooled: &Run, envoy: &Run) -> Vec<String> {
    let mut failed = Vec::new();
    let mut claim = |ok: bool, what: String| {
        if !ok {
            failed.push(what);
        }
    };
    for h in [A, B] {
        claim(
            fixed.trips(h).next().is_none(),
            format!("fixed thresholds took {} out: {}", name(h), trips(fixed, h)),
        );
    }
    claim(
        fixed.healthy_out().is_empty(),
        "fixed thresholds took a healthy host out".into(),
    );
    for (h, reason) in [(A, Reason::Outlier), (B, Reason::SlowOutlier)] {
        let first = pooled.trips(h).next();
        claim(
            first.is_some_and(|t| t.reason == reason && t.at <= first_judged_by()),
            format!(
                "{} should be ejected ({reason}) by {}: {}",
                name(h),
                secs(first_judged_by()),
                trips(pooled, h)
            ),
        );
    }
    let healthy = pooled.healthy_out();
    claim(
        healthy.is_empty(),
        format!("{} healthy hosts ejected by the default", healthy.len()),
    );
    // Why the evidence: Envoy's rule alone ejects healthy hosts of this
    // pool, always by their success rate.
    let bare = envoy.healthy_out();
    claim(
        !bare.is_empty() && bare.iter().all(|(_, t)| t.reason == Reason::Outlier),
        format!(
            "Envoy's rule alone ejected {} healthy hosts, not by their success rate only",
            bare.len()
        ),
    );
    claim(
        pooled
            .pools
            .iter()
            .all(|(_, p)| p.ejected <= ejection_cap()),
        format!("more than {} hosts ejected at once", ejection_cap()),
    );
    failed
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_scene_holds() {
        let fixed = super::run(None);
        let pooled = super::run(Some(super::outliers()));
        let envoy = super::run(Some(super::envoys()));
        assert_eq!(super::checks(&fixed, &pooled, &envoy), Vec::<String>::new());
    }
}
