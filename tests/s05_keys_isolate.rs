//! S5: keys isolate circuits. One open breaker never rejects another key's calls.

use failfast::{Breaker, ManualClock, Nanos, RejectReason, State};
use std::collections::HashMap;
use std::time::Duration;

fn breaker(clock: &ManualClock, id: u32) -> Breaker<ManualClock> {
    Breaker::builder()
        .consecutive_failures(2)
        .failure_rate(0.5)
        .count_window(10)
        .min_calls(4)
        .open_duration(Duration::from_secs(30))
        .id(id)
        .count_calls(true)
        .build_with_clock(clock.clone())
        .unwrap()
}

#[test]
fn checkout_open_does_not_reject_shipping() {
    let clock = ManualClock::new();
    let checkout = breaker(&clock, 1);
    let shipping = breaker(&clock, 2);

    for _ in 0..2 {
        assert!(checkout.call(|| Err::<(), _>("503")).is_err());
    }
    assert_eq!(checkout.state(), State::Open);
    let mut shipped = 0;
    for _ in 0..1_000 {
        assert_eq!(
            checkout
                .call(|| Ok::<_, ()>(()))
                .unwrap_err()
                .rejected()
                .unwrap()
                .reason(),
            RejectReason::Open
        );
        shipping
            .call(|| {
                shipped += 1;
                Ok::<_, ()>(())
            })
            .expect("shipping is unaffected");
    }
    assert_eq!(shipped, 1_000);
    let ship = shipping.snapshot();
    assert_eq!((ship.state, ship.generation), (State::Closed, 0));
    assert_eq!(ship.calls.unwrap().rejected, 0);
    assert_eq!(checkout.snapshot().calls.unwrap().rejected, 1_000);

    // Shipping's failures do not touch checkout's circuit, and vice versa.
    assert!(shipping.call(|| Err::<(), _>("503")).is_err());
    assert_eq!(shipping.snapshot().consecutive_failures, 1);
    assert_eq!(checkout.snapshot().generation, 1);
}

#[test]
fn one_breaker_per_upstream_host() {
    let clock = ManualClock::new();
    let hosts = ["a.internal", "b.internal", "c.internal", "d.internal"];
    let breakers: HashMap<&str, Breaker<ManualClock>> = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| (*h, breaker(&clock, i as u32)))
        .collect();

    // b.internal goes down: half of its calls fail.
    let now = Nanos::from_secs(1);
    for i in 0..8 {
        for host in hosts {
            let Ok(permit) = breakers[host].try_acquire_at(now) else {
                assert_eq!(host, "b.internal", "only the failing host rejects");
                continue;
            };
            if host == "b.internal" && i % 2 == 0 {
                let _ = permit.failure_at(now);
            } else {
                let _ = permit.success_at(now);
            }
        }
    }
    for host in hosts {
        let snap = breakers[host].snapshot_at(now);
        if host == "b.internal" {
            assert_eq!(snap.state, State::Open);
            // F S F S F: the fifth call makes 3 of 5 (min 4 reached at a failure).
            assert_eq!((snap.window.calls, snap.window.failures), (5, 3));
        } else {
            assert_eq!(snap.state, State::Closed, "{host}");
            assert_eq!(snap.generation, 0, "{host}");
            assert_eq!(snap.window.failures, 0, "{host}");
            assert_eq!(snap.window.calls, 8, "{host}");
        }
    }
}
