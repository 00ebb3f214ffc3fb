//! Issue 48: `rocesw conform sonic` over a fleet (a directory of config_db.json files), in
//! shards (`--shard I/N`) merged by `rocesw conform merge` into the unsharded run's report byte
//! for byte (fleet.json, fleet.txt, --junit); a config that cannot run fails its switch only;
//! a merge names the missing shards, and rerunning them completes the set.

mod common;

#[test]
fn a_fleet_in_shards_merges_to_the_unsharded_report() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fleet = d.join("fleet");
    std::fs::create_dir(&fleet).unwrap();
    let sonic = common::repo_root().join("configs/sonic");
    std::fs::copy(sonic.join("spectrum1-t1.json"), fleet.join("leaf01.json")).unwrap();
    std::fs::copy(sonic.join("tomahawk2-t1.json"), fleet.join("leaf02.json")).unwrap();
    // A name that is markup in XML, and a file that is no config_db.json.
    std::fs::write(fleet.join("spine<&\"01\">.json"), "{\"not\": \"a config_db\"}").unwrap();
    let fleet_arg = fleet.to_str().unwrap();
    let args = ["conform", "sonic", "--config", fleet_arg, "--only", "PFCtest,WRRtest"];

    // Unsharded: every switch, a line each; exit 1 as one switch failed.
    let mut a: Vec<&str> = args.to_vec();
    a.extend(["--output-dir", "u", "--junit", "u/junit.xml"]);
    let o = common::rocesw_in(d, &a);
    assert_eq!(o.status.code(), Some(1), "{}", common::output_text(&o));
    let report = std::fs::read_to_string(d.join("u/fleet.txt")).unwrap();
    assert!(
        report.contains(&format!("PASS  {}/leaf01.json (platform spectrum1)", fleet.display())),
        "{report}"
    );
    assert!(
        report.contains(&format!("PASS  {}/leaf02.json (platform tomahawk2)", fleet.display())),
        "{report}"
    );
    assert!(
        report.contains("ERROR ") && report.contains("not a SONiC config_db.json"),
        "{report}"
    );
    assert!(report.ends_with("fleet: 3 switches, 2 passed, 1 failed\n"), "{report}");
    let fleet_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("u/fleet.json")).unwrap()).unwrap();
    assert_eq!(fleet_json["switches"], 3);
    assert_eq!(fleet_json["results"][0]["tests"][0]["outcome"], "passed");
    let junit = std::fs::read_to_string(d.join("u/junit.xml")).unwrap();
    assert!(junit.contains("spine&lt;&amp;&quot;01&quot;&gt;.json"), "{junit}");
    assert!(junit.contains("<error message="), "{junit}");
    assert!(
        junit.matches("<testcase ").count() >= 5,
        "a testcase per test and config: {junit}"
    );

    // Two shards: shard 0 tests configs 0 and 2, shard 1 config 1.
    let mut done = Vec::new();
    for i in 0..2 {
        let spec = format!("{i}/2");
        let mut a: Vec<&str> = args.to_vec();
        a.extend(["--shard", &spec, "--output-dir", "parts"]);
        let o = common::rocesw_in(d, &a);
        assert!(
            o.status.success(),
            "a shard succeeds when it wrote its part: {}",
            common::output_text(&o)
        );
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(
            err.contains(&format!("shard {i}/2: {} of the fleet's 3 configs", 2 - i)),
            "its share: {err}"
        );
        done.push(d.join(format!("parts/conform.part.s{i}of2.json")));
        if i == 0 {
            // Shard 1 not run yet: the merge names it.
            let m = common::rocesw_in(d, &["conform", "merge", "parts", "--output-dir", "m"]);
            assert_eq!(m.status.code(), Some(2), "{}", common::output_text(&m));
            assert!(
                common::output_text(&m).contains("shards 1/2 have no part file"),
                "{}",
                common::output_text(&m)
            );
        }
    }
    let m = common::rocesw_in(
        d,
        &[
            "conform",
            "merge",
            "parts",
            "--output-dir",
            "m",
            "--junit",
            "m/junit.xml",
        ],
    );
    assert_eq!(m.status.code(), Some(1), "{}", common::output_text(&m));
    for f in ["fleet.json", "fleet.txt", "junit.xml"] {
        let a = std::fs::read(d.join("u").join(f)).unwrap();
        let b = std::fs::read(d.join("m").join(f)).unwrap();
        assert!(a == b, "{f} differs between the unsharded run and the merge");
    }
    assert!(
        common::output_text(&m).contains("merged 2 shards on 1 host"),
        "{}",
        common::output_text(&m)
    );
    let shards: serde_json::Value = serde_json::from_slice(&std::fs::read(d.join("m/shards.json")).unwrap()).unwrap();
    assert_eq!(shards["parts"][0]["configs"].as_array().unwrap().len(), 2);

    // Parts of another run (other tests) do not mix.
    let mut a: Vec<&str> = vec!["conform", "sonic", "--config", fleet_arg, "--only", "PFCtest"];
    a.extend(["--shard", "1/2", "--output-dir", "other"]);
    assert!(common::rocesw_in(d, &a).status.success());
    let m = common::rocesw_in(
        d,
        &[
            "conform",
            "merge",
            done[0].to_str().unwrap(),
            "other",
            "--output-dir",
            "m2",
        ],
    );
    assert_eq!(m.status.code(), Some(2), "{}", common::output_text(&m));
    assert!(
        common::output_text(&m).contains("parts of different runs"),
        "{}",
        common::output_text(&m)
    );
}

#[test]
fn one_config_writes_junit_and_write_params_is_refused_for_a_fleet() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = common::repo_root().join("configs/sonic/spectrum1-t1.json");
    let c = cfg.to_str().unwrap();
    let o = common::rocesw_in(
        d,
        &[
            "conform", "sonic", "--config", c, "--only", "WRRtest", "--junit", "j.xml",
        ],
    );
    assert!(o.status.success(), "{}", common::output_text(&o));
    let j = std::fs::read_to_string(d.join("j.xml")).unwrap();
    assert!(
        j.contains(&format!("<testcase classname=\"{c}\" name=\"WRRtest[wrr]\"/>")),
        "{j}"
    );
    let th2 = common::repo_root().join("configs/sonic/tomahawk2-t1.json");
    let o = common::rocesw_in(
        d,
        &[
            "conform",
            "sonic",
            "--config",
            c,
            "--config",
            th2.to_str().unwrap(),
            "--write-params",
            "p.yaml",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", common::output_text(&o));
    assert!(
        common::output_text(&o).contains("--write-params writes one config"),
        "{}",
        common::output_text(&o)
    );
    let o = common::rocesw_in(d, &["conform", "sonic", "--config", c, "--config", c]);
    assert_eq!(o.status.code(), Some(2), "{}", common::output_text(&o));
    assert!(
        common::output_text(&o).contains("is named twice"),
        "{}",
        common::output_text(&o)
    );
    let o = common::rocesw_in(d, &["conform", "sonic", "--config", c, "--shard", "0/2"]);
    assert_eq!(o.status.code(), Some(2), "{}", common::output_text(&o));
    assert!(
        common::output_text(&o).contains("--shard needs --output-dir"),
        "{}",
        common::output_text(&o)
    );
}
