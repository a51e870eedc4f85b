//! [`OnTransition`]: the layers' transition hook, told the upstream's name.

use core::fmt;
use std::sync::Arc;

use crate::observe::Transition;

/// Told about each transition a layer's verdicts cause, with the upstream's
/// name. Runs on the request path of the call that caused it: must not block.
///
/// Any `Fn(&str, &Transition) + Send + Sync + 'static` is a hook, for
/// instance `failfast::export::tracing::emit` (feature `tracing`) or
/// `failfast::export::metrics::record_transition` (feature `metrics`).
///
/// ```
/// use failfast::tower::{FailFastLayer, OnTransition};
/// use failfast::{Breaker, State, Transition};
/// use std::sync::{Arc, Mutex};
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// let hook = move |upstream: &str, t: &Transition| {
///     log.lock().unwrap().push(format!("{upstream}: {} -> {}", t.from, t.to));
/// };
/// let breaker = Arc::new(Breaker::builder().consecutive_failures(1).build()?);
/// let layer = FailFastLayer::new(breaker).upstream("payments").on_transition(hook);
/// # let _ = layer;
/// # Ok::<(), failfast::ConfigError>(())
/// ```
pub trait OnTransition: Send + Sync + 'static {
    /// Called once per transition the layer's verdict caused.
    fn on_transition(&self, upstream: &str, transition: &Transition);
}

impl<F> OnTransition for F
where
    F: Fn(&str, &Transition) + Send + Sync + 'static,
{
    fn on_transition(&self, upstream: &str, transition: &Transition) {
        self(upstream, transition)
    }
}

/// A shared hook, cloned into every service of a layer.
#[derive(Clone)]
pub(crate) struct Hook(pub(crate) Arc<dyn OnTransition>);

impl fmt::Debug for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Hook")
    }
}
