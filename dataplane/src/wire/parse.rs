//! The frame parser: one pass over Ethernet, an optional 802.1Q tag, IPv4/IPv6 and UDP, ending
//! in a [`FrameInfo`], a small `Copy` struct of offsets and the few fields the pipeline decides
//! on (MACs, PCP, DSCP/ECN, UDP ports, the RoCEv2 BTH).
//!
//! Why a view and not a copy: the switch parses every frame at tens of Mpps. The frame stays
//! where the port put it; `FrameInfo` only says where things are, so later stages (ECN marking,
//! DSCP rewrite, ICRC checks) work on the original bytes in place. Parsing never allocates,
//! locks or makes a syscall, and never panics: bad input becomes a [`Malformed`] reason that
//! the pipeline counts.
//!
//! The header slicing itself is etherparse's (`Ethernet2HeaderSlice`, `SingleVlanHeaderSlice`,
//! `Ipv4Slice`, `Ipv6HeaderSlice` + `Ipv6Slice`); this module only chooses which layers to look
//! at, maps etherparse's errors to named reasons and records offsets. Two shapes are read by
//! hand with etherparse's checks, because they are every RoCEv2 frame's: an untagged IPv4
//! header without options (`parse_plain_ipv4`), and the UDP header and BTH (`parse_udp`). The
//! tests hold both against the reference parser built wholly on etherparse (`UdpHeaderSlice`
//! included).
//! It deliberately does not look at TCP, ICMP or ARP contents: the switch never needs them.
//!
//! # Length rules
//!
//! * The input is an L2 frame **without FCS**.
//! * A frame longer than `max_frame` is [`Malformed::Oversize`] (checked first).
//! * A frame shorter than the 14-byte Ethernet header is [`Malformed::Runt`]. Frames shorter
//!   than the 60-byte Ethernet minimum are **not** rejected: captures taken at the sender
//!   (and most pcaps) have the padding stripped, and each layer's own length checks already
//!   catch truncation.
//! * Ethernet padding after the end of the IP packet (IPv4 total length, IPv6 40 + payload
//!   length) is normal and ignored: every L3/L4 offset and end comes from the IP and UDP
//!   length fields, never from the frame length. In particular a RoCEv2 ICRC sits at the end
//!   of the UDP datagram, not at the end of the frame.
//! * The UDP length must be at least 8 and at most the IP payload; a RoCEv2 datagram
//!   (destination port 4791) must carry at least a BTH and an ICRC (12 + 4 bytes).
//!
//! # What is parsed
//!
//! * One 802.1Q C-tag (TPID 0x8100). A second tag, or an S-tag (0x88a8) outside, is not looked
//!   into: such frames are [`L3Kind::Other`] with the TPID as their EtherType and are forwarded
//!   at L2 like any unknown EtherType.
//! * An EtherType value below 0x0600 is an 802.3 length field (LLC/SNAP, e.g. STP):
//!   [`L3Kind::None`].
//! * IPv4 options and the IP authentication header, IPv6 extension headers: skipped by
//!   etherparse's own walk to find the upper-layer protocol. IPv6 jumbograms (payload
//!   length 0) are not supported: their payload is taken as empty.
//! * IP fragments (first or not) expose no L4 at all: a non-first fragment has no UDP header,
//!   and treating the first one differently would classify the fragments of one datagram
//!   into different queues and reorder them. RoCEv2 is never fragmented (DF set).
//! * The IPv4 header checksum is not verified: a switch forwarding at L2 does not, and
//!   captures taken with checksum offload carry garbage there.

use super::roce::{Bth, ROCEV2_UDP_PORT};
use etherparse::err::Layer;
use etherparse::{
    Ethernet2HeaderSlice, IpNumber, Ipv4HeaderSlice, Ipv4Slice, Ipv6HeaderSlice, Ipv6Slice, SingleVlanHeaderSlice,
};

/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// TPID of an 802.1Q C-tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// EtherType of MAC control frames (802.3x PAUSE, 802.1Qbb PFC).
pub const ETHERTYPE_MAC_CONTROL: u16 = 0x8808;
/// IP protocol number of UDP.
pub const IP_PROTO_UDP: u8 = 17;
/// Length of an Ethernet II header.
pub const ETH_HEADER_LEN: usize = 14;
/// Length of an 802.1Q tag.
pub const VLAN_TAG_LEN: usize = 4;
/// Length of a UDP header.
pub const UDP_HEADER_LEN: usize = 8;

/// Why a frame could not be parsed. One variant per reason, each with a stable snake_case
/// [`name`](Malformed::name) for counters and reports; `Malformed as usize` indexes counter
/// arrays (see [`Malformed::COUNT`] and [`Malformed::from_index`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Malformed {
    /// Shorter than the 14-byte Ethernet header.
    Runt = 0,
    /// Longer than the port's maximum frame size.
    Oversize = 1,
    /// EtherType 0x8100 but fewer than 4 bytes of tag follow.
    TruncatedVlan = 2,
    /// EtherType IPv4 but fewer bytes than the 20-byte header or than IHL × 4.
    TruncatedIpv4 = 3,
    /// The IP version nibble disagrees with the EtherType.
    BadIpVersion = 4,
    /// IPv4 IHL below 5.
    BadIpv4Ihl = 5,
    /// IPv4 total length below the header length or beyond the frame.
    BadIpv4Length = 6,
    /// EtherType IPv6 but fewer than 40 bytes.
    TruncatedIpv6 = 7,
    /// IPv6 payload length beyond the frame.
    BadIpv6Length = 8,
    /// An IPv6 extension header or an IP authentication header runs past the IP packet.
    TruncatedIpExt = 9,
    /// An IPv6 extension header or IP authentication header is invalid (e.g. hop-by-hop not
    /// first, authentication header payload length too small).
    BadIpExt = 10,
    /// IP protocol UDP but fewer than 8 bytes of IP payload.
    TruncatedUdp = 11,
    /// UDP length below 8 or beyond the IP payload.
    BadUdpLength = 12,
    /// UDP destination port 4791 but fewer than 12 (BTH) + 4 (ICRC) bytes of UDP payload.
    TruncatedBth = 13,
    /// MAC control frame (0x8808) too short to hold its opcode.
    TruncatedMacControl = 14,
    /// Not a MAC control frame (given to the MAC control decoder anyway).
    NotMacControl = 15,
    /// PFC frame too short for its vector and eight times, or class-enable vector upper byte
    /// not zero.
    BadPfc = 16,
    /// PAUSE frame too short for its pause time.
    BadPause = 17,
}

impl Malformed {
    /// Every reason, in discriminant order (`ALL[i] as usize == i`).
    pub const ALL: [Malformed; 18] = [
        Malformed::Runt,
        Malformed::Oversize,
        Malformed::TruncatedVlan,
        Malformed::TruncatedIpv4,
        Malformed::BadIpVersion,
        Malformed::BadIpv4Ihl,
        Malformed::BadIpv4Length,
        Malformed::TruncatedIpv6,
        Malformed::BadIpv6Length,
        Malformed::TruncatedIpExt,
        Malformed::BadIpExt,
        Malformed::TruncatedUdp,
        Malformed::BadUdpLength,
        Malformed::TruncatedBth,
        Malformed::TruncatedMacControl,
        Malformed::NotMacControl,
        Malformed::BadPfc,
        Malformed::BadPause,
    ];

    /// Number of reasons (the size a counter array needs).
    pub const COUNT: usize = Self::ALL.len();

    /// The stable counter name.
    pub fn name(self) -> &'static str {
        match self {
            Malformed::Runt => "runt",
            Malformed::Oversize => "oversize",
            Malformed::TruncatedVlan => "truncated_vlan",
            Malformed::TruncatedIpv4 => "truncated_ipv4",
            Malformed::BadIpVersion => "bad_ip_version",
            Malformed::BadIpv4Ihl => "bad_ipv4_ihl",
            Malformed::BadIpv4Length => "bad_ipv4_length",
            Malformed::TruncatedIpv6 => "truncated_ipv6",
            Malformed::BadIpv6Length => "bad_ipv6_length",
            Malformed::TruncatedIpExt => "truncated_ip_ext",
            Malformed::BadIpExt => "bad_ip_ext",
            Malformed::TruncatedUdp => "truncated_udp",
            Malformed::BadUdpLength => "bad_udp_length",
            Malformed::TruncatedBth => "truncated_bth",
            Malformed::TruncatedMacControl => "truncated_mac_control",
            Malformed::NotMacControl => "not_mac_control",
            Malformed::BadPfc => "bad_pfc",
            Malformed::BadPause => "bad_pause",
        }
    }

    /// The reason whose discriminant is `index`, if any.
    pub fn from_index(index: usize) -> Option<Malformed> {
        Self::ALL.get(index).copied()
    }
}

impl core::fmt::Display for Malformed {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::error::Error for Malformed {}

/// What sits after the L2 header(s).
///
/// The order is for the per-frame tests: the two IP kinds first and the two kinds not looked
/// into last, so `is_ip` and `is_unknown_ethertype` are each one comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum L3Kind {
    /// EtherType 0x0800; the header and its lengths are checked.
    Ipv4,
    /// EtherType 0x86DD; the header and its lengths are checked.
    Ipv6,
    /// EtherType 0x0806: forwarded at L2, not looked into.
    Arp,
    /// 0x8808: 802.3x PAUSE or 802.1Qbb PFC; decode with [`super::pfc::decode_mac_control`].
    MacControl,
    /// 802.3 length field instead of an EtherType (LLC/SNAP frames such as STP): no L3.
    None,
    /// Any other EtherType: not malformed, forwarded at L2 without inspection.
    Other,
}

/// An 802.1Q tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// Priority code point, 0..=7.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN id, 0..=4095 (0: priority tag only).
    pub vid: u16,
}

/// The two ECN bits of an IP header (RFC 3168).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Ecn {
    /// Not ECN-capable: WRED drops it where it would mark an ECT frame.
    NotEct = 0,
    /// ECN-capable, ECT(1).
    Ect1 = 1,
    /// ECN-capable, ECT(0): what RoCE NICs send.
    Ect0 = 2,
    /// Congestion experienced: marked by a switch on the way.
    Ce = 3,
}

impl Ecn {
    /// From the two low bits of `bits`.
    #[inline]
    pub fn from_bits(bits: u8) -> Ecn {
        match bits & 3 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// ECN-capable transport: ECT(0), ECT(1) or already CE.
    #[inline]
    pub fn is_ect(self) -> bool {
        self != Ecn::NotEct
    }
}

/// The UDP header fields the switch uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpPorts {
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port (4791 makes the frame RoCEv2).
    pub dst_port: u16,
    /// The UDP length field (header + payload), validated to be 8..=IP payload.
    pub length: u16,
}

/// A parsed frame: offsets into the frame and the few fields the pipeline decides on.
///
/// It borrows nothing, so it can be stored with a frame's buffer slot; it is only meaningful
/// together with the bytes it was parsed from. Fields are private and read through accessors
/// so the layout can shrink without touching callers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameInfo {
    vlan: Option<VlanTag>,
    ether_type: u16,
    l3_offset: u16,
    l3: L3Kind,
    /// IP only: the TOS / traffic class byte (DSCP << 2 | ECN) as parsed.
    tos: u8,
    /// IP only: the upper-layer protocol after extension headers.
    ip_proto: u8,
    /// IP only: the payload is a fragment (first or later).
    fragment: bool,
    /// IP only: offset just past the IP packet (where Ethernet padding, if any, begins).
    ip_end: u32,
    /// UDP only: offset of the UDP header.
    l4_offset: u32,
    udp: Option<UdpPorts>,
    /// RoCEv2 only: the BTH's opcode (what classification reads). The BTH itself is read from
    /// the frame when asked for ([`FrameInfo::bth`]): writing its 12 bytes into every parse
    /// result cost instructions a frame for the few callers that want it (issue 40).
    bth_opcode: Option<u8>,
}

impl FrameInfo {
    /// Nothing parsed yet: the starting value for [`parse_into`].
    pub const EMPTY: FrameInfo = FrameInfo {
        vlan: None,
        ether_type: 0,
        l3_offset: 0,
        l3: L3Kind::None,
        tos: 0,
        ip_proto: 0,
        fragment: false,
        ip_end: 0,
        l4_offset: 0,
        udp: None,
        bth_opcode: None,
    };

    /// Destination MAC address of `frame`, the frame this was parsed from. Read from the
    /// frame, not stored: the receive path reads the MACs from the frame anyway (as FDB keys),
    /// and writing them into every parse result cost instructions a frame for the few callers
    /// that want them as bytes (bench/README.md, issue 40).
    #[inline]
    pub fn dst_mac(&self, frame: &[u8]) -> [u8; 6] {
        frame.first_chunk::<6>().copied().unwrap_or_default()
    }

    /// Source MAC address of `frame` (see [`FrameInfo::dst_mac`]).
    #[inline]
    pub fn src_mac(&self, frame: &[u8]) -> [u8; 6] {
        frame
            .get(6..12)
            .and_then(|m| m.first_chunk::<6>())
            .copied()
            .unwrap_or_default()
    }

    /// The 802.1Q tag, if the frame has one.
    #[inline]
    pub fn vlan(&self) -> Option<VlanTag> {
        self.vlan
    }

    /// The 802.1Q priority code point, if tagged.
    #[inline]
    pub fn pcp(&self) -> Option<u8> {
        self.vlan.map(|t| t.pcp)
    }

    /// The 802.1Q VLAN id, if tagged.
    #[inline]
    pub fn vid(&self) -> Option<u16> {
        self.vlan.map(|t| t.vid)
    }

    /// The EtherType after the VLAN tag, if any (the 802.3 length for [`L3Kind::None`]).
    #[inline]
    pub fn ether_type(&self) -> u16 {
        self.ether_type
    }

    /// Offset of the L3 header (14, or 18 when tagged).
    #[inline]
    pub fn l3_offset(&self) -> usize {
        self.l3_offset as usize
    }

    /// What follows the L2 header.
    #[inline]
    pub fn l3_kind(&self) -> L3Kind {
        self.l3
    }

    /// IPv4 or IPv6.
    #[inline]
    pub fn is_ip(&self) -> bool {
        matches!(self.l3, L3Kind::Ipv4 | L3Kind::Ipv6)
    }

    /// A MAC control frame (PAUSE/PFC).
    #[inline]
    pub fn is_mac_control(&self) -> bool {
        self.l3 == L3Kind::MacControl
    }

    /// An EtherType the switch does not look into (including 802.3 length-field frames).
    #[inline]
    pub fn is_unknown_ethertype(&self) -> bool {
        matches!(self.l3, L3Kind::Other | L3Kind::None)
    }

    /// The destination is an IEEE 802.1D reserved link-local group address
    /// 01:80:c2:00:00:00..=0f (STP, PAUSE/PFC, LACP, LLDP, 802.1X...), which a bridge must
    /// never forward.
    #[inline]
    pub fn dst_is_link_local(&self, frame: &[u8]) -> bool {
        let mut b = [0u8; 8];
        b[2..].copy_from_slice(&self.dst_mac(frame));
        is_link_local_key(u64::from_be_bytes(b))
    }

    /// Offset just past the IP packet (IP total length), if IP. Bytes from here to the end of
    /// the frame are Ethernet padding.
    #[inline]
    pub fn ip_end(&self) -> Option<usize> {
        self.is_ip().then_some(self.ip_end as usize)
    }

    /// The IPv4 TOS / IPv6 traffic class byte as parsed, if IP.
    #[inline]
    pub fn tos(&self) -> Option<u8> {
        self.is_ip().then_some(self.tos)
    }

    /// DSCP (0..=63), if IP.
    #[inline]
    pub fn dscp(&self) -> Option<u8> {
        self.tos().map(|t| t >> 2)
    }

    /// ECN, if IP.
    #[inline]
    pub fn ecn(&self) -> Option<Ecn> {
        self.tos().map(Ecn::from_bits)
    }

    /// IP and ECN-capable (ECT(0), ECT(1) or CE).
    #[inline]
    pub fn is_ect(&self) -> bool {
        self.ecn().is_some_and(Ecn::is_ect)
    }

    /// IP protocol / final IPv6 next header, if IP.
    #[inline]
    pub fn ip_proto(&self) -> Option<u8> {
        self.is_ip().then_some(self.ip_proto)
    }

    /// IP and the payload is a fragment (then no L4 is parsed).
    #[inline]
    pub fn is_fragment(&self) -> bool {
        self.is_ip() && self.fragment
    }

    /// The UDP header fields, if UDP (and not a fragment).
    #[inline]
    pub fn udp(&self) -> Option<UdpPorts> {
        self.udp
    }

    /// Offset of the UDP header, if UDP.
    #[inline]
    pub fn l4_offset(&self) -> Option<usize> {
        self.udp.map(|_| self.l4_offset as usize)
    }

    /// Offset just past the UDP datagram (UDP length), if UDP.
    #[inline]
    pub fn udp_end(&self) -> Option<usize> {
        self.udp.map(|u| self.l4_offset as usize + u.length as usize)
    }

    /// UDP source port, if UDP.
    #[inline]
    pub fn udp_sport(&self) -> Option<u16> {
        self.udp.map(|u| u.src_port)
    }

    /// UDP destination port, if UDP.
    #[inline]
    pub fn udp_dport(&self) -> Option<u16> {
        self.udp.map(|u| u.dst_port)
    }

    /// The RoCEv2 Base Transport Header of `frame` (the frame this was parsed from), if UDP
    /// destination port 4791.
    #[inline]
    pub fn bth(&self, frame: &[u8]) -> Option<Bth> {
        let at = self.bth_offset()?;
        let b = frame.get(at..)?.first_chunk::<{ Bth::LEN }>()?;
        Some(Bth::from_bytes(*b))
    }

    /// The BTH's opcode, if RoCEv2 (see [`super::roce::opcode`]).
    #[inline]
    pub fn bth_opcode(&self) -> Option<u8> {
        self.bth_opcode
    }

    /// RoCEv2 (UDP destination port 4791 with a BTH and room for the ICRC).
    #[inline]
    pub fn is_roce(&self) -> bool {
        self.bth_opcode.is_some()
    }

    /// A RoCEv2 congestion notification packet (BTH opcode 0x81).
    #[inline]
    pub fn is_cnp(&self) -> bool {
        self.bth_opcode == Some(super::roce::OPCODE_CNP)
    }

    /// [`FrameInfo::is_cnp`], and CNP-sized: a UDP datagram no longer than a CNP's
    /// ([`super::roce::CNP_UDP_LEN`]) in a frame of `frame_len` bytes that ends there, but for
    /// padding to the 60-byte minimum and an FCS (4) a capture may keep. What the switch treats
    /// as a CNP (its strict-priority lane and policer): opcode 0x81 alone is any frame a host
    /// cares to label so.
    #[inline]
    pub fn is_cnp_sized(&self, frame_len: usize) -> bool {
        self.is_cnp()
            && self.udp.is_some_and(|u| {
                let end = self.l4_offset as usize + u.length as usize;
                u.length as usize <= super::roce::CNP_UDP_LEN && frame_len <= (end + 4).max(64)
            })
    }

    /// Offset of the BTH, if RoCEv2.
    #[inline]
    pub fn bth_offset(&self) -> Option<usize> {
        self.bth_opcode.map(|_| self.l4_offset as usize + UDP_HEADER_LEN)
    }

    /// Offset of the 4-byte ICRC (the last 4 bytes of the UDP datagram), if RoCEv2.
    #[inline]
    pub fn icrc_offset(&self) -> Option<usize> {
        self.bth_opcode.and(self.udp_end()).map(|e| e - super::roce::ICRC_LEN)
    }

    /// Re-reads the TOS / traffic class byte from `frame` (the bytes this info was parsed
    /// from), after an in-place rewrite by [`super::ecn::mark_ce`] or
    /// [`super::ecn::set_dscp`]. Those functions read the live bytes themselves, so this
    /// only matters to a caller that wants `dscp()`/`ecn()` to show the rewrite.
    #[inline]
    pub fn refresh_tos(&mut self, frame: &[u8]) {
        let l3 = self.l3_offset as usize;
        match self.l3 {
            L3Kind::Ipv4 => {
                if let Some(&b) = frame.get(l3 + 1) {
                    self.tos = b;
                }
            }
            L3Kind::Ipv6 => {
                if let (Some(&b0), Some(&b1)) = (frame.get(l3), frame.get(l3 + 1)) {
                    self.tos = (b0 << 4) | (b1 >> 4);
                }
            }
            _ => {}
        }
    }
}

/// Offset of `inner` within `outer` (`inner` must be a sub-slice of `outer`).
#[inline]
fn offset_in(outer: &[u8], inner: &[u8]) -> usize {
    inner.as_ptr() as usize - outer.as_ptr() as usize
}

/// Parses an L2 frame without FCS. See the module documentation for the length rules.
///
/// Never allocates, never panics; reads only within `frame`.
///
/// # Fast paths
///
/// The common shapes skip etherparse's whole-packet slicers but still read every header
/// through etherparse's header slices, with the same checks in the same order:
///
/// * IPv4 is sliced with `Ipv4HeaderSlice` plus the two total-length checks `Ipv4Slice` makes
///   (total length below the header length, beyond the frame). Only when the protocol is the
///   authentication header (51), the one thing `Ipv4Slice` walks past, does it go through
///   `Ipv4Slice`.
/// * IPv6 whose next header is UDP has no extension header for `Ipv6Slice` to walk: its
///   payload is the bytes after the 40-byte header up to the payload length. Any other next
///   header goes through `Ipv6Slice`.
///
/// `tests::fast_paths_match_the_reference` checks both against the plain `Ipv4Slice` /
/// `Ipv6Slice` parser on arbitrary and mutated frames.
#[inline(always)]
pub fn parse(frame: &[u8], max_frame: usize) -> Result<FrameInfo, Malformed> {
    let mut info = FrameInfo::EMPTY;
    parse_into(frame, max_frame, &mut info)?;
    Ok(info)
}

/// [`parse`] into the caller's `FrameInfo`, which the pipeline keeps on its stack: returning a
/// whole `FrameInfo` inside a `Result` costs a copy of it per frame. On error `info` holds
/// whatever was parsed before the error; use it only on `Ok`.
#[inline(always)]
pub fn parse_into(frame: &[u8], max_frame: usize, info: &mut FrameInfo) -> Result<(), Malformed> {
    if frame.len() > max_frame {
        return Err(Malformed::Oversize);
    }
    if let Some(done) = parse_plain_ipv4(frame, info) {
        return done;
    }
    parse_headers(frame, info)
}

/// The common RoCEv2 shape read by hand, without etherparse: an untagged IPv4 frame whose
/// header has no options (first byte 0x45), carrying anything but an authentication header.
/// None for every other frame, which [`parse_headers`] reads through etherparse's header
/// slices. Same checks, same order, same result as etherparse on every frame it takes
/// (`tests::fast_paths_match_the_reference`, against the plain `Ipv4Slice` parser); what it
/// saves is etherparse's length checks and field decoding done again per layer (about 40
/// instructions a frame under callgrind).
#[inline(always)]
fn parse_plain_ipv4(frame: &[u8], info: &mut FrameInfo) -> Option<Result<(), Malformed>> {
    const L3: usize = ETH_HEADER_LEN;
    const L4: usize = L3 + 20;
    let h: &[u8; L4] = frame.first_chunk()?;
    if h[12..14] != ETHERTYPE_IPV4.to_be_bytes() || h[L3] != 0x45 || h[L3 + 9] == IpNumber::AUTHENTICATION_HEADER.0 {
        return None;
    }
    let total = u16::from_be_bytes([h[L3 + 2], h[L3 + 3]]) as usize;
    if total < 20 || total > frame.len() - L3 {
        return Some(Err(Malformed::BadIpv4Length));
    }
    let ip_proto = h[L3 + 9];
    // etherparse's `is_fragmenting_payload`: more fragments (0x2000), or a fragment offset
    // (0x1fff), both in the one 16-bit field after the identification.
    let fragment = u16::from_be_bytes([h[L3 + 6], h[L3 + 7]]) & 0x3fff != 0;
    *info = FrameInfo {
        vlan: None,
        ether_type: ETHERTYPE_IPV4,
        l3_offset: L3 as u16,
        l3: L3Kind::Ipv4,
        tos: h[L3 + 1],
        ip_proto,
        fragment,
        ip_end: (L3 + total) as u32,
        ..FrameInfo::EMPTY
    };
    if ip_proto != IP_PROTO_UDP || fragment {
        return Some(Ok(()));
    }
    // The IP payload: `L4..L3 + total`, within the frame (checked above).
    let payload = frame.get(L4..L3 + total)?;
    Some(parse_udp(payload, L4, info))
}

/// The UDP header at the start of an IP `payload` (`l4_offset` bytes into the frame), and
/// on the RoCEv2 port the BTH after it: what both paths read once IP is parsed, with
/// etherparse's checks (`UdpHeaderSlice`: 8 bytes; the length within the payload), which the
/// tests hold against the reference parser.
#[inline(always)]
fn parse_udp(payload: &[u8], l4_offset: usize, info: &mut FrameInfo) -> Result<(), Malformed> {
    let u = payload.first_chunk::<UDP_HEADER_LEN>().ok_or(Malformed::TruncatedUdp)?;
    let len = u16::from_be_bytes([u[4], u[5]]) as usize;
    if len < UDP_HEADER_LEN || len > payload.len() {
        return Err(Malformed::BadUdpLength);
    }
    let dst_port = u16::from_be_bytes([u[2], u[3]]);
    info.l4_offset = l4_offset as u32;
    info.udp = Some(UdpPorts {
        src_port: u16::from_be_bytes([u[0], u[1]]),
        dst_port,
        length: len as u16,
    });
    if dst_port == ROCEV2_UDP_PORT {
        let data = &payload[UDP_HEADER_LEN..len];
        match data.first_chunk::<{ Bth::LEN }>() {
            Some(b) if data.len() >= Bth::LEN + super::roce::ICRC_LEN => info.bth_opcode = Some(b[0]),
            _ => return Err(Malformed::TruncatedBth),
        }
    }
    Ok(())
}

/// Every frame [`parse_plain_ipv4`] does not take, through etherparse's header slices.
#[inline(always)]
fn parse_headers(frame: &[u8], info: &mut FrameInfo) -> Result<(), Malformed> {
    let eth = Ethernet2HeaderSlice::from_slice(frame).map_err(|_| Malformed::Runt)?;
    *info = FrameInfo {
        vlan: None,
        ether_type: eth.ether_type().0,
        l3_offset: ETH_HEADER_LEN as u16,
        l3: L3Kind::Other,
        ..FrameInfo::EMPTY
    };
    if info.ether_type == ETHERTYPE_VLAN {
        let tag = SingleVlanHeaderSlice::from_slice(&frame[ETH_HEADER_LEN..]).map_err(|_| Malformed::TruncatedVlan)?;
        info.vlan = Some(VlanTag {
            pcp: tag.priority_code_point().value(),
            dei: tag.drop_eligible_indicator(),
            vid: tag.vlan_identifier().value(),
        });
        info.ether_type = tag.ether_type().0;
        info.l3_offset = (ETH_HEADER_LEN + VLAN_TAG_LEN) as u16;
    }
    let l3 = info.l3_offset as usize;
    let rest = &frame[l3..];
    // The IP payload (bounded by the IP length fields), once IP parsed.
    let payload: &[u8] = match info.ether_type {
        ETHERTYPE_IPV4 => {
            info.l3 = L3Kind::Ipv4;
            let h = Ipv4HeaderSlice::from_slice(rest).map_err(map_ipv4_header_err)?;
            let header = h.slice();
            let total = h.total_len() as usize;
            // `Ipv4Slice`'s checks after the header, in its order: both are `Layer::Ipv4Packet`.
            if total < header.len() || total > rest.len() {
                return Err(Malformed::BadIpv4Length);
            }
            info.tos = header[1];
            info.ip_end = (l3 + total) as u32;
            if h.protocol() == IpNumber::AUTHENTICATION_HEADER {
                let (proto, fragment, payload) = ipv4_slow(rest)?;
                info.ip_proto = proto;
                info.fragment = fragment;
                payload
            } else {
                info.ip_proto = h.protocol().0;
                info.fragment = h.is_fragmenting_payload();
                &rest[header.len()..total]
            }
        }
        ETHERTYPE_IPV6 => {
            info.l3 = L3Kind::Ipv6;
            let h = Ipv6HeaderSlice::from_slice(rest).map_err(map_ipv6_header_err)?;
            let header = h.slice();
            let end = header.len() + h.payload_length() as usize;
            // Bound the packet by its own length so etherparse never sees Ethernet padding
            // (it would take the whole slice as payload when the payload length is 0).
            let packet = rest.get(..end).ok_or(Malformed::BadIpv6Length)?;
            info.tos = (header[0] << 4) | (header[1] >> 4);
            info.ip_end = (l3 + end) as u32;
            if h.next_header() == IpNumber::UDP {
                // Not an extension header: `Ipv6Slice` would stop right here.
                info.ip_proto = IP_PROTO_UDP;
                &packet[header.len()..]
            } else {
                let (proto, fragment, payload) = ipv6_slow(packet)?;
                info.ip_proto = proto;
                info.fragment = fragment;
                payload
            }
        }
        ETHERTYPE_ARP => {
            info.l3 = L3Kind::Arp;
            return Ok(());
        }
        ETHERTYPE_MAC_CONTROL => {
            info.l3 = L3Kind::MacControl;
            return Ok(());
        }
        t if t < 0x0600 => {
            info.l3 = L3Kind::None;
            return Ok(());
        }
        _ => return Ok(()),
    };
    if info.ip_proto != IP_PROTO_UDP || info.fragment {
        return Ok(());
    }
    parse_udp(payload, offset_in(frame, payload), info)
}

/// IPv4 through `Ipv4Slice` (which walks an authentication header): upper-layer protocol,
/// fragment flag and payload. Out of line: rare, and it keeps the inlined [`parse`] small.
#[inline(never)]
fn ipv4_slow(packet: &[u8]) -> Result<(u8, bool, &[u8]), Malformed> {
    let ip = Ipv4Slice::from_slice(packet).map_err(map_ipv4_err)?;
    let p = ip.payload();
    Ok((p.ip_number.0, p.fragmented, p.payload))
}

/// IPv6 through `Ipv6Slice` (which walks the extension headers), `packet` already bounded by
/// the payload length: upper-layer protocol, fragment flag and payload. Out of line, as
/// [`ipv4_slow`].
#[inline(never)]
fn ipv6_slow(packet: &[u8]) -> Result<(u8, bool, &[u8]), Malformed> {
    let ip = Ipv6Slice::from_slice(packet).map_err(map_ipv6_err)?;
    let p = ip.payload();
    Ok((p.ip_number.0, p.fragmented, p.payload))
}

#[cold]
fn map_ipv4_header_err(e: etherparse::err::ipv4::HeaderSliceError) -> Malformed {
    use etherparse::err::ipv4::{HeaderError, HeaderSliceError};
    match e {
        HeaderSliceError::Len(_) => Malformed::TruncatedIpv4,
        HeaderSliceError::Content(HeaderError::UnexpectedVersion { .. }) => Malformed::BadIpVersion,
        HeaderSliceError::Content(HeaderError::HeaderLengthSmallerThanHeader { .. }) => Malformed::BadIpv4Ihl,
    }
}

#[cold]
fn map_ipv6_header_err(e: etherparse::err::ipv6::HeaderSliceError) -> Malformed {
    match e {
        etherparse::err::ipv6::HeaderSliceError::Len(_) => Malformed::TruncatedIpv6,
        etherparse::err::ipv6::HeaderSliceError::Content(_) => Malformed::BadIpVersion,
    }
}

#[cold]
fn map_ipv4_err(e: etherparse::err::ipv4::SliceError) -> Malformed {
    use etherparse::err::ipv4::{HeaderError, SliceError};
    match e {
        SliceError::Len(l) => match l.layer {
            Layer::Ipv4Header => Malformed::TruncatedIpv4,
            Layer::Ipv4Packet => Malformed::BadIpv4Length,
            _ => Malformed::TruncatedIpExt,
        },
        SliceError::Header(HeaderError::UnexpectedVersion { .. }) => Malformed::BadIpVersion,
        SliceError::Header(HeaderError::HeaderLengthSmallerThanHeader { .. }) => Malformed::BadIpv4Ihl,
        SliceError::Exts(_) => Malformed::BadIpExt,
    }
}

#[cold]
fn map_ipv6_err(e: etherparse::err::ipv6::SliceError) -> Malformed {
    use etherparse::err::ipv6::SliceError;
    match e {
        SliceError::Len(l) => match l.layer {
            Layer::Ipv6Header => Malformed::TruncatedIpv6,
            Layer::Ipv6Packet => Malformed::BadIpv6Length,
            _ => Malformed::TruncatedIpExt,
        },
        SliceError::Header(_) => Malformed::BadIpVersion,
        SliceError::Exts(_) => Malformed::BadIpExt,
    }
}

/// Whether a MAC, as a 48-bit key (its six bytes big-endian, as the FDB keys it), is one of
/// 01:80:c2:00:00:00..=0f, the link-local group a bridge never forwards. The one definition:
/// [`FrameInfo::dst_is_link_local`] and the receive path (which reads the key straight from the
/// frame) both ask it.
#[inline(always)]
pub const fn is_link_local_key(key: u64) -> bool {
    key >> 4 == 0x0180_c200_0000 >> 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_info_stays_small_and_copy() {
        // Stored beside each buffered frame: keep it within one cache line.
        assert!(
            core::mem::size_of::<FrameInfo>() <= 64,
            "{}",
            core::mem::size_of::<FrameInfo>()
        );
        fn is_copy<T: Copy>() {}
        is_copy::<FrameInfo>();
        is_copy::<Malformed>();
    }

    #[test]
    fn ecn_bits() {
        for b in 0..8u8 {
            assert_eq!(Ecn::from_bits(b) as u8, b & 3);
        }
        assert!(!Ecn::NotEct.is_ect() && Ecn::Ect0.is_ect() && Ecn::Ect1.is_ect() && Ecn::Ce.is_ect());
    }

    #[test]
    fn minimal_udp_frame() {
        // Ethernet + IPv4 (checksum not verified) + an empty UDP datagram to port 9.
        let mut f = [0u8; 42];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        f[14] = 0x45;
        f[15] = 0xb9; // DSCP 46, ECT(1)
        f[16..18].copy_from_slice(&28u16.to_be_bytes());
        f[23] = IP_PROTO_UDP;
        f[36..38].copy_from_slice(&9u16.to_be_bytes());
        f[38..40].copy_from_slice(&8u16.to_be_bytes());
        let info = parse(&f, 1500).unwrap();
        assert_eq!((info.dscp(), info.ecn()), (Some(46), Some(Ecn::Ect1)));
        assert_eq!(
            (info.l4_offset(), info.udp_dport(), info.udp_end()),
            (Some(34), Some(9), Some(42))
        );
        assert!(!info.is_roce());
        // The same to port 4791 lacks a BTH.
        f[36..38].copy_from_slice(&ROCEV2_UDP_PORT.to_be_bytes());
        assert_eq!(parse(&f, 1500), Err(Malformed::TruncatedBth));
    }

    /// The parser before the fast paths, verbatim: `Ipv4Slice` / `Ipv6Slice` for every IP
    /// packet. The oracle the fast paths must match exactly.
    fn parse_reference(frame: &[u8], max_frame: usize) -> Result<FrameInfo, Malformed> {
        if frame.len() > max_frame {
            return Err(Malformed::Oversize);
        }
        let eth = Ethernet2HeaderSlice::from_slice(frame).map_err(|_| Malformed::Runt)?;
        let mut info = FrameInfo {
            vlan: None,
            ether_type: eth.ether_type().0,
            l3_offset: ETH_HEADER_LEN as u16,
            l3: L3Kind::Other,
            ..FrameInfo::EMPTY
        };
        if info.ether_type == ETHERTYPE_VLAN {
            let tag =
                SingleVlanHeaderSlice::from_slice(&frame[ETH_HEADER_LEN..]).map_err(|_| Malformed::TruncatedVlan)?;
            info.vlan = Some(VlanTag {
                pcp: tag.priority_code_point().value(),
                dei: tag.drop_eligible_indicator(),
                vid: tag.vlan_identifier().value(),
            });
            info.ether_type = tag.ether_type().0;
            info.l3_offset = (ETH_HEADER_LEN + VLAN_TAG_LEN) as u16;
        }
        let l3 = info.l3_offset as usize;
        let rest = &frame[l3..];
        let payload: &[u8] = match info.ether_type {
            ETHERTYPE_IPV4 => {
                info.l3 = L3Kind::Ipv4;
                let ip = Ipv4Slice::from_slice(rest).map_err(map_ipv4_err)?;
                let h = ip.header();
                info.tos = h.slice()[1];
                info.ip_end = (l3 + h.total_len() as usize) as u32;
                let p = ip.payload();
                info.ip_proto = p.ip_number.0;
                info.fragment = p.fragmented;
                p.payload
            }
            ETHERTYPE_IPV6 => {
                info.l3 = L3Kind::Ipv6;
                let h = Ipv6HeaderSlice::from_slice(rest).map_err(|e| match e {
                    etherparse::err::ipv6::HeaderSliceError::Len(_) => Malformed::TruncatedIpv6,
                    etherparse::err::ipv6::HeaderSliceError::Content(_) => Malformed::BadIpVersion,
                })?;
                let end = h.slice().len() + h.payload_length() as usize;
                let packet = rest.get(..end).ok_or(Malformed::BadIpv6Length)?;
                let ip = Ipv6Slice::from_slice(packet).map_err(map_ipv6_err)?;
                let b = h.slice();
                info.tos = (b[0] << 4) | (b[1] >> 4);
                info.ip_end = (l3 + end) as u32;
                let p = ip.payload();
                info.ip_proto = p.ip_number.0;
                info.fragment = p.fragmented;
                p.payload
            }
            ETHERTYPE_ARP => {
                info.l3 = L3Kind::Arp;
                return Ok(info);
            }
            ETHERTYPE_MAC_CONTROL => {
                info.l3 = L3Kind::MacControl;
                return Ok(info);
            }
            t if t < 0x0600 => {
                info.l3 = L3Kind::None;
                return Ok(info);
            }
            _ => return Ok(info),
        };
        if info.ip_proto != IP_PROTO_UDP || info.fragment {
            return Ok(info);
        }
        let udp = etherparse::UdpHeaderSlice::from_slice(payload).map_err(|_| Malformed::TruncatedUdp)?;
        let len = udp.length();
        if (len as usize) < UDP_HEADER_LEN || len as usize > payload.len() {
            return Err(Malformed::BadUdpLength);
        }
        info.l4_offset = offset_in(frame, payload) as u32;
        let ports = UdpPorts {
            src_port: udp.source_port(),
            dst_port: udp.destination_port(),
            length: len,
        };
        info.udp = Some(ports);
        if ports.dst_port == ROCEV2_UDP_PORT {
            let data = &payload[UDP_HEADER_LEN..len as usize];
            if data.len() < Bth::LEN + super::super::roce::ICRC_LEN {
                return Err(Malformed::TruncatedBth);
            }
            info.bth_opcode = Some(data[0]);
        }
        Ok(info)
    }

    /// A valid IPv4 RoCEv2 frame with an authentication header (next header UDP, 12 bytes)
    /// between the IP header and UDP: the one IPv4 shape the fast path hands to `Ipv4Slice`.
    fn ipv4_ah_frame() -> Vec<u8> {
        let f = super::super::build::RoceFrameBuilder::new()
            .payload(&[7; 20])
            .build()
            .unwrap();
        let ip = ETH_HEADER_LEN;
        let udp = ip + 20;
        let mut g = f[..udp].to_vec();
        // AH: next header, payload length ((12 / 4) - 2), reserved, SPI, sequence number.
        g.extend_from_slice(&[IP_PROTO_UDP, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 9]);
        g.extend_from_slice(&f[udp..]);
        g[ip + 9] = 51;
        let total = u16::from_be_bytes([g[ip + 2], g[ip + 3]]) + 12;
        g[ip + 2..ip + 4].copy_from_slice(&total.to_be_bytes());
        g
    }

    #[test]
    fn ipv4_authentication_header_is_walked() {
        let f = ipv4_ah_frame();
        let info = parse(&f, usize::MAX).unwrap();
        assert_eq!(info, parse_reference(&f, usize::MAX).unwrap());
        assert_eq!(
            (info.ip_proto(), info.l4_offset()),
            (Some(IP_PROTO_UDP), Some(ETH_HEADER_LEN + 20 + 12))
        );
        assert!(info.is_roce());
        // An authentication header running past the IP packet.
        let mut g = f.clone();
        g[ETH_HEADER_LEN + 20 + 1] = 200;
        assert_eq!(parse(&g, usize::MAX), Err(Malformed::TruncatedIpExt));
        assert_eq!(parse(&g, usize::MAX), parse_reference(&g, usize::MAX));
    }

    mod fast_paths_match_the_reference {
        use super::super::super::build::{IpPair, RoceFrameBuilder};
        use super::*;
        use proptest::prelude::*;

        prop_compose! {
            fn valid_frame()(
                v6 in any::<bool>(),
                vlan in proptest::option::of((0u8..8, any::<bool>(), 0u16..4096)),
                opts in 0usize..=10,
                ah in any::<bool>(),
                payload in 0usize..80,
                eth_padding in 0usize..8,
                bth in any::<[u8; 12]>(),
            ) -> Vec<u8> {
                let b = RoceFrameBuilder {
                    vlan: vlan.map(|(pcp, dei, vid)| VlanTag { pcp, dei, vid }),
                    ip: if v6 { IpPair::V6 { src: [1; 16], dst: [2; 16] } } else { RoceFrameBuilder::new().ip },
                    ipv4_options: vec![1; opts * 4],
                    bth: Bth::from_bytes(bth),
                    payload: vec![0x3c; payload],
                    eth_padding,
                    ..RoceFrameBuilder::new()
                };
                if ah && !v6 && vlan.is_none() && opts == 0 && payload == 0 && eth_padding == 0 {
                    ipv4_ah_frame()
                } else {
                    b.build().unwrap()
                }
            }
        }

        /// IP protocol / next header values that steer both parsers down every branch.
        fn proto() -> impl Strategy<Value = u8> {
            prop_oneof![
                Just(17u8),
                Just(51),
                Just(0),
                Just(43),
                Just(44),
                Just(60),
                Just(6),
                any::<u8>()
            ]
        }

        fn check(frame: &[u8], max_frame: usize) -> Result<(), TestCaseError> {
            prop_assert_eq!(parse(frame, max_frame), parse_reference(frame, max_frame));
            Ok(())
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

            #[test]
            fn on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200), max in any::<usize>()) {
                check(&bytes, usize::MAX)?;
                check(&bytes, max % 256)?;
            }

            #[test]
            fn on_arbitrary_bytes_behind_an_ip_ethertype(
                et in prop_oneof![Just(ETHERTYPE_IPV4), Just(ETHERTYPE_IPV6), Just(ETHERTYPE_VLAN)],
                inner in prop_oneof![Just(ETHERTYPE_IPV4), Just(ETHERTYPE_IPV6)],
                first in prop_oneof![Just(0x45u8), Just(0x46), Just(0x4f), Just(0x60), any::<u8>()],
                proto in proto(),
                mut rest in proptest::collection::vec(any::<u8>(), 0..120),
            ) {
                let mut f = vec![0u8; 12];
                f.extend_from_slice(&et.to_be_bytes());
                if et == ETHERTYPE_VLAN {
                    f.extend_from_slice(&[0x20, 0x05]);
                    f.extend_from_slice(&inner.to_be_bytes());
                }
                if let Some(b) = rest.first_mut() {
                    *b = first;
                }
                let at = if first >> 4 == 6 { 6 } else { 9 };
                if let Some(b) = rest.get_mut(at) {
                    *b = proto;
                }
                f.extend_from_slice(&rest);
                check(&f, usize::MAX)?;
            }

            #[test]
            fn on_valid_frames(f in valid_frame()) {
                check(&f, usize::MAX)?;
                check(&f, f.len())?;
                check(&f, f.len() - 1)?;
            }

            #[test]
            fn on_mutated_valid_frames(
                mut f in valid_frame(),
                proto in proptest::option::of(proto()),
                flips in proptest::collection::vec((0usize..100, any::<u8>()), 0..4),
                cut in proptest::option::of(any::<prop::sample::Index>()),
            ) {
                if let Some(p) = proto {
                    let l3 = if f[12..14] == ETHERTYPE_VLAN.to_be_bytes() { 18 } else { 14 };
                    let at = if f[l3] >> 4 == 6 { l3 + 6 } else { l3 + 9 };
                    f[at] = p;
                }
                for (at, v) in flips {
                    if let Some(b) = f.get_mut(at) {
                        *b = v;
                    }
                }
                if let Some(c) = cut {
                    f.truncate(c.index(f.len() + 1));
                }
                check(&f, usize::MAX)?;
            }

            /// The hand-read IPv4 path (`parse_plain_ipv4`): untagged frames without IP options,
            /// every header byte it reads mutated (EtherType, version/IHL, lengths, fragment
            /// bits, protocol, UDP ports and length, the BTH), then cut anywhere.
            #[test]
            fn on_mutated_plain_ipv4_frames(
                payload in 0usize..80,
                eth_padding in 0usize..8,
                bth in any::<[u8; 12]>(),
                proto in proptest::option::of(proto()),
                frag in proptest::option::of(prop_oneof![Just(0x20u8), Just(0x01), Just(0x40), any::<u8>()]),
                flips in proptest::collection::vec((12usize..62, any::<u8>()), 0..3),
                cut in proptest::option::of(any::<prop::sample::Index>()),
            ) {
                let mut f = RoceFrameBuilder {
                    bth: Bth::from_bytes(bth),
                    payload: vec![0x3c; payload],
                    eth_padding,
                    ..RoceFrameBuilder::new()
                }
                .build()
                .unwrap();
                let mut info = FrameInfo::EMPTY;
                prop_assert!(parse_plain_ipv4(&f, &mut info).is_some(), "the unmutated frame takes the fast path");
                check(&f, usize::MAX)?;
                if let Some(p) = proto {
                    f[ETH_HEADER_LEN + 9] = p;
                }
                if let Some(b) = frag {
                    f[ETH_HEADER_LEN + 6] = b;
                }
                for (at, v) in flips {
                    if let Some(b) = f.get_mut(at) {
                        *b = v;
                    }
                }
                if let Some(c) = cut {
                    f.truncate(c.index(f.len() + 1));
                }
                check(&f, usize::MAX)?;
            }

            #[test]
            fn on_every_truncation(f in valid_frame()) {
                for n in 0..=f.len() {
                    check(&f[..n], usize::MAX)?;
                }
            }
        }
    }
}
