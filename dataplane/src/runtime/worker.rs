//! The real-time switch: poll-mode workers moving frames between port backends and the
//! pipeline, on a monotonic clock.
//!
//! Ownership (why the shared-buffer accounting stays exact): one `Switch` — and so the whole
//! MMU, every queue, every counter — belongs to the pipeline worker (worker 0), which polls its
//! own ports directly. Ports assigned to other workers are polled by those I/O workers, which
//! hand received frames to the pipeline worker through a lock-free ring and take back the frames
//! the pipeline releases for their ports through another; the frames travel in carriers from a
//! pool allocated at start-up that circulates on a third ring. A carrier holds the frame's own
//! buffer when its backend lends it (DPDK mbufs: no copy on either side of the ring) and a copy
//! otherwise. No counter has two writers, so no counter needs an atomic; what crosses cores is
//! only frames.

use crate::io::{ForeignFrame, PortBackend, PortError, RxFrame};
use crate::report::Snapshot;
use crate::runtime::capture::{CaptureRing, Dir};
use crate::runtime::emulated::{EmulatedPort, ToHost};
use crate::switch::{Switch, TxSink};
use controlplane::snapshot::BackendReport;
use crossbeam_queue::ArrayQueue;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Frames taken from a port per poll: DPDK's usual burst.
pub const BURST: usize = 32;
/// Frames in flight each way between the pipeline worker and one I/O worker (twice as many
/// buffers circulate: 2 × 1024 × 9.3 KB ≈ 19 MB per I/O worker).
pub const XFER_RING_DEPTH: usize = 1024;
/// Largest frame a cross-worker buffer holds (jumbo frames included).
pub const XFER_FRAME: usize = 9216 + 64;

/// A frame in flight between workers: in its backend's own buffer (`owned`, zero copy), or
/// copied into `data`.
pub struct Xfer {
    pub port: usize,
    pub len: usize,
    pub data: Box<[u8; XFER_FRAME]>,
    /// The frame's buffer, lent by the backend that received it (a DPDK mbuf): it crosses the
    /// ring as it is, and `data` is unused. Always `None` on the free ring.
    pub owned: Option<ForeignFrame>,
}

impl Xfer {
    /// The frame's bytes, wherever they are.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        match &self.owned {
            Some(f) => f.bytes(),
            None => &self.data[..self.len],
        }
    }

    /// Fills the carrier with a received frame: its buffer when the backend lends it, else a
    /// copy. False (the frame dropped, the carrier unchanged) for a frame too large to copy.
    #[inline]
    fn fill(&mut self, port: usize, frame: &mut RxFrame<'_>) -> bool {
        self.port = port;
        if let Some(f) = frame.take() {
            self.len = f.len();
            self.owned = Some(f);
            return true;
        }
        let b = frame.bytes();
        if b.len() > XFER_FRAME {
            return false;
        }
        self.len = b.len();
        self.data[..b.len()].copy_from_slice(b);
        true
    }

    /// Empties the carrier for the free ring: a buffer it still holds goes back to its backend.
    #[inline]
    fn recycle(mut self) -> Xfer {
        self.owned = None;
        self
    }
}

/// Rings between the pipeline worker and one I/O worker.
pub struct XferRings {
    /// I/O worker → pipeline: received frames.
    pub rx: ArrayQueue<Xfer>,
    /// Pipeline → I/O worker: frames to transmit.
    pub tx: ArrayQueue<Xfer>,
    /// Empty buffers, shared by both directions.
    pub free: ArrayQueue<Xfer>,
    /// Per port index: frames the pipeline sent that the port has not taken yet (on the `tx`
    /// ring or waiting for room). Bounded by [`XFER_PORT_CREDIT`] like a NIC's transmit ring,
    /// so a port that stops taking frames backs up into the switch's queues (and PFC) instead
    /// of into buffers the MMU does not see.
    pub in_flight: Vec<std::sync::atomic::AtomicUsize>,
    /// Per port index: the I/O worker's last report of the port's backend counters (about
    /// once a second), for the pipeline worker's snapshots.
    pub reports: Vec<std::sync::Mutex<Option<BackendReport>>>,
    /// Captures starting or stopping on the I/O worker's ports, forwarded by the pipeline
    /// worker (`ControlRequest::Capture`); taken once per round.
    pub taps: ArrayQueue<TapUpdate>,
}

/// A capture's ring for one port's directions (`None`: that direction is not captured), and
/// where to say it is in place (the wall-clock start of the workers' clock), so a capture
/// is acknowledged only once the worker that owns the port copies its frames.
pub struct TapUpdate {
    pub port: usize,
    pub rx: Option<Arc<CaptureRing>>,
    pub tx: Option<Arc<CaptureRing>>,
    pub reply: std::sync::mpsc::SyncSender<Result<u64, String>>,
}

/// Frames one port may have in flight between the pipeline and its I/O worker: a transmit
/// ring's worth, several bursts.
pub const XFER_PORT_CREDIT: usize = 256;

impl XferRings {
    pub fn new(depth: usize, ports: usize) -> Self {
        let free = ArrayQueue::new(depth * 2);
        for _ in 0..depth * 2 {
            let _ = free.push(Xfer {
                port: 0,
                len: 0,
                data: Box::new([0u8; XFER_FRAME]),
                owned: None,
            });
        }
        XferRings {
            rx: ArrayQueue::new(depth),
            tx: ArrayQueue::new(depth),
            free,
            in_flight: (0..ports).map(|_| Default::default()).collect(),
            reports: (0..ports).map(|_| Default::default()).collect(),
            taps: ArrayQueue::new(ports.max(1) * 4),
        }
    }
}

/// Per-port state a worker keeps about its backend.
pub struct PortIo {
    pub index: usize,
    pub backend: Box<dyn PortBackend + Send>,
    /// Set once the interface has gone away: logged once, then skipped.
    pub gone: bool,
    pub link_up: bool,
    pub tx_dropped: u64,
    /// A live capture of the frames the port receives (`rocectl capture`), checked once per
    /// burst: `None` costs the receive path one branch per burst.
    pub rx_tap: Option<Arc<CaptureRing>>,
    /// A live capture of the frames the port takes for transmission.
    pub tx_tap: Option<Arc<CaptureRing>>,
    /// On an I/O worker: frames the pipeline sent that the port had no room for yet, in order;
    /// sent before anything newer (capacity for every cross-worker buffer, so never grows).
    pending: std::collections::VecDeque<Xfer>,
    /// Whether an I/O worker takes the buffers the backend lends (zero copy). Not for a port
    /// with an emulated peer: the peer copies every frame into its store anyway, and a lent
    /// buffer waiting for it would only hold an mbuf the other ports could lend.
    pub lend: bool,
}

impl PortIo {
    pub fn new(index: usize, backend: Box<dyn PortBackend + Send>) -> Self {
        PortIo {
            index,
            backend,
            gone: false,
            link_up: true,
            tx_dropped: 0,
            rx_tap: None,
            tx_tap: None,
            pending: std::collections::VecDeque::new(),
            lend: true,
        }
    }

    /// Offers one frame from the pipeline to the backend (I/O workers); a frame the port took
    /// goes to its transmit capture, if one runs. A frame in its own buffer is handed over as
    /// it is (the carrier no longer holds it unless the answer is `Full`).
    fn offer(&mut self, x: &mut Xfer, now: u64) -> Offer {
        if self.gone {
            self.tx_dropped += 1;
            return Offer::Lost;
        }
        if self.backend.tx_room() == 0 {
            return Offer::Full;
        }
        // Only while a capture runs is there an `Arc` to clone (beside the copy it makes).
        match self.tx_tap.clone() {
            None => self.hand_over(x),
            Some(tap) => {
                // The buffer is the backend's once sent: copy it first, keep the copy if taken.
                let staged = tap.stage(Dir::Tx, now, x.bytes());
                let offer = self.hand_over(x);
                tap.finish(staged, matches!(offer, Offer::Taken));
                offer
            }
        }
    }

    /// Gives the frame to a port that has room for it.
    fn hand_over(&mut self, x: &mut Xfer) -> Offer {
        let sent = match x.owned.take() {
            Some(f) => self.backend.send_owned(f),
            None => self.backend.send(&x.data[..x.len]),
        };
        match sent {
            Ok(true) => Offer::Taken,
            Ok(false) => {
                // Room was there, so the frame itself was refused (size): counted, dropped.
                self.tx_dropped += 1;
                Offer::Lost
            }
            Err(e) => {
                self.fail(e);
                self.tx_dropped += 1;
                Offer::Lost
            }
        }
    }

    /// What a send to the backend came to: true if the port took the frame; a full ring counts
    /// a transmit drop, an error stops the port.
    fn took(&mut self, sent: Result<bool, PortError>) -> bool {
        match sent {
            Ok(true) => true,
            Ok(false) => {
                self.tx_dropped += 1;
                false
            }
            Err(e) => {
                self.fail(e);
                false
            }
        }
    }

    fn fail(&mut self, e: PortError) {
        if !self.gone {
            tracing::error!(port = self.index, interface = self.backend.name(), "port stopped: {e}");
        }
        self.gone = true;
    }

    /// The backend's counters, for reports.
    fn report(&mut self) -> BackendReport {
        self.backend.stats().report(self.backend.driver(), self.backend.name())
    }

    fn check_link(&mut self) {
        if self.gone {
            return;
        }
        let up = self.backend.link_up();
        if up != self.link_up {
            if up {
                tracing::info!(interface = self.backend.name(), "link up");
            } else {
                tracing::warn!(interface = self.backend.name(), "link down");
            }
            self.link_up = up;
        }
    }
}

enum Offer {
    Taken,
    /// No room in the port's ring: keep the frame and offer it again.
    Full,
    /// Refused for good (bad size, vanished port): counted in `tx_dropped`.
    Lost,
}

/// Monotonic nanoseconds since the switch started: the pipeline's clock in real mode. It
/// also remembers the wall-clock time it started at, so a capture's timestamps (taken on this
/// clock, which never jumps) can be written as wall-clock time.
#[derive(Clone, Copy)]
pub struct Clock {
    start: Instant,
    wall_start_ns: u64,
}

impl Clock {
    pub fn start() -> Self {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Clock {
            start: Instant::now(),
            wall_start_ns: wall,
        }
    }

    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Nanoseconds since the Unix epoch at `now_ns() == 0`.
    pub fn wall_start_ns(&self) -> u64 {
        self.wall_start_ns
    }
}

/// How workers wait when a round moved nothing.
#[derive(Clone, Copy)]
pub struct Polling {
    pub idle_sleep: Option<Duration>,
    pub drain_timeout: Duration,
}

impl Polling {
    /// Called by each worker thread before its loop: with an idle sleep, ask for precise
    /// wake-ups (Linux's default 50 µs timer slack would stretch a 20 µs sleep to ~70 µs, and
    /// the receive rings fill meanwhile).
    fn prepare_thread(&self) {
        if self.idle_sleep.is_some() {
            // SAFETY: PR_SET_TIMERSLACK takes one integer argument and affects only this thread.
            unsafe {
                libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
            }
        }
    }
}

/// Sends what the pipeline releases: straight into a local backend, or across a ring; and
/// shows the PFC frames among them to the port's emulated peer, if it has one.
struct Egress<'a> {
    local: &'a mut [Option<PortIo>],
    remote: &'a [Option<Arc<XferRings>>],
    remote_dropped: &'a mut u64,
    emu: &'a mut [Option<EmulatedPort>],
}

impl TxSink for Egress<'_> {
    fn room(&mut self, port: usize) -> usize {
        if let Some(io) = self.local[port].as_mut() {
            // A vanished interface takes (and loses) everything: nothing will ever drain it.
            if io.gone {
                usize::MAX
            } else {
                io.backend.tx_room()
            }
        } else if let Some(rings) = self.remote[port].as_ref() {
            // Buffers left to carry frames to the I/O worker; a port that stops taking frames
            // there holds its buffers until it does, so this reaches 0 and the queues back up.
            let credit = XFER_PORT_CREDIT.saturating_sub(rings.in_flight[port].load(Ordering::Acquire));
            credit.min(rings.free.len()).min(rings.tx.capacity() - rings.tx.len())
        } else {
            usize::MAX
        }
    }

    fn transmit_owned(&mut self, port: usize, frame: ForeignFrame, at_ns: u64) {
        self.send_owned(port, frame, at_ns);
    }

    fn transmit(&mut self, port: usize, frame: &[u8], at_ns: u64) {
        self.transmit_frame(port, frame, at_ns, None);
    }
}

impl Egress<'_> {
    /// A frame the switch transmits: shown to the port's emulated peer, then handed to the
    /// port; if the port took it and `tap` is a capture of its transmissions, copied there.
    /// Inlined into both sinks, so the plain one (`tap` = `None`) has no capture check.
    #[inline(always)]
    fn transmit_frame(&mut self, port: usize, frame: &[u8], at_ns: u64, tap: Option<&CaptureRing>) {
        if let Some(em) = self.emu[port].as_mut() {
            // The frame still goes out on the port (a rocegen host honours PFC itself); the
            // emulated peer is what keeps a late host from costing the switch lossless frames.
            match em.from_switch(frame, at_ns) {
                ToHost::Frame => {}
                ToHost::Nothing => return,
                ToHost::Rewritten(buf, len) => {
                    // What reaches the host (and a capture of the port) is the rewritten frame.
                    if self.send(port, &buf[..len]) {
                        if let Some(tap) = tap {
                            tap.record(Dir::Tx, at_ns, &buf[..len]);
                        }
                    }
                    return;
                }
            }
        }
        if self.send(port, frame) {
            if let Some(tap) = tap {
                tap.record(Dir::Tx, at_ns, frame);
            }
        }
    }

    /// [`TxSink::transmit_owned`]; true if a local port took the frame.
    #[inline]
    fn send_owned(&mut self, port: usize, frame: ForeignFrame, at_ns: u64) -> bool {
        let Some(io) = self.local[port].as_mut() else {
            match self.remote[port].as_ref() {
                // Another worker's port: the frame crosses in its own buffer (its I/O worker
                // captures it), unless an emulated peer must see it first (which copies).
                Some(rings) if self.emu[port].is_none() => {
                    let len = frame.len();
                    self.send_remote(rings, port, len, |x| x.owned = Some(frame));
                }
                _ => self.transmit_frame(port, frame.bytes(), at_ns, None),
            }
            return false;
        };
        if io.gone {
            io.tx_dropped += 1;
            return false;
        }
        let sent = io.backend.send_owned(frame);
        io.took(sent)
    }

    /// Hands `frame` to the port (its backend, or the ring to its I/O worker), and nothing
    /// else: what the emulated NIC sends its host goes here directly. True if a local port's
    /// backend took it (what its transmit capture records; an I/O worker's port records what
    /// its backend takes itself).
    fn send(&mut self, port: usize, frame: &[u8]) -> bool {
        if let Some(io) = self.local[port].as_mut() {
            if io.gone {
                io.tx_dropped += 1;
                return false;
            }
            let sent = io.backend.send(frame);
            return io.took(sent);
        } else if let Some(rings) = self.remote[port].as_ref() {
            if frame.len() <= XFER_FRAME {
                self.send_remote(rings, port, frame.len(), |x| {
                    x.data[..frame.len()].copy_from_slice(frame)
                });
            } else {
                *self.remote_dropped += 1;
            }
        }
        false
    }

    /// Puts a frame of `len` bytes on the ring to the I/O worker of `port`, in a carrier
    /// `fill` loads (a buffer it hands over, or a copy). `room` said there is a carrier and a
    /// place on the ring; if not after all, the frame is counted lost (a lent buffer is
    /// released with its carrier).
    #[inline]
    fn send_remote(&mut self, rings: &XferRings, port: usize, len: usize, fill: impl FnOnce(&mut Xfer)) {
        let Some(mut x) = rings.free.pop() else {
            *self.remote_dropped += 1;
            return;
        };
        x.port = port;
        x.len = len;
        fill(&mut x);
        rings.in_flight[port].fetch_add(1, Ordering::AcqRel);
        if let Err(x) = rings.tx.push(x) {
            rings.in_flight[port].fetch_sub(1, Ordering::AcqRel);
            let _ = rings.free.push(x.recycle());
            *self.remote_dropped += 1;
        }
    }

    /// The transmit capture of `port`, if one runs on it here (a port of this worker).
    #[inline]
    fn tx_tap(&self, port: usize) -> Option<Arc<CaptureRing>> {
        self.local[port].as_ref()?.tx_tap.clone()
    }

    /// Lets `port` transmit what the switch allows at `now`. The capture check is made once
    /// here, per port and round, not per frame: without a capture the sink is the plain
    /// `Egress`, with one a [`Tapped`] wrapper that also copies what the port took.
    #[inline]
    fn transmit_port(&mut self, sw: &mut Switch, port: usize, now: u64) -> usize {
        match self.tx_tap(port) {
            None => sw.transmit(port, now, self),
            Some(tap) => sw.transmit(
                port,
                now,
                &mut Tapped {
                    egress: self,
                    tap: &tap,
                },
            ),
        }
    }

    /// Sends what the emulated NIC tells its host (back-pressure PFC), captured like any frame
    /// the port sends.
    fn send_to_host(&mut self, port: usize, frame: &[u8], now: u64) {
        let taken = self.send(port, frame);
        if taken {
            if let Some(tap) = self.local[port].as_ref().and_then(|io| io.tx_tap.as_deref()) {
                tap.record(Dir::Tx, now, frame);
            }
        }
    }
}

/// [`Egress`] for a port whose transmissions are being captured: each frame the port's backend
/// takes is also copied into the capture ring, stamped with its departure time. A frame the
/// backend refused was not sent and is not captured.
struct Tapped<'e, 'a> {
    egress: &'e mut Egress<'a>,
    tap: &'e CaptureRing,
}

impl TxSink for Tapped<'_, '_> {
    fn room(&mut self, port: usize) -> usize {
        self.egress.room(port)
    }

    fn transmit(&mut self, port: usize, frame: &[u8], at_ns: u64) {
        self.egress.transmit_frame(port, frame, at_ns, Some(self.tap));
    }

    fn transmit_owned(&mut self, port: usize, frame: ForeignFrame, at_ns: u64) {
        // The buffer is the backend's once sent: copy it first, keep the copy if it was taken.
        let staged = self.tap.stage(Dir::Tx, at_ns, frame.bytes());
        let taken = self.egress.send_owned(port, frame, at_ns);
        self.tap.finish(staged, taken);
    }
}

/// What a run ends with.
pub struct RunOutcome {
    pub snapshot: Snapshot,
    pub uptime_ns: u64,
    /// Frames still queued when the drain timed out (0 if everything admitted was sent).
    pub undrained: usize,
    /// Frames the backends or the cross-worker rings could not take.
    pub tx_dropped: u64,
    /// What each port's backend counted itself, by port index: notably frames the kernel
    /// dropped because the receive ring was full (the switch did not poll fast enough), which
    /// the pipeline never sees.
    pub backends: Vec<(usize, crate::io::PortStats)>,
}

/// What the control plane asks of the running switch. Requests wait on a lock-free queue and
/// the pipeline worker serves them between two bursts, so a config change applies to whole
/// bursts and the packet path never takes a lock.
pub enum ControlRequest {
    /// Switch to this (validated) config; answered with the reason if it cannot change live.
    Apply {
        config: Box<controlplane::Config>,
        reply: std::sync::mpsc::SyncSender<Result<(), String>>,
    },
    /// Counters and buffer state now.
    Snapshot {
        reply: std::sync::mpsc::SyncSender<Snapshot>,
    },
    /// Counters now, then every peak restarts from the current use (watermark clearing).
    SnapshotAndRestartPeaks {
        reply: std::sync::mpsc::SyncSender<Snapshot>,
    },
    /// The MAC table now.
    Fdb {
        reply: std::sync::mpsc::SyncSender<Vec<crate::ingress::fdb::FdbRow>>,
    },
    /// Start (`Some` ring) or stop (`None`) capturing a port's received and/or transmitted
    /// frames (port index). Answered with the clock's wall-clock start (what a capture's
    /// timestamps are relative to), or why not. The worker that owns the port keeps the ring
    /// until told to stop; the control thread keeps its own reference and frees it after.
    Capture {
        port: usize,
        rx: Option<Arc<CaptureRing>>,
        tx: Option<Arc<CaptureRing>>,
        reply: std::sync::mpsc::SyncSender<Result<u64, String>>,
    },
}

/// The queue the control thread feeds and the pipeline worker drains.
pub type ControlQueue = ArrayQueue<ControlRequest>;

/// The switch's counters with, on each port that has one, what its emulated peer held.
pub fn snapshot(sw: &Switch, emu: &[Option<EmulatedPort>], now: u64) -> Snapshot {
    let mut s = sw.snapshot(now);
    for (report, em) in s.ports.iter_mut().zip(emu) {
        report.peer = em.as_ref().map(EmulatedPort::report);
    }
    s
}

/// Puts each port's backend counters in `snap`: read now from the ports this worker polls, the
/// last report of the others' I/O workers.
fn fill_backends(snap: &mut Snapshot, local: &mut [Option<PortIo>], remote: &[Option<Arc<XferRings>>]) {
    for (i, p) in snap.ports.iter_mut().enumerate() {
        if let Some(io) = local.get_mut(i).and_then(Option::as_mut) {
            p.backend = Some(io.report());
        } else if let Some(r) = remote.get(i).and_then(Option::as_ref) {
            p.backend = r.reports[i].lock().unwrap_or_else(|e| e.into_inner()).clone();
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn serve_control(
    sw: &mut Switch,
    emu: &[Option<EmulatedPort>],
    q: &ControlQueue,
    now: u64,
    clock: &Clock,
    local: &mut [Option<PortIo>],
    remote: &[Option<Arc<XferRings>>],
) {
    // A few per round: control traffic is rare, the packet path is not.
    for _ in 0..4 {
        let Some(req) = q.pop() else { return };
        match req {
            ControlRequest::Apply { config, reply } => {
                let r = sw.reconfigure(&config);
                match &r {
                    Ok(()) => tracing::info!("config applied"),
                    Err(e) => tracing::warn!("config refused: {e}"),
                }
                let _ = reply.try_send(r);
            }
            ControlRequest::Snapshot { reply } => {
                let mut s = snapshot(sw, emu, now);
                fill_backends(&mut s, local, remote);
                let _ = reply.try_send(s);
            }
            ControlRequest::SnapshotAndRestartPeaks { reply } => {
                let s = snapshot(sw, emu, now);
                sw.restart_peaks();
                let _ = reply.try_send(s);
            }
            ControlRequest::Fdb { reply } => {
                let _ = reply.try_send(sw.fdb().rows(now));
            }
            ControlRequest::Capture { port, rx, tx, reply } => {
                let r = if let Some(io) = local.get_mut(port).and_then(Option::as_mut) {
                    io.rx_tap = rx;
                    io.tx_tap = tx;
                    Ok(clock.wall_start_ns())
                } else if let Some(rings) = remote.get(port).and_then(Option::as_ref) {
                    // The I/O worker that owns the port takes it at its next round, and answers.
                    match rings.taps.push(TapUpdate { port, rx, tx, reply }) {
                        Ok(()) => continue,
                        Err(u) => {
                            let _ = u.reply.try_send(Err(
                                "the switch is busy (too many capture changes at once); try again".into(),
                            ));
                            continue;
                        }
                    }
                } else {
                    Err(format!("port index {port} has no backend in this run"))
                };
                let _ = reply.try_send(r);
            }
        }
    }
}

/// Called by the pipeline worker about once a second with a fresh snapshot.
pub type StatsHook<'a> = &'a mut dyn FnMut(&Snapshot, u64);

/// The pipeline worker's loop: owns the switch and the ports assigned to worker 0, and serves
/// the I/O workers' rings. Returns when `stop` is set and the queues have drained (or the drain
/// timed out).
#[allow(clippy::too_many_arguments)]
pub fn run_pipeline(
    sw: &mut Switch,
    mut local: Vec<Option<PortIo>>,
    remote: Vec<Option<Arc<XferRings>>>,
    mut emu: Vec<Option<EmulatedPort>>,
    clock: Clock,
    polling: Polling,
    stop: &AtomicBool,
    control: Option<&ControlQueue>,
    mut stats: Option<StatsHook<'_>>,
) -> RunOutcome {
    polling.prepare_thread();
    let n = sw.num_ports();
    let mut remote_dropped = 0u64;
    let mut next_check = 0u64;
    let mut drain_deadline: Option<u64> = None;
    // The emulated wires are replayed over the time since the last round in steps of the
    // shortest port's catch-up step (see below and `EmulatedPort::step_ns`).
    let step_ns = emu
        .iter()
        .flatten()
        .map(EmulatedPort::step_ns)
        .min()
        .unwrap_or(u64::MAX);
    let mut last_now = 0u64;
    // Distinct rings, each polled once per round.
    let mut rings: Vec<Arc<XferRings>> = Vec::new();
    for r in remote.iter().flatten() {
        if !rings.iter().any(|x| Arc::ptr_eq(x, r)) {
            rings.push(r.clone());
        }
    }
    // Per ring: a frame for an emulated port whose store was full, taken off the ring and
    // waiting for room (the ring is not read meanwhile, so the I/O worker stops reading too).
    let mut parked: Vec<Option<Xfer>> = rings.iter().map(|_| None).collect();
    loop {
        let now = clock.now_ns();
        let mut moved = 0usize;
        if drain_deadline.is_none() {
            if stop.load(Ordering::Relaxed) {
                drain_deadline = Some(now + polling.drain_timeout.as_nanos() as u64);
                tracing::info!("stopping: no longer receiving, draining the queues");
            } else {
                for io in local.iter_mut().flatten() {
                    if io.gone {
                        continue;
                    }
                    let res = match emu[io.index].as_mut() {
                        // Read into the emulated peer; the frames enter the switch as they
                        // cross its wire (below).
                        Some(em) => read_into_peer(io, em, sw.classifier(), now),
                        None => {
                            let mut rx = sw.burst_rx(io.index, now);
                            // One capture check per burst; a captured frame is copied as the
                            // backend handed it over, before the switch parses it.
                            match io.rx_tap.as_deref() {
                                None => io.backend.recv_frames(BURST, &mut |frame| rx.receive_frame(frame)),
                                Some(tap) => io.backend.recv_frames(BURST, &mut |frame| {
                                    tap.record(Dir::Rx, now, frame.bytes());
                                    rx.receive_frame(frame)
                                }),
                            }
                        }
                    };
                    match res {
                        Ok(k) => moved += k,
                        Err(e) => io.fail(e),
                    }
                }
                for (r, parked) in rings.iter().zip(parked.iter_mut()) {
                    // A burst for wire ports, as before; frames for emulated ports only wait in
                    // a store (their wire paces them) and a round may come milliseconds after
                    // the last, so everything waiting for them is taken (see `read_into_peer`).
                    let mut wire_frames = 0;
                    for _ in 0..r.rx.capacity() {
                        if wire_frames == BURST {
                            break;
                        }
                        let Some(mut x) = parked.take().or_else(|| r.rx.pop()) else {
                            break;
                        };
                        match emu[x.port].as_mut() {
                            Some(em) if em.room() == 0 => {
                                em.link.counters.stalled_reads += 1;
                                *parked = Some(x);
                                break;
                            }
                            Some(em) => em.accept(x.bytes(), now, sw.classifier()),
                            None => {
                                wire_frames += 1;
                                match x.owned.take() {
                                    // The frame stays in its buffer if the switch queues it;
                                    // what it did not keep is released with the carrier.
                                    Some(f) => {
                                        let mut frame = RxFrame::Owned(f);
                                        sw.burst_rx(x.port, now).receive_frame(&mut frame);
                                        x.owned = frame.give_back();
                                    }
                                    None => sw.receive(x.port, &x.data[..x.len], now),
                                }
                            }
                        }
                        let _ = r.free.push(x.recycle());
                        moved += 1;
                    }
                }
            }
        }
        // What crossed the emulated wires since the last round enters the switch (while
        // draining too: the peers' frames were sent before the stop).
        moved += crate::runtime::emulated::play_through(sw, &mut emu, last_now, now, step_ns, |sw, emu, t| {
            let mut egress = Egress {
                local: &mut local,
                remote: &remote,
                remote_dropped: &mut remote_dropped,
                emu,
            };
            (0..n).map(|port| egress.transmit_port(sw, port, t)).sum()
        });
        last_now = now;
        if let Some(q) = control {
            serve_control(sw, &emu, q, now, &clock, &mut local, &remote);
        }
        sw.poll(now);
        let mut egress = Egress {
            local: &mut local,
            remote: &remote,
            remote_dropped: &mut remote_dropped,
            emu: &mut emu,
        };
        for port in 0..n {
            moved += egress.transmit_port(sw, port, now);
        }
        for port in 0..n {
            if let Some((frame, len)) = egress.emu[port].as_mut().and_then(|em| em.backpressure(now)) {
                egress.send_to_host(port, &frame[..len], now);
            }
        }
        for io in local.iter_mut().flatten() {
            if !io.gone {
                if let Err(e) = io.backend.flush() {
                    io.fail(e);
                }
            }
        }
        if now >= next_check {
            next_check = now + 1_000_000_000;
            for io in local.iter_mut().flatten() {
                io.check_link();
            }
            if let Some(hook) = stats.as_mut() {
                hook(&snapshot(sw, &emu, now), now);
            }
        }
        if let Some(deadline) = drain_deadline {
            let remote_empty = rings.iter().all(|r| r.tx.is_empty());
            let peers_empty = emu.iter().flatten().all(EmulatedPort::is_empty) && parked.iter().all(Option::is_none);
            if (sw.is_idle() && remote_empty && peers_empty) || now >= deadline {
                let undrained = if sw.is_idle() {
                    0
                } else {
                    sw.snapshot(now)
                        .ports
                        .iter()
                        .flat_map(|p| &p.queues)
                        .map(|q| q.depth_packets as usize)
                        .sum()
                } + emu.iter().flatten().map(|em| em.link.held_frames()).sum::<usize>();
                let tx_dropped = local.iter().flatten().map(|io| io.tx_dropped).sum::<u64>() + remote_dropped;
                let backends = local
                    .iter_mut()
                    .flatten()
                    .map(|io| (io.index, io.backend.stats()))
                    .collect();
                let mut snapshot = snapshot(sw, &emu, now);
                fill_backends(&mut snapshot, &mut local, &remote);
                return RunOutcome {
                    snapshot,
                    uptime_ns: now,
                    undrained,
                    tx_dropped,
                    backends,
                };
            }
        }
        if moved == 0 {
            match polling.idle_sleep {
                Some(d) => std::thread::sleep(d),
                None => std::hint::spin_loop(),
            }
        }
    }
}

/// Reads an emulated port's receive ring into its peer's store: everything the ring holds, as
/// far as the store has room, not one burst per round. Reading is only a copy (the frames enter
/// the switch as they cross the emulated wire), and a round can come milliseconds after the
/// last on a busy machine (the gap it plays through costs time): one burst per round drained
/// 32 frames per port per ~3 ms round on a loaded 2-core lab, far below a 300 Mb/s host, and
/// the kernel's ring overflowed (`rx_kernel_drops`) while the store sat nearly empty.
fn read_into_peer(
    io: &mut PortIo,
    em: &mut EmulatedPort,
    classifier: &crate::ingress::classify::Classifier,
    now: u64,
) -> Result<usize, PortError> {
    let mut total = 0;
    loop {
        let room = em.room().min(BURST);
        if room == 0 {
            em.link.counters.stalled_reads += 1;
            return Ok(total);
        }
        let k = match io.rx_tap.as_deref() {
            None => io
                .backend
                .recv_burst(room, &mut |frame| em.accept(frame, now, classifier))?,
            Some(tap) => io.backend.recv_burst(room, &mut |frame| {
                tap.record(Dir::Rx, now, frame);
                em.accept(frame, now, classifier)
            })?,
        };
        total += k;
        if k < room {
            return Ok(total);
        }
    }
}

/// An I/O worker's loop: polls its ports, hands frames to the pipeline, sends what comes back.
/// Returns its transmit-drop count and its ports' backend counters when `done` is set (after
/// the pipeline has finished).
pub fn run_io(
    mut ports: Vec<PortIo>,
    rings: Arc<XferRings>,
    clock: Clock,
    polling: Polling,
    stop: &AtomicBool,
    done: &AtomicBool,
) -> (u64, Vec<(usize, crate::io::PortStats)>) {
    polling.prepare_thread();
    for io in ports.iter_mut() {
        // A port's whole credit may end up waiting on it: no allocation later.
        io.pending.reserve(XFER_PORT_CREDIT);
    }
    // Carriers for the next receive burst, taken off the free ring before the port is polled.
    let mut reserved: Vec<Xfer> = Vec::with_capacity(BURST);
    let mut lost = 0u64;
    let mut next_check = Instant::now();
    loop {
        let mut moved = 0usize;
        // Captures starting or stopping on these ports (rare: one queue check per round).
        while let Some(u) = rings.taps.pop() {
            let r = match ports.iter_mut().find(|p| p.index == u.port) {
                Some(io) => {
                    io.rx_tap = u.rx;
                    io.tx_tap = u.tx;
                    Ok(clock.wall_start_ns())
                }
                None => Err(format!("port index {} is not on this I/O worker", u.port)),
            };
            let _ = u.reply.try_send(r);
        }
        let now = clock.now_ns();
        if !stop.load(Ordering::Relaxed) {
            for io in ports.iter_mut() {
                if io.gone {
                    continue;
                }
                let idx = io.index;
                let r = &rings;
                // No more than the pipeline can take: what it cannot take yet stays in the
                // port's own ring rather than being lost here (an emulated peer that is full
                // stops taking frames, and its host's queue is where they wait). A whole burst
                // or nothing, with its carriers taken off the free ring first (the pipeline
                // takes carriers from it too): a DPDK port hands over whole bursts, and a frame
                // received with no carrier for it would be lost between the NIC and the switch.
                // Only this worker pushes onto `r.rx`, so its free places only grow meanwhile.
                if r.rx.capacity() - r.rx.len() < BURST {
                    continue;
                }
                while reserved.len() < BURST {
                    match r.free.pop() {
                        Some(x) => {
                            debug_assert!(x.owned.is_none(), "a carrier on the free ring holds a buffer");
                            reserved.push(x);
                        }
                        None => break,
                    }
                }
                if reserved.len() < BURST {
                    continue; // kept for the next round
                }
                // A frame whose buffer the backend lends crosses in it (zero copy); a frame too
                // large to copy is counted lost, its carrier kept.
                let reserved = &mut reserved;
                let tap = io.rx_tap.clone();
                let mut take = |frame: &mut RxFrame<'_>| {
                    if let Some(tap) = tap.as_deref() {
                        tap.record(Dir::Rx, now, frame.bytes());
                    }
                    let Some(mut x) = reserved.pop() else {
                        lost += 1; // unreachable: a burst's carriers were reserved
                        return;
                    };
                    if !x.fill(idx, frame) {
                        reserved.push(x);
                        lost += 1;
                    } else if let Err(x) = r.rx.push(x) {
                        reserved.push(x.recycle()); // unreachable: the places were checked
                        lost += 1;
                    }
                };
                let res = if io.lend {
                    io.backend.recv_frames(BURST, &mut take)
                } else {
                    io.backend.recv_burst(BURST, &mut |b| take(&mut RxFrame::Borrowed(b)))
                };
                match res {
                    Ok(k) => moved += k,
                    Err(e) => io.fail(e),
                }
            }
        }
        // Frames a port had no room for go first, in order; what is still refused waits.
        for io in ports.iter_mut() {
            while let Some(mut x) = io.pending.pop_front() {
                match io.offer(&mut x, now) {
                    Offer::Full => {
                        io.pending.push_front(x);
                        break;
                    }
                    Offer::Taken | Offer::Lost => {
                        rings.in_flight[x.port].fetch_sub(1, Ordering::AcqRel);
                        let _ = rings.free.push(x.recycle());
                        moved += 1;
                    }
                }
            }
        }
        for _ in 0..BURST * ports.len().max(1) {
            let Some(mut x) = rings.tx.pop() else { break };
            moved += 1;
            let Some(io) = ports.iter_mut().find(|p| p.index == x.port) else {
                rings.in_flight[x.port].fetch_sub(1, Ordering::AcqRel);
                let _ = rings.free.push(x.recycle());
                continue;
            };
            if !io.pending.is_empty() {
                io.pending.push_back(x);
                continue;
            }
            match io.offer(&mut x, now) {
                Offer::Full => io.pending.push_back(x),
                Offer::Taken | Offer::Lost => {
                    rings.in_flight[x.port].fetch_sub(1, Ordering::AcqRel);
                    let _ = rings.free.push(x.recycle());
                }
            }
        }
        for io in ports.iter_mut() {
            if !io.gone {
                if let Err(e) = io.backend.flush() {
                    io.fail(e);
                }
            }
        }
        if Instant::now() >= next_check {
            next_check = Instant::now() + Duration::from_secs(1);
            for io in ports.iter_mut() {
                io.check_link();
                let report = io.report();
                *rings.reports[io.index].lock().unwrap_or_else(|e| e.into_inner()) = Some(report);
            }
        }
        if done.load(Ordering::Acquire) && rings.tx.is_empty() && ports.iter().all(|p| p.pending.is_empty() || p.gone) {
            let stats = ports.iter_mut().map(|p| (p.index, p.backend.stats())).collect();
            return (lost + ports.iter().map(|p| p.tx_dropped).sum::<u64>(), stats);
        }
        if moved == 0 {
            match polling.idle_sleep {
                Some(d) => std::thread::sleep(d),
                None => std::hint::spin_loop(),
            }
        }
    }
}

/// Pins the calling thread to `core`, logging (not failing) if the OS refuses.
pub fn pin(core: usize) {
    let ok = core_affinity::get_core_ids()
        .and_then(|ids| ids.into_iter().find(|c| c.id == core))
        .is_some_and(core_affinity::set_for_current);
    if !ok {
        tracing::warn!(core, "could not pin worker to core");
    }
}

/// Opens the backend of a port (AF_PACKET in production, in-memory ports in tests).
pub type OpenPort = Box<dyn Fn(&controlplane::PortConfig) -> Result<Box<dyn PortBackend + Send>, PortError>>;

/// Options of `rocesw run` beyond the config.
pub struct RunOptions {
    pub seed: u64,
    pub open: OpenPort,
    /// Requests from the control plane (`rocectl`), served between bursts.
    pub control: Option<Arc<ControlQueue>>,
}

/// Runs the switch until `stop` is set: opens every port, starts the I/O workers, runs the
/// pipeline worker on the calling thread, drains, and returns the final counters.
pub fn run(
    cfg: &controlplane::Config,
    opts: RunOptions,
    stop: Arc<AtomicBool>,
    stats: Option<StatsHook<'_>>,
) -> anyhow::Result<RunOutcome> {
    let workers = cfg.run.workers.max(1);
    let mut sw = Switch::new(cfg, opts.seed);
    let n = sw.num_ports();
    let mut local: Vec<Option<PortIo>> = (0..n).map(|_| None).collect();
    let mut per_worker: Vec<Vec<PortIo>> = (0..workers).map(|_| Vec::new()).collect();
    for (i, p) in cfg.ports.iter().enumerate() {
        let backend = (opts.open)(p).map_err(|e| {
            anyhow::anyhow!(
                "port {} ({}): {e}",
                p.id,
                p.interface.as_deref().unwrap_or(if p.pcap.is_some() {
                    "capture files"
                } else {
                    "no interface"
                })
            )
        })?;
        let mut io = PortIo::new(i, backend);
        io.lend = p.peer != controlplane::model::PeerKind::Emulated;
        if p.worker == 0 {
            local[i] = Some(io);
        } else {
            per_worker[p.worker.min(workers - 1)].push(io);
        }
    }
    let polling = Polling {
        idle_sleep: cfg.run.idle_sleep_ns.map(Duration::from_nanos),
        drain_timeout: Duration::from_nanos(cfg.run.drain_timeout_ns),
    };
    let done = Arc::new(AtomicBool::new(false));
    // One clock for every worker: capture timestamps from any of them are comparable.
    let clock = Clock::start();
    let mut remote: Vec<Option<Arc<XferRings>>> = (0..n).map(|_| None).collect();
    let mut handles = Vec::new();
    for (w, ports) in per_worker.into_iter().enumerate().skip(1) {
        if ports.is_empty() {
            continue;
        }
        let rings = Arc::new(XferRings::new(XFER_RING_DEPTH, n));
        for io in &ports {
            remote[io.index] = Some(rings.clone());
        }
        let (stop, done) = (stop.clone(), done.clone());
        let core = cfg.run.cores.get(w).copied();
        let handle = std::thread::Builder::new()
            .name(format!("rocesw-io{w}"))
            .spawn(move || {
                if let Some(c) = core {
                    pin(c);
                }
                run_io(ports, rings, clock, polling, &stop, &done)
            })?;
        handles.push(handle);
    }
    if let Some(&c) = cfg.run.cores.first() {
        pin(c);
    }
    // Ports whose far end is software get an emulated link in front of the switch.
    let emu = cfg
        .ports
        .iter()
        .map(|p| (p.peer == controlplane::model::PeerKind::Emulated).then(|| EmulatedPort::new(p, &cfg.pfc)))
        .collect();
    let control = opts.control.clone();
    let mut outcome = run_pipeline(
        &mut sw,
        local,
        remote,
        emu,
        clock,
        polling,
        &stop,
        control.as_deref(),
        stats,
    );
    done.store(true, Ordering::Release);
    for h in handles {
        let (dropped, stats) = h.join().map_err(|_| anyhow::anyhow!("an I/O worker panicked"))?;
        outcome.tx_dropped += dropped;
        outcome.backends.extend(stats);
    }
    outcome.backends.sort_by_key(|(i, _)| *i);
    // The I/O workers' final counters, over their last once-a-second reports.
    for (i, st) in &outcome.backends {
        if let Some(b) = outcome.snapshot.ports.get_mut(*i).and_then(|p| p.backend.as_mut()) {
            *b = st.report(&b.driver, &b.device);
        }
    }
    Ok(outcome)
}
