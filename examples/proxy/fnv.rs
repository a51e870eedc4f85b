//! The hasher of the proxy's own tables (routes, their counters and
//! in-flight caps, the client's pools): FNV-1a.
//!
//! Each request looks a route up by its path's first segment, and its
//! upstream by `host:port`; the standard library's SipHash costs a few
//! hundred instructions a lookup on such short keys (`Authority` feeds it
//! one lowercased byte at a time), FNV a few dozen. SipHash's defence is
//! against an attacker who *inserts* colliding keys; these tables are
//! filled from the command line at start, and a request only looks up.

use std::hash::{BuildHasherDefault, Hasher};

use super::*;

/// A `HashMap` with [`Fnv`].
pub type FnvMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

/// FNV-1a, 64 bits.
#[derive(Clone, Copy, Debug)]
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
