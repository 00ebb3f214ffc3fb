//! Counters, each written by exactly one owner (the worker that owns the port) and summed when
//! read, as VPP and OVS do: no atomics or locks on the packet path.

use controlplane::NUM_TC;

/// Declares `DropReason` from one list, so its variants, `ALL`, `COUNT` and names cannot
/// disagree: a reason added to the list is counted, reported and has room in `PortCounters`,
/// where a hand-kept `COUNT` one short would index past the counters on the packet path.
macro_rules! drop_reasons {
    ($(#[$meta:meta])* pub enum DropReason { $($(#[$vmeta:meta])* $variant:ident => $name:literal,)+ }) => {
        $(#[$meta])*
        pub enum DropReason {
            $($(#[$vmeta])* $variant,)+
        }

        impl DropReason {
            /// Number of reasons: the length of [`PortCounters::drops`].
            pub const COUNT: usize = [$(DropReason::$variant),+].len();
            /// Every reason in declaration order, so `ALL[r as usize] == r`.
            pub const ALL: [DropReason; Self::COUNT] = [$(DropReason::$variant),+];

            /// The reason's key in reports (`drops` in `summary.json` and `counters`).
            pub fn name(self) -> &'static str {
                match self {
                    $(DropReason::$variant => $name,)+
                }
            }
        }
    };
}

drop_reasons! {
    /// Why a frame did not make it through the switch. Every drop is counted under one of these
    /// (malformed frames under their parser reason instead, see `PortCounters::malformed`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum DropReason {
        /// Lossy traffic beyond its egress queue's limit.
        EgressLimit => "egress_limit",
        /// Lossy traffic beyond its ingress PG's limit (or the pool is full).
        IngressLimit => "ingress_limit",
        /// Lossless traffic after the PG's headroom is gone: the peer did not stop in time.
        HeadroomOverflow => "headroom_overflow",
        /// Non-ECT traffic dropped by WRED.
        Wred => "wred",
        /// CNPs above the CNP policer's rate.
        Policer => "policer",
        /// Nowhere to send it: destination learnt on the ingress port, or no other port to flood to.
        NoRoute => "no_route",
        /// Link-local control traffic (01:80:c2:00:00:0x) that a bridge must not forward.
        LinkLocal => "link_local",
        /// Frame larger than the port accepts.
        Oversize => "oversize",
        /// Dropped by the PFC watchdog's `drop` action on a stormed queue.
        PfcWatchdog => "pfc_watchdog",
        /// No free packet buffer (should not happen: the MMU bounds what is held).
        NoBuffer => "no_buffer",
        /// A received pause the switch does not obey, counted once per frame on the port it
        /// came in on: an 802.3x PAUSE (the ports run PFC, and link-level pause would stop
        /// every queue, lossy ones included, with no watchdog to end it), or a PFC frame that
        /// asks to pause a priority without PFC (not in `[pfc] priorities`; its other
        /// priorities are obeyed). As a switch ASIC does: only lossless queues pause.
        PauseIgnored => "pause_ignored",
        /// Frames the port's receive ring dropped before the switch read them: the kernel's
        /// AF_PACKET ring full (`PACKET_STATISTICS`), a DPDK NIC's `imissed`. The worker did
        /// not poll fast enough (a busy core, a burst faster than the switch). Taken from the
        /// backend's own counter about once a second (and at every snapshot), so it can trail
        /// the loss by a second; never counted in replay, which reads no ring.
        RxRing => "rx_ring",
    }
}

/// Room for the parser's malformed reasons, indexed by `Malformed as usize`.
pub const MALFORMED_SLOTS: usize = 32;

/// One port's counters; its ingress and egress sides each keep one and reports add them
/// ([`Self::merged`]).
#[derive(Debug, Clone, Default)]
pub struct PortCounters {
    /// Frames received, all of them (malformed, oversize and MAC control included).
    pub rx_packets: u64,
    /// Bytes of those frames, FCS not included.
    pub rx_bytes: u64,
    /// Frames sent, the switch's own PFC frames included.
    pub tx_packets: u64,
    /// Bytes of those frames, FCS not included.
    pub tx_bytes: u64,
    /// Frames dropped, per [`DropReason`] (indexed by `reason as usize`).
    pub drops: [u64; DropReason::COUNT],
    /// Frames the parser refused, per `Malformed` reason (indexed by `reason as usize`).
    pub malformed: [u64; MALFORMED_SLOTS],
    /// Frames whose EtherType the switch does not look into; forwarded at L2 in the default class.
    pub unknown_ethertype: u64,
    /// Source addresses the FDB did not learn: the table full, the port at its limit or its
    /// learning rate (`[fdb]`). Not drops: the frame was forwarded.
    pub learn_refused: u64,
    /// Frames received here that left through a port another worker owns (each flooded copy
    /// counted): they crossed between workers' cores, which measured 2-2.7 times the CPU time
    /// of a frame that stays (bench/README.md, "Many cores"). Always 0 with one worker.
    pub crossed_out: u64,
    /// Frames CE-marked on leaving this port.
    pub ecn_marked: u64,
    /// PFC frames sent, per priority they name (one frame may count under several).
    pub pfc_tx: [u64; NUM_TC],
    /// PFC frames received, per priority they name.
    pub pfc_rx: [u64; NUM_TC],
    /// 802.3x PAUSE frames received (ignored, see [`DropReason::PauseIgnored`]).
    pub pause_rx: u64,
    /// PFC requests that did not become a frame of their own: merged into a waiting request for
    /// the same priorities (the newest times win) or refused with the backlog full. Not drops:
    /// no packet was lost.
    pub pfc_tx_skipped: u64,
    /// Nanoseconds each priority of this port's egress was paused by received PFC.
    pub paused_ns: [u64; NUM_TC],
    /// PFC watchdog storms detected, per priority of the stormed queue.
    pub watchdog_storms: [u64; NUM_TC],
    /// PFC watchdog restorations, per priority of the restored queue.
    pub watchdog_restores: [u64; NUM_TC],
}

impl PortCounters {
    /// Field-wise sum: a port's ingress side and egress side each keep a `PortCounters`, every
    /// field written by one of them only, and a report adds the two.
    pub fn merged(&self, other: &PortCounters) -> PortCounters {
        fn add<const N: usize>(a: &[u64; N], b: &[u64; N]) -> [u64; N] {
            std::array::from_fn(|i| a[i] + b[i])
        }
        PortCounters {
            rx_packets: self.rx_packets + other.rx_packets,
            rx_bytes: self.rx_bytes + other.rx_bytes,
            tx_packets: self.tx_packets + other.tx_packets,
            tx_bytes: self.tx_bytes + other.tx_bytes,
            drops: add(&self.drops, &other.drops),
            malformed: add(&self.malformed, &other.malformed),
            unknown_ethertype: self.unknown_ethertype + other.unknown_ethertype,
            learn_refused: self.learn_refused + other.learn_refused,
            crossed_out: self.crossed_out + other.crossed_out,
            ecn_marked: self.ecn_marked + other.ecn_marked,
            pfc_tx: add(&self.pfc_tx, &other.pfc_tx),
            pfc_rx: add(&self.pfc_rx, &other.pfc_rx),
            pause_rx: self.pause_rx + other.pause_rx,
            pfc_tx_skipped: self.pfc_tx_skipped + other.pfc_tx_skipped,
            paused_ns: add(&self.paused_ns, &other.paused_ns),
            watchdog_storms: add(&self.watchdog_storms, &other.watchdog_storms),
            watchdog_restores: add(&self.watchdog_restores, &other.watchdog_restores),
        }
    }
}

/// One egress queue's counters.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueCounters {
    /// Data frames sent from this queue.
    pub tx_packets: u64,
    /// Bytes of those frames, FCS not included.
    pub tx_bytes: u64,
    /// Frames dropped after admission to this queue (limits, WRED, watchdog, ...).
    pub dropped_packets: u64,
    /// Bytes of those frames.
    pub dropped_bytes: u64,
    /// Frames CE-marked on leaving this queue.
    pub ecn_marked: u64,
    /// EDF ports, regulated queues: frames queued behind a frame of later deadline in the same
    /// FIFO list (`egress::sched::edf`).
    pub edf_order_errors: u64,
    /// EDF ports, regulated queues: frames that started to leave after their deadline.
    pub edf_deadline_misses: u64,
}

/// One ingress PG's counters.
#[derive(Debug, Clone, Copy, Default)]
pub struct PgCounters {
    /// Frames classified into this PG (MAC control and refused frames not included).
    pub rx_packets: u64,
    /// Bytes of those frames, FCS not included.
    pub rx_bytes: u64,
    /// Frames from this PG that were dropped, before queueing or after admission.
    pub dropped_packets: u64,
    /// XOFF requests this PG made, refreshes included.
    pub xoff_sent: u64,
    /// XON requests this PG made.
    pub xon_sent: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Malformed;

    #[test]
    fn drop_reasons_index_their_counters_and_have_their_own_names() {
        assert_eq!(DropReason::ALL.len(), DropReason::COUNT);
        assert_eq!(PortCounters::default().drops.len(), DropReason::COUNT);
        let mut names = std::collections::BTreeSet::new();
        for (i, r) in DropReason::ALL.into_iter().enumerate() {
            assert_eq!(r as usize, i, "{r:?}");
            assert!(names.insert(r.name()), "{} named twice", r.name());
        }
        // Parser reasons share the `drops` map: a name in both merges two counts, which only
        // `oversize` means to (the same drop, found before or by the parser).
        for m in (0..MALFORMED_SLOTS).filter_map(Malformed::from_index) {
            let shared = m == Malformed::Oversize && m.name() == DropReason::Oversize.name();
            assert!(
                shared || !names.contains(m.name()),
                "{} is a drop reason and a malformed reason",
                m.name()
            );
        }
    }
}
