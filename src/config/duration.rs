//! Durations as text: `"500ms"`, `"30s"`, `"5m"`, `"1h30m"`, `"1d"`.
//!
//! An integer and a unit, repeated; the parts add up. No fractions
//! (`"1500ms"`, not `"1.5s"`), no spaces, no bare numbers: a number without a
//! unit is the mistake this format exists to prevent. Written back in the
//! largest unit that holds the duration exactly, so text → duration → text
//! is stable and duration → text → duration is exact.

use core::time::Duration;

use crate::error::ConfigError;

/// The allowed range in every duration's parse error.
pub(crate) const DURATION_FORMAT: &str =
    "a duration: integers with units ns, us, ms, s, m, h, d, e.g. \"500ms\", \"30s\", \"1h30m\"";

/// Units from the largest down, in nanoseconds.
const UNITS: [(&str, u128); 7] = [
    ("d", 86_400_000_000_000),
    ("h", 3_600_000_000_000),
    ("m", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("ns", 1),
];

/// Parses `text` for `field`; a [`ConfigError`] naming the field otherwise.
pub(crate) fn parse(field: &'static str, text: &str) -> Result<Duration, ConfigError> {
    parse_nanos(text)
        .and_then(from_nanos)
        .ok_or_else(|| ConfigError::new(field, DURATION_FORMAT, text))
}

/// `d` as text in its largest exact unit (`"0s"` for zero).
pub(crate) fn format(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    let (unit, size) = UNITS
        .iter()
        .copied()
        .find(|(_, size)| nanos.is_multiple_of(*size))
        .unwrap_or(("ns", 1));
    format!("{}{unit}", nanos / size)
}

fn parse_nanos(text: &str) -> Option<u128> {
    let mut rest = text;
    let mut total: u128 = 0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let letters = rest[digits..]
            .chars()
            .take_while(|c| c.is_alphabetic())
            .map(char::len_utf8)
            .sum::<usize>();
        if digits == 0 || letters == 0 {
            return None;
        }
        let number: u128 = rest[..digits].parse().ok()?;
        let unit = match &rest[digits..digits + letters] {
            "µs" => 1_000,
            unit => UNITS.iter().find(|(name, _)| *name == unit)?.1,
        };
        total = total.checked_add(number.checked_mul(unit)?)?;
        rest = &rest[digits + letters..];
    }
    Some(total)
}

fn from_nanos(nanos: u128) -> Option<Duration> {
    let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
    // The remainder is below 10⁹: it fits.
    let sub = (nanos % 1_000_000_000) as u32;
    Some(Duration::new(secs, sub))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Duration {
        parse("open_duration", text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    #[test]
    fn every_unit_and_sums() {
        assert_eq!(ok("7ns"), Duration::from_nanos(7));
        assert_eq!(ok("7us"), Duration::from_micros(7));
        assert_eq!(ok("7µs"), Duration::from_micros(7));
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("30s"), Duration::from_secs(30));
        assert_eq!(ok("5m"), Duration::from_secs(300));
        assert_eq!(ok("2h"), Duration::from_secs(7200));
        assert_eq!(ok("1d"), Duration::from_secs(86_400));
        assert_eq!(ok("1h30m"), Duration::from_secs(5400));
        assert_eq!(ok("1s500ms"), Duration::from_millis(1500));
        assert_eq!(ok("0s"), Duration::ZERO);
    }

    #[test]
    fn malformed_text_names_the_field_and_the_format() {
        for bad in [
            "", "30", "s", "1.5s", "30 s", " 30s", "30s ", "-1s", "5min", "1y", "30S", "1h30",
        ] {
            let e = parse("probe_lease", bad).expect_err(bad);
            assert_eq!(e.field(), "probe_lease");
            assert_eq!(e.allowed(), DURATION_FORMAT);
            assert_eq!(e.found(), format!("{bad:?}"));
        }
        // Past what a `Duration` holds, and past what the sum holds.
        assert!(parse("jitter", "18446744073709551616s").is_err());
        assert!(parse("jitter", &format!("{}d", u128::MAX)).is_err());
        assert!(parse("jitter", "340282366920938463463374607431768211455ns1ns").is_err());
    }

    #[test]
    fn written_in_the_largest_exact_unit_and_read_back_exactly() {
        for (d, text) in [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(1), "1ns"),
            (Duration::from_micros(1500), "1500us"),
            (Duration::from_millis(500), "500ms"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_secs(300), "5m"),
            (Duration::from_secs(5400), "90m"),
            (Duration::from_secs(86_400), "1d"),
            (
                Duration::from_secs(86_400) + Duration::from_nanos(1),
                "86400000000001ns",
            ),
        ] {
            assert_eq!(format(d), text);
            assert_eq!(ok(text), d);
        }
        assert_eq!(ok(&format(Duration::MAX)), Duration::MAX);
    }
}
