//! The tables of `show` and `watch`, drawn from the switch's answers.

use crate::buffer::{BufferView, Limit};
use crate::cli::Show;
use controlplane::protocol::{self, FdbRow, WatermarksData};
use controlplane::snapshot::{Drops, PortColumn, PortPeaks, PortReport, Snapshot};
use controlplane::{units, vlarb_admit};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// How buffer levels and watermarks are shown: in bytes by default (cells × the cell size,
/// as SONiC's `show ... watermark` and `show buffer` give them), with B/KiB/MiB suffixes; in
/// cells with `--cells`. Frames are counts and rates are per second whatever this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Levels {
    Bytes { cell: u64 },
    Cells,
}

impl Levels {
    /// A level of `cells` cells.
    pub fn of(self, cells: u32) -> String {
        match self {
            Levels::Bytes { cell } => units::human_bytes(u64::from(cells) * cell),
            Levels::Cells => cells.to_string(),
        }
    }

    /// What the figures are in, for a header.
    pub fn unit(self) -> String {
        match self {
            Levels::Bytes { cell } => format!("bytes (cells of {cell} B; --cells for cells)"),
            Levels::Cells => "cells".to_string(),
        }
    }
}

/// The line above every `show` table and `watch` update: when (UTC, this machine's clock) and
/// over what time, and the unit of levels where the table has any.
pub fn header(at: std::time::SystemTime, span: &str, levels: Option<Levels>) -> String {
    let mut h = format!("at {}, {span}", units::utc_clock(at));
    if let Some(l) = levels {
        let _ = write!(h, "; levels in {}", l.unit());
    }
    h
}

/// Whether a table of `what` shows buffer levels (and so says their unit in its header).
pub fn has_levels(what: Show) -> bool {
    matches!(what, Show::Queues | Show::Pgs | Show::Buffer | Show::Watermarks)
}

/// The names of a switch's ports, by id (the ports the config names): what the tables whose
/// answer has ids only (`fdb`) name them by.
pub type PortNames = BTreeMap<u16, String>;

/// A table of the switch's answer `data` to `what`'s request. `show buffer` is drawn from its
/// own view instead ([`render_buffer`]).
pub fn render(what: Show, data: &serde_json::Value, levels: Levels, names: &PortNames) -> Result<String, String> {
    let bad = |e: serde_json::Error| format!("unexpected answer from the switch: {e}");
    match what {
        Show::Fdb => {
            let rows: Vec<FdbRow> = serde_json::from_value(data.clone()).map_err(bad)?;
            return Ok(render_fdb(&rows, names));
        }
        Show::Buffer => return Err("show buffer is drawn from the config and the counters together".into()),
        Show::Config => return Ok(data["toml"].as_str().unwrap_or_default().to_string()),
        Show::Watermarks => {
            let w: WatermarksData = serde_json::from_value(data.clone()).map_err(bad)?;
            return Ok(render_watermarks(&w, levels));
        }
        _ => {}
    }
    let s: Snapshot = serde_json::from_value(data.clone()).map_err(bad)?;
    Ok(match what {
        Show::Counters => render_counters(&s),
        Show::Queues => render_queues(&s, levels, None),
        Show::Pgs => render_pgs(&s, levels),
        Show::Pfc => render_pfc(&s, None),
        Show::Buffer | Show::Fdb | Show::Config | Show::Watermarks | Show::Interfaces => unreachable!(),
    })
}

/// Like SONiC's `show priority-group watermark` and `show queue watermark`: one row per port,
/// one column per PG or queue, in bytes (or cells).
fn render_watermarks(w: &WatermarksData, l: Levels) -> String {
    let (ports, pool) = (&w.ports, &w.buffer);
    let col = PortColumn::new(ports.iter().map(|p| (p.id, p.name.as_deref())));
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} watermarks, in {}, since {:.1} s ago (rocectl clear watermarks{})",
        w.kind,
        match l {
            Levels::Bytes { .. } => "bytes",
            Levels::Cells => "cells",
        },
        w.since_ms as f64 / 1e3,
        if w.kind == protocol::WatermarkKind::Persistent {
            " --persistent"
        } else {
            ""
        }
    );
    let grid = |o: &mut String, title: &str, label: &str, row: &dyn Fn(&PortPeaks) -> Vec<(u8, u32)>| {
        let _ = writeln!(o, "\n{title}");
        let _ = write!(o, "{}", col.pad("port"));
        for i in 0..8 {
            let _ = write!(o, " {:>8}", format!("{label}{i}"));
        }
        let _ = writeln!(o);
        for p in ports {
            let mut cells = [None; 8];
            for (i, v) in row(p) {
                if let Some(c) = cells.get_mut(i as usize) {
                    *c = Some(v);
                }
            }
            let _ = write!(o, "{}", col.pad(&p.label()));
            for c in cells {
                let _ = write!(o, " {:>8}", c.map_or("-".into(), |v| l.of(v)));
            }
            let _ = writeln!(o);
        }
    };
    grid(&mut o, "Ingress PG shared+min (peak):", "PG", &|p| {
        p.pgs.iter().map(|g| (g.pg, g.peak_cells)).collect()
    });
    grid(&mut o, "Ingress PG headroom (peak):", "PG", &|p| {
        p.pgs.iter().map(|g| (g.pg, g.peak_headroom_cells)).collect()
    });
    grid(&mut o, "Egress queues (peak):", "Q", &|p| {
        p.queues.iter().map(|q| (q.queue, q.peak_cells)).collect()
    });
    let _ = writeln!(o, "\n{} {:>14} {:>14}", col.pad("port"), "ingress peak", "egress peak");
    for p in ports {
        let _ = writeln!(
            o,
            "{} {:>14} {:>14}",
            col.pad(&p.label()),
            l.of(p.buffer.peak_ingress_cells),
            l.of(p.buffer.peak_egress_cells)
        );
    }
    let _ = writeln!(
        o,
        "\npool: used {}, ingress shared {}, egress shared {} (peaks)",
        l.of(pool.peak_used_cells),
        l.of(pool.peak_ingress_shared_cells),
        l.of(pool.peak_egress_shared_cells)
    );
    for p in &w.pools {
        let _ = write!(o, "pool {} ({}): {} (peak)", p.name, p.kind, l.of(p.peak_used_cells));
        if let Some(h) = p.headroom {
            let _ = write!(o, ", shared headroom pool {} (peak)", l.of(h.peak_used_cells));
        }
        o.push('\n');
    }
    o
}

fn drops(d: &Drops) -> String {
    if d.is_empty() {
        "-".into()
    } else {
        d.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
    }
}

fn render_counters(s: &Snapshot) -> String {
    let col = PortColumn::of(&s.ports);
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} {:>12} {:>14} {:>12} {:>14} {:>10}  drops",
        col.pad("port"),
        "rx_pkts",
        "rx_bytes",
        "tx_pkts",
        "tx_bytes",
        "ecn_ce"
    );
    for p in &s.ports {
        let _ = writeln!(
            o,
            "{} {:>12} {:>14} {:>12} {:>14} {:>10}  {}",
            col.pad(&p.label()),
            p.rx_packets,
            p.rx_bytes,
            p.tx_packets,
            p.tx_bytes,
            p.ecn_marked,
            drops(&p.drops)
        );
    }
    // Several workers: what each port received that crossed to another worker's port, the
    // figure that says whether the ports' placement on workers suits the traffic. A flooded
    // frame counts once per copy that crossed, so the figure can exceed the frames received: as
    // a percentage of rx it read "700.0 % of its rx". Said as copies per frame received.
    let crossed: Vec<String> = s
        .ports
        .iter()
        .filter(|p| p.crossed_out > 0)
        .map(|p| {
            let per_frame = p.crossed_out as f64 / p.rx_packets.max(1) as f64;
            format!(
                "port {} {} ({per_frame:.2} per frame it received)",
                p.label(),
                p.crossed_out
            )
        })
        .collect();
    if !crossed.is_empty() {
        let _ = writeln!(
            o,
            "crossed to another worker (a flooded frame once per copy): {}",
            crossed.join(", ")
        );
    }
    // What the ports' backends lost before the switch saw a frame (`rocesw run` only).
    if s.ports.iter().any(|p| p.backend.is_some()) {
        let _ = writeln!(
            o,
            "\n{} {:<16} {:<20} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10}",
            col.pad("port"),
            "driver",
            "device",
            "kernel_drops",
            "imissed",
            "ierrors",
            "oerrors",
            "rx_nombuf",
            "tx_nombuf"
        );
        for p in &s.ports {
            let Some(b) = &p.backend else { continue };
            let _ = writeln!(
                o,
                "{} {:<16} {:<20} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10}",
                col.pad(&p.label()),
                b.driver,
                b.device,
                b.rx_kernel_drops,
                b.imissed,
                b.ierrors,
                b.oerrors,
                b.rx_nombuf,
                b.tx_nombuf
            );
        }
    }
    o
}

/// `show queues`: per queue its totals, depth and peak; with `rates` (the counters over an
/// interval of `secs`: a later snapshot `since` an earlier one) also its rates over it, before
/// the levels, so the peak stays the last column.
pub fn render_queues(s: &Snapshot, l: Levels, rates: Option<(&Snapshot, f64)>) -> String {
    let col = PortColumn::of(&s.ports);
    let mut o = String::new();
    let rate_head = match rates {
        Some(_) => format!(" {:>9} {:>9} {:>8} {:>8}", "tx_Mpps", "tx_Gbps", "ecn/s", "drops/s"),
        None => String::new(),
    };
    let _ = writeln!(
        o,
        "{} {:>5} {:>12} {:>14} {:>10} {:>10}{rate_head} {:>9} {:>9} {:>9}",
        col.pad("port"),
        "queue",
        "tx_pkts",
        "tx_bytes",
        "dropped",
        "ecn_ce",
        "depth_pkt",
        "depth",
        "peak"
    );
    let mut idle = 0;
    for p in &s.ports {
        for q in &p.queues {
            if q.tx_packets + q.dropped_packets + q.depth_packets + q.peak_cells as u64 == 0 {
                idle += 1;
                continue;
            }
            let rate_cols = match rates {
                Some((delta, secs)) => {
                    let d = (delta.ports.iter().find(|x| x.id == p.id))
                        .and_then(|d| d.queues.iter().find(|x| x.queue == q.queue))
                        .cloned()
                        .unwrap_or_default();
                    let rate = |n: u64| n as f64 / secs.max(1e-9);
                    format!(
                        " {:>9.3} {:>9.3} {:>8.0} {:>8.0}",
                        rate(d.tx_packets) / 1e6,
                        rate(d.tx_bytes) * 8.0 / 1e9,
                        rate(d.ecn_marked),
                        rate(d.dropped_packets)
                    )
                }
                None => String::new(),
            };
            let _ = writeln!(
                o,
                "{} {:>5} {:>12} {:>14} {:>10} {:>10}{rate_cols} {:>9} {:>9} {:>9}",
                col.pad(&p.label()),
                q.queue,
                q.tx_packets,
                q.tx_bytes,
                q.dropped_packets,
                q.ecn_marked,
                q.depth_packets,
                l.of(q.depth_cells),
                l.of(q.peak_cells)
            );
        }
    }
    if idle > 0 {
        let _ = writeln!(
            o,
            "({idle} queues that never held a packet not shown; depth_pkt in packets, depth and peak in {})",
            l.unit()
        );
    }
    if let Some((_, secs)) = rates {
        let _ = writeln!(o, "(rates over the last {secs:.1} s, between two snapshots)");
    }
    // EDF ports only: what their regulated queues did with deadlines (issue 11).
    let edf: Vec<_> = s
        .ports
        .iter()
        .flat_map(|p| p.queues.iter().map(move |q| (p.label(), q)))
        .filter(|(_, q)| q.edf_order_errors + q.edf_deadline_misses > 0)
        .collect();
    if !edf.is_empty() {
        let _ = writeln!(
            o,
            "\n{} {:>5} {:>14} {:>16}",
            col.pad("port"),
            "queue",
            "order_errors",
            "deadline_misses"
        );
        for (label, q) in edf {
            let _ = writeln!(
                o,
                "{} {:>5} {:>14} {:>16}",
                col.pad(&label),
                q.queue,
                q.edf_order_errors,
                q.edf_deadline_misses
            );
        }
    }
    o
}

fn render_pgs(s: &Snapshot, l: Levels) -> String {
    let col = PortColumn::of(&s.ports);
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} {:>3} {:>12} {:>10} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8} {:>8}",
        col.pad("port"),
        "pg",
        "rx_pkts",
        "dropped",
        "xoff",
        "xon",
        "min",
        "shared",
        "headroom",
        "peak",
        "peak_hr"
    );
    let mut idle = 0;
    for p in &s.ports {
        for g in &p.pgs {
            if g.rx_packets + g.dropped_packets + g.peak_cells as u64 == 0 {
                idle += 1;
                continue;
            }
            let _ = writeln!(
                o,
                "{} {:>3} {:>12} {:>10} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8} {:>8}",
                col.pad(&p.label()),
                g.pg,
                g.rx_packets,
                g.dropped_packets,
                g.xoff_sent,
                g.xon_sent,
                l.of(g.min_cells),
                l.of(g.shared_cells),
                l.of(g.headroom_cells),
                l.of(g.peak_cells),
                l.of(g.peak_headroom_cells)
            );
        }
    }
    if idle > 0 {
        let _ = writeln!(
            o,
            "({idle} PGs that never received a packet not shown; min/shared/headroom/peaks in {})",
            l.unit()
        );
    }
    o
}

/// What `show pfc` needs of the running config: its PFC priorities and whether the watchdog
/// is on (`None` where the config does not load here: the watchdog table then lists the
/// priorities that saw PFC or a storm).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PfcInfo {
    /// The PFC (lossless) priorities.
    pub priorities: Vec<usize>,
    /// Whether `[pfc] watchdog` is set.
    pub watchdog: bool,
}

impl PfcInfo {
    /// From a running config.
    pub fn of(cfg: &controlplane::Config) -> Self {
        PfcInfo {
            priorities: (0..8).filter(|&p| cfg.pfc.enabled[p]).collect(),
            watchdog: cfg.pfc.watchdog.is_some(),
        }
    }
}

/// As SONiC's `show pfc counters`: a port × PFC0-7 grid of frames received, one of frames
/// sent, every port and priority, zeros too (an idle switch shows its shape); then the time
/// each priority of a port's egress was paused, `*` on the priorities paused right now; then,
/// as SONiC's `show pfcwd stats`, the watchdog per port and PFC priority: its status (in a
/// storm now or not, or off) and the storms it detected and restored.
pub fn render_pfc(s: &Snapshot, info: Option<&PfcInfo>) -> String {
    let mut o = String::new();
    let col = PortColumn::of(&s.ports).at_least(9);
    let at = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0);
    let grid = |o: &mut String, title: &str, cell: &dyn Fn(&PortReport, usize) -> String| {
        let _ = write!(o, "{}", col.pad(title));
        for prio in 0..8 {
            let _ = write!(o, " {:>10}", format!("PFC{prio}"));
        }
        o.push('\n');
        for p in &s.ports {
            let _ = write!(o, "{}", col.pad(&p.label()));
            for prio in 0..8 {
                let _ = write!(o, " {:>10}", cell(p, prio));
            }
            o.push('\n');
        }
    };
    grid(&mut o, "port rx", &|p, i| at(&p.pfc_rx, i).to_string());
    o.push('\n');
    grid(&mut o, "port tx", &|p, i| at(&p.pfc_tx, i).to_string());
    o.push('\n');
    grid(&mut o, "paused ms", &|p, i| {
        let now = if p.paused_now.get(i) == Some(&true) { "*" } else { "" };
        format!("{:.3}{now}", at(&p.paused_ns, i) as f64 / 1e6)
    });
    if s.ports.iter().any(|p| p.paused_now.contains(&true)) {
        let _ = writeln!(o, "(* paused by received PFC right now)");
    }
    // The watchdog, per port and PFC priority.
    let prios: Vec<usize> = match info {
        Some(i) => i.priorities.clone(),
        None => (0..8)
            .filter(|&i| {
                s.ports
                    .iter()
                    .any(|p| at(&p.pfc_rx, i) + at(&p.watchdog_storms, i) > 0 || p.storm_now.get(i) == Some(&true))
            })
            .collect(),
    };
    let mut rows = vec![vec![
        "port".to_string(),
        "priority".into(),
        "status".into(),
        "storms_detected".into(),
        "storms_restored".into(),
    ]];
    for p in &s.ports {
        for &i in &prios {
            let status = if p.storm_now.get(i) == Some(&true) {
                "stormed"
            } else if info.is_some_and(|i| !i.watchdog) {
                "off"
            } else {
                "operational"
            };
            rows.push(vec![
                p.label(),
                i.to_string(),
                status.into(),
                at(&p.watchdog_storms, i).to_string(),
                at(&p.watchdog_restores, i).to_string(),
            ]);
        }
    }
    o.push_str("\nPFC watchdog\n");
    if rows.len() > 1 {
        o.push_str(&table(&rows, &[1, 3, 4]));
    } else {
        o.push_str("(no PFC priority)\n");
    }
    let pauses: Vec<String> = s
        .ports
        .iter()
        .filter(|p| p.pause_rx > 0)
        .map(|p| format!("port {}: {}", p.label(), p.pause_rx))
        .collect();
    if !pauses.is_empty() {
        let _ = writeln!(o, "\n802.3x PAUSE received (not obeyed): {}", pauses.join(", "));
    }
    o
}

/// One row of `show interfaces` (its `--json` is a list of these).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct InterfaceRow {
    /// The port id.
    pub id: u16,
    /// Its config name, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `up`, `down`, `none` (capture files have no link), `unknown` (no backend report).
    pub link: String,
    /// The backend's driver (`af_packet`, `pcap`, a DPDK driver), if the switch reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// The interface, capture label or DPDK device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Line rate, from the running config.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speed_bps: Option<u64>,
    /// IP MTU, from the running config (largest frame less 18).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// `emulated` or `wire`, from the running config.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// Bits per second received and sent over the interval; absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_bps: Option<f64>,
    /// See `rx_bps`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_bps: Option<f64>,
    /// `rx_bps` as a percentage of the speed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_util: Option<f64>,
    /// `tx_bps` as a percentage of the speed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_util: Option<f64>,
}

/// `show interfaces`' rows: each port of `s` with what the running config says of it (`cfg`,
/// by id) and its rates since `prev`, `secs` earlier.
pub fn interface_rows(
    prev: Option<(&Snapshot, f64)>,
    s: &Snapshot,
    cfg: Option<&controlplane::Config>,
) -> Vec<InterfaceRow> {
    s.ports
        .iter()
        .map(|p| {
            let pc = cfg.and_then(|c| c.ports.iter().find(|x| x.id == p.id));
            let link = match &p.backend {
                Some(b) => match b.link_up {
                    Some(true) => "up",
                    Some(false) => "down",
                    None if b.driver == "pcap" => "none",
                    None => "unknown",
                },
                None => "unknown",
            };
            let before = prev.and_then(|(b, secs)| Some((b.ports.iter().find(|x| x.id == p.id)?, secs)));
            let rate = |now: u64, then: u64, secs: f64| now.saturating_sub(then) as f64 * 8.0 / secs.max(1e-9);
            let rx_bps = before.map(|(b, secs)| rate(p.rx_bytes, b.rx_bytes, secs));
            let tx_bps = before.map(|(b, secs)| rate(p.tx_bytes, b.tx_bytes, secs));
            let util = |bps: Option<f64>| Some(bps? * 100.0 / pc?.speed_bps as f64);
            InterfaceRow {
                id: p.id,
                name: p.name.clone(),
                link: link.into(),
                backend: p.backend.as_ref().map(|b| b.driver.clone()),
                device: p.backend.as_ref().map(|b| b.device.clone()),
                speed_bps: pc.map(|c| c.speed_bps),
                mtu: pc.map(|c| c.max_frame_bytes.saturating_sub(18)),
                peer: pc.map(|c| {
                    match c.peer {
                        controlplane::model::PeerKind::Emulated => "emulated",
                        controlplane::model::PeerKind::Wire => "wire",
                    }
                    .to_string()
                }),
                rx_bps,
                tx_bps,
                rx_util: util(rx_bps),
                tx_util: util(tx_bps),
            }
        })
        .collect()
}

/// `show interfaces`' table.
pub fn render_interfaces(rows: &[InterfaceRow]) -> String {
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let bits = |b: Option<f64>| opt(b.map(units::human_bit_rate));
    let pct = |u: Option<f64>| opt(u.map(|u| format!("{u:.1}%")));
    let mut t = vec![[
        "port", "link", "backend", "device", "speed", "mtu", "peer", "rx_rate", "rx_util", "tx_rate", "tx_util",
    ]
    .map(String::from)
    .to_vec()];
    for r in rows {
        t.push(vec![
            controlplane::model::port_label(r.id, r.name.as_deref()),
            r.link.clone(),
            opt(r.backend.clone()),
            opt(r.device.clone()),
            opt(r.speed_bps.map(units::format_rate)),
            opt(r.mtu.map(|m| m.to_string())),
            opt(r.peer.clone()),
            bits(r.rx_bps),
            pct(r.rx_util),
            bits(r.tx_bps),
            pct(r.tx_util),
        ]);
    }
    table(&t, &[5, 7, 8, 9, 10])
}

/// A size of the config (exact, as the config would write it: `23KiB`), or in cells with
/// `--cells` (rounded up, as the switch charges them).
/// A configured size: exact bytes (as SONiC's tables hold them), in one unit whatever the
/// value, so `8515KiB` never stands beside `13945824B`; or cells.
fn config_size(l: Levels, bytes: u64, cell: u32) -> String {
    match l {
        Levels::Bytes { .. } => format!("{bytes}B"),
        Levels::Cells => bytes.div_ceil(u64::from(cell.max(1))).to_string(),
    }
}

fn limit_text(limit: &Limit, l: Levels, cell: u32) -> String {
    match *limit {
        Limit::Dynamic {
            alpha,
            dynamic_th: Some(th),
        } => format!("dynamic_th {th} (alpha {alpha})"),
        Limit::Dynamic {
            alpha,
            dynamic_th: None,
        } => format!("alpha {alpha}"),
        Limit::Static { bytes } => format!("static_th {}", config_size(l, bytes, cell)),
        Limit::Unlimited => "unlimited".to_string(),
    }
}

/// Rows of cells as a table: every column but the last padded to its widest cell (the last,
/// an origin, is left as it is); columns whose index is in `right` right-aligned.
fn table(rows: &[Vec<String>], right: &[usize]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|x| x.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut o = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, x) in r.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            if c + 1 == r.len() {
                line.push_str(x);
            } else if right.contains(&c) {
                let _ = write!(line, "{x:>w$}", w = width[c]);
            } else {
                let _ = write!(line, "{x:<w$}", w = width[c]);
            }
        }
        o.push_str(line.trim_end());
        o.push('\n');
    }
    o
}

/// `rocectl show buffer`, as SONiC's `show buffer configuration` and `show buffer_pool
/// watermark` together: the whole buffer, each pool (type, mode, size, shared headroom pool,
/// use and peak now, where its size came from), each port's use, and per port and PG the
/// values in force with where each came from (`buffer.rs`).
pub fn render_buffer(v: &BufferView, l: Levels) -> String {
    let cell = v.cell_bytes;
    let b = &v.buffer;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "buffer: {} in {cell} B cells; used {} (peak {}); ingress shared {} (peak {}); egress shared {} (peak {})",
        l.of(b.total_cells),
        l.of(b.used_cells),
        l.of(b.peak_used_cells),
        l.of(b.ingress_shared_cells),
        l.of(b.peak_ingress_shared_cells),
        l.of(b.egress_shared_cells),
        l.of(b.peak_egress_shared_cells)
    );
    let live = |c: Option<u32>| c.map_or_else(|| "-".to_string(), |c| l.of(c));
    let mut rows = vec![[
        "pool", "type", "mode", "size", "headroom", "used", "peak", "hr_used", "hr_peak", "origin",
    ]
    .map(String::from)
    .to_vec()];
    for p in &v.pools {
        let mut origin = p.size_bytes.origin.clone();
        if let Some(h) = &p.headroom_bytes {
            let _ = write!(origin, "; headroom: {}", h.origin);
        }
        rows.push(vec![
            p.name.clone(),
            p.kind.clone(),
            p.mode.value.clone().unwrap_or_else(|| "-".into()),
            config_size(l, p.size_bytes.value, cell),
            p.headroom_bytes
                .as_ref()
                .map_or_else(|| "-".into(), |h| config_size(l, h.value, cell)),
            live(p.used_cells),
            live(p.peak_used_cells),
            live(p.headroom_used_cells),
            live(p.peak_headroom_used_cells),
            origin,
        ]);
    }
    o.push('\n');
    o.push_str(&table(&rows, &[3, 4, 5, 6, 7, 8]));

    let col = PortColumn::new(v.ports.iter().map(|p| (p.id, p.name.as_deref())));
    let _ = writeln!(
        o,
        "\n{} {:>12} {:>12} {:>12} {:>12}",
        col.pad("port"),
        "ingress",
        "peak_in",
        "egress",
        "peak_out"
    );
    for p in &v.ports {
        let label = controlplane::model::port_label(p.id, p.name.as_deref());
        let u = p.buffer.unwrap_or_default();
        let _ = writeln!(
            o,
            "{} {:>12} {:>12} {:>12} {:>12}",
            col.pad(&label),
            l.of(u.ingress_cells),
            l.of(u.peak_ingress_cells),
            l.of(u.egress_cells),
            l.of(u.peak_egress_cells)
        );
    }

    let mut rows = vec![["port", "pg", "field", "value", "origin"].map(String::from).to_vec()];
    let mut hidden = 0;
    for p in &v.ports {
        let label = controlplane::model::port_label(p.id, p.name.as_deref());
        for g in &p.pgs {
            if !g.configured {
                hidden += 1;
                continue;
            }
            let mut row = |field: &str, value: String, origin: &str| {
                rows.push(vec![
                    label.clone(),
                    g.pg.to_string(),
                    field.to_string(),
                    value,
                    origin.to_string(),
                ]);
            };
            row("pool", g.pool.value.clone(), &g.pool.origin);
            row(
                "min (size)",
                config_size(l, g.min_bytes.value, cell),
                &g.min_bytes.origin,
            );
            row("limit", limit_text(&g.limit.value, l, cell), &g.limit.origin);
            for (field, x) in [
                ("headroom (xoff)", &g.headroom_bytes),
                ("xon", &g.xon_bytes),
                ("xon_offset", &g.xon_offset_bytes),
            ] {
                if let Some(x) = x {
                    row(field, config_size(l, x.value, cell), &x.origin);
                }
            }
        }
    }
    o.push_str("\nPGs: the values in force and where each came from\n");
    o.push_str(&table(&rows, &[1]));
    if hidden > 0 {
        let _ = writeln!(
            o,
            "({hidden} lossy PGs with nothing configured but their pool not shown; --json has every PG)"
        );
    }
    o
}

fn render_fdb(rows: &[FdbRow], names: &PortNames) -> String {
    let col = PortColumn::new(rows.iter().map(|r| (r.port, names.get(&r.port).map(String::as_str))));
    let mut o = String::new();
    let _ = writeln!(o, "{:<17} {} {:>7} {:>9}", "mac", col.pad("port"), "type", "age_s");
    for r in rows {
        let _ = writeln!(
            o,
            "{:<17} {} {:>7} {:>9.1}",
            r.mac,
            col.pad(&controlplane::model::port_label(
                r.port,
                names.get(&r.port).map(String::as_str)
            )),
            if r.is_static { "static" } else { "learnt" },
            r.age_ns as f64 / 1e9
        );
    }
    let _ = writeln!(o, "{} entries", rows.len());
    o
}

/// The priorities set in `v` (`p3,p4`), `-` for none.
fn prio_list(v: &[bool; 8]) -> String {
    let set: Vec<String> = (0..8).filter(|&i| v[i]).map(|i| format!("p{i}")).collect();
    if set.is_empty() {
        "-".into()
    } else {
        set.join(",")
    }
}

/// `watch`'s table: per-port rates since the previous update (0 on the first, which has no
/// interval yet): frames in Mpps, bits in Gb/s, events per second, buffer levels now in
/// `levels`' unit.
pub fn render_rates(prev: Option<&Snapshot>, s: &Snapshot, secs: f64, levels: Levels) -> String {
    let mut o = String::new();
    let rate = |now: u64, then: Option<u64>| match then {
        Some(t) if secs > 0.0 => now.saturating_sub(t) as f64 / secs,
        _ => 0.0,
    };
    let col = PortColumn::of(&s.ports);
    // Why figures look as they do, before them: emulated wires behind real time (the worker
    // cannot keep up, so the ports' rates are the wires' and not the hosts'), storms now.
    let behind = (s.ports.iter())
        .filter_map(|p| p.peer.map(|peer| peer.behind_ns))
        .max()
        .unwrap_or(0);
    if behind >= 1_000_000 {
        let _ = writeln!(
            o,
            "emulated wires {:.1} ms behind real time: the worker cannot keep up with them",
            behind as f64 / 1e6
        );
    }
    let storms: Vec<String> = (s.ports.iter())
        .filter(|p| p.storm_now.contains(&true))
        .map(|p| format!("{} {}", p.label(), prio_list(&p.storm_now)))
        .collect();
    if !storms.is_empty() {
        let _ = writeln!(o, "PFC watchdog storm now: {}", storms.join(", "));
    }
    let _ = writeln!(
        o,
        "{} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>8} {:>9} {:>9}",
        col.pad("port"),
        "rx_Mpps",
        "rx_Gbps",
        "tx_Mpps",
        "tx_Gbps",
        "ecn/s",
        "pfc_tx/s",
        "pfc_rx/s",
        "drops/s",
        "rx_ring/s",
        "paused",
        "held_now",
        "buf_in",
        "buf_out"
    );
    for p in &s.ports {
        let before = prev.and_then(|q| q.ports.iter().find(|x| x.id == p.id));
        let drops_now = p.drops.total();
        let pfc_tx = |x: &PortReport| x.pfc_tx.iter().sum::<u64>();
        let pfc_rx = |x: &PortReport| x.pfc_rx.iter().sum::<u64>() + x.pause_rx;
        // Share of the interval some priority of this port was paused by its peer (the busiest
        // priority's paused time; priorities pause independently).
        let paused = |x: &PortReport, i: usize| x.paused_ns.get(i).copied().unwrap_or(0);
        let paused_frac = (0..p.paused_ns.len())
            .map(|i| rate(paused(p, i), before.map(|b| paused(b, i))) / 1e9)
            .fold(0.0, f64::max);
        let _ = writeln!(
            o,
            "{} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>6.0}% {:>8} {:>9} {:>9}",
            col.pad(&p.label()),
            rate(p.rx_packets, before.map(|b| b.rx_packets)) / 1e6,
            rate(p.rx_bytes, before.map(|b| b.rx_bytes)) * 8.0 / 1e9,
            rate(p.tx_packets, before.map(|b| b.tx_packets)) / 1e6,
            rate(p.tx_bytes, before.map(|b| b.tx_bytes)) * 8.0 / 1e9,
            rate(p.ecn_marked, before.map(|b| b.ecn_marked)),
            rate(pfc_tx(p), before.map(pfc_tx)),
            rate(pfc_rx(p), before.map(pfc_rx)),
            rate(drops_now, before.map(|b| b.drops.total())),
            rate(p.drops.get("rx_ring"), before.map(|b| b.drops.get("rx_ring"))),
            paused_frac.min(1.0) * 100.0,
            prio_list(&p.paused_now),
            levels.of(p.buffer.ingress_cells),
            levels.of(p.buffer.egress_cells)
        );
    }
    // Queues that hold frames or moved any in the interval: where congestion is, and what ECN
    // and the scheduler do about it.
    let mut rows = String::new();
    for p in &s.ports {
        let before = prev.and_then(|q| q.ports.iter().find(|x| x.id == p.id));
        for q in &p.queues {
            let b = before.and_then(|b| b.queues.iter().find(|x| x.queue == q.queue));
            let tx = rate(q.tx_packets, b.map(|b| b.tx_packets));
            let drops = rate(q.dropped_packets, b.map(|b| b.dropped_packets));
            if q.depth_packets == 0 && tx == 0.0 && drops == 0.0 {
                continue;
            }
            let _ = writeln!(
                rows,
                "{} {:>5} {:>9.3} {:>9.3} {:>8.0} {:>8.0} {:>9} {:>9} {:>9}",
                col.pad(&p.label()),
                q.queue,
                tx / 1e6,
                rate(q.tx_bytes, b.map(|b| b.tx_bytes)) * 8.0 / 1e9,
                rate(q.ecn_marked, b.map(|b| b.ecn_marked)),
                drops,
                q.depth_packets,
                levels.of(q.depth_cells),
                levels.of(q.peak_cells)
            );
        }
    }
    if !rows.is_empty() {
        let _ = writeln!(
            o,
            "\n{} {:>5} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9} {:>9}",
            col.pad("port"),
            "queue",
            "tx_Mpps",
            "tx_Gbps",
            "ecn/s",
            "drops/s",
            "depth_pkt",
            "depth",
            "peak"
        );
        o.push_str(&rows);
    }
    o
}

fn asked(r: &vlarb_admit::Request) -> String {
    let need = match (r.latency_ns, r.distance) {
        (Some(l), _) => format!("latency {}", units::format_duration(l)),
        (None, Some(d)) => format!("distance {d}"),
        (None, None) => String::new(),
    };
    format!("{} {need}", units::format_rate(r.bw_bps))
}

/// `rocectl vlarb admit`'s report: the port, the used entries of the table with their owners,
/// every connection with its place and bounds, and the refusals with their reasons.
pub fn render_admission(a: &vlarb_admit::Admission, refused: &[(String, vlarb_admit::Refusal)]) -> String {
    use vlarb_admit::{ENTRIES, UNBOUNDED_LIMIT};
    let p = a.params();
    let mut o = String::new();
    let limit = match p.high_limit {
        UNBOUNDED_LIMIT => "255 (unbounded)".to_string(),
        0 => "0 (one high frame at a time)".to_string(),
        q => format!("{q} ({} KiB)", u32::from(q) * 4),
    };
    let vls: Vec<String> = p.vls.iter().map(u8::to_string).collect();
    let _ = writeln!(
        o,
        "port: {}, high_limit {limit}, frames {}..{} B, VLs {}",
        units::format_rate(p.speed_bps),
        p.min_frame,
        p.max_frame,
        vls.join(",")
    );
    let table = a.table();
    let _ = writeln!(
        o,
        "\nhigh-priority table: {} of {ENTRIES} entries used, {} free",
        a.used_entries(),
        a.free_entries()
    );
    let _ = writeln!(o, "{:>5}  {:>2}  {:>6}  owners (credits each)", "entry", "VL", "weight");
    for (k, e) in table.iter().enumerate() {
        let Some(i) = e.sequence else { continue };
        let owners: Vec<String> = a.sequences()[i]
            .members
            .iter()
            .map(|m| format!("{}({})", m.name, a.plan(m).map_or(0, |p| p.share)))
            .collect();
        let _ = writeln!(o, "{k:>5}  {:>2}  {:>6}  {}", e.vl, e.weight, owners.join(" "));
    }
    let conns = a.connections();
    if !conns.is_empty() {
        let _ = writeln!(
            o,
            "\nconnections (entries: how many @ the first; latency bound: on this table now / guaranteed whatever is admitted later):"
        );
        let name_w = conns.iter().map(|c| c.request.name.len()).max().unwrap_or(4).max(4);
        let _ = writeln!(
            o,
            "{:<name_w$}  {:<20}  {:>2}  {:>8}  {:>7}  {:>14}  {:>10}  {:>10}  {:>9}",
            "name", "asked", "VL", "distance", "entries", "credits/entry", "bound now", "guaranteed", "rate floor"
        );
        for c in &conns {
            let frames = c.plan.share / c.plan.frame.div_ceil(64);
            let _ = writeln!(
                o,
                "{:<name_w$}  {:<20}  {:>2}  {:>8}  {:>7}  {:>14}  {:>10}  {:>10}  {:>9}",
                c.request.name,
                asked(&c.request),
                c.vl,
                c.plan.effective_distance(),
                format!("{}@{}", c.entries.len(), c.entries[0]),
                format!("{} ({frames}x{}B)", c.plan.share, c.plan.frame),
                vlarb_admit::show_ns(c.latency_now_ns),
                vlarb_admit::show_ns(c.latency_guaranteed_ns),
                vlarb_admit::show_bps(c.rate_floor_bps),
            );
        }
    }
    if !refused.is_empty() {
        let _ = writeln!(o, "\nrefused:");
        for (name, why) in refused {
            let _ = writeln!(o, "  {name}: {why}");
        }
    }
    o
}

/// The same as JSON: port, table (used entries), connections, refusals.
pub fn admission_json(a: &vlarb_admit::Admission, refused: &[(String, vlarb_admit::Refusal)]) -> serde_json::Value {
    use serde_json::json;
    let table: Vec<_> = a
        .table()
        .iter()
        .enumerate()
        .filter_map(|(k, e)| {
            let i = e.sequence?;
            let owners: Vec<&str> = a.sequences()[i].members.iter().map(|m| m.name.as_str()).collect();
            Some(json!({"entry": k, "vl": e.vl, "weight": e.weight, "owners": owners}))
        })
        .collect();
    let conns: Vec<_> = a
        .connections()
        .iter()
        .map(|c| {
            json!({
                "name": c.request.name,
                "request": c.request.spec(),
                "vl": c.vl,
                "distance": c.plan.effective_distance(),
                "entries": c.entries,
                "credits_per_entry": c.plan.share,
                "credits_per_cycle_needed": c.plan.credits,
                "frame": c.plan.frame,
                "latency_now_ns": c.latency_now_ns,
                "latency_guaranteed_ns": c.latency_guaranteed_ns,
                "rate_floor_bps": c.rate_floor_bps,
            })
        })
        .collect();
    let refused: Vec<_> = refused
        .iter()
        .map(|(n, why)| json!({"name": n, "reason": why.to_string()}))
        .collect();
    json!({
        "port": a.params(),
        "used_entries": a.used_entries(),
        "free_entries": a.free_entries(),
        "table": table,
        "high": a.high_pairs(),
        "connections": conns,
        "refused": refused,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`render`] of a switch whose ports have no names (the fdb's ids stay ids).
    fn r(what: Show, data: &serde_json::Value, levels: Levels) -> Result<String, String> {
        render(what, data, levels, &PortNames::new())
    }

    fn snapshot() -> Snapshot {
        use controlplane::snapshot::{PgReport, PoolBuffer, PortBuffer, QueueReport, Totals};
        let q = |i: u8, tx: u64| QueueReport {
            queue: i,
            tx_packets: tx,
            tx_bytes: tx * 1000,
            dropped_packets: 2,
            dropped_bytes: 2000,
            ecn_marked: 5,
            edf_order_errors: 0,
            edf_deadline_misses: 0,
            depth_packets: 1,
            depth_cells: 4,
            depth_bytes: 1000,
            peak_cells: 40,
            peak_bytes: 10000,
        };
        let idle_q = |i: u8| QueueReport {
            queue: i,
            ..Default::default()
        };
        let pg = |i: u8| PgReport {
            pg: i,
            rx_packets: 100,
            rx_bytes: 100000,
            dropped_packets: 0,
            xoff_sent: 3,
            xon_sent: 3,
            min_cells: 0,
            shared_cells: 12,
            headroom_cells: 7,
            peak_cells: 90,
            peak_headroom_cells: 20,
        };
        let port = |id: u16| {
            let mut drops = Drops::default();
            drops.add("no_route", 1);
            drops.add("egress_limit", 4);
            PortReport {
                id,
                rx_packets: 100 + u64::from(id),
                rx_bytes: 123456,
                tx_packets: 99,
                tx_bytes: 654321,
                drops,
                ecn_marked: 5,
                pfc_tx: [0, 0, 0, 3, 0, 0, 0, 0],
                paused_ns: [0, 0, 0, 2500000, 0, 0, 0, 0],
                buffer: PortBuffer {
                    ingress_cells: 11,
                    peak_ingress_cells: 22,
                    egress_cells: 33,
                    peak_egress_cells: 44,
                },
                queues: vec![q(3, 90), idle_q(0)],
                pgs: vec![pg(3)],
                ..Default::default()
            }
        };
        Snapshot {
            ports: vec![port(0), port(1)],
            totals: Totals {
                rx_packets: 201,
                ..Default::default()
            },
            buffer: PoolBuffer {
                cell_bytes: 256,
                total_cells: 16384,
                shared_cells: 15000,
                used_cells: 44,
                peak_used_cells: 500,
                ingress_shared_cells: 12,
                peak_ingress_shared_cells: 90,
                egress_shared_cells: 0,
                peak_egress_shared_cells: 0,
            },
            pools: Vec::new(),
        }
    }

    /// `show buffer`'s view of [`snapshot`] on the built-in default profile (ports 0-3).
    fn default_view() -> BufferView {
        let cfg = controlplane::load_str(controlplane::DEFAULT_PROFILE).unwrap().config;
        BufferView::new(&snapshot(), &cfg, controlplane::DEFAULT_PROFILE)
    }

    /// The switch's answer to `counters`, as JSON.
    fn canned() -> serde_json::Value {
        serde_json::to_value(snapshot()).unwrap()
    }

    #[test]
    fn tables_render_the_switch_answer() {
        let data = canned();
        let c = r(Show::Counters, &data, Levels::Cells).unwrap();
        assert!(c.lines().next().unwrap().contains("rx_bytes"), "{c}");
        assert!(c.contains("egress_limit=4 no_route=1"), "{c}");
        assert_eq!(c.lines().count(), 3, "{c}");
        let mut crossing = snapshot();
        crossing.ports[1].crossed_out = 76;
        let c = r(Show::Counters, &serde_json::to_value(crossing).unwrap(), Levels::Cells).unwrap();
        assert_eq!(
            c.lines().last().unwrap(),
            "crossed to another worker (a flooded frame once per copy): port 1 76 (0.75 per frame it received)",
            "{c}"
        );
        // Issue 41 item 11: flooded copies each count, so a port's crossings can be several
        // times what it received; that read "700.0 % of its rx". Now it says what it is of.
        let mut flooding = snapshot();
        flooding.ports[0].crossed_out = 7 * flooding.ports[0].rx_packets;
        let c = r(Show::Counters, &serde_json::to_value(flooding).unwrap(), Levels::Cells).unwrap();
        let last = c.lines().last().unwrap();
        assert!(
            last.ends_with("(7.00 per frame it received)") && !last.contains('%'),
            "{c}"
        );
        let mut with_backend = snapshot();
        with_backend.ports[1].backend = Some(controlplane::snapshot::BackendReport {
            driver: "net_vhost".into(),
            device: "net_vhost1".into(),
            imissed: 7,
            oerrors: 2,
            ..Default::default()
        });
        let c = r(
            Show::Counters,
            &serde_json::to_value(with_backend).unwrap(),
            Levels::Cells,
        )
        .unwrap();
        assert_eq!(c.lines().count(), 6, "a blank line, a header, one row per backend: {c}");
        assert!(
            c.lines().last().unwrap().split_whitespace().eq([
                "1",
                "net_vhost",
                "net_vhost1",
                "0",
                "7",
                "0",
                "2",
                "0",
                "0"
            ]),
            "{c}"
        );
        let q = r(Show::Queues, &data, Levels::Cells).unwrap();
        assert!(
            q.lines()
                .nth(1)
                .unwrap()
                .split_whitespace()
                .eq(["0", "3", "90", "90000", "2", "5", "1", "4", "40"]),
            "{q}"
        );
        assert!(q.contains("2 queues that never held a packet"), "{q}");
        let g = r(Show::Pgs, &data, Levels::Cells).unwrap();
        assert!(
            g.lines()
                .nth(1)
                .unwrap()
                .split_whitespace()
                .eq(["0", "3", "100", "0", "3", "3", "0", "12", "7", "90", "20"]),
            "{g}"
        );
        let p = r(Show::Pfc, &data, Levels::Cells).unwrap();
        let rows: Vec<Vec<&str>> = p.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(rows[0][..3], ["port", "rx", "PFC0"], "{p}");
        assert_eq!(rows[0].len(), 10, "port, rx and every priority: {p}");
        // Port 0 received none, sent 3 on priority 3, was paused 2.5 ms on it; every priority
        // has a column, zeros included.
        assert_eq!(rows[1], ["0", "0", "0", "0", "0", "0", "0", "0", "0"], "{p}");
        let tx = rows
            .iter()
            .position(|r| r.first() == Some(&"port") && r.get(1) == Some(&"tx"))
            .unwrap();
        assert_eq!(rows[tx + 1], ["0", "0", "0", "0", "3", "0", "0", "0", "0"], "{p}");
        let paused = rows.iter().position(|r| r.first() == Some(&"paused")).unwrap();
        assert_eq!(rows[paused + 1][4], "2.500", "{p}");
        // The watchdog table is always there; without the config, it lists the priorities
        // that saw PFC or a storm: none here.
        assert!(p.contains("\nPFC watchdog\n(no PFC priority)\n"), "{p}");
        assert!(!p.contains('*'), "nothing paused now: {p}");
        let b = render_buffer(&default_view(), Levels::Cells);
        assert!(b.starts_with("buffer: 16384 in 256 B cells; used 44 (peak 500)"), "{b}");
        assert!(
            b.lines()
                .skip_while(|l| !l.contains("peak_in"))
                .nth(1)
                .unwrap()
                .split_whitespace()
                .eq(["0", "11", "22", "33", "44"]),
            "{b}"
        );
        let f = r(
            Show::Fdb,
            &serde_json::json!([{"mac": "02:00:00:00:00:01", "port": 1, "is_static": false, "age_ns": 1500000000u64}]),
            Levels::Cells,
        )
        .unwrap();
        assert!(f.contains("02:00:00:00:00:01    1  learnt       1.5"), "{f}");
        let peaks = snapshot().peaks();
        let w = WatermarksData {
            kind: protocol::WatermarkKind::Persistent,
            since_ms: 1500,
            ports: peaks.ports,
            buffer: peaks.buffer,
            pools: peaks.pools,
        };
        let w = r(Show::Watermarks, &serde_json::to_value(w).unwrap(), Levels::Cells).unwrap();
        assert!(w.starts_with("persistent watermarks, in cells, since 1.5 s ago"), "{w}");
        let pg_row = w
            .lines()
            .skip_while(|l| !l.starts_with("Ingress PG shared"))
            .nth(2)
            .unwrap();
        assert!(
            pg_row
                .split_whitespace()
                .eq(["0", "-", "-", "-", "90", "-", "-", "-", "-"]),
            "{w}"
        );
        assert!(w.contains("pool: used 500, ingress shared 90, egress shared 0"), "{w}");
        assert!(r(Show::Counters, &serde_json::json!([1]), Levels::Cells)
            .unwrap_err()
            .contains("unexpected"));
    }

    #[test]
    fn watch_shows_rates_between_updates() {
        let a: Snapshot = serde_json::from_value(canned()).unwrap();
        let mut later = canned();
        later["ports"][0]["rx_packets"] = (100 + 2_000_000).into();
        later["ports"][0]["rx_bytes"] = (123456 + 250_000_000).into();
        let b: Snapshot = serde_json::from_value(later).unwrap();
        let bytes = Levels::Bytes { cell: 256 };
        let t = render_rates(Some(&a), &b, 2.0, bytes);
        let row: Vec<&str> = t.lines().nth(1).unwrap().split_whitespace().collect();
        // One convention: frames in Mpps, bits in Gb/s, levels in bytes (11 and 33 cells).
        assert_eq!(&row[..3], ["0", "1.000", "1.000"], "{t}");
        assert_eq!(&row[row.len() - 2..], ["2.8KiB", "8.2KiB"], "{t}");
        let first = render_rates(None, &b, 0.0, Levels::Cells);
        let row: Vec<&str> = first.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(&row[1..5], ["0.000"; 4], "no rates before an interval: {first}");
        assert_eq!(&row[row.len() - 2..], ["11", "33"], "{first}");

        // Paused half the interval on priority 3, PFC received, a queue draining with marks.
        let mut later = canned();
        later["ports"][0]["paused_ns"] = serde_json::json!([0, 0, 0, 1_000_000_000u64, 0, 0, 0, 0]);
        later["ports"][0]["pfc_rx"] = serde_json::json!([0, 0, 0, 10, 0, 0, 0, 0]);
        later["ports"][0]["queues"][0]["tx_packets"] = (90 + 3_000_000).into();
        later["ports"][0]["queues"][0]["ecn_marked"] = 205.into();
        let c: Snapshot = serde_json::from_value(later).unwrap();
        let t = render_rates(Some(&a), &c, 2.0, bytes);
        let row: Vec<&str> = t.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(row[0], "0", "{t}");
        assert!(row.contains(&"50%"), "{t}");
        let q3 = t
            .lines()
            .skip_while(|l| !l.contains("queue"))
            .find(|l| l.split_whitespace().take(2).eq(["0", "3"]))
            .unwrap_or_else(|| panic!("no row for port 0 queue 3: {t}"));
        let q3: Vec<&str> = q3.split_whitespace().collect();
        assert_eq!(q3[2], "1.500", "tx Mpps of queue 3: {t}");
        assert_eq!(q3[4], "100", "marks per second of queue 3: {t}");
        assert_eq!(&q3[7..], ["1.0KiB", "10.0KiB"], "depth and peak of 4 and 40 cells: {t}");

        // Issue 39: what holds a port now, and why the figures look as they do: priority 3
        // paused right now, the receive ring losing frames, a storm, the wires behind.
        let mut later = canned();
        later["ports"][0]["paused_now"] = serde_json::json!([false, false, false, true, false, false, false, false]);
        later["ports"][0]["storm_now"] = later["ports"][0]["paused_now"].clone();
        later["ports"][0]["drops"]["rx_ring"] = 400.into();
        later["ports"][0]["peer"] = serde_json::to_value(controlplane::snapshot::PeerReport {
            behind_ns: 570_000_000,
            ..Default::default()
        })
        .unwrap();
        let d: Snapshot = serde_json::from_value(later).unwrap();
        let t = render_rates(Some(&a), &d, 2.0, bytes);
        let mut lines = t.lines();
        assert_eq!(
            lines.next(),
            Some("emulated wires 570.0 ms behind real time: the worker cannot keep up with them"),
            "{t}"
        );
        assert_eq!(lines.next(), Some("PFC watchdog storm now: 0 p3"), "{t}");
        let head: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        let at = |name: &str| row[head.iter().position(|h| *h == name).unwrap()];
        assert_eq!((at("rx_ring/s"), at("held_now")), ("200", "p3"), "{t}");
        let other: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        assert_eq!(other[head.iter().position(|h| *h == "held_now").unwrap()], "-", "{t}");
    }

    /// Issue 39: `show pfc` marks the priorities paused right now and gives the watchdog's
    /// state per port and PFC priority, as SONiC's `show pfcwd stats`.
    #[test]
    fn show_pfc_marks_pauses_now_and_the_watchdog_state() {
        let mut s = snapshot();
        s.ports[0].paused_now[3] = true;
        s.ports[0].storm_now[3] = true;
        s.ports[0].watchdog_storms[3] = 2;
        s.ports[0].watchdog_restores[3] = 1;
        let info = PfcInfo {
            priorities: vec![3, 4],
            watchdog: true,
        };
        let p = render_pfc(&s, Some(&info));
        let rows: Vec<Vec<&str>> = p.lines().map(|l| l.split_whitespace().collect()).collect();
        let paused = rows.iter().position(|r| r.first() == Some(&"paused")).unwrap();
        assert_eq!((rows[paused + 1][4], rows[paused + 2][4]), ("2.500*", "2.500"), "{p}");
        assert!(p.contains("(* paused by received PFC right now)"), "{p}");
        let wd = rows
            .iter()
            .position(|r| r.first() == Some(&"port") && r.get(1) == Some(&"priority"))
            .unwrap();
        assert_eq!(
            rows[wd],
            ["port", "priority", "status", "storms_detected", "storms_restored"],
            "{p}"
        );
        assert_eq!(rows[wd + 1], ["0", "3", "stormed", "2", "1"], "{p}");
        assert_eq!(rows[wd + 2], ["0", "4", "operational", "0", "0"], "{p}");
        assert_eq!(rows[wd + 3], ["1", "3", "operational", "0", "0"], "{p}");
        let off = render_pfc(
            &snapshot(),
            Some(&PfcInfo {
                priorities: vec![3],
                watchdog: false,
            }),
        );
        assert!(
            off.lines()
                .any(|l| l.split_whitespace().eq(["1", "3", "off", "0", "0"])),
            "{off}"
        );
    }

    /// Issue 39: `show interfaces`: link as the backend knows it (capture files have none),
    /// speed, MTU and peer from the running config, rates and utilisation between two
    /// snapshots; none without an interval.
    #[test]
    fn show_interfaces_rows_and_rates() {
        use controlplane::snapshot::BackendReport;
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/default.toml")).unwrap();
        let cfg = controlplane::load_str(&text).unwrap().config;
        let mut now = snapshot();
        now.ports[0].name = Some("Ethernet0".into());
        now.ports[0].backend = Some(BackendReport {
            driver: "af_packet".into(),
            device: "labp0".into(),
            link_up: Some(true),
            ..Default::default()
        });
        now.ports[1].backend = Some(BackendReport {
            driver: "pcap".into(),
            device: "pcap1".into(),
            ..Default::default()
        });
        let before = now.clone();
        now.ports[0].rx_bytes += 625_000_000;
        now.ports[1].tx_bytes += 3_125_000;
        let rows = interface_rows(Some((&before, 2.0)), &now, Some(&cfg));
        let r0 = &rows[0];
        assert_eq!(
            (r0.link.as_str(), r0.speed_bps, r0.mtu),
            ("up", Some(25_000_000_000), Some(1500))
        );
        assert_eq!(
            (r0.rx_bps, r0.rx_util, r0.tx_util),
            (Some(2.5e9), Some(10.0), Some(0.0))
        );
        assert_eq!(rows[1].link, "none", "a capture file has no link");
        let t = render_interfaces(&rows);
        let lines: Vec<Vec<&str>> = t.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(
            lines[0],
            ["port", "link", "backend", "device", "speed", "mtu", "peer", "rx_rate", "rx_util", "tx_rate", "tx_util"]
        );
        let peer = rows[0].peer.clone().unwrap();
        assert_eq!(
            lines[1],
            [
                "Ethernet0",
                "up",
                "af_packet",
                "labp0",
                "25G",
                "1500",
                &peer,
                "2.500Gb/s",
                "10.0%",
                "0",
                "0.0%"
            ],
            "{t}"
        );
        assert_eq!(&lines[2][..2], ["1", "none"], "{t}");
        assert_eq!(&lines[2][7..], ["0", "0.0%", "12.5Mb/s", "0.1%"], "{t}");
        let v = serde_json::to_value(&rows).unwrap();
        assert_eq!(v[0]["rx_util"], 10.0);
        assert_eq!(v[1].get("name"), None);
        // One snapshot, or no config: no rates, no speed; said as `-`.
        let bare = interface_rows(None, &now, None);
        assert_eq!(
            (bare[0].rx_bps, bare[0].speed_bps, bare[0].peer.as_deref()),
            (None, None, None)
        );
        let t = render_interfaces(&bare);
        assert!(
            t.lines().nth(1).unwrap().split_whitespace().skip(4).all(|c| c == "-"),
            "{t}"
        );
    }

    /// Issue 39: `show queues` with two snapshots gives each queue's rates over the interval.
    #[test]
    fn show_queues_gives_rates_over_the_interval() {
        let before = snapshot();
        let mut now = before.clone();
        now.ports[0].queues[0].tx_packets += 90;
        now.ports[0].queues[0].tx_bytes += 50_000_000;
        now.ports[0].queues[0].ecn_marked += 4;
        let delta = now.since(&before).unwrap();
        let t = render_queues(&now, Levels::Cells, Some((&delta, 0.5)));
        let head: Vec<&str> = t.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(&head[6..10], ["tx_Mpps", "tx_Gbps", "ecn/s", "drops/s"], "{t}");
        assert_eq!(head.last(), Some(&"peak"), "the peak stays last: {t}");
        let row: Vec<&str> = t.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(&row[..2], ["0", "3"], "{t}");
        assert_eq!(&row[6..10], ["0.000", "0.800", "8", "0"], "{t}");
        assert!(t.contains("(rates over the last 0.5 s, between two snapshots)"), "{t}");
        let plain = render_queues(&now, Levels::Cells, None);
        assert!(!plain.contains("tx_Gbps") && !plain.contains("rates over"), "{plain}");
    }

    /// Issue 23 item 6: levels and watermarks in bytes by default (cells × the cell size), in
    /// cells on request; the header says when, over what, and in which unit.
    #[test]
    fn levels_are_bytes_unless_cells_are_asked_for() {
        let data = canned();
        let bytes = Levels::Bytes { cell: 256 };
        let q = r(Show::Queues, &data, bytes).unwrap();
        let row: Vec<&str> = q.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(&row[6..], ["1", "1.0KiB", "10.0KiB"], "{q}");
        assert!(q.contains("depth and peak in bytes"), "{q}");
        let g = r(Show::Pgs, &data, bytes).unwrap();
        let row: Vec<&str> = g.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(&row[6..], ["0B", "3.0KiB", "1.8KiB", "22.5KiB", "5.0KiB"], "{g}");
        let b = render_buffer(&default_view(), bytes);
        assert!(
            b.starts_with("buffer: 4.0MiB in 256 B cells; used 11.0KiB (peak 125.0KiB)"),
            "{b}"
        );
        let peaks = snapshot().peaks();
        let w = WatermarksData {
            kind: protocol::WatermarkKind::User,
            since_ms: 1500,
            ports: peaks.ports,
            buffer: peaks.buffer,
            pools: peaks.pools,
        };
        let w = serde_json::to_value(w).unwrap();
        let wb = r(Show::Watermarks, &w, bytes).unwrap();
        assert!(wb.starts_with("user watermarks, in bytes, since 1.5 s ago"), "{wb}");
        assert!(wb.contains("pool: used 125.0KiB, ingress shared 22.5KiB"), "{wb}");
        let wc = r(Show::Watermarks, &w, Levels::Cells).unwrap();
        assert!(wc.starts_with("user watermarks, in cells, since 1.5 s ago"), "{wc}");
        assert!(wc.contains("pool: used 500, ingress shared 90"), "{wc}");

        let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(7 * 3600 + 31 * 60 + 2);
        assert_eq!(
            header(at, "interval 1.0 s", Some(bytes)),
            "at 07:31:02 UTC, interval 1.0 s; levels in bytes (cells of 256 B; --cells for cells)"
        );
        assert_eq!(
            header(at, "since start 12.3 s", Some(Levels::Cells)),
            "at 07:31:02 UTC, since start 12.3 s; levels in cells"
        );
        assert_eq!(
            header(at, "since start 12.3 s", None),
            "at 07:31:02 UTC, since start 12.3 s"
        );
    }

    /// [`snapshot`] as a SONiC import's switch reports it: its ports named.
    fn named() -> Snapshot {
        let mut s = snapshot();
        s.ports[0].name = Some("Ethernet0".into());
        s.ports[1].id = 120;
        s.ports[1].name = Some("Ethernet120".into());
        s
    }

    /// Issue 37: where the config names its ports, every table names them, in a column as wide
    /// as the longest name (`Ethernet120`), left-aligned, the other columns where they were.
    #[test]
    fn tables_name_ports_where_the_config_names_them() {
        let data = serde_json::to_value(named()).unwrap();
        let row = |t: &str, label: &str| -> Vec<String> {
            t.lines()
                .find(|l| l.starts_with(&format!("{label:<11} ")))
                .unwrap_or_else(|| panic!("no row of {label} (padded to 11) in:\n{t}"))
                .split_whitespace()
                .map(String::from)
                .collect()
        };
        for what in [Show::Counters, Show::Queues, Show::Pgs] {
            let t = r(what, &data, Levels::Cells).unwrap();
            assert!(t.starts_with(&format!("{:<11} ", "port")), "{t}");
            assert_eq!(row(&t, "Ethernet0")[0], "Ethernet0");
            assert_eq!(row(&t, "Ethernet120")[0], "Ethernet120");
            // The header's columns end where the rows' do.
            let (head, first) = (t.lines().next().unwrap(), t.lines().nth(1).unwrap());
            assert_eq!(
                head.split_whitespace().nth(1).map(|h| head.find(h).unwrap() + h.len()),
                first
                    .split_whitespace()
                    .nth(1)
                    .map(|v| first[11..].find(v).unwrap() + 11 + v.len()),
                "second column aligned:\n{t}"
            );
        }
        let q = r(Show::Queues, &data, Levels::Cells).unwrap();
        assert_eq!(row(&q, "Ethernet120")[..3], ["Ethernet120", "3", "90"], "{q}");
        let mut crossing = named();
        crossing.ports[1].crossed_out = 76;
        let c = r(Show::Counters, &serde_json::to_value(crossing).unwrap(), Levels::Cells).unwrap();
        assert!(c.contains("port Ethernet120 76 (0.75 per frame it received)"), "{c}");
        let p = r(Show::Pfc, &data, Levels::Cells).unwrap();
        assert_eq!(row(&p, "Ethernet0")[4], "0", "{p}");
        assert!(p.lines().filter(|l| l.starts_with("Ethernet120 ")).count() >= 3, "{p}");
        let peaks = named().peaks();
        let w = WatermarksData {
            kind: protocol::WatermarkKind::User,
            since_ms: 1,
            ports: peaks.ports,
            buffer: peaks.buffer,
            pools: vec![controlplane::snapshot::PoolReportPeaks {
                name: "ingress_lossless_pool".into(),
                kind: "ingress".into(),
                peak_used_cells: 50,
                headroom: Some(controlplane::snapshot::PoolHeadroomPeaks { peak_used_cells: 4 }),
            }],
        };
        let w = r(Show::Watermarks, &serde_json::to_value(w).unwrap(), Levels::Cells).unwrap();
        assert_eq!(row(&w, "Ethernet0")[..5], ["Ethernet0", "-", "-", "-", "90"], "{w}");
        assert!(
            w.contains("\npool ingress_lossless_pool (ingress): 50 (peak), shared headroom pool 4 (peak)\n"),
            "{w}"
        );
        assert!(w.lines().any(|l| l.starts_with("Ethernet120 ")), "{w}");
        let names: PortNames = [(120, "Ethernet120".to_string())].into();
        let f = render(
            Show::Fdb,
            &serde_json::json!([
                {"mac": "02:00:00:00:00:01", "port": 120, "is_static": false, "age_ns": 0},
                {"mac": "02:00:00:00:00:02", "port": 7, "is_static": true, "age_ns": 0}
            ]),
            Levels::Cells,
            &names,
        )
        .unwrap();
        assert!(f.contains("02:00:00:00:00:01 Ethernet120  learnt"), "{f}");
        assert!(f.contains(&format!("02:00:00:00:00:02 {:<11}  static", "7")), "{f}");
        let t = render_rates(None, &named(), 0.0, Levels::Cells);
        assert_eq!(row(&t, "Ethernet120")[0], "Ethernet120", "{t}");
        // Unnamed ports print as they always did.
        let plain = r(Show::Queues, &canned(), Levels::Cells).unwrap();
        assert!(plain.starts_with("port queue"), "{plain}");
        assert!(plain.lines().nth(1).unwrap().starts_with("   0     3"), "{plain}");
    }

    /// A 512-port switch (SN5600-sized), every port named `Ethernet<4 × index>` with figures of
    /// its own: received frames 1000 + index, queue 3's depth and PG 3's peak the index.
    fn wide() -> Snapshot {
        let mut s = snapshot();
        let template = s.ports[0].clone();
        s.ports = (0..512u16)
            .map(|i| {
                let mut p = template.clone();
                p.id = i;
                p.name = Some(format!("Ethernet{}", 4 * u32::from(i)));
                p.rx_packets = 1000 + u64::from(i);
                for q in &mut p.queues {
                    if q.queue == 3 {
                        q.depth_cells = u32::from(i);
                    }
                }
                for g in &mut p.pgs {
                    if g.pg == 3 {
                        g.peak_cells = u32::from(i);
                    }
                }
                p
            })
            .collect();
        s
    }

    /// Issue 49 item 7: at 512 ports (nothing tested more than a few) every table has each
    /// port's row once, by its name, with its own figures, in columns as wide as the longest
    /// name (`Ethernet2044`), the header's columns where the rows' are.
    #[test]
    fn tables_stay_right_at_512_ports() {
        let snap = wide();
        let data = serde_json::to_value(&snap).unwrap();
        let width = "Ethernet2044".len();
        for (what, label) in [
            (Show::Counters, "counters"),
            (Show::Queues, "queues"),
            (Show::Pgs, "pgs"),
            (Show::Pfc, "pfc"),
        ] {
            let pfc = matches!(what, Show::Pfc);
            let what = label;
            let t = r(
                match label {
                    "counters" => Show::Counters,
                    "queues" => Show::Queues,
                    "pgs" => Show::Pgs,
                    _ => Show::Pfc,
                },
                &data,
                Levels::Cells,
            )
            .unwrap();
            for p in &snap.ports {
                let name = p.name.as_deref().unwrap();
                let rows: Vec<&str> = t
                    .lines()
                    .filter(|l| l.split_whitespace().next() == Some(name))
                    .collect();
                assert!(!rows.is_empty(), "{what:?}: no row of {name}");
                assert!(
                    rows.iter().all(|l| l.starts_with(&format!("{name:<width$} "))),
                    "{what:?}: {name} not padded to {width}: {rows:?}"
                );
            }
            let (head, first) = (t.lines().next().unwrap(), t.lines().nth(1).unwrap());
            let end = |l: &str| {
                let second = l[width..].split_whitespace().next().unwrap();
                l[width..].find(second).unwrap() + width + second.len()
            };
            if !pfc {
                assert_eq!(
                    end(head),
                    end(first),
                    "{what:?}: second column aligned:\n{head}\n{first}"
                );
            }
        }
        let c = r(Show::Counters, &data, Levels::Cells).unwrap();
        let q = r(Show::Queues, &data, Levels::Cells).unwrap();
        let g = r(Show::Pgs, &data, Levels::Cells).unwrap();
        for i in [0usize, 1, 255, 511] {
            let name = format!("Ethernet{}", 4 * i);
            let row = |t: &str, col: usize, filter: &dyn Fn(&[&str]) -> bool| -> Vec<String> {
                t.lines()
                    .map(|l| l.split_whitespace().collect::<Vec<_>>())
                    .filter(|w| w[0] == name && filter(w))
                    .map(|w| w[col].to_string())
                    .collect()
            };
            assert_eq!(row(&c, 1, &|_| true), [(1000 + i).to_string()], "{name} rx");
            assert_eq!(row(&q, 7, &|w| w[1] == "3"), [i.to_string()], "{name}: queue 3's depth");
            assert_eq!(row(&g, 9, &|w| w[1] == "3"), [i.to_string()], "{name}: PG 3's peak");
        }
        assert_eq!(c.lines().filter(|l| l.starts_with("Ethernet")).count(), 512, "{c}");
    }

    /// The imported TOML of configs/sonic/spectrum1-t1.json, with `edit` applied: its switch's
    /// config and its text.
    fn sonic(edit: impl Fn(String) -> String) -> (controlplane::Config, String) {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/sonic/spectrum1-t1.json");
        let json = std::fs::read_to_string(path).unwrap();
        let toml = controlplane::sonic::import_text(&json, &Default::default())
            .unwrap()
            .toml;
        let toml = edit(toml);
        let cfg = controlplane::load_str(&toml).unwrap_or_else(|e| panic!("{e}")).config;
        (cfg, toml)
    }

    /// The row of `show buffer`'s PG table for `port`'s PG `pg` and `field`: (value, origin).
    fn pg_row(t: &str, port: &str, pg: u8, field: &str) -> (String, String) {
        let line = t
            .lines()
            .skip_while(|l| !l.starts_with("PGs:"))
            .find(|l| {
                let mut w = l.split_whitespace();
                w.next() == Some(port) && w.next() == Some(&pg.to_string()) && l.contains(&format!("  {field}  "))
            })
            .unwrap_or_else(|| panic!("no {port} PG {pg} {field} in:\n{t}"));
        let rest = line[line.find(&format!("  {field}  ")).unwrap() + field.len() + 4..].trim_start();
        let (value, origin) = rest.split_once("  ").unwrap();
        (value.to_string(), origin.trim().to_string())
    }

    /// Issue 37: `show buffer` gives each pool and, per port and PG, each value in force with
    /// where it came from: the SONiC origin the import wrote beside it, the per-port override's
    /// over the global one, `default` where nothing gives it, `computed:` with the formula's
    /// inputs (and their origins) where the config computes it.
    #[test]
    fn show_buffer_says_where_each_value_came_from() {
        // Ethernet24's PG3 headroom left to the formula.
        let (cfg, text) = sonic(|t| {
            t.replacen(
                "headroom = \"157696B\"               # BUFFER_PROFILE|pg_lossless_100000_300m_profile|xoff × 2: on spectrum1 a PG takes two xoffs of the shared headroom pool",
                "headroom = \"auto\"",
                1,
            )
        });
        assert!(text.contains("headroom = \"auto\""), "the edit took");
        let mut snap = named();
        snap.ports = cfg
            .ports
            .iter()
            .map(|p| PortReport {
                id: p.id,
                name: p.name.clone(),
                ..Default::default()
            })
            .collect();
        snap.pools = vec![controlplane::snapshot::PoolReport {
            name: "ingress_lossless_pool".into(),
            kind: "ingress".into(),
            size_cells: 90827,
            used_cells: 40,
            peak_used_cells: 50,
            headroom: Some(controlplane::snapshot::PoolHeadroom {
                size_cells: 22358,
                used_cells: 3,
                peak_used_cells: 4,
            }),
        }];
        let view = BufferView::new(&snap, &cfg, &text);
        let t = render_buffer(&view, Levels::Bytes { cell: 96 });
        // The pools, by name: type, mode, size, shared headroom pool, use and peak, origin.
        let pool = |name: &str| -> Vec<&str> {
            t.lines()
                .find(|l| l.starts_with(&format!("{name} ")))
                .unwrap_or_else(|| panic!("no pool {name}:\n{t}"))
                .split_whitespace()
                .collect()
        };
        assert_eq!(
            pool("ingress_lossless_pool")[..10],
            [
                "ingress_lossless_pool",
                "ingress",
                "dynamic",
                "8719360B",
                "323520B",
                "3.8KiB",
                "4.7KiB",
                "288B",
                "384B",
                "BUFFER_POOL|ingress_lossless_pool|size;"
            ],
            "{t}"
        );
        assert_eq!(
            pool("egress_lossy_pool")[..9],
            [
                "egress_lossy_pool",
                "egress",
                "dynamic",
                "8719360B",
                "-",
                "-",
                "-",
                "-",
                "-"
            ],
            "a pool the switch does not report has no figures: {t}"
        );
        // A 5 m port: its own [port.pg.3] gives the headroom; the rest is the global [pg.3]'s
        // value, which its own 5 m profile gives too (not the 40 m one of [pg.3]: issue 49
        // item 5). Sizes in bytes, whatever the value (8515KiB stood beside 13945824B).
        assert_eq!(
            pg_row(&t, "Ethernet0", 3, "headroom (xoff)"),
            (
                "47104B".into(),
                "BUFFER_PROFILE|pg_lossless_100000_5m_profile|xoff × 2: on spectrum1 a PG takes two xoffs of the shared headroom pool".into()
            )
        );
        assert_eq!(
            pg_row(&t, "Ethernet8", 3, "headroom (xoff)"),
            (
                "59392B".into(),
                "BUFFER_PROFILE|pg_lossless_100000_40m_profile|xoff × 2: on spectrum1 a PG takes two xoffs of the shared headroom pool".into()
            )
        );
        assert_eq!(
            pg_row(&t, "Ethernet0", 3, "limit"),
            (
                "dynamic_th 0 (alpha 1)".into(),
                "BUFFER_PROFILE|pg_lossless_100000_5m_profile|dynamic_th".into()
            )
        );
        assert_eq!(
            pg_row(&t, "Ethernet0", 3, "min (size)"),
            (
                "19456B".into(),
                "BUFFER_PROFILE|pg_lossless_100000_5m_profile|size (on spectrum1 size is xon; the xoff is in the shared headroom pool)".into()
            )
        );
        assert!(pg_row(&t, "Ethernet0", 3, "xon_offset")
            .1
            .starts_with("BUFFER_PROFILE|pg_lossless_100000_5m_profile"));
        assert_eq!(
            pg_row(&t, "Ethernet8", 3, "limit").1,
            "BUFFER_PROFILE|pg_lossless_100000_40m_profile|dynamic_th",
            "a 40 m port's, from [pg.3]"
        );
        assert_eq!(
            pg_row(&t, "Ethernet0", 0, "pool"),
            (
                "ingress_lossless_pool".into(),
                "BUFFER_PROFILE|ingress_lossy_profile|pool".into()
            )
        );
        assert_eq!(pg_row(&t, "Ethernet0", 3, "xon"), ("0B".into(), "default".into()));
        // The formula's inputs, each with its origin; the value is the config's own.
        let (value, origin) = pg_row(&t, "Ethernet24", 3, "headroom (xoff)");
        let p24 = &cfg.ports[cfg.port_index(cfg.port_id_of("Ethernet24").unwrap()).unwrap()];
        assert_eq!(value, format!("{}B", p24.headroom_bytes[3]));
        assert_eq!(
            origin,
            "computed: 100G (PORT|Ethernet24|speed), 300m (CABLE_LENGTH|AZURE|Ethernet24), mtu 9100 (PORT|Ethernet24|mtu)"
        );
        // PG 4 of the same port keeps its profile's headroom.
        assert!(pg_row(&t, "Ethernet24", 4, "headroom (xoff)")
            .1
            .ends_with("300m_profile|xoff × 2: on spectrum1 a PG takes two xoffs of the shared headroom pool"));
        // Lossy PGs with nothing but a pool are left out, and said so.
        assert!(!t.lines().any(|l| l.starts_with("Ethernet0    1 ")), "{t}");
        assert!(
            t.contains("(40 lossy PGs with nothing configured but their pool not shown"),
            "{t}"
        );

        // --json: the same values and origins, with the keys that give them.
        let j = serde_json::to_value(&view).unwrap();
        let pg3 = &j["ports"][0]["pgs"][3];
        assert_eq!(pg3["headroom_bytes"]["value"], 47104);
        assert_eq!(
            pg3["headroom_bytes"]["origin"],
            "BUFFER_PROFILE|pg_lossless_100000_5m_profile|xoff × 2: on spectrum1 a PG takes two xoffs of the shared headroom pool"
        );
        assert_eq!(pg3["headroom_bytes"]["key"], "port[0].pg.3.headroom");
        assert_eq!(pg3["limit"]["value"]["dynamic"]["dynamic_th"], 0);
        assert_eq!(pg3["xon_bytes"]["origin"], "default");
        assert!(pg3["xon_bytes"].get("key").is_none());
        assert_eq!(j["ports"][0]["name"], "Ethernet0");
        assert_eq!(j["pools"][0]["headroom_bytes"]["value"], 323520);
        assert_eq!(j["ports"][0]["pgs"].as_array().unwrap().len(), 8, "every PG");

        // --cells: the config's sizes in cells, rounded up as the switch charges them.
        let c = render_buffer(&view, Levels::Cells);
        assert_eq!(pg_row(&c, "Ethernet0", 3, "headroom (xoff)").0, "491");
    }

    /// A hand-written config's comments are notes, not origins: each value's origin is its
    /// key, a port's own key over the global one; the one pool of a config without pools
    /// shows as its two views.
    #[test]
    fn show_buffer_of_a_hand_written_config_names_keys() {
        let text = controlplane::DEFAULT_PROFILE.replacen(
            "[[port]]\nid = 1\n",
            "[[port]]\nid = 1\nname = \"uplink\"\npg.3.alpha = \"1/4\"\n",
            1,
        );
        let cfg = controlplane::load_str(&text).unwrap().config;
        let view = BufferView::new(&snapshot(), &cfg, &text);
        let t = render_buffer(&view, Levels::Bytes { cell: 256 });
        assert_eq!(
            pg_row(&t, "0", 3, "limit"),
            ("dynamic_th -3 (alpha 0.125)".into(), "pg.3.alpha".into())
        );
        assert_eq!(
            pg_row(&t, "uplink", 3, "limit"),
            ("dynamic_th -2 (alpha 0.25)".into(), "uplink.pg.3.alpha".into()),
            "a named port's key by its name (issue 49 item 5)"
        );
        let j = serde_json::to_value(&view).unwrap();
        assert_eq!(
            j["ports"][1]["pgs"][3]["limit"]["key"], "port[1].pg.3.alpha",
            "--json: the key"
        );
        assert_eq!(
            pg_row(&t, "0", 3, "headroom (xoff)").1,
            "computed: 25G (port_defaults.speed), 15m (port_defaults.cable), mtu 1500 (port_defaults.mtu)"
        );
        assert_eq!(pg_row(&t, "0", 3, "pool"), ("shared".into(), "default".into()));
        assert_eq!(pg_row(&t, "0", 3, "xon_offset").1, "pg.3.xon_offset");
        let shared: Vec<&str> = t.lines().filter(|l| l.starts_with("shared ")).collect();
        assert_eq!(shared.len(), 2, "{t}");
        assert!(shared[0].split_whitespace().take(2).eq(["shared", "ingress"]), "{t}");
        assert!(
            shared[0].contains("computed: buffer.size less every min and headroom"),
            "{t}"
        );
    }
}
