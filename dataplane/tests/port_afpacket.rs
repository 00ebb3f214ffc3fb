//! The AF_PACKET backend against real veth pairs. Needs root (creates interfaces, opens
//! AF_PACKET sockets). Each test makes its own pair, `rs<tag><pid>a` (the backend's end) and
//! `rs<tag><pid>b` (the peer, driven by a plain AF_PACKET socket), both in the root namespace,
//! and deletes it on drop, even on panic. Only frames of the test EtherType are looked at, so
//! whatever else the host puts on the links does not matter.

use dataplane::io::{AfPacket, AfPacketOptions, PortBackend};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// IEEE local experimental EtherType: nothing else on the link uses it.
const TEST_ETHERTYPE: u16 = 0x88b5;
const DEADLINE: Duration = Duration::from_secs(5);

fn require_root() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("tests/port_afpacket.rs needs root: it creates veth pairs and opens AF_PACKET sockets");
    }
}

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// `ip` for clean-ups that may find nothing to do.
fn ip_quiet(args: &[&str]) {
    let _ = Command::new("ip").args(args).stderr(Stdio::null()).status();
}

/// A veth pair that exists for the test's lifetime.
struct Veth {
    a: String,
    b: String,
}

impl Veth {
    fn new(tag: &str) -> Veth {
        require_root();
        let pid = std::process::id();
        let (a, b) = (format!("rs{tag}{pid}a"), format!("rs{tag}{pid}b"));
        assert!(a.len() <= 15, "interface name {a} too long");
        ip_quiet(&["link", "del", &a]);
        assert!(
            ip(&["link", "add", &a, "type", "veth", "peer", "name", &b]),
            "ip link add {a} type veth failed"
        );
        let v = Veth { a, b };
        for n in [&v.a, &v.b] {
            // No IPv6 link-local address: keeps the host's ND/MLD chatter off the test links.
            ip(&["link", "set", n, "addrgenmode", "none"]);
            assert!(ip(&["link", "set", n, "up"]), "ip link set {n} up failed");
        }
        v
    }

    fn set(&self, ifname: &str, state: &str) {
        assert!(ip(&["link", "set", ifname, state]));
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        ip_quiet(&["link", "del", &self.a]);
    }
}

/// The far end: a plain (ring-less) AF_PACKET socket bound to the peer interface.
struct Peer {
    fd: OwnedFd,
}

impl Peer {
    fn open(ifname: &str) -> Peer {
        let cname = std::ffi::CString::new(ifname).unwrap();
        // SAFETY: plain libc calls on a fresh descriptor we own.
        unsafe {
            let ifindex = libc::if_nametoindex(cname.as_ptr());
            assert!(ifindex != 0, "no interface {ifname}");
            let fd = libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK,
                (libc::ETH_P_ALL as u16).to_be() as i32,
            );
            assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
            let fd = OwnedFd::from_raw_fd(fd);
            let rcvbuf: libc::c_int = 16 << 20;
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&rcvbuf as *const libc::c_int).cast(),
                4,
            );
            let mut sll: libc::sockaddr_ll = std::mem::zeroed();
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
            sll.sll_ifindex = ifindex as i32;
            let r = libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            );
            assert!(r == 0, "bind: {}", std::io::Error::last_os_error());
            Peer { fd }
        }
    }

    fn send(&self, frame: &[u8]) {
        // SAFETY: frame is a live buffer of the given length.
        let r = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(
            r,
            frame.len() as isize,
            "peer send: {}",
            std::io::Error::last_os_error()
        );
    }

    /// Test frames that arrived at the peer (its own transmissions excluded), until `want` or
    /// the deadline.
    fn recv(&self, want: usize, within: Duration) -> Vec<Vec<u8>> {
        let end = Instant::now() + within;
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        while got.len() < want && Instant::now() < end {
            // SAFETY: buf and sll are live, with their sizes passed.
            let (r, pkttype) = unsafe {
                let mut sll: libc::sockaddr_ll = std::mem::zeroed();
                let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
                let r = libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    0,
                    (&mut sll as *mut libc::sockaddr_ll).cast(),
                    &mut len,
                );
                (r, sll.sll_pkttype)
            };
            if r < 0 {
                std::thread::sleep(Duration::from_micros(200));
                continue;
            }
            let f = &buf[..r as usize];
            if pkttype != libc::PACKET_OUTGOING && is_test_frame(f) {
                got.push(f.to_vec());
            }
        }
        got
    }
}

fn is_test_frame(f: &[u8]) -> bool {
    let et = |i: usize| f.len() >= i + 2 && u16::from_be_bytes([f[i], f[i + 1]]) == TEST_ETHERTYPE;
    et(12) || (f.len() >= 18 && f[12..14] == [0x81, 0x00] && et(16))
}

/// A test frame of `len` bytes (untagged) carrying `seq`.
fn frame(len: usize, seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[12..14].copy_from_slice(&TEST_ETHERTYPE.to_be_bytes());
    f[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[18..].iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(31).wrapping_add(seq) as u8;
    }
    f
}

/// A test frame of `len` bytes with an 802.1Q tag (PCP `pcp`, VID `vid`).
fn tagged(len: usize, seq: u32, pcp: u8, vid: u16) -> Vec<u8> {
    let inner = frame(len - 4, seq);
    let tci = (u16::from(pcp) << 13) | vid;
    let mut f = inner[..12].to_vec();
    f.extend_from_slice(&[0x81, 0x00]);
    f.extend_from_slice(&tci.to_be_bytes());
    f.extend_from_slice(&inner[12..]);
    f
}

/// Test frames the backend receives, until `want` or `within`.
fn recv_port(p: &mut AfPacket, want: usize, within: Duration) -> Vec<Vec<u8>> {
    let end = Instant::now() + within;
    let mut got = Vec::new();
    while got.len() < want && Instant::now() < end {
        let n = p
            .recv_burst(32, &mut |f| {
                if is_test_frame(f) {
                    got.push(f.to_vec())
                }
            })
            .expect("recv_burst");
        if n == 0 {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    got
}

fn wait_until(mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + DEADLINE;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

fn open(ifname: &str) -> AfPacket {
    AfPacket::open(ifname, AfPacketOptions::default()).expect("open AF_PACKET port")
}

#[test]
fn received_frames_are_byte_identical_and_keep_their_vlan_tag() {
    let v = Veth::new("rx");
    let mut port = open(&v.a);
    assert_eq!(port.frame_size(), 2048, "MTU 1500 → 2048-byte slots");
    let peer = Peer::open(&v.b);
    let sent = vec![
        frame(60, 1),
        frame(1500, 2),
        frame(1514, 3),
        tagged(64, 4, 5, 100),
        tagged(1518, 5, 3, 4094),
    ];
    for f in &sent {
        peer.send(f);
    }
    let got = recv_port(&mut port, sent.len(), DEADLINE);
    assert_eq!(got, sent, "same frames, same order, same bytes");
    // The PCP the switch classifies on survived the kernel's tag stripping.
    assert_eq!(got[3][14] >> 5, 5);
    let s = port.stats();
    assert!(s.rx_frames >= 5);
    assert_eq!((s.rx_oversize, s.rx_kernel_drops), (0, 0));
}

#[test]
fn sent_frames_arrive_at_the_peer_byte_identical() {
    let v = Veth::new("tx");
    let mut port = open(&v.a);
    let peer = Peer::open(&v.b);
    let sent: Vec<Vec<u8>> = (0..100u32)
        .map(|i| frame([60, 1514, 200, 61][i as usize % 4], i))
        .collect();
    for f in &sent {
        assert!(port.send(f).unwrap(), "ring has room");
    }
    assert!(
        peer.recv(1, Duration::from_millis(100)).is_empty(),
        "nothing leaves before flush"
    );
    port.flush().unwrap();
    let got = peer.recv(sent.len(), DEADLINE);
    assert_eq!(got.len(), sent.len());
    assert!(got == sent, "same frames, same order, same bytes");
    let s = port.stats();
    assert_eq!((s.tx_frames, s.tx_ring_full, s.tx_dropped), (100, 0, 0));
    // Too long for the MTU (untagged 1515) or too short for Ethernet: refused, counted.
    assert!(!port.send(&frame(1515, 0)).unwrap());
    assert!(!port.send(&[0u8; 10]).unwrap());
    assert!(
        port.send(&tagged(1518, 7, 1, 1)).unwrap(),
        "a tagged frame may be 4 bytes longer"
    );
    assert_eq!(port.stats().tx_bad_size, 2);
}

#[test]
fn own_transmissions_are_not_received() {
    let v = Veth::new("ow");
    let mut port = open(&v.a);
    let peer = Peer::open(&v.b);
    for i in 0..50 {
        assert!(port.send(&frame(100, i)).unwrap());
    }
    port.flush().unwrap();
    assert_eq!(peer.recv(50, DEADLINE).len(), 50, "they did leave");
    peer.send(&frame(80, 999));
    let got = recv_port(&mut port, 51, Duration::from_millis(300));
    assert_eq!(got, vec![frame(80, 999)], "only the peer's frame comes back");
}

#[test]
fn a_burst_larger_than_the_tx_ring_reports_ring_full() {
    let v = Veth::new("rf");
    let opts = AfPacketOptions {
        tx_frames: 64,
        ..AfPacketOptions::default()
    };
    let mut port = AfPacket::open(&v.a, opts).unwrap();
    let peer = Peer::open(&v.b);
    let ring = port.ring_frames().1 as usize;
    assert_eq!(ring, 64);
    let accepted = (0..200u32).filter(|&i| port.send(&frame(60, i)).unwrap()).count();
    assert_eq!(accepted, ring);
    assert_eq!(port.stats().tx_ring_full, 200 - ring as u64);
    port.flush().unwrap();
    let got = peer.recv(ring, DEADLINE);
    assert_eq!(got, (0..ring as u32).map(|i| frame(60, i)).collect::<Vec<_>>());
    // Slots come back once the kernel is done with them.
    assert!(wait_until(|| port.send(&frame(60, 1000)).unwrap()));
    port.flush().unwrap();
    assert_eq!(peer.recv(1, DEADLINE), vec![frame(60, 1000)]);
}

#[test]
fn a_whole_ring_of_full_size_frames_goes_out_in_one_flush() {
    let v = Veth::new("wr");
    let mut port = open(&v.a);
    let peer = Peer::open(&v.b);
    let ring = port.ring_frames().1;
    for i in 0..ring {
        assert!(port.send(&frame(1514, i)).unwrap());
    }
    port.flush().unwrap();
    // Retries (if the kernel stopped early) happen on later flushes.
    let mut got = Vec::new();
    let end = Instant::now() + DEADLINE;
    while got.len() < ring as usize && Instant::now() < end {
        port.flush().unwrap();
        got.extend(peer.recv(ring as usize - got.len(), Duration::from_millis(20)));
    }
    assert_eq!(got.len(), ring as usize, "{:?}", port.stats());
    assert!(got.iter().enumerate().all(|(i, f)| *f == frame(1514, i as u32)));
}

#[test]
fn frames_larger_than_a_slot_are_counted_and_skipped() {
    let v = Veth::new("os");
    let opts = AfPacketOptions {
        frame_size: Some(512),
        ..AfPacketOptions::default()
    };
    let mut port = AfPacket::open(&v.a, opts).unwrap();
    let peer = Peer::open(&v.b);
    peer.send(&frame(1000, 1));
    peer.send(&frame(100, 2));
    assert_eq!(recv_port(&mut port, 2, Duration::from_millis(500)), vec![frame(100, 2)]);
    assert_eq!(port.stats().rx_oversize, 1);
}

#[test]
fn a_full_rx_ring_shows_up_as_kernel_drops() {
    let v = Veth::new("kd");
    let opts = AfPacketOptions {
        rx_frames: 32,
        ..AfPacketOptions::default()
    };
    let mut port = AfPacket::open(&v.a, opts).unwrap();
    let peer = Peer::open(&v.b);
    for i in 0..200 {
        peer.send(&frame(60, i));
    }
    let got = recv_port(&mut port, 200, Duration::from_millis(300));
    let s = port.stats();
    assert!(got.len() <= 32 + 1, "at most a ring's worth (got {})", got.len());
    assert!(s.rx_kernel_drops >= 200 - 33, "drops counted: {s:?}");
}

#[test]
fn link_state_follows_the_interface_and_a_down_link_discards() {
    let v = Veth::new("ln");
    let mut port = open(&v.a);
    let peer = Peer::open(&v.b);
    assert!(wait_until(|| port.link_up()));
    v.set(&v.b, "down");
    assert!(wait_until(|| !port.link_up()), "peer down → no carrier");
    v.set(&v.b, "up");
    assert!(wait_until(|| port.link_up()));
    // Administratively down: the kernel refuses to send; the queued frames are discarded, not
    // sent stale later, and the port keeps working once it is back up.
    v.set(&v.a, "down");
    assert!(port.send(&frame(60, 1)).unwrap());
    assert!(port.send(&frame(60, 2)).unwrap());
    port.flush().expect("a down link is not an error");
    assert_eq!(port.stats().tx_dropped, 2);
    assert!(!port.link_up());
    v.set(&v.a, "up");
    assert!(wait_until(|| port.link_up()));
    assert!(port.send(&frame(60, 3)).unwrap());
    port.flush().unwrap();
    assert_eq!(peer.recv(3, Duration::from_millis(500)), vec![frame(60, 3)]);
}

#[test]
fn a_deleted_interface_is_reported_as_vanished_by_flush() {
    let v = Veth::new("v1");
    let mut port = open(&v.a);
    assert!(ip(&["link", "del", &v.a]));
    assert!(
        port.send(&frame(60, 1)).unwrap(),
        "not known yet: send makes no system call"
    );
    let e = port.flush().expect_err("the kernel has no device to send on");
    assert!(e.is_vanished(), "{e}");
    assert!(port.recv_burst(32, &mut |_| {}).unwrap_err().is_vanished());
    assert!(port.send(&frame(60, 2)).unwrap_err().is_vanished());
    assert!(!port.link_up());
}

#[test]
fn a_deleted_interface_is_reported_as_vanished_by_link_up() {
    let v = Veth::new("v2");
    let mut port = open(&v.a);
    assert_eq!(port.recv_burst(32, &mut |_| {}).unwrap(), 0);
    assert!(ip(&["link", "del", &v.b]), "deleting either end removes both");
    assert!(!port.link_up());
    let e = port.recv_burst(32, &mut |_| {}).unwrap_err();
    assert!(e.is_vanished(), "{e}");
    assert!(port.flush().unwrap_err().is_vanished());
    let _ = port.stats();
}

/// Not a check: how many frames per second one thread moves through a veth pair with an
/// AF_PACKET port on each end (send a burst of 32 on one, flush, receive on the other).
/// `cargo test --release -p rocesw-dataplane --test port_afpacket -- --ignored --nocapture`
#[test]
#[ignore]
fn throughput() {
    let v = Veth::new("tp");
    let mut rx = open(&v.a);
    let mut tx = open(&v.b);
    for len in [64usize, 1514] {
        let f = frame(len, 0);
        let (mut sent, mut got) = (0u64, 0u64);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(2) {
            for _ in 0..32 {
                sent += tx.send(&f).unwrap() as u64;
            }
            tx.flush().unwrap();
            got += rx.recv_burst(64, &mut |_| {}).unwrap() as u64;
        }
        got += recv_port(&mut rx, usize::MAX, Duration::from_millis(50)).len() as u64;
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{len:>5} B: sent {:.2} Mpps, received {:.2} Mpps ({:.2} Gb/s); tx {:?}; rx {:?}",
            sent as f64 / secs / 1e6,
            got as f64 / secs / 1e6,
            got as f64 * len as f64 * 8.0 / secs / 1e9,
            tx.stats(),
            rx.stats()
        );
    }
}
