//! Outlier pools under racing threads: Envoy's success-rate case
//! (`tests/outliers.rs`) with every host's calls spread over four threads at
//! once, while a fifth adds and removes a host of the pool and reads the
//! pools' snapshots. The tally's roll, the pool's striped sums and their
//! seal are lock-free; loom checks their protocols
//! (`src/outlier/loom_models.rs`), and this file runs them on real threads,
//! so that ThreadSanitizer sees every access (`loom-tests/tsan.sh` runs it).
//!
//! The clock moves only between intervals, with every caller stopped at a
//! barrier, so the end result is the sequential one: the failing host, and
//! only it, is ejected once, and no report misses its interval's seal.

use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use failfast::{Breaker, ManualClock, OutlierRule, Outliers, Reason, Registry, State};

type Reg = Registry<u64, std::collections::hash_map::RandomState, ManualClock>;

const INTERVAL: Duration = Duration::from_secs(10);
/// Threads calling the pool's hosts; each calls every host.
const CALLERS: usize = 4;
/// Hosts 0..HOSTS; host 0 fails every call, the others none.
const HOSTS: u64 = 5;
/// Calls per host, per caller, per interval: 4 × 40 = 160 per host, above
/// the success-rate rule's request volume (100).
const CALLS: u32 = 40;
/// Intervals of traffic: two before anyone is judged, then a judged one.
const INTERVALS: usize = 4;
/// The host the fifth thread adds and removes (always healthy, few calls).
const VISITOR: u64 = 1_000;

#[test]
fn racing_callers_eject_the_failing_host_once_and_no_other() {
    let clock = ManualClock::new();
    let template = Breaker::builder()
        .consecutive_failures(30_000)
        .open_duration(Duration::from_secs(60));
    let r: Arc<Reg> = Arc::new(
        Registry::<u64>::builder(template.clone())
            .outliers(Outliers::new().interval(INTERVAL))
            .build_with_clock(clock.clone())
            .unwrap(),
    );
    let ejected = Arc::new(Mutex::new(Vec::new()));
    let log = ejected.clone();
    r.on_transition(move |host: &str, t: &failfast::Transition| {
        if matches!(t.reason, Reason::Outlier | Reason::SlowOutlier) {
            log.lock().unwrap().push((host.parse::<u64>().unwrap(), *t));
        }
    });

    // The callers and the visitor's thread meet at the barrier at each
    // interval's end; its leader moves the clock while all wait.
    let barrier = Arc::new(Barrier::new(CALLERS + 1));
    let mut threads = Vec::new();
    for caller in 0..CALLERS {
        let (r, clock, barrier) = (r.clone(), clock.clone(), barrier.clone());
        threads.push(thread::spawn(move || {
            for _ in 0..INTERVALS {
                // Each caller starts at another host, so the same host's
                // tally is rolled and counted by several threads at once.
                for i in 0..HOSTS {
                    let key = (i + caller as u64) % HOSTS;
                    let handle = r.handle(&key);
                    for _ in 0..CALLS {
                        if let Ok(permit) = handle.try_acquire() {
                            if key == 0 {
                                permit.failure();
                            } else {
                                permit.success();
                            }
                        }
                    }
                }
                if barrier.wait().is_leader() {
                    clock.advance(INTERVAL);
                }
                barrier.wait();
            }
        }));
    }
    {
        let (r, clock, barrier) = (r.clone(), clock.clone(), barrier.clone());
        threads.push(thread::spawn(move || {
            for round in 0..INTERVALS {
                for _ in 0..20 {
                    if r.insert_with(VISITOR, template.clone()).is_ok() {
                        if let Ok(permit) = r.handle(&VISITOR).try_acquire() {
                            permit.success();
                        }
                    }
                    let pools = r.outlier_pools();
                    assert_eq!(pools.len(), 1);
                    assert!(pools[0].ejected <= 1, "{:?}", pools[0]);
                    r.remove(&VISITOR);
                }
                // The visitor stays for the last interval's judgement.
                if round + 1 == INTERVALS {
                    r.insert_with(VISITOR, template.clone()).unwrap();
                }
                if barrier.wait().is_leader() {
                    clock.advance(INTERVAL);
                }
                barrier.wait();
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }

    let heard = ejected.lock().unwrap().clone();
    assert_eq!(heard.len(), 1, "one ejection: {heard:?}");
    let (host, t) = heard[0];
    assert_eq!(host, 0);
    assert_eq!(t.to, State::Open);
    assert_eq!(t.outlier_rule, Some(OutlierRule::SuccessRate));
    assert_eq!(r.handle(&0).state(), State::Open);
    for key in 1..HOSTS {
        assert_eq!(r.handle(&key).state(), State::Closed, "host {key}");
    }
    let pool = &r.outlier_pools()[0];
    assert_eq!(pool.ejected, 1, "{pool:?}");
    assert_eq!(pool.enforced(OutlierRule::SuccessRate), 1, "{pool:?}");
    assert_eq!(pool.late_reports, 0, "{pool:?}");
    assert_eq!(
        pool.members,
        HOSTS + 1,
        "the hosts and the visitor: {pool:?}"
    );
}
