//! Flooded lossless frames: a frame whose destination is unknown goes to every other port, and
//! its copies must not overflow its PG's headroom (issue 21, item 3). The PG is charged once per
//! received frame, as for a unicast frame, so the headroom sized for one frame in flight holds.

mod common;
use common::*;
use dataplane::replay::ReplayOutcome;
use dataplane::tools::gen::Incast;

/// An incast of `senders` hosts at line rate on the lossless class, with the FDB empty and
/// learning off: every frame floods.
fn flooded_incast(senders: u16, ports: u16, cable: &str) -> (ReplayOutcome, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let paths = Incast {
        senders,
        frames: 1500,
        frame_len: 1024,
        speed_bps: 25_000_000_000,
        dscp: 26,
    }
    .write(&dir.path().join("in"))
    .unwrap();
    let inputs: Vec<(u16, std::path::PathBuf)> = paths.into_iter().enumerate().map(|(i, p)| (i as u16, p)).collect();
    let path = ports_config_n(dir.path(), ports, |_| format!("cable = \"{cable}\""), "");
    let mut cfg = controlplane::load_file(&path).expect("config loads").config;
    cfg.fdb.learning = false;
    cfg.fdb.static_entries.clear();
    let o = replay(&cfg, dir.path(), &inputs, 1, false);
    (o, dir)
}

#[test]
fn flooded_lossless_incast_loses_nothing() {
    // With 16 ports and a 2 km cable, many frames are in flight after XOFF: the `auto`
    // headroom (705 cells) holds them once, not 15 times (once per copy, as each copy was
    // charged before: 15,256 frames lost to headroom_overflow).
    for (senders, ports, cable) in [(2, 4, "15m"), (3, 4, "15m"), (2, 8, "100m"), (3, 16, "2km")] {
        let (o, _dir) = flooded_incast(senders, ports, cable);
        let drops = &o.snapshot.totals.drops;
        assert_eq!(drops.total(), 0, "{senders} senders, {cable}: drops {drops:?}");
        // Every sender's frames reach every other port: the receiver (port `senders`, which
        // only announced itself) and each other sender.
        assert_eq!(port(&o, senders).queues[3].tx_packets, senders as u64 * 1500);
        for id in 0..ports {
            let others = (0..senders).filter(|&s| s != id).count() as u64;
            let sent = port(&o, id).queues[3].tx_packets;
            assert!(
                sent >= others * 1500,
                "{senders} senders: port {id} sent {sent} of the flooded copies"
            );
        }
        assert!(
            port(&o, 0).pfc_tx[3] > 0,
            "{senders} senders: the flood paused its senders"
        );
        assert_eq!(o.snapshot.buffer.used_cells, 0, "cells conserved after drain");
    }
}

/// A host sending from 20,000 random source addresses before a 2→1 lossless incast starts:
/// with the table bounded per port (and a learning rate), the real hosts are still learnt,
/// the incast goes only to its receiver, and nothing is lost. Before, the attacker filled the
/// table past its capacity, the receiver was never learnt and the incast flooded to every
/// port, the attacker's included.
#[test]
fn random_source_addresses_cannot_take_the_table_from_the_real_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Incast {
        senders: 2,
        frames: 1500,
        frame_len: 1024,
        speed_bps: 25_000_000_000,
        dscp: 26,
    }
    .write(&dir.path().join("in"))
    .unwrap();
    // Port 3: 64 B frames from random unicast addresses to an unknown one, every 100 ns
    // for the 2 ms before the incast.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let frames: Vec<(u64, Vec<u8>)> = (0..20_000u64)
        .map(|i| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut f = vec![0u8; 64];
            f[..6].copy_from_slice(&[0x02, 0xee, 0, 0, 0, 1]);
            f[6..12].copy_from_slice(&seed.to_be_bytes()[..6]);
            f[6] = 0x02; // locally administered unicast
            f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
            (i * 100, f)
        })
        .collect();
    let attacker = dir.path().join("in/port3.pcap");
    dataplane::tools::gen::write_pcap(&attacker, dataplane::tools::gen::BASE_NS - 2_100_000, frames).unwrap();
    paths.push(attacker);
    let inputs: Vec<(u16, std::path::PathBuf)> = paths.into_iter().enumerate().map(|(i, p)| (i as u16, p)).collect();
    // With `port_limit` = capacity and an unbounded `learn_rate`, the table fills with the
    // attacker's addresses and every port gets the 1500 lossless frames of each sender.
    let o = replay(&default_config(), dir.path(), &inputs, 1, false);

    let drops = &o.snapshot.totals.drops;
    assert_eq!(drops.get("headroom_overflow"), 0, "drops {drops:?}");
    assert_eq!(
        port(&o, 2).queues[3].tx_packets,
        2 * 1500,
        "the receiver got the incast"
    );
    for id in [0, 1, 3] {
        // The receiver's announcement is a broadcast: one frame.
        let got = port(&o, id).queues[3].tx_packets;
        assert!(
            got <= 1,
            "port {id} got {got} lossless frames: the receiver was not learnt and the incast flooded"
        );
    }
    // The default learning rate: a burst of 1000, then 1000 a second (2 more in 2 ms).
    let learnt = 20_000 - port(&o, 3).learn_refused;
    assert!(
        (1000..=1002).contains(&learnt),
        "the attacker's port learnt {learnt} addresses"
    );
    assert_eq!(port(&o, 0).learn_refused, 0);
}
