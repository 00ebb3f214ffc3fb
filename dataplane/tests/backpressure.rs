//! The emulated NIC's back-pressure through the real-time worker (`worker::run`): a host that
//! writes far more than its wire carries gets a PFC XOFF from the port for that priority, sent
//! on the port itself (not through the switch's pipeline), then an XON once the emulated wire
//! has drained it. Lossy traffic, so every PFC frame on that port is the NIC's, not the
//! switch's. In-memory ports: no root, no interfaces.

mod common;

use common::ports_config;
use dataplane::io::{MemPort, PortBackend, PortError, PortStats};
use dataplane::runtime::worker::{self, RunOptions};
use dataplane::tools::gen::{announce, Flow};
use dataplane::wire::{decode_mac_control, MacControl};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A `MemPort` the test keeps a handle on while the worker owns the port.
struct Shared(String, Arc<Mutex<MemPort>>);

impl PortBackend for Shared {
    fn recv_burst(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, PortError> {
        self.1.lock().unwrap().recv_burst(max, f)
    }
    fn send(&mut self, frame: &[u8]) -> Result<bool, PortError> {
        self.1.lock().unwrap().send(frame)
    }
    fn tx_room(&mut self) -> usize {
        self.1.lock().unwrap().tx_room()
    }
    fn flush(&mut self) -> Result<(), PortError> {
        self.1.lock().unwrap().flush()
    }
    fn link_up(&mut self) -> bool {
        self.1.lock().unwrap().link_up()
    }
    fn name(&self) -> &str {
        &self.0
    }
    fn stats(&mut self) -> PortStats {
        self.1.lock().unwrap().stats()
    }
}

#[test]
fn a_host_ahead_of_its_emulated_wire_is_paused_then_released() {
    let dir = tempfile::tempdir().unwrap();
    let path = ports_config(dir.path(), |_| "speed = \"500M\"\npeer = \"emulated\"".into(), "");
    let cfg = controlplane::load_file(&path).unwrap().config;
    let ports: Vec<Arc<Mutex<MemPort>>> = (0..4)
        .map(|i| Arc::new(Mutex::new(MemPort::new(format!("m{i}"), 4096))))
        .collect();
    // Host 0 makes itself known; host 1 has written 600 lossy 1 KiB frames (about 630 KB, over
    // the 256 KiB mark) before the switch's first round, 10 ms of its 500 Mb/s wire.
    ports[0].lock().unwrap().push_rx(&announce(0, 1).unwrap());
    let flow = Flow {
        src: 1,
        dst: 0,
        dscp: 0,
        ecn: dataplane::wire::Ecn::NotEct,
        qp: 1,
        frame_len: 1024,
        count: 600,
        start_ns: 0,
        rate_bps: 1_000_000_000,
    };
    for (_, f) in flow.frames().unwrap() {
        ports[1].lock().unwrap().push_rx(&f);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let handles = ports.clone();
    let opts = RunOptions {
        ready: None,
        seed: 1,
        control: None,
        open: Box::new(move |p| {
            let port = Shared(format!("m{}", p.id), handles[p.id as usize].clone());
            Ok(Box::new(port) as Box<dyn PortBackend + Send>)
        }),
    };
    let s = stop.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        s.store(true, Ordering::Relaxed);
    });
    let outcome = worker::run(&cfg, opts, stop, None).expect("switch runs");
    stopper.join().unwrap();

    // Every PFC frame that left port 1, in order: the NIC's XOFF for priority 0, then its XON.
    let mut pfc = Vec::new();
    let mut host1 = ports[1].lock().unwrap();
    while let Some(f) = host1.pop_tx() {
        if let Ok(MacControl::Pfc { enable, times }) = decode_mac_control(&f) {
            pfc.push((enable, times[0]));
        }
    }
    assert!(pfc.len() >= 2, "PFC frames to host 1: {pfc:?}");
    assert_eq!(pfc[0], (1, 65535), "first an XOFF for priority 0: {pfc:?}");
    assert_eq!(*pfc.last().unwrap(), (1, 0), "last an XON: {pfc:?}");
    let p1 = &outcome.snapshot.ports[1];
    let peer = p1.peer.expect("port 1 has an emulated peer");
    assert_eq!(
        peer.backpressure_xoff[0],
        pfc.iter().filter(|(_, t)| *t != 0).count() as u64,
        "each XOFF on the wire counted"
    );
    // None of it is the switch's: lossy traffic never makes it send PFC.
    assert!(outcome.snapshot.ports.iter().all(|p| p.pfc_tx.iter().all(|&n| n == 0)));
    // And the frames themselves crossed to host 0.
    assert!(
        outcome.snapshot.ports[0].tx_packets >= 600,
        "{}",
        outcome.snapshot.ports[0].tx_packets
    );
}
