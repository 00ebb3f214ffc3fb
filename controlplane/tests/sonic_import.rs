//! SONiC config_db.json import (issue 37): the project's two configs in SONiC's real format
//! (configs/sonic/, written from sonic-buildimage's templates for an SN2700 and a 7260CX3 T1)
//! load as switch configs with the platform's buffer rules, and wrong or hostile files get
//! errors naming `TABLE|key|field`, never a panic.

use controlplane::sonic::{import_text, ImportOptions};
use controlplane::{load_str, Config, PoolDir, SchedMode, Threshold, WatchdogAction};
use proptest::prelude::*;
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(name: &str) -> String {
    std::fs::read_to_string(repo().join("configs/sonic").join(name)).unwrap()
}

fn load(json: &str) -> Config {
    load_str(json).unwrap_or_else(|e| panic!("{e}")).config
}

/// `json` with the first `from` replaced by `to` (it must be there).
fn nudged(json: &str, from: &str, to: &str) -> String {
    assert!(json.contains(from), "{from} not in the file");
    json.replacen(from, to, 1)
}

/// Every problem of an import, joined.
fn errors(json: &str) -> String {
    match import_text(json, &ImportOptions::default()) {
        Ok(i) => panic!("imported:\n{}", i.toml),
        Err(e) => e.join("\n"),
    }
}

#[test]
fn spectrum1_config_loads_with_its_platforms_rules() {
    let c = load(&read("spectrum1-t1.json"));
    assert_eq!(c.buffer.cell_bytes, 96, "Spectrum-1's cell");
    let names: Vec<&str> = c.ports.iter().map(|p| p.name.as_deref().unwrap()).collect();
    assert_eq!(
        names,
        [
            "Ethernet0",
            "Ethernet4",
            "Ethernet8",
            "Ethernet12",
            "Ethernet16",
            "Ethernet20",
            "Ethernet24",
            "Ethernet28"
        ]
    );
    assert_eq!(
        c.ports.iter().map(|p| p.id).collect::<Vec<_>>(),
        [0, 4, 8, 12, 16, 20, 24, 28]
    );
    assert!(c
        .ports
        .iter()
        .all(|p| p.speed_bps == 100_000_000_000 && p.max_frame_bytes == 9100 + 18));
    // Pools: one ingress pool with a shared headroom pool, two egress pools.
    let ingress: Vec<_> = c.buffer.pools_of(PoolDir::Ingress).collect();
    assert_eq!(ingress.len(), 1);
    assert_eq!((ingress[0].size_bytes, ingress[0].headroom_bytes), (8_719_360, 323_520));
    assert_eq!(c.buffer.pools_of(PoolDir::Egress).count(), 2);
    // PG 3: with a shared headroom pool, size is the reserve (= xon) and two xoffs the
    // headroom cap (sonic-mgmt's generator: the first drop another xoff past the PG's own),
    // by cable: 5 m, 40 m, 300 m.
    for (port, xoff) in [(0, 23_552), (2, 29_696), (6, 78_848)] {
        let p = &c.ports[port];
        assert_eq!(p.pgs[3].min_bytes, 19_456, "{:?}", p.name);
        assert_eq!(p.headroom_bytes[3], 2 * xoff, "{:?}", p.name);
        assert_eq!(p.pgs[3].shared, Threshold::Dynamic { alpha: 1.0 });
        assert!(p.pgs[3].lossless && p.pgs[4].lossless && !p.pgs[0].lossless);
        // Queues 3 and 4: DWRR 15 with WRED; the lossy ones DWRR 14.
        assert_eq!(p.queues[3].sched, SchedMode::Wdrr { weight: 15 });
        assert_eq!(p.queues[0].sched, SchedMode::Wdrr { weight: 14 });
        assert_eq!(p.queues[3].shared, Threshold::Unlimited);
        assert_eq!(p.queues[0].shared, Threshold::Dynamic { alpha: 8.0 });
        let ecn = p.queues[3].ecn.as_ref().unwrap();
        assert_eq!(
            (ecn.kmin_bytes, ecn.kmax_bytes, ecn.pmax),
            (2_000_000, 10_000_000, 0.05)
        );
    }
    assert_eq!(c.pfc.enabled, [false, false, false, true, true, false, false, false]);
    let wd = c.pfc.watchdog.as_ref().unwrap();
    assert_eq!(
        (wd.detection_ns, wd.restoration_ns, wd.action),
        (200_000_000, 200_000_000, WatchdogAction::Drop)
    );
    // AZURE: DSCP 3 and 4 lossless, 48 (CNPs) to TC 6, the rest 1 but 8 → 0, 46 → 5.
    assert_eq!(
        [3, 4, 8, 26, 46, 48].map(|d| c.classify.dscp_to_tc[d]),
        [3, 4, 0, 1, 5, 6]
    );
}

#[test]
fn tomahawk2_config_loads_with_old_references_flat_keys_and_port_lists() {
    let json = read("tomahawk2-t1.json");
    assert!(json.contains("[BUFFER_PROFILE|") && json.contains("\"BUFFER_PG|Ethernet16|3-4\""));
    let i = import_text(&json, &ImportOptions::default()).unwrap();
    assert_eq!(i.platform.name, "tomahawk2");
    assert!(
        i.notes
            .iter()
            .any(|n| n.contains("BGP_NEIGHBOR") && n.contains("not read")),
        "{:?}",
        i.notes
    );
    let c = load(&json);
    assert_eq!(c.buffer.cell_bytes, 208);
    // Tomahawk 2: size is the guaranteed minimum, xoff the headroom beside it.
    for (port, xoff) in [(0, 59_696), (4, 101_088)] {
        let p = &c.ports[port];
        assert_eq!((p.pgs[3].min_bytes, p.headroom_bytes[3]), (1248, xoff), "{:?}", p.name);
        assert_eq!((p.pgs[3].xon_bytes, p.pgs[3].xon_offset_bytes), (1248, 2496));
    }
    // Every port got the lossy PG 0 and the queues from list keys.
    assert!(c
        .ports
        .iter()
        .all(|p| p.queues[0].sched == SchedMode::Wdrr { weight: 14 }));
}

/// The TOML an import writes names each value's origin, and is the config that runs.
#[test]
fn the_imported_toml_names_every_origin() {
    let i = import_text(&read("spectrum1-t1.json"), &ImportOptions::default()).unwrap();
    for origin in [
        "BUFFER_POOL|ingress_lossless_pool|xoff",
        "BUFFER_PROFILE|pg_lossless_100000_300m_profile|xoff",
        "PORT|Ethernet8|speed",
        "CABLE_LENGTH|AZURE|Ethernet24",
        "SCHEDULER|scheduler.1|weight",
        "WRED_PROFILE|AZURE_LOSSLESS|green_max_threshold",
        "PFC_WD|Ethernet0|detection_time",
    ] {
        assert!(i.toml.contains(origin), "{origin} not named");
    }
    assert_eq!(load(&i.toml), load(&read("spectrum1-t1.json")));
    // Its header says its comments are origins (what `rocectl show buffer` shows them as); a
    // hand-written config's comments are notes.
    assert!(controlplane::sonic::comments_are_origins(&i.toml));
    assert!(!controlplane::sonic::comments_are_origins(
        controlplane::DEFAULT_PROFILE
    ));
}

/// Wrong files: each problem is an error naming its TABLE|key|field, all at once.
#[test]
fn errors_name_table_key_and_field() {
    let json = read("spectrum1-t1.json");
    for (from, to, want) in [
        (
            "\"xoff\": \"23552\"",
            "\"xof\": \"23552\"",
            "BUFFER_PROFILE|pg_lossless_100000_5m_profile|xof: unknown field",
        ),
        (
            "\"pool\": \"egress_lossy_pool\"",
            "\"pool\": \"egress_nowhere_pool\"",
            "BUFFER_POOL|egress_nowhere_pool is not defined",
        ),
        (
            "\"scheduler\": \"scheduler.1\"",
            "\"scheduler\": \"scheduler.9\"",
            "QUEUE|Ethernet0|3|scheduler: SCHEDULER|scheduler.9 is not defined",
        ),
        (
            "\"speed\": \"100000\"",
            "\"speed\": \"fast\"",
            "PORT|Ethernet0|speed: \"fast\" is not a whole number",
        ),
        (
            "\"dynamic_th\": \"0\"",
            "\"dynamic_th\": \"9\"",
            "dynamic_th: 9 is outside -8..=7",
        ),
        (
            "\"ecn\": \"ecn_all\"",
            "\"ecn\": \"ecn_none\"",
            "WRED_PROFILE|AZURE_LOSSLESS|ecn: ecn_none",
        ),
        (
            "\"platform\": \"x86_64-mlnx_msn2700-r0\"",
            "\"platform\": \"x86_64-acme_9000-r0\"",
            "DEVICE_METADATA|localhost|platform",
        ),
        // pfc_enable is per port (qosorch applies it so): one port without priority 4 keeps
        // a lossless profile on PG 4, which is the contradiction named.
        (
            "\"pfc_enable\": \"3,4\"",
            "\"pfc_enable\": \"3\"",
            "has an xoff (lossless), but no PFC priority of Ethernet0 (its pfc_enable) maps to PG 4",
        ),
        (
            "\"Ethernet8\": \"40m\"",
            "\"Ethernet9\": \"40m\"",
            "CABLE_LENGTH|AZURE|Ethernet9: not a port",
        ),
    ] {
        let text = nudged(&json, from, to);
        let e = import_text(&text, &ImportOptions::default())
            .map(|_| format!("{to}: imported"))
            .unwrap_or_else(|e| e.join("\n"));
        assert!(e.contains(want), "{to}: wanted {want:?} in\n{e}");
    }
    // A lossless PG bound to a profile without xoff: a contradiction, named.
    let lossy = nudged(
        &json,
        "\"profile\": \"pg_lossless_100000_5m_profile\"",
        "\"profile\": \"ingress_lossy_profile\"",
    );
    let e = errors(&lossy);
    assert!(e.contains("BUFFER_PG|Ethernet0|3-4|profile: PG 3 is lossless"), "{e}");
    // Two problems at once are both reported.
    let two = json.replacen("\"xoff\": \"23552\"", "\"xof\": \"23552\"", 1).replacen(
        "\"speed\": \"100000\"",
        "\"speed\": \"x\"",
        1,
    );
    let e = errors(&two);
    assert!(e.contains("|xof: unknown field") && e.contains("|speed: \"x\""), "{e}");
    // --platform overrides DEVICE_METADATA, and an unknown one lists those there are.
    let opts = ImportOptions {
        platform: Some("spectrum9".into()),
        ..ImportOptions::default()
    };
    let e = import_text(&json, &opts).unwrap_err().join("\n");
    assert!(
        e.contains("--platform: \"spectrum9\"") && e.contains("tomahawk2"),
        "{e}"
    );
}

/// A traditional config without lossless PG profiles gets them from the platform's
/// pg_profile_lookup.ini by speed and cable (as buffermgrd makes them); without the file, the
/// error says to give it.
#[test]
fn lossless_profiles_come_from_the_lookup_table_when_the_file_has_none() {
    let json = read("spectrum1-t1.json");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let mut v = v;
    let pgs = v["BUFFER_PG"].as_object_mut().unwrap();
    pgs.retain(|k, _| !k.ends_with("|3-4"));
    let stripped = serde_json::to_string_pretty(&v).unwrap();
    let e = errors(&stripped);
    assert!(
        e.contains("BUFFER_PG|Ethernet0|3|profile: missing") && e.contains("--pg-lookup"),
        "{e}"
    );
    let opts = ImportOptions {
        pg_lookup: Some((read("pg_profile_lookup_spectrum1.ini"), "pg_profile_lookup.ini".into())),
        ..ImportOptions::default()
    };
    let i = import_text(&stripped, &opts).unwrap_or_else(|e| panic!("{e:#?}"));
    let c = load_str(&i.toml).unwrap().config;
    let original = load(&json);
    for (a, b) in c.ports.iter().zip(&original.ports) {
        assert_eq!(
            (a.pgs[3].min_bytes, a.headroom_bytes[3]),
            (b.pgs[3].min_bytes, b.headroom_bytes[3]),
            "{:?}",
            a.name
        );
    }
    assert!(
        i.toml.contains("pg_profile_lookup.ini:"),
        "the row is named as the origin"
    );
    // A table without the 100G 300m row: buffermgrd makes no PG for Ethernet24 and 28 (their
    // cables are 300m), so their PGs 3 and 4 are lossy, said once; the others keep theirs.
    let table: String = read("pg_profile_lookup_spectrum1.ini")
        .lines()
        .filter(|l| !(l.split_whitespace().next() == Some("100000") && l.contains("300m")))
        .map(|l| format!("{l}\n"))
        .collect();
    let opts = ImportOptions {
        pg_lookup: Some((table, "pg_profile_lookup.ini".into())),
        ..ImportOptions::default()
    };
    let i = import_text(&stripped, &opts).unwrap_or_else(|e| panic!("{e:#?}"));
    let notes: Vec<&String> = i.notes.iter().filter(|n| n.contains("has no row for")).collect();
    assert_eq!(notes.len(), 1, "{:?}", i.notes);
    assert!(
        notes[0].contains("Ethernet24 (100000 Mb/s, 300m), Ethernet28"),
        "{}",
        notes[0]
    );
    let c = load_str(&i.toml).unwrap().config;
    for p in &c.ports {
        let far = matches!(p.name.as_deref(), Some("Ethernet24" | "Ethernet28"));
        assert_eq!(p.pgs[3].lossless, !far, "{:?}", p.name);
        assert_eq!(p.pfc_enabled[3], !far, "{:?}", p.name);
    }
}

/// The dynamic buffer model (`"profile": "NULL"`): the headroom NVIDIA's formula gives.
#[test]
fn null_profiles_get_the_formulas_headroom() {
    let json = read("spectrum1-t1.json");
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    for (k, pg) in v["BUFFER_PG"].as_object_mut().unwrap() {
        if k.ends_with("|3-4") {
            pg["profile"] = "NULL".into();
        }
    }
    v["LOSSLESS_TRAFFIC_PATTERN"] = serde_json::json!({"AZURE": {"mtu": "1024", "small_packet_percentage": "50"}});
    let c = load(&serde_json::to_string(&v).unwrap());
    // Ethernet0 (5 m, 100G, MTU 9100) with the shared headroom pool: xoff 41984, size 19456
    // (configs/sonic/README.md §6.3's worked example); the PG may take two xoffs of the pool.
    assert_eq!(
        (c.ports[0].pgs[3].min_bytes, c.ports[0].headroom_bytes[3]),
        (19_456, 2 * 41_984)
    );
    assert!(
        c.ports[6].headroom_bytes[3] > c.ports[2].headroom_bytes[3],
        "a longer cable, more headroom"
    );
}

/// `[buffer.pool.NAME]` in rocesw's own TOML: what is wrong is named.
#[test]
fn pools_in_toml_are_checked() {
    let base = include_str!("../../configs/default.toml");
    let with = |pools: &str, pg: &str| {
        base.replacen("\n[port_defaults]", &format!("\n{pools}\n[port_defaults]"), 1)
            .replacen("[pg.3]\n", &format!("[pg.3]\n{pg}"), 1)
    };
    let two = "[buffer.pool.a]\ntype = \"ingress\"\nsize = \"1MiB\"\n[buffer.pool.b]\ntype = \"ingress\"\nsize = \"1MiB\"\n[buffer.pool.e]\ntype = \"egress\"\nsize = \"2MiB\"\n";
    for (pools, pg, want) in [
        ("", "pool = \"a\"\n", "pg.3.pool: \"a\", but no [buffer.pool.a] is configured"),
        (two, "pool = \"z\"\n", "pg.3.pool: \"z\" is not configured; the ingress pools are: a, b"),
        (two, "pool = \"e\"\n", "pg.3.pool: \"e\" is not an ingress pool"),
        (two, "", "pg.0.pool: missing; there are 2 ingress pools"),
        ("[buffer.pool.a]\nsize = \"1MiB\"\n", "", "buffer.pool.a.type: missing"),
        ("[buffer.pool.a]\ntype = \"ingress\"\nsize = \"1MiB\"\n", "", "buffer.pool: no egress pool"),
        (
            "[buffer.pool.a]\ntype = \"ingress\"\nsize = \"1MiB\"\n[buffer.pool.e]\ntype = \"egress\"\nsize = \"1MiB\"\nheadroom = \"1KiB\"\n",
            "",
            "buffer.pool.e.headroom: only an ingress pool",
        ),
        (
            "[buffer.pool.a]\ntype = \"ingress\"\nsize = \"64MiB\"\n[buffer.pool.e]\ntype = \"egress\"\nsize = \"1MiB\"\n",
            "",
            "cells short: the ingress pools",
        ),
    ] {
        let text = with(pools, pg);
        let text = if want.contains("cells short") { text.replace("size = \"4MiB\"", "size = \"8MiB\"") } else { text };
        let e = load_str(&text).unwrap_err().to_string();
        assert!(e.contains(want), "wanted {want:?} in\n{e}");
    }
    // Any cell size from 64 B: Spectrum's 96, Tomahawk 2's 208.
    let c = load_str(&base.replace("cell = \"256B\"", "cell = \"208B\""))
        .unwrap()
        .config;
    assert_eq!(c.buffer.cell_bytes, 208);
}

/// Hostile JSON: the importer answers with errors, never a panic, and what it holds is bounded
/// by the file (it keeps strings of the file, nothing that grows with a number in it).
fn hostile() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("\"100000\"".to_string()),
        Just("\"[BUFFER_PROFILE|p]\"".to_string()),
        Just("\"[BUFFER_POOL|x]\"".to_string()),
        Just("\"NULL\"".to_string()),
        Just("1e999999".to_string()),
        Just("18446744073709551616999".to_string()),
        Just("-9223372036854775809".to_string()),
        Just("\"-99999999999999999999\"".to_string()),
        Just("\"3-4\"".to_string()),
        Just("null".to_string()),
        Just("true".to_string()),
        "\"[a-zA-Z0-9|,\\-\\[\\] ]{0,12}\"".prop_map(|s| s),
    ];
    let value = leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((key(), inner), 0..5).prop_map(|kv| {
                let kv: Vec<String> = kv.into_iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
                format!("{{{}}}", kv.join(","))
            }),
        ]
    });
    prop::collection::vec((key(), value), 0..8).prop_map(|kv| {
        let kv: Vec<String> = kv.into_iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
        format!("{{{}}}", kv.join(","))
    })
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "PORT",
            "BUFFER_POOL",
            "BUFFER_PROFILE",
            "BUFFER_PG",
            "BUFFER_QUEUE",
            "PORT_QOS_MAP",
            "DSCP_TO_TC_MAP",
            "SCHEDULER",
            "QUEUE",
            "WRED_PROFILE",
            "PFC_WD",
            "CABLE_LENGTH",
            "DEVICE_METADATA",
            "localhost",
            "platform",
            "Ethernet0",
            "Ethernet0|3-4",
            "BUFFER_PG|Ethernet0|3-4",
            "BUFFER_PROFILE|p",
            "pool",
            "profile",
            "size",
            "xoff",
            "dynamic_th",
            "speed",
            "type",
            "value",
            "GLOBAL",
            "global",
            "AZURE",
        ])
        .prop_map(str::to_string),
        "[A-Z_|a-z0-9,\\-]{0,10}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn hostile_json_gets_errors_not_panics(text in hostile()) {
        let _ = import_text(&text, &ImportOptions::default());
        let _ = load_str(&text);
        // With a platform given too, the tables are read further.
        let opts = ImportOptions { platform: Some("spectrum1".into()), ..ImportOptions::default() };
        if let Ok(i) = import_text(&text, &opts) {
            // What it writes is bounded by what it read.
            prop_assert!(i.toml.len() < 64 * 1024 + 64 * text.len());
        }
    }

    /// The real file with one value replaced by anything: an error or a config, never a panic.
    #[test]
    fn any_value_in_a_real_file(at in 0usize..2000, with in "\"[a-zA-Z0-9|,\\-\\[\\] ]{0,8}\"") {
        let json = read("spectrum1-t1.json");
        let quoted: Vec<(usize, usize)> = json.match_indices('"').map(|(i, _)| i).collect::<Vec<_>>()
            .chunks(2).filter(|c| c.len() == 2).map(|c| (c[0], c[1] + 1)).collect();
        let (s, e) = quoted[at % quoted.len()];
        let text = format!("{}{}{}", &json[..s], with, &json[e..]);
        let _ = load_str(&text);
    }
}

#[test]
fn a_hostile_depth_or_size_is_refused() {
    let deep = format!("{{\"PORT\": {}{}}}", "[".repeat(200_000), "]".repeat(200_000));
    assert!(import_text(&deep, &ImportOptions::default()).is_err());
    let big = format!("{{\"PORT\": {{\"x\": {{\"d\": \"{}\"}}}}}}", "a".repeat(65 << 20));
    let e = import_text(&big, &ImportOptions::default()).unwrap_err().join("");
    assert!(e.contains("larger than the 64 MiB"), "{e}");
}

/// Import → export → re-import gives the same switch: with nothing changed the patch is empty;
/// with tuned values (a lossless PG's dynamic_th and headroom, the WRED thresholds) the patch
/// touches exactly those fields, and the patched file imports to the tuned switch.
#[test]
fn import_export_reimport_round_trips() {
    use controlplane::sonic::export::export;
    for file in ["spectrum1-t1.json", "tomahawk2-t1.json"] {
        let json = read(file);
        let opts = ImportOptions::default();
        let base = load(&json);
        let same = export(&json, &opts, &base).unwrap_or_else(|e| panic!("{e:#?}"));
        assert_eq!(same.patch, serde_json::json!([]), "{file}: nothing changed");
        assert!(same.changes.is_empty());
        // Tune: PG 3 and 4 one dynamic_th step up on every port, Ethernet24's headroom (a
        // 300 m profile all 300 m ports share: set on all of them alike), kmin of the WRED.
        let mut tuned = base.clone();
        let long: Vec<usize> = (0..tuned.ports.len())
            .filter(|&i| {
                tuned.ports[i].headroom_bytes[3] == base.ports.iter().map(|p| p.headroom_bytes[3]).max().unwrap()
            })
            .collect();
        for (i, p) in tuned.ports.iter_mut().enumerate() {
            for g in [3, 4] {
                p.pgs[g].shared = Threshold::Dynamic { alpha: 2.0 };
                if long.contains(&i) {
                    p.headroom_bytes[g] += 1024;
                }
            }
            for q in [3, 4] {
                if let Some(e) = p.queues[q].ecn.as_mut() {
                    e.kmin_bytes = 1_500_000;
                }
            }
        }
        let out = export(&json, &opts, &tuned).unwrap_or_else(|e| panic!("{file}: {e:#?}"));
        let ops = out.patch.as_array().unwrap();
        assert!(!ops.is_empty());
        for op in ops {
            assert_eq!(op["op"], "replace", "{op}");
            let path = op["path"].as_str().unwrap();
            assert!(
                ["dynamic_th", "xoff", "size", "green_min_threshold"]
                    .iter()
                    .any(|f| path.ends_with(f)),
                "{file}: only the tuned fields change: {path}"
            );
        }
        assert!(
            out.changes.iter().any(|c| c.contains("|dynamic_th: 0 → 1")),
            "{:?}",
            out.changes
        );
        assert!(
            out.changes
                .iter()
                .any(|c| c.contains("green_min_threshold: 2000000 → 1500000")),
            "{:?}",
            out.changes
        );
        // Apply it as SONiC would, and import again.
        let mut doc: serde_json::Value = serde_json::from_str(&json).unwrap();
        let patch: json_patch::Patch = serde_json::from_value(out.patch.clone()).unwrap();
        json_patch::patch(&mut doc, &patch).unwrap();
        let again = load(&doc.to_string());
        for (a, b) in again.ports.iter().zip(&tuned.ports) {
            assert_eq!(a.pgs, b.pgs, "{file} {:?}", a.name);
            assert_eq!(a.headroom_bytes, b.headroom_bytes, "{file} {:?}", a.name);
            assert_eq!(a.queues[3].ecn, b.queues[3].ecn, "{file} {:?}", a.name);
        }
        assert_eq!(load(&out.patched), again);
    }
}

/// What the file cannot say is refused by name: an alpha that is no power of two, and one
/// profile shared by ports the target sets apart.
#[test]
fn export_refuses_what_sonic_cannot_say() {
    use controlplane::sonic::export::export;
    let json = read("spectrum1-t1.json");
    let base = load(&json);
    let mut odd = base.clone();
    odd.ports[0].pgs[3].shared = Threshold::Dynamic { alpha: 0.3 };
    let e = export(&json, &ImportOptions::default(), &odd).unwrap_err().join("\n");
    assert!(e.contains("Ethernet0 PG 3: alpha 0.3 is not 2^n"), "{e}");
    let mut apart = base.clone();
    apart.ports[0].headroom_bytes[3] += 96; // Ethernet0 and Ethernet4 share the 5 m profile
    let e = export(&json, &ImportOptions::default(), &apart).unwrap_err().join("\n");
    assert!(
        e.contains("BUFFER_PROFILE|pg_lossless_100000_5m_profile|xoff") && e.contains("share a profile"),
        "{e}"
    );
}

/// A switch started on a config_db.json, or given one by `rocectl apply`, runs the TOML it
/// imports to: that is the text `rocectl show config` prints and later edits change.
#[test]
fn a_running_switch_keeps_the_imported_toml() {
    use controlplane::change::{Edit, Running};
    let json = read("spectrum1-t1.json");
    let r = Running::load(json.clone()).unwrap();
    assert!(
        r.text.starts_with("# Imported from a SONiC config_db.json"),
        "{}",
        &r.text[..80]
    );
    let p = r.prepare(Edit::Fragment("[pg.3]\ndynamic_th = 1\n")).unwrap();
    assert!(p.text.contains("dynamic_th = 1"));
    let whole = r.prepare(Edit::Whole(&read("tomahawk2-t1.json")));
    // Another switch's file is refused as a live change (other ports' pools), not as unreadable.
    let reason = whole.err().map(|e| e.reason()).unwrap_or_default();
    assert!(!reason.contains("invalid config: TOML"), "{reason}");
    let same = r.prepare(Edit::Whole(&json)).unwrap();
    assert!(same.text.starts_with("# Imported from a SONiC config_db.json"));
}

/// A value that is not a string: refused where rocesw reads the field, ignored where it does
/// not (a real render has `"region": null` in DEVICE_METADATA).
#[test]
fn non_strings_matter_only_where_read() {
    let json = read("spectrum1-t1.json");
    let e = errors(&nudged(&json, "\"speed\": \"100000\"", "\"speed\": 100000"));
    assert!(
        e.contains("PORT|Ethernet0|speed: a number: a string is expected"),
        "{e}"
    );
    let ignored = nudged(
        &json,
        "\"speed\": \"100000\"",
        "\"alias\": null, \"description\": {}, \"speed\": \"100000\"",
    );
    assert_eq!(load(&ignored), load(&json));
}
