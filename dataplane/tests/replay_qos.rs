//! Lossless, lossy and CNP traffic into one congested port; a received XOFF.

mod common;
use common::*;
use dataplane::tools::gen::{announce, host_ip, host_mac, Flow};
use dataplane::wire::build::{build_cnp, IpPair};
use dataplane::wire::{encode_pfc, Ecn};

const LINE: u64 = 25_000_000_000;

fn flow(src: u16, dscp: u8, count: u64, rate_bps: u64, start_ns: u64) -> Vec<(u64, Vec<u8>)> {
    Flow {
        src,
        dst: 3,
        dscp,
        ecn: Ecn::Ect0,
        qp: 0x200 + src as u32,
        frame_len: 1024,
        count,
        start_ns,
        rate_bps,
    }
    .frames()
    .unwrap()
}

#[test]
fn cnps_cut_through_congestion_and_lossy_traffic_drops_at_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Lossless and lossy senders each at line rate into port 3, for 3 ms.
    write_pcap(&d.join("p0.pcap"), flow(0, 26, 9000, LINE, 1_000));
    write_pcap(&d.join("p1.pcap"), flow(1, 0, 9000, LINE, 1_000));
    // A CNP every 20 µs from host 2 toward host 3 (as if host 2 were a notification point).
    let cnps: Vec<(u64, Vec<u8>)> = (0..100)
        .map(|i| {
            let ip = IpPair::V4 {
                src: host_ip(2),
                dst: host_ip(3),
            };
            (50_000 + i * 20_000, build_cnp(host_mac(2), host_mac(3), ip, 0x300))
        })
        .collect();
    write_pcap(&d.join("p2.pcap"), cnps.clone());
    write_pcap(&d.join("p3.pcap"), vec![(0, announce(3, 0).unwrap())]);
    let inputs: Vec<_> = (0..4).map(|p| (p as u16, d.join(format!("p{p}.pcap")))).collect();
    let o = replay(&default_config(), d, &inputs, 1, false);

    let rx = port(&o, 3);
    assert!(
        rx.drops.get("egress_limit") > 0,
        "lossy queue never hit its limit: {:?}",
        rx.drops
    );
    assert_eq!(rx.queues[3].dropped_packets, 0, "lossless queue dropped");
    assert_eq!(o.snapshot.totals.drops.get("headroom_overflow"), 0);
    assert_eq!(rx.queues[6].tx_packets, 100, "every CNP delivered");
    assert!(
        rx.queues[0].peak_bytes > 500_000,
        "lossy queue built up: {}",
        rx.queues[0].peak_bytes
    );

    // Each CNP leaves within 2 µs of entering, however deep the data queues are.
    let base = dataplane::tools::gen::BASE_NS;
    let out = read_pcap(&out_pcap(d, 3));
    let cnp_out: Vec<u64> = roce_frames(&out)
        .iter()
        .filter(|(_, _, i)| i.is_cnp())
        .map(|(t, _, _)| *t - base)
        .collect();
    assert_eq!(cnp_out.len(), 100);
    for ((t_in, _), t_out) in cnps.iter().zip(&cnp_out) {
        let lat = t_out - t_in;
        assert!(lat < 2_000, "CNP sent at {t_in} left at {t_out}: {lat} ns");
    }
}

#[test]
fn received_xoff_pauses_exactly_the_lossless_queue_until_xon() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 5 Gb/s of lossless and of lossy traffic toward host 3 for 600 µs.
    write_pcap(&d.join("p0.pcap"), flow(0, 26, 360, 5_000_000_000, 1_000));
    write_pcap(&d.join("p1.pcap"), flow(1, 0, 360, 5_000_000_000, 1_000));
    // Host 3 pauses priority 3 at 100 µs (for the maximum time) and resumes it at 400 µs.
    let mut xoff = [0u8; 64];
    let n = encode_pfc(&mut xoff, host_mac(3), 1 << 3, [0, 0, 0, 65535, 0, 0, 0, 0]);
    let mut xon = [0u8; 64];
    let m = encode_pfc(&mut xon, host_mac(3), 1 << 3, [0; 8]);
    write_pcap(
        &d.join("p3.pcap"),
        vec![
            (0, announce(3, 0).unwrap()),
            (100_000, xoff[..n].to_vec()),
            (400_000, xon[..m].to_vec()),
        ],
    );
    let inputs: Vec<_> = [0u16, 1, 3]
        .iter()
        .map(|&p| (p, d.join(format!("p{p}.pcap"))))
        .collect();
    let o = replay(&default_config(), d, &inputs, 1, false);

    let rx = port(&o, 3);
    assert_eq!(rx.pfc_rx[3], 2);
    assert_eq!(o.snapshot.totals.drops.total(), 0, "{:?}", o.snapshot.totals.drops);
    assert_eq!(rx.queues[3].tx_packets, 360, "lossless frames all delivered after XON");
    assert_eq!(rx.queues[0].tx_packets, 360);
    // The XOFF arrives when its last bit does; paused for 300 µs to within a frame time.
    let paused = rx.paused_ns[3] as i64;
    assert!((paused - 300_000).abs() < 1_000, "paused {paused} ns");
    assert_eq!(
        rx.paused_ns
            .iter()
            .enumerate()
            .filter(|(p, &n)| *p != 3 && n > 0)
            .count(),
        0
    );

    let base = dataplane::tools::gen::BASE_NS;
    let out = roce_frames(&read_pcap(&out_pcap(d, 3)));
    let lossless_in_window = out
        .iter()
        .filter(|(t, _, i)| i.dscp() == Some(26) && (101_000..400_000).contains(&(t - base)))
        .count();
    let lossy_in_window = out
        .iter()
        .filter(|(t, _, i)| i.dscp() == Some(0) && (101_000..400_000).contains(&(t - base)))
        .count();
    assert_eq!(lossless_in_window, 0, "lossless frames left while paused");
    assert!(lossy_in_window > 150, "lossy queue kept sending: {lossy_in_window}");
    let first_after = out
        .iter()
        .filter(|(t, _, i)| i.dscp() == Some(26) && t - base >= 400_000)
        .map(|(t, _, _)| t - base)
        .min()
        .unwrap();
    assert!(first_after < 401_000, "lossless resumed at {first_after}");
}

/// A host that never stops sending XOFF: the watchdog declares a storm after its detection
/// time, drops the stuck lossless queue (and what arrives for it), then restores once the PFC
/// stops. Lossy traffic to the same port is untouched throughout.
#[test]
fn pfc_watchdog_breaks_a_storm_and_restores() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = default_config();
    let wd = cfg.pfc.watchdog.clone().expect("default profile has the watchdog on");
    // Lossless and lossy at 100 Mb/s toward host 3 for one second.
    write_pcap(&d.join("p0.pcap"), flow(0, 26, 11_900, 100_000_000, 1_000));
    write_pcap(&d.join("p1.pcap"), flow(1, 0, 11_900, 100_000_000, 1_000));
    // Host 3 sends XOFF every 500 µs for 300 ms.
    let mut xoff = [0u8; 64];
    let n = encode_pfc(&mut xoff, host_mac(3), 1 << 3, [0, 0, 0, 65535, 0, 0, 0, 0]);
    let storm_end = 300_000_000u64;
    let mut p3 = vec![(0, announce(3, 0).unwrap())];
    p3.extend((1..storm_end / 500_000).map(|i| (i * 500_000, xoff[..n].to_vec())));
    write_pcap(&d.join("p3.pcap"), p3);
    let inputs: Vec<_> = [0u16, 1, 3]
        .iter()
        .map(|&p| (p, d.join(format!("p{p}.pcap"))))
        .collect();
    let o = replay(&cfg, d, &inputs, 1, false);

    let rx = port(&o, 3);
    assert_eq!(rx.watchdog_storms[3], 1, "one storm detected");
    assert_eq!(rx.watchdog_restores[3], 1, "and restored after the PFC stopped");
    let wd_drops = rx.drops.get("pfc_watchdog");
    assert!(wd_drops > 0, "{:?}", rx.drops);
    assert_eq!(rx.queues[0].tx_packets, 11_900, "lossy queue unaffected");
    // Lossless frames: delivered before the storm or after restoration, dropped in between.
    assert_eq!(rx.queues[3].tx_packets + wd_drops, 11_900);
    let base = dataplane::tools::gen::BASE_NS;
    let out = roce_frames(&read_pcap(&out_pcap(d, 3)));
    let lossless: Vec<u64> = out
        .iter()
        .filter(|(_, _, i)| i.dscp() == Some(26))
        .map(|(t, _, _)| t - base)
        .collect();
    let restore_at = storm_end - 500_000 + wd.restoration_ns;
    let during = lossless.iter().filter(|&&t| (600_000..restore_at).contains(&t)).count();
    assert_eq!(during, 0, "lossless frames left while stormed");
    assert!(
        lossless.iter().any(|&t| t < 600_000),
        "lossless traffic flowed before the first XOFF"
    );
    assert!(
        lossless.iter().any(|&t| t > restore_at),
        "lossless traffic flows again after restoration"
    );
    assert!(wd.detection_ns < storm_end);
    assert_eq!(o.snapshot.buffer.used_cells, 0);
}
