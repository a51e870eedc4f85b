//! [`OutboxHook`]: a registry's (or keyed layer's) transition hook that
//! feeds an [`Outbox`].

use std::sync::Arc;

use super::outbox::Outbox;
use crate::hooks::{OnTransition, REMOVED_NAME, SHARED_NAME};
use crate::observe::Transition;

/// Reports a registry's local trips into an [`Outbox`], keyed by the
/// upstream's name: [`Outbox::hook`]. A breaker that no single host owns
/// (named [`SHARED_NAME`] or [`REMOVED_NAME`]) is not shared.
#[derive(Clone, Debug)]
pub struct OutboxHook(Arc<Outbox>);

impl OnTransition for OutboxHook {
    fn on_transition(&self, upstream: &str, transition: &Transition) {
        if upstream == SHARED_NAME || upstream == REMOVED_NAME {
            return;
        }
        self.0.report(upstream, transition);
    }
}

impl Outbox {
    /// A transition hook for [`Registry::on_transition`](crate::Registry::on_transition)
    /// (or a keyed layer's) that reports the registry's local trips here,
    /// named by the key's `Display` (which the replica parses back into a
    /// key). Every local trip reaches it, whatever caused it: a verdict, a
    /// dropped call, a timeout. A shared breaker's trips do not.
    ///
    /// ```
    /// use failfast::registry::HostKey;
    /// use failfast::share::Outbox;
    /// use failfast::{Breaker, Registry};
    /// use std::sync::Arc;
    ///
    /// let registry = Registry::<HostKey>::builder(Breaker::builder().consecutive_failures(1)).build()?;
    /// let outbox = Arc::new(Outbox::new(1024));
    /// registry.on_transition(outbox.hook());
    ///
    /// // A trip however caused: here a call dropped while its caller panics.
    /// let upstream = registry.handle_from("api.example:443");
    /// let permit = upstream.try_acquire().expect("closed");
    /// let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
    ///     let _held = permit;
    ///     std::panic::resume_unwind(Box::new("the caller panicked"));
    /// }));
    /// assert_eq!(outbox.len(), 1);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn hook(self: &Arc<Self>) -> OutboxHook {
        OutboxHook(self.clone())
    }
}
