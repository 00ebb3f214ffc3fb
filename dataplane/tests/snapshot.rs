//! The switch's snapshot, as it leaves the switch (`summary.json`, the `counters` answer), reads
//! back as the control plane's type exactly: no field the type does not know (it would be
//! ignored by rocectl and the metrics), none missing or renamed (it would be refused), and the
//! same values. Built by a real `Switch` with congestion, PFC and several drop reasons, so the
//! figures are not all zero.

mod common;
use common::*;
use controlplane::snapshot::Snapshot;
use dataplane::tools::gen::announce;
use dataplane::Switch;
use serde_json::Value;

/// Where two JSON values first differ, as a path (`ports/3/queues/1/peak_cells`).
fn first_difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys()) {
                let p = format!("{path}/{k}");
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => {
                        if let Some(d) = first_difference(u, v, &p) {
                            return Some(d);
                        }
                    }
                    (Some(_), None) => return Some(format!("{p}: sent by the switch, not read back")),
                    (None, _) => return Some(format!("{p}: read back, not sent by the switch")),
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (u, v))| first_difference(u, v, &format!("{path}/{i}"))),
        _ => (a != b).then(|| format!("{path}: {a} sent, {b} read back")),
    }
}

/// A switch after an incast into port 3's lossless queue (XOFF, headroom, overflow), a
/// truncated frame and a link-local frame: most figures non-zero, three drop reasons.
fn busy_switch() -> (Switch, u64) {
    let cfg = default_config();
    let mut sw = Switch::new(&cfg, 1);
    sw.receive(3, &announce(3, 0).unwrap(), 0);
    let mut now = 1_000;
    for src in 0..3 {
        let b = burst32(src, 3, 26);
        for _ in 0..40 {
            sw.receive_burst(src as usize, b.iter().map(Vec::as_slice), now);
        }
    }
    sw.receive(1, &[0u8; 10], now);
    let mut lldp = announce(1, 0).unwrap();
    lldp[..6].copy_from_slice(&[0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e]);
    sw.receive(1, &lldp, now);
    let mut sink = |_: usize, _: &[u8], _: u64| {};
    for _ in 0..5 {
        sw.poll(now);
        for p in 0..4 {
            sw.transmit(p, now, &mut sink);
        }
        now += 10_000;
    }
    (sw, now)
}

#[test]
fn the_switch_snapshot_reads_back_exactly_as_the_shared_type() {
    let (sw, now) = busy_switch();
    let snap = sw.snapshot(now);
    let drops = &snap.ports[1].drops;
    assert!(drops.0.len() >= 2, "drop reasons exercised: {drops:?}");
    assert!(
        snap.totals.drops.get("headroom_overflow") > 0,
        "{:?}",
        snap.totals.drops
    );
    assert!(
        snap.ports[3].queues[3].depth_packets > 0,
        "{:?}",
        snap.ports[3].queues[3]
    );
    assert!(snap.ports[0].pfc_tx[3] > 0, "{:?}", snap.ports[0]);

    // As the control server sends it (keys sorted) and as summary.json holds it (in order).
    for text in [
        serde_json::to_value(&snap).unwrap().to_string(),
        serde_json::to_string_pretty(&snap).unwrap(),
    ] {
        let sent: Value = serde_json::from_str(&text).unwrap();
        let read: Snapshot = serde_json::from_str(&text).unwrap_or_else(|e| panic!("rocectl cannot read it: {e}"));
        let back = serde_json::to_value(&read).unwrap();
        if let Some(d) = first_difference(&sent, &back, "") {
            panic!("the switch's snapshot and controlplane::snapshot disagree at {d}");
        }
        assert_eq!(read, snap);
    }
}

/// Issue 37: a SONiC config's switch reports its ports by name and each of its pools (the
/// ingress pool's shared headroom pool too) with the figures of the incast it holds, and that
/// reads back exactly as well; the end-of-run table names the ports.
#[test]
fn a_sonic_switch_reports_port_names_and_its_pools() {
    let json = std::fs::read_to_string(repo_root().join("configs/sonic/spectrum1-t1.json")).unwrap();
    let cfg = controlplane::load_str(&json).unwrap().config;
    let mut sw = Switch::new(&cfg, 1);
    sw.receive(3, &announce(3, 0).unwrap(), 0);
    // DSCP 3: AZURE's lossless TC 3; nothing transmitted, so the incast stays in the buffer and
    // its three PGs fill the ingress pool to their dynamic limits, then their headroom.
    for src in 0..3 {
        let b = burst32(src, 3, 3);
        for _ in 0..100 {
            sw.receive_burst(src as usize, b.iter().map(Vec::as_slice), 1_000);
        }
    }
    let snap = sw.snapshot(2_000);
    let names: Vec<_> = snap.ports.iter().map(|p| p.name.as_deref().unwrap()).collect();
    assert_eq!(names[..4], ["Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12"]);
    let pools: Vec<(&str, &str)> = snap.pools.iter().map(|p| (p.name.as_str(), p.kind.as_str())).collect();
    assert_eq!(
        pools,
        [
            ("ingress_lossless_pool", "ingress"),
            ("egress_lossless_pool", "egress"),
            ("egress_lossy_pool", "egress")
        ]
    );
    let ingress = &snap.pools[0];
    // 8719360 B and a 323520 B shared headroom pool in 96 B cells, rounded up.
    assert_eq!(ingress.size_cells, 90827);
    let hr = ingress.headroom.expect("the ingress pool's shared headroom pool");
    assert_eq!(hr.size_cells, 3370);
    assert!(
        ingress.used_cells > 0 && ingress.peak_used_cells >= ingress.used_cells,
        "{ingress:?}"
    );
    assert!(hr.used_cells > 0, "the incast reached headroom: {hr:?}");
    assert!(snap.pools[1].used_cells > 0, "{:?}", snap.pools[1]);
    // With one pool per direction the sums are the pools' own figures.
    assert_eq!(snap.buffer.ingress_shared_cells, ingress.used_cells);
    let text = serde_json::to_string_pretty(&snap).unwrap();
    let sent: Value = serde_json::from_str(&text).unwrap();
    // Issue 49 item 7: the cell size beside the cell counts (Spectrum-1's 96 B), first in
    // `buffer`, so summary.json's cells read as bytes without the config.
    assert_eq!(sent["buffer"]["cell_bytes"], 96, "{}", sent["buffer"]);
    assert_eq!(
        sent["buffer"].as_object().unwrap().keys().next().map(String::as_str),
        Some("cell_bytes")
    );
    let read: Snapshot = serde_json::from_str(&text).unwrap();
    if let Some(d) = first_difference(&sent, &serde_json::to_value(&read).unwrap(), "") {
        panic!("the switch's snapshot and controlplane::snapshot disagree at {d}");
    }
    assert_eq!(read, snap);
    let table = dataplane::report::human_summary(&snap, "uptime", 2_000);
    let row = table
        .lines()
        .find(|l| l.starts_with("Ethernet12 "))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(row.split_whitespace().nth(2).unwrap() == "0", "nothing sent: {row}");
    // The port column as wide as the longest name, names left-aligned.
    assert!(
        table.lines().nth(1).unwrap().starts_with("port          rx_pkts"),
        "{table}"
    );
    assert!(table.contains("\nEthernet0        3200 "), "{table}");
}

#[test]
fn the_fdb_answer_reads_back_exactly_as_the_protocol_type() {
    let (sw, now) = busy_switch();
    let rows = sw.fdb().rows(now);
    assert!(rows.len() >= 4, "{rows:?}");
    let sent = serde_json::to_value(&rows).unwrap();
    let read: Vec<controlplane::protocol::FdbRow> = serde_json::from_value(sent.clone()).unwrap();
    let back = serde_json::to_value(&read).unwrap();
    if let Some(d) = first_difference(&sent, &back, "") {
        panic!("the switch's fdb rows and controlplane::protocol::FdbRow disagree at {d}");
    }
}

/// Issue 39: a snapshot says which priorities received PFC holds right now, and which the
/// PFC watchdog holds in a storm; both clear once the pause runs out and the storm is restored.
#[test]
fn paused_and_stormed_now_follow_the_pfc_received() {
    let cfg = default_config();
    let wd = cfg
        .pfc
        .watchdog
        .clone()
        .expect("the default profile has the watchdog on");
    let mut sw = Switch::new(&cfg, 1);
    sw.receive(3, &announce(3, 0).unwrap(), 0);
    let mut xoff = [0u8; 64];
    let n = dataplane::wire::pfc::encode_pfc(
        &mut xoff,
        dataplane::tools::gen::host_mac(3),
        1 << 3,
        [0, 0, 0, 65535, 0, 0, 0, 0],
    );
    sw.receive(3, &xoff[..n], 1_000);
    // Lossless frames for port 3, held there by the pause.
    let b = burst32(0, 3, 26);
    sw.receive_burst(0, b.iter().map(Vec::as_slice), 2_000);
    let s = sw.snapshot(3_000);
    let p3 = &s.ports[3];
    assert_eq!(p3.paused_now, [false, false, false, true, false, false, false, false]);
    assert!(!p3.storm_now.contains(&true), "{:?}", p3.storm_now);
    assert!(!s.ports[0].paused_now.contains(&true), "port 0 received no PFC");
    // The host keeps pausing (65535 quanta are 1.3 ms at 25G) past the detection time.
    let mut t = 1_000;
    while t < wd.detection_ns + 10_000_000 {
        t += 1_000_000;
        sw.receive(3, &xoff[..n], t);
        sw.poll(t);
    }
    let s = sw.snapshot(t);
    assert_eq!(s.ports[3].watchdog_storms[3], 1);
    assert!(s.ports[3].storm_now[3] && s.ports[3].paused_now[3], "{:?}", s.ports[3]);
    // The PFC stops: the pause runs out, then the watchdog restores the queue.
    let mut later = t;
    while later < t + wd.restoration_ns + 10_000_000 {
        later += 1_000_000;
        sw.poll(later);
    }
    let s = sw.snapshot(later);
    assert_eq!(s.ports[3].watchdog_restores[3], 1);
    assert!(!s.ports[3].paused_now.contains(&true) && !s.ports[3].storm_now.contains(&true));
}
