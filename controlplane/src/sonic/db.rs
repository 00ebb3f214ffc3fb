//! A SONiC `config_db.json` read into tables of string fields, each value with its origin.
//!
//! Real files come in two shapes, often mixed by the tools that edit them: the nested form
//! `config save` writes (`{"BUFFER_PG": {"Ethernet0|3-4": {"profile": "..."}}}`) and the flat
//! form of a Redis dump (`{"BUFFER_PG|Ethernet0|3-4": {...}}`, or `redis-dump`'s wrapper
//! `{"type": "hash", "value": {...}}`). Both end up here as one table → key → field map, so
//! the importer never asks which shape a value came from; a field given twice with different
//! values is an error naming it. Every value in config_db is a string (`"100000"`, `"true"`);
//! tables the switch does not read are kept only by name, so their contents (arrays, nested
//! objects) are never looked at.
//!
//! Bounds: the file is read whole and parsed by serde_json, whose recursion limit (128 levels)
//! refuses a hostile depth with an error rather than a stack overflow; the caller caps the
//! size ([`MAX_DB_BYTES`]).

use std::collections::BTreeMap;
use std::fmt;

/// The largest config_db.json read: a 256-port switch's whole CONFIG_DB is a few MB.
pub const MAX_DB_BYTES: usize = 64 << 20;

/// Where a value came from: `TABLE|key|field`, as SONiC's own tools name a field, so an error
/// or a comment in the imported TOML points at the line a user would edit.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Origin {
    /// The table, e.g. `BUFFER_PROFILE`.
    pub table: String,
    /// The key within it, e.g. `pg_lossless_100000_5m_profile` or `Ethernet0|3-4`.
    pub key: String,
    /// The field, or empty for the entry as a whole.
    pub field: String,
}

impl Origin {
    /// The origin of `field` in `table|key`.
    pub fn new(table: &str, key: &str, field: &str) -> Self {
        Origin {
            table: table.to_string(),
            key: key.to_string(),
            field: field.to_string(),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}|{}", self.table, self.key)
        } else {
            write!(f, "{}|{}|{}", self.table, self.key, self.field)
        }
    }
}

/// Why a config_db.json could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbError {
    /// Not JSON (serde_json's message, with line and column), or nested too deep.
    Json(String),
    /// Larger than [`MAX_DB_BYTES`].
    TooLarge(usize),
    /// JSON of the wrong shape where a table, an entry or a field is expected.
    Shape {
        /// What was being read, `TABLE`, `TABLE|key` or `TABLE|key|field`.
        at: String,
        /// What it should have been.
        expected: &'static str,
    },
    /// A field given twice (nested and flat) with different values.
    Conflict {
        /// The field.
        at: Origin,
        /// The first value seen.
        first: String,
        /// The other.
        second: String,
    },
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbError::Json(e) => write!(f, "not a config_db.json: {e}"),
            DbError::TooLarge(n) => write!(
                f,
                "{n} bytes: larger than the {} MiB a config_db.json may be",
                MAX_DB_BYTES >> 20
            ),
            DbError::Shape { at, expected } => write!(f, "{at}: {expected}"),
            DbError::Conflict { at, first, second } => write!(
                f,
                "{at}: given twice, as {first:?} and as {second:?} (a flat \"TABLE|key\" entry and a nested one disagree)"
            ),
        }
    }
}

impl std::error::Error for DbError {}

/// One entry (`TABLE|key`): its fields, every value a string.
pub type Fields = BTreeMap<String, String>;

/// The tables of a config_db.json that the switch reads, each key's fields as strings, and the
/// names of the tables it does not read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigDb {
    tables: BTreeMap<String, BTreeMap<String, Fields>>,
    /// Tables present in the file that no part of the switch reads (BGP, interfaces, ...).
    pub ignored: Vec<String>,
    /// Fields of read tables whose value is not a string (`null`, a number, an object), with
    /// what it is: left out of the entries. A reader that needs such a field refuses it (the
    /// importer's `read_fields`); a field nothing reads stays ignored, as SONiC ignores it.
    pub non_strings: Vec<(Origin, &'static str)>,
}

/// Whether the whole document looks like a config_db.json rather than a rocesw TOML or some
/// other JSON: a JSON object whose first key is an upper-case table name (`DEVICE_METADATA`,
/// `PORT`, `BUFFER_PG|Ethernet0|3-4`). Used to detect the format by content.
pub fn looks_like_config_db(text: &str) -> bool {
    let t = text.trim_start_matches('\u{feff}').trim_start();
    let Some(rest) = t.strip_prefix('{') else { return false };
    let rest = rest.trim_start();
    if rest.starts_with('}') {
        return false;
    }
    let Some(rest) = rest.strip_prefix('"') else {
        return false;
    };
    rest.chars().next().is_some_and(|c| c.is_ascii_uppercase())
}

impl ConfigDb {
    /// Reads `text`; `wanted(table)` says which tables the caller reads (the others are
    /// listed in [`ConfigDb::ignored`], their contents unchecked).
    pub fn parse(text: &str, wanted: impl Fn(&str) -> bool) -> Result<ConfigDb, DbError> {
        if text.len() > MAX_DB_BYTES {
            return Err(DbError::TooLarge(text.len()));
        }
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| DbError::Json(e.to_string()))?;
        let serde_json::Value::Object(top) = value else {
            return Err(DbError::Shape {
                at: "the file".into(),
                expected: "a JSON object of tables is expected",
            });
        };
        let mut db = ConfigDb::default();
        let mut ignored = std::collections::BTreeSet::new();
        for (name, v) in top {
            match name.split_once('|') {
                // The flat form: the key is the whole Redis key.
                Some((table, key)) => {
                    if !wanted(table) {
                        ignored.insert(table.to_string());
                        continue;
                    }
                    let at = format!("{table}|{key}");
                    let fields = unwrap_redis_dump(&v).ok_or(DbError::Shape {
                        at,
                        expected: "an object of fields is expected",
                    })?;
                    db.add_entry(table, key, fields)?;
                }
                None => {
                    if !wanted(&name) {
                        ignored.insert(name);
                        continue;
                    }
                    let serde_json::Value::Object(entries) = v else {
                        return Err(DbError::Shape {
                            at: name,
                            expected: "an object of entries (key → fields) is expected",
                        });
                    };
                    for (key, fields) in &entries {
                        let fields = unwrap_redis_dump(fields).ok_or_else(|| DbError::Shape {
                            at: format!("{name}|{key}"),
                            expected: "an object of fields is expected",
                        })?;
                        db.add_entry(&name, key, fields)?;
                    }
                }
            }
        }
        db.ignored = ignored.into_iter().collect();
        Ok(db)
    }

    fn add_entry(
        &mut self,
        table: &str,
        key: &str,
        fields: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<(), DbError> {
        let entry = self
            .tables
            .entry(table.to_string())
            .or_default()
            .entry(key.to_string())
            .or_default();
        for (field, value) in fields {
            let at = Origin::new(table, key, field);
            let serde_json::Value::String(s) = value else {
                let kind = match value {
                    serde_json::Value::Null => "null",
                    serde_json::Value::Bool(_) => "a boolean",
                    serde_json::Value::Number(_) => "a number",
                    serde_json::Value::Array(_) => "an array",
                    serde_json::Value::Object(_) => "an object",
                    serde_json::Value::String(_) => "a string",
                };
                self.non_strings.push((at, kind));
                continue;
            };
            if let Some(first) = entry.get(field) {
                if first != s {
                    return Err(DbError::Conflict {
                        at,
                        first: first.clone(),
                        second: s.clone(),
                    });
                }
            }
            entry.insert(field.clone(), s.clone());
        }
        Ok(())
    }

    /// The entries of `table` (key → fields), in key order; empty if the file has none.
    pub fn table(&self, table: &str) -> impl Iterator<Item = (&str, &Fields)> {
        self.tables
            .get(table)
            .into_iter()
            .flat_map(|t| t.iter().map(|(k, f)| (k.as_str(), f)))
    }

    /// The fields of `table|key`, if present.
    pub fn entry(&self, table: &str, key: &str) -> Option<&Fields> {
        self.tables.get(table)?.get(key)
    }

    /// Whether the file has `table` (read) at all.
    pub fn has_table(&self, table: &str) -> bool {
        self.tables.contains_key(table)
    }
}

/// A flat entry's fields: the object itself, or the `value` of redis-dump's
/// `{"type": "hash", "value": {...}}` wrapper.
fn unwrap_redis_dump(v: &serde_json::Value) -> Option<&serde_json::Map<String, serde_json::Value>> {
    let obj = v.as_object()?;
    match (obj.get("type"), obj.get("value")) {
        (Some(serde_json::Value::String(t)), Some(serde_json::Value::Object(inner))) if t == "hash" => Some(inner),
        _ => Some(obj),
    }
}

/// A reference to an entry of `table`, as either SONiC writes it: the plain name (202111 and
/// later) or the old `[TABLE|name]` (also `[TABLE:name]`, as APPL_DB wrote it). Says which
/// table an old-style reference names when it is not `table`.
pub fn reference(value: &str, table: &str) -> Result<String, String> {
    let v = value.trim();
    let Some(inner) = v.strip_prefix('[') else {
        if v.is_empty() {
            return Err(format!("an empty reference (a name in {table} is expected)"));
        }
        return Ok(v.to_string());
    };
    let Some(inner) = inner.strip_suffix(']') else {
        return Err(format!("{value:?}: an old-style reference must end with ']'"));
    };
    let Some((t, name)) = inner.split_once(['|', ':']) else {
        return Err(format!("{value:?}: an old-style reference is [TABLE|name]"));
    };
    if t != table && t.strip_suffix("_TABLE") != Some(table) {
        return Err(format!(
            "{value:?} refers to {t}, where an entry of {table} is expected"
        ));
    }
    if name.is_empty() {
        return Err(format!("{value:?}: no name after the table"));
    }
    Ok(name.to_string())
}

/// A list of references (`profile_list`): comma-separated, each as [`reference`] takes it.
pub fn references(value: &str, table: &str) -> Result<Vec<String>, String> {
    value
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| reference(s, table))
        .collect()
}

/// The ports and indices a key names: `Ethernet0|3-4`, `Ethernet0,Ethernet4|3`,
/// `Ethernet0|0,1,2,5,6` (QUEUE's index lists), each index at most `max_index`. Keys without a
/// `|` name ports only (indices empty).
pub fn expand_key(key: &str, max_index: u8) -> Result<(Vec<String>, Vec<u8>), String> {
    let (ports, idx) = match key.split_once('|') {
        Some((p, i)) => (p, Some(i)),
        None => (key, None),
    };
    let ports: Vec<String> = ports.split(',').map(str::trim).map(str::to_string).collect();
    if ports.iter().any(String::is_empty) {
        return Err(format!("{key:?}: an empty port name"));
    }
    let mut indices = Vec::new();
    if let Some(idx) = idx {
        for part in idx.split(',') {
            let part = part.trim();
            let (lo, hi) = match part.split_once('-') {
                Some((lo, hi)) => (lo, hi),
                None => (part, part),
            };
            let parse = |s: &str| -> Result<u8, String> {
                s.trim()
                    .parse::<u8>()
                    .ok()
                    .filter(|&n| n <= max_index)
                    .ok_or_else(|| format!("{key:?}: {s:?} is not an index 0..={max_index}"))
            };
            let (lo, hi) = (parse(lo)?, parse(hi)?);
            if lo > hi {
                return Err(format!("{key:?}: the range {part} runs backwards"));
            }
            indices.extend(lo..=hi);
        }
        indices.sort_unstable();
        let before = indices.len();
        indices.dedup();
        if indices.len() != before {
            return Err(format!("{key:?}: an index given twice"));
        }
    }
    Ok((ports, indices))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(_: &str) -> bool {
        true
    }

    #[test]
    fn nested_and_flat_forms_merge() {
        let text = r#"{
            "BUFFER_PG": {"Ethernet0|3-4": {"profile": "pg_lossless"}},
            "BUFFER_PG|Ethernet4|3-4": {"profile": "pg_lossless"},
            "BUFFER_PG|Ethernet8|0": {"type": "hash", "value": {"profile": "lossy"}},
            "BGP_NEIGHBOR": {"10.0.0.1": {"asn": "65100", "peers": ["x"]}}
        }"#;
        let db = ConfigDb::parse(text, |t| t == "BUFFER_PG").unwrap();
        let keys: Vec<&str> = db.table("BUFFER_PG").map(|(k, _)| k).collect();
        assert_eq!(keys, ["Ethernet0|3-4", "Ethernet4|3-4", "Ethernet8|0"]);
        assert_eq!(db.entry("BUFFER_PG", "Ethernet8|0").unwrap()["profile"], "lossy");
        assert_eq!(db.ignored, ["BGP_NEIGHBOR"]);
    }

    #[test]
    fn a_field_given_twice_differently_is_named() {
        let text = r#"{"PORT": {"Ethernet0": {"speed": "100000"}}, "PORT|Ethernet0": {"speed": "40000"}}"#;
        let e = ConfigDb::parse(text, all).unwrap_err();
        assert!(e.to_string().starts_with("PORT|Ethernet0|speed: given twice"), "{e}");
        // The same value twice is fine.
        let text = r#"{"PORT": {"Ethernet0": {"speed": "100000"}}, "PORT|Ethernet0": {"speed": "100000"}}"#;
        assert!(ConfigDb::parse(text, all).is_ok());
    }

    #[test]
    fn values_must_be_strings_in_read_tables_only() {
        // A value that is not a string is set aside with what it is: the importer refuses it
        // where it reads the field, and ignores it elsewhere (a `null` region).
        let db = ConfigDb::parse(r#"{"PORT": {"Ethernet0": {"speed": 100000, "mtu": "9100"}}}"#, all).unwrap();
        assert_eq!(
            db.non_strings,
            [(Origin::new("PORT", "Ethernet0", "speed"), "a number")]
        );
        assert_eq!(db.entry("PORT", "Ethernet0").unwrap().len(), 1);
        let db = ConfigDb::parse(r#"{"VLAN": {"Vlan1": {"members": ["a"]}}}"#, |t| t == "PORT").unwrap();
        assert_eq!(db.ignored, ["VLAN"]);
        for bad in ["[]", "1", r#"{"PORT": []}"#, r#"{"PORT": {"E": 3}}"#] {
            assert!(matches!(ConfigDb::parse(bad, all), Err(DbError::Shape { .. })), "{bad}");
        }
        assert!(matches!(ConfigDb::parse("{", all), Err(DbError::Json(_))));
    }

    #[test]
    fn a_hostile_depth_is_an_error_not_a_crash() {
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        assert!(matches!(ConfigDb::parse(&deep, all), Err(DbError::Json(_))));
        let deep = format!(
            "{{\"PORT\": {{\"E\": {{\"x\": {}{}}}}}}}",
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        assert!(ConfigDb::parse(&deep, all).is_err());
    }

    #[test]
    fn references_old_and_new() {
        assert_eq!(
            reference("pg_lossless_100000_5m_profile", "BUFFER_PROFILE").unwrap(),
            "pg_lossless_100000_5m_profile"
        );
        assert_eq!(reference("[BUFFER_PROFILE|p1]", "BUFFER_PROFILE").unwrap(), "p1");
        assert_eq!(reference("[BUFFER_PROFILE_TABLE:p1]", "BUFFER_PROFILE").unwrap(), "p1");
        assert!(reference("[SCHEDULER|s]", "BUFFER_PROFILE")
            .unwrap_err()
            .contains("refers to SCHEDULER"));
        assert!(reference("[BUFFER_PROFILE|p1", "BUFFER_PROFILE").is_err());
        assert!(reference("", "BUFFER_PROFILE").is_err());
        assert_eq!(
            references("[BUFFER_PROFILE|a],[BUFFER_PROFILE|b]", "BUFFER_PROFILE").unwrap(),
            ["a", "b"]
        );
    }

    #[test]
    fn keys_expand_to_ports_and_indices() {
        assert_eq!(
            expand_key("Ethernet0,Ethernet4|3-4", 7).unwrap(),
            (vec!["Ethernet0".to_string(), "Ethernet4".to_string()], vec![3, 4])
        );
        assert_eq!(expand_key("Ethernet0|0,1,2,5,6", 7).unwrap().1, [0, 1, 2, 5, 6]);
        assert_eq!(expand_key("Ethernet0", 7).unwrap().1, Vec::<u8>::new());
        for bad in [
            "Ethernet0|8",
            "Ethernet0|4-3",
            "Ethernet0|x",
            "|3",
            "Ethernet0,|3",
            "Ethernet0|3,3",
        ] {
            assert!(expand_key(bad, 7).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_format_is_told_by_content() {
        assert!(looks_like_config_db("{\n  \"DEVICE_METADATA\": {}}"));
        assert!(looks_like_config_db("\u{feff}{\"BUFFER_PG|Ethernet0|3-4\": {}}"));
        assert!(!looks_like_config_db("[buffer]\nsize = \"4MiB\"\n"));
        assert!(!looks_like_config_db("{}"));
        assert!(!looks_like_config_db("{\"buffer\": 1}"));
    }
}
