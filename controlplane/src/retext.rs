//! A changed config written back over the text it was edited from: the comments, key order and
//! layout of everything unchanged are kept, and a changed value keeps its line's comment. So
//! `rocectl show config` after `rocectl set` or `patch` still reads like the file the switch
//! was started with, instead of the toml crate's bare re-serialisation.
//!
//! Works on `toml_edit` (the editing parser the toml crate is built on): the old text's document
//! is brought in line with the new table key by key; only what differs is rewritten.

use toml::{Table, Value};
use toml_edit::{ArrayOfTables, DocumentMut, InlineTable, Item, TableLike};

/// `new` as TOML text, reusing `old_text` (the config `new` was edited from) wherever it says
/// the same. The result parses to exactly `new`. If `old_text` does not parse, `new` is
/// serialised plainly.
pub fn rewrite(old_text: &str, new: &Table) -> Result<String, String> {
    let Ok(mut doc) = old_text.parse::<DocumentMut>() else {
        return toml::to_string(new).map_err(|e| format!("cannot write the config: {e}"));
    };
    let origins = crate::sonic::comments_are_origins(old_text);
    sync(doc.as_table_mut(), false, new, origins);
    Ok(doc.to_string())
}

/// Makes `t` hold exactly `new`. `inline`: `t` is (inside) an inline table or a dotted-key
/// table, where a new sub-table must be an inline value, not a `[section]`.
/// `origins`: the text's comments name where each value came from (an imported config_db.json):
/// a changed value's comment then says it was changed, and from what.
fn sync(t: &mut dyn TableLike, inline: bool, new: &Table, origins: bool) {
    let gone: Vec<String> = t
        .iter()
        .map(|(k, _)| k.to_string())
        .filter(|k| !new.contains_key(k))
        .collect();
    for k in gone {
        t.remove(&k);
    }
    for (k, v) in new {
        let Some(item) = t.get_mut(k) else {
            t.insert(k, to_item(v, inline));
            continue;
        };
        match (item, v) {
            (Item::Table(sub), Value::Table(nt)) => {
                let dotted = sub.is_dotted();
                sync(sub, dotted, nt, origins);
                if nt.is_empty() {
                    // An empty table is only there if it has a header of its own.
                    sub.set_dotted(false);
                    sub.set_implicit(false);
                }
            }
            (Item::Value(toml_edit::Value::InlineTable(sub)), Value::Table(nt)) => {
                let keys_before: Vec<String> = sub.iter().map(|(k, _)| k.to_string()).collect();
                sync(sub, true, nt, origins);
                if !sub.iter().map(|(k, _)| k).eq(keys_before.iter().map(String::as_str)) {
                    // Keys came or went: re-space the one line (`{ a = 1, b = 2 }`).
                    sub.fmt();
                }
            }
            (Item::ArrayOfTables(aot), Value::Array(arr))
                if !arr.is_empty() && arr.iter().all(Value::is_table) && by_id(aot, arr).is_some() =>
            {
                // Entries with ids (`[[port]]`) follow their id, so a port removed or moved
                // keeps each line's comment with the port it was written for.
                let mut old: Vec<Option<toml_edit::Table>> = aot.iter().cloned().map(Some).collect();
                let mut out = ArrayOfTables::new();
                for (nv, at) in arr.iter().zip(by_id(aot, arr).unwrap_or_default()) {
                    let Value::Table(nt) = nv else { continue };
                    match at.and_then(|i| old.get_mut(i)).and_then(Option::take) {
                        Some(mut sub) => {
                            sync(&mut sub, false, nt, origins);
                            out.push(sub);
                        }
                        None => out.push(to_table(nt)),
                    }
                }
                *aot = out;
            }
            // Without ids, entry by entry (with ids that moved, written anew below).
            (Item::ArrayOfTables(aot), Value::Array(arr))
                if aot.len() == arr.len()
                    && arr.iter().all(Value::is_table)
                    && !arr.iter().all(|v| v.get("id").is_some_and(Value::is_integer)) =>
            {
                for (sub, nv) in aot.iter_mut().zip(arr) {
                    if let Value::Table(nt) = nv {
                        sync(sub, false, nt, origins);
                    }
                }
            }
            (Item::Value(old), v) if !v.is_table() => {
                if to_toml(old) != *v {
                    // Same key, new value: keep the line's comment, in its column if it fits.
                    let mut decor = old.decor().clone();
                    if origins {
                        // The origin was the old value's: say what it was, and where from.
                        if let Some(origin) = decor.suffix().and_then(|s| s.as_str()).and_then(|s| s.split_once('#')) {
                            let was = {
                                let mut bare = old.clone();
                                bare.decor_mut().clear();
                                bare.to_string()
                            };
                            let origin = origin.1.trim();
                            let origin = origin.strip_prefix("changed, was ").map_or(origin, |rest| {
                                rest.split_once(" (").map_or(rest, |(_, o)| o.trim_end_matches(')'))
                            });
                            decor.set_suffix(format!(
                                "{}# changed, was {} ({origin})",
                                decor
                                    .suffix()
                                    .and_then(|s| s.as_str())
                                    .map_or("  ", |s| &s[..s.find('#').unwrap_or(0)]),
                                was.trim()
                            ));
                        }
                    }
                    let mut new_value = to_value(v);
                    let (old_len, new_len) = (bare_len(old), bare_len(&new_value));
                    if let Some(suffix) = decor.suffix().and_then(|s| s.as_str()) {
                        let pad = suffix.len() - suffix.trim_start_matches(' ').len();
                        if pad > 0 && suffix[pad..].starts_with('#') {
                            let pad = (pad + old_len).saturating_sub(new_len).max(1);
                            decor.set_suffix(format!("{}{}", " ".repeat(pad), &suffix.trim_start_matches(' ')));
                        }
                    }
                    *new_value.decor_mut() = decor;
                    *old = new_value;
                }
            }
            (item, v) => *item = to_item(v, inline),
        }
    }
}

/// For each entry of `new`, the index of the old entry with the same integer `id`, if any;
/// `None` unless every old and new entry has one, each old id once, and the kept entries stay
/// in their order.
fn by_id(old: &ArrayOfTables, new: &[Value]) -> Option<Vec<Option<usize>>> {
    let old_ids: Vec<i64> = old
        .iter()
        .map(|t| t.get("id").and_then(Item::as_integer))
        .collect::<Option<_>>()?;
    let unique = old_ids.iter().collect::<std::collections::BTreeSet<_>>().len() == old_ids.len();
    if !unique {
        return None;
    }
    let at: Vec<Option<usize>> = new
        .iter()
        .map(|v| {
            let id = v.as_table()?.get("id")?.as_integer()?;
            Some(old_ids.iter().position(|&o| o == id))
        })
        .collect::<Option<_>>()?;
    // toml_edit writes tables in the order they were read: kept entries must keep theirs.
    let kept: Vec<usize> = at.iter().flatten().copied().collect();
    kept.windows(2).all(|w| w[0] < w[1]).then_some(at)
}

/// Characters of a value as written, without the spacing and comment around it.
fn bare_len(v: &toml_edit::Value) -> usize {
    let mut v = v.clone();
    v.decor_mut().clear();
    v.to_string().len()
}

/// A new item for `v`: a `[section]` (or `[[array]]`) where the parent allows it, else a value.
fn to_item(v: &Value, inline: bool) -> Item {
    match v {
        Value::Table(t) if !inline => {
            let mut out = to_table(t);
            // A table of tables needs no header of its own: `[pg.3]`, not `[pg]` then `[pg.3]`.
            out.set_implicit(!t.is_empty() && t.values().all(Value::is_table));
            Item::Table(out)
        }
        Value::Array(a) if !inline && !a.is_empty() && a.iter().all(Value::is_table) => {
            let mut out = ArrayOfTables::new();
            for t in a.iter().filter_map(Value::as_table) {
                out.push(to_table(t));
            }
            Item::ArrayOfTables(out)
        }
        v => Item::Value(to_value(v)),
    }
}

fn to_table(t: &Table) -> toml_edit::Table {
    let mut out = toml_edit::Table::new();
    for (k, v) in t {
        out.insert(k, to_item(v, false));
    }
    out
}

fn to_value(v: &Value) -> toml_edit::Value {
    match v {
        Value::String(s) => s.as_str().into(),
        Value::Integer(i) => (*i).into(),
        Value::Float(f) => (*f).into(),
        Value::Boolean(b) => (*b).into(),
        Value::Datetime(d) => (*d).into(),
        Value::Array(a) => toml_edit::Value::Array(a.iter().map(to_value).collect()),
        Value::Table(t) => {
            let mut out = InlineTable::new();
            for (k, v) in t {
                out.insert(k, to_value(v));
            }
            toml_edit::Value::InlineTable(out)
        }
    }
}

fn to_toml(v: &toml_edit::Value) -> Value {
    use toml_edit::Value as E;
    match v {
        E::String(s) => Value::String(s.value().clone()),
        E::Integer(i) => Value::Integer(*i.value()),
        E::Float(f) => Value::Float(*f.value()),
        E::Boolean(b) => Value::Boolean(*b.value()),
        E::Datetime(d) => Value::Datetime(*d.value()),
        E::Array(a) => Value::Array(a.iter().map(to_toml).collect()),
        E::InlineTable(t) => Value::Table(t.iter().map(|(k, v)| (k.to_string(), to_toml(v))).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TEXT: &str = r#"# A switch.
[port_defaults]
speed = "25G"            # every port

[[port]]
id = 0
[[port]]
id = 1
pg.3 = { alpha = "1/4" } # port 1's own

[pg.3]                   # lossless RoCE
alpha = "1/8"
xon_offset = "3KiB"

[ecn.roce]
kmin = "100KB"
kmax = "400KB"           # HPCC
pmax = 0.2
"#;

    fn edited(f: impl FnOnce(&mut Table)) -> (Table, String) {
        let mut t: Table = TEXT.parse().unwrap();
        f(&mut t);
        let out = rewrite(TEXT, &t).unwrap();
        (t, out)
    }

    fn at<'a>(t: &'a mut Table, path: &[&str]) -> &'a mut Table {
        path.iter().fold(t, |t, k| {
            t.entry(k.to_string())
                .or_insert_with(|| Value::Table(Table::new()))
                .as_table_mut()
                .unwrap()
        })
    }

    #[test]
    fn a_changed_value_keeps_everything_else_and_its_comment() {
        let (t, out) = edited(|t| {
            at(t, &["ecn", "roce"]).insert("kmax".into(), "200KB".into());
        });
        assert_eq!(out.parse::<Table>().unwrap(), t);
        assert_eq!(out, TEXT.replace("kmax = \"400KB\"", "kmax = \"200KB\""), "{out}");
    }

    #[test]
    fn a_comment_stays_in_its_column_and_inline_tables_stay_one_line() {
        let (t, out) = edited(|t| {
            at(t, &["port_defaults"]).insert("speed".into(), "100G".into());
            let ports = t.get_mut("port").unwrap().as_array_mut().unwrap();
            at(ports[1].as_table_mut().unwrap(), &["pg", "3"]).insert("static".into(), "1MiB".into());
        });
        assert_eq!(out.parse::<Table>().unwrap(), t);
        assert!(out.contains("speed = \"100G\"           # every port\n"), "{out}");
        assert!(
            out.contains("pg.3 = { alpha = \"1/4\", static = \"1MiB\" } # port 1's own"),
            "{out}"
        );
    }

    #[test]
    fn removed_added_and_per_port_keys() {
        let (t, out) = edited(|t| {
            let pg = at(t, &["pg", "3"]);
            pg.remove("alpha");
            pg.insert("static".into(), "64KiB".into());
            at(t, &["queue", "0"]).insert("weight".into(), 3.into());
            let ports = t.get_mut("port").unwrap().as_array_mut().unwrap();
            let p0 = ports[0].as_table_mut().unwrap();
            at(p0, &["pg", "3"]).insert("alpha".into(), "1/2".into());
            let p1 = ports[1].as_table_mut().unwrap();
            at(p1, &["pg", "3"]).insert("alpha".into(), "1/16".into());
            at(p1, &["queue", "3"]).insert("ecn".into(), "hot".into());
        });
        assert_eq!(out.parse::<Table>().unwrap(), t, "{out}");
        for kept in [
            "# A switch.",
            "speed = \"25G\"            # every port",
            "kmax = \"400KB\"           # HPCC",
        ] {
            assert!(out.contains(kept), "{kept:?} lost:\n{out}");
        }
        assert!(out.contains("alpha = \"1/16\" } # port 1's own"), "{out}");
        assert!(!out.contains("alpha = \"1/8\""), "{out}");
    }

    /// In an import whose comments are origins, a changed value's comment says what it was and
    /// where that came from (once, however often it changes); a hand-written note stays as it is.
    #[test]
    fn a_changed_imported_value_says_what_it_was() {
        let old = format!(
            "{}\n[pg.3]\nalpha = \"1\"                      # BUFFER_PROFILE|p|dynamic_th\n",
            crate::sonic::ORIGINS_LINE
        );
        let mut t: Table = old.parse().unwrap();
        t["pg"]["3"]
            .as_table_mut()
            .unwrap()
            .insert("alpha".into(), Value::String("1/2".into()));
        let once = rewrite(&old, &t).unwrap();
        assert!(
            once.contains("alpha = \"1/2\"") && once.contains("# changed, was \"1\" (BUFFER_PROFILE|p|dynamic_th)"),
            "{once}"
        );
        t["pg"]["3"]
            .as_table_mut()
            .unwrap()
            .insert("alpha".into(), Value::String("1/4".into()));
        let twice = rewrite(&once, &t).unwrap();
        assert!(
            twice.contains("# changed, was \"1/2\" (BUFFER_PROFILE|p|dynamic_th)"),
            "{twice}"
        );
        let note = "[pg.3]\nalpha = \"1\"  # a note\n";
        let mut t: Table = note.parse().unwrap();
        t["pg"]["3"]
            .as_table_mut()
            .unwrap()
            .insert("alpha".into(), Value::String("1/2".into()));
        assert!(rewrite(note, &t).unwrap().contains("# a note"));
    }

    /// A `[[port]]` removed or added keeps every other port's lines and comments with it; a
    /// port moved ahead of another is written plainly (its comments could not follow it).
    #[test]
    fn ports_removed_or_added_keep_their_comments() {
        let old = "[[port]]\nid = 0\nname = \"a\" # from A\n\n[[port]]\nid = 4\nname = \"b\" # from B\n\n\
                   [[port]]\nid = 8\nname = \"c\" # from C\n";
        let rewrite_ports = |f: &dyn Fn(&mut Vec<Value>)| {
            let mut t: Table = old.parse().unwrap();
            f(t.get_mut("port").unwrap().as_array_mut().unwrap());
            let text = rewrite(old, &t).unwrap();
            assert_eq!(text.parse::<Table>().unwrap(), t, "{text}");
            text
        };
        let text = rewrite_ports(&|p| {
            p.remove(0);
        });
        assert!(
            text.contains("name = \"b\" # from B") && text.contains("name = \"c\" # from C"),
            "{text}"
        );
        assert!(!text.contains("from A"), "{text}");
        let text = rewrite_ports(&|p| {
            p.truncate(2);
            p.push(Value::Table(Table::from_iter([("id".to_string(), Value::Integer(9))])));
        });
        assert!(
            text.contains("# from A") && text.contains("# from B") && !text.contains("from C"),
            "{text}"
        );
        let text = rewrite_ports(&|p| p.swap(0, 2));
        assert!(!text.contains("# from"), "{text}");
    }

    #[test]
    fn unparsable_old_text_is_replaced_whole() {
        let t: Table = TEXT.parse().unwrap();
        let out = rewrite("[not toml", &t).unwrap();
        assert_eq!(out.parse::<Table>().unwrap(), t);
    }

    /// A leaf path of the test config and what to do there.
    #[derive(Debug, Clone)]
    enum Edit {
        Set(Vec<String>, Value),
        Remove(Vec<String>),
        /// Sets a key in one `[[port]]` element (by index), or adds/removes an element.
        InPort(usize, String, Value),
        AddPort,
        DropPort,
    }

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i64>().prop_map(Value::from),
            "[a-z0-9/]{0,6}".prop_map(Value::from),
            prop::collection::vec(any::<i64>().prop_map(Value::from), 0..3).prop_map(Value::Array),
        ]
    }

    fn edit() -> impl Strategy<Value = Edit> {
        let key = prop::sample::select(vec!["pg", "3", "4", "ecn", "roce", "x", "port", "alpha"]);
        let path =
            prop::collection::vec(key.clone(), 1..4).prop_map(|p| p.into_iter().map(String::from).collect::<Vec<_>>());
        prop_oneof![
            (path.clone(), value()).prop_map(|(p, v)| Edit::Set(p, v)),
            path.prop_map(Edit::Remove),
            (0usize..3, key, value()).prop_map(|(i, k, v)| Edit::InPort(i, k.to_string(), v)),
            Just(Edit::AddPort),
            Just(Edit::DropPort),
        ]
    }

    proptest! {
        /// Whatever the edits (new keys at any depth, values replacing tables and the port
        /// array, removals), the text written parses to exactly the edited table.
        #[test]
        fn the_text_always_says_the_new_table(edits in prop::collection::vec(edit(), 1..8)) {
            let mut t: Table = TEXT.parse().unwrap();
            for e in edits {
                let (path, last) = match &e {
                    Edit::Set(p, _) | Edit::Remove(p) => (&p[..p.len() - 1], p[p.len() - 1].clone()),
                    Edit::InPort(i, k, v) => {
                        if let Some(Value::Array(ports)) = t.get_mut("port") {
                            if let Some(Value::Table(p)) = ports.get_mut(*i) {
                                p.insert(k.clone(), v.clone());
                            }
                        }
                        let out = rewrite(TEXT, &t).unwrap();
                        prop_assert_eq!(out.parse::<Table>().unwrap(), t.clone(), "{}", out);
                        continue;
                    }
                    Edit::AddPort | Edit::DropPort => {
                        if let Some(Value::Array(ports)) = t.get_mut("port") {
                            if matches!(e, Edit::AddPort) {
                                let mut p = Table::new();
                                p.insert("id".into(), Value::from(ports.len() as i64));
                                ports.push(Value::Table(p));
                            } else {
                                ports.pop();
                            }
                        }
                        let out = rewrite(TEXT, &t).unwrap();
                        prop_assert_eq!(out.parse::<Table>().unwrap(), t.clone(), "{}", out);
                        continue;
                    }
                };
                let mut cur = &mut t;
                for k in path {
                    let v = cur.entry(k.clone()).or_insert_with(|| Value::Table(Table::new()));
                    if !v.is_table() {
                        *v = Value::Table(Table::new());
                    }
                    cur = v.as_table_mut().unwrap();
                }
                match e {
                    Edit::Set(_, v) => { cur.insert(last, v); }
                    _ => { cur.remove(&last); }
                }
                let out = rewrite(TEXT, &t).unwrap();
                prop_assert_eq!(out.parse::<Table>().unwrap(), t.clone(), "{}", out);
            }
        }
    }
}
