//! The device at the other end of an ingress link, as replay models it: it sends the capture's
//! frames at their timestamps, never faster than the link, and honours the PFC the switch sends
//! it (like a RoCE NIC): a paused priority's frames wait, in order, and none is dropped.
//!
//! The link and the NIC's PFC behaviour are `nic::peer::EmulatedLink`, the same model
//! `rocesw run` puts in front of software ports; this adds only the capture it reads.

use super::pcapio::{InputFrame, PcapInput};
use crate::ingress::classify::PortMaps;
use crate::nic::peer::EmulatedLink;

/// How much a peer holds back before it stops reading its capture (then all its priorities
/// wait, like a host whose send buffers are full). Bounds replay memory per port.
pub const PEER_HOLD_LIMIT_BYTES: u64 = 64 << 20;

/// The sender on one input port: the capture's frames, in time order, through an emulated link that
/// honours the switch's PFC.
pub struct Peer {
    input: Option<PcapInput>,
    /// The next capture frame: (time it may leave, relative to the replay start; bytes).
    lookahead: Option<(u64, Vec<u8>)>,
    link: EmulatedLink<Vec<u8>>,
    base_ns: u64,
    /// Frames the capture held only in part (snap length), counted as it is read: kept here
    /// because the input is dropped at its end.
    pub skipped_snapped: u64,
}

impl Peer {
    /// A peer sending `input` over a link of `speed_bps` and `cable_m` metres; `base_ns` is the
    /// capture time that is the replay's zero, and it answers PFC `response_quanta` later if
    /// `honours_pfc`.
    pub fn new(
        input: PcapInput,
        base_ns: u64,
        speed_bps: u64,
        cable_m: f64,
        response_quanta: u16,
        honours_pfc: bool,
    ) -> Self {
        let mut peer = Peer {
            input: Some(input),
            lookahead: None,
            link: EmulatedLink::new(speed_bps, cable_m, response_quanta, honours_pfc, 0),
            base_ns,
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
                        self.lookahead = Some((ts_ns.saturating_sub(self.base_ns), data));
                    }
                    None => self.input = None,
                }
            }
        }
    }

    /// The capture still being read; `None` once it is exhausted.
    pub fn input(&self) -> Option<&PcapInput> {
        self.input.as_ref()
    }

    /// Frames sent so far.
    pub fn frames_sent(&self) -> u64 {
        self.link.frames_sent
    }

    /// Frames read from the capture not yet sent.
    pub fn is_done(&self) -> bool {
        self.input.is_none() && self.lookahead.is_none() && self.link.held_bytes() == 0 && self.link.is_empty()
    }

    /// The switch transmitted a frame toward this peer, starting at `at_ns` and lasting
    /// `ser_ns`: if it is PFC, schedule its effect.
    pub fn on_frame_from_switch(&mut self, frame: &[u8], at_ns: u64, ser_ns: u64) {
        self.link.on_frame_from_switch(frame, at_ns, ser_ns);
    }

    /// Moves capture frames whose time has come into the per-priority queues.
    fn admit_arrivals(&mut self, now: u64, maps: &PortMaps) {
        loop {
            self.refill();
            let Some((ts, _)) = self.lookahead.as_ref() else { return };
            if *ts > now || self.link.held_bytes() >= PEER_HOLD_LIMIT_BYTES {
                return;
            }
            let (ts, data) = self.lookahead.take().expect("checked");
            let class = EmulatedLink::<Vec<u8>>::class_of(maps, &data);
            self.link.push(class, ts, data.len(), data);
        }
    }

    /// The next frame that leaves at exactly `now` (or earlier), oldest capture time first;
    /// `maps`: those of the switch port it feeds, which decide the priority a pause holds.
    pub fn pop_due(&mut self, now: u64, maps: &PortMaps) -> Option<(Vec<u8>, u64)> {
        self.admit_arrivals(now, maps);
        self.link.pop(now, 0).map(|(data, _, at)| (data, at))
    }

    /// The next time this peer has something to do.
    pub fn next_event(&self, now: u64) -> Option<u64> {
        let la = self
            .lookahead
            .as_ref()
            .filter(|_| self.link.held_bytes() < PEER_HOLD_LIMIT_BYTES)
            .map(|(ts, _)| (*ts).max(now));
        match (self.link.next_event(now), la) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
