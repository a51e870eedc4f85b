//! Which rule found a host an outlier: the names a pool's ejections,
//! snapshots and metrics share.

/// Which rule found a host an outlier.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OutlierRule {
    /// Its success rate was below the pool's mean minus `stdev_factor`
    /// standard deviations.
    SuccessRate,
    /// It failed at least `failure_percentage_threshold` % of its calls.
    FailurePercentage,
    /// Its slow-call rate exceeded the pool's mean times the latency rule's
    /// factor (and the floor).
    Slow,
}

impl OutlierRule {
    /// Every rule, in the order a host is judged by them.
    pub const ALL: [OutlierRule; 3] = [
        OutlierRule::SuccessRate,
        OutlierRule::FailurePercentage,
        OutlierRule::Slow,
    ];

    /// A short snake_case name for logs and metrics labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            OutlierRule::SuccessRate => "success_rate",
            OutlierRule::FailurePercentage => "failure_percentage",
            OutlierRule::Slow => "slow",
        }
    }

    pub(crate) const fn index(self) -> usize {
        match self {
            OutlierRule::SuccessRate => 0,
            OutlierRule::FailurePercentage => 1,
            OutlierRule::Slow => 2,
        }
    }
}
