//! HTTP answers for a rejected call, and the marks that say an answer is a
//! fallback: [`unavailable`], [`retry_after_secs`], [`mark_stale`].
//! The marks and why these: the [`http`](crate::http#saying-an-answer-is-a-fallback) module.

use core::time::Duration;

use http::{header, HeaderValue, Response, StatusCode};

use crate::error::Rejected;

/// The `x-failfast` header set on answers the proxy made itself.
pub const X_FAILFAST: &str = "x-failfast";

/// `Retry-After` in whole seconds, rounded up, at least 1 (RFC 9110 §10.2.3
/// has no sub-second form). `None` when the breaker names no time (forced
/// open).
pub fn retry_after_secs(rejected: &Rejected) -> Option<u64> {
    rejected
        .retry_after()
        .map(|d| d.as_secs() + u64::from(d.subsec_nanos() > 0))
        .map(|s| s.max(1))
}

/// The `Cache-Status` entry of a stale answer served while the breaker is
/// open.
pub const CACHE_STATUS_STALE: &str = "failfast; hit; detail=circuit-open";

/// `503 Service Unavailable` with `Retry-After` (when known) and
/// `x-failfast: rejected`, around `body`.
pub(crate) fn rejected_response<B>(rejected: &Rejected, body: B) -> Response<B> {
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    if let Some(secs) = retry_after_secs(rejected) {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    headers.insert(X_FAILFAST, HeaderValue::from_static("rejected"));
    response
}

/// The answer for a rejected HTTP request: `503 Service Unavailable`,
/// `Retry-After` (whole seconds, rounded up, when the breaker names a time)
/// and `x-failfast: rejected` — the upstream was not called. The same
/// answer [`error_response`](crate::tower::error_response) gives, as a fallback.
///
/// ```
/// use failfast::http::unavailable;
/// use failfast::{Breaker, ManualClock, Nanos};
/// use std::time::Duration;
///
/// let breaker = Breaker::builder()
///     .consecutive_failures(1)
///     .open_duration(Duration::from_secs(10))
///     .jitter(0.0)
///     .build_with_clock(ManualClock::new())?;
/// breaker.try_acquire_at(Nanos::ZERO).unwrap().failure_at(Nanos::ZERO);
/// let rejected = breaker.try_acquire_at(Nanos::from_millis(2_500)).unwrap_err();
///
/// let response = unavailable::<()>(&rejected);
/// assert_eq!(response.status(), 503);
/// assert_eq!(response.headers()["retry-after"], "8"); // 7.5 s, rounded up
/// # Ok::<(), failfast::ConfigError>(())
/// ```
pub fn unavailable<B: Default>(rejected: &Rejected) -> Response<B> {
    rejected_response(rejected, B::default())
}

/// What an answer marked by [`mark_stale`] carries in its extensions: that
/// it is a fallback, why, and the age of the copy if known.
///
/// ```
/// use failfast::http::{mark_stale, Stale};
/// use failfast::Breaker;
///
/// let breaker = Breaker::builder().consecutive_failures(1).build()?;
/// breaker.force_open();
/// let rejected = breaker.try_acquire().unwrap_err();
/// let mut response = http::Response::new(());
/// mark_stale(&mut response, &rejected, None);
/// let stale = response.extensions().get::<Stale>().expect("marked");
/// assert_eq!(stale.rejected, rejected);
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stale {
    /// Why the fresh call was not made.
    pub rejected: Rejected,
    /// How long ago the copy was stored, if known.
    pub age: Option<Duration>,
}

/// Marks `response` as a stale copy served instead of a rejected call:
/// `x-failfast: fallback`, `Cache-Status: failfast; hit; detail=circuit-open`
/// (added to any the copy carried), `Age` when `age` is known (whole
/// seconds), and a [`Stale`] extension. The module's docs say why these
/// headers and not `Warning`.
///
/// ```
/// use failfast::http::mark_stale;
/// use failfast::Breaker;
/// use std::time::Duration;
///
/// let breaker = Breaker::builder().consecutive_failures(1).build()?;
/// breaker.force_open();
/// let rejected = breaker.try_acquire().unwrap_err();
///
/// let mut response = http::Response::new("yesterday's rates");
/// mark_stale(&mut response, &rejected, Some(Duration::from_millis(90_500)));
/// assert_eq!(response.headers()["x-failfast"], "fallback");
/// assert_eq!(response.headers()["cache-status"], "failfast; hit; detail=circuit-open");
/// assert_eq!(response.headers()["age"], "90");
/// # Ok::<(), failfast::ConfigError>(())
/// ```
pub fn mark_stale<B>(response: &mut Response<B>, rejected: &Rejected, age: Option<Duration>) {
    let headers = response.headers_mut();
    headers.insert(X_FAILFAST, HeaderValue::from_static("fallback"));
    // RFC 9211: the entry of the cache nearest the client comes last.
    headers.append(
        header::CACHE_STATUS,
        HeaderValue::from_static(CACHE_STATUS_STALE),
    );
    match age {
        Some(age) => {
            headers.insert(header::AGE, HeaderValue::from(age.as_secs()));
        }
        None => {
            headers.remove(header::AGE);
        }
    }
    response.extensions_mut().insert(Stale {
        rejected: rejected.clone(),
        age,
    });
}

/// Whether `response` was marked by [`mark_stale`] (its [`Stale`]
/// extension; across the network, read `x-failfast: fallback` instead).
pub fn is_stale<B>(response: &Response<B>) -> bool {
    response.extensions().get::<Stale>().is_some()
}
