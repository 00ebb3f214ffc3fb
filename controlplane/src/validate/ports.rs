//! `[buffer]`, `[port_defaults]` and `[[port]]`: sizes, speeds, cables, MTUs, interfaces and
//! capture files. Ports come out as drafts: their headroom needs the PG profiles (`budget`).

use super::ctx::Ctx;
use super::defaults::*;
use crate::model::*;
use crate::schema::*;
use crate::units::{self, format_size};
use std::collections::BTreeMap;

pub(super) fn resolve_buffer(cx: &mut Ctx, s: &BufferSection) -> BufferConfig {
    let mut cell_bytes = DEFAULT_CELL_BYTES;
    if let Some(v) = &s.cell {
        if let Some(c) = cx.size("buffer.cell", v) {
            // Any size: switch ASICs use 96 B (Spectrum-1), 144, 192, 208 (Tomahawk 2), 254...
            let ok = (u64::from(MIN_CELL_BYTES)..=u64::from(MAX_CELL_BYTES)).contains(&c);
            if ok {
                cell_bytes = u32::try_from(c).unwrap_or(DEFAULT_CELL_BYTES);
            } else {
                cx.error(format!(
                    "buffer.cell ({v}) must be from {MIN_CELL_BYTES}B to {MAX_CELL_BYTES}B"
                ));
            }
        }
    }
    let mut total_bytes = DEFAULT_BUFFER_BYTES;
    if let Some(v) = &s.size {
        if let Some(b) = cx.size("buffer.size", v) {
            total_bytes = b;
        }
    }
    let min = MIN_BUFFER_CELLS * u64::from(cell_bytes);
    if total_bytes < min {
        cx.error(format!(
            "buffer.size ({}) is below the minimum of {MIN_BUFFER_CELLS} cells ({})",
            format_size(total_bytes),
            format_size(min)
        ));
    }
    let slices = match s.slices {
        None => 1,
        Some(n) => cx.int_in("buffer.slices", n, 1, MAX_SLICES as i64).unwrap_or(1) as u8,
    };
    BufferConfig {
        cell_bytes,
        total_bytes,
        pools: resolve_pools(cx, &s.pool),
        slices,
    }
}

/// `[buffer.pool.NAME]`: ingress pools first, then egress, each in name order (the indices
/// PGs and queues refer to them by).
fn resolve_pools(cx: &mut Ctx, pools: &BTreeMap<String, PoolSection>) -> Vec<PoolConfig> {
    let mut out = Vec::new();
    for (name, p) in pools {
        let path = format!("buffer.pool.{name}");
        if name.trim().is_empty() {
            cx.error(format!("{path}: a pool needs a name"));
            continue;
        }
        let dir = match p.kind.as_deref() {
            Some("ingress") => PoolDir::Ingress,
            Some("egress") => PoolDir::Egress,
            Some(other) => {
                cx.error(format!("{path}.type: {other:?} is not one of ingress, egress"));
                continue;
            }
            None => {
                cx.error(format!("{path}.type: missing (ingress or egress)"));
                continue;
            }
        };
        let mode = match p.mode.as_deref() {
            None | Some("dynamic") => PoolMode::Dynamic,
            Some("static") => PoolMode::Static,
            Some(other) => {
                cx.error(format!("{path}.mode: {other:?} is not one of dynamic, static"));
                continue;
            }
        };
        let Some(size_bytes) = p.size.as_ref().map(|v| cx.size(&format!("{path}.size"), v)) else {
            cx.error(format!("{path}.size: missing (the pool's shared space)"));
            continue;
        };
        let headroom_bytes = match (&p.headroom, dir) {
            (None, _) => 0,
            (Some(v), PoolDir::Ingress) => cx.size(&format!("{path}.headroom"), v).unwrap_or(0),
            (Some(_), PoolDir::Egress) => {
                cx.error(format!(
                    "{path}.headroom: only an ingress pool has a shared headroom pool (PGs take headroom, queues do not)"
                ));
                0
            }
        };
        let Some(size_bytes) = size_bytes else { continue };
        out.push(PoolConfig {
            name: name.clone(),
            dir,
            size_bytes,
            mode,
            headroom_bytes,
        });
    }
    out.sort_by_key(|p| p.dir == PoolDir::Egress);
    for dir in [PoolDir::Ingress, PoolDir::Egress] {
        let n = out.iter().filter(|p| p.dir == dir).count();
        if n > MAX_POOLS {
            cx.error(format!(
                "buffer.pool: {n} {} pools, at most {MAX_POOLS}",
                if dir == PoolDir::Ingress { "ingress" } else { "egress" }
            ));
        }
    }
    if !out.is_empty() {
        for (dir, name) in [(PoolDir::Ingress, "ingress"), (PoolDir::Egress, "egress")] {
            if !out.iter().any(|p| p.dir == dir) {
                cx.error(format!(
                    "buffer.pool: no {name} pool; with pools configured, both directions need one"
                ));
            }
        }
    }
    out
}

/// `[[port]] pcap = {...}`: at least one file, a known pace.
fn resolve_pcap_port(cx: &mut Ctx, path: &str, s: &PcapPortSection) -> Option<PcapPortConfig> {
    let pace = match s.pace.as_deref() {
        None | Some("capture") => PcapPace::Capture,
        Some("asap") => PcapPace::Asap,
        Some(other) => {
            cx.error(format!("{path}.pcap.pace: {other:?} is not one of capture, asap"));
            return None;
        }
    };
    let file = |key: &str, v: &Option<String>, cx: &mut Ctx| match v.as_deref() {
        Some("") => {
            cx.error(format!("{path}.pcap.{key}: empty path"));
            None
        }
        other => other.map(std::path::PathBuf::from),
    };
    let input = file("input", &s.input, cx);
    let output = file("output", &s.output, cx);
    if s.input.is_none() && s.output.is_none() {
        cx.error(format!(
            "{path}.pcap: give an `input` capture, an `output` file, or both"
        ));
        return None;
    }
    Some(PcapPortConfig { input, output, pace })
}

/// `[[port]] dpdk = "..."`: a well-formed device string (checked without DPDK), stored with a
/// short PCI address completed (`3b:00.0` → `0000:3b:00.0`).
fn resolve_dpdk_port(cx: &mut Ctx, path: &str, text: &str) -> Option<String> {
    match dpdk::DeviceSpec::parse(text) {
        Ok(spec) => Some(spec.devargs().to_string()),
        Err(e) => {
            cx.error(format!("{path}.dpdk: {e}"));
            None
        }
    }
}

/// A port before headroom is known.
pub(super) struct PortDraft {
    pub(super) id: u16,
    pub(super) name: Option<String>,
    pub(super) interface: Option<String>,
    pub(super) pcap: Option<PcapPortConfig>,
    pub(super) dpdk: Option<String>,
    pub(super) peer: PeerKind,
    pub(super) worker: Option<usize>,
    pub(super) speed_bps: u64,
    pub(super) cable_m: f64,
    pub(super) mtu: u32,
    pub(super) tx_enabled: bool,
    pub(super) slice: u8,
}

impl PortDraft {
    pub(super) fn max_frame(&self) -> u32 {
        self.mtu + L2_OVERHEAD
    }
}

/// `None`: not given; `Some(None)`: given but invalid (already reported).
type Inherited<T> = Option<Option<T>>;

pub(super) fn resolve_ports(cx: &mut Ctx, file: &ConfigFile) -> Vec<PortDraft> {
    let d = &file.port_defaults;
    let def_speed: Inherited<u64> = d.speed.as_ref().map(|v| {
        let s = cx.rate("port_defaults.speed", v);
        check_speed(cx, "port_defaults.speed", v, s)
    });
    let def_cable: Inherited<f64> = d.cable.as_ref().map(|v| {
        let c = cx.length("port_defaults.cable", v);
        check_cable(cx, "port_defaults.cable", v, c)
    });
    let def_mtu: Inherited<u32> = d.mtu.map(|m| check_mtu(cx, "port_defaults.mtu", m));

    // The count's upper bound is `resolve`'s, checked before any per-port work.
    if file.ports.is_empty() {
        cx.error("port: at least one [[port]] is required".to_string());
    }

    let mut ids: BTreeMap<u16, usize> = BTreeMap::new();
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    let mut out = Vec::with_capacity(file.ports.len());
    for (i, p) in file.ports.iter().enumerate() {
        let path = format!("port[{i}]");
        let id = match u16::try_from(p.id) {
            Ok(id) => {
                if let Some(j) = ids.insert(id, i) {
                    cx.error(format!("{path}.id: {id} is already used by port[{j}]"));
                }
                id
            }
            Err(_) => {
                cx.error(format!("{path}.id: {} is out of range 0..=65535", p.id));
                0
            }
        };
        if let Some(name) = &p.name {
            if name.trim().is_empty() {
                cx.error(format!("{path}.name: must not be empty"));
            } else if let Some(j) = names.insert(name, i) {
                cx.error(format!("{path}.name: {name:?} is already used by port[{j}]"));
            }
        }
        let speed_bps = match &p.speed {
            Some(v) => {
                let sp = format!("{path}.speed");
                let s = cx.rate(&sp, v);
                check_speed(cx, &sp, v, s)
            }
            None => match def_speed {
                Some(s) => s,
                None => {
                    cx.error(format!("{path}.speed: missing (set it here or in [port_defaults])"));
                    None
                }
            },
        };
        let cable_m = match &p.cable {
            Some(v) => {
                let cp = format!("{path}.cable");
                let c = cx.length(&cp, v);
                check_cable(cx, &cp, v, c)
            }
            None => def_cable.unwrap_or(Some(DEFAULT_CABLE_M)),
        };
        let mtu = match p.mtu {
            Some(m) => check_mtu(cx, &format!("{path}.mtu"), m),
            None => def_mtu.unwrap_or(Some(DEFAULT_MTU)),
        };
        let interface = p.interface.as_ref().and_then(|ifname| {
            let ok = !ifname.is_empty() && ifname.len() < 16 && !ifname.contains(['/', ' ', '\0']);
            if !ok {
                cx.error(format!(
                    "{path}.interface: {ifname:?} is not a Linux interface name (1-15 characters, no '/' or spaces)"
                ));
            }
            ok.then(|| ifname.clone())
        });
        let worker = p
            .worker
            .and_then(|w| cx.int_in(&format!("{path}.worker"), w, 0, MAX_WORKERS as i64))
            .map(|w| w as usize);
        let pcap = p.pcap.as_ref().and_then(|s| resolve_pcap_port(cx, &path, s));
        if pcap.is_some() && p.interface.is_some() {
            cx.error(format!(
                "{path}: a port has either an `interface` or a `pcap` table, not both"
            ));
        }
        let dpdk = p.dpdk.as_ref().and_then(|d| resolve_dpdk_port(cx, &path, d));
        let backends = [p.interface.is_some(), p.pcap.is_some(), p.dpdk.is_some()];
        if p.dpdk.is_some() && backends.iter().filter(|b| **b).count() > 1 {
            cx.error(format!(
                "{path}: a port has one of `interface`, `pcap` or `dpdk`, not several"
            ));
        }
        let backend = BackendKind::of(p.interface.as_deref(), p.pcap.is_some(), dpdk.as_deref());
        let peer = match p.peer.as_deref() {
            None => PeerKind::default_for(backend),
            Some("emulated") => PeerKind::Emulated,
            Some("wire") => PeerKind::Wire,
            Some(other) => {
                cx.error(format!(
                    "{path}.peer: {other:?} is not one of \"emulated\" (the far end is software: a veth, \
                     tap, capture file or VM; frames are paced at line rate and PFC is obeyed for it) or \
                     \"wire\" (a real NIC: frames count as arrived when read)"
                ));
                PeerKind::default_for(backend)
            }
        };
        let tx_enabled = match p.tx.as_deref() {
            None | Some("on") => true,
            Some("off") => false,
            Some(other) => {
                cx.error(format!("{path}.tx: {other:?} is not one of \"on\", \"off\""));
                true
            }
        };
        let slice = p
            .slice
            .and_then(|s| cx.int_in(&format!("{path}.slice"), s, 0, MAX_SLICES as i64 - 1))
            .unwrap_or(0) as u8;
        out.push(PortDraft {
            id,
            tx_enabled,
            slice,
            name: p.name.clone(),
            interface,
            pcap,
            dpdk,
            peer,
            worker,
            speed_bps: speed_bps.unwrap_or(0),
            cable_m: cable_m.unwrap_or(DEFAULT_CABLE_M),
            mtu: mtu.unwrap_or(DEFAULT_MTU),
        });
    }
    check_names_are_not_ids(cx, file, &ids);
    out
}

/// A port's name may not read as another port's id. Everything that takes a port by name or id
/// (`model::find_port`: `rocectl set --port`, `capture --port`, `replay --input 8=`) tries the
/// name first, so a port named `8` next to port id 8 made that port unreachable by its id, and
/// `--input 8=` fed the other port without a word. Refused here, where the config is read; a
/// name that reads as its own port's id (`8` on port 8) names that port either way and stays.
fn check_names_are_not_ids(cx: &mut Ctx, file: &ConfigFile, ids: &BTreeMap<u16, usize>) {
    for (i, p) in file.ports.iter().enumerate() {
        let Some(name) = &p.name else { continue };
        let Ok(as_id) = name.trim().parse::<u16>() else {
            continue;
        };
        if let Some(&j) = ids.get(&as_id).filter(|&&j| j != i) {
            cx.error(format!(
                "port[{i}].name: {name:?} is the id of port[{j}] ({as_id}); a port's name may not be \
                 another port's id, or `--port {as_id}` and `--input {as_id}=` could mean either: \
                 name it otherwise (e.g. \"Ethernet{}\", as SONiC would)",
                p.id
            ));
        }
    }
}

fn check_speed(cx: &mut Ctx, path: &str, v: &Scalar, s: Option<u64>) -> Option<u64> {
    match s {
        Some(0) => {
            cx.error(format!("{path} ({v}) must be above 0"));
            None
        }
        Some(s) if s < MIN_PORT_SPEED_BPS => {
            cx.error(format!(
                "{path} ({v}) is below the minimum port speed of {} (the slowest Ethernet)",
                units::format_rate(MIN_PORT_SPEED_BPS)
            ));
            None
        }
        other => other,
    }
}

fn check_cable(cx: &mut Ctx, path: &str, v: &Scalar, c: Option<f64>) -> Option<f64> {
    match c {
        Some(m) if !(0.0..=MAX_CABLE_M).contains(&m) => {
            cx.error(format!(
                "{path} ({v}) must be from 0m to {}",
                units::format_length(MAX_CABLE_M)
            ));
            None
        }
        other => other,
    }
}

fn check_mtu(cx: &mut Ctx, path: &str, m: i64) -> Option<u32> {
    cx.int_in(path, m, MIN_MTU, MAX_MTU).and_then(|m| u32::try_from(m).ok())
}
