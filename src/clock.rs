//! Time as a number: [`Nanos`], the [`Clock`] trait and three clocks (four
//! with feature `coarse-clock`).
//!
//! Every time-taking method of the crate has an `_at(now)` twin, so a proxy can
//! read its clock once per event-loop tick and a test can drive time by hand
//! with [`ManualClock`]. No clock here starts a thread: [`QuantaClock`] reads the
//! TSC with `quanta::Clock::raw` and scales the difference to its origin with
//! one multiply and a fixed shift, and never uses `quanta`'s `recent()`, which
//! needs an upkeep thread. `CoarseClock` (feature `coarse-clock`) reads the
//! time the kernel keeps at each scheduler tick, with no counter read at all,
//! for breakers read far more often than their durations need precision.

use core::fmt;
use core::time::Duration;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::sync::{Arc, AtomicU64, Ordering};

/// Nanoseconds since a clock's origin, with saturating arithmetic.
///
/// [`Nanos::NEVER`] is the sentinel for "no such instant".
///
/// ```
/// use failfast::Nanos;
/// use std::time::Duration;
///
/// let t = Nanos::from_secs(2);
/// assert_eq!(t + Duration::from_millis(500), Nanos::from_millis(2_500));
/// assert_eq!(Nanos::ZERO - Duration::from_secs(1), Nanos::ZERO); // saturates
/// assert_eq!(t.saturating_duration_since(Nanos::from_secs(5)), Duration::ZERO);
/// ```
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Nanos(u64);

impl Nanos {
    /// The clock's origin.
    pub const ZERO: Nanos = Nanos(0);
    /// The sentinel for "never": later than every real instant.
    pub const NEVER: Nanos = Nanos(u64::MAX);

    /// `n` nanoseconds after the origin.
    pub const fn from_nanos(n: u64) -> Nanos {
        Nanos(n)
    }

    /// `ms` milliseconds after the origin (saturating).
    pub const fn from_millis(ms: u64) -> Nanos {
        Nanos(ms.saturating_mul(1_000_000))
    }

    /// `s` seconds after the origin (saturating).
    pub const fn from_secs(s: u64) -> Nanos {
        Nanos(s.saturating_mul(1_000_000_000))
    }

    /// The instant `d` after the origin (saturating at [`Nanos::NEVER`]).
    pub const fn from_duration(d: Duration) -> Nanos {
        let n = d.as_nanos();
        if n > u64::MAX as u128 {
            Nanos::NEVER
        } else {
            Nanos(n as u64)
        }
    }

    /// The raw number of nanoseconds.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The time since the origin as a `Duration`.
    pub const fn as_duration(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub const fn saturating_duration_since(self, earlier: Nanos) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, saturating at [`Nanos::NEVER`].
    pub const fn saturating_add(self, d: Duration) -> Nanos {
        Nanos(self.0.saturating_add(Nanos::from_duration(d).0))
    }

    /// `self + n` nanoseconds, saturating at [`Nanos::NEVER`].
    #[inline]
    pub(crate) const fn saturating_add_nanos(self, n: u64) -> Nanos {
        Nanos(self.0.saturating_add(n))
    }
}

impl core::ops::Add<Duration> for Nanos {
    type Output = Nanos;
    fn add(self, d: Duration) -> Nanos {
        self.saturating_add(d)
    }
}

impl core::ops::AddAssign<Duration> for Nanos {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl core::ops::Sub<Duration> for Nanos {
    type Output = Nanos;
    fn sub(self, d: Duration) -> Nanos {
        Nanos(self.0.saturating_sub(Nanos::from_duration(d).0))
    }
}

impl fmt::Debug for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Nanos::NEVER {
            f.write_str("Nanos::NEVER")
        } else {
            write!(f, "Nanos({:?})", self.as_duration())
        }
    }
}

/// A monotonic source of [`Nanos`].
///
/// Implementations must be cheap, must never go backwards, and must not start
/// threads or timers. `now` is called on the request path only where the
/// breaker needs the time (OPEN admission, slow-call measurement, time windows).
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> Nanos;

    /// The least step between two different readings: 1 ns unless the clock
    /// is coarse. A breaker refuses to build with a slow-call threshold or a
    /// time-window bucket shorter than this ([`ConfigError`]), since such a
    /// clock could not tell their durations apart from zero.
    ///
    /// [`ConfigError`]: crate::ConfigError
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }

    /// The wall-clock time now: `SystemTime::now()` unless overridden.
    ///
    /// Only an upstream's hint dated in wall-clock time (`Retry-After:` an
    /// HTTP-date) reads it, to turn the date into a delay
    /// ([`RetryHint::delay`](crate::RetryHint::delay)); the breaker's own
    /// timing never does. [`ManualClock`] overrides it with a wall clock
    /// pinned to its own readings, so a test can fix both.
    ///
    /// ```
    /// use failfast::{Clock, QuantaClock};
    /// use std::time::SystemTime;
    ///
    /// let before = SystemTime::now();
    /// let wall = QuantaClock::new().wall(); // the provided method
    /// let after = SystemTime::now();
    /// assert!(before <= wall && wall <= after, "{wall:?} not between {before:?} and {after:?}");
    /// ```
    fn wall(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// The default clock: `quanta::Clock::raw` (one TSC read) scaled against an origin.
///
/// The scaling is `quanta`'s calibration, read once as a fixed-point factor
/// (40 fractional bits): a read is the raw read, a saturating
/// subtraction, one 64×64→128-bit multiply and a constant shift, where
/// `quanta::Clock::delta_as_nanos` tests its clock kind, the order of its
/// arguments and a variable shift on every call (`benches/README.md`, "Why
/// the rows cost what they do").
///
/// ```
/// use failfast::{Clock, QuantaClock};
/// let clock = QuantaClock::new();
/// let a = clock.now();
/// assert!(clock.now() >= a);
/// ```
#[derive(Clone)]
pub struct QuantaClock {
    clock: quanta::Clock,
    origin: u64,
    /// Nanoseconds per 2^`SCALE_SHIFT` raw ticks (2^`SCALE_SHIFT` itself
    /// when `quanta` falls back to a clock that counts nanoseconds).
    scale: u64,
}

/// Fractional bits of [`QuantaClock`]'s scale: with 40, the scale of a
/// counter between 24 MHz and 5 GHz lies between 2³⁷ and 2⁴⁶, so rounding it
/// loses less than one part in 10¹¹ of `quanta`'s calibration (`clock::tests`
/// check one part in 10⁹); a 64-bit tick count times a 64-bit scale always
/// fits the 128-bit product.
const SCALE_SHIFT: u32 = 40;

impl QuantaClock {
    /// A clock whose origin is now.
    ///
    /// The `quanta` clock under it is made once per process and copied:
    /// `quanta::Clock::new` calibrates once, but asks the CPU whether its TSC
    /// is invariant (`cpuid`) on every call, and in a virtual machine each
    /// `cpuid` traps to the hypervisor — 28–40 µs per standalone breaker built
    /// on the benchmark machine, against 0.25–0.34 µs now (`benches/README.md`,
    /// "Building breakers"; `examples/build_cost.rs`).
    pub fn new() -> QuantaClock {
        static PROCESS: std::sync::OnceLock<quanta::Clock> = std::sync::OnceLock::new();
        let clock = PROCESS.get_or_init(quanta::Clock::new).clone();
        // `quanta`'s own conversion of 2^SCALE_SHIFT ticks: its calibration
        // as a fixed-point factor.
        let scale = clock.delta_as_nanos(0, 1 << SCALE_SHIFT);
        let origin = clock.raw();
        QuantaClock {
            clock,
            origin,
            scale,
        }
    }

    /// `ticks` raw ticks since the origin, in nanoseconds.
    #[inline(always)]
    fn scaled(&self, ticks: u64) -> u64 {
        // Truncation to 64 bits only after 2⁶⁴ ns (584 years) of uptime.
        ((u128::from(ticks) * u128::from(self.scale)) >> SCALE_SHIFT) as u64
    }
}

impl Default for QuantaClock {
    fn default() -> Self {
        QuantaClock::new()
    }
}

impl fmt::Debug for QuantaClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QuantaClock")
            .field("now", &self.now())
            .finish()
    }
}

impl Clock for QuantaClock {
    #[inline(always)]
    fn now(&self) -> Nanos {
        // Saturating: a read on a core whose TSC lags the origin's core by a
        // few ticks is the origin, never a wrapped-around future.
        Nanos(self.scaled(self.clock.raw().saturating_sub(self.origin)))
    }
}

/// A clock on `std::time::Instant`, for a platform whose TSC misbehaves (moka
/// moved back to `Instant` after quanta drift reports, moka#472). No feature
/// selects it: pass it to a `*_with_clock` constructor, and the breaker's
/// clock type follows.
///
/// ```
/// use failfast::{Breaker, Clock, StdClock};
/// let clock = StdClock::new();
/// assert!(clock.now() <= clock.now());
///
/// let breaker: Breaker<StdClock> = Breaker::builder().consecutive_failures(5).build_with_clock(StdClock::new())?;
/// # let _ = breaker;
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct StdClock {
    origin: std::time::Instant,
}

impl StdClock {
    /// A clock whose origin is now.
    pub fn new() -> StdClock {
        StdClock {
            origin: std::time::Instant::now(),
        }
    }
}

impl Default for StdClock {
    fn default() -> Self {
        StdClock::new()
    }
}

impl Clock for StdClock {
    #[inline]
    fn now(&self) -> Nanos {
        Nanos::from_duration(self.origin.elapsed())
    }
}

/// A clock moved by hand, for tests and simulations. Clones share one time.
///
/// ```
/// use failfast::{Clock, ManualClock, Nanos};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let view = clock.clone();
/// clock.advance(Duration::from_secs(120));
/// assert_eq!(view.now(), Nanos::from_secs(120));
/// ```
///
/// # Its wall clock
///
/// Its [`wall`](Clock::wall) time is pinned too, and moves with it: a base
/// plus the clock's reading, so [`advance`](Self::advance) and
/// [`set`](Self::set) move both. At reading zero the wall clock reads
/// [`DEFAULT_WALL_SECS`](Self::DEFAULT_WALL_SECS) after the Unix epoch
/// (2023-11-14 22:13:20 UTC) until [`set_wall`](Self::set_wall) says
/// otherwise; clones share it. A test can so resolve an upstream's
/// `Retry-After` date against a known "now".
///
/// ```
/// use failfast::{Clock, ManualClock};
/// use std::time::{Duration, UNIX_EPOCH};
///
/// let clock = ManualClock::new();
/// assert_eq!(clock.wall(), UNIX_EPOCH + Duration::from_secs(ManualClock::DEFAULT_WALL_SECS));
///
/// // Sun, 06 Nov 1994 08:49:37 GMT
/// let date = UNIX_EPOCH + Duration::from_secs(784_111_777);
/// clock.set_wall(date);
/// assert_eq!(clock.wall(), date);
/// clock.advance(Duration::from_secs(2));
/// assert_eq!(clock.clone().wall(), date + Duration::from_secs(2));
/// ```
#[derive(Clone)]
pub struct ManualClock {
    readings: Arc<Readings>,
}

/// What clones of one [`ManualClock`] share.
struct Readings {
    /// The monotonic reading, in nanoseconds.
    now: AtomicU64,
    /// Nanoseconds since the Unix epoch of the wall time at reading zero,
    /// modulo 2⁶⁴: `wall = base + now` (wrapping, so a base set below the
    /// current reading is exact as long as the wall time itself fits).
    wall_base: AtomicU64,
}

impl ManualClock {
    /// The wall time of a [`ManualClock`] at reading zero, unless
    /// [`set_wall`](Self::set_wall) changes it: 1,700,000,000 s after the
    /// Unix epoch, 2023-11-14 22:13:20 UTC.
    pub const DEFAULT_WALL_SECS: u64 = 1_700_000_000;

    /// A clock standing at [`Nanos::ZERO`].
    pub fn new() -> ManualClock {
        ManualClock::starting_at(Nanos::ZERO)
    }

    /// A clock standing at `at`.
    pub fn starting_at(at: Nanos) -> ManualClock {
        ManualClock {
            readings: Arc::new(Readings {
                now: AtomicU64::new(at.as_nanos()),
                wall_base: AtomicU64::new(ManualClock::DEFAULT_WALL_SECS * 1_000_000_000),
            }),
        }
    }

    /// Moves the clock forward by `by` (saturating).
    pub fn advance(&self, by: Duration) {
        let by = Nanos::from_duration(by).as_nanos();
        // Relaxed: the time is a value, not a guard for other memory.
        let _ = self
            .readings
            .now
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                Some(t.saturating_add(by))
            });
    }

    /// Moves the clock to `to`, never backwards (a monotonic clock cannot).
    pub fn set(&self, to: Nanos) {
        // Relaxed: as in `advance`; fetch_max keeps the clock monotonic.
        self.readings
            .now
            .fetch_max(to.as_nanos(), Ordering::Relaxed);
    }

    /// Sets the wall clock to read `wall` now; from here it moves with the
    /// clock. Unlike the monotonic reading it may go backwards (a wall
    /// clock can). Not atomic with a concurrent [`advance`](Self::advance):
    /// set it before the clock is shared, or between steps. A time before
    /// the Unix epoch is set as the epoch.
    ///
    /// ```
    /// use failfast::{Clock, ManualClock, Nanos};
    /// use std::time::{Duration, UNIX_EPOCH};
    ///
    /// let clock = ManualClock::starting_at(Nanos::from_secs(100));
    /// let noon = UNIX_EPOCH + Duration::from_secs(1_750_000_000);
    /// clock.set_wall(noon);
    /// assert_eq!(clock.wall(), noon); // now, whatever the reading
    /// clock.advance(Duration::from_millis(1_500));
    /// assert_eq!(clock.wall(), noon + Duration::from_millis(1_500));
    /// ```
    pub fn set_wall(&self, wall: SystemTime) {
        let since_epoch = wall.duration_since(UNIX_EPOCH).unwrap_or_default();
        let wall = Nanos::from_duration(since_epoch).as_nanos();
        // Relaxed: as in `advance`.
        let now = self.readings.now.load(Ordering::Relaxed);
        self.readings
            .wall_base
            .store(wall.wrapping_sub(now), Ordering::Relaxed);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new()
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock")
            .field("now", &self.now())
            .finish()
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now(&self) -> Nanos {
        // Relaxed: see `advance`.
        Nanos(self.readings.now.load(Ordering::Relaxed))
    }

    /// The pinned wall clock: its base plus the reading (see "Its wall
    /// clock" above).
    fn wall(&self) -> SystemTime {
        // Relaxed: see `advance`.
        let base = self.readings.wall_base.load(Ordering::Relaxed);
        let nanos = base.wrapping_add(self.now().as_nanos());
        // Within every platform's SystemTime (2⁶⁴ ns is 584 years).
        UNIX_EPOCH
            .checked_add(Duration::from_nanos(nanos))
            .unwrap_or(UNIX_EPOCH)
    }
}

impl<C: Clock> Clock for std::sync::Arc<C> {
    #[inline]
    fn now(&self) -> Nanos {
        (**self).now()
    }

    fn resolution(&self) -> Duration {
        (**self).resolution()
    }

    fn wall(&self) -> SystemTime {
        (**self).wall()
    }
}

/// A clock that reads the kernel's coarse monotonic time
/// (`CLOCK_MONOTONIC_COARSE`, through the vDSO): the time of the last
/// scheduler tick, so it moves in steps of 1–10 ms (see
/// [`resolution`](Clock::resolution)), never goes backwards, and costs no
/// counter read at all.
///
/// For a breaker that is read far more often than its durations need
/// precision, as in a proxy that keeps one per upstream host: each OPEN
/// rejection reads the clock, and on the 2-vCPU virtual machine the
/// benchmarks ran on, this read costs 0.43× a TSC read
/// ([`QuantaClock`]) and a sixth of `Instant::now` (`benches/README.md`, "A
/// coarse clock"). The price is precision: an open period ends up to one
/// step late, a call's duration is known to within one step (a little more
/// when the kernel's tick itself comes late, as on a loaded virtual
/// machine), and a breaker
/// refuses to build with a slow-call threshold or a time-window bucket
/// shorter than one step.
///
/// Linux and Android only have such a clock; elsewhere this reads
/// [`std::time::Instant`] and its resolution is 1 ns. Feature `coarse-clock`.
///
/// ```
/// use failfast::{Breaker, Clock, CoarseClock};
///
/// let clock = CoarseClock::new();
/// assert!(clock.resolution() <= std::time::Duration::from_millis(10));
/// let breaker = Breaker::builder()
///     .consecutive_failures(5)
///     .build_with_clock(clock)?;
/// assert!(breaker.try_acquire().is_ok());
/// # Ok::<(), failfast::ConfigError>(())
/// ```
#[cfg(feature = "coarse-clock")]
#[cfg_attr(docsrs, doc(cfg(feature = "coarse-clock")))]
#[derive(Clone, Debug)]
pub struct CoarseClock {
    /// The coarse reading at construction, in nanoseconds.
    origin: u64,
}

#[cfg(feature = "coarse-clock")]
impl CoarseClock {
    /// A clock whose origin is now.
    pub fn new() -> CoarseClock {
        CoarseClock {
            origin: coarse::read(),
        }
    }
}

#[cfg(feature = "coarse-clock")]
impl Default for CoarseClock {
    fn default() -> Self {
        CoarseClock::new()
    }
}

#[cfg(feature = "coarse-clock")]
impl Clock for CoarseClock {
    #[inline]
    fn now(&self) -> Nanos {
        // Saturating: as a monotonic clock it never reads below the origin.
        Nanos(coarse::read().saturating_sub(self.origin))
    }

    fn resolution(&self) -> Duration {
        coarse::resolution()
    }
}

/// The coarse monotonic clock of the kernel, in nanoseconds.
#[cfg(all(
    feature = "coarse-clock",
    any(target_os = "linux", target_os = "android")
))]
mod coarse {
    use core::time::Duration;

    use rustix::time::{clock_getres, clock_gettime, ClockId, Timespec};

    #[inline]
    pub(super) fn read() -> u64 {
        nanos(clock_gettime(ClockId::MonotonicCoarse))
    }

    pub(super) fn resolution() -> Duration {
        Duration::from_nanos(nanos(clock_getres(ClockId::MonotonicCoarse)).max(1))
    }

    /// A monotonic reading is never negative; 2⁶⁴ ns is 584 years of uptime.
    #[inline]
    fn nanos(t: Timespec) -> u64 {
        let secs = u64::try_from(t.tv_sec).unwrap_or(0);
        let nanos = u64::try_from(t.tv_nsec).unwrap_or(0);
        secs.saturating_mul(1_000_000_000).saturating_add(nanos)
    }
}

/// No coarse clock on this platform: `Instant`, against a process-wide origin.
#[cfg(all(
    feature = "coarse-clock",
    not(any(target_os = "linux", target_os = "android"))
))]
mod coarse {
    use core::time::Duration;
    use std::sync::OnceLock;
    use std::time::Instant;

    pub(super) fn read() -> u64 {
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        let since = ORIGIN.get_or_init(Instant::now).elapsed();
        u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
    }

    pub(super) fn resolution() -> Duration {
        Duration::from_nanos(1)
    }
}

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_fixed_point_scale_agrees_with_quantas_own_conversion() {
        let clock = QuantaClock::new();
        for ticks in [
            1u64,
            999,
            1 << 20,
            3_000_000_007,
            1 << 40,
            86_400 * 5_000_000_000,
        ] {
            let ours = clock.scaled(ticks);
            let theirs = clock.clock.delta_as_nanos(0, ticks);
            // Within 1 ns plus one part in 10⁹ (a day of ticks: ≤ 87 µs).
            let tolerance = 1 + theirs / 1_000_000_000;
            assert!(
                ours.abs_diff(theirs) <= tolerance,
                "{ticks} ticks: {ours} ns against quanta's {theirs} ns"
            );
        }
    }

    #[test]
    fn a_read_behind_the_origin_is_the_origin() {
        let mut clock = QuantaClock::new();
        clock.origin = u64::MAX;
        assert_eq!(clock.now(), Nanos::ZERO);
    }

    #[test]
    fn reads_never_go_backwards() {
        let clock = QuantaClock::new();
        let mut last = clock.now();
        for _ in 0..100_000 {
            let now = clock.now();
            assert!(now >= last, "{now:?} after {last:?}");
            last = now;
        }
    }
}
