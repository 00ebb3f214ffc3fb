//! The ICRC oracle: a public capture of real RoCEv2 RC traffic between two hosts
//! (`tests/data/public-rocev2-rc-send.pcap`, see the README beside it). Every one of its 105
//! RoCEv2 frames carries an ICRC computed by real RDMA stacks; ours must agree on all of them.

use dataplane::wire::{self, compute_icrc, parse, verify_icrc, write_icrc, Ecn, L3Kind, MarkOutcome};
use pcap_file::pcap::PcapReader;
use std::collections::BTreeMap;

const PCAP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/public-rocev2-rc-send.pcap");

fn frames() -> Vec<Vec<u8>> {
    let file = std::fs::File::open(PCAP).unwrap_or_else(|e| {
        panic!(
            "cannot open the public RoCEv2 capture {PCAP}: {e} (the repository holds it; see \
             tests/data/README.md)"
        )
    });
    let mut reader = PcapReader::new(file).expect("a classic pcap");
    let mut out = Vec::new();
    while let Some(p) = reader.next_packet() {
        let p = p.expect("a well-formed pcap record");
        assert_eq!(p.data.len() as u32, p.orig_len, "no truncated records expected");
        out.push(p.data.into_owned());
    }
    out
}

#[test]
fn every_rocev2_frame_parses_and_its_icrc_verifies() {
    let frames = frames();
    assert_eq!(frames.len(), 123);
    let mut opcodes = BTreeMap::new();
    let mut roce = 0;
    let mut others = BTreeMap::new();
    for (i, f) in frames.iter().enumerate() {
        // The other frames (ARP, IPv6 neighbour discovery, the TCP connection that sets up the
        // queue pairs) must parse too.
        let info = parse(f, 9216).unwrap_or_else(|m| panic!("frame {i}: malformed {}", m.name()));
        if !info.is_roce() {
            *others.entry((info.l3_kind() as u8, info.ip_proto())).or_insert(0) += 1;
            assert!(info.icrc_offset().is_none() && compute_icrc(f, &info).is_none());
            continue;
        }
        roce += 1;
        assert_eq!(info.l3_kind(), L3Kind::Ipv4, "frame {i}");
        assert_eq!(info.udp_dport(), Some(4791));
        assert_eq!(info.dscp(), Some(0), "frame {i}");
        assert_eq!(info.ecn(), Some(Ecn::Ect0), "frame {i}");
        let bth = info.bth(f).unwrap();
        assert_eq!(bth.tver(), 0);
        *opcodes.entry(bth.opcode()).or_insert(0) += 1;
        let stored = wire::icrc::stored_icrc(f, &info).unwrap();
        assert_eq!(compute_icrc(f, &info), Some(stored), "frame {i}: ICRC");
        assert!(verify_icrc(f, &info), "frame {i}");
    }
    assert_eq!(roce, 105);
    // 10 TCP (the connection that exchanges QP numbers), 4 ICMPv6, 4 ARP.
    assert_eq!(
        others,
        BTreeMap::from([
            ((L3Kind::Ipv4 as u8, Some(6)), 10),
            ((L3Kind::Ipv6 as u8, Some(58)), 4),
            ((L3Kind::Arp as u8, None), 4),
        ])
    );
    assert_eq!(opcodes, BTreeMap::from([(0, 33), (3, 33), (5, 2), (17, 37)]));
}

#[test]
fn any_covered_byte_flip_breaks_the_icrc_and_masked_ones_do_not() {
    for (i, f) in frames().iter().enumerate() {
        let info = parse(f, 9216).unwrap();
        if !info.is_roce() {
            continue;
        }
        let l3 = info.l3_offset();
        let l4 = info.l4_offset().unwrap();
        let icrc = info.icrc_offset().unwrap();
        // One payload (or, for ACKs, AETH) byte.
        let mut g = f.clone();
        g[icrc - 1] ^= 0x01;
        assert!(!verify_icrc(&g, &info), "frame {i}: flipped byte before the ICRC");
        // The ICRC itself.
        let mut g = f.clone();
        g[icrc] ^= 0x80;
        assert!(!verify_icrc(&g, &info), "frame {i}: flipped ICRC");
        // Covered header bytes: IP source address, UDP source port, BTH opcode, BTH PSN.
        for at in [l3 + 12, l4, l4 + 8, l4 + 8 + 11] {
            let mut g = f.clone();
            g[at] ^= 0x10;
            assert!(!verify_icrc(&g, &info), "frame {i}: flipped byte {at}");
        }
        // Masked fields: TOS, TTL, IPv4 checksum, UDP checksum, BTH byte 4 (FECN/BECN).
        for at in [l3 + 1, l3 + 8, l3 + 10, l3 + 11, l4 + 6, l4 + 7, l4 + 8 + 4] {
            let mut g = f.clone();
            g[at] ^= 0xc3;
            assert!(verify_icrc(&g, &info), "frame {i}: masked byte {at} changed the ICRC");
        }
        // Ethernet bytes are not covered.
        let mut g = f.clone();
        g[0] ^= 0xff;
        assert!(verify_icrc(&g, &info));
    }
}

#[test]
fn rewriting_the_icrc_reproduces_the_captured_one() {
    for f in frames() {
        let info = parse(&f, 9216).unwrap();
        if !info.is_roce() {
            continue;
        }
        let mut g = f.clone();
        let at = info.icrc_offset().unwrap();
        g[at..at + 4].fill(0);
        assert!(write_icrc(&mut g, &info));
        assert_eq!(g, f);
    }
}

#[test]
fn ce_marking_and_dscp_rewrite_keep_real_frames_valid() {
    for f in frames() {
        let info = parse(&f, 9216).unwrap();
        if !info.is_roce() {
            continue;
        }
        let mut g = f.clone();
        assert!(wire::set_dscp(&mut g, &info, 26));
        assert_eq!(wire::mark_ce(&mut g, &info), MarkOutcome::Marked);
        assert_eq!(wire::mark_ce(&mut g, &info), MarkOutcome::AlreadyCe);
        let again = parse(&g, 9216).unwrap();
        assert_eq!((again.dscp(), again.ecn()), (Some(26), Some(Ecn::Ce)));
        assert!(verify_icrc(&g, &again));
        let l3 = info.l3_offset();
        let h = etherparse::Ipv4HeaderSlice::from_slice(&g[l3..]).unwrap();
        assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum());
    }
}
