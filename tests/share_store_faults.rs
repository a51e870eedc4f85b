//! A store's faults stay local, in process: bad records a [`Store`] reports
//! are counted in [`SyncStats::bad_records`] (and exported as
//! `circuit_breaker_sync_bad_records_total`), never an error; a trip the
//! store keeps refusing does not hold the others back.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use failfast::share::{LocalTrip, News, Outbox, Replica, Store};
use failfast::{Breaker, ManualClock, Reason, Registry};

/// A store that refuses some keys, and finds `bad` malformed records at
/// every call.
struct Faulty {
    refuse: HashSet<String>,
    bad: u64,
    found: u64,
    accepted: Vec<String>,
}

#[derive(Debug, PartialEq)]
struct Refused;

impl Store for Faulty {
    type Error = Refused;

    fn trip(&mut self, trip: &LocalTrip) -> Result<Option<News>, Refused> {
        self.found += self.bad;
        if self.refuse.contains(&trip.key) {
            return Err(Refused);
        }
        self.accepted.push(trip.key.clone());
        Ok(None)
    }

    fn open_trips(&mut self) -> Result<Vec<News>, Refused> {
        self.found += self.bad;
        Ok(vec![News::new(
            "db:5432",
            1,
            Duration::from_secs(10),
            1,
            Reason::FailureRate,
            "elsewhere",
        )])
    }

    fn take_bad_records(&mut self) -> u64 {
        std::mem::take(&mut self.found)
    }
}

type Hosts = Registry<String, std::collections::hash_map::RandomState, ManualClock>;

fn replica(clock: &ManualClock) -> (Arc<Hosts>, Arc<Outbox>) {
    let registry = Arc::new(
        Registry::<String>::builder(Breaker::builder().consecutive_failures(1))
            .build_with_clock(clock.clone())
            .unwrap(),
    );
    (registry, Arc::new(Outbox::new(64)))
}

#[test]
fn a_trip_the_store_keeps_refusing_holds_back_no_other() {
    let clock = ManualClock::new();
    let (registry, outbox) = replica(&clock);
    let keys: Vec<String> = (0..20).map(|i| format!("h{i}:80")).collect();
    for key in &keys {
        let t = registry
            .with(key.as_str(), |b| b.try_acquire().unwrap().failure())
            .unwrap();
        assert!(outbox.report(key, &t));
    }
    let mut replica = Replica::builder(registry, outbox).build().unwrap();
    let refuse: HashSet<String> = ["h3:80", "h11:80"].map(String::from).into();
    let mut store = Faulty {
        refuse: refuse.clone(),
        bad: 0,
        found: 0,
        accepted: Vec::new(),
    };
    // Each call stops at the first refusal; a refused trip goes last next
    // time. Three calls publish every other trip, whatever the table's order.
    for _ in 0..3 {
        replica.publish_to(&mut store);
        clock.advance(Duration::from_millis(10));
    }
    let accepted: HashSet<String> = store.accepted.iter().cloned().collect();
    let others: HashSet<String> = keys
        .iter()
        .filter(|k| !refuse.contains(*k))
        .cloned()
        .collect();
    assert_eq!(accepted, others);
    assert_eq!(store.accepted.len(), others.len(), "each published once");
    let errors = replica.stats().errors();
    assert!((1..=3).contains(&errors), "{errors}");
}

#[test]
fn bad_records_are_counted_never_an_error() {
    let clock = ManualClock::new();
    let (registry, outbox) = replica(&clock);
    let t = registry
        .with("a:80", |b| b.try_acquire().unwrap().failure())
        .unwrap();
    outbox.report("a:80", &t);
    let mut replica = Replica::builder(registry.clone(), outbox).build().unwrap();
    let mut store = Faulty {
        refuse: HashSet::new(),
        bad: 2,
        found: 0,
        accepted: Vec::new(),
    };
    replica.publish_to(&mut store);
    assert_eq!(replica.reconcile_with(&mut store), Ok(1));
    let stats = replica.stats();
    assert_eq!((stats.bad_records(), stats.errors()), (4, 0));
    assert_eq!((stats.published(), stats.applied()), (1, 1));
    assert!(registry.with("db:5432", |b| b.try_acquire().is_err()));

    #[cfg(feature = "metrics")]
    {
        use failfast::export::metrics::SYNC_BAD_RECORDS_TOTAL;
        use metrics_util::debugging::{DebugValue, DebuggingRecorder};

        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, || stats.export_metrics());
        let exported = snapshotter.snapshot().into_vec().into_iter().find_map(
            |(key, _, _, value)| match value {
                DebugValue::Counter(n) if key.key().name() == SYNC_BAD_RECORDS_TOTAL => Some(n),
                _ => None,
            },
        );
        assert_eq!(exported, Some(4));
    }
}
