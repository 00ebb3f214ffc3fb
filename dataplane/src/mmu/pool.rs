//! The shared buffer pool: its size, fixed when the switch starts (what the per-port reserves
//! leave of the buffer), and its occupancy as each side sees it.

/// One side's view of the shared pool's occupancy, written only by that side.
#[derive(Debug, Clone, Copy, Default)]
pub struct PoolSide {
    /// Sum of this side's shared use over all ports.
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

/// The pool both sides read. Dynamic limits are `alpha × (shared cells − this side's shared
/// use)`, so the ingress side reads only `ingress`, the egress side only `egress`.
#[derive(Debug, Clone)]
pub struct SharedPool {
    pub(super) cell_bytes: u32,
    cell_shift: u32,
    pub(super) total_cells: u32,
    pub(super) shared_cells: u32,
    /// The ingress view: every PG's shared use.
    pub ingress: PoolSide,
    /// The egress view: every queue's shared use.
    pub egress: PoolSide,
    /// Cells held by frames in the switch, each frame once (charged with its egress queue).
    pub(super) used: u32,
    pub(super) peak_used: u32,
    /// The shared cells each side may fill: `shared_cells` less the other shards' shared use
    /// as last published (`crate::shard::PoolShare`); `shared_cells` itself with one shard, so
    /// a lone switch computes exactly as it always has, and the packet path subtracts once.
    ingress_avail: u32,
    egress_avail: u32,
    others_ingress: u32,
    others_egress: u32,
}

impl SharedPool {
    pub(super) fn new(total_bytes: u64, cell: u32, reserved_cells: u64) -> Self {
        let total_cells = total_bytes.div_ceil(cell as u64).min(u32::MAX as u64) as u32;
        let shared_cells = (total_cells as u64).saturating_sub(reserved_cells) as u32;
        SharedPool {
            cell_bytes: cell,
            cell_shift: cell.trailing_zeros(),
            total_cells,
            shared_cells,
            ingress_avail: shared_cells,
            egress_avail: shared_cells,
            ingress: PoolSide::default(),
            egress: PoolSide::default(),
            used: 0,
            peak_used: 0,
            others_ingress: 0,
            others_egress: 0,
        }
    }

    /// Takes the other shards' latest figures (once a round, `Switch::exchange_pool`).
    #[inline]
    pub fn set_others(&mut self, ingress_shared: u32, egress_shared: u32) {
        self.others_ingress = ingress_shared;
        self.others_egress = egress_shared;
        self.ingress_avail = self.shared_cells.saturating_sub(ingress_shared);
        self.egress_avail = self.shared_cells.saturating_sub(egress_shared);
    }

    /// Takes the size of a new config's pool (same buffer, new reserves); occupancy is kept.
    pub fn resize(&mut self, fresh: &SharedPool) {
        self.shared_cells = fresh.shared_cells;
        self.set_others(self.others_ingress, self.others_egress);
    }

    /// Cells a frame of `len` bytes takes (rounded up).
    #[inline]
    pub fn cells_for(&self, len: usize) -> u32 {
        (len as u32 + self.cell_bytes - 1) >> self.cell_shift
    }

    /// Bytes per cell, a power of two.
    pub fn cell_bytes(&self) -> u32 {
        self.cell_bytes
    }

    /// Cells the whole switch can hold: bounds how many frames can be queued at once.
    pub fn total_cells(&self) -> u32 {
        self.total_cells
    }

    /// Shared cells the ingress side has left: what its dynamic limits scale with.
    #[inline]
    pub fn ingress_free(&self) -> u32 {
        self.ingress_avail.saturating_sub(self.ingress.shared)
    }

    /// Shared cells the egress side has left.
    #[inline]
    pub fn egress_free(&self) -> u32 {
        self.egress_avail.saturating_sub(self.egress.shared)
    }

    /// Starts every peak again from the current use (a watermark clear).
    pub fn restart_peaks(&mut self) {
        self.peak_used = self.used;
        self.ingress.peak_shared = self.ingress.shared;
        self.egress.peak_shared = self.egress.shared;
    }

    /// The pool's figures for reports, in cells.
    pub fn usage(&self) -> super::PoolUse {
        super::PoolUse {
            total_cells: self.total_cells,
            shared_cells: self.shared_cells,
            used_cells: self.used,
            peak_used_cells: self.peak_used,
            ingress_shared_cells: self.ingress.shared,
            peak_ingress_shared_cells: self.ingress.peak_shared,
            egress_shared_cells: self.egress.shared,
            peak_egress_shared_cells: self.egress.peak_shared,
        }
    }

    /// Whether no cell is in use on either side.
    pub fn is_empty(&self) -> bool {
        self.used == 0 && self.ingress.shared == 0 && self.egress.shared == 0
    }
}
