//! The unanswered rule (`Builder::unanswered`): a hung upstream behind
//! clients more impatient than the slow-call threshold is seen — the calls
//! end only in early drops, with no answer — while a healthy upstream whose
//! clients cancel at random is never tripped.
//!
//! Time is a `ManualClock`; the clients are futures of the keyed layer,
//! polled (or dropped) by hand when the clock says so.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use failfast::registry::HostKey;
use failfast::tower::{HttpClassifier, KeyedLayer};
use failfast::{Breaker, Builder, Clock, ManualClock, Nanos, Reason, Registry, State, Transition};
use tower::{Layer, Service};

mod common;
use common::{Log, LogTransitions};

const MS: Duration = Duration::from_millis(1);

/// An explicit rule (five calls in a row given up after 250 ms; the default
/// is twenty: `tests/unanswered_default.rs`); the slow-call threshold is 500 ms.
fn template() -> Builder {
    Breaker::builder()
        .failure_rate(0.5)
        .slow_call_rate(0.5)
        .slow_call_threshold(500 * MS)
        .count_window(20)
        .min_calls(10)
        .unanswered(5, 250 * MS)
        .open_duration(Duration::from_secs(10))
        .count_calls(true)
}

/// The upstream: it answers 200 to a call polled after its latency, and
/// never when it hangs (`latency` = `None`).
#[derive(Clone)]
struct Upstream {
    clock: ManualClock,
    latency: Option<Duration>,
}

impl Service<http::Request<()>> for Upstream {
    type Response = http::Response<()>;
    type Error = std::io::Error;
    type Future = Answer;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _req: http::Request<()>) -> Answer {
        Answer {
            clock: self.clock.clone(),
            ready_at: self.latency.map(|d| self.clock.now() + d),
        }
    }
}

/// Ready once the clock reaches `ready_at`.
struct Answer {
    clock: ManualClock,
    ready_at: Option<Nanos>,
}

impl Future for Answer {
    type Output = Result<http::Response<()>, std::io::Error>;

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.ready_at {
            Some(at) if self.clock.now() >= at => Poll::Ready(Ok(http::Response::new(()))),
            _ => Poll::Pending,
        }
    }
}

fn poll_once<F: Future>(f: &mut Pin<Box<F>>) -> Poll<F::Output> {
    f.as_mut().poll(&mut Context::from_waker(Waker::noop()))
}

/// A deterministic stream of numbers in [0, 1) (splitmix64).
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

type Hosts = Arc<Registry<HostKey, std::collections::hash_map::RandomState, ManualClock>>;
type Client = failfast::tower::Keyed<
    Upstream,
    HostKey,
    failfast::tower::AuthorityKey<HostKey>,
    HttpClassifier,
    std::collections::hash_map::RandomState,
    ManualClock,
>;

/// The keyed layer over an upstream answering after `latency` (or never),
/// its registry on a manual clock, transitions into `log`.
fn keyed(latency: Option<Duration>, log: &Log) -> (ManualClock, Hosts, Client) {
    let clock = ManualClock::new();
    let registry = Arc::new(
        Registry::<HostKey>::builder(template().log_transitions(log))
            .build_with_clock(clock.clone())
            .unwrap(),
    );
    let upstream = Upstream {
        clock: clock.clone(),
        latency,
    };
    let svc = KeyedLayer::new(registry.clone())
        .classify(HttpClassifier::new())
        .layer(upstream);
    (clock, registry, svc)
}

fn request() -> http::Request<()> {
    http::Request::get("http://api.example/").body(()).unwrap()
}

#[test]
fn impatient_clients_of_a_hung_upstream_open_its_breaker() {
    let log = Log::default();
    let (clock, registry, mut svc) = keyed(None, &log);
    // Ten clients a second, each giving up after 300 ms.
    let mut in_flight = Vec::new();
    let mut reached_upstream = 0;
    for tick in 0..40u64 {
        let mut call = Box::pin(svc.call(request()));
        if poll_once(&mut call).is_pending() {
            reached_upstream += 1;
            in_flight.push((tick * 100, call));
        } // else rejected at once: the breaker is open
        clock.advance(100 * MS);
        let now_ms = (tick + 1) * 100;
        in_flight.retain(|(started, _)| now_ms < started + 300); // gave up
    }
    let host = registry.handle_from("api.example:80");
    assert_eq!(host.state(), State::Open);
    let trips: Vec<Transition> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|t| t.reason == Reason::Unresponsive)
        .copied()
        .collect();
    assert_eq!(trips.len(), 1, "{trips:?}");
    assert_eq!(trips[0].unanswered_calls, 5, "the count that caused it");
    // Bounded: the fifth drop tripped it, and the rest were rejected.
    assert!(
        reached_upstream <= 8,
        "{reached_upstream} calls reached the hung upstream"
    );
    let calls = host.snapshot().calls.unwrap();
    // The five that tripped it, and the two still in flight then (their
    // drops are counted, and changed nothing: another generation).
    assert_eq!(calls.unanswered, 7);
    assert_eq!(
        (calls.failures, calls.slow),
        (0, 0),
        "nothing slow, nothing failed"
    );
}

#[test]
fn random_cancels_never_trip_a_healthy_upstream() {
    let log = Log::default();
    let (clock, registry, mut svc) = keyed(Some(50 * MS), &log);
    let mut draws = Draws(7);
    // 10,000 calls, 20 in flight at a time, every 3 ms a new one; 30 % of
    // clients give up at a random moment within 100 ms (half of them before
    // the answer comes).
    struct Client<F> {
        call: F,
        gives_up_at: Option<u64>,
    }
    let mut in_flight: Vec<Client<_>> = Vec::new();
    let mut answered = 0;
    let mut cancelled = 0;
    for tick in 0..10_000u64 {
        let now = tick * 3;
        if in_flight.len() < 20 {
            let call = Box::pin(svc.call(request()));
            let gives_up_at = (draws.next() < 0.3).then(|| now + (draws.next() * 100.0) as u64);
            in_flight.push(Client { call, gives_up_at });
        }
        clock.advance(3 * MS);
        let now = now + 3;
        in_flight.retain_mut(|c| {
            if let Poll::Ready(result) = poll_once(&mut c.call) {
                assert!(result.is_ok(), "never rejected");
                answered += 1;
                return false;
            }
            if c.gives_up_at.is_some_and(|at| now >= at) {
                cancelled += 1;
                return false; // dropped: the client went away
            }
            true
        });
    }
    let host = registry.handle_from("api.example:80");
    assert_eq!(host.state(), State::Closed);
    assert!(log.lock().unwrap().is_empty(), "no transition at all");
    assert!(
        answered > 5_000 && cancelled > 1_000,
        "{answered} answered, {cancelled} cancelled"
    );
    let calls = host.snapshot().calls.unwrap();
    assert_eq!(
        calls.unanswered, 0,
        "every cancel came before the 50 ms answer"
    );
    assert!(calls.dropped > 0);
}

#[test]
fn cancels_that_each_waited_long_trip_only_with_no_answer_between_them() {
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .consecutive_failures(100)
        .unanswered(3, 250 * MS)
        .count_calls(true)
        .build_with_clock(clock.clone())
        .unwrap();
    let give_up_after = |d: Duration| {
        let permit = breaker.try_acquire_at(clock.now()).unwrap();
        clock.advance(d);
        drop(permit);
    };
    // Two unanswered, then an answer: the run ends.
    give_up_after(300 * MS);
    give_up_after(300 * MS);
    assert_eq!(breaker.snapshot().unanswered_calls, 2);
    breaker
        .try_acquire_at(clock.now())
        .unwrap()
        .success_at(clock.now());
    assert_eq!(breaker.snapshot().unanswered_calls, 0, "an answer ends it");
    // Early cancels neither count nor end it.
    give_up_after(300 * MS);
    give_up_after(10 * MS);
    give_up_after(300 * MS);
    assert_eq!(breaker.snapshot().unanswered_calls, 2);
    assert_eq!(breaker.state(), State::Closed);
    // A business error is an answer too; a failure is as well.
    breaker.try_acquire_at(clock.now()).unwrap().ignore();
    assert_eq!(breaker.snapshot().unanswered_calls, 0);
    for _ in 0..3 {
        give_up_after(300 * MS);
    }
    assert_eq!(breaker.state(), State::Open);
    let calls = breaker.snapshot().calls.unwrap();
    assert_eq!((calls.unanswered, calls.dropped), (7, 1));
    assert_eq!(breaker.snapshot().unanswered_calls, 0, "Open keeps no run");
}

#[test]
fn an_unanswered_probe_fails_its_round() {
    let clock = ManualClock::new();
    let log = Log::default();
    let breaker = Breaker::builder()
        .consecutive_failures(1)
        .unanswered(3, 250 * MS)
        .open_duration(Duration::from_secs(10))
        .log_transitions(&log)
        .build_with_clock(clock.clone())
        .unwrap();
    breaker.try_acquire().unwrap().failure();
    clock.advance(Duration::from_secs(10));
    let probe = breaker.try_acquire().unwrap();
    assert!(probe.is_probe());
    clock.advance(300 * MS);
    drop(probe); // the client gave up on the probe; no answer came
    assert_eq!(breaker.state(), State::Open);
    let last = *log.lock().unwrap().last().unwrap();
    assert_eq!(
        (last.from, last.reason),
        (State::HalfOpen, Reason::ProbeAbandoned)
    );
    assert_eq!(last.trips_in_a_row, 2, "one backoff step longer");
    // A probe cancelled sooner frees its slot, as before.
    clock.advance(Duration::from_secs(20));
    let probe = breaker.try_acquire().unwrap();
    clock.advance(100 * MS);
    drop(probe);
    assert_eq!(breaker.state(), State::HalfOpen);
}

#[test]
fn a_success_after_an_unanswered_run_clears_it_and_the_next_is_settled_again() {
    // The run lives in the state word beside the failure run: the first
    // success after it is news (and clears it), the next is the plain path.
    let clock = ManualClock::new();
    let breaker = Breaker::builder()
        .failure_rate(0.5)
        .count_window(10)
        .unanswered(5, 250 * MS)
        .build_with_clock(clock.clone())
        .unwrap();
    // Proven first: a success that is not news now takes the one-load path.
    breaker.try_acquire().unwrap().success();
    let permit = breaker.try_acquire().unwrap();
    clock.advance(300 * MS);
    drop(permit);
    assert_eq!(breaker.snapshot().unanswered_calls, 1);
    assert!(!breaker.is_pristine_at(clock.now()), "a run is information");
    breaker.try_acquire().unwrap().success();
    assert_eq!(breaker.snapshot().unanswered_calls, 0);
    breaker.try_acquire().unwrap().success();
    assert_eq!(breaker.snapshot().window.calls, 3);
}
