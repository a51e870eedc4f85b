//! Turning a layer's errors into HTTP answers, and a status view of a
//! registry: the reusable parts of a per-host proxy.

use core::fmt::{self, Write as _};
use core::time::Duration;

use http::{header, HeaderValue, Response, StatusCode};
use tower::BoxError;

use super::timeout::TimedOut;
use crate::clock::Clock;
use crate::error::Rejected;
use crate::registry::Registry;

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

/// The answer for a layer's error, if the layer made it:
///
/// * [`Rejected`] → `503 Service Unavailable` with `Retry-After` (when
///   known) and `x-failfast: rejected` — the upstream was not called;
/// * [`TimedOut`] → `504 Gateway Timeout` with `x-failfast: timeout`;
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
        let mut response = Response::new(body());
        *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        let headers = response.headers_mut();
        if let Some(secs) = retry_after_secs(rejected) {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        headers.insert(X_FAILFAST, HeaderValue::from_static("rejected"));
        return Some(response);
    }
    if err.is::<TimedOut>() {
        let mut response = Response::new(body());
        *response.status_mut() = StatusCode::GATEWAY_TIMEOUT;
        let headers = response.headers_mut();
        headers.insert(X_FAILFAST, HeaderValue::from_static("timeout"));
        return Some(response);
    }
    None
}

/// A JSON view of every breaker of `registry` and its aggregates, for a
/// status endpoint:
///
/// ```json
/// {"tracked":2,"open":1,"half_open":0,"upstreams":[
///   {"upstream":"127.0.0.1:9002","state":"open","retry_after_ms":812,"enough_calls":true,
///    "failure_rate":0,"slow_call_rate":0.8,"calls":10,"failures":0,"slow":8,"trips_in_a_row":1}]}
/// ```
///
/// While a window holds fewer than `min_calls` calls, `enough_calls` is
/// `false` and both rates are `null`: not enough calls yet to judge.
///
/// Upstreams are sorted by name. Reads snapshots only (one pass, each shard
/// under its read lock).
pub fn status_json<K: fmt::Display, H, C: Clock>(registry: &Registry<K, H, C>) -> String {
    let mut rows = Vec::new();
    registry.for_each_snapshot(|key, s| {
        let name = key.to_string();
        let mut row = String::new();
        let _ = write!(row, "{{\"upstream\":");
        json_string(&mut row, &name);
        let _ = write!(
            row,
            ",\"state\":\"{}\",\"retry_after_ms\":{},\"enough_calls\":{},\"failure_rate\":{},\
             \"slow_call_rate\":{},\"calls\":{},\"failures\":{},\"slow\":{},\"trips_in_a_row\":{}}}",
            s.state.as_str(),
            s.retry_after.map_or(0, millis),
            s.failure_rate.is_some(),
            JsonRate(s.failure_rate),
            JsonRate(s.slow_call_rate),
            s.window.calls,
            s.window.failures,
            s.window.slow,
            s.trips_in_a_row,
        );
        rows.push((name, row));
    });
    rows.sort();
    let mut out = format!(
        "{{\"tracked\":{},\"open\":{},\"half_open\":{},\"upstreams\":[",
        registry.len(),
        registry.open_count(),
        registry.half_open_count()
    );
    for (i, (_, row)) in rows.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(row);
    }
    out.push_str("]}");
    out
}

/// A rate in JSON: the number, or `null` while there are not enough calls
/// yet to judge one (fewer than `min_calls` in the window).
struct JsonRate(Option<f64>);

impl fmt::Display for JsonRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(rate) => write!(f, "{rate}"),
            None => f.write_str("null"),
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
