//! Issue 48: `rocesw tune --shard I/N` and `rocesw tune merge`: the shards' parts, round by
//! round, merge to the unsharded run's files byte for byte; a merge names the round and the
//! shards whose parts are missing, and rerunning those completes the set; parts of another
//! sweep are refused. A small sweep (4 patterns of 300 µs, --quick), so it takes seconds.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

struct Sweep {
    _dir: tempfile::TempDir,
    root: PathBuf,
    args: Vec<String>,
}

fn sweep(seed: u64) -> Sweep {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    std::fs::write(root.join("patterns.toml"), common::SMALL_TUNE_PATTERNS).unwrap();
    let args = vec![
        "tune".to_string(),
        "--topology".into(),
        common::repo_root()
            .join("examples/tune/topology.toml")
            .display()
            .to_string(),
        "--default-config".into(),
        common::repo_root().join("configs/default.toml").display().to_string(),
        "--patterns".into(),
        root.join("patterns.toml").display().to_string(),
        "--quick".into(),
        "--seed".into(),
        seed.to_string(),
        "--threads".into(),
        "1".into(),
    ];
    Sweep { _dir: dir, root, args }
}

impl Sweep {
    fn run(&self, cwd: &Path, extra: &[&str]) -> Output {
        std::fs::create_dir_all(cwd).unwrap();
        let mut a: Vec<&str> = self.args.iter().map(String::as_str).collect();
        a.extend_from_slice(extra);
        common::rocesw_in(cwd, &a)
    }

    /// Runs every shard of `n` once (one round); the shards' stderr.
    fn round(&self, cwd: &Path, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| {
                let spec = format!("{i}/{n}");
                let o = self.run(cwd, &["--shard", &spec, "--output-dir", "parts", "--quiet"]);
                assert!(o.status.success(), "shard {spec}: {}", common::output_text(&o));
                String::from_utf8_lossy(&o.stderr).into_owned()
            })
            .collect()
    }
}

fn parts_of_round(dir: &Path, round: usize) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("tune.part.r{round:02}.")))
        .collect();
    v.sort();
    v
}

#[test]
fn three_shards_merge_to_the_unsharded_files_byte_for_byte() {
    let s = sweep(7);
    let local = s.root.join("local");
    let o = s.run(&local, &["--output-dir", "out", "--quiet"]);
    assert!(o.status.success(), "{}", common::output_text(&o));

    let cluster = s.root.join("cluster");
    // Round 1: every shard writes its part; a merge now names round 2 as not run.
    let logs = s.round(&cluster, 3);
    for (i, l) in logs.iter().enumerate() {
        assert!(
            l.contains(&format!("shard {i}/3: round 1 (of at most 4): ran ")),
            "shard {i} says its round and share: {l}"
        );
    }
    assert_eq!(
        parts_of_round(&cluster.join("parts"), 1),
        [
            "tune.part.r01.s0of3.json",
            "tune.part.r01.s1of3.json",
            "tune.part.r01.s2of3.json"
        ]
    );
    let m = common::rocesw_in(&cluster, &["tune", "merge", "parts", "--output-dir", "out"]);
    assert_eq!(m.status.code(), Some(2), "{}", common::output_text(&m));
    assert!(
        common::output_text(&m).contains("round 2 (of at most 4) has not run")
            && common::output_text(&m).contains("run all 3 shards again"),
        "{}",
        common::output_text(&m)
    );
    // The remaining rounds, until the shards say the search is complete.
    let mut rounds = 1;
    loop {
        let logs = s.round(&cluster, 3);
        if logs.iter().all(|l| l.contains("the search is complete")) {
            break;
        }
        rounds += 1;
        assert!(rounds <= 4, "at most 2 + 2 climbing rounds with --quick: {logs:?}");
    }
    assert!(rounds >= 2, "the finalists are a round of their own");

    // A shard's part lost: the merge names the round and the shard; rerunning it completes the set.
    let lost = cluster.join("parts/tune.part.r02.s1of3.json");
    std::fs::remove_file(&lost).unwrap();
    let m = common::rocesw_in(&cluster, &["tune", "merge", "parts", "--output-dir", "out"]);
    assert_eq!(m.status.code(), Some(2), "{}", common::output_text(&m));
    assert!(
        common::output_text(&m).contains("round 2 (of at most 4) lacks the parts of shards 1/3"),
        "{}",
        common::output_text(&m)
    );
    let o = s.run(&cluster, &["--shard", "1/3", "--output-dir", "parts", "--quiet"]);
    assert!(o.status.success() && lost.exists(), "{}", common::output_text(&o));

    let m = common::rocesw_in(&cluster, &["tune", "merge", "parts", "--output-dir", "out"]);
    assert!(m.status.success(), "{}", common::output_text(&m));
    for f in ["tune.json", "tune.svg", "tuned.toml"] {
        let a = std::fs::read(local.join("out").join(f)).unwrap();
        let b = std::fs::read(cluster.join("out").join(f)).unwrap();
        assert!(a == b, "{f} differs between the unsharded run and the merge");
    }
    // The shards' times and hosts: on stdout and in shards.json, not in the files above.
    let out = String::from_utf8_lossy(&m.stdout);
    assert!(out.contains(&format!("3 shards, {rounds} rounds, on 1 host")), "{out}");
    let shards: serde_json::Value =
        serde_json::from_slice(&std::fs::read(cluster.join("out/shards.json")).unwrap()).unwrap();
    assert_eq!(shards["shards"], 3);
    assert_eq!(shards["parts"].as_array().unwrap().len(), 3 * rounds);
    assert!(shards["parts"][0]["seconds"].as_f64().unwrap() > 0.0);

    // A shard of another sweep (another seed) refuses the directory; a merge refuses the mix.
    let other = sweep(8);
    let o = other.run(&cluster, &["--shard", "0/3", "--output-dir", "parts", "--quiet"]);
    assert_eq!(o.status.code(), Some(2), "{}", common::output_text(&o));
    assert!(
        common::output_text(&o).contains("a part of another sweep"),
        "{}",
        common::output_text(&o)
    );
    let o = other.run(
        &other.root.join("c"),
        &["--shard", "0/3", "--output-dir", "parts", "--quiet"],
    );
    assert!(o.status.success(), "{}", common::output_text(&o));
    let theirs = other.root.join("c/parts/tune.part.r01.s0of3.json");
    let m = common::rocesw_in(
        &cluster,
        &[
            "tune",
            "merge",
            "parts",
            theirs.to_str().unwrap(),
            "--output-dir",
            "out2",
        ],
    );
    assert_eq!(m.status.code(), Some(2), "{}", common::output_text(&m));
    assert!(
        common::output_text(&m).contains("parts of different sweeps"),
        "{}",
        common::output_text(&m)
    );
}

#[test]
fn shard_specs_and_merges_without_parts_get_clear_errors() {
    let s = sweep(7);
    for (spec, want) in [("3/3", "from 0 to 2"), ("0/0", "at least 1"), ("x", "I/N")] {
        let o = s.run(&s.root, &["--shard", spec, "--output-dir", "parts"]);
        assert_eq!(o.status.code(), Some(2), "{}", common::output_text(&o));
        assert!(
            common::output_text(&o).contains(want),
            "--shard {spec}: {}",
            common::output_text(&o)
        );
    }
    std::fs::create_dir_all(s.root.join("empty")).unwrap();
    let m = common::rocesw_in(&s.root, &["tune", "merge", "empty", "--output-dir", "out"]);
    assert_eq!(m.status.code(), Some(2), "{}", common::output_text(&m));
    assert!(
        common::output_text(&m).contains("no part files"),
        "{}",
        common::output_text(&m)
    );
    let h = common::rocesw_in(&s.root, &["tune", "merge", "--help"]);
    assert!(h.status.success() && String::from_utf8_lossy(&h.stdout).contains("byte for byte"));
}
