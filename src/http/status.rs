//! [`status_json`]: a JSON view of a registry for a status endpoint.

use core::cmp::Ordering;
use core::fmt::{self, Write as _};
use core::time::Duration;
use std::collections::BinaryHeap;

use crate::clock::Clock;
use crate::observe::BreakerSnapshot;
use crate::outlier::OutlierRule;
use crate::registry::Registry;
use crate::state::State;

/// A JSON view of a registry for a status endpoint: the aggregates, and at
/// most `limit` upstreams with the count of the rest, so the page stays small
/// with a million tracked hosts.
///
/// ```json
/// {"tracked":2,"open":1,"half_open":0,"shown":1,"omitted":1,"upstreams":[
///   {"upstream":"127.0.0.1:9002","state":"open","retry_after_ms":812,"outlier_ejection":null,
///    "enough_calls":true,"failure_rate":0,"slow_call_rate":0.8,"calls":10,"failures":0,"slow":8,
///    "trips_in_a_row":1,"backoff_step":1,"ramp_fraction":null}]}
/// ```
///
/// The upstreams that need attention come first: open (and forced open),
/// then half-open, then the rest; by name within each. Reads snapshots only
/// (one pass, each shard under its read lock) and keeps at most `limit` of
/// them: memory is bounded by `limit`, time by the number of breakers.
///
/// While a window holds fewer than `min_calls` calls, `enough_calls` is
/// `false` and both rates are `null`: not enough calls yet to judge.
/// `backoff_step` and `ramp_fraction` are the snapshot's (the decaying
/// backoff step; the share admitted while ramping up after a recovery, else
/// `null`), and so is `outlier_ejection`: while the breaker is open because
/// its pool ejected it as an outlier ([`Outliers`](crate::Outliers)), the
/// rule that did — `"success_rate"`, `"failure_percentage"` or `"slow"`
/// ([`OutlierRule::as_str`](crate::OutlierRule::as_str)) — else `null`.
///
/// ```
/// use failfast::http::status_json;
/// use failfast::{Breaker, Registry};
///
/// let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(1)).build()?;
/// for host in ["a:80", "b:80", "c:80"] {
///     registry.handle(host).try_acquire().unwrap().success();
/// }
/// registry.handle("b:80").try_acquire().unwrap().failure(); // opens b
///
/// let json = status_json(&registry, 2);
/// assert!(json.starts_with(r#"{"tracked":3,"open":1,"half_open":0,"shown":2,"omitted":1,"#));
/// assert!(json.contains(r#""upstreams":[{"upstream":"b:80","state":"open""#)); // open first
/// assert!(!json.contains("c:80")); // over the limit
/// # Ok::<(), failfast::ConfigError>(())
/// ```
pub fn status_json<K: fmt::Display, H, C: Clock>(
    registry: &Registry<K, H, C>,
    limit: usize,
) -> String {
    // A max-heap of the `limit` first rows in display order: its top is the
    // row to drop when a better one comes.
    let mut kept: BinaryHeap<Row> = BinaryHeap::with_capacity(limit.min(1024) + 1);
    let mut seen = 0usize;
    registry.for_each_snapshot(|key, snapshot| {
        seen += 1;
        let rank = rank(snapshot.state);
        if limit == 0 || (kept.len() == limit && kept.peek().is_some_and(|top| rank > top.rank)) {
            return; // cannot make the page: no need to format its name
        }
        kept.push(Row {
            rank,
            name: key.to_string(),
            snapshot: *snapshot,
        });
        if kept.len() > limit {
            kept.pop();
        }
    });
    let rows = kept.into_sorted_vec();
    let mut out = format!(
        "{{\"tracked\":{},\"open\":{},\"half_open\":{},\"shown\":{},\"omitted\":{},\"upstreams\":[",
        registry.len(),
        registry.open_count(),
        registry.half_open_count(),
        rows.len(),
        seen - rows.len(),
    );
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_row(&mut out, &row.name, &row.snapshot);
    }
    out.push_str("]}");
    out
}

/// A rate in JSON: the number, or `null` while there are not enough calls
/// yet to judge one (fewer than `min_calls` in the window).
struct JsonRate(Option<f64>);

impl fmt::Display for JsonRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(rate) => write!(f, "{rate}"),
            None => f.write_str("null"),
        }
    }
}

/// A name in JSON (text that needs no escaping), or `null`.
struct JsonName(Option<&'static str>);

impl fmt::Display for JsonName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(name) => write!(f, "\"{name}\""),
            None => f.write_str("null"),
        }
    }
}

/// One upstream on the status page, ordered by (rank, name).
struct Row {
    rank: u8,
    name: String,
    snapshot: BreakerSnapshot,
}

impl PartialEq for Row {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Row {}

impl PartialOrd for Row {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Row {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.rank, &self.name).cmp(&(other.rank, &other.name))
    }
}

/// Open breakers first, then half-open ones, then the rest.
fn rank(state: State) -> u8 {
    match state {
        State::Open | State::ForcedOpen => 0,
        State::HalfOpen => 1,
        _ => 2,
    }
}

fn write_row(out: &mut String, name: &str, s: &BreakerSnapshot) {
    out.push_str("{\"upstream\":");
    json_string(out, name);
    let _ = write!(
        out,
        ",\"state\":\"{}\",\"retry_after_ms\":{},\"outlier_ejection\":{},\"enough_calls\":{},\
         \"failure_rate\":{},\"slow_call_rate\":{},\"calls\":{},\"failures\":{},\"slow\":{},\
         \"trips_in_a_row\":{},\"backoff_step\":{},\"ramp_fraction\":{}}}",
        s.state.as_str(),
        s.retry_after.map_or(0, millis),
        JsonName(s.outlier_ejection.map(OutlierRule::as_str)),
        s.failure_rate.is_some(),
        JsonRate(s.failure_rate),
        JsonRate(s.slow_call_rate),
        s.window.calls,
        s.window.failures,
        s.window.slow,
        s.trips_in_a_row,
        s.backoff_step,
        JsonRate(s.ramp_fraction),
    );
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Breaker;

    fn names(json: &str) -> Vec<&str> {
        json.split("\"upstream\":\"")
            .skip(1)
            .map(|rest| &rest[..rest.find('"').unwrap()])
            .collect()
    }

    #[test]
    fn the_page_keeps_the_open_ones_then_the_first_names() {
        let registry = Registry::<String>::builder(Breaker::builder().consecutive_failures(1))
            .build()
            .unwrap();
        for i in (0..50).rev() {
            let host = format!("h{i:02}");
            let handle = registry.handle(host.as_str());
            let permit = handle.try_acquire().unwrap();
            if i % 20 == 7 {
                permit.failure(); // h07, h27, h47 open
            } else {
                permit.success();
            }
        }
        let json = status_json(&registry, 5);
        assert_eq!(names(&json), ["h07", "h27", "h47", "h00", "h01"]);
        assert!(json.contains("\"shown\":5,\"omitted\":45,"), "{json}");

        let all = status_json(&registry, 1000);
        assert_eq!(names(&all).len(), 50);
        assert!(all.contains("\"shown\":50,\"omitted\":0,"));

        let none = status_json(&registry, 0);
        assert!(
            none.ends_with("\"shown\":0,\"omitted\":50,\"upstreams\":[]}"),
            "{none}"
        );
    }

    #[test]
    fn rows_come_open_then_half_open_then_closed_with_their_wait() {
        use crate::ManualClock;
        use core::time::Duration;

        let clock = ManualClock::new();
        let template = Breaker::builder()
            .consecutive_failures(1)
            .open_duration(Duration::from_secs(10));
        let registry = Registry::<String>::builder(template)
            .build_with_clock(clock.clone())
            .unwrap();
        let (a, b, c) = (
            registry.handle("a"),
            registry.handle("b"),
            registry.handle("c"),
        );
        c.try_acquire().unwrap().failure(); // c opens at 0 s
        clock.advance(Duration::from_secs(10));
        let _probe = c.try_acquire().unwrap(); // c is half-open, its probe in flight
        b.try_acquire().unwrap().failure(); // b opens at 10 s
        a.try_acquire().unwrap().success();

        let json = status_json(&registry, 10);
        let expected_start = concat!(
            r#"{"tracked":3,"open":1,"half_open":1,"shown":3,"omitted":0,"upstreams":["#,
            r#"{"upstream":"b","state":"open","retry_after_ms":10000,"#,
        );
        assert!(json.starts_with(expected_start), "{json}");
        assert!(
            json.contains(r#"},{"upstream":"c","state":"half_open","#),
            "{json}"
        );
        assert!(
            json.contains(r#"},{"upstream":"a","state":"closed","retry_after_ms":0,"#),
            "{json}"
        );
        assert!(json.ends_with("}]}"), "{json}");
        assert_eq!(json.matches("},{").count(), 2, "{json}");
        assert!(
            json.contains(r#""trips_in_a_row":1,"backoff_step":1,"ramp_fraction":null}"#),
            "the recovery fields: {json}"
        );
        let at = |name: &str| json.find(&format!(r#""upstream":"{name}""#)).unwrap();
        assert!(
            at("b") < at("c") && at("c") < at("a"),
            "open, half-open, closed: {json}"
        );
    }

    #[test]
    fn an_outlier_ejection_shows_its_rule() {
        use crate::{ManualClock, Outliers};
        use core::time::Duration;

        let clock = ManualClock::new();
        let template = Breaker::builder()
            .consecutive_failures(1000)
            .open_duration(Duration::from_secs(30))
            .jitter(0.0);
        let registry = Registry::<u64>::builder(template)
            .outliers(Outliers::envoy().interval(Duration::from_secs(10)))
            .build_with_clock(clock.clone())
            .unwrap();
        // Two intervals of traffic (host 0 succeeds half the time, the
        // other four always), then one call each: host 0 is ejected.
        for _ in 0..2 {
            for key in 0..5u64 {
                let host = registry.handle(&key);
                for i in 0..100 {
                    let permit = host.try_acquire().unwrap();
                    let _ = if key == 0 && i % 2 == 0 {
                        permit.failure()
                    } else {
                        permit.success()
                    };
                }
            }
            clock.advance(Duration::from_secs(10));
        }
        for key in 0..5u64 {
            let _ = registry.handle(&key).try_acquire().unwrap().success();
        }
        let json = status_json(&registry, 10);
        let row = |key: &str| {
            let start = json.find(&format!(r#"{{"upstream":"{key}","#)).unwrap();
            json[start..].split('}').next().unwrap().to_owned()
        };
        assert!(row("0").contains(r#""state":"open","#), "{json}");
        assert!(
            row("0").contains(r#""outlier_ejection":"success_rate","enough_calls""#),
            "{json}"
        );
        assert_eq!(json.matches(r#""outlier_ejection":null"#).count(), 4);
        assert!(
            json.contains(
                r#"{"upstream":"1","state":"closed","retry_after_ms":0,"outlier_ejection":null,"#
            ),
            "{json}"
        );
        // Its open period over, the probe round is no ejection.
        clock.advance(Duration::from_secs(31));
        let h0 = registry.handle(&0);
        let _probe = h0.try_acquire().unwrap();
        let json = status_json(&registry, 10);
        assert!(
            json.contains(
                r#"{"upstream":"0","state":"half_open","retry_after_ms":0,"outlier_ejection":null,"#
            ),
            "{json}"
        );
    }

    #[test]
    fn a_page_of_open_breakers_still_takes_a_later_closed_one() {
        // Whatever the iteration order, a closed breaker fits while the page
        // has room, even after open ones filled the top of the heap.
        let registry = Registry::<u32>::builder(Breaker::builder().consecutive_failures(1))
            .build()
            .unwrap();
        for key in 0..40 {
            let handle = registry.handle(&key);
            let permit = handle.try_acquire().unwrap();
            if key == 0 {
                permit.success();
            } else {
                permit.failure();
            }
        }
        let json = status_json(&registry, 100);
        assert!(json.contains("\"shown\":40,\"omitted\":0,"), "{json}");
        assert!(
            json.contains(r#"{"upstream":"0","state":"closed""#),
            "{json}"
        );
    }

    #[test]
    fn rows_are_equal_by_rank_and_name() {
        let registry = Registry::<u32>::builder(Breaker::builder().consecutive_failures(1))
            .build()
            .unwrap();
        let snapshot = registry.handle(&1).snapshot();
        let row = |rank, name: &str| Row {
            rank,
            name: name.to_owned(),
            snapshot,
        };
        assert!(row(0, "a") == row(0, "a"));
        assert!(row(0, "a") != row(0, "b"));
        assert!(row(0, "b") != row(1, "b"));
        assert!(row(0, "b") < row(1, "a"));
    }

    #[test]
    fn names_are_json_strings() {
        let mut out = String::new();
        json_string(&mut out, "a\"b\\c\nd e\u{1f}");
        assert_eq!(out, r#""a\"b\\c\u000ad e\u001f""#);
    }
}
