//! Where switch ASICs read the same SONiC buffer tables differently: one row per platform,
//! data rather than branches in the pipeline, each with its source (configs/sonic/README.md
//! §6–§7 has the reading behind every figure).

use std::fmt;

/// What a lossless PG profile's `size` means on a platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeMeaning {
    /// NVIDIA Spectrum: `size` is the PG's whole private buffer, `xon + xoff` without a shared
    /// headroom pool (XOFF when `size − xoff` of it is used, drop when all of it is), `xon`
    /// with one (the `xoff` then comes from the pool's shared headroom). So the PG's reserve
    /// before XOFF is `size − xoff` (or `size`), and its headroom is `xoff`.
    /// Source: Mellanox SAI (`mlnx_sai_buffer.c`, the SAI→SDK mapping) and SONiC's
    /// `doc/qos/dynamically-headroom-calculation.md`.
    XonPlusXoff,
    /// Broadcom: `size` is the PG's guaranteed minimum and `xoff` its headroom beside it (from
    /// the shared headroom pool when the ingress pool has one). Source: SAI `saibuffer.h`
    /// (RESERVED_BUFFER_SIZE, XOFF_TH) and sonic-mgmt's TH2 parameters
    /// (`pkts_num_fill_ingr_min` = size in cells).
    MinBesideXoff,
}

/// One switch ASIC family's buffer rules.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Platform {
    /// The name `--platform` takes.
    pub name: &'static str,
    /// A readable name.
    pub title: &'static str,
    /// The MMU's accounting cell, bytes.
    pub cell_bytes: u32,
    /// How a lossless profile's `size` is read.
    pub size_meaning: SizeMeaning,
    /// NVIDIA's headroom formula applies (`"profile": "NULL"`, the dynamic buffer model):
    /// Spectrum's ASIC constants, or None where SONiC publishes no formula.
    pub headroom: Option<AsicConstants>,
    /// Where the figures come from.
    pub source: &'static str,
    /// How the MMU is split into slices (Broadcom's XPEs / ITMs): None where it is one.
    pub slices: Option<Slices>,
    /// NVIDIA: cells of a lossless PG's private headroom (`xoff`) the ASIC keeps for itself,
    /// so the first ingress drop comes that many cells before the xoff is spent; with a
    /// shared headroom pool the PG may instead take two xoffs of it before dropping.
    /// Source: sonic-mgmt `tests/qos/files/mellanox/qos_param_generator.py` (b4ba9de3c9bb),
    /// `asic_param_dic[*]['headroom_overhead']` and the `pkts_num_trig_ingr_drp` rule.
    pub headroom_overhead_cells: Option<u32>,
    /// sonic-mgmt's key for the ASIC in `qos_params.<key>.yaml` (`mellanox` for NVIDIA's).
    pub qos_params_key: &'static str,
    /// What a BUFFER_POOL's `size` holds.
    pub pool_size: PoolSize,
}

/// What a BUFFER_POOL's `size` holds on a platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolSize {
    /// The shared pool itself: the SKU's templates have taken the reserves and the shared
    /// headroom pool out already (Spectrum, Tomahawk 1 and 2).
    Shared,
    /// The whole service pool, the same buffer for ingress and egress: each slice's shared
    /// part is its share of `size` less the ingress pool's `xoff` (the shared headroom pool),
    /// less the reserves (`size` of the PG profiles) of the slice's ports and the reserves of
    /// every port's queues (a queue's reserve is kept in each slice). Tomahawk 5.
    WholeLessReserves,
}

/// An MMU split into slices, each holding an even share of every pool; a port's PGs and
/// queues are accounted in its pipe's slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slices {
    /// Slices (XPEs / ITMs).
    pub count: u8,
    /// SerDes lanes per pipe: a port's pipe is (its first lane − `first_lane`) / this.
    pub lanes_per_pipe: u32,
    /// The number of the ASIC's first lane in PORT's `lanes`.
    pub first_lane: u32,
    /// Pipes per slice: a port's slice is its pipe / this (capped at the last slice).
    pub pipes_per_slice: u32,
    /// Where the split comes from.
    pub source: &'static str,
    /// The slice of each pipe, where the slices are not runs of `pipes_per_slice` pipes
    /// (empty: pipe / `pipes_per_slice`).
    pub pipe_slice: &'static [u8],
}

impl Slices {
    /// The slice of a port whose first lane is `lane` (slice 0 when PORT gives no lanes).
    pub fn of_lane(&self, lane: Option<u64>) -> u8 {
        let Some(lane) = lane else { return 0 };
        let pipe = lane.saturating_sub(u64::from(self.first_lane)) / u64::from(self.lanes_per_pipe.max(1));
        if let Some(&s) = usize::try_from(pipe).ok().and_then(|p| self.pipe_slice.get(p)) {
            return s.min(self.count.max(1) - 1);
        }
        (pipe / u64::from(self.pipes_per_slice.max(1))).min(u64::from(self.count.max(1)) - 1) as u8
    }
}

/// The ASIC_TABLE constants NVIDIA's headroom formula reads (sonic-buildimage
/// `platform/mellanox/asic_table.j2`), in bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AsicConstants {
    /// The ingress pipeline's latency: the XON part of a lossless profile.
    pub pipeline_latency_bytes: f64,
    /// MAC and PHY delay.
    pub mac_phy_delay_bytes: f64,
    /// A peer's response time where the speed has no 802.3 pause quanta.
    pub peer_response_bytes: f64,
    /// Spectrum-4 and later add a tile delay of speed/1000 × 120/8 bytes.
    pub tile_delay: bool,
}

const SPECTRUM: AsicConstants = AsicConstants {
    pipeline_latency_bytes: 19.0 * 1024.0,
    mac_phy_delay_bytes: 0.8 * 1024.0,
    peer_response_bytes: 3.8 * 1024.0,
    tile_delay: false,
};

/// Every platform rocesw knows.
pub const PLATFORMS: &[Platform] = &[
    Platform {
        name: "spectrum1",
        title: "NVIDIA Spectrum-1 (SN2700, SN2410, SN2100)",
        cell_bytes: 96,
        size_meaning: SizeMeaning::XonPlusXoff,
        headroom: Some(SPECTRUM),
        source: "sonic-buildimage platform/mellanox/asic_table.j2; sonic-mgmt tests/qos/files/mellanox/qos_param_generator.py",
        slices: None,
        headroom_overhead_cells: Some(95),
        qos_params_key: "mellanox",
        pool_size: PoolSize::Shared,
    },
    Platform {
        name: "spectrum2",
        title: "NVIDIA Spectrum-2 (SN3700, SN3800)",
        cell_bytes: 144,
        size_meaning: SizeMeaning::XonPlusXoff,
        headroom: Some(SPECTRUM),
        source: "sonic-buildimage platform/mellanox/asic_table.j2",
        slices: None,
        headroom_overhead_cells: Some(64),
        qos_params_key: "mellanox",
        pool_size: PoolSize::Shared,
    },
    Platform {
        name: "spectrum3",
        title: "NVIDIA Spectrum-3 (SN4600C, SN4700)",
        cell_bytes: 144,
        size_meaning: SizeMeaning::XonPlusXoff,
        headroom: Some(SPECTRUM),
        source: "sonic-buildimage platform/mellanox/asic_table.j2",
        slices: None,
        headroom_overhead_cells: Some(64),
        qos_params_key: "mellanox",
        pool_size: PoolSize::Shared,
    },
    Platform {
        name: "spectrum4",
        title: "NVIDIA Spectrum-4 (SN5400, SN5600)",
        cell_bytes: 192,
        size_meaning: SizeMeaning::XonPlusXoff,
        headroom: Some(AsicConstants {
            tile_delay: true,
            ..SPECTRUM
        }),
        source: "sonic-buildimage platform/mellanox/asic_table.j2",
        slices: None,
        headroom_overhead_cells: Some(47),
        qos_params_key: "mellanox",
        pool_size: PoolSize::Shared,
    },
    Platform {
        name: "tomahawk1",
        title: "Broadcom Tomahawk (Dell S6100, Z9100; Arista 7060CX-32S)",
        cell_bytes: 208,
        size_meaning: SizeMeaning::MinBesideXoff,
        headroom: None,
        source: "sonic-mgmt tests/qos/files/qos_params.th.yaml (b4ba9de3c9bb; 208 B cells: the TH2 reading); SAI saibuffer.h",
        slices: Some(Slices {
            count: 4,
            lanes_per_pipe: 32,
            first_lane: 1,
            pipes_per_slice: 1,
            source: "Tomahawk's four XPEs, one per pipe of 32 lanes: sonic-mgmt tests/qos/files/qos_params.th.yaml \
                     (b4ba9de3c9bb) fits the S6100's pools split in four (XOFF 6 + 1/2 x 10,875,072 / 208 / 4 = 6,541.5; yaml 6,542)",
            pipe_slice: &[],
        }),
        headroom_overhead_cells: None,
        qos_params_key: "th",
        pool_size: PoolSize::Shared,
    },
    Platform {
        name: "tomahawk2",
        title: "Broadcom Tomahawk 2 (Arista 7260CX3, Dell Z9264F)",
        cell_bytes: 208,
        size_meaning: SizeMeaning::MinBesideXoff,
        headroom: None,
        source: "sonic-mgmt tests/qos/files/qos_params.th2.yaml (cell_size 208); SAI saibuffer.h",
        slices: Some(Slices {
            count: 4,
            lanes_per_pipe: 64,
            first_lane: 1,
            pipes_per_slice: 1,
            source: "Tomahawk 2's four XPEs, one per pipe of 64 lanes (DESIGN.md, \"SONiC's own numbers\"): \
                     sonic-mgmt tests/qos/files/qos_params.th2.yaml (b4ba9de3c9bb) fits each pool split in four",
            pipe_slice: &[],
        }),
        headroom_overhead_cells: None,
        qos_params_key: "th2",
        pool_size: PoolSize::Shared,
    },
    // Tomahawk 5 (BCM78900), from sonic-mgmt tests/qos/files/qos_params.th5.yaml (commit
    // b4ba9de3c9bb) against the SKUs' templates in sonic-buildimage (commit 086b03bd70f9):
    // - cells of 254 B: the yaml's `cell_size: 254`; every pool and profile size of the TH5
    //   templates is a multiple of 254 (device/arista/x86_64-arista_7060x6_64pe_b/
    //   Arista-7060X6-64PE-B-P64/buffers_defaults_ft2.j2: pool 164,733,224 B = 648,556 cells,
    //   xoff 17,962,880 B = 70,720 cells).
    // - a lossless profile's `size` is the PG's reserve beside its `xoff`: the yaml's
    //   `pkts_num_fill_min: 34` for topo-ft2-64 is the lookup row's size 8,636 B / 254
    //   (Arista-7060X6-64PE-B-P64/pg_profile_lookup.ini `800000 5m 8636 0 724662`), and its
    //   `pkts_num_trig_ingr_drp` − `pkts_num_trig_pfc` = 2,854 = xoff 724,662 / 254 + 1.
    // - two ITMs, each with half of the pool and of the shared headroom pool: topo-ft2-64's
    //   `hdrm_pool_size` fills 12 PGs' xoff (2,853 cells) and 1,124 more, 35,360 cells =
    //   70,720 / 2; sonic-mgmt commit 19ffa9b1c3 ("Fix testQosSaiHeadroomPoolSize on TH5")
    //   says Ethernet128 (lanes 153-160, pipe 4) is on another ITM than Ethernet0-120 (pipes
    //   0-3), so the ITMs are not the halves of the lanes: pipes 0-3 and 12-15 on ITM 0,
    //   4-11 on ITM 1 (our reading; the ft2 port counts per ITM, 32 and 32, fit it).
    // - `size` is the whole service pool: the XOFF count 142,285 of topo-ft2-64 is 34 +
    //   1/2 x (648,556 − 70,720) / 2 − 4,416, and 4,416 = the ITM's 32 ports x 2 lossless PGs
    //   x 34 cells + all 64 ports x 5 lossy queues x 7 cells (egress_lossy_profile size 1,778
    //   B); topo-t1-isolated-d128 on Arista-7060X6-64PE-B-O128 (sonic-mgmt 4a5abfb7dd) fits
    //   the same rule to the frame (133,349 = 74 + 1/2 x ((647,660 − 86,656) / 2 − 64 x 148 −
    //   128 x 35)), and so do the lossy queues' drops, so the egress pool is the same buffer.
    Platform {
        name: "tomahawk5",
        title: "Broadcom Tomahawk 5 (Arista 7060X6, Dell Z9864F, Micas M2-W6940)",
        cell_bytes: 254,
        size_meaning: SizeMeaning::MinBesideXoff,
        headroom: None,
        source: "sonic-mgmt tests/qos/files/qos_params.th5.yaml (b4ba9de3c9bb, cell_size 254) against sonic-buildimage \
                 device/arista/x86_64-arista_7060x6_64pe_b (086b03bd70f9); SAI saibuffer.h",
        slices: Some(Slices {
            count: 2,
            lanes_per_pipe: 32,
            first_lane: 1,
            pipes_per_slice: 8,
            source: "Tomahawk 5's two ITMs, pipes 0-3 and 12-15 on the first: sonic-mgmt tests/qos/files/qos_params.th5.yaml \
                     (b4ba9de3c9bb) topo-ft2-64's headroom pool fill (35,360 cells = half the xoff) and commit 19ffa9b1c3 \
                     (Ethernet128, pipe 4, on another ITM than pipes 0-3)",
            pipe_slice: &[0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0],
        }),
        headroom_overhead_cells: None,
        qos_params_key: "th5",
        pool_size: PoolSize::WholeLessReserves,
    },
];

impl Platform {
    /// The headroom a lossless PG may fill before it drops, from its profile's `xoff`, and
    /// what the import's comment says of it: NVIDIA's ASICs keep `headroom_overhead_cells`
    /// of a private xoff, and let a PG with a shared headroom pool take two xoffs of it
    /// (sonic-mgmt's generator: `pkts_num_trig_ingr_drp` is the shared limit plus the
    /// headroom less the overhead, or plus another xoff with a shared headroom pool).
    pub fn usable_headroom(&self, xoff: u64, shared_pool: bool) -> (u64, Option<String>) {
        let Some(cells) = self.headroom_overhead_cells else {
            return (xoff, None);
        };
        if shared_pool {
            return (
                2 * xoff,
                Some(format!(
                    " × 2: on {} a PG takes two xoffs of the shared headroom pool",
                    self.name
                )),
            );
        }
        let overhead = u64::from(cells) * u64::from(self.cell_bytes);
        (
            xoff.saturating_sub(overhead),
            Some(format!(
                " less {}'s headroom overhead of {cells} cells ({overhead} B)",
                self.name
            )),
        )
    }

    /// The profile `xoff` whose usable headroom is `headroom` ([`Platform::usable_headroom`]'s
    /// inverse, for export).
    pub fn xoff_of_headroom(&self, headroom: u64, shared_pool: bool) -> u64 {
        match self.headroom_overhead_cells {
            None => headroom,
            Some(_) if shared_pool => headroom / 2,
            Some(cells) => headroom + u64::from(cells) * u64::from(self.cell_bytes),
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.title)
    }
}

/// The platform named `name` (`--platform`).
pub fn by_name(name: &str) -> Option<&'static Platform> {
    PLATFORMS.iter().find(|p| p.name.eq_ignore_ascii_case(name.trim()))
}

/// The platform of a DEVICE_METADATA `platform` string (`x86_64-mlnx_msn2700-r0`).
pub fn by_sonic_platform(platform: &str) -> Option<&'static Platform> {
    let p = platform.to_ascii_lowercase();
    let name = if p.contains("mlnx_msn2") || p.contains("nvidia_sn2") || p.contains("mlnx_sn2") {
        "spectrum1"
    } else if p.contains("mlnx_msn3") || p.contains("nvidia_sn3") {
        "spectrum2"
    } else if p.contains("mlnx_msn4") || p.contains("nvidia_sn4") || p.contains("mlnx_sn4") {
        "spectrum3"
    } else if p.contains("nvidia_sn5") || p.contains("mlnx_sn5") {
        "spectrum4"
    } else if p.contains("arista_7260cx3") || p.contains("z9264f") {
        "tomahawk2"
    } else if p.contains("s6100") || p.contains("z9100") || p.contains("arista_7060_cx32s") {
        "tomahawk1"
    } else if p.contains("arista_7060x6") || p.contains("z9864f") || p.contains("w6940") {
        // sonic-buildimage (086b03bd70f9): these platforms' SKUs carry th5-*.config.bcm files.
        "tomahawk5"
    } else {
        return None;
    };
    by_name(name)
}

/// Every name `--platform` takes, for messages.
pub fn names() -> String {
    PLATFORMS.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

/// The α a profile's `dynamic_th` means: 2^n, where n ≤ −8 means 0 (no shared use) and n ≥ 7
/// no limit, as NVIDIA's SAI reads the bounds; SONiC's YANG keeps n to −8..=7 on every
/// platform. `None` = unlimited.
pub fn alpha(dynamic_th: i64) -> Option<f64> {
    crate::units::alpha_from_dynamic_th(dynamic_th)
}
