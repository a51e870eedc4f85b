//! [`Breaker`]: admission, verdicts, lazy recovery and the manual modes.
//!
//! The breaker holds what a decision needs besides the word — the clock, the
//! window, the call counters, the observer and the trip gate — and composes
//! the pieces below it: every change of the state word goes through
//! [`StateCell::update`] with a pure decision from [`machine`]; everything
//! else here is a load, a window write, or a report of a transition this
//! caller won.
//!
//! [`machine`]: crate::machine

use core::fmt;
use core::time::Duration;

use crate::clock::{Clock, Nanos, QuantaClock};
use crate::counters::Counters;
use crate::error::{RejectReason, Rejected};
use crate::hooks::{Hooks, OnTransition};
use crate::machine::{self, Admission, Decided, TripAt};
use crate::observe::{BreakerSnapshot, Observer, Reason, Transition};
use crate::outcome::{Outcome, Verdict};
use crate::outlier::mark::{Evidence, Mark};
use crate::outlier::tally::{Counts, Tally};
use crate::outlier::{self, OutlierRule, Pool};
use crate::policy::{Config, Flags, SuccessPath};
use crate::ramp;
use crate::remote::RemoteTrip;
use crate::retry::{self, Rules};
use crate::state::{Next, Snapshot, State, StateCell, Updated};
use crate::storage::{Layout, PoolSlots, Storage};
use crate::sync::{Arc, AtomicU64, Ordering};
use crate::ticket::{RoundStart, Ticket, UNTIMED};
use crate::window::{self, Shape, Window, WindowCounts};

/// A budget of ejections shared by several breakers (a registry's cap on
/// open breakers), consulted only on transitions.
///
/// A trip from CLOSED first asks [`admit_trip`](Self::admit_trip); the
/// answer travels with the ejection in the state word (`counted`) until the
/// breaker leaves OPEN/HALF_OPEN, when [`on_transition`](Self::on_transition)
/// sees it go.
pub(crate) trait TripGate: Send + Sync + 'static {
    /// Before a trip from CLOSED: `None` refuses it (the breaker stays
    /// CLOSED); `Some(true)` reserved a slot of the budget; `Some(false)`
    /// allows it without one (a breaker never seen succeeding, whose
    /// ejection the budget does not count).
    fn admit_trip(&self, proven: bool) -> Option<bool>;
    /// The trip that reserved a slot lost its CAS: gives the slot back.
    fn cancel_trip(&self);
    /// After a published transition (a trip this gate admitted included).
    fn on_transition(&self, from: State, to: State, released_slot: bool);
}

/// What every breaker of one configuration shares: the validated config, the
/// clock, the observer and (in a registry) the trip gate.
pub(crate) struct Shared<C: Clock> {
    pub(crate) config: Config,
    /// `config.flags()`, computed once: each breaker built copies it.
    flags: Flags,
    pub(crate) clock: C,
    pub(crate) observer: Option<std::sync::Arc<dyn Observer>>,
    /// The transition hooks: this configuration's own, or (in a registry)
    /// the registry's, shared by all its configurations.
    pub(crate) hooks: std::sync::Arc<Hooks<Breaker<C>>>,
    gate: Option<std::sync::Arc<dyn TripGate>>,
    /// The outlier pool of a registry's key, if it has one.
    pool: Option<Arc<Pool>>,
    /// Where a pooled breaker's tally is in its storage (its mark is next).
    pool_at: usize,
    /// The pool's `⌈2⁶⁴ / interval⌉`, here so that a pooled call finds its
    /// interval without reading the pool.
    pool_per_nanos: u64,
    /// Where the retry budget's slots are in each breaker's storage (after
    /// the pool's, if any).
    retry_at: usize,
    /// The ratio retry budget's rules (zeros without one), here so that a
    /// first try finds them without matching the configuration's enum.
    ratio: retry::ratio::Ratio,
    /// The token retry budget's rules (zeros without one).
    tokens: retry::tokens::Tokens,
    /// What each breaker's storage starts with.
    layout: Layout,
}

impl<C: Clock> Shared<C> {
    pub(crate) fn new(
        config: Config,
        clock: C,
        observer: Option<std::sync::Arc<dyn Observer>>,
    ) -> Shared<C> {
        let config_shape_hints = (config.shape, config.remembers_hints);
        let config_retry = config.retry;
        let config_counts = config.count_calls;
        Shared {
            flags: config.flags(),
            config,
            clock,
            observer,
            hooks: std::sync::Arc::new(Hooks::new()),
            gate: None,
            pool: None,
            pool_at: 0,
            pool_per_nanos: 0,
            retry_at: Storage::retry_at(config_shape_hints.0, config_shape_hints.1, false),
            ratio: match config_retry {
                Some(Rules::Ratio(r)) => r,
                _ => Default::default(),
            },
            tokens: match config_retry {
                Some(Rules::Tokens(t)) => t,
                _ => Default::default(),
            },
            layout: Layout::new(
                config_counts,
                config_shape_hints.0,
                config_shape_hints.1,
                false,
                config_retry,
            ),
        }
    }

    /// Puts every breaker of this configuration in `pool` (a registry does
    /// this once, before any breaker exists): their verdicts take the
    /// general path, timed, to the pool's tally.
    pub(crate) fn with_pool(mut self, pool: Arc<Pool>) -> Shared<C> {
        self.flags = self.flags.in_pool();
        self.pool_per_nanos = pool.per_nanos();
        self.pool = Some(pool);
        self.pool_at = Storage::pool_at(self.config.shape, self.config.remembers_hints);
        self.retry_at = Storage::retry_at(self.config.shape, self.config.remembers_hints, true);
        self.layout = Layout::new(
            self.config.count_calls,
            self.config.shape,
            self.config.remembers_hints,
            true,
            self.config.retry,
        );
        self
    }

    /// Shares `hooks` (a registry's, for each configuration it builds).
    pub(crate) fn with_hooks(mut self, hooks: std::sync::Arc<Hooks<Breaker<C>>>) -> Shared<C> {
        self.hooks = hooks;
        self
    }

    /// Attaches a trip gate (a registry does this once, before any breaker
    /// exists).
    pub(crate) fn with_gate(mut self, gate: std::sync::Arc<dyn TripGate>) -> Shared<C> {
        self.gate = Some(gate);
        self
    }
}

/// A circuit breaker: a few atomics, no lock, no timer, no allocation per call.
///
/// ```
/// use failfast::{Breaker, ManualClock, Nanos, State};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let breaker = Breaker::builder()
///     .consecutive_failures(3)
///     .open_duration(Duration::from_secs(60))
///     .build_with_clock(clock.clone())?;
///
/// for _ in 0..3 {
///     let permit = breaker.try_acquire().expect("closed: admitted");
///     permit.failure(); // e.g. a 503
/// }
/// assert_eq!(breaker.state(), State::Open);
/// assert!(breaker.try_acquire().is_err()); // fails fast, nothing runs
///
/// clock.advance(Duration::from_secs(61));
/// let probe = breaker.try_acquire().expect("the first caller after the open time probes");
/// assert!(probe.is_probe());
/// probe.success();
/// assert_eq!(breaker.state(), State::Closed);
/// # Ok::<(), failfast::ConfigError>(())
/// ```
pub struct Breaker<C: Clock = QuantaClock> {
    /// The state word and its stamps (24 bytes).
    cell: StateCell,
    /// Call counters and window slots, one thin allocation (8 bytes).
    storage: Storage,
    /// The jitter seed (a registry's key hash, or a builder's id).
    id: u32,
    /// The configuration's hot-path bits and its success path (with a count
    /// window's size), copied here: one field of the breaker instead of a
    /// read through `shared`.
    flags: Flags,
    shared: Arc<Shared<C>>,
}

// A consecutive-policy breaker in 48 bytes: a registry entry with a short
// key then fits a smaller allocation class.
#[cfg(all(target_pointer_width = "64", not(failfast_loom)))]
const _: () = assert!(core::mem::size_of::<Breaker<QuantaClock>>() == 48);

impl<C: Clock> Breaker<C> {
    pub(crate) fn from_shared(shared: Arc<Shared<C>>, id: u32) -> Breaker<C> {
        let flags = shared.flags;
        let breaker = Breaker {
            cell: StateCell::new(),
            storage: Storage::new(&shared.layout),
            id,
            flags,
            shared,
        };
        if let Some((pool, slots)) = breaker.pool() {
            pool.joined();
            Tally(slots.tally).start(pool.epoch(breaker.shared.clock.now()));
        }
        breaker
    }

    /// Whether the breaker has a retry budget (one test of its own flags).
    #[inline(always)]
    pub(crate) fn has_retry_budget(&self) -> bool {
        self.flags.has_retry_budget()
    }

    /// The call counters, when kept.
    #[inline(always)]
    fn counters(&self) -> Option<Counters<'_>> {
        self.storage.counters(self.flags.counts_calls())
    }

    /// The outlier pool's slots, when the breaker is in one.
    #[inline(always)]
    fn pool_slots(&self) -> Option<PoolSlots<'_>> {
        self.pool().map(|(_, slots)| slots)
    }

    /// The outlier pool and this breaker's slots in it, when it is in one.
    #[inline(always)]
    fn pool(&self) -> Option<(&Pool, PoolSlots<'_>)> {
        let pool = self.shared.pool.as_deref()?;
        Some((pool, self.storage.pool_slots(self.shared.pool_at)?))
    }

    /// The window (empty without one).
    #[inline(always)]
    fn window(&self) -> Window<'_> {
        self.storage.window(self.shared.config.shape)
    }

    /// The validated configuration.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// The breaker's id: its jitter seed (for a registry's breaker, its
    /// key's hash), reported in each [`Transition`].
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Calls `hook` on every transition of this breaker from now on, named
    /// `upstream`, after the [`Observer`] and the hooks added before it.
    /// Whatever caused the transition: a verdict, a drop, a panic, an
    /// admission that starts a probe round, [`apply_remote_at`](Self::apply_remote_at),
    /// [`force_open`](Self::force_open) or [`reset`](Self::reset). See
    /// [`OnTransition`] for an example.
    ///
    /// A breaker of a [`Registry`](crate::Registry) shares its hooks with
    /// every breaker of the registry: a hook added here hears all of them,
    /// each named `upstream`. Add it with
    /// [`Registry::on_transition`](crate::Registry::on_transition) instead
    /// to hear each by its key.
    pub fn on_transition(&self, upstream: impl Into<std::sync::Arc<str>>, hook: impl OnTransition) {
        self.shared.hooks.keep(upstream.into(), hook);
    }

    /// The address of the configuration this breaker is built from (a
    /// registry tells its shared breakers by it).
    pub(crate) fn shared_address(&self) -> usize {
        &*self.shared as *const Shared<C> as usize
    }

    /// The hooks this breaker's transitions reach.
    #[cfg(feature = "tower")]
    pub(crate) fn hooks(&self) -> &std::sync::Arc<Hooks<Breaker<C>>> {
        &self.shared.hooks
    }

    /// The current time on the breaker's clock.
    #[inline(always)]
    pub fn now(&self) -> Nanos {
        self.shared.clock.now()
    }

    /// The wall-clock time on the breaker's clock ([`Clock::wall`]): what
    /// an upstream's hint dated in wall time is resolved against, before
    /// [`Permit::record_hinted`](crate::Permit::record_hinted).
    ///
    /// ```
    /// use failfast::hint::parse_retry_after;
    /// use failfast::{Breaker, ManualClock, Outcome};
    /// use std::time::{Duration, UNIX_EPOCH};
    ///
    /// let clock = ManualClock::new();
    /// clock.set_wall(UNIX_EPOCH + Duration::from_secs(784_111_777 - 90));
    /// let breaker = Breaker::builder()
    ///     .consecutive_failures(1)
    ///     .build_with_clock(clock)?;
    /// let hint = parse_retry_after(b"Sun, 06 Nov 1994 08:49:37 GMT")
    ///     .and_then(|hint| hint.delay(breaker.wall()));
    /// assert_eq!(hint, Some(Duration::from_secs(90)));
    /// breaker.try_acquire()?.record_hinted(Outcome::Failure, hint);
    /// let rejected = breaker.try_acquire().unwrap_err();
    /// assert!(rejected.retry_after() >= Some(Duration::from_secs(90))); // open for the hint
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wall(&self) -> std::time::SystemTime {
        self.shared.clock.wall()
    }

    /// [`now`](Self::now) with a panic of the clock (a caller's `Clock` may
    /// panic) caught: for the drops that read the clock, where a second panic
    /// while the thread already unwinds would abort the process.
    pub(crate) fn try_now(&self) -> Result<Nanos, Box<dyn core::any::Any + Send>> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.now()))
    }

    /// The current state (one atomic load).
    pub fn state(&self) -> State {
        self.cell.load().state()
    }

    /// The current generation (one atomic load).
    #[cfg(feature = "tower")]
    pub(crate) fn generation(&self) -> u32 {
        self.cell.load().generation()
    }

    /// Marks the breaker as a known upstream, as if a success had been
    /// recorded (the trip gate then counts its ejections).
    pub(crate) fn mark_proven(&self) {
        let _ = self.cell.update(Nanos::ZERO, |s| {
            if s.is_proven() {
                Next::Keep(())
            } else {
                Next::Count(s.with_proven(), ())
            }
        });
    }

    /// Takes the breaker out of its trip gate for good (a registry removed
    /// it while handles to it may live on): it keeps its whole behaviour for
    /// them, but no later transition touches the gate. Returns the state it
    /// left in and whether it held a slot of the gate's budget (the caller
    /// gives that back), or `None` if it had already left.
    pub(crate) fn leave_gate(&self) -> Option<(State, bool)> {
        let u = self.cell.update(Nanos::ZERO, machine::leave_gate);
        let was = u.value?;
        if self.flags.pooled() {
            self.leave_pool(was);
        }
        Some((was.state(), was.is_counted()))
    }

    /// Takes the breaker out of its outlier pool with the gate (the word
    /// `was` before it left): the pool counts it no more, gets back the
    /// place of an ejection it held, and hears none of its later
    /// transitions; it is judged no more. Then its drop changes nothing.
    fn leave_pool(&self, was: Snapshot) {
        let Some((pool, slots)) = self.pool() else {
            return;
        };
        self.end_ejection(pool, slots, was.generation(), None);
        pool.left(was.state());
    }

    /// Gives back the pool's place of the ejection that held generation
    /// `generation`, if the mark still names it: one CAS (again if another
    /// field changed under it), so whoever ends the ejection first gives the
    /// place back, once. `ended`: the interval it ends in, for the
    /// multiplier's decay (none when the breaker leaves its pool).
    fn end_ejection(&self, pool: &Pool, slots: PoolSlots<'_>, generation: u32, ended: Option<u64>) {
        let mut mark = slots.mark.load(Ordering::Acquire);
        while Mark(mark).names(generation) {
            let over = match ended {
                Some(epoch) => Mark(mark).ended(epoch),
                None => Mark(mark).without_ejection(),
            };
            match slots
                .mark
                .compare_exchange(mark, over.0, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    pool.release_ejection();
                    return;
                }
                Err(seen) => mark = seen,
            }
        }
    }

    /// Bytes this breaker occupies: the struct plus its window and counters on
    /// the heap (the shared config is not counted: one per registry).
    pub fn memory_bytes(&self) -> usize {
        core::mem::size_of::<Self>() + self.storage.heap_bytes()
    }

    // ===== Admission =====

    /// Admission reading the clock only where needed (invariant 8: CLOSED
    /// without slow-call timing is one load and no clock read).
    #[inline(always)]
    pub(crate) fn ticket_now(&self) -> Result<Ticket, Rejected> {
        let s = self.cell.load();
        if s.is_closed() {
            if self.flags.admits_bare() {
                // Nothing to time or count: the load was the whole admission.
                return Ok(Ticket::new(s.generation(), false, UNTIMED));
            }
            let start = if self.flags.dates_admission() {
                self.now()
            } else {
                UNTIMED
            };
            return Ok(self.admitted(Ticket::new(s.generation(), false, start)));
        }
        // One read of the shared pointer for the clock and the config: the
        // clock call would otherwise make the compiler read it again.
        let shared = &*self.shared;
        self.admit_other(s, shared.clock.now(), &shared.config)
    }

    /// Admission at `now`.
    #[inline(always)]
    pub(crate) fn ticket_at(&self, now: Nanos) -> Result<Ticket, Rejected> {
        let s = self.cell.load();
        if s.is_closed() {
            return Ok(self.admitted(Ticket::new(s.generation(), false, now)));
        }
        self.admit_other(s, now, &self.shared.config)
    }

    #[inline(always)]
    fn admitted(&self, ticket: Ticket) -> Ticket {
        if self.flags.counts_admissions() {
            self.count_admission(ticket.start);
        }
        ticket
    }

    /// [`admitted`](Self::admitted) out of line, as the admission's result.
    #[inline(never)]
    fn counted(&self, ticket: Ticket) -> Result<Ticket, Rejected> {
        Ok(self.admitted(ticket))
    }

    /// An admission's counts: the call counters', the outlier pool's tally,
    /// a ratio retry budget's deposit. Behind one test, so that the
    /// admission paths of breakers with none of them keep their one test
    /// (callgrind `ff_ramp`).
    #[inline(always)]
    fn count_admission(&self, start: Nanos) {
        // The deposit behind the counters' own test (now of either), so
        // that a pooled breaker's admission pays nothing for it (callgrind
        // `ff_pool_count`, `ff_pool_slow`); a ratio budget alone stops
        // after its deposit.
        if self.flags.counts_or_deposits() {
            if self.flags.ratio_budget() {
                // A budget beside counters or a pool out of line; a budget
                // alone in line (callgrind `ff_budget`, 6 fewer than a
                // call). Measured: no admission path without a budget
                // moves (`ff_consecutive_at`, `ff_std`).
                if self.flags.counts_or_pools() {
                    return self.deposit_and_count(start);
                }
                return self.deposit_only(start);
            }
            if let Some(c) = self.counters() {
                c.admitted();
            }
        }
        if self.flags.pooled() {
            self.pooled_call(start);
        }
    }

    /// A first try's deposit in the ratio budget, then the admission's
    /// other counts (out of line: see [`count_admission`](Self::count_admission)).
    #[inline(never)]
    fn deposit_and_count(&self, start: Nanos) {
        self.deposit(start);
        self.count_call(start);
    }

    /// A first try's deposit in the ratio budget, its admission's only
    /// count (in line: see [`count_admission`](Self::count_admission)).
    /// With no counters and no pool the budget's slots are the storage's
    /// last ([`Layout::new`]): found from its length, with one check and no
    /// read of `retry_at`.
    #[inline(always)]
    fn deposit_only(&self, start: Nanos) {
        let Some(slots) = self.storage.slots() else {
            return;
        };
        if let Some(last) = slots.body().last_chunk::<{ retry::ratio::SLOTS }>() {
            retry::ratio::Window::new(last).deposit(&self.shared.ratio, start);
        }
    }

    /// An admission's counts but the deposit: the call counters', the
    /// outlier pool's tally (a retry's admission counts so).
    #[inline(always)]
    fn count_call(&self, start: Nanos) {
        if let Some(c) = self.counters() {
            c.admitted();
        }
        if self.flags.pooled() {
            self.pooled_call(start);
        }
    }

    /// Counts a call admitted at `now` in the outlier pool's tally (a
    /// pooled breaker dates its admissions). The interval's first call
    /// rolls the tally, and the pool judges the interval it left.
    #[inline(always)]
    fn pooled_call(&self, now: Nanos) {
        let shared = &*self.shared;
        let Some(tally) = self.storage.slot(shared.pool_at) else {
            return;
        };
        if !Tally(tally).count(outlier::pool::epoch(now, shared.pool_per_nanos)) {
            // A tail call: the common case above saves no register for it.
            self.pooled_roll(now);
        }
    }

    /// The first call of an interval ([`pooled_call`](Self::pooled_call)'s
    /// rare case): rolls the tally, and the pool judges the interval it
    /// left.
    #[cold]
    #[inline(never)]
    fn pooled_roll(&self, now: Nanos) {
        if self.cell.load().is_detached() {
            return; // removed from its registry: out of its pool, judged no more
        }
        let Some((pool, slots)) = self.pool() else {
            return;
        };
        let epoch = pool.epoch(now);
        if let Some(counts) = Tally(slots.tally).roll(epoch) {
            self.judged(pool, slots, epoch, counts, now);
        }
    }

    /// Admission outside CLOSED. The commonest case, a breaker OPEN by its
    /// own trip without jitter and still in its open period, is decided here
    /// in line: the same decision as [`machine::admit`] makes for OPEN
    /// ([`machine::open_until`]), with the same re-load of the word before
    /// rejecting (see [`admit_loop`](Self::admit_loop)). Everything else — a
    /// remote trip's span, a jittered period (whose inline period is 0), the
    /// end of the period, the other modes — goes out of line.
    #[inline(always)]
    fn admit_other(&self, s: Snapshot, now: Nanos, config: &Config) -> Result<Ticket, Rejected> {
        if s.is_open_locally() {
            let open = config.backoff.inline_open_nanos(s.trips());
            // Wrapping: a `now` before the stamp (a caller's older time)
            // wraps to a huge elapsed time and goes out of line, where
            // `machine::admit` rejects it too; otherwise this is exactly
            // `since <= now < since + open`, with no overflow to saturate.
            let elapsed = now.as_nanos().wrapping_sub(self.cell.since(s).as_nanos());
            if elapsed < open && self.cell.load() == s {
                if let Some(c) = self.counters() {
                    c.rejected();
                }
                return Err(Rejected::open_for(open - elapsed));
            }
        }
        self.admit_slow(s, now)
    }

    /// Admission outside CLOSED and the in-line OPEN rejection. A ramping
    /// breaker's share is decided here on the word, with no CAS (the
    /// decision [`machine::admit`] makes for it); everything else, the
    /// ramp's end (a change of the word) included, goes to the CAS loop of
    /// [`admit_loop`](Self::admit_loop). Two functions, so that the ramp
    /// does not pay for the loop's registers.
    #[inline(never)]
    fn admit_slow(&self, s: Snapshot, now: Nanos) -> Result<Ticket, Rejected> {
        if s.is_ramping() {
            let since = self.cell.since(s);
            if let Next::Keep(Admission::Ramp(fraction, until)) =
                machine::ramp_admit(s, since, now, &self.shared.config)
            {
                return self.ramp_turn(s, fraction, until, now);
            }
        }
        self.admit_loop(s, now)
    }

    /// The jitter seed: the breaker's id.
    #[inline(always)]
    fn seed(&self) -> u64 {
        self.id.into()
    }

    /// Admission outside CLOSED: the decision is [`machine::admit`]; loops
    /// only while the word changes under it (someone else made progress),
    /// never to retry a lost election.
    #[inline(never)]
    fn admit_loop(&self, mut s: Snapshot, now: Nanos) -> Result<Ticket, Rejected> {
        loop {
            let config = &self.shared.config;
            let u = self.cell.update_from(s, now, |s| {
                machine::admit(s, self.cell.since(s), now, config, self.seed())
            });
            return match u.value {
                Admission::Call => Ok(self.admitted(Ticket::new(u.seen.generation(), false, now))),
                Admission::Probe => Ok(self.admitted(Ticket::new(u.seen.generation(), true, now))),
                Admission::Round(reason) => {
                    let to = u.entered.unwrap_or(u.seen);
                    Ok(self.start_round(u.seen, to, reason, now))
                }
                Admission::Ramp(fraction, until) => self.ramp_turn(u.seen, fraction, until, now),
                Admission::Reopened => {
                    let Some(to) = u.entered else {
                        s = self.cell.load();
                        continue;
                    };
                    self.report(
                        u.seen,
                        to,
                        Reason::ProbeAbandoned,
                        now,
                        WindowCounts::default(),
                    );
                    let until = machine::open_until(to, now, config, self.seed());
                    Err(self.reject(RejectReason::Open, until, now))
                }
                Admission::Reject(reason, until) => {
                    // The rejection was decided on a stamp read after `seen`,
                    // which may belong to a newer state (a racer that won the
                    // move to HalfOpen stamped its round start): before
                    // rejecting, re-decide on the current word rather than
                    // report a wait that belongs to a state the breaker left.
                    let current = self.cell.load();
                    if current != u.seen {
                        s = current;
                        continue;
                    }
                    if self.flags.pooled() && self.lifted(u.seen) {
                        // The pool panics: its outlier ejections let calls
                        // through (plain calls of the OPEN generation, which
                        // its verdicts do not move).
                        return Ok(self.admitted(Ticket::new(u.seen.generation(), false, now)));
                    }
                    Err(self.reject(reason, until, now))
                }
            };
        }
    }

    /// A call to a ramping breaker (word `s`): admitted when this thread's
    /// turn falls in the share `fraction`, else turned away until `until`.
    #[inline(always)]
    fn ramp_turn(
        &self,
        s: Snapshot,
        fraction: u32,
        until: Nanos,
        now: Nanos,
    ) -> Result<Ticket, Rejected> {
        if ramp::admits(ramp::next_turn(), self.id, fraction) {
            let ticket = Ticket::new(s.generation(), false, now);
            if self.flags.counts_admissions() {
                // A tail call: the ramp's admission of a breaker with no
                // counts saves no register for it (callgrind `ff_ramp`).
                return self.counted(ticket);
            }
            Ok(ticket)
        } else {
            Err(self.reject(RejectReason::Ramp, until, now))
        }
    }

    /// A rejection at `now`, counted, until `until`.
    #[inline(always)]
    fn reject(&self, reason: RejectReason, until: Nanos, now: Nanos) -> Rejected {
        if let Some(c) = self.counters() {
            c.rejected();
        }
        Rejected::until(reason, until, now)
    }

    /// Admits the first probe of a round this caller's CAS just started, and
    /// reports the transition.
    ///
    /// The round is complete before the observer runs (invariant 5): should
    /// the observer panic, the guard frees the probe slot this caller holds
    /// (as a neutral drop) while the panic unwinds, so the round stays open
    /// to the next request instead of waiting out the probe lease.
    #[cold]
    fn start_round(&self, from: Snapshot, to: Snapshot, reason: Reason, now: Nanos) -> Ticket {
        let round = if reason == Reason::OpenElapsed {
            RoundStart::Opened
        } else {
            RoundStart::Superseded
        };
        let ticket = self.admitted(Ticket::round_start(
            to.generation(),
            round,
            from.trips(),     // ≤ TRIPS_MAX (63)
            from.successes(), // ≤ SUCCESS_MAX (255)
            now,
        ));
        let guard = ReleaseOnUnwind {
            breaker: self,
            ticket,
        };
        self.report(from, to, reason, now, WindowCounts::default());
        core::mem::forget(guard);
        ticket
    }

    /// The transition an admission caused, rebuilt exactly as the observer saw it.
    pub(crate) fn admission_transition(&self, ticket: &Ticket) -> Option<Transition> {
        let (state, reason) = match ticket.round() {
            RoundStart::None => return None,
            RoundStart::Opened => (State::Open, Reason::OpenElapsed),
            RoundStart::Superseded => (State::HalfOpen, Reason::ProbeLeaseExpired),
        };
        let from = Snapshot::INITIAL
            .with_generation(ticket.generation().wrapping_sub(1))
            .with_state(state)
            .with_trips(ticket.trips())
            .with_successes(ticket.prior_successes());
        Some(self.describe(
            from,
            machine::round_start(from),
            reason,
            ticket.start,
            WindowCounts::default(),
        ))
    }

    // ===== Retry budget =====

    /// The retry budget's first `N` slots, from `retry_at`.
    #[inline(always)]
    fn retry_slots<const N: usize>(&self, retry_at: usize) -> Option<&[AtomicU64; N]> {
        self.storage
            .slots()?
            .body()
            .get(retry_at..retry_at + N)?
            .try_into()
            .ok()
    }

    /// The ratio budget's rules and slots, when the breaker has one.
    #[inline(always)]
    fn ratio_window(&self) -> Option<(&retry::ratio::Ratio, retry::ratio::Window<'_>)> {
        if !self.flags.ratio_budget() {
            return None;
        }
        let shared = &*self.shared;
        let slots = self.retry_slots(shared.retry_at)?;
        Some((&shared.ratio, retry::ratio::Window::new(slots)))
    }

    /// The token bucket's rules and slot, when the breaker has one.
    #[inline(always)]
    fn token_bucket(&self) -> Option<(retry::tokens::Tokens, retry::tokens::Bucket<'_>)> {
        if !self.flags.token_budget() {
            return None;
        }
        self.bucket_slot()
    }

    /// [`token_bucket`](Self::token_bucket) past its flag test, for a
    /// caller that made it.
    #[inline(always)]
    fn bucket_slot(&self) -> Option<(retry::tokens::Tokens, retry::tokens::Bucket<'_>)> {
        let shared = &*self.shared;
        let [slot] = self.retry_slots(shared.retry_at)?;
        Some((shared.tokens, retry::tokens::Bucket(slot)))
    }

    /// A first try admitted at `now` deposits its share of a retry.
    #[inline(always)]
    fn deposit(&self, now: Nanos) {
        let shared = &*self.shared;
        if let Some(slots) = self.retry_slots(shared.retry_at) {
            retry::ratio::Window::new(slots).deposit(&shared.ratio, now);
        }
    }

    /// The count of retries the budget refused, when the breaker counts
    /// calls (its slot follows the budget's).
    fn refused_slot(&self) -> Option<&AtomicU64> {
        let shared = &*self.shared;
        let rules = shared.config.retry?;
        if !self.flags.counts_calls() {
            return None;
        }
        self.storage.slot(shared.retry_at + rules.slots())
    }

    /// Retries the budget refused so far (0 without counters or a budget).
    fn retries_refused(&self) -> u64 {
        // Relaxed: a statistic, as the call counters.
        self.refused_slot()
            .map_or(0, |slot| slot.load(Ordering::Relaxed))
    }

    /// What the budget has room for at `now`, changing nothing: retries
    /// (ratio) or failures before retries stop (tokens); `None` without a
    /// budget.
    pub(crate) fn retry_room(&self, now: Nanos) -> Option<u32> {
        if let Some((rules, window)) = self.ratio_window() {
            return Some(window.room(rules, now));
        }
        let (rules, bucket) = self.token_bucket()?;
        Some(rules.room(bucket.load()))
    }

    /// A retry's admission at `now`, with the budget on: the breaker's
    /// admission (its rejections first), the upstream's remembered hint,
    /// then the budget's room. In CLOSED the breaker admits without a
    /// change, so the budget is asked first and a refusal creates no
    /// permit: the common case, a Closed breaker with room and no hint,
    /// is decided here in line; everything else goes out of line
    /// ([`retry_slow`](Self::retry_slow)).
    #[inline(always)]
    pub(crate) fn retry_ticket(&self, now: Nanos) -> Result<Ticket, Rejected> {
        let s = self.cell.load();
        if s.is_closed() && !self.flags.remembers_hints() {
            let room = match self.ratio_window() {
                Some((rules, window)) => window.withdraw(rules, now, retry::ratio::RETRY),
                None => self
                    .token_bucket()
                    .is_some_and(|(rules, bucket)| rules.allows(bucket.load())),
            };
            if room {
                self.count_call(now);
                return Ok(Ticket::new(s.generation(), false, now));
            }
        }
        self.retry_slow(s, now)
    }

    /// A retry's ticket at `now`: through the budget when the breaker has
    /// one ([`retry_ticket`](Self::retry_ticket)), else as any call's
    /// ([`ticket_at`](Self::ticket_at)).
    #[inline]
    pub(crate) fn retry_or_call_ticket(&self, now: Nanos) -> Result<Ticket, Rejected> {
        if self.has_retry_budget() {
            self.retry_ticket(now)
        } else {
            self.ticket_at(now)
        }
    }

    /// [`retry_ticket`](Self::retry_ticket) past its common case: a
    /// refusal in CLOSED, a remembered hint, any other state. Outside
    /// CLOSED the breaker's admission comes first (it may start a probe
    /// round), and a refusal by the hint or the budget releases its permit
    /// as a neutral drop (its slot freed, nothing judged) and takes back
    /// the admission's deposit.
    #[inline(never)]
    fn retry_slow(&self, s: Snapshot, now: Nanos) -> Result<Ticket, Rejected> {
        if s.is_closed() {
            if self.flags.remembers_hints() {
                if let Some(refused) = self.retry_refusal(now, 0) {
                    return Err(refused);
                }
                self.count_call(now);
                return Ok(Ticket::new(s.generation(), false, now));
            }
            // The budget refused in line: counted, with its wait.
            return Err(self.budget_refusal(now));
        }
        let ticket = self.admit_other(s, now, &self.shared.config)?;
        // The admission counted as a first try's: a ratio budget took its
        // deposit, which the retry gives back with its withdrawal.
        let deposited = self.ratio_window().map_or(0, |(rules, _)| rules.deposit);
        match self.retry_refusal(now, deposited) {
            None => Ok(ticket),
            Some(refused) => {
                if let Some((rules, window)) = self.ratio_window() {
                    window.undeposit(rules);
                }
                self.drop_neutral(ticket);
                Err(refused)
            }
        }
    }

    /// Whether the hint or the budget refuses a retry at `now` (`None`: it
    /// may go, and a ratio budget withdrew one retry plus `extra`
    /// milli-retries); the refusal is counted.
    fn retry_refusal(&self, now: Nanos, extra: u64) -> Option<Rejected> {
        // A remembered hint: the upstream asked for no call before it ends.
        if let (_, Some(left)) = self.remembered_hint(now) {
            return Some(self.refuse_retry(now.saturating_add(left), now));
        }
        if let Some((rules, window)) = self.ratio_window() {
            if window.withdraw(rules, now, retry::ratio::RETRY + extra) {
                return None;
            }
            return Some(self.budget_refusal(now));
        }
        if let Some((rules, bucket)) = self.token_bucket() {
            if !rules.allows(bucket.load()) {
                return Some(self.budget_refusal(now));
            }
        }
        None
    }

    /// The budget's refusal at `now`, counted: until the current half of a
    /// ratio budget's TTL ends (expiring withdrawals may make room then);
    /// with no known wait for a token budget (only a success refills it).
    #[cold]
    fn budget_refusal(&self, now: Nanos) -> Rejected {
        let until = match self.ratio_window() {
            Some((rules, _)) => rules.half_end(now),
            None => Nanos::NEVER,
        };
        self.refuse_retry(until, now)
    }

    /// A retry refused by the budget (or a remembered hint) at `now`, until
    /// `until`, counted.
    #[cold]
    fn refuse_retry(&self, until: Nanos, now: Nanos) -> Rejected {
        if let Some(slot) = self.refused_slot() {
            // Relaxed: a statistic.
            slot.fetch_add(1, Ordering::Relaxed);
        }
        self.reject(RejectReason::RetryBudget, until, now)
    }

    // ===== Verdicts =====

    /// A permit's verdict that came with an upstream's hint ("do not come
    /// back for `hint`", from a `Retry-After` or a gRPC pushback). If this
    /// verdict trips the breaker (or fails its probe), the hint travels
    /// with it to the trip, which opens for at least the hint, clamped to
    /// [the schedule's step, [`max_hint`](crate::Builder::max_hint)]: no
    /// memory is needed for that. With [`hints`](crate::Builder::hints) the
    /// hint is also remembered until it has elapsed, and lengthens the next
    /// trip if this verdict does not trip. A hint never rejects a call
    /// while the breaker is Closed. Without a hint, or with hints off, this
    /// is [`on_verdict`](Self::on_verdict).
    pub(crate) fn on_hinted_verdict(
        &self,
        ticket: Ticket,
        outcome: Outcome,
        now: Nanos,
        hint: Option<Duration>,
    ) -> Option<Transition> {
        match self.taken_hint(hint) {
            None => self.on_verdict(ticket, outcome, now),
            Some(hint) => {
                self.remember_hint(now, hint);
                self.on_any_hinted_verdict(ticket, outcome, now, hint)
            }
        }
    }

    /// A layer's verdict that came with the upstream's hint
    /// ([`OwnedPermit::record_hinted_at_or_now`](crate::OwnedPermit)): as
    /// [`on_hinted_verdict`](Self::on_hinted_verdict), and for a stream
    /// (its head came) as [`on_ending`](Self::on_ending) judges it, slow if
    /// its head was. Out of line, off the path of the verdicts without one.
    #[cfg(feature = "tower")]
    #[inline(never)]
    pub(crate) fn on_layer_hint(
        &self,
        ticket: Ticket,
        outcome: Outcome,
        now: Nanos,
        hint: Duration,
    ) -> Option<Transition> {
        if !ticket.is_answered() {
            return self.on_hinted_verdict(ticket, outcome, now, Some(hint));
        }
        match self.taken_hint(Some(hint)) {
            Some(hint) => {
                self.remember_hint(now, hint);
                self.on_hinted_ending(ticket, outcome.into(), now, hint)
            }
            None => self.on_ending(ticket, outcome.into(), now),
        }
    }

    /// `hint`, unless hints are off.
    #[inline]
    pub(crate) fn taken_hint(&self, hint: Option<Duration>) -> Option<Duration> {
        hint.filter(|_| self.shared.config.max_hint.is_some())
    }

    /// Keeps an upstream's hint until `now + hint` (capped at `max_hint`)
    /// when the breaker remembers hints: the latest hint wins, even a
    /// shorter one.
    pub(crate) fn remember_hint(&self, now: Nanos, hint: Duration) {
        let config = &self.shared.config;
        let (Some(max), Some(slot)) = (
            config.max_hint,
            self.storage.hint_slot(config.shape, config.remembers_hints),
        ) else {
            return;
        };
        let until = now.saturating_add(hint.min(max));
        // Relaxed: the slot is a value of its own, read by the next trip
        // with no other memory to order; a racing hint may win either way
        // (both are the upstream's latest word).
        slot.store(until.as_nanos(), crate::sync::Ordering::Relaxed);
    }

    /// The remembered hint as read (its end, 0 when none), and what is
    /// left of it at `now`, if anything.
    fn remembered_hint(&self, now: Nanos) -> (u64, Option<Duration>) {
        let Some(slot) = self
            .storage
            .hint_slot(self.shared.config.shape, self.shared.config.remembers_hints)
        else {
            return (0, None);
        };
        // Relaxed: see `remember_hint`.
        let until = Nanos::from_nanos(slot.load(crate::sync::Ordering::Relaxed));
        let left = (until > now).then(|| until.saturating_duration_since(now));
        (until.as_nanos(), left)
    }

    /// A trip took the remembered hint that ends at `until` (as it read the
    /// slot): it lengthens only that trip. Only that hint is cleared: one
    /// stored after the trip read the slot lengthens the next trip (a plain
    /// store of 0 would lose it, having lengthened none).
    fn forget_hint(&self, until: u64) {
        if let (Some(slot), true) = (
            self.storage
                .hint_slot(self.shared.config.shape, self.shared.config.remembers_hints),
            until != 0,
        ) {
            // Relaxed: see `remember_hint`; a failed exchange means a newer hint.
            let _ = slot.compare_exchange(
                until,
                0,
                crate::sync::Ordering::Relaxed,
                crate::sync::Ordering::Relaxed,
            );
        }
    }

    /// A permit's verdict. Invariant 4: a verdict from another generation than
    /// the current one changes nothing.
    #[inline(always)]
    pub(crate) fn on_verdict(
        &self,
        ticket: Ticket,
        outcome: Outcome,
        now: Nanos,
    ) -> Option<Transition> {
        if outcome == Outcome::Success {
            return self.on_success(ticket, Some(now));
        }
        self.on_any_verdict(ticket, outcome, now)
    }

    /// A success, at `now` or (`None`) at the time
    /// [`verdict_time`](Self::verdict_time) gives it, by the path the
    /// configuration chose at build ([`SuccessPath`]). Invariant 8: in a
    /// settled CLOSED breaker, each path but the general one is one load of
    /// the word and a compare, plus the window's write.
    #[inline(always)]
    pub(crate) fn on_success(&self, ticket: Ticket, mut now: Option<Nanos>) -> Option<Transition> {
        match self.flags.success_path() {
            SuccessPath::Plain => return self.on_plain_success(ticket, now),
            SuccessPath::Count(size) => {
                if self.cell.load().is_settled_closed_in(ticket.generation()) {
                    // The ring needs no time: `now` is not read.
                    self.storage
                        .window(Shape::Count { size })
                        .record(Nanos::ZERO, false, false);
                    return None;
                }
            }
            SuccessPath::Time => {
                let at = match now {
                    Some(now) => now,
                    None => self.now(),
                };
                now = Some(at);
                if self.cell.load().is_settled_closed_in(ticket.generation()) {
                    // The path is taken only with a time window, whose
                    // width is in its slots: a call in the current epoch
                    // reads nothing through `shared`, only one that rotates
                    // asks it for B (measured when it was added, 8a9d9b7:
                    // callgrind `ff_time` 94 -> 90, `ff_time_at` 79 -> 75).
                    // Not `self.window()`: its match over every shape cost
                    // this path 3 instructions (104 -> 107, before the
                    // packed epoch).
                    let buckets = || match self.shared.config.shape {
                        Shape::Time { buckets, .. } => buckets.get(),
                        _ => 1, // never: the path is the time window's
                    };
                    if let Some(slots) = self.storage.slots() {
                        window::time::record(slots, buckets, at, false, false);
                    }
                    return None;
                }
            }
            SuccessPath::General => {}
        }
        // The general path, and a window-only success that is news (it
        // re-reads the word, as a verdict a moment later would).
        let now = match now {
            Some(now) => now,
            None => self.verdict_time(ticket, Outcome::Success),
        };
        self.on_any_verdict(ticket, Outcome::Success, now)
    }

    /// The time a verdict without one is recorded at: now when it needs the
    /// time (the call is timed or lands in a time window, or the verdict can
    /// cause a transition: a failure, or any probe verdict, whose stamp must
    /// be the real time), else the admission's (no clock read).
    #[inline(always)]
    pub(crate) fn verdict_time(&self, ticket: Ticket, outcome: Outcome) -> Nanos {
        if outcome == Outcome::Failure || ticket.is_probe() || self.flags.records_need_time() {
            self.now()
        } else {
            ticket.start
        }
    }

    /// [`on_verdict`](Self::on_verdict) past the success paths: any outcome
    /// (the general path's success included).
    #[inline(always)]
    pub(crate) fn on_any_verdict(
        &self,
        ticket: Ticket,
        outcome: Outcome,
        now: Nanos,
    ) -> Option<Transition> {
        self.any_verdict(ticket, outcome, now, None)
    }

    /// [`on_any_verdict`](Self::on_any_verdict) with the upstream's hint,
    /// which a trip this verdict causes opens for: out of line, so the
    /// verdicts without one keep their paths as they were.
    #[inline(never)]
    fn on_any_hinted_verdict(
        &self,
        ticket: Ticket,
        outcome: Outcome,
        now: Nanos,
        hint: Duration,
    ) -> Option<Transition> {
        self.any_verdict(ticket, outcome, now, Some(hint))
    }

    /// The general verdict path, with the upstream's hint if any.
    #[inline(always)]
    fn any_verdict(
        &self,
        ticket: Ticket,
        outcome: Outcome,
        now: Nanos,
        hint: Option<Duration>,
    ) -> Option<Transition> {
        let slow = !matches!(outcome, Outcome::Ignored | Outcome::Neutral)
            && self.flags.times_calls()
            && self.shared.config.is_slow(ticket.start, now);
        if self.flags.counts_verdicts() {
            self.count(ticket, outcome.into(), slow);
        }
        let s = self.cell.load();
        if s.generation() != ticket.generation() {
            return None;
        }
        // Invariant 8: a fast success in a settled CLOSED breaker is this
        // load plus the window's write.
        if outcome == Outcome::Success && !slow && s.is_settled_closed() {
            if self.flags.has_window() {
                self.window().record(now, false, false);
            }
            return None;
        }
        match hint {
            None => self.settle(s, ticket.is_probe(), outcome.into(), slow, now),
            Some(hint) => self.settle_hinted(s, ticket.is_probe(), outcome.into(), slow, now, hint),
        }
    }

    /// A verdict for the call counters, the token bucket and the outlier
    /// pool's tally, the breakers that keep any of them. A fast success has
    /// nothing for the tally (its call was counted at admission).
    #[inline(always)]
    fn count(&self, ticket: Ticket, verdict: Verdict, slow: bool) {
        // The bucket behind the counters' own test (now of either), so
        // that a pooled breaker's verdict pays nothing for it (callgrind
        // `ff_pool_count`, `ff_pool_slow`); a pooled breaker's bucket
        // moves as any other's.
        if self.flags.pooled() && (slow || verdict != Verdict::Success) {
            self.pooled_verdict(ticket.start, verdict, slow);
        }
        if self.flags.counts_or_tokens() {
            if let Some(c) = self.counters() {
                c.verdict(verdict, slow);
            }
            if self.flags.token_budget() {
                if verdict == Verdict::Success && !slow {
                    self.token_success();
                } else {
                    self.token_verdict(verdict, slow);
                }
            }
        }
    }

    /// A verdict moves the token bucket.
    #[inline(never)]
    fn token_verdict(&self, verdict: Verdict, slow: bool) {
        if let Some((rules, bucket)) = self.bucket_slot() {
            bucket.verdict(rules, verdict, slow);
        }
    }

    /// A fast success refills the token bucket: out of line, apart from
    /// the other verdicts, so that a full bucket (the healthy host's) costs
    /// one load and one compare behind the call; the caller has tested the
    /// budget's flag.
    #[inline(never)]
    fn token_success(&self) {
        if let Some((rules, bucket)) = self.bucket_slot() {
            bucket.verdict(rules, Verdict::Success, false);
        }
    }

    /// A pooled call's verdict other than a fast success: its failure and
    /// slowness added to the interval it was admitted in, or the call taken
    /// back when the verdict counts nothing.
    #[cold]
    #[inline(never)]
    fn pooled_verdict(&self, start: Nanos, verdict: Verdict, slow: bool) {
        let Some((pool, slots)) = self.pool() else {
            return;
        };
        let tally = Tally(slots.tally);
        let epoch = pool.epoch(start);
        if verdict.counts() {
            tally.outcome(epoch, verdict.is_failure(), slow);
        } else {
            tally.uncount(epoch);
        }
    }

    /// This breaker rolled its tally out of interval `epoch − 1` with
    /// `counts`: the pool adds them and judges it, with the evidence its
    /// mark keeps; an enforced outlier is ejected (the admission that
    /// rolled still runs: the ejection rejects the calls after it; every
    /// hook and the observer see it).
    #[cold]
    #[inline(never)]
    fn judged(&self, pool: &Pool, slots: PoolSlots<'_>, epoch: u64, counts: Counts, now: Nanos) {
        // Relaxed: the evidence is this host's own, read back by its next
        // roll; the CAS that wrote it ordered it with every other change.
        let before = Mark(slots.mark.load(Ordering::Relaxed)).evidence();
        let (rule, after) = pool.roll(self.id, epoch, counts, before);
        if after != before {
            remember(slots, after);
        }
        if let Some(rule) = rule {
            self.eject(pool, slots, rule, epoch, now);
        }
    }

    /// Ejects this breaker as an outlier by `rule` in interval `epoch`:
    /// CLOSED → OPEN, if the pool's cap and panic mode allow it and the trip
    /// gate admits it, for the pool's ejection time.
    ///
    /// The mark (the OPEN word's generation, the rule, the ejection's
    /// multiplier) is set before the trip's CAS, so that whatever moves the
    /// breaker out of that generation finds it and gives the pool's place
    /// back; a trip that does not happen takes its own mark back.
    ///
    /// If another trip (a failure's, a forced open) wins that generation
    /// instead, the mark names an ordinary OPEN until this call takes it
    /// back a moment later: in that moment a panicking pool would let a
    /// call through it. The place is given back once either way (the mark
    /// is cleared by CAS).
    fn eject(
        &self,
        pool: &Pool,
        slots: PoolSlots<'_>,
        rule: OutlierRule,
        epoch: u64,
        now: Nanos,
    ) -> Option<Transition> {
        let s = self.cell.load();
        // A breaker its registry removed is in no pool any more.
        if s.state() != State::Closed || s.is_detached() || !pool.reserve_ejection() {
            return None;
        }
        let generation = s.enter(State::Open).generation();
        let rules = pool.rules();
        // AcqRel: the mark is published before the trip's CAS, which a
        // reader of the word then acquires with it; a CAS, so that a racing
        // end of an earlier ejection is either before it or finds it.
        let mut old = slots.mark.load(Ordering::Acquire);
        let mark = loop {
            let m = Mark(old);
            let new = m.ejected(generation, rule, rules.next_times(m.times_at(epoch)));
            match slots
                .mark
                .compare_exchange(old, new.0, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break new,
                Err(seen) => old = seen,
            }
        };
        if Mark(old).rule().is_some() {
            // An earlier ejection whose generation this CLOSED breaker has
            // left, its end still on its way: replaced here, so its place
            // is given back here (its own CAS finds the mark changed).
            pool.release_ejection();
        }
        let reason = match rule {
            OutlierRule::Slow => Reason::SlowOutlier,
            _ => Reason::Outlier,
        };
        let counts = self.window().counts(now);
        let span = rules.ejection_nanos(mark.times());
        let why = Why {
            reason,
            decided: Decided::Outlier(span),
            hint: None,
        };
        let t = self.trip(s.generation(), why, now, counts, s);
        if t.is_some_and(|t| t.to == State::Open) {
            pool.enforced(rule);
            return t;
        }
        // No trip (the word moved, or the gate refused): the mark is ours
        // to take back as it was, unless something already ended it.
        let mut current = mark.0;
        while Mark(current).names(generation) {
            match slots.mark.compare_exchange(
                current,
                Mark(old).without_ejection().0,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    pool.release_ejection();
                    break;
                }
                Err(seen) => current = seen,
            }
        }
        t
    }

    /// Whether a call to this breaker (word `s`) is let through by its
    /// pool's panic: the breaker is OPEN by its outlier ejection and the
    /// pool has too few healthy hosts.
    #[cold]
    fn lifted(&self, s: Snapshot) -> bool {
        let Some((pool, slots)) = self.pool() else {
            return false;
        };
        s.is_open()
            && Mark(slots.mark.load(Ordering::Acquire)).names(s.generation())
            && pool.panicking()
    }

    /// A published transition of a pooled breaker at `now`: the pool's
    /// health count, and the end of an outlier ejection (the mark of the
    /// generation left).
    fn left_generation(&self, from: Snapshot, to: Snapshot, now: Nanos) {
        let Some((pool, slots)) = self.pool() else {
            return;
        };
        pool.on_transition(from.state(), to.state());
        self.end_ejection(pool, slots, from.generation(), Some(pool.epoch(now)));
    }

    /// A success on the plainest breaker (no window, no timing, no
    /// counters): when it ends no run, one load and one compare (invariant
    /// 8). It needs the time only when it is news (a probe's success, the
    /// end of a failure run), so without `now` the clock is read only then.
    #[inline(always)]
    pub(crate) fn on_plain_success(
        &self,
        ticket: Ticket,
        now: Option<Nanos>,
    ) -> Option<Transition> {
        let s = self.cell.load();
        if s.generation() != ticket.generation() || s.is_settled_closed() {
            return None;
        }
        self.settle_success(s, ticket.is_probe(), now)
    }

    /// [`settle`](Self::settle) for a plain success that is news.
    #[inline(never)]
    fn settle_success(&self, s: Snapshot, probe: bool, now: Option<Nanos>) -> Option<Transition> {
        let now = now.unwrap_or_else(|| self.now());
        self.settle(s, probe, Verdict::Success, false, now)
    }

    /// How a call that got no verdict ended (see [`on_drop`](Self::on_drop)),
    /// recorded like a verdict. Out of line: only drops come here, and the
    /// verdict paths above stay as short as they were.
    ///
    /// A ticket whose response head came ([`Ticket::is_answered`]: a stream
    /// judged by its progress) is slow when its head was, whenever it ends.
    #[inline(never)]
    pub(crate) fn on_ending(
        &self,
        ticket: Ticket,
        verdict: Verdict,
        now: Nanos,
    ) -> Option<Transition> {
        self.ending(ticket, verdict, now, None)
    }

    /// [`on_ending`](Self::on_ending) with the upstream's hint (a stream's
    /// verdict that came with one), which a trip it causes opens for.
    #[cfg(feature = "tower")]
    #[inline(never)]
    pub(crate) fn on_hinted_ending(
        &self,
        ticket: Ticket,
        verdict: Verdict,
        now: Nanos,
        hint: Duration,
    ) -> Option<Transition> {
        self.ending(ticket, verdict, now, Some(hint))
    }

    /// How a call ended, with the upstream's hint if any.
    #[inline(always)]
    fn ending(
        &self,
        ticket: Ticket,
        verdict: Verdict,
        now: Nanos,
        hint: Option<Duration>,
    ) -> Option<Transition> {
        let slow = match verdict {
            Verdict::Ignored | Verdict::Neutral | Verdict::Dropped | Verdict::Unanswered => false,
            Verdict::AbandonedSlow => true,
            _ if ticket.is_answered() => ticket.head_was_slow(),
            _ => self.shared.config.is_slow(ticket.start, now),
        };
        if self.flags.counts_verdicts() {
            self.count(ticket, verdict, slow);
        }
        let s = self.cell.load();
        if s.generation() != ticket.generation() {
            return None;
        }
        match hint {
            None => self.settle(s, ticket.is_probe(), verdict, slow, now),
            Some(hint) => self.settle_hinted(s, ticket.is_probe(), verdict, slow, now, hint),
        }
    }

    /// Every verdict but the cheapest: failures, runs to end, a first
    /// success, probes, MetricsOnly.
    #[inline(never)]
    fn settle(
        &self,
        s: Snapshot,
        probe: bool,
        verdict: Verdict,
        slow: bool,
        now: Nanos,
    ) -> Option<Transition> {
        self.settle_with(s, probe, verdict, slow, now, None)
    }

    /// [`settle`](Self::settle) for a verdict that came with the
    /// upstream's hint.
    #[inline(never)]
    fn settle_hinted(
        &self,
        s: Snapshot,
        probe: bool,
        verdict: Verdict,
        slow: bool,
        now: Nanos,
        hint: Duration,
    ) -> Option<Transition> {
        self.settle_with(s, probe, verdict, slow, now, Some(hint))
    }

    #[inline(always)]
    fn settle_with(
        &self,
        s: Snapshot,
        probe: bool,
        verdict: Verdict,
        slow: bool,
        now: Nanos,
        hint: Option<Duration>,
    ) -> Option<Transition> {
        match s.state() {
            State::Closed | State::MetricsOnly => self.record_closed(s, verdict, slow, now, hint),
            State::HalfOpen if probe => self.record_probe(s, verdict, slow, now, hint),
            _ => None,
        }
    }

    /// A permit dropped without a verdict: judged by how the call ended (the
    /// table on [`Verdict`]). A panic unwinding through the permit is a
    /// failure; a drop after the call hung (the slow-call threshold, or
    /// `abandoned_after`) counts against the dependency, and an abandoned
    /// probe fails its round; an earlier drop proves nothing either way: it
    /// frees a probe's slot (invariant 5) and changes nothing else.
    ///
    /// Only this path reads the clock for a drop; a verdict never pays for it.
    ///
    /// The clock is the caller's and may panic (here, or in the verdict whose
    /// panic is now unwinding through the permit). Then there is no time to
    /// judge the call by: it is neutral, so a probe's slot is freed, and the
    /// clock's panic goes on — unless the thread already unwinds, where a
    /// second panic escaping this drop would abort the process.
    #[cold]
    pub(crate) fn on_drop(&self, ticket: Ticket) {
        let panicking = std::thread::panicking();
        if ticket.start == UNTIMED && !panicking {
            // Its age is unknown: neutral, and no clock read.
            return self.drop_neutral(ticket);
        }
        let now = match self.try_now() {
            Ok(now) => now,
            Err(panic) => {
                // A neutral drop runs no user code (it frees a slot and
                // counts), so it cannot panic in turn.
                self.drop_neutral(ticket);
                if !panicking {
                    std::panic::resume_unwind(panic);
                }
                return;
            }
        };
        let verdict = self.judge_drop(ticket, now, panicking);
        if verdict == Verdict::Dropped {
            return self.drop_neutral(ticket);
        }
        if panicking {
            // The observer runs on this thread while it already unwinds: a
            // second panic escaping this drop would abort the process. The
            // transition is complete before the observer runs, so swallowing
            // the observer's panic loses nothing of the breaker's state.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.on_ending(ticket, verdict, now)
            }));
        } else {
            let _ = self.on_ending(ticket, verdict, now);
        }
    }

    /// What a permit with `ticket`, dropped without a verdict at `now`,
    /// tells about the dependency (pure; the table on [`Verdict`]): by its
    /// age since admission, or, once its response head came, by how long no
    /// bytes had come ([`Config::judge_stream_drop`]).
    pub(crate) fn judge_drop(&self, ticket: Ticket, now: Nanos, panicking: bool) -> Verdict {
        let config = &self.shared.config;
        if ticket.is_answered() {
            return config
                .judge_stream_drop(now.saturating_duration_since(ticket.start), panicking);
        }
        let held = (ticket.start != UNTIMED).then(|| now.saturating_duration_since(ticket.start));
        config.judge_drop(held, panicking)
    }

    /// A drop that means nothing: frees a probe's slot, counts it, and does
    /// not end a run of consecutive failures (an outer timeout that drops a
    /// hung call's permit early must not keep resetting the run).
    pub(crate) fn drop_neutral(&self, ticket: Ticket) {
        if ticket.is_probe() {
            let _ = self.on_ending(ticket, Verdict::Dropped, ticket.start);
        } else if let Some(c) = self.counters() {
            c.verdict(Verdict::Dropped, false);
        }
    }

    /// A verdict in CLOSED (or MetricsOnly): the run of consecutive failures
    /// ([`machine::closed_run`]), the window, and the trip conditions; a
    /// trip opens for the verdict's `hint`, if any. Inlined into each of
    /// its two callers, so the one without a hint passes none.
    #[inline(always)]
    fn record_closed(
        &self,
        s: Snapshot,
        verdict: Verdict,
        slow: bool,
        now: Nanos,
        hint: Option<Duration>,
    ) -> Option<Transition> {
        let generation = s.generation();
        let counts_runs = self.flags.counts_runs();
        let runs = self
            .cell
            .update_from(s, now, |s| {
                machine::closed_run(s, generation, verdict, counts_runs)
            })
            .value?;
        if verdict == Verdict::Unanswered {
            // Not a call outcome for the window: only its own run judges it.
            if !self.shared.config.unanswered_trips(runs.unanswered()) {
                return None;
            }
            let counts = self.window().counts(now);
            let decided = Decided::Unanswered(runs.unanswered());
            let why = Why {
                reason: Reason::Unresponsive,
                decided,
                hint,
            };
            return self.trip(generation, why, now, counts, runs);
        }
        if !verdict.counts() {
            return None;
        }
        let failure = verdict.is_failure();
        let window = self.window();
        window.record(now, failure, slow);
        if !failure && !slow {
            return None; // a fast success never trips
        }
        let counts = window.counts(now);
        let reason = self.shared.config.trip_reason(runs.count(), counts)?;
        let decided = match reason {
            Reason::ConsecutiveFailures => Decided::Failures(runs.count()),
            _ => Decided::Window,
        };
        let why = Why {
            reason,
            decided,
            hint,
        };
        self.trip(generation, why, now, counts, runs)
    }

    /// CLOSED → OPEN (or a shadow trip in MetricsOnly) for generation
    /// `generation`, for [`Why`]'s reason, if the trip gate admits it and
    /// the run it was `decided` on still holds (opening for the verdict's
    /// hint or a remembered one, whichever is longer): a success of the same generation that ended
    /// the run between the count and the trip's CAS makes it moot (the
    /// consecutive failures or unanswered calls are no longer in a row).
    /// `runs` is the word the decision read: the transition reports its
    /// runs, as it reports the window's `counts`, not the runs of the word
    /// the trip's CAS replaced, which a racing failure may have extended.
    fn trip(
        &self,
        generation: u32,
        why: Why,
        now: Nanos,
        counts: WindowCounts,
        runs: Snapshot,
    ) -> Option<Transition> {
        let Why {
            reason,
            decided,
            hint,
        } = why;
        let config = &self.shared.config;
        let (read, remembered) = self.remembered_hint(now);
        let hint = hint.max(remembered);
        let u = self.through_gate(now, |s, counted| {
            let at = TripAt {
                since: self.cell.since(s),
                now,
                config,
                hint,
            };
            machine::trip(s, generation, counted, decided, at)
        })?;
        let to = u.entered?;
        if to.is_open() {
            self.forget_hint(read);
        }
        if to.state() == State::MetricsOnly {
            self.window().reset(now);
        }
        let from = u.seen.with_runs_of(runs);
        Some(self.report(from, to, reason, now, counts))
    }

    /// Runs a trip decision, `decide(word, counted)`, through the trip gate.
    /// A CLOSED breaker in a registry first reserves a slot of the open cap
    /// (`counted`); a refusal leaves the breaker as it is (`None`, the gate
    /// counted it). A reserved slot the decision did not turn into a counted
    /// ejection (the CAS lost, or the breaker left the gate meanwhile) is
    /// given back.
    fn through_gate<T>(
        &self,
        now: Nanos,
        mut decide: impl FnMut(Snapshot, bool) -> Next<T>,
    ) -> Option<Updated<T>> {
        let s = self.cell.load();
        let gate = self
            .shared
            .gate
            .as_deref()
            .filter(|_| s.is_closed_or_ramping() && !s.is_detached());
        let counted = match gate {
            Some(gate) => gate.admit_trip(s.is_proven())?,
            None => false,
        };
        let u = self.cell.update_from(s, now, |s| decide(s, counted));
        if let (Some(gate), true) = (gate, counted) {
            if !u.entered.is_some_and(|to| to.is_counted()) {
                gate.cancel_trip();
            }
        }
        Some(u)
    }

    /// A probe's verdict ([`machine::probe_verdict`]); a failed round
    /// reopens for the verdict's `hint`, if any.
    fn record_probe(
        &self,
        s: Snapshot,
        verdict: Verdict,
        slow: bool,
        now: Nanos,
        hint: Option<Duration>,
    ) -> Option<Transition> {
        let generation = s.generation();
        let config = &self.shared.config;
        let (read, remembered) = self.remembered_hint(now);
        let hint = hint.max(remembered);
        let u = self.cell.update_from(s, now, |s| {
            machine::probe_verdict(s, generation, verdict, slow, config, hint)
        });
        let (Some(reason), Some(to)) = (u.value, u.entered) else {
            return None;
        };
        if to.is_open() {
            self.forget_hint(read);
        }
        let from = if to.is_closed_or_ramping() {
            self.window().reset(now);
            // The closing success is one of the counts that caused the
            // transition: report it (as the failure that trips is). Without
            // the rate rule only a fast success closes; under it a round may
            // close on a success, fast or slow (one more success), or on a
            // failure (none).
            if verdict == Verdict::Success {
                u.seen.with_successes(u.seen.successes() + 1)
            } else {
                u.seen
            }
        } else {
            u.seen
        };
        Some(self.report(from, to, reason, now, WindowCounts::default()))
    }

    /// Publishes a won transition: the trip gate, the observer, and the value
    /// returned. User code (the observer) runs last, after the word and the
    /// gate are complete, and outside every CAS loop.
    fn report(
        &self,
        from: Snapshot,
        to: Snapshot,
        reason: Reason,
        now: Nanos,
        window: WindowCounts,
    ) -> Transition {
        if let Some(gate) = self.shared.gate.as_deref().filter(|_| !from.is_detached()) {
            gate.on_transition(
                from.state(),
                to.state(),
                from.is_counted() && !to.is_counted(),
            );
        }
        if self.flags.pooled() && !from.is_detached() {
            self.left_generation(from, to, now);
        }
        let transition = self.describe(from, to, reason, now, window);
        let observer = self.shared.observer.as_deref();
        self.shared.hooks.fire(observer, self, &transition);
        transition
    }

    /// The [`Transition`] from `from` to `to` (pure).
    fn describe(
        &self,
        from: Snapshot,
        to: Snapshot,
        reason: Reason,
        now: Nanos,
        window: WindowCounts,
    ) -> Transition {
        Transition {
            from: from.state(),
            to: to.state(),
            reason,
            generation: to.generation(),
            at: now,
            breaker_id: self.id,
            window,
            consecutive_failures: runs_of(from).0,
            unanswered_calls: runs_of(from).1,
            probe_successes: if from.is_half_open() {
                from.successes()
            } else {
                0
            },
            // A close ends the run of trips; the step it keeps, to decay,
            // shows in snapshots (`backoff_step`).
            trips_in_a_row: if to.is_closed_or_ramping() {
                0
            } else {
                to.trips()
            },
            open_for: to.is_open().then(|| self.open_duration(to)),
            // The ejection's mark, written before its trip, names the rule.
            outlier_rule: matches!(reason, Reason::Outlier | Reason::SlowOutlier)
                .then(|| self.outlier_ejection(to))
                .flatten(),
        }
    }

    /// The jittered open duration of the OPEN state `s`.
    fn open_duration(&self, s: Snapshot) -> Duration {
        Duration::from_nanos(machine::open_nanos(s, &self.shared.config, self.seed()))
    }

    /// The open period a registry waits out, besides its TTL, before it
    /// forgets an OPEN or HALF_OPEN breaker nobody asked for: an OPEN
    /// breaker's own (its step, or the span a hint or a remote trip set),
    /// else the schedule's cap.
    pub(crate) fn unvisited_open_period(&self) -> Duration {
        let s = self.cell.load();
        if s.is_open() {
            self.open_duration(s)
        } else {
            self.shared.config.open_duration_cap()
        }
    }

    // ===== News from other replicas =====

    /// Applies another replica's trip at `now` ([`RemoteTrip`]): opens a
    /// CLOSED breaker until `now` plus what is left of the remote period
    /// (minus this breaker's jitter), or extends an OPEN period to that end
    /// if it is later; anything else stays as it is. The trip gate (a
    /// registry's `max_open`) is asked as for a local trip. Returns the
    /// transition, reported to the observer with [`Reason::RemoteTrip`].
    ///
    /// Lock-free like every transition: a CAS from the exact word, racing
    /// admissions and verdicts fairly (one winner per transition).
    pub fn apply_remote_at(&self, remote: &RemoteTrip, now: Nanos) -> Option<Transition> {
        let config = &self.shared.config;
        let seed = self.seed();
        let remaining = u64::try_from(remote.remaining.as_nanos()).unwrap_or(u64::MAX);
        let span = machine::span_of(
            remaining,
            config.backoff.cut(remaining, seed, remote.epoch as u32),
        );
        let u = self.through_gate(now, |s, counted| {
            machine::remote_trip(s, self.cell.since(s), now, span, counted, config, seed)
        })?;
        let to = u.entered?;
        Some(self.report(u.seen, to, Reason::RemoteTrip, now, WindowCounts::default()))
    }

    // ===== Manual modes =====

    /// Moves to a manual mode (or back to Closed) from any state.
    fn set_mode(&self, target: State, reason: Reason, now: Nanos) -> Option<Transition> {
        let u = self.cell.update(now, |s| machine::set_mode(s, target));
        let to = u.entered?;
        if matches!(target, State::Closed | State::MetricsOnly) {
            self.window().reset(now);
        }
        Some(self.report(u.seen, to, reason, now, WindowCounts::default()))
    }

    /// Rejects every call until [`reset`](Self::reset). Returns the transition,
    /// or `None` if already forced open.
    pub fn force_open(&self) -> Option<Transition> {
        self.force_open_at(self.now())
    }

    /// [`force_open`](Self::force_open) at `now`.
    pub fn force_open_at(&self, now: Nanos) -> Option<Transition> {
        self.set_mode(State::ForcedOpen, Reason::ForceOpen, now)
    }

    /// Admits every call and never trips until [`reset`](Self::reset): the
    /// window and the failure run record nothing. Call counters, if kept
    /// ([`Builder::count_calls`](crate::Builder::count_calls)), still count
    /// what passes through.
    pub fn disable(&self) -> Option<Transition> {
        self.disable_at(self.now())
    }

    /// [`disable`](Self::disable) at `now`.
    pub fn disable_at(&self, now: Nanos) -> Option<Transition> {
        self.set_mode(State::Disabled, Reason::Disable, now)
    }

    /// Records and evaluates, never rejects (a shadow roll-out): a trip
    /// condition produces a MetricsOnly → MetricsOnly transition instead of
    /// opening. Starts from an empty window.
    pub fn metrics_only(&self) -> Option<Transition> {
        self.metrics_only_at(self.now())
    }

    /// [`metrics_only`](Self::metrics_only) at `now`.
    pub fn metrics_only_at(&self, now: Nanos) -> Option<Transition> {
        self.set_mode(State::MetricsOnly, Reason::MetricsOnly, now)
    }

    /// Back to a fresh CLOSED breaker: window and runs cleared, backoff
    /// restarted. Always a transition, even from Closed, so it is always
    /// observed: the result is always `Some`.
    pub fn reset(&self) -> Option<Transition> {
        self.reset_at(self.now())
    }

    /// [`reset`](Self::reset) at `now`.
    pub fn reset_at(&self, now: Nanos) -> Option<Transition> {
        self.set_mode(State::Closed, Reason::Reset, now)
    }

    // ===== Reading =====

    /// A read-only view of the breaker; see [`snapshot_at`](Self::snapshot_at).
    pub fn snapshot(&self) -> BreakerSnapshot {
        self.snapshot_at(self.now())
    }

    /// State, time in state, window counts and rates, and call counters at
    /// `now`. Loads only: reading it never disturbs the hot path.
    pub fn snapshot_at(&self, now: Nanos) -> BreakerSnapshot {
        let s = self.cell.load();
        let since = self.cell.since(s);
        let config = &self.shared.config;
        let window = self.window().counts(now);
        // The trip conditions judge rates only from `min_calls` calls on;
        // below that a rate is noise (one failure in one call is not 100 %).
        let enough = window.calls >= config.min_calls;
        let retry_after = s.is_open().then(|| {
            let ready = since.saturating_add(self.open_duration(s));
            ready.saturating_duration_since(now)
        });
        BreakerSnapshot {
            state: s.state(),
            generation: s.generation(),
            time_in_state: now.saturating_duration_since(since),
            retry_after,
            failure_rate: enough.then(|| window.failure_rate()),
            slow_call_rate: enough.then(|| window.slow_call_rate()),
            window,
            consecutive_failures: runs_of(s).0,
            unanswered_calls: runs_of(s).1,
            trips_in_a_row: if s.is_closed_or_ramping() {
                0
            } else {
                s.trips()
            },
            backoff_step: self.backoff_step(s, since, now),
            ramp_fraction: self.ramp_fraction(s, since, now),
            calls: self.counters().map(|c| {
                let mut calls = c.read();
                calls.retries_refused = self.retries_refused();
                calls
            }),
            outlier_ejection: self.outlier_ejection(s),
            retry_room: self.retry_room(now),
        }
    }

    /// The rule of the outlier ejection that put the breaker in the word
    /// `s`'s generation, if one did (its mark names that generation).
    fn outlier_ejection(&self, s: Snapshot) -> Option<OutlierRule> {
        if !self.flags.pooled() {
            return None;
        }
        // Acquire: pairs with the mark's release in `eject`, as the
        // admission's read in `lifted` does.
        let mark = Mark(self.pool_slots()?.mark.load(Ordering::Acquire));
        mark.rule().filter(|_| mark.names(s.generation()))
    }

    /// The backoff step of the word `s` (stamped `since`) at `now`: while
    /// Closed, the kept step decayed by the healthy time since the close.
    fn backoff_step(&self, s: Snapshot, since: Nanos, now: Nanos) -> u32 {
        if !s.is_closed_or_ramping() {
            return s.trips();
        }
        let config = &self.shared.config;
        if machine::ramps_at(s, since, now, config) {
            return s.trips();
        }
        config.decayed_trips(s.trips(), now.as_nanos().saturating_sub(since.as_nanos()))
    }

    /// The share of calls a ramping word admits at `now`, if it ramps.
    fn ramp_fraction(&self, s: Snapshot, since: Nanos, now: Nanos) -> Option<f64> {
        let ramp = self
            .shared
            .config
            .ramp
            .as_ref()
            .filter(|_| s.is_ramping())?;
        let fraction = ramp.fraction_at(now.as_nanos().saturating_sub(since.as_nanos()))?;
        Some(f64::from(fraction) / f64::from(ramp::ONE))
    }

    /// Whether this breaker is indistinguishable from a fresh one at `now`:
    /// Closed and not ramping, no run of failures or unanswered calls, its
    /// backoff step decayed back to the base (see
    /// [`BreakerSnapshot::trips_in_a_row`]), no upstream's hint remembered
    /// and still running (it would lengthen the next trip; see
    /// [`Builder::hints`](crate::Builder::hints)), no failure or slow
    /// call in its window, and a token retry budget's bucket full (only
    /// successes refill one, never time: a host forgotten with a drained
    /// bucket would come back with its retries allowed). A ratio retry
    /// budget's sums expire with its TTL (60 s at most), shorter than a
    /// registry's usual idle TTL, and do not count here.
    /// The registry evicts only such breakers.
    pub fn is_pristine_at(&self, now: Nanos) -> bool {
        let s = self.cell.load();
        if !s.is_closed_or_ramping() || s.count() != 0 || s.unanswered() != 0 {
            return false;
        }
        if self.remembered_hint(now).1.is_some() {
            return false;
        }
        if let Some((rules, bucket)) = self.token_bucket() {
            if bucket.load() < rules.max {
                return false;
            }
        }
        let since = self.cell.since(s);
        // A word still marked ramping after its window (no call since) is
        // as closed as one that was asked.
        if machine::ramps_at(s, since, now, &self.shared.config) {
            return false;
        }
        if s.trips() != 0 && self.backoff_step(s, since, now) != 0 {
            return false;
        }
        let w = self.window().counts(now);
        w.failures == 0 && w.slow == 0
    }
}

/// Keeps evidence `e` in a host's mark: one CAS from the word read, again
/// while other fields change under it.
fn remember(slots: PoolSlots<'_>, e: Evidence) {
    let mut mark = slots.mark.load(Ordering::Relaxed);
    loop {
        // Relaxed: the evidence publishes nothing; an RMW keeps the order of
        // the word's other changes (an ejection's release included).
        match slots.mark.compare_exchange_weak(
            mark,
            Mark(mark).with_evidence(e).0,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => return,
            Err(seen) => mark = seen,
        }
    }
}

/// A pooled breaker leaves its pool: its health, and its place under the
/// ejection cap if it is still ejected.
impl<C: Clock> Drop for Breaker<C> {
    fn drop(&mut self) {
        let Some((pool, slots)) = self.pool() else {
            return;
        };
        let s = self.cell.load();
        if s.is_detached() {
            return; // it left the pool when its registry removed it
        }
        self.end_ejection(pool, slots, s.generation(), None);
        pool.left(s.state());
    }
}

/// The runs a word holds, (consecutive failures, unanswered calls): only
/// Closed and MetricsOnly keep them; the same bits hold a probe round's
/// counts while HalfOpen and a remote trip's span while Open.
fn runs_of(s: Snapshot) -> (u32, u32) {
    match s.state() {
        State::Closed | State::MetricsOnly => (s.count(), s.unanswered()),
        _ => (0, 0),
    }
}

/// Frees the probe slot of `ticket` if dropped: armed while the observer of a
/// round start runs, forgotten once it returns.
struct ReleaseOnUnwind<'a, C: Clock> {
    breaker: &'a Breaker<C>,
    ticket: Ticket,
}

impl<C: Clock> Drop for ReleaseOnUnwind<'_, C> {
    fn drop(&mut self) {
        // Neutral: the observer's panic says nothing about the dependency.
        let _ = self
            .breaker
            .on_ending(self.ticket, Verdict::Dropped, self.ticket.start);
    }
}

impl<C: Clock> fmt::Debug for Breaker<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker")
            .field("id", &self.id)
            .field("state", &self.cell)
            .field("storage", &self.storage)
            .finish_non_exhaustive()
    }
}

/// Why a trip from Closed happens: its reason, what it was decided on (so
/// its CAS can check that it still holds), and the hint of the verdict
/// that caused it, which the trip opens for.
#[derive(Copy, Clone, Debug)]
struct Why {
    reason: Reason,
    decided: Decided,
    hint: Option<Duration>,
}

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use crate::{Breaker, ManualClock, Nanos};
    use core::time::Duration;

    #[test]
    fn an_idle_breaker_whose_ramp_is_over_is_pristine() {
        let b = Breaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_secs(10))
            .ramp(Duration::from_secs(30))
            .build_with_clock(ManualClock::new())
            .unwrap();
        b.try_acquire_at(Nanos::ZERO)
            .unwrap()
            .failure_at(Nanos::ZERO);
        let close = Nanos::from_secs(10);
        b.try_acquire_at(close).unwrap().success_at(close);
        assert!(!b.is_pristine_at(close), "ramping");
        // Past the window and the decay, with no admission since the close.
        let idle = Nanos::from_secs(3600);
        assert_eq!(b.snapshot_at(idle).ramp_fraction, None);
        assert!(b.is_pristine_at(idle), "a registry may evict it");
    }

    #[test]
    fn a_round_the_rate_rule_closes_on_a_failure_reports_only_its_successes() {
        // A failure closes a round only when the slow-call limit was the one
        // still open: it answers without being slow. (It never decides on the
        // failure side: it adds one failure and takes one answer to come.)
        let b = Breaker::builder()
            .consecutive_failures(1)
            .slow_call_threshold(Duration::from_secs(1))
            .open_duration(Duration::from_secs(10))
            .half_open_probes(3)
            .half_open_failure_rate(0.9)
            .half_open_slow_call_rate(0.5)
            .build_with_clock(ManualClock::new())
            .unwrap();
        b.try_acquire_at(Nanos::ZERO)
            .unwrap()
            .failure_at(Nanos::ZERO);
        let at = Nanos::from_secs(10);
        let [a, b2, _c] = [(); 3].map(|()| b.try_acquire_at(at).unwrap());
        // Two slow calls of three reach 50 %: one success leaves two to come.
        assert!(a.success_at(at).is_none());
        // A fast failure: one to come, which can reach neither 3 failures
        // nor 2 slow calls.
        let t = b2.failure_at(at).expect("closes");
        assert_eq!((t.to, t.probe_successes), (crate::State::Closed, 1));
    }
}
