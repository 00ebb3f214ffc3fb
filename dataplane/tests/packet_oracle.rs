//! The builder checked by an independent implementation: frames written to a pcap and decoded
//! by scapy (`tests/oracle/check_pcap.py`: `scapy.contrib.roce` ICRC plus a second, zlib-based
//! recomputation, IPv4 and IPv6/UDP checksums, `scapy.contrib.mac_control` PFC/PAUSE).
//!
//! The public capture (`packet_public_pcap.rs`) only has IPv4, untagged, non-CNP RoCEv2; this
//! covers IPv6, VLAN tags, CNPs, RETH, odd payload lengths, Ethernet padding and PFC.
//! Needs python3 with scapy (`.ci/install-deps`); fails, rather than skips, without it.

use dataplane::wire::build::{build_cnp, reth, IpPair, RoceFrameBuilder};
use dataplane::wire::roce::opcode;
use dataplane::wire::{encode_pause, encode_pfc, mark_ce, parse, set_dscp, Ecn};
use pcap_file::pcap::{PcapPacket, PcapWriter};
use std::process::Command;
use std::time::Duration;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/check_pcap.py");

fn scapy_available() -> bool {
    Command::new("python3")
        .args(["-c", "import scapy.contrib.roce, scapy.contrib.mac_control"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// xorshift64: a fixed, dependency-free sequence of frame variations.
fn next(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn frames() -> Vec<Vec<u8>> {
    let v6 = |last: u8| {
        let mut a = [0u8; 16];
        a[0] = 0xfd;
        a[15] = last;
        a
    };
    let mut out = Vec::new();
    let mut s = 0x0123_4567_89ab_cdefu64;
    for i in 0..120u64 {
        let r = next(&mut s);
        let mut b = RoceFrameBuilder::new()
            .dscp((r & 63) as u8)
            .ecn(Ecn::from_bits((r >> 6) as u8))
            .udp_sport(49152 + (r >> 8) as u16 % 16384)
            .dest_qp((r >> 24) as u32 & 0xff_ffff)
            .psn((r >> 40) as u32 & 0xff_ffff)
            .payload_len((r >> 16) as usize % 1500);
        b.ttl = (r >> 3) as u8;
        if i % 2 == 1 {
            b = b.ipv6(v6(1), v6(2));
            b.flow_label = (r >> 12) as u32 & 0xf_ffff;
        }
        if i % 3 == 0 {
            b = b.vlan((r >> 56) as u8 & 7, (r >> 44) as u16 & 0xfff);
        }
        if i % 5 == 0 {
            b = b
                .opcode(opcode::RC_RDMA_WRITE_FIRST)
                .ext(&reth(r, (r >> 32) as u32, 4096));
        }
        b.bth.set_ack_req(r & 1 << 60 != 0);
        b.bth.set_fecn(r & 1 << 61 != 0);
        b.eth_padding = (r >> 62) as usize;
        let mut f = b.build().unwrap();
        if i % 7 == 0 {
            // In-place rewrites must leave checksums and the ICRC valid.
            let info = parse(&f, usize::MAX).unwrap();
            set_dscp(&mut f, &info, 46);
            mark_ce(&mut f, &info);
        }
        out.push(f);
    }
    for len in [64usize, 128, 256, 512, 1024, 1518, 4096, 9000] {
        out.push(RoceFrameBuilder::new().build_sized(len).unwrap());
    }
    out.push(build_cnp(
        [2, 0, 0, 0, 0, 2],
        [2, 0, 0, 0, 0, 1],
        IpPair::V4 {
            src: [10, 0, 0, 2],
            dst: [10, 0, 0, 1],
        },
        0x42,
    ));
    out.push(build_cnp(
        [2, 0, 0, 0, 0, 2],
        [2, 0, 0, 0, 0, 1],
        IpPair::V6 { src: v6(2), dst: v6(1) },
        0x43,
    ));
    out.push(RoceFrameBuilder::cnp(0x44).vlan(6, 10).build().unwrap());
    let mut buf = [0u8; 60];
    encode_pfc(
        &mut buf,
        [2, 0, 0, 0, 0, 9],
        0b1000_1000,
        [0, 0, 0, 0xffff, 0, 0, 0, 0x10],
    );
    out.push(buf.to_vec());
    encode_pfc(&mut buf, [2, 0, 0, 0, 0, 9], 0xff, [1, 2, 3, 4, 5, 6, 7, 8]);
    out.push(buf.to_vec());
    encode_pause(&mut buf, [2, 0, 0, 0, 0, 9], 77);
    out.push(buf.to_vec());
    out
}

#[test]
fn scapy_agrees_with_the_builder() {
    assert!(
        scapy_available(),
        "python3 with scapy not found: run .ci/install-deps first"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("built.pcap");
    let frames = frames();
    let mut w = PcapWriter::new(std::fs::File::create(&path).unwrap()).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(&PcapPacket::new(Duration::from_micros(i as u64), f.len() as u32, f))
            .unwrap();
    }
    drop(w);
    let out = Command::new("python3").arg(SCRIPT).arg(&path).output().unwrap();
    assert!(
        out.status.success(),
        "check_pcap.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v["files"][0];
    let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} missing in {r}"));
    assert_eq!(r["bad"], serde_json::json!([]), "scapy found problems");
    assert_eq!(n("frames"), frames.len() as u64);
    let roce = frames.len() as u64 - 3;
    assert_eq!(n("roce"), roce);
    assert_eq!(n("icrc_ok"), roce, "ICRC mismatches at frames {}", r["icrc_bad_frames"]);
    assert_eq!(n("roce_v6"), 61);
    assert_eq!(n("ipv4_csum_bad"), 0);
    assert_eq!(n("ipv4_csum_ok"), roce - 61);
    assert_eq!((n("udp_csum_ok"), n("udp_csum_bad")), (61, 0));
    assert_eq!(n("udp_csum_zero"), roce - 61);
    assert_eq!(n("cnp"), 3);
    assert_eq!(n("becn"), 3);
    let pfc = r["pfc"].as_array().unwrap();
    assert_eq!(pfc.len(), 2);
    assert_eq!(pfc[0]["enbv"], 0x88);
    assert_eq!(pfc[0]["pause"], serde_json::json!([0, 0, 0, 65535, 0, 0, 0, 16]));
    assert_eq!(pfc[1]["pause"], serde_json::json!([1, 2, 3, 4, 5, 6, 7, 8]));
    assert_eq!(r["pause"][0]["pause_time"], 77);
}
