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

/// `check` takes a rendered config_db.json with the platform and lookup table `sonic import`
/// takes (issue 45): the file names no platform, so without `--platform` it is refused naming
/// the field; the flags on a TOML config are refused.
#[test]
fn check_takes_a_sonic_files_platform() {
    let file = config("sonic/rendered/acs-msn2700-t1.json");
    let lookup = config("sonic/rendered/acs-msn2700.pg_profile_lookup.ini");
    let (ok, out, err) = rocectl(&["check", &file, "--platform", "spectrum1", "--pg-lookup", &lookup]);
    assert!(ok, "{err}");
    assert!(out.contains("valid (32 ports"), "{out}");
    let (ok, _, err) = rocectl(&["check", &file]);
    assert!(!ok && err.contains("DEVICE_METADATA|localhost|platform"), "{err}");
    let (ok, _, err) = rocectl(&["check", &config("default.toml"), "--platform", "spectrum1"]);
    assert!(
        !ok && err.contains("--platform and --pg-lookup are for a SONiC config_db.json"),
        "{err}"
    );
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

/// Issue 41 item 7: a config whose DPDK `net_pcap` port writes over another port's
/// `rx_pcap`, over the config itself, or over another port's `tx_pcap` through a symlink was
/// called valid; `rocesw run` refuses each, so `check` does too, naming both files.
#[test]
fn check_refuses_a_dpdk_capture_written_over_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let path = d.join("switch.toml");
    std::fs::write(d.join("in.pcap"), "x").unwrap();
    std::os::unix::fs::symlink(d.join("a.pcap"), d.join("link.pcap")).unwrap();
    let base = std::fs::read_to_string(config("default.toml")).unwrap();
    let dev = |i: usize, rx: &str, tx: &str| {
        format!(
            "dpdk = \"net_pcap{i},rx_pcap={},tx_pcap={}\"",
            d.join(rx).display(),
            d.join(tx).display()
        )
    };
    for (p0, p1, want) in [
        (
            dev(0, "in.pcap", "a.pcap"),
            dev(1, "b.pcap", "in.pcap"),
            "port 1 dpdk tx_pcap",
        ),
        (
            dev(0, "in.pcap", "switch.toml"),
            dev(1, "in.pcap", "b.pcap"),
            "the config",
        ),
        (
            dev(0, "in.pcap", "a.pcap"),
            dev(1, "in.pcap", "link.pcap"),
            "same file as port 0",
        ),
    ] {
        let text = base.replacen("id = 0\n", &format!("id = 0\n{p0}\n"), 1).replacen(
            "id = 1\n",
            &format!("id = 1\n{p1}\n"),
            1,
        );
        std::fs::write(&path, &text).unwrap();
        let (ok, out, err) = rocectl(&["check", path.to_str().unwrap()]);
        assert!(!ok, "{p0} / {p1}: called valid: {out}");
        assert!(err.contains("invalid") && err.contains(want), "{want}: {err}");
    }
    let text = base
        .replacen("id = 0\n", &format!("id = 0\n{}\n", dev(0, "in.pcap", "a.pcap")), 1)
        .replacen("id = 1\n", &format!("id = 1\n{}\n", dev(1, "in.pcap", "b.pcap")), 1);
    std::fs::write(&path, &text).unwrap();
    let (ok, out, err) = rocectl(&["check", path.to_str().unwrap()]);
    assert!(ok && out.contains("valid"), "{out}{err}");
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
    for cmd in [&["check"][..], &["headroom"], &["switches"], &["vlarb", "admit"]] {
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
        &["log"],
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

/// Issue 23 item 1: every command's and every `set` knob's help says what it does, in words
/// for its user: no Rust type, module path or source comment (an internal comment was every
/// knob's description).
#[test]
fn help_texts_name_no_rust_internals() {
    let (ok, top, err) = rocectl(&["--help"]);
    assert!(ok, "{err}");
    let (ok, set, err) = rocectl(&["set", "--help"]);
    assert!(ok, "{err}");
    // A knob's line is indented by two spaces; a description wrapped onto further lines is
    // indented deeper.
    let knob_lines: Vec<&str> = set
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.starts_with("   "))
        .collect();
    let knobs: Vec<String> = knob_lines
        .iter()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|k| k != "help")
        .collect();
    assert!(knobs.len() >= 8, "set's knobs: {knobs:?}\n{set}");
    let mut texts = vec![("rocectl".to_string(), top), ("set".to_string(), set.clone())];
    for k in &knobs {
        let (ok, out, err) = rocectl(&["set", k, "--help"]);
        assert!(ok, "set {k}: {err}");
        texts.push((format!("set {k}"), out));
    }
    let mut descriptions = std::collections::HashSet::new();
    for l in &knob_lines {
        if let Some((_, d)) = l.trim().split_once("  ") {
            assert!(
                descriptions.insert(d.trim().to_string()),
                "two knobs share the description {d:?}"
            );
        }
    }
    for (what, text) in &texts {
        for bad in ["::", "`Cli`", "flattened", "Args", "struct "] {
            assert!(!text.contains(bad), "{what} --help mentions {bad:?}:\n{text}");
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

/// `rocectl vlarb admit ARGS`: (exit code, stdout, stderr).
fn admit(args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec!["vlarb", "admit"];
    all.extend_from_slice(args);
    rocectl_env(&all, None)
}

/// The `high` pairs of a fragment, after merging it into `base` as `rocectl patch` does.
fn merged(base: &str, fragment: &std::path::Path) -> toml::Table {
    let mut t: toml::Table = base.parse().unwrap();
    let frag: toml::Table = std::fs::read_to_string(fragment).unwrap().parse().unwrap();
    controlplane::patch::merge(&mut t, frag);
    t
}

fn pairs(vlarb: &toml::Value) -> Vec<(i64, i64)> {
    vlarb["high"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let p = p.as_array().unwrap();
            (p[0].as_integer().unwrap(), p[1].as_integer().unwrap())
        })
        .collect()
}

/// Admit what fits, refuse the rest with the reason (exit 1), print the table and the bounds,
/// and write a fragment that `rocectl patch` merges into the config as `[port_defaults]`
/// scheduler and vlarb keys, nothing else.
#[test]
fn vlarb_admit_admits_refuses_and_writes_the_fragment() {
    let dir = tempfile::tempdir().unwrap();
    let frag = dir.path().join("frag.toml");
    let (code, out, err) = admit(&[
        "--speed",
        "100G",
        "--high-limit",
        "6",
        "-r",
        "name=a,bw=2G,latency=20us,mtu=1024",
        "-r",
        "name=b,bw=500M,distance=16",
        "-r",
        "name=fast,bw=1G,latency=1us",
        "-r",
        "name=huge,bw=40G,distance=2",
        "-o",
        frag.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{out}{err}");
    // a: distance 8 (16.7 µs guaranteed; 16 would be 33 µs), on entries 0, 8, ...; b: 4 entries.
    let row = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_default()
            .to_string()
    };
    assert!(row("a").contains(" 8@0 ") && row("a").contains("latency 20us"), "{out}");
    assert!(row("b").contains(" 4@4 "), "{out}");
    assert!(out.contains("12 of 64 entries used"), "{out}");
    assert!(
        out.lines().any(|l| l.trim_start().starts_with("8   1      68  a(68)")),
        "{out}"
    );
    assert!(
        out.contains("fast: latency: 1us is below what any distance guarantees"),
        "{out}"
    );
    assert!(out.contains("huge: not enough free entries: needs 64"), "{out}");

    let base = std::fs::read_to_string(config("default.toml")).unwrap();
    let t = merged(&base, &frag);
    let changed = controlplane::patch::changed_keys(&base.parse().unwrap(), &t);
    assert_eq!(changed, ["port_defaults.scheduler", "port_defaults.vlarb"]);
    // A running vlarb config keeps its low table: the fragment sets high and high_limit only.
    let running = base.replacen(
        "\n[[port]]\nid = 0\n",
        "\n[port_defaults.vlarb]\nhigh = [[0, 1]]\nlow = [[0, 64], [3, 128]]\nhigh_limit = 2\n\n[[port]]\nid = 0\n",
        1,
    );
    assert_ne!(running, base);
    let t2 = merged(&running, &frag);
    assert_eq!(
        controlplane::patch::changed_keys(&running.parse().unwrap(), &t2),
        [
            "port_defaults.scheduler",
            "port_defaults.vlarb.high",
            "port_defaults.vlarb.high_limit"
        ]
    );
    assert_eq!(t2["port_defaults"]["vlarb"]["low"].as_array().unwrap().len(), 2);
    let d = &t["port_defaults"];
    assert_eq!(d["scheduler"].as_str(), Some("vlarb"));
    assert_eq!(d["vlarb"]["high_limit"].as_integer(), Some(6));
    let high = pairs(&d["vlarb"]);
    assert_eq!(high.len(), 64);
    for (k, &(vl, w)) in high.iter().enumerate() {
        let want = match k {
            k if k % 8 == 0 => (1, 68),
            k if k % 16 == 4 => (2, 48),
            _ => (0, 0),
        };
        assert_eq!((vl, w), want, "entry {k}");
    }
}

/// A state file accumulates admissions across runs; a release re-packs the table so a request
/// that needs the freed room fits; a release of an unknown name is an error that writes nothing.
#[test]
fn vlarb_admit_accumulates_and_releases() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("port.json");
    let frag = dir.path().join("frag.toml");
    let (s, f) = (state.to_str().unwrap(), frag.to_str().unwrap());
    // Four distance-8 sequences, each too heavy to share (j = 0, 4, 2, 6).
    for n in 0..4 {
        let spec = format!("name=c{n},bw=6G,distance=8,frame=1024");
        let (code, out, err) = admit(&["--speed", "100G", "--state", s, "-r", &spec]);
        assert_eq!(code, Some(0), "{out}{err}");
    }
    // The odd entries are left, E(1, 1): a distance-2 request for 32 entries fits.
    let (code, out, err) = admit(&["--state", s, "-r", "name=half,bw=1G,distance=2,frame=1024"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("64 of 64 entries used"), "{out}");
    let (code, out, _) = admit(&["--state", s, "-r", "name=d,bw=100M,distance=4,frame=1024"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("d: not enough free entries: needs 16 (distance 4), 0 free"),
        "{out}"
    );
    // c0 and c2 (j = 0 and 2) are not buddies: in place, the 16 entries they free hold no
    // distance-4 set. Released, the table is re-packed (c1, c3 to j = 0, 4) and d fits.
    let (code, out, err) = admit(&[
        "--state",
        s,
        "--release",
        "c0",
        "--release",
        "c2",
        "-r",
        "name=d,bw=100M,distance=4,frame=1024",
        "-o",
        f,
    ]);
    assert_eq!(code, Some(0), "{out}{err}");
    let high = pairs(&merged("", &frag)["port_defaults"]["vlarb"]);
    for (k, &p) in high.iter().enumerate() {
        let want = match k % 8 {
            0 | 4 => (1, 192),
            2 | 6 => (3, 16),
            _ => (2, 16),
        };
        assert_eq!(p, want, "entry {k}");
    }
    let names: Vec<String> = out
        .lines()
        .filter_map(|l| Some(l.split_whitespace().next()?.to_string()))
        .collect();
    for (name, kept) in [
        ("c0", false),
        ("c1", true),
        ("c2", false),
        ("c3", true),
        ("half", true),
        ("d", true),
    ] {
        assert_eq!(names.contains(&name.to_string()), kept, "{name}:\n{out}");
    }
    // The state was made for 100G: another speed is refused, naming both.
    let (code, _, err) = admit(&["--state", s, "--speed", "25G", "-r", "name=x,bw=1G,distance=8"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("25G") && err.contains("100G"), "{err}");
    let before = std::fs::read_to_string(&state).unwrap();
    let frag2 = dir.path().join("frag2.toml");
    let (code, _, err) = admit(&["--state", s, "--release", "nobody", "-o", frag2.to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no connection named \"nobody\""), "{err}");
    assert_eq!(std::fs::read_to_string(&state).unwrap(), before, "state untouched");
    assert!(!frag2.exists(), "no fragment on bad input");
}

/// Bad input is exit 2 with the field named, and writes nothing; edge values that are valid
/// input but cannot be had are refusals (exit 1) with the reason.
#[test]
fn vlarb_admit_names_bad_input_and_refuses_edge_values() {
    let dir = tempfile::tempdir().unwrap();
    let frag = dir.path().join("frag.toml");
    let f = frag.to_str().unwrap();
    for (args, said) in [
        (
            &["--speed", "25G", "-r", "name=a,bw=2X,distance=8", "-o", f][..],
            "--request 1",
        ),
        (
            &["--speed", "25G", "-r", "name=a,bw=2X,distance=8"],
            "bw: \"2X\" is not a rate",
        ),
        (&["--speed", "25G", "-r", "name=a,bw=1G"], "give latency or distance"),
        (
            &["--speed", "25G", "-r", "name=a,bw=1G,distance=8,colour=red"],
            "colour: not a request key",
        ),
        (
            &[
                "--speed",
                "25G",
                "-r",
                "name=a,bw=1G,distance=8",
                "-r",
                "name=a,bw=1G,distance=4",
            ],
            "\"a\" is requested twice",
        ),
        (&["-r", "name=a,bw=1G,distance=8"], "give --speed or --config"),
        (
            &["--speed", "25G", "--mtu", "20000", "-r", "name=a,bw=1G,distance=8"],
            "max frame",
        ),
        (&["--speed", "25G"], "nothing to admit"),
    ] {
        let (code, out, err) = admit(args);
        assert_eq!(code, Some(2), "{args:?}: {out}{err}");
        assert!(err.contains(said), "{args:?}: {err}");
        assert!(!frag.exists(), "{args:?} wrote a fragment");
    }
    for (req, said) in [
        ("name=z,bw=0,distance=8", "bw: must be above 0"),
        ("name=z,bw=26G,distance=8", "bw: 26G is above the port's 25G"),
        (
            "name=z,bw=1G,distance=1",
            "distance: 1 is not one of 2, 4, 8, 16, 32, 64",
        ),
        ("name=z,bw=1G,distance=128", "distance: 128 is not one of"),
        ("name=z,bw=24G,distance=64", "more than 64 entries of weight 255 hold"),
        ("name=z,bw=1G,distance=8,frame=9000", "outside the port's 60..=1518 B"),
        ("name=z,bw=1G,distance=8,vl=0", "vl: 0 is not among the allowed VLs"),
    ] {
        let (code, out, err) = admit(&["--speed", "25G", "-r", req]);
        assert_eq!(code, Some(1), "{req}: {out}{err}");
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with("z: "))
            .unwrap_or_default();
        assert!(line.contains(said), "{req}: {out}");
    }
    let (code, _, err) = rocectl_env(&["vlarb", "admit", "--speed", "25G", "--high-limit", "256"], None);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("256") && err.contains("--high-limit"), "{err}");
}

/// With `--config` and `--port`, speed and frame come from that port and the fragment is the
/// config's whole `[[port]]` array with only that port's scheduler and vlarb set; requests
/// may come from TOML and JSON files.
#[test]
fn vlarb_admit_for_one_port_of_a_config_with_request_files() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::read_to_string(config("default.toml")).unwrap();
    let conf = dir.path().join("switch.toml");
    std::fs::write(
        &conf,
        base.replacen("[[port]]\nid = 1\n", "[[port]]\nid = 1\nspeed = \"100G\"\n", 1),
    )
    .unwrap();
    let toml_reqs = dir.path().join("reqs.toml");
    std::fs::write(
        &toml_reqs,
        "[[request]]\nname = \"a\"\nbw = \"2G\"\nlatency = \"20us\"\nmtu = 1024\n",
    )
    .unwrap();
    let json_reqs = dir.path().join("reqs.json");
    std::fs::write(&json_reqs, r#"[{"name": "b", "bw": "500M", "distance": 16}]"#).unwrap();
    let frag = dir.path().join("frag.toml");
    let (code, out, err) = admit(&[
        "--config",
        conf.to_str().unwrap(),
        "--port",
        "1",
        "--requests",
        toml_reqs.to_str().unwrap(),
        "--requests",
        json_reqs.to_str().unwrap(),
        "-o",
        frag.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with("port: 100G, high_limit 255"), "{out}");
    let text = std::fs::read_to_string(&conf).unwrap();
    let t = merged(&text, &frag);
    let changed = controlplane::patch::changed_keys(&text.parse().unwrap(), &t);
    assert_eq!(changed, ["port[1].scheduler", "port[1].vlarb"], "only port 1 moves");
    let ports = t["port"].as_array().unwrap();
    let old: toml::Table = text.parse().unwrap();
    for (p, o) in ports.iter().zip(old["port"].as_array().unwrap()) {
        let mut p = p.as_table().unwrap().clone();
        if p["id"].as_integer() == Some(1) {
            assert_eq!(p["scheduler"].as_str(), Some("vlarb"));
            assert_eq!(pairs(&p["vlarb"])[0], (1, 68));
            p.remove("scheduler");
            p.remove("vlarb");
        }
        assert_eq!(&toml::Value::Table(p), o, "everything else as written");
    }
    let (code, _, err) = admit(&[
        "--config",
        conf.to_str().unwrap(),
        "--port",
        "9",
        "-r",
        "name=a,bw=1G,distance=8",
    ]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no port 9"), "{err}");
}

/// `--json` prints the same result for scripts: the connection's place, bounds and the refusals.
#[test]
fn vlarb_admit_json() {
    let (code, out, err) = admit(&[
        "--speed",
        "100G",
        "--json",
        "-r",
        "name=a,bw=2G,distance=8,mtu=1024",
        "-r",
        "name=b,bw=1G,distance=1",
    ]);
    assert_eq!(code, Some(1), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let a = &v["connections"][0];
    assert_eq!(a["name"], "a");
    assert_eq!(a["entries"], serde_json::json!([0, 8, 16, 24, 32, 40, 48, 56]));
    assert!(a["latency_now_ns"].as_u64().unwrap() <= a["latency_guaranteed_ns"].as_u64().unwrap());
    assert!(a["rate_floor_bps"].as_u64().unwrap() >= 2_000_000_000);
    assert_eq!(v["high"].as_array().unwrap().len(), 64);
    assert_eq!(v["refused"][0]["name"], "b");
    assert!(v["refused"][0]["reason"].as_str().unwrap().contains("distance: 1"));
}

/// Issue 21 item 8: `-o` naming the switch config (`--config`) would replace it with the
/// fragment, `-o` naming the state would replace the admitted connections with a fragment, and
/// `--state` naming the config would replace the config with JSON: each is refused (exit 2,
/// naming both flags) before anything is written, and the files are intact. A hard link is the
/// same file (item 9).
#[test]
fn vlarb_admit_refuses_an_output_that_is_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = d.join("switch.toml");
    std::fs::copy(config("default.toml"), &cfg).unwrap();
    let state = d.join("port.json");
    let (s, c) = (state.to_str().unwrap(), cfg.to_str().unwrap());
    let (code, out, err) = admit(&["--speed", "25G", "--state", s, "-r", "name=a,bw=1G,distance=8"]);
    assert_eq!(code, Some(0), "{out}{err}");
    std::fs::hard_link(&cfg, d.join("hard.toml")).unwrap();
    let (cfg_before, state_before) = (std::fs::read(&cfg).unwrap(), std::fs::read(&state).unwrap());
    let hard = d.join("hard.toml");
    let cases: [(&[&str], &str); 4] = [
        (
            &["--config", c, "--port", "0", "-r", "name=b,bw=1G,distance=8", "-o", c],
            "-o",
        ),
        (
            &[
                "--config",
                c,
                "--port",
                "0",
                "-r",
                "name=b,bw=1G,distance=8",
                "-o",
                hard.to_str().unwrap(),
            ],
            "-o",
        ),
        (&["--state", s, "-r", "name=b,bw=1G,distance=8", "-o", s], "-o"),
        (
            &[
                "--config",
                c,
                "--port",
                "0",
                "--state",
                c,
                "-r",
                "name=b,bw=1G,distance=8",
            ],
            "--state",
        ),
    ];
    for (args, flag) in cases {
        let (code, out, err) = admit(args);
        assert_eq!(code, Some(2), "{args:?}: {out}{err}");
        assert!(
            err.contains(flag) && (err.contains("destroy") || err.contains("same file")),
            "{args:?}: {err}"
        );
        assert_eq!(
            std::fs::read(&cfg).unwrap(),
            cfg_before,
            "{args:?}: the config is intact"
        );
        assert_eq!(
            std::fs::read(&state).unwrap(),
            state_before,
            "{args:?}: the state is intact"
        );
    }
}

/// Issue 37: `rocectl sonic import` writes the TOML a config_db.json runs as (never over its
/// input), and `sonic export` prints the JSON Patch of a fragment's changes, with the diff on
/// standard error; a change the file cannot say exits 1.
#[test]
fn sonic_import_and_export() {
    let dir = tempfile::tempdir().unwrap();
    let json = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/sonic/spectrum1-t1.json");
    let out = dir.path().join("switch.toml");
    let run = |args: &[&std::ffi::OsStr]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_rocectl"))
            .args(args)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, _, err) = run(&[
        "sonic".as_ref(),
        "import".as_ref(),
        json.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("8 ports, platform spectrum1"), "{err}");
    let toml = std::fs::read_to_string(&out).unwrap();
    assert!(toml.contains("# BUFFER_POOL|ingress_lossless_pool|xoff"), "{toml}");
    assert!(controlplane::load_str(&toml).is_ok());
    // Never over the input.
    let copy = dir.path().join("config_db.json");
    std::fs::copy(&json, &copy).unwrap();
    let (code, _, err) = run(&[
        "sonic".as_ref(),
        "import".as_ref(),
        copy.as_os_str(),
        "-o".as_ref(),
        copy.as_os_str(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read(&json).unwrap(),
        "the input is intact"
    );
    // Export a tuned fragment.
    let frag = dir.path().join("tuned.toml");
    std::fs::write(
        &frag,
        "[pg.3]\ndynamic_th = 1\n[pg.4]\ndynamic_th = 1\n[ecn.AZURE_LOSSLESS]\nkmin = \"1MB\"\n",
    )
    .unwrap();
    let (code, patch, err) = run(&[
        "sonic".as_ref(),
        "export".as_ref(),
        json.as_os_str(),
        "--fragment".as_ref(),
        frag.as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let patch: serde_json::Value = serde_json::from_str(&patch).unwrap();
    assert_eq!(
        patch.as_array().unwrap().len(),
        4,
        "three lossless profiles and the WRED profile: {patch}"
    );
    assert!(
        err.contains("WRED_PROFILE|AZURE_LOSSLESS|green_min_threshold: 2000000 → 1000000"),
        "{err}"
    );
    // PG 3 alone: the profile PGs 3 and 4 share cannot say it.
    std::fs::write(&frag, "[pg.3]\ndynamic_th = 1\n").unwrap();
    let (code, _, err) = run(&[
        "sonic".as_ref(),
        "export".as_ref(),
        json.as_os_str(),
        "--fragment".as_ref(),
        frag.as_os_str(),
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("ports that share a profile take one value"), "{err}");
    // Issue 49 item 3: --running asks the switch (none here: said, exit 2); a switch named
    // without --running is refused rather than ignored.
    let nowhere = dir.path().join("none.sock");
    let (code, _, err) = run(&[
        "sonic".as_ref(),
        "export".as_ref(),
        json.as_os_str(),
        "--running".as_ref(),
        "--socket".as_ref(),
        nowhere.as_os_str(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("none.sock"), "{err}");
    let (code, _, err) = run(&[
        "sonic".as_ref(),
        "export".as_ref(),
        json.as_os_str(),
        "--fragment".as_ref(),
        frag.as_os_str(),
        "--socket".as_ref(),
        nowhere.as_os_str(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--socket name a switch, which only --running asks"),
        "{err}"
    );
}

/// A switch's control socket at `path` that answers `hello`, `get_config` (the default
/// profile) and `counters` (one port that has received `rx` frames), on every connection, for
/// as long as the test runs: enough for `show counters` and `clear counters`.
fn counting_switch(path: &std::path::Path, rx: u64) {
    use controlplane::snapshot::{PortReport, Snapshot};
    use std::io::{BufRead, BufReader, Write};
    let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
    let mut snap = Snapshot {
        ports: vec![PortReport {
            id: 0,
            rx_packets: rx,
            ..Default::default()
        }],
        ..Default::default()
    };
    snap.totals.rx_packets = rx;
    let counters = serde_json::to_value(&snap).unwrap();
    let config = std::fs::read_to_string(config("default.toml")).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { break };
            let (counters, config) = (counters.clone(), config.clone());
            std::thread::spawn(move || {
                let mut out = stream.try_clone().unwrap();
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    let req: serde_json::Value = serde_json::from_str(&line).unwrap();
                    let data = match req["op"].as_str() {
                        Some("hello") => serde_json::json!({"server": "fake", "protocol": 1, "uptime_ms": 1000}),
                        Some("get_config") => serde_json::json!({"toml": config, "version": 1}),
                        Some("counters") => counters.clone(),
                        _ => serde_json::Value::Null,
                    };
                    let answer = serde_json::json!({"v": 1, "id": req["id"], "ok": !data.is_null(), "data": data,
                        "error": "fake switch: not served"});
                    if writeln!(out, "{answer}").is_err() {
                        break;
                    }
                }
            });
        }
    });
}

/// `rocectl` with `args` against the switch at `socket`, its state in `state`, HOME and
/// XDG_STATE_HOME cleared, with a 20 s limit (a command that hangs is killed, and says so):
/// (exit code, stdout, stderr).
fn rocectl_state(socket: &std::path::Path, state: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rocectl"));
    cmd.arg("--socket")
        .arg(socket)
        .args(args)
        .env_remove("ROCECTL_SWITCH")
        .env_remove("HOME")
        .env_remove("XDG_STATE_HOME")
        .env("ROCECTL_STATE_DIR", state);
    run_limited(cmd)
}

/// Runs `cmd` for at most 20 s: (exit code, stdout, stderr); a hang is killed and reported
/// in stderr.
fn run_limited(mut cmd: Command) -> (Option<i32>, String, String) {
    use std::io::Read;
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    let mut hung = false;
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            hung = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let status = child.wait().unwrap();
    let (mut out, mut err) = (String::new(), String::new());
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    if hung {
        err += "\n(killed after 20 s: it hung)";
    }
    (status.code(), out, err)
}

/// The baseline file a `clear counters` reported writing.
fn baseline_path(out: &str) -> std::path::PathBuf {
    let from = out.find("(baseline ").unwrap_or_else(|| panic!("{out}")) + "(baseline ".len();
    let rest = &out[from..];
    std::path::PathBuf::from(&rest[..rest.find(';').unwrap()])
}

/// Whether this test runs as root with `setpriv` at hand, to act as another user (`nobody`).
fn can_be_nobody() -> bool {
    let root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout == b"0\n");
    let setpriv = Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !(root && setpriv) {
        eprintln!("skipping the part as `nobody`: needs root and setpriv");
    }
    root && setpriv
}

/// Issue 41 item 3: `clear counters` as root wrote through a symlink another user planted in a
/// state directory that user created (the old temporary name, `counters<addr>.json.<pid>`,
/// was predictable and written following links, and the directory's owner was never checked);
/// a FIFO at the baseline path hung `show counters`, and a link to /dev/zero grew it without
/// bound. Now a directory the caller does not own (or others may write) is refused, a
/// baseline is created exclusively and renamed into place, and only a regular file of bounded
/// size is read, without blocking. Before: the planted file was overwritten, `show` hung on
/// the FIFO and on /dev/zero (killed here after 20 s).
#[test]
fn counter_baselines_follow_no_link_and_trust_no_other_users_directory() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("sw.sock");
    counting_switch(&sock, 5000);
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();

    // A directory another user made (and may write), with a link where the old code wrote its
    // temporary file: refused, and nothing is written through the link.
    if can_be_nobody() {
        let theirs = dir.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let old_name = format!("counters{}", sock.display().to_string().replace('/', "_"));
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(r#"ln -s "$VICTIM" "$STATE/$NAME.json.$$" && exec "$ROCECTL" --socket "$SOCK" clear counters"#)
            .env("VICTIM", &victim)
            .env("STATE", &theirs)
            .env("NAME", &old_name)
            .env("ROCECTL", env!("CARGO_BIN_EXE_rocectl"))
            .env("SOCK", &sock)
            .env("ROCECTL_STATE_DIR", &theirs)
            .env_remove("ROCECTL_SWITCH");
        let (code, out, err) = run_limited(cmd);
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "precious\n",
            "written through the link: {out}{err}"
        );
        assert_eq!(code, Some(1), "{out}{err}");
        assert!(
            err.contains("owned by uid 65534") && err.contains("ROCECTL_STATE_DIR"),
            "{err}"
        );
        // Ours, but writable by others: refused too.
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let (code, _, err) = rocectl_state(&sock, &open, &["clear", "counters"]);
        assert!(code == Some(1) && err.contains("others may write"), "{err}");
    }

    // Our own directory, created 0700.
    let state = dir.path().join("state/rocectl");
    let (code, out, err) = rocectl_state(&sock, &state, &["clear", "counters"]);
    assert_eq!(code, Some(0), "{err}");
    let mode = std::fs::metadata(&state).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "the state directory was created {mode:o}");
    let baseline = baseline_path(&out);
    assert!(baseline.starts_with(&state), "{out}");
    let (code, out, _) = rocectl_state(&sock, &state, &["show", "counters", "--cells"]);
    assert!(code == Some(0) && out.contains("counters since"), "{out}");

    // Not a regular file where the baseline should be: said, left alone, and `show` gives the
    // totals at once.
    for (what, plant) in [
        (
            "a FIFO",
            &(|p: &std::path::Path| {
                std::fs::remove_file(p).unwrap();
                assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
            }) as &dyn Fn(&std::path::Path),
        ),
        ("a link to /dev/zero", &|p: &std::path::Path| {
            std::fs::remove_file(p).unwrap();
            std::os::unix::fs::symlink("/dev/zero", p).unwrap();
        }),
        ("a link to a root-owned file", &|p: &std::path::Path| {
            std::fs::remove_file(p).unwrap();
            std::os::unix::fs::symlink(&victim, p).unwrap();
        }),
        ("a file of 40 MiB", &|p: &std::path::Path| {
            std::fs::remove_file(p).unwrap();
            std::fs::File::create(p).unwrap().set_len(40 << 20).unwrap();
        }),
    ] {
        plant(&baseline);
        let t0 = std::time::Instant::now();
        let (code, out, err) = rocectl_state(&sock, &state, &["show", "counters", "--cells"]);
        assert_eq!(code, Some(0), "{what}: {err}");
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(5),
            "{what}: took {:?}",
            t0.elapsed()
        );
        assert!(!out.contains("counters since") && out.contains("5000"), "{what}: {out}");
        assert!(err.contains("counters baseline not used"), "{what}: {err}");
        assert!(std::fs::symlink_metadata(&baseline).is_ok(), "{what} was removed");
        // `clear` replaces the entry itself, never what a link points to.
        let (code, _, err) = rocectl_state(&sock, &state, &["clear", "counters"]);
        assert_eq!(code, Some(0), "{what}: {err}");
        assert!(std::fs::symlink_metadata(&baseline).unwrap().is_file(), "{what}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n", "{what}");
    }
    let left: Vec<_> = std::fs::read_dir(&state)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "temporary files left behind: {left:?}");
}

/// Issue 41 item 3: with HOME unset (a root cron job, `env -i`), baselines went to
/// `$TMPDIR/.local/state/rocectl` (or `/tmp`), which any user can create first. Now the home
/// directory comes from the password database, never a shared directory: `nobody`'s is
/// `/nonexistent`, so `clear counters` fails saying so, and writes nothing under TMPDIR.
/// Before: it succeeded, writing into TMPDIR.
#[test]
fn counter_baselines_never_fall_back_to_the_temporary_directory() {
    use std::os::unix::fs::PermissionsExt;
    if !can_be_nobody() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let sock = dir.path().join("sw.sock");
    counting_switch(&sock, 5000);
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "env", "-i"])
        .arg(format!("TMPDIR={}", tmp.display()))
        .arg(env!("CARGO_BIN_EXE_rocectl"))
        .arg("--socket")
        .arg(&sock)
        .args(["clear", "counters"]);
    let (code, out, err) = run_limited(cmd);
    let written: Vec<_> = walk(&tmp);
    assert!(written.is_empty(), "wrote into TMPDIR: {written:?} ({out})");
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("/.local/state/rocectl: cannot create"), "{err}");
}

fn walk(d: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

/// `rocectl --socket SOCKET ARGS` run in `cwd`, its state in `state` (see [`rocectl_state`]).
fn rocectl_in(
    cwd: &std::path::Path,
    socket: &str,
    state: &std::path::Path,
    args: &[&str],
) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rocectl"));
    cmd.current_dir(cwd)
        .args(["--socket", socket])
        .args(args)
        .env_remove("ROCECTL_SWITCH")
        .env_remove("HOME")
        .env_remove("XDG_STATE_HOME")
        .env("ROCECTL_STATE_DIR", state);
    run_limited(cmd)
}

/// Port 0's received frames in a `show counters` table.
fn port0_rx(out: &str) -> u64 {
    let row = out.lines().find(|l| l.split_whitespace().next() == Some("0"));
    let rx = row
        .and_then(|r| r.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok());
    rx.unwrap_or_else(|| panic!("no port 0 row in:\n{out}"))
}

/// Issue 41 item 5: the baseline's file name mapped every character outside `[A-Za-z0-9.-]`
/// to `_` without resolving the path, so `x/a_b.sock` and `x/a/b.sock` shared a file, and so
/// did `./ctl.sock` given in two directories: clearing one switch showed on the other as
/// "counters since" (rx 4900 instead of 5000), or, the other way round, deleted the other's
/// baseline as "of an earlier run". Now a baseline is the switch's, whatever the spelling.
/// Before: B showed 4900 since A's clear.
#[test]
fn counter_baselines_belong_to_the_switch_not_to_the_spelling_of_its_address() {
    let dir = tempfile::tempdir().unwrap();
    let (d, state) = (dir.path(), dir.path().join("state"));
    std::fs::create_dir_all(d.join("x/a")).unwrap();
    let (a, b) = (d.join("x/a_b.sock"), d.join("x/a/b.sock"));
    counting_switch(&a, 100);
    counting_switch(&b, 5000);
    let show = |cwd: &std::path::Path, sock: &str| {
        let (code, out, err) = rocectl_in(cwd, sock, &state, &["show", "counters", "--cells"]);
        assert_eq!(code, Some(0), "{sock}: {err}");
        (port0_rx(&out), out.contains("counters since"), out + &err)
    };
    let clear = |cwd: &std::path::Path, sock: &str| {
        let (code, _, err) = rocectl_in(cwd, sock, &state, &["clear", "counters"]);
        assert_eq!(code, Some(0), "{sock}: {err}");
    };
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    clear(d, a);
    let (rx, since, out) = show(d, b);
    assert!(rx == 5000 && !since, "A's clear showed on B:\n{out}");
    let (rx, since, out) = show(d, a);
    assert!(rx == 0 && since, "{out}");
    // The other order: B's baseline (5000) is not A's "earlier run" (A has 100), and stays.
    clear(d, b);
    let (rx, since, out) = show(d, a);
    assert!(rx == 0 && since && !out.contains("earlier run"), "{out}");
    let (rx, since, out) = show(d, b);
    assert!(rx == 0 && since, "B's baseline was lost:\n{out}");

    // `./ctl.sock` in two directories: two switches.
    for (sub, rx) in [("one", 300), ("two", 700)] {
        std::fs::create_dir(d.join(sub)).unwrap();
        counting_switch(&d.join(sub).join("ctl.sock"), rx);
    }
    clear(&d.join("one"), "./ctl.sock");
    let (rx, since, out) = show(&d.join("two"), "./ctl.sock");
    assert!(rx == 700 && !since, "{out}");
    // One switch spelt other ways (relative, `..`, a symlink): one baseline.
    std::os::unix::fs::symlink(d.join("one/ctl.sock"), d.join("link.sock")).unwrap();
    for (cwd, spelt) in [
        (d.join("one"), "ctl.sock"),
        (d.join("two"), "../one/ctl.sock"),
        (d.to_path_buf(), "link.sock"),
    ] {
        let (rx, since, out) = show(&cwd, spelt);
        assert!(rx == 0 && since, "{spelt}:\n{out}");
    }
}

/// Issue 41 item 11: `rocectl check FILE | head` panicked on the broken pipe (exit 101, a
/// panic message on stderr). Now it ends as `cat` does, by SIGPIPE and saying nothing; the
/// same for `show` against a switch. A switch that hangs up mid-command is still an error
/// message, not a silent death (the client's socket writes never raise SIGPIPE).
#[test]
fn a_closed_output_pipe_ends_rocectl_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("sw.sock");
    counting_switch(&sock, 5000);
    let def = config("default.toml");
    let s = sock.to_str().unwrap();
    for args in [
        &["check", "-v", def.as_str()][..],
        &["--socket", s, "show", "counters", "--cells"],
    ] {
        // A pipe whose reader is gone before rocectl starts (as `head` after its lines).
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both descriptors were just opened and are owned by nothing else.
        let (reader, writer) = unsafe {
            use std::os::fd::FromRawFd;
            (
                std::os::fd::OwnedFd::from_raw_fd(fds[0]),
                std::os::fd::OwnedFd::from_raw_fd(fds[1]),
            )
        };
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_rocectl"))
            .args(args)
            .env_remove("ROCECTL_SWITCH")
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGPIPE),
            "{args:?}: {:?} {err}",
            out.status
        );
        assert!(err.is_empty(), "{args:?}: {err}");
    }

    // A switch that answers one request and hangs up: rocectl's next request meets a closed
    // socket, and says so.
    let gone = dir.path().join("gone.sock");
    let listener = std::os::unix::net::UnixListener::bind(&gone).unwrap();
    std::thread::spawn(move || {
        use std::io::{BufRead, BufReader, Write};
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let mut line = String::new();
            BufReader::new(&stream).read_line(&mut line).unwrap();
            let req: serde_json::Value = serde_json::from_str(&line).unwrap();
            let snap = serde_json::to_value(controlplane::snapshot::Snapshot::default()).unwrap();
            let answer = serde_json::json!({"v": 1, "id": req["id"], "ok": true, "data": snap});
            let _ = writeln!(stream, "{answer}");
        }
    });
    let (code, _, err) = rocectl_env(&["--socket", gone.to_str().unwrap(), "show", "counters"], None);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.starts_with("rocectl: "), "{err}");
}

/// Issue 50: an SN5600's buffer (ingress + egress lossless pools, 192 B cells) over 64 ports
/// was refused (13.4 GiB of max-frame slots above a fixed 4 GiB), then needed 6672 MiB with
/// every size class grown to the buffer; `check` now passes it and states what `rocesw run`
/// allocates at start-up: one arena within 1.5x the buffer's bytes, and the fixed rest.
#[test]
fn check_states_the_start_up_memory_of_an_sn5600_sized_config() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sn5600.toml");
    let default = std::fs::read_to_string(config("default.toml")).unwrap();
    let four = "[[port]]\nid = 0\n\n[[port]]\nid = 1\n\n[[port]]\nid = 2\n\n[[port]]\nid = 3\n\n";
    assert!(default.contains(four), "configs/default.toml changed shape");
    let ports: String = (0..64)
        .map(|i| format!("[[port]]\nid = {}\nname = \"Ethernet{}\"\n\n", 4 * i, 4 * i))
        .collect();
    let text = default
        .replace(four, &ports)
        .replace("cell = \"256B\"", "cell = \"192B\"")
        .replace("size = \"4MiB\"", "size = \"291872768B\"")
        .replace("mtu = 1500", "mtu = 9100");
    std::fs::write(&path, text).unwrap();
    let (ok, out, err) = rocectl(&["check", path.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(
        out.contains(
            "memory: rocesw run needs 527 MiB at start-up: an arena of 2040832 units of 192 B for \
             the frames (373 MiB, 1.34x the buffer's 278 MiB in 192 B cells"
        ),
        "{out}"
    );
}

/// Issue 49 item 4: a warning about an imported value names where the file gave it
/// (`TABLE|key|field`) beside the TOML key it became, so a SONiC user knows what to change.
#[test]
fn check_names_the_sonic_field_a_warned_value_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let json = std::fs::read_to_string(config("sonic/spectrum1-t1.json")).unwrap();
    // The 5 m profile's xoff cut to 2 KiB: short on every 5 m port, whatever the formula.
    let short = json.replacen("\"xoff\": \"23552\"", "\"xoff\": \"2048\"", 1);
    assert_ne!(short, json);
    let file = dir.path().join("config_db.json");
    std::fs::write(&file, short).unwrap();
    let (ok, out, err) = rocectl(&["check", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    let w: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("warning: port[0].pg.3.headroom ("))
        .collect();
    assert_eq!(w.len(), 1, "{out}");
    assert!(
        w[0].starts_with(
            "warning: port[0].pg.3.headroom (4096B, BUFFER_PROFILE|pg_lossless_100000_5m_profile|xoff × 2"
        ),
        "{out}"
    );
    assert!(
        w[0].contains(") is below the headroom computed for Ethernet0 (port 0)"),
        "{out}"
    );
    // And, as for a TOML, the memory `rocesw run` needs for it at start-up.
    assert!(out.contains("\nmemory: rocesw run needs "), "{out}");
    // A hand-written config's warnings name its keys alone.
    let toml = dir.path().join("small.toml");
    let text = std::fs::read_to_string(config("default.toml")).unwrap();
    std::fs::write(&toml, text.replacen("headroom = \"auto\"", "headroom = \"1KiB\"", 1)).unwrap();
    let (ok, out, err) = rocectl(&["check", toml.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("warning: pg.3.headroom (1KiB) is below"), "{out}");
}
