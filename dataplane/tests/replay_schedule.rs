//! `rocesw replay --schedule`: a live-tuning experiment replayed byte for byte.

mod common;
use common::*;
use dataplane::replay::schedule::Schedule;
use dataplane::replay::{self, AppliedChange, ReplayOptions};
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
    let split = 600_000;
    let text = std::fs::read_to_string(repo_root().join("configs/default.toml")).unwrap();
    let schedule = Schedule::from_text(
        text,
        "default.toml",
        "[[change]]\nat = \"0ns\"\n[change.patch.ecn.roce]\nkmin = \"400KB\"\nkmax = \"4MB\"\n\
         [[change]]\nat = \"600us\"\n[change.patch.ecn.roce]\nkmin = \"10KB\"\nkmax = \"20KB\"\n",
        "schedule.toml",
    )
    .unwrap();
    let run = |out: &std::path::Path| {
        let opts = ReplayOptions {
            inputs: inputs.clone(),
            output_dir: out.join("out"),
            seed: 3,
            peer_ignores_pfc: false,
            progress: None,
            schedule: schedule.clone(),
            timeline: false,
        };
        replay::run(&base, &opts).unwrap()
    };
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let oa = run(a.path());
    let ob = run(b.path());
    let keys = vec!["ecn.roce.kmax".to_string(), "ecn.roce.kmin".to_string()];
    let applied = |at_ns| AppliedChange {
        at_ns,
        applied: true,
        keys: keys.clone(),
    };
    assert_eq!(oa.schedule, [applied(0), applied(split)]);
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

/// Issue 41 item 9: a schedule at the 4 MiB cap (64,000 entries) replays in bounded memory.
/// Each entry kept a whole config (20,000 entries took 1.78 GiB), and the check for unknown
/// keys padded every piece of the file with blank lines up to its line (quadratic: 64,000
/// entries passed 13.7 GB and were killed). Now each step keeps its fragment as text and is
/// prepared again when its time comes, and the file is read an entry at a time: the stated
/// bound is 128 MiB peak RSS (measured: 53 MiB, of which 36 MiB is the replay without a
/// schedule). The child runs under a 2 GiB address-space limit, so the old code fails the
/// test instead of the machine.
#[test]
fn a_schedule_at_the_size_cap_replays_in_bounded_memory() {
    use std::fmt::Write;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let inputs = incast(d);
    let mut text = String::new();
    for i in 0..64_000u64 {
        let _ = write!(
            text,
            "[[change]]\nat=\"{}ns\"\n[change.patch.ecn.roce]\nkmax=\"{}KB\"\n",
            i * 100,
            400 + i % 50
        );
    }
    assert!(
        text.len() as u64 <= controlplane::files::MAX_TEXT_BYTES,
        "{}",
        text.len()
    );
    let f = d.join("schedule.toml");
    std::fs::write(&f, &text).unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_rocesw"));
    cmd.args(["replay", "--quiet", "--config"])
        .arg(repo_root().join("configs/default.toml"))
        .arg("--output-dir")
        .arg(d.join("out"))
        .arg("--schedule")
        .arg(&f)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    for (p, path) in &inputs {
        cmd.arg("--input").arg(format!("{p}={}", path.display()));
    }
    // SAFETY: setrlimit is async-signal-safe, and the closure touches nothing else.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 2 << 30,
                rlim_max: 2 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    // Reaped by wait4 below, which also reports its peak memory.
    #[allow(clippy::zombie_processes)]
    let mut child = cmd.spawn().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the child is ours and not yet waited for; status and usage are valid for writes.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    let tail: String = stderr.lines().rev().take(5).collect::<Vec<_>>().join("\n");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "status {status}: {tail}"
    );
    let peak_mib = usage.ru_maxrss as f64 / 1024.0;
    assert!(peak_mib < 128.0, "peak RSS {peak_mib:.0} MiB for 64,000 entries");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("out/summary.json")).unwrap()).unwrap();
    let steps = summary["schedule"].as_array().unwrap();
    assert_eq!(steps.len(), 64_000);
    // Step 0 sets what is already set (400KB); step 1 changes it, and applies.
    assert!(
        steps[1]["applied"] == true && steps[1]["keys"][0] == "ecn.roce.kmax",
        "{}",
        steps[1]
    );
}
