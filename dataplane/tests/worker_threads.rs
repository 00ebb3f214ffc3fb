//! `rocesw run`'s workers on in-memory ports shared with the test: frames cross between the
//! pipeline worker and an I/O worker, a port that vanishes does not stop the others, and a stop
//! drains what was admitted (or reports what the drain timeout left).

mod common;
use common::*;
use controlplane::Config;
use dataplane::io::PortBackend;
use dataplane::runtime::worker::{self, RunOptions, RunOutcome};
use dataplane::tools::gen::{announce, Flow};
use dataplane::wire::Ecn;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Running {
    wires: Vec<Arc<Mutex<Wire>>>,
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<RunOutcome>,
}

fn start(mut cfg: Config, workers: usize) -> Running {
    cfg.run.workers = workers;
    cfg.run.idle_sleep_ns = Some(20_000);
    for (i, p) in cfg.ports.iter_mut().enumerate() {
        p.worker = i % workers;
    }
    let wires: Vec<Arc<Mutex<Wire>>> = cfg.ports.iter().map(|_| Arc::default()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let (w2, s2) = (wires.clone(), stop.clone());
    let handle = std::thread::spawn(move || {
        let opts = RunOptions {
            seed: 1,
            control: None,
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
    Running { wires, stop, handle }
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

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn delivered(wires: &[Arc<Mutex<Wire>>], port: usize) -> usize {
    wires[port]
        .lock()
        .unwrap()
        .from_switch
        .iter()
        .filter(|f| f.len() == 1024)
        .count()
}

/// Ports 1 and 3 belong to the I/O worker: frames from port 1 (I/O worker) to port 0 (pipeline
/// worker) and from port 2 to port 3 cross the rings both ways, intact and counted once.
#[test]
fn frames_cross_between_pipeline_and_io_workers() {
    let r = start(default_config(), 2);
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
    let got0: Vec<Vec<u8>> = r.wires[0]
        .lock()
        .unwrap()
        .from_switch
        .iter()
        .filter(|f| f.len() == 1024)
        .cloned()
        .collect();
    let got3: Vec<Vec<u8>> = r.wires[3]
        .lock()
        .unwrap()
        .from_switch
        .iter()
        .filter(|f| f.len() == 1024)
        .cloned()
        .collect();
    assert!(
        got0 == a,
        "port 1 → port 0 (I/O worker → pipeline worker) changed or reordered frames"
    );
    assert!(
        got3 == b,
        "port 2 → port 3 (pipeline worker → I/O worker) changed or reordered frames"
    );
    assert_eq!(o.snapshot.totals.drops.total(), 0);
    assert_eq!(o.snapshot.buffer.used_cells, 0, "cells conserved");
    assert_eq!(o.snapshot.ports[1].rx_packets, 500);
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
