//! `DownstreamBody` over time, on tokio's paused clock (no real waiting):
//! a client's upload whose frames come at set gaps. Many frames each just
//! inside the idle timeout pass, however long the whole upload takes; one
//! gap past it fails the body as stalled, at the last frame plus the
//! timeout; the size limit counts every frame's bytes, not one frame's.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use failfast::tower::DownstreamBody;
use failfast::{DownstreamKind, Fault};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::body::Bytes;
use tokio::time::{Instant, Sleep};

/// A client's upload: each frame comes its gap after the one before (the
/// first, its gap after the first poll), then the body ends.
struct Paced {
    frames: Vec<(Duration, Bytes)>,
    next: usize,
    /// When the last frame came (or the first poll).
    last: Option<Instant>,
    wait: Option<Pin<Box<Sleep>>>,
}

impl Paced {
    fn new(frames: impl IntoIterator<Item = (Duration, &'static str)>) -> Paced {
        Paced {
            frames: frames
                .into_iter()
                .map(|(gap, s)| (gap, Bytes::from_static(s.as_bytes())))
                .collect(),
            next: 0,
            last: None,
            wait: None,
        }
    }

    /// `n` frames of `chunk`, each `gap` after the one before.
    fn every(gap: Duration, n: usize, chunk: &'static str) -> Paced {
        Paced::new(std::iter::repeat_n((gap, chunk), n))
    }
}

impl Body for Paced {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = &mut *self;
        let Some((gap, bytes)) = this.frames.get(this.next).cloned() else {
            return Poll::Ready(None);
        };
        let last = *this.last.get_or_insert_with(Instant::now);
        let wait = this
            .wait
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(last + gap)));
        ready!(wait.as_mut().poll(cx));
        this.wait = None;
        this.last = Some(Instant::now());
        this.next += 1;
        Poll::Ready(Some(Ok(Frame::data(bytes))))
    }
}

const IDLE: Duration = Duration::from_secs(2);
/// A gap just inside the idle timeout (tokio's timers tick in milliseconds).
const INSIDE: Duration = Duration::from_millis(1999);
/// A gap just past it.
const PAST: Duration = Duration::from_millis(2001);

/// Reads `body` frame by frame: the data before the first error, and the
/// error.
async fn read<B>(body: B) -> (Vec<Bytes>, Option<failfast::DownstreamError>)
where
    B: Body<Data = Bytes, Error = failfast::DownstreamError> + Unpin,
{
    let mut body = body;
    let mut data = Vec::new();
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => data.push(frame.into_data().unwrap()),
            Err(e) => return (data, Some(e)),
        }
    }
    (data, None)
}

#[tokio::test(start_paused = true)]
async fn many_frames_just_inside_the_idle_timeout_pass() {
    let started = Instant::now();
    let body = DownstreamBody::new(Paced::every(INSIDE, 100, "ab")).idle_timeout(IDLE);
    let (data, err) = read(body).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(data.len(), 100);
    // A hundred frames, each 1.999 s after the one before: 199.9 s in all,
    // a hundred times the idle timeout.
    assert_eq!(started.elapsed(), INSIDE * 100);
}

#[tokio::test(start_paused = true)]
async fn one_gap_past_it_fails_as_stalled_at_the_last_frame_plus_the_timeout() {
    let started = Instant::now();
    let frames = std::iter::repeat_n((INSIDE, "ab"), 10).chain([(PAST, "late")]);
    let mut body = DownstreamBody::new(Paced::new(frames)).idle_timeout(IDLE);
    let (data, err) = read(&mut body).await;
    assert_eq!(data.len(), 10, "the frames inside the timeout passed");
    let err = err.expect("stalled");
    assert_eq!(err.kind(), DownstreamKind::Stalled(IDLE));
    assert_eq!(Fault::of(&err), Fault::Downstream);
    assert_eq!(
        started.elapsed(),
        INSIDE * 10 + IDLE,
        "idle from the last frame, not from the first wait"
    );
    assert!(body.frame().await.is_none(), "the body ends at its error");
    assert!(body.is_end_stream());
}

#[tokio::test(start_paused = true)]
async fn the_size_limit_holds_across_frames() {
    // Four frames of 3 bytes, a second apart: 12 bytes. A limit of 12 lets
    // them all through; 11 fails the fourth, whose 3 bytes alone fit.
    let upload = || Paced::every(Duration::from_secs(1), 4, "abc");
    let (data, err) = read(
        DownstreamBody::new(upload())
            .max_bytes(12)
            .idle_timeout(IDLE),
    )
    .await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(data.len(), 4);

    let started = Instant::now();
    let mut body = DownstreamBody::new(upload())
        .max_bytes(11)
        .idle_timeout(IDLE);
    let (data, err) = read(&mut body).await;
    assert_eq!(data.len(), 3, "9 bytes passed");
    assert_eq!(err.unwrap().kind(), DownstreamKind::TooLarge(11));
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(4),
        "at the fourth frame"
    );
    assert!(body.frame().await.is_none(), "the body ends at its error");
}
