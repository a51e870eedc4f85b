//! S3, second part: retries that cannot make it worse.
//!
//! The model: 200 requests/s offered for 60 s to one upstream that serves
//! 400 calls/s, one at a time in arrival order. From 10 s to 30 s its
//! capacity drops to 150 calls/s (below the offered load), then comes back.
//! Three upstreams, each run four ways:
//!
//! * **failing**: the upstream sheds what it cannot serve: a call that
//!   would wait more than 100 ms in its queue gets a 503 at once (5 ms),
//!   which costs it a quarter of a call;
//! * **slow**: it sheds nothing: calls queue, and a caller gives up after
//!   1 s (a timeout: a failure), while the upstream still serves the call
//!   it abandoned;
//! * **flaky**: it keeps its capacity, but from 10 s to 30 s 3 calls in 10
//!   fail at once: below the breaker's threshold, so it never opens.
//!
//! The callers: **retry only** (up to 3 attempts, 25–50 ms apart, no
//! breaker); **breaker only** (one attempt through a failure-rate breaker);
//! **retry + breaker** (3 attempts, each through the breaker; a rejection
//! is not retried); **retry + breaker + budget** (the same, retries through
//! [`Breaker::try_retry_at`] with a ratio budget of 20 % and a reserve of
//! 1 retry/s, small next to 200 requests/s so the ratio decides).
//!
//! Reported: upstream calls per offered request (over the run and over the
//! incident), requests that failed, and the time from the capacity's return
//! until every later second served at least 95 % of its requests.

use std::time::Duration;

use failfast::{Breaker, ManualClock, Nanos, Permit, RetryBudget};

use crate::sim::Sim;
use crate::table::{dur, int, Table};

/// Requests offered per second.
pub const OFFERED_PER_S: u64 = 200;
const RUN: Duration = Duration::from_secs(60);
const INCIDENT_START: f64 = 10.0;
const INCIDENT_END: f64 = 30.0;
const CAPACITY: f64 = 400.0;
const INCIDENT_CAPACITY: f64 = 150.0;
const ATTEMPTS: u32 = 3;
const TIMEOUT: Duration = Duration::from_secs(1);
const SHED_WAIT: f64 = 0.100;
const SHED_ANSWER: Duration = Duration::from_millis(5);
/// What refusing a call costs the upstream, in calls served: parsing it,
/// answering it.
const SHED_COST: f64 = 0.25;
/// The budget's share of first tries that may be retried.
pub const RATIO: f64 = 0.2;
/// The budget's reserve, retries per second.
pub const MIN_PER_SECOND: u32 = 1;
const TTL: Duration = Duration::from_secs(10);
/// A second counts as recovered when this share of its requests succeeded.
const RECOVERED: f64 = 0.95;

/// The upstream's incident.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Upstream {
    /// Loses capacity; sheds what it cannot serve with a fast 503.
    Failing,
    /// Loses capacity; queues, and callers time out.
    Slow,
    /// Keeps its capacity, but 3 calls in 10 fail (a 503 at once): fewer
    /// than the breaker's threshold, so it never opens.
    Flaky,
}

impl Upstream {
    pub const ALL: [Upstream; 3] = [Upstream::Failing, Upstream::Slow, Upstream::Flaky];
}

/// The caller's protection.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    RetryOnly,
    BreakerOnly,
    RetryBreaker,
    RetryBreakerBudget,
}

impl Caller {
    pub const ALL: [Caller; 4] = [
        Caller::RetryOnly,
        Caller::BreakerOnly,
        Caller::RetryBreaker,
        Caller::RetryBreakerBudget,
    ];

    fn name(self) -> &'static str {
        match self {
            Caller::RetryOnly => "retry only",
            Caller::BreakerOnly => "breaker only",
            Caller::RetryBreaker => "retry + breaker",
            Caller::RetryBreakerBudget => "retry + breaker + budget",
        }
    }

    fn attempts(self) -> u32 {
        if self == Caller::BreakerOnly {
            1
        } else {
            ATTEMPTS
        }
    }
}

/// What a run measured.
#[derive(Debug, Default)]
pub struct Run {
    pub offered: u64,
    pub upstream_calls: u64,
    pub offered_in_incident: u64,
    pub calls_in_incident: u64,
    pub failed: u64,
    /// From the capacity's return until every later second served ≥ 95 %
    /// of its requests; `None` if the run ended first.
    pub recovery: Option<Duration>,
    /// Retries the budget refused.
    pub budget_refusals: u64,
    /// Upstream calls that were first tries, and retries.
    pub first_tries: u64,
    pub retries: u64,
}

impl Run {
    pub fn calls_per_request(&self) -> f64 {
        self.upstream_calls as f64 / self.offered.max(1) as f64
    }

    pub fn calls_per_request_in_incident(&self) -> f64 {
        self.calls_in_incident as f64 / self.offered_in_incident.max(1) as f64
    }
}

#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The next request arrives.
    Arrive,
    /// Request `r` makes attempt `n` (1-based).
    Attempt(u32, u32),
    /// Request `r`'s attempt ends: answered in time, or not.
    Ended(u32, bool),
}

/// The upstream: one server, arrival order, capacity by time.
struct Server {
    busy_until: f64,
    incident_capacity: f64,
}

impl Server {
    fn capacity_at(&self, t: f64) -> f64 {
        if (INCIDENT_START..INCIDENT_END).contains(&t) {
            self.incident_capacity
        } else {
            CAPACITY
        }
    }
}

impl Server {
    /// When `work` more (1: a call served, [`SHED_COST`]: a call refused),
    /// queued at `now`, is done (seconds).
    fn serve(&mut self, now: f64, work: f64) -> f64 {
        let mut t = self.busy_until.max(now);
        let mut work = work;
        loop {
            let rate = self.capacity_at(t);
            let boundary = if t < INCIDENT_START {
                INCIDENT_START
            } else if t < INCIDENT_END {
                INCIDENT_END
            } else {
                f64::INFINITY
            };
            let can = (boundary - t) * rate;
            if can >= work {
                t += work / rate;
                break;
            }
            work -= can;
            t = boundary;
        }
        self.busy_until = t;
        t
    }

    fn wait_at(&self, now: f64) -> f64 {
        (self.busy_until - now).max(0.0)
    }
}

fn secs(t: Nanos) -> f64 {
    t.as_duration().as_secs_f64()
}

fn at(s: f64) -> Nanos {
    Nanos::from_duration(Duration::from_secs_f64(s))
}

/// A request in flight.
#[derive(Default)]
struct Request<'b> {
    arrived: Nanos,
    attempts: u32,
    permit: Option<Permit<'b, ManualClock>>,
}

/// Runs one upstream with one kind of caller.
pub fn simulate(upstream: Upstream, caller: Caller) -> Run {
    let clock = ManualClock::new();
    let breaker = (caller != Caller::RetryOnly).then(|| {
        let builder = Breaker::builder()
            .failure_rate(0.5)
            .count_window(100)
            .min_calls(20)
            .count_calls(true);
        let builder = if caller == Caller::RetryBreakerBudget {
            builder.retry_budget(RetryBudget::ratio(RATIO, TTL, MIN_PER_SECOND))
        } else {
            builder
        };
        builder
            .build_with_clock(clock.clone())
            .expect("valid configuration")
    });
    let total = OFFERED_PER_S * RUN.as_secs();
    let gap = Duration::from_nanos(1_000_000_000 / OFFERED_PER_S);
    let mut requests: Vec<Request<'_>> = Vec::with_capacity(total as usize);
    let seconds = RUN.as_secs() as usize;
    let mut served = vec![0u64; seconds];
    let mut run = Run::default();
    let mut server = Server {
        busy_until: 0.0,
        incident_capacity: if upstream == Upstream::Flaky {
            CAPACITY
        } else {
            INCIDENT_CAPACITY
        },
    };
    let mut sim = Sim::new(clock);
    sim.at(Nanos::ZERO, Event::Arrive);
    let in_incident = |t: Nanos| (INCIDENT_START..INCIDENT_END).contains(&secs(t));
    while let Some((now, event)) = sim.next_event() {
        match event {
            Event::Arrive => {
                let r = requests.len() as u32;
                requests.push(Request {
                    arrived: now,
                    attempts: 0,
                    permit: None,
                });
                run.offered += 1;
                if in_incident(now) {
                    run.offered_in_incident += 1;
                }
                if run.offered < total {
                    sim.after(gap, Event::Arrive);
                }
                sim.at(now, Event::Attempt(r, 1));
            }
            Event::Attempt(r, n) => {
                let req = &mut requests[r as usize];
                req.attempts = n;
                if let Some(b) = &breaker {
                    let admitted = if n == 1 {
                        b.try_acquire_at(now)
                    } else {
                        b.try_retry_at(now)
                    };
                    match admitted {
                        Ok(permit) => req.permit = Some(permit),
                        Err(rejected) => {
                            if rejected.reason() == failfast::RejectReason::RetryBudget {
                                run.budget_refusals += 1;
                            }
                            // Not retried: the request fails here.
                            run.failed += 1;
                            continue;
                        }
                    }
                }
                run.upstream_calls += 1;
                if n == 1 {
                    run.first_tries += 1;
                } else {
                    run.retries += 1;
                }
                if in_incident(now) {
                    run.calls_in_incident += 1;
                }
                let t = secs(now);
                let flaky =
                    upstream == Upstream::Flaky && in_incident(now) && run.upstream_calls % 10 < 3;
                let (end, answered) = match upstream {
                    _ if flaky => (now + SHED_ANSWER, false),
                    Upstream::Failing if server.wait_at(t) > SHED_WAIT => {
                        // Refusing costs the upstream a little too.
                        server.serve(t, SHED_COST);
                        (now + SHED_ANSWER, false)
                    }
                    _ => {
                        let done = server.serve(t, 1.0);
                        if done - t > TIMEOUT.as_secs_f64() {
                            (now + TIMEOUT, false)
                        } else {
                            (at(done).max(now), true)
                        }
                    }
                };
                sim.at(end, Event::Ended(r, answered));
            }
            Event::Ended(r, ok) => {
                let req = &mut requests[r as usize];
                if let Some(permit) = req.permit.take() {
                    let _ = if ok {
                        permit.success_at(now)
                    } else {
                        permit.failure_at(now)
                    };
                }
                if ok {
                    let second = req.arrived.as_duration().as_secs() as usize;
                    if second < seconds {
                        served[second] += 1;
                    }
                } else if req.attempts < caller.attempts() {
                    // A backoff of 25–50 ms, spread by the request's number.
                    let backoff = Duration::from_millis(25 + u64::from(r) * 7919 % 26);
                    sim.after(backoff, Event::Attempt(r, req.attempts + 1));
                } else {
                    run.failed += 1;
                }
            }
        }
    }
    run.recovery = recovery(&served);
    run
}

/// From the capacity's return until every later second served at least
/// [`RECOVERED`] of its requests (the last two seconds, whose requests may
/// still be in flight at the end, are not judged).
fn recovery(served: &[u64]) -> Option<Duration> {
    let judged = &served[..served.len() - 2];
    let start = INCIDENT_END as usize;
    let good = |n: &u64| *n as f64 >= RECOVERED * OFFERED_PER_S as f64;
    let first_of_good_tail = judged.iter().rposition(|n| !good(n)).map_or(0, |i| i + 1);
    if first_of_good_tail >= judged.len() {
        return None;
    }
    Some(Duration::from_secs(
        first_of_good_tail.saturating_sub(start) as u64,
    ))
}

/// Prints the second part of S3.
pub fn show() {
    println!();
    println!(
        "  And with a retry budget. {OFFERED_PER_S} requests/s offered for {}; the upstream serves {CAPACITY} calls/s, \
         {INCIDENT_CAPACITY} from {INCIDENT_START} s to {INCIDENT_END} s.",
        dur(RUN)
    );
    println!(
        "  Failing: it answers 503 to a call that would queue over 100 ms. Slow: it queues everything, \
         callers give up after {}.",
        dur(TIMEOUT)
    );
    println!("  Flaky: full capacity, but 3 calls in 10 fail from 10 s to 30 s.");
    println!(
        "  Callers: up to {ATTEMPTS} attempts 25–50 ms apart; the breaker opens at 50 % failures once 20 calls were seen."
    );
    println!(
        "  Budget: retries ≤ {:.0} % of first tries (TTL {}), plus a reserve of {MIN_PER_SECOND} retry/s.",
        RATIO * 100.0,
        dur(TTL)
    );
    let (mut most_run, mut most_incident) = (0.0f64, 0.0f64);
    for upstream in Upstream::ALL {
        println!();
        let runs: Vec<Run> = Caller::ALL.iter().map(|c| simulate(upstream, *c)).collect();
        most_run = most_run.max(runs[3].calls_per_request());
        most_incident = most_incident.max(runs[3].calls_per_request_in_incident());
        let mut header = vec![match upstream {
            Upstream::Failing => "failing upstream (sheds with 503)".to_string(),
            Upstream::Slow => "slow upstream (callers time out)".to_string(),
            Upstream::Flaky => "flaky upstream (30 % fail, full capacity)".to_string(),
        }];
        header.extend(Caller::ALL.iter().map(|c| c.name().to_string()));
        let mut t = Table::new(&header);
        let row = |t: &mut Table, name: &str, cell: &dyn Fn(&Run) -> String| {
            let mut cells = vec![name.to_string()];
            cells.extend(runs.iter().map(cell));
            t.row(&cells);
        };
        row(&mut t, "upstream calls per offered request", &|r| {
            format!("{:.2}", r.calls_per_request())
        });
        row(&mut t, "  … during the incident", &|r| {
            format!("{:.2}", r.calls_per_request_in_incident())
        });
        row(&mut t, "requests failed", &|r| int(r.failed));
        row(&mut t, "retries refused by the budget", &|r| {
            int(r.budget_refusals)
        });
        row(&mut t, "time to recover", &|r| {
            r.recovery.map_or("not in the run".to_string(), dur)
        });
        t.print();
    }
    println!();
    println!(
        "  With the budget the upstream saw at most {most_run:.3} calls per request over a run (the bound: {:.2}),",
        1.0 + RATIO
    );
    println!(
        "  {most_incident:.3} during an incident (first tries made before it still count for one TTL)."
    );
    println!("  Where the breaker opens (failing, slow) it cuts the retries first; where it cannot (flaky,");
    println!("  under its threshold) the budget does, at the price of the retries it refuses.");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The budget's bound, in both incidents: upstream calls ≤ (1 + ratio)
    /// × offered requests over the run (the reserve, 1 retry/s, is 0.5 %
    /// of the offered load and needs no room of its own here).
    #[test]
    fn the_budget_keeps_upstream_load_within_one_plus_its_ratio() {
        for upstream in Upstream::ALL {
            let budget = simulate(upstream, Caller::RetryBreakerBudget);
            assert!(
                budget.calls_per_request() <= 1.0 + RATIO,
                "{upstream:?}: {:.3} calls per request",
                budget.calls_per_request()
            );
            // The budget's own bound, reserve included: a TTL's worth of
            // reserve is there at any time, and one more per second.
            let reserve = u64::from(MIN_PER_SECOND) * (RUN + TTL).as_secs();
            assert!(
                budget.retries as f64 <= RATIO * budget.first_tries as f64 + reserve as f64,
                "{upstream:?}: {} retries for {} first tries",
                budget.retries,
                budget.first_tries
            );
            let retry_only = simulate(upstream, Caller::RetryOnly);
            // Without it, the incident's retries exceed that bound, and
            // where the breaker stays closed the budget is what cuts them.
            assert!(
                retry_only.calls_per_request_in_incident() > 1.0 + RATIO,
                "{upstream:?}: retry only, {:.3}",
                retry_only.calls_per_request_in_incident()
            );
        }
        let budget = simulate(Upstream::Flaky, Caller::RetryBreakerBudget);
        let unbudgeted = simulate(Upstream::Flaky, Caller::RetryBreaker);
        assert!(budget.budget_refusals > 0);
        assert!(
            budget.calls_in_incident < unbudgeted.calls_in_incident,
            "{} vs {}",
            budget.calls_in_incident,
            unbudgeted.calls_in_incident
        );
    }

    /// The runs count every offered request, once.
    #[test]
    fn every_request_is_offered_once() {
        let run = simulate(Upstream::Failing, Caller::RetryBreakerBudget);
        assert_eq!(run.offered, OFFERED_PER_S * RUN.as_secs());
        assert_eq!(run.offered_in_incident, OFFERED_PER_S * 20);
    }

    /// The numbers the README quotes.
    #[test]
    fn the_readme_numbers() {
        let most = Upstream::ALL
            .iter()
            .map(|u| simulate(*u, Caller::RetryBreakerBudget).calls_per_request())
            .fold(0.0, f64::max);
        assert_eq!(format!("{most:.2}"), "1.07");
        let slow = simulate(Upstream::Slow, Caller::RetryOnly);
        assert_eq!(format!("{:.2}", slow.calls_per_request()), "2.57");
        assert_eq!(slow.recovery, None);
    }
}
