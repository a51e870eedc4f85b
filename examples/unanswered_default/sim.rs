//! The simulation behind the unanswered rule's default: callers of one
//! upstream through one breaker, on a [`ManualClock`], one event at a time.
//!
//! Calls arrive as a Poisson stream. Each is admitted with a timed permit
//! (`try_acquire_at`, as the tower layers, `call_async` and the reqwest
//! middleware admit), then either its answer comes (a success, at the
//! upstream's latency) or its client gives up first (the permit is dropped
//! at the client's patience, with the clock set to that instant). A hung
//! upstream never answers. Numbers come from a seeded splitmix64, so every
//! run of a scenario is the same.
//!
//! Shared by `examples/unanswered_default` (the table the default was chosen
//! from) and `tests/unanswered_default.rs` (which pins the numbers the docs
//! quote).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use failfast::{Builder, ManualClock, Nanos, Permit, Reason, Transition};

/// How long the upstream takes to answer.
#[derive(Clone, Copy, Debug)]
pub enum Latency {
    /// Never answers.
    Hung,
    /// Log-normal: `median` and the σ of its logarithm.
    LogNormal { median: Duration, sigma: f64 },
}

/// How long each client waits for the answer.
#[derive(Clone, Copy, Debug)]
pub enum Patience {
    /// Every client gives up after this long.
    Fixed(Duration),
    /// A share of clients (`impatient`, in [0, 1]) gives up at a moment
    /// drawn uniformly in `[0, within)`; the others wait for the answer.
    Cancels { impatient: f64, within: Duration },
}

/// One traffic pattern.
#[derive(Clone, Copy, Debug)]
pub struct Scenario {
    /// Calls offered per second (a Poisson stream).
    pub rate: f64,
    /// Calls offered in all.
    pub calls: u64,
    pub latency: Latency,
    pub patience: Patience,
    /// A pause of the upstream (a stop-the-world collection, a failover):
    /// from `.0` after the first call, for `.1`, it answers nothing; the
    /// answers due meanwhile all come at its end.
    pub stall: Option<(Duration, Duration)>,
    /// Stop at the first trip (a hung upstream: how soon is it seen?).
    pub stop_at_trip: bool,
}

/// What a run saw.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Seen {
    /// Calls admitted: each one reached the upstream.
    pub reached: u64,
    /// Calls answered.
    pub answered: u64,
    /// Calls whose client gave up first.
    pub gave_up: u64,
    /// Closed → Open transitions for `Reason::Unresponsive`.
    pub unresponsive: u64,
    /// Every other transition out of Closed.
    pub other_trips: u64,
    /// When the first trip happened, from the first call.
    pub first_trip: Option<Duration>,
}

/// A deterministic stream of numbers (splitmix64).
pub struct Draws(u64);

impl Draws {
    pub fn new(seed: u64) -> Draws {
        Draws(seed)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Exponential with this mean.
    fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.uniform()).ln()
    }

    /// Standard normal (Box–Muller).
    fn normal(&mut self) -> f64 {
        let u = 1.0 - self.uniform();
        let v = self.uniform();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

fn secs(d: f64) -> Duration {
    Duration::from_secs_f64(d.max(0.0))
}

/// The events of a run, in time order (ties: in the order scheduled).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Arrive,
    Answer(u64),
    GiveUp(u64),
}

/// Runs `scenario` against a breaker built from `builder` (its observer is
/// replaced by the run's counter) on a fresh manual clock.
pub fn run(builder: Builder, scenario: &Scenario, seed: u64) -> Seen {
    let unresponsive = Arc::new(AtomicU64::new(0));
    let other = Arc::new(AtomicU64::new(0));
    let first = Arc::new(AtomicU64::new(u64::MAX));
    let (u, o, f) = (unresponsive.clone(), other.clone(), first.clone());
    let clock = ManualClock::new();
    let breaker = builder
        .observer(move |t: &Transition| {
            if t.to != failfast::State::Open || t.from == failfast::State::HalfOpen {
                return;
            }
            if t.reason == Reason::Unresponsive {
                u.fetch_add(1, Ordering::Relaxed);
            } else {
                o.fetch_add(1, Ordering::Relaxed);
            }
            let _ = f.compare_exchange(
                u64::MAX,
                t.at.as_nanos(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        })
        .build_with_clock(clock.clone())
        .expect("a valid configuration");
    let mut draws = Draws::new(seed);
    let mut queue: BinaryHeap<Reverse<(Nanos, u64, Event)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut schedule = |queue: &mut BinaryHeap<_>, at: Nanos, e: Event| {
        seq += 1;
        queue.push(Reverse((at, seq, e)));
    };
    let mut in_flight: HashMap<u64, Permit<'_, ManualClock>> = HashMap::new();
    let mut seen = Seen::default();
    let mut offered = 0u64;
    let start = Nanos::from_millis(1);
    schedule(&mut queue, start, Event::Arrive);
    while let Some(Reverse((now, _, event))) = queue.pop() {
        clock.set(now);
        match event {
            Event::Arrive => {
                offered += 1;
                let id = offered;
                if offered < scenario.calls {
                    let next = now + secs(draws.exponential(1.0 / scenario.rate));
                    schedule(&mut queue, next, Event::Arrive);
                }
                let Ok(permit) = breaker.try_acquire_at(now) else {
                    continue;
                };
                seen.reached += 1;
                let answer = match scenario.latency {
                    Latency::Hung => None,
                    Latency::LogNormal { median, sigma } => {
                        Some(secs(median.as_secs_f64() * (sigma * draws.normal()).exp()))
                    }
                };
                let answer = match (answer, scenario.stall) {
                    (Some(a), Some((from, length))) => {
                        let (from, to) = (start + from, start + from + length);
                        let due = now + a;
                        Some(if due >= from && due < to {
                            to.saturating_duration_since(now)
                        } else {
                            a
                        })
                    }
                    (a, _) => a,
                };
                let patience = match scenario.patience {
                    Patience::Fixed(p) => Some(p),
                    Patience::Cancels { impatient, within } => (draws.uniform() < impatient)
                        .then(|| secs(within.as_secs_f64() * draws.uniform())),
                };
                match (answer, patience) {
                    (Some(a), Some(p)) if p < a => schedule(&mut queue, now + p, Event::GiveUp(id)),
                    (Some(a), _) => schedule(&mut queue, now + a, Event::Answer(id)),
                    (None, Some(p)) => schedule(&mut queue, now + p, Event::GiveUp(id)),
                    (None, None) => {} // a client that waits for ever on a hung upstream
                }
                in_flight.insert(id, permit);
            }
            Event::Answer(id) => {
                if let Some(permit) = in_flight.remove(&id) {
                    seen.answered += 1;
                    let _ = permit.success_at(now);
                }
            }
            Event::GiveUp(id) => {
                if let Some(permit) = in_flight.remove(&id) {
                    seen.gave_up += 1;
                    drop(permit); // the drop reads the clock: `now`
                }
            }
        }
        if scenario.stop_at_trip && first.load(Ordering::Relaxed) != u64::MAX {
            break;
        }
    }
    // The clients still waiting give up at the end (after every count).
    for (_, permit) in in_flight.drain() {
        permit.ignore();
    }
    seen.unresponsive = unresponsive.load(Ordering::Relaxed);
    seen.other_trips = other.load(Ordering::Relaxed);
    seen.first_trip = match first.load(Ordering::Relaxed) {
        u64::MAX => None,
        at => Some(Duration::from_nanos(at - start.as_nanos())),
    };
    seen
}

/// A hung upstream behind clients that all give up after `patience`,
/// offered `rate` calls a second: stops at the first trip, or after a
/// minute of calls.
pub fn hung(rate: f64, patience: Duration) -> Scenario {
    Scenario {
        rate,
        calls: (rate * 60.0) as u64,
        latency: Latency::Hung,
        patience: Patience::Fixed(patience),
        stall: None,
        stop_at_trip: true,
    }
}

/// The first control: a healthy upstream (median 50 ms, σ 1: p99 0.5 s,
/// p99.9 1.1 s) at 200 calls a second, whose clients are impatient: 30 %
/// of them give up at a random moment within 1 s.
pub fn healthy(calls: u64) -> Scenario {
    Scenario {
        rate: 200.0,
        calls,
        latency: Latency::LogNormal {
            median: Duration::from_millis(50),
            sigma: 1.0,
        },
        patience: Patience::Cancels {
            impatient: 0.3,
            within: Duration::from_secs(1),
        },
        stall: None,
        stop_at_trip: false,
    }
}

/// The first control, at its hardest: a healthy upstream whose every
/// client gives up after `patience` (a hedged request's loser is cancelled
/// about then), so the slower calls are all dropped unanswered.
pub fn healthy_fixed(calls: u64, patience: Duration) -> Scenario {
    Scenario {
        rate: 200.0,
        calls,
        latency: Latency::LogNormal {
            median: Duration::from_millis(50),
            sigma: 1.0,
        },
        patience: Patience::Fixed(patience),
        stall: None,
        stop_at_trip: false,
    }
}

/// The second control: a slow upstream that answers (median 1.5 s, σ 0.3:
/// 0.75 s to 3 s), 100 calls a second; `impatient` of its clients give up
/// at a random moment within 3 s.
pub fn slow(calls: u64, impatient: f64) -> Scenario {
    Scenario {
        rate: 100.0,
        calls,
        latency: Latency::LogNormal {
            median: Duration::from_millis(1500),
            sigma: 0.3,
        },
        patience: Patience::Cancels {
            impatient,
            within: Duration::from_secs(3),
        },
        stall: None,
        stop_at_trip: false,
    }
}

/// The cost of a short rule: the healthy upstream of [`healthy`] pauses
/// for `length` ten seconds in (20 s of calls in all), its clients as
/// impatient as there.
pub fn stalled(length: Duration) -> Scenario {
    Scenario {
        calls: 4_000,
        stall: Some((Duration::from_secs(10), length)),
        ..healthy(0)
    }
}
