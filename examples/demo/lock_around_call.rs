//! S13's third column: one breaker shared through Redis with a lock held
//! around every call — the protocol of gobreaker v2's
//! `DistributedCircuitBreaker`, the one peer that shares breaker state.
//!
//! Per call, one replica: `GetData` (read the shared state), `Lock` (a Redis
//! mutex, `SET NX`; if it is held, try again every 500 ms, give up after 5 s),
//! run the breaker on the state it read *before* locking (so an update made
//! meanwhile by another replica is overwritten: the lost update), make the
//! call if admitted, `SetData` (write the state back), `Unlock`. Four round
//! trips of 1 ms, and the call runs while the lock is held: calls are
//! serialised across the fleet. The breaker is gobreaker's shape with this
//! scene's numbers: open after 10 failures in a row (the same trip point as
//! the others' 50 % of 10 calls when every call fails), open 10 s, one probe
//! in half-open; no jitter, no backoff (gobreaker has neither).
//!
//! Everything runs on the scene's clock, event by event; nothing sleeps.

use std::collections::HashMap;
use std::time::Duration;

use failfast::{ManualClock, Nanos};

use crate::sim::Sim;

/// Half a Redis round trip.
const HALF_RTT: Duration = Duration::from_micros(500);
/// The lock's retry interval and how long a caller keeps trying.
const LOCK_RETRY: Duration = Duration::from_millis(500);
const LOCK_GIVE_UP: Duration = Duration::from_secs(5);
const TRIP_AFTER: u32 = 10;

/// The shared state, as gobreaker keeps it (`SharedState`).
#[derive(Copy, Clone, Debug, PartialEq)]
enum Shared {
    Closed { failures: u32 },
    Open { until: Nanos },
    HalfOpen { admitted: u32 },
}

/// What the scene needs to know about one replica's calls.
pub struct Params {
    pub replicas: usize,
    pub load: Vec<u64>,
    pub call_takes: Duration,
    pub dies_at: Nanos,
    pub open_for: Duration,
    pub horizon: Nanos,
    /// Read the state after taking the lock (one round trip more under the
    /// lock), which removes the lost update: the protocol's cost alone.
    pub read_under_lock: bool,
}

/// What happened.
#[derive(Default, Debug)]
pub struct Run {
    pub calls_until_all_reject: u64,
    pub all_reject_at: Option<Nanos>,
    pub failed_before_reject: Vec<u64>,
    pub rejects_since: Vec<Option<Nanos>>,
    pub probes: Vec<Nanos>,
    pub backend_calls_dead: u64,
    /// Calls that gave up waiting for the lock (5 s), whole run.
    pub lock_gave_up: u64,
    /// Calls offered, whole run.
    pub offered: u64,
    /// Calls offered while the dependency was healthy, and how many of them
    /// reached it.
    pub healthy_offered: u64,
    pub healthy_called: u64,
    /// Waits for the lock of the calls that got it.
    pub lock_waits: Vec<Duration>,
    /// Updates overwritten by a writer that read the state before them.
    pub lost_updates: u64,
    pub round_trips: u64,
}

#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Replica `r` starts its next call.
    Call(usize),
    /// Request `id`'s `GetData` reaches Redis.
    Read(u64),
    /// Request `id`'s `SET NX` reaches Redis.
    TryLock(u64),
    /// Request `id` holds the lock (the reply is back).
    Locked(u64),
    /// Request `id`'s backend call ends.
    Ends(u64),
    /// Request `id`'s `SetData` reaches Redis.
    Write(u64),
    /// Request `id`'s `DEL` reaches Redis.
    Unlock(u64),
}

struct Request {
    replica: usize,
    started: Nanos,
    /// When the backend call started, if it was admitted.
    called: Nanos,
    read: Shared,
    /// The shared state's version when it was read.
    version: u64,
    next: Shared,
}

/// Runs the scene with the lock around every call.
pub fn simulate(p: &Params) -> Run {
    let clock = ManualClock::new();
    let mut sim = Sim::new(clock);
    for r in 0..p.replicas {
        sim.at(Nanos::from_millis(3 * r as u64), Event::Call(r));
    }
    let mut shared = Shared::Closed { failures: 0 };
    let mut version = 0u64;
    let mut lock: Option<(u64, Nanos)> = None;
    let mut requests: HashMap<u64, Request> = HashMap::new();
    let mut next_id = 0u64;
    let mut run = Run {
        failed_before_reject: vec![0; p.replicas],
        rejects_since: vec![None; p.replicas],
        ..Run::default()
    };
    while let Some((now, event)) = sim.next_event() {
        if now > p.horizon {
            break;
        }
        match event {
            Event::Call(r) => {
                sim.after(Duration::from_secs(1) / p.load[r] as u32, Event::Call(r));
                next_id += 1;
                requests.insert(
                    next_id,
                    Request {
                        replica: r,
                        started: now,
                        called: now,
                        read: shared,
                        version,
                        next: shared,
                    },
                );
                run.offered += 1;
                if now < p.dies_at {
                    run.healthy_offered += 1;
                }
                run.round_trips += 1;
                sim.after(HALF_RTT, Event::Read(next_id));
            }
            Event::Read(id) => {
                let req = requests.get_mut(&id).expect("live request");
                (req.read, req.version) = (shared, version);
                // The reply, then the SET NX.
                run.round_trips += 1;
                sim.after(HALF_RTT * 2, Event::TryLock(id));
            }
            Event::TryLock(id) => {
                let free = lock.is_none_or(|(_, expires)| expires <= now);
                let req = &requests[&id];
                if free {
                    lock = Some((id, now + LOCK_GIVE_UP));
                    sim.after(HALF_RTT, Event::Locked(id));
                } else if now.saturating_duration_since(req.started) + LOCK_RETRY > LOCK_GIVE_UP {
                    run.lock_gave_up += 1;
                    requests.remove(&id);
                } else {
                    run.round_trips += 1;
                    sim.after(HALF_RTT * 2 + LOCK_RETRY, Event::TryLock(id));
                }
            }
            Event::Locked(id) => {
                let req = requests.get_mut(&id).expect("live request");
                run.lock_waits
                    .push(now.saturating_duration_since(req.started));
                // gobreaker's beforeRequest on the state read before locking
                // (or, fixed, read now: the reply comes one round trip later).
                let read_delay = if p.read_under_lock {
                    (req.read, req.version) = (shared, version);
                    HALF_RTT * 2
                } else {
                    Duration::ZERO
                };
                let mut state = req.read;
                if let Shared::Open { until } = state {
                    if now >= until {
                        state = Shared::HalfOpen { admitted: 0 };
                    }
                }
                let admitted = match &mut state {
                    Shared::Closed { .. } => true,
                    Shared::Open { .. } => false,
                    Shared::HalfOpen { admitted } => {
                        *admitted += 1;
                        *admitted == 1
                    }
                };
                req.next = state;
                let r = req.replica;
                if !admitted {
                    if now >= p.dies_at && run.rejects_since[r].is_none() {
                        run.rejects_since[r] = Some(now);
                        if run.rejects_since.iter().all(Option::is_some) {
                            run.all_reject_at = Some(now);
                        }
                    }
                    sim.after(read_delay + HALF_RTT, Event::Write(id));
                    continue;
                }
                let now = now + read_delay;
                req.called = now;
                if matches!(state, Shared::HalfOpen { .. }) {
                    run.probes.push(now);
                }
                if now < p.dies_at {
                    run.healthy_called += 1;
                } else {
                    run.backend_calls_dead += 1;
                    if run.all_reject_at.is_none() {
                        run.calls_until_all_reject += 1;
                    }
                }
                sim.after(read_delay + p.call_takes, Event::Ends(id));
            }
            Event::Ends(id) => {
                let req = requests.get_mut(&id).expect("live request");
                let failed = req.called >= p.dies_at;
                let r = req.replica;
                if failed && run.rejects_since[r].is_none() {
                    run.failed_before_reject[r] += 1;
                }
                // gobreaker's afterRequest.
                req.next = match (req.next, failed) {
                    (Shared::Closed { failures }, true) if failures + 1 >= TRIP_AFTER => {
                        Shared::Open {
                            until: now + p.open_for,
                        }
                    }
                    (Shared::Closed { failures }, true) => Shared::Closed {
                        failures: failures + 1,
                    },
                    (Shared::Closed { .. }, false) => Shared::Closed { failures: 0 },
                    (Shared::HalfOpen { .. }, true) => Shared::Open {
                        until: now + p.open_for,
                    },
                    (Shared::HalfOpen { .. }, false) => Shared::Closed { failures: 0 },
                    (other, _) => other,
                };
                sim.after(HALF_RTT, Event::Write(id));
            }
            Event::Write(id) => {
                let req = &requests[&id];
                if version != req.version {
                    run.lost_updates += 1;
                }
                shared = req.next;
                version += 1;
                run.round_trips += 1;
                // The reply, then the DEL.
                sim.after(HALF_RTT * 2, Event::Unlock(id));
            }
            Event::Unlock(id) => {
                if lock.is_some_and(|(holder, _)| holder == id) {
                    lock = None;
                }
                run.round_trips += 1;
                requests.remove(&id);
            }
        }
    }
    run
}
