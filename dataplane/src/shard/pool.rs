//! The shared pool's occupancy across shards.
//!
//! Each shard keeps its own [`crate::mmu::SharedPool`], whose two views (ingress, egress) sum
//! the shared cells of the PGs and queues it owns. A dynamic threshold needs the whole switch's
//! figure: once a round each shard publishes its two sums here (relaxed stores to its own cache
//! line) and reads the others' (relaxed loads), which the pool adds to its own. So a threshold
//! sees the other shards as they were at their last publication: stale by at most what they
//! admitted since, which is at most one round of theirs: per other shard, its ports × one
//! receive burst (32 frames) × the cells of the largest frame, plus what its emulated links
//! release in one catch-up step. ARCHITECTURE.md, "Shards", gives the figure for the default
//! config. XOFF and XON stay exact: a PG's own use is counted by its one owner.

use crate::mmu::PoolFigures;
use crate::mmu::SLOTS;
use std::sync::atomic::{AtomicU32, Ordering};

/// One shard's figures: every pool's use on each side, on a cache line of its own.
#[repr(align(64))]
#[derive(Default)]
struct Published {
    ingress: [AtomicU32; SLOTS],
    egress: [AtomicU32; SLOTS],
    headroom: [AtomicU32; SLOTS],
}

/// Every shard's published pool use.
pub struct PoolShare {
    shards: Box<[Published]>,
}

impl PoolShare {
    /// Room for `shards` shards' figures, all zero.
    pub fn new(shards: usize) -> Self {
        PoolShare {
            shards: (0..shards).map(|_| Published::default()).collect(),
        }
    }

    /// Publishes shard `me`'s use of the first `slots` slots (the pools of every MMU slice in
    /// use) and returns the others', summed per slot.
    #[inline]
    pub fn exchange(&self, me: usize, mine: &PoolFigures, slots: usize) -> PoolFigures {
        let own = &self.shards[me];
        let slots = slots.min(SLOTS);
        for i in 0..slots {
            own.ingress[i].store(mine.ingress[i], Ordering::Relaxed);
            own.egress[i].store(mine.egress[i], Ordering::Relaxed);
            own.headroom[i].store(mine.headroom[i], Ordering::Relaxed);
        }
        let mut sum = PoolFigures::default();
        for (s, p) in self.shards.iter().enumerate() {
            if s != me {
                for i in 0..slots {
                    sum.ingress[i] = sum.ingress[i].saturating_add(p.ingress[i].load(Ordering::Relaxed));
                    sum.egress[i] = sum.egress[i].saturating_add(p.egress[i].load(Ordering::Relaxed));
                    sum.headroom[i] = sum.headroom[i].saturating_add(p.headroom[i].load(Ordering::Relaxed));
                }
            }
        }
        sum
    }
}
