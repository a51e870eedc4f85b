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
//! tally, add one report (two CASes), and, once per interval and pool,
//! seal 16 stripes (32 CASes) and take one integer square root.
//!
//! Fleet safety is in the pool (`pool`): enforcement percentages per rule, a cap
//! on the pool's ejected hosts, and panic mode, which lifts outlier
//! ejections while too few hosts are healthy.
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
#[cfg(not(failfast_loom))]
#[doc(hidden)]
pub mod sim;
pub(crate) mod sums;
pub(crate) mod tally;

pub use config::Outliers;
pub use figures::OutlierRule;
pub use pool::OutlierPoolSnapshot;
pub(crate) use pool::Pool;
