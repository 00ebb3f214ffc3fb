//! The counts each QoS test expects, in frames of the test's packet size, derived from the
//! config by the platform's buffer rules (what sonic-mgmt's NVIDIA generator does from a DUT's
//! buffer profiles, and what a Broadcom `qos_params.*.yaml` holds for its SKU), or read from a
//! sonic-mgmt `qos_params.*.yaml` (`--params`, [`super::yaml`]).
//!
//! The derivation is SAI's reading of the profiles, which the config already holds resolved
//! for the platform (controlplane::sonic): a PG or queue first fills its reserve (`size` /
//! `min`), then the shared pool while its shared use stays within its limit (a static byte
//! limit, or alpha × the pool's free cells for `dynamic_th`, alpha = 2^dynamic_th); a lossless
//! PG asks for XOFF once it reaches that limit, then takes its headroom (`xoff`), then drops. It
//! resumes (XON) once its shared use is at or below max(xon, limit − xon_offset) with its
//! headroom empty. A frame takes ceil(bytes / cell) cells and goes whole into one region.
//!
//! These are written out from the rules, frame by frame, on purpose: not by asking the switch's
//! MMU, which is what the tests check.

use controlplane::{Config, PoolDir, Threshold};

/// Where a lossless PG's frames go, counted from an empty buffer, one source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LosslessPoints {
    /// Cells per frame.
    pub occupancy: u64,
    /// The frame (counted from 1) at which the PG asks for XOFF.
    pub trig_pfc: u64,
    /// The first frame dropped at ingress (its headroom is full).
    pub trig_ingr_drp: u64,
    /// The most frames the PG may hold with XON sent (it resumes at or below this).
    pub xon_frames: u64,
    /// The PG's reserve, in frames (they do not count as shared).
    pub fill_min: u64,
    /// PFCXonTest's three sends as the suite counts them from a parameters file's `xon_N`
    /// (its own `pkts_num_trig_pfc` T, `pkts_num_dismiss_pfc` X, `pkts_num_hysteresis` H, in
    /// cells: (T − X − H) // occupancy − margin, (X + H) // occupancy + 2·margin − 1, 1);
    /// None: from `trig_pfc` and `xon_frames`.
    pub xon_sends: Option<[u64; 3]>,
    /// Cells of shared pool the PG holds at XOFF (its share).
    pub shared_cells_at_xoff: u64,
    /// How the numbers came out, for `--explain`.
    pub derivation: Vec<String>,
}

/// Where a lossy flow's frames go, one source, one destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LossyPoints {
    /// Cells per frame.
    pub occupancy: u64,
    /// The first frame dropped.
    pub trig_drp: u64,
    /// Whether that drop is the egress queue's (true) or the ingress PG's (false).
    pub at_egress: bool,
    /// How the numbers came out.
    pub derivation: Vec<String>,
}

/// One side's accounting rules in cells: reserve, limit, pool.
#[derive(Debug, Clone, Copy)]
struct Account {
    min: u64,
    limit: Threshold,
    pool: u64,
    cell: u64,
}

impl Account {
    /// The shared limit with `pool_used` cells of the pool in use.
    fn limit(&self, pool_used: u64) -> u64 {
        match self.limit {
            Threshold::Static { bytes } => bytes.div_ceil(self.cell),
            Threshold::Dynamic { alpha } => (alpha * self.pool.saturating_sub(pool_used) as f64).floor() as u64,
            Threshold::Unlimited => self.pool,
        }
    }

    fn describe(&self, what: &str) -> String {
        let limit = match self.limit {
            Threshold::Static { bytes } => format!("static {bytes} B = {} cells", bytes.div_ceil(self.cell)),
            Threshold::Dynamic { alpha } => {
                format!(
                    "dynamic: alpha {alpha} × the pool's free cells (2^dynamic_th; pool {} cells)",
                    self.pool
                )
            }
            Threshold::Unlimited => format!("none (the whole pool, {} cells)", self.pool),
        };
        format!("{what}: reserve {} cells, shared limit {limit}", self.min)
    }
}

/// A region's fill: reserve, then shared within the limit; what did not fit.
#[derive(Debug, Clone, Copy, Default)]
struct Fill {
    min: u64,
    shared: u64,
    /// Shared cells of the same pool held by others (earlier PGs of a multi-source test).
    others: u64,
}

impl Fill {
    /// Takes `occ` cells if they fit the reserve or the shared limit; false if not.
    fn take(&mut self, a: &Account, occ: u64) -> bool {
        let used = self.shared + self.others;
        if self.min + occ <= a.min {
            self.min += occ;
            true
        } else if self.shared + occ <= a.limit(used) && used + occ <= a.pool {
            self.shared += occ;
            true
        } else {
            false
        }
    }

    fn at_limit(&self, a: &Account) -> bool {
        self.shared >= a.limit(self.shared + self.others)
    }
}

/// Where `frames` frames to a lossless PG stand, with `others` shared cells of its pool held
/// by other PGs: (shared cells, headroom cells, frames dropped).
pub fn lossless_fill(cfg: &Config, port: usize, pg: usize, len: usize, others: u64, frames: u64) -> (u64, u64, u64) {
    let (a, headroom, occ) = pg_account(cfg, port, pg, len);
    let mut fill = Fill {
        others,
        ..Fill::default()
    };
    let (mut used_headroom, mut dropped) = (0, 0);
    for _ in 0..frames {
        if fill.take(&a, occ) {
        } else if used_headroom + occ <= headroom {
            used_headroom += occ;
        } else {
            dropped += 1;
        }
    }
    (fill.shared, used_headroom, dropped)
}

/// A lossless PG's ingress account, its headroom in cells and the cells a frame takes.
fn pg_account(cfg: &Config, port: usize, pg: usize, len: usize) -> (Account, u64, u64) {
    let cell = u64::from(cfg.buffer.cell_bytes);
    let p = &cfg.ports[port];
    let profile = &p.pgs[pg];
    let a = Account {
        min: profile.min_bytes.div_ceil(cell),
        limit: profile.shared,
        pool: pool_cells(cfg, PoolDir::Ingress, profile.pool),
        cell,
    };
    (a, p.headroom_bytes[pg].div_ceil(cell), occupancy(cfg, len))
}

/// The cells of pool `index` a PG or queue sees: its MMU slice's even share of the pool (the
/// whole pool with one slice).
fn pool_cells(cfg: &Config, dir: PoolDir, index: u8) -> u64 {
    let cell = u64::from(cfg.buffer.cell_bytes);
    let cells = match cfg.buffer.pools_of(dir).nth(usize::from(index)) {
        Some(p) => p.size_bytes / cell,
        None => cfg.buffer.total_bytes / cell,
    };
    cells / u64::from(cfg.buffer.slices.max(1))
}

/// Cells a frame of `len` bytes takes.
pub fn occupancy(cfg: &Config, len: usize) -> u64 {
    (len as u64).div_ceil(u64::from(cfg.buffer.cell_bytes)).max(1)
}

/// PG `pg` of port index `port`, frames of `len` bytes, from an empty buffer.
pub fn lossless(cfg: &Config, port: usize, pg: usize, len: usize) -> LosslessPoints {
    lossless_with(cfg, port, pg, len, 0)
}

/// As [`lossless`], with `others` shared cells of the PG's pool held by other PGs.
pub fn lossless_with(cfg: &Config, port: usize, pg: usize, len: usize, others: u64) -> LosslessPoints {
    let cell = u64::from(cfg.buffer.cell_bytes);
    let p = &cfg.ports[port];
    let profile = &p.pgs[pg];
    let (a, headroom, occ) = pg_account(cfg, port, pg, len);
    let mut derivation = vec![
        format!(
            "{} PG {pg}: {} B frames take {occ} cell(s) of {cell} B",
            p.name.clone().unwrap_or_else(|| p.id.to_string()),
            len
        ),
        a.describe("ingress"),
        format!("headroom {} B = {headroom} cells", p.headroom_bytes[pg]),
    ];
    if others > 0 {
        derivation.push(format!("{others} cells of the pool held by the PGs filled before"));
    }
    let mut fill = Fill {
        others,
        ..Fill::default()
    };
    let mut used_headroom = 0;
    let (mut trig_pfc, mut frame) = (None, 0u64);
    let trig_ingr_drp = loop {
        frame += 1;
        let in_headroom = if fill.take(&a, occ) {
            false
        } else if used_headroom + occ <= headroom {
            used_headroom += occ;
            true
        } else {
            break frame;
        };
        if trig_pfc.is_none() && (in_headroom || fill.at_limit(&a)) {
            trig_pfc = Some((frame, fill.shared));
        }
        if frame > 100_000_000 {
            // A PG that never fills (no limit, no pool): nothing to measure.
            break u64::MAX;
        }
    };
    let (trig_pfc, shared_at_xoff) = trig_pfc.unwrap_or((trig_ingr_drp, fill.shared));
    derivation.push(format!(
        "XOFF at frame {trig_pfc}: the reserve full and {shared_at_xoff} shared cells, at the limit"
    ));
    derivation.push(format!(
        "first ingress drop at frame {trig_ingr_drp}: after {} frames of headroom",
        trig_ingr_drp - trig_pfc
    ));
    // XON: the most frames held with shared use at or below xon, or below limit − xon_offset
    // (SAI: resume at or below max(xon, limit − xon_offset)), headroom empty.
    let (xon, offset) = (
        profile.xon_bytes.div_ceil(cell),
        profile.xon_offset_bytes.div_ceil(cell),
    );
    let fill_min = a.min / occ;
    let xon_frames = (0..trig_pfc)
        .rev()
        .find(|&held| {
            let shared = held.saturating_sub(fill_min) * occ;
            shared <= xon || shared + offset < a.limit(shared + others)
        })
        .unwrap_or(0);
    derivation.push(format!(
        "XON at or below {xon_frames} frames held: shared use at or below max(xon {xon}, limit − xon_offset {offset}) cells"
    ));
    LosslessPoints {
        occupancy: occ,
        trig_pfc,
        trig_ingr_drp,
        xon_frames,
        fill_min,
        xon_sends: None,
        shared_cells_at_xoff: shared_at_xoff,
        derivation,
    }
}

/// A lossy flow from port index `src` (PG `pg`) to port index `dst` (queue `q`).
pub fn lossy(cfg: &Config, src: usize, pg: usize, dst: usize, q: usize, len: usize) -> LossyPoints {
    let cell = u64::from(cfg.buffer.cell_bytes);
    let (sp, dp) = (&cfg.ports[src], &cfg.ports[dst]);
    let ing = Account {
        min: sp.pgs[pg].min_bytes.div_ceil(cell),
        limit: sp.pgs[pg].shared,
        pool: pool_cells(cfg, PoolDir::Ingress, sp.pgs[pg].pool),
        cell,
    };
    let egr = Account {
        min: dp.queues[q].min_bytes.div_ceil(cell),
        limit: dp.queues[q].shared,
        pool: pool_cells(cfg, PoolDir::Egress, dp.queues[q].pool),
        cell,
    };
    let occ = occupancy(cfg, len);
    let (mut fi, mut fe) = (Fill::default(), Fill::default());
    let mut frame = 0u64;
    let (trig_drp, at_egress) = loop {
        frame += 1;
        // The ingress side is asked first, as an ASIC's admission does: a frame it refuses
        // never reaches the queue.
        if !fi.take(&ing, occ) {
            break (frame, false);
        }
        if !fe.take(&egr, occ) {
            break (frame, true);
        }
        if frame > 100_000_000 {
            break (u64::MAX, true);
        }
    };
    let derivation = vec![
        format!("{len} B frames take {occ} cell(s) of {cell} B"),
        ing.describe(&format!("ingress PG {pg}")),
        egr.describe(&format!("egress queue {q}")),
        format!(
            "first drop at frame {trig_drp}, by the {}",
            if at_egress {
                "egress queue's limit"
            } else {
                "ingress PG's limit"
            }
        ),
    ];
    LossyPoints {
        occupancy: occ,
        trig_drp,
        at_egress,
        derivation,
    }
}
