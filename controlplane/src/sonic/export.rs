//! Settings back to the switch: what a rocesw config changed of an imported config_db.json
//! (each PG's and queue's buffer profile: thresholds, reserves, a lossless PG's xoff and xon;
//! the WRED profiles' green thresholds; the schedulers' kind and weight; the DSCP → TC, TC →
//! queue and TC → PG maps), written where the import read them (the same origins; an entry the
//! file gives both nested and flat patched in both, as the import reads both) and given as an
//! RFC 6902 JSON Patch, what SONiC's `config apply-patch` takes, plus a readable diff. A PG
//! whose profile buffermgrd made from `pg_profile_lookup.ini` is written as an explicit
//! BUFFER_PROFILE and BUFFER_PG entry once a change touches it. Anything else that changed is
//! refused by name. The inverse of the import on the same origins: a patch touches only what
//! changed, and importing the patched file gives the config the patch came from.
//!
//! The target may be a lab's running config (`rocesw lab up --config config_db.json`): ports
//! are matched by name, and a file port the target lacks (a lab of 4 hosts on a 32-port file)
//! is left as the file has it, though a profile it shares with a port that changed changes for
//! it too (said in a note). A port's speed and MTU are the PORT table, the switch's hardware,
//! which no QoS patch carries: a lab runs its veths at 1G and may shrink the MTU, so a
//! difference there is said in a note, not refused.

use super::db::{expand_key, reference, ConfigDb};
use super::import::Imported;
use super::platform::SizeMeaning;
use super::{import_text, ImportOptions};
use crate::model::{Config, PortConfig, SchedMode, Threshold};
use serde_json::Value;
use std::collections::BTreeMap;

/// What export produces.
#[derive(Debug, Clone)]
pub struct Export {
    /// The RFC 6902 operations (an array), empty when nothing changed.
    pub patch: Value,
    /// One line per changed field: `TABLE|key|field: old → new`.
    pub changes: Vec<String>,
    /// What the patch leaves out or reaches beyond the target, one line each: ports the target
    /// lacks (left as the file has them; a changed profile they share changes for them too),
    /// a port speed or MTU the target runs at and the file keeps.
    pub notes: Vec<String>,
    /// The file with the patch applied, pretty-printed.
    pub patched: String,
}

/// The changes that take the switch of `original` (a config_db.json's text) to `target`:
/// every problem at once (a profile two ports share set two ways, a value SONiC cannot say,
/// a change no table of the file holds, each refused by name).
pub fn export(original: &str, opts: &ImportOptions, target: &Config) -> Result<Export, Vec<String>> {
    let imported = import_text(original, opts)?;
    let base = crate::load_str(&imported.toml)
        .map_err(|e| e.problems().to_vec())?
        .config;
    let db = ConfigDb::parse(original, |t: &str| {
        t.starts_with("BUFFER_") || ["QUEUE", "SCHEDULER", "PORT_QOS_MAP"].contains(&t)
    })
    .map_err(|e| vec![e.to_string()])?;
    let mut x = Exporter {
        want: BTreeMap::new(),
        errors: Vec::new(),
        covered: base.clone(),
        made: BTreeMap::new(),
        present: vec![false; base.ports.len()],
        absent_users: BTreeMap::new(),
    };
    let (target, mut notes) = x.on_the_files_ports(&base, target)?;
    let target = &target;
    x.pgs(&imported, &base, target);
    x.queue_profiles(&db, &base, target);
    x.wred(&imported, &base, target);
    x.schedulers(&db, &base, target);
    x.maps(&db, &base, target);
    x.unexpressed(target);
    if !x.errors.is_empty() {
        return Err(x.errors);
    }
    // A changed profile that ports outside the target share changes for them as well.
    for ((table, key), users) in &x.absent_users {
        let changed = x
            .want
            .get(&(table.clone(), key.clone()))
            .is_some_and(|f| f.values().any(|w| w.2));
        if changed {
            notes.push(format!(
                "{table}|{key} changes for {} as well, which the target config does not have (they share it)",
                users.iter().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    let original_json: Value = serde_json::from_str(original).map_err(|e| vec![e.to_string()])?;
    let mut patched = original_json.clone();
    let mut changes = Vec::new();
    // Profiles made from lookup rows that a change touches are written out whole, with the
    // BUFFER_PG entries buffermgrd would have made for them.
    for ((table, key), fields) in &x.want {
        let changed = fields.values().any(|w| w.2);
        if !changed || has_entry(&patched, table, key) {
            continue;
        }
        let Some((made, bindings)) = x.made.get(key).filter(|_| table == "BUFFER_PROFILE") else {
            return Err(vec![format!("{table}|{key}: not found in the file")]);
        };
        insert_entry(&mut patched, table, key, made.clone());
        changes.push(format!(
            "{table}|{key}: added (buffermgrd made it from pg_profile_lookup.ini; now explicit)"
        ));
        for b in bindings {
            let mut f = serde_json::Map::new();
            f.insert("profile".into(), Value::String(key.clone()));
            if !has_entry(&patched, "BUFFER_PG", b) {
                insert_entry(&mut patched, "BUFFER_PG", b, f);
                changes.push(format!("BUFFER_PG|{b}: added (profile {key})"));
            }
        }
    }
    for ((table, key), fields) in x.want {
        for (field, (value, _, _)) in fields.into_iter().filter(|(_, w)| w.2) {
            let mut places = entries_mut(&mut patched, &table, &key);
            if places.is_empty() {
                return Err(vec![format!("{table}|{key}: not found in the file")]);
            }
            // Every place the file gives the field (nested and flat alike: the import reads
            // both and refuses a file where they disagree); a field given nowhere goes into
            // the first place (the nested table, where `config load` reads it).
            let holding: Vec<usize> = (0..places.len()).filter(|&i| places[i].contains_key(&field)).collect();
            let targets = if holding.is_empty() { vec![0] } else { holding };
            for i in targets {
                let entry = &mut places[i];
                let old = entry
                    .get(&field)
                    .and_then(Value::as_str)
                    .unwrap_or("(none)")
                    .to_string();
                if old != value {
                    changes.push(format!("{table}|{key}|{field}: {old} → {value}"));
                    entry.insert(field.clone(), Value::String(value.clone()));
                }
                // A profile gives one kind of threshold: the other goes.
                let other = match field.as_str() {
                    "dynamic_th" => Some("static_th"),
                    "static_th" => Some("dynamic_th"),
                    _ => None,
                };
                if let Some(o) = other.filter(|o| entry.contains_key(*o)) {
                    changes.push(format!("{table}|{key}|{o}: removed"));
                    entry.remove(o);
                }
            }
        }
    }
    changes.dedup();
    let patch = json_patch::diff(&original_json, &patched);
    Ok(Export {
        patch: serde_json::to_value(patch).map_err(|e| vec![e.to_string()])?,
        changes,
        notes,
        patched: serde_json::to_string_pretty(&patched).map_err(|e| vec![e.to_string()])?,
    })
}

/// What one export collects: the fields each entry must get, the problems, and `covered`:
/// the file's config with every value export can write taken from the target, so that what
/// still differs from the target afterwards is what the file cannot say.
struct Exporter {
    want: Want,
    errors: Vec<String>,
    covered: Config,
    /// Profiles made from lookup rows: name → (its fields, the BUFFER_PG keys bound to it).
    made: BTreeMap<String, (serde_json::Map<String, Value>, Vec<String>)>,
    /// Per port of the file: whether the target has it.
    present: Vec<bool>,
    /// Entries the file's ports outside the target use: (table, key) → those ports.
    absent_users: BTreeMap<(String, String), std::collections::BTreeSet<String>>,
}

/// The index of the port named `name`.
fn port_index(c: &Config, name: &str) -> Option<usize> {
    c.ports.iter().position(|p| p.name.as_deref() == Some(name))
}

impl Exporter {
    /// `target` on the file's ports: every port of the file, the target's where it has one (by
    /// name), the file's own elsewhere; each port's speed and MTU the file's, a difference said
    /// in a note. A target port the file does not have (added or renamed) is refused.
    fn on_the_files_ports(&mut self, base: &Config, target: &Config) -> Result<(Config, Vec<String>), Vec<String>> {
        let mut full = target.clone();
        full.ports = base.ports.clone();
        let mut notes = Vec::new();
        let mut errors = Vec::new();
        // (what, the target's value, the file's) → the ports: one note per kind of difference.
        let mut hardware: BTreeMap<(&str, String, String), Vec<String>> = BTreeMap::new();
        for t in &target.ports {
            let label = t.name.clone().unwrap_or_else(|| format!("port {}", t.id));
            let Some(pi) = t.name.as_deref().and_then(|n| port_index(base, n)) else {
                errors.push(format!(
                    "the target config's {label} is not a port of the file (a port added or renamed): the PORT table is not exported"
                ));
                continue;
            };
            if self.present[pi] {
                errors.push(format!("the target config has {label} twice"));
                continue;
            }
            self.present[pi] = true;
            let file = &base.ports[pi];
            let mut port = t.clone();
            if port.speed_bps != file.speed_bps {
                let key = (
                    "speed",
                    crate::units::format_rate(port.speed_bps),
                    crate::units::format_rate(file.speed_bps),
                );
                hardware.entry(key).or_default().push(label.clone());
                port.speed_bps = file.speed_bps;
            }
            if port.max_frame_bytes != file.max_frame_bytes {
                let l2 = crate::headroom::L2_OVERHEAD_BYTES;
                let key = (
                    "mtu",
                    port.max_frame_bytes.saturating_sub(l2).to_string(),
                    file.max_frame_bytes.saturating_sub(l2).to_string(),
                );
                hardware.entry(key).or_default().push(label.clone());
                port.max_frame_bytes = file.max_frame_bytes;
            }
            full.ports[pi] = port;
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        for ((what, theirs, files), ports) in hardware {
            notes.push(format!(
                "{} {what} {theirs} in the target config, {files} in the file: not exported (PORT|…|{what} is the \
                 switch's hardware{})",
                ports.join(", "),
                if what == "speed" {
                    "; a value tuned at one speed may not suit another"
                } else {
                    ""
                }
            ));
        }
        // A port's FDB limit is an equal share of the table unless the config says otherwise,
        // so fewer ports give a larger default: not a change of the target's.
        let share = |c: &Config| (c.fdb.capacity / c.ports.len().max(1)).max(1);
        if target.fdb.port_limit == share(target) && base.fdb.port_limit == share(base) {
            full.fdb.port_limit = base.fdb.port_limit;
        }
        let absent: Vec<String> = base
            .ports
            .iter()
            .zip(&self.present)
            .filter(|(_, &p)| !p)
            .map(|(p, _)| p.name.clone().unwrap_or_else(|| format!("port {}", p.id)))
            .collect();
        if !absent.is_empty() {
            notes.insert(
                0,
                format!(
                    "{} of the file's {} ports are not in the target config (a lab of fewer hosts?): {}; left as the file has them",
                    absent.len(),
                    base.ports.len(),
                    absent.join(", ")
                ),
            );
        }
        Ok((full, notes))
    }

    /// Whether port `pi` of the file is in the target; if not, records that it uses
    /// `table|key` (a profile a change may reach) and the caller skips it.
    fn present_or_note(&mut self, pi: usize, table: &str, key: &str, port: &str) -> bool {
        if !self.present[pi] {
            self.absent_users
                .entry((table.to_string(), key.to_string()))
                .or_default()
                .insert(port.to_string());
        }
        self.present[pi]
    }

    #[allow(clippy::too_many_arguments)]
    fn ask(&mut self, table: &str, key: &str, field: &str, value: String, who: &str, changed: bool) {
        ask(
            &mut self.want,
            (table, key),
            field,
            value,
            who,
            changed,
            &mut self.errors,
        );
    }

    /// Each PG's profile: its threshold; a lossless one's xoff, size, xon, xon_offset.
    fn pgs(&mut self, imported: &Imported, base: &Config, target: &Config) {
        for (port, g, profile) in &imported.pg_profiles {
            let Some(pi) = port_index(base, port) else { continue };
            if !self.present_or_note(pi, "BUFFER_PROFILE", profile, port) {
                continue;
            }
            let g = usize::from(*g);
            let who = format!("{port} PG {g}");
            let (old, new) = (&base.ports[pi], &target.ports[pi]);
            if let Some(made) = imported.made_profiles.get(profile) {
                let e = self.made.entry(profile.clone()).or_insert_with(|| {
                    (
                        made.iter()
                            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                            .collect(),
                        Vec::new(),
                    )
                });
                let key = format!("{port}|{g}");
                if !e.1.contains(&key) {
                    e.1.push(key);
                }
            }
            let (o, n) = (&old.pgs[g], &new.pgs[g]);
            match threshold_fields(n.shared) {
                Ok((field, value)) => self.ask("BUFFER_PROFILE", profile, field, value, &who, o.shared != n.shared),
                Err(e) => self.errors.push(format!("{who}: {e}")),
            }
            self.covered.ports[pi].pgs[g].shared = n.shared;
            if !o.lossless {
                self.ask(
                    "BUFFER_PROFILE",
                    profile,
                    "size",
                    n.min_bytes.to_string(),
                    &who,
                    o.min_bytes != n.min_bytes,
                );
                self.covered.ports[pi].pgs[g].min_bytes = n.min_bytes;
                continue;
            }
            let pooled = pooled(base, old, g);
            let (size, xoff) = profile_sizes(imported, new, g, pooled);
            let (old_size, old_xoff) = profile_sizes(imported, old, g, pooled);
            if profile_sizes_of(imported, size, xoff, pooled) != (new.pgs[g].min_bytes, new.headroom_bytes[g]) {
                self.errors.push(format!(
                    "{who}: headroom {} B cannot be said as a profile xoff on {} (headroom is {} of xoff)",
                    new.headroom_bytes[g],
                    imported.platform.name,
                    if pooled { "2 ×" } else { "a fixed overhead short" }
                ));
            }
            self.ask(
                "BUFFER_PROFILE",
                profile,
                "xoff",
                xoff.to_string(),
                &who,
                xoff != old_xoff,
            );
            self.ask(
                "BUFFER_PROFILE",
                profile,
                "size",
                size.to_string(),
                &who,
                size != old_size,
            );
            let c = &mut self.covered.ports[pi];
            c.pgs[g].min_bytes = n.min_bytes;
            c.headroom_bytes[g] = new.headroom_bytes[g];
            if imported.platform.size_meaning == SizeMeaning::MinBesideXoff {
                self.ask(
                    "BUFFER_PROFILE",
                    profile,
                    "xon",
                    n.xon_bytes.to_string(),
                    &who,
                    o.xon_bytes != n.xon_bytes,
                );
                self.covered.ports[pi].pgs[g].xon_bytes = n.xon_bytes;
            }
            self.ask(
                "BUFFER_PROFILE",
                profile,
                "xon_offset",
                n.xon_offset_bytes.to_string(),
                &who,
                o.xon_offset_bytes != n.xon_offset_bytes,
            );
            self.covered.ports[pi].pgs[g].xon_offset_bytes = n.xon_offset_bytes;
        }
    }

    /// Each queue's BUFFER_QUEUE profile: its threshold and reserve (`size`).
    fn queue_profiles(&mut self, db: &ConfigDb, base: &Config, target: &Config) {
        for (key, f) in db.table("BUFFER_QUEUE") {
            let Ok((ports, queues)) = expand_key(key, 7) else {
                continue;
            };
            let Some(Ok(profile)) = f.get("profile").map(|v| reference(v, "BUFFER_PROFILE")) else {
                continue;
            };
            for port in &ports {
                let Some(pi) = port_index(base, port) else { continue };
                if !self.present_or_note(pi, "BUFFER_PROFILE", &profile, port) {
                    continue;
                }
                for &q in &queues {
                    let q = usize::from(q);
                    let who = format!("{port} queue {q}");
                    let (o, n) = (&base.ports[pi].queues[q], &target.ports[pi].queues[q]);
                    match threshold_fields(n.shared) {
                        Ok((field, value)) => {
                            self.ask("BUFFER_PROFILE", &profile, field, value, &who, o.shared != n.shared)
                        }
                        Err(e) => self.errors.push(format!("{who}: {e}")),
                    }
                    self.ask(
                        "BUFFER_PROFILE",
                        &profile,
                        "size",
                        n.min_bytes.to_string(),
                        &who,
                        o.min_bytes != n.min_bytes,
                    );
                    let c = &mut self.covered.ports[pi].queues[q];
                    c.shared = n.shared;
                    c.min_bytes = n.min_bytes;
                }
            }
        }
    }

    /// Each queue's WRED_PROFILE: the green thresholds and probability.
    fn wred(&mut self, imported: &Imported, base: &Config, target: &Config) {
        for (port, q, wred) in &imported.queue_wred {
            let Some(pi) = port_index(base, port) else { continue };
            if !self.present_or_note(pi, "WRED_PROFILE", wred, port) {
                continue;
            }
            let q = usize::from(*q);
            let who = format!("{port} queue {q}");
            let (Some(o), n) = (
                base.ports[pi].queues[q].ecn.as_ref(),
                target.ports[pi].queues[q].ecn.as_ref(),
            ) else {
                continue;
            };
            let Some(n) = n else {
                self.errors.push(format!(
                    "{who}: the target config has no ECN on it; WRED_PROFILE|{wred} stays"
                ));
                continue;
            };
            let (o, n) = (o.clone(), n.clone());
            self.ask(
                "WRED_PROFILE",
                wred,
                "green_min_threshold",
                n.kmin_bytes.to_string(),
                &who,
                o.kmin_bytes != n.kmin_bytes,
            );
            self.ask(
                "WRED_PROFILE",
                wred,
                "green_max_threshold",
                n.kmax_bytes.to_string(),
                &who,
                o.kmax_bytes != n.kmax_bytes,
            );
            let pct = n.pmax * 100.0;
            if (pct - pct.round()).abs() > 1e-9 {
                self.errors.push(format!(
                    "{who}: pmax {} is not a whole percentage, which is all green_drop_probability takes",
                    n.pmax
                ));
            } else {
                self.ask(
                    "WRED_PROFILE",
                    wred,
                    "green_drop_probability",
                    format!("{}", pct.round() as u64),
                    &who,
                    o.pmax != n.pmax,
                );
            }
            if let Some(c) = self.covered.ports[pi].queues[q].ecn.as_mut() {
                (c.kmin_bytes, c.kmax_bytes, c.pmax) = (n.kmin_bytes, n.kmax_bytes, n.pmax);
            }
        }
    }

    /// Each queue's SCHEDULER (QUEUE|port|q's `scheduler`): strict or DWRR, and the weight.
    fn schedulers(&mut self, db: &ConfigDb, base: &Config, target: &Config) {
        for (key, f) in db.table("QUEUE") {
            let Ok((ports, queues)) = expand_key(key, 7) else {
                continue;
            };
            let Some(Ok(name)) = f.get("scheduler").map(|v| reference(v, "SCHEDULER")) else {
                continue;
            };
            for port in &ports {
                let Some(pi) = port_index(base, port) else { continue };
                if !self.present_or_note(pi, "SCHEDULER", &name, port) {
                    continue;
                }
                for &q in &queues {
                    let q = usize::from(q);
                    let who = format!("{port} queue {q}");
                    let (o, n) = (base.ports[pi].queues[q].sched, target.ports[pi].queues[q].sched);
                    let kind = |m: SchedMode| match m {
                        SchedMode::Strict => "STRICT",
                        SchedMode::Wdrr { .. } => "DWRR",
                    };
                    let file_type = db
                        .entry("SCHEDULER", &name)
                        .and_then(|s| s.get("type"))
                        .map(String::as_str);
                    // WRR and DWRR are one kind to rocesw: a type the file says is kept.
                    let same_kind = kind(o) == kind(n);
                    let value = match (n, file_type) {
                        (SchedMode::Wdrr { .. }, Some(t @ ("WRR" | "DWRR"))) if same_kind => t.to_string(),
                        _ => kind(n).to_string(),
                    };
                    self.ask("SCHEDULER", &name, "type", value, &who, !same_kind);
                    if let SchedMode::Wdrr { weight } = n {
                        let old = match o {
                            SchedMode::Wdrr { weight } => Some(weight),
                            SchedMode::Strict => None,
                        };
                        self.ask(
                            "SCHEDULER",
                            &name,
                            "weight",
                            weight.to_string(),
                            &who,
                            old != Some(weight),
                        );
                    }
                    self.covered.ports[pi].queues[q].sched = n;
                }
            }
        }
    }

    /// The maps PORT_QOS_MAP binds: DSCP → TC, TC → queue, TC → PG.
    fn maps(&mut self, db: &ConfigDb, base: &Config, target: &Config) {
        let (o, n) = (&base.classify, &target.classify);
        let kinds: [(&str, &str, Vec<u8>, Vec<u8>); 3] = [
            (
                "dscp_to_tc_map",
                "DSCP_TO_TC_MAP",
                o.dscp_to_tc.to_vec(),
                n.dscp_to_tc.to_vec(),
            ),
            (
                "tc_to_queue_map",
                "TC_TO_QUEUE_MAP",
                o.tc_to_queue.to_vec(),
                n.tc_to_queue.to_vec(),
            ),
            (
                "tc_to_pg_map",
                "TC_TO_PRIORITY_GROUP_MAP",
                o.tc_to_pg.to_vec(),
                n.tc_to_pg.to_vec(),
            ),
        ];
        for (field, table, old, new) in kinds {
            let names: std::collections::BTreeSet<String> = db
                .table("PORT_QOS_MAP")
                .filter_map(|(_, f)| reference(f.get(field)?, table).ok())
                .collect();
            if old == new {
                continue;
            }
            if names.is_empty() {
                self.errors.push(format!(
                    "classify: the {field} changed, but no PORT_QOS_MAP entry binds a {table} to write it to"
                ));
                continue;
            }
            for name in &names {
                for (i, (a, b)) in old.iter().zip(&new).enumerate() {
                    self.ask(table, name, &i.to_string(), b.to_string(), "classify", a != b);
                }
            }
        }
        let c = &mut self.covered.classify;
        (c.dscp_to_tc, c.tc_to_queue, c.tc_to_pg) = (n.dscp_to_tc, n.tc_to_queue, n.tc_to_pg);
    }

    /// Whatever else the target changed: refused, each by name.
    fn unexpressed(&mut self, target: &Config) {
        let c = &self.covered;
        let mut out = Vec::new();
        let mut differ = |what: String, a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| {
            let (a, b) = (format!("{a:?}"), format!("{b:?}"));
            if a != b {
                out.push(format!(
                    "{what} changed ({a} → {b}): no field of the config_db.json export writes it"
                ));
            }
        };
        differ("buffer".into(), &c.buffer, &target.buffer);
        differ("classify".into(), &c.classify, &target.classify);
        differ("pfc".into(), &c.pfc, &target.pfc);
        differ("cnp".into(), &c.cnp, &target.cnp);
        differ("fdb".into(), &c.fdb, &target.fdb);
        for (a, b) in c.ports.iter().zip(&target.ports) {
            let name = a.name.clone().unwrap_or_else(|| a.id.to_string());
            differ(format!("{name} speed"), &a.speed_bps, &b.speed_bps);
            differ(format!("{name} cable"), &a.cable_m, &b.cable_m);
            differ(format!("{name} mtu"), &a.max_frame_bytes, &b.max_frame_bytes);
            differ(format!("{name} scheduler"), &a.scheduler, &b.scheduler);
            differ(format!("{name} tx"), &a.tx_enabled, &b.tx_enabled);
            for g in 0..crate::NUM_TC {
                differ(format!("{name} PG {g}"), &a.pgs[g], &b.pgs[g]);
                differ(
                    format!("{name} PG {g} headroom"),
                    &a.headroom_bytes[g],
                    &b.headroom_bytes[g],
                );
                differ(format!("{name} queue {g}"), &a.queues[g], &b.queues[g]);
            }
        }
        self.errors.extend(out);
    }
}

/// As [`export`], for a config fragment (`rocesw tune`'s, or one for `rocectl patch`) laid over
/// the config `original` imports to.
pub fn export_fragment(original: &str, opts: &ImportOptions, fragment: &str) -> Result<Export, Vec<String>> {
    let imported = import_text(original, opts)?;
    crate::patch::check_fragment(fragment).map_err(|e| vec![format!("the fragment: {e}")])?;
    let mut base: toml::Table = toml::from_str(&imported.toml).map_err(|e| vec![e.to_string()])?;
    let over: toml::Table = toml::from_str(fragment).map_err(|e| vec![format!("the fragment: {e}")])?;
    crate::patch::merge(&mut base, over);
    let merged = toml::to_string(&base).map_err(|e| vec![e.to_string()])?;
    let target = crate::load_str(&merged)
        .map_err(|e| {
            let mut p = vec!["the import with the fragment laid over it:".to_string()];
            p.extend(e.problems().iter().cloned());
            p
        })?
        .config;
    export(original, opts, &target)
}

/// Per entry (table, key), per field: (value, the first who asked, whether anyone changed it).
type Want = BTreeMap<(String, String), BTreeMap<String, (String, String, bool)>>;

/// Records that `who` wants `field` of `entry` to be `value`; another value for the same field
/// is an error naming both.
fn ask(
    want: &mut Want,
    entry: (&str, &str),
    field: &str,
    value: String,
    who: &str,
    changed: bool,
    errors: &mut Vec<String>,
) {
    let (table, key) = entry;
    let e = want.entry((table.to_string(), key.to_string())).or_default();
    match e.get_mut(field) {
        Some((v, first, _)) if *v != value => {
            // One error per field, however many ports disagree.
            let at = format!("{table}|{key}|{field}: ");
            if !errors.iter().any(|e| e.starts_with(&at)) {
                errors.push(format!(
                    "{at}{first} wants {v}, {who} wants {value}; ports that share a profile take one value \
                     (give them profiles of their own in the file first)"
                ));
            }
        }
        Some((_, _, c)) => *c |= changed,
        None => {
            e.insert(field.to_string(), (value, who.to_string(), changed));
        }
    }
}

/// The profile field and value a shared limit is written as.
fn threshold_fields(t: Threshold) -> Result<(&'static str, String), String> {
    match t {
        Threshold::Unlimited => Ok(("dynamic_th", "7".into())),
        Threshold::Static { bytes } => Ok(("static_th", bytes.to_string())),
        Threshold::Dynamic { alpha: 0.0 } => Ok(("dynamic_th", "-8".into())),
        Threshold::Dynamic { alpha } => {
            let n = alpha.log2();
            if (n - n.round()).abs() < 1e-9 && (-7.0..=6.0).contains(&n.round()) {
                Ok(("dynamic_th", format!("{}", n.round() as i64)))
            } else {
                Err(format!("alpha {alpha} is not 2^n for a dynamic_th of -7..=6"))
            }
        }
    }
}

/// Whether PG `g` of `port` takes its headroom from a shared headroom pool.
fn pooled(c: &Config, port: &PortConfig, g: usize) -> bool {
    c.buffer
        .pools_of(crate::model::PoolDir::Ingress)
        .nth(usize::from(port.pgs[g].pool))
        .is_some_and(|p| p.headroom_bytes > 0)
}

/// The profile's (size, xoff) for PG `g` of `port`, by the platform's reading of `size`.
fn profile_sizes(imported: &Imported, port: &PortConfig, g: usize, pooled: bool) -> (u64, u64) {
    let (min, headroom) = (port.pgs[g].min_bytes, port.headroom_bytes[g]);
    let xoff = imported.platform.xoff_of_headroom(headroom, pooled);
    match imported.platform.size_meaning {
        SizeMeaning::XonPlusXoff if !pooled => (min + xoff, xoff),
        _ => (min, xoff),
    }
}

/// The (reserve, headroom) a profile's (size, xoff) import to ([`profile_sizes`]' inverse).
fn profile_sizes_of(imported: &Imported, size: u64, xoff: u64, pooled: bool) -> (u64, u64) {
    let headroom = imported.platform.usable_headroom(xoff, pooled).0;
    match imported.platform.size_meaning {
        SizeMeaning::XonPlusXoff if !pooled => (size - xoff, headroom),
        _ => (size, headroom),
    }
}

/// Whether the file has `table|key`, nested or flat.
fn has_entry(v: &Value, table: &str, key: &str) -> bool {
    v.get(format!("{table}|{key}")).is_some() || v.get(table).and_then(|t| t.get(key)).is_some()
}

/// Adds `table|key` with `fields` as a nested entry (the table made if the file has none).
fn insert_entry(v: &mut Value, table: &str, key: &str, fields: serde_json::Map<String, Value>) {
    let Some(top) = v.as_object_mut() else { return };
    let t = top
        .entry(table.to_string())
        .or_insert_with(|| Value::Object(Default::default()));
    if let Some(t) = t.as_object_mut() {
        t.insert(key.to_string(), Value::Object(fields));
    }
}

/// Every place the file gives `table|key`'s fields: the nested entry first, then the flat one
/// (or redis-dump's wrapped value).
fn entries_mut<'a>(v: &'a mut Value, table: &str, key: &str) -> Vec<&'a mut serde_json::Map<String, Value>> {
    let Some(top) = v.as_object_mut() else {
        return Vec::new();
    };
    let flat = format!("{table}|{key}");
    let mut out = Vec::new();
    for (k, e) in top.iter_mut() {
        if *k == flat {
            let wrapped =
                e.get("type").and_then(Value::as_str) == Some("hash") && e.get("value").is_some_and(Value::is_object);
            let fields = if wrapped { e.get_mut("value") } else { Some(e) };
            if let Some(f) = fields.and_then(Value::as_object_mut) {
                out.push(f);
            }
        } else if *k == table {
            if let Some(f) = e.get_mut(key).and_then(Value::as_object_mut) {
                out.insert(0, f);
            }
        }
    }
    out
}
