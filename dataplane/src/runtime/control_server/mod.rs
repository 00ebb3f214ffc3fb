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
//!
//! "A peer" is the local user that owns the connecting socket, which the kernel records and
//! `controlplane::loopback::peer_uid` reads (sock_diag, an exact lookup by the connection's two
//! ends), not its address: the listener is loopback-only, and any local process may connect
//! from any address in 127.0.0.0/8, so an address identifies nobody, and keyed by address one
//! guesser kept every TCP client on the host in back-off, the token holder included. Keyed by
//! user, guessing stays slow (one token compared per back-off window per user) and a client of
//! any other user is never refused unread; one of the guesser's own user may wait up to
//! [`AUTH_BACKOFF_MAX`] (and `rocectl` waits and retries when told to), but such a process could
//! read the token file anyway. A peer whose user the kernel no longer knows (its socket is
//! gone) is keyed by its address, all of loopback as one.
//!
//! The thread's work by concern, one file each (as smoltcp splits `iface/interface/`): this
//! file holds the limits, the server's state and its poll loop; `listener` accepts, reads,
//! serves and flushes connections within the limits; `auth` authenticates TCP peers;
//! `dispatch` answers each request; `running` keeps the running config and changes it;
//! `captures` runs the live captures.

mod auth;
mod captures;
mod dispatch;
mod listener;
mod running;

use self::auth::AuthGuard;
use self::captures::CaptureSession;
use self::listener::Conn;
use crate::runtime::capture::CaptureRing;
use crate::runtime::worker::ControlQueue;
use anyhow::{bail, Context};
use controlplane::change::{Prepared, Running};
use controlplane::protocol;
use controlplane::snapshot::CaptureReport;
use mio::net::{TcpListener, UnixListener};
use mio::{Events, Interest, Poll, Token, Waker};
use serde_json::Value;
use std::collections::HashMap;
use std::io::ErrorKind;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
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
/// After a wrong token, the peer's user waits this long before a token from it is compared
/// again (its attempts meanwhile are refused without looking at the token); each further
/// wrong token doubles the wait, up to [`AUTH_BACKOFF_MAX`]; the right token clears it.
pub const AUTH_BACKOFF_FIRST: Duration = Duration::from_millis(100);
/// The longest a peer waits after wrong tokens.
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
    /// The loopback address and port to listen on.
    pub addr: std::net::SocketAddr,
    /// The token every TCP connection must present first.
    pub token: String,
}

/// Everything about a control server beyond its socket, config and queue.
#[derive(Clone, Default)]
pub struct ControlOptions {
    /// The switch's name (`rocesw run --name`), reported by `hello`.
    pub name: Option<String>,
    /// The TCP listener, if `--control-tcp` asked for one.
    pub tcp: Option<TcpControl>,
}

/// What the control thread holds, for tests and diagnostics (refreshed once per poll round):
/// the figures the limits in PROTOCOL.md bound.
#[derive(Default)]
pub struct ControlStats {
    /// Bytes held in connection buffers: unsent answers plus unread request bytes.
    pub buffered_bytes: std::sync::atomic::AtomicUsize,
    /// Open Unix-socket connections.
    pub unix_connections: std::sync::atomic::AtomicUsize,
    /// Open TCP connections, authenticated or not.
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
    /// Bytes held in connection buffers.
    pub buffered_bytes: usize,
    /// Open Unix-socket connections.
    pub unix_connections: usize,
    /// Open TCP connections.
    pub tcp_connections: usize,
    /// Connections refused or closed by a limit.
    pub refused_connections: u64,
    /// Live captures, running or stopping.
    pub captures: usize,
    /// Bytes those captures' rings hold.
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
                self.accept(false);
            }
            if accept_tcp {
                self.accept(true);
            }
            self.expire_unauthenticated();
            for (key, n) in self.auth_guard.due_reports(Instant::now()) {
                tracing::warn!("control over TCP: {n} more failed authentications from {key}");
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
}

fn json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("control answers serialise")
}
