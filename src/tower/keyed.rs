//! [`KeyedLayer`] / [`Keyed`]: one breaker per upstream host, picked per
//! request from a [`Registry`].
//!
//! # Per-request cost
//!
//! With the default [`AuthorityKey`] over a registry of
//! [`HostKey`](crate::registry::HostKey)s (or `String`s), a request for a
//! host already tracked costs: one clock read (shared by the registry's idle
//! stamp and the admission), the key normalised in a stack buffer, one
//! hash, one shard read lock, one reference-count increment for the entry
//! the permit holds and one for the transition hook if set — and no
//! allocation. The verdict reads the clock again only when the breaker needs
//! the time (a failure, a probe, a slow-call threshold or a time window); a
//! [`timeout`](KeyedLayer::timeout) arms a tokio timer, which reads tokio's
//! clock.

use core::borrow::Borrow;
use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::task::{Context, Poll};
use core::time::Duration;
use std::collections::hash_map::RandomState;
use std::sync::Arc;

use tower::{BoxError, Layer, Service};

use super::authority::AuthorityKey;
use super::classify::{Classify, DefaultClassifier};
use super::future::ResponseFuture;
use super::hook::{Hook, OnTransition};
use super::key::{KeyFn, KeySink};
use super::permit::{admit, Owner, Reporter};
use crate::clock::{Clock, Nanos, QuantaClock};
use crate::registry::{Entry, EntryArc, Registry};

/// The keyed layer's sink: a registry lookup at one clock reading.
struct Lookup<'r, K, H, C: Clock> {
    registry: &'r Registry<K, H, C>,
    now: Nanos,
}

impl<K: Hash + Eq, H: BuildHasher, C: Clock> KeySink<K> for Lookup<'_, K, H, C> {
    type Output = EntryArc<Entry<K, C>>;

    fn owned(self, key: K) -> Self::Output {
        self.registry.entry_owned_at(key, self.now)
    }

    fn borrowed<Q>(self, key: &Q) -> Self::Output
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.registry.entry_borrowed_at(key, self.now)
    }

    fn converted<Q>(self, key: &Q) -> Self::Output
    where
        K: Borrow<Q> + for<'q> From<&'q Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.registry.entry_from_at(key, self.now)
    }
}

/// What the keyed layer does with a request that has no key.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeylessPolicy {
    /// Refuse it at once, without calling the inner service: the call's
    /// future is ready with [`Keyless`](super::Keyless) boxed in [`BoxError`] (a 400 for a
    /// proxy; boxing it is the one allocation of such a request, as for any
    /// error through tower). The default.
    #[default]
    Reject,
    /// Guard it with the registry's one shared unkeyed breaker
    /// ([`Registry::unkeyed`]): keyless requests fail fast together.
    Shared,
}

fn display_key<K: fmt::Display>(key: &K) -> String {
    key.to_string()
}

/// Wraps a service in a [`Keyed`]: one breaker per key, from `registry`.
///
/// ```
/// use failfast::registry::HostKey;
/// use failfast::tower::{HttpClassifier, KeyedLayer, KeylessPolicy};
/// use failfast::{Breaker, Registry};
/// use std::sync::Arc;
///
/// let registry = Arc::new(
///     Registry::<HostKey>::builder(Breaker::builder().failure_rate(0.5).min_calls(20))
///         .capacity(100_000)
///         .build()?,
/// );
/// let client = tower::ServiceBuilder::new()
///     .layer(
///         KeyedLayer::new(registry.clone())
///             .classify(HttpClassifier::new())
///             .keyless(KeylessPolicy::Reject),
///     )
///     .service_fn(|_req: http::Request<()>| async {
///         Ok::<_, std::io::Error>(http::Response::new(()))
///     });
/// # let _ = client;
/// # Ok::<(), failfast::ConfigError>(())
/// ```
pub struct KeyedLayer<
    K,
    Kf = AuthorityKey,
    Cl = DefaultClassifier,
    H = RandomState,
    C: Clock = QuantaClock,
> {
    registry: Arc<Registry<K, H, C>>,
    key_fn: Kf,
    classify: Cl,
    timeout: Option<Duration>,
    keyless: KeylessPolicy,
    reporter: Option<Arc<Reporter<K>>>,
}

impl<K, H, C: Clock> KeyedLayer<K, AuthorityKey<K>, DefaultClassifier, H, C> {
    /// A layer keyed by [`AuthorityKey`], classifying `Ok` as success and
    /// `Err` as failure, rejecting keyless requests.
    pub fn new(registry: Arc<Registry<K, H, C>>) -> Self {
        KeyedLayer {
            registry,
            key_fn: AuthorityKey::new(),
            classify: DefaultClassifier,
            timeout: None,
            keyless: KeylessPolicy::Reject,
            reporter: None,
        }
    }
}

impl<K, Kf, Cl, H, C: Clock> KeyedLayer<K, Kf, Cl, H, C> {
    /// Picks keys with `key_fn` instead (a [`KeyFn`], e.g. any
    /// `Fn(&Req) -> Option<K>`, or an [`AuthorityKey`] with other limits).
    pub fn key_fn<Kf2>(self, key_fn: Kf2) -> KeyedLayer<K, Kf2, Cl, H, C> {
        KeyedLayer {
            registry: self.registry,
            key_fn,
            classify: self.classify,
            timeout: self.timeout,
            keyless: self.keyless,
            reporter: self.reporter,
        }
    }

    /// Classifies results with `classify` instead.
    pub fn classify<Cl2>(self, classify: Cl2) -> KeyedLayer<K, Kf, Cl2, H, C> {
        KeyedLayer {
            registry: self.registry,
            key_fn: self.key_fn,
            classify,
            timeout: self.timeout,
            keyless: self.keyless,
            reporter: self.reporter,
        }
    }

    /// What to do with a request that has no key (default
    /// [`KeylessPolicy::Reject`]); either way it is counted in
    /// [`Registry::keyless`].
    pub fn keyless(mut self, policy: KeylessPolicy) -> Self {
        self.keyless = policy;
        self
    }

    /// Cuts each admitted call after `timeout`: see [`TimedOut`](super::TimedOut).
    /// Needs a tokio runtime with the time driver.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Reports each transition caused by a call through this layer (by its
    /// admission or its verdict), with the key formatted by `Display` as the
    /// upstream's name (formatting happens on transitions only; a breaker
    /// shared by many keys is named `(shared)`). Costs one reference-count
    /// increment per call.
    pub fn on_transition(mut self, hook: impl OnTransition) -> Self
    where
        K: fmt::Display,
    {
        self.reporter = Some(Arc::new(Reporter {
            hook: Hook(Arc::new(hook)),
            upstream: Arc::from("(shared)"),
            name_of: Some(display_key::<K>),
        }));
        self
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<Registry<K, H, C>> {
        &self.registry
    }
}

impl<K, Kf: Clone, Cl: Clone, H, C: Clock> Clone for KeyedLayer<K, Kf, Cl, H, C> {
    fn clone(&self) -> Self {
        KeyedLayer {
            registry: self.registry.clone(),
            key_fn: self.key_fn.clone(),
            classify: self.classify.clone(),
            timeout: self.timeout,
            keyless: self.keyless,
            reporter: self.reporter.clone(),
        }
    }
}

impl<K, Kf: fmt::Debug, Cl: fmt::Debug, H, C: Clock> fmt::Debug for KeyedLayer<K, Kf, Cl, H, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedLayer")
            .field("key_fn", &self.key_fn)
            .field("classify", &self.classify)
            .field("timeout", &self.timeout)
            .field("keyless", &self.keyless)
            .field("reporter", &self.reporter)
            .finish_non_exhaustive()
    }
}

impl<S, K, Kf: Clone, Cl: Clone, H, C: Clock> Layer<S> for KeyedLayer<K, Kf, Cl, H, C> {
    type Service = Keyed<S, K, Kf, Cl, H, C>;

    fn layer(&self, inner: S) -> Self::Service {
        Keyed {
            inner,
            registry: self.registry.clone(),
            key_fn: self.key_fn.clone(),
            classify: self.classify.clone(),
            timeout: self.timeout,
            keyless: self.keyless,
            reporter: self.reporter.clone(),
        }
    }
}

/// A service whose every request is guarded by its key's breaker.
///
/// * `poll_ready` forwards the inner service's readiness and nothing else:
///   one inner service fans out to many hosts, and one open host must not
///   stall the others.
/// * `call` reads the clock once, derives the key ([`KeyFn`]), finds or
///   creates its breaker in the registry (one map lookup; a full registry's
///   overflow breaker for a new key it cannot track), and asks it for a
///   permit. Refused, it returns a future ready with [`Rejected`](crate::Rejected) boxed in
///   [`BoxError`], without calling the inner service. Admitted, the permit
///   (holding the registry entry, so the breaker cannot be evicted mid-call)
///   moves into the [`ResponseFuture`] and is recorded there; a dropped
///   future drops the permit. A request without a key follows the
///   [`KeylessPolicy`]: rejected with [`Keyless`](super::Keyless) (default) or guarded by the
///   registry's unkeyed breaker.
pub struct Keyed<
    S,
    K,
    Kf = AuthorityKey,
    Cl = DefaultClassifier,
    H = RandomState,
    C: Clock = QuantaClock,
> {
    inner: S,
    registry: Arc<Registry<K, H, C>>,
    key_fn: Kf,
    classify: Cl,
    timeout: Option<Duration>,
    keyless: KeylessPolicy,
    reporter: Option<Arc<Reporter<K>>>,
}

impl<S, K, Kf, Cl, H, C: Clock> Keyed<S, K, Kf, Cl, H, C> {
    /// The registry.
    pub fn registry(&self) -> &Arc<Registry<K, H, C>> {
        &self.registry
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: Clone, K, Kf: Clone, Cl: Clone, H, C: Clock> Clone for Keyed<S, K, Kf, Cl, H, C> {
    fn clone(&self) -> Self {
        Keyed {
            inner: self.inner.clone(),
            registry: self.registry.clone(),
            key_fn: self.key_fn.clone(),
            classify: self.classify.clone(),
            timeout: self.timeout,
            keyless: self.keyless,
            reporter: self.reporter.clone(),
        }
    }
}

impl<S: fmt::Debug, K, Kf: fmt::Debug, Cl: fmt::Debug, H, C: Clock> fmt::Debug
    for Keyed<S, K, Kf, Cl, H, C>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyed")
            .field("inner", &self.inner)
            .field("key_fn", &self.key_fn)
            .field("classify", &self.classify)
            .field("timeout", &self.timeout)
            .field("keyless", &self.keyless)
            .finish_non_exhaustive()
    }
}

impl<S, Req, K, Kf, Cl, H, C> Service<Req> for Keyed<S, K, Kf, Cl, H, C>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    K: Hash + Eq + Send + Sync + 'static,
    Kf: KeyFn<Req, Key = K>,
    Cl: Classify<S::Response, S::Error> + Clone,
    H: BuildHasher,
    C: Clock,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future, Cl, C, K>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        // The request's one clock reading: the registry's idle stamp and the
        // admission (and so the deadline's start) share it.
        let now = self.registry.now();
        let lookup = Lookup {
            registry: &self.registry,
            now,
        };
        let entry = match self.key_fn.key_into(&req, lookup) {
            Ok(entry) => entry,
            Err(keyless) => {
                self.registry.count_keyless();
                match self.keyless {
                    KeylessPolicy::Reject => {
                        return ResponseFuture::failed(Box::new(keyless), self.classify.clone())
                    }
                    KeylessPolicy::Shared => self.registry.unkeyed_entry().clone(),
                }
            }
        };
        ResponseFuture::admitted(
            admit(Owner::Entry(entry), now, self.reporter.as_deref()),
            || self.inner.call(req),
            self.classify.clone(),
            self.timeout,
            self.reporter.clone(),
        )
    }
}
