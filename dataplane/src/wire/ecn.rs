//! In-place rewrites of the IP TOS / traffic class: ECN CE marking (WRED-ECN) and DSCP
//! rewrite (classification rules).
//!
//! Why in place: the frame sits in its buffer slot; rewriting one or two bytes and patching the
//! IPv4 header checksum incrementally (RFC 1624, eqn. 3: `HC' = ~(~HC + ~m + m')` over the
//! 16-bit word holding version/IHL and TOS) costs a handful of instructions, where re-emitting
//! the header would cost a copy. Neither rewrite touches the RoCEv2 ICRC: it masks the
//! IPv4 TOS and the IPv6 traffic class. IPv6 has no header checksum, and its traffic class
//! straddles bytes 0 and 1 (`version(4) | TC(8) | flow label(20)`); RoCEv2 over IPv6 also
//! keeps its UDP checksum valid because the traffic class is not in the UDP pseudo-header.
//!
//! Both functions read the current bytes of the frame, not the TOS cached in [`FrameInfo`]
//! at parse time, so they compose (a DSCP rewrite then a CE mark on one frame) with the same
//! `info`. Call [`FrameInfo::refresh_tos`] afterwards if `info.ecn()`/`info.dscp()` should
//! show the new values.

use super::parse::{FrameInfo, L3Kind};

/// What [`mark_ce`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MarkOutcome {
    /// ECT(0) or ECT(1) became CE.
    Marked,
    /// Already CE: nothing written.
    AlreadyCe,
    /// Not ECN-capable (00): nothing written; the caller decides between pass and drop.
    NotEct,
    /// Not IPv4/IPv6 (or the frame is shorter than `info` says): nothing written.
    NotIp,
}

/// One's complement 16-bit checksum update for one changed 16-bit word (RFC 1624 eqn. 3).
#[inline]
pub fn checksum_update16(hc: u16, old: u16, new: u16) -> u16 {
    let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    !(sum as u16)
}

/// Replaces the IPv4 TOS byte with `tos`, updating the header checksum incrementally.
#[inline]
fn write_ipv4_tos(h: &mut [u8], tos: u8) {
    let old = u16::from_be_bytes([h[0], h[1]]);
    let new = u16::from_be_bytes([h[0], tos]);
    let hc = u16::from_be_bytes([h[10], h[11]]);
    h[1] = tos;
    h[10..12].copy_from_slice(&checksum_update16(hc, old, new).to_be_bytes());
}

/// The live TOS / traffic class of an IP frame and a mutable view of its first header bytes.
#[inline]
fn ip_header<'a>(frame: &'a mut [u8], info: &FrameInfo) -> Option<(L3Kind, &'a mut [u8], u8)> {
    let l3 = info.l3_offset();
    match info.l3_kind() {
        L3Kind::Ipv4 => {
            let h = frame.get_mut(l3..l3 + 20)?;
            let tos = h[1];
            Some((L3Kind::Ipv4, h, tos))
        }
        L3Kind::Ipv6 => {
            let h = frame.get_mut(l3..l3 + 2)?;
            let tc = (h[0] << 4) | (h[1] >> 4);
            Some((L3Kind::Ipv6, h, tc))
        }
        _ => None,
    }
}

#[inline]
fn write_tos(kind: L3Kind, h: &mut [u8], tos: u8) {
    if kind == L3Kind::Ipv4 {
        write_ipv4_tos(h, tos);
    } else {
        h[0] = (h[0] & 0xf0) | (tos >> 4);
        h[1] = (h[1] & 0x0f) | (tos << 4);
    }
}

/// Marks congestion experienced: ECT(0)/ECT(1) → CE, in place.
pub fn mark_ce(frame: &mut [u8], info: &FrameInfo) -> MarkOutcome {
    let Some((kind, h, tos)) = ip_header(frame, info) else {
        return MarkOutcome::NotIp;
    };
    match tos & 3 {
        0 => MarkOutcome::NotEct,
        3 => MarkOutcome::AlreadyCe,
        _ => {
            write_tos(kind, h, tos | 3);
            MarkOutcome::Marked
        }
    }
}

/// Rewrites the DSCP (`dscp & 63`) in place, keeping the ECN bits. Returns `false` when the
/// frame is not IP (nothing written), `true` otherwise (also when the DSCP was already that).
pub fn set_dscp(frame: &mut [u8], info: &FrameInfo, dscp: u8) -> bool {
    let Some((kind, h, tos)) = ip_header(frame, info) else {
        return false;
    };
    let new = ((dscp & 63) << 2) | (tos & 3);
    if new != tos {
        write_tos(kind, h, new);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1624_example() {
        // RFC 1624 section 4: HC = 0xDD2F, m = 0x5555 → m' = 0x3285 gives HC' = 0x0000.
        assert_eq!(checksum_update16(0xdd2f, 0x5555, 0x3285), 0x0000);
        // And back.
        assert_eq!(checksum_update16(0x0000, 0x3285, 0x5555), 0xdd2f);
    }
}
