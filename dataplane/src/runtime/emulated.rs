//! Emulated links for `rocesw run`: ports whose far end is software (`peer = "emulated"`).
//!
//! A real NIC paces frames at line rate and stops a paused priority within a microsecond; a
//! host process on a shared core writes into the veth as fast as it is scheduled, and notices
//! PFC only when it next polls. If the switch accounted frames when it read them, whatever
//! piled up in the receive ring while the switch (or the host) was not scheduled would land in
//! the MMU at once, far faster than the link, and overflow any headroom. So the receive ring is
//! treated as the peer NIC's transmit queue: frames read from it wait here, in per-priority
//! queues, and enter the switch only as they would have crossed the wire (`pfc::peer`, the
//! model replay's peers use), paused priorities held back by the PFC the switch sends on this
//! port. What waits here is counted apart from the switch's buffer (`PortReport::peer`).
//!
//! The store is allocated at start-up (fixed slots, a free list, queues with their capacity
//! reserved), so the packet path does not allocate. It is bounded: when it is full the port is
//! not read (counted as a stalled read), and the frames wait in the host's own queues.

use crate::ingress::classify::Classifier;
use crate::pfc::EmulatedLink;
use crate::switch::{BurstRx, Switch};
use controlplane::snapshot::PeerReport;
use controlplane::PortConfig;

/// The most an emulated peer holds per port. Ample for a host that notices PFC milliseconds
/// late at 1–25 Gb/s (25 Gb/s × 2 ms = 6.25 MB), and bounded.
pub const EMULATED_PEER_STORE_BYTES: usize = 8 << 20;

pub struct EmulatedPort {
    pub link: EmulatedLink<u32>,
    /// Bytes per slot: the port's largest frame plus one, so a longer frame is kept cut at one
    /// byte over the limit and the switch still counts it as `oversize`.
    slot_bytes: usize,
    store: Box<[u8]>,
    free: Vec<u32>,
}

impl EmulatedPort {
    pub fn new(p: &PortConfig) -> Self {
        let slot_bytes = p.max_frame_bytes as usize + 1;
        let slots = (EMULATED_PEER_STORE_BYTES / slot_bytes).max(crate::runtime::worker::BURST);
        let quanta = controlplane::headroom::peer_response_quanta(p.speed_bps);
        EmulatedPort {
            link: EmulatedLink::new(p.speed_bps, p.cable_m, quanta, true, slots),
            slot_bytes,
            store: vec![0u8; slots * slot_bytes].into_boxed_slice(),
            free: (0..slots as u32).rev().collect(),
        }
    }

    /// The longest step in which a late round plays this link through: its peer's reaction
    /// time or 16 KiB of line time, whichever is longer (the headroom of emulated ports
    /// covers it: `controlplane::headroom::EMULATED_STEP_BYTES`).
    pub fn step_ns(&self) -> u64 {
        self.link
            .reaction_ns()
            .max(controlplane::headroom::emulated_step_ns(self.link.speed_bps()))
    }

    /// Frames the store can take now.
    pub fn room(&self) -> usize {
        self.free.len()
    }

    /// Takes a frame the switch read from the port at `now` (call only with `room() > 0`).
    #[inline]
    pub fn accept(&mut self, frame: &[u8], now: u64, classifier: &Classifier) {
        let Some(slot) = self.free.pop() else {
            // The caller asked for no more than `room()`; a backend that hands over more is
            // counted as a stalled read rather than trusted.
            self.link.counters.stalled_reads += 1;
            return;
        };
        let len = frame.len().min(self.slot_bytes);
        let at = slot as usize * self.slot_bytes;
        self.store[at..at + len].copy_from_slice(&frame[..len]);
        let class = EmulatedLink::<u32>::class_of(classifier, &self.store[at..at + len]);
        self.link.push(class, now, len, slot);
    }

    /// Hands the switch every frame that has crossed the emulated wire by `now`, looking back
    /// at most `catch_up_ns`; returns how many. They enter at `now` (the switch cannot take them
    /// in its past), but the wire's pacing follows their own departure times, so a poll a
    /// little late does not slow the link. The worker plays a long gap through in steps of at
    /// most the peer's reaction time (see `EmulatedLink::pop`).
    #[inline]
    pub fn deliver(&mut self, now: u64, catch_up_ns: u64, rx: &mut BurstRx<'_>) -> usize {
        let mut n = 0;
        while let Some((slot, len, _)) = self.link.pop(now, catch_up_ns) {
            let at = slot as usize * self.slot_bytes;
            rx.receive(&self.store[at..at + len]);
            self.free.push(slot);
            n += 1;
        }
        n
    }

    /// Whether frames wait here.
    pub fn is_empty(&self) -> bool {
        self.link.is_empty()
    }

    pub fn report(&self) -> PeerReport {
        let c = &self.link.counters;
        PeerReport {
            held_frames: c.held_frames,
            held_ns: c.held_ns,
            stalled_reads: c.stalled_reads,
            depth_frames: self.link.held_frames() as u64,
            depth_bytes: self.link.held_bytes(),
        }
    }
}

/// Plays the emulated wires from `from` (the last round) to `now`: what crossed them enters
/// the switch. When a round comes late (the switch was not scheduled), the gap is played in
/// steps of at most `step_ns`, the switch running at each (`poll`, then `transmit`, which
/// must show the PFC it sends to the peers through `on_frame_from_switch`), as replay would
/// have: the wires keep their line rate across the gap, and a pause reaches each peer within a
/// step of when a NIC would obey it, which the computed headroom of emulated ports covers
/// (`controlplane::headroom::EMULATED_STEP_BYTES`). A step with nothing due jumps to the next
/// departure. Time never goes back: every step is after `from`. The last step, at `now`, only
/// delivers: the caller polls and transmits at `now` itself. Returns the frames moved.
pub fn play_through(
    sw: &mut Switch,
    emu: &mut [Option<EmulatedPort>],
    from: u64,
    now: u64,
    step_ns: u64,
    mut transmit: impl FnMut(&mut Switch, &mut [Option<EmulatedPort>], u64) -> usize,
) -> usize {
    let mut moved = 0;
    if emu.iter().flatten().all(EmulatedPort::is_empty) {
        return 0;
    }
    let mut t = from;
    loop {
        let next_due = emu.iter().flatten().filter_map(|em| em.link.next_event(t)).min();
        t = next_due.unwrap_or(now).max(t.saturating_add(step_ns)).min(now);
        for (i, em) in emu.iter_mut().enumerate() {
            if let Some(em) = em.as_mut().filter(|em| !em.is_empty()) {
                let mut rx = sw.burst_rx(i, t);
                moved += em.deliver(t, step_ns, &mut rx);
            }
        }
        if t >= now {
            return moved;
        }
        sw.poll(t);
        moved += transmit(sw, emu, t);
    }
}
