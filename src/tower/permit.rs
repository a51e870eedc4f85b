//! The layers' permit: the crate's one [`OwnedPermit`] over an [`Owner`] — a
//! layer's own breaker or a registry entry — and what the layers do around
//! it: admit with the transition hook shielded, report with the upstream's
//! name, and fail on an unwind.

use core::fmt;
use core::ops::Deref;
use std::sync::Arc;

use super::hook::Hook;
use crate::breaker::Breaker;
use crate::clock::{Clock, Nanos};
use crate::error::Rejected;
use crate::observe::Transition;
use crate::outcome::Outcome;
use crate::permit::OwnedPermit;
use crate::registry::{Entry, EntryArc};

/// What a layer's permit owns its breaker through.
pub(crate) enum Owner<K, C: Clock> {
    /// The one breaker of a [`FailFastLayer`](super::FailFastLayer) or an
    /// [`EjectLayer`](super::EjectLayer).
    Shared(Arc<Breaker<C>>),
    /// A [`KeyedLayer`](super::KeyedLayer)'s registry entry: held for the
    /// call, so the breaker is not evicted while it runs, and it names the
    /// upstream (its key). The lookup stamped the entry with the request's
    /// one clock reading; nothing stamps it again at the end.
    Entry(EntryArc<Entry<K, C>>),
}

impl<K, C: Clock> Owner<K, C> {
    /// The registry key of an entry's breaker.
    pub(crate) fn key(&self) -> Option<&K> {
        match self {
            Owner::Shared(_) => None,
            Owner::Entry(e) => e.key.as_ref(),
        }
    }
}

impl<K, C: Clock> Deref for Owner<K, C> {
    type Target = Breaker<C>;

    #[inline]
    fn deref(&self) -> &Breaker<C> {
        match self {
            Owner::Shared(b) => b,
            Owner::Entry(e) => &e.breaker,
        }
    }
}

impl<K, C: Clock> fmt::Debug for Owner<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Owner::Shared(_) => f.write_str("Shared"),
            Owner::Entry(_) => f.write_str("Entry"),
        }
    }
}

/// A layer's permit.
pub(crate) type LayerPermit<K, C> = OwnedPermit<C, Owner<K, C>>;

/// Where a layer's transitions go: the hook and how to name the upstream.
pub(crate) struct Reporter<K> {
    pub(crate) hook: Hook,
    /// The name of a single-breaker layer's upstream.
    pub(crate) upstream: Arc<str>,
    /// How a keyed layer names a key (on transitions only: it allocates).
    pub(crate) name_of: Option<fn(&K) -> String>,
}

impl<K> Reporter<K> {
    /// A reporter for a single-breaker layer, shared by its services and
    /// their calls (one reference count per call, only with a hook set).
    pub(crate) fn shared(hook: Hook, upstream: Arc<str>) -> Arc<Reporter<K>> {
        Arc::new(Reporter {
            hook,
            upstream,
            name_of: None,
        })
    }

    pub(crate) fn report(&self, key: Option<&K>, transition: &Transition) {
        match (key, self.name_of) {
            (Some(key), Some(name_of)) => self.hook.0.on_transition(&name_of(key), transition),
            _ => self.hook.0.on_transition(&self.upstream, transition),
        }
    }
}

impl<K> fmt::Debug for Reporter<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reporter")
            .field("upstream", &self.upstream)
            .finish_non_exhaustive()
    }
}

impl<K, C: Clock> OwnedPermit<C, Owner<K, C>> {
    /// Records `outcome` (at `at`, or when the breaker needs the time) and
    /// reports the transition it caused, if any, with the upstream's name.
    pub(crate) fn record_reporting(
        self,
        outcome: Outcome,
        at: Option<Nanos>,
        reporter: Option<&Reporter<K>>,
    ) {
        self.record_then(outcome, at, |owner, t| {
            if let Some(r) = reporter {
                r.report(owner.key(), t);
            }
        });
    }
}

/// Admits a call on `owner`'s breaker at `now` and reports the transition the
/// admission itself caused (Open → HalfOpen), with the upstream's name.
///
/// Layers always admit at a clock reading: a call through a layer can be
/// abandoned (an outer timeout, a client that goes away), and only a permit
/// that knows when it started can be judged by its age when it is dropped.
pub(crate) fn admit<K, C: Clock>(
    owner: Owner<K, C>,
    now: Nanos,
    reporter: Option<&Reporter<K>>,
) -> Result<LayerPermit<K, C>, Rejected> {
    let permit = OwnedPermit::acquire_at(owner, now)?;
    Ok(match (permit.transition(), reporter) {
        (Some(t), Some(r)) => shielded(permit, |p| r.report(p.breaker().key(), &t)),
        _ => permit,
    })
}

/// Runs user code (a transition hook) while `permit` is held. Should it
/// panic, the permit is given back neutrally — the hook's panic says nothing
/// about the dependency, and a probe's slot must not stay taken until the
/// lease ends — and the panic goes on unchanged.
fn shielded<K, C: Clock>(
    permit: LayerPermit<K, C>,
    hook: impl FnOnce(&LayerPermit<K, C>),
) -> LayerPermit<K, C> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(&permit))) {
        Ok(()) => permit,
        Err(panic) => {
            permit.release();
            std::panic::resume_unwind(panic)
        }
    }
}
