//! Polling a future to completion without a runtime: failfast's futures and
//! layers need none, so the tests that drive them use this instead of tokio.
//!
//! ```ignore
//! mod poll;
//! use poll::block_on;
//! ```

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Polls `f` with a no-op waker until it is ready. For futures that never
/// wait on I/O or timers (a future that returns `Pending` forever spins).
pub fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}
