//! Capture sessions (`capture`, `capture_stop`): the control thread's side of
//! `runtime::capture`. It allocates each ring, hands it to the worker that owns the port, and
//! each round moves what the ring holds into the connection's output, only while that output
//! is under [`MAX_PENDING_OUTPUT`]: what a slow client has not taken stays in the ring, and
//! what the full ring cannot take the worker counts as dropped. So a capture holds at most its
//! ring and one connection's allowance, whatever the client does.

use super::{
    json, Server, CAPTURE_BATCH_BYTES, CAPTURE_BATCH_FRAMES, CAPTURE_DEFAULT_MAX_FRAMES, CAPTURE_DEFAULT_MIN_FRAMES,
    CAPTURE_HEARTBEAT, CAPTURE_STALL_TIMEOUT, MAX_PENDING_OUTPUT, REPLY_TIMEOUT,
};
use crate::runtime::capture::{CaptureRing, Dir};
use crate::runtime::worker::{ControlQueue, ControlRequest};
use controlplane::protocol::{
    self, CaptureData, CaptureDirection, CaptureEnd, CaptureStarted, CapturedFrame, FrameDir, Response,
};
use controlplane::snapshot::{CaptureReport, Snapshot};
use mio::Token;
use serde_json::Value;
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A live capture: its ring (the worker that owns the port holds a clone while it captures)
/// and what has been sent of it.
pub(super) struct CaptureSession {
    /// The `capture` request's id, which every push carries.
    pub(super) id: u64,
    /// Port index (the worker's) and id (the config's).
    pub(super) port: usize,
    pub(super) port_id: u16,
    pub(super) ring: Arc<CaptureRing>,
    /// Wall-clock nanoseconds of the switch clock's zero: a frame's time is this plus its
    /// `at_ns`.
    pub(super) wall_start_ns: u64,
    pub(super) sent: u64,
    pub(super) count: Option<u64>,
    pub(super) deadline: Option<Instant>,
    pub(super) ending: Option<Ending>,
    /// A `capture_stop` to answer once the last push is out.
    pub(super) stop_reply: Option<u64>,
    /// Since when the client has left a full allowance of output unread.
    pub(super) stalled_since: Option<Instant>,
    pub(super) last_push: Instant,
}

/// A capture on its way out: the worker is asked to let go of the ring, then what the ring
/// still holds is sent, then the last push.
pub(super) struct Ending {
    pub(super) why: CaptureEnd,
    pub(super) since: Instant,
    /// The request to let go reached the worker's queue.
    pub(super) detach_sent: bool,
    /// Drops as of the end of a counted capture (later frames were never going to be sent).
    pub(super) dropped: Option<u64>,
}

impl CaptureSession {
    pub(super) fn end(&mut self, why: CaptureEnd) {
        if self.ending.is_none() {
            self.ending = Some(Ending {
                why,
                since: Instant::now(),
                detach_sent: false,
                dropped: (why == CaptureEnd::Count).then(|| self.ring.dropped()),
            });
        }
    }

    pub(super) fn count_reached(&self) -> bool {
        self.count.is_some_and(|c| self.sent >= c)
    }

    pub(super) fn dropped(&self) -> u64 {
        self.ending
            .as_ref()
            .and_then(|e| e.dropped)
            .unwrap_or_else(|| self.ring.dropped())
    }

    /// Moves what the ring holds into `out` as push lines, while `out` is under `cap` bytes
    /// (and, for a counted capture, up to the count).
    pub(super) fn drain_into(&mut self, out: &mut Vec<u8>, cap: usize) {
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

    pub(super) fn push(&mut self, out: &mut Vec<u8>, frames: Vec<CapturedFrame>, end: Option<CaptureEnd>) {
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
    pub(super) fn finish(&mut self, out: &mut Vec<u8>) {
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

/// What a `capture` request asks for.
pub(super) struct CaptureArgs {
    pub(super) port: u16,
    pub(super) direction: CaptureDirection,
    pub(super) snaplen: Option<u32>,
    pub(super) ring: Option<u32>,
    pub(super) count: Option<u64>,
    pub(super) duration_ms: Option<u64>,
}

impl Server {
    pub(super) fn capturing(&self) -> bool {
        !self.orphans.is_empty() || !self.retiring.is_empty() || self.conns.values().any(|c| c.capture.is_some())
    }

    pub(super) fn sessions(&self) -> impl Iterator<Item = &CaptureSession> {
        self.conns
            .values()
            .filter_map(|c| c.capture.as_ref())
            .chain(&self.orphans)
    }

    /// What every capture ring not yet freed holds, counted now: the live sessions (a ring is
    /// theirs from the moment it is allocated), the orphans, and the rings waiting for a worker
    /// to let go. The cap on all of them is checked against this, never against the figures
    /// published at the end of the last round, which miss the rings reserved in this one.
    pub(super) fn capture_bytes_reserved(&self) -> usize {
        let rings = self.sessions().map(|s| &s.ring).chain(&self.retiring);
        rings
            .map(|r| CaptureRing::bytes_reserved(r.capacity(), r.snaplen()))
            .sum()
    }

    pub(super) fn start_capture(&mut self, token: Token, id: u64, a: CaptureArgs) -> Result<Value, String> {
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
    pub(super) fn pump_captures(&mut self) {
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
    pub(super) fn retire(&mut self, s: CaptureSession) {
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
    pub(super) fn orphan_closed_captures(&mut self) {
        for c in self.conns.values_mut().filter(|c| c.closed) {
            if let Some(mut s) = c.capture.take() {
                s.end(CaptureEnd::Stopped);
                self.orphans.push(s);
            }
        }
    }

    /// The switch is stopping (its workers have finished, or are about to): every capture gets
    /// what its ring holds and its last push, and the connections get a moment to take them.
    pub(super) fn finish_captures(&mut self) {
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
    pub(super) fn annotate(&self, snap: &mut Snapshot) {
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
pub(super) fn detach(queue: &ControlQueue, s: &mut CaptureSession, now: Instant) -> bool {
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
