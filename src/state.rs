//! The packed state word: every breaker's state machine in one `AtomicU64`.
//!
//! # Bit layout
//!
//! | bits  | width | field | meaning |
//! |-------|------:|-------|---------|
//! | 0–2   | 3  | mode       | [`State`]: Closed, Open, HalfOpen, ForcedOpen, Disabled, MetricsOnly |
//! | 3–34  | 32 | generation | bumped (wrapping) by every transition; compared for equality only |
//! | 35–49 | 15 | count      | Closed: consecutive failures (saturating) · HalfOpen: probe slots taken in this round |
//! | 50–57 | 8  | successes  | HalfOpen: fast successful probes in this round |
//! | 58–63 | 6  | trips      | trips in a row (the backoff exponent), saturating at 63; cleared on Closed |
//!
//! Beside the word sits `tripped_at` ([`Nanos`]): the instant the current
//! state was entered. While OPEN that is the trip; while HALF_OPEN it is the
//! start of the current probe round. It is kept in two slots indexed by the
//! generation's parity, so the stamp a transition into generation g+1 writes
//! *before* its CAS never overwrites the stamp a reader of generation g is
//! about to read.
//!
//! # State table
//!
//! | mode        | count            | successes   | trips | admits                                  |
//! |-------------|------------------|-------------|-------|-----------------------------------------|
//! | Closed      | consecutive fails | 0          | 0     | everyone (one load)                     |
//! | Open        | 0                | 0           | ≥ 1   | no one before `tripped_at + open`; then the CAS winner, as probe 1 |
//! | HalfOpen    | probes taken ≤ P | ≤ P         | ≥ 1   | up to P probes per round                |
//! | ForcedOpen  | 0                | 0           | kept  | no one                                  |
//! | Disabled    | 0                | 0           | 0     | everyone; records nothing               |
//! | MetricsOnly | consecutive fails | 0          | 0     | everyone; records and evaluates, never rejects |
//!
//! Every change of the word — transitions and counter updates alike — goes
//! through [`StateCell::compare_exchange`], the one CAS helper. A transition
//! is a change that bumps the generation; see [`StateCell::transition`].
//!
//! [`Nanos`]: crate::Nanos

use core::fmt;

use crate::clock::Nanos;
use crate::sync::{AtomicU64, Ordering};

const MODE_SHIFT: u32 = 0;
const MODE_MASK: u64 = 0b111 << MODE_SHIFT;
const GEN_SHIFT: u32 = 3;
const GEN_MASK: u64 = (u32::MAX as u64) << GEN_SHIFT;
const COUNT_SHIFT: u32 = 35;
/// Largest value of the count field (consecutive failures, probes taken).
pub(crate) const COUNT_MAX: u32 = (1 << 15) - 1;
const COUNT_MASK: u64 = (COUNT_MAX as u64) << COUNT_SHIFT;
const SUCCESS_SHIFT: u32 = 50;
/// Largest value of the successes field, and so the largest probe count P.
pub(crate) const SUCCESS_MAX: u32 = (1 << 8) - 1;
const SUCCESS_MASK: u64 = (SUCCESS_MAX as u64) << SUCCESS_SHIFT;
const TRIPS_SHIFT: u32 = 58;
/// Largest value of the trips-in-a-row field.
pub(crate) const TRIPS_MAX: u32 = (1 << 6) - 1;
const TRIPS_MASK: u64 = (TRIPS_MAX as u64) << TRIPS_SHIFT;

// The fields tile the word exactly: no overlap, no gap.
const _: () = assert!(MODE_MASK ^ GEN_MASK ^ COUNT_MASK ^ SUCCESS_MASK ^ TRIPS_MASK == u64::MAX);
const _: () = assert!(MODE_MASK | GEN_MASK | COUNT_MASK | SUCCESS_MASK | TRIPS_MASK == u64::MAX);

/// The mode of a breaker: the three states of the machine and three manual modes.
///
/// ```
/// use failfast::State;
/// assert!(State::Open.rejects());
/// assert!(!State::MetricsOnly.rejects());
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
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

    const fn code(self) -> u64 {
        match self {
            State::Closed => 0,
            State::Open => 1,
            State::HalfOpen => 2,
            State::ForcedOpen => 3,
            State::Disabled => 4,
            State::MetricsOnly => 5,
        }
    }

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

    #[cfg(test)]
    pub(crate) const fn from_bits(bits: u64) -> Snapshot {
        Snapshot(bits)
    }

    pub(crate) const fn bits(self) -> u64 {
        self.0
    }

    pub(crate) fn state(self) -> State {
        let code = (self.0 & MODE_MASK) >> MODE_SHIFT;
        // Codes 6 and 7 are never written (every writer goes through `with_state`).
        State::ALL
            .get(code as usize)
            .copied()
            .unwrap_or(State::Closed)
    }

    pub(crate) const fn is_closed(self) -> bool {
        self.0 & MODE_MASK == State::Closed.code() << MODE_SHIFT
    }

    pub(crate) const fn is_open(self) -> bool {
        self.0 & MODE_MASK == State::Open.code() << MODE_SHIFT
    }

    pub(crate) const fn is_half_open(self) -> bool {
        self.0 & MODE_MASK == State::HalfOpen.code() << MODE_SHIFT
    }

    pub(crate) const fn generation(self) -> u32 {
        ((self.0 & GEN_MASK) >> GEN_SHIFT) as u32
    }

    /// Closed / MetricsOnly: consecutive failures. HalfOpen: probe slots taken.
    pub(crate) const fn count(self) -> u32 {
        ((self.0 & COUNT_MASK) >> COUNT_SHIFT) as u32
    }

    pub(crate) const fn successes(self) -> u32 {
        ((self.0 & SUCCESS_MASK) >> SUCCESS_SHIFT) as u32
    }

    pub(crate) const fn trips(self) -> u32 {
        ((self.0 & TRIPS_MASK) >> TRIPS_SHIFT) as u32
    }

    pub(crate) const fn with_state(self, state: State) -> Snapshot {
        Snapshot((self.0 & !MODE_MASK) | (state.code() << MODE_SHIFT))
    }

    /// Sets the generation.
    pub(crate) const fn with_generation(self, generation: u32) -> Snapshot {
        Snapshot((self.0 & !GEN_MASK) | ((generation as u64) << GEN_SHIFT))
    }

    /// The same word one generation later (wrapping: generations are only compared for equality).
    pub(crate) const fn next_generation(self) -> Snapshot {
        let next = self.generation().wrapping_add(1) as u64;
        Snapshot((self.0 & !GEN_MASK) | (next << GEN_SHIFT))
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

    /// Sets the trips-in-a-row field, saturating at [`TRIPS_MAX`].
    pub(crate) const fn with_trips(self, trips: u32) -> Snapshot {
        let t = if trips > TRIPS_MAX { TRIPS_MAX } else { trips };
        Snapshot((self.0 & !TRIPS_MASK) | ((t as u64) << TRIPS_SHIFT))
    }

    /// The word a transition into `state` starts from: next generation, counts
    /// cleared, trips kept (the caller sets them where they change).
    pub(crate) const fn enter(self, state: State) -> Snapshot {
        self.next_generation()
            .with_state(state)
            .with_count(0)
            .with_successes(0)
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("state", &self.state())
            .field("generation", &self.generation())
            .field("count", &self.count())
            .field("successes", &self.successes())
            .field("trips", &self.trips())
            .finish()
    }
}

/// The state word and `tripped_at`, with the only code that writes them.
pub(crate) struct StateCell {
    word: AtomicU64,
    /// `tripped_at[g % 2]`: when the state of generation `g` began.
    tripped_at: [AtomicU64; 2],
}

impl StateCell {
    pub(crate) fn new() -> StateCell {
        StateCell {
            word: AtomicU64::new(Snapshot::INITIAL.bits()),
            tripped_at: [AtomicU64::new(0), AtomicU64::new(0)],
        }
    }

    /// Reads the word.
    #[inline]
    pub(crate) fn load(&self) -> Snapshot {
        // Acquire: pairs with the Release of `compare_exchange`, so a reader that
        // sees a transition also sees the `tripped_at` stamped before it (invariant 3).
        Snapshot(self.word.load(Ordering::Acquire))
    }

    /// When the current state began (the trip while OPEN, the round start while HALF_OPEN).
    ///
    /// Call after [`load`](Self::load): the Acquire there makes this value at
    /// least as new as the stamp of the transition that `load` observed.
    #[inline]
    pub(crate) fn tripped_at(&self, s: Snapshot) -> Nanos {
        // At least the stamp of `s`'s transition: the Acquire load of the word
        // that returned `s` happens after it (invariant 3). Acquire here: pairs
        // with the Release stamp of a transition into s's generation + 2 (same
        // slot), so a re-load of the word after this read sees that the
        // breaker moved on (callers re-decide on a changed word).
        Nanos::from_nanos(self.stamp_of(s).load(Ordering::Acquire))
    }

    /// The slot holding the stamp of `s`'s generation.
    #[inline]
    fn stamp_of(&self, s: Snapshot) -> &AtomicU64 {
        &self.tripped_at[(s.generation() & 1) as usize]
    }

    /// The one CAS helper: every write of the word goes through here.
    ///
    /// A strong `compare_exchange` from an exact snapshot: exactly one of any
    /// number of racers from the same snapshot wins (invariant 1). On failure
    /// it returns the word it found, so callers can re-decide without a reload.
    #[inline]
    pub(crate) fn compare_exchange(
        &self,
        current: Snapshot,
        next: Snapshot,
    ) -> Result<(), Snapshot> {
        self.word
            // AcqRel on success: Release publishes `tripped_at` (stamped before)
            // to Acquire readers; Acquire orders this winner after earlier winners.
            // Acquire on failure: the returned word is then as good as a `load`.
            .compare_exchange(current.0, next.0, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(Snapshot)
    }

    /// A transition: stamps `tripped_at` with `now`, then publishes `next`.
    ///
    /// Invariant 3 (fresh `tripped_at`): the stamp is a `fetch_max` made
    /// *before* the Release CAS, so no reader can pair the new state with an
    /// older stamp. A loser's stamp can only move the time forward, by no more
    /// than the race itself lasted; it never moves it back.
    #[must_use = "a lost transition must not be reported"]
    pub(crate) fn transition(
        &self,
        current: Snapshot,
        next: Snapshot,
        now: Nanos,
    ) -> Result<(), Snapshot> {
        debug_assert_ne!(current.generation(), next.generation());
        // Release: published to word readers by the Release of the CAS below,
        // which it precedes; and to a stale reader of generation `current - 1`
        // (same slot) through its Acquire read, so its re-load of the word
        // sees `current` at least. A reader of `current` reads the other slot.
        self.stamp_of(next)
            .fetch_max(now.as_nanos(), Ordering::Release);
        self.compare_exchange(current, next)
    }
}

impl fmt::Debug for StateCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateCell")
            .field("word", &self.load())
            .field("tripped_at", &self.tripped_at(self.load()))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_at_their_limits() {
        for state in State::all() {
            for gen in [0, 1, u32::MAX - 1, u32::MAX] {
                for count in [0, 1, COUNT_MAX] {
                    for successes in [0, 1, SUCCESS_MAX] {
                        for trips in [0, 1, TRIPS_MAX] {
                            let s = Snapshot((gen as u64) << GEN_SHIFT)
                                .with_state(state)
                                .with_count(count)
                                .with_successes(successes)
                                .with_trips(trips);
                            assert_eq!(s.state(), state);
                            assert_eq!(s.generation(), gen);
                            assert_eq!(s.count(), count);
                            assert_eq!(s.successes(), successes);
                            assert_eq!(s.trips(), trips);
                            assert_eq!(s.next_generation().generation(), gen.wrapping_add(1));
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
            .with_trips(TRIPS_MAX + 1);
        assert_eq!(s.state(), State::HalfOpen);
        assert_eq!(s.count(), COUNT_MAX);
        assert_eq!(s.successes(), SUCCESS_MAX);
        assert_eq!(s.trips(), TRIPS_MAX);
        assert_eq!(s.generation(), 0);
    }

    #[test]
    fn generation_wraps_without_touching_other_fields() {
        let top = Snapshot((u32::MAX as u64) << GEN_SHIFT)
            .with_state(State::Open)
            .with_trips(7);
        let next = top.next_generation();
        assert_eq!(next.generation(), 0);
        assert_eq!(next.state(), State::Open);
        assert_eq!(next.trips(), 7);
    }

    #[test]
    fn enter_bumps_generation_and_clears_round_counts() {
        let s = Snapshot::INITIAL
            .with_count(3)
            .with_successes(2)
            .with_trips(4);
        let e = s.enter(State::Open);
        assert_eq!(e.state(), State::Open);
        assert_eq!(e.generation(), 1);
        assert_eq!((e.count(), e.successes(), e.trips()), (0, 0, 4));
    }

    #[test]
    fn transition_stamps_before_publishing_and_only_moves_forward() {
        let cell = StateCell::new();
        let s = cell.load();
        cell.transition(s, s.enter(State::Open), Nanos::from_secs(5))
            .unwrap();
        assert_eq!(cell.tripped_at(cell.load()), Nanos::from_secs(5));
        let s = cell.load();
        // A loser that decided on the same Closed word and meant the same
        // generation: its stamp lands in the slot readers of that generation
        // read, and must not pull it back.
        assert!(cell
            .transition(
                Snapshot::INITIAL,
                Snapshot::INITIAL.enter(State::Open),
                Nanos::from_secs(1)
            )
            .is_err());
        assert_eq!(
            cell.tripped_at(cell.load()),
            Nanos::from_secs(5),
            "a stamp never moves back"
        );
        assert_eq!(cell.load(), s, "a lost CAS changes nothing");
    }
}

/// Property tests of the encoding: every field at every value, not
/// only at the limits above.
#[cfg(test)]
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

    fn fields(s: Snapshot) -> (State, u32, u32, u32, u32) {
        (
            s.state(),
            s.generation(),
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
            count in field(COUNT_MAX),
            successes in field(SUCCESS_MAX),
            trips in field(TRIPS_MAX),
        ) {
            let (st, g, c, su, t) = fields(s);
            prop_assert_eq!(fields(s.with_state(state)), (state, g, c, su, t));
            prop_assert_eq!(fields(s.with_count(count)), (st, g, count.min(COUNT_MAX), su, t));
            prop_assert_eq!(
                fields(s.with_successes(successes)),
                (st, g, c, successes.min(SUCCESS_MAX), t)
            );
            prop_assert_eq!(fields(s.with_trips(trips)), (st, g, c, su, trips.min(TRIPS_MAX)));
            let same = s
                .with_state(st)
                .with_count(c)
                .with_successes(su)
                .with_trips(t);
            prop_assert_eq!(same.bits(), s.bits());
            prop_assert_eq!(s.is_closed(), st == State::Closed);
            prop_assert_eq!(s.is_open(), st == State::Open);
            prop_assert_eq!(s.is_half_open(), st == State::HalfOpen);
        }

        /// A word built field by field decodes to exactly those fields, for
        /// every generation (all 32 bits).
        #[test]
        fn a_word_decodes_to_the_fields_it_was_built_from(
            state in any_state(),
            generation in any::<u32>(),
            count in 0..=COUNT_MAX,
            successes in 0..=SUCCESS_MAX,
            trips in 0..=TRIPS_MAX,
        ) {
            let s = Snapshot(u64::from(generation) << GEN_SHIFT)
                .with_state(state)
                .with_count(count)
                .with_successes(successes)
                .with_trips(trips);
            prop_assert_eq!(fields(s), (state, generation, count, successes, trips));
        }

        /// The next generation (wrapping) changes only the generation;
        /// `enter` also sets the mode and clears the round counts, keeping trips.
        #[test]
        fn next_generation_and_enter_touch_only_their_fields(s in any_word(), to in any_state()) {
            let (st, g, c, su, t) = fields(s);
            prop_assert_eq!(fields(s.next_generation()), (st, g.wrapping_add(1), c, su, t));
            prop_assert_eq!(fields(s.enter(to)), (to, g.wrapping_add(1), 0, 0, t));
        }
    }
}

/// Mutation testing (`.cargo/mutants.toml`): the raw bits follow the layout
/// table in the module docs.
#[cfg(test)]
mod mutants_tests {
    use super::*;

    #[test]
    fn bits_follow_the_documented_layout() {
        assert_eq!(Snapshot::INITIAL.bits(), 0);
        let s = Snapshot::INITIAL
            .with_state(State::HalfOpen)
            .next_generation()
            .with_count(3)
            .with_successes(4)
            .with_trips(5);
        assert_eq!(s.bits(), 2 | (1 << 3) | (3 << 35) | (4 << 50) | (5 << 58));
        // `with_generation` replaces the generation and keeps every other field.
        let g = s.with_generation(u32::MAX);
        assert_eq!(g.generation(), u32::MAX);
        assert_eq!(
            (g.state(), g.count(), g.successes(), g.trips()),
            (State::HalfOpen, 3, 4, 5)
        );
    }
}
