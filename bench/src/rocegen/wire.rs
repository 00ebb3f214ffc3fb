//! The raw link: a non-blocking AF_PACKET SOCK_RAW socket bound to one interface, network
//! namespace entry, the monotonic clock and thread timer slack.

use anyhow::{bail, Context, Result};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// CLOCK_MONOTONIC in nanoseconds: one clock for every namespace of a machine.
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps `ns` nanoseconds (short sleeps: the caller lowered its timer slack).
pub fn sleep_ns(ns: u64) {
    std::thread::sleep(std::time::Duration::from_nanos(ns));
}

/// Lowers this thread's timer slack to 1 µs so short sleeps are short (default 50 µs).
pub fn set_timer_slack_1us() {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long; no pointers.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong, 0, 0, 0) };
}

/// Moves the calling thread into the network namespace `/var/run/netns/<name>` (as made by
/// `ip netns add`). Only this thread moves; open sockets after this.
pub fn enter_netns(name: &str) -> Result<()> {
    let path = if name.starts_with('/') {
        name.to_string()
    } else {
        format!("/var/run/netns/{name}")
    };
    let f = std::fs::File::open(&path).with_context(|| format!("opening network namespace {path}"))?;
    // SAFETY: a valid fd to a namespace file.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if r != 0 {
        return Err(io::Error::last_os_error()).with_context(|| format!("setns({path})"));
    }
    Ok(())
}

/// Whether this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: no arguments.
    unsafe { libc::geteuid() == 0 }
}

/// A non-blocking AF_PACKET socket bound to one interface, receiving every EtherType but not
/// the frames it (or any socket on this host) sends.
pub struct RawSocket {
    fd: OwnedFd,
    ifindex: i32,
    iface: String,
}

/// The socket receive buffer asked for (see `RawSocket::open`).
const RCVBUF_BYTES: i32 = 128 << 20;

const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

impl RawSocket {
    /// Opens and binds the socket on `iface` in the calling thread's network namespace.
    pub fn open(iface: &str) -> Result<RawSocket> {
        let name = CString::new(iface).context("interface name")?;
        // SAFETY: plain syscall.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                i32::from(ETH_P_ALL_BE),
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EPERM) {
                bail!("AF_PACKET socket: {e} (rocegen needs root or CAP_NET_RAW)");
            }
            return Err(e).context("AF_PACKET socket");
        }
        // SAFETY: fd is a fresh, owned descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: a NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) } as i32;
        if ifindex == 0 {
            bail!("no interface {iface:?} in this network namespace");
        }
        let s = RawSocket {
            fd,
            ifindex,
            iface: iface.to_string(),
        };
        // Frames sent by sockets on this host are not looped back to us (Linux ≥ 4.20; older
        // kernels are covered by the PACKET_OUTGOING check in `recv`).
        s.setsockopt(libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1).ok();
        // A deep receive queue, as a NIC's receive ring stands in for its host: the loop sleeps
        // when idle, and on a loaded machine the thread may not run for a few hundred ms. At
        // 500 Mb/s of 1 KiB frames (about 2.3 KiB of socket memory each) 128 MiB holds about
        // 0.9 s; the kernel takes the memory only as frames wait. Frames it still drops are
        // counted (`socket_drops`), so a report can tell them from the network's.
        if s.setsockopt(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, RCVBUF_BYTES)
            .is_err()
        {
            s.setsockopt(libc::SOL_SOCKET, libc::SO_RCVBUF, RCVBUF_BYTES).ok();
        }
        // SAFETY: sockaddr_ll is plain old data; zero is a valid start.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL_BE;
        sll.sll_ifindex = ifindex;
        // SAFETY: a valid sockaddr_ll of the stated size.
        let r = unsafe {
            libc::bind(
                s.fd.as_raw_fd(),
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error()).with_context(|| format!("bind AF_PACKET to {iface}"));
        }
        // Drop whatever arrived from other interfaces between socket() and bind().
        let mut buf = [0u8; 2048];
        while let Ok(Some(_)) = s.recv(&mut buf) {}
        Ok(s)
    }

    fn setsockopt(&self, level: i32, name: i32, value: i32) -> io::Result<()> {
        // SAFETY: a valid int option of the stated size.
        let r = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                level,
                name,
                &value as *const i32 as *const libc::c_void,
                std::mem::size_of::<i32>() as libc::socklen_t,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Frames the kernel dropped since the last call because this socket's receive queue was
    /// full (`PACKET_STATISTICS`, which resets on read): the host did not read in time.
    pub fn take_drops(&self) -> io::Result<u64> {
        // SAFETY: tpacket_stats is plain old data.
        let mut st: libc::tpacket_stats = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: a valid tpacket_stats of the stated size.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats).cast(),
                &mut len,
            )
        };
        if r == 0 {
            Ok(u64::from(st.tp_drops))
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// The interface the socket is bound to.
    pub fn iface(&self) -> &str {
        &self.iface
    }

    /// Its kernel interface index.
    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }

    /// The interface's MAC address (SIOCGIFHWADDR).
    pub fn mac(&self) -> Result<[u8; 6]> {
        // SAFETY: ifreq is plain old data.
        let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
        for (d, s) in ifr.ifr_name.iter_mut().zip(self.iface.bytes()) {
            *d = s as libc::c_char;
        }
        // SAFETY: a valid ifreq for SIOCGIFHWADDR.
        let r = unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::SIOCGIFHWADDR, &mut ifr) };
        if r != 0 {
            return Err(io::Error::last_os_error()).with_context(|| format!("SIOCGIFHWADDR {}", self.iface));
        }
        // SAFETY: SIOCGIFHWADDR filled the hwaddr member of the union.
        let sa = unsafe { ifr.ifr_ifru.ifru_hwaddr };
        let mut m = [0u8; 6];
        for (d, s) in m.iter_mut().zip(sa.sa_data.iter()) {
            *d = *s as u8;
        }
        Ok(m)
    }

    /// Sends one frame. `Ok(false)`: the kernel had no room (try again later).
    #[inline]
    pub fn send(&self, frame: &[u8]) -> io::Result<bool> {
        // SAFETY: a valid buffer of the stated length.
        let r = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                frame.as_ptr() as *const libc::c_void,
                frame.len(),
                0,
            )
        };
        if r >= 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => Ok(false),
            _ => Err(e),
        }
    }

    /// Receives one incoming frame into `buf`: `Ok(None)` when nothing is waiting. Frames
    /// this host sent are skipped.
    #[inline]
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            // SAFETY: sockaddr_ll is plain old data.
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut sl = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: valid buffers of the stated sizes.
            let r = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    libc::MSG_TRUNC,
                    &mut sll as *mut libc::sockaddr_ll as *mut libc::sockaddr,
                    &mut sl,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                return match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
                    _ => Err(e),
                };
            }
            if sll.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            // MSG_TRUNC: r is the real length; a frame longer than buf is cut to buf.
            return Ok(Some((r as usize).min(buf.len())));
        }
    }
}

/// A gratuitous ARP announcing `mac` at `ip` (an ARP request for its own address, to
/// broadcast), as a host sends when its link comes up and as an RDMA host's address
/// resolution does before its first connection: the switch learns where the host is before
/// traffic is addressed to it. Without it the first frames to a receiver that has not sent
/// anything yet are flooded to every port, each copy charged to the sender's priority group,
/// which on a loaded machine could last long enough to overflow a lossless PG's headroom.
pub fn gratuitous_arp(mac: [u8; 6], ip: [u8; 4]) -> Vec<u8> {
    use etherparse::{ArpHardwareId, ArpOperation, ArpPacket, EtherType, PacketBuilder};
    let arp = ArpPacket::new(
        ArpHardwareId::ETHERNET,
        EtherType::IPV4,
        ArpOperation::REQUEST,
        &mac,
        &ip,
        &[0; 6],
        &ip,
    )
    .expect("Ethernet and IPv4 addresses have matching lengths");
    let mut frame = Vec::with_capacity(60);
    PacketBuilder::ethernet2(mac, [0xff; 6])
        .arp(arp)
        .write(&mut frame)
        .expect("writing to a Vec cannot fail");
    // Padded to the Ethernet minimum, as a NIC would.
    frame.resize(frame.len().max(60), 0);
    frame
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The announcement is an ARP request for the host's own address from its own MAC, to
    /// broadcast, at least 60 bytes: what the switch learns the host's port from.
    #[test]
    fn gratuitous_arp_announces_the_host() {
        let mac = [2, 0, 0, 0, 0, 7];
        let ip = [10, 0, 0, 7];
        let f = gratuitous_arp(mac, ip);
        assert_eq!(f.len(), 60);
        let p = etherparse::SlicedPacket::from_ethernet(&f).unwrap();
        let Some(etherparse::LinkSlice::Ethernet2(eth)) = p.link else {
            panic!("not Ethernet II")
        };
        assert_eq!((eth.source(), eth.destination()), (mac, [0xff; 6]));
        let Some(etherparse::NetSlice::Arp(arp)) = p.net else {
            panic!("not ARP: {:?}", p.net)
        };
        assert_eq!(arp.operation(), etherparse::ArpOperation::REQUEST);
        assert_eq!((arp.sender_hw_addr(), arp.sender_protocol_addr()), (&mac[..], &ip[..]));
        assert_eq!(arp.target_protocol_addr(), &ip[..]);
    }
}
