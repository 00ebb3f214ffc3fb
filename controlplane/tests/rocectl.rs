//! The offline `rocectl` commands, run as a user would.

use std::process::Command;

fn rocectl(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rocectl")).args(args).output().unwrap();
    (
        out.status.success(),
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
