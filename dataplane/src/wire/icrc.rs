//! The RoCEv2 invariant CRC (ICRC) that ends every RoCEv2 packet, as Linux rxe computes it
//! (`drivers/infiniband/sw/rxe/rxe_icrc.c`): a switch that rewrites bytes (ECN, DSCP) must
//! prove it never invalidates it, or the receiving NIC silently drops the packet.
//!
//! CRC-32 (IEEE 802.3: reflected polynomial 0xEDB88320, register initialised to all ones,
//! result inverted) over, in order:
//!
//! 1. 8 bytes of 0xFF: the InfiniBand Local Route Header, which RoCEv2 does not have, fully
//!    masked;
//! 2. the IP header with its variant fields set to all ones: IPv4 TOS, TTL and header
//!    checksum; IPv6 traffic class, flow label and hop limit (IPv4 options and IPv6
//!    extension headers, which rxe never sends, are included unmasked);
//! 3. the UDP header with its checksum set to 0xFFFF;
//! 4. the BTH with byte 4 (FECN, BECN and 6 reserved bits; rxe's `resv8a`) set to 0xFF;
//! 5. everything after the BTH up to, not including, the ICRC (extension headers, payload,
//!    pad bytes);
//!
//! stored in the last 4 bytes of the UDP datagram, least-significant byte first (rxe writes
//! the `u32` in host order on little-endian machines, and that is what is on the wire).
//!
//! ## The rxe seed 0xdebb20e3
//!
//! rxe calls the raw, non-inverting `crc32_le(crc, buf, len)` starting from the seed
//! 0xdebb20e3 and inverts only at the end. Its comment says that seed is "the result of
//! computing a CRC with a seed of 0xffffffff and 8 bytes of 0xff representing a masked LRH":
//! running the reflected CRC-32 register from 0xFFFFFFFF over eight 0xFF bytes leaves
//! 0xDEBB20E3. (The first four 0xFF bytes cancel the all-ones start and leave the register at
//! 0; four more 0xFF from 0 give 0xDEBB20E3, which is also why it is CRC-32's well-known
//! residue.) So rxe's ICRC is the standard CRC-32 of `[0xFF; 8] ++ masked headers ++ rest`.
//! crc32fast's `Hasher::new_with_initial(init)` starts its register at `!init`; starting it
//! at `!ICRC_LRH_SEED` skips the eight 0xFF bytes ([`ICRC_LRH_SEED`] is rxe's constant;
//! `tests::seed_is_eight_ff_bytes` checks the equivalence).

use super::parse::{FrameInfo, L3Kind, UDP_HEADER_LEN};
use super::roce::{Bth, ICRC_LEN};

/// rxe's CRC register after the masked 8-byte LRH (see the module docs).
pub const ICRC_LRH_SEED: u32 = 0xdebb_20e3;

/// The covered range of a RoCEv2 frame, all bounds checked against `frame`:
/// (l3 offset, fixed IP header length, l4 offset, ICRC offset).
#[inline]
fn icrc_layout(frame: &[u8], info: &FrameInfo) -> Option<(usize, usize, usize, usize)> {
    info.bth(frame)?;
    let l3 = info.l3_offset();
    let fixed = match info.l3_kind() {
        L3Kind::Ipv4 => 20,
        L3Kind::Ipv6 => 40,
        _ => return None,
    };
    let l4 = info.l4_offset()?;
    let end = info.udp_end()?;
    if end > frame.len() || l4 < l3 + fixed || end < l4 + UDP_HEADER_LEN + Bth::LEN + ICRC_LEN {
        return None;
    }
    Some((l3, fixed, l4, end - ICRC_LEN))
}

/// Computes the ICRC of a RoCEv2 frame (the value whose little-endian bytes belong in the
/// trailer), or `None` if `info` says it is not RoCEv2 or does not fit `frame`.
///
/// No allocation: the masked headers go through a 60-byte stack buffer, the rest is hashed
/// in place.
pub fn compute_icrc(frame: &[u8], info: &FrameInfo) -> Option<u32> {
    let (l3, fixed, l4, icrc_at) = icrc_layout(frame, info)?;
    let mut h = crc32fast::Hasher::new_with_initial(!ICRC_LRH_SEED);
    // IP fixed header + UDP + BTH: at most 40 + 8 + 12 bytes.
    let mut buf = [0u8; 60];
    buf[..fixed].copy_from_slice(&frame[l3..l3 + fixed]);
    if fixed == 20 {
        buf[1] = 0xff; // TOS
        buf[8] = 0xff; // TTL
        buf[10] = 0xff; // header checksum
        buf[11] = 0xff;
    } else {
        buf[0] |= 0x0f; // traffic class, high nibble
        buf[1] = 0xff; // traffic class low nibble, flow label
        buf[2] = 0xff;
        buf[3] = 0xff;
        buf[7] = 0xff; // hop limit
    }
    let mut n = fixed;
    if l4 != l3 + fixed {
        // IPv4 options / IPv6 extension headers: covered unmasked.
        h.update(&buf[..fixed]);
        h.update(&frame[l3 + fixed..l4]);
        n = 0;
    }
    let ub = UDP_HEADER_LEN + Bth::LEN;
    buf[n..n + ub].copy_from_slice(&frame[l4..l4 + ub]);
    buf[n + 6] = 0xff; // UDP checksum
    buf[n + 7] = 0xff;
    buf[n + UDP_HEADER_LEN + 4] = 0xff; // BTH byte 4: FECN, BECN, reserved
    h.update(&buf[..n + ub]);
    h.update(&frame[l4 + ub..icrc_at]);
    Some(h.finalize())
}

/// The ICRC stored in the frame, if RoCEv2.
pub fn stored_icrc(frame: &[u8], info: &FrameInfo) -> Option<u32> {
    let (_, _, _, at) = icrc_layout(frame, info)?;
    let b = frame.get(at..at + ICRC_LEN)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Whether a RoCEv2 frame's stored ICRC is right. `false` when not RoCEv2.
pub fn verify_icrc(frame: &[u8], info: &FrameInfo) -> bool {
    match (compute_icrc(frame, info), stored_icrc(frame, info)) {
        (Some(c), Some(s)) => c == s,
        _ => false,
    }
}

/// Writes the right ICRC into a RoCEv2 frame; returns `false` (and writes nothing) when the
/// frame is not RoCEv2.
pub fn write_icrc(frame: &mut [u8], info: &FrameInfo) -> bool {
    let Some(crc) = compute_icrc(frame, info) else {
        return false;
    };
    let Some((_, _, _, at)) = icrc_layout(frame, info) else {
        return false;
    };
    frame[at..at + ICRC_LEN].copy_from_slice(&crc.to_le_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_is_eight_ff_bytes() {
        // rxe's seed is the raw register after 8 × 0xFF from all ones ...
        let mut h = crc32fast::Hasher::new();
        h.update(&[0xff; 8]);
        assert_eq!(!h.finalize(), ICRC_LRH_SEED);
        // ... so starting crc32fast at !seed equals hashing those 8 bytes first.
        let data = b"some masked headers and payload";
        let mut a = crc32fast::Hasher::new_with_initial(!ICRC_LRH_SEED);
        a.update(data);
        let mut b = crc32fast::Hasher::new();
        b.update(&[0xff; 8]);
        b.update(data);
        assert_eq!(a.finalize(), b.finalize());
        // And the halfway point: four 0xFF bytes from all ones leave the register at zero.
        assert_eq!(!crc32fast::hash(&[0xff; 4]), 0);
    }
}
