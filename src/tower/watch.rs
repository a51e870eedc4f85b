//! What a layer tells `tracing` and `metrics` about each call (features
//! `tracing` and `metrics`): the layer's [`Watcher`], the admission's
//! [`Watching`], and [`Held`] — a layer's permit with what is watched of
//! its call, recorded when the permit's verdict is (or when it is dropped).
//!
//! With both features off a `Watcher` and a `Watching` are empty and a
//! `Held` is the permit alone: every step below compiles to nothing. With a
//! feature on but nothing configured on the layer, a call tests two
//! `Option`s and its permit travels as `Held::Bare`, recorded and dropped
//! as without the features. With a layer configured but no subscriber
//! interested, a call looks up a span, finds it disabled, and records
//! nothing; its permit stays bare unless the duration histogram needs its
//! end. (What each costs, in instructions: `benches/README.md`.)

use core::fmt;
use core::time::Duration;

use super::permit::{LayerPermit, Owner};
use crate::clock::{Clock, Nanos};
use crate::error::Rejected;
use crate::hint::RetryHint;
use crate::outcome::Outcome;

#[cfg(any(feature = "tracing", feature = "metrics"))]
pub(crate) use self::on::{Held, Watcher};

#[cfg(not(any(feature = "tracing", feature = "metrics")))]
pub(crate) use self::off::{Held, Watcher};

#[cfg(any(feature = "tracing", feature = "metrics"))]
/// How a keyed layer names a key in spans, events and per-host labels:
/// through `Display`, without formatting it until a subscriber or a
/// recorder asks.
pub(crate) type NameOf<K> = for<'a> fn(&'a K) -> &'a dyn fmt::Display;

/// [`NameOf`] for a key that is `Display`.
#[cfg(any(feature = "tracing", feature = "metrics"))]
pub(crate) fn display_name<K: fmt::Display>(key: &K) -> &dyn fmt::Display {
    key
}

/// The upstream's hint as a delay from now, on the wall clock of the
/// permit's breaker: `None` without a hint, and for a bad one (a date now
/// or past, beyond a day: counted, see [`hint`](crate::hint)). The clock is
/// read only when there is a hint.
#[inline]
fn resolve<K, C: Clock>(hint: Option<RetryHint>, permit: &LayerPermit<K, C>) -> Option<Duration> {
    hint?.delay(permit.breaker().wall())
}

/// The hint a layer asks its classifier for, beside `outcome`: none for a
/// success (an upstream that served the call is not asking to be left
/// alone, and a successful call's headers are not searched), else `read()`.
#[inline]
pub(crate) fn hint_unless_success(
    outcome: Outcome,
    read: impl FnOnce() -> Option<RetryHint>,
) -> Option<RetryHint> {
    if outcome == Outcome::Success {
        None
    } else {
        read()
    }
}

/// Drops the permit held by a response future if the inner future panics
/// while it is polled, so the drop happens *during* the unwind and counts
/// the call as a failure (and its span says `panicked`). Without it the
/// permit would wait in the future until whoever caught the panic (tokio's
/// task harness, say) drops the future — no longer panicking, so the call
/// would be judged by its age instead. With a span of the layer's own, the
/// span is entered while the guard lives, so spans of the inner call nest
/// inside it.
pub(crate) struct Polling<'a, K, C: Clock> {
    held: &'a mut Option<Held<K, C>>,
}

impl<'a, K, C: Clock> Polling<'a, K, C> {
    #[inline]
    pub(crate) fn new(held: &'a mut Option<Held<K, C>>) -> Polling<'a, K, C> {
        #[cfg(feature = "tracing")]
        if let Some(h) = held.as_ref() {
            h.enter();
        }
        Polling { held }
    }
}

impl<K, C: Clock> Drop for Polling<'_, K, C> {
    #[inline]
    fn drop(&mut self) {
        #[cfg(feature = "tracing")]
        if let Some(h) = self.held.as_ref() {
            h.exit();
        }
        if std::thread::panicking() {
            drop(self.held.take());
        }
    }
}

/// Enters a held call's own span (if it has one) while the inner service
/// makes its future, so what the inner `call` opens nests inside it too.
pub(crate) struct Inside<'a, K, C: Clock>(#[allow(dead_code)] &'a Held<K, C>);

impl<'a, K, C: Clock> Inside<'a, K, C> {
    #[inline]
    pub(crate) fn new(held: &'a Held<K, C>) -> Inside<'a, K, C> {
        #[cfg(feature = "tracing")]
        held.enter();
        Inside(held)
    }
}

#[cfg(feature = "tracing")]
impl<K, C: Clock> Drop for Inside<'_, K, C> {
    #[inline]
    fn drop(&mut self) {
        self.0.exit();
    }
}

/// The build without `tracing` and `metrics`: nothing watched.
#[cfg(not(any(feature = "tracing", feature = "metrics")))]
mod off {
    use core::marker::PhantomData;

    use super::*;

    /// Nothing to watch.
    pub(crate) struct Watcher<K>(PhantomData<fn(&K)>);

    impl<K> Watcher<K> {
        pub(crate) fn none() -> Watcher<K> {
            Watcher(PhantomData)
        }

        pub(crate) fn upstream(self, _name: std::sync::Arc<str>) -> Watcher<K> {
            self
        }

        #[inline(always)]
        pub(crate) fn begin<C: Clock>(&self, _owner: &Owner<K, C>) -> Watching<K, C> {
            Watching(PhantomData)
        }
    }

    impl<K> Clone for Watcher<K> {
        fn clone(&self) -> Self {
            Watcher(PhantomData)
        }
    }

    impl<K> fmt::Debug for Watcher<K> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("Watcher")
        }
    }

    /// Nothing watched of this call.
    pub(crate) struct Watching<K, C: Clock>(PhantomData<fn(&K, &C)>);

    impl<K, C: Clock> Watching<K, C> {
        #[inline(always)]
        pub(crate) fn admitted(
            self,
            _watcher: &Watcher<K>,
            admission: Result<LayerPermit<K, C>, Rejected>,
            _now: Nanos,
        ) -> Result<Held<K, C>, Rejected> {
            admission.map(|permit| Held { permit })
        }
    }

    /// The permit alone.
    pub(crate) struct Held<K, C: Clock> {
        permit: LayerPermit<K, C>,
    }

    impl<K, C: Clock> Held<K, C> {
        #[inline(always)]
        pub(crate) fn started_at(&self) -> Nanos {
            self.permit.started_at()
        }

        /// The response head came now: the call is a stream from here.
        pub(crate) fn answered_now(&mut self) {
            let now = self.permit.breaker().now();
            self.permit.answered_at(now);
        }

        /// The stream made progress now.
        pub(crate) fn progress_now(&mut self) {
            let now = self.permit.breaker().now();
            self.permit.progress_at(now);
        }

        /// Records `outcome` with the upstream's `hint`, resolved on the
        /// breaker's wall clock (see [`resolve`]).
        #[inline(always)]
        pub(crate) fn record(self, outcome: Outcome, hint: Option<RetryHint>, at: Option<Nanos>) {
            let delay = resolve(hint, &self.permit);
            self.permit.record_hinted_at_or_now(outcome, delay, at);
        }
    }

    impl<K, C: Clock> fmt::Debug for Held<K, C> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.permit.fmt(f)
        }
    }
}

/// The build with `tracing` or `metrics`.
#[cfg(any(feature = "tracing", feature = "metrics"))]
mod on {
    use std::sync::Arc;

    use super::*;
    use crate::breaker::Breaker;
    #[cfg(feature = "metrics")]
    use crate::export::meters::Meters;
    #[cfg(feature = "metrics")]
    use crate::export::metrics::CallMetrics;
    #[cfg(feature = "tracing")]
    use crate::export::tracing::{
        CallSpan, RejectionLog, NAME_FIELD, OUTCOME_FIELD, RAMP_FRACTION_FIELD, STATE_FIELD,
    };
    use crate::export::Ending;
    #[cfg(feature = "tracing")]
    use crate::state::State;
    #[cfg(feature = "tracing")]
    use tracing::Span;

    /// What a layer records, shared by its services: built when the layer
    /// is configured, so every service of the layer shares one rejection
    /// log and one set of metric handles.
    pub(crate) struct Watch<K> {
        /// A single-breaker layer's upstream (`(shared)` for a keyed
        /// layer's breaker shared by many keys).
        upstream: Arc<str>,
        /// How a keyed layer names its keys.
        name_of: Option<NameOf<K>>,
        /// Whether a call needs anything before its admission (a span, the
        /// entry that names a rejection) or at its end (a span, the
        /// histogram). Without, only a rejection is recorded: an aggregate
        /// counter's increment.
        begins: bool,
        #[cfg(feature = "tracing")]
        trace: Option<(CallSpan, RejectionLog)>,
        #[cfg(feature = "metrics")]
        metrics: Option<(CallMetrics, Meters)>,
    }

    /// The settings a [`Watch`] is built from.
    struct Settings<K> {
        upstream: Arc<str>,
        name_of: Option<NameOf<K>>,
        slots: usize,
        #[cfg(feature = "tracing")]
        trace: Option<CallSpan>,
        #[cfg(feature = "metrics")]
        metrics: Option<CallMetrics>,
    }

    impl<K> Clone for Settings<K> {
        fn clone(&self) -> Self {
            Settings {
                upstream: self.upstream.clone(),
                name_of: self.name_of,
                slots: self.slots,
                #[cfg(feature = "tracing")]
                trace: self.trace,
                #[cfg(feature = "metrics")]
                metrics: self.metrics,
            }
        }
    }

    /// A layer's side: its settings and the [`Watch`] built from them, if
    /// anything is to be recorded.
    pub(crate) struct Watcher<K> {
        settings: Settings<K>,
        watch: Option<Arc<Watch<K>>>,
    }

    impl<K> Clone for Watcher<K> {
        fn clone(&self) -> Self {
            Watcher {
                settings: self.settings.clone(),
                watch: self.watch.clone(),
            }
        }
    }

    impl<K> fmt::Debug for Watcher<K> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let mut d = f.debug_struct("Watcher");
            #[cfg(feature = "tracing")]
            d.field("trace", &self.settings.trace);
            #[cfg(feature = "metrics")]
            d.field("metrics", &self.settings.metrics);
            d.finish_non_exhaustive()
        }
    }

    impl<K> Watcher<K> {
        /// Nothing to record.
        pub(crate) fn none() -> Watcher<K> {
            Watcher {
                settings: Settings {
                    upstream: Arc::from(""),
                    name_of: None,
                    slots: 1,
                    #[cfg(feature = "tracing")]
                    trace: None,
                    #[cfg(feature = "metrics")]
                    metrics: None,
                },
                watch: None,
            }
        }

        fn rebuilt(mut self) -> Watcher<K> {
            let s = &self.settings;
            #[allow(unused_mut)]
            let mut any = false;
            #[cfg(feature = "tracing")]
            let trace = s.trace.map(|span| (span, RejectionLog::new(s.slots)));
            #[cfg(feature = "tracing")]
            {
                any |= trace.is_some();
            }
            #[cfg(feature = "metrics")]
            let metrics = s.metrics.map(|m| {
                // A keyed layer's aggregate has no `upstream` label; a
                // single breaker's has its name, if it has one.
                let label = (s.name_of.is_none() && !s.upstream.is_empty()).then_some(&*s.upstream);
                let meters = if s.name_of.is_some() && m.is_per_host() {
                    Meters::per_host()
                } else {
                    Meters::register(label, m)
                };
                (m, meters)
            });
            #[cfg(feature = "metrics")]
            {
                any |= metrics.is_some();
            }
            #[allow(unused_mut)]
            let mut begins = false;
            #[cfg(feature = "tracing")]
            {
                begins |= trace.is_some();
            }
            #[cfg(feature = "metrics")]
            {
                begins |= metrics.as_ref().is_some_and(|(m, _)| {
                    m.records_duration() || (s.name_of.is_some() && m.is_per_host())
                });
            }
            self.watch = any.then(|| {
                Arc::new(Watch {
                    upstream: s.upstream.clone(),
                    name_of: s.name_of,
                    begins,
                    #[cfg(feature = "tracing")]
                    trace,
                    #[cfg(feature = "metrics")]
                    metrics,
                })
            });
            self
        }

        /// The upstream's name for a single-breaker layer.
        pub(crate) fn upstream(mut self, name: Arc<str>) -> Watcher<K> {
            self.settings.upstream = name;
            if self.watch.is_some() {
                self = self.rebuilt();
            }
            self
        }

        /// Keys named by `name_of`, breakers shared by many keys `(shared)`.
        pub(crate) fn keyed(mut self, name_of: NameOf<K>) -> Watcher<K> {
            self.settings.name_of = Some(name_of);
            self.settings.upstream = Arc::from("(shared)");
            self.rebuilt()
        }

        /// A rejection log of `slots` slots (see [`RejectionLog`]), from
        /// the next [`trace`](Self::trace) on.
        #[cfg(feature = "tracing")]
        pub(crate) fn log_slots(mut self, slots: usize) -> Watcher<K> {
            self.settings.slots = slots;
            self
        }

        #[cfg(feature = "tracing")]
        pub(crate) fn trace(mut self, span: CallSpan) -> Watcher<K> {
            self.settings.trace = Some(span);
            self.rebuilt()
        }

        #[cfg(feature = "metrics")]
        pub(crate) fn metrics(mut self, metrics: CallMetrics) -> Watcher<K> {
            self.settings.metrics = Some(metrics);
            self.rebuilt()
        }

        /// Before admission: the span this call records on (found or
        /// opened, and named), and what naming a rejection will need.
        #[inline]
        pub(crate) fn begin<C: Clock>(&self, owner: &Owner<K, C>) -> Watching<K, C> {
            match &self.watch {
                Some(watch) if watch.begins => watch.begin(owner),
                _ => Watching::idle(),
            }
        }
    }

    impl<K> Watch<K> {
        /// The name of `owner`'s upstream: its key, or the layer's name.
        fn name<'a, C: Clock>(&'a self, owner: &'a Owner<K, C>) -> &'a dyn fmt::Display {
            match (owner.key(), self.name_of) {
                (Some(key), Some(name_of)) => name_of(key),
                _ => &self.upstream,
            }
        }

        /// Whether per-call series are labelled per key.
        #[cfg(feature = "metrics")]
        fn per_host(&self) -> bool {
            self.name_of.is_some() && self.metrics.as_ref().is_some_and(|(m, _)| m.is_per_host())
        }

        #[cfg(feature = "metrics")]
        fn times_calls(&self) -> bool {
            self.metrics
                .as_ref()
                .is_some_and(|(m, _)| m.records_duration())
        }

        #[inline(never)]
        fn begin<C: Clock>(&self, owner: &Owner<K, C>) -> Watching<K, C> {
            // Whether anything is needed of this call before its admission,
            // whether its end is recorded (a span to write the outcome on,
            // the histogram), and whether a rejection needs the upstream's
            // name (an event, a per-host series). An aggregate rejection
            // counter needs none of it: `admitted` counts it.
            // Metrics: (the histogram, per host).
            #[cfg(feature = "metrics")]
            let metered = (self.times_calls(), self.per_host());
            #[cfg(not(feature = "metrics"))]
            let metered = (false, false);
            #[cfg(feature = "tracing")]
            let (span, own, traced) = match &self.trace {
                Some((mode, _)) => {
                    let span = match mode {
                        CallSpan::Own => tracing::info_span!(
                            target: "failfast",
                            "circuitbreaker",
                            circuitbreaker.name = tracing::field::Empty,
                            circuitbreaker.state = tracing::field::Empty,
                            circuitbreaker.outcome = tracing::field::Empty,
                            circuitbreaker.ramp_fraction = tracing::field::Empty,
                            otel.status_code = tracing::field::Empty,
                        ),
                        _ => Span::current(),
                    };
                    let live = !span.is_disabled();
                    if live {
                        span.record(NAME_FIELD, tracing::field::display(self.name(owner)));
                    }
                    // A rejection's event may be wanted even without a span.
                    let wanted =
                        live || tracing::enabled!(target: "failfast", tracing::Level::DEBUG);
                    (span, live && *mode == CallSpan::Own, (wanted, live, wanted))
                }
                None => (Span::none(), false, (false, false, false)),
            };
            #[cfg(not(feature = "tracing"))]
            let traced = (false, false, false);
            // A live span over a breaker with a ramp: a ramp rejection
            // records the share it met, read from the breaker.
            #[cfg(feature = "tracing")]
            let ramp_traced = traced.1 && owner.config().ramp.is_some();
            #[cfg(not(feature = "tracing"))]
            let ramp_traced = false;
            let (active, ends, named) = (
                traced.0 || metered.0 || metered.1,
                traced.1 || metered.0,
                traced.2 || metered.1,
            );
            if !active {
                return Watching(None);
            }
            Watching(Some(Begun {
                // A keyed layer's entry, kept to name a rejection (a single
                // breaker's name is the layer's): one reference count. Kept
                // too when a ramp rejection would read its breaker's share.
                owner: match owner {
                    Owner::Entry(entry) if named || ramp_traced => {
                        Some(Owner::Entry(entry.clone()))
                    }
                    Owner::Shared(breaker) if ramp_traced => Some(Owner::Shared(breaker.clone())),
                    _ => None,
                },
                #[cfg(feature = "tracing")]
                id: owner.id(),
                ends,
                #[cfg(feature = "tracing")]
                span,
                #[cfg(feature = "tracing")]
                own,
            }))
        }
    }

    /// The admission's side, for a call something is recorded of: what was
    /// found before the breaker decided.
    struct Begun<K, C: Clock> {
        /// A keyed layer's entry, when a rejection must be named; the
        /// breaker, when a ramp rejection's span needs its share.
        owner: Option<Owner<K, C>>,
        /// The breaker's id, for the rejection log's slot.
        #[cfg(feature = "tracing")]
        id: u32,
        /// Whether an admitted call's end is recorded.
        ends: bool,
        #[cfg(feature = "tracing")]
        span: Span,
        #[cfg(feature = "tracing")]
        own: bool,
    }

    /// The admission's side: `None` when nothing is recorded of the call.
    pub(crate) struct Watching<K, C: Clock>(Option<Begun<K, C>>);

    impl<K, C: Clock> Watching<K, C> {
        #[inline]
        fn idle() -> Watching<K, C> {
            Watching(None)
        }

        /// After admission: a rejection is recorded at once (span, event,
        /// counter); an admitted call's permit is held with its span.
        #[inline]
        pub(crate) fn admitted(
            self,
            watcher: &Watcher<K>,
            admission: Result<LayerPermit<K, C>, Rejected>,
            now: Nanos,
        ) -> Result<Held<K, C>, Rejected> {
            let Some(watch) = &watcher.watch else {
                return admission.map(Held::bare);
            };
            match (admission, self.0) {
                (Ok(permit), Some(begun)) if begun.ends => {
                    Ok(Watching::start(watch, permit, begun, now))
                }
                (Ok(permit), _) => Ok(Held::bare(permit)),
                (Err(rejected), begun) => {
                    Watching::reject(watch, begun.as_ref(), &rejected, now);
                    Err(rejected)
                }
            }
        }

        #[inline(never)]
        fn start(
            watch: &Arc<Watch<K>>,
            permit: LayerPermit<K, C>,
            begun: Begun<K, C>,
            now: Nanos,
        ) -> Held<K, C> {
            #[cfg(feature = "tracing")]
            if !begun.span.is_disabled() {
                begun
                    .span
                    .record(STATE_FIELD, admitted_state(&permit).as_str());
                if let Some(fraction) = ramp_fraction(permit.breaker(), now) {
                    begun.span.record(RAMP_FRACTION_FIELD, fraction);
                }
            }
            #[cfg(not(feature = "metrics"))]
            let _ = watch;
            #[cfg(not(feature = "tracing"))]
            let _ = (begun, now);
            Held::Watched(WatchedPermit {
                watched: Watched {
                    admitted_at: permit.started_at(),
                    #[cfg(feature = "metrics")]
                    watch: watch.times_calls().then(|| watch.clone()),
                    #[cfg(feature = "tracing")]
                    span: begun.span,
                    #[cfg(feature = "tracing")]
                    own: begun.own,
                    #[cfg(not(feature = "metrics"))]
                    _key: core::marker::PhantomData,
                },
                permit: Some(permit),
            })
        }

        #[cold]
        fn reject(watch: &Watch<K>, begun: Option<&Begun<K, C>>, rejected: &Rejected, now: Nanos) {
            let name: &dyn fmt::Display = match begun.and_then(|b| b.owner.as_ref()) {
                Some(owner) => watch.name(owner),
                None => &watch.upstream,
            };
            // Traced only if the admission found a span or a subscriber
            // that wants the event.
            #[cfg(feature = "tracing")]
            if let (Some((_, log)), Some(begun)) = (&watch.trace, begun) {
                let span = &begun.span;
                if !span.is_disabled() {
                    span.record(STATE_FIELD, rejected_state(rejected).as_str());
                    span.record(OUTCOME_FIELD, Ending::Rejected.as_str());
                    if rejected.reason() == crate::error::RejectReason::Ramp {
                        let owner = begun.owner.as_ref();
                        if let Some(fraction) = owner.and_then(|o| ramp_fraction(o, now)) {
                            span.record(RAMP_FRACTION_FIELD, fraction);
                        }
                    }
                    if begun.own {
                        span.record("otel.status_code", "error");
                    }
                }
                log.emit(name, begun.id, rejected, now, begun.own.then_some(span));
            }
            #[cfg(not(feature = "tracing"))]
            let _ = now;
            #[cfg(feature = "metrics")]
            if let Some((_, meters)) = &watch.metrics {
                if watch.per_host() {
                    crate::export::meters::rejected_per_host(&name.to_string(), rejected);
                } else {
                    meters.rejected(rejected);
                }
            }
            let _ = name;
        }
    }

    #[cfg(feature = "tracing")]
    /// The state a call met at admission: a probe met HalfOpen; any other
    /// admitted call met Closed, or a manual mode that admits everyone.
    fn admitted_state<K, C: Clock>(permit: &LayerPermit<K, C>) -> State {
        if permit.is_probe() {
            return State::HalfOpen;
        }
        match permit.breaker().state() {
            s @ (State::Disabled | State::MetricsOnly) => s,
            _ => State::Closed,
        }
    }

    /// The share of calls `breaker` admits at `now` while it ramps up after
    /// a recovery: `None` when it does not ramp now. Read only for a breaker
    /// configured with a ramp (a snapshot reads the window too), so a call
    /// to any other pays one test.
    #[cfg(feature = "tracing")]
    fn ramp_fraction<C: Clock>(breaker: &Breaker<C>, now: Nanos) -> Option<f64> {
        breaker.config().ramp.as_ref()?;
        breaker.snapshot_at(now).ramp_fraction
    }

    /// The state a rejection met (a ramp rejection met Closed: the
    /// breaker has recovered, and admits a share of calls).
    #[cfg(feature = "tracing")]
    fn rejected_state(rejected: &Rejected) -> State {
        use crate::error::RejectReason;
        match rejected.reason() {
            RejectReason::HalfOpenFull => State::HalfOpen,
            RejectReason::ForcedOpen => State::ForcedOpen,
            // The breaker admitted the call (its own rejections come
            // first): a ramp's or a retry budget's refusal meets it closed.
            RejectReason::Ramp | RejectReason::RetryBudget => State::Closed,
            _ => State::Open,
        }
    }

    /// A layer's permit, and — when something records its end — the span
    /// and the histogram it goes to.
    pub(crate) enum Held<K, C: Clock> {
        /// Nothing records the call's end: the permit alone, dropped and
        /// recorded as in a build without the features.
        Bare(LayerPermit<K, C>),
        /// The call's end is recorded, by its verdict or its drop.
        Watched(WatchedPermit<K, C>),
    }

    /// A permit whose call's end is recorded.
    pub(crate) struct WatchedPermit<K, C: Clock> {
        /// `None` once recorded (so the drop knows).
        permit: Option<LayerPermit<K, C>>,
        watched: Watched<K>,
    }

    /// Where a call's end is recorded.
    struct Watched<K> {
        /// When the call was admitted: the permit's own start moves with a
        /// stream's progress, the call's duration does not.
        admitted_at: Nanos,
        /// The watch, when the duration histogram needs it at the end.
        #[cfg(feature = "metrics")]
        watch: Option<Arc<Watch<K>>>,
        #[cfg(feature = "tracing")]
        span: Span,
        #[cfg(feature = "tracing")]
        own: bool,
        #[cfg(not(feature = "metrics"))]
        _key: core::marker::PhantomData<fn(&K)>,
    }

    impl<K> Watched<K> {
        /// Whether the end needs a clock reading of its own (the histogram).
        #[inline]
        fn times(&self) -> bool {
            #[cfg(feature = "metrics")]
            {
                self.watch.is_some()
            }
            #[cfg(not(feature = "metrics"))]
            {
                false
            }
        }

        /// Records how the call ended on its span and in the histogram.
        fn ended<C: Clock>(
            &self,
            ending: Ending,
            owner: &Owner<K, C>,
            start: Nanos,
            end: Option<Nanos>,
        ) {
            #[cfg(feature = "tracing")]
            if !self.span.is_disabled() {
                self.span.record(OUTCOME_FIELD, ending.as_str());
                if self.own && ending.is_error() {
                    self.span.record("otel.status_code", "error");
                }
            }
            #[cfg(feature = "metrics")]
            if let (Some(watch), Some(end)) = (&self.watch, end) {
                let seconds = end.saturating_duration_since(start).as_secs_f64();
                if watch.per_host() {
                    let name = watch.name(owner).to_string();
                    crate::export::meters::duration_per_host(&name, ending.as_str(), seconds);
                } else if let Some((_, meters)) = &watch.metrics {
                    meters.duration(ending, seconds);
                }
            }
            let _ = (ending, owner, start, end);
        }
    }

    impl<K, C: Clock> Held<K, C> {
        /// A permit nothing watches.
        #[inline]
        fn bare(permit: LayerPermit<K, C>) -> Held<K, C> {
            Held::Bare(permit)
        }

        #[inline]
        pub(crate) fn started_at(&self) -> Nanos {
            match self {
                Held::Bare(permit) => permit.started_at(),
                Held::Watched(w) => w.permit.as_ref().map_or(Nanos::NEVER, |p| p.started_at()),
            }
        }

        fn permit_mut(&mut self) -> Option<&mut LayerPermit<K, C>> {
            match self {
                Held::Bare(permit) => Some(permit),
                Held::Watched(w) => w.permit.as_mut(),
            }
        }

        /// The response head came now: the call is a stream from here.
        pub(crate) fn answered_now(&mut self) {
            if let Some(permit) = self.permit_mut() {
                let now = permit.breaker().now();
                permit.answered_at(now);
            }
        }

        /// The stream made progress now.
        pub(crate) fn progress_now(&mut self) {
            if let Some(permit) = self.permit_mut() {
                let now = permit.breaker().now();
                permit.progress_at(now);
            }
        }

        #[cfg(feature = "tracing")]
        pub(super) fn enter(&self) {
            if let Held::Watched(w) = self {
                if w.watched.own {
                    w.watched.span.with_subscriber(|(id, d)| d.enter(id));
                }
            }
        }

        #[cfg(feature = "tracing")]
        pub(super) fn exit(&self) {
            if let Held::Watched(w) = self {
                if w.watched.own {
                    w.watched.span.with_subscriber(|(id, d)| d.exit(id));
                }
            }
        }

        /// Records `outcome` on the permit (at `at`, or when the breaker
        /// needs the time), and the call's ending
        /// on its span and duration histogram. The end is read from the
        /// clock here only when something needs it — the histogram, or a
        /// breaker that times calls (whose verdict would read it anyway) —
        /// and handed to the breaker, so no reading is added for the span.
        ///
        /// The upstream's `hint` is resolved on the breaker's wall clock
        /// (see [`resolve`]) and goes with the verdict.
        #[inline]
        pub(crate) fn record(self, outcome: Outcome, hint: Option<RetryHint>, at: Option<Nanos>) {
            match self {
                Held::Bare(permit) => {
                    let delay = resolve(hint, &permit);
                    permit.record_hinted_at_or_now(outcome, delay, at);
                }
                Held::Watched(mut w) => {
                    if let Some(permit) = w.permit.take() {
                        let delay = resolve(hint, &permit);
                        finish(&w.watched, permit, outcome, delay, at);
                    }
                }
            }
        }
    }

    impl<K, C: Clock> WatchedPermit<K, C> {
        /// A permit dropped without a verdict: its ending judged as the
        /// breaker judges it (by the thread's state and the call's age),
        /// recorded, and the permit dropped for the breaker to count.
        #[cold]
        fn dropped(watched: &Watched<K>, permit: LayerPermit<K, C>) {
            let breaker: &Breaker<C> = permit.breaker();
            let start = watched.admitted_at;
            let (ending, end) = if std::thread::panicking() {
                // A clock of the caller's that panics now would abort the
                // process: the call then goes unmeasured.
                let now = || breaker.try_now().ok();
                (Ending::Panicked, watched.times().then(now).flatten())
            } else {
                // The breaker's own judgement of the drop, so the ending
                // names what the breaker counts.
                let now = breaker.now();
                (Ending::of_drop(permit.judge_drop_at(now, false)), Some(now))
            };
            if std::thread::panicking() {
                // A subscriber or recorder that panicked now would abort
                // the process; what it failed to record is not worth that.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    watched.ended(ending, permit.breaker(), start, end)
                }));
            } else {
                watched.ended(ending, permit.breaker(), start, end);
            }
            drop(permit);
        }
    }

    /// The verdict of a watched call: its ending recorded, then the permit's.
    #[inline(never)]
    fn finish<K, C: Clock>(
        watched: &Watched<K>,
        permit: LayerPermit<K, C>,
        outcome: Outcome,
        hint: Option<Duration>,
        at: Option<Nanos>,
    ) {
        let breaker: &Breaker<C> = permit.breaker();
        let threshold = breaker.config().slow_call_threshold();
        let end = at.or_else(|| (threshold.is_some() || watched.times()).then(|| breaker.now()));
        let start = watched.admitted_at;
        let ending = match outcome {
            Outcome::Success if permit.is_slow_at(end) => Ending::Slow,
            Outcome::Success => Ending::Success,
            Outcome::Failure => Ending::Failure,
            Outcome::Ignored => Ending::Ignored,
            Outcome::Neutral => Ending::Neutral,
        };
        watched.ended(ending, permit.breaker(), start, end);
        permit.record_hinted_at_or_now(outcome, hint, end);
    }

    impl<K, C: Clock> Drop for WatchedPermit<K, C> {
        #[inline]
        fn drop(&mut self) {
            if let Some(permit) = self.permit.take() {
                WatchedPermit::dropped(&self.watched, permit);
            }
        }
    }

    impl<K, C: Clock> fmt::Debug for Held<K, C> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                Held::Bare(p)
                | Held::Watched(WatchedPermit {
                    permit: Some(p), ..
                }) => p.fmt(f),
                Held::Watched(_) => f.write_str("Held(recorded)"),
            }
        }
    }
}
