//! Port backends: where frames come from and go to in real time.
//!
//! The interface is deliberately narrow (burst receive, per-frame send, flush, link state,
//! counters), so the DPDK backend sits behind it like the others. A backend may also lend
//! its receive buffers to the switch (`recv_frames`, `send_owned`: zero copy, DPDK's mbufs);
//! the others copy, through the same two calls' defaults. It
//! knows nothing of the switch: the poll-mode workers (`worker.rs`) move frames between a backend
//! and `Switch::receive` / `TxSink::transmit`.
//!
//! Contract shared by every backend:
//! * nothing blocks: an empty receive ring returns 0, a full transmit ring returns `Ok(false)`;
//! * frames are L2 without FCS, exactly as they would appear on the wire (an 802.1Q tag the
//!   kernel pulled out of the frame is put back, so the switch sees the PCP);
//! * `Err` means the port is unusable (its interface vanished, or an unexpected I/O error); the
//!   worker logs it once and stops polling that port. Transient conditions (ring full, kernel
//!   buffer pressure, link down) are never errors: they are counted in [`PortStats`].

pub mod afpacket;
#[cfg(feature = "dpdk")]
pub mod dpdk;
pub mod pcap;

pub use afpacket::{AfPacket, AfPacketOptions};
pub use pcap::{InputsLeft, PcapClock, PcapPort};

pub use crate::buffers::foreign::{ForeignFrame, ForeignKind, LentBurst, OwnTokens, OwnedBurst, RxFrame};
use std::collections::VecDeque;
use std::ffi::c_void;
use std::ptr::NonNull;

/// Why a port cannot be used any more.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// The interface was deleted (or moved to another namespace) while open. Callers keep the
    /// rest of the switch running: log once, count, stop polling this port.
    #[error("interface {iface} vanished: {source}")]
    Vanished {
        /// The interface's name.
        iface: String,
        /// The error the system call that noticed it returned.
        #[source]
        source: std::io::Error,
    },
    /// Any other failure of a system call, with what we were doing.
    #[error("interface {iface}: {context}: {source}")]
    Io {
        /// The interface's name.
        iface: String,
        /// What was being done (`"sendto (TX ring flush)"`...).
        context: &'static str,
        /// The system call's error.
        #[source]
        source: std::io::Error,
    },
}

impl PortError {
    /// True if the interface went away (as opposed to a setup or unexpected I/O failure).
    pub fn is_vanished(&self) -> bool {
        matches!(self, PortError::Vanished { .. })
    }

    /// The OS error number behind the error, if any.
    pub fn errno(&self) -> Option<i32> {
        match self {
            PortError::Vanished { source, .. } | PortError::Io { source, .. } => source.raw_os_error(),
        }
    }
}

/// Counters a backend keeps itself (the switch counts everything else). Monotonic since open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PortStats {
    /// Frames handed to the receive callback.
    pub rx_frames: u64,
    /// Frames the kernel dropped because the receive ring was full (`PACKET_STATISTICS`
    /// `tp_drops`): the switch did not poll fast enough.
    pub rx_kernel_drops: u64,
    /// Received frames larger than a ring slot (truncated by the kernel), or shorter than an
    /// Ethernet header: skipped.
    pub rx_oversize: u64,
    /// Frames accepted by `send` (queued in the transmit ring).
    pub tx_frames: u64,
    /// `send` calls refused because the transmit ring had no free slot.
    pub tx_ring_full: u64,
    /// Frames refused by `send` because they exceed the slot or the interface MTU (or are shorter
    /// than an Ethernet header).
    pub tx_bad_size: u64,
    /// Queued frames discarded unsent because the link was (administratively) down at flush.
    pub tx_dropped: u64,
    /// Flushes the kernel only partly served (send buffer full, `ENOBUFS`); the frames left stay
    /// queued and go out on the next flush.
    pub tx_flush_retries: u64,
    /// DPDK ports: frames `send` refused because the mbuf pool was empty (`[run.dpdk] mbufs`).
    pub tx_nombuf: u64,
    /// DPDK ports: received frames the switch kept in their mbuf (zero copy) rather than
    /// copying them (copied: `rx_frames - rx_zero_copy`).
    pub rx_zero_copy: u64,
    /// DPDK ports: frames sent in the mbuf they were received in (no copy, no allocation).
    pub tx_zero_copy: u64,
    /// DPDK ports: the driver's `imissed`, frames the NIC dropped because its receive ring was
    /// full (the switch polled too slowly). 0 on other backends.
    pub imissed: u64,
    /// DPDK ports: the driver's `ierrors`, erroneous frames received. 0 on other backends.
    pub ierrors: u64,
    /// DPDK ports: the driver's `oerrors`, frames it failed to transmit. 0 on other backends.
    pub oerrors: u64,
    /// DPDK ports: the driver's `rx_nombuf`, receive mbuf allocation failures (the pool was
    /// empty). 0 on other backends.
    pub rx_nombuf: u64,
}

impl PortStats {
    /// What reports show of these counters (`rocectl show counters`, the metrics): the losses
    /// the switch never sees, with the backend's driver and device.
    pub fn report(&self, driver: &str, device: &str) -> controlplane::snapshot::BackendReport {
        controlplane::snapshot::BackendReport {
            driver: driver.to_string(),
            device: device.to_string(),
            rx_kernel_drops: self.rx_kernel_drops,
            imissed: self.imissed,
            ierrors: self.ierrors,
            oerrors: self.oerrors,
            rx_nombuf: self.rx_nombuf,
            tx_nombuf: self.tx_nombuf,
            // The port's, filled in by `runtime::port_io::PortIo::report`.
            link_up: None,
        }
    }
}

/// A source and sink of L2 frames, polled by one worker thread.
pub trait PortBackend {
    /// Calls `f` with up to `max` received frames (L2, no FCS), each slice valid only during the
    /// call; returns how many. Never blocks.
    fn recv_burst(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, PortError>;
    /// As [`PortBackend::recv_burst`], but a backend that can give its receive buffers away
    /// (DPDK) hands each frame as an [`RxFrame::Owned`] buffer the switch may keep (zero copy),
    /// and hands a whole burst in one call to `f` (one indirect call a burst, not a frame);
    /// whatever the switch did not take is still in its `RxFrame` after `f` returns, for the
    /// backend to take back. By default, the frames of `recv_burst`, borrowed, one a call.
    fn recv_frames(&mut self, max: usize, f: &mut dyn FnMut(&mut [RxFrame<'_>])) -> Result<usize, PortError> {
        self.recv_burst(max, &mut |b| f(&mut [RxFrame::Borrowed(b)]))
    }
    /// As [`PortBackend::recv_frames`] for a backend whose receive buffers are all of one kind
    /// (DPDK's mbufs): the burst as one [`LentBurst`], the frames' addresses, lengths and tokens
    /// in arrays, not an [`RxFrame`] record a frame; what the switch did not take is in the
    /// burst after `f` returns, for the backend to take back. None (the default): this backend
    /// does not lend that way, ask `recv_frames`.
    fn recv_lent(&mut self, _max: usize, _f: &mut dyn FnMut(&mut LentBurst)) -> Option<Result<usize, PortError>> {
        None
    }
    /// As [`PortBackend::send`], for a frame in a buffer a backend owns (received without a
    /// copy): a backend that can send that kind of buffer takes it as it is; the others (the
    /// default) send a copy and release the buffer. The buffer is released whatever the
    /// answer, if it was not taken.
    fn send_owned(&mut self, frame: ForeignFrame) -> Result<bool, PortError> {
        self.send(frame.bytes())
    }
    /// [`PortBackend::send_owned`] for every frame of `frames` in order, leaving it empty (the
    /// times are the switch's departure times, for captures; a backend sends at once): what one
    /// transmit call of the switch sends without a copy. A backend that queues its own buffers
    /// overrides it to do so once a burst. Returns how many frames it did not take (each
    /// counted as `send_owned`'s `Ok(false)` would be: ring full, size) and the error that
    /// stopped the port, if one did: the frame that met the error is not in the count, the
    /// frames after it are (released unsent, as a stopped port's are).
    fn send_owned_burst(&mut self, frames: &mut OwnedBurst) -> (u64, Option<PortError>) {
        let (mut refused, mut error) = (0, None);
        for (frame, _) in frames.drain(..) {
            if error.is_some() {
                refused += 1;
                continue;
            }
            match self.send_owned(frame) {
                Ok(true) => {}
                Ok(false) => refused += 1,
                Err(e) => error = Some(e),
            }
        }
        (refused, error)
    }
    /// The kind of lent buffer this backend sends as it is, if one (DPDK: its mbufs). The
    /// sink then gathers such frames as bare tokens and hands them over with
    /// [`PortBackend::send_own_tokens`]: no frame record written and read back per frame. None
    /// by default: frames go through [`PortBackend::send_owned_burst`].
    fn own_kind(&self) -> Option<&'static ForeignKind> {
        None
    }
    /// Queues the buffers `tokens` for transmission, in order, as many as the transmit array
    /// has room for, and releases the rest (each counted as `send_owned`'s `Ok(false)`: ring
    /// full). Returns how many it did not queue. Only called on a backend whose
    /// [`PortBackend::own_kind`] is `Some`; the default releases them all.
    ///
    /// # Safety
    /// Each token must be a buffer of the kind `own_kind` names, owned by the caller, which
    /// hands it over and never uses it again.
    unsafe fn send_own_tokens(&mut self, tokens: &[NonNull<c_void>]) -> u64 {
        if let Some(kind) = self.own_kind() {
            for &t in tokens {
                // SAFETY: by the contract, an owned buffer of this kind, released once.
                unsafe { (kind.release)(t) };
            }
        }
        tokens.len() as u64
    }
    /// Queues one frame for transmission; `Ok(false)` if it could not be queued (ring full, or
    /// larger than the port can send; both counted in [`PortStats`]), and the caller counts a
    /// drop or retries next round. Never blocks.
    fn send(&mut self, frame: &[u8]) -> Result<bool, PortError>;
    /// How many frames `send` would take now (free transmit slots; at most a burst's worth need
    /// be counted). The switch sends no more than this: a frame leaves its queue, and its cells
    /// are released, only once the port has room for it, so a full ring is back-pressure into
    /// the MMU and PFC, never a drop. No system call.
    fn tx_room(&mut self) -> usize;
    /// Kicks queued frames out (at most one system call).
    fn flush(&mut self) -> Result<(), PortError>;
    /// Link state as the kernel reports it (administratively up and running). A few system
    /// calls: meant for a few times per second. Also how a vanished interface is noticed when no
    /// traffic is sent (`recv_burst` makes no system call).
    fn link_up(&mut self) -> bool;
    /// Whether the port has a link at all, for reports: capture files have none (their
    /// `link_up` is always true, which says nothing).
    fn has_link(&self) -> bool {
        true
    }
    /// The interface name (or the in-memory port's label).
    fn name(&self) -> &str;
    /// What kind of port this is, for reports: `af_packet`, `pcap`, `memory`, or the DPDK
    /// driver's name.
    fn driver(&self) -> &str {
        "unknown"
    }
    /// The backend's own counters.
    fn stats(&mut self) -> PortStats;
}

/// An in-memory port for tests and benches: frames pushed with [`MemPort::push_rx`] come out of
/// `recv_burst`; frames `send` accepts wait in a transmit queue until `flush` moves them to the
/// "wire", where [`MemPort::pop_tx`] takes them. Frame buffers are recycled, so a steady state
/// does not allocate.
#[derive(Debug)]
pub struct MemPort {
    name: String,
    rx: VecDeque<Vec<u8>>,
    /// Sent but not yet flushed: bounded by `tx_capacity`, like a transmit ring.
    tx_queued: VecDeque<Vec<u8>>,
    /// Flushed: what the peer would have received.
    wire: VecDeque<Vec<u8>>,
    free: Vec<Vec<u8>>,
    tx_capacity: usize,
    max_frame: usize,
    link: bool,
    /// The far end stopped reading: `flush` moves nothing, so the transmit queue fills.
    tx_stalled: bool,
    vanished: bool,
    stats: PortStats,
}

impl MemPort {
    /// A port whose transmit queue holds `tx_capacity` unflushed frames, sending frames of up to
    /// 9216 bytes.
    pub fn new(name: impl Into<String>, tx_capacity: usize) -> Self {
        MemPort {
            name: name.into(),
            rx: VecDeque::new(),
            tx_queued: VecDeque::with_capacity(tx_capacity),
            wire: VecDeque::new(),
            free: Vec::new(),
            tx_capacity,
            max_frame: 9216,
            link: true,
            tx_stalled: false,
            vanished: false,
            stats: PortStats::default(),
        }
    }

    /// Makes `frame` arrive: the next `recv_burst` will hand it over.
    pub fn push_rx(&mut self, frame: &[u8]) {
        let mut b = self.free.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(frame);
        self.rx.push_back(b);
    }

    /// Frames waiting to be received.
    pub fn rx_pending(&self) -> usize {
        self.rx.len()
    }

    /// Takes the oldest frame that left the port (flushed), if any.
    pub fn pop_tx(&mut self) -> Option<Vec<u8>> {
        self.wire.pop_front()
    }

    /// Frames that left the port and have not been taken yet.
    pub fn tx_pending(&self) -> usize {
        self.wire.len()
    }

    /// Sets the link state `link_up` reports.
    pub fn set_link(&mut self, up: bool) {
        self.link = up;
    }

    /// Makes the far end stop (or resume) reading, like a NIC or VM that stops taking frames:
    /// while stalled, `flush` moves nothing and the transmit queue fills.
    pub fn set_tx_stalled(&mut self, stalled: bool) {
        self.tx_stalled = stalled;
    }

    /// Simulates the interface disappearing: every later call fails with `Vanished`.
    pub fn vanish(&mut self) {
        self.vanished = true;
    }

    fn check(&self) -> Result<(), PortError> {
        if self.vanished {
            return Err(PortError::Vanished {
                iface: self.name.clone(),
                source: std::io::Error::from_raw_os_error(libc::ENODEV),
            });
        }
        Ok(())
    }
}

impl PortBackend for MemPort {
    fn recv_burst(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, PortError> {
        self.check()?;
        let mut n = 0;
        while n < max {
            let Some(b) = self.rx.pop_front() else { break };
            f(&b);
            self.free.push(b);
            n += 1;
        }
        self.stats.rx_frames += n as u64;
        Ok(n)
    }

    fn send(&mut self, frame: &[u8]) -> Result<bool, PortError> {
        self.check()?;
        if frame.len() > self.max_frame {
            self.stats.tx_bad_size += 1;
            return Ok(false);
        }
        if self.tx_queued.len() >= self.tx_capacity {
            self.stats.tx_ring_full += 1;
            return Ok(false);
        }
        let mut b = self.free.pop().unwrap_or_default();
        b.clear();
        b.extend_from_slice(frame);
        self.tx_queued.push_back(b);
        self.stats.tx_frames += 1;
        Ok(true)
    }

    fn tx_room(&mut self) -> usize {
        self.tx_capacity.saturating_sub(self.tx_queued.len())
    }

    fn flush(&mut self) -> Result<(), PortError> {
        self.check()?;
        if self.tx_stalled {
            return Ok(());
        }
        if self.link {
            self.wire.extend(self.tx_queued.drain(..));
        } else {
            // A down link sends nothing: the frames are lost, as on AF_PACKET.
            self.stats.tx_dropped += self.tx_queued.len() as u64;
            self.free.extend(self.tx_queued.drain(..));
        }
        Ok(())
    }

    fn link_up(&mut self) -> bool {
        self.link && !self.vanished
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn driver(&self) -> &str {
        "memory"
    }

    fn stats(&mut self) -> PortStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_port_moves_frames_in_order_and_bounds_the_tx_queue() {
        let mut p = MemPort::new("m0", 2);
        p.push_rx(&[1; 60]);
        p.push_rx(&[2; 64]);
        p.push_rx(&[3; 70]);
        let mut got = Vec::new();
        assert_eq!(p.recv_burst(2, &mut |f| got.push(f.to_vec())).unwrap(), 2);
        assert_eq!(got, vec![vec![1; 60], vec![2; 64]]);
        assert_eq!(p.rx_pending(), 1);

        assert!(p.send(&[9; 60]).unwrap());
        assert!(p.send(&[8; 60]).unwrap());
        assert!(!p.send(&[7; 60]).unwrap(), "third frame finds the queue full");
        assert!(!p.send(&[0; 10_000]).unwrap(), "oversize");
        assert_eq!(p.tx_pending(), 0, "nothing leaves before flush");
        p.flush().unwrap();
        assert_eq!(p.pop_tx(), Some(vec![9; 60]));
        assert_eq!(p.pop_tx(), Some(vec![8; 60]));
        assert_eq!(p.pop_tx(), None);
        let s = p.stats();
        assert_eq!((s.rx_frames, s.tx_frames, s.tx_ring_full, s.tx_bad_size), (2, 2, 1, 1));
    }

    #[test]
    fn mem_port_link_down_drops_and_vanish_errors() {
        let mut p = MemPort::new("m1", 8);
        p.set_link(false);
        assert!(!p.link_up());
        assert!(p.send(&[1; 60]).unwrap());
        p.flush().unwrap();
        assert_eq!(p.tx_pending(), 0);
        assert_eq!(p.stats().tx_dropped, 1);
        p.vanish();
        let e = p.recv_burst(4, &mut |_| {}).unwrap_err();
        assert!(e.is_vanished());
        assert_eq!(e.errno(), Some(libc::ENODEV));
        assert!(p.send(&[1; 60]).unwrap_err().is_vanished());
        assert!(p.flush().unwrap_err().is_vanished());
    }

    /// A burst of frames in their own buffers through the default `send_owned_burst`: each
    /// frame as `send_owned` would take it, in order; refusals counted; after an error the
    /// frame that met it is not counted and the rest are, and every buffer is released once.
    #[test]
    fn send_owned_burst_takes_in_order_and_counts_what_it_refused() {
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        static RELEASED: AtomicUsize = AtomicUsize::new(0);
        unsafe fn release(token: std::ptr::NonNull<std::ffi::c_void>) {
            // SAFETY: made by Box::into_raw below, released once.
            drop(unsafe { Box::from_raw(token.as_ptr().cast::<Vec<u8>>()) });
            RELEASED.fetch_add(1, SeqCst);
        }
        static KIND: ForeignKind = ForeignKind { release, owner: 1 };
        let burst = |fill: &[u8]| {
            let mut b = OwnedBurst::new();
            for &x in fill {
                let mut v = Box::new(vec![x; 60]);
                let data = std::ptr::NonNull::new(v.as_mut_ptr()).unwrap();
                let token = std::ptr::NonNull::new(Box::into_raw(v).cast()).unwrap();
                // SAFETY: the box keeps the bytes alive until `release`, which runs once.
                b.push((unsafe { ForeignFrame::new(data, 60, token, &KIND) }, 0));
            }
            b
        };
        let mut p = MemPort::new("m", 2);
        let mut b = burst(&[1, 2, 3]);
        let (refused, error) = p.send_owned_burst(&mut b);
        assert!(b.is_empty() && error.is_none());
        assert_eq!(refused, 1, "the third frame finds the queue full");
        p.flush().unwrap();
        assert_eq!(
            (p.pop_tx(), p.pop_tx(), p.pop_tx()),
            (Some(vec![1; 60]), Some(vec![2; 60]), None)
        );
        assert_eq!(RELEASED.load(SeqCst), 3, "sent as copies or refused: released");

        p.vanish();
        let mut b = burst(&[4, 5, 6]);
        let (refused, error) = p.send_owned_burst(&mut b);
        assert!(error.is_some_and(|e| e.is_vanished()));
        assert_eq!(refused, 2, "the frames after the one that met the error");
        assert!(b.is_empty());
        assert_eq!(RELEASED.load(SeqCst), 6);
    }

    /// `tx_room` is what `send` will take: it counts down as the transmit queue fills, stays 0
    /// while the far end does not read (a stalled flush moves nothing), and comes back once it
    /// reads again.
    #[test]
    fn tx_room_follows_the_transmit_queue() {
        let mut p = MemPort::new("m", 4);
        assert_eq!(p.tx_room(), 4);
        p.set_tx_stalled(true);
        for left in (0..4).rev() {
            assert!(p.send(&[0; 60]).unwrap());
            assert_eq!(p.tx_room(), left);
        }
        assert!(!p.send(&[0; 60]).unwrap(), "no room: refused");
        p.flush().unwrap();
        assert_eq!((p.tx_room(), p.tx_pending()), (0, 0), "a stalled peer reads nothing");
        p.set_tx_stalled(false);
        p.flush().unwrap();
        assert_eq!((p.tx_room(), p.tx_pending()), (4, 4));
    }
}
