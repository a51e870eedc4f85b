//! A pool driven by interval counts instead of calls, for the trade-off
//! harness (`examples/outlier_tradeoff.rs`): the real pool — its
//! reports, sums, seals, figures, judgement, evidence, enforcement draw,
//! cap and panic — and the breaker's ejection bookkeeping (the mark, the
//! ejection time), with the calls themselves left out. Not part of the API.

use super::mark::Mark;
use super::pool::Pool;
use super::rule::OutlierRule;
use super::tally::Counts;
use super::Outliers;
use crate::clock::Nanos;
use crate::error::ConfigError;
use crate::state::State;

/// A pool of `hosts` hosts judged on counts (see the module's docs).
#[doc(hidden)]
pub struct PoolSim {
    pool: Pool,
    marks: Vec<Mark>,
    generations: Vec<u32>,
}

impl core::fmt::Debug for PoolSim {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PoolSim")
            .field("hosts", &self.marks.len())
            .finish_non_exhaustive()
    }
}

impl PoolSim {
    /// A pool under `outliers` whose `hosts` members (ids `0..hosts`) start
    /// closed, in interval 0.
    pub fn new(outliers: &Outliers, hosts: usize) -> Result<PoolSim, ConfigError> {
        outliers.check()?;
        let pool = Pool::new("sim".into(), outliers.rules(), Nanos::ZERO);
        for _ in 0..hosts {
            pool.joined();
        }
        Ok(PoolSim {
            pool,
            marks: vec![Mark::default(); hosts],
            generations: vec![0; hosts],
        })
    }

    /// Host `id`, closed, rolls into interval `epoch` having made `calls`
    /// calls in interval `epoch − 1`, `failures` of them failed and `slow`
    /// slow: it reports them and is judged, as the breaker's first call of
    /// `epoch` would. Returns the rule and the ejection's length in
    /// nanoseconds (`None`: the breaker's backoff) when it is ejected.
    pub fn roll(
        &mut self,
        id: usize,
        epoch: u64,
        calls: u32,
        failures: u32,
        slow: u32,
    ) -> Option<(OutlierRule, Option<u64>)> {
        let counts = Counts {
            calls,
            failures,
            slow,
        };
        let mark = self.marks[id];
        let (rule, evidence) = self.pool.roll(id as u32, epoch, counts, mark.evidence());
        let mark = mark.with_evidence(evidence);
        self.marks[id] = mark;
        let rule = rule?;
        if !self.pool.reserve_ejection() {
            return None;
        }
        let rules = self.pool.rules();
        self.generations[id] = self.generations[id].wrapping_add(1);
        let mark = mark.ejected(
            self.generations[id],
            rule,
            rules.next_times(mark.times_at(epoch)),
        );
        let nanos = rules.ejection_nanos(mark.times());
        self.marks[id] = mark;
        self.pool.enforced(rule);
        self.pool.on_transition(State::Closed, State::Open);
        Some((rule, nanos))
    }

    /// Host `id`'s ejection ends in interval `epoch` (its probe closed it).
    pub fn end(&mut self, id: usize, epoch: u64) {
        self.pool.on_transition(State::Open, State::Closed);
        self.pool.release_ejection();
        self.generations[id] = self.generations[id].wrapping_add(1);
        self.marks[id] = self.marks[id].ended(epoch);
    }

    /// The pool's interval length, in nanoseconds.
    pub fn interval_nanos(&self) -> u64 {
        self.pool.rules().interval_nanos
    }
}
