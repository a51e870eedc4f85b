//! The simulation core: a time-ordered event queue on a [`ManualClock`], plus
//! the two statistics the tables need (latency percentiles and a
//! time-weighted gauge). Nothing sleeps: time jumps from event to event.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use failfast::{Clock, ManualClock, Nanos};

/// A discrete-event simulation: events of type `E` fire in time order (ties in
/// the order they were scheduled), and the shared [`ManualClock`] is moved to
/// each event's instant before the event is handed out.
pub struct Sim<E> {
    clock: ManualClock,
    queue: BinaryHeap<Reverse<(Nanos, u64, E)>>,
    seq: u64,
}

impl<E: Ord> Sim<E> {
    /// A simulation driving `clock` (give the same clock to the breakers).
    pub fn new(clock: ManualClock) -> Sim<E> {
        Sim {
            clock,
            queue: BinaryHeap::new(),
            seq: 0,
        }
    }

    /// The current simulated instant.
    pub fn now(&self) -> Nanos {
        self.clock.now()
    }

    /// Schedules `event` at `at`.
    pub fn at(&mut self, at: Nanos, event: E) {
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq, event)));
    }

    /// Schedules `event` `delay` from now.
    pub fn after(&mut self, delay: Duration, event: E) {
        let at = self.now() + delay;
        self.at(at, event);
    }

    /// The next event, with the clock moved to its instant.
    pub fn next_event(&mut self) -> Option<(Nanos, E)> {
        let Reverse((at, _, event)) = self.queue.pop()?;
        self.clock.set(at);
        Some((at, event))
    }
}

/// Latency samples, for percentiles.
#[derive(Default)]
pub struct Latencies(Vec<Duration>);

impl Latencies {
    pub fn push(&mut self, d: Duration) {
        self.0.push(d);
    }

    /// The `q`-quantile (nearest rank), or zero with no samples.
    pub fn quantile(&mut self, q: f64) -> Duration {
        if self.0.is_empty() {
            return Duration::ZERO;
        }
        self.0.sort_unstable();
        let rank = ((q * self.0.len() as f64).ceil() as usize).clamp(1, self.0.len());
        self.0[rank - 1]
    }

    pub fn sum(&self) -> Duration {
        self.0.iter().sum()
    }
}

/// A gauge (say, connections in use) with its peak and its time-weighted mean.
#[derive(Default)]
pub struct Gauge {
    value: u64,
    peak: u64,
    since: Nanos,
    area: u128,
}

impl Gauge {
    pub fn set(&mut self, now: Nanos, value: u64) {
        self.area += u128::from(self.value) * u128::from(now.as_nanos() - self.since.as_nanos());
        self.since = now;
        self.value = value;
        self.peak = self.peak.max(value);
    }

    pub fn add(&mut self, now: Nanos, delta: i64) {
        let value = self.value.saturating_add_signed(delta);
        self.set(now, value);
    }

    pub fn value(&self) -> u64 {
        self.value
    }

    pub fn peak(&self) -> u64 {
        self.peak
    }

    /// The mean over `[0, end)`.
    pub fn mean(&self, end: Nanos) -> f64 {
        let area = self.area
            + u128::from(self.value)
                * u128::from(end.as_nanos().saturating_sub(self.since.as_nanos()));
        if end.as_nanos() == 0 {
            0.0
        } else {
            area as f64 / end.as_nanos() as f64
        }
    }
}
