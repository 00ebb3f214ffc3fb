//! `rocesw run` on DPDK ports (issue 8): the bundled 3→1 incast read by `net_pcap` virtual
//! devices (`rx_pcap`) and written by them (`tx_pcap`), through DPDK's EAL without hugepages
//! or PCI; what comes out is decoded by scapy and tshark (ICRCs intact) and checked against the
//! switch's counters. Then the ways a DPDK port can fail to start: each is a clear error that
//! names the port, exit status 2, and nothing left under /var/run/dpdk.
//!
//! Needs DPDK with its net_pcap driver, and root (as the EAL does):
//! `cargo test -p rocesw-dataplane --features dpdk --test run_dpdk`.
#![cfg(feature = "dpdk")]

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    pid: u32,
}

/// Runs `rocesw run` for `secs` seconds (then it drains and exits), at most 60 s.
fn run(cfg: &Path, summary: &Path, secs: f64) -> Run {
    run_with(cfg, summary, &["--duration", &secs.to_string()])
}

/// Runs `rocesw run` with `args` until it ends by itself, at most 60 s.
fn run_with(cfg: &Path, summary: &Path, args: &[&str]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rocesw"))
        .args(["run", "--no-control"])
        .args(args)
        .arg("--config")
        .arg(cfg)
        .arg("--summary")
        .arg(summary)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("rocesw run did not stop");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        pid,
    }
}

#[test]
fn incast_through_net_pcap_ports() {
    let (s, dropped) = incast_through_net_pcap("", &[]);
    // Zero copy: every received frame stayed in the mbuf it arrived in (the switch never held
    // enough to be refused one), and every frame that was neither dropped nor an extra copy
    // of a flood left in it.
    for i in 0..4 {
        let b = &s["interfaces"][i]["backend"];
        assert_eq!(b["rx_zero_copy"], b["rx_frames"], "port {i}: received without a copy");
    }
    let (rx_zc, tx_zc, sent) = (sum(&s, "rx_zero_copy"), sum(&s, "tx_zero_copy"), sum(&s, "tx_frames"));
    assert!(
        rx_zc - tx_zc <= dropped,
        "{} lent mbufs not sent, {dropped} drops",
        rx_zc - tx_zc
    );
    // The rest were the extra copies of floods (a flood sends its mbuf to one port only).
    assert!(
        tx_zc > 0 && tx_zc <= sent,
        "{tx_zc} of {sent} frames sent in their mbuf"
    );
}

/// The same incast with ports 1 and 3 on a second worker (a second shard: frames between its
/// ports and worker 0's cross between the shards in batches): frames still never leave their
/// mbufs, across the shards both ways. The receiver's MAC is a static FDB entry: its one
/// frame that teaches the switch where it is comes through the other worker, at a moment that
/// varies, and frames flooded before it arrives would each count once per copy.
#[test]
fn frames_cross_between_workers_in_their_mbufs() {
    let (s, dropped) = incast_through_net_pcap(
        "\n[run]\nworkers = 2\n",
        &[(
            "\n[fdb]\n",
            "\n[fdb]\nstatic = [{ mac = \"02:00:5e:10:00:03\", port = 3 }]\n",
        )],
    );
    for i in 0..4 {
        let b = &s["interfaces"][i]["backend"];
        assert_eq!(b["rx_zero_copy"], b["rx_frames"], "port {i}: received without a copy");
    }
    let (rx_zc, tx_zc, sent) = (sum(&s, "rx_zero_copy"), sum(&s, "tx_zero_copy"), sum(&s, "tx_frames"));
    assert!(
        rx_zc.saturating_sub(tx_zc) <= dropped,
        "{rx_zc} lent mbufs received, {tx_zc} sent, {dropped} drops"
    );
    // Every cell came back once the switch drained: the PGs' charges for frames that crossed
    // returned in releases added up per PG (`shard::Outbox::push_release`), the queues'.
    let buffer = &s["switch"]["buffer"];
    for k in ["used_cells", "ingress_shared_cells", "egress_shared_cells"] {
        assert_eq!(buffer[k], 0, "{k}: {buffer}");
    }
    for (i, p) in s["switch"]["ports"].as_array().unwrap().iter().enumerate() {
        for (g, pg) in p["pgs"].as_array().unwrap().iter().enumerate() {
            let held: u64 = ["min_cells", "shared_cells", "headroom_cells"]
                .iter()
                .map(|k| pg[k].as_u64().unwrap())
                .sum();
            assert_eq!(held, 0, "port {i} PG {g} holds cells: {pg}");
        }
    }
    // Port 3, the incast's receiver, is worker 1's: what ports 0 and 2 sent it crossed.
    let b3 = &s["interfaces"][3]["backend"];
    assert!(
        b3["tx_zero_copy"].as_u64().unwrap() > 0,
        "port 3 sent frames in their mbufs: {b3}"
    );
    assert!(tx_zc <= sent);
}

/// Two workers or more get a stack mempool (`io::dpdk::pool_handler`: a crossing frame's mbuf
/// is freed by the other worker), unless the EAL arguments choose a handler; the crossing test
/// above runs on it.
#[test]
fn frames_that_may_cross_workers_get_a_stack_pool_unless_the_eal_args_choose() {
    use dataplane::io::dpdk::pool_handler;
    let run = |eal_args: &[&str]| controlplane::model::DpdkRunConfig {
        eal_args: eal_args.iter().map(|a| a.to_string()).collect(),
        memory_mb: 512,
        hugepages: false,
        mbufs: 16383,
    };
    assert_eq!(pool_handler(1, &run(&[])), None);
    assert_eq!(pool_handler(2, &run(&[])), Some("lf_stack"));
    assert_eq!(pool_handler(4, &run(&["--log-level=pmd:debug"])), Some("lf_stack"));
    assert_eq!(pool_handler(2, &run(&["--mbuf-pool-ops-name=stack"])), None);
    assert_eq!(pool_handler(2, &run(&["--mbuf-pool-ops-name", "ring_mp_mc"])), None);
}

/// With a pool too small to spare mbufs for the switch's queues (the ports' rings take it
/// all), the switch copies every frame into its packet pool and frees the mbuf at once:
/// forwarding is the same, nothing is lent.
#[test]
fn a_pool_too_small_to_lend_copies_every_frame() {
    let (s, _) = incast_through_net_pcap("\n[run.dpdk]\nmbufs = 4095\n", &[]);
    assert_eq!(sum(&s, "rx_zero_copy"), 0);
    assert_eq!(sum(&s, "tx_zero_copy"), 0);
    assert!(sum(&s, "tx_frames") > 0);
}

/// A backend counter summed over the four ports.
fn sum(s: &Value, key: &str) -> u64 {
    (0..4)
        .map(|i| s["interfaces"][i]["backend"][key].as_u64().unwrap())
        .sum()
}

/// The bundled incast through four net_pcap ports (with `extra` appended to the config, and
/// each `(from, to)` of `edits` replaced in it): checks everything that does not depend on how
/// frames were buffered, and returns the run's summary and the frames it dropped.
fn incast_through_net_pcap(extra: &str, edits: &[(&str, &str)]) -> (Value, u64) {
    let dir = tempfile::tempdir().unwrap();
    let examples = repo_root().join("examples/incast");
    let out = |id| dir.path().join(format!("out{id}.pcap"));
    let cfg = ports_config(
        dir.path(),
        |id| {
            format!(
                "dpdk = \"net_pcap{id},rx_pcap={},tx_pcap={}\"",
                examples.join(format!("port{id}.pcap")).display(),
                out(id).display()
            )
        },
        extra,
    );
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "{from:?} not in the config");
        text = text.replace(from, to);
    }
    std::fs::write(&cfg, text).unwrap();
    let summary = dir.path().join("summary.json");
    let r = run(&cfg, &summary, 3.0);
    assert_eq!(r.code, Some(0), "rocesw run failed:\n{}", r.stderr);
    for id in 0..4 {
        assert!(
            r.stderr.contains(&format!(
                "port {id}: DPDK net_pcap{id} (driver net_pcap), speed 25G as configured; the driver reports link up"
            )),
            "start-up report:\n{}",
            r.stderr
        );
        assert!(
            r.stdout
                .contains(&format!("port {id} (net_pcap{id}): driver counters: imissed 0")),
            "summary:\n{}",
            r.stdout
        );
    }
    // Two workers: the stack handler (`io::dpdk::pool_handler`), and it forwards.
    let handler = if extra.contains("workers = 2") {
        "lf_stack"
    } else {
        "ring_mp_mc"
    };
    assert!(
        r.stderr.contains(&format!("mbufs of 2048 B, handler {handler}")),
        "start-up report:\n{}",
        r.stderr
    );
    assert!(left_behind(r.pid).is_empty(), "{:?}", left_behind(r.pid));
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let sw = &s["switch"];

    let inputs: Vec<Vec<(u64, Vec<u8>)>> = (0..4)
        .map(|i| read_pcap(&examples.join(format!("port{i}.pcap"))))
        .collect();
    let total_in: usize = inputs.iter().map(Vec::len).sum();
    assert_eq!(
        sw["totals"]["rx_packets"], total_in as u64,
        "every captured frame was received"
    );
    assert_eq!(s["undrained"], 0, "the drain sent everything admitted");

    let outputs: Vec<Vec<(u64, Vec<u8>)>> = (0..4).map(|i| read_pcap(&out(i))).collect();
    for (i, frames) in outputs.iter().enumerate() {
        let backend = &s["interfaces"][i]["backend"];
        assert_eq!(
            sw["ports"][i]["tx_packets"],
            frames.len() as u64,
            "port {i}: frames written"
        );
        assert_eq!(backend["tx_frames"], frames.len() as u64, "port {i}");
        assert_eq!(backend["rx_frames"], inputs[i].len() as u64, "port {i}");
        for k in [
            "imissed",
            "ierrors",
            "oerrors",
            "rx_nombuf",
            "tx_nombuf",
            "tx_ring_full",
        ] {
            assert_eq!(backend[k], 0, "port {i}: {k}");
        }
    }

    // net_pcap delivers the captures as fast as the switch polls, and captures cannot obey
    // PFC: the incast overflows the headroom, at ingress. Every other frame of the three
    // senders reaches port 3 (some also flooded elsewhere before port 3's MAC was learned).
    let drops = &sw["totals"]["drops"];
    let dropped: u64 = drops.as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert!(
        drops.as_object().unwrap().keys().all(|k| k == "headroom_overflow"),
        "{drops}"
    );
    let sent: usize = inputs[..3].iter().map(Vec::len).sum();
    let roce3 = roce_frames(&outputs[3]);
    assert_eq!(
        roce3.len() as u64 + dropped,
        sent as u64,
        "forwarded or counted as dropped"
    );
    let mut originals: std::collections::HashMap<Vec<u8>, usize> = std::collections::HashMap::new();
    for (_, f) in inputs[..3].iter().flatten() {
        *originals.entry(without_ecn(f)).or_default() += 1;
    }
    let mut ce = 0;
    for (_, f, info) in &roce3 {
        assert!(dataplane::wire::verify_icrc(f, info), "ICRC intact after crossing DPDK");
        ce += usize::from(f[15] & 3 == 3);
        let n = originals.get_mut(&without_ecn(f)).expect("an output frame never input");
        assert!(*n > 0, "a frame delivered twice");
        *n -= 1;
    }
    assert!(ce > 0, "the incast congested port 3's queue: some frames are CE-marked");

    // Independent decoders: scapy recomputes every ICRC and IPv4 checksum, tshark decodes.
    let files: Vec<PathBuf> = (0..4).map(out).collect();
    let o = oracle("check_pcap.py", &files);
    let f3 = &o["files"][3];
    assert_eq!(f3["roce"], roce3.len() as u64);
    assert_eq!(f3["icrc_ok"], roce3.len() as u64);
    assert_eq!(f3["ce"], ce as u64);
    assert_eq!(o["totals"]["icrc_bad"], 0, "{}", o["totals"]);
    assert_eq!(o["totals"]["ipv4_csum_bad"], 0);
    for f in o["files"].as_array().unwrap() {
        assert_eq!(f["bad"].as_array().unwrap().len(), 0, "{}", f["bad"]);
    }
    let t = oracle("check_tshark.py", &files);
    assert_eq!(t["files"][3]["bth"], roce3.len() as u64);
    assert_eq!(t["files"][3]["ce"], ce as u64);
    for f in t["files"].as_array().unwrap() {
        assert_eq!(f["malformed"], 0, "{f}");
        assert_eq!(f["ipv4_csum_bad"], 0, "{f}");
    }
    (s, dropped)
}

/// The frame with its ECN bits and IPv4 checksum cleared, so a CE-marked copy compares equal.
fn without_ecn(f: &[u8]) -> Vec<u8> {
    let mut f = f.to_vec();
    f[15] &= !0x03;
    f[24] = 0;
    f[25] = 0;
    f
}

/// Port 1 is `bad`; the others are harmless `net_null` devices. Returns the run's stderr.
fn fails_with(bad: &str, extra: &str, expect: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ports_config(
        dir.path(),
        |id| match id {
            1 => format!("dpdk = {bad:?}"),
            _ => format!("dpdk = \"net_null{id}\""),
        },
        extra,
    );
    let r = run(&cfg, &dir.path().join("s.json"), 0.5);
    assert_eq!(r.code, Some(2), "{bad}: exit status; stderr:\n{}", r.stderr);
    let last = r.stderr.find("rocesw: error").map_or("", |i| &r.stderr[i..]);
    for e in expect {
        assert!(last.contains(e), "{bad}: {e:?} missing from the error:\n{}", r.stderr);
    }
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    assert!(left_behind(r.pid).is_empty(), "{bad}: {:?}", left_behind(r.pid));
    r.stderr
}

/// Issue 41 item 7: a `net_pcap` port's `tx_pcap` escaped the check that keeps every other
/// output off the inputs: one naming another port's `rx_pcap` truncated that capture from
/// 2,080,024 B to 24 B, one naming the config replaced it, and a `--summary` naming a
/// `tx_pcap` replaced the capture at exit. Each is now refused before DPDK starts, with the
/// files as they were.
#[test]
fn a_tx_pcap_over_an_input_the_config_or_the_summary_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = d.join("in.pcap");
    std::fs::copy(repo_root().join("examples/incast/port0.pcap"), &input).unwrap();
    let before = std::fs::read(&input).unwrap();
    let config = d.join("switch.toml");
    let cases: [(&dyn Fn(u16) -> String, &str); 2] = [
        (
            &|id| match id {
                1 => format!("dpdk = \"net_pcap1,rx_pcap={0},tx_pcap={0}\"", input.display()),
                _ => format!("dpdk = \"net_null{id}\""),
            },
            "port 1 dpdk rx_pcap",
        ),
        (
            &|id| match id {
                1 => format!(
                    "dpdk = \"net_pcap1,rx_pcap={},tx_pcap={}\"",
                    input.display(),
                    config.display()
                ),
                _ => format!("dpdk = \"net_null{id}\""),
            },
            "the config",
        ),
    ];
    for (port, want) in cases {
        let cfg = ports_config(d, port, "");
        let text = std::fs::read_to_string(&cfg).unwrap();
        let r = run(&cfg, &d.join("s.json"), 0.5);
        assert_eq!(r.code, Some(2), "{want}: {}", r.stderr);
        assert!(
            r.stderr.contains(want) && r.stderr.contains("destroy"),
            "{want}: {}",
            r.stderr
        );
        assert!(!r.stderr.contains("EAL"), "refused before DPDK starts: {}", r.stderr);
        assert_eq!(std::fs::read(&input).unwrap(), before, "the input is intact");
        assert_eq!(std::fs::read_to_string(&cfg).unwrap(), text, "the config is intact");
    }
    // The summary over a port's capture.
    let out = d.join("out1.pcap");
    std::fs::write(&out, "old capture").unwrap();
    let cfg = ports_config(
        d,
        |id| match id {
            1 => format!(
                "dpdk = \"net_pcap1,rx_pcap={},tx_pcap={}\"",
                input.display(),
                out.display()
            ),
            _ => format!("dpdk = \"net_null{id}\""),
        },
        "",
    );
    let r = run(&cfg, &out, 0.5);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("--summary") && r.stderr.contains("port 1 dpdk tx_pcap"),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "old capture");
}

/// Issue 41 item 9: a SIGTERM in the first 100-200 ms of a DPDK run (vm/run.sh's cleanup
/// sends exactly that) killed rocesw while the EAL started: no summary, and
/// `/var/run/dpdk/rocesw-<pid>-*` left behind, 5 of 5 tries. The handler is now installed
/// before the EAL starts, so a stop at any moment of start-up ends the run as a stop later
/// does: the summary written, exit 0, nothing left. Sent once the EAL's runtime directory
/// appears (inside `rte_eal_init`), and at fixed delays around it.
#[test]
fn a_sigterm_during_start_up_ends_the_run_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ports_config(dir.path(), |id| format!("dpdk = \"net_null{id}\""), "");
    for (i, delay) in [None, Some(50), Some(100), Some(150), Some(200)]
        .into_iter()
        .enumerate()
    {
        let summary = dir.path().join(format!("s{i}.json"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_rocesw"))
            .args(["run", "--no-control", "--duration", "20", "--config"])
            .arg(&cfg)
            .arg("--summary")
            .arg(&summary)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let t0 = Instant::now();
        match delay {
            // The EAL is starting once its runtime directory exists.
            None => {
                while left_behind(pid).is_empty() && t0.elapsed() < Duration::from_secs(5) {
                    std::thread::sleep(Duration::from_micros(200));
                }
                assert!(!left_behind(pid).is_empty(), "the EAL's directory never appeared");
            }
            Some(ms) => std::thread::sleep(Duration::from_millis(ms)),
        }
        // SAFETY: kill has no memory preconditions; pid is our child, not yet waited for.
        assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0);
        while child.try_wait().unwrap().is_none() {
            if t0.elapsed() > Duration::from_secs(15) {
                let _ = child.kill();
                panic!("rocesw did not stop after SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(left_behind(pid).is_empty(), "{:?}", left_behind(pid));
        // A signal that comes before rocesw's main runs (a loaded machine takes tens of ms to
        // load DPDK's libraries) ends a process that had started nothing: fine, with nothing
        // left behind. Once rocesw runs, it stops cleanly with its summary.
        let before_main = std::os::unix::process::ExitStatusExt::signal(&out.status) == Some(libc::SIGTERM)
            && delay.is_some()
            && !summary.exists()
            && err.trim().is_empty();
        if before_main {
            continue;
        }
        assert_eq!(
            out.status.code(),
            Some(0),
            "SIGTERM after {delay:?} ms: {:?}\n{err}",
            out.status
        );
        assert!(summary.exists(), "SIGTERM after {delay:?} ms: no summary\n{err}");
    }
}

/// Issue 39 item 5: a run on net_pcap ports reading their rx_pcap once (no `infinite_rx=1`)
/// and no --duration ends by itself once the driver has read every capture and the queues
/// have drained, with every frame received and sent, and says at start that it will (it ran
/// for 10 minutes before). One port replaying its capture for ever (`infinite_rx=1`): the run
/// says at start that it will not end, naming the port, and how to stop it; SIGTERM does.
#[test]
fn a_run_on_net_pcap_captures_ends_when_they_do() {
    let dir = tempfile::tempdir().unwrap();
    let examples = repo_root().join("examples/incast");
    let device = |id: u16, extra: &str| {
        format!(
            "dpdk = \"net_pcap{id},rx_pcap={},tx_pcap={}{extra}\"",
            examples.join(format!("port{id}.pcap")).display(),
            dir.path().join(format!("out{id}.pcap")).display()
        )
    };
    let cfg = ports_config(dir.path(), |id| device(id, ""), "");
    let summary = dir.path().join("summary.json");
    let t0 = Instant::now();
    let r = run_with(&cfg, &summary, &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("rocesw: the run ends once every input is read and the queues have drained"),
        "{}",
        r.stderr
    );
    assert!(t0.elapsed() < Duration::from_secs(30), "took {:?}", t0.elapsed());
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let total_in: usize = (0..4)
        .map(|i| read_pcap(&examples.join(format!("port{i}.pcap"))).len())
        .sum();
    assert_eq!(s["switch"]["totals"]["rx_packets"], total_in as u64, "every frame read");
    assert_eq!(s["undrained"], 0);
    let written: usize = (0..4)
        .map(|i| read_pcap(&dir.path().join(format!("out{i}.pcap"))).len())
        .sum();
    assert_eq!(
        s["switch"]["totals"]["tx_packets"], written as u64,
        "every frame sent was written"
    );
    assert!(written > 0);

    // Port 2 replays its capture for ever: said at start; SIGTERM ends the run cleanly.
    let cfg = ports_config(
        dir.path(),
        |id| device(id, if id == 2 { ",infinite_rx=1" } else { "" }),
        "",
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_rocesw"))
        .args(["run", "--no-control", "--config"])
        .arg(&cfg)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let want = "rocesw: this run does not end by itself (port 2: net_pcap2 replays its capture for ever \
                (infinite_rx=1)): Ctrl-C or SIGTERM stops it (--duration SECS bounds it)";
    let mut seen = Vec::new();
    let t0 = Instant::now();
    while !seen.iter().any(|l: &String| l == want) {
        match lines.recv_timeout(Duration::from_secs(30)) {
            Ok(l) => seen.push(l),
            Err(_) => {
                let _ = child.kill();
                panic!("never said it will not end:\n{}", seen.join("\n"));
            }
        }
    }
    // Still running well after the finite inputs were read.
    std::thread::sleep(Duration::from_secs(2));
    assert!(child.try_wait().unwrap().is_none(), "{}", seen.join("\n"));
    // SAFETY: kill has no memory preconditions; the pid is our child, not yet waited for.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("rocesw did not stop after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn malformed_devices_are_refused_before_dpdk_starts() {
    fails_with(
        "net_null1,,",
        "",
        &["port[1].dpdk", "malformed DPDK device 'net_null1,,'"],
    );
    fails_with("net null1", "", &["port[1].dpdk", "malformed DPDK device"]);
}

#[test]
fn a_driver_that_is_not_installed_is_named() {
    fails_with(
        "net_nosuchdriver1",
        "",
        &["port 1", "no such DPDK driver 'net_nosuchdriver'"],
    );
}

#[test]
fn a_device_its_driver_refuses_names_the_port() {
    // net_pcap cannot open a capture that does not exist: the EAL starts without the device.
    fails_with(
        "net_pcap1,rx_pcap=/nonexistent/in.pcap",
        "",
        &["port 1", "driver net_pcap refused device net_pcap1"],
    );
}

#[test]
fn a_vhost_socket_that_cannot_be_created_is_named() {
    fails_with(
        "net_vhost1,iface=/nonexistent/dir/vm1.sock",
        "",
        &["port 1", "socket's directory /nonexistent/dir does not exist"],
    );
    let dir = tempfile::tempdir().unwrap();
    let taken = dir.path().join("vm1.sock");
    std::fs::write(&taken, "").unwrap();
    fails_with(
        &format!("net_vhost1,iface={}", taken.display()),
        "",
        &["port 1", "already exists and is not a socket"],
    );
    assert!(taken.exists(), "a file at the socket's path is left alone");
    // A socket someone serves is refused, and left alone.
    let served = dir.path().join("served.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&served).unwrap();
    fails_with(
        &format!("net_vhost1,iface={}", served.display()),
        "",
        &["port 1", "is served by another process"],
    );
    assert!(served.exists());
}

/// A socket left by a switch that was killed (nobody answers on it, and the switch recorded
/// making it) is replaced: the switch starts, and removes its socket when it exits. A silent
/// socket the switch did not make (another service's, stopped) is refused and left alone
/// (issue 21 item 15: it was deleted).
#[test]
fn a_stale_vhost_socket_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("vm1.sock");
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    assert!(sock.exists(), "a socket nobody serves");
    fails_with(
        &format!("net_vhost1,iface={}", sock.display()),
        "",
        &["port 1", "a socket nobody answers that this switch did not create"],
    );
    assert!(sock.exists(), "another service's socket is left alone");
    // As a switch records the socket it made before it is killed.
    dpdk::vhost::record_created(&sock).unwrap();
    let cfg = ports_config(
        dir.path(),
        |id| match id {
            1 => format!("dpdk = \"net_vhost1,iface={}\"", sock.display()),
            _ => format!("dpdk = \"net_null{id}\""),
        },
        "",
    );
    let r = run(&cfg, &dir.path().join("s.json"), 0.5);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.contains("removed a stale vhost-user socket"), "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "port 1: DPDK net_vhost1 (driver net_vhost), speed 25G as configured; the driver reports link down"
        ),
        "no VM attached: {}",
        r.stderr
    );
    assert!(!sock.exists(), "removed at exit");
    assert!(left_behind(r.pid).is_empty());
}

#[test]
fn an_eal_that_will_not_start_says_why() {
    fails_with(
        "net_null1",
        "\n[run.dpdk]\neal_args = [\"--no-such-eal-option\"]\n",
        &["DPDK's EAL would not start", "[run.dpdk] eal_args"],
    );
}

/// A pool the EAL's memory cannot hold, with two workers (the stack handler): the memory is
/// what the error names, with the figures to change, and no fallback to another handler is
/// tried or announced (that is only for a DPDK without the stack handler).
#[test]
fn a_pool_larger_than_the_eal_memory_says_so_with_two_workers() {
    let stderr = fails_with(
        "net_null1",
        "\n[run]\nworkers = 2\n[run.dpdk]\nmemory = \"64MiB\"\nmbufs = 1048575\n",
        &["not enough DPDK memory", "raise [run.dpdk] memory or lower mbufs"],
    );
    assert!(!stderr.contains("default mempool handler instead"), "{stderr}");
}

#[test]
fn a_pci_port_without_hugepages_says_what_to_do() {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    if !meminfo.contains("HugePages_Free:        0") {
        eprintln!("hugepages are reserved here: the refusal cannot be shown");
        return;
    }
    fails_with(
        "0000:3b:00.0",
        "",
        &["PCI port 0000:3b:00.0", "hugepages", "nr_hugepages"],
    );
}

/// Issue 41: DPDK ports with `peer = "emulated"` (what configs/README recommends for software
/// peers) lose no lossless frame on traffic that oversubscribes nothing. Four ports at 1G in
/// pairs (0↔1, 2↔3), 20,000 lossless RoCEv2 frames each way, read by `net_pcap` as fast as the
/// switch polls: every frame is received, every frame leaves, nothing is dropped, on one worker
/// and on two. Before the fix a late round's steps transmitted one burst and no more (DPDK only
/// stages frames until its `flush`), PFC frames included, so the emulated peers never heard the
/// XOFF and ran into the headroom (`headroom_overflow`); and a store with room for fewer frames
/// than the driver's burst lost the rest of the burst without a count.
#[test]
fn emulated_peers_on_net_pcap_lose_no_lossless_frame() {
    for workers in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        const FRAMES: u64 = 20_000;
        let pair = |p: u16| p ^ 1;
        for p in 0..4u16 {
            let flow = dataplane::tools::gen::Flow {
                src: p,
                dst: pair(p),
                dscp: 26,
                ecn: dataplane::wire::Ecn::Ect0,
                qp: 1 + u32::from(p),
                frame_len: 1024,
                count: FRAMES,
                start_ns: 0,
                rate_bps: 1_000_000_000,
            };
            write_pcap(&dir.path().join(format!("in{p}.pcap")), flow.frames().unwrap());
        }
        let out = |id: usize| dir.path().join(format!("out{id}.pcap"));
        let statics: Vec<String> = (0..4u16)
            .map(|p| {
                let m = dataplane::tools::gen::host_mac(p);
                format!(
                    "{{ mac = \"{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}\", port = {p} }}",
                    m[0], m[1], m[2], m[3], m[4], m[5]
                )
            })
            .collect();
        let cfg = ports_config(
            dir.path(),
            |id| {
                format!(
                    "dpdk = \"net_pcap{id},rx_pcap={},tx_pcap={}\"\npeer = \"emulated\"",
                    dir.path().join(format!("in{id}.pcap")).display(),
                    out(usize::from(id)).display()
                )
            },
            &format!("\n[run]\nworkers = {workers}\n"),
        );
        let text = std::fs::read_to_string(&cfg)
            .unwrap()
            .replace("speed = \"25G\"", "speed = \"1G\"")
            .replace("\n[fdb]\n", &format!("\n[fdb]\nstatic = [{}]\n", statics.join(", ")));
        std::fs::write(&cfg, text).unwrap();
        let summary = dir.path().join("summary.json");
        let r = run(&cfg, &summary, 2.0);
        assert_eq!(r.code, Some(0), "rocesw run failed:\n{}", r.stderr);
        let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
        let sw = &s["switch"];
        let ctx = format!("{workers} worker(s):\n{}", r.stdout);
        assert_eq!(sw["totals"]["drops"], serde_json::json!({}), "{ctx}");
        for p in 0..4usize {
            let backend = &s["interfaces"][p]["backend"];
            assert_eq!(
                backend["rx_frames"], FRAMES,
                "port {p}: the driver read the capture; {ctx}"
            );
            assert_eq!(
                sw["ports"][p]["rx_packets"], FRAMES,
                "port {p}: every frame read entered; {ctx}"
            );
            let data = roce_frames(&read_pcap(&out(p))).len() as u64;
            assert_eq!(data, FRAMES, "port {p}: every frame of its pair left; {ctx}");
        }
        assert_eq!(s["undrained"], 0, "{ctx}");
    }
}
