//! A pooled host's mark: the second word of its pool slots, holding what
//! the pool remembers of the host between intervals.
//!
//! ```text
//!  63       53 52       42 41          27 26      19 18 17 16 15          0
//! +-----------+-----------+--------------+----------+-----+--+------------+
//! | slow (11) | fail (11) |  ended (15)  | times (8)|rule |on| generation |
//! +-----------+-----------+--------------+----------+-----+--+------------+
//! ```
//!
//! - **The ejection in progress** (`on`, `rule`, `generation`): set before
//!   the ejection's trip, naming the low 16 bits of the OPEN word's
//!   generation, and cleared by one compare-exchange by whichever
//!   transition leaves that generation, which gives the pool's place back.
//!   Every transition of a pooled breaker ends the ejection of the
//!   generation it leaves, so a live mark names the word's generation or
//!   the one a transition is leaving: 16 bits tell them apart.
//! - **The ejection schedule** (`times`, `ended`): how many times the host
//!   was ejected, less one for each whole interval since its last ejection
//!   ended (Envoy's multiplier, decayed lazily at the next ejection), and
//!   the interval that ejection ended in (modulo 2¹⁵: an ejection more than
//!   2¹⁵ intervals after the last one, 3.8 days at 10 s, may find its
//!   distance wrapped and keep a multiplier it should have lost).
//! - **The evidence** (`fail`, `slow`): the host's cumulative sums of
//!   log-likelihood ratios (see [`evidence`](super::evidence)), in 1/64 of
//!   a nat. Written at the host's own roll, once per interval, and zeroed
//!   by an ejection.
//!
//! Every change is a compare-exchange from the word read (see the breaker's
//! `eject`, `end_ejection` and `remember`): a field never overwrites a
//! racing change of another.

use super::rule::OutlierRule;

const GEN_BITS: u32 = 16;
const GEN_MASK: u64 = (1 << GEN_BITS) - 1;
const ON: u64 = 1 << GEN_BITS;
const RULE_SHIFT: u32 = GEN_BITS + 1;
const RULE_MASK: u64 = 0b11 << RULE_SHIFT;
const TIMES_SHIFT: u32 = RULE_SHIFT + 2;
/// The largest multiplier the mark holds.
pub(crate) const TIMES_MAX: u32 = 255;
const TIMES_MASK: u64 = (TIMES_MAX as u64) << TIMES_SHIFT;
const ENDED_SHIFT: u32 = TIMES_SHIFT + 8;
const ENDED_BITS: u32 = 15;
const ENDED_MASK: u64 = ((1 << ENDED_BITS) - 1) << ENDED_SHIFT;
const FAIL_SHIFT: u32 = ENDED_SHIFT + ENDED_BITS;
/// The largest evidence a field holds, in 1/64 nat (32 nats).
pub(crate) const EVIDENCE_MAX: u32 = (1 << 11) - 1;
const FAIL_MASK: u64 = (EVIDENCE_MAX as u64) << FAIL_SHIFT;
const SLOW_SHIFT: u32 = FAIL_SHIFT + 11;
const SLOW_MASK: u64 = (EVIDENCE_MAX as u64) << SLOW_SHIFT;
const _: () = assert!(SLOW_SHIFT + 11 == 64);

/// A host's mark word, decoded and encoded in place.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Mark(pub(crate) u64);

/// The host's evidence against each null hypothesis, in 1/64 nat.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Evidence {
    /// That it fails no more often than its pool.
    pub(crate) fail: u32,
    /// That it is slow no more often than its pool.
    pub(crate) slow: u32,
}

impl Mark {
    /// Whether an ejection that holds generation `generation` OPEN is in
    /// progress.
    pub(crate) fn names(self, generation: u32) -> bool {
        self.0 & ON != 0 && self.0 & GEN_MASK == u64::from(generation) & GEN_MASK
    }

    /// The rule of the ejection in progress, if any.
    pub(crate) fn rule(self) -> Option<OutlierRule> {
        (self.0 & ON != 0)
            .then(|| OutlierRule::ALL[((self.0 & RULE_MASK) >> RULE_SHIFT) as usize % 3])
    }

    /// An ejection by `rule` holding generation `generation`, the host's
    /// `times`-th (decayed): the evidence starts over.
    pub(crate) fn ejected(self, generation: u32, rule: OutlierRule, times: u32) -> Mark {
        let kept = self.0 & ENDED_MASK;
        Mark(
            kept | u64::from(generation) & GEN_MASK
                | ON
                | (rule.index() as u64) << RULE_SHIFT
                | u64::from(times.min(TIMES_MAX)) << TIMES_SHIFT,
        )
    }

    /// The ejection over in interval `epoch`: the multiplier and the
    /// evidence kept, the end remembered for the multiplier's decay.
    pub(crate) fn ended(self, epoch: u64) -> Mark {
        let cleared = self.0 & !(GEN_MASK | ON | RULE_MASK | ENDED_MASK);
        Mark(cleared | (epoch << ENDED_SHIFT) & ENDED_MASK)
    }

    /// The same mark with no ejection in progress (the multiplier, its end
    /// and the evidence kept as they are).
    pub(crate) fn without_ejection(self) -> Mark {
        Mark(self.0 & !(GEN_MASK | ON | RULE_MASK))
    }

    /// The ejection's multiplier (Envoy's `ejectTimeBackoff`), before decay.
    pub(crate) fn times(self) -> u32 {
        ((self.0 & TIMES_MASK) >> TIMES_SHIFT) as u32
    }

    /// The multiplier left at interval `epoch`: one less for each interval
    /// after the one following the last ejection's end (Envoy lowers it at
    /// each interval timer that finds the host back for a whole interval).
    pub(crate) fn times_at(self, epoch: u64) -> u32 {
        if self.0 & ON != 0 {
            return self.times(); // still ejected: nothing decays
        }
        let ended = (self.0 & ENDED_MASK) >> ENDED_SHIFT;
        let since = epoch.wrapping_sub(ended) & (ENDED_MASK >> ENDED_SHIFT);
        let healthy = since.saturating_sub(1);
        self.times()
            .saturating_sub(u32::try_from(healthy).unwrap_or(u32::MAX))
    }

    pub(crate) fn evidence(self) -> Evidence {
        Evidence {
            fail: ((self.0 & FAIL_MASK) >> FAIL_SHIFT) as u32,
            slow: ((self.0 & SLOW_MASK) >> SLOW_SHIFT) as u32,
        }
    }

    /// The same mark holding evidence `e` (each field at most
    /// [`EVIDENCE_MAX`]).
    pub(crate) fn with_evidence(self, e: Evidence) -> Mark {
        let kept = self.0 & !(FAIL_MASK | SLOW_MASK);
        Mark(
            kept | u64::from(e.fail.min(EVIDENCE_MAX)) << FAIL_SHIFT
                | u64::from(e.slow.min(EVIDENCE_MAX)) << SLOW_SHIFT,
        )
    }
}

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;

    #[test]
    fn fields_stay_apart() {
        let e = Evidence {
            fail: EVIDENCE_MAX,
            slow: 77,
        };
        let m = Mark::default()
            .with_evidence(e)
            .ejected(0x1_2345, OutlierRule::Slow, 300);
        assert!(m.names(0x1_2345) && m.names(0x2345) && !m.names(0x2346));
        assert_eq!(m.rule(), Some(OutlierRule::Slow));
        assert_eq!(m.times(), TIMES_MAX);
        assert_eq!(m.evidence(), Evidence::default(), "an ejection starts over");
        let m = m.with_evidence(e).ended(40_000);
        assert!(!m.names(0x1_2345));
        assert_eq!(m.rule(), None);
        assert_eq!(m.evidence(), e);
        assert_eq!(m.times(), TIMES_MAX);
    }

    #[test]
    fn the_multiplier_decays_after_a_whole_interval_back() {
        let m = Mark::default().ejected(1, OutlierRule::SuccessRate, 3);
        assert_eq!(m.times_at(1_000), 3, "no decay while ejected");
        let m = m.ended(10);
        assert_eq!(m.times_at(10), 3);
        assert_eq!(m.times_at(11), 3, "judged on the interval it came back in");
        assert_eq!(m.times_at(12), 2);
        assert_eq!(m.times_at(14), 0);
        assert_eq!(m.times_at(1_000), 0);
        // The end's tag wraps at 2¹⁵ intervals.
        let m = Mark::default()
            .ejected(1, OutlierRule::SuccessRate, 3)
            .ended(32_767);
        assert_eq!(m.times_at(32_768), 3);
        assert_eq!(m.times_at(32_769), 2);
    }
}
