//! The receiver: per flow (source IP, destination IP, QP) ICRC, PSN order, CE marks, one-way
//! latency and throughput; and the DCQCN notification point, which answers CE marks with
//! CNPs (at most one per QP per interval). It sends nothing else (no ACKs).

use super::dcqcn::CnpPacer;
use super::histogram::Histogram;
use super::{PayloadHeader, WIRE_OVERHEAD_BYTES};
use crate::wire::build::{build_cnp, IpPair};
use crate::wire::{verify_icrc, Ecn, FrameInfo, L3Kind};
use std::collections::HashMap;

const PSN_MASK: u32 = 0x00ff_ffff;
const PSN_HALF: u32 = 0x0080_0000;
/// PSNs remembered behind the expected one, to tell a duplicate from a late packet.
const WINDOW: u32 = 1024;

/// PSN order of one flow: loss (gaps), duplicates and late (out-of-order) arrivals.
#[derive(Debug, Clone)]
pub struct PsnTracker {
    expected: Option<u32>,
    seen: [u64; (WINDOW / 64) as usize],
    /// PSNs skipped and not (yet) seen.
    pub lost: u64,
    /// PSNs that arrived again (already seen within the window).
    pub duplicates: u64,
    /// Arrived after a later PSN (each also un-counts one loss).
    pub out_of_order: u64,
    /// Arrived as the PSN expected next.
    pub in_order: u64,
}

impl Default for PsnTracker {
    fn default() -> Self {
        PsnTracker {
            expected: None,
            seen: [0; (WINDOW / 64) as usize],
            lost: 0,
            duplicates: 0,
            out_of_order: 0,
            in_order: 0,
        }
    }
}

impl PsnTracker {
    fn bit(&self, psn: u32) -> bool {
        let i = psn % WINDOW;
        self.seen[(i / 64) as usize] & (1 << (i % 64)) != 0
    }
    fn set_bit(&mut self, psn: u32, v: bool) {
        let i = psn % WINDOW;
        let w = &mut self.seen[(i / 64) as usize];
        if v {
            *w |= 1 << (i % 64);
        } else {
            *w &= !(1 << (i % 64));
        }
    }

    /// Sets where the flow starts (the PSN of its first packet) if not set yet.
    pub fn start_at(&mut self, psn: u32) {
        if self.expected.is_none() {
            self.expected = Some(psn & PSN_MASK);
        }
    }

    /// A packet with `psn` arrived.
    pub fn on_psn(&mut self, psn: u32) {
        let psn = psn & PSN_MASK;
        let exp = *self.expected.get_or_insert(psn);
        let ahead = psn.wrapping_sub(exp) & PSN_MASK;
        if ahead == 0 {
            self.in_order += 1;
        } else if ahead < PSN_HALF {
            self.lost += u64::from(ahead);
            if ahead >= WINDOW {
                self.seen = [0; (WINDOW / 64) as usize];
            } else {
                for k in 0..ahead {
                    self.set_bit(exp.wrapping_add(k) & PSN_MASK, false);
                }
            }
        } else {
            let back = exp.wrapping_sub(psn) & PSN_MASK;
            if back <= WINDOW && self.bit(psn) {
                self.duplicates += 1;
            } else {
                self.out_of_order += 1;
                self.lost = self.lost.saturating_sub(1);
                if back <= WINDOW {
                    self.set_bit(psn, true);
                }
            }
            return;
        }
        self.set_bit(psn, true);
        self.expected = Some((psn + 1) & PSN_MASK);
    }
}

/// What one flow delivered.
#[derive(Debug, Clone)]
pub struct FlowRx {
    /// The sender's IPv4 address.
    pub src_ip: [u8; 4],
    /// This host's IPv4 address the flow was sent to.
    pub dst_ip: [u8; 4],
    /// Destination QP of the BTH.
    pub qpn: u32,
    /// Data packets that passed the ICRC check.
    pub packets: u64,
    /// Frame bytes of those packets (no preamble, gap or FCS).
    pub bytes: u64,
    /// Those bytes plus each frame's preamble, gap and FCS: what the link carried.
    pub wire_bytes: u64,
    /// Packets dropped for a wrong ICRC (their PSNs count as lost).
    pub bad_icrc: u64,
    /// Packets that arrived with ECN CE.
    pub ce: u64,
    /// CNPs the notification point asked to send for them.
    pub cnps_sent: u64,
    /// Loss, duplicates and reordering of the flow's PSNs.
    pub psn: PsnTracker,
    /// Arrival of the flow's first packet, ns (the caller's clock).
    pub first_ns: u64,
    /// Arrival of its latest packet, ns.
    pub last_ns: u64,
    first_wire_bytes: u64,
    /// Longest time between two consecutive arrivals.
    pub max_gap_ns: u64,
    /// Arrival time of the packet after that longest gap.
    pub max_gap_end_ns: u64,
    /// One-way latency of every packet that carried a payload header.
    pub latency: Histogram,
    pacer: CnpPacer,
    cnp: Option<Vec<u8>>,
}

impl FlowRx {
    /// Wire throughput between the first and the last arrival, bits/s.
    pub fn throughput_bps(&self) -> f64 {
        let dt = self.last_ns.saturating_sub(self.first_ns);
        if dt == 0 {
            return 0.0;
        }
        (self.wire_bytes - self.first_wire_bytes) as f64 * 8e9 / dt as f64
    }
}

/// Frames a receiver saw that were not data of a flow.
#[derive(Debug, Clone, Default)]
pub struct RxOther {
    /// RoCEv2 frames that are not IPv4 (not tracked).
    pub not_ipv4: u64,
}

/// The receive side of a host.
pub struct Receiver {
    /// `None`: the notification point is off (no CNPs).
    cnp_interval_ns: Option<u64>,
    /// One per (source IP, destination IP, QP), in order of first arrival.
    pub flows: Vec<FlowRx>,
    index: HashMap<([u8; 4], [u8; 4], u32), usize>,
    /// What was not data of a flow.
    pub other: RxOther,
    /// CNPs [`Receiver::on_roce`] returned that the caller could not send (rocegen counts them).
    pub cnp_send_failures: u64,
}

fn ipv4_pair(frame: &[u8], info: &FrameInfo) -> Option<([u8; 4], [u8; 4])> {
    if info.l3_kind() != L3Kind::Ipv4 {
        return None;
    }
    let l3 = info.l3_offset();
    let b = frame.get(l3 + 12..l3 + 20)?;
    Some(([b[0], b[1], b[2], b[3]], [b[4], b[5], b[6], b[7]]))
}

/// The source and destination IPv4 addresses of a frame, if IPv4.
pub fn ipv4_addrs(frame: &[u8], info: &FrameInfo) -> Option<([u8; 4], [u8; 4])> {
    ipv4_pair(frame, info)
}

impl Receiver {
    /// `cnp_interval_ns`: `Some` turns the DCQCN notification point on.
    pub fn new(cnp_interval_ns: Option<u64>) -> Receiver {
        Receiver {
            cnp_interval_ns,
            flows: Vec::new(),
            index: HashMap::new(),
            other: RxOther::default(),
            cnp_send_failures: 0,
        }
    }

    /// A RoCEv2 data frame (not a CNP) arrived at `now`. Returns a CNP to send back, if
    /// this packet was CE-marked and its QP's CNP interval has passed.
    pub fn on_roce(&mut self, frame: &[u8], info: &FrameInfo, now: u64) -> Option<&[u8]> {
        let Some((src_ip, dst_ip)) = ipv4_pair(frame, info) else {
            self.other.not_ipv4 += 1;
            return None;
        };
        let bth = info.bth(frame)?;
        let qpn = bth.dest_qp();
        let key = (src_ip, dst_ip, qpn);
        let i = match self.index.get(&key) {
            Some(&i) => i,
            None => {
                self.flows.push(FlowRx {
                    src_ip,
                    dst_ip,
                    qpn,
                    packets: 0,
                    bytes: 0,
                    wire_bytes: 0,
                    bad_icrc: 0,
                    ce: 0,
                    cnps_sent: 0,
                    psn: PsnTracker::default(),
                    first_ns: now,
                    last_ns: now,
                    first_wire_bytes: frame.len() as u64 + WIRE_OVERHEAD_BYTES,
                    max_gap_ns: 0,
                    max_gap_end_ns: 0,
                    latency: Histogram::new(),
                    pacer: CnpPacer::new(self.cnp_interval_ns.unwrap_or(0)),
                    cnp: None,
                });
                self.index.insert(key, self.flows.len() - 1);
                self.flows.len() - 1
            }
        };
        let f = &mut self.flows[i];
        if !verify_icrc(frame, info) {
            // A NIC drops it: the PSN gap it leaves counts as loss.
            f.bad_icrc += 1;
            return None;
        }
        let gap = now.saturating_sub(f.last_ns);
        if f.packets > 0 && gap > f.max_gap_ns {
            f.max_gap_ns = gap;
            f.max_gap_end_ns = now;
        }
        f.last_ns = now;
        f.packets += 1;
        f.bytes += frame.len() as u64;
        f.wire_bytes += frame.len() as u64 + WIRE_OVERHEAD_BYTES;
        let payload_off = info.bth_offset()? + 12 + if has_reth(bth.opcode()) { 16 } else { 0 };
        let hdr = frame.get(payload_off..).and_then(PayloadHeader::read);
        if let Some(h) = hdr {
            // The PSN of the QP's first packet: loss before the first arrival counts too.
            f.psn.start_at(bth.psn().wrapping_sub(h.seq) & PSN_MASK);
            f.latency.record(now.saturating_sub(h.ts_ns));
        }
        f.psn.on_psn(bth.psn());
        if info.ecn() == Some(Ecn::Ce) {
            f.ce += 1;
            if self.cnp_interval_ns.is_some() && f.pacer.on_ce(now) {
                f.cnps_sent += 1;
                if f.cnp.is_none() {
                    let ip = IpPair::V4 {
                        src: dst_ip,
                        dst: src_ip,
                    };
                    f.cnp = Some(build_cnp(info.dst_mac(frame), info.src_mac(frame), ip, qpn));
                }
                return f.cnp.as_deref();
            }
        }
        None
    }
}

/// RC opcodes that carry a RETH (RDMA WRITE FIRST/ONLY/ONLY with immediate, READ REQUEST).
fn has_reth(op: u8) -> bool {
    matches!(op, 0x06 | 0x0a | 0x0b | 0x0c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psn_tracker() {
        let mut t = PsnTracker::default();
        for p in 0..10 {
            t.on_psn(p);
        }
        assert_eq!((t.in_order, t.lost, t.duplicates, t.out_of_order), (10, 0, 0, 0));
        t.on_psn(13); // 10, 11, 12 missing
        assert_eq!(t.lost, 3);
        t.on_psn(11); // late
        assert_eq!((t.lost, t.out_of_order), (2, 1));
        t.on_psn(11); // now a duplicate
        t.on_psn(5);
        assert_eq!(t.duplicates, 2);
        // Wrap at 24 bits.
        let mut w = PsnTracker::default();
        w.on_psn(PSN_MASK - 1);
        w.on_psn(PSN_MASK);
        w.on_psn(0);
        w.on_psn(1);
        assert_eq!((w.in_order, w.lost), (4, 0));
        // Loss before the first arrival.
        let mut s = PsnTracker::default();
        s.start_at(0);
        s.on_psn(4);
        assert_eq!(s.lost, 4);
    }
}
