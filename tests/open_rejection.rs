//! The inline OPEN rejection (a local trip without jitter, decided in line
//! from the stamp and the backoff table) agrees with the exact decision at
//! every boundary of the open period, and hands everything else to it.

use failfast::{Breaker, ManualClock, Nanos, Reason, RejectReason, RemoteTrip, State};
use std::time::Duration;

const OPEN: Duration = Duration::from_secs(10);

fn tripped_at(t0: Nanos) -> Breaker<ManualClock> {
    let b = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(OPEN)
        .count_calls(true)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let trip = b.try_acquire_at(t0).unwrap().failure_at(t0).unwrap();
    assert_eq!(trip.open_for, Some(OPEN));
    b
}

/// A breaker whose local schedule opens for `local`, opened at `t0` by a
/// remote trip with `remote` of its period left.
fn opened_remotely_at(t0: Nanos, local: Duration, remote: Duration) -> Breaker<ManualClock> {
    let b = Breaker::builder()
        .consecutive_failures(1)
        .open_duration(local)
        .build_with_clock(ManualClock::new())
        .unwrap();
    let news = RemoteTrip::new(1, remote, Reason::ConsecutiveFailures);
    b.apply_remote_at(&news, t0).expect("a remote trip opens");
    b
}

#[test]
fn rejects_from_the_trip_to_one_nanosecond_before_the_end_then_probes() {
    let t0 = Nanos::from_secs(1_000);
    let b = tripped_at(t0);
    let end = t0 + OPEN;
    for (now, left) in [
        (t0, OPEN),
        (t0 + Duration::from_secs(4), Duration::from_secs(6)),
        (end - Duration::from_nanos(1), Duration::from_nanos(1)),
    ] {
        let rejected = b.try_acquire_at(now).unwrap_err();
        assert_eq!(rejected.reason(), RejectReason::Open, "at {now:?}");
        assert_eq!(rejected.retry_after(), Some(left), "at {now:?}");
    }
    assert_eq!(b.snapshot_at(t0).calls.unwrap().rejected, 3);
    let probe = b.try_acquire_at(end).expect("the probe at the end");
    assert!(probe.is_probe());
    assert_eq!(b.state(), State::HalfOpen);
}

#[test]
fn a_time_before_the_trip_is_rejected_for_the_whole_period_after_it() {
    // A caller's `now` read before the trip (an older event-loop tick): the
    // inline path's elapsed time wraps and the exact path decides.
    let t0 = Nanos::from_secs(1_000);
    let b = tripped_at(t0);
    let earlier = t0 - Duration::from_secs(3);
    let rejected = b.try_acquire_at(earlier).unwrap_err();
    assert_eq!(rejected.reason(), RejectReason::Open);
    assert_eq!(rejected.retry_after(), Some(OPEN + Duration::from_secs(3)));
    assert_eq!(b.state(), State::Open);
}

#[test]
fn a_remote_trips_span_is_decided_on_the_span_not_the_local_schedule() {
    // Shared trips carry their own open period in the word's span field; the
    // inline path must not read the local backoff table for them.
    let t0 = Nanos::from_secs(1_000);
    let b = opened_remotely_at(t0, Duration::from_secs(1), Duration::from_secs(60));
    // Long past the local 1 s schedule, inside the remote 60 s.
    let later = t0 + Duration::from_secs(30);
    let rejected = b.try_acquire_at(later).unwrap_err();
    assert_eq!(rejected.reason(), RejectReason::Open);
    let left = rejected.retry_after().unwrap();
    assert!(
        left > Duration::from_secs(29) && left <= Duration::from_secs(31),
        "{left:?}"
    );
    assert!(b
        .try_acquire_at(t0 + Duration::from_secs(61))
        .unwrap()
        .is_probe());
}

#[test]
fn a_remote_trip_shorter_than_the_local_schedule_ends_on_time() {
    // The local schedule would say 60 s; the news says 1 s (rounded up to
    // the span's 16.8 ms unit): the probe comes after the news's period.
    let t0 = Nanos::from_secs(1_000);
    let b = opened_remotely_at(t0, Duration::from_secs(60), Duration::from_secs(1));
    assert!(b.try_acquire_at(t0 + Duration::from_millis(500)).is_err());
    let probe = b.try_acquire_at(t0 + Duration::from_secs(2));
    assert!(probe.expect("probe after the remote period").is_probe());
}
