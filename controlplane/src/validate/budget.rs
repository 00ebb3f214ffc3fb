//! What needs every section resolved: each port's headroom (computed or as written) and the
//! buffer budget: minimums and headroom must fit the buffer, and a lossless PG must reach XOFF
//! before the egress queue it feeds reaches its limit.

use super::ctx::Ctx;
use super::ports::PortDraft;
use super::profiles::HeadroomSpec;
use crate::headroom;
use crate::model::*;
use crate::schema::*;
use crate::units::{self, format_rate, format_size};
use std::collections::{BTreeMap, BTreeSet};

/// One port's resolved PG and queue profiles (the global ones unless it overrides them).
pub(super) struct PortQos {
    pub(super) pgs: [PgProfile; NUM_TC],
    pub(super) queues: [QueueProfile; NUM_TC],
    pub(super) headroom: [(HeadroomSpec, String); NUM_TC],
}

pub(super) fn resolve_headroom(
    cx: &mut Ctx,
    ports: &[PortDraft],
    qos: Vec<PortQos>,
    cell_bytes: u32,
) -> Vec<PortConfig> {
    let mut low: [Option<(u16, headroom::Headroom, String)>; NUM_TC] = std::array::from_fn(|_| None);
    let out = ports
        .iter()
        .zip(qos)
        .map(|(p, qos)| {
            let specs = &qos.headroom;
            // An emulated peer obeys a pause up to one catch-up step late (see
            // `headroom::EMULATED_STEP_BYTES`): its ports' computed headroom covers the step.
            let params = headroom::HeadroomParams {
                emulated_step_bytes: if p.peer == PeerKind::Emulated {
                    headroom::EMULATED_STEP_BYTES as f64
                } else {
                    0.0
                },
                ..Default::default()
            };
            let calc = headroom::headroom_with(&params, p.speed_bps, p.cable_m, p.mtu, cell_bytes);
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
                peer: p.peer,
                dpdk: p.dpdk.clone(),
                worker: p.worker.unwrap_or(usize::MAX),
                speed_bps: p.speed_bps,
                cable_m: p.cable_m,
                max_frame_bytes: p.max_frame(),
                headroom_bytes,
                pgs: qos.pgs,
                queues: qos.queues,
                scheduler: SchedulerConfig::default(),
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

pub(super) fn check_budget(cx: &mut Ctx, c: &Config, size_text: Option<&Scalar>) {
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
