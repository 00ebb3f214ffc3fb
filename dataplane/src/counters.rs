//! Counters, each written by exactly one owner (the worker that owns the port) and summed when
//! read, as VPP and OVS do: no atomics or locks on the packet path.

use controlplane::NUM_TC;

/// Why a frame did not make it through the switch. Every drop is counted under one of these
/// (malformed frames under their parser reason instead, see `PortCounters::malformed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Lossy traffic beyond its egress queue's limit.
    EgressLimit,
    /// Lossy traffic beyond its ingress PG's limit (or the pool is full).
    IngressLimit,
    /// Lossless traffic after the PG's headroom is gone: the peer did not stop in time.
    HeadroomOverflow,
    /// Non-ECT traffic dropped by WRED.
    Wred,
    /// CNPs above the CNP policer's rate.
    Policer,
    /// Nowhere to send it: destination learnt on the ingress port, or no other port to flood to.
    NoRoute,
    /// Link-local control traffic (01:80:c2:00:00:0x) that a bridge must not forward.
    LinkLocal,
    /// Frame larger than the port accepts.
    Oversize,
    /// Dropped by the PFC watchdog's `drop` action on a stormed queue.
    PfcWatchdog,
    /// No free packet buffer (should not happen: the MMU bounds what is held).
    NoBuffer,
}

impl DropReason {
    pub const COUNT: usize = 10;
    pub const ALL: [DropReason; Self::COUNT] = [
        DropReason::EgressLimit,
        DropReason::IngressLimit,
        DropReason::HeadroomOverflow,
        DropReason::Wred,
        DropReason::Policer,
        DropReason::NoRoute,
        DropReason::LinkLocal,
        DropReason::Oversize,
        DropReason::PfcWatchdog,
        DropReason::NoBuffer,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DropReason::EgressLimit => "egress_limit",
            DropReason::IngressLimit => "ingress_limit",
            DropReason::HeadroomOverflow => "headroom_overflow",
            DropReason::Wred => "wred",
            DropReason::Policer => "policer",
            DropReason::NoRoute => "no_route",
            DropReason::LinkLocal => "link_local",
            DropReason::Oversize => "oversize",
            DropReason::PfcWatchdog => "pfc_watchdog",
            DropReason::NoBuffer => "no_buffer",
        }
    }
}

/// Room for the parser's malformed reasons, indexed by `Malformed as usize`.
pub const MALFORMED_SLOTS: usize = 32;

#[derive(Debug, Clone, Default)]
pub struct PortCounters {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub drops: [u64; DropReason::COUNT],
    pub malformed: [u64; MALFORMED_SLOTS],
    /// Frames whose EtherType the switch does not look into; forwarded at L2 in the default class.
    pub unknown_ethertype: u64,
    pub ecn_marked: u64,
    pub pfc_tx: [u64; NUM_TC],
    pub pfc_rx: [u64; NUM_TC],
    pub pause_rx: u64,
    /// Nanoseconds each priority of this port's egress was paused by received PFC.
    pub paused_ns: [u64; NUM_TC],
    pub watchdog_storms: [u64; NUM_TC],
    pub watchdog_restores: [u64; NUM_TC],
}

#[derive(Debug, Clone, Copy, Default)]
pub struct QueueCounters {
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub dropped_packets: u64,
    pub dropped_bytes: u64,
    pub ecn_marked: u64,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct PgCounters {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub dropped_packets: u64,
    pub xoff_sent: u64,
    pub xon_sent: u64,
}
