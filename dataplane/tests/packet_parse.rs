//! The parser, case by case: every malformed reason from a frame that has exactly that defect,
//! and the things that must not be malformed (padding, short frames, unknown EtherTypes,
//! fragments, options and extension headers).

use dataplane::wire::build::{reth, IpPair, RoceFrameBuilder};
use dataplane::wire::invariants;
use dataplane::wire::roce::{opcode, ICRC_LEN};
use dataplane::wire::{parse, verify_icrc, Ecn, L3Kind, Malformed, VlanTag};
use std::collections::HashSet;

const MAX: usize = 9216;

fn v4() -> Vec<u8> {
    RoceFrameBuilder::new().payload_len(32).build().unwrap()
}

fn v6() -> Vec<u8> {
    RoceFrameBuilder::new()
        .ipv6(
            [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
        )
        .payload_len(32)
        .build()
        .unwrap()
}

/// Recomputes the IPv4 header checksum at offset 14 (so only the defect under test remains).
fn fix_ipv4_checksum(f: &mut [u8]) {
    f[24] = 0;
    f[25] = 0;
    let ihl = (f[14] & 0xf) as usize * 4;
    let mut sum = 0u32;
    for w in f[14..14 + ihl.max(20).min(f.len() - 14)].chunks(2) {
        sum += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

fn set16(f: &mut [u8], at: usize, v: u16) {
    f[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

fn err(f: &[u8]) -> &'static str {
    match invariants::check(f) {
        Ok(info) => panic!("expected a malformed frame, parsed {info:?}"),
        Err(m) => m.name(),
    }
}

#[test]
fn reason_names_are_stable_unique_snake_case_and_fit_the_counters() {
    let names: Vec<_> = Malformed::ALL.iter().map(|m| m.name()).collect();
    assert_eq!(
        names,
        [
            "runt",
            "oversize",
            "truncated_vlan",
            "truncated_ipv4",
            "bad_ip_version",
            "bad_ipv4_ihl",
            "bad_ipv4_length",
            "truncated_ipv6",
            "bad_ipv6_length",
            "truncated_ip_ext",
            "bad_ip_ext",
            "truncated_udp",
            "bad_udp_length",
            "truncated_bth",
            "truncated_mac_control",
            "not_mac_control",
            "bad_pfc",
            "bad_pause",
        ]
    );
    assert_eq!(names.iter().collect::<HashSet<_>>().len(), names.len());
    for (i, m) in Malformed::ALL.iter().enumerate() {
        assert_eq!(*m as usize, i);
        assert_eq!(Malformed::from_index(i), Some(*m));
        assert!(m
            .name()
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
        assert_eq!(m.to_string(), m.name());
    }
    assert_eq!(Malformed::from_index(Malformed::COUNT), None);
    const { assert!(Malformed::COUNT <= dataplane::counters::MALFORMED_SLOTS) };
}

#[test]
fn runt_and_oversize() {
    for n in 0..14 {
        assert_eq!(parse(&v4()[..n], MAX), Err(Malformed::Runt), "{n} bytes");
    }
    // A bare 14-byte header of an unknown EtherType is a (short) valid frame.
    let mut f = v4()[..14].to_vec();
    set16(&mut f, 12, 0x88b5);
    let info = invariants::check(&f).unwrap();
    assert_eq!((info.l3_kind(), info.ether_type()), (L3Kind::Other, 0x88b5));
    let f = v4();
    assert_eq!(parse(&f, f.len() - 1), Err(Malformed::Oversize));
    assert!(parse(&f, f.len()).is_ok());
    // Oversize is checked first.
    assert_eq!(parse(&[0u8; 10], 9), Err(Malformed::Oversize));
}

#[test]
fn frames_below_60_bytes_are_not_runts() {
    // 58 bytes: Ethernet + IPv4 + UDP + BTH + ICRC, as a sender-side capture shows it.
    let f = RoceFrameBuilder::new().build().unwrap();
    assert_eq!(f.len(), 58);
    let info = invariants::check(&f).unwrap();
    assert!(info.is_roce() && verify_icrc(&f, &info));
}

#[test]
fn truncated_vlan() {
    let f = RoceFrameBuilder::new().vlan(3, 100).build().unwrap();
    for n in 14..18 {
        assert_eq!(err(&f[..n]), "truncated_vlan");
    }
}

#[test]
fn ipv4_reasons() {
    let f = v4();
    for n in 14..34 {
        assert_eq!(err(&f[..n]), "truncated_ipv4", "{n} bytes");
    }
    let mut g = f.clone();
    g[14] = 0x65; // version 6 under EtherType IPv4
    assert_eq!(err(&g), "bad_ip_version");
    let mut g = f.clone();
    g[14] = 0x44; // IHL 4
    fix_ipv4_checksum(&mut g);
    assert_eq!(err(&g), "bad_ipv4_ihl");
    let mut g = f[..34 + 8].to_vec();
    g[14] = 0x4f; // IHL 15: 60 bytes of header, 28 present
    assert_eq!(err(&g), "truncated_ipv4");
    let mut g = f.clone();
    set16(&mut g, 16, 19); // total length below the header
    fix_ipv4_checksum(&mut g);
    assert_eq!(err(&g), "bad_ipv4_length");
    let mut g = f.clone();
    set16(&mut g, 16, (f.len() - 14 + 1) as u16); // one byte beyond the frame
    fix_ipv4_checksum(&mut g);
    assert_eq!(err(&g), "bad_ipv4_length");
    // Truncating a valid frame anywhere inside the IP packet is a length error.
    for n in 34..f.len() {
        assert_eq!(err(&f[..n]), "bad_ipv4_length", "{n} bytes");
    }
}

#[test]
fn ipv6_reasons() {
    let f = v6();
    for n in 14..54 {
        assert_eq!(err(&f[..n]), "truncated_ipv6", "{n} bytes");
    }
    for n in 54..f.len() {
        assert_eq!(err(&f[..n]), "bad_ipv6_length", "{n} bytes");
    }
    let mut g = f.clone();
    g[14] = 0x40 | (g[14] & 0x0f);
    assert_eq!(err(&g), "bad_ip_version");
    // A hop-by-hop header that claims more than the payload holds.
    let mut g = f[..54].to_vec();
    g[20] = 0; // next header: hop-by-hop
    set16(&mut g, 18, 8);
    g.extend_from_slice(&[17, 1, 0, 0, 0, 0, 0, 0]); // HBH with hdr ext len 1: 16 bytes
    assert_eq!(err(&g), "truncated_ip_ext");
    // A hop-by-hop header that is not first.
    let mut g = f[..54].to_vec();
    g[20] = 60; // destination options
    set16(&mut g, 18, 16);
    g.extend_from_slice(&[0, 0, 1, 4, 0, 0, 0, 0]); // dest options → next: hop-by-hop
    g.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
    assert_eq!(err(&g), "bad_ip_ext");
}

#[test]
fn udp_and_bth_reasons() {
    let f = v4();
    // IP payload shorter than a UDP header.
    for n in 0..8 {
        let mut g = f[..34 + n].to_vec();
        set16(&mut g, 16, (20 + n) as u16);
        fix_ipv4_checksum(&mut g);
        assert_eq!(err(&g), "truncated_udp", "{n} bytes of UDP");
    }
    let udp_len = (f.len() - 34) as u16;
    for bad in [0, 1, 7, udp_len + 1, u16::MAX] {
        let mut g = f.clone();
        set16(&mut g, 38, bad);
        assert_eq!(err(&g), "bad_udp_length", "UDP length {bad}");
    }
    // RoCEv2 needs 12 + 4 bytes of UDP payload.
    let min = RoceFrameBuilder::new().build().unwrap();
    for cut in 1..=16 {
        let n = min.len() - cut;
        let mut g = min[..n].to_vec();
        set16(&mut g, 16, (n - 14) as u16);
        set16(&mut g, 38, (n - 34) as u16);
        fix_ipv4_checksum(&mut g);
        assert_eq!(err(&g), "truncated_bth", "{cut} bytes short");
    }
    // The same short datagram to another port is plain UDP.
    let mut g = min[..min.len() - 4].to_vec();
    let n = g.len();
    set16(&mut g, 16, (n - 14) as u16);
    set16(&mut g, 38, (n - 34) as u16);
    set16(&mut g, 36, 4792);
    fix_ipv4_checksum(&mut g);
    let info = invariants::check(&g).unwrap();
    assert_eq!((info.udp_dport(), info.is_roce()), (Some(4792), false));
    // A UDP length below the IP payload is accepted; the datagram (and the ICRC) end there.
    let mut g = f.clone();
    set16(&mut g, 38, udp_len - 4);
    let info = invariants::check(&g).unwrap();
    assert_eq!(info.udp_end(), Some(f.len() - 4));
    assert_eq!(info.ip_end(), Some(f.len()));
}

#[test]
fn ethernet_padding_is_tolerated_and_excluded() {
    for base in [v4(), v6(), RoceFrameBuilder::new().vlan(5, 7).build().unwrap()] {
        let info = parse(&base, MAX).unwrap();
        for pad in [1usize, 2, 3, 4, 17, 60] {
            let mut g = base.clone();
            g.resize(base.len() + pad, 0xa5);
            let padded = invariants::check(&g).unwrap();
            assert_eq!(padded, info);
            assert_eq!(padded.ip_end(), Some(base.len()));
            assert_eq!(padded.icrc_offset(), Some(base.len() - ICRC_LEN));
            assert!(verify_icrc(&g, &padded));
        }
    }
    // The builder's own Ethernet padding, and a NIC's pad to 60 bytes.
    let mut b = RoceFrameBuilder::new();
    b.eth_padding = 2;
    let f = b.build().unwrap();
    assert_eq!(f.len(), 60);
    let info = invariants::check(&f).unwrap();
    assert_eq!(info.ip_end(), Some(58));
    assert!(verify_icrc(&f, &info));
}

#[test]
fn fields() {
    let f = RoceFrameBuilder::new()
        .macs([2, 0, 0, 0, 0, 0xaa], [2, 0, 0, 0, 0, 0xbb])
        .vlan(5, 0x123)
        .dscp(46)
        .ecn(Ecn::Ect1)
        .udp_sport(0xc001)
        .opcode(opcode::RC_RDMA_WRITE_FIRST)
        .dest_qp(0x12_3456)
        .psn(0xab_cdef)
        .ext(&reth(0x1000, 0x42, 4096))
        .payload_len(64)
        .build()
        .unwrap();
    let info = invariants::check(&f).unwrap();
    assert_eq!(info.src_mac(&f), [2, 0, 0, 0, 0, 0xaa]);
    assert_eq!(info.dst_mac(&f), [2, 0, 0, 0, 0, 0xbb]);
    assert_eq!(
        info.vlan(),
        Some(VlanTag {
            pcp: 5,
            dei: false,
            vid: 0x123
        })
    );
    assert_eq!((info.pcp(), info.vid()), (Some(5), Some(0x123)));
    assert_eq!(
        (info.ether_type(), info.l3_offset(), info.l3_kind()),
        (0x0800, 18, L3Kind::Ipv4)
    );
    assert_eq!(
        (info.dscp(), info.ecn(), info.tos()),
        (Some(46), Some(Ecn::Ect1), Some(46 << 2 | 1))
    );
    assert!(info.is_ect() && info.is_ip() && !info.is_fragment());
    assert_eq!(info.ip_proto(), Some(17));
    assert_eq!(
        (info.udp_sport(), info.udp_dport(), info.l4_offset()),
        (Some(0xc001), Some(4791), Some(38))
    );
    assert_eq!(info.bth_offset(), Some(46));
    let bth = info.bth(&f).unwrap();
    assert_eq!(
        (bth.opcode(), bth.dest_qp(), bth.psn(), bth.pkey()),
        (6, 0x12_3456, 0xab_cdef, 0xffff)
    );
    assert!(info.is_roce() && !info.is_cnp() && verify_icrc(&f, &info));
    assert!(!info.dst_is_link_local(&f) && !info.is_mac_control() && !info.is_unknown_ethertype());
}

#[test]
fn non_ip_kinds() {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
    let with_type = |t: u16| {
        let mut g = f.clone();
        g.extend_from_slice(&t.to_be_bytes());
        g.resize(60, 0);
        invariants::check(&g).unwrap()
    };
    assert_eq!(with_type(0x0806).l3_kind(), L3Kind::Arp);
    assert_eq!(with_type(0x8808).l3_kind(), L3Kind::MacControl);
    assert!(with_type(0x8808).is_mac_control());
    let llc = with_type(46); // 802.3 length field
    assert_eq!((llc.l3_kind(), llc.ether_type()), (L3Kind::None, 46));
    assert!(llc.is_unknown_ethertype());
    for t in [0x88cc, 0x88a8, 0x8847, 0x0600] {
        let i = with_type(t);
        assert_eq!((i.l3_kind(), i.ether_type()), (L3Kind::Other, t));
        assert!(i.is_unknown_ethertype() && i.dscp().is_none() && i.udp().is_none());
    }
    // A second 802.1Q tag is not looked into.
    let mut g = f.clone();
    g.extend_from_slice(&[0x81, 0x00, 0x20, 0x05, 0x81, 0x00, 0x00, 0x06, 0x08, 0x00]);
    g.resize(64, 0);
    let i = invariants::check(&g).unwrap();
    assert_eq!(
        (i.l3_kind(), i.ether_type(), i.pcp(), i.vid(), i.l3_offset()),
        (L3Kind::Other, 0x8100, Some(1), Some(5), 18)
    );
    // Link-local destinations.
    let mut g = f.clone();
    g[..6].copy_from_slice(&[0x01, 0x80, 0xc2, 0, 0, 0x0e]);
    g.extend_from_slice(&[0x88, 0xcc]);
    assert!(invariants::check(&g).unwrap().dst_is_link_local(&g));
    g[5] = 0x10;
    assert!(!invariants::check(&g).unwrap().dst_is_link_local(&g));
}

#[test]
fn fragments_have_no_l4() {
    let f = v4();
    for (flags_frag, what) in [
        (0x2000u16, "first fragment (MF)"),
        (0x0010, "later fragment"),
        (0x2010, "middle fragment"),
    ] {
        let mut g = f.clone();
        set16(&mut g, 20, flags_frag);
        fix_ipv4_checksum(&mut g);
        let info = invariants::check(&g).unwrap();
        assert!(info.is_fragment(), "{what}");
        assert_eq!(info.ip_proto(), Some(17));
        assert!(info.udp().is_none() && info.bth(&g).is_none(), "{what}");
    }
    // A later fragment whose "UDP header" would be garbage is not malformed.
    let mut g = f.clone();
    set16(&mut g, 20, 0x0010);
    set16(&mut g, 38, 3);
    fix_ipv4_checksum(&mut g);
    assert!(invariants::check(&g).is_ok());
    // IPv6 fragment header, offset 1.
    let b = v6();
    let mut g = b[..54].to_vec();
    g[20] = 44;
    let rest = &b[54..];
    set16(&mut g, 18, (rest.len() + 8) as u16);
    g.extend_from_slice(&[17, 0, 0, 8, 0, 0, 0, 1]);
    g.extend_from_slice(rest);
    let info = invariants::check(&g).unwrap();
    assert!(info.is_fragment() && info.udp().is_none());
    assert_eq!(info.ip_proto(), Some(17));
    // An atomic fragment (offset 0, no MF) is not a fragment.
    g[14 + 40 + 3] = 0;
    g[14 + 40 + 2] = 0;
    let info = invariants::check(&g).unwrap();
    assert!(!info.is_fragment() && info.is_roce());
    assert_eq!(info.l4_offset(), Some(14 + 48));
}

#[test]
fn ipv4_options_and_ipv6_extension_headers_are_skipped_and_covered_by_the_icrc() {
    let mut b = RoceFrameBuilder::new().payload_len(8);
    b.ipv4_options = vec![0x94, 0x04, 0, 0, 1, 1, 1, 0]; // router alert, NOP ×3, EOL
    let f = b.build().unwrap();
    let info = invariants::check(&f).unwrap();
    assert_eq!(info.l4_offset(), Some(14 + 28));
    assert!(info.is_roce() && verify_icrc(&f, &info));
    let mut g = f.clone();
    g[14 + 20 + 4] ^= 1; // an option byte is covered
    assert!(!verify_icrc(&g, &info));

    // IPv6 + destination options (8 bytes) + UDP.
    let base = v6();
    let mut g = base[..54].to_vec();
    g[20] = 60;
    set16(&mut g, 18, (base.len() - 54 + 8) as u16);
    g.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
    g.extend_from_slice(&base[54..]);
    let info = invariants::check(&g).unwrap();
    assert_eq!((info.ip_proto(), info.l4_offset()), (Some(17), Some(62)));
    assert!(info.is_roce());
    assert!(dataplane::wire::write_icrc(&mut g, &info) && verify_icrc(&g, &info));
}

#[test]
fn ipv6_zero_payload_length_is_not_a_jumbogram() {
    let f = v6();
    let mut g = f.clone();
    set16(&mut g, 18, 0);
    assert_eq!(err(&g), "truncated_udp");
    g[20] = 59; // no next header: an empty, valid packet
    let info = invariants::check(&g).unwrap();
    assert_eq!((info.ip_end(), info.ip_proto()), (Some(54), Some(59)));
}

#[test]
fn cnp_is_recognised() {
    for ip in [
        IpPair::V4 {
            src: [10, 0, 0, 2],
            dst: [10, 0, 0, 1],
        },
        IpPair::V6 {
            src: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
            dst: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        },
    ] {
        let f = dataplane::wire::build_cnp([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1], ip, 0x1234);
        let info = invariants::check(&f).unwrap();
        assert!(info.is_cnp() && info.is_roce());
        let bth = info.bth(&f).unwrap();
        assert!(bth.becn() && !bth.fecn());
        assert_eq!(
            (bth.opcode(), bth.dest_qp(), bth.psn(), bth.pad_count()),
            (0x81, 0x1234, 0, 0)
        );
        assert_eq!(info.dscp(), Some(48));
        // 16 reserved zero bytes between the BTH and the ICRC.
        let at = info.bth_offset().unwrap() + 12;
        assert_eq!(info.icrc_offset(), Some(at + 16));
        assert_eq!(f[at..at + 16], [0u8; 16]);
        assert!(verify_icrc(&f, &info));
    }
}
