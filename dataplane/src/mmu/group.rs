//! Admission of a group of frames from one ingress PG to one egress queue in one step: the
//! limits checked once against the group's total and every count and peak written once,
//! when that provably reaches what admitting the frames one by one in order would
//! ([`super::admit`] each); otherwise nothing is charged and the caller admits them one by
//! one.
//!
//! Why it is exact: within a group nothing but its own frames moves the accounts it reads.
//! Each frame's region test compares a use that only grows against a limit that only shrinks
//! as the group is charged (a dynamic limit falls with the pool's free cells), so when the
//! group's last frame passes a test, every earlier frame passed it too; and the one test whose
//! direction is the other way (a frame fits its reserved minimum while that has room) is
//! decided for the whole group by its smallest frame. Peaks of counts that only grow are
//! reached at the group's end. A group that would need two regions, headroom, a refusal or an
//! XOFF is left to the frame-by-frame path, which decides those exactly as it always has.
//!
//! Each half works alone too, for frames that cross between shards (`crate::shard`), whose
//! PG is charged on one shard and queue on another: [`charge_group_to_pg`] and
//! [`admit_group_to_queue`]. The argument holds for each side by itself, since neither side's
//! limits read the other's counts.

use super::{PgAccount, QueueAccount, SharedPool};

/// What a group of frames adds up to, in cells and bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupTotals {
    /// Cells of all the group's frames.
    pub cells: u32,
    /// Cells of its smallest frame.
    pub min_cells: u32,
    /// Cells of its last frame.
    pub last_cells: u32,
    /// Bytes of all its frames.
    pub bytes: u64,
}

impl GroupTotals {
    /// No frame yet.
    pub const EMPTY: GroupTotals = GroupTotals {
        cells: 0,
        min_cells: u32::MAX,
        last_cells: 0,
        bytes: 0,
    };

    /// Adds a frame of `cells` and `bytes` at the group's end.
    #[inline(always)]
    pub fn add(&mut self, cells: u32, bytes: u32) {
        self.cells += cells;
        self.min_cells = self.min_cells.min(cells);
        self.last_cells = cells;
        self.bytes += bytes as u64;
    }
}

/// Admits the whole group `g` from PG `pg` of `ingress` to queue `queue` of `egress` when
/// admitting its frames one by one would admit every one of them, in one region on each side,
/// without asking for XOFF; charges it (counts and peaks as those admissions would leave
/// them) and returns true. Otherwise charges nothing and returns false.
#[inline(always)]
pub fn admit_group(
    ingress: &mut PgAccount,
    pg: usize,
    egress: &mut QueueAccount,
    queue: usize,
    pool: &mut SharedPool,
    g: &GroupTotals,
) -> bool {
    let Some(region) = ingress.group_region(pg, g, pool) else {
        return false;
    };
    let lossless = ingress.is_lossless(pg);
    let Some(to_min) = egress.group_fits(queue, g, lossless, pool) else {
        return false;
    };
    ingress.charge_group(pg, region, g.cells, pool);
    egress.charge(queue, to_min, g.cells, g.bytes, pool);
    true
}

/// The ingress half of [`admit_group`], for frames whose queue is on another shard
/// (`crate::shard`): charges the whole group `g` to PG `pg` of `ingress` when charging its
/// frames one by one ([`PgAccount::reserve`] and [`PgAccount::confirm`] each, what the switch's
/// `charge_pg` does) would take every one in one region without asking for XOFF, with the
/// counts and peaks those would leave; otherwise charges nothing and returns false. Exact for
/// the same reason as [`admit_group`]: the ingress side's limits do not read the egress
/// side's counts.
#[inline(always)]
pub fn charge_group_to_pg(ingress: &mut PgAccount, pg: usize, pool: &mut SharedPool, g: &GroupTotals) -> bool {
    let Some(region) = ingress.group_region(pg, g, pool) else {
        return false;
    };
    ingress.charge_group(pg, region, g.cells, pool);
    true
}

/// The egress half of [`admit_group`], for frames whose PG is charged elsewhere already: frames
/// that crossed from the shard owning their ingress port (`crate::shard`), which charged the PG
/// and decided XOFF there. Admits the whole group `g` to queue `queue` of `egress` when
/// admitting its frames one by one ([`QueueAccount::admit`] each) would admit every one in one
/// region, and charges it as those admissions would leave the counts and peaks; otherwise
/// charges nothing and returns false. `lossless`: the frames' PG is lossless (the queue's limit
/// never refuses them). Exact for the same reason as [`admit_group`]: the egress side's limits
/// do not read the ingress side's counts.
#[inline(always)]
pub fn admit_group_to_queue(
    egress: &mut QueueAccount,
    queue: usize,
    lossless: bool,
    pool: &mut SharedPool,
    g: &GroupTotals,
) -> bool {
    let Some(to_min) = egress.group_fits(queue, g, lossless, pool) else {
        return false;
    };
    egress.charge(queue, to_min, g.cells, g.bytes, pool);
    true
}
