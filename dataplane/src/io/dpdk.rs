//! DPDK port backend (`[[port]] dpdk = "<device>"`, cargo feature `dpdk`): virtual devices
//! (`net_null`, `net_ring`, `net_pcap`, `net_af_packet`, `net_tap`, `net_vhost`, `net_memif`)
//! and PCI NICs, through the `dpdk` crate.
//!
//! **Zero copy.** A frame received into an mbuf stays in it until it is transmitted or
//! dropped: `recv_frames` lends each received mbuf to the switch ([`RxFrame::Owned`]), whose
//! packet slot then refers to the mbuf instead of holding a copy, and `send_owned` puts that
//! same mbuf in the transmit burst. What the switch does not keep (a frame it dropped at
//! ingress) comes back and is freed with the rest of the burst in one call. Frames are copied
//! only where a copy is the point or the other side is not DPDK: a flood's extra copies (each
//! needs its own buffer, ECN marking rewrites in place), PFC frames, and frames from or to
//! AF_PACKET and capture-file ports (which keep the packet pool). Frames crossing to another
//! worker stay in their mbufs (`shard::Crossing`). `send` copies a frame into a fresh
//! mbuf for the others.
//!
//! The switch holds at most [`held_limit`] mbufs (the pool less every port's rings and the
//! per-lcore caches): beyond that, received frames are copied into the packet pool and their
//! mbufs freed at once, so a full buffer can never starve the receive rings of mbufs (the MMU,
//! not the mbuf pool, decides what is dropped and when PFC pauses).
//!
//! Back-pressure: `send` only stages an mbuf in a small transmit burst; `flush` offers the
//! burst to the driver, which keeps what it refused, in order (`MbufBurst`). `tx_room` is the
//! burst's free space, so when the driver's ring is full the burst stays full, `tx_room` is 0,
//! and the frames wait in the switch's queues (MMU, PFC) instead of being dropped.

use super::{ForeignFrame, LentBurst, OwnedBurst, PortBackend, PortError, PortStats, RxFrame};
use crate::buffers::foreign::ForeignKind;
use controlplane::model::{Config, DpdkRunConfig, PortConfig};
use dpdk::{AllocError, DeviceSpec, Eal, EalArgs, EthPort, Mbuf, MbufBurst, Mempool};
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicIsize, Ordering};

/// Frames staged for one `tx_burst`: two bursts, so a burst the driver half took still leaves
/// room for the next round's.
const TX_STAGE: usize = 64;
/// Per-lcore cache of the shared pool.
const POOL_CACHE: u32 = 256;
/// Ethernet header + one VLAN tag, FCS not counted (as `max_frame_bytes` counts it).
const L2_OVERHEAD: u32 = 18;

/// The `owner` of a [`ForeignFrame`] that is an mbuf of the runtime's pool ("mbuf").
const MBUF_OWNER: u32 = u32::from_be_bytes(*b"mbuf");

/// Lent mbufs: freed by [`release_mbuf`], recognised by [`MBUF_OWNER`].
static MBUF: ForeignKind = ForeignKind {
    release: release_mbuf,
    owner: MBUF_OWNER,
};

/// Mbufs the switch holds (lent by `recv_frames`, not yet sent or released), and for a moment
/// the rest of a burst being lent (reserved whole, then the unlent part given back). One
/// process has one EAL and one runtime pool, so one count, shared by every worker that lends.
static HELD: AtomicIsize = AtomicIsize::new(0);
/// How many mbufs the switch may hold: the pool less what the ports' rings, transmit stages
/// and receive bursts and the per-lcore caches can take (set as ports open).
static HELD_LIMIT: AtomicIsize = AtomicIsize::new(0);

/// How many mbufs the switch may hold before received frames are copied instead of lent.
pub fn held_limit() -> isize {
    HELD_LIMIT.load(Ordering::Relaxed)
}

/// Mbufs the switch holds right now (frames received without a copy and still queued).
pub fn held() -> isize {
    HELD.load(Ordering::Relaxed)
}

/// The release function of a lent mbuf: frees it (a frame the switch dropped, or sent on a
/// port that is not DPDK, in a copy).
///
/// # Safety
/// `token` is an mbuf lent by `recv_frames`, owned by the caller and not used afterwards.
unsafe fn release_mbuf(token: NonNull<c_void>) {
    // SAFETY: by the contract, an owned, single-segment mbuf of a live pool.
    drop(unsafe { Mbuf::from_raw(token.as_ptr().cast()) });
    HELD.fetch_sub(1, Ordering::Relaxed);
}

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

/// The mempool handler for a run with `workers` workers: `lf_stack` when there is more than
/// one and `[run.dpdk] eal_args` does not choose (`--mbuf-pool-ops-name`), else DPDK's
/// default (None). Why: a frame that crosses to another worker is received into an mbuf one
/// lcore allocated and freed by the other, whose per-lcore cache overflows into the pool while
/// the first one's runs dry; DPDK's default ring then hands mbufs back oldest first, round the
/// whole pool (16383 mbufs, 36 MB), so every frame is received into memory no cache still
/// holds. A stack hands back the latest freed (bench/README.md, "Issue 20, ninth round":
/// two workers with every frame crossing, +10 to +14 % with `lf_stack`, +20 % with
/// `stack`). The lock-free one, because a worker preempted on a busy core while holding the
/// lock-based stack's lock would stall the other worker's receive until it ran again.
pub fn pool_handler(workers: usize, run: &DpdkRunConfig) -> Option<&'static str> {
    let chosen = run.eal_args.iter().any(|a| a.starts_with("--mbuf-pool-ops-name"));
    (workers > 1 && !chosen).then_some("lf_stack")
}

/// The socket path of a `net_vhost` device in server mode (the default; `client=1` connects to
/// the VM's socket instead), or None for any other device.
fn vhost_server_socket(spec: &DeviceSpec) -> Option<String> {
    if spec.driver().map(|d| d.replace("eth_", "net_")).as_deref() != Some("net_vhost") {
        return None;
    }
    let args = spec.args();
    if args.iter().any(|&(k, v)| k == "client" && v != "0") {
        return None;
    }
    Some(
        args.iter()
            .find(|(k, _)| *k == "iface")
            .map_or_else(String::new, |(_, v)| v.to_string()),
    )
}

/// A `net_vhost` server socket is created by the driver when the port starts: its directory
/// must exist and nothing else may sit at its path, or DPDK fails with a message about
/// configuring queues. Said here instead; a stale socket is removed only if this switch made
/// it ([`dpdk::vhost`]): a silent socket may be another service's.
fn check_vhost_socket(device: &str) -> Result<(), String> {
    let Ok(spec) = DeviceSpec::parse(device) else {
        return Ok(()); // refused with its own message by the validation
    };
    let Some(iface) = vhost_server_socket(&spec) else {
        return Ok(());
    };
    if iface.is_empty() {
        return Err("net_vhost needs iface=<socket path>, the vhost-user socket a VM attaches to".into());
    }
    if dpdk::vhost::prepare_server_socket(&iface)? {
        tracing::warn!(
            socket = iface,
            "removed a stale vhost-user socket this switch had made and nobody served"
        );
    }
    Ok(())
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
        for (i, d) in &devs {
            check_vhost_socket(d).map_err(|e| anyhow::anyhow!("port {} (dpdk = {d:?}): {e}", cfg.ports[*i].id))?;
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
        let mbufs = cfg.run.dpdk.mbufs;
        let handler = pool_handler(cfg.run.workers, &cfg.run.dpdk);
        let pool = match Mempool::with_ops("rocesw", mbufs, POOL_CACHE, frame_room, handler) {
            Ok(pool) => Ok(pool),
            // DPDK says EINVAL for a handler it does not have; any other failure (memory) is
            // the default handler's too, and is reported as it is.
            Err(e) if handler.is_some() && e.errno() == Some(libc::EINVAL) => {
                tracing::warn!("DPDK: {e}; using DPDK's default mempool handler instead");
                Mempool::new("rocesw", mbufs, POOL_CACHE, frame_room)
            }
            Err(e) => Err(e),
        }
        .map_err(|e| {
            anyhow::anyhow!(
                "DPDK: {e}; with [run.dpdk] mbufs = {mbufs} of {frame_room} B, raise [run.dpdk] memory \
                 or lower mbufs"
            )
        })?;
        // The per-lcore caches (each up to 1.5 × its size) of the polling threads and the
        // main thread hold mbufs nobody else can use; each port's needs come off as it opens.
        let cached = (cfg.run.workers.max(1) + 1) * POOL_CACHE as usize * 3 / 2;
        HELD_LIMIT.store(pool.size() as isize - cached as isize, Ordering::Relaxed);
        Ok(Some(DpdkRuntime { pool }))
    }

    /// The pool every DPDK port receives into (for the start-up report).
    pub fn pool(&self) -> &Mempool {
        &self.pool
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
        if let Some(socket) = vhost_server_socket(&spec) {
            // The driver made the socket: recorded, so a later start may remove it if this run
            // does not exit cleanly, and never removes another service's.
            if let Err(e) = dpdk::vhost::record_created(std::path::Path::new(&socket)) {
                tracing::warn!(socket, "cannot record the vhost-user socket as this switch's: {e}");
            }
        }
        // What this port itself keeps out of the pool: a full receive ring, a full transmit
        // ring, a staged transmit burst and a receive burst in hand.
        let rings = usize::from(port.rx_ring_size()) + usize::from(port.tx_ring_size());
        let needs = rings + TX_STAGE + MbufBurst::DEFAULT_CAPACITY;
        HELD_LIMIT.fetch_sub(needs as isize, Ordering::Relaxed);
        Ok(DpdkPort {
            label: spec.name().to_string(),
            port,
            pool: self.pool.clone(),
            rx: MbufBurst::new(MbufBurst::DEFAULT_CAPACITY),
            rx_back: MbufBurst::new(MbufBurst::DEFAULT_CAPACITY),
            lent: LentBurst::new(&MBUF),
            tx: MbufBurst::new(TX_STAGE),
            returned: 0,
            lcore_checked: false,
            stats: PortStats::default(),
            input_end: None,
        })
    }
}

/// A port whose input ends (`net_pcap`'s `rx_pcap` read once): how many frames the driver
/// will take from it, and the count to take one off once it has.
struct InputEnd {
    records: u64,
    left: super::InputsLeft,
}

/// An open, started DPDK port.
pub struct DpdkPort {
    label: String,
    port: EthPort,
    pool: Mempool,
    rx: MbufBurst,
    /// Received mbufs the switch did not keep, freed together at the end of the burst.
    rx_back: MbufBurst,
    /// The receive burst as the switch reads it (`recv_lent`): made once, reused every burst.
    lent: LentBurst,
    /// Staged for the next `flush`; what the driver refuses stays here, in order.
    tx: MbufBurst,
    /// Lent mbufs that came back through `send_owned` since the last flush (taken off
    /// [`HELD`] there, once per burst rather than per frame).
    returned: isize,
    /// Whether the polling thread was made a DPDK lcore (see `ensure_lcore`).
    lcore_checked: bool,
    stats: PortStats,
    /// Set while a finite input is being read (see [`DpdkPort::end_input_after`]).
    input_end: Option<InputEnd>,
}

impl DpdkPort {
    /// Makes this port take one off `left` once its driver has read `records` frames
    /// (received, or refused for want of an mbuf or as erroneous: each frame of a `net_pcap`
    /// `rx_pcap` ends as one of them), so a run whose inputs all end can stop. Checked only when
    /// a receive burst comes back empty, so it costs a busy port nothing.
    pub fn end_input_after(&mut self, records: u64, left: &super::InputsLeft) {
        let end = InputEnd {
            records,
            left: left.clone(),
        };
        if records == 0 {
            end.left.one_done();
        } else {
            self.input_end = Some(end);
        }
    }

    /// After an empty receive burst: whether the input has ended, and if so, says so once.
    #[cold]
    fn check_input_end(&mut self) {
        let Some(end) = &self.input_end else { return };
        let Ok(d) = self.port.stats() else { return };
        if d.ipackets + d.rx_nombuf + d.ierrors >= end.records {
            tracing::debug!(port = %self.label, records = end.records, "input read to its end");
            end.left.one_done();
            self.input_end = None;
        }
    }

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

/// A receive burst fits `recv_frames`' array and a `LentBurst` (`OWNED_BURST` frames), so each
/// hands the switch every frame it received.
const _: () = assert!(MbufBurst::DEFAULT_CAPACITY <= crate::buffers::foreign::OWNED_BURST);

impl DpdkPort {
    /// Receives a burst into `self.rx` for `recv_frames` / `recv_lent`: how many mbufs came;
    /// on none, a finite input is checked for its end.
    #[inline(always)]
    fn rx_lendable_burst(&mut self, max: usize) -> usize {
        self.ensure_lcore();
        debug_assert!(max >= self.rx.capacity(), "a DPDK port delivers whole bursts");
        let n = self.port.rx_burst(&mut self.rx);
        if n == 0 && self.input_end.is_some() {
            self.check_input_end();
        }
        n
    }

    /// The received burst (in `self.rx`), each frame borrowed for one call of `f`, then every
    /// mbuf back to the pool in one call: `recv_burst`, and `recv_frames` once the switch holds
    /// [`held_limit`] mbufs (so the pool keeps mbufs to receive into).
    fn deliver_borrowed(&mut self, f: &mut dyn FnMut(&[u8])) -> usize {
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
        self.rx.clear();
        self.stats.rx_frames += delivered as u64;
        delivered
    }
}

impl DpdkPort {
    /// [`PortBackend::send_owned`]: a lent mbuf of this runtime goes onto the transmit array
    /// as it is; any other buffer is copied (`send`). Inlined into the burst loop.
    #[inline(always)]
    fn queue_owned(&mut self, frame: ForeignFrame) -> Result<bool, PortError> {
        if frame.owner() != MBUF_OWNER {
            return self.send(frame.bytes());
        }
        if self.tx.spare() == 0 {
            // Dropping `frame` frees the mbuf.
            self.stats.tx_ring_full += 1;
            return Ok(false);
        }
        // SAFETY: an mbuf of this runtime's pool (MBUF_OWNER), lent by recv_frames and handed
        // back unreleased: owned here now.
        let m = unsafe { Mbuf::from_raw(frame.into_token().as_ptr().cast()) };
        self.returned += 1;
        if self.tx.push(m).is_err() {
            // Unreachable: room was checked above. The mbuf went back to the pool.
            self.stats.tx_ring_full += 1;
            return Ok(false);
        }
        self.stats.tx_frames += 1;
        self.stats.tx_zero_copy += 1;
        Ok(true)
    }
}

/// Reserves a receive burst of `n` mbufs against the lending limit before any of it is lent:
/// several workers lend from one pool (I/O workers too), so a check and a later count could let
/// them all pass the limit at once. False (nothing reserved) past the limit: copy instead.
/// What is not lent in the end is given back by the caller.
#[inline]
fn reserve_lent(n: usize) -> bool {
    let prev = HELD.fetch_add(n as isize, Ordering::Relaxed);
    if prev + n as isize > HELD_LIMIT.load(Ordering::Relaxed) {
        HELD.fetch_sub(n as isize, Ordering::Relaxed);
        return false;
    }
    true
}

/// Empties a receive burst, giving `each` every mbuf of at least an Ethernet header as its
/// frame's address and length and its handle, whose ownership `each` takes (the frame is
/// touched by nobody else, and the mbuf may be freed from any thread, by `release_mbuf` once);
/// shorter ones are counted and left in `rx_back` to be freed with the rest.
#[inline(always)]
fn drain_lendable(
    rx: &mut MbufBurst,
    rx_back: &mut MbufBurst,
    stats: &mut PortStats,
    mut each: impl FnMut(NonNull<u8>, u32, NonNull<c_void>),
) {
    for mut m in rx.drain() {
        let len = m.len();
        if len < 14 {
            stats.rx_oversize += 1;
            // Freed with the rest (a push past capacity, impossible here, frees it).
            let _ = rx_back.push(m);
            continue;
        }
        let data = NonNull::from(m.data_mut()).cast::<u8>();
        // SAFETY: into_raw never returns null for a live mbuf; its ownership goes to `each`.
        each(data, len as u32, unsafe { NonNull::new_unchecked(m.into_raw().cast()) });
    }
}

impl PortBackend for DpdkPort {
    /// Delivers one receive burst (at most 32 frames, DPDK's burst; the workers ask for
    /// exactly that).
    fn recv_burst(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, PortError> {
        self.ensure_lcore();
        debug_assert!(max >= self.rx.capacity(), "a DPDK port delivers whole bursts");
        if self.port.rx_burst(&mut self.rx) == 0 {
            if self.input_end.is_some() {
                self.check_input_end();
            }
            return Ok(0);
        }
        Ok(self.deliver_borrowed(f))
    }

    /// Delivers one receive burst, lending each mbuf to the switch (zero copy) while it
    /// holds fewer than [`held_limit`], the whole burst in one call of `f`; the mbufs it did
    /// not keep are freed in one call.
    fn recv_frames(&mut self, max: usize, f: &mut dyn FnMut(&mut [RxFrame<'_>])) -> Result<usize, PortError> {
        let n = self.rx_lendable_burst(max);
        if n == 0 {
            return Ok(0);
        }
        // What is not lent in the end is given back below.
        if !reserve_lent(n) {
            return Ok(self.deliver_borrowed(&mut |d| f(&mut [RxFrame::Borrowed(d)])));
        }
        let mut frames = arrayvec::ArrayVec::<RxFrame<'_>, { crate::buffers::foreign::OWNED_BURST }>::new();
        drain_lendable(&mut self.rx, &mut self.rx_back, &mut self.stats, |data, len, token| {
            // SAFETY: drain_lendable's contract (the mbuf's frame and handle, ours to give);
            // the ForeignFrame's release (release_mbuf) frees the mbuf once. A receive burst
            // fits (the assertion before `impl DpdkPort`): this push never fails.
            frames.push(RxFrame::Owned(unsafe { ForeignFrame::new(data, len, token, &MBUF) }));
        });
        let delivered = frames.len();
        if delivered > 0 {
            f(&mut frames);
        }
        let mut lent = 0isize;
        for frame in &mut frames {
            match frame.give_back() {
                Some(back) => {
                    // SAFETY: our own mbuf, handed back unreleased.
                    let m = unsafe { Mbuf::from_raw(back.into_token().as_ptr().cast()) };
                    // Freed below with the rest (a push past capacity, impossible here, frees it).
                    let _ = self.rx_back.push(m);
                }
                None => lent += 1,
            }
        }
        if lent != n as isize {
            HELD.fetch_sub(n as isize - lent, Ordering::Relaxed);
        }
        self.stats.rx_zero_copy += lent as u64;
        // Back to the pool in one call.
        self.rx_back.clear();
        self.stats.rx_frames += delivered as u64;
        Ok(delivered)
    }

    /// One receive burst as a [`LentBurst`]: each mbuf's address, length and handle written
    /// once into its arrays, lent while the switch holds fewer than [`held_limit`] (else the
    /// switch copies what it keeps); the mbufs it did not keep are freed in one call, and none
    /// is looked at again when it kept them all.
    fn recv_lent(&mut self, max: usize, f: &mut dyn FnMut(&mut LentBurst)) -> Option<Result<usize, PortError>> {
        let n = self.rx_lendable_burst(max);
        if n == 0 {
            return Some(Ok(0));
        }
        // Past the limit the burst does not lend: the switch copies what it keeps.
        let lend = reserve_lent(n);
        self.lent.start(lend);
        let lent = &mut self.lent;
        drain_lendable(&mut self.rx, &mut self.rx_back, &mut self.stats, |data, len, token| {
            // SAFETY: drain_lendable's contract; the burst hands the buffer to the switch (its
            // release, release_mbuf, frees the mbuf once) or back to us below. A receive burst
            // fits (the assertion before `impl DpdkPort`).
            unsafe { lent.push(data, len, token) };
        });
        let delivered = self.lent.len();
        if delivered > 0 {
            f(&mut self.lent);
        }
        let rx_back = &mut self.rx_back;
        let taken = self.lent.finish(|token| {
            // SAFETY: our own mbuf, handed back untaken (the burst owned it since into_raw).
            let m = unsafe { Mbuf::from_raw(token.as_ptr().cast()) };
            // Freed below with the rest (a push past capacity, impossible here, frees it).
            let _ = rx_back.push(m);
        });
        if lend && taken != n {
            HELD.fetch_sub((n - taken) as isize, Ordering::Relaxed);
        }
        self.stats.rx_zero_copy += taken as u64;
        // Back to the pool in one call.
        self.rx_back.clear();
        self.stats.rx_frames += delivered as u64;
        Some(Ok(delivered))
    }

    /// Puts a lent mbuf back on the wire as it is; other buffers are copied (`send`).
    fn send_owned(&mut self, frame: ForeignFrame) -> Result<bool, PortError> {
        self.queue_owned(frame)
    }

    /// The burst through [`DpdkPort::queue_owned`], inlined: with the trait's default, which
    /// calls `send_owned` for each frame, the DPDK path counted 1157 instructions a frame
    /// against 1118 (callgrind, one run on a busy machine; bench/README.md "fifth round").
    fn send_owned_burst(&mut self, frames: &mut OwnedBurst) -> (u64, Option<PortError>) {
        let mut refused = 0;
        for (frame, _) in frames.drain(..) {
            match self.queue_owned(frame) {
                Ok(true) => {}
                // `send`, the only other answer, never fails with an error.
                _ => refused += 1,
            }
        }
        (refused, None)
    }

    fn own_kind(&self) -> Option<&'static ForeignKind> {
        Some(&MBUF)
    }

    /// The mbufs straight into the transmit array, one copy of their pointers for the burst;
    /// what finds no room is freed in one call.
    unsafe fn send_own_tokens(&mut self, tokens: &[NonNull<c_void>]) -> u64 {
        // SAFETY: `NonNull<c_void>` and `NonNull<rte_mbuf>` are the same pointer; by the
        // contract each is an owned, single-segment mbuf lent by recv_frames (MBUF's kind).
        let mbufs =
            unsafe { std::slice::from_raw_parts(tokens.as_ptr().cast::<NonNull<dpdk::sys::rte_mbuf>>(), tokens.len()) };
        // SAFETY: as above; the ones taken are the burst's now.
        let took = unsafe { self.tx.extend_raw(mbufs) };
        let refused = &mbufs[took..];
        let (took, refused_n) = (took as u64, refused.len() as u64);
        self.stats.tx_frames += took;
        self.stats.tx_zero_copy += took;
        self.stats.tx_ring_full += refused_n;
        // Every token leaves the switch's hold: sent now, or freed below.
        self.returned += tokens.len() as isize;
        // SAFETY: the rest are still owned here, freed once and not used again.
        unsafe { dpdk::free_raw_bulk(refused) };
        refused_n
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
        if self.returned != 0 {
            HELD.fetch_sub(self.returned, Ordering::Relaxed);
            self.returned = 0;
        }
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

    fn driver(&self) -> &str {
        self.port.driver_name()
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

impl Drop for DpdkPort {
    fn drop(&mut self) {
        // A port closed before its input ended no longer keeps the run going.
        if let Some(end) = self.input_end.take() {
            end.left.one_done();
        }
        // Lent mbufs that came back since the last flush are no longer the switch's.
        HELD.fetch_sub(std::mem::take(&mut self.returned), Ordering::Relaxed);
    }
}
