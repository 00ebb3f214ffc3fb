//! WRED_PROFILE, SCHEDULER and QUEUE (qosorch's half) and PFC_WD (pfcwdorch's).

use super::*;

/// WRED_PROFILE tables as `[ecn.NAME]`: the green thresholds (rocesw has no colours: every
/// frame is green, as on a switch without policers).
pub(super) fn read_wred(db: &ConfigDb, p: &mut Problems) -> BTreeMap<String, Wred> {
    let mut out = BTreeMap::new();
    const FIELDS: &[&str] = &[
        "green_min_threshold",
        "green_max_threshold",
        "green_drop_probability",
        "yellow_min_threshold",
        "yellow_max_threshold",
        "yellow_drop_probability",
        "red_min_threshold",
        "red_max_threshold",
        "red_drop_probability",
        "wred_green_enable",
        "wred_yellow_enable",
        "wred_red_enable",
        "ecn",
    ];
    for (name, f) in db.table("WRED_PROFILE") {
        p.known("WRED_PROFILE", name, f, FIELDS);
        let at = |field: &str| Origin::new("WRED_PROFILE", name, field);
        let ecn = f.get("ecn").map_or("ecn_none", String::as_str);
        let marks_green = match ecn {
            "ecn_all" | "ecn_green" | "ecn_green_yellow" | "ecn_green_red" => true,
            "ecn_none" | "ecn_yellow" | "ecn_red" | "ecn_yellow_red" => false,
            other => {
                p.error(at("ecn"), format!("{other:?} is not an ECN mode"));
                continue;
            }
        };
        let green_enable = match f.get("wred_green_enable").map(String::as_str) {
            None | Some("false") => false,
            Some("true") => true,
            Some(v) => {
                p.error(at("wred_green_enable"), format!("{v:?} is not true or false"));
                continue;
            }
        };
        if !marks_green {
            p.error(
                at("ecn"),
                format!("{ecn}: green ECN-capable frames would be dropped, not marked; rocesw's WRED marks them (ecn_all or ecn_green)"),
            );
            continue;
        }
        let (Some(kmin), Some(kmax)) = (
            bytes(p, "WRED_PROFILE", name, f, "green_min_threshold"),
            bytes(p, "WRED_PROFILE", name, f, "green_max_threshold"),
        ) else {
            if !f.contains_key("green_min_threshold") || !f.contains_key("green_max_threshold") {
                p.error(at("green_min_threshold"), "the green thresholds are needed for marking");
            }
            continue;
        };
        if kmin > kmax {
            p.error(
                at("green_min_threshold"),
                format!("{kmin} is above green_max_threshold ({kmax})"),
            );
            continue;
        }
        let pmax = match int(p, "WRED_PROFILE", name, f, "green_drop_probability") {
            Some(v) if (0..=100).contains(&v) => v as u64,
            Some(v) => {
                p.error(at("green_drop_probability"), format!("{v} is not a percentage"));
                continue;
            }
            None => 100,
        };
        out.insert(
            name.to_string(),
            Wred {
                kmin,
                kmax,
                pmax_percent: pmax,
                drop_non_ect: green_enable,
            },
        );
    }
    out
}

/// QUEUE|port|n: scheduler and WRED per queue.
pub(super) fn read_queues(
    db: &ConfigDb,
    ports: &[Port],
    wred: &BTreeMap<String, Wred>,
    p: &mut Problems,
) -> Vec<[Option<Sched>; 8]> {
    let mut out: Vec<[Option<Sched>; 8]> = ports.iter().map(|_| Default::default()).collect();
    let index = super::port_index(ports);
    for (name, f) in db.table("SCHEDULER") {
        p.known(
            "SCHEDULER",
            name,
            f,
            &["type", "weight", "meter_type", "cir", "cbs", "pir", "pbs", "priority"],
        );
    }
    for (key, f) in db.table("QUEUE") {
        p.known("QUEUE", key, f, &["scheduler", "wred_profile"]);
        let (names, indices) = match expand_key(key, 7) {
            Ok(k) => k,
            Err(e) => {
                p.error(Origin::new("QUEUE", key, ""), e);
                continue;
            }
        };
        let mut sched = Sched {
            strict: false,
            weight: 1,
            shaper: None,
            ecn: None,
            origin: "no scheduler: WDRR weight 1".to_string(),
        };
        if let Some(v) = f.get("scheduler") {
            let at = Origin::new("QUEUE", key, "scheduler");
            let name = match reference(v, "SCHEDULER") {
                Ok(n) => n,
                Err(e) => {
                    p.error(at, e);
                    continue;
                }
            };
            let Some(s) = db.entry("SCHEDULER", &name) else {
                p.error(at, format!("SCHEDULER|{name} is not defined"));
                continue;
            };
            let sat = |field: &str| Origin::new("SCHEDULER", &name, field);
            match s.get("type").map_or("WRR", String::as_str) {
                "STRICT" => sched.strict = true,
                "DWRR" | "WRR" => {
                    sched.weight = match int(p, "SCHEDULER", &name, s, "weight") {
                        Some(w) if (1..=1000).contains(&w) => w as u32,
                        Some(w) => {
                            p.error(sat("weight"), format!("{w} is outside 1..=1000"));
                            continue;
                        }
                        None => 1,
                    };
                    if s.get("type").map(String::as_str) == Some("WRR") {
                        p.note(format!("SCHEDULER|{name}|type: WRR runs as rocesw's byte-weighted DRR"));
                    }
                }
                t => {
                    p.error(sat("type"), format!("{t:?} is not STRICT, DWRR or WRR"));
                    continue;
                }
            }
            if s.get("meter_type").is_some_and(|m| m != "bytes") {
                p.error(sat("meter_type"), "only byte meters are modelled");
                continue;
            }
            if s.contains_key("cir") || s.contains_key("cbs") {
                p.note(format!(
                    "SCHEDULER|{name}|cir: a minimum bandwidth is not modelled, ignored"
                ));
            }
            if let Some(pir) = bytes(p, "SCHEDULER", &name, s, "pir") {
                let pbs = bytes(p, "SCHEDULER", &name, s, "pbs").unwrap_or(0).max(9216);
                // pir is bytes per second.
                sched.shaper = Some((pir.saturating_mul(8), pbs));
            }
            // The scheduler's own name, not the QUEUE key: ports that share a scheduler then
            // share one global [queue.N] table.
            sched.origin = format!("SCHEDULER|{name}");
        }
        if let Some(v) = f.get("wred_profile") {
            let at = Origin::new("QUEUE", key, "wred_profile");
            match reference(v, "WRED_PROFILE") {
                Ok(n) if wred.contains_key(&n) => sched.ecn = Some(n),
                Ok(n) if db.entry("WRED_PROFILE", &n).is_some() => {} // its own error was given
                Ok(n) => p.error(at, format!("WRED_PROFILE|{n} is not defined")),
                Err(e) => p.error(at, e),
            }
        }
        for name in &names {
            let Some(&pi) = index.get(name.as_str()) else {
                p.error(
                    Origin::new("QUEUE", key, ""),
                    format!("{name} is not a port of the PORT table"),
                );
                continue;
            };
            for &i in &indices {
                let slot = &mut out[pi][usize::from(i)];
                if let Some(prev) = slot {
                    p.error(
                        Origin::new("QUEUE", key, ""),
                        format!("{name} queue {i} is configured twice (also with {})", prev.origin),
                    );
                }
                *slot = Some(sched.clone());
            }
        }
    }
    out
}

pub(super) fn read_watchdog(db: &ConfigDb, ports: &[Port], p: &mut Problems) -> Watchdog {
    let mut w = Watchdog::default();
    for (key, f) in db.table("PFC_WD") {
        if key.eq_ignore_ascii_case("GLOBAL") {
            p.known("PFC_WD", key, f, &["POLL_INTERVAL", "BIG_RED_SWITCH"]);
            if let Some(ms) = int(p, "PFC_WD", key, f, "POLL_INTERVAL") {
                if (1..=60_000).contains(&ms) {
                    w.poll_ms = Some(ms as u64);
                } else {
                    p.error(
                        Origin::new("PFC_WD", key, "POLL_INTERVAL"),
                        format!("{ms} ms is outside 1..=60000"),
                    );
                }
            }
            if f.get("BIG_RED_SWITCH").is_some_and(|v| v == "enable") {
                p.error(
                    Origin::new("PFC_WD", key, "BIG_RED_SWITCH"),
                    "enable: the big red switch is not modelled",
                );
            }
            continue;
        }
        p.known(
            "PFC_WD",
            key,
            f,
            &["action", "detection_time", "restoration_time", "pfc_stat_history"],
        );
        for name in key.split(',') {
            if !ports.iter().any(|x| x.name == name) {
                p.error(
                    Origin::new("PFC_WD", key, ""),
                    format!("{name} is not a port of the PORT table"),
                );
            }
        }
        let action = f.get("action").map_or("drop", String::as_str).to_string();
        if !["drop", "forward", "alert"].contains(&action.as_str()) {
            p.error(
                Origin::new("PFC_WD", key, "action"),
                format!("{action:?} is not drop, forward or alert"),
            );
            continue;
        }
        let ms = |field: &str, p: &mut Problems| match int(p, "PFC_WD", key, f, field) {
            Some(v) if (1..=60_000).contains(&v) => Some(v as u64),
            Some(v) => {
                p.error(
                    Origin::new("PFC_WD", key, field),
                    format!("{v} ms is outside 1..=60000"),
                );
                None
            }
            None => {
                if !f.contains_key(field) {
                    p.error(Origin::new("PFC_WD", key, field), "missing");
                }
                None
            }
        };
        let (Some(d), Some(r)) = (ms("detection_time", p), ms("restoration_time", p)) else {
            continue;
        };
        let this = (d, r, action, format!("PFC_WD|{key}"));
        match &w.on {
            Some(first) if (first.0, first.1, &first.2) != (this.0, this.1, &this.2) => p.error(
                Origin::new("PFC_WD", key, ""),
                format!(
                    "differs from {}: rocesw has one watchdog setting for the switch",
                    first.3
                ),
            ),
            Some(_) => {}
            None => w.on = Some(this),
        }
    }
    w
}
