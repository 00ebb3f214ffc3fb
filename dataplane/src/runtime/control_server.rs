//! The control socket of a running switch: `rocectl` talks to it in the JSON-lines protocol of
//! `controlplane::protocol` (`controlplane/PROTOCOL.md`).
//!
//! One thread (not a worker: it never touches the packet path) runs a mio `Poll` loop over the
//! listener and its non-blocking connections. What needs the switch — counters, the FDB, a
//! config change — goes to the workers as a [`ControlRequest`] on the lock-free
//! [`ControlQueue`], and this thread waits for the reply (at most [`REPLY_TIMEOUT`]); requests
//! are therefore served one at a time. The thread keeps the running config
//! (`controlplane::change::Running`: its text, the config it resolves to, its version):
//! `get_config` answers it, `apply` and `patch` are prepared against it (merged, validated and
//! checked to be a change the switch can take live, or refused before they reach the
//! workers), and a change the switch took replaces it.
//!
//! No client can take the thread or the process's memory from the others (PROTOCOL.md,
//! "Limits"): each round of the loop serves every connection at most [`REQUESTS_PER_ROUND`]
//! requests; a connection's requests are read only while fewer than [`MAX_PENDING_OUTPUT`]
//! bytes of its answers wait to be sent, and only when no complete line is buffered, so what
//! one connection holds is bounded; connections are capped per listener, TCP ones must
//! authenticate within [`AUTH_TIMEOUT`], and the owner's Unix socket is accepted first and
//! freed a descriptor when the process has none left.
//!
//! Over TCP, guesses of the token are slowed and cannot crowd out the clients that know it:
//! connections waiting to authenticate have their own few slots ([`MAX_TCP_UNAUTHENTICATED`]),
//! a new one takes the place of the oldest, and a connection's first request is read as soon
//! as it is accepted; a peer whose token was wrong waits ([`AuthGuard`]: from
//! [`AUTH_BACKOFF_FIRST`], doubling, at most [`AUTH_BACKOFF_MAX`]) before its next token is
//! even compared, and its failures are logged once per [`AUTH_LOG_INTERVAL`].

use crate::runtime::capture::{CaptureRing, Dir};
use crate::runtime::worker::{ControlQueue, ControlRequest};
use anyhow::{bail, Context};
use controlplane::change::{Edit, Prepared, Running};
use controlplane::protocol::{
    self, ApplyData, CaptureData, CaptureDirection, CaptureEnd, CaptureStarted, CapturedFrame, ConfigData, FrameDir,
    HelloData, Op, Request, Response, SubscribeData,
};
use controlplane::snapshot::{CaptureReport, Snapshot};
use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use mio::{Events, Interest, Poll, Token, Waker};
use serde_json::Value;
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a request waits for the workers.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(2);
/// Unsent answers a connection may hold before the server stops reading its requests: a
/// client that sends and never reads gets its own socket buffers filled and then waits, instead
/// of growing the switch's memory (one answer may take a connection past it, never two).
pub const MAX_PENDING_OUTPUT: usize = 1 << 20;
/// Requests served per connection per poll round: a client with a thousand requests queued
/// delays another client's by at most this many of its own.
pub const REQUESTS_PER_ROUND: usize = 8;
/// A TCP connection must have authenticated this long after it was accepted, or it is closed:
/// an idle unauthenticated peer otherwise holds a descriptor for ever. A client sends its
/// token as soon as it connects (rocectl does), so this is long only for a loaded machine.
pub const AUTH_TIMEOUT: Duration = Duration::from_secs(2);
/// Open connections per listener. Beyond it a new connection is accepted and closed at once
/// (the peer sees the connection end rather than hang in the backlog). The Unix socket is the
/// owner's (mode 0600) and has its own, larger allowance: TCP peers can never use it up.
pub const MAX_UNIX_CONNECTIONS: usize = 64;
/// Authenticated TCP connections. A client that authenticates while this many are open is
/// told so and closed.
pub const MAX_TCP_CONNECTIONS: usize = 16;
/// TCP connections waiting to authenticate, on top of [`MAX_TCP_CONNECTIONS`] (so they never
/// take an authenticated client's place). A new one beyond it closes the oldest waiting one:
/// a peer that keeps opening connections and never authenticates only ever displaces its
/// own, while a client that sends its token with its connection is authenticated before
/// several later connections could displace it.
pub const MAX_TCP_UNAUTHENTICATED: usize = 8;
/// After a wrong token, the peer's address waits this long before a token from it is compared
/// again (its attempts meanwhile are refused without looking at the token); each further
/// wrong token doubles the wait, up to [`AUTH_BACKOFF_MAX`]; the right token clears it.
pub const AUTH_BACKOFF_FIRST: Duration = Duration::from_millis(100);
pub const AUTH_BACKOFF_MAX: Duration = Duration::from_secs(2);
/// A peer's wrong tokens are forgotten after this long without one.
pub const AUTH_FORGET: Duration = Duration::from_secs(60);
/// At most one log line per peer this often about its failed authentications (with the count
/// of those not logged).
pub const AUTH_LOG_INTERVAL: Duration = Duration::from_secs(10);
/// Peers whose failures are remembered; beyond it the one quiet for longest is forgotten.
const AUTH_MAX_PEERS: usize = 1024;
/// Bytes read from a socket at a time.
const READ_CHUNK: usize = 16 * 1024;
/// How often the control thread empties the capture rings while a capture runs: a ring of a
/// few thousand frames then covers a reader that is late by many such rounds.
pub const CAPTURE_POLL: Duration = Duration::from_millis(1);
/// A capture client that has left a full allowance of output ([`MAX_PENDING_OUTPUT`]) unread
/// for this long is disconnected, which stops its capture and frees its ring: a client that
/// never reads cannot hold a port's capture (and its memory) for ever.
pub const CAPTURE_STALL_TIMEOUT: Duration = Duration::from_secs(10);
/// At most this many frames, and about this many frame bytes, per capture push line.
const CAPTURE_BATCH_FRAMES: usize = 256;
const CAPTURE_BATCH_BYTES: usize = 192 * 1024;
/// A capture with nothing to send still pushes its totals this often (the reader's progress
/// shows drops, and sees that the switch is alive).
const CAPTURE_HEARTBEAT: Duration = Duration::from_secs(1);
/// Default ring size bounds (frames), whatever the snap length.
const CAPTURE_DEFAULT_MIN_FRAMES: usize = 256;
const CAPTURE_DEFAULT_MAX_FRAMES: usize = 8192;

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const TCP_LISTENER: Token = Token(2);

/// The optional TCP listener (`rocesw run --control-tcp`): loopback only, every connection
/// must first present the token.
#[derive(Clone)]
pub struct TcpControl {
    pub addr: std::net::SocketAddr,
    pub token: String,
}

/// Everything about a control server beyond its socket, config and queue.
#[derive(Clone, Default)]
pub struct ControlOptions {
    /// The switch's name (`rocesw run --name`), reported by `hello`.
    pub name: Option<String>,
    pub tcp: Option<TcpControl>,
}

/// Compares in time independent of where the inputs differ, so response timing does not
/// reveal how much of a guessed token was right.
fn same_token(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut diff = (a.len() ^ b.len()) as u8 | u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

/// Failed TCP authentications, per peer address: how long the peer must wait before its next
/// token is compared (back-off), and when its failures were last logged.
///
/// Every peer of the loopback listener is a local process, and any local process may pick its
/// source address among all of 127.0.0.0/8: those count as one peer (127.0.0.1), or a guesser
/// would get a fresh back-off per address. So an active guesser also delays a legitimate TCP
/// client on the same host by at most [`AUTH_BACKOFF_MAX`] at a time; the owner's Unix socket
/// is never affected.
#[derive(Default)]
struct AuthGuard {
    peers: HashMap<IpAddr, PeerFailures>,
}

struct PeerFailures {
    /// Wrong tokens in a row (forgotten after [`AUTH_FORGET`] without one).
    wrong: u32,
    /// No token from this peer is compared before then.
    blocked_until: Instant,
    /// The last failure of any kind.
    last: Instant,
    /// When a failure was last logged, and how many since were not.
    logged: Option<Instant>,
    unlogged: u64,
}

/// What a failure leads to: log it (with the count of those not logged before it) or not.
#[derive(Debug, PartialEq, Eq)]
enum LogFailure {
    Now { unlogged: u64 },
    Suppressed,
}

fn peer_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) if v4.is_loopback() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => peer_key(IpAddr::V4(v4)),
            None => ip,
        },
        _ => ip,
    }
}

/// The wait after the `wrong`-th wrong token in a row.
fn backoff(wrong: u32) -> Duration {
    let doublings = wrong.saturating_sub(1).min(16);
    AUTH_BACKOFF_FIRST.saturating_mul(1 << doublings).min(AUTH_BACKOFF_MAX)
}

impl AuthGuard {
    /// How long `ip` must still wait before a token from it is compared; `None`: compare now.
    fn blocked(&self, ip: IpAddr, now: Instant) -> Option<Duration> {
        let p = self.peers.get(&peer_key(ip))?;
        (p.blocked_until > now).then(|| p.blocked_until - now)
    }

    /// Records a failed authentication of `ip`: a wrong token (`wrong`: it was compared, so
    /// the back-off grows) or an attempt refused without comparing (while blocked, or not
    /// `auth`). Says whether to log it.
    fn failed(&mut self, ip: IpAddr, wrong: bool, now: Instant) -> LogFailure {
        let key = peer_key(ip);
        if !self.peers.contains_key(&key) && self.peers.len() >= AUTH_MAX_PEERS {
            self.peers.retain(|_, p| now.duration_since(p.last) < AUTH_FORGET);
            if self.peers.len() >= AUTH_MAX_PEERS {
                if let Some(quiet) = self.peers.iter().min_by_key(|(_, p)| p.last).map(|(k, _)| *k) {
                    self.peers.remove(&quiet);
                }
            }
        }
        let p = self.peers.entry(key).or_insert(PeerFailures {
            wrong: 0,
            blocked_until: now,
            last: now,
            logged: None,
            unlogged: 0,
        });
        if now.duration_since(p.last) >= AUTH_FORGET {
            p.wrong = 0;
        }
        p.last = now;
        if wrong {
            p.wrong = p.wrong.saturating_add(1);
            p.blocked_until = now + backoff(p.wrong);
        }
        if p.logged.is_some_and(|t| now.duration_since(t) < AUTH_LOG_INTERVAL) {
            p.unlogged += 1;
            return LogFailure::Suppressed;
        }
        p.logged = Some(now);
        LogFailure::Now {
            unlogged: std::mem::take(&mut p.unlogged),
        }
    }

    /// Failures not logged yet whose peer's interval is over, as (peer, how many): logged by
    /// the caller, so a burst that stopped is still reported.
    fn due_reports(&mut self, now: Instant) -> Vec<(IpAddr, u64)> {
        let mut due = Vec::new();
        for (ip, p) in &mut self.peers {
            if p.unlogged > 0 && p.logged.is_some_and(|t| now.duration_since(t) >= AUTH_LOG_INTERVAL) {
                p.logged = Some(now);
                due.push((*ip, std::mem::take(&mut p.unlogged)));
            }
        }
        due
    }

    /// When [`AuthGuard::due_reports`] next has something.
    fn next_report(&self) -> Option<Instant> {
        let pending = self.peers.values().filter(|p| p.unlogged > 0);
        pending.filter_map(|p| p.logged).map(|t| t + AUTH_LOG_INTERVAL).min()
    }

    /// The right token from `ip`: its failures are forgotten.
    fn succeeded(&mut self, ip: IpAddr) {
        self.peers.remove(&peer_key(ip));
    }
}

/// A control connection of either kind.
enum CtlStream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Read for CtlStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            CtlStream::Unix(s) => s.read(buf),
            CtlStream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for CtlStream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            CtlStream::Unix(s) => s.write(buf),
            CtlStream::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            CtlStream::Unix(s) => s.flush(),
            CtlStream::Tcp(s) => s.flush(),
        }
    }
}

impl mio::event::Source for CtlStream {
    fn register(&mut self, r: &mio::Registry, t: Token, i: Interest) -> std::io::Result<()> {
        match self {
            CtlStream::Unix(s) => s.register(r, t, i),
            CtlStream::Tcp(s) => s.register(r, t, i),
        }
    }

    fn reregister(&mut self, r: &mio::Registry, t: Token, i: Interest) -> std::io::Result<()> {
        match self {
            CtlStream::Unix(s) => s.reregister(r, t, i),
            CtlStream::Tcp(s) => s.reregister(r, t, i),
        }
    }

    fn deregister(&mut self, r: &mio::Registry) -> std::io::Result<()> {
        match self {
            CtlStream::Unix(s) => s.deregister(r),
            CtlStream::Tcp(s) => s.deregister(r),
        }
    }
}

/// What the control thread holds, for tests and diagnostics (refreshed once per poll round):
/// the figures the limits in PROTOCOL.md bound.
#[derive(Default)]
pub struct ControlStats {
    /// Bytes held in connection buffers: unsent answers plus unread request bytes.
    pub buffered_bytes: std::sync::atomic::AtomicUsize,
    /// Open connections, Unix and TCP.
    pub unix_connections: std::sync::atomic::AtomicUsize,
    pub tcp_connections: std::sync::atomic::AtomicUsize,
    /// Connections refused or closed by a limit (over the cap, authentication timed out).
    pub refused_connections: std::sync::atomic::AtomicU64,
    /// Live captures, running or stopping (their rings not freed yet).
    pub captures: std::sync::atomic::AtomicUsize,
    /// Bytes those captures' rings hold.
    pub capture_bytes: std::sync::atomic::AtomicUsize,
}

/// A copy of [`ControlStats`] at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ControlFigures {
    pub buffered_bytes: usize,
    pub unix_connections: usize,
    pub tcp_connections: usize,
    pub refused_connections: u64,
    pub captures: usize,
    pub capture_bytes: usize,
}

/// The control server of a running switch. Dropping it (or [`ControlServer::shutdown`]) stops
/// its thread and removes the socket file.
pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
    thread: Option<JoinHandle<()>>,
    stats: Arc<ControlStats>,
}

impl ControlServer {
    /// Listens on `path` (mode 0600) and serves it on a new thread. `config_text` is the
    /// running config's TOML; `queue` is the one given to the workers
    /// (`RunOptions::control`). A stale socket file (nothing listening) is replaced; a live one
    /// (another switch) is an error, and so is any other file at `path`.
    pub fn spawn(path: &Path, config_text: String, queue: Arc<ControlQueue>) -> anyhow::Result<ControlServer> {
        Self::spawn_with(path, config_text, queue, ControlOptions::default())
    }

    /// `spawn` with every option, including the TCP listener. A TCP address that is not
    /// loopback, or an empty token, is refused: the protocol is not encrypted.
    pub fn spawn_with(
        path: &Path,
        config_text: String,
        queue: Arc<ControlQueue>,
        opts: ControlOptions,
    ) -> anyhow::Result<ControlServer> {
        let ControlOptions { name, tcp } = opts;
        if let Some(t) = &tcp {
            if !t.addr.ip().is_loopback() {
                bail!(
                    "control over TCP listens on loopback only (127.0.0.1 or ::1), not {}: the protocol is not encrypted",
                    t.addr
                );
            }
            if let Err(e) = protocol::check_token(t.token.trim()) {
                bail!("{e}");
            }
        }
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                bail!("{} exists and is not a socket: not replacing it", path.display());
            }
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                bail!(
                    "another switch is listening on {} (stop it, or give this one another --control path)",
                    path.display()
                );
            }
            std::fs::remove_file(path).with_context(|| format!("cannot remove stale socket {}", path.display()))?;
        }
        let running =
            Running::load(config_text).map_err(|e| anyhow::anyhow!("the running config does not load: {e}"))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        // Bind under a temporary name, restrict it, then rename it into place: nobody can
        // connect while the socket is still open to everyone.
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".{}.tmp", std::process::id()));
        let tmp = PathBuf::from(tmp);
        let _ = std::fs::remove_file(&tmp);
        let std_listener = std::os::unix::net::UnixListener::bind(&tmp)
            .with_context(|| format!("cannot listen on {}", tmp.display()))?;
        let placed = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
            .and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = placed {
            let _ = std::fs::remove_file(&tmp);
            return Err(e).with_context(|| format!("cannot create the control socket {}", path.display()));
        }
        std_listener.set_nonblocking(true)?;
        let mut listener = UnixListener::from_std(std_listener);
        let poll = Poll::new()?;
        poll.registry().register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let tcp = match tcp {
            None => None,
            Some(t) => {
                let mut l = TcpListener::bind(t.addr)
                    .with_context(|| format!("control over TCP: cannot listen on {}", t.addr))?;
                poll.registry().register(&mut l, TCP_LISTENER, Interest::READABLE)?;
                tracing::info!(addr = %t.addr, "control over TCP listening (token required)");
                Some((l, t.token.trim().to_string()))
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(ControlStats::default());
        let server = Server {
            stats: stats.clone(),
            accept_retry: None,
            auth_guard: AuthGuard::default(),
            poll,
            listener,
            tcp,
            conns: HashMap::new(),
            next_token: 3,
            running,
            queue,
            late: Vec::new(),
            name,
            started: std::time::Instant::now(),
            watermarks: Default::default(),
            capture_totals: HashMap::new(),
            orphans: Vec::new(),
            retiring: Vec::new(),
        };
        let thread_stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name("rocesw-control".into())
            .spawn(move || server.run(&thread_stop))?;
        tracing::info!(socket = %path.display(), "control socket listening");
        Ok(ControlServer {
            path: path.to_path_buf(),
            stop,
            waker,
            thread: Some(thread),
            stats,
        })
    }

    /// Where it listens.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the control thread holds now (see [`ControlStats`]).
    pub fn figures(&self) -> ControlFigures {
        let s = &self.stats;
        ControlFigures {
            buffered_bytes: s.buffered_bytes.load(Ordering::Relaxed),
            unix_connections: s.unix_connections.load(Ordering::Relaxed),
            tcp_connections: s.tcp_connections.load(Ordering::Relaxed),
            refused_connections: s.refused_connections.load(Ordering::Relaxed),
            captures: s.captures.load(Ordering::Relaxed),
            capture_bytes: s.capture_bytes.load(Ordering::Relaxed),
        }
    }

    /// Stops the thread (closing every connection) and removes the socket file.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.store(true, Ordering::Release);
            let _ = self.waker.wake();
            let _ = t.join();
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop_now();
    }
}

struct Conn {
    stream: CtlStream,
    tcp: bool,
    /// A TCP peer's address (what [`AuthGuard`] keys on).
    peer: Option<IpAddr>,
    /// Unix connections are trusted (file permissions); TCP ones once they sent the token.
    authed: bool,
    /// When an unauthenticated connection is closed.
    auth_deadline: Option<Instant>,
    /// Answer what is queued, then close (a refused authentication, a framing violation, the
    /// peer's end of the stream); nothing more is read.
    close_when_flushed: bool,
    /// Bytes read and not yet served: `input[consumed..]` holds complete lines to serve and at
    /// most one partial line. Only read into when no complete line is left, so it stays under
    /// one line's cap plus one read.
    input: Vec<u8>,
    consumed: usize,
    /// The socket may have more to read (mio is edge-triggered: set by a readable event,
    /// cleared only by `WouldBlock`).
    readable: bool,
    output: Vec<u8>,
    writable_registered: bool,
    subscription: Option<Subscription>,
    /// This connection's live capture (one at most).
    capture: Option<CaptureSession>,
    closed: bool,
}

impl Conn {
    /// The next complete line, if one is buffered.
    fn next_line(&mut self) -> Option<Vec<u8>> {
        let rest = &self.input[self.consumed..];
        let nl = rest.iter().position(|&b| b == b'\n')?;
        let line = rest[..nl].to_vec();
        self.consumed += nl + 1;
        if self.consumed == self.input.len() {
            self.input.clear();
            self.consumed = 0;
        }
        Some(line)
    }

    fn has_line(&self) -> bool {
        self.input[self.consumed..].contains(&b'\n')
    }

    /// Whether serving it now could make progress: a request is waiting (or may be, unread on
    /// the socket) and its answers are being taken.
    fn wants_service(&self) -> bool {
        !self.closed
            && !self.close_when_flushed
            && self.output.len() < MAX_PENDING_OUTPUT
            && (self.readable || self.has_line())
    }

    /// Drops buffer capacity a burst left behind, so an idle connection holds little.
    fn shrink(&mut self) {
        if self.output.is_empty() && self.output.capacity() > READ_CHUNK {
            self.output = Vec::new();
        }
        if self.input.is_empty() && self.input.capacity() > 4 * READ_CHUNK {
            self.input = Vec::new();
        }
    }
}

struct Subscription {
    id: u64,
    every: Duration,
    next: Instant,
}

/// A live capture: its ring (the worker that owns the port holds a clone while it captures)
/// and what has been sent of it.
struct CaptureSession {
    /// The `capture` request's id, which every push carries.
    id: u64,
    /// Port index (the worker's) and id (the config's).
    port: usize,
    port_id: u16,
    ring: Arc<CaptureRing>,
    /// Wall-clock nanoseconds of the switch clock's zero: a frame's time is this plus its
    /// `at_ns`.
    wall_start_ns: u64,
    sent: u64,
    count: Option<u64>,
    deadline: Option<Instant>,
    ending: Option<Ending>,
    /// A `capture_stop` to answer once the last push is out.
    stop_reply: Option<u64>,
    /// Since when the client has left a full allowance of output unread.
    stalled_since: Option<Instant>,
    last_push: Instant,
}

/// A capture on its way out: the worker is asked to let go of the ring, then what the ring
/// still holds is sent, then the last push.
struct Ending {
    why: CaptureEnd,
    since: Instant,
    /// The request to let go reached the worker's queue.
    detach_sent: bool,
    /// Drops as of the end of a counted capture (later frames were never going to be sent).
    dropped: Option<u64>,
}

impl CaptureSession {
    fn end(&mut self, why: CaptureEnd) {
        if self.ending.is_none() {
            self.ending = Some(Ending {
                why,
                since: Instant::now(),
                detach_sent: false,
                dropped: (why == CaptureEnd::Count).then(|| self.ring.dropped()),
            });
        }
    }

    fn count_reached(&self) -> bool {
        self.count.is_some_and(|c| self.sent >= c)
    }

    fn dropped(&self) -> u64 {
        self.ending
            .as_ref()
            .and_then(|e| e.dropped)
            .unwrap_or_else(|| self.ring.dropped())
    }

    /// Moves what the ring holds into `out` as push lines, while `out` is under `cap` bytes
    /// (and, for a counted capture, up to the count).
    fn drain_into(&mut self, out: &mut Vec<u8>, cap: usize) {
        while out.len() < cap && self.ring.pending() > 0 && !self.count_reached() {
            let mut frames = Vec::new();
            let mut bytes = 0usize;
            while frames.len() < CAPTURE_BATCH_FRAMES && bytes < CAPTURE_BATCH_BYTES && !self.count_reached() {
                let Some(slot) = self.ring.pop() else { break };
                let dir = match slot.dir {
                    Dir::Rx => FrameDir::Rx,
                    Dir::Tx => FrameDir::Tx,
                };
                frames.push(CapturedFrame::new(
                    self.wall_start_ns + slot.at_ns,
                    dir,
                    slot.orig_len,
                    slot.bytes(),
                ));
                bytes += slot.bytes().len();
                self.ring.recycle(slot);
                self.sent += 1;
            }
            self.push(out, frames, None);
        }
    }

    fn push(&mut self, out: &mut Vec<u8>, frames: Vec<CapturedFrame>, end: Option<CaptureEnd>) {
        let data = CaptureData {
            frames,
            captured: self.sent,
            dropped: self.dropped(),
            end,
        };
        out.extend_from_slice(Response::ok(self.id, json(&data)).to_line().as_bytes());
        self.last_push = Instant::now();
    }

    /// The last push, and the answer to a `capture_stop` that asked for it.
    fn finish(&mut self, out: &mut Vec<u8>) {
        let why = self.ending.as_ref().map_or(CaptureEnd::SwitchStopping, |e| e.why);
        self.push(out, Vec::new(), Some(why));
        if let Some(id) = self.stop_reply.take() {
            out.extend_from_slice(
                Response::ok(id, serde_json::json!({ "stopped": true }))
                    .to_line()
                    .as_bytes(),
            );
        }
    }
}

struct Server {
    poll: Poll,
    listener: UnixListener,
    /// The TCP listener and the token its connections must send first.
    tcp: Option<(TcpListener, String)>,
    conns: HashMap<Token, Conn>,
    next_token: usize,
    /// What the switch runs; its version is what `if_version` compares.
    running: Running,
    queue: Arc<ControlQueue>,
    /// Config changes the switch answered too late: committed if it eventually says yes, so
    /// the running config stays what the switch runs.
    late: Vec<(Receiver<Result<(), String>>, Prepared)>,
    name: Option<String>,
    started: std::time::Instant,
    watermarks: crate::report::watermarks::Watermarks,
    /// What the captures that ended copied and dropped, per port id (the `counters` answer
    /// adds the running ones).
    capture_totals: HashMap<u16, CaptureReport>,
    /// Captures whose connection closed, still waiting for the worker to let go of the ring.
    orphans: Vec<CaptureSession>,
    /// Rings of captures that ended while a worker still held them (it did not answer in
    /// time): freed here once the worker has dropped its reference, never by the worker.
    retiring: Vec<Arc<CaptureRing>>,
    stats: Arc<ControlStats>,
    /// When to try accepting again after running out of descriptors.
    accept_retry: Option<Instant>,
    /// Failed TCP authentications per peer: back-off and log throttle.
    auth_guard: AuthGuard,
}

impl Server {
    fn run(mut self, stop: &AtomicBool) {
        let mut events = Events::with_capacity(256);
        while !stop.load(Ordering::Acquire) {
            // Work left from the last round (a connection's quota ran out with requests
            // waiting): look at the sockets without sleeping, then serve again.
            let timeout = if self.conns.values().any(Conn::wants_service) {
                Some(Duration::ZERO)
            } else {
                let t = self
                    .next_deadline()
                    .map(|t| t.saturating_duration_since(Instant::now()));
                if self.capturing() {
                    Some(t.map_or(CAPTURE_POLL, |t| t.min(CAPTURE_POLL)))
                } else {
                    t
                }
            };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!("control socket: poll failed, control disabled: {e}");
                return;
            }
            self.collect_late();
            let mut accept_unix = self.accept_retry.is_some_and(|t| t <= Instant::now());
            let mut accept_tcp = accept_unix;
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => accept_unix = true,
                    TCP_LISTENER => accept_tcp = true,
                    WAKER => {}
                    t => {
                        if let Some(c) = self.conns.get_mut(&t) {
                            if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                                c.readable = true;
                            }
                        }
                    }
                }
            }
            // The owner's socket first, so it is served even while TCP peers crowd in.
            if accept_unix {
                self.accept();
            }
            if accept_tcp {
                self.accept_tcp();
            }
            self.expire_unauthenticated();
            for (ip, n) in self.auth_guard.due_reports(Instant::now()) {
                tracing::warn!("control over TCP: {n} more failed authentications from {ip}");
            }
            let mut tokens: Vec<Token> = self.conns.keys().copied().collect();
            tokens.sort_unstable();
            for &t in &tokens {
                self.serve(t);
            }
            self.push_subscriptions();
            self.pump_captures();
            for t in tokens {
                self.flush(t);
            }
            self.orphan_closed_captures();
            self.conns.retain(|_, c| !c.closed);
            self.conns.values_mut().for_each(Conn::shrink);
            self.publish();
        }
        self.finish_captures();
    }

    /// When the loop must wake up with nothing to read: a subscription push, an
    /// authentication deadline, a late answer to collect, a retry of a refused accept.
    fn next_deadline(&self) -> Option<Instant> {
        let conns = self.conns.values().flat_map(|c| {
            let push = c.subscription.as_ref().map(|s| s.next);
            let auth = c.auth_deadline.filter(|_| !c.authed);
            push.into_iter().chain(auth)
        });
        let late = (!self.late.is_empty()).then(|| Instant::now() + Duration::from_millis(100));
        conns
            .chain(late)
            .chain(self.accept_retry)
            .chain(self.auth_guard.next_report())
            .min()
    }

    fn publish(&self) {
        let captures = self.sessions().count() + self.retiring.len();
        self.stats.captures.store(captures, Ordering::Relaxed);
        self.stats
            .capture_bytes
            .store(self.capture_bytes_reserved(), Ordering::Relaxed);
        let held: usize = self.conns.values().map(|c| c.input.len() + c.output.len()).sum();
        let tcp = self.conns.values().filter(|c| c.tcp).count();
        self.stats.buffered_bytes.store(held, Ordering::Relaxed);
        self.stats.tcp_connections.store(tcp, Ordering::Relaxed);
        self.stats
            .unix_connections
            .store(self.conns.len() - tcp, Ordering::Relaxed);
    }

    fn count(&self, tcp: bool) -> usize {
        self.conns.values().filter(|c| c.tcp == tcp && !c.closed).count()
    }

    /// Counts a connection turned away by a limit, and says so once in a while (a flood of
    /// them must not flood the log too).
    fn refuse(&mut self, what: &str) {
        let n = self.stats.refused_connections.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_power_of_two() {
            tracing::warn!("control socket: {what} ({n} connections refused so far)");
        }
    }

    fn accept(&mut self) {
        self.accept_retry = None;
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if self.count(false) >= MAX_UNIX_CONNECTIONS {
                        drop(stream);
                        self.refuse("too many connections on the Unix socket");
                        continue;
                    }
                    self.add(CtlStream::Unix(stream), None);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if out_of_descriptors(&e) => {
                    // The owner must get in: make room by closing a TCP connection, the
                    // unauthenticated ones first; with none to close, try again shortly.
                    if !self.evict_tcp() {
                        tracing::warn!("control socket: accept failed: {e}; retrying");
                        self.accept_retry = Some(Instant::now() + Duration::from_millis(100));
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!("control socket: accept failed: {e}");
                    return;
                }
            }
        }
    }

    fn accept_tcp(&mut self) {
        loop {
            let Some((l, _)) = self.tcp.as_ref() else { return };
            match l.accept() {
                Ok((stream, addr)) => {
                    self.make_room_to_authenticate();
                    // Its first request (the token, from a client that sent it with the
                    // connection) is read now, before a later connection could displace it.
                    if let Some(token) = self.add(CtlStream::Tcp(stream), Some(addr.ip())) {
                        self.serve_up_to(token, 1);
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    if out_of_descriptors(&e) {
                        self.accept_retry = Some(Instant::now() + Duration::from_millis(100));
                    }
                    tracing::warn!("control over TCP: accept failed: {e}");
                    return;
                }
            }
        }
    }

    /// Closes the TCP connection that matters least (unauthenticated first, then the oldest)
    /// to free its descriptor. False if there is none.
    fn evict_tcp(&mut self) -> bool {
        let victim = self
            .conns
            .iter()
            .filter(|(_, c)| c.tcp)
            .min_by_key(|(t, c)| (c.authed, t.0))
            .map(|(t, _)| *t);
        let Some(t) = victim else { return false };
        if let Some(mut c) = self.conns.remove(&t) {
            let _ = self.poll.registry().deregister(&mut c.stream);
        }
        self.refuse("out of file descriptors: closed a TCP connection to let the owner in");
        true
    }

    /// Before a new TCP connection is added: if [`MAX_TCP_UNAUTHENTICATED`] connections are
    /// already waiting to authenticate, closes the oldest of them (telling it why, if its
    /// socket takes the line).
    fn make_room_to_authenticate(&mut self) {
        let waiting = |c: &Conn| c.tcp && !c.authed && !c.closed && !c.close_when_flushed;
        let n = self.conns.values().filter(|c| waiting(c)).count();
        if n < MAX_TCP_UNAUTHENTICATED {
            return;
        }
        let oldest = self
            .conns
            .iter()
            .filter(|(_, c)| waiting(c))
            .map(|(t, _)| *t)
            .min_by_key(|t| t.0);
        let Some(c) = oldest.and_then(|t| self.conns.get_mut(&t)) else {
            return;
        };
        let line = Response::err(
            None,
            format!(
                "{} ({MAX_TCP_UNAUTHENTICATED} at most); send `auth` as soon as you connect, and connect again",
                protocol::AUTH_DISPLACED
            ),
        )
        .to_line();
        let _ = c.stream.write(line.as_bytes());
        let _ = self.poll.registry().deregister(&mut c.stream);
        c.closed = true;
        self.refuse("closed the oldest TCP connection waiting to authenticate, to make room");
    }

    /// Closes TCP connections that did not authenticate in time.
    fn expire_unauthenticated(&mut self) {
        let now = Instant::now();
        let mut expired = 0;
        for c in self.conns.values_mut() {
            if !c.authed && !c.closed && c.auth_deadline.is_some_and(|d| d <= now) {
                let _ = self.poll.registry().deregister(&mut c.stream);
                c.closed = true;
                expired += 1;
            }
        }
        for _ in 0..expired {
            self.refuse("closed a TCP connection that did not authenticate in time");
        }
    }

    /// Adds a connection (`peer`: a TCP one's address), and says its token.
    fn add(&mut self, mut stream: CtlStream, peer: Option<IpAddr>) -> Option<Token> {
        let tcp = matches!(stream, CtlStream::Tcp(_));
        let token = Token(self.next_token);
        self.next_token += 1;
        if let Err(e) = self.poll.registry().register(&mut stream, token, Interest::READABLE) {
            tracing::warn!("control socket: cannot register a connection: {e}");
            return None;
        }
        self.conns.insert(
            token,
            Conn {
                stream,
                tcp,
                peer,
                authed: !tcp,
                auth_deadline: tcp.then(|| Instant::now() + AUTH_TIMEOUT),
                close_when_flushed: false,
                input: Vec::new(),
                consumed: 0,
                // Data may have arrived before registration; the first read finds out.
                readable: true,
                output: Vec::new(),
                writable_registered: false,
                subscription: None,
                capture: None,
                closed: false,
            },
        );
        Some(token)
    }

    /// Serves up to [`REQUESTS_PER_ROUND`] of a connection's requests, reading more only when
    /// no complete line is buffered and its answers are being taken.
    fn serve(&mut self, token: Token) {
        self.serve_up_to(token, REQUESTS_PER_ROUND);
    }

    /// [`Server::serve`], at most `most` requests.
    fn serve_up_to(&mut self, token: Token, most: usize) {
        let mut served = 0;
        while served < most {
            let Some(conn) = self.conns.get_mut(&token) else { return };
            if !conn.wants_service() {
                return;
            }
            if let Some(line) = conn.next_line() {
                served += 1;
                let resp = match framed(line) {
                    Ok(text) => self.handle(token, &text),
                    Err(resp) => {
                        if let Some(c) = self.conns.get_mut(&token) {
                            c.close_when_flushed = true;
                        }
                        Some(resp)
                    }
                };
                if let (Some(r), Some(c)) = (resp, self.conns.get_mut(&token)) {
                    c.output.extend_from_slice(r.to_line().as_bytes());
                }
                continue;
            }
            // No complete line: what is buffered is the start of one.
            if conn.consumed > 0 {
                conn.input.drain(..conn.consumed);
                conn.consumed = 0;
            }
            if conn.input.len() > protocol::MAX_LINE {
                conn.close_when_flushed = true;
                conn.input = Vec::new();
                conn.output.extend_from_slice(over_long().to_line().as_bytes());
                return;
            }
            let len = conn.input.len();
            conn.input.resize(len + READ_CHUNK, 0);
            let got = conn.stream.read(&mut conn.input[len..]);
            conn.input.truncate(len + *got.as_ref().unwrap_or(&0));
            match got {
                Ok(0) => {
                    // The peer is done sending: answer what it sent, then close.
                    conn.readable = false;
                    if !conn.has_line() {
                        conn.close_when_flushed = true;
                    }
                }
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => conn.readable = false,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    conn.closed = true;
                    let _ = self.poll.registry().deregister(&mut conn.stream);
                }
            }
        }
    }

    fn flush(&mut self, token: Token) {
        let Some(conn) = self.conns.get_mut(&token) else { return };
        while !conn.output.is_empty() && !conn.closed {
            match conn.stream.write(&conn.output) {
                Ok(0) => conn.closed = true,
                Ok(n) => {
                    conn.output.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => conn.closed = true,
            }
        }
        if conn.output.is_empty() && conn.close_when_flushed {
            conn.closed = true;
        }
        if conn.closed {
            let _ = self.poll.registry().deregister(&mut conn.stream);
            return;
        }
        let want = !conn.output.is_empty();
        if want != conn.writable_registered {
            let interest = if want {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            if self
                .poll
                .registry()
                .reregister(&mut conn.stream, token, interest)
                .is_ok()
            {
                conn.writable_registered = want;
            }
        }
    }

    fn push_subscriptions(&mut self) {
        let now = Instant::now();
        let due: Vec<(Token, u64)> = self
            .conns
            .iter()
            .filter(|(_, c)| !c.closed && !c.close_when_flushed)
            .filter_map(|(t, c)| c.subscription.as_ref().filter(|s| s.next <= now).map(|s| (*t, s.id)))
            .collect();
        // A subscriber still holding a full allowance of unsent pushes has stopped reading:
        // pushing more would only grow the switch's memory.
        let mut due = due;
        due.retain(|(t, _)| {
            let Some(c) = self.conns.get_mut(t) else { return false };
            if c.output.len() < MAX_PENDING_OUTPUT {
                return true;
            }
            tracing::warn!("control socket: closing a subscriber that stopped reading");
            let _ = self.poll.registry().deregister(&mut c.stream);
            c.closed = true;
            false
        });
        if due.is_empty() {
            return;
        }
        // One snapshot serves every subscriber due now.
        let line = self.snapshot().map(|mut s| {
            self.annotate(&mut s);
            json(&s)
        });
        for (t, id) in due {
            let Some(c) = self.conns.get_mut(&t) else { continue };
            let resp = match &line {
                Ok(v) => Response::ok(id, v.clone()),
                Err(e) => Response::err(Some(id), e.clone()),
            };
            c.output.extend_from_slice(resp.to_line().as_bytes());
            if let Some(s) = c.subscription.as_mut() {
                // Keep the cadence; after a stall, resume from now rather than burst.
                s.next += s.every;
                if s.next <= now {
                    s.next = now + s.every;
                }
            }
        }
    }

    fn handle(&mut self, token: Token, line: &str) -> Option<Response> {
        if line.trim().is_empty() {
            return None;
        }
        let req = match Request::parse(line) {
            Ok(r) => r,
            Err(bad) => {
                // An unauthenticated TCP peer gets one answer, then the door.
                if let Some(c) = self.conns.get_mut(&token).filter(|c| !c.authed) {
                    c.close_when_flushed = true;
                }
                return Some(Response::err(bad.id, bad.error));
            }
        };
        let id = req.id;
        let authed = self.conns.get(&token).is_some_and(|c| c.authed);
        if !authed {
            return Some(self.authenticate(token, id, &req.op));
        }
        let result: Result<Value, String> = match req.op {
            Op::Auth { .. } => Ok(serde_json::json!({ "authenticated": true })),
            Op::Hello => Ok(json(&HelloData {
                server: format!("rocesw {}", env!("CARGO_PKG_VERSION")),
                protocol: protocol::VERSION,
                name: self.name.clone(),
                uptime_ms: Some(self.started.elapsed().as_millis() as u64),
            })),
            Op::GetConfig => Ok(json(&ConfigData {
                toml: self.running.text.clone(),
                version: self.running.version,
            })),
            Op::Apply { toml, if_version } => self
                .check_version(if_version)
                .and_then(|()| self.change(Edit::Whole(&toml))),
            Op::Patch { toml, if_version } => self
                .check_version(if_version)
                .and_then(|()| self.change(Edit::Fragment(&toml))),
            Op::Counters => self.snapshot().map(|mut s| {
                self.annotate(&mut s);
                json(&s)
            }),
            Op::Watermarks { kind } => self.snapshot().map(|s| json(&self.watermarks.read(kind, &s))),
            Op::ClearWatermarks { kind } => {
                let (tx, rx) = sync_channel(1);
                self.ask(ControlRequest::SnapshotAndRestartPeaks { reply: tx }, &rx)
                    .map(|s| {
                        self.watermarks.clear(kind, &s);
                        serde_json::json!({ "cleared": kind })
                    })
            }
            Op::Fdb => {
                let (tx, rx) = sync_channel(1);
                self.ask(ControlRequest::Fdb { reply: tx }, &rx).map(|rows| json(&rows))
            }
            Op::Capture {
                port,
                direction,
                snaplen,
                ring,
                count,
                duration_ms,
            } => self.start_capture(
                token,
                id,
                CaptureArgs {
                    port,
                    direction,
                    snaplen,
                    ring,
                    count,
                    duration_ms,
                },
            ),
            Op::CaptureStop => {
                let Some(s) = self.conns.get_mut(&token).and_then(|c| c.capture.as_mut()) else {
                    return Some(Response::err(Some(id), "no capture runs on this connection"));
                };
                s.end(CaptureEnd::Stopped);
                // Answered after the capture's last push (`CaptureSession::finish`).
                s.stop_reply = Some(id);
                return None;
            }
            Op::Subscribe { interval_ms } => {
                let every = Duration::from_millis(interval_ms);
                if let Some(c) = self.conns.get_mut(&token) {
                    c.subscription = Some(Subscription {
                        id,
                        every,
                        next: Instant::now() + every,
                    });
                }
                Ok(json(&SubscribeData { interval_ms }))
            }
        };
        Some(match result {
            Ok(data) => Response::ok(id, data),
            Err(e) => Response::err(Some(id), e),
        })
    }

    /// The first request of a TCP connection: the right token authenticates it; anything
    /// else is answered once and the connection closed. A token from a peer that must still
    /// wait after a wrong one ([`AuthGuard`]) is refused without being compared.
    fn authenticate(&mut self, token: Token, id: u64, op: &Op) -> Response {
        let now = Instant::now();
        let peer = self.conns.get(&token).and_then(|c| c.peer);
        let expected = self.tcp.as_ref().map(|(_, t)| t.as_str()).unwrap_or("");
        let wait = peer.and_then(|ip| self.auth_guard.blocked(ip, now));
        // (the answer, whether it authenticated, whether it is a failed authentication and
        // whether a token was compared and found wrong)
        let (reply, ok, failed, wrong) = match (op, wait) {
            (Op::Auth { .. }, Some(wait)) => (
                Response::err(
                    Some(id),
                    format!(
                        "authentication refused: too many wrong tokens from this address; retry in {} ms",
                        wait.as_millis().max(1)
                    ),
                ),
                false,
                true,
                false,
            ),
            (Op::Auth { token: t }, None) if !expected.is_empty() && same_token(t.trim(), expected) => {
                if let Some(ip) = peer {
                    self.auth_guard.succeeded(ip);
                }
                let authenticated = self.conns.values().filter(|c| c.tcp && c.authed && !c.closed).count();
                if authenticated >= MAX_TCP_CONNECTIONS {
                    self.refuse("too many authenticated TCP connections");
                    let e = format!(
                        "the switch serves at most {MAX_TCP_CONNECTIONS} authenticated TCP connections at once; \
                         close one, or retry later"
                    );
                    (Response::err(Some(id), e), false, false, false)
                } else {
                    let r = Response::ok(id, serde_json::json!({ "authenticated": true }));
                    (r, true, false, false)
                }
            }
            (Op::Auth { .. }, None) => (
                Response::err(Some(id), "authentication failed: wrong token; connection closed"),
                false,
                true,
                true,
            ),
            _ => (
                Response::err(
                    Some(id),
                    "authentication required: the first request on a TCP connection must be `auth` with the right token",
                ),
                false,
                true,
                false,
            ),
        };
        if let Some(c) = self.conns.get_mut(&token) {
            c.authed = ok;
            c.close_when_flushed = !ok;
        }
        if let (true, Some(ip)) = (failed, peer) {
            if let LogFailure::Now { unlogged } = self.auth_guard.failed(ip, wrong, now) {
                let more = if unlogged > 0 {
                    format!(" ({unlogged} more since the last such line)")
                } else {
                    String::new()
                };
                tracing::warn!(
                    "control over TCP: failed authentication from {ip}: {}{more}",
                    reply.error.as_deref().unwrap_or("refused")
                );
            }
        }
        reply
    }

    fn snapshot(&mut self) -> Result<Snapshot, String> {
        let (tx, rx) = sync_channel(1);
        self.ask(ControlRequest::Snapshot { reply: tx }, &rx)
    }

    /// Hands a request to the workers and waits for the answer.
    fn ask<T>(&mut self, req: ControlRequest, rx: &Receiver<T>) -> Result<T, String> {
        if self.queue.push(req).is_err() {
            return Err("the switch is busy (its control queue is full); try again".into());
        }
        match rx.recv_timeout(REPLY_TIMEOUT) {
            Ok(v) => Ok(v),
            Err(RecvTimeoutError::Timeout) => Err(format!(
                "the switch did not answer within {} s",
                REPLY_TIMEOUT.as_secs()
            )),
            Err(RecvTimeoutError::Disconnected) => Err("the switch is stopping".into()),
        }
    }

    /// Refuses a change made against a config version that is no longer the running one. A
    /// change still pending in the switch (answered late) counts as a change: until it is
    /// settled nobody can say which version a new change would apply to.
    fn check_version(&mut self, if_version: Option<u64>) -> Result<(), String> {
        let Some(wanted) = if_version else { return Ok(()) };
        self.collect_late();
        if !self.late.is_empty() {
            return Err(format!(
                "{}: a change is still pending in the switch; read the config again",
                protocol::VERSION_CHANGED
            ));
        }
        if wanted != self.running.version {
            return Err(format!(
                "{} (version {wanted} was read, the running config is version {}); read it again",
                protocol::VERSION_CHANGED,
                self.running.version
            ));
        }
        Ok(())
    }

    /// Prepares a change against the running config (refused here, before it reaches the
    /// workers, if it is not valid or not a change the switch can take live), has the switch
    /// apply it, and on success makes it the running config. A `patch` that changes nothing is
    /// not sent: it is answered `unchanged`, with the running config's warnings.
    fn change(&mut self, edit: Edit<'_>) -> Result<Value, String> {
        let is_patch = matches!(edit, Edit::Fragment(_));
        let mut change = self.running.prepare(edit).map_err(|e| e.to_string())?;
        if is_patch && change.changed.is_empty() {
            return Ok(json(&ApplyData {
                changed: Vec::new(),
                warnings: change.warnings,
                version: self.running.version,
                unchanged: true,
            }));
        }
        let (tx, rx) = sync_channel(1);
        let req = ControlRequest::Apply {
            config: Box::new(change.config.clone()),
            reply: tx,
        };
        if self.queue.push(req).is_err() {
            return Err("the switch is busy (its control queue is full); try again".into());
        }
        match rx.recv_timeout(REPLY_TIMEOUT) {
            Ok(Ok(())) => {
                // Changes answered late were queued before this one, so the switch has settled
                // them by now: take them first, or one would later overwrite this one.
                self.collect_late();
                let changed = std::mem::take(&mut change.changed);
                let warnings = std::mem::take(&mut change.warnings);
                self.running.commit(change);
                Ok(json(&ApplyData {
                    changed,
                    warnings,
                    version: self.running.version,
                    unchanged: false,
                }))
            }
            Ok(Err(reason)) => Err(format!("the switch refused the change: {reason}")),
            Err(RecvTimeoutError::Timeout) => {
                self.late.push((rx, change));
                Err(format!(
                    "the switch did not answer within {} s (the change may still apply; check get_config)",
                    REPLY_TIMEOUT.as_secs()
                ))
            }
            Err(RecvTimeoutError::Disconnected) => Err("the switch is stopping".into()),
        }
    }

    /// Takes the answers of changes that timed out, in the order they were queued (the order
    /// the switch applied them, so the last one applied is the running text).
    fn collect_late(&mut self) {
        let mut i = 0;
        while i < self.late.len() {
            match self.late[i].0.try_recv() {
                Ok(r) => {
                    let (_, change) = self.late.remove(i);
                    if r.is_ok() {
                        tracing::info!("a late config change was applied");
                        self.running.commit(change);
                    }
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => i += 1,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    self.late.remove(i);
                }
            }
        }
    }
}

/// What a `capture` request asks for.
struct CaptureArgs {
    port: u16,
    direction: CaptureDirection,
    snaplen: Option<u32>,
    ring: Option<u32>,
    count: Option<u64>,
    duration_ms: Option<u64>,
}

/// Live captures (`capture`, `capture_stop`): the control thread's side of
/// `runtime::capture`. It allocates each ring, hands it to the worker that owns the port, and
/// each round moves what the ring holds into the connection's output, only while that output
/// is under [`MAX_PENDING_OUTPUT`]: what a slow client has not taken stays in the ring, and
/// what the full ring cannot take the worker counts as dropped. So a capture holds at most its
/// ring and one connection's allowance, whatever the client does.
impl Server {
    fn capturing(&self) -> bool {
        !self.orphans.is_empty() || !self.retiring.is_empty() || self.conns.values().any(|c| c.capture.is_some())
    }

    fn sessions(&self) -> impl Iterator<Item = &CaptureSession> {
        self.conns
            .values()
            .filter_map(|c| c.capture.as_ref())
            .chain(&self.orphans)
    }

    /// What every capture ring not yet freed holds, counted now: the live sessions (a ring is
    /// theirs from the moment it is allocated), the orphans, and the rings waiting for a worker
    /// to let go. The cap on all of them is checked against this, never against the figures
    /// published at the end of the last round, which miss the rings reserved in this one.
    fn capture_bytes_reserved(&self) -> usize {
        let rings = self.sessions().map(|s| &s.ring).chain(&self.retiring);
        rings
            .map(|r| CaptureRing::bytes_reserved(r.capacity(), r.snaplen()))
            .sum()
    }

    fn start_capture(&mut self, token: Token, id: u64, a: CaptureArgs) -> Result<Value, String> {
        if self.conns.get(&token).is_some_and(|c| c.capture.is_some()) {
            return Err("this connection already runs a capture (one per connection: open another)".into());
        }
        let cfg = &self.running.config;
        let Some((index, port)) = cfg.ports.iter().enumerate().find(|(_, p)| p.id == a.port) else {
            let ids: Vec<String> = cfg.ports.iter().map(|p| p.id.to_string()).collect();
            return Err(format!(
                "capture: no port {} (the ports are {})",
                a.port,
                ids.join(", ")
            ));
        };
        if self.sessions().any(|s| s.port == index) {
            return Err(format!(
                "capture: port {} is already being captured (one capture per port); stop that capture first",
                a.port
            ));
        }
        if a.count == Some(0) {
            return Err("capture: count must be at least 1".into());
        }
        if a.duration_ms == Some(0) {
            return Err("capture: duration_ms must be at least 1".into());
        }
        let snaplen = a.snaplen.unwrap_or(port.max_frame_bytes);
        if !(protocol::CAPTURE_MIN_SNAPLEN..=u16::MAX as u32).contains(&snaplen) {
            return Err(format!(
                "capture: snaplen {snaplen} is out of range ({}..={} bytes)",
                protocol::CAPTURE_MIN_SNAPLEN,
                u16::MAX
            ));
        }
        let snap = snaplen as usize;
        let frames = match a.ring {
            Some(n) => n as usize,
            None => (protocol::CAPTURE_RING_BYTES / snap).clamp(CAPTURE_DEFAULT_MIN_FRAMES, CAPTURE_DEFAULT_MAX_FRAMES),
        };
        let bytes = CaptureRing::bytes_reserved(frames, snap);
        if frames == 0
            || frames > protocol::CAPTURE_MAX_RING_FRAMES as usize
            || bytes > protocol::CAPTURE_MAX_RING_BYTES
        {
            return Err(format!(
                "capture: a ring of {frames} frames of {snaplen} B is out of range (1 to {} frames, at most {} MiB)",
                protocol::CAPTURE_MAX_RING_FRAMES,
                protocol::CAPTURE_MAX_RING_BYTES >> 20
            ));
        }
        let held = self.capture_bytes_reserved();
        if held.saturating_add(bytes) > protocol::CAPTURE_MAX_TOTAL_BYTES {
            return Err(format!(
                "capture: the captures running hold {} MiB; this one's ring ({} MiB) would pass the {} MiB all captures may use \
                 (a smaller ring or snaplen, or stop another capture)",
                held >> 20,
                bytes.div_ceil(1 << 20),
                protocol::CAPTURE_MAX_TOTAL_BYTES >> 20
            ));
        }
        // Every byte of the ring is allocated here, on the control thread.
        let ring = Arc::new(CaptureRing::new(frames, snap));
        let (tx, rx) = sync_channel(1);
        let req = ControlRequest::Capture {
            port: index,
            rx: a.direction.rx().then(|| ring.clone()),
            tx: a.direction.tx().then(|| ring.clone()),
            reply: tx,
        };
        let mut session = CaptureSession {
            id,
            port: index,
            port_id: a.port,
            ring,
            wall_start_ns: 0,
            sent: 0,
            count: a.count,
            deadline: a.duration_ms.map(|ms| Instant::now() + Duration::from_millis(ms)),
            ending: None,
            stop_reply: None,
            stalled_since: None,
            last_push: Instant::now(),
        };
        match self.ask(req, &rx) {
            Ok(Ok(wall_start_ns)) => session.wall_start_ns = wall_start_ns,
            Ok(Err(reason)) => return Err(format!("capture: the switch refused: {reason}")),
            Err(e) => {
                // The worker may still take the ring later: have it let go, and free the ring
                // only after.
                session.end(CaptureEnd::Stopped);
                self.orphans.push(session);
                return Err(format!("capture: {e}"));
            }
        }
        let started = CaptureStarted {
            port: a.port,
            direction: a.direction,
            snaplen,
            ring: frames as u32,
        };
        tracing::info!(port = a.port, direction = %a.direction, snaplen, ring = frames, "capture started");
        if let Some(c) = self.conns.get_mut(&token) {
            c.capture = Some(session);
        }
        Ok(json(&started))
    }

    /// One round of every capture: end those whose count or time is up, ask the worker to let
    /// go of ending ones, send what the rings hold, and finish those the worker let go of.
    fn pump_captures(&mut self) {
        let now = Instant::now();
        let queue = self.queue.clone();
        let mut finished = Vec::new();
        for c in self.conns.values_mut().filter(|c| !c.closed && !c.close_when_flushed) {
            let Some(s) = c.capture.as_mut() else { continue };
            if s.ending.is_none() {
                if s.count_reached() {
                    s.end(CaptureEnd::Count);
                } else if s.deadline.is_some_and(|d| now >= d) {
                    s.end(CaptureEnd::Duration);
                }
            }
            let released = detach(&queue, s, now);
            s.drain_into(&mut c.output, MAX_PENDING_OUTPUT);
            if s.ending.is_none() && s.count_reached() {
                s.end(CaptureEnd::Count);
            }
            if released && (s.ring.pending() == 0 || s.count_reached()) {
                s.finish(&mut c.output);
                finished.push(c.capture.take().expect("a capture"));
                continue;
            }
            if c.output.len() >= MAX_PENDING_OUTPUT {
                let since = *s.stalled_since.get_or_insert(now);
                if now.duration_since(since) >= CAPTURE_STALL_TIMEOUT {
                    tracing::warn!(
                        port = s.port_id,
                        "capture: the client read nothing for {} s; closing its connection",
                        CAPTURE_STALL_TIMEOUT.as_secs()
                    );
                    let _ = self.poll.registry().deregister(&mut c.stream);
                    c.closed = true;
                }
            } else {
                s.stalled_since = None;
                if now.duration_since(s.last_push) >= CAPTURE_HEARTBEAT {
                    s.push(&mut c.output, Vec::new(), None);
                }
            }
        }
        // Captures nobody reads any more: what their rings hold is discarded.
        let mut i = 0;
        while i < self.orphans.len() {
            let s = &mut self.orphans[i];
            let released = detach(&queue, s, now);
            while let Some(slot) = s.ring.pop() {
                s.ring.recycle(slot);
            }
            if released {
                finished.push(self.orphans.swap_remove(i));
            } else {
                i += 1;
            }
        }
        for s in finished {
            self.retire(s);
        }
        self.retiring.retain(|r| Arc::strong_count(r) > 1);
    }

    /// Counts what an ended capture did, and frees its ring (here, on the control thread) unless
    /// a worker that never answered still holds it.
    fn retire(&mut self, s: CaptureSession) {
        let t = self.capture_totals.entry(s.port_id).or_default();
        t.frames += s.ring.captured();
        t.dropped += s.ring.dropped();
        tracing::info!(
            port = s.port_id,
            frames = s.ring.captured(),
            dropped = s.ring.dropped(),
            "capture ended"
        );
        if Arc::strong_count(&s.ring) > 1 {
            self.retiring.push(s.ring);
        }
    }

    /// A connection that closed stops its capture: the ring is freed once the worker let go.
    fn orphan_closed_captures(&mut self) {
        for c in self.conns.values_mut().filter(|c| c.closed) {
            if let Some(mut s) = c.capture.take() {
                s.end(CaptureEnd::Stopped);
                self.orphans.push(s);
            }
        }
    }

    /// The switch is stopping (its workers have finished, or are about to): every capture gets
    /// what its ring holds and its last push, and the connections get a moment to take them.
    fn finish_captures(&mut self) {
        let mut any = false;
        for c in self.conns.values_mut().filter(|c| !c.closed) {
            let Some(mut s) = c.capture.take() else { continue };
            s.end(CaptureEnd::SwitchStopping);
            s.drain_into(&mut c.output, usize::MAX);
            s.finish(&mut c.output);
            any = true;
        }
        if !any {
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        let tokens: Vec<Token> = self.conns.keys().copied().collect();
        while Instant::now() < deadline {
            for &t in &tokens {
                self.flush(t);
            }
            if self.conns.values().all(|c| c.closed || c.output.is_empty()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Adds what the live captures of each port copied and dropped to a `counters` snapshot.
    fn annotate(&self, snap: &mut Snapshot) {
        for p in &mut snap.ports {
            let mut r = self.capture_totals.get(&p.id).copied();
            for s in self.sessions().filter(|s| s.port_id == p.id) {
                let t = r.get_or_insert_with(CaptureReport::default);
                t.frames += s.ring.captured();
                t.dropped += s.ring.dropped();
            }
            p.capture = r;
        }
    }
}

/// Asks the worker to let go of an ending capture's ring (once; retried while its queue is
/// full). True once it has (the control thread's reference is the last), or once it has not
/// answered for [`REPLY_TIMEOUT`] (the ring then waits in `retiring`).
fn detach(queue: &ControlQueue, s: &mut CaptureSession, now: Instant) -> bool {
    let Some(e) = s.ending.as_mut() else { return false };
    if !e.detach_sent {
        let (tx, _) = sync_channel(1);
        e.detach_sent = queue
            .push(ControlRequest::Capture {
                port: s.port,
                rx: None,
                tx: None,
                reply: tx,
            })
            .is_ok();
    }
    (e.detach_sent && Arc::strong_count(&s.ring) == 1) || now.duration_since(e.since) >= REPLY_TIMEOUT
}

fn json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("control answers serialise")
}

fn over_long() -> Response {
    Response::err(
        None,
        format!(
            "request line longer than {} KiB: closing the connection",
            protocol::MAX_LINE / 1024
        ),
    )
}

/// A complete line as text, or the answer to a line that breaks the framing (over the cap,
/// not UTF-8), after which the connection is closed.
fn framed(line: Vec<u8>) -> Result<String, Response> {
    if line.len() > protocol::MAX_LINE {
        return Err(over_long());
    }
    String::from_utf8(line)
        .map_err(|_| Response::err(None, "malformed JSON: the line is not UTF-8; closing the connection"))
}

fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_back_off_doubles_to_its_cap() {
        let ms: Vec<u128> = (1..=8).map(|n| backoff(n).as_millis()).collect();
        assert_eq!(ms, [100, 200, 400, 800, 1600, 2000, 2000, 2000]);
        assert_eq!(backoff(u32::MAX), AUTH_BACKOFF_MAX);
    }

    #[test]
    fn a_wrong_token_blocks_its_peer_until_the_back_off_ends() {
        let mut g = AuthGuard::default();
        let t0 = Instant::now();
        let a = ip("10.0.0.1");
        assert_eq!(g.blocked(a, t0), None);
        g.failed(a, true, t0);
        assert_eq!(g.blocked(a, t0), Some(AUTH_BACKOFF_FIRST));
        assert_eq!(g.blocked(ip("10.0.0.2"), t0), None, "another peer is not blocked");
        // Attempts refused without comparing do not lengthen it.
        g.failed(a, false, t0 + Duration::from_millis(50));
        assert_eq!(
            g.blocked(a, t0 + Duration::from_millis(50)),
            Some(Duration::from_millis(50))
        );
        assert_eq!(g.blocked(a, t0 + AUTH_BACKOFF_FIRST), None);
        // The next wrong token doubles it; the right one clears it.
        let t1 = t0 + AUTH_BACKOFF_FIRST;
        g.failed(a, true, t1);
        assert_eq!(g.blocked(a, t1), Some(2 * AUTH_BACKOFF_FIRST));
        g.succeeded(a);
        assert_eq!(g.blocked(a, t1), None);
        g.failed(a, true, t1);
        assert_eq!(
            g.blocked(a, t1),
            Some(AUTH_BACKOFF_FIRST),
            "starts over after a success"
        );
        // Forgotten after a quiet spell.
        for k in 0..10 {
            g.failed(a, true, t1 + Duration::from_secs(k * 3));
        }
        let later = t1 + Duration::from_secs(27) + AUTH_FORGET;
        g.failed(a, true, later);
        assert_eq!(g.blocked(a, later), Some(AUTH_BACKOFF_FIRST));
    }

    #[test]
    fn every_loopback_address_is_one_peer() {
        let mut g = AuthGuard::default();
        let t0 = Instant::now();
        g.failed(ip("127.0.0.1"), true, t0);
        for other in ["127.0.0.2", "127.255.3.4", "::ffff:127.0.0.9"] {
            assert!(g.blocked(ip(other), t0).is_some(), "{other}");
        }
        assert!(g.blocked(ip("::1"), t0).is_none());
    }

    #[test]
    fn failures_are_logged_once_per_interval_with_a_count() {
        let mut g = AuthGuard::default();
        let t0 = Instant::now();
        let a = ip("127.0.0.1");
        let mut logged = Vec::new();
        // 5000 failures a second for 25 s.
        for k in 0..125_000u64 {
            let now = t0 + Duration::from_micros(200 * k);
            if let LogFailure::Now { unlogged } = g.failed(a, k % 7 == 0, now) {
                logged.push((now.duration_since(t0).as_secs(), unlogged));
            }
        }
        assert_eq!(logged.len(), 3, "{logged:?}");
        assert_eq!(logged[0], (0, 0));
        assert_eq!(logged[1].0, 10);
        assert_eq!(logged[1].1, 50_000 - 1);
        // What was not logged when the burst stopped is reported once the interval is over.
        let end = t0 + Duration::from_secs(25);
        assert_eq!(g.due_reports(end), []);
        let due_at = g.next_report().unwrap();
        assert_eq!(due_at, t0 + Duration::from_secs(30));
        assert_eq!(g.due_reports(due_at), [(a, 25_000 - 1)]);
        assert_eq!(g.next_report(), None);
    }

    #[test]
    fn the_peers_remembered_are_bounded() {
        let mut g = AuthGuard::default();
        let t0 = Instant::now();
        for k in 0..5000u32 {
            let a = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + k));
            g.failed(a, true, t0 + Duration::from_millis(u64::from(k)));
            assert!(g.peers.len() <= AUTH_MAX_PEERS);
        }
        // The most recent ones are kept.
        assert!(g
            .blocked(
                IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + 4999)),
                t0 + Duration::from_secs(5)
            )
            .is_some());
    }
}
