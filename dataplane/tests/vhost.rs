//! VMs over vhost-user, end to end (issue 8, item 5): `rocesw run` with two `net_vhost`
//! ports, and this test as the VMs: a DPDK process of its own whose `net_virtio_user` ports
//! connect to rocesw's sockets, as QEMU's virtio-net would (the same vhost-user protocol, the
//! same shared-memory virtqueues).
//!
//! VM 0 sends real RoCEv2 frames (the project's builder: RC SEND, 1 KiB, DSCP 26, ECT(0)) as
//! fast as its virtqueue takes them, to VM 1 behind a port shaped to 200 Mb/s: the queue builds,
//! WRED marks CE, and the ingress PG pauses VM 0 with PFC, which VM 0 honours as a RoCE NIC
//! would. Checked: every frame reaches VM 1 once, in order, ICRC intact (ours and scapy's),
//! some CE-marked, as many as the switch counted; VM 0 received every PFC frame the switch
//! sent (XOFF, then XON once the queue drained); no drops anywhere.
//!
//! Shared memory: both processes run DPDK without hugepages (`--no-huge -m 512`); DPDK backs
//! that memory with a memfd, which vhost-user passes over the socket. Nothing else is needed.
//!
//! Needs DPDK with its vhost and virtio drivers (librte-net-vhost23, librte-net-virtio23), and
//! root: `cargo test -p rocesw-dataplane --features dpdk --test vhost`.

/// Without DPDK there is nothing to run: say so rather than pass silently.
#[cfg(not(feature = "dpdk"))]
#[test]
fn roce_between_two_vms_over_vhost_user() {
    eprintln!(
        "skipped: built without the `dpdk` feature \
         (cargo test -p rocesw-dataplane --features dpdk --test vhost)"
    );
}

#[cfg(feature = "dpdk")]
mod common;

#[cfg(feature = "dpdk")]
mod with_dpdk {
    use super::common::*;
    use dataplane::tools::gen::{announce, Flow};
    use dataplane::wire::pfc::{decode_mac_control, quanta_to_ns, MacControl};
    use dataplane::wire::{parse, verify_icrc, Ecn};
    use dpdk::{Eal, EalArgs, EthPort, MbufBurst, Mempool};
    use serde_json::Value;
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command};
    use std::time::{Duration, Instant};

    /// Frames VM 0 sends: 4 MiB, the size of the switch's buffer, into a 200 Mb/s port (about
    /// 170 ms there).
    const FRAMES: usize = 4096;
    const FRAME_LEN: usize = 1024;
    /// The lossless priority of `configs/default.toml` (DSCP 26 → TC 3 → PG 3).
    const PRIO: usize = 3;
    /// Port 0's speed: the pause times of its PFC frames are in quanta of its bit time.
    const SPEED0_BPS: u64 = 25_000_000_000;

    /// `rocesw run` in the background; killed if the test fails before stopping it.
    struct Switch {
        child: Option<Child>,
        pid: u32,
        stderr: PathBuf,
    }

    impl Switch {
        fn stderr(&self) -> String {
            std::fs::read_to_string(&self.stderr).unwrap_or_default()
        }

        /// SIGTERM (stop receiving, drain, write the summary), then the exit status.
        fn stop(&mut self) -> Option<i32> {
            let mut child = self.child.take()?;
            // SAFETY: signalling our own child, which has not been reaped yet.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let t0 = Instant::now();
            loop {
                if let Some(st) = child.try_wait().unwrap() {
                    return st.code();
                }
                if t0.elapsed() > Duration::from_secs(30) {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("rocesw run did not stop on SIGTERM:\n{}", self.stderr());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    impl Drop for Switch {
        fn drop(&mut self) {
            if let Some(mut c) = self.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }

    /// Waits until `path` exists (rocesw's vhost driver created its socket).
    fn wait_for_socket(sw: &mut Switch, path: &Path) {
        let t0 = Instant::now();
        while !path.exists() {
            if let Some(st) = sw.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "rocesw run exited ({st}) before creating {}:\n{}",
                    path.display(),
                    sw.stderr()
                );
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "no vhost-user socket {} after 60 s:\n{}",
                path.display(),
                sw.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A VM's NIC: a virtio-user port, configured and started.
    fn open_vm_port(name: &str, pool: &Mempool) -> EthPort {
        let mut p = EthPort::by_name(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        p.configure(&dpdk::PortConfig::default(), pool)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        p.start().unwrap_or_else(|e| panic!("{name}: {e}"));
        p
    }

    /// The frame with its ECN bits and IPv4 checksum cleared, so a CE-marked copy compares equal.
    fn without_ecn(f: &[u8]) -> Vec<u8> {
        let mut f = f.to_vec();
        f[15] &= !0x03;
        f[24] = 0;
        f[25] = 0;
        f
    }

    /// DPDK's runtime directories that process `pid` left behind.
    fn left_behind(pid: u32) -> Vec<PathBuf> {
        let prefix = format!("rocesw-{pid}-");
        let mut found = Vec::new();
        for base in ["/var/run/dpdk", "/run/dpdk"] {
            if let Ok(dir) = std::fs::read_dir(base) {
                for e in dir.flatten() {
                    if e.file_name().to_string_lossy().starts_with(&prefix) {
                        found.push(e.path());
                    }
                }
            }
        }
        found
    }

    #[test]
    fn roce_between_two_vms_over_vhost_user() {
        let dir = tempfile::Builder::new().prefix("rocesw-vhost-").tempdir().unwrap();
        let sock = |i: u16| dir.path().join(format!("vm{i}.sock"));
        // Port 1 (VM 1) is the slow one. A VM's PG headroom must cover what it has in flight
        // when the XOFF reaches it: its whole virtqueue (256 descriptors, 1 KiB frames here) and
        // a burst, far more than the cable-based "auto" figure.
        let cfg = ports_config_n(
            dir.path(),
            2,
            |id| {
                let speed = if id == 1 { "speed = \"200M\"\n" } else { "" };
                format!("dpdk = \"net_vhost{id},iface={}\"\n{speed}", sock(id).display())
            },
            "",
        );
        let text = std::fs::read_to_string(&cfg).unwrap();
        assert!(text.contains("headroom = \"auto\""));
        std::fs::write(&cfg, text.replace("headroom = \"auto\"", "headroom = \"512KiB\"")).unwrap();

        let summary = dir.path().join("summary.json");
        let stderr = dir.path().join("rocesw.stderr");
        let child = Command::new(env!("CARGO_BIN_EXE_rocesw"))
            .args(["run", "--no-control", "--duration", "120", "--config"])
            .arg(&cfg)
            .arg("--summary")
            .arg(&summary)
            .stdout(std::fs::File::create(dir.path().join("rocesw.stdout")).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let mut sw = Switch {
            pid: child.id(),
            child: Some(child),
            stderr,
        };
        wait_for_socket(&mut sw, &sock(0));
        wait_for_socket(&mut sw, &sock(1));

        // The VMs: this process's own EAL (no hugepages: DPDK's memory is a memfd, which the
        // vhost-user socket passes to rocesw), one virtio-user port per VM.
        let vdevs: Vec<String> = (0..2)
            .map(|i| format!("net_virtio_user{i},path={}", sock(i).display()))
            .collect();
        let args = EalArgs::default_for_vdevs(&vdevs).unwrap();
        Eal::init(args.as_slice()).unwrap_or_else(|e| panic!("the VMs' EAL: {e}\n{}", sw.stderr()));
        let pool = Mempool::new("vms", 4095, 128, 2048).unwrap();
        let mut vm0 = open_vm_port("net_virtio_user0", &pool);
        let mut vm1 = open_vm_port("net_virtio_user1", &pool);
        assert_eq!(vm0.driver_name(), "net_virtio_user");

        let mut rx = MbufBurst::new(MbufBurst::DEFAULT_CAPACITY);
        // VM 1 speaks first (as a receiver's first ACK would), so the switch learns where it is.
        {
            let mut b = MbufBurst::new(1);
            b.push(pool.alloc_copy(&announce(1, 0).unwrap()).unwrap()).unwrap();
            let t0 = Instant::now();
            while vm1.tx_burst(&mut b) == 0 {
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "VM 1's virtqueue never took a frame"
                );
            }
        }

        let frames: Vec<Vec<u8>> = Flow {
            src: 0,
            dst: 1,
            dscp: 26,
            ecn: Ecn::Ect0,
            qp: 7,
            frame_len: FRAME_LEN,
            count: FRAMES as u64,
            start_ns: 0,
            rate_bps: SPEED0_BPS,
        }
        .frames()
        .unwrap()
        .into_iter()
        .map(|(_, f)| f)
        .collect();

        let mut tx = MbufBurst::new(32);
        let mut next = 0; // frames handed to the transmit burst
        let mut got: Vec<Vec<u8>> = Vec::with_capacity(FRAMES);
        let mut at_vm0: Vec<Vec<u8>> = Vec::new();
        let (mut xoff, mut xon, mut pfc_frames) = (0u64, 0u64, 0u64);
        let mut paused_until: Option<Instant> = None;
        let mut last_pfc_was_xon = false;
        let t0 = Instant::now();
        let deadline = Duration::from_secs(90);
        // Until everything arrived and VM 0 was told to resume (an XON after the last XOFF).
        while got.len() < FRAMES || (xoff > 0 && !last_pfc_was_xon) {
            assert!(
                t0.elapsed() < deadline,
                "after {deadline:?}: {} of {FRAMES} frames sent, {} received; {xoff} XOFF, {xon} XON \
                 at VM 0\nrocesw:\n{}",
                next - tx.len(),
                got.len(),
                sw.stderr()
            );
            // VM 0's NIC: PFC from the switch (pause times in port 0's quanta).
            vm0.rx_burst(&mut rx);
            for m in rx.drain() {
                let f = m.data();
                if let Ok(MacControl::Pfc { enable, times }) = decode_mac_control(f) {
                    pfc_frames += 1;
                    if enable & (1 << PRIO) != 0 {
                        if times[PRIO] == 0 {
                            xon += 1;
                            paused_until = None;
                            last_pfc_was_xon = true;
                        } else {
                            xoff += 1;
                            let ns = quanta_to_ns(times[PRIO], SPEED0_BPS);
                            paused_until = Some(Instant::now() + Duration::from_nanos(ns));
                            last_pfc_was_xon = false;
                        }
                    }
                }
                at_vm0.push(f.to_vec());
            }
            // VM 1 receives.
            vm1.rx_burst(&mut rx);
            for m in rx.drain() {
                got.push(m.data().to_vec());
            }
            // VM 0 sends while priority 3 is not paused.
            if paused_until.is_some_and(|t| Instant::now() < t) {
                continue;
            }
            paused_until = None;
            while next < FRAMES && tx.spare() > 0 {
                tx.push(pool.alloc_copy(&frames[next]).unwrap()).unwrap();
                next += 1;
            }
            vm0.tx_burst(&mut tx);
        }
        let link = vm0.link().unwrap();
        drop((vm0, vm1, tx, rx));
        let code = sw.stop();
        let err = sw.stderr();
        assert_eq!(code, Some(0), "rocesw run failed:\n{err}");
        assert!(
            err.contains("port 0: DPDK net_vhost0 (driver net_vhost)"),
            "start-up report:\n{err}"
        );
        assert!(link.up, "VM 0's link was up");
        assert!(left_behind(sw.pid).is_empty(), "{:?}", left_behind(sw.pid));

        // What VM 1 received: exactly the frames VM 0 sent, in order, ICRCs intact, some marked.
        let data: Vec<&Vec<u8>> = got
            .iter()
            .filter(|f| parse(f, usize::MAX).is_ok_and(|i| i.is_roce()) && f.len() == FRAME_LEN)
            .collect();
        assert_eq!(data.len(), FRAMES, "every frame reached VM 1 (no loss)");
        let mut ce = 0u64;
        for (i, f) in data.iter().enumerate() {
            let info = parse(f, usize::MAX).unwrap();
            assert!(
                verify_icrc(f, &info),
                "frame {i}: ICRC intact across two vhost-user hops"
            );
            assert_eq!(
                without_ecn(f),
                without_ecn(&frames[i]),
                "frame {i}: in order, unchanged"
            );
            ce += u64::from(f[15] & 3 == 3);
        }
        let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
        eprintln!(
            "VM 1 received {FRAMES} frames ({ce} CE) in {:?}; VM 0 received {xoff} XOFF and {xon} XON; \
             port 0 peaked at {} ingress cells, port 1 at {} egress cells",
            t0.elapsed(),
            s["switch"]["ports"][0]["buffer"]["peak_ingress_cells"],
            s["switch"]["ports"][1]["buffer"]["peak_egress_cells"]
        );
        assert!(ce > 0, "the 200 Mb/s port's queue built up: WRED marked some frames CE");
        assert!(xoff > 0, "the lossless PG paused VM 0");

        let sw0 = &s["switch"]["ports"][0];
        let sw1 = &s["switch"]["ports"][1];
        assert_eq!(s["switch"]["totals"]["drops"], serde_json::json!({}), "no drops: {s}");
        assert_eq!(sw1["ecn_marked"], ce, "the switch's marks are the ones VM 1 saw");
        assert_eq!(
            sw0["pfc_tx"][PRIO],
            xoff + xon,
            "every PFC frame the switch sent on port 0 reached VM 0"
        );
        assert_eq!(sw0["rx_packets"], FRAMES as u64);

        // An independent decoder: scapy recomputes every ICRC and decodes the PFC frames.
        let out1 = dir.path().join("vm1.pcap");
        let out0 = dir.path().join("vm0.pcap");
        let stamp = |v: &[Vec<u8>]| {
            v.iter()
                .enumerate()
                .map(|(i, f)| (i as u64 * 1000, f.clone()))
                .collect()
        };
        write_pcap(&out1, stamp(&got));
        write_pcap(&out0, stamp(&at_vm0));
        let o = oracle("check_pcap.py", &[out1, out0]);
        assert_eq!(o["files"][0]["icrc_ok"], FRAMES as u64);
        assert_eq!(o["files"][0]["ce"], ce);
        assert_eq!(o["files"][1]["pfc"].as_array().unwrap().len() as u64, pfc_frames);
        assert_eq!(o["totals"]["icrc_bad"], 0);
        assert_eq!(o["totals"]["bad_total"], 0, "{}", o["totals"]);
    }
}
