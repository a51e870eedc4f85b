//! One `tracing` event per transition (feature `tracing`); nothing per call.
//!
//! Target `failfast`, message `circuit.transition`, fields `upstream`,
//! `from`, `to`, `reason`, `generation`, `open_for_ms` (when the breaker is
//! now open), and the counts that caused it: `calls`, `failures`, `slow`,
//! `consecutive_failures`, `trips_in_a_row`.
//!
//! | transition | level |
//! |---|---|
//! | a trip (Closed → Open, HalfOpen → Open, a MetricsOnly shadow trip) | INFO |
//! | a recovery (HalfOpen → Closed) | INFO |
//! | an operator's action (force open, disable, metrics only, reset) | INFO |
//! | Open → HalfOpen, a superseded probe round | DEBUG |

use std::borrow::Cow;

use tracing::Level;

use crate::observe::{Observer, Reason, Transition};

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
