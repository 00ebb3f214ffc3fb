//! A RoCEv2 frame builder for tests, benches and the traffic generator.
//!
//! Why: the switch must be exercised with real RoCEv2 frames (valid IPv4 checksum, valid UDP
//! checksum on IPv6, valid ICRC), of exact sizes, with every field the classifier looks at
//! under control. Not on the hot path: it allocates a `Vec` per frame.
//!
//! Headers are written with etherparse's header structs (`Ethernet2Header`,
//! `SingleVlanHeader`, `Ipv4Header`, `Ipv6Header`, `UdpHeader`); the BTH and the ICRC come
//! from [`super::roce`]. Like Linux rxe, the UDP checksum is 0 over IPv4; over IPv6 (where 0
//! is not allowed) it is computed, after the ICRC, which it covers.

use super::icrc::write_icrc;
use super::parse::{parse, Ecn, VlanTag, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_VLAN, UDP_HEADER_LEN};
use super::roce::{opcode, Bth, ICRC_LEN, OPCODE_CNP, ROCEV2_UDP_PORT};
use etherparse::{
    EtherType, Ethernet2Header, IpDscp, IpEcn, IpNumber, Ipv4Header, Ipv6FlowLabel, Ipv6Header, SingleVlanHeader,
    UdpHeader, VlanId, VlanPcp,
};

/// Source and destination addresses, one IP version for both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpPair {
    /// IPv4 addresses: the frame gets an IPv4 header (checksummed) and a zero UDP checksum.
    V4 {
        /// Source address.
        src: [u8; 4],
        /// Destination address.
        dst: [u8; 4],
    },
    /// IPv6 addresses: the frame gets an IPv6 header and a computed UDP checksum.
    V6 {
        /// Source address.
        src: [u8; 16],
        /// Destination address.
        dst: [u8; 16],
    },
}

/// Why a frame could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The frame length asked for (`build_sized`) cannot hold the headers, ICRC and extension
    /// headers.
    #[error("requested frame length {requested} is below the {min} bytes the headers need")]
    TooShort {
        /// The length asked for, bytes without FCS.
        requested: usize,
        /// The least these headers need, bytes.
        min: usize,
    },
    /// The IP packet would be longer than its 16-bit length field allows.
    #[error("IP packet of {len} bytes does not fit the 16-bit length field")]
    TooLong {
        /// The IP packet's length, bytes.
        len: usize,
    },
    /// IPv4 options that are not a multiple of 4 bytes or longer than 40.
    #[error("IPv4 options must be a multiple of 4 bytes, at most 40 (got {len})")]
    BadIpv4Options {
        /// Bytes of options given.
        len: usize,
    },
}

/// Everything about one RoCEv2 frame. Fields are public; the chained setters are shorthand.
///
/// `build()` computes the lengths, the BTH pad count (unless `pad_count` is set), the IPv4
/// header checksum, the IPv6 UDP checksum and the ICRC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoceFrameBuilder {
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Destination MAC (the FDB looks it up).
    pub dst_mac: [u8; 6],
    /// An 802.1Q tag (PCP, DEI, VID; values are masked to their field widths).
    pub vlan: Option<VlanTag>,
    /// Source and destination addresses; their version picks the IP header.
    pub ip: IpPair,
    /// DSCP (masked to 6 bits).
    pub dscp: u8,
    /// ECN codepoint of the IP header.
    pub ecn: Ecn,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: u8,
    /// IPv6 flow label (masked to 20 bits); ignored for IPv4.
    pub flow_label: u32,
    /// IPv4 options (a multiple of 4 bytes, at most 40); ignored for IPv6.
    pub ipv4_options: Vec<u8>,
    /// UDP source port; the destination is always 4791.
    pub udp_sport: u16,
    /// The BTH; its pad count is overwritten by `build` unless `pad_count` is set.
    pub bth: Bth,
    /// Extended transport headers after the BTH (RETH, AETH, ImmDt, DETH...).
    pub ext: Vec<u8>,
    /// Payload bytes after the BTH and extension headers, before the pad and ICRC.
    pub payload: Vec<u8>,
    /// BTH pad count and number of zero pad bytes before the ICRC; `None` pads the payload
    /// to a multiple of 4 as IBA requires.
    pub pad_count: Option<u8>,
    /// Zero bytes after the IP packet (Ethernet padding), not counted in any IP length.
    pub eth_padding: usize,
}

impl Default for RoceFrameBuilder {
    /// RC SEND ONLY to QP 0x11, PSN 0, no payload; IPv4 10.0.0.1 → 10.0.0.2, DSCP 26,
    /// ECT(0) (what RoCE NICs send), TTL 64, UDP source port 49152; untagged,
    /// 02:00:00:00:00:01 → 02:00:00:00:00:02.
    fn default() -> Self {
        RoceFrameBuilder {
            src_mac: [0x02, 0, 0, 0, 0, 0x01],
            dst_mac: [0x02, 0, 0, 0, 0, 0x02],
            vlan: None,
            ip: IpPair::V4 {
                src: [10, 0, 0, 1],
                dst: [10, 0, 0, 2],
            },
            dscp: 26,
            ecn: Ecn::Ect0,
            ttl: 64,
            flow_label: 0,
            ipv4_options: Vec::new(),
            udp_sport: 49152,
            bth: Bth::new(opcode::RC_SEND_ONLY, 0x11, 0),
            ext: Vec::new(),
            payload: Vec::new(),
            pad_count: None,
            eth_padding: 0,
        }
    }
}

impl RoceFrameBuilder {
    /// The defaults (see [`Default`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// A CNP builder: opcode 0x81, BECN set, P_Key 0xFFFF, PSN 0, the 16 reserved zero bytes,
    /// DSCP 48, not ECN-capable.
    pub fn cnp(dest_qp: u32) -> Self {
        let mut bth = Bth::new(OPCODE_CNP, dest_qp, 0);
        bth.set_becn(true);
        RoceFrameBuilder {
            bth,
            dscp: 48,
            ecn: Ecn::NotEct,
            payload: vec![0; 16],
            ..Self::default()
        }
    }

    /// Source and destination MAC.
    pub fn macs(mut self, src: [u8; 6], dst: [u8; 6]) -> Self {
        self.src_mac = src;
        self.dst_mac = dst;
        self
    }
    /// An 802.1Q tag with this PCP and VLAN id (DEI clear).
    pub fn vlan(mut self, pcp: u8, vid: u16) -> Self {
        self.vlan = Some(VlanTag { pcp, dei: false, vid });
        self
    }
    /// IPv4 source and destination.
    pub fn ipv4(mut self, src: [u8; 4], dst: [u8; 4]) -> Self {
        self.ip = IpPair::V4 { src, dst };
        self
    }
    /// IPv6 source and destination.
    pub fn ipv6(mut self, src: [u8; 16], dst: [u8; 16]) -> Self {
        self.ip = IpPair::V6 { src, dst };
        self
    }
    /// DSCP of the IP header (masked to 6 bits when built).
    pub fn dscp(mut self, dscp: u8) -> Self {
        self.dscp = dscp;
        self
    }
    /// ECN codepoint of the IP header.
    pub fn ecn(mut self, ecn: Ecn) -> Self {
        self.ecn = ecn;
        self
    }
    /// UDP source port.
    pub fn udp_sport(mut self, port: u16) -> Self {
        self.udp_sport = port;
        self
    }
    /// Replaces the whole BTH.
    pub fn bth(mut self, bth: Bth) -> Self {
        self.bth = bth;
        self
    }
    /// BTH opcode ([`opcode`] has the ones the switch knows).
    pub fn opcode(mut self, opcode: u8) -> Self {
        self.bth.set_opcode(opcode);
        self
    }
    /// Destination QP of the BTH (24 bits).
    pub fn dest_qp(mut self, qp: u32) -> Self {
        self.bth.set_dest_qp(qp);
        self
    }
    /// PSN of the BTH (24 bits).
    pub fn psn(mut self, psn: u32) -> Self {
        self.bth.set_psn(psn);
        self
    }
    /// Extension headers after the BTH, as raw bytes ([`reth`], [`aeth`]...).
    pub fn ext(mut self, bytes: &[u8]) -> Self {
        self.ext = bytes.to_vec();
        self
    }
    /// The payload, copied.
    pub fn payload(mut self, bytes: &[u8]) -> Self {
        self.payload = bytes.to_vec();
        self
    }
    /// A payload of `len` bytes of a fixed pattern (`i as u8`).
    pub fn payload_len(mut self, len: usize) -> Self {
        self.payload = (0..len).map(|i| i as u8).collect();
        self
    }

    fn l2_len(&self) -> usize {
        14 + if self.vlan.is_some() { 4 } else { 0 }
    }

    fn ip_header_len(&self) -> usize {
        match self.ip {
            IpPair::V4 { .. } => 20 + self.ipv4_options.len(),
            IpPair::V6 { .. } => 40,
        }
    }

    /// The frame length with an empty payload, no pad bytes and no Ethernet padding: the
    /// smallest frame [`build_sized`](Self::build_sized) can make.
    pub fn min_len(&self) -> usize {
        self.l2_len() + self.ip_header_len() + UDP_HEADER_LEN + Bth::LEN + self.ext.len() + ICRC_LEN
    }

    /// Builds a frame of exactly `total_len` bytes (L2, without FCS) by choosing the payload:
    /// the largest multiple of 4 that fits (pattern bytes, pad count 0), the remaining 0..=3
    /// bytes as Ethernet padding after the IP packet. The builder's own payload, pad count and
    /// Ethernet padding are ignored.
    pub fn build_sized(&self, total_len: usize) -> Result<Vec<u8>, BuildError> {
        let min = self.min_len();
        if total_len < min {
            return Err(BuildError::TooShort {
                requested: total_len,
                min,
            });
        }
        let need = total_len - min;
        let mut b = self.clone().payload_len(need & !3);
        b.pad_count = Some(0);
        b.eth_padding = need & 3;
        b.build()
    }

    /// Builds the frame.
    pub fn build(&self) -> Result<Vec<u8>, BuildError> {
        let mut v = Vec::new();
        self.build_into(&mut v)?;
        Ok(v)
    }

    /// Builds the frame into `out` (cleared first), reusing its allocation.
    pub fn build_into(&self, out: &mut Vec<u8>) -> Result<(), BuildError> {
        out.clear();
        let pad = match self.pad_count {
            Some(p) => p & 3,
            None => ((4 - self.payload.len() % 4) % 4) as u8,
        };
        let udp_len = UDP_HEADER_LEN + Bth::LEN + self.ext.len() + self.payload.len() + pad as usize + ICRC_LEN;
        let ip_len = self.ip_header_len() + udp_len;
        if ip_len > usize::from(u16::MAX) {
            return Err(BuildError::TooLong { len: ip_len });
        }
        out.reserve(self.l2_len() + ip_len + self.eth_padding);

        let ip_type = match self.ip {
            IpPair::V4 { .. } => ETHERTYPE_IPV4,
            IpPair::V6 { .. } => ETHERTYPE_IPV6,
        };
        let eth = Ethernet2Header {
            source: self.src_mac,
            destination: self.dst_mac,
            ether_type: EtherType(if self.vlan.is_some() { ETHERTYPE_VLAN } else { ip_type }),
        };
        out.extend_from_slice(&eth.to_bytes());
        if let Some(tag) = self.vlan {
            let vlan = SingleVlanHeader {
                pcp: VlanPcp::try_new(tag.pcp & 7).expect("masked"),
                drop_eligible_indicator: tag.dei,
                vlan_id: VlanId::try_new(tag.vid & 0x0fff).expect("masked"),
                ether_type: EtherType(ip_type),
            };
            out.extend_from_slice(&vlan.to_bytes());
        }
        let l3 = out.len();
        match self.ip {
            IpPair::V4 { src, dst } => {
                let payload_len = udp_len as u16; // ≤ 65535 − header, checked above
                let mut h = Ipv4Header::new(payload_len, self.ttl, IpNumber::UDP, src, dst)
                    .map_err(|_| BuildError::TooLong { len: ip_len })?;
                h.options = self
                    .ipv4_options
                    .as_slice()
                    .try_into()
                    .map_err(|_| BuildError::BadIpv4Options {
                        len: self.ipv4_options.len(),
                    })?;
                h.total_len = ip_len as u16;
                h.dscp = IpDscp::try_new(self.dscp & 63).expect("masked");
                h.ecn = IpEcn::try_new(self.ecn as u8).expect("two bits");
                h.dont_fragment = true;
                h.header_checksum = h.calc_header_checksum();
                out.extend_from_slice(&h.to_bytes());
            }
            IpPair::V6 { src, dst } => {
                let h = Ipv6Header {
                    traffic_class: ((self.dscp & 63) << 2) | self.ecn as u8,
                    flow_label: Ipv6FlowLabel::try_new(self.flow_label & 0x000f_ffff).expect("masked"),
                    payload_length: udp_len as u16,
                    next_header: IpNumber::UDP,
                    hop_limit: self.ttl,
                    source: src,
                    destination: dst,
                };
                out.extend_from_slice(&h.to_bytes());
            }
        }
        let l4 = out.len();
        let udp = UdpHeader {
            source_port: self.udp_sport,
            destination_port: ROCEV2_UDP_PORT,
            length: udp_len as u16,
            checksum: 0,
        };
        out.extend_from_slice(&udp.to_bytes());
        let mut bth = self.bth;
        bth.set_pad_count(pad);
        out.extend_from_slice(&bth.to_bytes());
        out.extend_from_slice(&self.ext);
        out.extend_from_slice(&self.payload);
        out.resize(out.len() + pad as usize + ICRC_LEN + self.eth_padding, 0);

        let info = parse(out, usize::MAX).expect("the builder writes well-formed frames");
        debug_assert_eq!((info.l3_offset(), info.l4_offset()), (l3, Some(l4)));
        write_icrc(out, &info);
        if let IpPair::V6 { src, dst } = self.ip {
            let end = l4 + udp_len;
            let csum = udp
                .calc_checksum_ipv6_raw(src, dst, &out[l4 + UDP_HEADER_LEN..end])
                .map_err(|_| BuildError::TooLong { len: ip_len })?;
            out[l4 + 6..l4 + 8].copy_from_slice(&csum.to_be_bytes());
        }
        Ok(())
    }
}

/// A CNP (BTH opcode 0x81, BECN, 16 reserved zero bytes, DSCP 48, valid ICRC) from
/// `src_mac`/`ip` source to the sender of the congested flow, whose QP is `dest_qp`.
/// [`RoceFrameBuilder::cnp`] gives the same frame as a builder, to change VLAN, DSCP, ports...
pub fn build_cnp(src_mac: [u8; 6], dst_mac: [u8; 6], ip: IpPair, dest_qp: u32) -> Vec<u8> {
    let b = RoceFrameBuilder {
        src_mac,
        dst_mac,
        ip,
        ..RoceFrameBuilder::cnp(dest_qp)
    };
    b.build().expect("a CNP always fits")
}

/// RDMA extended transport header (16 bytes): virtual address, R_Key, DMA length.
/// Follows the BTH in RDMA WRITE FIRST/ONLY and RDMA READ REQUEST.
pub fn reth(va: u64, rkey: u32, dma_len: u32) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&va.to_be_bytes());
    b[8..12].copy_from_slice(&rkey.to_be_bytes());
    b[12..].copy_from_slice(&dma_len.to_be_bytes());
    b
}

/// ACK extended transport header (4 bytes): syndrome, MSN (24 bits).
pub fn aeth(syndrome: u8, msn: u32) -> [u8; 4] {
    let m = msn.to_be_bytes();
    [syndrome, m[1], m[2], m[3]]
}

/// Immediate data (4 bytes), after the BTH (and RETH) in the *_WITH_IMMEDIATE opcodes.
pub fn immdt(imm: u32) -> [u8; 4] {
    imm.to_be_bytes()
}

/// Datagram extended transport header (8 bytes) of UD: Q_Key, source QP (24 bits).
pub fn deth(qkey: u32, src_qp: u32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&qkey.to_be_bytes());
    b[5..].copy_from_slice(&src_qp.to_be_bytes()[1..]);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extended_headers() {
        assert_eq!(
            reth(0x0102_0304_0506_0708, 0x0a0b_0c0d, 0x1000),
            [1, 2, 3, 4, 5, 6, 7, 8, 0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0x10, 0]
        );
        assert_eq!(aeth(0x1f, 0xff12_3456), [0x1f, 0x12, 0x34, 0x56]);
        assert_eq!(immdt(0xdead_beef), [0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(deth(0x8001_0000, 0x00ab_cdef), [0x80, 1, 0, 0, 0, 0xab, 0xcd, 0xef]);
    }

    #[test]
    fn lengths_and_errors() {
        let b = RoceFrameBuilder::new();
        assert_eq!(b.min_len(), 14 + 20 + 8 + 12 + 4);
        assert_eq!(
            b.clone().vlan(1, 2).ipv6([0; 16], [0; 16]).min_len(),
            18 + 40 + 8 + 12 + 4
        );
        assert_eq!(b.build_sized(64).unwrap().len(), 64);
        assert_eq!(b.build_sized(57), Err(BuildError::TooShort { requested: 57, min: 58 }));
        assert!(matches!(
            b.clone().payload_len(65_535).build(),
            Err(BuildError::TooLong { .. })
        ));
        let mut o = b.clone();
        o.ipv4_options = vec![1; 6];
        assert_eq!(o.build(), Err(BuildError::BadIpv4Options { len: 6 }));
        // Auto pad count aligns the payload; an explicit one is kept.
        let f = b.clone().payload_len(5).build().unwrap();
        assert_eq!(f.len(), 58 + 5 + 3);
        assert_eq!(f[14 + 20 + 8 + 1] >> 4 & 3, 3);
        let mut p = b.clone().payload_len(5);
        p.pad_count = Some(0);
        assert_eq!(p.build().unwrap().len(), 58 + 5);
        // build_into reuses the buffer.
        let mut v = vec![0xaa; 3];
        b.build_into(&mut v).unwrap();
        assert_eq!(v, b.build().unwrap());
    }
}
