//! The clock-free chaos, run against failfast and its two peers through one
//! driver: `tower-resilience-circuitbreaker` 0.14 and `recloser` 1.4 (both
//! read `std::time::Instant`; neither takes a clock). Every call is a future
//! whose inner call the test answers — later, never, with a panic — or drops
//! (a cancellation), polled with a no-op waker on this one thread, so the
//! runs are the same for a seed. Each breaker is asked for one probe at a
//! time in half-open (failfast `half_open_probes(1)`, tower-resilience
//! `permitted_calls_in_half_open(1)`, recloser `half_open_len(1)`) and trips
//! on three failures.
//!
//! The peers' open periods are zero (half-open at the next call) or an hour
//! (never over during the test), which needs no clock; recloser reopens
//! after a failed half-open round for an hour (its `open_wait_strategy`), so
//! a reopening is seen as rejections. failfast runs on a `ManualClock` moved
//! past its open period where the peers' zero wait needs none.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use failfast::{Breaker, CallError, ManualClock, Outcome, State};
use tower::Service;
use tower_resilience_circuitbreaker::CircuitBreakerError;

use super::support::{deliberate, only_deliberate, Rng};

const HOUR: Duration = Duration::from_secs(3600);

/// How the inner call answers when next polled.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(u8)]
enum Answer {
    Pending = 0,
    Ok = 1,
    Err = 2,
    Panic = 3,
}

/// The inner call of one caller: pending until the test answers it.
struct Controlled(Arc<AtomicU8>);

impl Future for Controlled {
    type Output = Result<u32, u32>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<u32, u32>> {
        // SeqCst: test plumbing on one thread.
        match self.0.load(Ordering::SeqCst) {
            0 => Poll::Pending,
            1 => Poll::Ready(Ok(1)),
            2 => Poll::Ready(Err(2)),
            _ => deliberate(),
        }
    }
}

/// How a call came out.
#[derive(Debug, PartialEq)]
enum Out {
    Rejected,
    Ran,
}

type Call = Pin<Box<dyn Future<Output = Out>>>;

/// The state a breaker lets us read.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Seen {
    Closed,
    Open,
    HalfOpen,
}

/// One breaker under the driver.
trait Subject {
    /// A call of `inner`, not yet polled (every breaker here admits on the
    /// first poll).
    fn call(&mut self, inner: Controlled) -> Call;
    /// Its state and, in half-open, which round (failfast's generation;
    /// tower-resilience's rounds are told apart by watching), if it shows
    /// one (recloser does not).
    fn state(&self) -> Option<(Seen, u32)>;
    /// The classifier panics on the next error it judges while this is set.
    fn classifier_panics(&self) -> &AtomicBool;
    /// A random step's worth of time passes (failfast's clock: 10 ms; the
    /// peers' waits are zero or an hour, and need no time).
    fn tick(&self) {}
    /// Time passes until the open period is over (failfast's clock; the
    /// peers' zero wait needs nothing).
    fn open_period_passes(&self) {}
    /// Time passes until a hung probe's lease is over (failfast only: the
    /// peers have no lease, and no clock in their half-open state).
    fn lease_passes(&self) {}
}

// ---- failfast ----

struct Failfast {
    breaker: Arc<Breaker<ManualClock>>,
    clock: ManualClock,
    panics: Arc<AtomicBool>,
}

impl Failfast {
    fn new(open: Duration) -> Failfast {
        let clock = ManualClock::new();
        let breaker = Breaker::builder()
            .consecutive_failures(3)
            .half_open_probes(1)
            .open_duration(open)
            .backoff_off()
            .probe_lease(open + Duration::from_secs(5))
            .build_with_clock(clock.clone())
            .unwrap();
        Failfast {
            breaker: Arc::new(breaker),
            clock,
            panics: Arc::default(),
        }
    }
}

impl Subject for Failfast {
    fn call(&mut self, inner: Controlled) -> Call {
        let (breaker, panics) = (self.breaker.clone(), self.panics.clone());
        Box::pin(async move {
            let classify = |r: &Result<u32, u32>| {
                if r.is_err() && panics.load(Ordering::SeqCst) {
                    deliberate();
                }
                Outcome::of_result(r)
            };
            match breaker.call_async_with(classify, inner).await {
                Err(CallError::Rejected(_)) => Out::Rejected,
                _ => Out::Ran,
            }
        })
    }

    fn state(&self) -> Option<(Seen, u32)> {
        let s = self.breaker.snapshot();
        let seen = match s.state {
            State::Closed => Seen::Closed,
            State::Open => Seen::Open,
            State::HalfOpen => Seen::HalfOpen,
            other => panic!("no manual mode here: {other:?}"),
        };
        Some((seen, s.generation))
    }

    fn classifier_panics(&self) -> &AtomicBool {
        &self.panics
    }

    fn tick(&self) {
        self.clock.advance(Duration::from_millis(10));
    }

    fn open_period_passes(&self) {
        self.clock
            .advance(self.breaker.config().open_duration_cap());
    }

    fn lease_passes(&self) {
        self.clock.advance(self.breaker.config().probe_lease());
    }
}

// ---- tower-resilience-circuitbreaker ----

/// The inner tower service: answers as its request says.
#[derive(Clone, Copy)]
struct Inner;

impl Service<Controlled> for Inner {
    type Response = u32;
    type Error = u32;
    type Future = Controlled;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), u32>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Controlled) -> Controlled {
        req
    }
}

struct Tower<S> {
    service: S,
    state: Box<dyn Fn() -> Seen>,
    panics: Arc<AtomicBool>,
}

fn tower_resilience(
    wait: Duration,
) -> Tower<
    impl Service<Controlled, Response = u32, Error = CircuitBreakerError<u32>, Future: 'static>,
> {
    use tower_resilience_circuitbreaker::{circuit_breaker_builder, CircuitState};
    let panics = Arc::new(AtomicBool::new(false));
    let flag = panics.clone();
    let layer = circuit_breaker_builder()
        .consecutive_failures(3)
        .permitted_calls_in_half_open(1)
        .wait_duration_in_open(wait)
        .failure_classifier(move |r: &Result<u32, u32>| {
            if r.is_err() && flag.load(Ordering::SeqCst) {
                deliberate();
            }
            r.is_err()
        })
        .build()
        .unwrap();
    let service = layer.layer_fn(Inner);
    let view = service.clone();
    Tower {
        service,
        state: Box::new(move || match view.state_sync() {
            CircuitState::Closed => Seen::Closed,
            CircuitState::Open => Seen::Open,
            CircuitState::HalfOpen => Seen::HalfOpen,
        }),
        panics,
    }
}

impl<S> Subject for Tower<S>
where
    S: Service<Controlled, Response = u32, Error = CircuitBreakerError<u32>>,
    S::Future: 'static,
{
    fn call(&mut self, inner: Controlled) -> Call {
        let mut cx = Context::from_waker(Waker::noop());
        // Its default (not back-pressure) mode is always ready: an open
        // circuit is reported by the call.
        assert!(matches!(
            self.service.poll_ready(&mut cx),
            Poll::Ready(Ok(()))
        ));
        let fut = self.service.call(inner);
        Box::pin(async move {
            match fut.await {
                Err(CircuitBreakerError::OpenCircuit) => Out::Rejected,
                _ => Out::Ran,
            }
        })
    }

    fn state(&self) -> Option<(Seen, u32)> {
        Some(((self.state)(), 0))
    }

    fn classifier_panics(&self) -> &AtomicBool {
        &self.panics
    }
}

// ---- recloser ----

struct Recloser {
    recloser: recloser::AsyncRecloser,
    panics: Arc<AtomicBool>,
}

impl Recloser {
    /// Open for `wait` after a trip from Closed, for `again` after a failed
    /// half-open round.
    fn new(wait: Duration, again: Duration) -> Recloser {
        let r = recloser::Recloser::custom()
            .error_rate(0.5)
            .closed_len(3)
            .half_open_len(1)
            .open_wait(wait)
            .open_wait_strategy(move |_, _| again)
            .build();
        Recloser {
            recloser: r.into(),
            panics: Arc::default(),
        }
    }
}

impl Subject for Recloser {
    fn call(&mut self, inner: Controlled) -> Call {
        let panics = self.panics.clone();
        let predicate = move |_: &u32| {
            if panics.load(Ordering::SeqCst) {
                deliberate();
            }
            true
        };
        let fut = self.recloser.call_with(predicate, inner);
        Box::pin(async move {
            match fut.await {
                Err(recloser::Error::Rejected) => Out::Rejected,
                _ => Out::Ran,
            }
        })
    }

    fn state(&self) -> Option<(Seen, u32)> {
        None
    }

    fn classifier_panics(&self) -> &AtomicBool {
        &self.panics
    }
}

// ---- the driver ----

/// An admitted call in flight.
struct InFlight {
    call: Call,
    answer: Arc<AtomicU8>,
}

fn poll(call: &mut Call) -> Poll<Out> {
    call.as_mut().poll(&mut Context::from_waker(Waker::noop()))
}

/// Starts a call: `Some` if admitted (its inner call then pends).
fn start(s: &mut impl Subject) -> Option<InFlight> {
    let answer = Arc::new(AtomicU8::new(Answer::Pending as u8));
    let mut call = s.call(Controlled(answer.clone()));
    match poll(&mut call) {
        Poll::Ready(Out::Rejected) => None,
        Poll::Pending => Some(InFlight { call, answer }),
        Poll::Ready(Out::Ran) => unreachable!("the inner call pends"),
    }
}

/// Answers an admitted call; a panic (the call's or the classifier's) is
/// caught here, as the caller's runtime would.
fn finish(s: &impl Subject, mut f: InFlight, answer: Answer, classifier_panics: bool) {
    f.answer.store(answer as u8, Ordering::SeqCst);
    s.classifier_panics()
        .store(classifier_panics, Ordering::SeqCst);
    let r = only_deliberate(|| poll(&mut f.call));
    s.classifier_panics().store(false, Ordering::SeqCst);
    let panicked = answer == Answer::Panic || (classifier_panics && answer == Answer::Err);
    match r {
        Ok(Poll::Ready(Out::Ran)) => assert!(!panicked),
        Err(()) => assert!(panicked, "only the deliberate panics"),
        Ok(other) => panic!("an answered call ended with {other:?}"),
    }
}

/// One whole call, answered at once: whether it was admitted.
fn one_call(s: &mut impl Subject, answer: Answer) -> bool {
    match start(s) {
        Some(f) => {
            finish(s, f, answer, false);
            true
        }
        None => false,
    }
}

/// Three failures trip every breaker here.
fn trip(s: &mut impl Subject) {
    for _ in 0..3 {
        assert!(one_call(s, Answer::Err), "Closed admits");
    }
}

/// Starts `n` calls and keeps the admitted ones in flight.
fn start_many(s: &mut impl Subject, n: usize) -> Vec<InFlight> {
    (0..n).filter_map(|_| start(s)).collect()
}

const CALLERS: usize = 200;

/// What one breaker did in each scripted row, as the table's cells say it.
#[derive(Debug, PartialEq)]
pub struct Scripted {
    pub half_open_at_once: String,
    pub after_a_hung_probe: String,
    pub cancelled_probe_frees: String,
    pub panicking_probe_reopens: String,
    pub panicking_classifier_reopens: String,
    pub late_success_changes_half_open: String,
}

fn yes(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

/// The scripted rows, each on a fresh breaker with a zero (or passed) wait.
fn scripted<S: Subject>(fresh: impl Fn() -> S) -> Scripted {
    // 200 callers right after a trip: how many get in at once.
    let mut s = fresh();
    trip(&mut s);
    s.open_period_passes();
    let at_once = start_many(&mut s, CALLERS).len();

    // A probe that never answers and is never dropped; then 200 callers,
    // each answered at once with a success.
    let mut s = fresh();
    trip(&mut s);
    s.open_period_passes();
    let hung = start(&mut s).expect("the first call after the wait probes");
    s.lease_passes();
    let after_hung = (0..CALLERS)
        .filter(|_| one_call(&mut s, Answer::Ok))
        .count();
    std::mem::forget(hung); // never answered, never dropped

    // A probe cancelled (its future dropped) before it answers.
    let mut s = fresh();
    trip(&mut s);
    s.open_period_passes();
    let probe = start(&mut s).expect("a probe");
    drop(probe);
    let next = start(&mut s);
    let cancelled_frees = next.is_some();

    // A probe that panics, or whose classifier panics on its error: is the
    // next call turned away (the breaker reopened)?
    let reopens = |answer: Answer, classifier: bool| {
        let mut s = fresh();
        trip(&mut s);
        s.open_period_passes();
        let probe = start(&mut s).expect("a probe");
        finish(&s, probe, answer, classifier);
        start(&mut s).is_none()
    };
    let panicking_probe = reopens(Answer::Panic, false);
    let panicking_classifier = reopens(Answer::Err, true);

    // Calls admitted before the trip answer while the probe is in flight;
    // then the probe fails. Does the failed probe still reopen the breaker
    // (the next call turned away)?
    let mut s = fresh();
    let early = start_many(&mut s, 5);
    assert_eq!(early.len(), 5);
    trip(&mut s);
    s.open_period_passes();
    let probe = start(&mut s).expect("a probe");
    for f in early {
        finish(&s, f, Answer::Ok, false);
    }
    finish(&s, probe, Answer::Err, false);
    let late_changed = start(&mut s).is_some();

    Scripted {
        half_open_at_once: at_once.to_string(),
        after_a_hung_probe: after_hung.to_string(),
        cancelled_probe_frees: yes(cancelled_frees),
        panicking_probe_reopens: yes(panicking_probe),
        panicking_classifier_reopens: yes(panicking_classifier),
        late_success_changes_half_open: yes(late_changed),
    }
}

pub fn scripted_all() -> [Scripted; 3] {
    [
        scripted(|| Failfast::new(Duration::from_secs(1))),
        scripted(|| tower_resilience(Duration::ZERO)),
        scripted(|| Recloser::new(Duration::ZERO, HOUR)),
    ]
}

/// What one breaker did under the random chaos.
#[derive(Debug, Default)]
pub struct Random {
    /// Calls admitted after the breaker first turned one away, with an open
    /// period of an hour (it never ends during the run).
    pub admitted_while_open: u64,
    /// The most calls in flight that were admitted in one half-open period
    /// (`None`: the breaker shows no state).
    pub most_in_half_open: Option<usize>,
    /// Checkpoints where, after a quiet time (failfast: its open period and
    /// probe lease; the peers: none needed), the next call was turned away.
    pub turned_away_after_quiet: u64,
    pub checkpoints: u64,
    pub admitted: u64,
    pub rejected: u64,
    pub hung: u64,
}

/// One caller's call in flight, and how it will end.
struct Pending {
    flight: InFlight,
    /// Admitted in this half-open period (`None`: not in half-open).
    period: Option<u64>,
    end: End,
}

#[derive(Clone, Copy, Debug)]
enum End {
    Answer(Answer, bool),
    Cancel,
    Hang,
}

/// Tells half-open periods apart by watching the state after every event.
struct Periods {
    last: Option<(Seen, u32)>,
    period: u64,
    /// Calls admitted in the current period and still in flight.
    in_flight: usize,
}

impl Periods {
    fn observe(&mut self, now: Option<(Seen, u32)>) {
        if now != self.last {
            if matches!(now, Some((Seen::HalfOpen, _))) {
                self.period += 1;
            }
            self.in_flight = 0;
        }
        self.last = now;
    }

    fn half_open(&self) -> bool {
        matches!(self.last, Some((Seen::HalfOpen, _)))
    }
}

/// 200 logical callers with random outcomes, cancellations, panics,
/// panicking classifiers and hung calls, for `steps` steps; every 500 steps
/// (when `quiet`) a quiet time and one caller.
fn random<S: Subject>(s: &mut S, seed: u64, stream: u64, steps: u64, quiet: bool) -> Random {
    let mut rng = Rng::new(seed, stream);
    let mut callers: Vec<Option<Pending>> = (0..CALLERS).map(|_| None).collect();
    let mut hung: Vec<InFlight> = Vec::new();
    let mut r = Random::default();
    let mut sick = true;
    let mut turned_away_once = false;
    let mut p = Periods {
        last: s.state(),
        period: 0,
        in_flight: 0,
    };
    for step in 0..steps {
        s.tick();
        if rng.percent(2) {
            sick = !sick;
        }
        if quiet && step % 500 == 499 {
            r.checkpoints += 1;
            s.open_period_passes();
            s.lease_passes();
            p.observe(s.state());
            match start(s) {
                Some(f) => finish(s, f, Answer::Ok, false),
                None => r.turned_away_after_quiet += 1,
            }
            p.observe(s.state());
            continue;
        }
        let i = rng.below(CALLERS as u64) as usize;
        match callers[i].take() {
            None => match start(s) {
                None => {
                    r.rejected += 1;
                    turned_away_once = true;
                    p.observe(s.state());
                }
                Some(flight) => {
                    r.admitted += 1;
                    r.admitted_while_open += u64::from(turned_away_once);
                    p.observe(s.state());
                    let period = p.half_open().then_some(p.period);
                    if period.is_some() {
                        p.in_flight += 1;
                        let most = r.most_in_half_open.get_or_insert(0);
                        *most = (*most).max(p.in_flight);
                    }
                    let end = match rng.below(100) {
                        0..70 => {
                            let fail = rng.percent(if sick { 60 } else { 5 });
                            let answer = if fail { Answer::Err } else { Answer::Ok };
                            End::Answer(answer, fail && rng.percent(20))
                        }
                        70..82 => End::Cancel,
                        82..90 => End::Answer(Answer::Panic, false),
                        _ => End::Hang,
                    };
                    callers[i] = Some(Pending {
                        flight,
                        period,
                        end,
                    });
                }
            },
            Some(call) => {
                let ends = !matches!(call.end, End::Hang);
                if ends && call.period == Some(p.period) && p.half_open() {
                    p.in_flight -= 1;
                }
                match call.end {
                    End::Answer(answer, classifier) => finish(s, call.flight, answer, classifier),
                    End::Cancel => drop(call.flight),
                    End::Hang => {
                        r.hung += 1;
                        hung.push(call.flight);
                    }
                }
                p.observe(s.state());
            }
        }
    }
    // The hung calls are never answered; dropping them at the end is the
    // test's cleanup, not part of the run.
    drop(hung);
    r
}

/// The random chaos against each breaker: `[failfast, tower-resilience,
/// recloser]`, twice: with an open period of an hour, then with zero.
pub fn random_all(seed: u64, steps: u64) -> [Random; 3] {
    let long = [
        random(&mut Failfast::new(HOUR), seed, 1, steps, false),
        random(&mut tower_resilience(HOUR), seed, 1, steps, false),
        random(&mut Recloser::new(HOUR, HOUR), seed, 1, steps, false),
    ];
    let mut zero = [
        random(
            &mut Failfast::new(Duration::from_secs(1)),
            seed,
            2,
            steps,
            true,
        ),
        random(&mut tower_resilience(Duration::ZERO), seed, 2, steps, true),
        random(
            &mut Recloser::new(Duration::ZERO, Duration::ZERO),
            seed,
            2,
            steps,
            true,
        ),
    ];
    for (z, l) in zero.iter_mut().zip(long) {
        z.admitted_while_open = l.admitted_while_open;
    }
    zero
}
