//! A registry's outlier pools: the `"default"` one of its keys, and one per
//! name that a key's configuration gives
//! ([`Builder::outlier_pool`](crate::Builder::outlier_pool)).

use crate::breaker::Shared;
use crate::clock::{Clock, Nanos};
use crate::error::ConfigError;
use crate::outlier::{OutlierPoolSnapshot, Outliers, Pool};
use crate::sync::{Arc, Mutex};

/// The pool of keys whose configuration names none.
pub(crate) const DEFAULT_POOL: &str = "default";

/// The registry's pools, made as configurations name them (at build, or when
/// discovery adds a key with its own): a lock on that cold path only; a
/// breaker holds its pool directly.
pub(crate) struct Pools {
    outliers: Option<Outliers>,
    made: Mutex<Vec<Arc<Pool>>>,
}

impl Pools {
    /// Pools under `outliers` (checked), or none.
    pub(crate) fn new(outliers: Option<Outliers>) -> Result<Pools, ConfigError> {
        if let Some(o) = &outliers {
            o.check()?;
        }
        Ok(Pools {
            outliers,
            made: Mutex::new(Vec::new()),
        })
    }

    /// Puts the breakers of `shared` in their pool, when the registry has
    /// outliers. A configuration that names a pool in a registry without
    /// them, or a latency rule over breakers that time no call, is refused.
    pub(crate) fn attach<C: Clock>(&self, shared: Shared<C>) -> Result<Shared<C>, ConfigError> {
        let Some(outliers) = &self.outliers else {
            return match &shared.config.outlier_pool {
                Some(name) => Err(ConfigError::new(
                    "outlier_pool",
                    "a registry with outliers (RegistryBuilder::outliers)",
                    name,
                )),
                None => Ok(shared),
            };
        };
        if outliers.slow.is_some() && shared.config.slow_call_threshold.is_none() {
            return Err(ConfigError::new(
                "outliers.slow_outliers",
                "breakers with a slow_call_threshold (a slow call is one above it)",
                "no threshold",
            ));
        }
        let name = shared
            .config
            .outlier_pool
            .as_deref()
            .unwrap_or(DEFAULT_POOL);
        let pool = {
            let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
            match made.iter().find(|p| p.name() == name) {
                Some(p) => p.clone(),
                None => {
                    let now = shared.clock.now();
                    let p = Arc::new(Pool::new(name.into(), outliers.rules(), now));
                    made.push(p.clone());
                    p
                }
            }
        };
        Ok(shared.with_pool(pool))
    }

    /// Each pool's numbers at `now`, in the order they were made.
    pub(crate) fn snapshots(&self, now: Nanos) -> Vec<OutlierPoolSnapshot> {
        let made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        made.iter().map(|p| p.snapshot(now)).collect()
    }
}
