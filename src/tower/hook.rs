//! A layer's transition hooks: lent to its breaker's (or registry's) hook
//! list, where every transition passes, and kept alive by the layer and the
//! services it builds. Nothing travels with a call.

use core::fmt;
use std::sync::Arc;

use crate::hooks::{Lease, OnTransition};

/// The hooks a layer added with `on_transition`, each as the lease that
/// keeps it heard (the lease holds the hook). Cloning a layer or a service
/// clones one `Arc` (none without hooks).
#[derive(Clone, Default)]
pub(crate) struct LayerHooks {
    leases: Option<Arc<[Lease]>>,
}

impl LayerHooks {
    /// Adds `hook`, lent by `lend` (to a breaker with the layer's upstream
    /// name, or to a registry that names each key).
    pub(crate) fn add(
        &mut self,
        hook: Arc<dyn OnTransition>,
        lend: impl FnOnce(Arc<dyn OnTransition>) -> Lease,
    ) {
        let mut all: Vec<Lease> = self.leases.iter().flat_map(|l| l.iter().cloned()).collect();
        all.push(lend(hook));
        self.leases = Some(all.into());
    }

    /// Lends every hook again through `lend` (the layer's upstream name
    /// changed); the old leases end with this layer's copy of them.
    pub(crate) fn relend(&mut self, lend: impl FnMut(Arc<dyn OnTransition>) -> Lease) {
        if let Some(leases) = &self.leases {
            let again: Vec<Lease> = leases.iter().map(Lease::hook).map(lend).collect();
            self.leases = Some(again.into());
        }
    }
}

impl fmt::Debug for LayerHooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.leases.as_ref().map_or(0, |l| l.len());
        write!(f, "LayerHooks({n})")
    }
}
