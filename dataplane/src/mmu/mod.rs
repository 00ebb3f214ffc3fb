//! The shared-buffer memory management unit: admission and release of frames, in cells.
//!
//! Modelled on SAI/SONiC buffer profiles and the ns-3 HPCC `SwitchMmu`. Every frame is charged
//! twice, as an ASIC does: once to its ingress (port, PG), where lossless flow control is
//! decided ([`PgAccount`], owned by the ingress port), and once to its egress (port, queue),
//! where lossy traffic is dropped ([`QueueAccount`], owned by the egress port). Each side fills
//! its reserved `min` first, then the shared pool up to a static or dynamic limit; a lossless
//! PG then spills into its headroom (and asks for XOFF).
//!
//! The shared pool ([`SharedPool`]) is the one figure both sides read: its size is fixed, and
//! its occupancy has an ingress view and an egress view, each written by its own side only.
//! That is what lets the two sides live on different workers later, with a release travelling
//! back to the ingress side as a message ([`admit`] and the two `release`s are the calls that
//! become messages).
//!
//! Release does not remember which region a frame was admitted to: it drains headroom first,
//! then shared, then min. That keeps release O(1) with no per-frame record, and since every
//! counter only ever holds the sum of what is queued, all of them return to zero when the
//! queues drain (property-tested in `tests`).

mod egress;
mod group;
mod ingress;
mod pool;
mod thresholds;

pub use egress::QueueAccount;
pub use group::{admit_group, admit_group_to_queue, charge_group_to_pg, GroupTotals};
pub use ingress::PgAccount;
pub use pool::{PoolFigures, PoolSide, PoolSizes, SharedPool};
pub use thresholds::Limit;

use crate::counters::DropReason;
use controlplane::model::{PoolConfig, PoolDir, MAX_POOLS, MAX_SLICES};
use controlplane::Config;

/// The pool accounts the MMU keeps: each configured pool once per MMU slice (Broadcom's XPEs;
/// one slice elsewhere, where a slot is its pool).
pub const SLOTS: usize = MAX_POOLS * MAX_SLICES;

/// The slot of pool `pool` in MMU slice `slice`: what a PG's or queue's account indexes
/// [`SharedPool`] by.
#[inline]
pub fn slot(pool: u8, slice: u8) -> u8 {
    pool % MAX_POOLS as u8 + MAX_POOLS as u8 * (slice % MAX_SLICES as u8)
}

/// Where an admitted frame sits on the ingress side, which decides PFC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IngressRegion {
    /// In the PG's reserved cells, which no other PG can take.
    Min,
    /// In the shared pool, within the PG's limit.
    Shared,
    /// Past the shared limit of a lossless PG: the cells in flight while XOFF reaches the peer.
    Headroom,
}

/// What an admission did, for the caller to act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admitted {
    /// Where the frame's cells were charged on the ingress side.
    pub region: IngressRegion,
    /// The PG is lossless and at (or past) its shared limit: XOFF should be on.
    pub wants_xoff: bool,
}

/// Per (port, PG) ingress accounting, in cells.
#[derive(Debug, Clone, Copy, Default)]
pub struct PgUse {
    /// Cells held in the PG's reserved minimum.
    pub min: u32,
    /// Cells held in the shared pool.
    pub shared: u32,
    /// Cells held in headroom (lossless PGs only).
    pub headroom: u32,
    /// Highest total since the peaks were last restarted.
    pub peak: u32,
    /// Highest headroom use since the peaks were last restarted.
    pub peak_headroom: u32,
    /// Highest shared-pool use since the peaks were last restarted (SAI's PG shared watermark:
    /// the reserve and the headroom not counted).
    pub peak_shared: u32,
}

impl PgUse {
    /// Cells held, all regions.
    pub fn total(&self) -> u32 {
        self.min + self.shared + self.headroom
    }

    /// Charges `cells` to `region` (and ingress pool `p`'s view, for shared cells; its shared
    /// headroom pool, for headroom drawn from it).
    #[inline(always)]
    fn charge(&mut self, region: IngressRegion, cells: u32, p: usize, pooled_headroom: bool, pool: &mut SharedPool) {
        let p = p & (SLOTS - 1);
        match region {
            IngressRegion::Min => self.min += cells,
            IngressRegion::Shared => {
                self.shared += cells;
                pool.ingress[p].shared += cells;
            }
            IngressRegion::Headroom => {
                self.headroom += cells;
                if pooled_headroom {
                    pool.headroom[p].charge(cells);
                }
            }
        }
    }
}

/// Per (port, queue) egress accounting, in cells and bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueUse {
    /// Cells held in the queue's reserved minimum.
    pub min: u32,
    /// Cells held in the shared pool.
    pub shared: u32,
    /// Frame bytes queued (the depth reports show).
    pub bytes: u64,
    /// Highest total cells since the peaks were last restarted.
    pub peak: u32,
    /// Highest byte depth since the peaks were last restarted.
    pub peak_bytes: u64,
}

impl QueueUse {
    /// Cells held, reserved and shared.
    pub fn total(&self) -> u32 {
        self.min + self.shared
    }
}

/// Per-port buffer use in cells, both views, with peaks (for reports: each side keeps its half).
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct PortUse {
    /// Cells held by frames that entered through the port.
    pub ingress_cells: u32,
    /// Highest of those since the peaks were last restarted.
    pub peak_ingress_cells: u32,
    /// Cells held by frames queued to leave through the port.
    pub egress_cells: u32,
    /// Highest of those since the peaks were last restarted.
    pub peak_egress_cells: u32,
}

/// Buffer pool figures for reports: the snapshot's own type, so the MMU's figures reach
/// `rocectl show buffer` and the metrics without a field-by-field copy.
pub use controlplane::snapshot::PoolBuffer as PoolUse;

/// The accounting of a whole switch built from a config: the pool, and one account per port
/// for each side, for the owners to take.
pub fn build(cfg: &Config) -> (SharedPool, Vec<PgAccount>, Vec<QueueAccount>) {
    let cell = cell_size(cfg);
    let cells = |bytes: u64| bytes.div_ceil(cell as u64).min(u32::MAX as u64) as u32;
    let ingress_pools: Vec<&PoolConfig> = cfg.buffer.pools_of(PoolDir::Ingress).collect();
    let egress_pools: Vec<&PoolConfig> = cfg.buffer.pools_of(PoolDir::Egress).collect();
    let pooled = |p: u8| ingress_pools.get(usize::from(p)).is_some_and(|p| p.headroom_bytes > 0);
    let ingress: Vec<PgAccount> = cfg.ports.iter().map(|p| PgAccount::new(p, cell, pooled)).collect();
    let egress: Vec<QueueAccount> = cfg.ports.iter().map(|p| QueueAccount::new(p, cell)).collect();
    let mut sizes = PoolSizes::default();
    // Each pool is split evenly among the MMU's slices (one, with the whole pool, unless the
    // platform has XPEs): a slice's PGs and queues see only its share.
    let slices = usize::from(cfg.buffer.slices.clamp(1, MAX_SLICES as u8));
    let split = |to: &mut [u32; SLOTS], i: usize, cells: u32| {
        for s in 0..slices {
            to[i + MAX_POOLS * s] = cells / slices as u32;
        }
    };
    let count = if ingress_pools.is_empty() {
        // One pool, both directions: what the reserves leave of the buffer.
        let reserved = ingress.iter().map(PgAccount::reserved_cells).sum::<u64>()
            + egress.iter().map(QueueAccount::reserved_cells).sum::<u64>();
        let total = cfg.buffer.total_bytes.div_ceil(cell as u64);
        let shared = total.saturating_sub(reserved).min(u32::MAX as u64) as u32;
        split(&mut sizes.ingress, 0, shared);
        split(&mut sizes.egress, 0, shared);
        [1, 1]
    } else {
        for (i, p) in ingress_pools.iter().take(MAX_POOLS).enumerate() {
            split(&mut sizes.ingress, i, cells(p.size_bytes));
            split(&mut sizes.headroom, i, cells(p.headroom_bytes));
        }
        for (i, p) in egress_pools.iter().take(MAX_POOLS).enumerate() {
            split(&mut sizes.egress, i, cells(p.size_bytes));
        }
        [ingress_pools.len().min(MAX_POOLS), egress_pools.len().min(MAX_POOLS)]
    };
    (
        SharedPool::new(cfg.buffer.total_bytes, cell, sizes, count, slices),
        ingress,
        egress,
    )
}

/// Every way the counts disagree with one another: each port's total against its PGs or
/// queues, the pool's figures against the ports'. Empty while accounting is exact.
///
/// Why an audit rather than a check in `release`: release clamps with `saturating_sub` (a
/// debug build asserts first), and a branch per count there cost 11 instructions per packet
/// (bench/instructions.sh); a clamp breaks these sums, so reading them off the packet path
/// (the conservation property tests, a report) makes an accounting bug loud at no cost.
pub fn audit<'a>(
    pool: &SharedPool,
    ins: impl IntoIterator<Item = &'a PgAccount>,
    outs: impl IntoIterator<Item = &'a QueueAccount>,
) -> Vec<String> {
    let mut errors = Vec::new();
    let (mut in_shared, mut in_headroom, mut out_shared, mut out_cells) =
        ([0u64; SLOTS], [0u64; SLOTS], [0u64; SLOTS], 0u64);
    for (i, a) in ins.into_iter().enumerate() {
        errors.extend(a.audit().map(|e| format!("port index {i}: {e}")));
        let (s, h) = a.shared_sums();
        for p in 0..SLOTS {
            in_shared[p] += s[p];
            in_headroom[p] += h[p];
        }
    }
    for (i, a) in outs.into_iter().enumerate() {
        errors.extend(a.audit().map(|e| format!("port index {i}: {e}")));
        for (p, s) in a.shared_sums().iter().enumerate() {
            out_shared[p] += s;
        }
        out_cells += a.cells().0 as u64;
    }
    if pool.used as u64 != out_cells {
        errors.push(format!("pool holds {} cells, the egress ports {out_cells}", pool.used));
    }
    for p in 0..SLOTS {
        let checks = [
            ("ingress shared", pool.ingress[p].shared, in_shared[p], "the PGs"),
            (
                "shared headroom",
                pool.headroom[p].shared,
                in_headroom[p],
                "the PGs' headroom",
            ),
            ("egress shared", pool.egress[p].shared, out_shared[p], "the queues"),
        ];
        for (what, held, sum, whose) in checks {
            if held as u64 != sum {
                errors.push(format!("pool {p} {what} {held}, {whose} {sum}"));
            }
        }
    }
    errors
}

/// The cell size of a config (validation keeps it to 64..=4096 bytes; any size, as switch
/// ASICs have 96 or 208 B cells).
pub fn cell_size(cfg: &Config) -> u32 {
    cfg.buffer.cell_bytes.clamp(1, 4096)
}

/// Admits a frame of `cells` from an ingress PG to an egress queue, or says why not: asks the
/// ingress side, then the egress side, and refunds the ingress side if the egress side refuses.
/// Nothing stays charged when the answer is a drop. (One call on one core; between shards the
/// egress step and the refund would be messages.) Always inlined into enqueue, its one
/// caller on the packet path: out of line it was a call per frame with seven arguments.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn admit(
    ingress: &mut PgAccount,
    pg: usize,
    egress: &mut QueueAccount,
    queue: usize,
    pool: &mut SharedPool,
    cells: u32,
    bytes: u32,
) -> Result<Admitted, DropReason> {
    let region = ingress.reserve(pg, cells, pool)?;
    let lossless = ingress.is_lossless(pg);
    if let Err(reason) = egress.admit(queue, cells, bytes, lossless, pool) {
        ingress.refund(pg, cells, region, pool);
        return Err(reason);
    }
    let wants_xoff = ingress.confirm(pg, region, pool);
    Ok(Admitted { region, wants_xoff })
}

#[cfg(test)]
mod tests;
