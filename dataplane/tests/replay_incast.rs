//! A 3→1 incast at line rate on the lossless class, with and without PFC.

mod common;
use common::*;
use dataplane::tools::gen::Incast;
use dataplane::wire::{verify_icrc, Ecn};

const FRAMES: u64 = 1500;

fn incast(dir: &std::path::Path) -> Vec<(u16, std::path::PathBuf)> {
    let paths = Incast {
        senders: 3,
        frames: FRAMES,
        frame_len: 1024,
        speed_bps: 25_000_000_000,
        dscp: 26,
    }
    .write(&dir.join("in"))
    .unwrap();
    paths.into_iter().enumerate().map(|(i, p)| (i as u16, p)).collect()
}

#[test]
fn lossless_incast_loses_nothing_sends_pfc_and_marks_ce() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = incast(dir.path());
    let o = replay(&default_config(), dir.path(), &inputs, 1, false);

    assert_eq!(
        o.snapshot.totals.drops.total(),
        0,
        "drops: {:?}",
        o.snapshot.totals.drops
    );
    for s in 0..3 {
        assert!(port(&o, s).pfc_tx[3] > 0, "port {s} sent no PFC on priority 3");
        assert_eq!(
            port(&o, s)
                .pfc_tx
                .iter()
                .enumerate()
                .filter(|(p, &n)| *p != 3 && n > 0)
                .count(),
            0
        );
    }
    let rx = port(&o, 3);
    assert!(rx.ecn_marked > 0, "no CE marks on the congested port");
    assert_eq!(rx.queues[3].tx_packets, 3 * FRAMES);
    assert_eq!(o.snapshot.buffer.used_cells, 0, "cells conserved after drain");
    assert!(o.snapshot.buffer.peak_used_cells > 0);
    assert!(rx.queues[3].peak_bytes > 100_000, "the lossless queue built past Kmin");

    // Our own parser: every frame intact, in PSN order per QP, CE on some.
    let out = read_pcap(&out_pcap(dir.path(), 3));
    let roce = roce_frames(&out);
    assert_eq!(roce.len() as u64, 3 * FRAMES);
    let mut next_psn = std::collections::HashMap::new();
    let mut ce = 0;
    for (_, f, info) in &roce {
        assert!(verify_icrc(f, info), "ICRC broken");
        let bth = info.bth(f).unwrap();
        let want = next_psn.entry(bth.dest_qp()).or_insert(0u32);
        assert_eq!(bth.psn(), *want, "reordered or lost on QP {:#x}", bth.dest_qp());
        *want += 1;
        ce += (info.ecn() == Some(Ecn::Ce)) as u64;
    }
    assert_eq!(ce, rx.ecn_marked);
    // Departures never overlap on the wire: 1024 B + 24 B at 25 Gb/s is 335.36 ns apart.
    for w in out.windows(2) {
        assert!(
            w[1].0 - w[0].0 >= 335 || w[0].1.len() < 100,
            "frames closer than line rate"
        );
    }

    // Independent oracles: scapy recomputes every ICRC and IPv4 checksum; tshark decodes.
    let s = oracle("check_pcap.py", &[out_pcap(dir.path(), 3), out_pcap(dir.path(), 0)]);
    let rx_file = &s["files"][0];
    assert_eq!(rx_file["roce"], 3 * FRAMES);
    assert_eq!(rx_file["icrc_bad"], 0);
    assert_eq!(rx_file["ipv4_csum_bad"], 0);
    assert_eq!(rx_file["ce"], rx.ecn_marked);
    assert_eq!(rx_file["bad"].as_array().unwrap().len(), 0, "{}", rx_file["bad"]);
    let pfc = rx_file_pfc(&s["files"][1]);
    assert_eq!(pfc.len() as u64, port(&o, 0).pfc_tx[3]);
    assert!(
        pfc.iter().any(|(en, t)| *en == 0x08 && t[3] == 65535),
        "an XOFF for priority 3"
    );
    assert!(
        pfc.iter().any(|(en, t)| *en == 0x08 && t[3] == 0),
        "an XON for priority 3"
    );
    let t = oracle("check_tshark.py", &[out_pcap(dir.path(), 3), out_pcap(dir.path(), 0)]);
    assert_eq!(t["files"][0]["bth"], 3 * FRAMES);
    assert_eq!(t["files"][0]["ipv4_csum_bad"], 0);
    assert_eq!(t["files"][0]["ce"], rx.ecn_marked);
    assert_eq!(t["files"][0]["malformed"], 0);
    assert_eq!(t["files"][1]["pfc"].as_array().unwrap().len(), pfc.len());
    assert_eq!(t["files"][1]["expert_errors"], 0);
}

fn rx_file_pfc(file: &serde_json::Value) -> Vec<(u64, Vec<u64>)> {
    file["pfc"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["enbv"].as_u64().unwrap(),
                p["pause"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_u64().unwrap())
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn without_pfc_the_same_incast_overflows_headroom() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = incast(dir.path());
    let o = replay(&default_config(), dir.path(), &inputs, 1, true);
    let dropped = o.snapshot.totals.drops.get("headroom_overflow");
    assert!(dropped > 0, "drops: {:?}", o.snapshot.totals.drops);
    assert_eq!(o.snapshot.totals.drops.total(), dropped, "only headroom overflow");
    let delivered = port(&o, 3).queues[3].tx_packets;
    assert_eq!(delivered + dropped, 3 * FRAMES, "every frame delivered or counted");
    assert_eq!(o.snapshot.buffer.used_cells, 0);
    // A headroom overflow is the ingress PG's refusal: counted on the senders' ports and their
    // PG 3 (where SONiC users look), never on the congested egress port or its queue.
    let on_ingress: u64 = (0..3).map(|p| port(&o, p).drops.get("headroom_overflow")).sum();
    assert_eq!(on_ingress, dropped, "counted on the ingress ports");
    let pg_drops: u64 = (0..3).map(|p| port(&o, p).pgs[3].dropped_packets).sum();
    assert_eq!(pg_drops, dropped, "and on their ingress PG");
    assert_eq!(port(&o, 3).drops.total(), 0, "nothing on the egress port");
    assert_eq!(port(&o, 3).queues[3].dropped_packets, 0, "nor on its queue");
}

#[test]
fn same_inputs_and_seed_give_byte_identical_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = incast(dir.path());
    let cfg = default_config();
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let c = tempfile::tempdir().unwrap();
    let oa = replay(&cfg, a.path(), &inputs, 7, false);
    let ob = replay(&cfg, b.path(), &inputs, 7, false);
    let oc = replay(&cfg, c.path(), &inputs, 8, false);
    for p in 0..4 {
        let fa = std::fs::read(out_pcap(a.path(), p)).unwrap();
        assert_eq!(
            fa,
            std::fs::read(out_pcap(b.path(), p)).unwrap(),
            "port {p} differs between identical runs"
        );
    }
    assert_eq!(
        serde_json::to_string(&oa.snapshot).unwrap(),
        serde_json::to_string(&ob.snapshot).unwrap()
    );
    // Another seed moves the random marks.
    assert_ne!(
        std::fs::read(out_pcap(a.path(), 3)).unwrap(),
        std::fs::read(out_pcap(c.path(), 3)).unwrap()
    );
    assert_eq!(oc.snapshot.totals.drops.total(), 0);
}
