//! `[fdb]`: learning, aging, capacity, the limits on learning per port, and the static MAC
//! entries.

use super::ctx::Ctx;
use super::defaults::*;
use super::ports::PortDraft;
use crate::model::*;
use crate::schema::*;
use std::collections::BTreeMap;

pub(super) fn resolve_fdb(cx: &mut Ctx, s: &FdbSection, ports: &[PortDraft]) -> FdbConfig {
    let learning = s.learning.unwrap_or(DEFAULT_FDB_LEARNING);
    let aging_ns = match &s.aging {
        None => DEFAULT_FDB_AGING_NS,
        Some(v) => match cx.duration("fdb.aging", v) {
            Some(0) => {
                cx.error(format!("fdb.aging ({v}) must be above 0"));
                DEFAULT_FDB_AGING_NS
            }
            other => other.unwrap_or(DEFAULT_FDB_AGING_NS),
        },
    };
    let capacity = s
        .capacity
        .and_then(|c| cx.int_in("fdb.capacity", c, 1, MAX_FDB_CAPACITY))
        .and_then(|c| usize::try_from(c).ok())
        .unwrap_or(DEFAULT_FDB_CAPACITY);
    // An equal share by default: whatever one port learns, the others keep room.
    let share = (capacity / ports.len().max(1)).max(1);
    let port_limit = s
        .port_limit
        .and_then(|c| cx.int_in("fdb.port_limit", c, 1, capacity as i64))
        .and_then(|c| usize::try_from(c).ok())
        .unwrap_or(share);
    let learn_rate = s
        .learn_rate
        .and_then(|c| cx.int_in("fdb.learn_rate", c, 1, MAX_FDB_LEARN_RATE))
        .map_or(DEFAULT_FDB_LEARN_RATE, |c| c as u64);
    let mut static_entries = Vec::with_capacity(s.static_entries.len());
    let mut seen: BTreeMap<[u8; 6], usize> = BTreeMap::new();
    for (i, e) in s.static_entries.iter().enumerate() {
        let path = format!("fdb.static[{i}]");
        let mac = match parse_mac(&e.mac) {
            Some(m) if m[0] & 1 == 1 => {
                cx.error(format!(
                    "{path}.mac: {:?} is a multicast address; static entries are unicast",
                    e.mac
                ));
                None
            }
            Some(m) => Some(m),
            None => {
                cx.error(format!(
                    "{path}.mac: {:?} is not a MAC address (try \"02:00:00:00:00:01\")",
                    e.mac
                ));
                None
            }
        };
        if let Some(m) = mac {
            if let Some(j) = seen.insert(m, i) {
                cx.error(format!("{path}.mac: {:?} is already in fdb.static[{j}]", e.mac));
            }
        }
        let port = u16::try_from(e.port)
            .ok()
            .filter(|id| ports.iter().any(|p| p.id == *id));
        if port.is_none() {
            cx.error(format!("{path}.port: there is no port with id {}", e.port));
        }
        if let (Some(mac), Some(port)) = (mac, port) {
            static_entries.push(StaticMac { mac, port });
        }
    }
    if s.static_entries.len() > capacity {
        cx.error(format!(
            "fdb.static: {} entries do not fit fdb.capacity ({capacity})",
            s.static_entries.len()
        ));
    }
    FdbConfig {
        learning,
        aging_ns,
        capacity,
        port_limit,
        learn_rate,
        static_entries,
    }
}

/// `02:00:00:00:00:01` or `02-00-00-00-00-01`.
pub fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = text.trim().split([':', '-']);
    for byte in &mut out {
        let part = parts.next()?;
        if part.is_empty() || part.len() > 2 {
            return None;
        }
        *byte = u8::from_str_radix(part, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}
