//! `Registry<HostKey>`, the key type for host names: looked up by `&str`,
//! the same entry as the owned key, its keys compared byte for byte (inline
//! and boxed, no normalisation inside the registry); a `Registry<str>` holds
//! the same keys; the normaliser needs no feature.

use std::time::Duration;

use failfast::registry::HostKey;
use failfast::{Breaker, Builder, Handle, ManualClock, Nanos, Reason, Registry, RemoteTrip, State};

fn consecutive(n: u32) -> Builder {
    Breaker::builder()
        .consecutive_failures(n)
        .open_duration(Duration::from_secs(60))
}

fn hosts() -> Registry<HostKey, std::collections::hash_map::RandomState, ManualClock> {
    Registry::<HostKey>::builder(consecutive(1))
        .build_with_clock(ManualClock::new())
        .unwrap()
}

/// Short enough to live inline, and long enough to be boxed.
const INLINE: &str = "api.example:443";
const BOXED: &str = "a-much-longer-host-name.example.com:443";

#[test]
fn a_host_key_registry_is_looked_up_by_str() {
    let registry = hosts();
    for text in [INLINE, BOXED] {
        assert_eq!(HostKey::from(text).is_inline(), text == INLINE);
        let by_str = registry.handle_from(text);
        assert_eq!(by_str.key().unwrap(), text);
        // One entry, whichever way it is reached.
        assert!(Handle::ptr_eq(
            &by_str,
            &registry.get_or_insert(HostKey::from(text))
        ));
        assert!(Handle::ptr_eq(
            &by_str,
            &registry.handle(&HostKey::from(text))
        ));
        by_str
            .try_acquire_at(Nanos::ZERO)
            .unwrap()
            .failure_at(Nanos::ZERO);
        assert_eq!(registry.handle_from(text).state(), State::Open);
    }
    assert_eq!((registry.len(), registry.open_count()), (2, 2));
    // A remote trip of an owned key.
    let news = RemoteTrip::new(1, Duration::from_secs(30), Reason::FailureRate);
    let t = registry.apply_remote_at(&HostKey::from("db.example:5432"), &news, Nanos::ZERO);
    assert_eq!(t.map(|t| t.to), Some(State::Open));
    assert_eq!(registry.handle_from("db.example:5432").state(), State::Open);
    assert_eq!(registry.len(), 3);
}

#[test]
fn keys_are_compared_byte_for_byte_and_never_normalised_by_the_registry() {
    let registry = hosts();
    // Keys one byte apart, in the last byte, in case, in length; inline and
    // boxed: each its own breaker.
    let texts = [
        "db:5432",
        "db:5433",
        "DB:5432",
        "db:543",
        "db:54320",
        BOXED,
        &BOXED[..BOXED.len() - 1],
        "",
    ];
    for text in texts {
        registry.handle_from(text);
    }
    assert_eq!(registry.len(), texts.len());
    for text in texts {
        assert_eq!(registry.handle_from(text).key().unwrap(), text);
        assert_eq!(
            registry.get_or_insert(HostKey::from(text)).key().unwrap(),
            text
        );
    }
    assert_eq!(
        registry.len(),
        texts.len(),
        "every lookup found its own key"
    );
}

#[test]
fn a_str_registry_and_a_host_key_registry_hold_the_same_keys() {
    let text = Registry::<str>::builder(consecutive(5)).build().unwrap();
    let hosts = Registry::<HostKey>::builder(consecutive(5))
        .build()
        .unwrap();
    for key in [INLINE, BOXED] {
        text.handle(key);
        hosts.handle_from(key);
    }
    let mut a: Vec<HostKey> = text.snapshots().map(|(k, _)| k).collect();
    let mut b: Vec<HostKey> = hosts.snapshots().map(|(k, _)| k).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    assert_eq!(a, [HostKey::from(BOXED), HostKey::from(INLINE)]);
}

/// A `Registry<str>` is looked up through `Lookup<str>`: the stored
/// `HostKey`'s bytes against the text, inline and boxed, one byte apart.
#[test]
fn a_str_registry_compares_its_keys_byte_for_byte() {
    let registry = Registry::<str>::builder(consecutive(5)).build().unwrap();
    let texts = [
        "db:5432",
        "db:5433",
        "DB:5432",
        "db:543",
        BOXED,
        &BOXED[1..],
    ];
    for text in texts {
        registry.handle(text);
    }
    for text in texts {
        assert_eq!(registry.handle(text).key(), Some(text));
        assert_eq!(registry.with(text, |b| b.state()), State::Closed);
    }
    assert_eq!(registry.len(), texts.len());
}

/// The normaliser the keyed layer and configuration files share needs no
/// feature.
#[test]
fn the_normal_form_needs_no_feature() {
    use failfast::authority::{normalise, AuthorityError, KeyBuf, MAX_AUTHORITY_LEN};
    let mut buf = KeyBuf::new();
    let mut norm = |text: &str, port| {
        normalise(text.as_bytes(), port, MAX_AUTHORITY_LEN, &mut buf).map(str::to_owned)
    };
    assert_eq!(
        norm("API.Example.:0443", None).as_deref(),
        Ok("api.example:443")
    );
    assert_eq!(norm("u:p@[0:0::1]", Some(80)).as_deref(), Ok("[::1]:80"));
    assert_eq!(norm("api.example", None), Err(AuthorityError::NoPort));
    assert_eq!(norm("api example:1", None), Err(AuthorityError::Malformed));
    assert_eq!(norm("api.example:0", None), Err(AuthorityError::BadPort));
    assert_eq!(norm("", None), Err(AuthorityError::Empty));
}

/// `handle` and `with` take a `&str` on a `Registry<HostKey>`: the entry
/// `handle_from` and an owned key reach, compared byte for byte.
#[test]
fn handle_and_with_take_a_str() {
    let registry = hosts();
    for text in [INLINE, BOXED] {
        let by_handle = registry.handle(text);
        assert!(Handle::ptr_eq(&by_handle, &registry.handle_from(text)));
        assert!(Handle::ptr_eq(
            &by_handle,
            &registry.get_or_insert(HostKey::from(text))
        ));
        registry.with(text, |b| {
            b.try_acquire_at(Nanos::ZERO)
                .unwrap()
                .failure_at(Nanos::ZERO)
        });
        assert_eq!(by_handle.state(), State::Open);
        assert_eq!(
            registry.handle(text.to_uppercase().as_str()).state(),
            State::Closed
        );
    }
    assert_eq!(registry.len(), 4);
}
