//! The loom shim: the only place in the crate that names atomics or `Arc`.
//!
//! Under `RUSTFLAGS="--cfg failfast_loom"` every atomic comes from `loom`, so
//! the models in `loom-tests/` explore every interleaving of the real code.
//! The cfg is crate-specific (not a bare `loom`) so that it does not flip
//! other crates that key on `cfg(loom)` (tokio-rs/loom#159).

#[cfg(failfast_loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
#[cfg(failfast_loom)]
pub(crate) use loom::sync::Arc;

#[cfg(not(failfast_loom))]
pub(crate) use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
#[cfg(not(failfast_loom))]
pub(crate) use std::sync::Arc;
