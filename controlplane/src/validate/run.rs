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
    let dpdk = resolve_dpdk(cx, s.dpdk.as_ref().unwrap_or(&DpdkRunSection::default()), ports);
    // One device per port, by its driver-normalised name (eth_null0 is net_null0), and
    // nothing a device takes for itself (a host interface, a vhost-user socket, a capture it
    // writes) shared with another port, whether that port is a DPDK device or an interface.
    let mut devices: BTreeMap<String, usize> = BTreeMap::new();
    let mut claims: BTreeMap<dpdk::Claim, (usize, &'static str)> = BTreeMap::new();
    let mut interfaces: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, p) in ports.iter().enumerate() {
        if let Some(ifname) = p.interface.as_deref() {
            if let Some(j) = interfaces.insert(ifname, i) {
                cx.error(format!("port[{i}].interface: {ifname:?} is already used by port[{j}]"));
            }
            claims
                .entry(dpdk::Claim::Interface(ifname.to_string()))
                .or_insert((i, "interface"));
        }
    }
    for (i, p) in ports.iter().enumerate() {
        let Some(spec) = p.dpdk.as_deref().and_then(|d| dpdk::DeviceSpec::parse(d).ok()) else {
            continue;
        };
        let name = spec.canonical_name();
        if let Some(j) = devices.insert(name.clone(), i) {
            let as_given = if name == spec.name() {
                String::new()
            } else {
                format!(" ({} is {name})", spec.name())
            };
            cx.error(format!(
                "port[{i}].dpdk: device {}{as_given} is already used by port[{j}]",
                spec.name()
            ));
        }
        for claim in spec.claims() {
            match claims.get(&claim) {
                Some(&(j, what)) if j != i => cx.error(format!(
                    "port[{i}].dpdk: {claim} is already used by port[{j}] (its {what}): two ports \
                     cannot share it"
                )),
                _ => {
                    claims.insert(claim, (i, "dpdk device"));
                }
            }
        }
    }
    let mut outputs: BTreeMap<&std::path::Path, usize> = BTreeMap::new();
    for (i, p) in ports.iter().enumerate() {
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
        dpdk,
    }
}

/// `[run.dpdk]`: memory, hugepages (on by default only with a PCI port, which needs them),
/// pool size, extra EAL arguments.
fn resolve_dpdk(cx: &mut Ctx, s: &DpdkRunSection, ports: &[PortConfig]) -> DpdkRunConfig {
    let memory_mb = match &s.memory {
        None => DEFAULT_DPDK_MEMORY_MB,
        Some(v) => match cx.size("run.dpdk.memory", v) {
            Some(b) if (64 << 20..=1 << 40).contains(&b) => (b >> 20) as u32,
            Some(_) => {
                cx.error(format!("run.dpdk.memory ({v}) must be from 64MiB to 1TiB"));
                DEFAULT_DPDK_MEMORY_MB
            }
            None => DEFAULT_DPDK_MEMORY_MB,
        },
    };
    let pci: Vec<&str> = ports
        .iter()
        .filter_map(|p| p.dpdk.as_deref())
        .filter(|d| dpdk::DeviceSpec::parse(d).is_ok_and(|s| s.is_pci()))
        .collect();
    let hugepages = s.hugepages.unwrap_or(!pci.is_empty());
    if !hugepages && !pci.is_empty() {
        cx.error(format!(
            "run.dpdk.hugepages is false, but PCI port {} needs hugepages for its DMA memory: \
             set hugepages = true (and reserve them: \
             /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages)",
            pci.join(", ")
        ));
    }
    let mbufs = s
        .mbufs
        .and_then(|n| cx.int_in("run.dpdk.mbufs", n, 1023, 1 << 24))
        .map_or(DEFAULT_DPDK_MBUFS, |n| n as u32);
    for (i, a) in s.eal_args.iter().enumerate() {
        if a.is_empty() || a.contains('\0') {
            cx.error(format!("run.dpdk.eal_args[{i}]: {a:?} is not an argument"));
        }
    }
    DpdkRunConfig {
        eal_args: s.eal_args.clone(),
        memory_mb,
        hugepages,
        mbufs,
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
