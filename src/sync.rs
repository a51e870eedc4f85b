//! The loom shim: the only place in the crate that names atomics or locks, and
//! the source of every `Arc` the crate shares inside its own structures.
//!
//! `std::sync::Arc` is named directly in two kinds of places. Where the `Arc`
//! is the caller's and must be std's: `Breaker::try_acquire_owned[_at]`
//! (`self: &Arc<Self>`; loom's `Arc` cannot be a method receiver),
//! `OwnedPermit`'s default owner, `Clock for Arc<C>`, the upstream name a
//! `Rejected` carries, and the `tower` module, whose layers take the caller's
//! `Arc<Breaker>` or `Arc<Registry>` and which loom never builds. And where it
//! holds a trait object, which loom's `Arc` cannot (it has no unsized
//! coercion): the observer (`Arc<dyn Observer>`) and the registry's trip gate
//! (`Arc<dyn TripGate>`, so the fleet counters behind it too). Neither is
//! written after the breaker is built, so no model needs loom to see them.
//!
//! Under `RUSTFLAGS="--cfg failfast_loom"` every atomic comes from `loom`, so
//! the models in `loom-tests/` explore every interleaving of the real code.
//! The cfg is crate-specific (not a bare `loom`) so that it does not flip
//! other crates that key on `cfg(loom)` (tokio-rs/loom#159).

#[cfg(failfast_loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU8};
#[cfg(failfast_loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
#[cfg(failfast_loom)]
pub(crate) use loom::sync::Arc;
// The registry's per-shard writer lock: under loom too, so a model can check
// one breaker per key and the handshake of a reader with an eviction.
#[cfg(failfast_loom)]
pub(crate) use loom::sync::Mutex;
// The stand-in for the registry's lock-free map under loom (`registry::map`).
#[cfg(failfast_loom)]
pub(crate) use loom::sync::RwLock;

#[cfg(not(failfast_loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU8};
#[cfg(not(failfast_loom))]
pub(crate) use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
#[cfg(not(failfast_loom))]
pub(crate) use std::sync::Arc;
#[cfg(not(failfast_loom))]
pub(crate) use std::sync::Mutex;

// An outlier pool's stripe words (`outlier::sums`): 128 bits, compared and
// swapped whole. std's is unstable; loom has none, so its models run the same
// protocol on a modelled lock, which is linearizable as the real CAS is.
#[cfg(failfast_loom)]
pub(crate) use loom_u128::AtomicU128;
#[cfg(not(failfast_loom))]
pub(crate) use portable_atomic::AtomicU128;

#[cfg(failfast_loom)]
mod loom_u128 {
    use super::Ordering;

    /// The loom stand-in for a 128-bit atomic: a modelled lock around the
    /// value, with the two operations the crate uses.
    pub(crate) struct AtomicU128(loom::sync::Mutex<u128>);

    impl AtomicU128 {
        pub(crate) fn new(v: u128) -> AtomicU128 {
            AtomicU128(loom::sync::Mutex::new(v))
        }

        pub(crate) fn load(&self, _: Ordering) -> u128 {
            *self.0.lock().unwrap()
        }

        pub(crate) fn compare_exchange(
            &self,
            current: u128,
            new: u128,
            _: Ordering,
            _: Ordering,
        ) -> Result<u128, u128> {
            let mut v = self.0.lock().unwrap();
            if *v == current {
                *v = new;
                Ok(current)
            } else {
                Err(*v)
            }
        }
    }
}

// The ramp's per-thread turn counter (see `ramp`): a plain cell, one per
// thread, touched only while a breaker ramps up after a recovery.
#[cfg(not(failfast_loom))]
thread_local! {
    pub(crate) static RAMP_TURN: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
}
#[cfg(failfast_loom)]
loom::thread_local! {
    pub(crate) static RAMP_TURN: core::cell::Cell<u32> = core::cell::Cell::new(0);
}

// Hints from upstreams that were ignored as bad (see `hint`): a process-wide
// statistic. A `static` needs a `const` constructor, which loom's atomics
// lack, so it is std's in every build (no loom model reads it).
pub(crate) static HINTS_IGNORED: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);
