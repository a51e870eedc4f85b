//! Transition hooks: the one place every transition passes, whatever caused
//! it — a verdict, a drop, a panic, a timeout, an admission that starts a
//! probe round, news from another replica, `force_open` or `reset`.
//!
//! Each configuration (a standalone breaker's, or all of a registry's: its
//! template, its overrides and its shared breakers) keeps one list of
//! hooks. The breaker's report of a transition calls the configuration's
//! [`Observer`] and then every hook, in the order they
//! were added, on the thread of the call that caused the transition, after
//! the transition is complete. Nothing here runs per call: an admitted or
//! settled call that changes no state never reads the list.
//!
//! The list is copy-on-write behind an `ArcSwap` (crate `arc-swap`): reading it on a
//! transition takes no lock, and adding a hook (rare) copies it. A layer's
//! hook is *lent* — the list keeps a weak reference and the layer and its
//! services the strong one — so a layer that is dropped stops hearing, and
//! its dead entry is pruned the next time a hook is added.

use core::fmt;
use std::sync::{Arc, OnceLock, Weak};

use arc_swap::ArcSwap;

use crate::observe::{Observer, Transition};
use crate::sync::{AtomicBool, Ordering};

/// The name a registry gives a breaker that many keys share (a shard's
/// overflow breaker, or the unkeyed breaker of a keyed layer). No host
/// name can be it.
pub const SHARED_NAME: &str = "(shared)";

/// The name a registry gives a breaker that is no longer in it (removed, or
/// the registry was dropped) when it reports a transition.
pub const REMOVED_NAME: &str = "(removed)";

/// Told about every transition of a breaker, with the upstream's name.
/// Runs on the request path of the call that caused it: must not block.
///
/// Any `Fn(&str, &Transition) + Send + Sync + 'static` is a hook, for
/// instance `failfast::export::tracing::emit` (feature `tracing`) or
/// `failfast::export::metrics::record_transition_per_host` (feature
/// `metrics`). Add one with [`Breaker::on_transition`](crate::Breaker::on_transition),
/// [`Registry::on_transition`](crate::Registry::on_transition) or a tower
/// layer's `on_transition`; several hooks are called in the order they were
/// added, after the breaker's [`Observer`].
///
/// ```
/// use failfast::{Breaker, State, Transition};
/// use std::sync::{Arc, Mutex};
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// let breaker = Breaker::builder().consecutive_failures(1).build()?;
/// breaker.on_transition("payments", move |upstream: &str, t: &Transition| {
///     log.lock().unwrap().push(format!("{upstream}: {} -> {}", t.from, t.to));
/// });
/// breaker.force_open();
/// assert_eq!(*seen.lock().unwrap(), ["payments: closed -> forced_open"]);
/// # Ok::<(), failfast::ConfigError>(())
/// ```
pub trait OnTransition: Send + Sync + 'static {
    /// Called once per transition.
    fn on_transition(&self, upstream: &str, transition: &Transition);
}

impl<F> OnTransition for F
where
    F: Fn(&str, &Transition) + Send + Sync + 'static,
{
    fn on_transition(&self, upstream: &str, transition: &Transition) {
        self(upstream, transition)
    }
}

/// A hook with the name it calls its breaker by: the name it was given
/// (`None`: the breaker's key, for a registry's own hooks and a keyed
/// layer's). A breaker hook keeps its name in a registry's list, whatever
/// hooks by key are added beside it.
pub(crate) struct Registration {
    name: Option<Arc<str>>,
    hook: Arc<dyn OnTransition>,
}

/// A lent hook's strong reference: while a clone of it lives, the hook
/// hears. Held by a layer and every service it built.
#[derive(Clone)]
#[cfg_attr(
    not(any(feature = "tower", all(test, not(failfast_loom)))),
    allow(dead_code)
)]
pub(crate) struct Lease(Arc<Registration>);

// Lent again by the tower layers only.
#[cfg_attr(not(feature = "tower"), allow(dead_code))]
impl Lease {
    /// The hook this lease keeps heard (to lend it again elsewhere).
    pub(crate) fn hook(&self) -> Arc<dyn OnTransition> {
        self.0.hook.clone()
    }
}

/// How the list holds a hook.
#[derive(Clone)]
enum Held {
    /// Added to the breaker or registry itself: heard for as long as it lives.
    Kept(Arc<Registration>),
    /// Lent by a layer: heard while the layer or one of its services lives.
    #[cfg_attr(
        not(any(feature = "tower", all(test, not(failfast_loom)))),
        allow(dead_code)
    )]
    Lent(Weak<Registration>),
}

impl Held {
    fn is_alive(&self) -> bool {
        match self {
            Held::Kept(_) => true,
            Held::Lent(weak) => weak.strong_count() > 0,
        }
    }
}

/// How a registry names the breaker that reported a transition: its key,
/// [`SHARED_NAME`] or [`REMOVED_NAME`], written into `out`.
pub(crate) trait Namer<B>: Send + Sync + 'static {
    fn name(&self, breaker: &B, out: &mut NameBuf);
}

/// The hooks of one configuration, in the order they were added.
pub(crate) struct Hooks<B> {
    list: ArcSwap<Vec<Held>>,
    /// Whether a hook was ever added: until then a transition does not
    /// read `list` (a first read on a thread allocates arc-swap's
    /// per-thread node, and a breaker without hooks allocates nothing).
    hooked: AtomicBool,
    /// Set once by a registry whose keys display.
    namer: OnceLock<Box<dyn Namer<B>>>,
}

impl<B: 'static> Hooks<B> {
    pub(crate) fn new() -> Hooks<B> {
        Hooks {
            list: ArcSwap::from_pointee(Vec::new()),
            hooked: AtomicBool::new(false),
            namer: OnceLock::new(),
        }
    }

    /// Adds `hook`, heard from now on for as long as the list lives, named
    /// `name`.
    pub(crate) fn keep(&self, name: Arc<str>, hook: impl OnTransition) {
        self.keep_named(Some(name), hook);
    }

    /// Adds `hook` as [`keep`](Self::keep) does, named by the breaker's key.
    pub(crate) fn keep_by_key(&self, hook: impl OnTransition) {
        self.keep_named(None, hook);
    }

    fn keep_named(&self, name: Option<Arc<str>>, hook: impl OnTransition) {
        self.add(Held::Kept(Arc::new(Registration {
            name,
            hook: Arc::new(hook),
        })));
    }

    /// Adds a shared `hook`, heard while the returned lease (or a clone)
    /// lives, named `name`.
    #[cfg_attr(
        not(any(feature = "tower", all(test, not(failfast_loom)))),
        allow(dead_code)
    )]
    pub(crate) fn lend(&self, name: Arc<str>, hook: Arc<dyn OnTransition>) -> Lease {
        self.lend_named(Some(name), hook)
    }

    /// Lends `hook` as [`lend`](Self::lend) does, named by the breaker's key.
    #[cfg(feature = "tower")]
    pub(crate) fn lend_by_key(&self, hook: Arc<dyn OnTransition>) -> Lease {
        self.lend_named(None, hook)
    }

    #[cfg_attr(
        not(any(feature = "tower", all(test, not(failfast_loom)))),
        allow(dead_code)
    )]
    fn lend_named(&self, name: Option<Arc<str>>, hook: Arc<dyn OnTransition>) -> Lease {
        let registration = Arc::new(Registration { name, hook });
        self.add(Held::Lent(Arc::downgrade(&registration)));
        Lease(registration)
    }

    /// Appends `held` to a fresh copy of the list, without the hooks whose
    /// lenders are gone.
    fn add(&self, held: Held) {
        self.list.rcu(|list| {
            let mut next: Vec<Held> = list.iter().filter(|h| h.is_alive()).cloned().collect();
            next.push(held.clone());
            next
        });
        // Release, after the list is stored: a transition that sees the
        // flag reads a list with this hook in it.
        self.hooked.store(true, Ordering::Release);
    }

    /// Installs how a registry names its breakers (the first namer stays:
    /// a registry installs the same one each time).
    pub(crate) fn name_by(&self, namer: impl FnOnce() -> Box<dyn Namer<B>>) {
        let _ = self.namer.get_or_init(namer);
    }

    /// How many hooks the list holds, the dead ones not yet pruned
    /// included (the hook model checks the pruning with it).
    #[cfg(all(test, feature = "tower", not(failfast_loom)))]
    pub(crate) fn held(&self) -> usize {
        self.list.load().len()
    }

    /// Tells `observer` and then every hook about `transition` of
    /// `breaker`. One that panics does not keep the hooks after it from
    /// hearing: the first panic goes on once all have run.
    pub(crate) fn fire(
        &self,
        observer: Option<&dyn Observer>,
        breaker: &B,
        transition: &Transition,
    ) {
        let panic = observer.and_then(|observer| {
            let call = std::panic::AssertUnwindSafe(|| observer.on_transition(transition));
            std::panic::catch_unwind(call).err()
        });
        // Acquire: pairs with `add`'s Release, so the list read holds the
        // hook whose flag was seen.
        if self.hooked.load(Ordering::Acquire) {
            let list = self.list.load();
            if !list.is_empty() {
                return self.fire_hooks(&list, breaker, transition, panic);
            }
        }
        if let Some(p) = panic {
            std::panic::resume_unwind(p);
        }
    }

    #[cold]
    fn fire_hooks(
        &self,
        list: &[Held],
        breaker: &B,
        transition: &Transition,
        mut panic: Option<Box<dyn core::any::Any + Send>>,
    ) {
        // The breaker's key, found and formatted once, for the first hook
        // named by it.
        let mut key: Option<NameBuf> = None;
        for held in list {
            let lent;
            let r: &Registration = match held {
                Held::Kept(r) => r,
                Held::Lent(weak) => match weak.upgrade() {
                    Some(r) => {
                        lent = r;
                        &lent
                    }
                    None => continue, // its layer is gone
                },
            };
            let upstream = match &r.name {
                Some(name) => name,
                None => key
                    .get_or_insert_with(|| {
                        let mut key = NameBuf::new();
                        if let Some(namer) = self.namer.get() {
                            namer.name(breaker, &mut key);
                        }
                        key
                    })
                    .as_str(),
            };
            let call = std::panic::AssertUnwindSafe(|| r.hook.on_transition(upstream, transition));
            if let Err(p) = std::panic::catch_unwind(call) {
                panic.get_or_insert(p);
            }
        }
        if let Some(p) = panic {
            std::panic::resume_unwind(p);
        }
    }
}

impl<B> fmt::Debug for Hooks<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hooks")
            .field("hooks", &self.list.load().len())
            .field("names_keys", &self.namer.get().is_some())
            .finish()
    }
}

/// A name formatted on the stack: no allocation for names up to 256 bytes
/// (every host name with its port), a `String` beyond.
pub(crate) struct NameBuf {
    bytes: [u8; NameBuf::INLINE],
    len: usize,
    spilled: Option<String>,
}

impl NameBuf {
    const INLINE: usize = 256;

    pub(crate) fn new() -> NameBuf {
        NameBuf {
            bytes: [0; NameBuf::INLINE],
            len: 0,
            spilled: None,
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        match &self.spilled {
            Some(s) => s,
            // Only whole `&str`s are copied in, so the bytes are UTF-8.
            None => core::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default(),
        }
    }
}

impl fmt::Write for NameBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if let Some(spilled) = &mut self.spilled {
            spilled.push_str(s);
        } else if let Some(room) = self.bytes.get_mut(self.len..self.len + s.len()) {
            room.copy_from_slice(s.as_bytes());
            self.len += s.len();
        } else {
            let mut spilled = String::with_capacity(self.len + s.len());
            spilled.push_str(self.as_str());
            spilled.push_str(s);
            self.spilled = Some(spilled);
        }
        Ok(())
    }
}

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;
    use core::fmt::Write;

    #[test]
    fn a_name_stays_on_the_stack_up_to_its_size_and_spills_beyond() {
        let mut name = NameBuf::new();
        let (host, port) = ("api.example.com", 443);
        write!(name, "{host}:{port}").unwrap();
        assert_eq!(name.as_str(), "api.example.com:443");
        assert!(name.spilled.is_none());
        let long = "x".repeat(NameBuf::INLINE - name.len);
        name.write_str(&long).unwrap();
        assert!(name.spilled.is_none(), "exactly full is still inline");
        name.write_str("é").unwrap();
        assert_eq!(name.as_str(), format!("api.example.com:443{long}é"));
        assert!(name.spilled.is_some());
    }
}

#[cfg(all(test, not(failfast_loom)))]
mod hook_tests {
    use std::sync::Mutex;

    use super::*;
    use crate::clock::Nanos;
    use crate::observe::Reason;
    use crate::state::State;
    use crate::window::WindowCounts;

    type Log = Arc<Mutex<Vec<String>>>;

    /// The hooks of one configuration whose subject is nothing: the tests
    /// fire them by hand (`tests/hook_every_cause.rs` fires them through
    /// breakers, registries and layers).
    fn hooks() -> Hooks<()> {
        Hooks::new()
    }

    fn transition(to: State) -> Transition {
        Transition {
            from: State::Closed,
            to,
            reason: Reason::ForceOpen,
            generation: 1,
            at: Nanos::ZERO,
            breaker_id: 7,
            window: WindowCounts::default(),
            consecutive_failures: 0,
            unanswered_calls: 0,
            probe_successes: 0,
            trips_in_a_row: 0,
            open_for: None,
            outlier_rule: None,
        }
    }

    fn observer(log: &Log) -> impl Observer {
        let seen = log.clone();
        move |t: &Transition| seen.lock().unwrap().push(format!("observer {:?}", t.to))
    }

    fn hook(log: &Log, tag: &'static str) -> impl OnTransition {
        let seen = log.clone();
        move |name: &str, t: &Transition| {
            seen.lock()
                .unwrap()
                .push(format!("{tag} {name} {:?}", t.to))
        }
    }

    #[test]
    fn the_observer_then_each_hook_in_the_order_added() {
        let log = Log::default();
        let (hooks, observer) = (hooks(), observer(&log));
        hooks.keep("a".into(), hook(&log, "first"));
        let _lease = hooks.lend("b".into(), Arc::new(hook(&log, "second")));
        hooks.fire(Some(&observer), &(), &transition(State::ForcedOpen));
        assert_eq!(
            *log.lock().unwrap(),
            [
                "observer ForcedOpen",
                "first a ForcedOpen",
                "second b ForcedOpen"
            ]
        );
    }

    #[test]
    fn a_lent_hook_is_heard_while_its_lease_lives_and_pruned_after() {
        let log = Log::default();
        let (hooks, observer) = (hooks(), observer(&log));
        let lease = hooks.lend("layer".into(), Arc::new(hook(&log, "lent")));
        let clone = lease.clone();
        drop(lease);
        hooks.fire(Some(&observer), &(), &transition(State::ForcedOpen));
        drop(clone);
        hooks.fire(Some(&observer), &(), &transition(State::Closed));
        assert_eq!(
            *log.lock().unwrap(),
            [
                "observer ForcedOpen",
                "lent layer ForcedOpen",
                "observer Closed"
            ]
        );
        assert_eq!(hooks.list.load().len(), 1, "dead, not yet pruned");
        hooks.keep("kept".into(), hook(&log, "kept"));
        assert_eq!(
            hooks.list.load().len(),
            1,
            "the dead lease pruned on the next add"
        );
    }

    #[test]
    fn an_add_prunes_only_the_dead_lent_hooks_wherever_they_sit() {
        let log = Log::default();
        let hooks = hooks();
        let dead = hooks.lend("dead".into(), Arc::new(hook(&log, "dead")));
        let live = hooks.lend("live".into(), Arc::new(hook(&log, "live")));
        hooks.keep("kept".into(), hook(&log, "kept"));
        drop(dead);
        // The dead lease is first, a live one after it: only the dead goes.
        hooks.keep("last".into(), hook(&log, "last"));
        assert_eq!(hooks.list.load().len(), 3, "live, kept, last");
        hooks.fire(None, &(), &transition(State::ForcedOpen));
        assert_eq!(
            *log.lock().unwrap(),
            [
                "live live ForcedOpen",
                "kept kept ForcedOpen",
                "last last ForcedOpen"
            ]
        );
        drop(live);
    }

    #[test]
    fn a_panicking_hook_keeps_no_later_hook_from_hearing_and_its_panic_goes_on() {
        let log = Log::default();
        let (hooks, observer) = (hooks(), observer(&log));
        hooks.keep("x".into(), |_: &str, _: &Transition| panic!("hook bug"));
        hooks.keep("y".into(), hook(&log, "after"));
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            hooks.fire(Some(&observer), &(), &transition(State::ForcedOpen))
        }));
        let message = caught.unwrap_err().downcast::<&str>().unwrap();
        assert_eq!(*message, "hook bug");
        assert_eq!(
            *log.lock().unwrap(),
            ["observer ForcedOpen", "after y ForcedOpen"]
        );
    }
}
