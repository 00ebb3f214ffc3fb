//! RoCEv2: the InfiniBand Base Transport Header carried in UDP port 4791, and the invariant
//! CRC (ICRC) that ends every RoCEv2 packet.
//!
//! Why the switch cares: classification and the CNP fast lane look at the BTH opcode, and a
//! switch that rewrites bytes (ECN, DSCP) must prove it never invalidates the ICRC, or the
//! receiving NIC silently drops the packet. The ICRC here is computed exactly as Linux rxe
//! does (`drivers/infiniband/sw/rxe/rxe_icrc.c`), and checked against a public capture of
//! real RoCEv2 traffic (`dataplane/tests/packet_public_pcap.rs`).
//!
//! # ICRC
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

/// The RoCEv2 UDP destination port.
pub const ROCEV2_UDP_PORT: u16 = 4791;
/// Length of the ICRC trailer.
pub const ICRC_LEN: usize = 4;
/// rxe's CRC register after the masked 8-byte LRH (see the module docs).
pub const ICRC_LRH_SEED: u32 = 0xdebb_20e3;

/// BTH opcode of a RoCEv2 congestion notification packet.
pub const OPCODE_CNP: u8 = 0x81;

/// Some RC opcodes, for tests and the builder (IBA table 38).
pub mod opcode {
    pub const RC_SEND_FIRST: u8 = 0x00;
    pub const RC_SEND_MIDDLE: u8 = 0x01;
    pub const RC_SEND_LAST: u8 = 0x02;
    pub const RC_SEND_LAST_IMM: u8 = 0x03;
    pub const RC_SEND_ONLY: u8 = 0x04;
    pub const RC_SEND_ONLY_IMM: u8 = 0x05;
    pub const RC_RDMA_WRITE_FIRST: u8 = 0x06;
    pub const RC_RDMA_WRITE_MIDDLE: u8 = 0x07;
    pub const RC_RDMA_WRITE_LAST: u8 = 0x08;
    pub const RC_RDMA_WRITE_ONLY: u8 = 0x0a;
    pub const RC_RDMA_READ_REQUEST: u8 = 0x0c;
    pub const RC_ACK: u8 = 0x11;
    pub const UD_SEND_ONLY: u8 = 0x64;
    pub const CNP: u8 = super::OPCODE_CNP;
}

/// The 12-byte InfiniBand Base Transport Header, kept as its wire bytes (so reserved bits
/// round-trip exactly) with decoding accessors and setters.
///
/// ```text
/// byte 0      opcode
/// byte 1      SE | M | PadCnt(2) | TVer(4)
/// bytes 2-3   P_Key
/// byte 4      FECN | BECN | reserved(6)        <- masked in the ICRC
/// bytes 5-7   destination QP
/// byte 8      AckReq | reserved(7)
/// bytes 9-11  PSN
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Bth {
    bytes: [u8; 12],
}

impl Bth {
    /// Length of the BTH.
    pub const LEN: usize = 12;

    /// A BTH with the given opcode, destination QP and PSN, P_Key 0xFFFF (the default
    /// partition), everything else zero.
    pub fn new(opcode: u8, dest_qp: u32, psn: u32) -> Bth {
        let mut b = Bth::default();
        b.set_opcode(opcode);
        b.set_pkey(0xffff);
        b.set_dest_qp(dest_qp);
        b.set_psn(psn);
        b
    }

    #[inline]
    pub fn from_bytes(bytes: [u8; 12]) -> Bth {
        Bth { bytes }
    }

    #[inline]
    pub fn to_bytes(self) -> [u8; 12] {
        self.bytes
    }

    #[inline]
    pub fn opcode(&self) -> u8 {
        self.bytes[0]
    }
    /// Solicited event.
    #[inline]
    pub fn solicited(&self) -> bool {
        self.bytes[1] & 0x80 != 0
    }
    /// Migration request.
    #[inline]
    pub fn migreq(&self) -> bool {
        self.bytes[1] & 0x40 != 0
    }
    /// Pad count: bytes of padding before the ICRC (0..=3).
    #[inline]
    pub fn pad_count(&self) -> u8 {
        (self.bytes[1] >> 4) & 3
    }
    /// Transport header version (0).
    #[inline]
    pub fn tver(&self) -> u8 {
        self.bytes[1] & 0x0f
    }
    #[inline]
    pub fn pkey(&self) -> u16 {
        u16::from_be_bytes([self.bytes[2], self.bytes[3]])
    }
    /// Forward explicit congestion notification.
    #[inline]
    pub fn fecn(&self) -> bool {
        self.bytes[4] & 0x80 != 0
    }
    /// Backward explicit congestion notification (set in CNPs).
    #[inline]
    pub fn becn(&self) -> bool {
        self.bytes[4] & 0x40 != 0
    }
    /// Destination queue pair (24 bits).
    #[inline]
    pub fn dest_qp(&self) -> u32 {
        u32::from_be_bytes([0, self.bytes[5], self.bytes[6], self.bytes[7]])
    }
    /// Acknowledge request.
    #[inline]
    pub fn ack_req(&self) -> bool {
        self.bytes[8] & 0x80 != 0
    }
    /// Packet sequence number (24 bits).
    #[inline]
    pub fn psn(&self) -> u32 {
        u32::from_be_bytes([0, self.bytes[9], self.bytes[10], self.bytes[11]])
    }
    /// A congestion notification packet (opcode 0x81).
    #[inline]
    pub fn is_cnp(&self) -> bool {
        self.opcode() == OPCODE_CNP
    }

    pub fn set_opcode(&mut self, v: u8) {
        self.bytes[0] = v;
    }
    pub fn set_solicited(&mut self, v: bool) {
        set_bit(&mut self.bytes[1], 0x80, v);
    }
    pub fn set_migreq(&mut self, v: bool) {
        set_bit(&mut self.bytes[1], 0x40, v);
    }
    /// Only the two low bits are used.
    pub fn set_pad_count(&mut self, v: u8) {
        self.bytes[1] = (self.bytes[1] & !0x30) | ((v & 3) << 4);
    }
    /// Only the four low bits are used.
    pub fn set_tver(&mut self, v: u8) {
        self.bytes[1] = (self.bytes[1] & 0xf0) | (v & 0x0f);
    }
    pub fn set_pkey(&mut self, v: u16) {
        self.bytes[2..4].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_fecn(&mut self, v: bool) {
        set_bit(&mut self.bytes[4], 0x80, v);
    }
    pub fn set_becn(&mut self, v: bool) {
        set_bit(&mut self.bytes[4], 0x40, v);
    }
    /// Only the 24 low bits are used.
    pub fn set_dest_qp(&mut self, v: u32) {
        self.bytes[5..8].copy_from_slice(&v.to_be_bytes()[1..]);
    }
    pub fn set_ack_req(&mut self, v: bool) {
        set_bit(&mut self.bytes[8], 0x80, v);
    }
    /// Only the 24 low bits are used.
    pub fn set_psn(&mut self, v: u32) {
        self.bytes[9..12].copy_from_slice(&v.to_be_bytes()[1..]);
    }
}

#[inline]
fn set_bit(byte: &mut u8, mask: u8, v: bool) {
    if v {
        *byte |= mask;
    } else {
        *byte &= !mask;
    }
}

/// The covered range of a RoCEv2 frame, all bounds checked against `frame`:
/// (l3 offset, fixed IP header length, l4 offset, ICRC offset).
#[inline]
fn icrc_layout(frame: &[u8], info: &FrameInfo) -> Option<(usize, usize, usize, usize)> {
    info.bth()?;
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

    #[test]
    fn bth_fields_round_trip() {
        let mut b = Bth::new(opcode::RC_RDMA_WRITE_FIRST, 0x00ab_cdef, 0x0012_3456);
        b.set_solicited(true);
        b.set_migreq(true);
        b.set_pad_count(3);
        b.set_tver(0);
        b.set_fecn(true);
        b.set_becn(false);
        b.set_ack_req(true);
        b.set_pkey(0x8001);
        assert_eq!(b.opcode(), 6);
        assert!(b.solicited() && b.migreq() && b.fecn() && !b.becn() && b.ack_req());
        assert_eq!(b.pad_count(), 3);
        assert_eq!(b.pkey(), 0x8001);
        assert_eq!(b.dest_qp(), 0xab_cdef);
        assert_eq!(b.psn(), 0x12_3456);
        assert_eq!(
            b.to_bytes(),
            [0x06, 0xf0, 0x80, 0x01, 0x80, 0xab, 0xcd, 0xef, 0x80, 0x12, 0x34, 0x56]
        );
        assert_eq!(Bth::from_bytes(b.to_bytes()), b);
        // 24-bit fields drop the high byte.
        b.set_dest_qp(0xff00_0001);
        b.set_psn(0xff00_0002);
        assert_eq!((b.dest_qp(), b.psn()), (1, 2));
        assert!(Bth::new(OPCODE_CNP, 1, 0).is_cnp());
    }
}
