//! One egress port's buffer account: per queue, min → shared (to its limit). Owned by the
//! egress side. Lossy frames are refused here at the queue's limit; a lossless frame the
//! ingress side admitted never is (its PG must reach XOFF first).

use super::group::GroupTotals;
use super::{slot, Limit, QueueUse, SharedPool, SLOTS};
use crate::counters::DropReason;
use controlplane::{PortConfig, MAX_POOLS, NUM_TC};

#[derive(Debug, Clone, Copy)]
struct QueueLimits {
    min: u32,
    shared: Limit,
    /// Its egress pool's slot in the port's MMU slice (`mmu::slot`).
    pool: u8,
}

/// The queues of one egress port: limits and use, in cells and bytes.
#[derive(Debug, Clone)]
pub struct QueueAccount {
    limits: [QueueLimits; NUM_TC],
    queues: [QueueUse; NUM_TC],
    cells: u32,
    peak_cells: u32,
}

impl QueueAccount {
    pub(super) fn new(port: &PortConfig, cell: u32) -> Self {
        let cells = |bytes: u64| bytes.div_ceil(cell as u64).min(u32::MAX as u64) as u32;
        QueueAccount {
            limits: std::array::from_fn(|q| QueueLimits {
                min: cells(port.queues[q].min_bytes),
                shared: Limit::from_threshold(port.queues[q].shared, cell),
                pool: slot(port.queues[q].pool, port.slice),
            }),
            queues: Default::default(),
            cells: 0,
            peak_cells: 0,
        }
    }

    pub(super) fn reserved_cells(&self) -> u64 {
        self.limits.iter().map(|q| q.min as u64).sum()
    }

    /// Takes the limits of a new config's account for the same port; every count is kept.
    pub fn set_limits(&mut self, fresh: &QueueAccount) {
        self.limits = fresh.limits;
    }

    /// Charges a frame to `queue`, or refuses it (lossy only) at the queue's limit.
    #[inline]
    pub fn admit(
        &mut self,
        queue: usize,
        cells: u32,
        bytes: u32,
        lossless: bool,
        pool: &mut SharedPool,
    ) -> Result<(), DropReason> {
        let queue = queue & 7;
        let (ql, q) = (&self.limits[queue], &mut self.queues[queue]);
        let egress_free = pool.egress_free(ql.pool as usize);
        let to_min = q.min + cells <= ql.min;
        if !to_min && !lossless && (cells > egress_free || q.shared + cells > ql.shared.resolve(egress_free)) {
            return Err(DropReason::EgressLimit);
        }
        self.charge(queue, to_min, cells, bytes as u64, pool);
        Ok(())
    }

    /// Whether a group of frames `g` fits queue `queue`, admitted one by one in order, all in
    /// its reserved minimum (`Some(true)`) or all in the shared pool (`Some(false)`); None for
    /// anything else (two regions, a refusal), which the frame-by-frame path decides. Why the
    /// group's total decides for each frame: `mmu::group`.
    #[inline(always)]
    pub(super) fn group_fits(&self, queue: usize, g: &GroupTotals, lossless: bool, pool: &SharedPool) -> Option<bool> {
        let queue = queue & 7;
        let (ql, q) = (&self.limits[queue], &self.queues[queue]);
        if q.min + g.cells <= ql.min {
            return Some(true);
        }
        if q.min + g.min_cells <= ql.min {
            return None;
        }
        if lossless {
            return Some(false);
        }
        let free = pool.egress_free(ql.pool as usize);
        (g.cells <= free && q.shared + g.cells <= ql.shared.resolve(free - (g.cells - g.last_cells))).then_some(false)
    }

    /// Charges `cells` and `bytes` to `queue`, in its reserved minimum (`to_min`) or the
    /// shared pool, with the peaks: one admitted frame's, or a whole group's.
    #[inline(always)]
    pub(super) fn charge(&mut self, queue: usize, to_min: bool, cells: u32, bytes: u64, pool: &mut SharedPool) {
        let (ql, q) = (&self.limits[queue & 7], &mut self.queues[queue & 7]);
        let shared = if to_min { 0 } else { cells };
        pool.egress[ql.pool as usize & (SLOTS - 1)].charge(shared);
        pool.used += cells;
        pool.peak_used = pool.peak_used.max(pool.used);
        q.min += cells - shared;
        q.shared += shared;
        q.bytes += bytes;
        q.peak = q.peak.max(q.total());
        q.peak_bytes = q.peak_bytes.max(q.bytes);
        self.cells += cells;
        self.peak_cells = self.peak_cells.max(self.cells);
    }

    /// Releases a frame charged earlier, or several of one queue at once (the same counts as
    /// one by one): shared first, then min.
    #[inline]
    pub fn release(&mut self, queue: usize, cells: u32, bytes: u64, pool: &mut SharedPool) {
        let (ql, q) = (&self.limits[queue & 7], &mut self.queues[queue & 7]);
        let from_shared = cells.min(q.shared);
        q.shared -= from_shared;
        debug_assert!(cells - from_shared <= q.min, "released more than was admitted");
        q.min = q.min.saturating_sub(cells - from_shared);
        debug_assert!(bytes <= q.bytes, "released more bytes than queued");
        q.bytes = q.bytes.saturating_sub(bytes);
        debug_assert!(cells <= self.cells && cells <= pool.used, "released more than is held");
        self.cells = self.cells.saturating_sub(cells);
        pool.egress[ql.pool as usize & (SLOTS - 1)].shared -= from_shared;
        pool.used = pool.used.saturating_sub(cells);
    }

    /// What queue `q` (0..8) holds, with its peaks.
    pub fn queue(&self, q: usize) -> &QueueUse {
        &self.queues[q]
    }

    /// Cells held by frames that will leave through this port, and the peak.
    pub fn cells(&self) -> (u32, u32) {
        (self.cells, self.peak_cells)
    }

    /// Starts every peak again from the current use (a watermark clear).
    pub fn restart_peaks(&mut self) {
        for q in &mut self.queues {
            q.peak = q.total();
            q.peak_bytes = q.bytes;
        }
        self.peak_cells = self.cells;
    }

    /// Whether nothing is charged to this port (`Switch::buffers_empty` asks every account).
    pub fn is_empty(&self) -> bool {
        self.cells == 0 && self.queues.iter().all(|q| q.total() == 0 && q.bytes == 0)
    }

    /// Queues' shared cells summed per egress pool (for the pool audit).
    pub(super) fn shared_sums(&self) -> [u64; SLOTS] {
        let mut sums = [0u64; SLOTS];
        for (l, q) in self.limits.iter().zip(&self.queues) {
            sums[l.pool as usize & (SLOTS - 1)] += q.shared as u64;
        }
        sums
    }

    /// The egress pool queue `q` draws on.
    pub fn pool_of(&self, q: usize) -> usize {
        self.limits[q & 7].pool as usize % MAX_POOLS
    }

    /// The port's total against the sum over its queues: they differ once a release clamped a
    /// count at zero (`saturating_sub` above; debug builds panic at the release itself).
    pub(super) fn audit(&self) -> Option<String> {
        let sum: u64 = self.queues.iter().map(|q| q.min as u64 + q.shared as u64).sum();
        (sum != self.cells as u64).then(|| format!("port holds {} egress cells, its queues {sum}", self.cells))
    }
}
