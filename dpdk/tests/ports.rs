//! The wrapper against real DPDK drivers, in one process with one EAL (`rte_eal_init` runs
//! once per process, so everything that needs it is one test run in order).
//!
//! Virtual devices only, no hugepages, no PCI: runs anywhere DPDK is installed, as root.
//! `net_ring` is a loopback port (what it transmits it receives, through a DPDK ring of
//! fixed size, which is also how a full transmit ring is made); `net_null` receives endless
//! 64-byte frames and swallows everything it transmits.

use dpdk::{AllocError, DeviceSpec, Eal, EalArgs, ErrorKind, EthPort, Mbuf, MbufBurst, Mempool, PortConfig};
use std::collections::BTreeSet;

const DEVICES: [&str; 3] = ["net_ring0", "net_null0", "net_null1"];

fn dev_shm() -> BTreeSet<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A frame whose bytes say which frame it is: `seq` in the first 4 bytes, then a pattern
/// that depends on both the position and `seq`.
fn frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(seq) as u8)
        .collect();
    f[..4].copy_from_slice(&seq.to_be_bytes());
    f
}

fn seq_of(m: &Mbuf) -> u32 {
    u32::from_be_bytes(m.data()[..4].try_into().unwrap())
}

#[test]
fn dpdk_end_to_end() {
    let shm_before = dev_shm();
    let args = EalArgs::default_for_vdevs(&DEVICES).unwrap();
    let prefix = args.file_prefix().unwrap().to_string();
    let args = args.into_vec();

    let eal = Eal::init(&args).unwrap_or_else(|e| panic!("{e}"));
    eal_is_once_per_process(&args);
    leaves_no_runtime_files(&prefix);
    the_calling_thread_is_not_pinned();

    let pool = Mempool::new("test_pool", 8191, 256, 2048).unwrap();
    mempool_errors_say_why();
    mbufs_hold_frames(&pool);
    stack_pools_hand_back_the_latest_freed(eal);

    bad_devices_get_clear_errors();
    configure_errors_name_the_port(&pool);
    ring_port_loops_frames_back_intact(&pool);
    full_tx_ring_is_back_pressure(&pool);
    hotplugged_port_works(&pool);
    null_ports_forward_and_count(&pool);
    threads_register_as_lcores(eal);

    assert_eq!(pool.in_use(), 0, "every mbuf returned to the pool");
    drop(pool);
    let leaked: Vec<_> = dev_shm().difference(&shm_before).cloned().collect();
    assert!(leaked.is_empty(), "left in /dev/shm: {leaked:?}");
}

fn eal_is_once_per_process(args: &[String]) {
    // The same arguments: the same EAL.
    let again = Eal::init(args).unwrap();
    assert_eq!(again.args(), args);
    // Other arguments: an error naming both.
    let other = EalArgs::default_for_vdevs(&["net_null7"]).unwrap().into_vec();
    let e = Eal::init(&other).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::EalState);
    let m = e.to_string();
    assert!(m.contains(&args.join(" ")) && m.contains("net_null7"), "{m}");
}

fn leaves_no_runtime_files(prefix: &str) {
    let dir = std::path::Path::new("/var/run/dpdk").join(prefix);
    assert!(!dir.exists(), "{} left behind", dir.display());
}

fn the_calling_thread_is_not_pinned() {
    // The EAL pins its main thread to its lcore's CPUs; EalArgs gives that lcore every CPU
    // the process had, so the switch's own pinning stays in charge.
    // SAFETY: plain data, zeroed is valid; the call writes within it.
    let (set, ok) = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let ok = libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
        (set, ok)
    };
    assert_eq!(ok, 0);
    // SAFETY: CPU_COUNT reads within the set.
    let allowed = unsafe { libc::CPU_COUNT(&set) } as usize;
    let online = std::thread::available_parallelism().unwrap().get();
    assert_eq!(allowed, online, "EAL init narrowed this thread's CPUs");
}

fn mempool_errors_say_why() {
    let e = Mempool::new("test_pool", 1023, 0, 2048).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Mempool);
    assert!(e.to_string().contains("already exists"), "{e}");
    let e = Mempool::new("huge_pool", 4_000_000, 0, 9000).unwrap_err();
    assert!(e.to_string().contains("not enough DPDK memory"), "{e}");
    let e = Mempool::new("cachy", 100, 512, 2048).unwrap_err();
    assert!(e.to_string().contains("cache of 512 is too large"), "{e}");
    let e = Mempool::new("jumbo", 100, 0, 65535).unwrap_err();
    assert!(e.to_string().contains("headroom"), "{e}");
}

/// A stack handler hands back the mbuf freed last, also when another thread freed it (what
/// the switch's workers do with frames that cross); DPDK's default ring hands back the
/// oldest free one. Caches off, so every get and put reaches the handler.
fn stack_pools_hand_back_the_latest_freed(_eal: &'static Eal) {
    let ring = Mempool::new("ring_pool", 63, 0, 2048).unwrap();
    assert_eq!(ring.ops(), "ring_mp_mc");
    for ops in ["ring_mp_mc", "stack", "lf_stack"] {
        let pool = Mempool::with_ops(&format!("{ops}_pool"), 63, 0, 2048, Some(ops)).unwrap();
        assert_eq!(pool.ops(), ops);
        let (a, b) = (pool.alloc().unwrap(), pool.alloc().unwrap());
        let b_at = b.data().as_ptr() as usize;
        std::thread::spawn(move || {
            drop(a);
            drop(b);
        })
        .join()
        .unwrap();
        assert_eq!(pool.available(), 63, "{ops}");
        let next = pool.alloc().unwrap().data().as_ptr() as usize;
        assert_eq!(
            next == b_at,
            ops != "ring_mp_mc",
            "{ops}: the next mbuf after two frees"
        );
    }
    let e = Mempool::with_ops("nosuch_pool", 63, 0, 2048, Some("no_such_ops")).unwrap_err();
    assert!(e.to_string().contains("no mempool handler 'no_such_ops'"), "{e}");
}

fn mbufs_hold_frames(pool: &Mempool) {
    assert_eq!(pool.frame_room(), 2048);
    let in_use = pool.in_use();
    let f = frame(7, 1500);
    let mut m = pool.alloc_copy(&f).unwrap();
    assert_eq!((m.len(), m.segments()), (1500, 1));
    assert_eq!(m.data(), &f[..]);
    m.data_mut()[5] ^= 0xff;
    assert_ne!(m.data(), &f[..]);
    assert_eq!(m.tailroom(), 2048 - 1500);
    assert!(m.set_len(2049).is_err());
    m.set_len(60).unwrap();
    assert_eq!(m.data().len(), 60);

    // Raw round trip, as descriptor storage does it.
    let raw = m.into_raw();
    // SAFETY: just given up by into_raw.
    let m = unsafe { Mbuf::from_raw(raw) };
    assert_eq!(&m.data()[..4], &7u32.to_be_bytes());
    assert_eq!(pool.in_use(), in_use + 1);
    drop(m);
    assert_eq!(pool.in_use(), in_use);

    assert_eq!(
        pool.alloc_copy(&[0; 2049]).unwrap_err(),
        AllocError::TooLong { len: 2049, room: 2048 }
    );
    let empty = pool.alloc().unwrap();
    assert!(empty.is_empty());
    drop(empty);

    // A tiny pool runs dry and says so.
    let tiny = Mempool::new("tiny", 4, 0, 128).unwrap();
    let held: Vec<Mbuf> = (0..4).map(|_| tiny.alloc().unwrap()).collect();
    assert!(tiny.alloc().is_none());
    assert_eq!(tiny.alloc_copy(&[1]).unwrap_err(), AllocError::Exhausted);
    drop(held);
    assert_eq!(tiny.available(), 4);
    // A pool with every mbuf home is freed on drop: its name is free again.
    drop(tiny);
    drop(Mempool::new("tiny", 4, 0, 128).unwrap());
    // A pool dropped while one of its mbufs is out is kept (leaked), not freed under it.
    let scratch = Mempool::new("scratch", 63, 0, 256).unwrap();
    let out = scratch.alloc_copy(&[1, 2, 3]).unwrap();
    drop(scratch);
    assert_eq!(out.data(), &[1, 2, 3]);
    drop(out);
    let e = Mempool::new("scratch", 63, 0, 256).unwrap_err();
    assert!(e.to_string().contains("already exists"), "{e}");

    let mut burst = MbufBurst::new(4);
    for i in 0..4 {
        burst.push(pool.alloc_copy(&frame(i, 64)).unwrap()).unwrap();
    }
    let extra = pool.alloc().unwrap();
    assert!(burst.push(extra).is_err(), "a full burst gives the mbuf back");
    let seqs: Vec<u32> = burst.as_slice().iter().map(seq_of).collect();
    assert_eq!(seqs, [0, 1, 2, 3]);
    burst.clear();
    assert_eq!(pool.in_use(), in_use, "clear and refused pushes free their mbufs");
}

fn bad_devices_get_clear_errors() {
    let e = EthPort::open("net_foo0").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoSuchDriver, "{e}");
    let m = e.to_string();
    assert!(m.contains("no such driver 'net_foo'"), "{m}");
    assert!(m.contains(Eal::pmd_dir()) && m.contains("install dpdk"), "{m}");
    assert!(Eal::pmd_dir().contains("/dpdk/pmds-"), "{}", Eal::pmd_dir());

    let e = EthPort::by_name("net_ring0,,x").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::MalformedDevice);
    assert!(e.to_string().contains("'net_ring0,,x'"), "{e}");
    let e = EthPort::open("ring 0").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::MalformedDevice);

    // Well-formed, installed driver, but not given to the EAL.
    let e = EthPort::by_name("net_ring3").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoSuchPort);
    assert!(e.to_string().contains("--vdev net_ring3"), "{e}");

    // Well-formed, installed driver, arguments it refuses.
    let e = EthPort::open("net_null4,no_such_key=1").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoSuchPort, "{e}");
    let m = e.to_string();
    assert!(m.contains("net_null4") && m.contains("arguments"), "{m}");

    // A PCI device with an EAL started without PCI and hugepages.
    let e = EthPort::by_name("0000:3b:00.0").unwrap_err();
    assert!(e.to_string().contains("hugepages"), "{e}");

    // One handle per port.
    let p = EthPort::by_name("net_null1").unwrap();
    let e = EthPort::by_name("net_null1").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PortBusy);
    drop(p);
}

fn configure_errors_name_the_port(pool: &Mempool) {
    let mut p = EthPort::open("net_ring0").unwrap();
    let info = p.info().unwrap();
    let cfg = PortConfig {
        rx_queues: info.max_rx_queues + 1,
        ..PortConfig::default()
    };
    let e = p.configure(&cfg, pool).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Port);
    let m = e.to_string();
    assert!(m.starts_with("port net_ring0 (net_ring):"), "{m}");
    assert!(m.contains(&format!("1 to {}", info.max_rx_queues)), "{m}");

    let small = Mempool::new("small_frames", 255, 0, 512).unwrap();
    let e = p.configure(&PortConfig::default(), &small).unwrap_err();
    assert!(e.to_string().contains("do not fit"), "{e}");
    let e = p.start().unwrap_err();
    assert!(e.to_string().contains("configure it first"), "{e}");
    // A port that is not started moves nothing.
    let mut burst = MbufBurst::new(8);
    assert_eq!(p.rx_burst(&mut burst), 0);
    burst.push(pool.alloc().unwrap()).unwrap();
    assert_eq!(p.tx_burst(&mut burst), 0);
    assert_eq!(burst.len(), 1);
}

fn open_started(name: &str, cfg: &PortConfig, pool: &Mempool) -> EthPort {
    let mut p = EthPort::open(name).unwrap_or_else(|e| panic!("{e}"));
    p.configure(cfg, pool).unwrap_or_else(|e| panic!("{e}"));
    p.start().unwrap_or_else(|e| panic!("{e}"));
    p
}

fn ring_port_loops_frames_back_intact(pool: &Mempool) {
    let mut p = open_started("net_ring0", &PortConfig::default(), pool);
    assert_eq!(p.driver_name(), "net_ring");
    let link = p.link().unwrap();
    assert!(link.up, "{link:?}");
    assert!(link.speed_mbps.is_some(), "{link:?}");
    let _ = p.mac().unwrap();
    let before = p.stats().unwrap();
    assert_eq!((before.ipackets, before.opackets), (0, 0));

    let sizes = [60usize, 64, 128, 1000, 1514, 2048, 61, 999];
    let frames: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &n)| frame(i as u32, n)).collect();
    let mut tx = MbufBurst::new(MbufBurst::DEFAULT_CAPACITY);
    for f in &frames {
        tx.push(pool.alloc_copy(f).unwrap()).unwrap();
    }
    assert_eq!(p.tx_burst(&mut tx), frames.len());
    assert!(tx.is_empty());

    let mut rx = MbufBurst::new(MbufBurst::DEFAULT_CAPACITY);
    assert_eq!(p.rx_burst(&mut rx), frames.len());
    for (m, f) in rx.as_slice().iter().zip(&frames) {
        assert_eq!(m.data(), &f[..], "frame {} changed in transit", seq_of(m));
    }
    rx.clear();
    assert_eq!(p.rx_burst(&mut rx), 0);

    // The ring driver counts frames, not bytes.
    let s = p.stats().unwrap();
    assert_eq!((s.opackets, s.ipackets), (8, 8), "{s:?}");
    assert_eq!((s.oerrors, s.rx_chained_dropped), (0, 0));

    p.stop().unwrap();
    assert!(!p.is_started());
    p.start().unwrap();
}

fn full_tx_ring_is_back_pressure(pool: &Mempool) {
    // The ring port's transmit ring is the DPDK ring it loops through: nothing drains it
    // until we receive, so it fills.
    let mut p = open_started("net_ring0", &PortConfig::default(), pool);

    let total = 3000u32;
    let mut next = 0u32;
    let mut accepted = 0usize;
    let mut tx = MbufBurst::new(32);
    let mut refused_at = None;
    while next < total || !tx.is_empty() {
        while next < total && tx.spare() > 0 {
            tx.push(pool.alloc_copy(&frame(next, 64)).unwrap()).unwrap();
            next += 1;
        }
        let offered = tx.len();
        let took = p.tx_burst(&mut tx);
        accepted += took;
        assert_eq!(tx.len(), offered - took, "the rest stay with the caller");
        if took < offered {
            refused_at = Some(accepted);
            break;
        }
    }
    let capacity = refused_at.expect("a 3000-frame offer fills the ring");
    eprintln!("net_ring0 took {capacity} frames before refusing");
    assert!((500..3000).contains(&capacity), "ring took {capacity}");
    // What stayed is exactly the frames after the accepted ones, in order.
    let kept: Vec<u32> = tx.as_slice().iter().map(seq_of).collect();
    let first = capacity as u32;
    assert_eq!(kept, (first..first + kept.len() as u32).collect::<Vec<_>>());

    // Drain the ring, offer the rest again, until everything has gone round: every frame
    // arrives exactly once, in order. Nothing was lost to the full ring.
    let mut rx = MbufBurst::new(32);
    let mut expect = 0u32;
    while expect < total {
        let n = p.rx_burst(&mut rx);
        for m in rx.drain() {
            assert_eq!(seq_of(&m), expect);
            expect += 1;
        }
        while next < total && tx.spare() > 0 {
            tx.push(pool.alloc_copy(&frame(next, 64)).unwrap()).unwrap();
            next += 1;
        }
        let took = p.tx_burst(&mut tx);
        assert!(n > 0 || took > 0 || expect == total, "stuck at {expect}");
    }
    assert!(tx.is_empty());
    let s = p.stats().unwrap();
    assert_eq!((s.opackets, s.ipackets), (u64::from(total), u64::from(total)));
}

fn hotplugged_port_works(pool: &Mempool) {
    let mut p = EthPort::open("net_ring5").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.name(), "net_ring5");
    p.configure(
        &PortConfig {
            rx_ring: 256,
            tx_ring: 256,
            ..PortConfig::default()
        },
        pool,
    )
    .unwrap();
    p.start().unwrap();
    let mut b = MbufBurst::new(8);
    b.push(pool.alloc_copy(&frame(42, 100)).unwrap()).unwrap();
    assert_eq!(p.tx_burst(&mut b), 1);
    assert_eq!(p.rx_burst(&mut b), 1);
    assert_eq!(seq_of(&b.as_slice()[0]), 42);
    let spec = DeviceSpec::parse("net_ring5").unwrap();
    assert_eq!(spec.driver(), Some("net_ring"));
}

fn null_ports_forward_and_count(pool: &Mempool) {
    let cfg = PortConfig::default();
    let mut a = open_started("net_null0", &cfg, pool);
    let mut b = open_started("net_null1", &cfg, pool);
    assert_eq!(a.driver_name(), "net_null");
    let mut burst = MbufBurst::new(32);
    let mut forwarded = 0usize;
    while forwarded < 100_000 {
        a.rx_burst(&mut burst);
        assert!(burst.as_slice().iter().all(|m| m.len() == 64));
        forwarded += b.tx_burst(&mut burst);
        burst.clear();
    }
    let (sa, sb) = (a.stats().unwrap(), b.stats().unwrap());
    assert_eq!(sa.ipackets, forwarded as u64, "{sa:?}");
    assert_eq!(sb.opackets, forwarded as u64, "{sb:?}");
    assert!(b.link().unwrap().up);
}

fn assert_send<T: Send>() {}

fn threads_register_as_lcores(eal: &'static Eal) {
    // Ports, pools and mbufs move to worker threads.
    assert_send::<EthPort>();
    assert_send::<Mempool>();
    assert_send::<Mbuf>();
    assert_send::<MbufBurst>();
    assert_eq!(dpdk::lcore_id(), Some(0), "the thread that started the EAL is lcore 0");
    std::thread::spawn(move || {
        assert_eq!(dpdk::lcore_id(), None);
        let g = eal.register_thread().unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(g.lcore_id(), 0);
        assert_eq!(dpdk::lcore_id(), Some(g.lcore_id()));
        drop(g);
        assert_eq!(dpdk::lcore_id(), None);
    })
    .join()
    .unwrap();
}
