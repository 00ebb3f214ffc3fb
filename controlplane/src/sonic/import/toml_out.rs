//! The imported config as TOML, every value with its origin in a comment.

use super::*;

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
    pub(super) notes: &'a [String],
    pub(super) source: Option<&'a str>,
}

/// `key = value` with its origin in a comment, aligned.
pub(super) fn kv(out: &mut String, key: &str, value: &str, origin: &str) {
    let line = format!("{key} = {value}");
    if origin.is_empty() {
        let _ = writeln!(out, "{line}");
    } else {
        let _ = writeln!(out, "{line:<34} # {origin}");
    }
}

pub(super) fn size(b: u64) -> String {
    format!("\"{b}B\"")
}

pub(super) fn speed(mbps: u64) -> String {
    if mbps.is_multiple_of(1000) {
        format!("\"{}G\"", mbps / 1000)
    } else {
        format!("\"{mbps}M\"")
    }
}

/// The lines of a buffer table (`[pg.N]`, a port's `[port.pg.N]`).
pub(super) fn buf_lines(out: &mut String, b: &Buf) {
    buf_lines_over(out, b, None);
}

/// The lines of `b` that differ from `base` (all of them without one): a port's own table
/// then says only where it departs from the global one, so a change of the global table (a
/// tuned dynamic_th) reaches every port that does not set that value itself.
pub(super) fn buf_lines_over(out: &mut String, b: &Buf, base: Option<&Buf>) {
    let o = &b.origin;
    let differs = |f: &dyn Fn(&Buf) -> String| base.is_none_or(|c| f(c) != f(b));
    if differs(&|x| x.pool.clone()) {
        kv(out, "pool", &format!("{:?}", b.pool), &format!("{o}|pool"));
    }
    if differs(&|x| x.min.to_string()) {
        kv(out, "min", &size(b.min), &format!("{o}|size"));
    }
    if differs(&|x| format!("{:?}", x.limit)) {
        match b.limit {
            Limit::DynamicTh(t) => kv(out, "dynamic_th", &t.to_string(), &format!("{o}|dynamic_th")),
            Limit::Static(s) => kv(out, "static", &size(s), &format!("{o}|static_th")),
            Limit::Unlimited => kv(out, "unlimited", "true", &format!("{o}: dynamic_th 7 or static_th 0")),
        }
    }
    if differs(&|x| format!("{:?}", x.headroom)) {
        if let Some(h) = b.headroom {
            let note = b.headroom_note.as_deref().unwrap_or("");
            kv(out, "headroom", &size(h), &format!("{o}|xoff{note}"));
        }
    }
    // No xon is xon 0 (the offset alone decides), which a port says over a global xon.
    let has_xon = b.xon.is_some() || base.is_some_and(|c| c.xon.is_some());
    if has_xon && differs(&|x| format!("{:?}", x.xon)) {
        kv(out, "xon", &size(b.xon.unwrap_or(0)), &format!("{o}|xon"));
    }
    if differs(&|x| format!("{:?}", x.xon_offset)) {
        if let Some(x) = b.xon_offset {
            kv(out, "xon_offset", &size(x), &format!("{o}|xon_offset"));
        }
    }
}

pub(super) fn sched_lines(out: &mut String, s: &Sched) {
    let o = &s.origin;
    if s.strict {
        kv(out, "sched", "\"strict\"", &format!("{o}|type"));
    } else {
        kv(out, "sched", "\"wdrr\"", &format!("{o}|type"));
        kv(out, "weight", &s.weight.to_string(), &format!("{o}|weight"));
    }
    if let Some((rate, burst)) = s.shaper {
        kv(
            out,
            "shaper",
            &format!("{{ rate = \"{rate}\", burst = \"{burst}B\" }}"),
            &format!("{o}|pir, pbs"),
        );
    }
    if let Some(e) = &s.ecn {
        kv(
            out,
            "ecn",
            &format!("{e:?}"),
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

pub(super) fn write_toml(t: &TomlParts<'_>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Imported from a SONiC config_db.json{} by rocesw (rocectl sonic import).\n\
         # Platform: {}: {} B cells; {}.\n\
         {}",
        t.source.map(|s| format!(" ({s})")).unwrap_or_default(),
        t.platform.name,
        t.platform.cell_bytes,
        t.platform.source,
        crate::sonic::ORIGINS_LINE
    );
    for n in t.notes {
        let _ = writeln!(out, "# note: {n}");
    }
    out.push_str("\n[buffer]\n");
    kv(
        &mut out,
        "cell",
        &format!("\"{}B\"", t.platform.cell_bytes),
        &format!("{}'s MMU cell", t.platform.name),
    );
    if let Some(s) = &t.platform.slices {
        kv(
            &mut out,
            "slices",
            &s.count.to_string(),
            &format!(
                "{}'s MMU slices (XPEs), each pool split evenly: {}",
                t.platform.name, s.source
            ),
        );
    }
    for pool in t.pools {
        let _ = writeln!(out, "\n[buffer.pool.{}]", pool.name);
        let o = format!("BUFFER_POOL|{}", pool.name);
        kv(
            &mut out,
            "type",
            if pool.ingress { "\"ingress\"" } else { "\"egress\"" },
            &format!("{o}|type"),
        );
        kv(&mut out, "size", &size(pool.size), &format!("{o}|size"));
        kv(
            &mut out,
            "mode",
            if pool.dynamic { "\"dynamic\"" } else { "\"static\"" },
            &format!("{o}|mode"),
        );
        if pool.xoff > 0 {
            kv(
                &mut out,
                "headroom",
                &size(pool.xoff),
                &format!("{o}|xoff (shared headroom pool)"),
            );
        }
    }

    // Ports, with their own PG and queue tables where they differ from the common ones.
    let common_pg: [Option<Buf>; 8] = std::array::from_fn(|g| common(t.pgs.iter().map(|p| p[g].clone())));
    let common_q: [Option<Buf>; 8] = std::array::from_fn(|q| common(t.queues.iter().map(|p| p[q].clone())));
    let common_s: [Option<Sched>; 8] = std::array::from_fn(|q| common(t.scheds.iter().map(|p| p[q].clone())));
    for (pi, port) in t.ports.iter().enumerate() {
        out.push_str("\n[[port]]\n");
        kv(&mut out, "id", &port.id.to_string(), "");
        kv(
            &mut out,
            "name",
            &format!("{:?}", port.name),
            &format!("PORT|{}", port.name),
        );
        kv(
            &mut out,
            "speed",
            &speed(port.speed_mbps),
            &format!("PORT|{}|speed", port.name),
        );
        kv(
            &mut out,
            "mtu",
            &port.mtu.to_string(),
            &format!("PORT|{}|mtu", port.name),
        );
        if let Some((origin, m)) = &port.cable {
            kv(&mut out, "cable", &format!("\"{m}m\""), origin);
        }
        if let Some(s) = &t.platform.slices {
            let slice = s.of_lane(port.first_lane);
            let lane = port.first_lane.map_or("no lanes: slice 0".to_string(), |l| {
                format!(
                    "first lane {l}: pipe {}",
                    l.saturating_sub(u64::from(s.first_lane)) / u64::from(s.lanes_per_pipe.max(1))
                )
            });
            kv(
                &mut out,
                "slice",
                &slice.to_string(),
                &format!("PORT|{}|lanes ({lane})", port.name),
            );
        }
        for (g, common) in common_pg.iter().enumerate() {
            if let Some(b) = &t.pgs[pi][g] {
                if common.as_ref() != Some(b) {
                    let _ = writeln!(out, "[port.pg.{g}]");
                    buf_lines_over(&mut out, b, common.as_ref());
                }
            }
        }
        for q in 0..8 {
            let (b, s) = (&t.queues[pi][q], &t.scheds[pi][q]);
            let buf_differs = b.is_some() && b != &common_q[q];
            let sched_differs = s.is_some() && s != &common_s[q];
            if buf_differs || sched_differs {
                let _ = writeln!(out, "[port.queue.{q}]");
                if let Some(b) = b.as_ref().filter(|_| buf_differs) {
                    buf_lines_over(&mut out, b, common_q[q].as_ref());
                }
                if let Some(s) = s.as_ref().filter(|_| sched_differs) {
                    sched_lines(&mut out, s);
                }
            }
        }
    }

    // Classification.
    out.push_str("\n[classify]\n");
    let m = t.maps;
    if let Some((origin, map)) = &m.dscp_to_tc {
        kv(&mut out, "trust", "\"dscp\"", origin);
        let _ = writeln!(out, "# {origin}");
        let entries: Vec<String> = map.iter().enumerate().map(|(d, tc)| format!("{d} = {tc}")).collect();
        let _ = writeln!(out, "dscp_to_tc = {{ {} }}", entries.join(", "));
    } else if m.dot1p_to_tc.is_some() {
        kv(&mut out, "trust", "\"pcp\"", "PORT_QOS_MAP|*|dot1p_to_tc_map");
    }
    if let Some((origin, map)) = &m.dot1p_to_tc {
        let _ = writeln!(out, "# {origin}");
        let entries: Vec<String> = map.iter().enumerate().map(|(d, tc)| format!("{d} = {tc}")).collect();
        let _ = writeln!(out, "pcp_to_tc = {{ {} }}", entries.join(", "));
    }
    for (key, map, origin) in [
        ("tc_to_queue", &m.tc_to_queue, &m.tc_to_queue_from),
        ("tc_to_pg", &m.tc_to_pg, &m.tc_to_pg_from),
    ] {
        if let Some(o) = origin {
            let _ = writeln!(out, "# {o}");
        }
        let entries: Vec<String> = map.iter().enumerate().map(|(d, v)| format!("{d} = {v}")).collect();
        let _ = writeln!(out, "{key} = {{ {} }}", entries.join(", "));
    }

    // PFC and the watchdog.
    out.push_str("\n[pfc]\n");
    let prios: Vec<String> = m.pfc_priorities.iter().map(u8::to_string).collect();
    kv(
        &mut out,
        "priorities",
        &format!("[{}]", prios.join(", ")),
        m.pfc_from.as_deref().unwrap_or("no pfc_enable: no lossless priority"),
    );
    match &t.watchdog.on {
        Some((d, r, action, origin)) => {
            kv(
                &mut out,
                "watchdog",
                &format!("{{ detection = \"{d}ms\", restoration = \"{r}ms\", action = \"{action}\" }}"),
                &format!("{origin}|detection_time, restoration_time, action"),
            );
        }
        None => kv(&mut out, "watchdog", "{ enabled = false }", "no PFC_WD entry"),
    }
    if let Some(ms) = t.watchdog.poll_ms {
        let _ = writeln!(
            out,
            "# PFC_WD|GLOBAL|POLL_INTERVAL = {ms} ms: rocesw's watchdog looks every round (finer)"
        );
    }

    // CNPs: where SONiC's maps put DSCP 48, unpoliced (SONiC has no CNP policer).
    let cnp_tc = m.dscp_to_tc.as_ref().map_or(0, |(_, map)| map[48]);
    out.push_str("\n[cnp]\n");
    kv(
        &mut out,
        "queue",
        &m.tc_to_queue[usize::from(cnp_tc)].to_string(),
        "where the maps put DSCP 48 (CNPs); no policer (SONiC has none)",
    );

    // Global PG and queue tables: the profiles most ports use.
    for (g, common) in common_pg.iter().enumerate() {
        let _ = writeln!(out, "\n[pg.{g}]");
        match common {
            Some(b) => buf_lines(&mut out, b),
            None => {
                // No buffer bound: the first ingress pool, no reserve (SONiC would give the PG
                // nothing; traffic reaches it only if a map sends a TC there).
                if let Some(pool) = t.pools.iter().find(|x| x.ingress) {
                    kv(
                        &mut out,
                        "pool",
                        &format!("{:?}", pool.name),
                        "no BUFFER_PG for this PG: the first ingress pool",
                    );
                }
            }
        }
    }
    for q in 0..8 {
        let _ = writeln!(out, "\n[queue.{q}]");
        match &common_q[q] {
            Some(b) => buf_lines(&mut out, b),
            None => {
                if let Some(pool) = t.pools.iter().find(|x| !x.ingress) {
                    kv(
                        &mut out,
                        "pool",
                        &format!("{:?}", pool.name),
                        "no BUFFER_QUEUE for this queue: the first egress pool",
                    );
                }
            }
        }
        if let Some(s) = &common_s[q] {
            sched_lines(&mut out, s);
        }
    }
    for (name, w) in t.wred {
        let _ = writeln!(out, "\n[ecn.{name}]");
        let o = format!("WRED_PROFILE|{name}");
        kv(&mut out, "kmin", &size(w.kmin), &format!("{o}|green_min_threshold"));
        kv(&mut out, "kmax", &size(w.kmax), &format!("{o}|green_max_threshold"));
        kv(
            &mut out,
            "pmax",
            &format!("{}", w.pmax_percent as f64 / 100.0),
            &format!("{o}|green_drop_probability (%)"),
        );
        kv(
            &mut out,
            "non_ect",
            if w.drop_non_ect { "\"drop\"" } else { "\"pass\"" },
            &format!("{o}|wred_green_enable"),
        );
    }
    out
}
