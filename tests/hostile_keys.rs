//! Keys chosen by an attacker, through `KeyedLayer` on a `ManualClock`:
//! 200k distinct junk hosts, each failing once, with a real failing upstream
//! among them. With or without a capacity, the real upstream is still
//! rejected after its threshold; with one, entries and key bytes stay within
//! the bounds the whole time; without one, a day later the junk is gone.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use failfast::registry::HostKey;
use failfast::tower::{KeyedLayer, Keyless};
use failfast::{Breaker, ManualClock, Registry, RegistryBuilder, Rejected};
use tower::{BoxError, Layer, Service};

const JUNK: usize = 200_000;
const REAL: &str = "real.example";
/// The real upstream's calls come after this much junk, then every 1000.
const REAL_FROM: usize = 5_000;

type Result = std::result::Result<(), BoxError>;

/// Polls a future that is ready at once (every inner call here is).
fn now<F: Future>(f: F) -> F::Output {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(f).poll(&mut cx) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("the inner service is synchronous"),
    }
}

struct Outcome {
    real_called: usize,
    real_rejected: usize,
    max_len: usize,
    max_key_bytes: usize,
}

/// Sends the junk stream with the real upstream's calls mixed in; checks the
/// bounds after every request.
fn flood(
    registry: &Arc<Registry<HostKey, std::collections::hash_map::RandomState, ManualClock>>,
) -> Outcome {
    let real_called = Arc::new(AtomicUsize::new(0));
    let counted = real_called.clone();
    let inner = tower::service_fn(move |req: http::Request<()>| {
        let host = req.headers()["host"].to_str().unwrap().to_owned();
        if host == REAL {
            counted.fetch_add(1, Ordering::Relaxed);
        }
        // Every host fails: junk is junk, and the real upstream is down.
        std::future::ready(Err::<(), _>(std::io::Error::other("503")))
    });
    let mut svc = KeyedLayer::new(registry.clone()).layer(inner);
    let mut call = |host: &str| -> Result {
        let req = http::Request::get("/")
            .header("host", host)
            .body(())
            .unwrap();
        let mut cx = Context::from_waker(Waker::noop());
        assert!(svc.poll_ready(&mut cx).is_ready());
        now(svc.call(req)).map(|_| ())
    };
    let mut out = Outcome {
        real_called: 0,
        real_rejected: 0,
        max_len: 0,
        max_key_bytes: 0,
    };
    for i in 0..JUNK {
        let err = call(&format!("junk-{i}.attacker.example")).unwrap_err();
        assert!(err.is::<std::io::Error>() || err.is::<Rejected>(), "{err}");
        if i >= REAL_FROM && i % 1000 == 0 {
            let err = call(REAL).unwrap_err();
            out.real_rejected += usize::from(err.is::<Rejected>());
        }
        out.max_len = out.max_len.max(registry.len());
        out.max_key_bytes = out.max_key_bytes.max(registry.key_bytes());
    }
    // Unparsable hosts: rejected as keyless, never called, never tracked.
    for junk in [
        "api example",
        "api.example/x",
        "[::1",
        "",
        "api.example:99999",
    ] {
        assert!(call(junk).unwrap_err().is::<Keyless>());
    }
    out.real_called = real_called.load(Ordering::Relaxed);
    out
}

fn builder() -> RegistryBuilder<HostKey> {
    Registry::<HostKey>::builder(
        Breaker::builder()
            .consecutive_failures(3)
            .open_duration(Duration::from_secs(60)),
    )
    .idle_ttl(Duration::from_secs(600))
    .forget_after(Duration::from_secs(3600))
}

#[test]
fn without_capacity_the_real_upstream_trips_and_a_day_later_the_junk_is_gone() {
    let clock = ManualClock::new();
    let registry = Arc::new(builder().build_with_clock(clock.clone()).unwrap());
    let out = flood(&registry);
    let real_calls = (JUNK - REAL_FROM) / 1000;
    assert_eq!(
        out.real_called, 3,
        "called up to its threshold, then rejected"
    );
    assert_eq!(out.real_rejected, real_calls - 3);
    assert_eq!(registry.len(), JUNK + 1);
    assert_eq!(registry.keyless(), 5);

    // A day of silence: failures that old, and an open breaker nobody asked
    // for through a TTL and its longest open period, carry no information.
    clock.advance(Duration::from_secs(24 * 3600));
    assert_eq!(registry.sweep(usize::MAX), JUNK + 1);
    assert!(registry.is_empty());
    assert_eq!(registry.open_count(), 0);
}

#[test]
fn with_capacity_entries_and_key_bytes_stay_bounded_and_the_real_upstream_is_rejected() {
    let clock = ManualClock::new();
    let registry = Arc::new(
        builder()
            .capacity(1000)
            .max_key_bytes(1000 * 24)
            .build_with_clock(clock.clone())
            .unwrap(),
    );
    let out = flood(&registry);
    assert!(out.max_len <= 1000, "{} entries", out.max_len);
    assert!(
        out.max_key_bytes <= 24_000,
        "{} key bytes",
        out.max_key_bytes
    );
    // The real upstream arrived when the registry was full of fresh junk
    // failures: it shares its shard's overflow breaker, which the junk of that
    // shard tripped, so it is rejected — at most its threshold of calls ever
    // reached it, whatever else happened.
    assert!(
        out.real_called <= 3,
        "{} calls reached the failing upstream",
        out.real_called
    );
    let real_calls = (JUNK - REAL_FROM) / 1000;
    assert!(
        out.real_rejected >= real_calls - 3,
        "{} of {real_calls} rejected",
        out.real_rejected
    );
    assert!(registry.untracked() > 0);

    // An hour later the junk's failures are old: room again for real hosts.
    clock.advance(Duration::from_secs(3700));
    let fresh = registry.handle_from("new.example:80");
    assert!(fresh.is_tracked());
    assert!(registry.len() <= 1000);
}

/// The key-byte budget measures an `http::uri::Authority` key by its text,
/// as it does a `HostKey`: 16 bytes held, 15 more do not fit in 30.
#[test]
fn authority_keys_are_measured_by_their_text() {
    let clock = ManualClock::new();
    let registry =
        Registry::<http::uri::Authority>::builder(Breaker::builder().consecutive_failures(3))
            .max_key_bytes(30)
            .shards(1)
            .build_with_clock(clock.clone())
            .unwrap();
    let key = |s: &str| s.parse::<http::uri::Authority>().unwrap();
    let held = registry.handle(&key("api.example:8080")); // not evictable while held
    assert!(held.is_tracked());
    assert_eq!(registry.key_bytes(), 16);
    assert!(!registry.handle(&key("db.example:5432")).is_tracked());
    assert_eq!((registry.key_bytes(), registry.len()), (16, 1));
    drop(held);
    // A shard that found no victim is not scanned again within the same
    // idle tick (a flood of new keys costs one scan per tick): a second on.
    clock.advance(Duration::from_secs(1));
    assert!(
        registry.handle(&key("db.example:5432")).is_tracked(),
        "the pristine entry made room"
    );
    assert_eq!(registry.key_bytes(), 15);
}
