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
pub use pool::{PoolSide, SharedPool};
pub use thresholds::Limit;

use crate::counters::DropReason;
use controlplane::Config;

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
}

impl PgUse {
    /// Cells held, all regions.
    pub fn total(&self) -> u32 {
        self.min + self.shared + self.headroom
    }

    /// Charges `cells` to `region` (and the pool's ingress view, for shared cells).
    #[inline(always)]
    fn charge(&mut self, region: IngressRegion, cells: u32, pool: &mut SharedPool) {
        match region {
            IngressRegion::Min => self.min += cells,
            IngressRegion::Shared => {
                self.shared += cells;
                pool.ingress.shared += cells;
            }
            IngressRegion::Headroom => self.headroom += cells,
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
    let ingress: Vec<PgAccount> = cfg.ports.iter().map(|p| PgAccount::new(p, cell)).collect();
    let egress: Vec<QueueAccount> = cfg.ports.iter().map(|p| QueueAccount::new(p, cell)).collect();
    let reserved = ingress.iter().map(PgAccount::reserved_cells).sum::<u64>()
        + egress.iter().map(QueueAccount::reserved_cells).sum::<u64>();
    (SharedPool::new(cfg.buffer.total_bytes, cell, reserved), ingress, egress)
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
    let (mut in_shared, mut out_shared, mut out_cells) = (0u64, 0u64, 0u64);
    for (i, a) in ins.into_iter().enumerate() {
        errors.extend(a.audit().map(|e| format!("port index {i}: {e}")));
        in_shared += a.shared_sum();
    }
    for (i, a) in outs.into_iter().enumerate() {
        errors.extend(a.audit().map(|e| format!("port index {i}: {e}")));
        out_shared += a.shared_sum();
        out_cells += a.cells().0 as u64;
    }
    if pool.used as u64 != out_cells {
        errors.push(format!("pool holds {} cells, the egress ports {out_cells}", pool.used));
    }
    if pool.ingress.shared as u64 != in_shared {
        errors.push(format!(
            "pool ingress shared {}, the PGs {in_shared}",
            pool.ingress.shared
        ));
    }
    if pool.egress.shared as u64 != out_shared {
        errors.push(format!(
            "pool egress shared {}, the queues {out_shared}",
            pool.egress.shared
        ));
    }
    errors
}

/// The cell size of a config: validation guarantees a power of two; hand-built configs are
/// rounded up to one.
pub fn cell_size(cfg: &Config) -> u32 {
    cfg.buffer.cell_bytes.max(1).next_power_of_two()
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
