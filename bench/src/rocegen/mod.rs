//! `rocegen`: a RoCEv2 traffic generator that behaves like a RoCE NIC, on raw AF_PACKET
//! sockets inside test hosts' network namespaces.
//!
//! * [`wire`]: the non-blocking AF_PACKET socket, entering a namespace, the monotonic clock.
//! * [`sender`]: RC SEND / RDMA WRITE messages cut into FIRST/MIDDLE/LAST/ONLY packets from
//!   per-QP frame templates patched in place (PSN, payload header, ICRC), paced by a token
//!   bucket on wire bytes, honouring received PFC/PAUSE, with a DCQCN reaction point per QP.
//! * [`receiver`]: ICRC, PSN order, CE marks, one-way latency and throughput per flow, and the
//!   DCQCN notification point (CNPs, at most one per QP per interval).
//! * [`dcqcn`]: the DCQCN rate state machine and the CNP pacer as pure functions of time.
//! * [`host`]: one thread driving one host (its socket, its sender and receiver).
//! * [`coordinate`]: several hosts started at the same instant, one report (the CTBG idea).
//! * [`histogram`]: the latency histogram the receiver records and the report summarises.
//! * [`report`]: the report, the table and the JSON.
//!
//! Every data packet's payload begins with [`PayloadHeader`]: magic, send time
//! (CLOCK_MONOTONIC ns, one clock for all namespaces of a machine), per-QP sequence number.
//! A QP uses the same number at both ends (the CNP's destination QP is the data packets'
//! destination QP), so a CNP finds the sender's QP without connection state.

pub mod coordinate;
pub mod dcqcn;
pub mod histogram;
pub mod host;
pub mod receiver;
pub mod report;
pub mod sender;
pub mod wire;

use anyhow::{anyhow, bail, Result};
use std::net::Ipv4Addr;

/// Wire overhead per frame not seen by the socket: preamble + SFD 8, FCS 4, inter-frame gap 12.
pub const WIRE_OVERHEAD_BYTES: u64 = dataplane::switch::WIRE_OVERHEAD_BYTES;

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

/// `"25G"`, `"200M"`, `"1.5g"`, `"100000"`, `"10Gbps"` → bits per second.
pub fn parse_rate(s: &str) -> Result<u64> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.trim_end_matches("bps").trim_end_matches("b/s");
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1e3),
        Some('m') => (&t[..t.len() - 1], 1e6),
        Some('g') => (&t[..t.len() - 1], 1e9),
        Some('t') => (&t[..t.len() - 1], 1e12),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| anyhow!("bad rate {s:?} (e.g. 200M, 25G)"))?;
    if !(v.is_finite() && v > 0.0) {
        bail!("rate {s:?} must be positive");
    }
    Ok((v * mult).round() as u64)
}

/// `"65536"`, `"64K"`, `"1M"` (binary multiples) → bytes.
pub fn parse_size(s: &str) -> Result<u64> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.trim_end_matches("ib").trim_end_matches('b');
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let v: u64 = num
        .trim()
        .parse()
        .map_err(|_| anyhow!("bad size {s:?} (e.g. 4096, 64K, 1M)"))?;
    Ok(v * mult)
}

/// `"02:00:00:00:00:01"` → bytes.
pub fn parse_mac(s: &str) -> Result<[u8; 6]> {
    let parts: Vec<&str> = s.trim().split([':', '-']).collect();
    if parts.len() != 6 {
        bail!("bad MAC address {s:?}");
    }
    let mut m = [0u8; 6];
    for (b, p) in m.iter_mut().zip(parts) {
        *b = u8::from_str_radix(p, 16).map_err(|_| anyhow!("bad MAC address {s:?}"))?;
    }
    Ok(m)
}

pub fn parse_ipv4(s: &str) -> Result<[u8; 4]> {
    let s = s.trim();
    let s = s.split_once('/').map_or(s, |(a, _)| a);
    let a: Ipv4Addr = s.parse().map_err(|_| anyhow!("bad IPv4 address {s:?}"))?;
    Ok(a.octets())
}

pub fn fmt_mac(m: [u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

pub fn fmt_ip(ip: [u8; 4]) -> String {
    Ipv4Addr::from(ip).to_string()
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
    fn parsers() {
        assert_eq!(parse_rate("200M").unwrap(), 200_000_000);
        assert_eq!(parse_rate("25G").unwrap(), 25_000_000_000);
        assert_eq!(parse_rate("1.5gbps").unwrap(), 1_500_000_000);
        assert_eq!(parse_rate("1000").unwrap(), 1000);
        assert!(parse_rate("x").is_err() && parse_rate("0").is_err());
        assert_eq!(parse_size("64K").unwrap(), 65536);
        assert_eq!(parse_mac("02:00:00:00:00:0a").unwrap(), [2, 0, 0, 0, 0, 10]);
        assert_eq!(parse_ipv4("10.0.0.1/24").unwrap(), [10, 0, 0, 1]);
        let m = PrioMap::parse("26=3, 48=6,0=1").unwrap();
        assert_eq!((m.get(26), m.get(48), m.get(0), m.get(10)), (3, 6, 1, 0));
        assert_eq!(PrioMap::default().get(26), 3);
        assert!(PrioMap::parse("64=1").is_err());
    }

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
