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
    let (pgs, headroom_specs) = resolve_pgs(&mut cx, "pg", &file.pg, &loss, &buffer);
    let (queues, mut used_ecn) = resolve_queues(&mut cx, "queue", &file.queue, &loss, &ecn, cnp_queue, &ports, &buffer);
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
                headroom_from: std::array::from_fn(|g| format!("pg.{g}.headroom")),
            });
            continue;
        }
        let warned = cx.warnings.len();
        let pg_map = overlay(&file.pg, &p.pg, PgSection::overlaid);
        let q_map = overlay(&file.queue, &p.queue, QueueSection::overlaid);
        let (ppgs, specs) = resolve_pgs(&mut cx, &format!("port[{i}].pg"), &pg_map, &loss, &buffer);
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
            headroom_from: std::array::from_fn(|g| {
                if own.contains(&g) {
                    format!("port[{i}].pg.{g}.headroom")
                } else {
                    format!("pg.{g}.headroom")
                }
            }),
        });
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
