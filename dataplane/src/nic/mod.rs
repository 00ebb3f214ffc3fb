//! A RoCE NIC model, time-agnostic: every call takes `now` (nanoseconds), so the same code runs
//! in real time (rocegen, on AF_PACKET sockets in the lab) and in virtual time (`rocesw
//! fabric`'s hosts).
//!
//! * [`sender`]: RC SEND / RDMA WRITE messages cut into FIRST/MIDDLE/LAST/ONLY packets from
//!   per-QP frame templates patched in place (PSN, payload header, ICRC), paced by a token
//!   bucket on wire bytes, honouring received PFC/PAUSE, with a DCQCN reaction point per QP.
//! * [`pause`]: received PFC/PAUSE state (which priority is paused until when, time paused).
//! * [`peer`]: the far end of a link whose peer is software, as a NIC's transmit side that
//!   obeys the switch's PFC (replay's peers, `rocesw run`'s emulated links).
//! * [`receiver`]: ICRC, PSN order, CE marks, one-way latency and throughput per flow, and the
//!   DCQCN notification point (CNPs, at most one per QP per interval).
//! * [`dcqcn`]: the DCQCN rate state machine and the CNP pacer as pure functions of time.
//! * [`histogram`]: the latency histogram the receiver records.
//!
//! Every data packet's payload begins with [`PayloadHeader`]: magic, send time (the caller's
//! clock), per-QP sequence number. A QP uses the same number at both ends (the CNP's
//! destination QP is the data packets' destination QP), so a CNP finds the sender's QP without
//! connection state.

pub mod dcqcn;
pub mod histogram;
pub mod pause;
pub mod peer;
pub mod receiver;
pub mod sender;

use anyhow::{anyhow, bail, Result};

/// Wire overhead per frame not seen by the socket: preamble + SFD 8, FCS 4, inter-frame gap 12.
pub use controlplane::wire_timing::WIRE_OVERHEAD_BYTES;

/// The 16-byte header at the start of every data packet's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadHeader {
    /// Send time, CLOCK_MONOTONIC nanoseconds.
    pub ts_ns: u64,
    /// Per-QP packet sequence number (0 for the QP's first packet; not wrapped at 24 bits).
    pub seq: u32,
}

impl PayloadHeader {
    /// "RCGN".
    pub const MAGIC: u32 = 0x5243_474e;
    /// Bytes the header takes at the start of the payload: magic, timestamp and sequence number.
    pub const LEN: usize = 16;

    /// Writes the header (truncated if `buf` is shorter than 16 bytes).
    #[inline]
    pub fn write(&self, buf: &mut [u8]) {
        let mut b = [0u8; Self::LEN];
        b[..4].copy_from_slice(&Self::MAGIC.to_be_bytes());
        b[4..12].copy_from_slice(&self.ts_ns.to_be_bytes());
        b[12..].copy_from_slice(&self.seq.to_be_bytes());
        let n = buf.len().min(Self::LEN);
        buf[..n].copy_from_slice(&b[..n]);
    }

    /// Reads a header if `buf` holds a whole one with the right magic.
    #[inline]
    pub fn read(buf: &[u8]) -> Option<PayloadHeader> {
        let b = buf.get(..Self::LEN)?;
        if u32::from_be_bytes([b[0], b[1], b[2], b[3]]) != Self::MAGIC {
            return None;
        }
        Some(PayloadHeader {
            ts_ns: u64::from_be_bytes(b[4..12].try_into().ok()?),
            seq: u32::from_be_bytes(b[12..16].try_into().ok()?),
        })
    }
}

/// DSCP → priority (traffic class) of untagged traffic, for honouring PFC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrioMap(pub [u8; 64]);

impl Default for PrioMap {
    /// 26 → 3 (RoCE), 48 → 6 (CNP), everything else 0.
    fn default() -> Self {
        let mut m = [0u8; 64];
        m[26] = 3;
        m[48] = 6;
        PrioMap(m)
    }
}

impl PrioMap {
    /// The priority a frame with this DSCP travels in (only the low six bits of `dscp` count).
    pub fn get(&self, dscp: u8) -> u8 {
        self.0[usize::from(dscp & 63)]
    }

    /// `"26=3,48=6"`: the listed DSCPs map to the given priorities, all others to 0.
    pub fn parse(s: &str) -> Result<PrioMap> {
        let mut m = [0u8; 64];
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (d, p) = item
                .split_once('=')
                .ok_or_else(|| anyhow!("DSCP map entry {item:?} is not DSCP=PRIORITY"))?;
            let d: u8 = d.trim().parse().map_err(|_| anyhow!("bad DSCP in {item:?}"))?;
            let p: u8 = p.trim().parse().map_err(|_| anyhow!("bad priority in {item:?}"))?;
            if d > 63 || p > 7 {
                bail!("DSCP map entry {item:?}: DSCP must be 0..=63 and priority 0..=7");
            }
            m[usize::from(d)] = p;
        }
        Ok(PrioMap(m))
    }
}

/// Which RC operation the sender's messages use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// RC SEND FIRST/MIDDLE/LAST/ONLY.
    Send,
    /// RC RDMA WRITE FIRST/MIDDLE/LAST/ONLY (RETH on FIRST and ONLY).
    Write,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_header_round_trip() {
        let h = PayloadHeader {
            ts_ns: 123_456_789,
            seq: 42,
        };
        let mut b = [0u8; 20];
        h.write(&mut b);
        assert_eq!(PayloadHeader::read(&b), Some(h));
        let mut short = [0u8; 8];
        h.write(&mut short);
        assert_eq!(PayloadHeader::read(&short), None);
        b[0] ^= 1;
        assert_eq!(PayloadHeader::read(&b), None);
    }
}
