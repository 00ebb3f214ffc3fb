//! Where a shard's switch transmits: its ports' backends, with the emulated peer shown every
//! frame first and, while a capture runs, a copy of what each port took.

use crate::io::{ForeignFrame, ForeignKind, OwnTokens, OwnedBurst};
use crate::runtime::capture::{CaptureRing, Dir};
use crate::runtime::emulated::ToHost;
use crate::runtime::port_io::PortIo;
use crate::runtime::shard_port::ShardPort;
use crate::switch::{Switch, TxSink};

/// Sends what the switch releases into the shard's own ports' backends, and shows the PFC
/// frames among them to the port's emulated peer, if it has one. A shard transmits only on
/// ports it owns: another shard's ports never hold a queued frame here.
///
/// Frames that leave in their own buffers (zero copy) are gathered while the switch transmits
/// on a port and handed to the backend together ([`PortBackend::send_owned_burst`]: DPDK
/// queues them in one pass), not through a call per frame: before any other frame goes to the
/// same port, so the order on the wire is the scheduler's, and when the port's turn ends
/// ([`PortSink::transmit_port`]). A backend that sends its own kind of buffer as it is (DPDK's
/// mbufs, [`PortBackend::own_kind`]) gets those as bare tokens instead
/// ([`PortBackend::send_own_tokens`]): no frame record is written and read back per frame, and
/// the backend copies the burst's pointers into its transmit array at once.
///
/// [`PortBackend::send_owned_burst`]: crate::io::PortBackend::send_owned_burst
/// [`PortBackend::own_kind`]: crate::io::PortBackend::own_kind
/// [`PortBackend::send_own_tokens`]: crate::io::PortBackend::send_own_tokens
pub struct PortSink<'a> {
    /// The shard's ports, by port index.
    pub ports: &'a mut [ShardPort],
    /// Frames in their own buffers waiting to go to `pending_port`, in order.
    pending: OwnedBurst,
    /// Buffers of `pending_port`'s own kind waiting to go to it, in order. At most one of
    /// `pending` and `tokens` holds anything: a frame for the other hands the first over.
    tokens: OwnTokens,
    /// The kind of buffer `pending_port`'s backend sends as it is, if one.
    own: Option<&'static ForeignKind>,
    /// The port `pending` and `tokens` are for (`usize::MAX`: none yet).
    pending_port: usize,
}

impl Drop for PortSink<'_> {
    /// Nothing gathered is left behind (`transmit_port` hands it over already).
    fn drop(&mut self) {
        self.hand_over();
    }
}

impl TxSink for PortSink<'_> {
    fn room(&mut self, port: usize) -> usize {
        match self.ports[port].io_mut() {
            // A vanished interface takes (and loses) everything: nothing will ever drain it.
            Some(io) if io.gone => usize::MAX,
            Some(io) => io.backend.tx_room(),
            None => usize::MAX,
        }
    }

    /// Gathered, for the backend to take with the rest of the port's turn.
    /// Always inlined into the switch's transmit loop: out of line, the call alone cost 15
    /// instructions a frame on the DPDK path (callgrind).
    #[inline(always)]
    fn transmit_owned(&mut self, port: usize, frame: ForeignFrame, at_ns: u64) {
        if port != self.pending_port || self.pending.is_full() || self.tokens.is_full() {
            // A turn sends at most TX_BURST frames on one port, so neither happens within
            // `transmit_port`; a caller that mixes ports still gets its order.
            self.start_gathering(port);
        }
        match self.own {
            Some(kind) if kind.owner == frame.owner() && self.pending.is_empty() => {
                self.tokens.push(frame.into_token());
            }
            _ => self.gather_frame(frame, at_ns),
        }
    }

    fn transmit(&mut self, port: usize, frame: &[u8], at_ns: u64) {
        self.hand_over();
        self.transmit_frame(port, frame, at_ns, None);
    }

    fn pfc_needs_no_room(&mut self, port: usize) -> bool {
        matches!(self.ports[port], ShardPort::Emulated(..))
    }
}

impl<'a> PortSink<'a> {
    /// A sink into `ports` (the shard's, by port index), nothing gathered yet.
    pub fn new(ports: &'a mut [ShardPort]) -> Self {
        PortSink {
            ports,
            pending: OwnedBurst::new(),
            tokens: OwnTokens::new(),
            own: None,
            pending_port: usize::MAX,
        }
    }

    /// Hands over what was gathered and gathers for `port` from now on.
    #[inline(never)]
    fn start_gathering(&mut self, port: usize) {
        self.hand_over();
        self.pending_port = port;
        self.own = self.ports[port].io().and_then(|io| io.backend.own_kind());
    }

    /// A frame gathered as a record: not of the port's own kind (or after one that was not,
    /// whose order it keeps); what was gathered as tokens goes first.
    #[inline(never)]
    fn gather_frame(&mut self, frame: ForeignFrame, at_ns: u64) {
        if !self.tokens.is_empty() {
            self.hand_over();
        }
        if self.pending.is_full() {
            self.hand_over();
        }
        self.pending.push((frame, at_ns));
    }

    /// Hands the gathered frames to their port's backend in one call: one look-up of the
    /// port, one `gone` check. What the backend refused, or what finds it gone, is a transmit
    /// drop as one by one.
    fn hand_over(&mut self) {
        if !self.tokens.is_empty() {
            self.hand_over_tokens();
        }
        if self.pending.is_empty() {
            return;
        }
        let n = self.pending.len() as u64;
        let Some(io) = live_io(&mut self.ports[self.pending_port], n) else {
            // Dropping them releases their buffers.
            self.pending.clear();
            return;
        };
        let (refused, error) = io.backend.send_owned_burst(&mut self.pending);
        io.tx_dropped += refused;
        if let Some(e) = error {
            io.fail(e);
        }
    }
    /// The gathered tokens of a port that is gone (or not this shard's): released.
    #[cold]
    #[inline(never)]
    fn hand_over_gone(&mut self) {
        if let Some(kind) = self.own {
            for &t in &self.tokens {
                // SAFETY: each token was a frame of this kind, owned here since `into_token`.
                unsafe { (kind.release)(t) };
            }
        }
        self.tokens.clear();
    }

    /// [`PortSink::hand_over`] for the gathered tokens: the backend takes them all (queued or
    /// released, what it refused counted as transmit drops), or they are released here when
    /// the port is gone.
    #[inline]
    fn hand_over_tokens(&mut self) {
        let n = self.tokens.len() as u64;
        let Some(io) = live_io(&mut self.ports[self.pending_port], n) else {
            return self.hand_over_gone();
        };
        // SAFETY: every token is a buffer of the backend's own kind (checked as it was
        // gathered, for this port), owned here since `into_token`, and handed over now.
        let refused = unsafe { io.backend.send_own_tokens(&self.tokens) };
        io.tx_dropped += refused;
        self.tokens.clear();
    }

    /// A frame the switch transmits: shown to the port's emulated peer, then handed to the
    /// port; if the port took it and `tap` is a capture of its transmissions, copied there.
    /// Inlined into both sinks, so the plain one (`tap` = `None`) has no capture check.
    #[inline(always)]
    fn transmit_frame(&mut self, port: usize, frame: &[u8], at_ns: u64, tap: Option<&CaptureRing>) {
        if let ShardPort::Emulated(_, em) = &mut self.ports[port] {
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

    /// [`TxSink::transmit_owned`]; true if the port took the frame (in its buffer when the
    /// backend can send that kind, else copied by the backend). Only data frames come here,
    /// which an emulated peer passes on as they are.
    #[inline]
    fn send_owned(&mut self, port: usize, frame: ForeignFrame, _at_ns: u64) -> bool {
        self.hand_over();
        let Some(io) = live_io(&mut self.ports[port], 1) else {
            return false;
        };
        let sent = io.backend.send_owned(frame);
        io.took(sent)
    }

    /// Hands `frame` to the port's backend, and nothing else: what the emulated NIC sends its
    /// host goes here directly. True if the backend took it.
    fn send(&mut self, port: usize, frame: &[u8]) -> bool {
        self.hand_over();
        let Some(io) = live_io(&mut self.ports[port], 1) else {
            return false;
        };
        let sent = io.backend.send(frame);
        io.took(sent)
    }

    /// Lets `port` transmit what the switch allows at `now`. The capture check is made once
    /// here, per port and round, not per frame: without a capture the sink is the plain
    /// `PortSink`, with one a [`Tapped`] wrapper that also copies what the port took.
    #[inline]
    pub fn transmit_port(&mut self, sw: &mut Switch, port: usize, now: u64) -> usize {
        let sent = match self.ports[port].io().and_then(|io| io.tx_tap.clone()) {
            None => sw.transmit(port, now, self),
            Some(tap) => sw.transmit(port, now, &mut Tapped { sink: self, tap: &tap }),
        };
        self.hand_over();
        sent
    }

    /// Sends what the emulated NIC tells its host (back-pressure PFC), captured like any frame
    /// the port sends.
    pub fn send_to_host(&mut self, port: usize, frame: &[u8], now: u64) {
        if self.send(port, frame) {
            if let Some(tap) = self.ports[port].io().and_then(|io| io.tx_tap.as_deref()) {
                tap.record(Dir::Tx, now, frame);
            }
        }
    }
}

/// The port's backend if it can take frames now; None for a port of no backend, or one that
/// is gone, where the `frames` about to be sent count as transmit drops.
#[inline]
fn live_io(port: &mut ShardPort, frames: u64) -> Option<&mut PortIo> {
    let io = port.io_mut()?;
    if io.gone {
        io.tx_dropped += frames;
        return None;
    }
    Some(io)
}

/// [`PortSink`] for a port whose transmissions are being captured: each frame the port's
/// backend takes is also copied into the capture ring, stamped with its departure time. A frame
/// the backend refused was not sent and is not captured.
struct Tapped<'e, 'a> {
    sink: &'e mut PortSink<'a>,
    tap: &'e CaptureRing,
}

impl TxSink for Tapped<'_, '_> {
    fn room(&mut self, port: usize) -> usize {
        self.sink.room(port)
    }

    fn pfc_needs_no_room(&mut self, port: usize) -> bool {
        self.sink.pfc_needs_no_room(port)
    }

    fn transmit(&mut self, port: usize, frame: &[u8], at_ns: u64) {
        self.sink.transmit_frame(port, frame, at_ns, Some(self.tap));
    }

    fn transmit_owned(&mut self, port: usize, frame: ForeignFrame, at_ns: u64) {
        // The buffer is the backend's once sent: copy it first, keep the copy if it was taken.
        let staged = self.tap.stage(Dir::Tx, at_ns, frame.bytes());
        let taken = self.sink.send_owned(port, frame, at_ns);
        self.tap.finish(staged, taken);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{PortBackend, PortError, PortStats};
    use std::sync::{Arc, Mutex};

    /// What a port's backend was handed, call by call: `Copy(frame)` for `send`, `Burst(frames)`
    /// for `send_owned_burst`, `Tokens(frames)` for `send_own_tokens`.
    #[derive(Debug, PartialEq)]
    enum Call {
        Copy(u8),
        Burst(Vec<u8>),
        Tokens(Vec<u8>),
    }

    /// A backend that records its calls (frames named by their first byte). With `own` set
    /// it sends buffers of kind `OWN` as they are (as DPDK its mbufs): takes the first `own`
    /// tokens of each hand-over and refuses the rest.
    struct Recorder {
        calls: Arc<Mutex<Vec<Call>>>,
        own: Option<usize>,
    }

    impl Recorder {
        fn plain(calls: &Arc<Mutex<Vec<Call>>>) -> Box<Recorder> {
            Box::new(Recorder {
                calls: calls.clone(),
                own: None,
            })
        }
        fn owner(calls: &Arc<Mutex<Vec<Call>>>, room: usize) -> Box<Recorder> {
            Box::new(Recorder {
                calls: calls.clone(),
                own: Some(room),
            })
        }
    }

    impl PortBackend for Recorder {
        fn recv_burst(&mut self, _max: usize, _f: &mut dyn FnMut(&[u8])) -> Result<usize, PortError> {
            Ok(0)
        }
        fn send(&mut self, frame: &[u8]) -> Result<bool, PortError> {
            self.calls.lock().unwrap().push(Call::Copy(frame[0]));
            Ok(true)
        }
        fn send_owned_burst(&mut self, frames: &mut OwnedBurst) -> (u64, Option<PortError>) {
            let firsts = frames.drain(..).map(|(f, _)| f.bytes()[0]).collect();
            self.calls.lock().unwrap().push(Call::Burst(firsts));
            (0, None)
        }
        fn own_kind(&self) -> Option<&'static ForeignKind> {
            self.own.map(|_| &OWN)
        }
        unsafe fn send_own_tokens(&mut self, tokens: &[std::ptr::NonNull<std::ffi::c_void>]) -> u64 {
            // SAFETY: tokens of `OWN`, boxes of `lent_as`, handed over: read, then released.
            let firsts = tokens
                .iter()
                .map(|t| unsafe { t.cast::<Vec<u8>>().as_ref()[0] })
                .collect();
            self.calls.lock().unwrap().push(Call::Tokens(firsts));
            for &t in tokens {
                // SAFETY: each token was handed over here, and is released once.
                unsafe { release_counted(t) };
            }
            tokens.len().saturating_sub(self.own.unwrap_or(0)) as u64
        }
        fn tx_room(&mut self) -> usize {
            64
        }
        fn flush(&mut self) -> Result<(), PortError> {
            Ok(())
        }
        fn link_up(&mut self) -> bool {
            true
        }
        fn name(&self) -> &str {
            "recorder"
        }
        fn stats(&mut self) -> PortStats {
            PortStats::default()
        }
    }

    /// Buffers of the counted kinds (`OWN`, `OTHER`) made and not yet released.
    static LIVE: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);
    /// Held by the tests that make buffers of the counted kinds, so each sees only its own.
    static COUNTING: Mutex<()> = Mutex::new(());

    unsafe fn release(token: std::ptr::NonNull<std::ffi::c_void>) {
        // SAFETY: made by Box::into_raw in `lent_as`, released once.
        drop(unsafe { Box::from_raw(token.as_ptr().cast::<Vec<u8>>()) });
    }
    unsafe fn release_counted(token: std::ptr::NonNull<std::ffi::c_void>) {
        // SAFETY: as `release`.
        unsafe { release(token) };
        LIVE.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
    static PLAIN: crate::io::ForeignKind = crate::io::ForeignKind { release, owner: 1 };
    /// The kind of buffer an owning [`Recorder`] sends as it is.
    static OWN: crate::io::ForeignKind = crate::io::ForeignKind {
        release: release_counted,
        owner: 2,
    };
    /// Another kind, which it copies.
    static OTHER: crate::io::ForeignKind = crate::io::ForeignKind {
        release: release_counted,
        owner: 3,
    };

    /// A 60-byte frame starting with `id`, in a buffer of its own (released by dropping it).
    fn lent(id: u8) -> ForeignFrame {
        lent_as(id, &PLAIN)
    }

    fn lent_as(id: u8, kind: &'static crate::io::ForeignKind) -> ForeignFrame {
        let mut v = Box::new(vec![id; 60]);
        let data = std::ptr::NonNull::new(v.as_mut_ptr()).unwrap();
        let token = std::ptr::NonNull::new(Box::into_raw(v).cast()).unwrap();
        if kind.owner != PLAIN.owner {
            LIVE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        // SAFETY: the box keeps the bytes alive until `release`, which runs once.
        unsafe { ForeignFrame::new(data, 60, token, kind) }
    }

    /// Frames in their own buffers reach the backend together, but never after a frame sent
    /// as a copy behind them: lent 1, 2, copied 3, lent 4, 5 on one port arrive as the bursts
    /// [1, 2], then 3, then [4, 5] (handed over when the sink goes); a frame for another port
    /// hands the gathered ones over first.
    #[test]
    fn lent_frames_reach_the_backend_in_bursts_in_order() {
        let calls = [(); 2].map(|_| Arc::new(Mutex::new(Vec::new())));
        let mut ports: Vec<ShardPort> = calls
            .iter()
            .enumerate()
            .map(|(i, c)| ShardPort::Direct(PortIo::new(i, i as u16, Recorder::plain(c))))
            .collect();
        let mut sink = PortSink::new(&mut ports);
        sink.transmit_owned(0, lent(1), 10);
        sink.transmit_owned(0, lent(2), 20);
        assert!(calls[0].lock().unwrap().is_empty(), "gathered, not sent one by one");
        sink.transmit(0, &[3; 60], 30);
        sink.transmit_owned(0, lent(4), 40);
        sink.transmit_owned(0, lent(5), 50);
        sink.transmit_owned(1, lent(6), 60);
        drop(sink);
        assert_eq!(
            *calls[0].lock().unwrap(),
            [Call::Burst(vec![1, 2]), Call::Copy(3), Call::Burst(vec![4, 5])]
        );
        assert_eq!(*calls[1].lock().unwrap(), [Call::Burst(vec![6])]);
    }

    /// A backend that sends its own buffers as they are gets them as tokens, a burst a call,
    /// and the order on the wire holds across kinds: own 1, 2, another kind's 3, own 4 (after
    /// 3, so with it), a copy 5, own 6 arrive as tokens [1, 2], the burst [3, 4], 5, tokens
    /// [6]. What it refuses counts as transmit drops; every buffer is released once.
    #[test]
    fn own_buffers_reach_the_backend_as_tokens_in_order() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut ports = vec![ShardPort::Direct(PortIo::new(0, 0, Recorder::owner(&calls, 1)))];
        let _one_at_a_time = COUNTING.lock().unwrap_or_else(|e| e.into_inner());
        let mut sink = PortSink::new(&mut ports);
        sink.transmit_owned(0, lent_as(1, &OWN), 0);
        sink.transmit_owned(0, lent_as(2, &OWN), 0);
        sink.transmit_owned(0, lent_as(3, &OTHER), 0);
        sink.transmit_owned(0, lent_as(4, &OWN), 0);
        sink.transmit(0, &[5; 60], 0);
        sink.transmit_owned(0, lent_as(6, &OWN), 0);
        drop(sink);
        assert_eq!(
            *calls.lock().unwrap(),
            [
                Call::Tokens(vec![1, 2]),
                Call::Burst(vec![3, 4]),
                Call::Copy(5),
                Call::Tokens(vec![6])
            ]
        );
        // Room for one a hand-over: 2 of [1, 2] refused.
        assert_eq!(ports[0].io().unwrap().tx_dropped, 1);
        assert_eq!(
            LIVE.load(std::sync::atomic::Ordering::Relaxed),
            0,
            "every buffer released"
        );
    }

    /// Tokens gathered for a port that is gone are released, each a transmit drop.
    #[test]
    fn own_buffers_for_a_port_that_is_gone_are_released() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut ports = vec![ShardPort::Direct(PortIo::new(0, 0, Recorder::owner(&calls, 32)))];
        ports[0].io_mut().unwrap().gone = true;
        let _one_at_a_time = COUNTING.lock().unwrap_or_else(|e| e.into_inner());
        let mut sink = PortSink::new(&mut ports);
        for id in 1..=3 {
            sink.transmit_owned(0, lent_as(id, &OWN), 0);
        }
        drop(sink);
        assert!(calls.lock().unwrap().is_empty(), "nothing reached the backend");
        assert_eq!(ports[0].io().unwrap().tx_dropped, 3);
        assert_eq!(
            LIVE.load(std::sync::atomic::Ordering::Relaxed),
            0,
            "every buffer released"
        );
    }

    /// A port that is gone takes nothing: a gathered burst for it counts every frame as a
    /// transmit drop (as one by one), and releases their buffers.
    #[test]
    fn a_burst_for_a_port_that_is_gone_counts_its_frames_dropped() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut ports = vec![ShardPort::Direct(PortIo::new(0, 0, Recorder::plain(&calls)))];
        ports[0].io_mut().unwrap().gone = true;
        let mut sink = PortSink::new(&mut ports);
        for id in 1..=3 {
            sink.transmit_owned(0, lent(id), 0);
        }
        sink.transmit(0, &[4; 60], 0);
        drop(sink);
        assert!(calls.lock().unwrap().is_empty(), "nothing reached the backend");
        assert_eq!(ports[0].io().unwrap().tx_dropped, 4);
    }
}
