//! What the tower retry files share: the client type a test drives (tower's
//! `RetryLayer` over a breaker layer over an upstream function), the request
//! it sends, and how it reads an answer or a rejection.

#![allow(dead_code)] // Each test file uses part of it.

use failfast::{RejectReason, Rejected};
use tower::{BoxError, Service, ServiceExt};

/// The stack under test, boxed: retries, a breaker layer, the upstream.
pub type Client = tower::util::BoxService<http::Request<String>, http::Response<()>, BoxError>;

/// An idempotent request with no body.
pub fn get() -> http::Request<String> {
    http::Request::get("http://api.example/items")
        .body(String::new())
        .unwrap()
}

/// Sends `req` through `client`: the answer's status, or the error.
pub async fn send(client: &mut Client, req: http::Request<String>) -> Result<u16, BoxError> {
    let response = client.ready().await?.call(req).await?;
    Ok(response.status().as_u16())
}

/// The reason of a breaker's rejection (panics on any other error).
pub fn rejection(e: &BoxError) -> RejectReason {
    e.downcast_ref::<Rejected>()
        .expect("a breaker's rejection")
        .reason()
}
