//! Counter snapshots: what `summary.json` holds and what the control protocol answers, built on
//! demand from the owners' counters; nothing here runs on the packet path. The type is the
//! control plane's (`controlplane::snapshot`), so rocectl, the metrics and the watermarks read
//! the very fields built here; the building stays here because only the dataplane knows where
//! each figure lives.

use crate::counters::{DropReason, MALFORMED_SLOTS};
use crate::mmu::PortUse;
use crate::switch::Switch;
use crate::wire::Malformed;
use controlplane::NUM_TC;

pub use controlplane::snapshot::{
    Drops, PgReport, PoolBuffer, PoolHeadroom, PoolReport, PortBuffer, PortColumn, PortReport, QueueReport, Snapshot,
    Totals,
};

/// The dataplane's half of the shared snapshot type: building it from a `Switch`
/// (`Switch::snapshot`).
pub(crate) trait Build {
    fn build(sw: &Switch, now: u64) -> Self;
}

impl Build for Snapshot {
    fn build(sw: &Switch, now: u64) -> Self {
        let mut totals = Totals::default();
        let ports: Vec<PortReport> = (0..sw.num_ports())
            .map(|i| {
                let c = sw.port_counters(i);
                let mut drops = Drops::default();
                for r in DropReason::ALL {
                    drops.add(r.name(), c.drops[r as usize]);
                }
                for (idx, &n) in c.malformed.iter().enumerate().take(MALFORMED_SLOTS) {
                    if n > 0 {
                        drops.add(Malformed::from_index(idx).map_or("malformed", |m| m.name()), n);
                    }
                }
                let qc = sw.queue_counters(i);
                let queues = (0..NUM_TC)
                    .map(|q| {
                        let u = sw.queue_use(i, q);
                        QueueReport {
                            queue: q as u8,
                            tx_packets: qc[q].tx_packets,
                            tx_bytes: qc[q].tx_bytes,
                            dropped_packets: qc[q].dropped_packets,
                            dropped_bytes: qc[q].dropped_bytes,
                            ecn_marked: qc[q].ecn_marked,
                            edf_order_errors: qc[q].edf_order_errors,
                            edf_deadline_misses: qc[q].edf_deadline_misses,
                            depth_packets: sw.queue_len(i, q) as u64,
                            depth_cells: u.total(),
                            depth_bytes: u.bytes,
                            peak_cells: u.peak,
                            peak_bytes: u.peak_bytes,
                        }
                    })
                    .collect();
                let pc = sw.pg_counters(i);
                let pgs = (0..NUM_TC)
                    .map(|g| {
                        let u = sw.pg_use(i, g);
                        PgReport {
                            pg: g as u8,
                            rx_packets: pc[g].rx_packets,
                            rx_bytes: pc[g].rx_bytes,
                            dropped_packets: pc[g].dropped_packets,
                            xoff_sent: pc[g].xoff_sent,
                            xon_sent: pc[g].xon_sent,
                            min_cells: u.min,
                            shared_cells: u.shared,
                            headroom_cells: u.headroom,
                            peak_cells: u.peak,
                            peak_headroom_cells: u.peak_headroom,
                        }
                    })
                    .collect();
                totals.rx_packets += c.rx_packets;
                totals.rx_bytes += c.rx_bytes;
                totals.tx_packets += c.tx_packets;
                totals.tx_bytes += c.tx_bytes;
                totals.ecn_marked += c.ecn_marked;
                for (name, n) in drops.iter() {
                    totals.drops.add(name, n);
                }
                for p in 0..NUM_TC {
                    totals.pfc_tx[p] += c.pfc_tx[p];
                    totals.pfc_rx[p] += c.pfc_rx[p];
                }
                let (paused_now, storm_now) = sw.port_pause_state(i, now);
                PortReport {
                    id: sw.port_id(i),
                    name: sw.config().ports.get(i).and_then(|p| p.name.clone()),
                    rx_packets: c.rx_packets,
                    rx_bytes: c.rx_bytes,
                    tx_packets: c.tx_packets,
                    tx_bytes: c.tx_bytes,
                    drops,
                    ecn_marked: c.ecn_marked,
                    pfc_tx: c.pfc_tx,
                    pfc_rx: c.pfc_rx,
                    pause_rx: c.pause_rx,
                    pfc_tx_skipped: c.pfc_tx_skipped,
                    paused_ns: sw.port_paused_ns(i, now),
                    unknown_ethertype: c.unknown_ethertype,
                    learn_refused: c.learn_refused,
                    learn_unannounced: sw.ingress.fdb.unannounced(i),
                    learn_late: sw.ingress.fdb.late(i),
                    crossed_out: c.crossed_out,
                    watchdog_storms: c.watchdog_storms,
                    watchdog_restores: c.watchdog_restores,
                    paused_now,
                    storm_now,
                    buffer: port_buffer(&sw.port_use(i)),
                    queues,
                    pgs,
                    // Filled in by the real-time runtime, which owns the emulated peers.
                    peer: None,
                    // The switch does not know its ports' I/O: `rocesw run` adds it.
                    backend: None,
                    capture: None,
                }
            })
            .collect();
        Snapshot {
            ports,
            totals,
            buffer: sw.pool_use(),
            pools: pools(sw),
        }
    }
}

/// The config's named pools with their figures, in the config's order (none without
/// `[buffer.pool.NAME]`: `buffer` is then the one pool).
fn pools(sw: &Switch) -> Vec<PoolReport> {
    use controlplane::model::PoolDir;
    let mut index = [0usize; 2];
    sw.config()
        .buffer
        .pools
        .iter()
        .map(|p| {
            let side = usize::from(p.dir == PoolDir::Egress);
            let i = index[side];
            index[side] += 1;
            let ([size, used, peak], [h_size, h_used, h_peak]) = sw.pool_figures(p.dir, i);
            PoolReport {
                name: p.name.clone(),
                kind: match p.dir {
                    PoolDir::Ingress => "ingress",
                    PoolDir::Egress => "egress",
                }
                .to_string(),
                size_cells: size,
                used_cells: used,
                peak_used_cells: peak,
                headroom: (h_size > 0).then_some(PoolHeadroom {
                    size_cells: h_size,
                    used_cells: h_used,
                    peak_used_cells: h_peak,
                }),
            }
        })
        .collect()
}

fn port_buffer(u: &PortUse) -> PortBuffer {
    PortBuffer {
        ingress_cells: u.ingress_cells,
        peak_ingress_cells: u.peak_ingress_cells,
        egress_cells: u.egress_cells,
        peak_egress_cells: u.peak_egress_cells,
    }
}

/// Reports are read from the switch, never pushed by it: the switch does not know this module.
impl Switch {
    /// Counters and buffer state, for reports.
    pub fn snapshot(&self, now: u64) -> Snapshot {
        <Snapshot as Build>::build(self, now)
    }
}

fn list(v: &[u64; NUM_TC]) -> String {
    let parts: Vec<String> = v
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(p, n)| format!("p{p}:{n}"))
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(" ")
    }
}

/// A duration for people: milliseconds below a second (a replay's virtual time is often a
/// few), seconds from there on (a switch's uptime: `605.998 s`, not `605997.546 ms`).
pub fn human_duration(ns: u64) -> String {
    if ns < 1_000_000_000 {
        format!("{:.3} ms", ns as f64 / 1e6)
    } else {
        format!("{:.3} s", ns as f64 / 1e9)
    }
}

/// A short table for people; `summary.json` has everything.
/// `clock` names what `duration_ns` is ("virtual time" in replay, "uptime" in real time).
pub fn human_summary(s: &Snapshot, clock: &str, duration_ns: u64) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "{clock} {}", human_duration(duration_ns));
    let col = PortColumn::of(&s.ports);
    let _ = writeln!(
        out,
        "{} {:>10} {:>10} {:>8} {:>8} {:>14} {:>14}  drops",
        col.pad("port"),
        "rx_pkts",
        "tx_pkts",
        "ecn_ce",
        "paused",
        "pfc_tx",
        "pfc_rx"
    );
    for p in &s.ports {
        let paused: u64 = p.paused_ns.iter().sum();
        let drops: Vec<String> = p.drops.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(
            out,
            "{} {:>10} {:>10} {:>8} {:>7.1}us {:>14} {:>14}  {}",
            col.pad(&p.label()),
            p.rx_packets,
            p.tx_packets,
            p.ecn_marked,
            paused as f64 / 1e3,
            list(&p.pfc_tx),
            list(&p.pfc_rx),
            if drops.is_empty() {
                "-".to_string()
            } else {
                drops.join(" ")
            }
        );
    }
    let _ = writeln!(
        out,
        "total: rx {} tx {} ecn {} drops {} | buffer peak {} of {} cells",
        s.totals.rx_packets,
        s.totals.tx_packets,
        s.totals.ecn_marked,
        s.totals.drops.total(),
        s.buffer.peak_used_cells,
        s.buffer.total_cells
    );
    out
}

/// One switch's snapshot from its shards' (each covers every port, but only the ports it owns
/// hold figures): each port's report from its owner (`owners[i]`: the shard of port index i),
/// the totals over those, and the pool's occupancy summed over the shards. A peak of the pool
/// is the sum of the shards' peaks, which may have come at different moments: an upper bound.
pub fn merge_shards(mut parts: Vec<Snapshot>, owners: &[u8]) -> Snapshot {
    let n = parts.first().map_or(0, |p| p.ports.len());
    let last = parts.len().saturating_sub(1);
    let ports: Vec<PortReport> = (0..n)
        .map(|i| {
            let s = owners.get(i).copied().unwrap_or(0) as usize;
            std::mem::take(&mut parts[s.min(last)].ports[i])
        })
        .collect();
    let mut totals = Totals::default();
    for p in &ports {
        totals.rx_packets += p.rx_packets;
        totals.rx_bytes += p.rx_bytes;
        totals.tx_packets += p.tx_packets;
        totals.tx_bytes += p.tx_bytes;
        totals.ecn_marked += p.ecn_marked;
        for (name, k) in p.drops.iter() {
            totals.drops.add(name, k);
        }
        for prio in 0..NUM_TC {
            totals.pfc_tx[prio] += p.pfc_tx[prio];
            totals.pfc_rx[prio] += p.pfc_rx[prio];
        }
    }
    let mut buffer = parts.first().map(|p| p.buffer).unwrap_or_default();
    for p in parts.iter().skip(1) {
        let b = &p.buffer;
        buffer.used_cells += b.used_cells;
        buffer.peak_used_cells += b.peak_used_cells;
        buffer.ingress_shared_cells += b.ingress_shared_cells;
        buffer.peak_ingress_shared_cells += b.peak_ingress_shared_cells;
        buffer.egress_shared_cells += b.egress_shared_cells;
        buffer.peak_egress_shared_cells += b.peak_egress_shared_cells;
    }
    // Each named pool likewise: every shard reports every pool, in the config's order.
    let mut pools = parts.first().map(|p| p.pools.clone()).unwrap_or_default();
    for part in parts.iter().skip(1) {
        for (p, o) in pools.iter_mut().zip(&part.pools) {
            p.used_cells += o.used_cells;
            p.peak_used_cells += o.peak_used_cells;
            if let (Some(h), Some(oh)) = (&mut p.headroom, o.headroom) {
                h.used_cells += oh.used_cells;
                h.peak_used_cells += oh.peak_used_cells;
            }
        }
    }
    Snapshot {
        ports,
        totals,
        buffer,
        pools,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The control plane's list of drop reasons (what the metrics export at 0 before the first
    /// drop) is every reason this switch counts, in its order, each once.
    #[test]
    fn the_control_planes_reason_list_is_the_dataplanes() {
        let mut ours: Vec<&str> = DropReason::ALL.iter().map(|r| r.name()).collect();
        for m in Malformed::ALL {
            if !ours.contains(&m.name()) {
                ours.push(m.name());
            }
        }
        assert_eq!(ours, controlplane::snapshot::DROP_REASONS);
    }

    /// Shards' snapshots merge into one: each port (its name too) from its owner, each named
    /// pool's use summed over the shards as the whole buffer's is.
    #[test]
    fn shards_merge_names_and_pools() {
        let part = |used: u32, hr: u32| Snapshot {
            ports: vec![
                PortReport {
                    id: 0,
                    name: Some("Ethernet0".into()),
                    rx_packets: u64::from(used),
                    ..Default::default()
                },
                PortReport {
                    id: 4,
                    name: Some("Ethernet4".into()),
                    rx_packets: u64::from(used),
                    ..Default::default()
                },
            ],
            pools: vec![PoolReport {
                name: "ingress_lossless_pool".into(),
                kind: "ingress".into(),
                size_cells: 1000,
                used_cells: used,
                peak_used_cells: used + 1,
                headroom: Some(PoolHeadroom {
                    size_cells: 100,
                    used_cells: hr,
                    peak_used_cells: hr,
                }),
            }],
            ..Default::default()
        };
        let m = merge_shards(vec![part(10, 2), part(30, 5)], &[0, 1]);
        assert_eq!(m.ports[0].name.as_deref(), Some("Ethernet0"));
        assert_eq!((m.ports[0].rx_packets, m.ports[1].rx_packets), (10, 30));
        let p = &m.pools[0];
        assert_eq!((p.size_cells, p.used_cells, p.peak_used_cells), (1000, 40, 42));
        assert_eq!(p.headroom.map(|h| (h.size_cells, h.used_cells)), Some((100, 7)));
    }
}
