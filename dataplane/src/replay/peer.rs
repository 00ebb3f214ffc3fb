//! The device at the other end of an ingress link, as replay models it: it sends the capture's
//! frames at their timestamps, never faster than the link, and honours the PFC the switch sends
//! it (like a RoCE NIC): a paused priority's frames wait, in order, and none is dropped.

use super::pcapio::{InputFrame, PcapInput};
use crate::ingress::classify::Classifier;
use crate::wire::{self, pfc as wire_pfc};
use std::collections::VecDeque;

/// How much a peer holds back before it stops reading its capture (then all its priorities
/// wait, like a host whose send buffers are full). Bounds replay memory per port.
pub const PEER_HOLD_LIMIT_BYTES: u64 = 64 << 20;

struct Held {
    /// Time the frame may leave at the earliest (capture time, relative to the replay start).
    ts: u64,
    data: Vec<u8>,
}

pub struct Peer {
    input: Option<PcapInput>,
    lookahead: Option<Held>,
    /// Per priority, plus index 8 for MAC control frames (never paused).
    held: [VecDeque<Held>; 9],
    held_bytes: u64,
    link_free_ps: u64,
    speed_bps: u64,
    honours_pfc: bool,
    /// Cable propagation plus the peer's response time after a PFC frame is received.
    reaction_ns: u64,
    /// Pause changes on their way: (takes effect at, class-enable vector, pause times).
    pending: VecDeque<(u64, u8, [u16; 8])>,
    paused_until: [u64; 8],
    base_ns: u64,
    pub frames_sent: u64,
    /// Frames the capture held only in part (snap length), counted as it is read: kept here
    /// because the input is dropped at its end.
    pub skipped_snapped: u64,
}

impl Peer {
    pub fn new(
        input: PcapInput,
        base_ns: u64,
        speed_bps: u64,
        cable_m: f64,
        response_quanta: u16,
        honours_pfc: bool,
    ) -> Self {
        let propagation_ns = (cable_m * 5.0).round() as u64;
        let mut peer = Peer {
            input: Some(input),
            lookahead: None,
            held: Default::default(),
            held_bytes: 0,
            link_free_ps: 0,
            speed_bps,
            honours_pfc,
            reaction_ns: propagation_ns + wire_pfc::quanta_to_ns(response_quanta, speed_bps),
            pending: VecDeque::new(),
            paused_until: [0; 8],
            base_ns,
            frames_sent: 0,
            skipped_snapped: 0,
        };
        peer.refill();
        peer
    }

    fn refill(&mut self) {
        if self.lookahead.is_none() {
            if let Some(input) = self.input.as_mut() {
                let frame = input.next_frame();
                self.skipped_snapped = input.skipped_snapped;
                match frame {
                    Some(InputFrame { ts_ns, data }) => {
                        self.lookahead = Some(Held {
                            ts: ts_ns.saturating_sub(self.base_ns),
                            data,
                        });
                    }
                    None => self.input = None,
                }
            }
        }
    }

    pub fn input(&self) -> Option<&PcapInput> {
        self.input.as_ref()
    }

    /// Frames read from the capture not yet sent.
    pub fn is_done(&self) -> bool {
        self.input.is_none()
            && self.lookahead.is_none()
            && self.held_bytes == 0
            && self.held.iter().all(|q| q.is_empty())
    }

    /// The switch transmitted a frame toward this peer, starting at `at_ns` and lasting
    /// `ser_ns`: if it is PFC, schedule its effect.
    pub fn on_frame_from_switch(&mut self, frame: &[u8], at_ns: u64, ser_ns: u64) {
        if !self.honours_pfc {
            return;
        }
        if let Ok(wire::MacControl::Pfc { enable, times }) = wire_pfc::decode_mac_control(frame) {
            // The frame reaches the peer after its serialisation and the cable; the peer then
            // needs its response time before it stops. Its pause timer is counted from then,
            // which errs (by the response time) on the side of pausing longer.
            self.pending
                .push_back((at_ns + ser_ns + self.reaction_ns, enable, times));
        }
    }

    fn apply_pending(&mut self, now: u64) {
        while let Some(&(at, enable, times)) = self.pending.front() {
            if at > now {
                break;
            }
            self.pending.pop_front();
            for (prio, &quanta) in times.iter().enumerate() {
                if enable & (1 << prio) != 0 {
                    self.paused_until[prio] = at + wire_pfc::quanta_to_ns(quanta, self.speed_bps);
                }
            }
        }
    }

    fn class_of(classifier: &Classifier, data: &[u8]) -> usize {
        match wire::parse(data, usize::MAX) {
            Ok(info) if info.is_mac_control() => 8,
            Ok(info) => classifier.trusted_tc(&info) as usize & 7,
            Err(_) => 0,
        }
    }

    /// Moves capture frames whose time has come into the per-priority queues.
    fn admit_arrivals(&mut self, now: u64, classifier: &Classifier) {
        loop {
            self.refill();
            let Some(la) = self.lookahead.as_ref() else { return };
            if la.ts > now || self.held_bytes >= PEER_HOLD_LIMIT_BYTES {
                return;
            }
            let f = self.lookahead.take().expect("checked");
            let class = Self::class_of(classifier, &f.data);
            self.held_bytes += f.data.len() as u64;
            self.held[class].push_back(f);
        }
    }

    fn link_free_ns(&self) -> u64 {
        self.link_free_ps.div_ceil(1000)
    }

    /// When the head of queue `class` may leave, given the state at `now`.
    fn ready_time(&self, class: usize, now: u64) -> Option<u64> {
        let head = self.held[class].front()?;
        let mut t = head.ts.max(self.link_free_ns()).max(now);
        if class < 8 && self.paused_until[class] > t {
            t = self.paused_until[class];
        }
        Some(t)
    }

    /// The next frame that leaves at exactly `now` (or earlier), oldest capture time first.
    pub fn pop_due(&mut self, now: u64, classifier: &Classifier) -> Option<(Vec<u8>, u64)> {
        self.apply_pending(now);
        self.admit_arrivals(now, classifier);
        let mut best: Option<(u64, u64, usize)> = None; // (ready, ts, class)
        for class in 0..9 {
            if let Some(t) = self.ready_time(class, now) {
                let ts = self.held[class].front().map_or(0, |h| h.ts);
                if t <= now && best.is_none_or(|(bt, bts, _)| (t, ts) < (bt, bts)) {
                    best = Some((t, ts, class));
                }
            }
        }
        let (_, _, class) = best?;
        let f = self.held[class].pop_front().expect("ready implies non-empty");
        self.held_bytes -= f.data.len() as u64;
        let start_ps = (now * 1000).max(self.link_free_ps);
        self.link_free_ps = start_ps + crate::switch::ser_ps(f.data.len(), self.speed_bps);
        self.frames_sent += 1;
        Some((f.data, now))
    }

    /// The next time this peer has something to do.
    pub fn next_event(&self, now: u64) -> Option<u64> {
        let mut next: Option<u64> = None;
        let mut at = |t: u64| next = Some(next.map_or(t, |n: u64| n.min(t)));
        if let Some(&(t, _, _)) = self.pending.front() {
            at(t.max(now));
        }
        if let Some(la) = self.lookahead.as_ref() {
            if self.held_bytes < PEER_HOLD_LIMIT_BYTES {
                at(la.ts.max(now));
            }
        }
        for class in 0..9 {
            if let Some(t) = self.ready_time(class, now) {
                at(t);
            }
        }
        next
    }
}
