//! `rocesw run`'s workers on in-memory ports shared with the test: frames cross between two
//! workers' shards, a port that vanishes does not stop the others, and a stop
//! drains what was admitted (or reports what the drain timeout left).

mod common;
use common::*;
use controlplane::Config;
use dataplane::tools::gen::{announce, Flow};
use dataplane::wire::Ecn;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn start(cfg: Config, workers: usize) -> Running {
    Running::start(on_workers(cfg, workers), None)
}

/// `cfg` on `workers` workers, port i on worker i mod `workers`, idling 20 µs.
fn on_workers(mut cfg: Config, workers: usize) -> Config {
    cfg.run.workers = workers;
    cfg.run.idle_sleep_ns = Some(20_000);
    for (i, p) in cfg.ports.iter_mut().enumerate() {
        p.worker = i % workers;
    }
    cfg
}

fn frames(src: u16, dst: u16, count: u64) -> Vec<Vec<u8>> {
    Flow {
        src,
        dst,
        dscp: 26,
        ecn: Ecn::Ect0,
        qp: 9,
        frame_len: 1024,
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

/// A frame with its ECN field and IPv4 checksum cleared: a queue that builds up marks CE on the
/// way (which the ICRC does not cover), so "intact" compares the rest.
fn unmarked(f: &[u8]) -> Vec<u8> {
    let mut f = f.to_vec();
    f[15] &= !3;
    f[24..26].fill(0);
    f
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The data frames (the tests' 1 KiB frames, not PFC or announcements) that left `port`.
fn data_frames(wires: &[Arc<Mutex<Wire>>], port: usize) -> Vec<Vec<u8>> {
    wires[port]
        .lock()
        .unwrap()
        .from_switch
        .iter()
        .filter(|f| f.len() == 1024)
        .cloned()
        .collect()
}

fn delivered(wires: &[Arc<Mutex<Wire>>], port: usize) -> usize {
    data_frames(wires, port).len()
}

/// Ports 0 and 2 belong to worker 0, ports 1 and 3 to worker 1: frames from port 1 to port 0
/// and from port 2 to port 3 cross between the shards both ways, intact, in order and counted
/// once, and every cell comes back. The test's hosts write 500 frames at once, faster than any
/// link: their ports have emulated peers (as software hosts' interfaces do), which put them on
/// the wire at line rate and hold them while the switch sends XOFF.
#[test]
fn frames_cross_between_shards() {
    frames_cross_between(2);
}

/// Four workers on this machine's two cores, one port each: every frame crosses, and the
/// workers take turns on the cores.
#[test]
fn frames_cross_between_four_workers_on_two_cores() {
    frames_cross_between(4);
}

fn frames_cross_between(workers: usize) {
    let mut cfg = default_config();
    for p in &mut cfg.ports {
        p.peer = controlplane::model::PeerKind::Emulated;
    }
    let r = start(cfg, workers);
    // Hosts 0 and 3 announce themselves (to host 1): once both announcements came out of
    // port 1, the switch has learnt them and nothing below is flooded.
    for (port, host) in [(0usize, 0u16), (3, 3)] {
        r.wires[port]
            .lock()
            .unwrap()
            .to_switch
            .push_back(announce(host, 1).unwrap());
    }
    wait_for("both announcements", || {
        r.wires[1].lock().unwrap().from_switch.len() == 2
    });
    let a = frames(1, 0, 500);
    let b = frames(2, 3, 500);
    r.wires[1].lock().unwrap().to_switch.extend(a.iter().cloned());
    r.wires[2].lock().unwrap().to_switch.extend(b.iter().cloned());
    wait_for("500 frames on each path", || {
        delivered(&r.wires, 0) == 500 && delivered(&r.wires, 3) == 500
    });
    r.stop.store(true, Ordering::Relaxed);
    let o = r.handle.join().unwrap();
    let got0 = data_frames(&r.wires, 0);
    let got3 = data_frames(&r.wires, 3);
    let (got0, got3, a, b): (Vec<_>, Vec<_>, Vec<_>, Vec<_>) = (
        got0.iter().map(|f| unmarked(f)).collect(),
        got3.iter().map(|f| unmarked(f)).collect(),
        a.iter().map(|f| unmarked(f)).collect(),
        b.iter().map(|f| unmarked(f)).collect(),
    );
    assert!(
        got0 == a,
        "port 1 → port 0 (worker 1 → worker 0) changed or reordered frames"
    );
    assert!(
        got3 == b,
        "port 2 → port 3 (worker 0 → worker 1) changed or reordered frames"
    );
    assert_eq!(o.snapshot.totals.drops.total(), 0);
    assert_eq!(o.snapshot.buffer.used_cells, 0, "cells conserved");
    assert_eq!(o.snapshot.buffer.ingress_shared_cells, 0, "cells conserved");
    assert_eq!(o.snapshot.buffer.egress_shared_cells, 0, "cells conserved");
    for p in &o.snapshot.ports {
        assert_eq!(
            p.buffer.ingress_cells + p.buffer.egress_cells,
            0,
            "port {}: cells conserved",
            p.id
        );
    }
    assert_eq!(o.snapshot.ports[1].rx_packets, 500);
    // Every data frame crossed, and is counted so on the port it came in on, once.
    assert_eq!(o.snapshot.ports[1].crossed_out, 500);
    assert_eq!(o.snapshot.ports[2].crossed_out, 500);
    assert_eq!(o.tx_dropped, 0);
}

/// A port whose interface disappears is dropped from polling; the others keep switching.
#[test]
fn a_vanished_port_does_not_stop_the_switch() {
    let r = start(default_config(), 1);
    r.wires[1].lock().unwrap().to_switch.push_back(announce(1, 0).unwrap());
    wait_for("the announcement", || r.wires[0].lock().unwrap().from_switch.len() == 1);
    r.wires[3].lock().unwrap().vanished = true;
    r.wires[0].lock().unwrap().to_switch.extend(frames(0, 1, 200));
    wait_for("200 frames on port 1", || delivered(&r.wires, 1) == 200);
    r.stop.store(true, Ordering::Relaxed);
    let o = r.handle.join().unwrap();
    assert_eq!(o.snapshot.ports[1].tx_packets, 200);
    assert!(
        o.snapshot.ports.iter().all(|p| p.crossed_out == 0),
        "one worker: nothing crosses"
    );
}

/// Stopping drains what was admitted: a 10 Mb/s port holding a queue sends it all before the
/// run returns; with a drain timeout too short for that, the frames left are reported.
#[test]
fn stop_drains_or_reports_what_is_left() {
    for (timeout_ns, expect_all) in [(5_000_000_000u64, true), (1_000_000, false)] {
        let mut cfg = default_config();
        for p in &mut cfg.ports {
            p.speed_bps = 10_000_000;
        }
        cfg.run.drain_timeout_ns = timeout_ns;
        let r = start(cfg, 1);
        r.wires[1].lock().unwrap().to_switch.push_back(announce(1, 0).unwrap());
        wait_for("the announcement", || r.wires[0].lock().unwrap().from_switch.len() == 1);
        // 100 × 1 KiB at 10 Mb/s is 84 ms of wire time: most of it is still queued at stop.
        r.wires[0].lock().unwrap().to_switch.extend(frames(0, 1, 100));
        wait_for("frames admitted", || r.wires[0].lock().unwrap().to_switch.is_empty());
        r.stop.store(true, Ordering::Relaxed);
        let Running { wires, handle, .. } = r;
        let o = handle.join().unwrap();
        if expect_all {
            assert_eq!(delivered(&wires, 1), 100, "drain sent everything admitted");
            assert_eq!(o.undrained, 0);
        } else {
            assert!(o.undrained > 0, "a 1 ms drain cannot send 84 ms of frames");
            assert_eq!(delivered(&wires, 1) + o.undrained, 100, "sent + reported = admitted");
        }
    }
}

/// Whether the last PFC frame a sender received on `port` pauses priority 3 (an XOFF) rather
/// than resuming it (an XON), and how many PFC frames it has received.
fn pfc_state(wire: &Wire) -> (bool, usize) {
    let mut paused = false;
    let mut n = 0;
    for f in &wire.from_switch {
        if let Ok(dataplane::wire::MacControl::Pfc { enable, times }) = dataplane::wire::decode_mac_control(f) {
            if enable & (1 << 3) != 0 {
                paused = times[3] != 0;
                n += 1;
            }
        }
    }
    (paused, n)
}

/// Each sender honours PFC as a NIC would (at its next look): 8 frames a round while not
/// paused.
fn feed(r: &Running, flows: &[Vec<Vec<u8>>], next: &mut [usize; 3]) {
    for s in 0..3 {
        let mut w = r.wires[s].lock().unwrap();
        let (paused, _) = pfc_state(&w);
        if !paused && w.to_switch.len() < 8 && next[s] < flows[s].len() {
            let end = (next[s] + 8).min(flows[s].len());
            w.to_switch.extend(flows[s][next[s]..end].iter().cloned());
            next[s] = end;
        }
    }
}

/// A port that stops taking frames (a NIC or VM that stops reading: its transmit ring stays
/// full) backs up into the MMU and PFC instead of losing what left its queue: three senders
/// that honour PFC send lossless traffic to it while it is stalled, are paused, and once it
/// reads again every frame arrives, in order, with no drop anywhere. On the pipeline worker's
/// own port and across the I/O worker's rings.
#[test]
fn a_port_that_stops_taking_frames_backs_up_into_pfc_and_loses_nothing() {
    for workers in [1, 2] {
        let r = start(default_config(), workers);
        r.wires[3].lock().unwrap().tx_room = Some(0);
        for host in 0..3u16 {
            r.wires[host as usize]
                .lock()
                .unwrap()
                .to_switch
                .push_back(announce(host, 3).unwrap());
        }
        r.wires[3].lock().unwrap().to_switch.push_back(announce(3, 0).unwrap());
        wait_for("the switch has learnt host 3", || {
            r.wires[0]
                .lock()
                .unwrap()
                .from_switch
                .iter()
                .any(|f| f[6..12] == dataplane::tools::gen::host_mac(3))
        });
        const N: usize = 600;
        let flows: Vec<Vec<Vec<u8>>> = (0..3).map(|s| frames(s, 3, N as u64)).collect();
        let mut next = [0usize; 3];
        let deadline = Instant::now() + Duration::from_secs(20);
        while !(0..3).all(|s| pfc_state(&r.wires[s].lock().unwrap()).0) {
            assert!(
                Instant::now() < deadline,
                "workers={workers}: every sender should be paused"
            );
            feed(&r, &flows, &mut next);
            std::thread::sleep(Duration::from_micros(200));
        }
        assert_eq!(delivered(&r.wires, 3), 0, "the stalled port took nothing");
        // Stalled for a while longer: the senders stay paused (refreshed XOFF), nothing is lost.
        let until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < until {
            feed(&r, &flows, &mut next);
            std::thread::sleep(Duration::from_micros(200));
        }
        assert!(
            next.iter().all(|&n| n < N),
            "paused senders cannot have sent everything"
        );
        r.wires[3].lock().unwrap().tx_room = None;
        while next.iter().any(|&n| n < N) {
            assert!(
                Instant::now() < deadline,
                "workers={workers}: senders resumed ({next:?} of {N})"
            );
            feed(&r, &flows, &mut next);
            std::thread::sleep(Duration::from_micros(200));
        }
        wait_for("every frame at port 3", || delivered(&r.wires, 3) == 3 * N);
        r.stop.store(true, Ordering::Relaxed);
        let o = r.handle.join().unwrap();
        let got = data_frames(&r.wires, 3);
        for (s, flow) in flows.iter().enumerate() {
            let mine: Vec<Vec<u8>> = got
                .iter()
                .filter(|f| f[6..12] == flow[0][6..12])
                .map(|f| unmarked(f))
                .collect();
            let sent: Vec<Vec<u8>> = flow.iter().map(|f| unmarked(f)).collect();
            assert!(
                mine == sent,
                "workers={workers}: sender {s}'s frames changed or reordered"
            );
        }
        assert_eq!(
            o.snapshot.totals.drops.total(),
            0,
            "workers={workers}: {:?}",
            o.snapshot.totals.drops
        );
        assert_eq!(o.tx_dropped, 0, "workers={workers}: nothing lost at the port");
        for s in 0..3 {
            assert!(
                o.snapshot.ports[s].pfc_tx[3] > 0,
                "workers={workers}: PFC reached sender {s}"
            );
        }
        assert_eq!(o.snapshot.buffer.used_cells, 0, "cells conserved");
    }
}

/// Frames a port's receive ring lost before the switch read them (the kernel's or the NIC's
/// count) are drops of the port like the switch's own (`rx_ring`), summed once per loss and
/// counted by the shard that owns the port, with one worker or two. Before, they showed only
/// in the backend's table and a line at exit, and `drops` read `-` while a lossless flow lost
/// thousands of frames.
#[test]
fn frames_the_receive_ring_lost_are_counted_as_drops() {
    for workers in [1, 2] {
        let r = start(default_config(), workers);
        r.wires[1].lock().unwrap().ring_drops = 40;
        // Counted about once a second: let two looks pass, the second finding nothing new.
        std::thread::sleep(Duration::from_millis(2300));
        r.wires[1].lock().unwrap().ring_drops = 45;
        r.stop.store(true, Ordering::Relaxed);
        let out = r.handle.join().unwrap();
        let p1 = &out.snapshot.ports[1];
        assert_eq!(p1.drops.get("rx_ring"), 45, "{workers} worker(s): {:?}", p1.drops);
        assert_eq!(out.snapshot.totals.drops.get("rx_ring"), 45, "{workers} worker(s)");
        for (i, p) in out.snapshot.ports.iter().enumerate().filter(|&(i, _)| i != 1) {
            assert_eq!(p.drops.get("rx_ring"), 0, "port {i}, {workers} worker(s)");
        }
    }
}

/// `RunOptions::ready` comes once, after every port is open, with one worker and with two:
/// scripts start their traffic on `rocesw run`'s "switching" line, which it prints, and a
/// frame sent to an AF_PACKET port before its socket exists is lost where nothing counts it.
#[test]
fn ready_comes_once_every_port_is_open() {
    for workers in [1, 2] {
        let cfg = on_workers(default_config(), workers);
        let n = cfg.ports.len();
        let events = Arc::new(Mutex::new(Vec::<String>::new()));
        let (opened, said) = (events.clone(), events.clone());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::spawn(move || {
            let opts = dataplane::runtime::worker::RunOptions {
                seed: 1,
                control: None,
                open: Box::new(move |p| {
                    opened.lock().unwrap().push(format!("open {}", p.id));
                    Ok(Box::new(TestPort {
                        name: format!("t{}", p.id),
                        wire: Arc::new(Mutex::new(Wire::default())),
                    }) as Box<dyn dataplane::io::PortBackend + Send>)
                }),
                ready: Some(Box::new(move || said.lock().unwrap().push("ready".into()))),
            };
            dataplane::runtime::worker::run(&cfg, opts, s, None).expect("run")
        });
        wait_for("ready", || events.lock().unwrap().iter().any(|e| e == "ready"));
        stop.store(true, Ordering::Relaxed);
        handle.join().unwrap();
        let events = events.lock().unwrap();
        assert_eq!(events.len(), n + 1, "{workers} worker(s): {events:?}");
        assert_eq!(
            events.last().map(String::as_str),
            Some("ready"),
            "{workers} worker(s): {events:?}"
        );
    }
}

/// Issue 41: a host that stops reading (a VM whose virtqueue is full: its port's transmit ring
/// has no room) is still paused by the switch's PFC, through its emulated peer, which hears the
/// switch's PFC on its emulated wire whatever the host's receive queue holds. Three such hosts
/// write a 3→1 lossless incast at once and never read: nothing is dropped, and every frame
/// reaches port 3. Before, the XOFF waited for room on the full ring, the peers never paused,
/// and their frames ran into the headroom.
#[test]
fn an_emulated_peer_is_paused_while_its_host_does_not_read() {
    for workers in [1, 2] {
        let mut cfg = default_config();
        for p in &mut cfg.ports {
            p.peer = controlplane::model::PeerKind::Emulated;
        }
        let r = start(cfg, workers);
        r.wires[3].lock().unwrap().to_switch.push_back(announce(3, 0).unwrap());
        wait_for("the switch has learnt host 3", || {
            r.wires[0]
                .lock()
                .unwrap()
                .from_switch
                .iter()
                .any(|f| f[6..12] == dataplane::tools::gen::host_mac(3))
        });
        const N: usize = 2000;
        for s in 0..3usize {
            let mut w = r.wires[s].lock().unwrap();
            w.tx_room = Some(0);
            w.to_switch.extend(frames(s as u16, 3, N as u64));
        }
        wait_for("every frame at port 3", || delivered(&r.wires, 3) == 3 * N);
        r.stop.store(true, Ordering::Relaxed);
        let o = r.handle.join().unwrap();
        assert_eq!(
            o.snapshot.totals.drops.total(),
            0,
            "workers={workers}: {:?}",
            o.snapshot.totals.drops
        );
        let pfc: u64 = o.snapshot.ports[..3].iter().map(|p| p.pfc_tx[3]).sum();
        assert!(pfc > 0, "workers={workers}: the incast made the switch send PFC");
    }
}
