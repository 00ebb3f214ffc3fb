//! What must hold for any input, as one function the property tests and the cargo-fuzz target
//! (`dataplane/fuzz`, target `parse_frame`) both run: parse arbitrary bytes, read every
//! accessor, check every offset against the frame, then rewrite (CE mark, DSCP, ICRC) a copy
//! and check the rewrite changed exactly what it should. Panics on a violation.
//!
//! Not for the packet path (it allocates copies of the frame).

use super::ecn::{mark_ce, set_dscp, MarkOutcome};
use super::icrc::{compute_icrc, stored_icrc, verify_icrc, write_icrc};
use super::parse::{parse, Ecn, FrameInfo, L3Kind, Malformed, UDP_HEADER_LEN};
use super::pfc::decode_mac_control;
use super::roce::{Bth, ICRC_LEN};

/// Checks every invariant on `frame`; returns the parse result for further checks.
pub fn check(frame: &[u8]) -> Result<FrameInfo, Malformed> {
    let res = parse(frame, usize::MAX);
    assert_eq!(res, parse(frame, usize::MAX), "parse is deterministic");
    if !frame.is_empty() {
        assert_eq!(parse(frame, frame.len() - 1), Err(Malformed::Oversize));
    }
    assert_eq!(parse(frame, frame.len()), res);
    // Never panics, whatever the frame.
    let _ = decode_mac_control(frame);
    let info = match res {
        Ok(info) => info,
        Err(m) => {
            assert!(Malformed::from_index(m as usize) == Some(m) && !m.name().is_empty());
            assert_ne!(m, Malformed::Oversize);
            return res;
        }
    };
    check_offsets(frame, &info);

    // Trailing bytes (Ethernet padding) change nothing: every length comes from a header.
    let mut padded = frame.to_vec();
    padded.extend_from_slice(&[0u8; 7]);
    assert_eq!(parse(&padded, usize::MAX), Ok(info), "padding changed the parse");

    check_rewrites(frame, &info);
    res
}

fn check_offsets(frame: &[u8], info: &FrameInfo) {
    let len = frame.len();
    let l3 = info.l3_offset();
    assert_eq!(l3, if info.vlan().is_some() { 18 } else { 14 });
    assert!(l3 <= len);
    assert_eq!(info.ether_type(), u16::from_be_bytes([frame[l3 - 2], frame[l3 - 1]]));
    if let Some(tag) = info.vlan() {
        assert!(tag.pcp < 8 && tag.vid < 4096);
        assert_eq!(info.pcp(), Some(tag.pcp));
    } else {
        assert_eq!(info.pcp(), None);
    }
    let _ = (
        info.is_mac_control(),
        info.is_unknown_ethertype(),
        info.dst_is_link_local(frame),
        info.vid(),
    );

    let ip = info.is_ip();
    assert_eq!(ip, info.ip_end().is_some());
    assert_eq!(ip, info.dscp().is_some());
    assert_eq!(ip, info.ecn().is_some());
    assert_eq!(ip, info.ip_proto().is_some());
    assert_eq!(info.is_ect(), info.ecn().is_some_and(|e| e != Ecn::NotEct));
    if ip {
        let fixed = if info.l3_kind() == L3Kind::Ipv4 { 20 } else { 40 };
        let end = info.ip_end().unwrap();
        assert!(l3 + fixed <= end && end <= len, "ip_end {end} out of frame {len}");
        let tos = info.tos().unwrap();
        let live = if info.l3_kind() == L3Kind::Ipv4 {
            frame[l3 + 1]
        } else {
            (frame[l3] << 4) | (frame[l3 + 1] >> 4)
        };
        assert_eq!(tos, live);
        assert_eq!(info.dscp(), Some(tos >> 2));
    } else {
        assert!(info.udp().is_none() && !info.is_fragment());
    }

    match info.udp() {
        Some(u) => {
            assert!(!info.is_fragment());
            assert_eq!(info.ip_proto(), Some(17));
            let l4 = info.l4_offset().unwrap();
            let end = info.udp_end().unwrap();
            assert!(l4 >= l3 + 20 && l4 + UDP_HEADER_LEN <= end && end <= info.ip_end().unwrap());
            assert_eq!(u.length as usize, end - l4);
            assert_eq!(u.src_port, u16::from_be_bytes([frame[l4], frame[l4 + 1]]));
            assert_eq!(u.dst_port, u16::from_be_bytes([frame[l4 + 2], frame[l4 + 3]]));
            assert_eq!(info.udp_sport(), Some(u.src_port));
            assert_eq!(info.udp_dport(), Some(u.dst_port));
            assert_eq!(info.is_roce(), u.dst_port == 4791);
        }
        None => {
            assert!(info.l4_offset().is_none() && info.udp_end().is_none() && info.udp_dport().is_none());
            assert!(!info.is_roce());
        }
    }

    match info.bth(frame) {
        Some(bth) => {
            let at = info.bth_offset().unwrap();
            assert_eq!(bth.to_bytes()[..], frame[at..at + Bth::LEN]);
            let icrc = info.icrc_offset().unwrap();
            assert_eq!(icrc + ICRC_LEN, info.udp_end().unwrap());
            assert!(icrc >= at + Bth::LEN);
            assert_eq!(info.is_cnp(), bth.opcode() == 0x81);
            let _ = (bth.solicited(), bth.migreq(), bth.pad_count(), bth.tver(), bth.pkey());
            let _ = (bth.fecn(), bth.becn(), bth.ack_req());
            assert!(bth.dest_qp() < 1 << 24 && bth.psn() < 1 << 24);
            assert!(compute_icrc(frame, info).is_some() && stored_icrc(frame, info).is_some());
        }
        None => {
            assert!(info.bth_offset().is_none() && info.icrc_offset().is_none() && !info.is_cnp());
            assert!(compute_icrc(frame, info).is_none() && !verify_icrc(frame, info));
        }
    }
}

fn ipv4_checksum_ok(frame: &[u8], info: &FrameInfo) -> Option<bool> {
    if info.l3_kind() != L3Kind::Ipv4 {
        return None;
    }
    let h = etherparse::Ipv4HeaderSlice::from_slice(&frame[info.l3_offset()..]).ok()?;
    Some(h.header_checksum() == h.to_header().calc_header_checksum())
}

fn check_rewrites(frame: &[u8], info: &FrameInfo) {
    let icrc_ok = verify_icrc(frame, info);
    let csum_ok = ipv4_checksum_ok(frame, info);

    // CE marking.
    let mut g = frame.to_vec();
    let outcome = mark_ce(&mut g, info);
    let expected = match info.ecn() {
        None => MarkOutcome::NotIp,
        Some(Ecn::NotEct) => MarkOutcome::NotEct,
        Some(Ecn::Ce) => MarkOutcome::AlreadyCe,
        Some(_) => MarkOutcome::Marked,
    };
    assert_eq!(outcome, expected);
    if outcome != MarkOutcome::Marked {
        assert_eq!(g, frame, "{outcome:?} must write nothing");
    } else {
        let after = parse(&g, usize::MAX).expect("a marked frame still parses");
        assert_eq!(after.ecn(), Some(Ecn::Ce));
        assert_eq!(after.dscp(), info.dscp());
        let mut refreshed = *info;
        refreshed.refresh_tos(&g);
        assert_eq!(refreshed, after, "only the TOS changed");
        assert_eq!(verify_icrc(&g, &after), icrc_ok, "marking changed the ICRC verdict");
        if csum_ok == Some(true) {
            assert_eq!(ipv4_checksum_ok(&g, &after), csum_ok, "marking broke the checksum");
        }
        assert_eq!(mark_ce(&mut g, info), MarkOutcome::AlreadyCe);
        // Bytes outside the IP header's first word and checksum are untouched.
        let l3 = info.l3_offset();
        for (i, (a, b)) in frame.iter().zip(&g).enumerate() {
            let allowed = if info.l3_kind() == L3Kind::Ipv4 {
                i == l3 + 1 || i == l3 + 10 || i == l3 + 11
            } else {
                i == l3 + 1
            };
            assert!(a == b || allowed, "byte {i} changed");
        }
    }

    // DSCP rewrite, to a value derived from the frame.
    let dscp = frame.len() as u8 & 63;
    let mut g = frame.to_vec();
    assert_eq!(set_dscp(&mut g, info, dscp), info.is_ip());
    if info.is_ip() {
        let after = parse(&g, usize::MAX).expect("a rewritten frame still parses");
        assert_eq!((after.dscp(), after.ecn()), (Some(dscp), info.ecn()));
        assert_eq!(verify_icrc(&g, &after), icrc_ok);
        if csum_ok == Some(true) {
            assert_eq!(ipv4_checksum_ok(&g, &after), csum_ok, "DSCP rewrite broke the checksum");
        }
    } else {
        assert_eq!(g, frame);
    }

    // ICRC rewrite.
    let mut g = frame.to_vec();
    assert_eq!(write_icrc(&mut g, info), info.is_roce());
    if info.is_roce() {
        assert!(verify_icrc(&g, info));
        let icrc = info.icrc_offset().unwrap();
        assert!(g[..icrc] == frame[..icrc] && g[icrc + ICRC_LEN..] == frame[icrc + ICRC_LEN..]);
    } else {
        assert_eq!(g, frame);
    }
}
