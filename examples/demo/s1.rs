//! S1 ★ The slow dependency that never errors.
//!
//! The model, one event at a time on a [`ManualClock`]:
//!
//! - checkout callers arrive at a steady `load` calls/s (one every `1/load` s);
//! - each goes through the guard: the bulkhead first (if any), then the
//!   breaker (if any); a rejection answers the caller at once (0 ms) and takes
//!   no connection;
//! - an admitted caller needs one of `pool` connections. If none is free it
//!   waits in a FIFO queue, and gives up after `pool_wait` (the pool's acquire
//!   timeout); a caller that gives up never reached the catalog, so its breaker
//!   permit is dropped without a verdict (failfast counts that as *ignored*:
//!   our pool being full says nothing about the catalog);
//! - on a connection, the catalog answers 200 OK after `fast` (80 ms), or after
//!   `slow` (8 s) for calls that start between the bad deploy and the
//!   rollback. A client timeout `call_timeout` (10 s) would turn a longer call
//!   into a failure; at 8 s it never fires, so the error rate stays 0 %;
//! - the verdict is recorded when the answer arrives, with the answer's
//!   instant: the breaker learns that a call was slow only when it ends.
//!
//! By Little's law 50 connections held 8 s each carry 50 / 8 ≈ 6 calls/s.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use failfast::{
    Breaker, BreakerSnapshot, Bulkhead, BulkheadPermit, ManualClock, Nanos, Outcome, Permit,
    Reason, State, Transition,
};

use crate::sim::{Gauge, Latencies, Sim};
use crate::table::{dur, int, title, Table};

/// The incident's numbers.
pub struct Params {
    /// Calls per second offered by checkout.
    pub load: u64,
    /// Connections in checkout's pool to the catalog.
    pub pool: usize,
    /// In-flight cap of the bulkhead in front of the failfast breaker.
    pub bulkhead: usize,
    /// Arrivals stop here; the run then drains.
    pub horizon: Duration,
    /// The bad deploy: calls starting from here take `slow`.
    pub deploy_at: Duration,
    /// The rollback: calls starting from here take `fast` again.
    pub rollback_at: Duration,
    pub fast: Duration,
    pub slow: Duration,
    /// A caller gives up waiting for a connection after this.
    pub pool_wait: Duration,
    /// The client timeout on the catalog call.
    pub call_timeout: Duration,
    /// The failfast breaker's slow-call threshold.
    pub slow_threshold: Duration,
}

impl Params {
    pub fn new(load: u64, bulkhead: usize) -> Params {
        Params {
            load,
            pool: 50,
            bulkhead,
            horizon: Duration::from_secs(40),
            deploy_at: Duration::from_secs(5),
            rollback_at: Duration::from_secs(35),
            fast: Duration::from_millis(80),
            slow: Duration::from_secs(8),
            pool_wait: Duration::from_secs(1),
            call_timeout: Duration::from_secs(10),
            slow_threshold: Duration::from_millis(500),
        }
    }

    fn is_bad(&self, at: Nanos) -> bool {
        at >= Nanos::from_duration(self.deploy_at) && at < Nanos::from_duration(self.rollback_at)
    }
}

/// What stands between checkout and the catalog.
#[derive(Copy, Clone, PartialEq)]
enum Guard {
    Nothing,
    /// Opens on the failure rate only: ≥ 50 % of the last 20 calls, once 10 were seen.
    ErrorOnly,
    /// failfast: failure rate *or* slow-call rate (≥ 50 % of the last 20 calls
    /// took ≥ 500 ms, once 10 were seen), behind a bulkhead.
    SlowCall,
}

impl Guard {
    fn name(self) -> &'static str {
        match self {
            Guard::Nothing => "no breaker",
            Guard::ErrorOnly => "error-only breaker",
            Guard::SlowCall => "failfast + bulkhead",
        }
    }

    fn breaker(
        self,
        p: &Params,
        clock: &ManualClock,
        log: &TransitionLog,
    ) -> Option<Breaker<ManualClock>> {
        let builder = match self {
            Guard::Nothing => return None,
            Guard::ErrorOnly => Breaker::builder().failure_rate(0.5),
            Guard::SlowCall => Breaker::builder()
                .failure_rate(0.5)
                .slow_call_rate(0.5)
                .slow_call_threshold(p.slow_threshold),
        };
        let log = log.clone();
        let breaker = builder
            .count_window(20)
            .min_calls(10)
            .open_duration(Duration::from_secs(5))
            .backoff(2.0, Duration::from_secs(20))
            // A probe may take as long as the client timeout before its round
            // is superseded (the default, the open duration, is shorter than 8 s).
            .probe_lease(p.call_timeout)
            .count_calls(true)
            .observer(move |t: &Transition| log.lock().unwrap().push(*t))
            .build_with_clock(clock.clone())
            .expect("valid configuration");
        Some(breaker)
    }
}

type TransitionLog = Arc<Mutex<Vec<Transition>>>;

#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Caller `i` arrives.
    Arrive(usize),
    /// Caller `i` has waited `pool_wait` for a connection.
    GiveUp(usize),
    /// The catalog answers caller `i` (or its call times out).
    Answer(usize),
}

struct Caller<'g> {
    arrived: Nanos,
    connected: Nanos,
    waiting: bool,
    timed_out: bool,
    permit: Option<Permit<'g, ManualClock>>,
    slot: Option<BulkheadPermit<'g>>,
}

/// Counts for one simulated second (by arrival or event time).
#[derive(Default, Clone)]
struct Second {
    admitted: u64,
    rejected_breaker: u64,
    rejected_bulkhead: u64,
    gave_up: u64,
    answered: u64,
    /// Answers to calls admitted before the latest transition: the breaker ignores them.
    stale: u64,
    pool_peak: u64,
}

/// Everything one run measured.
struct Run {
    guard: Guard,
    offered: u64,
    admitted: u64,
    rejected_breaker: u64,
    rejected_bulkhead: u64,
    gave_up: u64,
    answered: u64,
    slow_answers: u64,
    errors: u64,
    pool: Gauge,
    latency: Latencies,
    end: Nanos,
    seconds: Vec<Second>,
    transitions: Vec<Transition>,
    snapshot: Option<BreakerSnapshot>,
}

impl Run {
    fn second(&mut self, at: Nanos) -> &mut Second {
        let i = (at.as_nanos() / 1_000_000_000) as usize;
        if self.seconds.len() <= i {
            self.seconds.resize(i + 1, Second::default());
        }
        &mut self.seconds[i]
    }

    fn pool_add(&mut self, at: Nanos, delta: i64) {
        self.pool.add(at, delta);
        let in_use = self.pool.value();
        let s = self.second(at);
        s.pool_peak = s.pool_peak.max(in_use);
    }
}

fn simulate(p: &Params, guard: Guard) -> Run {
    let clock = ManualClock::new();
    let log = TransitionLog::default();
    let breaker = guard.breaker(p, &clock, &log);
    let bulkhead = (guard == Guard::SlowCall).then(|| Bulkhead::new(p.bulkhead));

    let mut run = Run {
        guard,
        offered: 0,
        admitted: 0,
        rejected_breaker: 0,
        rejected_bulkhead: 0,
        gave_up: 0,
        answered: 0,
        slow_answers: 0,
        errors: 0,
        pool: Gauge::default(),
        latency: Latencies::default(),
        end: Nanos::ZERO,
        seconds: Vec::new(),
        transitions: Vec::new(),
        snapshot: None,
    };
    let arrivals = p.load * p.horizon.as_secs();
    let arrival = |i: usize| Nanos::from_nanos(i as u64 * 1_000_000_000 / p.load);
    let mut callers: Vec<Caller<'_>> = Vec::with_capacity(arrivals as usize);
    let mut queue: VecDeque<usize> = VecDeque::new();
    let mut sim = Sim::new(clock.clone());
    sim.at(arrival(0), Event::Arrive(0));

    // Caller `i` takes a free connection now.
    let connect = |sim: &mut Sim<Event>, run: &mut Run, caller: &mut Caller<'_>, i: usize| {
        let now = sim.now();
        run.pool_add(now, 1);
        caller.connected = now;
        let takes = if p.is_bad(now) { p.slow } else { p.fast };
        caller.timed_out = takes > p.call_timeout;
        sim.after(takes.min(p.call_timeout), Event::Answer(i));
    };

    while let Some((now, event)) = sim.next_event() {
        run.end = now;
        match event {
            Event::Arrive(i) => {
                if ((i + 1) as u64) < arrivals {
                    sim.at(arrival(i + 1), Event::Arrive(i + 1));
                }
                run.offered += 1;
                callers.push(Caller {
                    arrived: now,
                    connected: now,
                    waiting: false,
                    timed_out: false,
                    permit: None,
                    slot: None,
                });
                // The bulkhead first: its rejections never reach the breaker.
                let slot = match bulkhead.as_ref().map(Bulkhead::try_acquire) {
                    Some(Err(_)) => {
                        run.rejected_bulkhead += 1;
                        run.second(now).rejected_bulkhead += 1;
                        run.latency.push(Duration::ZERO);
                        continue;
                    }
                    Some(Ok(slot)) => Some(slot),
                    None => None,
                };
                let permit = match breaker.as_ref().map(|b| b.try_acquire_at(now)) {
                    Some(Err(_)) => {
                        run.rejected_breaker += 1;
                        run.second(now).rejected_breaker += 1;
                        run.latency.push(Duration::ZERO);
                        continue; // drops the bulkhead slot: nothing ran
                    }
                    Some(Ok(permit)) => Some(permit),
                    None => None,
                };
                run.admitted += 1;
                run.second(now).admitted += 1;
                let caller = &mut callers[i];
                caller.permit = permit;
                caller.slot = slot;
                if (run.pool.value() as usize) < p.pool {
                    connect(&mut sim, &mut run, caller, i);
                } else {
                    caller.waiting = true;
                    queue.push_back(i);
                    sim.after(p.pool_wait, Event::GiveUp(i));
                }
            }
            Event::GiveUp(i) => {
                let caller = &mut callers[i];
                if caller.waiting {
                    caller.waiting = false;
                    // Dropped without a verdict: ignored by the breaker.
                    caller.permit = None;
                    caller.slot = None;
                    run.gave_up += 1;
                    run.second(now).gave_up += 1;
                    run.latency
                        .push(now.saturating_duration_since(caller.arrived));
                }
            }
            Event::Answer(i) => {
                run.pool_add(now, -1);
                let caller = &mut callers[i];
                let outcome = if caller.timed_out {
                    run.errors += 1;
                    Outcome::Failure
                } else {
                    Outcome::Success
                };
                if let Some(permit) = caller.permit.take() {
                    let generation = breaker.as_ref().map(|b| b.snapshot_at(now).generation);
                    if generation != Some(permit.generation()) {
                        run.second(now).stale += 1;
                    }
                    let _ = permit.record_at(outcome, now);
                }
                caller.slot = None;
                run.answered += 1;
                run.second(now).answered += 1;
                if now.saturating_duration_since(caller.connected) >= p.slow_threshold {
                    run.slow_answers += 1;
                }
                run.latency
                    .push(now.saturating_duration_since(caller.arrived));
                // The freed connection goes to the longest-waiting caller still there.
                while let Some(j) = queue.pop_front() {
                    if callers[j].waiting {
                        callers[j].waiting = false;
                        connect(&mut sim, &mut run, &mut callers[j], j);
                        break;
                    }
                }
            }
        }
    }
    run.snapshot = breaker.as_ref().map(|b| b.snapshot_at(run.end));
    run.transitions = std::mem::take(&mut *log.lock().unwrap());
    run
}

/// Prints S1: the side-by-side table and the failfast time line.
pub fn show(p: &Params) {
    title("S1 ★ The slow dependency that never errors");
    println!(
        "  checkout → price catalog through a pool of {} connections, {} calls/s offered.",
        p.pool, p.load
    );
    println!(
        "  Healthy: 200 OK in {}. Bad deploy at t = {} s: 200 OK in {}, until the rollback at t = {} s.",
        dur(p.fast),
        p.deploy_at.as_secs(),
        dur(p.slow),
        p.rollback_at.as_secs()
    );
    println!(
        "  Little's law: {} connections × {} → {:.0} calls/s healthy, {:.2} calls/s while slow.",
        p.pool,
        dur(p.fast),
        p.pool as f64 / p.fast.as_secs_f64(),
        p.pool as f64 / p.slow.as_secs_f64()
    );
    println!(
        "  A caller gives up after waiting {} for a connection; the client timeout is {}.",
        dur(p.pool_wait),
        dur(p.call_timeout)
    );
    println!();

    let mut runs: Vec<Run> = [Guard::Nothing, Guard::ErrorOnly, Guard::SlowCall]
        .into_iter()
        .map(|g| simulate(p, g))
        .collect();

    let mut header = vec![format!(
        "{} s, {} calls",
        p.horizon.as_secs(),
        int(runs[0].offered)
    )];
    header.extend(runs.iter().map(|r| r.guard.name().to_string()));
    let mut t = Table::new(&header);
    let mut row = |label: &str, f: &mut dyn FnMut(&mut Run) -> String| {
        let mut cells = vec![label.to_string()];
        cells.extend(runs.iter_mut().map(&mut *f));
        t.row(&cells);
    };
    row("rejected at once by the breaker", &mut |r| {
        dash_if(r.guard == Guard::Nothing, int(r.rejected_breaker))
    });
    row(
        &format!("rejected at once by the bulkhead ({})", p.bulkhead),
        &mut |r| dash_if(r.guard != Guard::SlowCall, int(r.rejected_bulkhead)),
    );
    row(
        &format!(
            "gave up after {} waiting for a connection",
            dur(p.pool_wait)
        ),
        &mut |r| int(r.gave_up),
    );
    row("answered by the catalog (200 OK)", &mut |r| {
        int(r.answered - r.errors)
    });
    row(
        &format!("  of which slow (≥ {})", dur(p.slow_threshold)),
        &mut |r| int(r.slow_answers),
    );
    row("catalog error rate", &mut |r| {
        format!(
            "{:.0} %",
            100.0 * r.errors as f64 / r.answered.max(1) as f64
        )
    });
    row("pool connections in use: peak / mean", &mut |r| {
        format!("{} / {:.1}", r.pool.peak(), r.pool.mean(r.end))
    });
    row("caller latency p50 / p99", &mut |r| {
        format!(
            "{} / {}",
            dur(r.latency.quantile(0.50)),
            dur(r.latency.quantile(0.99))
        )
    });
    row("caller time spent waiting (sum)", &mut |r| {
        format!("{} s", int(r.latency.sum().as_secs()))
    });
    row("breaker opened", &mut |r| opened(r));
    t.print();
    let pct = |n: u64, r: &Run| 100.0 * n as f64 / r.offered.max(1) as f64;
    let (plain, ff) = (&runs[1], &runs[2]);
    println!();
    println!(
        "  Error-only: 0 % errors, so it never opens; {:.0} % of callers wait {} for a connection and give up.",
        pct(plain.gave_up, plain),
        dur(p.pool_wait)
    );
    println!(
        "  failfast: {:.0} % of callers are turned away at once (0 ms); at most {} of {} connections are ever held.",
        pct(ff.rejected_breaker + ff.rejected_bulkhead, ff),
        ff.pool.peak(),
        p.pool
    );
    println!();
    for r in &runs {
        cross_check(r);
    }

    timeline(p, &runs[2]);
}

fn dash_if(dash: bool, s: String) -> String {
    if dash {
        "–".into()
    } else {
        s
    }
}

/// When the breaker first opened, and how many times it tripped.
fn opened(r: &Run) -> String {
    if r.guard == Guard::Nothing {
        return "–".into();
    }
    let trips: Vec<&Transition> = r
        .transitions
        .iter()
        .filter(|t| t.to == State::Open)
        .collect();
    match trips.first() {
        None => "never".into(),
        Some(first) => format!("at t = {} ({} trips)", secs(first.at), trips.len()),
    }
}

/// Compares the simulation's own counts with the breaker's lifetime counters.
fn cross_check(r: &Run) {
    let Some(snap) = r.snapshot else { return };
    let Some(c) = snap.calls else { return };
    let verdicts = c.successes + c.failures + c.ignored;
    let agree = c.admitted == r.admitted
        && c.rejected == r.rejected_breaker
        && c.ignored == r.gave_up
        && c.successes + c.failures == r.answered
        && verdicts == c.admitted;
    println!(
        "  {:<19} snapshot: admitted {}, rejected {}, answered {}, ignored {} (gave up), slow {}, ends {} → {}",
        r.guard.name(),
        int(c.admitted),
        int(c.rejected),
        int(c.successes + c.failures),
        int(c.ignored),
        int(c.slow),
        snap.state,
        if agree { "matches the simulation" } else { "DISAGREES with the simulation" }
    );
}

fn secs(at: Nanos) -> String {
    format!("{:.3} s", at.as_duration().as_secs_f64())
}

/// The failfast run, second by second: state, admitted and rejected calls.
/// Runs of identical quiet seconds are folded into one row.
fn timeline(p: &Params, run: &Run) {
    println!();
    println!(
        "  Time line of the failfast run, per simulated second  (█ admitted  ▒ bulkhead full  ░ breaker rejected)"
    );
    println!();
    let scale = 30.0 / p.load as f64;
    let bar = |n: u64, c: char| c.to_string().repeat((n as f64 * scale).round() as usize);
    let mut rows: Vec<(u64, u64, [String; 5], Vec<String>)> = Vec::new();
    let mut state = State::Closed;
    let seconds = p.horizon.as_secs();
    for (s, sec) in (0..seconds).zip(run.seconds.iter()) {
        let (start, end) = (Nanos::from_secs(s), Nanos::from_secs(s + 1));
        let mut notes: Vec<String> = Vec::new();
        if p.deploy_at.as_secs() == s {
            notes.push(format!("bad deploy: 200 OK in {}", dur(p.slow)));
        }
        if p.rollback_at.as_secs() == s {
            notes.push(format!("rollback: 200 OK in {}", dur(p.fast)));
        }
        for tr in run
            .transitions
            .iter()
            .filter(|t| t.at >= start && t.at < end)
        {
            notes.push(format!("{} {}", secs(tr.at), why(tr)));
            state = tr.to;
        }
        if sec.stale > 0 {
            notes.push(format!("{} late answers ignored", sec.stale));
        }
        let cells = [
            state.as_str().to_uppercase(),
            int(sec.admitted),
            int(sec.rejected_breaker + sec.rejected_bulkhead),
            int(sec.pool_peak),
            format!(
                "{}{}{}",
                bar(sec.admitted, '█'),
                bar(sec.rejected_bulkhead, '▒'),
                bar(sec.rejected_breaker, '░')
            ),
        ];
        match rows.last_mut() {
            Some((_, last, prev, prev_notes))
                if *prev == cells && prev_notes.is_empty() && notes.is_empty() =>
            {
                *last = s;
            }
            _ => rows.push((s, s, cells, notes)),
        }
    }
    let mut t = Table::new(&[
        "t",
        "state",
        "admitted",
        "rejected",
        "conns",
        "",
        "what happened",
    ])
    .left(&[1, 5, 6]);
    for (first, last, cells, notes) in rows {
        let when = if first == last {
            format!("{first}s")
        } else {
            format!("{first}–{last}s")
        };
        let mut row = vec![when];
        row.extend(cells);
        row.push(notes.join("; "));
        t.row(&row);
    }
    t.print();
    println!(
        "  conns: peak pool connections in use that second; a rejected call takes none and answers in 0 ms.\n  \
         late answers: calls admitted before the trip that end after it; their verdicts change nothing."
    );
}

/// A transition in a few words.
fn why(t: &Transition) -> String {
    let w = t.window;
    let open = t.open_for.map_or(String::new(), dur);
    match t.reason {
        Reason::SlowCallRate => format!("trip: {} of {} calls slow, open {open}", w.slow, w.calls),
        Reason::FailureRate => format!(
            "trip: {} of {} calls failed, open {open}",
            w.failures, w.calls
        ),
        Reason::OpenElapsed => "next request is the probe".into(),
        Reason::ProbeSlow => format!("probe slow: reopen {open}"),
        Reason::ProbeFailed => format!("probe failed: reopen {open}"),
        Reason::ProbesSucceeded => "probe fast: close".into(),
        Reason::ProbeLeaseExpired => "probe lease expired: new probe".into(),
        other => other.as_str().replace('_', " "),
    }
}
