//! Helpers shared by the replay tests: configs, pcaps in and out, and the independent oracles
//! (scapy and tshark, in tests/oracle) that check what the switch wrote.
#![allow(dead_code)]

use controlplane::Config;
use dataplane::io::{PortBackend, PortError, PortStats};
use dataplane::replay::{self, ReplayOptions, ReplayOutcome};
use dataplane::runtime::control_server::ControlServer;
use dataplane::runtime::worker::{self, ControlQueue, RunOptions, RunOutcome};
use serde_json::Value;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// `rocesw ARGS` run in `cwd`, to its end.
pub fn rocesw_in(cwd: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_rocesw"))
        .current_dir(cwd)
        .args(args)
        .output()
        .unwrap()
}

/// A finished command's status and both streams, for an assertion's message.
pub fn output_text(o: &std::process::Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A small `rocesw tune` patterns file the tune tests share, so a sweep takes seconds: four
/// patterns, 300 µs each (an incast of long flows, a one-shot incast, messages over a long
/// flow, and all-to-all messages).
pub const SMALL_TUNE_PATTERNS: &str = r#"
duration = "300us"
[sizes]
mix = [["4KiB", 60], ["64KiB", 30], ["256KiB", 10]]
[[family]]
name = "incast"
pattern = "incast"
degree = [3]
size = ["long", "256KiB"]
[[family]]
name = "msgs"
pattern = "all-to-all"
hosts = [6]
dist = ["mix"]
load = [0.5]
long = [0, 1]
"#;

pub fn default_config() -> Config {
    controlplane::load_file(&repo_root().join("configs/default.toml"))
        .expect("default config loads")
        .config
}

/// `configs/default.toml` with its four ports replaced by `port(id)` (each port's extra keys),
/// plus `extra` at the end, written to `dir/switch.toml`: the config of a `rocesw run` test.
pub fn ports_config(dir: &Path, port: impl Fn(u16) -> String, extra: &str) -> PathBuf {
    ports_config_n(dir, 4, port, extra)
}

/// [`ports_config`] with `n` ports (ids 0..n).
pub fn ports_config_n(dir: &Path, n: u16, port: impl Fn(u16) -> String, extra: &str) -> PathBuf {
    let text = std::fs::read_to_string(repo_root().join("configs/default.toml")).unwrap();
    let mut kept: String = text
        .split("\n[[port]]\n")
        .enumerate()
        .map(|(i, chunk)| {
            if i == 0 {
                chunk.to_string()
            } else {
                // Drop the `id = N` line of each original port; keep what follows it.
                chunk.split_once('\n').map_or("", |(_, rest)| rest).to_string()
            }
        })
        .collect();
    for id in 0..n {
        kept += &format!("\n[[port]]\nid = {id}\n{}\n", port(id));
    }
    kept += extra;
    let path = dir.join("switch.toml");
    std::fs::write(&path, kept).unwrap();
    path
}

pub fn replay(cfg: &Config, dir: &Path, inputs: &[(u16, PathBuf)], seed: u64, peer_ignores_pfc: bool) -> ReplayOutcome {
    let opts = ReplayOptions {
        inputs: inputs.to_vec(),
        output_dir: dir.join("out"),
        seed,
        peer_ignores_pfc,
        progress: None,
        schedule: Default::default(),
        timeline: false,
    };
    replay::run(cfg, &opts).expect("replay runs")
}

/// (timestamp ns, frame) of every record.
pub fn read_pcap(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut r = pcap_file::pcap::PcapReader::new(f).unwrap();
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        out.push((p.timestamp.as_nanos() as u64, p.data.into_owned()));
    }
    out
}

pub fn write_pcap(path: &Path, frames: Vec<(u64, Vec<u8>)>) {
    dataplane::tools::gen::write_pcap(path, dataplane::tools::gen::BASE_NS, frames).unwrap();
}

/// Runs one of the oracle scripts and returns its JSON.
pub fn oracle(script: &str, files: &[PathBuf]) -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle").join(script);
    let out = std::process::Command::new("python3")
        .arg(&path)
        .args(files)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 {}: {e} (run .ci/install-deps)", path.display()));
    assert!(
        out.status.success(),
        "{script} failed ({}); stderr:\n{}\n(run .ci/install-deps to install scapy and tshark)",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("oracle prints JSON")
}

pub fn port(o: &ReplayOutcome, id: u16) -> &dataplane::report::PortReport {
    o.snapshot.ports.iter().find(|p| p.id == id).unwrap()
}

pub fn out_pcap(dir: &Path, port: u16) -> PathBuf {
    dir.join("out").join(format!("port{port}.pcap"))
}

/// Frames that are RoCEv2 data (not PFC), with their parse.
pub fn roce_frames(frames: &[(u64, Vec<u8>)]) -> Vec<(u64, Vec<u8>, dataplane::wire::FrameInfo)> {
    frames
        .iter()
        .filter_map(|(t, f)| {
            let info = dataplane::wire::parse(f, usize::MAX).ok()?;
            info.is_roce().then(|| (*t, f.clone(), info))
        })
        .collect()
}

/// A burst of 32 RoCEv2 frames of 1 KiB from host `src` to host `dst` with `dscp`, ECT(0).
pub fn burst32(src: u16, dst: u16, dscp: u8) -> Vec<Vec<u8>> {
    dataplane::tools::gen::Flow {
        src,
        dst,
        dscp,
        ecn: dataplane::wire::Ecn::Ect0,
        qp: src as u32,
        frame_len: 1024,
        count: 32,
        start_ns: 0,
        rate_bps: 25_000_000_000,
    }
    .frames()
    .unwrap()
    .into_iter()
    .map(|(_, f)| f)
    .collect()
}

/// Both directions of one port, shared between the test and the worker that owns the port.
#[derive(Default)]
pub struct Wire {
    pub to_switch: VecDeque<Vec<u8>>,
    pub from_switch: Vec<Vec<u8>>,
    /// The port's interface disappears: receive errors, link down.
    pub vanished: bool,
    /// Frames the port will still take before its transmit ring is full (`None`: always room):
    /// 0 is a NIC or VM that stopped reading.
    pub tx_room: Option<usize>,
    /// Frames the port's receive ring has lost so far (what a kernel or NIC counts itself).
    pub ring_drops: u64,
}

/// An in-memory port whose wire the test holds, for `worker::run` tests.
pub struct TestPort {
    pub name: String,
    pub wire: Arc<Mutex<Wire>>,
}

impl PortBackend for TestPort {
    fn recv_burst(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, PortError> {
        let mut w = self.wire.lock().unwrap();
        if w.vanished {
            return Err(PortError::Vanished {
                iface: self.name.clone(),
                source: std::io::Error::from_raw_os_error(6),
            });
        }
        let mut n = 0;
        while n < max {
            let Some(frame) = w.to_switch.pop_front() else { break };
            f(&frame);
            n += 1;
        }
        Ok(n)
    }

    fn send(&mut self, frame: &[u8]) -> Result<bool, PortError> {
        let mut w = self.wire.lock().unwrap();
        match w.tx_room {
            Some(0) => return Ok(false),
            Some(n) => w.tx_room = Some(n - 1),
            None => {}
        }
        w.from_switch.push(frame.to_vec());
        Ok(true)
    }

    fn tx_room(&mut self) -> usize {
        self.wire.lock().unwrap().tx_room.unwrap_or(usize::MAX)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }

    fn link_up(&mut self) -> bool {
        !self.wire.lock().unwrap().vanished
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn driver(&self) -> &str {
        "memory"
    }

    fn stats(&mut self) -> PortStats {
        PortStats {
            rx_kernel_drops: self.wire.lock().unwrap().ring_drops,
            ..PortStats::default()
        }
    }
}

/// A switch (`worker::run` on a thread of this process) on in-memory ports whose wires the test
/// holds, one per port, and, if asked, a control server in front of it.
pub struct Running {
    pub wires: Vec<Arc<Mutex<Wire>>>,
    pub stop: Arc<AtomicBool>,
    pub handle: std::thread::JoinHandle<RunOutcome>,
    pub server: Option<ControlServer>,
    _dir: tempfile::TempDir,
}

impl Running {
    /// Runs `cfg`. With `control` = (the config's text, a socket path relative to a temporary
    /// directory), a control server holding that text serves it; what the server holds must be
    /// what the switch runs (`[run]` cannot change live).
    pub fn start(cfg: Config, control: Option<(String, &str)>) -> Running {
        let wires: Vec<Arc<Mutex<Wire>>> = cfg.ports.iter().map(|_| Arc::default()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let dir = tempfile::tempdir().unwrap();
        let (queue, server) = match control {
            Some((text, socket)) => {
                let queue: Arc<ControlQueue> = Arc::new(crossbeam_queue::ArrayQueue::new(16));
                let server = ControlServer::spawn(&dir.path().join(socket), text, queue.clone()).unwrap();
                (Some(queue), Some(server))
            }
            None => (None, None),
        };
        let (w2, s2) = (wires.clone(), stop.clone());
        let handle = std::thread::spawn(move || {
            let opts = RunOptions {
                ready: None,
                seed: 1,
                control: queue,
                open: Box::new(move |p| {
                    let idx = p.id as usize;
                    Ok(Box::new(TestPort {
                        name: format!("t{idx}"),
                        wire: w2[idx].clone(),
                    }) as Box<dyn PortBackend + Send>)
                }),
            };
            worker::run(&cfg, opts, s2, None).expect("run")
        });
        Running {
            wires,
            stop,
            handle,
            server,
            _dir: dir,
        }
    }

    /// The control server (the switch must have been started with one).
    pub fn server(&self) -> &ControlServer {
        self.server.as_ref().expect("started with a control server")
    }

    /// A connection to the control server.
    pub fn connect(&self) -> Conn {
        Conn::open(self.server().path())
    }

    /// Stops the control server (which removes its socket), then the switch.
    pub fn finish(self) -> RunOutcome {
        if let Some(s) = self.server {
            s.shutdown();
        }
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap()
    }

    /// Frames the switch will receive on `port`.
    pub fn feed(&self, port: usize, frames: &[Vec<u8>]) {
        self.wires[port]
            .lock()
            .unwrap()
            .to_switch
            .extend(frames.iter().cloned());
    }

    /// What the switch has sent on `port` so far.
    pub fn sent(&self, port: usize) -> Vec<Vec<u8>> {
        self.wires[port].lock().unwrap().from_switch.clone()
    }

    /// Waits up to 20 s for `cond`.
    pub fn wait_for(&self, what: &str, mut cond: impl FnMut(&Running) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !cond(self) {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// A connection to a control socket, speaking the protocol's JSON lines.
pub struct Conn {
    pub reader: BufReader<UnixStream>,
    pub writer: UnixStream,
}

impl Conn {
    pub fn open(path: &Path) -> Conn {
        let s = UnixStream::connect(path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Conn {
            writer: s.try_clone().unwrap(),
            reader: BufReader::new(s),
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
    }

    pub fn send(&mut self, req: &Value) {
        let mut line = req.to_string();
        line.push('\n');
        self.send_raw(line.as_bytes());
    }

    /// The next line from the server.
    pub fn read(&mut self) -> Value {
        let mut line = String::new();
        assert!(
            self.reader.read_line(&mut line).unwrap() > 0,
            "the server closed the connection"
        );
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// Sends `req` and reads its response (the next line, which must answer it).
    pub fn call(&mut self, req: Value) -> Value {
        self.send(&req);
        let r = self.read();
        assert_eq!(r["v"], 1, "{r}");
        assert_eq!(r["id"], req["id"], "{r}");
        r
    }

    /// [`Self::call`] that must succeed: its data.
    pub fn ok(&mut self, req: Value) -> Value {
        let r = self.call(req);
        assert_eq!(r["ok"], true, "{r}");
        r["data"].clone()
    }

    /// [`Self::call`] that must be refused: its error.
    pub fn refused(&mut self, req: Value) -> String {
        let r = self.call(req);
        assert_eq!(r["ok"], false, "{r}");
        assert!(r.get("data").is_none(), "{r}");
        r["error"].as_str().unwrap().to_string()
    }

    /// Pushes of capture `id` until its last one: (direction, bytes, ns) of every frame, the
    /// last push's data. Other responses are left out.
    pub fn collect(&mut self, id: u64) -> (Vec<(String, Vec<u8>, u64)>, Value) {
        let mut frames = Vec::new();
        loop {
            let r = self.read();
            if r["id"] != id {
                continue;
            }
            assert_eq!(r["ok"], true, "{r}");
            let d = r["data"].clone();
            let data: controlplane::protocol::CaptureData = serde_json::from_value(d.clone()).unwrap();
            for f in &data.frames {
                let b = f.bytes().unwrap();
                assert!(b.len() <= f.len as usize);
                frames.push((format!("{:?}", f.dir).to_lowercase(), b, f.ns));
            }
            if data.end.is_some() {
                return (frames, d);
            }
        }
    }
}

/// The `rocectl` binary, built first (it belongs to another package, so Cargo does not hand
/// these tests its path).
pub fn rocectl() -> PathBuf {
    let status = std::process::Command::new(env!("CARGO"))
        .args(["build", "-q", "-p", "rocesw-ctl", "--bin", "rocectl"])
        .current_dir(repo_root())
        .status()
        .unwrap();
    assert!(status.success(), "building rocectl");
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo_root().join("target"), Into::into);
    target.join("debug/rocectl")
}

/// DPDK's runtime directories that process `pid` left behind (its file prefix starts with
/// `rocesw-<pid>-`).
pub fn left_behind(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("rocesw-{pid}-");
    let mut found = Vec::new();
    for base in ["/var/run/dpdk", "/run/dpdk"] {
        if let Ok(dir) = std::fs::read_dir(base) {
            for e in dir.flatten() {
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    found.push(e.path());
                }
            }
        }
    }
    found
}

/// Whether a test that needs what this machine may lack (root, QEMU, docker) should stop here:
/// `missing` says what is missing, if anything. Outside CI the test is skipped, and says why;
/// under CI (`CI` set, as `.ci/run` sets it) a missing piece fails it, so a CI that lost an
/// install step cannot pass by skipping.
pub fn skip_unless_ci_requires(test: &str, missing: Option<&str>) -> bool {
    let Some(why) = missing else { return false };
    assert!(std::env::var_os("CI").is_none(), "CI must run {test}, but: {why}");
    eprintln!("skipped: {why}");
    true
}
