//! `rocesw replay --schedule`: a live-tuning experiment replayed byte for byte.

mod common;
use common::*;
use dataplane::replay::{self, AppliedChange, ReplayOptions, ScheduledChange};
use dataplane::tools::gen::Incast;

fn incast(dir: &std::path::Path) -> Vec<(u16, std::path::PathBuf)> {
    Incast {
        senders: 3,
        frames: 1500,
        frame_len: 1024,
        speed_bps: 25_000_000_000,
        dscp: 26,
    }
    .write(&dir.join("in"))
    .unwrap()
    .into_iter()
    .enumerate()
    .map(|(i, p)| (i as u16, p))
    .collect()
}

/// CE-marked frames on port 3 before and after `split_ns` (virtual time from the start).
fn marks_around(dir: &std::path::Path, split_ns: u64) -> ((usize, usize), (usize, usize)) {
    let frames = roce_frames(&read_pcap(&out_pcap(dir, 3)));
    let base = dataplane::tools::gen::BASE_NS;
    let count = |early: bool| {
        let sel: Vec<_> = frames
            .iter()
            .filter(|(t, _, _)| (t - base < split_ns) == early)
            .collect();
        let ce = sel
            .iter()
            .filter(|(_, _, i)| i.ecn() == Some(dataplane::wire::Ecn::Ce))
            .count();
        (ce, sel.len())
    };
    (count(true), count(false))
}

#[test]
fn a_scheduled_kmax_change_applies_at_its_time_and_replays_identically() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = incast(dir.path());
    let base = default_config();
    // Widen Kmax first so marking is partial, then tighten it at 600 µs.
    // The dataplane reads each port's own profiles.
    let with_ecn = |kmin, kmax| {
        let mut c = base.clone();
        for port in &mut c.ports {
            let p = port.queues[3].ecn.as_mut().unwrap();
            p.kmin_bytes = kmin;
            p.kmax_bytes = kmax;
        }
        c
    };
    let wide = with_ecn(400_000, 4_000_000);
    let tight = with_ecn(10_000, 20_000);
    let split = 600_000;
    let run = |out: &std::path::Path| {
        let opts = ReplayOptions {
            inputs: inputs.clone(),
            output_dir: out.join("out"),
            seed: 3,
            peer_ignores_pfc: false,
            progress: None,
            schedule: vec![
                ScheduledChange {
                    at_ns: 0,
                    config: wide.clone(),
                    keys: vec!["ecn.roce.kmax".into()],
                },
                ScheduledChange {
                    at_ns: split,
                    config: tight.clone(),
                    keys: vec!["ecn.roce.kmin".into()],
                },
            ],
        };
        replay::run(&base, &opts).unwrap()
    };
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let oa = run(a.path());
    let ob = run(b.path());
    let applied = |at_ns, key: &str| AppliedChange {
        at_ns,
        applied: true,
        keys: vec![key.into()],
    };
    assert_eq!(
        oa.schedule,
        [applied(0, "ecn.roce.kmax"), applied(split, "ecn.roce.kmin")]
    );
    for port in 0..4 {
        assert!(
            std::fs::read(out_pcap(a.path(), port)).unwrap() == std::fs::read(out_pcap(b.path(), port)).unwrap(),
            "port {port} differs between identical scheduled runs"
        );
    }
    assert_eq!(
        serde_json::to_string(&oa.snapshot).unwrap(),
        serde_json::to_string(&ob.snapshot).unwrap()
    );
    let ((ce1, n1), (ce2, n2)) = marks_around(a.path(), split + 2_000);
    let (f1, f2) = (ce1 as f64 / n1 as f64, ce2 as f64 / n2 as f64);
    assert!(f1 < 0.2 && f2 > 0.9, "marked {f1:.3} before the change, {f2:.3} after");
    assert_eq!(oa.snapshot.totals.drops.total(), 0);
    assert_eq!(oa.snapshot.buffer.used_cells, 0, "no cell leaked across the change");
}

fn rocesw(args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rocesw"))
        .args(args)
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn the_cli_validates_every_step_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let inputs = incast(d);
    let cfg = repo_root().join("configs/default.toml");
    let mut args: Vec<String> = vec![
        "replay".into(),
        "--quiet".into(),
        "--config".into(),
        cfg.display().to_string(),
    ];
    for (p, path) in &inputs {
        args.push("--input".into());
        args.push(format!("{p}={}", path.display()));
    }
    args.push("--output-dir".into());
    args.push(d.join("out").display().to_string());
    let good = d.join("good.toml");
    std::fs::write(
        &good,
        "[[change]]\nat = \"600us\"\n[change.patch.ecn.roce]\nkmin = \"10KB\"\nkmax = \"20KB\"\n",
    )
    .unwrap();
    let bad = d.join("bad.toml");
    std::fs::write(
        &bad,
        "[[change]]\nat = \"1ms\"\n[change.patch.ecn.roce]\nkmin = \"900KB\"\n",
    )
    .unwrap();
    let with = |f: &std::path::Path| {
        let mut a = args.clone();
        a.push("--schedule".into());
        a.push(f.display().to_string());
        a
    };
    let a = with(&good);
    let (ok, err) = rocesw(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(ok, "{err}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("out/summary.json")).unwrap()).unwrap();
    assert!(summary["totals"]["ecn_marked"].as_u64().unwrap() > 0);
    // Issue 23 item 10: the summary records each change, when and what it set.
    assert_eq!(
        summary["schedule"],
        serde_json::json!([{"at_ns": 600_000, "applied": true, "keys": ["ecn.roce.kmax", "ecn.roce.kmin"]}]),
        "{summary}"
    );
    assert!(!err.contains("not applied"), "{err}");
    // A change after the last frame left: never applied, said so, and recorded as such.
    let late = d.join("late.toml");
    std::fs::write(
        &late,
        "[[change]]\nat = \"600us\"\n[change.patch.ecn.roce]\nkmin = \"10KB\"\nkmax = \"20KB\"\n\
         [[change]]\nat = \"5s\"\n[change.patch.pg.3]\nalpha = \"1/16\"\n",
    )
    .unwrap();
    let l = with(&late);
    let (ok, err) = rocesw(&l.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(ok, "{err}");
    assert!(
        err.contains("the change at 5s (pg.3.alpha) was not applied: the replay ended at"),
        "{err}"
    );
    assert!(
        !err.contains('\u{1b}'),
        "no colour codes when stderr is not a terminal: {err:?}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("out/summary.json")).unwrap()).unwrap();
    assert_eq!(summary["schedule"][1]["applied"], false, "{summary}");
    assert_eq!(summary["schedule"][1]["at_ns"], 5_000_000_000u64, "{summary}");
    // Without a schedule, no `schedule` key: summaries of plain replays are unchanged.
    let (ok, err) = rocesw(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(ok, "{err}");
    let plain = std::fs::read_to_string(d.join("out/summary.json")).unwrap();
    assert!(!plain.contains("\"schedule\""), "{plain}");
    let b = with(&bad);
    let (ok, err) = rocesw(&b.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        !ok && err.contains("ecn.roce.kmin") && err.contains("change 0"),
        "{err}"
    );
}

/// Issue 23 item 9: a typo in a schedule's patch is reported at its line of the schedule file
/// (line 4 of this 4-line file), not at a line of the config it is merged into; a SONiC name
/// gets a hint naming rocesw's key.
#[test]
fn a_typo_in_a_schedule_is_reported_at_the_schedules_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let inputs = incast(d);
    let cfg = repo_root().join("configs/default.toml");
    let run = |schedule: &str| {
        let f = d.join("schedule.toml");
        std::fs::write(&f, schedule).unwrap();
        let mut a: Vec<String> = vec![
            "replay".into(),
            "--quiet".into(),
            "--config".into(),
            cfg.display().to_string(),
        ];
        for (p, path) in &inputs {
            a.push("--input".into());
            a.push(format!("{p}={}", path.display()));
        }
        a.extend(["--output-dir".into(), d.join("out").display().to_string()]);
        a.extend(["--schedule".into(), f.display().to_string()]);
        rocesw(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let (ok, err) = run("[[change]]\nat = \"1ms\"\n[change.patch.ecn.roce]\nkmn = \"10KB\"\n");
    assert!(!ok, "{err}");
    assert!(
        err.contains("schedule.toml") && err.contains("line 4") && err.contains("unknown field `kmn`"),
        "{err}"
    );
    let (ok, err) = run("[[change]]\nat = \"1ms\"\n[change.patch.pg.3]\nxoff = \"40KiB\"\n");
    assert!(
        !ok && err.contains("line 4") && err.contains("rocesw's `headroom`"),
        "{err}"
    );
}
