//! A pool: hosts compared with each other. Its sums, the cached figures of
//! the last sealed interval, and the counts that keep the fleet safe (the
//! ejection cap, panic mode).

use crate::clock::Nanos;
use crate::state::State;
use crate::sync::{AtomicU128, AtomicU64, Ordering};

use super::config::Rules;
use super::figures::{self, Figures};
use super::mark::Evidence;
use super::rule::OutlierRule;
#[cfg(test)]
use super::sums::Totals;
use super::sums::{Added, Report, Sums, STRIPES};
use super::tally::Counts;

/// Set in the cached figures' word once it holds figures.
const FIGURES_VALID: u128 = 1 << 127;

/// One pool's state (see the module's docs).
pub(crate) struct Pool {
    name: std::sync::Arc<str>,
    rules: Rules,
    sums: Sums,
    /// The last computed interval's [`Figures`], packed with its tag.
    figures: AtomicU128,
    /// Breakers in the pool now (built and not dropped).
    members: AtomicU64,
    /// Members open, half-open or forced open now.
    unhealthy: AtomicU64,
    /// Members ejected as outliers now (their ejection not yet left).
    ejected: AtomicU64,
    detected: [AtomicU64; 3],
    enforced: [AtomicU64; 3],
    /// Reports refused: late for their interval's seal, or no room.
    late: AtomicU64,
    /// The latest interval any host rolled into. A caller behind it (whose
    /// time was read earlier, or passed in from the past) neither reports
    /// nor judges: the pool's sums and seals only ever see the latest
    /// interval and the two before it.
    latest: AtomicU64,
}

impl Pool {
    /// A pool made at `now` (its sums start empty, before that interval).
    pub(crate) fn new(name: std::sync::Arc<str>, rules: Rules, now: Nanos) -> Pool {
        let epoch = epoch(now, rules.per_nanos);
        let zeros = || [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];
        Pool {
            name,
            rules,
            sums: Sums::new(epoch),
            figures: AtomicU128::new(0),
            members: AtomicU64::new(0),
            unhealthy: AtomicU64::new(0),
            ejected: AtomicU64::new(0),
            detected: zeros(),
            enforced: zeros(),
            late: AtomicU64::new(0),
            latest: AtomicU64::new(epoch),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The interval `now` falls in: `now / interval`, computed as the high
    /// word of `now × ⌈2⁶⁴ / interval⌉` (a multiply on every pooled call
    /// instead of a division). Exact at every multiple of the interval; a
    /// boundary comes early by at most `interval × now / 2⁶⁴` (47 µs after a
    /// day of a 10 s interval, 17 ms after a year): the same for every
    /// caller, so intervals stay one sequence.
    #[inline(always)]
    pub(crate) fn epoch(&self, now: Nanos) -> u64 {
        epoch(now, self.rules.per_nanos)
    }

    /// `⌈2⁶⁴ / interval⌉`, for [`epoch`] without the pool at hand.
    pub(crate) fn per_nanos(&self) -> u64 {
        self.rules.per_nanos
    }

    /// A host (`id`) rolled out of interval `epoch − 1` with `counts`: adds
    /// its report to that interval's sums, then judges it against the
    /// figures of `epoch − 2`, with its evidence so far (`evidence`).
    /// Returns the rule to eject it by, if one found it an outlier and is
    /// enforced for it (the enforcement percentage drawn from `id` and
    /// `epoch`, so a shadow roll-out is reproducible), and its evidence
    /// after this interval.
    #[cold]
    #[inline(never)]
    pub(crate) fn roll(
        &self,
        id: u32,
        epoch: u64,
        counts: Counts,
        evidence: Evidence,
    ) -> (Option<OutlierRule>, Evidence) {
        // Relaxed: a clock's high-water mark; no data is published by it.
        // A load first, so that only the first roll of an interval writes.
        let latest = self.latest.load(Ordering::Relaxed);
        if epoch < latest {
            self.late.fetch_add(1, Ordering::Relaxed);
            return (None, evidence);
        }
        if epoch > latest {
            self.latest.fetch_max(epoch, Ordering::Relaxed);
        }
        let report = self.report(counts);
        let stripe = id as usize % STRIPES;
        if self.sums.add(epoch.wrapping_sub(1), stripe, report) != Added::Yes {
            self.late.fetch_add(1, Ordering::Relaxed);
        }
        let Some(figures) = epoch.checked_sub(2).and_then(|e| self.figures(e)) else {
            return (None, evidence);
        };
        let (found, evidence) = figures::judge(counts, &figures, &self.rules, evidence);
        let mut eject = None;
        for rule in OutlierRule::ALL {
            if found & 1 << rule.index() == 0 {
                continue;
            }
            // Relaxed: statistics, read by snapshots only.
            self.detected[rule.index()].fetch_add(1, Ordering::Relaxed);
            if eject.is_none() && enforced(id, epoch, self.rules.enforcing(rule)) {
                eject = Some(rule);
            }
        }
        (eject, evidence)
    }

    /// The rules (for the ejection schedule).
    pub(crate) fn rules(&self) -> &Rules {
        &self.rules
    }

    /// What a host with `counts` reports of its interval.
    pub(crate) fn report(&self, counts: Counts) -> Report {
        let r = &self.rules;
        let judged = counts.calls >= r.sr_volume;
        Report {
            success_ppm: judged.then(|| figures::ppm(counts.calls - counts.failures, counts.calls)),
            failure_volume: counts.calls >= r.fp_volume,
            slow_ppm: (judged && r.slow.is_some()).then(|| figures::ppm(counts.slow, counts.calls)),
            calls: if judged { counts.calls } else { 0 },
        }
    }

    /// The figures of interval `epoch`: cached, or computed by sealing its
    /// sums and cached (a CAS: the first to finish publishes, and every
    /// other reader computed the same). `None` if the sums of `epoch` are
    /// gone (a later interval reused the slot).
    pub(crate) fn figures(&self, epoch: u64) -> Option<Figures> {
        if epoch.saturating_add(2) < self.latest.load(Ordering::Relaxed) {
            return None; // too old to seal: its slot is another's now
        }
        let tag = epoch & 0xffff;
        // Acquire: pairs with the publishing CAS, though the figures are in
        // the word itself; a stale word only costs a recomputation.
        let cached = self.figures.load(Ordering::Acquire);
        if cached & FIGURES_VALID != 0 {
            let (t, f) = Figures::unpack(cached & !FIGURES_VALID);
            if t == tag {
                return Some(f);
            }
        }
        let figures = Figures::of(&self.sums.seal(epoch)?, &self.rules);
        // One CAS from the word read: a loser's figures are the same, or
        // a later interval's, which should stay.
        let _ = self.figures.compare_exchange(
            cached,
            figures.pack(tag) | FIGURES_VALID,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
        Some(figures)
    }

    /// The sums of `epoch`, sealed.
    #[cfg(test)]
    #[cfg_attr(failfast_loom, allow(dead_code))] // for the loom models
    pub(crate) fn totals(&self, epoch: u64) -> Option<Totals> {
        self.sums.seal(epoch)
    }

    /// Reserves a place under the pool's ejection cap for one more outlier
    /// ejection. Refused while the pool panics or at the cap.
    pub(crate) fn reserve_ejection(&self) -> bool {
        if self.panicking() {
            return false;
        }
        let cap = self.ejection_cap();
        // Relaxed: a count, changed only by RMWs; the CAS keeps it ≤ cap.
        let mut ejected = self.ejected.load(Ordering::Relaxed);
        loop {
            if ejected >= cap {
                return false;
            }
            match self.ejected.compare_exchange_weak(
                ejected,
                ejected + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => ejected = now,
            }
        }
    }

    /// Gives back a place reserved by [`reserve_ejection`](Self::reserve_ejection):
    /// the ejection lost its trip, or the host left it.
    pub(crate) fn release_ejection(&self) {
        self.ejected.fetch_sub(1, Ordering::Relaxed);
    }

    /// A won ejection by `rule`.
    pub(crate) fn enforced(&self, rule: OutlierRule) {
        self.enforced[rule.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// The most hosts ejected as outliers at once: `max_ejection_percent`
    /// of the members, at least one.
    fn ejection_cap(&self) -> u64 {
        (self.members.load(Ordering::Relaxed) * self.rules.max_ejection_percent / 100).max(1)
    }

    /// Whether fewer than `panic_threshold` % of the members are healthy.
    pub(crate) fn panicking(&self) -> bool {
        // Relaxed: two counts read apart, a moment's skew at worst.
        let members = self.members.load(Ordering::Relaxed);
        let unhealthy = self.unhealthy.load(Ordering::Relaxed).min(members);
        (members - unhealthy) * 100 < self.rules.panic_threshold * members
    }

    /// A breaker joined the pool.
    pub(crate) fn joined(&self) {
        self.members.fetch_add(1, Ordering::Relaxed);
    }

    /// A breaker left the pool (dropped) in state `state`.
    pub(crate) fn left(&self, state: State) {
        if is_unhealthy(state) {
            self.unhealthy.fetch_sub(1, Ordering::Relaxed);
        }
        self.members.fetch_sub(1, Ordering::Relaxed);
    }

    /// A member's published transition.
    pub(crate) fn on_transition(&self, from: State, to: State) {
        match (is_unhealthy(from), is_unhealthy(to)) {
            (false, true) => {
                self.unhealthy.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                self.unhealthy.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// The pool's numbers now.
    pub(crate) fn snapshot(&self, now: Nanos) -> OutlierPoolSnapshot {
        let read = |a: &[AtomicU64; 3]| a.each_ref().map(|c| c.load(Ordering::Relaxed));
        let epoch = self.epoch(now);
        let figures = epoch
            .checked_sub(1)
            .and_then(|e| self.cached(e))
            .or_else(|| epoch.checked_sub(2).and_then(|e| self.cached(e)));
        OutlierPoolSnapshot {
            name: self.name.clone(),
            members: self.members.load(Ordering::Relaxed),
            unhealthy: self.unhealthy.load(Ordering::Relaxed),
            ejected: self.ejected.load(Ordering::Relaxed),
            panicking: self.panicking(),
            detected: read(&self.detected),
            enforced: read(&self.enforced),
            late_reports: self.late.load(Ordering::Relaxed),
            success_rate_threshold: figures
                .and_then(|f| f.success_threshold)
                .map(|t| f64::from(t) / 1e6),
            slow_rate_limit: figures
                .and_then(|f| f.slow_limit)
                .map(|t| f64::from(t) / 1e6),
        }
    }

    /// The cached figures, if they are interval `epoch`'s.
    fn cached(&self, epoch: u64) -> Option<Figures> {
        let word = self.figures.load(Ordering::Acquire);
        let (tag, f) = Figures::unpack(word & !FIGURES_VALID);
        (word & FIGURES_VALID != 0 && tag == epoch & 0xffff).then_some(f)
    }
}

/// The interval `now` falls in, for an interval whose `⌈2⁶⁴ / interval⌉`
/// is `per_nanos` (see [`Pool::epoch`]).
#[inline(always)]
pub(crate) fn epoch(now: Nanos, per_nanos: u64) -> u64 {
    ((u128::from(now.as_nanos()) * u128::from(per_nanos)) >> 64) as u64
}

/// Open, half-open, forced open: a state that keeps calls from the host.
fn is_unhealthy(state: State) -> bool {
    matches!(state, State::Open | State::HalfOpen | State::ForcedOpen)
}

/// Whether an outlier of host `id` in interval `epoch` is ejected under an
/// enforcement of `percent`: a deterministic draw, uniform over hosts.
fn enforced(id: u32, epoch: u64, percent: u8) -> bool {
    let mixed = (u64::from(id) << 32 ^ epoch).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (mixed >> 32) % 100 < u64::from(percent)
}

/// One pool's outlier detection now ([`Registry::outlier_pools`]).
///
/// [`Registry::outlier_pools`]: crate::Registry::outlier_pools
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct OutlierPoolSnapshot {
    /// The pool's name (`"default"` for the registry's own).
    pub name: std::sync::Arc<str>,
    /// Breakers in the pool.
    pub members: u64,
    /// Of them, open, half-open or forced open.
    pub unhealthy: u64,
    /// Of them, ejected as outliers.
    pub ejected: u64,
    /// Whether the pool panics (too few healthy hosts): outlier ejections
    /// are lifted.
    pub panicking: bool,
    /// Outliers found, by rule (in the order of success
    /// rate, failure percentage, slow: [`OutlierRule::ALL`]), whether enforced or not.
    pub detected: [u64; 3],
    /// Outliers ejected, by rule.
    pub enforced: [u64; 3],
    /// Hosts' reports that missed their interval's sums (late for its
    /// seal, by a moment at an interval's edge).
    pub late_reports: u64,
    /// The success-rate threshold of the last computed interval, if any.
    pub success_rate_threshold: Option<f64>,
    /// The latency rule's slow-rate limit of the last computed interval.
    pub slow_rate_limit: Option<f64>,
}

impl OutlierPoolSnapshot {
    /// Outliers `rule` found.
    pub fn detected(&self, rule: OutlierRule) -> u64 {
        self.detected[rule.index()]
    }

    /// Outliers `rule` ejected.
    pub fn enforced(&self, rule: OutlierRule) -> u64 {
        self.enforced[rule.index()]
    }
}

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;
    use crate::Outliers;
    use core::time::Duration;

    use crate::outlier::figures::Figures;
    use proptest::prelude::*;

    /// A host's interval: calls, failures and slow calls (each ≤ calls).
    fn counts() -> impl Strategy<Value = Counts> {
        (0u32..400, 0u32..=100, 0u32..=100).prop_map(|(calls, f, s)| Counts {
            calls,
            failures: calls * f / 100,
            slow: calls * s / 100,
        })
    }

    proptest! {
        /// The lazy, partitioned computation (reports striped by host, in
        /// any order, sealed by the first reader) equals a direct
        /// computation over every host that reported before the seal,
        /// exactly, in the fixed-point units: the sums, and so the figures.
        /// Reports after the seal are refused and in neither.
        #[test]
        fn partitioned_sums_equal_a_direct_computation(
            hosts in prop::collection::vec((counts(), any::<u32>()), 0..200),
            sealed_after in 0usize..200,
            epoch in 2u64..100_000,
            stdev in 0.0f64..4.0,
            slow in prop::option::of((1.0f64..5.0, 0.0f64..0.5)),
        ) {
            let mut o = Outliers::new().stdev_factor(stdev).success_rate_minimum_hosts(3);
            if let Some((factor, floor)) = slow {
                o = o.slow_outliers(factor, floor);
            }
            let pool = Pool::new("p".into(), o.rules(), Nanos::from_nanos(epoch * o.rules().interval_nanos));
            let mut direct = Totals::default();
            let mut figures = None;
            for (i, (c, id)) in hosts.iter().enumerate() {
                if i == sealed_after {
                    figures = pool.figures(epoch);
                }
                let report = pool.report(*c);
                let added = pool.sums.add(epoch, *id as usize % STRIPES, report);
                if figures.is_none() {
                    prop_assert_eq!(added, Added::Yes);
                    direct.add(report);
                } else if report != Report::default() {
                    prop_assert_eq!(added, Added::Late);
                }
            }
            prop_assert_eq!(pool.totals(epoch), Some(direct));
            let expected = Figures::of(&direct, &pool.rules);
            prop_assert_eq!(pool.figures(epoch), Some(expected));
            if let Some(f) = figures {
                prop_assert_eq!(f, expected, "every reader computes the same figures");
            }
        }
    }

    #[test]
    fn an_interval_number_is_exact_at_each_boundary() {
        for interval in [
            Duration::from_millis(1),
            Duration::from_secs(10),
            Duration::from_secs(86_400),
        ] {
            let pool = Pool::new(
                "p".into(),
                Outliers::new().interval(interval).rules(),
                Nanos::ZERO,
            );
            let i = interval.as_nanos() as u64;
            for k in [0u64, 1, 2, 1_000, 1_000_000] {
                let Some(at) = k.checked_mul(i) else { continue };
                assert_eq!(pool.epoch(Nanos::from_nanos(at)), k, "{interval:?} × {k}");
                // The boundary comes early by at most interval × now / 2⁶⁴.
                let early = ((u128::from(i) * u128::from(at)) >> 64) as u64 + 1;
                if k > 0 {
                    let before = Nanos::from_nanos(at - early);
                    assert_eq!(pool.epoch(before), k - 1, "{interval:?} × {k} − {early} ns");
                }
            }
        }
    }

    #[test]
    fn enforcement_draws_the_percentage_of_hosts() {
        let drawn = |p| (0..10_000).filter(|&id| enforced(id, 7, p)).count();
        assert_eq!(drawn(0), 0);
        assert_eq!(drawn(100), 10_000);
        let half = drawn(50);
        assert!((4_700..=5_300).contains(&half), "{half}");
    }

    #[test]
    fn the_cap_keeps_at_least_one_and_panic_refuses() {
        let pool = Pool::new("p".into(), Outliers::new().rules(), Nanos::ZERO);
        for _ in 0..5 {
            pool.joined();
        }
        assert!(
            pool.reserve_ejection(),
            "10 % of 5 rounds down, but one may go"
        );
        assert!(!pool.reserve_ejection());
        pool.release_ejection();
        pool.on_transition(State::Closed, State::Open);
        pool.on_transition(State::Closed, State::Open);
        assert!(!pool.panicking(), "3 of 5 healthy");
        pool.on_transition(State::Closed, State::Open);
        assert!(pool.panicking(), "2 of 5 healthy is under 50 %");
        assert!(!pool.reserve_ejection(), "no ejection in panic");
        pool.on_transition(State::HalfOpen, State::Closed);
        assert!(!pool.panicking());
    }
}
