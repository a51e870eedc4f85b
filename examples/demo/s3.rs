//! S3 ★ Retry makes it worse.
//!
//! The model: 20 requests handled by 5 workers (5 at a time); each request
//! makes up to 3 attempts, 100 ms apart; every backend call times out after
//! 1 s. With failfast, each attempt first asks the breaker (a failure-rate
//! breaker judging once 5 calls were seen); a `Rejected` attempt is not
//! retried: the request fails at once, and the worker takes the next one.

use std::time::Duration;

use failfast::{Breaker, ManualClock, Nanos, Permit};

use crate::sim::{Latencies, Sim};
use crate::table::{dur, int, title, Table};

const REQUESTS: usize = 20;
const WORKERS: usize = 5;
const ATTEMPTS: u32 = 3;
const TIMEOUT: Duration = Duration::from_secs(1);
const BACKOFF: Duration = Duration::from_millis(100);

#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Worker `w` takes the next request, if any is left.
    Take(usize),
    /// Worker `w` makes an attempt.
    Attempt(usize),
    /// Worker `w`'s backend call times out.
    TimedOut(usize),
}

#[derive(Default)]
struct Worker<'b> {
    started: Nanos,
    attempts: u32,
    permit: Option<Permit<'b, ManualClock>>,
}

#[derive(Default)]
struct Run {
    backend_calls: u64,
    failed_after_timeouts: u64,
    rejected_after_timeouts: u64,
    rejected_at_once: u64,
    elapsed: Duration,
    latency: Latencies,
    admitted: u64,
    rejected: u64,
    /// The breaker's own counters, compared with the simulation's.
    check: Option<String>,
}

fn simulate(with_breaker: bool) -> Run {
    let clock = ManualClock::new();
    let breaker = with_breaker.then(|| {
        Breaker::builder()
            .failure_rate(0.5)
            .count_window(10)
            .min_calls(5)
            .open_duration(Duration::from_secs(30))
            .count_calls(true)
            .build_with_clock(clock.clone())
            .expect("valid configuration")
    });
    let mut run = Run::default();
    let mut workers: Vec<Worker<'_>> = (0..WORKERS).map(|_| Worker::default()).collect();
    let mut next_request = 0;
    let mut sim = Sim::new(clock);
    for w in 0..WORKERS {
        sim.at(Nanos::ZERO, Event::Take(w));
    }
    while let Some((now, event)) = sim.next_event() {
        match event {
            Event::Take(w) => {
                if next_request < REQUESTS {
                    next_request += 1;
                    workers[w].started = now;
                    workers[w].attempts = 0;
                    sim.at(now, Event::Attempt(w));
                }
            }
            Event::Attempt(w) => {
                let worker = &mut workers[w];
                match breaker.as_ref().map(|b| b.try_acquire_at(now)) {
                    Some(Err(_rejected)) => {
                        // Not retried: the breaker said the backend is down.
                        if worker.attempts == 0 {
                            run.rejected_at_once += 1;
                        } else {
                            run.rejected_after_timeouts += 1;
                        }
                        run.rejected += 1;
                        run.latency
                            .push(now.saturating_duration_since(worker.started));
                        run.elapsed = now.as_duration();
                        sim.at(now, Event::Take(w));
                        continue;
                    }
                    Some(Ok(permit)) => {
                        worker.permit = Some(permit);
                        run.admitted += 1;
                    }
                    None => {}
                }
                worker.attempts += 1;
                run.backend_calls += 1;
                sim.after(TIMEOUT, Event::TimedOut(w));
            }
            Event::TimedOut(w) => {
                let worker = &mut workers[w];
                if let Some(permit) = worker.permit.take() {
                    let _ = permit.failure_at(now);
                }
                if worker.attempts < ATTEMPTS {
                    sim.after(BACKOFF, Event::Attempt(w));
                } else {
                    run.failed_after_timeouts += 1;
                    run.latency
                        .push(now.saturating_duration_since(worker.started));
                    run.elapsed = now.as_duration();
                    sim.at(now, Event::Take(w));
                }
            }
        }
    }
    if let Some(b) = &breaker {
        let c = b.snapshot().calls.unwrap_or_default();
        let agree = c.admitted == run.admitted
            && c.rejected == run.rejected
            && c.failures == run.backend_calls;
        run.check = Some(format!(
            "  breaker snapshot: state {}, admitted {}, rejected {}, failures {} → {}",
            b.state(),
            c.admitted,
            c.rejected,
            c.failures,
            if agree {
                "matches the simulation"
            } else {
                "DISAGREES with the simulation"
            }
        ));
    }
    run
}

/// Prints S3: retry only vs retry with failfast.
pub fn show() {
    title("S3 ★ Retry makes it worse");
    println!(
        "  {REQUESTS} requests, {WORKERS} at a time; every backend call times out after {}; up to {ATTEMPTS} attempts, {} apart.",
        dur(TIMEOUT),
        dur(BACKOFF)
    );
    println!("  failfast: failure rate ≥ 50 % once 5 calls were seen; a rejected attempt is not retried.");
    println!();
    let mut only = simulate(false);
    let mut with = simulate(true);
    let mut t = Table::new(&["", "retry only", "retry + failfast"]);
    t.row(&[
        "backend calls (each held 1 s)",
        &int(only.backend_calls),
        &int(with.backend_calls),
    ]);
    t.row(&[
        "requests failed after 3 timeouts",
        &int(only.failed_after_timeouts),
        &int(with.failed_after_timeouts),
    ]);
    t.row(&[
        "requests failed: timeout, then retry rejected",
        &int(only.rejected_after_timeouts),
        &int(with.rejected_after_timeouts),
    ]);
    t.row(&[
        "requests rejected at once (no backend call)",
        &int(only.rejected_at_once),
        &int(with.rejected_at_once),
    ]);
    t.row(&["total elapsed", &dur(only.elapsed), &dur(with.elapsed)]);
    t.row(&[
        "request latency p50 / max".to_string(),
        format!(
            "{} / {}",
            dur(only.latency.quantile(0.5)),
            dur(only.latency.quantile(1.0))
        ),
        format!(
            "{} / {}",
            dur(with.latency.quantile(0.5)),
            dur(with.latency.quantile(1.0))
        ),
    ]);
    t.print();
    println!();
    if let Some(check) = &with.check {
        println!("{check}");
    }
    let better = with.backend_calls < only.backend_calls && with.elapsed < only.elapsed;
    println!(
        "  With failfast: {}× fewer backend calls, {:.1}× less time{}.",
        only.backend_calls / with.backend_calls.max(1),
        only.elapsed.as_secs_f64() / with.elapsed.as_secs_f64().max(1e-9),
        if better {
            ""
        } else {
            " (NOT strictly better: check the model)"
        }
    );
}
