//! What one egress port owns: its queues (head, tail and length of each; the descriptors sit in
//! the switch-wide [`DescStore`] that `Egress` owns), scheduler, shapers, WRED profiles, the
//! CNP policer, pause reception and the watchdog, its half of the buffer account, the link's
//! pacing and the PFC frames its ingress side asked it to send.

use super::link::LinkRate;
use super::queues::{DescQueue, DescStore};
use super::rng::Rng;
use super::sched::edf::EdfQueues;
use super::sched::Scheduler;
use super::token_bucket::TokenBucket;
use super::wred::Wred;
use crate::buffers::ring::Ring;
use crate::counters::{PortCounters, QueueCounters};
use crate::mmu::QueueAccount;
use crate::pfc::{PauseState, PfcRequest, Watchdog};
use controlplane::{Config, MarkPoint, PortConfig, SchedulerConfig, NUM_TC};

/// A queued frame. Small and `Copy`: this is what the egress queues hold, one per packet slot
/// ([`DescStore`]). Packed to 4-byte alignment so the 64-bit deadline costs 4 bytes more than
/// a 32-bit one did, not 8 (20 bytes, `controlplane::memory::DESC_BYTES`); its fields are only
/// ever copied, never borrowed.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, packed(4))]
pub(crate) struct Desc {
    pub slot: u32,
    /// The frame's deadline: nanoseconds of the switch clock (the `now` of `Egress::enqueue`),
    /// whole, so any two compare right however long a frame waits (a 32-bit deadline, before,
    /// wrapped every 4.3 s and misordered frames more than 2.1 s apart). On an EDF port its
    /// arrival plus its budget (`sched::edf`); on any other port, or a queue without a budget,
    /// its arrival time (a budget of 0), read when the port becomes EDF (`retune_edf`).
    pub deadline: u64,
    pub len: u16,
    /// The ingress port's index: up to 512 ports (`controlplane::validate::MAX_PORTS`).
    pub in_port: u16,
    pub cells: u16,
    pub pg: u8,
    /// [`Desc::ECT`], [`Desc::CNP`], [`Desc::WRED_DONE`], [`Desc::TAGGED`], [`Desc::FLOOD`]: bits rather than
    /// bools so that the deadline fits in the 16 bytes the memory estimate counts.
    pub flags: u8,
}

impl Desc {
    /// The frame is ECN-capable.
    pub const ECT: u8 = 1;
    /// The frame is a CNP.
    pub const CNP: u8 = 2;
    /// Already CE-marked (or WRED-decided) at enqueue.
    pub const WRED_DONE: u8 = 4;
    /// Its deadline came from a time-to-destination tag (the IPv6 flow label), which is
    /// rewritten with the time left when it leaves.
    pub const TAGGED: u8 = 8;
    /// A copy of a flooded frame: its PG charge belongs to its flood group
    /// (`ingress::flood`), given back with the group's last copy.
    pub const FLOOD: u8 = 16;

    #[inline]
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

// The control plane's memory estimate (controlplane::memory) counts descriptors at this size.
const _: () = assert!(std::mem::size_of::<Desc>() as u64 <= controlplane::memory::DESC_BYTES);

/// [`EgressPort::front`] from the port's fields, for a caller that holds its scheduler
/// mutably meanwhile. Inlined always: the transmit loop asks for a queue's head after every
/// frame, and the call out of line cost more than the look-up.
#[inline(always)]
pub(crate) fn front_of<'a>(
    queues: &[DescQueue; NUM_TC],
    edf: &Option<EdfQueues>,
    descs: &'a DescStore,
    q: usize,
) -> Option<&'a Desc> {
    match edf.as_ref() {
        Some(e) if e.is_regulated(q) => e.front(descs, &queues[q], q),
        _ => descs.front(&queues[q]),
    }
}

/// The switch port's own MAC, used as the source of the PFC frames it sends.
pub fn port_mac(id: u16) -> [u8; 6] {
    let b = id.to_be_bytes();
    [0x02, 0x52, 0x53, 0x57, b[0], b[1]]
}

/// PFC frames a port may hold waiting to be sent; more means the link is stalled.
const PFC_BACKLOG: usize = 64;

/// One port's egress state: its queues, scheduler, pause timers, watchdog, shapers and counters.
pub struct EgressPort {
    pub(crate) id: u16,
    pub(crate) mac: [u8; 6],
    pub(crate) speed_bps: u64,
    pub(crate) rate: LinkRate,
    pub(crate) queues: [DescQueue; NUM_TC],
    pub(crate) sched: Scheduler,
    /// On an EDF port, how its regulated queues hold their frames (the take-over lists,
    /// budgets); None on other ports, whose queues are plain lists.
    pub(crate) edf: Option<EdfQueues>,
    pub(crate) shapers: [Option<TokenBucket>; NUM_TC],
    pub(crate) wred: [Option<Wred>; NUM_TC],
    pub(crate) cnp_policer: Option<TokenBucket>,
    /// When the link finishes its current frame: whole nanoseconds plus `busy_sub_ps`
    /// picoseconds (0..1000). Serialisation is summed in picoseconds (ns would drift at 25G+),
    /// but an absolute time in u64 picoseconds wraps after 2^64 ps (213.5 days of uptime or of
    /// a replay's span); in ns it lasts 584 years, and `transmit` counts picoseconds only
    /// relative to this instant.
    pub(crate) busy_until_ns: u64,
    pub(crate) busy_sub_ps: u64,
    /// Whether frames were left waiting when the link went busy: then the next frame starts
    /// back to back at the busy-until time rather than at the time of the next call.
    pub(crate) backlogged: bool,
    /// Whether the port transmits data (`[[port]] tx`); PFC frames go either way.
    pub(crate) tx_enabled: bool,
    /// This port's priorities with PFC (bit mask, `PortConfig::pfc_enabled`): the only ones a
    /// PFC frame it receives pauses.
    pub(crate) pfc_prios: u8,
    /// PFC frames to send, ahead of all data (asked for by this port's ingress side).
    pub(crate) pfc_out: Ring<PfcRequest>,
    pub(crate) pause: PauseState,
    pub(crate) watchdog: Option<Watchdog>,
    pub(crate) buffers: QueueAccount,
    pub(crate) counters: PortCounters,
    pub(crate) queue_counters: [QueueCounters; NUM_TC],
    /// Queues holding frames (bit mask), kept with the queues so the scheduler need not look.
    pub(crate) nonempty: u8,
    /// Queues with a shaper.
    pub(crate) shaped: u8,
    /// Queues whose frames' descriptors are written whole at admission (no EDF deadline, no
    /// WRED at enqueue): the ones a receive burst's frames may wait for together
    /// (`egress::run`). Read off `edf` and `wred` whenever either is set
    /// ([`EgressPort::note_plain_enqueue`]).
    pub(crate) plain_enqueue: u8,
    /// WRED's random stream for this port's queues: one per egress port, so which worker owns
    /// a port (and how many there are) cannot change a marking decision.
    pub(crate) rng: Rng,
}

impl EgressPort {
    pub(crate) fn new(p: &PortConfig, cfg: &Config, buffers: QueueAccount, lossless_queues: u8, rng: Rng) -> Self {
        let mut port = EgressPort {
            id: p.id,
            mac: port_mac(p.id),
            speed_bps: 0,
            rate: LinkRate::new(1),
            queues: Default::default(),
            sched: Scheduler::new(p),
            edf: match &p.scheduler {
                SchedulerConfig::Edf(e) => Some(EdfQueues::new(e)),
                _ => None,
            },
            shapers: Default::default(),
            wred: Default::default(),
            cnp_policer: None,
            busy_until_ns: 0,
            tx_enabled: true,
            pfc_prios: 0,
            busy_sub_ps: 0,
            backlogged: false,
            pfc_out: Ring::with_capacity(PFC_BACKLOG),
            pause: PauseState::default(),
            watchdog: cfg.pfc.watchdog.clone().map(|w| Watchdog::new(w, lossless_queues)),
            buffers,
            counters: PortCounters::default(),
            queue_counters: Default::default(),
            nonempty: 0,
            shaped: 0,
            plain_enqueue: 0,
            rng,
        };
        port.set_qos(p, cfg);
        port.note_plain_enqueue();
        port
    }

    /// Sets `plain_enqueue` from the port's EDF and WRED as they are now: called once both are
    /// set, at start and after a live change (the end of [`EgressPort::retune_edf`], which a
    /// change runs after [`EgressPort::set_qos`]).
    fn note_plain_enqueue(&mut self) {
        self.plain_enqueue = match self.edf {
            Some(_) => 0,
            None => (0..NUM_TC)
                .filter(|&q| self.wred[q].as_ref().is_none_or(|w| w.mark_at != MarkPoint::Enqueue))
                .fold(0, |m, q| m | 1 << q),
        };
    }

    /// The QoS a config gives this port: rate, scheduler, shapers, WRED, policer. A live change
    /// keeps their state (ARCHITECTURE.md, "Live configuration"): a shaper or the policer keeps
    /// its tokens (clamped to a new burst), WRED its average, the scheduler its deficits and
    /// position where the queue modes stay; only what a change adds starts afresh (a new
    /// shaper or policer full, a new WRED profile at an average of zero).
    pub(crate) fn set_qos(&mut self, p: &PortConfig, cfg: &Config) {
        self.tx_enabled = p.tx_enabled;
        self.pfc_prios = (0..NUM_TC).filter(|&t| p.pfc_enabled[t]).fold(0u8, |m, t| m | 1 << t);
        self.speed_bps = p.speed_bps.max(1);
        self.rate = LinkRate::new(p.speed_bps);
        self.sched.retune(p);
        fn bucket(old: &mut Option<TokenBucket>, new: Option<controlplane::RateLimit>) {
            *old = match (old.take(), new) {
                (Some(mut tb), Some(limit)) => {
                    tb.retune(limit);
                    Some(tb)
                }
                (_, new) => new.map(TokenBucket::new),
            };
        }
        for q in 0..NUM_TC {
            bucket(&mut self.shapers[q], p.queues[q].shaper);
            self.wred[q] = match (self.wred[q].take(), p.queues[q].ecn.as_ref()) {
                (Some(mut w), Some(profile)) => {
                    w.retune(profile);
                    Some(w)
                }
                (_, new) => new.map(Wred::new),
            };
        }
        self.shaped = (0..NUM_TC)
            .filter(|&q| p.queues[q].shaper.is_some())
            .fold(0, |m, q| m | 1 << q);
        bucket(&mut self.cnp_policer, cfg.cnp.policer);
    }

    /// Queues `d` on queue `q`, in the store entry of its packet slot. Never full: every frame
    /// that got a slot has its entry. A regulated queue of an EDF port files it by its
    /// deadline (`sched::edf::EdfQueues`).
    ///
    /// Inlined into enqueue, with EDF's filing out of line: a call per frame for what is a
    /// list append on every other port cost about a twentieth of the forwarding time.
    #[inline(always)]
    pub(crate) fn push(&mut self, descs: &mut DescStore, q: usize, d: Desc) {
        if self.edf.is_some() {
            self.push_edf(descs, q, d);
        } else {
            descs.push(&mut self.queues[q], d);
        }
        self.nonempty |= 1 << q;
    }

    #[inline(never)]
    fn push_edf(&mut self, descs: &mut DescStore, q: usize, d: Desc) {
        match self.edf.as_mut() {
            Some(e) if e.is_regulated(q) => e.push(descs, &mut self.queues[q], q, d, &mut self.queue_counters[q]),
            _ => descs.push(&mut self.queues[q], d),
        }
    }

    /// Removes the frame queue `q` sends next: its head, or for a regulated queue of an EDF
    /// port the one its mode puts first.
    /// Inlined into transmit, with EDF's lists out of line (as `push`).
    #[inline(always)]
    pub(crate) fn pop(&mut self, descs: &mut DescStore, q: usize) -> Option<Desc> {
        if self.edf.is_some() {
            return self.pop_edf(descs, q);
        }
        let d = descs.pop(&mut self.queues[q])?;
        if self.queues[q].is_empty() {
            self.nonempty &= !(1 << q);
        }
        Some(d)
    }

    #[inline(never)]
    fn pop_edf(&mut self, descs: &mut DescStore, q: usize) -> Option<Desc> {
        let d = match self.edf.as_mut() {
            Some(e) if e.is_regulated(q) => e.pop(descs, &mut self.queues[q], q)?,
            _ => descs.pop(&mut self.queues[q])?,
        };
        if self.len(q) == 0 {
            self.nonempty &= !(1 << q);
        }
        Some(d)
    }

    /// The frame queue `q` sends next, left queued (what the scheduler and shapers look at).
    #[inline]
    pub(crate) fn front<'a>(&self, descs: &'a DescStore, q: usize) -> Option<&'a Desc> {
        front_of(&self.queues, &self.edf, descs, q)
    }

    /// Frames queue `q` holds (in all its lists).
    #[inline]
    pub(crate) fn len(&self, q: usize) -> usize {
        self.queues[q].len() + self.edf.as_ref().map_or(0, |e| e.extra_len(q))
    }

    /// Takes a new config's EDF settings. Budgets apply to frames queued from now on; when
    /// the mode or the set of regulated queues changes, every queued frame of the queues
    /// concerned is filed again under the new rules, in the order the old ones would have
    /// sent them (a live change off the packet path: no allocation, the frames stay in their
    /// slots).
    pub(crate) fn retune_edf(&mut self, p: &PortConfig, descs: &mut DescStore) {
        let new = match &p.scheduler {
            SchedulerConfig::Edf(c) => Some(&**c),
            _ => None,
        };
        let (old_mode, old_reg) = self.edf.as_ref().map_or((None, 0), |e| (Some(e.mode), e.regulated));
        let (new_mode, new_reg) = new.map_or((None, 0), |c| (Some(c.mode), c.regulated()));
        let refile = if old_mode != new_mode {
            old_reg | new_reg
        } else {
            old_reg ^ new_reg
        };
        // Queues that were plain lists until now: their frames hold deadlines from whatever
        // rules they were queued under (arrival times under another kind; older EDF deadlines
        // if the port was EDF before that), not in their list's order.
        let was_fifo = !old_reg;
        // Take the frames out in their sending order, into plain lists.
        let mut held: [DescQueue; NUM_TC] = Default::default();
        for (q, list) in held.iter_mut().enumerate() {
            if refile & (1 << q) != 0 {
                while let Some(d) = self.pop(descs, q) {
                    descs.push(list, d);
                }
            }
        }
        match (self.edf.as_mut(), new) {
            (Some(e), Some(c)) => {
                e.mode = c.mode;
                e.regulated = c.regulated();
                e.set_budgets(c);
            }
            (_, c) => self.edf = c.map(EdfQueues::new),
        }
        for (q, list) in held.iter_mut().enumerate() {
            let mut floor = 0u64;
            while let Some(mut d) = descs.pop(list) {
                if was_fifo & (1 << q) != 0 {
                    // A list's frames leave in its order, and must go on doing so (a flow's
                    // frames share a queue): deadlines made non-decreasing along it keep every
                    // mode to that order (ties go to the earlier arrival number), and a frame
                    // that came later cannot overtake them (its deadline is its arrival, now,
                    // or later, plus its budget). Deadlines only rise, so no frame becomes
                    // more urgent than it was.
                    d.deadline = d.deadline.max(floor);
                    floor = d.deadline;
                }
                // Re-filed frames are not new arrivals: their order errors were counted.
                let before = self.queue_counters[q].edf_order_errors;
                self.push(descs, q, d);
                self.queue_counters[q].edf_order_errors = before;
            }
        }
        self.note_plain_enqueue();
    }

    /// Queues a PFC frame to send ahead of all data. Only the newest state of a set of
    /// priorities matters to the peer, so a request for priorities already waiting replaces
    /// that request's times (an XON overtaking its XOFF, a refresh its predecessor) instead of
    /// taking another place: a link slower than the refresh timer then sends the latest state
    /// once rather than a growing backlog. What is still refused (64 distinct requests waiting:
    /// the link is stalled; the refresh timer re-sends the state) is no packet, so it is no
    /// drop: both are counted in `pfc_tx_skipped`, never in `drops`.
    pub(crate) fn queue_pfc(&mut self, req: PfcRequest) {
        let merged = match self.pfc_out.iter_mut().find(|w| w.prios == req.prios) {
            Some(waiting) => {
                waiting.times = req.times;
                true
            }
            None => false,
        };
        if merged || self.pfc_out.push(req).is_err() {
            self.counters.pfc_tx_skipped += 1;
        }
    }
}
