//! rocegen end to end on veth pairs in namespaces of its own (root), and DCQCN as pure
//! functions (anyone).
//!
//! Each network test makes uniquely named namespaces (the pid in every name) and removes them
//! in a Drop guard; they run one at a time (a lock) so the two shared cores pace one run.

use dataplane::wire::build::RoceFrameBuilder;
use dataplane::wire::pfc::{encode_pfc, quanta_to_ns};
use dataplane::wire::{parse, verify_icrc, Ecn};
use rocesw_bench::rocegen::dcqcn::{CnpPacer, Dcqcn, DcqcnParams, Increase};
use rocesw_bench::rocegen::host::{run_host, HostResult, HostRole, HostSpec, Start};
use rocesw_bench::rocegen::receiver::Receiver;
use rocesw_bench::rocegen::report::Report;
use rocesw_bench::rocegen::sender::{Dest, TrafficConfig};
use rocesw_bench::rocegen::wire::{enter_netns, is_root, now_ns, RawSocket};
use rocesw_bench::rocegen::{parse_mac, PayloadHeader};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

static NET: Mutex<()> = Mutex::new(());

fn require_root() {
    assert!(
        is_root(),
        "the rocegen network tests need root (ip netns, veth, AF_PACKET sockets); run them as root"
    );
}

fn sh(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("running {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Namespaces this test made; deleted (with every veth and bridge in them) on drop.
struct Lab {
    netns: Vec<String>,
}

impl Lab {
    fn new() -> Lab {
        Lab { netns: Vec::new() }
    }

    fn ns(&mut self, name: String) -> String {
        sh(&["ip", "netns", "add", &name]);
        self.netns.push(name.clone());
        name
    }

    /// A veth pair `a`@`ns_a` — `b`@`ns_b`, both up.
    fn veth(&self, a: &str, ns_a: &str, b: &str, ns_b: &str) {
        sh(&["ip", "link", "add", a, "type", "veth", "peer", "name", b]);
        sh(&["ip", "link", "set", a, "netns", ns_a]);
        sh(&["ip", "link", "set", b, "netns", ns_b]);
        sh(&["ip", "-n", ns_a, "link", "set", a, "up"]);
        sh(&["ip", "-n", ns_b, "link", "set", b, "up"]);
    }

    fn mac(&self, ns: &str, iface: &str) -> [u8; 6] {
        let out = Command::new("ip")
            .args(["netns", "exec", ns, "cat", &format!("/sys/class/net/{iface}/address")])
            .output()
            .expect("ip netns exec");
        parse_mac(String::from_utf8_lossy(&out.stdout).trim()).expect("a MAC address")
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in self.netns.iter().rev() {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// Two namespaces joined by one veth pair: (lab, ns A, iface A, ns B, iface B, MAC of B).
fn pair(tag: &str) -> (Lab, String, String, String, String, [u8; 6]) {
    let pid = std::process::id();
    let mut lab = Lab::new();
    let a = lab.ns(format!("rg{tag}a{pid}"));
    let b = lab.ns(format!("rg{tag}b{pid}"));
    let (ia, ib) = (format!("rg{tag}a{pid}"), format!("rg{tag}b{pid}"));
    lab.veth(&ia, &a, &ib, &b);
    let mac = lab.mac(&b, &ib);
    (lab, a, ia, b, ib, mac)
}

const IP_A: [u8; 4] = [10, 77, 0, 1];
const IP_B: [u8; 4] = [10, 77, 0, 2];

/// Runs a receiver on B and a sender A → B; returns (sender, receiver) results.
fn send_recv(
    cfg: &TrafficConfig,
    a: &str,
    ia: &str,
    b: &str,
    ib: &str,
    mac_b: [u8; 6],
    during: impl FnOnce(),
) -> (HostResult, HostResult) {
    let rcfg = TrafficConfig {
        duration_ns: cfg.duration_ns + 600_000_000,
        ..cfg.clone()
    };
    let rspec = HostSpec {
        name: b.into(),
        netns: Some(b.into()),
        iface: ib.into(),
        mac: None,
        ip: IP_B,
    };
    let rx = std::thread::spawn(move || {
        run_host(
            rspec,
            HostRole {
                dests: vec![],
                receive: true,
            },
            rcfg,
            Start::Now { drain_ns: 0 },
        )
    });
    std::thread::sleep(Duration::from_millis(100));
    let sspec = HostSpec {
        name: a.into(),
        netns: Some(a.into()),
        iface: ia.into(),
        mac: None,
        ip: IP_A,
    };
    let scfg = cfg.clone();
    let tx = std::thread::spawn(move || {
        run_host(
            sspec,
            HostRole {
                dests: vec![Dest { mac: mac_b, ip: IP_B }],
                receive: false,
            },
            scfg,
            Start::Now { drain_ns: 0 },
        )
    });
    during();
    let s = tx.join().expect("sender thread").expect("sender runs");
    let r = rx.join().expect("receiver thread").expect("receiver runs");
    (s, r)
}

#[test]
fn send_recv_two_qps_at_200mbps() {
    require_root();
    let _g = NET.lock().unwrap_or_else(|e| e.into_inner());
    let (_lab, a, ia, b, ib, mac_b) = pair("s");
    let cfg = TrafficConfig {
        rate_bps: 200_000_000,
        qps: 2,
        duration_ns: 500_000_000,
        // Rides out a few ms of being descheduled on busy shared cores.
        burst_ns: 5_000_000,
        ..TrafficConfig::default()
    };
    let (s, r) = send_recv(&cfg, &a, &ia, &b, &ib, mac_b, || {});
    let report = Report::build("test", None, &cfg, &[s, r]);
    let json = report.to_json();
    assert_eq!(report.flows.len(), 2, "{json}");
    let mut total = 0.0;
    let mut late_ns = 0u64;
    for f in &report.flows {
        let tx = f.tx.as_ref().expect("sender side");
        late_ns = late_ns.max(tx.late_ns);
        let rx =
            f.rx.as_ref()
                .unwrap_or_else(|| panic!("flow QP {} not received: {json}", f.qp));
        assert!(tx.packets > 1000, "{json}");
        assert_eq!(rx.packets, tx.packets, "every packet arrives: {json}");
        assert_eq!(
            (rx.lost, rx.out_of_order, rx.duplicates),
            (0, 0, 0),
            "PSN order: {json}"
        );
        assert_eq!(rx.bad_icrc, 0, "ICRC: {json}");
        assert!(rx.latency.samples == rx.packets && rx.latency.p50_ns > 0, "{json}");
        assert!(rx.latency.p99_ns >= rx.latency.p50_ns && rx.latency.max_ns >= rx.latency.p99_ns);
        total += rx.throughput_bps;
    }
    // The pacer keeps its rate whenever it is scheduled; time it ran late beyond its bucket
    // (descheduled on busy cores: 174 Mb/s once beside a valgrind run) is time it could not
    // send, and the sender counts it (`late_ns`). Most of the run late says nothing of the pacer.
    let late = late_ns as f64 / cfg.duration_ns as f64;
    assert!(
        late < 0.5,
        "the sender was late for {:.0} % of the run: too busy a machine to test pacing",
        late * 100.0
    );
    let expected = 200e6 * (1.0 - late);
    assert!(
        (total - expected).abs() <= 0.1 * expected,
        "throughput {total:.0} b/s not within 10 % of 200 Mb/s over the {:.1} % of the run the sender was on time: {json}",
        (1.0 - late) * 100.0
    );
    assert!(report.fairness.as_ref().unwrap().jain > 0.99, "{json}");
    println!("{}", report.to_table());
}

#[test]
fn pfc_xoff_pauses_the_sender_until_xon() {
    require_root();
    let _g = NET.lock().unwrap_or_else(|e| e.into_inner());
    let (_lab, a, ia, b, ib, mac_b) = pair("p");
    // At 250 Mb/s a full 0xFFFF-quanta XOFF lasts 134 ms: longer than the 100 ms to the XON.
    let link = 250_000_000;
    assert!(quanta_to_ns(0xffff, link) > 130_000_000);
    let cfg = TrafficConfig {
        rate_bps: 200_000_000,
        link_bps: link,
        qps: 2,
        duration_ns: 600_000_000,
        ..TrafficConfig::default()
    };
    let (b2, ib2) = (b.clone(), ib.clone());
    let inject = move || {
        // A third party on B's side of the wire: XOFF priority 3 mid-run, XON 100 ms later.
        let t = std::thread::spawn(move || {
            enter_netns(&b2).expect("enter B");
            let sock = RawSocket::open(&ib2).expect("injector socket");
            let mut f = [0u8; 64];
            let src = [0x02, 0, 0, 0, 0x99, 0x99];
            std::thread::sleep(Duration::from_millis(200));
            let mut times = [0u16; 8];
            times[3] = 0xffff;
            let n = encode_pfc(&mut f, src, 1 << 3, times);
            let t_off = now_ns();
            assert!(sock.send(&f[..n]).expect("send XOFF"));
            std::thread::sleep(Duration::from_millis(100));
            let n = encode_pfc(&mut f, src, 1 << 3, [0; 8]);
            let t_on = now_ns();
            assert!(sock.send(&f[..n]).expect("send XON"));
            t_on - t_off
        });
        let held = t.join().expect("injector");
        assert!((95_000_000..=130_000_000).contains(&held), "injector held {held} ns");
    };
    let (s, r) = send_recv(&cfg, &a, &ia, &b, &ib, mac_b, inject);
    let paused = s.pause.paused_ns[3];
    let (pfc, xoff, xon) = (s.pause.pfc_frames, s.pause.xoff[3], s.pause.xon[3]);
    let report = Report::build("test", None, &cfg, &[s, r]);
    let json = report.to_json();
    assert_eq!((pfc, xoff, xon), (2, 1, 1), "{json}");
    assert!(
        (80_000_000..=120_000_000).contains(&paused),
        "sender paused {paused} ns, expected ≈ 100 ms: {json}"
    );
    assert_eq!(report.hosts[0].data_paused_ns, paused);
    for f in &report.flows {
        let rx = f.rx.as_ref().expect("received");
        assert!(
            (80_000_000..=125_000_000).contains(&rx.max_gap_ns),
            "receiver's longest arrival gap {} ns, expected ≈ 100 ms: {json}",
            rx.max_gap_ns
        );
        assert_eq!((rx.lost, rx.bad_icrc), (0, 0), "{json}");
    }
}

#[test]
fn a_cnp_from_the_wire_cuts_the_qps_rate() {
    require_root();
    let _g = NET.lock().unwrap_or_else(|e| e.into_inner());
    let (lab, a, ia, b, ib, mac_b) = pair("c");
    let mac_a = lab.mac(&a, &ia);
    let cfg = TrafficConfig {
        rate_bps: 200_000_000,
        link_bps: 200_000_000,
        qps: 2,
        duration_ns: 300_000_000,
        ..TrafficConfig::default()
    };
    let (b2, ib2) = (b.clone(), ib.clone());
    let inject = move || {
        std::thread::spawn(move || {
            enter_netns(&b2).expect("enter B");
            let sock = RawSocket::open(&ib2).expect("injector socket");
            std::thread::sleep(Duration::from_millis(150));
            let ip = dataplane::wire::IpPair::V4 { src: IP_B, dst: IP_A };
            let cnp = dataplane::wire::build_cnp(mac_b, mac_a, ip, 0x101);
            assert!(sock.send(&cnp).expect("send CNP"));
        })
        .join()
        .expect("injector");
    };
    let (s, r) = send_recv(&cfg, &a, &ia, &b, &ib, mac_b, inject);
    let report = Report::build("test", None, &cfg, &[s, r]);
    let json = report.to_json();
    let tx = |qp: u32| report.flows.iter().find(|f| f.qp == qp).unwrap().tx.clone().unwrap();
    let (q0, q1) = (tx(0x100), tx(0x101));
    assert_eq!((q0.cnps_received, q0.rate_cuts), (0, 0), "{json}");
    assert_eq!((q1.cnps_received, q1.rate_cuts), (1, 1), "{json}");
    // Per-QP ceiling 100 Mb/s, α = 1: the cut halves the rate, then it recovers.
    assert!((q1.min_rate_bps.unwrap() - 50e6).abs() < 1.0, "{json}");
    // Recovery takes a few 55 µs timer periods: back at the ceiling by the end.
    assert!((q1.final_rate_bps.unwrap() - 100e6).abs() < 1.0, "{json}");
    assert_eq!(report.hosts[0].cnps_received, 1, "{json}");
}

#[test]
fn coordinate_incast_over_a_bridge() {
    require_root();
    let _g = NET.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    let mut lab = Lab::new();
    let sw = lab.ns(format!("rgcsw{pid}"));
    let br = format!("rgbr{pid}");
    sh(&["ip", "-n", &sw, "link", "add", &br, "type", "bridge"]);
    sh(&["ip", "-n", &sw, "link", "set", &br, "up"]);
    let mut hosts = Vec::new();
    for i in 0..3 {
        let ns = lab.ns(format!("rgch{i}{pid}"));
        let (hif, pif) = (format!("rgh{i}{pid}"), format!("rgp{i}{pid}"));
        lab.veth(&hif, &ns, &pif, &sw);
        sh(&["ip", "-n", &sw, "link", "set", &pif, "master", &br]);
        let mac = lab.mac(&ns, &hif);
        hosts.push(format!(
            "{ns}:{hif}:{}:10.78.0.{}",
            rocesw_bench::rocegen::fmt_mac(mac),
            i + 1
        ));
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rocegen"));
    cmd.args([
        "coordinate",
        "--pattern",
        "incast",
        "--rate",
        "100M",
        "--duration",
        "0.5",
        "--msg-size",
        "16K",
        "--json",
    ]);
    for h in &hosts {
        cmd.args(["--host", h]);
    }
    let out = cmd.output().expect("running rocegen");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "rocegen coordinate failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON report");
    assert_eq!(v["mode"], "coordinate");
    assert_eq!(v["pattern"], "incast");
    let flows = v["flows"].as_array().expect("flows");
    assert_eq!(flows.len(), 2, "{stdout}");
    for f in flows {
        assert_eq!(f["dst"], "10.78.0.1", "{stdout}");
        assert!(f["rx"]["packets"].as_u64().unwrap() > 500, "{stdout}");
        assert_eq!(f["rx"]["lost"], 0, "{stdout}");
        assert_eq!(f["rx"]["bad_icrc"], 0, "{stdout}");
        assert!(f["rx"]["latency"]["p99_ns"].as_u64().unwrap() > 0, "{stdout}");
    }
    let jain = v["fairness"]["jain"].as_f64().expect("fairness present");
    assert!(jain > 0.9 && jain <= 1.0 + 1e-9, "{stdout}");
    assert_eq!(v["hosts"].as_array().unwrap().len(), 3);
    for k in [
        "ce_fraction",
        "cnps_sent",
        "cnps_received",
        "pfc_frames",
        "lost",
        "latency",
    ] {
        assert!(v["totals"].get(k).is_some(), "totals.{k} missing: {stdout}");
    }
    drop(lab);
}

// ---- DCQCN: pure functions ----

const LINE: f64 = 1e9;

fn params() -> DcqcnParams {
    DcqcnParams::for_max_rate(LINE)
}

#[test]
fn dcqcn_defaults_follow_the_paper() {
    let p = params();
    assert_eq!(p.g, 1.0 / 256.0);
    assert_eq!(
        (p.alpha_timer_ns, p.rate_timer_ns, p.fast_recovery_stages),
        (55_000, 55_000, 5)
    );
    assert_eq!(p.byte_counter, 150_000);
    assert!((p.rai_bps - 0.005 * LINE).abs() < 1e-6);
    assert!(p.min_rate_bps > 0.0 && p.min_rate_bps < p.max_rate_bps);
}

#[test]
fn dcqcn_cut_on_cnp_updates_alpha() {
    let p = params();
    let g = p.g;
    let mut d = Dcqcn::new(p);
    assert_eq!(d.rate(), LINE);
    d.on_cnp(1_000);
    // Rt = Rc; Rc = Rc (1 − α/2) with α = 1; then α = (1 − g) α + g = 1.
    assert_eq!(d.target(), LINE);
    assert!((d.rate() - LINE / 2.0).abs() < 1e-3);
    assert!((d.alpha() - 1.0).abs() < 1e-12);
    // α decays every K without a CNP: 10 periods → (1 − g)^10.
    d.poll(1_000 + 10 * 55_000);
    assert!((d.alpha() - (1.0 - g).powi(10)).abs() < 1e-12, "{}", d.alpha());
    // The next cut uses the decayed α, and α moves towards 1 by g.
    let a = d.alpha();
    let rc = d.rate();
    let t = 1_000 + 10 * 55_000 + 1;
    d.on_cnp(t);
    assert!((d.rate() - rc * (1.0 - a / 2.0)).abs() < 1e-3);
    assert!((d.alpha() - ((1.0 - g) * a + g)).abs() < 1e-12);
    assert_eq!(d.cnps, 2);
    assert_eq!(d.stages(), (0, 0));
}

#[test]
fn dcqcn_fast_recovery_then_additive_then_hyper() {
    let p = params();
    let mut d = Dcqcn::new(p);
    d.on_cnp(0);
    let rt = d.target();
    // F = 5 fast recovery stages: Rc halves its distance to Rt, Rt unchanged.
    for _ in 0..5 {
        let rc = d.rate();
        assert_eq!(d.increase_event(true), Increase::FastRecovery);
        assert!((d.rate() - (rt + rc) / 2.0).abs() < 1e-3);
        assert_eq!(d.target(), rt);
    }
    // A CNP again, then additive increase once one counter has passed F.
    d.on_cnp(1);
    let mut kinds = Vec::new();
    for _ in 0..6 {
        kinds.push(d.increase_event(true));
    }
    assert_eq!(kinds[..5], [Increase::FastRecovery; 5]);
    assert_eq!(kinds[5], Increase::Additive);
    // One counter past F is enough for additive increase, whichever counter fires.
    assert_eq!(d.increase_event(false), Increase::Additive);
    // Drive both counters past F: hyper increase, Rt += i · R_HAI.
    d.on_cnp(2);
    for _ in 0..6 {
        d.increase_event(true);
        d.increase_event(false);
    }
    let (t, bc) = d.stages();
    assert_eq!((t, bc), (6, 6));
    let rt = d.target();
    let rc = d.rate();
    assert_eq!(d.increase_event(true), Increase::Hyper);
    let want_rt = (rt + p.rhai_bps).min(LINE);
    assert!((d.target() - want_rt).abs() < 1e-3, "{} vs {want_rt}", d.target());
    assert!((d.rate() - (want_rt + rc) / 2.0).abs() < 1e-3);
    assert!(d.hyper_increases >= 1 && d.additive_increases >= 1 && d.fast_recoveries >= 10);
}

#[test]
fn dcqcn_additive_step() {
    let p = params();
    let mut d = Dcqcn::new(p);
    d.on_cnp(0);
    d.on_cnp(1);
    d.on_cnp(2); // well below the line rate
    for _ in 0..5 {
        d.increase_event(true);
    }
    let (rt, rc) = (d.target(), d.rate());
    assert_eq!(d.increase_event(true), Increase::Additive);
    assert!((d.target() - (rt + p.rai_bps)).abs() < 1e-3);
    assert!((d.rate() - (rt + p.rai_bps + rc) / 2.0).abs() < 1e-3);
}

#[test]
fn dcqcn_timer_and_byte_counter_drive_stages() {
    let p = params();
    let mut d = Dcqcn::new(p);
    // At the line rate nothing recovers: no timer, the byte counter is idle.
    d.on_sent(10 * p.byte_counter, 10);
    d.poll(10 * p.rate_timer_ns);
    assert_eq!(d.stages(), (0, 0));
    assert_eq!(d.fast_recoveries, 0);
    let t0 = 1_000_000;
    d.on_cnp(t0);
    // Timer: one event per T.
    d.poll(t0 + p.rate_timer_ns - 1);
    assert_eq!(d.stages(), (0, 0));
    d.poll(t0 + p.rate_timer_ns);
    assert_eq!(d.stages(), (1, 0));
    d.poll(t0 + 3 * p.rate_timer_ns);
    assert_eq!(d.stages(), (3, 0));
    // Byte counter: one event per B bytes.
    d.on_sent(p.byte_counter - 1, t0 + 3 * p.rate_timer_ns);
    assert_eq!(d.stages(), (3, 0));
    d.on_sent(1, t0 + 3 * p.rate_timer_ns);
    assert_eq!(d.stages(), (3, 1));
    d.on_sent(2 * p.byte_counter, t0 + 3 * p.rate_timer_ns);
    assert_eq!(d.stages(), (3, 3));
    assert_eq!(d.fast_recoveries, 6);
    // A long quiet spell recovers to the line rate and stops the timer.
    d.poll(t0 + 1_000_000_000);
    assert_eq!(d.rate(), LINE);
    assert_eq!(d.stages(), (0, 0));
    assert!(d.next_deadline() > t0 + 1_000_000_000);
}

#[test]
fn dcqcn_rate_stays_between_floor_and_line_rate() {
    let p = params();
    let mut d = Dcqcn::new(p);
    for i in 0..10_000u64 {
        d.on_cnp(i * 10);
        assert!(d.rate() >= p.min_rate_bps && d.rate() <= LINE);
    }
    assert_eq!(d.rate(), p.min_rate_bps);
    assert_eq!(d.min_rc, p.min_rate_bps);
    for k in 0..10_000 {
        d.increase_event(k % 3 != 0);
        assert!(d.rate() >= p.min_rate_bps && d.rate() <= LINE && d.target() <= LINE);
    }
    assert_eq!(d.rate(), LINE);
}

#[test]
fn cnp_pacer_spaces_cnps_per_qp() {
    let mut a = CnpPacer::new(CnpPacer::DEFAULT_INTERVAL_NS);
    let mut b = CnpPacer::new(CnpPacer::DEFAULT_INTERVAL_NS);
    assert!(a.on_ce(0));
    assert!(!a.on_ce(1));
    assert!(!a.on_ce(49_999));
    assert!(b.on_ce(10), "each QP has its own interval");
    assert!(a.on_ce(50_000));
    assert!(!a.on_ce(99_999));
    assert!(a.on_ce(100_000));
    assert!(!b.on_ce(50_009));
    assert!(b.on_ce(50_010));
}

#[test]
fn notification_point_answers_ce_with_spaced_cnps() {
    let mac_s = [2, 0, 0, 0, 0, 1];
    let mac_r = [2, 0, 0, 0, 0, 2];
    let frame = |qp: u32, psn: u32, ce: bool| {
        let mut payload = [0u8; 64];
        PayloadHeader { ts_ns: 0, seq: psn }.write(&mut payload);
        RoceFrameBuilder::new()
            .macs(mac_s, mac_r)
            .ipv4(IP_A, IP_B)
            .ecn(if ce { Ecn::Ce } else { Ecn::Ect0 })
            .dest_qp(qp)
            .psn(psn)
            .payload(&payload)
            .build()
            .unwrap()
    };
    let mut r = Receiver::new(Some(50_000));
    let mut cnps = Vec::new();
    for i in 0..40u32 {
        // Every packet CE-marked, 10 µs apart, alternating two QPs.
        let qp = 0x100 + (i % 2);
        let f = frame(qp, i / 2, true);
        let info = parse(&f, usize::MAX).unwrap();
        if let Some(c) = r.on_roce(&f, &info, u64::from(i) * 10_000) {
            cnps.push((u64::from(i) * 10_000, c.to_vec()));
        }
    }
    // 400 µs of CE on each QP → one CNP per 50 µs per QP: at 0, 60, 120, ... (10 µs grid).
    let per_qp = |qp: u32| {
        cnps.iter()
            .filter(|(_, c)| parse(c, usize::MAX).unwrap().bth(c).unwrap().dest_qp() == qp)
            .map(|(t, _)| *t)
            .collect::<Vec<_>>()
    };
    let (q0, q1) = (per_qp(0x100), per_qp(0x101));
    assert_eq!(q0, vec![0, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000]);
    assert_eq!(q1, vec![10_000, 70_000, 130_000, 190_000, 250_000, 310_000, 370_000]);
    for (_, c) in &cnps {
        let info = parse(c, usize::MAX).unwrap();
        assert!(info.is_cnp() && verify_icrc(c, &info));
        assert_eq!(info.dscp(), Some(48));
        assert_eq!((info.src_mac(c), info.dst_mac(c)), (mac_r, mac_s));
        assert_eq!(
            &c[info.l3_offset() + 12..info.l3_offset() + 20],
            &[IP_B, IP_A].concat()[..]
        );
    }
    let f = &r.flows[0];
    assert_eq!((f.ce, f.cnps_sent, f.psn.lost), (20, 7, 0));
    // No CE, no CNP; notification point off, no CNP.
    let plain = frame(0x100, 20, false);
    assert!(r
        .on_roce(&plain, &parse(&plain, usize::MAX).unwrap(), 1_000_000)
        .is_none());
    let mut off = Receiver::new(None);
    let ce = frame(0x100, 0, true);
    assert!(off.on_roce(&ce, &parse(&ce, usize::MAX).unwrap(), 0).is_none());
    assert_eq!(off.flows[0].ce, 1);
}
