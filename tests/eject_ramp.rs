//! The balancer layer (`EjectLayer`) and a breaker that ramps up after a
//! recovery (issue 27): a ramp rejection is a wait like any other — the
//! endpoint is `Pending`, never `Err`, and its own timer wakes it one step of
//! the curve later — and it gets permits again as the share admitted rises.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use failfast::tower::EjectLayer;
use failfast::{Breaker, ManualClock, State};
use tower::{Layer, Service, ServiceExt};

#[derive(Default)]
struct Woken(AtomicBool);

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

const OPEN: Duration = Duration::from_millis(150);
/// 12.8 s over the curve's 128 steps: one step is 100 ms.
const WINDOW: Duration = Duration::from_millis(12_800);
const STEP: Duration = Duration::from_millis(100);

// Paused tokio time and a ManualClock, moved together.
#[tokio::test(start_paused = true)]
async fn a_ramp_rejection_is_pending_and_wakes_one_curve_step_later() {
    let clock = ManualClock::new();
    let breaker = Arc::new(
        Breaker::builder()
            .consecutive_failures(1)
            .open_duration(OPEN)
            // From 0 % in a line: early on, almost every call is turned away.
            .ramp_curve(WINDOW, 0.0, 1.0)
            // A fixed id: which turns get in is deterministic.
            .id(7)
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
    clock.advance(OPEN);
    tokio::time::advance(OPEN).await;
    svc.ready().await.unwrap().call(true).await.unwrap();
    assert_eq!(breaker.state(), State::Closed);
    assert!(breaker.snapshot().ramp_fraction.is_some(), "ramping");

    let mut waits = 0;
    loop {
        let woken = Arc::new(Woken::default());
        let waker = Waker::from(woken.clone());
        let mut cx = Context::from_waker(&waker);
        match svc.poll_ready(&mut cx) {
            Poll::Ready(Ok(())) => break,
            Poll::Ready(Err(e)) => panic!("a ramp rejection is a wait, never an error: {e}"),
            Poll::Pending => {}
        }
        waits += 1;
        assert!(waits < 128, "the ramp admits everyone by its end");
        clock.advance(STEP - Duration::from_millis(1));
        tokio::time::advance(STEP - Duration::from_millis(1)).await;
        assert!(!woken.0.load(Ordering::SeqCst), "not before one step");
        clock.advance(Duration::from_millis(1));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(woken.0.load(Ordering::SeqCst), "woken one step later");
    }
    assert!(waits >= 1, "the first poll after the close was turned away");
    assert!(svc.holds_permit());
    svc.call(true).await.unwrap();
    assert_eq!(breaker.state(), State::Closed);
}
