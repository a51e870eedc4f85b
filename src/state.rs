//! The packed state word: every breaker's state machine in one `AtomicU64`,
//! and [`StateCell::update`], the one loop through which it changes.
//!
//! # Bit layout
//!
//! | bits  | width | field | meaning |
//! |-------|------:|-------|---------|
//! | 0–2   | 3  | mode       | [`State`]: Closed, Open, HalfOpen, ForcedOpen, Closed while ramping (slow start), MetricsOnly, Disabled |
//! | 3–31  | 29 | generation | bumped (wrapping) by every transition; compared for equality only |
//! | 32    | 1  | detached   | the breaker left its trip gate (a registry removed it while handles lived): sticky |
//! | 33    | 1  | proven     | a success was recorded at least once (sticky; a trip gate may spare unproven breakers its budget) |
//! | 34    | 1  | counted    | Open/HalfOpen: this ejection holds a slot of the trip gate's budget |
//! | 35–49 | 15 | count      | Closed: consecutive failures (saturating) · HalfOpen: probe slots taken in this round |
//! | 50–57 | 8  | successes  | HalfOpen: successful probes in this round (fast ones; slow ones too under the rate rule) · Closed: unanswered calls in a row (saturating) |
//! | 35–57 | 23 | span       | Open (the two fields above, unused while Open): a remote trip's or an upstream hint's open period in units of 2²⁴ ns (≈ 16.8 ms; up to 39 h); 0 = the backoff schedule's |
//! | 58–63 | 6  | trips      | the backoff step: trips in a row, saturating at 63; kept on Closed, where it decays with healthy time (see below) |
//!
//! Under the half-open rate rule ([`Builder::half_open_rate_rule`]) a
//! HalfOpen word splits its count into three 5-bit fields, so a round has at
//! most 31 probes:
//!
//! | bits  | width | field  | meaning |
//! |-------|------:|--------|---------|
//! | 35–39 | 5 | taken  | probe slots taken in this round |
//! | 40–44 | 5 | failed | probes that failed (slow or not) |
//! | 45–49 | 5 | slow   | probes that were slow (a slow failure is here and in `failed`) |
//! | 50–57 | 8 | successes | probes that succeeded (fast or slow): with `failed`, the round's answers |
//!
//! [`Builder::half_open_rate_rule`]: crate::Builder::half_open_rate_rule
//!
//! Beside the word sits the stamp ([`Nanos`]): the instant the current state
//! was entered. While OPEN that is the trip; while HALF_OPEN it is the start
//! of the current probe round. It is kept in two slots indexed by the
//! generation's parity, so the stamp a transition into generation g+1 writes
//! *before* its CAS never overwrites the stamp a reader of generation g is
//! about to read.
//!
//! # State table
//!
//! | mode        | count            | successes   | trips | counted | admits                                  |
//! |-------------|------------------|-------------|-------|---------|-----------------------------------------|
//! | Closed      | consecutive fails | unanswered | step  | 0       | everyone (one load)                     |
//! | Closed, ramping | consecutive fails | unanswered | step | 0   | a fraction rising over the ramp window  |
//! | Open        | span (0: local)  | span        | ≥ 1   | 0 or 1  | no one before `since + open`; then the CAS winner, as probe 1 |
//! | HalfOpen    | probes taken ≤ P | ≤ P         | ≥ 1   | 0 or 1  | up to P probes per round                |
//! | ForcedOpen  | 0                | 0           | kept  | 0       | no one                                  |
//! | Disabled    | 0                | 0           | 0     | 0       | everyone; records nothing               |
//! | MetricsOnly | consecutive fails | unanswered | 0     | 0       | everyone; records and evaluates, never rejects |
//!
//! `proven` and `detached` may be set in any mode and are never cleared.
//!
//! A probe round that closes enters the ramp mode when the configuration has
//! a ramp (slow start): [`State::Closed`] to everyone outside, with the
//! close's stamp as the start of the ramp. The first admission after the
//! ramp window moves the word to plain Closed within its generation (a
//! count change, no transition), so after a ramp the admission and success
//! paths are exactly those of a breaker that never ramped. The ramp's mode
//! code differs from Closed's in one bit that no other mode sets alone, so
//! the settled-success test (one masked compare) accepts both.
//!
//! The backoff step (`trips`) is kept when a round closes. It decays lazily:
//! the next trip from Closed takes one step off for each base open duration
//! of healthy time since the close (ramp included), then adds one.
//!
//! # Changing the word
//!
//! Every change of the word goes through [`StateCell::update`]: it shows a
//! decision the current word, and the decision — a pure function, in
//! `machine` — says what to do with it ([`Next`]): keep it, change a count
//! within the generation, or enter a new state (a transition, which bumps the
//! generation). A change is one strong `compare_exchange` from the exact word
//! the decision saw; when it fails, the decision is shown the word that won
//! and decides again. A transition stamps its instant *before* its CAS
//! (invariant 3). Only the caller whose CAS entered a state learns of it
//! ([`Updated::entered`]), so only it reports the transition (invariant 1).
//!
//! [`Nanos`]: crate::Nanos

use core::fmt;

use crate::clock::Nanos;
use crate::sync::{AtomicU64, Ordering};

const MODE_SHIFT: u32 = 0;
const MODE_MASK: u64 = 0b111 << MODE_SHIFT;
/// The mode code of a Closed breaker that is ramping up (slow start).
const RAMP_CODE: u64 = 4;
/// Closed (0) and ramping (4) are the only codes with these bits clear.
const CLOSED_MODES_MASK: u64 = 0b011 << MODE_SHIFT;
const GEN_SHIFT: u32 = 3;
/// Generations wrap at 2²⁹: a permit held across 2²⁹ transitions could take
/// a stale verdict for a fresh one, which no real breaker lives to see.
const GEN_BITS: u32 = 29;
const GEN_MASK: u64 = ((1 << GEN_BITS) - 1) << GEN_SHIFT;
const DETACHED: u64 = 1 << 32;
const PROVEN: u64 = 1 << 33;
const COUNTED: u64 = 1 << 34;
const COUNT_SHIFT: u32 = 35;
/// Largest value of the count field (consecutive failures, probes taken).
pub(crate) const COUNT_MAX: u32 = (1 << 15) - 1;
const COUNT_MASK: u64 = (COUNT_MAX as u64) << COUNT_SHIFT;
const SUCCESS_SHIFT: u32 = 50;
/// Largest value of the successes field, and so the largest probe count P.
pub(crate) const SUCCESS_MAX: u32 = (1 << 8) - 1;
const SUCCESS_MASK: u64 = (SUCCESS_MAX as u64) << SUCCESS_SHIFT;
/// While Open, count and successes together hold the open span.
const SPAN_MASK: u64 = COUNT_MASK | SUCCESS_MASK;
/// While Closed, count and successes hold the two runs a success ends:
/// consecutive failures and unanswered calls. A success in a breaker with
/// either is news and takes the slow path, which clears them.
const RUNS_MASK: u64 = COUNT_MASK | SUCCESS_MASK;
const SPAN_MAX: u32 = (1 << 23) - 1;
/// The unit of an open span: 2²⁴ ns ≈ 16.8 ms.
pub(crate) const SPAN_UNIT_NANOS: u64 = 1 << 24;
const TRIPS_SHIFT: u32 = 58;
/// Largest value of the trips-in-a-row field.
pub(crate) const TRIPS_MAX: u32 = (1 << 6) - 1;
const TRIPS_MASK: u64 = (TRIPS_MAX as u64) << TRIPS_SHIFT;

/// Under the half-open rate rule, the widths of the round's three counts.
pub(crate) const RULE_FIELD_BITS: u32 = 5;
/// Under the half-open rate rule, the largest probe count P.
pub(crate) const RULE_PROBES_MAX: u32 = (1 << RULE_FIELD_BITS) - 1;
/// Under the rule, the count field's unit for a failed probe.
const RULE_FAILED_UNIT: u32 = 1 << RULE_FIELD_BITS;
/// Under the rule, the count field's unit for a slow probe.
const RULE_SLOW_UNIT: u32 = 1 << (2 * RULE_FIELD_BITS);
// The three counts fill the count field exactly.
const _: () = assert!(3 * RULE_FIELD_BITS == COUNT_MAX.count_ones());

// The fields tile the word exactly: no overlap, no gap.
const _: () = assert!(
    MODE_MASK ^ GEN_MASK ^ DETACHED ^ PROVEN ^ COUNTED ^ COUNT_MASK ^ SUCCESS_MASK ^ TRIPS_MASK
        == u64::MAX
);
const _: () = assert!(
    MODE_MASK | GEN_MASK | DETACHED | PROVEN | COUNTED | COUNT_MASK | SUCCESS_MASK | TRIPS_MASK
        == u64::MAX
);

/// The mode of a breaker: the three states of the machine and three manual modes.
///
/// ```
/// use failfast::State;
/// assert!(State::Open.rejects());
/// assert!(!State::MetricsOnly.rejects());
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum State {
    /// Calls flow; outcomes are counted against the trip conditions.
    Closed,
    /// Calls are rejected until the open duration has passed.
    Open,
    /// A bounded number of probes decide whether to close or reopen.
    HalfOpen,
    /// Manual: every call is rejected until [`reset`](crate::Breaker::reset).
    ForcedOpen,
    /// Manual: every call is admitted and nothing is recorded.
    Disabled,
    /// Manual: outcomes are recorded and evaluated, but no call is ever rejected
    /// (a shadow roll-out). A trip condition fires a transition to itself.
    MetricsOnly,
}

impl State {
    const ALL: [State; 6] = [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
        State::Disabled,
        State::MetricsOnly,
    ];

    /// The mode code. 4 is a ramping Closed breaker (not a [`State`] of
    /// its own); 7 is never written.
    const fn code(self) -> u64 {
        match self {
            State::Closed => 0,
            State::Open => 1,
            State::HalfOpen => 2,
            State::ForcedOpen => 3,
            State::MetricsOnly => 5,
            State::Disabled => 6,
        }
    }

    /// The state of each mode code.
    const OF_CODE: [State; 8] = [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
        State::Closed, // ramping
        State::MetricsOnly,
        State::Disabled,
        State::Closed, // never written
    ];

    /// Whether a breaker in this state turns calls away (always or for now).
    pub const fn rejects(self) -> bool {
        matches!(self, State::Open | State::ForcedOpen)
    }

    /// A short lowercase name, as used in metrics labels: `closed`, `open`,
    /// `half_open`, `forced_open`, `disabled`, `metrics_only`.
    pub const fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
            State::ForcedOpen => "forced_open",
            State::Disabled => "disabled",
            State::MetricsOnly => "metrics_only",
        }
    }

    /// Every state, in a fixed order (for exporters that publish one series per state).
    pub const fn all() -> [State; 6] {
        State::ALL
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A copy of the state word, decoded field by field.
#[derive(Copy, Clone, PartialEq, Eq)]
pub(crate) struct Snapshot(u64);

impl Snapshot {
    /// The word of a fresh breaker: Closed, generation 0, all counts zero.
    pub(crate) const INITIAL: Snapshot = Snapshot(0);

    #[cfg(all(test, not(failfast_loom)))]
    pub(crate) const fn from_bits(bits: u64) -> Snapshot {
        Snapshot(bits)
    }

    pub(crate) const fn bits(self) -> u64 {
        self.0
    }

    pub(crate) fn state(self) -> State {
        State::OF_CODE[((self.0 & MODE_MASK) >> MODE_SHIFT) as usize]
    }

    /// Closed and not ramping: the one-load admission's test.
    pub(crate) const fn is_closed(self) -> bool {
        self.0 & MODE_MASK == State::Closed.code() << MODE_SHIFT
    }

    /// Closed, ramping up after a recovery (slow start).
    pub(crate) const fn is_ramping(self) -> bool {
        self.0 & MODE_MASK == RAMP_CODE << MODE_SHIFT
    }

    /// Closed, ramping or not.
    pub(crate) const fn is_closed_or_ramping(self) -> bool {
        self.0 & CLOSED_MODES_MASK == 0
    }

    /// This Closed word ramping (slow start), in the same generation.
    pub(crate) const fn with_ramp(self) -> Snapshot {
        Snapshot((self.0 & !MODE_MASK) | (RAMP_CODE << MODE_SHIFT))
    }

    pub(crate) const fn is_open(self) -> bool {
        self.0 & MODE_MASK == State::Open.code() << MODE_SHIFT
    }

    /// OPEN by a local trip: the mode is Open and the span field is 0 (the
    /// backoff schedule's period), tested with one mask.
    #[inline(always)]
    pub(crate) const fn is_open_locally(self) -> bool {
        self.0 & (MODE_MASK | SPAN_MASK) == State::Open.code() << MODE_SHIFT
    }

    pub(crate) const fn is_half_open(self) -> bool {
        self.0 & MODE_MASK == State::HalfOpen.code() << MODE_SHIFT
    }

    /// Closed, proven, and no run of failures or of unanswered calls: a
    /// fast success has nothing to write (invariant 8). One mask and one
    /// compare.
    #[inline]
    pub(crate) const fn is_settled_closed(self) -> bool {
        self.0 & (CLOSED_MODES_MASK | PROVEN | RUNS_MASK) == PROVEN
    }

    /// [`is_settled_closed`](Self::is_settled_closed) in generation
    /// `generation`: a fast success admitted in that generation has nothing
    /// to write to the word. One mask and one compare: the low 32 bits are
    /// the mode (Closed is 0) and the generation.
    #[inline]
    pub(crate) const fn is_settled_closed_in(self, generation: u32) -> bool {
        // A ticket's generation was read from a word, so it fits the 29
        // bits the shift keeps.
        self.0 & (CLOSED_MODES_MASK | GEN_MASK | PROVEN | RUNS_MASK)
            == PROVEN | (generation << GEN_SHIFT) as u64
    }

    pub(crate) const fn generation(self) -> u32 {
        ((self.0 & GEN_MASK) >> GEN_SHIFT) as u32
    }

    /// Whether the breaker left its trip gate.
    pub(crate) const fn is_detached(self) -> bool {
        self.0 & DETACHED != 0
    }

    /// Whether a success was ever recorded.
    pub(crate) const fn is_proven(self) -> bool {
        self.0 & PROVEN != 0
    }

    /// Whether this ejection holds a slot of the trip gate's budget.
    pub(crate) const fn is_counted(self) -> bool {
        self.0 & COUNTED != 0
    }

    /// Closed / MetricsOnly: consecutive failures. HalfOpen: probe slots taken.
    pub(crate) const fn count(self) -> u32 {
        ((self.0 & COUNT_MASK) >> COUNT_SHIFT) as u32
    }

    /// HalfOpen: successful probes of the round (fast ones only without
    /// the half-open rate rule, which reopens on a slow one).
    pub(crate) const fn successes(self) -> u32 {
        ((self.0 & SUCCESS_MASK) >> SUCCESS_SHIFT) as u32
    }

    /// Closed / MetricsOnly: calls in a row dropped before any answer (the
    /// `unanswered` rule); the same bits as [`successes`](Self::successes).
    pub(crate) const fn unanswered(self) -> u32 {
        self.successes()
    }

    /// Sets the unanswered run, saturating at [`SUCCESS_MAX`].
    pub(crate) const fn with_unanswered(self, calls: u32) -> Snapshot {
        self.with_successes(calls)
    }

    /// Under the half-open rate rule: probe slots taken in this round.
    pub(crate) const fn rule_taken(self) -> u32 {
        self.count() & RULE_PROBES_MAX
    }

    /// Under the rule: probes of this round that failed.
    pub(crate) const fn rule_failed(self) -> u32 {
        (self.count() / RULE_FAILED_UNIT) & RULE_PROBES_MAX
    }

    /// Under the rule: probes of this round that were slow (succeeded or
    /// failed).
    pub(crate) const fn rule_slow(self) -> u32 {
        (self.count() / RULE_SLOW_UNIT) & RULE_PROBES_MAX
    }

    /// Under the rule: one more failed probe (at most P ≤ 31 are counted,
    /// so the field never spills).
    pub(crate) const fn with_rule_failure(self) -> Snapshot {
        self.with_count(self.count() + RULE_FAILED_UNIT)
    }

    /// Under the rule: one more slow probe.
    pub(crate) const fn with_rule_slow(self) -> Snapshot {
        self.with_count(self.count() + RULE_SLOW_UNIT)
    }

    pub(crate) const fn trips(self) -> u32 {
        ((self.0 & TRIPS_MASK) >> TRIPS_SHIFT) as u32
    }

    pub(crate) const fn with_state(self, state: State) -> Snapshot {
        Snapshot((self.0 & !MODE_MASK) | (state.code() << MODE_SHIFT))
    }

    /// Sets the generation (its low 29 bits).
    pub(crate) const fn with_generation(self, generation: u32) -> Snapshot {
        Snapshot((self.0 & !GEN_MASK) | (((generation as u64) << GEN_SHIFT) & GEN_MASK))
    }

    /// The same word one generation later (wrapping: generations are only compared for equality).
    pub(crate) const fn next_generation(self) -> Snapshot {
        self.with_generation(self.generation().wrapping_add(1))
    }

    /// Marks the breaker as gone from its trip gate (and holding no slot).
    pub(crate) const fn with_detached(self) -> Snapshot {
        Snapshot((self.0 | DETACHED) & !COUNTED)
    }

    /// Marks a success as recorded.
    pub(crate) const fn with_proven(self) -> Snapshot {
        Snapshot(self.0 | PROVEN)
    }

    /// Sets whether this ejection holds a slot of the trip gate's budget.
    pub(crate) const fn with_counted(self, counted: bool) -> Snapshot {
        if counted {
            Snapshot(self.0 | COUNTED)
        } else {
            Snapshot(self.0 & !COUNTED)
        }
    }

    /// Sets the count field, saturating at [`COUNT_MAX`].
    pub(crate) const fn with_count(self, count: u32) -> Snapshot {
        let count = if count > COUNT_MAX { COUNT_MAX } else { count };
        Snapshot((self.0 & !COUNT_MASK) | ((count as u64) << COUNT_SHIFT))
    }

    /// Sets the successes field, saturating at [`SUCCESS_MAX`].
    pub(crate) const fn with_successes(self, successes: u32) -> Snapshot {
        let s = if successes > SUCCESS_MAX {
            SUCCESS_MAX
        } else {
            successes
        };
        Snapshot((self.0 & !SUCCESS_MASK) | ((s as u64) << SUCCESS_SHIFT))
    }

    /// This word with the runs (the count and successes fields) of
    /// `other`: for reporting the runs a decision was made on.
    pub(crate) const fn with_runs_of(self, other: Snapshot) -> Snapshot {
        Snapshot((self.0 & !RUNS_MASK) | (other.0 & RUNS_MASK))
    }

    /// Open: a remote trip's open period in units of [`SPAN_UNIT_NANOS`],
    /// or 0 when the backoff schedule decides (every local trip).
    pub(crate) const fn open_span(self) -> u32 {
        ((self.0 & SPAN_MASK) >> COUNT_SHIFT) as u32
    }

    /// Sets the open span (saturating at the field's 23 bits).
    pub(crate) const fn with_open_span(self, units: u32) -> Snapshot {
        let units = if units > SPAN_MAX { SPAN_MAX } else { units };
        Snapshot((self.0 & !SPAN_MASK) | ((units as u64) << COUNT_SHIFT))
    }

    /// Sets the trips-in-a-row field, saturating at [`TRIPS_MAX`].
    pub(crate) const fn with_trips(self, trips: u32) -> Snapshot {
        let t = if trips > TRIPS_MAX { TRIPS_MAX } else { trips };
        Snapshot((self.0 & !TRIPS_MASK) | ((t as u64) << TRIPS_SHIFT))
    }

    /// The word a transition into `state` starts from: next generation, counts
    /// and `counted` cleared, trips and `proven` kept (the caller sets what
    /// changes).
    pub(crate) const fn enter(self, state: State) -> Snapshot {
        self.next_generation()
            .with_state(state)
            .with_count(0)
            .with_successes(0)
            .with_counted(false)
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("state", &self.state())
            .field("ramping", &self.is_ramping())
            .field("generation", &self.generation())
            .field("detached", &self.is_detached())
            .field("proven", &self.is_proven())
            .field("counted", &self.is_counted())
            .field("count", &self.count())
            .field("successes", &self.successes())
            .field("trips", &self.trips())
            .finish()
    }
}

/// What a decision does with the word it was shown (see [`StateCell::update`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Next<T> {
    /// Leave the word as it is.
    Keep(T),
    /// Change counts within the same generation (no stamp).
    Count(Snapshot, T),
    /// Enter a new state: a transition to this word of the next generation,
    /// stamped with the update's instant before it is published.
    Enter(Snapshot, T),
}

/// What [`StateCell::update`] did.
#[derive(Copy, Clone, Debug)]
#[must_use = "a transition won here must be reported, and only here"]
pub(crate) struct Updated<T> {
    /// The decision's result for the word it last saw.
    pub(crate) value: T,
    /// The word that last decision saw (and replaced, if it wrote).
    pub(crate) seen: Snapshot,
    /// The word this caller's CAS entered: `Some` for exactly one caller per
    /// transition (invariant 1).
    pub(crate) entered: Option<Snapshot>,
}

/// The state word and its stamps, with the only code that writes them.
pub(crate) struct StateCell {
    word: AtomicU64,
    /// `since[g % 2]`: when the state of generation `g` began.
    since: [AtomicU64; 2],
}

impl StateCell {
    pub(crate) fn new() -> StateCell {
        StateCell {
            word: AtomicU64::new(Snapshot::INITIAL.bits()),
            since: [AtomicU64::new(0), AtomicU64::new(0)],
        }
    }

    /// Reads the word.
    #[inline]
    pub(crate) fn load(&self) -> Snapshot {
        // Acquire: pairs with the Release of the CAS in `update`, so a reader
        // that sees a transition also sees the stamp written before it
        // (invariant 3).
        Snapshot(self.word.load(Ordering::Acquire))
    }

    /// When the state of `s` began (the trip while OPEN, the round start while
    /// HALF_OPEN).
    ///
    /// Call after [`load`](Self::load) returned `s`: the Acquire there makes
    /// this value at least as new as the stamp of the transition it observed.
    #[inline]
    pub(crate) fn since(&self, s: Snapshot) -> Nanos {
        // At least the stamp of `s`'s transition: the Acquire load of the word
        // that returned `s` happens after it (invariant 3). Acquire here: pairs
        // with the Release stamp of a transition into s's generation + 2 (same
        // slot), so a re-load of the word after this read sees that the
        // breaker moved on (callers re-decide on a changed word).
        Nanos::from_nanos(self.slot(s).load(Ordering::Acquire))
    }

    /// The slot holding the stamp of `s`'s generation.
    #[inline]
    fn slot(&self, s: Snapshot) -> &AtomicU64 {
        &self.since[(s.generation() & 1) as usize]
    }

    /// The one loop through which the word changes (tokio's `fetch_update`
    /// shape): shows `decide` the current word and carries out its [`Next`].
    ///
    /// A write is one strong `compare_exchange` from the exact word the
    /// decision saw: of any number of callers that decided on the same word,
    /// exactly one wins (invariant 1). A caller whose CAS fails is shown the
    /// word that won and decides again — it does not retry its old decision:
    /// the loser of an election sees the winner's HalfOpen round and takes a
    /// probe slot or is turned away; a verdict whose generation moved on
    /// gives up. A transition ([`Next::Enter`]) stamps `now` *before* its CAS.
    #[inline]
    pub(crate) fn update<T>(
        &self,
        now: Nanos,
        decide: impl FnMut(Snapshot) -> Next<T>,
    ) -> Updated<T> {
        self.update_from(self.load(), now, decide)
    }

    /// [`update`](Self::update), starting from a word the caller just loaded.
    #[inline]
    pub(crate) fn update_from<T>(
        &self,
        mut seen: Snapshot,
        now: Nanos,
        mut decide: impl FnMut(Snapshot) -> Next<T>,
    ) -> Updated<T> {
        loop {
            let (next, value, transition) = match decide(seen) {
                Next::Keep(value) => {
                    return Updated {
                        value,
                        seen,
                        entered: None,
                    }
                }
                Next::Count(next, value) => (next, value, false),
                Next::Enter(next, value) => (next, value, true),
            };
            debug_assert_eq!(transition, next.generation() != seen.generation());
            if transition {
                self.stamp(next, now);
            }
            match self.compare_exchange(seen, next) {
                Ok(()) => {
                    return Updated {
                        value,
                        seen,
                        entered: transition.then_some(next),
                    }
                }
                Err(actual) => seen = actual,
            }
        }
    }

    /// Invariant 3 (fresh stamp): the stamp of `next`'s generation, a
    /// `fetch_max` made *before* the Release CAS that publishes `next`, so no
    /// reader can pair the new state with an older stamp. A loser's stamp
    /// can only move the time forward, by no more than the race itself
    /// lasted; it never moves it back.
    #[inline]
    fn stamp(&self, next: Snapshot, now: Nanos) {
        // Release: published to word readers by the Release of the CAS that
        // follows; and to a stale reader of generation `next - 2` (same slot)
        // through its Acquire read, so its re-load of the word sees that the
        // breaker moved on. A reader of `next - 1` reads the other slot.
        self.slot(next).fetch_max(now.as_nanos(), Ordering::Release);
    }

    #[inline]
    fn compare_exchange(&self, current: Snapshot, next: Snapshot) -> Result<(), Snapshot> {
        self.word
            // AcqRel on success: Release publishes the stamp (written before)
            // to Acquire readers; Acquire orders this winner after earlier
            // winners. Acquire on failure: the returned word is then as good
            // as a `load`.
            .compare_exchange(current.0, next.0, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(Snapshot)
    }
}

impl fmt::Debug for StateCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.load();
        f.debug_struct("StateCell")
            .field("word", &s)
            .field("since", &self.since(s))
            .finish()
    }
}

/// The largest generation (29 bits).
#[cfg(all(test, not(failfast_loom)))]
const GEN_MAX: u32 = (1 << GEN_BITS) - 1;

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;

    #[test]
    fn settled_closed_in_a_generation_is_one_exact_word_shape() {
        let settled = Snapshot::INITIAL.with_generation(GEN_MAX).with_proven();
        assert!(settled.is_settled_closed_in(GEN_MAX));
        assert!(
            settled.with_detached().is_settled_closed_in(GEN_MAX),
            "detached does not matter"
        );
        assert!(
            !settled.is_settled_closed_in(GEN_MAX - 1),
            "another generation"
        );
        assert!(!settled.with_generation(1).is_settled_closed_in(0));
        assert!(
            !settled.with_count(1).is_settled_closed_in(GEN_MAX),
            "a run"
        );
        assert!(!settled.with_count(COUNT_MAX).is_settled_closed_in(GEN_MAX));
        assert!(
            !settled.with_unanswered(1).is_settled_closed_in(GEN_MAX),
            "an unanswered run"
        );
        assert!(!settled
            .with_unanswered(SUCCESS_MAX)
            .is_settled_closed_in(GEN_MAX));
        let unproven = Snapshot::INITIAL.with_generation(GEN_MAX);
        assert!(!unproven.is_settled_closed_in(GEN_MAX), "never proven");
        for state in State::all().into_iter().filter(|s| *s != State::Closed) {
            assert!(
                !settled.with_state(state).is_settled_closed_in(GEN_MAX),
                "{state:?}"
            );
        }
    }

    #[test]
    fn only_a_local_open_word_is_decided_in_line() {
        let open = Snapshot::INITIAL
            .with_state(State::Open)
            .with_generation(GEN_MAX)
            .with_trips(TRIPS_MAX)
            .with_counted(true)
            .with_proven();
        assert!(
            open.is_open_locally(),
            "flags, trips and generation do not matter"
        );
        assert!(!open.with_open_span(1).is_open_locally(), "a remote span");
        assert!(!open.with_open_span(SPAN_MAX).is_open_locally());
        for state in State::all().into_iter().filter(|s| *s != State::Open) {
            assert!(!open.with_state(state).is_open_locally(), "{state:?}");
        }
    }

    #[test]
    fn fields_round_trip_at_their_limits() {
        for state in State::all() {
            for gen in [0, 1, GEN_MAX - 1, GEN_MAX] {
                for count in [0, 1, COUNT_MAX] {
                    for successes in [0, 1, SUCCESS_MAX] {
                        for trips in [0, 1, TRIPS_MAX] {
                            for (proven, counted) in [(false, true), (true, false)] {
                                let mut s = Snapshot::INITIAL
                                    .with_generation(gen)
                                    .with_state(state)
                                    .with_count(count)
                                    .with_successes(successes)
                                    .with_trips(trips)
                                    .with_counted(counted);
                                if proven {
                                    s = s.with_proven();
                                }
                                assert_eq!(s.state(), state);
                                assert_eq!(s.generation(), gen);
                                assert_eq!(s.count(), count);
                                assert_eq!(s.successes(), successes);
                                assert_eq!(s.trips(), trips);
                                assert_eq!((s.is_proven(), s.is_counted()), (proven, counted));
                                assert_eq!(s.next_generation().generation(), (gen + 1) & GEN_MAX);
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn setters_saturate_instead_of_spilling_into_neighbours() {
        let s = Snapshot::INITIAL.with_state(State::HalfOpen).with_trips(5);
        let s = s
            .with_count(COUNT_MAX + 10)
            .with_successes(SUCCESS_MAX + 1)
            .with_trips(TRIPS_MAX + 1)
            .with_generation(u32::MAX);
        assert_eq!(s.state(), State::HalfOpen);
        assert_eq!(s.count(), COUNT_MAX);
        assert_eq!(s.successes(), SUCCESS_MAX);
        assert_eq!(s.trips(), TRIPS_MAX);
        assert_eq!(s.generation(), GEN_MAX, "only the low 29 bits are kept");
        assert!(!s.is_proven() && !s.is_counted());
    }

    #[test]
    fn a_ramping_word_is_closed_outside_and_settled_for_a_success_but_not_for_admission() {
        let settled = Snapshot::INITIAL.with_generation(GEN_MAX).with_proven();
        let ramping = settled.with_ramp();
        assert_eq!(ramping.state(), State::Closed, "Closed to everyone outside");
        assert!(ramping.is_ramping() && ramping.is_closed_or_ramping());
        assert!(!ramping.is_closed(), "admission goes out of line");
        assert!(ramping.is_settled_closed() && ramping.is_settled_closed_in(GEN_MAX));
        assert!(!ramping.with_count(1).is_settled_closed(), "a run is news");
        assert_eq!(ramping.generation(), settled.generation());
        assert_eq!(
            ramping.with_state(State::Closed),
            settled,
            "leaving the ramp"
        );
        assert!(!settled.is_ramping() && settled.is_closed_or_ramping());
        for state in State::all().into_iter().filter(|s| *s != State::Closed) {
            let s = settled.with_state(state);
            assert!(!s.is_closed_or_ramping() && !s.is_ramping(), "{state:?}");
            assert!(!s.is_settled_closed(), "{state:?}");
        }
    }

    #[test]
    fn the_rules_round_counts_share_the_count_field_without_spilling() {
        let round = Snapshot::INITIAL
            .enter(State::HalfOpen)
            .with_trips(TRIPS_MAX)
            .with_successes(SUCCESS_MAX)
            .with_count(RULE_PROBES_MAX);
        let mut s = round;
        for _ in 0..RULE_PROBES_MAX {
            s = s.with_rule_failure().with_rule_slow();
        }
        assert_eq!(
            (s.rule_taken(), s.rule_failed(), s.rule_slow()),
            (RULE_PROBES_MAX, RULE_PROBES_MAX, RULE_PROBES_MAX)
        );
        assert_eq!((s.successes(), s.trips()), (SUCCESS_MAX, TRIPS_MAX));
        assert_eq!(s.state(), State::HalfOpen);
        let one = round
            .with_count(3)
            .with_rule_failure()
            .with_rule_slow()
            .with_rule_slow();
        assert_eq!(
            (one.rule_taken(), one.rule_failed(), one.rule_slow()),
            (3, 1, 2)
        );
        let freed = one.with_count(one.count() - 1);
        assert_eq!(
            (freed.rule_taken(), freed.rule_failed(), freed.rule_slow()),
            (2, 1, 2),
            "a freed slot leaves the other counts"
        );
    }

    #[test]
    fn the_open_span_saturates_at_23_bits_without_touching_the_trips() {
        let open = Snapshot::INITIAL.with_state(State::Open).with_trips(5);
        // The field's width, written out: (1 << 23) - 1 units, about 39 h.
        for (units, kept) in [
            (1, 1),
            ((1 << 23) - 1, (1 << 23) - 1),
            (1 << 23, (1 << 23) - 1),
        ] {
            let s = open.with_open_span(units);
            assert_eq!(s.open_span(), kept, "{units} units");
            assert_eq!((s.state(), s.trips()), (State::Open, 5), "{units} units");
        }
        let s = open.with_open_span(u32::MAX);
        assert_eq!((s.open_span(), s.trips()), ((1 << 23) - 1, 5));
        assert_eq!(s.with_open_span(0).open_span(), 0);
    }

    #[test]
    fn generation_wraps_without_touching_other_fields() {
        let top = Snapshot::INITIAL
            .with_generation(GEN_MAX)
            .with_state(State::Open)
            .with_trips(7)
            .with_proven()
            .with_counted(true);
        let next = top.next_generation();
        assert_eq!(next.generation(), 0);
        assert_eq!(next.state(), State::Open);
        assert_eq!(next.trips(), 7);
        assert!(next.is_proven() && next.is_counted());
    }

    #[test]
    fn enter_bumps_generation_and_clears_round_counts() {
        let s = Snapshot::INITIAL
            .with_count(3)
            .with_successes(2)
            .with_trips(4)
            .with_proven()
            .with_counted(true);
        let e = s.enter(State::Open);
        assert_eq!(e.state(), State::Open);
        assert_eq!(e.generation(), 1);
        assert_eq!((e.count(), e.successes(), e.trips()), (0, 0, 4));
        assert!(e.is_proven(), "proven is sticky");
        assert!(!e.is_counted(), "the entering transition decides anew");
    }

    #[test]
    fn settled_closed_is_closed_proven_and_without_a_run() {
        let closed = Snapshot::INITIAL;
        assert!(!closed.is_settled_closed(), "not proven yet");
        assert!(closed.with_proven().is_settled_closed());
        assert!(!closed.with_proven().with_count(1).is_settled_closed());
        assert!(!closed.with_proven().with_unanswered(1).is_settled_closed());
        assert!(!closed
            .with_proven()
            .with_state(State::MetricsOnly)
            .is_settled_closed());
        // Trips and generation do not matter.
        assert!(closed
            .with_proven()
            .with_generation(9)
            .with_trips(1)
            .is_settled_closed());
    }

    #[test]
    fn update_writes_counts_without_stamping_and_transitions_with_a_stamp() {
        let cell = StateCell::new();
        let u = cell.update(Nanos::from_secs(3), |s| Next::Count(s.with_count(2), 7));
        assert_eq!((u.value, u.seen, u.entered), (7, Snapshot::INITIAL, None));
        assert_eq!(cell.load().count(), 2);
        assert_eq!(
            cell.since(cell.load()),
            Nanos::ZERO,
            "a count is no transition"
        );
        let u = cell.update(Nanos::from_secs(5), |s| {
            Next::Enter(s.enter(State::Open), ())
        });
        let open = cell.load();
        assert_eq!(u.entered, Some(open));
        assert_eq!(cell.since(open), Nanos::from_secs(5));
        let u = cell.update(Nanos::from_secs(9), |_| Next::Keep("kept"));
        assert_eq!((u.value, u.seen, u.entered), ("kept", open, None));
        assert_eq!(cell.load(), open);
    }

    #[test]
    fn update_decides_again_on_the_word_that_won() {
        let cell = StateCell::new();
        // The decision saw a stale word first: its CAS fails and it is shown
        // the current one.
        let stale = Snapshot::INITIAL.with_count(5);
        let mut shown = Vec::new();
        let u = cell.update_from(stale, Nanos::ZERO, |s| {
            shown.push(s);
            Next::Count(s.with_count(s.count() + 1), ())
        });
        assert_eq!(shown, [stale, Snapshot::INITIAL]);
        assert_eq!(u.seen, Snapshot::INITIAL);
        assert_eq!(cell.load().count(), 1);
    }

    /// A losing transition's stamp goes to the slot of the generation it
    /// meant to enter — the slot readers of that generation read — and can
    /// only move it forward.
    #[test]
    fn a_losing_transition_never_moves_the_stamp_it_shares_back() {
        let cell = StateCell::new();
        let closed = cell.load();
        // The winner enters generation 1 at 100 s.
        let _ = cell.update(Nanos::from_secs(100), |s| {
            Next::Enter(s.enter(State::Open), ())
        });
        let open = cell.load();
        // A loser decided on the same Closed word and meant generation 1 too,
        // at 40 s: its CAS fails, its stamp lands in generation 1's slot.
        let mut first = true;
        let _ = cell.update_from(closed, Nanos::from_secs(40), |s| {
            if std::mem::take(&mut first) {
                Next::Enter(s.enter(State::Open), ())
            } else {
                Next::Keep(())
            }
        });
        assert_eq!(cell.load(), open, "a lost CAS changes nothing");
        assert_eq!(
            cell.since(open),
            Nanos::from_secs(100),
            "the stamp of the state readers see never moves back"
        );
    }
}

/// Property tests of the encoding: every field at every value, not
/// only at the limits above.
#[cfg(all(test, not(failfast_loom)))]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    fn any_state() -> impl Strategy<Value = State> {
        proptest::sample::select(State::all().to_vec())
    }

    /// A value of a field whose largest value is `max`: anything, the limit,
    /// or past it.
    fn field(max: u32) -> impl Strategy<Value = u32> {
        prop_oneof![0..=max, Just(max), Just(max + 1), any::<u32>()]
    }

    /// An arbitrary word with a valid mode (codes 6 and 7 are never written).
    fn any_word() -> impl Strategy<Value = Snapshot> {
        (any::<u64>(), any_state())
            .prop_map(|(bits, state)| Snapshot::from_bits(bits).with_state(state))
    }

    type Fields = (State, u32, bool, bool, bool, u32, u32, u32);

    fn fields(s: Snapshot) -> Fields {
        (
            s.state(),
            s.generation(),
            s.is_detached(),
            s.is_proven(),
            s.is_counted(),
            s.count(),
            s.successes(),
            s.trips(),
        )
    }

    proptest! {
        /// Each setter stores its value (saturated at the field's limit) and
        /// leaves every other field as it was; re-setting a field to what it
        /// holds changes no bit.
        #[test]
        fn setters_round_trip_and_leave_the_other_fields_alone(
            s in any_word(),
            state in any_state(),
            generation in any::<u32>(),
            counted in any::<bool>(),
            count in field(COUNT_MAX),
            successes in field(SUCCESS_MAX),
            trips in field(TRIPS_MAX),
        ) {
            let (st, g, d, p, k, c, su, t) = fields(s);
            prop_assert_eq!(fields(s.with_state(state)), (state, g, d, p, k, c, su, t));
            prop_assert_eq!(
                fields(s.with_generation(generation)),
                (st, generation & GEN_MAX, d, p, k, c, su, t)
            );
            prop_assert_eq!(fields(s.with_detached()), (st, g, true, p, false, c, su, t));
            prop_assert_eq!(fields(s.with_proven()), (st, g, d, true, k, c, su, t));
            prop_assert_eq!(fields(s.with_counted(counted)), (st, g, d, p, counted, c, su, t));
            prop_assert_eq!(fields(s.with_count(count)), (st, g, d, p, k, count.min(COUNT_MAX), su, t));
            prop_assert_eq!(
                fields(s.with_successes(successes)),
                (st, g, d, p, k, c, successes.min(SUCCESS_MAX), t)
            );
            prop_assert_eq!(fields(s.with_trips(trips)), (st, g, d, p, k, c, su, trips.min(TRIPS_MAX)));
            let same = s
                .with_state(st)
                .with_generation(g)
                .with_counted(k)
                .with_count(c)
                .with_successes(su)
                .with_trips(t);
            prop_assert_eq!(same.bits(), s.bits());
            prop_assert_eq!(s.is_closed(), st == State::Closed);
            prop_assert_eq!(s.is_open(), st == State::Open);
            prop_assert_eq!(s.is_half_open(), st == State::HalfOpen);
            prop_assert_eq!(s.is_settled_closed(), st == State::Closed && p && c == 0);
        }

        /// The next generation (wrapping) changes only the generation;
        /// `enter` also sets the mode, clears the round counts and
        /// `counted`, keeping trips and `proven`.
        #[test]
        fn next_generation_and_enter_touch_only_their_fields(s in any_word(), to in any_state()) {
            let (st, g, d, p, k, c, su, t) = fields(s);
            let next = (g + 1) & GEN_MAX;
            prop_assert_eq!(fields(s.next_generation()), (st, next, d, p, k, c, su, t));
            prop_assert_eq!(fields(s.enter(to)), (to, next, d, p, false, 0, 0, t));
        }
    }
}

/// The raw bits follow the layout table in the module docs.
#[cfg(all(test, not(failfast_loom)))]
mod layout_tests {
    use super::*;

    #[test]
    fn bits_follow_the_documented_layout() {
        assert_eq!(Snapshot::INITIAL.bits(), 0);
        let s = Snapshot::INITIAL
            .with_state(State::HalfOpen)
            .next_generation()
            .with_proven()
            .with_counted(true)
            .with_count(3)
            .with_successes(4)
            .with_trips(5);
        assert_eq!(
            s.bits(),
            2 | (1 << 3) | (1 << 33) | (1 << 34) | (3 << 35) | (4 << 50) | (5 << 58)
        );
        let d = s.with_detached();
        assert_eq!(d.bits(), (s.bits() | (1 << 32)) & !(1 << 34));
    }
}
