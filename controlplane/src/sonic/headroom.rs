//! Lossless headroom as SONiC computes it: the traditional model's `pg_profile_lookup.ini`
//! (buffermgrd reads the row for a port's speed and cable length) and NVIDIA's formula for the
//! dynamic model (`"profile": "NULL"`: sonic-swss `cfgmgr/buffer_headroom_mellanox.lua`),
//! re-derived from its description in configs/sonic/README.md §6.3, not copied.

use super::platform::AsicConstants;

/// One row of a `pg_profile_lookup.ini`: `speed cable size xon xoff threshold [xon_offset]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupRow {
    /// Port speed, Mb/s.
    pub speed_mbps: u64,
    /// Cable length as written (`"40m"`).
    pub cable: String,
    /// The profile's `size`, bytes.
    pub size: u64,
    /// `xon`, bytes.
    pub xon: u64,
    /// `xoff`, bytes.
    pub xoff: u64,
    /// `dynamic_th`.
    pub dynamic_th: i64,
    /// `xon_offset`, bytes, when the row gives one.
    pub xon_offset: Option<u64>,
    /// Line number in the file (1-based), for origins.
    pub line: usize,
}

/// Reads a `pg_profile_lookup.ini`: `#` comments, blank lines, rows of six or seven fields.
pub fn parse_lookup(text: &str) -> Result<Vec<LookupRow>, String> {
    let mut rows = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if !(6..=7).contains(&f.len()) {
            return Err(format!(
                "line {}: {} fields; a row is `speed cable size xon xoff threshold [xon_offset]`",
                i + 1,
                f.len()
            ));
        }
        let num = |k: usize, what: &str| -> Result<u64, String> {
            f[k].parse::<u64>()
                .map_err(|_| format!("line {}: {what} {:?} is not a whole number", i + 1, f[k]))
        };
        let dynamic_th = f[5]
            .parse::<i64>()
            .ok()
            .filter(|t| (-8..=7).contains(t))
            .ok_or_else(|| format!("line {}: threshold {:?} is not a dynamic_th (-8..=7)", i + 1, f[5]))?;
        if !f[1].ends_with('m') || f[1][..f[1].len() - 1].parse::<u32>().is_err() {
            return Err(format!("line {}: cable {:?} is not a length such as 40m", i + 1, f[1]));
        }
        let row = LookupRow {
            speed_mbps: num(0, "speed")?,
            cable: f[1].to_string(),
            size: num(2, "size")?,
            xon: num(3, "xon")?,
            xoff: num(4, "xoff")?,
            dynamic_th,
            xon_offset: if f.len() == 7 {
                Some(num(6, "xon_offset")?)
            } else {
                None
            },
            line: i + 1,
        };
        if rows
            .iter()
            .any(|r: &LookupRow| r.speed_mbps == row.speed_mbps && r.cable == row.cable)
        {
            return Err(format!("line {}: a second row for {} {}", i + 1, f[0], f[1]));
        }
        rows.push(row);
    }
    Ok(rows)
}

/// The traffic the dynamic model sizes headroom for (LOSSLESS_TRAFFIC_PATTERN) and its
/// defaults (DEFAULT_LOSSLESS_BUFFER_PARAMETER).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrafficPattern {
    /// `mtu`: the lossless traffic's largest frame, bytes (default 1024).
    pub mtu: f64,
    /// `small_packet_percentage` (default 100).
    pub small_packet_percentage: f64,
}

impl Default for TrafficPattern {
    fn default() -> Self {
        TrafficPattern {
            mtu: 1024.0,
            small_packet_percentage: 100.0,
        }
    }
}

/// What the formula gives, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Computed {
    /// The XON part (the pipeline latency).
    pub xon: u64,
    /// The XOFF part (what arrives after XOFF).
    pub xoff: u64,
    /// The profile's size: xon with a shared headroom pool, xon + xoff without.
    pub size: u64,
}

/// 802.3 31B.3.7 pause quanta a peer may take to react, per speed (Mb/s).
fn pause_quanta(speed_mbps: u64) -> Option<f64> {
    Some(match speed_mbps {
        800_000 | 400_000 => 905.0,
        200_000 => 453.0,
        100_000 => 394.0,
        50_000 => 147.0,
        40_000 => 118.0,
        25_000 => 80.0,
        10_000 => 67.0,
        1_000 => 2.0,
        100 => 1.0,
        _ => return None,
    })
}

fn ceil_k(x: f64) -> u64 {
    ((x / 1024.0).ceil() * 1024.0) as u64
}

/// The port a headroom is computed for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PortLine {
    /// Speed, Mb/s.
    pub speed_mbps: u64,
    /// Cable length, metres.
    pub cable_m: f64,
    /// The port's MTU, bytes.
    pub mtu: f64,
    /// SerDes lanes (8 doubles the pipeline).
    pub lanes: usize,
}

/// NVIDIA's headroom for `port` on an ASIC of `cell` bytes with `asic`'s constants, for
/// traffic `pattern`; `shared_headroom` when the ingress pool has a shared headroom pool (or an
/// over-subscription ratio).
pub fn nvidia(
    asic: &AsicConstants,
    cell: u32,
    port: PortLine,
    pattern: TrafficPattern,
    shared_headroom: bool,
) -> Computed {
    let PortLine {
        speed_mbps,
        cable_m,
        mtu,
        lanes,
    } = port;
    let s = speed_mbps as f64;
    let c = f64::from(cell);
    // 1. The peer's response: pause quanta of 512 bit times, in bytes.
    let peer = pause_quanta(speed_mbps).map_or(asic.peer_response_bytes, |q| q * 512.0 / 8.0);
    // 2. Eight-lane ports have twice the pipeline and a frame more of overhead.
    let (pipeline, speed_overhead) = if lanes == 8 {
        (2.0 * asic.pipeline_latency_bytes, mtu)
    } else {
        (asic.pipeline_latency_bytes, 0.0)
    };
    // 3. Worst-case cells a 64-byte frame takes.
    let w = if c > 128.0 {
        (c / 64.0).ceil()
    } else {
        (2.0 * c / (1.0 + c)).ceil()
    };
    // 4.-5. The small frames' share of bytes, and the cell occupancy it gives.
    let p = pattern.small_packet_percentage;
    let m = pattern.mtu;
    let b = 100.0 * 64.0 / ((p * 64.0 + (100.0 - p) * m) / 100.0);
    let k = (100.0 - b + b * w) / 100.0;
    // 6. The cable, both ways, at 198,000 km/s.
    let cable = 2.0 * cable_m * s * 1e6 / 1.98e8 / 8.0;
    // 8. Spectrum-4's tile delay.
    let tile = if asic.tile_delay { s / 1000.0 * 120.0 / 8.0 } else { 0.0 };
    // 9. Everything still on its way once XOFF is decided.
    let propagation = mtu + cable + asic.mac_phy_delay_bytes + peer + tile;
    // 10.-11. XOFF in whole KiB; without a shared headroom pool and with large frames in the
    // mix, 2 KiB more while that stays below the all-small-frames worst case.
    let mut xoff = ceil_k(m + propagation * k);
    if !shared_headroom && p != 100.0 {
        let full = ceil_k(m + propagation * w);
        if xoff + 2048 < full {
            xoff += 2048;
        }
    }
    // 12.-13.
    let xon = ceil_k(pipeline);
    let size = if shared_headroom {
        ceil_k(xon as f64)
    } else {
        ceil_k(xoff as f64 + xon as f64 + speed_overhead)
    };
    Computed { xon, xoff, size }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sonic::platform::by_name;

    #[test]
    fn lookup_rows_parse_and_bad_ones_are_named() {
        let rows = parse_lookup(
            "# speed cable size xon xoff threshold\n100000 5m 19456 19456 23552 0\n40000 40m 1248 1248 59696 0 2496\n",
        )
        .unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].xoff, rows[0].line, rows[1].xon_offset), (23552, 2, Some(2496)));
        for (bad, why) in [
            ("100000 5m 1 2 3", "5 fields"),
            ("100000 5 1 2 3 0", "cable"),
            ("100000 5m 1 2 x 0", "xoff"),
            ("100000 5m 1 2 3 9", "threshold"),
            ("100000 5m 1 2 3 0\n100000 5m 1 2 3 0", "second row"),
        ] {
            let e = parse_lookup(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    /// The worked example of configs/sonic/README.md §6.3: Spectrum-1, 100G, 5 m, MTU 9100,
    /// 1 KiB lossless frames half of them small.
    #[test]
    fn nvidia_formula_matches_the_worked_example() {
        let p = by_name("spectrum1").unwrap();
        let pattern = TrafficPattern {
            mtu: 1024.0,
            small_packet_percentage: 50.0,
        };
        let port = PortLine {
            speed_mbps: 100_000,
            cable_m: 5.0,
            mtu: 9100.0,
            lanes: 4,
        };
        let shp = nvidia(&p.headroom.unwrap(), p.cell_bytes, port, pattern, true);
        assert_eq!(
            shp,
            Computed {
                xon: 19456,
                xoff: 41984,
                size: 19456
            }
        );
        let own = nvidia(&p.headroom.unwrap(), p.cell_bytes, port, pattern, false);
        assert_eq!(
            own,
            Computed {
                xon: 19456,
                xoff: 44032,
                size: 63488
            }
        );
    }
}
