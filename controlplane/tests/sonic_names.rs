//! Names from a config_db.json are data, never TOML syntax (issue 46 item 1): the importer
//! writes its TOML with toml_edit's own types, so any name round-trips and the TOML that runs
//! describes the switch the file describes. And each value's comment says where it came from
//! (issue 45 item 4): derived values say how, and no comment names a field its source lacks.

use controlplane::sonic::{import_text, ImportOptions};
use controlplane::{load_str, Config};
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join("configs/sonic").join(path)).unwrap()
}

/// `json` with every string `from` (a whole JSON string, or a key's part before `|`) renamed
/// to `to`, JSON-escaped.
fn renamed(json: &str, from: &str, to: &str) -> String {
    let esc = serde_json::to_string(to).unwrap();
    let inner = &esc[1..esc.len() - 1];
    let whole = format!("\"{from}\"");
    let part = format!("\"{from}|");
    assert!(json.contains(&whole), "{from} not in the file");
    json.replace(&whole, &esc).replace(&part, &format!("\"{inner}|"))
}

fn import(json: &str) -> controlplane::sonic::Imported {
    import_text(json, &ImportOptions::default()).unwrap_or_else(|e| panic!("{}", e.join("\n")))
}

fn load(toml: &str) -> Config {
    load_str(toml).unwrap_or_else(|e| panic!("{e}\n{toml}")).config
}

/// The switch a config describes, with `hostile` written back as `plain` wherever it is a name:
/// equal to the plain file's switch when the name round-tripped and nothing else changed.
fn described(c: &Config, names: &[(&str, &str)]) -> String {
    let mut d = format!("{c:?}");
    for (plain, hostile) in names {
        d = d.replace(&format!("{hostile:?}"), &format!("{plain:?}"));
    }
    d
}

/// A newline in a scheduler's name used to end the comment naming it and start TOML: a
/// `[[port]]` on `lo` the JSON never mentions. Now the name stays in its comment.
#[test]
fn a_newline_in_a_name_adds_no_port() {
    let plain = read("spectrum1-t1.json");
    let hostile = "scheduler.1\n[[port]]\nid = 9999\nname = \"lo\"\ninterface = \"lo\"";
    let json = renamed(&plain, "scheduler.1", hostile);
    let i = import(&json);
    assert_eq!(i.ports.len(), 8);
    let c = load(&i.toml);
    assert_eq!(c.ports.len(), 8, "{}", i.toml);
    assert!(c.ports.iter().all(|p| p.interface.is_none() && p.id != 9999));
    // The name is still said, escaped, in the comment of the values it gave.
    assert!(
        i.toml.contains("SCHEDULER|scheduler.1\\n[[port]]\\nid = 9999"),
        "{}",
        i.toml
    );
    assert_eq!(
        described(&c, &[]),
        described(&load(&import(&plain).toml), &[]),
        "the same switch"
    );
}

/// A pool named with spaces used to be written as a bare key: "TOML parse error at line 10".
#[test]
fn a_pool_named_with_spaces_round_trips() {
    let plain = read("spectrum1-t1.json");
    let json = renamed(&plain, "egress_lossy_pool", "egress lossy pool");
    let i = import(&json);
    assert!(i.toml.contains("[buffer.pool.\"egress lossy pool\"]"), "{}", i.toml);
    let c = load(&i.toml);
    // The same pools (the renamed one sorts elsewhere, so compare by name).
    let pools = |c: &Config| {
        let mut v: Vec<String> = c
            .buffer
            .pools
            .iter()
            .map(|p| {
                format!(
                    "{:?} {:?} {}",
                    p.name.replace("egress lossy pool", "egress_lossy_pool"),
                    p.dir,
                    p.size_bytes
                )
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(pools(&c), pools(&load(&import(&plain).toml)));
    assert_eq!(c.ports.len(), 8);
}

/// Quotes, backslashes, brackets, `=`, `#` and unicode in every kind of name: pools, profiles,
/// schedulers, WRED profiles and ports all round-trip, and the switch is the same.
#[test]
fn hostile_names_of_every_kind_round_trip() {
    let plain = read("spectrum1-t1.json");
    let names = [
        ("ingress_lossless_pool", "ingress \"lossless\" pool ] = 1 # ü"),
        // Sorts where the plain name does (after egress_lossless_pool): pool indices stay.
        ("egress_lossy_pool", "egress_lossy\\ \"pool\""),
        ("scheduler.1", "sch'1\" ]]\r\n[pfc]"),
        ("AZURE_LOSSLESS", "AZURE \u{1F600} lossless = \"x\""),
        ("Ethernet4", "Ethernet \"é\" ]#4"),
    ];
    let mut json = plain.clone();
    for (from, to) in names {
        json = renamed(&json, from, to);
    }
    let i = import(&json);
    let c = load(&i.toml);
    let port_names: Vec<&str> = c.ports.iter().filter_map(|p| p.name.as_deref()).collect();
    assert!(port_names.contains(&"Ethernet \"é\" ]#4"), "{port_names:?}");
    assert_eq!(c.ports.len(), 8);
    assert_eq!(described(&c, &names), described(&load(&import(&plain).toml), &[]));
}

/// Each `BUFFER_PROFILE|name|field` a comment names, in `toml`.
fn profile_fields(toml: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in toml.lines() {
        let Some((_, comment)) = line.split_once('#') else {
            continue;
        };
        let mut rest = comment;
        while let Some(at) = rest.find("BUFFER_PROFILE|") {
            let tail = &rest[at + "BUFFER_PROFILE|".len()..];
            let mut parts = tail.splitn(2, '|');
            let name = parts.next().unwrap_or("");
            let field: String = parts
                .next()
                .unwrap_or("")
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !field.is_empty() && !name.contains(' ') {
                out.push((name.to_string(), field));
            }
            rest = tail;
        }
    }
    out
}

/// No comment names a field its profile does not have, and a reserve derived from two fields
/// says so (`size − xoff`), on the hand-written Spectrum-1 file (whose lossless profiles have
/// no xon_offset) and on the real ACS-MSN2700 render.
#[test]
fn comments_name_only_fields_the_profile_has() {
    for (file, derived, opts) in [
        // A shared headroom pool: size is xon, the xoff is pooled.
        (
            "spectrum1-t1.json",
            "size is xon; the xoff is in the shared headroom pool",
            ImportOptions::default(),
        ),
        // No shared headroom pool: the reserve is size − xoff.
        (
            "rendered/acs-msn2700-t1.json",
            "size − xoff",
            ImportOptions {
                platform: Some("spectrum1".into()),
                pg_lookup: Some((
                    read("rendered/acs-msn2700.pg_profile_lookup.ini"),
                    "acs-msn2700.pg_profile_lookup.ini".into(),
                )),
                source: None,
            },
        ),
    ] {
        let json = read(file);
        let db: serde_json::Value = serde_json::from_str(&json).unwrap();
        let i = import_text(&json, &opts).unwrap_or_else(|e| panic!("{file}: {}", e.join("\n")));
        let named = profile_fields(&i.toml);
        assert!(!named.is_empty(), "{file}: no profile named");
        for (name, field) in named {
            let has = db["BUFFER_PROFILE"][&name].get(&field).is_some();
            assert!(
                has,
                "{file}: a comment names BUFFER_PROFILE|{name}|{field}, which it lacks"
            );
        }
        // Spectrum: how the reserve was derived from size, said with the fields it used.
        let min_lines: Vec<&str> = i
            .toml
            .lines()
            .filter(|l| l.starts_with("min = ") && l.contains(derived))
            .collect();
        assert!(
            !min_lines.is_empty(),
            "{file}: no derived reserve explained\n{}",
            i.toml
        );
        for l in min_lines {
            assert!(l.contains("|size") || l.contains(": size"), "{l}");
            if derived.contains('−') {
                assert!(l.contains("|xoff") || l.contains(": xoff"), "{l}");
            }
        }
        // An xon_offset the profile lacks is called the default, naming no field.
        assert!(
            i.toml
                .lines()
                .filter(|l| l.starts_with("xon_offset = "))
                .all(|l| l.contains("has no xon_offset") || l.contains("|xon_offset") || l.contains(": xon_offset")),
            "{file}"
        );
    }
}

/// A map's name becomes a map set's (`[classify.map.NAME]`) and a port's `classify = NAME`:
/// a hostile one round-trips too, and the switch is the same.
#[test]
fn a_hostile_map_name_round_trips_as_a_map_set() {
    let dir = repo().join("configs/sonic/rendered");
    let file = |n: &str| std::fs::read_to_string(dir.join(n)).unwrap();
    let opts = ImportOptions {
        platform: Some("tomahawk2".into()),
        pg_lookup: Some((file("arista-7260cx3-c64.pg_profile_lookup.ini"), "lookup".into())),
        source: None,
    };
    let plain = file("arista-7260cx3-c64-t1-remap.json");
    let hostile = "UP \"link\" ]\n[[port]]\nid = 7 # é";
    let names = [("AZURE_UPLINK", hostile)];
    let json = renamed(&plain, "AZURE_UPLINK", hostile);
    let imp = |j: &str| import_text(j, &opts).unwrap_or_else(|e| panic!("{}", e.join("\n")));
    let c = load(&imp(&json).toml);
    assert_eq!(c.classify.sets.len(), 1);
    assert_eq!(c.classify.sets[0].name, hostile);
    assert_eq!(c.ports.len(), 66);
    assert_eq!(c.ports.iter().filter(|p| p.map_set == Some(0)).count(), 8);
    assert_eq!(described(&c, &names), described(&load(&imp(&plain).toml), &[]));
}
