//! Observation: [`Transition`], [`Reason`], the [`Observer`] trait, and the
//! read-only [`BreakerSnapshot`].
//!
//! Observers run only on transitions — never per call — on the thread whose
//! CAS won the transition, exactly once per generation change (invariant 1).
//! Every transitioning method also returns the [`Transition`] it caused, so a
//! caller that knows more (the upstream's name, say) can report it itself.

use core::fmt;
use core::time::Duration;

use crate::clock::Nanos;
use crate::outlier::OutlierRule;
use crate::state::State;
use crate::window::WindowCounts;

/// Why a transition happened.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// Closed → Open: `consecutive_failures` failures in a row.
    ConsecutiveFailures,
    /// Closed → Open: the window's failure rate reached the threshold.
    FailureRate,
    /// Closed → Open: the window's slow-call rate reached the threshold.
    SlowCallRate,
    /// Closed → Open: calls in a row ended without any answer — each dropped
    /// by its caller, after at least the `unanswered` rule's age, with no
    /// verdict between them (see
    /// [`Builder::unanswered`](crate::Builder::unanswered)). A hung upstream
    /// behind impatient clients: nothing is ever slow or failed, yet nothing
    /// comes back.
    Unresponsive,
    /// Open → HalfOpen: the open duration passed; the request that won the CAS is the first probe.
    OpenElapsed,
    /// HalfOpen → HalfOpen: the probe lease ran out before the round finished; a new round starts.
    ProbeLeaseExpired,
    /// HalfOpen → Open: a probe failed.
    ProbeFailed,
    /// HalfOpen → Open: a probe succeeded, but slower than the slow-call threshold.
    ProbeSlow,
    /// HalfOpen → Open: a probe's caller gave up on it (its permit was dropped
    /// without a verdict after the slow-call threshold or `abandoned_after`).
    ProbeAbandoned,
    /// HalfOpen → Closed: every probe of the round succeeded fast.
    ProbesSucceeded,
    /// Closed → Open, or Open → Open to a later end: another replica
    /// reported a trip of the same upstream ([`RemoteTrip`](crate::RemoteTrip)).
    RemoteTrip,
    /// Closed → Open: the host is an outlier of its pool, by its success
    /// rate or its failure percentage (see [`Outliers`](crate::Outliers)).
    Outlier,
    /// Closed → Open: the host is an outlier of its pool by its slow-call
    /// rate (the latency rule of [`Outliers`](crate::Outliers)).
    SlowOutlier,
    /// Manual: [`force_open`](crate::Breaker::force_open).
    ForceOpen,
    /// Manual: [`disable`](crate::Breaker::disable).
    Disable,
    /// Manual: [`metrics_only`](crate::Breaker::metrics_only).
    MetricsOnly,
    /// Manual: [`reset`](crate::Breaker::reset).
    Reset,
}

impl Reason {
    /// A short snake_case name for logs and metrics labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::ConsecutiveFailures => "consecutive_failures",
            Reason::FailureRate => "failure_rate",
            Reason::SlowCallRate => "slow_call_rate",
            Reason::Unresponsive => "unresponsive",
            Reason::OpenElapsed => "open_elapsed",
            Reason::ProbeLeaseExpired => "probe_lease_expired",
            Reason::ProbeFailed => "probe_failed",
            Reason::ProbeSlow => "probe_slow",
            Reason::ProbeAbandoned => "probe_abandoned",
            Reason::ProbesSucceeded => "probes_succeeded",
            Reason::RemoteTrip => "remote_trip",
            Reason::Outlier => "outlier",
            Reason::SlowOutlier => "slow_outlier",
            Reason::ForceOpen => "force_open",
            Reason::Disable => "disable",
            Reason::MetricsOnly => "metrics_only",
            Reason::Reset => "reset",
        }
    }

    /// Whether this reason is a trip (a move toward rejecting calls).
    pub const fn is_trip(self) -> bool {
        matches!(
            self,
            Reason::ConsecutiveFailures
                | Reason::FailureRate
                | Reason::SlowCallRate
                | Reason::Unresponsive
                | Reason::ProbeFailed
                | Reason::ProbeSlow
                | Reason::ProbeAbandoned
                | Reason::RemoteTrip
                | Reason::Outlier
                | Reason::SlowOutlier
        )
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One state change, with the counts that caused it.
///
/// In `MetricsOnly` mode a trip condition produces a transition from
/// `MetricsOnly` to `MetricsOnly` (a shadow trip) with the trip's reason.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Transition {
    /// The state before.
    pub from: State,
    /// The state after.
    pub to: State,
    /// Why.
    pub reason: Reason,
    /// The generation entered (every transition bumps it by one, wrapping).
    pub generation: u32,
    /// When, on the breaker's clock.
    pub at: Nanos,
    /// The breaker's id (its jitter seed; the registry derives it from the key).
    pub breaker_id: u32,
    /// The window's counts when it happened (zero without a window).
    pub window: WindowCounts,
    /// Consecutive failures when it happened (from Closed or MetricsOnly;
    /// 0 from any other state).
    pub consecutive_failures: u32,
    /// Unanswered calls in a row when it happened (from Closed or
    /// MetricsOnly; 0 from any other state): the count behind a
    /// [`Reason::Unresponsive`] trip.
    pub unanswered_calls: u32,
    /// Probe successes of the round when it happened (HalfOpen only; under
    /// the half-open rate rule, slow successes too).
    pub probe_successes: u32,
    /// Trips in a row after the transition: the backoff step (the exponent
    /// of the open period), 0 when `to` is Closed. A trip from Closed
    /// continues from the step the last close kept, decayed by the healthy
    /// time since (see [`BreakerSnapshot::backoff_step`]). It stops
    /// counting at the cap step, the first whose period is the cap.
    pub trips_in_a_row: u32,
    /// When `to` is Open: how long it stays open (jitter included).
    pub open_for: Option<Duration>,
    /// An outlier ejection's rule ([`Reason::Outlier`] and
    /// [`Reason::SlowOutlier`]): which rule of the pool found the host out.
    pub outlier_rule: Option<crate::OutlierRule>,
}

/// Notified exactly once per transition. Must not block: it runs on the
/// request path of the call that caused the transition.
///
/// Any `Fn(&Transition) + Send + Sync + 'static` is an observer:
///
/// ```
/// use failfast::{Breaker, ManualClock, Nanos, State, Transition};
/// use std::sync::{Arc, Mutex};
///
/// let seen: Arc<Mutex<Vec<(State, State)>>> = Arc::default();
/// let log = seen.clone();
/// let breaker = Breaker::builder()
///     .consecutive_failures(1)
///     .observer(move |t: &Transition| log.lock().unwrap().push((t.from, t.to)))
///     .build_with_clock(ManualClock::new())
///     .unwrap();
/// breaker.try_acquire_at(Nanos::ZERO).unwrap().failure_at(Nanos::ZERO);
/// assert_eq!(*seen.lock().unwrap(), [(State::Closed, State::Open)]);
/// ```
pub trait Observer: Send + Sync + 'static {
    /// Called once for each transition, after it is published.
    fn on_transition(&self, transition: &Transition);
}

impl<F> Observer for F
where
    F: Fn(&Transition) + Send + Sync + 'static,
{
    fn on_transition(&self, transition: &Transition) {
        self(transition)
    }
}

/// A read-only view of one breaker, for scrapes and dashboards.
///
/// Reading it never writes to the breaker.
#[derive(Copy, Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct BreakerSnapshot {
    /// The current state.
    pub state: State,
    /// The current generation; equal to the number of transitions so far
    /// (modulo 2³²).
    pub generation: u32,
    /// How long the breaker has been in `state` (since the last transition,
    /// or since the current probe round began while HalfOpen).
    pub time_in_state: Duration,
    /// While Open: how long until the next call may probe.
    pub retry_after: Option<Duration>,
    /// The window's calls, failures and slow calls.
    pub window: WindowCounts,
    /// The window's failure rate, or `None` while the window holds fewer than
    /// `min_calls` calls: not enough calls yet to judge (the trip conditions
    /// ignore the rates then too).
    pub failure_rate: Option<f64>,
    /// The window's slow-call rate, or `None` below `min_calls` (as above).
    pub slow_call_rate: Option<f64>,
    /// Consecutive failures (Closed and MetricsOnly; 0 otherwise).
    pub consecutive_failures: u32,
    /// Calls in a row that ended without an answer (Closed and MetricsOnly;
    /// 0 otherwise; see [`Builder::unanswered`](crate::Builder::unanswered)).
    pub unanswered_calls: u32,
    /// Trips in a row (0 while Closed).
    pub trips_in_a_row: u32,
    /// The backoff step: the exponent of the next open period. While Open
    /// or HalfOpen, the trips in a row, which stop at the cap step (the
    /// first whose period is the cap). A close keeps it, and healthy time
    /// decays it: one step off per base open duration since the close,
    /// ramp included (Envoy's decay of the ejection time), so a host that
    /// flaps keeps its longer open periods and a steady one returns to the
    /// base, `cap step × base` after the close at the latest. A trip from
    /// Closed opens at this step plus one (at most the cap step).
    pub backoff_step: u32,
    /// While ramping up after a recovery ([`Builder::ramp`](crate::Builder::ramp)):
    /// the share of calls admitted now, in (0, 1]; `None` otherwise.
    pub ramp_fraction: Option<f64>,
    /// Lifetime call counters, if the breaker keeps them
    /// ([`Builder::count_calls`](crate::Builder::count_calls)).
    pub calls: Option<CallCounts>,
    /// While the breaker is Open by its pool's outlier ejection
    /// ([`Outliers`](crate::Outliers)): the rule that ejected it. `None`
    /// otherwise — outside a pool, in any other state, and once the
    /// ejection's open period ends: the probe round that follows is an
    /// ordinary one ([`Reason::OpenElapsed`]), and a probe that fails
    /// reopens the breaker by its own reason.
    ///
    /// Exactly: the breaker's ejection mark names its current generation
    /// (the mark is written just before the ejecting CAS and cleared by
    /// the transition that leaves that generation), so an observer or hook
    /// that takes a snapshot while it hears the ejection already reads the
    /// rule here.
    ///
    /// ```
    /// use failfast::{Breaker, ManualClock, OutlierRule, Outliers, Registry, State};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1000))
    ///     .outliers(Outliers::new().interval(Duration::from_secs(10)))
    ///     .build_with_clock(clock.clone())?;
    /// // Two intervals of traffic: host 0 succeeds half the time, 1..5 always.
    /// for _ in 0..2 {
    ///     for key in 0..5u64 {
    ///         let host = registry.handle(&key);
    ///         for i in 0..100 {
    ///             let permit = host.try_acquire().unwrap();
    ///             let _ = if key == 0 && i % 2 == 0 { permit.failure() } else { permit.success() };
    ///         }
    ///     }
    ///     clock.advance(Duration::from_secs(10));
    /// }
    /// // Its next call rolls its interval: judged against its pool at that
    /// // admission, and ejected (the call itself runs).
    /// let host = registry.handle(&0);
    /// host.try_acquire().unwrap().success();
    /// assert_eq!(host.state(), State::Open);
    /// assert_eq!(host.snapshot().outlier_ejection, Some(OutlierRule::SuccessRate));
    /// assert_eq!(registry.handle(&1).snapshot().outlier_ejection, None);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub outlier_ejection: Option<OutlierRule>,
    /// What the breaker's [retry budget](crate::RetryBudget) has room for
    /// now: retries a ratio budget would admit, or failures a token budget
    /// can take before retries stop (0: retries are refused). `None`
    /// without a budget.
    ///
    /// ```
    /// use failfast::{Breaker, RetryBudget};
    ///
    /// let breaker = Breaker::builder().consecutive_failures(5).retry_budget(RetryBudget::tokens(10, 0.1)).build()?;
    /// assert_eq!(breaker.snapshot().retry_room, Some(5)); // 10 tokens: five failures to 5
    /// breaker.try_acquire()?.failure();
    /// assert_eq!(breaker.snapshot().retry_room, Some(4));
    /// assert_eq!(Breaker::builder().consecutive_failures(5).build()?.snapshot().retry_room, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub retry_room: Option<u32>,
}

/// Lifetime call counters of one breaker.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallCounts {
    /// Calls admitted.
    pub admitted: u64,
    /// Calls rejected by this breaker.
    pub rejected: u64,
    /// Verdicts: successes.
    pub successes: u64,
    /// Verdicts: failures.
    pub failures: u64,
    /// Verdicts: ignored (business errors).
    pub ignored: u64,
    /// Verdicts: neutral (the caller's or the client's fault, not the
    /// dependency's: [`Outcome::Neutral`](crate::Outcome::Neutral)).
    pub neutral: u64,
    /// Permits dropped without a verdict before they could mean anything
    /// (sooner than the slow-call threshold and `abandoned_after`, and than
    /// the `unanswered` rule's age when it is on): neutral.
    pub dropped: u64,
    /// Permits dropped early, before any answer, but after the `unanswered`
    /// rule's age: each one extends the run of unanswered calls
    /// ([`Builder::unanswered`](crate::Builder::unanswered)).
    pub unanswered: u64,
    /// Permits dropped without a verdict after the call hung (counted as slow
    /// calls or failures, see [`Builder::abandoned_after`](crate::Builder::abandoned_after)).
    pub abandoned: u64,
    /// Permits dropped while the thread panicked (counted as failures).
    pub panicked: u64,
    /// Slow calls among the successes and failures.
    pub slow: u64,
    /// Retries the [retry budget](crate::RetryBudget) refused
    /// ([`RejectReason::RetryBudget`](crate::RejectReason::RetryBudget)),
    /// also counted in `rejected`. Always 0 without a budget.
    pub retries_refused: u64,
}
