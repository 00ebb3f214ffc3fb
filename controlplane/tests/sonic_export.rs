//! Issue 45 item 3: export finishes the loop. Every kind of change the control plane or the
//! tuner makes goes back to a config_db.json as an RFC 6902 patch, applied here by an
//! independent implementation (Python's `jsonpatch`, not the `json_patch` crate export uses),
//! and the patched file imports to the changed switch. What the file cannot say is refused by
//! name; a change is never reported as "no change".

use controlplane::sonic::export::export;
use controlplane::sonic::{import_text, ImportOptions};
use controlplane::{load_str, Config, SchedMode, Threshold};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(name: &str) -> String {
    std::fs::read_to_string(repo().join("configs/sonic").join(name)).unwrap()
}

fn import(json: &str, opts: &ImportOptions) -> Config {
    let i = import_text(json, opts).unwrap_or_else(|e| panic!("{e:#?}"));
    load_str(&i.toml).unwrap_or_else(|e| panic!("{e}")).config
}

/// `doc` with `patch` applied by Python's jsonpatch (RFC 6902): .ci/install-deps installs it
/// (Debian's python3-jsonpatch).
fn apply_with_python(doc: &str, patch: &serde_json::Value) -> String {
    let dir = tempfile::tempdir().unwrap();
    let (d, p) = (dir.path().join("doc.json"), dir.path().join("patch.json"));
    std::fs::write(&d, doc).unwrap();
    std::fs::write(&p, patch.to_string()).unwrap();
    let script = "import json, sys, jsonpatch\n\
                  doc = json.load(open(sys.argv[1]))\n\
                  patch = jsonpatch.JsonPatch(json.load(open(sys.argv[2])))\n\
                  json.dump(patch.apply(doc), sys.stdout)\n";
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&d)
        .arg(&p)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::piped())
        .spawn()
        .expect("python3 (with jsonpatch: .ci/install-deps) runs");
    child.stdin.take().unwrap().flush().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "python3 jsonpatch failed (is python3-jsonpatch installed? .ci/install-deps): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Import → change → export → apply with Python's jsonpatch → import: the change is there,
/// and nothing else moved. Returns the export's lines of change.
fn round_trip(json: &str, opts: &ImportOptions, what: &str, change: impl Fn(&mut Config)) -> Vec<String> {
    let base = import(json, opts);
    let mut target = base.clone();
    change(&mut target);
    assert_ne!(target, base, "{what}: the change changes something");
    let out = export(json, opts, &target).unwrap_or_else(|e| panic!("{what}: {e:#?}"));
    assert!(!out.changes.is_empty(), "{what}: a change is never \"no change\"");
    assert_ne!(out.patch, serde_json::json!([]), "{what}");
    let patched = apply_with_python(json, &out.patch);
    let again = import(&patched, opts);
    assert_eq!(again.classify, target.classify, "{what}: classify");
    assert_eq!(again.pfc, target.pfc, "{what}: pfc");
    for (a, b) in again.ports.iter().zip(&target.ports) {
        assert_eq!(a.pfc_enabled, b.pfc_enabled, "{what}: {:?} pfc", a.name);
        assert_eq!(a.map_set, b.map_set, "{what}: {:?} map set", a.name);
        assert_eq!(a.pgs, b.pgs, "{what}: {:?} PGs", a.name);
        assert_eq!(a.headroom_bytes, b.headroom_bytes, "{what}: {:?} headroom", a.name);
        assert_eq!(a.queues, b.queues, "{what}: {:?} queues", a.name);
    }
    // The same file as export's own application of its patch.
    let own: serde_json::Value = serde_json::from_str(&out.patched).unwrap();
    let theirs: serde_json::Value = serde_json::from_str(&patched).unwrap();
    assert_eq!(own, theirs, "{what}: jsonpatch and export agree on the patched file");
    out.changes
}

fn each_port(c: &mut Config, f: impl Fn(&mut controlplane::PortConfig)) {
    for p in &mut c.ports {
        f(p);
    }
}

#[test]
fn every_kind_of_change_round_trips_through_an_independent_patch() {
    let opts = ImportOptions::default();
    for file in ["spectrum1-t1.json", "tomahawk2-t1.json"] {
        let json = read(file);
        let base = import(&json, &opts);
        assert_eq!(export(&json, &opts, &base).unwrap().patch, serde_json::json!([]));
        // Scheduler weights: the lossless queues' DWRR weight.
        let c = round_trip(&json, &opts, &format!("{file}: weight"), |t| {
            each_port(t, |p| {
                for q in [3, 4] {
                    if let SchedMode::Wdrr { .. } = p.queues[q].sched {
                        p.queues[q].sched = SchedMode::Wdrr { weight: 30 };
                    }
                }
            })
        });
        assert!(
            c.iter().any(|c| c.starts_with("SCHEDULER|") && c.ends_with("→ 30")),
            "{c:?}"
        );
        // A DSCP to another traffic class, and a lossy class to another queue.
        let c = round_trip(&json, &opts, &format!("{file}: DSCP map"), |t| {
            t.classify.dscp_to_tc[10] = 2;
        });
        assert!(c.iter().any(|c| c.contains("DSCP_TO_TC_MAP|AZURE|10: 1 → 2")), "{c:?}");
        let c = round_trip(&json, &opts, &format!("{file}: TC map"), |t| {
            t.classify.tc_to_queue[6] = 5;
        });
        assert!(c.iter().any(|c| c.contains("TC_TO_QUEUE_MAP|AZURE|6: 6 → 5")), "{c:?}");
        // Lossy thresholds: the lossy queues' (every queue of queue 0's profile: one queue
        // alone is refused, naming the profile the others share) and the lossy PG's.
        let mut alone = base.clone();
        alone.ports[0].queues[0].shared = Threshold::Dynamic { alpha: 0.25 };
        let e = export(&json, &opts, &alone).unwrap_err().join("\n");
        assert!(e.contains("share a profile") && e.contains("Ethernet0 queue 0"), "{e}");
        let c = round_trip(&json, &opts, &format!("{file}: lossy queue threshold"), |t| {
            each_port(t, |p| {
                let (shared, pool) = (p.queues[0].shared, p.queues[0].pool);
                for q in &mut p.queues {
                    if q.shared == shared && q.pool == pool {
                        q.shared = Threshold::Dynamic { alpha: 0.25 };
                    }
                }
            })
        });
        assert!(
            c.iter().any(|c| c.contains("|dynamic_th:") && c.ends_with("→ -2")),
            "{c:?}"
        );
        round_trip(&json, &opts, &format!("{file}: lossy PG threshold"), |t| {
            each_port(t, |p| p.pgs[0].shared = Threshold::Static { bytes: 4_000_000 })
        });
        // WRED: the lossless queues' thresholds and probability.
        let c = round_trip(&json, &opts, &format!("{file}: WRED"), |t| {
            each_port(t, |p| {
                for q in [3, 4] {
                    if let Some(e) = p.queues[q].ecn.as_mut() {
                        (e.kmin_bytes, e.kmax_bytes, e.pmax) = (500_000, 4_000_000, 0.2);
                    }
                }
            })
        });
        assert!(c.iter().any(|c| c.contains("green_drop_probability: 5 → 20")), "{c:?}");
        // The lossless PGs' alpha (what `rocesw tune` changes).
        round_trip(&json, &opts, &format!("{file}: lossless alpha"), |t| {
            each_port(t, |p| {
                for g in [3, 4] {
                    p.pgs[g].shared = Threshold::Dynamic { alpha: 2.0 };
                }
            })
        });
        // A port's speed is the PORT table, which no QoS patch carries: said, not exported
        // (a lab runs the file's ports at 1G). What else the file cannot say is refused by
        // name: a pool's size, a cable.
        let mut speed = base.clone();
        speed.ports[1].speed_bps = 40_000_000_000;
        let out = export(&json, &opts, &speed).unwrap();
        assert_eq!(out.patch, serde_json::json!([]), "{file}");
        assert!(
            out.notes
                .iter()
                .any(|n| n.contains("Ethernet4 speed 40G in the target config, 100G in the file: not exported")),
            "{file}: {:?}",
            out.notes
        );
        let mut cable = base.clone();
        cable.ports[1].cable_m = 300.0;
        let e = export(&json, &opts, &cable).unwrap_err().join("\n");
        assert!(
            e.contains("cable changed") && e.contains("no field of the config_db.json export writes it"),
            "{e}"
        );
        let mut pool = base.clone();
        pool.buffer.pools[0].size_bytes += 96 * 208;
        let e = export(&json, &opts, &pool).unwrap_err().join("\n");
        assert!(e.contains("buffer changed"), "{e}");
    }
}

/// A PG `pg_profile_lookup.ini` made (no BUFFER_PG entry in the file: buffermgrd makes it at
/// run time) is written as explicit BUFFER_PROFILE and BUFFER_PG entries once it changes.
#[test]
fn pgs_made_from_the_lookup_table_become_explicit_entries() {
    let mut doc: serde_json::Value = serde_json::from_str(&read("spectrum1-t1.json")).unwrap();
    let pgs = doc["BUFFER_PG"].as_object_mut().unwrap();
    pgs.retain(|k, _| !k.ends_with("|3-4"));
    let profiles = doc["BUFFER_PROFILE"].as_object_mut().unwrap();
    profiles.retain(|k, _| !k.starts_with("pg_lossless_"));
    let json = serde_json::to_string_pretty(&doc).unwrap();
    let opts = ImportOptions {
        pg_lookup: Some((read("pg_profile_lookup_spectrum1.ini"), "pg_profile_lookup.ini".into())),
        ..ImportOptions::default()
    };
    let base = import(&json, &opts);
    assert!(base.ports[0].pgs[3].lossless);
    let c = round_trip(&json, &opts, "lookup-made PG's alpha", |t| {
        each_port(t, |p| {
            for g in [3, 4] {
                p.pgs[g].shared = Threshold::Dynamic { alpha: 0.5 };
            }
        })
    });
    assert!(
        c.iter()
            .any(|c| c.starts_with("BUFFER_PROFILE|pg_lossless_") && c.contains("added")),
        "{c:?}"
    );
    assert!(c.iter().any(|c| c.starts_with("BUFFER_PG|Ethernet0|3: added")), "{c:?}");
    // Unchanged, nothing is written for them.
    assert_eq!(export(&json, &opts, &base).unwrap().patch, serde_json::json!([]));
}

/// An entry the file gives both nested and flat is patched in both: the import reads both,
/// and a file where they disagree would be refused.
#[test]
fn an_entry_given_nested_and_flat_is_patched_in_both() {
    let json = read("tomahawk2-t1.json");
    let mut doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let flat_key = "BUFFER_PROFILE|pg_lossless_100000_300m_profile";
    let flat = doc[flat_key].clone();
    assert!(flat.is_object(), "the file has {flat_key} flat");
    doc["BUFFER_PROFILE"]["pg_lossless_100000_300m_profile"] = flat;
    let json = serde_json::to_string_pretty(&doc).unwrap();
    let opts = ImportOptions::default();
    round_trip(&json, &opts, "nested and flat", |t| {
        each_port(t, |p| {
            for g in [3, 4] {
                p.pgs[g].shared = Threshold::Dynamic { alpha: 0.5 };
            }
        })
    });
    let out = export(&json, &opts, &{
        let mut t = import(&json, &opts);
        each_port(&mut t, |p| p.pgs[3].shared = Threshold::Dynamic { alpha: 0.5 });
        each_port(&mut t, |p| p.pgs[4].shared = Threshold::Dynamic { alpha: 0.5 });
        t
    })
    .unwrap();
    let paths: Vec<&str> = out
        .patch
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|op| op["path"].as_str())
        .filter(|p| p.contains("300m"))
        .collect();
    assert!(
        paths.iter().any(|p| p.starts_with("/BUFFER_PROFILE/"))
            && paths.iter().any(|p| p.starts_with("/BUFFER_PROFILE|")),
        "{paths:?}"
    );
}

/// The Arista-7260CX3-C64 T1 with DSCP remap, as sonic-cfggen rendered it, with the options a
/// switch of that SKU has.
fn remap() -> (String, ImportOptions) {
    let file = |n: &str| std::fs::read_to_string(repo().join("configs/sonic/rendered").join(n)).unwrap();
    let opts = ImportOptions {
        platform: Some("tomahawk2".into()),
        pg_lookup: Some((
            file("arista-7260cx3-c64.pg_profile_lookup.ini"),
            "arista-7260cx3-c64.pg_profile_lookup.ini".into(),
        )),
        source: None,
    };
    (file("arista-7260cx3-c64-t1-remap.json"), opts)
}

fn index(c: &Config, name: &str) -> usize {
    c.ports.iter().position(|p| p.name.as_deref() == Some(name)).unwrap()
}

/// Per-port maps go back where PORT_QOS_MAP binds them: a map set's own map (AZURE_UPLINK),
/// the switch's (AZURE, which the set does not touch), and a port's choice of set.
#[test]
fn per_port_maps_round_trip_through_an_independent_patch() {
    let (json, opts) = remap();
    let base = import(&json, &opts);
    assert_eq!(export(&json, &opts, &base).unwrap().patch, serde_json::json!([]));
    // The uplinks' map: DSCP 10 to TC 0.
    let c = round_trip(&json, &opts, "map set's DSCP map", |t| {
        t.classify.sets[0].dscp_to_tc[10] = 0
    });
    assert_eq!(c, ["DSCP_TO_TC_MAP|AZURE_UPLINK|10: 1 → 0"], "{c:?}");
    // The switch's map: the downlinks' (and every other port's), not the uplinks'.
    let c = round_trip(&json, &opts, "switch's DSCP map", |t| t.classify.dscp_to_tc[10] = 0);
    assert_eq!(c, ["DSCP_TO_TC_MAP|AZURE|10: 1 → 0"], "{c:?}");
    // Ethernet0 classifies with the switch's maps.
    let c = round_trip(&json, &opts, "a port's map set", |t| {
        let i = index(t, "Ethernet0");
        t.ports[i].map_set = None;
    });
    assert_eq!(
        c,
        ["PORT_QOS_MAP|Ethernet0|dscp_to_tc_map: AZURE_UPLINK → AZURE"],
        "{c:?}"
    );
    // A map of its own for a set that binds the switch's: the file has no entry to write.
    let mut t = base.clone();
    t.classify.sets[0].tc_to_pg[1] = 1;
    let e = export(&json, &opts, &t).unwrap_err();
    assert!(
        e.iter()
            .any(|e| e.contains("\"AZURE_UPLINK\"") && e.contains("TC_TO_PRIORITY_GROUP_MAP")),
        "{e:?}"
    );
}

/// A port's PFC priorities go back as its pfc_enable: a downlink that pauses only 3 and 4
/// (its PGs 2 and 6 lossy then, as the import makes them).
#[test]
fn per_port_pfc_round_trips_through_an_independent_patch() {
    let (json, opts) = remap();
    let toml = import_text(&json, &opts).unwrap().toml;
    let at = toml.find("name = \"Ethernet136\"").unwrap();
    let edited = format!("{}pfc = [3, 4]\n{}", &toml[..at], &toml[at..]);
    let target = load_str(&edited).unwrap_or_else(|e| panic!("{e}")).config;
    let i = index(&target, "Ethernet136");
    assert!(!target.ports[i].pgs[2].lossless && target.ports[i].pgs[3].lossless);
    let c = round_trip(&json, &opts, "a port's pfc", |t| *t = target.clone());
    assert_eq!(c, ["PORT_QOS_MAP|Ethernet136|pfc_enable: 2,3,4,6 → 3,4"], "{c:?}");
}

/// Issue 49 item 3: a lab's running config (`rocesw lab up --config config_db.json --hosts 4
/// --speed 1G`: the file's first four ports, at 1G) exported against the file failed, once per
/// port the lab lacks. Now the ports are matched by name: the four lab ports' change is the
/// patch; the others stay as the file has them, and a profile they share that changed is said
/// in a note, as is the lab's speed, which the patch leaves alone. A port the file lacks is
/// still refused.
#[test]
fn a_labs_running_config_exports_against_the_whole_file() {
    let opts = ImportOptions::default();
    let json = read("spectrum1-t1.json");
    // The lab's config as `rocesw lab up` writes it: the import's TOML, its first four ports
    // on veths at 1G, loaded again (so every default that follows the ports, such as a port's
    // share of the FDB, is the lab's).
    let mut t: toml::Table = toml::from_str(&import_text(&json, &opts).unwrap().toml).unwrap();
    let ports = t["port"].as_array_mut().unwrap();
    ports.truncate(4);
    for p in ports {
        let p = p.as_table_mut().unwrap();
        p.insert("speed".into(), "1G".into());
        let veth = format!("lab-{}", p["name"].as_str().unwrap());
        p.insert("interface".into(), veth.into());
    }
    let lab = load_str(&toml::to_string(&t).unwrap()).unwrap().config;
    let same = export(&json, &opts, &lab).unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(
        same.patch,
        serde_json::json!([]),
        "the lab as it started: nothing to send back"
    );
    assert!(
        same.notes[0].starts_with("4 of the file's 8 ports are not in the target config")
            && same.notes[0].contains("Ethernet16, Ethernet20, Ethernet24, Ethernet28"),
        "{:?}",
        same.notes
    );
    assert!(
        same.notes
            .iter()
            .any(|n| n.contains("Ethernet0, Ethernet4, Ethernet8, Ethernet12 speed 1G in the target config")),
        "{:?}",
        same.notes
    );
    // A tuning change on every lab port: the lossless PGs' alpha, as `rocectl set alpha` makes it.
    let mut tuned = lab.clone();
    for p in &mut tuned.ports {
        for g in [3, 4] {
            p.pgs[g].shared = Threshold::Dynamic { alpha: 2.0 };
        }
    }
    let out = export(&json, &opts, &tuned).unwrap_or_else(|e| panic!("{e:#?}"));
    assert!(
        out.changes.iter().any(|c| c.contains("|dynamic_th: 0 → 1")),
        "{:?}",
        out.changes
    );
    // Ethernet0-12 and 16-20 share the 5 m and 40 m profiles: the ports outside the lab take
    // the change too, and a note says which.
    assert!(
        out.notes
            .iter()
            .any(|n| n.contains("changes for") && n.contains("Ethernet16") && n.contains("as well")),
        "{:?}",
        out.notes
    );
    let patched = import(&apply_with_python(&json, &out.patch), &opts);
    for p in &patched.ports[..4] {
        assert_eq!(p.pgs[3].shared, Threshold::Dynamic { alpha: 2.0 }, "{:?}", p.name);
        assert_eq!(p.speed_bps, 100_000_000_000, "{:?}: the file's speed", p.name);
    }
    // A port the file does not have is still refused, by name.
    let mut renamed = lab.clone();
    renamed.ports[0].name = Some("Ethernet2".into());
    let e = export(&json, &opts, &renamed).unwrap_err().join("\n");
    assert!(e.contains("Ethernet2 is not a port of the file"), "{e}");
}
