//! Every transition reaches every hook exactly once, whatever caused it
//! (issues 29 and 30): a verdict, a dropped call, a panic, a timeout, an
//! admission that starts a probe round, news from another replica,
//! `force_open` and `reset`, and an outlier ejection by the host's pool
//! (issue 28). The hooks are a registry's own
//! (`Registry::on_transition`: a recording hook, the tracing event, the
//! per-host metrics counter) and a keyed layer's (`KeyedLayer::on_transition`),
//! which since the single hook point hears the same transitions, not only
//! those of calls through it.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use failfast::export::metrics::{record_transition_per_host, TRANSITIONS_TOTAL};
use failfast::registry::HostKey;
use failfast::tower::{KeyedLayer, TokioClock};
use failfast::{
    Breaker, ManualClock, OutlierRule, Outliers, Reason, Registry, RemoteTrip, Transition,
};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tower::{BoxError, Layer, Service, ServiceExt};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};

/// What one hook heard: (upstream, reason), in order.
type Heard = Arc<Mutex<Vec<(String, Reason)>>>;

fn recording(heard: &Heard) -> impl Fn(&str, &Transition) + Send + Sync + 'static {
    let heard = heard.clone();
    move |up: &str, t: &Transition| heard.lock().unwrap().push((up.to_owned(), t.reason))
}

/// The `circuit.transition` events: (upstream, reason name).
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<(String, String)>>>);

struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: Subscriber> tracing_subscriber::Layer<S> for Events {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields(BTreeMap::new());
        event.record(&mut fields);
        if fields.0.get("message").map(String::as_str) == Some("circuit.transition") {
            self.0
                .lock()
                .unwrap()
                .push((fields.0["upstream"].clone(), fields.0["reason"].clone()));
        }
    }
}

/// What the upstream does with a request, by host.
async fn upstream(req: http::Request<()>) -> Result<(), BoxError> {
    match req.uri().host().unwrap() {
        "fails" => Err("down".into()),
        "hangs" | "hangs.again" => std::future::pending().await,
        "panics" => panic!("deliberate"),
        _ => Ok(()),
    }
}

fn request(host: &str) -> http::Request<()> {
    http::Request::get(format!("http://{host}/"))
        .body(())
        .unwrap()
}

fn quiet_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() != Some(&"deliberate") {
            default(info);
        }
    }));
}

#[tokio::test(start_paused = true)]
async fn every_cause_reaches_every_hook_once() {
    quiet_panics();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _metrics = metrics::set_default_local_recorder(&recorder);
    let events = Events::default();
    let _tracing =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(events.clone()));

    let registry = Arc::new(
        Registry::<HostKey>::builder(
            Breaker::builder()
                .consecutive_failures(1)
                .slow_call_threshold(Duration::from_secs(10))
                .open_duration(Duration::from_secs(5))
                .jitter(0.0),
        )
        .build_with_clock(TokioClock::new())
        .unwrap(),
    );
    let by_registry: Heard = Arc::default();
    registry.on_transition(recording(&by_registry));
    registry.on_transition(failfast::export::tracing::emit);
    registry.on_transition(record_transition_per_host);
    let by_layer: Heard = Arc::default();
    let mut svc = KeyedLayer::new(registry.clone())
        .timeout(Duration::from_secs(1))
        .on_transition(recording(&by_layer))
        .layer(tower::service_fn(upstream));

    // A verdict: the upstream fails.
    assert!(svc
        .ready()
        .await
        .unwrap()
        .call(request("fails"))
        .await
        .is_err());
    // Drops: callers give up on hung calls after 300 ms, twenty in a row
    // (the default unanswered rule: 20 calls, each held 250 ms or more).
    for _ in 0..20 {
        let mut call: Pin<Box<dyn Future<Output = _>>> =
            Box::pin(svc.ready().await.unwrap().call(request("hangs")));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(call.as_mut().poll(&mut cx).is_pending());
        tokio::time::advance(Duration::from_millis(300)).await;
    }
    // A timeout: the layer's own, on another hung host.
    let timed_out = svc
        .ready()
        .await
        .unwrap()
        .call(request("hangs.again"))
        .await;
    assert!(timed_out.is_err());
    // A panic in the upstream, while its response future is polled.
    let mut call = Box::pin(svc.ready().await.unwrap().call(request("panics")));
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let panicked =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call.as_mut().poll(&mut cx)));
    assert!(panicked.is_err());
    drop(call);
    // An admission after the open period: a probe round starts, and its
    // success closes the breaker.
    tokio::time::advance(Duration::from_secs(5)).await;
    let _ = svc.ready().await.unwrap().call(request("fails")).await;
    // News from another replica, and the manual modes.
    let remote = RemoteTrip::new(1, Duration::from_secs(30), Reason::ConsecutiveFailures);
    assert!(registry
        .apply_remote(&HostKey::from("remote:80"), &remote)
        .is_some());
    let manual = registry.handle_from("manual:80");
    assert!(manual.force_open().is_some());
    assert!(manual.reset().is_some());

    let expected: Vec<(String, Reason)> = [
        ("fails:80", Reason::ConsecutiveFailures),
        ("hangs:80", Reason::Unresponsive),
        ("hangs.again:80", Reason::ConsecutiveFailures),
        ("panics:80", Reason::ConsecutiveFailures),
        ("fails:80", Reason::OpenElapsed),
        ("fails:80", Reason::ProbeFailed),
        ("remote:80", Reason::RemoteTrip),
        ("manual:80", Reason::ForceOpen),
        ("manual:80", Reason::Reset),
    ]
    .into_iter()
    .map(|(up, r)| (up.to_owned(), r))
    .collect();
    assert_eq!(
        *by_registry.lock().unwrap(),
        expected,
        "the registry's hook"
    );
    assert_eq!(*by_layer.lock().unwrap(), expected, "the layer's hook");
    let traced: Vec<(String, String)> = expected
        .iter()
        .map(|(up, r)| (up.clone(), r.as_str().to_owned()))
        .collect();
    assert_eq!(*events.0.lock().unwrap(), traced, "the tracing events");
    let mut counted: BTreeMap<(String, String), u64> = BTreeMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        if key.name() != TRANSITIONS_TOTAL {
            continue;
        }
        let label = |n: &str| {
            key.labels()
                .find(|l| l.key() == n)
                .unwrap()
                .value()
                .to_owned()
        };
        let DebugValue::Counter(n) = value else {
            panic!("a counter")
        };
        counted.insert((label("upstream"), label("reason")), n);
    }
    let mut want: BTreeMap<(String, String), u64> = BTreeMap::new();
    for (up, r) in traced {
        *want.entry((up, r)).or_default() += 1;
    }
    assert_eq!(counted, want, "the metrics counter");
}

/// An outlier ejection (issue 28), by the success-rate rule and by the
/// latency rule, reaches every hook once like any other trip: the
/// configuration's observer, the registry's hooks, a keyed layer's hook, the
/// tracing event and the per-host metrics counter, with its own reason
/// (`outlier`, `slow_outlier`). A hook that takes the breaker's snapshot as
/// it hears the ejection reads the rule there.
#[test]
fn outlier_ejections_reach_every_hook_once() {
    const INTERVAL: Duration = Duration::from_secs(10);
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _metrics = metrics::set_default_local_recorder(&recorder);
    let events = Events::default();
    let _tracing =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(events.clone()));

    let observed: Arc<Mutex<Vec<Reason>>> = Arc::default();
    let log = observed.clone();
    let clock = ManualClock::new();
    let registry = Arc::new(
        Registry::<HostKey>::builder(
            Breaker::builder()
                .consecutive_failures(1000) // only the pool ejects here
                .slow_call_threshold(Duration::from_millis(100))
                .open_duration(Duration::from_secs(30))
                .observer(move |t: &Transition| log.lock().unwrap().push(t.reason)),
        )
        .outliers(
            Outliers::envoy()
                .interval(INTERVAL)
                .slow_outliers(3.0, 0.1)
                .max_ejection_percent(50),
        )
        .build_with_clock(clock.clone())
        .unwrap(),
    );
    let by_registry: Heard = Arc::default();
    registry.on_transition(recording(&by_registry));
    registry.on_transition(failfast::export::tracing::emit);
    registry.on_transition(record_transition_per_host);
    // What a hook reads from the breaker's snapshot as it hears a transition.
    type Rules = Arc<Mutex<Vec<(String, Option<OutlierRule>)>>>;
    let rules: Rules = Arc::default();
    let seen = rules.clone();
    let weak = Arc::downgrade(&registry);
    registry.on_transition(move |up: &str, _: &Transition| {
        if let Some(registry) = weak.upgrade() {
            let rule = registry.handle_from(up).snapshot().outlier_ejection;
            seen.lock().unwrap().push((up.to_owned(), rule));
        }
    });
    let by_layer: Heard = Arc::default();
    let _layer = KeyedLayer::new(registry.clone()).on_transition(recording(&by_layer));

    // Seven hosts. h0 fails every other call; h1 answers in 120 ms (slow,
    // over 100 ms), the others in 60 ms but one call in ten in 120 ms. Two
    // intervals of 100 calls each, then one fast success per host: each
    // rolls its interval and is judged against the pool.
    let hosts: Vec<String> = (0..7).map(|i| format!("h{i}:80")).collect();
    for round in 0..3 {
        for (n, host) in hosts.iter().enumerate() {
            let handle = registry.handle_from(host);
            let calls = if round == 2 { 1 } else { 100 };
            for i in 0..calls {
                let start = failfast::Clock::now(&clock);
                let took = match (n, round) {
                    (_, 2) => 60,
                    (1, _) => 120,
                    _ if i % 10 == 0 => 120,
                    _ => 60,
                };
                let end = start + Duration::from_millis(took);
                let permit = handle.try_acquire_at(start).unwrap();
                let _ = if n == 0 && i % 2 == 0 && round < 2 {
                    permit.failure_at(end)
                } else {
                    permit.success_at(end)
                };
            }
        }
        if round < 2 {
            clock.advance(INTERVAL);
        }
    }

    let expected: Vec<(String, Reason)> = vec![
        ("h0:80".to_owned(), Reason::Outlier),
        ("h1:80".to_owned(), Reason::SlowOutlier),
    ];
    assert_eq!(
        *by_registry.lock().unwrap(),
        expected,
        "the registry's hook"
    );
    assert_eq!(*by_layer.lock().unwrap(), expected, "the layer's hook");
    assert_eq!(
        *observed.lock().unwrap(),
        [Reason::Outlier, Reason::SlowOutlier],
        "the observer"
    );
    assert_eq!(
        *rules.lock().unwrap(),
        [
            ("h0:80".to_owned(), Some(OutlierRule::SuccessRate)),
            ("h1:80".to_owned(), Some(OutlierRule::Slow)),
        ],
        "the snapshot a hook takes names the rule"
    );
    let traced: Vec<(String, String)> = vec![
        ("h0:80".to_owned(), "outlier".to_owned()),
        ("h1:80".to_owned(), "slow_outlier".to_owned()),
    ];
    assert_eq!(*events.0.lock().unwrap(), traced, "the tracing events");
    let mut counted: BTreeMap<(String, String), u64> = BTreeMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        if key.name() != TRANSITIONS_TOTAL {
            continue;
        }
        let label = |n: &str| {
            key.labels()
                .find(|l| l.key() == n)
                .unwrap()
                .value()
                .to_owned()
        };
        let DebugValue::Counter(n) = value else {
            panic!("a counter")
        };
        counted.insert((label("upstream"), label("reason")), n);
    }
    let want: BTreeMap<(String, String), u64> = traced.into_iter().map(|k| (k, 1)).collect();
    assert_eq!(counted, want, "the metrics counter");
    let pool = &registry.outlier_pools()[0];
    assert_eq!(
        (
            pool.enforced(OutlierRule::SuccessRate),
            pool.enforced(OutlierRule::Slow)
        ),
        (1, 1)
    );
}

/// A hook added through one of a registry's breakers hears every breaker of
/// the registry by the name it was given, before and after the registry's
/// own hooks (named by key) arrive: which name a hook hears does not depend
/// on what other code added.
#[test]
fn a_breaker_hook_in_a_registry_keeps_its_name_beside_key_named_hooks() {
    let registry = Registry::<HostKey>::builder(Breaker::builder().consecutive_failures(1))
        .build()
        .unwrap();
    let by_breaker: Heard = Arc::default();
    registry
        .handle_from("a:80")
        .on_transition("payments", recording(&by_breaker));
    registry.handle_from("a:80").force_open();
    let by_registry: Heard = Arc::default();
    registry.on_transition(recording(&by_registry));
    registry.handle_from("b:80").force_open();
    assert_eq!(
        *by_breaker.lock().unwrap(),
        [
            ("payments".to_owned(), Reason::ForceOpen),
            ("payments".to_owned(), Reason::ForceOpen)
        ]
    );
    assert_eq!(
        *by_registry.lock().unwrap(),
        [("b:80".to_owned(), Reason::ForceOpen)]
    );
}
