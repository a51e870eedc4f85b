//! A layer's transition hooks: lent to its breaker's (or registry's) hook
//! list, where every transition passes, and kept alive by the layer and the
//! services it builds. Nothing travels with a call.

use core::fmt;
use std::sync::Arc;

use crate::hooks::{Lease, OnTransition};

/// A hook a layer added, with the lease that keeps it heard.
type LentHook = (Arc<dyn OnTransition>, Lease);

/// The hooks a layer added with `on_transition`, each with the lease that
/// keeps it heard. Cloning a layer or a service clones one `Arc` (none
/// without hooks).
#[derive(Clone, Default)]
pub(crate) struct LayerHooks {
    hooks: Option<Arc<[LentHook]>>,
}

impl LayerHooks {
    /// Adds `hook`, lent by `lend` (to a breaker with the layer's upstream
    /// name, or to a registry that names each key).
    pub(crate) fn add(
        &mut self,
        hook: Arc<dyn OnTransition>,
        lend: impl FnOnce(Arc<dyn OnTransition>) -> Lease,
    ) {
        let lease = lend(hook.clone());
        let mut all: Vec<_> = self.hooks.iter().flat_map(|h| h.iter().cloned()).collect();
        all.push((hook, lease));
        self.hooks = Some(all.into());
    }

    /// Lends every hook again through `lend` (the layer's upstream name
    /// changed); the old leases end with this layer's copy of them.
    pub(crate) fn relend(&mut self, mut lend: impl FnMut(Arc<dyn OnTransition>) -> Lease) {
        if let Some(hooks) = &self.hooks {
            let again: Vec<_> = hooks
                .iter()
                .map(|(h, _)| (h.clone(), lend(h.clone())))
                .collect();
            self.hooks = Some(again.into());
        }
    }
}

impl fmt::Debug for LayerHooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.hooks.as_ref().map_or(0, |h| h.len());
        write!(f, "LayerHooks({n})")
    }
}
