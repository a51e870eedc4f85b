//! loom models of the outlier pools' two concurrent words: a
//! host's [tally](super::tally) and a pool's [sums](super::sums). They sit
//! in the crate because neither word is reachable through the public API
//! without a registry, a breaker and a sealed interval around it, which
//! would drown the one race each model is about.
//!
//! Each model is shown to fail on a deliberate bug of `loom-tests/bugs/`
//! (named on the model). `.ci/run` runs them in its "loom models in the
//! crate" step, at `LOOM_MAX_PREEMPTIONS=2`.
//!
//! Under loom a stripe's 128-bit word is a modelled lock around the value
//! (`sync::AtomicU128`): linearizable, as the real compare-exchange is, so
//! the sums models explore every order of the words' operations.
//!
//! A model that claims a case is reachable (the tally model's late call
//! counted in either interval or dropped; a report in the sealed sums and
//! one refused) records which case each
//! execution took in a `std` mutex outside the model, and checks after the
//! exploration that every case was seen: a model that explores nothing
//! fails.

use std::sync::Mutex;

use super::sums::{Added, Report, Sums, Totals};
use super::tally::{Counts, Tally};
use crate::sync::{Arc, AtomicU64};

/// Marks case `case` of a model as seen.
fn saw(cases: &Mutex<[bool; 3]>, case: usize) {
    cases.lock().unwrap_or_else(|e| e.into_inner())[case] = true;
}

/// The cases seen so far.
fn seen(cases: &Mutex<[bool; 3]>) -> [bool; 3] {
    *cases.lock().unwrap_or_else(|e| e.into_inner())
}

// ===== The tally's roll =====

/// The interval the tally model's host was counting in.
const E: u64 = 41;

/// A tally of interval `E` holding one call. Two calls of `E + 1` (on two
/// threads) race to roll it, while a call of `E` (on the main thread, whose
/// time was read just before the interval ended) is counted.
///
/// - Exactly one of the two `E + 1` calls gets the old counts: the roll is
///   one compare-exchange and its loser does not roll again.
/// - The old counts hold the `E` call already there, and never an `E + 1`
///   call (at most the late `E` call besides).
/// - The tally left is `E + 1`'s and holds both `E + 1` calls: the loser
///   added to the fresh tally, and nothing overwrote it.
/// - The late `E` call is counted at most once. It lands in the old counts
///   (its `fetch_add` came first), in the new tally (its `fetch_add` read
///   `E`'s tag but landed after the roll), or nowhere (its load already saw
///   `E + 1`: a call from the past is dropped rather than rolling the tally
///   back, as `Tally::roll` says). Each of the three is reachable.
///
/// Bugs: `tally-roll-store` (the roll's CAS as a load and a store: two
/// winners), `tally-loser-retries` (a lost roll CASes again over the
/// winner's fresh tally: its call is lost).
#[test]
fn a_roll_has_one_winner_and_counts_every_call_once() {
    // Where the late call went: the old counts, the new tally, nowhere.
    static CASES: Mutex<[bool; 3]> = Mutex::new([false; 3]);
    // Twice: loom never moves a thread's first load after another thread's
    // compare-exchange (tokio-rs/loom#392), so the late call's load reading
    // the rolled tally needs a run where the rollers go first.
    for rollers_first in [false, true] {
        loom::model(move || roll_race(rollers_first, &CASES));
    }
    assert_eq!(
        seen(&CASES),
        [true; 3],
        "the late call in the old counts, in the new tally, and dropped"
    );
}

/// One execution of [`a_roll_has_one_winner_and_counts_every_call_once`].
fn roll_race(rollers_first: bool, cases: &Mutex<[bool; 3]>) {
    {
        let word = Arc::new(AtomicU64::new(0));
        Tally(&word).start(E);
        assert_eq!(Tally(&word).call(E), None);
        let rollers: Vec<_> = (0..2)
            .map(|_| {
                let word = word.clone();
                loom::thread::spawn(move || Tally(&word).call(E + 1))
            })
            .collect();
        if rollers_first {
            loom::thread::yield_now();
        }
        let late = Tally(&word).call(E);
        let rolled: Vec<Option<Counts>> = rollers.into_iter().map(|t| t.join().unwrap()).collect();

        assert_eq!(late, None, "a call of the current interval rolls nothing");
        let won: Vec<Counts> = rolled.iter().flatten().copied().collect();
        assert_eq!(won.len(), 1, "exactly one roll wins: {rolled:?}");
        let old = won[0];
        // E's counts: its first call, and the late call if it came first.
        assert!(
            (1..=2).contains(&old.calls),
            "E's first call kept, no E + 1 call: {old:?}"
        );
        let new = Tally(&word).peek(E + 1).expect("the tally is E + 1's");
        // E + 1's: both its calls, and the late call if it landed after.
        assert!(
            (2..=3).contains(&new.calls),
            "both calls of E + 1 counted: {new:?}"
        );
        let (late_in_old, late_in_new) = (old.calls == 2, new.calls == 3);
        assert!(
            !(late_in_old && late_in_new),
            "the late call counted twice: {old:?} then {new:?}"
        );
        saw(
            cases,
            if late_in_old {
                0
            } else if late_in_new {
                1
            } else {
                2
            },
        );
    }
}

// ===== The sums and their seal =====

/// The sums models' interval.
const K: u64 = 1000;

/// Report `i` of a sums model: a host with every rule's volume and rates of
/// `2^i` ppm, so that each word's sums name the reports in them (bit `i` of
/// Σ success in word A, of Σ slow and of Σ calls in word B).
fn report(i: u32) -> Report {
    Report {
        success_ppm: Some(1 << i),
        failure_volume: true,
        slow_ppm: Some(1 << i),
        calls: 1 << i,
    }
}

/// Where report `i` is in `t`: (in word A's sums, in word B's).
fn placed(t: &Totals, i: u32) -> (bool, bool) {
    (t.success_sum & 1 << i != 0, t.slow_sum & 1 << i != 0)
}

/// `t` is well formed: each word's counts match the reports its sums name.
/// (A report's word-A fields, and its word-B fields, go in together: each
/// word is one compare-exchange.)
fn check_words(t: &Totals) {
    let a = t.success_sum as u32;
    let squares: u128 = (0..8)
        .filter(|i| a & 1 << i != 0)
        .map(|i| 1 << (2 * i))
        .sum();
    assert_eq!(u64::from(a.count_ones()), t.hosts, "word A: {t:?}");
    assert_eq!(t.success_squares, squares, "word A: {t:?}");
    let b = t.slow_sum as u32;
    assert_eq!(u64::from(b.count_ones()), t.slow_hosts, "word B: {t:?}");
    assert_eq!(t.failure_hosts, t.slow_hosts, "word B: {t:?}");
    assert_eq!(t.calls, u64::from(b), "word B's calls: {t:?}");
}

/// Whether the models accept a report that is in word A's sums and not in
/// word B's, refused `Late`: the documented split (see the `sums` module).
/// `Sums::add` writes A then B and `Sums::seal` seals A then B, so a seal
/// of both words that falls between a report's two CASes takes it in A and
/// refuses it in B (loom finds it in every sums model). Each rule reads one
/// word, so each rule's figures are whole over the hosts its word took.
/// Set to `false`, the models fail on that interleaving: it is the switch
/// for a change that makes a stripe's two words one.
const HALF_REPORTS_ALLOWED: bool = true;

/// Report `i`'s fate against the sealed totals `t`: in them whole when it
/// said `Yes` (0), in neither word when it said `Late` (1), or in word A
/// alone when it said `Late` (2, the split of [`HALF_REPORTS_ALLOWED`]). Never
/// `Full` here.
fn fate(t: &Totals, i: u32, added: Added) -> usize {
    match (added, placed(t, i)) {
        (Added::Yes, (true, true)) => 0,
        (Added::Late, (false, false)) => 1,
        (Added::Late, (true, false)) if HALF_REPORTS_ALLOWED => 2,
        (added, (a, b)) => panic!("report {i}: {added:?}, in A {a}, in B {b}: {t:?}"),
    }
}

/// Two reports of interval `K` on the same stripe of fresh sums (each word
/// tagged long before `K`, so the first to come resets it in the same CAS
/// that adds to it) race each other and a seal of `K` on the main thread.
/// A second seal afterwards reads the same totals.
///
/// Every report said `Yes` and is in both words of the sealed totals, or
/// said `Late` and is in neither (or in word A alone: see
/// [`HALF_REPORTS_ALLOWED`]); each word's counts match the reports its sums
/// name (nothing half-added within a word, no reset wiping a report that
/// said `Yes`). Both whole fates are reachable.
///
/// Bugs: `seal-without-bit` (a seal that reads without setting the sealed
/// bit: a report after it says `Yes` and is missing from the totals),
/// `sums-reset-by-store` (an older word reset by a plain store before the
/// add: it wipes a report or a seal that came in between).
#[test]
fn a_seal_takes_each_report_whole_or_refuses_it() {
    static CASES: Mutex<[bool; 3]> = Mutex::new([false; 3]);
    loom::model(|| {
        let sums = Arc::new(Sums::new(K));
        let reporters: Vec<_> = (0..2)
            .map(|i| {
                let sums = sums.clone();
                loom::thread::spawn(move || sums.add(K, 3, report(i)))
            })
            .collect();
        let sealed = sums.seal(K).expect("K's slot");
        let added: Vec<Added> = reporters.into_iter().map(|t| t.join().unwrap()).collect();

        check_words(&sealed);
        for (i, &a) in (0..).zip(&added) {
            saw(&CASES, fate(&sealed, i, a));
        }
        assert_eq!(sums.seal(K), Some(sealed), "a later seal reads the same");
    });
    let [whole, refused, _] = seen(&CASES);
    assert!(whole && refused, "reports in the sums and reports refused");
}

/// One report of `K` (stripe 5) races two seals of `K` (the main thread
/// and another), after an earlier report on the same stripe (so its words
/// are `K`'s already, and only the sealed bit keeps the racing report out
/// of a word read): both seals read the same totals, with the earlier
/// report whole, and the racing report whole (`Yes`) or refused (`Late`).
///
/// Bugs: `seal-without-bit`.
#[test]
fn two_seals_read_the_same_totals() {
    loom::model(|| {
        let sums = Arc::new(Sums::new(K));
        assert_eq!(sums.add(K, 5, report(0)), Added::Yes);
        let reporter = {
            let sums = sums.clone();
            loom::thread::spawn(move || sums.add(K, 5, report(1)))
        };
        let sealer = {
            let sums = sums.clone();
            loom::thread::spawn(move || sums.seal(K))
        };
        let mine = sums.seal(K).expect("K's slot");
        let added = reporter.join().unwrap();
        let theirs = sealer.join().unwrap().expect("K's slot");

        assert_eq!(mine, theirs, "two readers of one sealed interval");
        check_words(&mine);
        assert_eq!(placed(&mine, 0), (true, true), "the report before both");
        let _ = fate(&mine, 1, added);
    });
}

/// Interval `K`'s sums hold one report (stripe 2). A second report of `K`
/// and a report of `K + 2` (the slot's next interval) race on the same
/// stripe while the main thread seals `K`.
///
/// - The report of `K + 2` always goes in (`Yes`): it resets the stripe's
///   words of `K` in the CAS that adds it.
/// - A seal of `K` that read anything read `K`'s reports only: the first,
///   and the second if it said `Yes`; never `K + 2`'s.
/// - Afterwards `K + 2`'s sums are exactly its one report: nothing of `K`
///   carried over, and `K` can no longer be sealed.
#[test]
fn the_next_use_of_a_slot_never_mixes_with_the_last() {
    loom::model(|| {
        let sums = Arc::new(Sums::new(K));
        assert_eq!(sums.add(K, 2, report(0)), Added::Yes);
        let second = {
            let sums = sums.clone();
            loom::thread::spawn(move || sums.add(K, 2, report(1)))
        };
        let next = {
            let sums = sums.clone();
            loom::thread::spawn(move || sums.add(K + 2, 2, report(2)))
        };
        let sealed = sums.seal(K);
        let second = second.join().unwrap();
        let next = next.join().unwrap();

        assert_eq!(next, Added::Yes, "a later interval's first report");
        if let Some(t) = sealed {
            check_words(&t);
            assert_eq!(placed(&t, 0), (true, true), "{t:?}");
            assert_eq!(placed(&t, 2), (false, false), "K + 2's report in K: {t:?}");
            let _ = fate(&t, 1, second);
        }
        let mut only_next = Totals::default();
        only_next.add(report(2));
        assert_eq!(sums.seal(K + 2), Some(only_next), "K + 2's sums");
        assert_eq!(sums.seal(K), None, "K's slot is K + 2's now");
    });
}
