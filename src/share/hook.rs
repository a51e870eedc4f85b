//! [`OutboxHook`]: a keyed layer's transition hook that feeds an [`Outbox`].

use std::sync::Arc;

use super::outbox::Outbox;
use crate::observe::Transition;
use crate::tower::OnTransition;

/// Reports the trips a keyed layer's calls cause into an [`Outbox`], keyed
/// by the upstream's name: [`Outbox::hook`].
#[derive(Clone, Debug)]
pub struct OutboxHook(Arc<Outbox>);

impl OnTransition for OutboxHook {
    fn on_transition(&self, upstream: &str, transition: &Transition) {
        self.0.report(upstream, transition);
    }
}

impl Outbox {
    /// A transition hook for [`KeyedLayer::on_transition`](crate::tower::KeyedLayer::on_transition)
    /// that reports the layer's local trips here, named by the key's
    /// `Display` (which the replica parses back into a key).
    ///
    /// ```
    /// use failfast::registry::HostKey;
    /// use failfast::share::Outbox;
    /// use failfast::tower::KeyedLayer;
    /// use failfast::{Breaker, Registry};
    /// use std::sync::Arc;
    ///
    /// let registry = Arc::new(Registry::<HostKey>::builder(Breaker::builder().consecutive_failures(5)).build()?);
    /// let outbox = Arc::new(Outbox::new(1024));
    /// let layer = KeyedLayer::new(registry).on_transition(outbox.hook());
    /// # let _ = layer;
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn hook(self: &Arc<Self>) -> OutboxHook {
        OutboxHook(self.clone())
    }
}
