//! The transmit side of the switch: admission to an egress queue, WRED-ECN, the scheduler at
//! the port's line rate, pause reception and the PFC watchdog.
//!
//! [`Egress`] owns every egress port's state ([`port::EgressPort`]), the descriptors of every
//! queued frame ([`queues::DescStore`]: one per packet slot, shared by all queues) and WRED's
//! random stream.
//! It reaches the ingress side only with messages (calls today): admission asks the ingress
//! PG first (`mmu::admit`), an XOFF asks the ingress port's own link to carry a PFC frame, and
//! a frame that leaves (or is dropped after admission) releases its cells on the ingress side
//! ([`crate::ingress::port::IngressPort::release`]).

mod batch;
pub mod link;
pub mod port;
pub mod queues;
pub mod rng;
pub(crate) mod run;
pub mod sched;
pub mod token_bucket;
pub mod wred;

use crate::buffers::foreign::ForeignFrame;
use crate::buffers::pool::{PacketPool, Taken};
use crate::counters::DropReason;
use crate::ingress::classify::Class;
use crate::ingress::flood::NO_GROUP;
use crate::ingress::Ingress;
use crate::mmu::{self, SharedPool};
use crate::pfc::{PfcRequest, WatchdogEvent};
use crate::shard::{Release, ShardLink};
use crate::wire::{self, ecn, FrameInfo, MacControl};
use batch::{BatchBound, BatchEnd};
use controlplane::{Config, MarkPoint, NUM_TC};
use port::{Desc, EgressPort};
use queues::DescStore;
use rng::Rng;
use wred::Verdict;

const PS_PER_NS: u64 = 1000;
/// Frames a port sends per `transmit` call at most: bounds a worker's time on one port.
pub const TX_BURST: usize = 32;
// The control plane's memory estimate sizes buffers with the same burst.
const _: () = assert!(TX_BURST as u64 == controlplane::memory::BURST_FRAMES);

/// Where transmitted frames go: a port backend, a pcap writer, a test.
pub trait TxSink {
    /// `frame` leaves `port` (index) starting at `at_ns`. The slice is valid only during the call.
    /// Called at most [`TxSink::room`] times per `transmit` of the switch.
    fn transmit(&mut self, port: usize, frame: &[u8], at_ns: u64);
    /// How many frames `port` can take now (its transmit ring's free slots). The switch sends
    /// no more: the rest stay queued and accounted, so a port that stops taking frames backs up
    /// into the MMU and PFC as in an ASIC, instead of losing what already left its queue.
    fn room(&mut self, _port: usize) -> usize {
        usize::MAX
    }
    /// As [`TxSink::transmit`], for a frame in a buffer its port backend owns (received without
    /// a copy): the sink takes the buffer, to send as it is where it can. By default it sends a
    /// copy and releases the buffer. Counts against [`TxSink::room`] like `transmit`.
    fn transmit_owned(&mut self, port: usize, frame: ForeignFrame, at_ns: u64) {
        self.transmit(port, frame.bytes(), at_ns);
    }
    /// Whether `port`'s PFC frames reach its peer even when [`TxSink::room`] is 0. An emulated
    /// peer hears the switch's PFC on its emulated wire (`rocesw run`'s emulated links), however
    /// full its host's receive queue: a VM that stops reading must still be paused, or what it
    /// wrote before would run into the headroom.
    fn pfc_needs_no_room(&mut self, _port: usize) -> bool {
        false
    }
}

impl<F: FnMut(usize, &[u8], u64)> TxSink for F {
    fn transmit(&mut self, port: usize, frame: &[u8], at_ns: u64) {
        self(port, frame, at_ns)
    }
}

/// What the egress side shares with the rest of the switch: the pool's occupancy (its own
/// view written here), the packet buffers, the ingress side to send releases to, and the
/// other shards (releases of frames that crossed from them).
pub(crate) struct Peers<'a> {
    pub ingress: &'a mut Ingress,
    pub pool: &'a mut SharedPool,
    pub packets: &'a mut PacketPool,
    pub shard: &'a mut ShardLink,
}

/// Ingress cells of frames sent one after another from one PG (not in XOFF) of this shard,
/// waiting to go back together (`Egress::release_sent`).
#[derive(Debug, Clone, Copy)]
struct PendingRelease {
    in_port: usize,
    pg: usize,
    cells: u32,
    dropped: u64,
}

impl PendingRelease {
    /// Nothing waiting.
    const NONE: PendingRelease = PendingRelease {
        in_port: usize::MAX,
        pg: 0,
        cells: 0,
        dropped: 0,
    };
}

/// Egress cells and bytes of the frames one queue sent (or WRED dropped) back to back in a
/// transmit call, waiting to leave its account together (`Egress::return_queue`): one
/// release of six counts per run of frames instead of per frame. Exact: a queue gives its
/// cells back from shared first, then from min, so a sum returned at once leaves every count
/// as frame by frame would; WRED at dequeue, the one reader of the queue's depth meanwhile,
/// subtracts what waits here; and the pool's figures, which a PG's XON check reads, are whole
/// again before any release that could check (`Egress::release_sent`'s slow path) and when
/// the queue stops sending.
#[derive(Debug, Clone, Copy, Default)]
struct QueueRelease {
    cells: u32,
    bytes: u64,
}

impl QueueRelease {
    /// Adds `d`'s cells and bytes.
    #[inline(always)]
    fn add(&mut self, d: &Desc) {
        self.cells += d.cells as u32;
        self.bytes += d.len as u64;
    }
}

/// What frames sent in a transmit call give back later, together: their PG's cells
/// ([`PendingRelease`]) and their queue's ([`QueueRelease`]).
#[derive(Debug, Clone, Copy)]
struct Waiting {
    pg: PendingRelease,
    queue: QueueRelease,
}

impl Waiting {
    /// Nothing waiting.
    const NONE: Waiting = Waiting {
        pg: PendingRelease::NONE,
        queue: QueueRelease { cells: 0, bytes: 0 },
    };

    /// Whether `d`'s release joins what waits: a frame from the same PG, not a flooded copy
    /// (the PG is known not to be in XOFF and to be this shard's: it was when it started).
    #[inline(always)]
    fn takes(&self, d: &Desc) -> bool {
        self.pg.in_port == d.in_port as usize && self.pg.pg == d.pg as usize && !d.has(Desc::FLOOD)
    }

    /// Adds `d`'s release to what waits, on both sides.
    #[inline(always)]
    fn add(&mut self, d: &Desc, dropped: bool) {
        self.queue.add(d);
        self.pg.cells += d.cells as u32;
        self.pg.dropped += dropped as u64;
    }
}

/// Sends `d`, just dequeued from queue `q` of `port` (`p`) and released, at `t_ns`: EDF's
/// deadline and tag, the shaper, the counters, the frame to the sink. Returns its time on the
/// wire.
#[inline(always)]
fn send(
    p: &mut EgressPort,
    peers: &mut Peers<'_>,
    port: usize,
    q: usize,
    d: &Desc,
    t_ns: u64,
    sink: &mut impl TxSink,
) -> u64 {
    let len = d.len as usize;
    if let Some(e) = p.edf.as_ref().filter(|e| e.is_regulated(q)) {
        p.queue_counters[q].edf_deadline_misses += u64::from(t_ns > d.deadline);
        if d.has(Desc::TAGGED) && e.tag_unit > 0 {
            rewrite_tag(peers.packets.get_mut(d.slot, len), d.deadline, t_ns, e.tag_unit);
        }
    }
    if let Some(s) = p.shapers[q].as_mut() {
        s.charge(t_ns, len as u32);
    }
    p.counters.tx_packets += 1;
    p.counters.tx_bytes += len as u64;
    p.queue_counters[q].tx_packets += 1;
    p.queue_counters[q].tx_bytes += len as u64;
    // A frame in its backend's buffer leaves in it (zero copy); a copy leaves its slot.
    match peers.packets.take(d.slot, len) {
        Taken::Arena(frame) => sink.transmit(port, frame, t_ns),
        Taken::Foreign(f) => sink.transmit_owned(port, f, t_ns),
    }
    p.rate.ser_ps(len)
}

/// Tells the shard that owns ingress port `in_port` that a frame of its PG `pg` (in this
/// shard's packet slot `slot`) left or was dropped: its cells and the slot that held its
/// bytes there go back with the next batch.
#[inline]
fn send_release(peers: &mut Peers<'_>, in_port: usize, pg: usize, cells: u32, dropped: bool, slot: u32, group: u32) {
    let home = std::mem::replace(&mut peers.shard.homes[slot as usize], Release::NO_HOME);
    peers.shard.outbox_for(in_port).push_release(Release {
        in_port: in_port as u16,
        pg: pg as u8,
        dropped,
        cells: cells as u16,
        home,
        group,
    });
}

/// The egress side of every port: queue admission, WRED, pause reception, scheduling and
/// transmission.
pub struct Egress {
    pub(crate) ports: Vec<EgressPort>,
    /// The descriptors of every port's queues, one entry per packet slot.
    descs: DescStore,
    /// Priorities (bit mask) whose frames sit in each queue: what a received PFC pauses.
    queue_prios: [u8; NUM_TC],
    /// Per packet slot holding a flooded copy ([`Desc::FLOOD`]): its flood group, at the
    /// shard owning the frame's ingress port (`ingress::flood`).
    flood_of: Box<[u32]>,
    /// Whether a queue's frames go by batch where they can ([`batch`]); off only for the test
    /// that holds the batches to the frame-by-frame path and for benchmarks of the two.
    by_batch: bool,
}

/// Priorities with PFC, as a bit mask.
fn pfc_priorities(cfg: &Config) -> u8 {
    (0..NUM_TC).filter(|&p| cfg.pfc.enabled[p]).fold(0u8, |m, p| m | 1 << p)
}

/// Per queue, the priorities whose frames it holds (what a received PFC pauses).
fn queue_priorities(cfg: &Config) -> [u8; NUM_TC] {
    let mut queue_prios = [0u8; NUM_TC];
    for prio in 0..NUM_TC {
        queue_prios[cfg.classify.tc_to_queue[prio] as usize & 7] |= 1 << prio;
    }
    queue_prios
}

/// Queues that carry PFC-enabled priorities: the ones the watchdog watches.
fn lossless_queue_mask(cfg: &Config, queue_prios: &[u8; NUM_TC]) -> u8 {
    let pfc = pfc_priorities(cfg);
    (0..NUM_TC)
        .filter(|&q| queue_prios[q] & pfc != 0)
        .fold(0, |m, q| m | 1 << q)
}

impl Egress {
    /// `packet_slots`: the packet pool's capacity, which bounds the frames queued at once.
    pub(crate) fn new(cfg: &Config, accounts: Vec<mmu::QueueAccount>, packet_slots: usize, seed: u64) -> Self {
        let queue_prios = queue_priorities(cfg);
        let lossless = lossless_queue_mask(cfg, &queue_prios);
        let ports = cfg
            .ports
            .iter()
            .zip(accounts)
            .enumerate()
            .map(|(i, (p, a))| EgressPort::new(p, cfg, a, lossless, Rng::for_port(seed, i)))
            .collect();
        Egress {
            ports,
            descs: DescStore::new(packet_slots),
            queue_prios,
            flood_of: vec![NO_GROUP; packet_slots].into_boxed_slice(),
            by_batch: true,
        }
    }

    /// Whether queues send by batch where they can (the default) or frame by frame: for the
    /// test that holds the two to the same output, and for benchmarks of the two.
    pub(crate) fn set_by_batch(&mut self, on: bool) {
        self.by_batch = on;
    }

    /// Takes a new config (same ports): QoS swapped, queued frames, counts, pause and storm
    /// state kept.
    pub(crate) fn reconfigure(&mut self, cfg: &Config, fresh: &[mmu::QueueAccount]) {
        let queue_prios = queue_priorities(cfg);
        let lossless = lossless_queue_mask(cfg, &queue_prios);
        for ((p, pc), a) in self.ports.iter_mut().zip(&cfg.ports).zip(fresh) {
            p.set_qos(pc, cfg);
            p.retune_edf(pc, &mut self.descs);
            p.buffers.set_limits(a);
            p.watchdog = match (p.watchdog.take(), cfg.pfc.watchdog.clone()) {
                (Some(mut w), Some(c)) => {
                    w.reconfigure(c, lossless);
                    Some(w)
                }
                (None, Some(c)) => Some(crate::pfc::Watchdog::new(c, lossless)),
                (_, None) => None,
            };
        }
        self.queue_prios = queue_prios;
    }

    /// Drops a frame that was about to be queued: counted on the egress port and queue (where a
    /// switch reports drops) and on the ingress PG.
    #[allow(clippy::too_many_arguments)]
    fn drop_frame(
        &mut self,
        ingress: &mut Ingress,
        in_port: usize,
        out: usize,
        queue: usize,
        pg: usize,
        len: usize,
        reason: DropReason,
    ) {
        self.count_drop(out, queue, len, reason);
        ingress.ports[in_port].count_dropped(pg);
    }

    /// Why the egress port refuses a frame before any accounting: the CNP policer, a queue the
    /// watchdog is dropping.
    #[inline(always)]
    fn refusal(&mut self, out: usize, queue: usize, len: usize, class: &Class, now: u64) -> Option<DropReason> {
        let o = &mut self.ports[out];
        if class.cnp && o.cnp_policer.as_mut().is_some_and(|tb| !tb.take(now, len as u32)) {
            Some(DropReason::Policer)
        } else if o.watchdog.as_ref().is_some_and(|w| w.drops(queue)) {
            Some(DropReason::PfcWatchdog)
        } else {
            None
        }
    }

    /// Queues a frame (in packet slot `slot`) from `in_port` on `out`, both ports this shard's:
    /// CNP policer, watchdog, admission (ingress PG, then egress queue), XOFF, WRED at enqueue.
    /// Inlined into the receive path (a call per frame, with eight arguments, cost more than
    /// the code it saved).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) fn enqueue(
        &mut self,
        peers: &mut Peers<'_>,
        in_port: usize,
        out: usize,
        slot: u32,
        len: usize,
        info: &FrameInfo,
        class: &Class,
        now: u64,
    ) {
        if !self.passes_refusal(peers, in_port, out, slot, len, class, now) {
            return;
        }
        let (queue, pg) = (class.queue as usize & 7, class.pg as usize & 7);
        let cells = peers.pool.cells_for(len);
        if !self.admit(peers, in_port, out, queue, pg, slot, len, cells, now) {
            return;
        }
        self.queue_admitted(peers, in_port, out, slot, len, cells, info, class, now, NO_GROUP);
    }

    /// Admits a stored frame on both sides (`mmu::admit`) and asks for the XOFF its PG may
    /// want; false when refused (its slot freed, the drop counted where it was decided).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn admit(
        &mut self,
        peers: &mut Peers<'_>,
        in_port: usize,
        out: usize,
        queue: usize,
        pg: usize,
        slot: u32,
        len: usize,
        cells: u32,
        now: u64,
    ) -> bool {
        let ing = &mut peers.ingress.ports[in_port];
        let o = &mut self.ports[out];
        let admitted = match mmu::admit(
            &mut ing.buffers,
            pg,
            &mut o.buffers,
            queue,
            peers.pool,
            cells,
            len as u32,
        ) {
            Ok(a) => a,
            Err(reason @ (DropReason::HeadroomOverflow | DropReason::IngressLimit)) => {
                // Refused by the ingress PG: counted where it was decided, on the ingress port
                // and PG (where SONiC's PG drop counters are), not on the egress queue.
                peers.packets.free(slot);
                peers.ingress.ports[in_port].drop_frame(pg as u8, reason);
                return false;
            }
            Err(reason) => {
                peers.packets.free(slot);
                self.drop_frame(peers.ingress, in_port, out, queue, pg, len, reason);
                return false;
            }
        };
        if admitted.wants_xoff {
            let prios = peers.ingress.pg_prios[in_port][pg];
            if let Some(req) = peers.ingress.ports[in_port].xoff(pg, prios, now) {
                self.ports[in_port].queue_pfc(req);
            }
        }
        true
    }

    /// Whether a frame for `queue` of `out` may wait in a [`run::Run`]: its descriptor is then
    /// all [`Egress::queue_admitted`] would write (no EDF deadline, no WRED at enqueue).
    #[inline(always)]
    pub(crate) fn runs_on(&self, out: usize, queue: usize) -> bool {
        self.ports[out].plain_enqueue & (1 << (queue & 7)) != 0
    }

    /// The CNP policer and the watchdog, asked first for a stored frame ([`Egress::enqueue`],
    /// or a frame about to join a run): false when they refuse it (slot freed, counted). A
    /// frame that crossed from another shard asks [`Egress::crossed_refusal`].
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) fn passes_refusal(
        &mut self,
        peers: &mut Peers<'_>,
        in_port: usize,
        out: usize,
        slot: u32,
        len: usize,
        class: &Class,
        now: u64,
    ) -> bool {
        let (queue, pg) = (class.queue as usize & 7, class.pg as usize & 7);
        match self.refusal(out, queue, len, class, now) {
            None => true,
            Some(reason) => {
                peers.packets.free(slot);
                self.drop_frame(peers.ingress, in_port, out, queue, pg, len, reason);
                false
            }
        }
    }

    /// Queues the descriptors of a group admitted in one step: no EDF here (`runs_on`), so
    /// straight onto the queue's list, `EgressPort::push` without its EDF test, the queue
    /// marked busy once.
    #[inline(always)]
    fn queue_group(&mut self, out: usize, queue: usize, frames: &[run::RunFrame], in_port: usize, pg: usize, now: u64) {
        let o = &mut self.ports[out];
        for f in frames {
            self.descs.push(&mut o.queues[queue], f.desc(in_port, pg, now));
        }
        o.nonempty |= 1 << queue;
    }

    /// The CNP policer and the watchdog for a stored frame that crossed from another shard
    /// (its PG charged there), asked as it arrives, before it joins a run
    /// ([`Egress::admit_crossed_run`]): false when they refuse it, and then it goes back to its
    /// shard as a dropped frame's release (its PG counts the drop there), its slot freed, the
    /// drop counted here, as [`Egress::enqueue_charged`] does. (Not one function with
    /// [`Egress::passes_refusal`]: that one is inlined into the local receive loop, which a
    /// branch for crossed frames made 5 instructions a frame longer.)
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) fn crossed_refusal(
        &mut self,
        peers: &mut Peers<'_>,
        in_port: usize,
        out: usize,
        slot: u32,
        len: usize,
        class: &Class,
        now: u64,
    ) -> bool {
        let (queue, pg) = (class.queue as usize & 7, class.pg as usize & 7);
        let Some(reason) = self.refusal(out, queue, len, class, now) else {
            return true;
        };
        let cells = peers.pool.cells_for(len);
        self.drop_crossed(peers, in_port, out, queue, pg, slot, len, cells, reason);
        false
    }

    /// A frame that crossed from another shard, refused here before it was queued: back to its
    /// shard as a dropped frame's release (its PG counts the drop there), its slot freed, the
    /// drop counted on its egress queue.
    #[cold]
    #[allow(clippy::too_many_arguments)]
    fn drop_crossed(
        &mut self,
        peers: &mut Peers<'_>,
        in_port: usize,
        out: usize,
        queue: usize,
        pg: usize,
        slot: u32,
        len: usize,
        cells: u32,
        reason: DropReason,
    ) {
        send_release(peers, in_port, pg, cells, true, slot, NO_GROUP);
        peers.packets.free(slot);
        self.count_drop(out, queue, len, reason);
    }

    /// Admits and queues the frames `run` holds from `in_port`, in order, and empties it: in
    /// one step when `mmu::admit_group` shows that is what one by one would do, else one by
    /// one as [`Egress::enqueue`] (whose refusals the frames passed when they joined).
    #[inline]
    pub(crate) fn admit_run(&mut self, peers: &mut Peers<'_>, in_port: usize, run: &mut run::Run, now: u64) {
        let (out, queue, pg) = run.target();
        let desc = |f: &run::RunFrame| f.desc(in_port, pg, now);
        // A frame alone takes the frame-by-frame path: `Switch::receive` (a burst of one)
        // stays the reference the burst path is tested against.
        if run.frames().len() > 1
            && mmu::admit_group(
                &mut peers.ingress.ports[in_port].buffers,
                pg,
                &mut self.ports[out].buffers,
                queue,
                peers.pool,
                run.totals(),
            )
        {
            self.queue_group(out, queue, run.frames(), in_port, pg, now);
        } else {
            for f in run.frames() {
                let (slot, len, cells) = (f.slot, f.len as usize, f.cells as u32);
                if self.admit(peers, in_port, out, queue, pg, slot, len, cells, now) {
                    self.ports[out].push(&mut self.descs, queue, desc(f));
                }
            }
        }
        run.clear();
    }

    /// Admits and queues the frames `run` holds that crossed from another shard (their PG
    /// charged there; [`run::Run::restart_from`]), in order, and empties it: the egress half of
    /// [`Egress::admit_run`]. In one step when `mmu::admit_group_to_queue` shows that is what
    /// one by one would do, else one by one as [`Egress::enqueue_charged`] does (the CNP
    /// policer and the watchdog asked each frame as it arrived, [`Egress::crossed_refusal`]).
    /// A refused frame goes back to its shard as the release of a dropped frame.
    #[inline]
    pub(crate) fn admit_crossed_run(&mut self, peers: &mut Peers<'_>, run: &mut run::Run, now: u64) {
        let ((out, queue, pg), in_port) = (run.target(), run.source());
        let lossless = peers.ingress.ports[in_port].buffers.is_lossless(pg);
        if run.frames().len() > 1
            && mmu::admit_group_to_queue(&mut self.ports[out].buffers, queue, lossless, peers.pool, run.totals())
        {
            self.queue_group(out, queue, run.frames(), in_port, pg, now);
        } else {
            for f in run.frames() {
                let (len, cells) = (f.len as usize, f.cells as u32);
                match self.ports[out]
                    .buffers
                    .admit(queue, cells, len as u32, lossless, peers.pool)
                {
                    Ok(()) => self.ports[out].push(&mut self.descs, queue, f.desc(in_port, pg, now)),
                    Err(reason) => self.drop_crossed(peers, in_port, out, queue, pg, f.slot, len, cells, reason),
                }
            }
        }
        run.clear();
    }

    /// Queues a frame whose PG is charged already: the egress half of [`Egress::enqueue`], for
    /// a frame that crossed from the shard owning `in_port` (`shard`), or a copy of a frame
    /// flooded from a port of this shard, whose PG the flood charged once for all its copies
    /// (flood group `group`, `ingress::flood`). A crossed frame's refusal goes back to its shard
    /// as a release of a dropped frame (its PG counts the drop, as locally); a refused local
    /// copy is only counted here (its group does not hold it).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(crate) fn enqueue_charged(
        &mut self,
        peers: &mut Peers<'_>,
        in_port: usize,
        out: usize,
        slot: u32,
        len: usize,
        info: &FrameInfo,
        class: &Class,
        now: u64,
        group: u32,
    ) {
        let (queue, pg) = (class.queue as usize & 7, class.pg as usize & 7);
        let cells = peers.pool.cells_for(len);
        let crossed = peers.shard.is_remote(in_port);
        if let Some(reason) = self.egress_refusal(peers, in_port, out, len, cells, class, now) {
            if crossed {
                send_release(peers, in_port, pg, cells, true, slot, group);
            }
            peers.packets.free(slot);
            return self.count_drop(out, queue, len, reason);
        }
        if !crossed && group != NO_GROUP {
            // A crossed copy was held by the shard that sent it.
            peers.ingress.floods.hold(group);
        }
        self.queue_admitted(peers, in_port, out, slot, len, cells, info, class, now, group);
    }

    /// Why the egress side refuses a frame whose PG is charged already (a crossed frame, a
    /// flooded copy), charging its queue and the pool when it does not. A lossless frame
    /// admitted by its PG is never refused by the queue's limit (the PG pauses first).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn egress_refusal(
        &mut self,
        peers: &mut Peers<'_>,
        in_port: usize,
        out: usize,
        len: usize,
        cells: u32,
        class: &Class,
        now: u64,
    ) -> Option<DropReason> {
        let (queue, pg) = (class.queue as usize & 7, class.pg as usize & 7);
        self.refusal(out, queue, len, class, now).or_else(|| {
            let lossless = peers.ingress.ports[in_port].buffers.is_lossless(pg);
            self.ports[out]
                .buffers
                .admit(queue, cells, len as u32, lossless, peers.pool)
                .err()
        })
    }

    /// The frame is charged on both sides: its descriptor, EDF's deadline, WRED at enqueue,
    /// and onto the queue.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn queue_admitted(
        &mut self,
        peers: &mut Peers<'_>,
        in_port: usize,
        out: usize,
        slot: u32,
        len: usize,
        cells: u32,
        info: &FrameInfo,
        class: &Class,
        now: u64,
        group: u32,
    ) {
        let (queue, pg) = (class.queue as usize & 7, class.pg as usize & 7);
        let ect = info.is_ect();
        let flood = if group == NO_GROUP {
            0
        } else {
            self.flood_of[slot as usize] = group;
            Desc::FLOOD
        };
        let mut desc = Desc {
            slot,
            deadline: now,
            len: len as u16,
            in_port: in_port as u16,
            pg: pg as u8,
            cells: cells as u16,
            flags: if ect { Desc::ECT } else { 0 } | if class.cnp { Desc::CNP } else { 0 } | flood,
        };
        let o = &mut self.ports[out];
        if let Some(e) = o.edf.as_ref() {
            let frame = peers.packets.get_mut(slot, len);
            let (budget, tagged) = edf_budget(e, queue, frame, info);
            desc.deadline = now.saturating_add(u64::from(budget));
            if tagged {
                desc.flags |= Desc::TAGGED;
            }
        }
        // CNPs skip WRED: marking or dropping the congestion signal itself helps nobody.
        if !class.cnp {
            if let Some(w) = o.wred[queue].as_mut().filter(|w| w.mark_at == MarkPoint::Enqueue) {
                let depth = o.buffers.queue(queue).bytes - len as u64;
                desc.flags |= Desc::WRED_DONE;
                match w.decide(depth, ect, &mut o.rng) {
                    Verdict::Pass => {}
                    Verdict::Mark => {
                        if ecn::mark_ce(peers.packets.get_mut(slot, len), info) == ecn::MarkOutcome::Marked {
                            o.counters.ecn_marked += 1;
                            o.queue_counters[queue].ecn_marked += 1;
                        }
                    }
                    Verdict::Drop => {
                        self.release(peers, out, queue, &desc, true);
                        peers.packets.free(slot);
                        return self.count_drop(out, queue, len, DropReason::Wred);
                    }
                }
            }
        }
        self.ports[out].push(&mut self.descs, queue, desc);
    }

    /// Counts a frame from another shard lost before it could be admitted here.
    pub(crate) fn count_drop_crossed(&mut self, out: usize, queue: usize, len: usize) {
        self.count_drop(out, queue, len, DropReason::NoBuffer);
    }

    /// Counts a drop of an admitted frame on its egress port and queue (its ingress PG was
    /// told by the release).
    fn count_drop(&mut self, out: usize, queue: usize, len: usize, reason: DropReason) {
        let o = &mut self.ports[out];
        o.counters.drops[reason as usize] += 1;
        o.queue_counters[queue].dropped_packets += 1;
        o.queue_counters[queue].dropped_bytes += len as u64;
    }

    /// Returns a frame's cells: the egress account here, then the ingress side's (the message
    /// back), which may answer with an XON for the ingress port's link to carry.
    #[inline(always)]
    fn release(&mut self, peers: &mut Peers<'_>, out: usize, queue: usize, d: &Desc, dropped: bool) {
        let (inp, pg) = (d.in_port as usize, d.pg as usize);
        self.ports[out]
            .buffers
            .release(queue, d.cells as u32, d.len as u64, peers.pool);
        if d.has(Desc::FLOOD) {
            return self.release_copy(peers, inp, pg, d, dropped);
        }
        if peers.shard.is_remote(inp) {
            return send_release(peers, inp, pg, d.cells as u32, dropped, d.slot, NO_GROUP);
        }
        self.release_pg(peers, inp, pg, d.cells as u32, dropped);
    }

    /// [`Egress::release`] for a frame sent (or dropped by WRED) in a transmit call: a frame
    /// from a PG of this shard that is not in XOFF gives its ingress cells back through
    /// `waiting.pg`, added up with the frames before it from the same PG and returned together
    /// ([`Egress::return_pending`]) when a frame from elsewhere leaves or the call ends. Why
    /// that is exact: such a PG's release cannot send XON (XON needs XOFF, and nothing in a
    /// transmit call sets it), the one thing a release can decide; a PG drains headroom, then
    /// shared, then min, so cells returned together leave every count as returned one by one;
    /// and the only reader of the ingress counts in a transmit call, another PG's XON check
    /// (its limit moves with the pool), comes after the pending cells went back. The egress
    /// side's cells wait in `waiting.queue` ([`QueueRelease`]) for the same reasons.
    #[inline(always)]
    fn release_sent(
        &mut self,
        peers: &mut Peers<'_>,
        out: usize,
        queue: usize,
        d: &Desc,
        dropped: bool,
        waiting: &mut Waiting,
    ) {
        let (inp, pg) = (d.in_port as usize, d.pg as usize);
        if waiting.takes(d) {
            return waiting.add(d, dropped);
        }
        self.return_pending(peers, &mut waiting.pg);
        if d.has(Desc::FLOOD) || peers.shard.is_remote(inp) || peers.ingress.ports[inp].pfc_gen.is_xoff(pg) {
            self.return_queue(peers, out, queue, &mut waiting.queue);
            return self.release(peers, out, queue, d, dropped);
        }
        waiting.queue.add(d);
        waiting.pg = PendingRelease {
            in_port: inp,
            pg,
            cells: d.cells as u32,
            dropped: dropped as u64,
        };
    }

    /// Gives queue `queue` of `port` the cells and bytes [`Egress::release_sent`] added up.
    #[inline(always)]
    fn return_queue(&mut self, peers: &mut Peers<'_>, port: usize, queue: usize, queued: &mut QueueRelease) {
        let QueueRelease { cells, bytes } = std::mem::take(queued);
        self.ports[port].buffers.release(queue, cells, bytes, peers.pool);
    }

    /// Gives a PG the cells [`Egress::release_sent`] added up, and counts its drops.
    #[inline]
    fn return_pending(&mut self, peers: &mut Peers<'_>, pending: &mut PendingRelease) {
        if pending.in_port == PendingRelease::NONE.in_port {
            return;
        }
        let p = &mut peers.ingress.ports[pending.in_port];
        debug_assert!(
            !p.pfc_gen.is_xoff(pending.pg),
            "a PG went into XOFF during a transmit call"
        );
        p.buffers.release(pending.pg, pending.cells, peers.pool);
        p.pg_counters[pending.pg & 7].dropped_packets += pending.dropped;
        *pending = PendingRelease::NONE;
    }

    /// A flooded copy left: its group loses a hold, and the PG gets the frame's cells back
    /// with the last one (a drop of one copy is counted on its queue, not on the PG).
    #[cold]
    fn release_copy(&mut self, peers: &mut Peers<'_>, inp: usize, pg: usize, d: &Desc, dropped: bool) {
        let group = std::mem::replace(&mut self.flood_of[d.slot as usize], NO_GROUP);
        if peers.shard.is_remote(inp) {
            return send_release(peers, inp, pg, d.cells as u32, dropped, d.slot, group);
        }
        if let Some(end) = peers.ingress.floods.release(group) {
            self.release_pg(peers, end.in_port, end.pg, end.cells, false);
        }
    }

    /// Gives `cells` back to PG `pg` of `in_port` (this shard's), which may answer with an XON
    /// for that port's link to carry: a frame's charge (or a flood group's, with its last copy)
    /// ending, wherever it ended.
    /// Inlined: it runs for every frame sent, and called out of line its prologue, epilogue
    /// and argument moves were a quarter of its cost.
    #[inline(always)]
    pub(crate) fn release_pg(&mut self, peers: &mut Peers<'_>, in_port: usize, pg: usize, cells: u32, dropped: bool) {
        let prios = peers.ingress.pg_prios[in_port][pg];
        if let Some(req) = peers.ingress.ports[in_port].release(pg, cells, dropped, prios, peers.pool) {
            self.ports[in_port].queue_pfc(req);
        }
    }

    /// Obeys a PFC frame received on `port` for its priorities with PFC: pause timers, the
    /// watchdog's view. Its other priorities, and 802.3x PAUSE, are counted and ignored
    /// (`DropReason::PauseIgnored`): lossy queues never pause, so no peer can hold them.
    pub(crate) fn receive_mac_control(&mut self, port: usize, frame: &[u8], now: u64) -> Result<(), wire::Malformed> {
        let p = &mut self.ports[port];
        // The port's own PFC priorities (a subset of the switch's).
        let pfc_prios = p.pfc_prios;
        match wire::pfc::decode_mac_control(frame)? {
            MacControl::Pfc { enable, times } => {
                if enable & !pfc_prios != 0 {
                    p.counters.drops[DropReason::PauseIgnored as usize] += 1;
                }
                for (prio, &quanta) in times.iter().enumerate() {
                    if enable & (1 << prio) != 0 {
                        p.counters.pfc_rx[prio] += 1;
                        if pfc_prios & (1 << prio) == 0 {
                            continue;
                        }
                        let dur = wire::pfc::quanta_to_ns(quanta, p.speed_bps);
                        p.pause.apply(prio, now, dur, &mut p.counters.paused_ns);
                        if let Some(w) = p.watchdog.as_mut() {
                            w.pfc_received(prio, now);
                        }
                    }
                }
            }
            MacControl::Pause { .. } => {
                p.counters.pause_rx += 1;
                p.counters.drops[DropReason::PauseIgnored as usize] += 1;
            }
            MacControl::Other { .. } => p.counters.drops[DropReason::LinkLocal as usize] += 1,
        }
        Ok(())
    }

    /// Whether queue `q` of port `p` is held by a received pause at `now` (and the watchdog
    /// does not override it).
    #[inline]
    fn paused(&self, p: &EgressPort, q: usize, now: u64) -> bool {
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

    /// For reports: the priorities port index `port` is paused on by received PFC at `now`,
    /// and those whose queue the watchdog holds in a storm, as masks.
    pub(crate) fn pause_state(&self, port: usize, now: u64) -> (u8, u8) {
        let p = &self.ports[port];
        let (paused, _) = p.pause.paused_prios(now);
        let stormed = p.watchdog.as_ref().map_or(0, |w| w.storms());
        let storm_prios = (0..NUM_TC)
            .filter(|&q| stormed & (1 << q) != 0)
            .fold(0u8, |m, q| m | self.queue_prios[q]);
        (paused, storm_prios)
    }

    /// Bit mask of queues that may send at `t_ns`, given the paused ones.
    #[inline]
    fn eligible(&mut self, port: usize, t_ns: u64, paused: u8) -> u8 {
        let (p, descs) = (&mut self.ports[port], &self.descs);
        let mut mask = p.nonempty & !paused;
        let mut shaped = mask & p.shaped;
        while shaped != 0 {
            let q = shaped.trailing_zeros() as usize;
            shaped &= shaped - 1;
            let len = p.front(descs, q).map_or(0, |d| d.len as u32);
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
    pub(crate) fn transmit(&mut self, peers: &mut Peers<'_>, port: usize, now: u64, sink: &mut impl TxSink) -> usize {
        let p = &mut self.ports[port];
        if p.busy_until_ns > now || (p.busy_until_ns == now && p.busy_sub_ps > 0) {
            if !p.backlogged && (p.nonempty != 0 || !p.pfc_out.is_empty()) {
                // Something arrived while the link was busy: it goes back to back, from the
                // picosecond the link is free, not from the next call's whole nanosecond
                // (which lost up to 1 ns a frame: 8 ns gaps for 7.04 at 64 B and 100G).
                self.mark_backlogged_if_ready(port);
            }
            return 0;
        }
        if p.nonempty == 0 && p.pfc_out.is_empty() {
            // Nothing to send (a worker asks every round): the link goes idle and the scheduler
            // sees no queue eligible, as the full path below would have it (DRR forgets the
            // deficits of queues that emptied), without the pause and shaper look-ups.
            p.backlogged = false;
            let _ = p.sched.select(0, |_| sched::Head::default());
            return 0;
        }
        if !p.tx_enabled {
            return self.transmit_tx_off(port, now, sink);
        }
        let budget = TX_BURST.min(sink.room(port));
        if budget == 0 {
            // The port's ring is full: everything stays queued (and keeps its cells). The link
            // was not sending meanwhile, so the next frame starts when it is called for.
            self.ports[port].backlogged = false;
            if !self.ports[port].pfc_out.is_empty() && sink.pfc_needs_no_room(port) {
                return self.transmit_pfc_only(port, now, sink);
            }
            return 0;
        }
        // Link time in picoseconds since `base_ns` (whole ns, never after `now`): exact
        // serialisation without an absolute picosecond clock, which would wrap after 213.5
        // days. A call covers one burst, so the relative figures stay small.
        let (base_ns, mut t_ps) = if p.backlogged {
            (p.busy_until_ns, p.busy_sub_ps)
        } else {
            (now, 0)
        };
        let now_ps = (now - base_ns).saturating_mul(PS_PER_NS);
        let mut sent = 0;
        let mut pfc_buf = [0u8; 64];
        self.ports[port].backlogged = false;
        let (mut paused, mut paused_valid_until) = self.paused_queues(port, base_ns + t_ps / PS_PER_NS);
        let mut waiting = Waiting::NONE;
        while sent < budget && t_ps <= now_ps {
            let t_ns = base_ns + t_ps / PS_PER_NS;
            if t_ns >= paused_valid_until {
                (paused, paused_valid_until) = self.paused_queues(port, t_ns);
            }
            if let Some(ser_ps) = self.send_pfc(port, t_ns, sink, &mut pfc_buf) {
                t_ps += ser_ps;
                sent += 1;
                continue;
            }
            let eligible = self.eligible(port, t_ns, paused);
            let (p, descs) = (&mut self.ports[port], &self.descs);
            let (queues, edf) = (&p.queues, &p.edf);
            let Some(q) = p.sched.select(eligible, |q| {
                port::front_of(queues, edf, descs, q).map_or(sched::Head::default(), |d| sched::Head {
                    len: d.len as u32,
                    deadline: d.deadline,
                })
            }) else {
                break;
            };
            // Without shapers on this port's busy queues, nothing but a pause expiring or a PFC
            // frame to send can change the scheduler's choice while this call runs (no frame
            // arrives meanwhile), so `q` keeps sending while the scheduler would pick it again
            // (`sched::Scheduler::select_again`) without a full selection per frame.
            let may_stay = p.shaped & p.nonempty == 0;
            // Such a queue's frames go by batch ([`batch`]), down to a frame the batch leaves
            // to the frame-by-frame path below.
            let by_batch = self.by_batch && may_stay && batch::serves(p, q);
            // `t_ns` is the link's time now (`base_ns + t_ps / PS_PER_NS`), kept current below
            // rather than computed again for every frame.
            let mut t_ns = t_ns;
            loop {
                if by_batch {
                    let bound = BatchBound::new(budget - sent, now_ps, base_ns, paused_valid_until);
                    let Egress { ports, descs, .. } = self;
                    let b = batch::send_batch(
                        &mut ports[port],
                        descs,
                        peers,
                        port,
                        q,
                        base_ns,
                        &mut t_ps,
                        bound,
                        sink,
                        &mut waiting,
                    );
                    sent += b.frames;
                    if b.end == BatchEnd::Done {
                        break;
                    }
                    t_ns = base_ns + t_ps / PS_PER_NS;
                }
                if let Some(ser_ps) = self.send_head(peers, port, q, t_ns, sink, &mut waiting) {
                    t_ps += ser_ps;
                    sent += 1;
                }
                let (p, descs) = (&mut self.ports[port], &self.descs);
                if !may_stay || sent >= budget || t_ps > now_ps || !p.pfc_out.is_empty() {
                    break;
                }
                t_ns = base_ns + t_ps / PS_PER_NS;
                if t_ns >= paused_valid_until {
                    break;
                }
                let Some(head) = p.front(descs, q) else { break };
                let head = sched::Head {
                    len: head.len as u32,
                    deadline: head.deadline,
                };
                if !p.sched.select_again(q, head) {
                    break;
                }
            }
            self.return_queue(peers, port, q, &mut waiting.queue);
        }
        self.return_pending(peers, &mut waiting.pg);
        if sent > 0 {
            // Back to back only if the next frame was ready when this one ended; otherwise the
            // next transmission starts when it is called for, never before its frame arrived.
            let t_ns = base_ns + t_ps / PS_PER_NS;
            let (paused, _) = self.paused_queues(port, t_ns);
            let ready = !self.ports[port].pfc_out.is_empty() || self.eligible(port, t_ns, paused) != 0;
            let p = &mut self.ports[port];
            p.busy_until_ns = t_ns;
            p.busy_sub_ps = t_ps % PS_PER_NS;
            p.backlogged = ready;
        }
        sent
    }

    /// Sends the port's next PFC frame at `t_ns`, if one waits; returns its time on the wire.
    #[inline]
    fn send_pfc(&mut self, port: usize, t_ns: u64, sink: &mut impl TxSink, buf: &mut [u8; 64]) -> Option<u64> {
        let p = &mut self.ports[port];
        let req = p.pfc_out.pop()?;
        let n = wire::pfc::encode_pfc(buf, p.mac, req.prios, req.times);
        for prio in 0..NUM_TC {
            if req.prios & (1 << prio) != 0 {
                p.counters.pfc_tx[prio] += 1;
            }
        }
        p.counters.tx_packets += 1;
        p.counters.tx_bytes += n as u64;
        sink.transmit(port, &buf[..n], t_ns);
        Some(p.rate.ser_ps(n))
    }

    /// The port's PFC frames, back to back from `now`, while its ring has no room for data
    /// ([`TxSink::pfc_needs_no_room`]): a MAC sends its control frames whatever its queues hold.
    #[cold]
    fn transmit_pfc_only(&mut self, port: usize, now: u64, sink: &mut impl TxSink) -> usize {
        let mut buf = [0u8; 64];
        let mut t_ps = 0u64;
        let mut sent = 0;
        while let Some(ser_ps) = self.send_pfc(port, now + t_ps / PS_PER_NS, sink, &mut buf) {
            t_ps += ser_ps;
            sent += 1;
        }
        let p = &mut self.ports[port];
        p.busy_until_ns = now + t_ps / PS_PER_NS;
        p.busy_sub_ps = t_ps % PS_PER_NS;
        sent
    }

    /// A port whose transmit is off (SAI's PKT_TX_ENABLE = false, `[[port]] tx = "off"`): data
    /// stays queued and keeps its cells; its PFC frames still go, as a MAC sends its control
    /// frames.
    #[cold]
    fn transmit_tx_off(&mut self, port: usize, now: u64, sink: &mut impl TxSink) -> usize {
        self.ports[port].backlogged = false;
        if self.ports[port].pfc_out.is_empty() || (sink.room(port) == 0 && !sink.pfc_needs_no_room(port)) {
            return 0;
        }
        self.transmit_pfc_only(port, now, sink)
    }

    /// Marks the port backlogged if a PFC frame or an eligible queue waits for the moment its
    /// link is free (cold: once per frame that arrives while the link sends another).
    #[cold]
    fn mark_backlogged_if_ready(&mut self, port: usize) {
        let t_ns = self.ports[port].busy_until_ns;
        let (paused, _) = self.paused_queues(port, t_ns);
        let ready = !self.ports[port].pfc_out.is_empty() || self.eligible(port, t_ns, paused) != 0;
        self.ports[port].backlogged = ready;
    }

    /// Dequeues the head of queue `q` and sends it at `t_ns` (WRED at dequeue, release,
    /// shaper, counters). Returns its time on the wire, or None when WRED dropped it.
    #[inline(always)]
    fn send_head(
        &mut self,
        peers: &mut Peers<'_>,
        port: usize,
        q: usize,
        t_ns: u64,
        sink: &mut impl TxSink,
        waiting: &mut Waiting,
    ) -> Option<u64> {
        let p = &mut self.ports[port];
        let d = p.pop(&mut self.descs, q).expect("the scheduler picked an empty queue");
        // The frames sent before this one in the call are gone from the queue already.
        // Saturating, as the release itself is: an account a live change left short must not
        // read as a full queue here.
        let depth = p.buffers.queue(q).bytes.saturating_sub(waiting.queue.bytes);
        let len = d.len as usize;
        let wred_drop = !d.has(Desc::WRED_DONE) && !d.has(Desc::CNP) && p.wred[q].is_some() && {
            let w = p.wred[q].as_mut().expect("checked above");
            match w.decide(depth, d.has(Desc::ECT), &mut p.rng) {
                Verdict::Pass => false,
                Verdict::Mark => {
                    let frame = peers.packets.get_mut(d.slot, len);
                    if let Ok(info) = wire::parse(frame, usize::MAX) {
                        if ecn::mark_ce(frame, &info) == ecn::MarkOutcome::Marked {
                            p.counters.ecn_marked += 1;
                            p.queue_counters[q].ecn_marked += 1;
                        }
                    }
                    false
                }
                Verdict::Drop => true,
            }
        };
        if wred_drop {
            self.release_sent(peers, port, q, &d, true, waiting);
            peers.packets.free(d.slot);
            self.count_drop(port, q, len, DropReason::Wred);
            return None;
        }
        // Nearly every frame: its release only adds to `waiting`, so the port stays borrowed
        // (indexing it again after a call on `self` costs a bounds check).
        if waiting.takes(&d) {
            waiting.add(&d, false);
            return Some(send(p, peers, port, q, &d, t_ns, sink));
        }
        self.release_sent(peers, port, q, &d, false, waiting);
        Some(send(&mut self.ports[port], peers, port, q, &d, t_ns, sink))
    }

    /// The watchdog's timers on `port`: storms detected (and, with the drop action, the
    /// stormed queue flushed) and restored.
    pub(crate) fn poll_watchdog(&mut self, peers: &mut Peers<'_>, port: usize, now: u64) {
        let p = &self.ports[port];
        // Nothing paused and nothing being timed: every queue's poll would be a no-op (this
        // runs every round of a worker, for every port).
        match &p.watchdog {
            None => return,
            Some(w) if w.at_rest() && !p.pause.any_paused(0xff, now) => return,
            Some(_) => {}
        }
        for q in 0..NUM_TC {
            let p = &self.ports[port];
            let stalled = p.len(q) != 0 && p.pause.any_paused(self.queue_prios[q], now);
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
                        self.flush_queue(peers, port, q, DropReason::PfcWatchdog);
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

    fn flush_queue(&mut self, peers: &mut Peers<'_>, port: usize, q: usize, reason: DropReason) {
        while let Some(d) = self.ports[port].pop(&mut self.descs, q) {
            self.release(peers, port, q, &d, true);
            peers.packets.free(d.slot);
            self.count_drop(port, q, d.len as usize, reason);
        }
    }

    /// Asks `port`'s link to carry a PFC frame its ingress side decided on.
    pub(crate) fn queue_pfc(&mut self, port: usize, req: PfcRequest) {
        self.ports[port].queue_pfc(req);
    }

    /// True when no frame is queued and no PFC frame waits to be sent.
    pub fn is_idle(&self) -> bool {
        self.ports.iter().all(|p| p.pfc_out.is_empty() && p.nonempty == 0)
    }

    /// Frames queued on ports whose transmit is off, when they are all that is left (no PFC
    /// frame waits, no other port holds a frame); None otherwise.
    pub fn held_by_tx_off(&self) -> Option<u64> {
        let mut held = 0;
        for p in &self.ports {
            if !p.pfc_out.is_empty() || (p.nonempty != 0 && p.tx_enabled) {
                return None;
            }
            if p.nonempty != 0 {
                held += (0..NUM_TC).map(|q| p.len(q) as u64).sum::<u64>();
            }
        }
        Some(held)
    }

    /// The earliest time after which `transmit` or the watchdog may change something on the
    /// egress side, given that nothing new arrives.
    pub(crate) fn next_event(&self, now: u64, mut at: impl FnMut(u64)) {
        for p in &self.ports {
            let link_free = (p.busy_until_ns + u64::from(p.busy_sub_ps > 0)).max(now);
            if !p.pfc_out.is_empty() {
                at(link_free);
            }
            for q in 0..NUM_TC {
                let Some(head) = p.front(&self.descs, q) else {
                    continue;
                };
                // Transmit off: nothing leaves until it is turned on (a config change, which
                // replay schedules itself); the watchdog's deadlines below still count.
                let mut t = if p.tx_enabled { link_free } else { u64::MAX };
                if t != u64::MAX {
                    if self.paused(p, q, t) {
                        t = p.pause.resume_time(self.queue_prios[q], t);
                    }
                    if let Some(s) = p.shapers[q].as_ref() {
                        t = s.ready_at(t, head.len as u32);
                    }
                    at(t);
                }
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
        }
    }
}

/// A frame's delay budget on an EDF port, in ns, and whether it came from a tag: its
/// time-to-destination tag when tags are on and it carries one, else its DSCP's budget, else
/// its queue's, else 0 (a queue that is not regulated: the deadline is unread).
///
/// The tag is the IPv6 flow label (20 bits, in units of `edf.tag_unit`; 0 = no tag, as RFC
/// 6437 reads an unset label). Why there: a RoCEv2 NIC may set it per packet and the switch
/// may rewrite it without breaking the packet: the ICRC masks it (`wire::icrc`), IPv6 has no
/// header checksum and the UDP pseudo-header leaves it out. IPv4 has no such field wide
/// enough (TOS, TTL and the checksum are the masked ones, and DSCP classifies), so IPv4
/// frames take the budgets.
#[inline]
fn edf_budget(e: &sched::edf::EdfQueues, queue: usize, frame: &[u8], info: &FrameInfo) -> (u32, bool) {
    if e.tag_unit > 0 && info.l3_kind() == wire::L3Kind::Ipv6 {
        let o = info.l3_offset();
        if let Some(h) = frame.get(o..o + 4) {
            let label = u32::from(h[1] & 0x0f) << 16 | u32::from(h[2]) << 8 | u32::from(h[3]);
            if label != 0 {
                let ns = u64::from(label) * u64::from(e.tag_unit);
                return (ns.min(controlplane::MAX_EDF_BUDGET_NS) as u32, true);
            }
        }
    }
    let dscp = info.dscp().map_or(0, |d| e.dscp_budget[d as usize & 63]);
    if dscp > 0 {
        return (dscp, false);
    }
    (e.queue_budget[queue], false)
}

/// Writes the time a tagged frame has left (its deadline less `t_ns`, rounded up to the tag's
/// unit, at least 1: a frame already late stays the most urgent) into its flow label, for the
/// next hop to read as its own budget, the way the paper's packets carry their deadline.
fn rewrite_tag(frame: &mut [u8], deadline: u64, t_ns: u64, unit: u32) {
    let left = deadline.saturating_sub(t_ns);
    let units = left.div_ceil(u64::from(unit)).clamp(1, 0xF_FFFF) as u32;
    let Ok(info) = wire::parse(frame, usize::MAX) else {
        return;
    };
    let o = info.l3_offset();
    if let Some(h) = frame.get_mut(o..o + 4) {
        h[1] = (h[1] & 0xf0) | (units >> 16) as u8;
        h[2] = (units >> 8) as u8;
        h[3] = units as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ports_queues_share_one_store_and_keep_their_nonempty_bits() {
        let cfg = crate::test_config();
        let (_, _, accounts) = mmu::build(&cfg);
        let mut egress = Egress::new(&cfg, accounts, 8, 1);
        let desc = |slot| Desc {
            slot,
            len: 100 + slot as u16,
            ..Desc::default()
        };
        let Egress { ports, descs, .. } = &mut egress;
        ports[0].push(descs, 3, desc(4));
        ports[1].push(descs, 3, desc(1));
        ports[0].push(descs, 0, desc(7));
        ports[0].push(descs, 3, desc(0));
        assert_eq!((ports[0].nonempty, ports[1].nonempty), (0b1001, 0b1000));
        assert_eq!((ports[0].queues[3].len(), ports[0].queues[0].len()), (2, 1));
        assert_eq!(descs.front(&ports[0].queues[3]).map(|d| d.len), Some(104));

        assert_eq!(ports[0].pop(descs, 3).map(|d| d.slot), Some(4));
        assert_eq!(ports[0].nonempty, 0b1001, "queue 3 still holds slot 0");
        assert_eq!(ports[0].pop(descs, 3).map(|d| d.slot), Some(0));
        assert_eq!(ports[0].nonempty, 0b0001, "queue 3 emptied");
        assert!(ports[0].pop(descs, 3).is_none());
        assert_eq!(ports[0].pop(descs, 0).map(|d| d.slot), Some(7));
        assert_eq!(ports[0].nonempty, 0);
        assert!(!egress.is_idle(), "port 1 still holds a frame");
        let Egress { ports, descs, .. } = &mut egress;
        assert_eq!(ports[1].pop(descs, 3).map(|d| (d.slot, d.len)), Some((1, 101)));
        assert_eq!(ports[1].nonempty, 0);
        assert!(egress.is_idle());
    }
}
