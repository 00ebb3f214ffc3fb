//! Listener and limits: the control connections (Unix and TCP), how they are accepted, read,
//! served a few requests per round and flushed, and the caps that keep one client from taking
//! the thread or the process's memory from the others (PROTOCOL.md, "Limits").

use super::captures::CaptureSession;
use super::dispatch::Subscription;
use super::{
    Server, AUTH_TIMEOUT, MAX_PENDING_OUTPUT, MAX_TCP_UNAUTHENTICATED, MAX_UNIX_CONNECTIONS, READ_CHUNK,
    REQUESTS_PER_ROUND,
};
use controlplane::protocol::{self, Response};
use mio::net::{TcpStream, UnixStream};
use mio::{Interest, Token};
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// A control connection of either kind.
pub(super) enum CtlStream {
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

pub(super) struct Conn {
    pub(super) stream: CtlStream,
    pub(super) tcp: bool,
    /// A TCP peer's address and port (with the connection's own end, what finds the peer's
    /// user, which [`AuthGuard`] keys on).
    pub(super) peer: Option<SocketAddr>,
    /// Unix connections are trusted (file permissions); TCP ones once they sent the token.
    pub(super) authed: bool,
    /// When an unauthenticated connection is closed.
    pub(super) auth_deadline: Option<Instant>,
    /// Answer what is queued, then close (a refused authentication, a framing violation, the
    /// peer's end of the stream); nothing more is read.
    pub(super) close_when_flushed: bool,
    /// Bytes read and not yet served: `input[consumed..]` holds complete lines to serve and at
    /// most one partial line. Only read into when no complete line is left, so it stays under
    /// one line's cap plus one read.
    pub(super) input: Vec<u8>,
    pub(super) consumed: usize,
    /// The socket may have more to read (mio is edge-triggered: set by a readable event,
    /// cleared only by `WouldBlock`).
    pub(super) readable: bool,
    pub(super) output: Vec<u8>,
    pub(super) writable_registered: bool,
    pub(super) subscription: Option<Subscription>,
    /// This connection's live capture (one at most).
    pub(super) capture: Option<CaptureSession>,
    pub(super) closed: bool,
}

impl Conn {
    /// The next complete line, if one is buffered.
    pub(super) fn next_line(&mut self) -> Option<Vec<u8>> {
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

    /// A TCP connection's own end (the switch's address and port).
    pub(super) fn local_addr(&self) -> Option<SocketAddr> {
        match &self.stream {
            CtlStream::Tcp(s) => s.local_addr().ok(),
            CtlStream::Unix(_) => None,
        }
    }

    pub(super) fn has_line(&self) -> bool {
        self.input[self.consumed..].contains(&b'\n')
    }

    /// Whether serving it now could make progress: a request is waiting (or may be, unread on
    /// the socket) and its answers are being taken.
    pub(super) fn wants_service(&self) -> bool {
        !self.closed
            && !self.close_when_flushed
            && self.output.len() < MAX_PENDING_OUTPUT
            && (self.readable || self.has_line())
    }

    /// Drops buffer capacity a burst left behind, so an idle connection holds little.
    pub(super) fn shrink(&mut self) {
        if self.output.is_empty() && self.output.capacity() > READ_CHUNK {
            self.output = Vec::new();
        }
        if self.input.is_empty() && self.input.capacity() > 4 * READ_CHUNK {
            self.input = Vec::new();
        }
    }
}

impl Server {
    pub(super) fn count(&self, tcp: bool) -> usize {
        self.conns.values().filter(|c| c.tcp == tcp && !c.closed).count()
    }

    /// Counts a connection turned away by a limit, and says so once in a while (a flood of
    /// them must not flood the log too).
    pub(super) fn refuse(&mut self, what: &str) {
        let n = self.stats.refused_connections.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_power_of_two() {
            tracing::warn!("control socket: {what} ({n} connections refused so far)");
        }
    }

    /// Takes every connection waiting on the owner's Unix socket (`tcp` false) or on the TCP
    /// listener. A Unix connection beyond [`MAX_UNIX_CONNECTIONS`] is turned away; a TCP one
    /// makes room among those waiting to authenticate and has its first request read at once.
    /// Out of descriptors, the Unix socket closes a TCP connection to let the owner in (or
    /// retries shortly with none to close); the TCP listener only retries shortly.
    pub(super) fn accept(&mut self, tcp: bool) {
        if !tcp {
            self.accept_retry = None;
        }
        loop {
            let accepted = if tcp {
                let Some((l, _)) = self.tcp.as_ref() else { return };
                l.accept().map(|(s, addr)| (CtlStream::Tcp(s), Some(addr)))
            } else {
                self.listener.accept().map(|(s, _)| (CtlStream::Unix(s), None))
            };
            match accepted {
                Ok((stream, None)) => {
                    if self.count(false) >= MAX_UNIX_CONNECTIONS {
                        drop(stream);
                        self.refuse("too many connections on the Unix socket");
                        continue;
                    }
                    self.add(stream, None);
                }
                Ok((stream, peer)) => {
                    self.make_room_to_authenticate();
                    // Its first request (the token, from a client that sent it with the
                    // connection) is read now, before a later connection could displace it.
                    if let Some(token) = self.add(stream, peer) {
                        self.serve_up_to(token, 1);
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if !tcp && out_of_descriptors(&e) => {
                    // The owner must get in: make room by closing a TCP connection, the
                    // unauthenticated ones first; with none to close, try again shortly.
                    if !self.evict_tcp() {
                        tracing::warn!("control socket: accept failed: {e}; retrying");
                        self.accept_retry = Some(Instant::now() + Duration::from_millis(100));
                        return;
                    }
                }
                Err(e) => {
                    if tcp {
                        if out_of_descriptors(&e) {
                            self.accept_retry = Some(Instant::now() + Duration::from_millis(100));
                        }
                        tracing::warn!("control over TCP: accept failed: {e}");
                    } else {
                        tracing::warn!("control socket: accept failed: {e}");
                    }
                    return;
                }
            }
        }
    }

    /// Closes the TCP connection that matters least (unauthenticated first, then the oldest)
    /// to free its descriptor. False if there is none.
    pub(super) fn evict_tcp(&mut self) -> bool {
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
    pub(super) fn make_room_to_authenticate(&mut self) {
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
    pub(super) fn expire_unauthenticated(&mut self) {
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
    pub(super) fn add(&mut self, mut stream: CtlStream, peer: Option<SocketAddr>) -> Option<Token> {
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
    pub(super) fn serve(&mut self, token: Token) {
        self.serve_up_to(token, REQUESTS_PER_ROUND);
    }

    /// [`Server::serve`], at most `most` requests.
    pub(super) fn serve_up_to(&mut self, token: Token, most: usize) {
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

    pub(super) fn flush(&mut self, token: Token) {
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
}

pub(super) fn over_long() -> Response {
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
pub(super) fn framed(line: Vec<u8>) -> Result<String, Response> {
    if line.len() > protocol::MAX_LINE {
        return Err(over_long());
    }
    String::from_utf8(line)
        .map_err(|_| Response::err(None, "malformed JSON: the line is not UTF-8; closing the connection"))
}

pub(super) fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}
