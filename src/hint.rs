//! Upstream hints: when an upstream says to come back ([`RetryHint`]), read
//! from `Retry-After` (RFC 9110 §10.2.3) or gRPC's `grpc-retry-pushback-ms`
//! (gRFC A6), and never trusted when malformed or absurd.
//!
//! # Upstream hints
//!
//! A 429 or 503 may say how long the upstream wants to be left alone. The
//! shipped classifiers read it (feature `http`):
//!
//! | classifier | header | on |
//! |---|---|---|
//! | [`HttpClassifier`] | `Retry-After`: delta-seconds, or an HTTP-date (IMF-fixdate, and the obsolete rfc850 and asctime forms RFC 9110 §5.6.7 says a recipient must accept) | 429 and 503 responses only; any other status is not read, at the head or (end-of-stream mode) at the end |
//! | [`GrpcClassifier`] | `grpc-retry-pushback-ms`: milliseconds | the response head, whatever its status (a trailers-only response carries it there) |
//! | [`GrpcEos`] (end-of-stream mode) | `grpc-retry-pushback-ms` | the trailers |
//!
//! Any [`Classify`] or [`ClassifyStream`] of your own can give hints too:
//! their `hint`, `head_hint` and `eos_hint` methods return none unless
//! overridden, and [`parse_retry_after`] and [`parse_pushback_ms`] read
//! any header you choose (counting the bad ones).
//!
//! [`HttpClassifier`]: crate::http::HttpClassifier
//! [`GrpcClassifier`]: crate::http::GrpcClassifier
//! [`GrpcEos`]: crate::http::GrpcEos
//! [`Classify`]: crate::http::Classify
//! [`ClassifyStream`]: crate::http::ClassifyStream
//!
//! With several `Retry-After` (or pushback) fields, the **first** one is
//! read and the others are not: RFC 9110 defines a single value, so a
//! second field is a broken or duplicated response, and reading one field
//! keeps the work bounded whatever the upstream sends. A first field that
//! is bad is ignored and counted; the classifier does not go on to the next.
//!
//! A hint is parsed here and resolved to a delay with
//! [`RetryHint::delay`], against the breaker's wall clock
//! ([`Breaker::wall`](crate::Breaker::wall), [`Clock::wall`](crate::Clock::wall),
//! which [`ManualClock`](crate::ManualClock) pins for tests), and goes with
//! the verdict to [`Permit::record_hinted`](crate::Permit::record_hinted);
//! the breaker clamps it further, to its own bounds. The tower layers and
//! the reqwest middleware do this for every verdict other than a success
//! (a success's hint is not read): at the head, or in end-of-stream mode at
//! the end of the body, where a hint read from the head is resolved.
//!
//! # Bad hints
//!
//! A hint is a number a remote server chose, so it is checked, and a bad
//! one is **ignored** (the verdict goes on without a hint) and **counted**
//! in [`hints_ignored_total`] (exported as
//! `circuit_breaker_hints_ignored_total` by the `metrics` exporter):
//!
//! | value | why it is bad |
//! |---|---|
//! | longer than [`MAX_HINT_LEN`] bytes | no valid hint is that long; refused before it is read, so a 64 KB header costs one length test |
//! | empty, or white space only | says nothing |
//! | negative (`-5`) | no such delay; for gRPC, gRFC A6 reads a negative or unparsable pushback as "do not retry": a breaker does not stop trying forever on one answer, so it is ignored like any other bad value |
//! | not a number, and not an HTTP-date in one of the three forms (`5s`, `1.5`, `+5`, a date with a wrong weekday, 31 February) | malformed |
//! | more than [`MAX_TRUSTED_HINT`] (one day), 10¹² s, or beyond `u64` | absurd: a server that means it can keep saying so |
//! | a date in the past, or exactly now (resolved by [`RetryHint::delay`]) | stale or a skewed clock: nothing to wait for |
//!
//! A `Retry-After: 0` (or a pushback of 0 ms) is not bad: it says "come back
//! now", and resolves to no delay without being counted. A missing header
//! is not a hint at all, and is not counted either.

use core::time::Duration;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::sync::{Ordering, HINTS_IGNORED as IGNORED};

/// The longest delay a hint may ask for and still be trusted: one day. A
/// longer one is ignored and counted ([`hints_ignored_total`]), not cut
/// down; the breaker clamps a trusted hint further, to its own maximum.
///
/// ```
/// use failfast::hint::{parse_retry_after, RetryHint, MAX_TRUSTED_HINT};
///
/// assert_eq!(parse_retry_after(b"86400"), Some(RetryHint::After(MAX_TRUSTED_HINT)));
/// assert_eq!(parse_retry_after(b"86401"), None);
/// ```
pub const MAX_TRUSTED_HINT: Duration = Duration::from_secs(86_400);

/// The longest header value read as a hint, in bytes, surrounding white
/// space included. The longest valid form (an rfc850 date on a Wednesday)
/// is 33 bytes; a longer value is refused by its length alone.
///
/// ```
/// use failfast::hint::{parse_retry_after, MAX_HINT_LEN};
///
/// let huge = vec![b'1'; 64 * 1024];
/// assert_eq!(parse_retry_after(&huge), None); // not scanned: its length refuses it
/// assert!(parse_retry_after(&huge[..MAX_HINT_LEN + 1]).is_none());
/// ```
pub const MAX_HINT_LEN: usize = 64;

/// When an upstream said to come back, as parsed: a delay, or a wall-clock
/// date that is resolved against a clock with [`delay`](Self::delay).
///
/// ```
/// use failfast::hint::{parse_retry_after, RetryHint};
/// use std::time::{Duration, UNIX_EPOCH};
///
/// assert_eq!(parse_retry_after(b"120"), Some(RetryHint::After(Duration::from_secs(120))));
/// let date = parse_retry_after(b"Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
/// assert_eq!(date, RetryHint::At(UNIX_EPOCH + Duration::from_secs(784_111_777)));
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RetryHint {
    /// Come back after this long (delta-seconds, pushback milliseconds).
    After(Duration),
    /// Come back at this wall-clock time (an HTTP-date).
    At(SystemTime),
}

impl RetryHint {
    /// The delay this hint asks for, seen from the wall-clock time
    /// `wall_now` (a breaker's [`Clock::wall`](crate::Clock::wall)).
    ///
    /// `None` when there is nothing to wait for: a zero delay (not counted),
    /// or a bad hint, which is counted in [`hints_ignored_total`] — a date
    /// now or in the past, or a delay beyond [`MAX_TRUSTED_HINT`] (a date
    /// more than a day ahead, or an `After` built by hand).
    ///
    /// ```
    /// use failfast::hint::RetryHint;
    /// use failfast::{Clock, ManualClock};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new(); // its wall clock is pinned
    /// let at = RetryHint::At(clock.wall() + Duration::from_secs(30));
    /// assert_eq!(at.delay(clock.wall()), Some(Duration::from_secs(30)));
    /// clock.advance(Duration::from_secs(10));
    /// assert_eq!(at.delay(clock.wall()), Some(Duration::from_secs(20)));
    /// clock.advance(Duration::from_secs(20));
    /// assert_eq!(at.delay(clock.wall()), None); // now: nothing to wait for
    ///
    /// assert_eq!(RetryHint::After(Duration::ZERO).delay(clock.wall()), None);
    /// ```
    pub fn delay(self, wall_now: SystemTime) -> Option<Duration> {
        counted(self.resolve(wall_now)).flatten()
    }

    /// [`delay`](Self::delay) without the count: `Err` for a bad hint.
    pub(crate) fn resolve(self, wall_now: SystemTime) -> Result<Option<Duration>, BadHint> {
        let delay = match self {
            RetryHint::After(d) => d,
            RetryHint::At(at) => match at.duration_since(wall_now) {
                Ok(d) if !d.is_zero() => d,
                // Exactly now, or earlier.
                _ => return Err(BadHint::Past),
            },
        };
        if delay > MAX_TRUSTED_HINT {
            Err(BadHint::TooLarge)
        } else {
            Ok((!delay.is_zero()).then_some(delay))
        }
    }
}

/// Why a hint was not trusted (the tests name the reason; the count does
/// not).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum BadHint {
    /// Longer than [`MAX_HINT_LEN`].
    TooLong,
    /// Empty or white space only.
    Empty,
    /// A sign in front of the number.
    Negative,
    /// Neither a number nor a date in a form RFC 9110 accepts.
    Malformed,
    /// More than [`MAX_TRUSTED_HINT`].
    TooLarge,
    /// A date now or before it (or before 1970).
    Past,
}

/// How many hints this process has ignored as bad (malformed, negative,
/// absurd, too long, or a date now or in the past; the table in the
/// [module docs](self)), since it started, across every breaker and
/// classifier. Monotone; published by the `metrics` exporter as
/// `circuit_breaker_hints_ignored_total`.
///
/// A rise says an upstream sends hints the breakers do not trust — a
/// misconfigured `Retry-After`, a clock far off — and that the breakers
/// fall back to their own open durations for it.
///
/// ```
/// use failfast::hint::{hints_ignored_total, parse_retry_after};
///
/// let before = hints_ignored_total();
/// assert_eq!(parse_retry_after(b"-5"), None);
/// assert!(hints_ignored_total() > before);
/// ```
pub fn hints_ignored_total() -> u64 {
    // Relaxed: a statistic read on its own; it orders no other memory.
    IGNORED.load(Ordering::Relaxed)
}

/// The value of `result`, counting a bad hint.
fn counted<T>(result: Result<T, BadHint>) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(_) => {
            // Relaxed: see `hints_ignored_total`.
            IGNORED.fetch_add(1, Ordering::Relaxed);
            #[cfg(test)]
            COUNTED_HERE.with(|n| n.set(n.get() + 1));
            None
        }
    }
}

#[cfg(test)]
thread_local! {
    /// This thread's share of [`IGNORED`].
    static COUNTED_HERE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// What this thread has counted in [`hints_ignored_total`]: exact, where
/// the process-wide total moves with every test running beside it.
#[cfg(test)]
// Its tests are not built under loom (nor those of `http`, without its feature).
#[cfg_attr(failfast_loom, allow(dead_code))]
pub(crate) fn ignored_on_this_thread() -> u64 {
    COUNTED_HERE.with(std::cell::Cell::get)
}

/// Parses a `Retry-After` value: delta-seconds (ASCII digits only) or an
/// HTTP-date (IMF-fixdate, rfc850 or asctime), with optional white space
/// (spaces and tabs) around it.
///
/// `None` for a bad value, which is counted in [`hints_ignored_total`]
/// (see the [module docs](self), "Bad hints"). A date is not resolved here:
/// one in the past is refused (and counted) by [`RetryHint::delay`], except
/// a year before 1970, refused here. A two-digit rfc850 year is read as
/// 20xx below 70 and 19xx from 70 (RFC 9110 reads it against the current
/// year; the two agree on every date within [`MAX_TRUSTED_HINT`] of now
/// until the end of 2069, and after that such a date is refused as past).
///
/// ```
/// use failfast::hint::{parse_retry_after, RetryHint};
/// use std::time::{Duration, UNIX_EPOCH};
///
/// let at = RetryHint::At(UNIX_EPOCH + Duration::from_secs(784_111_777));
/// assert_eq!(parse_retry_after(b" 5 "), Some(RetryHint::After(Duration::from_secs(5))));
/// assert_eq!(parse_retry_after(b"Sun, 06 Nov 1994 08:49:37 GMT"), Some(at));
/// assert_eq!(parse_retry_after(b"Sunday, 06-Nov-94 08:49:37 GMT"), Some(at));
/// assert_eq!(parse_retry_after(b"Sun Nov  6 08:49:37 1994"), Some(at));
/// for bad in [&b"-5"[..], b"5s", b"1000000000000", b"", b"  ", b"Mon, 06 Nov 1994 08:49:37 GMT"] {
///     assert_eq!(parse_retry_after(bad), None, "{bad:?}");
/// }
/// ```
pub fn parse_retry_after(value: &[u8]) -> Option<RetryHint> {
    counted(try_parse_retry_after(value))
}

/// Parses a gRPC `grpc-retry-pushback-ms` value: a non-negative decimal
/// integer of milliseconds, with optional white space around it.
///
/// `None` for a bad value, counted in [`hints_ignored_total`]. gRFC A6
/// reads a negative or unparsable pushback as "do not retry"; a breaker
/// does not take one answer as a reason to stop trying for good, so such a
/// value is ignored as bad, like any other.
///
/// ```
/// use failfast::hint::{parse_pushback_ms, RetryHint};
/// use std::time::Duration;
///
/// assert_eq!(parse_pushback_ms(b"1500"), Some(RetryHint::After(Duration::from_millis(1500))));
/// assert_eq!(parse_pushback_ms(b"-1"), None); // gRPC's "do not retry": ignored, counted
/// assert_eq!(parse_pushback_ms(b"86400001"), None); // more than a day
/// ```
pub fn parse_pushback_ms(value: &[u8]) -> Option<RetryHint> {
    counted(try_parse_pushback_ms(value))
}

/// [`parse_retry_after`] without the count.
pub(crate) fn try_parse_retry_after(value: &[u8]) -> Result<RetryHint, BadHint> {
    let value = trimmed(value)?;
    match value[0] {
        b'0'..=b'9' => {
            let secs = number(value, MAX_TRUSTED_HINT.as_secs())?;
            Ok(RetryHint::After(Duration::from_secs(secs)))
        }
        b'-' => Err(BadHint::Negative),
        _ => date(value).map(RetryHint::At),
    }
}

/// [`parse_pushback_ms`] without the count.
pub(crate) fn try_parse_pushback_ms(value: &[u8]) -> Result<RetryHint, BadHint> {
    let value = trimmed(value)?;
    if value[0] == b'-' {
        return Err(BadHint::Negative);
    }
    // `as`: one day of milliseconds fits in a u64.
    let ms = number(value, MAX_TRUSTED_HINT.as_millis() as u64)?;
    Ok(RetryHint::After(Duration::from_millis(ms)))
}

/// `value` without the optional white space around it (RFC 9110's OWS:
/// spaces and tabs), never empty; refused unread when too long.
fn trimmed(value: &[u8]) -> Result<&[u8], BadHint> {
    if value.len() > MAX_HINT_LEN {
        return Err(BadHint::TooLong);
    }
    let ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = value.iter().position(|b| !ows(b)).ok_or(BadHint::Empty)?;
    let end = value.iter().rposition(|b| !ows(b)).map_or(start, |i| i + 1);
    Ok(&value[start..end])
}

/// A decimal number of ASCII digits only, at most `max`.
fn number(digits: &[u8], max: u64) -> Result<u64, BadHint> {
    if !digits.iter().all(u8::is_ascii_digit) {
        return Err(BadHint::Malformed);
    }
    // Saturating: 64 digits overflow a u64; any such number is above `max`.
    let n = digits.iter().fold(0u64, |n, d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    });
    if n > max {
        Err(BadHint::TooLarge)
    } else {
        Ok(n)
    }
}

/// An HTTP-date in any of RFC 9110's three forms (§5.6.7), checked: a real
/// day of a real month, a time of day below 24:00:00, the weekday the date
/// falls on, a year from 1970.
fn date(s: &[u8]) -> Result<SystemTime, BadHint> {
    let fields = imf_fixdate(s)
        .or_else(|| rfc850(s))
        .or_else(|| asctime(s))
        .ok_or(BadHint::Malformed)?;
    fields.to_system_time()
}

/// The fields of an HTTP-date, as written.
struct DateFields {
    /// 0 = Monday.
    weekday: u64,
    day: u64,
    /// 1 = January.
    month: u64,
    year: u64,
    hour: u64,
    minute: u64,
    second: u64,
}

const WEEKDAYS: [&[u8]; 7] = [
    b"Monday",
    b"Tuesday",
    b"Wednesday",
    b"Thursday",
    b"Friday",
    b"Saturday",
    b"Sunday",
];

const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// `Sun, 06 Nov 1994 08:49:37 GMT`
fn imf_fixdate(s: &[u8]) -> Option<DateFields> {
    if s.len() != 29 || &s[3..5] != b", " || s[7] != b' ' || s[11] != b' ' || &s[25..] != b" GMT" {
        return None;
    }
    let (hour, minute, second) = time_of_day(&s[16..25])?;
    Some(DateFields {
        weekday: short_weekday(&s[..3])?,
        day: digits(&s[5..7])?,
        month: month(&s[8..11])?,
        year: digits(&s[12..16])?,
        hour,
        minute,
        second,
    })
}

/// `Sunday, 06-Nov-94 08:49:37 GMT`
fn rfc850(s: &[u8]) -> Option<DateFields> {
    let comma = s.iter().position(|&b| b == b',')?;
    let weekday = WEEKDAYS.iter().position(|name| *name == &s[..comma])?;
    let s = &s[comma..];
    // ", 06-Nov-94 08:49:37 GMT"
    if s.len() != 24 || s[1] != b' ' || s[4] != b'-' || s[8] != b'-' || &s[20..] != b" GMT" {
        return None;
    }
    let (hour, minute, second) = time_of_day(&s[11..20])?;
    let yy = digits(&s[9..11])?;
    Some(DateFields {
        weekday: weekday as u64,
        day: digits(&s[2..4])?,
        month: month(&s[5..8])?,
        year: if yy < 70 { 2000 + yy } else { 1900 + yy },
        hour,
        minute,
        second,
    })
}

/// `Sun Nov  6 08:49:37 1994` (or `Nov 06`)
fn asctime(s: &[u8]) -> Option<DateFields> {
    if s.len() != 24 || s[3] != b' ' || s[7] != b' ' || s[19] != b' ' {
        return None;
    }
    let day = match s[8] {
        b' ' => digits(&s[9..10])?,
        _ => digits(&s[8..10])?,
    };
    let (hour, minute, second) = time_of_day(&s[10..19])?;
    Some(DateFields {
        weekday: short_weekday(&s[..3])?,
        day,
        month: month(&s[4..7])?,
        year: digits(&s[20..24])?,
        hour,
        minute,
        second,
    })
}

/// ` 08:49:37`: hours, minutes and seconds, unchecked.
fn time_of_day(s: &[u8]) -> Option<(u64, u64, u64)> {
    if s.len() != 9 || s[0] != b' ' || s[3] != b':' || s[6] != b':' {
        return None;
    }
    Some((digits(&s[1..3])?, digits(&s[4..6])?, digits(&s[7..9])?))
}

fn short_weekday(s: &[u8]) -> Option<u64> {
    WEEKDAYS
        .iter()
        .position(|name| &name[..3] == s)
        .map(|i| i as u64)
}

fn month(s: &[u8]) -> Option<u64> {
    MONTHS
        .iter()
        .position(|name| &name[..] == s)
        .map(|i| i as u64 + 1)
}

/// A fixed number of ASCII digits (at most 4 here: no overflow).
fn digits(s: &[u8]) -> Option<u64> {
    s.iter().try_fold(0u64, |n, &d| {
        d.is_ascii_digit().then(|| n * 10 + u64::from(d - b'0'))
    })
}

impl DateFields {
    fn to_system_time(&self) -> Result<SystemTime, BadHint> {
        let valid = (1..=12).contains(&self.month)
            && (1..=days_in_month(self.year, self.month)).contains(&self.day)
            && self.hour < 24
            && self.minute < 60
            && self.second < 60;
        if !valid {
            return Err(BadHint::Malformed);
        }
        if self.year < 1970 {
            return Err(BadHint::Past);
        }
        let days = days_since_epoch(self.year, self.month, self.day);
        // 1970-01-01 was a Thursday (3, counting from Monday).
        if (days + 3) % 7 != self.weekday {
            return Err(BadHint::Malformed);
        }
        let secs = days * 86_400 + self.hour * 3_600 + self.minute * 60 + self.second;
        // At most the end of 9999: within every platform's SystemTime.
        UNIX_EPOCH
            .checked_add(Duration::from_secs(secs))
            .ok_or(BadHint::TooLarge)
    }
}

fn is_leap(year: u64) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a date from 1970 on (Howard Hinnant's
/// `days_from_civil`, on a year that starts in March).
fn days_since_epoch(year: u64, month: u64, day: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let year_of_era = y - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    // 719_468 days from 0000-03-01 to 1970-01-01.
    era * 146_097 + day_of_era - 719_468
}

// Not under loom: `ManualClock`'s atomics are loom's there, usable only
// inside a model.
#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};
    use proptest::prelude::*;

    /// Sun, 06 Nov 1994 08:49:37 GMT, RFC 9110's example date.
    const EXAMPLE: u64 = 784_111_777;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    /// A manual clock whose wall clock reads `secs` after the epoch.
    fn wall_at(secs: u64) -> ManualClock {
        let clock = ManualClock::new();
        clock.set_wall(at(secs));
        clock
    }

    /// `parse` refuses `value` for `why`, and the public function counts
    /// it: once, on this thread, and in the process-wide total.
    fn assert_bad(
        parse: fn(&[u8]) -> Option<RetryHint>,
        strict: fn(&[u8]) -> Result<RetryHint, BadHint>,
        value: &[u8],
        why: BadHint,
    ) {
        let shown = String::from_utf8_lossy(&value[..value.len().min(40)]).into_owned();
        assert_eq!(strict(value), Err(why), "{shown:?}");
        let (total, here) = (hints_ignored_total(), ignored_on_this_thread());
        assert_eq!(parse(value), None, "{shown:?}");
        assert_eq!(ignored_on_this_thread(), here + 1, "{shown:?} counted once");
        assert!(hints_ignored_total() > total, "{shown:?} in the total");
    }

    fn bad_retry_after(value: &[u8], why: BadHint) {
        assert_bad(parse_retry_after, try_parse_retry_after, value, why);
    }

    fn bad_pushback(value: &[u8], why: BadHint) {
        assert_bad(parse_pushback_ms, try_parse_pushback_ms, value, why);
    }

    /// `value` parses to `hint`, and nothing is counted.
    fn good(parse: fn(&[u8]) -> Option<RetryHint>, value: &[u8], hint: RetryHint) {
        let here = ignored_on_this_thread();
        assert_eq!(
            parse(value),
            Some(hint),
            "{:?}",
            String::from_utf8_lossy(value)
        );
        assert_eq!(ignored_on_this_thread(), here, "a good hint is not counted");
    }

    // Each header form.

    #[test]
    fn delta_seconds() {
        let after = |s| RetryHint::After(Duration::from_secs(s));
        good(parse_retry_after, b"120", after(120));
        good(parse_retry_after, b"0", after(0));
        good(parse_retry_after, b"007", after(7));
        good(parse_retry_after, b" \t5\t ", after(5)); // OWS around it
        good(parse_retry_after, b"86400", after(86_400));
        let clock = wall_at(EXAMPLE);
        assert_eq!(
            after(120).delay(clock.wall()),
            Some(Duration::from_secs(120))
        );
    }

    #[test]
    fn retry_after_zero_is_no_delay_and_not_bad() {
        let clock = ManualClock::new();
        let here = ignored_on_this_thread();
        let hint = parse_retry_after(b"0").unwrap();
        assert_eq!(hint.delay(clock.wall()), None);
        let pushback = parse_pushback_ms(b"0").unwrap();
        assert_eq!(pushback.delay(clock.wall()), None);
        assert_eq!(ignored_on_this_thread(), here);
    }

    #[test]
    fn imf_fixdate_resolves_against_the_pinned_wall_clock() {
        good(
            parse_retry_after,
            b"Sun, 06 Nov 1994 08:49:37 GMT",
            RetryHint::At(at(EXAMPLE)),
        );
        let clock = wall_at(EXAMPLE - 90);
        let hint = parse_retry_after(b"Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(hint.delay(clock.wall()), Some(Duration::from_secs(90)));
        clock.advance(Duration::from_millis(89_500));
        assert_eq!(hint.delay(clock.wall()), Some(Duration::from_millis(500)));
        // A date of today's kind, with the wall clock just before it.
        let clock = wall_at(1_700_000_000);
        let hint = parse_retry_after(b"Tue, 14 Nov 2023 22:13:50 GMT").unwrap();
        assert_eq!(hint.delay(clock.wall()), Some(Duration::from_secs(30)));
    }

    #[test]
    fn rfc850_date() {
        good(
            parse_retry_after,
            b"Sunday, 06-Nov-94 08:49:37 GMT",
            RetryHint::At(at(EXAMPLE)),
        );
        // The longest weekday, a year below 70 read as 20xx.
        good(
            parse_retry_after,
            b"Wednesday, 15-Nov-23 00:00:00 GMT",
            RetryHint::At(at(1_700_006_400)),
        );
        let clock = wall_at(1_700_006_400 - 45);
        let hint = parse_retry_after(b"Wednesday, 15-Nov-23 00:00:00 GMT").unwrap();
        assert_eq!(hint.delay(clock.wall()), Some(Duration::from_secs(45)));
    }

    #[test]
    fn asctime_date() {
        good(
            parse_retry_after,
            b"Sun Nov  6 08:49:37 1994",
            RetryHint::At(at(EXAMPLE)),
        );
        good(
            parse_retry_after,
            b"Sun Nov 06 08:49:37 1994",
            RetryHint::At(at(EXAMPLE)),
        );
        let clock = wall_at(EXAMPLE - 1);
        let hint = parse_retry_after(b"Sun Nov  6 08:49:37 1994").unwrap();
        assert_eq!(hint.delay(clock.wall()), Some(Duration::from_secs(1)));
    }

    #[test]
    fn pushback_milliseconds() {
        let after = |ms| RetryHint::After(Duration::from_millis(ms));
        good(parse_pushback_ms, b"1500", after(1_500));
        good(parse_pushback_ms, b" 250 ", after(250));
        good(parse_pushback_ms, b"86400000", after(86_400_000));
        assert_eq!(
            after(1_500).delay(ManualClock::new().wall()),
            Some(Duration::from_millis(1_500))
        );
    }

    #[test]
    fn dates_at_the_edges_of_the_calendar() {
        // Leap days, the first instant, the last second of 9999.
        good(
            parse_retry_after,
            b"Thu, 29 Feb 2024 12:00:00 GMT",
            RetryHint::At(at(1_709_208_000)),
        );
        good(
            parse_retry_after,
            b"Tue, 29 Feb 2000 00:00:00 GMT",
            RetryHint::At(at(951_782_400)),
        );
        good(
            parse_retry_after,
            b"Thu, 01 Jan 1970 00:00:00 GMT",
            RetryHint::At(UNIX_EPOCH),
        );
        good(
            parse_retry_after,
            b"Fri, 31 Dec 9999 23:59:59 GMT",
            RetryHint::At(at(253_402_300_799)),
        );
    }

    // Each bad input.

    #[test]
    fn negative_values_are_bad() {
        bad_retry_after(b"-5", BadHint::Negative);
        bad_retry_after(b" -0", BadHint::Negative);
        bad_pushback(b"-1", BadHint::Negative);
        bad_pushback(b"-1000", BadHint::Negative);
    }

    #[test]
    fn non_digits_are_bad() {
        for value in [
            &b"5s"[..],
            b"1.5",
            b"+5",
            b"0x10",
            b"5 5",
            b"five",
            b"\xff\xfe",
            b"\x005",
        ] {
            bad_retry_after(value, BadHint::Malformed);
        }
        for value in [
            &b"1.5"[..],
            b"+5",
            b"250ms",
            b"Sun, 06 Nov 1994 08:49:37 GMT",
        ] {
            bad_pushback(value, BadHint::Malformed);
        }
    }

    #[test]
    fn absurd_delays_are_bad() {
        bad_retry_after(b"1000000000000", BadHint::TooLarge); // 10^12 s
        bad_retry_after(b"86401", BadHint::TooLarge);
        bad_pushback(b"86400001", BadHint::TooLarge);
        bad_pushback(b"1000000000000000", BadHint::TooLarge);
    }

    #[test]
    fn values_beyond_u64_are_bad_not_wrapped() {
        let beyond = b"18446744073709551616"; // u64::MAX + 1
        bad_retry_after(beyond, BadHint::TooLarge);
        bad_pushback(beyond, BadHint::TooLarge);
        // 60 digits: 2^64 * 10 + 1 would wrap to a small number unchecked.
        let sixty = [b'9'; 60];
        bad_retry_after(&sixty, BadHint::TooLarge);
        bad_retry_after(b"184467440737095516170", BadHint::TooLarge);
    }

    #[test]
    fn a_date_in_the_past_is_bad_when_resolved() {
        let clock = wall_at(1_700_000_000);
        let hint = parse_retry_after(b"Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(hint.resolve(clock.wall()), Err(BadHint::Past));
        let here = ignored_on_this_thread();
        let total = hints_ignored_total();
        assert_eq!(hint.delay(clock.wall()), None);
        assert_eq!(ignored_on_this_thread(), here + 1);
        assert!(hints_ignored_total() > total);
        // A year before 1970 is refused as it is parsed.
        bad_retry_after(b"Wed, 31 Dec 1969 23:59:59 GMT", BadHint::Past);
        bad_retry_after(b"Wed Dec 31 23:59:59 1969", BadHint::Past);
        // A two-digit year never is: 69 is 2069, on another weekday.
        bad_retry_after(b"Wednesday, 31-Dec-69 23:59:59 GMT", BadHint::Malformed);
        good(
            parse_retry_after,
            b"Tuesday, 31-Dec-69 23:59:59 GMT",
            RetryHint::At(at(3_155_759_999)),
        );
    }

    #[test]
    fn a_date_exactly_now_is_bad_when_resolved() {
        let clock = wall_at(EXAMPLE);
        let hint = parse_retry_after(b"Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(hint.resolve(clock.wall()), Err(BadHint::Past));
        let here = ignored_on_this_thread();
        assert_eq!(hint.delay(clock.wall()), None);
        assert_eq!(ignored_on_this_thread(), here + 1);
        // One nanosecond earlier it was a delay.
        let before = RetryHint::At(at(EXAMPLE)).resolve(at(EXAMPLE) - Duration::from_nanos(1));
        assert_eq!(before, Ok(Some(Duration::from_nanos(1))));
    }

    #[test]
    fn a_date_more_than_a_day_ahead_is_bad_when_resolved() {
        let clock = wall_at(EXAMPLE - 86_401);
        let hint = parse_retry_after(b"Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(hint.resolve(clock.wall()), Err(BadHint::TooLarge));
        clock.advance(Duration::from_secs(1));
        assert_eq!(
            hint.resolve(clock.wall()),
            Ok(Some(MAX_TRUSTED_HINT)),
            "exactly a day is trusted"
        );
        // An `After` built by hand is held to the same bound.
        let by_hand = RetryHint::After(Duration::from_secs(1_000_000_000_000));
        assert_eq!(by_hand.resolve(clock.wall()), Err(BadHint::TooLarge));
        let here = ignored_on_this_thread();
        assert_eq!(by_hand.delay(clock.wall()), None);
        assert_eq!(ignored_on_this_thread(), here + 1);
    }

    #[test]
    fn a_64_kb_value_is_refused_by_its_length() {
        let huge = vec![b'1'; 64 * 1024];
        bad_retry_after(&huge, BadHint::TooLong);
        bad_pushback(&huge, BadHint::TooLong);
        // So is a valid hint padded past the bound; at the bound it is read.
        let mut padded = vec![b' '; MAX_HINT_LEN - 2];
        padded.extend_from_slice(b"30");
        assert_eq!(
            try_parse_retry_after(&padded),
            Ok(RetryHint::After(Duration::from_secs(30)))
        );
        padded.push(b' ');
        bad_retry_after(&padded, BadHint::TooLong);
    }

    #[test]
    fn empty_and_white_space_only_are_bad() {
        for value in [&b""[..], b" ", b"\t", b" \t  \t"] {
            bad_retry_after(value, BadHint::Empty);
            bad_pushback(value, BadHint::Empty);
        }
    }

    #[test]
    fn malformed_dates_are_bad() {
        for value in [
            &b"Mon, 06 Nov 1994 08:49:37 GMT"[..], // the wrong weekday
            b"Sun, 06 Nov 1994 08:49:37 UTC",      // not GMT
            b"Sun, 6 Nov 1994 08:49:37 GMT",       // one-digit day
            b"Sun, 06 nov 1994 08:49:37 GMT",      // case matters
            b"Sun, 06 Nov 1994 24:00:00 GMT",      // no such hour
            b"Sun, 06 Nov 1994 08:60:37 GMT",
            b"Sun, 06 Nov 1994 08:49:60 GMT", // no leap second
            b"Sat, 31 Feb 2024 00:00:00 GMT", // no such day
            b"Fri, 29 Feb 2023 00:00:00 GMT", // not a leap year
            b"Mon, 29 Feb 2100 00:00:00 GMT", // nor is 2100
            b"Sun, 00 Nov 1994 08:49:37 GMT",
            b"Sun,  06 Nov 1994 08:49:37 GMT", // a space too many
            b"Sun, 06 Nov 1994 08:49:37 GMT,",
            b"Sunday, 06-Nov-1994 08:49:37 GMT", // rfc850 with four digits
            b"Sun, 06-Nov-94 08:49:37 GMT",      // rfc850 with a short weekday
            b"Sunday, 06 Nov 1994 08:49:37 GMT", // IMF with a long weekday
            b"Sun Nov  6 08:49:37 1994 GMT",     // asctime has no zone
            b"Sun Nov 6 08:49:37 1994",          // asctime pads with a space
            b"Sun Nov  0 08:49:37 1994",
            b"2024-11-06T08:49:37Z", // ISO 8601 is not HTTP's
            b",",
            b"Sun",
        ] {
            bad_retry_after(value, BadHint::Malformed);
        }
    }

    #[test]
    fn the_first_header_field_is_what_the_classifiers_read() {
        // A header value with a comma is one value, not a list.
        bad_retry_after(b"5, 10", BadHint::Malformed);
    }

    #[test]
    fn the_manual_wall_clock_moves_with_the_manual_clock() {
        let clock = ManualClock::new();
        let base = at(ManualClock::DEFAULT_WALL_SECS);
        assert_eq!(clock.wall(), base);
        clock.advance(Duration::from_secs(5));
        assert_eq!(clock.wall(), base + Duration::from_secs(5));
        clock.set(crate::Nanos::from_secs(60));
        assert_eq!(clock.wall(), base + Duration::from_secs(60));
        // Set below the reading (wrapping base): still exact.
        clock.set_wall(at(10));
        assert_eq!(clock.wall(), at(10));
        clock.advance(Duration::from_secs(1));
        assert_eq!(clock.wall(), at(11));
        // Before the epoch: the epoch.
        clock.set_wall(UNIX_EPOCH - Duration::from_secs(1));
        assert_eq!(clock.wall(), UNIX_EPOCH);
        // Through an Arc too.
        let shared = std::sync::Arc::new(clock.clone());
        assert_eq!(Clock::wall(&shared), UNIX_EPOCH);
    }

    /// The rfc850 and asctime forms of the date `secs` after the epoch,
    /// written from httpdate's IMF-fixdate.
    fn obsolete_forms(secs: u64) -> (String, String) {
        let imf = httpdate::fmt_http_date(at(secs));
        let (day, month, year, time) = (&imf[5..7], &imf[8..11], &imf[12..16], &imf[17..25]);
        let weekday = std::str::from_utf8(WEEKDAYS[weekday_of(&imf[..3])]).unwrap();
        let rfc850 = format!("{weekday}, {day}-{month}-{} {time} GMT", &year[2..]);
        let asc_day = day
            .strip_prefix('0')
            .map_or(day.to_owned(), |d| format!(" {d}"));
        let asctime = format!("{} {month} {asc_day} {time} {year}", &imf[..3]);
        (rfc850, asctime)
    }

    fn weekday_of(short: &str) -> usize {
        WEEKDAYS
            .iter()
            .position(|w| &w[..3] == short.as_bytes())
            .unwrap()
    }

    proptest! {
        #[test]
        fn retry_after_never_panics_and_bounds_every_delta(value in proptest::collection::vec(any::<u8>(), 0..80)) {
            match try_parse_retry_after(&value) {
                Ok(RetryHint::After(d)) => prop_assert!(d <= MAX_TRUSTED_HINT),
                Ok(RetryHint::At(t)) => prop_assert!(t >= UNIX_EPOCH),
                Err(_) => {}
            }
            let _ = parse_retry_after(&value);
            let _ = parse_pushback_ms(&value);
        }

        #[test]
        fn digit_strings_are_trusted_up_to_the_bound(value in "[0-9]{1,30}") {
            let n: u128 = value.parse().unwrap();
            let parsed = try_parse_retry_after(value.as_bytes());
            if n <= 86_400 {
                prop_assert_eq!(parsed, Ok(RetryHint::After(Duration::from_secs(n as u64))));
            } else {
                prop_assert_eq!(parsed, Err(BadHint::TooLarge));
            }
            let parsed = try_parse_pushback_ms(value.as_bytes());
            if n <= 86_400_000 {
                prop_assert_eq!(parsed, Ok(RetryHint::After(Duration::from_millis(n as u64))));
            } else {
                prop_assert_eq!(parsed, Err(BadHint::TooLarge));
            }
        }

        /// Every second from 1970 to 9999, in each of the three forms,
        /// agrees with httpdate (a well-used parser) on the instant.
        #[test]
        fn every_form_agrees_with_httpdate(secs in 0u64..253_402_300_800) {
            let imf = httpdate::fmt_http_date(at(secs));
            prop_assert_eq!(try_parse_retry_after(imf.as_bytes()), Ok(RetryHint::At(at(secs))));
            prop_assert_eq!(httpdate::parse_http_date(&imf).ok(), Some(at(secs)));
            let (rfc850, asctime) = obsolete_forms(secs);
            prop_assert_eq!(try_parse_retry_after(asctime.as_bytes()), Ok(RetryHint::At(at(secs))));
            // Two-digit years: 1970–2069 only.
            let year: u64 = imf[12..16].parse().unwrap();
            if (1970..2070).contains(&year) {
                prop_assert_eq!(try_parse_retry_after(rfc850.as_bytes()), Ok(RetryHint::At(at(secs))));
                prop_assert_eq!(httpdate::parse_http_date(&rfc850).ok(), Some(at(secs)));
            }
        }

        /// A date with one byte changed is accepted by this parser exactly
        /// when httpdate accepts it, as the same instant.
        #[test]
        fn a_mutated_date_is_judged_as_httpdate_judges_it(
            secs in 0u64..253_402_300_800,
            form in 0usize..3,
            at_byte in 0usize..40,
            byte in prop_oneof![Just(b' '), Just(b'0'), Just(b'9'), Just(b':'), Just(b','), Just(b'-'), 0x21u8..0x7f],
        ) {
            let imf = httpdate::fmt_http_date(at(secs));
            let (rfc850, asctime) = obsolete_forms(secs);
            let mut value = [imf, rfc850, asctime][form].clone().into_bytes();
            let i = at_byte % value.len();
            value[i] = byte;
            let ours = try_parse_retry_after(&value).ok();
            let theirs = std::str::from_utf8(&value)
                .ok()
                .and_then(|s| httpdate::parse_http_date(s).ok())
                .map(RetryHint::At);
            // httpdate does not read the space between an rfc850 date's
            // year and its hour: there it accepts what we refuse.
            let comma = value.iter().position(|&b| b == b',').unwrap_or(0);
            let lenient = form == 1 && i == comma + 11 && ours.is_none();
            if !lenient {
                prop_assert_eq!(ours, theirs, "{:?}", String::from_utf8_lossy(&value));
            }
        }
    }
}
