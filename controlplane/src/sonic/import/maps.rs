//! PORT_QOS_MAP and the maps it names (qosorch's half): one set of maps for the switch.

use super::*;

/// The fields of PORT_QOS_MAP.
pub(super) const PORT_QOS_FIELDS: &[&str] = &[
    "dscp_to_tc_map",
    "dot1p_to_tc_map",
    "tc_to_queue_map",
    "tc_to_pg_map",
    "pfc_to_pg_map",
    "pfc_to_queue_map",
    "pfc_enable",
    "pfcwd_sw_enable",
    "tc_to_dscp_map",
    "scheduler",
];

pub(super) fn read_map<const N: usize>(
    db: &ConfigDb,
    table: &str,
    name: &str,
    max_to: u8,
    p: &mut Problems,
) -> Option<[u8; N]> {
    let Some(f) = db.entry(table, name) else {
        p.error(Origin::new(table, name, ""), "referenced but not defined");
        return None;
    };
    let mut out: [u8; N] = std::array::from_fn(|i| if N == 64 { 0 } else { i as u8 });
    for (from, to) in f {
        let at = Origin::new(table, name, from);
        let (Ok(k), Ok(v)) = (from.trim().parse::<usize>(), to.trim().parse::<u8>()) else {
            p.error(at, format!("{to:?} from {from:?}: whole numbers are expected"));
            continue;
        };
        if k >= N || v > max_to {
            p.error(at, format!("{k} → {v} is outside 0..{N} → 0..={max_to}"));
            continue;
        }
        out[k] = v;
    }
    Some(out)
}

pub(super) fn read_maps(db: &ConfigDb, ports: &[Port], p: &mut Problems) -> Maps {
    let mut m = Maps {
        tc_to_queue: std::array::from_fn(|i| i as u8),
        tc_to_pg: std::array::from_fn(|i| i as u8),
        ..Maps::default()
    };
    // The one value every port gives for `field` (or `global`), with its origin.
    let mut seen: BTreeMap<&str, (String, String)> = BTreeMap::new();
    for (key, f) in db.table("PORT_QOS_MAP") {
        p.known("PORT_QOS_MAP", key, f, PORT_QOS_FIELDS);
        let (names, _) = match expand_key(key, 7) {
            Ok(k) => k,
            Err(e) => {
                p.error(Origin::new("PORT_QOS_MAP", key, ""), e);
                continue;
            }
        };
        let global = key.eq_ignore_ascii_case("global");
        for n in &names {
            if !global && !ports.iter().any(|x| &x.name == n) {
                p.error(
                    Origin::new("PORT_QOS_MAP", key, ""),
                    format!("{n} is not a port of the PORT table"),
                );
            }
        }
        for (field, value) in f {
            if global && field != "dscp_to_tc_map" {
                p.note(format!(
                    "PORT_QOS_MAP|global|{field}: ignored (SONiC applies only dscp_to_tc_map globally)"
                ));
                continue;
            }
            if field == "tc_to_dscp_map" || field == "scheduler" || field == "pfcwd_sw_enable" {
                p.note(format!("PORT_QOS_MAP|*|{field}: not modelled, ignored"));
                continue;
            }
            let at = Origin::new("PORT_QOS_MAP", key, field).to_string();
            if field == "pfc_enable" {
                // Per port, as qosorch applies it.
                let mut prios = Vec::new();
                for s in value.split(',').filter(|s| !s.trim().is_empty()) {
                    match s.trim().parse::<u8>() {
                        Ok(n) if n < 8 && !prios.contains(&n) => prios.push(n),
                        _ => p.error(&at, format!("{s:?} is not a priority 0..=7 (or given twice)")),
                    }
                }
                prios.sort_unstable();
                for n in &names {
                    m.port_pfc.insert(n.clone(), (prios.clone(), at.clone()));
                }
                continue;
            }
            match seen.get(field.as_str()) {
                Some((v, first)) if v != value => p.error(
                    at,
                    format!("{value:?} differs from {first} ({v:?}): rocesw classifies and pauses with one set of maps for the whole switch"),
                ),
                Some(_) => {}
                None => {
                    seen.insert(field, (value.clone(), at));
                }
            }
        }
    }
    let refname = |p: &mut Problems, field: &str, table: &str| -> Option<(String, String)> {
        let (v, at) = seen.get(field)?;
        match reference(v, table) {
            Ok(n) => Some((n, at.clone())),
            Err(e) => {
                p.error(at, e);
                None
            }
        }
    };
    if let Some((name, at)) = refname(p, "dscp_to_tc_map", "DSCP_TO_TC_MAP") {
        m.dscp_to_tc =
            read_map::<64>(db, "DSCP_TO_TC_MAP", &name, 7, p).map(|v| (format!("{at} → DSCP_TO_TC_MAP|{name}"), v));
    }
    if let Some((name, at)) = refname(p, "dot1p_to_tc_map", "DOT1P_TO_TC_MAP") {
        m.dot1p_to_tc =
            read_map::<8>(db, "DOT1P_TO_TC_MAP", &name, 7, p).map(|v| (format!("{at} → DOT1P_TO_TC_MAP|{name}"), v));
    }
    if let Some((name, at)) = refname(p, "tc_to_queue_map", "TC_TO_QUEUE_MAP") {
        if let Some(v) = read_map::<8>(db, "TC_TO_QUEUE_MAP", &name, 7, p) {
            m.tc_to_queue = v;
            m.tc_to_queue_from = Some(format!("{at} → TC_TO_QUEUE_MAP|{name}"));
        }
    }
    if let Some((name, at)) = refname(p, "tc_to_pg_map", "TC_TO_PRIORITY_GROUP_MAP") {
        if let Some(v) = read_map::<8>(db, "TC_TO_PRIORITY_GROUP_MAP", &name, 7, p) {
            m.tc_to_pg = v;
            m.tc_to_pg_from = Some(format!("{at} → TC_TO_PRIORITY_GROUP_MAP|{name}"));
        }
    }
    // The switch's PFC priorities: every port's (a port's own are a subset, written with it).
    let mut union: Vec<u8> = m.port_pfc.values().flat_map(|(v, _)| v.iter().copied()).collect();
    union.sort_unstable();
    union.dedup();
    let sets: BTreeSet<&Vec<u8>> = m.port_pfc.values().map(|(v, _)| v).collect();
    m.pfc_from = match (sets.len(), m.port_pfc.values().next()) {
        (1, Some((_, at))) if m.port_pfc.len() == ports.len() => Some(at.clone()),
        (0, _) => None,
        _ => Some(format!(
            "every port's PORT_QOS_MAP|…|pfc_enable together ({} ports give one); a port with fewer writes its own pfc",
            m.port_pfc.len()
        )),
    };
    m.pfc_priorities = union;
    let without: Vec<&str> = ports
        .iter()
        .filter(|x| m.port_pfc.get(&x.name).is_none_or(|(v, _)| v.is_empty()))
        .map(|x| x.name.as_str())
        .collect();
    if !without.is_empty() && !m.pfc_priorities.is_empty() {
        p.note(format!(
            "{} port{} with no PORT_QOS_MAP pfc_enable, lossy as on SONiC (no PFC, no lossless PG): {}",
            without.len(),
            if without.len() == 1 { "" } else { "s" },
            without.join(", ")
        ));
    }
    // rocesw pauses a received priority's queue through tc_to_queue, and sends PFC for a
    // priority from the PG tc_to_pg gives it: the two PFC maps must say the same.
    for (field, table, ours, what) in [
        (
            "pfc_to_queue_map",
            "MAP_PFC_PRIORITY_TO_QUEUE",
            m.tc_to_queue,
            "tc_to_queue_map",
        ),
        (
            "pfc_to_pg_map",
            "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP",
            m.tc_to_pg,
            "tc_to_pg_map",
        ),
    ] {
        let Some((name, at)) = refname(p, field, table) else {
            continue;
        };
        let Some(entry) = db.entry(table, &name) else {
            p.error(&at, format!("{table}|{name} is referenced but not defined"));
            continue;
        };
        let Some(map) = read_map::<8>(db, table, &name, 7, p) else {
            continue;
        };
        for &prio in &m.pfc_priorities {
            let pr = usize::from(prio);
            if entry.contains_key(&prio.to_string()) && map[pr] != ours[pr] {
                p.error(
                    Origin::new(table, &name, &prio.to_string()),
                    format!(
                        "priority {prio} → {}, but {what} sends TC {prio} to {}: rocesw ties PFC priority {prio} to TC {prio}'s queue and PG",
                        map[pr], ours[pr]
                    ),
                );
            }
        }
    }
    m
}
