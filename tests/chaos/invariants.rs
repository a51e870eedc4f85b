//! The checks both failfast phases apply: the chain of transitions the
//! observer saw, and the bounds of a snapshot.

use std::time::Duration;

use failfast::{BreakerSnapshot, Config, Nanos, Reason, State, Transition};

use super::specs::window_capacity;

/// The first backoff step whose period is the schedule's longest: the step
/// counts no further.
pub fn cap_step(config: &Config) -> u32 {
    let longest = config.open_duration(63);
    (1..=63)
        .find(|&k| config.open_duration(k) == longest)
        .unwrap_or(63)
}

/// Walks the observer's transitions in generation order and checks each
/// against the one before it.
#[derive(Debug)]
pub struct Chain {
    racing: bool,
    probes: u32,
    lease: Duration,
    cap: Duration,
    jitter: f64,
    consecutive: Option<u32>,
    window_capacity: Option<u64>,
    config: Config,
    /// The last transition checked (`None` before the first).
    last: Option<Transition>,
    /// The transition that entered the current Open state or probe round.
    entered: Option<Transition>,
    pub checked: u64,
    /// Open → HalfOpen transitions: the cycles of the run.
    pub cycles: u64,
    /// Trips in a row seen at the cap step of a schedule that grows (the
    /// step counts no further there).
    pub at_cap_step: u64,
    /// The first backoff step that opens for the cap.
    cap_step: u32,
    /// The longest open period entered.
    pub longest_open: Duration,
    pub rounds_superseded: u64,
    pub reasons: Vec<Reason>,
    /// The backoff step the last close kept (it decays while healthy).
    kept_step: u32,
    /// When the last close happened.
    closed_at: Nanos,
}

impl Chain {
    /// `racing`: the transitions come from threads (see the trip by
    /// consecutive failures below).
    pub fn new(config: &Config, racing: bool) -> Chain {
        Chain {
            racing,
            probes: config.half_open_probes(),
            lease: config.probe_lease(),
            cap: config.open_duration_cap(),
            jitter: config.jitter(),
            consecutive: config.consecutive_failures(),
            window_capacity: window_capacity(config),
            config: config.clone(),
            last: None,
            entered: None,
            checked: 0,
            cycles: 0,
            at_cap_step: 0,
            cap_step: cap_step(config),
            longest_open: Duration::ZERO,
            rounds_superseded: 0,
            reasons: Vec::new(),
            kept_step: 0,
            closed_at: Nanos::ZERO,
        }
    }

    /// The next transition, which must follow the last one checked.
    pub fn check(&mut self, t: &Transition) {
        let (prev_gen, prev_to, prev_trips) = match &self.last {
            Some(p) => (p.generation, p.to, p.trips_in_a_row),
            None => (0, State::Closed, 0),
        };
        assert_eq!(
            t.generation,
            prev_gen + 1,
            "one transition per generation: {t:?}"
        );
        assert_eq!(
            t.from, prev_to,
            "a transition starts where the last ended: {t:?}"
        );
        if let Some(w) = self.window_capacity {
            assert!(u64::from(t.window.calls) <= w, "window overflow: {t:?}");
        }
        assert!(t.window.failures <= t.window.calls && t.window.slow <= t.window.calls);
        match (t.from, t.to, t.reason) {
            (State::Closed, State::Open, reason) => {
                assert!(
                    matches!(
                        reason,
                        Reason::ConsecutiveFailures
                            | Reason::FailureRate
                            | Reason::SlowCallRate
                            | Reason::Unresponsive
                    ),
                    "a trip from Closed: {t:?}"
                );
                if reason == Reason::ConsecutiveFailures {
                    // The run the trip was decided on: exactly K in
                    // sequence; on threads at least K (failures racing the
                    // one that reached K count on before its CAS, and may
                    // decide the trip themselves), never less — a trip
                    // whose run a success ended does not happen
                    // (`a_consecutive_trip_reports_the_run_it_tripped_on`).
                    let k = self.consecutive.expect("a consecutive policy");
                    if self.racing {
                        assert!(t.consecutive_failures >= k, "trips at K or more: {t:?}");
                    } else {
                        assert_eq!(t.consecutive_failures, k, "trips at K: {t:?}");
                    }
                }
                // The step the last close kept, decayed by one per base
                // open duration of healthy time, plus one. On threads the
                // close's stamp may be a racer's later reading: a bound.
                let base = self.config.open_duration_base().as_nanos() as u64;
                let healthy = t.at.as_nanos().saturating_sub(self.closed_at.as_nanos());
                let decayed =
                    (self.kept_step.saturating_sub((healthy / base) as u32) + 1).min(self.cap_step);
                if self.racing {
                    assert!(
                        (decayed..=(self.kept_step + 1).min(self.cap_step))
                            .contains(&t.trips_in_a_row),
                        "a trip from Closed after a close that kept step {}: {t:?}",
                        self.kept_step
                    );
                } else {
                    assert_eq!(
                        t.trips_in_a_row, decayed,
                        "decayed from {}: {t:?}",
                        self.kept_step
                    );
                }
            }
            (State::Open, State::HalfOpen, Reason::OpenElapsed) => {
                // No early probe: the round starts no sooner than the open
                // period's end, counted from the trip's own instant (the
                // stamp the breaker counts from is never earlier than it).
                let open = self.entered.expect("an Open state before");
                let ready = open.at + open.open_for.expect("Open has a period");
                assert!(
                    t.at >= ready,
                    "probe at {:?}, before {ready:?}: {t:?}",
                    t.at
                );
                assert_eq!(t.trips_in_a_row, prev_trips, "{t:?}");
                self.cycles += 1;
            }
            (State::HalfOpen, State::HalfOpen, Reason::ProbeLeaseExpired) => {
                let round = self.entered.expect("a round before");
                assert!(
                    t.at >= round.at + self.lease,
                    "a round superseded before its lease ended: {t:?} after {round:?}"
                );
                assert_eq!(t.trips_in_a_row, prev_trips, "{t:?}");
                self.rounds_superseded += 1;
            }
            (
                State::HalfOpen,
                State::Open,
                Reason::ProbeFailed | Reason::ProbeSlow | Reason::ProbeAbandoned,
            ) => {
                assert_eq!(
                    t.trips_in_a_row,
                    (prev_trips + 1).min(self.cap_step),
                    "{t:?}"
                );
            }
            (State::HalfOpen, State::Closed, Reason::ProbesSucceeded) => {
                assert_eq!(t.probe_successes, self.probes, "all P probes: {t:?}");
                assert_eq!(t.trips_in_a_row, 0, "{t:?}");
                self.kept_step = prev_trips;
                self.closed_at = t.at;
            }
            _ => panic!("an illegal transition: {t:?}"),
        }
        match t.open_for {
            Some(d) => {
                assert_eq!(t.to, State::Open, "{t:?}");
                self.longest_open = self.longest_open.max(d);
                // The jittered period of the trips in a row, never above the cap.
                let step = self.config.open_duration(t.trips_in_a_row);
                assert!(
                    d <= step && step <= self.cap,
                    "open for {d:?}, step {step:?}: {t:?}"
                );
                let cut = (step - d).as_secs_f64();
                assert!(
                    cut == 0.0 || cut < step.as_secs_f64() * self.jitter,
                    "jitter cut {step:?} to {d:?}: {t:?}"
                );
            }
            None => assert_ne!(t.to, State::Open, "{t:?}"),
        }
        assert!(
            t.trips_in_a_row <= self.cap_step,
            "past the cap step: {t:?}"
        );
        if t.trips_in_a_row == self.cap_step && self.cap_step > 1 {
            self.at_cap_step += 1;
        }
        if matches!(t.to, State::Open | State::HalfOpen) {
            self.entered = Some(*t);
        }
        if !self.reasons.contains(&t.reason) {
            self.reasons.push(t.reason);
        }
        self.last = Some(*t);
        self.checked += 1;
    }

    /// The state the chain ends in.
    pub fn state(&self) -> State {
        self.last.map_or(State::Closed, |t| t.to)
    }
}

/// The bounds of any snapshot of a breaker with `config`: nothing above its
/// field's ceiling or its window. `quiescent` when no operation is under way
/// (a run of K failures has then tripped the breaker).
pub fn check_snapshot(config: &Config, s: &BreakerSnapshot, quiescent: bool) {
    assert!(
        matches!(s.state, State::Closed | State::Open | State::HalfOpen),
        "no manual mode is used: {s:?}"
    );
    assert!(s.trips_in_a_row <= cap_step(config), "{s:?}");
    if let Some(w) = window_capacity(config) {
        assert!(u64::from(s.window.calls) <= w, "window overflow: {s:?}");
    }
    assert!(s.window.failures <= s.window.calls, "{s:?}");
    assert!(s.window.slow <= s.window.calls, "{s:?}");
    match config.consecutive_failures() {
        // A run that reaches K trips the breaker; only a snapshot taken
        // between the count and the trip (threads) may see K or more.
        Some(k) if quiescent => assert!(s.consecutive_failures < k, "{s:?}"),
        Some(_) => {}
        None => assert_eq!(s.consecutive_failures, 0, "no run is counted: {s:?}"),
    }
    match s.state {
        State::Open => {
            let wait = s.retry_after.expect("Open says when to retry");
            assert!(wait <= config.open_duration_cap(), "{s:?}");
            assert_eq!(s.consecutive_failures, 0, "{s:?}");
        }
        State::Closed => {
            assert!(s.retry_after.is_none(), "{s:?}");
            assert_eq!(s.trips_in_a_row, 0, "{s:?}");
        }
        _ => assert!(s.retry_after.is_none(), "{s:?}"),
    }
    if let Some(c) = s.calls {
        let ended = c.successes
            + c.failures
            + c.ignored
            + c.neutral
            + c.dropped
            + c.unanswered
            + c.abandoned
            + c.panicked;
        assert!(ended <= c.admitted, "more endings than admissions: {c:?}");
        assert!(
            c.slow <= c.successes + c.failures + c.abandoned + c.panicked,
            "{c:?}"
        );
    }
}

/// Every admitted call ended exactly once (checked when no permit is alive).
pub fn check_conservation(s: &BreakerSnapshot) {
    let c = s.calls.expect("call counters are on");
    assert_eq!(
        c.admitted,
        c.successes
            + c.failures
            + c.ignored
            + c.neutral
            + c.dropped
            + c.unanswered
            + c.abandoned
            + c.panicked,
        "every admitted call ended once: {c:?}"
    );
}
