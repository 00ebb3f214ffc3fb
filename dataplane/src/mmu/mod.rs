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

/// One port's limits and use, kept together so admission touches one place per port.
#[derive(Debug, Clone)]
struct PortBuffers {
    pg_limits: [PgLimits; NUM_TC],
    queue_limits: [QueueLimits; NUM_TC],
    pgs: [PgUse; NUM_TC],
    queues: [QueueUse; NUM_TC],
    usage: PortUse,
}

/// Buffer state of the whole switch. Owned by one worker; see ARCHITECTURE.md for the
/// multi-worker plan.
#[derive(Debug)]
pub struct Mmu {
    cell_bytes: u32,
    cell_shift: u32,
    total_cells: u32,
    shared_cells: u32,
    ports: Vec<PortBuffers>,
    /// Sum of every PG's shared use: the ingress view of the shared pool.
    ingress_shared: u32,
    /// Sum of every queue's shared use: the egress view of the shared pool.
    egress_shared: u32,
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
        // Validation guarantees a power of two; round up to one for hand-built configs.
        let cell = cfg.buffer.cell_bytes.max(1).next_power_of_two();
        let cells = |bytes: u64| bytes.div_ceil(cell as u64).min(u32::MAX as u64) as u32;
        let total_cells = cells(cfg.buffer.total_bytes);
        let mut reserved: u64 = 0;
        let ports: Vec<PortBuffers> = cfg
            .ports
            .iter()
            .map(|port| {
                let pg_limits: [PgLimits; NUM_TC] = std::array::from_fn(|pg| {
                    let prof = &port.pgs[pg];
                    PgLimits {
                        lossless: prof.lossless,
                        min: cells(prof.min_bytes),
                        shared: Limit::from_threshold(prof.shared, cell),
                        headroom: if prof.lossless {
                            cells(port.headroom_bytes[pg])
                        } else {
                            0
                        },
                        xon_offset: cells(prof.xon_offset_bytes),
                    }
                });
                let queue_limits: [QueueLimits; NUM_TC] = std::array::from_fn(|q| QueueLimits {
                    min: cells(port.queues[q].min_bytes),
                    shared: Limit::from_threshold(port.queues[q].shared, cell),
                });
                reserved += pg_limits.iter().map(|p| (p.min + p.headroom) as u64).sum::<u64>();
                reserved += queue_limits.iter().map(|q| q.min as u64).sum::<u64>();
                PortBuffers {
                    pg_limits,
                    queue_limits,
                    pgs: Default::default(),
                    queues: Default::default(),
                    usage: PortUse::default(),
                }
            })
            .collect();
        Mmu {
            cell_bytes: cell,
            cell_shift: cell.trailing_zeros(),
            total_cells,
            shared_cells: (total_cells as u64).saturating_sub(reserved) as u32,
            ports,
            ingress_shared: 0,
            egress_shared: 0,
            used: 0,
            peak_used: 0,
            peak_ingress_shared: 0,
            peak_egress_shared: 0,
        }
    }

    /// Takes the limits of a new config (same buffer and ports) and keeps every count: what is
    /// queued stays charged where it is, and the next admission or release sees the new limits.
    pub fn set_limits(&mut self, cfg: &Config) {
        let fresh = Mmu::new(cfg);
        self.shared_cells = fresh.shared_cells;
        for (mine, new) in self.ports.iter_mut().zip(fresh.ports) {
            mine.pg_limits = new.pg_limits;
            mine.queue_limits = new.queue_limits;
        }
    }

    #[inline]
    pub fn cells_for(&self, len: usize) -> u32 {
        (len as u32 + self.cell_bytes - 1) >> self.cell_shift
    }

    pub fn cell_bytes(&self) -> u32 {
        self.cell_bytes
    }

    pub fn num_ports(&self) -> usize {
        self.ports.len()
    }

    #[inline]
    fn ingress_free(&self) -> u32 {
        self.shared_cells.saturating_sub(self.ingress_shared)
    }

    #[inline]
    fn egress_free(&self) -> u32 {
        self.shared_cells.saturating_sub(self.egress_shared)
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
        let (pg, queue) = (pg & 7, queue & 7);
        let ingress_free = self.ingress_free();
        let egress_free = self.egress_free();
        // Decide on both sides first, reading through references (this runs for every frame:
        // copying the limit and use structs showed up as a fifth of its instructions).
        let ip = &self.ports[in_port];
        let (pl, pu) = (&ip.pg_limits[pg], &ip.pgs[pg]);
        let lossless = pl.lossless;
        let pg_shared_limit = pl.shared;
        let region = if pu.min + cells <= pl.min {
            IngressRegion::Min
        } else if cells <= ingress_free && pu.shared + cells <= pg_shared_limit.resolve(ingress_free) {
            IngressRegion::Shared
        } else if lossless && pu.headroom + cells <= pl.headroom {
            IngressRegion::Headroom
        } else if lossless {
            return Err(DropReason::HeadroomOverflow);
        } else {
            return Err(DropReason::IngressLimit);
        };

        // Egress. A lossless frame that ingress admitted is never refused here: the ingress PG
        // must reach XOFF first (configs should give lossless queues an unlimited limit).
        let op = &self.ports[out_port];
        let (ql, qu) = (&op.queue_limits[queue], &op.queues[queue]);
        let to_queue_min = qu.min + cells <= ql.min;
        if !to_queue_min && !lossless && (cells > egress_free || qu.shared + cells > ql.shared.resolve(egress_free)) {
            return Err(DropReason::EgressLimit);
        }

        // Charge both sides.
        let shared_in = if region == IngressRegion::Shared { cells } else { 0 };
        let shared_out = if to_queue_min { 0 } else { cells };
        self.ingress_shared += shared_in;
        self.peak_ingress_shared = self.peak_ingress_shared.max(self.ingress_shared);
        self.egress_shared += shared_out;
        self.peak_egress_shared = self.peak_egress_shared.max(self.egress_shared);
        self.used += cells;
        self.peak_used = self.peak_used.max(self.used);
        // The limit after this frame: a dynamic one shrinks as the pool fills.
        let pg_limit_now = pg_shared_limit.resolve(self.ingress_free());

        let ip = &mut self.ports[in_port];
        let p = &mut ip.pgs[pg];
        match region {
            IngressRegion::Min => p.min += cells,
            IngressRegion::Shared => p.shared += cells,
            IngressRegion::Headroom => {
                p.headroom += cells;
                p.peak_headroom = p.peak_headroom.max(p.headroom);
            }
        }
        p.peak = p.peak.max(p.total());
        let wants_xoff = lossless && (region == IngressRegion::Headroom || p.shared >= pg_limit_now);
        ip.usage.ingress_cells += cells;
        ip.usage.peak_ingress_cells = ip.usage.peak_ingress_cells.max(ip.usage.ingress_cells);

        let op = &mut self.ports[out_port];
        let q = &mut op.queues[queue];
        q.min += cells - shared_out;
        q.shared += shared_out;
        q.bytes += bytes as u64;
        q.peak = q.peak.max(q.total());
        q.peak_bytes = q.peak_bytes.max(q.bytes);
        op.usage.egress_cells += cells;
        op.usage.peak_egress_cells = op.usage.peak_egress_cells.max(op.usage.egress_cells);
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
        self.release_cells(in_port, pg, out_port, queue, cells, bytes);
        self.may_resume(in_port, pg)
    }

    /// [`Mmu::release`] without the XON answer, for callers that only need it while the PG is
    /// in XOFF (the pipeline checks that first: one bit test instead of a limit per frame).
    #[inline]
    pub fn release_cells(&mut self, in_port: usize, pg: usize, out_port: usize, queue: usize, cells: u32, bytes: u32) {
        let (pg, queue) = (pg & 7, queue & 7);
        let ip = &mut self.ports[in_port];
        let p = &mut ip.pgs[pg];
        let from_headroom = cells.min(p.headroom);
        p.headroom -= from_headroom;
        let from_shared = (cells - from_headroom).min(p.shared);
        p.shared -= from_shared;
        let from_min = cells - from_headroom - from_shared;
        debug_assert!(from_min <= p.min, "released more than was admitted");
        p.min = p.min.saturating_sub(from_min);
        ip.usage.ingress_cells = ip.usage.ingress_cells.saturating_sub(cells);
        self.ingress_shared -= from_shared;

        let op = &mut self.ports[out_port];
        let q = &mut op.queues[queue];
        let from_qshared = cells.min(q.shared);
        q.shared -= from_qshared;
        q.min = q.min.saturating_sub(cells - from_qshared);
        q.bytes = q.bytes.saturating_sub(bytes as u64);
        op.usage.egress_cells = op.usage.egress_cells.saturating_sub(cells);
        self.egress_shared -= from_qshared;
        self.used = self.used.saturating_sub(cells);
    }

    /// XON condition for a lossless PG (false for lossy PGs).
    #[inline]
    pub fn may_resume(&self, port: usize, pg: usize) -> bool {
        let b = &self.ports[port];
        let pl = &b.pg_limits[pg & 7];
        if !pl.lossless {
            return false;
        }
        let p = &b.pgs[pg & 7];
        p.headroom == 0 && (p.shared == 0 || p.shared + pl.xon_offset < pl.shared.resolve(self.ingress_free()))
    }

    pub fn pg(&self, port: usize, pg: usize) -> &PgUse {
        &self.ports[port].pgs[pg]
    }

    /// Starts every peak afresh from the current use. The control plane reads the peaks and
    /// restarts them in one step and keeps the user and persistent watermarks itself
    /// (`dataplane::watermarks`), so clearing costs the packet path nothing.
    pub fn restart_peaks(&mut self) {
        self.peak_used = self.used;
        self.peak_ingress_shared = self.ingress_shared;
        self.peak_egress_shared = self.egress_shared;
        for b in &mut self.ports {
            for p in &mut b.pgs {
                p.peak = p.total();
                p.peak_headroom = p.headroom;
            }
            for q in &mut b.queues {
                q.peak = q.total();
                q.peak_bytes = q.bytes;
            }
            b.usage.peak_ingress_cells = b.usage.ingress_cells;
            b.usage.peak_egress_cells = b.usage.egress_cells;
        }
    }

    pub fn queue(&self, port: usize, q: usize) -> &QueueUse {
        &self.ports[port].queues[q]
    }

    pub fn port(&self, port: usize) -> &PortUse {
        &self.ports[port].usage
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
            && self.ports.iter().all(|b| {
                b.usage.ingress_cells == 0
                    && b.usage.egress_cells == 0
                    && b.pgs.iter().all(|p| p.total() == 0)
                    && b.queues.iter().all(|q| q.total() == 0 && q.bytes == 0)
            })
    }
}

#[cfg(test)]
mod tests;
