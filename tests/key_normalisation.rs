//! `AuthorityKey` gives one upstream one key: every spelling of an authority
//! maps to the same normal form, distinct authorities never share one, and
//! what does not parse has no key ([`Keyless`]) instead of a breaker of its
//! own or none at all.

use std::net::Ipv6Addr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use failfast::registry::HostKey;
use failfast::tower::{
    normalise_authority, AuthorityKey, KeyBuf, KeyedLayer, Keyless, KeylessReason,
};
use failfast::{Breaker, ManualClock, Registry, Rejected};
use proptest::prelude::*;
use tower::{Layer, Service, ServiceExt};

fn norm(authority: &str, port: Option<u16>) -> Result<String, KeylessReason> {
    let mut buf = KeyBuf::new();
    normalise_authority(authority.as_bytes(), port, 255, &mut buf)
        .map(str::to_owned)
        .map_err(|e| e.reason())
}

#[test]
fn the_spellings_of_one_host_are_one_key() {
    for spelling in [
        "api.example:80",
        "api.example",
        "API.Example",
        "api.example.",
        "api.example:080",
        "api.example:0000080",
        "api.example:",
        "u@api.example",
        "u:p@api.example",
        "u:p@API.EXAMPLE.:80",
    ] {
        assert_eq!(
            norm(spelling, Some(80)).as_deref(),
            Ok("api.example:80"),
            "{spelling}"
        );
    }
    for spelling in ["[::1]", "[0:0:0:0:0:0:0:1]:443", "[0::1]:0443", "u@[::1]"] {
        assert_eq!(
            norm(spelling, Some(443)).as_deref(),
            Ok("[::1]:443"),
            "{spelling}"
        );
    }
    assert_eq!(
        norm("[2001:DB8::A]:8080", None).as_deref(),
        Ok("[2001:db8::a]:8080")
    );
    assert_eq!(
        norm("127.0.0.1:5432", None).as_deref(),
        Ok("127.0.0.1:5432")
    );
    assert_eq!(
        norm("my_svc.ns.svc:9000", None).as_deref(),
        Ok("my_svc.ns.svc:9000")
    );
}

#[test]
fn what_does_not_parse_has_no_key() {
    use KeylessReason::*;
    for (input, reason) in [
        ("", Missing),
        ("api example", Malformed),
        ("api.example/x", Malformed),
        ("api.example?x", Malformed),
        ("[::1", Malformed),
        ("[::1]x", Malformed),
        ("[fe80::1%25eth0]:80", Malformed),
        ("a..b", Malformed),
        (".a", Malformed),
        ("a:b:80", Malformed),
        ("%61pi.example", Malformed),
        ("127.1", Malformed),
        ("1.2.3.04", Malformed),
        ("0x7f.0.0.1", Malformed),
        ("300.1.1.1", Malformed),
        ("api.example:99999", BadPort),
        ("api.example:65536", BadPort),
        ("api.example:0", BadPort),
        ("api.example:8o", BadPort),
        ("api.example", UnknownScheme),
    ] {
        let port = if reason == UnknownScheme {
            None
        } else {
            Some(80)
        };
        assert_eq!(norm(input, port), Err(reason), "{input:?}");
    }
    let long = format!("{}{}.example", "a".repeat(60), ".a".repeat(100));
    assert_eq!(
        norm(&long, Some(80)),
        Err(KeylessReason::Malformed),
        "over 253 bytes"
    );
    let label = "a".repeat(64);
    assert_eq!(
        norm(&label, Some(80)),
        Err(KeylessReason::Malformed),
        "a 64-byte label"
    );
    let near = format!(
        "{}.{}.{}.{}",
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(61)
    );
    assert_eq!(near.len(), 253);
    assert_eq!(
        norm(&near, Some(80)),
        Err(KeylessReason::TooLong),
        "legal name, key > 255"
    );
    assert_eq!(
        norm(&"x".repeat(2000), Some(80)),
        Err(KeylessReason::TooLong)
    );
}

#[test]
fn schemes_and_headers_pick_the_port() {
    let keys = AuthorityKey::<HostKey>::new();
    let key = |req: http::Request<()>| keys.normalise(&req).map(|b| b.as_str().to_owned());
    let get = |uri: &str| http::Request::get(uri).body(()).unwrap();
    assert_eq!(key(get("http://a.example/")).unwrap(), "a.example:80");
    assert_eq!(key(get("https://a.example/")).unwrap(), "a.example:443");
    assert_eq!(key(get("HTTPS://A.example:443/")).unwrap(), "a.example:443");
    assert_eq!(key(get("ws://a.example/")).unwrap(), "a.example:80");
    assert_eq!(
        key(get("ftp://a.example/")).unwrap_err().reason(),
        KeylessReason::UnknownScheme
    );
    assert_eq!(key(get("ftp://a.example:21/")).unwrap(), "a.example:21");
    let host = |h: &str| http::Request::get("/x").header("host", h).body(()).unwrap();
    assert_eq!(key(host("A.example.")).unwrap(), "a.example:80");
    let two = http::Request::get("/x")
        .header("host", "a.example")
        .header("host", "b.example")
        .body(())
        .unwrap();
    assert_eq!(key(two).unwrap_err().reason(), KeylessReason::Malformed);
    assert_eq!(key(get("/x")).unwrap_err().reason(), KeylessReason::Missing);
    let tls = AuthorityKey::<HostKey>::new().default_port(Some(443));
    assert_eq!(
        tls.normalise(&host("a.example")).unwrap().as_str(),
        "a.example:443"
    );
}

/// The issue's seven spellings through the layer: one breaker, so once
/// `api.example:80` is open every spelling is rejected without a call.
#[tokio::test]
async fn one_host_one_breaker_through_the_layer() {
    let registry = Arc::new(
        Registry::<HostKey>::builder(
            Breaker::builder()
                .consecutive_failures(1)
                .open_duration(Duration::from_secs(60)),
        )
        .build_with_clock(ManualClock::new())
        .unwrap(),
    );
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let inner = tower::service_fn(move |_req: http::Request<()>| {
        c.fetch_add(1, Ordering::SeqCst);
        async { Err::<(), _>(std::io::Error::other("503")) }
    });
    let mut svc = KeyedLayer::new(registry.clone()).layer(inner);
    let host = |h: &str| http::Request::get("/").header("host", h).body(()).unwrap();
    let first = svc
        .ready()
        .await
        .unwrap()
        .call(host("api.example:80"))
        .await;
    assert!(first.unwrap_err().is::<std::io::Error>());
    for spelling in [
        "api.example",
        "api.example:080",
        "api.example.",
        "u@api.example",
        "u:p@api.example",
        "API.EXAMPLE",
    ] {
        let err = svc
            .ready()
            .await
            .unwrap()
            .call(host(spelling))
            .await
            .unwrap_err();
        assert!(err.is::<Rejected>(), "{spelling}: {err}");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(registry.len(), 1);
    // Unparsable ones are rejected as keyless, counted, never called.
    for junk in [
        "api example",
        "api.example/x",
        "[::1",
        "",
        "api.example:99999",
    ] {
        let err = svc
            .ready()
            .await
            .unwrap()
            .call(host(junk))
            .await
            .unwrap_err();
        assert!(err.is::<Keyless>(), "{junk:?}: {err}");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(registry.keyless(), 5);
}

/// The trap of a configuration file's override key: `[hosts."API.Example:443"]`
/// is normalised as the layer normalises requests, so it overrides the
/// breaker of `api.example:443` that the layer uses — one breaker, whose
/// name in the status view is the normal form.
#[cfg(feature = "serde")]
#[tokio::test]
async fn a_misspelled_override_key_applies_to_the_layers_breaker() {
    use failfast::config::RegistryConfig;
    use failfast::tower::status_json;

    let config: RegistryConfig = toml::from_str(
        r#"
        [breaker]
        consecutive_failures = 5
        open_duration = "60s"
        [hosts."API.Example:443"]
        consecutive_failures = 1
        "#,
    )
    .unwrap();
    let registry = Arc::new(
        config
            .to_builder::<HostKey>()
            .unwrap()
            .build_with_clock(ManualClock::new())
            .unwrap(),
    );
    let inner = tower::service_fn(|_req: http::Request<()>| async {
        Err::<(), _>(std::io::Error::other("503"))
    });
    let mut svc = KeyedLayer::new(registry.clone()).layer(inner);
    let get = |uri: &str| http::Request::get(uri).body(()).unwrap();
    // One failure: the override's threshold, not the template's 5.
    let first = svc
        .ready()
        .await
        .unwrap()
        .call(get("https://api.example/v1"))
        .await;
    assert!(first.unwrap_err().is::<std::io::Error>());
    let second = svc
        .ready()
        .await
        .unwrap()
        .call(get("https://API.EXAMPLE:443/v2"))
        .await;
    assert!(second.unwrap_err().is::<Rejected>());
    assert_eq!((registry.len(), registry.open_count()), (1, 1));
    let status = status_json(&registry, 10);
    assert!(
        status.contains(r#""upstreams":[{"upstream":"api.example:443","state":"open""#),
        "{status}"
    );
    // A host the file does not name keeps the template.
    let other = svc
        .ready()
        .await
        .unwrap()
        .call(get("https://other.example/"))
        .await;
    assert!(other.unwrap_err().is::<std::io::Error>());
    assert_eq!(registry.open_count(), 1);
}

/// `http::uri::Authority` is a host key type too: its configuration keys
/// are normalised (its own `==` ignores case but not a missing port).
#[cfg(feature = "serde")]
#[test]
fn authority_keys_from_a_file_are_normalised_too() {
    use failfast::config::RegistryConfig;
    use http::uri::Authority;

    let config = |key: &str| -> RegistryConfig {
        toml::from_str(&format!(
            "[breaker]\nconsecutive_failures = 5\n[hosts.{key:?}]\nconsecutive_failures = 1"
        ))
        .unwrap()
    };
    let registry = config("API.Example.:0443")
        .to_builder::<Authority>()
        .unwrap()
        .build()
        .unwrap();
    let api = registry.get_or_insert(Authority::from_static("api.example:443"));
    assert_eq!(api.config().consecutive_failures(), Some(1));
    let err = config("api.example").to_builder::<Authority>().unwrap_err();
    assert_eq!((err.field(), err.key()), ("hosts", Some("\"api.example\"")));
}

/// A DNS name: 1–4 labels of letters, digits and `-`, the last one starting
/// with a letter (so it is never read as an IPv4 address).
fn name() -> impl Strategy<Value = String> {
    (
        prop::collection::vec("[a-z0-9][a-z0-9-]{0,10}", 0..3),
        "[a-z][a-z0-9-]{0,10}",
    )
        .prop_map(|(mut labels, last)| {
            labels.push(last);
            labels.join(".")
        })
}

/// One spelling of `host:port`: random case, maybe a trailing dot, maybe
/// userinfo, leading zeros on the port, the port left out when it is the
/// default.
fn spelling(host: &str, port: u16, default: u16) -> impl Strategy<Value = String> {
    let host = host.to_owned();
    (
        prop::collection::vec(any::<bool>(), host.len()),
        any::<bool>(),
        prop::option::of("[a-z]{1,5}(:[a-z0-9]{0,5})?"),
        0..3usize,
        any::<bool>(),
    )
        .prop_map(move |(upper, dot, userinfo, zeros, omit)| {
            let mut s = String::new();
            if let Some(u) = userinfo {
                s.push_str(&u);
                s.push('@');
            }
            for (c, up) in host.chars().zip(upper) {
                s.push(if up { c.to_ascii_uppercase() } else { c });
            }
            if dot {
                s.push('.');
            }
            if !(omit && port == default) {
                s.push(':');
                s.push_str(&"0".repeat(zeros));
                s.push_str(&port.to_string());
            }
            s
        })
}

/// Bytes made of what authorities are made of: labels of both cases with
/// digits and hyphens, dots, ports (with leading zeros, or too large),
/// bracketed IPv6 literals, userinfo, stray `%`, `[` and `:`.
fn authority_like() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        6 => "[a-zA-Z0-9-]{1,8}",
        3 => Just(".".to_owned()),
        2 => ":[0-9]{0,6}",
        1 => prop::array::uniform8(0..3u16).prop_map(|s| format!("[{}]", Ipv6Addr::from(s))),
        1 => "\\[[0-9a-fA-F:.]{2,24}\\]",
        1 => "[a-z]{1,4}(:[a-z]{0,3})?@",
        1 => "[%\\[\\]:]",
    ];
    prop::collection::vec(token, 1..7).prop_map(|t| t.concat().into_bytes())
}

proptest! {
    #[test]
    fn every_spelling_of_one_authority_maps_to_one_key(
        (host, port, a, b) in (name(), prop_oneof![Just(80u16), 1..=65535u16])
            .prop_flat_map(|(host, port)| {
                (Just(host.clone()), Just(port), spelling(&host, port, 80), spelling(&host, port, 80))
            })
    ) {
        let canonical = format!("{host}:{port}");
        prop_assert_eq!(norm(&a, Some(80)), Ok(canonical.clone()), "{}", a);
        prop_assert_eq!(norm(&b, Some(80)), Ok(canonical), "{}", b);
    }

    #[test]
    fn distinct_authorities_never_collide(
        (h1, p1) in (name(), 1..=65535u16),
        (h2, p2) in (name(), 1..=65535u16),
    ) {
        let a = norm(&format!("{h1}:{p1}"), None).unwrap();
        let b = norm(&format!("{h2}:{p2}"), None).unwrap();
        prop_assert_eq!(a == b, h1 == h2 && p1 == p2);
    }

    #[test]
    fn ipv6_spellings_map_to_one_key(segments in prop::array::uniform8(any::<u16>()), port in 1..=65535u16) {
        let ip = Ipv6Addr::from(segments);
        let full = segments.iter().map(|s| format!("{s:X}")).collect::<Vec<_>>().join(":");
        let short = norm(&format!("[{ip}]:{port}"), None).unwrap();
        prop_assert_eq!(norm(&format!("[{full}]:0{port}"), None).unwrap(), short.clone());
        prop_assert_eq!(short, format!("[{ip}]:{port}"));
    }

    // Arbitrary bytes rarely make an authority (3 in 256 did, each a host of
    // one or two letters): most inputs are drawn from authorities' own
    // characters, so that the canonical form is checked on real keys.
    #[test]
    fn arbitrary_bytes_never_panic_and_keys_are_canonical(input in prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..80),
        3 => authority_like(),
    ]) {
        let mut buf = KeyBuf::new();
        if let Ok(key) = normalise_authority(&input, Some(80), 255, &mut buf) {
            let key = key.to_owned();
            // A normal form is its own normal form.
            prop_assert_eq!(norm(&key, None), Ok(key.clone()));
            prop_assert!(key.len() <= 255);
        }
    }
}
