//! Config patches: a TOML fragment merged into a whole config, as live tuning sends them
//! (`rocectl set`, `rocesw replay --schedule`). Tables merge key by key, recursively; any other
//! value (arrays included) replaces what was there. The result is validated as a whole.

use serde::Deserialize;
use toml::{Table, Value};

/// Checks a patch fragment (`rocectl patch`, `[patch]` over the control protocol) for keys
/// the config's schema does not have, so that a typo is reported at the fragment's own line:
/// merged into the running config first, the same typo was reported at a line of the merged
/// text (line 99 of a 3-line file). The fragment is read one table at a time, since a
/// fragment may leave a table's required keys to the config it is merged into (serde stops
/// at the first "missing field"); what this check cannot see (a wrong type, a missing key) is
/// left to the validation of the merged config.
pub fn check_fragment(text: &str) -> Result<(), String> {
    check_pieces(text, None, |doc| {
        toml::from_str::<crate::schema::ConfigFile>(doc).map(drop)
    })
}

/// As [`check_fragment`], for a `rocesw replay --schedule` file (`[[change]]` entries, each an
/// `at` and a `[change.patch]` fragment): a typo in a fragment is reported at its line of the
/// schedule file.
pub fn check_schedule(text: &str) -> Result<(), String> {
    // Only deserialized: reading it is the check.
    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Schedule {
        #[serde(default)]
        change: Vec<Change>,
    }
    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Change {
        #[serde(default)]
        patch: Option<crate::schema::ConfigFile>,
        /// `[change.port.NAME]`: each checked where the schedule is prepared, with the port.
        #[serde(default)]
        port: Option<toml::Table>,
    }
    check_pieces(text, Some("[[change]]"), |doc| {
        toml::from_str::<Schedule>(doc).map(drop)
    })
}

/// Reads `text` one piece at a time (cut before each table header, `[x]` or `[[x]]` at the
/// start of a line; a piece that is not the first gets `header`, if any, on a line before it,
/// so it reads as part of the array it belongs to) and reports the first unknown key.
///
/// A piece is read as it stands; only one with an unknown key is read again preceded by blank
/// lines, so the message gives its line in `text`. Padding every piece made the check
/// quadratic: a 20,000-entry schedule built 1.5 GiB of blank lines and took seconds to parse
/// them (issue 41 item 9).
fn check_pieces(
    text: &str,
    header: Option<&str>,
    parse: impl Fn(&str) -> Result<(), toml::de::Error>,
) -> Result<(), String> {
    let lines: Vec<&str> = text.lines().collect();
    let is_header = |l: &str| {
        let t = l.trim_start().trim_start_matches('[');
        l.trim_start().starts_with('[') && t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '"')
    };
    let mut starts: Vec<usize> = (0..lines.len()).filter(|&i| is_header(lines[i])).collect();
    if starts.first() != Some(&0) {
        starts.insert(0, 0);
    }
    let mut doc = String::new();
    for (k, &from) in starts.iter().enumerate() {
        let to = starts.get(k + 1).copied().unwrap_or(lines.len());
        let piece = |padded: bool, doc: &mut String| {
            doc.clear();
            if from > 0 {
                doc.push_str(header.unwrap_or(""));
                let blank = if padded { from } else { 1 };
                doc.extend(std::iter::repeat_n('\n', blank));
            }
            for l in &lines[from..to] {
                doc.push_str(l);
                doc.push('\n');
            }
        };
        piece(false, &mut doc);
        if unknown_keys(parse(&doc)).is_err() {
            piece(true, &mut doc);
            unknown_keys(parse(&doc))?;
        }
    }
    Ok(())
}

/// Only an unknown key is this check's to report (with a SONiC hint when it is one).
fn unknown_keys(r: Result<(), toml::de::Error>) -> Result<(), String> {
    match r {
        Err(e) if e.message().starts_with("unknown field") => Err(crate::syntax_message(&e)),
        _ => Ok(()),
    }
}

/// Merges `patch` into `base`.
pub fn merge(base: &mut Table, patch: Table) {
    for (key, value) in patch {
        match (base.get_mut(&key), value) {
            (Some(Value::Table(b)), Value::Table(p)) => merge(b, p),
            (_, v) => {
                base.insert(key, v);
            }
        }
    }
}

/// Merges `edit` into the `[[port]]` entry of `root` that `port` names (its `name`, or its id
/// as written): how `rocectl set port` and a `--schedule` step's `[change.port.NAME]` change one
/// port without a fragment's `[[port]]` array replacing every port. An unknown port is an
/// error listing the known ones.
pub fn merge_port(root: &mut Table, port: &str, edit: Table) -> Result<(), String> {
    let want = port.trim();
    let ports = root
        .get_mut("port")
        .and_then(Value::as_array_mut)
        .ok_or("the config has no [[port]]")?;
    let id = |p: &Table| p.get("id").and_then(Value::as_integer);
    let entry = ports.iter_mut().filter_map(Value::as_table_mut).find(|p| {
        p.get("name").and_then(Value::as_str) == Some(want) || id(p).map(|i| i.to_string()).as_deref() == Some(want)
    });
    match entry {
        Some(p) => {
            merge(p, edit);
            Ok(())
        }
        None => {
            let known: Vec<String> = ports
                .iter()
                .filter_map(Value::as_table)
                .map(|p| match (id(p), p.get("name").and_then(Value::as_str)) {
                    (Some(i), Some(n)) => format!("{i} ({n})"),
                    (Some(i), None) => i.to_string(),
                    _ => "?".into(),
                })
                .collect();
            Err(format!("the switch has no port {want:?} (ports: {})", known.join(", ")))
        }
    }
}

/// Dotted paths of every leaf value that differs between `old` and `new` (added, removed or
/// changed), sorted: what a change did, in the words of the config file.
pub fn changed_keys(old: &Table, new: &Table) -> Vec<String> {
    let mut out = Vec::new();
    diff("", old, new, &mut out);
    out.sort();
    out
}

fn diff(prefix: &str, old: &Table, new: &Table, out: &mut Vec<String>) {
    let path = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}.{k}")
        }
    };
    for (k, v) in old {
        match (v, new.get(k)) {
            (Value::Table(a), Some(Value::Table(b))) => diff(&path(k), a, b, out),
            (a, Some(b)) if a == b => {}
            // An array of tables that keeps its length (`[[port]]` with one port's PG
            // changed): the keys within it, `port[1].pg.3.alpha`, as `set ecn` names its own.
            (Value::Array(a), Some(Value::Array(b))) if a.len() == b.len() && tables(a) && tables(b) => {
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    if let (Value::Table(x), Value::Table(y)) = (x, y) {
                        diff(&format!("{}[{i}]", path(k)), x, y, out);
                    }
                }
            }
            _ => out.push(path(k)),
        }
    }
    for k in new.keys().filter(|k| !old.contains_key(*k)) {
        out.push(path(k));
    }
}

/// Whether every element of `a` is a table (an array of tables).
fn tables(a: &[Value]) -> bool {
    a.iter().all(Value::is_table)
}

/// A changed key as the user names the port it is in: `port[1].pg.3.alpha` of a port named
/// `Ethernet4` in `root` reads `Ethernet4.pg.3.alpha`; any other key as it is.
pub fn key_by_port_name(root: &Table, key: &str) -> String {
    let Some(rest) = key.strip_prefix("port[") else {
        return key.to_string();
    };
    let Some((i, tail)) = rest.split_once(']') else {
        return key.to_string();
    };
    let name = i
        .parse::<usize>()
        .ok()
        .and_then(|i| root.get("port")?.as_array()?.get(i)?.get("name")?.as_str());
    match (name, tail.strip_prefix('.')) {
        (Some(n), Some(tail)) => format!("{n}.{tail}"),
        _ => key.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Table {
        s.parse().unwrap()
    }

    #[test]
    fn tables_merge_and_other_values_replace() {
        let mut base = t("[ecn.roce]\nkmin = \"100KB\"\nkmax = \"400KB\"\n[pfc]\npriorities = [3]\n");
        merge(
            &mut base,
            t("[ecn.roce]\nkmax = \"200KB\"\n[pfc]\npriorities = [3, 4]\n"),
        );
        assert_eq!(
            base,
            t("[ecn.roce]\nkmin = \"100KB\"\nkmax = \"200KB\"\n[pfc]\npriorities = [3, 4]\n")
        );
    }

    #[test]
    fn changed_keys_name_every_leaf_that_moved() {
        let old = t("a = 1\n[b]\nc = 2\nd = 3\n");
        let new = t("a = 1\n[b]\nc = 5\ne = 6\n");
        assert_eq!(changed_keys(&old, &new), vec!["b.c", "b.d", "b.e"]);
        assert!(changed_keys(&old, &old).is_empty());
    }

    /// Issue 49 item 5: a change within one `[[port]]` names its keys, as a change of a global
    /// table does (it said `port`), and by the port's name where it has one.
    #[test]
    fn changed_keys_reach_into_an_array_of_tables() {
        let old = t("[[port]]\nid = 0\n[[port]]\nid = 4\nname = \"Ethernet4\"\n[port.pg.3]\nalpha = 1\n");
        let new = t("[[port]]\nid = 0\n[[port]]\nid = 4\nname = \"Ethernet4\"\n[port.pg.3]\nalpha = 2\n");
        let keys = changed_keys(&old, &new);
        assert_eq!(keys, ["port[1].pg.3.alpha"]);
        assert_eq!(key_by_port_name(&new, &keys[0]), "Ethernet4.pg.3.alpha");
        assert_eq!(key_by_port_name(&new, "port[0].speed"), "port[0].speed", "no name");
        assert_eq!(key_by_port_name(&new, "ecn.roce.kmax"), "ecn.roce.kmax");
        // A port added or removed moves the array as a whole.
        let fewer = t("[[port]]\nid = 0\n");
        assert_eq!(changed_keys(&old, &fewer), ["port"]);
    }

    /// Issue 23 item 9: a typo in a 4-line fragment is reported at line 4 of the fragment
    /// (merged first, it was reported at a line of the merged config); a SONiC name gets its
    /// hint; a key the fragment leaves to the config (the policer's burst) is no error.
    #[test]
    fn a_fragments_mistake_is_reported_at_its_own_line() {
        let e = check_fragment("# tighter\n\n[ecn.roce]\nkmn = \"10KB\"\n").unwrap_err();
        assert!(e.contains("line 4") && e.contains("unknown field `kmn`"), "{e}");
        let e = check_fragment("[pg.3]\nxoff = \"40KiB\"\n").unwrap_err();
        assert!(
            e.contains("line 2") && e.contains("hint: SONiC's `xoff` is rocesw's `headroom`"),
            "{e}"
        );
        // A table that leaves its required keys to the config does not hide a typo after it.
        let e = check_fragment("[ecn.roce]\nkmax = \"200KB\"\n[pfc.watchdog]\ndetection_tme = \"1s\"\n").unwrap_err();
        assert!(
            e.contains("line 4") && e.contains("unknown field `detection_tme`"),
            "{e}"
        );
        check_fragment("[cnp.policer]\nrate = \"3G\"\n").unwrap();
        check_fragment("[ecn.roce]\nkmax = \"200KB\"\n").unwrap();
        let sched = "[[change]]\nat = \"1ms\"\n[change.patch.ecn.roce]\nkmin = \"10KB\"\n\
                     [[change]]\nat = \"2ms\"\n[change.patch.ecn.roce]\nkmn = \"10KB\"\n";
        let e = check_schedule(sched).unwrap_err();
        assert!(e.contains("line 8") && e.contains("unknown field `kmn`"), "{e}");
        check_schedule("[[change]]\nat = \"1ms\"\n[change.patch.cnp.policer]\nrate = \"3G\"\n").unwrap();
    }
}
