//! Who failed a call: [`Fault`], read off an error's `source()` chain, and
//! [`DownstreamError`], the mark a request body leaves on the errors it
//! causes.
//!
//! An error from a call is not always the dependency's doing. A proxy that
//! forwards a client's request fails the call when the *client's* body
//! breaks, stalls or ends early, and when the proxy itself runs out of file
//! descriptors or buffers. Counting those against the upstream lets any
//! client switch off a healthy upstream with a few broken requests, and a
//! proxy under load switch off its own upstreams. [`Fault::of`] tells them
//! apart, and the shipped classifiers record what is not the upstream's
//! fault as [`Outcome::Neutral`](crate::Outcome::Neutral).

use core::fmt;
use core::time::Duration;
use std::error::Error;
use std::io;

/// Who an error is the fault of.
///
/// ```
/// use failfast::{DownstreamError, Fault};
/// use std::io;
///
/// let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
/// assert_eq!(Fault::of(&refused), Fault::Upstream);
///
/// // The proxy out of file descriptors: its own fault, not the upstream's.
/// # #[cfg(unix)] {
/// let emfile = io::Error::from_raw_os_error(24); // EMFILE
/// assert_eq!(Fault::of(&emfile), Fault::Local);
/// # }
///
/// // A client's request body that stalled, wherever it sits in the chain.
/// let stalled = io::Error::other(DownstreamError::stalled(std::time::Duration::from_secs(1)));
/// assert_eq!(Fault::of(&stalled), Fault::Downstream);
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fault {
    /// The dependency's: a connection refused or reset, a timeout, a protocol
    /// error, anything not recognised as another's. Counts against it.
    Upstream,
    /// The caller's own side: out of file descriptors (`EMFILE`, `ENFILE`),
    /// buffers (`ENOBUFS`), memory, or local ports (`EADDRNOTAVAIL`).
    /// Neutral.
    Local,
    /// The request's own side, the client a proxy serves: its body failed,
    /// stalled, ended early or was too large ([`DownstreamError`] in the
    /// chain, or hyper's error for a request of the caller's own making,
    /// feature `hyper`). Neutral.
    Downstream,
}

/// How far [`Fault::of`] follows `source()`: no real chain is this deep, and
/// a cap keeps a malformed one from looping.
const MAX_DEPTH: usize = 32;

impl Fault {
    /// Walks `error` and its `source()` chain; the first error that tells
    /// decides:
    ///
    /// | in the chain | fault |
    /// |---|---|
    /// | a [`DownstreamError`] | [`Downstream`](Fault::Downstream) |
    /// | a `hyper::Error` whose [`is_user`] holds (feature `hyper`, on with `tower` and `reqwest`): the request body's own stream failed — a client gone mid-upload, an idle or size limit that cut it — or it ended before its declared length; or hyper refused the request as built, or the caller's runtime dropped the connection's task | [`Downstream`](Fault::Downstream) |
    /// | a [`std::io::Error`] of a local resource running out | [`Local`](Fault::Local) |
    /// | none of these | [`Upstream`](Fault::Upstream) |
    ///
    /// An `io::Error` that wraps another error (`io::Error::other`) is
    /// looked through, as its `source()` skips the wrapped error itself.
    ///
    /// hyper's is the one client library's error read by kind: hyper-util's
    /// client and reqwest keep it in their errors' chains, and without it a
    /// broken upload shows only the body's own error — often an `io::Error`
    /// of kind `UnexpectedEof`, the same as an upstream that hung up.
    /// reqwest's own kinds are not read: its `is_body` is also a *response*
    /// body that broke, the upstream's doing.
    /// Any other library's errors are known by what they wrap: a connect
    /// error carries the `io::Error`, and a request body wrapped in
    /// [`DownstreamBody`](crate::tower::DownstreamBody) (feature `tower`)
    /// carries its [`DownstreamError`] into the client's error.
    ///
    /// ```
    /// # #[cfg(feature = "hyper")] {
    /// use failfast::Fault;
    /// use http_body_util::{BodyExt, Full, Limited};
    /// use hyper_util::client::legacy::Client;
    /// use hyper_util::rt::TokioExecutor;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// # let addr = listener.local_addr().unwrap();
    /// # tokio::spawn(async move { let _kept = listener.accept().await; std::future::pending::<()>().await });
    /// // An upload past the sender's size limit: hyper fails the call with
    /// // the body's own error, and says whose it is.
    /// let client = Client::builder(TokioExecutor::new()).build_http();
    /// let body = Limited::new(Full::new(hyper::body::Bytes::from("0123456789")), 4);
    /// let request = http::Request::post(format!("http://{addr}/")).body(body).unwrap();
    /// let err = client.request(request).await.unwrap_err();
    /// assert_eq!(Fault::of(&err), Fault::Downstream);
    /// # }
    /// # }
    /// ```
    ///
    /// [`is_user`]: https://docs.rs/hyper/1/hyper/struct.Error.html#method.is_user
    pub fn of(error: &(dyn Error + 'static)) -> Fault {
        let mut next = Some(error);
        for _ in 0..MAX_DEPTH {
            let Some(e) = next else { break };
            if let Some(fault) = Fault::of_one(e) {
                return fault;
            }
            next = e.source();
        }
        Fault::Upstream
    }

    /// The fault one error of a chain shows by itself, if any.
    fn of_one(e: &(dyn Error + 'static)) -> Option<Fault> {
        if e.is::<DownstreamError>() {
            return Some(Fault::Downstream);
        }
        #[cfg(feature = "hyper")]
        if is_the_requests_own(e) {
            return Some(Fault::Downstream);
        }
        let io = e.downcast_ref::<io::Error>()?;
        if is_local(io) {
            return Some(Fault::Local);
        }
        // `io::Error::other(inner)`: its `source()` is the inner error's
        // source, not the inner error, so look at it here.
        io.get_ref().and_then(|inner| {
            let inner: &(dyn Error + 'static) = inner;
            Fault::of_one(inner)
        })
    }

    /// Whether the dependency is to blame (so the call counts against it).
    pub const fn is_upstream(self) -> bool {
        matches!(self, Fault::Upstream)
    }
}

/// Whether `e` is hyper's error for a call of the request's own making
/// (`hyper::Error::is_user`): its body's stream failed, or the body ended
/// before its declared length, or hyper refused the request as built, or
/// the caller's runtime dropped the connection's task. The caller's side
/// in every case, never the upstream's.
#[cfg(feature = "hyper")]
fn is_the_requests_own(e: &(dyn Error + 'static)) -> bool {
    e.downcast_ref::<hyper::Error>()
        .is_some_and(hyper::Error::is_user)
}

/// Whether an I/O error is a local resource running out.
fn is_local(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::OutOfMemory | io::ErrorKind::AddrNotAvailable
    ) || e
        .raw_os_error()
        .is_some_and(|code| LOCAL_ERRNOS.contains(&code))
}

/// The OS error codes of local resources running out, which `io::ErrorKind`
/// does not name on stable Rust: too many open files (per process and
/// system-wide), no buffer space.
#[cfg(unix)]
const LOCAL_ERRNOS: [i32; 3] = [libc::EMFILE, libc::ENFILE, libc::ENOBUFS];
/// Windows sockets: `WSAEMFILE`, `WSAENOBUFS`, and `ERROR_TOO_MANY_OPEN_FILES`.
#[cfg(windows)]
const LOCAL_ERRNOS: [i32; 3] = [10024, 10055, 4];
#[cfg(not(any(unix, windows)))]
const LOCAL_ERRNOS: [i32; 0] = [];

/// An error the client of a proxy caused: its request body failed, stalled
/// or grew too large. Wherever it sits in an error's `source()` chain,
/// [`Fault::of`] blames the downstream, and the shipped classifiers record
/// the call as [`Outcome::Neutral`](crate::Outcome::Neutral).
///
/// [`DownstreamBody`](crate::tower::DownstreamBody) (feature `tower`) wraps
/// a request body so its errors are these; an HTTP client that fails a call
/// because the body it sends failed keeps the body's error as the source of
/// its own. A hyper-based client needs no mark: its own error says the body
/// failed, and [`Fault::of`] reads it (feature `hyper`).
///
/// ```
/// use failfast::{DownstreamError, Fault};
/// use std::time::Duration;
///
/// let e = DownstreamError::stalled(Duration::from_secs(2));
/// assert_eq!(e.to_string(), "request body stalled: no bytes for 2s");
/// assert_eq!(Fault::of(&e), Fault::Downstream);
/// ```
#[derive(Debug)]
pub struct DownstreamError {
    kind: DownstreamKind,
    source: Option<Box<dyn Error + Send + Sync>>,
}

/// What went wrong with a request body ([`DownstreamError::kind`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DownstreamKind {
    /// The body's own stream failed: a malformed chunk, a client that hung
    /// up mid-upload, a length that did not match.
    Failed,
    /// No bytes arrived for this long.
    Stalled(Duration),
    /// The body grew past this many bytes.
    TooLarge(u64),
}

impl DownstreamError {
    /// The request body's stream failed with `source`.
    pub fn failed(source: impl Into<Box<dyn Error + Send + Sync>>) -> DownstreamError {
        DownstreamError {
            kind: DownstreamKind::Failed,
            source: Some(source.into()),
        }
    }

    /// No bytes of the request body arrived for `idle`.
    pub fn stalled(idle: Duration) -> DownstreamError {
        DownstreamError {
            kind: DownstreamKind::Stalled(idle),
            source: None,
        }
    }

    /// The request body grew past `limit` bytes.
    pub fn too_large(limit: u64) -> DownstreamError {
        DownstreamError {
            kind: DownstreamKind::TooLarge(limit),
            source: None,
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> DownstreamKind {
        self.kind
    }
}

impl fmt::Display for DownstreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            DownstreamKind::Failed => match &self.source {
                Some(source) => write!(f, "request body failed: {source}"),
                None => f.write_str("request body failed"),
            },
            DownstreamKind::Stalled(idle) => {
                write!(f, "request body stalled: no bytes for {idle:?}")
            }
            DownstreamKind::TooLarge(limit) => {
                write!(f, "request body larger than {limit} bytes")
            }
        }
    }
}

impl Error for DownstreamError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that wraps another as its source, like a client's error
    /// around a connect error.
    #[derive(Debug)]
    struct Wrapper(Box<dyn Error + Send + Sync>);

    impl fmt::Display for Wrapper {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("client error")
        }
    }

    impl Error for Wrapper {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&*self.0)
        }
    }

    #[test]
    fn io_kinds_of_a_dead_upstream_are_its_fault() {
        for kind in [
            io::ErrorKind::ConnectionRefused,
            io::ErrorKind::ConnectionReset,
            io::ErrorKind::ConnectionAborted,
            io::ErrorKind::TimedOut,
            io::ErrorKind::BrokenPipe,
            io::ErrorKind::UnexpectedEof,
        ] {
            let e = Wrapper(Box::new(io::Error::from(kind)));
            assert_eq!(Fault::of(&e), Fault::Upstream, "{kind:?}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn local_resources_running_out_are_local_wherever_they_sit() {
        for code in [libc::EMFILE, libc::ENFILE, libc::ENOBUFS] {
            let direct = io::Error::from_raw_os_error(code);
            assert_eq!(Fault::of(&direct), Fault::Local, "{code}");
            let wrapped = Wrapper(Box::new(Wrapper(Box::new(io::Error::from_raw_os_error(
                code,
            )))));
            assert_eq!(Fault::of(&wrapped), Fault::Local, "{code} wrapped twice");
        }
        let oom = io::Error::from(io::ErrorKind::OutOfMemory);
        assert_eq!(Fault::of(&oom), Fault::Local);
        let ports = io::Error::from(io::ErrorKind::AddrNotAvailable);
        assert_eq!(Fault::of(&ports), Fault::Local);
    }

    #[test]
    fn a_downstream_mark_is_found_through_wrappers_and_io_errors() {
        let marked = Wrapper(Box::new(io::Error::other(DownstreamError::failed(
            "bad chunk",
        ))));
        assert_eq!(Fault::of(&marked), Fault::Downstream);
        let deep = Wrapper(Box::new(Wrapper(Box::new(DownstreamError::too_large(10)))));
        assert_eq!(Fault::of(&deep), Fault::Downstream);
    }

    #[test]
    fn the_first_mark_in_the_chain_decides() {
        // A body that failed because the proxy ran out of descriptors: the
        // downstream mark comes first, so the client's side is blamed.
        #[cfg(unix)]
        {
            let e = DownstreamError::failed(io::Error::from_raw_os_error(libc::EMFILE));
            assert_eq!(Fault::of(&e), Fault::Downstream);
        }
        let plain = Wrapper(Box::new(io::Error::other("protocol error")));
        assert_eq!(Fault::of(&plain), Fault::Upstream);
    }

    #[test]
    fn display_says_what_the_body_did() {
        assert_eq!(
            DownstreamError::failed("unexpected end of chunk").to_string(),
            "request body failed: unexpected end of chunk"
        );
        assert_eq!(
            DownstreamError::too_large(1024).to_string(),
            "request body larger than 1024 bytes"
        );
        let e = DownstreamError::failed("x");
        assert_eq!(e.source().map(|s| s.to_string()).as_deref(), Some("x"));
        assert_eq!(e.kind(), DownstreamKind::Failed);
    }
}
