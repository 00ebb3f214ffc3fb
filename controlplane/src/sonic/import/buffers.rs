//! BUFFER_POOL, BUFFER_PROFILE, BUFFER_PG, BUFFER_QUEUE and the port profile lists
//! (bufferorch's half), read by the platform's rules; the dynamic model's and the lookup
//! table's lossless profiles.

use super::*;

pub(super) fn read_pools(db: &ConfigDb, p: &mut Problems) -> Vec<Pool> {
    let mut out = Vec::new();
    for (name, f) in db.table("BUFFER_POOL") {
        p.known("BUFFER_POOL", name, f, &["type", "mode", "size", "xoff", "percentage"]);
        let ingress = match f.get("type").map(String::as_str) {
            Some("ingress") => true,
            Some("egress") => false,
            Some(t) => {
                p.error(
                    Origin::new("BUFFER_POOL", name, "type"),
                    format!("{t:?}: rocesw takes ingress or egress pools"),
                );
                continue;
            }
            None => {
                p.error(Origin::new("BUFFER_POOL", name, "type"), "missing (ingress or egress)");
                continue;
            }
        };
        let dynamic = match f.get("mode").map(String::as_str) {
            None | Some("dynamic") => true,
            Some("static") => false,
            Some(m) => {
                p.error(
                    Origin::new("BUFFER_POOL", name, "mode"),
                    format!("{m:?} is not static or dynamic"),
                );
                true
            }
        };
        let Some(size) = bytes(p, "BUFFER_POOL", name, f, "size") else {
            if !f.contains_key("size") {
                p.error(
                    Origin::new("BUFFER_POOL", name, "size"),
                    "missing: the dynamic buffer model computes pool sizes on the switch (STATE_DB); \
                     take the file from `show runningconfiguration all`, or give the size",
                );
            }
            continue;
        };
        if f.contains_key("percentage") {
            p.note(format!("BUFFER_POOL|{name}|percentage: ignored, the size is given"));
        }
        let xoff = bytes(p, "BUFFER_POOL", name, f, "xoff").unwrap_or(0);
        if xoff > 0 && !ingress {
            p.error(
                Origin::new("BUFFER_POOL", name, "xoff"),
                "a shared headroom pool belongs to an ingress pool",
            );
        }
        out.push(Pool {
            name: name.to_string(),
            ingress,
            size,
            dynamic,
            xoff,
            size_from: None,
        });
    }
    for (ingress, what) in [(true, "ingress"), (false, "egress")] {
        let n = out.iter().filter(|x| x.ingress == ingress).count();
        if n == 0 && p.errors.is_empty() {
            p.error("BUFFER_POOL", format!("no {what} pool"));
        }
        if n > crate::model::MAX_POOLS {
            p.error(
                "BUFFER_POOL",
                format!("{n} {what} pools, rocesw takes at most {}", crate::model::MAX_POOLS),
            );
        }
    }
    out
}

/// The pools rocesw runs: the file's, or on a platform whose `size` is the whole service pool
/// (`PoolSize::WholeLessReserves`) what is left of it shared: less the shared headroom pool
/// (the ingress pools' `xoff`), every PG's reserve and, once per slice, every queue's
/// reserve, each a whole number of cells. The slices then split the rest evenly, so a slice
/// whose ports have fewer reserves than the others' gets the average.
pub(super) fn shared_pools(
    mut pools: Vec<Pool>,
    pgs: &Bindings,
    queues: &Bindings,
    platform: &Platform,
    p: &mut Problems,
) -> Vec<Pool> {
    if platform.pool_size != PoolSize::WholeLessReserves {
        return pools;
    }
    let cell = u64::from(platform.cell_bytes);
    let reserve = |b: &Bindings| -> (u64, usize) {
        let held: Vec<u64> = b
            .iter()
            .flatten()
            .flatten()
            .map(|x| x.min.div_ceil(cell) * cell)
            .collect();
        (held.iter().sum(), held.iter().filter(|&&m| m > 0).count())
    };
    let ((pg_bytes, pg_n), (q_bytes, q_n)) = (reserve(pgs), reserve(queues));
    let slices = u64::from(platform.slices.map_or(1, |s| s.count.max(1)));
    let headroom: u64 = pools.iter().filter(|x| x.ingress).map(|x| x.xoff).sum();
    let taken = headroom + pg_bytes + slices * q_bytes;
    for pool in &mut pools {
        let at = format!("BUFFER_POOL|{}|size", pool.name);
        if pool.size <= taken {
            p.error(
                Origin::new("BUFFER_POOL", &pool.name, "size"),
                format!(
                    "{} B: on {} it holds the shared headroom pool ({headroom} B) and the reserves                      ({pg_bytes} B of PGs, {slices} × {q_bytes} B of queues), {taken} B: nothing is left to share",
                    pool.size, platform.name
                ),
            );
            continue;
        }
        pool.size_from = Some(format!(
            "{at} {} − {headroom} (xoff) − {pg_bytes} ({pg_n} PG reserves) − {slices} × {q_bytes} \
             ({q_n} queue reserves, kept in each slice): on {} size is the whole service pool",
            pool.size, platform.name
        ));
        pool.size -= taken;
    }
    pools
}

/// The fields of BUFFER_PROFILE.
pub(super) const PROFILE_FIELDS: &[&str] = &[
    "pool",
    "size",
    "dynamic_th",
    "static_th",
    "xon",
    "xoff",
    "xon_offset",
    "packet_discard_action",
    "headroom_type",
];

/// A profile's pool, size and limit.
pub(super) fn read_profile(db: &ConfigDb, name: &str, pools: &[Pool], p: &mut Problems) -> Option<(Fields, Buf)> {
    let f = db.entry("BUFFER_PROFILE", name)?;
    p.known("BUFFER_PROFILE", name, f, PROFILE_FIELDS);
    let at = |field: &str| Origin::new("BUFFER_PROFILE", name, field);
    let pool = match f.get("pool").map(|v| reference(v, "BUFFER_POOL")) {
        Some(Ok(pool)) if pools.iter().any(|x| x.name == pool) => pool,
        Some(Ok(pool)) => {
            p.error(at("pool"), format!("BUFFER_POOL|{pool} is not defined"));
            return None;
        }
        Some(Err(e)) => {
            p.error(at("pool"), e);
            return None;
        }
        None => {
            p.error(at("pool"), "missing");
            return None;
        }
    };
    let limit = match (f.contains_key("dynamic_th"), f.contains_key("static_th")) {
        (true, true) => {
            p.error(at("static_th"), "a profile gives dynamic_th or static_th, not both");
            return None;
        }
        (true, false) => {
            let th = int(p, "BUFFER_PROFILE", name, f, "dynamic_th")?;
            if !(-8..=7).contains(&th) {
                p.error(at("dynamic_th"), format!("{th} is outside -8..=7"));
                return None;
            }
            match platform::alpha(th) {
                None => Limit::Unlimited,
                Some(_) => Limit::DynamicTh(th),
            }
        }
        (false, true) => match bytes(p, "BUFFER_PROFILE", name, f, "static_th")? {
            // SAI: a static threshold of 0 means no limit.
            0 => Limit::Unlimited,
            b => Limit::Static(b),
        },
        (false, false) => {
            p.error(at("dynamic_th"), "missing: a profile gives dynamic_th or static_th");
            return None;
        }
    };
    if let Some(action) = f.get("packet_discard_action") {
        if action != "drop" {
            p.error(
                at("packet_discard_action"),
                format!("{action:?}: rocesw only drops (no trimming)"),
            );
        }
    }
    let min = bytes(p, "BUFFER_PROFILE", name, f, "size").unwrap_or(0);
    let origin = format!("BUFFER_PROFILE|{name}");
    let from = Derivation {
        min: if f.contains_key("size") {
            format!("{origin}|size")
        } else {
            format!("{origin} has no size: 0")
        },
        ..Derivation::default()
    };
    Some((
        f.clone(),
        Buf {
            pool,
            min,
            limit,
            headroom: None,
            headroom_note: None,
            xon: None,
            xon_offset: None,
            origin,
            source: Source::Profile(name.to_string()),
            from,
        },
    ))
}

#[allow(clippy::too_many_arguments)]
pub(super) fn read_buffers(
    db: &ConfigDb,
    ports: &[Port],
    pools: &[Pool],
    lossless_pgs: &mut [BTreeSet<u8>],
    platform: &Platform,
    lookup: Option<&(Vec<LookupRow>, String)>,
    p: &mut Problems,
) -> (Bindings, Bindings) {
    let mut pgs: Bindings = ports.iter().map(|_| Default::default()).collect();
    let mut queues: Bindings = ports.iter().map(|_| Default::default()).collect();
    let index = super::port_index(ports);
    let pattern = traffic_pattern(db, p);
    for (table, bindings, ingress) in [("BUFFER_PG", &mut pgs, true), ("BUFFER_QUEUE", &mut queues, false)] {
        for (key, f) in db.table(table) {
            p.known(table, key, f, &["profile"]);
            let at = Origin::new(table, key, "profile");
            let (names, indices) = match expand_key(key, 7) {
                Ok(k) => k,
                Err(e) => {
                    p.error(Origin::new(table, key, ""), e);
                    continue;
                }
            };
            if indices.is_empty() {
                p.error(Origin::new(table, key, ""), "the key names no index (PORT|3-4)");
                continue;
            }
            let Some(value) = f.get("profile") else {
                p.error(&at, "missing");
                continue;
            };
            for name in &names {
                let Some(&pi) = index.get(name.as_str()) else {
                    p.error(
                        Origin::new(table, key, ""),
                        format!("{name} is not a port of the PORT table"),
                    );
                    continue;
                };
                let port = &ports[pi];
                for &i in &indices {
                    let lossless = ingress && lossless_pgs[pi].contains(&i);
                    let buf = if value == "NULL" {
                        // The dynamic model: headroom computed by the switch's own formula.
                        if !lossless {
                            p.error(
                                &at,
                                format!("NULL (computed headroom) on PG {i}, which no PFC priority maps to"),
                            );
                            continue;
                        }
                        dynamic_pg(db, port, pools, platform, pattern, &at, p)
                    } else {
                        let name = match reference(value, "BUFFER_PROFILE") {
                            Ok(n) => n,
                            Err(e) => {
                                p.error(&at, e);
                                continue;
                            }
                        };
                        let Some((fields, mut buf)) = read_profile(db, &name, pools, p) else {
                            if db.entry("BUFFER_PROFILE", &name).is_none() {
                                p.error(&at, format!("BUFFER_PROFILE|{name} is not defined"));
                            }
                            continue;
                        };
                        let pool_ingress = pools.iter().find(|x| x.name == buf.pool).is_some_and(|x| x.ingress);
                        if pool_ingress != ingress {
                            p.error(
                                &at,
                                format!(
                                    "BUFFER_PROFILE|{name} draws on {} pool {}, where an {} pool is expected",
                                    if pool_ingress { "ingress" } else { "egress" },
                                    buf.pool,
                                    if ingress { "ingress" } else { "egress" }
                                ),
                            );
                            continue;
                        }
                        let has_xoff = fields.contains_key("xoff");
                        if ingress && has_xoff != lossless {
                            p.error(
                                &at,
                                if lossless {
                                    format!("PG {i} is lossless (pfc_enable), but BUFFER_PROFILE|{name} has no xoff")
                                } else {
                                    format!("BUFFER_PROFILE|{name} has an xoff (lossless), but no PFC priority of {} (its pfc_enable) maps to PG {i}", port.name)
                                },
                            );
                            continue;
                        }
                        if lossless {
                            lossless_pg(&fields, &mut buf, &name, pools, platform, p);
                        }
                        Some(buf)
                    };
                    let Some(buf) = buf else { continue };
                    let slot = &mut bindings[pi][usize::from(i)];
                    if let Some(prev) = slot {
                        p.error(
                            &at,
                            format!(
                                "{name} {} {i} is bound twice (also by {})",
                                if ingress { "PG" } else { "queue" },
                                prev.origin
                            ),
                        );
                        continue;
                    }
                    *slot = Some(buf);
                }
            }
        }
    }
    // Lossless PGs the file gives no profile for: the traditional model's buffermgrd makes
    // them from the lookup table by speed and cable.
    let mut no_row: Vec<String> = Vec::new();
    for (pi, port) in ports.iter().enumerate() {
        for g in lossless_pgs[pi].clone() {
            if pgs[pi][usize::from(g)].is_some() {
                continue;
            }
            match lookup_pg(port, lookup, pools, platform, p) {
                Lookup::Made(buf) => pgs[pi][usize::from(g)] = Some(*buf),
                Lookup::NoRow(what) => {
                    // buffermgrd makes no PG for a speed and cable its table lacks: the PG
                    // stays lossy on that port.
                    lossless_pgs[pi].remove(&g);
                    if !no_row.contains(&what) {
                        no_row.push(what);
                    }
                }
                Lookup::NoTable => p.error(
                    Origin::new("BUFFER_PG", &format!("{}|{g}", port.name), "profile"),
                    format!(
                        "missing: PG {g} is lossless on {} (pfc_enable); give it a profile, or --pg-lookup pg_profile_lookup.ini to make one as buffermgrd would",
                        port.name
                    ),
                ),
            }
        }
    }
    if let (false, Some((_, file))) = (no_row.is_empty(), lookup) {
        p.note(format!(
            "{file} has no row for {}: no lossless PG there, as buffermgrd makes none (those PGs are lossy)",
            no_row.join(", ")
        ));
    }
    (pgs, queues)
}

/// XON, XOFF and the reserve of a lossless profile, by the platform's reading of `size`.
pub(super) fn lossless_pg(
    f: &Fields,
    buf: &mut Buf,
    name: &str,
    pools: &[Pool],
    platform: &Platform,
    p: &mut Problems,
) {
    let xoff = bytes(p, "BUFFER_PROFILE", name, f, "xoff").unwrap_or(0);
    let xon = bytes(p, "BUFFER_PROFILE", name, f, "xon");
    let xon_offset = bytes(p, "BUFFER_PROFILE", name, f, "xon_offset");
    let shp = pools.iter().any(|x| x.name == buf.pool && x.xoff > 0);
    let pl = platform.name;
    buf.from.headroom = buf.field("xoff");
    buf.from.xon_offset = if f.contains_key("xon_offset") {
        buf.field("xon_offset")
    } else {
        format!("{} has no xon_offset: 0 (the default)", buf.origin)
    };
    match platform.size_meaning {
        SizeMeaning::XonPlusXoff => {
            if shp {
                // size = xon; the xoff comes from the shared headroom pool.
                buf.from.min = format!(
                    "{} (on {pl} size is xon; the xoff is in the shared headroom pool)",
                    buf.field("size")
                );
            } else if buf.min < xoff {
                p.error(
                    Origin::new("BUFFER_PROFILE", name, "size"),
                    format!(
                        "{} is below xoff ({xoff}): on {} size is xon + xoff",
                        buf.min, platform.name
                    ),
                );
            } else {
                buf.min -= xoff;
                buf.from.min = format!(
                    "size − xoff: {} − {} (on {pl} size is xon + xoff)",
                    buf.field("size"),
                    buf.field("xoff")
                );
            }
            // Spectrum's XON point is its XOFF point (xon and xoff thresholds coincide).
            buf.xon_offset = Some(xon_offset.unwrap_or(0));
            buf.xon = None;
            if !f.contains_key("xon_offset") {
                buf.from.xon_offset = format!("{} has no xon_offset: 0, XON at the XOFF point as on {pl}", buf.origin);
            }
        }
        SizeMeaning::MinBesideXoff => {
            buf.xon = xon;
            buf.xon_offset = Some(xon_offset.unwrap_or(0));
            buf.from.xon = if f.contains_key("xon") {
                buf.field("xon")
            } else {
                format!("{} has no xon: 0, the offset alone decides", buf.origin)
            };
        }
    }
    let (headroom, note) = platform.usable_headroom(xoff, shp);
    buf.headroom = Some(headroom);
    buf.headroom_note = note;
}

pub(super) fn traffic_pattern(db: &ConfigDb, p: &mut Problems) -> TrafficPattern {
    let mut t = TrafficPattern::default();
    if let Some(f) = db.entry("LOSSLESS_TRAFFIC_PATTERN", "AZURE") {
        p.known(
            "LOSSLESS_TRAFFIC_PATTERN",
            "AZURE",
            f,
            &["mtu", "small_packet_percentage"],
        );
        if let Some(m) = int(p, "LOSSLESS_TRAFFIC_PATTERN", "AZURE", f, "mtu") {
            t.mtu = m.clamp(64, 9216) as f64;
        }
        if let Some(s) = int(p, "LOSSLESS_TRAFFIC_PATTERN", "AZURE", f, "small_packet_percentage") {
            t.small_packet_percentage = s.clamp(0, 100) as f64;
        }
    }
    t
}

/// The dynamic model's lossless PG: headroom from the platform's formula.
pub(super) fn dynamic_pg(
    db: &ConfigDb,
    port: &Port,
    pools: &[Pool],
    platform: &Platform,
    pattern: TrafficPattern,
    at: &Origin,
    p: &mut Problems,
) -> Option<Buf> {
    let Some(asic) = platform.headroom else {
        p.error(
            at,
            format!(
                "NULL (computed headroom): SONiC publishes no headroom formula for {}; give the PG a profile",
                platform.name
            ),
        );
        return None;
    };
    let params = db.entry("DEFAULT_LOSSLESS_BUFFER_PARAMETER", "AZURE");
    if let Some(f) = params {
        p.known(
            "DEFAULT_LOSSLESS_BUFFER_PARAMETER",
            "AZURE",
            f,
            &["default_dynamic_th", "over_subscribe_ratio"],
        );
    }
    let th = params
        .and_then(|f| int(p, "DEFAULT_LOSSLESS_BUFFER_PARAMETER", "AZURE", f, "default_dynamic_th"))
        .unwrap_or(0);
    let ratio = params
        .and_then(|f| {
            int(
                p,
                "DEFAULT_LOSSLESS_BUFFER_PARAMETER",
                "AZURE",
                f,
                "over_subscribe_ratio",
            )
        })
        .unwrap_or(0);
    let pool = pools
        .iter()
        .find(|x| x.ingress && x.name == "ingress_lossless_pool")
        .or_else(|| pools.iter().find(|x| x.ingress))?;
    let shp = pool.xoff > 0 || ratio > 0;
    let Some((_, cable)) = port.cable.clone() else {
        p.error(
            at,
            format!(
                "NULL (computed headroom) needs {}'s cable length (CABLE_LENGTH)",
                port.name
            ),
        );
        return None;
    };
    let line = headroom::PortLine {
        speed_mbps: port.speed_mbps,
        cable_m: cable,
        mtu: f64::from(port.mtu),
        lanes: port.lanes,
    };
    let c = headroom::nvidia(&asic, platform.cell_bytes, line, pattern, shp);
    let from = Derivation {
        min: if shp {
            "the formula's size (the xoff is in the shared headroom pool)".to_string()
        } else {
            "the formula's size − xoff".to_string()
        },
        headroom: "the formula's xoff".to_string(),
        xon: String::new(),
        xon_offset: "0: XON at the XOFF point, as the formula assumes".to_string(),
    };
    Some(Buf {
        pool: pool.name.clone(),
        min: if shp { c.size } else { c.size - c.xoff },
        limit: if th >= 7 {
            Limit::Unlimited
        } else {
            Limit::DynamicTh(th)
        },
        headroom: Some(platform.usable_headroom(c.xoff, shp).0),
        headroom_note: platform.usable_headroom(c.xoff, shp).1,
        xon: None,
        xon_offset: Some(0),
        origin: format!(
            "{at} = NULL: {}'s headroom formula for {} Mb/s, {cable} m, MTU {} (xon {}, xoff {}, size {})",
            platform.name, port.speed_mbps, port.mtu, c.xon, c.xoff, c.size
        ),
        source: Source::Formula,
        from,
    })
}

/// What the lookup table gives a lossless PG with no profile.
pub(super) enum Lookup {
    /// The PG, made as buffermgrd makes it.
    Made(Box<Buf>),
    /// The table has no row for the port's speed and cable (which, in words).
    NoRow(String),
    /// No table, or the port has no cable length to look up.
    NoTable,
}

/// The traditional model's lossless PG from a `pg_profile_lookup.ini` row.
pub(super) fn lookup_pg(
    port: &Port,
    lookup: Option<&(Vec<LookupRow>, String)>,
    pools: &[Pool],
    platform: &Platform,
    p: &mut Problems,
) -> Lookup {
    let Some((rows, file)) = lookup else {
        return Lookup::NoTable;
    };
    let Some(cable) = port.cable.as_ref().map(|(_, m)| format!("{}m", *m as u64)) else {
        return Lookup::NoTable;
    };
    let Some(row) = rows
        .iter()
        .find(|r| r.speed_mbps == port.speed_mbps && r.cable == cable)
    else {
        return Lookup::NoRow(format!("{} ({} Mb/s, {cable})", port.name, port.speed_mbps));
    };
    let Some(pool) = pools
        .iter()
        .find(|x| x.ingress && x.name == "ingress_lossless_pool")
        .or_else(|| pools.iter().find(|x| x.ingress))
    else {
        return Lookup::NoTable;
    };
    let mut f = Fields::new();
    f.insert("size".into(), row.size.to_string());
    f.insert("xon".into(), row.xon.to_string());
    f.insert("xoff".into(), row.xoff.to_string());
    if let Some(o) = row.xon_offset {
        f.insert("xon_offset".into(), o.to_string());
    }
    let name = format!("pg_lossless_{}_{cable}_profile", row.speed_mbps);
    let mut buf = Buf {
        pool: pool.name.clone(),
        min: row.size,
        limit: if row.dynamic_th >= 7 {
            Limit::Unlimited
        } else {
            Limit::DynamicTh(row.dynamic_th)
        },
        headroom: None,
        headroom_note: None,
        xon: None,
        xon_offset: None,
        origin: format!("{file}:{} ({} {cable})", row.line, row.speed_mbps),
        // The profile buffermgrd makes of the row (buffermgr.cpp: pool, xon, xoff, size,
        // dynamic_th, and xon_offset where the row has one): a field of it is the row's.
        source: Source::Lookup {
            profile: name.clone(),
            made: {
                let mut made = f.clone();
                made.insert("pool".into(), pool.name.clone());
                made.insert("dynamic_th".into(), row.dynamic_th.to_string());
                made
            },
        },
        from: Derivation::default(),
    };
    buf.from.min = buf.field("size");
    lossless_pg(&f, &mut buf, &name, pools, platform, p);
    Lookup::Made(Box::new(buf))
}

/// BUFFER_PORT_*_PROFILE_LIST: a port-level quota per pool, which rocesw does not model; said
/// when it would limit anything (a profile below dynamic_th 7).
pub(super) fn port_lists(db: &ConfigDb, p: &mut Problems) {
    for table in ["BUFFER_PORT_INGRESS_PROFILE_LIST", "BUFFER_PORT_EGRESS_PROFILE_LIST"] {
        for (key, f) in db.table(table) {
            p.known(table, key, f, &["profile_list"]);
            let Some(list) = f.get("profile_list") else { continue };
            match references(list, "BUFFER_PROFILE") {
                Ok(names) => {
                    for n in names {
                        match db.entry("BUFFER_PROFILE", &n) {
                            None => p.error(Origin::new(table, key, "profile_list"), format!("BUFFER_PROFILE|{n} is not defined")),
                            Some(prof) if prof.get("dynamic_th").is_some_and(|t| t.trim() != "7") || prof.contains_key("static_th") => {
                                p.note(format!("{table}: port-level quotas (BUFFER_PROFILE|{n}) are not modelled; PG and queue limits apply"))
                            }
                            Some(_) => {}
                        }
                    }
                }
                Err(e) => p.error(Origin::new(table, key, "profile_list"), e),
            }
        }
    }
}
