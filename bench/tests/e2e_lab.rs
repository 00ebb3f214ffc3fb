//! End to end over real interfaces: test hosts in network namespaces (`rocesw lab`), the switch
//! running on AF_PACKET ports (`rocesw run`'s code, in this process), RoCEv2 traffic from
//! `rocegen`, and frames checked on the receiving host by an independent decoder (scapy).
//! Needs root (CI runs as root). Every test makes its own lab with a unique name and removes it,
//! also when it fails.

use controlplane::Config;
use dataplane::io::{AfPacket, AfPacketOptions, PortBackend};
use dataplane::runtime::worker::{self, ControlQueue, RunOptions, RunOutcome};
use dataplane::tools::lab::{self, Lab, LabSpec};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

const SPEED: &str = "500M";

struct LabGuard {
    lab: Lab,
    state: tempfile::TempDir,
    /// One lab at a time: the switch, the generator and the hosts share two cores, and two
    /// incasts at once would measure the machine, not the switch.
    _serial: std::sync::MutexGuard<'static, ()>,
}

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Drop for LabGuard {
    fn drop(&mut self) {
        let _ = lab::down(&self.lab.name, self.state.path());
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn lab_up(hosts: usize) -> LabGuard {
    lab_up_from(hosts, "configs/default.toml")
}

/// A lab of `hosts` hosts whose switch config starts from `base` (a path in the repository).
fn lab_up_from(hosts: usize, base: &str) -> LabGuard {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    lab::require_root().expect("the end-to-end tests need root: run them as root (CI does)");
    static N: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "e{:x}{}",
        std::process::id() % 0xffff,
        N.fetch_add(1, Ordering::Relaxed)
    );
    let state = tempfile::tempdir().unwrap();
    let spec = LabSpec {
        name,
        hosts,
        speed: SPEED.into(),
        // A config_db.json's own MTU (9100), the default profile's 1500.
        mtu: None,
    };
    let lab = lab::up(&spec, Some(&repo().join(base)), state.path()).expect("lab up");
    LabGuard {
        lab,
        state,
        _serial: serial,
    }
}

struct Switch {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<RunOutcome>>,
}

impl Switch {
    fn start(cfg: Config) -> Switch {
        Switch::start_with(cfg, None)
    }

    /// With the control queue a `ControlServer` feeds, as `rocesw run` has.
    fn start_with(cfg: Config, control: Option<Arc<ControlQueue>>) -> Switch {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        // Traffic starts once every port is open and the switch polls (`RunOptions::ready`,
        // where `rocesw run` prints its "switching" line), as the README's lab says: opening the
        // rings took over 200 ms on a loaded machine, and a frame sent before its port's socket
        // exists is lost where nothing counts it.
        let running = Arc::new(AtomicBool::new(false));
        let r = running.clone();
        let handle = std::thread::spawn(move || {
            let opts = RunOptions {
                ready: Some(Box::new(move || r.store(true, Ordering::Release))),
                seed: 1,
                control,
                open: Box::new(|p| {
                    let port = AfPacket::open(p.interface.as_deref().unwrap(), AfPacketOptions::for_port(p))?;
                    Ok(Box::new(port) as Box<dyn PortBackend + Send>)
                }),
            };
            worker::run(&cfg, opts, s, None).expect("switch runs")
        });
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !running.load(Ordering::Acquire) && !handle.is_finished() {
            assert!(
                std::time::Instant::now() < deadline,
                "the switch did not start polling in 30 s"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Switch {
            stop,
            handle: Some(handle),
        }
    }

    fn stop(mut self) -> RunOutcome {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().unwrap().join().expect("switch thread")
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn config(g: &LabGuard) -> Config {
    controlplane::load_file(&g.lab.config_path)
        .expect("lab config loads")
        .config
}

/// The lab config with `from` replaced by `to` in its text (a test's own tuning).
fn config_with(g: &LabGuard, from: &str, to: &str) -> Config {
    let text = std::fs::read_to_string(&g.lab.config_path).unwrap();
    assert!(text.contains(from), "the lab config has no {from:?}");
    controlplane::load_str(&text.replace(from, to))
        .expect("tuned lab config loads")
        .config
}

fn rocegen() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rocegen"))
}

/// `rocegen coordinate --pattern incast` over the lab at 300 Mb/s per sender for `secs`, with
/// `extra` options, as a command (`--json` report on stdout).
fn incast(g: &LabGuard, secs: &str, extra: &[&str]) -> Command {
    incast_at(g, "300M", secs, extra)
}

/// [`incast`] at `rate` per sender.
fn incast_at(g: &LabGuard, rate: &str, secs: &str, extra: &[&str]) -> Command {
    let mut c = rocegen();
    c.args(["coordinate", "--pattern", "incast", "--lab"])
        .arg(lab_json(g))
        .args(["--rate", rate, "--link-speed", SPEED, "--duration", secs, "--json"])
        .args(extra);
    c
}

fn json_of(out: std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "rocegen failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("rocegen JSON: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn lab_json(g: &LabGuard) -> PathBuf {
    g.state.path().join(format!("{}.json", g.lab.name))
}

fn port_drops(o: &RunOutcome, id: u16, reason: &str) -> u64 {
    o.snapshot.ports.iter().find(|p| p.id == id).unwrap().drops.get(reason)
}

/// 3→1 lossless incast through a 500 Mb/s port: nothing lost end to end, PFC reaches the
/// senders, CE marks and CNPs appear.
/// For a loss report: what the switch dropped and what its ports' kernel rings dropped (the
/// latter means the worker did not poll for a long while: CPU starvation, not the pipeline).
fn where_lost(o: &dataplane::runtime::worker::RunOutcome) -> String {
    let ports: Vec<String> = o
        .snapshot
        .ports
        .iter()
        .map(|p| {
            let pg = &p.pgs[3];
            format!(
                "port {}: drops {:?}, PG 3 peak {} cells (headroom peak {}, in headroom at the end {}), xoff {} xon {}, peer {:?}",
                p.id,
                p.drops,
                pg.peak_cells,
                pg.peak_headroom_cells,
                pg.headroom_cells,
                pg.xoff_sent,
                pg.xon_sent,
                p.peer
            )
        })
        .collect();
    format!(
        "switch drops: {:?}; tx_dropped: {}; undrained: {}; emulated links at most {} ms behind real time; port backends: {:?}\n{}",
        o.snapshot.totals.drops,
        o.tx_dropped,
        o.undrained,
        o.wires_behind_ns / 1_000_000,
        o.backends,
        ports.join("\n")
    )
}

#[test]
fn lossless_incast_loses_nothing_with_pfc_ecn_and_cnps() {
    let g = lab_up(4);
    // PG 3 may take 1/32 of the free pool instead of 1/8: XOFF at about 470 cells per sender's
    // PG rather than about 1490. With the emulated links pacing the hosts evenly, DCQCN alone
    // kept every PG under the profile's XOFF point in some runs (peaks of 1225–1415 cells, no
    // PFC); the queue those PGs feed still passes Kmin (100 KB), so marks and CNPs still come.
    let sw = Switch::start(config_with(&g, "alpha = \"1/8\"", "alpha = \"1/32\""));
    // Every sender at line rate: three times what the receiver's port carries, so DCQCN's
    // first cuts still leave it oversubscribed and PFC has to act.
    let report = json_of(incast_at(&g, SPEED, "1.5", &["--burst-us", "50"]).output().unwrap());
    let o = sw.stop();
    let t = &report["totals"];
    assert_eq!(t["lost"], 0, "lossless traffic lost: {t}\n{}", where_lost(&o));
    assert_eq!(t["bad_icrc"], 0);
    assert_eq!(t["out_of_order"], 0);
    assert!(t["rx_packets"].as_u64().unwrap() > 10_000, "{t}");
    assert!(t["ce"].as_u64().unwrap() > 0, "no CE marks: {t}");
    assert!(t["cnps_received"].as_u64().unwrap() > 0, "no CNPs: {t}");
    assert!(t["pfc_frames"].as_u64().unwrap() > 0, "no PFC reached the senders: {t}");
    assert_eq!(
        o.snapshot.totals.drops.total(),
        0,
        "switch drops: {:?}",
        o.snapshot.totals.drops
    );
    // PFC went out from the switch toward the senders. Not necessarily from every sender's
    // port: DCQCN slows the senders unevenly (whoever gets more CNPs backs off more), and in
    // about half the runs on this 2-core machine one sender's PG 3 peaked a little below XOFF
    // (~780 cells) while the others paused. Requiring all three tested the CNP lottery, not
    // the switch.
    let per_port: Vec<u64> = (1..4).map(|i| o.snapshot.ports[i].pfc_tx[3]).collect();
    assert!(
        per_port.iter().sum::<u64>() > 0,
        "no sender port sent PFC: pfc_tx of ports 1-3 {per_port:?}; PG 3 peaks {:?} cells",
        (1..4)
            .map(|i| o.snapshot.ports[i].pgs[3].peak_cells)
            .collect::<Vec<_>>()
    );
    assert!(o.snapshot.ports[0].ecn_marked > 0);
    assert_eq!(o.undrained, 0);
}

/// Issue 37: a production switch's config_db.json (the project's Spectrum-1 and Tomahawk 2
/// T1 configs: AZURE maps, lossless PGs 3-4, their pools and buffer profiles) runs the lab's
/// traffic on its own ports: a 3→1 incast on DSCP 3, AZURE's lossless class, loses nothing,
/// and the frames were where the file puts them (PG 3, queue 3). Issue 49 item 2: rocegen
/// takes DSCP 3 and the file's priority map from the lab file by itself (it sent DSCP 26, TC 1
/// in AZURE, a lossy queue, and the README's incast lost 429,918 frames), and the ports run at
/// the file's MTU, 9100.
#[test]
fn a_sonic_config_runs_the_lab_incast_without_loss() {
    for file in ["configs/sonic/spectrum1-t1.json", "configs/sonic/tomahawk2-t1.json"] {
        let g = lab_up_from(4, file);
        let cfg = config(&g);
        let names: Vec<_> = cfg.ports.iter().map(|p| p.name.clone().unwrap_or_default()).collect();
        assert_eq!(names, ["Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12"], "{file}");
        assert!(cfg.ports.iter().all(|p| p.max_frame_bytes == 9100 + 18), "{file}");
        let sw = Switch::start(cfg);
        let report = json_of(incast_at(&g, SPEED, "1.5", &["--burst-us", "50"]).output().unwrap());
        let o = sw.stop();
        assert_eq!(
            (&report["config"]["dscp"], &report["config"]["priority"]),
            (&Value::from(3), &Value::from(3)),
            "{file}: the lab's lossless DSCP by default"
        );
        let t = &report["totals"];
        assert_eq!(t["lost"], 0, "{file}: lossless traffic lost: {t}\n{}", where_lost(&o));
        assert_eq!(t["bad_icrc"], 0, "{file}");
        assert_eq!(t["out_of_order"], 0, "{file}");
        assert!(t["rx_packets"].as_u64().unwrap() > 10_000, "{file}: {t}");
        assert_eq!(
            o.snapshot.totals.drops.total(),
            0,
            "{file}: switch drops: {}",
            where_lost(&o)
        );
        let pg3: u64 = o.snapshot.ports[1..4].iter().map(|p| p.pgs[3].rx_packets).sum();
        assert!(pg3 > 10_000, "{file}: the incast did not arrive in PG 3: {pg3} frames");
        let q3 = o.snapshot.ports[0].queues[3].tx_packets;
        assert!(q3 > 10_000, "{file}: the incast did not leave by queue 3: {q3} frames");
        assert_eq!(o.undrained, 0, "{file}");
    }
}

/// Busy loops that keep every core occupied while a test runs, so the switch and the hosts
/// are descheduled for whole time slices (issue 9: the lab incast lost lossless frames in 6 of
/// 9 runs on a loaded 2-core machine). Killed, by their own ids, when dropped.
struct BusyCores(Vec<Child>);

impl BusyCores {
    fn start(n: usize) -> BusyCores {
        BusyCores(
            (0..n)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .expect("busy loop")
                })
                .collect(),
        )
    }
}

impl Drop for BusyCores {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `senders`→1 lossless incast on `senders + 1` hosts, `runs` runs of `secs` seconds each, with
/// both cores kept busy by other processes: every run loses no lossless frame at the receiver,
/// the switch drops nothing on any PG, PFC is sent by the switch and still reaches (and is
/// counted by) the rocegen senders, and the emulated peers report what they held.
fn loaded_incast_loses_nothing(senders: usize, runs: usize, secs: f64) {
    loaded_incast_on_workers_loses_nothing(senders, runs, secs, 1);
}

fn loaded_incast_on_workers_loses_nothing(senders: usize, runs: usize, secs: f64, workers: usize) {
    let g = lab_up(senders + 1);
    let _busy = BusyCores::start(std::thread::available_parallelism().map_or(2, |n| n.get()));
    for run in 0..runs {
        // PG 3's alpha lowered to 1/32, as in the unloaded incast test: with the lab's 1/8 the
        // senders' DCQCN alone kept every PG under XOFF in some runs (a CI 3→1 run peaked at
        // 1195 cells against about 1490 and sent no PFC), and a run without PFC does not test
        // what it is here for: pausing and resuming hosts on busy cores without losing a frame.
        let mut cfg = config_with(&g, "alpha = \"1/8\"", "alpha = \"1/32\"");
        // Ports round robin over the workers: the receiver's port and the senders' ports are
        // on different workers, so most frames cross between shards.
        cfg.run.workers = workers;
        for (i, p) in cfg.ports.iter_mut().enumerate() {
            p.worker = i % workers;
        }
        let sw = Switch::start(cfg);
        // Receivers listen 2 s after the senders stop (not rocegen's 0.2 s): on busy cores a
        // frame may spend a few hundred ms in the emulated peers and a descheduled switch, and
        // a frame that arrives late is delayed, not lost.
        let report = json_of(incast(&g, &secs.to_string(), &["--drain", "2"]).output().unwrap());
        let o = sw.stop();
        let t = &report["totals"];
        assert_eq!(
            t["lost"],
            0,
            "run {run}: lossless traffic lost: {t}\n{}",
            where_lost(&o)
        );
        assert_eq!(t["out_of_order"], 0, "run {run}: {t}");
        assert!(t["rx_packets"].as_u64().unwrap() > 1_000, "run {run}: {t}");
        assert_eq!(
            o.snapshot.totals.drops.total(),
            0,
            "run {run}: switch drops: {}\nrocegen: {t}",
            where_lost(&o)
        );
        assert!(
            o.snapshot
                .ports
                .iter()
                .all(|p| p.pgs.iter().all(|pg| pg.dropped_packets == 0)),
            "run {run}: a PG dropped"
        );
        let pfc_tx: u64 = o.snapshot.ports[1..].iter().map(|p| p.pfc_tx[3]).sum();
        assert!(pfc_tx > 0, "run {run}: the switch sent no PFC: {t}\n{}", where_lost(&o));
        assert!(
            t["pfc_frames"].as_u64().unwrap() > 0,
            "run {run}: no PFC reached the rocegen senders: {t}"
        );
        let held: u64 = o
            .snapshot
            .ports
            .iter()
            .filter_map(|p| p.peer)
            .map(|p| p.held_frames[3])
            .sum();
        assert!(
            o.snapshot.ports.iter().all(|p| p.peer.is_some()),
            "every lab port has an emulated peer"
        );
        eprintln!(
            "run {run}: {senders}->1 rx {} frames, lost 0, PFC sent {pfc_tx}, received by senders {}, \
             frames held by emulated peers {held}, p99 {} us, links at most {} ms behind",
            t["rx_packets"],
            t["pfc_frames"],
            t["latency"]["p99_ns"].as_u64().unwrap_or(0) / 1000,
            o.wires_behind_ns / 1_000_000
        );
    }
}

// Issue 9's acceptance tests: the lab's own config (interfaces are emulated links, headroom
// "auto") with PG 3's alpha at 1/32 so PFC acts in every run, both cores busy, 5 runs of 3 s
// each.
#[test]
fn loaded_3_to_1_incast_loses_nothing() {
    loaded_incast_loses_nothing(3, 5, 3.0);
}

#[test]
fn loaded_7_to_1_incast_loses_nothing() {
    loaded_incast_loses_nothing(7, 5, 3.0);
}

/// The loaded 3→1 incast on two workers (the switch's shards and the busy loops share the two
/// cores): nothing lost, PFC sent by the ingress shards and obeyed.
#[test]
fn loaded_3_to_1_incast_on_two_workers_loses_nothing() {
    loaded_incast_on_workers_loses_nothing(3, 3, 3.0, 2);
}

/// The same congestion with lossy traffic (DSCP 0): the switch drops at the egress limit and
/// counts it; the receivers see the loss.
#[test]
fn lossy_incast_drops_and_counts() {
    let g = lab_up(4);
    let sw = Switch::start(config(&g));
    let report = json_of(incast(&g, "1.5", &["--dscp", "0", "--no-dcqcn"]).output().unwrap());
    let o = sw.stop();
    let lost = report["totals"]["lost"].as_u64().unwrap();
    let dropped = port_drops(&o, 0, "egress_limit");
    assert!(dropped > 0, "no egress-limit drops: {:?}", o.snapshot.totals.drops);
    assert!(lost > 0, "receivers saw no loss");
    assert_eq!(o.snapshot.totals.drops.get("headroom_overflow"), 0);
    assert!(
        o.snapshot.ports.iter().all(|p| p.pfc_tx.iter().all(|&n| n == 0)),
        "lossy traffic never triggers PFC"
    );
}

fn host_args(g: &LabGuard, i: usize) -> Vec<String> {
    let h = &g.lab.hosts[i];
    vec!["--netns".into(), h.netns.clone(), "--iface".into(), h.host_if.clone()]
}

fn sender(g: &LabGuard, from: usize, to: usize, dscp: &str) -> Child {
    let d = &g.lab.hosts[to];
    rocegen()
        .arg("send")
        .args(host_args(g, from))
        .args([
            "--src-ip",
            &g.lab.hosts[from].ipv4.to_string(),
            "--dst-ip",
            &d.ipv4.to_string(),
        ])
        .args([
            "--dst-mac",
            &d.mac_string(),
            "--dscp",
            dscp,
            "--rate",
            "50M",
            "--duration",
            "0.8",
        ])
        .args(["--link-speed", SPEED, "--no-dcqcn", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A python raw socket inside a host's namespace (no project code on the sending side) that,
/// once triggered, sends `xoff` `times` times, `every_s` apart, then `xon`. It starts before the
/// traffic and waits for its trigger on stdin, so the interpreter's start-up (slow on a loaded
/// runner) does not shift the pause out of the traffic. Refreshing the XOFF holds the pause
/// longer than one frame's quanta allows, so a scheduling stall of the machine (tens of ms on a
/// loaded 2-core runner) stays small against the pause being measured.
struct PauseInjector(Child);

impl PauseInjector {
    fn spawn(g: &LabGuard, host: usize, xoff: &[u8], times: u32, every_s: f64, xon: &[u8]) -> Self {
        let h = &g.lab.hosts[host];
        let hex = |f: &[u8]| f.iter().map(|b| format!("{b:02x}")).collect::<String>();
        let script = format!(
            "import socket, sys, time\n\
             s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); s.bind(('{}', 0))\n\
             xoff = bytes.fromhex('{}'); xon = bytes.fromhex('{}')\n\
             print('ready', flush=True); sys.stdin.readline()\n\
             t0 = time.monotonic()\n\
             for i in range({times}):\n    s.send(xoff)\n    \
             time.sleep(max(0.0, t0 + (i + 1) * {every_s} - time.monotonic()))\n\
             s.send(xon)\n",
            h.host_if,
            hex(xoff),
            hex(xon)
        );
        let mut child = Command::new("ip")
            .args(["netns", "exec", &h.netns, "python3", "-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready", "pause injector did not start");
        PauseInjector(child)
    }

    /// Starts the pause sequence and waits until the XON has been sent.
    fn fire(mut self) {
        self.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
        assert!(self.0.wait().unwrap().success());
    }
}

/// A host that sends XOFF for priority 3 stops the lossless queue toward it, not the lossy one.
#[test]
fn received_xoff_stops_the_lossless_queue_only() {
    let g = lab_up(3);
    let sw = Switch::start(config(&g));
    // XOFF for priority 3 with maximum quanta (67 ms at 500 Mb/s), refreshed every 25 ms six
    // times, then XON: 150 ms of pause, under the watchdog's 200 ms detection time.
    let mut xoff = [0u8; 64];
    let n = dataplane::wire::encode_pfc(&mut xoff, g.lab.hosts[2].mac, 1 << 3, [0, 0, 0, 65535, 0, 0, 0, 0]);
    let mut xon = [0u8; 64];
    let m = dataplane::wire::encode_pfc(&mut xon, g.lab.hosts[2].mac, 1 << 3, [0; 8]);
    let injector = PauseInjector::spawn(&g, 2, &xoff[..n], 6, 0.025, &xon[..m]);
    let recv = rocegen()
        .arg("recv")
        .args(host_args(&g, 2))
        .args(["--duration", "1.6", "--no-dcqcn", "--link-speed", SPEED, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let lossless = sender(&g, 0, 2, "26");
    let lossy = sender(&g, 1, 2, "0");
    std::thread::sleep(Duration::from_millis(300));
    injector.fire();
    let _ = json_of(lossless.wait_with_output().unwrap());
    let _ = json_of(lossy.wait_with_output().unwrap());
    let report = json_of(recv.wait_with_output().unwrap());
    let o = sw.stop();

    let rx = &o.snapshot.ports[2];
    assert_eq!(rx.pfc_rx[3], 7, "six XOFFs and an XON received");
    let paused_ms = rx.paused_ns[3] as f64 / 1e6;
    assert!((110.0..220.0).contains(&paused_ms), "priority 3 paused {paused_ms} ms");
    assert_eq!(rx.paused_ns[0], 0, "priority 0 never paused");
    let flows = report["flows"].as_array().unwrap();
    let gap = |src: usize| {
        let ip = g.lab.hosts[src].ipv4.to_string();
        let f = flows
            .iter()
            .find(|f| f["src"].as_str().unwrap_or_default().starts_with(&ip))
            .expect("flow present");
        assert_eq!(f["rx"]["lost"], 0, "{f}");
        f["rx"]["max_gap_ns"].as_u64().unwrap() as f64 / 1e6
    };
    let (g_lossless, g_lossy) = (gap(0), gap(1));
    eprintln!("paused {paused_ms:.1} ms; longest gaps: lossless {g_lossless:.1} ms, lossy {g_lossy:.1} ms");
    assert!(
        g_lossless >= 110.0,
        "lossless flow did not stop: longest gap {g_lossless} ms"
    );
    assert!(
        g_lossy < g_lossless / 2.0,
        "lossy flow stopped too: gaps {g_lossy} vs {g_lossless} ms"
    );
    assert_eq!(o.snapshot.totals.drops.total(), 0, "{:?}", o.snapshot.totals.drops);
}

/// Frames captured on the receiving host, decoded by scapy: every RoCEv2 frame's ICRC and
/// IPv4 checksum valid after crossing the switch.
#[test]
fn frames_cross_the_switch_intact_for_an_independent_decoder() {
    let g = lab_up(2);
    let sw = Switch::start(config(&g));
    let pcap = g.state.path().join("rx.pcap");
    let h1 = &g.lab.hosts[1];
    let mut cap = Command::new("ip")
        .args([
            "netns",
            "exec",
            &h1.netns,
            "tshark",
            "-q",
            "-F",
            "pcap",
            "-i",
            &h1.host_if,
            "-a",
            "duration:30",
        ])
        .args(["-f", "udp port 4791", "-w"])
        .arg(&pcap)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tshark (run .ci/install-deps)");
    // tshark writes the file header once it is capturing.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while std::fs::metadata(&pcap).map_or(true, |m| m.len() < 24) {
        assert!(std::time::Instant::now() < deadline, "tshark did not start capturing");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let s = sender(&g, 0, 1, "26");
    let sent = json_of(s.wait_with_output().unwrap());
    std::thread::sleep(Duration::from_millis(300));
    // SIGINT: tshark flushes the capture and exits.
    // SAFETY: kill(2) with a pid and a signal number touches no memory of this process; `cap`
    // is our child, not yet waited for, so its pid cannot have been reused.
    unsafe { libc::kill(cap.id() as i32, libc::SIGINT) };
    let _ = cap.wait();
    let _ = sw.stop();
    let out = Command::new("python3")
        .arg(repo().join("dataplane/tests/oracle/check_pcap.py"))
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = &r["files"][0];
    let tx = sent["totals"]["tx_packets"].as_u64().unwrap();
    assert!(
        f["roce"].as_u64().unwrap() >= tx * 9 / 10,
        "captured {} of {tx}",
        f["roce"]
    );
    assert_eq!(f["icrc_bad"], 0);
    assert_eq!(f["ipv4_csum_bad"], 0);
    assert_eq!(f["bad"].as_array().unwrap().len(), 0, "{}", f["bad"]);
}

/// Live tuning on the lab: a lossless 3→1 incast runs while the control plane changes the
/// config through the real control socket every 50 ms (PG alpha back and forth, ECN curve).
/// First with the curve above any depth the queue reaches, then with Kmax lowered to a few KB:
/// the CE fraction on the congested port rises from then on; every change is acknowledged,
/// nothing is lost end to end, and the buffer is empty at the end (no cell leaked).
#[test]
fn live_changes_under_congestion_lose_nothing_and_lower_kmax_marks_more() {
    use controlplane::protocol::{Client, Op};
    let g = lab_up(4);
    let text = std::fs::read_to_string(&g.lab.config_path).unwrap();
    let queue: Arc<ControlQueue> = Arc::new(crossbeam_queue::ArrayQueue::new(16));
    let socket = g.state.path().join("ctl.sock");
    let server =
        dataplane::runtime::control_server::ControlServer::spawn(&socket, text.clone(), queue.clone()).unwrap();
    let sw = Switch::start_with(config(&g), Some(queue));
    let variant = |kmin: &str, kmax: &str, pmax: f64, alpha: &str| {
        let mut t: toml::Table = text.parse().unwrap();
        let ecn = t["ecn"]["roce"].as_table().unwrap().clone();
        let mut ecn = ecn;
        ecn.insert("kmin".into(), kmin.into());
        ecn.insert("kmax".into(), kmax.into());
        ecn.insert("pmax".into(), pmax.into());
        t["ecn"].as_table_mut().unwrap().insert("roce".into(), ecn.into());
        t["pg"]["3"]
            .as_table_mut()
            .unwrap()
            .insert("alpha".into(), alpha.into());
        toml::to_string(&t).unwrap()
    };
    // Above what the queue can hold (the shared pool is about 2.6 MB) versus a few KB.
    let high = [variant("3MB", "3.5MB", 1.0, "1/8"), variant("3MB", "3.4MB", 1.0, "1/4")];
    let low = [variant("1KB", "2KB", 1.0, "1/8"), variant("1KB", "2KB", 1.0, "1/4")];
    let mut c = Client::connect(&socket).unwrap();
    c.set_timeout(Some(Duration::from_secs(10))).unwrap();
    c.call(Op::Apply {
        toml: high[0].clone(),
        if_version: None,
    })
    .expect("first change");

    let gen = incast(&g, "3.2", &["--burst-us", "50", "--no-dcqcn"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let port0 = |c: &mut Client| {
        let s = c.call(Op::Counters).unwrap();
        let p = &s["ports"][0];
        (p["tx_packets"].as_u64().unwrap(), p["ecn_marked"].as_u64().unwrap())
    };
    std::thread::sleep(Duration::from_millis(700));
    let mut changes = 0;
    let mut phase = |c: &mut Client, configs: &[String; 2]| {
        let (tx0, ce0) = port0(c);
        let t0 = std::time::Instant::now();
        let mut i = 0;
        while t0.elapsed() < Duration::from_millis(1000) {
            c.call(Op::Apply {
                toml: configs[i % 2].clone(),
                if_version: None,
            })
            .expect("every change is acknowledged");
            i += 1;
            std::thread::sleep(Duration::from_millis(50));
        }
        changes += i;
        let (tx1, ce1) = port0(c);
        assert!(
            tx1 - tx0 > 1000,
            "traffic flowed during the phase ({} frames)",
            tx1 - tx0
        );
        (ce1 - ce0) as f64 / (tx1 - tx0) as f64
    };
    let frac_high = phase(&mut c, &high);
    let frac_low = phase(&mut c, &low);
    let report = json_of(gen.wait_with_output().unwrap());
    drop(c);
    let o = sw.stop();
    server.shutdown();
    eprintln!("{changes} changes; CE fraction on port 0: {frac_high:.3} with Kmax high, {frac_low:.3} with Kmax low");

    assert!(changes >= 20, "{changes} changes");
    assert!(
        frac_high < 0.05,
        "the curve above the queue marks (almost) nothing: {frac_high:.3}"
    );
    assert!(
        frac_low > 0.5,
        "Kmax lowered under congestion marks most frames: {frac_low:.3}"
    );
    let t = &report["totals"];
    assert_eq!(
        t["lost"],
        0,
        "lossless traffic lost during live changes: {t}\n{}",
        where_lost(&o)
    );
    assert_eq!(t["out_of_order"], 0);
    assert_eq!(o.snapshot.totals.drops.total(), 0, "{:?}", o.snapshot.totals.drops);
    assert_eq!(o.undrained, 0);
    assert_eq!(o.snapshot.buffer.used_cells, 0, "cells leaked: {:?}", o.snapshot.buffer);
}

/// The lab config with the receiver's port (the lab's first) transmitting or not (`tx`), as
/// TOML text for the control socket.
fn with_port0_tx(text: &str, on: bool) -> String {
    let mut t: toml::Table = text.parse().unwrap();
    let ports = t["port"].as_array_mut().unwrap();
    ports[0]
        .as_table_mut()
        .unwrap()
        .insert("tx".into(), if on { "on" } else { "off" }.into());
    toml::to_string(&t).unwrap()
}

/// Issue 49 item 9: on a loaded 2-core machine a 3→1 lab incast reported frames "sent, never
/// arrived" with no sequence gap and no switch drop: the receiver stopped (0.2 s after the
/// senders) before the paused tail drained. Here the receiver's port stops transmitting
/// (`tx = "off"`, through the control socket) during the incast and starts again 1.2 s after
/// the senders stop, so the tail is still held when they stop: the receivers wait for it (by
/// default at most 2 s) and account for every frame, and the report says how long they waited.
/// With a bound shorter than the hold (`--drain 0.3`), they stop at the bound and report the
/// held frames as in flight, not lost.
#[test]
fn receivers_wait_for_a_paused_tail_and_say_so() {
    use controlplane::protocol::{Client, Op};
    let g = lab_up(3);
    let text = std::fs::read_to_string(&g.lab.config_path).unwrap();
    let queue: Arc<ControlQueue> = Arc::new(crossbeam_queue::ArrayQueue::new(16));
    let socket = g.state.path().join("ctl.sock");
    let server =
        dataplane::runtime::control_server::ControlServer::spawn(&socket, text.clone(), queue.clone()).unwrap();
    let sw = Switch::start_with(config(&g), Some(queue));
    let mut c = Client::connect(&socket).unwrap();
    c.set_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut apply = |toml: String| {
        c.call(Op::Apply { toml, if_version: None })
            .expect("the change is acknowledged")
    };
    // `hold_s`: how long after the senders' nominal stop the port starts again.
    let mut run = |extra: &[&str], hold_s: f64| {
        let mut args = vec!["--no-dcqcn"];
        args.extend_from_slice(extra);
        let gen = incast_at(&g, "100M", "1", &args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        std::thread::sleep(Duration::from_millis(600));
        apply(with_port0_tx(&text, false));
        // The senders stop about 1 s (and the start-up) after the spawn.
        std::thread::sleep(Duration::from_secs_f64(1.0 + hold_s).saturating_sub(t0.elapsed()));
        apply(with_port0_tx(&text, true));
        json_of(gen.wait_with_output().unwrap())
    };

    let waited = run(&[], 1.2);
    let (t, d) = (&waited["totals"], &waited["drain"]);
    assert_eq!(t["lost"], 0, "{t}");
    assert_eq!(
        t["in_flight_at_end"], 0,
        "the receivers waited for the held tail: {t}\n{d}"
    );
    assert_eq!(d["drained"], true, "{d}");
    // Longer than the 0.2 s the receivers listened before, within the 2 s bound (the hold
    // is about 1.2 s after the senders' stop, less their start-up, a few ms here).
    let w = d["waited_s"].as_f64().unwrap();
    assert!(
        (0.25..2.0).contains(&w),
        "waited {w} s for a tail held about 1.2 s: {d}"
    );
    assert!(t["rx_packets"].as_u64().unwrap() > 1_000, "{t}");

    eprintln!(
        "tail held 1.2 s: waited {w:.3} s, drained, {} frames received, in flight 0",
        t["rx_packets"]
    );
    let bounded = run(&["--drain", "0.3"], 1.5);
    let (t, d) = (&bounded["totals"], &bounded["drain"]);
    assert_eq!(d["drained"], false, "{d}");
    assert_eq!(t["lost"], 0, "held frames are not lost: {t}");
    assert!(t["in_flight_at_end"].as_u64().unwrap() > 0, "{t}");
    assert_eq!(d["unaccounted"], t["in_flight_at_end"], "{d}\n{t}");
    let w = d["waited_s"].as_f64().unwrap();
    assert!((0.25..0.8).contains(&w), "stopped at the 0.3 s bound: {d}");
    eprintln!(
        "tail held 1.5 s, --drain 0.3: waited {w:.3} s, not drained, {} in flight, lost 0",
        t["in_flight_at_end"]
    );

    drop(c);
    let o = sw.stop();
    server.shutdown();
    assert_eq!(o.snapshot.totals.drops.total(), 0, "{}", where_lost(&o));
}
