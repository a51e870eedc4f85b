//! The probe spread: how much earlier than the news says a replica ends a
//! remote open period, so replicas that heard the same trip do not probe the
//! upstream in the same instant — even with the breakers' jitter at 0.
//!
//! The offset is drawn when the news is applied, never on the request path:
//! the breaker's local OPEN path (one load, no hash) is untouched. It is a
//! pure function of the replica's name, the key and the news' epoch, so
//!
//! * it is deterministic (a simulation replays it, a test predicts it);
//! * replicas that apply the same news draw different offsets (their names
//!   differ), so they end the period at different instants;
//! * which replica probes first changes from key to key and from trip to
//!   trip (the key and the epoch are in the hash), so no one replica takes
//!   every first probe of the fleet.
//!
//! It is bounded: in `[0, min(remaining × fraction, cap))`. A fraction of
//! what is left, because the news alone tells the receiver how long the
//! period is; a cap, because a long period (a backoff of minutes) needs no
//! more than a few seconds between probes — news of a failed probe reaches
//! the other replicas in milliseconds and pushes their ends back. An offset
//! only ever shortens what the news says is left: it never extends a period.

use core::time::Duration;

/// The default fraction of what is left that the offset may take: 10 %.
pub const DEFAULT_PROBE_SPREAD: f64 = 0.1;
/// The default cap of the offset: 5 s.
pub const DEFAULT_PROBE_SPREAD_CAP: Duration = Duration::from_secs(5);
/// The largest fraction [`ReplicaBuilder::probe_spread`](super::ReplicaBuilder::probe_spread) accepts.
pub(crate) const MAX_FRACTION: f64 = 0.5;
/// The largest cap it accepts.
pub(crate) const MAX_CAP: Duration = Duration::from_secs(3_600);

/// A replica's probe spread, validated.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) struct Spread {
    fraction: f64,
    cap: Duration,
    /// FNV-1a of the replica's name.
    seed: u64,
}

impl Spread {
    /// The spread of the replica named `origin`; `None` if `fraction` is not
    /// in `0.0..=MAX_FRACTION` or `cap` above [`MAX_CAP`].
    pub(crate) fn new(origin: &str, fraction: f64, cap: Duration) -> Option<Spread> {
        let ok = (0.0..=MAX_FRACTION).contains(&fraction) && cap <= MAX_CAP;
        ok.then(|| Spread {
            fraction,
            cap,
            seed: fnv1a(origin.as_bytes()),
        })
    }

    /// `(fraction, cap)`.
    pub(crate) fn settings(&self) -> (f64, Duration) {
        (self.fraction, self.cap)
    }

    /// The widest offset for news with `remaining` left:
    /// `min(remaining × fraction, cap)`.
    pub(crate) fn range(&self, remaining: Duration) -> Duration {
        // fraction ≤ 0.5: the product is below `remaining`, never overflows.
        remaining.mul_f64(self.fraction).min(self.cap)
    }

    /// This replica's offset for `key`'s news of `epoch` with `remaining`
    /// left: in `[0, range(remaining))` (0 when the range is 0).
    pub(crate) fn offset(&self, key: &str, epoch: u64, remaining: Duration) -> Duration {
        let range = u64::try_from(self.range(remaining).as_nanos()).unwrap_or(u64::MAX);
        let draw = mix(self.seed ^ fnv1a(key.as_bytes()).rotate_left(32) ^ mix(epoch)) >> 32;
        // range · draw / 2³², draw < 2³²: strictly below the range.
        Duration::from_nanos(((u128::from(range) * u128::from(draw)) >> 32) as u64)
    }
}

/// FNV-1a, 64 bits: the same in every process and version.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The splitmix64 finaliser: every input bit moves every output bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread(origin: &str) -> Spread {
        Spread::new(origin, DEFAULT_PROBE_SPREAD, DEFAULT_PROBE_SPREAD_CAP).unwrap()
    }

    #[test]
    fn the_range_is_a_fraction_of_what_is_left_up_to_the_cap() {
        let s = spread("a");
        assert_eq!(s.range(Duration::from_secs(30)), Duration::from_secs(3));
        assert_eq!(s.range(Duration::from_secs(300)), Duration::from_secs(5));
        assert_eq!(s.range(Duration::ZERO), Duration::ZERO);
        let off = Spread::new("a", 0.0, Duration::from_secs(5)).unwrap();
        assert_eq!(off.offset("k", 1, Duration::from_secs(30)), Duration::ZERO);
        let capped_off = Spread::new("a", 0.5, Duration::ZERO).unwrap();
        assert_eq!(
            capped_off.offset("k", 1, Duration::from_secs(30)),
            Duration::ZERO
        );
    }

    #[test]
    fn offsets_stay_below_the_range_and_cover_it() {
        let left = Duration::from_secs(30);
        let mut low = Duration::MAX;
        let mut high = Duration::ZERO;
        for i in 0..1000 {
            let o = spread(&format!("replica-{i}")).offset("db:5432", 7, left);
            assert!(o < Duration::from_secs(3), "{o:?}");
            low = low.min(o);
            high = high.max(o);
        }
        assert!(low < Duration::from_millis(30) && high > Duration::from_millis(2_970));
    }

    #[test]
    fn the_offset_is_deterministic_and_depends_on_name_key_and_epoch() {
        let left = Duration::from_secs(30);
        let a = spread("a").offset("k", 1, left);
        assert_eq!(a, spread("a").offset("k", 1, left));
        assert_ne!(a, spread("b").offset("k", 1, left));
        assert_ne!(a, spread("a").offset("j", 1, left));
        assert_ne!(a, spread("a").offset("k", 2, left));
    }

    #[test]
    fn fnv_matches_the_published_vector() {
        // FNV-1a 64 of "a" (the same vector the Redis key space pins).
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn bad_settings_are_refused() {
        assert!(Spread::new("a", -0.1, Duration::ZERO).is_none());
        assert!(Spread::new("a", 0.51, Duration::ZERO).is_none());
        assert!(Spread::new("a", f64::NAN, Duration::ZERO).is_none());
        assert!(Spread::new("a", 0.1, MAX_CAP + Duration::from_nanos(1)).is_none());
        assert!(Spread::new("a", MAX_FRACTION, MAX_CAP).is_some());
    }
}
