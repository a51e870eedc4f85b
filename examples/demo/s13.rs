//! S13 ★ Three replicas, one dying dependency: trips local, shared, or one
//! breaker locked around every call (`lock_around_call.rs`, the peer).
//!
//! The model, one event at a time on a [`ManualClock`]:
//!
//! - three replicas of a service call the pricing dependency 150, 50 and 25
//!   times a second (the balancer's skew); each replica has its own
//!   [`Registry`] of breakers (failure rate ≥ 50 % over the last
//!   20 calls, judged from 10; open 10 s, doubling per failed probe up to
//!   30 s (the default backoff: ×2 up to 3 × the base); 20 %
//!   jitter; each replica's breaker ids differ, as they do across processes);
//! - calls succeed in 20 ms until the dependency dies at 1 s; from then on
//!   every call fails after 20 ms (connection refused), probes included;
//! - **local**: each replica finds out on its own;
//! - **shared**: the request path reports each trip into the replica's
//!   [`Outbox`]; every 5 ms each replica's sync step ([`Replica`]) hands its
//!   trips to the store, whose news reaches the other replicas 2 ms later;
//!   each reconciles every 5 s. The store is the in-process [`MemoryStore`]
//!   — the rules the `redis` feature's Lua scripts run in Redis — so the
//!   demo needs no server; with Redis, `RedisSync` drives the same replica;
//! - **lock around call**: gobreaker v2's distributed breaker, modelled in
//!   `lock_around_call.rs`, as printed and as it would be with its state
//!   read under the lock.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::Duration;

use failfast::share::{MemoryStore, News, Outbox, Replica};
use failfast::{Breaker, Handle, ManualClock, Nanos, OwnedPermit, Registry, State};

use crate::lock_around_call;
use crate::sim::Sim;
use crate::table::{dur, int, title, Table};

const REPLICAS: usize = 3;
const HOST: &str = "pricing.internal:443";
/// Each replica's calls per second.
const LOAD: [u64; REPLICAS] = [150, 50, 25];
const OK_AFTER: Duration = Duration::from_millis(20);
const FAIL_AFTER: Duration = Duration::from_millis(20);
const DIES_AT: Duration = Duration::from_secs(1);
const HORIZON: Duration = Duration::from_secs(61);
const SYNC_EVERY: Duration = Duration::from_millis(5);
const NETWORK: Duration = Duration::from_millis(2);
const RECONCILE_EVERY: Duration = Duration::from_secs(5);

/// A hasher per replica: each process's registry hashes keys with its own
/// random keys, so the same host gets a different breaker id (and jitter)
/// on each replica. Seeded here so the demo's output is the same every run.
#[derive(Clone)]
struct Seeded(u64);

impl BuildHasher for Seeded {
    type Hasher = DefaultHasher;
    fn build_hasher(&self) -> DefaultHasher {
        use std::hash::Hasher;
        let mut h = DefaultHasher::new();
        h.write_u64(self.0);
        h
    }
}

type Hosts = Registry<String, Seeded, ManualClock>;
type Call = OwnedPermit<ManualClock, Handle<String, ManualClock>>;

#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Replica `r` makes its next call.
    Call(usize),
    /// Call `id` of replica `r` ends.
    Ends(usize, u64),
    /// Replica `r`'s sync step.
    Sync(usize),
    /// News `n` reaches replica `r`.
    Deliver(usize, usize),
    /// Replica `r` reconciles.
    Reconcile(usize),
}

struct Node {
    hosts: Arc<Hosts>,
    outbox: Arc<Outbox>,
    replica: Replica<String, Seeded, ManualClock>,
    failed_before_reject: u64,
    rejects_since: Option<Nanos>,
    probes: Vec<Nanos>,
}

#[derive(Default)]
struct Run {
    /// Backend calls from the death until every replica rejects.
    calls_until_all_reject: u64,
    all_reject_at: Option<Nanos>,
    failed_before_reject: Vec<u64>,
    first_probes: Vec<Option<Nanos>>,
    probes: usize,
    backend_calls_dead: u64,
    /// Calls offered while the dependency was healthy, and how many of them
    /// reached it.
    healthy_offered: u64,
    healthy_called: u64,
    published: u64,
    applied: u64,
    reconciled: u64,
}

fn simulate(shared: bool) -> Run {
    let clock = ManualClock::new();
    let mut store = MemoryStore::new(clock.clone());
    let mut nodes: Vec<Node> = (0..REPLICAS)
        .map(|r| {
            let hosts = Arc::new(
                Registry::<String>::builder(
                    Breaker::builder()
                        .failure_rate(0.5)
                        .count_window(20)
                        .min_calls(10)
                        .open_duration(Duration::from_secs(10))
                        .jitter(0.2),
                )
                .hasher(Seeded(r as u64 + 1))
                .build_with_clock(clock.clone())
                .expect("valid configuration"),
            );
            let outbox = Arc::new(Outbox::new(64));
            let replica = Replica::builder(hosts.clone(), outbox.clone())
                .origin(format!("replica-{}", (b'a' + r as u8) as char))
                .build()
                .expect("valid configuration");
            Node {
                hosts,
                outbox,
                replica,
                failed_before_reject: 0,
                rejects_since: None,
                probes: Vec::new(),
            }
        })
        .collect();
    let handles: Vec<_> = nodes.iter().map(|n| n.hosts.handle(HOST)).collect();
    let mut sim = Sim::new(clock);
    for r in 0..REPLICAS {
        sim.at(Nanos::from_millis(3 * r as u64), Event::Call(r));
        if shared {
            sim.at(Nanos::from_millis(r as u64), Event::Sync(r));
            sim.at(Nanos::ZERO, Event::Reconcile(r));
        }
    }
    let dies = Nanos::from_duration(DIES_AT);
    let mut run = Run::default();
    let mut calls: HashMap<u64, Call> = HashMap::new();
    let mut next_id = 0;
    let mut wire: Vec<News> = Vec::new();
    while let Some((now, event)) = sim.next_event() {
        if now > Nanos::from_duration(HORIZON) {
            break;
        }
        match event {
            Event::Call(r) => {
                sim.after(Duration::from_secs(1) / LOAD[r] as u32, Event::Call(r));
                let node = &mut nodes[r];
                let healthy = now < dies;
                run.healthy_offered += u64::from(healthy);
                if let Ok(permit) = handles[r].try_acquire_owned_at(now) {
                    run.healthy_called += u64::from(healthy);
                    if permit.is_probe() {
                        node.probes.push(now);
                    }
                    if now >= dies {
                        run.backend_calls_dead += 1;
                        if run.all_reject_at.is_none() {
                            run.calls_until_all_reject += 1;
                        }
                    }
                    next_id += 1;
                    calls.insert(next_id, permit);
                    let took = if now >= dies { FAIL_AFTER } else { OK_AFTER };
                    sim.after(took, Event::Ends(r, next_id));
                }
            }
            Event::Ends(r, id) => {
                let Some(permit) = calls.remove(&id) else {
                    continue;
                };
                let node = &mut nodes[r];
                let transition = if permit.started_at() >= dies {
                    if node.rejects_since.is_none() {
                        node.failed_before_reject += 1;
                    }
                    permit.failure_at(now)
                } else {
                    permit.success_at(now)
                };
                if let Some(t) = transition {
                    node.outbox.report(HOST, &t);
                }
            }
            Event::Sync(r) => {
                sim.after(SYNC_EVERY, Event::Sync(r));
                for news in nodes[r].replica.publish_to_at(&mut store, now) {
                    wire.push(news);
                    for to in 0..REPLICAS {
                        sim.after(NETWORK, Event::Deliver(wire.len() - 1, to));
                    }
                }
            }
            Event::Deliver(n, r) => {
                let news = wire[n].clone();
                nodes[r].replica.receive_at(&news, now);
            }
            Event::Reconcile(r) => {
                sim.after(RECONCILE_EVERY, Event::Reconcile(r));
                let _ = nodes[r].replica.reconcile_with_at(&mut store, now);
            }
        }
        // From when each replica's breaker stopped admitting calls.
        for (node, handle) in nodes.iter_mut().zip(&handles) {
            if node.rejects_since.is_none() && handle.state() == State::Open {
                node.rejects_since = Some(now);
            }
        }
        if run.all_reject_at.is_none() && nodes.iter().all(|n| n.rejects_since.is_some()) {
            run.all_reject_at = Some(now);
        }
    }
    for node in &nodes {
        let stats = node.replica.stats();
        run.published += stats.published();
        run.applied += stats.applied();
        run.reconciled += stats.reconciled();
        run.failed_before_reject.push(node.failed_before_reject);
        run.first_probes.push(node.probes.first().copied());
        run.probes += node.probes.len();
    }
    run
}

fn since_death(t: Nanos) -> Duration {
    t.saturating_duration_since(Nanos::from_duration(DIES_AT))
}

/// The first probe of each replica after the death, and their spread.
fn first_probes(firsts: &[Option<Nanos>]) -> (String, String) {
    let times: Vec<Duration> = firsts.iter().flatten().map(|t| since_death(*t)).collect();
    if times.is_empty() {
        return ("none".into(), "-".into());
    }
    let list: Vec<String> = times.iter().map(|t| dur(*t)).collect();
    let spread = times.iter().max().copied().unwrap_or_default()
        - times.iter().min().copied().unwrap_or_default();
    (list.join(", "), dur(spread))
}

fn per_replica(counts: &[u64]) -> String {
    counts
        .iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(" / ")
}

fn median(waits: &mut [Duration]) -> Duration {
    waits.sort();
    waits.get(waits.len() / 2).copied().unwrap_or_default()
}

/// Prints S13: three replicas, trips local, shared, or one breaker shared
/// under a lock around every call.
pub fn show() {
    title("S13 ★ Three replicas, one dying dependency: trips local, shared, or locked around every call");
    println!("  3 replicas calling one dependency 150, 50 and 25 times/s; it dies at 1 s (calls fail after 20 ms).");
    println!("  local / shared: each replica's breaker opens at ≥ 50 % failures of 20 calls (judged from 10), for 10 s");
    println!("  (×2 per failed probe, up to 30 s), 20 % jitter. Shared: trips go through an outbox to the store every 5 ms, news");
    println!("  arrives 2 ms later, reconcile every 5 s; the store is in memory (MemoryStore: the Redis scripts' rules");
    println!("  in process; no server needed).");
    println!("  lock around call: one breaker in Redis for the fleet, gobreaker v2's protocol: read it, take a Redis");
    println!("  lock (retry every 500 ms, give up after 5 s), call while holding it, write it back, unlock; open after");
    println!("  10 failures in a row, for 10 s; Redis round trips of 1 ms.");
    println!();
    let local = simulate(false);
    let shared = simulate(true);
    let lock_params = |read_under_lock| lock_around_call::Params {
        replicas: REPLICAS,
        load: LOAD.to_vec(),
        call_takes: FAIL_AFTER,
        dies_at: Nanos::from_duration(DIES_AT),
        open_for: Duration::from_secs(10),
        horizon: Nanos::from_duration(HORIZON),
        read_under_lock,
    };
    let mut locked = lock_around_call::simulate(&lock_params(false));
    let mut fixed = lock_around_call::simulate(&lock_params(true));
    let locked_firsts: Vec<Option<Nanos>> = locked
        .probes
        .first()
        .map(|t| vec![Some(*t)])
        .unwrap_or_default();
    let mut t = Table::new(&["", "local", "shared", "lock around call"]);
    t.row(&[
        "backend calls after the death until every replica rejects".to_string(),
        int(local.calls_until_all_reject),
        int(shared.calls_until_all_reject),
        int(locked.calls_until_all_reject),
    ]);
    let all = |at: Option<Nanos>| at.map_or("never".into(), |t| dur(since_death(t)));
    t.row(&[
        "time until every replica rejects".to_string(),
        all(local.all_reject_at),
        all(shared.all_reject_at),
        all(locked.all_reject_at),
    ]);
    t.row(&[
        "failed calls each replica saw before it rejected".to_string(),
        per_replica(&local.failed_before_reject),
        per_replica(&shared.failed_before_reject),
        per_replica(&locked.failed_before_reject),
    ]);
    let (lp, ls) = first_probes(&local.first_probes);
    let (sp, ss) = first_probes(&shared.first_probes);
    let (kp, _) = first_probes(&locked_firsts);
    t.row(&[
        "first probe of each replica after the death".to_string(),
        lp,
        sp,
        format!("{kp} (one for all)"),
    ]);
    t.row(&[
        "spread of those first probes".to_string(),
        ls,
        ss,
        "-".to_string(),
    ]);
    t.row(&[
        "probes that hit the dead dependency in 60 s".to_string(),
        int(local.probes as u64),
        int(shared.probes as u64),
        int(locked.probes.len() as u64),
    ]);
    t.row(&[
        "backend calls to the dead dependency in 60 s".to_string(),
        int(local.backend_calls_dead),
        int(shared.backend_calls_dead),
        int(locked.backend_calls_dead),
    ]);
    t.row(&[
        "Redis round trips per call, lock retries included".to_string(),
        "0".to_string(),
        "0".to_string(),
        format!(
            "{:.1}",
            locked.round_trips as f64 / locked.offered.max(1) as f64
        ),
    ]);
    t.row(&[
        "healthy second: calls that reached the dependency".to_string(),
        format!("{} of {}", local.healthy_called, local.healthy_offered),
        format!("{} of {}", shared.healthy_called, shared.healthy_offered),
        format!("{} of {}", locked.healthy_called, locked.healthy_offered),
    ]);
    t.row(&[
        "calls that gave up on the lock (5 s) / median wait for it".to_string(),
        "-".to_string(),
        "-".to_string(),
        format!(
            "{} / {}",
            int(locked.lock_gave_up),
            dur(median(&mut locked.lock_waits))
        ),
    ]);
    t.row(&[
        "state written back over another's update (lost updates)".to_string(),
        "-".to_string(),
        "-".to_string(),
        int(locked.lost_updates),
    ]);
    t.row(&[
        "trips published / news applied / reconciliations".to_string(),
        "-".to_string(),
        format!(
            "{} / {} / {}",
            shared.published, shared.applied, shared.reconciled
        ),
        "-".to_string(),
    ]);
    t.print();
    println!();
    println!(
        "  Shared: {:.1}× fewer calls until every replica rejects, {:.1}× sooner, and nothing on the request path.",
        local.calls_until_all_reject as f64 / shared.calls_until_all_reject.max(1) as f64,
        local.all_reject_at.map_or(0.0, |t| since_death(t).as_secs_f64())
            / shared.all_reject_at.map_or(1.0, |t| since_death(t).as_secs_f64().max(1e-9)),
    );
    println!("  Probes stay spread by each replica's own jitter and probe offset; a probe that fails is a trip too, so it pushes back");
    println!("  the others' probes.");
    println!(
        "  Lock around call: calls are serialised across the fleet (one at a time, each holding the lock for the"
    );
    println!(
        "  call and two round trips), and a state read before the lock was taken, up to 5 s earlier, is written"
    );
    println!(
        "  back over newer ones: trips and probe rounds are undone. Read under the lock instead, it makes {}",
        int(fixed.calls_until_all_reject),
    );
    println!(
        "  backend calls until every replica rejects ({}), but still lets only {} of {} healthy calls through and",
        fixed.all_reject_at.map_or("never".into(), |t| dur(since_death(t))),
        fixed.healthy_called,
        fixed.healthy_offered,
    );
    println!(
        "  makes {:.1} round trips per call ({} gave up on the lock; median wait {}).",
        fixed.round_trips as f64 / fixed.offered.max(1) as f64,
        int(fixed.lock_gave_up),
        dur(median(&mut fixed.lock_waits)),
    );
}
