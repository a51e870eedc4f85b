//! A pool's running sums: what hosts report of an interval, striped, exact,
//! tagged with the interval, and sealed before anyone reads them.
//!
//! A host adds its interval's figures once, when it rolls out of it (see
//! [`tally`](super::tally)). Each stripe keeps two 128-bit words, each
//! compared and swapped whole:
//!
//! ```text
//! word A: tag (13) | sealed (1) | hosts (18) | Σ success ppm (38) | Σ success ppm² (58)
//! word B: tag (13) | sealed (1) | fp hosts (18) | slow hosts (18) | Σ slow ppm (38) | Σ calls (40)
//! ```
//!
//! - **Exact.** Rates are integers in parts per million and sums are plain
//!   integer sums, so they never drift and a direct computation over the
//!   same hosts gives the same numbers. A field of 18 bits holds up to
//!   262,143 hosts per stripe and interval; with those, Σ ppm < 2³⁸,
//!   Σ ppm² < 2⁵⁸ and Σ calls < 2⁴⁰ (the calls of the hosts with the
//!   success-rate volume, which word A counts), so no field carries into the
//!   next. A full stripe sends its contribution to the next one.
//! - **Tagged.** A word belongs to one interval (its number modulo 8192).
//!   Two slots alternate by parity: one collects interval `k` while the
//!   other, sealed, holds `k − 1`. The first contribution of a later
//!   interval replaces an older word in the same CAS that adds to it, so a
//!   reset never races an add.
//! - **Sealed.** The figures of interval `k` are read once its collection is
//!   over: a reader sets each word's sealed bit by CAS and reads the sums in
//!   the same step. A contribution arriving after that (a caller who read
//!   the clock in `k + 1` and lost the race to the seal) finds the bit and
//!   is refused ([`Added::Late`]). Every reader of a sealed interval reads
//!   the same numbers, and no report is counted twice.
//! - **Two words, each whole.** A report writes word A, then word B; a seal
//!   seals A, then B. A seal that falls between a report's two CASes takes
//!   the report in A's sums and refuses it in B's (the report says `Late`,
//!   and the pool counts it among the late reports). Each rule reads one
//!   word (the success rate A; the failure percentage and the latency rule
//!   B), so each rule's figures are exact over the hosts its word took; the
//!   two host counts may differ by the reports caught between two CASes.
//!   (The loom models in `loom_models.rs` find that split and allow only
//!   it; a host in B's sums is always in A's.)

use crate::sync::{AtomicU128, Ordering};

/// Stripes per slot: contributions from different hosts spread over them.
pub(crate) const STRIPES: usize = 16;

const TAG_BITS: u32 = 13;
pub(crate) const TAG_MASK: u64 = (1 << TAG_BITS) - 1;
const TAG_SHIFT: u32 = 128 - TAG_BITS;
const SEALED: u128 = 1 << (TAG_SHIFT - 1);
const COUNT_BITS: u32 = 18;
const COUNT_MAX: u128 = (1 << COUNT_BITS) - 1;
const PAYLOAD_MASK: u128 = SEALED - 1;

// Word A's fields, from the top of the payload down.
const A_HOSTS: u32 = 96;
const A_SUM: u32 = 58;
// Word B's fields.
const B_FP_HOSTS: u32 = 96;
const B_SLOW_HOSTS: u32 = 78;
const B_SLOW_SUM: u32 = 40;
const B_CALLS: u32 = 0;
const _: () = assert!(A_HOSTS + COUNT_BITS == TAG_SHIFT - 1);

/// Parts per million: the unit of every rate.
pub(crate) const PPM: u64 = 1_000_000;

/// What one host reports of one interval.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Report {
    /// Its success rate, in ppm, if it had the success-rate rule's volume.
    pub(crate) success_ppm: Option<u32>,
    /// Whether it had the failure-percentage rule's volume.
    pub(crate) failure_volume: bool,
    /// Its slow-call rate, in ppm, if it had the latency rule's volume.
    pub(crate) slow_ppm: Option<u32>,
    /// Its calls, when it has a success rate (else 0).
    pub(crate) calls: u32,
}

impl Report {
    fn word_a(self) -> u128 {
        match self.success_ppm {
            Some(r) => {
                let r = u128::from(r.min(PPM as u32));
                (1 << A_HOSTS) | (r << A_SUM) | (r * r)
            }
            None => 0,
        }
    }

    fn word_b(self) -> u128 {
        let slow = match self.slow_ppm {
            Some(r) => (1 << B_SLOW_HOSTS) | (u128::from(r.min(PPM as u32)) << B_SLOW_SUM),
            None => 0,
        };
        let calls = match self.success_ppm {
            Some(_) => u128::from(self.calls) << B_CALLS,
            None => 0,
        };
        (u128::from(self.failure_volume) << B_FP_HOSTS) | slow | calls
    }
}

/// The sums of one interval over every stripe (or a direct computation's).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    /// Hosts with the success-rate volume, their Σ rate and Σ rate² (ppm).
    pub(crate) hosts: u64,
    pub(crate) success_sum: u128,
    pub(crate) success_squares: u128,
    /// Hosts with the failure-percentage volume.
    pub(crate) failure_hosts: u64,
    /// Hosts with the latency rule's volume and their Σ slow rate (ppm).
    pub(crate) slow_hosts: u64,
    pub(crate) slow_sum: u128,
    /// The calls of the hosts with a success rate (word B's count of them:
    /// a report split by a seal is in A's hosts and not here).
    pub(crate) calls: u64,
}

impl Totals {
    /// Adds one host's report, as a direct computation would.
    #[cfg(test)]
    #[cfg_attr(failfast_loom, allow(dead_code))] // for the loom models
    pub(crate) fn add(&mut self, r: Report) {
        self.add_a(r.word_a());
        self.add_b(r.word_b());
    }

    fn add_a(&mut self, payload: u128) {
        self.hosts += field(payload, A_HOSTS, COUNT_BITS) as u64;
        self.success_sum += field(payload, A_SUM, A_HOSTS - A_SUM);
        self.success_squares += field(payload, 0, A_SUM);
    }

    fn add_b(&mut self, payload: u128) {
        self.failure_hosts += field(payload, B_FP_HOSTS, COUNT_BITS) as u64;
        self.slow_hosts += field(payload, B_SLOW_HOSTS, COUNT_BITS) as u64;
        self.slow_sum += field(payload, B_SLOW_SUM, B_SLOW_HOSTS - B_SLOW_SUM);
        self.calls += field(payload, B_CALLS, B_SLOW_SUM - B_CALLS) as u64;
    }
}

fn field(word: u128, shift: u32, bits: u32) -> u128 {
    (word >> shift) & ((1 << bits) - 1)
}

fn tag_of(word: u128) -> u64 {
    (word >> TAG_SHIFT) as u64
}

/// How far ahead of `k` a word's interval may be and still count as later
/// than `k`: a word two intervals ahead is the normal case (the slot's next
/// use), the rest is margin. Any other tag than `k`'s is earlier: a word
/// left by a pool idle for hours, whatever its distance, is reset, never
/// mistaken for the future. The pool sends no report or seal for an
/// interval behind its own (see `Pool::latest`), so only a caller stalled
/// for thousands of intervals between two instructions could be wrong.
const AHEAD: u64 = 8;

/// Whether interval tag `tag` comes after `k`'s (see [`AHEAD`]).
fn is_after(tag: u64, k: u64) -> bool {
    let d = tag.wrapping_sub(k) & TAG_MASK;
    (1..=AHEAD).contains(&d)
}

/// How a contribution went.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Added {
    /// In the sums.
    Yes,
    /// Refused: the interval was sealed, or its slot already moved on (in
    /// both words, or in word B only: see the module's docs).
    Late,
    /// Every stripe was full (more than 4 million hosts in one interval),
    /// or a stripe's word B was while its word A was not.
    Full,
}

/// One stripe's two words.
struct Stripe {
    a: AtomicU128,
    b: AtomicU128,
}

impl Stripe {
    /// Empty words of interval tag `tag`.
    fn new(tag: u64) -> Stripe {
        let word = u128::from(tag & TAG_MASK) << TAG_SHIFT;
        Stripe {
            a: AtomicU128::new(word),
            b: AtomicU128::new(word),
        }
    }
}

/// The count fields of each word: a contribution that would overflow one
/// goes to the next stripe.
const A_COUNTS: [u32; 1] = [A_HOSTS];
const B_COUNTS: [u32; 2] = [B_FP_HOSTS, B_SLOW_HOSTS];

/// The sums of one pool: two slots (by interval parity) of [`STRIPES`].
pub(crate) struct Sums {
    slots: [Box<[crossbeam_utils::CachePadded<Stripe>]>; 2],
}

impl Sums {
    /// Empty sums for a pool made in interval `epoch`: every word tagged
    /// well before it, so that no tag of the pool's intervals looks later
    /// than a word nobody wrote (see [`AHEAD`]).
    pub(crate) fn new(epoch: u64) -> Sums {
        let before = epoch.wrapping_sub(2 * AHEAD);
        // Slot `p`'s words get an interval of parity `p`.
        let slot = |p: u64| {
            let tag = before.wrapping_sub((before ^ p) & 1);
            (0..STRIPES)
                .map(|_| crossbeam_utils::CachePadded::new(Stripe::new(tag)))
                .collect()
        };
        Sums {
            slots: [slot(0), slot(1)],
        }
    }

    /// Adds `report` to interval `epoch`'s sums, from stripe `stripe` on.
    pub(crate) fn add(&self, epoch: u64, stripe: usize, report: Report) -> Added {
        let (a, b) = (report.word_a(), report.word_b());
        if a == 0 && b == 0 {
            return Added::Yes; // nothing to add: a host under every volume
        }
        let slot = &self.slots[(epoch & 1) as usize];
        let k = epoch & TAG_MASK;
        for i in 0..STRIPES {
            let s = &slot[(stripe + i) % STRIPES];
            match add_word(&s.a, k, a, &A_COUNTS) {
                Added::Full => continue,
                Added::Late => return Added::Late,
                Added::Yes => {}
            }
            // B after A (a host in B's sums is in A's). B refusing now
            // (sealed since, or full with A not) leaves the host in A
            // alone: reported as `Late`/`Full`, never retried elsewhere.
            return add_word(&s.b, k, b, &B_COUNTS);
        }
        Added::Full
    }

    /// Seals interval `epoch`'s sums and returns them, or `None` if its slot
    /// already holds a later interval (`epoch` is too old to read).
    pub(crate) fn seal(&self, epoch: u64) -> Option<Totals> {
        let slot = &self.slots[(epoch & 1) as usize];
        let k = epoch & TAG_MASK;
        let mut totals = Totals::default();
        for s in slot.iter() {
            // A before B, as contributions write them.
            totals.add_a(seal_word(&s.a, k)?);
            totals.add_b(seal_word(&s.b, k)?);
        }
        Some(totals)
    }
}

/// Adds `payload` to a word of interval tag `k`: one CAS, which also
/// replaces a word of an older interval.
fn add_word(word: &AtomicU128, k: u64, payload: u128, counts: &[u32]) -> Added {
    // Acquire/Release: a word's sums are published by its CAS and read by a
    // seal's CAS on the same word; the RMW order alone would do, the pair
    // keeps the intent explicit at no cost on x86.
    let mut current = word.load(Ordering::Acquire);
    loop {
        let tag = tag_of(current);
        let new = if tag == k {
            if current & SEALED != 0 {
                return Added::Late;
            }
            let full = |&shift: &u32| {
                field(current, shift, COUNT_BITS) == COUNT_MAX
                    && field(payload, shift, COUNT_BITS) != 0
            };
            if counts.iter().any(full) {
                return Added::Full;
            }
            current + payload
        } else if is_after(tag, k) {
            return Added::Late;
        } else {
            (u128::from(k) << TAG_SHIFT) | payload
        };
        match word.compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Added::Yes,
            Err(seen) => current = seen,
        }
    }
}

/// Seals a word for interval tag `k` and returns its payload: a word of an
/// older interval (nobody added to `k` here) becomes an empty sealed word of
/// `k`, so that a late contribution cannot start it either. `None` if the
/// word holds a later interval.
fn seal_word(word: &AtomicU128, k: u64) -> Option<u128> {
    let mut current = word.load(Ordering::Acquire);
    loop {
        let tag = tag_of(current);
        let sealed = if tag == k {
            if current & SEALED != 0 {
                return Some(current & PAYLOAD_MASK);
            }
            current | SEALED
        } else if is_after(tag, k) {
            return None;
        } else {
            (u128::from(k) << TAG_SHIFT) | SEALED
        };
        match word.compare_exchange(current, sealed, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some(sealed & PAYLOAD_MASK),
            Err(seen) => current = seen,
        }
    }
}

#[cfg(all(test, not(failfast_loom)))]
mod tests {
    use super::*;

    fn sr(r: u32) -> Report {
        Report {
            success_ppm: Some(r),
            failure_volume: true,
            slow_ppm: Some(r / 2),
            calls: 250_000,
        }
    }

    #[test]
    fn sums_equal_a_direct_computation() {
        let sums = Sums::new(0);
        let mut direct = Totals::default();
        for (i, r) in [500_000, 1_000_000, 999_000, 0, 123_456]
            .into_iter()
            .enumerate()
        {
            assert_eq!(sums.add(7, i * 5, sr(r)), Added::Yes);
            direct.add(sr(r));
        }
        assert_eq!(sums.seal(7), Some(direct));
        assert_eq!(sums.seal(7), Some(direct), "a second seal reads the same");
    }

    #[test]
    fn a_sealed_interval_refuses_late_reports_and_the_next_one_starts_fresh() {
        let sums = Sums::new(0);
        sums.add(7, 0, sr(1_000_000));
        let sealed = sums.seal(7).unwrap();
        assert_eq!(sums.add(7, 0, sr(0)), Added::Late);
        assert_eq!(sums.seal(7), Some(sealed));
        assert_eq!(
            sums.add(9, 0, sr(0)),
            Added::Yes,
            "slot 1 again, two intervals on"
        );
        assert_eq!(sums.seal(9).map(|t| t.hosts), Some(1));
        assert_eq!(sums.seal(7), None, "interval 7 is gone");
        assert_eq!(sums.add(7, 0, sr(0)), Added::Late);
    }

    #[test]
    fn an_interval_nobody_reported_seals_empty() {
        let sums = Sums::new(0);
        sums.add(3, 0, sr(1));
        assert_eq!(sums.seal(5), Some(Totals::default()));
        assert_eq!(sums.add(5, 0, sr(1)), Added::Late);
    }

    #[test]
    fn tags_compare_around_the_circle() {
        assert!(is_after(0, 8191));
        assert!(is_after(1, 0) && is_after(8, 0));
        assert!(!is_after(9, 0), "far ahead is a stale word");
        assert!(!is_after(0, 1) && !is_after(5, 5));
    }

    #[test]
    fn a_word_left_half_the_circle_ago_is_reset_not_taken_for_later() {
        let sums = Sums::new(0);
        assert_eq!(sums.add(8184, 0, sr(1)), Added::Yes, "8 before 0 + 8192");
        assert_eq!(sums.add(4096, 0, sr(1)), Added::Yes);
        assert_eq!(sums.seal(4096).map(|t| t.hosts), Some(1));
    }
}
