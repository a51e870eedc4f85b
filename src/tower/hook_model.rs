//! The hook lists as a state machine: a standalone breaker's list and a
//! registry's, filled with breaker hooks, registry hooks and hooks lent by
//! layers (`FailFastLayer`, `EjectLayer`, `KeyedLayer`), whose layers and
//! services are cloned, built, renamed and dropped in any order, while
//! transitions of every cause happen: a verdict, a late drop, a panic, a
//! layer's timeout, an admission that starts a probe round, another
//! replica's news, `force_open`, `reset` and an outlier ejection.
//!
//! After every step:
//! * **Every live hook hears every transition once**, in the order the
//!   hooks were added, after the configuration's observer, with its name: a
//!   breaker hook's own, a layer's upstream, or the registry's key. A hook
//!   whose layer and services are all gone hears nothing.
//! * **Dead hooks are pruned** the next time a hook is added to their list,
//!   wherever they sit in it: the list holds exactly the hooks alive at the
//!   last addition, and the one added.
//!
//! The reference model knows nothing of the breaker's states: which
//! transitions happened is learned from the observer (`tests/model.rs`
//! checks those against its own model). It is a unit test, not a file of
//! `tests/`, because how many hooks a list holds (its pruning) is not
//! public. `cargo test --lib hook_model` runs 64 cases; CI sets
//! `PROPTEST_CASES=1000`.

use std::collections::hash_map::RandomState;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Once};
use std::task::{Context, Waker};
use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::Union;
use proptest::test_runner::Config as ProptestConfig;
use proptest_state_machine::{prop_state_machine, ReferenceStateMachine, StateMachineTest};
use tower::{BoxError, Layer, Service, ServiceExt};

use super::{
    AuthorityKey, DefaultClassifier, Eject, EjectLayer, FailFast, FailFastLayer, Keyed, KeyedLayer,
    TokioClock,
};
use crate::observe::{Reason, Transition};
use crate::outlier::Outliers;
use crate::registry::{HostKey, Registry};
use crate::{Breaker, RemoteTrip};

/// The registry's keys (the keyed layer derives them from `http://a/`…).
const KEYS: [&str; 3] = ["a:80", "b:80", "c:80"];
/// The names breaker hooks and renamed layers go by.
const NAMES: [&str; 3] = ["x", "y", "z"];
/// The layers' call timeout.
const TIMEOUT: Duration = Duration::from_secs(1);
/// How long a caller holds a hung call before dropping it: past the
/// standalone breaker's unanswered age and the registry's `abandoned_after`,
/// within the layers' timeout.
const HELD: Duration = Duration::from_millis(300);

// ---------------------------------------------------------------------------
// The operations.

/// Whose list a hook joins, or which breaker a direct operation touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Subject {
    /// The standalone breaker.
    Alone,
    /// The registry's breaker for `KEYS[_]`.
    Key(usize),
}

/// The layers, and whose list each lends its hooks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    FailFast,
    Eject,
    Keyed,
}

impl Kind {
    fn list(self) -> usize {
        match self {
            Kind::FailFast | Kind::Eject => ALONE,
            Kind::Keyed => REGISTRY,
        }
    }
}

/// The standalone breaker's list, and the registry's.
const ALONE: usize = 0;
const REGISTRY: usize = 1;

fn list_of(subject: Subject) -> usize {
    match subject {
        Subject::Alone => ALONE,
        Subject::Key(_) => REGISTRY,
    }
}

/// What the upstream behind a service does with a call.
#[derive(Clone, Copy, Debug)]
enum Upstream {
    Answers,
    Fails,
    /// Hangs until the layer's timeout.
    Hangs,
    /// Panics while its future is polled.
    Panics,
    /// Hangs, and the caller drops the call after `HELD`.
    Abandoned,
}

impl Upstream {
    fn path(self) -> &'static str {
        match self {
            Upstream::Answers => "/ok",
            Upstream::Fails => "/fail",
            Upstream::Hangs | Upstream::Abandoned => "/hang",
            Upstream::Panics => "/panic",
        }
    }
}

/// An operation on a breaker itself, not through a layer.
#[derive(Clone, Copy, Debug)]
enum Act {
    Success,
    Failure,
    /// A permit dropped after `HELD`.
    Abandoned,
    /// A closure that panics, through `Breaker::call`.
    Panic,
    ForceOpen,
    Reset,
    /// Another replica's news.
    Remote,
}

#[derive(Clone, Debug)]
enum Op {
    /// `Breaker::on_transition(NAMES[_], hook)`, on the standalone breaker
    /// or on a registry's breaker (whose list is the registry's).
    BreakerHook(Subject, usize),
    /// `Registry::on_transition(hook)`.
    RegistryHook,
    NewLayer(Kind),
    /// `layer.on_transition(hook)` on holder `_`, a layer.
    LayerHook(usize),
    /// `layer.upstream(NAMES[_])` on holder `_`, a FailFast or Eject layer.
    Rename(usize, usize),
    /// Clones holder `_`, a layer or a service.
    Clone(usize),
    /// Builds a service from holder `_`, a layer.
    Build(usize),
    /// Drops holder `_`.
    Drop(usize),
    /// A call through holder `_`, a FailFast or keyed service, to `KEYS[_]`.
    Call(usize, Upstream, usize),
    Direct(Subject, Act),
    /// Tokio's paused clock (the breakers' clock) moves on.
    Advance(Duration),
}

// ---------------------------------------------------------------------------
// The reference model.

/// A hook in a list: which hook, held how, heard by what name.
#[derive(Clone, Debug)]
struct Entry {
    hook: usize,
    /// `None`: kept by the list; `Some(lease)`: lent, heard while a holder
    /// keeps the lease.
    lease: Option<usize>,
    /// `None`: the registry's key of the breaker.
    name: Option<&'static str>,
}

/// A layer or a service the test holds, and the leases it keeps.
#[derive(Clone, Debug)]
struct Holding {
    kind: Kind,
    layer: bool,
    /// (lease, hook), in the order the hooks were added.
    leases: Vec<(usize, usize)>,
    upstream: &'static str,
}

#[derive(Clone, Debug, Default)]
struct Model {
    lists: [Vec<Entry>; 2],
    holders: Vec<Holding>,
    hooks: usize,
    leases: usize,
}

impl Model {
    fn alive(&self, e: &Entry) -> bool {
        e.lease.is_none_or(|lease| {
            self.holders
                .iter()
                .any(|h| h.leases.iter().any(|&(l, _)| l == lease))
        })
    }

    /// Adds a hook to `list`: the dead ones leave, wherever they are.
    fn add(&mut self, list: usize, entry: Entry) {
        let alive: Vec<Entry> = self.lists[list]
            .iter()
            .filter(|e| self.alive(e))
            .cloned()
            .collect();
        self.lists[list] = alive;
        self.lists[list].push(entry);
    }

    fn next_hook(&mut self) -> usize {
        self.hooks += 1;
        self.hooks
    }

    fn next_lease(&mut self) -> usize {
        self.leases += 1;
        self.leases
    }

    fn is_layer(&self, i: usize) -> bool {
        self.holders.get(i).is_some_and(|h| h.layer)
    }
}

fn subject() -> impl Strategy<Value = Subject> {
    prop_oneof![
        1 => Just(Subject::Alone),
        2 => (0..KEYS.len()).prop_map(Subject::Key),
    ]
}

fn upstream() -> impl Strategy<Value = Upstream> {
    prop_oneof![
        3 => Just(Upstream::Answers),
        3 => Just(Upstream::Fails),
        1 => Just(Upstream::Hangs),
        1 => Just(Upstream::Panics),
        1 => Just(Upstream::Abandoned),
    ]
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        3 => Just(Act::Success),
        4 => Just(Act::Failure),
        1 => Just(Act::Abandoned),
        1 => Just(Act::Panic),
        1 => Just(Act::ForceOpen),
        1 => Just(Act::Reset),
        1 => Just(Act::Remote),
    ]
}

struct HookLists;

impl ReferenceStateMachine for HookLists {
    type State = Model;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Model> {
        Just(Model::default()).boxed()
    }

    fn transitions(model: &Model) -> BoxedStrategy<Op> {
        let kind = prop_oneof![Just(Kind::FailFast), Just(Kind::Eject), Just(Kind::Keyed)];
        let mut ops: Vec<(u32, BoxedStrategy<Op>)> = vec![
            (
                2,
                (subject(), 0..NAMES.len())
                    .prop_map(|(s, n)| Op::BreakerHook(s, n))
                    .boxed(),
            ),
            (1, Just(Op::RegistryHook).boxed()),
            (2, kind.prop_map(Op::NewLayer).boxed()),
            (
                6,
                (subject(), act())
                    .prop_map(|(s, d)| Op::Direct(s, d))
                    .boxed(),
            ),
            (
                2,
                (100..1500u64)
                    .prop_map(|ms| Op::Advance(Duration::from_millis(ms)))
                    .boxed(),
            ),
        ];
        let n = model.holders.len();
        if n > 0 {
            let held = 0..n;
            ops.extend([
                (4, held.clone().prop_map(Op::LayerHook).boxed()),
                (
                    1,
                    (held.clone(), 0..NAMES.len())
                        .prop_map(|(i, name)| Op::Rename(i, name))
                        .boxed(),
                ),
                (3, held.clone().prop_map(Op::Clone).boxed()),
                (3, held.clone().prop_map(Op::Build).boxed()),
                (3, held.clone().prop_map(Op::Drop).boxed()),
                (
                    5,
                    (held, upstream(), 0..KEYS.len())
                        .prop_map(|(i, u, k)| Op::Call(i, u, k))
                        .boxed(),
                ),
            ]);
        }
        Union::new_weighted(ops).boxed()
    }

    fn preconditions(model: &Model, op: &Op) -> bool {
        let n = model.holders.len();
        match *op {
            Op::LayerHook(i) | Op::Build(i) => model.is_layer(i),
            Op::Rename(i, _) => model.is_layer(i) && model.holders[i].kind != Kind::Keyed,
            Op::Clone(i) | Op::Drop(i) => i < n,
            Op::Call(i, _, _) => {
                i < n && !model.holders[i].layer && model.holders[i].kind != Kind::Eject
            }
            _ => true,
        }
    }

    fn apply(mut model: Model, op: &Op) -> Model {
        match *op {
            Op::BreakerHook(s, name) => {
                let hook = model.next_hook();
                let entry = Entry {
                    hook,
                    lease: None,
                    name: Some(NAMES[name]),
                };
                model.add(list_of(s), entry);
            }
            Op::RegistryHook => {
                let hook = model.next_hook();
                let entry = Entry {
                    hook,
                    lease: None,
                    name: None,
                };
                model.add(REGISTRY, entry);
            }
            Op::NewLayer(kind) => model.holders.push(Holding {
                kind,
                layer: true,
                leases: Vec::new(),
                upstream: "",
            }),
            Op::LayerHook(i) => {
                let (hook, lease) = (model.next_hook(), model.next_lease());
                let h = &model.holders[i];
                let name = (h.kind != Kind::Keyed).then_some(h.upstream);
                let entry = Entry {
                    hook,
                    lease: Some(lease),
                    name,
                };
                // The layer's other leases are alive while it adds one.
                model.add(h.kind.list(), entry);
                model.holders[i].leases.push((lease, hook));
            }
            Op::Rename(i, name) => {
                // Each hook lent again under the new name, in order; the old
                // leases end with this layer's copy once all are lent.
                let old = model.holders[i].leases.len();
                for k in 0..old {
                    let hook = model.holders[i].leases[k].1;
                    let lease = model.next_lease();
                    let entry = Entry {
                        hook,
                        lease: Some(lease),
                        name: Some(NAMES[name]),
                    };
                    model.add(ALONE, entry);
                    model.holders[i].leases.push((lease, hook));
                }
                model.holders[i].leases.drain(..old);
                model.holders[i].upstream = NAMES[name];
            }
            Op::Clone(i) => {
                let copy = model.holders[i].clone();
                model.holders.push(copy);
            }
            Op::Build(i) => {
                let service = Holding {
                    layer: false,
                    ..model.holders[i].clone()
                };
                model.holders.push(service);
            }
            Op::Drop(i) => {
                model.holders.remove(i);
            }
            Op::Call(..) | Op::Direct(..) | Op::Advance(_) => {}
        }
        model
    }
}

// ---------------------------------------------------------------------------
// The system under test.

type Reply = Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>;
type Up = tower::util::ServiceFn<fn(http::Request<()>) -> Reply>;
type Reg = Registry<HostKey, RandomState, TokioClock>;
type Key = AuthorityKey<HostKey>;

fn upstream_service() -> Up {
    tower::service_fn(answer as fn(http::Request<()>) -> Reply)
}

fn answer(req: http::Request<()>) -> Reply {
    Box::pin(async move {
        match req.uri().path() {
            "/ok" => Ok(()),
            "/fail" => Err(BoxError::from("down")),
            "/hang" => std::future::pending().await,
            _ => panic!("deliberate"),
        }
    })
}

enum Holder {
    FailFastLayer(FailFastLayer<DefaultClassifier, TokioClock>),
    FailFast(FailFast<Up, DefaultClassifier, TokioClock>),
    EjectLayer(EjectLayer<DefaultClassifier, TokioClock>),
    Eject(Eject<Up, DefaultClassifier, TokioClock>),
    KeyedLayer(KeyedLayer<HostKey, Key, DefaultClassifier, RandomState, TokioClock>),
    Keyed(Keyed<Up, HostKey, Key, DefaultClassifier, RandomState, TokioClock>),
}

/// What the observers and the hooks heard, in order.
#[derive(Clone, Debug, PartialEq)]
enum Heard {
    Observer {
        list: usize,
        breaker: u32,
        generation: u32,
        reason: Reason,
    },
    Hook {
        hook: usize,
        name: String,
        breaker: u32,
        generation: u32,
        reason: Reason,
    },
}

type Log = Arc<Mutex<Vec<Heard>>>;

struct Sut {
    rt: tokio::runtime::Runtime,
    alone: Arc<Breaker<TokioClock>>,
    registry: Arc<Reg>,
    holders: Vec<Holder>,
    log: Log,
    /// The breaker ids of `KEYS`.
    ids: [u32; 3],
    hooks: usize,
    epoch: u64,
}

fn observer(log: &Log, list: usize) -> impl Fn(&Transition) + Send + Sync + 'static {
    let log = log.clone();
    move |t: &Transition| {
        log.lock().unwrap().push(Heard::Observer {
            list,
            breaker: t.breaker_id,
            generation: t.generation,
            reason: t.reason,
        })
    }
}

fn quiet_panics() {
    static QUIET: Once = Once::new();
    QUIET.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&"deliberate") {
                default(info);
            }
        }));
    });
}

impl Sut {
    fn new() -> Sut {
        quiet_panics();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let _in = rt.enter();
        let log = Log::default();
        let alone = Arc::new(
            Breaker::builder()
                .consecutive_failures(1)
                .unanswered(1, Duration::from_millis(100))
                .open_duration(Duration::from_secs(1))
                .backoff_off()
                .observer(observer(&log, ALONE))
                .build_with_clock(TokioClock::new())
                .unwrap(),
        );
        let registry = Arc::new(
            Registry::<HostKey>::builder(
                Breaker::builder()
                    .consecutive_failures(2)
                    .abandoned_after(Duration::from_millis(200))
                    .open_duration(Duration::from_secs(1))
                    .backoff_off()
                    .observer(observer(&log, REGISTRY)),
            )
            // A host failing half its calls of an interval is ejected at
            // its first call of the next: one interval is evidence enough
            // with the significance test off (a model drives a few calls).
            .outliers(
                Outliers::new()
                    .significance_off()
                    .interval(Duration::from_secs(1))
                    .success_rate_off()
                    .enforcing_failure_percentage(100)
                    .failure_percentage_threshold(50)
                    .failure_percentage_request_volume(1)
                    .failure_percentage_minimum_hosts(1)
                    .max_ejection_percent(100)
                    .panic_threshold(0),
            )
            .build_with_clock(TokioClock::new())
            .unwrap(),
        );
        let ids = KEYS.map(|k| registry.handle_from(k).id());
        assert!(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2]);
        drop(_in);
        Sut {
            rt,
            alone,
            registry,
            holders: Vec::new(),
            log,
            ids,
            hooks: 0,
            epoch: 0,
        }
    }

    /// A hook recording what it hears, as hook number `n`.
    fn hook(&mut self) -> impl Fn(&str, &Transition) + Send + Sync + 'static {
        self.hooks += 1;
        let (log, hook) = (self.log.clone(), self.hooks);
        move |name: &str, t: &Transition| {
            log.lock().unwrap().push(Heard::Hook {
                hook,
                name: name.to_owned(),
                breaker: t.breaker_id,
                generation: t.generation,
                reason: t.reason,
            })
        }
    }

    fn key_of(&self, breaker: u32) -> &'static str {
        let i = self.ids.iter().position(|&id| id == breaker);
        KEYS[i.expect("a transition of one of the registry's keys")]
    }

    fn advance(&self, by: Duration) {
        self.rt.block_on(tokio::time::advance(by));
    }

    fn apply(&mut self, op: &Op) {
        let _in = self.rt.enter();
        match *op {
            Op::BreakerHook(Subject::Alone, name) => {
                let hook = self.hook();
                self.alone.on_transition(NAMES[name], hook);
            }
            Op::BreakerHook(Subject::Key(k), name) => {
                let hook = self.hook();
                self.registry
                    .handle_from(KEYS[k])
                    .on_transition(NAMES[name], hook);
            }
            Op::RegistryHook => {
                let hook = self.hook();
                self.registry.on_transition(hook);
            }
            Op::NewLayer(kind) => {
                let layer = match kind {
                    Kind::FailFast => Holder::FailFastLayer(
                        FailFastLayer::new(self.alone.clone()).timeout(TIMEOUT),
                    ),
                    Kind::Eject => Holder::EjectLayer(EjectLayer::new(self.alone.clone())),
                    Kind::Keyed => {
                        Holder::KeyedLayer(KeyedLayer::new(self.registry.clone()).timeout(TIMEOUT))
                    }
                };
                self.holders.push(layer);
            }
            Op::LayerHook(i) => {
                let hook = self.hook();
                let held = match self.holders.remove(i) {
                    Holder::FailFastLayer(l) => Holder::FailFastLayer(l.on_transition(hook)),
                    Holder::EjectLayer(l) => Holder::EjectLayer(l.on_transition(hook)),
                    Holder::KeyedLayer(l) => Holder::KeyedLayer(l.on_transition(hook)),
                    _ => unreachable!("a layer"),
                };
                self.holders.insert(i, held);
            }
            Op::Rename(i, name) => {
                let held = match self.holders.remove(i) {
                    Holder::FailFastLayer(l) => Holder::FailFastLayer(l.upstream(NAMES[name])),
                    Holder::EjectLayer(l) => Holder::EjectLayer(l.upstream(NAMES[name])),
                    _ => unreachable!("a named layer"),
                };
                self.holders.insert(i, held);
            }
            Op::Clone(i) => {
                let copy = match &self.holders[i] {
                    Holder::FailFastLayer(l) => Holder::FailFastLayer(l.clone()),
                    Holder::FailFast(s) => Holder::FailFast(s.clone()),
                    Holder::EjectLayer(l) => Holder::EjectLayer(l.clone()),
                    Holder::Eject(s) => Holder::Eject(s.clone()),
                    Holder::KeyedLayer(l) => Holder::KeyedLayer(l.clone()),
                    Holder::Keyed(s) => Holder::Keyed(s.clone()),
                };
                self.holders.push(copy);
            }
            Op::Build(i) => {
                let service = match &self.holders[i] {
                    Holder::FailFastLayer(l) => Holder::FailFast(l.layer(upstream_service())),
                    Holder::EjectLayer(l) => Holder::Eject(l.layer(upstream_service())),
                    Holder::KeyedLayer(l) => Holder::Keyed(l.layer(upstream_service())),
                    _ => unreachable!("a layer"),
                };
                self.holders.push(service);
            }
            Op::Drop(i) => drop(self.holders.remove(i)),
            Op::Call(i, up, k) => self.call(i, up, k),
            Op::Direct(subject, what) => self.direct(subject, what),
            Op::Advance(by) => self.advance(by),
        }
    }

    fn call(&mut self, i: usize, up: Upstream, k: usize) {
        let req = http::Request::get(format!("http://{}{}", &KEYS[k][..1], up.path()))
            .body(())
            .unwrap();
        let call: Pin<Box<dyn Future<Output = Result<(), BoxError>>>> = match &mut self.holders[i] {
            Holder::FailFast(s) => {
                self.rt.block_on(s.ready()).unwrap();
                Box::pin(s.call(req))
            }
            Holder::Keyed(s) => {
                self.rt.block_on(s.ready()).unwrap();
                Box::pin(s.call(req))
            }
            _ => unreachable!("a FailFast or keyed service"),
        };
        match up {
            Upstream::Answers | Upstream::Fails | Upstream::Hangs => {
                // A hung call ends at the layer's timeout (the paused clock
                // jumps to it).
                let _ = self.rt.block_on(call);
            }
            Upstream::Panics => {
                let mut call = call;
                let mut cx = Context::from_waker(Waker::noop());
                let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    call.as_mut().poll(&mut cx)
                }));
                // Rejected calls never reach the upstream.
                if let Err(panic) = polled {
                    assert_eq!(panic.downcast_ref::<&str>(), Some(&"deliberate"));
                }
            }
            Upstream::Abandoned => {
                let mut call = call;
                let mut cx = Context::from_waker(Waker::noop());
                if call.as_mut().poll(&mut cx).is_pending() {
                    self.advance(HELD);
                }
            }
        }
    }

    fn direct(&mut self, subject: Subject, what: Act) {
        let handle;
        let breaker: &Breaker<TokioClock> = match subject {
            Subject::Alone => &self.alone,
            Subject::Key(k) => {
                handle = self.registry.handle_from(KEYS[k]);
                &handle
            }
        };
        match what {
            Act::Success => {
                let _ = breaker.try_acquire().map(|p| p.success());
            }
            Act::Failure => {
                let _ = breaker.try_acquire().map(|p| p.failure());
            }
            Act::Abandoned => {
                let permit = breaker.try_acquire();
                self.advance(HELD);
                drop(permit);
            }
            Act::Panic => {
                let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    breaker.call(|| -> Result<(), ()> { panic!("deliberate") })
                }));
                if let Err(panic) = called {
                    assert_eq!(panic.downcast_ref::<&str>(), Some(&"deliberate"));
                }
            }
            Act::ForceOpen => {
                let _ = breaker.force_open();
            }
            Act::Reset => {
                let _ = breaker.reset();
            }
            Act::Remote => {
                self.epoch += 1;
                let news = RemoteTrip::new(
                    self.epoch,
                    Duration::from_secs(2),
                    Reason::ConsecutiveFailures,
                );
                match subject {
                    Subject::Alone => {
                        let _ = breaker.apply_remote_at(&news, breaker.now());
                    }
                    Subject::Key(k) => {
                        let _ = self.registry.apply_remote(&HostKey::from(KEYS[k]), &news);
                    }
                }
            }
        }
    }

    /// Takes what was heard since the last check, and checks it against
    /// the model: each observed transition heard by every live hook of its
    /// list once, in order, by its name; and the lists' lengths.
    fn check(&self, model: &Model) -> Vec<Heard> {
        let _in = self.rt.enter();
        let heard = std::mem::take(&mut *self.log.lock().unwrap());
        let mut rest = heard.as_slice();
        while let Some((first, tail)) = rest.split_first() {
            let Heard::Observer {
                list,
                breaker,
                generation,
                reason,
            } = *first
            else {
                panic!("a hook heard what no observer saw first: {heard:?}");
            };
            let want: Vec<Heard> = model.lists[list]
                .iter()
                .filter(|e| model.alive(e))
                .map(|e| Heard::Hook {
                    hook: e.hook,
                    name: e.name.unwrap_or_else(|| self.key_of(breaker)).to_owned(),
                    breaker,
                    generation,
                    reason,
                })
                .collect();
            let n = tail
                .iter()
                .take_while(|h| matches!(h, Heard::Hook { .. }))
                .count();
            assert_eq!(
                tail[..n],
                want[..],
                "the hooks that heard {first:?} (model: {model:?})"
            );
            rest = &tail[n..];
        }
        let registry_list = self.registry.handle_from(KEYS[0]).hooks().held();
        assert_eq!(
            (self.alone.hooks().held(), registry_list),
            (model.lists[ALONE].len(), model.lists[REGISTRY].len()),
            "hooks held (dead ones pruned at each addition); model: {model:?}"
        );
        heard
    }
}

struct HookListTest;

impl StateMachineTest for HookListTest {
    type SystemUnderTest = Sut;
    type Reference = HookLists;

    fn init_test(_: &Model) -> Sut {
        Sut::new()
    }

    fn apply(mut sut: Sut, _: &Model, op: Op) -> Sut {
        sut.apply(&op);
        sut
    }

    fn check_invariants(sut: &Sut, model: &Model) {
        sut.check(model);
    }
}

prop_state_machine! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        max_shrink_iters: 20_000,
        .. ProptestConfig::default()
    })]

    /// Every live hook hears every transition once; dead ones hear nothing
    /// and are pruned at the next addition.
    #[test]
    fn the_hook_lists_agree_with_the_model(sequential 1..80 => HookListTest);
}

/// Runs `ops` on the model and the system, checking after each; returns
/// the reasons of the transitions each op caused.
fn run(ops: &[Op]) -> Vec<Vec<Reason>> {
    let mut model = Model::default();
    let mut sut = Sut::new();
    let mut caused = Vec::new();
    for op in ops {
        assert!(HookLists::preconditions(&model, op), "{op:?}");
        model = HookLists::apply(model, op);
        sut.apply(op);
        let reasons = sut
            .check(&model)
            .into_iter()
            .filter_map(|h| match h {
                Heard::Observer { reason, .. } => Some(reason),
                Heard::Hook { .. } => None,
            })
            .collect();
        caused.push(reasons);
    }
    caused
}

/// The harness reaches every cause of a transition the model's operations
/// name, each heard by a breaker hook, a registry hook and lent hooks (the
/// model's checks run after each step).
#[test]
fn every_cause_is_reachable_and_heard() {
    use Op::*;
    use Subject::{Alone, Key};
    let script = [
        BreakerHook(Alone, 0),
        RegistryHook,
        BreakerHook(Key(0), 1),
        NewLayer(Kind::FailFast),
        LayerHook(0),
        Build(0),
        NewLayer(Kind::Keyed),
        LayerHook(2),
        Build(2),
        // 9: a verdict through the layer.
        Call(1, Upstream::Fails, 0),
        Advance(Duration::from_secs(1)),
        // 11: an admission that starts a probe round, and its verdict.
        Direct(Alone, Act::Success),
        Direct(Alone, Act::Success),
        // 13: a timeout.
        Call(1, Upstream::Hangs, 0),
        Advance(Duration::from_secs(1)),
        Direct(Alone, Act::Success),
        // 16: a panic through the layer.
        Call(1, Upstream::Panics, 0),
        Advance(Duration::from_secs(1)),
        Direct(Alone, Act::Success),
        // 19: an abandoned call (the unanswered rule).
        Call(1, Upstream::Abandoned, 0),
        // 20, 21: the manual modes; 22: news.
        Direct(Alone, Act::ForceOpen),
        Direct(Alone, Act::Reset),
        Direct(Alone, Act::Remote),
        // 24: a panic through `call`, on a registry breaker (its second
        // failure in a row); 25: news for a key.
        Direct(Key(1), Act::Failure),
        Direct(Key(1), Act::Panic),
        Direct(Key(2), Act::Remote),
        // 31: an ejection: a host failing half its calls of an interval
        // (against the figures of the one before), judged at its first call
        // of the next.
        Call(3, Upstream::Fails, 0),
        Advance(Duration::from_millis(1100)),
        Call(3, Upstream::Answers, 0),
        Call(3, Upstream::Fails, 0),
        Advance(Duration::from_millis(1100)),
        Call(3, Upstream::Answers, 0),
    ];
    let caused = run(&script);
    let at = |i: usize| &caused[i];
    assert_eq!(at(9), &[Reason::ConsecutiveFailures], "a verdict");
    assert_eq!(
        at(11),
        &[Reason::OpenElapsed, Reason::ProbesSucceeded],
        "an admission starts a probe round, and its verdict ends it"
    );
    assert_eq!(at(12), &[]);
    assert_eq!(at(13), &[Reason::ConsecutiveFailures], "a timeout");
    assert_eq!(at(16), &[Reason::ConsecutiveFailures], "a panic");
    assert_eq!(at(19), &[Reason::Unresponsive], "an abandoned call");
    assert_eq!(at(20), &[Reason::ForceOpen]);
    assert_eq!(at(21), &[Reason::Reset]);
    assert_eq!(at(22), &[Reason::RemoteTrip]);
    assert_eq!(at(24), &[Reason::ConsecutiveFailures], "a panic in `call`");
    assert_eq!(at(25), &[Reason::RemoteTrip]);
    assert_eq!(at(31), &[Reason::Outlier], "an ejection");
}

/// Dead hooks anywhere in a list are pruned at the next addition, not only
/// those at its end.
#[test]
fn dead_hooks_before_live_ones_are_pruned() {
    use Op::*;
    run(&[
        NewLayer(Kind::FailFast),
        LayerHook(0),
        BreakerHook(Subject::Alone, 0),
        NewLayer(Kind::Eject),
        LayerHook(1),
        Build(1),
        Drop(0),
        // The list: [dead, kept, lent (alive in the service)].
        BreakerHook(Subject::Alone, 1),
        Direct(Subject::Alone, Act::ForceOpen),
    ]);
}

/// A clone of a service is enough to keep its layer's hooks heard, for
/// every kind of layer; once it goes too, they hear nothing.
#[test]
fn a_services_clone_alone_keeps_the_hooks_heard() {
    use Op::*;
    for (kind, on) in [
        (Kind::FailFast, Subject::Alone),
        (Kind::Eject, Subject::Alone),
        (Kind::Keyed, Subject::Key(0)),
    ] {
        let caused = run(&[
            NewLayer(kind),
            LayerHook(0),
            Build(0),
            Clone(1),
            Drop(0),
            Drop(0),
            // Heard by the clone's hook.
            Direct(on, Act::ForceOpen),
            Drop(0),
            // Heard by no hook.
            Direct(on, Act::Reset),
        ]);
        assert_eq!(caused[6], [Reason::ForceOpen], "{kind:?}");
        assert_eq!(caused[8], [Reason::Reset], "{kind:?}");
    }
}
