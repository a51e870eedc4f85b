//! One registry entry (key, breaker, last-seen tick) and the [`Handle`] that
//! shares it.
//!
//! An entry is a single allocation: the shard's map holds one `Arc<Entry>`
//! per key and every handle is another reference to the same `Arc`, so the
//! key, the breaker and the idle stamp sit together. The `Arc` has no weak
//! count (`triomphe`); the map adds a node of its own per key
//! (`benches/README.md`, "Registry", states the bytes per host).

use core::borrow::Borrow;
use core::fmt;
use core::ops::Deref;

use super::key::{Key, Stored};
use crate::breaker::Breaker;
use crate::clock::{Clock, Nanos, QuantaClock};
use crate::error::Rejected;
use crate::permit::OwnedPermit;
use crate::sync::{fence, AtomicU32, AtomicU8, Ordering};

/// The entries' reference-counted pointer: `triomphe`'s `Arc` (one counter,
/// no weak count); under loom, loom's `Arc`, so the models see its count.
#[cfg(not(failfast_loom))]
pub(crate) type EntryArc<T> = triomphe::Arc<T>;
/// The entries' reference-counted pointer (loom's, under the loom cfg).
#[cfg(failfast_loom)]
pub(crate) type EntryArc<T> = crate::sync::Arc<T>;

/// log2 of the nanoseconds in one idle tick (2²⁴ ns ≈ 16.8 ms).
///
/// A `u32` of ticks spans about 2.3 years; ages are compared with wrapping
/// subtraction, and the idle TTL is capped well below half that span.
pub(crate) const TICK_SHIFT: u32 = 24;

/// The idle tick of `now`.
#[inline]
pub(crate) fn tick(now: Nanos) -> u32 {
    (now.as_nanos() >> TICK_SHIFT) as u32
}

/// What an entry is to the registry.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A key's own breaker in the map, evicted when it carries no information.
    Tracked,
    /// A key's own breaker inserted with its own configuration
    /// (`insert_with`): in the map until removed, never evicted.
    Pinned,
    /// A breaker shared by many keys, not in the map: a shard's overflow
    /// breaker or the registry's unkeyed one.
    Shared,
}

/// A key's breaker, its key, and when the map last handed it out.
pub(crate) struct Entry<K, C: Clock> {
    pub(crate) breaker: Breaker<C>,
    /// `None` for a shared (overflow or unkeyed) breaker.
    pub(crate) key: Option<K>,
    /// The idle tick of the last lookup through the map or the last handle
    /// dropped. Never written on the request path of a held handle.
    seen: AtomicU32,
    pub(crate) kind: Kind,
    /// Set while the shard's writer decides to evict this entry, and for
    /// good once it did: the two sides of the handshake that keeps a handle
    /// cloned by a lock-free reader from a breaker the map no longer tracks
    /// (see [`Entry::claim`] and the shard's eviction).
    leaving: AtomicU8,
}

/// An entry displays its key (`(shared)` for a shared overflow or unkeyed
/// breaker): what a keyed layer's [`Rejected`](crate::Rejected) names.
impl<K: fmt::Display, C: Clock> fmt::Display for Entry<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(key) => key.fmt(f),
            None => f.write_str("(shared)"),
        }
    }
}

impl<K, C: Clock> Entry<K, C> {
    pub(crate) fn new(breaker: Breaker<C>, key: Option<K>, now: Nanos, kind: Kind) -> Entry<K, C> {
        Entry {
            breaker,
            key,
            seen: AtomicU32::new(tick(now)),
            kind,
            leaving: AtomicU8::new(0),
        }
    }

    /// The reader's side of the eviction handshake: called by a lock-free
    /// reader *after* it cloned this entry's `Arc` (the clone is the
    /// reader's store), whether the clone may be kept. `false` means the
    /// shard's writer is evicting the entry, or did: drop the clone and look
    /// again. With [`Entry::begin_leaving`] it forms a store-buffering pair
    /// (each side writes, fences, then reads the other's write), so at least
    /// one side sees the other: the writer sees the extra reference and
    /// keeps the entry, or the reader sees the mark and lets go. A handle
    /// therefore never holds a breaker its key's lookups no longer find.
    #[inline]
    pub(crate) fn claim(&self) -> bool {
        // SeqCst fence: orders the reference count's increment (the clone)
        // before this load, against the writer's mark-fence-count sequence.
        fence(Ordering::SeqCst);
        // Relaxed: the fences above and in `begin_leaving` give the order.
        self.leaving.load(Ordering::Relaxed) == 0
    }

    /// The writer's side of the handshake (under the shard's writer lock):
    /// marks the entry as leaving, then tells whether `references` (read
    /// after the mark) still says nobody but the map holds it. If not, the
    /// caller keeps the entry and calls [`Entry::stay`].
    pub(crate) fn begin_leaving(&self, references: impl FnOnce() -> usize) -> bool {
        // Relaxed store, then a SeqCst fence: the mark is ordered before the
        // count read below, against a reader's clone-fence-load in `claim`.
        self.leaving.store(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        references() == 1
    }

    /// The writer kept an entry it had marked leaving (a reader held it).
    pub(crate) fn stay(&self) {
        // Relaxed: a reader that saw the mark looks again and finds the
        // entry still in the map; one that misses this store did the same.
        self.leaving.store(0, Ordering::Relaxed);
    }

    /// Stamps the entry as used at `now`: one load, and a store only when the
    /// tick changed, so a hot key writes its cache line at most once a tick.
    #[inline]
    pub(crate) fn touch(&self, now: Nanos) {
        let t = tick(now);
        // Relaxed: an idle stamp publishes nothing; the sweeper re-reads it under
        // the shard's writer lock, and a stale read only delays or hastens the
        // eviction of an unreferenced breaker that carries no information.
        if self.seen.load(Ordering::Relaxed) != t {
            // Relaxed: as above.
            self.seen.store(t, Ordering::Relaxed);
        }
    }

    /// Ticks since the entry was last seen (wrapping).
    #[inline]
    pub(crate) fn idle_ticks(&self, now: Nanos) -> u32 {
        // Relaxed: see `touch`.
        tick(now).wrapping_sub(self.seen.load(Ordering::Relaxed))
    }

    /// In the map (a key's own breaker), as opposed to shared.
    #[inline]
    pub(crate) fn is_tracked(&self) -> bool {
        self.kind != Kind::Shared
    }
}

/// A shared reference to one key's breaker: keep it per upstream, route or
/// pooled connection, and each request touches only the breaker's atomics —
/// never the registry's map.
///
/// A `Handle` derefs to [`Breaker`], so every breaker method is available on
/// it. Cloning it is one reference-count increment; it is `Send + Sync` when
/// the key is. While any handle to a key is alive the registry never evicts
/// that key's breaker, so holders and map lookups always share one state.
///
/// To run a call in a `'static` future, move a clone of the handle into it
/// and take the permit there (the handle keeps the breaker alive).
///
/// When the registry is full and nothing can be evicted, the handle is its
/// shard's *overflow* breaker ([`is_tracked`](Self::is_tracked) is `false`),
/// shared by every new key of that shard until room is made.
///
/// ```
/// use failfast::{Breaker, Registry};
///
/// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(5))
///     .build()?;
/// let upstream = registry.handle("db-1.internal:5432");
/// // Per request: no hashing, no lock, no map.
/// let permit = upstream.try_acquire().expect("closed");
/// permit.success();
/// assert_eq!(upstream.key().unwrap(), "db-1.internal:5432");
/// assert!(upstream.is_tracked());
/// # Ok::<(), failfast::ConfigError>(())
/// ```
pub struct Handle<K: Key + ?Sized, C: Clock = QuantaClock> {
    entry: EntryArc<Entry<Stored<K>, C>>,
}

impl<K: Key + ?Sized, C: Clock> Handle<K, C> {
    pub(crate) fn new(entry: EntryArc<Entry<Stored<K>, C>>) -> Handle<K, C> {
        Handle { entry }
    }

    /// The key this breaker belongs to; `None` for a breaker shared by many
    /// keys (a full registry's overflow breaker, or the unkeyed breaker).
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1)).build()?;
    /// assert_eq!(registry.get_or_insert(7).key(), Some(&7));
    /// assert_eq!(registry.unkeyed().key(), None);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn key(&self) -> Option<&K> {
        self.entry.key.as_ref().map(Borrow::borrow)
    }

    /// The breaker (also reachable through `Deref`).
    ///
    /// ```
    /// # use failfast::{Breaker, Registry, State};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1)).build()?;
    /// assert_eq!(registry.handle(&1).breaker().state(), State::Closed);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn breaker(&self) -> &Breaker<C> {
        &self.entry.breaker
    }

    /// `false` for a breaker shared by many keys: the overflow breaker of a
    /// full registry's shard (counted in
    /// [`Registry::untracked`](crate::Registry::untracked)) or the unkeyed
    /// breaker.
    ///
    /// ```
    /// # use failfast::{Breaker, Handle, Registry};
    /// let registry = Registry::<u64>::builder(Breaker::builder().consecutive_failures(1))
    ///     .capacity(1)
    ///     .shards(1)
    ///     .build()?;
    /// let first = registry.handle(&1);
    /// let second = registry.handle(&2); // full, and key 1 has a live handle
    /// let third = registry.handle(&3);
    /// assert!(first.is_tracked() && !second.is_tracked());
    /// assert!(Handle::ptr_eq(&second, &third)); // one overflow breaker per shard
    /// assert_eq!(registry.untracked(), 2);
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn is_tracked(&self) -> bool {
        self.entry.is_tracked()
    }

    /// Admits a call now with a permit that owns a clone of this handle, so it
    /// can move into a `'static` future (and keeps the breaker from eviction
    /// until the verdict).
    ///
    /// ```
    /// # use failfast::{Breaker, Registry};
    /// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(1)).build()?;
    /// let upstream = registry.handle("api:443");
    /// let permit = upstream.try_acquire_owned().expect("closed");
    /// std::thread::spawn(move || { permit.success(); }).join().unwrap();
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Breaker::try_acquire`].
    pub fn try_acquire_owned(&self) -> Result<OwnedPermit<C, Handle<K, C>>, Rejected> {
        OwnedPermit::acquire(self.clone())
    }

    /// [`try_acquire_owned`](Self::try_acquire_owned) at `now`.
    ///
    /// # Errors
    ///
    /// As [`Breaker::try_acquire`].
    pub fn try_acquire_owned_at(
        &self,
        now: Nanos,
    ) -> Result<OwnedPermit<C, Handle<K, C>>, Rejected> {
        OwnedPermit::acquire_at(self.clone(), now)
    }

    /// Admits a retry now ([`Breaker::try_retry`]) with a permit that owns
    /// a clone of this handle: the breaker's admission and the key's retry
    /// budget, as [`try_acquire_owned`](Self::try_acquire_owned) does for a
    /// first try.
    ///
    /// ```
    /// # use failfast::{Breaker, Registry, RetryBudget};
    /// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(5).retry_budget(RetryBudget::grpc())).build()?;
    /// let upstream = registry.handle("api:443");
    /// upstream.try_acquire_owned().expect("closed").failure();
    /// let retry = upstream.try_retry_owned().expect("9 tokens of 10: room for a retry");
    /// std::thread::spawn(move || { retry.success(); }).join().unwrap();
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Breaker::try_retry_at`].
    pub fn try_retry_owned(&self) -> Result<OwnedPermit<C, Handle<K, C>>, Rejected> {
        OwnedPermit::acquire_retry(self.clone())
    }

    /// [`try_retry_owned`](Self::try_retry_owned) at `now`.
    ///
    /// # Errors
    ///
    /// As [`Breaker::try_retry_at`].
    pub fn try_retry_owned_at(&self, now: Nanos) -> Result<OwnedPermit<C, Handle<K, C>>, Rejected> {
        OwnedPermit::acquire_retry_at(self.clone(), now)
    }

    /// Whether two handles share one breaker.
    ///
    /// ```
    /// # use failfast::{Breaker, Handle, Registry};
    /// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(1)).build()?;
    /// let a = registry.handle("api");
    /// let b = registry.get_or_insert("api".to_string());
    /// assert!(Handle::ptr_eq(&a, &b));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        EntryArc::ptr_eq(&a.entry, &b.entry)
    }
}

impl<K: Key + ?Sized, C: Clock> Deref for Handle<K, C> {
    type Target = Breaker<C>;

    #[inline]
    fn deref(&self) -> &Breaker<C> {
        &self.entry.breaker
    }
}

impl<K: Key + ?Sized, C: Clock> Clone for Handle<K, C> {
    fn clone(&self) -> Self {
        Handle {
            entry: self.entry.clone(),
        }
    }
}

impl<K: Key + ?Sized, C: Clock> Drop for Handle<K, C> {
    /// Releasing a handle counts as a use: the idle clock restarts now, so a
    /// breaker held for an hour is not evicted the moment it is let go.
    fn drop(&mut self) {
        if !self.entry.is_tracked() {
            return;
        }
        if std::thread::panicking() {
            return self.stamp_unwinding();
        }
        self.entry.touch(self.entry.breaker.now());
    }
}

impl<K: Key + ?Sized, C: Clock> Handle<K, C> {
    /// The idle stamp of a handle dropped while its thread unwinds. The clock
    /// is the caller's and may panic: a second panic escaping the drop would
    /// abort the process. The stamp is only a hint for eviction, so a clock
    /// that panics skips it. Out of line: the drop's common path stays small.
    #[cold]
    #[inline(never)]
    fn stamp_unwinding(&self) {
        if let Ok(now) = self.entry.breaker.try_now() {
            self.entry.touch(now);
        }
    }
}

impl<K: Key + fmt::Debug + ?Sized, C: Clock> fmt::Debug for Handle<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("key", &self.key())
            .field("kind", &self.entry.kind)
            .field("breaker", &self.entry.breaker)
            .finish()
    }
}
