//! `tracing` for the breakers (feature `tracing`): one event per transition,
//! and — through the tower layers — what the breaker did to each call.
//!
//! # Transitions
//!
//! Target `failfast`, message `circuit.transition`, fields `upstream`,
//! `from`, `to`, `reason`, `generation`, `open_for_ms` (when the breaker is
//! now open), and the counts that caused it: `calls`, `failures`, `slow`,
//! `consecutive_failures`, `trips_in_a_row`.
//!
//! | transition | level |
//! |---|---|
//! | a trip (Closed → Open, HalfOpen → Open, a MetricsOnly shadow trip), an outlier ejection among them | INFO |
//! | a recovery (HalfOpen → Closed) | INFO |
//! | an operator's action (force open, disable, metrics only, reset) | INFO |
//! | Open → HalfOpen, a superseded probe round | DEBUG |
//!
//! An outlier ejection by the breaker's pool ([`Outliers`](crate::Outliers))
//! is a trip like the others: Closed → Open with `reason` `outlier` (the
//! success-rate or the failure-percentage rule) or `slow_outlier` (the
//! latency rule), the window's counts at the time, and the rule in the
//! field `outlier_rule` (`success_rate`, `failure_percentage`, `slow`; from
//! [`Transition::outlier_rule`](crate::Transition::outlier_rule)). The pool
//! counts ejections by rule too
//! ([`Registry::outlier_pools`](crate::Registry::outlier_pools)).
//!
//! # Calls
//!
//! A tower layer asked to [`trace_calls`](crate::tower::FailFastLayer::trace_calls)
//! records three fields on the call's span, and a fourth while the breaker
//! ramps up after a recovery — on the current span (declared by yours, e.g.
//! in a `tower_http::trace` make-span) or a span of its own ([`CallSpan`]):
//!
//! | field | value | from |
//! |---|---|---|
//! | [`circuitbreaker.name`](NAME_FIELD) | the upstream: the layer's `upstream` name, or the request's key | the OpenTelemetry semantic-conventions proposal for resilience attributes (open-telemetry/semantic-conventions#2355) |
//! | [`circuitbreaker.state`](STATE_FIELD) | the state the call met at admission: `closed`, `half_open` (a probe), `open`, `forced_open`, `disabled`, `metrics_only` | the same proposal (it names the attribute, not its values; the values are [`State::as_str`](crate::State::as_str)) |
//! | [`circuitbreaker.outcome`](OUTCOME_FIELD) | how the call ended: an [`Ending`] | ours (the proposal has none; the values follow the OpenTelemetry Java agent's Resilience4j instrumentation, `success`/`failure`/`rejected`, plus the endings this crate tells apart) |
//! | [`circuitbreaker.ramp_fraction`](RAMP_FRACTION_FIELD) | while the breaker ramps up after a recovery ([`Builder::ramp`](crate::Builder::ramp)): the share of calls it admitted at this call's admission, in (0, 1] ([`BreakerSnapshot::ramp_fraction`](crate::BreakerSnapshot::ramp_fraction)); not recorded otherwise. A call turned away by the ramp has state `closed`, outcome `rejected` and reason `ramp` | ours |
//!
//! A rejected call never reached the upstream, and its span says so: outcome
//! `rejected`, no inner call (the inner service was not called, so nothing
//! of a remote call is recorded), and an event [`REJECTED`] ("rejected by
//! circuit breaker") with `reason` ([`RejectReason::as_str`](crate::RejectReason::as_str):
//! `open`, `half_open_full`, `forced_open`, `ramp`, `retry_budget`),
//! `retry_after_ms` (absent when forced open) and `circuitbreaker.name`.
//! So that an open breaker at 50k requests per second does not flood the
//! log, the event is **INFO at most once per open period per breaker** and
//! DEBUG otherwise ([`RejectionLog`]).
//!
//! With the feature off none of this is compiled; with it on but no
//! subscriber interested in target `failfast` (and a disabled span), a call
//! pays a span lookup and an `enabled!` check, and nothing is recorded.

use core::fmt;
use std::borrow::Cow;

use tracing::Level;

use crate::clock::Nanos;
use crate::error::{RejectReason, Rejected};
pub use crate::export::Ending;
use crate::observe::{Observer, Reason, Transition};
use crate::sync::{AtomicU64, Ordering};

/// The level of a transition's event (see the module's table).
pub fn level(transition: &Transition) -> Level {
    match transition.reason {
        Reason::OpenElapsed | Reason::ProbeLeaseExpired => Level::DEBUG,
        _ => Level::INFO,
    }
}

/// Emits the event for `transition` of `upstream`'s breaker. Usable as a
/// tower layer's hook: `.on_transition(failfast::export::tracing::emit)`.
///
/// ```
/// use failfast::{Breaker, ManualClock, Nanos};
///
/// let breaker = Breaker::builder().consecutive_failures(1).build_with_clock(ManualClock::new())?;
/// let permit = breaker.try_acquire_at(Nanos::ZERO).unwrap();
/// if let Some(t) = permit.failure_at(Nanos::ZERO) {
///     failfast::export::tracing::emit("payments", &t); // INFO circuit.transition upstream="payments" from="closed" to="open" ...
/// }
/// # Ok::<(), failfast::ConfigError>(())
/// ```
pub fn emit(upstream: &str, transition: &Transition) {
    let t = transition;
    let open_for_ms = t
        .open_for
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let outlier_rule = t.outlier_rule.map(crate::OutlierRule::as_str);
    macro_rules! event_at {
        ($level:expr) => {
            tracing::event!(
                target: "failfast",
                $level,
                upstream,
                from = t.from.as_str(),
                to = t.to.as_str(),
                reason = t.reason.as_str(),
                generation = t.generation,
                open_for_ms,
                calls = t.window.calls,
                failures = t.window.failures,
                slow = t.window.slow,
                consecutive_failures = t.consecutive_failures,
                trips_in_a_row = t.trips_in_a_row,
                outlier_rule,
                "circuit.transition"
            )
        };
    }
    if level(t) == Level::DEBUG {
        event_at!(Level::DEBUG);
    } else {
        event_at!(Level::INFO);
    }
}

/// An [`Observer`] that emits the event of every transition.
///
/// ```
/// use failfast::export::tracing::TracingObserver;
/// use failfast::Breaker;
///
/// let breaker = Breaker::builder()
///     .consecutive_failures(3)
///     .observer(TracingObserver::new().upstream("payments"))
///     .build()?;
/// # let _ = breaker;
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct TracingObserver {
    upstream: Option<Cow<'static, str>>,
}

impl TracingObserver {
    /// An observer naming the upstream by the breaker's id (`#` + 16 hex digits).
    pub fn new() -> TracingObserver {
        TracingObserver::default()
    }

    /// Names the upstream in every event (for a breaker that guards one).
    pub fn upstream(mut self, name: impl Into<Cow<'static, str>>) -> TracingObserver {
        self.upstream = Some(name.into());
        self
    }
}

impl Observer for TracingObserver {
    fn on_transition(&self, transition: &Transition) {
        match &self.upstream {
            Some(name) => emit(name, transition),
            None => emit(&format!("#{:016x}", transition.breaker_id), transition),
        }
    }
}

/// `circuitbreaker.name`: the span field naming the upstream (the
/// OpenTelemetry proposal's attribute).
pub const NAME_FIELD: &str = "circuitbreaker.name";
/// `circuitbreaker.state`: the span field with the state the call met at
/// admission (the OpenTelemetry proposal's attribute).
pub const STATE_FIELD: &str = "circuitbreaker.state";
/// `circuitbreaker.outcome`: the span field saying how the call ended, an
/// [`Ending`] (ours).
pub const OUTCOME_FIELD: &str = "circuitbreaker.outcome";
/// `circuitbreaker.ramp_fraction`: the span field with the share of calls a
/// breaker ramping up after a recovery admitted when the call met it
/// (ours); recorded only during a ramp.
pub const RAMP_FRACTION_FIELD: &str = "circuitbreaker.ramp_fraction";
/// The message of the event recorded when a call is rejected.
pub const REJECTED: &str = "rejected by circuit breaker";

/// Which span a tower layer records a call's fields on.
///
/// ```
/// use failfast::export::tracing::CallSpan;
/// use failfast::tower::FailFastLayer;
/// use failfast::Breaker;
/// use std::sync::Arc;
///
/// let breaker = Arc::new(Breaker::builder().consecutive_failures(5).build()?);
/// // The span of the request (declares the fields, e.g. through tower-http's TraceLayer):
/// let layer = FailFastLayer::new(breaker.clone()).upstream("payments").trace_calls(CallSpan::Current);
/// // Or a span of the layer's own, `circuitbreaker`, child of the current one:
/// let layer = FailFastLayer::new(breaker).upstream("payments").trace_calls(CallSpan::Own);
/// # let _ = layer;
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallSpan {
    /// The span current when the layer's service is called. Only the fields
    /// it declares are recorded (`tracing` ignores the others), so declare
    /// them, as `tracing::field::Empty`: [`NAME_FIELD`], [`STATE_FIELD`],
    /// [`OUTCOME_FIELD`], and [`RAMP_FRACTION_FIELD`] for a breaker with a
    /// ramp.
    Current,
    /// A span the layer opens per call: INFO, target `failfast`, name
    /// `circuitbreaker`, a child of the current span, entered while the
    /// inner call is polled (so the client's own spans nest inside it), with
    /// the four fields and `otel.status_code` (`error` for a failure, a
    /// rejection, an abandoned or panicked call).
    Own,
}

/// Decides the level of each rejection's event: **INFO for the first
/// rejection of an open period, DEBUG for every other**, with no memory in
/// the breaker and no work on any admitted call.
///
/// # How
///
/// An open period is named by the instant it ends: a rejection at `now`
/// that says "retry after `d`" belongs to the period ending at `now + d`,
/// the same instant for every rejection of that period (the breaker's
/// `since + open duration`, exact to the nanosecond), and a different one
/// for the next period. The log keeps slots of such instants, a breaker's
/// slot chosen by its id. A rejection claims INFO by moving its slot from
/// an instant already past to its own period's end, with one
/// compare-and-swap; finding its own period there, or another period still
/// running, or losing the swap, it is DEBUG.
///
/// That makes INFO at most once per period and breaker, whatever the races:
/// a slot only ever moves forward (a claimant needs the old instant to be
/// past, `old ≤ now`, and writes an instant to come, `now < end`), so once a
/// slot has held a period's end it never again holds an earlier instant,
/// and the swap that writes that end can succeed once. Two breakers sharing
/// a slot, both open, share one INFO per pair of periods (the other's first
/// rejection is DEBUG): never more INFO, sometimes less. Size the log for
/// the breakers you expect open at once; a single breaker needs one slot.
/// The bound is per log: each layer has its own, so two layers in front of
/// one breaker log one INFO each per period.
///
/// Only `open` rejections can be INFO: a `half_open_full` one is part of a
/// recovery already logged as a transition, a `ramp` one part of the close
/// that began the ramp (logged too), a `forced_open` one part of an
/// operator's action (logged too), and none of them names a period end.
///
/// ```
/// use failfast::export::tracing::RejectionLog;
/// use failfast::{Breaker, ManualClock, Nanos};
/// use tracing::Level;
///
/// let breaker = Breaker::builder().consecutive_failures(1).build_with_clock(ManualClock::new())?;
/// breaker.try_acquire_at(Nanos::ZERO).unwrap().failure_at(Nanos::ZERO);
/// let log = RejectionLog::new(1);
/// let now = Nanos::from_millis(5);
/// let rejected = breaker.try_acquire_at(now).unwrap_err();
/// assert_eq!(log.level(breaker.id(), &rejected, now), Level::INFO);
/// for ms in 6..1_000 { // the rest of the default 1 s open period
///     let now = Nanos::from_millis(ms);
///     let rejected = breaker.try_acquire_at(now).unwrap_err();
///     assert_eq!(log.level(breaker.id(), &rejected, now), Level::DEBUG);
/// }
/// # Ok::<(), failfast::ConfigError>(())
/// ```
pub struct RejectionLog {
    /// End instants (nanoseconds) of the periods last announced; 0: none.
    slots: Box<[AtomicU64]>,
}

impl RejectionLog {
    /// A log with `slots` slots (at least 1; rounded up to a power of two).
    pub fn new(slots: usize) -> RejectionLog {
        let n = slots.max(1).next_power_of_two();
        RejectionLog {
            slots: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The number of slots.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// The level for the event of `rejected`, seen at `now` (the instant
    /// the admission was decided at) by the breaker with id `breaker_id`:
    /// INFO for the first rejection of an open period, else DEBUG.
    pub fn level(&self, breaker_id: u32, rejected: &Rejected, now: Nanos) -> Level {
        if self.claims(breaker_id, rejected, now) {
            Level::INFO
        } else {
            Level::DEBUG
        }
    }

    fn claims(&self, breaker_id: u32, rejected: &Rejected, now: Nanos) -> bool {
        if rejected.reason() != RejectReason::Open {
            return false;
        }
        let Some(after) = rejected.retry_after() else {
            return false;
        };
        let end = now.saturating_add(after).as_nanos();
        if end <= now.as_nanos() {
            return false; // an open period with nothing left names no future instant
        }
        let slot = &self.slots[breaker_id as usize & (self.slots.len() - 1)];
        // Relaxed: the slot publishes nothing but its own value, and the
        // compare-and-swap alone decides the one winner.
        let seen = slot.load(Ordering::Relaxed);
        if seen == end || seen > now.as_nanos() {
            return false; // announced already, or another period still running here
        }
        // Relaxed, as above: only the swap's own atomicity matters.
        slot.compare_exchange(seen, end, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// Emits the event of `rejected` (target `failfast`, message
    /// [`REJECTED`], fields `circuitbreaker.name`, `reason`,
    /// `retry_after_ms`) at the level [`level`](Self::level) decides, in the
    /// current span, or in `parent` when given. Nothing is done (not even
    /// the level decided) when no subscriber wants the event.
    pub fn emit(
        &self,
        name: &dyn fmt::Display,
        breaker_id: u32,
        rejected: &Rejected,
        now: Nanos,
        parent: Option<&tracing::Span>,
    ) {
        if !tracing::enabled!(target: "failfast", Level::DEBUG) {
            return;
        }
        let level = if tracing::enabled!(target: "failfast", Level::INFO) {
            self.level(breaker_id, rejected, now)
        } else {
            Level::DEBUG
        };
        let reason = rejected.reason().as_str();
        // i64: OpenTelemetry's integer attribute (a u64 would export as text).
        let retry_after_ms = rejected
            .retry_after()
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let name = tracing::field::display(name);
        macro_rules! event_at {
            ($level:expr) => {
                match parent {
                    Some(parent) => tracing::event!(
                        target: "failfast",
                        parent: parent,
                        $level,
                        circuitbreaker.name = name,
                        reason,
                        retry_after_ms,
                        "rejected by circuit breaker"
                    ),
                    None => tracing::event!(
                        target: "failfast",
                        $level,
                        circuitbreaker.name = name,
                        reason,
                        retry_after_ms,
                        "rejected by circuit breaker"
                    ),
                }
            };
        }
        if level == Level::INFO {
            event_at!(Level::INFO);
        } else {
            event_at!(Level::DEBUG);
        }
    }
}

impl fmt::Debug for RejectionLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RejectionLog")
            .field("slots", &self.slots.len())
            .finish()
    }
}
