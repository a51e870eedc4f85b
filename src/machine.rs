//! The state machine's decisions: pure functions from the word a breaker
//! shows them — with the time and the configuration — to what becomes of it.
//!
//! Nothing here touches an atomic. [`StateCell::update`] shows a decision
//! the current word and carries out the [`Next`] it returns; when its CAS
//! loses, it shows the same decision the word that won. So every rule of the
//! machine is in this file, once, and the tests below drive it with plain
//! values: a new mode is a new arm here, not a new CAS loop.
//!
//! Each decision that belongs to a permit takes the permit's generation and
//! keeps the word as it is once the generation moved on (invariant 4: a
//! stale verdict changes nothing).
//!
//! [`StateCell::update`]: crate::state::StateCell::update

use crate::clock::Nanos;
use crate::error::RejectReason;
use crate::observe::Reason;
use crate::outcome::Verdict;
use crate::policy::Config;
#[cfg(all(test, not(failfast_loom)))]
use crate::state::SUCCESS_MAX;
use crate::state::{Next, Snapshot, State, SPAN_UNIT_NANOS};

/// What admission decides for a word.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Admitted as an ordinary call (Closed, Disabled, MetricsOnly).
    Call,
    /// Admitted as a probe: a free slot of the current round.
    Probe,
    /// Admitted as the first probe of a round this admission starts, for
    /// this reason (`OpenElapsed` or `ProbeLeaseExpired`); the decision is a
    /// transition.
    Round(Reason),
    /// Turned away: why, and until when this answer stands
    /// ([`Nanos::NEVER`] while forced open).
    Reject(RejectReason, Nanos),
    /// Ramping (slow start): admitted if the caller's turn falls in this
    /// fraction (in units of `1 / ramp::ONE`), else turned away until the
    /// given instant (one curve step). The turn is the caller's
    /// ([`ramp::admits`](crate::ramp::admits)): this decision stays pure.
    Ramp(u32, Nanos),
    /// The probe lease ran out on a round the half-open rate rule already
    /// fails, counting its unanswered probes as failures: this admission's
    /// CAS reopened the breaker (a transition), and turns the call away.
    Reopened,
}

/// Admission at `now` for the word `s`, whose state began at `since`, on a
/// breaker with this configuration and jitter seed.
///
/// Invariant 2 (no early probe): in OPEN nothing is admitted before `since`
/// plus the open duration of `s`; after it, the transition to HALF_OPEN is
/// the first probe. Invariant 5 (no wedge): a round still unresolved when
/// its lease has run out is superseded by the next request.
#[inline]
pub(crate) fn admit(
    s: Snapshot,
    since: Nanos,
    now: Nanos,
    config: &Config,
    seed: u64,
) -> Next<Admission> {
    match s.state() {
        State::Closed if s.is_ramping() => ramp_admit(s, since, now, config),
        State::Closed | State::Disabled | State::MetricsOnly => Next::Keep(Admission::Call),
        State::ForcedOpen => Next::Keep(Admission::Reject(RejectReason::ForcedOpen, Nanos::NEVER)),
        State::Open => {
            let ready = open_until(s, since, config, seed);
            if now < ready {
                Next::Keep(Admission::Reject(RejectReason::Open, ready))
            } else {
                Next::Enter(round_start(s), Admission::Round(Reason::OpenElapsed))
            }
        }
        State::HalfOpen => {
            let lease_end = since.saturating_add(config.probe_lease);
            let taken = match config.rule {
                Some(_) => s.rule_taken(),
                None => s.count(),
            };
            if now >= lease_end {
                if let Some(rule) = config.rule {
                    // Probes still out when the lease ends count as failures.
                    let answered = s.successes() + s.rule_failed();
                    let out = taken.saturating_sub(answered);
                    let failed = s.rule_failed() + out;
                    if rule.decide(config.probes, answered + out, failed, s.rule_slow())
                        == Some(false)
                    {
                        return Next::Enter(reopen(s, config, None), Admission::Reopened);
                    }
                }
                Next::Enter(round_start(s), Admission::Round(Reason::ProbeLeaseExpired))
            } else if taken >= config.probes {
                let retry = config.round_due(since).filter(|due| *due > now);
                Next::Keep(Admission::Reject(
                    RejectReason::HalfOpenFull,
                    retry.map_or(lease_end, |due| due.min(lease_end)),
                ))
            } else {
                Next::Count(s.with_count(s.count() + 1), Admission::Probe)
            }
        }
    }
}

/// When the OPEN state `s`, entered at `since`, ends.
#[inline(always)]
pub(crate) fn open_until(s: Snapshot, since: Nanos, config: &Config, seed: u64) -> Nanos {
    since.saturating_add_nanos(open_nanos(s, config, seed))
}

/// Admission while ramping (slow start): the share of calls the curve
/// admits `now - since` after the close (the stamp of the close), or, once
/// the window has passed, everyone, and the word leaves the ramp within its
/// generation (a count change: permits of the ramp stay valid).
#[inline]
pub(crate) fn ramp_admit(
    s: Snapshot,
    since: Nanos,
    now: Nanos,
    config: &Config,
) -> Next<Admission> {
    let Some(ramp) = &config.ramp else {
        // A ramping word under a configuration without a ramp (never built):
        // no reason to hold calls back.
        return Next::Count(s.with_state(State::Closed), Admission::Call);
    };
    let elapsed = now.as_nanos().saturating_sub(since.as_nanos());
    match ramp.fraction_at(elapsed) {
        Some(fraction) => Next::Keep(Admission::Ramp(
            fraction,
            now.saturating_add_nanos(ramp.step_nanos()),
        )),
        None => Next::Count(s.with_state(State::Closed), Admission::Call),
    }
}

/// Whether a Closed word still ramps at `now` (pure): ramping, and the
/// window since the close (`since`) has not passed.
pub(crate) fn ramps_at(s: Snapshot, since: Nanos, now: Nanos, config: &Config) -> bool {
    s.is_ramping()
        && config.ramp.as_ref().is_some_and(|ramp| {
            now.as_nanos().saturating_sub(since.as_nanos()) < ramp.window_nanos()
        })
}

/// The backoff step a trip from the Closed word `s` (closed at `since`)
/// opens with at `now`: one past the step kept at the close, decayed by the
/// healthy time since; a trip during the ramp is a failed recovery and
/// takes the next step with no decay. Never past the cap step.
pub(crate) fn trip_step(s: Snapshot, since: Nanos, now: Nanos, config: &Config) -> u32 {
    if ramps_at(s, since, now, config) {
        return config.backoff.next_step(s.trips());
    }
    let healthy = now.as_nanos().saturating_sub(since.as_nanos());
    config
        .backoff
        .next_step(config.decayed_trips(s.trips(), healthy))
}

/// The OPEN word a trip from `s` enters at backoff step `trips`, holding an
/// upstream's hint as its span when the hint asks for longer than the
/// schedule ([`Config::hinted_nanos`]).
fn open_word(
    s: Snapshot,
    trips: u32,
    config: &Config,
    hint: Option<core::time::Duration>,
) -> Snapshot {
    let open = s.enter(State::Open).with_trips(trips);
    match config.hinted_nanos(hint, trips) {
        Some(nanos) => open.with_open_span(span_of(nanos, 0)),
        None => open,
    }
}

/// A HalfOpen round `s` that failed reopens: the next backoff step (never
/// past the cap step), the trip gate's slot kept, an upstream's hint as
/// its span.
fn reopen(s: Snapshot, config: &Config, hint: Option<core::time::Duration>) -> Snapshot {
    open_word(s, config.backoff.next_step(s.trips()), config, hint).with_counted(s.is_counted())
}

/// How long the OPEN state `s` lasts, in nanoseconds: a remote trip's span,
/// or the jittered step of the backoff schedule.
#[inline]
pub(crate) fn open_nanos(s: Snapshot, config: &Config, seed: u64) -> u64 {
    match s.open_span() {
        0 => config.backoff.open_nanos(s.trips(), seed, s.generation()),
        span => u64::from(span) * SPAN_UNIT_NANOS,
    }
}

/// The open span (see [`Snapshot::open_span`]) of `remaining` nanoseconds
/// shortened by a jitter `cut`: rounded up to whole units, so never shorter
/// than the news says minus the jitter, and at least one unit.
pub(crate) fn span_of(remaining: u64, cut: u64) -> u32 {
    let units = remaining
        .saturating_sub(cut)
        .div_ceil(SPAN_UNIT_NANOS)
        .max(1);
    u32::try_from(units).unwrap_or(u32::MAX)
}

/// News from another replica that an open period of `span` units is left on
/// the same upstream, merged at `now` into the word `s` (whose state began
/// at `since`): a monotone merge. CLOSED → OPEN for the remaining time (a
/// trip; `counted` is the trip gate's answer), or an OPEN period extended to
/// the later end; nothing else — a remote trip never closes or half-opens a
/// breaker, and never shortens an open period. Recovery stays local: the
/// breaker probes for itself when its period ends, shortened by its own
/// jitter (in `span`) so replicas that heard the same news do not probe in
/// the same instant. `true` if it is a transition.
#[inline]
pub(crate) fn remote_trip(
    s: Snapshot,
    since: Nanos,
    now: Nanos,
    span: u32,
    counted: bool,
    config: &Config,
    seed: u64,
) -> Next<bool> {
    match s.state() {
        State::Closed => Next::Enter(
            s.enter(State::Open)
                .with_trips(trip_step(s, since, now, config))
                .with_counted(counted && !s.is_detached())
                .with_open_span(span),
            true,
        ),
        State::Open => {
            let end = since.saturating_add_nanos(open_nanos(s, config, seed));
            let new = s
                .enter(State::Open)
                .with_counted(s.is_counted())
                .with_open_span(span);
            let new_end = now.saturating_add_nanos(u64::from(new.open_span()) * SPAN_UNIT_NANOS);
            if new_end > end {
                Next::Enter(new, true)
            } else {
                Next::Keep(false)
            }
        }
        _ => Next::Keep(false),
    }
}

/// The word a new probe round starts from: next generation, HalfOpen, the
/// round's first probe slot taken, trips and the trip gate's slot kept.
pub(crate) const fn round_start(s: Snapshot) -> Snapshot {
    s.enter(State::HalfOpen)
        .with_count(1)
        .with_counted(s.is_counted())
}

/// The runs after a verdict of generation `generation` in CLOSED (or
/// MetricsOnly): the word with its run of consecutive failures and its run
/// of unanswered calls, or `None` if the generation moved on. A success
/// also marks the breaker proven.
///
/// A failure extends the failure run when the policy counts runs; a
/// success or an ignored call (a business error) ends it; a drop, a slow
/// abandonment or a neutral verdict is no evidence either way and leaves it
/// (so an outer timeout that drops a hung call's permit cannot keep
/// resetting it, nor can a client mixing in broken requests). An unanswered
/// drop extends the unanswered run; any answer (success, failure, business
/// error) ends it; nothing else touches it.
#[inline]
pub(crate) fn closed_run(
    s: Snapshot,
    generation: u32,
    verdict: Verdict,
    counts_runs: bool,
) -> Next<Option<Snapshot>> {
    if s.generation() != generation {
        return Next::Keep(None);
    }
    let next = match verdict {
        v if v.is_failure() && counts_runs => s.with_count(s.count().saturating_add(1)),
        Verdict::Dropped | Verdict::AbandonedSlow | Verdict::Neutral | Verdict::Unanswered => s,
        Verdict::Success => s.with_count(0).with_proven(),
        _ => s.with_count(0),
    };
    let next = match verdict {
        Verdict::Unanswered => next.with_unanswered(s.unanswered().saturating_add(1)),
        v if v.is_answer() => next.with_unanswered(0),
        _ => next,
    };
    if next == s {
        Next::Keep(Some(next)) // invariant 8: no write when nothing changes
    } else {
        Next::Count(next, Some(next))
    }
}

/// When and how a trip from CLOSED opens: the stamp of the Closed word
/// (its close, for the decay and the ramp), the time of the trip, and the
/// upstream's hint that came with the verdict, if any.
#[derive(Copy, Clone, Debug)]
pub(crate) struct TripAt<'a> {
    pub(crate) since: Nanos,
    pub(crate) now: Nanos,
    pub(crate) config: &'a Config,
    pub(crate) hint: Option<core::time::Duration>,
}

/// What a trip from CLOSED was decided on, so its CAS can check that it
/// still holds in the word it replaces.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Decided {
    /// The window's rates: read beside the word, not in it (a racing
    /// verdict may skew them by one, as any window write may).
    Window,
    /// A run of at least this many consecutive failures.
    Failures(u32),
    /// A run of at least this many unanswered calls.
    Unanswered(u32),
    /// The pool found the host an outlier (`outlier`): decided on the last
    /// interval, beside the word. Its open period (the pool's ejection time
    /// in nanoseconds, or the backoff step's when `None`) is held as the
    /// word's span, so that its rejections leave the inline path, where a
    /// pool in panic lifts them; an upstream's longer hint still wins.
    Outlier(Option<u64>),
}

impl Decided {
    /// Whether the word `s` still has the run the trip was decided on: a
    /// success of the same generation that ended the run between the count
    /// and the trip's CAS makes the trip moot.
    const fn holds(self, s: Snapshot) -> bool {
        match self {
            Decided::Window | Decided::Outlier(_) => true,
            Decided::Failures(k) => s.count() >= k,
            Decided::Unanswered(calls) => s.unanswered() >= calls,
        }
    }
}

/// CLOSED → OPEN for generation `generation` (or, in MetricsOnly, a shadow
/// trip to itself, which never rejects), if the run it was `decided` on is
/// still there. `counted` says whether the trip gate gave this ejection a
/// slot of its budget. `true` if the decision trips.
#[inline]
pub(crate) fn trip(
    s: Snapshot,
    generation: u32,
    counted: bool,
    decided: Decided,
    at: TripAt<'_>,
) -> Next<bool> {
    if s.generation() != generation || !decided.holds(s) {
        return Next::Keep(false);
    }
    match s.state() {
        State::Closed => {
            let trips = trip_step(s, at.since, at.now, at.config);
            let mut open = open_word(s, trips, at.config, at.hint);
            if let Decided::Outlier(ejection) = decided {
                let nanos = ejection.unwrap_or_else(|| at.config.backoff.step_nanos(trips));
                open = open.with_open_span(open.open_span().max(span_of(nanos, 0)));
            }
            Next::Enter(open.with_counted(counted && !s.is_detached()), true)
        }
        State::MetricsOnly => Next::Enter(s.enter(State::MetricsOnly), true),
        _ => Next::Keep(false),
    }
}

/// A probe's verdict in HALF_OPEN: the reason of the transition it causes,
/// if any, or a count of the round (a freed slot, a success short of the
/// last).
///
/// Invariant 6: a slow success fails the round. Invariant 5: a probe whose
/// caller gave up on it (abandoned, or unanswered under the unanswered rule)
/// fails the round; a probe dropped early, ignored, or neutral frees its
/// slot for another probe of the same round.
#[inline]
pub(crate) fn probe_verdict(
    s: Snapshot,
    generation: u32,
    verdict: Verdict,
    slow: bool,
    config: &Config,
    hint: Option<core::time::Duration>,
) -> Next<Option<Reason>> {
    if s.generation() != generation || !s.is_half_open() {
        return Next::Keep(None);
    }
    let reopen = |reason| Next::Enter(reopen(s, config, hint), Some(reason));
    let close = || {
        let closed = s.enter(State::Closed).with_proven();
        let closed = match config.ramp {
            Some(_) => closed.with_ramp(),
            None => closed,
        };
        Next::Enter(closed, Some(Reason::ProbesSucceeded))
    };
    if let Some(rule) = config.rule {
        return rule_verdict(s, verdict, slow, config.probes, rule, reopen, close);
    }
    match verdict {
        Verdict::Ignored | Verdict::Neutral | Verdict::Dropped => {
            Next::Count(s.with_count(s.count().saturating_sub(1)), None)
        }
        Verdict::Failure | Verdict::Panicked => reopen(Reason::ProbeFailed),
        Verdict::AbandonedSlow | Verdict::AbandonedFailure | Verdict::Unanswered => {
            reopen(Reason::ProbeAbandoned)
        }
        Verdict::Success if slow => reopen(Reason::ProbeSlow),
        Verdict::Success if s.successes() + 1 >= config.probes => close(),
        Verdict::Success => Next::Count(s.with_successes(s.successes() + 1), None),
    }
}

/// A probe's verdict under the half-open rate rule: counted by kind, and
/// the round decided as soon as its outcome is certain
/// ([`RoundRule::decide`](crate::policy::RoundRule::decide)). A probe
/// dropped early or ignored frees its slot and counts toward nothing; an
/// abandoned one (its caller gave up on a call that hung) is a failure. A
/// slow failure counts toward both limits, as Resilience4j's `SLOW_ERROR`
/// does; a success, fast or slow, counts as one (the round's answers are
/// its successes and its failures).
fn rule_verdict(
    s: Snapshot,
    verdict: Verdict,
    slow: bool,
    probes: u32,
    rule: crate::policy::RoundRule,
    reopen: impl Fn(Reason) -> Next<Option<Reason>>,
    close: impl Fn() -> Next<Option<Reason>>,
) -> Next<Option<Reason>> {
    let (next, abandoned) = match verdict {
        Verdict::Ignored | Verdict::Neutral | Verdict::Dropped => {
            return Next::Count(s.with_count(s.count().saturating_sub(1)), None);
        }
        Verdict::Failure | Verdict::Panicked => (s.with_rule_failure(), false),
        Verdict::AbandonedSlow | Verdict::AbandonedFailure | Verdict::Unanswered => {
            (s.with_rule_failure(), true)
        }
        Verdict::Success => (s.with_successes(s.successes() + 1), false),
    };
    let next = if slow { next.with_rule_slow() } else { next };
    match rule.decide(
        probes,
        next.successes() + next.rule_failed(),
        next.rule_failed(),
        next.rule_slow(),
    ) {
        Some(false) => reopen(match (next.rule_failed() >= rule.failed_limit, abandoned) {
            (true, true) => Reason::ProbeAbandoned,
            (true, false) => Reason::ProbeFailed,
            (false, _) => Reason::ProbeSlow,
        }),
        Some(true) => close(),
        None => Next::Count(next, None),
    }
}

/// The breaker leaves its trip gate: from now on no transition of it
/// touches the gate, and the slot it held, if any, is the caller's to give
/// back. Returns the word it left in (its state, whether it held a slot), or
/// `None` if it had already left.
#[inline]
pub(crate) fn leave_gate(s: Snapshot) -> Next<Option<Snapshot>> {
    if s.is_detached() {
        Next::Keep(None)
    } else {
        Next::Count(s.with_detached(), Some(s))
    }
}

/// A manual mode (or a reset to CLOSED) from any state: `true` if it is a
/// transition. Forced open keeps the trips in a row (the backoff goes on
/// after it); every other mode restarts them. Entering a mode a breaker is
/// already in is no transition, except a reset, which always is.
#[inline]
pub(crate) fn set_mode(s: Snapshot, target: State) -> Next<bool> {
    if s.state() == target && target != State::Closed {
        return Next::Keep(false);
    }
    let trips = if target == State::ForcedOpen {
        s.trips()
    } else {
        0
    };
    Next::Enter(s.enter(target).with_trips(trips), true)
}

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;
    use core::time::Duration;

    fn config(probes: u32) -> Config {
        Config::for_tests(probes, Duration::from_secs(5), None)
    }

    fn at0(c: &Config) -> TripAt<'_> {
        TripAt {
            since: Nanos::ZERO,
            now: Nanos::ZERO,
            config: c,
            hint: None,
        }
    }

    fn secs(s: u64) -> Nanos {
        Nanos::from_secs(s)
    }

    fn open(trips: u32) -> Snapshot {
        Snapshot::INITIAL
            .enter(State::Open)
            .with_trips(trips)
            .with_counted(true)
    }

    #[test]
    fn closed_admits_and_forced_open_rejects_for_good() {
        let c = config(1);
        assert_eq!(
            admit(Snapshot::INITIAL, secs(0), secs(1), &c, 0),
            Next::Keep(Admission::Call)
        );
        let forced = Snapshot::INITIAL.enter(State::ForcedOpen);
        assert_eq!(
            admit(forced, secs(0), secs(1), &c, 0),
            Next::Keep(Admission::Reject(RejectReason::ForcedOpen, Nanos::NEVER))
        );
    }

    #[test]
    fn open_rejects_until_the_backed_off_period_ends_then_starts_a_round() {
        let c = config(1);
        // Two trips in a row: 20 s.
        let s = open(2);
        assert_eq!(
            admit(s, secs(100), secs(119), &c, 0),
            Next::Keep(Admission::Reject(RejectReason::Open, secs(120)))
        );
        let Next::Enter(round, Admission::Round(Reason::OpenElapsed)) =
            admit(s, secs(100), secs(120), &c, 0)
        else {
            panic!("the first request after the open period probes");
        };
        assert_eq!(round.state(), State::HalfOpen);
        assert_eq!(round.generation(), s.generation() + 1);
        assert_eq!((round.count(), round.trips()), (1, 2));
        assert!(round.is_counted(), "the round keeps the gate's slot");
    }

    #[test]
    fn half_open_takes_free_slots_then_rejects_then_supersedes_after_the_lease() {
        let c = config(2);
        let round = round_start(open(1));
        assert_eq!(
            admit(round, secs(10), secs(11), &c, 0),
            Next::Count(round.with_count(2), Admission::Probe)
        );
        let full = round.with_count(2);
        let Next::Keep(Admission::Reject(RejectReason::HalfOpenFull, _)) =
            admit(full, secs(10), secs(11), &c, 0)
        else {
            panic!("a full round turns the next request away");
        };
        let Next::Enter(next, Admission::Round(Reason::ProbeLeaseExpired)) =
            admit(full, secs(10), secs(15), &c, 0)
        else {
            panic!("after the lease the next request starts a new round");
        };
        assert_eq!((next.count(), next.successes()), (1, 0));
    }

    #[test]
    fn a_full_round_says_when_its_probes_are_due_capped_at_the_lease() {
        let c = Config::for_tests(1, Duration::from_secs(5), Some(Duration::from_millis(300)));
        let full = round_start(open(1));
        let at = |now| match admit(full, secs(10), now, &c, 0) {
            Next::Keep(Admission::Reject(RejectReason::HalfOpenFull, until)) => until,
            other => panic!("{other:?}"),
        };
        // Probes are due by the slow-call threshold after the round began.
        assert_eq!(at(secs(10)), secs(10) + Duration::from_millis(300));
        // Past that, the lease is what is left.
        assert_eq!(at(secs(11)), secs(15));
        // At the instant the probes fall due, they are late already: the
        // lease, not a wait of zero.
        assert_eq!(at(secs(10) + Duration::from_millis(300)), secs(15));
    }

    #[test]
    fn the_run_grows_on_failures_and_ends_on_a_success_or_business_error() {
        let s = Snapshot::INITIAL.with_count(2);
        let counted = |next: Snapshot| Next::Count(next, Some(next));
        assert_eq!(
            closed_run(s, 0, Verdict::Failure, true),
            counted(s.with_count(3))
        );
        assert_eq!(
            closed_run(s, 0, Verdict::Panicked, true),
            counted(s.with_count(3))
        );
        assert_eq!(
            closed_run(s, 0, Verdict::Success, true),
            counted(Snapshot::INITIAL.with_proven())
        );
        assert_eq!(
            closed_run(s, 0, Verdict::Ignored, true),
            counted(Snapshot::INITIAL)
        );
        for no_evidence in [Verdict::Dropped, Verdict::AbandonedSlow, Verdict::Neutral] {
            assert_eq!(
                closed_run(s, 0, no_evidence, true),
                Next::Keep(Some(s)),
                "{no_evidence:?}"
            );
        }
        // A settled breaker's success writes nothing.
        let settled = Snapshot::INITIAL.with_proven();
        assert_eq!(
            closed_run(settled, 0, Verdict::Success, true),
            Next::Keep(Some(settled))
        );
        // A verdict of another generation changes nothing.
        assert_eq!(closed_run(s, 1, Verdict::Failure, true), Next::Keep(None));
    }

    #[test]
    fn the_unanswered_run_grows_on_unanswered_drops_and_ends_on_any_answer() {
        let s = Snapshot::INITIAL.with_count(2).with_unanswered(4);
        let counted = |next: Snapshot| Next::Count(next, Some(next));
        assert_eq!(
            closed_run(s, 0, Verdict::Unanswered, true),
            counted(s.with_unanswered(5)),
            "an unanswered drop leaves the failure run and extends its own"
        );
        assert_eq!(
            closed_run(s.with_unanswered(SUCCESS_MAX), 0, Verdict::Unanswered, true),
            Next::Keep(Some(s.with_unanswered(SUCCESS_MAX))),
            "saturates"
        );
        assert_eq!(
            closed_run(s, 0, Verdict::Success, true),
            counted(Snapshot::INITIAL.with_proven())
        );
        assert_eq!(
            closed_run(s, 0, Verdict::Failure, true),
            counted(s.with_count(3).with_unanswered(0)),
            "a failure is an answer"
        );
        assert_eq!(
            closed_run(s, 0, Verdict::Ignored, true),
            counted(Snapshot::INITIAL)
        );
        for no_answer in [Verdict::Dropped, Verdict::Neutral, Verdict::AbandonedSlow] {
            assert_eq!(
                closed_run(s, 0, no_answer, true),
                Next::Keep(Some(s)),
                "{no_answer:?}"
            );
        }
        assert_eq!(
            closed_run(s, 0, Verdict::AbandonedFailure, true),
            counted(s.with_count(3)),
            "an abandoned call is a failure but no answer"
        );
    }

    #[test]
    fn a_trip_enters_open_once_for_its_own_generation() {
        let w = Decided::Window;
        let Next::Enter(open, true) = trip(Snapshot::INITIAL, 0, true, w, at0(&config(1))) else {
            panic!()
        };
        assert_eq!(
            (open.state(), open.trips(), open.is_counted()),
            (State::Open, 1, true)
        );
        assert_eq!(
            trip(open, 0, true, w, at0(&config(1))),
            Next::Keep(false),
            "another generation"
        );
        assert_eq!(
            trip(open, 1, true, w, at0(&config(1))),
            Next::Keep(false),
            "not Closed"
        );
        let shadow = Snapshot::INITIAL.enter(State::MetricsOnly);
        let Next::Enter(again, true) = trip(shadow, 1, false, w, at0(&config(1))) else {
            panic!()
        };
        assert_eq!(again.state(), State::MetricsOnly);
    }

    #[test]
    fn a_trip_on_a_run_needs_the_run_still_there() {
        let run = Snapshot::INITIAL.with_count(3).with_unanswered(2);
        for decided in [
            Decided::Failures(3),
            Decided::Unanswered(2),
            Decided::Window,
        ] {
            assert!(
                matches!(
                    trip(run, 0, false, decided, at0(&config(1))),
                    Next::Enter(_, true)
                ),
                "{decided:?}"
            );
        }
        // A success ended the runs between the count and the trip.
        let ended = run.with_count(0).with_unanswered(0);
        for decided in [Decided::Failures(3), Decided::Unanswered(2)] {
            assert_eq!(
                trip(ended, 0, false, decided, at0(&config(1))),
                Next::Keep(false),
                "{decided:?}"
            );
        }
        assert_eq!(
            trip(
                run.with_count(2),
                0,
                false,
                Decided::Failures(3),
                at0(&config(1))
            ),
            Next::Keep(false)
        );
    }

    #[test]
    fn probes_close_the_round_only_when_all_succeed_fast() {
        let round = round_start(open(3));
        assert_eq!(
            probe_verdict(
                round,
                round.generation(),
                Verdict::Success,
                false,
                &config(2),
                None
            ),
            Next::Count(round.with_successes(1), None)
        );
        let Next::Enter(closed, Some(Reason::ProbesSucceeded)) = probe_verdict(
            round.with_successes(1),
            round.generation(),
            Verdict::Success,
            false,
            &config(2),
            None,
        ) else {
            panic!()
        };
        assert_eq!(closed.state(), State::Closed);
        assert_eq!(
            (closed.trips(), closed.is_counted()),
            (3, false),
            "the backoff step is kept, to decay while healthy"
        );
        assert!(closed.is_proven());
    }

    #[test]
    fn a_failed_slow_or_abandoned_probe_reopens_one_backoff_step_longer() {
        let round = round_start(open(3));
        for (verdict, slow, reason) in [
            (Verdict::Failure, false, Reason::ProbeFailed),
            (Verdict::Panicked, false, Reason::ProbeFailed),
            (Verdict::Success, true, Reason::ProbeSlow),
            (Verdict::AbandonedSlow, true, Reason::ProbeAbandoned),
            (Verdict::AbandonedFailure, false, Reason::ProbeAbandoned),
            (Verdict::Unanswered, false, Reason::ProbeAbandoned),
        ] {
            let Next::Enter(open, Some(r)) =
                probe_verdict(round, round.generation(), verdict, slow, &config(1), None)
            else {
                panic!("{verdict:?}")
            };
            assert_eq!((open.state(), open.trips(), r), (State::Open, 4, reason));
            assert!(open.is_counted(), "the gate's slot stays with the ejection");
        }
        // Step 4 opens for the cap (60 s, `Config::for_tests`): a failed
        // round there reopens for the cap and counts no further.
        let at_cap = round_start(open(4));
        let Next::Enter(reopened, _) = probe_verdict(
            at_cap,
            at_cap.generation(),
            Verdict::Failure,
            false,
            &config(1),
            None,
        ) else {
            panic!("reopens")
        };
        assert_eq!(reopened.trips(), 4);
    }

    #[test]
    fn a_dropped_ignored_or_neutral_probe_frees_its_slot_and_a_stale_one_nothing() {
        let round = round_start(open(1)).with_count(2);
        for freed in [Verdict::Dropped, Verdict::Ignored, Verdict::Neutral] {
            assert_eq!(
                probe_verdict(round, round.generation(), freed, false, &config(2), None),
                Next::Count(round.with_count(1), None)
            );
        }
        assert_eq!(
            probe_verdict(
                round,
                round.generation() + 1,
                Verdict::Success,
                false,
                &config(2),
                None
            ),
            Next::Keep(None)
        );
    }

    fn ramped(probes: u32) -> Config {
        let mut c = config(probes);
        c.ramp = Some(crate::ramp::Ramp::new(Duration::from_secs(128), 0.1, 1.0));
        c
    }

    fn ruled(probes: u32, failure: f64) -> Config {
        let mut c = config(probes);
        c.rule = Some(crate::policy::RoundRule::new(
            probes,
            crate::policy::Rate::new(failure),
            None,
        ));
        c
    }

    #[test]
    fn a_ramping_word_admits_a_share_until_the_window_then_leaves_the_ramp_in_its_generation() {
        let c = ramped(1);
        let ramping = Snapshot::INITIAL.with_proven().with_ramp();
        // One step of a 128 s window is 1 s: the turned-away wait.
        let Next::Keep(Admission::Ramp(fraction, until)) =
            admit(ramping, secs(100), secs(101), &c, 0)
        else {
            panic!()
        };
        assert_eq!(until, secs(102));
        assert_eq!(fraction, 6554, "the floor, 1 s in: 10 % of 2^16, rounded");
        let Next::Keep(Admission::Ramp(half, _)) = admit(ramping, secs(100), secs(164), &c, 0)
        else {
            panic!()
        };
        assert!(half > crate::ramp::ONE / 2 && half < crate::ramp::ONE * 51 / 100);
        let closed = ramping.with_state(State::Closed);
        assert_eq!(
            admit(ramping, secs(100), secs(228), &c, 0),
            Next::Count(closed, Admission::Call),
            "after the window: plain Closed, same generation"
        );
        assert_eq!(
            admit(ramping, secs(100), secs(101), &config(1), 0),
            Next::Count(closed, Admission::Call),
            "no ramp configured: nothing to hold calls back for"
        );
    }

    #[test]
    fn a_trip_in_the_ramp_takes_the_next_step_and_a_later_one_decays_first() {
        let c = ramped(1);
        let kept = Snapshot::INITIAL.with_trips(3);
        let ramping = kept.with_ramp();
        // A base open period is 10 s, the cap (60 s) step 4 (`Config::for_tests`).
        assert_eq!(
            trip_step(ramping, secs(0), secs(127), &c),
            4,
            "a failed recovery"
        );
        assert_eq!(
            trip_step(ramping, secs(0), secs(128), &c),
            1,
            "12 periods healthy"
        );
        assert_eq!(
            trip_step(kept, secs(0), secs(19), &c),
            3,
            "one period: one off"
        );
        assert_eq!(trip_step(kept, secs(0), secs(9), &c), 4);
        assert_eq!(trip_step(Snapshot::INITIAL, secs(0), secs(0), &c), 1);
        // At the cap step the step counts no further, ramping or not.
        let at_cap = Snapshot::INITIAL.with_trips(4);
        assert_eq!(trip_step(at_cap.with_ramp(), secs(0), secs(1), &c), 4);
        assert_eq!(trip_step(at_cap, secs(0), secs(9), &c), 4);
        assert_eq!(
            trip_step(at_cap, secs(0), secs(40), &c),
            1,
            "cap step × base of health: back to the base"
        );
    }

    #[test]
    fn a_close_enters_the_ramp_only_when_one_is_configured() {
        let round = round_start(open(2));
        let Next::Enter(closed, Some(Reason::ProbesSucceeded)) = probe_verdict(
            round,
            round.generation(),
            Verdict::Success,
            false,
            &ramped(1),
            None,
        ) else {
            panic!()
        };
        assert!(closed.is_ramping() && closed.trips() == 2);
        let Next::Enter(plain, _) = probe_verdict(
            round,
            round.generation(),
            Verdict::Success,
            false,
            &config(1),
            None,
        ) else {
            panic!()
        };
        assert!(plain.is_closed());
    }

    #[test]
    fn under_the_rule_a_round_counts_each_kind_and_decides_once_certain() {
        let c = ruled(4, 0.5); // two failures of four reopen
        let round = round_start(open(1)).with_count(4);
        let g = round.generation();
        let Next::Count(one, None) = probe_verdict(round, g, Verdict::Failure, false, &c, None)
        else {
            panic!()
        };
        assert_eq!((one.rule_taken(), one.rule_failed()), (4, 1));
        let Next::Count(slow, None) = probe_verdict(one, g, Verdict::Success, true, &c, None)
        else {
            panic!()
        };
        assert_eq!(
            (slow.rule_slow(), slow.successes()),
            (1, 1),
            "no slow rate: a slow success is counted as slow and as a success"
        );
        assert_eq!(
            probe_verdict(one, g, Verdict::Dropped, false, &c, None),
            Next::Count(one.with_count(one.count() - 1), None),
            "a drop frees its slot and counts nothing"
        );
        let Next::Enter(reopened, Some(Reason::ProbeAbandoned)) =
            probe_verdict(one, g, Verdict::AbandonedSlow, true, &c, None)
        else {
            panic!("an abandoned probe is a failure: the second reopens")
        };
        assert_eq!((reopened.state(), reopened.trips()), (State::Open, 2));
        let Next::Count(three, None) = probe_verdict(slow, g, Verdict::Success, false, &c, None)
        else {
            panic!("1 failure, 1 slow success, 1 fast of 4: a second failure could still come")
        };
        let Next::Enter(closed, Some(Reason::ProbesSucceeded)) =
            probe_verdict(three, g, Verdict::Success, false, &c, None)
        else {
            panic!("1 failure of 4 answers: closes")
        };
        assert!(closed.is_closed());
    }

    #[test]
    fn under_the_rule_a_round_closes_once_no_answer_to_come_can_reopen_it() {
        let c = ruled(10, 0.5); // five failures of ten reopen
        let round = round_start(open(1)).with_count(10);
        let g = round.generation();
        let mut s = round;
        for i in 1..=5 {
            let Next::Count(next, None) = probe_verdict(s, g, Verdict::Success, false, &c, None)
            else {
                panic!("{i} successes of 10: five failures could still come")
            };
            s = next;
        }
        let Next::Enter(closed, Some(Reason::ProbesSucceeded)) =
            probe_verdict(s, g, Verdict::Success, false, &c, None)
        else {
            panic!("6 successes of 10: four answers to come cannot make five failures")
        };
        assert_eq!(
            (closed.state(), closed.generation()),
            (State::Closed, g + 1)
        );
        // With a failure among the answers, the sixth answer is not enough:
        // 1 failed + 4 to come could still make five.
        let one_failed = round.with_rule_failure().with_successes(4);
        let Next::Count(six, None) =
            probe_verdict(one_failed, g, Verdict::Success, false, &c, None)
        else {
            panic!("1 failure and 5 successes of 10 do not decide")
        };
        let Next::Enter(_, Some(Reason::ProbesSucceeded)) =
            probe_verdict(six, g, Verdict::Success, false, &c, None)
        else {
            panic!("1 failure and 6 successes: 1 + 3 to come < 5, closes")
        };
        // A slow failure to come counts toward both limits: with a slow
        // limit of three in ten, three answers to come keep it open.
        let mut both = ruled(10, 0.5);
        both.rule = Some(crate::policy::RoundRule::new(
            10,
            crate::policy::Rate::new(0.5),
            Some(crate::policy::Rate::new(0.3)),
        ));
        let Next::Count(seven, None) = probe_verdict(
            round.with_successes(6),
            g,
            Verdict::Success,
            false,
            &both,
            None,
        ) else {
            panic!("7 of 10 fast: three slow failures could still reopen it")
        };
        let Next::Enter(_, Some(Reason::ProbesSucceeded)) =
            probe_verdict(seven, g, Verdict::Success, false, &both, None)
        else {
            panic!("8 of 10 fast: two to come reach neither limit")
        };
    }

    #[test]
    fn under_the_rule_a_slow_failure_counts_toward_both_limits() {
        let mut c = ruled(10, 0.5);
        c.rule = Some(crate::policy::RoundRule::new(
            10,
            crate::policy::Rate::new(0.5),
            Some(crate::policy::Rate::new(0.3)),
        ));
        let round = round_start(open(1)).with_count(10).with_successes(7);
        let g = round.generation();
        let Next::Count(one, None) = probe_verdict(round, g, Verdict::Failure, true, &c, None)
        else {
            panic!()
        };
        assert_eq!(
            (one.rule_failed(), one.rule_slow(), one.successes()),
            (1, 1, 7)
        );
        let Next::Count(two, None) = probe_verdict(one, g, Verdict::Failure, true, &c, None) else {
            panic!()
        };
        // The third slow failure: 3 of 10 slow reaches 30 % (Resilience4j's
        // SLOW_ERROR), though 3 of 10 failed is short of 50 %.
        let Next::Enter(reopened, Some(Reason::ProbeSlow)) =
            probe_verdict(two, g, Verdict::Failure, true, &c, None)
        else {
            panic!("three slow failures of ten reopen at a 30 % slow limit")
        };
        assert_eq!(reopened.state(), State::Open);
    }

    #[test]
    fn under_the_rule_the_lease_counts_probes_still_out_as_failures() {
        let c = ruled(4, 0.5);
        let round = round_start(open(1)).with_count(4).with_successes(2);
        // Two of four still out when the lease (5 s) ends: a failed round.
        let Next::Enter(reopened, Admission::Reopened) = admit(round, secs(0), secs(5), &c, 0)
        else {
            panic!()
        };
        assert_eq!((reopened.state(), reopened.trips()), (State::Open, 2));
        // One still out: not enough to fail it; a new round starts.
        let Next::Enter(next, Admission::Round(Reason::ProbeLeaseExpired)) =
            admit(round.with_successes(3), secs(0), secs(5), &c, 0)
        else {
            panic!()
        };
        assert_eq!(next.state(), State::HalfOpen);
    }

    #[test]
    fn under_the_rule_the_lease_adds_the_probes_out_to_the_failures_already_counted() {
        let c = ruled(10, 0.3); // three failures of ten reopen
                                // Six taken: three fast, one failed, one slow success
                                // answered (successes 4, slow 1); one out.
        let round = round_start(open(1))
            .with_count(6)
            .with_successes(4)
            .with_rule_failure()
            .with_rule_slow();
        let Next::Enter(next, Admission::Round(Reason::ProbeLeaseExpired)) =
            admit(round, secs(0), secs(5), &c, 0)
        else {
            panic!("1 failed + 1 out = 2 of 10: a new round")
        };
        assert_eq!(next.state(), State::HalfOpen);
        // Two out: 1 + 2 = 3 failures, the round fails.
        let Next::Enter(_, Admission::Reopened) =
            admit(round.with_count(round.count() + 1), secs(0), secs(5), &c, 0)
        else {
            panic!()
        };
    }

    #[test]
    fn a_hint_longer_than_the_schedule_becomes_the_open_span() {
        let c = config(1);
        let at = |hint| TripAt {
            since: secs(0),
            now: secs(0),
            config: &c,
            hint,
        };
        let w = Decided::Window;
        let Next::Enter(hinted, true) = trip(
            Snapshot::INITIAL,
            0,
            false,
            w,
            at(Some(Duration::from_secs(60))),
        ) else {
            panic!()
        };
        assert_eq!(hinted.open_span(), span_of(60_000_000_000, 0));
        let Next::Enter(short, true) = trip(
            Snapshot::INITIAL,
            0,
            false,
            w,
            at(Some(Duration::from_secs(2))),
        ) else {
            panic!()
        };
        assert_eq!(short.open_span(), 0, "the schedule's 10 s is longer");
    }

    #[test]
    fn a_detached_breaker_trips_without_a_slot_and_leaves_only_once() {
        let Next::Count(left, Some(was)) = leave_gate(open(2)) else {
            panic!()
        };
        assert!(was.is_counted(), "it held a slot: the caller gives it back");
        assert!(left.is_detached() && !left.is_counted());
        assert_eq!(left.generation(), was.generation(), "no transition");
        assert_eq!(leave_gate(left), Next::Keep(None));
        let closed = Snapshot::INITIAL.with_detached();
        let Next::Enter(tripped, true) = trip(closed, 0, true, Decided::Window, at0(&config(1)))
        else {
            panic!()
        };
        assert!(!tripped.is_counted() && tripped.is_detached());
    }

    #[test]
    fn a_remote_trip_opens_a_closed_breaker_for_what_is_left() {
        let c = config(1);
        let Next::Enter(open, true) = remote_trip(
            Snapshot::INITIAL,
            secs(0),
            secs(100),
            span_of(3_000_000_000, 0),
            true,
            &c,
            0,
        ) else {
            panic!()
        };
        assert_eq!((open.state(), open.trips()), (State::Open, 1));
        assert!(open.is_counted());
        // 3 s in 16.8 ms units, rounded up: never shorter than the news.
        let open_for = open_nanos(open, &c, 0);
        assert!((3_000_000_000..3_000_000_000 + SPAN_UNIT_NANOS).contains(&open_for));
        // The probe comes when it ends, and the round is local from there.
        let at_end = secs(100).saturating_add_nanos(open_for);
        assert!(matches!(
            admit(open, secs(100), at_end, &c, 0),
            Next::Enter(_, Admission::Round(Reason::OpenElapsed))
        ));
    }

    #[test]
    fn a_remote_trip_only_extends_an_open_period() {
        let c = config(1);
        let local = open(1); // 10 s from 100 s: ends at 110 s
                             // 5 s left, heard at 101 s: ends at 106 s, sooner: no change.
        assert_eq!(
            remote_trip(
                local,
                secs(100),
                secs(101),
                span_of(5_000_000_000, 0),
                true,
                &c,
                0
            ),
            Next::Keep(false)
        );
        // 20 s left, heard at 101 s: ends at 121 s, later: extended.
        let Next::Enter(longer, true) = remote_trip(
            local,
            secs(100),
            secs(101),
            span_of(20_000_000_000, 0),
            true,
            &c,
            0,
        ) else {
            panic!()
        };
        assert_eq!(longer.generation(), local.generation() + 1);
        assert_eq!(longer.trips(), local.trips(), "the backoff goes on");
        assert!(longer.is_counted(), "it keeps its gate slot");
        // A jitter cut shortens what is left (never below one unit).
        let Next::Enter(cut, true) = remote_trip(
            local,
            secs(100),
            secs(101),
            span_of(20_000_000_000, 2_000_000_000),
            true,
            &c,
            0,
        ) else {
            panic!()
        };
        assert!(open_nanos(cut, &c, 0) < open_nanos(longer, &c, 0));
    }

    #[test]
    fn a_remote_trip_holds_a_gate_slot_only_when_one_was_reserved() {
        let c = config(1);
        let news = |s, counted| match remote_trip(s, secs(0), secs(1), 1, counted, &c, 0) {
            Next::Enter(open, true) => open.is_counted(),
            other => panic!("{other:?}"),
        };
        assert!(news(Snapshot::INITIAL, true));
        assert!(
            !news(Snapshot::INITIAL, false),
            "no slot reserved: none held"
        );
        let detached = Snapshot::INITIAL.with_detached();
        assert!(!news(detached, true), "a removed breaker holds none");
        assert!(!news(detached, false));
    }

    #[test]
    fn news_ending_with_the_open_period_changes_nothing() {
        let c = config(1);
        let local = open(1); // 10 s from 100 s: ends at 110 s
        let end = secs(100).saturating_add_nanos(open_nanos(local, &c, 0));
        // Heard 100 span units before that end, with exactly 100 units left.
        let heard = Nanos::from_nanos(end.as_nanos() - 100 * SPAN_UNIT_NANOS);
        assert_eq!(
            remote_trip(local, secs(100), heard, 100, true, &c, 0),
            Next::Keep(false),
            "a duplicate of the period already running is no transition"
        );
        // One unit more is a later end.
        assert!(matches!(
            remote_trip(local, secs(100), heard, 101, true, &c, 0),
            Next::Enter(_, true)
        ));
    }

    #[test]
    fn a_remote_trip_never_closes_or_half_opens() {
        let c = config(1);
        let round = round_start(open(1));
        for s in [
            round,
            Snapshot::INITIAL.enter(State::ForcedOpen),
            Snapshot::INITIAL.enter(State::Disabled),
            Snapshot::INITIAL.enter(State::MetricsOnly),
        ] {
            assert_eq!(
                remote_trip(s, secs(0), secs(1), span_of(30_000_000_000, 0), true, &c, 0),
                Next::Keep(false),
                "{s:?}"
            );
        }
    }

    #[test]
    fn manual_modes_keep_or_restart_the_backoff() {
        let s = open(5);
        let Next::Enter(forced, true) = set_mode(s, State::ForcedOpen) else {
            panic!()
        };
        assert_eq!(forced.trips(), 5);
        assert!(!forced.is_counted(), "forced open holds no gate slot");
        assert_eq!(set_mode(forced, State::ForcedOpen), Next::Keep(false));
        let Next::Enter(reset, true) = set_mode(forced, State::Closed) else {
            panic!()
        };
        assert_eq!(reset.trips(), 0);
        let Next::Enter(again, true) = set_mode(reset, State::Closed) else {
            panic!("a reset is always a transition")
        };
        assert_eq!(again.generation(), reset.generation() + 1);
    }
}
