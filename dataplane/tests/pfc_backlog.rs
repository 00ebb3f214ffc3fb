//! PFC requests a port's link cannot send yet are not packet drops (issue 10, item b): with a
//! refresh interval far shorter than the link takes to get to them, requests for the same
//! priorities coalesce into the one waiting (the newest state is all the peer needs), and what
//! does not become a frame is counted in `pfc_tx_skipped`, never in `drops`.

mod common;
use common::*;
use dataplane::counters::DropReason;
use dataplane::tools::gen::announce;
use dataplane::wire::{decode_mac_control, MacControl};
use dataplane::Switch;

#[test]
fn refreshes_the_link_has_not_sent_coalesce_and_are_not_drops() {
    let mut cfg = default_config();
    // 0.001 of 1.34 ms: an XOFF refresh every 1.34 us.
    cfg.pfc.refresh_fraction = 0.001;
    let mut sw = Switch::new(&cfg, 1);
    sw.receive(3, &announce(3, 0).unwrap(), 0);
    let mut now = 1_000;
    // Port 0 sends lossless traffic into port 3, which never transmits: PG 3 of port 0 reaches
    // XOFF and stays congested, so its refresh timer keeps firing.
    let b = burst32(0, 3, 26);
    for _ in 0..40 {
        sw.receive_burst(0, b.iter().map(Vec::as_slice), now);
    }
    let rx = sw.port_counters(0).rx_packets;
    // Port 0's link is not offered a transmit (a slow or stalled link): every refresh waits.
    for _ in 0..500 {
        now += 1_400;
        sw.poll(now);
    }
    let c = sw.port_counters(0);
    let dropped: u64 = c.drops.iter().sum();
    let xoffs = sw.pg_counters(0)[3].xoff_sent;
    assert!(xoffs > 100, "the refresh timer fired: {xoffs} XOFFs");
    // The test ignores the XOFFs, so some frames are really dropped (headroom overflow): each
    // of those is a frame that entered; nothing else is a drop.
    let frames_dropped = sw.pg_counters(0)[3].dropped_packets;
    assert!(frames_dropped <= rx);
    assert_eq!(c.drops[DropReason::NoBuffer as usize], 0, "{:?}", c.drops);
    assert_eq!(dropped, frames_dropped, "{rx} frames entered; drops {:?}", c.drops);
    assert_eq!(c.pfc_tx_skipped, xoffs - 1, "all but the first merged into it");
    assert_eq!(sw.snapshot(now).ports[0].pfc_tx_skipped, xoffs - 1);

    // The link sends the one waiting request: one PFC frame, an XOFF of priority 3.
    let mut sent = Vec::new();
    sw.transmit(0, now, &mut |_: usize, f: &[u8], _: u64| sent.push(f.to_vec()));
    assert_eq!(sent.len(), 1, "one PFC frame, not a backlog");
    match decode_mac_control(&sent[0]).unwrap() {
        MacControl::Pfc { enable, times } => {
            assert_eq!(enable, 1 << 3);
            assert_eq!(times[3], cfg.pfc.pause_quanta);
        }
        other => panic!("not a PFC frame: {other:?}"),
    }
}
