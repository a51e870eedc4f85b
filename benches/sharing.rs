//! Sharing trips off and on, for the `sync` criterion group and the
//! `ff_handle*` callgrind rows: the same registry handle, once alone and once
//! with everything trip sharing adds around it.
//!
//! "On" is what a replica that shares its trips runs: the request path hands
//! every verdict's transition to an [`Outbox`] (`if let Some(t) = verdict {
//! outbox.report(key, &t) }`; a CLOSED success returns `None`), and a
//! [`Replica`] over the same registry has applied news of 100 other hosts
//! (open, remotely). The criterion group also runs the replica's task on a
//! thread of its own meanwhile: every 5 ms it drains the outbox, publishes,
//! and applies one more piece of news to another host.

#![allow(dead_code)] // Each bench target uses part of it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use failfast::share::{MemoryStore, News, Outbox, Replica};
use failfast::{Breaker, Handle, QuantaClock, Reason, Registry, State};

/// The measured upstream.
pub const KEY: &str = "api.example.com:443";
const OTHERS: u64 = 100;

/// The handle of [`KEY`], and, with sharing on, the outbox the request path
/// reports into and the replica (or its running task).
pub struct Sharing {
    pub handle: Handle<String>,
    pub outbox: Option<Arc<Outbox>>,
    replica: Option<Replica<String>>,
    task: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

fn other(i: u64) -> String {
    format!("host-{i}.example.com:443")
}

fn news(i: u64, epoch: u64) -> News {
    News::new(
        other(i % OTHERS),
        epoch,
        Duration::from_secs(3600),
        1,
        Reason::FailureRate,
        "elsewhere",
    )
}

impl Sharing {
    /// Sharing off or on; [`KEY`]'s breaker tripped locally if `open` (with
    /// sharing on, its trip goes through the outbox to the store).
    pub fn new(on: bool, open: bool) -> Sharing {
        let registry = Arc::new(
            Registry::<String>::builder(
                Breaker::builder()
                    .consecutive_failures(5)
                    .open_duration(Duration::from_secs(3600)),
            )
            .build()
            .unwrap(),
        );
        for i in 0..1000 {
            drop(registry.get_or_insert(other(i)));
        }
        let handle = registry.handle(KEY);
        let (outbox, replica) = if on {
            let outbox = Arc::new(Outbox::new(1024));
            let mut replica = Replica::builder(registry.clone(), outbox.clone())
                .origin("bench")
                .build()
                .unwrap();
            for i in 0..OTHERS {
                assert!(replica.receive(&news(i, 1)).is_some());
            }
            (Some(outbox), Some(replica))
        } else {
            (None, None)
        };
        let mut sharing = Sharing {
            handle,
            outbox,
            replica,
            task: None,
        };
        if open {
            while sharing.handle.state() == State::Closed {
                let permit = sharing.handle.try_acquire().unwrap();
                sharing.report(permit.failure());
            }
            assert!(sharing.handle.try_acquire().is_err());
            if let Some(replica) = &mut sharing.replica {
                let mut store = MemoryStore::new(QuantaClock::new());
                assert_eq!(replica.publish_to(&mut store).len(), 1);
            }
        }
        sharing
    }

    /// What the request path does with a verdict's transition.
    #[inline(always)]
    pub fn report(&self, transition: Option<failfast::Transition>) {
        if let (Some(t), Some(outbox)) = (transition, &self.outbox) {
            outbox.report(KEY, &t);
        }
    }

    /// Runs the replica's task on a thread until dropped (sharing on only).
    pub fn run_task(&mut self) {
        let Some(mut replica) = self.replica.take() else {
            return;
        };
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut store = MemoryStore::new(QuantaClock::new());
            let mut epoch = 2;
            while !stopped.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(5));
                let _ = replica.publish_to(&mut store);
                replica.receive(&news(epoch, epoch));
                epoch += 1;
            }
        });
        self.task = Some((stop, thread));
    }
}

impl Drop for Sharing {
    fn drop(&mut self) {
        if let Some((stop, thread)) = self.task.take() {
            stop.store(true, Ordering::Relaxed);
            let _ = thread.join();
        }
    }
}
