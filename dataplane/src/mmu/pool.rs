//! The shared buffer pools: their sizes, fixed when the switch starts, and their occupancy as
//! each side sees it.
//!
//! A switch has one pool per direction unless the config names several (`[buffer.pool.NAME]`,
//! SONiC's BUFFER_POOL: ingress lossless and lossy, egress lossless and lossy). Each PG draws
//! on one ingress pool and each queue on one egress pool, and a dynamic limit scales with the
//! free space of its own pool only. An ingress pool may carry a shared headroom pool (SONiC's
//! pool `xoff`, SAI's XOFF_SIZE): its lossless PGs take their headroom from it, each up to its
//! own limit, instead of each having headroom reserved.

use super::SLOTS;
use controlplane::model::{PoolDir, MAX_POOLS};

/// One side's view of one pool's occupancy, written only by that side.
#[derive(Debug, Clone, Copy, Default)]
pub struct PoolSide {
    /// Sum of this side's use of the pool over all ports.
    pub shared: u32,
    /// Highest `shared` since the peaks were last restarted.
    pub peak_shared: u32,
}

impl PoolSide {
    #[inline]
    pub(super) fn charge(&mut self, cells: u32) {
        self.shared += cells;
        self.peak_shared = self.peak_shared.max(self.shared);
    }
}

/// Bytes to cells without a division per frame: `ceil(len / cell)` as a multiply and a shift
/// by a reciprocal, exact for every cell size the config takes (64..=4096 B, not only powers
/// of two: Spectrum's 96 B, Tomahawk 2's 208 B) and every length below 2^20 bytes.
#[derive(Debug, Clone, Copy)]
struct CellDiv {
    bytes: u32,
    recip: u64,
}

/// Shift of [`CellDiv`]'s reciprocal: with a divisor of at most 2^12 and a dividend below
/// 2^20, the reciprocal's error (below one divisor in 2^40) never reaches the next integer.
const RECIP_SHIFT: u32 = 40;

impl CellDiv {
    fn new(bytes: u32) -> Self {
        let bytes = bytes.max(1);
        CellDiv {
            bytes,
            recip: (1u64 << RECIP_SHIFT).div_ceil(u64::from(bytes)),
        }
    }

    #[inline(always)]
    fn cells(self, len: usize) -> u32 {
        let n = len as u64 + u64::from(self.bytes) - 1;
        debug_assert!(n < 1 << 20, "a frame of {len} bytes");
        ((n * self.recip) >> RECIP_SHIFT) as u32
    }
}

/// The size of every pool, in cells, per slot (a pool in one MMU slice, `mmu::slot`): the
/// switch's build step works them out from the config.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolSizes {
    /// Shared cells of each ingress pool.
    pub ingress: [u32; SLOTS],
    /// Shared cells of each egress pool.
    pub egress: [u32; SLOTS],
    /// Cells of each ingress pool's shared headroom pool (0: none).
    pub headroom: [u32; SLOTS],
}

/// What the other shards hold of every pool, as last published (`crate::shard::PoolShare`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolFigures {
    /// Ingress shared use per pool.
    pub ingress: [u32; SLOTS],
    /// Egress shared use per pool.
    pub egress: [u32; SLOTS],
    /// Shared headroom pool use per ingress pool.
    pub headroom: [u32; SLOTS],
}

/// The pools both sides read. Dynamic limits are `alpha × (pool cells − this side's use of the
/// pool)`, so the ingress side reads only `ingress`, the egress side only `egress`.
#[derive(Debug, Clone)]
pub struct SharedPool {
    cell: CellDiv,
    pub(super) total_cells: u32,
    pub(super) sizes: PoolSizes,
    /// Pools per direction (1 without configured pools).
    pub(super) count: [usize; 2],
    /// MMU slices (1 but on platforms with XPEs): pool `i`'s slots are `i + MAX_POOLS × s`.
    pub(super) slices: usize,
    /// The ingress view: every PG's shared use, per pool.
    pub ingress: [PoolSide; SLOTS],
    /// The egress view: every queue's shared use, per pool.
    pub egress: [PoolSide; SLOTS],
    /// Lossless PGs' headroom taken from each ingress pool's shared headroom pool.
    pub headroom: [PoolSide; SLOTS],
    /// Cells held by frames in the switch, each frame once (charged with its egress queue).
    pub(super) used: u32,
    pub(super) peak_used: u32,
    /// The cells each side may fill, per pool: the pool less the other shards' use as last
    /// published (`crate::shard::PoolShare`); the pool itself with one shard, so a lone switch
    /// computes exactly as it always has, and the packet path subtracts once.
    ingress_avail: [u32; SLOTS],
    egress_avail: [u32; SLOTS],
    headroom_avail: [u32; SLOTS],
    others: PoolFigures,
}

impl SharedPool {
    pub(super) fn new(total_bytes: u64, cell: u32, sizes: PoolSizes, count: [usize; 2], slices: usize) -> Self {
        let total_cells = total_bytes.div_ceil(cell.max(1) as u64).min(u32::MAX as u64) as u32;
        SharedPool {
            cell: CellDiv::new(cell),
            total_cells,
            sizes,
            count,
            slices: slices.clamp(1, SLOTS / MAX_POOLS),
            ingress_avail: sizes.ingress,
            egress_avail: sizes.egress,
            headroom_avail: sizes.headroom,
            ingress: Default::default(),
            egress: Default::default(),
            headroom: Default::default(),
            used: 0,
            peak_used: 0,
            others: PoolFigures::default(),
        }
    }

    /// This shard's use of every pool, to publish.
    #[inline]
    pub fn figures(&self) -> PoolFigures {
        PoolFigures {
            ingress: self.ingress.map(|s| s.shared),
            egress: self.egress.map(|s| s.shared),
            headroom: self.headroom.map(|s| s.shared),
        }
    }

    /// Takes the other shards' latest figures (once a round, `Switch::exchange_pool`).
    #[inline]
    pub fn set_others(&mut self, others: PoolFigures) {
        self.others = others;
        for i in 0..SLOTS {
            self.ingress_avail[i] = self.sizes.ingress[i].saturating_sub(others.ingress[i]);
            self.egress_avail[i] = self.sizes.egress[i].saturating_sub(others.egress[i]);
            self.headroom_avail[i] = self.sizes.headroom[i].saturating_sub(others.headroom[i]);
        }
    }

    /// Takes the sizes of a new config's pools (same buffer, new reserves); occupancy is kept.
    pub fn resize(&mut self, fresh: &SharedPool) {
        self.sizes = fresh.sizes;
        self.count = fresh.count;
        self.slices = fresh.slices;
        self.set_others(self.others);
    }

    /// Cells a frame of `len` bytes takes (rounded up).
    #[inline]
    pub fn cells_for(&self, len: usize) -> u32 {
        self.cell.cells(len)
    }

    /// Bytes per cell.
    pub fn cell_bytes(&self) -> u32 {
        self.cell.bytes
    }

    /// Cells the whole switch can hold: bounds how many frames can be queued at once.
    pub fn total_cells(&self) -> u32 {
        self.total_cells
    }

    /// Cells ingress pool `p` has left for the ingress side: what its dynamic limits scale
    /// with.
    #[inline]
    pub fn ingress_free(&self, p: usize) -> u32 {
        let p = p & (SLOTS - 1);
        self.ingress_avail[p].saturating_sub(self.ingress[p].shared)
    }

    /// Cells egress pool `p` has left for the egress side.
    #[inline]
    pub fn egress_free(&self, p: usize) -> u32 {
        let p = p & (SLOTS - 1);
        self.egress_avail[p].saturating_sub(self.egress[p].shared)
    }

    /// Cells ingress pool `p`'s shared headroom pool has left.
    #[inline]
    pub fn headroom_free(&self, p: usize) -> u32 {
        let p = p & (SLOTS - 1);
        self.headroom_avail[p].saturating_sub(self.headroom[p].shared)
    }

    /// Whether ingress slot `p` has a shared headroom pool.
    #[inline]
    pub fn has_headroom_pool(&self, p: usize) -> bool {
        self.sizes.headroom[p & (SLOTS - 1)] > 0
    }

    /// Starts every peak again from the current use (a watermark clear).
    pub fn restart_peaks(&mut self) {
        self.peak_used = self.used;
        for s in self
            .ingress
            .iter_mut()
            .chain(&mut self.egress)
            .chain(&mut self.headroom)
        {
            s.peak_shared = s.shared;
        }
    }

    /// Pool `i` of direction `dir`, in cells: (size, use, peak use), and for an ingress pool
    /// its shared headroom pool's (size, use, peak); summed over the MMU's slices (the peak
    /// then bounds the pool's peak from above: the slices' peaks need not coincide; exact
    /// with one slice, or with one slice in use, as in each of conform's tests).
    pub fn pool(&self, dir: PoolDir, i: usize) -> ([u32; 3], [u32; 3]) {
        let i = i & (MAX_POOLS - 1);
        let sum = |sizes: &[u32; SLOTS], sides: &[PoolSide; SLOTS]| {
            (0..self.slices).map(|s| i + MAX_POOLS * s).fold([0u32; 3], |a, k| {
                [a[0] + sizes[k], a[1] + sides[k].shared, a[2] + sides[k].peak_shared]
            })
        };
        match dir {
            PoolDir::Ingress => (
                sum(&self.sizes.ingress, &self.ingress),
                sum(&self.sizes.headroom, &self.headroom),
            ),
            PoolDir::Egress => (sum(&self.sizes.egress, &self.egress), [0; 3]),
        }
    }

    /// MMU slices (1 but on platforms with XPEs).
    pub fn slices(&self) -> usize {
        self.slices
    }

    /// Slots any PG or queue may use: every pool of every slice (the rest stay 0).
    #[inline]
    pub fn slots_in_use(&self) -> usize {
        MAX_POOLS * self.slices
    }

    /// Pools of `dir` (1 without configured pools).
    pub fn pools(&self, dir: PoolDir) -> usize {
        self.count[usize::from(dir == PoolDir::Egress)]
    }

    /// The pools' figures for reports, in cells (summed over the pools of each direction).
    pub fn usage(&self) -> super::PoolUse {
        let sum = |s: &[PoolSide], f: fn(&PoolSide) -> u32| s.iter().map(f).sum::<u32>();
        super::PoolUse {
            cell_bytes: self.cell_bytes(),
            total_cells: self.total_cells,
            shared_cells: self.sizes.ingress.iter().sum(),
            used_cells: self.used,
            peak_used_cells: self.peak_used,
            ingress_shared_cells: sum(&self.ingress, |s| s.shared),
            // The sum of each pool's peak: the peaks of several pools need not coincide, so
            // this bounds the whole side's peak from above (exact with one pool).
            peak_ingress_shared_cells: sum(&self.ingress, |s| s.peak_shared),
            egress_shared_cells: sum(&self.egress, |s| s.shared),
            peak_egress_shared_cells: sum(&self.egress, |s| s.peak_shared),
        }
    }

    /// Whether no cell is in use on either side.
    pub fn is_empty(&self) -> bool {
        let idle = |s: &[PoolSide]| s.iter().all(|s| s.shared == 0);
        self.used == 0 && idle(&self.ingress) && idle(&self.egress) && idle(&self.headroom)
    }
}

#[cfg(test)]
mod tests {
    use super::CellDiv;

    /// The reciprocal gives the division's answer for every cell size the config takes, at
    /// every frame length (and well beyond).
    #[test]
    fn cells_without_a_division_are_exact() {
        for cell in (64..=4096u32).step_by(1) {
            let d = CellDiv::new(cell);
            let lens = (0..=10_000usize).step_by(if cell % 16 == 0 { 1 } else { 7 }).chain([
                65_535,
                500_000,
                (1 << 20) - 4097,
            ]);
            for len in lens {
                assert_eq!(
                    d.cells(len),
                    (len as u32).div_ceil(cell),
                    "{len} bytes in {cell} B cells"
                );
            }
        }
    }
}
