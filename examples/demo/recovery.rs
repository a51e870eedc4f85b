//! Recovery ★ An upstream that comes back slowly: a ramp after the close, and
//! the upstream's own `Retry-After` (issue 27).
//!
//! The upstream, one event at a time on a [`ManualClock`]:
//!
//! - healthy, it has `workers` workers; a call holds one for a random service
//!   time (exponential, mean 50 ms, drawn from a seeded xorshift: the output
//!   is the same every run), so full capacity is `workers / 50 ms` calls/s. A
//!   call that finds every worker busy waits in a FIFO queue, so latency grows
//!   as the load nears capacity;
//! - it goes down at 5 s for 60 s: its load balancer, with no worker behind
//!   it, answers every call with a 503 in 5 ms;
//! - when it comes back, its workers return one at a time, evenly over 30 s
//!   (cold caches, pools refilling): capacity(t) = min(1, t / 30 s) × full;
//! - the callers' timeout is 1 s: a call not answered by then fails. The
//!   server drops a timed-out call that is still queued; one already on a
//!   worker runs to its end (wasted work). Calls beyond capacity fail this way.
//!
//! Part 1, **no ramp against a ramp**: 200 calls/s offered to an upstream of
//! 12 workers (240 calls/s) through one breaker: failure rate ≥ 50 % of the
//! last 100 calls, judged from 20; open 5 s, ×2 per trip in a row up to
//! 10 s; one probe, whose lease is the 1 s timeout. A rejected call is not
//! retried. With `ramp(30 s)` the breaker, once a probe closes it, admits
//! 10 % of calls rising linearly to 100 % over 30 s (Envoy's slow-start
//! curve). Everything is counted from the moment the upstream comes back.
//! The backoff cap (10 s) and the 240 calls/s were chosen so that the probe
//! that closes the breaker lands a few seconds into the warm-up (at a 20 s
//! cap it lands at +15 s, and the upstream catches up before anything times
//! out), and so that full capacity is not far above the load.
//!
//! Part 2, **1,000 clients that honour `Retry-After`**: client `i` calls
//! once a second at `i` ms past each second (1,000 calls/s, one call at a
//! time; the upstream has 75 workers, 1,500 calls/s); after a 503 it waits
//! what the 503's `Retry-After` says, after a rejection what its
//! `retry_after()` says (1 s when it says nothing), after a timeout or a
//! success it keeps its pace. Each breaker trips on 3 failures in a row and
//! opens 5 s, ×2 per trip in a row up to 60 s, with no jitter (the default):
//! jitter shortens the schedule's open periods but not a hinted one, and
//! leaving it off shows what the header alone does to the clients' timing.
//!
//! - **fixed**: the down upstream sends `Retry-After: 5`, and the client
//!   records a plain failure (`failure_at`);
//! - **hints**: it sends the downtime it has left (whole seconds, rounded
//!   up, as the header carries them), and the client passes it to the
//!   breaker with `record_hinted_at`: a trip opens for it, and the breaker's
//!   rejections report it in `retry_after`.
//!
//! Each runs with a breaker in each client (**own**: a process's own
//! breaker, as failfast is mostly used) and with one breaker shared by all
//! 1,000 (**shared**: a gateway). A last run adds part 1's `ramp(30 s)` to
//! the shared breaker with hints.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use failfast::{Breaker, ManualClock, Nanos, Outcome, Permit, RejectReason, State, Transition};

use crate::sim::{Latencies, Sim};
use crate::table::{dur, int, title, Table};

/// A worker's mean service time.
const SERVICE: Duration = Duration::from_millis(50);
/// The callers' timeout.
const TIMEOUT: Duration = Duration::from_secs(1);
/// How soon the down upstream's load balancer answers 503.
const REFUSED_AFTER: Duration = Duration::from_millis(5);
const DOWN_AT: Duration = Duration::from_secs(5);
const OUTAGE: Duration = Duration::from_secs(60);
/// The upstream's workers return evenly over this after the outage.
const WARM_UP: Duration = Duration::from_secs(30);

fn down_at() -> Nanos {
    Nanos::from_duration(DOWN_AT)
}

fn up_at() -> Nanos {
    Nanos::from_duration(DOWN_AT + OUTAGE)
}

#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Part 1: the `i`-th call of the steady load arrives.
    Arrive(u64),
    /// Part 2: client `c` makes its next call.
    Client(u32),
    /// The upstream dies: its workers are gone.
    Dies,
    /// One of the upstream's workers is back.
    WorkerBack,
    /// The down upstream's 503 to call `id` arrives.
    Refused(u32),
    /// A worker finished call `id`.
    Served(u32),
    /// Call `id`'s caller gives up.
    TimedOut(u32),
}

/// What became of a call at the upstream.
#[derive(Copy, Clone, PartialEq)]
enum Answer {
    /// 200 OK, this long after it reached the upstream.
    Ok(Duration),
    /// No answer within [`TIMEOUT`].
    TimedOut,
    /// 503 from the down upstream.
    Refused,
}

#[derive(Copy, Clone, PartialEq)]
enum Status {
    Waiting,
    Serving,
    Answered,
}

/// The upstream: workers, a FIFO queue, an outage and a slow return.
struct Upstream {
    full: u32,
    workers: u32,
    busy: u32,
    queue: VecDeque<u32>,
    reached: Vec<Nanos>,
    status: Vec<Status>,
    rng: u64,
}

impl Upstream {
    fn new(full: u32, sim: &mut Sim<Event>) -> Upstream {
        sim.at(down_at(), Event::Dies);
        for k in 1..=full {
            sim.at(up_at() + WARM_UP * k / full, Event::WorkerBack);
        }
        Upstream {
            full,
            workers: full,
            busy: 0,
            queue: VecDeque::new(),
            reached: Vec::new(),
            status: Vec::new(),
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }

    fn is_down(now: Nanos) -> bool {
        now >= down_at() && now < up_at()
    }

    /// An exponential service time of mean [`SERVICE`] (xorshift64*).
    fn service_time(&mut self) -> Duration {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let u = ((r >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        SERVICE.mul_f64(-u.ln())
    }

    /// A call reaches the upstream now; returns its id.
    fn reach(&mut self, sim: &mut Sim<Event>) -> u32 {
        let now = sim.now();
        let id = self.reached.len() as u32;
        self.reached.push(now);
        self.status.push(Status::Waiting);
        if Upstream::is_down(now) {
            sim.after(REFUSED_AFTER, Event::Refused(id));
            return id;
        }
        sim.after(TIMEOUT, Event::TimedOut(id));
        self.queue.push_back(id);
        self.dispatch(sim);
        id
    }

    /// Free workers take the oldest calls still waiting.
    fn dispatch(&mut self, sim: &mut Sim<Event>) {
        while self.busy < self.workers {
            let Some(id) = self.queue.pop_front() else {
                return;
            };
            if self.status[id as usize] == Status::Waiting {
                self.status[id as usize] = Status::Serving;
                self.busy += 1;
                let takes = self.service_time();
                sim.after(takes, Event::Served(id));
            }
        }
    }

    /// Handles one of the upstream's events; returns the answer a caller
    /// gets from it, if any.
    fn on(&mut self, sim: &mut Sim<Event>, event: Event) -> Option<(u32, Answer)> {
        let now = sim.now();
        let answer = match event {
            Event::Dies => {
                self.workers = 0;
                return None;
            }
            Event::WorkerBack => {
                self.workers = (self.workers + 1).min(self.full);
                self.dispatch(sim);
                return None;
            }
            Event::Refused(id) => (id, Answer::Refused),
            Event::Served(id) => {
                self.busy -= 1;
                self.dispatch(sim);
                if self.status[id as usize] != Status::Serving {
                    return None; // its caller gave up: wasted work
                }
                let took = now.saturating_duration_since(self.reached[id as usize]);
                (id, Answer::Ok(took))
            }
            Event::TimedOut(id) => {
                if self.status[id as usize] == Status::Answered {
                    return None;
                }
                (id, Answer::TimedOut)
            }
            Event::Arrive(_) | Event::Client(_) => return None,
        };
        self.status[answer.0 as usize] = Status::Answered;
        Some(answer)
    }
}

type TransitionLog = Arc<Mutex<Vec<Transition>>>;

// ===== Part 1: no ramp against a ramp =====

const P1_LOAD: u64 = 200;
const P1_WORKERS: u32 = 12;
const P1_HORIZON: Duration = Duration::from_secs(125);

/// Part 1's counts, from the moment the upstream came back.
#[derive(Default)]
struct RampRun {
    offered: u64,
    served: u64,
    failed: u64,
    rejected_open: u64,
    rejected_ramp: u64,
    latency: Latencies,
    transitions: Vec<Transition>,
    /// Per 5 s after the upstream came back: admitted, failed, rejected.
    buckets: Vec<[u64; 3]>,
}

impl RampRun {
    fn bucket(&mut self, at: Nanos) -> &mut [u64; 3] {
        let i = (at.saturating_duration_since(up_at()).as_secs() / 5) as usize;
        if self.buckets.len() <= i {
            self.buckets.resize(i + 1, [0; 3]);
        }
        &mut self.buckets[i]
    }

    /// Closed → Open after the upstream came back.
    fn retrips(&self) -> usize {
        self.after_up()
            .filter(|t| t.from == State::Closed && t.to == State::Open)
            .count()
    }

    /// HalfOpen → Open after the upstream came back.
    fn failed_probes(&self) -> usize {
        self.after_up()
            .filter(|t| t.from == State::HalfOpen && t.to == State::Open)
            .count()
    }

    /// The last close, if the breaker ended closed.
    fn closed_for_good(&self) -> Option<Nanos> {
        let last = self.transitions.last()?;
        (last.to == State::Closed).then_some(last.at)
    }

    fn after_up(&self) -> impl Iterator<Item = &Transition> {
        self.transitions.iter().filter(|t| t.at >= up_at())
    }
}

fn ramp_run(ramp: bool) -> RampRun {
    let clock = ManualClock::new();
    let log = TransitionLog::default();
    let mut builder = Breaker::builder()
        .failure_rate(0.5)
        .count_window(100)
        .min_calls(20)
        .open_duration(Duration::from_secs(5))
        .backoff(2.0, Duration::from_secs(10))
        .probe_lease(TIMEOUT)
        // A fixed id: it seeds which calls the ramp admits, so the output
        // is the same every run.
        .id(1);
    if ramp {
        builder = builder.ramp(WARM_UP);
    }
    let sink = log.clone();
    let breaker = builder
        .observer(move |t: &Transition| sink.lock().unwrap().push(*t))
        .build_with_clock(clock.clone())
        .expect("valid configuration");

    let mut sim = Sim::new(clock);
    let mut upstream = Upstream::new(P1_WORKERS, &mut sim);
    let mut run = RampRun::default();
    let arrivals = P1_LOAD * P1_HORIZON.as_secs();
    let arrival = |i: u64| Nanos::from_nanos(i * 1_000_000_000 / P1_LOAD);
    sim.at(arrival(0), Event::Arrive(0));
    let mut permits: Vec<Option<Permit<'_, ManualClock>>> = Vec::new();
    while let Some((now, event)) = sim.next_event() {
        let after_up = now >= up_at();
        if let Event::Arrive(i) = event {
            if i + 1 < arrivals {
                sim.at(arrival(i + 1), Event::Arrive(i + 1));
            }
            run.offered += u64::from(after_up);
            match breaker.try_acquire_at(now) {
                Err(rejected) => {
                    if after_up {
                        run.bucket(now)[2] += 1;
                        if rejected.reason() == RejectReason::Ramp {
                            run.rejected_ramp += 1;
                        } else {
                            run.rejected_open += 1;
                        }
                    }
                }
                Ok(permit) => {
                    if after_up {
                        run.bucket(now)[0] += 1;
                    }
                    let id = upstream.reach(&mut sim);
                    debug_assert_eq!(id as usize, permits.len());
                    permits.push(Some(permit));
                }
            }
            continue;
        }
        let Some((id, answer)) = upstream.on(&mut sim, event) else {
            continue;
        };
        let Some(permit) = permits[id as usize].take() else {
            continue;
        };
        let started = permit.started_at();
        let counted = started >= up_at();
        match answer {
            Answer::Ok(took) => {
                permit.success_at(now);
                if counted {
                    run.served += 1;
                    run.latency.push(took);
                }
            }
            Answer::TimedOut | Answer::Refused => {
                permit.failure_at(now);
                if counted {
                    run.failed += 1;
                    run.bucket(started)[1] += 1;
                    run.latency.push(now.saturating_duration_since(started));
                }
            }
        }
    }
    run.transitions = std::mem::take(&mut *log.lock().unwrap());
    run
}

// ===== Part 2: 1,000 clients that honour Retry-After =====

const CLIENTS: u32 = 1_000;
const P2_WORKERS: u32 = 75;
/// The clients stop calling 30 s after the upstream came back.
const P2_AFTER_UP: Duration = Duration::from_secs(30);
const FIXED_RETRY_AFTER: Duration = Duration::from_secs(5);

/// One way of running part 2.
#[derive(Copy, Clone)]
struct Clients {
    /// The upstream sends its real downtime left, and the clients pass it
    /// to the breaker; else `Retry-After: 5` and a plain failure.
    hints: bool,
    /// One breaker for all clients; else one in each.
    shared: bool,
    /// The breakers ramp after a close (part 1's).
    ramp: bool,
}

/// Part 2's counts.
#[derive(Default)]
struct HintRun {
    /// Calls that reached the upstream while it was down, per second of the outage.
    down_seconds: Vec<u64>,
    /// After it came back: calls served OK, calls that timed out.
    served_after: u64,
    failed_after: u64,
    /// The first call served OK after it came back.
    first_ok: Option<Nanos>,
    /// Calls that reached it in its first second back.
    first_second: u64,
    rejected: u64,
    /// Closed → Open after it came back, over all the run's breakers.
    retrips: u64,
}

impl HintRun {
    fn reached_down(&self) -> u64 {
        self.down_seconds.iter().sum()
    }

    /// Bursts of calls to the down upstream: runs of seconds with calls,
    /// separated by quiet ones.
    fn waves(&self) -> usize {
        let busy: Vec<bool> = self.down_seconds.iter().map(|n| *n > 0).collect();
        busy.iter()
            .enumerate()
            .filter(|(i, b)| **b && (*i == 0 || !busy[i - 1]))
            .count()
    }
}

fn hint_run(v: Clients) -> HintRun {
    let clock = ManualClock::new();
    let retrips = Arc::new(AtomicU64::new(0));
    let breakers: Vec<Breaker<ManualClock>> = (0..if v.shared { 1 } else { CLIENTS })
        .map(|c| {
            let count = retrips.clone();
            let builder = Breaker::builder()
                .observer(move |t: &Transition| {
                    if t.from == State::Closed && t.to == State::Open && t.at >= up_at() {
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                })
                .consecutive_failures(3)
                .open_duration(Duration::from_secs(5))
                .backoff(2.0, Duration::from_secs(60))
                .probe_lease(TIMEOUT)
                // Fixed ids: reproducible ramps (and no two alike).
                .id(c + 1);
            let builder = if v.ramp {
                builder.ramp(WARM_UP)
            } else {
                builder
            };
            // Hints are opt-in: the breakers that are given them take them.
            let builder = if v.hints { builder.hints() } else { builder };
            builder
                .build_with_clock(clock.clone())
                .expect("valid configuration")
        })
        .collect();
    let mut sim = Sim::new(clock);
    let mut upstream = Upstream::new(P2_WORKERS, &mut sim);
    let mut run = HintRun {
        down_seconds: vec![0; OUTAGE.as_secs() as usize],
        ..HintRun::default()
    };
    let stop = up_at() + P2_AFTER_UP;
    for c in 0..CLIENTS {
        sim.at(Nanos::from_millis(u64::from(c)), Event::Client(c));
    }
    let mut calls: Vec<Option<(Permit<'_, ManualClock>, u32)>> = Vec::new();
    while let Some((now, event)) = sim.next_event() {
        // Client `c` calls again `after` from now, if the run is not over.
        let again = |sim: &mut Sim<Event>, c: u32, after: Duration| {
            if now + after < stop {
                sim.after(after, Event::Client(c));
            }
        };
        if let Event::Client(c) = event {
            let breaker = &breakers[if v.shared { 0 } else { c as usize }];
            match breaker.try_acquire_at(now) {
                Err(rejected) => {
                    run.rejected += 1;
                    let wait = rejected.retry_after().unwrap_or(Duration::from_secs(1));
                    again(&mut sim, c, wait);
                }
                Ok(permit) => {
                    if Upstream::is_down(now) {
                        let second = now.saturating_duration_since(down_at()).as_secs();
                        run.down_seconds[second as usize] += 1;
                    } else if now >= up_at() && now < up_at() + Duration::from_secs(1) {
                        run.first_second += 1;
                    }
                    let id = upstream.reach(&mut sim);
                    debug_assert_eq!(id as usize, calls.len());
                    calls.push(Some((permit, c)));
                }
            }
            continue;
        }
        let Some((id, answer)) = upstream.on(&mut sim, event) else {
            continue;
        };
        let Some((permit, c)) = calls[id as usize].take() else {
            continue;
        };
        let started = permit.started_at();
        // The usual pace: one call a second.
        let pace = (started + Duration::from_secs(1)).saturating_duration_since(now);
        match answer {
            Answer::Ok(_) => {
                permit.success_at(now);
                if started >= up_at() {
                    run.served_after += 1;
                    run.first_ok.get_or_insert(now);
                }
                again(&mut sim, c, pace);
            }
            Answer::TimedOut => {
                permit.failure_at(now);
                if started >= up_at() {
                    run.failed_after += 1;
                }
                again(&mut sim, c, pace);
            }
            Answer::Refused => {
                let retry_after = if v.hints {
                    // Delta-seconds, rounded up.
                    let left = up_at().saturating_duration_since(now);
                    Duration::from_secs(left.as_secs() + u64::from(left.subsec_nanos() > 0))
                } else {
                    FIXED_RETRY_AFTER
                };
                if v.hints {
                    permit.record_hinted_at(Outcome::Failure, Some(retry_after), now);
                } else {
                    permit.failure_at(now);
                }
                again(&mut sim, c, retry_after);
            }
        }
    }
    run.retrips = retrips.load(Ordering::Relaxed);
    run
}

// ===== Printing =====

/// Prints the recovery scene: part 1 (the ramp) and part 2 (the hints).
pub fn show() {
    title("Recovery ★ An upstream that comes back slowly: a ramp after the close, and its own Retry-After");
    println!(
        "  The upstream goes down at t = {} s for {} s (a 503 in {}), then its workers return one at a time over {} s:",
        DOWN_AT.as_secs(),
        OUTAGE.as_secs(),
        dur(REFUSED_AFTER),
        WARM_UP.as_secs()
    );
    println!(
        "  capacity(t) = min(1, t / {} s) × full. A call holds a worker {} on average (random, seeded); calls beyond",
        WARM_UP.as_secs(),
        dur(SERVICE)
    );
    println!(
        "  capacity queue, and a call not answered within {} fails (the callers' timeout).",
        dur(TIMEOUT)
    );
    show_ramp();
    show_hints();
}

fn full_capacity(workers: u32) -> f64 {
    f64::from(workers) / SERVICE.as_secs_f64()
}

/// Capacity at `at` after the upstream came back, in calls/s.
fn capacity(workers: u32, at: Duration) -> f64 {
    (at.as_secs_f64() / WARM_UP.as_secs_f64()).min(1.0) * full_capacity(workers)
}

fn since_up(at: Nanos) -> String {
    format!("+{}", dur(at.saturating_duration_since(up_at())))
}

fn show_ramp() {
    println!();
    println!(
        "  Part 1 — no ramp against ramp(30 s). {} calls/s offered; full capacity {:.0} calls/s ({} workers). One breaker:",
        P1_LOAD,
        full_capacity(P1_WORKERS),
        P1_WORKERS
    );
    println!("  failure rate ≥ 50 % of the last 100 calls (judged from 20), open 5 s, ×2 per trip in a row up to 10 s.");
    println!("  Look at the trips after it closed and the calls that failed: without a ramp the breaker closes onto an");
    println!("  upstream that can take a fraction of the load.");
    println!();
    let mut runs = [ramp_run(false), ramp_run(true)];
    let after = P1_HORIZON.saturating_sub(DOWN_AT + OUTAGE);
    let mut t = Table::new(&[
        format!(
            "{} s after the upstream came back, {} calls",
            after.as_secs(),
            int(runs[0].offered)
        ),
        "no ramp".to_string(),
        "ramp(30 s)".to_string(),
    ]);
    let mut row = |label: &str, f: &dyn Fn(&mut RampRun) -> String| {
        let cells: Vec<String> = std::iter::once(label.to_string())
            .chain(runs.iter_mut().map(f))
            .collect();
        t.row(&cells);
    };
    row("first close", &|r| {
        r.after_up()
            .find(|t| t.to == State::Closed)
            .map_or("never".into(), |t| since_up(t.at))
    });
    row("trips after a close (closed → open)", &|r| {
        r.retrips().to_string()
    });
    row("probes that failed", &|r| r.failed_probes().to_string());
    row("closed for good from", &|r| {
        r.closed_for_good().map_or("never".into(), since_up)
    });
    row("calls that reached the upstream and failed", &|r| {
        int(r.failed)
    });
    row("calls served OK", &|r| int(r.served));
    row(
        "calls rejected: open / half-open",
        &|r| int(r.rejected_open),
    );
    row("calls rejected: ramp", &|r| int(r.rejected_ramp));
    row("latency of admitted calls p50 / p99", &|r| {
        format!(
            "{} / {}",
            dur(r.latency.quantile(0.5)),
            dur(r.latency.quantile(0.99))
        )
    });
    t.print();
    println!();
    // Per 5 s after the upstream came back, until both runs are steady.
    let mut t = Table::new(&[
        "after it came back",
        "capacity",
        "no ramp: admitted",
        "failed",
        "rejected",
        "ramp: admitted",
        "failed",
        "rejected",
    ]);
    let buckets = runs.iter().map(|r| r.buckets.len()).max().unwrap_or(0);
    for b in 0..buckets.min(9) {
        let from = Duration::from_secs(5 * b as u64);
        let mut row = vec![
            format!("+{}–{} s", from.as_secs(), from.as_secs() + 5),
            format!("{:.0}/s", capacity(P1_WORKERS, from)),
        ];
        for r in &runs {
            let c = r.buckets.get(b).copied().unwrap_or_default();
            row.extend(c.iter().map(|n| int(*n)));
        }
        t.row(&row);
    }
    t.print();
    println!("  capacity: at the start of the 5 s; failed: of the calls admitted in those 5 s.");
    let [plain, ramped] = &runs;
    let first_close = plain
        .after_up()
        .find(|t| t.to == State::Closed)
        .map_or(Duration::ZERO, |t| t.at.saturating_duration_since(up_at()));
    println!(
        "  No ramp: the probe at {} finds it at {:.0} calls/s and closes; all {} calls/s follow, it trips {} more times",
        since_up(up_at() + first_close),
        capacity(P1_WORKERS, first_close),
        P1_LOAD,
        plain.retrips()
    );
    let steady = if ramped.retrips() == 0 && ramped.failed < plain.failed {
        "it closes once and stays closed"
    } else {
        "NOT fewer trips and failures: check the model"
    };
    println!(
        "  and {} calls time out. ramp(30 s): {steady}; {} failed, p99 {} against {}.",
        int(plain.failed),
        int(ramped.failed),
        dur(runs[1].latency.quantile(0.99)),
        dur(runs[0].latency.quantile(0.99)),
    );
}

fn show_hints() {
    println!();
    println!("  Part 2 — 1,000 clients that honour Retry-After: a fixed header against hints. Client i calls once a second");
    println!("  at i ms past it (1,000 calls/s; full capacity 1,500 calls/s) and waits what a 503's Retry-After or a");
    println!("  rejection's retry_after says. Fixed: the down upstream sends Retry-After: 5, and the client records a plain");
    println!("  failure. Hints: it sends the downtime left, and the client passes it with record_hinted_at. Own: a breaker");
    println!("  in each client; shared: one for all 1,000 (a gateway). Breakers: 3 failures in a row, open 5 s, ×2 per trip");
    println!("  in a row up to 60 s, no jitter. Look at the calls that reach the down upstream, and whether they come in waves.");
    println!();
    let variant = |hints, shared| Clients {
        hints,
        shared,
        ramp: false,
    };
    let runs = [
        hint_run(variant(false, false)),
        hint_run(variant(true, false)),
        hint_run(variant(false, true)),
        hint_run(variant(true, true)),
    ];
    let names = [
        "own: fixed 5 s",
        "own: hints",
        "shared: fixed 5 s",
        "shared: hints",
    ];
    let mut t = Table::new(&std::iter::once("").chain(names).collect::<Vec<_>>());
    let mut row = |label: &str, f: &dyn Fn(&HintRun) -> String| {
        let cells: Vec<String> = std::iter::once(label.to_string())
            .chain(runs.iter().map(f))
            .collect();
        t.row(&cells);
    };
    row("calls that reached the upstream while down", &|r| {
        int(r.reached_down())
    });
    row("  in its busiest second", &|r| {
        int(r.down_seconds.iter().copied().max().unwrap_or(0))
    });
    row("  waves (bursts between quiet seconds)", &|r| {
        r.waves().to_string()
    });
    row("calls that reached it in its first second back", &|r| {
        int(r.first_second)
    });
    row("first call served OK after it came back", &|r| {
        r.first_ok.map_or("never".into(), since_up)
    });
    row(
        &format!(
            "calls served OK / timed out in its first {} s back",
            P2_AFTER_UP.as_secs()
        ),
        &|r| format!("{} / {}", int(r.served_after), int(r.failed_after)),
    );
    row("trips after it came back (closed → open)", &|r| {
        int(r.retrips)
    });
    row("rejections by the breaker(s)", &|r| int(r.rejected));
    t.print();
    println!();
    println!("  Calls that reached the down upstream, per 5 s of the outage:");
    println!();
    let mut t = Table::new(&std::iter::once("outage").chain(names).collect::<Vec<_>>());
    for b in 0..OUTAGE.as_secs() as usize / 5 {
        let mut row = vec![format!("{}–{} s", 5 * b, 5 * b + 5)];
        for r in &runs {
            row.push(int(r.down_seconds[5 * b..5 * b + 5].iter().sum::<u64>()));
        }
        t.row(&row);
    }
    t.print();
    let ramped = hint_run(Clients {
        hints: true,
        shared: true,
        ramp: true,
    });
    let [own_fixed, own_hints, shared_fixed, shared_hints] = &runs;
    println!();
    let max = |r: &HintRun| r.down_seconds.iter().copied().max().unwrap_or(0);
    println!(
        "  Fixed, own breakers: the first 503s fall within one second, so the retries do too: {} waves of up to {}",
        own_fixed.waves(),
        int(max(own_fixed))
    );
    println!("  calls, every 5 s until each client's breaker opens, then on its doubling schedule. Hints: one call per");
    println!(
        "  client, then none until it is back ({} against {}). Shared: the calls before the trip, then only probes,",
        int(own_hints.reached_down()),
        int(own_fixed.reached_down()),
    );
    println!(
        "  and none with hints ({} against {}).",
        int(shared_hints.reached_down()),
        int(shared_fixed.reached_down())
    );
    println!(
        "  Hints also bring everyone back the moment it is up (first OK at {} against {}), at a few % of",
        own_hints.first_ok.map_or("never".into(), since_up),
        own_fixed.first_ok.map_or("never".into(), since_up),
    );
    println!(
        "  capacity: own breakers get {} calls served in its first {} s back ({} with the fixed header), and",
        int(own_hints.served_after),
        P2_AFTER_UP.as_secs(),
        int(own_fixed.served_after),
    );
    println!(
        "  {} time out. Every rejection of the shared breaker names the same instant, so its clients come back",
        int(own_hints.failed_after)
    );
    println!(
        "  together; it closes onto all of them and trips again, {} ({} served, {} timed out). With ramp(30 s) as",
        times(shared_hints.retrips),
        int(shared_hints.served_after),
        int(shared_hints.failed_after),
    );
    println!(
        "  well it trips {}: {} served, {} timed out.",
        times(ramped.retrips),
        int(ramped.served_after),
        int(ramped.failed_after),
    );
}

/// `once`, `twice`, `3 times`.
fn times(n: u64) -> String {
    match n {
        1 => "once".into(),
        2 => "twice".into(),
        n => format!("{n} times"),
    }
}
