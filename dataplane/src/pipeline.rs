//! The switch: parse → forward → classify → MMU admit → queue → WRED → schedule → transmit →
//! release, as plain function calls on one owner's state.
//!
//! `Switch` knows nothing of where frames come from or what time it is: ports hand it frames
//! with `receive`, ask it for frames with `transmit`, and pass `now` (nanoseconds) every time.
//! Replay passes virtual time, the real-time workers a monotonic clock; the code is the same.

use crate::classify::{Class, Classifier};
use crate::counters::{DropReason, PgCounters, PortCounters, QueueCounters};
use crate::fdb::Fdb;
use crate::mmu::Mmu;
use crate::packet::{self, ecn, pfc as wire_pfc, FrameInfo, MacControl};
use crate::pfc::{PauseState, PfcGenerator, Watchdog, WatchdogEvent};
use crate::pool::PacketPool;
use crate::ratelimit::TokenBucket;
use crate::ring::Ring;
use crate::rng::Rng;
use crate::sched::Scheduler;
use crate::wred::{Verdict, Wred};
use controlplane::{Config, MarkPoint, NUM_TC};

/// Ethernet preamble + start delimiter (8), FCS (4) and minimum inter-frame gap (12): what a
/// frame costs on the wire beyond the bytes a pcap holds.
pub const WIRE_OVERHEAD_BYTES: u64 = 24;
const PS_PER_NS: u64 = 1000;
/// Frames a port sends per `transmit` call at most: bounds a worker's time on one port.
pub const TX_BURST: usize = 32;

/// A queued frame. Small and `Copy`: this is what moves through the egress rings.
#[derive(Debug, Clone, Copy, Default)]
struct Desc {
    slot: u32,
    len: u16,
    in_port: u8,
    pg: u8,
    cells: u16,
    ect: bool,
    cnp: bool,
    /// Already CE-marked (or WRED-decided) at enqueue.
    wred_done: bool,
}

/// The frames of one burst on one port at one time (`Switch::burst_rx`): the per-frame receive
/// path with what the burst shares, one parse result reused in place (`parse_into` overwrites
/// it whole), instead of a fresh one per frame.
pub struct BurstRx<'s> {
    sw: &'s mut Switch,
    port: usize,
    now: u64,
    info: FrameInfo,
}

impl BurstRx<'_> {
    /// Receives one frame (without FCS) of the burst.
    #[inline]
    pub fn receive(&mut self, frame: &[u8]) {
        self.sw.receive_one(self.port, frame, self.now, &mut self.info);
    }
}

/// Where transmitted frames go: a port backend, a pcap writer, a test.
pub trait TxSink {
    /// `frame` leaves `port` (index) starting at `at_ns`. The slice is valid only during the call.
    fn transmit(&mut self, port: usize, frame: &[u8], at_ns: u64);
}

impl<F: FnMut(usize, &[u8], u64)> TxSink for F {
    fn transmit(&mut self, port: usize, frame: &[u8], at_ns: u64) {
        self(port, frame, at_ns)
    }
}

struct Port {
    id: u16,
    mac: [u8; 6],
    speed_bps: u64,
    rate: LinkRate,
    max_frame: usize,
    queues: [Ring<Desc>; NUM_TC],
    sched: Scheduler,
    shapers: [Option<TokenBucket>; NUM_TC],
    wred: [Option<Wred>; NUM_TC],
    cnp_policer: Option<TokenBucket>,
    /// When the link finishes its current frame, in picoseconds (ns would drift at 25G+).
    busy_until_ps: u64,
    /// Whether frames were left waiting when the link went busy: then the next frame starts
    /// back to back at `busy_until_ps` rather than at the time of the next call.
    backlogged: bool,
    /// PFC frames to send, ahead of all data: (class-enable vector, pause times).
    control: Ring<(u8, [u16; NUM_TC])>,
    pfc_gen: PfcGenerator,
    pause: PauseState,
    watchdog: Option<Watchdog>,
    counters: PortCounters,
    queue_counters: [QueueCounters; NUM_TC],
    pg_counters: [PgCounters; NUM_TC],
    /// Queues holding frames (bit mask), kept with the rings so the scheduler need not look.
    nonempty: u8,
    /// Queues with a shaper.
    shaped: u8,
}

impl Port {
    #[inline]
    fn push(&mut self, q: usize, d: Desc) -> Result<(), Desc> {
        self.queues[q].push(d)?;
        self.nonempty |= 1 << q;
        Ok(())
    }

    #[inline]
    fn pop(&mut self, q: usize) -> Option<Desc> {
        let d = self.queues[q].pop()?;
        if self.queues[q].is_empty() {
            self.nonempty &= !(1 << q);
        }
        Some(d)
    }
}

pub struct Switch {
    cfg: Config,
    ports: Vec<Port>,
    mmu: Mmu,
    fdb: Fdb,
    pool: PacketPool,
    rng: Rng,
    classifier: Classifier,
    /// Priorities (bit mask) whose frames sit in each queue: what a received PFC pauses.
    queue_prios: [u8; NUM_TC],
    /// PFC-enabled priorities that map to each PG: what an XOFF for that PG announces.
    pg_prios: [u8; NUM_TC],
    /// Port id → index (u16::MAX: no such port): the FDB speaks ids, the arrays indices.
    index_of_id: Vec<u16>,
}

/// The switch port's own MAC, used as the source of the PFC frames it sends.
pub fn port_mac(id: u16) -> [u8; 6] {
    let b = id.to_be_bytes();
    [0x02, 0x52, 0x53, 0x57, b[0], b[1]]
}

/// A port's line rate as picoseconds per byte in 16.16 fixed point: serialisation time is then
/// a multiply and a shift on the packet path instead of a 128-bit division.
#[derive(Debug, Clone, Copy)]
pub struct LinkRate {
    ps_per_byte_q16: u64,
}

impl LinkRate {
    pub fn new(speed_bps: u64) -> Self {
        let q = ((8u128 * 1_000_000_000_000) << 16) / speed_bps.max(1) as u128;
        LinkRate {
            ps_per_byte_q16: q.min(u64::MAX as u128 >> 16) as u64,
        }
    }

    /// Picoseconds a frame of `len` bytes (without FCS) occupies the wire, overhead included.
    #[inline]
    pub fn ser_ps(self, len: usize) -> u64 {
        ((len as u64 + WIRE_OVERHEAD_BYTES) * self.ps_per_byte_q16) >> 16
    }
}

/// Serialisation time in picoseconds of a `len`-byte frame at `speed_bps` (see `LinkRate`).
pub fn ser_ps(len: usize, speed_bps: u64) -> u64 {
    LinkRate::new(speed_bps).ser_ps(len)
}

/// Per queue, the priorities whose frames it holds (what a received PFC pauses); per PG, the
/// PFC-enabled priorities that map to it (what an XOFF for that PG announces).
fn priority_masks(cfg: &Config) -> ([u8; NUM_TC], [u8; NUM_TC]) {
    let mut queue_prios = [0u8; NUM_TC];
    let mut pg_prios = [0u8; NUM_TC];
    for prio in 0..NUM_TC {
        queue_prios[cfg.classify.tc_to_queue[prio] as usize & 7] |= 1 << prio;
        if cfg.pfc.enabled[prio] {
            pg_prios[cfg.classify.tc_to_pg[prio] as usize & 7] |= 1 << prio;
        }
    }
    (queue_prios, pg_prios)
}

/// Queues that carry PFC-enabled priorities: the ones the watchdog watches.
fn lossless_queue_mask(queue_prios: &[u8; NUM_TC], pg_prios: &[u8; NUM_TC]) -> u8 {
    let pfc = pg_prios.iter().fold(0, |a, b| a | b);
    (0..NUM_TC)
        .filter(|&q| queue_prios[q] & pfc != 0)
        .fold(0, |m, q| m | 1 << q)
}

impl Switch {
    pub fn new(cfg: &Config, seed: u64) -> Self {
        let mmu = Mmu::new(cfg);
        let max_frame = cfg
            .ports
            .iter()
            .map(|p| p.max_frame_bytes as usize)
            .max()
            .unwrap_or(1518);
        // Every queued frame holds at least one cell, so the buffer bounds the frames held;
        // headroom for one receive burst per port on top.
        let slots = mmu.total_cells() as usize + TX_BURST * NUM_TC * cfg.ports.len();
        let pool = PacketPool::new(slots, max_frame);
        let (queue_prios, pg_prios) = priority_masks(cfg);
        let lossless_queues = lossless_queue_mask(&queue_prios, &pg_prios);
        let ports = cfg
            .ports
            .iter()
            .map(|p| {
                let modes = std::array::from_fn(|q| p.queues[q].sched);
                Port {
                    id: p.id,
                    mac: port_mac(p.id),
                    speed_bps: p.speed_bps.max(1),
                    rate: LinkRate::new(p.speed_bps),
                    max_frame: p.max_frame_bytes as usize,
                    queues: std::array::from_fn(|_| Ring::with_capacity(slots)),
                    sched: Scheduler::new(&modes, p.max_frame_bytes),
                    shapers: std::array::from_fn(|q| p.queues[q].shaper.map(TokenBucket::new)),
                    wred: std::array::from_fn(|q| p.queues[q].ecn.as_ref().map(Wred::new)),
                    cnp_policer: cfg.cnp.policer.map(TokenBucket::new),
                    busy_until_ps: 0,
                    backlogged: false,
                    control: Ring::with_capacity(64),
                    pfc_gen: PfcGenerator::new(&cfg.pfc, p.speed_bps),
                    pause: PauseState::default(),
                    watchdog: cfg.pfc.watchdog.clone().map(|w| Watchdog::new(w, lossless_queues)),
                    counters: PortCounters::default(),
                    queue_counters: Default::default(),
                    pg_counters: Default::default(),
                    nonempty: 0,
                    shaped: (0..NUM_TC)
                        .filter(|&q| p.queues[q].shaper.is_some())
                        .fold(0, |m, q| m | 1 << q),
                }
            })
            .collect();
        let max_id = cfg.ports.iter().map(|p| p.id as usize).max().unwrap_or(0);
        let mut index_of_id = vec![u16::MAX; max_id + 1];
        for (i, p) in cfg.ports.iter().enumerate() {
            index_of_id[p.id as usize] = i as u16;
        }
        Switch {
            index_of_id,
            ports,
            fdb: Fdb::new(&cfg.fdb),
            pool,
            rng: Rng::new(seed),
            classifier: Classifier::new(&cfg.classify, &cfg.cnp),
            mmu,
            queue_prios,
            pg_prios,
            cfg: cfg.clone(),
        }
    }

    /// Switches to a new config between two bursts, as the control plane asks. A frame is
    /// handled wholly under the old config or wholly under the new one; nothing queued is lost
    /// and every cell stays charged where it is (the MMU keeps its counts, only limits change).
    /// Refused, with the reason, for what cannot change under traffic: the ports (ids, count,
    /// largest frame beyond the packet buffers) and the buffer size or cell.
    pub fn reconfigure(&mut self, cfg: &Config) -> Result<(), String> {
        let old = &self.cfg;
        if old.buffer != cfg.buffer {
            return Err("buffer.size and buffer.cell cannot change while the switch runs (restart it)".into());
        }
        let ids = |c: &Config| c.ports.iter().map(|p| p.id).collect::<Vec<_>>();
        if ids(old) != ids(cfg) {
            return Err("the set of ports cannot change while the switch runs (restart it)".into());
        }
        if let Some(p) = cfg
            .ports
            .iter()
            .find(|p| p.max_frame_bytes as usize > self.pool.slot_size())
        {
            return Err(format!(
                "port {}: frames up to {} B exceed the running switch's packet buffers (restart it)",
                p.id, p.max_frame_bytes
            ));
        }
        let (queue_prios, pg_prios) = priority_masks(cfg);
        let lossless_queues = lossless_queue_mask(&queue_prios, &pg_prios);
        for (p, pc) in self.ports.iter_mut().zip(&cfg.ports) {
            let modes = std::array::from_fn(|q| pc.queues[q].sched);
            p.speed_bps = pc.speed_bps.max(1);
            p.rate = LinkRate::new(pc.speed_bps);
            p.max_frame = pc.max_frame_bytes as usize;
            p.sched = Scheduler::new(&modes, pc.max_frame_bytes);
            p.shapers = std::array::from_fn(|q| pc.queues[q].shaper.map(TokenBucket::new));
            p.shaped = (0..NUM_TC)
                .filter(|&q| pc.queues[q].shaper.is_some())
                .fold(0, |m, q| m | 1 << q);
            p.wred = std::array::from_fn(|q| pc.queues[q].ecn.as_ref().map(Wred::new));
            p.cnp_policer = cfg.cnp.policer.map(TokenBucket::new);
            p.pfc_gen.reconfigure(&cfg.pfc, pc.speed_bps);
            p.watchdog = match (p.watchdog.take(), cfg.pfc.watchdog.clone()) {
                (Some(mut w), Some(c)) => {
                    w.reconfigure(c, lossless_queues);
                    Some(w)
                }
                (None, Some(c)) => Some(Watchdog::new(c, lossless_queues)),
                (_, None) => None,
            };
        }
        self.mmu.set_limits(cfg);
        self.fdb.reconfigure(&cfg.fdb);
        self.classifier = Classifier::new(&cfg.classify, &cfg.cnp);
        self.queue_prios = queue_prios;
        self.pg_prios = pg_prios;
        self.cfg = cfg.clone();
        Ok(())
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn classifier(&self) -> &Classifier {
        &self.classifier
    }

    pub fn num_ports(&self) -> usize {
        self.ports.len()
    }

    #[inline]
    pub fn port_index(&self, id: u16) -> Option<usize> {
        match self.index_of_id.get(id as usize) {
            Some(&i) if i != u16::MAX => Some(i as usize),
            _ => None,
        }
    }

    pub fn mmu(&self) -> &Mmu {
        &self.mmu
    }

    pub fn fdb(&self) -> &Fdb {
        &self.fdb
    }

    /// A snapshot whose peaks then start afresh from the current use (see
    /// `Mmu::restart_peaks`): how watermarks are read and cleared without losing a peak.
    pub fn snapshot_and_restart_peaks(&mut self, now: u64) -> crate::report::Snapshot {
        let s = self.snapshot(now);
        self.mmu.restart_peaks();
        s
    }

    /// Receives a burst of frames on port index `port` at `now`.
    pub fn receive_burst<'a>(&mut self, port: usize, frames: impl IntoIterator<Item = &'a [u8]>, now: u64) {
        let mut rx = self.burst_rx(port, now);
        for f in frames {
            rx.receive(f);
        }
    }

    /// A burst arriving on port index `port` at `now`, frame by frame: for port backends that
    /// hand their frames to a callback rather than as a list.
    pub fn burst_rx(&mut self, port: usize, now: u64) -> BurstRx<'_> {
        BurstRx {
            sw: self,
            port,
            now,
            info: FrameInfo::EMPTY,
        }
    }

    /// Receives one frame (without FCS) on port index `port` at `now`.
    pub fn receive(&mut self, port: usize, frame: &[u8], now: u64) {
        self.burst_rx(port, now).receive(frame)
    }

    /// The per-frame receive path, inlined into the burst loop.
    #[inline(always)]
    fn receive_one(&mut self, port: usize, frame: &[u8], now: u64, info: &mut FrameInfo) {
        let p = &mut self.ports[port];
        p.counters.rx_packets += 1;
        p.counters.rx_bytes += frame.len() as u64;
        if frame.len() > p.max_frame {
            p.counters.drops[DropReason::Oversize as usize] += 1;
            return;
        }
        if let Err(m) = packet::parse_into(frame, p.max_frame, info) {
            p.counters.malformed[m as usize] += 1;
            return;
        }
        if info.is_mac_control() {
            self.receive_mac_control(port, frame, now);
            return;
        }
        // MACs are read from the frame, not from `info`: the parser has just written them there
        // byte by byte, and reading them back wider stalls on store forwarding.
        let (dst, src): ([u8; 6], [u8; 6]) = match (frame[0..6].try_into(), frame[6..12].try_into()) {
            (Ok(d), Ok(s)) => (d, s),
            _ => return, // parse guarantees 14 bytes
        };
        if dst[..5] == [0x01, 0x80, 0xc2, 0x00, 0x00] && dst[5] <= 0x0f {
            p.counters.drops[DropReason::LinkLocal as usize] += 1;
            return;
        }
        if info.is_unknown_ethertype() {
            p.counters.unknown_ethertype += 1;
        }

        let in_id = p.id;
        if src[0] & 1 == 0 {
            self.fdb.learn(&src, in_id, now);
        }
        let class = self.classifier.classify(info, in_id);
        let pgc = &mut self.ports[port].pg_counters[class.pg as usize];
        pgc.rx_packets += 1;
        pgc.rx_bytes += frame.len() as u64;

        let unicast_to = if dst[0] & 1 == 0 {
            self.fdb.lookup_recent(&dst, now)
        } else {
            None
        };
        match unicast_to {
            Some(out_id) if out_id == in_id => self.drop_at_ingress(port, class.pg, DropReason::NoRoute),
            Some(out_id) => match self.port_index(out_id) {
                Some(out) => {
                    let Some(slot) = self.pool.alloc_copy(frame) else {
                        return self.drop_at_ingress(port, class.pg, DropReason::NoBuffer);
                    };
                    self.rewrite(slot, frame.len(), info, &class);
                    self.enqueue(port, out, slot, frame.len(), info, &class, now);
                }
                None => self.drop_at_ingress(port, class.pg, DropReason::NoRoute),
            },
            None => self.flood(port, frame, info, class, now),
        }
    }

    fn flood(&mut self, port: usize, frame: &[u8], info: &FrameInfo, class: Class, now: u64) {
        if self.ports.len() < 2 {
            return self.drop_at_ingress(port, class.pg, DropReason::NoRoute);
        }
        let Some(first) = self.pool.alloc_copy(frame) else {
            return self.drop_at_ingress(port, class.pg, DropReason::NoBuffer);
        };
        self.rewrite(first, frame.len(), info, &class);
        // Each copy is its own frame for the MMU: charged and released independently.
        let outs = (0..self.ports.len()).filter(|&o| o != port);
        let last = self.ports.len() - if port == self.ports.len() - 1 { 2 } else { 1 };
        for out in outs {
            let slot = if out == last {
                first
            } else {
                match self.pool.clone_slot(first, frame.len()) {
                    Some(s) => s,
                    None => {
                        self.drop_at_ingress(port, class.pg, DropReason::NoBuffer);
                        continue;
                    }
                }
            };
            self.enqueue(port, out, slot, frame.len(), info, &class, now);
        }
    }

    #[inline]
    fn rewrite(&mut self, slot: u32, len: usize, info: &FrameInfo, class: &Class) {
        if let Some(dscp) = class.set_dscp {
            ecn::set_dscp(self.pool.get_mut(slot, len), info, dscp);
        }
    }

    /// Counts a frame dropped before it was queued anywhere, on its port and ingress PG.
    #[cold]
    fn drop_at_ingress(&mut self, port: usize, pg: u8, reason: DropReason) {
        let p = &mut self.ports[port];
        p.counters.drops[reason as usize] += 1;
        p.pg_counters[pg as usize & 7].dropped_packets += 1;
    }

    /// Drops a frame that was about to be queued: counted on the egress port and queue (where a
    /// switch reports drops) and on the ingress PG.
    fn drop_at_egress(&mut self, in_port: usize, out: usize, queue: usize, pg: usize, len: usize, reason: DropReason) {
        let o = &mut self.ports[out];
        o.counters.drops[reason as usize] += 1;
        o.queue_counters[queue].dropped_packets += 1;
        o.queue_counters[queue].dropped_bytes += len as u64;
        self.ports[in_port].pg_counters[pg].dropped_packets += 1;
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn enqueue(
        &mut self,
        in_port: usize,
        out: usize,
        slot: u32,
        len: usize,
        info: &FrameInfo,
        class: &Class,
        now: u64,
    ) {
        let (queue, pg) = (class.queue as usize & 7, class.pg as usize & 7);
        let o = &mut self.ports[out];
        let refused = if class.cnp && o.cnp_policer.as_mut().is_some_and(|tb| !tb.take(now, len as u32)) {
            Some(DropReason::Policer)
        } else if o.watchdog.as_ref().is_some_and(|w| w.drops(queue)) {
            Some(DropReason::PfcWatchdog)
        } else {
            None
        };
        if let Some(reason) = refused {
            self.pool.free(slot);
            return self.drop_at_egress(in_port, out, queue, pg, len, reason);
        }
        let cells = self.mmu.cells_for(len);
        let admitted = match self.mmu.admit(in_port, pg, out, queue, cells, len as u32) {
            Ok(a) => a,
            Err(reason) => {
                self.pool.free(slot);
                return self.drop_at_egress(in_port, out, queue, pg, len, reason);
            }
        };
        if admitted.wants_xoff {
            self.xoff(in_port, pg, now);
        }
        let ect = info.is_ect();
        let mut desc = Desc {
            slot,
            len: len as u16,
            in_port: in_port as u8,
            pg: pg as u8,
            cells: cells as u16,
            ect,
            cnp: class.cnp,
            wred_done: false,
        };
        let o = &mut self.ports[out];
        // CNPs skip WRED: marking or dropping the congestion signal itself helps nobody.
        if !class.cnp {
            if let Some(w) = o.wred[queue].as_mut().filter(|w| w.mark_at == MarkPoint::Enqueue) {
                let depth = self.mmu.queue(out, queue).bytes - len as u64;
                desc.wred_done = true;
                match w.decide(depth, ect, &mut self.rng) {
                    Verdict::Pass => {}
                    Verdict::Mark => {
                        if ecn::mark_ce(self.pool.get_mut(slot, len), info) == ecn::MarkOutcome::Marked {
                            o.counters.ecn_marked += 1;
                            o.queue_counters[queue].ecn_marked += 1;
                        }
                    }
                    Verdict::Drop => {
                        self.release(out, queue, &desc);
                        self.pool.free(slot);
                        return self.drop_at_egress(in_port, out, queue, pg, len, DropReason::Wred);
                    }
                }
            }
        }
        if let Err(d) = self.ports[out].push(queue, desc) {
            // Cannot happen: rings hold as many descriptors as the pool has slots.
            self.release(out, queue, &d);
            self.pool.free(slot);
            self.drop_at_egress(in_port, out, queue, pg, len, DropReason::NoBuffer);
        }
    }

    #[inline(always)]
    fn release(&mut self, out: usize, queue: usize, d: &Desc) {
        let (inp, pg) = (d.in_port as usize, d.pg as usize);
        self.mmu
            .release_cells(inp, pg, out, queue, d.cells as u32, d.len as u32);
        if self.ports[inp].pfc_gen.is_xoff(pg) && self.mmu.may_resume(inp, pg) {
            self.xon(inp, pg);
        }
    }

    fn xoff(&mut self, port: usize, pg: usize, now: u64) {
        let prios = self.pg_prios[pg];
        let p = &mut self.ports[port];
        if prios == 0 || !p.pfc_gen.start_xoff(pg, now) {
            return;
        }
        Self::send_xoff(p, pg, prios);
    }

    /// Queues an XOFF for the priorities `prios` of `pg` (first one or a refresh).
    fn send_xoff(p: &mut Port, pg: usize, prios: u8) {
        let quanta = p.pfc_gen.pause_quanta();
        let times = std::array::from_fn(|i| if prios & (1 << i) != 0 { quanta } else { 0 });
        p.pg_counters[pg].xoff_sent += 1;
        Self::queue_pfc(p, prios, times);
    }

    fn xon(&mut self, port: usize, pg: usize) {
        let prios = self.pg_prios[pg];
        let p = &mut self.ports[port];
        p.pfc_gen.stop_xoff(pg);
        p.pg_counters[pg].xon_sent += 1;
        Self::queue_pfc(p, prios, [0; NUM_TC]);
    }

    fn queue_pfc(p: &mut Port, prios: u8, times: [u16; NUM_TC]) {
        if p.control.push((prios, times)).is_err() {
            // 64 pending PFC frames on one port means the link is stalled; the newest state is
            // re-sent by the refresh timer, so dropping here loses nothing that matters.
            p.counters.drops[DropReason::NoBuffer as usize] += 1;
        }
    }

    fn receive_mac_control(&mut self, port: usize, frame: &[u8], now: u64) {
        let p = &mut self.ports[port];
        match wire_pfc::decode_mac_control(frame) {
            Ok(MacControl::Pfc { enable, times }) => {
                for (prio, &quanta) in times.iter().enumerate() {
                    if enable & (1 << prio) != 0 {
                        p.counters.pfc_rx[prio] += 1;
                        let dur = wire_pfc::quanta_to_ns(quanta, p.speed_bps);
                        p.pause.apply(prio, now, dur, &mut p.counters.paused_ns);
                        if let Some(w) = p.watchdog.as_mut() {
                            w.pfc_received(prio, now);
                        }
                    }
                }
            }
            Ok(MacControl::Pause { time }) => {
                p.counters.pause_rx += 1;
                let dur = wire_pfc::quanta_to_ns(time, p.speed_bps);
                for prio in 0..NUM_TC {
                    p.pause.apply(prio, now, dur, &mut p.counters.paused_ns);
                }
            }
            Ok(MacControl::Other { .. }) => p.counters.drops[DropReason::LinkLocal as usize] += 1,
            Err(m) => p.counters.malformed[m as usize] += 1,
        }
    }

    /// Whether queue `q` of port `p` is held by a received pause at `now` (and the watchdog
    /// does not override it).
    #[inline]
    fn paused(&self, p: &Port, q: usize, now: u64) -> bool {
        p.pause.any_paused(self.queue_prios[q], now) && !p.watchdog.as_ref().is_some_and(|w| w.ignores_pause(q))
    }

    /// Queues (mask) held by received pauses at `t_ns` on port `port`, and until when that
    /// holds.
    #[inline]
    fn paused_queues(&self, port: usize, t_ns: u64) -> (u8, u64) {
        let p = &self.ports[port];
        let (prios, valid_until) = p.pause.paused_prios(t_ns);
        if prios == 0 {
            return (0, valid_until);
        }
        let mut queues = 0u8;
        for q in 0..NUM_TC {
            if self.queue_prios[q] & prios != 0 {
                queues |= 1 << q;
            }
        }
        let overridden = p.watchdog.as_ref().map_or(0, |w| w.pause_override());
        (queues & !overridden, valid_until)
    }

    /// Bit mask of queues that may send at `t_ns`, given the paused ones.
    #[inline]
    fn eligible(&mut self, port: usize, t_ns: u64, paused: u8) -> u8 {
        let p = &mut self.ports[port];
        let mut mask = p.nonempty & !paused;
        let mut shaped = mask & p.shaped;
        while shaped != 0 {
            let q = shaped.trailing_zeros() as usize;
            shaped &= shaped - 1;
            let len = p.queues[q].front().map_or(0, |d| d.len as u32);
            if let Some(s) = p.shapers[q].as_mut() {
                if !s.conforms(t_ns, len) {
                    mask &= !(1 << q);
                }
            }
        }
        mask
    }

    /// Lets port index `port` transmit what it can by `now`: PFC frames first, then data in
    /// scheduler order, one after another at line rate. Returns frames sent.
    pub fn transmit(&mut self, port: usize, now: u64, sink: &mut impl TxSink) -> usize {
        let now_ps = now * PS_PER_NS;
        let p = &self.ports[port];
        if p.busy_until_ps > now_ps {
            return 0;
        }
        let mut t_ps = if p.backlogged { p.busy_until_ps } else { now_ps };
        let mut sent = 0;
        let mut pfc_buf = [0u8; 64];
        self.ports[port].backlogged = false;
        let (mut paused, mut paused_valid_until) = self.paused_queues(port, t_ps / PS_PER_NS);
        while sent < TX_BURST && t_ps <= now_ps {
            let t_ns = t_ps / PS_PER_NS;
            if t_ns >= paused_valid_until {
                (paused, paused_valid_until) = self.paused_queues(port, t_ns);
            }
            let p = &mut self.ports[port];
            if let Some((prios, times)) = p.control.pop() {
                let n = wire_pfc::encode_pfc(&mut pfc_buf, p.mac, prios, times);
                for prio in 0..NUM_TC {
                    if prios & (1 << prio) != 0 {
                        p.counters.pfc_tx[prio] += 1;
                    }
                }
                p.counters.tx_packets += 1;
                p.counters.tx_bytes += n as u64;
                sink.transmit(port, &pfc_buf[..n], t_ns);
                t_ps += p.rate.ser_ps(n);
                sent += 1;
                continue;
            }
            let eligible = self.eligible(port, t_ns, paused);
            let p = &mut self.ports[port];
            let Some(q) = p
                .sched
                .select(eligible, |q| p.queues[q].front().map_or(0, |d| d.len as u32))
            else {
                break;
            };
            // Without shapers on this port's busy queues, nothing but a pause expiring or a PFC
            // frame to send can change the scheduler's choice while this call runs (no frame
            // arrives meanwhile), so `q` keeps sending while the scheduler would pick it again
            // (`Scheduler::select_again`) without a full selection per frame.
            let may_stay = p.shaped & p.nonempty == 0;
            loop {
                if let Some(ser_ps) = self.send_head(port, q, t_ps / PS_PER_NS, sink) {
                    t_ps += ser_ps;
                    sent += 1;
                }
                let p = &mut self.ports[port];
                if !may_stay || sent >= TX_BURST || t_ps > now_ps || !p.control.is_empty() {
                    break;
                }
                if t_ps / PS_PER_NS >= paused_valid_until {
                    break;
                }
                let Some(head) = p.queues[q].front() else { break };
                if !p.sched.select_again(q, head.len as u32) {
                    break;
                }
            }
        }
        if sent > 0 {
            // Back to back only if the next frame was ready when this one ended; otherwise the
            // next transmission starts when it is called for, never before its frame arrived.
            let t_ns = t_ps / PS_PER_NS;
            let (paused, _) = self.paused_queues(port, t_ns);
            let ready = !self.ports[port].control.is_empty() || self.eligible(port, t_ns, paused) != 0;
            let p = &mut self.ports[port];
            p.busy_until_ps = t_ps;
            p.backlogged = ready;
        }
        sent
    }

    /// Dequeues the head of queue `q` and sends it at `t_ns` (WRED at dequeue, MMU release,
    /// shaper, counters). Returns its time on the wire, or None when WRED dropped it.
    #[inline(always)]
    fn send_head(&mut self, port: usize, q: usize, t_ns: u64, sink: &mut impl TxSink) -> Option<u64> {
        let p = &mut self.ports[port];
        let d = p.pop(q).expect("the scheduler picked an empty queue");
        let depth = self.mmu.queue(port, q).bytes;
        self.release(port, q, &d);
        let p = &mut self.ports[port];
        let len = d.len as usize;
        if !d.wred_done && !d.cnp {
            if let Some(w) = p.wred[q].as_mut() {
                match w.decide(depth, d.ect, &mut self.rng) {
                    Verdict::Pass => {}
                    Verdict::Mark => {
                        let frame = self.pool.get_mut(d.slot, len);
                        if let Ok(info) = packet::parse(frame, usize::MAX) {
                            if ecn::mark_ce(frame, &info) == ecn::MarkOutcome::Marked {
                                p.counters.ecn_marked += 1;
                                p.queue_counters[q].ecn_marked += 1;
                            }
                        }
                    }
                    Verdict::Drop => {
                        self.pool.free(d.slot);
                        p.counters.drops[DropReason::Wred as usize] += 1;
                        p.queue_counters[q].dropped_packets += 1;
                        p.queue_counters[q].dropped_bytes += len as u64;
                        self.ports[d.in_port as usize].pg_counters[d.pg as usize].dropped_packets += 1;
                        return None;
                    }
                }
            }
        }
        if let Some(s) = p.shapers[q].as_mut() {
            s.charge(t_ns, len as u32);
        }
        p.counters.tx_packets += 1;
        p.counters.tx_bytes += len as u64;
        p.queue_counters[q].tx_packets += 1;
        p.queue_counters[q].tx_bytes += len as u64;
        sink.transmit(port, self.pool.get(d.slot, len), t_ns);
        self.pool.free(d.slot);
        Some(p.rate.ser_ps(len))
    }

    /// Runs the timers due at `now`: PFC refresh, watchdog detection and restoration.
    pub fn poll(&mut self, now: u64) {
        for port in 0..self.ports.len() {
            for pg in 0..NUM_TC {
                if self.ports[port].pfc_gen.refresh_due(pg, now) {
                    if self.mmu.may_resume(port, pg) || self.mmu.pg(port, pg).total() == 0 {
                        self.xon(port, pg);
                    } else {
                        let prios = self.pg_prios[pg];
                        let p = &mut self.ports[port];
                        p.pfc_gen.refreshed(pg, now);
                        Self::send_xoff(p, pg, prios);
                    }
                }
            }
            self.poll_watchdog(port, now);
        }
    }

    fn poll_watchdog(&mut self, port: usize, now: u64) {
        if self.ports[port].watchdog.is_none() {
            return;
        }
        for q in 0..NUM_TC {
            let p = &self.ports[port];
            let stalled = !p.queues[q].is_empty() && p.pause.any_paused(self.queue_prios[q], now);
            let prios = self.queue_prios[q];
            let p = &mut self.ports[port];
            let w = p.watchdog.as_mut().expect("checked above");
            match w.poll(q, stalled, prios, now) {
                Some(WatchdogEvent::Storm) => {
                    for prio in 0..NUM_TC {
                        if prios & (1 << prio) != 0 {
                            p.counters.watchdog_storms[prio] += 1;
                        }
                    }
                    tracing::warn!(port = p.id, queue = q, "PFC storm detected");
                    if w.drops(q) {
                        self.flush_queue(port, q, DropReason::PfcWatchdog);
                    }
                }
                Some(WatchdogEvent::Restored) => {
                    for prio in 0..NUM_TC {
                        if prios & (1 << prio) != 0 {
                            p.counters.watchdog_restores[prio] += 1;
                        }
                    }
                    tracing::info!(port = p.id, queue = q, "PFC storm restored");
                }
                None => {}
            }
        }
    }

    fn flush_queue(&mut self, port: usize, q: usize, reason: DropReason) {
        while let Some(d) = self.ports[port].pop(q) {
            self.release(port, q, &d);
            self.pool.free(d.slot);
            let p = &mut self.ports[port];
            p.counters.drops[reason as usize] += 1;
            p.queue_counters[q].dropped_packets += 1;
            p.queue_counters[q].dropped_bytes += d.len as u64;
            self.ports[d.in_port as usize].pg_counters[d.pg as usize].dropped_packets += 1;
        }
    }

    /// True when no frame is queued and no PFC frame waits to be sent.
    pub fn is_idle(&self) -> bool {
        self.ports
            .iter()
            .all(|p| p.control.is_empty() && p.queues.iter().all(|q| q.is_empty()))
    }

    /// The earliest time after which calling `poll`/`transmit` may change something, given that
    /// nothing new arrives. Replay jumps its virtual clock there.
    pub fn next_event(&self, now: u64) -> Option<u64> {
        let mut next: Option<u64> = None;
        let mut at = |t: u64| next = Some(next.map_or(t, |n: u64| n.min(t)));
        for (port, p) in self.ports.iter().enumerate() {
            let link_free = p.busy_until_ps.div_ceil(PS_PER_NS).max(now);
            if !p.control.is_empty() {
                at(link_free);
            }
            for q in 0..NUM_TC {
                let Some(head) = p.queues[q].front() else { continue };
                let mut t = link_free;
                if self.paused(p, q, t) {
                    t = p.pause.resume_time(self.queue_prios[q], t);
                }
                if let Some(s) = p.shapers[q].as_ref() {
                    t = s.ready_at(t, head.len as u32);
                }
                at(t);
                if let Some(w) = p.watchdog.as_ref() {
                    if let Some(d) = w.deadline(q) {
                        at(d.max(now));
                    }
                }
            }
            if let Some(w) = p.watchdog.as_ref() {
                for q in 0..NUM_TC {
                    if let Some(d) = w.restore_deadline(q) {
                        at(d.max(now));
                    }
                }
            }
            if let Some(t) = p.pfc_gen.next_refresh() {
                at(t.max(now));
            }
            let _ = port;
        }
        next
    }

    /// Counters and buffer state, for reports.
    pub fn snapshot(&self, now: u64) -> crate::report::Snapshot {
        <crate::report::Snapshot as crate::report::Build>::build(self, now)
    }

    // Accessors for the report module.
    pub(crate) fn port_counters(&self, port: usize) -> &PortCounters {
        &self.ports[port].counters
    }
    pub(crate) fn port_paused_ns(&self, port: usize, now: u64) -> [u64; NUM_TC] {
        let p = &self.ports[port];
        p.pause.total_paused(now, &p.counters.paused_ns)
    }
    pub(crate) fn queue_counters(&self, port: usize) -> &[QueueCounters; NUM_TC] {
        &self.ports[port].queue_counters
    }
    pub(crate) fn pg_counters(&self, port: usize) -> &[PgCounters; NUM_TC] {
        &self.ports[port].pg_counters
    }
    pub(crate) fn port_id(&self, port: usize) -> u16 {
        self.ports[port].id
    }
    pub(crate) fn queue_len(&self, port: usize, q: usize) -> usize {
        self.ports[port].queues[q].len()
    }
    pub fn free_buffers(&self) -> usize {
        self.pool.available()
    }
    pub fn buffer_capacity(&self) -> usize {
        self.pool.capacity()
    }
}
