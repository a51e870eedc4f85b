//! The rejection log (feature `tracing`): at most one INFO per open period
//! per breaker, whatever the races. A rejection claims INFO with one
//! compare-and-swap of its slot from an instant already past to the end of
//! its own period; a slot only moves forward, so a period's end is written
//! once.
#![cfg(failfast_loom)]

use failfast::export::tracing::RejectionLog;
use failfast::{Breaker, ManualClock, Nanos};
use failfast_loom_tests::{both_orders, go_second, secs, Cb, OPEN};
use loom::sync::Arc;
use loom::thread;
use tracing::Level;

/// A breaker open from `at` for [`OPEN`] (no jitter), with id `id`.
fn open_at(at: Nanos, id: u32) -> Cb {
    let b = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(OPEN)
        .jitter(0.0)
        .id(id)
        .build_with_clock(ManualClock::new())
        .expect("valid breaker");
    let _ = b.try_acquire_at(at).expect("closed").failure_at(at);
    b
}

/// The level `log` gives `b`'s rejection at `now`.
fn level(log: &RejectionLog, b: &Cb, now: Nanos) -> Level {
    let rejected = b.try_acquire_at(now).expect_err("open: rejected");
    log.level(b.id(), &rejected, now)
}

fn infos(levels: &[Level]) -> usize {
    levels.iter().filter(|l| **l == Level::INFO).count()
}

/// Three rejections of one open period, at different instants, race for
/// the one slot: exactly one is INFO.
#[test]
fn three_rejections_of_one_period_one_info() {
    loom::model(|| {
        let log = Arc::new(RejectionLog::new(1));
        let b = Arc::new(open_at(Nanos::ZERO, 7));
        let others: Vec<_> = [secs(1), secs(2)]
            .into_iter()
            .map(|now| {
                let (log, b) = (log.clone(), b.clone());
                thread::spawn(move || level(&log, &b, now))
            })
            .collect();
        let mut levels = vec![level(&log, &b, secs(3))];
        levels.extend(others.into_iter().map(|t| t.join().unwrap()));
        assert_eq!(infos(&levels), 1, "{levels:?}");
    });
}

/// Two breakers share the slot, both open (ends 10 s and 15 s), and the
/// first rejects twice: never two INFO for one breaker's period, and the
/// first claimant always gets one.
#[test]
fn two_breakers_in_one_slot_never_two_infos_for_one_period() {
    both_orders(|spawned_first| {
        let log = Arc::new(RejectionLog::new(1));
        let a = Arc::new(open_at(Nanos::ZERO, 1));
        let b = Arc::new(open_at(secs(5), 2));
        let other = {
            let (log, b) = (log.clone(), b.clone());
            thread::spawn(move || level(&log, &b, secs(6)))
        };
        go_second(spawned_first);
        let a1 = level(&log, &a, secs(7));
        let a2 = level(&log, &a, secs(8));
        let b1 = other.join().unwrap();
        assert!(infos(&[a1, a2]) <= 1, "a: {a1:?} {a2:?}");
        assert_eq!(a2, Level::DEBUG, "a's second rejection");
        assert!(infos(&[a1, a2, b1]) >= 1, "someone announced");
    });
}
