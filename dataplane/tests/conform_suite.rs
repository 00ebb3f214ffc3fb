//! Issue 45 item 2: `rocesw conform sonic` with sonic-mgmt's own numbers, on files SONiC's
//! `sonic-cfggen` rendered (configs/sonic/rendered/): NVIDIA's counts computed from the file
//! as sonic-mgmt's generator computes them (`--params nvidia`), Broadcom's read from
//! `qos_params.th2.yaml` and `qos_params.th.yaml` (configs/sonic/qos_params/, byte for byte),
//! and rocesw's computed counts checked against both.

mod common;
use common::*;
use dataplane::conform::{self, report::Outcome, Options};
use std::collections::BTreeMap;

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The suite on a rendered file, with its SKU's lookup table and `platform`; `params` a
/// parameters text (or `nvidia`). Returns each test's outcome by name, and the report.
fn run(file: &str, lookup: &str, platform: &str, params: Option<&str>, src: Option<&str>) -> (BTreeMap<String, Outcome>, String) {
    let json = read(&format!("configs/sonic/rendered/{file}"));
    let opts = Options {
        platform: Some(platform.to_string()),
        pg_lookup: Some((read(&format!("configs/sonic/rendered/{lookup}")), lookup.to_string())),
        params: params.map(|p| match p {
            "nvidia" => (conform::nvidia::MELLANOX_YAML.to_string(), "nvidia".to_string()),
            other => (read(&format!("configs/sonic/qos_params/{other}")), other.to_string()),
        }),
        src: src.map(str::to_string),
        ..Options::default()
    };
    let (r, _) = conform::run(&json, file, &opts, &mut |_| {}).unwrap_or_else(|e| panic!("{file}: {e:#}"));
    let text = r.text(true, true);
    (r.tests.iter().map(|t| (t.name.clone(), t.outcome)).collect(), text)
}

fn failed(outcomes: &BTreeMap<String, Outcome>) -> Vec<&str> {
    outcomes
        .iter()
        .filter(|(_, o)| !matches!(o, Outcome::Passed | Outcome::Skipped))
        .map(|(n, _)| n.as_str())
        .collect()
}

/// Spectrum-1 (ACS-MSN2700 T1, its lossless PGs made from its pg_profile_lookup.ini as
/// buffermgrd makes them): every procedure passes with NVIDIA's own numbers, the first
/// ingress drop where the generator puts it (the PG's limit less Spectrum-1's headroom
/// overhead of 95 cells), and so does the computed mode.
#[test]
fn spectrum1_passes_with_nvidias_generator() {
    for params in [Some("nvidia"), None] {
        let (o, text) = run(
            "acs-msn2700-t1.json",
            "acs-msn2700.pg_profile_lookup.ini",
            "spectrum1",
            params,
            None,
        );
        assert!(o.len() >= 11, "{text}");
        assert_eq!(failed(&o), Vec::<&str>::new(), "{params:?}:\n{text}");
    }
}

/// Tomahawk 2 (Arista-7260CX3-C64 T1 with DSCP remap, the pool sizes `qos_params.th2.yaml`'s
/// 300m counts were measured with): with the pool split across the four XPEs, PFCtest and
/// the watermark tests pass with the suite's counts.
#[test]
fn tomahawk2_passes_with_the_suites_yaml() {
    let (o, text) = run(
        "arista-7260cx3-c64-t1.json",
        "arista-7260cx3-c64.pg_profile_lookup.ini",
        "tomahawk2",
        Some("qos_params.th2.yaml"),
        None,
    );
    assert_eq!(failed(&o), Vec::<&str>::new(), "{text}");
}
