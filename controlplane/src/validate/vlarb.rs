//! `vlarb` (in `[port_defaults]` and each `[[port]]`) for ports whose scheduler is "vlarb": the
//! two VL arbitration tables and LimitOfHighPriority, in OpenSM's units, and warnings for
//! queues that carry traffic but no table serves.

use super::ctx::Ctx;
use super::pfc::Losslessness;
use crate::model::*;
use crate::schema::*;

/// The tables and limit, each error naming where the field was given (`paths`: high, low,
/// high_limit).
pub(super) fn resolve_vlarb(cx: &mut Ctx, s: &VlArbSection, paths: [String; 3], port: &str) -> Option<VlArbConfig> {
    let errors = cx.errors.len();
    let high = table(cx, &format!("{}.high", paths[0]), s.high.as_deref().unwrap_or(&[]));
    let low = table(cx, &format!("{}.low", paths[1]), s.low.as_deref().unwrap_or(&[]));
    let high_limit = match s.high_limit {
        Some(l) => cx
            .int_in(&format!("{}.high_limit", paths[2]), l, 0, i64::from(VLARB_UNBOUNDED))
            .and_then(|l| u8::try_from(l).ok())
            .unwrap_or(0),
        None => 0,
    };
    if cx.errors.len() != errors {
        return None;
    }
    if high.iter().chain(&low).all(|e| e.weight == 0) {
        cx.error(format!(
            "{port}.vlarb: scheduler \"vlarb\" needs at least one `high` or `low` entry with a weight \
             above 0 (here or in [port_defaults.vlarb]), e.g. high = [[6, 255]], low = [[0, 64], [3, 64]]"
        ));
        return None;
    }
    Some(VlArbConfig { high, low, high_limit })
}

/// One table: `[[VL, weight], ...]`, at most 64 entries, VL 0…7 (the queues), weight 0…255.
fn table(cx: &mut Ctx, path: &str, entries: &[Vec<i64>]) -> Vec<VlArbEntry> {
    if entries.len() > VLARB_MAX_ENTRIES {
        cx.error(format!(
            "{path}: {} entries, at most {VLARB_MAX_ENTRIES}",
            entries.len()
        ));
    }
    entries
        .iter()
        .enumerate()
        .filter_map(|(j, e)| {
            let at = format!("{path}[{j}]");
            let &[vl, weight] = e.as_slice() else {
                cx.error(format!(
                    "{at}: an entry is [VL, weight], e.g. [1, 64]; found {} number{}",
                    e.len(),
                    if e.len() == 1 { "" } else { "s" }
                ));
                return None;
            };
            let vl = if (0..NUM_TC as i64).contains(&vl) {
                Some(vl as u8)
            } else {
                cx.error(format!("{at}: VL {vl} is out of range 0..=7 (VL n is egress queue n)"));
                None
            };
            let weight = if (0..=255).contains(&weight) {
                Some(weight as u8)
            } else {
                cx.error(format!(
                    "{at}: weight {weight} is out of range 0..=255 (units of 64 bytes; 0 skips the entry)"
                ));
                None
            };
            Some(VlArbEntry {
                vl: vl?,
                weight: weight?,
            })
        })
        .collect()
}

/// Queues that some traffic is classified into (bit mask): the images of the trusted map and
/// the default class, rule targets, the CNP queue; lossless queues always.
pub(super) fn fed_queues(c: &ClassifyConfig, loss: &Losslessness, cnp_queue: u8) -> u8 {
    let mut tcs = 1u8 << (c.default_tc & 7);
    match c.trust {
        Trust::Dscp => c.dscp_to_tc.iter().for_each(|t| tcs |= 1 << (t & 7)),
        Trust::Pcp => c.pcp_to_tc.iter().for_each(|t| tcs |= 1 << (t & 7)),
        Trust::None => {}
    }
    let mut queues = 1u8 << (cnp_queue & 7);
    for r in &c.rules {
        if let Some(t) = r.action.tc {
            tcs |= 1 << (t & 7);
        }
        if let Some(q) = r.action.queue {
            queues |= 1 << (q & 7);
        }
    }
    for tc in 0..NUM_TC {
        if tcs & (1 << tc) != 0 {
            queues |= 1 << (c.tc_to_queue[tc] & 7);
        }
        if loss.queue[tc] {
            queues |= 1 << tc;
        }
    }
    queues
}

/// Warns about queues traffic reaches that no entry serves, and a CNP queue outside the high
/// table.
pub(super) fn check_coverage(cx: &mut Ctx, path: &str, id: u16, v: &VlArbConfig, fed: u8, cnp_queue: u8) {
    let vls = |t: &[VlArbEntry]| t.iter().filter(|e| e.weight > 0).fold(0u8, |m, e| m | 1 << e.vl);
    let (high, low) = (vls(&v.high), vls(&v.low));
    let missing = fed & !(high | low);
    if missing != 0 {
        let list: Vec<String> = (0..NUM_TC)
            .filter(|q| missing & (1 << q) != 0)
            .map(|q| q.to_string())
            .collect();
        cx.warn(format!(
            "{path}.vlarb: queue {} of port {id} carries traffic but has no entry with a weight above 0: \
             it sends only when no VL of either table can (an IB port would never send it)",
            list.join(", ")
        ));
    }
    if high & (1 << cnp_queue) == 0 && fed & (1 << cnp_queue) != 0 {
        cx.warn(format!(
            "{path}.vlarb: the CNP queue ({cnp_queue}) is not in the high table of port {id}; \
             CNPs would wait behind data"
        ));
    }
}
