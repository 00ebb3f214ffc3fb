//! `rocesw run` on capture-file ports: the real-time path (workers, wall clock, drain) with no
//! interface at all. The bundled 3→1 incast goes in; what comes out is checked against the
//! switch's own counters and against the inputs.

mod common;
use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Runs `rocesw run` to its end (it stops by itself once every capture is read), at most 60 s.
fn run(cfg: &Path, summary: &Path) -> (bool, String) {
    run_with(cfg, summary, &[])
}

/// [`run`] with more options (`--stats`).
fn run_with(cfg: &Path, summary: &Path, extra: &[&str]) -> (bool, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rocesw"))
        .args(["run", "--no-control"])
        .args(extra)
        .arg("--config")
        .arg(cfg)
        .arg("--summary")
        .arg(summary)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("rocesw run did not stop after its inputs ended");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    (status.success(), err)
}

#[test]
fn incast_from_captures_through_the_real_time_switch() {
    incast_from_captures(1);
}

/// The same on two workers (ports 0 and 2 on one, 1 and 3 on the other): frames from ports
/// 0 and 2 cross to port 3's worker, and every lossless frame still arrives, once, in order.
#[test]
fn incast_from_captures_on_two_workers() {
    incast_from_captures(2);
}

fn incast_from_captures(workers: usize) {
    let dir = tempfile::tempdir().unwrap();
    let examples = repo_root().join("examples/incast");
    let out = |id| dir.path().join(format!("out{id}.pcap"));
    let cfg = ports_config(
        dir.path(),
        |id| {
            format!(
                "pcap = {{ input = {:?}, output = {:?} }}",
                examples.join(format!("port{id}.pcap")),
                out(id)
            )
        },
        &format!("[run]\nworkers = {workers}\n"),
    );
    let summary = dir.path().join("summary.json");
    let (ok, err) = run(&cfg, &summary);
    assert!(ok, "rocesw run failed: {err}");
    assert!(err.contains("rocesw: switching 4 ports"), "{err}");
    // Two workers with no core of their own: the placement advice comes first.
    assert_eq!(
        workers > 1,
        err.contains("waits whenever either is descheduled"),
        "{workers} worker(s): {err}"
    );
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();

    let inputs: Vec<Vec<(u64, Vec<u8>)>> = (0..4)
        .map(|i| read_pcap(&examples.join(format!("port{i}.pcap"))))
        .collect();
    let total_in: usize = inputs.iter().map(Vec::len).sum();
    let sw = &s["switch"];
    assert_eq!(
        sw["totals"]["rx_packets"], total_in as u64,
        "every captured frame was received"
    );
    assert_eq!(s["undrained"], 0, "the drain sent everything admitted");

    // The backend wrote exactly what the switch transmitted, on every port.
    let outputs: Vec<Vec<(u64, Vec<u8>)>> = (0..4).map(|i| read_pcap(&out(i))).collect();
    for (i, frames) in outputs.iter().enumerate() {
        assert_eq!(
            sw["ports"][i]["tx_packets"],
            frames.len() as u64,
            "port {i}: frames in its output capture"
        );
        assert_eq!(s["interfaces"][i]["backend"]["tx_frames"], frames.len() as u64);
        // Written in wall-clock time: timestamps never go back.
        assert!(
            frames.windows(2).all(|w| w[0].0 <= w[1].0),
            "port {i}: timestamps in order"
        );
    }

    // The capture ports' peers are emulated (`peer = "emulated"`, the default for capture
    // files): they cross the wire at line rate from when the switch reads them and obey the
    // switch's PFC, so the incast loses nothing (before emulated links it lost 2,884 lossless
    // frames to headroom_overflow here).
    assert_eq!(sw["totals"]["drops"], serde_json::json!({}), "nothing dropped");
    for i in 0..3 {
        assert!(sw["ports"][i]["peer"].is_object(), "port {i} reports its emulated peer");
    }
    let sent: usize = inputs[..3].iter().map(Vec::len).sum();
    let roce3 = roce_frames(&outputs[3]);
    assert_eq!(roce3.len(), sent, "every sender frame reached port 3");
    let mut originals: std::collections::HashMap<Vec<u8>, usize> = std::collections::HashMap::new();
    for (_, f) in inputs[..3].iter().flatten() {
        *originals.entry(without_ecn(f)).or_default() += 1;
    }
    for (_, f, info) in &roce3 {
        assert!(dataplane::wire::verify_icrc(f, info), "ICRC still valid after crossing");
        let n = originals
            .get_mut(&without_ecn(f))
            .expect("an output frame that was never input");
        assert!(*n > 0, "a frame delivered twice");
        *n -= 1;
    }

    // And what each port transmitted is what `rocesw replay` of the same captures transmits:
    // the same data frames addressed to its host, each sender's in the same order. (PFC frames
    // and CE marks depend on when things happened, and so does how the three senders
    // interleave at port 3: in replay to the nanosecond, in real time to the scheduler's
    // jitter. So do floods before learning: the receiver's announce is captured 1 µs before the
    // senders' first frames, and a real-time round that reads all four ports at once may see
    // a sender's first frames before it, flooding them to the other senders' ports, which
    // replay, to the nanosecond, never does.)
    let rep = dir.path().join("replay");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rocesw"));
    cmd.args(["replay", "--quiet", "--config"])
        .arg(repo_root().join("configs/default.toml"))
        .arg("--output-dir")
        .arg(&rep);
    for id in 0..4 {
        cmd.arg("--input")
            .arg(format!("{id}={}", examples.join(format!("port{id}.pcap")).display()));
    }
    let st = cmd.output().unwrap();
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    let data = |frames: &[(u64, Vec<u8>)], port: u16| -> Vec<Vec<u8>> {
        let host = dataplane::tools::gen::host_mac(port);
        frames
            .iter()
            .filter(|(_, f)| f.get(12..14) != Some(&[0x88, 0x08]) && f[..6] == host)
            .map(|(_, f)| without_ecn(f))
            .collect()
    };
    for (i, frames) in outputs.iter().enumerate() {
        let replayed = data(&read_pcap(&rep.join(format!("port{i}.pcap"))), i as u16);
        let ran = data(frames, i as u16);
        assert_eq!(ran.len(), replayed.len(), "port {i}: data frames, run vs replay");
        let by_sender = |v: &[Vec<u8>]| {
            let mut m: std::collections::BTreeMap<Vec<u8>, Vec<Vec<u8>>> = Default::default();
            for f in v {
                m.entry(f[6..12].to_vec()).or_default().push(f.clone());
            }
            m
        };
        assert!(
            by_sender(&ran) == by_sender(&replayed),
            "port {i}: each sender's frames, in order, as replay sends them"
        );
    }
}

/// The frame with its ECN bits and IPv4 checksum cleared, so a CE-marked copy compares equal.
fn without_ecn(f: &[u8]) -> Vec<u8> {
    let mut f = f.to_vec();
    f[15] &= !0x03;
    f[24] = 0;
    f[25] = 0;
    f
}

#[test]
fn a_bad_capture_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.pcap");
    std::fs::write(&junk, b"this is not a capture at all").unwrap();
    let cfg = ports_config(
        dir.path(),
        |id| {
            if id == 1 {
                format!("pcap = {{ input = {junk:?} }}")
            } else {
                format!("pcap = {{ output = {:?} }}", dir.path().join(format!("o{id}.pcap")))
            }
        },
        "",
    );
    let (ok, err) = run(&cfg, &dir.path().join("s.json"));
    assert!(!ok);
    assert!(err.contains("port 1") && err.contains("not a classic pcap"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // The line scripts start their traffic on comes only once every port is open.
    assert!(
        !err.contains("rocesw: switching"),
        "said ready with a port that did not open: {err}"
    );
}

#[test]
fn pcap_ports_are_validated() {
    let base = std::fs::read_to_string(repo_root().join("configs/default.toml")).unwrap();
    let with = |extra: &str| base.replacen("[[port]]\nid = 0\n", &format!("[[port]]\nid = 0\n{extra}\n"), 1);
    let err = |extra: &str| controlplane::load_str(&with(extra)).unwrap_err().to_string();
    assert!(err("pcap = {}").contains("port[0].pcap: give an `input`"));
    assert!(err("pcap = { input = \"a.pcap\", pace = \"fast\" }").contains("port[0].pcap.pace"));
    assert!(err("interface = \"veth0\"\npcap = { input = \"a.pcap\" }").contains("not both"));
    assert!(err("pcap = { input = \"a.pcap\", speed = 1 }").contains("speed"));
    let ok = controlplane::load_str(&with(
        "pcap = { input = \"a.pcap\", output = \"b.pcap\", pace = \"asap\" }",
    ))
    .unwrap();
    let p = ok.config.ports[0].pcap.as_ref().unwrap();
    assert_eq!(p.pace, controlplane::model::PcapPace::Asap);
    assert_eq!(p.output.as_deref(), Some(Path::new("b.pcap")));
}

/// `pace = "capture"` delivers frames at their capture spacing; `asap` does not wait.
#[test]
fn capture_pacing_keeps_the_capture_spacing() {
    let gaps = |pace: &str| {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.pcap");
        let frames = burst32(0, 3, 26);
        write_pcap(
            &input,
            (0..3u64)
                .map(|i| (i * 150_000_000, frames[i as usize].clone()))
                .collect(),
        );
        let out3 = dir.path().join("out3.pcap");
        let cfg = ports_config(
            dir.path(),
            |id| match id {
                0 => format!("pcap = {{ input = {input:?}, pace = {pace:?} }}"),
                3 => format!("pcap = {{ output = {out3:?} }}"),
                _ => format!("pcap = {{ output = {:?} }}", dir.path().join(format!("o{id}.pcap"))),
            },
            "",
        );
        let (ok, err) = run(&cfg, &dir.path().join("s.json"));
        assert!(ok, "{err}");
        let ts: Vec<u64> = read_pcap(&out3).iter().map(|(t, _)| *t).collect();
        assert_eq!(ts.len(), 3, "the three frames reach port 3");
        [ts[1] - ts[0], ts[2] - ts[1]]
    };
    for g in gaps("capture") {
        assert!(
            (140_000_000..1_000_000_000).contains(&g),
            "capture pace: gap {g} ns for 150 ms"
        );
    }
    for g in gaps("asap") {
        assert!(g < 50_000_000, "asap: gap {g} ns");
    }
}

/// A build without the `dpdk` feature refuses a DPDK port, saying how to build one that can.
#[cfg(not(feature = "dpdk"))]
#[test]
fn dpdk_ports_need_the_dpdk_build() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ports_config(dir.path(), |id| format!("dpdk = \"net_null{id}\""), "");
    let out = Command::new(env!("CARGO_BIN_EXE_rocesw"))
        .args(["run", "--no-control", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("port 0 (dpdk = \"net_null0\"): this rocesw was built without DPDK support: cargo build --release --features dpdk"),
        "{err}"
    );
}

/// Issue 39: `--stats` says which priorities received PFC holds right now, while it holds, and
/// the summary's snapshot carries it (`paused_now`). Port 1's host sends one XOFF for priority
/// 3 at the start; at 10 Mb/s its 65535 quanta hold port 1's egress for 3.36 s, longer than
/// the run (its drain gives up after 2.5 s), so the lossless frames port 0 sends it wait.
#[test]
fn stats_say_which_priorities_are_paused_now() {
    let dir = tempfile::tempdir().unwrap();
    let input0 = dir.path().join("in0.pcap");
    let input1 = dir.path().join("in1.pcap");
    write_pcap(&input0, burst32(0, 1, 26).into_iter().map(|f| (0, f)).collect());
    let mut xoff = vec![0u8; 60];
    dataplane::wire::pfc::encode_pfc(&mut xoff, dataplane::tools::gen::host_mac(1), 1 << 3, [0xffff; 8]);
    write_pcap(&input1, vec![(0, xoff)]);
    let out = |id| dir.path().join(format!("out{id}.pcap"));
    let cfg = ports_config(
        dir.path(),
        |id| {
            let pcap = match id {
                0 => format!("pcap = {{ input = {input0:?}, output = {:?} }}", out(id)),
                1 => format!("pcap = {{ input = {input1:?}, output = {:?} }}", out(id)),
                _ => format!("pcap = {{ output = {:?} }}", out(id)),
            };
            format!("speed = \"10M\"\n{pcap}")
        },
        "[run]\ndrain_timeout = \"2500ms\"\n",
    );
    // No watchdog: it would call the pause a storm after 200 ms and flush the queue.
    let text = std::fs::read_to_string(&cfg).unwrap();
    let without: String = text
        .lines()
        .filter(|l| !l.starts_with("watchdog"))
        .collect::<Vec<_>>()
        .join("\n");
    assert_ne!(text.len(), without.len(), "the profile's watchdog line");
    std::fs::write(&cfg, without).unwrap();
    let summary = dir.path().join("summary.json");
    let (ok, err) = run_with(&cfg, &summary, &["--stats"]);
    assert!(ok, "rocesw run failed: {err}");
    eprintln!("{err}");
    // A block a second while it changes, each line short; port 1's says priority 3 is held.
    let paused: Vec<&str> = err.lines().filter(|l| l.starts_with("  p1 ")).collect();
    assert!(
        paused.iter().any(|l| l.contains(", now p3")),
        "no --stats line says port 1 is paused on priority 3 now:\n{err}"
    );
    assert!(
        err.lines().filter(|l| l.starts_with("  p")).all(|l| l.len() < 120),
        "short lines:\n{err}"
    );
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let p1 = &s["switch"]["ports"][1];
    assert_eq!(p1["pfc_rx"][3], 1, "{p1}");
    assert_eq!(p1["paused_now"][3], true, "still paused when the run ended: {p1}");
    assert_eq!(p1["paused_now"][0], false, "{p1}");
    assert!(s["undrained"].as_u64().unwrap() > 0, "the paused frames waited: {s}");
    assert!(
        s["switch"]["ports"][0].get("paused_now").is_none(),
        "a port nothing pauses leaves it out"
    );
}
