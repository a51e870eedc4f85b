//! The reqwest middleware (feature `reqwest`) in chains of other
//! middlewares, against real HTTP servers on loopback (hyper): one that
//! refuses requests, one that retries them, one that times them out, each
//! before and after the breaker.
//!
//! - A middleware before the breaker that refuses never reaches it; one
//!   after it that refuses never reached the upstream: neutral, and no
//!   failure run ends with it.
//! - A retry before the breaker is a second call, with its own admission
//!   and verdict (and a rejection once the first opened it: nothing sent);
//!   a retry after it is one call, judged by its last answer.
//! - A timeout before the breaker is the caller giving up: the call is
//!   judged by its age, as a dropped call is (neutral when early, a failure
//!   past `abandoned_after`). One after it returns its own error, another
//!   middleware's: neutral, however long the call hung (reqwest's own
//!   timeout is the upstream's: a failure).
//!
//! The timeouts run on tokio's paused clock, which the breakers read too.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use failfast::registry::HostKey;
use failfast::reqwest::BreakerMiddleware;
use failfast::{
    Breaker, Builder, CallCounts, Clock, ManualClock, Nanos, Registry, Rejected, State,
};
use http::Extensions;
use reqwest::{Request, Response};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Middleware, Next};

mod loopback;
use loopback::Upstream;

// ---------------------------------------------------------------------------
// Other middlewares.

/// Refuses every request while `refusing` is set (a quota, an
/// authorisation check), sending nothing.
struct Refuse(Arc<AtomicBool>);

#[derive(Debug)]
struct Refused;

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("refused by policy")
    }
}

impl std::error::Error for Refused {}

#[async_trait::async_trait]
impl Middleware for Refuse {
    async fn handle(
        &self,
        req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        // SeqCst: set by the test task between calls.
        if self.0.load(Ordering::SeqCst) {
            return Err(reqwest_middleware::Error::middleware(Refused));
        }
        next.run(req, extensions).await
    }
}

/// Sends a request up to `attempts` times while the answer is a 5xx or an
/// error (any error: a naive retry).
struct Retry {
    attempts: usize,
}

#[async_trait::async_trait]
impl Middleware for Retry {
    async fn handle(
        &self,
        req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let mut attempt = 1;
        loop {
            let copy = req.try_clone().expect("a request without a streamed body");
            let result = next.clone().run(copy, extensions).await;
            let again = match &result {
                Ok(response) => response.status().is_server_error(),
                Err(_) => true,
            };
            if !again || attempt == self.attempts {
                return result;
            }
            attempt += 1;
        }
    }
}

/// Cuts a request after `after` (tokio's clock), with its own error.
struct Timeout {
    after: Duration,
}

#[async_trait::async_trait]
impl Middleware for Timeout {
    async fn handle(
        &self,
        req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        match tokio::time::timeout(self.after, next.run(req, extensions)).await {
            Ok(result) => result,
            Err(elapsed) => Err(reqwest_middleware::Error::middleware(elapsed)),
        }
    }
}

// ---------------------------------------------------------------------------
// The breakers.

/// Tokio's clock as the breakers' clock: paused in the timeout tests.
#[derive(Clone, Copy)]
struct TokioTime(tokio::time::Instant);

impl Clock for TokioTime {
    fn now(&self) -> Nanos {
        Nanos::from_duration(self.0.elapsed())
    }
}

type Hosts<C> = Registry<HostKey, std::collections::hash_map::RandomState, C>;

fn hosts<C: Clock + Clone>(template: Builder, clock: C) -> Arc<Hosts<C>> {
    Arc::new(
        Registry::<HostKey>::builder(template.count_calls(true))
            .build_with_clock(clock)
            .unwrap(),
    )
}

/// A client whose chain is `before`, the breaker, then `after`.
fn client<C: Clock>(
    before: Option<impl Middleware>,
    registry: &Arc<Hosts<C>>,
    after: Option<impl Middleware>,
) -> ClientWithMiddleware {
    let mut chain = ClientBuilder::new(reqwest::Client::new());
    if let Some(m) = before {
        chain = chain.with(m);
    }
    chain = chain.with(BreakerMiddleware::new(registry.clone()));
    if let Some(m) = after {
        chain = chain.with(m);
    }
    chain.build()
}

/// What the upstream's breaker counted.
fn calls<C: Clock>(registry: &Hosts<C>, up: &Upstream) -> CallCounts {
    registry.handle_from(&up.key()).snapshot().calls.unwrap()
}

fn state<C: Clock>(registry: &Hosts<C>, up: &Upstream) -> State {
    registry.handle_from(&up.key()).state()
}

/// Whose error `err` is: the breaker's rejection, another middleware's
/// error of type `E`, or reqwest's.
fn rejected(err: &reqwest_middleware::Error) -> bool {
    matches!(err, reqwest_middleware::Error::Middleware(e) if e.is::<Rejected>())
}

fn middlewares<E: std::error::Error + Send + Sync + 'static>(
    err: &reqwest_middleware::Error,
) -> bool {
    matches!(err, reqwest_middleware::Error::Middleware(e) if e.is::<E>())
}

// ---------------------------------------------------------------------------
// Refusals.

#[tokio::test]
async fn a_refusal_after_the_breaker_is_an_early_drop_and_ends_no_failure_run() {
    let registry = hosts(
        Breaker::builder().consecutive_failures(2),
        ManualClock::new(),
    );
    let refusing = Arc::new(AtomicBool::new(false));
    let client = client(None::<Refuse>, &registry, Some(Refuse(refusing.clone())));
    let up = Upstream::start(503).await;

    assert_eq!(client.get(up.url("/")).send().await.unwrap().status(), 503);
    refusing.store(true, Ordering::SeqCst);
    for _ in 0..5 {
        let err = client.get(up.url("/")).send().await.unwrap_err();
        assert!(middlewares::<Refused>(&err), "{err:?}");
    }
    assert_eq!(up.requests(), 1, "a refusal sends nothing");
    // Judged as calls dropped at once: no answer, no age, nothing counted
    // against the upstream.
    let counted = calls(&registry, &up);
    assert_eq!(
        (counted.failures, counted.dropped, counted.unanswered),
        (1, 5, 0)
    );
    assert_eq!(state(&registry, &up), State::Closed);

    // The run of failures goes on across the refusals: the next 503 is
    // the second in a row.
    refusing.store(false, Ordering::SeqCst);
    assert_eq!(client.get(up.url("/")).send().await.unwrap().status(), 503);
    assert_eq!(state(&registry, &up), State::Open);
    // Open: the breaker rejects before the refusing middleware is asked.
    refusing.store(true, Ordering::SeqCst);
    assert!(rejected(&client.get(up.url("/")).send().await.unwrap_err()));
}

#[tokio::test]
async fn a_refusal_before_the_breaker_never_reaches_it() {
    let registry = hosts(
        Breaker::builder().consecutive_failures(1),
        ManualClock::new(),
    );
    let refusing = Arc::new(AtomicBool::new(true));
    let client = client(Some(Refuse(refusing.clone())), &registry, None::<Refuse>);
    let up = Upstream::start(503).await;
    for _ in 0..5 {
        let err = client.get(up.url("/")).send().await.unwrap_err();
        assert!(middlewares::<Refused>(&err), "{err:?}");
    }
    assert_eq!(up.requests(), 0);
    assert_eq!(registry.len(), 0, "no breaker was even looked up");
    refusing.store(false, Ordering::SeqCst);
    assert_eq!(client.get(up.url("/")).send().await.unwrap().status(), 503);
    let counted = calls(&registry, &up);
    assert_eq!((counted.admitted, counted.failures), (1, 1));
    assert_eq!(state(&registry, &up), State::Open);
}

// ---------------------------------------------------------------------------
// Retries.

#[tokio::test]
async fn a_retry_before_the_breaker_is_a_second_call_with_its_own_verdict() {
    // 503 then 200: two calls, a failure and a success.
    let registry = hosts(
        Breaker::builder().consecutive_failures(2),
        ManualClock::new(),
    );
    let client = client(Some(Retry { attempts: 3 }), &registry, None::<Retry>);
    let up = Upstream::start(200).await;
    up.queue(&[503]);
    assert_eq!(client.get(up.url("/")).send().await.unwrap().status(), 200);
    assert_eq!(up.requests(), 2);
    let counted = calls(&registry, &up);
    assert_eq!(
        (counted.admitted, counted.failures, counted.successes),
        (2, 1, 1)
    );
    assert_eq!(state(&registry, &up), State::Closed);

    // Three 503s: the second opens the breaker, and the third attempt is
    // rejected without being sent; the retry returns the rejection.
    up.queue(&[503, 503, 503]);
    let err = client.get(up.url("/")).send().await.unwrap_err();
    assert!(rejected(&err), "{err:?}");
    assert_eq!(up.requests(), 4, "the rejected attempt sent nothing");
    let counted = calls(&registry, &up);
    assert_eq!(
        (counted.admitted, counted.failures, counted.rejected),
        (4, 3, 1)
    );
    assert_eq!(state(&registry, &up), State::Open);
}

#[tokio::test]
async fn a_retry_after_the_breaker_is_one_call_judged_by_its_last_answer() {
    let registry = hosts(
        Breaker::builder().consecutive_failures(2),
        ManualClock::new(),
    );
    let client = client(None::<Retry>, &registry, Some(Retry { attempts: 3 }));
    let up = Upstream::start(200).await;
    up.queue(&[503, 503]);
    assert_eq!(client.get(up.url("/")).send().await.unwrap().status(), 200);
    assert_eq!(up.requests(), 3);
    let counted = calls(&registry, &up);
    assert_eq!(
        (counted.admitted, counted.failures, counted.successes),
        (1, 0, 1)
    );

    // Three 503s: one failure, not three; a second such call opens it.
    up.queue(&[503; 3]);
    assert_eq!(client.get(up.url("/")).send().await.unwrap().status(), 503);
    assert_eq!(up.requests(), 6);
    assert_eq!(calls(&registry, &up).failures, 1);
    assert_eq!(state(&registry, &up), State::Closed);
    up.queue(&[503; 3]);
    client.get(up.url("/")).send().await.unwrap();
    assert_eq!(state(&registry, &up), State::Open);
}

// ---------------------------------------------------------------------------
// Timeouts.

/// Where the hung call is cut, 1 s after it started (tokio's paused clock).
#[derive(Clone, Copy, Debug)]
enum Cut {
    /// A timeout middleware before the breaker: the breaker's future is
    /// dropped.
    Before,
    /// One after it: the breaker gets the timeout's error.
    After,
    /// reqwest's own per-request timeout: the breaker gets reqwest's error.
    Reqwest,
}

/// One call to a hung upstream cut after a second, `cut` so, by a breaker
/// whose `abandoned_after` is `abandoned_after`. Returns the breaker's
/// state and what it counted.
async fn cut_after_a_second(cut: Cut, abandoned_after: Duration) -> (State, CallCounts) {
    let registry = hosts(
        Breaker::builder()
            .consecutive_failures(1)
            .abandoned_after(abandoned_after),
        TokioTime(tokio::time::Instant::now()),
    );
    let second = Duration::from_secs(1);
    let timeout = || Timeout { after: second };
    let up = Upstream::start(0).await;
    let started = tokio::time::Instant::now();
    let err = match cut {
        Cut::Before => client(Some(timeout()), &registry, None::<Timeout>)
            .get(up.url("/"))
            .send()
            .await
            .unwrap_err(),
        Cut::After => client(None::<Timeout>, &registry, Some(timeout()))
            .get(up.url("/"))
            .send()
            .await
            .unwrap_err(),
        Cut::Reqwest => client(None::<Timeout>, &registry, None::<Timeout>)
            .get(up.url("/"))
            .timeout(second)
            .send()
            .await
            .unwrap_err(),
    };
    match cut {
        Cut::Before | Cut::After => assert!(
            middlewares::<tokio::time::error::Elapsed>(&err),
            "the timeout's own error: {err:?}"
        ),
        Cut::Reqwest => assert!(
            matches!(&err, reqwest_middleware::Error::Reqwest(e) if e.is_timeout()),
            "{err:?}"
        ),
    }
    assert_eq!(started.elapsed(), second);
    assert_eq!(up.requests(), 1, "the upstream had the request");
    (state(&registry, &up), calls(&registry, &up))
}

#[tokio::test(start_paused = true)]
async fn a_timeout_before_the_breaker_is_judged_as_a_dropped_call() {
    // Cut younger than `abandoned_after`: no failure. Older than the
    // default unanswered rule's age (250 ms), it is one unanswered call,
    // which alone trips nothing (twenty in a row do).
    let (state, counted) = cut_after_a_second(Cut::Before, Duration::from_secs(5)).await;
    assert_eq!(state, State::Closed);
    assert_eq!((counted.unanswered, counted.failures), (1, 0));
    // Older: abandoned, a failure.
    let (state, counted) = cut_after_a_second(Cut::Before, Duration::from_millis(500)).await;
    assert_eq!(state, State::Open);
    assert_eq!((counted.abandoned, counted.failures), (1, 0));
}

/// A timeout middleware after the breaker returns its own error, which is
/// another middleware's: no answer came, so the call is judged by its age
/// as a dropped one, exactly as a timeout before the breaker is: a hung
/// upstream behind it still opens. reqwest's own timeout is the upstream's:
/// a failure.
#[tokio::test(start_paused = true)]
async fn a_timeout_after_the_breaker_is_judged_as_a_dropped_call_and_reqwests_own_a_failure() {
    let (state, counted) = cut_after_a_second(Cut::After, Duration::from_secs(5)).await;
    assert_eq!(state, State::Closed);
    assert_eq!(
        (counted.unanswered, counted.failures, counted.neutral),
        (1, 0, 0)
    );
    let (state, counted) = cut_after_a_second(Cut::After, Duration::from_millis(500)).await;
    assert_eq!(state, State::Open);
    assert_eq!((counted.abandoned, counted.failures), (1, 0));
    let (state, counted) = cut_after_a_second(Cut::Reqwest, Duration::from_secs(5)).await;
    assert_eq!(state, State::Open);
    assert_eq!(counted.failures, 1);
}
