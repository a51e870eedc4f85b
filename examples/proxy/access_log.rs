//! The log: one logfmt line per request (`access …`) and per breaker
//! transition (`transition …`), each with its UTC time, written to stderr
//! by a thread of its own.
//!
//! A request formats its line into a shared buffer (a mutex held for a
//! copy) and wakes the writer if the buffer was empty. The writer then lets
//! lines gather for [`GATHER`] and writes them all at once: at most one
//! `write(2)` per line at a low rate, and one per 20 ms under load (a wake
//! and a write per line cost a tenth of the proxy's throughput). A line
//! reaches stderr within about 20 ms of its request; the request never
//! waits for stderr.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::Condvar;
use std::time::{SystemTime, UNIX_EPOCH};

use super::*;

/// How long the writer lets lines gather after the first one.
pub const GATHER: std::time::Duration = std::time::Duration::from_millis(20);

/// What the requests and the writer share.
#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Lines are waiting (or the log is closing).
    ready: Condvar,
    /// The writer wrote a batch.
    written: Condvar,
}

#[derive(Default)]
struct State {
    /// Lines not written yet.
    lines: Vec<u8>,
    /// Lines added, and lines written, since the start.
    added: u64,
    done: u64,
    closing: bool,
}

/// Where the proxy's lines go. Dropping it writes what is left and ends its
/// thread.
pub struct Log {
    shared: Arc<Shared>,
}

impl Log {
    /// Starts the writer thread.
    pub fn new() -> Log {
        let shared = Arc::new(Shared::default());
        let writer = shared.clone();
        std::thread::Builder::new()
            .name("proxy-log".into())
            .spawn(move || write_until_closed(&writer))
            .expect("a thread for the log");
        Log { shared }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds one line: `kind time=…`, then what `fields` writes, then `\n`.
    ///
    /// The line is made in a buffer of the thread's own (no allocation once
    /// it has grown), with the time's text up to the second kept from the
    /// thread's previous line of the same second.
    pub fn line(&self, kind: &str, fields: impl FnOnce(&mut String)) {
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let Scratch { line, second, date } = &mut *scratch;
            line.clear();
            line.push_str(kind);
            line.push_str(" time=");
            let since = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            if *second != Some(since.as_secs()) {
                date.clear();
                push_date(date, since.as_secs());
                *second = Some(since.as_secs());
            }
            line.push_str(date);
            line.push('.');
            push_padded(line, since.subsec_millis().into(), 3);
            line.push('Z');
            fields(line);
            line.push('\n');
            let mut state = self.state();
            let was_empty = state.lines.is_empty();
            state.lines.extend_from_slice(line.as_bytes());
            state.added += 1;
            drop(state);
            if was_empty {
                self.shared.ready.notify_one();
            }
        });
    }

    /// Returns once every line added so far is written.
    pub fn flush(&self) {
        let mut state = self.state();
        let target = state.added;
        while state.done < target {
            self.shared.ready.notify_one();
            state = self
                .shared
                .written
                .wait(state)
                .unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl Default for Log {
    fn default() -> Self {
        Log::new()
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        self.flush();
        self.state().closing = true;
        self.shared.ready.notify_one();
    }
}

/// The writer: waits for lines, takes them all, writes them at once.
fn write_until_closed(shared: &Shared) {
    let mut batch = Vec::with_capacity(64 * 1024);
    let mut state = shared.state.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        while state.lines.is_empty() && !state.closing {
            state = shared.ready.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        if state.lines.is_empty() {
            return; // closing, and nothing left
        }
        if !state.closing {
            // Let the lines of the next few milliseconds join this one.
            drop(state);
            std::thread::sleep(GATHER);
            state = shared.state.lock().unwrap_or_else(|p| p.into_inner());
        }
        std::mem::swap(&mut state.lines, &mut batch);
        let upto = state.added;
        drop(state);
        let _ = std::io::stderr().write_all(&batch);
        batch.clear();
        state = shared.state.lock().unwrap_or_else(|p| p.into_inner());
        state.done = upto;
        shared.written.notify_all();
    }
}

/// A thread's line buffer, and its last line's time to the second.
#[derive(Default)]
struct Scratch {
    line: String,
    second: Option<u64>,
    /// `2026-12-06T14:03:00` for `second`.
    date: String,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::default();
}

/// `2026-12-06T14:03:00`: the UTC time `secs` after the epoch, to the
/// second (a line adds `.123Z`).
fn push_date(out: &mut String, secs: u64) {
    let secs = secs as i64;
    let (days, of_day) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    let _ = write!(
        out,
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60,
    );
}

/// `n` in decimal, at least `width` digits (zeros in front), without
/// `fmt`'s machinery (a log line has several numbers).
pub(crate) fn push_padded(out: &mut String, mut n: u64, width: usize) {
    let mut digits = [b'0'; 20];
    let mut start = digits.len();
    while n > 0 || digits.len() - start < width.max(1) {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    // ASCII digits.
    out.push_str(std::str::from_utf8(&digits[start..]).unwrap_or_default());
}

/// `text` as `{:?}` writes it (quoted, escaped), without `fmt`'s machinery
/// when nothing needs escaping.
fn push_quoted(out: &mut String, text: &str) {
    if text
        .bytes()
        .all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\')
    {
        out.push('"');
        out.push_str(text);
        out.push('"');
    } else {
        let _ = write!(out, "{text:?}");
    }
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A request's access-log line and its count, written when its answer is
/// ready, or when the client goes away first: its handler's future is then
/// dropped, and so is this, which logs `status=499 decision=abandoned`.
pub struct Pending<'p> {
    proxy: &'p Proxy,
    client: &'p Peer,
    method: Method,
    uri: Uri,
    started: Instant,
    /// The route's name and upstream, once known.
    pub route: Option<(&'p str, &'p Authority)>,
    done: bool,
}

impl<'p> Pending<'p> {
    pub fn new(proxy: &'p Proxy, client: &'p Peer, method: Method, uri: Uri) -> Pending<'p> {
        Pending {
            proxy,
            client,
            method,
            uri,
            started: Instant::now(),
            route: None,
            done: false,
        }
    }

    /// The answer is ready: count it and log it.
    pub fn answered(mut self, status: StatusCode, decision: Decision) {
        self.done = true;
        self.finish(status.as_u16(), decision);
    }

    fn finish(&self, status: u16, decision: Decision) {
        if let Some((route, _)) = self.route {
            self.proxy.count(route, decision);
        }
        if !self.proxy.settings.access_log {
            return;
        }
        let took = self.started.elapsed();
        let (route, upstream) = match self.route {
            Some((route, upstream)) => (route, upstream.as_str()),
            None => ("-", "-"),
        };
        self.proxy.log.line("access", |line| {
            line.push_str(" client=");
            line.push_str(self.client.ip_str());
            line.push_str(" method=");
            line.push_str(self.method.as_str());
            // The path without its query, which may carry secrets.
            line.push_str(" path=");
            push_quoted(line, self.uri.path());
            line.push_str(" route=");
            line.push_str(route);
            line.push_str(" upstream=");
            line.push_str(upstream);
            line.push_str(" status=");
            push_padded(line, status.into(), 1);
            // Milliseconds to the microsecond: `12.345`.
            let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
            line.push_str(" duration_ms=");
            push_padded(line, micros / 1000, 1);
            line.push('.');
            push_padded(line, micros % 1000, 3);
            line.push_str(" decision=");
            line.push_str(decision.as_str());
        });
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.done {
            // nginx's "client closed request".
            self.finish(499, Decision::Abandoned);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbers_and_paths_as_fmt_writes_them() {
        let padded = |n, width| {
            let mut s = String::new();
            super::push_padded(&mut s, n, width);
            s
        };
        assert_eq!(padded(0, 1), "0");
        assert_eq!(padded(7, 3), "007");
        assert_eq!(padded(12_345, 3), "12345");
        assert_eq!(padded(u64::MAX, 1), u64::MAX.to_string());
        for path in [
            "/healthy/",
            "/a b/c",
            "/q\"uote",
            "/back\\slash",
            "/tab\t",
            "/é",
        ] {
            let mut s = String::new();
            super::push_quoted(&mut s, path);
            assert_eq!(s, format!("{path:?}"));
        }
    }

    #[test]
    fn dates() {
        assert_eq!(super::civil_from_days(0), (1970, 1, 1));
        assert_eq!(super::civil_from_days(20_428), (2025, 12, 6));
        assert_eq!(super::civil_from_days(11_016), (2000, 2, 29));
    }
}
