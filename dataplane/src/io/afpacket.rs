//! AF_PACKET backend on memory-mapped TPACKET_V2 rings, for veth/tap/any Linux netdev.
//!
//! Why this shape:
//! * **Rings, not recvfrom/sendto per frame.** One `mmap` holds the RX ring then the TX ring.
//!   Receiving reads frames the kernel already wrote into the ring: no system call at all.
//!   Transmitting writes frames into TX slots and `flush` makes one `sendto` per burst.
//! * **TPACKET_V2, not V3.** V3 hands the ring over in blocks that the kernel retires only when
//!   full or after a timeout of at least a millisecond; a lossless switch whose PFC must react in
//!   microseconds cannot wait for that. V2 hands over every frame as soon as it is written.
//! * **Exact wire view.** Promiscuous, `ETH_P_ALL`, our own transmissions ignored
//!   (`PACKET_IGNORE_OUTGOING`, and `PACKET_OUTGOING` frames skipped in case the option is
//!   missing), and an 802.1Q tag the kernel moved into the ring header put back into the frame so
//!   the switch sees the PCP it classifies on.
//! * **Nothing transient is an error.** A full ring is `Ok(false)`, kernel buffer pressure leaves
//!   the frames queued for the next flush, a down link discards what was queued; each is
//!   counted. Only a vanished interface or an unexpected errno is an `Err`.
//!
//! The unsafe code is confined to the small functions at the bottom (system calls) and the
//! accessors of [`Rings`] (pointer arithmetic inside the mapping), each with its argument.

use super::{PortBackend, PortError, PortStats};
use libc::{c_int, c_void, socklen_t, tpacket2_hdr};
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

/// Ring sizes. The default fits a 1500-byte MTU in 2048-byte slots, 4096 slots per direction
/// (16 MiB per port), a few milliseconds of 10 Gb/s line rate.
#[derive(Clone, Copy, Debug)]
pub struct AfPacketOptions {
    /// Receive ring slots (rounded up to whole blocks).
    pub rx_frames: u32,
    /// Transmit ring slots (rounded up to whole blocks).
    pub tx_frames: u32,
    /// Bytes per slot, header included (a multiple of 16). `None`: derived from the interface's
    /// MTU at open, enough for MTU + Ethernet header + two VLAN tags.
    pub frame_size: Option<u32>,
}

/// How long a stall of the switch an emulated port's receive ring absorbs at its line rate.
/// On a loaded 2-core machine the worker was seen descheduled for 50–190 ms at a time; the
/// kernel's ring is the emulated peer's transmit queue, and a frame the kernel drops because
/// that ring is full is lost before any PFC could have held it.
pub const EMULATED_RX_STALL_MS: u64 = 500;
/// The most one emulated port's receive ring may take (bytes of slots).
pub const EMULATED_RX_RING_MAX_BYTES: u64 = 64 << 20;

/// Bytes of a ring slot for an interface of `mtu`: the header, the MAC offset, the frame with
/// two VLAN tags; a power of two up to a page (slots then pack blocks exactly).
fn slot_size_for_mtu(mtu: u32, page: u32) -> u32 {
    let need = RX_MAC_OFFSET + mtu + L2_OVERHEAD;
    if need <= page {
        need.next_power_of_two()
    } else {
        need.next_multiple_of(16)
    }
}

impl AfPacketOptions {
    /// The rings a port of this config gets. A wire peer (a NIC behind a veth or tap, or a
    /// host that is itself rate-limited by a real link) keeps the default; an emulated peer
    /// gets a receive ring that holds [`EMULATED_RX_STALL_MS`] of its line rate in full-size
    /// frames (at least the default, at most [`EMULATED_RX_RING_MAX_BYTES`]): 500 Mb/s → about
    /// 20 600 slots, 40 MiB. Smaller frames fill it sooner, by the ratio of their sizes.
    pub fn for_port(p: &controlplane::PortConfig) -> AfPacketOptions {
        let default = AfPacketOptions::default();
        if p.peer != controlplane::PeerKind::Emulated {
            return default;
        }
        let frame = u64::from(p.max_frame_bytes.max(64));
        // The slot `open` will use if the interface's MTU is the port's (`max_frame - 18`).
        let mtu = p.max_frame_bytes.saturating_sub(18).max(68);
        let slot = u64::from(slot_size_for_mtu(mtu, page_size()));
        let want = (u128::from(p.speed_bps) * u128::from(EMULATED_RX_STALL_MS) / 8_000 / u128::from(frame)) as u64;
        let most = EMULATED_RX_RING_MAX_BYTES / slot;
        AfPacketOptions {
            rx_frames: want.clamp(u64::from(default.rx_frames), most.max(u64::from(default.rx_frames))) as u32,
            ..default
        }
    }
}

impl Default for AfPacketOptions {
    fn default() -> Self {
        AfPacketOptions {
            rx_frames: 4096,
            tx_frames: 4096,
            frame_size: None,
        }
    }
}

const _: () = assert!(size_of::<tpacket2_hdr>() == 32);
const _: () = assert!(libc::TPACKET2_HDRLEN == 52);
/// Where a TX frame's bytes start in its slot when `PACKET_TX_HAS_OFF` is off (the kernel's
/// `tp_hdrlen - sizeof(sockaddr_ll)`).
const TX_DATA_OFFSET: usize = libc::TPACKET2_HDRLEN - size_of::<libc::sockaddr_ll>();
/// Where the `sockaddr_ll` follows the header in an RX slot (`TPACKET_ALIGN(sizeof hdr)`).
const RX_SLL_OFFSET: usize = (size_of::<tpacket2_hdr>() + libc::TPACKET_ALIGNMENT - 1) & !(libc::TPACKET_ALIGNMENT - 1);
/// Worst-case offset of the MAC header in an RX slot for SOCK_RAW: the kernel puts the network
/// header at `TPACKET_ALIGN(hdrlen + max(16, maclen))` = 80 and the 14-byte MAC header before it.
const RX_MAC_OFFSET: u32 = 80 - 14;
/// Ethernet header plus two VLAN tags.
const L2_OVERHEAD: u32 = 14 + 8;
const ETH_HLEN: usize = 14;
const TX_BUSY: u32 = libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_SENDING | libc::TP_STATUS_WRONG_FORMAT;

/// Where one ring's slots live in the mapping. Slots never straddle blocks, so slot `i` is at
/// block `i / per_block`, position `i % per_block`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Geometry {
    block_size: u32,
    blocks: u32,
    frame_size: u32,
    per_block: u32,
}

impl Geometry {
    /// The smallest power-of-two number of pages (the kernel allocates blocks in page orders)
    /// that wastes at most 1/8 of a block, up to 128 KiB; then enough blocks for `frames` slots.
    fn new(frames: u32, frame_size: u32, page: u32) -> Geometry {
        let mut block = page;
        while block < frame_size || ((block % frame_size) * 8 > block && block < 128 * 1024) {
            block *= 2;
        }
        let per_block = block / frame_size;
        let blocks = frames.max(1).div_ceil(per_block);
        Geometry {
            block_size: block,
            blocks,
            frame_size,
            per_block,
        }
    }

    fn frames(&self) -> u32 {
        self.blocks * self.per_block
    }

    fn bytes(&self) -> usize {
        self.block_size as usize * self.blocks as usize
    }

    fn slot(&self, i: u32) -> usize {
        (i / self.per_block) as usize * self.block_size as usize
            + (i % self.per_block) as usize * self.frame_size as usize
    }

    fn req(&self) -> libc::tpacket_req {
        libc::tpacket_req {
            tp_block_size: self.block_size,
            tp_block_nr: self.blocks,
            tp_frame_size: self.frame_size,
            tp_frame_nr: self.frames(),
        }
    }
}

/// The shared mapping of both rings (RX first, then TX), unmapped on drop.
struct Rings {
    base: *mut u8,
    len: usize,
    rx: Geometry,
    tx: Geometry,
}

impl Rings {
    /// Offset of RX slot `i` in the mapping.
    fn rx_slot(&self, i: u32) -> usize {
        self.rx.slot(i)
    }

    /// Offset of TX slot `i` in the mapping.
    fn tx_slot(&self, i: u32) -> usize {
        self.rx.bytes() + self.tx.slot(i)
    }

    /// The status word of the slot at `off`: shared with the kernel, so only ever touched
    /// atomically (acquire to take a slot, release to hand it back).
    fn status(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off + size_of::<tpacket2_hdr>() <= self.len && off.is_multiple_of(16));
        // SAFETY: `off` is a slot offset inside the mapping, 16-byte aligned (blocks are page
        // aligned, slots multiples of 16); `tp_status` is the slot's first u32. The mapping lives
        // as long as `self`.
        unsafe { &*(self.base.add(off) as *const AtomicU32) }
    }

    /// A copy of the header of the slot at `off`. Only called while we own the slot (status
    /// read with acquire), when the kernel does not write it.
    fn header(&self, off: usize) -> tpacket2_hdr {
        // SAFETY: as in `status`; the header is 32 bytes inside the slot, aligned.
        unsafe { ptr::read(self.base.add(off) as *const tpacket2_hdr) }
    }

    /// The packet type (`PACKET_OUTGOING` etc.) from the `sockaddr_ll` after the header.
    fn pkttype(&self, off: usize) -> u8 {
        // SAFETY: the sockaddr_ll sits at RX_SLL_OFFSET inside the slot (frame_size >= 80);
        // sll_pkttype is a byte at offset 10 of it. We own the slot.
        unsafe { *self.base.add(off + RX_SLL_OFFSET + 10) }
    }

    /// `len` bytes at `off + start` of an RX slot we own.
    fn bytes(&self, off: usize, start: usize, len: usize) -> &[u8] {
        assert!(start + len <= self.rx.frame_size as usize);
        // SAFETY: bounds checked against the slot just above; we own the slot until we store
        // TP_STATUS_KERNEL, which happens after the returned slice's last use.
        unsafe { std::slice::from_raw_parts(self.base.add(off + start), len) }
    }

    /// Writes `frame` into the TX slot at `off` (which we own: status AVAILABLE) and sets tp_len.
    fn fill_tx(&mut self, off: usize, frame: &[u8]) {
        assert!(TX_DATA_OFFSET + frame.len() <= self.tx.frame_size as usize);
        // SAFETY: bounds checked above; the slot is ours until we store SEND_REQUEST.
        unsafe {
            ptr::copy_nonoverlapping(frame.as_ptr(), self.base.add(off + TX_DATA_OFFSET), frame.len());
            let h = self.base.add(off) as *mut tpacket2_hdr;
            ptr::addr_of_mut!((*h).tp_len).write(frame.len() as u32);
        }
    }
}

impl Drop for Rings {
    fn drop(&mut self) {
        // SAFETY: base/len are exactly what mmap returned; nothing borrows the mapping any more.
        unsafe { libc::munmap(self.base as *mut c_void, self.len) };
    }
}

/// An open AF_PACKET port. Owned by one worker thread at a time.
pub struct AfPacket {
    name: String,
    ifindex: c_int,
    rings: Rings,
    fd: OwnedFd,
    rx_head: u32,
    tx_head: u32,
    /// Frames were marked SEND_REQUEST since the last complete flush.
    tx_pending: bool,
    /// The interface MTU (refreshed by `link_up`): the kernel refuses longer frames.
    mtu: u32,
    /// Where a frame whose VLAN tag the kernel stripped is rebuilt with the tag.
    scratch: Box<[u8]>,
    gone: bool,
    stats: PortStats,
}

// SAFETY: the raw pointer is to a mapping this value exclusively owns; nothing in it is tied to
// the thread that created it, so moving it to a worker thread is sound (it is not Sync).
unsafe impl Send for AfPacket {}

impl AfPacket {
    /// Opens `ifname` (in the caller's network namespace): socket, rings, mapping, bind,
    /// promiscuous mode. The interface may be down; frames flow once it is up.
    pub fn open(ifname: &str, opts: AfPacketOptions) -> Result<AfPacket, PortError> {
        let err = |context: &'static str, source: io::Error| PortError::Io {
            iface: ifname.to_string(),
            context,
            source,
        };
        let ifr_name =
            ifreq_name(ifname).ok_or_else(|| err("interface name", io::Error::from_raw_os_error(libc::EINVAL)))?;
        let ifindex = if_nametoindex(&ifr_name).map_err(|e| err("looking up the interface", e))?;
        // Protocol 0 until bind: nothing from other interfaces lands in the rings meanwhile.
        let fd = sys_socket().map_err(|e| err("socket(AF_PACKET)", e))?;
        let raw = fd.as_raw_fd();
        let mtu = ifreq_get(raw, libc::SIOCGIFMTU, ifr_name).map_err(|e| err("reading the MTU", e))?;
        // SAFETY: SIOCGIFMTU filled ifru_mtu.
        let mtu = unsafe { mtu.ifr_ifru.ifru_mtu }.max(68) as u32;
        let page = page_size();
        let frame_size = match opts.frame_size {
            Some(s) => s.max(RX_MAC_OFFSET + 64).next_multiple_of(16),
            None => slot_size_for_mtu(mtu, page),
        };
        let rx = Geometry::new(opts.rx_frames, frame_size, page);
        let tx = Geometry::new(opts.tx_frames, frame_size, page);

        let one: c_int = 1;
        setopt(
            raw,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            &(libc::tpacket_versions::TPACKET_V2 as c_int),
        )
        .map_err(|e| err("PACKET_VERSION TPACKET_V2", e))?;
        // A malformed TX slot is skipped instead of stopping the ring (counted by our own checks).
        setopt(raw, libc::SOL_PACKET, libc::PACKET_LOSS, &one).map_err(|e| err("PACKET_LOSS", e))?;
        if let Err(e) = setopt(raw, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &one) {
            tracing::warn!(
                interface = ifname,
                "PACKET_QDISC_BYPASS unavailable, sending through the qdisc: {e}"
            );
        }
        if let Err(e) = setopt(raw, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &one) {
            tracing::debug!(
                interface = ifname,
                "PACKET_IGNORE_OUTGOING unavailable, filtering by pkttype: {e}"
            );
        }
        // The TX ring's frames are charged to the send buffer while in flight: let it hold them.
        let sndbuf = c_int::try_from(tx.bytes()).unwrap_or(c_int::MAX / 2);
        if setopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &sndbuf).is_err() {
            let _ = setopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUF, &sndbuf);
        }
        setopt(raw, libc::SOL_PACKET, libc::PACKET_RX_RING, &rx.req()).map_err(|e| err("PACKET_RX_RING", e))?;
        setopt(raw, libc::SOL_PACKET, libc::PACKET_TX_RING, &tx.req()).map_err(|e| err("PACKET_TX_RING", e))?;
        let len = rx.bytes() + tx.bytes();
        let base = sys_mmap(raw, len).map_err(|e| err("mmap of the rings", e))?;
        let rings = Rings { base, len, rx, tx };
        sys_bind(raw, ifindex).map_err(|e| err("bind", e))?;
        let mreq = libc::packet_mreq {
            mr_ifindex: ifindex,
            mr_type: libc::PACKET_MR_PROMISC as u16,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        setopt(raw, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq).map_err(|e| err("promiscuous mode", e))?;
        Ok(AfPacket {
            name: ifname.to_string(),
            ifindex,
            rings,
            fd,
            rx_head: 0,
            tx_head: 0,
            tx_pending: false,
            mtu,
            scratch: vec![0u8; frame_size as usize + 4].into_boxed_slice(),
            gone: false,
            stats: PortStats::default(),
        })
    }

    /// Slot size in bytes (both rings).
    pub fn frame_size(&self) -> u32 {
        self.rings.rx.frame_size
    }

    /// Slots in the receive and transmit rings.
    pub fn ring_frames(&self) -> (u32, u32) {
        (self.rings.rx.frames(), self.rings.tx.frames())
    }

    /// The longest frame `send` accepts (given whether it carries an 802.1Q tag).
    fn max_tx_len(&self, tagged: bool) -> usize {
        let mtu = self.mtu as usize + ETH_HLEN + if tagged { 4 } else { 0 };
        mtu.min(self.rings.tx.frame_size as usize - TX_DATA_OFFSET)
    }

    fn vanished(&self, errno: i32) -> PortError {
        PortError::Vanished {
            iface: self.name.clone(),
            source: io::Error::from_raw_os_error(errno),
        }
    }

    /// The interface's flags (`IFF_UP`, `IFF_RUNNING`), refreshing the MTU on the way; `Err`
    /// is the errno, ENODEV if our ifindex no longer exists in this namespace. By ifindex, not
    /// name: a new interface with our old name is not our port.
    fn interface_flags(&mut self) -> Result<c_int, i32> {
        let raw = self.fd.as_raw_fd();
        let mut ifr = empty_ifreq();
        ifr.ifr_ifru.ifru_ifindex = self.ifindex;
        let errno = |e: io::Error| e.raw_os_error().unwrap_or(0);
        ifreq_ioctl(raw, libc::SIOCGIFNAME, &mut ifr).map_err(errno)?;
        if ifreq_ioctl(raw, libc::SIOCGIFMTU, &mut ifr).is_ok() {
            // SAFETY: SIOCGIFMTU filled ifru_mtu.
            self.mtu = unsafe { ifr.ifr_ifru.ifru_mtu }.max(68) as u32;
        }
        ifreq_ioctl(raw, libc::SIOCGIFFLAGS, &mut ifr).map_err(errno)?;
        // SAFETY: SIOCGIFFLAGS filled ifru_flags.
        Ok(c_int::from(unsafe { ifr.ifr_ifru.ifru_flags }))
    }

    /// Whether the frame `send` queued last is still waiting for the kernel (then so may be
    /// others before it: the kernel serves the ring in order).
    fn last_queued_still_pending(&self) -> bool {
        let n = self.rings.tx.frames();
        let last = self.rings.tx_slot((self.tx_head + n - 1) % n);
        self.rings.status(last).load(Ordering::Acquire) & libc::TP_STATUS_SEND_REQUEST != 0
    }

    /// After the kernel refused to send because the link is down: the queued frames are stale
    /// by the time it comes back, so give their slots back (counted as dropped). They form the
    /// run of SEND_REQUEST slots just before `tx_head`; the kernel only walks the TX ring inside
    /// our own `sendto`, so nothing races with this.
    fn discard_queued(&mut self) {
        let n = self.rings.tx.frames();
        for _ in 0..n {
            let prev = (self.tx_head + n - 1) % n;
            let st = self.rings.status(self.rings.tx_slot(prev));
            if st.load(Ordering::Acquire) & libc::TP_STATUS_SEND_REQUEST == 0 {
                break;
            }
            st.store(libc::TP_STATUS_AVAILABLE, Ordering::Release);
            self.tx_head = prev;
            self.stats.tx_dropped += 1;
        }
        self.tx_pending = false;
    }
}

/// Transmit slots `tx_room` looks at, at most: more than one burst needs.
const TX_ROOM_SCAN: u32 = 64;

impl PortBackend for AfPacket {
    fn recv_burst(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, PortError> {
        if self.gone {
            return Err(self.vanished(libc::ENODEV));
        }
        let frames = self.rings.rx.frames();
        let slot_size = self.rings.rx.frame_size as usize;
        let mut n = 0;
        // Skipped slots count against the budget too, so one call never walks more than a ring.
        for _ in 0..frames {
            if n >= max {
                break;
            }
            let off = self.rings.rx_slot(self.rx_head);
            let st = self.rings.status(off).load(Ordering::Acquire);
            if st & libc::TP_STATUS_USER == 0 {
                break;
            }
            let h = self.rings.header(off);
            let (mac, snap) = (h.tp_mac as usize, h.tp_snaplen as usize);
            if self.rings.pkttype(off) == libc::PACKET_OUTGOING {
                // Our own (or the host's) transmission seen by the tap: not an arrival.
            } else if h.tp_len as usize > snap || mac + snap > slot_size || snap < ETH_HLEN {
                self.stats.rx_oversize += 1;
            } else {
                let data = self.rings.bytes(off, mac, snap);
                if st & libc::TP_STATUS_VLAN_VALID != 0 {
                    // The kernel took the 802.1Q tag out of the frame; the switch needs it (PCP).
                    let tpid = if st & libc::TP_STATUS_VLAN_TPID_VALID != 0 && h.tp_vlan_tpid != 0 {
                        h.tp_vlan_tpid
                    } else {
                        libc::ETH_P_8021Q as u16
                    };
                    let s = &mut self.scratch[..snap + 4];
                    s[..12].copy_from_slice(&data[..12]);
                    s[12..14].copy_from_slice(&tpid.to_be_bytes());
                    s[14..16].copy_from_slice(&h.tp_vlan_tci.to_be_bytes());
                    s[16..].copy_from_slice(&data[12..]);
                    f(s);
                } else {
                    f(data);
                }
                n += 1;
            }
            self.rings.status(off).store(libc::TP_STATUS_KERNEL, Ordering::Release);
            self.rx_head = (self.rx_head + 1) % frames;
        }
        self.stats.rx_frames += n as u64;
        Ok(n)
    }

    fn send(&mut self, frame: &[u8]) -> Result<bool, PortError> {
        if self.gone {
            return Err(self.vanished(libc::ENODEV));
        }
        let tagged = frame.len() >= ETH_HLEN && frame[12..14] == [0x81, 0x00];
        if frame.len() < ETH_HLEN || frame.len() > self.max_tx_len(tagged) {
            self.stats.tx_bad_size += 1;
            return Ok(false);
        }
        let off = self.rings.tx_slot(self.tx_head);
        if self.rings.status(off).load(Ordering::Acquire) & TX_BUSY != 0 {
            self.stats.tx_ring_full += 1;
            return Ok(false);
        }
        self.rings.fill_tx(off, frame);
        self.rings
            .status(off)
            .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.tx_head = (self.tx_head + 1) % self.rings.tx.frames();
        self.tx_pending = true;
        self.stats.tx_frames += 1;
        Ok(true)
    }

    fn tx_room(&mut self) -> usize {
        // Free slots from the head on, up to a burst's worth: the kernel frees them in order.
        let n = self.rings.tx.frames();
        (0..TX_ROOM_SCAN.min(n))
            .take_while(|i| {
                let off = self.rings.tx_slot((self.tx_head + i) % n);
                self.rings.status(off).load(Ordering::Acquire) & TX_BUSY == 0
            })
            .count()
    }

    fn flush(&mut self) -> Result<(), PortError> {
        if self.gone {
            return Err(self.vanished(libc::ENODEV));
        }
        if !self.tx_pending {
            return Ok(());
        }
        // At most two system calls: a second only after a stale ENETDOWN (below).
        for retry in [true, false] {
            let errno = match sys_kick(self.fd.as_raw_fd()) {
                Ok(()) => {
                    // The kernel reports success even when it stopped early (send buffer full
                    // after some frames): what is left is still SEND_REQUEST, in ring order.
                    self.tx_pending = self.last_queued_still_pending();
                    self.stats.tx_flush_retries += u64::from(self.tx_pending);
                    return Ok(());
                }
                Err(e) => e.raw_os_error().unwrap_or(0),
            };
            match errno {
                // Send buffer full, or the driver refused a frame (the kernel puts it back as
                // SEND_REQUEST): the frames stay queued and go out on the next flush.
                libc::EAGAIN | libc::EINTR | libc::ENOBUFS => self.stats.tx_flush_retries += 1,
                libc::ENXIO | libc::ENODEV => {
                    self.gone = true;
                    return Err(self.vanished(errno));
                }
                // Either the interface is down now, or it went down earlier and this is the socket
                // error the kernel kept for us (reported once, by the first send after).
                libc::ENETDOWN => match self.interface_flags() {
                    Err(e @ (libc::ENODEV | libc::ENXIO)) => {
                        self.gone = true;
                        return Err(self.vanished(e));
                    }
                    Ok(flags) if retry && flags & libc::IFF_UP != 0 => continue,
                    _ => self.discard_queued(),
                },
                _ => {
                    return Err(PortError::Io {
                        iface: self.name.clone(),
                        context: "sendto (TX ring flush)",
                        source: io::Error::from_raw_os_error(errno),
                    })
                }
            }
            break;
        }
        Ok(())
    }

    fn link_up(&mut self) -> bool {
        if self.gone {
            return false;
        }
        match self.interface_flags() {
            Ok(flags) => flags & libc::IFF_UP != 0 && flags & libc::IFF_RUNNING != 0,
            Err(libc::ENODEV | libc::ENXIO) => {
                self.gone = true;
                false
            }
            Err(_) => false,
        }
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn driver(&self) -> &str {
        "af_packet"
    }

    fn stats(&mut self) -> PortStats {
        // PACKET_STATISTICS resets on read: accumulate.
        if let Ok(s) = getopt_stats(self.fd.as_raw_fd()) {
            self.stats.rx_kernel_drops += u64::from(s.tp_drops);
        }
        self.stats
    }
}

// ---- system calls: each wraps one call, with the reason it is sound ----

fn page_size() -> u32 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u32
    } else {
        4096
    }
}

fn sys_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); on success we take ownership of the new descriptor.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn setopt<T>(fd: RawFd, level: c_int, name: c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` points to a live T of exactly the length passed; the kernel copies it.
    let r = unsafe { libc::setsockopt(fd, level, name, (val as *const T).cast(), size_of::<T>() as socklen_t) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn getopt_stats(fd: RawFd) -> io::Result<libc::tpacket_stats> {
    let mut s = libc::tpacket_stats {
        tp_packets: 0,
        tp_drops: 0,
    };
    let mut len = size_of::<libc::tpacket_stats>() as socklen_t;
    // SAFETY: s and len are live and len is s's size; the kernel writes at most len bytes.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut s as *mut libc::tpacket_stats).cast(),
            &mut len,
        )
    };
    if r == 0 {
        Ok(s)
    } else {
        Err(io::Error::last_os_error())
    }
}

fn sys_mmap(fd: RawFd, len: usize) -> io::Result<*mut u8> {
    // SAFETY: a fresh shared mapping of the socket's rings; the kernel checks len against them.
    // MAP_POPULATE faults every page in now rather than in the polling loop.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(p as *mut u8)
    }
}

fn sys_bind(fd: RawFd, ifindex: c_int) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    sll.sll_ifindex = ifindex;
    // SAFETY: sll is live and its size is passed.
    let r = unsafe {
        libc::bind(
            fd,
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Asks the kernel to send every SEND_REQUEST slot of the TX ring, without waiting.
fn sys_kick(fd: RawFd) -> io::Result<()> {
    // SAFETY: no buffer, no address: sendto on a TX-ring socket only walks the ring.
    let r = unsafe { libc::sendto(fd, ptr::null(), 0, libc::MSG_DONTWAIT, ptr::null(), 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn empty_ifreq() -> libc::ifreq {
    // SAFETY: ifreq is plain data (a name and a union of integers/pointers); all-zero is valid.
    unsafe { std::mem::zeroed() }
}

/// `name` as an `ifr_name` (NUL-terminated, under IFNAMSIZ), or None if it cannot be one.
fn ifreq_name(name: &str) -> Option<[libc::c_char; libc::IFNAMSIZ]> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.bytes().any(|b| b == 0 || b == b'/') {
        return None;
    }
    let mut out = [0 as libc::c_char; libc::IFNAMSIZ];
    for (o, b) in out.iter_mut().zip(name.bytes()) {
        *o = b as libc::c_char;
    }
    Some(out)
}

fn if_nametoindex(name: &[libc::c_char; libc::IFNAMSIZ]) -> io::Result<c_int> {
    // SAFETY: name is NUL-terminated (ifreq_name guarantees a trailing zero).
    let i = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if i == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(i as c_int)
    }
}

fn ifreq_get(fd: RawFd, req: libc::c_ulong, name: [libc::c_char; libc::IFNAMSIZ]) -> io::Result<libc::ifreq> {
    let mut ifr = empty_ifreq();
    ifr.ifr_name = name;
    ifreq_ioctl(fd, req, &mut ifr)?;
    Ok(ifr)
}

fn ifreq_ioctl(fd: RawFd, req: libc::c_ulong, ifr: &mut libc::ifreq) -> io::Result<()> {
    // SAFETY: every SIOCGIF* request we make reads and writes only the ifreq passed.
    let r = unsafe { libc::ioctl(fd, req as _, ifr as *mut libc::ifreq) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn emulated_ports_get_a_receive_ring_for_half_a_second_of_line_rate() {
        let mut cfg = crate::test_config();
        let p = &mut cfg.ports[0];
        p.speed_bps = 500_000_000;
        assert_eq!(p.max_frame_bytes, 1518);
        p.peer = controlplane::PeerKind::Wire;
        assert_eq!(
            super::AfPacketOptions::for_port(p).rx_frames,
            4096,
            "a wire keeps the default"
        );
        p.peer = controlplane::PeerKind::Emulated;
        // 500 Mb/s × 0.5 s in 1518-byte frames: 20 586 slots (of 2048 bytes: 40 MiB).
        assert_eq!(super::AfPacketOptions::for_port(p).rx_frames, 20_586);
        // Never below the default...
        p.speed_bps = 10_000_000;
        assert_eq!(super::AfPacketOptions::for_port(p).rx_frames, 4096);
        // ...nor above 64 MiB of slots (25G would want a million).
        p.speed_bps = 25_000_000_000;
        assert_eq!(super::AfPacketOptions::for_port(p).rx_frames, (64 << 20) / 2048);
        // The slot is the one `open` computes for that MTU.
        assert_eq!(super::slot_size_for_mtu(1500, 4096), 2048);
        assert_eq!(super::slot_size_for_mtu(9000, 4096), 9088);
    }

    use super::*;

    #[test]
    fn geometry_packs_slots_into_page_order_blocks() {
        let g = Geometry::new(4096, 2048, 4096);
        assert_eq!((g.block_size, g.per_block, g.blocks, g.frames()), (4096, 2, 2048, 4096));
        assert_eq!(g.slot(3), 4096 + 2048);
        // Jumbo slots: one 9104-byte slot in 16 KiB would waste 44%; 64 KiB holds 7 (3% waste).
        let g = Geometry::new(1000, 9104, 4096);
        assert_eq!((g.block_size, g.per_block), (65536, 7));
        assert_eq!(g.frames(), 1001, "rounded up to whole blocks");
        assert_eq!(g.slot(8), 65536 + 9104);
    }

    #[test]
    fn offsets_match_the_kernel_abi() {
        assert_eq!(TX_DATA_OFFSET, 32);
        assert_eq!(RX_SLL_OFFSET, 32);
        assert_eq!(AfPacketOptions::default().frame_size, None);
        let need = RX_MAC_OFFSET + 1500 + L2_OVERHEAD;
        assert_eq!(need.next_power_of_two(), 2048);
    }

    #[test]
    fn interface_names_are_checked() {
        assert!(ifreq_name("veth0").is_some());
        assert!(ifreq_name("").is_none());
        assert!(ifreq_name("a-name-too-long").is_some(), "15 bytes fit");
        assert!(ifreq_name("a-name-too-long!").is_none(), "16 do not");
        assert!(ifreq_name("a/b").is_none());
    }

    #[test]
    fn opening_a_missing_interface_is_an_error() {
        let e = AfPacket::open("rsw-no-such-if", AfPacketOptions::default())
            .err()
            .expect("fails");
        assert!(!e.is_vanished());
    }
}
