//! The config around a table: a `--config` file read for its port's speed and frames, and the
//! fragment that puts the table on a switch.

use super::{Admission, ENTRIES};

/// What a `--config` file says about the port(s) a table is for.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigPort {
    /// The port's speed (the slowest port's without a port id: the defaults apply to all).
    pub speed_bps: u64,
    /// The port's largest frame (the largest of all without a port id).
    pub max_frame: u32,
    /// `high_limit` from the port's `vlarb`, else from `[port_defaults.vlarb]`.
    pub high_limit: Option<u8>,
    /// The config as written, for a per-port fragment.
    pub raw: toml::Table,
}

/// Reads a config for the table's port: `port` = a `[[port]]` id, or `None` for the defaults.
/// The `scheduler` and `vlarb` keys are set aside before validation: the command only needs the
/// ports' speeds and frame sizes, and the tables it is about to replace may be incomplete (a
/// `vlarb` port with no weighted entry yet is refused by validation).
pub fn read_config(text: &str, port: Option<u16>) -> Result<ConfigPort, String> {
    let raw: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| e.to_string().trim_end().to_string())?;
    let mut stripped = raw.clone();
    let strip = |t: &mut toml::Table| {
        t.remove("scheduler");
        t.remove("vlarb");
    };
    if let Some(toml::Value::Table(d)) = stripped.get_mut("port_defaults") {
        strip(d);
    }
    if let Some(toml::Value::Array(ports)) = stripped.get_mut("port") {
        for p in ports.iter_mut() {
            if let toml::Value::Table(t) = p {
                strip(t);
            }
        }
    }
    let text = toml::to_string(&stripped).map_err(|e| e.to_string())?;
    let loaded = crate::load_str(&text).map_err(|e| e.problems().join("; "))?;
    let ports = &loaded.config.ports;
    let limit = |t: Option<&toml::Value>, at: &str| -> Result<Option<u8>, String> {
        match t.and_then(|v| v.get("vlarb")).and_then(|v| v.get("high_limit")) {
            None => Ok(None),
            Some(toml::Value::Integer(q)) if (0..=255).contains(q) => Ok(Some(*q as u8)),
            Some(v) => Err(format!("{at}.vlarb.high_limit: {v} is not 0..=255")),
        }
    };
    let defaults = limit(raw.get("port_defaults"), "port_defaults")?;
    match port {
        Some(id) => {
            let p = ports
                .iter()
                .find(|p| p.id == id)
                .ok_or_else(|| format!("port: the config has no port {id}"))?;
            let raw_port = raw.get("port").and_then(|v| v.as_array()).and_then(|a| {
                a.iter()
                    .find(|p| p.get("id").and_then(|i| i.as_integer()) == Some(i64::from(id)))
            });
            Ok(ConfigPort {
                speed_bps: p.speed_bps,
                max_frame: p.max_frame_bytes,
                high_limit: limit(raw_port, &format!("port[{id}]"))?.or(defaults),
                raw,
            })
        }
        None => Ok(ConfigPort {
            speed_bps: ports
                .iter()
                .map(|p| p.speed_bps)
                .min()
                .ok_or("the config has no ports")?,
            max_frame: ports.iter().map(|p| p.max_frame_bytes).max().unwrap_or(0),
            high_limit: defaults,
            raw,
        }),
    }
}

/// The config fragment that puts the table on a switch (`rocectl patch FILE`). Without a port,
/// `[port_defaults]`: `scheduler = "vlarb"` and `vlarb.high` and `vlarb.high_limit`; a patch
/// merges tables key by key, so the running `low` table stays. With a port, the whole
/// `[[port]]` array of `config` (a patch replaces arrays whole) with that port's `scheduler`
/// and `vlarb.high`/`high_limit` set and everything else as written.
pub fn fragment(a: &Admission, port: Option<(u16, &toml::Table)>) -> Result<String, String> {
    use toml::Value;
    let high = Value::Array(
        a.high_pairs()
            .iter()
            .map(|[vl, w]| Value::Array(vec![Value::Integer(i64::from(*vl)), Value::Integer(i64::from(*w))]))
            .collect(),
    );
    let set = |t: &mut toml::Table| {
        t.insert("scheduler".into(), Value::String("vlarb".into()));
        let v = t.entry("vlarb").or_insert_with(|| Value::Table(toml::Table::new()));
        if !v.is_table() {
            *v = Value::Table(toml::Table::new());
        }
        if let Value::Table(v) = v {
            v.insert("high".into(), high.clone());
            v.insert("high_limit".into(), Value::Integer(i64::from(a.params().high_limit)));
        }
    };
    let mut out = toml::Table::new();
    let what = match port {
        None => {
            let mut d = toml::Table::new();
            set(&mut d);
            out.insert("port_defaults".into(), Value::Table(d));
            "[port_defaults]".to_string()
        }
        Some((id, config)) => {
            let mut ports = config
                .get("port")
                .and_then(|p| p.as_array())
                .cloned()
                .ok_or("the config has no [[port]] array")?;
            let p = ports
                .iter_mut()
                .find(|p| p.get("id").and_then(|i| i.as_integer()) == Some(i64::from(id)))
                .and_then(|p| p.as_table_mut())
                .ok_or_else(|| format!("port: the config has no port {id}"))?;
            set(p);
            out.insert("port".into(), Value::Array(ports));
            format!("port {id} (the whole [[port]] array: a patch replaces arrays)")
        }
    };
    let body = toml::to_string(&out).map_err(|e| e.to_string())?;
    // 64 pairs on one line are unreadable: eight a line, so a row is eight entries.
    let body: String = body
        .lines()
        .map(|l| match l.starts_with("high = ").then(|| l.parse::<toml::Table>()) {
            Some(Ok(mut t)) if t.get("high").and_then(Value::as_array).is_some_and(|a| a.len() > 8) => {
                let Some(Value::Array(pairs)) = t.remove("high") else {
                    return format!("{l}\n");
                };
                let rows: Vec<String> = pairs
                    .chunks(8)
                    .map(|row| {
                        let cells: Vec<String> = row.iter().map(ToString::to_string).collect();
                        format!("  {},", cells.join(", "))
                    })
                    .collect();
                format!("high = [\n{}\n]\n", rows.join("\n"))
            }
            _ => format!("{l}\n"),
        })
        .collect();
    Ok(format!(
        "# rocectl vlarb admit: {} connection(s) on {} of {ENTRIES} high-priority entries, for {what}.\n# Apply live with `rocectl patch FILE`.\n{body}",
        a.connections().len(),
        a.used_entries()
    ))
}
