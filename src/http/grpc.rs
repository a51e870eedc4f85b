//! [`GrpcClassifier`]: a gRPC call's status, from the response headers
//! (trailers-only responses) or the trailers.

use core::fmt;

use super::BoxError;
use http::{HeaderMap, StatusCode};

use super::classify::{outcome_of_error, Classify, FaultFn};
use super::stream::{ClassifyEos, ClassifyStream, Verdict};
use crate::fault::Fault;
use crate::hint::{parse_pushback_ms, RetryHint};
use crate::outcome::Outcome;

/// The header (or trailer) that carries a gRPC call's status code.
pub const GRPC_STATUS: &str = "grpc-status";

/// The header (or trailer) in which a gRPC server says how long to wait
/// before the next attempt, in milliseconds (gRFC A6).
pub const GRPC_RETRY_PUSHBACK_MS: &str = "grpc-retry-pushback-ms";

/// Classifies gRPC calls by their `grpc-status`.
///
/// A gRPC server sends the status in the trailers after the response
/// messages, or, when it fails before sending any message, in the headers of
/// a trailers-only response. Use it with
/// [`FailFastLayer::classify_at_end`](crate::tower::FailFastLayer::classify_at_end)
/// to see both; as a plain [`Classify`] it sees only the headers, and a
/// response whose status is still to come counts as a success.
///
/// The default table follows what each code says about the *server*: codes
/// that mean it is unavailable, overloaded, too slow or broken are failures;
/// codes that are the caller's business (a bad argument, a missing entity, a
/// refused permission) prove it is up and are ignored, as
/// [`HttpClassifier`](super::HttpClassifier) ignores 4xx.
///
/// | code | name | outcome | why |
/// |---|---|---|---|
/// | 0 | `OK` | success | |
/// | 1 | `CANCELLED` | ignored | the caller cancelled |
/// | 2 | `UNKNOWN` | **failure** | an error the server did not map: usually an unhandled one; also any code above 16 or unreadable |
/// | 3 | `INVALID_ARGUMENT` | ignored | the request's fault |
/// | 4 | `DEADLINE_EXCEEDED` | **failure** | too slow |
/// | 5 | `NOT_FOUND` | ignored | a business answer |
/// | 6 | `ALREADY_EXISTS` | ignored | a business answer |
/// | 7 | `PERMISSION_DENIED` | ignored | the caller's credentials |
/// | 8 | `RESOURCE_EXHAUSTED` | **failure** | overloaded or out of quota: asks for less load, like HTTP 429 |
/// | 9 | `FAILED_PRECONDITION` | ignored | the system's state, not its health |
/// | 10 | `ABORTED` | ignored | a concurrency conflict; the caller retries |
/// | 11 | `OUT_OF_RANGE` | ignored | the request's fault |
/// | 12 | `UNIMPLEMENTED` | ignored | the method does not exist: a prompt, deterministic answer |
/// | 13 | `INTERNAL` | **failure** | the server broke an invariant |
/// | 14 | `UNAVAILABLE` | **failure** | down, draining, or unreachable |
/// | 15 | `DATA_LOSS` | **failure** | unrecoverable loss on the server |
/// | 16 | `UNAUTHENTICATED` | ignored | the caller's credentials |
/// | — | `Err` from the service (no response) that is the upstream's fault, or a body that fails halfway | **failure** | set with [`errors`](Self::errors) |
/// | — | `Err` from the service that is not the upstream's fault (the caller's own resources, the client's request body: [`fault`](Self::fault)) | neutral | |
///
/// Without a `grpc-status`:
///
/// * a head whose HTTP status is not 200 is mapped as gRPC clients map it
///   (400 → `INTERNAL`; 401 → `UNAUTHENTICATED`; 403 → `PERMISSION_DENIED`;
///   404 → `UNIMPLEMENTED`; 429, 502, 503, 504 → `UNAVAILABLE`; any other →
///   `UNKNOWN`), then classified by the table;
/// * a body that ends without one (no trailers, or trailers without the
///   status) broke the protocol: `INTERNAL`.
///
/// # Pushback
///
/// A failed call's [`grpc-retry-pushback-ms`](GRPC_RETRY_PUSHBACK_MS) is
/// the upstream's hint ([`Classify::hint`], [`ClassifyStream::head_hint`],
/// [`ClassifyEos::eos_hint`]): read where the status is read (the head of a
/// trailers-only response or one whose HTTP status is not 200, else the
/// trailers), and only when that status is not `OK`, so a successful call's
/// headers are not searched for it. A negative or unparsable value, which
/// gRFC A6 reads as "do not retry", is ignored and counted as a bad hint
/// (see [`hint`](crate::hint)).
///
/// ```
/// use failfast::http::{Classify, GrpcClassifier};
/// use failfast::Outcome;
///
/// let classify = GrpcClassifier::new().code(12, Outcome::Failure); // UNIMPLEMENTED counts here
/// let trailers_only = |code: &str| {
///     Ok::<_, failfast::http::BoxError>(http::Response::builder().header("grpc-status", code).body(()).unwrap())
/// };
/// assert_eq!(classify.classify(&trailers_only("0")), Outcome::Success);
/// assert_eq!(classify.classify(&trailers_only("14")), Outcome::Failure);
/// assert_eq!(classify.classify(&trailers_only("5")), Outcome::Ignored);
/// assert_eq!(classify.classify(&trailers_only("12")), Outcome::Failure);
/// assert_eq!(classify.classify_code(8), Outcome::Failure);
/// ```
#[derive(Copy, Clone)]
pub struct GrpcClassifier {
    codes: [Outcome; GrpcClassifier::CODES],
    errors: Outcome,
    fault: FaultFn,
}

impl PartialEq for GrpcClassifier {
    fn eq(&self, other: &Self) -> bool {
        self.codes == other.codes
            && self.errors == other.errors
            && core::ptr::fn_addr_eq(self.fault, other.fault)
    }
}

impl Eq for GrpcClassifier {}

impl fmt::Debug for GrpcClassifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcClassifier")
            .field("codes", &self.codes)
            .field("errors", &self.errors)
            .finish_non_exhaustive()
    }
}

impl Default for GrpcClassifier {
    fn default() -> Self {
        GrpcClassifier::new()
    }
}

/// Codes by number.
const OK: u32 = 0;
const UNKNOWN: u32 = 2;
const INTERNAL: u32 = 13;
const UNAVAILABLE: u32 = 14;
const UNIMPLEMENTED: u32 = 12;
const PERMISSION_DENIED: u32 = 7;
const UNAUTHENTICATED: u32 = 16;

impl GrpcClassifier {
    /// How many codes gRPC defines (0 to 16).
    pub const CODES: usize = 17;

    /// The defaults in the table above.
    pub const fn new() -> GrpcClassifier {
        use Outcome::{Failure as F, Ignored as I, Success as S};
        GrpcClassifier {
            //     0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16
            codes: [S, I, F, I, F, I, I, I, F, I, I, I, I, F, F, F, I],
            errors: F,
            fault: Fault::of,
        }
    }

    /// The outcome of one status code.
    ///
    /// # Panics
    ///
    /// With a code above 16: gRPC defines none (unknown codes are read as
    /// `UNKNOWN`, 2; set that one instead).
    pub const fn code(mut self, code: u32, outcome: Outcome) -> Self {
        assert!(
            (code as usize) < Self::CODES,
            "gRPC status codes run from 0 to 16"
        );
        self.codes[code as usize] = outcome;
        self
    }

    /// The outcome of an `Err` from the service (no response at all) that
    /// is the upstream's fault, and of a response body that fails before its
    /// end.
    pub const fn errors(mut self, outcome: Outcome) -> Self {
        self.errors = outcome;
        self
    }

    /// Who an `Err` from the service is the fault of (default [`Fault::of`]);
    /// one blamed on anyone but the upstream is [`Outcome::Neutral`]. As
    /// [`HttpClassifier::fault`](super::HttpClassifier::fault).
    pub const fn fault(mut self, fault: FaultFn) -> Self {
        self.fault = fault;
        self
    }

    /// The outcome of a status code; codes above 16 are read as `UNKNOWN`.
    pub const fn classify_code(&self, code: u32) -> Outcome {
        if (code as usize) < Self::CODES {
            self.codes[code as usize]
        } else {
            self.codes[UNKNOWN as usize]
        }
    }

    /// The outcome of the `grpc-status` in `headers` (or trailers), if there
    /// is one. A value that is not a number is read as `UNKNOWN`.
    pub fn classify_headers(&self, headers: &HeaderMap) -> Option<Outcome> {
        let value = headers.get(GRPC_STATUS)?;
        Some(self.classify_code(parse_code(value.as_bytes())))
    }

    /// The verdict on a head: its `grpc-status`, else its HTTP status when
    /// that is not 200, else `None` (the status is still to come).
    fn classify_head_only<B>(&self, response: &http::Response<B>) -> Option<Outcome> {
        head_code(response).map(|code| self.classify_code(code))
    }
}

/// The status code of a head: its `grpc-status`, else the code of its HTTP
/// status when that is not 200, else `None` (the status is still to come).
fn head_code<B>(response: &http::Response<B>) -> Option<u32> {
    if let Some(value) = response.headers().get(GRPC_STATUS) {
        return Some(parse_code(value.as_bytes()));
    }
    match response.status() {
        StatusCode::OK => None,
        status => Some(code_of_http_status(status)),
    }
}

/// The pushback in `headers` of a call whose status is `code`: none for
/// `OK` (its headers are not searched). The first field is read.
fn pushback(code: u32, headers: &HeaderMap) -> Option<RetryHint> {
    if code == OK {
        return None;
    }
    parse_pushback_ms(headers.get(GRPC_RETRY_PUSHBACK_MS)?.as_bytes())
}

/// A decimal code; anything else is `UNKNOWN`.
fn parse_code(bytes: &[u8]) -> u32 {
    if bytes.is_empty() || bytes.len() > 3 {
        return UNKNOWN;
    }
    let mut code = 0;
    for &b in bytes {
        if !b.is_ascii_digit() {
            return UNKNOWN;
        }
        code = code * 10 + u32::from(b - b'0');
    }
    code
}

/// The gRPC code a client reports for a non-200 HTTP status without
/// `grpc-status` (gRPC's "HTTP to gRPC status code mapping").
fn code_of_http_status(status: StatusCode) -> u32 {
    match status.as_u16() {
        400 => INTERNAL,
        401 => UNAUTHENTICATED,
        403 => PERMISSION_DENIED,
        404 => UNIMPLEMENTED,
        429 | 502 | 503 | 504 => UNAVAILABLE,
        _ => UNKNOWN,
    }
}

/// Head only: the `grpc-status` of a trailers-only response, or the HTTP
/// status; a response whose status is still to come is a success.
impl<B> Classify<http::Response<B>, BoxError> for GrpcClassifier {
    fn classify(&self, result: &Result<http::Response<B>, BoxError>) -> Outcome {
        match result {
            Ok(response) => self
                .classify_head_only(response)
                .unwrap_or(self.codes[OK as usize]),
            Err(e) => outcome_of_error(self.fault, e, self.errors),
        }
    }

    /// A failed head's `grpc-retry-pushback-ms` (see "Pushback" above).
    fn hint(&self, result: &Result<http::Response<B>, BoxError>) -> Option<RetryHint> {
        let response = result.as_ref().ok()?;
        pushback(head_code(response)?, response.headers())
    }
}

impl<B> ClassifyStream<B, BoxError> for GrpcClassifier {
    type Eos = GrpcEos;

    fn classify_head(&self, result: &Result<http::Response<B>, BoxError>) -> Verdict<GrpcEos> {
        match result {
            Ok(response) => match self.classify_head_only(response) {
                Some(outcome) => Verdict::Ready(outcome),
                None => Verdict::AtEndOfStream(GrpcEos(*self)),
            },
            Err(e) => Verdict::Ready(outcome_of_error(self.fault, e, self.errors)),
        }
    }

    /// A failed head's `grpc-retry-pushback-ms` (see "Pushback" above); a
    /// head whose status is still to come has none.
    fn head_hint(&self, result: &Result<http::Response<B>, BoxError>) -> Option<RetryHint> {
        let response = result.as_ref().ok()?;
        pushback(head_code(response)?, response.headers())
    }
}

/// The [`ClassifyEos`] of [`GrpcClassifier`]: the trailers' `grpc-status`.
///
/// ```
/// use failfast::http::{ClassifyEos, ClassifyStream, GrpcClassifier, Verdict};
/// use failfast::Outcome;
///
/// let head = Ok::<_, failfast::http::BoxError>(http::Response::new(()));
/// let Verdict::AtEndOfStream(eos) = GrpcClassifier::new().classify_head(&head) else { panic!() };
/// assert_eq!(eos.classify_eos(None), Outcome::Failure); // no status at all: INTERNAL
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct GrpcEos(GrpcClassifier);

impl ClassifyEos for GrpcEos {
    fn classify_eos(self, trailers: Option<&HeaderMap>) -> Outcome {
        trailers
            .and_then(|t| self.0.classify_headers(t))
            .unwrap_or(self.0.codes[INTERNAL as usize])
    }

    fn classify_body_error(self) -> Outcome {
        self.0.errors
    }

    /// The trailers' `grpc-retry-pushback-ms` when their status is not
    /// `OK` (trailers without a status are `INTERNAL`).
    fn eos_hint(&self, trailers: Option<&HeaderMap>) -> Option<RetryHint> {
        let trailers = trailers?;
        let code = trailers
            .get(GRPC_STATUS)
            .map_or(INTERNAL, |v| parse_code(v.as_bytes()));
        pushback(code, trailers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hint::ignored_on_this_thread;
    use core::time::Duration;

    fn millis(ms: u64) -> Option<RetryHint> {
        Some(RetryHint::After(Duration::from_millis(ms)))
    }

    fn head(status: u16, fields: &[(&str, &str)]) -> Result<http::Response<()>, BoxError> {
        let mut builder = http::Response::builder().status(status);
        for (name, value) in fields {
            builder = builder.header(*name, *value);
        }
        Ok(builder.body(()).unwrap())
    }

    /// The head's hint, the same through `Classify` and `ClassifyStream`,
    /// and how many bad hints reading it counted.
    fn head_hint(result: &Result<http::Response<()>, BoxError>) -> (Option<RetryHint>, u64) {
        let c = GrpcClassifier::new();
        let before = ignored_on_this_thread();
        let hint = Classify::hint(&c, result);
        let counted = ignored_on_this_thread() - before;
        assert_eq!(ClassifyStream::head_hint(&c, result), hint);
        (hint, counted)
    }

    /// The trailers' hint, and how many bad hints reading it counted.
    fn eos_hint(fields: Option<&[(&'static str, &str)]>) -> (Option<RetryHint>, u64) {
        let trailers = fields.map(|fields| {
            let mut map = HeaderMap::new();
            for (name, value) in fields {
                map.append(http::HeaderName::from_static(name), value.parse().unwrap());
            }
            map
        });
        let Verdict::AtEndOfStream(eos) = GrpcClassifier::new().classify_head(&head(200, &[]))
        else {
            panic!("a 200 without grpc-status waits for the trailers")
        };
        let before = ignored_on_this_thread();
        let hint = eos.eos_hint(trailers.as_ref());
        (hint, ignored_on_this_thread() - before)
    }

    #[test]
    fn pushback_at_the_head_of_a_trailers_only_response() {
        let unavailable = head(
            200,
            &[(GRPC_STATUS, "14"), (GRPC_RETRY_PUSHBACK_MS, "1500")],
        );
        assert_eq!(head_hint(&unavailable), (millis(1_500), 0));
        // A head whose HTTP status stands for the gRPC one.
        let http_503 = head(503, &[(GRPC_RETRY_PUSHBACK_MS, "200")]);
        assert_eq!(head_hint(&http_503), (millis(200), 0));
        // A status still to come, or OK: the pushback is not read.
        let to_come = head(200, &[(GRPC_RETRY_PUSHBACK_MS, "-1")]);
        assert_eq!(head_hint(&to_come), (None, 0));
        let ok = head(200, &[(GRPC_STATUS, "0"), (GRPC_RETRY_PUSHBACK_MS, "-1")]);
        assert_eq!(head_hint(&ok), (None, 0));
        // No pushback at all.
        assert_eq!(head_hint(&head(200, &[(GRPC_STATUS, "14")])), (None, 0));
    }

    #[test]
    fn pushback_in_the_trailers() {
        let exhausted = [(GRPC_STATUS, "8"), (GRPC_RETRY_PUSHBACK_MS, "2000")];
        assert_eq!(eos_hint(Some(&exhausted)), (millis(2_000), 0));
        // Trailers without a status are INTERNAL: read.
        assert_eq!(
            eos_hint(Some(&[(GRPC_RETRY_PUSHBACK_MS, "5")])),
            (millis(5), 0)
        );
        // OK trailers, no trailers, no pushback: nothing read.
        let ok = [(GRPC_STATUS, "0"), (GRPC_RETRY_PUSHBACK_MS, "junk")];
        assert_eq!(eos_hint(Some(&ok)), (None, 0));
        assert_eq!(eos_hint(None), (None, 0));
        assert_eq!(eos_hint(Some(&[(GRPC_STATUS, "14")])), (None, 0));
        // The first field is read.
        let two = [
            (GRPC_STATUS, "14"),
            (GRPC_RETRY_PUSHBACK_MS, "7"),
            (GRPC_RETRY_PUSHBACK_MS, "9"),
        ];
        assert_eq!(eos_hint(Some(&two)), (millis(7), 0));
    }

    #[test]
    fn a_bad_pushback_is_ignored_and_counted() {
        // gRFC A6's "do not retry" included.
        for bad in ["-1", "1.5", "86400001", "", "soon"] {
            let trailers = [(GRPC_STATUS, "14"), (GRPC_RETRY_PUSHBACK_MS, bad)];
            assert_eq!(eos_hint(Some(&trailers)), (None, 1), "{bad:?}");
            let trailers_only = head(200, &trailers);
            assert_eq!(head_hint(&trailers_only), (None, 1), "{bad:?}");
        }
    }

    #[test]
    fn an_error_has_no_hint() {
        let reset: BoxError = std::io::Error::from(std::io::ErrorKind::ConnectionReset).into();
        assert_eq!(head_hint(&Err(reset)), (None, 0));
    }

    #[test]
    fn codes_parse_as_decimal_and_anything_else_is_unknown() {
        assert_eq!(parse_code(b"0"), 0);
        assert_eq!(parse_code(b"14"), 14);
        assert_eq!(parse_code(b"16"), 16);
        assert_eq!(parse_code(b"100"), 100, "three digits still parse");
        for junk in [&b""[..], b"x", b"1x", b"-1", b"1234"] {
            assert_eq!(parse_code(junk), UNKNOWN, "{junk:?}");
        }
    }

    #[test]
    fn the_default_table() {
        let c = GrpcClassifier::new();
        let failures: Vec<u32> = (0..17)
            .filter(|&n| c.classify_code(n) == Outcome::Failure)
            .collect();
        assert_eq!(failures, [2, 4, 8, 13, 14, 15]);
        assert_eq!(c.classify_code(0), Outcome::Success);
        assert_eq!(c.classify_code(99), Outcome::Failure, "read as UNKNOWN");
        let unknown_ignored = c.code(2, Outcome::Ignored);
        assert_eq!(
            unknown_ignored.classify_code(17),
            Outcome::Ignored,
            "17 is past the table"
        );
        assert_eq!(unknown_ignored.classify_code(16), Outcome::Ignored);
        assert_eq!(unknown_ignored.classify_code(15), Outcome::Failure);
        assert_eq!(
            c.code(2, Outcome::Ignored).classify_code(99),
            Outcome::Ignored
        );
    }

    #[test]
    fn http_statuses_map_as_grpc_clients_map_them() {
        let c = GrpcClassifier::new();
        let head = |status: u16| {
            let r = http::Response::builder().status(status).body(()).unwrap();
            c.classify_head_only(&r)
        };
        assert_eq!(head(200), None);
        assert_eq!(head(503), Some(Outcome::Failure)); // UNAVAILABLE
        assert_eq!(head(429), Some(Outcome::Failure)); // UNAVAILABLE
        assert_eq!(head(404), Some(Outcome::Ignored)); // UNIMPLEMENTED
        assert_eq!(head(401), Some(Outcome::Ignored)); // UNAUTHENTICATED
        assert_eq!(head(400), Some(Outcome::Failure)); // INTERNAL
        assert_eq!(head(418), Some(Outcome::Failure)); // UNKNOWN

        let code = |status: u16| code_of_http_status(StatusCode::from_u16(status).unwrap());
        let codes: Vec<u32> = [400, 401, 403, 404, 429, 502, 503, 504, 418, 500]
            .into_iter()
            .map(code)
            .collect();
        assert_eq!(codes, [13, 16, 7, 12, 14, 14, 14, 14, 2, 2]);
    }

    #[test]
    #[should_panic(expected = "from 0 to 16")]
    fn a_code_above_16_is_refused() {
        let _ = GrpcClassifier::new().code(17, Outcome::Failure);
    }
}
