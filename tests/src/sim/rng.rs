//! The simulation's own seeded randomness: splitmix64, so a seed names one run exactly.
//!
//! Every random choice of a run (latencies, faults, workload, router seeds) comes from one
//! of these, each derived from the run seed, so that adding draws in one component does not
//! shift the choices of another.

use std::time::Duration;

/// splitmix64 state.
#[derive(Debug, Clone)]
pub struct SimRng {
    state: u64,
}

impl SimRng {
    /// A source for `seed`, mixed with `stream` so components get independent sequences.
    pub fn new(seed: u64, stream: u64) -> Self {
        let mut rng = Self {
            state: seed ^ stream.wrapping_mul(0xA24B_AED4_963E_E407),
        };
        // Discard one draw so that nearby seeds do not start from nearby states.
        rng.next_u64();
        rng
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `low..=high` (`low` when the range is empty).
    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        if high <= low {
            return low;
        }
        low + self.next_u64() % (high - low + 1)
    }

    /// An index below `len` (0 when `len` is 0).
    pub fn index(&mut self, len: usize) -> usize {
        if len == 0 {
            return 0;
        }
        (self.next_u64() % len as u64) as usize
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }

    /// A duration in `low..=high`, to the microsecond.
    pub fn duration(&mut self, low: Duration, high: Duration) -> Duration {
        let (low, high) = (low.as_micros() as u64, high.as_micros() as u64);
        Duration::from_micros(self.range(low, high))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_and_stream_give_the_same_draws() {
        let mut a = SimRng::new(3, 1);
        let mut b = SimRng::new(3, 1);
        let mut c = SimRng::new(3, 2);
        let (x, y, z) = (a.next_u64(), b.next_u64(), c.next_u64());
        assert_eq!(x, y);
        assert_ne!(x, z);
    }

    #[test]
    fn ranges_stay_inside_their_bounds() {
        let mut rng = SimRng::new(0, 0);
        for _ in 0..1000 {
            assert!((5..=9).contains(&rng.range(5, 9)));
            assert!(rng.index(3) < 3);
        }
        assert_eq!(rng.range(4, 4), 4);
        assert_eq!(rng.index(0), 0);
    }
}
