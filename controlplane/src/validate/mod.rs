//! Schema → model: convert every unit, fill every default, check every rule, and collect *all*
//! problems rather than stopping at the first, so one run of `rocectl check` shows everything
//! wrong with a file. Errors and warnings are plain strings that start with (or name) the
//! field path, e.g. `ecn.roce.kmin (400KiB) is above kmax (200KiB)`.
//!
//! The defaults are constants (`defaults.rs`, re-exported here) so `configs/README.md` and the
//! code can be compared.
//!
//! One file per section of the schema, in the order `resolve` visits them; each takes the
//! collector (`ctx`) and what earlier sections resolved, and none reaches back into this file,
//! so the module graph has no cycles.

mod budget;
mod classify;
mod ctx;
mod defaults;
mod ecn;
mod edf;
mod fdb;
mod pfc;
mod ports;
mod profiles;
mod run;
mod sched;
mod vlarb;

pub use defaults::*;
pub use fdb::parse_mac;

use crate::model::*;
use crate::schema::*;
use crate::{ConfigError, ConfigErrorKind, Loaded};
use budget::{check_budget, resolve_headroom, PortQos};
use classify::resolve_classify;
use ctx::Ctx;
use ecn::resolve_ecn;
use fdb::resolve_fdb;
use pfc::{check_lossless_shapers, check_pause_time, resolve_pfc, Losslessness};
use ports::{resolve_buffer, resolve_ports};
use profiles::{overlay, resolve_cnp, resolve_cnp_queue, resolve_pgs, resolve_queues};
use run::{assign_workers, resolve_run};
use sched::resolve_schedulers;

/// `[[port]] pfc`: the port's PFC priorities, a subset of `[pfc] priorities` (a port can turn
/// PFC off, as SONiC's per-port `pfc_enable` does; a priority lossless on one port only would
/// need its own maps). Not given: the switch's.
fn resolve_port_pfc(cx: &mut Ctx, i: usize, given: Option<&[i64]>, pfc: &PfcConfig) -> [bool; NUM_TC] {
    let Some(list) = given else {
        return pfc.enabled;
    };
    let mut enabled = [false; NUM_TC];
    for (j, p) in list.iter().enumerate() {
        let path = format!("port[{i}].pfc[{j}]");
        if let Some(p) = cx.idx(&path, *p, 7, "priority") {
            if !pfc.enabled[usize::from(p)] {
                cx.error(format!(
                    "{path}: priority {p} is not one of pfc.priorities; a port's pfc can only \
                     leave out priorities the switch has (add it to pfc.priorities)"
                ));
                continue;
            }
            enabled[usize::from(p)] = true;
        }
    }
    enabled
}

/// Resolves a parsed file into the model, or every reason it cannot be.
pub fn resolve(file: &ConfigFile) -> Result<Loaded, ConfigError> {
    // Before any per-port work: a file of thousands of ports is refused at once, not after
    // every port's checks.
    if file.ports.len() > defaults::MAX_PORTS {
        return Err(ConfigError::new(
            ConfigErrorKind::Invalid,
            vec![format!(
                "port: {} ports configured, at most {} are supported",
                file.ports.len(),
                defaults::MAX_PORTS
            )],
        ));
    }
    let mut cx = Ctx::default();

    let e0 = cx.errors.len();
    let buffer = resolve_buffer(&mut cx, &file.buffer);
    let ports = resolve_ports(&mut cx, file);
    for (i, p) in ports.iter().enumerate() {
        if p.slice >= buffer.slices {
            cx.error(format!(
                "port[{i}].slice: {} is not a slice of the buffer ([buffer] slices = {}: 0..={})",
                p.slice,
                buffer.slices,
                buffer.slices - 1
            ));
        }
    }
    let sizes_ok_1 = cx.errors.len() == e0;

    let classify = resolve_classify(&mut cx, &file.classify, &ports);
    let pfc = resolve_pfc(&mut cx, &file.pfc);
    let loss = Losslessness::check(&mut cx, &classify, &pfc);
    let ecn = resolve_ecn(&mut cx, &file.ecn);
    let cnp_queue = resolve_cnp_queue(&mut cx, &file.cnp);

    let e1 = cx.errors.len();
    let (pgs, headroom_specs) = resolve_pgs(&mut cx, "pg", &file.pg, &loss, &buffer);
    let (queues, mut used_ecn) = resolve_queues(&mut cx, "queue", &file.queue, &loss, &ecn, cnp_queue, &ports, &buffer);
    // Per-port overrides, resolved like the global tables (errors name `port[i].…`). Only on a
    // valid global base: otherwise every port would repeat the global errors.
    let mut per_port: Vec<PortQos> = Vec::with_capacity(ports.len());
    let global_ok = cx.errors.len() == e1;
    let mut sets_used = vec![false; classify.sets.len()];
    for (i, p) in file.ports.iter().enumerate().take(ports.len()) {
        let port_pfc = resolve_port_pfc(&mut cx, i, p.pfc.as_deref(), &pfc);
        let map_set = p.classify.as_deref().and_then(|name| {
            let found = classify.sets.iter().position(|s| s.name == name);
            if found.is_none() {
                let names: Vec<String> = classify.sets.iter().map(|s| format!("{:?}", s.name)).collect();
                cx.error(format!(
                    "port[{i}].classify: {name:?} is not a map set ([classify.map.NAME]; {})",
                    if names.is_empty() {
                        "there are none".to_string()
                    } else {
                        format!("there are {}", names.join(", "))
                    }
                ));
            }
            found
        });
        if let Some(k) = map_set {
            sets_used[k] = true;
        }
        let tc_to_pg = *classify.maps(map_set).tc_to_pg;
        if !global_ok
            || (p.pg.is_empty() && p.queue.is_empty() && port_pfc == pfc.enabled && tc_to_pg == classify.tc_to_pg)
        {
            per_port.push(PortQos {
                pgs: pgs.clone(),
                queues: queues.clone(),
                headroom: headroom_specs.clone(),
                pfc_enabled: port_pfc,
                headroom_from: std::array::from_fn(|g| format!("pg.{g}.headroom")),
                map_set,
            });
            continue;
        }
        let warned = cx.warnings.len();
        // The port's own PFC priorities decide which of its PGs are lossless; its queues keep
        // the switch's (what other ports' lossless frames wait in).
        let port_loss = Losslessness {
            pg: std::array::from_fn(|g| (0..NUM_TC).any(|t| port_pfc[t] && usize::from(tc_to_pg[t]) == g)),
            queue: loss.queue,
        };
        let mut pg_map = overlay(&file.pg, &p.pg, PgSection::overlaid);
        // A PG lossless on the switch but lossy on this port: the global table's lossless-only
        // settings (headroom, xon, xon_offset) do not apply to it; the port's own would.
        for (k, s) in pg_map.iter_mut() {
            let Some(g) = k.trim().parse::<usize>().ok().filter(|&g| g < NUM_TC) else {
                continue;
            };
            if loss.pg[g] && !port_loss.pg[g] {
                let own = p.pg.iter().find(|(ok, _)| ok.trim().parse::<usize>().ok() == Some(g));
                let own = own.map(|(_, o)| o);
                if own.is_none_or(|o| o.headroom.is_none()) {
                    s.headroom = None;
                }
                if own.is_none_or(|o| o.xon.is_none()) {
                    s.xon = None;
                }
                if own.is_none_or(|o| o.xon_offset.is_none()) {
                    s.xon_offset = None;
                }
            }
        }
        let q_map = overlay(&file.queue, &p.queue, QueueSection::overlaid);
        let (ppgs, specs) = resolve_pgs(&mut cx, &format!("port[{i}].pg"), &pg_map, &port_loss, &buffer);
        let (pqueues, used) = resolve_queues(
            &mut cx,
            &format!("port[{i}].queue"),
            &q_map,
            &loss,
            &ecn,
            cnp_queue,
            &ports,
            &buffer,
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
        // A port's own `headroom` for a PG is its key; else the global table's.
        let own: Vec<usize> =
            p.pg.iter()
                .filter(|(_, s)| s.headroom.is_some())
                .filter_map(|(k, _)| k.trim().parse().ok())
                .collect();
        per_port.push(PortQos {
            pgs: ppgs,
            queues: pqueues,
            headroom: specs,
            pfc_enabled: port_pfc,
            headroom_from: std::array::from_fn(|g| {
                if own.contains(&g) {
                    format!("port[{i}].pg.{g}.headroom")
                } else {
                    format!("pg.{g}.headroom")
                }
            }),
            map_set,
        });
    }
    for (set, used) in classify.sets.iter().zip(&sets_used) {
        if !used {
            cx.warn(format!(
                "classify.map.{}: no port classifies with it ([[port]] classify)",
                toml_edit::Key::new(set.name.as_str()).display_repr()
            ));
        }
    }
    for name in ecn.keys() {
        if !used_ecn.contains(name.as_str()) {
            cx.warn(format!("ecn.{name}: not used by any queue"));
        }
    }
    let sizes_ok_2 = cx.errors.len() == e1;

    let cnp = resolve_cnp(&mut cx, &file.cnp, cnp_queue, &queues, &loss, &ports);
    let fdb = resolve_fdb(&mut cx, &file.fdb, &ports);
    let mut ports = resolve_headroom(&mut cx, &ports, per_port, buffer.cell_bytes);
    for (p, s) in ports
        .iter_mut()
        .zip(resolve_schedulers(&mut cx, file, &classify, &loss, cnp_queue))
    {
        p.scheduler = s;
    }

    let run = resolve_run(&mut cx, &file.run, &ports);
    let ports = assign_workers(ports, run.workers);
    let mut buffer = buffer;
    if file.buffer.size.is_none() && !buffer.pools.is_empty() {
        // A switch's buffer is what its pools and reserves take (SONiC configures the pools,
        // not the buffer): the larger of the two directions.
        buffer.total_bytes = budget::pools_need(&buffer, &ports).max(buffer.cell_bytes as u64 * MIN_BUFFER_CELLS);
    }
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
    if sizes_ok_1 {
        let size = file.buffer.size.as_ref();
        let size = size.map_or_else(
            || crate::units::format_size(config.buffer.total_bytes),
            ToString::to_string,
        );
        if let Some(why) = crate::memory::refusal(&config, &size) {
            cx.error(why);
        }
    }
    check_pause_time(&mut cx, &config);
    if sizes_ok_2 {
        check_lossless_shapers(&mut cx, &config, &loss);
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
