//! Validated configuration values and the pure functions that decide.
//!
//! Nothing here touches an atomic: "should this window trip?", "how long is
//! this open period?", "is this call slow?" take plain values and return plain
//! values, so property tests drive them with no threads (governor's `gcra.rs`
//! split). [`Config`] is built by [`Builder`](crate::Builder).

use core::num::{NonZeroU16, NonZeroU32};
use core::time::Duration;

use crate::clock::Nanos;
use crate::observe::Reason;
use crate::outcome::Verdict;
use crate::ramp::Ramp;
use crate::retry::{RetryBudget, Rules};
use crate::window::{Shape, WindowCounts, WindowKind};

/// What a breaker's hot paths need of its configuration, copied into one
/// 4-byte field of the breaker itself (see [`Config::flags`]): bits, and a
/// count window's size.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Flags {
    bits: u16,
    /// The count window's size when the success path is
    /// [`SuccessPath::Count`] (≤ [`MAX_COUNT_WINDOW`](crate::MAX_COUNT_WINDOW));
    /// 1, unused, otherwise.
    size: NonZeroU16,
}

/// Where a success goes, decided once at build: the verdict dispatches on
/// this one value instead of testing each flag.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum SuccessPath {
    /// No window, no timing, no counters: a success has nothing to record
    /// but the end of a failure run.
    Plain,
    /// A count window of this size and nothing else to do (no timing, no
    /// counters): a settled success is the word's load and the ring's write.
    Count(NonZeroU32),
    /// A time window and nothing else to do: as `Count`, at the verdict's time.
    Time,
    /// Everything else: slow-call timing, call counters ([`Breaker`]'s
    /// general verdict path).
    ///
    /// [`Breaker`]: crate::Breaker
    General,
}

// The count window's size fits the flags' 16 bits.
const _: () = assert!(crate::window::MAX_COUNT_WINDOW <= u16::MAX as u32);

impl Flags {
    /// The success path ([`SuccessPath`]): at most one of these three bits,
    /// none for the general path. Separate bits, so each path is one test
    /// (a two-bit code compiles to a jump table).
    const PATH_PLAIN: u16 = 1;
    const PATH_COUNT: u16 = 1 << 1;
    const PATH_TIME: u16 = 1 << 2;
    /// A slow-call threshold is set: every call is timed.
    const TIMES_CALLS: u16 = 1 << 3;
    /// Recording needs the time: a threshold or a time window.
    const RECORDS_NEED_TIME: u16 = 1 << 4;
    /// Lifetime call counters are kept.
    const COUNTS_CALLS: u16 = 1 << 5;
    /// A window records calls.
    const HAS_WINDOW: u16 = 1 << 6;
    /// Runs of consecutive failures trip the breaker.
    const COUNTS_RUNS: u16 = 1 << 7;
    /// A drop is judged by its age though calls are not timed
    /// (`abandoned_after` set, or the unanswered rule): CLOSED admission
    /// reads the clock.
    const DATES_DROPS: u16 = 1 << 8;
    /// The breaker is in an outlier pool: CLOSED admission reads the clock
    /// and counts the call in the pool's tally; a failure, a slow call and
    /// a call that does not count go to the tally at the verdict.
    const POOLED: u16 = 1 << 9;
    /// A ratio retry budget: CLOSED admission reads the clock and deposits
    /// the first try's share of a retry (`retry::ratio`).
    const RATIO_BUDGET: u16 = 1 << 10;
    /// A token retry budget: every verdict takes the general path, which
    /// moves the bucket (`retry::tokens`).
    const TOKEN_BUDGET: u16 = 1 << 11;
    /// Upstream hints are remembered: a retry checks the hint's slot.
    const REMEMBERS_HINTS: u16 = 1 << 12;

    /// Where a success goes.
    #[inline(always)]
    pub(crate) fn success_path(self) -> SuccessPath {
        // Tested in this order: each test is two instructions on the path
        // of every kind after it. The time window's path, which also reads
        // the clock, goes before the count window's (callgrind `ff_time`
        // 87 -> 85, `ff_count` 45 -> 47).
        if self.bits & Self::PATH_PLAIN != 0 {
            SuccessPath::Plain
        } else if self.bits & Self::PATH_TIME != 0 {
            SuccessPath::Time
        } else if self.bits & Self::PATH_COUNT != 0 {
            SuccessPath::Count(NonZeroU32::from(self.size))
        } else {
            SuccessPath::General
        }
    }

    /// CLOSED admission is the word's load alone: no clock read for a
    /// timed call or a dated drop, no counter to bump.
    #[inline(always)]
    pub(crate) const fn admits_bare(self) -> bool {
        self.bits
            & (Self::TIMES_CALLS
                | Self::DATES_DROPS
                | Self::COUNTS_CALLS
                | Self::POOLED
                | Self::RATIO_BUDGET)
            == 0
    }

    /// CLOSED admission reads the clock: the call is timed, or its drop
    /// is judged by its age.
    #[inline(always)]
    pub(crate) const fn dates_admission(self) -> bool {
        self.bits & (Self::TIMES_CALLS | Self::DATES_DROPS | Self::POOLED | Self::RATIO_BUDGET) != 0
    }

    #[inline(always)]
    pub(crate) const fn times_calls(self) -> bool {
        self.bits & Self::TIMES_CALLS != 0
    }

    #[inline(always)]
    pub(crate) const fn records_need_time(self) -> bool {
        self.bits & Self::RECORDS_NEED_TIME != 0
    }

    #[inline(always)]
    pub(crate) const fn counts_calls(self) -> bool {
        self.bits & Self::COUNTS_CALLS != 0
    }

    #[inline(always)]
    pub(crate) const fn has_window(self) -> bool {
        self.bits & Self::HAS_WINDOW != 0
    }

    #[inline(always)]
    pub(crate) const fn counts_runs(self) -> bool {
        self.bits & Self::COUNTS_RUNS != 0
    }

    /// Call counters, an outlier pool or a ratio retry budget: one test on
    /// the admission, where a breaker with none of them had the counters'
    /// test before.
    #[inline(always)]
    pub(crate) const fn counts_admissions(self) -> bool {
        self.bits & (Self::COUNTS_CALLS | Self::POOLED | Self::RATIO_BUDGET) != 0
    }

    /// Call counters, an outlier pool or a token retry budget: one test on
    /// the general verdict path, where a breaker with none of them had the
    /// counters' test before.
    #[inline(always)]
    pub(crate) const fn counts_verdicts(self) -> bool {
        self.bits & (Self::COUNTS_CALLS | Self::POOLED | Self::TOKEN_BUDGET) != 0
    }

    /// Call counters or a ratio retry budget: one test on the admission's
    /// counted path, where a breaker with neither had the counters' test.
    #[inline(always)]
    pub(crate) const fn counts_or_deposits(self) -> bool {
        self.bits & (Self::COUNTS_CALLS | Self::RATIO_BUDGET) != 0
    }

    /// Call counters or a token retry budget: one test on the general
    /// verdict path, where a breaker with neither had the counters' test.
    #[inline(always)]
    pub(crate) const fn counts_or_tokens(self) -> bool {
        self.bits & (Self::COUNTS_CALLS | Self::TOKEN_BUDGET) != 0
    }

    /// Call counters or an outlier pool.
    #[inline(always)]
    pub(crate) const fn counts_or_pools(self) -> bool {
        self.bits & (Self::COUNTS_CALLS | Self::POOLED) != 0
    }

    /// A retry budget of either kind.
    #[inline(always)]
    pub(crate) const fn has_retry_budget(self) -> bool {
        self.bits & (Self::RATIO_BUDGET | Self::TOKEN_BUDGET) != 0
    }

    /// Upstream hints are remembered (a slot of the storage).
    #[inline(always)]
    pub(crate) const fn remembers_hints(self) -> bool {
        self.bits & Self::REMEMBERS_HINTS != 0
    }

    /// A ratio retry budget: admissions deposit.
    #[inline(always)]
    pub(crate) const fn ratio_budget(self) -> bool {
        self.bits & Self::RATIO_BUDGET != 0
    }

    /// A token retry budget: verdicts move the bucket.
    #[inline(always)]
    pub(crate) const fn token_budget(self) -> bool {
        self.bits & Self::TOKEN_BUDGET != 0
    }

    #[inline(always)]
    pub(crate) const fn pooled(self) -> bool {
        self.bits & Self::POOLED != 0
    }

    /// These flags for a breaker in an outlier pool: its success path is
    /// its configuration's (a fast success writes nothing to the tally: the
    /// call was counted at admission).
    pub(crate) const fn in_pool(self) -> Flags {
        Flags {
            bits: self.bits | Self::POOLED,
            size: self.size,
        }
    }
}

/// A rate threshold in (0, 1], kept as parts per million so comparisons are exact.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Rate {
    ppm: u64,
}

impl Rate {
    pub(crate) const PPM: u64 = 1_000_000;

    /// Rounds `rate` (already validated in (0, 1]) to parts per million, at least 1.
    pub(crate) fn new(rate: f64) -> Rate {
        let ppm = (rate * Self::PPM as f64).round() as u64;
        Rate {
            ppm: ppm.clamp(1, Self::PPM),
        }
    }

    pub(crate) fn as_f64(self) -> f64 {
        self.ppm as f64 / Self::PPM as f64
    }

    /// `part / whole >= self`, in integers.
    pub(crate) fn reached(self, part: u32, whole: u32) -> bool {
        whole > 0 && u64::from(part) * Self::PPM >= self.ppm * u64::from(whole)
    }
}

/// The open-duration schedule: base, × multiplier per trip in a row, capped,
/// minus a deterministic jitter.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Backoff {
    pub(crate) base: Duration,
    pub(crate) multiplier: f64,
    pub(crate) cap: Duration,
    pub(crate) jitter: f64,
    /// `jitter` in units of 2⁻³².
    jitter_scaled: u64,
    /// Un-jittered duration in ns for trips 1..=63, and index 0 the same as
    /// 1 (an OPEN word always has a trip; a clamp would cost the rejection
    /// path): the request path does a lookup, never floating point.
    table: [u64; 64],
    /// What the inline rejection may assume of an OPEN period after `trips`
    /// trips: `table` without jitter, and 0 with it — a jittered period is
    /// never decided in line (its start is never `< since + 0`), so the
    /// inline path has no jitter test and no hash.
    inline: [u64; 64],
    /// The cap step: the first step whose period is the schedule's longest
    /// (the cap, or the last the 6-bit step reaches). The step stops
    /// counting there, as Envoy's ejection multiplier does, so health
    /// brings it back to the base in `cap_step` base periods.
    cap_step: u32,
}

impl Backoff {
    /// `base`, `multiplier`, `cap` and `jitter` must already be validated.
    pub(crate) fn new(base: Duration, multiplier: f64, cap: Duration, jitter: f64) -> Backoff {
        let cap_ns = cap.as_nanos().min(u128::from(u64::MAX)) as u64;
        let mut table = [0u64; 64];
        let mut d = base.as_nanos().min(u128::from(u64::MAX)) as f64;
        for slot in table.iter_mut().skip(1) {
            *slot = if d >= cap_ns as f64 { cap_ns } else { d as u64 };
            d *= multiplier;
        }
        table[0] = table[1];
        let jitter_scaled = (jitter * 4_294_967_296.0) as u64;
        let cap_step = (1..=63u32)
            .find(|&k| table[k as usize] == table[63])
            .unwrap_or(63);
        Backoff {
            base,
            multiplier,
            cap,
            jitter,
            jitter_scaled,
            table,
            inline: if jitter_scaled == 0 { table } else { [0; 64] },
            cap_step,
        }
    }

    /// The step after `trips`: one more, up to the cap step (pure). A trip
    /// past the cap opens for the cap and counts no further, so the decay
    /// has no uncounted steps to wear off.
    #[inline]
    pub(crate) fn next_step(&self, trips: u32) -> u32 {
        (trips + 1).min(self.cap_step)
    }

    /// The first step that opens for the schedule's longest period.
    #[cfg(test)]
    pub(crate) fn cap_step(&self) -> u32 {
        self.cap_step
    }

    /// The un-jittered open duration after `trips` trips in a row (1 = first trip).
    pub(crate) fn step(&self, trips: u32) -> Duration {
        Duration::from_nanos(self.step_nanos(trips))
    }

    /// [`step`](Self::step) in nanoseconds; `trips` above 63 counts as 63.
    #[inline(always)]
    pub(crate) fn step_nanos(&self, trips: u32) -> u64 {
        self.table[trips.min(63) as usize]
    }

    /// The open period the inline rejection decides on after `trips` trips
    /// (the word's 6-bit field, so never above 63): exact without jitter, 0
    /// with it, which sends every jittered admission to the exact path.
    #[inline(always)]
    pub(crate) fn inline_open_nanos(&self, trips: u32) -> u64 {
        self.inline[trips as usize & 63]
    }

    /// The open duration after `trips` trips in a row for the breaker `seed` in
    /// generation `generation`: in `(step·(1 − jitter), step]`, a pure function
    /// of its arguments, so replicas and hosts spread without shared state.
    #[cfg(test)]
    pub(crate) fn open_duration(&self, trips: u32, seed: u64, generation: u32) -> Duration {
        Duration::from_nanos(self.open_nanos(trips, seed, generation))
    }

    /// [`open_duration`](Self::open_duration) in nanoseconds: the rejection
    /// path's form (a table lookup, and the jitter hash only when jitter is on).
    #[inline(always)]
    pub(crate) fn open_nanos(&self, trips: u32, seed: u64, generation: u32) -> u64 {
        let step = self.step_nanos(trips);
        if self.jitter_scaled == 0 {
            return step;
        }
        step - self.cut(step, seed, generation)
    }

    /// The jitter's cut of a period of `nanos` for breaker `seed`, drawn by
    /// `salt` (a generation, or a remote trip's epoch): in `[0, nanos·jitter)`.
    #[inline]
    pub(crate) fn cut(&self, nanos: u64, seed: u64, salt: u32) -> u64 {
        if self.jitter_scaled == 0 {
            return 0;
        }
        let u = jitter_unit(seed, salt); // in [0, 2^32)
        ((u128::from(nanos) * u128::from(self.jitter_scaled) * u128::from(u)) >> 64) as u64
    }
}

/// A 32-bit uniform number derived from `(seed, generation)` (splitmix64).
pub(crate) fn jitter_unit(seed: u64, generation: u32) -> u64 {
    let mut z = seed ^ u64::from(generation).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) >> 32
}

/// The unanswered rule ([`Builder::unanswered`](crate::Builder::unanswered)):
/// `calls` in a row (1..=255), each dropped without any answer after at
/// least `after` (shorter than `abandoned_after`), trip the breaker.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Unanswered {
    pub(crate) calls: u32,
    pub(crate) after: Duration,
}

impl Unanswered {
    /// The default rule's count: calls in a row.
    pub(crate) const DEFAULT_CALLS: u32 = 20;
    /// The default rule's age, when the slow-call threshold and
    /// `abandoned_after` leave room for it.
    pub(crate) const DEFAULT_AFTER: Duration = Duration::from_millis(250);

    /// The default rule under a configuration whose drops are already
    /// counted from `limit` on (the shorter of the slow-call threshold and
    /// `abandoned_after`): [`DEFAULT_CALLS`](Self::DEFAULT_CALLS) calls,
    /// each held at least [`DEFAULT_AFTER`](Self::DEFAULT_AFTER) or half of
    /// `limit`, whichever is shorter, so it fits any threshold. `None` when
    /// `limit` leaves no room (under 2 ns).
    pub(crate) fn default_within(limit: Duration) -> Option<Unanswered> {
        let after = Self::DEFAULT_AFTER.min(limit / 2);
        (!after.is_zero()).then_some(Unanswered {
            calls: Self::DEFAULT_CALLS,
            after,
        })
    }
}

/// A validated breaker configuration. Built by [`Builder`](crate::Builder);
/// read through its getters.
///
/// ```
/// use failfast::Breaker;
/// use std::time::Duration;
///
/// let breaker = Breaker::builder()
///     .failure_rate(0.5)
///     .count_window(20)
///     .min_calls(10)
///     .build()
///     .unwrap();
/// let config = breaker.config();
/// assert_eq!(config.failure_rate(), Some(0.5));
/// assert_eq!(config.min_calls(), 10);
/// assert_eq!(config.open_duration(1), Duration::from_secs(1)); // the default base
/// ```
#[derive(Clone, Debug)]
pub struct Config {
    pub(crate) consecutive_failures: Option<u32>,
    pub(crate) failure_rate: Option<Rate>,
    pub(crate) slow_call_rate: Option<Rate>,
    pub(crate) slow_call_threshold: Option<Duration>,
    /// `slow_call_threshold` in nanoseconds, 0 without one: what the
    /// request path compares a call's duration with.
    pub(crate) slow_nanos: u64,
    pub(crate) window: WindowKind,
    /// `window`, as the request path reads it.
    pub(crate) shape: Shape,
    pub(crate) min_calls: u32,
    pub(crate) probes: u32,
    pub(crate) probe_lease: Duration,
    /// A permit dropped without a verdict after at least this long was
    /// abandoned by a caller that gave up on a hung call (see [`Ending`]).
    pub(crate) abandoned_after: Duration,
    /// The unanswered rule, when on: this many calls in a row, each dropped
    /// before any answer after at least this long, trip the breaker.
    pub(crate) unanswered: Option<Unanswered>,
    /// Every admission reads the clock, so that a drop can be judged by its
    /// age even when calls are not timed: `abandoned_after` was set, or the
    /// unanswered rule is on.
    pub(crate) dates_drops: bool,
    pub(crate) backoff: Backoff,
    pub(crate) count_calls: bool,
    /// No window, no slow-call threshold, no call counters: a success has
    /// nothing to record but the end of a failure run (derived at build, so
    /// the verdict tests one flag instead of three fields).
    pub(crate) plain: bool,
    /// Slow start after a recovery, if on.
    pub(crate) ramp: Option<Ramp>,
    /// The half-open rate rule, if on.
    pub(crate) rule: Option<RoundRule>,
    /// The longest open period an upstream's hint may ask for; `None`:
    /// hints are not taken.
    pub(crate) max_hint: Option<Duration>,
    /// The hint of a verdict that does not trip is remembered for the next
    /// trip, in a slot of the breaker's storage (`hints()`, `max_hint(d)`);
    /// else only a tripping verdict's own hint counts, and costs nothing.
    pub(crate) remembers_hints: bool,
    /// The named outlier pool ([`Builder::outlier_pool`](crate::Builder::outlier_pool)).
    pub(crate) outlier_pool: Option<std::sync::Arc<str>>,
    /// The retry budget as set ([`Builder::retry_budget`](crate::Builder::retry_budget)).
    pub(crate) retry_budget: Option<RetryBudget>,
    /// The retry budget, validated: what the request path computes with.
    pub(crate) retry: Option<Rules>,
}

/// The half-open rate rule: a round of P probes closes or reopens on the
/// failure and slow-call rates of its probes (Resilience4j's rule), decided
/// as soon as the outcome is certain.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct RoundRule {
    pub(crate) failure_rate: Rate,
    pub(crate) slow_call_rate: Option<Rate>,
    /// Failed probes that reopen the round: the least `k` with
    /// `k / P ≥ failure_rate` (every round ends with P answers: a dropped
    /// probe frees its slot for another).
    pub(crate) failed_limit: u32,
    /// Slow probes that reopen it (above P when there is no slow rate).
    pub(crate) slow_limit: u32,
}

impl RoundRule {
    pub(crate) fn new(probes: u32, failure_rate: Rate, slow_call_rate: Option<Rate>) -> RoundRule {
        let limit = |rate: Rate| {
            (1..=probes)
                .find(|k| rate.reached(*k, probes))
                .unwrap_or(probes)
        };
        RoundRule {
            failure_rate,
            slow_call_rate,
            failed_limit: limit(failure_rate),
            slow_limit: slow_call_rate.map_or(probes + 1, limit),
        }
    }

    /// How a round of `probes` probes ends once `answered` of them have
    /// answered, `failed` of those failed and `slow` were slow (a slow
    /// failure is in both): `Some(false)` reopens (a limit is reached),
    /// `Some(true)` closes, `None` goes on. Pure.
    ///
    /// The round is decided as soon as its outcome is certain: it closes
    /// once even the worst answers still to come — every one a slow
    /// failure, adding to both counts — could reach neither limit. A round
    /// ends with P answers (a dropped probe frees its slot for another), so
    /// `probes − answered` answers are still to come, those of the probes
    /// out now and of the slots not taken yet.
    pub(crate) fn decide(self, probes: u32, answered: u32, failed: u32, slow: u32) -> Option<bool> {
        if failed >= self.failed_limit || slow >= self.slow_limit {
            return Some(false);
        }
        let to_come = probes.saturating_sub(answered);
        (failed + to_come < self.failed_limit && slow + to_come < self.slow_limit).then_some(true)
    }
}

impl Config {
    /// Trip after this many failures in a row, if set.
    pub fn consecutive_failures(&self) -> Option<u32> {
        self.consecutive_failures
    }

    /// Trip when the window's failure rate reaches this, if set.
    pub fn failure_rate(&self) -> Option<f64> {
        self.failure_rate.map(Rate::as_f64)
    }

    /// Trip when the window's slow-call rate reaches this, if set.
    pub fn slow_call_rate(&self) -> Option<f64> {
        self.slow_call_rate.map(Rate::as_f64)
    }

    /// A call at least this long is slow, if set.
    pub fn slow_call_threshold(&self) -> Option<Duration> {
        self.slow_call_threshold
    }

    /// The window the rates are measured over.
    pub fn window(&self) -> WindowKind {
        self.window
    }

    /// Rates are judged only once the window holds this many calls.
    pub fn min_calls(&self) -> u32 {
        self.min_calls
    }

    /// Probes per half-open round; all must succeed fast to close, unless
    /// the half-open rate rule is on ([`half_open_rates`](Self::half_open_rates)).
    pub fn half_open_probes(&self) -> u32 {
        self.probes
    }

    /// The half-open rate rule, if on: the failure rate and the slow-call
    /// rate among a round's probes that reopen it.
    pub fn half_open_rates(&self) -> Option<(f64, Option<f64>)> {
        self.rule
            .map(|r| (r.failure_rate.as_f64(), r.slow_call_rate.map(Rate::as_f64)))
    }

    /// The ramp (slow start after a recovery), if on: its window, its
    /// floor and its aggression (see [`Builder::ramp`](crate::Builder::ramp)).
    pub fn ramp(&self) -> Option<(Duration, f64, f64)> {
        self.ramp
            .as_ref()
            .map(|r| (r.window, r.min_fraction, r.aggression))
    }

    /// The longest open period an upstream's hint may ask for, or `None`
    /// when hints are not taken ([`Builder::hints_off`](crate::Builder::hints_off)).
    /// 10 minutes by default, when only a tripping verdict's hint is taken
    /// (see [`Builder::max_hint`](crate::Builder::max_hint)).
    pub fn max_hint(&self) -> Option<Duration> {
        self.max_hint
    }

    /// Whether the hints of verdicts that do not trip are remembered for
    /// the next trip ([`Builder::hints`](crate::Builder::hints)); by
    /// default only the tripping verdict's own hint is taken.
    pub fn remembers_hints(&self) -> bool {
        self.remembers_hints
    }

    /// The named outlier pool, if one was set
    /// ([`Builder::outlier_pool`](crate::Builder::outlier_pool)).
    pub fn outlier_pool(&self) -> Option<&str> {
        self.outlier_pool.as_deref()
    }

    /// The open period a trip at backoff step `trips` opens for, given an
    /// upstream's hint (pure): at least the schedule's, and at least the
    /// hint capped at `max_hint` — the hint clamped to [the step,
    /// `max_hint`]. `None` when the schedule's is as long (the trip keeps
    /// its plain, in-line period) or hints are off.
    pub(crate) fn hinted_nanos(&self, hint: Option<Duration>, trips: u32) -> Option<u64> {
        let max = self.max_hint?;
        let hint = hint?.min(max);
        let hint = u64::try_from(hint.as_nanos()).unwrap_or(u64::MAX);
        (hint > self.backoff.step_nanos(trips)).then_some(hint)
    }

    /// The backoff step a trip from Closed starts from (pure): the step kept
    /// at the close, less one for each base open duration of healthy time
    /// since (Envoy's decay of the ejection time).
    pub(crate) fn decayed_trips(&self, trips: u32, healthy_nanos: u64) -> u32 {
        if trips == 0 {
            return 0;
        }
        let base = u64::try_from(self.backoff.base.as_nanos()).unwrap_or(u64::MAX);
        let steps = healthy_nanos / base.max(1);
        trips.saturating_sub(u32::try_from(steps).unwrap_or(u32::MAX))
    }

    /// How long a probe round may stay unresolved before the next request starts a new one.
    pub fn probe_lease(&self) -> Duration {
        self.probe_lease
    }

    /// How long a permit must be held before dropping it without a verdict
    /// counts against the dependency (see [`Builder::abandoned_after`](crate::Builder::abandoned_after)).
    pub fn abandoned_after(&self) -> Duration {
        self.abandoned_after
    }

    /// The unanswered rule, if on (it is by default, fitted to the
    /// slow-call threshold and `abandoned_after`): how many calls in a row,
    /// each dropped without any answer after at least how long, trip the
    /// breaker (see [`Builder::unanswered`](crate::Builder::unanswered)).
    pub fn unanswered(&self) -> Option<(u32, Duration)> {
        self.unanswered.map(|u| (u.calls, u.after))
    }

    /// The un-jittered open duration after `trips` trips in a row (1 = first).
    pub fn open_duration(&self, trips: u32) -> Duration {
        self.backoff.step(trips)
    }

    /// The base open duration.
    pub fn open_duration_base(&self) -> Duration {
        self.backoff.base
    }

    /// The factor applied per trip in a row.
    pub fn backoff_multiplier(&self) -> f64 {
        self.backoff.multiplier
    }

    /// The longest un-jittered open duration.
    pub fn open_duration_cap(&self) -> Duration {
        self.backoff.cap
    }

    /// The jitter fraction: an open period lasts `(d·(1 − jitter), d]`.
    pub fn jitter(&self) -> f64 {
        self.backoff.jitter
    }

    /// The retry budget ([`Builder::retry_budget`](crate::Builder::retry_budget)),
    /// `None` when off (the default).
    ///
    /// ```
    /// use failfast::{Breaker, RetryBudget};
    ///
    /// let breaker = Breaker::builder().consecutive_failures(5).build()?;
    /// assert_eq!(breaker.config().retry_budget(), None);
    /// let breaker = Breaker::builder().consecutive_failures(5).retry_budget(RetryBudget::grpc()).build()?;
    /// assert_eq!(breaker.config().retry_budget(), Some(RetryBudget::tokens(10, 0.1)));
    /// # Ok::<(), failfast::ConfigError>(())
    /// ```
    pub fn retry_budget(&self) -> Option<RetryBudget> {
        self.retry_budget
    }

    /// Whether per-breaker call counters (admitted, rejected, outcomes) are kept.
    pub fn counts_calls(&self) -> bool {
        self.count_calls
    }

    /// Whether calls must be timed (a slow-call threshold is set).
    #[inline]
    pub(crate) fn measures_time(&self) -> bool {
        self.slow_call_threshold.is_some()
    }

    /// Whether recording needs the time (a time window, or slow-call detection).
    #[inline]
    pub(crate) fn records_need_time(&self) -> bool {
        self.measures_time() || matches!(self.window, WindowKind::Time { .. })
    }

    /// When a full probe round's probes are due: they are judged slow (a
    /// failed round) past the slow-call threshold, abandoned past
    /// `abandoned_after`; `None` when neither bound applies.
    pub(crate) fn round_due(&self, since: Nanos) -> Option<Nanos> {
        let due = match self.slow_call_threshold {
            Some(t) => t.min(self.abandoned_after),
            None => self.abandoned_after,
        };
        Some(since.saturating_add(due))
    }

    /// The flags a breaker copies from this configuration, so its hot paths
    /// test one field of its own instead of reading through the shared
    /// pointer.
    pub(crate) fn flags(&self) -> Flags {
        let mut bits = 0;
        let mut size = NonZeroU16::MIN;
        if self.measures_time() {
            bits |= Flags::TIMES_CALLS;
        }
        if self.records_need_time() {
            bits |= Flags::RECORDS_NEED_TIME;
        }
        if self.count_calls {
            bits |= Flags::COUNTS_CALLS;
        }
        if self.window != WindowKind::None {
            bits |= Flags::HAS_WINDOW;
        }
        if self.consecutive_failures.is_some() {
            bits |= Flags::COUNTS_RUNS;
        }
        if self.dates_drops {
            bits |= Flags::DATES_DROPS;
        }
        if self.remembers_hints {
            bits |= Flags::REMEMBERS_HINTS;
        }
        let tokens = matches!(self.retry, Some(Rules::Tokens(_)));
        match self.retry {
            Some(Rules::Ratio(_)) => bits |= Flags::RATIO_BUDGET,
            Some(Rules::Tokens(_)) => bits |= Flags::TOKEN_BUDGET,
            None => {}
        }
        // A success takes a path of its own only when the general one has
        // nothing more to do for it: no slow-call timing, no call counters,
        // no token bucket to refill.
        let window_only = !self.measures_time() && !self.count_calls && !tokens;
        bits |= match self.shape {
            _ if self.plain && !tokens => Flags::PATH_PLAIN,
            Shape::Count { size: n } if window_only => match u16::try_from(n.get()) {
                Ok(n) => {
                    size = NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN);
                    Flags::PATH_COUNT
                }
                Err(_) => 0, // over MAX_COUNT_WINDOW: refused at build
            },
            Shape::Time { .. } if window_only => Flags::PATH_TIME,
            _ => 0, // the general path
        };
        Flags { bits, size }
    }

    /// Pure: is a call from `start` to `end` slow?
    #[inline]
    pub(crate) fn is_slow(&self, start: Nanos, end: Nanos) -> bool {
        // The threshold first: without one, no duration is computed at all.
        self.slow_nanos != 0 && end.as_nanos().saturating_sub(start.as_nanos()) >= self.slow_nanos
    }

    /// Pure: what a permit dropped without a verdict tells about the
    /// dependency, given how long it was held (`None` when its admission did
    /// not read the clock, so its age is unknown) and whether the thread is
    /// panicking. The rules are the table on [`Verdict`].
    pub(crate) fn judge_drop(&self, held: Option<Duration>, panicking: bool) -> Verdict {
        if panicking {
            return Verdict::Panicked;
        }
        let Some(held) = held else {
            return Verdict::Dropped;
        };
        let abandoned = held >= self.abandoned_after;
        let slow = matches!(self.slow_call_threshold, Some(t) if held >= t);
        match (abandoned, slow) {
            (false, false) if matches!(self.unanswered, Some(u) if held >= u.after) => {
                Verdict::Unanswered
            }
            (false, false) => Verdict::Dropped,
            (true, _) => self.abandoned(),
            (false, true) => Verdict::AbandonedSlow,
        }
    }

    /// Pure: what a permit dropped after its response began to arrive tells,
    /// given how long no bytes had come (`idle`, since the head or the last
    /// frame). The stream is judged by its progress, not its age: flowing
    /// when dropped, the client went away and it is neutral; stalled for
    /// `abandoned_after` or more, the upstream stopped sending, and it counts
    /// as a drop after a hung call does. The slow-call threshold and the
    /// unanswered rule do not apply: the head came, and was judged slow or
    /// not when it came.
    pub(crate) fn judge_stream_drop(&self, idle: Duration, panicking: bool) -> Verdict {
        if panicking {
            Verdict::Panicked
        } else if idle >= self.abandoned_after {
            self.abandoned()
        } else {
            Verdict::Dropped
        }
    }

    /// A call abandoned after it hung: slow when the policy has a slow-call
    /// rate, which already counts a hung call against the dependency
    /// (counting it as a failure too would count it twice); else a failure.
    fn abandoned(&self) -> Verdict {
        if self.slow_call_rate.is_some() {
            Verdict::AbandonedSlow
        } else {
            Verdict::AbandonedFailure
        }
    }

    /// Pure: does a run of `unanswered` calls trip the breaker?
    pub(crate) fn unanswered_trips(&self, unanswered: u32) -> bool {
        matches!(self.unanswered, Some(u) if unanswered >= u.calls)
    }

    /// Pure: should a CLOSED breaker with these counts trip, and why?
    ///
    /// Consecutive failures are checked first, then the failure rate, then the
    /// slow-call rate; the rates only once the window holds `min_calls` calls.
    pub(crate) fn trip_reason(&self, consecutive: u32, window: WindowCounts) -> Option<Reason> {
        if matches!(self.consecutive_failures, Some(k) if consecutive >= k) {
            return Some(Reason::ConsecutiveFailures);
        }
        if window.calls < self.min_calls {
            return None;
        }
        if matches!(self.failure_rate, Some(r) if r.reached(window.failures, window.calls)) {
            return Some(Reason::FailureRate);
        }
        if matches!(self.slow_call_rate, Some(r) if r.reached(window.slow, window.calls)) {
            return Some(Reason::SlowCallRate);
        }
        None
    }
}

/// A valid configuration for the unit tests of pure decisions below the
/// builder (`machine`): three consecutive failures trip; open 10 s doubling
/// up to 60 s; `probes` probes, leased for `lease`; an optional slow-call
/// threshold (which `abandoned_after` follows, as the builder's default).
#[cfg(all(test, not(failfast_loom)))]
impl Config {
    pub(crate) fn for_tests(probes: u32, lease: Duration, threshold: Option<Duration>) -> Config {
        Config {
            consecutive_failures: Some(3),
            failure_rate: None,
            slow_call_rate: None,
            slow_call_threshold: threshold,
            slow_nanos: threshold.map_or(0, |t| Nanos::from_duration(t).as_nanos()),
            window: WindowKind::None,
            shape: Shape::None,
            min_calls: 10,
            probes,
            probe_lease: lease,
            abandoned_after: threshold.unwrap_or(lease),
            unanswered: None,
            dates_drops: false,
            backoff: Backoff::new(Duration::from_secs(10), 2.0, Duration::from_secs(60), 0.0),
            count_calls: false,
            plain: threshold.is_none(),
            ramp: None,
            rule: None,
            max_hint: Some(Duration::from_secs(600)),
            remembers_hints: true,
            outlier_pool: None,
            retry_budget: None,
            retry: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The configurations the flag tests walk through.
    #[cfg(not(failfast_loom))]
    mod configs {
        use crate::Builder;
        use core::time::Duration;

        pub(super) const SLOW: Duration = Duration::from_millis(100);

        pub(super) fn consecutive() -> Builder {
            Builder::new().consecutive_failures(3)
        }

        pub(super) fn count() -> Builder {
            Builder::new().failure_rate(0.5).count_window(20)
        }

        pub(super) fn time() -> Builder {
            Builder::new()
                .failure_rate(0.5)
                .time_window(Duration::from_secs(1), 4)
        }
    }

    /// Which success path each configuration takes: a window-only path only
    /// when the general one would have nothing more to do (no slow-call
    /// timing, no call counters).
    #[cfg(not(failfast_loom))]
    #[test]
    fn each_configuration_takes_its_success_path() {
        use crate::Builder;
        use configs::{consecutive, count, time, SLOW as slow};
        let path = |b: Builder| b.build_config().unwrap().flags().success_path();
        let twenty = NonZeroU32::new(20).unwrap();

        assert_eq!(path(consecutive()), SuccessPath::Plain);
        assert_eq!(path(count()), SuccessPath::Count(twenty));
        assert_eq!(
            path(count().consecutive_failures(3)),
            SuccessPath::Count(twenty),
            "a run of failures lives in the word: the window path still applies"
        );
        assert_eq!(
            path(count().count_window(crate::window::MAX_COUNT_WINDOW)),
            SuccessPath::Count(NonZeroU32::new(crate::window::MAX_COUNT_WINDOW).unwrap())
        );
        assert_eq!(path(time()), SuccessPath::Time);
        for (name, b) in [
            ("consecutive, counters", consecutive().count_calls(true)),
            (
                "consecutive, slow calls",
                consecutive().slow_call_threshold(slow),
            ),
            (
                "count window, slow calls",
                count().slow_call_threshold(slow),
            ),
            (
                "count window, slow-call rate",
                count().slow_call_rate(0.5).slow_call_threshold(slow),
            ),
            ("count window, counters", count().count_calls(true)),
            ("time window, slow calls", time().slow_call_threshold(slow)),
            ("time window, counters", time().count_calls(true)),
        ] {
            assert_eq!(path(b), SuccessPath::General, "{name}");
        }
    }

    /// The admission and verdict bits each configuration sets: a bare
    /// admission only with nothing to time or count, a window only with one.
    #[cfg(not(failfast_loom))]
    #[test]
    fn each_configuration_sets_its_hot_path_bits() {
        use crate::Builder;
        use configs::{consecutive, count, time, SLOW as slow};
        let flags = |b: Builder| b.build_config().unwrap().flags();
        // (name, flags, admits bare, has a window)
        for (name, f, bare, window) in [
            ("consecutive", flags(consecutive()), true, false),
            ("count window", flags(count()), true, true),
            ("time window", flags(time()), true, true),
            (
                "consecutive, counters",
                flags(consecutive().count_calls(true)),
                false,
                false,
            ),
            (
                "consecutive, slow calls",
                flags(consecutive().slow_call_threshold(slow)),
                false,
                false,
            ),
            (
                "count window, counters",
                flags(count().count_calls(true)),
                false,
                true,
            ),
            (
                "time window, slow calls",
                flags(time().slow_call_threshold(slow)),
                false,
                true,
            ),
            (
                "consecutive, unanswered rule",
                flags(consecutive().unanswered(3, Duration::from_millis(1))),
                false,
                false,
            ),
            (
                "consecutive, abandoned_after set",
                flags(consecutive().abandoned_after(Duration::from_secs(1))),
                false,
                false,
            ),
        ] {
            assert_eq!(f.admits_bare(), bare, "{name}: admits bare");
            assert_eq!(
                f.dates_admission(),
                !bare && !f.counts_calls(),
                "{name}: dates"
            );
            assert_eq!(f.has_window(), window, "{name}: has a window");
        }
    }

    /// The gates that route an admission and a verdict to the call
    /// counters, a retry budget and an outlier pool: each holds for exactly
    /// the breakers that keep what it guards (with `true`, or a mask broken
    /// to always hold, a breaker would only take a slower path: callgrind
    /// would see it, no behaviour would).
    #[cfg(not(failfast_loom))]
    #[test]
    fn the_counting_gates_hold_for_exactly_what_they_guard() {
        use crate::{Builder, RetryBudget};
        use configs::{consecutive, count, time};
        let flags = |b: Builder| b.build_config().unwrap().flags();
        for base in [consecutive(), count(), time()] {
            for counters in [false, true] {
                for budget in [
                    None,
                    Some(RetryBudget::grpc()),
                    Some(RetryBudget::finagle()),
                ] {
                    for pooled in [false, true] {
                        let mut b = base.clone().count_calls(counters);
                        if let Some(budget) = budget {
                            b = b.retry_budget(budget);
                        }
                        let f = flags(b);
                        let f = if pooled { f.in_pool() } else { f };
                        let tokens = matches!(budget, Some(RetryBudget::Tokens { .. }));
                        let ratio = matches!(budget, Some(RetryBudget::Ratio { .. }));
                        let case =
                            format!("counters {counters}, budget {budget:?}, pooled {pooled}");
                        assert_eq!(f.counts_or_tokens(), counters || tokens, "{case}");
                        assert_eq!(f.counts_or_deposits(), counters || ratio, "{case}");
                        assert_eq!(f.counts_or_pools(), counters || pooled, "{case}");
                        assert_eq!(f.counts_verdicts(), counters || pooled || tokens, "{case}");
                        assert_eq!(f.counts_admissions(), counters || pooled || ratio, "{case}");
                        assert_eq!(f.token_budget(), tokens, "{case}");
                        assert_eq!(f.ratio_budget(), ratio, "{case}");
                        assert_eq!(f.has_retry_budget(), tokens || ratio, "{case}");
                        assert_eq!(f.pooled(), pooled, "{case}");
                        assert_eq!(f.counts_calls(), counters, "{case}");
                    }
                }
            }
        }
    }

    #[test]
    fn rates_compare_exactly_in_integers() {
        let r = Rate::new(0.1);
        assert!(r.reached(3, 30), "0.1 × 30 must not round past 3");
        assert!(!r.reached(2, 30));
        assert!(Rate::new(0.5).reached(5, 10));
        assert!(!Rate::new(0.5).reached(4, 10));
        assert!(!Rate::new(0.5).reached(0, 0));
        assert!(Rate::new(1.0).reached(7, 7));
    }

    #[test]
    fn the_inline_period_is_the_schedule_without_jitter_and_zero_with_it() {
        let plain = Backoff::new(Duration::from_secs(1), 2.0, Duration::from_secs(10), 0.0);
        let jittered = Backoff::new(Duration::from_secs(1), 2.0, Duration::from_secs(10), 0.1);
        for trips in 0..=63 {
            let step = plain.step(trips).as_nanos() as u64;
            assert_eq!(plain.inline_open_nanos(trips), step, "{trips} trips");
            assert_eq!(jittered.inline_open_nanos(trips), 0, "{trips} trips");
        }
    }

    #[test]
    fn backoff_grows_by_the_multiplier_and_stops_at_the_cap() {
        let b = Backoff::new(Duration::from_secs(1), 2.0, Duration::from_secs(10), 0.0);
        let steps: Vec<u64> = (1..=6).map(|t| b.step(t).as_secs()).collect();
        assert_eq!(steps, [1, 2, 4, 8, 10, 10]);
        assert_eq!(b.step(0), b.step(1));
        assert_eq!(b.step(1000), Duration::from_secs(10));
        assert_eq!(
            b.open_duration(3, 42, 7),
            Duration::from_secs(4),
            "no jitter, no cut"
        );
    }

    #[test]
    fn the_step_stops_counting_at_the_first_step_that_opens_for_the_cap() {
        let b = Backoff::new(Duration::from_secs(10), 2.0, Duration::from_secs(80), 0.0);
        assert_eq!(b.cap_step(), 4, "10, 20, 40, 80 s");
        let steps: Vec<u32> = (0..8).map(|t| b.next_step(t)).collect();
        assert_eq!(steps, [1, 2, 3, 4, 4, 4, 4, 4]);
        assert_eq!(b.next_step(63), 4, "a step past the cap comes back to it");
        // A cap off the doubling series: the first step it cuts.
        let b = Backoff::new(Duration::from_secs(1), 2.0, Duration::from_secs(3), 0.0);
        assert_eq!((b.cap_step(), b.step(3).as_secs()), (3, 3));
        // No backoff: the base is the cap.
        let b = Backoff::new(Duration::from_secs(5), 1.0, Duration::from_secs(60), 0.0);
        assert_eq!((b.cap_step(), b.next_step(9)), (1, 1));
        // A schedule still growing at step 63 counts to 63, the word's limit.
        let b = Backoff::new(
            Duration::from_millis(1),
            1.01,
            Duration::from_secs(86_400),
            0.0,
        );
        assert_eq!(b.cap_step(), 63);
    }

    #[test]
    fn jitter_stays_in_range_and_is_deterministic() {
        let b = Backoff::new(Duration::from_secs(10), 1.0, Duration::from_secs(10), 0.5);
        let mut seen = std::collections::HashSet::new();
        for seed in 0..200u64 {
            let d = b.open_duration(1, seed, 1);
            assert!(
                d > Duration::from_secs(5) && d <= Duration::from_secs(10),
                "{d:?}"
            );
            assert_eq!(d, b.open_duration(1, seed, 1));
            seen.insert(d);
        }
        assert!(seen.len() > 190, "jitter must spread seeds: {}", seen.len());
    }
}

/// Property tests of the pure policy: the schedule, the jitter and
/// the integer rate comparison, on their private representations.
#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    fn backoff() -> impl Strategy<Value = Backoff> {
        (
            1u64..=u64::from(u32::MAX),
            prop_oneof![Just(1.0), Just(2.0), 1.0f64..=1000.0],
            0u64..=u64::from(u32::MAX) * 1000,
            prop_oneof![Just(0.0), 0.0f64..1.0],
        )
            .prop_map(|(base, m, extra, jitter)| {
                let base = Duration::from_nanos(base);
                Backoff::new(base, m, base + Duration::from_nanos(extra), jitter)
            })
    }

    proptest! {
        /// The table starts at the base, never decreases, never passes the cap.
        #[test]
        fn the_schedule_is_monotone_and_capped(b in backoff()) {
            prop_assert_eq!(b.step(1), b.base);
            prop_assert_eq!(b.step(0), b.step(1));
            for trips in 2..=70 {
                prop_assert!(b.step(trips) >= b.step(trips - 1), "trips {}", trips);
                prop_assert!(b.step(trips) <= b.cap, "trips {}", trips);
            }
        }

        /// The step counts up to the cap step and no further; the cap step
        /// is the first whose period is the schedule's longest.
        #[test]
        fn the_step_counts_to_the_cap_step_only(b in backoff(), trips in 0u32..=70) {
            let cap = b.cap_step();
            prop_assert!((1..=63).contains(&cap));
            prop_assert_eq!(b.step(cap), b.step(63));
            prop_assert!(cap == 1 || b.step(cap - 1) < b.step(cap));
            prop_assert_eq!(b.next_step(trips), (trips + 1).min(cap));
            prop_assert_eq!(b.step(b.next_step(trips)), b.step(trips + 1).min(b.step(cap)));
        }

        /// The jittered duration is in `(step·(1 − jitter), step]` (exactly the
        /// step without jitter) and a pure function of (trips, seed, generation).
        #[test]
        fn jitter_is_bounded_and_deterministic(
            b in backoff(),
            trips in 0u32..=70,
            seed in any::<u64>(),
            generation in any::<u32>(),
        ) {
            let step = b.step(trips);
            let d = b.open_duration(trips, seed, generation);
            prop_assert_eq!(d, b.open_duration(trips, seed, generation));
            prop_assert!(d <= step);
            if b.jitter == 0.0 {
                prop_assert_eq!(d, step);
            } else {
                let cut = (step - d).as_nanos() as f64;
                prop_assert!(cut <= step.as_nanos() as f64 * b.jitter, "cut {} of {:?}", cut, step);
                prop_assert!(d > Duration::ZERO || step == Duration::ZERO);
            }
            prop_assert!(jitter_unit(seed, generation) < 1 << 32);
        }

        /// `Rate::reached` is the exact rational comparison part/whole ≥ rate.
        #[test]
        fn rates_compare_exactly(ppm in 1u64..=Rate::PPM, part in any::<u32>(), whole in any::<u32>()) {
            let r = Rate::new(ppm as f64 / Rate::PPM as f64);
            prop_assert_eq!(r.ppm, ppm);
            let exact = whole > 0
                && u128::from(part) * u128::from(Rate::PPM) >= u128::from(ppm) * u128::from(whole);
            prop_assert_eq!(r.reached(part, whole), exact);
        }
    }
}

/// Exact values (mutation testing, `.cargo/mutants.toml`): the jitter hash is
/// splitmix64, and the cut is `step · jitter · u / 2³²`.
#[cfg(test)]
mod mutants_tests {
    use super::*;

    #[test]
    fn jitter_unit_is_splitmix64() {
        // The reference splitmix64 sequence from state 0 (high 32 bits):
        // generation g of seed 0 is its (g + 1)-th output.
        assert_eq!(jitter_unit(0, 0), 0xE220_A839);
        assert_eq!(jitter_unit(0, 1), 0x6E78_9E6A);
        assert_eq!(jitter_unit(0, 2), 0x06C4_5D18);
        // Its lowest bit comes from the final `z ^ (z >> 31)`.
        assert_eq!(jitter_unit(0, 3), 0xF88B_B8A8);
        // The seed is XORed with the generation's multiple.
        assert_eq!(jitter_unit(0x9E37_79B9_7F4A_7C15, 1), 0xE220_A839);
        assert_eq!(jitter_unit(12345, 678), 0x93E8_8323);
        assert_eq!(jitter_unit(u64::MAX, u32::MAX), 0x1034_83A3);
    }

    #[test]
    fn the_jitter_cut_is_exact() {
        let b = Backoff::new(Duration::from_secs(10), 1.0, Duration::from_secs(10), 0.5);
        assert_eq!(
            b.open_duration(1, 0, 0),
            Duration::from_nanos(5_583_445_960)
        );
        let b = Backoff::new(Duration::from_secs(3), 2.0, Duration::from_secs(60), 0.25);
        assert_eq!(
            b.open_duration(1, 0, 1),
            Duration::from_nanos(2_676_354_003)
        );
    }
}
