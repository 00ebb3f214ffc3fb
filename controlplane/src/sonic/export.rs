//! Settings back to the switch: what a rocesw config changed of an imported config_db.json's
//! buffers and WRED (each lossless PG's dynamic_th and headroom, each queue's ECN thresholds),
//! written where the import read them (the same origins, nested or flat entries as the file
//! has them) and given as an RFC 6902 JSON Patch, what SONiC's `config apply-patch` takes, plus
//! a readable diff. The inverse of the import on the same origins: a patch touches only what
//! changed, and importing the patched file gives the config the patch came from.

use super::import::Imported;
use super::platform::SizeMeaning;
use super::{import_text, ImportOptions};
use crate::model::{Config, PortConfig, Threshold};
use serde_json::Value;
use std::collections::BTreeMap;

/// What export produces.
#[derive(Debug, Clone)]
pub struct Export {
    /// The RFC 6902 operations (an array), empty when nothing changed.
    pub patch: Value,
    /// One line per changed field: `TABLE|key|field: old → new`.
    pub changes: Vec<String>,
    /// The file with the patch applied, pretty-printed.
    pub patched: String,
}

/// The changes that take the switch of `original` (a config_db.json's text) to `target`:
/// every problem at once (a profile two ports share set two ways, a value SONiC cannot say).
pub fn export(original: &str, opts: &ImportOptions, target: &Config) -> Result<Export, Vec<String>> {
    let imported = import_text(original, opts)?;
    let base = crate::load_str(&imported.toml)
        .map_err(|e| e.problems().to_vec())?
        .config;
    let mut errors = Vec::new();
    // What every binding wants of each field of each entry, with the first port that asked
    // (ports sharing a profile must want the same, changed or not) and whether any of them
    // changed it (only those are written).
    let mut want: Want = BTreeMap::new();
    let port_of = |c: &Config, name: &str| c.ports.iter().find(|p| p.name.as_deref() == Some(name)).cloned();
    for (port, g, profile) in &imported.pg_profiles {
        let (Some(old), Some(new)) = (port_of(&base, port), port_of(target, port)) else {
            errors.push(format!("the target config has no port named {port}"));
            continue;
        };
        let g = usize::from(*g);
        let who = format!("{port} PG {g}");
        let mut ask = |field: &str, value: String, changed: bool, errors: &mut Vec<String>| {
            ask(
                &mut want,
                ("BUFFER_PROFILE", profile),
                field,
                value,
                &who,
                changed,
                errors,
            )
        };
        let (o, n) = (&old.pgs[g], &new.pgs[g]);
        match threshold_fields(n.shared) {
            Ok((field, value)) => ask(field, value, o.shared != n.shared, &mut errors),
            Err(e) => errors.push(format!("{who}: {e}")),
        }
        if !o.lossless {
            continue;
        }
        let pooled = pooled(&base, &old, g);
        let (size, xoff) = profile_sizes(&imported, &new, g, pooled);
        let (old_size, old_xoff) = profile_sizes(&imported, &old, g, pooled);
        ask("xoff", xoff.to_string(), xoff != old_xoff, &mut errors);
        ask("size", size.to_string(), size != old_size, &mut errors);
        if imported.platform.size_meaning == SizeMeaning::MinBesideXoff {
            ask("xon", n.xon_bytes.to_string(), o.xon_bytes != n.xon_bytes, &mut errors);
        }
        ask(
            "xon_offset",
            n.xon_offset_bytes.to_string(),
            o.xon_offset_bytes != n.xon_offset_bytes,
            &mut errors,
        );
    }
    for (port, q, wred) in &imported.queue_wred {
        let (Some(old), Some(new)) = (port_of(&base, port), port_of(target, port)) else {
            continue;
        };
        let q = usize::from(*q);
        let who = format!("{port} queue {q}");
        let (Some(o), n) = (old.queues[q].ecn.as_ref(), new.queues[q].ecn.as_ref()) else {
            continue;
        };
        let Some(n) = n else {
            errors.push(format!(
                "{who}: the target config has no ECN on it; WRED_PROFILE|{wred} stays"
            ));
            continue;
        };
        let mut ask = |field: &str, value: String, changed: bool, errors: &mut Vec<String>| {
            ask(&mut want, ("WRED_PROFILE", wred), field, value, &who, changed, errors)
        };
        ask(
            "green_min_threshold",
            n.kmin_bytes.to_string(),
            o.kmin_bytes != n.kmin_bytes,
            &mut errors,
        );
        ask(
            "green_max_threshold",
            n.kmax_bytes.to_string(),
            o.kmax_bytes != n.kmax_bytes,
            &mut errors,
        );
        let pct = n.pmax * 100.0;
        if (pct - pct.round()).abs() > 1e-9 {
            errors.push(format!(
                "{who}: pmax {} is not a whole percentage, which is all green_drop_probability takes",
                n.pmax
            ));
        } else {
            ask(
                "green_drop_probability",
                format!("{}", pct.round() as u64),
                o.pmax != n.pmax,
                &mut errors,
            );
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let original_json: Value = serde_json::from_str(original).map_err(|e| vec![e.to_string()])?;
    let mut patched = original_json.clone();
    let mut changes = Vec::new();
    for ((table, key), fields) in want {
        let Some(entry) = entry_mut(&mut patched, &table, &key) else {
            return Err(vec![format!("{table}|{key}: not found in the file")]);
        };
        for (field, (value, _, _)) in fields.into_iter().filter(|(_, w)| w.2) {
            let old = entry
                .get(&field)
                .and_then(Value::as_str)
                .unwrap_or("(none)")
                .to_string();
            if old != value {
                changes.push(format!("{table}|{key}|{field}: {old} → {value}"));
                entry.insert(field.clone(), Value::String(value));
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
    let patch = json_patch::diff(&original_json, &patched);
    Ok(Export {
        patch: serde_json::to_value(patch).map_err(|e| vec![e.to_string()])?,
        changes,
        patched: serde_json::to_string_pretty(&patched).map_err(|e| vec![e.to_string()])?,
    })
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
    let (min, xoff) = (port.pgs[g].min_bytes, port.headroom_bytes[g]);
    match imported.platform.size_meaning {
        SizeMeaning::XonPlusXoff if !pooled => (min + xoff, xoff),
        _ => (min, xoff),
    }
}

/// The fields of `table|key` in the file, nested or flat (or redis-dump's wrapped value).
fn entry_mut<'a>(v: &'a mut Value, table: &str, key: &str) -> Option<&'a mut serde_json::Map<String, Value>> {
    let top = v.as_object_mut()?;
    let flat = format!("{table}|{key}");
    if top.contains_key(&flat) {
        let e = top.get_mut(&flat)?;
        if e.get("type").and_then(Value::as_str) == Some("hash") && e.get("value").is_some_and(Value::is_object) {
            return e.get_mut("value")?.as_object_mut();
        }
        return e.as_object_mut();
    }
    top.get_mut(table)?.as_object_mut()?.get_mut(key)?.as_object_mut()
}
