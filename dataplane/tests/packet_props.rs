//! Property tests of the wire views: the parser never panics or reads out of bounds on any
//! input (arbitrary bytes, truncations and byte flips of valid frames), build → parse keeps
//! every field, in-place rewrites keep checksums and the ICRC valid, PFC round-trips.
//!
//! `invariants::check` (also the cargo-fuzz target's body) does the per-frame checking.

use dataplane::wire::build::{IpPair, RoceFrameBuilder};
use dataplane::wire::invariants;
use dataplane::wire::pfc::{self, decode_mac_control, encode_pause, encode_pfc, MacControl};
use dataplane::wire::{mark_ce, parse, set_dscp, verify_icrc, Bth, Ecn, L3Kind, Malformed, MarkOutcome, VlanTag};
use etherparse::{IpNumber, Ipv4Header, Ipv4HeaderSlice, UdpHeader};
use proptest::prelude::*;

fn ecn_strategy() -> impl Strategy<Value = Ecn> {
    (0u8..4).prop_map(Ecn::from_bits)
}

prop_compose! {
    fn bth_strategy()(bytes in any::<[u8; 12]>()) -> Bth {
        Bth::from_bytes(bytes)
    }
}

prop_compose! {
    fn builder_strategy()(
        macs in any::<([u8; 6], [u8; 6])>(),
        vlan in proptest::option::of((0u8..8, any::<bool>(), 0u16..4096)),
        v6 in any::<bool>(),
        a4 in any::<([u8; 4], [u8; 4])>(),
        a6 in any::<([u8; 16], [u8; 16])>(),
        dscp in 0u8..64,
        ecn in ecn_strategy(),
        ttl in any::<u8>(),
        flow_label in 0u32..(1 << 20),
        opts in 0usize..=10,
        sport in any::<u16>(),
        bth in bth_strategy(),
        ext_words in 0usize..5,
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        pad_count in proptest::option::of(0u8..4),
        eth_padding in 0usize..8,
    ) -> RoceFrameBuilder {
        RoceFrameBuilder {
            src_mac: macs.0,
            dst_mac: macs.1,
            vlan: vlan.map(|(pcp, dei, vid)| VlanTag { pcp, dei, vid }),
            ip: if v6 { IpPair::V6 { src: a6.0, dst: a6.1 } } else { IpPair::V4 { src: a4.0, dst: a4.1 } },
            dscp,
            ecn,
            ttl,
            flow_label,
            // NOP options: always well-formed.
            ipv4_options: vec![1; opts * 4],
            udp_sport: sport,
            bth,
            ext: (0..ext_words * 4).map(|i| i as u8 ^ 0x5a).collect(),
            payload,
            pad_count,
            eth_padding,
        }
    }
}

/// Arbitrary bytes that often start like a real frame, so the fuzzing reaches deep layers.
fn framish() -> impl Strategy<Value = Vec<u8>> {
    let ethertype = prop_oneof![
        Just(0x0800u16),
        Just(0x86dd),
        Just(0x8100),
        Just(0x8808),
        Just(0x0806),
        any::<u16>()
    ];
    (
        any::<[u8; 12]>(),
        ethertype,
        proptest::collection::vec(any::<u8>(), 0..120),
        0u8..3,
    )
        .prop_map(|(macs, et, mut rest, shape)| {
            // Sometimes make the next bytes look like an IPv4 or IPv6 header start.
            if let Some(b) = rest.first_mut() {
                match (et, shape) {
                    (0x0800, 0) | (0x8100, 1) => *b = 0x45,
                    (0x86dd, 0) => *b = 0x60,
                    _ => {}
                }
            }
            let mut f = macs.to_vec();
            f.extend_from_slice(&et.to_be_bytes());
            f.extend_from_slice(&rest);
            f
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = invariants::check(&bytes);
    }

    #[test]
    fn framish_bytes_never_panic(bytes in framish()) {
        let _ = invariants::check(&bytes);
    }

    #[test]
    fn build_then_parse_keeps_every_field(b in builder_strategy()) {
        let f = b.build().unwrap();
        let info = invariants::check(&f).unwrap();
        let l2 = if b.vlan.is_some() { 18 } else { 14 };
        prop_assert_eq!(info.src_mac(&f), b.src_mac);
        prop_assert_eq!(info.dst_mac(&f), b.dst_mac);
        prop_assert_eq!(info.vlan(), b.vlan);
        prop_assert_eq!(info.l3_offset(), l2);
        prop_assert_eq!(info.dscp(), Some(b.dscp));
        prop_assert_eq!(info.ecn(), Some(b.ecn));
        prop_assert_eq!(info.ip_proto(), Some(17));
        prop_assert_eq!(info.udp_sport(), Some(b.udp_sport));
        prop_assert_eq!(info.udp_dport(), Some(4791));
        let pad = b.pad_count.unwrap_or(((4 - b.payload.len() % 4) % 4) as u8);
        let mut bth = b.bth;
        bth.set_pad_count(pad);
        prop_assert_eq!(info.bth(&f), Some(bth));
        prop_assert_eq!(info.is_cnp(), bth.opcode() == 0x81);
        prop_assert_eq!(info.ip_end(), Some(f.len() - b.eth_padding));
        let data = info.bth_offset().unwrap() + 12;
        prop_assert_eq!(&f[data..data + b.ext.len()], &b.ext[..]);
        let p = data + b.ext.len();
        prop_assert_eq!(&f[p..p + b.payload.len()], &b.payload[..]);
        prop_assert_eq!(info.icrc_offset(), Some(p + b.payload.len() + pad as usize));
        prop_assert!(verify_icrc(&f, &info));
        let l3 = info.l3_offset();
        let l4 = info.l4_offset().unwrap();
        match b.ip {
            IpPair::V4 { src, dst } => {
                prop_assert_eq!(info.l3_kind(), L3Kind::Ipv4);
                let h = Ipv4HeaderSlice::from_slice(&f[l3..]).unwrap();
                prop_assert_eq!((h.source(), h.destination(), h.ttl()), (src, dst, b.ttl));
                prop_assert!(h.dont_fragment());
                prop_assert_eq!(h.options(), &b.ipv4_options[..]);
                prop_assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum());
                prop_assert_eq!(&f[l4 + 6..l4 + 8], &[0u8, 0][..], "UDP checksum 0 over IPv4, as rxe");
            }
            IpPair::V6 { src, dst } => {
                prop_assert_eq!(info.l3_kind(), L3Kind::Ipv6);
                let (h, _) = etherparse::Ipv6Header::from_slice(&f[l3..]).unwrap();
                prop_assert_eq!((h.source, h.destination, h.hop_limit), (src, dst, b.ttl));
                prop_assert_eq!(h.flow_label.value(), b.flow_label);
                let end = info.udp_end().unwrap();
                let (udp, payload) = UdpHeader::from_slice(&f[l4..end]).unwrap();
                prop_assert_ne!(udp.checksum, 0);
                prop_assert_eq!(udp.checksum, udp.calc_checksum_ipv6(&h, payload).unwrap());
            }
        }
    }

    #[test]
    fn every_truncation_of_a_valid_frame_is_safe(b in builder_strategy()) {
        let f = b.build().unwrap();
        let ip_end = parse(&f, usize::MAX).unwrap().ip_end().unwrap();
        for n in 0..f.len() {
            let r = invariants::check(&f[..n]);
            // Cutting into the IP packet is always detected; cutting Ethernet padding is not.
            prop_assert_eq!(r.is_ok(), n >= ip_end, "{} bytes: {:?}", n, r);
        }
    }

    #[test]
    fn byte_flips_of_a_valid_frame_are_safe(
        b in builder_strategy(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
    ) {
        let mut f = b.build().unwrap();
        for (at, x) in &flips {
            let i = at.index(f.len());
            f[i] ^= x;
        }
        let _ = invariants::check(&f);
    }

    #[test]
    fn flipping_any_covered_byte_breaks_the_icrc(b in builder_strategy(), at in any::<prop::sample::Index>()) {
        let f = b.build().unwrap();
        let info = parse(&f, usize::MAX).unwrap();
        let l3 = info.l3_offset();
        let l4 = info.l4_offset().unwrap();
        let end = info.udp_end().unwrap();
        let i = l3 + at.index(end - l3);
        let masked = match info.l3_kind() {
            L3Kind::Ipv4 => [l3 + 1, l3 + 8, l3 + 10, l3 + 11].contains(&i),
            _ => (l3..l3 + 4).contains(&i) || i == l3 + 7,
        } || i == l4 + 6 || i == l4 + 7 || i == l4 + 8 + 4;
        let mut g = f.clone();
        g[i] ^= 0x01;
        // Verify against the original layout: a flipped length field must not move the ICRC.
        prop_assert_eq!(verify_icrc(&g, &info), masked, "byte {} (l3 {}, l4 {})", i, l3, l4);
    }

    /// RFC 1624 on arbitrary IPv4 headers: after CE marking or a DSCP rewrite the incremental
    /// checksum equals a full recomputation.
    #[test]
    fn ipv4_incremental_checksum_matches_recomputation(
        dscp in 0u8..64,
        ecn in 0u8..4,
        new_dscp in 0u8..64,
        id in any::<u16>(),
        ttl in any::<u8>(),
        proto in any::<u8>(),
        src in any::<[u8; 4]>(),
        dst in any::<[u8; 4]>(),
        df in any::<bool>(),
        opts in 0usize..=10,
        payload_len in 0usize..64,
    ) {
        // Any protocol but UDP and AH, whose headers the filler bytes would not make.
        let proto = if proto == 17 || proto == 51 { 6 } else { proto };
        let mut h = Ipv4Header::new(payload_len as u16, ttl, IpNumber(proto), src, dst).unwrap();
        h.identification = id;
        h.dont_fragment = df;
        h.dscp = etherparse::IpDscp::try_new(dscp).unwrap();
        h.ecn = etherparse::IpEcn::try_new(ecn).unwrap();
        h.options = vec![1u8; opts * 4].as_slice().try_into().unwrap();
        h.total_len = (h.header_len() + payload_len) as u16;
        h.header_checksum = h.calc_header_checksum();
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        f.extend_from_slice(&h.to_bytes());
        f.resize(f.len() + payload_len, 0xee);
        let info = parse(&f, usize::MAX).unwrap();

        let mut g = f.clone();
        let outcome = mark_ce(&mut g, &info);
        prop_assert_eq!(outcome, match ecn { 0 => MarkOutcome::NotEct, 3 => MarkOutcome::AlreadyCe, _ => MarkOutcome::Marked });
        let after = Ipv4HeaderSlice::from_slice(&g[14..]).unwrap();
        prop_assert_eq!(after.header_checksum(), after.to_header().calc_header_checksum());
        prop_assert_eq!(after.ecn().value(), if ecn == 0 { 0 } else { 3 });
        prop_assert_eq!(after.dcp().value(), dscp);

        prop_assert!(set_dscp(&mut g, &info, new_dscp));
        let after = Ipv4HeaderSlice::from_slice(&g[14..]).unwrap();
        prop_assert_eq!(after.header_checksum(), after.to_header().calc_header_checksum());
        prop_assert_eq!(after.dcp().value(), new_dscp);
        prop_assert_eq!(after.ecn().value(), if ecn == 0 { 0 } else { 3 });
        // Nothing else moved.
        let mut expect = h.clone();
        expect.dscp = after.dcp();
        expect.ecn = after.ecn();
        expect.header_checksum = expect.calc_header_checksum();
        prop_assert_eq!(after.to_header(), expect);
    }

    #[test]
    fn rewrites_keep_built_frames_valid(b in builder_strategy(), new_dscp in 0u8..64) {
        let f = b.build().unwrap();
        let mut info = parse(&f, usize::MAX).unwrap();
        let mut g = f.clone();
        prop_assert!(set_dscp(&mut g, &info, new_dscp));
        let marked = mark_ce(&mut g, &info);
        prop_assert_eq!(marked == MarkOutcome::Marked, matches!(b.ecn, Ecn::Ect0 | Ecn::Ect1));
        info.refresh_tos(&g);
        let reparsed = parse(&g, usize::MAX).unwrap();
        prop_assert_eq!(info, reparsed);
        prop_assert_eq!(info.dscp(), Some(new_dscp));
        prop_assert_eq!(info.ecn(), Some(if b.ecn == Ecn::NotEct { Ecn::NotEct } else { Ecn::Ce }));
        prop_assert!(verify_icrc(&g, &info));
        if let IpPair::V6 { .. } = b.ip {
            // The traffic class is outside the UDP pseudo-header: the checksum still holds.
            let l3 = info.l3_offset();
            let (h, _) = etherparse::Ipv6Header::from_slice(&g[l3..]).unwrap();
            let l4 = info.l4_offset().unwrap();
            let (udp, payload) = UdpHeader::from_slice(&g[l4..info.udp_end().unwrap()]).unwrap();
            prop_assert_eq!(udp.checksum, udp.calc_checksum_ipv6(&h, payload).unwrap());
            prop_assert_eq!(h.flow_label.value(), b.flow_label);
        }
    }

    #[test]
    fn build_sized_hits_the_length(b in builder_strategy(), extra in 0usize..2000) {
        let target = b.min_len() + extra;
        let f = b.build_sized(target).unwrap();
        prop_assert_eq!(f.len(), target);
        let info = invariants::check(&f).unwrap();
        prop_assert!(verify_icrc(&f, &info));
        prop_assert_eq!(info.bth(&f).unwrap().pad_count(), 0);
        prop_assert!(f.len() - info.ip_end().unwrap() < 4);
        prop_assert!(b.build_sized(b.min_len() - 1).is_err());
    }

    #[test]
    fn pfc_round_trip(src in any::<[u8; 6]>(), enable in any::<u8>(), times in any::<[u16; 8]>()) {
        let mut buf = [0xffu8; 64];
        let n = encode_pfc(&mut buf, src, enable, times);
        prop_assert_eq!(n, 60);
        let f = &buf[..n];
        prop_assert_eq!(decode_mac_control(f), Ok(MacControl::Pfc { enable, times }));
        let info = invariants::check(f).unwrap();
        prop_assert!(info.is_mac_control() && info.dst_is_link_local(f));
        prop_assert_eq!(info.src_mac(f), src);
        prop_assert!(f[34..].iter().all(|&b| b == 0), "padding is zero");
        // Too short anywhere before the last pause time: bad_pfc (or earlier reasons).
        for cut in 0..34 {
            let want = match cut {
                0..=13 => Malformed::Runt,
                14..=15 => Malformed::TruncatedMacControl,
                _ => Malformed::BadPfc,
            };
            prop_assert_eq!(decode_mac_control(&f[..cut]), Err(want));
        }
        prop_assert!(decode_mac_control(&f[..34]).is_ok());
        // A non-zero upper byte of the class-enable vector.
        let mut g = f.to_vec();
        g[16] = 1;
        prop_assert_eq!(decode_mac_control(&g), Err(Malformed::BadPfc));
    }

    #[test]
    fn pause_round_trip(src in any::<[u8; 6]>(), time in any::<u16>()) {
        let mut buf = [0u8; 60];
        prop_assert_eq!(encode_pause(&mut buf, src, time), 60);
        prop_assert_eq!(decode_mac_control(&buf), Ok(MacControl::Pause { time }));
        prop_assert_eq!(decode_mac_control(&buf[..17]), Err(Malformed::BadPause));
        prop_assert_eq!(decode_mac_control(&buf[..18]), Ok(MacControl::Pause { time }));
    }

    #[test]
    fn quanta_conversions_invert(q in any::<u16>(), gbps in 1u64..512) {
        let speed = gbps * 1_000_000_000;
        let ns = pfc::quanta_to_ns(q, speed);
        prop_assert_eq!(pfc::ns_to_quanta(ns, speed), q);
        // A pause of ns_to_quanta(x) lasts at least x.
        prop_assert!(pfc::quanta_to_ns(pfc::ns_to_quanta(ns + 1, speed), speed) > ns || q == u16::MAX);
    }
}

#[test]
fn other_mac_control_opcodes_and_non_mac_control() {
    let mut buf = [0u8; 60];
    encode_pause(&mut buf, [2, 0, 0, 0, 0, 1], 7);
    buf[14..16].copy_from_slice(&0x0002u16.to_be_bytes());
    assert_eq!(decode_mac_control(&buf), Ok(MacControl::Other { opcode: 2 }));
    buf[12] = 0x08;
    buf[13] = 0x00;
    assert_eq!(decode_mac_control(&buf), Err(Malformed::NotMacControl));
    let f = RoceFrameBuilder::new().build().unwrap();
    assert_eq!(decode_mac_control(&f), Err(Malformed::NotMacControl));
}

#[test]
#[should_panic(expected = "60-byte buffer")]
fn encoding_into_a_short_buffer_is_a_caller_bug() {
    encode_pfc(&mut [0u8; 59], [0; 6], 1, [0; 8]);
}

#[test]
fn pfc_wire_bytes() {
    let mut buf = [0u8; 60];
    encode_pfc(
        &mut buf,
        [0x02, 0x11, 0x22, 0x33, 0x44, 0x55],
        0b0000_1000,
        [0, 0, 0, 0xffff, 0, 0, 0, 0],
    );
    assert_eq!(
        buf[..34],
        [
            0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, 0x02, 0x11, 0x22, 0x33, 0x44, 0x55, 0x88, 0x08, 0x01, 0x01, 0x00, 0x08,
            0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0
        ]
    );
}
