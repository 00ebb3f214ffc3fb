//! The DPDK packet path allocates nothing (issue 8, item 6): `no_alloc.rs`'s congested 3→1
//! incast, but every frame enters and leaves through the DPDK port backend (`io::dpdk`):
//! four `net_ring` ports, DPDK's loopback device (what a port transmits, it receives). Each
//! round, the hosts on ports 0-2 put a burst of 32 RoCEv2 frames on their wire (sent and
//! flushed through the port, so they come back as its receive burst, where only the host's
//! frames are kept: the switch's own output loops back too); the switch receives
//! every port's burst (`rx_burst`, mbuf data, `Switch::burst_rx`), runs its timers, transmits
//! what each port's line rate and ring allow (`send`: an mbuf from the shared pool,
//! `flush`: `tx_burst`), and the host on port 3 takes what arrived (and checks its ICRC). A
//! counting global allocator watches a steady state of 2000 such rounds, with queues built,
//! WRED marking, PFC going out and lossy drops.
//!
//! `cargo test -p rocesw-dataplane --features dpdk --test no_alloc_dpdk` (root, as the EAL).

/// Without DPDK there is nothing to run: say so rather than pass silently.
#[cfg(not(feature = "dpdk"))]
#[test]
fn skipped_without_the_dpdk_feature() {
    eprintln!(
        "skipped: built without the `dpdk` feature \
         (cargo test -p rocesw-dataplane --features dpdk --test no_alloc_dpdk)"
    );
}

#[cfg(feature = "dpdk")]
mod common;
#[cfg(feature = "dpdk")]
mod counting_alloc;

#[cfg(feature = "dpdk")]
mod with_dpdk {
    use super::common::*;
    use super::counting_alloc::{ALLOCS, COUNTING};
    use dataplane::io::dpdk::{DpdkPort, DpdkRuntime};
    use dataplane::io::PortBackend;
    use dataplane::tools::gen::{announce, host_mac};
    use dataplane::wire::{parse_into, verify_icrc, FrameInfo};
    use dataplane::Switch;
    use dataplane::TxSink;
    use std::sync::atomic::Ordering;

    /// The switch's transmit side onto the DPDK ports, as the pipeline worker's.
    struct Ports<'a>(&'a mut [DpdkPort]);

    impl TxSink for Ports<'_> {
        fn room(&mut self, port: usize) -> usize {
            self.0[port].tx_room()
        }
        fn transmit(&mut self, port: usize, frame: &[u8], _at_ns: u64) {
            assert!(self.0[port].send(frame).unwrap(), "room was offered");
        }
    }

    #[derive(Default)]
    struct Host3 {
        data: u64,
        ce: u64,
        bad_icrc: u64,
    }

    #[test]
    fn dpdk_ports_do_not_allocate_per_packet() {
        let dir = tempfile::Builder::new().prefix("rocesw-noalloc-").tempdir().unwrap();
        let path = ports_config(dir.path(), |id| format!("dpdk = \"net_ring{id}\""), "");
        let cfg = controlplane::load_file(&path).unwrap().config;
        let rt = DpdkRuntime::start(&cfg).unwrap().expect("DPDK ports");
        let mut ports: Vec<DpdkPort> = cfg.ports.iter().map(|p| rt.open(p).unwrap()).collect();
        assert!(ports.iter().all(|p| p.driver() == "net_ring"));
        let mut sw = Switch::new(&cfg, 1);
        let flows: Vec<Vec<Vec<u8>>> = (0..3).map(|s| burst32(s, 3, if s == 2 { 0 } else { 26 })).collect();

        let mut now = 1_000u64;
        let mut host3 = Host3::default();
        let mut info = FrameInfo::EMPTY;
        // Host 3 speaks first, so the switch learns where it is.
        assert!(ports[3].send(&announce(3, 0).unwrap()).unwrap());
        ports[3].flush().unwrap();
        let mut round = |sw: &mut Switch, ports: &mut [DpdkPort], now: u64| {
            for (s, burst) in flows.iter().enumerate() {
                for f in burst {
                    if !ports[s].send(f).unwrap() {
                        break; // the ring is full: the host waits, as a paused NIC would
                    }
                }
                ports[s].flush().unwrap();
            }
            for (p, port) in ports.iter_mut().enumerate().take(3) {
                // A loopback carries the switch's own output on this port too (floods, PFC):
                // only the host's frames are its wire's receive side.
                let host = host_mac(p as u16);
                let mut rx = sw.burst_rx(p, now);
                port.recv_burst(32, &mut |f| {
                    if f[6..12] == host {
                        rx.receive(f)
                    }
                })
                .unwrap();
            }
            sw.poll(now);
            for p in 0..4 {
                sw.transmit(p, now, &mut Ports(ports));
            }
            for port in ports.iter_mut() {
                port.flush().unwrap();
            }
            // Host 3's NIC: what port 3 sent.
            ports[3]
                .recv_burst(32, &mut |f| {
                    if parse_into(f, usize::MAX, &mut info).is_ok() && info.is_roce() {
                        host3.data += 1;
                        host3.ce += u64::from(f[15] & 3 == 3);
                        host3.bad_icrc += u64::from(!verify_icrc(f, &info));
                    }
                })
                .unwrap();
        };
        {
            // The announcement in, then a warm-up (per-lcore mempool caches fill, the FDB
            // learns, queues reach their steady state).
            let mut rx = sw.burst_rx(3, now);
            ports[3].recv_burst(32, &mut |f| rx.receive(f)).unwrap();
        }
        for _ in 0..200 {
            round(&mut sw, &mut ports, now);
            now += 32 * 336;
        }
        let before = sw.snapshot(now);
        COUNTING.store(true, Ordering::SeqCst);
        for _ in 0..2000 {
            round(&mut sw, &mut ports, now);
            now += 32 * 336;
        }
        COUNTING.store(false, Ordering::SeqCst);
        let allocs = ALLOCS.load(Ordering::SeqCst);
        let snap = sw.snapshot(now);
        let d = |f: fn(&dataplane::report::PortReport) -> u64, p: usize| f(&snap.ports[p]) - f(&before.ports[p]);
        eprintln!(
            "counted rounds: port 0 sent {} PFC, port 3 sent {} frames ({} CE), drops since start {:?}; host 3 got {} ({} CE)",
            d(|p| p.pfc_tx[3], 0),
            d(|p| p.tx_packets, 3),
            d(|p| p.ecn_marked, 3),
            snap.totals.drops,
            host3.data,
            host3.ce
        );
        assert!(
            d(|p| p.pfc_tx[3], 0) > 0 && d(|p| p.ecn_marked, 3) > 0,
            "the counted rounds were congested: PFC out of port 0, CE marks on port 3"
        );
        assert!(d(|p| p.tx_packets, 3) > 10_000, "frames left port 3 at its line rate");
        assert!(host3.data > 10_000 && host3.ce > 0, "host 3 received them");
        assert_eq!(host3.bad_icrc, 0, "ICRC intact through the DPDK ports");
        for (i, p) in ports.iter_mut().enumerate() {
            let s = p.stats();
            assert_eq!((s.tx_nombuf, s.rx_nombuf, s.imissed), (0, 0, 0), "port {i}: {s:?}");
        }
        assert_eq!(allocs, 0, "{allocs} allocations on the DPDK packet path");
    }
}
