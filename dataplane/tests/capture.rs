//! Live capture (`rocectl capture`, the `capture` op): `rocesw run` on capture-file ports runs
//! a 3→1 incast whose receiver sends CNPs back, two `rocectl capture`s watch it (the congested
//! egress port's transmissions, and an ingress port both ways), and tshark reads the files:
//! PFC, CE marks and CNPs are there, and each capture holds exactly the frames the port read
//! from its input or wrote to its output over the same window, byte for byte. Then the
//! protocol's edges on in-memory ports: ports of an I/O worker, refusals, a client that never
//! reads or that leaves, counted and stopped captures.

mod common;
use common::*;
use controlplane::protocol::DEFAULT_SOCKET;
use dataplane::runtime::control_server::{ControlServer, MAX_PENDING_OUTPUT};
use dataplane::runtime::worker::ControlQueue;
use dataplane::tools::gen::{announce, host_ip, host_mac, Flow, BASE_NS};
use dataplane::wire::{build_cnp, Ecn, IpPair};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Seconds of capture time before the senders start: the switch runs, the captures start,
/// then traffic flows (capture-file ports deliver each frame at its capture time).
const QUIET_S: u64 = 4;
const SPEED: &str = "100M";
const SPEED_BPS: u64 = 100_000_000;
const FRAMES: u64 = 1500;

fn tshark_count(file: &Path, filter: &str) -> usize {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(file)
        .args(["-Y", filter, "-T", "fields", "-e", "frame.number"])
        .output()
        .expect("tshark runs");
    assert!(
        out.status.success(),
        "tshark -r {} -Y '{filter}': {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).lines().count()
}

/// The inputs: hosts 0-2 each send `FRAMES` lossless RoCEv2 frames at line rate to host 3
/// from `QUIET_S` on; host 3 announces itself at 0 and, once the senders run, sends each of
/// them a CNP every 2 ms (as a congestion-notified receiver would).
fn write_inputs(dir: &Path) -> Vec<PathBuf> {
    let start = QUIET_S * 1_000_000_000;
    let mut paths = Vec::new();
    for s in 0..3u16 {
        let frames = Flow {
            src: s,
            dst: 3,
            dscp: 26,
            ecn: Ecn::Ect0,
            qp: 0x100 + u32::from(s),
            frame_len: 1024,
            count: FRAMES,
            start_ns: start + u64::from(s) * 1000,
            rate_bps: SPEED_BPS,
        }
        .frames()
        .unwrap();
        let p = dir.join(format!("in{s}.pcap"));
        write_pcap(&p, frames);
        paths.push(p);
    }
    let mut rx = vec![(0, announce(3, 0).unwrap())];
    for k in 0..40u64 {
        for s in 0..3u16 {
            let ip = IpPair::V4 {
                src: host_ip(3),
                dst: host_ip(s),
            };
            rx.push((
                start + 1_000_000 + k * 2_000_000 + u64::from(s),
                build_cnp(host_mac(3), host_mac(s), ip, 0x100 + u32::from(s)),
            ));
        }
    }
    let p = dir.join("in3.pcap");
    write_pcap(&p, rx);
    paths.push(p);
    paths
}

/// A `rocectl capture` running, with its stderr lines arriving on a channel.
struct Capturing {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    file: PathBuf,
}

fn start_capture(rocectl: &Path, socket: &Path, file: &Path, args: &[&str]) -> Capturing {
    let mut child = Command::new(rocectl)
        .arg("capture")
        .args(args)
        .arg("-w")
        .arg(file)
        .arg("--socket")
        .arg(socket)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    Capturing {
        child,
        lines,
        file: file.to_path_buf(),
    }
}

impl Capturing {
    /// Waits for the line saying the switch accepted the capture.
    fn started(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let l = self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| panic!("rocectl capture did not start ({})", self.file.display()));
            if l.contains("rocectl: capturing ") {
                return;
            }
            assert!(!l.contains("rocectl:") || l.contains("capturing"), "{l}");
        }
    }

    /// Waits for rocectl to exit; its remaining stderr.
    fn finish(mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("rocectl capture did not end after the switch stopped");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        std::thread::sleep(Duration::from_millis(50));
        let rest: Vec<String> = self.lines.try_iter().collect();
        let rest = rest.join("\n");
        assert!(status.success(), "rocectl capture failed: {rest}");
        rest
    }
}

/// Frames only (the timestamps are the capture's own).
fn bytes(frames: &[(u64, Vec<u8>)]) -> Vec<Vec<u8>> {
    frames.iter().map(|(_, f)| f.clone()).collect()
}

#[test]
fn rocectl_captures_a_live_incast_with_pfc_ce_marks_and_cnps() {
    if Command::new("tshark").arg("--version").output().is_err() {
        eprintln!("skipped: tshark is not installed (apt-get install tshark; .ci/install-deps does)");
        return;
    }
    let rocectl = rocectl();
    let dir = tempfile::tempdir().unwrap();
    let inputs = write_inputs(dir.path());
    let out = |id: u16| dir.path().join(format!("out{id}.pcap"));
    let cfg = ports_config(
        dir.path(),
        |id| {
            format!(
                "speed = \"{SPEED}\"\npcap = {{ input = {:?}, output = {:?} }}",
                inputs[id as usize],
                out(id)
            )
        },
        "",
    );
    let socket = dir.path().join("rocesw.sock");
    assert_ne!(socket, Path::new(DEFAULT_SOCKET));
    let t0 = Instant::now();
    let mut switch = Command::new(env!("CARGO_BIN_EXE_rocesw"))
        .args(["run", "--config"])
        .arg(&cfg)
        .arg("--control")
        .arg(&socket)
        .arg("--summary")
        .arg(dir.path().join("summary.json"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while !socket.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(10) && switch.try_wait().unwrap().is_none(),
            "rocesw run did not open its control socket"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // An existing file is refused before the switch is asked, and left as it was.
    let taken = dir.path().join("taken.pcap");
    std::fs::write(&taken, b"keep").unwrap();
    let refused = Command::new(&rocectl)
        .args(["capture", "--port", "1", "-w"])
        .arg(&taken)
        .arg("--socket")
        .arg(&socket)
        .output()
        .unwrap();
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && why.contains("--force"), "{why}");
    assert_eq!(std::fs::read(&taken).unwrap(), b"keep");
    let tx3 = start_capture(
        &rocectl,
        &socket,
        &dir.path().join("cap3-tx.pcap"),
        &["--port", "3", "--tx"],
    );
    let both0 = start_capture(&rocectl, &socket, &dir.path().join("cap0.pcap"), &["--port", "0"]);
    // Stopped with Ctrl-C while the senders run.
    let rx2 = start_capture(
        &rocectl,
        &socket,
        &dir.path().join("cap2-rx.pcap"),
        &["--port", "2", "--rx"],
    );
    tx3.started();
    both0.started();
    rx2.started();
    let ready = t0.elapsed();
    assert!(
        ready < Duration::from_secs(QUIET_S - 1),
        "the captures took {ready:?} to start: the traffic (at {QUIET_S} s) may have begun without them"
    );
    // Ctrl-C once port 2's capture has copied some of its sender's frames.
    let ctl = UnixStream::connect(&socket).unwrap();
    ctl.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut ctl_in = BufReader::new(ctl.try_clone().unwrap());
    let mut ctl_out = ctl;
    loop {
        ctl_out.write_all(b"{\"v\":1,\"id\":1,\"op\":\"counters\"}\n").unwrap();
        let mut line = String::new();
        ctl_in.read_line(&mut line).unwrap();
        let r: Value = serde_json::from_str(&line).unwrap();
        if r["data"]["ports"][2]["capture"]["frames"].as_u64().unwrap_or(0) >= 100 {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "port 2 received nothing");
        std::thread::sleep(Duration::from_millis(5));
    }
    drop((ctl_in, ctl_out));
    // SAFETY: a plain kill(2) of the rocectl this test started.
    assert_eq!(unsafe { libc::kill(rx2.child.id() as i32, libc::SIGINT) }, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = switch.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = switch.kill();
            panic!("rocesw run did not stop after its inputs ended");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(switch.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "rocesw run failed: {err}");
    let end3 = tx3.finish();
    let end0 = both0.finish();
    let end2 = rx2.finish();
    assert!(end2.contains("ended: stopped"), "Ctrl-C ended the capture: {end2}");
    // A valid capture of what port 2 had received by then: the start of its input.
    let cap2 = bytes(&read_pcap(&dir.path().join("cap2-rx.pcap")));
    let in2 = bytes(&read_pcap(&inputs[2]));
    assert!(
        cap2.len() >= 100 && in2.starts_with(&cap2),
        "{} frames, a prefix of the input",
        cap2.len()
    );
    for end in [&end3, &end0] {
        assert!(
            end.contains(" 0 dropped") && end.contains("the switch stopped"),
            "{end}"
        );
    }

    let c3 = dir.path().join("cap3-tx.pcap");
    let c0 = dir.path().join("cap0.pcap");
    let cap3 = read_pcap(&c3);
    let cap0 = read_pcap(&c0);
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("summary.json")).unwrap()).unwrap();
    let sw = &summary["switch"];
    assert!(
        sw["ports"][3]["ecn_marked"].as_u64().unwrap() > 0,
        "the incast congested port 3"
    );
    assert!(
        sw["ports"][0]["pfc_tx"][3].as_u64().unwrap() > 0,
        "port 0 paused its sender"
    );

    // What tshark sees, independently of our parser.
    let ce3 = tshark_count(&c3, "ip.dsfield.ecn == 3");
    let roce3 = tshark_count(&c3, "infiniband.bth.opcode == 4");
    assert!(ce3 > 0, "CE-marked frames in the egress capture");
    assert_eq!(
        ce3 as u64,
        sw["ports"][3]["ecn_marked"].as_u64().unwrap(),
        "every CE mark the port made"
    );
    assert_eq!(
        roce3 as u64,
        3 * FRAMES,
        "every sender's frame left port 3 and was captured"
    );
    let pfc0 = tshark_count(&c0, "macc.opcode == 0x0101");
    let cnp0 = tshark_count(&c0, "infiniband.bth.opcode == 129");
    let data0 = tshark_count(&c0, "infiniband.bth.opcode == 4");
    assert_eq!(
        pfc0 as u64,
        sw["ports"][0]["pfc_tx"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .sum::<u64>(),
        "every PFC frame port 0 sent"
    );
    assert!(pfc0 > 0);
    assert_eq!(cnp0, 40, "every CNP host 3 sent host 0");
    assert_eq!(data0 as u64, FRAMES, "every frame host 0 sent");

    // Byte for byte: the egress capture is what port 3 wrote to its output (the whole run:
    // nothing leaves port 3 before the senders start).
    assert_eq!(bytes(&cap3), bytes(&read_pcap(&out(3))), "port 3: capture vs output");
    // Port 0 both ways: what came from host 0 is its input, in order; the rest is what port 0
    // wrote, in order, apart from what it sent before the capture began (the flood of host 3's
    // announcement, at time 0).
    let from_host0 = |f: &Vec<u8>| f[6..12] == host_mac(0);
    let rx0: Vec<Vec<u8>> = bytes(&cap0).into_iter().filter(from_host0).collect();
    let tx0: Vec<Vec<u8>> = bytes(&cap0).into_iter().filter(|f| !from_host0(f)).collect();
    assert_eq!(rx0, bytes(&read_pcap(&inputs[0])), "port 0 rx: capture vs input");
    let written0 = bytes(&read_pcap(&out(0)));
    assert!(
        written0.ends_with(&tx0),
        "port 0 tx: the capture is the end of its output"
    );
    let before: Vec<&Vec<u8>> = written0[..written0.len() - tx0.len()].iter().collect();
    assert!(
        before.iter().all(|f| f[6..12] == host_mac(3) && f[..6] == host_mac(0)),
        "only the announcement went out before the capture: {}",
        before.len()
    );
    // Timestamps: wall-clock time of this run, in order per direction.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    assert!(cap3
        .iter()
        .all(|(t, _)| *t > now - 120_000_000_000 && *t <= now && *t > BASE_NS));
    assert!(cap3.windows(2).all(|w| w[0].0 <= w[1].0), "tx timestamps in order");
}

// ---- The protocol on in-memory ports (`worker::run` and the control server in this process).

/// Two workers: ports 0 and 2 on the pipeline worker, 1 and 3 on the I/O worker.
fn start() -> Running {
    let text = std::fs::read_to_string(repo_root().join("configs/default.toml")).unwrap()
        + "\n[run]\nworkers = 2\nidle = \"20us\"\n";
    let mut cfg = controlplane::load_str(&text).unwrap().config;
    for (i, p) in cfg.ports.iter_mut().enumerate() {
        p.worker = i % 2;
    }
    Running::start(cfg, Some((text, "rocesw.sock")))
}

fn flow(src: u16, dst: u16, count: u64) -> Vec<Vec<u8>> {
    Flow {
        src,
        dst,
        dscp: 26,
        ecn: Ecn::Ect0,
        qp: 9,
        frame_len: 512,
        count,
        start_ns: 0,
        rate_bps: 1_000_000_000,
    }
    .frames()
    .unwrap()
    .into_iter()
    .map(|(_, f)| f)
    .collect()
}

fn capture_report(c: &mut Conn, port: usize) -> Value {
    c.ok(json!({"v":1,"id":500,"op":"counters"}))["ports"][port]["capture"].clone()
}

/// A port of the I/O worker captured both ways and a pipeline worker's port captured on
/// receive: each capture holds exactly what its port received and sent, in order, stamped
/// with wall-clock times of this run; `capture_stop` sends what is left, then the last push,
/// then its answer; `counters` shows what was captured.
#[test]
fn captures_hold_what_the_ports_moved_on_either_worker() {
    let sw = start();
    let wall = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    };
    let before = wall();
    let mut a = sw.connect();
    let started = a.ok(json!({"v":1,"id":1,"op":"capture","port":3}));
    assert_eq!(started["direction"], "both");
    assert_eq!(started["snaplen"], 1518, "the port's largest frame");
    let mut b = sw.connect();
    b.ok(json!({"v":1,"id":7,"op":"capture","port":0,"direction":"rx"}));
    let hello = announce(3, 0).unwrap();
    sw.feed(3, std::slice::from_ref(&hello));
    sw.wait_for("the announcement", |s| s.sent(0).len() == 1);
    let frames = flow(0, 3, 300);
    sw.feed(0, &frames);
    sw.wait_for("the frames at port 3", |s| s.sent(3).len() == 300);
    a.send(&json!({"v":1,"id":2,"op":"capture_stop"}));
    let (got_a, last_a) = a.collect(1);
    assert_eq!(a.read(), json!({"v":1,"id":2,"ok":true,"data":{"stopped":true}}));
    assert_eq!(last_a["end"], "stopped");
    assert_eq!(
        (last_a["captured"].as_u64(), last_a["dropped"].as_u64()),
        (Some(301), Some(0))
    );
    b.send(&json!({"v":1,"id":8,"op":"capture_stop"}));
    let (got_b, _) = b.collect(7);
    assert_eq!(b.read()["id"], 8, "capture_stop answered after the last push");
    let after = wall();

    let dir = |got: &[(String, Vec<u8>, u64)], d: &str| -> Vec<Vec<u8>> {
        got.iter()
            .filter(|(x, _, _)| x == d)
            .map(|(_, f, _)| f.clone())
            .collect()
    };
    assert_eq!(
        dir(&got_a, "rx"),
        std::slice::from_ref(&hello),
        "port 3 received the announcement"
    );
    assert_eq!(dir(&got_a, "tx"), sw.sent(3), "port 3 sent these, in this order");
    assert_eq!(dir(&got_b, "rx"), frames, "port 0 received these");
    assert!(
        got_a.iter().all(|(_, f, _)| f.len() == 512 || f == &hello),
        "whole frames by default"
    );
    assert!(dir(&got_b, "tx").is_empty(), "an rx capture has no tx frames");
    for (_, _, ns) in got_a.iter().chain(&got_b) {
        assert!(before - 1_000_000 <= *ns && *ns <= after, "wall-clock time of this run");
    }
    // Once stopped, the port may be captured again, and the counters keep what was taken.
    a.ok(json!({"v":1,"id":3,"op":"capture","port":3,"direction":"tx","count":1}));
    a.send(&json!({"v":1,"id":4,"op":"capture_stop"}));
    let _ = a.collect(3);
    assert_eq!(capture_report(&mut b, 3), json!({"frames": 301, "dropped": 0}));
    assert_eq!(capture_report(&mut b, 0), json!({"frames": 300, "dropped": 0}));
    assert!(capture_report(&mut b, 1).is_null(), "never captured");
    sw.wait_for("the rings to be freed", |s| s.server().figures().captures == 0);
    assert_eq!(sw.server().figures().capture_bytes, 0);
    drop((a, b));
    sw.finish();
}

/// What cannot be captured is refused with the reason, and changes nothing.
#[test]
fn capture_requests_that_cannot_be_served_say_why() {
    let sw = start();
    let mut a = sw.connect();
    let mut b = sw.connect();
    let e = a.refused(json!({"v":1,"id":1,"op":"capture","port":9}));
    assert!(e.contains("no port 9") && e.contains("0, 1, 2, 3"), "{e}");
    let e = a.refused(json!({"v":1,"id":1,"op":"capture_stop"}));
    assert!(e.contains("no capture"), "{e}");
    for (req, why) in [
        (json!({"v":1,"id":1,"op":"capture","port":1,"snaplen":10}), "snaplen"),
        (json!({"v":1,"id":1,"op":"capture","port":1,"count":0}), "count"),
        (
            json!({"v":1,"id":1,"op":"capture","port":1,"duration_ms":0}),
            "duration",
        ),
        (json!({"v":1,"id":1,"op":"capture","port":1,"ring":1000000}), "ring"),
        (
            json!({"v":1,"id":1,"op":"capture","port":1,"direction":"sideways"}),
            "sideways",
        ),
    ] {
        let e = a.refused(req);
        assert!(e.contains(why), "{why}: {e}");
    }
    a.ok(json!({"v":1,"id":2,"op":"capture","port":1}));
    let e = b.refused(json!({"v":1,"id":3,"op":"capture","port":1}));
    assert!(e.contains("already being captured"), "{e}");
    let e = a.refused(json!({"v":1,"id":4,"op":"capture","port":2}));
    assert!(e.contains("one per connection"), "{e}");
    b.ok(json!({"v":1,"id":5,"op":"capture","port":2,"direction":"tx","snaplen":64,"ring":16}));
    sw.wait_for("two captures", |s| s.server().figures().captures == 2);
    drop((a, b));
    sw.finish();
}

/// A counted capture sends exactly its count; a timed one ends on time.
#[test]
fn counted_and_timed_captures_end_by_themselves() {
    let sw = start();
    let mut c = sw.connect();
    c.ok(json!({"v":1,"id":1,"op":"capture","port":0,"direction":"rx","count":25,"snaplen":100}));
    let frames = flow(0, 3, 100);
    sw.feed(0, &frames);
    let (got, last) = c.collect(1);
    assert_eq!(last["end"], "count");
    assert_eq!(got.len(), 25);
    for ((_, f, _), want) in got.iter().zip(&frames) {
        assert_eq!(f[..], want[..100], "cut at the snap length");
    }
    let t = Instant::now();
    c.ok(json!({"v":1,"id":2,"op":"capture","port":0,"duration_ms":300}));
    let (_, last) = c.collect(2);
    assert_eq!(last["end"], "duration");
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(5),
        "{took:?}"
    );
    drop(c);
    sw.finish();
}

/// A capture client that never reads holds no more of the switch than its ring and one
/// connection's output allowance: the frames beyond are counted as dropped, the switch's
/// traffic is not slowed or lost, and another client is served meanwhile. When it leaves, its
/// capture stops and its ring is freed, and the port can be captured again.
#[test]
fn a_capture_client_that_never_reads_or_leaves_costs_bounded_memory() {
    let sw = start();
    let mut lazy = sw.connect();
    lazy.ok(json!({"v":1,"id":1,"op":"capture","port":3,"direction":"tx","ring":64}));
    sw.wait_for("the capture", |s| s.server().figures().captures == 1);
    let ring_bytes = sw.server().figures().capture_bytes;
    assert!(ring_bytes > 64 * 1518 && ring_bytes < 64 * 1518 * 2, "{ring_bytes}");
    let mut c = sw.connect();
    sw.feed(3, &[announce(3, 0).unwrap()]);
    sw.wait_for("the announcement", |s| s.sent(0).len() == 1);
    let total = 20_000;
    let mut peak = 0;
    // In chunks the switch takes without pausing the sender (this port ignores PFC).
    for (i, chunk) in flow(0, 3, total).chunks(100).enumerate() {
        sw.feed(0, chunk);
        sw.wait_for("the chunk at port 3", |s| s.sent(3).len() == (i + 1) * 100);
        if i % 20 == 0 {
            let t = Instant::now();
            c.ok(json!({"v":1,"id":2,"op":"hello"}));
            assert!(
                t.elapsed() < Duration::from_millis(500),
                "another client waited {:?}",
                t.elapsed()
            );
        }
        peak = peak.max(sw.server().figures().buffered_bytes);
    }
    let report = capture_report(&mut c, 3);
    let (frames, dropped) = (report["frames"].as_u64().unwrap(), report["dropped"].as_u64().unwrap());
    assert_eq!(
        frames + dropped,
        total,
        "every frame port 3 sent was captured or counted"
    );
    assert!(dropped > 0, "a reader that never reads loses frames: {report}");
    peak = peak.max(sw.server().figures().buffered_bytes);
    assert!(
        peak < MAX_PENDING_OUTPUT + (1 << 20),
        "the server held {peak} bytes for it"
    );
    drop(lazy);
    sw.wait_for("the ring to be freed", |s| s.server().figures().capture_bytes == 0);
    assert_eq!(sw.server().figures().captures, 0);
    c.ok(json!({"v":1,"id":3,"op":"capture","port":3}));
    let after = capture_report(&mut c, 3);
    assert_eq!(after, report, "the counters keep what the ended capture did");
    drop(c);
    sw.finish();
}

/// Capture rings are counted against the cap on all of them (`CAPTURE_MAX_TOTAL_BYTES`) when
/// they are reserved, not when the server next publishes its figures: eight connections that
/// each ask for a ring of about 59 MiB in one round of the server's loop get four rings (237
/// MiB), and the other four are refused, saying why. Before, all eight started (474 MiB).
///
/// The switch here is a stand-in that answers the server's requests itself, so the test
/// decides when: the first capture's answer is held until the seven other requests are
/// waiting on their sockets, which the server then reads in one round.
#[test]
fn capture_rings_count_against_the_cap_when_reserved() {
    use controlplane::protocol::CAPTURE_MAX_TOTAL_BYTES;
    use dataplane::runtime::worker::ControlRequest;
    const N: usize = 8;
    let dir = tempfile::tempdir().unwrap();
    let cfg = ports_config_n(dir.path(), N as u16, |_| String::new(), "");
    let text = std::fs::read_to_string(&cfg).unwrap();
    controlplane::load_str(&text).expect("the config of 8 ports loads");
    let queue: Arc<ControlQueue> = Arc::new(crossbeam_queue::ArrayQueue::new(64));
    let server = ControlServer::spawn(&dir.path().join("rocesw.sock"), text, queue.clone()).unwrap();
    let gate = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let switch = {
        let (queue, gate, done) = (queue.clone(), gate.clone(), done.clone());
        std::thread::spawn(move || {
            // Holds the rings it was given, as a worker does while it captures.
            let mut held = Vec::new();
            while !done.load(Ordering::Relaxed) {
                let Some(req) = queue.pop() else {
                    std::thread::sleep(Duration::from_micros(200));
                    continue;
                };
                match req {
                    ControlRequest::Capture { rx, tx, reply, .. } => {
                        while !gate.load(Ordering::Relaxed) && !done.load(Ordering::Relaxed) {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        held.extend(rx.into_iter().chain(tx));
                        let _ = reply.send(Ok(0));
                    }
                    other => panic!("unexpected request {:?}", std::mem::discriminant(&other)),
                }
            }
        })
    };
    let path = server.path().to_path_buf();
    let mut conns: Vec<(BufReader<UnixStream>, UnixStream)> = (0..N)
        .map(|_| {
            let s = UnixStream::connect(&path).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            (BufReader::new(s.try_clone().unwrap()), s)
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.figures().unix_connections < N {
        assert!(Instant::now() < deadline, "the server did not accept {N} connections");
        std::thread::sleep(Duration::from_millis(5));
    }
    // About 59 MiB each: four fit under the cap, five do not.
    let ask = |id: usize| {
        format!("{{\"v\":1,\"id\":{id},\"op\":\"capture\",\"port\":{id},\"direction\":\"rx\",\"snaplen\":4096,\"ring\":15000}}\n")
    };
    conns[0].1.write_all(ask(0).as_bytes()).unwrap();
    // The server now waits for the stand-in's answer; meanwhile the others ask.
    std::thread::sleep(Duration::from_millis(200));
    for (i, c) in conns.iter_mut().enumerate().skip(1) {
        c.1.write_all(ask(i).as_bytes()).unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    gate.store(true, Ordering::Relaxed);
    let mut started = 0;
    let mut refused = Vec::new();
    for (reader, _) in &mut conns {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "the server closed a connection"
        );
        let r: Value = serde_json::from_str(&line).unwrap();
        if r["ok"] == true {
            started += 1;
        } else {
            refused.push(r["error"].as_str().unwrap().to_string());
        }
    }
    // The figures are published at the end of the round that answered.
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.figures().captures != started {
        assert!(Instant::now() < deadline, "{:?}", server.figures());
        std::thread::sleep(Duration::from_millis(5));
    }
    let reserved = server.figures().capture_bytes;
    assert!(
        reserved <= CAPTURE_MAX_TOTAL_BYTES,
        "{started} captures started, holding {} MiB (the cap is {} MiB)",
        reserved >> 20,
        CAPTURE_MAX_TOTAL_BYTES >> 20
    );
    assert_eq!(started, 4, "refused: {refused:?}");
    for e in &refused {
        assert!(e.contains("256 MiB all captures may use"), "{e}");
    }
    drop(conns);
    server.shutdown();
    done.store(true, Ordering::Relaxed);
    switch.join().unwrap();
}
