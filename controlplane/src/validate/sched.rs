//! `scheduler` (in `[port_defaults]` and each `[[port]]`): which kind of scheduler each port
//! runs, and that kind's own settings (`vlarb` in [`super::vlarb`], `edf` in [`super::edf`]).
//! A port's keys override the defaults': `vlarb` field by field (a port's `low` replaces the
//! default `low` and keeps the default `high`), `[port.edf]` key by key over
//! `[port_defaults.edf]`.

use super::ctx::Ctx;
use super::edf::resolve_edf;
use super::pfc::Losslessness;
use super::profiles::overlay;
use super::vlarb::{check_coverage, fed_queues, resolve_vlarb};
use crate::model::*;
use crate::schema::*;
use std::collections::BTreeMap;

/// The kinds `scheduler = "..."` accepts.
const KINDS: &[(&str, Kind)] = &[("sp_wdrr", Kind::SpWdrr), ("vlarb", Kind::VlArb), ("edf", Kind::Edf)];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    SpWdrr,
    VlArb,
    Edf,
}

/// Each port's scheduler, in `file.ports` order.
pub(super) fn resolve_schedulers(
    cx: &mut Ctx,
    file: &ConfigFile,
    classify: &ClassifyConfig,
    loss: &Losslessness,
    cnp_queue: u8,
) -> Vec<SchedulerConfig> {
    let d = &file.port_defaults;
    let default = d
        .scheduler
        .as_deref()
        .and_then(|w| cx.word("port_defaults.scheduler", w, KINDS));
    let kinds: Vec<Kind> = file
        .ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let kind = match p.scheduler.as_deref() {
                Some(w) => cx.word(&format!("port[{i}].scheduler"), w, KINDS),
                None => default,
            };
            kind.unwrap_or(Kind::SpWdrr)
        })
        .collect();
    if d.vlarb.is_some() && !kinds.contains(&Kind::VlArb) {
        cx.warn("port_defaults.vlarb: ignored, no port's scheduler is \"vlarb\"".to_string());
    }
    if d.edf.is_some() && !kinds.contains(&Kind::Edf) {
        cx.warn("port_defaults.edf: ignored, no port's scheduler is \"edf\"".to_string());
    }
    let no_edf = EdfSection::default();
    let edf_defaults = d.edf.as_ref().unwrap_or(&no_edf);
    // Queues some traffic can reach: those a VL arbiter must serve.
    let served = fed_queues(classify, loss, cnp_queue);
    // The default tables are checked once (errors name `port_defaults.vlarb`), each port's own
    // fields where it gives them.
    let defaults = d.vlarb.clone().unwrap_or_default();
    let mut unused_sched: BTreeMap<String, Vec<u16>> = BTreeMap::new();
    let errors = cx.errors.len();
    let mut out = Vec::with_capacity(kinds.len());
    for (i, (p, kind)) in file.ports.iter().zip(kinds).enumerate() {
        let path = format!("port[{i}]");
        let id = u16::try_from(p.id).unwrap_or(0);
        match kind {
            Kind::SpWdrr => {
                ignored(cx, &path, id, "vlarb", p.vlarb.is_some(), "sp_wdrr");
                ignored(cx, &path, id, "edf", p.edf.is_some(), "sp_wdrr");
                out.push(SchedulerConfig::SpWdrr);
            }
            Kind::Edf => {
                ignored(cx, &path, id, "vlarb", p.vlarb.is_some(), "edf");
                let edf = resolve_edf(cx, i, p.edf.as_ref(), edf_defaults);
                out.push(SchedulerConfig::Edf(Box::new(edf)));
            }
            Kind::VlArb => {
                ignored(cx, &path, id, "edf", p.edf.is_some(), "vlarb");
                let own = p.vlarb.clone().unwrap_or_default();
                let merged = defaults.overlaid(&own);
                let at = |own_field: bool| {
                    if own_field {
                        format!("{path}.vlarb")
                    } else {
                        "port_defaults.vlarb".to_string()
                    }
                };
                let v = resolve_vlarb(
                    cx,
                    &merged,
                    [
                        at(own.high.is_some()),
                        at(own.low.is_some()),
                        at(own.high_limit.is_some()),
                    ],
                    &path,
                );
                if let Some(v) = &v {
                    check_coverage(cx, &path, id, v, served, cnp_queue);
                }
                // A queue's strict/WDRR settings mean nothing to the arbiter: say so once per
                // set of queues, naming the ports.
                let queues = overlay(&file.queue, &p.queue, QueueSection::overlaid);
                let mut set: Vec<String> = queues
                    .iter()
                    .filter(|(_, s)| s.sched.is_some() || s.weight.is_some())
                    .map(|(k, _)| k.trim().to_string())
                    .collect();
                set.sort();
                set.dedup();
                if !set.is_empty() {
                    unused_sched.entry(set.join(", ")).or_default().push(id);
                }
                out.push(SchedulerConfig::VlArb(v.unwrap_or_default()));
            }
        }
    }
    // Every vlarb (or edf) port re-reads the default tables: report each of their problems once.
    let mut seen = std::collections::BTreeSet::new();
    let fresh: Vec<String> = cx.errors.drain(errors..).filter(|e| seen.insert(e.clone())).collect();
    cx.errors.extend(fresh);
    for (queues, ports) in unused_sched {
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        cx.warn(format!(
            "queue.{{{queues}}}.sched/weight: not used on port {} (scheduler \"vlarb\": the VL \
             arbitration tables decide; strict priority is the high table, weights are entry weights)",
            ports.join(", ")
        ));
    }
    out
}

/// Warns that a port's `section` (given when `given`) does nothing under its scheduler `kind`.
fn ignored(cx: &mut Ctx, path: &str, id: u16, section: &str, given: bool, kind: &str) {
    if given {
        cx.warn(format!(
            "{path}.{section}: ignored, port {id}'s scheduler is \"{kind}\""
        ));
    }
}
