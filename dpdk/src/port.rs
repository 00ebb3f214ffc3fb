//! Ethernet ports: open by device name, configure, start, burst receive and transmit, and
//! read link state and the driver's counters.
//!
//! One [`EthPort`] handle per port in the process (a second open is refused), because the
//! burst functions are not safe to call on the same queue from two threads; `&mut self` on
//! the burst functions then makes each queue single-threaded by construction.

use crate::device::{driver_installed, DeviceSpec};
use crate::eal::{strerror, Eal};
use crate::error::{Error, ErrorKind};
use crate::mbuf::MbufBurst;
use crate::mempool::Mempool;
use dpdk_sys as sys;
use std::cell::Cell;
use std::collections::BTreeSet;
use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::path::Path;
use std::sync::Mutex;

/// How to set a port up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortConfig {
    /// Receive queues (1 until the switch shards by queue).
    pub rx_queues: u16,
    /// Transmit queues.
    pub tx_queues: u16,
    /// Receive descriptors per queue (the driver may round to its alignment and limits).
    pub rx_ring: u16,
    /// Transmit descriptors per queue. A full transmit ring refuses frames: that is the
    /// back-pressure a lossless port relies on.
    pub tx_ring: u16,
    /// The MTU, `None` for the driver's default (1500). Every frame must fit one mbuf.
    pub mtu: Option<u16>,
    /// Receive frames for every destination MAC (a switch port must).
    pub promiscuous: bool,
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig {
            rx_queues: 1,
            tx_queues: 1,
            rx_ring: 1024,
            tx_ring: 1024,
            mtu: None,
            promiscuous: true,
        }
    }
}

/// Link state, as the driver reports it without waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    /// Whether the link is up.
    pub up: bool,
    /// Speed in Mbit/s, `None` when the driver does not know.
    pub speed_mbps: Option<u32>,
    /// Full duplex.
    pub full_duplex: bool,
}

/// The driver's counters for a port (DPDK's basic `rte_eth_stats`) and the wrapper's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Frames received.
    pub ipackets: u64,
    /// Frames transmitted.
    pub opackets: u64,
    /// Bytes received.
    pub ibytes: u64,
    /// Bytes transmitted.
    pub obytes: u64,
    /// Frames the hardware dropped because the receive ring was full.
    pub imissed: u64,
    /// Erroneous frames received.
    pub ierrors: u64,
    /// Failed transmissions (some virtual drivers also count frames a full ring refused,
    /// although the caller keeps those).
    pub oerrors: u64,
    /// Receive buffer allocation failures (pool exhausted).
    pub rx_nombuf: u64,
    /// Chained (multi-segment) frames dropped by [`EthPort::rx_burst`].
    pub rx_chained_dropped: u64,
}

/// What a driver says a port can do (from `rte_eth_dev_info_get`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// The driver's name (`net_ring`, `net_mlx5`).
    pub driver: String,
    /// Maximum receive queues.
    pub max_rx_queues: u16,
    /// Maximum transmit queues.
    pub max_tx_queues: u16,
    /// Receive descriptors per queue: (min, max).
    pub rx_ring_limits: (u16, u16),
    /// Transmit descriptors per queue: (min, max).
    pub tx_ring_limits: (u16, u16),
    /// MTU limits: (min, max).
    pub mtu_limits: (u16, u16),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Probed,
    Configured,
    Started,
}

/// An open DPDK Ethernet port. Drop stops and closes it and removes its device from DPDK,
/// so [`EthPort::open`] can add it again (a device given to the EAL at start-up included).
#[derive(Debug)]
pub struct EthPort {
    id: u16,
    name: String,
    driver: String,
    state: State,
    rx_queues: u16,
    tx_queues: u16,
    rx_ring: u16,
    tx_ring: u16,
    /// The pool the receive queues fill from: held so it outlives the port.
    pool: Option<Mempool>,
    promiscuous: bool,
    rx_chained_dropped: u64,
    /// Movable to another thread, not shared between threads: some drivers' control calls
    /// (counters that clear on read, link polling) are not safe to run concurrently.
    _not_sync: PhantomData<Cell<()>>,
}

/// Port ids with a live handle.
static CLAIMED: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// Ethernet framing around an MTU's payload that must fit one mbuf: header and a VLAN tag
/// (the CRC is stripped on receive).
const FRAME_OVERHEAD: u32 = 14 + 4;
/// DPDK's default MTU.
const DEFAULT_MTU: u16 = 1500;

impl EthPort {
    /// Opens a port DPDK already has (given to the EAL as `--vdev` or `-a`), by device
    /// string (`net_ring0`, `0000:3b:00.0`; arguments after a comma are ignored here).
    pub fn by_name(device: &str) -> Result<EthPort, Error> {
        let spec = DeviceSpec::parse(device)?;
        let eal = Eal::require(&format!("port {}", spec.name()))?;
        Self::from_spec(eal, &spec)
    }

    /// Opens a port, adding the device first (hotplug) if DPDK does not have it yet: the
    /// way to open a device not listed in the EAL arguments.
    pub fn open(device: &str) -> Result<EthPort, Error> {
        let spec = DeviceSpec::parse(device)?;
        let eal = Eal::require(&format!("port {}", spec.name()))?;
        if port_id(spec.name()).is_none() {
            eal.probe(&spec)?;
        }
        Self::from_spec(eal, &spec)
    }

    fn from_spec(_eal: &Eal, spec: &DeviceSpec) -> Result<EthPort, Error> {
        let id = port_id(spec.name()).ok_or_else(|| no_port_error(spec))?;
        {
            let mut claimed = CLAIMED.lock().unwrap_or_else(|p| p.into_inner());
            if !claimed.insert(id) {
                return Err(Error::new(
                    ErrorKind::PortBusy,
                    format!(
                        "port {} is already open in this process (one handle per port: \
                         its queues are not safe to share)",
                        spec.name()
                    ),
                ));
            }
        }
        let mut port = EthPort {
            id,
            name: spec.name().to_string(),
            driver: String::new(),
            state: State::Probed,
            rx_queues: 0,
            tx_queues: 0,
            rx_ring: 0,
            tx_ring: 0,
            pool: None,
            promiscuous: false,
            rx_chained_dropped: 0,
            _not_sync: PhantomData,
        };
        port.driver = port.info()?.driver;
        Ok(port)
    }

    /// DPDK's port id.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// The device name (`net_ring0`, `0000:3b:00.0`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The driver's name (`net_ring`).
    pub fn driver_name(&self) -> &str {
        &self.driver
    }

    /// Receive descriptors per queue, as the driver accepted them (after `configure`).
    pub fn rx_ring_size(&self) -> u16 {
        self.rx_ring
    }

    /// Transmit descriptors per queue, as the driver accepted them (after `configure`).
    pub fn tx_ring_size(&self) -> u16 {
        self.tx_ring
    }

    /// Whether the port is started.
    pub fn is_started(&self) -> bool {
        self.state == State::Started
    }

    /// What the driver says the port can do.
    pub fn info(&self) -> Result<PortInfo, Error> {
        let mut info = sys::rte_eth_dev_info::default();
        // SAFETY: a valid port id we hold; info is a writable rte_eth_dev_info.
        let ret = unsafe { sys::rte_eth_dev_info_get(self.id, &mut info) };
        if ret < 0 {
            return Err(self.port_error("reading its device info", -ret, ""));
        }
        let driver = if info.driver_name.is_null() {
            String::new()
        } else {
            // SAFETY: the driver's name, a static C string owned by the driver.
            unsafe { CStr::from_ptr(info.driver_name) }
                .to_string_lossy()
                .into_owned()
        };
        Ok(PortInfo {
            driver,
            max_rx_queues: info.max_rx_queues,
            max_tx_queues: info.max_tx_queues,
            rx_ring_limits: (info.rx_desc_lim.nb_min, info.rx_desc_lim.nb_max),
            tx_ring_limits: (info.tx_desc_lim.nb_min, info.tx_desc_lim.nb_max),
            mtu_limits: (info.min_mtu, info.max_mtu),
        })
    }

    /// Configures the port and sets its queues up, receiving into `pool`.
    pub fn configure(&mut self, cfg: &PortConfig, pool: &Mempool) -> Result<(), Error> {
        if self.state == State::Started {
            return Err(self.port_error("configuring", libc::EBUSY, "stop it first"));
        }
        let info = self.info()?;
        let refuse =
            |what: String| Error::new(ErrorKind::Port, format!("port {} ({}): {what}", self.name, self.driver));
        for (kind, asked, max) in [
            ("receive", cfg.rx_queues, info.max_rx_queues),
            ("transmit", cfg.tx_queues, info.max_tx_queues),
        ] {
            if asked == 0 || asked > max {
                return Err(refuse(format!(
                    "{asked} {kind} queues asked for; the driver offers 1 to {max}: change \
                     the port's queue count"
                )));
            }
        }
        let mtu = cfg.mtu.unwrap_or(DEFAULT_MTU);
        let (min_mtu, max_mtu) = info.mtu_limits;
        if cfg.mtu.is_some() && !(min_mtu..=max_mtu).contains(&mtu) {
            return Err(refuse(format!(
                "MTU {mtu} is outside the driver's {min_mtu}..={max_mtu}: change the port's mtu"
            )));
        }
        if u32::from(mtu) + FRAME_OVERHEAD > u32::from(pool.frame_room()) {
            return Err(refuse(format!(
                "MTU {mtu} frames (up to {} B) do not fit the {} B mbufs of pool '{}', and \
                 frames are never split across mbufs: give the pool more frame room",
                u32::from(mtu) + FRAME_OVERHEAD,
                pool.frame_room(),
                pool.name()
            )));
        }

        let mut conf = sys::rte_eth_conf::default();
        conf.rxmode.mtu = cfg.mtu.map_or(0, u32::from);
        // SAFETY: a valid port id we hold, not started; conf is a valid rte_eth_conf that
        // DPDK copies.
        let ret = unsafe { sys::rte_eth_dev_configure(self.id, cfg.rx_queues, cfg.tx_queues, &conf) };
        if ret < 0 {
            return Err(self.port_error(
                &format!(
                    "configuring {} rx / {} tx queues, MTU {mtu}",
                    cfg.rx_queues, cfg.tx_queues
                ),
                -ret,
                "check the port's settings against the driver's limits (DPDK's log above \
                 says which)",
            ));
        }
        let (mut rxd, mut txd) = (cfg.rx_ring, cfg.tx_ring);
        // SAFETY: a valid, configured port; two writable u16s.
        let ret = unsafe { sys::rte_eth_dev_adjust_nb_rx_tx_desc(self.id, &mut rxd, &mut txd) };
        if ret < 0 {
            return Err(self.port_error("fitting the ring sizes to the driver", -ret, ""));
        }
        // SAFETY: a valid port id.
        let socket = unsafe { sys::rte_eth_dev_socket_id(self.id) };
        // SOCKET_ID_ANY (-1) is passed as its unsigned bit pattern, as DPDK expects.
        let socket = socket as u32;
        for q in 0..cfg.rx_queues {
            // SAFETY: a configured port, q < rx_queues; null rxconf = the driver's default;
            // the pool outlives the port (a clone is kept below).
            let ret = unsafe { sys::rte_eth_rx_queue_setup(self.id, q, rxd, socket, std::ptr::null(), pool.as_ptr()) };
            if ret < 0 {
                return Err(self.port_error(
                    &format!("setting up receive queue {q} ({rxd} descriptors)"),
                    -ret,
                    "a smaller ring or a larger pool may help",
                ));
            }
        }
        for q in 0..cfg.tx_queues {
            // SAFETY: a configured port, q < tx_queues; null txconf = the driver's default.
            let ret = unsafe { sys::rte_eth_tx_queue_setup(self.id, q, txd, socket, std::ptr::null()) };
            if ret < 0 {
                return Err(self.port_error(
                    &format!("setting up transmit queue {q} ({txd} descriptors)"),
                    -ret,
                    "a smaller ring may help",
                ));
            }
        }
        self.rx_queues = cfg.rx_queues;
        self.tx_queues = cfg.tx_queues;
        self.rx_ring = rxd;
        self.tx_ring = txd;
        self.pool = Some(pool.clone());
        self.promiscuous = cfg.promiscuous;
        self.state = State::Configured;
        Ok(())
    }

    /// Starts the port (after [`EthPort::configure`]).
    pub fn start(&mut self) -> Result<(), Error> {
        match self.state {
            State::Started => return Ok(()),
            State::Probed => return Err(self.port_error("starting", libc::EINVAL, "configure it first")),
            State::Configured => {}
        }
        // SAFETY: a valid, configured port.
        let ret = unsafe { sys::rte_eth_dev_start(self.id) };
        if ret < 0 {
            return Err(self.port_error("starting", -ret, "DPDK's log above gives the driver's reason"));
        }
        self.state = State::Started;
        if self.promiscuous {
            // SAFETY: a valid, started port.
            let ret = unsafe { sys::rte_eth_promiscuous_enable(self.id) };
            // Virtual drivers without a MAC filter do not implement it: they receive
            // everything anyway.
            if ret < 0 && -ret != libc::ENOTSUP {
                return Err(self.port_error("enabling promiscuous mode", -ret, ""));
            }
        }
        Ok(())
    }

    /// Stops the port; [`EthPort::start`] restarts it with the same set-up.
    pub fn stop(&mut self) -> Result<(), Error> {
        if self.state != State::Started {
            return Ok(());
        }
        // SAFETY: a valid, started port; no burst runs (we hold `&mut self`).
        let ret = unsafe { sys::rte_eth_dev_stop(self.id) };
        if ret < 0 {
            return Err(self.port_error("stopping", -ret, ""));
        }
        self.state = State::Configured;
        Ok(())
    }

    /// Receives into the burst's free space from queue 0; returns how many frames arrived
    /// (chained frames are dropped and counted, see [`PortStats::rx_chained_dropped`]).
    /// Keep the free space a multiple of 8: vector drivers may return nothing otherwise.
    #[inline]
    pub fn rx_burst(&mut self, burst: &mut MbufBurst) -> usize {
        self.rx_burst_queue(0, burst)
    }

    /// [`EthPort::rx_burst`] on a given queue (0 for a stopped port or a bad queue).
    #[inline]
    pub fn rx_burst_queue(&mut self, queue: u16, burst: &mut MbufBurst) -> usize {
        if self.state != State::Started || queue >= self.rx_queues {
            return 0;
        }
        let (ptr, room) = burst.spare_raw();
        if room == 0 {
            return 0;
        }
        // SAFETY: a started port and a configured queue used only through `&mut self`;
        // ptr has room for `room` mbuf pointers.
        let n = unsafe { sys::rte_eth_rx_burst(self.id, queue, ptr, room) };
        // SAFETY: the driver wrote n received mbufs, now ours, into the free space.
        unsafe { burst.commit_received(usize::from(n), &mut self.rx_chained_dropped) }
    }

    /// Offers the burst's frames to queue 0, front first; returns how many the driver took.
    /// Those leave the burst; the rest stay in it, in order, still owned by the caller (a
    /// full transmit ring is back-pressure, not a drop).
    #[inline]
    pub fn tx_burst(&mut self, burst: &mut MbufBurst) -> usize {
        self.tx_burst_queue(0, burst)
    }

    /// [`EthPort::tx_burst`] on a given queue (takes nothing on a stopped port or a bad
    /// queue).
    #[inline]
    pub fn tx_burst_queue(&mut self, queue: u16, burst: &mut MbufBurst) -> usize {
        if self.state != State::Started || queue >= self.tx_queues || burst.is_empty() {
            return 0;
        }
        let (ptr, n) = burst.as_raw();
        // SAFETY: a started port and a configured queue used only through `&mut self`;
        // ptr holds n owned single-segment mbufs. The driver takes ownership of the first
        // `sent` and leaves the rest untouched.
        let sent = unsafe { sys::rte_eth_tx_burst(self.id, queue, ptr, n) };
        // SAFETY: the first `sent` now belong to the driver.
        unsafe { burst.consume_front(usize::from(sent)) };
        usize::from(sent)
    }

    /// Link state, without waiting for autonegotiation.
    pub fn link(&self) -> Result<Link, Error> {
        let mut link = sys::rte_eth_link::default();
        // SAFETY: a valid port id; link is writable.
        let ret = unsafe { sys::rte_eth_link_get_nowait(self.id, &mut link) };
        if ret < 0 {
            return Err(self.port_error("reading the link state", -ret, ""));
        }
        let speed = link.link_speed;
        Ok(Link {
            up: u32::from(link.link_status()) == sys::RTE_ETH_LINK_UP,
            speed_mbps: (speed != sys::RTE_ETH_SPEED_NUM_NONE && speed != sys::RTE_ETH_SPEED_NUM_UNKNOWN)
                .then_some(speed),
            full_duplex: u32::from(link.link_duplex()) == sys::RTE_ETH_LINK_FULL_DUPLEX,
        })
    }

    /// The port's MAC address.
    pub fn mac(&self) -> Result<[u8; 6], Error> {
        let mut addr = sys::rte_ether_addr::default();
        // SAFETY: a valid port id; addr is writable.
        let ret = unsafe { sys::rte_eth_macaddr_get(self.id, &mut addr) };
        if ret < 0 {
            return Err(self.port_error("reading its MAC address", -ret, ""));
        }
        Ok(addr.addr_bytes)
    }

    /// The driver's counters, and the wrapper's.
    pub fn stats(&self) -> Result<PortStats, Error> {
        let mut s = sys::rte_eth_stats::default();
        // SAFETY: a valid port id; s is writable.
        let ret = unsafe { sys::rte_eth_stats_get(self.id, &mut s) };
        if ret < 0 {
            return Err(self.port_error("reading its counters", -ret, ""));
        }
        Ok(PortStats {
            ipackets: s.ipackets,
            opackets: s.opackets,
            ibytes: s.ibytes,
            obytes: s.obytes,
            imissed: s.imissed,
            ierrors: s.ierrors,
            oerrors: s.oerrors,
            rx_nombuf: s.rx_nombuf,
            rx_chained_dropped: self.rx_chained_dropped,
        })
    }

    fn port_error(&self, doing: &str, errno: i32, hint: &str) -> Error {
        let hint = if hint.is_empty() {
            String::new()
        } else {
            format!("; {hint}")
        };
        Error::with_errno(
            ErrorKind::Port,
            errno,
            format!(
                "port {} ({}): {doing} failed: {} (errno {errno}){hint}",
                self.name,
                self.driver,
                strerror(errno)
            ),
        )
    }
}

impl Drop for EthPort {
    fn drop(&mut self) {
        let mut info = sys::rte_eth_dev_info::default();
        // SAFETY: a valid port id we hold; no burst can run (we are being dropped). Close
        // releases the port and returns its receive ring's mbufs to the pool, which we
        // still hold until after this. Removing the device afterwards lets `open` add it
        // again (a closed port cannot be reopened while its device stays).
        unsafe {
            let device = if sys::rte_eth_dev_info_get(self.id, &mut info) == 0 {
                info.device
            } else {
                std::ptr::null_mut()
            };
            if self.state == State::Started {
                sys::rte_eth_dev_stop(self.id);
            }
            sys::rte_eth_dev_close(self.id);
            if !device.is_null() {
                sys::rte_dev_remove(device);
            }
        }
        CLAIMED.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.id);
    }
}

/// The port id DPDK has for a device name, if any.
fn port_id(name: &str) -> Option<u16> {
    let c = CString::new(name).ok()?;
    let mut id = 0u16;
    // SAFETY: a valid C string and a writable u16; the EAL is running.
    let ret = unsafe { sys::rte_eth_dev_get_port_by_name(c.as_ptr(), &mut id) };
    (ret == 0).then_some(id)
}

fn driver_missing(spec: &DeviceSpec) -> Option<Error> {
    let driver = spec.driver()?;
    let dir = Eal::pmd_dir();
    (driver_installed(Path::new(dir), driver) == Some(false)).then(|| {
        Error::new(
            ErrorKind::NoSuchDriver,
            format!(
                "port {}: no such driver '{driver}': installed PMDs are in {dir}/ (install \
                 dpdk with its recommended driver packages, librte-net-*; the virtual \
                 devices net_ring, net_null, net_tap, net_af_packet, net_pcap, net_memif and \
                 net_virtio_user are among them)",
                spec.name()
            ),
        )
    })
}

/// Why a device has no port, and what to do.
fn no_port_error(spec: &DeviceSpec) -> Error {
    if let Some(e) = driver_missing(spec) {
        return e;
    }
    let msg = if spec.is_pci() {
        format!(
            "PCI port {0} is not a DPDK port in this process: bind it to a DPDK driver \
             (dpdk-devbind.py --bind=vfio-pci {0}; Mellanox NICs stay on mlx5_core), allow \
             it in the EAL arguments (-a {0}) and start the EAL with hugepages ([run.dpdk] \
             hugepages)",
            spec.name()
        )
    } else {
        format!(
            "port {0} does not exist in this process: list it in the EAL arguments \
             (--vdev {0}) or open it with EthPort::open (hotplug); if it was listed, its \
             driver refused it (DPDK's log above says why)",
            spec.name()
        )
    };
    Error::new(ErrorKind::NoSuchPort, msg)
}

/// Why hotplugging a device failed, and what to do.
pub(crate) fn probe_error(spec: &DeviceSpec, errno: i32) -> Error {
    if let Some(e) = driver_missing(spec) {
        return e;
    }
    let hint = match errno {
        libc::EEXIST => "a device of that name already exists".to_string(),
        _ if spec.is_pci() => format!(
            "bind it to a DPDK driver (dpdk-devbind.py --bind=vfio-pci {}) and start the EAL \
             with hugepages and without --no-pci",
            spec.name()
        ),
        _ => "its driver refused the device or its arguments (DPDK's log above says why): \
              check the key=value arguments against the driver's documentation"
            .to_string(),
    };
    Error::with_errno(
        ErrorKind::NoSuchPort,
        errno,
        format!(
            "port {}: adding device '{}' failed: {} (errno {errno}); {hint}",
            spec.name(),
            spec.devargs(),
            strerror(errno)
        ),
    )
}
