//! The offline `rocectl` commands, and its command line, run as a user would (no switch: the
//! live commands are tested against one in dataplane/tests).

use std::process::Command;

fn rocectl(args: &[&str]) -> (bool, String, String) {
    let (code, out, err) = rocectl_env(args, None);
    (code == Some(0), out, err)
}

/// `rocectl args` with ROCECTL_SWITCH set to `env` (or cleared): (exit code, stdout, stderr).
fn rocectl_env(args: &[&str], env: Option<&str>) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rocectl"));
    cmd.args(args).env_remove("ROCECTL_SWITCH");
    if let Some(v) = env {
        cmd.env("ROCECTL_SWITCH", v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn config(name: &str) -> String {
    format!("{}/../configs/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn check_accepts_the_shipped_profiles() {
    for name in ["default.toml", "ucloud-tor.toml"] {
        let (ok, out, err) = rocectl(&["check", "--verbose", &config(name)]);
        assert!(ok, "{name}: {err}");
        assert!(out.contains("valid"), "{out}");
        assert!(out.contains("headroom"), "{out}");
    }
}

/// `check -v` shows each port's scheduler: the kind, and a vlarb port's tables as OpenSM
/// writes them with the limit in bytes.
#[test]
fn check_shows_each_ports_scheduler() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vlarb.toml");
    let text = std::fs::read_to_string(config("default.toml")).unwrap().replacen(
        "[[port]]\nid = 1\n",
        "[[port]]\nid = 1\nscheduler = \"vlarb\"\nvlarb = { high = [[6, 255], [3, 16]], low = [[0, 64]], high_limit = 6 }\n",
        1,
    );
    std::fs::write(&path, text).unwrap();
    let (ok, out, err) = rocectl(&["check", "--verbose", path.to_str().unwrap()]);
    assert!(ok, "{err}");
    let line = |id: u16| {
        out.lines()
            .find(|l| l.starts_with(&format!("  port {id}:")))
            .unwrap()
            .to_string()
    };
    assert!(line(0).ends_with("scheduler sp_wdrr"), "{out}");
    assert!(
        line(1).ends_with("scheduler vlarb (high 6:255,3:16, low 0:64, high limit 24KiB)"),
        "{out}"
    );
    // The queues' strict/WDRR settings are not used there: a warning says so.
    assert!(
        out.contains("warning: queue.{0, 3, 6}.sched/weight: not used on port 1"),
        "{out}"
    );
}

#[test]
fn check_names_every_bad_field_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    let text = std::fs::read_to_string(config("default.toml")).unwrap();
    let text = text
        .replace("kmin = \"100KB\"", "kmin = \"900KB\"")
        .replace("pmax = 0.2", "pmax = 1.5");
    std::fs::write(&path, text).unwrap();
    let (ok, _, err) = rocectl(&["check", path.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("ecn.roce.kmin"), "{err}");
    assert!(err.contains("ecn.roce.pmax"), "{err}");
}

#[test]
fn headroom_shows_the_ucloud_figures_and_its_working() {
    for (speed, cable, ucloud) in [("25G", "15m", 98i64), ("100G", "100m", 408)] {
        let (ok, out, err) = rocectl(&["headroom", "--speed", speed, "--cable", cable]);
        assert!(ok, "{err}");
        // The result line: "  = 100 cells = 25600 B".
        let cells: i64 = out
            .lines()
            .find_map(|l| l.trim().strip_prefix("= ")?.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no cell count in:\n{out}"));
        assert!(
            (cells - ucloud).abs() <= 5,
            "{speed}/{cable}: {cells} cells vs UCloud {ucloud}\n{out}"
        );
        assert!(out.lines().count() > 4, "the working is shown:\n{out}");
    }
    let (ok, _, err) = rocectl(&["headroom", "--speed", "fast", "--cable", "15m"]);
    assert!(!ok && err.contains("fast"), "{err}");
}

#[test]
fn check_accepts_a_port_peer_and_refuses_an_unknown_one() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(config("default.toml")).unwrap();
    let with_peer = |peer: &str| {
        text.replacen(
            "[[port]]\nid = 0\n",
            &format!("[[port]]\nid = 0\npeer = \"{peer}\"\n"),
            1,
        )
    };
    assert_ne!(
        with_peer("wire"),
        text,
        "the profile's first port is where the test expects it"
    );
    for (peer, valid) in [("emulated", true), ("wire", true), ("software", false)] {
        let path = dir.path().join(format!("{peer}.toml"));
        std::fs::write(&path, with_peer(peer)).unwrap();
        let (ok, _, err) = rocectl(&["check", path.to_str().unwrap()]);
        assert_eq!(ok, valid, "peer = {peer:?}: {err}");
        if !valid {
            assert!(err.contains("port[0].peer") && err.contains("\"software\""), "{err}");
        }
    }
    // `check -v`: an emulated port's headroom is the wire figure plus the catch-up step, and
    // the line says so.
    let path = dir.path().join("emulated.toml");
    let (ok, out, err) = rocectl(&["check", "--verbose", path.to_str().unwrap()]);
    assert!(ok, "{err}");
    let line = |id: u16| {
        out.lines()
            .find(|l| l.starts_with(&format!("  port {id}:")))
            .unwrap()
            .to_string()
    };
    assert!(
        line(0).contains("PG3 headroom 65KiB (emulated peer: + a 16KiB catch-up step)"),
        "{out}"
    );
    assert!(
        line(1).contains("PG3 headroom 25KiB") && !line(1).contains("emulated"),
        "{out}"
    );
}

const CONNECTION: [&str; 6] = ["--socket", "--switch", "--all", "--tcp", "--token-file", "Connection"];

/// `check`, `headroom` and `switches` talk to no switch they are told of: their help lists no
/// connection options. The commands that do list them, `set`'s knobs included.
#[test]
fn only_commands_that_talk_to_a_switch_list_connection_options() {
    for cmd in [&["check"][..], &["headroom"], &["switches"]] {
        let (ok, out, err) = rocectl(&[cmd, &["--help"]].concat());
        assert!(ok, "{cmd:?}: {err}");
        for opt in CONNECTION {
            assert!(!out.contains(opt), "{cmd:?} --help lists {opt}:\n{out}");
        }
    }
    for cmd in [
        &["show"][..],
        &["clear"],
        &["apply"],
        &["patch"],
        &["watch"],
        &["daemon"],
        &["set", "ecn"],
        &["set", "dscp"],
    ] {
        let (ok, out, err) = rocectl(&[cmd, &["--help"]].concat());
        assert!(ok, "{cmd:?}: {err}");
        for opt in CONNECTION {
            assert!(out.contains(opt), "{cmd:?} --help lacks {opt}:\n{out}");
        }
    }
}

/// A Unix socket that answers every request line with an error naming its op: shows that
/// rocectl reached the socket it was given.
fn fake_switch(path: &std::path::Path) -> std::thread::JoinHandle<()> {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut out = stream.try_clone().unwrap();
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            let req: serde_json::Value = serde_json::from_str(&line).unwrap();
            let answer = serde_json::json!({"v": 1, "id": req["id"], "ok": false,
                "error": format!("fake switch got {}", req["op"])});
            if writeln!(out, "{answer}").is_err() {
                break;
            }
        }
    })
}

/// Connection options after the command reach the socket they name, as they do before it
/// (the order rocectl always took); a missing socket is named in the error.
#[test]
fn connection_options_before_or_after_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s.sock");
    let p = sock.to_str().unwrap();
    for args in [
        &["show", "counters", "--socket", p][..],
        &["--socket", p, "show", "counters"],
        &["set", "ecn", "--queue", "3", "--kmax", "10KB", "--socket", p],
        &["--socket", p, "set", "ecn", "--queue", "3", "--kmax", "10KB"],
    ] {
        let server = fake_switch(&sock);
        let (code, _, err) = rocectl_env(args, None);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.contains("fake switch got"), "{args:?}: {err}");
        server.join().unwrap();
        std::fs::remove_file(&sock).unwrap();
    }
    let missing = dir.path().join("missing.sock");
    let m = missing.to_str().unwrap();
    for args in [&["show", "pfc", "--socket", m][..], &["--socket", m, "show", "pfc"]] {
        // ROCECTL_SWITCH is only the default: an explicit socket is no conflict with it.
        for env in [None, Some("leaf1")] {
            let (code, _, err) = rocectl_env(args, env);
            assert_eq!(code, Some(1), "{args:?}: {err}");
            assert!(
                err.contains("is `rocesw run` running?") && err.contains(m),
                "{args:?}: {err}"
            );
        }
    }
}

/// Given both before and after the command, they are refused (exit 2) rather than one
/// silently winning; an offline command given them before it refuses them (after it, clap
/// does), so nobody believes `rocectl --switch leaf1 check FILE` asked leaf1.
#[test]
fn connection_options_in_two_places_or_for_an_offline_command_are_refused() {
    let (code, _, err) = rocectl_env(&["--socket", "/tmp/a.sock", "show", "counters", "-s", "b"], None);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("give them in one place"), "{err}");
    let file = config("default.toml");
    let (code, _, err) = rocectl_env(&["--switch", "leaf1", "check", &file], None);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("`check` works offline") && err.contains("remove --switch"),
        "{err}"
    );
    let (code, _, err) = rocectl_env(&["check", &file, "--switch", "leaf1"], None);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("unexpected argument '--switch'"), "{err}");
    // The environment's default switch is not an option given: offline commands run.
    let (code, out, err) = rocectl_env(&["check", &file], Some("leaf1"));
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("valid"), "{out}");
}

/// `set ecn` without a target says that either --profile or --queue will do.
#[test]
fn set_ecn_without_a_target_names_profile_and_queue() {
    let (code, _, err) = rocectl_env(&["set", "ecn", "--kmax", "10KB"], None);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--profile") && err.contains("--queue"), "{err}");
}
