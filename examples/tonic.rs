//! A tonic client with a circuit breaker around its channel, against a
//! tonic server in the same process on 127.0.0.1.
//!
//! ```sh
//! cargo run --example tonic --features tower
//! ```
//!
//! prints what each call got: prices while the server answers, then
//! `UNAVAILABLE` from the server three times (the breaker opens on the
//! third), then calls turned away by the breaker without a request sent:
//!
//! ```text
//! widget: 1250 cents
//! widget: the server said Unavailable ("pricing is restarting")
//! widget: the server said Unavailable ("pricing is restarting")
//! widget: the server said Unavailable ("pricing is restarting")
//! widget: not sent (pricing: circuit open; retry after 10.0s)
//! the server saw 4 calls; the breaker is open
//! ```
//!
//! The breaking is the library's, in one layer around the channel:
//! [`FailFastLayer`] with [`GrpcClassifier`] judging each call by its
//! `grpc-status` ([`classify_at_end`](FailFastLayer::classify_at_end): read
//! from a trailers-only answer's head, else from the trailers after the
//! last message). `UNAVAILABLE`, `INTERNAL`, `DEADLINE_EXCEEDED`,
//! `RESOURCE_EXHAUSTED`, `UNKNOWN` and `DATA_LOSS` count against the server;
//! a business answer such as `NOT_FOUND` proves it is up and is ignored (see
//! [`GrpcClassifier`]'s table). A call the breaker rejects never reaches the
//! channel: tonic sees a [`Rejected`] error, which the small
//! [`unavailable_when_rejected`] step turns into the status a gRPC caller
//! expects, `UNAVAILABLE`, keeping the [`Rejected`] as its source (when to
//! try again: [`rejection`]).
//!
//! The messages and the client and server stubs in [`shop`] are written by
//! hand with `prost`'s derive, as `tonic-build` would generate them from
//! this file:
//!
//! ```proto
//! syntax = "proto3";
//! package shop;
//! service Prices { rpc Price(PriceRequest) returns (PriceReply); }
//! message PriceRequest { string sku = 1; }
//! message PriceReply { uint64 cents = 1; }
//! ```
//!
//! so building the example needs no `protoc` and no build script. In your
//! service, generate them with `tonic-build` as usual: the layer does not
//! care where the stubs came from.
//!
//! `tests/example_tonic.rs` includes this file and drives it.

#![allow(dead_code)] // `tests/example_tonic.rs` includes this file.

use std::error::Error as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use failfast::tower::{AtEnd, FailFast, FailFastLayer, GrpcClassifier};
use failfast::{Breaker, Clock, Rejected};
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint};
use tonic::Status;
use tower::util::MapErr;
use tower::{BoxError, ServiceBuilder};

/// The channel as the client uses it: the breaker around tonic's
/// [`Channel`], and a rejection turned into `UNAVAILABLE`.
pub type GuardedChannel<C> =
    MapErr<FailFast<Channel, GrpcClassifier, C, AtEnd>, fn(BoxError) -> BoxError>;

/// Wraps `channel` in `breaker`, named `pricing` in its rejections.
///
/// The breaker is the caller's, so it can be shared by every client of
/// the same server, read for a status page, or built on a
/// [`ManualClock`](failfast::ManualClock) in a test.
pub fn guarded<C: Clock>(channel: Channel, breaker: Arc<Breaker<C>>) -> GuardedChannel<C> {
    ServiceBuilder::new()
        .map_err(unavailable_when_rejected as fn(BoxError) -> BoxError)
        .layer(
            FailFastLayer::new(breaker)
                .upstream("pricing")
                .classify_at_end(GrpcClassifier::new()),
        )
        .service(channel)
}

/// A [`Rejected`] becomes `Status::unavailable` (the code a gRPC caller
/// retries later), with the rejection as its source; any other error is left
/// for tonic to map.
pub fn unavailable_when_rejected(err: BoxError) -> BoxError {
    match err.downcast::<Rejected>() {
        Ok(rejected) => {
            let mut status = Status::unavailable(rejected.to_string());
            status.set_source(Arc::new(*rejected));
            Box::new(status)
        }
        Err(other) => other,
    }
}

/// The breaker's rejection behind a status, if the breaker turned the call
/// away (the call was not sent).
pub fn rejection(status: &Status) -> Option<&Rejected> {
    status.source()?.downcast_ref::<Rejected>()
}

/// The example's breaker: open after three failures in a row, for ten
/// seconds (then one probe call decides).
pub fn breaker_template() -> failfast::Builder {
    Breaker::builder()
        .consecutive_failures(3)
        .open_duration(Duration::from_secs(10))
}

/// A client of [`Pricing`] through the breaker, over a lazily connected
/// channel to `addr`.
pub fn client<C: Clock>(
    addr: std::net::SocketAddr,
    breaker: Arc<Breaker<C>>,
) -> shop::PricesClient<GuardedChannel<C>> {
    let endpoint = Endpoint::from_shared(format!("http://{addr}")).expect("a valid URI");
    shop::PricesClient::new(guarded(endpoint.connect_lazy(), breaker))
}

// ---------------------------------------------------------------------------
// The server: a price list that can be told to answer `UNAVAILABLE`.
// ---------------------------------------------------------------------------

/// The server's behaviour, shared with whoever drives it.
#[derive(Debug, Default)]
pub struct Pricing {
    /// Answer `UNAVAILABLE` to every call (a restart, a lost database).
    pub unavailable: AtomicBool,
    /// Calls that reached the server.
    pub calls: AtomicUsize,
}

impl Pricing {
    /// The list price of `sku` in cents, `NOT_FOUND` for an unknown one, or
    /// `UNAVAILABLE` while [`unavailable`](Self::unavailable) is set.
    pub fn price(&self, sku: &str) -> Result<u64, Status> {
        // Relaxed: a count and a switch read by tests after the call
        // returned; they publish no other memory.
        self.calls.fetch_add(1, Ordering::Relaxed);
        if self.unavailable.load(Ordering::Relaxed) {
            return Err(Status::unavailable("pricing is restarting"));
        }
        match sku {
            "widget" => Ok(1250),
            "gadget" => Ok(4999),
            _ => Err(Status::not_found(format!("no such sku: {sku}"))),
        }
    }

    /// Calls that reached the server so far.
    pub fn calls(&self) -> usize {
        // Relaxed: a count (see `price`).
        self.calls.load(Ordering::Relaxed)
    }
}

/// Serves `pricing` on `listener` (plain HTTP/2, no TLS) until the task is
/// dropped.
///
/// # Errors
///
/// tonic's, when the server cannot run.
pub async fn serve(
    listener: TcpListener,
    pricing: Arc<Pricing>,
) -> Result<(), tonic::transport::Error> {
    tonic::transport::Server::builder()
        .serve_with_incoming(
            shop::PricesServer::new(pricing),
            TcpIncoming::from(listener),
        )
        .await
}

// ---------------------------------------------------------------------------
// What `tonic-build` would generate from the `.proto` above, by hand.
// ---------------------------------------------------------------------------

/// The `shop` package: messages, client and server stubs.
pub mod shop {
    use std::convert::Infallible;
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::task::{Context, Poll};

    use bytes::Bytes;
    use http::uri::PathAndQuery;
    use tonic::body::Body;
    use tonic::client::{Grpc, GrpcService};
    use tonic::{IntoRequest, Request, Response, Status};
    use tonic_prost::ProstCodec;
    use tower::BoxError;

    use super::Pricing;

    /// `message PriceRequest { string sku = 1; }`
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PriceRequest {
        /// The stock-keeping unit asked about.
        #[prost(string, tag = "1")]
        pub sku: String,
    }

    /// `message PriceReply { uint64 cents = 1; }`
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PriceReply {
        /// The price in cents.
        #[prost(uint64, tag = "1")]
        pub cents: u64,
    }

    /// The one method's path.
    pub const PRICE: &str = "/shop.Prices/Price";

    /// The client stub, over any gRPC service: a plain [`tonic::transport::Channel`],
    /// or one wrapped in layers, as here.
    #[derive(Debug, Clone)]
    pub struct PricesClient<T> {
        inner: Grpc<T>,
    }

    impl<T> PricesClient<T>
    where
        T: GrpcService<Body>,
        T::Error: Into<BoxError>,
        T::ResponseBody: http_body::Body<Data = Bytes> + Send + 'static,
        <T::ResponseBody as http_body::Body>::Error: Into<BoxError> + Send,
    {
        /// A client over `inner`.
        pub fn new(inner: T) -> Self {
            PricesClient {
                inner: Grpc::new(inner),
            }
        }

        /// `rpc Price(PriceRequest) returns (PriceReply)`.
        ///
        /// # Errors
        ///
        /// The server's status, or the channel's error as a status.
        pub async fn price(
            &mut self,
            request: impl IntoRequest<PriceRequest>,
        ) -> Result<Response<PriceReply>, Status> {
            self.inner
                .ready()
                .await
                .map_err(|e| Status::unknown(format!("service was not ready: {}", e.into())))?;
            let codec = ProstCodec::<PriceRequest, PriceReply>::default();
            let path = PathAndQuery::from_static(PRICE);
            self.inner.unary(request.into_request(), path, codec).await
        }
    }

    /// The server stub, answering from [`Pricing`].
    #[derive(Debug, Clone)]
    pub struct PricesServer {
        pricing: Arc<Pricing>,
    }

    impl PricesServer {
        /// A server for `pricing`.
        pub fn new(pricing: Arc<Pricing>) -> Self {
            PricesServer { pricing }
        }
    }

    type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, Infallible>> + Send>>;

    impl tower::Service<http::Request<Body>> for PricesServer {
        type Response = http::Response<Body>;
        type Error = Infallible;
        type Future = BoxFuture<Self::Response>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: http::Request<Body>) -> Self::Future {
            if req.uri().path() != PRICE {
                return Box::pin(async { Ok(Status::unimplemented("").into_http()) });
            }
            let pricing = self.pricing.clone();
            let method = tower::service_fn(move |req: Request<PriceRequest>| {
                let answer = pricing
                    .price(&req.get_ref().sku)
                    .map(|cents| Response::new(PriceReply { cents }));
                async move { answer }
            });
            Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(ProstCodec::default());
                Ok(grpc.unary(method, req).await)
            })
        }
    }
}

// ---------------------------------------------------------------------------
// The example itself.
// ---------------------------------------------------------------------------

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let pricing = Arc::new(Pricing::default());
    tokio::spawn(serve(listener, pricing.clone()));

    let breaker = Arc::new(breaker_template().build()?);
    let mut client = client(addr, breaker.clone());
    ask(&mut client, "widget").await;
    // Relaxed: a switch (see `Pricing::price`).
    pricing.unavailable.store(true, Ordering::Relaxed);
    for _ in 0..4 {
        ask(&mut client, "widget").await;
    }
    println!(
        "the server saw {} calls; the breaker is {}",
        pricing.calls(),
        breaker.state().as_str()
    );
    Ok(())
}

/// One call, and what came of it.
async fn ask<C: Clock>(client: &mut shop::PricesClient<GuardedChannel<C>>, sku: &str) {
    let request = shop::PriceRequest { sku: sku.into() };
    match client.price(request).await {
        Ok(reply) => println!("{sku}: {} cents", reply.get_ref().cents),
        Err(status) => match rejection(&status) {
            Some(rejected) => println!("{sku}: not sent ({rejected})"),
            None => println!(
                "{sku}: the server said {:?} ({:?})",
                status.code(),
                status.message()
            ),
        },
    }
}
