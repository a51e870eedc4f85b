//! The unanswered rule on by default (`Builder::unanswered`): a hung
//! upstream behind clients more impatient than the slow-call threshold opens
//! its breaker with no setting, on every path whose admission reads the
//! clock (timed permits, `call_async`, the tower layer, the reqwest
//! middleware); the controls hold (impatient clients of a healthy upstream,
//! a slow upstream that answers, a breaker whose admission reads no clock);
//! the old behaviour is `unanswered_off()`, in code and in config files; and
//! the numbers the docs quote are the simulation's
//! (`examples/unanswered_default`), pinned here.

#[path = "../examples/unanswered_default/sim.rs"]
#[allow(dead_code)]
mod sim;

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use common::{Log, LogTransitions};
use failfast::config::{BreakerConfig, RegistryConfig, UnansweredConfig};
use failfast::registry::HostKey;
use failfast::{Breaker, Builder, Clock, ManualClock, Nanos, Reason, State};

const MS: Duration = Duration::from_millis(1);

/// The issue's breaker: a slow-call threshold of 500 ms (and a slow-call
/// rate to trip on), nothing about the unanswered rule.
fn issue_template() -> Builder {
    Breaker::builder()
        .failure_rate(0.5)
        .slow_call_rate(0.5)
        .slow_call_threshold(500 * MS)
}

/// Ten calls a second for ten seconds to a hung upstream, each given up by
/// its client after 300 ms: `start` admits one (`None`: rejected) and holds
/// whatever keeps the call alive; the clock moves 100 ms between calls.
/// Returns how many calls reached the upstream.
fn hung_behind_300ms_clients<T>(clock: &ManualClock, mut start: impl FnMut() -> Option<T>) -> u64 {
    let mut in_flight: Vec<(u64, T)> = Vec::new();
    let mut reached = 0;
    for tick in 0..100u64 {
        if let Some(call) = start() {
            reached += 1;
            in_flight.push((tick * 100, call));
        }
        clock.advance(100 * MS);
        let now_ms = (tick + 1) * 100;
        in_flight.retain(|(started, _)| now_ms < started + 300); // gave up: dropped
    }
    reached
}

fn poll_once<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

/// The twentieth unanswered drop trips: 20 calls, and the two admitted
/// while it was still held (at 10 calls/s, 300 ms patience); then one probe
/// per open period of the default schedule, each dropped unanswered (the
/// trip at 2.2 s, probes at 3.2 s, 5.5 s and 8.8 s: open 1, 2, 3 s).
const REACHED_BY_DEFAULT: u64 = 22 + 3;

fn assert_opened_unresponsive(log: &Log, state: State) {
    assert_eq!(state, State::Open);
    let trips: Vec<_> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|t| t.from == State::Closed)
        .copied()
        .collect();
    assert_eq!(trips.len(), 1, "{trips:?}");
    assert_eq!(trips[0].reason, Reason::Unresponsive);
    assert_eq!(trips[0].unanswered_calls, 20);
}

#[test]
fn a_hung_upstream_behind_impatient_clients_opens_by_default_through_timed_permits() {
    let clock = ManualClock::new();
    let log = Log::default();
    let breaker = issue_template()
        .log_transitions(&log)
        .build_with_clock(clock.clone())
        .unwrap();
    let reached = hung_behind_300ms_clients(&clock, || breaker.try_acquire_at(clock.now()).ok());
    assert_eq!(reached, REACHED_BY_DEFAULT);
    assert_opened_unresponsive(&log, breaker.state());
}

#[test]
fn a_hung_upstream_behind_impatient_clients_opens_by_default_through_call_async() {
    let clock = ManualClock::new();
    let log = Log::default();
    let breaker = issue_template()
        .log_transitions(&log)
        .build_with_clock(clock.clone())
        .unwrap();
    let reached = hung_behind_300ms_clients(&clock, || {
        let mut call =
            Box::pin(breaker.call_async(std::future::pending::<Result<(), std::io::Error>>()));
        // Admitted: the call runs (pending); rejected: it is over at once.
        poll_once(call.as_mut()).is_pending().then_some(call)
    });
    assert_eq!(reached, REACHED_BY_DEFAULT);
    assert_opened_unresponsive(&log, breaker.state());
}

#[test]
fn a_hung_upstream_behind_impatient_clients_opens_by_default_through_the_tower_layer() {
    use tower::{Layer, Service};

    let clock = ManualClock::new();
    let log = Log::default();
    let breaker = Arc::new(
        issue_template()
            .log_transitions(&log)
            .build_with_clock(clock.clone())
            .unwrap(),
    );
    let hung = tower::service_fn(|_: ()| std::future::pending::<Result<(), std::io::Error>>());
    let mut svc = failfast::tower::FailFastLayer::new(breaker.clone()).layer(hung);
    let reached = hung_behind_300ms_clients(&clock, || {
        let mut call = Box::pin(svc.call(()));
        poll_once(call.as_mut()).is_pending().then_some(call)
    });
    assert_eq!(reached, REACHED_BY_DEFAULT);
    assert_opened_unresponsive(&log, breaker.state());
}

/// A loopback server that reads each request and never answers, waking
/// `arrived` once a request's head is in.
async fn hung_server() -> (std::net::SocketAddr, Arc<tokio::sync::Notify>) {
    use tokio::io::AsyncReadExt;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let arrived = Arc::new(tokio::sync::Notify::new());
    let notify = arrived.clone();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let notify = notify.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 {
                        return; // the client went away
                    }
                    head.extend_from_slice(&buf[..n]);
                    if head.windows(4).any(|w| w == b"\r\n\r\n") {
                        head.clear();
                        notify.notify_one();
                    }
                }
            });
        }
    });
    (addr, arrived)
}

#[tokio::test]
async fn a_hung_upstream_behind_impatient_clients_opens_by_default_through_reqwest() {
    let clock = ManualClock::new();
    let log = Log::default();
    let registry = Arc::new(
        failfast::Registry::<HostKey>::builder(issue_template().log_transitions(&log))
            .build_with_clock(clock.clone())
            .unwrap(),
    );
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(failfast::reqwest::BreakerMiddleware::new(registry.clone()))
        .build();
    let (addr, arrived) = hung_server().await;
    let url = format!("http://{addr}/");
    let mut reached = 0;
    // One client at a time, each giving up 300 ms after its request arrived.
    for _ in 0..30 {
        let mut call = Box::pin(client.get(&url).send());
        tokio::select! {
            result = &mut call => {
                let err = result.expect_err("the upstream never answers");
                assert!(err.to_string().contains("open"), "rejected: {err}");
                continue;
            }
            () = arrived.notified() => reached += 1,
        }
        clock.advance(300 * MS);
        drop(call);
    }
    assert_eq!(reached, 20, "the twentieth unanswered call trips it");
    let key = format!("127.0.0.1:{}", addr.port());
    assert_opened_unresponsive(&log, registry.handle_from(key.as_str()).state());
}

#[test]
fn the_old_behaviour_is_one_call_away() {
    let clock = ManualClock::new();
    let log = Log::default();
    let breaker = issue_template()
        .unanswered_off()
        .log_transitions(&log)
        .build_with_clock(clock.clone())
        .unwrap();
    let reached = hung_behind_300ms_clients(&clock, || breaker.try_acquire_at(clock.now()).ok());
    assert_eq!(reached, 100, "every call reaches the hung upstream");
    assert_eq!(breaker.state(), State::Closed);
    assert!(log.lock().unwrap().is_empty());
}

/// A manual clock that counts its reads.
#[derive(Clone, Default)]
struct CountingClock {
    time: ManualClock,
    reads: Arc<AtomicU64>,
}

impl Clock for CountingClock {
    fn now(&self) -> Nanos {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.time.now()
    }
}

#[test]
fn a_breaker_whose_admission_reads_no_clock_is_unchanged() {
    // A plain `try_acquire` on a breaker that times nothing: no clock read
    // for the default rule, so a drop has no age and stays neutral.
    let clock = CountingClock::default();
    let breaker = Breaker::builder()
        .consecutive_failures(5)
        .count_calls(true)
        .build_with_clock(clock.clone())
        .unwrap();
    for _ in 0..100 {
        let permit = breaker.try_acquire().unwrap();
        clock.time.advance(300 * MS);
        drop(permit);
    }
    assert_eq!(clock.reads.load(Ordering::Relaxed), 0, "no clock read");
    assert_eq!(breaker.state(), State::Closed);
    let calls = breaker.snapshot().calls.unwrap();
    assert_eq!((calls.dropped, calls.unanswered), (100, 0));
}

#[test]
fn the_default_rule_is_no_trip_condition_and_fits_any_threshold() {
    let err = Breaker::builder().build().unwrap_err();
    assert_eq!(err.field(), "trip condition");
    let fitted = |b: Builder| {
        b.consecutive_failures(5)
            .build_config()
            .unwrap()
            .unanswered()
    };
    assert_eq!(fitted(Builder::new()), Some((20, 250 * MS)));
    assert_eq!(
        fitted(Builder::new().slow_call_threshold(500 * MS)),
        Some((20, 250 * MS))
    );
    assert_eq!(
        fitted(Builder::new().slow_call_threshold(100 * MS)),
        Some((20, 50 * MS))
    );
    assert_eq!(
        fitted(
            Builder::new()
                .abandoned_after(MS)
                .slow_call_threshold(10 * MS)
        ),
        Some((20, 500 * Duration::from_micros(1)))
    );
    // With no threshold, `abandoned_after` is the probe lease.
    assert_eq!(
        fitted(Builder::new().probe_lease(300 * MS)),
        Some((20, 150 * MS))
    );
}

// ===== The controls and the numbers the docs quote (sim.rs) =====

/// The default breaker of the simulation: `consecutive_failures(5)`, the
/// unanswered rule left to its default.
fn default_breaker() -> Builder {
    Breaker::builder().consecutive_failures(5)
}

#[test]
fn impatient_clients_of_a_healthy_upstream_never_trip_it_by_default() {
    // As many calls as the docs say the example ran.
    for scenario in [
        sim::healthy(200_000),
        sim::healthy_fixed(200_000, 100 * MS),
        sim::healthy_fixed(200_000, 300 * MS),
    ] {
        let seen = sim::run(default_breaker(), &scenario, 11);
        assert_eq!(seen.unresponsive, 0, "{scenario:?}: {seen:?}");
        assert!(
            seen.gave_up > 1_000,
            "{scenario:?}: clients gave up: {seen:?}"
        );
        assert_eq!(seen.reached, 200_000, "{scenario:?}: never rejected");
    }
}

#[test]
fn a_slow_upstream_that_answers_is_never_unanswered_by_default() {
    for impatient in [0.3, 0.5, 0.8] {
        let scenario = sim::slow(100_000, impatient);
        let seen = sim::run(default_breaker(), &scenario, 11);
        assert_eq!(seen.unresponsive, 0, "{impatient}: {seen:?}");
        assert!(seen.gave_up > 2_000, "{impatient}: {seen:?}");
    }
    // Ten calls in a row are not enough here: runs of ten unanswered drops
    // come by chance when 80 % of the clients give up.
    let ten = Breaker::builder()
        .consecutive_failures(5)
        .unanswered(10, 250 * MS);
    assert!(sim::run(ten, &sim::slow(100_000, 0.8), 11).unresponsive > 1);
}

#[test]
fn the_default_opens_a_hung_upstream_as_the_docs_say() {
    // (calls a second, the clients' patience) → (calls that reached it,
    // when it opened), as `Builder::unanswered` quotes them.
    for (rate, patience, reached, opened_ms) in [
        (10.0, 300 * MS, 23, 2_300),
        (100.0, 300 * MS, 49, 500),
        (10.0, 1000 * MS, 29, 3_000),
        (100.0, 1000 * MS, 109, 1_200),
    ] {
        let seen = sim::run(default_breaker(), &sim::hung(rate, patience), 7);
        let at = seen.first_trip.expect("opened").as_millis() as i64;
        assert_eq!(seen.reached, reached, "{rate}/s, {patience:?}: {seen:?}");
        assert!(
            (at - opened_ms).abs() < 50,
            "{rate}/s, {patience:?}: {at} ms"
        );
        assert_eq!(seen.unresponsive, 1, "{seen:?}");
    }
    // Without the rule, none of them opens within a minute.
    let off = default_breaker().unanswered_off();
    assert_eq!(
        sim::run(off, &sim::hung(10.0, 300 * MS), 7).first_trip,
        None
    );
}

#[test]
fn the_default_rides_out_a_pause_of_750ms_not_one_second() {
    let pause = |length: Duration, b: Builder| sim::run(b, &sim::stalled(length), 13).unresponsive;
    assert_eq!(pause(750 * MS, default_breaker()), 0);
    assert!(pause(1000 * MS, default_breaker()) > 0);
    // A shorter age catches more impatient clients, and opens on shorter
    // pauses: at 100 ms, a 750 ms pause trips it.
    let short = || default_breaker().unanswered(20, 100 * MS);
    assert_eq!(pause(500 * MS, short()), 0);
    assert!(pause(750 * MS, short()) > 0);
}

// ===== Config files =====

#[test]
fn off_default_and_a_rule_round_trip_through_config_files() {
    // Left out: the default rule; "off": none; a table: that rule.
    let config: BreakerConfig = toml::from_str("consecutive_failures = 5").unwrap();
    assert_eq!(config.unanswered, None);
    let built = config.to_builder().unwrap().build_config().unwrap();
    assert_eq!(built.unanswered(), Some((20, 250 * MS)));

    for builder in [
        default_breaker(),
        default_breaker().unanswered_off(),
        default_breaker().unanswered(7, 100 * MS),
    ] {
        let written = BreakerConfig::from(&builder);
        let text = toml::to_string(&written).unwrap();
        let read: BreakerConfig = toml::from_str(&text).unwrap();
        assert_eq!(read, written, "{text}");
        assert_eq!(
            read.to_builder()
                .unwrap()
                .build_config()
                .unwrap()
                .unanswered(),
            builder.build_config().unwrap().unanswered(),
            "{text}"
        );
    }
    let off = toml::to_string(&BreakerConfig::from(default_breaker().unanswered_off())).unwrap();
    assert!(off.contains("unanswered = \"off\""), "{off}");
    let err = toml::from_str::<BreakerConfig>("unanswered = \"no\"").unwrap_err();
    assert!(err.to_string().contains("\"off\" or a table"), "{err}");
}

#[test]
fn a_host_turns_the_default_or_the_templates_rule_off() {
    let toml = r#"
        [breaker]
        consecutive_failures = 5

        [hosts."quiet.internal:443"]
        unanswered = "off"

        [hosts."strict.internal:443"]
        unanswered = { calls = 3, after = "100ms" }
    "#;
    let config: RegistryConfig = toml::from_str(toml).unwrap();
    let registry = config.to_builder::<HostKey>().unwrap().build().unwrap();
    let rule = |host: &str| registry.handle_from(host).config().unanswered();
    assert_eq!(rule("other.internal:443"), Some((20, 250 * MS)));
    assert_eq!(rule("quiet.internal:443"), None);
    assert_eq!(rule("strict.internal:443"), Some((3, 100 * MS)));
    let host = config.hosts.get("quiet.internal:443").unwrap();
    assert_eq!(host.unanswered, Some(UnansweredConfig::Off));
}
