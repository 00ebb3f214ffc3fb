//! `rocegen`: a RoCEv2 traffic generator that behaves like a RoCE NIC, on raw AF_PACKET
//! sockets inside test hosts' network namespaces.
//!
//! * [`wire`]: the non-blocking AF_PACKET socket, entering a namespace, the monotonic clock.
//! * [`sender`], [`receiver`], [`dcqcn`], [`histogram`]: the NIC model, which lives in the
//!   dataplane crate (`dataplane::nic`) because the fabric's virtual-time hosts run it too;
//!   these modules re-export it under the names rocegen always had. RC segmentation, pacing,
//!   PFC honouring and the DCQCN reaction point (sender); ICRC, PSN order, CE marks, latency
//!   and the DCQCN notification point (receiver). Time is a parameter everywhere: rocegen
//!   passes the monotonic clock.
//! * [`host`]: one thread driving one host (its socket, its sender and receiver).
//! * [`coordinate`]: several hosts started at the same instant, one report (the CTBG idea).
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

pub use dataplane::nic::{Op, PayloadHeader, PrioMap, WIRE_OVERHEAD_BYTES};

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

/// `"65536"`, `"64K"`, `"1M"` (binary multiples), `"64KiB"`, `"64KB"` (SI) → bytes: the
/// config's parser ([`controlplane::units::parse_size`]), so a size means the same here as in
/// a switch config and `rocectl`.
pub fn parse_size(s: &str) -> Result<u64> {
    controlplane::units::parse_size(s).map_err(|e| anyhow!("{e}"))
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

/// `"10.0.0.1"` or `"10.0.0.1/24"` (the prefix is ignored) → bytes.
pub fn parse_ipv4(s: &str) -> Result<[u8; 4]> {
    let s = s.trim();
    let s = s.split_once('/').map_or(s, |(a, _)| a);
    let a: Ipv4Addr = s.parse().map_err(|_| anyhow!("bad IPv4 address {s:?}"))?;
    Ok(a.octets())
}

/// Bytes → `"02:00:00:00:00:01"`.
pub fn fmt_mac(m: [u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

/// Bytes → dotted `"10.0.0.1"`.
pub fn fmt_ip(ip: [u8; 4]) -> String {
    Ipv4Addr::from(ip).to_string()
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
}
