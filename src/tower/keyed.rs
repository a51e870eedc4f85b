//! [`KeyedLayer`] / [`Keyed`]: one breaker per upstream host, picked per
//! request from a [`Registry`].
//!
//! # Per-request cost
//!
//! With the default [`AuthorityKey`] over a registry of
//! [`HostKey`](crate::registry::HostKey)s (or `String`s), a request for a
//! host already tracked costs: one clock read (shared by the registry's idle
//! stamp and the admission), the key normalised in a stack buffer, one
//! hash, a lock-free lookup in the shard's map, one reference-count
//! increment for the entry the permit holds — and no allocation (a
//! transition hook costs nothing per request). The verdict reads the clock again only when the breaker needs
//! the time (a failure, a probe, a slow-call threshold or a time window); a
//! [`timeout`](KeyedLayer::timeout) arms a tokio timer, which reads tokio's
//! clock.

use core::borrow::Borrow;
use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::marker::PhantomData;
use core::task::{Context, Poll};
use core::time::Duration;
use std::collections::hash_map::RandomState;
use std::sync::Arc;

use tower::{BoxError, Layer, Service};

use super::body::PermitBody;
use super::future::ResponseFuture;
use super::hook::LayerHooks;
use super::mode::{AtEnd, AtHead};
use super::permit::{admit_attempt, Naming, Owner};
use super::retry::Attempt;
use super::watch::Watcher;
use crate::clock::{Clock, Nanos, QuantaClock};
use crate::hooks::OnTransition;
use crate::http::AuthorityKey;
use crate::http::ClassifyStream;
use crate::http::{Classify, DefaultClassifier};
use crate::http::{KeyFn, KeySink};
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
///
/// ```
/// use failfast::registry::HostKey;
/// use failfast::tower::{error_response, Keyless, KeyedLayer, KeylessPolicy};
/// use failfast::{Breaker, Registry};
/// use std::sync::Arc;
/// use tower::{Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), failfast::ConfigError> {
/// let template = Breaker::builder().consecutive_failures(5);
/// let registry = Arc::new(Registry::<HostKey>::builder(template).build()?);
/// let inner = tower::service_fn(|_req: http::Request<()>| async {
///     Ok::<_, std::io::Error>(http::Response::new(()))
/// });
/// // A relative URI without a `Host` header has no upstream key.
/// let keyless = || http::Request::get("/status").body(()).unwrap();
///
/// // The default: refused at once, a 400 for a proxy.
/// let reject = KeyedLayer::new(registry.clone()).layer(inner.clone());
/// let err = reject.oneshot(keyless()).await.unwrap_err();
/// assert!(err.is::<Keyless>());
/// assert_eq!(error_response(&err, || ()).unwrap().status(), 400);
///
/// // Shared: guarded by the registry's one unkeyed breaker.
/// let shared = KeyedLayer::new(registry.clone())
///     .keyless(KeylessPolicy::Shared)
///     .layer(inner);
/// assert!(shared.oneshot(keyless()).await.is_ok());
/// assert_eq!(registry.keyless(), 2); // both counted
/// # Ok(())
/// # }
/// ```
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
///
/// The layer hands each request on unchanged. A call that fails because its
/// own request body failed (a client gone mid-upload, an upload cut by an
/// idle or size limit) is neutral with every shipped classifier, the
/// default one included: hyper says so in its error, and
/// [`Fault::of`](crate::Fault::of) reads it (see [who failed](super#who-failed)).
pub struct KeyedLayer<
    K,
    Kf = AuthorityKey,
    Cl = DefaultClassifier,
    H = RandomState,
    C: Clock = QuantaClock,
    M = AtHead,
> {
    registry: Arc<Registry<K, H, C>>,
    key_fn: Kf,
    classify: Cl,
    timeout: Option<Duration>,
    keyless: KeylessPolicy,
    hooks: LayerHooks,
    naming: Naming<K, C>,
    watch: Watcher<K>,
    mode: PhantomData<fn() -> M>,
}

/// How many slots a keyed layer's rejection log has (see
/// [`RejectionLog`](crate::export::tracing::RejectionLog)): 8 KiB, INFO for
/// up to about this many breakers open at once.
#[cfg(feature = "tracing")]
const KEYED_LOG_SLOTS: usize = 1024;

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
            hooks: LayerHooks::default(),
            naming: Naming::Unnamed,
            watch: Watcher::none(),
            mode: PhantomData,
        }
    }
}

impl<K, Kf, Cl, H, C: Clock, M> KeyedLayer<K, Kf, Cl, H, C, M> {
    /// Picks keys with `key_fn` instead (a [`KeyFn`], e.g. any
    /// `Fn(&Req) -> Option<K>`, or an [`AuthorityKey`] with other limits).
    pub fn key_fn<Kf2>(self, key_fn: Kf2) -> KeyedLayer<K, Kf2, Cl, H, C, M> {
        KeyedLayer {
            registry: self.registry,
            key_fn,
            classify: self.classify,
            timeout: self.timeout,
            keyless: self.keyless,
            hooks: self.hooks,
            naming: self.naming,
            watch: self.watch,
            mode: PhantomData,
        }
    }

    /// Classifies results with `classify` instead, when the response head
    /// arrives ([`AtHead`]).
    pub fn classify<Cl2>(self, classify: Cl2) -> KeyedLayer<K, Kf, Cl2, H, C> {
        self.with_classifier(classify)
    }

    /// Classifies HTTP responses with `classify` ([`AtEnd`]), as
    /// [`FailFastLayer::classify_at_end`](super::FailFastLayer::classify_at_end)
    /// does: the head's verdict when it tells, else the verdict at the end of
    /// the body, which carries the permit (and so the registry entry) until
    /// then. For gRPC upstreams, whose status arrives in the trailers.
    ///
    /// ```
    /// use failfast::registry::HostKey;
    /// use failfast::tower::{GrpcClassifier, KeyedLayer};
    /// use failfast::{Breaker, Registry};
    /// use std::sync::Arc;
    ///
    /// let template = Breaker::builder().consecutive_failures(5);
    /// let registry = Arc::new(Registry::<HostKey>::builder(template).build()?);
    /// let layer = KeyedLayer::new(registry).classify_at_end(GrpcClassifier::new());
    /// # let _ = layer;
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn classify_at_end<G>(self, classify: G) -> KeyedLayer<K, Kf, G, H, C, AtEnd> {
        self.with_classifier(classify)
    }

    fn with_classifier<Cl2, M2>(self, classify: Cl2) -> KeyedLayer<K, Kf, Cl2, H, C, M2> {
        KeyedLayer {
            registry: self.registry,
            key_fn: self.key_fn,
            classify,
            timeout: self.timeout,
            keyless: self.keyless,
            hooks: self.hooks,
            naming: self.naming,
            watch: self.watch,
            mode: PhantomData,
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

    /// Names the key (by `Display`) in every [`Rejected`](crate::Rejected)
    /// the layer returns: [`Rejected::upstream`](crate::Rejected::upstream)
    /// and its `Display` (`api.example:443: circuit open; retry after 9.2s`).
    /// The key is not formatted: the rejection holds the registry entry it
    /// was refused by, which displays its key when asked, behind one small
    /// allocation (a shared pointer to the entry) beside the one tower's
    /// `BoxError` makes anyway. Rejections only; an admitted call pays
    /// nothing. A breaker shared by many keys (the overflow or unkeyed
    /// breaker) is named `(shared)`.
    ///
    /// ```
    /// use failfast::tower::KeyedLayer;
    /// use failfast::registry::HostKey;
    /// use failfast::{Breaker, Registry};
    /// use std::sync::Arc;
    ///
    /// let template = Breaker::builder().consecutive_failures(5);
    /// let registry = Arc::new(Registry::<HostKey>::builder(template).build()?);
    /// let layer = KeyedLayer::new(registry).name_rejections();
    /// # let _ = layer;
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn name_rejections(mut self) -> Self
    where
        K: fmt::Display + Send + Sync + 'static,
    {
        self.naming = Naming::key();
        self
    }

    /// Calls `hook` on every transition of every breaker of the registry,
    /// named by its key (by `Display`, formatted on the stack on
    /// transitions only), whatever caused it: a call through this layer or
    /// another, a drop, a timeout, news from another replica, `force_open`
    /// or `reset` (see [`Registry::on_transition`]). A breaker many keys
    /// share is [`SHARED_NAME`](crate::SHARED_NAME). Several hooks are
    /// called in the order they were added, after the observer.
    ///
    /// The hook is heard while this layer or a service it built lives, and
    /// nothing travels with a call. Build the layer once and clone it: each
    /// layer built with a hook adds it again.
    pub fn on_transition(mut self, hook: impl OnTransition) -> Self
    where
        K: fmt::Display + Send + Sync + 'static,
    {
        let registry = &self.registry;
        self.hooks
            .add(Arc::new(hook), |hook| registry.lend_hook(hook));
        self
    }

    /// Records what each key's breaker did to each call on a span (feature
    /// `tracing`), as [`FailFastLayer::trace_calls`](super::FailFastLayer::trace_calls)
    /// does, with the key (by `Display`) as `circuitbreaker.name`. A
    /// rejection's event is INFO at most once per open period per breaker,
    /// for up to about 1024 breakers open at once (beyond, some first
    /// rejections are DEBUG too: see
    /// [`RejectionLog`](crate::export::tracing::RejectionLog)).
    #[cfg(feature = "tracing")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tracing")))]
    pub fn trace_calls(mut self, span: crate::export::tracing::CallSpan) -> Self
    where
        K: fmt::Display,
    {
        self.watch = self
            .watch
            .keyed(super::watch::display_name::<K>)
            .log_slots(KEYED_LOG_SLOTS)
            .trace(span);
        self
    }

    /// Records per-call series (feature `metrics`), aggregated over the
    /// keys, or per key (by `Display`) with
    /// [`CallMetrics::per_host`](crate::export::metrics::CallMetrics::per_host)
    /// (see [`export::metrics`](crate::export::metrics)).
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn call_metrics(mut self, metrics: crate::export::metrics::CallMetrics) -> Self
    where
        K: fmt::Display,
    {
        self.watch = self
            .watch
            .keyed(super::watch::display_name::<K>)
            .metrics(metrics);
        self
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<Registry<K, H, C>> {
        &self.registry
    }
}

impl<K, Kf: Clone, Cl: Clone, H, C: Clock, M> Clone for KeyedLayer<K, Kf, Cl, H, C, M> {
    fn clone(&self) -> Self {
        KeyedLayer {
            registry: self.registry.clone(),
            key_fn: self.key_fn.clone(),
            classify: self.classify.clone(),
            timeout: self.timeout,
            keyless: self.keyless,
            hooks: self.hooks.clone(),
            naming: self.naming.clone(),
            watch: self.watch.clone(),
            mode: PhantomData,
        }
    }
}

impl<K, Kf: fmt::Debug, Cl: fmt::Debug, H, C: Clock, M> fmt::Debug
    for KeyedLayer<K, Kf, Cl, H, C, M>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedLayer")
            .field("key_fn", &self.key_fn)
            .field("classify", &self.classify)
            .field("timeout", &self.timeout)
            .field("keyless", &self.keyless)
            .field("hooks", &self.hooks)
            .finish_non_exhaustive()
    }
}

impl<S, K, Kf: Clone, Cl: Clone, H, C: Clock, M> Layer<S> for KeyedLayer<K, Kf, Cl, H, C, M> {
    type Service = Keyed<S, K, Kf, Cl, H, C, M>;

    fn layer(&self, inner: S) -> Self::Service {
        Keyed {
            inner,
            registry: self.registry.clone(),
            key_fn: self.key_fn.clone(),
            classify: self.classify.clone(),
            timeout: self.timeout,
            keyless: self.keyless,
            hooks: self.hooks.clone(),
            naming: self.naming.clone(),
            watch: self.watch.clone(),
            mode: PhantomData,
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
/// * A request marked as a retry (a [`RetryAttempt`](crate::http::RetryAttempt)
///   in its extensions, as [`RetryPolicy`](super::RetryPolicy) marks it) is
///   admitted through its host's retry budget
///   ([`Breaker::try_retry`](crate::Breaker::try_retry)): refused with
///   [`RejectReason::RetryBudget`](crate::RejectReason::RetryBudget) when the
///   budget has no room. Any other request is a first try, which pays into
///   the budget. The request type says which it is ([`Attempt`](super::Attempt)).
///
/// ```
/// use failfast::registry::HostKey;
/// use failfast::tower::{HttpClassifier, Keyed, KeyedLayer};
/// use failfast::{Breaker, Registry, State};
/// use std::sync::Arc;
/// use tower::{Layer, Service, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let template = Breaker::builder().consecutive_failures(2);
/// let registry = Arc::new(Registry::<HostKey>::builder(template).build()?);
/// let inner = tower::service_fn(|req: http::Request<()>| async move {
///     let down = req.uri().host() == Some("down.example");
///     let status = if down { 503 } else { 200 };
///     Ok::<_, std::io::Error>(http::Response::builder().status(status).body(()).unwrap())
/// });
/// let mut svc: Keyed<_, HostKey, _, _> = KeyedLayer::new(registry.clone())
///     .classify(HttpClassifier::new())
///     .layer(inner);
/// for host in ["down.example", "down.example", "up.example"] {
///     let req = http::Request::get(format!("http://{host}/")).body(())?;
///     svc.ready().await?.call(req).await?;
/// }
/// assert_eq!(registry.handle_from("down.example:80").state(), State::Open);
/// assert_eq!(registry.handle_from("up.example:80").state(), State::Closed);
/// # Ok(())
/// # }
/// ```
pub struct Keyed<
    S,
    K,
    Kf = AuthorityKey,
    Cl = DefaultClassifier,
    H = RandomState,
    C: Clock = QuantaClock,
    M = AtHead,
> {
    inner: S,
    registry: Arc<Registry<K, H, C>>,
    key_fn: Kf,
    classify: Cl,
    timeout: Option<Duration>,
    keyless: KeylessPolicy,
    hooks: LayerHooks,
    naming: Naming<K, C>,
    watch: Watcher<K>,
    mode: PhantomData<fn() -> M>,
}

impl<S, K, Kf, Cl, H, C: Clock, M> Keyed<S, K, Kf, Cl, H, C, M> {
    /// The registry.
    pub fn registry(&self) -> &Arc<Registry<K, H, C>> {
        &self.registry
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// What `call` does in either mode: one clock reading, the key, the
    /// entry, the admission; then a ready rejection or the inner call with
    /// its permit.
    fn guard<Req>(&mut self, req: Req) -> ResponseFuture<S::Future, Cl, C, K, M>
    where
        S: Service<Req>,
        Req: Attempt,
        K: Hash + Eq + Send + Sync + 'static,
        Kf: KeyFn<Req, Key = K>,
        Cl: Clone,
        H: BuildHasher,
    {
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
        let owner = Owner::Entry(entry);
        let watching = self.watch.begin(&owner);
        // A retry ([`RetryAttempt`](crate::http::RetryAttempt)) goes through
        // the host's retry budget: one test for a request without
        // extensions, the search out of line.
        let retry = req.retry_attempt().is_some();
        let admission = admit_attempt(owner, now, &self.naming, retry);
        ResponseFuture::admitted(
            watching.admitted(&self.watch, admission, now),
            || self.inner.call(req),
            self.classify.clone(),
            self.timeout,
        )
    }
}

impl<S: Clone, K, Kf: Clone, Cl: Clone, H, C: Clock, M> Clone for Keyed<S, K, Kf, Cl, H, C, M> {
    fn clone(&self) -> Self {
        Keyed {
            inner: self.inner.clone(),
            registry: self.registry.clone(),
            key_fn: self.key_fn.clone(),
            classify: self.classify.clone(),
            timeout: self.timeout,
            keyless: self.keyless,
            hooks: self.hooks.clone(),
            naming: self.naming.clone(),
            watch: self.watch.clone(),
            mode: PhantomData,
        }
    }
}

impl<S: fmt::Debug, K, Kf: fmt::Debug, Cl: fmt::Debug, H, C: Clock, M> fmt::Debug
    for Keyed<S, K, Kf, Cl, H, C, M>
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
    Req: Attempt,
    K: Hash + Eq + Send + Sync + 'static,
    Kf: KeyFn<Req, Key = K>,
    Cl: Classify<S::Response, BoxError> + Clone,
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
        self.guard(req)
    }
}

/// The same service classifying at the end of the response stream
/// ([`KeyedLayer::classify_at_end`]).
impl<S, Req, K, Kf, G, H, C, B> Service<Req> for Keyed<S, K, Kf, G, H, C, AtEnd>
where
    S: Service<Req, Response = http::Response<B>>,
    B: http_body::Body,
    S::Error: Into<BoxError>,
    Req: Attempt,
    K: Hash + Eq + Send + Sync + 'static,
    Kf: KeyFn<Req, Key = K>,
    G: ClassifyStream<B, BoxError> + Clone,
    H: BuildHasher,
    C: Clock,
{
    type Response = http::Response<PermitBody<B, G::Eos, C, K>>;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future, G, C, K, AtEnd>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        self.guard(req)
    }
}
