//! [`error_response`]: a layer's error turned into an HTTP answer.

use http::{HeaderValue, Response, StatusCode};
use tower::BoxError;

use super::timeout::TimedOut;
use crate::error::Rejected;
use crate::http::{rejected_response, Keyless, X_FAILFAST};

/// The answer for a layer's error, if the layer made it:
///
/// * [`Rejected`] → `503 Service Unavailable` with `Retry-After` (when
///   known) and `x-failfast: rejected` — the upstream was not called;
/// * [`TimedOut`] → `504 Gateway Timeout` with `x-failfast: timeout`;
/// * [`Keyless`] (a keyed layer found no upstream key in the request: no
///   authority, no `Host`, or one that does not parse) → `400 Bad Request`
///   with `x-failfast: keyless` — the request's fault, not an upstream's;
/// * anything else (the upstream's own error) → `None`: answer it yourself,
///   typically `502 Bad Gateway`.
///
/// ```
/// use failfast::tower::error_response;
/// use failfast::{Breaker, ManualClock, Nanos};
/// use std::time::Duration;
///
/// let breaker = Breaker::builder()
///     .consecutive_failures(1)
///     .open_duration(Duration::from_secs(10))
///     .build_with_clock(ManualClock::new())?;
/// breaker.try_acquire_at(Nanos::ZERO).unwrap().failure_at(Nanos::ZERO);
/// let err: tower::BoxError = Box::new(breaker.try_acquire_at(Nanos::from_millis(500)).unwrap_err());
///
/// let response = error_response(&err, || "").unwrap();
/// assert_eq!(response.status(), 503);
/// assert_eq!(response.headers()["retry-after"], "10"); // 9.5 s, rounded up
/// # Ok::<(), failfast::ConfigError>(())
/// ```
pub fn error_response<B>(err: &BoxError, body: impl FnOnce() -> B) -> Option<Response<B>> {
    if let Some(rejected) = err.downcast_ref::<Rejected>() {
        return Some(rejected_response(rejected, body()));
    }
    let (status, why) = if err.is::<TimedOut>() {
        (StatusCode::GATEWAY_TIMEOUT, "timeout")
    } else if err.is::<Keyless>() {
        (StatusCode::BAD_REQUEST, "keyless")
    } else {
        return None;
    };
    let mut response = Response::new(body());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(X_FAILFAST, HeaderValue::from_static(why));
    Some(response)
}
