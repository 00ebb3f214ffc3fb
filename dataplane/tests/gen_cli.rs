//! `rocesw gen incast --size`: a size as configs write it, within what a frame can be, and a
//! warning when the config the captures are for would drop them (issue 23 item 7).

mod common;

use std::path::Path;
use std::process::Command;

/// `rocesw gen incast` of 3 frames per sender (2 senders unless `args` says).
fn gen(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let senders: &[&str] = if args.contains(&"--senders") {
        &[]
    } else {
        &["--senders", "2"]
    };
    let o = Command::new(env!("CARGO_BIN_EXE_rocesw"))
        .args(["gen", "incast", "--frames", "3", "--output-dir"])
        .arg(dir)
        .args(senders)
        .args(args)
        .output()
        .unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Each frame's length in a capture.
fn frame_lengths(pcap: &Path) -> Vec<usize> {
    common::read_pcap(pcap).iter().map(|(_, f)| f.len()).collect()
}

#[test]
fn sizes_below_the_ethernet_minimum_or_above_any_port_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (size, want) in [
        ("59", "59 bytes is below the Ethernet minimum of 60"),
        ("9235", "above the largest frame a port can take, 9234"),
        ("1kbit", "not bits"),
        ("big", "is not a size"),
    ] {
        let (code, err) = gen(dir.path(), &["--size", size]);
        assert_eq!(code, Some(2), "--size {size}: {err}");
        assert!(err.contains(want), "--size {size}: wanted {want:?}, got {err}");
    }
    assert!(!dir.path().join("port0.pcap").exists(), "nothing written");
}

#[test]
fn the_smallest_frame_and_a_size_with_a_unit_are_written_as_asked() {
    let dir = tempfile::tempdir().unwrap();
    let (code, err) = gen(dir.path(), &["--size", "60"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("warning"), "{err}");
    assert_eq!(frame_lengths(&dir.path().join("port0.pcap")), [60, 60, 60]);
    let (code, err) = gen(dir.path(), &["--size", "1k"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(frame_lengths(&dir.path().join("port1.pcap")), [1024, 1024, 1024]);
}

/// 4200-byte frames for the default profile (mtu 1500: frames up to 1518) were written with
/// exit 0 and then every one dropped as oversize by replay: now a warning says so (the
/// captures are still written, for a config with a larger mtu); with such a config, none.
#[test]
fn frames_the_config_would_drop_get_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let (code, err) = gen(dir.path(), &["--size", "4200"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("warning: --size 4200 is above the largest frame port 0 of the built-in default profile")
            && err.contains("(1518 bytes: mtu 1500 + 18)")
            && err.contains("oversize"),
        "{err}"
    );
    assert_eq!(frame_lengths(&dir.path().join("port0.pcap")), [4200, 4200, 4200]);
    let (code, err) = gen(dir.path(), &["--size", "1518"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("warning"), "{err}");
    let jumbo = dir.path().join("jumbo.toml");
    let text = controlplane::DEFAULT_PROFILE.replace("[[port]]\n", "[[port]]\nmtu = 9000\n");
    std::fs::write(&jumbo, text).unwrap();
    let (code, err) = gen(dir.path(), &["--size", "4200", "--config", jumbo.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("warning"), "{err}");
    // Five ports for an incast of four senders: the default profile has four.
    let (code, err) = gen(dir.path(), &["--senders", "4"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("has no port 4"), "{err}");
}

/// Issue 41 item 7: `port<N>.pcap` in the output folder as a symlink or hard link to the
/// `--config` file was written through, replacing the config, with exit 0. Now refused, the
/// config intact.
#[test]
fn a_capture_that_is_the_config_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let config = d.join("switch.toml");
    let text = std::fs::read_to_string(common::repo_root().join("configs/default.toml")).unwrap();
    std::fs::write(&config, &text).unwrap();
    let links: [fn(&Path, &Path) -> std::io::Result<()>; 2] =
        [|a, b| std::os::unix::fs::symlink(a, b), |a, b| std::fs::hard_link(a, b)];
    for (i, link) in links.iter().enumerate() {
        let out = d.join(format!("out{i}"));
        std::fs::create_dir(&out).unwrap();
        link(&config, &out.join("port1.pcap")).unwrap();
        let (code, err) = gen(&out, &["--config", config.to_str().unwrap()]);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("port1.pcap") && err.contains("the config"), "{err}");
        assert_eq!(std::fs::read_to_string(&config).unwrap(), text, "the config is intact");
        assert!(!out.join("port0.pcap").exists(), "nothing written");
    }
}

/// Issue 49 item 4: a config's validation warnings are `rocectl check`'s to say in full; gen
/// (as replay and run, through the same loader) counts them in one line that points there,
/// rather than repeating them every time the config is used.
#[test]
fn a_configs_warnings_are_counted_in_one_line_that_points_at_check() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("small.toml");
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/default.toml")).unwrap();
    let small = text.replacen("headroom = \"auto\"", "headroom = \"1KiB\"", 1);
    assert_ne!(small, text);
    std::fs::write(&cfg, small).unwrap();
    let loaded = controlplane::load_file(&cfg);
    let n = match loaded {
        Ok(l) => l.warnings.len(),
        Err(e) => panic!("{e}"),
    };
    assert!(n >= 1, "the config warns");
    let (code, err) = gen(&dir.path().join("out"), &["--config", cfg.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        !err.contains("is below the headroom"),
        "the warning itself is check's: {err}"
    );
    let want = format!("`rocectl check {}` lists", cfg.display());
    assert_eq!(err.matches(&want).count(), 1, "{err}");
}

/// Issue 49 item 2: for a config_db.json, `gen incast --config` warned "has no port 1" and
/// wrote port0..3.pcap, for ports the file does not have (its ids are 0, 4, 8, ...), on DSCP 26
/// (TC 1 in AZURE's maps, a lossy queue). Now the incast runs on the file's first ports,
/// each capture named by the port's id, on the file's lossless DSCP; `--ports` picks others by
/// name or id.
#[test]
fn a_config_db_json_gets_its_own_ports_and_lossless_dscp() {
    let dir = tempfile::tempdir().unwrap();
    let file = common::repo_root().join("configs/sonic/spectrum1-t1.json");
    let file = file.to_str().unwrap();
    let dscp = |pcap: &Path| common::read_pcap(pcap)[0].1[15] >> 2;
    let o = Command::new(env!("CARGO_BIN_EXE_rocesw"))
        .args(["gen", "incast", "--frames", "3", "--config", file, "--output-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{err}");
    // (The file's own budget warnings are `rocectl check`'s, not the incast's.)
    for not in ["has no port", "not lossless", "oversize"] {
        assert!(!err.contains(not), "{err}");
    }
    for (id, role) in [(0, "sender"), (4, "sender"), (8, "sender"), (12, "receiver")] {
        let line = format!("port{id}.pcap (Ethernet{id}, port {id}: {role})");
        assert!(out.contains(&line), "{line} missing from:\n{out}");
    }
    assert!(!dir.path().join("port1.pcap").exists());
    assert_eq!(frame_lengths(&dir.path().join("port4.pcap")), [1024, 1024, 1024]);
    assert_eq!(dscp(&dir.path().join("port8.pcap")), 3, "AZURE's lossless DSCP");

    // Other ports, by name and id; the receiver last.
    let d2 = dir.path().join("picked");
    let (code, err) = gen(&d2, &["--config", file, "--ports", "Ethernet16,20,Ethernet4"]);
    assert_eq!(code, Some(0), "{err}");
    for id in [16, 20, 4] {
        assert!(d2.join(format!("port{id}.pcap")).exists(), "port{id}.pcap");
    }
    assert_eq!(
        common::read_pcap(&d2.join("port4.pcap")).len(),
        1,
        "the receiver's announcement"
    );
    // A port the file does not have, or a lossy DSCP: said.
    let (code, err) = gen(&d2, &["--config", file, "--ports", "Ethernet0,Ethernet2"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("has no port \"Ethernet2\"") && err.contains("Ethernet4 (4)"),
        "{err}"
    );
    let (code, err) = gen(&d2, &["--config", file, "--dscp", "26"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("DSCP 26 is not lossless") && err.contains("3, 4"), "{err}");
}
