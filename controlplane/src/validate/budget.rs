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
    pub(super) pfc_enabled: [bool; NUM_TC],
    /// Where each PG's headroom was written (`pg.3.headroom`, or `port[i].pg.3.headroom` for
    /// a port's own): the key a warning about it names.
    pub(super) headroom_from: [String; NUM_TC],
    /// The map set it classifies with (`PortConfig::map_set`).
    pub(super) map_set: Option<usize>,
}

pub(super) fn resolve_headroom(
    cx: &mut Ctx,
    ports: &[PortDraft],
    qos: Vec<PortQos>,
    cell_bytes: u32,
) -> Vec<PortConfig> {
    // Headroom written below what the formula gives, per key and value as written: every
    // port it is short on, with what that port needs.
    let mut low: BTreeMap<(String, String), Vec<(String, headroom::Headroom)>> = BTreeMap::new();
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
                    if bytes < calc.bytes {
                        let port = match &p.name {
                            Some(n) => format!("{n} (port {})", p.id),
                            None => format!("port {}", p.id),
                        };
                        low.entry((qos.headroom_from[g].clone(), specs[g].1.clone()))
                            .or_default()
                            .push((port, calc));
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
                tx_enabled: p.tx_enabled,
                pfc_enabled: qos.pfc_enabled,
                slice: p.slice,
                map_set: qos.map_set,
            }
        })
        .collect();
    for ((key, text), short) in low {
        // Ports that need the same are listed together: "port 0, port 1 (25KiB, …)".
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for (port, calc) in short {
            let need = format!(
                "{} ({} cells) for {} over {}",
                format_size(calc.bytes),
                calc.cells,
                format_rate(calc.speed_bps),
                units::format_length(calc.cable_m)
            );
            match groups.iter_mut().find(|g| g.0 == need) {
                Some(g) => g.1.push(port),
                None => groups.push((need, vec![port])),
            }
        }
        let list = groups
            .iter()
            .map(|(need, ports)| format!("{}: {need}", ports.join(", ")))
            .collect::<Vec<_>>()
            .join("; ");
        cx.warn(format!(
            "{key} ({text}) is below the headroom computed for {list}: lossless frames may be dropped"
        ));
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

/// Whether the headroom of PG `g` on `p` is drawn from its pool's shared headroom pool rather
/// than reserved for it alone.
pub fn headroom_is_pooled(buffer: &BufferConfig, p: &PortConfig, g: usize) -> bool {
    buffer
        .pools_of(PoolDir::Ingress)
        .nth(usize::from(p.pgs[g].pool))
        .is_some_and(|pool| pool.headroom_bytes > 0)
}

/// Bytes of buffer the configured pools need, with the reserves beside them: per direction the
/// pools' shared space plus what PGs (minimums, headroom not drawn from a shared headroom pool,
/// the shared headroom pools) or queues (minimums) reserve, in whole cells; the larger of the
/// two, since ingress and egress account the same cells.
pub(super) fn pools_need(buffer: &BufferConfig, ports: &[PortConfig]) -> u64 {
    let (ingress, egress) = pool_budget(buffer, ports);
    ingress.max(egress).saturating_mul(u64::from(buffer.cell_bytes))
}

/// (ingress, egress) cells the pools and reserves take.
fn pool_budget(buffer: &BufferConfig, ports: &[PortConfig]) -> (u64, u64) {
    let cell = u64::from(buffer.cell_bytes.max(1));
    let cells = |b: u64| b.div_ceil(cell);
    let add = |a: u64, b: u64| a.saturating_add(b);
    let mut ingress = buffer
        .pools_of(PoolDir::Ingress)
        .map(|p| add(cells(p.size_bytes), cells(p.headroom_bytes)))
        .fold(0, add);
    let mut egress = buffer
        .pools_of(PoolDir::Egress)
        .map(|p| cells(p.size_bytes))
        .fold(0, add);
    for p in ports {
        for g in 0..NUM_TC {
            ingress = add(ingress, cells(p.pgs[g].min_bytes));
            if !headroom_is_pooled(buffer, p, g) {
                ingress = add(ingress, cells(p.headroom_bytes[g]));
            }
            egress = add(egress, cells(p.queues[g].min_bytes));
        }
    }
    (ingress, egress)
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
    // The shared pool each PG (by its pool index) and queue draws from, in bytes.
    let (in_pools, out_pools): (Vec<u64>, Vec<u64>) = if c.buffer.pools.is_empty() {
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
        (vec![pool], vec![pool])
    } else {
        let (ingress, egress) = pool_budget(&c.buffer, &c.ports);
        for (need, what) in [(ingress, "ingress"), (egress, "egress")] {
            if need > total {
                cx.error(format!(
                    "buffer.size ({size} = {total} cells of {cell}B) is {} cells short: the {what} pools \
                     and what PGs and queues reserve beside them take {need} cells",
                    need - total
                ));
                return;
            }
        }
        let sizes = |dir| c.buffer.pools_of(dir).map(|p| p.size_bytes).collect();
        (sizes(PoolDir::Ingress), sizes(PoolDir::Egress))
    };
    let pool_of = |pools: &[u64], i: u8| pools.get(usize::from(i)).copied().unwrap_or(0);

    // UCloud: a lossless PG must hit XOFF before the egress queue it feeds hits its limit,
    // even when every other port sends into that queue at once. Checked per egress port with
    // each port's own profiles (per-port overrides) and headroom; egress ports with the same
    // figures share one warning.
    let pg_hold = |p: &PortConfig, g: usize| {
        let prof = &p.pgs[g];
        let pool = pool_of(&in_pools, prof.pool);
        let shared = worst_case(prof.shared, pool).unwrap_or(pool);
        [cells(shared), cells(prof.min_bytes), cells(p.headroom_bytes[g])]
    };
    for (g, _) in c.pgs.iter().enumerate().filter(|(_, p)| p.lossless) {
        for q in queue_set(c, g) {
            // (what the senders hold, in words; their total; the queue's limit) → egress ports.
            let mut over: BTreeMap<(String, u64, [u64; 2]), Vec<u16>> = BTreeMap::new();
            for (e, egress) in c.ports.iter().enumerate() {
                let queue = &egress.queues[q];
                let Some(q_shared) = worst_case(queue.shared, pool_of(&out_pools, queue.pool)) else {
                    continue;
                };
                let limit = [cells(q_shared), cells(queue.min_bytes)];
                // A lone port can only fill its own queue.
                let senders: Vec<(u16, [u64; 3])> = (c.ports.iter().enumerate())
                    .filter(|&(i, _)| i != e || nports == 1)
                    .map(|(_, p)| (p.id, pg_hold(p, g)))
                    .collect();
                let hold = sum(&mut senders.iter().map(|(_, h)| sum(&mut h.iter().copied())));
                // The senders' shared use together is bounded by the pools it is drawn from,
                // however generous each one's limit: dynamic limits shrink as the pool fills.
                let pools_of_senders: BTreeSet<u8> = c.ports.iter().map(|p| p.pgs[g].pool).collect();
                let pool_cells = sum(&mut pools_of_senders.iter().map(|&i| cells(pool_of(&in_pools, i))));
                let shared = sum(&mut senders.iter().map(|(_, h)| h[0]));
                let hold = hold - shared + shared.min(pool_cells);
                if hold <= limit[0].saturating_add(limit[1]) {
                    continue;
                }
                // Senders with the same figures are counted, not listed: the words stay one line
                // at 512 ports, and egress ports that see the same senders share a warning.
                let mut kinds: BTreeMap<[u64; 3], usize> = BTreeMap::new();
                for (_, h) in &senders {
                    *kinds.entry(*h).or_default() += 1;
                }
                let words: Vec<String> = (kinds.iter().rev())
                    .map(|([s, m, h], n)| {
                        let ports = if *n == 1 { "port" } else { "ports" };
                        format!("{n} ingress {ports} × (shared {s} + min {m} + headroom {h} cells)")
                    })
                    .collect();
                let words = words.join(" + ");
                over.entry((words, hold, limit)).or_default().push(egress.id);
            }
            for ((words, hold, [q_shared, q_min]), ids) in over {
                let on = if ids.len() == nports as usize {
                    String::new()
                } else {
                    // At most eight ids, then how many more: one line whatever the port count.
                    let mut shown: Vec<String> = ids.iter().take(8).map(u16::to_string).collect();
                    if ids.len() > 8 {
                        shown.push(format!("and {} more", ids.len() - 8));
                    }
                    let ports = if ids.len() == 1 { "port" } else { "ports" };
                    format!(" on {ports} {}", shown.join(", "))
                };
                cx.warn(format!(
                    "queue.{q}{on}: lossless PG {g} can hold {words} = {hold} cells, more than \
                     queue {q}'s limit (shared {q_shared} + min {q_min} = {limit} cells). The switch \
                     never drops an admitted lossless frame at egress (the PG's XOFF and headroom \
                     hold the senders back), so the queue grows past its limit, up to {hold} cells, \
                     taking the rest from the egress pool it shares: the lossy queues drawing on \
                     that pool find less room and drop sooner. To keep queue {q} within its limit, \
                     lower pg.{g}'s limit; to say what already happens, make queue.{q} unlimited",
                    limit = q_shared.saturating_add(q_min)
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
