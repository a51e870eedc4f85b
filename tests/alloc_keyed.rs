//! The keyed layer's per-request cost, proved by counting: with a held
//! registry of `HostKey`s (or `String`s) and the default `AuthorityKey`, a
//! request for a tracked host makes **no allocation** (the key is normalised
//! in a stack buffer and looked up borrowed) and reads the clock **once**
//! (the registry's idle stamp and the admission share the reading; the
//! verdict of a success on a policy without timing reads none).
//!
//! A separate test binary: its counting global allocator (`counting_alloc`)
//! counts only the current thread's allocations while a check runs, like
//! `tests/alloc.rs`. The inner service is a no-op; requests are built before
//! counting.

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use failfast::registry::HostKey;
use failfast::tower::{KeyedLayer, KeylessPolicy};
use failfast::{Breaker, Clock, ManualClock, Nanos, Registry, Transition};
use tower::{Layer, Service};

mod counting_alloc;
use counting_alloc::allocations;

const REPS: usize = 1_000;

/// A manual clock that counts its readings.
#[derive(Clone, Default)]
struct CountingClock {
    clock: ManualClock,
    reads: Arc<AtomicU64>,
}

impl Clock for CountingClock {
    fn now(&self) -> Nanos {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.clock.now()
    }
}

impl CountingClock {
    fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }
}

/// Drives one call to completion (the inner future is ready at once).
fn call<S, Req>(svc: &mut S, req: Req) -> Result<S::Response, S::Error>
where
    S: Service<Req>,
{
    let mut cx = Context::from_waker(Waker::noop());
    assert!(svc.poll_ready(&mut cx).is_ready());
    match pin!(svc.call(req)).poll(&mut cx) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("the no-op inner service is ready at once"),
    }
}

fn noop() -> impl Service<
    http::Request<()>,
    Response = (),
    Error = Infallible,
    Future = std::future::Ready<Result<(), Infallible>>,
> + Clone {
    tower::service_fn(|_req: http::Request<()>| std::future::ready(Ok(())))
}

/// Requests for `hosts` (round robin), half by `Host` header, half by URI.
fn requests(hosts: &[&str], n: usize) -> Vec<http::Request<()>> {
    (0..n)
        .map(|i| {
            let host = hosts[i % hosts.len()];
            if i % 2 == 0 {
                http::Request::get("/v1")
                    .header("host", host)
                    .body(())
                    .unwrap()
            } else {
                http::Request::get(format!("http://{host}/v1"))
                    .body(())
                    .unwrap()
            }
        })
        .collect()
}

const HOSTS: [&str; 3] = [
    "api.example:8080",
    "Shop.Example.",
    "a-long-service-name.namespace.svc.cluster.local:9000",
];

#[test]
fn a_request_through_the_keyed_layer_allocates_nothing() {
    let clock = CountingClock::default();
    let registry = Arc::new(
        Registry::<HostKey>::builder(Breaker::builder().consecutive_failures(5))
            .capacity(1000)
            .build_with_clock(clock.clone())
            .unwrap(),
    );
    let hook_calls = Arc::new(AtomicU64::new(0));
    let seen = hook_calls.clone();
    let mut svc = KeyedLayer::new(registry.clone())
        .on_transition(move |_: &str, _: &Transition| {
            seen.fetch_add(1, Ordering::Relaxed);
        })
        .layer(noop());
    // First use of each host inserts (allocates the entry): outside the count.
    for req in requests(&HOSTS, HOSTS.len() * 2) {
        call(&mut svc, req).unwrap();
    }
    assert_eq!(registry.len(), 3);
    let reqs = requests(&HOSTS, REPS);
    let n = allocations(|| {
        for req in reqs {
            call(&mut svc, req).unwrap();
        }
    });
    assert_eq!(n, 0, "{n} allocations in {REPS} requests");
    assert_eq!(registry.len(), 3);
    assert_eq!(hook_calls.load(Ordering::Relaxed), 0);

    // A `String` registry looks up borrowed too.
    let strings = Arc::new(
        Registry::<String>::builder(Breaker::builder().consecutive_failures(5))
            .build_with_clock(clock.clone())
            .unwrap(),
    );
    let mut svc = KeyedLayer::new(strings).layer(noop());
    for req in requests(&HOSTS, HOSTS.len() * 2) {
        call(&mut svc, req).unwrap();
    }
    let reqs = requests(&HOSTS, REPS);
    let n = allocations(|| {
        for req in reqs {
            call(&mut svc, req).unwrap();
        }
    });
    assert_eq!(n, 0, "String keys: {n} allocations in {REPS} requests");
}

#[test]
fn keyless_requests_on_the_shared_breaker_allocate_nothing() {
    let registry = Arc::new(
        Registry::<HostKey>::builder(Breaker::builder().consecutive_failures(5))
            .build_with_clock(ManualClock::new())
            .unwrap(),
    );
    let mut svc = KeyedLayer::new(registry.clone())
        .keyless(KeylessPolicy::Shared)
        .layer(noop());
    let reqs = requests(&["bad host", "x:99999"], REPS);
    let n = allocations(|| {
        for req in reqs {
            call(&mut svc, req).unwrap();
        }
    });
    assert_eq!(n, 0, "{n} allocations in {REPS} keyless requests");
    assert_eq!(registry.keyless(), REPS as u64);
    assert!(registry.is_empty());
}

#[test]
fn a_request_reads_the_clock_once() {
    let clock = CountingClock::default();
    let registry = Arc::new(
        Registry::<HostKey>::builder(Breaker::builder().consecutive_failures(5))
            .build_with_clock(clock.clone())
            .unwrap(),
    );
    let mut svc = KeyedLayer::new(registry.clone()).layer(noop());
    for req in requests(&HOSTS, HOSTS.len() * 2) {
        call(&mut svc, req).unwrap();
    }
    let reqs = requests(&HOSTS, REPS);
    let before = clock.reads();
    for req in reqs {
        call(&mut svc, req).unwrap();
    }
    let per_request = (clock.reads() - before) as f64 / REPS as f64;
    assert_eq!(per_request, 1.0, "clock reads per request");
    // A new key too: the insert and its piggybacked sweep step share it.
    let before = clock.reads();
    call(&mut svc, requests(&["new.example"], 1).remove(0)).unwrap();
    assert_eq!(clock.reads() - before, 1);
}
