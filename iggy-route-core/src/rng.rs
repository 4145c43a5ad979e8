//! A seeded pseudo-random source for backoff jitter and client ids.
//!
//! splitmix64: a few lines, no dependency, and the same sequence for the same seed, so a
//! run of the router (or of the simulation) is reproducible from its seed.

use std::time::Duration;

/// splitmix64 state.
#[derive(Debug, Clone)]
pub(crate) struct Rng {
    state: u64,
}

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A client id for a new session: random, never 0 (the server rejects 0, protocol §1.3).
    pub(crate) fn client_id(&mut self) -> u128 {
        loop {
            let id = (u128::from(self.next_u64()) << 64) | u128::from(self.next_u64());
            if id != 0 {
                return id;
            }
        }
    }

    /// "Equal jitter": half of `base` plus a random share of the other half, so a wait is
    /// never shorter than half its nominal length and clients that failed together spread out.
    pub(crate) fn jitter(&mut self, base: Duration) -> Duration {
        let nanos = u64::try_from(base.as_nanos()).unwrap_or(u64::MAX);
        let half = nanos / 2;
        let spread = if half == 0 {
            0
        } else {
            self.next_u64() % (half + 1)
        };
        Duration::from_nanos(half + spread)
    }
}

/// The nominal wait before retry number `attempt` (0-based): `initial`, doubling, capped at `max`.
pub(crate) fn backoff(initial: Duration, max: Duration, attempt: u32) -> Duration {
    let factor = 1u32.checked_shl(attempt.min(20)).unwrap_or(u32::MAX);
    initial.saturating_mul(factor).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_gives_the_same_sequence() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_ne!(Rng::new(7).next_u64(), Rng::new(8).next_u64());
    }

    #[test]
    fn jitter_stays_between_half_and_full() {
        let mut rng = Rng::new(1);
        let base = Duration::from_millis(100);
        for _ in 0..1000 {
            let j = rng.jitter(base);
            assert!(j >= base / 2 && j <= base, "{j:?}");
        }
        assert_eq!(rng.jitter(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn backoff_doubles_then_caps() {
        let initial = Duration::from_millis(5);
        let max = Duration::from_millis(320);
        let waits: Vec<_> = (0..10)
            .map(|a| backoff(initial, max, a).as_millis())
            .collect();
        assert_eq!(waits, vec![5, 10, 20, 40, 80, 160, 320, 320, 320, 320]);
        assert_eq!(backoff(initial, max, u32::MAX), max);
    }

    #[test]
    fn client_ids_are_never_zero() {
        let mut rng = Rng::new(0);
        for _ in 0..1000 {
            assert_ne!(rng.client_id(), 0);
        }
    }
}
