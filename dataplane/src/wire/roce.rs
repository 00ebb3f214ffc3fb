//! RoCEv2: the InfiniBand Base Transport Header carried in UDP port 4791, and the invariant
//! CRC (ICRC) that ends every RoCEv2 packet.
//!
//! Why the switch cares: classification and the CNP fast lane look at the BTH opcode, and a
//! switch that rewrites bytes (ECN, DSCP) must prove it never invalidates the ICRC, or the
//! receiving NIC silently drops the packet. The ICRC here is computed exactly as Linux rxe
//! does (`drivers/infiniband/sw/rxe/rxe_icrc.c`), and checked against a public capture of
//! real RoCEv2 traffic (`dataplane/tests/packet_public_pcap.rs`).
//!
//! The ICRC is in [`super::icrc`]: it needs the parsed frame, the BTH does not.

/// The RoCEv2 UDP destination port.
pub const ROCEV2_UDP_PORT: u16 = 4791;
/// Length of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

/// BTH opcode of a RoCEv2 congestion notification packet.
pub const OPCODE_CNP: u8 = 0x81;
/// A CNP's UDP datagram: the UDP header (8), the BTH (12), 16 reserved bytes and the ICRC (4)
/// (IBA Annex A17, RoCEv2 CNP). The frame is 74 B untagged over IPv4 (78 on the wire with
/// the FCS), 78 B with a VLAN tag, 94 B over IPv6.
pub const CNP_UDP_LEN: usize = 8 + 12 + 16 + ICRC_LEN;

/// Some RC opcodes, for tests and the builder (IBA table 38).
pub mod opcode {
    /// First packet of a SEND longer than one MTU.
    pub const RC_SEND_FIRST: u8 = 0x00;
    /// A packet between the first and the last of a SEND.
    pub const RC_SEND_MIDDLE: u8 = 0x01;
    /// Last packet of a multi-packet SEND.
    pub const RC_SEND_LAST: u8 = 0x02;
    /// Last packet of a SEND, with immediate data (ImmDt after the BTH).
    pub const RC_SEND_LAST_IMM: u8 = 0x03;
    /// A SEND that fits one packet.
    pub const RC_SEND_ONLY: u8 = 0x04;
    /// A one-packet SEND with immediate data.
    pub const RC_SEND_ONLY_IMM: u8 = 0x05;
    /// First packet of an RDMA WRITE (RETH after the BTH).
    pub const RC_RDMA_WRITE_FIRST: u8 = 0x06;
    /// A packet between the first and the last of an RDMA WRITE.
    pub const RC_RDMA_WRITE_MIDDLE: u8 = 0x07;
    /// Last packet of a multi-packet RDMA WRITE.
    pub const RC_RDMA_WRITE_LAST: u8 = 0x08;
    /// An RDMA WRITE that fits one packet (RETH after the BTH).
    pub const RC_RDMA_WRITE_ONLY: u8 = 0x0a;
    /// RDMA READ request (RETH after the BTH).
    pub const RC_RDMA_READ_REQUEST: u8 = 0x0c;
    /// Acknowledge (AETH after the BTH).
    pub const RC_ACK: u8 = 0x11;
    /// UD SEND Only (DETH after the BTH).
    pub const UD_SEND_ONLY: u8 = 0x64;
    /// Congestion notification packet (RoCEv2 Annex A17): [`super::OPCODE_CNP`].
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

    /// The BTH as its 12 wire bytes, unchecked.
    #[inline]
    pub fn from_bytes(bytes: [u8; 12]) -> Bth {
        Bth { bytes }
    }

    /// The 12 wire bytes.
    #[inline]
    pub fn to_bytes(self) -> [u8; 12] {
        self.bytes
    }

    /// Operation code: transport service and operation (see [`opcode`]).
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
    /// Partition key (0xFFFF: the default partition).
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

    /// Operation code (see [`opcode`]).
    pub fn set_opcode(&mut self, v: u8) {
        self.bytes[0] = v;
    }
    /// Solicited event bit.
    pub fn set_solicited(&mut self, v: bool) {
        set_bit(&mut self.bytes[1], 0x80, v);
    }
    /// Migration request bit.
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
    /// Partition key.
    pub fn set_pkey(&mut self, v: u16) {
        self.bytes[2..4].copy_from_slice(&v.to_be_bytes());
    }
    /// Forward explicit congestion notification bit.
    pub fn set_fecn(&mut self, v: bool) {
        set_bit(&mut self.bytes[4], 0x80, v);
    }
    /// Backward explicit congestion notification bit (CNPs set it).
    pub fn set_becn(&mut self, v: bool) {
        set_bit(&mut self.bytes[4], 0x40, v);
    }
    /// Only the 24 low bits are used.
    pub fn set_dest_qp(&mut self, v: u32) {
        self.bytes[5..8].copy_from_slice(&v.to_be_bytes()[1..]);
    }
    /// Acknowledge request bit.
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

#[cfg(test)]
mod tests {
    use super::*;

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
