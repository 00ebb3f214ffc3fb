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
    },
    Platform {
        name: "spectrum2",
        title: "NVIDIA Spectrum-2 (SN3700, SN3800)",
        cell_bytes: 144,
        size_meaning: SizeMeaning::XonPlusXoff,
        headroom: Some(SPECTRUM),
        source: "sonic-buildimage platform/mellanox/asic_table.j2",
    },
    Platform {
        name: "spectrum3",
        title: "NVIDIA Spectrum-3 (SN4600C, SN4700)",
        cell_bytes: 144,
        size_meaning: SizeMeaning::XonPlusXoff,
        headroom: Some(SPECTRUM),
        source: "sonic-buildimage platform/mellanox/asic_table.j2",
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
    },
    Platform {
        name: "tomahawk2",
        title: "Broadcom Tomahawk 2 (Arista 7260CX3, Dell Z9264F)",
        cell_bytes: 208,
        size_meaning: SizeMeaning::MinBesideXoff,
        headroom: None,
        source: "sonic-mgmt tests/qos/files/qos_params.th2.yaml (cell_size 208); SAI saibuffer.h",
    },
];

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
