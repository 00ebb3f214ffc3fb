//! Config patches: a TOML fragment merged into a whole config, as live tuning sends them
//! (`rocectl set`, `rocesw replay --schedule`). Tables merge key by key, recursively; any other
//! value (arrays included) replaces what was there. The result is validated as a whole.

use toml::{Table, Value};

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
            _ => out.push(path(k)),
        }
    }
    for k in new.keys().filter(|k| !old.contains_key(*k)) {
        out.push(path(k));
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
}
