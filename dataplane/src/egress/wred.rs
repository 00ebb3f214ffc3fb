//! WRED-ECN per egress queue (SAI `saiwred.h`, SONiC WRED_PROFILE, HPCC `ShouldSendCN`):
//! p = Pmax·(q − Kmin)/(Kmax − Kmin) between the thresholds, 1 above Kmax, 0 below Kmin.
//! Probabilities are compared as 32-bit fixed point against the seeded RNG, so a replay takes
//! the same decisions on every machine.

use crate::egress::rng::Rng;
use controlplane::{EcnProfile, MarkPoint, NonEct};

/// What WRED decided for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Leave the frame as it is.
    Pass,
    /// ECN-capable: set CE.
    Mark,
    /// Not ECN-capable and the profile drops those.
    Drop,
}

/// One queue's WRED-ECN state, from its ECN profile.
#[derive(Debug, Clone)]
pub struct Wred {
    kmin: u64,
    kmax: u64,
    /// Pmax × 2^32.
    pmax_q32: u64,
    ewma_shift: Option<u8>,
    /// Whether frames are judged as they enter the queue or as they leave it.
    pub mark_at: MarkPoint,
    non_ect: NonEct,
    /// Average queue length in bytes × 2^16 (EWMA mode only).
    avg_q16: u64,
}

impl Wred {
    /// The state for `p`, with an empty average.
    pub fn new(p: &EcnProfile) -> Self {
        Wred {
            kmin: p.kmin_bytes,
            kmax: p.kmax_bytes.max(p.kmin_bytes),
            pmax_q32: (p.pmax.clamp(0.0, 1.0) * 4_294_967_296.0).round() as u64,
            ewma_shift: p.ewma_shift,
            mark_at: p.mark_at,
            non_ect: p.non_ect,
            avg_q16: 0,
        }
    }

    /// Takes a new profile keeping the average queue length (when it still averages), so a
    /// live change does not forget the congestion history and mark as if the queue were empty.
    pub fn retune(&mut self, p: &EcnProfile) {
        let avg_q16 = if p.ewma_shift.is_some() { self.avg_q16 } else { 0 };
        *self = Wred {
            avg_q16,
            ..Wred::new(p)
        };
    }

    /// Marking probability × 2^32 at queue length `q` bytes (the configured curve).
    #[inline]
    pub fn probability_q32(&self, q: u64) -> u64 {
        if q < self.kmin {
            0
        } else if q >= self.kmax {
            if q == self.kmin {
                self.pmax_q32
            } else {
                1 << 32
            }
        } else {
            ((self.pmax_q32 as u128 * (q - self.kmin) as u128) / (self.kmax - self.kmin) as u128) as u64
        }
    }

    /// Whether every frame judged at a queue length of at most `queue_bytes` passes, leaving
    /// no trace: no averaging (whose state each decision moves) and the length below Kmin
    /// (probability 0: no random draw). A batch that holds for skips WRED for all its frames.
    #[inline]
    pub fn passes_all_below(&self, queue_bytes: u64) -> bool {
        self.ewma_shift.is_none() && queue_bytes < self.kmin
    }

    /// Decides for one packet given the queue's instantaneous length in bytes.
    #[inline]
    pub fn decide(&mut self, queue_bytes: u64, ect: bool, rng: &mut Rng) -> Verdict {
        let q = match self.ewma_shift {
            None => queue_bytes,
            Some(shift) => {
                let sample = queue_bytes << 16;
                if sample >= self.avg_q16 {
                    self.avg_q16 += (sample - self.avg_q16) >> shift;
                } else {
                    self.avg_q16 -= (self.avg_q16 - sample) >> shift;
                }
                self.avg_q16 >> 16
            }
        };
        let p = self.probability_q32(q);
        if p == 0 {
            return Verdict::Pass;
        }
        let hit = p >= (1 << 32) || (rng.next_u32() as u64) < p;
        match (hit, ect, self.non_ect) {
            (false, _, _) => Verdict::Pass,
            (true, true, _) => Verdict::Mark,
            (true, false, NonEct::Drop) => Verdict::Drop,
            (true, false, NonEct::Pass) => Verdict::Pass,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(kmin: u64, kmax: u64, pmax: f64) -> EcnProfile {
        EcnProfile {
            name: "t".into(),
            kmin_bytes: kmin,
            kmax_bytes: kmax,
            pmax,
            ewma_shift: None,
            mark_at: MarkPoint::Dequeue,
            non_ect: NonEct::Pass,
        }
    }

    /// What `passes_all_below` promises a batch: at any depth up to the one it held for, every
    /// frame passes and the random stream is where it was; never with averaging, never at Kmin.
    #[test]
    fn passing_all_below_kmin_draws_nothing() {
        let mut w = Wred::new(&profile(10_000, 40_000, 1.0));
        assert!(w.passes_all_below(9_999));
        assert!(!w.passes_all_below(10_000));
        let (mut rng, fresh) = (Rng::new(7), Rng::new(7));
        for depth in (0..10_000).step_by(97) {
            for ect in [false, true] {
                assert_eq!(w.decide(depth, ect, &mut rng), Verdict::Pass);
            }
        }
        assert_eq!(rng.next_u32(), fresh.clone().next_u32(), "a random draw was taken");
        let averaged = Wred::new(&EcnProfile {
            ewma_shift: Some(2),
            ..profile(10_000, 40_000, 1.0)
        });
        assert!(!averaged.passes_all_below(0));
    }

    /// The marking fraction at a held queue depth follows the configured curve within 2 points.
    #[test]
    fn marking_fraction_follows_the_curve() {
        let mut w = Wred::new(&profile(100_000, 400_000, 0.2));
        let mut rng = Rng::new(42);
        for depth in [50_000u64, 100_000, 175_000, 250_000, 325_000, 399_999, 400_000, 600_000] {
            let expected = if depth < 100_000 {
                0.0
            } else if depth >= 400_000 {
                1.0
            } else {
                0.2 * (depth - 100_000) as f64 / 300_000.0
            };
            let n = 50_000;
            let marked = (0..n)
                .filter(|_| w.decide(depth, true, &mut rng) == Verdict::Mark)
                .count();
            let frac = marked as f64 / n as f64;
            assert!(
                (frac - expected).abs() < 0.02,
                "depth {depth}: marked {frac:.4}, curve {expected:.4}"
            );
        }
    }

    #[test]
    fn non_ect_passes_or_drops_by_profile() {
        let mut rng = Rng::new(1);
        let mut pass = Wred::new(&profile(0, 1, 1.0));
        assert_eq!(pass.decide(10, false, &mut rng), Verdict::Pass);
        let mut p = profile(0, 1, 1.0);
        p.non_ect = NonEct::Drop;
        let mut drop = Wred::new(&p);
        assert_eq!(drop.decide(10, false, &mut rng), Verdict::Drop);
        assert_eq!(drop.decide(10, true, &mut rng), Verdict::Mark);
    }

    #[test]
    fn ewma_lags_the_instantaneous_queue() {
        let mut p = profile(100_000, 200_000, 1.0);
        p.ewma_shift = Some(4);
        let mut w = Wred::new(&p);
        let mut rng = Rng::new(3);
        // A sudden jump to 300 KB is not marked at once: the average is still near zero.
        assert_eq!(w.decide(300_000, true, &mut rng), Verdict::Pass);
        // Held long enough, the average converges and everything is marked.
        for _ in 0..200 {
            w.decide(300_000, true, &mut rng);
        }
        assert_eq!(w.decide(300_000, true, &mut rng), Verdict::Mark);
    }
}
