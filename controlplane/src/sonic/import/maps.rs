//! PORT_QOS_MAP and the maps it names (qosorch's half): the ingress maps per port, as map
//! sets (`[classify.map.NAME]`), the queue map and PFC maps for the whole switch.

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

/// The ingress maps a port binds (PORT_QOS_MAP fields), each a map's name with its origin.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Binding {
    dscp: Option<(String, String)>,
    dot1p: Option<(String, String)>,
    pg: Option<(String, String)>,
}

/// The names of a binding's maps (origins aside): what makes two ports' sets the same.
type BindingNames = (Option<String>, Option<String>, Option<String>);

impl Binding {
    fn names(&self) -> BindingNames {
        let n = |x: &Option<(String, String)>| x.as_ref().map(|(n, _)| n.clone());
        (n(&self.dscp), n(&self.dot1p), n(&self.pg))
    }
}

/// The name most ports give (ties to the first in name order), and one of its origins.
fn most_common(values: impl Iterator<Item = (String, String)>) -> Option<(String, String)> {
    let mut count: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for (name, at) in values {
        count.entry(name).or_insert((0, at)).0 += 1;
    }
    let best = count.values().map(|(n, _)| *n).max()?;
    count
        .into_iter()
        .find(|(_, (n, _))| *n == best)
        .map(|(name, (_, at))| (name, at))
}

pub(super) fn read_maps(db: &ConfigDb, ports: &[Port], p: &mut Problems) -> Maps {
    let mut m = Maps {
        tc_to_queue: std::array::from_fn(|i| i as u8),
        tc_to_pg: std::array::from_fn(|i| i as u8),
        ..Maps::default()
    };
    // The one value every port gives for a switch-wide field, with its origin.
    let mut seen: BTreeMap<&str, (String, String)> = BTreeMap::new();
    // Each port's ingress maps (by port name), and `global`'s DSCP map.
    let mut bindings: BTreeMap<String, Binding> = BTreeMap::new();
    let mut global_dscp: Option<(String, String)> = None;
    // pfc_to_pg_map per port: checked against the port's own TC → PG map below.
    let mut pfc_to_pg: Vec<(String, String, String)> = Vec::new();
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
            // The ingress maps: per port, as qosorch binds them (`global`'s DSCP map is the
            // switch's, SAI's default for a port that binds none).
            let table = match field.as_str() {
                "dscp_to_tc_map" => "DSCP_TO_TC_MAP",
                "dot1p_to_tc_map" => "DOT1P_TO_TC_MAP",
                "tc_to_pg_map" => "TC_TO_PRIORITY_GROUP_MAP",
                "pfc_to_pg_map" => "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP",
                _ => "",
            };
            if !table.is_empty() {
                let name = match reference(value, table) {
                    Ok(n) => n,
                    Err(e) => {
                        p.error(&at, e);
                        continue;
                    }
                };
                if global {
                    global_dscp = Some((name, at));
                    continue;
                }
                for n in &names {
                    let b = bindings.entry(n.clone()).or_default();
                    let slot = match field.as_str() {
                        "dscp_to_tc_map" => &mut b.dscp,
                        "dot1p_to_tc_map" => &mut b.dot1p,
                        "tc_to_pg_map" => &mut b.pg,
                        _ => {
                            pfc_to_pg.push((n.clone(), name.clone(), at.clone()));
                            continue;
                        }
                    };
                    *slot = Some((name.clone(), at.clone()));
                }
                continue;
            }
            // The queue maps: rocesw picks a frame's queue where it arrives, with one map (SAI
            // applies TC_TO_QUEUE where the frame leaves, and a PFC frame pauses the queue it
            // maps to on the port it arrives on): every port must name the same.
            match seen.get(field.as_str()) {
                Some((v, first)) if v != value => p.error(
                    at,
                    format!(
                        "{value:?} differs from {first} ({v:?}): rocesw maps TC to queue with one map for \
                         the whole switch (per port: the DSCP, dot1p and TC → PG maps, and pfc_enable)"
                    ),
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
    // The switch's ingress maps ([classify]): `global`'s DSCP map, else the one most ports
    // bind; each other map the one most ports bind.
    let default = Binding {
        dscp: global_dscp.or_else(|| most_common(bindings.values().filter_map(|b| b.dscp.clone()))),
        dot1p: most_common(bindings.values().filter_map(|b| b.dot1p.clone())),
        pg: most_common(bindings.values().filter_map(|b| b.pg.clone())),
    };
    let default_names = default.names();
    m.default_sonic = [
        ("dscp_to_tc_map", default_names.0.clone()),
        ("dot1p_to_tc_map", default_names.1.clone()),
        ("tc_to_pg_map", default_names.2.clone()),
    ]
    .into_iter()
    .filter_map(|(f, n)| Some((f, n?)))
    .collect();
    if let Some((name, at)) = &default.dscp {
        m.dscp_to_tc =
            read_map::<64>(db, "DSCP_TO_TC_MAP", name, 7, p).map(|v| (format!("{at} → DSCP_TO_TC_MAP|{name}"), v));
    }
    if let Some((name, at)) = &default.dot1p {
        m.dot1p_to_tc =
            read_map::<8>(db, "DOT1P_TO_TC_MAP", name, 7, p).map(|v| (format!("{at} → DOT1P_TO_TC_MAP|{name}"), v));
    }
    if let Some((name, at)) = &default.pg {
        if let Some(v) = read_map::<8>(db, "TC_TO_PRIORITY_GROUP_MAP", name, 7, p) {
            m.tc_to_pg = v;
            m.tc_to_pg_from = Some(format!("{at} → TC_TO_PRIORITY_GROUP_MAP|{name}"));
        }
    }
    if let Some((name, at)) = refname(p, "tc_to_queue_map", "TC_TO_QUEUE_MAP") {
        if let Some(v) = read_map::<8>(db, "TC_TO_QUEUE_MAP", &name, 7, p) {
            m.tc_to_queue = v;
            m.tc_to_queue_from = Some(format!("{at} → TC_TO_QUEUE_MAP|{name}"));
        }
    }
    // A port binding a map the switch's maps do not hold gets a map set of the maps that
    // differ; ports binding the same maps share it.
    let mut by_names: BTreeMap<BindingNames, usize> = BTreeMap::new();
    for port in ports {
        let Some(b) = bindings.get(&port.name) else { continue };
        let differs = |own: &Option<(String, String)>, def: &Option<String>| {
            own.as_ref().filter(|(n, _)| Some(n) != def.as_ref()).cloned()
        };
        let own = Binding {
            dscp: differs(&b.dscp, &default_names.0),
            dot1p: differs(&b.dot1p, &default_names.1),
            pg: differs(&b.pg, &default_names.2),
        };
        if own == Binding::default() {
            continue;
        }
        let names = own.names();
        let k = match by_names.get(&names) {
            Some(&k) => k,
            None => {
                let set = MapSetIn {
                    name: set_name(&own, &m.sets),
                    dscp_to_tc: own.dscp.as_ref().and_then(|(n, at)| {
                        read_map::<64>(db, "DSCP_TO_TC_MAP", n, 7, p).map(|v| (format!("{at} → DSCP_TO_TC_MAP|{n}"), v))
                    }),
                    dot1p_to_tc: own.dot1p.as_ref().and_then(|(n, at)| {
                        read_map::<8>(db, "DOT1P_TO_TC_MAP", n, 7, p)
                            .map(|v| (format!("{at} → DOT1P_TO_TC_MAP|{n}"), v))
                    }),
                    tc_to_pg: own.pg.as_ref().and_then(|(n, at)| {
                        read_map::<8>(db, "TC_TO_PRIORITY_GROUP_MAP", n, 7, p)
                            .map(|v| (format!("{at} → TC_TO_PRIORITY_GROUP_MAP|{n}"), v))
                    }),
                    sonic: [
                        ("dscp_to_tc_map", names.0.clone()),
                        ("dot1p_to_tc_map", names.1.clone()),
                        ("tc_to_pg_map", names.2.clone()),
                    ]
                    .into_iter()
                    .filter_map(|(f, n)| Some((f, n?)))
                    .collect(),
                };
                m.sets.push(set);
                by_names.insert(names, m.sets.len() - 1);
                m.sets.len() - 1
            }
        };
        let at = [&own.dscp, &own.dot1p, &own.pg]
            .into_iter()
            .flatten()
            .map(|(_, at)| at.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        m.port_set.insert(port.name.clone(), (k, at));
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
    // priority from the PG the port's tc_to_pg gives it: the PFC maps must say the same.
    let mut checks: Vec<(String, String, [u8; 8], &str)> = Vec::new();
    if let Some((name, at)) = refname(p, "pfc_to_queue_map", "MAP_PFC_PRIORITY_TO_QUEUE") {
        checks.push((name, at, m.tc_to_queue, "tc_to_queue_map"));
    }
    for (port, name, at) in pfc_to_pg {
        checks.push((name, at, m.tc_to_pg_of(&port), "tc_to_pg_map"));
    }
    for (name, at, ours, what) in checks {
        let table = if what == "tc_to_queue_map" {
            "MAP_PFC_PRIORITY_TO_QUEUE"
        } else {
            "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP"
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

/// A map set's name: the SONiC name its maps share (`AZURE_UPLINK`), or each map's
/// (`dscp_to_tc_map=A, tc_to_pg_map=B`) when they differ or the short name is taken.
fn set_name(own: &Binding, taken: &[MapSetIn]) -> String {
    let parts: Vec<(&str, &str)> = [
        ("dscp_to_tc_map", &own.dscp),
        ("dot1p_to_tc_map", &own.dot1p),
        ("tc_to_pg_map", &own.pg),
    ]
    .into_iter()
    .filter_map(|(f, b)| Some((f, b.as_ref()?.0.as_str())))
    .collect();
    let distinct: BTreeSet<&str> = parts.iter().map(|(_, n)| *n).collect();
    if let (1, Some(n)) = (distinct.len(), distinct.first()) {
        if !taken.iter().any(|s| s.name == *n) {
            return n.to_string();
        }
    }
    parts
        .iter()
        .map(|(f, n)| format!("{f}={n}"))
        .collect::<Vec<_>>()
        .join(", ")
}
