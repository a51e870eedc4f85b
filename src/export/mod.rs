//! Adapters that export what the breakers do: [`tracing`](mod@self::tracing)
//! events (feature `tracing`) and [`metrics`](mod@self::metrics) series
//! (feature `metrics`).
//!
//! # Where the upstream's name comes from
//!
//! An [`Observer`](crate::Observer) is per breaker configuration: the one
//! given to a registry serves every key, and a [`Transition`](crate::Transition)
//! carries the breaker's id, not its key. So the name reaches the exporters
//! in one of two ways, and each adapter offers both:
//!
//! * **from a layer** (preferred in proxies): the tower layers know the
//!   upstream (a fixed name, or the request's key) and pass every transition
//!   their calls cause — trips and recoveries returned by verdicts, and the
//!   Open → HalfOpen step taken during admission — to a hook,
//!   `Fn(&str, &Transition)`, e.g. [`tracing::emit`] or
//!   [`metrics::record_transition`].
//! * **as an observer with a label**: [`tracing::TracingObserver::upstream`]
//!   for a breaker that guards one upstream; without a label the event's
//!   `upstream` is the breaker's id (`#` and 16 hex digits), which a
//!   registry derives from the key.
//!
//! Use one of the two for a given breaker, not both, or each transition is
//! reported twice.

mod ending;
#[cfg(all(feature = "metrics", feature = "tower"))]
pub(crate) mod meters;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
#[cfg(feature = "tracing")]
#[cfg_attr(docsrs, doc(cfg(feature = "tracing")))]
pub mod tracing;

pub use ending::Ending;
