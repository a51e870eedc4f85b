//! [`BreakerMiddleware`]: one breaker per upstream host in a
//! [`reqwest_middleware`] client, taken from a
//! [`Registry<HostKey>`](crate::registry::HostKey).
//!
//! Each request is keyed by its URL's `host:port` in the
//! [normal form](crate::authority) the keyed tower layer and configuration
//! files use (the port from the scheme when the URL has none:
//! `https://API.example/v1` is `api.example:443`), so one registry can serve
//! a keyed layer, a configuration file's `[hosts."…"]` overrides and this
//! middleware alike.
//!
//! - **Admission.** A request whose breaker refuses it is not sent: the
//!   middleware returns [`reqwest_middleware::Error::Middleware`] holding a
//!   [`Rejected`](crate::Rejected) that names the upstream (downcast it with
//!   `anyhow::Error::downcast_ref`).
//! - **Classification**, as [`HttpClassifier`] does: 5xx and 429 are
//!   failures, other 4xx are ignored, 1xx–3xx are successes; an error from
//!   reqwest (a refused connection, a timeout, a reset) is a failure unless
//!   [`Fault::of`](crate::Fault::of) puts it on this side: out of file
//!   descriptors, or a request body whose own stream failed (a streaming
//!   upload that broke, or that the sender's idle or size limit cut),
//!   which reqwest reports through hyper's error for it, with nothing to
//!   wrap — neutral. A request reqwest could not build never reached the
//!   upstream: neutral. Another [`HttpClassifier`] changes any of these
//!   ([`classify`](BreakerMiddleware::classify)). An error of another
//!   middleware further down the chain brought no answer from the
//!   upstream: the call is judged as a dropped one (below), by its age.
//! - **The upstream's hint.** A 429's or 503's `Retry-After` (delta-seconds
//!   or an HTTP-date, resolved on the breaker's clock,
//!   [`Clock::wall`]) goes with a verdict other than a
//!   success ([`Permit::record_hinted`](crate::Permit::record_hinted)): a
//!   trip it causes opens for at least that long (by default; with
//!   [`Builder::hints`](crate::Builder::hints), the next trip too while
//!   it lasts). A bad one is ignored and counted ([`hint`](crate::hint)).
//! - **Cancellation.** The permit is taken at a clock reading and lives in
//!   the request's future, as in the tower layers: a future dropped before
//!   it resolves (a `tokio::time::timeout` around the call, a caller that
//!   went away) is judged as a layer's dropped call — neutral when early, a
//!   failure (or a slow call) once it is older than the breaker's
//!   [`abandoned_after`](crate::Builder::abandoned_after) or slow-call
//!   threshold.
//! - **Where a timeout goes.** A timeout middleware *before* this one drops
//!   the call when it fires: judged by its age, as above. reqwest's own
//!   timeout (`RequestBuilder::timeout`, `ClientBuilder::timeout`) is a
//!   reqwest error: a failure. A timeout middleware *after* this one returns
//!   its own error, another middleware's: the call is judged by its age, as
//!   a dropped one, so a hung upstream behind it still opens its breaker
//!   (the unanswered rule, or `abandoned_after`), while a middleware that
//!   refuses at once counts nothing.
//!
//! - **Retries.** [`RetryMiddleware`], placed before this middleware,
//!   sends a failed idempotent request again, marked with a
//!   [`RetryAttempt`](crate::http::RetryAttempt): this middleware admits a
//!   marked request through the host's retry budget
//!   ([`Breaker::try_retry`](crate::Breaker::try_retry)); a refused retry
//!   is not sent, and the call ends with the answer of the attempt before
//!   it (or, with [`WhenRefused::Rejection`](crate::http::WhenRefused::Rejection),
//!   the [`Rejected`](crate::Rejected)). An unmarked request is a first try
//!   and pays into the budget. An empty set of extensions (every request a client sends
//!   without a retry middleware) costs one test.
//!
//! ```no_run
//! use failfast::registry::HostKey;
//! use failfast::reqwest::BreakerMiddleware;
//! use failfast::{Breaker, Rejected, Registry};
//! use std::{sync::Arc, time::Duration};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = Arc::new(
//!     Registry::<HostKey>::builder(
//!         Breaker::builder()
//!             .failure_rate(0.5)
//!             .min_calls(20)
//!             .abandoned_after(Duration::from_secs(10)),
//!     )
//!     .build()?,
//! );
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
//!     .with(BreakerMiddleware::new(registry.clone()))
//!     .build();
//!
//! match client.get("http://api.example/v1/items").send().await {
//!     Ok(response) => println!("{}", response.status()),
//!     Err(reqwest_middleware::Error::Middleware(e)) if e.is::<Rejected>() => {
//!         // Nothing was sent: "api.example:80: circuit open; retry after …"
//!         println!("{e}");
//!     }
//!     Err(e) => println!("failed: {e}"),
//! }
//! // The breaker the call went through, by its normal form.
//! println!("{:?}", registry.handle_from("api.example:80").state());
//! # Ok(())
//! # }
//! ```

use core::fmt;
use core::hash::BuildHasher;
use std::collections::hash_map::RandomState;
use std::sync::Arc;

use http::Extensions;
use reqwest::{Request, Response, Url};
use reqwest_middleware::{Middleware, Next};

use crate::authority::{normalise, AuthorityError, KeyBuf, DEFAULT_MAX_KEY_LEN};
use crate::clock::{Clock, QuantaClock};
use crate::hint::RetryHint;
use crate::http::{HttpClassifier, Keyless};
use crate::outcome::Outcome;
use crate::permit::OwnedPermit;
use crate::registry::{Handle, HostKey, Registry};

mod retry;

pub use retry::RetryMiddleware;

/// A `reqwest_middleware::Middleware` that sends each request through its
/// upstream's breaker in a [`Registry<HostKey>`](crate::registry::HostKey)
/// (see the [module docs](self)).
///
/// ```
/// use failfast::registry::HostKey;
/// use failfast::reqwest::BreakerMiddleware;
/// use failfast::http::HttpClassifier;
/// use failfast::{Breaker, Outcome, Registry};
/// use std::sync::Arc;
///
/// let registry = Arc::new(Registry::<HostKey>::builder(Breaker::builder().consecutive_failures(5)).build()?);
/// let middleware = BreakerMiddleware::new(registry)
///     // A 404 from this API means "gone for good": count it.
///     .classify(HttpClassifier::new().status(404, Outcome::Failure));
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new()).with(middleware).build();
/// # let _ = client;
/// # Ok::<(), failfast::ConfigError>(())
/// ```
pub struct BreakerMiddleware<S = RandomState, C: Clock = QuantaClock> {
    registry: Arc<Registry<HostKey, S, C>>,
    classifier: HttpClassifier,
}

impl<S, C: Clock> BreakerMiddleware<S, C> {
    /// A middleware over `registry`'s breakers, classifying with
    /// [`HttpClassifier::new`].
    pub fn new(registry: Arc<Registry<HostKey, S, C>>) -> BreakerMiddleware<S, C> {
        BreakerMiddleware {
            registry,
            classifier: HttpClassifier::new(),
        }
    }

    /// Classifies responses and errors with `classifier`.
    #[must_use]
    pub fn classify(mut self, classifier: HttpClassifier) -> BreakerMiddleware<S, C> {
        self.classifier = classifier;
        self
    }

    /// The registry the breakers live in.
    pub fn registry(&self) -> &Arc<Registry<HostKey, S, C>> {
        &self.registry
    }
}

impl<S, C: Clock> fmt::Debug for BreakerMiddleware<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerMiddleware")
            .field("classifier", &self.classifier)
            .finish_non_exhaustive()
    }
}

/// The upstream key of `url`: its host and port in the
/// [normal form](crate::authority), the port the scheme's default when the
/// URL has none, written into `buf`.
///
/// ```
/// use failfast::authority::KeyBuf;
/// use failfast::reqwest::upstream_key;
///
/// let mut buf = KeyBuf::new();
/// let url = reqwest::Url::parse("https://user@API.Example./v1?q=1").unwrap();
/// assert_eq!(upstream_key(&url, &mut buf), Ok("api.example:443"));
/// let url = reqwest::Url::parse("http://[0:0::1]:8080/").unwrap();
/// assert_eq!(upstream_key(&url, &mut buf), Ok("[::1]:8080"));
/// ```
///
/// # Errors
///
/// [`AuthorityError`]: a URL without a host, or whose host has no normal
/// form (reqwest sends neither).
pub fn upstream_key<'b>(url: &Url, buf: &'b mut KeyBuf) -> Result<&'b str, AuthorityError> {
    let host = url.host_str().ok_or(AuthorityError::Empty)?;
    // The `url` crate drops a port equal to the scheme's default: it
    // stands in for an absent one.
    normalise(
        host.as_bytes(),
        url.port_or_known_default(),
        DEFAULT_MAX_KEY_LEN,
        buf,
    )
}

/// The permit a request holds while it is in flight: its registry entry
/// (kept from eviction until the call ends) and its admission time.
type CallPermit<C> = OwnedPermit<C, Handle<HostKey, C>>;

/// How a call ended, as the breaker records it.
///
/// The one place a response is read: the outcome from its status, and the
/// upstream's hint (a 429's or 503's `Retry-After`, as
/// [`HttpClassifier::hint_of`] reads it) from its headers when the outcome
/// is not a success; `handle` passes both to `record_hinted`.
struct Verdict {
    outcome: Outcome,
    hint: Option<RetryHint>,
}

impl Verdict {
    fn of(classifier: &HttpClassifier, result: &reqwest_middleware::Result<Response>) -> Verdict {
        let outcome = match result {
            Ok(response) => classifier.classify_status(response.status()),
            // Never sent: reqwest could not build the request.
            Err(reqwest_middleware::Error::Reqwest(e)) if e.is_builder() => Outcome::Neutral,
            Err(reqwest_middleware::Error::Reqwest(e)) => classifier.classify_error(e),
            // Another middleware's error: `handle` drops its permit instead.
            Err(reqwest_middleware::Error::Middleware(_)) => Outcome::Neutral,
        };
        let hint = match result {
            // A success's headers are not searched (as in the tower layers).
            Ok(response) if outcome != Outcome::Success => {
                classifier.hint_of(response.status(), response.headers())
            }
            _ => None,
        };
        Verdict { outcome, hint }
    }
}

impl<S: BuildHasher, C: Clock> BreakerMiddleware<S, C> {
    /// Admits a request to `url`'s upstream at one clock reading (a timed
    /// permit: a dropped call is judged by its age), or refuses it with a
    /// [`Rejected`](crate::Rejected) naming the upstream.
    ///
    /// A `retry` ([`RetryAttempt`](crate::http::RetryAttempt)) is admitted
    /// through the breaker's retry budget.
    fn admit(&self, url: &Url, retry: bool) -> Result<CallPermit<C>, reqwest_middleware::Error> {
        let mut buf = KeyBuf::new();
        let key = upstream_key(url, &mut buf)
            .map_err(|e| reqwest_middleware::Error::middleware(Keyless::from(e)))?;
        let handle = self.registry.handle_from(key);
        let now = handle.now();
        let admitted = if retry {
            OwnedPermit::acquire_retry_at(handle, now)
        } else {
            OwnedPermit::acquire_at(handle, now)
        };
        admitted.map_err(|rejected| {
            reqwest_middleware::Error::middleware(rejected.named(Arc::new(HostKey::from(key))))
        })
    }
}

#[async_trait::async_trait]
impl<S, C> Middleware for BreakerMiddleware<S, C>
where
    S: BuildHasher + Send + Sync + 'static,
    C: Clock + Send + Sync + 'static,
{
    async fn handle(
        &self,
        req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let retry = !extensions.is_empty() && retry_marks(extensions);
        // Dropped with this future before the verdict: judged by its age.
        let permit = self.admit(req.url(), retry)?;
        let result = next.run(req, extensions).await;
        if let Err(reqwest_middleware::Error::Middleware(_)) = &result {
            // Another middleware's error, further down the chain: no answer
            // came, so the call is judged as a dropped one, by its age
            // (a timeout middleware that cut a hung upstream is silence,
            // one that refused at once is nothing).
            drop(permit);
            return result;
        }
        let verdict = Verdict::of(&self.classifier, &result);
        // A date is resolved on the breaker's wall clock; a bad hint is
        // ignored (and counted) here.
        let hint = verdict.hint.and_then(|h| h.delay(permit.breaker().wall()));
        permit.record_hinted(verdict.outcome, hint);
        result
    }
}

/// Whether the request is a retry; tells a [`RetryMiddleware`] before this
/// middleware that a breaker guards its attempts. Out of line: only a
/// request with extensions reaches it.
#[cold]
#[inline(never)]
fn retry_marks(extensions: &mut Extensions) -> bool {
    if let Some(guarded) = extensions.get_mut::<retry::Guarded>() {
        guarded.0 = true;
    }
    crate::http::retry_attempt(extensions).is_some()
}
