//! The design, for readers and reviewers. This module holds no code.
//!
//! # The machine
//!
//! ```text
//!            failure rate ≥ F  or  slow-call rate ≥ S   (over a window, with ≥ min calls)
//!            or  K consecutive failures
//!   CLOSED ───────────────────────────────────────────────▶ OPEN ◀──────────────┐
//!      ▲                                                      │                  │
//!      │ all P probes of the round fast and successful        │ first request    │ a probe fails
//!      │                                                      │ after the open   │ or is slow
//!      │                                                      ▼ duration (CAS)   │
//!      └──────────────────────────────────────────────── HALF_OPEN ─────────────┘
//!                                  at most P probes admitted; others fail fast;
//!                                  an unresolved round is superseded after the probe lease
//! ```
//!
//! Beside the machine: **ForcedOpen** (reject all), **Disabled** (admit all,
//! record nothing), **MetricsOnly** (record and evaluate, never reject: a trip
//! condition produces a MetricsOnly → MetricsOnly "shadow trip"), and
//! **reset** (back to a fresh Closed). How a breaker comes back — a ramp
//! after the close, a round judged by its rates, an upstream's hint, a
//! backoff step that decays — is [Recovery](#recovery).
//!
//! # Modules
//!
//! Each module uses only the ones above it in this table (the arrows of the
//! module graph all point up the table; there is no circle). `docs` holds no
//! code.
//!
//! | module | holds | uses |
//! |---|---|---|
//! | `sync` | the loom shim: the only place atomics and locks are named, and the crate's internal `Arc` | — |
//! | `outcome` | [`Outcome`](crate::Outcome) (a caller's verdict) and `Verdict` (how a call ended, drops included) | — |
//! | `fault` | [`Fault`](crate::Fault) (who failed a call, read off an error's source chain) and [`DownstreamError`](crate::DownstreamError) | — |
//! | `authority` | the normal form of a host and port, `host:port` (no feature) | — |
//! | `clock` | [`Nanos`](crate::Nanos), [`Clock`](crate::Clock), the three clocks | sync |
//! | `state` | the packed word (`Snapshot`), [`State`](crate::State), `StateCell` and its one update loop | sync, clock |
//! | `ticket` | what an admission hands its permit: two words | clock |
//! | `window` | count- and time-based windows over a slice of atomics; [`WindowKind`](crate::WindowKind), [`WindowCounts`](crate::WindowCounts), their limits ([`MAX_COUNT_WINDOW`](crate::MAX_COUNT_WINDOW), [`MAX_TIME_BUCKETS`](crate::MAX_TIME_BUCKETS)) | sync, clock |
//! | `error` | [`Rejected`](crate::Rejected), [`ConfigError`](crate::ConfigError) | clock |
//! | `observe` | [`Transition`](crate::Transition), [`Reason`](crate::Reason), [`Observer`](crate::Observer), snapshots (an outlier ejection's rule included), call counts | clock, state, window, outlier |
//! | `bulkhead` | calls in flight, one counter | sync, error |
//! | `ramp` | slow start: the curve precomputed as a table, and the per-thread turn that decides which calls a ramp admits | sync |
//! | `retry` | retry budgets ([`RetryBudget`](crate::RetryBudget)): the validated `Rules`, gRPC's token bucket (`tokens`) and Finagle's ratio budget in two halves (`ratio`), each over its slots of a breaker's storage | sync, clock, error, outcome |
//! | `policy` | [`Config`](crate::Config), the hot-path `Flags`, the backoff table; pure judgements (slow? what a drop means? does the window trip? how does a probe round end under the rate rule? how long does a hinted trip open? what is left of the backoff step?) | clock, observe, outcome, ramp, retry, window |
//! | `hooks` | the one place every transition passes: the configuration's [`Observer`](crate::Observer), then its [`OnTransition`](crate::OnTransition) hooks in order (a copy-on-write list, read on transitions only; a layer's hook lent for its lifetime), named by a registry's namer ([`SHARED_NAME`](crate::SHARED_NAME), [`REMOVED_NAME`](crate::REMOVED_NAME)); it knows breakers only as a type parameter | sync, observe |
//! | `remote` | [`RemoteTrip`](crate::RemoteTrip): news of a trip from another replica | observe |
//! | `counters` | the opt-in lifetime call counters over a slice of atomics | sync, observe, outcome |
//! | `outlier` | outlier detection across a pool ([`Outliers`](crate::Outliers)): a host's interval `tally`, the pool's striped `sums` (128-bit words, tagged and sealed), the `figures` in integer fixed point, the `rule` that found a host, the `pool` (cap, panic, health counts) | sync, clock, state, error |
//! | `machine` | the pure decisions: for each event, the next word | clock, error, observe, outcome, policy, state |
//! | `storage` | a breaker's one heap allocation: the window's head word in its header, then the window's body, the remembered hint's slot, an outlier pool's two slots (tally, ejection mark), a retry budget's (and its refused count) and the counters | sync, window, counters, retry |
//! | `breaker` | [`Breaker`](crate::Breaker): admission, verdicts, manual modes, reports (each transition to its configuration's hooks); the `TripGate` a registry plugs in; a pooled breaker's tally, ejection and panic admission; a retry budget's deposit, bucket and retry admission | everything above |
//! | `builder` | the validating [`Builder`](crate::Builder) | breaker and below |
//! | `permit`, `call` | [`OwnedPermit`](crate::OwnedPermit) (one type over any owner of a breaker) and the admissions; `call` wrappers | breaker, ticket and below |
//! | `retry::admit` | a retry's admissions beside a first try's: [`Breaker::try_retry`](crate::Breaker::try_retry) and its owned twins | permit, breaker and below |
//! | `registry` | [`Registry`](crate::Registry): sharded per-key breakers, [`Handle`](crate::Handle)s, sweeping, the fleet cap (its `TripGate`), remote trips, the outlier pools of its keys (`pools`) | builder, permit, breaker, outlier and below |
//! | `config` | serde configuration files | builder, registry, window, error |
//! | `fallback` | [`Answer`](crate::Answer) and the explicit fallbacks [`Breaker::call_or_else`](crate::Breaker::call_or_else) / `call_async_or_else` | call, breaker and below |
//! | `export` | transition observers and scrape-time exporters for `tracing` and `metrics`; per call: `Ending` (how a call ended), the span fields and the `RejectionLog` (feature `tracing`), `CallMetrics` and the handles a layer registers (`meters`, feature `metrics`) | registry, breaker, observe, state, error, clock, sync |
//! | `http` | HTTP without tower (feature `http`): the classifiers and the `Classify` / `ClassifyStream` traits, request keys (`AuthorityKey`, `Keyless`), answers for rejections (`unavailable`, `mark_stale`), `status_json` | authority, registry, observe, state, fault, outcome, error, clock |
//! | `tower` | the layers (feature `tower`, which turns on `http`); `watch`: what a layer records of each call (the span found before admission, the permit `Held` with it to its end); `fallback`: `FallbackLayer`; `error_response`; the items of `http` re-exported | http, export, permit, registry, breaker and below |
//! | `reqwest` | `BreakerMiddleware` (feature `reqwest`): a permit per request from a `Registry<HostKey>` | http, authority, registry, permit, outcome, clock |
//! | `share` | trips shared across replicas, with no I/O: the [`Outbox`](crate::share::Outbox) the request path reports local trips into, [`News`](crate::share::News) and its wire form, the [`Replica`](crate::share::Replica) (publish, the filtered monotone merge, reconcile), the [`Store`](crate::share::Store) rules and the in-process [`MemoryStore`](crate::share::MemoryStore) | sync, clock, state, observe, hooks, remote, error, registry |
//! | `redis` | the Redis transport (feature `redis`): `RedisSync`, one tokio task per registry (two Lua scripts, sharded pub/sub, reconciliation, back-off), and the blocking `RedisStore` | share, clock, error |
//!
//! # The state word
//!
//! One `AtomicU64` per breaker; the layout table is in `src/state.rs`: mode
//! (3 bits), generation (29), three flags — `detached`, `proven`, `counted`
//! — a count (15: consecutive failures while Closed, probe slots taken while
//! HalfOpen), probe successes (8; while Closed, the run of unanswered calls),
//! trips in a row (6: the backoff step, which a close keeps). While Open the
//! count and successes bits hold an *open span* instead (a remote trip's or
//! a hinted trip's period, in units of 2²⁴ ns), so snapshots and transitions
//! read the runs only from Closed and MetricsOnly. Beside the word, the *stamp* holds the instant the
//! current state began (the trip while Open, the round start while
//! HalfOpen), in two `AtomicU64` slots indexed by the generation's parity.
//! A breaker is 48 bytes: the word, the two slots, a thin pointer to its
//! storage, its id (the jitter seed), its flags and the shared config.
//!
//! # Changing the word: one loop, pure decisions
//!
//! Every change of the word goes through `StateCell::update`: the loop loads
//! the word, shows it to a decision, and applies what the decision returns —
//! keep the word, change a count within the generation, or enter a new state
//! (a transition: the generation moves on and the new state's instant is
//! stamped *before* the CAS). A failed CAS shows the decision the word that
//! won, and it decides again. The decisions live in `machine`, as pure
//! functions of (word, stamp, now, config): admission, the run of
//! consecutive failures, a trip, a probe's verdict, the manual modes,
//! leaving the trip gate, a remote trip. They are unit-tested without
//! atomics; the loop itself is what the loom models exercise. Only the
//! caller whose CAS entered a state learns of it, and only it reports the
//! transition (to the observer and to the trip gate).
//!
//! # The trip gate
//!
//! A registry caps how many of its breakers may be ejected at once. The cap
//! is a `TripGate` the breaker consults on a trip from Closed only (never on
//! a request that changes nothing): the gate either refuses the trip, or
//! allows it holding a slot of its budget — the word's `counted` bit carries
//! that answer until the breaker closes, when the gate is told. A breaker
//! that has never seen a success (`proven` unset: an upstream that may not
//! exist, a key an attacker made up) may open without taking a slot, so a
//! flood of made-up keys cannot use up the budget real upstreams need. A
//! breaker the registry removed while handles to it lived sets `detached`
//! and keeps its whole behaviour for them, but no longer touches the gate.
//!
//! # The hot paths
//!
//! * **CLOSED admission** is the word's load; a breaker that times calls
//!   reads the clock, one that counts calls bumps a counter.
//! * **OPEN rejection** after a local trip without jitter is decided in
//!   line: the word, its stamp, the backoff table, and the word re-loaded
//!   before rejecting; a remote trip's span, a jittered period and
//!   everything else go out of line to the update loop. The default clock's
//!   read is `quanta`'s raw TSC read and one fixed-point multiply.
//! * **A success in a settled CLOSED breaker** (no run of failures to end) is
//!   one load and a compare, plus the window's write when there is a window;
//!   the plainest breaker reads no clock for it.
//! * A permit is two words plus its owner; a rejection is three (the wait
//!   with its reason, and an optional shared upstream name).
//!
//! # The eight invariants
//!
//! Each is named where the code upholds it, and checked by a loom model in
//! `loom-tests/` and/or a property test in `tests/`.
//!
//! 1. **One winner per transition.** Every transition is a strong
//!    `compare_exchange` of the state word from an exact snapshot, bumping the
//!    generation; exactly one racer wins and only the winner reports it, so the
//!    observer fires once per generation change.
//! 2. **No early probe.** In Open nothing is admitted before
//!    `stamp + open duration`; after it, the CAS winner is the first probe
//!    and at most P probes are admitted per round.
//! 3. **Fresh stamp.** A transition stamps its new generation's slot with
//!    `fetch_max(now)` *before* its Release CAS; readers load the word with
//!    Acquire, then the stamp. A reader that sees generation g therefore
//!    never sees an older stamp. Nor a newer one: the stamp of generation
//!    g+1 goes to the other slot, so a reader still holding generation g
//!    cannot pair it with the round start of a racer whose CAS is still in
//!    flight (loom found that with one slot: a lost election reported `Open`
//!    for a whole open duration instead of `HalfOpenFull`, and a free second
//!    probe slot was refused). A reader two generations behind re-decides on
//!    the re-loaded word before rejecting. A losing racer's stamp can only
//!    move the time forward by the length of the race, never back.
//! 4. **Stale verdicts are ignored.** A permit carries its generation; a
//!    verdict whose generation is not the current one changes nothing: it
//!    cannot open, close, count, or extend an open period.
//! 5. **No wedge.** A probe that never reports cannot keep the breaker
//!    HALF_OPEN: once the probe lease has passed since the round began, the
//!    next request starts a new round (a HalfOpen → HalfOpen transition),
//!    lazily. A permit dropped without a verdict is judged by how long it was
//!    held (the table "How every call ends" on the crate's front page):
//!    dropped early it frees its probe slot at once and counts for nothing;
//!    dropped after the slow-call threshold or `abandoned_after` (a caller
//!    gave up on a hung call) it counts against the dependency, and a
//!    probe's round fails; with the unanswered rule (on by default where
//!    the admission reads the clock), early but after its age, it extends
//!    the run of unanswered calls; dropped while the thread
//!    panics it is a failure. User code — observers, hooks — runs only after a transition is
//!    published and outside every CAS loop; if an observer of a round start
//!    panics, the probe slot its admission took is given back as the panic
//!    unwinds.
//! 6. **Slow probes fail.** A probe that succeeds slower than the slow-call
//!    threshold reopens the breaker.
//! 7. **Nothing in the background.** No thread, task, timer or allocation per
//!    breaker or per call. Time is read on the request path only where needed,
//!    and every time-taking method has an `_at(now)` twin.
//! 8. **Closed success is cheap.** Admission in Closed is one atomic load.
//!    Recording a success is at most one read-modify-write (the window's), and
//!    none with the consecutive-failures policy alone when no run (of
//!    failures or unanswered calls) is pending.
//!    CAS loops happen only on transitions and on counts that change (a run of
//!    failures, a probe slot).
//!
//! # Memory ordering
//!
//! * The word is loaded with `Acquire` and changed only by `compare_exchange`
//!   with `AcqRel` (failure: `Acquire`). The Release half publishes the
//!   stamp written just before it (invariant 3); the Acquire half orders
//!   each winner after the previous one.
//! * The stamp slot `g % 2` is written with `fetch_max(Release)` before the CAS
//!   and read `Acquire` after an `Acquire` load of the word: happens-before
//!   through the word makes the read see at least the stamp of the observed
//!   transition; and a reader that reads the stamp of generation g+2 (same
//!   slot) synchronises with its writer, so its re-load of the word sees that
//!   the breaker moved on.
//! * Windows, call counters, fleet counters and the bulkhead are `Relaxed`:
//!   they are statistics or budgets and publish no other memory. The trip
//!   decision re-reads the window and is itself a CAS on the word.
//!
//! # Windows under concurrency
//!
//! Sequential use is exact. Concurrent writers racing on the same slot (two
//! calls N apart in the count ring, a write racing a bucket rotation or a
//! reset, a verdict racing the transition that makes it stale) may skew a
//! window by at most the number of writers in that race; counts are clamped
//! to the window, and at quiescence they are exact again.
//!
//! # Departures from the design document
//!
//! * **Outliers, where they depart from the design document:** a
//!   pooled call is counted at its *admission* (the verdict adds only a
//!   failure or a slow call), so a pooled breaker keeps its configuration's
//!   success path, and an ejection happens at the admission that rolls the
//!   host's interval (it is heard by every hook and observer, and is on
//!   [`Transition::outlier_rule`](crate::Transition::outlier_rule); no
//!   verdict returns it). The latency statistic is the slow-call rate, not a
//!   median sketch ([Outliers](#outliers-each-host-against-its-pool)). The
//!   stripe sums are 128-bit words (`portable-atomic`), two per stripe, and
//!   a seal between a report's two CASes takes it in one word only (each
//!   rule reads one word). `success_rate_minimum_gap` is an addition,
//!   0 by default (Envoy's rule). A removed host leaves its pool at once, as
//!   it leaves the fleet's counts. The pooled rows cost more than the design's
//!   budget for them (`benches/README.md` says by how much and why).
//! * **Call counters are opt-in** ([`Builder::count_calls`](crate::Builder::count_calls)).
//!   Counting every admission and rejection is a read-modify-write per call,
//!   which invariant 8 forbids on the healthy path; the generation already
//!   counts transitions for free.
//! * **Jitter only shortens** an open period: it lasts `(d·(1 − jitter), d]`,
//!   so the backoff cap stays a cap.
//! * **Transitions are also returned** from the call that caused them, so a
//!   layer that knows the upstream's name can report it without a per-breaker
//!   observer. The Open → HalfOpen transition (or a superseded round) happens
//!   inside admission: [`Permit::transition`](crate::Permit::transition)
//!   rebuilds it from a few bytes in the permit's ticket, which stays two
//!   words so a permit travels in registers.
//! * **A dropped permit is judged by its age** (revised after the first
//!   wave, where every drop was neutral and outer timeouts and impatient
//!   clients turned the breaker off): early it is neutral — it frees its
//!   probe slot and neither counts nor ends a run of consecutive failures;
//!   late it is a slow call or a failure (a failed round for a probe);
//!   while panicking it is a failure. The policy decides (`Config::judge_drop`,
//!   pure); the breaker reads the clock on this path only, never on a
//!   verdict. A permit from a clock-free admission (`try_acquire` in CLOSED
//!   without a slow-call threshold or an explicit unanswered rule) has no
//!   age, so its
//!   drop is neutral: the success path of the plainest breaker keeps its
//!   single load.
//! * **An abandoned call counts as slow, not failed, when the policy has a
//!   slow-call rate**: the slow-call rate already counts a hung call against
//!   the dependency, and counting it as a failure too would report the
//!   wrong trip reason. A slow abandonment never ends nor extends a run of
//!   consecutive failures.
//! * **Rates below `min_calls` are not published**: the snapshot's rates are
//!   `None` (the metrics gauges -1, Resilience4j's convention, the status
//!   JSON `null`) until the window holds `min_calls` calls, exactly when the
//!   trip conditions start to judge them.
//! * **Durations are bounded**: the open duration, backoff cap, probe lease,
//!   slow-call threshold and `abandoned_after` are at most one day
//!   ([`MAX_DURATION`](crate::MAX_DURATION)); a longer value is a
//!   `ConfigError` (a lease of years would let a lost probe wedge a breaker).
//! * **A full time-window bucket halves its counts** (one CAS) instead of
//!   stopping: at 2²⁰ calls in one bucket its rates stay those of its calls,
//!   weighted toward the recent ones; a bucket that stopped counting went
//!   blind to the failures that followed a million successes. The test is on
//!   the value the call's `fetch_add` returns, and the halving follows the
//!   add (the call that found the bucket full is halved with the rest), so a
//!   healthy call touches its bucket once (loom `time_window_halving`, bug
//!   `bucket-halve-store`).
//! * **A success takes one of four paths**, chosen once at build (the
//!   breaker's flags hold the choice): a plain breaker (no window, no
//!   slow-call threshold, no counters) has the shortest, one load and one
//!   branch in the verdict; a breaker whose only bookkeeping is a count or a
//!   time window has its own, the word's load and one compare (CLOSED,
//!   settled, the permit's generation) then the window's write, the count
//!   window's size kept in the flags so the verdict does not read the shared
//!   config for it; everything else (slow-call timing, call counters) takes
//!   the general path.
//! * **Only a failure or a slow call can trip the breaker.** The trip
//!   conditions are evaluated when such a call is recorded, never after a fast
//!   success: a fast success is evidence of health, and evaluating after it
//!   would cost a window read on the hot path. So a window that reaches
//!   `min_calls` on a fast success while already over a rate trips at the next
//!   failure or slow call, not at that success (Resilience4j would trip at the
//!   success).
//! * **The count window's healthy path writes nothing once the ring is
//!   clean.** When the ring is full and every entry healthy, the writer of a
//!   lap's last entry marks it clean (bit 63 of the cursor word); a healthy
//!   call that finds the mark is one load, no `fetch_add` on the shared
//!   cursor. Skipping it loses nothing: in an all-healthy ring it would
//!   overwrite a healthy entry with a healthy one. Any write that leaves an
//!   entry unhealthy clears the mark; the setter re-reads the ring with
//!   read-modify-writes after setting it, so the two meet on the entry's word
//!   and a failure is never hidden under the mark; a reset zeroes the ring
//!   with `swap`, which keeps that meeting ordered (`window/count.rs`, loom
//!   `count_window_clean` and `window::count::loom_models`, five bugs in the
//!   catalogue). Without the mark, a healthy call is one `fetch_add` on the
//!   cursor and one load of the entry it overwrites, out of line; a second
//!   RMW happens only when that entry held a failure or a slow call.
//! * **The time window's current epoch is one word with its bucket's body
//!   slot** (`e << 11 | (1 + e % B)`), and its bucket width is the constant
//!   body slot 0: a call in the current epoch checks `now` against the
//!   epoch's bounds (one multiplication) and needs no division, no addition
//!   to find its bucket and no read of the shared config; only a call in
//!   another epoch divides, out of line. Bounds-checking the bucket's slot
//!   proves the width's slot is there too, so the body is checked once.
//!   Packed words order as their epochs, so the rotation (one CAS, whose
//!   winner zeroes the skipped buckets; loom `time_window_rotation`, bug
//!   `time-rotate-store`) and the reset (`fetch_max`) are unchanged. The head
//!   starts at epoch 0's word, not 0, which would name the width's slot (bug
//!   `time-head-names-the-width`). The epoch field has 53 bits: with a bucket
//!   width of 1000–2047 ns, times 2⁵³ widths or more after the clock's
//!   origin (285 years at 1000 ns) count in the last epoch.
//! * **A window's head word lives in its storage's header.** The count
//!   window's cursor (with the clean mark) and the time window's epoch word
//!   sit in the `ThinArc`'s header beside the slice's length, so a healthy
//!   call reads them at a fixed offset with no bounds check; the length is
//!   read only by the paths that index the ring or the buckets.
//!
//! * **The end of an open period is computed, not stored.** An OPEN
//!   rejection reads `stamp + backoff step` rather than a stored deadline.
//!   Stamps are merged with `fetch_max`, which is sound because every racer
//!   stamps the instant it *entered* a state, and instants only grow. A
//!   deadline does not: a stale racer that lost its CAS could leave a far
//!   later deadline (a longer backoff step) in the slot the next generation
//!   uses, and a reset right after a long trip writes a deadline smaller
//!   than the one already there — either way a later state would inherit a
//!   wrong instant (a lease that never ends is a wedge). Storing deadlines
//!   safely needs a tagged stamp and a CAS loop in place of `fetch_max`, a
//!   new protocol to prove. The computed end is kept cheap instead: the
//!   inline rejection handles only a local trip without jitter — one masked
//!   compare of the word (mode Open, span 0), one table load, a wrapping
//!   subtraction and a compare — and sends a remote trip's span, a jittered
//!   period (its inline table is all zeros) and a time before the stamp to
//!   the exact decision out of line (`tests/open_rejection.rs`,
//!   `benches/README.md`).
//! * **The generation has 29 bits** (it had 32): the word needed three
//!   flags (`proven`, `counted`, `detached`). A permit would have to be held
//!   across 2²⁹ transitions of its breaker to mistake a stale verdict for a
//!   fresh one.
//! * **`Outcome`, `CallError` and `Answer` stay exhaustive**; every other
//!   public enum and every public struct with public fields is
//!   `#[non_exhaustive]` (`tests/source_rules.rs` checks it). A call's
//!   verdict is for the dependency, against it, or neither; a call either did
//!   not run or ran and failed; an answer is fresh or a fallback: callers
//!   match on all three in every call, and a wildcard arm there would hide a
//!   mistake rather than a future variant (for an answer, a new kind passed
//!   off unlabelled).
//!
//! # The door: who failed, and what silence means
//!
//! The tower layers, the keyed registry and the integrations stand between
//! a request and its breaker, and judge how each call ended before the
//! breaker counts it.
//!
//! * **Only the upstream's doing counts against it.** An error's `source()`
//!   chain says whose it is ([`Fault::of`](crate::Fault::of)): a
//!   [`DownstreamError`](crate::DownstreamError) anywhere (a client's request
//!   body that broke, stalled or grew too large, marked by `DownstreamBody`,
//!   feature `tower`) is the client's; so is a `hyper::Error` of the
//!   request's own making (`is_user`: its body's stream failed or ended
//!   early; feature `hyper`, on with `tower` and `reqwest`); an I/O error of
//!   a local resource running out (`EMFILE`, `ENFILE`, `ENOBUFS`, memory,
//!   local ports) is the caller's; anything else is the upstream's. The
//!   shipped classifiers record the first two as
//!   [`Outcome::Neutral`](crate::Outcome::Neutral): not counted, and —
//!   unlike `Ignored`, which proves the upstream answered — ending no run,
//!   so a client mixing broken requests into a failing upstream's traffic
//!   cannot keep it closed. The layers box the inner error before they
//!   classify (they return it boxed anyway), so every classifier can read
//!   the chain; other client libraries' errors are known by what they wrap
//!   (the body's error, the connector's `io::Error`), and a classifier's
//!   `fault` hook can add more.
//! * **A client's broken upload is the client's, with nothing wrapped.**
//!   hyper's error for a call whose request body failed carries only the
//!   body's own error — for a client gone mid-upload, an `io::Error` of kind
//!   `UnexpectedEof`, which is also what an upstream that hung up looks
//!   like — so before `Fault::of` read hyper's kind, five such uploads
//!   through a plain `FailFastLayer` or `KeyedLayer` over hyper-util's
//!   client, or through the reqwest middleware (whose error keeps hyper's
//!   inside), opened a healthy upstream's breaker; so did five stalled or
//!   oversized ones, cut by the server's idle or size limit. Two ways were
//!   weighed. *The layer wrapping each request body* to mark its errors
//!   changes the request type the inner service gets: every user's client
//!   type (`Client<_, Incoming>`, tonic's `Channel`, which takes only its
//!   own body) stops compiling, the layers (generic over the request, for
//!   non-HTTP services too) cannot wrap only HTTP requests without a second
//!   type of layer, and the plain layer with the default classifier would
//!   still be wrong. *Reading hyper's own kind* needs none of that: hyper
//!   is in every hyper-based client's build already, this one has none of
//!   hyper's features (its error type over crates `tower` has; about 1.6 s
//!   of a debug build), it works for any request type and any body, and it
//!   costs nothing until a call has failed (the `ff_keyed` row is
//!   unchanged). reqwest's own kinds are not read: its `is_body` is also a
//!   response body that broke, the upstream's doing. What it cannot see:
//!   a stalled body that nothing limits (set an idle limit below the
//!   layer's timeout), and HTTP/2, where hyper answers a body's error with a
//!   reset of the stream and the call's error carries no mark, with
//!   `DownstreamBody` or without. `tests/client_uploads.rs` sends each kind
//!   of upload five times through each door to a healthy server on
//!   loopback, and five clients hanging up on a hyper proxy; the catalogue's
//!   `hyper-user-errors-narrowed` is caught by them.
//! * **Silence is evidence.** A hung upstream behind clients more impatient
//!   than the slow-call threshold sees only early drops, each neutral. The
//!   unanswered rule ([`Builder::unanswered`](crate::Builder::unanswered))
//!   counts drops before any answer, held at least its age, in a run kept
//!   in the state word's successes bits while Closed; any answer ends it,
//!   and `calls` in a row trip the breaker ([`Reason::Unresponsive`](crate::Reason::Unresponsive)).
//!   The state is written only by those drops: the settled-success test
//!   masks the run with the failure run, so a healthy success is the same
//!   load and compare as before, and the first success after a run ends it
//!   on the slower path once (as the first success after a failure does).
//!   The loom model `loom-tests/tests/unanswered.rs` races a drop that would
//!   complete the run against a success that would end it, and two drops
//!   against each other.
//! * **The unanswered rule is on by default** where the admission reads the
//!   clock anyway (the tower layers, `call_async`, the reqwest middleware,
//!   `_at(now)` admissions, half-open probes, a breaker with a slow-call
//!   threshold): 20 calls in a row, each held at least 250 ms, or half the
//!   shorter of the slow-call threshold and `abandoned_after` when that is
//!   shorter, so it fits any configuration instead of refusing it. It sets
//!   no flag of the hot path: a plain `try_acquire` on a breaker that times
//!   nothing still reads no clock, and its drop stays neutral (callgrind
//!   `failfast` 31/51 unchanged); only a rule set with `unanswered(calls,
//!   after)` dates every admission, as `abandoned_after` does. It is not a
//!   trip condition the user chose: a builder with none still fails.
//!   `unanswered_off()` (config files: `unanswered = "off"`, per host too)
//!   restores the old behaviour. **The measurement** (`examples/unanswered_default`,
//!   a manual-clock simulation with Poisson arrivals, pinned by
//!   `tests/unanswered_default.rs`): behind clients that give up at 300 ms a
//!   hung upstream's breaker opens after 23 calls at 10 calls/s (2.3 s) and
//!   49 at 100 calls/s (0.5 s), behind 1 s clients after 29 and 109 calls;
//!   the controls — a healthy upstream (median 50 ms, p99 0.5 s) whose
//!   clients cancel at random or all give up at 100 ms or 300 ms, 200,000
//!   calls each, and a slow upstream that answers (median 1.5 s) while 30 %,
//!   50 % or 80 % of its clients give up, 100,000 calls each — never trip.
//!   Runs of unanswered drops between answers come by chance at a rate of
//!   about `q^calls` per answer, `q` the share of unanswered endings: 10
//!   calls trip the 80 % control several times, 20 never did.
//!   The age trades the patience it catches against the pauses it rides
//!   out: at 250 ms a healthy upstream's 750 ms pause trips nothing (a 1 s
//!   one does), at 100 ms clients of 100 ms are seen but a 750 ms pause
//!   trips; below 250 ms a cancel says little (a hedged request's loser, a
//!   race, a deadline shorter than a healthy tail), and the slow-call
//!   threshold, when set, brings the age down with it.
//! * **A stream is judged by its progress.** A response whose head came is
//!   *answered* (two bits of the permit's ticket: answered, and whether the
//!   head was slow); from then each frame restarts the time a drop is
//!   judged by, so a body dropped while bytes flow is neutral however long
//!   it ran, and one that delivered nothing for `abandoned_after` counts as
//!   abandoned. Slowness is the time to the head. The progress stamp lives
//!   in the body that carries the permit, owned by one task: no atomic, so
//!   no loom model (one clock read per frame while a verdict is pending).
//! * **A trip reports what it was decided on**: the window's counts and the
//!   runs of the word the decision read, not those of the word its CAS
//!   replaced, which a racing success of the same generation may have
//!   changed (found by the chaos harness, `tests/chaos.rs`).
//!
//! # Recovery
//!
//! Four ways a breaker comes back better than "one probe, then everyone",
//! each costing the healthy path nothing, and a default schedule chosen by
//! replaying a measured incident ([The default schedule](#the-default-schedule)).
//! What each adds:
//!
//! | feature | per breaker | per configuration | request path outside it |
//! |---|---|---|---|
//! | ramp (slow start) | 0 bytes: a mode code of the word and the close's stamp | the curve: 128 steps × 4 bytes = 512 bytes | unchanged (the same one masked compare) |
//! | half-open rate rule | 0 bytes: three 5-bit counts in the HalfOpen word | the two thresholds and their precomputed probe counts | unchanged |
//! | a tripping verdict's upstream hint (on by default) | 0 bytes: the hint travels with the verdict to the trip it causes | the cap | unchanged; a hinted verdict takes its own out-of-line path |
//! | remembered hints (`hints()`) | 8 bytes (one slot in the breaker's storage), or 32 bytes for a breaker that otherwise has no storage (the allocation's 24-byte header and the slot) | the cap | unchanged; a verdict with a hint stores one word |
//! | decaying backoff | 0 bytes: the step stays in the word's `trips` field | — | unchanged; computed at the next trip |
//!
//! The breaker itself stays at 48 bytes; `tests/recovery_memory.rs` checks
//! the per-breaker column through
//! [`Breaker::memory_bytes`](crate::Breaker::memory_bytes) and `size_of`.
//! The curve is held inline in the [`Config`](crate::Config), so each
//! configuration (a registry's template, each override) carries its 512
//! bytes whether its ramp is on or not.
//!
//! **The ramp's mode code.** A probe round that closes a breaker with a
//! ramp writes mode code 4 instead of Closed's 0: to everyone outside it is
//! [`State::Closed`](crate::State::Closed), and the close's stamp is the
//! ramp's start. The CLOSED admission is a test for code 0, so a ramping
//! word goes out of line, where the admission reads the share for its time
//! from the table (one division by the step, one load: no `powf` per call)
//! and a per-thread turn decides (a Weyl sequence, `frac(n·φ + id·φ²)`, no
//! RNG and no shared write; its points spread evenly, so a thread that
//! alternates between two ramping breakers admits each one's share). The
//! first admission after the window moves the word back to code 0 within its
//! generation (a count change, not a transition), so after a ramp every path
//! is that of a breaker that never ramped. **The success path gains no
//! instruction**: 4 is `0b100`, the only mode code other than Closed's with
//! the two low bits clear, so the settled-success test — one masked compare
//! of the word, `word & (MODES | PROVEN | RUNS) == PROVEN` — keeps its one
//! compare with `0b011` for `0b111` as the mode part of its constant, and
//! accepts both codes. A trip during the ramp is a failed recovery: the next
//! backoff step, with no decay.
//!
//! **The rate rule's word layout.** Under the rule a HalfOpen word splits
//! its 15-bit count field (bits 35–49) into three 5-bit counts — probe slots
//! taken (35–39), failed probes (40–44), slow probes (45–49) — and keeps its
//! 8-bit successes (50–57), fast or slow: so **P ≤ 31**, refused at build otherwise
//! (`half_open_probes`, "1..=31 under the half-open rate rule"). The counts
//! tile the field exactly (a `const` assertion in `state.rs`), so the word's
//! layout and every loom model keep their shape. A probe's verdict adds
//! to the counts in the same CAS that decides the round (so exactly one
//! verdict closes or reopens it). A slow failure counts toward both
//! limits, failed and slow (Resilience4j's `SLOW_ERROR`); a success, fast
//! or slow, is a success, so successes plus failures are the round's
//! answers. The round is decided as soon as its outcome is certain,
//! against integer limits precomputed at build (the least `k` with `k / P`
//! at or above the rate), so no verdict divides: it reopens the moment a
//! count reaches its limit, and closes the moment the `P − answers` still
//! to come, were they all slow failures, could reach neither (at 50 % of
//! 10, the sixth success of a clean round closes it). The probes still
//! out then answer a round that is over: their verdicts are of an older
//! generation and change nothing. A failure never closes a round on the
//! failure count (it adds one failure and takes one answer to come), only
//! on the slow count. The loom model
//! `protocol_rule_early_close_races_a_late_failure` races the closing
//! success against a late failure; `tests/half_open_rule.rs` pins both
//! rules. A probe dropped early or ignored frees its slot and counts
//! toward no rate; a probe still out when the lease ends counts as failed.
//!
//! **A tripping verdict's hint.** A verdict recorded with an upstream's
//! hint ([`Permit::record_hinted`](crate::Permit::record_hinted): the
//! layers and the reqwest middleware pass a `Retry-After` or a gRPC
//! pushback with every verdict but a success) takes its own path out of
//! line, through the same update loop, carrying the hint to the trip
//! decision: if this verdict trips the breaker (or fails its probe), the
//! OPEN word holds `max(step, min(hint, max_hint))` as its open span
//! (2²⁴-ns units up to 39 h, hence `max_hint`'s limit; 10 min by default).
//! Nothing is stored, so this is on by default and costs no byte; a
//! verdict without a hint keeps its path instruction for instruction.
//! `hints_off()` takes none.
//!
//! **The hint slot** (`hints()`, `max_hint(d)`). A verdict's hint is also
//! remembered: the instant it ends, capped at `max_hint`, goes to one
//! `AtomicU64` of the breaker's storage, after the window's slots (0:
//! none). The next trip — that verdict's or a later one's — reads it,
//! opens for at least what is left of it (or of the tripping verdict's own
//! hint, if longer), and clears it: a hint lengthens one trip and never
//! rejects while Closed. The slot is read and written **Relaxed**: it is a
//! value of its own, with no other memory to publish; two racing hints may
//! land in either order, and either is the upstream's latest word. A
//! breaker with no window and no counters has no storage; the slot then
//! costs the allocation (24 bytes of header and the slot). Remembering is
//! off by default, so the slot is there only when asked for: a registry of
//! consecutive-policy breakers keeps its bytes per host.
//!
//! **Decay, and what it means for eviction.** A close keeps the backoff
//! step in the word's `trips` field. Nothing runs while the breaker is
//! healthy: the next trip from Closed computes, from the close's stamp, the
//! step less one for each base open duration of healthy time since (ramp
//! included), then adds one (Envoy's decay of the ejection time); a
//! snapshot's [`backoff_step`](crate::BreakerSnapshot::backoff_step) shows
//! the same value at any instant. The step stops counting at the **cap
//! step**, the first whose period is the cap (precomputed with the backoff
//! table), as Envoy's multiplier stops at `max_ejection_time`: a step
//! counted past it would open for the cap all the same, and decay would
//! have to wear the uncounted steps off first (after 30 flaps on 10 s ×2
//! up to 80 s, 80 s of health still opened for 80 s). So `cap step × base`
//! of healthy time brings the period back to the base, however long the
//! host flapped (`tests/recovery.rs`,
//! `after_a_long_flap_cap_step_base_periods_of_health_bring_back_the_base`).
//! A host that flaps keeps its longer open periods; a host that stays
//! healthy returns to the base. So **a breaker
//! with a step left is not pristine**:
//! [`is_pristine_at`](crate::Breaker::is_pristine_at) waits for the step
//! to decay to the base (and for the word to leave the ramp's code, which
//! the first admission after the window does), and the registry, which
//! evicts an idle Closed breaker early only when it is pristine, keeps a
//! flapping host's history until it has been healthy long enough to lose it
//! anyway. A Closed breaker idle past `forget_after` is evicted whatever it
//! holds, its step included. An upstream's hint remembered from a verdict
//! that did not trip is kept by the same rule: it would lengthen the next
//! trip, so the breaker is not pristine until the hint has run out. An OPEN
//! one is kept for the TTL plus its own open period (its step, or the span
//! a hint, an outlier ejection or another replica's news set), so a trip a `Retry-After: 600` holds open is not forgotten before
//! the upstream asked to be called again.
//!
//! # The default schedule
//!
//! By default a breaker opens for **1 s, doubling per trip in a row up to
//! 3 × the base: 1, 2, 3, 3 … s**, and its probe lease is the base but at
//! least 30 s. One probe per open period is all an open breaker sends, so a
//! long period spares the sick host almost nothing, while every caller of a
//! host that has come back waits for the period's end. The old default, 30 s
//! doubling up to 5 min, came out of no measurement; in a real 40 s slow
//! incident the proxy example (10 s doubling) served its first 200 33 s
//! after the upstream came back, nginx 4.9 s and HAProxy 4.2 s after
//! (`shared/research/incident`). In 30 s incidents it had looked fastest,
//! because its second probe happened to fall just after the return.
//!
//! The choice was made by replaying that incident on a
//! [`ManualClock`](crate::ManualClock) (`tests/incident_recovery.rs`; the
//! replay gives the measured 33.1 s for the proxy's schedule): callers send
//! 100 calls/s, open loop, and give up after 1 s; the upstream is healthy
//! (80 ms) for 5 s, then for 10 s to 30 min (every 0.1 s from 10 to 20 s, so
//! every phase of a short period, every second to 2 min, then 5–30 min) it
//! answers slowly (8 s), hangs, answers 503 in 1 ms or refuses connections;
//! the breaker has the proxy example's trip conditions. The bar: the first
//! fresh 200 within 5 s of the upstream's return, as nginx and HAProxy
//! managed, and at most one call per second of the outage to the sick host
//! after the trip (nginx with `fail_timeout=10s` sends one per 10 s). Each
//! schedule's worst case over the lengths (`cargo test --test
//! incident_recovery the_schedules_compared -- --nocapture` prints it; the
//! test asserts the numbers quoted here):
//!
//! | schedule | longest wait after the return: slow or hung / failing fast | after the 40 s slow incident | calls/s of the outage to the sick host |
//! |---|---:|---:|---:|
//! | 30 s ×2 to 5 min (the old default) | 159.1 s / 150.2 s | 52.1 s | 0.03 |
//! | 10 s ×2 to 5 min (the proxy example's) | 34.1 s / 30.1 s | 33.1 s | 0.10 |
//! | 10 s, no backoff (nginx's `fail_timeout`) | 11.0 s / 9.9 s | 4.1 s | 0.10 |
//! | 5 s, no backoff | 6.0 s / 4.9 s | 2.1 s | 0.18–0.20 |
//! | 1 s ×2 to 4 s | 5.0 s / 4.0 s | 0.1 s | 0.33–0.36 |
//! | 2 s, no backoff | 3.0 s / 2.0 s | 2.1 s | 0.36–0.50 |
//! | **1 s ×2 to 3 s (the default)** | **4.0 s / 3.0 s** | 1.1 s | 0.34–0.41 |
//!
//! The old default's worst came after the 30 min incident, at its 5 min
//! cap. Any period over about 4 s misses the bar on some length: the worst case
//! is a probe sent just before the return to a host whose calls hang, given
//! up on after the callers' 1 s, then one whole period. Of the schedules
//! that meet it, the default starts at 1 s, so a blip of a second or two
//! costs its callers about a second, and settles at 3 s, so a host that
//! stays down gets one probe per 3–4 s (a third fewer than with 2 s
//! fixed) for a second more of worst-case wait. The ramp stays off: it
//! would keep turning callers away for its window after a recovery the
//! probe already proved. A base set with
//! [`open_duration`](crate::Builder::open_duration) keeps the shape (×2 up
//! to 3 × that base); the old schedule is
//! [`open_schedule(30 s, 2.0, 5 min)`](crate::Builder::open_schedule). The
//! lease does not follow a short base below 30 s: a lease of 1 s would
//! start a new round before a probe slower than 1 s answered, and such a
//! host could never close its breaker.
//!
//! # Many breakers
//!
//! A [`Registry`](crate::Registry) keeps one breaker per key in
//! `CachePadded` shards, each a papaya map of `Arc<Entry>` read with no
//! lock, written under the shard's own mutex (`registry::map`, `shard`;
//! under `failfast_loom` a stand-in with papaya's documented guarantees).
//! Callers may keep a [`Handle`](crate::Handle) per upstream so requests
//! never touch the map. A breaker is evicted by information, not by state:
//! with no live holder (the handshake of `Entry::claim` with
//! `Entry::begin_leaving`, modelled in `loom-tests/tests/registry*.rs`) and
//! idle past the TTL, when it is pristine, or CLOSED with nothing newer than
//! `forget_after` in its window, or OPEN/HALF_OPEN and idle past the TTL
//! plus its open period — one shard at a time, by whoever wins the
//! sweep CAS. A full registry sends new keys to one overflow breaker per
//! shard. An entry keeps its key in the form
//! [`Key`](crate::registry::Key) names: a sized key as itself, and `str` as
//! a [`HostKey`](crate::registry::HostKey), so host names live inside the
//! entry with no allocation of their own. The
//! [`registry`](crate::registry) module docs hold the full argument.
//!
//! # Outliers: each host against its pool
//!
//! [`RegistryBuilder::outliers`](crate::RegistryBuilder::outliers) makes a
//! registry's keys a pool (or several, named by
//! [`Builder::outlier_pool`](crate::Builder::outlier_pool)) whose hosts are
//! compared with each other, Envoy's way, with no timer and no scan
//! ([`outlier`](crate::outlier) holds the argument; the races are loom
//! models in `src/outlier/loom_models.rs` and `loom-tests/tests/outliers.rs`).
//!
//! - **Intervals come from the clock**, not from a sweep: interval `k` is
//!   `now / interval`. A host's tally ([`outlier`](crate::outlier)) counts its calls,
//!   failures and slow calls of one interval in one word of its own storage.
//!   Its first call of a later interval rolls the tally (one CAS, one
//!   winner), adds the host's rates to the pool's sums of the interval it
//!   left, and judges it against the figures of the interval before that.
//! - **The sums are exact**: integers in ppm, `(hosts, Σr, Σr²)` and
//!   `(failure hosts, slow hosts, Σslow)`, in two 128-bit words per stripe
//!   (16 stripes, two slots by parity), each word tagged with its interval
//!   and changed only by CAS: an add to a word of an older interval resets
//!   it in the same CAS, and a seal sets a bit in the same CAS that reads
//!   the sums, so a report is in one interval's figures or refused, never
//!   half in. The figures (Envoy's `mean − f·stdev` with `isqrt`, the
//!   failure-percentage gate, the slow limit) are computed once per interval
//!   and pool by whoever needs them first, and cached in one word.
//! - **What a request pays**: a pooled host takes the general verdict path,
//!   reads the clock at each verdict, and adds to its tally (one
//!   `fetch_add` on its own line). Once per interval it rolls (a CAS, two
//!   CASes into the sums); once per interval and pool one of them seals the
//!   16 stripes (32 CASes) and takes a square root. A breaker in no pool
//!   pays nothing: the tally's test shares the counters' test on the general
//!   path, and the panic check is on the out-of-line rejection path, which
//!   an outlier ejection reaches because its open period is held as the
//!   word's span.
//! - **Evidence, by default.** Envoy's stdev threshold ignores how many
//!   calls a rate rests on, so a tight healthy pool ejects hosts for their
//!   noise. Every rule of the default also asks for evidence: a CUSUM of
//!   the host's log-likelihood ratios (failing, or slow, twice as often as
//!   its pool against as often), each interval's ratio that of the
//!   conditional test of two Poisson rates given the host's calls and the
//!   pool's (`outlier::evidence`), kept in 11 bits of the host's mark and
//!   stepped at its roll. Ejection needs the sum at `ln(1/α)` (α = 10⁻⁶)
//!   *and* the rule's usual test in the deciding interval. Ville's
//!   inequality bounds a healthy host's false ejections by α per interval,
//!   whatever its volume or its pool's size; the trade-off harness
//!   (`examples/outlier_tradeoff.rs`, its table in `benches/outlier_tradeoff.md`)
//!   measured it against Envoy's rule over 48 pools. `Outliers::envoy()`
//!   asks for no evidence: Envoy's rule exactly.
//! - **Envoy's ejection time**, by default for pools: `base × n` capped at
//!   `max`, `n` raised at each ejection and lowered once per interval the
//!   host is back, kept lazily in the mark (the multiplier and the interval
//!   the last ejection ended in). The ejection's span is the OPEN word's,
//!   so the breaker's own backoff (and its decay) is not touched;
//!   `Outliers::ejection_time_of_breaker` makes an ejection one more trip
//!   of it instead.
//! - **Fleet safety** is the pool's: per-rule enforcement percentages (a
//!   deterministic draw per host and interval), a cap on ejected hosts
//!   (`max_ejection_percent`, at least one), and panic mode: below
//!   `panic_threshold` healthy members (not open, half-open or forced open),
//!   no host is ejected, and the hosts an outlier ejection holds open admit
//!   calls until the share is back. Ordinary trips stay. An ejection ends
//!   the way every trip does, through the lazy probe and backoff; the
//!   ejection mark (the OPEN word's generation) is written before the
//!   trip's CAS, so whichever transition leaves that generation finds it
//!   and gives the pool's place back.
//!
//! **The latency statistic.** The issue allows a slow-call rate or a median
//! from a small sketch; failfast keeps the **slow-call rate**, in 18 bits of
//! the tally word the host already writes: a slow call is the breaker's own
//! `slow_call_threshold` crossed, so the latency rule costs no byte and no
//! write beyond the success-rate rule's. A host is a latency outlier when
//! its slow rate exceeds `factor ×` the pool's mean slow rate and a floor
//! (the floor keeps a pool whose mean is near zero from ejecting a host for
//! one slow call). A median sketch (a log-bucketed histogram of 8–16
//! buckets) would need no threshold, but costs a second word per host and
//! a second read-modify-write per call; its stripe sums would need one
//! count per bucket. The threshold makes "twice as slow" visible when it is
//! set near the pool's usual tail: a host whose calls all take twice as
//! long crosses it several times as often (the demo's scene shows one).
//!
//! Pools apply to a registry's keys. A balancer's endpoints behind
//! `EjectLayer` are standalone breakers and in no pool; a balancer that
//! wants outliers keys its endpoints in a registry.
//!
//! # Retry budgets
//!
//! A retry sent to a host that is failing adds load where it hurts most: with
//! three retries per call a failing host sees four times its traffic, and
//! every layer that retries multiplies again. A breaker bounds what reaches
//! a host that is *down*; a [`RetryBudget`](crate::RetryBudget)
//! ([`Builder::retry_budget`](crate::Builder::retry_budget), off by default)
//! bounds what retries add to one that is *failing*, per host, beside its
//! breaker. Retries ask [`Breaker::try_retry`](crate::Breaker::try_retry)
//! (the layers and the reqwest middleware do); first tries go through
//! [`try_acquire`](crate::Breaker::try_acquire) as before.
//!
//! - **Tokens: gRPC's retry throttling** (gRFC A6), exactly:
//!   [`RetryBudget::tokens(max_tokens, token_ratio)`](crate::RetryBudget::tokens).
//!   A bucket of `max_tokens` per host (at most 1000), full at first; each
//!   failed call takes a token, each successful one gives `token_ratio`
//!   back (three decimals kept: the bucket is counted in thousandths, in
//!   integers); retries stop while the bucket holds `max_tokens / 2` or
//!   less. A failure is the breaker's: slow successes and abandoned calls
//!   count, ignored verdicts (business errors) and neutral drops do not.
//!   gRPC's own example holds to the token: 4 tokens, ratio 1.6, failure
//!   (3), success (4), failure (3), failure (2): no more retries.
//!   [`RetryBudget::grpc()`](crate::RetryBudget::grpc) is its service-config
//!   example, 10 tokens and 0.1.
//! - **Ratio: Finagle's retry budget**:
//!   [`RetryBudget::ratio(percent, ttl, min_per_second)`](crate::RetryBudget::ratio).
//!   Each first try deposits `percent` of a retry, each retry withdraws one,
//!   both expire after the TTL, and a reserve of `min_per_second × ttl`
//!   retries is always there (for a host with little traffic, or a client
//!   that just started). [`RetryBudget::finagle()`](crate::RetryBudget::finagle)
//!   is Finagle's default, `ratio(0.2, 10 s, 10)`: about a fifth of the
//!   requests may be retried, plus 10 retries a second. Finagle keeps the
//!   TTL in ten slices; here it is two halves in one word of sums, moved on
//!   lazily by the first call of a new half (no timer), so an entry counts
//!   for between half the TTL and the whole of it.
//!
//! **The bound.** With a ratio budget, over any two consecutive halves of
//! the TTL, what reaches the host is at most the offered first tries, plus
//! `percent` of them, plus the reserve,
//! `upstream ≤ (1 + percent) × offered + min_per_second × ttl`, however eagerly callers retry
//! (`tests/retry_budget.rs` drives a failing host with every call retried
//! until refused). A token budget bounds retries to what successes earn:
//! once failures have taken half the bucket, no retry goes until successes
//! refill it.
//!
//! **Bound to the breaker.** A retry is admitted only if the breaker admits
//! a call *and* the budget has room. The breaker's rejections come first
//! (open, half-open full, forced open, ramp): then the budget is not asked
//! and nothing is withdrawn. With [remembered hints](crate::Builder::hints)
//! a retry is refused until the upstream's last `Retry-After` or gRPC
//! pushback has passed, even while the breaker is Closed (a hint that
//! opened the breaker refuses every call anyway). A refusal is a
//! [`Rejected`](crate::Rejected) with
//! [`RejectReason::RetryBudget`](crate::RejectReason::RetryBudget), counted
//! in `rejected` and in [`CallCounts::retries_refused`](crate::CallCounts);
//! the room left is the snapshot's
//! [`retry_room`](crate::BreakerSnapshot::retry_room) (and the metrics'
//! `circuit_breaker_retry_room`). In Closed the breaker admits without a
//! change, so the budget decides first and a refusal creates no permit;
//! elsewhere the breaker's admission comes first (it may begin a probe
//! round) and a refusal gives its permit back as a neutral drop, its probe
//! slot freed, and takes back the deposit the admission made.
//!
//! **In a registry.** A breaker whose token bucket is below full is not
//! [pristine](crate::Breaker::is_pristine_at): only successes refill a
//! bucket, so a sweep keeps it past the idle TTL (until `forget_after`),
//! and a host that was failing does not come back with its retries allowed.
//! A ratio budget's sums expire with its own TTL (60 s at most).
//!
//! **Cost.** Off: no slot, and no instruction on the breaker's own paths:
//! the budget's flags join masks the paths already test, the deposit waits
//! behind the call counters' own test and the bucket behind it on a
//! verdict, so every row of `benches/README.md` without a budget is what it
//! was before budgets existed. With call counters on, an admission and a
//! verdict test one more flag each. A ratio budget takes two slots of the
//! breaker's storage (16 bytes: when the current half ends, and the two
//! sums packed in one word), and its first tries read the clock at
//! admission (so a permit dropped without a verdict is judged by its age,
//! as in an outlier pool); a deposit is one compare of now with the half's
//! end (no division, no multiplication), one `fetch_add` and a carry test,
//! in line: about 20 instructions over the same breaker without a budget.
//! A retry is one CAS, in line. A token budget takes one slot (8 bytes);
//! its verdicts take the general path, where a success on a full bucket is
//! one load and a compare behind a call: about 30 instructions over a
//! breaker whose successes take the general path anyway, about 50 over a
//! count window's own success path. With call counters, one more slot
//! counts the refused retries. The numbers are callgrind's `ff_budget`,
//! `ff_budget_tokens`, `ff_retry` and their `_at` twins
//! (`benches/README.md`). The races (withdrawals for the last retry, the
//! move to a new half racing a deposit or a withdrawal, verdicts on the
//! bucket) are loom models in `loom-tests/tests/retry_budget.rs`; the
//! bookkeeping is a
//! proptest model (`tests/retry_model.rs`).
//!
//! # What each request path costs
//!
//! What a request pays on each path, today. "Shared write" is a
//! read-modify-write on a cache line that other requests to the same
//! upstream also write; each claim names what checks it.
//!
//! | path | lock | allocation | shared write | checked by |
//! |---|---|---|---|---|
//! | breaker: admission and success, CLOSED | none | none | none | `tests/alloc.rs`; callgrind `failfast` (31 instructions); `contended/count/2_threads_shared` |
//! | breaker: failure, trip, probe | none | none | the breaker's state word (a CAS), and the window's counter | `tests/alloc.rs`; loom `protocol` |
//! | breaker: rejection while OPEN | none | none | none | `tests/alloc.rs`, `tests/open_rejection.rs` |
//! | any transition, no hook | none | none | — | `tests/alloc.rs` |
//! | any transition, with hooks | none | none after the thread's first (arc-swap's per-thread node); a name over 256 bytes | — | `src/hooks.rs` tests; `tests/hook_every_cause.rs` |
//! | registry: lookup of a known key (`with`) | none | none | none (the idle stamp is a plain store, once per tick) | `tests/alloc_keyed.rs`; callgrind `reg_with` |
//! | registry: `handle` / keyed layer, known key | none | none | the entry's reference count: +1 at admission, −1 at the verdict | `tests/alloc_keyed.rs`; `contended/keyed/*` |
//! | registry: first request to a new key | the shard's mutex | the entry and the map's node for it | the shard's books | `tests/registry_model.rs` |
//! | registry: a lookup's epoch guard ends | none | none, but it may *free* a batch of entries evicted earlier (`seize` reclaims retired entries as guards leave) | its thread's own reservation only | — |
//! | tower layers: rejection | none | the `BoxError` (and with `name_rejections`, the name's `Arc`) | none | — |
//! | pooled host (outliers): a verdict | none | none | none: the tally is the host's own line (one `fetch_add`) | callgrind `ff_pool_count`, `ff_pool_slow` |
//! | retry budget (ratio): a first try / a retry | none | none | the host's sums word: one `fetch_add` / one CAS (and, once per half of the TTL, a CAS on its end) | callgrind `ff_budget`, `ff_retry`; loom `retry_budget` |
//! | retry budget (tokens): a verdict | none | none | the host's bucket: one CAS when it moves (none for a success on a full bucket) | callgrind `ff_budget_tokens`, `ff_retry_tokens`; loom `retry_budget` |
//! | pooled host: its first verdict of an interval | none | none | the pool's stripe words (two CASes); once per interval and pool, 32 CASes to seal | `src/outlier` loom models; bench `outliers` |
//!
//! Two costs are left to remove. The reference count is the one shared
//! write on a keyed success: it keeps the breaker alive while the call
//! runs (striped counts, or a permit that finds its breaker again at the
//! verdict, would remove it). And a layer's rejection allocates its boxed
//! error.
//!
//! # Per-call observability
//!
//! What the breaker did to each call is recorded by the tower layers, never
//! by the core: the breaker gains no field, no atomic and no branch for it.
//! A layer configured with `trace_calls` or `call_metrics` holds a shared
//! `Watch` (built when the layer is configured); per call it finds the span
//! before admission, and the permit travels with the span as a `Held` to
//! its verdict or its drop, where the ending is recorded. A call whose end
//! nothing records (no span found, no histogram) keeps its permit bare, as
//! with both features off; an aggregate rejection counter needs nothing
//! before the admission. The verdict reads the clock for an ending only
//! when the breaker would anyway (it times calls) or the duration histogram
//! is on, and hands that reading to the breaker.
//!
//! Rejection events are INFO at most once per open period per breaker
//! without memory in the breaker: an open period is named by the instant it
//! ends (`now + retry_after` of any of its rejections), and a small table
//! of such instants in the layer, indexed by breaker id, only moves forward,
//! so one compare-and-swap per period claims the INFO
//! (`export::tracing::RejectionLog`, feature `tracing`, has the argument).
//!
//! # Trips shared across replicas
//!
//! N replicas of a service hold N registries. Sharing *trips* (not counts)
//! keeps every request path as it is and still spares the fleet N × the trip
//! threshold of calls to a dead upstream:
//!
//! ```text
//!  replica A                                  Redis                        replica B
//!  ─────────                                  ─────                        ─────────
//!  request path: a verdict trips
//!    └─ Transition ─▶ Outbox (one push)
//!  sync task: drain ─▶ Lua script ─────────▶ reporters, epoch,
//!                                             until = TIME + remaining,
//!                                             index by end, PEXPIRE
//!                                             SPUBLISH remaining ms ──────▶ sync task: filters
//!                                                                           (epoch, min_reporters,
//!                                                                           own trip) ─▶ apply_remote_at:
//!                                                                           Closed → Open or a later end
//!  every few s: reconcile ◀──────────────── open keys with what is left ──▶ every few s: reconcile
//! ```
//!
//! * **Nothing on the request path**: admission and verdicts are the same
//!   code with sharing on; only a verdict that trips pushes one record into
//!   a bounded `ArrayQueue` (full: dropped and counted). The sync task is the
//!   user's to start; the core spawns nothing.
//! * **Time travels as "what is left"**, never an instant: the store ends a
//!   period at its own `TIME` + remaining; a receiver at its own now +
//!   remaining. Replicas' clocks never meet.
//! * **A monotone merge** ([`Breaker::apply_remote_at`](crate::Breaker::apply_remote_at)):
//!   one CAS through the same update loop as every transition; it opens a
//!   Closed breaker or moves an Open period's end later, asks the trip gate
//!   (`max_open`) as a local trip does, and never closes, half-opens,
//!   shortens or touches a probe round. Recovery stays local, each replica
//!   probing at its own time: it applies news less its own probe offset
//!   (a hash of its name, the key and the epoch; by default under 10 % of
//!   what is left and 5 s), so the fleet's probes spread even with the
//!   breakers' jitter at 0. The loom model
//!   `loom-tests/tests/remote_trip.rs` races it against admissions,
//!   verdicts and local trips.
//! * **Epochs from the store**: the script gives each key's news an epoch
//!   above every earlier one (the record's + 1, or the server's microseconds,
//!   so epochs grow across expiry and restarts); a replica applies only a
//!   newer epoch per key. Duplicates, reordering and stale news are no-ops.
//! * **Reconciliation** (on connect, after a lost connection, every few
//!   seconds) reads the index of open keys: lost messages, cold starts and
//!   partitions heal by it. Every key expires (period + slack; reporters with their
//!   window), so `DBSIZE` returns to zero.
//! * **Rails**: `min_reporters(k, window)` (counted by the store, checked by
//!   each replica), the registry's `max_open`, an untracked key never opens
//!   the shared overflow breaker, and an unreachable or slow store leaves
//!   the replica local-only (`sync_errors`), its open trips kept to publish
//!   again.
//!
//! Departures from the first design: the epoch is the store's, not the
//! replica's (a replica's epoch would need its clock or a persisted counter);
//! the integration is a feature of this crate rather than a separate crate
//! (the core stays free of redis and tokio either way, and the scripts stay
//! next to `MemoryStore`, whose rules a test holds them to); the optional fleet-wide probe lease is not built (each
//! replica probes for itself, spread by its own probe offset).
//!
//! # Dependencies
//!
//! The core depends on `quanta` (the default clock), `crossbeam-utils`
//! (`CachePadded` for registry shards), `papaya` and `seize` (each shard's
//! map, read with no lock under `seize`'s epoch guard; no default
//! features), `hashbrown` (the registry's overrides, a `HashTable` that
//! takes a precomputed hash; no default features), `triomphe` (the
//! registry entries' `Arc` without a weak count: 8 bytes and one malloc
//! size class less per key; no default features), `arc-swap` (the
//! transition hooks' list, read with no lock on a transition; no default
//! features) and `crossbeam-queue` (the trip outbox's bounded lock-free
//! `ArrayQueue`; std only), nothing else. Each shard's writers serialise on
//! std's `Mutex` (futex-based, no crate).
//!
//! Optional, each behind its own feature, none used by the core:
//!
//! * `http`: `http` 1 (the HTTP classifier, the authority key, 503 +
//!   `Retry-After`), nothing else.
//! * `tower`: `http` (above), `tower` 0.5 (the `Service`/`Layer` traits, no
//!   default features), `pin-project-lite` (the response future, no unsafe
//!   code of ours), and `tokio` with only `time` — a per-call
//!   `tokio::time::Sleep` for the layers' optional timeout and one reusable
//!   `Sleep` per ejected endpoint so a balancer is woken at the probe time.
//!   No task or thread is spawned. Also `http-body` 1 (the `Body` trait,
//!   for the body that carries a permit to the end of the stream), and
//!   `hyper` (below).
//! * `hyper`: `hyper` 1 with none of its features (no client, server or
//!   protocol code: its error type over `http`, `http-body`, `bytes` and
//!   tokio's `sync`), for `Fault::of` to read `hyper::Error::is_user`. On
//!   with `tower` and `reqwest`; every hyper-based client has it already.
//! * `tower-http`: `tower-http` 0.7 with no default features (its
//!   `classify` module only), for the `ClassifyResponse` adapter.
//! * `tracing`: `tracing` 0.1, one event per transition; with `tower`, the
//!   per-call span fields and rejection events.
//! * `metrics`: `metrics` 0.24 (the facade), written at scrape time; with
//!   `tower`, per-call series through handles registered once per layer.
//! * `coarse-clock`: `rustix` 1 with only `time` (no default features), on
//!   Linux and Android: a safe `clock_gettime(CLOCK_MONOTONIC_COARSE)`,
//!   through the vDSO, for `CoarseClock`.
//! * `redis`: `redis` 1.2 (redis-rs, no default features: `tokio-comp`,
//!   `connection-manager`, `script`, `cluster-async`), `futures-util` (scripts
//!   in flight at once) and `tokio` with `sync`, `time` and `macros` for the
//!   sync task the user spawns.
//! * `reqwest`: `reqwest` 0.13 with no default features (no TLS stack; the
//!   application's own reqwest picks one, and Cargo unifies the two),
//!   `reqwest-middleware` 0.5 (the `Middleware` trait) and `async-trait`
//!   (the trait's form); it turns on `http` for `HttpClassifier` and
//!   `hyper` for `Fault::of`, which add no crate, reqwest depending on
//!   both. reqwest 0.13
//!   declares rust-version 1.85; reqwest-middleware declares none (edition
//!   2018). Each request's future is boxed by `async-trait`, as every
//!   reqwest middleware's is.
//!
//! The minimum supported Rust version, 1.87, is the highest `rust-version`
//! among these for any feature (quanta 0.13's); `.ci/msrv.sh` fails the build
//! when a dependency update raises it.
