//! One switch: the ingress side, the egress side, the shared pool and the packet buffers, and
//! the few calls that carry a frame from one to the other.
//!
//! `Switch` knows nothing of where frames come from or what time it is: ports hand it frames
//! with `receive`, ask it for frames with `transmit`, and pass `now` (nanoseconds) every time.
//! Replay passes virtual time, the real-time workers a monotonic clock; the code is the same.
//!
//! Who owns what (ARCHITECTURE.md, "Who owns what"): [`Ingress`] the PG accounts, XOFF
//! generation, the FDB and the classifier; [`Egress`] the queues, schedulers, WRED, shapers,
//! the CNP policer, pause reception and the watchdog; the [`SharedPool`] is the one figure both
//! read. The methods here only route between them.

use crate::buffers::foreign::{ForeignFrame, LentBurst, RxFrame};
use crate::buffers::pool::PacketPool;
use crate::counters::{PgCounters, PortCounters, QueueCounters};
use crate::egress::port::Desc;
use crate::egress::run::{Run, RunFrame};
use crate::egress::{Egress, Peers, TX_BURST};
use crate::ingress::classify::{Class, PortMaps};
use crate::ingress::fdb::Fdb;
use crate::ingress::{Arrival, Ingress};
use crate::mmu::{self, PgUse, PoolUse, PortUse, QueueUse, SharedPool};
use crate::shard::ShardLink;
use crate::wire::{ecn, FrameInfo};
use controlplane::{Config, NUM_TC};

pub use crate::egress::link::{ser_ps, LinkRate, WIRE_OVERHEAD_BYTES};
pub use crate::egress::port::port_mac;
pub use crate::egress::TxSink;

/// One switch (or one shard of one): the pipeline from a received frame to a transmitted one,
/// driven by the caller's `now`.
pub struct Switch {
    pub(crate) cfg: Config,
    pub(crate) ingress: Ingress,
    pub(crate) egress: Egress,
    pub(crate) pool: SharedPool,
    pub(crate) packets: PacketPool,
    /// Which ports are this shard's, and what waits to go to the other shards (`crate::shard`).
    pub(crate) shard: ShardLink,
}

/// The frames of one burst on one port at one time (`Switch::burst_rx`): the per-frame receive
/// path with what the burst shares, one parse result reused in place (`parse_into` overwrites
/// it whole), instead of a fresh one per frame, and admission once per run of frames to one
/// queue (`egress::run`), completed when it is dropped.
pub struct BurstRx<'s> {
    sw: &'s mut Switch,
    port: usize,
    now: u64,
    info: FrameInfo,
    /// Frames of this burst held for admission together (`egress::run`); admitted when the
    /// burst moves on, and at its end (`Drop`).
    run: Run,
}

impl Drop for BurstRx<'_> {
    fn drop(&mut self) {
        self.sw.admit_run(self.port, &mut self.run, self.now);
    }
}

impl BurstRx<'_> {
    /// Receives one frame (without FCS) of the burst.
    #[inline]
    pub fn receive(&mut self, frame: &[u8]) {
        self.sw.receive_one(
            self.port,
            frame,
            None::<&mut RxFrame<'_>>,
            self.now,
            &mut self.info,
            &mut self.run,
        );
    }

    /// Receives one frame of the burst as a backend hands it over: a frame whose buffer the
    /// backend gives away is kept in that buffer (zero copy); the switch takes it only if it
    /// queues the frame, so a dropped or copied frame's buffer stays with `frame` for the
    /// backend to take back ([`RxFrame::give_back`]).
    #[inline]
    pub fn receive_frame(&mut self, frame: &mut RxFrame<'_>) {
        let bytes = frame.bytes();
        // SAFETY: the bytes stay valid while `frame` or, once the switch took the buffer, the
        // packet slot holding it owns the buffer. `receive_one` reads them only before it
        // stores the frame (parse, MAC control); afterwards it reads the slot, and the buffer
        // is released only when that slot is freed.
        let bytes: &[u8] = unsafe { std::slice::from_raw_parts(bytes.as_ptr(), bytes.len()) };
        self.sw
            .receive_one(self.port, bytes, Some(frame), self.now, &mut self.info, &mut self.run);
    }

    /// Receives a burst whose buffers its backend lends ([`LentBurst`]): each frame the switch
    /// queues stays in its buffer (zero copy) when the burst lends; what it did not take stays
    /// in the burst for the backend ([`LentBurst::finish`]).
    #[inline]
    pub fn receive_lent(&mut self, burst: &mut LentBurst) {
        for i in 0..burst.len() {
            // SAFETY: i < len; as in `receive_frame`: the stages read the bytes only before the
            // frame is stored, the slot afterwards, and a buffer is released only when the
            // slot holding it is freed or, not taken, by the backend after this call.
            let bytes = unsafe { burst.bytes(i) };
            let mut held = LentFrame { burst: &mut *burst, i };
            self.sw.receive_one(
                self.port,
                bytes,
                Some(&mut held),
                self.now,
                &mut self.info,
                &mut self.run,
            );
        }
    }

    /// [`BurstRx::receive_frame`] for each frame of a burst a backend handed over at once.
    #[inline]
    pub fn receive_frames(&mut self, frames: &mut [RxFrame<'_>]) {
        for frame in frames {
            self.receive_frame(frame);
        }
    }
}

/// Where a received frame's buffer comes from when its backend lends it (zero copy): one
/// [`RxFrame`], or one frame of a [`LentBurst`]. The switch takes the buffer only if it stores
/// the frame, and puts it back if it then finds no slot for it.
pub(crate) trait Lender {
    /// The buffer, for the switch to keep; None when there is none to keep (copy the bytes).
    fn take(&mut self) -> Option<ForeignFrame>;
    /// Gives back a buffer `take` handed out.
    fn put_back(&mut self, f: ForeignFrame);
}

impl Lender for RxFrame<'_> {
    #[inline(always)]
    fn take(&mut self) -> Option<ForeignFrame> {
        RxFrame::take(self)
    }
    #[inline(always)]
    fn put_back(&mut self, f: ForeignFrame) {
        RxFrame::put_back(self, f)
    }
}

/// Frame `i` of a lent burst, as a [`Lender`].
struct LentFrame<'b> {
    burst: &'b mut LentBurst,
    i: usize,
}

impl Lender for LentFrame<'_> {
    #[inline(always)]
    fn take(&mut self) -> Option<ForeignFrame> {
        self.burst.take(self.i)
    }
    #[inline(always)]
    fn put_back(&mut self, f: ForeignFrame) {
        self.burst.put_back(self.i, f)
    }
}

/// Stores a frame the switch queues: in its backend's buffer when `held` gives one (zero
/// copy), else copied into the arena. None when no slot is free (the buffer, if any, stays
/// with `held` for its backend to take back).
#[inline(always)]
pub(crate) fn store<L: Lender>(packets: &mut PacketPool, frame: &[u8], held: Option<&mut L>) -> Option<u32> {
    if let Some(rx) = held {
        if let Some(f) = rx.take() {
            return match packets.alloc_foreign(f) {
                Ok(slot) => Some(slot),
                Err(f) => {
                    rx.put_back(f);
                    None
                }
            };
        }
    }
    packets.alloc_copy(frame)
}

impl Switch {
    /// A switch that owns every port: replay, the fabric, one worker.
    pub fn new(cfg: &Config, seed: u64) -> Self {
        Self::with_shard(cfg, seed, |_, _| ShardLink::single())
    }

    /// Shard `me` of `owners.len()`-port switch split over `shards` workers (`owners[i]`: the
    /// shard of port index i): every shard holds the whole config and its own buffers, and
    /// handles only its own ports (`crate::shard`).
    pub fn shard(cfg: &Config, seed: u64, me: u8, shards: u8, owners: &[u8]) -> Self {
        let mut sw = Self::with_shard(cfg, seed, |slots, ports| {
            ShardLink::sharded(me, shards, owners, slots, ports)
        });
        sw.ingress.fdb.announce_to_shards();
        sw
    }

    fn with_shard(cfg: &Config, seed: u64, link: impl FnOnce(usize, usize) -> ShardLink) -> Self {
        let (pool, pg_accounts, queue_accounts) = mmu::build(cfg);
        // Every queued frame holds at least as many cells as it takes units of the packet
        // arena, so the buffer bounds the units held; headroom for one burst per queue per port
        // and for fragmentation on top. A frame's slot is its first unit, so the egress queues'
        // descriptors take one entry per unit. `rocectl check` and `rocesw run` state (and
        // refuse, beyond the machine) the same figures (controlplane::memory).
        let mem = controlplane::memory::footprint(cfg);
        debug_assert!(mem.slots >= u64::from(pool.total_cells()) + (TX_BURST * NUM_TC * cfg.ports.len()) as u64);
        let slots = mem.slots as usize;
        let max_frame = mem.slot_bytes as usize;
        let head = mem.head_bytes as usize;
        Switch {
            ingress: Ingress::new(cfg, pg_accounts, slots),
            egress: Egress::new(cfg, queue_accounts, slots, seed),
            pool,
            packets: PacketPool::with_heads(slots, head, max_frame),
            cfg: cfg.clone(),
            shard: link(slots, cfg.ports.len()),
        }
    }

    /// Switches to a new config between two bursts, as the control plane asks. A frame is
    /// handled wholly under the old config or wholly under the new one; nothing queued is lost
    /// and every cell stays charged where it is (the accounts keep their counts, only limits
    /// change). Refused, with the reason, for what cannot change under traffic: what
    /// `controlplane::live_change_refusal` names (the one rule every path shares: buffer, the
    /// set of ports, a port's interface, captures and worker, `[run]`), and a largest frame
    /// beyond the packet buffers allocated at start.
    pub fn reconfigure(&mut self, cfg: &Config) -> Result<(), String> {
        if let Some(refusal) = controlplane::live_change_refusal(&self.cfg, cfg) {
            return Err(refusal);
        }
        if let Some((i, p)) = cfg
            .ports
            .iter()
            .enumerate()
            .find(|(_, p)| p.max_frame_bytes as usize > self.packets.slot_size())
        {
            return Err(format!(
                "port[{i}].mtu (port {}): frames up to {} B exceed the running switch's packet buffers (restart it)",
                p.id, p.max_frame_bytes
            ));
        }
        let (fresh_pool, fresh_in, fresh_out) = mmu::build(cfg);
        self.pool.resize(&fresh_pool);
        self.ingress.reconfigure(cfg, &fresh_in);
        self.egress.reconfigure(cfg, &fresh_out);
        self.cfg = cfg.clone();
        Ok(())
    }

    /// The config it runs now (the last one [`Self::reconfigure`] took).
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The classification maps of port index `port` (replay's peers and the emulated hosts
    /// use them to tell which priority a PFC pause holds, as a NIC set up for that port would).
    pub fn port_maps(&self, port: usize) -> &PortMaps {
        self.ingress.port_maps(port)
    }

    /// Ports in the config; port indices are 0..this.
    pub fn num_ports(&self) -> usize {
        self.ingress.ports.len()
    }

    /// The index of the port with config id `id`; `None` if the config has no such port.
    #[inline]
    pub fn port_index(&self, id: u16) -> Option<usize> {
        self.ingress.port_index(id)
    }

    /// The forwarding table, for reports (the control socket's FDB dump) and tests.
    pub fn fdb(&self) -> &Fdb {
        &self.ingress.fdb
    }

    /// Receives a burst of frames on port index `port` at `now`.
    pub fn receive_burst<'a>(&mut self, port: usize, frames: impl IntoIterator<Item = &'a [u8]>, now: u64) {
        let mut rx = self.burst_rx(port, now);
        for f in frames {
            rx.receive(f);
        }
    }

    /// A burst arriving on port index `port` at `now`, frame by frame: for port backends that
    /// hand their frames to a callback rather than as a list. The burst ends when the
    /// `BurstRx` is dropped: frames it still holds for admission together (`egress::run`)
    /// are admitted then, so drop it before anything else asks the switch (and never leak
    /// it: frames it held would keep their packet slots, and their backends' buffers).
    pub fn burst_rx(&mut self, port: usize, now: u64) -> BurstRx<'_> {
        BurstRx {
            sw: self,
            port,
            now,
            info: FrameInfo::EMPTY,
            run: Run::new(),
        }
    }

    /// Receives one frame (without FCS) on port index `port` at `now`.
    pub fn receive(&mut self, port: usize, frame: &[u8], now: u64) {
        self.burst_rx(port, now).receive(frame)
    }

    /// The per-frame receive path, inlined into the burst loop: the ingress side decides, the
    /// frame is stored in a packet slot (its backend's buffer when `held` gives it, else a
    /// copy), the egress side queues it, or holds it in `run` with the burst's other frames
    /// for the same queue to admit them together (`egress::run`).
    #[inline(always)]
    fn receive_one<L: Lender>(
        &mut self,
        port: usize,
        frame: &[u8],
        held: Option<&mut L>,
        now: u64,
        info: &mut FrameInfo,
        run: &mut Run,
    ) {
        let mut class = Class::UNCLASSIFIED;
        match self.ingress.receive(port, frame, now, info, &mut class) {
            Arrival::Done => {}
            Arrival::MacControl => {
                self.admit_run(port, run, now);
                if let Err(m) = self.egress.receive_mac_control(port, frame, now) {
                    self.ingress.ports[port].counters.malformed[m as usize] += 1;
                }
            }
            Arrival::Unicast(out) => {
                let (queue, pg) = (class.queue as usize, class.pg as usize);
                // The run's key was set below, for a port of this shard whose queue takes
                // runs (both fixed while a burst lasts): a frame with the same key joins
                // without asking either again.
                if !run.takes(out, queue, pg) {
                    self.admit_run(port, run, now);
                    if self.shard.is_remote(out) {
                        // Its PG is charged here, its queue there: held until the run is
                        // admitted, then charged and sent across together.
                        run.restart_crossing(out, queue, pg);
                    } else if !self.egress.runs_on(out, queue) {
                        let Some(slot) = store(&mut self.packets, frame, held) else {
                            return self.no_slot(port, class.pg);
                        };
                        self.rewrite(slot, frame.len(), info, &class);
                        let (egress, mut peers) = self.sides();
                        return egress.enqueue(&mut peers, port, out, slot, frame.len(), info, &class, now);
                    } else {
                        run.restart(out, queue, pg);
                    }
                }
                self.hold_in_run(port, out, frame, held, now, info, &class, run)
            }
            Arrival::Flood => {
                self.admit_run(port, run, now);
                self.flood(port, frame, held, info, class, now)
            }
        }
    }

    /// Stores a frame for `out` and the queue `run` is for, asks the CNP policer and the
    /// watchdog, and holds it in the run for admission.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn hold_in_run<L: Lender>(
        &mut self,
        port: usize,
        out: usize,
        frame: &[u8],
        mut held: Option<&mut L>,
        now: u64,
        info: &FrameInfo,
        class: &Class,
        run: &mut Run,
    ) {
        let slot = match store(&mut self.packets, frame, held.as_deref_mut()) {
            Some(slot) => slot,
            // Frames the run holds may yet be refused and give their slots back, as they
            // would have frame by frame by now: admit them, then try again.
            None => {
                self.admit_run(port, run, now);
                let Some(slot) = store(&mut self.packets, frame, held) else {
                    return self.no_slot(port, class.pg);
                };
                slot
            }
        };
        self.rewrite(slot, frame.len(), info, class);
        let f = RunFrame {
            slot,
            len: frame.len() as u16,
            cells: self.pool.cells_for(frame.len()) as u16,
            flags: if info.is_ect() { Desc::ECT } else { 0 } | if class.cnp { Desc::CNP } else { 0 },
        };
        if run.crosses() {
            return self.hold_crossing(f, info, class, run);
        }
        let (egress, mut peers) = self.sides();
        if egress.passes_refusal(&mut peers, port, out, slot, frame.len(), class, now) {
            run.push(f);
        }
    }

    /// Holds a stored frame in a run to another shard's port, its parse result and class
    /// beside it (`ShardLink::staged`). The CNP policer and the watchdog are the egress
    /// side's, asked there. Out of line: the local path's `hold_in_run` stays small.
    #[inline(never)]
    fn hold_crossing(&mut self, f: RunFrame, info: &FrameInfo, class: &Class, run: &mut Run) {
        self.shard.staged.push((*info, *class)); // as many as the run holds, at most
        run.push(f);
    }

    /// A frame for which no packet slot is left: dropped on its ingress PG.
    #[cold]
    fn no_slot(&mut self, port: usize, pg: u8) {
        self.ingress.drop_frame(port, pg, crate::counters::DropReason::NoBuffer);
    }

    /// Admits the frames `run` holds from `port` (`egress::run`).
    #[inline]
    fn admit_run(&mut self, port: usize, run: &mut Run, now: u64) {
        if !run.frames().is_empty() {
            if run.crosses() {
                return self.send_run_across(port, run, now);
            }
            let (egress, mut peers) = self.sides();
            egress.admit_run(&mut peers, port, run, now);
        }
    }

    /// Every other port gets a copy. The frame is charged to its PG once, for all its copies
    /// (`ingress::flood`: charged per copy, a frame flooded to n ports used n frames of the
    /// headroom sized for one); each copy is charged to its own egress queue and has its own
    /// buffer, since ECN marking rewrites in place: the received buffer (kept without a copy
    /// when its backend gives it) goes to the last port, and each other port gets a copy in
    /// the arena. One packet slot per queued frame is also what the egress queues are built on
    /// (`egress::queues`: a slot's entry holds one queued descriptor; debug builds check that
    /// no slot is queued twice). With two ports there is no flood: the ingress side sends the
    /// frame to the other port as unicast.
    /// Inlined into the receive path: called out of line, the class went through the stack in
    /// pieces and was read back wider (a store-forwarding stall per flooded frame).
    #[inline(always)]
    fn flood<L: Lender>(
        &mut self,
        port: usize,
        frame: &[u8],
        held: Option<&mut L>,
        info: &FrameInfo,
        class: Class,
        now: u64,
    ) {
        use crate::counters::DropReason;
        let n = self.num_ports();
        let last = n - if port == n - 1 { 2 } else { 1 };
        let (pg, cells) = (class.pg as usize & 7, self.pool.cells_for(frame.len()));
        if !self.charge_pg(port, pg, cells, now) {
            return;
        }
        let Some(group) = self.ingress.floods.open(port, pg, cells) else {
            // More floods out than packet slots: cannot happen (each holds a slot); refused.
            self.ingress.ports[port].counters.drops[DropReason::NoBuffer as usize] += 1;
            let (egress, mut peers) = self.sides();
            return egress.release_pg(&mut peers, port, pg, cells, true);
        };
        if let Some(first) = store(&mut self.packets, frame, held) {
            self.rewrite(first, frame.len(), info, &class);
            for out in (0..n).filter(|&o| o != port) {
                let slot = if out == last {
                    first
                } else {
                    match self.packets.clone_slot(first, frame.len()) {
                        Some(s) => s,
                        None => {
                            self.ingress.ports[port].counters.drops[DropReason::NoBuffer as usize] += 1;
                            continue;
                        }
                    }
                };
                if self.shard.is_remote(out) {
                    self.ingress.floods.hold(group);
                    self.send_across(port, out, slot, frame.len(), info, &class, group);
                    continue;
                }
                let (egress, mut peers) = self.sides();
                egress.enqueue_charged(&mut peers, port, out, slot, frame.len(), info, &class, now, group);
            }
        } else {
            self.ingress.ports[port].counters.drops[DropReason::NoBuffer as usize] += 1;
        }
        // The flood's own hold: with no copy queued anywhere, the frame was dropped whole.
        if let Some(end) = self.ingress.floods.release(group) {
            let (egress, mut peers) = self.sides();
            egress.release_pg(&mut peers, end.in_port, end.pg, end.cells, true);
        }
    }

    /// Charges a frame of `cells` received on `port` to its PG, or drops it there (counted):
    /// the ingress half of admission, for a frame whose egress half is elsewhere (another
    /// shard, or a flood's copies). Sends XOFF when the PG crosses its limit.
    pub(crate) fn charge_pg(&mut self, port: usize, pg: usize, cells: u32, now: u64) -> bool {
        let ing = &mut self.ingress.ports[port];
        let region = match ing.buffers.reserve(pg, cells, &mut self.pool) {
            Ok(r) => r,
            Err(reason) => {
                ing.drop_frame(pg as u8, reason);
                return false;
            }
        };
        if ing.buffers.confirm(pg, region, &mut self.pool) {
            let prios = self.ingress.pg_prios[port][pg];
            if let Some(req) = self.ingress.ports[port].xoff(pg, prios, now) {
                self.egress.queue_pfc(port, req);
            }
        }
        true
    }

    /// Slots holding a frame in a port backend's buffer (zero copy) rather than a copy.
    pub fn foreign_held(&self) -> usize {
        self.packets.foreign_held()
    }

    /// The egress side, and what it shares with the rest of the switch (disjoint borrows).
    #[inline(always)]
    pub(crate) fn sides(&mut self) -> (&mut Egress, Peers<'_>) {
        (
            &mut self.egress,
            Peers {
                ingress: &mut self.ingress,
                pool: &mut self.pool,
                packets: &mut self.packets,
                shard: &mut self.shard,
            },
        )
    }

    #[inline]
    pub(crate) fn rewrite(&mut self, slot: u32, len: usize, info: &FrameInfo, class: &Class) {
        if let Some(dscp) = class.set_dscp() {
            ecn::set_dscp(self.packets.get_mut(slot, len), info, dscp);
        }
    }

    /// Lets port index `port` transmit what it can by `now`: PFC frames first, then data in
    /// scheduler order, one after another at line rate. Returns frames sent.
    pub fn transmit(&mut self, port: usize, now: u64, sink: &mut impl TxSink) -> usize {
        let (egress, mut peers) = self.sides();
        egress.transmit(&mut peers, port, now, sink)
    }

    /// Runs the timers due at `now`: PFC refresh (ingress), watchdog detection and restoration
    /// (egress).
    ///
    /// Only this shard's ports, and only what is running (a PG in XOFF, a paused or watched
    /// queue): it runs every round of a worker, which with frames crossing between shards may
    /// carry few frames.
    pub fn poll(&mut self, now: u64) {
        for port in 0..self.num_ports() {
            if self.shard.is_remote(port) {
                continue;
            }
            if self.ingress.ports[port].pfc_gen.any_xoff() {
                for pg in 0..NUM_TC {
                    let prios = self.ingress.pg_prios[port][pg];
                    if let Some(req) = self.ingress.ports[port].refresh(pg, prios, now, &self.pool) {
                        self.egress.queue_pfc(port, req);
                    }
                }
            }
            let (egress, mut peers) = self.sides();
            egress.poll_watchdog(&mut peers, port, now);
        }
    }

    /// True when no frame is queued and no PFC frame waits to be sent.
    pub fn is_idle(&self) -> bool {
        self.egress.is_idle()
    }

    /// Frames queued on ports whose transmit is off (`[[port]] tx = "off"`), when nothing else
    /// is left to send; None while anything else waits.
    pub fn held_by_tx_off(&self) -> Option<u64> {
        self.egress.held_by_tx_off()
    }

    /// The earliest time after which calling `poll`/`transmit` may change something, given that
    /// nothing new arrives. Replay jumps its virtual clock there.
    pub fn next_event(&self, now: u64) -> Option<u64> {
        let mut next: Option<u64> = None;
        let mut at = |t: u64| next = Some(next.map_or(t, |n: u64| n.min(t)));
        self.egress.next_event(now, &mut at);
        for p in &self.ingress.ports {
            if let Some(t) = p.next_refresh() {
                at(t.max(now));
            }
        }
        next
    }

    /// Whether the egress ports send a queue's frames by batch where they can (the default)
    /// or each frame through the scheduler on its own. The two send the same frames at the
    /// same times with the same marks (`tests/transmit_batch_props.rs` holds them to it);
    /// frame by frame is there to compare against, in that test and in benchmarks.
    #[doc(hidden)]
    pub fn set_transmit_by_batch(&mut self, on: bool) {
        self.egress.set_by_batch(on);
    }

    // Read access for reports, watermarks and tests: each figure from its owner.

    /// Frames port index `port`'s receive ring lost before the switch read them (its backend
    /// counted them): a drop like any other, on the port (`DropReason::RxRing`).
    pub fn count_rx_ring_drops(&mut self, port: usize, frames: u64) {
        self.ingress.ports[port].counters.drops[crate::counters::DropReason::RxRing as usize] += frames;
    }

    /// A port's counters: what its ingress side and its egress side counted, summed (each
    /// field has one writer, so the sum is that writer's count).
    pub fn port_counters(&self, port: usize) -> PortCounters {
        self.ingress.ports[port]
            .counters
            .merged(&self.egress.ports[port].counters)
    }
    /// Time each priority of port index `port`'s egress was paused by received PFC, ns, the pause
    /// still running at `now` included.
    pub fn port_paused_ns(&self, port: usize, now: u64) -> [u64; NUM_TC] {
        let p = &self.egress.ports[port];
        p.pause.total_paused(now, &p.counters.paused_ns)
    }
    /// When each priority of port index `port`'s egress stops being paused by the PFC it
    /// received (at or before `now` when it is not paused). For reports, never the packet path.
    pub fn port_paused_until(&self, port: usize) -> [u64; NUM_TC] {
        let p = &self.egress.ports[port];
        std::array::from_fn(|prio| p.pause.until(prio))
    }
    /// Port index `port`'s PGs in XOFF, one bit per PG.
    pub fn pg_xoff_mask(&self, port: usize) -> u8 {
        let g = &self.ingress.ports[port].pfc_gen;
        (0..NUM_TC).fold(0, |m, pg| m | (u8::from(g.is_xoff(pg)) << pg))
    }
    /// The priorities each PG's PFC frames name on port index `port`, one bit per priority.
    pub fn pg_priorities(&self, port: usize) -> [u8; NUM_TC] {
        self.ingress.pg_prios[port]
    }
    /// Port index `port`'s PFC watchdog storms and restorations so far, per priority.
    pub fn watchdog_counts(&self, port: usize) -> (&[u64; NUM_TC], &[u64; NUM_TC]) {
        let c = &self.egress.ports[port].counters;
        (&c.watchdog_storms, &c.watchdog_restores)
    }
    /// Per priority: whether port index `port`'s egress is paused by received PFC at `now`, and
    /// whether the PFC watchdog holds the priority's queue in a storm.
    pub fn port_pause_state(&self, port: usize, now: u64) -> ([bool; NUM_TC], [bool; NUM_TC]) {
        let (paused, storm) = self.egress.pause_state(port, now);
        let bits = |m: u8| std::array::from_fn(|p| m & (1 << p) != 0);
        (bits(paused), bits(storm))
    }
    /// Port index `port`'s egress queue counters.
    pub fn queue_counters(&self, port: usize) -> &[QueueCounters; NUM_TC] {
        &self.egress.ports[port].queue_counters
    }
    /// Port index `port`'s ingress PG counters.
    pub fn pg_counters(&self, port: usize) -> &[PgCounters; NUM_TC] {
        &self.ingress.ports[port].pg_counters
    }
    /// The config id of port index `port`.
    pub fn port_id(&self, port: usize) -> u16 {
        self.ingress.ports[port].id
    }
    /// Frames egress queue `q` of port index `port` holds.
    pub fn queue_len(&self, port: usize, q: usize) -> usize {
        self.egress.ports[port].len(q)
    }
    /// Cells PG `pg` of port index `port` holds, by region, with peaks.
    pub fn pg_use(&self, port: usize, pg: usize) -> &PgUse {
        self.ingress.ports[port].buffers.pg(pg)
    }
    /// Cells and bytes egress queue `q` of port index `port` holds, with peaks.
    pub fn queue_use(&self, port: usize, q: usize) -> &QueueUse {
        self.egress.ports[port].buffers.queue(q)
    }
    /// Cells port index `port` holds on each side, with peaks.
    pub fn port_use(&self, port: usize) -> PortUse {
        let (ingress_cells, peak_ingress_cells) = self.ingress.ports[port].buffers.cells();
        let (egress_cells, peak_egress_cells) = self.egress.ports[port].buffers.cells();
        PortUse {
            ingress_cells,
            peak_ingress_cells,
            egress_cells,
            peak_egress_cells,
        }
    }
    /// The shared pool's figures, in cells.
    pub fn pool_use(&self) -> PoolUse {
        self.pool.usage()
    }
    /// Pool `i` of direction `dir` (its index among the config's pools of that direction), in
    /// cells: (size, use, peak use), and for an ingress pool its shared headroom pool's.
    pub fn pool_figures(&self, dir: controlplane::model::PoolDir, i: usize) -> ([u32; 3], [u32; 3]) {
        self.pool.pool(dir, i)
    }
    /// Bytes per buffer cell, a power of two.
    pub fn cell_bytes(&self) -> u32 {
        self.pool.cell_bytes()
    }
    /// True when no cell is charged anywhere: what "cells are conserved" means.
    pub fn buffers_empty(&self) -> bool {
        self.pool.is_empty()
            && self.ingress.ports.iter().all(|p| p.buffers.is_empty())
            && self.egress.ports.iter().all(|p| p.buffers.is_empty())
    }
    /// Where the buffer counts disagree with one another (`mmu::audit`): empty unless a
    /// release returned more than was charged somewhere (clamped at zero in release builds,
    /// a panic in debug ones), so such a bug shows instead of hiding.
    pub fn accounting_errors(&self) -> Vec<String> {
        mmu::audit(
            &self.pool,
            self.ingress.ports.iter().map(|p| &p.buffers),
            self.egress.ports.iter().map(|p| &p.buffers),
        )
    }
    /// Starts every peak afresh from the current use: the control plane reads the peaks and
    /// restarts them in one step and keeps the user and persistent watermarks itself
    /// (`report::watermarks`), so clearing costs the packet path nothing.
    pub fn restart_peaks(&mut self) {
        self.pool.restart_peaks();
        for p in &mut self.ingress.ports {
            p.buffers.restart_peaks();
        }
        for p in &mut self.egress.ports {
            p.buffers.restart_peaks();
        }
    }
    /// Packet slots free.
    pub fn free_buffers(&self) -> usize {
        self.packets.available()
    }
    /// Faults the packet arena and its bookkeeping in (`rocesw run`: no page fault on the
    /// packet path; the size classes take the arena's chunks without allocating); replay and
    /// the simulations leave the arena's pages to be mapped as frames arrive.
    pub fn prefault(&mut self) {
        self.packets.prefault();
    }

    /// Bytes the packet pool's classes of more than one unit hold for frames longer than a
    /// cell.
    pub fn class_bytes(&self) -> usize {
        self.packets.class_bytes()
    }

    /// Packet slots in all: the most frames the switch can hold at once.
    pub fn buffer_capacity(&self) -> usize {
        self.packets.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::DropReason;

    /// The default config with two ports (a frame to an unknown address goes to the other
    /// one) and queue 0 (lossy) limited to `limit` of shared buffer.
    fn two_ports_queue0_limited(limit: &str) -> Config {
        let default = include_str!("../../configs/default.toml");
        let text = default.replace("[[port]]\nid = 2\n\n[[port]]\nid = 3\n", "").replace(
            "alpha = 1                # may take up to the free shared pool; drops beyond it",
            &format!("static = \"{limit}\""),
        );
        assert_eq!(
            text.matches("\n[[port]]\n").count(),
            2,
            "configs/default.toml changed shape"
        );
        assert!(text.contains("static = "), "configs/default.toml changed shape");
        controlplane::load_str(&text).expect("the test config loads").config
    }

    /// `n` RoCEv2 frames of `len` bytes with `dscp` and `ecn`, from host 1 to host 2.
    fn frames(dscp: u8, ecn: crate::wire::Ecn, len: usize, n: u64) -> Vec<Vec<u8>> {
        crate::tools::gen::Flow {
            src: 1,
            dst: 2,
            dscp,
            ecn,
            qp: 1,
            frame_len: len,
            count: n,
            start_ns: 0,
            rate_bps: 25_000_000_000,
        }
        .frames()
        .expect("the flow builds")
        .into_iter()
        .map(|(_, f)| f)
        .collect()
    }

    /// `n` lossy 64-byte frames (DSCP 0: queue 0, PG 0) from host 1 to host 2.
    fn lossy_frames(n: u64) -> Vec<Vec<u8>> {
        frames(0, crate::wire::Ecn::NotEct, 64, n)
    }

    /// What port 0's ingress and port 1's queue 0 counted, and what queue 0 holds.
    fn outcome(sw: &Switch) -> (u64, u64, u64, usize) {
        let rx = sw.port_counters(0);
        let tx = sw.port_counters(1);
        (
            rx.rx_packets,
            tx.drops[DropReason::EgressLimit as usize],
            rx.drops[DropReason::NoBuffer as usize],
            sw.queue_len(1, 0),
        )
    }

    /// A frame that finds no packet slot while the burst's run holds frames not yet admitted
    /// (`receive_one`): the run is admitted first, and the frames the queue's limit refuses give
    /// their slots back, so the frame is stored after all, as it would have been had the burst
    /// come frame by frame. Here 4 slots, a queue limit of 2 cells and a burst of 6 frames:
    /// frame 5 finds the 4 slots held by the run; admitting it queues 2 and frees 2. Without
    /// the second try, frames 5 and 6 would be dropped as `no_buffer` instead of by the limit.
    #[test]
    fn a_frame_finding_no_slot_behind_a_held_run_is_stored_once_the_run_is_admitted() {
        let cfg = two_ports_queue0_limited("512B"); // 2 cells of 256 B
        let frames = lossy_frames(6);
        let small = |cfg: &Config| {
            let mut sw = Switch::new(cfg, 1);
            sw.packets = PacketPool::new(4, sw.packets.slot_size());
            sw
        };

        let mut burst = small(&cfg);
        burst.receive_burst(0, frames.iter().map(|f| &f[..]), 0);
        let mut one_by_one = small(&cfg);
        for f in &frames {
            one_by_one.receive(0, f, 0);
        }

        assert_eq!(
            outcome(&one_by_one),
            (6, 4, 0, 2),
            "frame by frame: 2 queued, 4 over the limit"
        );
        assert_eq!(outcome(&burst), outcome(&one_by_one), "the burst as frame by frame");
        assert_eq!(burst.packets.available(), 2, "only the 2 queued frames hold slots");
    }

    /// WRED at dequeue sees each frame's own depth when a queue sends a run of frames in one
    /// transmit call, though the run's cells and bytes go back to the queue's account only
    /// when it stops sending (`egress::QueueRelease`). A step at 5000 B (kmin = kmax, pmax 1):
    /// of ten 1000-byte ECT frames, the six that leave with 5000 B or more queued (themselves
    /// included) are marked CE, the four after them not.
    #[test]
    fn wred_at_dequeue_sees_the_depth_each_frame_of_a_run_leaves_behind() {
        let default = include_str!("../../configs/default.toml");
        let text = default.replace("[[port]]\nid = 2\n\n[[port]]\nid = 3\n", "").replace(
            "kmin = \"100KB\"\nkmax = \"400KB\"\npmax = 0.2",
            "kmin = \"5000B\"\nkmax = \"5000B\"\npmax = 1.0",
        );
        assert!(text.contains("kmax = \"5000B\""), "configs/default.toml changed shape");
        assert!(
            text.contains("mark_at = \"dequeue\""),
            "configs/default.toml changed shape"
        );
        let cfg = controlplane::load_str(&text).expect("the test config loads").config;
        let lossless = frames(26, crate::wire::Ecn::Ect0, 1000, 10);
        let mut sw = Switch::new(&cfg, 1);
        sw.receive_burst(0, lossless.iter().map(|f| &f[..]), 1_000);
        let mut ce = Vec::new();
        let mut sink = |_: usize, f: &[u8], _: u64| ce.push(f[15] & 3 == 3);
        // The first call starts the link (one frame); the second sends the other nine back to
        // back from the same queue.
        sw.transmit(1, 1_000, &mut sink);
        sw.transmit(1, 1_000_000, &mut sink);
        assert_eq!(
            ce,
            [true, true, true, true, true, true, false, false, false, false],
            "CE marks in the order sent"
        );
    }

    /// 512 ports (SONiC names up to Ethernet2044): a frame from an unknown host on the last
    /// port floods to the other 511, and the reply comes back to it alone. Frames longer than
    /// a unit (1000 B in 256 B cells) come and go through the size classes.
    #[test]
    fn five_hundred_and_twelve_ports_forward_and_flood() {
        let default = include_str!("../../configs/default.toml");
        let ports: String = (0..512)
            .map(|i| format!("[[port]]\nid = {}\nname = \"Ethernet{}\"\n\n", 4 * i, 4 * i))
            .collect();
        let four = "[[port]]\nid = 0\n\n[[port]]\nid = 1\n\n[[port]]\nid = 2\n\n[[port]]\nid = 3\n\n";
        assert!(default.contains(four), "configs/default.toml changed shape");
        let text = default
            .replace(four, &ports)
            .replace("size = \"4MiB\"", "size = \"64MiB\"");
        let cfg = controlplane::load_str(&text).expect("512 ports load").config;
        assert_eq!(cfg.ports.len(), 512);
        assert_eq!(cfg.ports[511].name.as_deref(), Some("Ethernet2044"));
        let mut sw = Switch::new(&cfg, 1);
        assert_eq!(sw.packets.head_size(), 256);

        // Host 1 on the last port, to host 2, unknown: flooded to every other port.
        let there = frames(0, crate::wire::Ecn::NotEct, 1000, 1);
        sw.receive_burst(511, there.iter().map(|f| &f[..]), 0);
        let mut sent = vec![0u32; 512];
        for port in 0..512 {
            sw.transmit(port, 1_000_000, &mut |p: usize, f: &[u8], _: u64| {
                assert_eq!(f, &there[0][..]);
                sent[p] += 1;
            });
        }
        assert_eq!(sent[511], 0);
        assert!(sent[..511].iter().all(|&n| n == 1), "one copy to each other port");
        assert!(sw.class_bytes() > 0, "1000 B frames live in a size class");

        // Host 2's reply on port 3 goes to the last port alone (learnt there).
        let back: Vec<Vec<u8>> = frames(0, crate::wire::Ecn::NotEct, 64, 1)
            .into_iter()
            .map(|mut f| {
                let (dst, src) = f.split_at_mut(6);
                dst.swap_with_slice(&mut src[..6]);
                f
            })
            .collect();
        sw.receive_burst(3, back.iter().map(|f| &f[..]), 2_000_000);
        let mut got = Vec::new();
        for port in 0..512 {
            sw.transmit(port, 3_000_000, &mut |p: usize, _: &[u8], _: u64| got.push(p));
        }
        assert_eq!(got, [511]);
        assert_eq!(sw.free_buffers(), sw.buffer_capacity(), "every slot back");
    }
}
