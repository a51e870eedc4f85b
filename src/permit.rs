//! The permit: the right to make one call, and the duty to report it. One
//! type, [`OwnedPermit`], over any owner of a breaker — a reference (the
//! [`Permit`] alias), an `Arc`, a registry [`Handle`](crate::Handle) — and
//! the admissions that hand it out.

use core::fmt;
use core::ops::Deref;
use core::time::Duration;

use crate::breaker::Breaker;
use crate::clock::{Clock, Nanos, QuantaClock};
use crate::error::Rejected;
use crate::observe::Transition;
use crate::outcome::Outcome;
use crate::ticket::Ticket;

/// An admitted call. Report its outcome with [`success`](Self::success),
/// [`failure`](Self::failure), [`ignore`](Self::ignore) or
/// [`record`](Self::record) (each with an `_at(now)` twin).
///
/// The permit owns its breaker through `B`: a reference for the borrowed
/// [`Permit`] that [`Breaker::try_acquire`] returns, an `Arc<Breaker>` (the
/// default) from [`Breaker::try_acquire_owned`], a registry
/// [`Handle`](crate::Handle) — anything that derefs to the breaker — so it
/// can travel into a `'static` future (a tower response future, a spawned
/// task).
///
/// The permit remembers the generation it was admitted in: a verdict that
/// arrives after the breaker moved on (it opened, or a probe round was
/// superseded) changes nothing (invariant 4).
///
/// Dropping a permit without a verdict is judged by how the call ended (the
/// crate docs have the whole table):
/// * dropped while the thread panics: a **failure** (a probe's round fails);
/// * dropped after the call hung — at least the slow-call threshold, or
///   [`abandoned_after`](crate::Builder::abandoned_after) — the caller gave
///   up on it (an outer timeout, a client that went away): a **slow call**
///   when the policy has a slow-call rate, else a **failure**; a probe's
///   round fails ([`Reason::ProbeAbandoned`](crate::Reason::ProbeAbandoned));
/// * dropped sooner, or with no known start: **neutral** — it frees its probe
///   slot at once (invariant 5) and ends no run of consecutive failures.
///
/// Each verdict returns the [`Transition`] it caused, if any.
///
/// ```
/// use failfast::{Breaker, ManualClock, Nanos};
/// use std::sync::Arc;
///
/// let breaker = Arc::new(Breaker::builder().consecutive_failures(1).build_with_clock(ManualClock::new())?);
/// let permit = breaker.try_acquire_owned_at(Nanos::ZERO).unwrap();
/// std::thread::spawn(move || { permit.success_at(Nanos::ZERO); }).join().unwrap();
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[must_use = "a permit reports its call's outcome; dropping it is judged by its age"]
pub struct OwnedPermit<
    C: Clock = QuantaClock,
    B: Deref<Target = Breaker<C>> = std::sync::Arc<Breaker<C>>,
> {
    breaker: B,
    ticket: Ticket,
    done: bool,
}

/// A permit that borrows its breaker: what [`Breaker::try_acquire`] returns.
///
/// ```
/// use failfast::{Breaker, ManualClock, Nanos, Outcome, State};
/// use std::time::Duration;
///
/// let breaker = Breaker::builder()
///     .consecutive_failures(2)
///     .slow_call_threshold(Duration::from_millis(500))
///     .build_with_clock(ManualClock::new())?;
///
/// let permit = breaker.try_acquire_at(Nanos::ZERO).unwrap();
/// assert!(!permit.is_probe());
/// // A success that took 800 ms: a success *and* a slow call.
/// assert!(permit.record_at(Outcome::Success, Nanos::from_millis(800)).is_none());
///
/// let permit = breaker.try_acquire_at(Nanos::from_secs(1)).unwrap();
/// drop(permit); // no verdict, dropped at once: neutral
/// assert_eq!(breaker.state(), State::Closed);
/// # Ok::<(), failfast::ConfigError>(())
/// ```
pub type Permit<'a, C = QuantaClock> = OwnedPermit<C, &'a Breaker<C>>;

impl<C: Clock> Breaker<C> {
    /// Asks to make a call now; see [`try_acquire_at`](Self::try_acquire_at).
    ///
    /// In CLOSED this is one atomic load, plus one clock read only when a
    /// slow-call threshold is set.
    ///
    /// # Errors
    ///
    /// [`Rejected`] when the breaker is open, forced open, or half-open with
    /// every probe slot taken.
    #[inline(always)]
    pub fn try_acquire(&self) -> Result<Permit<'_, C>, Rejected> {
        OwnedPermit::acquire(self)
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
    #[inline(always)]
    pub fn try_acquire_at(&self, now: Nanos) -> Result<Permit<'_, C>, Rejected> {
        OwnedPermit::acquire_at(self, now)
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
}

impl<C: Clock, B: Deref<Target = Breaker<C>>> OwnedPermit<C, B> {
    /// Asks `breaker` to admit a call now, keeping `breaker` in the permit.
    ///
    /// # Errors
    ///
    /// As [`Breaker::try_acquire`].
    #[inline(always)]
    pub fn acquire(breaker: B) -> Result<OwnedPermit<C, B>, Rejected> {
        let ticket = breaker.ticket_now()?;
        Ok(OwnedPermit::new(breaker, ticket))
    }

    /// Asks `breaker` to admit a call at `now`, keeping `breaker` in the permit.
    ///
    /// # Errors
    ///
    /// As [`Breaker::try_acquire`].
    #[inline(always)]
    pub fn acquire_at(breaker: B, now: Nanos) -> Result<OwnedPermit<C, B>, Rejected> {
        let ticket = breaker.ticket_at(now)?;
        Ok(OwnedPermit::new(breaker, ticket))
    }

    #[inline(always)]
    pub(crate) fn new(breaker: B, ticket: Ticket) -> OwnedPermit<C, B> {
        OwnedPermit {
            breaker,
            ticket,
            done: false,
        }
    }

    /// The owner of the breaker this permit belongs to.
    pub fn breaker(&self) -> &B {
        &self.breaker
    }

    /// Whether this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.ticket.is_probe()
    }

    /// The generation the call was admitted in.
    pub fn generation(&self) -> u32 {
        self.ticket.generation()
    }

    /// When the call was admitted, or [`Nanos::NEVER`] when the admission
    /// did not read the clock (a breaker that does not time calls, through
    /// [`try_acquire`](Breaker::try_acquire) in CLOSED).
    pub fn started_at(&self) -> Nanos {
        self.ticket.start
    }

    /// The transition this admission caused, if any: this call won the
    /// move to HalfOpen (or superseded an expired round) and is the first
    /// probe of its round. The observer saw the same value; a caller that
    /// knows more (the upstream's name) can report it itself.
    pub fn transition(&self) -> Option<Transition> {
        self.breaker.admission_transition(&self.ticket)
    }

    /// Reports `outcome`, reading the clock only when the verdict needs the
    /// time: the call is timed or lands in a time window, or the verdict can
    /// cause a transition (a failure, or any probe verdict), whose stamp must
    /// be the real time.
    #[inline(always)]
    pub fn record(mut self, outcome: Outcome) -> Option<Transition> {
        if outcome == Outcome::Success {
            self.done = true;
            return self.breaker.on_success(self.ticket, None);
        }
        let now = self.breaker.verdict_time(self.ticket, outcome);
        self.done = true;
        self.breaker.on_any_verdict(self.ticket, outcome, now)
    }

    /// Reports `outcome` for a call that ended at `now`.
    #[inline(always)]
    pub fn record_at(mut self, outcome: Outcome, now: Nanos) -> Option<Transition> {
        self.done = true;
        self.breaker.on_verdict(self.ticket, outcome, now)
    }

    /// Reports `outcome` with the upstream's hint of when to come back,
    /// if it gave one (a 429's or 503's `Retry-After`, a gRPC pushback:
    /// the classifiers of `failfast::http`, feature `http`, read them, and
    /// [`failfast::hint`](crate::hint) parses them).
    ///
    /// If this verdict trips the breaker (or fails its probe), the trip
    /// opens for at least the hint, clamped to [the backoff schedule's
    /// period, 10 minutes] ([`Builder::max_hint`](crate::Builder::max_hint)
    /// sets the cap), and a rejection reports that time in
    /// [`Rejected::retry_after`]: the hint travels with the verdict, and
    /// costs no memory. With [`Builder::hints`](crate::Builder::hints), a
    /// hint that does not trip is remembered, and the next trip — a later
    /// verdict's, while the hint has not elapsed — opens for it too; the
    /// latest hint wins. With [`Builder::hints_off`](crate::Builder::hints_off)
    /// this is [`record`](Self::record). A hint never turns a call away
    /// while the breaker is Closed.
    ///
    /// ```
    /// use failfast::{Breaker, ManualClock, Nanos, Outcome};
    /// use std::time::Duration;
    ///
    /// let breaker = Breaker::builder()
    ///     .consecutive_failures(2)
    ///     .open_duration(Duration::from_secs(5))
    ///     .hints() // remember hints that do not trip
    ///     .build_with_clock(ManualClock::new())?;
    /// let at = Nanos::ZERO;
    /// // A 503 with `Retry-After: 120` does not trip on its own...
    /// let hint = Some(Duration::from_secs(120));
    /// breaker.try_acquire_at(at)?.record_hinted_at(Outcome::Failure, hint, at);
    /// // ...but the next trip, a timeout with no hint, honours it.
    /// breaker.try_acquire_at(at)?.failure_at(at);
    /// let rejected = breaker.try_acquire_at(Nanos::from_secs(100)).unwrap_err();
    /// assert!(rejected.retry_after() >= Some(Duration::from_secs(20)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn record_hinted(self, outcome: Outcome, hint: Option<Duration>) -> Option<Transition> {
        match hint {
            None => self.record(outcome),
            Some(_) => {
                let now = self.breaker.now();
                self.record_hinted_at(outcome, hint, now)
            }
        }
    }

    /// [`record_hinted`](Self::record_hinted) for a call that ended at `now`.
    pub fn record_hinted_at(
        mut self,
        outcome: Outcome,
        hint: Option<Duration>,
        now: Nanos,
    ) -> Option<Transition> {
        self.done = true;
        self.breaker
            .on_hinted_verdict(self.ticket, outcome, now, hint)
    }

    /// Reports a success.
    #[inline(always)]
    pub fn success(self) -> Option<Transition> {
        self.record(Outcome::Success)
    }

    /// Reports a success that ended at `now`.
    #[inline(always)]
    pub fn success_at(self, now: Nanos) -> Option<Transition> {
        self.record_at(Outcome::Success, now)
    }

    /// Reports a failure.
    #[inline(always)]
    pub fn failure(self) -> Option<Transition> {
        self.record(Outcome::Failure)
    }

    /// Reports a failure that ended at `now` (a timeout: pass the instant it fired).
    #[inline(always)]
    pub fn failure_at(self, now: Nanos) -> Option<Transition> {
        self.record_at(Outcome::Failure, now)
    }

    /// Reports a business error: counts neither for nor against the dependency.
    pub fn ignore(self) -> Option<Transition> {
        let start = self.ticket.start;
        self.record_at(Outcome::Ignored, start)
    }

    /// [`ignore`](Self::ignore) at `now` (the time is not used; kept for symmetry).
    pub fn ignore_at(self, now: Nanos) -> Option<Transition> {
        self.record_at(Outcome::Ignored, now)
    }

    /// Records `outcome` at `at`, or when the breaker needs the time, as
    /// [`record`](Self::record) decides (at once with a hint), with the
    /// upstream's hint if it gave one (see
    /// [`record_hinted`](Self::record_hinted)): a layer's verdict, whose
    /// transition reaches the breaker's hooks like any other.
    #[cfg(feature = "tower")]
    #[inline]
    pub(crate) fn record_hinted_at_or_now(
        mut self,
        outcome: Outcome,
        hint: Option<Duration>,
        at: Option<Nanos>,
    ) {
        let now = match (at, hint) {
            (Some(at), _) => at,
            (None, Some(_)) => self.breaker.now(),
            (None, None) => self.breaker.verdict_time(self.ticket, outcome),
        };
        self.done = true;
        if let Some(hint) = hint {
            let _ = self.breaker.on_layer_hint(self.ticket, outcome, now, hint);
        } else if self.ticket.is_answered() {
            // A stream: slow if its head was (`on_ending`), not by its length.
            let _ = self.breaker.on_ending(self.ticket, outcome.into(), now);
        } else {
            let _ = self.breaker.on_verdict(self.ticket, outcome, now);
        }
    }

    /// The response head came at `now`: from here the call is a stream,
    /// judged by its progress rather than its age (see
    /// [`Config::judge_stream_drop`](crate::policy::Config)). Whether the
    /// head was slow is decided now and kept for the verdict at the end.
    #[cfg(feature = "tower")]
    pub(crate) fn answered_at(&mut self, now: Nanos) {
        let start = self.ticket.start;
        let slow = start != crate::ticket::UNTIMED && self.breaker.config().is_slow(start, now);
        self.ticket = self.ticket.answered(now, slow);
    }

    /// The stream made progress at `now` (a frame arrived): a drop is judged
    /// by the time since.
    #[cfg(feature = "tower")]
    pub(crate) fn progress_at(&mut self, now: Nanos) {
        self.ticket.progress_at(now);
    }

    /// Whether a call ending at `end` is slow, as the breaker judges it: a
    /// stream by its head, any other call by its duration (never without
    /// an end, or without a slow-call threshold).
    #[cfg(all(feature = "tower", any(feature = "tracing", feature = "metrics")))]
    pub(crate) fn is_slow_at(&self, end: Option<Nanos>) -> bool {
        if self.ticket.is_answered() {
            return self.ticket.head_was_slow();
        }
        let start = self.ticket.start;
        end.is_some_and(|end| {
            start != crate::ticket::UNTIMED && self.breaker.config().is_slow(start, end)
        })
    }

    /// What dropping this permit at `now` would record, without recording
    /// it (the breaker's own judgement, for a layer that names the ending).
    #[cfg(all(feature = "tower", any(feature = "tracing", feature = "metrics")))]
    pub(crate) fn judge_drop_at(&self, now: Nanos, panicking: bool) -> crate::outcome::Verdict {
        self.breaker.judge_drop(self.ticket, now, panicking)
    }

    /// Restarts the call's clock at `now`: for a permit taken ahead of its
    /// call (a balancer's readiness), so the wait is not timed.
    #[cfg(feature = "tower")]
    pub(crate) fn restart_at(&mut self, now: Nanos) {
        self.ticket.start = now;
    }

    /// Gives the permit back with no verdict, neutral whatever its age or
    /// the thread's state: for the crate's own code that must let go of a
    /// permit no call ran on, or while user code (a hook) panics.
    #[cfg(feature = "tower")]
    pub(crate) fn release(mut self) {
        self.done = true;
        self.breaker.drop_neutral(self.ticket);
    }
}

impl<C: Clock, B: Deref<Target = Breaker<C>>> Drop for OwnedPermit<C, B> {
    #[inline(always)]
    fn drop(&mut self) {
        if !self.done {
            self.breaker.on_drop(self.ticket);
        }
    }
}

impl<C: Clock, B: Deref<Target = Breaker<C>>> fmt::Debug for OwnedPermit<C, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit")
            .field("generation", &self.ticket.generation())
            .field("probe", &self.ticket.is_probe())
            .field("start", &self.ticket.start)
            .finish()
    }
}
