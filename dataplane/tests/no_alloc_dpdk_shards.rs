//! The DPDK packet path allocates nothing with two workers (issue 20, item 4): the real
//! workers (`runtime::worker::run`, as `rocesw run` starts them) on four DPDK `net_pcap` ports,
//! each replaying a capture of lossless RoCEv2 frames in a loop (`infinite_rx=1`) to the host
//! on its partner port and transmitting into /dev/null. Ports 0 and 1 are worker 0's, 2 and 3
//! worker 1's, and the pairs are 0↔2 and 1↔3: every frame crosses between the workers, its
//! mbuf with it (and is freed on the other worker's thread), and every release crosses back.
//! The sources ignore PFC, so when the workers outrun the 25G ports the counted time also has
//! XOFF, headroom drops and back-pressure between the shards. A counting global allocator watches every thread the
//! switch started (by name) and the one that runs worker 0.
//!
//! `cargo test -p rocesw-dataplane --features dpdk --test no_alloc_dpdk_shards` (root, as the
//! EAL). A binary of its own: the EAL starts once per process.

/// Without DPDK there is nothing to run: say so rather than pass silently.
#[cfg(not(feature = "dpdk"))]
#[test]
fn skipped_without_the_dpdk_feature() {
    eprintln!(
        "skipped: built without the `dpdk` feature \
         (cargo test -p rocesw-dataplane --features dpdk --test no_alloc_dpdk_shards)"
    );
}

#[cfg(feature = "dpdk")]
mod common;
#[cfg(feature = "dpdk")]
mod counting_alloc;

#[cfg(feature = "dpdk")]
#[test]
fn two_workers_on_dpdk_ports_do_not_allocate() {
    use common::*;
    use controlplane::model::StaticMac;
    use counting_alloc::{mark_this_thread, ALLOCS, COUNTING, ONLY_MARKED};
    use dataplane::io::dpdk::DpdkRuntime;
    use dataplane::io::PortBackend;
    use dataplane::runtime::worker::{self, RunOptions};
    use dataplane::tools::gen::{host_mac, write_pcap, BASE_NS};
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    let dir = tempfile::Builder::new()
        .prefix("rocesw-noalloc-shards-")
        .tempdir()
        .unwrap();
    let partner = [2u16, 3, 0, 1];
    for id in 0..4u16 {
        let frames = burst32(id, partner[id as usize], 26);
        let timed = frames
            .into_iter()
            .enumerate()
            .map(|(i, f)| (i as u64 * 336, f))
            .collect();
        write_pcap(&dir.path().join(format!("in{id}.pcap")), BASE_NS, timed).unwrap();
    }
    let d = dir.path().to_str().unwrap().to_string();
    let path = ports_config(
        dir.path(),
        |id| {
            format!(
                "worker = {}\ndpdk = \"net_pcap{id},rx_pcap={d}/in{id}.pcap,tx_pcap=/dev/null,infinite_rx=1\"",
                id / 2
            )
        },
        "\n[run]\nworkers = 2\n",
    );
    let mut cfg = controlplane::load_file(&path).unwrap().config;
    cfg.fdb.learning = false;
    cfg.fdb.static_entries = (0..4)
        .map(|i| StaticMac {
            mac: host_mac(i),
            port: i,
        })
        .collect();

    let rt = DpdkRuntime::start(&cfg).unwrap().expect("DPDK ports");
    let ports: Arc<Mutex<BTreeMap<u16, Box<dyn PortBackend + Send>>>> = Arc::default();
    for p in &cfg.ports {
        let port = rt.open(p).unwrap();
        assert_eq!(port.driver(), "net_pcap");
        ports.lock().unwrap().insert(p.id, Box::new(port));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (s2, p2, cfg2) = (stop.clone(), ports.clone(), cfg.clone());
    let handle = std::thread::spawn(move || {
        mark_this_thread();
        let opts = RunOptions {
            ready: None,
            seed: 1,
            control: None,
            open: Box::new(move |p| Ok(p2.lock().unwrap().remove(&p.id).expect("each port opened once"))),
        };
        worker::run(&cfg2, opts, s2, None).expect("run")
    });
    // Warm-up: mempool caches fill, queues and PGs reach their steady state.
    std::thread::sleep(Duration::from_millis(700));
    let before = ALLOCS.load(Ordering::SeqCst);
    ONLY_MARKED.store(true, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(1500));
    COUNTING.store(false, Ordering::SeqCst);
    ONLY_MARKED.store(false, Ordering::SeqCst);
    let allocs = ALLOCS.load(Ordering::SeqCst) - before;
    stop.store(true, Ordering::Relaxed);
    let out = handle.join().unwrap();
    let s = &out.snapshot;
    eprintln!(
        "rx per port {:?}, tx per port {:?}, pfc_tx[3] {:?}, drops {:?}",
        s.ports.iter().map(|p| p.rx_packets).collect::<Vec<_>>(),
        s.ports.iter().map(|p| p.tx_packets).collect::<Vec<_>>(),
        s.ports.iter().map(|p| p.pfc_tx[3]).collect::<Vec<_>>(),
        s.totals.drops
    );
    // How many depends on how busy the machine is (two spinning workers on two cores); that
    // frames crossed both ways while counted is what matters here.
    for p in &s.ports {
        assert!(
            p.tx_packets > 1_000,
            "port {} sent its partner's frames: {}",
            p.id,
            p.tx_packets
        );
    }
    drop(rt);
    assert_eq!(allocs, 0, "{allocs} allocations on two workers' DPDK packet path");
}
