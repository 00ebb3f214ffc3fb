//! What one egress port owns: its queues (head, tail and length of each; the descriptors sit in
//! the switch-wide [`DescStore`] that `Egress` owns), scheduler, shapers, WRED profiles, the
//! CNP policer, pause reception and the watchdog, its half of the buffer account, the link's
//! pacing and the PFC frames its ingress side asked it to send.

use super::link::LinkRate;
use super::queues::{DescQueue, DescStore};
use super::sched::Scheduler;
use super::token_bucket::TokenBucket;
use super::wred::Wred;
use crate::buffers::ring::Ring;
use crate::counters::{PortCounters, QueueCounters};
use crate::mmu::QueueAccount;
use crate::pfc::{PauseState, PfcRequest, Watchdog};
use controlplane::{Config, PortConfig, NUM_TC};

/// A queued frame. Small and `Copy`: this is what the egress queues hold, one per packet slot
/// ([`DescStore`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Desc {
    pub slot: u32,
    pub len: u16,
    pub in_port: u8,
    pub pg: u8,
    pub cells: u16,
    pub ect: bool,
    pub cnp: bool,
    /// Already CE-marked (or WRED-decided) at enqueue.
    pub wred_done: bool,
}

// The control plane's memory estimate (controlplane::memory) counts descriptors at this size.
const _: () = assert!(std::mem::size_of::<Desc>() as u64 <= controlplane::memory::DESC_BYTES);

/// The switch port's own MAC, used as the source of the PFC frames it sends.
pub fn port_mac(id: u16) -> [u8; 6] {
    let b = id.to_be_bytes();
    [0x02, 0x52, 0x53, 0x57, b[0], b[1]]
}

/// PFC frames a port may hold waiting to be sent; more means the link is stalled.
const PFC_BACKLOG: usize = 64;

pub struct EgressPort {
    pub(crate) id: u16,
    pub(crate) mac: [u8; 6],
    pub(crate) speed_bps: u64,
    pub(crate) rate: LinkRate,
    pub(crate) queues: [DescQueue; NUM_TC],
    pub(crate) sched: Scheduler,
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
}

impl EgressPort {
    pub(crate) fn new(p: &PortConfig, cfg: &Config, buffers: QueueAccount, lossless_queues: u8) -> Self {
        let mut port = EgressPort {
            id: p.id,
            mac: port_mac(p.id),
            speed_bps: 0,
            rate: LinkRate::new(1),
            queues: Default::default(),
            sched: Scheduler::new(p),
            shapers: Default::default(),
            wred: Default::default(),
            cnp_policer: None,
            busy_until_ns: 0,
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
        };
        port.set_qos(p, cfg);
        port
    }

    /// The QoS a config gives this port: rate, scheduler, shapers, WRED, policer. A live change
    /// keeps their state (ARCHITECTURE.md, "Live configuration"): a shaper or the policer keeps
    /// its tokens (clamped to a new burst), WRED its average, the scheduler its deficits and
    /// position where the queue modes stay; only what a change adds starts afresh (a new
    /// shaper or policer full, a new WRED profile at an average of zero).
    pub(crate) fn set_qos(&mut self, p: &PortConfig, cfg: &Config) {
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
    /// that got a slot has its entry.
    #[inline]
    pub(crate) fn push(&mut self, descs: &mut DescStore, q: usize, d: Desc) {
        descs.push(&mut self.queues[q], d);
        self.nonempty |= 1 << q;
    }

    #[inline]
    pub(crate) fn pop(&mut self, descs: &mut DescStore, q: usize) -> Option<Desc> {
        let d = descs.pop(&mut self.queues[q])?;
        if self.queues[q].is_empty() {
            self.nonempty &= !(1 << q);
        }
        Some(d)
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
