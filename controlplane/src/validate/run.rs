//! `[run]`: workers, cores, idle sleep, drain timeout; and the checks that need every port
//! resolved first (interfaces and capture outputs used once, workers in range).

use super::ctx::Ctx;
use super::defaults::*;
use crate::model::*;
use crate::schema::*;
use crate::units;
use std::collections::BTreeMap;

pub(super) fn resolve_run(cx: &mut Ctx, s: &RunSection, ports: &[PortConfig]) -> RunConfig {
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
pub(super) fn assign_workers(mut ports: Vec<PortConfig>, workers: usize) -> Vec<PortConfig> {
    let mut next = 0;
    for p in &mut ports {
        if p.worker == usize::MAX {
            p.worker = next % workers.max(1);
            next += 1;
        }
    }
    ports
}
