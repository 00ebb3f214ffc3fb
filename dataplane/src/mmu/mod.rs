//! The shared-buffer memory management unit: admission and release of frames, in cells.
//!
//! Modelled on SAI/SONiC buffer profiles and the ns-3 HPCC `SwitchMmu`. Every frame is charged
//! twice, as an ASIC does: once to its ingress (port, PG), where lossless flow control is
//! decided, and once to its egress (port, queue), where lossy traffic is dropped. Each side
//! fills its reserved `min` first, then the shared pool up to a static or dynamic limit; a
//! lossless PG then spills into its headroom (and asks for XOFF).
//!
//! Release does not remember which region a frame was admitted to: it drains headroom first,
//! then shared, then min. That keeps release O(1) with no per-frame record, and since every
//! counter only ever holds the sum of what is queued, all of them return to zero when the
//! queues drain (property-tested in `tests`).

mod thresholds;

pub use thresholds::Limit;

use crate::counters::DropReason;
use controlplane::{Config, NUM_TC};

/// Where an admitted frame sits on the ingress side, which decides PFC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IngressRegion {
    Min,
    Shared,
    Headroom,
}

/// What an admission did, for the caller to act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admitted {
    pub region: IngressRegion,
    /// The PG is lossless and at (or past) its shared limit: XOFF should be on.
    pub wants_xoff: bool,
}

/// Per (port, PG) ingress accounting, in cells.
#[derive(Debug, Clone, Copy, Default)]
pub struct PgUse {
    pub min: u32,
    pub shared: u32,
    pub headroom: u32,
    pub peak: u32,
    pub peak_headroom: u32,
}

impl PgUse {
    pub fn total(&self) -> u32 {
        self.min + self.shared + self.headroom
    }
}

/// Per (port, queue) egress accounting, in cells and bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueUse {
    pub min: u32,
    pub shared: u32,
    pub bytes: u64,
    pub peak: u32,
    pub peak_bytes: u64,
}

impl QueueUse {
    pub fn total(&self) -> u32 {
        self.min + self.shared
    }
}

#[derive(Debug, Clone, Copy)]
struct PgLimits {
    lossless: bool,
    min: u32,
    shared: Limit,
    headroom: u32,
    xon_offset: u32,
}

#[derive(Debug, Clone, Copy)]
struct QueueLimits {
    min: u32,
    shared: Limit,
}

/// Buffer state of the whole switch. Owned by one worker; see ARCHITECTURE.md for the
/// multi-worker plan.
#[derive(Debug)]
pub struct Mmu {
    cell_bytes: u32,
    total_cells: u32,
    shared_cells: u32,
    num_ports: usize,
    pg_limits: Vec<[PgLimits; NUM_TC]>,
    queue_limits: Vec<[QueueLimits; NUM_TC]>,
    pgs: Vec<[PgUse; NUM_TC]>,
    queues: Vec<[QueueUse; NUM_TC]>,
    /// Sum of every PG's shared use: the ingress view of the shared pool.
    ingress_shared: u32,
    /// Sum of every queue's shared use: the egress view of the shared pool.
    egress_shared: u32,
    /// Per port: cells of frames that entered (ingress) / will leave (egress) through it.
    ports: Vec<PortUse>,
    /// Cells held by frames in the switch (each frame once).
    used: u32,
    peak_used: u32,
    peak_ingress_shared: u32,
    peak_egress_shared: u32,
}

/// Per-port buffer use in cells, both views, with peaks.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct PortUse {
    pub ingress_cells: u32,
    pub peak_ingress_cells: u32,
    pub egress_cells: u32,
    pub peak_egress_cells: u32,
}

/// Buffer pool figures for reports.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct PoolUse {
    pub total_cells: u32,
    pub shared_cells: u32,
    pub used_cells: u32,
    pub peak_used_cells: u32,
    pub ingress_shared_cells: u32,
    pub peak_ingress_shared_cells: u32,
    pub egress_shared_cells: u32,
    pub peak_egress_shared_cells: u32,
}

impl Mmu {
    pub fn new(cfg: &Config) -> Self {
        let cell = cfg.buffer.cell_bytes;
        let cells = |bytes: u64| bytes.div_ceil(cell as u64).min(u32::MAX as u64) as u32;
        let total_cells = cells(cfg.buffer.total_bytes);
        let mut reserved: u64 = 0;
        let mut pg_limits = Vec::with_capacity(cfg.ports.len());
        let mut queue_limits = Vec::with_capacity(cfg.ports.len());
        for port in &cfg.ports {
            let pgs: [PgLimits; NUM_TC] = std::array::from_fn(|pg| {
                let prof = &cfg.pgs[pg];
                let headroom = if prof.lossless {
                    cells(port.headroom_bytes[pg])
                } else {
                    0
                };
                PgLimits {
                    lossless: prof.lossless,
                    min: cells(prof.min_bytes),
                    shared: Limit::from_threshold(prof.shared, cell),
                    headroom,
                    xon_offset: cells(prof.xon_offset_bytes),
                }
            });
            let queues: [QueueLimits; NUM_TC] = std::array::from_fn(|q| {
                let prof = &cfg.queues[q];
                QueueLimits {
                    min: cells(prof.min_bytes),
                    shared: Limit::from_threshold(prof.shared, cell),
                }
            });
            reserved += pgs.iter().map(|p| (p.min + p.headroom) as u64).sum::<u64>();
            reserved += queues.iter().map(|q| q.min as u64).sum::<u64>();
            pg_limits.push(pgs);
            queue_limits.push(queues);
        }
        let shared_cells = (total_cells as u64).saturating_sub(reserved) as u32;
        let n = cfg.ports.len();
        Mmu {
            cell_bytes: cell,
            total_cells,
            shared_cells,
            num_ports: n,
            pg_limits,
            queue_limits,
            pgs: vec![[PgUse::default(); NUM_TC]; n],
            queues: vec![[QueueUse::default(); NUM_TC]; n],
            ports: vec![PortUse::default(); n],
            ingress_shared: 0,
            egress_shared: 0,
            used: 0,
            peak_used: 0,
            peak_ingress_shared: 0,
            peak_egress_shared: 0,
        }
    }

    #[inline]
    pub fn cells_for(&self, len: usize) -> u32 {
        if self.cell_bytes.is_power_of_two() {
            (len as u32 + self.cell_bytes - 1) >> self.cell_bytes.trailing_zeros()
        } else {
            (len as u32).div_ceil(self.cell_bytes)
        }
    }

    pub fn cell_bytes(&self) -> u32 {
        self.cell_bytes
    }

    pub fn num_ports(&self) -> usize {
        self.num_ports
    }

    #[inline]
    fn pg_limit(&self, port: usize, pg: usize) -> u32 {
        self.pg_limits[port][pg]
            .shared
            .resolve(self.shared_cells - self.ingress_shared.min(self.shared_cells))
    }

    #[inline]
    fn queue_limit(&self, port: usize, q: usize) -> u32 {
        self.queue_limits[port][q]
            .shared
            .resolve(self.shared_cells - self.egress_shared.min(self.shared_cells))
    }

    /// Admits a frame of `cells` from (in_port, pg) to (out_port, queue), or says why not.
    /// Nothing is charged when the answer is a drop.
    #[inline]
    pub fn admit(
        &mut self,
        in_port: usize,
        pg: usize,
        out_port: usize,
        queue: usize,
        cells: u32,
        bytes: u32,
    ) -> Result<Admitted, DropReason> {
        let pl = self.pg_limits[in_port][pg];
        let pu = self.pgs[in_port][pg];
        let shared_room = self.shared_cells - self.ingress_shared.min(self.shared_cells);
        let region = if pu.min + cells <= pl.min {
            IngressRegion::Min
        } else if cells <= shared_room && pu.shared + cells <= self.pg_limit(in_port, pg) {
            IngressRegion::Shared
        } else if pl.lossless && pu.headroom + cells <= pl.headroom {
            IngressRegion::Headroom
        } else if pl.lossless {
            return Err(DropReason::HeadroomOverflow);
        } else {
            return Err(DropReason::IngressLimit);
        };

        // Egress. A lossless frame that ingress admitted is never refused here: the ingress PG
        // must reach XOFF first (configs should give lossless queues an unlimited limit).
        let ql = self.queue_limits[out_port][queue];
        let qu = self.queues[out_port][queue];
        let to_queue_min = qu.min + cells <= ql.min;
        if !to_queue_min && !pl.lossless {
            let egress_room = self.shared_cells - self.egress_shared.min(self.shared_cells);
            if cells > egress_room || qu.shared + cells > self.queue_limit(out_port, queue) {
                return Err(DropReason::EgressLimit);
            }
        }

        // Charge both sides.
        let p = &mut self.pgs[in_port][pg];
        match region {
            IngressRegion::Min => p.min += cells,
            IngressRegion::Shared => {
                p.shared += cells;
                self.ingress_shared += cells;
                self.peak_ingress_shared = self.peak_ingress_shared.max(self.ingress_shared);
            }
            IngressRegion::Headroom => {
                p.headroom += cells;
                p.peak_headroom = p.peak_headroom.max(p.headroom);
            }
        }
        p.peak = p.peak.max(p.total());
        let pg_shared = p.shared;
        // The limit after this frame (a dynamic one shrinks as the pool fills).
        let wants_xoff = pl.lossless && (region == IngressRegion::Headroom || pg_shared >= self.pg_limit(in_port, pg));

        let q = &mut self.queues[out_port][queue];
        if to_queue_min {
            q.min += cells;
        } else {
            q.shared += cells;
            self.egress_shared += cells;
            self.peak_egress_shared = self.peak_egress_shared.max(self.egress_shared);
        }
        q.bytes += bytes as u64;
        q.peak = q.peak.max(q.total());
        q.peak_bytes = q.peak_bytes.max(q.bytes);
        let pi = &mut self.ports[in_port];
        pi.ingress_cells += cells;
        pi.peak_ingress_cells = pi.peak_ingress_cells.max(pi.ingress_cells);
        let po = &mut self.ports[out_port];
        po.egress_cells += cells;
        po.peak_egress_cells = po.peak_egress_cells.max(po.egress_cells);
        self.used += cells;
        self.peak_used = self.peak_used.max(self.used);
        Ok(Admitted { region, wants_xoff })
    }

    /// Releases a frame admitted earlier. Returns true when the ingress PG is lossless and may
    /// now resume (XON): headroom empty and shared use below `limit − xon_offset`.
    #[inline]
    pub fn release(
        &mut self,
        in_port: usize,
        pg: usize,
        out_port: usize,
        queue: usize,
        cells: u32,
        bytes: u32,
    ) -> bool {
        let p = &mut self.pgs[in_port][pg];
        let mut left = cells;
        let from_headroom = left.min(p.headroom);
        p.headroom -= from_headroom;
        left -= from_headroom;
        let from_shared = left.min(p.shared);
        p.shared -= from_shared;
        self.ingress_shared -= from_shared;
        left -= from_shared;
        let from_min = left.min(p.min);
        p.min -= from_min;
        debug_assert_eq!(left, from_min, "released more than was admitted");

        let q = &mut self.queues[out_port][queue];
        let from_qshared = cells.min(q.shared);
        q.shared -= from_qshared;
        self.egress_shared -= from_qshared;
        q.min -= (cells - from_qshared).min(q.min);
        q.bytes -= (bytes as u64).min(q.bytes);
        self.used -= cells.min(self.used);
        self.ports[in_port].ingress_cells -= cells.min(self.ports[in_port].ingress_cells);
        self.ports[out_port].egress_cells -= cells.min(self.ports[out_port].egress_cells);

        self.may_resume(in_port, pg)
    }

    /// XON condition for a lossless PG (false for lossy PGs).
    #[inline]
    pub fn may_resume(&self, port: usize, pg: usize) -> bool {
        let pl = &self.pg_limits[port][pg];
        if !pl.lossless {
            return false;
        }
        let p = &self.pgs[port][pg];
        p.headroom == 0 && (p.shared == 0 || p.shared + pl.xon_offset < self.pg_limit(port, pg))
    }

    pub fn pg(&self, port: usize, pg: usize) -> &PgUse {
        &self.pgs[port][pg]
    }

    pub fn queue(&self, port: usize, q: usize) -> &QueueUse {
        &self.queues[port][q]
    }

    pub fn port(&self, port: usize) -> &PortUse {
        &self.ports[port]
    }

    pub fn pool(&self) -> PoolUse {
        PoolUse {
            total_cells: self.total_cells,
            shared_cells: self.shared_cells,
            used_cells: self.used,
            peak_used_cells: self.peak_used,
            ingress_shared_cells: self.ingress_shared,
            peak_ingress_shared_cells: self.peak_ingress_shared,
            egress_shared_cells: self.egress_shared,
            peak_egress_shared_cells: self.peak_egress_shared,
        }
    }

    /// Cells the whole switch can hold: bounds how many frames can be queued at once.
    pub fn total_cells(&self) -> u32 {
        self.total_cells
    }

    /// True when nothing is charged anywhere: what "cells are conserved" means.
    pub fn is_empty(&self) -> bool {
        self.used == 0
            && self.ingress_shared == 0
            && self.egress_shared == 0
            && self.ports.iter().all(|p| p.ingress_cells == 0 && p.egress_cells == 0)
            && self.pgs.iter().flatten().all(|p| p.total() == 0)
            && self.queues.iter().flatten().all(|q| q.total() == 0 && q.bytes == 0)
    }
}

#[cfg(test)]
mod tests;
