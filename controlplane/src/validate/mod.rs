//! Schema → model: convert every unit, fill every default, check every rule, and collect *all*
//! problems rather than stopping at the first, so one run of `rocectl check` shows everything
//! wrong with a file. Errors and warnings are plain strings that start with (or name) the
//! field path, e.g. `ecn.roce.kmin (400KiB) is above kmax (200KiB)`.
//!
//! The defaults live here as constants so `configs/README.md` and the code can be compared.

use crate::headroom;
use crate::model::*;
use crate::schema::*;
use crate::units::{self, format_rate, format_size, UnitError};
use crate::{ConfigError, ConfigErrorKind, Loaded};
use std::collections::{BTreeMap, BTreeSet};

pub const DEFAULT_CELL_BYTES: u32 = 256;
pub const MIN_CELL_BYTES: u32 = 64;
pub const MAX_CELL_BYTES: u32 = 4096;
pub const DEFAULT_BUFFER_BYTES: u64 = 4 << 20;
pub const MIN_BUFFER_CELLS: u64 = 64;
pub const MAX_PORTS: usize = 64;
pub const DEFAULT_CABLE_M: f64 = 15.0;
pub const MAX_CABLE_M: f64 = 10_000.0;
pub const DEFAULT_MTU: u32 = 1500;
pub const MIN_MTU: i64 = 68;
pub const MAX_MTU: i64 = 9216;
/// Ethernet header + one VLAN tag: max frame = MTU + 18 (the FCS is not stored).
pub const L2_OVERHEAD: u32 = headroom::L2_OVERHEAD_BYTES;
pub const DEFAULT_TRUST: Trust = Trust::Dscp;
pub const DEFAULT_LOSSLESS_PG_ALPHA: f64 = 0.125;
pub const DEFAULT_XON_OFFSET_BYTES: u64 = 3 * 1024;
pub const DEFAULT_LOSSY_QUEUE_ALPHA: f64 = 1.0;
pub const DEFAULT_WEIGHT: u32 = 1;
pub const MAX_WEIGHT: i64 = 1000;
pub const DEFAULT_CNP_QUEUE: u8 = 6;
/// A policer must pass at least one minimum frame (a CNP is 78 B untagged).
pub const MIN_POLICER_BURST: u64 = 64;
pub const DEFAULT_PAUSE_QUANTA: u16 = 65535;
pub const DEFAULT_REFRESH: f64 = 0.5;
pub const DEFAULT_WD_DETECTION_NS: u64 = 200_000_000;
pub const DEFAULT_WD_RESTORATION_NS: u64 = 400_000_000;
pub const MAX_EWMA_SHIFT: i64 = 15;
pub const DEFAULT_FDB_LEARNING: bool = true;
pub const DEFAULT_FDB_AGING_NS: u64 = 300_000_000_000;
pub const DEFAULT_FDB_CAPACITY: usize = 4096;
pub const MAX_FDB_CAPACITY: i64 = 1 << 20;
pub const MAX_WORKERS: usize = 64;
pub const DEFAULT_DRAIN_TIMEOUT_NS: u64 = 1_000_000_000;

fn resolve_run(cx: &mut Ctx, s: &RunSection, ports: &[PortConfig]) -> RunConfig {
    let workers = s
        .workers
        .map_or(Some(1), |w| {
            cx.int_in("run.workers", w, 1, MAX_WORKERS as i64).map(|w| w as usize)
        })
        .unwrap_or(1);
    let mut cores = Vec::new();
    for (i, &c) in s.cores.iter().enumerate() {
        if let Some(c) = cx.int_in(&format!("run.cores[{i}]"), c, 0, 4095) {
            cores.push(c as usize);
        }
    }
    if !cores.is_empty() && cores.len() != workers {
        cx.error(format!(
            "run.cores: {} cores given for {workers} workers (give one per worker, or none)",
            cores.len()
        ));
    }
    let idle_sleep_ns = match s.idle.as_deref() {
        None | Some("busy") => None,
        Some(d) => match units::parse_duration(d) {
            Ok(ns) if ns > 0 && ns <= 100_000_000 => Some(ns),
            Ok(_) => {
                cx.error(format!("run.idle ({d}) must be \"busy\" or a sleep from 1ns to 100ms"));
                None
            }
            Err(e) => {
                cx.error(format!("run.idle: {e}"));
                None
            }
        },
    };
    let drain_timeout_ns = s
        .drain_timeout
        .as_ref()
        .and_then(|v| cx.duration("run.drain_timeout", v))
        .unwrap_or(DEFAULT_DRAIN_TIMEOUT_NS);
    let mut interfaces: BTreeMap<&str, usize> = BTreeMap::new();
    let mut outputs: BTreeMap<&std::path::Path, usize> = BTreeMap::new();
    for (i, p) in ports.iter().enumerate() {
        if let Some(ifname) = p.interface.as_deref() {
            if let Some(j) = interfaces.insert(ifname, i) {
                cx.error(format!("port[{i}].interface: {ifname:?} is already used by port[{j}]"));
            }
        }
        if let Some(out) = p.pcap.as_ref().and_then(|c| c.output.as_deref()) {
            if let Some(j) = outputs.insert(out, i) {
                cx.error(format!(
                    "port[{i}].pcap.output: {} is already written by port[{j}]",
                    out.display()
                ));
            }
        }
        if p.worker >= workers && p.worker != usize::MAX {
            cx.error(format!(
                "port[{i}].worker ({}) must be below run.workers ({workers})",
                p.worker
            ));
        }
    }
    RunConfig {
        workers,
        cores,
        idle_sleep_ns,
        drain_timeout_ns,
    }
}

/// Ports without an explicit worker go round robin over the workers.
fn assign_workers(mut ports: Vec<PortConfig>, workers: usize) -> Vec<PortConfig> {
    let mut next = 0;
    for p in &mut ports {
        if p.worker == usize::MAX {
            p.worker = next % workers.max(1);
            next += 1;
        }
    }
    ports
}

/// Resolves a parsed file into the model, or every reason it cannot be.
pub fn resolve(file: &ConfigFile) -> Result<Loaded, ConfigError> {
    let mut cx = Ctx::default();

    let e0 = cx.errors.len();
    let buffer = resolve_buffer(&mut cx, &file.buffer);
    let ports = resolve_ports(&mut cx, file);
    let sizes_ok_1 = cx.errors.len() == e0;

    let classify = resolve_classify(&mut cx, &file.classify, &ports);
    let pfc = resolve_pfc(&mut cx, &file.pfc);
    let loss = Losslessness::check(&mut cx, &classify, &pfc);
    let ecn = resolve_ecn(&mut cx, &file.ecn);
    let cnp_queue = resolve_cnp_queue(&mut cx, &file.cnp);

    let e1 = cx.errors.len();
    let (pgs, headroom_specs) = resolve_pgs(&mut cx, "pg", &file.pg, &loss);
    let (queues, mut used_ecn) = resolve_queues(&mut cx, "queue", &file.queue, &loss, &ecn, cnp_queue, &ports);
    // Per-port overrides, resolved like the global tables (errors name `port[i].…`). Only on a
    // valid global base: otherwise every port would repeat the global errors.
    let mut per_port: Vec<PortQos> = Vec::with_capacity(ports.len());
    let global_ok = cx.errors.len() == e1;
    for (i, p) in file.ports.iter().enumerate().take(ports.len()) {
        if !global_ok || (p.pg.is_empty() && p.queue.is_empty()) {
            per_port.push(PortQos {
                pgs: pgs.clone(),
                queues: queues.clone(),
                headroom: headroom_specs.clone(),
            });
            continue;
        }
        let warned = cx.warnings.len();
        let pg_map = overlay(&file.pg, &p.pg, PgSection::overlaid);
        let q_map = overlay(&file.queue, &p.queue, QueueSection::overlaid);
        let (ppgs, specs) = resolve_pgs(&mut cx, &format!("port[{i}].pg"), &pg_map, &loss);
        let (pqueues, used) = resolve_queues(
            &mut cx,
            &format!("port[{i}].queue"),
            &q_map,
            &loss,
            &ecn,
            cnp_queue,
            &ports,
        );
        used_ecn.extend(used);
        // What the global tables already warned about, the port's view repeats: keep one.
        let prefix = format!("port[{i}].");
        let fresh: Vec<String> = cx.warnings.drain(warned..).collect();
        for w in fresh {
            if !cx.warnings.contains(&w.replacen(&prefix, "", 1)) {
                cx.warnings.push(w);
            }
        }
        per_port.push(PortQos {
            pgs: ppgs,
            queues: pqueues,
            headroom: specs,
        });
    }
    for name in ecn.keys() {
        if !used_ecn.contains(name.as_str()) {
            cx.warn(format!("ecn.{name}: not used by any queue"));
        }
    }
    let sizes_ok_2 = cx.errors.len() == e1;

    let cnp = resolve_cnp(&mut cx, &file.cnp, cnp_queue, &queues, &loss);
    let fdb = resolve_fdb(&mut cx, &file.fdb, &ports);
    let ports = resolve_headroom(&mut cx, &ports, per_port, buffer.cell_bytes);

    let run = resolve_run(&mut cx, &file.run, &ports);
    let ports = assign_workers(ports, run.workers);
    let config = Config {
        run,
        buffer,
        ports,
        classify,
        cnp,
        pgs,
        queues,
        pfc,
        fdb,
    };
    if sizes_ok_1 && sizes_ok_2 {
        check_budget(&mut cx, &config, file.buffer.size.as_ref());
    }

    if cx.errors.is_empty() {
        Ok(Loaded {
            config,
            warnings: cx.warnings,
        })
    } else {
        Err(ConfigError::new(ConfigErrorKind::Invalid, cx.errors))
    }
}

/// Collects problems and converts scalars, recording an error (and returning `None`) when a
/// value is bad so resolution can carry on with a default.
#[derive(Default)]
struct Ctx {
    errors: Vec<String>,
    warnings: Vec<String>,
}

fn not_a(text: String, what: &'static str, hint: &str) -> UnitError {
    UnitError {
        text,
        what,
        hint: hint.to_string(),
    }
}

impl Ctx {
    fn error(&mut self, msg: String) {
        self.errors.push(msg);
    }

    fn warn(&mut self, msg: String) {
        self.warnings.push(msg);
    }

    fn unit<T>(&mut self, path: &str, r: Result<T, UnitError>) -> Option<T> {
        r.map_err(|e| self.error(format!("{path}: {e}"))).ok()
    }

    fn size(&mut self, path: &str, v: &Scalar) -> Option<u64> {
        let r = match v {
            Scalar::Int(n) if *n >= 0 => Ok(n.unsigned_abs()),
            Scalar::Str(s) => units::parse_size(s),
            other => Err(not_a(other.to_string(), "a size", "try 4MiB or 4MB")),
        };
        self.unit(path, r)
    }

    fn rate(&mut self, path: &str, v: &Scalar) -> Option<u64> {
        let r = match v {
            Scalar::Int(n) if *n >= 0 => Ok(n.unsigned_abs()),
            // An integral float such as 25e9 is a fine way to write bits per second.
            Scalar::Float(f) if *f >= 0.0 && f.fract() == 0.0 && *f < 1.8e19 => Ok(*f as u64),
            Scalar::Str(s) => units::parse_rate(s),
            other => Err(not_a(other.to_string(), "a rate", "try 25G or 400Mbps")),
        };
        self.unit(path, r)
    }

    fn length(&mut self, path: &str, v: &Scalar) -> Option<f64> {
        let r = match v {
            Scalar::Int(n) => Ok(*n as f64),
            Scalar::Float(f) => Ok(*f),
            Scalar::Str(s) => units::parse_length(s),
        };
        self.unit(path, r)
    }

    fn duration(&mut self, path: &str, v: &Scalar) -> Option<u64> {
        let r = match v {
            Scalar::Str(s) => units::parse_duration(s),
            other => Err(not_a(
                other.to_string(),
                "a duration",
                "give a unit: 200ms, 10us, 500ns or 1.5s",
            )),
        };
        self.unit(path, r)
    }

    /// A non-negative real: an alpha, a probability, a fraction. Strings may be fractions.
    fn real(&mut self, path: &str, v: &Scalar) -> Option<f64> {
        let r = match v {
            Scalar::Int(n) if *n >= 0 => Ok(*n as f64),
            Scalar::Float(f) if *f >= 0.0 && f.is_finite() => Ok(*f),
            Scalar::Str(s) => units::parse_alpha(s),
            other => Err(not_a(other.to_string(), "a number", "try 0.125 or 1/8")),
        };
        self.unit(path, r)
    }

    fn int_in(&mut self, path: &str, v: i64, lo: i64, hi: i64) -> Option<i64> {
        if (lo..=hi).contains(&v) {
            Some(v)
        } else {
            self.error(format!("{path}: {v} is out of range {lo}..={hi}"));
            None
        }
    }

    /// A small index (tc, queue, PG, DSCP, PCP) as u8.
    fn idx(&mut self, path: &str, v: i64, hi: u8, what: &str) -> Option<u8> {
        if (0..=i64::from(hi)).contains(&v) {
            u8::try_from(v).ok()
        } else {
            self.error(format!("{path}: {what} {v} is out of range 0..={hi}"));
            None
        }
    }

    /// A table key that must be a small index: `dscp_to_tc.26`, `pg.3`.
    fn key(&mut self, path: &str, key: &str, hi: u8, what: &str) -> Option<u8> {
        match key.trim().parse::<i64>() {
            Ok(v) => self.idx(path, v, hi, what),
            Err(_) => {
                self.error(format!("{path}: {key:?} is not a {what} number (0..={hi})"));
                None
            }
        }
    }

    /// One of a fixed set of words.
    fn word<T: Copy>(&mut self, path: &str, v: &str, choices: &[(&str, T)]) -> Option<T> {
        let found = choices
            .iter()
            .find(|(w, _)| w.eq_ignore_ascii_case(v.trim()))
            .map(|(_, t)| *t);
        if found.is_none() {
            let names: Vec<&str> = choices.iter().map(|(w, _)| *w).collect();
            self.error(format!("{path}: {v:?} is not one of {}", names.join(", ")));
        }
        found
    }
}

// ---------------------------------------------------------------------------------------------
// buffer and ports

fn resolve_buffer(cx: &mut Ctx, s: &BufferSection) -> BufferConfig {
    let mut cell_bytes = DEFAULT_CELL_BYTES;
    if let Some(v) = &s.cell {
        if let Some(c) = cx.size("buffer.cell", v) {
            let ok = c.is_power_of_two() && (u64::from(MIN_CELL_BYTES)..=u64::from(MAX_CELL_BYTES)).contains(&c);
            if ok {
                cell_bytes = u32::try_from(c).unwrap_or(DEFAULT_CELL_BYTES);
            } else {
                cx.error(format!(
                    "buffer.cell ({v}) must be a power of two from {MIN_CELL_BYTES}B to {MAX_CELL_BYTES}B"
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
    BufferConfig {
        cell_bytes,
        total_bytes,
    }
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

/// A port before headroom is known.
struct PortDraft {
    id: u16,
    name: Option<String>,
    interface: Option<String>,
    pcap: Option<PcapPortConfig>,
    worker: Option<usize>,
    speed_bps: u64,
    cable_m: f64,
    mtu: u32,
}

impl PortDraft {
    fn max_frame(&self) -> u32 {
        self.mtu + L2_OVERHEAD
    }
}

/// `None`: not given; `Some(None)`: given but invalid (already reported).
type Inherited<T> = Option<Option<T>>;

fn resolve_ports(cx: &mut Ctx, file: &ConfigFile) -> Vec<PortDraft> {
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

    if file.ports.is_empty() {
        cx.error("port: at least one [[port]] is required".to_string());
    } else if file.ports.len() > MAX_PORTS {
        cx.error(format!(
            "port: {} ports configured, at most {MAX_PORTS} are supported",
            file.ports.len()
        ));
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
        out.push(PortDraft {
            id,
            name: p.name.clone(),
            interface,
            pcap,
            worker,
            speed_bps: speed_bps.unwrap_or(0),
            cable_m: cable_m.unwrap_or(DEFAULT_CABLE_M),
            mtu: mtu.unwrap_or(DEFAULT_MTU),
        });
    }
    out
}

fn check_speed(cx: &mut Ctx, path: &str, v: &Scalar, s: Option<u64>) -> Option<u64> {
    match s {
        Some(0) => {
            cx.error(format!("{path} ({v}) must be above 0"));
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

// ---------------------------------------------------------------------------------------------
// classification

fn resolve_classify(cx: &mut Ctx, s: &ClassifySection, ports: &[PortDraft]) -> ClassifyConfig {
    let trust = s
        .trust
        .as_deref()
        .and_then(|t| {
            cx.word(
                "classify.trust",
                t,
                &[("dscp", Trust::Dscp), ("pcp", Trust::Pcp), ("none", Trust::None)],
            )
        })
        .unwrap_or(DEFAULT_TRUST);
    let default_tc = s
        .default_tc
        .and_then(|t| cx.idx("classify.default_tc", t, 7, "tc"))
        .unwrap_or(0);

    let mut dscp_to_tc = [default_tc; 64];
    fill_map(cx, "classify.dscp_to_tc", &s.dscp_to_tc, ("DSCP", 63), &mut dscp_to_tc);
    let mut pcp_to_tc = identity();
    fill_map(cx, "classify.pcp_to_tc", &s.pcp_to_tc, ("PCP", 7), &mut pcp_to_tc);
    let mut tc_to_queue = identity();
    fill_map(cx, "classify.tc_to_queue", &s.tc_to_queue, ("tc", 7), &mut tc_to_queue);
    let mut tc_to_pg = identity();
    fill_map(cx, "classify.tc_to_pg", &s.tc_to_pg, ("tc", 7), &mut tc_to_pg);
    if matches!(trust, Trust::None | Trust::Pcp) && !s.dscp_to_tc.is_empty() {
        cx.warn(format!(
            "classify.dscp_to_tc: ignored because classify.trust is {trust:?}"
        ));
    }
    if matches!(trust, Trust::None | Trust::Dscp) && !s.pcp_to_tc.is_empty() {
        cx.warn(format!(
            "classify.pcp_to_tc: ignored because classify.trust is {trust:?}"
        ));
    }

    let rules = resolve_rules(cx, &s.rules, ports);
    ClassifyConfig {
        trust,
        default_tc,
        dscp_to_tc,
        pcp_to_tc,
        tc_to_queue,
        tc_to_pg,
        rules,
    }
}

fn identity() -> [u8; NUM_TC] {
    [0, 1, 2, 3, 4, 5, 6, 7]
}

/// Fills `out[key] = value` from a `{ key = value }` table whose values are tcs, queues or PGs
/// (0..=7) and whose keys are `key_what` numbers up to `key_max`.
fn fill_map(cx: &mut Ctx, path: &str, map: &BTreeMap<String, i64>, (key_what, key_max): (&str, u8), out: &mut [u8]) {
    let value_what = match path.rsplit('_').next() {
        Some("queue") => "queue",
        Some("pg") => "PG",
        _ => "tc",
    };
    let mut seen: BTreeMap<u8, &str> = BTreeMap::new();
    for (k, v) in map {
        let p = format!("{path}.{k}");
        let key = cx.key(&p, k, key_max, key_what);
        let value = cx.idx(&p, *v, 7, value_what);
        if let Some(key) = key {
            if let Some(prev) = seen.insert(key, k) {
                cx.error(format!("{p}: {key_what} {key} is already mapped as {path}.{prev}"));
            }
            if let Some(value) = value {
                out[usize::from(key)] = value;
            }
        }
    }
}

fn resolve_rules(cx: &mut Ctx, rules: &[RuleSection], ports: &[PortDraft]) -> Vec<Rule> {
    let mut out = Vec::with_capacity(rules.len());
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    let mut catch_all: Option<usize> = None;
    for (i, r) in rules.iter().enumerate() {
        let path = format!("classify.rule[{i}]");
        let name = r.name.clone().unwrap_or_else(|| format!("rule{i}"));
        if name.trim().is_empty() {
            cx.error(format!("{path}.name: must not be empty"));
        } else if let Some(j) = names.insert(name.clone(), i) {
            cx.warn(format!("{path}.name: {name:?} is also the name of classify.rule[{j}]"));
        }
        let m = &r.matches;
        let mp = format!("{path}.match");
        let in_port = m.in_port.and_then(|p| {
            let id = cx.int_in(&format!("{mp}.in_port"), p, 0, 65535)?;
            let id = u16::try_from(id).ok()?;
            if !ports.iter().any(|d| d.id == id) {
                cx.error(format!("{mp}.in_port: there is no port with id {id}"));
            }
            Some(id)
        });
        let matches = RuleMatch {
            in_port,
            ether_type: m
                .ether_type
                .and_then(|v| cx.int_in(&format!("{mp}.ether_type"), v, 0, 0xffff))
                .and_then(|v| u16::try_from(v).ok()),
            ip_proto: m
                .ip_proto
                .and_then(|v| cx.int_in(&format!("{mp}.ip_proto"), v, 0, 255))
                .and_then(|v| u8::try_from(v).ok()),
            udp_dport: m
                .udp_dport
                .and_then(|v| cx.int_in(&format!("{mp}.udp_dport"), v, 0, 65535))
                .and_then(|v| u16::try_from(v).ok()),
            udp_sport: m
                .udp_sport
                .and_then(|v| cx.int_in(&format!("{mp}.udp_sport"), v, 0, 65535))
                .and_then(|v| u16::try_from(v).ok()),
            dscp: m.dscp.and_then(|v| cx.idx(&format!("{mp}.dscp"), v, 63, "DSCP")),
            pcp: m.pcp.and_then(|v| cx.idx(&format!("{mp}.pcp"), v, 7, "PCP")),
            roce: m.roce,
            cnp: m.cnp,
        };
        let a = &r.action;
        let ap = format!("{path}.action");
        let action = RuleAction {
            tc: a.tc.and_then(|v| cx.idx(&format!("{ap}.tc"), v, 7, "tc")),
            queue: a.queue.and_then(|v| cx.idx(&format!("{ap}.queue"), v, 7, "queue")),
            set_dscp: a
                .set_dscp
                .and_then(|v| cx.idx(&format!("{ap}.set_dscp"), v, 63, "DSCP")),
        };
        if a.tc.is_none() && a.queue.is_none() && a.set_dscp.is_none() {
            cx.error(format!(
                "{ap}: does nothing (rule {name:?}); give tc, queue or set_dscp"
            ));
        }
        if let Some(j) = catch_all {
            cx.warn(format!(
                "{path}: rule {name:?} is never reached: classify.rule[{j}] matches everything"
            ));
        } else if is_catch_all(m) {
            catch_all = Some(i);
        }
        out.push(Rule { name, matches, action });
    }
    out
}

fn is_catch_all(m: &MatchSection) -> bool {
    m.in_port.is_none()
        && m.ether_type.is_none()
        && m.ip_proto.is_none()
        && m.udp_dport.is_none()
        && m.udp_sport.is_none()
        && m.dscp.is_none()
        && m.pcp.is_none()
        && m.roce.is_none()
        && m.cnp.is_none()
}

// ---------------------------------------------------------------------------------------------
// PFC and losslessness

fn resolve_pfc(cx: &mut Ctx, s: &PfcSection) -> PfcConfig {
    let mut enabled = [false; NUM_TC];
    for (i, p) in s.priorities.iter().enumerate() {
        if let Some(p) = cx.idx(&format!("pfc.priorities[{i}]"), *p, 7, "priority") {
            if enabled[usize::from(p)] {
                cx.warn(format!("pfc.priorities[{i}]: priority {p} is listed twice"));
            }
            enabled[usize::from(p)] = true;
        }
    }
    let pause_quanta = s
        .pause_quanta
        .and_then(|q| cx.int_in("pfc.pause_quanta", q, 1, 65535))
        .and_then(|q| u16::try_from(q).ok())
        .unwrap_or(DEFAULT_PAUSE_QUANTA);
    let mut refresh_fraction = DEFAULT_REFRESH;
    if let Some(v) = &s.refresh {
        if let Some(f) = cx.real("pfc.refresh", v) {
            if f > 0.0 && f < 1.0 {
                refresh_fraction = f;
            } else {
                cx.error(format!(
                    "pfc.refresh ({v}) must be strictly between 0 and 1 (a fraction of the pause time)"
                ));
            }
        }
    }
    let watchdog = s.watchdog.as_ref().and_then(|w| resolve_watchdog(cx, w));
    if watchdog.is_some() && !enabled.iter().any(|e| *e) {
        cx.warn("pfc.watchdog: enabled but no PFC priority is; it has nothing to watch".to_string());
    }
    PfcConfig {
        enabled,
        pause_quanta,
        refresh_fraction,
        watchdog,
    }
}

fn resolve_watchdog(cx: &mut Ctx, w: &WatchdogSection) -> Option<WatchdogConfig> {
    let mut time = |key: &str, v: &Option<Scalar>, default: u64| -> u64 {
        let path = format!("pfc.watchdog.{key}");
        match v {
            None => default,
            Some(v) => match cx.duration(&path, v) {
                Some(0) => {
                    cx.error(format!("{path} ({v}) must be above 0"));
                    default
                }
                Some(ns) => ns,
                None => default,
            },
        }
    };
    let detection_ns = time("detection", &w.detection, DEFAULT_WD_DETECTION_NS);
    let restoration_ns = time("restoration", &w.restoration, DEFAULT_WD_RESTORATION_NS);
    let action = w
        .action
        .as_deref()
        .and_then(|a| {
            cx.word(
                "pfc.watchdog.action",
                a,
                &[
                    ("drop", WatchdogAction::Drop),
                    ("forward", WatchdogAction::Forward),
                    ("alert", WatchdogAction::Alert),
                ],
            )
        })
        .unwrap_or(WatchdogAction::Drop);
    if restoration_ns < detection_ns {
        cx.warn(format!(
            "pfc.watchdog.restoration ({}) is shorter than detection ({}): a storm may flap",
            units::format_duration(restoration_ns),
            units::format_duration(detection_ns)
        ));
    }
    if w.enabled == Some(false) {
        return None;
    }
    Some(WatchdogConfig {
        detection_ns,
        restoration_ns,
        action,
    })
}

/// Which PGs and queues are lossless, derived from the PFC priorities and the tc maps.
struct Losslessness {
    pg: [bool; NUM_TC],
    queue: [bool; NUM_TC],
}

impl Losslessness {
    fn check(cx: &mut Ctx, c: &ClassifyConfig, pfc: &PfcConfig) -> Self {
        let mut pg = [false; NUM_TC];
        let mut queue = [false; NUM_TC];
        for (p, _) in pfc.enabled.iter().enumerate().filter(|(_, e)| **e) {
            pg[usize::from(c.tc_to_pg[p])] = true;
            queue[usize::from(c.tc_to_queue[p])] = true;
        }
        let lossless_of =
            |field: &[u8; NUM_TC], target: u8| (0..NUM_TC).find(|&p| pfc.enabled[p] && field[p] == target);
        for t in (0..NUM_TC).filter(|&t| !pfc.enabled[t]) {
            let g = c.tc_to_pg[t];
            if pg[usize::from(g)] {
                let p = lossless_of(&c.tc_to_pg, g).unwrap_or(0);
                cx.error(format!(
                    "classify.tc_to_pg: lossy tc {t} and lossless priority {p} both map to PG {g}; \
                     a PG is either lossless or lossy"
                ));
            }
            let q = c.tc_to_queue[t];
            if queue[usize::from(q)] {
                let p = lossless_of(&c.tc_to_queue, q).unwrap_or(0);
                cx.error(format!(
                    "classify.tc_to_queue: lossy tc {t} and lossless priority {p} both map to queue {q}; \
                     a lossless queue must carry only lossless traffic"
                ));
            }
        }
        // A lossless priority nothing is classified into is probably a mistake in the maps.
        for p in (0..NUM_TC).filter(|&p| pfc.enabled[p]) {
            let tc = u8::try_from(p).unwrap_or(0);
            let by_rule = c.rules.iter().any(|r| r.action.tc == Some(tc));
            let (mapped, via) = match c.trust {
                Trust::Dscp => (
                    c.dscp_to_tc.contains(&tc),
                    "no DSCP value maps to it (classify.dscp_to_tc)",
                ),
                Trust::Pcp => (
                    c.pcp_to_tc.contains(&tc),
                    "no PCP value maps to it (classify.pcp_to_tc)",
                ),
                Trust::None => (
                    c.default_tc == tc,
                    "classify.trust is none and default_tc is another tc",
                ),
            };
            if !mapped && !by_rule {
                cx.warn(format!(
                    "pfc.priorities: priority {p} is lossless but {via} and no rule sets tc {p}"
                ));
            }
        }
        for (i, r) in c.rules.iter().enumerate() {
            if let Some(q) = r.action.queue {
                let tc_lossless = r.action.tc.is_some_and(|t| pfc.enabled[usize::from(t)]);
                if queue[usize::from(q)] && !tc_lossless {
                    cx.warn(format!(
                        "classify.rule[{i}].action.queue: queue {q} is lossless but rule {:?} \
                         does not set a lossless tc; lossy frames would share it",
                        r.name
                    ));
                }
            }
        }
        Losslessness { pg, queue }
    }
}

// ---------------------------------------------------------------------------------------------
// ECN, PGs, queues

fn resolve_ecn(cx: &mut Ctx, map: &BTreeMap<String, EcnSection>) -> BTreeMap<String, EcnProfile> {
    let mut out = BTreeMap::new();
    for (name, s) in map {
        let path = format!("ecn.{name}");
        let kmin = cx.size(&format!("{path}.kmin"), &s.kmin);
        let kmax = cx.size(&format!("{path}.kmax"), &s.kmax);
        if let (Some(lo), Some(hi)) = (kmin, kmax) {
            if lo > hi {
                cx.error(format!("{path}.kmin ({}) is above kmax ({})", s.kmin, s.kmax));
            }
        }
        if kmax == Some(0) {
            cx.error(format!("{path}.kmax ({}) must be above 0", s.kmax));
        }
        let pmax = cx.real(&format!("{path}.pmax"), &s.pmax);
        if let Some(p) = pmax {
            if p > 1.0 {
                cx.error(format!("{path}.pmax ({}) must be from 0 to 1", s.pmax));
            }
        }
        let ewma = s
            .ewma_shift
            .and_then(|n| cx.int_in(&format!("{path}.ewma_shift"), n, 0, MAX_EWMA_SHIFT))
            .and_then(|n| u8::try_from(n).ok());
        let average = s
            .average
            .as_deref()
            .and_then(|a| cx.word(&format!("{path}.average"), a, &[("instant", false), ("ewma", true)]));
        match (average, s.ewma_shift) {
            (Some(false), Some(_)) => cx.error(format!("{path}.ewma_shift: given but {path}.average is \"instant\"")),
            (Some(true), None) => cx.error(format!(
                "{path}.average: \"ewma\" needs {path}.ewma_shift (weight 2^-shift)"
            )),
            _ => {}
        }
        let mark_at = s
            .mark_at
            .as_deref()
            .and_then(|m| {
                cx.word(
                    &format!("{path}.mark_at"),
                    m,
                    &[("dequeue", MarkPoint::Dequeue), ("enqueue", MarkPoint::Enqueue)],
                )
            })
            .unwrap_or(MarkPoint::Dequeue);
        let non_ect = s
            .non_ect
            .as_deref()
            .and_then(|m| {
                cx.word(
                    &format!("{path}.non_ect"),
                    m,
                    &[("pass", NonEct::Pass), ("drop", NonEct::Drop)],
                )
            })
            .unwrap_or(NonEct::Pass);
        out.insert(
            name.clone(),
            EcnProfile {
                name: name.clone(),
                kmin_bytes: kmin.unwrap_or(0),
                kmax_bytes: kmax.unwrap_or(0),
                pmax: pmax.unwrap_or(0.0),
                ewma_shift: ewma,
                mark_at,
                non_ect,
            },
        );
    }
    out
}

/// The shared-pool limit keys of a `[pg.N]` or `[queue.N]` table.
struct LimitKeys<'a> {
    alpha: &'a Option<Scalar>,
    static_limit: &'a Option<Scalar>,
    dynamic_th: Option<i64>,
    unlimited: Option<bool>,
}

/// The threshold given by at most one of the keys, `None` if none was given.
fn resolve_limit(cx: &mut Ctx, path: &str, k: LimitKeys<'_>) -> Option<Threshold> {
    let given: Vec<&str> = [
        ("alpha", k.alpha.is_some()),
        ("static", k.static_limit.is_some()),
        ("dynamic_th", k.dynamic_th.is_some()),
        ("unlimited", k.unlimited == Some(true)),
    ]
    .iter()
    .filter(|(_, g)| *g)
    .map(|(n, _)| *n)
    .collect();
    if given.len() > 1 {
        cx.error(format!(
            "{path}: give only one of alpha, static, dynamic_th, unlimited (found {})",
            given.join(" and ")
        ));
        return None;
    }
    if k.unlimited == Some(false) && given.is_empty() {
        cx.error(format!(
            "{path}.unlimited: false is not a limit; give alpha, static or dynamic_th instead"
        ));
        return None;
    }
    if let Some(v) = k.alpha {
        return cx
            .real(&format!("{path}.alpha"), v)
            .map(|alpha| Threshold::Dynamic { alpha });
    }
    if let Some(v) = k.static_limit {
        return cx
            .size(&format!("{path}.static"), v)
            .map(|bytes| Threshold::Static { bytes });
    }
    if let Some(th) = k.dynamic_th {
        return Some(match units::alpha_from_dynamic_th(th) {
            Some(alpha) => Threshold::Dynamic { alpha },
            None => Threshold::Unlimited,
        });
    }
    if k.unlimited == Some(true) {
        return Some(Threshold::Unlimited);
    }
    None
}

/// Looks up `[pg.N]`/`[queue.N]` tables by number, reporting bad or duplicate keys.
fn by_index<'a, T>(cx: &mut Ctx, section: &str, map: &'a BTreeMap<String, T>) -> [Option<&'a T>; NUM_TC] {
    let mut out: [Option<&T>; NUM_TC] = [None; NUM_TC];
    let mut keys: [Option<&str>; NUM_TC] = [None; NUM_TC];
    let what = if section.ends_with("pg") { "PG" } else { "queue" };
    for (k, v) in map {
        let path = format!("{section}.{k}");
        if let Some(i) = cx.key(&path, k, 7, what) {
            let i = usize::from(i);
            if let Some(prev) = keys[i] {
                cx.error(format!("{path}: {what} {i} is already configured as {section}.{prev}"));
            }
            keys[i] = Some(k);
            out[i] = Some(v);
        }
    }
    out
}

/// Headroom as written for a lossless PG.
#[derive(Clone, Copy, Debug)]
enum HeadroomSpec {
    None,
    Auto,
    Fixed { bytes: u64 },
}

/// PG profiles from `[pg.N]` (`section` = "pg") or a port's merged view of them
/// (`section` = "port[i].pg", which is also how errors name them).
fn resolve_pgs(
    cx: &mut Ctx,
    section: &str,
    map: &BTreeMap<String, PgSection>,
    loss: &Losslessness,
) -> ([PgProfile; NUM_TC], [(HeadroomSpec, String); NUM_TC]) {
    let sections = by_index(cx, section, map);
    let default = PgSection::default();
    let pgs: [(PgProfile, (HeadroomSpec, String)); NUM_TC] = std::array::from_fn(|g| {
        let s = sections[g].unwrap_or(&default);
        let path = format!("{section}.{g}");
        let lossless = loss.pg[g];
        let min_bytes = s
            .min
            .as_ref()
            .and_then(|v| cx.size(&format!("{path}.min"), v))
            .unwrap_or(0);
        let limit = resolve_limit(
            cx,
            &path,
            LimitKeys {
                alpha: &s.alpha,
                static_limit: &s.static_limit,
                dynamic_th: s.dynamic_th,
                unlimited: s.unlimited,
            },
        );
        let shared = match (limit, lossless) {
            (Some(t), _) => t,
            (None, true) => Threshold::Dynamic {
                alpha: DEFAULT_LOSSLESS_PG_ALPHA,
            },
            (None, false) => Threshold::Unlimited,
        };
        if lossless && shared == Threshold::Unlimited {
            cx.error(format!(
                "{path}: PG {g} is lossless, so it needs a shared limit (alpha, static or \
                 dynamic_th below 7) to know when to send XOFF"
            ));
        }
        let mut spec = (HeadroomSpec::None, String::new());
        if let Some(v) = &s.headroom {
            if !lossless {
                cx.error(format!(
                    "{path}.headroom: PG {g} is lossy (no PFC priority maps to it), so it has no headroom"
                ));
            } else if matches!(v, Scalar::Str(t) if t.trim().eq_ignore_ascii_case("auto")) {
                spec = (HeadroomSpec::Auto, v.to_string());
            } else if let Some(bytes) = cx.size(&format!("{path}.headroom"), v) {
                spec = (HeadroomSpec::Fixed { bytes }, v.to_string());
            }
        } else if lossless {
            spec = (HeadroomSpec::Auto, "auto".to_string());
        }
        let mut xon_offset_bytes = 0;
        if lossless {
            xon_offset_bytes = s
                .xon_offset
                .as_ref()
                .and_then(|v| cx.size(&format!("{path}.xon_offset"), v))
                .unwrap_or(DEFAULT_XON_OFFSET_BYTES);
            if let (Threshold::Static { bytes }, true) = (shared, xon_offset_bytes > 0) {
                if xon_offset_bytes > bytes {
                    cx.warn(format!(
                        "{path}.xon_offset ({}) is above the PG's static limit ({}): XON waits until the PG is empty",
                        format_size(xon_offset_bytes),
                        format_size(bytes)
                    ));
                }
            }
        } else if s.xon_offset.is_some() {
            cx.warn(format!(
                "{path}.xon_offset: ignored, PG {g} is lossy and never sends XOFF"
            ));
        }
        (
            PgProfile {
                lossless,
                min_bytes,
                shared,
                xon_offset_bytes,
            },
            spec,
        )
    });
    let profiles = std::array::from_fn(|g| pgs[g].0.clone());
    let specs = std::array::from_fn(|g| pgs[g].1.clone());
    (profiles, specs)
}

fn resolve_cnp_queue(cx: &mut Ctx, s: &CnpSection) -> u8 {
    s.queue
        .and_then(|q| cx.idx("cnp.queue", q, 7, "queue"))
        .unwrap_or(DEFAULT_CNP_QUEUE)
}

fn resolve_rate_limit(
    cx: &mut Ctx,
    path: &str,
    s: &RateLimitSection,
    min_burst: u64,
    min_burst_why: &str,
) -> Option<RateLimit> {
    let rate = cx.rate(&format!("{path}.rate"), &s.rate);
    let burst = cx.size(&format!("{path}.burst"), &s.burst);
    if rate == Some(0) {
        cx.error(format!("{path}.rate ({}) must be above 0", s.rate));
    }
    if let Some(b) = burst {
        if b < min_burst {
            cx.error(format!(
                "{path}.burst ({}) must be at least {} ({min_burst_why})",
                s.burst,
                format_size(min_burst)
            ));
        }
    }
    Some(RateLimit {
        rate_bps: rate.filter(|r| *r > 0)?,
        burst_bytes: burst.filter(|b| *b >= min_burst)?,
    })
}

/// Queue profiles from `[queue.N]` or a port's merged view (as `resolve_pgs`), with the ECN
/// profiles they use.
fn resolve_queues<'e>(
    cx: &mut Ctx,
    section: &str,
    map: &BTreeMap<String, QueueSection>,
    loss: &Losslessness,
    ecn: &'e BTreeMap<String, EcnProfile>,
    cnp_queue: u8,
    ports: &[PortDraft],
) -> ([QueueProfile; NUM_TC], BTreeSet<&'e str>) {
    let sections = by_index(cx, section, map);
    let default = QueueSection::default();
    let max_frame = ports.iter().map(PortDraft::max_frame).max().unwrap_or(1518);
    let max_speed = ports.iter().map(|p| p.speed_bps).max().unwrap_or(0);
    let mut used_ecn: BTreeSet<&str> = BTreeSet::new();
    let queues = std::array::from_fn(|q| {
        let s = sections[q].unwrap_or(&default);
        let path = format!("{section}.{q}");
        let lossless = loss.queue[q];
        let min_bytes = s
            .min
            .as_ref()
            .and_then(|v| cx.size(&format!("{path}.min"), v))
            .unwrap_or(0);
        let limit = resolve_limit(
            cx,
            &path,
            LimitKeys {
                alpha: &s.alpha,
                static_limit: &s.static_limit,
                dynamic_th: s.dynamic_th,
                unlimited: s.unlimited,
            },
        );
        let shared = match (limit, lossless) {
            (Some(t), _) => t,
            (None, true) => Threshold::Unlimited,
            (None, false) => Threshold::Dynamic {
                alpha: DEFAULT_LOSSY_QUEUE_ALPHA,
            },
        };
        if !lossless && limit == Some(Threshold::Unlimited) {
            cx.warn(format!(
                "{path}: lossy queue {q} is unlimited and can take the whole shared pool"
            ));
        }
        let is_cnp = usize::from(cnp_queue) == q;
        let strict = match s.sched.as_deref() {
            Some(w) => cx
                .word(&format!("{path}.sched"), w, &[("strict", true), ("wdrr", false)])
                .unwrap_or(false),
            None => is_cnp,
        };
        let weight = s
            .weight
            .and_then(|w| cx.int_in(&format!("{path}.weight"), w, 1, MAX_WEIGHT))
            .and_then(|w| u32::try_from(w).ok())
            .unwrap_or(DEFAULT_WEIGHT);
        if strict && s.weight.is_some() {
            cx.warn(format!("{path}.weight: ignored, queue {q} is strict priority"));
        }
        let sched = if strict {
            SchedMode::Strict
        } else {
            SchedMode::Wdrr { weight }
        };
        let shaper = s.shaper.as_ref().and_then(|sh| {
            let sp = format!("{path}.shaper");
            let r = resolve_rate_limit(cx, &sp, sh, u64::from(max_frame), "one max frame, or the queue stalls")?;
            if max_speed > 0 && r.rate_bps >= max_speed {
                cx.warn(format!(
                    "{sp}.rate ({}) is not below the fastest port ({}), so it never limits",
                    sh.rate,
                    format_rate(max_speed)
                ));
            }
            Some(r)
        });
        let ecn = s.ecn.as_deref().and_then(|name| match ecn.get_key_value(name) {
            Some((k, p)) => {
                used_ecn.insert(k.as_str());
                Some(p.clone())
            }
            None => {
                let defined: Vec<&str> = ecn.keys().map(String::as_str).collect();
                cx.error(format!(
                    "{path}.ecn: there is no profile {name:?} (no [ecn.{name}]; defined: {})",
                    if defined.is_empty() {
                        "none".to_string()
                    } else {
                        defined.join(", ")
                    }
                ));
                None
            }
        });
        if let (Some(p), Threshold::Static { bytes }) = (&ecn, shared) {
            if p.kmin_bytes > bytes.saturating_add(min_bytes) {
                cx.warn(format!(
                    "{path}.ecn: ecn.{}.kmin ({}) is above the queue's limit ({}), so it never marks",
                    p.name,
                    format_size(p.kmin_bytes),
                    format_size(bytes.saturating_add(min_bytes))
                ));
            }
        }
        QueueProfile {
            min_bytes,
            shared,
            sched,
            shaper,
            ecn,
        }
    });
    (queues, used_ecn)
}

/// A port's view of `[pg.N]`/`[queue.N]`: the global tables with its own overrides laid over
/// them, matched by number.
fn overlay<T: Clone + Default>(
    global: &BTreeMap<String, T>,
    over: &BTreeMap<String, T>,
    lay: impl Fn(&T, &T) -> T,
) -> BTreeMap<String, T> {
    let mut merged = global.clone();
    for (k, v) in over {
        let n = k.trim().parse::<u8>().ok();
        let same = n.and_then(|n| global.keys().find(|g| g.trim().parse::<u8>().ok() == Some(n)).cloned());
        match same {
            Some(g) => {
                let laid = lay(&merged[&g], v);
                merged.insert(g, laid);
            }
            None => {
                merged.insert(k.clone(), lay(&T::default(), v));
            }
        }
    }
    merged
}

fn resolve_cnp(
    cx: &mut Ctx,
    s: &CnpSection,
    queue: u8,
    queues: &[QueueProfile; NUM_TC],
    loss: &Losslessness,
) -> CnpConfig {
    let q = usize::from(queue);
    if queues[q].sched != SchedMode::Strict {
        cx.warn(format!(
            "cnp.queue: queue {queue} is not strict priority (queue.{queue}.sched); \
             CNPs should overtake data to keep the control loop short"
        ));
    }
    if loss.queue[q] {
        cx.warn(format!(
            "cnp.queue: queue {queue} is lossless; CNPs would wait behind paused data"
        ));
    }
    let policer = s
        .policer
        .as_ref()
        .and_then(|p| resolve_rate_limit(cx, "cnp.policer", p, MIN_POLICER_BURST, "one minimum frame"));
    CnpConfig { queue, policer }
}

// ---------------------------------------------------------------------------------------------
// FDB

fn resolve_fdb(cx: &mut Ctx, s: &FdbSection, ports: &[PortDraft]) -> FdbConfig {
    let learning = s.learning.unwrap_or(DEFAULT_FDB_LEARNING);
    let aging_ns = match &s.aging {
        None => DEFAULT_FDB_AGING_NS,
        Some(v) => match cx.duration("fdb.aging", v) {
            Some(0) => {
                cx.error(format!("fdb.aging ({v}) must be above 0"));
                DEFAULT_FDB_AGING_NS
            }
            other => other.unwrap_or(DEFAULT_FDB_AGING_NS),
        },
    };
    let capacity = s
        .capacity
        .and_then(|c| cx.int_in("fdb.capacity", c, 1, MAX_FDB_CAPACITY))
        .and_then(|c| usize::try_from(c).ok())
        .unwrap_or(DEFAULT_FDB_CAPACITY);
    let mut static_entries = Vec::with_capacity(s.static_entries.len());
    let mut seen: BTreeMap<[u8; 6], usize> = BTreeMap::new();
    for (i, e) in s.static_entries.iter().enumerate() {
        let path = format!("fdb.static[{i}]");
        let mac = match parse_mac(&e.mac) {
            Some(m) if m[0] & 1 == 1 => {
                cx.error(format!(
                    "{path}.mac: {:?} is a multicast address; static entries are unicast",
                    e.mac
                ));
                None
            }
            Some(m) => Some(m),
            None => {
                cx.error(format!(
                    "{path}.mac: {:?} is not a MAC address (try \"02:00:00:00:00:01\")",
                    e.mac
                ));
                None
            }
        };
        if let Some(m) = mac {
            if let Some(j) = seen.insert(m, i) {
                cx.error(format!("{path}.mac: {:?} is already in fdb.static[{j}]", e.mac));
            }
        }
        let port = u16::try_from(e.port)
            .ok()
            .filter(|id| ports.iter().any(|p| p.id == *id));
        if port.is_none() {
            cx.error(format!("{path}.port: there is no port with id {}", e.port));
        }
        if let (Some(mac), Some(port)) = (mac, port) {
            static_entries.push(StaticMac { mac, port });
        }
    }
    if s.static_entries.len() > capacity {
        cx.error(format!(
            "fdb.static: {} entries do not fit fdb.capacity ({capacity})",
            s.static_entries.len()
        ));
    }
    FdbConfig {
        learning,
        aging_ns,
        capacity,
        static_entries,
    }
}

/// `02:00:00:00:00:01` or `02-00-00-00-00-01`.
pub fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = text.trim().split([':', '-']);
    for byte in &mut out {
        let part = parts.next()?;
        if part.is_empty() || part.len() > 2 {
            return None;
        }
        *byte = u8::from_str_radix(part, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

// ---------------------------------------------------------------------------------------------
// headroom and the buffer budget

/// One port's resolved PG and queue profiles (the global ones unless it overrides them).
struct PortQos {
    pgs: [PgProfile; NUM_TC],
    queues: [QueueProfile; NUM_TC],
    headroom: [(HeadroomSpec, String); NUM_TC],
}

fn resolve_headroom(cx: &mut Ctx, ports: &[PortDraft], qos: Vec<PortQos>, cell_bytes: u32) -> Vec<PortConfig> {
    let mut low: [Option<(u16, headroom::Headroom, String)>; NUM_TC] = std::array::from_fn(|_| None);
    let out = ports
        .iter()
        .zip(qos)
        .map(|(p, qos)| {
            let specs = &qos.headroom;
            let calc = headroom::headroom(p.speed_bps, p.cable_m, p.mtu, cell_bytes);
            let headroom_bytes = std::array::from_fn(|g| match specs[g].0 {
                HeadroomSpec::None => 0,
                HeadroomSpec::Auto => calc.bytes,
                HeadroomSpec::Fixed { bytes } => {
                    if bytes < calc.bytes && low[g].is_none() {
                        low[g] = Some((p.id, calc, specs[g].1.clone()));
                    }
                    bytes
                }
            });
            PortConfig {
                id: p.id,
                name: p.name.clone(),
                interface: p.interface.clone(),
                pcap: p.pcap.clone(),
                worker: p.worker.unwrap_or(usize::MAX),
                speed_bps: p.speed_bps,
                cable_m: p.cable_m,
                max_frame_bytes: p.max_frame(),
                headroom_bytes,
                pgs: qos.pgs,
                queues: qos.queues,
            }
        })
        .collect();
    for (g, l) in low.iter().enumerate() {
        if let Some((id, calc, text)) = l {
            cx.warn(format!(
                "pg.{g}.headroom ({}) is below the {} ({} cells) computed for port {id} \
                 ({} over {}): lossless frames may be dropped",
                text,
                format_size(calc.bytes),
                calc.cells,
                format_rate(calc.speed_bps),
                units::format_length(calc.cable_m)
            ));
        }
    }
    out
}

/// Worst-case bytes a threshold lets a PG or queue take from a shared pool of `pool` bytes.
fn worst_case(t: Threshold, pool: u64) -> Option<u64> {
    match t {
        Threshold::Static { bytes } => Some(bytes),
        // Float to int saturates; alpha × pool is capped by the pool itself.
        Threshold::Dynamic { alpha } => Some(((alpha * pool as f64) as u64).min(pool)),
        Threshold::Unlimited => None,
    }
}

fn check_budget(cx: &mut Ctx, c: &Config, size_text: Option<&Scalar>) {
    let cell = u64::from(c.buffer.cell_bytes);
    let cells = |b: u64| b.div_ceil(cell);
    let nports = c.ports.len() as u64;
    let total = c.buffer.total_bytes / cell;
    // Saturating throughout: absurd sizes must give an error, not an overflow.
    let sum = |it: &mut dyn Iterator<Item = u64>| it.fold(0u64, u64::saturating_add);
    let pg_min = sum(&mut c.ports.iter().flat_map(|p| p.pgs.iter()).map(|p| cells(p.min_bytes)));
    let q_min = sum(&mut c.ports.iter().flat_map(|p| p.queues.iter()).map(|q| cells(q.min_bytes)));
    let hr = sum(&mut c.ports.iter().flat_map(|p| p.headroom_bytes.iter()).map(|b| cells(*b)));
    let reserved = pg_min.saturating_add(q_min).saturating_add(hr);
    let size = size_text.map_or_else(|| format_size(c.buffer.total_bytes), ToString::to_string);
    if reserved > total {
        cx.error(format!(
            "buffer.size ({size} = {total} cells of {cell}B) is {} cells short: over {nports} ports \
             the PG minimums take {pg_min} cells, headroom {hr} and queue minimums {q_min}",
            reserved - total
        ));
        return;
    }
    let pool = (total - reserved) * cell;
    if pool == 0 {
        cx.warn(format!(
            "buffer.size ({size}): minimums and headroom reserve all of it, no shared pool is left"
        ));
    }

    // UCloud: a lossless PG must hit XOFF before the egress queue it feeds hits its limit,
    // even when every other port sends into that queue at once. Checked per egress port with
    // each port's own profiles (per-port overrides) and headroom; egress ports with the same
    // figures share one warning.
    let pg_hold = |p: &PortConfig, g: usize| {
        let prof = &p.pgs[g];
        let shared = worst_case(prof.shared, pool).unwrap_or(pool);
        [cells(shared), cells(prof.min_bytes), cells(p.headroom_bytes[g])]
    };
    for (g, _) in c.pgs.iter().enumerate().filter(|(_, p)| p.lossless) {
        for q in queue_set(c, g) {
            // (what the senders hold, in words; their total; the queue's limit) → egress ports.
            let mut over: BTreeMap<(String, u64, [u64; 2]), Vec<u16>> = BTreeMap::new();
            for (e, egress) in c.ports.iter().enumerate() {
                let queue = &egress.queues[q];
                let Some(q_shared) = worst_case(queue.shared, pool) else {
                    continue;
                };
                let limit = [cells(q_shared), cells(queue.min_bytes)];
                // A lone port can only fill its own queue.
                let senders: Vec<(u16, [u64; 3])> = (c.ports.iter().enumerate())
                    .filter(|&(i, _)| i != e || nports == 1)
                    .map(|(_, p)| (p.id, pg_hold(p, g)))
                    .collect();
                let hold = sum(&mut senders.iter().map(|(_, h)| sum(&mut h.iter().copied())));
                if hold <= limit[0].saturating_add(limit[1]) {
                    continue;
                }
                let words = if senders.windows(2).all(|w| w[0].1 == w[1].1) {
                    let [s, m, h] = senders[0].1;
                    let n = senders.len();
                    let ports = if n == 1 { "port" } else { "ports" };
                    format!("{n} ingress {ports} × (shared {s} + min {m} + headroom {h} cells)")
                } else {
                    let each: Vec<String> = (senders.iter())
                        .map(|(id, [s, m, h])| format!("port {id}: {s} + {m} + {h}"))
                        .collect();
                    format!("shared + min + headroom cells of {}", each.join(", "))
                };
                over.entry((words, hold, limit)).or_default().push(egress.id);
            }
            for ((words, hold, [q_shared, q_min]), ids) in over {
                let on = if ids.len() == nports as usize {
                    String::new()
                } else {
                    let ids: Vec<String> = ids.iter().map(u16::to_string).collect();
                    format!(" on port {}", ids.join(", "))
                };
                cx.warn(format!(
                    "queue.{q}{on}: lossless PG {g} can hold {words} = {hold} cells, more than \
                     queue {q}'s limit (shared {q_shared} + min {q_min} = {} cells); lossless \
                     frames may be dropped at egress: make queue.{q} unlimited or lower pg.{g}'s \
                     limit",
                    q_shared.saturating_add(q_min)
                ));
            }
        }
    }
}

/// Queues fed by the lossless priorities of PG `g`.
fn queue_set(c: &Config, g: usize) -> BTreeSet<usize> {
    (0..NUM_TC)
        .filter(|&p| c.pfc.enabled[p] && usize::from(c.classify.tc_to_pg[p]) == g)
        .map(|p| usize::from(c.classify.tc_to_queue[p]))
        .collect()
}
