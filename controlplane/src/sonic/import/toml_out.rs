//! The imported config as TOML, every value with its origin in a comment.
//!
//! Names come from a file the user did not write (DESIGN.md, "Names are data"): the document
//! is built with toml_edit's own types (tables, keys, values, and decor for the comments),
//! never by formatting strings, so a name is always a quoted key or a string value. Comments
//! are the one place text goes in raw: [`comment`] keeps each on its line. The text written is
//! then read back ([`check_same_switch`]): a TOML that would describe another switch is an
//! error, never a silent difference.

use super::*;
use crate::sonic::INHERITED;
use toml_edit::{Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table, Value};

/// What the TOML is written from.
pub(super) struct TomlParts<'a> {
    pub(super) platform: &'static Platform,
    pub(super) ports: &'a [Port],
    pub(super) pools: &'a [Pool],
    pub(super) maps: &'a Maps,
    pub(super) pgs: &'a Bindings,
    pub(super) queues: &'a Bindings,
    pub(super) scheds: &'a [[Option<Sched>; 8]],
    pub(super) wred: &'a BTreeMap<String, Wred>,
    pub(super) watchdog: &'a Watchdog,
    /// Per port (by position): its own PFC priorities where they differ from the switch's.
    pub(super) port_pfc: &'a [Option<Vec<u8>>],
    pub(super) notes: &'a [String],
    pub(super) source: Option<&'a str>,
}

/// `text` made safe for one comment line: control characters (a newline would end the
/// comment and start TOML) are written escaped, as Rust's `escape_debug` writes them.
pub(super) fn comment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// The column origins are aligned to, as the earlier writer did.
const ORIGIN_COLUMN: usize = 34;

/// `key = v` in `t`, with `origin` as its trailing comment (none if empty).
fn set(t: &mut Table, key: &str, v: impl Into<Value>, origin: &str) {
    let mut v: Value = v.into();
    v.decor_mut().set_prefix(" ");
    t.insert(key, Item::Value(v));
    if origin.is_empty() {
        return;
    }
    // Align the comments: the width of `key = value` as toml_edit will write it.
    let width = t
        .get_key_value(key)
        .map(|(k, item)| k.display_repr().len() + 3 + item.to_string().trim().len())
        .unwrap_or(0);
    let pad = " ".repeat(ORIGIN_COLUMN.saturating_sub(width) + 1);
    if let Some(Item::Value(v)) = t.get_mut(key) {
        v.decor_mut().set_suffix(format!("{pad}# {}", comment(origin)));
    }
}

/// Comment lines above `key` of `t`.
fn note_above(t: &mut Table, key: &str, lines: &[String]) {
    if let Some(mut k) = t.key_mut(key) {
        let text: String = lines.iter().map(|l| format!("# {}\n", comment(l))).collect();
        k.leaf_decor_mut().set_prefix(text);
    }
}

/// A new table written with its own header, after a blank line.
fn section() -> Table {
    let mut t = Table::new();
    t.decor_mut().set_prefix("\n");
    t
}

/// A sub-table only there to hold others (`[port.pg]` holding `[port.pg.3]`).
fn implicit() -> Table {
    let mut t = Table::new();
    t.set_implicit(true);
    t
}

fn size(b: u64) -> String {
    format!("{b}B")
}

fn speed(mbps: u64) -> String {
    if mbps.is_multiple_of(1000) {
        format!("{}G", mbps / 1000)
    } else {
        format!("{mbps}M")
    }
}

/// An inline `{ 0 = a, 1 = b, ... }` of a map.
fn index_map(map: &[u8]) -> InlineTable {
    let mut t = InlineTable::new();
    for (i, v) in map.iter().enumerate() {
        t.insert(i.to_string(), Value::from(i64::from(*v)));
    }
    t.fmt();
    t
}

/// The keys of a buffer table (`[pg.N]`, a port's `[port.pg.N]`).
fn buf_keys(t: &mut Table, b: &Buf) {
    buf_keys_over(t, b, None, "");
}

/// The keys of `b` that differ from `base` (all of them without one): a port's own table
/// then says only where it departs from the global one, so a change of the global table (a
/// tuned dynamic_th) reaches every port that does not set that value itself.
///
/// A key left to the global table because its value is the same there may still come from
/// another source (a 5 m port's profile with the 40 m one's `size`): the port's table then
/// says, in a line above its header (`# min as [pg.3]: BUFFER_PROFILE|…_5m_profile|size`,
/// [`INHERITED`]), where the port's value comes from, and `rocectl show buffer` names that, not
/// the global key's origin.
fn buf_keys_over(t: &mut Table, b: &Buf, base: Option<&Buf>, table: &str) {
    let differs = |f: &dyn Fn(&Buf) -> String| base.is_none_or(|c| f(c) != f(b));
    let mut inherited: Vec<String> = Vec::new();
    let mut same_origin = |key: &str, mine: String, theirs: &dyn Fn(&Buf) -> String| {
        if let Some(c) = base {
            if theirs(c) != mine {
                inherited.push(format!("{key}{INHERITED}[{table}]: {mine}"));
            }
        }
    };
    if differs(&|x| x.pool.clone()) {
        set(t, "pool", b.pool.as_str(), &b.field("pool"));
    } else {
        same_origin("pool", b.field("pool"), &|c| c.field("pool"));
    }
    if differs(&|x| x.min.to_string()) {
        set(t, "min", size(b.min), &b.from.min);
    } else {
        same_origin("min", b.from.min.clone(), &|c| c.from.min.clone());
    }
    if !differs(&|x| format!("{:?}", x.limit)) {
        let key = match b.limit {
            Limit::DynamicTh(_) => Some(("dynamic_th", "dynamic_th")),
            Limit::Static(_) => Some(("static", "static_th")),
            Limit::Unlimited => None,
        };
        if let Some((key, field)) = key {
            same_origin(key, b.field(field), &|c| c.field(field));
        }
    }
    if !differs(&|x| format!("{:?}", x.xon_offset)) && b.xon_offset.is_some() {
        same_origin("xon_offset", b.from.xon_offset.clone(), &|c| c.from.xon_offset.clone());
    }
    if !inherited.is_empty() {
        let text: String = inherited.iter().map(|l| format!("# {}\n", comment(l))).collect();
        t.decor_mut().set_prefix(text);
    }
    if differs(&|x| format!("{:?}", x.limit)) {
        match b.limit {
            Limit::DynamicTh(th) => set(t, "dynamic_th", th, &b.field("dynamic_th")),
            Limit::Static(s) => set(t, "static", size(s), &b.field("static_th")),
            Limit::Unlimited => set(
                t,
                "unlimited",
                true,
                &format!("{}: dynamic_th 7 or static_th 0", b.origin),
            ),
        }
    }
    if differs(&|x| format!("{:?}", x.headroom)) {
        if let Some(h) = b.headroom {
            let note = b.headroom_note.as_deref().unwrap_or("");
            set(t, "headroom", size(h), &format!("{}{note}", b.from.headroom));
        }
    }
    // No xon is xon 0 (the offset alone decides), which a port says over a global xon.
    let has_xon = b.xon.is_some() || base.is_some_and(|c| c.xon.is_some());
    if has_xon && differs(&|x| format!("{:?}", x.xon)) {
        let from = if b.xon.is_some() {
            b.from.xon.clone()
        } else {
            format!("{} has no xon: 0, the offset alone decides", b.origin)
        };
        set(t, "xon", size(b.xon.unwrap_or(0)), &from);
    }
    if differs(&|x| format!("{:?}", x.xon_offset)) {
        if let Some(x) = b.xon_offset {
            set(t, "xon_offset", size(x), &b.from.xon_offset);
        }
    }
}

fn sched_keys(t: &mut Table, s: &Sched) {
    let o = &s.origin;
    let named = o.starts_with("SCHEDULER|");
    let field = |f: &str| if named { format!("{o}|{f}") } else { o.clone() };
    if s.strict {
        set(t, "sched", "strict", &field("type"));
    } else {
        set(t, "sched", "wdrr", &field("type"));
        set(t, "weight", i64::from(s.weight), &field("weight"));
    }
    if let Some((rate, burst)) = s.shaper {
        let mut sh = InlineTable::new();
        sh.insert("rate", Value::from(rate.to_string()));
        sh.insert("burst", Value::from(size(burst)));
        sh.fmt();
        set(t, "shaper", sh, &format!("{o}|pir (bytes/s × 8), {o}|pbs"));
    }
    if let Some(e) = &s.ecn {
        set(
            t,
            "ecn",
            e.as_str(),
            &format!("QUEUE|…|wred_profile → WRED_PROFILE|{e}"),
        );
    }
}

/// The most common value of `f` over the ports (the global table), ties to the first port.
pub(super) fn common<T: PartialEq + Clone>(items: impl Iterator<Item = Option<T>>) -> Option<T> {
    let all: Vec<Option<T>> = items.collect();
    let mut best: Option<(&T, usize)> = None;
    for v in all.iter().flatten() {
        let n = all.iter().flatten().filter(|w| *w == v).count();
        if best.is_none_or(|(_, m)| n > m) {
            best = Some((v, n));
        }
    }
    best.map(|(v, _)| v.clone())
}

/// The TOML of `t`, read back and checked to describe the same switch.
pub(super) fn write_toml(t: &TomlParts<'_>) -> Result<String, String> {
    let text = document(t).to_string();
    check_same_switch(&text, t)?;
    Ok(text)
}

fn document(t: &TomlParts<'_>) -> DocumentMut {
    let mut doc = DocumentMut::new();
    let root = doc.as_table_mut();

    let mut header = vec![
        format!(
            "Imported from a SONiC config_db.json{} by rocesw (rocectl sonic import).",
            t.source.map(|s| format!(" ({s})")).unwrap_or_default()
        ),
        format!(
            "Platform: {}: {} B cells; {}.",
            t.platform.name, t.platform.cell_bytes, t.platform.source
        ),
    ];
    for n in t.notes {
        header.push(format!("note: {n}"));
    }
    let mut head: String = header.iter().map(|l| format!("# {}\n", comment(l))).collect();
    // The origins line verbatim (a constant, no name in it): readers look for it.
    head.push_str(crate::sonic::ORIGINS_LINE);
    head.push_str("\n\n");

    let mut buffer = Table::new();
    buffer.decor_mut().set_prefix(head);
    set(
        &mut buffer,
        "cell",
        format!("{}B", t.platform.cell_bytes),
        &format!("{}'s MMU cell", t.platform.name),
    );
    if let Some(s) = &t.platform.slices {
        set(
            &mut buffer,
            "slices",
            i64::from(s.count),
            &format!(
                "{}'s MMU slices (XPEs), each pool split evenly: {}",
                t.platform.name, s.source
            ),
        );
    }
    let mut pools = implicit();
    for pool in t.pools {
        let mut pt = section();
        let o = format!("BUFFER_POOL|{}", pool.name);
        set(
            &mut pt,
            "type",
            if pool.ingress { "ingress" } else { "egress" },
            &format!("{o}|type"),
        );
        let from = pool.size_from.clone().unwrap_or_else(|| format!("{o}|size"));
        set(&mut pt, "size", size(pool.size), &from);
        set(
            &mut pt,
            "mode",
            if pool.dynamic { "dynamic" } else { "static" },
            &format!("{o}|mode"),
        );
        if pool.xoff > 0 {
            set(
                &mut pt,
                "headroom",
                size(pool.xoff),
                &format!("{o}|xoff (shared headroom pool)"),
            );
        }
        pools.insert(&pool.name, Item::Table(pt));
    }
    buffer.insert("pool", Item::Table(pools));
    root.insert("buffer", Item::Table(buffer));

    // Ports, with their own PG and queue tables where they differ from the common ones.
    let common_pg: [Option<Buf>; 8] = std::array::from_fn(|g| common(t.pgs.iter().map(|p| p[g].clone())));
    let common_q: [Option<Buf>; 8] = std::array::from_fn(|q| common(t.queues.iter().map(|p| p[q].clone())));
    let common_s: [Option<Sched>; 8] = std::array::from_fn(|q| common(t.scheds.iter().map(|p| p[q].clone())));
    let mut ports = ArrayOfTables::new();
    for (pi, port) in t.ports.iter().enumerate() {
        let mut pt = section();
        set(&mut pt, "id", i64::from(port.id), "");
        set(&mut pt, "name", port.name.as_str(), &format!("PORT|{}", port.name));
        set(
            &mut pt,
            "speed",
            speed(port.speed_mbps),
            &if port.speed_given {
                format!("PORT|{}|speed", port.name)
            } else {
                format!("PORT|{} has no speed: the file's most common", port.name)
            },
        );
        set(
            &mut pt,
            "mtu",
            i64::from(port.mtu),
            &if port.mtu_given {
                format!("PORT|{}|mtu", port.name)
            } else {
                format!("PORT|{} has no mtu: 9100, SONiC's default", port.name)
            },
        );
        if let Some((origin, m)) = &port.cable {
            set(&mut pt, "cable", format!("{m}m"), origin);
        }
        if let Some(Some(prios)) = t.port_pfc.get(pi) {
            let from = match t.maps.port_pfc.get(&port.name) {
                Some((given, at)) if given == prios => at.clone(),
                Some((_, at)) => format!("{at}, less the priorities whose PG has no buffer"),
                None => format!("{} has no PORT_QOS_MAP pfc_enable: no PFC, as on SONiC", port.name),
            };
            let arr: Array = prios.iter().map(|&p| i64::from(p)).collect();
            set(&mut pt, "pfc", arr, &from);
        }
        if let Some((k, at)) = t.maps.port_set.get(&port.name) {
            set(&mut pt, "classify", t.maps.sets[*k].name.as_str(), at);
        }
        if let Some(s) = &t.platform.slices {
            let slice = s.of_lane(port.first_lane);
            let lane = port.first_lane.map_or("no lanes: slice 0".to_string(), |l| {
                format!(
                    "first lane {l}: pipe {}",
                    l.saturating_sub(u64::from(s.first_lane)) / u64::from(s.lanes_per_pipe.max(1))
                )
            });
            set(
                &mut pt,
                "slice",
                i64::from(slice),
                &format!("PORT|{}|lanes ({lane})", port.name),
            );
        }
        let mut own_pg = implicit();
        for (g, common) in common_pg.iter().enumerate() {
            if let Some(b) = &t.pgs[pi][g] {
                if common.as_ref() != Some(b) {
                    let mut gt = Table::new();
                    buf_keys_over(&mut gt, b, common.as_ref(), &format!("pg.{g}"));
                    own_pg.insert(&g.to_string(), Item::Table(gt));
                }
            }
        }
        if !own_pg.is_empty() {
            pt.insert("pg", Item::Table(own_pg));
        }
        let mut own_q = implicit();
        for q in 0..8 {
            let (b, s) = (&t.queues[pi][q], &t.scheds[pi][q]);
            let buf_differs = b.is_some() && b != &common_q[q];
            let sched_differs = s.is_some() && s != &common_s[q];
            if buf_differs || sched_differs {
                let mut qt = Table::new();
                if let Some(b) = b.as_ref().filter(|_| buf_differs) {
                    buf_keys_over(&mut qt, b, common_q[q].as_ref(), &format!("queue.{q}"));
                }
                if let Some(s) = s.as_ref().filter(|_| sched_differs) {
                    sched_keys(&mut qt, s);
                }
                own_q.insert(&q.to_string(), Item::Table(qt));
            }
        }
        if !own_q.is_empty() {
            pt.insert("queue", Item::Table(own_q));
        }
        ports.push(pt);
    }
    root.insert("port", Item::ArrayOfTables(ports));

    // Classification.
    let mut classify = section();
    let m = t.maps;
    if let Some((origin, map)) = &m.dscp_to_tc {
        set(&mut classify, "trust", "dscp", origin);
        set(&mut classify, "dscp_to_tc", index_map(map), "");
        note_above(&mut classify, "dscp_to_tc", std::slice::from_ref(origin));
    } else if m.dot1p_to_tc.is_some() {
        set(&mut classify, "trust", "pcp", "PORT_QOS_MAP|*|dot1p_to_tc_map");
    }
    if let Some((origin, map)) = &m.dot1p_to_tc {
        set(&mut classify, "pcp_to_tc", index_map(map), "");
        note_above(&mut classify, "pcp_to_tc", std::slice::from_ref(origin));
    }
    for (key, map, origin) in [
        ("tc_to_queue", &m.tc_to_queue, &m.tc_to_queue_from),
        ("tc_to_pg", &m.tc_to_pg, &m.tc_to_pg_from),
    ] {
        set(&mut classify, key, index_map(map), "");
        let from = origin
            .clone()
            .unwrap_or_else(|| format!("no {key}_map in PORT_QOS_MAP: the identity"));
        note_above(&mut classify, key, &[from]);
    }
    if !m.sets.is_empty() {
        let mut sets = implicit();
        for s in &m.sets {
            let mut st = section();
            if let Some((origin, map)) = &s.dscp_to_tc {
                set(&mut st, "dscp_to_tc", index_map(map), "");
                note_above(&mut st, "dscp_to_tc", std::slice::from_ref(origin));
            }
            if let Some((origin, map)) = &s.dot1p_to_tc {
                set(&mut st, "pcp_to_tc", index_map(map), "");
                note_above(&mut st, "pcp_to_tc", std::slice::from_ref(origin));
            }
            if let Some((origin, map)) = &s.tc_to_pg {
                set(&mut st, "tc_to_pg", index_map(map), "");
                note_above(&mut st, "tc_to_pg", std::slice::from_ref(origin));
            }
            sets.insert(&s.name, Item::Table(st));
        }
        classify.insert("map", Item::Table(sets));
    }
    root.insert("classify", Item::Table(classify));

    // PFC and the watchdog.
    let mut pfc = section();
    let prios: Array = m.pfc_priorities.iter().map(|&p| i64::from(p)).collect();
    set(
        &mut pfc,
        "priorities",
        prios,
        m.pfc_from.as_deref().unwrap_or("no pfc_enable: no lossless priority"),
    );
    match &t.watchdog.on {
        Some((d, r, action, origin)) => {
            let mut w = InlineTable::new();
            w.insert("detection", Value::from(format!("{d}ms")));
            w.insert("restoration", Value::from(format!("{r}ms")));
            w.insert("action", Value::from(action.as_str()));
            w.fmt();
            set(
                &mut pfc,
                "watchdog",
                w,
                &format!("{origin}|detection_time, restoration_time, action"),
            );
        }
        None => {
            let mut w = InlineTable::new();
            w.insert("enabled", Value::from(false));
            w.fmt();
            set(&mut pfc, "watchdog", w, "no PFC_WD entry");
        }
    }
    if let Some(ms) = t.watchdog.poll_ms {
        pfc.decor_mut().set_suffix(format!(
            "\n# PFC_WD|GLOBAL|POLL_INTERVAL = {ms} ms: rocesw's watchdog looks every round (finer)"
        ));
    }
    root.insert("pfc", Item::Table(pfc));

    // CNPs: where SONiC's maps put DSCP 48, unpoliced (SONiC has no CNP policer).
    let cnp_tc = m.dscp_to_tc.as_ref().map_or(0, |(_, map)| map[48]);
    let mut cnp = section();
    set(
        &mut cnp,
        "queue",
        i64::from(m.tc_to_queue[usize::from(cnp_tc)]),
        "where the maps put DSCP 48 (CNPs); no policer (SONiC has none)",
    );
    root.insert("cnp", Item::Table(cnp));

    // Global PG and queue tables: the profiles most ports use.
    let mut pg = implicit();
    for (g, common) in common_pg.iter().enumerate() {
        let mut gt = section();
        match common {
            Some(b) => buf_keys(&mut gt, b),
            None => {
                // No buffer bound: the first ingress pool, no reserve (SONiC would give the PG
                // nothing; traffic reaches it only if a map sends a TC there).
                if let Some(pool) = t.pools.iter().find(|x| x.ingress) {
                    set(
                        &mut gt,
                        "pool",
                        pool.name.as_str(),
                        "no BUFFER_PG for this PG: the first ingress pool",
                    );
                }
            }
        }
        pg.insert(&g.to_string(), Item::Table(gt));
    }
    root.insert("pg", Item::Table(pg));
    let mut queue = implicit();
    for q in 0..8 {
        let mut qt = section();
        match &common_q[q] {
            Some(b) => buf_keys(&mut qt, b),
            None => {
                if let Some(pool) = t.pools.iter().find(|x| !x.ingress) {
                    set(
                        &mut qt,
                        "pool",
                        pool.name.as_str(),
                        "no BUFFER_QUEUE for this queue: the first egress pool",
                    );
                }
            }
        }
        if let Some(s) = &common_s[q] {
            sched_keys(&mut qt, s);
        }
        queue.insert(&q.to_string(), Item::Table(qt));
    }
    root.insert("queue", Item::Table(queue));
    if !t.wred.is_empty() {
        let mut ecn = implicit();
        for (name, w) in t.wred {
            let mut et = section();
            let o = format!("WRED_PROFILE|{name}");
            set(&mut et, "kmin", size(w.kmin), &format!("{o}|green_min_threshold"));
            set(&mut et, "kmax", size(w.kmax), &format!("{o}|green_max_threshold"));
            set(
                &mut et,
                "pmax",
                w.pmax_percent as f64 / 100.0,
                &format!("{o}|green_drop_probability (%)"),
            );
            set(
                &mut et,
                "non_ect",
                if w.drop_non_ect { "drop" } else { "pass" },
                &format!("{o}|wred_green_enable"),
            );
            ecn.insert(name, Item::Table(et));
        }
        root.insert("ecn", Item::Table(ecn));
    }
    doc
}

/// Reads `text` back as plain TOML and checks it describes the switch `t` describes: the same
/// ports (ids, names, speeds, in order), pools, WRED profiles and tables, nothing else. A name
/// that had become TOML syntax would show here as a port, pool or table the file never had.
fn check_same_switch(text: &str, t: &TomlParts<'_>) -> Result<(), String> {
    let fail = |what: String| {
        Err(format!(
            "the TOML written for this file would describe a different switch ({what}); \
             this is a bug in the importer, nothing was written"
        ))
    };
    let back: toml::Table = match toml::from_str(text) {
        Ok(b) => b,
        Err(e) => return fail(format!("it does not read back: {}", crate::syntax_message(&e))),
    };
    let mut top: Vec<&str> = back.keys().map(String::as_str).collect();
    top.sort_unstable();
    let mut want = vec!["buffer", "classify", "cnp", "pfc", "pg", "port", "queue"];
    if !t.wred.is_empty() {
        want.push("ecn");
    }
    want.sort_unstable();
    if top != want {
        return fail(format!("tables {top:?}, expected {want:?}"));
    }
    let ports: Vec<(i64, String, String, String)> = back
        .get("port")
        .and_then(toml::Value::as_array)
        .map(|a| {
            a.iter()
                .map(|p| {
                    let s = |k: &str| p.get(k).and_then(toml::Value::as_str).unwrap_or("").to_string();
                    (
                        p.get("id").and_then(toml::Value::as_integer).unwrap_or(-1),
                        s("name"),
                        s("speed"),
                        s("classify"),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let expected: Vec<(i64, String, String, String)> = t
        .ports
        .iter()
        .map(|p| {
            let set = t.maps.port_set.get(&p.name).map(|(k, _)| t.maps.sets[*k].name.clone());
            (
                i64::from(p.id),
                p.name.clone(),
                speed(p.speed_mbps),
                set.unwrap_or_default(),
            )
        })
        .collect();
    if ports != expected {
        return fail(format!(
            "{} ports read back, {} in the file, or their names or map sets differ",
            ports.len(),
            expected.len()
        ));
    }
    let names = |path: &[&str]| -> Vec<String> {
        let mut v = Some(&back);
        for k in path {
            v = v.and_then(|t| t.get(*k)).and_then(toml::Value::as_table);
        }
        v.map(|t| t.keys().cloned().collect()).unwrap_or_default()
    };
    let mut pools: Vec<String> = t.pools.iter().map(|p| p.name.clone()).collect();
    pools.sort();
    if names(&["buffer", "pool"]) != pools {
        return fail(format!("pools {:?}, expected {pools:?}", names(&["buffer", "pool"])));
    }
    let mut sets: Vec<String> = t.maps.sets.iter().map(|s| s.name.clone()).collect();
    sets.sort();
    if names(&["classify", "map"]) != sets {
        return fail(format!("map sets {:?}, expected {sets:?}", names(&["classify", "map"])));
    }
    let wred: Vec<String> = t.wred.keys().cloned().collect();
    if names(&["ecn"]) != wred {
        return fail(format!("ECN profiles {:?}, expected {wred:?}", names(&["ecn"])));
    }
    let eight: Vec<String> = (0..8).map(|i| i.to_string()).collect();
    let mut sorted = eight.clone();
    sorted.sort();
    for table in ["pg", "queue"] {
        if names(&[table]) != sorted {
            return fail(format!("{table} tables {:?}", names(&[table])));
        }
    }
    Ok(())
}
