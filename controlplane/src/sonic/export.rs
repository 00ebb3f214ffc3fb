//! Settings back to the switch: what a rocesw config changed of an imported config_db.json
//! (each PG's and queue's buffer profile: thresholds, reserves, a lossless PG's xoff and xon;
//! the WRED profiles' green thresholds; the schedulers' kind and weight; the DSCP → TC, TC →
//! queue and TC → PG maps, the switch's and each map set's; which map set a port classifies
//! with and its PFC priorities, as its PORT_QOS_MAP bindings and `pfc_enable`), written where
//! the import read them (the same origins; an entry the file gives both nested and flat
//! patched in both, as the import reads both) and given as an RFC 6902 JSON Patch, what
//! SONiC's `config apply-patch` takes, plus a readable diff. A PG whose profile buffermgrd made
//! from `pg_profile_lookup.ini` is written as an explicit BUFFER_PROFILE and BUFFER_PG entry
//! once a change touches it. Anything else that changed is refused by name. The inverse of the
//! import on the same origins: a patch touches only what changed, and the patched file is
//! imported again before it is given (`check_imports_to`): it must give the config the patch
//! came from, or the change is refused naming what differs.
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
    x.maps(&db, &imported, &base, target);
    x.pfc(&db, &base, target);
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
    let patched_text = serde_json::to_string_pretty(&patched).map_err(|e| vec![e.to_string()])?;
    if !changes.is_empty() {
        check_imports_to(&patched_text, opts, target, &x.present)?;
    }
    let patch = json_patch::diff(&original_json, &patched);
    Ok(Export {
        patch: serde_json::to_value(patch).map_err(|e| vec![e.to_string()])?,
        changes,
        notes,
        patched: patched_text,
    })
}

/// That the patched file imports to `target`'s ports, maps and PFC: what a change reaches
/// through the import's rules (a port's `pfc_enable` deciding which of its PGs are lossless,
/// and so their buffers) is checked here, not assumed. Anything else is refused by name.
fn check_imports_to(patched: &str, opts: &ImportOptions, target: &Config, present: &[bool]) -> Result<(), Vec<String>> {
    let again = import_text(patched, opts)
        .and_then(|i| crate::load_str(&i.toml).map_err(|e| e.problems().to_vec()))
        .map_err(|e| {
            let mut p = vec!["the patched file does not import:".to_string()];
            p.extend(e);
            p
        })?
        .config;
    let mut out = Vec::new();
    let mut differ = |what: String, a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| {
        if let Some((a, b)) = shown_apart(a, b) {
            out.push(format!(
                "{what}: the patched file imports to {a}, not the target's {b}; the file cannot say this change"
            ));
        }
    };
    differ("classify".into(), &again.classify, &target.classify);
    differ("pfc".into(), &again.pfc, &target.pfc);
    // The file's ports the target lacks (a lab's) are left as the file has them, save what a
    // profile they share changes for them: said in a note, not compared here.
    let compared = again.ports.iter().zip(&target.ports).zip(present).filter(|(_, &p)| p);
    for ((a, b), _) in compared {
        let name = a.name.clone().unwrap_or_else(|| a.id.to_string());
        differ(format!("{name} pfc"), &a.pfc_enabled, &b.pfc_enabled);
        differ(format!("{name} classify"), &a.map_set, &b.map_set);
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
    if out.is_empty() {
        Ok(())
    } else {
        Err(out)
    }
}

/// Two parts of a config as the refusals show them, when they differ. Compared as shown
/// (Debug) because a refusal must quote them anyway, and the model's floats (pmax) have no Eq.
fn shown_apart(a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug) -> Option<(String, String)> {
    let (a, b) = (format!("{a:?}"), format!("{b:?}"));
    (a != b).then_some((a, b))
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

/// One PG's or queue's binding in a table such as BUFFER_QUEUE or QUEUE.
struct Bound {
    /// The port's name and its index in the config.
    port: String,
    pi: usize,
    /// The PG or queue.
    index: usize,
    /// What its `field` names in the referenced table.
    name: String,
}

/// Every binding of `table` whose `field` names an entry of `ref_table`: each port and index
/// its keys expand to (`Ethernet0,Ethernet4|3-4`), in the file's order. Keys, references and
/// ports the import refused or does not know are passed over: export runs on what it imported.
fn bindings<'a>(
    db: &'a ConfigDb,
    c: &'a Config,
    table: &'a str,
    field: &'a str,
    ref_table: &'a str,
) -> impl Iterator<Item = Bound> + 'a {
    db.table(table).flat_map(move |(key, f)| {
        let expanded = expand_key(key, 7).ok();
        let name = f.get(field).and_then(|v| reference(v, ref_table).ok());
        let (ports, indices) = match (expanded, name.as_ref()) {
            (Some(e), Some(_)) => e,
            _ => Default::default(),
        };
        ports.into_iter().flat_map(move |port| {
            let pi = port_index(c, &port);
            let name = name.clone().unwrap_or_default();
            let indices = if pi.is_some() { indices.clone() } else { Vec::new() };
            indices.into_iter().map(move |i| Bound {
                port: port.clone(),
                pi: pi.unwrap_or(0),
                index: usize::from(i),
                name: name.clone(),
            })
        })
    })
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
            if old.pgs[g].lossless != new.pgs[g].lossless {
                // The port's pfc_enable changed which PGs are lossless (`pfc`): the import's
                // rules give the PG its buffer, checked by importing the patched file.
                let c = &mut self.covered.ports[pi];
                c.pgs[g] = new.pgs[g].clone();
                c.headroom_bytes[g] = new.headroom_bytes[g];
                continue;
            }
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
        for b in bindings(db, base, "BUFFER_QUEUE", "profile", "BUFFER_PROFILE") {
            if !self.present_or_note(b.pi, "BUFFER_PROFILE", &b.name, &b.port) {
                continue;
            }
            let (pi, q, profile) = (b.pi, b.index, &b.name);
            let who = format!("{} queue {q}", b.port);
            let (o, n) = (&base.ports[pi].queues[q], &target.ports[pi].queues[q]);
            match threshold_fields(n.shared) {
                Ok((field, value)) => self.ask("BUFFER_PROFILE", profile, field, value, &who, o.shared != n.shared),
                Err(e) => self.errors.push(format!("{who}: {e}")),
            }
            self.ask(
                "BUFFER_PROFILE",
                profile,
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
        let mut bound = vec![false; base.ports.len()];
        for b in bindings(db, base, "QUEUE", "scheduler", "SCHEDULER") {
            if !self.present_or_note(b.pi, "SCHEDULER", &b.name, &b.port) {
                continue;
            }
            let (pi, q, name) = (b.pi, b.index, b.name);
            let who = format!("{} queue {q}", b.port);
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
            bound[pi] = true;
        }
        // A port with no QUEUE entry (unlinked in the minigraph) takes the import's common
        // schedulers, so it follows them: what it ends with is for the re-import check to judge.
        for (pi, _) in bound.iter().enumerate().filter(|(pi, b)| !**b && self.present[*pi]) {
            for q in 0..crate::NUM_TC {
                self.covered.ports[pi].queues[q].sched = target.ports[pi].queues[q].sched;
            }
        }
    }

    /// The maps PORT_QOS_MAP binds: the switch's DSCP → TC, TC → queue and TC → PG maps
    /// where `[classify]` stands for them, each map set's where it stands for its own, and
    /// which set each port classifies with.
    fn maps(&mut self, db: &ConfigDb, imported: &Imported, base: &Config, target: &Config) {
        let (o, n) = (&base.classify, &target.classify);
        let default_name = |field: &str| {
            imported
                .default_maps
                .iter()
                .find(|(f, _)| *f == field)
                .map(|(_, n)| n.clone())
        };
        for (field, table, old, new) in [
            ("dscp_to_tc_map", "DSCP_TO_TC_MAP", &o.dscp_to_tc[..], &n.dscp_to_tc[..]),
            (
                "tc_to_pg_map",
                "TC_TO_PRIORITY_GROUP_MAP",
                &o.tc_to_pg[..],
                &n.tc_to_pg[..],
            ),
        ] {
            if old == new {
                continue;
            }
            let Some(name) = default_name(field) else {
                self.errors.push(format!(
                    "classify: the {field} changed, but no PORT_QOS_MAP entry binds a {table} to write it to"
                ));
                continue;
            };
            for (i, (a, b)) in old.iter().zip(new).enumerate() {
                self.ask(table, &name, &i.to_string(), b.to_string(), "classify", a != b);
            }
        }
        // The queue map is the switch's: every map PORT_QOS_MAP binds as one.
        let names: std::collections::BTreeSet<String> = db
            .table("PORT_QOS_MAP")
            .filter_map(|(_, f)| reference(f.get("tc_to_queue_map")?, "TC_TO_QUEUE_MAP").ok())
            .collect();
        if o.tc_to_queue != n.tc_to_queue {
            if names.is_empty() {
                self.errors.push(
                    "classify: the tc_to_queue_map changed, but no PORT_QOS_MAP entry binds a TC_TO_QUEUE_MAP to write it to"
                        .to_string(),
                );
            }
            for name in &names {
                for (i, (a, b)) in o.tc_to_queue.iter().zip(&n.tc_to_queue).enumerate() {
                    self.ask(
                        "TC_TO_QUEUE_MAP",
                        name,
                        &i.to_string(),
                        b.to_string(),
                        "classify",
                        a != b,
                    );
                }
            }
        }
        // Each map set's maps: the ones it stands for, or (where it has none of its own) the
        // switch's, which it must then still equal.
        for ns in &n.sets {
            let at = format!("classify.map.{:?}", ns.name);
            let (Some(os), Some((_, sonic))) = (
                o.sets.iter().find(|s| s.name == ns.name),
                imported.map_sets.iter().find(|(name, _)| *name == ns.name),
            ) else {
                self.errors.push(format!(
                    "{at}: a map set the file does not have; export writes the maps the file binds (add its maps to the file first)"
                ));
                continue;
            };
            for (field, table, old, new, switch) in [
                (
                    "dscp_to_tc_map",
                    "DSCP_TO_TC_MAP",
                    &os.dscp_to_tc[..],
                    &ns.dscp_to_tc[..],
                    &n.dscp_to_tc[..],
                ),
                (
                    "dot1p_to_tc_map",
                    "DOT1P_TO_TC_MAP",
                    &os.pcp_to_tc[..],
                    &ns.pcp_to_tc[..],
                    &n.pcp_to_tc[..],
                ),
                (
                    "tc_to_pg_map",
                    "TC_TO_PRIORITY_GROUP_MAP",
                    &os.tc_to_pg[..],
                    &ns.tc_to_pg[..],
                    &n.tc_to_pg[..],
                ),
            ] {
                match sonic.iter().find(|(f, _)| *f == field) {
                    Some((_, name)) if old != new => {
                        let who = format!("{at}.{field}");
                        for (i, (a, b)) in old.iter().zip(new).enumerate() {
                            self.ask(table, name, &i.to_string(), b.to_string(), &who, a != b);
                        }
                    }
                    Some(_) => {}
                    None if new != switch => self.errors.push(format!(
                        "{at}: its ports bind the switch's {table}; a {field} of their own needs a {table} entry the file does not have"
                    )),
                    None => {}
                }
            }
        }
        // Each port's map set: its PORT_QOS_MAP bindings name the set's maps (the switch's
        // where the set has none of its own).
        for (pi, (bp, tp)) in base.ports.iter().zip(&target.ports).enumerate() {
            let name_of = |c: &Config, p: &PortConfig| p.map_set.map(|k| c.classify.sets[k].name.clone());
            let (was, now) = (name_of(base, bp), name_of(target, tp));
            if was == now {
                continue;
            }
            let port = bp.name.clone().unwrap_or_else(|| bp.id.to_string());
            let who = format!("{port} classify");
            let Some(entry) = db.entry("PORT_QOS_MAP", &port) else {
                self.errors.push(format!(
                    "{who}: the file has no PORT_QOS_MAP|{port} entry to bind its maps in"
                ));
                continue;
            };
            let sonic: Vec<(&str, String)> = match &now {
                Some(set) => match imported.map_sets.iter().find(|(n, _)| n == set) {
                    Some((_, s)) => s.clone(),
                    None => continue, // refused above: a set the file does not have
                },
                None => Vec::new(),
            };
            for (field, table) in [
                ("dscp_to_tc_map", "DSCP_TO_TC_MAP"),
                ("dot1p_to_tc_map", "DOT1P_TO_TC_MAP"),
                ("tc_to_pg_map", "TC_TO_PRIORITY_GROUP_MAP"),
            ] {
                let name = sonic
                    .iter()
                    .find(|(f, _)| *f == field)
                    .map(|(_, n)| n.clone())
                    .or_else(|| default_name(field));
                let Some(name) = name else { continue };
                // As the file writes its references: `[TABLE|name]` or the bare name.
                let old_style = entry.get(field).is_some_and(|v| v.trim_start().starts_with('['));
                let value = if old_style { format!("[{table}|{name}]") } else { name };
                self.ask("PORT_QOS_MAP", &port, field, value, &who, true);
            }
            self.covered.ports[pi].map_set = tp.map_set;
        }
        let c = &mut self.covered.classify;
        (c.dscp_to_tc, c.tc_to_queue, c.tc_to_pg) = (n.dscp_to_tc, n.tc_to_queue, n.tc_to_pg);
        c.sets = n.sets.clone();
    }

    /// Each port's PFC priorities: PORT_QOS_MAP|port|pfc_enable. Which of its PGs are
    /// lossless follows from them (the import's rules); the patched file is imported again to
    /// check it says exactly the target's (`check_imports_to`).
    fn pfc(&mut self, db: &ConfigDb, base: &Config, target: &Config) {
        for (pi, (bp, tp)) in base.ports.iter().zip(&target.ports).enumerate() {
            if bp.pfc_enabled == tp.pfc_enabled {
                continue;
            }
            let port = bp.name.clone().unwrap_or_else(|| bp.id.to_string());
            let who = format!("{port} pfc");
            if db.entry("PORT_QOS_MAP", &port).is_none() {
                self.errors.push(format!(
                    "{who}: the file has no PORT_QOS_MAP|{port} entry to write pfc_enable to"
                ));
                continue;
            }
            let prios: Vec<String> = (0..crate::NUM_TC)
                .filter(|&p| tp.pfc_enabled[p])
                .map(|p| p.to_string())
                .collect();
            self.ask("PORT_QOS_MAP", &port, "pfc_enable", prios.join(","), &who, true);
            self.covered.ports[pi].pfc_enabled = tp.pfc_enabled;
        }
        self.covered.pfc.enabled = target.pfc.enabled;
    }

    /// Whatever else the target changed: refused, each by name.
    fn unexpressed(&mut self, target: &Config) {
        let c = &self.covered;
        let mut out = Vec::new();
        let mut differ = |what: String, a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| {
            if let Some((a, b)) = shown_apart(a, b) {
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
            differ(format!("{name} pfc"), &a.pfc_enabled, &b.pfc_enabled);
            differ(format!("{name} classify"), &a.map_set, &b.map_set);
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
