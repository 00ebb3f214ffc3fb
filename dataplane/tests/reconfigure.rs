//! Live config changes on a congested switch: whole bursts see the old or the new config, no
//! frame is lost, no cell leaks, and lowering Kmax raises the marking rate from that moment.

mod common;
use common::*;
use dataplane::tools::gen::announce;
use dataplane::Switch;

/// Each round one burst of 32 lossless frames arrives for port 3 and port 3 sends 32: the
/// queue holds whatever depth it had. Returns (frames sent on port 3, CE marked).
fn drive(sw: &mut Switch, now: &mut u64, rounds: usize, burst: &[Vec<u8>]) -> (u64, u64) {
    let before = sw.snapshot(*now).ports[3].clone();
    let mut sink = |_: usize, _: &[u8], _: u64| {};
    for _ in 0..rounds {
        sw.receive_burst(0, burst.iter().map(Vec::as_slice), *now);
        sw.poll(*now);
        for p in 0..4 {
            sw.transmit(p, *now, &mut sink);
        }
        *now += 32 * 336;
    }
    let after = sw.snapshot(*now).ports[3].clone();
    (
        after.queues[3].tx_packets - before.queues[3].tx_packets,
        after.ecn_marked - before.ecn_marked,
    )
}

#[test]
fn lowering_kmax_under_congestion_raises_marking_and_loses_nothing() {
    let mut cfg = default_config();
    let mut sw = Switch::new(&cfg, 1);
    sw.receive(3, &announce(3, 0).unwrap(), 0);
    let b = burst32(0, 3, 26);
    let mut now = 1_000;
    // Hold about 260 KB in port 3's lossless queue: between Kmin (100 KB) and Kmax (400 KB),
    // where the configured curve marks about 0.2 × 160/300 ≈ 11 %.
    for _ in 0..8 {
        sw.receive_burst(0, b.iter().map(Vec::as_slice), now);
    }
    let (sent_a, marked_a) = drive(&mut sw, &mut now, 400, &b);
    let depth = sw.snapshot(now).ports[3].queues[3].depth_bytes;
    assert!((100_000..400_000).contains(&depth), "held depth {depth}");

    // The dataplane reads each port's own profiles.
    for port in &mut cfg.ports {
        let profile = port.queues[3].ecn.as_mut().unwrap();
        profile.kmin_bytes = 20_000;
        profile.kmax_bytes = 40_000;
    }
    sw.reconfigure(&cfg).expect("ECN thresholds change live");
    let (sent_b, marked_b) = drive(&mut sw, &mut now, 400, &b);
    let (fa, fb) = (marked_a as f64 / sent_a as f64, marked_b as f64 / sent_b as f64);
    assert!((0.05..0.2).contains(&fa), "marking fraction before the change: {fa:.3}");
    assert!(fb > 0.99, "above the new Kmax everything is marked: {fb:.3}");

    // Drain: everything admitted leaves, no drop anywhere, every cell released.
    let mut sink = |_: usize, _: &[u8], _: u64| {};
    while !sw.is_idle() {
        now = sw.next_event(now).unwrap_or(now + 1).max(now + 1);
        sw.poll(now);
        for p in 0..4 {
            sw.transmit(p, now, &mut sink);
        }
    }
    let s = sw.snapshot(now);
    assert_eq!(s.totals.drops.total(), 0, "{:?}", s.totals.drops);
    assert!(sw.buffers_empty(), "{:?}", sw.pool_use());
    assert_eq!(s.ports[3].queues[3].tx_packets, (8 + 800) * 32, "every frame delivered");
}

#[test]
fn changes_that_cannot_happen_live_are_refused_and_change_nothing() {
    let cfg = default_config();
    let mut sw = Switch::new(&cfg, 1);
    let mut more_ports = cfg.clone();
    more_ports.ports.pop();
    assert!(sw.reconfigure(&more_ports).unwrap_err().contains("ports"));
    let mut bigger = cfg.clone();
    bigger.buffer.total_bytes *= 2;
    assert!(sw.reconfigure(&bigger).unwrap_err().contains("buffer"));
    assert_eq!(sw.config(), &cfg);
}

/// Congests port 2 (fed from port 1) and port 3 (fed from port 0) alike; returns each one's
/// (frames sent from its lossless queue, CE marked) over `rounds`.
fn drive_two(sw: &mut Switch, now: &mut u64, rounds: usize, to3: &[Vec<u8>], to2: &[Vec<u8>]) -> [(u64, u64); 2] {
    let before = sw.snapshot(*now);
    let mut sink = |_: usize, _: &[u8], _: u64| {};
    for _ in 0..rounds {
        sw.receive_burst(0, to3.iter().map(Vec::as_slice), *now);
        sw.receive_burst(1, to2.iter().map(Vec::as_slice), *now);
        sw.poll(*now);
        for p in 0..4 {
            sw.transmit(p, *now, &mut sink);
        }
        *now += 32 * 336;
    }
    let after = sw.snapshot(*now);
    [2, 3].map(|p| {
        (
            after.ports[p].queues[3].tx_packets - before.ports[p].queues[3].tx_packets,
            after.ports[p].ecn_marked - before.ports[p].ecn_marked,
        )
    })
}

fn with_port_overrides(port3: &str, port2: &str) -> controlplane::Config {
    let text = std::fs::read_to_string(repo_root().join("configs/default.toml")).unwrap();
    let text = text
        .replacen("[[port]]\nid = 3\n", &format!("[[port]]\nid = 3\n{port3}\n"), 1)
        .replacen("[[port]]\nid = 2\n", &format!("[[port]]\nid = 2\n{port2}\n"), 1)
        + "\n[ecn.hot]\nkmin = \"20KB\"\nkmax = \"40KB\"\npmax = 0.2\n";
    controlplane::load_str(&text)
        .expect("config with port overrides")
        .config
}

#[test]
fn a_port_override_marks_on_that_port_only_and_retunes_live() {
    // Port 3's lossless queue uses the `hot` profile; port 2 keeps the global `roce` one.
    let cfg = with_port_overrides("queue.3 = { ecn = \"hot\" }", "");
    assert_eq!(cfg.ports[3].queues[3].ecn.as_ref().unwrap().name, "hot");
    assert_eq!(cfg.ports[2].queues[3].ecn.as_ref().unwrap().name, "roce");
    let mut sw = Switch::new(&cfg, 1);
    sw.receive(3, &announce(3, 0).unwrap(), 0);
    sw.receive(2, &announce(2, 1).unwrap(), 0);
    let (to3, to2) = (burst32(0, 3, 26), burst32(1, 2, 26));
    let mut now = 1_000;
    // Hold about 260 KB in both lossless queues: between roce's Kmin and Kmax, above hot's Kmax.
    for _ in 0..8 {
        sw.receive_burst(0, to3.iter().map(Vec::as_slice), now);
        sw.receive_burst(1, to2.iter().map(Vec::as_slice), now);
    }
    let frac = |(sent, marked): (u64, u64)| marked as f64 / sent as f64;
    let [p2, p3] = drive_two(&mut sw, &mut now, 400, &to3, &to2);
    assert!(
        (0.05..0.2).contains(&frac(p2)),
        "port 2 on the global curve: {:.3}",
        frac(p2)
    );
    assert!(frac(p3) > 0.99, "port 3 above its own Kmax: {:.3}", frac(p3));

    // Lower Kmax on port 2 only, live: port 2's marking rises from then on; port 3 unchanged.
    let retuned = with_port_overrides("queue.3 = { ecn = \"hot\" }", "queue.3 = { ecn = \"hot\" }");
    sw.reconfigure(&retuned).expect("a per-port profile changes live");
    let [p2, p3] = drive_two(&mut sw, &mut now, 400, &to3, &to2);
    assert!(frac(p2) > 0.99, "port 2 after the change: {:.3}", frac(p2));
    assert!(frac(p3) > 0.99);
    let s = sw.snapshot(now);
    assert_eq!(s.totals.drops.total(), 0, "{:?}", s.totals.drops);
}

/// Issue 10 item 4: what the running switch was built with (a port's interface, capture files
/// and worker, every `[run]` knob) cannot change live; an apply that changes it is refused,
/// naming the field, instead of answering "applied" and running as before.
#[test]
fn fields_fixed_at_start_are_refused_naming_the_field() {
    let cfg = default_config();
    let mut sw = Switch::new(&cfg, 1);
    type Edit = Box<dyn Fn(&mut controlplane::Config)>;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "port[1].interface",
            Box::new(|c| c.ports[1].interface = Some("eth9".into())),
        ),
        (
            "port[2].pcap",
            Box::new(|c| {
                c.ports[2].pcap = Some(controlplane::PcapPortConfig {
                    input: None,
                    output: Some("x.pcap".into()),
                    pace: controlplane::PcapPace::Asap,
                })
            }),
        ),
        ("port[0].worker", Box::new(|c| c.ports[0].worker = 3)),
        ("run.workers", Box::new(|c| c.run.workers += 1)),
        ("run.cores", Box::new(|c| c.run.cores = vec![1])),
        ("run.idle", Box::new(|c| c.run.idle_sleep_ns = Some(5_000))),
        ("run.drain_timeout", Box::new(|c| c.run.drain_timeout_ns += 1)),
        ("buffer", Box::new(|c| c.buffer.cell_bytes *= 2)),
    ];
    for (field, edit) in cases {
        let mut new = cfg.clone();
        edit(&mut new);
        let e = sw.reconfigure(&new).expect_err(field);
        assert!(e.contains(field), "{field}: {e}");
        assert_eq!(
            controlplane::live_change_refusal(&cfg, &new).as_deref(),
            Some(e.as_str()),
            "one rule for every path"
        );
        assert_eq!(sw.config(), &cfg, "{field}: nothing changed");
    }
    // What can change live still does.
    let mut faster = cfg.clone();
    faster.ports[1].speed_bps /= 2;
    assert_eq!(controlplane::live_change_refusal(&cfg, &faster), None);
    sw.reconfigure(&faster).expect("speed changes live");
}

/// Issue 10 item 5: a live change keeps state. A script re-applying its config every
/// microsecond must not refill the CNP policer each time: over 2 ms of a CNP flood at ten
/// times the policer's rate, what passes stays within rate × time + one burst.
#[test]
fn reapplying_the_same_config_does_not_refill_the_cnp_policer() {
    use dataplane::tools::gen::{host_ip, host_mac};
    use dataplane::wire::build::{build_cnp, IpPair};
    let cfg = default_config();
    let limit = cfg.cnp.policer.expect("the default profile polices CNPs");
    let mut sw = Switch::new(&cfg, 1);
    sw.receive(3, &announce(3, 0).unwrap(), 0);
    let ip = IpPair::V4 {
        src: host_ip(0),
        dst: host_ip(3),
    };
    let cnp = build_cnp(host_mac(0), host_mac(3), ip, 7);
    let mut sink = |_: usize, _: &[u8], _: u64| {};
    let (step_ns, per_step, steps) = (1_000u64, 25usize, 2_000u64);
    for i in 1..=steps {
        let now = i * step_ns;
        sw.receive_burst(0, std::iter::repeat_n(cnp.as_slice(), per_step), now);
        sw.reconfigure(&cfg).expect("the same config applies");
        sw.poll(now);
        for p in 0..4 {
            sw.transmit(p, now, &mut sink);
        }
    }
    let s = sw.snapshot(steps * step_ns);
    let offered = steps * per_step as u64;
    let passed = offered - s.totals.drops.get("policer");
    let allowed_bytes = limit.rate_bps * steps * step_ns / 8 / 1_000_000_000 + limit.burst_bytes;
    let allowed = allowed_bytes / cnp.len() as u64 + 1;
    assert!(
        passed <= allowed,
        "{passed} CNPs passed the policer, its rate and burst allow {allowed} (of {offered})"
    );
}

/// Port 3's queues 3 (RoCE) and 0 (everything else) both backlogged with 1 KiB frames; each
/// round 16 more of each arrive and port 3 sends what its line rate allows. Returns the frames
/// each queue sent (queue 3, queue 0) over `rounds`.
fn drive_shares(sw: &mut Switch, now: &mut u64, rounds: usize, roce: &[Vec<u8>], other: &[Vec<u8>]) -> (u64, u64) {
    let before = sw.snapshot(*now).ports[3].clone();
    let mut sink = |_: usize, _: &[u8], _: u64| {};
    for _ in 0..rounds {
        sw.receive_burst(0, roce[..16].iter().map(Vec::as_slice), *now);
        sw.receive_burst(1, other[..16].iter().map(Vec::as_slice), *now);
        sw.poll(*now);
        for p in 0..4 {
            sw.transmit(p, *now, &mut sink);
        }
        *now += 32 * 336;
    }
    let after = sw.snapshot(*now).ports[3].clone();
    (
        after.queues[3].tx_packets - before.queues[3].tx_packets,
        after.queues[0].tx_packets - before.queues[0].tx_packets,
    )
}

/// The scheduler kind changes live with frames queued: WDRR 1:1, then VL arbitration with
/// queue 3 in the high table and a limit of 4 KiB (four 1 KiB frames per low frame), then a
/// table change (limit 0: one for one), then back; nothing is lost or reordered out of the
/// buffer, and each phase shows its scheduler's share.
#[test]
fn the_scheduler_kind_and_vlarb_tables_change_live() {
    let text = std::fs::read_to_string(repo_root().join("configs/default.toml")).unwrap();
    let vlarb = |limit: u8| {
        let t = text.replacen(
            "[[port]]\nid = 3\n",
            &format!(
                "[[port]]\nid = 3\nscheduler = \"vlarb\"\n\
                 vlarb = {{ high = [[6, 255], [3, 255]], low = [[0, 255]], high_limit = {limit} }}\n"
            ),
            1,
        );
        controlplane::load_str(&t).expect("vlarb config").config
    };
    let base = default_config();
    let mut sw = Switch::new(&base, 1);
    sw.receive(3, &announce(3, 0).unwrap(), 0);
    let (roce, other) = (burst32(0, 3, 26), burst32(1, 3, 0));
    let mut now = 1_000;
    for _ in 0..6 {
        sw.receive_burst(0, roce.iter().map(Vec::as_slice), now);
        sw.receive_burst(1, other.iter().map(Vec::as_slice), now);
    }
    let ratio = |(a, b): (u64, u64)| a as f64 / b as f64;
    let wdrr = ratio(drive_shares(&mut sw, &mut now, 10, &roce, &other));
    assert!((0.9..1.1).contains(&wdrr), "WDRR 1:1 share: {wdrr:.2}");

    sw.reconfigure(&vlarb(1)).expect("sp_wdrr → vlarb live");
    let (hi, lo) = drive_shares(&mut sw, &mut now, 10, &roce, &other);
    assert!((3.8..4.2).contains(&ratio((hi, lo))), "vlarb limit 1: {hi}:{lo}");

    sw.reconfigure(&vlarb(0)).expect("vlarb tables change live");
    let one = ratio(drive_shares(&mut sw, &mut now, 10, &roce, &other));
    assert!((0.9..1.1).contains(&one), "vlarb limit 0: {one:.2}");

    sw.reconfigure(&base).expect("vlarb → sp_wdrr live");
    let mut sink = |_: usize, _: &[u8], _: u64| {};
    while !sw.is_idle() {
        now = sw.next_event(now).unwrap_or(now + 1).max(now + 1);
        sw.poll(now);
        for p in 0..4 {
            sw.transmit(p, now, &mut sink);
        }
    }
    let s = sw.snapshot(now);
    assert_eq!(s.totals.drops.total(), 0, "{:?}", s.totals.drops);
    assert!(sw.buffers_empty(), "{:?}", sw.pool_use());
    let sent = s.ports[3].queues[3].tx_packets + s.ports[3].queues[0].tx_packets;
    assert_eq!(sent, 2 * (6 * 32 + 30 * 16), "every frame delivered");
}

/// A live change that makes a queue mark at enqueue, or makes a port EDF, holds from the next
/// burst exactly as if the switch had started with it: the frames of a burst that wait to be
/// admitted together (`egress::run`) go only to queues with neither, and that is decided from
/// the port's state after the change, not before.
#[test]
fn enqueue_marking_or_edf_turned_on_live_acts_as_if_configured_at_start() {
    let text = std::fs::read_to_string(repo_root().join("configs/default.toml")).unwrap();
    let early = "\n[ecn.early]\nkmin = \"20KB\"\nkmax = \"40KB\"\npmax = 0.2\nmark_at = \"enqueue\"\n";
    let variants = [
        "queue.3 = { ecn = \"early\" }",
        "scheduler = \"edf\"\nedf = { mode = \"take-over\", budget = { 3 = \"20us\" }, tag = \"flow_label\", tag_unit = \"1us\" }",
    ];
    for port3 in variants {
        let t = text.replacen("[[port]]\nid = 3\n", &format!("[[port]]\nid = 3\n{port3}\n"), 1) + early;
        let changed = controlplane::load_str(&t).unwrap_or_else(|e| panic!("{e}\n{t}")).config;
        let mut live = Switch::new(&default_config(), 1);
        live.reconfigure(&changed).expect("a live change");
        let mut fresh = Switch::new(&changed, 1);
        let [a, b] = [&mut live, &mut fresh].map(|sw| {
            let mut out: Vec<(usize, Vec<u8>, u64)> = Vec::new();
            sw.receive(3, &announce(3, 0).unwrap(), 0);
            let (to3, other) = (burst32(0, 3, 26), burst32(1, 3, 26));
            let mut now = 1_000;
            for round in 0..40 {
                sw.receive_burst(0, to3.iter().map(Vec::as_slice), now);
                if round % 2 == 0 {
                    sw.receive_burst(1, other.iter().map(Vec::as_slice), now);
                }
                sw.poll(now);
                let mut sink = |p: usize, f: &[u8], t: u64| out.push((p, f.to_vec(), t));
                for p in 0..4 {
                    sw.transmit(p, now, &mut sink);
                }
                now += 32 * 336;
            }
            (out, sw.snapshot(now))
        });
        assert!(a.0.len() > 1000, "{port3}: frames sent");
        assert!(
            a.0 == b.0,
            "{port3}: the frames out differ from a switch started with the config"
        );
        assert_eq!(a.1, b.1, "{port3}");
        if port3.contains("early") {
            assert!(a.1.ports[3].ecn_marked > 0, "marked at enqueue");
        }
    }
}
