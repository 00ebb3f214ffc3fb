//! `rocesw conform sonic`: SONiC's own QoS test procedures (sonic-mgmt's tests/qos and
//! tests/pfcwd) run against a config_db.json in virtual time, in seconds instead of a lab's
//! hours: each test's traffic built as its PTF class builds it, sent through the switch the
//! config describes with the destination's transmit off where the test turns it off, the same
//! counters read, reported like a test runner. docs/conform.md says which procedures and
//! versions it follows and where rocesw's counters differ from an ASIC's.
//!
//! dut.rs is the switch in virtual time with a host on every port; params.rs derives each
//! test's expected counts from the config by the platform's buffer rules; yaml.rs reads them
//! from a sonic-mgmt `qos_params.*.yaml` instead; procedures.rs holds the procedures; report.rs
//! what they report; cli.rs the command.

pub mod cli;
pub mod dut;
pub mod fleet;
pub mod nvidia;
pub mod params;
pub mod procedures;
pub mod report;
pub mod simlog;
pub mod yaml;

use anyhow::{anyhow, bail, Context, Result};
use dut::Dut;
use params::LosslessPoints;
use procedures::Watermark;
use report::{SuiteReport, TestResult};

/// The tests, in the order they run, by the names `--only` takes (sonic-mgmt's PTF classes).
pub const TESTS: [&str; 12] = [
    "DscpMappingPB",
    "PFCtest",
    "PFCXonTest",
    "LossyQueueTest",
    "WRRtest",
    "DscpEcnSend",
    "HdrmPoolSizeTest",
    "PGSharedWatermarkTest",
    "PGHeadroomWatermarkTest",
    "QSharedWatermarkTest",
    "BufferPoolWatermarkTest",
    "PfcWdTest",
];

/// Each test's margin (`pkts_num_margin`), in frames.
#[derive(Debug, Clone, Copy)]
pub struct Margins {
    /// PFCtest.
    pub xoff: u64,
    /// PFCXonTest.
    pub xon: u64,
    /// LossyQueueTest.
    pub lossy: u64,
    /// HdrmPoolSizeTest.
    pub hdrm: u64,
    /// PGSharedWatermarkTest.
    pub wm_pg_shared: u64,
    /// PGHeadroomWatermarkTest.
    pub wm_pg_headroom: u64,
    /// QSharedWatermarkTest.
    pub wm_q_shared: u64,
    /// BufferPoolWatermarkTest.
    pub wm_pool: u64,
}

/// How a run is laid out: ports, packet sizes, margins, the parameters' source.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The source port (index).
    pub src: usize,
    /// The destination port (index).
    pub dst: usize,
    /// PFCXonTest's three destinations, when the switch has four ports.
    pub xon_dsts: Option<Vec<usize>>,
    /// Frame size of the lossless tests (the suite's `packet_size`).
    pub lossless_len: usize,
    /// Frame size of LossyQueueTest.
    pub lossy_len: usize,
    /// Frame size of WRRtest (the suite's default 1500).
    pub wrr_len: usize,
    /// WRRtest's `limit`.
    pub wrr_limit: u64,
    /// WRRtest's (DSCP, frames) in the order they are sent.
    pub wrr_counts: Vec<(u8, u64)>,
    /// The lossless DSCPs (xoff_1, xoff_2: 3 and 4).
    pub lossless_dscps: Vec<u8>,
    /// The lossy DSCP (lossy_queue_1: 8).
    pub lossy_dscp: u8,
    /// The margins.
    pub margins: Margins,
    /// LossyQueueTest's trigger count from `--params`, in frames.
    pub trig_egr_drp_override: Option<u64>,
    /// `--params`, when given.
    pub yaml: Option<yaml::Params>,
    /// PFC_WD|GLOBAL|POLL_INTERVAL, ns.
    pub wd_poll_ns: u64,
    /// How long the suite waits for a storm to be detected, ns.
    pub wd_detect_wait_ns: u64,
    /// The platform's SAI counts a lossy frame's buffer drop on its egress port (NVIDIA), not
    /// where rocesw's threshold refused it.
    pub lossy_drops_at_egress: bool,
    /// The platform is NVIDIA's (sonic-mgmt's conditional marks skip some tests there).
    pub nvidia: bool,
    /// The file enables SONiC's tunnel QoS remap: WRRtest's DSCPs are the suite's remap list.
    pub qos_remap: bool,
}

impl Plan {
    /// The lossless PG's points: derived from the config, or `--params`' counts where it has
    /// them (in cells of its `cell_size`, made frames as the suite does).
    pub fn lossless_points(&self, d: &Dut, src: usize, pg: usize, len: usize) -> LosslessPoints {
        let mut p = params::lossless(d.config(), src, pg, len);
        let Some(y) = &self.yaml else { return p };
        let set_for = |prefix: &str| {
            (1..=4)
                .map(|i| format!("{prefix}_{i}"))
                .find(|s| y.int(s, "pg") == Some(pg as i64))
        };
        if let Some(set) = set_for("xoff") {
            if let Some(t) = y.int(&set, "pkts_num_trig_pfc") {
                p.trig_pfc = y.cells_as_frames(&set, t, len);
                p.derivation.push(format!(
                    "{}.{set}.pkts_num_trig_pfc = {t}: XOFF at frame {}",
                    y.path, p.trig_pfc
                ));
            }
            if let Some(dr) = y.int(&set, "pkts_num_trig_ingr_drp") {
                p.trig_ingr_drp = y.cells_as_frames(&set, dr, len);
                p.derivation.push(format!(
                    "{}.{set}.pkts_num_trig_ingr_drp = {dr}: first drop at frame {}",
                    y.path, p.trig_ingr_drp
                ));
            }
        }
        if let Some(set) = set_for("xon") {
            if let Some(x) = y.int(&set, "pkts_num_dismiss_pfc") {
                let h = y.int(&set, "pkts_num_hysteresis").unwrap_or(0);
                let dismissed = y.cells_as_frames(&set, x + h, len);
                p.xon_frames = p.trig_pfc.saturating_sub(self.margins.xon + dismissed);
                p.derivation.push(format!(
                    "{}.{set}: dismiss {x} + hysteresis {h}: XON at or below {} frames",
                    y.path, p.xon_frames
                ));
                // The suite's own T for this set (its xon_N may carry a trigger count of its
                // own, which need not be its xoff_N's), divided as the suite divides.
                let t = y
                    .int(&set, "pkts_num_trig_pfc")
                    .unwrap_or((p.trig_pfc * p.occupancy) as i64);
                let m = self.margins.xon;
                let first = y.cells_as_frames(&set, t - x - h, len).saturating_sub(m);
                let second = (y.cells_as_frames(&set, x + h, len) + 2 * m).saturating_sub(1);
                p.xon_sends = Some([first, second, 1]);
                p.derivation.push(format!(
                    "{}.{set}: pkts_num_trig_pfc {t}: sends {first}, {second}, 1 (the suite's division)",
                    y.path
                ));
            }
        }
        p
    }
}

/// What `rocesw conform sonic` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--platform`.
    pub platform: Option<String>,
    /// `--pg-lookup`: its text and name.
    pub pg_lookup: Option<(String, String)>,
    /// `--params`: its text and name.
    pub params: Option<(String, String)>,
    /// `--topo`: the topology section of `--params` (`t1-64-lag`); None: the first in the
    /// file with the source port's `<speed>_<cable>`.
    pub topo: Option<String>,
    /// `--only`: test names (empty: all).
    pub only: Vec<String>,
    /// `--src`, `--dst`: port names or ids.
    pub src: Option<String>,
    /// See `src`.
    pub dst: Option<String>,
    /// `--write-params`: also return the counts as a qos_params YAML.
    pub write_params: bool,
}

/// The poll interval of the PFC watchdog, PFC_WD|GLOBAL|POLL_INTERVAL in ms (200 ms, what
/// `pfcwd start_default` writes, when absent), read from the file as the import does not keep
/// it (rocesw's watchdog looks every round).
fn wd_poll_ms(json: &str) -> u64 {
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(json) else {
        return 200;
    };
    let v = doc
        .get("PFC_WD")
        .and_then(|t| t.get("GLOBAL"))
        .or_else(|| doc.get("PFC_WD|GLOBAL"))
        .and_then(|g| g.get("POLL_INTERVAL"));
    v.and_then(|v| v.as_u64().or_else(|| v.as_str().and_then(|s| s.parse().ok())))
        .filter(|&ms| ms > 0)
        .unwrap_or(200)
}

/// Whether the file enables SONiC's tunnel QoS remap (`SYSTEM_DEFAULTS|tunnel_qos_remap|status`),
/// which is how sonic-mgmt's `is_tunnel_qos_remap_enabled` picks WRRtest's DSCPs.
fn tunnel_qos_remap(json: &str) -> bool {
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(json) else {
        return false;
    };
    doc.get("SYSTEM_DEFAULTS")
        .and_then(|t| t.get("tunnel_qos_remap"))
        .or_else(|| doc.get("SYSTEM_DEFAULTS|tunnel_qos_remap"))
        .and_then(|e| e.get("status"))
        .and_then(|v| v.as_str())
        .is_some_and(|v| v == "enabled")
}

/// WRRtest's DSCPs, the queues the suite expects them in and whether that queue is lossless,
/// as sonic-mgmt's `WRRtest` (tests/saitests/py3/sai_qos_tests.py) lists them when the
/// parameters give none: with the remap, DSCP 5 joins DSCP 0 in queue 1 and 48 goes to queue
/// 7, so the suite leaves 5 out and counts 48 in queue 7.
pub fn wrr_dscps(qos_remap: bool) -> &'static [(u8, u8, bool)] {
    if qos_remap {
        &[
            (3, 3, true),
            (4, 4, true),
            (8, 0, false),
            (0, 1, false),
            (46, 5, false),
            (48, 7, false),
        ]
    } else {
        &[
            (3, 3, true),
            (4, 4, true),
            (8, 0, false),
            (0, 1, false),
            (5, 2, false),
            (46, 5, false),
            (48, 6, false),
        ]
    }
}

/// The file `json` (called `name`) as the import reads it, with the options' platform and
/// lookup table.
fn import(json: &str, name: &str, opts: &Options) -> Result<controlplane::sonic::Imported> {
    let import_opts = controlplane::sonic::ImportOptions {
        platform: opts.platform.clone(),
        pg_lookup: opts.pg_lookup.clone(),
        source: Some(name.to_string()),
    };
    controlplane::sonic::import_text(json, &import_opts)
        .map_err(|p| anyhow!("{name}: cannot be imported:\n  {}", p.join("\n  ")))
}

/// The `<speed>_<cable>` of port `src`'s PG 3 profile (`pg_lossless_100000_5m_profile`):
/// what picks a qos_params section.
fn speed_cable(imported: &controlplane::sonic::Imported, src: &str) -> Option<String> {
    imported
        .pg_profiles
        .iter()
        .find(|(p, pg, _)| p == src && *pg == 3)
        .and_then(|(_, _, profile)| yaml::speed_cable(profile))
}

/// NVIDIA's parameters for the switch `json` describes, as sonic-mgmt's generator writes them
/// from the file (`--params nvidia`), with the source port `opts.src` (default: the first):
/// a qos_params YAML. Kept, they are the suite's numbers for that file; a changed file run
/// against them (`--params` with this text) is checked as the suite checks a DUT whose
/// numbers were generated before the change.
pub fn nvidia_params(json: &str, name: &str, opts: &Options) -> Result<String> {
    let imported = import(json, name, opts)?;
    let src = match &opts.src {
        Some(s) => s.clone(),
        None => imported
            .ports
            .first()
            .map(|(n, _)| n.clone())
            .ok_or_else(|| anyhow!("{name}: no port"))?,
    };
    let sc = speed_cable(&imported, &src)
        .ok_or_else(|| anyhow!("{src}'s PG 3 has no pg_lossless_<speed>_<cable>_profile"))?;
    let mut doc = nvidia::generate(nvidia::MELLANOX_YAML, json, &imported, &src, &sc)?;
    // Without the `profile` sections the text is read as numbers, not generated again.
    if let Some(topos) = doc
        .get_mut("qos_params")
        .and_then(|q| q.get_mut("mellanox"))
        .and_then(serde_json::Value::as_object_mut)
    {
        for t in topos.values_mut().filter_map(serde_json::Value::as_object_mut) {
            t.remove("profile");
        }
    }
    Ok(serde_yaml_ng::to_string(&doc)?)
}

/// Runs the suite on the switch `json` (a config_db.json, called `name`) describes.
/// `progress` is told each test's name as it starts.
pub fn run(
    json: &str,
    name: &str,
    opts: &Options,
    progress: &mut dyn FnMut(&str),
) -> Result<(SuiteReport, Option<String>)> {
    if !controlplane::sonic::looks_like_config_db(json) {
        bail!("{name}: not a SONiC config_db.json (no PORT, BUFFER_* or DEVICE_METADATA table)");
    }
    if opts.topo.is_some() && opts.params.is_none() {
        bail!("--topo picks a topology of --params' file: give --params too");
    }
    for t in &opts.only {
        if !TESTS.iter().any(|x| x.eq_ignore_ascii_case(t)) {
            bail!("--only {t}: no such test (tests: {})", TESTS.join(", "));
        }
    }
    let imported = import(json, name, opts)?;
    let cfg = controlplane::load_str(&imported.toml)
        .map_err(|e| anyhow!("{name}: the imported config is invalid:\n{e}"))?
        .config;
    let nvidia = imported.platform.name.starts_with("spectrum");
    let mut dut = Dut::new(&cfg)?;
    let n = cfg.ports.len();
    let port = |o: &Option<String>, default: usize, what: &str| -> Result<usize> {
        match o {
            Some(p) => dut.port(p).map_err(|e| anyhow!("{what} {p}: {e}")),
            None => Ok(default),
        }
    };
    let src = port(&opts.src, 0, "--src")?;
    let dst = port(&opts.dst, if src == 1 { 0 } else { 1 }, "--dst")?;
    if src == dst {
        bail!("--src and --dst are the same port ({})", dut.name(src));
    }
    let others: Vec<usize> = (0..n).filter(|&p| p != src).collect();
    let xon_dsts = (others.len() >= 3).then(|| {
        let mut v = vec![dst];
        v.extend(others.iter().copied().filter(|&p| p != dst).take(2));
        v
    });
    let src_name = dut.name(src);
    let speed_cable = speed_cable(&imported, &src_name);
    let yaml = match &opts.params {
        None => None,
        Some((text, file)) => {
            let sc = speed_cable.clone().ok_or_else(|| {
                anyhow!("--params {file}: {src_name}'s PG 3 has no pg_lossless_<speed>_<cable>_profile to pick a section by")
            })?;
            if nvidia::is_mellanox(text) {
                // NVIDIA's counts are the generator's, from this file's profiles.
                let doc = nvidia::generate(text, json, &imported, &src_name, &sc)
                    .with_context(|| format!("--params {file}: NVIDIA's generator"))?;
                let generated = serde_yaml_ng::to_string(&doc)?;
                Some(yaml::Params::parse(&generated, file, &sc, opts.topo.as_deref())?)
            } else {
                Some(yaml::Params::parse(text, file, &sc, opts.topo.as_deref())?)
            }
        }
    };
    // The suite's defaults: NVIDIA's parameters (qos_params.mellanox.yaml) send 300 B packets
    // and the generator's margins; the others 64 B and the PTF classes' own margins.
    let yint = |set: &str, field: &str| yaml.as_ref().and_then(|y| y.int(set, field)).map(|v| v.max(0) as u64);
    let base_len = if nvidia { 300 } else { 64 };
    let margins = Margins {
        xoff: yint("xoff_1", "pkts_num_margin").unwrap_or(if nvidia { 4 } else { 2 }),
        xon: yint("xon_1", "pkts_num_margin").unwrap_or(if nvidia { 3 } else { 1 }),
        lossy: yint("lossy_queue_1", "pkts_num_margin").unwrap_or(if nvidia { 4 } else { 2 }),
        // The suite's HdrmPoolSizeTest reads `margin`; `pkts_num_margin` as the other sets.
        hdrm: yint("hdrm_pool_size", "margin")
            .or_else(|| yint("hdrm_pool_size", "pkts_num_margin"))
            .unwrap_or(if nvidia { 3 } else { 2 }),
        // The PTF classes' defaults (2, 0, 8, 2); NVIDIA's generator sets 4 (Spectrum-1), 3, 9.
        wm_pg_shared: yint("wm_pg_shared_lossless", "pkts_num_margin").unwrap_or(if nvidia { 4 } else { 2 }),
        wm_pg_headroom: yint("wm_pg_headroom", "pkts_num_margin").unwrap_or(if nvidia { 3 } else { 0 }),
        wm_q_shared: yint("wm_q_shared_lossless", "pkts_num_margin").unwrap_or(if nvidia { 9 } else { 8 }),
        wm_pool: yint("wm_buf_pool_lossless", "pkts_num_margin").unwrap_or(2),
    };
    let wrr_q = |q: u8, default: u64| yint("wrr", &format!("q{q}_num_of_pkts")).unwrap_or(default);
    let lossy_len = yint("lossy_queue_1", "packet_size").unwrap_or(base_len as u64) as usize;
    let qos_remap = tunnel_qos_remap(json);
    let plan = Plan {
        src,
        dst,
        xon_dsts,
        lossless_len: yint("xoff_1", "packet_size").unwrap_or(base_len as u64) as usize,
        lossy_len,
        wrr_len: yint("wrr", "packet_size").unwrap_or(1500) as usize,
        wrr_limit: yint("wrr", "limit").unwrap_or(80),
        wrr_counts: wrr_dscps(qos_remap)
            .iter()
            .map(|&(dscp, q, lossless)| (dscp, wrr_q(q, if lossless { 150 } else { 140 })))
            .collect(),
        lossless_dscps: vec![3, 4],
        lossy_dscp: 8,
        margins,
        trig_egr_drp_override: yaml
            .as_ref()
            .and_then(|y| y.frames("lossy_queue_1", "pkts_num_trig_egr_drp", lossy_len)),
        yaml,
        wd_poll_ns: wd_poll_ms(json) * 1_000_000,
        wd_detect_wait_ns: if nvidia { 30_000_000_000 } else { 5_000_000_000 },
        lossy_drops_at_egress: nvidia,
        nvidia,
        qos_remap,
    };
    let written = if opts.write_params {
        let sc = speed_cable.clone().ok_or_else(|| {
            anyhow!(
                "--write-params: {src_name}'s PG 3 has no pg_lossless_<speed>_<cable>_profile to key the section by"
            )
        })?;
        // sonic-mgmt's keys: `mellanox` for every Spectrum, the ASIC family for Broadcom.
        let asic = imported.platform.qos_params_key;
        Some(written_params(&dut, &plan, asic, sc)?.text(name)?)
    } else {
        None
    };
    let wanted = |t: &str| opts.only.is_empty() || opts.only.iter().any(|o| o.eq_ignore_ascii_case(t));
    let mut tests: Vec<TestResult> = Vec::new();
    // The source port's maps (SONiC binds them per port).
    let maps = cfg.port_maps(plan.src);
    let lossy_pg = usize::from(maps.tc_to_pg[usize::from(maps.dscp_to_tc[8])]);
    for name in TESTS {
        if !wanted(name) {
            continue;
        }
        progress(name);
        let first = tests.len();
        // The switch's own log while the test runs goes to the test's result, not to the
        // process's log (a storm it provokes would print in the middle of the report).
        let (ran, log) = simlog::capture(|| -> Result<()> {
            let d = &mut dut;
            match name {
                "DscpMappingPB" => tests.push(procedures::dscp_mapping(d, &plan)?),
                "PFCtest" => {
                    tests.push(procedures::pfc_xoff(d, &plan, "xoff_1", 3, 3)?);
                    tests.push(procedures::pfc_xoff(d, &plan, "xoff_2", 4, 4)?);
                }
                "PFCXonTest" => {
                    tests.push(procedures::pfc_xon(d, &plan, "xon_1", 3, 3)?);
                    tests.push(procedures::pfc_xon(d, &plan, "xon_2", 4, 4)?);
                }
                "LossyQueueTest" => tests.push(procedures::lossy_queue(d, &plan, plan.lossy_dscp, lossy_pg)?),
                "WRRtest" => {
                    tests.push(procedures::wrr(d, &plan)?);
                    tests.push(procedures::wrr_chg(d, &plan)?);
                }
                "DscpEcnSend" => {
                    for i in 1..=4 {
                        tests.push(procedures::dscp_ecn(d, &plan, i)?);
                    }
                }
                "HdrmPoolSizeTest" => tests.push(procedures::hdrm_pool_size(d, &plan)?),
                "PGSharedWatermarkTest" => tests.push(procedures::watermark(d, &plan, Watermark::PgShared, 3, 3)?),
                "PGHeadroomWatermarkTest" => tests.push(procedures::watermark(d, &plan, Watermark::PgHeadroom, 3, 3)?),
                "QSharedWatermarkTest" => tests.push(procedures::watermark(d, &plan, Watermark::QueueShared, 3, 3)?),
                "BufferPoolWatermarkTest" => tests.push(procedures::watermark(d, &plan, Watermark::IngressPool, 3, 3)?),
                "PfcWdTest" => tests.push(procedures::pfcwd(d, &plan, 3)?),
                _ => unreachable!("every name of TESTS is handled"),
            }
            // Each test starts from an empty buffer, as the suite's do (it waits for the DUT to
            // drain between tests).
            for p in 0..n {
                d.stop_storm(p);
            }
            d.settle()
        });
        ran?;
        for t in &mut tests[first..] {
            t.log = log.clone();
        }
    }
    let report = SuiteReport {
        config: name.to_string(),
        platform: imported.platform.name.to_string(),
        params: match &plan.yaml {
            Some(y) => format!(
                "from {} ({})",
                opts.params.as_ref().map_or("", |p| p.1.as_str()),
                y.path
            ),
            None => "computed from the config by the platform's rules".to_string(),
        },
        tests,
        virtual_ns: dut.now(),
    };
    Ok((report, written))
}

/// The counts of `plan` on the switch as it starts, as `--write-params` writes them.
fn written_params(d: &Dut, plan: &Plan, asic: &str, speed_cable: String) -> Result<yaml::Written> {
    use serde_json::{json, Map, Value};
    let cfg = d.config();
    let cell = u64::from(cfg.buffer.cell_bytes);
    let len = plan.lossless_len;
    let mut by_speed = Map::new();
    let mut common = Map::new();
    by_speed.insert("pkts_num_leak_out".into(), json!(0));
    for (i, (dscp, pg)) in [(3u8, 3usize), (4, 4)].into_iter().enumerate() {
        let p = plan.lossless_points(d, plan.src, pg, len);
        let occ = p.occupancy;
        by_speed.insert(
            format!("xoff_{}", i + 1),
            json!({"dscp": dscp, "ecn": 1, "pg": pg, "pkts_num_trig_pfc": p.trig_pfc * occ,
                   "pkts_num_trig_ingr_drp": p.trig_ingr_drp * occ, "pkts_num_margin": plan.margins.xoff,
                   "packet_size": len, "cell_size": cell}),
        );
        let dismiss = p.trig_pfc.saturating_sub(plan.margins.xon + p.xon_frames);
        common.insert(
            format!("xon_{}", i + 1),
            json!({"dscp": dscp, "ecn": 1, "pg": pg, "pkts_num_trig_pfc": p.trig_pfc * occ,
                   "pkts_num_dismiss_pfc": dismiss * occ, "pkts_num_hysteresis": 0,
                   "pkts_num_margin": plan.margins.xon, "packet_size": len, "cell_size": cell}),
        );
        if i == 0 {
            let base = json!({"dscp": dscp, "ecn": 1, "pg": pg, "queue": pg, "packet_size": len, "cell_size": cell,
                              "pkts_num_trig_pfc": p.trig_pfc * occ, "pkts_num_trig_ingr_drp": p.trig_ingr_drp * occ,
                              "pkts_num_fill_min": p.fill_min * occ});
            for (set, m) in [
                ("wm_pg_headroom", plan.margins.wm_pg_headroom),
                ("wm_q_shared_lossless", plan.margins.wm_q_shared),
            ] {
                let mut v = base.clone();
                v["pkts_num_margin"] = json!(m);
                by_speed.insert(set.into(), v);
            }
            for (set, m) in [
                ("wm_pg_shared_lossless", plan.margins.wm_pg_shared),
                ("wm_buf_pool_lossless", plan.margins.wm_pool),
            ] {
                let mut v = base.clone();
                v["pkts_num_margin"] = json!(m);
                common.insert(set.into(), v);
            }
        }
    }
    // HdrmPoolSizeTest's counts, as sonic-mgmt's `hdrm_pool_size` set holds them (in cells;
    // `src_port_ids` and `dst_port_id` are the switch's port indices, config order).
    // Only a pool the rules see running out: otherwise the test is skipped, and has no counts.
    if let Some(f) = procedures::hdrm_fill(d, plan).ok().filter(|f| f.left < f.occ) {
        let occ = f.occ;
        let n = f.plans.len();
        let dscps: Vec<u8> = f
            .tuples
            .iter()
            .take_while(|t| t.0 == f.tuples[0].0)
            .map(|t| t.1)
            .collect();
        let pgs: Vec<usize> = f
            .tuples
            .iter()
            .take_while(|t| t.0 == f.tuples[0].0)
            .map(|t| t.2)
            .collect();
        let mut srcs: Vec<usize> = f.plans.iter().map(|p| p.0).collect();
        srcs.dedup();
        // The PGs before the last take whole headroom. The suite has one count for them (the
        // least, so that it never overfills one); each PG's is rocesw's own
        // `pkts_num_hdrm_full_multi`, which `--params` reads first.
        let full = f.plans[..n - 1].iter().map(|p| p.4).min().unwrap_or(0);
        by_speed.insert(
            "hdrm_pool_size".into(),
            json!({"dscps": dscps, "ecn": 1, "pgs": pgs, "src_port_ids": srcs, "dst_port_id": plan.dst,
                   "pgs_num": n, "pkts_num_trig_pfc": f.plans[0].3 * occ,
                   "pkts_num_trig_pfc_multi": f.plans.iter().map(|p| p.3 * occ).collect::<Vec<_>>(),
                   "pkts_num_hdrm_full": full * occ,
                   "pkts_num_hdrm_full_multi": f.plans[..n - 1].iter().map(|p| p.4 * occ).collect::<Vec<_>>(),
                   "pkts_num_hdrm_partial": f.plans[n - 1].4 * occ,
                   "margin": plan.margins.hdrm, "packet_size": len, "cell_size": cell}),
        );
    }
    let maps = cfg.port_maps(plan.src);
    let lossy_tc = usize::from(maps.dscp_to_tc[usize::from(plan.lossy_dscp)]);
    let (pg, q) = (
        usize::from(maps.tc_to_pg[lossy_tc]),
        usize::from(maps.tc_to_queue[lossy_tc]),
    );
    let l = params::lossy(cfg, plan.src, pg, plan.dst, q, plan.lossy_len);
    common.insert(
        "lossy_queue_1".into(),
        json!({"dscp": plan.lossy_dscp, "ecn": 1, "pg": pg, "pkts_num_trig_egr_drp": l.trig_drp * l.occupancy,
               "pkts_num_margin": plan.margins.lossy, "packet_size": plan.lossy_len, "cell_size": cell}),
    );
    let mut wrr = Map::new();
    wrr.insert("ecn".into(), json!(1));
    for (dscp, n) in &plan.wrr_counts {
        let tc = usize::from(maps.dscp_to_tc[usize::from(*dscp)]);
        wrr.insert(format!("q{}_num_of_pkts", maps.tc_to_queue[tc]), json!(n));
    }
    wrr.insert("limit".into(), json!(plan.wrr_limit));
    wrr.insert("packet_size".into(), json!(plan.wrr_len));
    common.insert("wrr".into(), Value::Object(wrr));
    // WRRtest[wrr_chg] and DscpEcnSend as the computed mode runs them, so that a changed config
    // run against these numbers meets the same counts.
    let mut chg = Map::new();
    chg.insert("ecn".into(), json!(1));
    for &(_, q, lossless) in wrr_dscps(plan.qos_remap) {
        chg.insert(format!("q{q}_num_of_pkts"), json!(if lossless { 300 } else { 80 }));
    }
    chg.insert("limit".into(), json!(80));
    chg.insert("lossy_weight".into(), json!(8));
    chg.insert("lossless_weight".into(), json!(30));
    common.insert("wrr_chg".into(), Value::Object(chg));
    for i in 1..=4 {
        common.insert(format!("ecn_{i}"), procedures::ecn_written(d, plan, i));
    }
    let mut per_queue = [0u64; 8];
    for dscp in 0..64 {
        let tc = usize::from(maps.dscp_to_tc[dscp]);
        per_queue[usize::from(maps.tc_to_queue[tc]) & 7] += 1;
    }
    let mut mapping = Map::new();
    for (q, n) in per_queue.iter().enumerate() {
        mapping.insert(format!("q{q}_num_of_pkts"), json!(n));
    }
    common.insert("dscp_mapping".into(), Value::Object(mapping));
    Ok(yaml::Written {
        asic: asic.to_string(),
        speed_cable,
        by_speed,
        common,
    })
}
