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

use std::sync::atomic::{AtomicU32, Ordering};

#[repr(align(64))]
#[derive(Default)]
struct Published {
    ingress_shared: AtomicU32,
    egress_shared: AtomicU32,
}

/// Every shard's published shared-pool use.
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

    /// Publishes shard `me`'s use and returns the others' (ingress, egress) sums.
    #[inline]
    pub fn exchange(&self, me: usize, ingress_shared: u32, egress_shared: u32) -> (u32, u32) {
        let mine = &self.shards[me];
        mine.ingress_shared.store(ingress_shared, Ordering::Relaxed);
        mine.egress_shared.store(egress_shared, Ordering::Relaxed);
        let (mut i, mut e) = (0u32, 0u32);
        for (s, p) in self.shards.iter().enumerate() {
            if s != me {
                i = i.saturating_add(p.ingress_shared.load(Ordering::Relaxed));
                e = e.saturating_add(p.egress_shared.load(Ordering::Relaxed));
            }
        }
        (i, e)
    }
}
