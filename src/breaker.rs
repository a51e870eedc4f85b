//! [`Breaker`]: admission, recording, lazy recovery and the manual modes.
//!
//! The breaker composes the pieces below it: the state word ([`state`]), the
//! window ([`window`]) and the pure policy ([`policy`]). Every decision that
//! changes the state is a strong CAS on the state word from an exact snapshot
//! (invariant 1); everything else is a load.
//!
//! [`state`]: crate::state
//! [`window`]: crate::window
//! [`policy`]: crate::policy

use core::fmt;
use core::time::Duration;

use crate::builder::Builder;
use crate::clock::{Clock, Nanos, QuantaClock};
use crate::counters::CallCounters;
use crate::error::{RejectReason, Rejected};
use crate::fleet::Fleet;
use crate::observe::{BreakerSnapshot, Observer, Reason, Transition};
use crate::outcome::{Outcome, Verdict};
use crate::permit::{OwnedPermit, Permit};
use crate::policy::{Config, WindowCounts, WindowKind};
use crate::state::{Snapshot, State, StateCell};
use crate::sync::Arc;
use crate::window::Window;

/// What every breaker of one configuration shares: the validated config, the
/// clock, the observer and (in a registry) the fleet counters.
pub(crate) struct Shared<C> {
    pub(crate) config: Config,
    pub(crate) clock: C,
    observer: Option<std::sync::Arc<dyn Observer>>,
    pub(crate) fleet: Option<Arc<Fleet>>,
}

impl<C> Shared<C> {
    pub(crate) fn new(
        config: Config,
        clock: C,
        observer: Option<std::sync::Arc<dyn Observer>>,
    ) -> Shared<C> {
        Shared {
            config,
            clock,
            observer,
            fleet: None,
        }
    }

    /// Attaches fleet counters (the registry does this once, before any breaker exists).
    pub(crate) fn with_fleet(mut self, fleet: Arc<Fleet>) -> Shared<C> {
        self.fleet = Some(fleet);
        self
    }
}

impl<C> fmt::Debug for Shared<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("config", &self.config)
            .field("observer", &self.observer.is_some())
            .finish_non_exhaustive()
    }
}

/// A circuit breaker: a few atomics, no lock, no timer, no allocation per call.
///
/// ```
/// use failfast::{Breaker, ManualClock, Nanos, State};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let breaker = Breaker::builder()
///     .consecutive_failures(3)
///     .open_duration(Duration::from_secs(60))
///     .build_with_clock(clock.clone())?;
///
/// for _ in 0..3 {
///     let permit = breaker.try_acquire().expect("closed: admitted");
///     permit.failure(); // e.g. a 503
/// }
/// assert_eq!(breaker.state(), State::Open);
/// assert!(breaker.try_acquire().is_err()); // fails fast, nothing runs
///
/// clock.advance(Duration::from_secs(61));
/// let probe = breaker.try_acquire().expect("the first caller after the open time probes");
/// assert!(probe.is_probe());
/// probe.success();
/// assert_eq!(breaker.state(), State::Closed);
/// # Ok::<(), failfast::ConfigError>(())
/// ```
pub struct Breaker<C: Clock = QuantaClock> {
    cell: StateCell,
    window: Window,
    counters: Option<Box<CallCounters>>,
    id: u64,
    shared: Arc<Shared<C>>,
}

impl Breaker {
    /// A builder for a breaker on the default [`QuantaClock`] (or any clock,
    /// with [`Builder::build_with_clock`]).
    pub fn builder() -> Builder {
        Builder::new()
    }
}

/// The start of a call whose admission did not read the clock (CLOSED, no
/// slow-call timing): its age is unknown, so a drop without a verdict is
/// neutral and the call is never slow.
pub(crate) const UNTIMED: Nanos = Nanos::NEVER;

/// The probe flag and generation a permit carries back to its verdict.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Ticket {
    pub(crate) generation: u32,
    pub(crate) probe: bool,
    /// Whether this admission won a transition: the move to HalfOpen, or a
    /// superseded round. Kept in a few bytes (with `trips` and
    /// `prior_successes`) so the ticket stays two words and a permit travels
    /// in registers; [`Breaker::admission_transition`] rebuilds the rest.
    pub(crate) round: RoundStart,
    /// Trips in a row when the round started (only with `round`).
    pub(crate) trips: u8,
    /// Probe successes of the superseded round (only with `RoundStart::Superseded`).
    pub(crate) prior_successes: u8,
    pub(crate) start: Nanos,
}

/// How an admission started a probe round, if it did.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum RoundStart {
    /// An ordinary admission.
    None,
    /// Won Open → HalfOpen.
    Opened,
    /// Won HalfOpen → HalfOpen after the probe lease.
    Superseded,
}

impl<C: Clock> Breaker<C> {
    pub(crate) fn from_shared(shared: Arc<Shared<C>>, id: u64) -> Breaker<C> {
        let counters = shared.config.count_calls.then(Box::default);
        Breaker {
            cell: StateCell::new(),
            window: Window::new(shared.config.window),
            counters,
            id,
            shared,
        }
    }

    /// The validated configuration.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// The breaker's id (its jitter seed).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The current time on the breaker's clock.
    #[inline]
    pub fn now(&self) -> Nanos {
        self.shared.clock.now()
    }

    /// The current state (one atomic load).
    pub fn state(&self) -> State {
        self.cell.load().state()
    }

    /// The current generation (one atomic load).
    #[cfg(feature = "tower")]
    pub(crate) fn generation(&self) -> u32 {
        self.cell.load().generation()
    }

    /// Bytes this breaker occupies: the struct plus its window and counters on
    /// the heap (the shared config is not counted: one per registry).
    pub fn memory_bytes(&self) -> usize {
        core::mem::size_of::<Self>()
            + self.window.heap_bytes()
            + self
                .counters
                .as_ref()
                .map_or(0, |_| core::mem::size_of::<CallCounters>())
    }

    /// Asks to make a call now; see [`try_acquire_at`](Self::try_acquire_at).
    ///
    /// In CLOSED this is one atomic load, plus one clock read only when a
    /// slow-call threshold is set.
    ///
    /// # Errors
    ///
    /// [`Rejected`] when the breaker is open, forced open, or half-open with
    /// every probe slot taken.
    #[inline]
    pub fn try_acquire(&self) -> Result<Permit<'_, C>, Rejected> {
        self.ticket_now().map(|t| Permit::new(self, t))
    }

    /// Asks to make a call at `now`: a [`Permit`] to report the outcome with,
    /// or a [`Rejected`] saying why not and when to retry.
    ///
    /// OPEN turns into HALF_OPEN here, lazily: the first request after the open
    /// duration wins a CAS and becomes the first probe; at most
    /// `half_open_probes` are admitted per round.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    #[inline]
    pub fn try_acquire_at(&self, now: Nanos) -> Result<Permit<'_, C>, Rejected> {
        self.ticket_at(now).map(|t| Permit::new(self, t))
    }

    /// [`try_acquire`](Self::try_acquire) for a breaker held in an `Arc`: the
    /// permit owns a clone of the `Arc` and can move into a `'static` future.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    #[inline]
    pub fn try_acquire_owned(self: &std::sync::Arc<Self>) -> Result<OwnedPermit<C>, Rejected> {
        OwnedPermit::acquire(self.clone())
    }

    /// [`try_acquire_at`](Self::try_acquire_at) with an owned permit.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    #[inline]
    pub fn try_acquire_owned_at(
        self: &std::sync::Arc<Self>,
        now: Nanos,
    ) -> Result<OwnedPermit<C>, Rejected> {
        OwnedPermit::acquire_at(self.clone(), now)
    }

    /// Admission reading the clock only where needed (invariant 8: CLOSED
    /// without slow-call timing is one load and no clock read).
    #[inline]
    pub(crate) fn ticket_now(&self) -> Result<Ticket, Rejected> {
        let s = self.cell.load();
        if s.is_closed() {
            let start = if self.shared.config.measures_time() {
                self.now()
            } else {
                UNTIMED
            };
            return Ok(self.admit(s.generation(), false, start));
        }
        self.acquire_slow(s, self.now())
    }

    #[inline]
    pub(crate) fn ticket_at(&self, now: Nanos) -> Result<Ticket, Rejected> {
        let s = self.cell.load();
        if s.is_closed() {
            return Ok(self.admit(s.generation(), false, now));
        }
        self.acquire_slow(s, now)
    }

    #[inline]
    fn admit(&self, generation: u32, probe: bool, start: Nanos) -> Ticket {
        if let Some(c) = &self.counters {
            c.admitted();
        }
        Ticket {
            generation,
            probe,
            start,
            round: RoundStart::None,
            trips: 0,
            prior_successes: 0,
        }
    }

    /// Admits the first probe of a round this caller's CAS just started, and
    /// reports the transition.
    ///
    /// The round is complete before the observer runs (invariant 5): should
    /// the observer panic, the guard frees the probe slot this caller holds
    /// (as a neutral drop) while the panic unwinds, so the round stays open
    /// to the next request instead of waiting out the probe lease.
    fn start_round(&self, from: Snapshot, to: Snapshot, reason: Reason, now: Nanos) -> Ticket {
        let round = if reason == Reason::OpenElapsed {
            RoundStart::Opened
        } else {
            RoundStart::Superseded
        };
        let ticket = Ticket {
            round,
            trips: from.trips() as u8,               // ≤ TRIPS_MAX (63)
            prior_successes: from.successes() as u8, // ≤ SUCCESS_MAX (255)
            ..self.admit(to.generation(), true, now)
        };
        let guard = ReleaseOnUnwind {
            breaker: self,
            ticket,
        };
        self.report(from, to, reason, now, WindowCounts::default());
        core::mem::forget(guard);
        ticket
    }

    /// The transition an admission caused, rebuilt exactly as the observer saw it.
    pub(crate) fn admission_transition(&self, ticket: &Ticket) -> Option<Transition> {
        let (state, reason) = match ticket.round {
            RoundStart::None => return None,
            RoundStart::Opened => (State::Open, Reason::OpenElapsed),
            RoundStart::Superseded => (State::HalfOpen, Reason::ProbeLeaseExpired),
        };
        let from = Snapshot::INITIAL
            .with_generation(ticket.generation.wrapping_sub(1))
            .with_state(state)
            .with_trips(u32::from(ticket.trips))
            .with_successes(u32::from(ticket.prior_successes));
        Some(self.describe(
            from,
            round_start(from),
            reason,
            ticket.start,
            WindowCounts::default(),
        ))
    }

    fn reject(&self, reason: RejectReason, retry_after: Option<Duration>) -> Rejected {
        if let Some(c) = &self.counters {
            c.rejected();
        }
        Rejected::new(reason, retry_after)
    }

    /// The jittered open duration of the OPEN state `s`.
    fn open_duration(&self, s: Snapshot) -> Duration {
        self.shared
            .config
            .backoff
            .open_duration(s.trips(), self.id, s.generation())
    }

    /// When the OPEN state `s` lets the next request probe: its stamp plus
    /// its jittered open duration, in nanoseconds (the rejection path's form).
    #[inline]
    fn ready_at(&self, s: Snapshot) -> Nanos {
        let open_for = self
            .shared
            .config
            .backoff
            .open_nanos(s.trips(), self.id, s.generation());
        Nanos::from_nanos(self.cell.tripped_at(s).as_nanos().saturating_add(open_for))
    }

    /// The current word if it is no longer `s`. A rejection is decided on a
    /// stamp read after `s`, which may belong to a newer state (a racer that
    /// won the move to HalfOpen stamped its round start): before rejecting,
    /// re-decide on the current word rather than report a wait that belongs to
    /// a state the breaker has left.
    #[inline]
    fn moved_on(&self, s: Snapshot) -> Option<Snapshot> {
        let current = self.cell.load();
        (current != s).then_some(current)
    }

    /// Admission outside CLOSED. Loops only while the word changes under it
    /// (someone else made progress); never retries a lost election.
    #[cold]
    fn acquire_slow(&self, mut s: Snapshot, now: Nanos) -> Result<Ticket, Rejected> {
        let config = &self.shared.config;
        loop {
            match s.state() {
                State::Closed | State::Disabled | State::MetricsOnly => {
                    return Ok(self.admit(s.generation(), false, now));
                }
                State::ForcedOpen => return Err(self.reject(RejectReason::ForcedOpen, None)),
                State::Open => {
                    // Invariant 2 (no early probe): `tripped_at` is at least this
                    // trip's stamp (invariant 3), so nothing passes before it.
                    let ready_at = self.ready_at(s);
                    if now < ready_at {
                        if let Some(current) = self.moved_on(s) {
                            s = current;
                            continue;
                        }
                        let wait = ready_at.saturating_duration_since(now);
                        return Err(self.reject(RejectReason::Open, Some(wait)));
                    }
                    let next = round_start(s);
                    match self.cell.transition(s, next, now) {
                        Ok(()) => return Ok(self.start_round(s, next, Reason::OpenElapsed, now)),
                        // Lost the election: look at what the winner made of it.
                        Err(actual) => s = actual,
                    }
                }
                State::HalfOpen => {
                    let lease_end = self.cell.tripped_at(s) + config.probe_lease;
                    if now >= lease_end {
                        // Invariant 5 (no wedge): an unresolved round is superseded
                        // lazily; the old round's verdicts become stale.
                        let next = round_start(s);
                        match self.cell.transition(s, next, now) {
                            Ok(()) => {
                                return Ok(self.start_round(
                                    s,
                                    next,
                                    Reason::ProbeLeaseExpired,
                                    now,
                                ))
                            }
                            Err(actual) => {
                                s = actual;
                                continue;
                            }
                        }
                    }
                    if s.count() >= config.probes {
                        if let Some(current) = self.moved_on(s) {
                            s = current;
                            continue;
                        }
                        let wait = lease_end.saturating_duration_since(now);
                        return Err(self.reject(RejectReason::HalfOpenFull, Some(wait)));
                    }
                    match self.cell.compare_exchange(s, s.with_count(s.count() + 1)) {
                        Ok(()) => return Ok(self.admit(s.generation(), true, now)),
                        Err(actual) => s = actual,
                    }
                }
            }
        }
    }

    /// A permit's verdict. Invariant 4: a verdict from another generation than
    /// the current one changes nothing.
    #[inline]
    pub(crate) fn on_verdict(
        &self,
        ticket: Ticket,
        outcome: Outcome,
        now: Nanos,
    ) -> Option<Transition> {
        let config = &self.shared.config;
        // The plainest breaker (no window, no timing, no counters): a success
        // that ends no run is one load and one branch (invariant 8). Measured:
        // 82 instructions per permit-API success against 99 through the
        // general path below (callgrind). A probe takes this path too: with no
        // threshold it cannot be slow, and `verdict_slow` decides it as below.
        if config.plain && outcome == Outcome::Success {
            let s = self.cell.load();
            if s.generation() != ticket.generation || (s.is_closed() && s.count() == 0) {
                return None;
            }
            return self.verdict_slow(s, ticket, Verdict::Success, false, now);
        }
        let slow = outcome != Outcome::Ignored && config.is_slow(ticket.start, now);
        if let Some(c) = &self.counters {
            c.verdict(outcome.into(), slow);
        }
        let s = self.cell.load();
        if s.generation() != ticket.generation {
            return None;
        }
        // Invariant 8, inlined into the caller: a fast success in Closed with
        // no failure run to end is this load plus the window's write, exactly
        // what `record_closed` does for it.
        if s.is_closed() && outcome == Outcome::Success && !slow && s.count() == 0 {
            if config.window != WindowKind::None {
                self.window.record(config.window, now, false, false);
            }
            return None;
        }
        self.verdict_slow(s, ticket, outcome.into(), slow, now)
    }

    /// How a call that got no verdict ended (see [`on_drop`](Self::on_drop)),
    /// recorded like a verdict. Out of line: only drops come here, and the
    /// verdict paths above stay as short as they were.
    #[inline(never)]
    fn on_ending(&self, ticket: Ticket, verdict: Verdict, now: Nanos) -> Option<Transition> {
        let slow = match verdict {
            Verdict::Ignored | Verdict::Dropped => false,
            Verdict::AbandonedSlow => true,
            _ => self.shared.config.is_slow(ticket.start, now),
        };
        if let Some(c) = &self.counters {
            c.verdict(verdict, slow);
        }
        let s = self.cell.load();
        if s.generation() != ticket.generation {
            return None;
        }
        self.verdict_slow(s, ticket, verdict, slow, now)
    }

    /// Every other verdict: failures, runs to end, probes, MetricsOnly.
    #[inline(never)]
    fn verdict_slow(
        &self,
        s: Snapshot,
        ticket: Ticket,
        verdict: Verdict,
        slow: bool,
        now: Nanos,
    ) -> Option<Transition> {
        match s.state() {
            State::Closed | State::MetricsOnly => self.record_closed(s, verdict, slow, now),
            State::HalfOpen if ticket.probe => self.record_probe(s, verdict, slow, now),
            _ => None,
        }
    }

    /// A permit dropped without a verdict: judged by how it ended (the table
    /// on [`Verdict`]). A panic unwinding through the permit is a failure; a
    /// drop after the call hung (the slow-call threshold, or
    /// `abandoned_after`) counts against the dependency, and an abandoned
    /// probe fails its round; an earlier drop proves nothing either way: it
    /// frees a probe's slot (invariant 5) and changes nothing else.
    ///
    /// Only this path reads the clock for a drop; a verdict never pays for it.
    #[cold]
    pub(crate) fn on_drop(&self, ticket: Ticket) {
        let panicking = std::thread::panicking();
        if ticket.start == UNTIMED && !panicking {
            // Its age is unknown: neutral, and no clock read.
            return self.drop_neutral(ticket);
        }
        let now = self.now();
        let held = (ticket.start != UNTIMED).then(|| now.saturating_duration_since(ticket.start));
        let verdict = self.shared.config.judge_drop(held, panicking);
        if verdict == Verdict::Dropped {
            return self.drop_neutral(ticket);
        }
        if panicking {
            // The observer runs on this thread while it already unwinds: a
            // second panic escaping this drop would abort the process. The
            // transition is complete before the observer runs, so swallowing
            // the observer's panic loses nothing of the breaker's state.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.on_ending(ticket, verdict, now)
            }));
        } else {
            let _ = self.on_ending(ticket, verdict, now);
        }
    }

    /// A drop that means nothing: frees a probe's slot, counts it, and does
    /// not end a run of consecutive failures (an outer timeout that drops a
    /// hung call's permit early must not keep resetting the run).
    pub(crate) fn drop_neutral(&self, ticket: Ticket) {
        if ticket.probe {
            let _ = self.on_ending(ticket, Verdict::Dropped, ticket.start);
        } else if let Some(c) = &self.counters {
            c.verdict(Verdict::Dropped, false);
        }
    }

    fn record_closed(
        &self,
        s: Snapshot,
        verdict: Verdict,
        slow: bool,
        now: Nanos,
    ) -> Option<Transition> {
        let config = &self.shared.config;
        let generation = s.generation();
        let failure = verdict.is_failure();
        let consecutive = match verdict {
            _ if failure && config.consecutive_failures.is_some() => {
                self.update_run(s, |run| run.saturating_add(1))?
            }
            // A drop proves nothing about the run; a slow abandonment is
            // slowness, not a failure: neither ends nor extends it.
            Verdict::Dropped | Verdict::AbandonedSlow => s.count(),
            // Invariant 8: no write unless there is a run to end.
            _ if s.count() > 0 => self.update_run(s, |_| 0)?,
            _ => 0,
        };
        if !verdict.counts() {
            return None;
        }
        self.window.record(config.window, now, failure, slow);
        if !failure && !slow {
            return None; // a fast success never trips
        }
        let counts = self.window.counts(config.window, now);
        let reason = config.trip_reason(consecutive, counts)?;
        self.trip(generation, reason, now, counts)
    }

    /// Sets the run of consecutive failures with a CAS loop on the count field;
    /// returns the new run, or `None` if the generation moved on.
    fn update_run(&self, mut s: Snapshot, f: impl Fn(u32) -> u32) -> Option<u32> {
        let generation = s.generation();
        loop {
            let run = f(s.count());
            if run == s.count() {
                return Some(run);
            }
            match self.cell.compare_exchange(s, s.with_count(run)) {
                Ok(()) => return Some(run),
                Err(actual) if actual.generation() == generation => s = actual,
                Err(_) => return None,
            }
        }
    }

    /// Closed → Open (or a shadow trip in MetricsOnly), for generation `generation`.
    fn trip(
        &self,
        generation: u32,
        reason: Reason,
        now: Nanos,
        counts: WindowCounts,
    ) -> Option<Transition> {
        let mut s = self.cell.load();
        loop {
            if s.generation() != generation {
                return None;
            }
            let next = match s.state() {
                State::Closed => s.enter(State::Open).with_trips(1),
                State::MetricsOnly => s.enter(State::MetricsOnly),
                _ => return None,
            };
            let fleet = self.shared.fleet.as_deref().filter(|_| next.is_open());
            if let Some(fleet) = fleet {
                if !fleet.try_reserve_trip() {
                    return None; // over the fleet-wide cap: stay Closed, refusal counted
                }
            }
            match self.cell.transition(s, next, now) {
                Ok(()) => {
                    if next.state() == State::MetricsOnly {
                        self.window.reset(self.shared.config.window, now);
                    }
                    return Some(self.report(s, next, reason, now, counts));
                }
                Err(actual) => {
                    if let Some(fleet) = fleet {
                        fleet.cancel_trip();
                    }
                    s = actual;
                }
            }
        }
    }

    fn record_probe(
        &self,
        mut s: Snapshot,
        verdict: Verdict,
        slow: bool,
        now: Nanos,
    ) -> Option<Transition> {
        let generation = s.generation();
        let config = &self.shared.config;
        loop {
            if s.generation() != generation || !s.is_half_open() {
                return None;
            }
            let reopen = s.enter(State::Open).with_trips(s.trips() + 1);
            let (next, reason) = match verdict {
                // Frees the slot for another probe of this round.
                Verdict::Ignored | Verdict::Dropped => {
                    (s.with_count(s.count().saturating_sub(1)), None)
                }
                Verdict::Failure | Verdict::Panicked => (reopen, Some(Reason::ProbeFailed)),
                // Invariant 5: a caller that gave up on a hung probe fails
                // the round, so impatient clients cannot turn one probe per
                // open period into one probe per client.
                Verdict::AbandonedSlow | Verdict::AbandonedFailure => {
                    (reopen, Some(Reason::ProbeAbandoned))
                }
                // Invariant 6: a slow probe fails the round.
                Verdict::Success if slow => (reopen, Some(Reason::ProbeSlow)),
                Verdict::Success if s.successes() + 1 >= config.probes => (
                    s.enter(State::Closed).with_trips(0),
                    Some(Reason::ProbesSucceeded),
                ),
                Verdict::Success => (s.with_successes(s.successes() + 1), None),
            };
            let Some(reason) = reason else {
                match self.cell.compare_exchange(s, next) {
                    Ok(()) => return None,
                    Err(actual) => {
                        s = actual;
                        continue;
                    }
                }
            };
            match self.cell.transition(s, next, now) {
                Ok(()) => {
                    if next.is_closed() {
                        self.window.reset(config.window, now);
                    }
                    // The closing success is one of the counts that caused the
                    // transition: report it (as the failure that trips is).
                    let from = if next.is_closed() {
                        s.with_successes(s.successes() + 1)
                    } else {
                        s
                    };
                    return Some(self.report(from, next, reason, now, WindowCounts::default()));
                }
                Err(actual) => s = actual,
            }
        }
    }

    /// Publishes a won transition: fleet counters, observer, and the value returned.
    fn report(
        &self,
        from: Snapshot,
        to: Snapshot,
        reason: Reason,
        now: Nanos,
        window: WindowCounts,
    ) -> Transition {
        if let Some(fleet) = &self.shared.fleet {
            fleet.on_transition(from.state(), to.state());
        }
        let transition = self.describe(from, to, reason, now, window);
        if let Some(observer) = &self.shared.observer {
            observer.on_transition(&transition);
        }
        transition
    }

    /// The [`Transition`] from `from` to `to` (pure).
    fn describe(
        &self,
        from: Snapshot,
        to: Snapshot,
        reason: Reason,
        now: Nanos,
        window: WindowCounts,
    ) -> Transition {
        Transition {
            from: from.state(),
            to: to.state(),
            reason,
            generation: to.generation(),
            at: now,
            breaker_id: self.id,
            window,
            consecutive_failures: if from.is_half_open() { 0 } else { from.count() },
            probe_successes: if from.is_half_open() {
                from.successes()
            } else {
                0
            },
            trips_in_a_row: to.trips(),
            open_for: to.is_open().then(|| self.open_duration(to)),
        }
    }

    /// Moves to a manual mode (or back to Closed) from any state.
    fn set_mode(&self, target: State, reason: Reason, now: Nanos) -> Option<Transition> {
        let mut s = self.cell.load();
        loop {
            if s.state() == target && target != State::Closed {
                return None; // already there
            }
            let trips = if target == State::ForcedOpen {
                s.trips()
            } else {
                0
            };
            let next = s.enter(target).with_trips(trips);
            match self.cell.transition(s, next, now) {
                Ok(()) => {
                    if matches!(target, State::Closed | State::MetricsOnly) {
                        self.window.reset(self.shared.config.window, now);
                    }
                    return Some(self.report(s, next, reason, now, WindowCounts::default()));
                }
                Err(actual) => s = actual,
            }
        }
    }

    /// Rejects every call until [`reset`](Self::reset). Returns the transition,
    /// or `None` if already forced open.
    pub fn force_open(&self) -> Option<Transition> {
        self.force_open_at(self.now())
    }

    /// [`force_open`](Self::force_open) at `now`.
    pub fn force_open_at(&self, now: Nanos) -> Option<Transition> {
        self.set_mode(State::ForcedOpen, Reason::ForceOpen, now)
    }

    /// Admits every call and never trips until [`reset`](Self::reset): the
    /// window and the failure run record nothing. Call counters, if kept
    /// ([`Builder::count_calls`](crate::Builder::count_calls)), still count
    /// what passes through.
    pub fn disable(&self) -> Option<Transition> {
        self.disable_at(self.now())
    }

    /// [`disable`](Self::disable) at `now`.
    pub fn disable_at(&self, now: Nanos) -> Option<Transition> {
        self.set_mode(State::Disabled, Reason::Disable, now)
    }

    /// Records and evaluates, never rejects (a shadow roll-out): a trip
    /// condition produces a MetricsOnly → MetricsOnly transition instead of
    /// opening. Starts from an empty window.
    pub fn metrics_only(&self) -> Option<Transition> {
        self.metrics_only_at(self.now())
    }

    /// [`metrics_only`](Self::metrics_only) at `now`.
    pub fn metrics_only_at(&self, now: Nanos) -> Option<Transition> {
        self.set_mode(State::MetricsOnly, Reason::MetricsOnly, now)
    }

    /// Back to a fresh CLOSED breaker: window and runs cleared, backoff
    /// restarted. Always a transition, even from Closed, so it is always
    /// observed: the result is always `Some`.
    pub fn reset(&self) -> Option<Transition> {
        self.reset_at(self.now())
    }

    /// [`reset`](Self::reset) at `now`.
    pub fn reset_at(&self, now: Nanos) -> Option<Transition> {
        self.set_mode(State::Closed, Reason::Reset, now)
    }

    /// A read-only view of the breaker; see [`snapshot_at`](Self::snapshot_at).
    pub fn snapshot(&self) -> BreakerSnapshot {
        self.snapshot_at(self.now())
    }

    /// State, time in state, window counts and rates, and call counters at
    /// `now`. Loads only: reading it never disturbs the hot path.
    pub fn snapshot_at(&self, now: Nanos) -> BreakerSnapshot {
        let s = self.cell.load();
        let since = self.cell.tripped_at(s);
        let window = self.window.counts(self.shared.config.window, now);
        // The trip conditions judge rates only from `min_calls` calls on;
        // below that a rate is noise (one failure in one call is not 100 %).
        let enough = window.calls >= self.shared.config.min_calls;
        let retry_after = s
            .is_open()
            .then(|| self.ready_at(s).saturating_duration_since(now));
        BreakerSnapshot {
            state: s.state(),
            generation: s.generation(),
            time_in_state: now.saturating_duration_since(since),
            retry_after,
            failure_rate: enough.then(|| window.failure_rate()),
            slow_call_rate: enough.then(|| window.slow_call_rate()),
            window,
            consecutive_failures: if s.is_half_open() { 0 } else { s.count() },
            trips_in_a_row: s.trips(),
            calls: self.counters.as_ref().map(|c| c.read()),
        }
    }

    /// Whether this breaker is indistinguishable from a fresh one at `now`:
    /// Closed, no failure run, and no failure or slow call in its window.
    /// The registry evicts only such breakers.
    pub fn is_pristine_at(&self, now: Nanos) -> bool {
        let s = self.cell.load();
        if !s.is_closed() || s.count() != 0 || s.trips() != 0 {
            return false;
        }
        let w = self.window.counts(self.shared.config.window, now);
        w.failures == 0 && w.slow == 0
    }
}

/// Frees the probe slot of `ticket` if dropped: armed while the observer of a
/// round start runs, forgotten once it returns.
struct ReleaseOnUnwind<'a, C: Clock> {
    breaker: &'a Breaker<C>,
    ticket: Ticket,
}

impl<C: Clock> Drop for ReleaseOnUnwind<'_, C> {
    fn drop(&mut self) {
        // Neutral: the observer's panic says nothing about the dependency.
        let _ = self
            .breaker
            .on_ending(self.ticket, Verdict::Dropped, self.ticket.start);
    }
}

/// The word a new probe round starts from: next generation, HalfOpen, the
/// winner holding the first probe slot, trips kept.
fn round_start(from: Snapshot) -> Snapshot {
    from.enter(State::HalfOpen).with_count(1)
}

impl<C: Clock> fmt::Debug for Breaker<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker")
            .field("id", &self.id)
            .field("state", &self.cell)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

/// Mutation testing (`.cargo/mutants.toml`): what no public API reaches.
#[cfg(all(test, not(failfast_loom)))]
mod mutants_tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn shared_debug_names_the_config_and_the_observer() {
        let config = Breaker::builder()
            .consecutive_failures(3)
            .build_config()
            .unwrap();
        let shared = Shared::new(config, ManualClock::new(), None);
        let s = format!("{shared:?}");
        assert!(s.starts_with("Shared"), "{s}");
        assert!(s.contains("consecutive_failures: Some(3)"), "{s}");
        assert!(s.contains("observer: false"), "{s}");
    }

    fn failing_after(k: u32) -> Breaker<ManualClock> {
        Breaker::builder()
            .consecutive_failures(k)
            .open_duration(Duration::from_secs(1))
            .build_with_clock(ManualClock::new())
            .unwrap()
    }

    /// A run update whose CAS loses to another failure of the same
    /// generation retries on the word it found: no failure is lost.
    #[test]
    fn a_run_update_that_loses_to_a_failure_retries() {
        let b = failing_after(3);
        let s = b.cell.load();
        b.try_acquire_at(Nanos::ZERO)
            .unwrap()
            .failure_at(Nanos::ZERO);
        assert_eq!(b.update_run(s, |run| run + 1), Some(2));
        assert_eq!(b.cell.load().count(), 2);
    }

    /// A run update whose CAS loses to a transition gives up (invariant 4):
    /// it writes nothing into the new generation's word.
    #[test]
    fn a_run_update_that_loses_to_a_transition_gives_up() {
        let b = failing_after(3);
        let s = b.cell.load();
        b.force_open_at(Nanos::ZERO).unwrap();
        let after = b.cell.load();
        assert_eq!(b.update_run(s, |run| run + 1), None);
        assert_eq!(b.cell.load(), after);
    }

    /// A probe verdict whose CAS loses to a newer round (the lease expired)
    /// changes nothing: it cannot close the newer round (invariants 4, 5).
    #[test]
    fn a_probe_verdict_that_loses_to_a_newer_round_gives_up() {
        let b = failing_after(1);
        let secs = Nanos::from_secs;
        b.try_acquire_at(secs(0)).unwrap().failure_at(secs(0));
        let old = b.try_acquire_at(secs(1)).unwrap();
        assert!(old.is_probe());
        let round = b.cell.load();
        // The lease (= the open duration, 1 s) has passed: a new round.
        let new = b.try_acquire_at(secs(2)).unwrap();
        assert!(new.is_probe() && new.generation() != old.generation());
        let newer = b.cell.load();
        assert_eq!(
            b.record_probe(round, Verdict::Success, false, secs(2)),
            None
        );
        assert_eq!(b.cell.load(), newer);
        assert_eq!(b.state(), State::HalfOpen);
        drop((old, new));
    }
}
