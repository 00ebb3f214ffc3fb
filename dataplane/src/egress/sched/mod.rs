//! Port schedulers: which eligible queue sends next. A port runs one kind, chosen per port by
//! `scheduler` in the config (DESIGN.md, "Schedulers as a choice"):
//!
//! * [`sp_wdrr`]: strict priority, then WDRR by byte weights (the default);
//! * [`vlarb`]: InfiniBand VL arbitration, high and low tables with LimitOfHighPriority;
//! * [`edf`]: strict control queues, then earliest deadline first over the regulated queues
//!   (each in one of three modes: a heap, one FIFO, or an ordered and a take-over FIFO), then
//!   WDRR.
//!
//! Every kind sits behind [`Scheduler`], an enum rather than a trait object, so a port's
//! selection is one match and a direct (inlinable) call, with nothing allocated or looked up
//! through a pointer per packet.
//!
//! What a kind sees, and all it sees: which queues are *eligible* (a bit mask the caller
//! builds: non-empty, not paused by PFC, shaper conforming), what it asks of each eligible
//! queue's head ([`Head`]) and `now`. It returns a queue, and charges whatever it keeps
//! (deficits, entry weights) for the head it picked: the caller sends exactly that frame.
//!
//! Adding a kind: a module here with `select` and `select_again` of the same shape, a variant of [`Scheduler`] and of `controlplane::SchedulerConfig`, its arms in the
//! matches below, and its strategy in the shared property tests (`props`), which every kind
//! must pass. EDF reads each head's deadline, which the port sets on every frame it queues
//! (`Desc::deadline`) and passes in [`Head`].

pub mod edf;
pub mod sp_wdrr;
pub mod vlarb;

#[cfg(test)]
mod props;

use controlplane::{PortConfig, SchedMode, SchedulerConfig, NUM_TC};
pub use edf::Edf;
pub use sp_wdrr::SpWdrr;
pub use vlarb::VlArb;

/// What a scheduler may read of an eligible queue's head frame. Built lazily by the caller's
/// closure for the queues a kind asks about, so a field a kind never reads costs nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Head {
    /// The frame's length in bytes (without FCS), what byte weights are charged.
    pub len: u32,
    /// The frame's deadline (ns of the switch clock, `Desc::deadline`), what EDF compares.
    pub deadline: u64,
}

/// One port's scheduler, of the kind its config names. The kinds stay inline although their
/// sizes differ (VL arbitration's tables are 288 bytes): boxing the large one cost the default
/// kind 43 instructions a packet (bench/README.md), one port's state is allocated once, and a
/// scheduler is reached through its port on every packet.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scheduler {
    /// Strict priority, then WDRR by byte weights.
    SpWdrr(SpWdrr),
    /// InfiniBand VL arbitration: high and low weighted tables under a high-priority limit.
    VlArb(VlArb),
    /// Earliest deadline first for the regulated queues, between strict and WDRR bands.
    Edf(Edf),
}

/// The WDRR byte quantum of one unit of weight on port `p`: the largest frame divided by the
/// port's heaviest WDRR weight, so that the heaviest queue sends about one largest frame a
/// visit and a round is short; lighter queues carry their deficit over rounds. With weights of
/// 1 (the default) it is the largest frame, as before. With the largest frame as the unit,
/// SONiC's weights of 14 and 15 sent 14 × 9 KB a visit, 85 frames of 1500 B, and sonic-mgmt's
/// WRRtest (every queue's last frame within 80 of the end) failed.
pub fn base_quantum(p: &PortConfig) -> u32 {
    let heaviest = p
        .queues
        .iter()
        .filter_map(|q| match q.sched {
            SchedMode::Wdrr { weight } => Some(weight.max(1)),
            SchedMode::Strict => None,
        })
        .max()
        .unwrap_or(1);
    p.max_frame_bytes.div_ceil(heaviest).max(64)
}

impl Scheduler {
    /// The scheduler a port's config asks for, from a fresh start.
    pub fn new(p: &PortConfig) -> Self {
        match &p.scheduler {
            SchedulerConfig::SpWdrr => Scheduler::SpWdrr(SpWdrr::new(&modes(p), base_quantum(p))),
            SchedulerConfig::VlArb(c) => Scheduler::VlArb(VlArb::new(c)),
            SchedulerConfig::Edf(e) => Scheduler::Edf(Edf::new(&modes(p), base_quantum(p), e.regulated())),
        }
    }

    /// Takes a port's new config (a live change). The same kind keeps its state as far as the
    /// new settings allow (each kind's `retune` says how); another kind starts fresh.
    pub fn retune(&mut self, p: &PortConfig) {
        match (self, &p.scheduler) {
            (Scheduler::SpWdrr(s), SchedulerConfig::SpWdrr) => s.retune(&modes(p), base_quantum(p)),
            (Scheduler::VlArb(s), SchedulerConfig::VlArb(c)) => s.retune(c),
            (Scheduler::Edf(s), SchedulerConfig::Edf(e)) => s.retune(&modes(p), base_quantum(p), e.regulated()),
            (this, _) => *this = Scheduler::new(p),
        }
    }

    /// The kind's name, as `scheduler = "..."` spells it.
    pub fn kind(&self) -> &'static str {
        match self {
            Scheduler::SpWdrr(_) => "sp_wdrr",
            Scheduler::VlArb(_) => "vlarb",
            Scheduler::Edf(_) => "edf",
        }
    }

    /// Picks the queue to send from next among `eligible` (bit mask), or None when nothing is
    /// eligible. Every kind is work-conserving: Some whenever `eligible` is not 0. The queue
    /// returned is charged for its head, which the caller then sends.
    #[inline]
    pub fn select(&mut self, eligible: u8, head: impl Fn(usize) -> Head) -> Option<usize> {
        match self {
            Scheduler::SpWdrr(s) => s.select(eligible, |q| head(q).len),
            Scheduler::VlArb(s) => s.select(eligible, |q| head(q).len),
            Scheduler::Edf(s) => s.select(eligible, head),
        }
    }

    /// Whether [`Scheduler::select`] would pick `q` again, given that it just picked `q` and no
    /// queue has changed eligibility since (the caller's promise); charges it like `select`
    /// when so, and changes nothing when not. A shortcut that lets a port send a run of frames
    /// from one queue with one full selection; a kind may always answer false.
    /// Always inlined: it runs once a frame sent, and called out of line (as the DPDK
    /// build's transmit loop did) its call and spills cost more than the test itself.
    #[inline(always)]
    pub fn select_again(&mut self, q: usize, head: Head) -> bool {
        match self {
            Scheduler::SpWdrr(s) => s.select_again(q, head.len),
            Scheduler::VlArb(s) => s.select_again(q, head.len),
            Scheduler::Edf(s) => s.select_again(q, head),
        }
    }
}

/// The SP/WDRR modes of a port's queues.
fn modes(p: &PortConfig) -> [controlplane::SchedMode; NUM_TC] {
    std::array::from_fn(|q| p.queues[q].sched)
}
