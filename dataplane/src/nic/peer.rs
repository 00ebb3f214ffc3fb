//! The far end of a link whose peer is software, modelled as a RoCE NIC's transmit side: frames
//! cross the wire one after another at the link's line rate, and a priority the switch paused
//! (from when its PFC frame would reach the NIC and the NIC would react) waits, in order, while
//! the other priorities pass. Nothing is ever dropped here.
//!
//! One model, two users, so they cannot drift apart:
//! * replay (`replay::Peer`) feeds it a capture's frames at their timestamps and asks, in virtual
//!   time, which frame leaves exactly now;
//! * `rocesw run` (`runtime::emulated`) feeds it the frames the switch reads from a software
//!   port's receive ring (a veth, a tap, a capture file): that ring is the peer's transmit
//!   queue, so frames cross the emulated wire only from when the switch reads them, never
//!   faster than line rate, however fast the host wrote them while the switch was not
//!   scheduled. Without this the switch would account at once what a real wire would have
//!   spread out, and no headroom covers a descheduled switch.
//!
//! The model holds frames of any representation `F` (replay: owned bytes; real time: an index
//! into a buffer allocated at start-up, so the packet path does not allocate) plus their length.

use crate::pfc::PauseState;
use crate::wire::{self, pfc as wire_pfc};
use std::collections::VecDeque;

/// Index of the queue for MAC control frames (never paused), after the eight priorities.
pub const MAC_CONTROL_CLASS: usize = 8;

struct Held<F> {
    /// Time the frame may leave at the earliest.
    ts: u64,
    len: u32,
    frame: F,
}

/// What an emulated peer held back because the switch paused its priority: kept apart from
/// the switch's own counters, because those frames were never in the switch's buffer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerCounters {
    /// Frames, per priority, that were waiting here while their priority was paused.
    pub held_frames: [u64; 8],
    /// The total time those frames spent here, per priority (mean = `held_ns / held_frames`).
    pub held_ns: [u64; 8],
    /// Polls where the peer's store was full, so the port was not read (the host's own queue
    /// then fills and, for a rocegen host, its PFC handling stops it too).
    pub stalled_reads: u64,
}

/// An emulated link as seen from its far end: per-priority transmit queues, the wire's pacing
/// and the pause state the switch's PFC frames set.
pub struct EmulatedLink<F> {
    /// Per priority, plus [`MAC_CONTROL_CLASS`].
    held: [VecDeque<Held<F>>; 9],
    held_bytes: u64,
    /// `held_bytes` per queue.
    held_bytes_of: [u64; 9],
    /// When the wire is free, as whole nanoseconds plus picoseconds (< 1000): exact as the
    /// serialisation times add up, without a picosecond clock that would wrap after 2^64 ps
    /// (213.5 days of replay time), as the switch's own link clock keeps it.
    link_free_ns: u64,
    link_free_sub_ps: u64,
    speed_bps: u64,
    honours_pfc: bool,
    /// Cable propagation plus the peer's response time after a PFC frame is received.
    reaction_ns: u64,
    /// Pause changes on their way: (takes effect at, class-enable vector, pause times).
    pending: VecDeque<(u64, u8, [u16; 8])>,
    /// The pauses in effect, as the switch's own egress keeps them.
    pause: PauseState,
    /// Frames that have left for the switch.
    pub frames_sent: u64,
    /// What the switch's PFC held back here.
    pub counters: PeerCounters,
}

impl<F> EmulatedLink<F> {
    /// A link at `speed_bps` over `cable_m` metres (5 ns/m) to a peer that reacts to PFC
    /// `response_quanta` after receiving it (802.3 31B.3.7). `capacity` frames per queue are
    /// reserved up front (0 for none) so a bounded user never allocates later.
    pub fn new(speed_bps: u64, cable_m: f64, response_quanta: u16, honours_pfc: bool, capacity: usize) -> Self {
        let propagation_ns = (cable_m * 5.0).round() as u64;
        EmulatedLink {
            held: std::array::from_fn(|_| VecDeque::with_capacity(capacity)),
            held_bytes: 0,
            held_bytes_of: [0; 9],
            link_free_ns: 0,
            link_free_sub_ps: 0,
            speed_bps,
            honours_pfc,
            reaction_ns: propagation_ns + wire_pfc::quanta_to_ns(response_quanta, speed_bps),
            pending: VecDeque::with_capacity(if capacity > 0 { 64 } else { 0 }),
            pause: PauseState::default(),
            frames_sent: 0,
            counters: PeerCounters::default(),
        }
    }

    /// Line rate of the link, bits per second.
    pub fn speed_bps(&self) -> u64 {
        self.speed_bps
    }

    /// Bytes waiting to cross the link.
    pub fn held_bytes(&self) -> u64 {
        self.held_bytes
    }

    /// Bytes waiting to cross the link in queue `class` (a priority, or [`MAC_CONTROL_CLASS`]).
    pub fn held_bytes_of(&self, class: usize) -> u64 {
        self.held_bytes_of[class]
    }

    /// Whether the switch's PFC holds priority `prio` at `now` (as far as its frames have
    /// taken effect by the last [`Self::pop`]).
    pub fn is_paused(&self, prio: usize, now: u64) -> bool {
        self.pause.is_paused(prio & 7, now)
    }

    /// Frames waiting to cross the link.
    pub fn held_frames(&self) -> usize {
        self.held.iter().map(VecDeque::len).sum()
    }

    /// Whether no frame waits to cross the link.
    pub fn is_empty(&self) -> bool {
        self.held.iter().all(VecDeque::is_empty)
    }

    /// The queue a frame waits in: its priority as the trust map of the port it goes into sees
    /// it, or
    /// [`MAC_CONTROL_CLASS`]. Unparseable frames go with priority 0 (the switch will count them).
    pub fn class_of(maps: &crate::ingress::classify::PortMaps, data: &[u8]) -> usize {
        match wire::parse(data, usize::MAX) {
            Ok(info) if info.is_mac_control() => MAC_CONTROL_CLASS,
            Ok(info) => maps.trusted_tc(&info) as usize & 7,
            Err(_) => 0,
        }
    }

    /// Queues a frame of `len` bytes in `class` that may leave from `ts` on.
    pub fn push(&mut self, class: usize, ts: u64, len: usize, frame: F) {
        self.held_bytes += len as u64;
        self.held_bytes_of[class] += len as u64;
        self.held[class].push_back(Held {
            ts,
            len: len as u32,
            frame,
        });
    }

    /// The switch transmitted `frame` toward this peer, starting at `at_ns` and lasting
    /// `ser_ns`: if it is PFC, schedule its effect, and return its enable vector and times
    /// (None for any other frame, or a peer that ignores PFC).
    pub fn on_frame_from_switch(&mut self, frame: &[u8], at_ns: u64, ser_ns: u64) -> Option<(u8, [u16; 8])> {
        if !self.honours_pfc {
            return None;
        }
        let Ok(wire::MacControl::Pfc { enable, times }) = wire_pfc::decode_mac_control(frame) else {
            return None;
        };
        // The frame reaches the peer after its serialisation and the cable; the peer then
        // needs its response time before it stops. Its pause timer is counted from then,
        // which errs (by the response time) on the side of pausing longer.
        self.pending
            .push_back((at_ns + ser_ns + self.reaction_ns, enable, times));
        Some((enable, times))
    }

    fn apply_pending(&mut self, now: u64) {
        while let Some(&(at, enable, times)) = self.pending.front() {
            if at > now {
                break;
            }
            self.pending.pop_front();
            for (prio, &quanta) in times.iter().enumerate() {
                if enable & (1 << prio) != 0 {
                    self.pause.set(prio, at, wire_pfc::quanta_to_ns(quanta, self.speed_bps));
                }
            }
        }
    }

    fn link_free_ns(&self) -> u64 {
        self.link_free_ns + u64::from(self.link_free_sub_ps > 0)
    }

    /// When the head of queue `class` may leave at the earliest.
    fn ready_time(&self, class: usize) -> Option<u64> {
        let head = self.held[class].front()?;
        let mut t = head.ts.max(self.link_free_ns());
        if class < 8 && self.pause.until(class) > t {
            t = self.pause.until(class);
        }
        Some(t)
    }

    /// The cable delay plus the peer's response time: how long a PFC frame takes to act.
    pub fn reaction_ns(&self) -> u64 {
        self.reaction_ns
    }

    /// The next frame that crosses the link by `now`, oldest first, with the time its first
    /// bit reaches the switch.
    ///
    /// `catch_up_ns` is how far before `now` a departure may lie. Replay calls at every instant
    /// something happens, so a frame always leaves exactly at `now` (0). The real-time path
    /// polls when the OS lets it: a frame that would have started crossing since the last poll
    /// leaves at that earlier instant, so the link keeps its line rate whatever the poll
    /// interval. It looks back no more than the peer's reaction time ([`Self::reaction_ns`])
    /// at once: the switch sends PFC only after the frames of a call are in, so a longer
    /// catch-up would let more arrive unpaused than a NIC could send before obeying (what
    /// headroom is sized for); the worker plays a longer gap through in such steps.
    pub fn pop(&mut self, now: u64, catch_up_ns: u64) -> Option<(F, usize, u64)> {
        self.apply_pending(now);
        let floor = now.saturating_sub(catch_up_ns);
        let mut best: Option<(u64, u64, usize)> = None; // (departure, ts, class)
        for class in 0..9 {
            if let Some(t) = self.ready_time(class) {
                let t = t.max(floor);
                let ts = self.held[class].front().map_or(0, |h| h.ts);
                if t <= now && best.is_none_or(|(bt, bts, _)| (t, ts) < (bt, bts)) {
                    best = Some((t, ts, class));
                }
            }
        }
        let (departure, _, class) = best?;
        // When the frame could start but for the wire and the poll (whole nanoseconds).
        let head_ts = self.held[class].front().map_or(0, |h| h.ts);
        let pause_end = if class < 8 { self.pause.until(class) } else { 0 };
        let unblocked = head_ts.max(pause_end);
        let f = self.held[class].pop_front().expect("ready implies non-empty");
        if class < 8 && self.pause.until(class) > f.ts {
            // It was waiting when its priority's pause ended: held, for its time here.
            self.counters.held_frames[class] += 1;
            self.counters.held_ns[class] += departure - f.ts;
        }
        self.held_bytes -= u64::from(f.len);
        self.held_bytes_of[class] -= u64::from(f.len);
        // The frame starts at the later of that and the wire's free time, kept to the
        // picosecond: `departure` is that rounded up to whole nanoseconds (the switch's clock),
        // and starting the wire's next frame from it would stretch every gap to whole
        // nanoseconds (8 ns a 64-byte frame at 100G instead of 7.04).
        // Only a departure later than that (the poll's floor: a frame leaves no earlier than
        // `catch_up_ns` before `now`) starts it on a whole nanosecond.
        if (unblocked, 0) > (self.link_free_ns, self.link_free_sub_ps) {
            (self.link_free_ns, self.link_free_sub_ps) = (unblocked, 0);
        }
        if departure > self.link_free_ns() {
            (self.link_free_ns, self.link_free_sub_ps) = (departure, 0);
        }
        let ps = self.link_free_sub_ps + crate::egress::link::ser_ps(f.len as usize, self.speed_bps);
        self.link_free_ns += ps / 1000;
        self.link_free_sub_ps = ps % 1000;
        self.frames_sent += 1;
        Some((f.frame, f.len as usize, departure))
    }

    /// The next time this link has something to do (a pause change, a frame that may leave).
    pub fn next_event(&self, now: u64) -> Option<u64> {
        let mut next: Option<u64> = None;
        let mut at = |t: u64| next = Some(next.map_or(t, |n: u64| n.min(t)));
        if let Some(&(t, _, _)) = self.pending.front() {
            at(t.max(now));
        }
        for class in 0..9 {
            if let Some(t) = self.ready_time(class) {
                at(t.max(now));
            }
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::encode_pfc;

    const G: u64 = 1_000_000_000;

    #[test]
    fn frames_cross_at_line_rate_even_when_polled_late() {
        // 1G: a 1000-byte frame takes (1000 + 24) × 8 ns.
        let mut l: EmulatedLink<u32> = EmulatedLink::new(G, 0.0, 0, true, 16);
        for i in 0..4 {
            l.push(3, 0, 1000, i);
        }
        // Polled only at 20 µs: all four would have left by then, each after the other.
        let mut got = Vec::new();
        while let Some((f, _, at)) = l.pop(20_000, u64::MAX) {
            got.push((f, at));
        }
        assert_eq!(got, vec![(0, 0), (1, 8192), (2, 16384)]);
        assert_eq!(l.held_frames(), 1, "the fourth has not started crossing by 20 µs");
        assert_eq!(l.pop(24_575, u64::MAX).map(|x| x.0), None);
        assert_eq!(l.pop(24_576, u64::MAX).map(|x| x.0), Some(3));
    }

    /// Back-to-back frames keep the wire's exact gap: 64-byte frames at 100G take 7.04 ns
    /// each (88 bytes with preamble and gap), so 1000 of them span 7040 ns, not 8000, though
    /// each departure is a whole nanosecond.
    #[test]
    fn back_to_back_frames_keep_the_picoseconds() {
        let mut l: EmulatedLink<u32> = EmulatedLink::new(100 * G, 0.0, 0, true, 1024);
        for i in 0..1001 {
            l.push(3, i, 64, i as u32);
        }
        // The real-time way: polled late, catching up.
        let mut at = Vec::new();
        while let Some((_, _, t)) = l.pop(1_000_000, u64::MAX) {
            at.push(t);
        }
        assert_eq!(at.len(), 1001);
        // Replay's way: asked at each instant the next may leave.
        let mut l2: EmulatedLink<u32> = EmulatedLink::new(100 * G, 0.0, 0, true, 1024);
        for i in 0..1001 {
            l2.push(3, i, 64, i as u32);
        }
        let mut at2 = Vec::new();
        let mut now = 0;
        while at2.len() < 1001 {
            match l2.pop(now, 0) {
                Some((_, _, t)) => at2.push(t),
                None => now = l2.next_event(now).unwrap(),
            }
        }
        for got in [&at, &at2] {
            assert_eq!(got[1000] - got[0], 7040, "1000 gaps of 7.04 ns");
            assert!(got.windows(2).all(|w| w[1] - w[0] == 7 || w[1] - w[0] == 8), "{got:?}");
        }
    }

    #[test]
    fn catch_up_reaches_back_no_further_than_asked() {
        let mut l: EmulatedLink<u32> = EmulatedLink::new(G, 0.0, 0, true, 16);
        for i in 0..4 {
            l.push(3, 0, 1000, i);
        }
        // Polled at 20 µs, catching up 10 µs: the first leaves at 10 µs, the next 8192 ns on.
        let (_, _, at) = l.pop(20_000, 10_000).unwrap();
        assert_eq!(at, 10_000);
        let (_, _, at) = l.pop(20_000, 10_000).unwrap();
        assert_eq!(at, 18_192);
        assert!(l.pop(20_000, 10_000).is_none());
        // Without catch-up (replay), a frame leaves exactly now.
        assert_eq!(l.pop(30_000, 0).unwrap().2, 30_000);
    }

    #[test]
    fn a_paused_priority_waits_in_order_and_others_pass() {
        let mut l: EmulatedLink<u32> = EmulatedLink::new(G, 0.0, 0, true, 16);
        let mut times = [0u16; 8];
        times[3] = 100; // 100 × 512 ns
        let mut pfc = [0u8; 64];
        let n = encode_pfc(&mut pfc, [2, 0, 0, 0, 0, 1], 1 << 3, times);
        l.on_frame_from_switch(&pfc[..n], 0, 0);
        l.push(3, 0, 100, 30);
        l.push(3, 0, 100, 31);
        l.push(0, 0, 100, 0);
        let (f, _, at) = l.pop(10, u64::MAX).unwrap();
        assert_eq!((f, at), (0, 0), "priority 0 passes the paused priority 3");
        assert!(l.pop(51_199, u64::MAX).is_none(), "priority 3 is paused for 51.2 µs");
        let (f, _, at) = l.pop(60_000, u64::MAX).unwrap();
        assert_eq!((f, at), (30, 51_200));
        assert_eq!(l.pop(60_000, u64::MAX).unwrap().0, 31);
        assert_eq!(l.counters.held_frames[3], 2);
        // 30 left at 51.2 µs, 31 one 100-byte frame (992 ns) later.
        assert_eq!(l.counters.held_ns[3], 51_200 + 51_200 + 992);
        assert_eq!(l.counters.held_frames[0], 0);
    }
}
