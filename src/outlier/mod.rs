//! Outlier detection: each host of a pool judged against the others, with
//! no timer and no scan.
//!
//! A registry built with [`RegistryBuilder::outliers`] is a pool, and a key
//! whose configuration names one ([`Builder::outlier_pool`]) belongs to that
//! named pool instead (the endpoints of one service, say). Every pooled
//! breaker keeps a tally (`tally`) of the current interval in its own storage. The
//! first call of a host after an interval ends rolls the tally, adds the
//! host's rates to the pool's sums (`sums`) of the interval it leaves, and
//! judges the host against the figures (`figures`) of the interval before, sealed and
//! computed once by whichever host needed them first. An outlier trips its
//! own breaker ([`Reason::Outlier`], [`Reason::SlowOutlier`]) and recovers
//! through the normal lazy probe and backoff.
//!
//! So a host is judged on its first call after its interval, against
//! figures one interval older: a change is seen within one interval of it.
//! A host with no call for a whole interval reports nothing and is judged
//! on nothing: silence never ejects. No request does more than roll one
//! tally, add one report (two CASes), step its evidence (one CAS on its own
//! mark), and, once per interval and pool, seal 16 stripes (32 CASes) and
//! take one integer square root.
//!
//! # Evidence, not spread alone
//!
//! Envoy's success-rate rule compares a host with `mean − 1.9 stdev` of the
//! pool's rates. The spread of a tight, healthy pool is its sampling noise,
//! so the rule ejects hosts for noise: 20 hosts at 99.5 % with 1,000 calls
//! an interval fail 5 ± 2.2 times each, the threshold sits near 99.1 %, and
//! 10 failures instead of 5 cross it (`examples/outlier_tradeoff.rs`
//! measures it: about 9,000 false ejections per 1,000 host-hours there, as
//! many as the cap and the ejection time allow, against none for the
//! default; its table is in `benches/outlier_tradeoff.md`). By
//! default every rule also asks for evidence (the `evidence` module): a CUSUM of the
//! host's log-likelihood ratios, failing twice as often as its pool against
//! as often, given its calls and the pool's (the conditional test of two
//! Poisson rates, so a small or quiet pool weighs as uncertain). It is
//! stepped at the host's own roll, kept in 11 bits of its mark, and asked
//! to reach `ln(1/α)`; with α = 10⁻⁶, Ville's inequality holds a healthy
//! host to at most one false ejection in a million of its intervals,
//! whatever its volume and its pool. The stdev threshold (and the minimum
//! gap) still apply in the interval that decides, so a host must be both
//! an outlier among its peers and shown to be worse than them. The failure
//! percentage and the latency rule ask the same of failures and of slow
//! calls. [`Outliers::envoy`] asks for none: Envoy's rule exactly.
//!
//! The harness found no false ejection by the default in 48 pools (5 to 500
//! hosts, 100 to 10,000 calls an interval, 95 to 99.9 % success; 2,000
//! host-hours each). A host failing 3× its pool's rate is ejected within 2
//! intervals (median) wherever Envoy's rule does so but in the four pools
//! where a healthy host's interval holds about 5 failures (100 and 500
//! hosts at 1,000 calls and 99.5 %, and at 100 calls and 95 %): there one
//! interval of the sick host is about 5 nats of the 13.8 asked, and it goes
//! at its third or fourth; Envoy's rule is faster there only because it
//! ejects every host with about 10 failures, healthy ones included. Where
//! an interval holds a fraction of a failure (100 calls at 99.9 %), no
//! host is found within 50 intervals. At 10⁻⁵ the harness saw false
//! ejections in 5 pools (up to 1 per 1,000 host-hours) for one interval
//! gained in a few: 10⁻⁶ is the default.
//!
//! What it costs: the evidence needs the pool's calls (a field of the sums'
//! word B, written by the CAS a report already makes) and a second word in
//! the cached figures (the pool's mean rates and calls: a 128-bit cache). A
//! call pays nothing more; a roll pays a few multiplications and one CAS
//! on the host's own mark.
//!
//! # Ejection time
//!
//! Pool ejections follow Envoy's schedule by default: `base × n` (30 s,
//! 60 s, 90 s …) up to `max` (300 s), where `n` is the host's multiplier,
//! raised by one at each ejection while `n × base < max + base` and lowered
//! by one for each interval the host has been back for a whole interval —
//! lazily: the mark (the `mark` module) keeps the multiplier and the interval the
//! last ejection ended in, and the next ejection subtracts. The span is the
//! OPEN word's, so the breaker's own backoff is untouched;
//! [`Outliers::ejection_time_of_breaker`] makes an ejection one more trip of
//! the breaker's backoff instead.
//!
//! Fleet safety is in the pool (`pool`): enforcement percentages per rule, a cap
//! on the pool's ejected hosts, and panic mode, which lifts outlier
//! ejections while too few hosts are healthy.
//!
//! [`Outliers::envoy`]: crate::Outliers::envoy
//! [`Outliers::ejection_time_of_breaker`]: crate::Outliers::ejection_time_of_breaker
//!
//! [`RegistryBuilder::outliers`]: crate::RegistryBuilder::outliers
//! [`Builder::outlier_pool`]: crate::Builder::outlier_pool
//! [`Reason::Outlier`]: crate::Reason::Outlier
//! [`Reason::SlowOutlier`]: crate::Reason::SlowOutlier

mod config;
pub(crate) mod evidence;
pub(crate) mod figures;
#[cfg(all(test, failfast_loom))]
mod loom_models;
pub(crate) mod mark;
pub(crate) mod pool;
mod rule;
#[doc(hidden)]
pub mod sim;
pub(crate) mod sums;
pub(crate) mod tally;

pub use config::Outliers;
pub use pool::OutlierPoolSnapshot;
pub(crate) use pool::Pool;
pub use rule::OutlierRule;
