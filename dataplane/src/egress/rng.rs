//! The pipeline's only source of randomness (WRED), seeded so that a replay with the same seed
//! gives the same marks. SplitMix64: tiny, fast, statistically fine for marking decisions, and
//! its whole state is one u64 that a test can reason about.

/// A seeded SplitMix64 generator: one per egress port, for WRED's draws.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A stream that starts from `seed` as it is (per-port streams come from [`Rng::for_port`]).
    pub fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// The stream of egress port index `port` under the switch's `seed`: distinct per port
    /// (SplitMix's own output function mixes the index in), the same whatever worker runs it.
    pub fn for_port(seed: u64, port: usize) -> Self {
        let mut mix = Rng::new(seed ^ (port as u64).wrapping_mul(0xd1b5_4a32_d192_ed03));
        Rng::new(mix.next_u64())
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The high 32 bits of the next draw, for comparing with a Q32 probability.
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let a: Vec<u64> = (0..8).scan(Rng::new(7), |r, _| Some(r.next_u64())).collect();
        let b: Vec<u64> = (0..8).scan(Rng::new(7), |r, _| Some(r.next_u64())).collect();
        let c: Vec<u64> = (0..8).scan(Rng::new(8), |r, _| Some(r.next_u64())).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn roughly_uniform() {
        let mut r = Rng::new(1);
        let n = 100_000;
        let below_quarter = (0..n).filter(|_| r.next_u32() < u32::MAX / 4).count();
        let frac = below_quarter as f64 / n as f64;
        assert!((frac - 0.25).abs() < 0.01, "{frac}");
    }
}
