//! sonic-mgmt's NVIDIA parameters, computed from the config as its generator computes them.
//!
//! On NVIDIA switches the suite does not read counts from a yaml: `qos_params.mellanox.yaml`
//! holds only DSCPs, PGs, queues and packet sizes, and `tests/qos/files/mellanox/
//! qos_param_generator.py` (sonic-mgmt b4ba9de3c9bb) fills in every count from the DUT's
//! buffer profiles. This module does the same in Rust, from the config_db.json's own profiles
//! (or, for a PG buffermgrd makes from `pg_profile_lookup.ini`, the profile it makes), so that
//! `--params qos_params.mellanox.yaml` (or `--params nvidia`, the bundled copy) checks rocesw
//! against NVIDIA's own numbers. Rules, in cells of the ASIC (⌈bytes / cell⌉):
//!
//! - a dynamic profile's byte limit is `size + ⌊α/(1+α) × pool size⌋`, α = 2^dynamic_th
//!   (`qos_sai_base.py`'s `__computeBufferThreshold`);
//! - without a shared headroom pool: headroom = size, ingress_lossless_size = static_th −
//!   headroom; with one: headroom = xon + xoff, ingress_lossless_size = static_th − xon;
//!   hysteresis = headroom − (xon + xoff);
//! - pkts_num_trig_pfc = ingress_lossless_size + xon + hysteresis;
//! - pkts_num_trig_ingr_drp = ingress_lossless_size + headroom, less the ASIC's
//!   `headroom_overhead` without a shared headroom pool, plus another xoff with one;
//! - pkts_num_dismiss_pfc = ingress_lossless_size + 1 (xon_N: + 16 hysteresis);
//! - lossy_queue_1: the smaller of the egress and ingress lossy limits, in cells;
//! - margins: xoff 4, xon 3, wm_pg_headroom 3, wm_pg_shared_lossless 3 (4 on Spectrum-1),
//!   wm_q_shared_lossless 9; Spectrum-4 and later: lossy_queue_1's margin 2 % of its count,
//!   and `special_qos_config.yml`'s packet sizes.
//!
//! Not computed: the shared-headroom-pool test's per-port list (`pkts_num_trig_pfc_shp`,
//! rocesw's HdrmPoolSizeTest computes its own), Spectrum-4/5's two-level port-alpha limits
//! (port-level quotas rocesw does not model), the dual-ToR extra xoffs.

use anyhow::{anyhow, bail, Context, Result};
use controlplane::sonic::db::{expand_key, reference, ConfigDb, Fields};
use controlplane::sonic::Imported;
use serde_json::{json, Value};

/// sonic-mgmt's `tests/qos/files/qos_params.mellanox.yaml` at b4ba9de3c9bb, byte for byte
/// (configs/sonic/qos_params/SOURCES): what `--params nvidia` reads.
pub const MELLANOX_YAML: &str = include_str!("../../../configs/sonic/qos_params/qos_params.mellanox.yaml");

/// sonic-mgmt's `tests/qos/files/mellanox/special_qos_config.yml` at b4ba9de3c9bb: the
/// generator's per-ASIC overrides.
const SPECIAL_YAML: &str = include_str!("../../../configs/sonic/qos_params/special_qos_config.yml");

/// Whether a parameters text is NVIDIA's own (its ASIC key is `mellanox` and a topology holds
/// the generator's `profile` section): its counts are computed. A file `--write-params` wrote
/// for a Spectrum switch has the counts already, and is read as it is.
pub fn is_mellanox(text: &str) -> bool {
    serde_yaml_ng::from_str::<Value>(text)
        .ok()
        .and_then(|d| {
            let topos = d.get("qos_params")?.get("mellanox")?.as_object()?.clone();
            Some(topos.values().any(|t| t.get("profile").is_some()))
        })
        .unwrap_or(false)
}

/// The generator's ASIC name for a platform (`spectrum1` → `spc1`).
fn asic_type(platform: &str) -> Option<&'static str> {
    Some(match platform {
        "spectrum1" => "spc1",
        "spectrum2" => "spc2",
        "spectrum3" => "spc3",
        "spectrum4" => "spc4",
        _ => return None,
    })
}

/// A profile's fields: the file's BUFFER_PROFILE, or the one buffermgrd makes of a lookup row.
fn profile<'a>(db: &'a ConfigDb, imported: &'a Imported, name: &str) -> Result<&'a Fields> {
    db.entry("BUFFER_PROFILE", name)
        .or_else(|| imported.made_profiles.get(name))
        .ok_or_else(|| anyhow!("BUFFER_PROFILE|{name}: not in the file"))
}

fn num(f: &Fields, name: &str, field: &str) -> Result<f64> {
    f.get(field)
        .and_then(|v| v.trim().parse::<f64>().ok())
        .ok_or_else(|| anyhow!("BUFFER_PROFILE|{name}|{field}: missing or not a number"))
}

/// A profile's byte limit as the suite synthesises it: its static_th, or size + ⌊α/(1+α) ×
/// pool size⌋ for a dynamic_th.
fn static_th(db: &ConfigDb, f: &Fields, name: &str) -> Result<f64> {
    if f.contains_key("static_th") {
        return num(f, name, "static_th");
    }
    let th = num(f, name, "dynamic_th")?;
    let pool = reference(f.get("pool").map_or("", String::as_str), "BUFFER_POOL").map_err(|e| anyhow!(e))?;
    let size = db
        .entry("BUFFER_POOL", &pool)
        .and_then(|p| p.get("size"))
        .and_then(|s| s.trim().parse::<f64>().ok())
        .ok_or_else(|| anyhow!("BUFFER_POOL|{pool}|size: missing"))?;
    let scale = 2f64.powf(th);
    Ok(num(f, name, "size")? + (scale / (scale + 1.0) * size).floor())
}

/// The profile of `port`'s queue `q` (BUFFER_QUEUE).
fn queue_profile(db: &ConfigDb, port: &str, q: u8) -> Option<String> {
    db.table("BUFFER_QUEUE").find_map(|(key, f)| {
        let (ports, idx) = expand_key(key, 15).ok()?;
        (ports.iter().any(|p| p == port) && idx.contains(&q))
            .then(|| reference(f.get("profile")?, "BUFFER_PROFILE").ok())
            .flatten()
    })
}

/// The generator's counts for source port `src`, merged into NVIDIA's yaml `text` as the
/// generator merges them: returns a qos_params document with the `<speed>_<cable>` section.
pub fn generate(text: &str, json_text: &str, imported: &Imported, src: &str, speed_cable: &str) -> Result<Value> {
    let asic = asic_type(imported.platform.name)
        .ok_or_else(|| anyhow!("NVIDIA's generator has no parameters for {}", imported.platform.name))?;
    let cell = f64::from(imported.platform.cell_bytes);
    let overhead = f64::from(imported.platform.headroom_overhead_cells.unwrap_or(0));
    let db = ConfigDb::parse(json_text, |t: &str| t.starts_with("BUFFER_")).map_err(|e| anyhow!(e.to_string()))?;
    let pg_profile = |pg: u8| {
        imported
            .pg_profiles
            .iter()
            .find(|(p, g, _)| p == src && *g == pg)
            .map(|(_, _, n)| n.clone())
            .ok_or_else(|| anyhow!("{src}'s PG {pg} has no buffer profile"))
    };
    let lossless_name = pg_profile(3)?;
    let lossless = profile(&db, imported, &lossless_name)?;
    let cells = |bytes: f64| (bytes / cell).ceil() as i64;
    let xon = cells(num(lossless, &lossless_name, "xon")?);
    let xoff = cells(num(lossless, &lossless_name, "xoff")?);
    let size = cells(num(lossless, &lossless_name, "size")?);
    let lossless_th = cells(static_th(&db, lossless, &lossless_name)?);
    let pool = reference(lossless.get("pool").map_or("", String::as_str), "BUFFER_POOL").map_err(|e| anyhow!(e))?;
    let shp = db
        .entry("BUFFER_POOL", &pool)
        .and_then(|p| p.get("xoff"))
        .and_then(|x| x.trim().parse::<u64>().ok())
        .filter(|&x| x > 0);
    let (headroom, ingress_lossless_size) = match shp {
        Some(_) => (xon + xoff, lossless_th - xon),
        None => (size, lossless_th - size),
    };
    let hysteresis = headroom - (xon + xoff);
    let trig_pfc = ingress_lossless_size + xon + hysteresis;
    let trig_ingr_drp = ingress_lossless_size
        + headroom
        + match shp {
            Some(_) => xoff,
            None => -(overhead as i64),
        };
    let dismiss = ingress_lossless_size + 1;
    let lossy_in_name = pg_profile(0)?;
    let lossy_in = cells(static_th(&db, profile(&db, imported, &lossy_in_name)?, &lossy_in_name)?);
    let lossy_out_name =
        queue_profile(&db, src, 0).ok_or_else(|| anyhow!("{src}'s queue 0 has no BUFFER_QUEUE profile"))?;
    let lossy_out = cells(static_th(
        &db,
        profile(&db, imported, &lossy_out_name)?,
        &lossy_out_name,
    )?);
    let trig_egr_drp = lossy_out.min(lossy_in) + 1;

    let doc: Value = serde_yaml_ng::from_str(text).context("NVIDIA's parameters: not YAML")?;
    let topos = doc
        .get("qos_params")
        .and_then(|q| q.get("mellanox"))
        .and_then(Value::as_object)
        .ok_or_else(|| anyhow!("no qos_params.mellanox"))?;
    let (topo_name, topo) = topos
        .get_key_value("topo-any")
        .or_else(|| topos.iter().next())
        .ok_or_else(|| anyhow!("qos_params.mellanox has no topology"))?;
    let mut topo = topo.clone();
    let Some(prof) = topo.get("profile").cloned() else {
        bail!("qos_params.mellanox.{topo_name}: no `profile` section");
    };
    topo[speed_cable] = prof;
    let cell_size = imported.platform.cell_bytes;
    let merge = |v: &mut Value, add: Value| {
        if let (Some(o), Some(a)) = (v.as_object_mut(), add.as_object()) {
            for (k, x) in a {
                o.insert(k.clone(), x.clone());
            }
        }
    };
    let sc = speed_cable.to_string();
    for i in 1..=4 {
        if let Some(s) = topo.get_mut(&sc).and_then(|s| s.get_mut(format!("xoff_{i}"))) {
            merge(
                s,
                json!({"pkts_num_trig_pfc": trig_pfc, "pkts_num_trig_ingr_drp": trig_ingr_drp,
                       "pkts_num_margin": 4, "cell_size": cell_size}),
            );
        }
        if let Some(s) = topo.get_mut(format!("xon_{i}")) {
            merge(
                s,
                json!({"pkts_num_trig_pfc": trig_pfc, "pkts_num_dismiss_pfc": dismiss,
                       "pkts_num_hysteresis": hysteresis + 16, "pkts_num_margin": 3, "cell_size": cell_size}),
            );
        }
    }
    // The generator: `for i in range(4): qos_params_mlnx['ecn_{}'.format(i+1)]['cell_size']`.
    for i in 1..=4 {
        if let Some(s) = topo.get_mut(format!("ecn_{i}")) {
            merge(s, json!({ "cell_size": cell_size }));
        }
    }
    if let Some(s) = topo.get_mut(&sc).and_then(|s| s.get_mut("wm_pg_headroom")) {
        merge(
            s,
            json!({"pkts_num_trig_pfc": trig_pfc, "pkts_num_trig_ingr_drp": trig_ingr_drp,
                   "pkts_num_margin": 3, "cell_size": cell_size}),
        );
    }
    if let Some(s) = topo.get_mut(&sc).and_then(|s| s.get_mut("wm_q_shared_lossless")) {
        merge(
            s,
            json!({"pkts_num_trig_ingr_drp": trig_ingr_drp, "pkts_num_margin": 9, "cell_size": cell_size}),
        );
    }
    if shp.is_none() {
        if let Some(o) = topo.get_mut(&sc).and_then(Value::as_object_mut) {
            o.remove("hdrm_pool_size");
        }
    }
    if let Some(s) = topo.get_mut("wm_pg_shared_lossless") {
        let m = if asic == "spc1" { 4 } else { 3 };
        merge(
            s,
            json!({"pkts_num_trig_pfc": dismiss, "pkts_num_margin": m, "cell_size": cell_size}),
        );
    }
    if let Some(s) = topo.get_mut("lossy_queue_1") {
        merge(
            s,
            json!({"pkts_num_trig_egr_drp": trig_egr_drp - 1, "cell_size": cell_size}),
        );
    }
    for (set, m) in [("wm_pg_shared_lossy", 4), ("wm_q_shared_lossy", 8)] {
        if let Some(s) = topo.get_mut(set) {
            merge(
                s,
                json!({"pkts_num_trig_egr_drp": trig_egr_drp, "pkts_num_margin": m, "cell_size": cell_size}),
            );
        }
    }
    if let Some(s) = topo.get_mut("wm_buf_pool_lossless") {
        merge(
            s,
            json!({"pkts_num_trig_pfc": trig_pfc, "pkts_num_trig_ingr_drp": trig_ingr_drp, "cell_size": cell_size}),
        );
    }
    // special_qos_config.yml: the ASIC's own values over the sets (its `profile` block over
    // the <speed>_<cable> section).
    let special: Value = serde_yaml_ng::from_str(SPECIAL_YAML).context("special_qos_config.yml")?;
    if let Some(over) = special
        .get("qos_params")
        .and_then(|q| q.get(asic))
        .and_then(Value::as_object)
    {
        for (key, sets) in over {
            let target = if key == "profile" { sc.as_str() } else { key.as_str() };
            let Some(t) = topo.get_mut(target) else { continue };
            deep_merge(t, sets);
        }
    }
    if asic_number(asic) >= 4 {
        if let Some(s) = topo.get_mut("lossy_queue_1") {
            let e = s.get("pkts_num_trig_egr_drp").and_then(Value::as_i64).unwrap_or(0);
            s["pkts_num_margin"] = json!((e as f64 * 0.02) as i64);
        }
    }
    Ok(json!({ "qos_params": { "mellanox": { topo_name.clone(): topo } } }))
}

fn asic_number(asic: &str) -> u32 {
    asic.trim_start_matches("spc").parse().unwrap_or(0)
}

/// `over`'s values into `into`, mapping by mapping (the generator's `update_dict_value`:
/// only keys `into` has sets are descended into).
fn deep_merge(into: &mut Value, over: &Value) {
    let (Some(i), Some(o)) = (into.as_object_mut(), over.as_object()) else {
        return;
    };
    for (k, v) in o {
        match (i.get_mut(k), v.is_object()) {
            (Some(t), true) => deep_merge(t, v),
            (None, true) => {}
            (_, false) => {
                i.insert(k.clone(), v.clone());
            }
        }
    }
}
