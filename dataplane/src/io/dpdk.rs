//! DPDK port backend (`[[port]] dpdk = "<device>"`, cargo feature `dpdk`): virtual devices
//! (`net_null`, `net_ring`, `net_pcap`, `net_af_packet`, `net_tap`, `net_vhost`, `net_memif`)
//! and PCI NICs, through the `dpdk` crate.
//!
//! **One copy each way, for now.** Received mbufs are handed to the switch as slices and the
//! switch copies them into its own packet pool, exactly as with AF_PACKET; `send` copies a
//! frame into an mbuf from the shared pool. The design's zero-copy path (queues holding
//! descriptors of mbufs, issue 8 item 3) is not done yet: it needs the packet pool to be able to
//! own foreign buffers, which touches the MMU's queues, not just the backend.
//!
//! Back-pressure: `send` only stages an mbuf in a small transmit burst; `flush` offers the
//! burst to the driver, which keeps what it refused, in order (`MbufBurst`). `tx_room` is the
//! burst's free space, so when the driver's ring is full the burst stays full, `tx_room` is 0,
//! and the frames wait in the switch's queues (MMU, PFC) instead of being dropped.

use super::{PortBackend, PortError, PortStats};
use controlplane::model::{Config, DpdkRunConfig, PortConfig};
use dpdk::{AllocError, DeviceSpec, Eal, EalArgs, EthPort, Mbuf, MbufBurst, Mempool};

/// Frames staged for one `tx_burst`: two bursts, so a burst the driver half took still leaves
/// room for the next round's.
const TX_STAGE: usize = 64;
/// Per-lcore cache of the shared pool.
const POOL_CACHE: u32 = 256;
/// Ethernet header + one VLAN tag, FCS not counted (as `max_frame_bytes` counts it).
const L2_OVERHEAD: u32 = 18;

/// DPDK started for a config: its EAL and the pool every DPDK port receives into and sends
/// from. Built once per process, before any port opens.
pub struct DpdkRuntime {
    pool: Mempool,
}

/// The devices of a config's DPDK ports, by port index.
fn devices(cfg: &Config) -> Vec<(usize, &str)> {
    cfg.ports
        .iter()
        .enumerate()
        .filter_map(|(i, p)| Some((i, p.dpdk.as_deref()?)))
        .collect()
}

/// The EAL arguments for `[run.dpdk]` and the DPDK ports' devices: `--no-huge` with every
/// vdev as `--vdev` unless hugepages are asked for (PCI ports), then `--in-memory` with `-a`
/// for PCI devices; a unique file prefix either way, then the configured extra arguments.
pub fn eal_args(run: &DpdkRunConfig, devices: &[&str]) -> Result<EalArgs, dpdk::Error> {
    let mut args = if run.hugepages {
        EalArgs::for_pci(devices, run.memory_mb)?
    } else {
        let mut a = EalArgs::default_for_vdevs(devices)?;
        a.set_memory_mb(run.memory_mb);
        a
    };
    for a in &run.eal_args {
        args.push(a.clone());
    }
    Ok(args)
}

impl DpdkRuntime {
    /// Starts DPDK for `cfg` if it has DPDK ports (`Ok(None)` otherwise). Errors say what to
    /// change; DPDK's own log above them (on stderr) often names the detail.
    pub fn start(cfg: &Config) -> anyhow::Result<Option<DpdkRuntime>> {
        let devs = devices(cfg);
        if devs.is_empty() {
            return Ok(None);
        }
        // An unknown driver makes the whole EAL fail with "No such device", naming nothing:
        // say which port asks for it before starting DPDK.
        let pmd_dir = std::path::Path::new(Eal::pmd_dir());
        for (i, d) in &devs {
            let driver = DeviceSpec::parse(d).ok().and_then(|s| s.driver().map(str::to_string));
            if let Some(driver) = driver {
                if dpdk::driver_installed(pmd_dir, &driver) == Some(false) {
                    anyhow::bail!(
                        "port {} (dpdk = {d:?}): no such DPDK driver '{driver}': the installed \
                         drivers are in {}/ (install the DPDK driver packages, librte-net-*, or \
                         fix the device name: net_null, net_ring, net_pcap, net_af_packet, \
                         net_tap, net_vhost, net_memif...)",
                        cfg.ports[*i].id,
                        pmd_dir.display()
                    );
                }
            }
        }
        let names: Vec<&str> = devs.iter().map(|(_, d)| *d).collect();
        let args = eal_args(&cfg.run.dpdk, &names).map_err(|e| anyhow::anyhow!("DPDK: {e}"))?;
        tracing::debug!(args = args.as_slice().join(" "), "starting DPDK's EAL");
        Eal::init(args.as_slice()).map_err(|e| anyhow::anyhow!("DPDK: {e}"))?;
        let largest = devs
            .iter()
            .map(|(i, _)| cfg.ports[*i].max_frame_bytes)
            .max()
            .unwrap_or(1518);
        let frame_room = u16::try_from(largest.max(2048)).unwrap_or(u16::MAX);
        let pool = Mempool::new("rocesw", cfg.run.dpdk.mbufs, POOL_CACHE, frame_room).map_err(|e| {
            anyhow::anyhow!(
                "DPDK: {e}; with [run.dpdk] mbufs = {} of {frame_room} B, raise [run.dpdk] memory \
                 or lower mbufs",
                cfg.run.dpdk.mbufs
            )
        })?;
        Ok(Some(DpdkRuntime { pool }))
    }

    /// Opens, configures and starts the DPDK port of `p` (which must have `dpdk` set).
    /// Errors name the device, not the port (the caller adds it).
    pub fn open(&self, p: &PortConfig) -> anyhow::Result<DpdkPort> {
        let device = p.dpdk.as_deref().unwrap_or_default();
        let spec = DeviceSpec::parse(device).map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut port = EthPort::by_name(device).map_err(|e| match e.kind() {
            // The EAL started without it: its driver refused the device or its arguments.
            dpdk::ErrorKind::NoSuchPort if !spec.is_pci() => anyhow::anyhow!(
                "driver {} refused device {} (DPDK's log above says why, e.g. a file or \
                 interface that does not exist): check its key=value arguments",
                spec.driver().unwrap_or("?"),
                spec.name()
            ),
            _ => anyhow::anyhow!("{e}"),
        })?;
        // The driver's default MTU (1500) unless the port asks for more: some virtual drivers
        // refuse any MTU setting.
        let mtu = p.max_frame_bytes.saturating_sub(L2_OVERHEAD);
        let cfg = dpdk::PortConfig {
            mtu: (mtu > 1500).then(|| u16::try_from(mtu).unwrap_or(u16::MAX)),
            ..Default::default()
        };
        port.configure(&cfg, &self.pool).map_err(|e| anyhow::anyhow!("{e}"))?;
        port.start().map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(DpdkPort {
            label: spec.name().to_string(),
            port,
            pool: self.pool.clone(),
            rx: MbufBurst::new(MbufBurst::DEFAULT_CAPACITY),
            tx: MbufBurst::new(TX_STAGE),
            lcore_checked: false,
            stats: PortStats::default(),
        })
    }
}

/// An open, started DPDK port.
pub struct DpdkPort {
    label: String,
    port: EthPort,
    pool: Mempool,
    rx: MbufBurst,
    /// Staged for the next `flush`; what the driver refuses stays here, in order.
    tx: MbufBurst,
    /// Whether the polling thread was made a DPDK lcore (see `ensure_lcore`).
    lcore_checked: bool,
    stats: PortStats,
}

impl DpdkPort {
    /// The driver's name (`net_pcap`, `mlx5_pci`...).
    pub fn driver(&self) -> &str {
        self.port.driver_name()
    }

    /// `up, 10 Gb/s` / `down`, for the start-up report.
    pub fn link_text(&self) -> String {
        match self.port.link() {
            Ok(l) => {
                let state = if l.up { "up" } else { "down" };
                match l.speed_mbps {
                    Some(m) if m % 1000 == 0 => format!("link {state}, {} Gb/s", m / 1000),
                    Some(m) => format!("link {state}, {m} Mb/s"),
                    None => format!("link {state}, speed unknown"),
                }
            }
            Err(e) => format!("link unknown ({e})"),
        }
    }

    /// Makes the thread polling this port a DPDK lcore, once: the mempool's per-lcore cache
    /// (and some drivers) need an lcore id, and worker threads are not started by DPDK. The
    /// registration lasts as long as the thread (a port stays on its worker thread).
    #[inline]
    fn ensure_lcore(&mut self) {
        if self.lcore_checked {
            return;
        }
        self.lcore_checked = true;
        if dpdk::lcore_id().is_none() {
            if let Some(eal) = Eal::get() {
                match eal.register_thread() {
                    // Kept registered until the thread ends.
                    Ok(guard) => std::mem::forget(guard),
                    Err(e) => tracing::warn!(port = self.label, "{e}; polling without a mempool cache"),
                }
            }
        }
    }
}

impl PortBackend for DpdkPort {
    /// Delivers one receive burst (at most 32 frames, DPDK's burst; the workers ask for
    /// exactly that).
    fn recv_burst(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, PortError> {
        self.ensure_lcore();
        debug_assert!(max >= self.rx.capacity(), "a DPDK port delivers whole bursts");
        let n = self.port.rx_burst(&mut self.rx);
        if n == 0 {
            return Ok(0);
        }
        let mut delivered = 0;
        for m in self.rx.as_slice() {
            let d = m.data();
            if d.len() < 14 {
                self.stats.rx_oversize += 1;
            } else {
                f(d);
                delivered += 1;
            }
        }
        // Back to the pool in one call.
        self.rx.clear();
        self.stats.rx_frames += delivered as u64;
        Ok(delivered)
    }

    fn send(&mut self, frame: &[u8]) -> Result<bool, PortError> {
        if self.tx.spare() == 0 {
            self.stats.tx_ring_full += 1;
            return Ok(false);
        }
        if frame.len() < 14 {
            self.stats.tx_bad_size += 1;
            return Ok(false);
        }
        let m: Mbuf = match self.pool.alloc_copy(frame) {
            Ok(m) => m,
            Err(AllocError::Exhausted) => {
                self.stats.tx_nombuf += 1;
                return Ok(false);
            }
            Err(AllocError::TooLong { .. }) => {
                self.stats.tx_bad_size += 1;
                return Ok(false);
            }
        };
        if self.tx.push(m).is_err() {
            // Unreachable: room was checked above. The mbuf went back to the pool.
            self.stats.tx_ring_full += 1;
            return Ok(false);
        }
        self.stats.tx_frames += 1;
        Ok(true)
    }

    #[inline]
    fn tx_room(&mut self) -> usize {
        self.tx.spare()
    }

    fn flush(&mut self) -> Result<(), PortError> {
        if self.tx.is_empty() {
            return Ok(());
        }
        self.ensure_lcore();
        let before = self.tx.len();
        self.port.tx_burst(&mut self.tx);
        if !self.tx.is_empty() && self.tx.len() == before {
            self.stats.tx_flush_retries += 1;
        }
        Ok(())
    }

    fn link_up(&mut self) -> bool {
        self.port.link().is_ok_and(|l| l.up)
    }

    fn name(&self) -> &str {
        &self.label
    }

    fn stats(&mut self) -> PortStats {
        let mut s = self.stats;
        if let Ok(d) = self.port.stats() {
            s.imissed = d.imissed;
            s.ierrors = d.ierrors;
            s.oerrors = d.oerrors;
            s.rx_nombuf = d.rx_nombuf;
            // A frame spread over chained mbufs is longer than an mbuf: oversize here.
            s.rx_oversize += d.rx_chained_dropped;
        }
        s
    }
}
