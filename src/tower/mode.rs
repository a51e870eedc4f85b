//! The two modes a layer runs in: [`AtHead`] (the verdict when the response
//! head arrives) and [`AtEnd`] (it may wait for the end of the body, through
//! a [`ClassifyStream`](crate::http::ClassifyStream)).

/// The verdict is taken when the response head arrives (the default mode of
/// every layer): the response is returned as the inner service made it, and
/// a slow or failing body is not seen.
///
/// ```
/// use failfast::tower::{AtHead, FailFastLayer, HttpClassifier};
/// use failfast::{Breaker, QuantaClock};
/// use std::sync::Arc;
///
/// let breaker = Arc::new(Breaker::builder().consecutive_failures(5).build()?);
/// let layer: FailFastLayer<HttpClassifier, QuantaClock, AtHead> =
///     FailFastLayer::new(breaker).classify(HttpClassifier::new());
/// # let _ = layer;
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Copy, Clone, Debug, Default)]
pub struct AtHead;

/// The verdict may wait for the end of the response body: the response's
/// body is wrapped in a [`PermitBody`](super::PermitBody) that carries the
/// permit until the body ends.
///
/// The call then lasts until the body ends: its duration, measured against
/// the slow-call threshold, includes the whole body. That is what a unary
/// gRPC call or a download needs; for long-lived streams (server streaming,
/// server-sent events) leave the slow-call rate off. The layer's timeout
/// still covers only the wait for the head.
///
/// ```
/// use failfast::tower::{AtEnd, FailFastLayer, GrpcClassifier};
/// use failfast::{Breaker, QuantaClock};
/// use std::sync::Arc;
///
/// let breaker = Arc::new(Breaker::builder().consecutive_failures(5).build()?);
/// let layer: FailFastLayer<GrpcClassifier, QuantaClock, AtEnd> =
///     FailFastLayer::new(breaker).classify_at_end(GrpcClassifier::new());
/// # let _ = layer;
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Copy, Clone, Debug, Default)]
pub struct AtEnd;
