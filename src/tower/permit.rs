//! The layers' permit: the crate's one [`OwnedPermit`] over an [`Owner`] — a
//! layer's own breaker or a registry entry — and how the layers admit and
//! name a rejection.

use core::fmt;
use core::ops::Deref;
use std::sync::Arc;

use crate::breaker::Breaker;
use crate::clock::{Clock, Nanos};
use crate::error::{Rejected, UpstreamName};
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
    /// The registry key of an entry's breaker (the per-call span and
    /// series name it).
    #[cfg(any(feature = "tracing", feature = "metrics"))]
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

/// How a layer names the upstream in the [`Rejected`] it returns
/// ([`Rejected::upstream`], shown by its `Display`).
pub(crate) enum Naming<K, C: Clock> {
    /// Unnamed: a layer without an upstream name, or a keyed layer whose
    /// keys are not `Display` (or that was not asked to name them).
    Unnamed,
    /// A layer's fixed name ([`FailFastLayer::upstream`](super::FailFastLayer::upstream)),
    /// shared by reference count.
    Fixed(UpstreamName),
    /// A keyed layer's key: the registry entry it was refused by moves into
    /// the rejection (one small allocation for the shared pointer to it; no
    /// formatting), and displays its key when asked.
    Key(fn(EntryArc<Entry<K, C>>) -> UpstreamName),
}

impl<K, C: Clock> Naming<K, C> {
    /// A layer's fixed name, or none for the empty name a layer starts with.
    pub(crate) fn fixed(name: &str) -> Naming<K, C> {
        if name.is_empty() {
            Naming::Unnamed
        } else {
            Naming::Fixed(Arc::new(name.to_owned()))
        }
    }

    /// Names the entry's key, for keys that display.
    pub(crate) fn key() -> Naming<K, C>
    where
        K: fmt::Display + Send + Sync + 'static,
    {
        Naming::Key(|entry| Arc::new(EntryName(entry)))
    }

    #[cold]
    fn name(&self, owner: Owner<K, C>, rejected: Rejected) -> Rejected {
        match (self, owner) {
            (Naming::Fixed(name), _) => rejected.named(Arc::clone(name)),
            (Naming::Key(name_of), Owner::Entry(entry)) => rejected.named(name_of(entry)),
            _ => rejected,
        }
    }
}

/// A registry entry as a rejection's name: displays the entry's key.
struct EntryName<K, C: Clock>(EntryArc<Entry<K, C>>);

impl<K: fmt::Display, C: Clock> fmt::Display for EntryName<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<K, C: Clock> Clone for Naming<K, C> {
    fn clone(&self) -> Self {
        match self {
            Naming::Unnamed => Naming::Unnamed,
            Naming::Fixed(name) => Naming::Fixed(Arc::clone(name)),
            Naming::Key(name_of) => Naming::Key(*name_of),
        }
    }
}

impl<K, C: Clock> fmt::Debug for Naming<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Naming::Unnamed => f.write_str("Unnamed"),
            Naming::Fixed(name) => write!(f, "Fixed({name})"),
            Naming::Key(_) => f.write_str("Key"),
        }
    }
}

/// Admits a call on `owner`'s breaker at `now`. The transition the
/// admission itself may cause (Open → HalfOpen) reaches the breaker's hooks
/// inside [`ticket_at`](Breaker::ticket_at), which frees the probe slot
/// should a hook panic.
///
/// Layers always admit at a clock reading: a call through a layer can be
/// abandoned (an outer timeout, a client that goes away), and only a permit
/// that knows when it started can be judged by its age when it is dropped.
///
/// A rejection is named by `naming` (see [`Naming`]): the owner is at hand
/// on that path, so a keyed layer's rejection holds the entry that names it
/// instead of formatting its key.
#[inline]
pub(crate) fn admit<K, C: Clock>(
    owner: Owner<K, C>,
    now: Nanos,
    naming: &Naming<K, C>,
) -> Result<LayerPermit<K, C>, Rejected> {
    admit_attempt(owner, now, naming, false)
}

/// [`admit`] for a request that may be a retry
/// ([`RetryAttempt`](crate::http::RetryAttempt)): a retry goes through the
/// breaker's retry budget ([`Breaker::try_retry`]), which pays nothing in
/// and may refuse with
/// [`RejectReason::RetryBudget`](crate::RejectReason::RetryBudget). One
/// path for the permit and the rejection either way; only the ticket
/// differs, and a retry's is taken out of line, so an ordinary request's
/// admission is [`admit`]'s plus one test.
#[inline(always)]
pub(crate) fn admit_attempt<K, C: Clock>(
    owner: Owner<K, C>,
    now: Nanos,
    naming: &Naming<K, C>,
    retry: bool,
) -> Result<LayerPermit<K, C>, Rejected> {
    let ticket = if retry {
        retry_ticket(&owner, now)
    } else {
        owner.ticket_at(now)
    };
    match ticket {
        Ok(ticket) => Ok(OwnedPermit::new(owner, ticket)),
        Err(rejected) => Err(naming.name(owner, rejected)),
    }
}

/// A retry's ticket ([`Breaker::retry_or_call_ticket`]), out of line: an
/// ordinary request's admission pays only the test that chose it.
#[cold]
#[inline(never)]
fn retry_ticket<C: Clock>(
    breaker: &Breaker<C>,
    now: Nanos,
) -> Result<crate::ticket::Ticket, Rejected> {
    breaker.retry_or_call_ticket(now)
}
