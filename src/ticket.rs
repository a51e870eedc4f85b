//! [`Ticket`]: what an admission hands its permit, and the permit carries
//! back to its verdict — two words, so a permit travels in registers.

use crate::clock::Nanos;

/// The start of a call whose admission did not read the clock (CLOSED, no
/// slow-call timing): its age is unknown, so a drop without a verdict is
/// neutral and the call is never slow.
pub(crate) const UNTIMED: Nanos = Nanos::NEVER;

/// One admission: the generation it belongs to (invariant 4), whether it is
/// a probe, when it started and, for the admission that started a probe
/// round, enough to rebuild that transition (see
/// [`Breaker::admission_transition`](crate::Breaker)).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ticket {
    /// When the call was admitted ([`UNTIMED`] when the clock was not read).
    pub(crate) start: Nanos,
    /// The generation (bits 0–31), then `probe` (bit 32), the
    /// [`RoundStart`] (bits 33–34), the trips in a row when the round
    /// started (bits 35–40, ≤ 63), the probe successes of a superseded
    /// round (bits 41–48, ≤ 255), and two bits a layer sets when the
    /// response head has come and the permit rides on with the body:
    /// `answered` (bit 49) and whether the head came slow (bit 50). One word
    /// rather than fields, so building a ticket from the state word is a
    /// shift and an or, not a store and a reload.
    tag: u64,
}

const PROBE: u64 = 1 << 32;
const ROUND_SHIFT: u32 = 33;
const TRIPS_SHIFT: u32 = 35;
const TRIPS_MASK: u64 = 0x3f;
const PRIOR_SHIFT: u32 = 41;
const PRIOR_MASK: u64 = 0xff;
const ANSWERED: u64 = 1 << 49;
const SLOW_HEAD: u64 = 1 << 50;

/// How an admission started a probe round, if it did.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum RoundStart {
    /// An ordinary admission.
    None = 0,
    /// Won Open → HalfOpen.
    Opened = 1,
    /// Won HalfOpen → HalfOpen after the probe lease.
    Superseded = 2,
}

impl Ticket {
    /// An ordinary admission (or a probe joining a round).
    #[inline(always)]
    pub(crate) const fn new(generation: u32, probe: bool, start: Nanos) -> Ticket {
        Ticket {
            start,
            tag: generation as u64 | if probe { PROBE } else { 0 },
        }
    }

    /// The first probe of a round it started: `trips` (≤ 63) and
    /// `prior_successes` (≤ 255) of the state it left, masked to their bits.
    pub(crate) const fn round_start(
        generation: u32,
        round: RoundStart,
        trips: u32,
        prior_successes: u32,
        start: Nanos,
    ) -> Ticket {
        Ticket {
            start,
            tag: generation as u64
                | PROBE
                | (round as u64) << ROUND_SHIFT
                | (trips as u64 & TRIPS_MASK) << TRIPS_SHIFT
                | (prior_successes as u64 & PRIOR_MASK) << PRIOR_SHIFT,
        }
    }

    /// The generation the call was admitted in.
    #[inline(always)]
    pub(crate) const fn generation(&self) -> u32 {
        self.tag as u32 // the low 32 bits
    }

    /// Whether the call is a half-open probe.
    #[inline(always)]
    pub(crate) const fn is_probe(&self) -> bool {
        self.tag & PROBE != 0
    }

    /// How the admission started a round, if it did.
    pub(crate) const fn round(&self) -> RoundStart {
        match (self.tag >> ROUND_SHIFT) & 0b11 {
            1 => RoundStart::Opened,
            2 => RoundStart::Superseded,
            _ => RoundStart::None,
        }
    }

    /// Trips in a row when the round started (only with a round).
    pub(crate) const fn trips(&self) -> u32 {
        ((self.tag >> TRIPS_SHIFT) & TRIPS_MASK) as u32
    }

    /// Probe successes of the superseded round (only with
    /// [`RoundStart::Superseded`]).
    pub(crate) const fn prior_successes(&self) -> u32 {
        ((self.tag >> PRIOR_SHIFT) & PRIOR_MASK) as u32
    }

    /// The response head came at `at`, and was slow or not: from now on the
    /// call is a stream, judged by its progress. `start` becomes the instant
    /// of the last progress (the head, then each frame: see
    /// [`progress_at`](Self::progress_at)), and the head's slowness is kept
    /// for the verdict at the end.
    #[cfg(feature = "tower")]
    pub(crate) const fn answered(self, at: Nanos, slow: bool) -> Ticket {
        Ticket {
            start: at,
            tag: self.tag | ANSWERED | if slow { SLOW_HEAD } else { 0 },
        }
    }

    /// A stream made progress at `at` (a frame arrived).
    #[cfg(feature = "tower")]
    pub(crate) fn progress_at(&mut self, at: Nanos) {
        self.start = at;
    }

    /// Whether the response head came (see [`answered`](Self::answered)).
    #[inline]
    pub(crate) const fn is_answered(&self) -> bool {
        self.tag & ANSWERED != 0
    }

    /// Whether the response head came past the slow-call threshold.
    #[inline]
    pub(crate) const fn head_was_slow(&self) -> bool {
        self.tag & SLOW_HEAD != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_come_back_as_packed() {
        let t = Ticket::round_start(7, RoundStart::Superseded, 63, 255, Nanos::from_nanos(9));
        assert_eq!(t.generation(), 7);
        assert!(t.is_probe());
        assert_eq!(t.round(), RoundStart::Superseded);
        assert_eq!((t.trips(), t.prior_successes()), (63, 255));
        assert_eq!(t.start, Nanos::from_nanos(9));

        let t = Ticket::round_start(1, RoundStart::Opened, 5, 0, Nanos::ZERO);
        assert_eq!(
            (t.round(), t.trips(), t.prior_successes()),
            (RoundStart::Opened, 5, 0)
        );

        let t = Ticket::new(u32::MAX, false, UNTIMED);
        assert!(!t.is_probe());
        assert!(!t.is_answered() && !t.head_was_slow());
        assert_eq!(
            (t.generation(), t.round(), t.trips()),
            (u32::MAX, RoundStart::None, 0)
        );
    }

    #[cfg(feature = "tower")]
    #[test]
    fn an_answered_ticket_keeps_its_fields_and_moves_its_start() {
        let t = Ticket::round_start(7, RoundStart::Superseded, 63, 255, Nanos::from_nanos(9));
        let mut a = t.answered(Nanos::from_nanos(20), true);
        assert!(a.is_answered() && a.head_was_slow());
        assert_eq!(
            (
                a.generation(),
                a.is_probe(),
                a.round(),
                a.trips(),
                a.prior_successes()
            ),
            (7, true, RoundStart::Superseded, 63, 255)
        );
        assert_eq!(a.start, Nanos::from_nanos(20));
        a.progress_at(Nanos::from_nanos(30));
        assert_eq!(a.start, Nanos::from_nanos(30));
        let fast = Ticket::new(1, false, Nanos::ZERO).answered(Nanos::from_nanos(5), false);
        assert!(fast.is_answered() && !fast.head_was_slow());
    }

    #[test]
    fn two_words() {
        assert_eq!(core::mem::size_of::<Ticket>(), 16);
    }
}
