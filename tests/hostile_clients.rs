//! Hostile clients through the tower layers: hung upstreams behind outer
//! timeouts, impatient clients while half-open, panicking handlers and
//! panicking hooks. Every scenario runs on tokio's paused clock with the
//! breakers on a [`TokioClock`], so timeouts, open periods and probe leases
//! move together and nothing sleeps for real.

mod common;

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use common::{Log, LogTransitions};
use failfast::tower::{FailFastLayer, KeyedLayer, TimedOut, TokioClock};
use failfast::{Breaker, Reason, Registry, RejectReason, Rejected, State, Transition};
use tokio::time::Instant;
use tower::{BoxError, Layer, Service, ServiceBuilder, ServiceExt};

/// An upstream that accepts every call and never answers, counting calls
/// and when they came.
#[derive(Clone, Default)]
struct Hung {
    calls: Arc<Mutex<Vec<Instant>>>,
}

impl Hung {
    fn count(&self) -> usize {
        self.calls.lock().unwrap().len()
    }

    fn service<Req>(
        &self,
    ) -> impl Service<Req, Response = (), Error = Infallible, Future: Send> + Clone + Send {
        let calls = self.calls.clone();
        tower::service_fn(move |_: Req| {
            calls.lock().unwrap().push(Instant::now());
            std::future::pending::<Result<(), Infallible>>()
        })
    }
}

fn request(uri: &str) -> http::Request<()> {
    http::Request::get(uri).body(()).unwrap()
}

fn rejected(err: &BoxError) -> Option<&Rejected> {
    err.downcast_ref::<Rejected>()
}

/// Runs `f`, expecting a deliberate panic; keeps the default hook quiet for it.
fn quiet_panics() {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&"deliberate") {
                default(info);
            }
        }));
    });
}

// 1. `tokio::time::timeout` around `call_async`: a hung upstream trips it.
#[tokio::test(start_paused = true)]
async fn an_outer_tokio_timeout_around_call_async_trips_on_a_hung_upstream() {
    let breaker = Breaker::builder()
        .consecutive_failures(5)
        .abandoned_after(Duration::from_millis(500))
        .build_with_clock(TokioClock::new())
        .unwrap();
    let hung = Hung::default();
    for _ in 0..5 {
        let call = breaker.call_async(async {
            hung.calls.lock().unwrap().push(Instant::now());
            std::future::pending::<Result<(), ()>>().await
        });
        assert!(tokio::time::timeout(Duration::from_secs(1), call)
            .await
            .is_err());
    }
    assert_eq!(breaker.state(), State::Open);
    let rejected = breaker.call_async(async { Ok::<_, ()>(()) }).await;
    assert!(rejected.is_err());
    assert_eq!(hung.count(), 5, "the sixth call never reached the upstream");
}

// 2. `ServiceBuilder::timeout` placed outside `FailFastLayer`.
#[tokio::test(start_paused = true)]
async fn an_outer_tower_timeout_outside_the_layer_trips_on_a_hung_upstream() {
    let breaker = Arc::new(
        Breaker::builder()
            .consecutive_failures(5)
            .abandoned_after(Duration::from_millis(500))
            .build_with_clock(TokioClock::new())
            .unwrap(),
    );
    let hung = Hung::default();
    let mut svc = ServiceBuilder::new()
        .timeout(Duration::from_secs(1))
        .layer(FailFastLayer::new(breaker.clone()))
        .service(hung.service::<()>());
    for _ in 0..5 {
        let err = svc.ready().await.unwrap().call(()).await.unwrap_err();
        assert!(err.is::<tower::timeout::error::Elapsed>());
    }
    assert_eq!(breaker.state(), State::Open);
    let err = svc.ready().await.unwrap().call(()).await.unwrap_err();
    assert_eq!(rejected(&err).unwrap().reason(), RejectReason::Open);
    assert_eq!(hung.count(), 5);
}

// 3. The same outside `KeyedLayer`: the hung host is cut off, the other is not.
#[tokio::test(start_paused = true)]
async fn an_outer_tower_timeout_outside_the_keyed_layer_trips_that_host_only() {
    let registry = Arc::new(
        Registry::<http::uri::Authority>::builder(
            Breaker::builder()
                .consecutive_failures(3)
                .abandoned_after(Duration::from_millis(500)),
        )
        .build_with_clock(TokioClock::new())
        .unwrap(),
    );
    let hung = Hung::default();
    let mut svc = ServiceBuilder::new()
        .timeout(Duration::from_secs(1))
        .layer(KeyedLayer::new(registry.clone()))
        .service(hung.service::<http::Request<()>>());
    for _ in 0..3 {
        let err = svc
            .ready()
            .await
            .unwrap()
            .call(request("http://down.example/"))
            .await
            .unwrap_err();
        assert!(err.is::<tower::timeout::error::Elapsed>());
    }
    let err = svc
        .ready()
        .await
        .unwrap()
        .call(request("http://down.example/"))
        .await
        .unwrap_err();
    assert_eq!(rejected(&err).unwrap().reason(), RejectReason::Open);
    // Another host still gets through (and times out, unrecorded yet).
    let err = svc
        .ready()
        .await
        .unwrap()
        .call(request("http://up.example/"))
        .await
        .unwrap_err();
    assert!(err.is::<tower::timeout::error::Elapsed>());
    assert_eq!(hung.count(), 4);
    assert_eq!(registry.open_count(), 1);
}

// 4. Half-open, 50 clients that each give up after 1 s, for 30 s: the
// upstream sees one probe per open period, and the open period doubles.
#[tokio::test(start_paused = true)]
async fn impatient_clients_get_one_probe_per_open_period_and_the_backoff_grows() {
    let log = Log::default();
    let breaker = Arc::new(
        Breaker::builder()
            .consecutive_failures(3)
            .open_duration(Duration::from_secs(2))
            .backoff(2.0, Duration::from_secs(60))
            .abandoned_after(Duration::from_millis(500))
            .log_transitions(&log)
            .build_with_clock(TokioClock::new())
            .unwrap(),
    );
    // The upstream notes the breaker's state at each call it receives.
    let seen: Arc<Mutex<Vec<State>>> = Arc::default();
    let (b, log_calls) = (breaker.clone(), seen.clone());
    let upstream = tower::service_fn(move |_: ()| {
        log_calls.lock().unwrap().push(b.state());
        std::future::pending::<Result<(), Infallible>>()
    });
    let svc = FailFastLayer::new(breaker.clone()).layer(upstream);
    let end = Instant::now() + Duration::from_secs(30);
    let clients: Vec<_> = (0..50)
        .map(|_| {
            let mut svc = svc.clone();
            tokio::spawn(async move {
                while Instant::now() < end {
                    let call = svc.ready().await.unwrap().call(());
                    match tokio::time::timeout(Duration::from_secs(1), call).await {
                        Err(_elapsed) => {} // gave up
                        Ok(Err(_rejected)) => tokio::time::sleep(Duration::from_millis(100)).await,
                        Ok(Ok(())) => unreachable!("the upstream never answers"),
                    }
                }
            })
        })
        .collect();
    for c in clients {
        c.await.unwrap();
    }

    let events = log.lock().unwrap().clone();
    let rounds = events
        .iter()
        .filter(|t| t.reason == Reason::OpenElapsed)
        .count();
    assert!(rounds >= 3, "several open periods in 30 s: {rounds}");
    // Calls while Closed came before the trip; after it the breaker never
    // closed again, so every other call reaching the upstream was a probe —
    // exactly one per open period.
    let seen = seen.lock().unwrap().clone();
    let probes = seen.iter().filter(|s| **s == State::HalfOpen).count();
    let closed = seen.iter().filter(|s| **s == State::Closed).count();
    assert_eq!(closed + probes, seen.len(), "never called while Open");
    assert_eq!(probes, rounds, "one probe per open period");
    // Each probe was abandoned and reopened with the next backoff step.
    let periods: Vec<Duration> = events
        .iter()
        .filter(|t| t.to == State::Open)
        .map(|t| t.open_for.unwrap())
        .collect();
    assert_eq!(
        periods[..4],
        [2, 4, 8, 16].map(Duration::from_secs),
        "{events:#?}"
    );
    assert!(events
        .iter()
        .filter(|t| t.from == State::HalfOpen)
        .all(|t| t.reason == Reason::ProbeAbandoned));
}

// 5. Clients that give up early on a slow but healthy upstream prove nothing.
#[tokio::test(start_paused = true)]
async fn clients_giving_up_early_never_trip_a_healthy_upstream() {
    let breaker = Arc::new(
        Breaker::builder()
            .consecutive_failures(3)
            .abandoned_after(Duration::from_secs(1))
            .count_calls(true)
            .build_with_clock(TokioClock::new())
            .unwrap(),
    );
    let upstream = tower::service_fn(|_: ()| async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        Ok::<_, Infallible>(())
    });
    let mut svc = FailFastLayer::new(breaker.clone()).layer(upstream);
    for i in 0..100 {
        let call = svc.ready().await.unwrap().call(());
        let patience = Duration::from_millis(if i % 2 == 0 { 5 } else { 500 });
        let _ = tokio::time::timeout(patience, call).await;
    }
    assert_eq!(breaker.state(), State::Closed);
    let calls = breaker.snapshot().calls.unwrap();
    assert_eq!((calls.dropped, calls.successes), (50, 50));
}

// 6. A handler that panics inside a spawned task: tokio catches the panic,
// the breaker counts a failure.
#[tokio::test(start_paused = true)]
async fn a_panicking_handler_in_a_task_counts_as_a_failure() {
    quiet_panics();
    let breaker = Arc::new(
        Breaker::builder()
            .consecutive_failures(3)
            .count_calls(true)
            .build_with_clock(TokioClock::new())
            .unwrap(),
    );
    let panicking = tower::service_fn(|_: ()| async {
        panic!("deliberate");
        #[allow(unreachable_code)]
        Ok::<(), Infallible>(())
    });
    let svc = FailFastLayer::new(breaker.clone()).layer(panicking);
    for _ in 0..3 {
        let mut svc = svc.clone();
        let task = tokio::spawn(async move { svc.ready().await.unwrap().call(()).await });
        assert!(task.await.unwrap_err().is_panic());
    }
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(breaker.snapshot().calls.unwrap().panicked, 3);
}

// 7. A probe that panics reopens the breaker; no second probe follows at once.
#[tokio::test(start_paused = true)]
async fn a_panicking_probe_reopens_with_the_next_backoff_step() {
    quiet_panics();
    let log = Log::default();
    let breaker = Arc::new(
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_secs(5))
            .log_transitions(&log)
            .build_with_clock(TokioClock::new())
            .unwrap(),
    );
    let panicking = tower::service_fn(|_: ()| async {
        panic!("deliberate");
        #[allow(unreachable_code)]
        Ok::<(), Infallible>(())
    });
    let svc = FailFastLayer::new(breaker.clone()).layer(panicking);
    let _ = breaker.try_acquire().unwrap().failure();
    tokio::time::advance(Duration::from_secs(5)).await;
    let mut probe_svc = svc.clone();
    let task = tokio::spawn(async move { probe_svc.ready().await.unwrap().call(()).await });
    assert!(task.await.unwrap_err().is_panic());
    let last = *log.lock().unwrap().last().unwrap();
    assert_eq!(
        (last.reason, last.open_for),
        (Reason::ProbeFailed, Some(Duration::from_secs(10)))
    );
    let mut svc = svc;
    let err = svc.ready().await.unwrap().call(()).await.unwrap_err();
    assert_eq!(rejected(&err).unwrap().reason(), RejectReason::Open);
}

// 8. A transition hook that panics on Open → HalfOpen does not keep the
// probe slot: the next request probes.
#[tokio::test(start_paused = true)]
async fn a_panicking_hook_on_half_open_leaves_the_probe_slot_usable() {
    quiet_panics();
    let breaker = Arc::new(
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_secs(5))
            .probe_lease(Duration::from_secs(24 * 3600))
            .build_with_clock(TokioClock::new())
            .unwrap(),
    );
    let ok = tower::service_fn(|_: ()| async { Ok::<(), Infallible>(()) });
    let mut svc = FailFastLayer::new(breaker.clone())
        .on_transition(|_: &str, t: &Transition| {
            if t.to == State::HalfOpen {
                panic!("deliberate");
            }
        })
        .layer(ok);
    let _ = breaker.try_acquire().unwrap().failure();
    tokio::time::advance(Duration::from_secs(5)).await;
    let ready = svc.ready().await.unwrap();
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ready.call(())));
    assert!(panicked.is_err());
    assert_eq!(breaker.state(), State::HalfOpen);
    svc.ready().await.unwrap().call(()).await.unwrap();
    assert_eq!(breaker.state(), State::Closed, "the next request probed");
}

// 9. The same through the keyed layer.
#[tokio::test(start_paused = true)]
async fn a_panicking_keyed_hook_on_half_open_leaves_the_probe_slot_usable() {
    quiet_panics();
    let registry = Arc::new(
        Registry::<http::uri::Authority>::builder(
            Breaker::builder()
                .consecutive_failures(1)
                .open_duration(Duration::from_secs(5))
                .probe_lease(Duration::from_secs(24 * 3600)),
        )
        .build_with_clock(TokioClock::new())
        .unwrap(),
    );
    let fails = Arc::new(AtomicUsize::new(1));
    let f = fails.clone();
    let upstream = tower::service_fn(move |_: http::Request<()>| {
        let fail = f.fetch_sub(1, Ordering::SeqCst) > 0;
        async move {
            if fail {
                Err::<(), BoxError>("down".into())
            } else {
                Ok(())
            }
        }
    });
    let mut svc = KeyedLayer::new(registry.clone())
        .on_transition(|_: &str, t: &Transition| {
            if t.to == State::HalfOpen {
                panic!("deliberate");
            }
        })
        .layer(upstream);
    let uri = "http://api.example/";
    assert!(svc.ready().await.unwrap().call(request(uri)).await.is_err());
    assert_eq!(registry.open_count(), 1);
    tokio::time::advance(Duration::from_secs(5)).await;
    let ready = svc.ready().await.unwrap();
    let panicked =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ready.call(request(uri))));
    assert!(panicked.is_err());
    svc.ready().await.unwrap().call(request(uri)).await.unwrap();
    assert_eq!(
        registry.open_count(),
        0,
        "the next request probed and closed it"
    );
}

// 10. Which order of timeouts is right: the layer's own timeout inside it
// records a failure and a slow call at the deadline; an outer timeout that
// fires first abandons the call, judged by `abandoned_after`.
#[tokio::test(start_paused = true)]
async fn the_layers_own_timeout_records_failure_and_slow_an_outer_one_abandons() {
    let breaker = Arc::new(
        Breaker::builder()
            .failure_rate(1.0)
            .slow_call_threshold(Duration::from_millis(800))
            .count_window(10)
            .min_calls(10)
            .count_calls(true)
            .build_with_clock(TokioClock::new())
            .unwrap(),
    );
    let hung = Hung::default();
    // Inside: the layer's timeout (1 s) fires before the outer one (2 s).
    let mut inner_first = ServiceBuilder::new()
        .timeout(Duration::from_secs(2))
        .layer(FailFastLayer::new(breaker.clone()).timeout(Duration::from_secs(1)))
        .service(hung.service::<()>());
    let err = inner_first
        .ready()
        .await
        .unwrap()
        .call(())
        .await
        .unwrap_err();
    assert!(err.is::<TimedOut>());
    let c = breaker.snapshot().calls.unwrap();
    assert_eq!((c.failures, c.slow, c.abandoned), (1, 1, 0));
    // Outside: the outer timeout (1 s) fires first; held past the slow-call
    // threshold (800 ms, the default `abandoned_after`): abandoned, a failure
    // (no slow-call rate here) and slow.
    let mut outer_first = ServiceBuilder::new()
        .timeout(Duration::from_secs(1))
        .layer(FailFastLayer::new(breaker.clone()).timeout(Duration::from_secs(2)))
        .service(hung.service::<()>());
    let err = outer_first
        .ready()
        .await
        .unwrap()
        .call(())
        .await
        .unwrap_err();
    assert!(err.is::<tower::timeout::error::Elapsed>());
    let s = breaker.snapshot();
    let c = s.calls.unwrap();
    assert_eq!((c.failures, c.slow, c.abandoned), (1, 2, 1));
    assert_eq!((s.window.failures, s.window.slow), (2, 2));
}

// A panic polled directly (no runtime catching it): the permit is dropped
// during the unwind, so the failure is recorded before the panic reaches
// the caller.
#[test]
fn a_panic_in_the_inner_future_is_recorded_before_it_reaches_the_caller() {
    quiet_panics();
    let breaker = Arc::new(
        Breaker::builder()
            .consecutive_failures(1)
            .build_with_clock(failfast::ManualClock::new())
            .unwrap(),
    );
    let panicking = tower::service_fn(|_: ()| async {
        panic!("deliberate");
        #[allow(unreachable_code)]
        Ok::<(), Infallible>(())
    });
    let mut svc = FailFastLayer::new(breaker.clone()).layer(panicking);
    let fut = svc.call(());
    let mut fut = pin!(fut);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = fut.as_mut().poll(&mut Context::from_waker(Waker::noop()));
    }));
    assert!(caught.is_err());
    assert_eq!(breaker.state(), State::Open, "recorded during the unwind");
    let _: Poll<()> = Poll::Pending;
}
