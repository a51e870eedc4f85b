//! The normal form of a host and port (`host:port`): one text per upstream,
//! whatever the spelling. The keyed tower layer keys requests by it, and a
//! configuration file's `[hosts."…"]` keys go through it, so the two always
//! name the same breaker. No dependency: it needs no feature.
//!
//! ```
//! use failfast::authority::{normalise, AuthorityError, KeyBuf, MAX_AUTHORITY_LEN};
//!
//! let mut buf = KeyBuf::new();
//! let key = normalise(b"API.Example.:0443", None, MAX_AUTHORITY_LEN, &mut buf);
//! assert_eq!(key, Ok("api.example:443"));
//! // Without a scheme there is no default port: a text without one has no normal form.
//! assert_eq!(normalise(b"api.example", None, MAX_AUTHORITY_LEN, &mut buf), Err(AuthorityError::NoPort));
//! ```
//!
//! # The normal form
//!
//! `host:port`, always with the port:
//!
//! * the **host** lowercased, one trailing dot removed; a name is letters,
//!   digits, `-`, `_` and `.`-separated labels of 1..=63 bytes, at most 253
//!   bytes in all (DNS); a name whose last label is numeric (`127.1`,
//!   `0x7f.0.0.1`, `1.2.3.04`) must be a plain dotted-quad IPv4 address, since
//!   resolvers read the other spellings as the same address in other bases;
//!   an IPv6 literal is written in its RFC 5952 form (`[::1]`), zone ids are
//!   not accepted;
//! * **userinfo** (`user:pass@`) removed;
//! * the **port** explicit: the default port given (the keyed layer's: the
//!   scheme's) when absent or empty, leading zeros dropped (`080` is 80, as
//!   clients read it), and in 1..=65535.
//!
//! Anything else — an empty text, spaces, `/`, `?`, `#`, `\`, a bad port, no
//! port and no default, a normal form longer than the limit — has none
//! ([`AuthorityError`]).
//!
//! The normal form is written into a stack buffer ([`KeyBuf`]): deriving it
//! allocates nothing.

use core::fmt::{self, Write as _};
use std::net::{Ipv4Addr, Ipv6Addr};

/// The longest text a normal form can take: a 253-byte name, `:` and a
/// 5-digit port.
pub const MAX_AUTHORITY_LEN: usize = 259;

/// The keyed layer's default limit on a normal form
/// (`AuthorityKey::max_len`, feature `tower`): 255 bytes, the DNS limit.
pub const DEFAULT_MAX_KEY_LEN: usize = 255;

/// Inputs longer than this are refused before they are read.
const MAX_INPUT: usize = 1024;

/// Why a text has no normal form.
///
/// ```
/// use failfast::authority::{normalise, AuthorityError, KeyBuf};
///
/// let why = |text: &str| normalise(text.as_bytes(), Some(80), 64, &mut KeyBuf::new()).unwrap_err();
/// assert_eq!(why(""), AuthorityError::Empty);
/// assert_eq!(why("api example"), AuthorityError::Malformed);
/// assert_eq!(why("api.example:0"), AuthorityError::BadPort);
/// assert_eq!(why(&"a".repeat(63)), AuthorityError::TooLong);
/// assert_eq!(AuthorityError::BadPort.to_string(), "the port is not a number in 1..=65535");
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthorityError {
    /// The text is empty.
    Empty,
    /// Not a host name or an IP address (bad characters, an empty label, an
    /// IPv4 address spelt other than as a plain dotted quad, an unclosed
    /// IPv6 bracket).
    Malformed,
    /// The port is not a number in 1..=65535.
    BadPort,
    /// No port, and no default port was given.
    NoPort,
    /// The normal form is longer than the limit.
    TooLong,
}

impl fmt::Display for AuthorityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AuthorityError::Empty => "empty",
            AuthorityError::Malformed => "not a host name or an IP address",
            AuthorityError::BadPort => "the port is not a number in 1..=65535",
            AuthorityError::NoPort => "no port",
            AuthorityError::TooLong => "too long",
        })
    }
}

impl std::error::Error for AuthorityError {}

/// A stack buffer holding one normal form: where [`normalise`] writes, so
/// deriving a key allocates nothing.
///
/// ```
/// use failfast::authority::{normalise, KeyBuf};
///
/// // One buffer serves many authorities: each is written over the last.
/// let mut buf = KeyBuf::new();
/// for authority in ["API.example", "api.example.:080", "user@api.example:80"] {
///     let key = normalise(authority.as_bytes(), Some(80), 255, &mut buf).unwrap();
///     assert_eq!(key, "api.example:80");
/// }
/// assert_eq!(buf.as_str(), "api.example:80");
/// ```
#[derive(Clone)]
pub struct KeyBuf {
    bytes: [u8; MAX_AUTHORITY_LEN],
    len: usize,
}

impl KeyBuf {
    /// An empty buffer.
    ///
    /// ```
    /// use failfast::authority::KeyBuf;
    /// assert_eq!(KeyBuf::new().as_str(), "");
    /// ```
    pub const fn new() -> KeyBuf {
        KeyBuf {
            bytes: [0; MAX_AUTHORITY_LEN],
            len: 0,
        }
    }

    /// The text written so far.
    pub fn as_str(&self) -> &str {
        // Only ASCII is ever written.
        core::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }

    fn push(&mut self, bytes: &[u8]) -> Result<(), AuthorityError> {
        let end = self.len + bytes.len();
        let Some(to) = self.bytes.get_mut(self.len..end) else {
            return Err(AuthorityError::TooLong);
        };
        to.copy_from_slice(bytes);
        self.len = end;
        Ok(())
    }
}

impl Default for KeyBuf {
    fn default() -> KeyBuf {
        KeyBuf::new()
    }
}

impl fmt::Write for KeyBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push(s.as_bytes()).map_err(|_| fmt::Error)
    }
}

impl fmt::Debug for KeyBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// A port's digits, leading zeros dropped; `None` when absent or empty.
fn parse_port(digits: &[u8]) -> Result<Option<u16>, AuthorityError> {
    if digits.is_empty() {
        return Ok(None);
    }
    let mut port: u32 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(AuthorityError::BadPort);
        }
        port = port * 10 + u32::from(d - b'0');
        if port > 65_535 {
            return Err(AuthorityError::BadPort);
        }
    }
    match u16::try_from(port) {
        Ok(p) if p > 0 => Ok(Some(p)),
        _ => Err(AuthorityError::BadPort),
    }
}

/// What a byte may be in a host name: 0 = not allowed, else the byte to
/// write (lowercased); `.` separates labels.
const NAME_BYTE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = match c {
            b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => c,
            b'A'..=b'Z' => c + 32,
            _ => 0,
        };
        b += 1;
    }
    table
};

/// Writes the normal form of a DNS name or IPv4 address: one pass that
/// lowercases, checks every byte and the label lengths.
fn push_name(host: &[u8], buf: &mut KeyBuf) -> Result<(), AuthorityError> {
    let malformed = AuthorityError::Malformed;
    let host = host.strip_suffix(b".").unwrap_or(host);
    if host.is_empty() || host.len() > 253 {
        return Err(malformed);
    }
    let start = buf.len;
    let Some(out) = buf.bytes.get_mut(start..start + host.len()) else {
        return Err(AuthorityError::TooLong);
    };
    let mut label = 0usize;
    let mut last_start = 0usize;
    for (i, (&b, o)) in host.iter().zip(out.iter_mut()).enumerate() {
        let c = NAME_BYTE[b as usize];
        if c == b'.' {
            if label == 0 {
                return Err(malformed);
            }
            label = 0;
            last_start = i + 1;
        } else if c == 0 || label == 63 {
            return Err(malformed);
        } else {
            label += 1;
        }
        *o = c;
    }
    if label == 0 {
        return Err(malformed);
    }
    buf.len = start + host.len();
    let last = &buf.bytes[start + last_start..buf.len];
    let numeric = last.iter().all(u8::is_ascii_digit)
        || (last.len() > 2
            && last.starts_with(b"0x")
            && last[2..].iter().all(u8::is_ascii_hexdigit));
    if numeric {
        // Only the plain dotted quad (std's parser refuses leading zeros and
        // short forms); its text is already canonical.
        let text = core::str::from_utf8(&buf.bytes[start..buf.len]).map_err(|_| malformed)?;
        text.parse::<Ipv4Addr>().map_err(|_| malformed)?;
    }
    Ok(())
}

/// Writes `:port` in decimal.
fn push_port(buf: &mut KeyBuf, port: u16) -> Result<(), AuthorityError> {
    let mut digits = [0u8; 6];
    let mut i = digits.len();
    let mut n = port;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    i -= 1;
    digits[i] = b':';
    buf.push(&digits[i..])
}

/// Writes the normal form of `authority` (`[userinfo@]host[:port]`) into
/// `buf`, `default_port` standing in for an absent or empty port, and
/// returns it; a normal form longer than `max_len` is refused. See the
/// [module docs](self) for the rules.
///
/// ```
/// use failfast::authority::{normalise, AuthorityError, KeyBuf};
///
/// let mut buf = KeyBuf::new();
/// let key = normalise(b"u:p@API.Example.:080", Some(80), 255, &mut buf).unwrap();
/// assert_eq!(key, "api.example:80");
/// let key = normalise(b"[0:0::1]", Some(443), 255, &mut buf).unwrap();
/// assert_eq!(key, "[::1]:443");
/// assert_eq!(normalise(b"api example", Some(80), 255, &mut buf), Err(AuthorityError::Malformed));
/// ```
///
/// # Errors
///
/// [`AuthorityError`]: why `authority` has no normal form.
pub fn normalise<'b>(
    authority: &[u8],
    default_port: Option<u16>,
    max_len: usize,
    buf: &'b mut KeyBuf,
) -> Result<&'b str, AuthorityError> {
    buf.len = 0;
    if push_plain(authority, default_port, buf).is_none() {
        buf.len = 0;
        push_general(authority, default_port, buf)?;
    }
    if buf.len > max_len {
        return Err(AuthorityError::TooLong);
    }
    Ok(buf.as_str())
}

/// The fast path for the common spelling, `name[:port]` with no userinfo:
/// one pass that lowercases and checks each byte of the name, then the
/// port's digits copied as they are. It gives up (`None`, and the general
/// path starts over) on anything else — a byte outside a name, an empty
/// label, a last label that starts with a digit (an IPv4 address
/// or a numeric spelling), a port that is empty, has a leading zero or is
/// out of range — so it never decides an error, and where it succeeds it
/// writes what the general path would (`fast_path_tests` checks that the
/// two agree on arbitrary input).
#[inline]
fn push_plain(authority: &[u8], default_port: Option<u16>, buf: &mut KeyBuf) -> Option<()> {
    let mut label = 0usize;
    let (mut last_start, mut previous_start) = (0usize, 0usize);
    let mut end = authority.len();
    for (i, &b) in authority.iter().enumerate() {
        let c = NAME_BYTE[b as usize];
        if c == b'.' {
            if label == 0 {
                return None;
            }
            label = 0;
            previous_start = last_start;
            last_start = i + 1;
        } else if c == 0 {
            end = i;
            break;
        } else if label == 63 {
            return None;
        } else {
            label += 1;
        }
        *buf.bytes.get_mut(i)? = c;
    }
    // One trailing dot (the root) is dropped: the last label is the one before.
    let name_len = if label == 0 && end > 0 {
        last_start = previous_start;
        end - 1
    } else {
        end
    };
    if label == 0 && end == name_len {
        return None; // no name at all
    }
    if name_len > 253 || authority.get(last_start)?.is_ascii_digit() {
        return None;
    }
    buf.len = name_len;
    match authority[end..].split_first() {
        None => push_port(buf, default_port?).ok(),
        Some((b':', digits @ [b'1'..=b'9', ..])) if digits.len() <= 5 => {
            parse_port(digits).ok().flatten()?; // in 1..=65535
            buf.push(b":").ok()?;
            buf.push(digits).ok()
        }
        Some(_) => None,
    }
}

/// The general path: userinfo, IPv6 literals, trailing dots, numeric
/// hosts, ports with leading zeros, and every error.
fn push_general(
    authority: &[u8],
    default_port: Option<u16>,
    buf: &mut KeyBuf,
) -> Result<(), AuthorityError> {
    let malformed = AuthorityError::Malformed;
    if authority.len() > MAX_INPUT {
        return Err(AuthorityError::TooLong);
    }
    if authority.is_empty() {
        return Err(AuthorityError::Empty);
    }
    // Printable ASCII, none of `/ ? # \`; and where userinfo ends.
    let mut after_at = 0;
    for (i, &b) in authority.iter().enumerate() {
        if !b.is_ascii_graphic() || matches!(b, b'/' | b'?' | b'#' | b'\\') {
            return Err(malformed);
        }
        if b == b'@' {
            after_at = i + 1;
        }
    }
    let host_port = &authority[after_at..];
    let port_digits: &[u8];
    if let Some(rest) = host_port.strip_prefix(b"[") {
        let close = rest.iter().position(|&b| b == b']').ok_or(malformed)?;
        let text = core::str::from_utf8(&rest[..close]).map_err(|_| malformed)?;
        let ip: Ipv6Addr = text.parse().map_err(|_| malformed)?;
        port_digits = match &rest[close + 1..] {
            [] => &[],
            [b':', digits @ ..] => digits,
            _ => return Err(malformed),
        };
        write!(buf, "[{ip}]").map_err(|_| malformed)?;
    } else {
        let (host, digits) = match host_port.iter().rposition(|&b| b == b':') {
            Some(colon) => (&host_port[..colon], &host_port[colon + 1..]),
            None => (host_port, &[][..]),
        };
        // A second `:` (or a bracket) is not a name byte: `push_name` refuses it.
        port_digits = digits;
        push_name(host, buf)?;
    }
    let port = match parse_port(port_digits)? {
        Some(port) => port,
        None => default_port.ok_or(AuthorityError::NoPort)?,
    };
    push_port(buf, port)
}

#[cfg(all(test, not(failfast_loom)))]
mod fast_path_tests {
    use super::*;
    use proptest::prelude::*;

    /// What the general path alone makes of `authority`.
    fn general(authority: &[u8], default_port: Option<u16>) -> Result<String, AuthorityError> {
        let mut buf = KeyBuf::new();
        push_general(authority, default_port, &mut buf)?;
        Ok(buf.as_str().to_owned())
    }

    /// Texts close to authorities: name bytes in both cases, dots, colons,
    /// digits (leading zeros, big ports), userinfo, brackets, and now and
    /// then a byte no authority has.
    fn authority() -> impl Strategy<Value = Vec<u8>> {
        let byte = prop_oneof![
            8 => prop::sample::select(b"abcxyzABCXYZ-_".to_vec()),
            4 => prop::sample::select(b"0123456789".to_vec()),
            3 => Just(b'.'),
            2 => Just(b':'),
            1 => prop::sample::select(b"@[]/ ?#\\%\x7f\xc3".to_vec()),
        ];
        let port_text = prop::sample::select(vec![
            "", ":", ":0", ":080", ":00443", ":80", ":443", ":65535", ":65536", ":99999",
            ":123456", ":8a", ":1:2", "@h", ".", "..", ":+80",
        ]);
        let name = "[a-zA-Z0-9][a-zA-Z0-9_-]{0,8}(\\.[a-zA-Z0-9][a-zA-Z0-9_-]{0,8}){0,3}"
            .prop_map(String::into_bytes);
        prop_oneof![
            prop::collection::vec(byte.clone(), 0..40),
            (name, port_text).prop_map(|(mut name, port)| {
                name.extend_from_slice(port.as_bytes());
                name
            }),
            // Long labels and names, near 63 and 253 bytes.
            (1usize..70, 1usize..6).prop_map(|(label, labels)| {
                let mut name = vec![b'a'; label];
                for _ in 1..labels {
                    name.push(b'.');
                    name.extend(std::iter::repeat_n(b'B', label));
                }
                name
            }),
        ]
    }

    proptest! {
        #[test]
        fn the_fast_path_agrees_with_the_general_one(
            text in authority(),
            port in prop::option::of(prop_oneof![Just(80u16), Just(443), 1u16..]),
        ) {
            let mut buf = KeyBuf::new();
            let fast = normalise(&text, port, MAX_AUTHORITY_LEN, &mut buf).map(str::to_owned);
            prop_assert_eq!(fast, general(&text, port));
        }
    }

    #[test]
    fn the_usual_spellings_take_the_fast_path() {
        for (text, key) in [
            ("api.example.com", "api.example.com:443"),
            ("API.Example.COM:8443", "api.example.com:8443"),
            ("pay-1.internal:65535", "pay-1.internal:65535"),
            ("Host-5.Example.com.:443", "host-5.example.com:443"), // the root's dot dropped
        ] {
            let mut buf = KeyBuf::new();
            assert_eq!(push_plain(text.as_bytes(), Some(443), &mut buf), Some(()));
            assert_eq!(buf.as_str(), key);
        }
        for text in [
            "u@api.example",
            "api.example..",
            ".",
            "10.0.0.1",
            "[::1]",
            "a:080",
            "a:",
        ] {
            let mut buf = KeyBuf::new();
            assert_eq!(
                push_plain(text.as_bytes(), Some(443), &mut buf),
                None,
                "{text}"
            );
        }
    }
}
