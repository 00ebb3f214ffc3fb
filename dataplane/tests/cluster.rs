//! Issue 48: sharded sweeps on real cluster schedulers.
//!
//! - **Slurm**: `deploy/slurm/test-slurm.sh` starts munged, slurmctld and slurmd on localhost
//!   (a config, key, state and pid files of its own in a temporary directory), submits a
//!   4-shard array per round of the quick tune sweep and a 4-shard array of a five-config
//!   conform fleet through `deploy/slurm/submit.sh`, the merges as jobs that depend on them
//!   (afterok), and checks the merged files equal the unsharded runs' byte for byte; it stops
//!   the daemons by their pid files on every exit. Needs root and Debian's `slurm-wlm` and
//!   `munge` (.ci/install-deps): without them the test says it is skipped, except under CI
//!   (`CI` set), where it fails.
//! - **Kubernetes**: `deploy/k8s/*.yaml` validate against the pinned OpenAPI schemas in
//!   deploy/k8s/schema (`validate.py`), and each Indexed Job's command, taken from the
//!   manifest, runs here once per index with `JOB_COMPLETION_INDEX` set (the tune Job once per
//!   round), then the merge Jobs' commands: the results equal the unsharded runs' byte for
//!   byte. Needs python3 with PyYAML and jsonschema (.ci/install-deps).
//!
//! `cargo test -p rocesw-dataplane --test cluster -- --nocapture` shows the steps.

mod common;

use std::path::Path;
use std::process::Command;

/// Skips (or under CI fails) with a reason.
fn skip(why: &str) {
    common::skip_unless_ci_requires("the cluster tests", Some(why));
}

fn have(bin: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {bin}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn a_slurm_array_merges_to_the_unsharded_outputs() {
    // SAFETY: geteuid(2) takes no arguments, touches no memory and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return skip("the Slurm test needs root (munged, slurmctld, slurmd)");
    }
    for b in ["munged", "slurmctld", "slurmd", "sbatch"] {
        if !have(b) {
            return skip(&format!(
                "{b} missing: apt-get install slurm-wlm munge (.ci/install-deps)"
            ));
        }
    }
    let started = std::time::Instant::now();
    let st = Command::new(common::repo_root().join("deploy/slurm/test-slurm.sh"))
        .arg(env!("CARGO_BIN_EXE_rocesw"))
        .env_remove("SLURM_CONF")
        .status()
        .unwrap();
    assert!(st.success(), "deploy/slurm/test-slurm.sh: {st}");
    eprintln!("the Slurm test took {:.0} s", started.elapsed().as_secs_f64());
}

/// The `sh -c` script of a manifest's container (its command's last element).
fn container_script(manifest: &Path) -> String {
    let o = Command::new("python3")
        .arg("-c")
        .arg(
            "import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); \
             c = d['spec']['template']['spec']['containers'][0]['command']; \
             assert c[:2] == ['/bin/sh', '-c'], c; sys.stdout.write(c[2])",
        )
        .arg(manifest)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}: {}",
        manifest.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn completions(manifest: &Path) -> usize {
    let o = Command::new("python3")
        .arg("-c")
        .arg(
            "import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); s = d['spec']; \
             assert s['completionMode'] == 'Indexed' and s['parallelism'] == s['completions']; \
             print(s['completions'])",
        )
        .arg(manifest)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}: {}",
        manifest.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap().trim().parse().unwrap()
}

/// Runs a manifest's container script as the pod would, with the image's paths moved: the
/// binary on PATH, ROCESW_SHARE the repository (the image's /opt/rocesw), PARTS the volume.
fn run_script(script: &str, parts: &Path, index: Option<usize>) -> std::process::Output {
    let bin = Path::new(env!("CARGO_BIN_EXE_rocesw")).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut c = Command::new("/bin/sh");
    c.args(["-c", script])
        .current_dir(parts)
        .env("PATH", path)
        .env("ROCESW_SHARE", common::repo_root())
        .env("PARTS", parts);
    if let Some(i) = index {
        c.env("JOB_COMPLETION_INDEX", i.to_string());
    }
    c.output().unwrap()
}

#[test]
fn the_kubernetes_jobs_validate_and_their_commands_merge_to_the_unsharded_outputs() {
    let k8s = common::repo_root().join("deploy/k8s");
    if !Command::new("python3")
        .args(["-c", "import yaml, jsonschema, referencing"])
        .status()
        .is_ok_and(|s| s.success())
    {
        return skip("python3 with PyYAML and jsonschema missing (.ci/install-deps)");
    }
    let v = Command::new("python3").arg(k8s.join("validate.py")).output().unwrap();
    let vt = String::from_utf8_lossy(&v.stdout).into_owned();
    assert!(v.status.success(), "{vt}");
    assert!(
        vt.contains("5 documents against Kubernetes v1.33.0's schemas, 0 invalid"),
        "{vt}"
    );
    // A field the schema does not have is caught (strict schemas).
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    let good = std::fs::read_to_string(k8s.join("tune-shards.yaml")).unwrap();
    std::fs::write(&bad, good.replace("  parallelism: 4", "  paralellism: 4")).unwrap();
    let v = Command::new("python3")
        .arg(k8s.join("validate.py"))
        .arg(&bad)
        .output()
        .unwrap();
    assert!(
        !v.status.success() && String::from_utf8_lossy(&v.stdout).contains("'paralellism' was unexpected"),
        "{}",
        String::from_utf8_lossy(&v.stdout)
    );

    let parts = dir.path().join("volume");
    std::fs::create_dir_all(parts.join("fleet")).unwrap();
    for f in ["spectrum1-t1.json", "tomahawk2-t1.json"] {
        std::fs::copy(
            common::repo_root().join("configs/sonic").join(f),
            parts.join("fleet").join(f),
        )
        .unwrap();
    }
    // The tune Job, once per round, every index; then its merge.
    let tune = container_script(&k8s.join("tune-shards.yaml"));
    let n = completions(&k8s.join("tune-shards.yaml"));
    assert_eq!(n, 4);
    let mut rounds = 0;
    loop {
        let mut complete = 0;
        for i in 0..n {
            let o = run_script(&tune, &parts, Some(i));
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success(), "tune index {i}: {err}");
            complete += usize::from(err.contains("the search is complete"));
        }
        if complete == n {
            break;
        }
        rounds += 1;
        assert!(rounds <= 4, "the quick sweep has at most 4 rounds");
    }
    let o = run_script(&container_script(&k8s.join("tune-merge.yaml")), &parts, None);
    assert!(o.status.success(), "tune merge: {}", String::from_utf8_lossy(&o.stderr));
    // The conform Job, every index; then its merge (exit 0: both switches pass).
    let conform = container_script(&k8s.join("conform-shards.yaml"));
    assert_eq!(completions(&k8s.join("conform-shards.yaml")), 4);
    for i in 0..4 {
        let o = run_script(&conform, &parts, Some(i));
        assert!(
            o.status.success(),
            "conform index {i}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let o = run_script(&container_script(&k8s.join("conform-merge.yaml")), &parts, None);
    assert!(
        o.status.success(),
        "conform merge: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    // The merged files aside; then the unsharded runs with the same options and the same
    // output paths (the fragment's header names where it was written).
    let merged = dir.path().join("merged");
    std::fs::create_dir_all(&merged).unwrap();
    let files = [
        ("tune-out", "tune.json"),
        ("tune-out", "tune.svg"),
        ("tune-out", "tuned.toml"),
        ("conform-out", "fleet.json"),
        ("conform-out", "fleet.txt"),
        ("conform-out", "junit.xml"),
    ];
    for (d, f) in files {
        std::fs::copy(parts.join(d).join(f), merged.join(f)).unwrap();
        std::fs::remove_file(parts.join(d).join(f)).unwrap();
    }
    let shards = std::fs::read_to_string(parts.join("tune-out/shards.json")).unwrap();
    assert!(shards.contains("\"shards\": 4"), "{shards}");
    let bin = env!("CARGO_BIN_EXE_rocesw");
    let o = Command::new(bin)
        .args(["tune", "--topology"])
        .arg(common::repo_root().join("examples/tune/topology.toml"))
        .arg("--default-config")
        .arg(common::repo_root().join("configs/default.toml"))
        .args(["--quick", "--threads", "1", "--quiet", "--output-dir"])
        .arg(parts.join("tune-out"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new(bin)
        .args(["conform", "sonic", "--config"])
        .arg(parts.join("fleet"))
        .arg("--output-dir")
        .arg(parts.join("conform-out"))
        .arg("--junit")
        .arg(parts.join("conform-out/junit.xml"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for (d, f) in files {
        let a = std::fs::read(parts.join(d).join(f)).unwrap();
        let b = std::fs::read(merged.join(f)).unwrap();
        assert!(
            a == b,
            "{d}/{f}: the merge of the Jobs' parts differs from the unsharded run"
        );
    }
    eprintln!("the tune Job ran {rounds} rounds of {n} indices; merged files equal the unsharded runs'");
}
