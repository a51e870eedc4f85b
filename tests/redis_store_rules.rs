//! **redis.** The Lua scripts keep the store's rules: random sequences of
//! trips go to a real `redis-server` ([`RedisStore`]) and to the in-process
//! [`MemoryStore`] side by side, and every answer agrees — news or nothing,
//! reporters, reason, origin, what is left, epochs growing per key — and so
//! does the reconciliation list at the end. Skipped, with a notice, where
//! `redis-server` is missing.

mod redis_server;

use std::collections::HashMap;
use std::time::Duration;

use failfast::redis::RedisSyncBuilder;
use failfast::share::{LocalTrip, MemoryStore, News, Store};
use failfast::{ManualClock, Nanos, Reason};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use redis_server::Server;

const KEYS: [&str; 3] = ["db:5432", "api.example:443", "cache:6379"];
const ORIGINS: [&str; 3] = ["a", "b", "c"];
const REASONS: [Reason; 3] = [
    Reason::FailureRate,
    Reason::ProbeFailed,
    Reason::SlowCallRate,
];
/// Periods differ by at least this, so the few milliseconds the real server's
/// clock moves during a case never turn a comparison the other way.
const STEP: Duration = Duration::from_millis(250);

/// A trip: key, origin, reason, and the period in `STEP`s beyond 10 s.
fn trips() -> impl Strategy<Value = Vec<(usize, usize, usize, u32)>> {
    // Distinct periods: a shuffled range, so no two trips tie.
    (1usize..40).prop_flat_map(|n| {
        (
            proptest::collection::vec((0..KEYS.len(), 0..ORIGINS.len(), 0..REASONS.len()), n),
            Just((0u32..200).collect::<Vec<_>>()).prop_shuffle(),
        )
            .prop_map(|(picks, steps)| {
                picks
                    .into_iter()
                    .zip(steps)
                    .map(|((k, o, r), s)| (k, o, r, s))
                    .collect()
            })
    })
}

fn local_trip(k: usize, o: usize, r: usize, s: u32) -> LocalTrip {
    let mut t = LocalTrip::new(
        KEYS[k],
        Duration::from_secs(10) + STEP * s,
        REASONS[r],
        ORIGINS[o],
    );
    t.window = Duration::from_secs(60);
    t.slack = Duration::from_secs(5);
    t
}

fn close(a: Duration, b: Duration) -> bool {
    a.abs_diff(b) < STEP / 2
}

fn same(redis: &News, memory: &News) -> bool {
    (&redis.key, redis.reporters, redis.reason, &redis.origin)
        == (&memory.key, memory.reporters, memory.reason, &memory.origin)
        && close(redis.remaining, memory.remaining)
}

#[test]
fn the_lua_scripts_follow_the_memory_stores_rules() {
    let Some(server) = Server::start() else {
        return;
    };
    let redis = std::cell::RefCell::new(
        RedisSyncBuilder::new(&server.url())
            .shards(4)
            .connect_blocking()
            .unwrap(),
    );
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(64);
    let mut runner = TestRunner::new(Config::with_cases(cases));
    runner
        .run(&trips(), |trips| {
            let _: () = server.query(&redis::cmd("FLUSHALL"));
            let clock = ManualClock::starting_at(Nanos::from_secs(1_000_000));
            let mut memory = MemoryStore::new(clock);
            let mut last: HashMap<&str, (u64, u64)> = HashMap::new();
            for &(k, o, r, s) in &trips {
                let trip = local_trip(k, o, r, s);
                let (from_redis, from_memory) = (
                    redis.borrow_mut().trip(&trip).unwrap(),
                    memory.trip(&trip).unwrap(),
                );
                match (&from_redis, &from_memory) {
                    (None, None) => {}
                    (Some(a), Some(b)) => {
                        prop_assert!(same(a, b), "{a} vs {b}");
                        let (ra, rb) = last.get(KEYS[k]).copied().unwrap_or((0, 0));
                        prop_assert!(a.epoch > ra && b.epoch > rb, "epochs grow per key");
                        last.insert(KEYS[k], (a.epoch, b.epoch));
                    }
                    _ => prop_assert!(
                        false,
                        "{trip:?}: redis {from_redis:?}, memory {from_memory:?}"
                    ),
                }
            }
            let (mut a, mut b) = (
                redis.borrow_mut().open_trips().unwrap(),
                memory.open_trips().unwrap(),
            );
            a.sort_by(|x, y| x.key.cmp(&y.key));
            b.sort_by(|x, y| x.key.cmp(&y.key));
            prop_assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(&b) {
                prop_assert!(same(x, y), "{x} vs {y}");
                prop_assert_eq!((x.epoch, y.epoch), last[x.key.as_str()]);
            }
            Ok(())
        })
        .unwrap();
}
