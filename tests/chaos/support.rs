//! What every part of the harness shares: the seeded generator, the run's
//! size and seed from the environment, the deliberate panic and the quiet
//! hook, and the guard that prints the seed of a failing run.

use std::any::Any;
use std::collections::VecDeque;
use std::fmt::Debug;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

/// The seed of the default run (CI): any fixed value; this one spells nothing.
pub const DEFAULT_SEED: u64 = 0x29C4_A05E_0008_2026;

/// The Open → HalfOpen cycles of the default run, over the single-threaded
/// phase's configurations.
pub const DEFAULT_CYCLES: u64 = 10_000;

/// A xorshift64* generator: small, fast in a debug build, and the same
/// sequence everywhere for a seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`, mixed with `stream` so that parts of one run
    /// (a configuration, a thread) draw independent sequences.
    pub fn new(seed: u64, stream: u64) -> Rng {
        // splitmix64 of the pair: never zero for xorshift.
        let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `percent` / 100.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// True with probability `n` / 10,000.
    pub fn per_10k(&mut self, n: u64) -> bool {
        self.below(10_000) < n
    }
}

fn env_u64(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let text = text.trim().replace('_', "");
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    Some(parsed.unwrap_or_else(|e| panic!("{name}={text:?} is not a u64: {e}")))
}

/// The run's seed: `FAILFAST_CHAOS_SEED` (decimal or `0x` hex), else the
/// default.
pub fn seed() -> u64 {
    env_u64("FAILFAST_CHAOS_SEED").unwrap_or(DEFAULT_SEED)
}

/// The single-threaded phase's Open → HalfOpen cycles:
/// `FAILFAST_CHAOS_CYCLES`, else [`DEFAULT_CYCLES`]. The other phases scale
/// with it.
pub fn cycles() -> u64 {
    env_u64("FAILFAST_CHAOS_CYCLES").unwrap_or(DEFAULT_CYCLES)
}

/// The payload of every panic the harness causes on purpose.
#[derive(Debug)]
pub struct Deliberate;

/// Panics with the harness's own payload.
pub fn deliberate() -> ! {
    quiet_deliberate_panics();
    std::panic::panic_any(Deliberate)
}

/// The default hook stays quiet for [`Deliberate`] panics, and only for them.
pub fn quiet_deliberate_panics() {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<Deliberate>() {
                default(info);
            }
        }));
    });
}

/// Runs `f`, which may panic only deliberately: `Ok` with its value, or
/// `Err(())` for a deliberate panic. Any other panic (an assertion of the
/// library, an arithmetic overflow in a debug build) goes on unchanged.
pub fn only_deliberate<T>(f: impl FnOnce() -> T) -> Result<T, ()> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => Ok(v),
        Err(payload) => {
            let payload: Box<dyn Any + Send> = payload;
            if payload.is::<Deliberate>() {
                Err(())
            } else {
                resume_unwind(payload)
            }
        }
    }
}

/// The last few actions of a run, printed with the seed when it fails.
pub struct Trail<A: Debug> {
    what: String,
    seed: u64,
    steps: u64,
    last: VecDeque<A>,
}

impl<A: Debug> Trail<A> {
    const KEPT: usize = 24;

    pub fn new(what: impl Into<String>, seed: u64) -> Trail<A> {
        Trail {
            what: what.into(),
            seed,
            steps: 0,
            last: VecDeque::with_capacity(Self::KEPT),
        }
    }

    pub fn push(&mut self, action: A) {
        if self.last.len() == Self::KEPT {
            self.last.pop_front();
        }
        self.last.push_back(action);
        self.steps += 1;
    }
}

impl<A: Debug> Drop for Trail<A> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "\nchaos: {} failed at step {} with seed {:#x}\n  replay: \
                 FAILFAST_CHAOS_SEED={:#x} cargo test --test chaos\n  last actions, oldest first:",
                self.what, self.steps, self.seed, self.seed
            );
            for a in &self.last {
                eprintln!("    {a:?}");
            }
        }
    }
}
