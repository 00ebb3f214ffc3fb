//! Issue 10 (hardening) at the command line: captures that cannot be replayed as they are,
//! outputs that would overwrite inputs, schedules that cannot apply, pipes and full disks.

mod common;
use common::*;
use dataplane::tools::gen::{announce, Flow};
use dataplane::wire::Ecn;
use std::path::{Path, PathBuf};
use std::process::Command;

fn rocesw(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rocesw")).args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn default_toml() -> String {
    repo_root().join("configs/default.toml").to_str().unwrap().to_string()
}

/// Two hosts' worth of traffic: port 0 announces itself, port 1 sends it 20 frames.
fn two_inputs(d: &Path) -> (PathBuf, PathBuf) {
    let (a, b) = (d.join("port0.pcap"), d.join("port1.pcap"));
    write_pcap(&a, vec![(0, announce(0, 1).unwrap())]);
    let flow = Flow {
        src: 1,
        dst: 0,
        dscp: 26,
        ecn: Ecn::Ect0,
        qp: 1,
        frame_len: 512,
        count: 20,
        start_ns: 10_000,
        rate_bps: 10_000_000_000,
    };
    write_pcap(&b, flow.frames().unwrap());
    (a, b)
}

fn input_arg(port: u16, p: &Path) -> String {
    format!("{port}={}", p.display())
}

/// `rocesw replay --quiet` of the two inputs into `out`, with `extra` arguments.
fn replay_two(a: &Path, b: &Path, out: &str, extra: &[&str]) -> (bool, String) {
    let (a, b, config) = (input_arg(0, a), input_arg(1, b), default_toml());
    let mut args = vec![
        "replay",
        "--config",
        &config,
        "--input",
        &a,
        "--input",
        &b,
        "--output-dir",
        out,
        "--quiet",
    ];
    args.extend_from_slice(extra);
    rocesw(&args)
}

/// Item 9: a capture taken with a snap length holds no replayable frame; the replay says so
/// on stderr and counts them in the summary instead of replaying nothing silently.
#[test]
fn snapped_frames_are_counted_and_reported() {
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = d.join("snapped.pcap");
    let header = PcapHeader {
        snaplen: 128,
        ..Default::default()
    };
    let mut w = PcapWriter::with_header(std::fs::File::create(&input).unwrap(), header).unwrap();
    let frames = burst32(0, 1, 26);
    for (i, f) in frames.iter().enumerate() {
        let ts = std::time::Duration::from_micros(1_000_000 + i as u64);
        w.write_packet(&PcapPacket::new(ts, f.len() as u32, &f[..128])).unwrap();
    }
    drop(w);
    let out = d.join("out");
    let (ok, err) = rocesw(&[
        "replay",
        "--config",
        &default_toml(),
        "--input",
        &input_arg(0, &input),
        "--output-dir",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(ok, "{err}");
    assert!(
        err.contains("32 frames") && err.contains("snap"),
        "stderr says what happened: {err}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["input_frames_skipped_snaplen"], 32, "{summary}");
    assert_eq!(summary["input_frames"], 0);
}

/// Item 12: summary.json names its outputs relative to the output folder, so the same replay
/// into two folders writes the same summary.
#[test]
fn identical_replays_into_different_folders_write_identical_summaries() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (a, b) = two_inputs(d);
    let mut summaries = Vec::new();
    for name in ["first", "second/deeper"] {
        let out = d.join(name);
        let (ok, err) = replay_two(&a, &b, out.to_str().unwrap(), &[]);
        assert!(ok, "{err}");
        summaries.push(std::fs::read_to_string(out.join("summary.json")).unwrap());
    }
    assert!(summaries[0] == summaries[1], "the two summaries differ");
    let summary: serde_json::Value = serde_json::from_str(&summaries[0]).unwrap();
    assert_eq!(summary["outputs"][0], "port0.pcap");
}

/// Item 7: an output directory that holds the inputs would overwrite them: refused before
/// anything is written, and the inputs are intact.
#[test]
fn replay_refuses_to_overwrite_its_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (a, b) = two_inputs(d);
    let before = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let (ok, err) = replay_two(&a, &b, d.to_str().unwrap(), &[]);
    assert!(!ok, "replaying into the inputs' folder must fail");
    assert!(err.contains("port0.pcap") && err.contains("input"), "{err}");
    assert_eq!(before, (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap()));
    assert!(!d.join("summary.json").exists());

    // The same through a symlink in a fresh output directory.
    let out = d.join("out");
    std::fs::create_dir(&out).unwrap();
    std::os::unix::fs::symlink(&b, out.join("port3.pcap")).unwrap();
    let (ok, err) = replay_two(&a, &b, out.to_str().unwrap(), &[]);
    assert!(!ok && err.contains("port3.pcap"), "{err}");
    assert_eq!(before.1, std::fs::read(&b).unwrap());
}

/// A config whose four ports are capture files, for `rocesw run`.
fn pcap_ports_config(d: &Path, ports: [(Option<&Path>, Option<&Path>); 4]) -> PathBuf {
    let mut text = std::fs::read_to_string(repo_root().join("configs/default.toml")).unwrap();
    for (id, (input, output)) in ports.iter().enumerate() {
        let mut table = vec!["pace = \"asap\"".to_string()];
        if let Some(i) = input {
            table.push(format!("input = {:?}", i.to_str().unwrap()));
        }
        if let Some(o) = output {
            table.push(format!("output = {:?}", o.to_str().unwrap()));
        }
        text = text.replacen(
            &format!("[[port]]\nid = {id}\n"),
            &format!("[[port]]\nid = {id}\npcap = {{ {} }}\n", table.join(", ")),
            1,
        );
    }
    let path = d.join("run.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Item 7: `rocesw run` refuses two outputs that are one file (through a symlink) and an
/// output that is another port's input, before opening anything.
#[test]
fn run_refuses_aliased_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (a, b) = two_inputs(d);
    let (o0, link) = (d.join("o0.pcap"), d.join("link.pcap"));
    std::os::unix::fs::symlink(&o0, &link).unwrap();
    let (o2, o3) = (d.join("o2.pcap"), d.join("o3.pcap"));
    let rest = [(None, Some(o2.as_path())), (None, Some(o3.as_path()))];
    let cfg = pcap_ports_config(d, [(Some(&a), Some(&o0)), (Some(&b), Some(&link)), rest[0], rest[1]]);
    let (ok, err) = rocesw(&["run", "--config", cfg.to_str().unwrap(), "--no-control"]);
    assert!(!ok, "two outputs naming one file must fail");
    assert!(err.contains("link.pcap") && err.contains("o0.pcap"), "{err}");
    assert!(!o0.exists() && !o2.exists(), "nothing written");

    let before = std::fs::read(&b).unwrap();
    let cfg = pcap_ports_config(d, [(Some(&a), Some(&b)), (Some(&b), None), rest[0], rest[1]]);
    let (ok, err) = rocesw(&["run", "--config", cfg.to_str().unwrap(), "--no-control"]);
    assert!(!ok && err.contains("input"), "{err}");
    assert_eq!(before, std::fs::read(&b).unwrap(), "the input is intact");
}

/// Issue 41 item 7: `rocesw run --summary` naming a folder, or a file in a folder that does
/// not exist, was found only when the run ended, with its final counters lost; now before
/// any port opens.
#[test]
fn run_refuses_a_summary_it_could_not_write_before_starting() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (a, b) = two_inputs(d);
    let (o0, o2, o3) = (d.join("o0.pcap"), d.join("o2.pcap"), d.join("o3.pcap"));
    let cfg = pcap_ports_config(
        d,
        [
            (Some(&a), Some(&o0)),
            (Some(&b), None),
            (None, Some(&o2)),
            (None, Some(&o3)),
        ],
    );
    let missing = d.join("missing/summary.json");
    for (summary, want) in [(d, "is a directory"), (missing.as_path(), "does not exist")] {
        let t0 = std::time::Instant::now();
        let (ok, err) = rocesw(&[
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--no-control",
            "--duration",
            "5",
            "--summary",
            summary.to_str().unwrap(),
        ]);
        assert!(!ok && err.contains("--summary") && err.contains(want), "{err}");
        assert!(t0.elapsed().as_secs() < 4, "refused at the start, not after the run");
        assert!(!o0.exists(), "no port opened");
    }
}

/// Item 11: a schedule step that cannot apply live is refused before the replay starts, so
/// the previous run's outputs are untouched.
#[test]
fn a_schedule_that_cannot_apply_fails_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (a, b) = two_inputs(d);
    let out = d.join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("summary.json"), "old").unwrap();
    std::fs::write(out.join("port0.pcap"), "old").unwrap();
    for (patch, field) in [
        ("[change.patch.buffer]\nsize = \"8MiB\"\n", "buffer.size"),
        ("[change.patch.port_defaults]\nmtu = 9100\n", "mtu"),
    ] {
        let schedule = d.join("schedule.toml");
        std::fs::write(&schedule, format!("[[change]]\nat = \"5us\"\n{patch}")).unwrap();
        let (ok, err) = replay_two(
            &a,
            &b,
            out.to_str().unwrap(),
            &["--schedule", schedule.to_str().unwrap()],
        );
        assert!(!ok && err.contains(field), "{field}: {err}");
        assert_eq!(std::fs::read_to_string(out.join("port0.pcap")).unwrap(), "old");
        assert_eq!(std::fs::read_to_string(out.join("summary.json")).unwrap(), "old");
    }
}

/// Item 13: a capture read through a pipe (`<(zcat x.pcap.gz)`) is opened once and replays.
#[test]
fn an_input_through_a_pipe_replays() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (a, b) = two_inputs(d);
    let out = d.join("out");
    let script = format!(
        "{:?} replay --config {:?} --input 0={:?} --input 1=<(cat {:?}) --output-dir {:?} --quiet",
        env!("CARGO_BIN_EXE_rocesw"),
        default_toml(),
        a,
        b,
        out
    );
    let o = Command::new("bash").arg("-c").arg(&script).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["input_frames"], 21);
}

/// Item 13: a write that fails (a full disk: /dev/full) names the file and what was done.
#[test]
fn a_full_disk_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (a, b) = two_inputs(d);
    let out = d.join("out");
    std::fs::create_dir(&out).unwrap();
    std::os::unix::fs::symlink("/dev/full", out.join("port0.pcap")).unwrap();
    let (ok, err) = replay_two(&a, &b, out.to_str().unwrap(), &[]);
    assert!(!ok, "a full disk fails the replay");
    assert!(err.contains("port0.pcap") && err.contains("writing"), "{err}");
}

/// Issue 21 item 17: a reader that closes early (`rocesw replay … | true`, `| head -1`) ends
/// the report quietly with exit 0, as `rocectl watch` does; it panicked on the broken pipe
/// (exit 101). The outputs are written all the same.
#[test]
fn replay_into_a_closed_pipe_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (a, b) = two_inputs(d);
    let out = d.join("out");
    let script = format!(
        "{:?} replay --config {:?} --input 0={:?} --input 1={:?} --output-dir {:?} | true; exit ${{PIPESTATUS[0]}}",
        env!("CARGO_BIN_EXE_rocesw"),
        default_toml(),
        a,
        b,
        out
    );
    let o = Command::new("bash").arg("-c").arg(&script).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.join("summary.json").exists());
}

/// Issue 21 item 16: a full disk while writing a capture says it was a write, with the cause;
/// pcap-file called it "Error reading bytes".
#[test]
fn a_failed_capture_write_says_it_was_a_write() {
    let mut out = dataplane::replay::PcapOutput::create(Path::new("/dev/full")).unwrap();
    let frame = vec![0u8; 1500];
    let err = (0..1000)
        .map(|i| out.write(i, &frame))
        .find_map(Result::err)
        .map(|e| format!("{e:#}"))
        .or_else(|| out.finish().err().map(|e| format!("{e:#}")))
        .expect("/dev/full refuses writes");
    assert!(
        err.contains("writing /dev/full") && err.contains("No space left on device"),
        "{err}"
    );
    assert!(!err.contains("reading"), "{err}");
}

/// Issue 21 item 16: inputs spanning more than 2^64 ps (213.5 days) replay cleanly. The peer's
/// wire clock counted picoseconds (departure × 1000): past 2^64 ps it wrapped, so a release
/// build lost frames to headroom overflow with exit 0 (and a debug build panicked). The frames
/// of a late line-rate flow now leave back to back, in order, every one of them.
#[test]
fn inputs_spanning_more_than_2_64_ps_replay_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (a, b) = (d.join("port0.pcap"), d.join("port1.pcap"));
    write_pcap(&a, vec![(0, announce(0, 1).unwrap())]);
    let late = 214 * 86_400 * 1_000_000_000u64;
    assert!(u128::from(late) * 1000 > u128::from(u64::MAX));
    let flow = Flow {
        src: 1,
        dst: 0,
        dscp: 26,
        ecn: Ecn::Ect0,
        qp: 1,
        frame_len: 1024,
        count: 200,
        start_ns: late,
        rate_bps: 25_000_000_000,
    };
    write_pcap(&b, flow.frames().unwrap());
    let o = replay(&default_config(), d, &[(0, a), (1, b)], 1, false);
    assert_eq!(o.snapshot.totals.drops.get("headroom_overflow"), 0);
    assert_eq!(o.snapshot.totals.drops.total(), 0);
    let out = read_pcap(&d.join("out/port0.pcap"));
    let data: Vec<u64> = out.iter().filter(|(_, f)| f.len() == 1024).map(|(t, _)| *t).collect();
    assert_eq!(data.len(), 200, "every frame of the late flow leaves");
    assert!(data.windows(2).all(|w| w[0] < w[1]), "in order, one after another");
    assert!(data[0] >= late, "at their time");
}

/// Issue 21 item 14: a config (or topology) path of /dev/zero is read no further than the
/// 4 MiB cap and refused clearly, instead of being read without bound.
#[test]
fn a_config_of_dev_zero_is_refused_after_a_bounded_read() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let (a, _) = two_inputs(dir.path());
    for args in [
        vec![
            "replay",
            "--config",
            "/dev/zero",
            "--input",
            &input_arg(0, &a),
            "--output-dir",
            out.to_str().unwrap(),
        ],
        vec![
            "fabric",
            "--topology",
            "/dev/zero",
            "--output-dir",
            out.to_str().unwrap(),
        ],
    ] {
        let (ok, err) = rocesw(&args);
        assert!(!ok, "{args:?}");
        assert!(err.contains("/dev/zero: larger than 4 MiB"), "{args:?}: {err}");
    }
}

/// Issue 21: `rocesw run --summary` naming the config (however spelt) would replace the config
/// with counters at exit: refused before anything starts.
#[test]
fn run_refuses_a_summary_that_is_its_config() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (a, _b) = two_inputs(d);
    let o: Vec<PathBuf> = (0..4).map(|i| d.join(format!("o{i}.pcap"))).collect();
    let cfg = pcap_ports_config(
        d,
        [
            (Some(&a), Some(&o[0])),
            (None, Some(&o[1])),
            (None, Some(&o[2])),
            (None, Some(&o[3])),
        ],
    );
    let link = d.join("summary.json");
    std::os::unix::fs::symlink(&cfg, &link).unwrap();
    let before = std::fs::read(&cfg).unwrap();
    let (ok, err) = rocesw(&[
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--no-control",
        "--summary",
        link.to_str().unwrap(),
    ]);
    assert!(!ok, "a summary that is the config must fail");
    assert!(
        err.contains("the summary (--summary)") && err.contains("the config"),
        "{err}"
    );
    assert_eq!(before, std::fs::read(&cfg).unwrap(), "the config is intact");
    assert!(!o[0].exists(), "nothing written");
}
