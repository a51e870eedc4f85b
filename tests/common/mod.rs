//! The fixture many tests share: a breaker whose observer appends every
//! transition to a log the test reads afterwards.
//!
//! ```ignore
//! mod common;
//! use common::{Log, LogTransitions};
//!
//! let events = Log::default();
//! let breaker = Breaker::builder()
//!     .consecutive_failures(1)
//!     .log_transitions(&events)
//!     .build_with_clock(ManualClock::new())?;
//! // ... drive it ...
//! assert_eq!(events.lock().unwrap().len(), 1);
//! ```

use std::sync::{Arc, Mutex};

use failfast::{Builder, Transition};

/// Every transition a breaker's observer saw, in the order it saw them.
pub type Log = Arc<Mutex<Vec<Transition>>>;

/// Adds the logging observer to a breaker [`Builder`].
pub trait LogTransitions {
    /// Sets an observer that appends each transition to `log`.
    fn log_transitions(self, log: &Log) -> Self;
}

impl LogTransitions for Builder {
    fn log_transitions(self, log: &Log) -> Builder {
        let sink = log.clone();
        self.observer(move |t: &Transition| sink.lock().unwrap().push(*t))
    }
}
