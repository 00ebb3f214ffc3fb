//! Who is at the other end of a loopback TCP connection: the local user that owns the
//! connecting socket.
//!
//! The switch's TCP control and the daemon's metrics endpoint listen on loopback only, so
//! every peer is a process on this host, and any of them may connect from any address in
//! 127.0.0.0/8 with any port: the peer's address says nothing about who it is. The kernel
//! knows: each socket records the user that created it. Limits keyed by that user (the
//! control server's back-off after wrong tokens, the metrics endpoint's connection slots)
//! then hold one user's guessing or flooding against that user only, where limits keyed by
//! address held it against everyone on the host.
//!
//! The lookup asks the kernel for the one socket whose local end is the peer's address and
//! port and whose remote end is ours, over the `sock_diag` netlink interface (what `ss -e`
//! reads): an exact lookup, no privilege needed, and its cost does not grow with the number of
//! sockets on the host (scanning `/proc/net/tcp` for the line would, and a guesser's closed
//! connections fill that file with thousands of TIME_WAIT lines). It waits at most
//! [`LOOKUP_TIMEOUT`].

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// Who a loopback peer is, for limits kept per peer: the local user that owns the connecting
/// socket, else (the kernel no longer knows the socket: the peer closed it) its address, every
/// loopback address as one (a local process may pick any of them, so none is an identity).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PeerKey {
    /// The uid owning the peer's socket.
    User(u32),
    /// The peer's address, every loopback address as 127.0.0.1.
    Address(IpAddr),
}

impl std::fmt::Display for PeerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeerKey::User(uid) => write!(f, "local user {uid}"),
            PeerKey::Address(ip) => write!(f, "{ip} (user unknown)"),
        }
    }
}

impl PeerKey {
    /// The key of the TCP peer at `peer` of a connection whose own end is `local` (the
    /// accepted stream's `local_addr` and `peer_addr`).
    pub fn of(local: Option<SocketAddr>, peer: SocketAddr) -> PeerKey {
        let uid = local.and_then(|l| peer_uid(l, peer));
        PeerKey::from_parts(peer.ip(), uid)
    }

    /// The key of a peer at `ip` whose socket is owned by `uid`, if known.
    pub fn from_parts(ip: IpAddr, uid: Option<u32>) -> PeerKey {
        match uid {
            Some(uid) => PeerKey::User(uid),
            None => PeerKey::Address(collapse_loopback(ip)),
        }
    }
}

/// Every loopback address (IPv4, or IPv4-mapped IPv6) as 127.0.0.1.
pub fn collapse_loopback(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) if v4.is_loopback() => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => collapse_loopback(IpAddr::V4(v4)),
            None => ip,
        },
        _ => ip,
    }
}

/// The longest a lookup waits for the kernel's answer (it comes in microseconds).
pub const LOOKUP_TIMEOUT: Duration = Duration::from_millis(100);

/// `SOCK_DIAG_BY_FAMILY` (linux/sock_diag.h).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `INET_DIAG_NOCOOKIE`: match any socket with this address and port pair.
const NO_COOKIE: u32 = !0;
/// `TCP_TIME_WAIT`: a closed connection's remains, which record no user.
const TCP_TIME_WAIT: u8 = 6;
/// `TCP_LISTEN`.
const TCP_LISTEN: u8 = 10;

/// `struct inet_diag_sockid` (linux/inet_diag.h): ports and addresses in network order.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct SockId {
    sport: [u8; 2],
    dport: [u8; 2],
    src: [u8; 16],
    dst: [u8; 16],
    interface: u32,
    cookie: [u32; 2],
}

/// `struct inet_diag_req_v2`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct DiagReq {
    family: u8,
    protocol: u8,
    ext: u8,
    pad: u8,
    states: u32,
    id: SockId,
}

/// `struct nlmsghdr` followed by the request, as sent.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Request {
    len: u32,
    kind: u16,
    flags: u16,
    seq: u32,
    pid: u32,
    req: DiagReq,
}

// The kernel's layouts, checked here rather than trusted.
const _: () = assert!(std::mem::size_of::<SockId>() == 48);
const _: () = assert!(std::mem::size_of::<Request>() == 16 + 56);

/// Bytes of `struct nlmsghdr`.
const NLMSG_HDR: usize = 16;
/// Where the fields read from `struct inet_diag_msg` are: its state, its socket id, its uid.
const MSG_STATE: usize = 1;
const MSG_ID: usize = 4;
const MSG_UID: usize = 4 + std::mem::size_of::<SockId>() + 12;
/// `idiag_inode`: the socket's inode, 0 once no file holds it (orphaned).
const MSG_INODE: usize = MSG_UID + 4;
const MSG_LEN: usize = MSG_UID + 8;

fn addr_bytes(ip: IpAddr) -> [u8; 16] {
    let mut out = [0u8; 16];
    match ip {
        IpAddr::V4(v4) => out[..4].copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => out = v6.octets(),
    }
    out
}

/// The user (uid) that owns the local socket connected from `peer` to `local`, where `local`
/// and `peer` are the two ends as the accepting side sees them (`local_addr`, `peer_addr` of
/// the accepted stream). `None` if the kernel has no such socket any more (the peer closed and
/// its socket is gone, or lingers in TIME_WAIT, which records no user), if the two ends are of
/// different families, or if the lookup fails.
pub fn peer_uid(local: SocketAddr, peer: SocketAddr) -> Option<u32> {
    let family = match (local.ip(), peer.ip()) {
        (IpAddr::V4(_), IpAddr::V4(_)) => libc::AF_INET,
        (IpAddr::V6(_), IpAddr::V6(_)) => libc::AF_INET6,
        _ => return None,
    };
    // The peer's socket: its local end is the peer's address, its remote end ours.
    let id = SockId {
        sport: peer.port().to_be_bytes(),
        dport: local.port().to_be_bytes(),
        src: addr_bytes(peer.ip()),
        dst: addr_bytes(local.ip()),
        interface: 0,
        cookie: [NO_COOKIE, NO_COOKIE],
    };
    let request = Request {
        len: std::mem::size_of::<Request>() as u32,
        kind: SOCK_DIAG_BY_FAMILY,
        flags: libc::NLM_F_REQUEST as u16,
        seq: 1,
        pid: 0,
        req: DiagReq {
            family: family as u8,
            protocol: libc::IPPROTO_TCP as u8,
            ext: 0,
            pad: 0,
            states: !0,
            id,
        },
    };
    uid_of_reply(&ask_kernel(&request)?, &id)
}

/// The uid in the kernel's answer `reply` to a lookup of the socket `id`, if the answer is
/// that socket and it has an owner ([`owner_uid`]).
fn uid_of_reply(reply: &[u8], id: &SockId) -> Option<u32> {
    // One message: the socket (SOCK_DIAG_BY_FAMILY), or an error (NLMSG_ERROR: none such).
    let kind = u16::from_ne_bytes(reply.get(4..6)?.try_into().ok()?);
    if kind != SOCK_DIAG_BY_FAMILY {
        return None;
    }
    let msg = reply.get(NLMSG_HDR..NLMSG_HDR + MSG_LEN)?;
    // The kernel found the socket by this pair; check it is the pair asked for.
    let found = &msg[MSG_ID..MSG_ID + 4];
    if found[..2] != id.sport || found[2..4] != id.dport {
        return None;
    }
    let word = |at: usize| Some(u32::from_ne_bytes(msg.get(at..at + 4)?.try_into().ok()?));
    owner_uid(msg[MSG_STATE], word(MSG_UID)?, word(MSG_INODE)?)
}

/// TCP states (include/net/tcp_states.h) of a socket whose side of the connection is closing
/// or closed: FIN_WAIT1, FIN_WAIT2, CLOSE, CLOSE_WAIT, LAST_ACK, CLOSING.
const TCP_CLOSING_STATES: [u8; 6] = [4, 5, 7, 8, 9, 11];

/// Whose a socket the kernel describes is (its TCP `state`, and the `uid` and `inode` it
/// reports), or `None` when the kernel's answer names nobody:
/// * in TIME_WAIT or LISTEN (a closed connection's remains record no user; a listener is not a
///   peer);
/// * orphaned (`inode` 0): its process closed it and the kernel finishes the close alone; the
///   socket has no file, hence no owner, and the kernel reports uid 0 for it, which is not
///   root's;
/// * uid 0 while its connection closes: the same report caught as the file goes, since the
///   inode and the uid are not read at one instant. Root's live sockets are ESTABLISHED when
///   their token is read; a peer whose uid reads 0 only as it closes is unknown, never root.
///
/// About once in 10^4 wrong tokens from `nobody` was logged as root's and counted against
/// root's back-off, through exactly that answer. An unknown peer is keyed by its address
/// ([`PeerKey::Address`], all of loopback as one), so none escapes the back-off either.
pub fn owner_uid(state: u8, uid: u32, inode: u32) -> Option<u32> {
    if state == TCP_TIME_WAIT || state == TCP_LISTEN || inode == 0 {
        return None;
    }
    if uid == 0 && TCP_CLOSING_STATES.contains(&state) {
        return None;
    }
    Some(uid)
}

/// Sends `request` to the kernel's sock_diag and returns its answer, waiting at most
/// [`LOOKUP_TIMEOUT`].
fn ask_kernel(request: &Request) -> Option<Vec<u8>> {
    // SAFETY: socket() takes no pointers; a negative result is checked below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let timeout = libc::timeval {
        tv_sec: 0,
        tv_usec: LOOKUP_TIMEOUT.as_micros() as libc::suseconds_t,
    };
    // SAFETY: `timeout` is a valid timeval of the size passed, read during the call only.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&timeout as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    // SAFETY: all-zero is a valid sockaddr_nl; the family makes it the kernel's address.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: `request` is a plain repr(C) value of the length passed, and `kernel` a valid
    // sockaddr_nl of the size passed; both are read during the call only.
    let sent = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            (request as *const Request).cast(),
            std::mem::size_of::<Request>(),
            0,
            (&kernel as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return None;
    }
    let mut buf = vec![0u8; 8192];
    // SAFETY: `buf` is valid for writes of its length.
    let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < NLMSG_HDR as isize {
        return None;
    }
    buf.truncate(n as usize);
    Some(buf)
}

/// The effective uid of this process (what a socket it opens records).
pub fn own_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    /// The accepted end's view: our own connection is ours, from either loopback family and
    /// from any address of 127.0.0.0/8; a pair with no connection is not found.
    #[test]
    fn a_loopback_peer_is_its_owner() {
        for (listen, from) in [
            ("127.0.0.1:0", None),
            ("127.0.0.1:0", Some("127.0.0.3:0")),
            ("[::1]:0", None),
        ] {
            let Ok(l) = TcpListener::bind(listen) else {
                eprintln!("{listen}: not available here; skipped");
                continue;
            };
            let client = match from {
                None => TcpStream::connect(l.local_addr().unwrap()).unwrap(),
                Some(src) => connect_from(src.parse().unwrap(), l.local_addr().unwrap()),
            };
            let (accepted, peer) = l.accept().unwrap();
            let local = accepted.local_addr().unwrap();
            assert_eq!(peer, client.local_addr().unwrap());
            assert_eq!(peer_uid(local, peer), Some(own_uid()), "{listen} from {peer}");
            drop(client);
            drop(accepted);
            let other_port = SocketAddr::new(peer.ip(), peer.port().wrapping_add(1).max(1));
            assert_eq!(peer_uid(local, other_port), None, "no such connection");
        }
    }

    /// The kernel's answer to a lookup of `id`: one `inet_diag_msg` in state `state`, with
    /// `uid` and `inode`, as sock_diag sends it.
    fn reply(id: &SockId, state: u8, uid: u32, inode: u32) -> Vec<u8> {
        let mut r = vec![0u8; NLMSG_HDR + MSG_LEN];
        r[..4].copy_from_slice(&((NLMSG_HDR + MSG_LEN) as u32).to_ne_bytes());
        r[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        let msg = &mut r[NLMSG_HDR..];
        msg[0] = libc::AF_INET as u8;
        msg[MSG_STATE] = state;
        msg[MSG_ID..MSG_ID + 2].copy_from_slice(&id.sport);
        msg[MSG_ID + 2..MSG_ID + 4].copy_from_slice(&id.dport);
        msg[MSG_UID..MSG_UID + 4].copy_from_slice(&uid.to_ne_bytes());
        msg[MSG_INODE..MSG_INODE + 4].copy_from_slice(&inode.to_ne_bytes());
        r
    }

    /// Issue 46 item 8, with the kernel's answer injected: a peer the kernel reports as uid 0
    /// while its connection closes (orphaned, or in a closing state) is unknown, never root;
    /// a live socket is its owner's, root's included.
    #[test]
    fn a_closing_socket_reported_as_uid_0_is_nobodys() {
        let id = SockId {
            sport: 40000u16.to_be_bytes(),
            dport: 9000u16.to_be_bytes(),
            ..Default::default()
        };
        const ESTABLISHED: u8 = 1;
        const FIN_WAIT1: u8 = 4;
        const LAST_ACK: u8 = 9;
        const CLOSE: u8 = 7;
        // Live sockets: their owner, root too.
        assert_eq!(uid_of_reply(&reply(&id, ESTABLISHED, 65534, 4711), &id), Some(65534));
        assert_eq!(uid_of_reply(&reply(&id, ESTABLISHED, 0, 4711), &id), Some(0));
        // nobody's socket, closed by its process: orphaned, reported as uid 0.
        for state in [FIN_WAIT1, 5, CLOSE, LAST_ACK, 11] {
            assert_eq!(uid_of_reply(&reply(&id, state, 0, 0), &id), None, "state {state}");
            // The inode still read, the uid already 0: unknown too.
            assert_eq!(uid_of_reply(&reply(&id, state, 0, 4711), &id), None, "state {state}");
        }
        // Orphaned in any state, whatever uid it reports: no owner.
        assert_eq!(uid_of_reply(&reply(&id, ESTABLISHED, 0, 0), &id), None);
        assert_eq!(uid_of_reply(&reply(&id, FIN_WAIT1, 65534, 0), &id), None);
        // A live half-closed socket of another user is still theirs.
        assert_eq!(uid_of_reply(&reply(&id, FIN_WAIT1, 65534, 4711), &id), Some(65534));
        // The answer about another pair is no answer.
        let other = SockId {
            sport: 40001u16.to_be_bytes(),
            ..id
        };
        assert_eq!(uid_of_reply(&reply(&other, ESTABLISHED, 65534, 4711), &id), None);
        // Such a peer is keyed, and said, as unknown: never as local user 0.
        let key = PeerKey::from_parts("127.0.0.9".parse().unwrap(), owner_uid(LAST_ACK, 0, 0));
        assert_eq!(key, PeerKey::Address("127.0.0.1".parse().unwrap()));
        assert_eq!(key.to_string(), "127.0.0.1 (user unknown)");
    }

    /// A TCP connection from `src` to `dst`, both IPv4 (`src` port 0: any): bound first, as a
    /// guesser picking its source address in 127.0.0.0/8 would (std cannot bind a client).
    fn connect_from(src: SocketAddr, dst: SocketAddr) -> TcpStream {
        let sockaddr = |a: SocketAddr| {
            let SocketAddr::V4(a) = a else { panic!("IPv4 only") };
            // SAFETY: all-zero is a valid sockaddr_in; the fields are set below.
            let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            sa.sin_family = libc::AF_INET as libc::sa_family_t;
            sa.sin_port = a.port().to_be();
            sa.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
            sa
        };
        let (from, to) = (sockaddr(src), sockaddr(dst));
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: socket() takes no pointers.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0);
        // SAFETY: `fd` was just opened and is owned by nothing else.
        let stream = unsafe { TcpStream::from_raw_fd(fd) };
        // SAFETY: `from` and `to` are valid sockaddr_in of the length passed.
        unsafe {
            assert_eq!(libc::bind(fd, (&from as *const libc::sockaddr_in).cast(), len), 0);
            assert_eq!(libc::connect(fd, (&to as *const libc::sockaddr_in).cast(), len), 0);
        }
        stream
    }

    /// Another user's connection is that user's (needs root and `setpriv`: bash's /dev/tcp,
    /// run as `nobody`, holds a connection open for a second).
    #[test]
    fn another_users_connection_is_theirs() {
        if own_uid() != 0 || std::process::Command::new("setpriv").arg("--version").output().is_err() {
            eprintln!("needs root and setpriv; skipped");
            return;
        }
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let mut child = std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "bash", "-c"])
            .arg(format!("exec 3<>/dev/tcp/127.0.0.1/{port}; sleep 2"))
            .spawn()
            .unwrap();
        let (accepted, peer) = l.accept().unwrap();
        let uid = peer_uid(accepted.local_addr().unwrap(), peer);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(uid, Some(65534));
    }
}
