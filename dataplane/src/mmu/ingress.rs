//! One ingress port's buffer account: per PG, min → shared (to its limit) → headroom, and the
//! XOFF/XON conditions that follow from it. Owned by the ingress side.

use super::group::GroupTotals;
use super::{slot, IngressRegion, Limit, PgUse, SharedPool, SLOTS};
use crate::counters::DropReason;
use controlplane::{PortConfig, MAX_POOLS, NUM_TC};

#[derive(Debug, Clone, Copy)]
struct PgLimits {
    lossless: bool,
    min: u32,
    shared: Limit,
    headroom: u32,
    xon_offset: u32,
    /// XON also at or below this shared use (SAI's XON_TH).
    xon: u32,
    /// Its ingress pool's slot in the port's MMU slice (`mmu::slot`).
    pool: u8,
    /// Its headroom comes from the pool's shared headroom pool (up to `headroom`), not a
    /// reserve of its own.
    pooled_headroom: bool,
}

/// The PGs of one ingress port: limits and use, in cells.
#[derive(Debug, Clone)]
pub struct PgAccount {
    limits: [PgLimits; NUM_TC],
    pgs: [PgUse; NUM_TC],
    cells: u32,
    peak_cells: u32,
}

impl PgAccount {
    /// `pooled_headroom(pool)`: whether that ingress pool has a shared headroom pool.
    pub(super) fn new(port: &PortConfig, cell: u32, pooled_headroom: impl Fn(u8) -> bool) -> Self {
        let cells = |bytes: u64| bytes.div_ceil(cell as u64).min(u32::MAX as u64) as u32;
        PgAccount {
            limits: std::array::from_fn(|pg| {
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
                    xon: cells(prof.xon_bytes),
                    pool: slot(prof.pool, port.slice),
                    pooled_headroom: prof.lossless && pooled_headroom(prof.pool),
                }
            }),
            pgs: Default::default(),
            cells: 0,
            peak_cells: 0,
        }
    }

    /// Cells this port's PGs reserve out of the buffer (min, and headroom not drawn from a
    /// shared headroom pool).
    pub(super) fn reserved_cells(&self) -> u64 {
        self.limits
            .iter()
            .map(|p| p.min as u64 + if p.pooled_headroom { 0 } else { p.headroom as u64 })
            .sum()
    }

    /// Takes the limits of a new config's account for the same port; every count is kept.
    pub fn set_limits(&mut self, fresh: &PgAccount) {
        self.limits = fresh.limits;
    }

    /// Whether `pg` is lossless: past its shared limit it takes headroom and asks for XOFF rather
    /// than drop.
    #[inline]
    pub fn is_lossless(&self, pg: usize) -> bool {
        self.limits[pg & 7].lossless
    }

    /// Decides where a frame of `cells` goes in `pg` and charges it there (peaks wait for
    /// [`PgAccount::confirm`], so a refund leaves no trace), or says why it cannot enter.
    #[inline]
    pub fn reserve(&mut self, pg: usize, cells: u32, pool: &mut SharedPool) -> Result<IngressRegion, DropReason> {
        let pg = pg & 7;
        // Read through references: this runs for every frame, and copying the limit and use
        // structs showed up as a fifth of admission's instructions.
        let (pl, pu) = (&self.limits[pg], &mut self.pgs[pg]);
        let ingress_free = pool.ingress_free(pl.pool as usize);
        let region = if pu.min + cells <= pl.min {
            IngressRegion::Min
        } else if cells <= ingress_free && pu.shared + cells <= pl.shared.resolve(ingress_free) {
            IngressRegion::Shared
        } else if pl.lossless
            && pu.headroom + cells <= pl.headroom
            && (!pl.pooled_headroom || cells <= pool.headroom_free(pl.pool as usize))
        {
            IngressRegion::Headroom
        } else if pl.lossless {
            return Err(DropReason::HeadroomOverflow);
        } else {
            return Err(DropReason::IngressLimit);
        };
        pu.charge(region, cells, pl.pool as usize, pl.pooled_headroom, pool);
        self.cells += cells;
        Ok(region)
    }

    /// The one region a group of frames `g` would all take in `pg`, admitted one by one in
    /// order (Min or Shared), when none of them would ask for XOFF; None for anything else
    /// (two regions, headroom, a refusal, an XOFF), which the frame-by-frame path decides.
    /// Why the group's total decides for each frame: `mmu::group`.
    #[inline(always)]
    pub(super) fn group_region(&self, pg: usize, g: &GroupTotals, pool: &SharedPool) -> Option<IngressRegion> {
        let pg = pg & 7;
        let (pl, pu) = (&self.limits[pg], &self.pgs[pg]);
        let free = pool.ingress_free(pl.pool as usize);
        let (region, shared_end, free_end) = if pu.min + g.cells <= pl.min {
            (IngressRegion::Min, pu.shared, free)
        } else if pu.min + g.min_cells > pl.min
            && g.cells <= free
            && pu.shared + g.cells <= pl.shared.resolve(free - (g.cells - g.last_cells))
        {
            (IngressRegion::Shared, pu.shared + g.cells, free - g.cells)
        } else {
            return None;
        };
        let wants_xoff = pl.lossless && shared_end >= pl.shared.resolve(free_end);
        (!wants_xoff).then_some(region)
    }

    /// Charges a group [`PgAccount::group_region`] placed in `region`, with the peaks its
    /// frames' admissions would have left.
    #[inline(always)]
    pub(super) fn charge_group(&mut self, pg: usize, region: IngressRegion, cells: u32, pool: &mut SharedPool) {
        let pl = &self.limits[pg & 7];
        self.pgs[pg & 7].charge(region, cells, pl.pool as usize, pl.pooled_headroom, pool);
        self.cells += cells;
        self.record_peaks(pg, pool);
    }

    /// The peaks an admission to `pg` may raise: the PG's total, the port's, the pool's
    /// ingress shared use (headroom's own peak is [`PgAccount::confirm`]'s, the one path that
    /// charges headroom).
    #[inline(always)]
    fn record_peaks(&mut self, pg: usize, pool: &mut SharedPool) {
        let p = &mut self.pgs[pg & 7];
        p.peak = p.peak.max(p.total());
        p.peak_shared = p.peak_shared.max(p.shared);
        self.peak_cells = self.peak_cells.max(self.cells);
        let side = &mut pool.ingress[self.limits[pg & 7].pool as usize & (SLOTS - 1)];
        side.peak_shared = side.peak_shared.max(side.shared);
    }

    /// Undoes a [`PgAccount::reserve`] whose frame the egress side refused.
    #[inline]
    pub fn refund(&mut self, pg: usize, cells: u32, region: IngressRegion, pool: &mut SharedPool) {
        let (pl, pu) = (&self.limits[pg & 7], &mut self.pgs[pg & 7]);
        let p = pl.pool as usize & (SLOTS - 1);
        match region {
            IngressRegion::Min => pu.min -= cells,
            IngressRegion::Shared => {
                pu.shared -= cells;
                pool.ingress[p].shared -= cells;
            }
            IngressRegion::Headroom => {
                pu.headroom -= cells;
                if pl.pooled_headroom {
                    pool.headroom[p].shared -= cells;
                }
            }
        }
        self.cells -= cells;
    }

    /// Completes an admission the egress side accepted: peaks, and whether the PG now wants
    /// XOFF (lossless and in headroom, or at the shared limit, which a dynamic limit lowers
    /// as the pool fills).
    #[inline]
    pub fn confirm(&mut self, pg: usize, region: IngressRegion, pool: &mut SharedPool) -> bool {
        let pg = pg & 7;
        self.record_peaks(pg, pool);
        let pl = &self.limits[pg];
        let limit_now = pl.shared.resolve(pool.ingress_free(pl.pool as usize));
        let p = &mut self.pgs[pg];
        if region == IngressRegion::Headroom {
            p.peak_headroom = p.peak_headroom.max(p.headroom);
        }
        pl.lossless && (region == IngressRegion::Headroom || p.shared >= limit_now)
    }

    /// Releases a frame admitted earlier: headroom first, then shared, then min.
    #[inline]
    pub fn release(&mut self, pg: usize, cells: u32, pool: &mut SharedPool) {
        let (pl, p) = (&self.limits[pg & 7], &mut self.pgs[pg & 7]);
        let pi = pl.pool as usize & (SLOTS - 1);
        let from_headroom = cells.min(p.headroom);
        if pl.pooled_headroom {
            pool.headroom[pi].shared -= from_headroom;
        }
        p.headroom -= from_headroom;
        let from_shared = (cells - from_headroom).min(p.shared);
        p.shared -= from_shared;
        let from_min = cells - from_headroom - from_shared;
        debug_assert!(from_min <= p.min, "released more than was admitted");
        p.min = p.min.saturating_sub(from_min);
        debug_assert!(cells <= self.cells, "released more than the port holds");
        self.cells = self.cells.saturating_sub(cells);
        pool.ingress[pi].shared -= from_shared;
    }

    /// XON condition for a lossless PG (false for lossy PGs): headroom empty and shared use
    /// below `limit − xon_offset`, or at or below `xon` (SAI: XON at or below
    /// max(xon, limit − xon_offset)).
    #[inline]
    pub fn may_resume(&self, pg: usize, pool: &SharedPool) -> bool {
        let pl = &self.limits[pg & 7];
        if !pl.lossless {
            return false;
        }
        let p = &self.pgs[pg & 7];
        p.headroom == 0
            && (p.shared <= pl.xon || p.shared + pl.xon_offset < pl.shared.resolve(pool.ingress_free(pl.pool as usize)))
    }

    /// The ingress pool PG `pg` draws on.
    pub fn pool_of(&self, pg: usize) -> usize {
        self.limits[pg & 7].pool as usize % MAX_POOLS
    }

    /// The slot (pool in the port's MMU slice) PG `pg` draws on: `SharedPool`'s index.
    pub fn slot_of(&self, pg: usize) -> usize {
        self.limits[pg & 7].pool as usize
    }

    /// What PG `pg` (0..8) holds, with its peaks.
    pub fn pg(&self, pg: usize) -> &PgUse {
        &self.pgs[pg]
    }

    /// Headroom cells `pg` may hold.
    pub fn headroom_limit(&self, pg: usize) -> u32 {
        self.limits[pg & 7].headroom
    }

    /// Cells held by frames that entered through this port, and the peak.
    pub fn cells(&self) -> (u32, u32) {
        (self.cells, self.peak_cells)
    }

    /// Starts every peak again from the current use (a watermark clear).
    pub fn restart_peaks(&mut self) {
        for p in &mut self.pgs {
            p.peak = p.total();
            p.peak_headroom = p.headroom;
            p.peak_shared = p.shared;
        }
        self.peak_cells = self.cells;
    }

    /// Whether nothing is charged to this port (`Switch::buffers_empty` asks every account).
    pub fn is_empty(&self) -> bool {
        self.cells == 0 && self.pgs.iter().all(|p| p.total() == 0)
    }

    /// PGs' shared cells summed per ingress pool, and their headroom drawn from each pool's
    /// shared headroom pool (for the pool audit).
    pub(super) fn shared_sums(&self) -> ([u64; SLOTS], [u64; SLOTS]) {
        let (mut shared, mut headroom) = ([0u64; SLOTS], [0u64; SLOTS]);
        for (l, p) in self.limits.iter().zip(&self.pgs) {
            let i = l.pool as usize & (SLOTS - 1);
            shared[i] += p.shared as u64;
            if l.pooled_headroom {
                headroom[i] += p.headroom as u64;
            }
        }
        (shared, headroom)
    }

    /// The port's total against the sum over its PGs: they differ once a release clamped a
    /// count at zero (`saturating_sub` above; debug builds panic at the release itself).
    pub(super) fn audit(&self) -> Option<String> {
        let sum: u64 = self
            .pgs
            .iter()
            .map(|p| p.min as u64 + p.shared as u64 + p.headroom as u64)
            .sum();
        (sum != self.cells as u64).then(|| format!("port holds {} ingress cells, its PGs {sum}", self.cells))
    }
}
