//! The tower layers in front of tower services: `poll_ready` semantics,
//! rejections, permits carried into response futures, timeouts, the HTTP
//! classifier, the keyed per-host layer and the balancer-aware layer.

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use failfast::tower::{EjectLayer, FailFastLayer, HttpClassifier, KeyedLayer, TimedOut};
use failfast::{Breaker, ManualClock, Registry, RejectReason, Rejected, State, Transition};
use tower::{BoxError, Layer, Service, ServiceExt};

fn counting_service(
    calls: Arc<AtomicUsize>,
    status: u16,
) -> impl Service<
    http::Request<()>,
    Response = http::Response<()>,
    Error = Infallible,
    Future = impl Future<Output = Result<http::Response<()>, Infallible>> + Send,
> + Clone {
    tower::service_fn(move |_req: http::Request<()>| {
        calls.fetch_add(1, Ordering::SeqCst);
        async move { Ok::<_, Infallible>(http::Response::builder().status(status).body(()).unwrap()) }
    })
}

fn request(uri: &str) -> http::Request<()> {
    http::Request::get(uri).body(()).unwrap()
}

fn noop_cx() -> Context<'static> {
    Context::from_waker(Waker::noop())
}

#[tokio::test]
async fn open_breaker_rejects_in_call_not_in_poll_ready() {
    let calls = Arc::new(AtomicUsize::new(0));
    let breaker = Arc::new(
        Breaker::builder()
            .consecutive_failures(2)
            .open_duration(Duration::from_secs(30))
            .build()
            .unwrap(),
    );
    let mut svc = FailFastLayer::new(breaker.clone())
        .classify(HttpClassifier::new())
        .layer(counting_service(calls.clone(), 503));

    for _ in 0..2 {
        let resp = svc.ready().await.unwrap().call(request("/")).await.unwrap();
        assert_eq!(resp.status(), 503);
    }
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    // poll_ready only forwards the inner readiness: Ready even while open.
    assert!(matches!(
        svc.poll_ready(&mut noop_cx()),
        Poll::Ready(Ok(()))
    ));
    let err = svc.call(request("/")).await.unwrap_err();
    let rejected = err
        .downcast_ref::<Rejected>()
        .expect("a Rejected in the BoxError");
    assert_eq!(rejected.reason(), RejectReason::Open);
    assert!(rejected.retry_after().unwrap() > Duration::from_secs(29));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the inner service was not called"
    );
}

#[tokio::test]
async fn classifier_ignores_4xx_and_counts_429() {
    let breaker = Arc::new(
        Breaker::builder()
            .consecutive_failures(3)
            .count_calls(true)
            .build()
            .unwrap(),
    );
    let layer = FailFastLayer::new(breaker.clone()).classify(HttpClassifier::new());
    let mut not_found = layer.layer(counting_service(Arc::default(), 404));
    for _ in 0..10 {
        not_found
            .ready()
            .await
            .unwrap()
            .call(request("/"))
            .await
            .unwrap();
    }
    assert_eq!(breaker.state(), State::Closed);
    let mut busy = layer.layer(counting_service(Arc::default(), 429));
    for _ in 0..3 {
        busy.ready()
            .await
            .unwrap()
            .call(request("/"))
            .await
            .unwrap();
    }
    assert_eq!(breaker.state(), State::Open);
    let calls = breaker.snapshot().calls.unwrap();
    assert_eq!((calls.ignored, calls.failures), (10, 3));
}

#[tokio::test]
async fn an_early_dropped_response_future_is_neutral_and_frees_the_probe() {
    let clock = ManualClock::new();
    let breaker = Arc::new(
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_millis(20))
            .count_calls(true)
            .build_with_clock(clock.clone())
            .unwrap(),
    );
    let never = tower::service_fn(|_: ()| std::future::pending::<Result<(), Infallible>>());
    let mut svc = FailFastLayer::new(breaker.clone()).layer(never);
    breaker.try_acquire().unwrap().failure();
    clock.advance(Duration::from_millis(30));

    // The probe's future is polled once, then dropped (the client went away).
    let mut fut = Box::pin(svc.call(()));
    assert!(fut.as_mut().poll(&mut noop_cx()).is_pending());
    assert_eq!(breaker.state(), State::HalfOpen);
    drop(fut); // at once: sooner than abandoned_after (the 20 ms lease)
    assert_eq!(breaker.snapshot().calls.unwrap().dropped, 1);
    // Its slot is free at once: the next call probes.
    let probe = breaker.try_acquire().expect("the probe slot was freed");
    assert!(probe.is_probe());
    probe.success();
    assert_eq!(breaker.state(), State::Closed);
}

// Paused tokio time: the 5 s service and the 50 ms timeout run on tokio's
// virtual clock, which jumps to the next timer instead of sleeping.
#[tokio::test(start_paused = true)]
async fn timeout_is_a_failure_and_a_slow_call_at_the_instant_it_fired() {
    let breaker = Arc::new(
        Breaker::builder()
            .failure_rate(1.0)
            .slow_call_threshold(Duration::from_millis(40))
            .count_window(10)
            .min_calls(10)
            .count_calls(true)
            .build()
            .unwrap(),
    );
    let slow = tower::service_fn(|_: ()| async {
        tokio::time::sleep(Duration::from_secs(5)).await;
        Ok::<_, Infallible>(())
    });
    let mut svc = FailFastLayer::new(breaker.clone())
        .timeout(Duration::from_millis(50))
        .layer(slow);
    let started = tokio::time::Instant::now();
    let err = svc.ready().await.unwrap().call(()).await.unwrap_err();
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(50),
        "cut at the timeout"
    );
    assert_eq!(
        err.downcast_ref::<TimedOut>().unwrap().after(),
        Duration::from_millis(50)
    );
    let snap = breaker.snapshot();
    let calls = snap.calls.unwrap();
    assert_eq!((calls.failures, calls.slow), (1, 1));
    assert_eq!((snap.window.failures, snap.window.slow), (1, 1));
}

#[tokio::test]
async fn hook_gets_the_upstream_name_of_each_trip_and_recovery() {
    let seen: Arc<Mutex<Vec<(String, State, State)>>> = Arc::default();
    let log = seen.clone();
    let clock = ManualClock::new();
    let breaker = Arc::new(
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_millis(10))
            .build_with_clock(clock.clone())
            .unwrap(),
    );
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let f = fail.clone();
    let inner = tower::service_fn(move |_: ()| {
        let failing = f.load(Ordering::SeqCst);
        async move {
            if failing {
                Err::<(), _>("down")
            } else {
                Ok(())
            }
        }
    });
    let mut svc = FailFastLayer::new(breaker)
        .upstream("payments")
        .on_transition(move |up: &str, t: &Transition| {
            log.lock().unwrap().push((up.to_owned(), t.from, t.to))
        })
        .layer(inner);
    let _ = svc.ready().await.unwrap().call(()).await;
    clock.advance(Duration::from_millis(20));
    fail.store(false, Ordering::SeqCst);
    svc.ready().await.unwrap().call(()).await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [
            ("payments".to_owned(), State::Closed, State::Open),
            ("payments".to_owned(), State::Open, State::HalfOpen),
            ("payments".to_owned(), State::HalfOpen, State::Closed),
        ]
    );
}

#[tokio::test]
async fn keyed_layer_isolates_hosts() {
    let registry = Arc::new(
        Registry::<http::uri::Authority>::builder(
            Breaker::builder()
                .consecutive_failures(3)
                .open_duration(Duration::from_secs(30)),
        )
        .build()
        .unwrap(),
    );
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let inner = tower::service_fn(move |req: http::Request<()>| {
        c.fetch_add(1, Ordering::SeqCst);
        let status = if req.uri().host() == Some("bad.test") {
            503
        } else {
            200
        };
        async move { Ok::<_, Infallible>(http::Response::builder().status(status).body(()).unwrap()) }
    });
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = seen.clone();
    let mut svc = KeyedLayer::new(registry.clone())
        .classify(HttpClassifier::new())
        .on_transition(move |up: &str, _: &Transition| log.lock().unwrap().push(up.to_owned()))
        .layer(inner);
    for _ in 0..3 {
        let r = svc
            .ready()
            .await
            .unwrap()
            .call(request("http://bad.test:8080/"))
            .await;
        assert_eq!(r.unwrap().status(), 503);
    }
    let err = svc
        .ready()
        .await
        .unwrap()
        .call(request("http://bad.test:8080/"))
        .await
        .unwrap_err();
    assert!(err.is::<Rejected>());
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    for _ in 0..5 {
        let r = svc
            .ready()
            .await
            .unwrap()
            .call(request("http://good.test/"))
            .await;
        assert_eq!(r.unwrap().status(), 200);
    }
    assert_eq!((registry.len(), registry.open_count()), (2, 1));
    assert_eq!(*seen.lock().unwrap(), ["bad.test:8080"]);
    // No key (no authority, no Host): rejected by default, inner not called.
    let r = svc.ready().await.unwrap().call(request("/relative")).await;
    let err = r.unwrap_err();
    let keyless = err.downcast_ref::<failfast::tower::Keyless>().unwrap();
    assert_eq!(keyless.reason(), failfast::tower::KeylessReason::Missing);
    // The request's fault: a 400, not an upstream's 503.
    let response = failfast::tower::error_response(&err, || ()).unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(response.headers()["x-failfast"], "keyless");
    assert_eq!(calls.load(Ordering::SeqCst), 8);
    assert_eq!(registry.keyless(), 1);
}

/// A waker that remembers whether it was woken.
#[derive(Default)]
struct Woken(std::sync::atomic::AtomicBool);

impl std::task::Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

// Paused tokio time and a ManualClock, moved together: the endpoint's timer
// and the breaker's open period run on simulated time, with no real wait.
#[tokio::test(start_paused = true)]
async fn eject_is_pending_while_open_never_err_and_wakes_at_probe_time() {
    let clock = ManualClock::new();
    let breaker = Arc::new(
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_millis(150))
            .build_with_clock(clock.clone())
            .unwrap(),
    );
    let inner = tower::service_fn(|ok: bool| async move {
        if ok {
            Ok(())
        } else {
            Err("down")
        }
    });
    let mut svc = EjectLayer::new(breaker.clone()).layer(inner);
    let _ = svc.ready().await.unwrap().call(false).await;
    assert_eq!(breaker.state(), State::Open);

    // Pending, not Err.
    let woken = Arc::new(Woken::default());
    let waker = Waker::from(woken.clone());
    let mut cx = Context::from_waker(&waker);
    assert!(svc.poll_ready(&mut cx).is_pending());
    // Woken by its own timer when the probe time comes, not before.
    clock.advance(Duration::from_millis(149));
    tokio::time::advance(Duration::from_millis(149)).await;
    assert!(!woken.0.load(Ordering::SeqCst), "not before the probe time");
    clock.advance(Duration::from_millis(1));
    tokio::time::advance(Duration::from_millis(1)).await;
    assert!(woken.0.load(Ordering::SeqCst), "woken at the probe time");
    assert!(matches!(svc.poll_ready(&mut cx), Poll::Ready(Ok(()))));
    assert!(svc.holds_permit());
    assert_eq!(breaker.state(), State::HalfOpen);
    svc.call(true).await.unwrap();
    assert_eq!(breaker.state(), State::Closed);
}

#[tokio::test]
async fn p2c_balancer_routes_around_an_open_endpoint_and_keeps_it() {
    use tower::balance::p2c::Balance;
    use tower::discover::ServiceList;
    use tower::load::Constant;

    let open = Arc::new(
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_secs(60))
            .build()
            .unwrap(),
    );
    open.try_acquire().unwrap().failure();
    let healthy = Arc::new(Breaker::builder().consecutive_failures(1).build().unwrap());
    let hits = [Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0))];
    let endpoint = |i: usize, breaker: Arc<Breaker>| {
        let hit = hits[i].clone();
        let svc = tower::service_fn(move |_: ()| {
            hit.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, BoxError>(()) }
        });
        Constant::new(EjectLayer::new(breaker).layer(svc), 0)
    };
    let mut balance = Balance::new(ServiceList::new(vec![
        endpoint(0, open.clone()),
        endpoint(1, healthy),
    ]));
    for _ in 0..20 {
        balance.ready().await.unwrap().call(()).await.unwrap();
    }
    assert_eq!(
        hits[0].load(Ordering::SeqCst),
        0,
        "the open endpoint got nothing"
    );
    assert_eq!(hits[1].load(Ordering::SeqCst), 20);
    assert_eq!(balance.len(), 2, "the open endpoint was not dropped");
}

#[test]
fn eject_never_errs_when_forced_open() {
    // Paused tokio time: the re-check timer fires on tokio's virtual clock.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let breaker = Arc::new(Breaker::builder().consecutive_failures(1).build().unwrap());
        breaker.force_open();
        let inner = tower::service_fn(|_: ()| async { Ok::<_, Infallible>(()) });
        let mut svc = EjectLayer::new(breaker.clone())
            .recheck(Duration::from_millis(5))
            .layer(inner);
        let mut ready = pin!(svc.ready());
        for _ in 0..3 {
            assert!(futures_poll(&mut ready).await.is_pending());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        breaker.reset();
        tokio::time::timeout(Duration::from_secs(1), ready)
            .await
            .unwrap()
            .unwrap();
    });
}

/// Polls `fut` once in the current task.
async fn futures_poll<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(std::pin::Pin::new(&mut *fut).poll(cx))).await
}

// An endpoint the balancer readied but did not pick holds its permit idle.
// If the breaker trips and recovers meanwhile (Closed → Open → HalfOpen →
// Closed), that permit belongs to a finished generation: a verdict on it is
// discarded. The endpoint must drop it and ask again, so that the next call
// through it counts.
#[tokio::test(start_paused = true)]
async fn balancer_endpoint_idle_across_a_trip_and_recovery_takes_a_fresh_permit() {
    use tower::balance::p2c::Balance;
    use tower::discover::ServiceList;
    use tower::load::Constant;

    let clock = ManualClock::new();
    let breaker = Arc::new(
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_millis(10))
            .abandoned_after(Duration::from_millis(15))
            .count_calls(true)
            .build_with_clock(clock.clone())
            .unwrap(),
    );
    let inner = tower::service_fn(|ok: bool| async move {
        if ok {
            Ok(())
        } else {
            Err("down")
        }
    });
    let endpoint = Constant::new(EjectLayer::new(breaker.clone()).layer(inner), 0);
    let mut balance = Balance::new(ServiceList::new(vec![endpoint]));

    // Readied, not called: the endpoint holds a permit of the Closed generation.
    balance.ready().await.unwrap();
    let admitted_in = breaker.snapshot().generation;

    // Other callers trip the breaker and a probe closes it again.
    breaker.try_acquire().unwrap().failure();
    assert_eq!(breaker.state(), State::Open);
    clock.advance(Duration::from_millis(20));
    let probe = breaker.try_acquire().unwrap();
    assert!(probe.is_probe());
    probe.success();
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().generation, admitted_in + 3);

    // The next request goes to the idle endpoint and fails: it must count.
    let failed = balance.ready().await.unwrap().call(false).await;
    assert!(failed.is_err());
    assert_eq!(
        breaker.state(),
        State::Open,
        "the failure was recorded on a permit of the current generation"
    );
    // The stale permit, idle for longer than `abandoned_after`, was given
    // back unused: not counted as an abandoned call.
    let calls = breaker.snapshot().calls.unwrap();
    assert_eq!((calls.dropped, calls.abandoned), (1, 0));
    assert_eq!(calls.failures, 2, "the trip's and the endpoint's");
}

#[tokio::test(start_paused = true)]
async fn eject_times_a_call_from_call_not_from_poll_ready_and_gives_back_an_unused_permit() {
    let clock = ManualClock::new();
    let breaker = Arc::new(
        Breaker::builder()
            .consecutive_failures(1)
            .slow_call_threshold(Duration::from_millis(100))
            .count_calls(true)
            .build_with_clock(clock.clone())
            .unwrap(),
    );
    let ok = tower::service_fn(|_: ()| async { Ok::<(), Infallible>(()) });
    let mut endpoint = EjectLayer::new(breaker.clone()).layer(ok);

    // Ready, then idle in the balancer for a second before the call comes:
    // the call itself is fast, so it is not slow.
    endpoint.ready().await.unwrap();
    clock.advance(Duration::from_secs(1));
    endpoint.call(()).await.unwrap();
    let calls = breaker.snapshot().calls.unwrap();
    assert_eq!((calls.successes, calls.slow), (1, 0));

    // Ready, then the endpoint is dropped (discovery removed it) long after:
    // the unused permit is given back neutrally, not counted as abandoned.
    endpoint.ready().await.unwrap();
    clock.advance(Duration::from_secs(60));
    drop(endpoint);
    let calls = breaker.snapshot().calls.unwrap();
    assert_eq!((calls.dropped, calls.abandoned, calls.failures), (1, 0, 0));
    assert_eq!(breaker.state(), State::Closed);
}

/// Trips `svc`'s breaker for `uri` with three 503s, then returns the rejection
/// of the next call.
async fn rejection_after_three_503s<S>(svc: &mut S, uri: &str) -> Rejected
where
    S: Service<http::Request<()>, Response = http::Response<()>, Error = BoxError>,
{
    for _ in 0..3 {
        let resp = svc.ready().await.unwrap().call(request(uri)).await.unwrap();
        assert_eq!(resp.status(), 503);
    }
    let err = svc
        .ready()
        .await
        .unwrap()
        .call(request(uri))
        .await
        .unwrap_err();
    err.downcast_ref::<Rejected>().expect("a Rejected").clone()
}

fn three_failures() -> Breaker {
    Breaker::builder()
        .consecutive_failures(3)
        .open_duration(Duration::from_secs(30))
        .build()
        .unwrap()
}

#[tokio::test]
async fn rejections_name_the_layers_upstream_when_it_has_one() {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut named = FailFastLayer::new(Arc::new(three_failures()))
        .classify(HttpClassifier::new())
        .upstream("payments")
        .layer(counting_service(calls.clone(), 503));
    let rejected = rejection_after_three_503s(&mut named, "/").await;
    assert_eq!(rejected.upstream().unwrap().to_string(), "payments");
    assert!(
        rejected
            .to_string()
            .starts_with("payments: circuit open; retry after "),
        "{rejected}"
    );

    let mut unnamed = FailFastLayer::new(Arc::new(three_failures()))
        .classify(HttpClassifier::new())
        .layer(counting_service(calls.clone(), 503));
    let rejected = rejection_after_three_503s(&mut unnamed, "/").await;
    assert!(rejected.upstream().is_none());
    assert!(
        rejected.to_string().starts_with("circuit open"),
        "{rejected}"
    );
}

#[tokio::test]
async fn a_keyed_layer_asked_to_names_each_rejection_by_its_key() {
    let registry = Arc::new(
        Registry::<failfast::registry::HostKey>::builder(
            Breaker::builder()
                .consecutive_failures(3)
                .open_duration(Duration::from_secs(30)),
        )
        .build()
        .unwrap(),
    );
    let calls = Arc::new(AtomicUsize::new(0));
    let mut svc = KeyedLayer::new(registry.clone())
        .classify(HttpClassifier::new())
        .name_rejections()
        .layer(counting_service(calls.clone(), 503));
    let a = rejection_after_three_503s(&mut svc, "http://A.example:8080/x").await;
    let b = rejection_after_three_503s(&mut svc, "http://b.example/").await;
    assert_eq!(a.upstream().unwrap().to_string(), "a.example:8080");
    assert_eq!(b.upstream().unwrap().to_string(), "b.example:80");
    assert!(
        a.to_string().starts_with("a.example:8080: circuit open"),
        "{a}"
    );
    assert_ne!(a, b, "equal waits, different upstreams");

    // Without `name_rejections`, the same layer leaves its rejections unnamed.
    let mut plain = KeyedLayer::new(registry)
        .classify(HttpClassifier::new())
        .layer(counting_service(calls, 503));
    let err = plain
        .ready()
        .await
        .unwrap()
        .call(request("http://a.example:8080/"))
        .await
        .unwrap_err();
    assert!(err.downcast_ref::<Rejected>().unwrap().upstream().is_none());
}
