//! Issue 38: `rocesw conform sonic` runs sonic-mgmt's QoS procedures on the project's two T1
//! configs in SONiC's format, and every test passes; a config changed in one respect, checked
//! against the numbers of the one it replaces (`--write-params`, then `--params`), fails
//! exactly the tests that look at what changed.

mod common;
use common::*;
use dataplane::conform::{self, report::Outcome, Options};
use std::collections::BTreeSet;

fn sonic(name: &str) -> String {
    std::fs::read_to_string(repo_root().join("configs/sonic").join(name)).unwrap()
}

/// The suite on `json`; with `params`, against those numbers.
fn suite(json: &str, params: Option<&str>, write: bool) -> (conform::report::SuiteReport, Option<String>) {
    let opts = Options {
        params: params.map(|p| (p.to_string(), "reference.yaml".to_string())),
        write_params: write,
        ..Options::default()
    };
    conform::run(json, "config_db.json", &opts, &mut |_| {}).unwrap()
}

/// The names of the tests that failed (with their parameter set), and any test that did not
/// run at all fails the calling test.
fn failed(r: &conform::report::SuiteReport) -> BTreeSet<String> {
    for t in &r.tests {
        assert!(
            matches!(t.outcome, Outcome::Passed | Outcome::Failed),
            "{} did not run: {:?}\n{}",
            t.name,
            t.reason,
            r.text(false, false)
        );
    }
    r.tests
        .iter()
        .filter(|t| t.outcome == Outcome::Failed)
        .map(|t| t.name.clone())
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// `json` with `from` replaced by `to`, `n` times (0: every time); `from` must be there.
fn nudged(json: &str, from: &str, to: &str, n: usize) -> String {
    assert!(json.contains(from), "{from} not in the file");
    if n == 0 {
        json.replace(from, to)
    } else {
        json.replacen(from, to, n)
    }
}

/// The tests whose counts come from a lossless PG's XOFF point.
const XOFF_POINT: [&str; 8] = [
    "PFCtest[xoff_1]",
    "PFCtest[xoff_2]",
    "PFCXonTest[xon_1]",
    "PFCXonTest[xon_2]",
    "PGSharedWatermarkTest[wm_pg_shared_lossless]",
    "PGHeadroomWatermarkTest[wm_pg_headroom]",
    "QSharedWatermarkTest[wm_q_shared_lossless]",
    "BufferPoolWatermarkTest[wm_buf_pool_lossless]",
];

/// Every procedure passes on the config as shipped, computed and against its own written
/// numbers; then each nudge fails what it should.
fn check_platform(file: &str, xoff: &str, cell: u64, xoff_cells_unseen: u64) {
    let json = sonic(file);
    let (r, written) = suite(&json, None, true);
    assert_eq!(r.tests.len(), 18, "{}", r.text(true, false));
    assert!(r.passed() && failed(&r).is_empty(), "{}", r.text(false, false));
    let params = written.expect("--write-params");
    let (r, _) = suite(&json, Some(&params), false);
    assert!(r.params.contains("reference.yaml"), "{}", r.params);
    assert!(failed(&r).is_empty(), "{}", r.text(false, false));
    let against = |changed: &str| failed(&suite(changed, Some(&params), false).0);

    // xoff: the suite's margins hide a change of up to `xoff_cells_unseen` cells; one more and
    // the headroom watermark (and PFCtest, past its margin) sees it.
    let v: u64 = xoff.parse().unwrap();
    let short = |cells: u64| {
        nudged(
            &json,
            &format!("\"xoff\": \"{xoff}\""),
            &format!("\"xoff\": \"{}\"", v - cells * cell),
            1,
        )
    };
    // HdrmPoolSizeTest fills every PG's headroom in turn to the written counts (issue 46 item
    // 4: they are written now), so it sees a smaller xoff once the PGs' overflow together
    // passes its margin; on Tomahawk 2 its PGs are one XPE's (issue 45), too few for one cell
    // each to pass it: the headroom watermark sees the cell.
    if xoff_cells_unseen == 0 {
        assert_eq!(
            against(&short(1)),
            set(&["PGHeadroomWatermarkTest[wm_pg_headroom]"]),
            "{file}: xoff a cell short"
        );
    } else {
        assert_eq!(
            against(&short(1)),
            set(&[]),
            "{file}: xoff a cell short is within the margins"
        );
        assert_eq!(
            against(&short(xoff_cells_unseen)),
            set(&["HdrmPoolSizeTest[hdrm_pool_size]"]),
            "{file}: within PFCtest's and the headroom watermark's margins, not HdrmPoolSizeTest's"
        );
        let seen = against(&short(xoff_cells_unseen + 3));
        assert!(
            seen.contains("PGHeadroomWatermarkTest[wm_pg_headroom]") && seen.contains("PFCtest[xoff_1]"),
            "{file}: {seen:?}"
        );
    }
    // dynamic_th one step higher: every test whose counts come from the XOFF point.
    let steeper = nudged(&json, "\"dynamic_th\": \"0\"", "\"dynamic_th\": \"1\"", 1);
    let mut xoff_point = set(&XOFF_POINT);
    xoff_point.insert("HdrmPoolSizeTest[hdrm_pool_size]".into());
    assert_eq!(against(&steeper), xoff_point, "{file}: dynamic_th + 1");
    // A DSCP moved to another class: the DSCP mapping.
    let moved = nudged(&json, "\"10\": \"1\"", "\"10\": \"2\"", 1);
    assert_eq!(
        against(&moved),
        set(&["DscpMappingPB[dscp_mapping]"]),
        "{file}: DSCP 10 moved"
    );
    // Weights: 14 and 15 swapped is within WRRtest's limit (the suite cannot tell them apart);
    // the lossless queues' weight halved is not.
    let swapped = json
        .replace("\"weight\": \"14\"", "\"weight\": \"x\"")
        .replace("\"weight\": \"15\"", "\"weight\": \"14\"")
        .replace("\"weight\": \"x\"", "\"weight\": \"15\"");
    assert_eq!(against(&swapped), set(&[]), "{file}: 14 and 15 swapped");
    let halved = nudged(&json, "\"weight\": \"15\"", "\"weight\": \"7\"", 1);
    assert_eq!(
        against(&halved),
        set(&["WRRtest[wrr]"]),
        "{file}: lossless weight halved"
    );
    // WRED-ECN on the lossy queue DSCP 8 goes to, marking from the first kilobyte: the ECN
    // procedures of DSCP 8 (written numbers: every frame leaves, unmarked); where the file's
    // entry for queue 0 covers queues 0-2 (tomahawk2-t1.json), DSCP 0's queue 1 too.
    let ecn = against(&ecn_on_queue0(&json, "Ethernet4"));
    assert!(
        ecn.contains("DscpEcnSend[ecn_1]")
            && ecn.contains("DscpEcnSend[ecn_2]")
            && ecn.iter().all(|t| t.starts_with("DscpEcnSend[")),
        "{file}: WRED on queue 0: {ecn:?}"
    );
    // The lossless queues served strictly: both WRR tests (their weights no longer apply).
    let strict = nudged(
        &json,
        "\"type\": \"DWRR\",\n            \"weight\": \"15\"",
        "\"type\": \"STRICT\",\n            \"weight\": \"15\"",
        1,
    );
    assert_eq!(
        against(&strict),
        set(&["WRRtest[wrr]", "WRRtest[wrr_chg]"]),
        "{file}: lossless queues strict"
    );
    // The watchdog's detection beyond the suite's wait for it.
    let slow = nudged(&json, "\"detection_time\": \"200\"", "\"detection_time\": \"40000\"", 0);
    assert_eq!(
        against(&slow),
        set(&["PfcWdTest[pfcwd]"]),
        "{file}: watchdog detection 40 s"
    );
}

/// `json` with a WRED-ECN profile that marks (and drops what cannot be marked) from 1000 B
/// of queue depth on queue 0 of `port`.
fn ecn_on_queue0(json: &str, port: &str) -> String {
    let mut doc: serde_json::Value = serde_json::from_str(json).unwrap();
    // The file's reference style: `[TABLE|name]` or the plain name.
    let bracketed = doc["QUEUE"]
        .as_object()
        .unwrap()
        .values()
        .any(|e| e["scheduler"].as_str().is_some_and(|s| s.starts_with('[')));
    let mut wred = serde_json::Map::new();
    for colour in ["green", "yellow", "red"] {
        wred.insert(format!("wred_{colour}_enable"), "true".into());
        wred.insert(format!("{colour}_min_threshold"), "1000".into());
        wred.insert(format!("{colour}_max_threshold"), "2000".into());
        wred.insert(format!("{colour}_drop_probability"), "100".into());
    }
    wred.insert("ecn".into(), "ecn_all".into());
    doc["WRED_PROFILE"]["NUDGE"] = serde_json::Value::Object(wred);
    let name = if bracketed { "[WRED_PROFILE|NUDGE]" } else { "NUDGE" };
    // The entry that holds queue 0 of `port` (keys join ports and give index ranges:
    // `Ethernet0,Ethernet4|0-2`), or a new one.
    let queues = doc["QUEUE"].as_object_mut().unwrap();
    let covers = |key: &str| {
        let Some((ports, q)) = key.split_once('|') else {
            return false;
        };
        ports.split(',').any(|p| p == port) && (q == "0" || q.starts_with("0-"))
    };
    let key = queues
        .keys()
        .find(|k| covers(k))
        .cloned()
        .unwrap_or_else(|| format!("{port}|0"));
    let q = queues.entry(key).or_insert_with(|| serde_json::json!({}));
    q["wred_profile"] = name.into();
    serde_json::to_string_pretty(&doc).unwrap()
}

/// Issue 46 item 4: `--write-params` records HdrmPoolSizeTest's counts as sonic-mgmt's
/// `hdrm_pool_size` set holds them, and `--params` runs the test on them: Spectrum-1's shared
/// headroom pool cut from 323,520 to 96,000 B (room for 2 PGs' headroom of two xoffs each
/// instead of 6) fails
/// it against the numbers written for the full pool, where the counts computed afresh adapt.
#[test]
fn a_cut_headroom_pool_fails_hdrm_pool_size_against_the_written_numbers() {
    let json = sonic("spectrum1-t1.json");
    let (r, written) = suite(&json, None, true);
    assert!(failed(&r).is_empty(), "{}", r.text(false, false));
    let params = written.expect("--write-params");
    let doc: serde_json::Value = serde_yaml_ng::from_str(&params).unwrap();
    let topo = doc["qos_params"]["mellanox"]["topo-any"].as_object().unwrap();
    let hdrm = topo
        .values()
        .find_map(|section| section.get("hdrm_pool_size"))
        .unwrap_or_else(|| panic!("no hdrm_pool_size set in:\n{params}"));
    for field in [
        "dscps",
        "pgs",
        "src_port_ids",
        "dst_port_id",
        "pgs_num",
        "pkts_num_trig_pfc",
        "pkts_num_hdrm_full",
        "pkts_num_hdrm_partial",
        "margin",
        "packet_size",
        "cell_size",
    ] {
        assert!(!hdrm[field].is_null(), "hdrm_pool_size.{field} missing in:\n{params}");
    }
    // 323,520 B of shared headroom pool over two 5 m xoffs (2 × 23,552 B) a PG: 6 PGs.
    assert_eq!(hdrm["pgs_num"], 6, "{params}");
    let cut = nudged(&json, "\"xoff\": \"323520\"", "\"xoff\": \"96000\"", 1);
    let fresh = suite(&cut, None, false).0;
    assert!(failed(&fresh).is_empty(), "{}", fresh.text(false, false));
    assert_eq!(
        failed(&suite(&cut, Some(&params), false).0),
        set(&["HdrmPoolSizeTest[hdrm_pool_size]"]),
        "the cut pool against the full pool's numbers"
    );
    // The numbers read back as written: the full pool passes against them.
    assert!(failed(&suite(&json, Some(&params), false).0).is_empty());
}

#[test]
fn tomahawk2_passes_and_each_nudge_fails_its_test() {
    // 64 B packets take one 208 B cell and PGHeadroomWatermarkTest's margin is 0: a cell shows.
    check_platform("tomahawk2-t1.json", "59696", 208, 0);
}

#[test]
fn spectrum1_passes_and_each_nudge_fails_its_test() {
    // NVIDIA's parameters send 300 B packets (4 cells of 96 B) with margins of 3 and 4
    // packets: up to 17 cells of headroom pass unseen, as on the real suite; with the shared
    // headroom pool a PG takes two xoffs of it, so up to 8 cells of xoff.
    check_platform("spectrum1-t1.json", "23552", 96, 8);
}

/// The command: a report per test, exit status 0 when all pass, 1 when one fails, 2 for bad
/// input; `--json` is the report as JSON; `--write-params` refuses to overwrite its input.
#[test]
fn the_command_reports_and_exits_as_a_test_runner() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = repo_root().join("configs/sonic/tomahawk2-t1.json");
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_rocesw"))
            .args(["conform", "sonic", "--config"])
            .arg(&cfg)
            .args(args)
            .output()
            .unwrap()
    };
    let o = run(&["--only", "PFCtest,DscpMappingPB", "--explain"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        out.contains("PASS  PFCtest[xoff_1]") && out.contains("= Ethernet0 PG 3"),
        "{out}"
    );
    assert!(out.contains("3 passed, 0 failed"), "{out}");
    let o = run(&["--only", "PfcWdTest", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["tests"][0]["outcome"], "passed");
    assert_eq!(v["platform"], "tomahawk2");
    // A failure: numbers written for a switch whose lossless PGs take more (dynamic_th + 1).
    let params = dir.path().join("th2.yaml");
    let steeper = dir.path().join("steeper.json");
    let json = sonic("tomahawk2-t1.json");
    std::fs::write(
        &steeper,
        nudged(&json, "\"dynamic_th\": \"0\"", "\"dynamic_th\": \"1\"", 1),
    )
    .unwrap();
    assert!(
        run(&["--only", "DscpMappingPB", "--write-params", params.to_str().unwrap()])
            .status
            .success()
    );
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_rocesw"))
        .args(["conform", "sonic", "--only", "PFCtest", "--config"])
        .arg(&steeper)
        .arg("--params")
        .arg(&params)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("FAIL  PFCtest[xoff_1]") && out.contains("NOT expected PFC frames"),
        "{out}"
    );
    // Bad input: an unknown test, a file that is not a config_db.json, an output over an input.
    for (args, want) in [
        (vec!["--only", "PFCtset"], "--only PFCtset: no such test"),
        (vec!["--params", cfg.to_str().unwrap()], "no `qos_params` mapping"),
        (vec!["--write-params", cfg.to_str().unwrap()], "--write-params"),
    ] {
        let o = run(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let toml = repo_root().join("configs/default.toml");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_rocesw"))
        .args(["conform", "sonic", "--config"])
        .arg(&toml)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a SONiC config_db.json"));
    assert_eq!(std::fs::read_to_string(&cfg).unwrap(), json, "the input is untouched");
}

/// Issue 49 item 6: what the suite does not cover. Its procedures send from hosts that ignore
/// PFC and check the counts the file's own profiles give, so a Spectrum-1 xoff halved (11,776
/// B) passes every procedure computed from that file; a 3→1 incast at 100G replayed through it
/// loses lossless frames at the senders' ingress (sonic_replay.rs's
/// `a_short_xoff_shows_up_as_lost_lossless_frames`; docs/conform.md says how to look).
#[test]
fn a_short_xoff_passes_the_computed_suite() {
    let short = nudged(
        &sonic("spectrum1-t1.json"),
        "\"xoff\": \"23552\"",
        "\"xoff\": \"11776\"",
        0,
    );
    let (r, _) = suite(&short, None, false);
    assert_eq!(r.tests.len(), 18, "{}", r.text(true, false));
    assert!(failed(&r).is_empty(), "{}", r.text(false, false));
}

/// Issue 49 item 6: PfcWdTest's storm is intended, and the switch's warning of it stays out of
/// the report's streams (it printed as a wall-clock `WARN dataplane::egress: PFC storm
/// detected` between the report's lines); it is kept under the test, shown with --explain and
/// in the JSON. `--topo` needs `--params`.
#[test]
fn the_switchs_log_is_kept_out_of_the_report() {
    let cfg = repo_root().join("configs/sonic/tomahawk2-t1.json");
    let run = |args: &[&str]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_rocesw"))
            .args(["conform", "sonic", "--config"])
            .arg(&cfg)
            .args(args)
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).to_string(),
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };
    let (code, out, err) = run(&["--only", "PfcWdTest"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("PASS  PfcWdTest[pfcwd]"), "{out}");
    assert!(
        !out.contains("storm detected") && !err.contains("storm detected"),
        "{out}\n--\n{err}"
    );
    let (_, out, err) = run(&["--only", "PfcWdTest", "--explain"]);
    assert!(
        out.contains("switch log: WARN dataplane::egress: PFC storm detected port=4 queue=3"),
        "{out}"
    );
    assert!(!err.contains("storm detected"), "{err}");
    let (_, out, _) = run(&["--only", "PfcWdTest", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        v["tests"][0]["log"][0].as_str().unwrap().contains("PFC storm detected"),
        "{out}"
    );
    let (code, _, err) = run(&["--topo", "t1-64-lag"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--params"), "{err}");
}
