//! Emulated links for `rocesw run`: ports whose far end is software (`peer = "emulated"`).
//!
//! A real NIC paces frames at line rate and stops a paused priority within a microsecond; a
//! host process on a shared core writes into the veth as fast as it is scheduled, and notices
//! PFC only when it next polls. If the switch accounted frames when it read them, whatever
//! piled up in the receive ring while the switch (or the host) was not scheduled would land in
//! the MMU at once, far faster than the link, and overflow any headroom. So the receive ring is
//! treated as the peer NIC's transmit queue: frames read from it wait here, in per-priority
//! queues, and enter the switch only as they would have crossed the wire (`nic::peer`, the
//! model replay's peers use), paused priorities held back by the PFC the switch sends on this
//! port. What waits here is counted apart from the switch's buffer (`PortReport::peer`).
//!
//! The store is allocated at start-up (fixed slots, a free list, queues with their capacity
//! reserved), so the packet path does not allocate. It is bounded: when it is full the port is
//! not read (counted as a stalled read), and the frames wait in the host's own queues.
//!
//! **Back-pressure to the host.** A NIC never lets its host send faster than its wire: the
//! host's send queue fills and it waits. A software host writing into a veth has no such
//! limit, and one that only listens to PFC (rocegen) would keep writing at its own rate while
//! its frames pile up here and in the kernel's ring, for seconds, until the ring overflows.
//! So the emulated NIC tells its host to wait the only way such a host understands: once a
//! priority holds [`BACKPRESSURE_XOFF_BYTES`] here it sends the host a PFC XOFF for it
//! (refreshed like the switch's own), and an XON once it is back under
//! [`BACKPRESSURE_XON_BYTES`] (unless the switch's PFC is holding that priority: then the
//! switch's XON frees the host). These frames go to the host only, never into the emulated
//! link's pause state, and are counted apart (`PeerReport::backpressure_xoff`). A capture
//! file is a host that hears nothing: its ports send it none (their output stays what replay
//! writes).

use crate::ingress::classify::PortMaps;
use crate::nic::peer::EmulatedLink;
use crate::pfc::PfcGenerator;
use crate::runtime::shard_port::PeerSlot;
use crate::runtime::worker::BURST;
use crate::switch::{BurstRx, Switch};
use crate::wire::pfc as wire_pfc;
use controlplane::snapshot::PeerReport;
use controlplane::{PfcConfig, PortConfig, NUM_TC};

/// Bytes of one priority held here at which the emulated NIC pauses its host.
pub const BACKPRESSURE_XOFF_BYTES: u64 = 256 << 10;
/// Bytes of one priority held here below which the emulated NIC lets its host send again.
pub const BACKPRESSURE_XON_BYTES: u64 = 128 << 10;

/// The most an emulated peer holds per port. Ample for a host that notices PFC milliseconds
/// late at 1–25 Gb/s (25 Gb/s × 2 ms = 6.25 MB), and bounded.
pub const EMULATED_PEER_STORE_BYTES: usize = 8 << 20;

/// What of a frame the switch sends an emulated port goes on to the port's host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToHost {
    /// The frame as the switch sent it.
    Frame,
    /// Nothing: a PFC frame whose every priority the NIC keeps to itself.
    Nothing,
    /// The PFC frame without the priorities the NIC keeps to itself.
    Rewritten([u8; 64], usize),
}

/// The emulated peer of one port: the far end's NIC and wire, between the backend and the switch.
pub struct EmulatedPort {
    /// The wire and the NIC's queues and pause state (`nic::peer`); frames are slot indices into
    /// this port's store.
    pub link: EmulatedLink<u32>,
    /// Bytes per slot: the port's largest frame plus one, so a longer frame is kept cut at one
    /// byte over the limit and the switch still counts it as `oversize`.
    slot_bytes: usize,
    store: Box<[u8]>,
    free: Vec<u32>,
    /// The host's pause state as this NIC set it, and when to refresh it; None for a host
    /// that cannot hear it (a capture file).
    backpressure: Option<PfcGenerator>,
    /// Source of the back-pressure frames: the switch port's address, as for its own PFC.
    mac: [u8; 6],
    /// Back-pressure XOFF frames sent to the host, per priority.
    backpressure_xoff: [u64; NUM_TC],
    /// Frames a backend handed over beyond the store's room, lost, not yet counted by the
    /// switch.
    overrun: u64,
}

impl EmulatedPort {
    /// The peer of port `p`: its speed, cable and the store, allocated now; host back-pressure only
    /// for a port with a live host (not a capture file).
    pub fn new(p: &PortConfig, pfc: &PfcConfig) -> Self {
        let slot_bytes = p.max_frame_bytes as usize + 1;
        let slots = (EMULATED_PEER_STORE_BYTES / slot_bytes).max(crate::runtime::worker::BURST);
        let quanta = controlplane::headroom::peer_response_quanta(p.speed_bps);
        EmulatedPort {
            link: EmulatedLink::new(p.speed_bps, p.cable_m, quanta, true, slots),
            slot_bytes,
            store: vec![0u8; slots * slot_bytes].into_boxed_slice(),
            free: (0..slots as u32).rev().collect(),
            backpressure: p.pcap.is_none().then(|| PfcGenerator::new(pfc, p.speed_bps)),
            mac: crate::egress::port::port_mac(p.id),
            backpressure_xoff: [0; NUM_TC],
            overrun: 0,
        }
    }

    /// Frames lost since the last call because a backend handed over more than the store had
    /// room for: the switch counts them as lost in the port's receive ring.
    pub fn take_overrun(&mut self) -> u64 {
        std::mem::take(&mut self.overrun)
    }

    /// The switch sends `frame` to this port's host, starting at `at_ns`: a PFC frame among
    /// them pauses the emulated link (from when a NIC would obey it). Says what of it goes on to
    /// the host: the NIC hears the switch's PFC, and its host sees it too (a PFC-honouring host
    /// counts it), except an XON for a priority this NIC is holding back itself, which would
    /// free a host whose frames still wait here; that part the NIC keeps to itself, as a real
    /// NIC's host only ever sees its own send queue. Other frames cost two byte compares.
    #[inline]
    pub fn from_switch(&mut self, frame: &[u8], at_ns: u64) -> ToHost {
        if frame.get(12..14) != Some(&[0x88, 0x08]) {
            return ToHost::Frame;
        }
        let ser_ns = crate::switch::ser_ps(frame.len(), self.link.speed_bps()) / 1000;
        let pfc = self.link.on_frame_from_switch(frame, at_ns, ser_ns);
        let (Some((enable, times)), Some(bp)) = (pfc, self.backpressure.as_ref()) else {
            return ToHost::Frame;
        };
        let withheld = (0..NUM_TC)
            .filter(|&prio| enable & (1 << prio) != 0 && times[prio] == 0 && bp.is_xoff(prio))
            .fold(0u8, |m, prio| m | 1 << prio);
        match enable & !withheld {
            _ if withheld == 0 => ToHost::Frame,
            0 => ToHost::Nothing,
            rest => {
                let mut buf = [0u8; 64];
                let mut src = [0u8; 6];
                src.copy_from_slice(&frame[6..12]);
                let len = wire_pfc::encode_pfc(&mut buf, src, rest, times);
                ToHost::Rewritten(buf, len)
            }
        }
    }

    /// The PFC frame this NIC sends its host now, if any (see the module's doc): XOFF for the
    /// priorities that passed [`BACKPRESSURE_XOFF_BYTES`] or are due a refresh, XON for those
    /// back under [`BACKPRESSURE_XON_BYTES`]. One frame carries every change.
    ///
    /// Two clocks: `host_now` is real time, which the host's pause timer runs on (its refresh
    /// must come within a pause of real time, however far the emulated wires lag: see
    /// [`round_time`]); `wire_now` is the switch's, which the link's own pause state is kept in.
    pub fn backpressure(&mut self, host_now: u64, wire_now: u64) -> Option<([u8; 64], usize)> {
        let bp = self.backpressure.as_mut()?;
        let quanta = bp.pause_quanta();
        let (mut enable, mut times) = (0u8, [0u16; 8]);
        for (prio, time) in times.iter_mut().enumerate() {
            let held = self.link.held_bytes_of(prio);
            if !bp.is_xoff(prio) {
                if held >= BACKPRESSURE_XOFF_BYTES {
                    bp.start_xoff(prio, host_now);
                    (enable, *time) = (enable | 1 << prio, quanta);
                    self.backpressure_xoff[prio] += 1;
                }
            } else if held <= BACKPRESSURE_XON_BYTES {
                bp.stop_xoff(prio);
                if !self.link.is_paused(prio, wire_now) {
                    enable |= 1 << prio;
                }
            } else if bp.refresh_due(prio, host_now) {
                bp.refreshed(prio, host_now);
                (enable, *time) = (enable | 1 << prio, quanta);
                self.backpressure_xoff[prio] += 1;
            }
        }
        if enable == 0 {
            return None;
        }
        let mut buf = [0u8; 64];
        let len = wire_pfc::encode_pfc(&mut buf, self.mac, enable, times);
        Some((buf, len))
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
    pub fn accept(&mut self, frame: &[u8], now: u64, maps: &PortMaps) {
        let Some(slot) = self.free.pop() else {
            // The caller asked for no more than `room()`; a backend that hands over more
            // loses the frame, counted as lost in the receive ring (`take_overrun`).
            self.overrun += 1;
            return;
        };
        let len = frame.len().min(self.slot_bytes);
        let at = slot as usize * self.slot_bytes;
        self.store[at..at + len].copy_from_slice(&frame[..len]);
        let class = EmulatedLink::<u32>::class_of(maps, &self.store[at..at + len]);
        self.link.push(class, now, len, slot);
    }

    /// Hands the switch every frame that has crossed the emulated wire by `now`, looking back
    /// at most `catch_up_ns`; returns how many. They enter at `now` (the switch cannot take them
    /// in its past), but the wire's pacing follows their own departure times, so a poll a
    /// little late does not slow the link. The worker plays a long gap through in steps of at
    /// most the peer's reaction time (see `EmulatedLink::pop`).
    ///
    /// At most `max` frames: a shard delivers in bursts, each only while its outboxes have
    /// room for one more (what a received burst is held to), so the frames wait on the wire,
    /// not in an outbox past its capacity.
    #[inline]
    pub fn deliver(&mut self, now: u64, catch_up_ns: u64, rx: &mut BurstRx<'_>, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let Some((slot, len, _)) = self.link.pop(now, catch_up_ns) else {
                break;
            };
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

    /// What the peer held, for the port's `peer` figures in reports.
    pub fn report(&self) -> PeerReport {
        let c = &self.link.counters;
        PeerReport {
            held_frames: c.held_frames,
            held_ns: c.held_ns,
            stalled_reads: c.stalled_reads,
            depth_frames: self.link.held_frames() as u64,
            depth_bytes: self.link.held_bytes(),
            backpressure_xoff: self.backpressure_xoff,
            // The shard's, filled in with the snapshot (`worker::snapshot`).
            behind_ns: 0,
        }
    }
}

/// Steps of the emulated wires a round plays at most ([`round_time`]).
pub const MAX_STEPS_PER_ROUND: u64 = 16;

/// The time a worker's round runs the switch at: real time `real`, unless the emulated wires
/// hold frames and are further behind (`last`, where the last round left them) than
/// [`MAX_STEPS_PER_ROUND`] steps of `step_ns`; then that many steps past `last`.
///
/// Why the cap: a late round plays its gap through in steps, and each step costs the worker
/// real time (the switch's transmit, the veths' syscalls). On a loaded 2-core machine a step took
/// 250–650 µs of real time for 262 µs of wire time at 500 Mb/s, so a round that played a
/// 50 ms gap took 50 ms or more, and the next had a longer gap to play: rounds grew
/// to hundreds of milliseconds, during which no receive ring was read and no back-pressure
/// refreshed, the hosts' pauses ran out, and their rings overflowed. With the cap a round's
/// work is bounded; a worker that cannot keep up lets the wires fall behind real time (the
/// links run slower, as they would on a slower switch) while every round still reads the
/// rings and refreshes the hosts' pauses on time. Time never goes back: the result is at
/// least `last` (`real` is).
#[inline]
pub fn round_time(last: u64, real: u64, step_ns: u64, peers_hold_frames: bool) -> u64 {
    if peers_hold_frames {
        real.min(last.saturating_add(step_ns.saturating_mul(MAX_STEPS_PER_ROUND)))
    } else {
        real
    }
}

/// Plays the emulated wires from `from` (the last round) to `now`: what crossed them enters
/// the switch. When a round comes late (the switch was not scheduled), the gap is played in
/// steps of at most `step_ns`, the switch running at each (`poll`, then `transmit`, which
/// must show the PFC it sends to the peers through `on_frame_from_switch`), as replay would
/// have: the wires keep their line rate across the gap, and a pause reaches each peer within a
/// step of when a NIC would obey it, which the computed headroom of emulated ports covers
/// (`controlplane::headroom::EMULATED_STEP_BYTES`). A step with nothing due, on a wire or in
/// the switch (`Switch::next_event`: its PFC refreshes, pacing, timers), jumps to the next such
/// event. Time never goes back: every step is after `from`. The last step, at `now`, only
/// delivers: the caller polls and transmits at `now` itself. Port `first` (modulo) delivers
/// first; a worker passes a different one each round. Returns the frames moved.
#[allow(clippy::too_many_arguments)]
pub fn play_through<P: PeerSlot>(
    sw: &mut Switch,
    ports: &mut [P],
    from: u64,
    now: u64,
    step_ns: u64,
    first: usize,
    mut transmit: impl FnMut(&mut Switch, &mut [P], u64) -> usize,
) -> usize {
    let mut moved = 0;
    if ports.iter().filter_map(P::peer).all(EmulatedPort::is_empty) {
        return 0;
    }
    let mut t = from;
    loop {
        // The next thing due on a wire or in the switch itself: a jump must not pass the
        // switch's own timers (a PFC refresh), or a peer whose pause runs out during the gap
        // resumes before the refresh that would have kept it paused reaches it.
        let next_due = ports
            .iter()
            .filter_map(P::peer)
            .filter_map(|em| em.link.next_event(t))
            .chain(sw.next_event(t))
            .min();
        t = next_due.unwrap_or(now).max(t.saturating_add(step_ns)).min(now);
        // A burst at a time, each only while every outbox to another shard has room for one
        // (`Switch::can_receive`, as the receive phase checks): a flood that crosses filled an
        // outbox past its capacity in one late round (it grew, allocating on the packet path).
        // What finds no room stays on the wire, paced from where it left. The ports take turns,
        // a burst each, from port `first` on: with room for a burst or two, the first port
        // would otherwise take it every time and a later one's hosts wait behind its flood.
        let n = ports.len();
        loop {
            let mut more = false;
            for k in 0..n {
                let i = (k + first) % n;
                let Some(em) = ports[i].peer_mut().filter(|em| !em.is_empty()) else {
                    continue;
                };
                if !sw.can_receive() {
                    break;
                }
                let mut rx = sw.burst_rx(i, t);
                let got = em.deliver(t, step_ns, &mut rx, BURST);
                moved += got;
                more |= got == BURST;
            }
            if !more || !sw.can_receive() {
                break;
            }
        }
        if t >= now {
            return moved;
        }
        sw.poll(t);
        moved += transmit(sw, ports, t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::gen::Flow;
    use crate::wire::MacControl;

    /// Port 1 of the default profile, an emulated peer at 500 Mb/s, and `n` 1 KiB RoCE frames
    /// (priority 3) its host wrote at `now`.
    fn port_with_backlog(n: usize, now: u64) -> (EmulatedPort, crate::Switch) {
        let mut cfg = crate::test_config();
        cfg.ports[1].speed_bps = 500_000_000;
        let sw = crate::Switch::new(&cfg, 1);
        let mut em = EmulatedPort::new(&cfg.ports[1], &cfg.pfc);
        let flow = Flow {
            src: 1,
            dst: 0,
            dscp: 26,
            ecn: crate::wire::Ecn::Ect0,
            qp: 1,
            frame_len: 1024,
            count: n as u64,
            start_ns: 0,
            rate_bps: 1_000_000_000,
        };
        for (_, f) in flow.frames().unwrap() {
            em.accept(&f, now, sw.port_maps(1));
        }
        (em, sw)
    }

    fn pfc_of(frame: Option<([u8; 64], usize)>) -> Option<(u8, [u16; 8])> {
        let (buf, len) = frame?;
        match crate::wire::decode_mac_control(&buf[..len]) {
            Ok(MacControl::Pfc { enable, times }) => Some((enable, times)),
            other => panic!("not a PFC frame: {other:?}"),
        }
    }

    /// Issue 41 item 6: a late round delivered every frame its wires had carried, and a
    /// flood from an emulated port that crosses to another shard overflowed the outbox (the
    /// receive phase checks the room for a burst, the wires did not): its debug assertion
    /// fired, and a release build grew the queue on the packet path. Now the wires deliver a
    /// burst at a time while there is room, the ports taking turns (a host beside the flood is
    /// not left behind it), and the rest waits on the wire.
    #[test]
    fn a_late_round_delivers_no_more_than_the_outboxes_hold() {
        let cfg = crate::test_config();
        let mut sw = crate::Switch::shard(&cfg, 1, 0, 2, &[0, 0, 1, 1]);
        let mut em = EmulatedPort::new(&cfg.ports[0], &cfg.pfc);
        let mut written = 0u32;
        while em.room() > 0 {
            let mut f = vec![0u8; 64];
            f[..6].copy_from_slice(&[0xff; 6]);
            f[6..12].copy_from_slice(&[0x02, 0xbb, 0, 0, (written >> 8) as u8, written as u8]);
            f[12..14].copy_from_slice(&[0x88, 0xb5]);
            em.accept(&f, 0, sw.port_maps(0));
            written += 1;
        }
        // A host on port 1 sends a few frames at the same time: it gets its turn.
        let mut host = EmulatedPort::new(&cfg.ports[1], &cfg.pfc);
        let flow = Flow {
            src: 1,
            dst: 2,
            dscp: 26,
            ecn: crate::wire::Ecn::Ect0,
            qp: 1,
            frame_len: 256,
            count: 10,
            start_ns: 0,
            rate_bps: 1_000_000_000,
        };
        for (_, f) in flow.frames().unwrap() {
            host.accept(&f, 0, sw.port_maps(1));
        }
        let step = em.step_ns();
        let mut ports = [Some(em), Some(host), None, None];
        let mut sink = |_: usize, _: &[u8], _: u64| {};
        let mut transmit = |sw: &mut crate::Switch, _: &mut [Option<EmulatedPort>], t: u64| {
            (0..2).map(|p| sw.transmit(p, t, &mut sink)).sum::<usize>()
        };
        // Long enough a gap for every frame written to cross the wire: each floods to ports
        // 2 and 3, another shard's, twice what an outbox holds.
        let late = u64::from(written) * 100;
        let first = play_through(&mut sw, &mut ports, 0, late, step, 0, &mut transmit);
        assert!(first > 0 && !sw.can_receive(), "{first} delivered");
        assert!(!ports[0].as_ref().unwrap().is_empty(), "the rest waits on the wire");
        assert!(
            ports[1].as_ref().unwrap().is_empty(),
            "port 1's host was not left behind the flood"
        );
        // Once the outbox has gone to the other shard, the wire goes on.
        let link = crate::shard::Link::new();
        sw.flush_to(1, &link);
        let second = play_through(&mut sw, &mut ports, late, late + step, step, 0, &mut transmit);
        assert!(second > 0, "delivered again after the flush");
    }

    #[test]
    fn a_round_plays_at_most_its_steps_and_never_goes_back() {
        let step = 262_144;
        // Nothing to play: the switch runs at real time, however far the last round was.
        assert_eq!(round_time(1_000, 900_000_000, step, false), 900_000_000);
        // A gap within the cap is played whole.
        assert_eq!(round_time(1_000, 1_000 + 3 * step, step, true), 1_000 + 3 * step);
        // A longer one: 16 steps of it, the rest in the next rounds.
        let capped = round_time(1_000, 900_000_000, step, true);
        assert_eq!(capped, 1_000 + MAX_STEPS_PER_ROUND * step);
        assert_eq!(
            round_time(capped, 900_000_000, step, true),
            1_000 + 2 * MAX_STEPS_PER_ROUND * step
        );
        // No emulated port (step u64::MAX) or a clock near its end: no overflow, no going back.
        assert_eq!(round_time(5, 7, u64::MAX, true), 7);
        assert_eq!(round_time(u64::MAX - 1, u64::MAX, step, true), u64::MAX);
    }

    #[test]
    fn a_host_ahead_of_its_wire_is_paused_and_released() {
        // 200 KiB waiting: under the XOFF mark, nothing sent.
        let (mut em, mut sw) = port_with_backlog(200, 0);
        assert_eq!(pfc_of(em.backpressure(0, 0)), None);
        // 300 frames (about 300 KiB) pass it: XOFF for priority 3 only, with the switch's
        // pause time.
        let (mut em, _) = port_with_backlog(300, 0);
        let (enable, times) = pfc_of(em.backpressure(0, 0)).expect("XOFF");
        assert_eq!(enable, 1 << 3);
        assert_eq!(times[3], 65535);
        assert_eq!(em.report().backpressure_xoff[3], 1);
        // Nothing new until the refresh is due (half the pause: 33.5 ms at 500 Mb/s).
        assert_eq!(pfc_of(em.backpressure(1_000_000, 1_000_000)), None);
        let (enable, times) = pfc_of(em.backpressure(34_000_000, 34_000_000)).expect("refresh");
        assert_eq!((enable, times[3]), (1 << 3, 65535));
        // The wire drains it under the XON mark: XON (time 0).
        em.deliver(40_000_000, u64::MAX, &mut sw.burst_rx(1, 40_000_000), usize::MAX);
        while em.link.held_bytes_of(3) > BACKPRESSURE_XON_BYTES {
            let t = 40_000_000 + em.link.frames_sent * 20_000;
            let mut rx = sw.burst_rx(1, t);
            em.deliver(t, u64::MAX, &mut rx, usize::MAX);
        }
        let (enable, times) = pfc_of(em.backpressure(90_000_000, 90_000_000)).expect("XON");
        assert_eq!((enable, times[3]), (1 << 3, 0));
        assert_eq!(em.report().backpressure_xoff[3], 2);
    }

    /// The host's pause runs on real time: while the wires lag (`round_time`), the refresh still
    /// comes half a pause of real time after the XOFF, not of wire time.
    #[test]
    fn a_host_is_refreshed_on_real_time_while_the_wires_lag() {
        let (mut em, _) = port_with_backlog(300, 0);
        assert!(pfc_of(em.backpressure(0, 0)).is_some());
        // 34 ms of real time later the wires have played 1 ms: the refresh is due.
        let (enable, times) = pfc_of(em.backpressure(34_000_000, 1_000_000)).expect("refresh on real time");
        assert_eq!((enable, times[3]), (1 << 3, 65535));
        // Wire time far ahead of real time does not bring the next one forward.
        assert_eq!(pfc_of(em.backpressure(35_000_000, 900_000_000)), None);
    }

    #[test]
    fn the_switchs_xon_does_not_release_a_host_the_nic_holds() {
        let (mut em, _) = port_with_backlog(300, 0);
        assert!(pfc_of(em.backpressure(0, 0)).is_some());
        let src = [2, 0, 0, 0, 0, 1];
        // The switch's own XON for priority 3, which the NIC holds back: the host does not see
        // it (it would send until it next heard the NIC), and the NIC has nothing to re-send.
        let mut xon = [0u8; 64];
        let len = crate::wire::encode_pfc(&mut xon, src, 1 << 3, [0; 8]);
        assert_eq!(em.from_switch(&xon[..len], 1_000), ToHost::Nothing);
        assert_eq!(pfc_of(em.backpressure(2_000, 2_000)), None);
        // An XON for priorities 1 and 3: the host hears the one for 1 only, from the switch.
        let len = crate::wire::encode_pfc(&mut xon, src, 1 << 1 | 1 << 3, [0; 8]);
        let ToHost::Rewritten(buf, n) = em.from_switch(&xon[..len], 3_000) else {
            panic!("expected the XON without priority 3")
        };
        assert_eq!(pfc_of(Some((buf, n))), Some((1 << 1, [0; 8])));
        assert_eq!(&buf[6..12], &src);
        // XOFFs and other frames pass as they are.
        let len = crate::wire::encode_pfc(&mut xon, src, 1 << 3, [100, 100, 100, 100, 0, 0, 0, 0]);
        assert_eq!(em.from_switch(&xon[..len], 4_000), ToHost::Frame);
        assert_eq!(em.from_switch(&[0u8; 60], 5_000), ToHost::Frame);
        // Once the NIC lets go of priority 3 itself, the switch's XON reaches the host again.
        let (mut free, _) = port_with_backlog(10, 0);
        assert_eq!(pfc_of(free.backpressure(0, 0)), None);
        let len = crate::wire::encode_pfc(&mut xon, src, 1 << 3, [0; 8]);
        assert_eq!(free.from_switch(&xon[..len], 1_000), ToHost::Frame);
    }

    #[test]
    fn while_the_switch_pauses_the_host_the_nic_sends_no_xon() {
        let (mut em, _) = port_with_backlog(300, 0);
        assert!(pfc_of(em.backpressure(0, 0)).is_some());
        // The switch pauses priority 3 (its XOFF reaches the emulated link)...
        let mut xoff = [0u8; 64];
        let len = crate::wire::encode_pfc(
            &mut xoff,
            [2, 0, 0, 0, 0, 1],
            1 << 3,
            [65535, 65535, 65535, 65535, 0, 0, 0, 0],
        );
        em.from_switch(&xoff[..len], 1_000);
        let mut sw = crate::Switch::new(&crate::test_config(), 1);
        let mut rx = sw.burst_rx(1, 100_000);
        em.deliver(100_000, u64::MAX, &mut rx, usize::MAX);
        assert!(em.link.is_paused(3, 100_000));
        // ...and the backlog falls under the XON mark anyway (as if drained): the NIC lets go of
        // its own hold without an XON, which would free a host the switch wants paused.
        for _ in 0..200 {
            em.link.pop(u64::MAX / 2, u64::MAX);
        }
        assert!(em.link.held_bytes_of(3) <= BACKPRESSURE_XON_BYTES);
        assert_eq!(pfc_of(em.backpressure(200_000, 200_000)), None);
    }
}
