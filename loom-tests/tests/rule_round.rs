//! The half-open rate rule (issue 27): a round of P probes counts its
//! answers in the HalfOpen word (taken, failed, slow: three 5-bit fields;
//! successes, fast or slow, in the successes field) and is decided as soon
//! as its outcome is certain: it closes once no answer still to come can
//! reopen it, and the probes still out then answer a round that is over. Every count is a CAS from the exact word, so
//! concurrent answers decide the round once: never a close and a reopen,
//! never a lost count. At the end of the lease the probes still out count as
//! failures, and the admission that finds the round failed reopens it
//! (`Admission::Reopened`, a transition like any other).
//!
//! Every model here trips at 0 s (`consecutive_failures(1)`, open for 10 s
//! at every step, the lease 10 s) and uses a failure rate of 0.5 under the
//! rule; hints are off. The models named `protocol_` (the round's decision
//! and the election) also run at `LOOM_MAX_PREEMPTIONS=3` in CI.
#![cfg(failfast_loom)]

use failfast::{ManualClock, OwnedPermit, Reason, RejectReason, State};
use failfast_loom_tests::{
    base, both_orders, build, go_second, secs, seen, take_and_hold, trip, Cb, Log, Seen, OPEN,
};
use loom::sync::Arc;
use loom::thread;

/// A probe that can move to another thread.
type Probe = OwnedPermit<ManualClock, Arc<Cb>>;

/// P probes under the rule (failure rate 0.5), open 10 s doubling up to
/// 40 s (a reopen takes the next step), tripped at 0 s.
fn rule_breaker(probes: u32) -> (Arc<Cb>, Log) {
    build(
        base()
            .backoff(2.0, OPEN * 4)
            .consecutive_failures(1)
            .half_open_probes(probes)
            .half_open_failure_rate(0.5)
            .hints_off(),
    )
}

/// [`rule_breaker`] with all P probes of round 2 taken at the open deadline.
fn round_of(probes: u32) -> (Arc<Cb>, Log, Vec<Probe>) {
    let (b, log) = rule_breaker(probes);
    trip(&b, secs(0));
    let ready = secs(0) + OPEN;
    let taken: Vec<_> = (0..probes)
        .map(|_| OwnedPermit::acquire_at(b.clone(), ready).expect("a slot of round 2"))
        .collect();
    assert!(taken.iter().all(|p| p.is_probe() && p.generation() == 2));
    (b, log, taken)
}

/// The round's transitions (after the trip and the election).
fn decided(log: &Log) -> Vec<Seen> {
    seen(log)[2..].to_vec()
}

/// P = 2 at 0.5: one failure reopens (1 of 2 reaches the rate), whatever came
/// first. A success that lands first only counts; one that lands after the
/// reopen is stale. One transition, `ProbeFailed`, returned by the failure.
fn failure_and_success_reopen_once(spawned_first: bool) {
    let (b, log, mut probes) = round_of(2);
    let ready = secs(0) + OPEN;
    let good = probes.pop().unwrap();
    let bad = probes.pop().unwrap();
    let other = thread::spawn(move || good.success_at(ready));
    go_second(spawned_first);
    let mine = bad.failure_at(ready);
    let theirs = other.join().unwrap();

    assert_eq!(theirs, None, "a success never decides this round");
    let t = mine.expect("the failure reopens");
    assert_eq!(
        (t.from, t.to, t.reason, t.generation, t.trips_in_a_row),
        (State::HalfOpen, State::Open, Reason::ProbeFailed, 3, 2)
    );
    assert_eq!(
        decided(&log),
        [Seen::new(
            State::HalfOpen,
            State::Open,
            Reason::ProbeFailed,
            3
        )]
    );
    assert_eq!(b.state(), State::Open);
}

#[test]
fn protocol_rule_failure_and_success_reopen_once() {
    both_orders(failure_and_success_reopen_once);
}

/// P = 3 at 0.5 (two failures reopen): success, success and failure answered
/// on three threads at once. One failure of three is short of the rate, so
/// the third answer, whichever it is, closes the round, once; no order
/// reopens it.
#[test]
fn protocol_rule_three_answers_close_once() {
    loom::model(|| {
        let (b, log, mut probes) = round_of(3);
        let ready = secs(0) + OPEN;
        let bad = probes.pop().unwrap();
        let answers: Vec<_> = probes
            .into_iter()
            .map(|p| thread::spawn(move || p.success_at(ready)))
            .collect();
        let mut results = vec![bad.failure_at(ready)];
        results.extend(answers.into_iter().map(|h| h.join().unwrap()));

        let closes: Vec<_> = results.into_iter().flatten().collect();
        assert_eq!(closes.len(), 1, "one answer decides: {closes:?}");
        let t = &closes[0];
        assert_eq!(
            (t.from, t.to, t.reason, t.generation),
            (State::HalfOpen, State::Closed, Reason::ProbesSucceeded, 3)
        );
        assert_eq!(decided(&log).len(), 1, "{:?}", seen(&log));
        assert_eq!(b.state(), State::Closed);
    });
}

/// Invariants 1 and 2 with the rule on: three racers at the open deadline,
/// P = 2: one wins the election (one `OpenElapsed`), two probes of
/// generation 2 in all (the rule's slot count, 5 bits of the count field, is
/// a CAS from the exact word), the third is turned away `HalfOpenFull`.
#[test]
fn protocol_rule_election_two_slots_among_three() {
    loom::model(|| {
        let (b, log) = rule_breaker(2);
        trip(&b, secs(0));
        let ready = secs(0) + OPEN;
        let racers: Vec<_> = (0..2)
            .map(|_| {
                let b = b.clone();
                thread::spawn(move || take_and_hold(&b, ready))
            })
            .collect();
        let mut results = vec![take_and_hold(&b, ready)];
        results.extend(racers.into_iter().map(|h| h.join().unwrap()));

        let probes: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(probes, [&(true, 2), &(true, 2)], "{results:?}");
        let turned: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
        assert_eq!(turned.len(), 1);
        assert_eq!(turned[0].reason(), RejectReason::HalfOpenFull);
        assert_eq!(
            seen(&log)[1..],
            [Seen::new(
                State::Open,
                State::HalfOpen,
                Reason::OpenElapsed,
                2
            )]
        );
        assert_eq!(b.state(), State::HalfOpen);
    });
}

/// P = 2 at 0.5: one probe is dropped early (no verdict: it frees its slot
/// and counts toward neither rate) while the other succeeds (× 2 orders).
/// Neither update is lost and the drop is no failure: one slot of round 2 is
/// free again, and its probe's success closes the round.
fn drop_and_success_leave_one_free_slot(spawned_first: bool) {
    let (b, log, mut probes) = round_of(2);
    let ready = secs(0) + OPEN;
    let dropped = probes.pop().unwrap();
    let good = probes.pop().unwrap();
    let other = thread::spawn(move || drop(dropped));
    go_second(spawned_first);
    let mine = good.success_at(ready);
    other.join().unwrap();

    assert_eq!(mine, None, "one success of two does not decide");
    assert_eq!(decided(&log), [], "a dropped probe is no failure");
    let third = b.try_acquire_at(ready).expect("the dropped probe's slot");
    assert_eq!((third.is_probe(), third.generation()), (true, 2));
    assert!(b.try_acquire_at(ready).is_err(), "one slot was freed");
    let t = third.success_at(ready).expect("the second success closes");
    assert_eq!(
        (t.to, t.generation, t.probe_successes),
        (State::Closed, 3, 2)
    );
}

#[test]
fn rule_drop_and_success_leave_one_free_slot() {
    both_orders(drop_and_success_leave_one_free_slot);
}

/// P = 2 at 0.5, lease 10 s: round 2 from 10 s, one probe succeeded, the
/// other is still out at 20 s, the lease's end. Its late success (which
/// closes the round if it lands first) races a request at 20 s (× 2
/// orders), whose admission counts the probe still out as a failure: 1 of 2,
/// the round fails, and that admission reopens it (`ProbeAbandoned`),
/// turned away `Open` for the new period. Exactly one of the two decides the
/// round, once: a close and the request admitted into Closed, or the reopen
/// and the late success stale.
fn lease_reopen_races_a_late_success(spawned_first: bool) {
    let (b, log, mut probes) = round_of(2);
    let late = probes.pop().unwrap();
    let early = probes.pop().unwrap();
    assert_eq!(early.success_at(secs(10)), None);
    let lease_end = secs(20);
    let asker = {
        let b = b.clone();
        thread::spawn(move || {
            go_second(spawned_first);
            take_and_hold(&b, lease_end)
        })
    };
    let answered = late.success_at(lease_end);
    let asked = asker.join().unwrap();

    let round = decided(&log);
    assert_eq!(round.len(), 1, "one decision: {round:?}");
    match (answered, asked) {
        (Some(t), Ok(got)) => {
            assert_eq!(
                (t.to, t.reason, t.generation),
                (State::Closed, Reason::ProbesSucceeded, 3)
            );
            assert_eq!(got, (false, 3), "admitted into the closed period");
            assert_eq!(round[0], Seen::from(&t));
        }
        (None, Err(r)) => {
            assert_eq!(r.reason(), RejectReason::Open);
            assert_eq!(r.retry_after(), Some(OPEN * 2), "the new open period");
            assert_eq!(
                round,
                [Seen::new(
                    State::HalfOpen,
                    State::Open,
                    Reason::ProbeAbandoned,
                    3
                )]
            );
            assert_eq!(b.snapshot_at(lease_end).trips_in_a_row, 2);
        }
        other => panic!("the late success and the request both or neither decided: {other:?}"),
    }
}

#[test]
fn protocol_rule_lease_reopen_races_a_late_success() {
    both_orders(lease_reopen_races_a_late_success);
}

/// P = 4 at 0.5 (two failures reopen): two probes succeeded; the third
/// succeeds while the fourth fails (× 2 orders). The third success makes
/// the close certain whatever the fourth says (1 failure + 1 to come < 2),
/// so the round is decided as soon as it lands: if it lands first, it closes
/// with the fourth probe still out, and the late failure is of a closed
/// round — ignored by generation: it neither reopens nor counts against the
/// Closed breaker (whose `consecutive_failures(1)` it would trip). If the
/// failure lands first it counts in the round (1 of 3 answers), and the
/// success, the last answer, closes it. Either way the success returns the
/// one transition, `HalfOpen → Closed` (`ProbesSucceeded`, generation 3, 3
/// probe successes), and a request after it is admitted into Closed.
fn early_close_races_a_late_failure(spawned_first: bool) {
    let (b, log, mut probes) = round_of(4);
    let ready = secs(0) + OPEN;
    let late = probes.pop().unwrap();
    let closing = probes.pop().unwrap();
    for p in probes {
        assert_eq!(
            p.success_at(ready),
            None,
            "two successes of four decide nothing"
        );
    }
    let other = thread::spawn(move || {
        go_second(spawned_first);
        late.failure_at(ready)
    });
    let mine = closing.success_at(ready);
    let theirs = other.join().unwrap();

    assert_eq!(theirs, None, "the late failure never decides: {theirs:?}");
    let t = mine.expect("the third success closes the round");
    assert_eq!(
        (t.from, t.to, t.reason, t.generation, t.probe_successes),
        (
            State::HalfOpen,
            State::Closed,
            Reason::ProbesSucceeded,
            3,
            3
        )
    );
    assert_eq!(
        decided(&log),
        [Seen::new(
            State::HalfOpen,
            State::Closed,
            Reason::ProbesSucceeded,
            3
        )]
    );
    let snap = b.snapshot_at(ready);
    assert_eq!((snap.state, snap.consecutive_failures), (State::Closed, 0));
    let next = b.try_acquire_at(ready).expect("closed: admitted");
    assert_eq!((next.is_probe(), next.generation()), (false, 3));
}

#[test]
fn protocol_rule_early_close_races_a_late_failure() {
    both_orders(early_close_races_a_late_failure);
}
