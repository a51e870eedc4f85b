//! A response stream is judged by its progress, not its age (`AtEnd` mode):
//! once the head has come, a client that drops a body while bytes keep
//! coming is neutral — however long the download, server-streaming RPC or
//! event stream ran — and a body that delivered nothing for
//! `abandoned_after` is judged at the drop as a call abandoned after it hung.
//! HTTP and gRPC, Closed and half-open, on a `ManualClock`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use failfast::tower::{FailFastLayer, GrpcClassifier, HttpClassifier, PermitBody};
use failfast::{Breaker, Builder, ManualClock, Reason, State, Transition};
use http_body::{Body, Frame};
use hyper::body::Bytes;
use tower::{Layer, Service};

mod common;
use common::{Log, LogTransitions};

mod poll;
use poll::block_on;

const MS: Duration = Duration::from_millis(1);

/// A body fed by the test: each `poll_frame` takes the next queued frame,
/// or is pending (the upstream sends nothing for now).
#[derive(Clone, Default)]
struct Feed(Arc<Mutex<VecDeque<Frame<Bytes>>>>);

impl Feed {
    fn send(&self) {
        self.0
            .lock()
            .unwrap()
            .push_back(Frame::data(Bytes::from_static(b"chunk")));
    }
}

impl Body for Feed {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.0.lock().unwrap().pop_front() {
            Some(frame) => Poll::Ready(Some(Ok(frame))),
            None => Poll::Pending,
        }
    }
}

/// Reads every frame sent so far.
fn read_all<B: Body + Unpin>(body: &mut B) -> usize {
    let mut cx = Context::from_waker(Waker::noop());
    let mut n = 0;
    while let Poll::Ready(Some(Ok(_))) = Pin::new(&mut *body).poll_frame(&mut cx) {
        n += 1;
    }
    n
}

/// One breaker (abandoned after 1 s, open 10 s) on a manual clock, and the
/// layer in `AtEnd` mode over a server whose one response streams `feed`.
struct Rig {
    clock: ManualClock,
    breaker: Arc<Breaker<ManualClock>>,
    log: Log,
}

impl Rig {
    fn new(builder: Builder) -> Rig {
        let clock = ManualClock::new();
        let log = Log::default();
        let breaker = Arc::new(
            builder
                .abandoned_after(Duration::from_secs(1))
                .open_duration(Duration::from_secs(10))
                .count_calls(true)
                .log_transitions(&log)
                .build_with_clock(clock.clone())
                .unwrap(),
        );
        Rig {
            clock,
            breaker,
            log,
        }
    }

    /// A response head, at once, with a body streamed from the returned
    /// feed; `grpc` makes it a gRPC response (its status still to come).
    fn call(
        &self,
        grpc: bool,
    ) -> (
        Feed,
        Box<dyn Body<Data = Bytes, Error = Infallible> + Unpin>,
    ) {
        let feed = Feed::default();
        let body = feed.clone();
        let server = tower::service_fn(move |_req: http::Request<()>| {
            let mut response = http::Response::new(body.clone());
            if grpc {
                response.headers_mut().insert(
                    "content-type",
                    http::HeaderValue::from_static("application/grpc"),
                );
            }
            std::future::ready(Ok::<_, Infallible>(response))
        });
        let response = if grpc {
            let mut svc = FailFastLayer::new(self.breaker.clone())
                .classify_at_end(GrpcClassifier::new())
                .layer(server);
            let r: http::Response<PermitBody<Feed, _, ManualClock>> =
                block_on(svc.call(http::Request::new(()))).unwrap();
            r.map(|b| Box::new(b) as Box<dyn Body<Data = Bytes, Error = Infallible> + Unpin>)
        } else {
            let mut svc = FailFastLayer::new(self.breaker.clone())
                .classify_at_end(HttpClassifier::new())
                .layer(server);
            let r: http::Response<PermitBody<Feed, _, ManualClock>> =
                block_on(svc.call(http::Request::new(()))).unwrap();
            r.map(|b| Box::new(b) as Box<dyn Body<Data = Bytes, Error = Infallible> + Unpin>)
        };
        (feed, response.into_body())
    }

    fn trips(&self) -> Vec<Transition> {
        self.log.lock().unwrap().clone()
    }
}

/// A stream that flows for `minutes`, a chunk every 100 ms, read as it
/// comes, then dropped by the client.
fn flows_then_dropped(rig: &Rig, grpc: bool, minutes: u64) {
    let (feed, mut body) = rig.call(grpc);
    for _ in 0..minutes * 600 {
        rig.clock.advance(100 * MS);
        feed.send();
        assert_eq!(read_all(&mut body), 1);
    }
    rig.clock.advance(100 * MS);
    drop(body); // the client cancels the download, 100 ms after a chunk
}

#[test]
fn a_flowing_stream_dropped_after_minutes_is_neutral() {
    for grpc in [false, true] {
        let rig = Rig::new(Breaker::builder().consecutive_failures(1));
        flows_then_dropped(&rig, grpc, 5);
        let calls = rig.breaker.snapshot().calls.unwrap();
        assert_eq!(rig.breaker.state(), State::Closed, "grpc: {grpc}");
        assert_eq!(
            (calls.dropped, calls.abandoned, calls.failures),
            (1, 0, 0),
            "grpc: {grpc}"
        );
        // Five such cancels in a row trip nothing either (the case:
        // consecutive_failures(5) and five long downloads cancelled).
        let rig = Rig::new(Breaker::builder().consecutive_failures(5));
        for _ in 0..5 {
            flows_then_dropped(&rig, grpc, 1);
        }
        assert_eq!(rig.breaker.state(), State::Closed, "grpc: {grpc}");
    }
}

#[test]
fn a_stream_stalled_past_abandoned_after_counts_when_dropped() {
    for grpc in [false, true] {
        let rig = Rig::new(Breaker::builder().consecutive_failures(1));
        let (feed, mut body) = rig.call(grpc);
        for _ in 0..20 {
            rig.clock.advance(100 * MS);
            feed.send();
            read_all(&mut body);
        }
        rig.clock.advance(1500 * MS); // nothing for 1.5 s: the upstream stalled
        drop(body);
        assert_eq!(rig.breaker.state(), State::Open, "grpc: {grpc}");
        let trips = rig.trips();
        assert_eq!(trips.len(), 1);
        assert_eq!(trips[0].reason, Reason::ConsecutiveFailures);
        let calls = rig.breaker.snapshot().calls.unwrap();
        assert_eq!(calls.abandoned, 1, "grpc: {grpc}");
    }
}

#[test]
fn a_stalled_stream_is_a_slow_call_when_the_policy_has_a_slow_call_rate() {
    let rig = Rig::new(
        Breaker::builder()
            .slow_call_rate(0.5)
            .slow_call_threshold(Duration::from_millis(500))
            .count_window(4)
            .min_calls(1),
    );
    let (feed, mut body) = rig.call(false);
    feed.send();
    read_all(&mut body);
    rig.clock.advance(Duration::from_secs(2));
    drop(body);
    let snap = rig.breaker.snapshot();
    assert_eq!(
        (snap.window.slow, snap.window.failures),
        (1, 0),
        "slow, not failed"
    );
    assert_eq!(snap.state, State::Open, "a slow call in a window of one");
    assert_eq!(rig.trips()[0].reason, Reason::SlowCallRate);
}

#[test]
fn a_gap_shorter_than_abandoned_after_between_frames_is_still_progress() {
    // Neither the slow-call threshold (500 ms) nor the age of the call
    // judges a stream: 900 ms gaps, minutes long, then a drop.
    let rig = Rig::new(
        Breaker::builder()
            .slow_call_rate(0.5)
            .slow_call_threshold(Duration::from_millis(500))
            .count_window(4)
            .min_calls(1),
    );
    let (feed, mut body) = rig.call(false);
    for _ in 0..200 {
        rig.clock.advance(900 * MS);
        feed.send();
        read_all(&mut body);
    }
    rig.clock.advance(900 * MS);
    drop(body);
    let snap = rig.breaker.snapshot();
    assert_eq!(snap.state, State::Closed);
    assert_eq!(snap.window.calls, 0, "a neutral drop is not in the window");
    assert_eq!(snap.calls.unwrap().dropped, 1);
}

#[test]
fn a_probes_stream_frees_its_slot_if_flowing_and_fails_its_round_if_stalled() {
    for (stalled, expected) in [(false, State::HalfOpen), (true, State::Open)] {
        let rig = Rig::new(Breaker::builder().consecutive_failures(1));
        rig.breaker.try_acquire().unwrap().failure();
        rig.clock.advance(Duration::from_secs(10));
        let (feed, mut body) = rig.call(true); // the probe
        assert_eq!(rig.breaker.state(), State::HalfOpen);
        feed.send();
        read_all(&mut body);
        rig.clock
            .advance(if stalled { 1200 * MS } else { 300 * MS });
        drop(body);
        assert_eq!(rig.breaker.state(), expected, "stalled: {stalled}");
        let last = *rig.trips().last().unwrap();
        if stalled {
            assert_eq!(last.reason, Reason::ProbeAbandoned);
        } else {
            assert!(
                rig.breaker.try_acquire().unwrap().is_probe(),
                "the slot is free"
            );
        }
    }
}
