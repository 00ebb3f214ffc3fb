//! Egress scheduling per port: strict priority first (the higher queue index wins, as in
//! SONiC), then weighted deficit round robin over the remaining queues by byte weights.
//!
//! The caller decides eligibility (non-empty, not paused by PFC, shaper conforming) and passes
//! it as a bit mask, so the scheduler knows nothing of queues' contents or of time (the
//! interface every kind shares is [`super::Scheduler`]).

use controlplane::{SchedMode, NUM_TC};

/// Strict priority over the strict queues (the highest index first), then WDRR over the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpWdrr {
    strict: u8,
    quantum: [u32; NUM_TC],
    deficit: [u32; NUM_TC],
    cur: usize,
    /// Whether `cur` has yet to receive its quantum for this visit.
    fresh: bool,
    /// The WDRR queues that were backlogged at the previous call.
    backlogged: u8,
}

impl SpWdrr {
    /// `base_quantum` × a queue's weight is its quantum. A quantum below the largest frame is
    /// exact (a queue short of its head frame carries its deficit to the next rounds, and
    /// rounds where no queue can send are played at once); one at least the largest frame
    /// lets every backlogged queue send a frame a visit.
    pub fn new(modes: &[SchedMode; NUM_TC], base_quantum: u32) -> Self {
        let mut strict = 0u8;
        let mut quantum = [0u32; NUM_TC];
        for (q, m) in modes.iter().enumerate() {
            match m {
                SchedMode::Strict => strict |= 1 << q,
                SchedMode::Wdrr { weight } => quantum[q] = base_quantum.saturating_mul((*weight).max(1)),
            }
        }
        SpWdrr {
            strict,
            quantum,
            deficit: [0; NUM_TC],
            cur: 0,
            fresh: true,
            backlogged: 0,
        }
    }

    /// Takes new modes and weights. Where every queue keeps its mode (strict or WDRR) the round
    /// goes on where it was: deficits (clamped to the new quanta) and the queue being served
    /// are kept, so a live change, even of nothing, does not restart the round and favour the
    /// first queue. A change of modes starts a fresh round.
    pub fn retune(&mut self, modes: &[SchedMode; NUM_TC], base_quantum: u32) {
        let fresh = SpWdrr::new(modes, base_quantum);
        if fresh.strict != self.strict {
            *self = fresh;
            return;
        }
        self.quantum = fresh.quantum;
        for q in 0..NUM_TC {
            self.deficit[q] = self.deficit[q].min(self.quantum[q]);
        }
    }

    /// The strict queues (bit mask).
    #[inline]
    pub fn strict_mask(&self) -> u8 {
        self.strict
    }

    /// Picks the queue to send from next, or None if nothing is eligible. A WDRR queue is
    /// charged `head_len(q)` bytes when picked.
    #[inline]
    pub fn select(&mut self, eligible: u8, head_len: impl Fn(usize) -> u32) -> Option<usize> {
        let strict = eligible & self.strict;
        if strict != 0 {
            return Some(7 - strict.leading_zeros() as usize);
        }
        let wdrr = eligible & !self.strict;
        // Queues that stopped being backlogged lose their deficit (classic DRR).
        let mut idle = self.backlogged & !wdrr;
        self.backlogged = wdrr;
        while idle != 0 {
            self.deficit[idle.trailing_zeros() as usize] = 0;
            idle &= idle - 1;
        }
        if wdrr == 0 {
            return None;
        }
        // Each eligible queue gains a quantum at least as large as any frame per visit, so two
        // passes over the eight queues always find one. The pass goes from one eligible queue
        // straight to the next (a queue passed over only loses its visit), counting the queues
        // it passes: with one queue backlogged and frames over half its quantum, stepping
        // through the other seven one by one cost about 130 instructions a frame at 1 KiB
        // (`bench/instructions.sh`).
        let mut visits = 2 * NUM_TC + 1;
        loop {
            let q = self.cur;
            if wdrr & (1 << q) != 0 {
                if self.fresh {
                    self.deficit[q] = self.deficit[q].saturating_add(self.quantum[q]);
                    self.fresh = false;
                }
                let len = head_len(q);
                if len <= self.deficit[q] {
                    self.deficit[q] -= len;
                    return Some(q);
                }
            }
            // The next eligible queue after `q`, round the eight: 1 to 8 visits on.
            let ahead = (wdrr as u32 | (wdrr as u32) << NUM_TC) >> (q + 1);
            let step = ahead.trailing_zeros() as usize + 1;
            self.fresh = true;
            if step >= visits {
                self.cur = (q + visits) % NUM_TC;
                break;
            }
            visits -= step;
            self.cur = (q + step) % NUM_TC;
        }
        self.play_rounds(wdrr, head_len)
    }

    /// Every eligible queue is short of its head frame (quanta below the largest frame: a
    /// weight of 1 beside weights of 14): the rounds until the nearest can send, at once, as
    /// DRR would have played them one by one; then a pass from the current queue finds it.
    fn play_rounds(&mut self, wdrr: u8, head_len: impl Fn(usize) -> u32) -> Option<usize> {
        let mut rounds = u32::MAX;
        let mut rest = wdrr;
        while rest != 0 {
            let q = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            let short = head_len(q).saturating_sub(self.deficit[q]);
            rounds = rounds.min(short.div_ceil(self.quantum[q].max(1)));
        }
        let mut rest = wdrr;
        while rest != 0 {
            let q = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            self.deficit[q] = self.deficit[q].saturating_add(self.quantum[q].saturating_mul(rounds));
        }
        for _ in 0..NUM_TC {
            let q = self.cur;
            if wdrr & (1 << q) != 0 {
                let len = head_len(q);
                if len <= self.deficit[q] {
                    self.deficit[q] -= len;
                    self.fresh = false;
                    return Some(q);
                }
            }
            self.cur = (q + 1) % NUM_TC;
        }
        // Unreachable: the rounds above give some eligible queue its head frame's bytes.
        Some(wdrr.trailing_zeros() as usize)
    }

    /// Whether [`SpWdrr::select`] would pick `q` again, given that it just picked `q` and
    /// no queue has changed eligibility since (the caller's promise); charges it like `select`
    /// when so. Lets a port send a run of frames from one queue with one full selection.
    #[inline(always)]
    pub fn select_again(&mut self, q: usize, head_len: u32) -> bool {
        let q = q & 7;
        if self.strict & (1 << q) != 0 {
            return true;
        }
        if self.cur != q || self.fresh {
            return false;
        }
        if head_len <= self.deficit[q] {
            self.deficit[q] -= head_len;
            return true;
        }
        // The one WDRR queue backlogged (and no strict one eligible, or `select` would not have
        // picked `q`): `select` would pass the seven others and come back to `q` with a fresh
        // quantum. Frames over half the quantum take this way every other frame or more.
        if self.backlogged == 1 << q {
            let deficit = self.deficit[q].saturating_add(self.quantum[q]);
            if head_len <= deficit {
                self.deficit[q] = deficit - head_len;
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modes(strict: &[usize], weights: &[(usize, u32)]) -> [SchedMode; NUM_TC] {
        let mut m = [SchedMode::Wdrr { weight: 1 }; NUM_TC];
        for &q in strict {
            m[q] = SchedMode::Strict;
        }
        for &(q, w) in weights {
            m[q] = SchedMode::Wdrr { weight: w };
        }
        m
    }

    #[test]
    fn strict_beats_wdrr_and_higher_strict_wins() {
        let mut s = SpWdrr::new(&modes(&[6, 7], &[]), 1500);
        assert_eq!(s.select(0b1100_0001, |_| 100), Some(7));
        assert_eq!(s.select(0b0100_0001, |_| 100), Some(6));
        assert_eq!(s.select(0b0000_0001, |_| 100), Some(0));
        assert_eq!(s.select(0, |_| 100), None);
    }

    /// Weights 3:1 give a 3:1 byte share within 1 %, with unequal frame sizes.
    #[test]
    fn wdrr_byte_share_follows_weights() {
        let mut s = SpWdrr::new(&modes(&[], &[(0, 1), (3, 3)]), 1518);
        let len = |q: usize| if q == 3 { 1024 } else { 1500 };
        let mut bytes = [0u64; NUM_TC];
        for _ in 0..100_000 {
            let q = s.select(0b0000_1001, len).unwrap();
            bytes[q] += len(q) as u64;
        }
        let ratio = bytes[3] as f64 / bytes[0] as f64;
        assert!((ratio - 3.0).abs() / 3.0 < 0.01, "ratio {ratio}");
    }

    /// Quanta below the frame size (SONiC's weights 14, 15 and a queue of weight 1 at a base
    /// of 608 B, 1500 B frames) keep the byte shares exact, and a visit sends a few frames,
    /// not dozens.
    #[test]
    fn quanta_below_the_frame_size_keep_the_shares() {
        let mut s = SpWdrr::new(&modes(&[], &[(0, 14), (3, 15), (7, 1)]), 608);
        let mut bytes = [0u64; NUM_TC];
        let (mut run, mut longest, mut last) = (0, 0, 99);
        for _ in 0..300_000 {
            let q = s.select(0b1000_1001, |_| 1500).unwrap();
            bytes[q] += 1500;
            run = if q == last { run + 1 } else { 1 };
            longest = longest.max(run);
            last = q;
        }
        let share = |q: usize| bytes[q] as f64 / bytes[0] as f64;
        assert!((share(3) - 15.0 / 14.0).abs() < 0.01, "{bytes:?}");
        assert!((share(7) - 1.0 / 14.0).abs() < 0.01, "{bytes:?}");
        assert!(longest <= 7, "a visit sent {longest} frames");
    }

    /// `select` as it was written first, one queue position a visit: what the pass that skips
    /// ineligible queues must equal, decision and state.
    fn select_one_by_one(s: &mut SpWdrr, eligible: u8, head_len: impl Fn(usize) -> u32) -> Option<usize> {
        let strict = eligible & s.strict;
        if strict != 0 {
            return Some(7 - strict.leading_zeros() as usize);
        }
        let wdrr = eligible & !s.strict;
        let mut idle = s.backlogged & !wdrr;
        s.backlogged = wdrr;
        while idle != 0 {
            s.deficit[idle.trailing_zeros() as usize] = 0;
            idle &= idle - 1;
        }
        if wdrr == 0 {
            return None;
        }
        for _ in 0..2 * NUM_TC + 1 {
            let q = s.cur;
            if wdrr & (1 << q) != 0 {
                if s.fresh {
                    s.deficit[q] = s.deficit[q].saturating_add(s.quantum[q]);
                    s.fresh = false;
                }
                let len = head_len(q);
                if len <= s.deficit[q] {
                    s.deficit[q] -= len;
                    return Some(q);
                }
            }
            s.cur = (s.cur + 1) % NUM_TC;
            s.fresh = true;
        }
        s.play_rounds(wdrr, head_len)
    }

    proptest::proptest! {
        /// Any modes, quanta (frames over the quantum included, which play rounds at once) and
        /// sequence of eligible sets and head lengths: the same picks and the same state.
        #[test]
        fn select_skipping_ineligible_queues_equals_one_by_one(
            strict in 0u8..=255,
            weights in proptest::collection::vec(1u32..4, NUM_TC),
            quantum in 64u32..3000,
            steps in proptest::collection::vec((0u8..=255, proptest::collection::vec(64u32..9000, NUM_TC)), 1..200),
        ) {
            let m = std::array::from_fn(|q| if strict & (1 << q) != 0 {
                SchedMode::Strict
            } else {
                SchedMode::Wdrr { weight: weights[q] }
            });
            let mut fast = SpWdrr::new(&m, quantum);
            let mut reference = fast.clone();
            for (eligible, lens) in steps {
                let picked = fast.select(eligible, |q| lens[q]);
                proptest::prop_assert_eq!(picked, select_one_by_one(&mut reference, eligible, |q| lens[q]));
                proptest::prop_assert_eq!(&fast, &reference);
            }
        }
    }

    #[test]
    fn ineligible_queue_is_skipped_and_loses_its_deficit() {
        let mut s = SpWdrr::new(&modes(&[], &[(0, 1), (1, 1)]), 1500);
        for _ in 0..10 {
            assert_eq!(s.select(0b10, |_| 1000), Some(1));
        }
        assert_eq!(s.deficit[0], 0);
    }
}
