//! [`KeyedLayer`] / [`Keyed`]: one breaker per upstream host, picked per
//! request from a [`Registry`].

use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::task::{Context, Poll};
use core::time::Duration;
use std::collections::hash_map::RandomState;
use std::sync::Arc;

use tower::{BoxError, Layer, Service};

use super::classify::{Classify, DefaultClassifier};
use super::future::{shielded, LayerPermit, Reporter, ResponseFuture};
use super::{Hook, OnTransition};
use crate::breaker::Ticket;
use crate::clock::{Clock, Nanos, QuantaClock};
use crate::error::Rejected;
use crate::outcome::Outcome;
use crate::permit::Permit;
use crate::registry::{Handle, Registry};

/// Picks the key of a request: the upstream whose breaker guards it.
/// `None` sends the request on unguarded (nothing admitted, nothing recorded).
///
/// Any `Fn(&Req) -> Option<K>` is a key function; [`AuthorityKey`] is the
/// default for `http::Request`.
pub trait KeyFn<Req> {
    /// The registry's key type.
    type Key;

    /// The key of `req`, or `None` to leave it unguarded.
    fn key(&self, req: &Req) -> Option<Self::Key>;
}

impl<Req, K, F> KeyFn<Req> for F
where
    F: Fn(&Req) -> Option<K>,
{
    type Key = K;

    fn key(&self, req: &Req) -> Option<K> {
        self(req)
    }
}

/// The default key of an `http::Request`: its URI's authority
/// (`host[:port]`, as a client or a forward proxy sees it), else its `Host`
/// header (as a server or a reverse proxy sees it).
///
/// ```
/// use failfast::tower::{AuthorityKey, KeyFn};
///
/// let req = http::Request::get("http://api.example:8080/v1").body(()).unwrap();
/// assert_eq!(AuthorityKey.key(&req).unwrap(), "api.example:8080");
/// let req = http::Request::get("/v1").header("host", "shop.example").body(()).unwrap();
/// assert_eq!(AuthorityKey.key(&req).unwrap(), "shop.example");
/// ```
#[derive(Copy, Clone, Debug, Default)]
pub struct AuthorityKey;

impl<B> KeyFn<http::Request<B>> for AuthorityKey {
    type Key = http::uri::Authority;

    fn key(&self, req: &http::Request<B>) -> Option<http::uri::Authority> {
        if let Some(authority) = req.uri().authority() {
            return Some(authority.clone());
        }
        let host = req.headers().get(http::header::HOST)?;
        http::uri::Authority::try_from(host.as_bytes()).ok()
    }
}

/// A permit on a registry handle: keeps the handle (so the breaker is not
/// evicted while the call runs) and reports through the breaker's own
/// [`Permit`] logic. Dropped without a verdict, it is judged by its age
/// like any permit.
pub(crate) struct KeyedPermit<K, C: Clock> {
    handle: Handle<K, C>,
    ticket: Ticket,
    done: bool,
}

impl<K, C: Clock> KeyedPermit<K, C> {
    /// Admits a call at `now` on `handle`'s breaker and reports the
    /// transition the admission itself caused (Open → HalfOpen), with the key.
    /// A hook that panics gives the permit back neutrally (see [`shielded`]).
    pub(crate) fn acquire(
        handle: Handle<K, C>,
        now: Nanos,
        reporter: Option<&Reporter<K>>,
    ) -> Result<LayerPermit<K, C>, Rejected> {
        let ticket = handle.breaker().ticket_at(now)?;
        let transition = handle.breaker().admission_transition(&ticket);
        let permit = LayerPermit::Keyed(KeyedPermit {
            handle,
            ticket,
            done: false,
        });
        Ok(match (transition, reporter) {
            (Some(t), Some(r)) => shielded(permit, |p| r.report(p.key(), &t)),
            _ => permit,
        })
    }

    pub(crate) fn key(&self) -> &K {
        self.handle.key()
    }

    pub(crate) fn restart_at(&mut self, now: Nanos) {
        self.ticket.start = now;
    }

    /// Gives the permit back neutrally, whatever its age.
    pub(crate) fn release(mut self) {
        self.done = true;
        self.handle.breaker().drop_neutral(self.ticket);
    }

    pub(crate) fn started_at(&self) -> Nanos {
        self.ticket.start
    }

    pub(crate) fn record(
        mut self,
        outcome: Outcome,
        at: Option<Nanos>,
        reporter: Option<&Reporter<K>>,
    ) {
        self.done = true;
        let permit = Permit::new(self.handle.breaker(), self.ticket);
        let transition = match at {
            Some(at) => permit.record_at(outcome, at),
            None => permit.record(outcome),
        };
        if let (Some(t), Some(r)) = (transition, reporter) {
            r.report(Some(self.handle.key()), &t);
        }
    }
}

impl<K, C: Clock> Drop for KeyedPermit<K, C> {
    fn drop(&mut self) {
        if !self.done {
            drop(Permit::new(self.handle.breaker(), self.ticket)); // judged by its age
        }
    }
}

impl<K, C: Clock> fmt::Debug for KeyedPermit<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedPermit")
            .field("generation", &self.ticket.generation)
            .field("probe", &self.ticket.probe)
            .field("start", &self.ticket.start)
            .finish()
    }
}

fn display_key<K: fmt::Display>(key: &K) -> String {
    key.to_string()
}

/// Wraps a service in a [`Keyed`]: one breaker per key, from `registry`.
///
/// ```
/// use failfast::tower::{HttpClassifier, KeyedLayer};
/// use failfast::{Breaker, Registry};
/// use std::sync::Arc;
///
/// let registry = Arc::new(
///     Registry::<http::uri::Authority>::builder(Breaker::builder().failure_rate(0.5).min_calls(20))
///         .build()?,
/// );
/// let client = tower::ServiceBuilder::new()
///     .layer(KeyedLayer::new(registry.clone()).classify(HttpClassifier::new()))
///     .service_fn(|_req: http::Request<()>| async {
///         Ok::<_, std::io::Error>(http::Response::new(()))
///     });
/// # let _ = client;
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
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
    reporter: Option<Reporter<K>>,
}

impl<K, H, C: Clock> KeyedLayer<K, AuthorityKey, DefaultClassifier, H, C> {
    /// A layer keyed by [`AuthorityKey`], classifying `Ok` as success and
    /// `Err` as failure.
    pub fn new(registry: Arc<Registry<K, H, C>>) -> Self {
        KeyedLayer {
            registry,
            key_fn: AuthorityKey,
            classify: DefaultClassifier,
            timeout: None,
            reporter: None,
        }
    }
}

impl<K, Kf, Cl, H, C: Clock> KeyedLayer<K, Kf, Cl, H, C> {
    /// Picks keys with `key_fn` instead (any `Fn(&Req) -> Option<K>`).
    pub fn key_fn<Kf2>(self, key_fn: Kf2) -> KeyedLayer<K, Kf2, Cl, H, C> {
        KeyedLayer {
            registry: self.registry,
            key_fn,
            classify: self.classify,
            timeout: self.timeout,
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
            reporter: self.reporter,
        }
    }

    /// Cuts each admitted call after `timeout`: see [`TimedOut`](super::TimedOut).
    /// Needs a tokio runtime with the time driver.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Reports each transition caused by a call through this layer (by its
    /// admission or its verdict), with
    /// the key formatted by `Display` as the upstream's name (formatting
    /// happens on transitions only).
    pub fn on_transition(mut self, hook: impl OnTransition) -> Self
    where
        K: fmt::Display,
    {
        self.reporter = Some(Reporter {
            hook: Hook(Arc::new(hook)),
            upstream: Arc::from(""),
            name_of: Some(display_key::<K>),
        });
        self
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<Registry<K, H, C>> {
        &self.registry
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
            reporter: self.reporter.clone(),
        }
    }
}

/// A service whose every request is guarded by its key's breaker.
///
/// * `poll_ready` forwards the inner service's readiness and nothing else:
///   one inner service fans out to many hosts, and one open host must not
///   stall the others.
/// * `call` takes the key ([`KeyFn`]), finds or creates its breaker in the
///   registry (one map lookup), and asks it for a permit. Refused, it
///   returns a future ready with [`Rejected`] boxed in [`BoxError`], without
///   calling the inner service. Admitted, the permit (holding the registry
///   handle, so the breaker cannot be evicted mid-call) moves into the
///   [`ResponseFuture`] and is recorded there; a dropped future counts as
///   ignored. A request without a key runs unguarded.
#[derive(Clone, Debug)]
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
    reporter: Option<Reporter<K>>,
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
        let Some(key) = self.key_fn.key(&req) else {
            return ResponseFuture::unguarded(self.inner.call(req), self.classify.clone());
        };
        let handle = self.registry.get_or_insert(key);
        // Always timed: a call through the layer can be abandoned, and only
        // a permit that knows its start can be judged by its age.
        let now = handle.breaker().now();
        ResponseFuture::admitted(
            KeyedPermit::acquire(handle, now, self.reporter.as_ref()),
            || self.inner.call(req),
            self.classify.clone(),
            self.timeout,
            self.reporter.clone(),
        )
    }
}
