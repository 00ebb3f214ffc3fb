//! Received pauses the switch does not obey (issue 21, item 4): PFC for a priority without PFC
//! (not in `[pfc] priorities`) and 802.3x PAUSE. Before, either paused lossy queue 0 for as long
//! as the peer kept refreshing it (the watchdog covers lossless queues only): a peer could pin
//! half the buffer and drop thousands of frames. Now they are counted (`pause_ignored`, once
//! per frame, on the port they came in on) and ignored, while PFC for a priority with PFC
//! still pauses its queue.

use controlplane::{load_str, Config};
use dataplane::tools::gen::{announce, host_ip, host_mac};
use dataplane::wire::{self, roce::opcode, Ecn, RoceFrameBuilder};
use dataplane::Switch;

const OUT: usize = 2;

/// Three 10G ports; DSCP 0 → queue 0 (lossy), DSCP 24 → queue 3 (PFC).
fn config() -> Config {
    config_with("")
}

/// [`config`] with `out` added to OUT's `[[port]]` table (`pfc = []`).
fn config_with(out: &str) -> Config {
    let text = format!(
        "[port_defaults]\nspeed = \"10G\"\n[[port]]\nid = 0\n[[port]]\nid = 1\n[[port]]\nid = 2\n{out}\n\
         [classify]\ntrust = \"dscp\"\ndefault_tc = 0\ndscp_to_tc = {{ 0 = 0, 24 = 3 }}\n\
         [pfc]\npriorities = [3]\n"
    );
    load_str(&text).unwrap_or_else(|e| panic!("{e}")).config
}

fn frame(dscp: u8, psn: u32) -> Vec<u8> {
    RoceFrameBuilder::new()
        .macs(host_mac(0), host_mac(OUT as u16))
        .ipv4(host_ip(0), host_ip(OUT as u16))
        .dscp(dscp)
        .ecn(Ecn::Ect0)
        .opcode(opcode::RC_SEND_ONLY)
        .dest_qp(100)
        .psn(psn)
        .build_sized(1000)
        .unwrap()
}

/// A switch that has received `pause` (a MAC control frame) on OUT at 1 µs, then a lossy frame
/// (PSN 0) and a lossless one (PSN 3) for OUT at 2 µs; runs for 100 µs: (PSN, departure) of
/// what OUT sent, and the switch.
fn after_pause(pause: &[u8]) -> (Vec<(u32, u64)>, Switch) {
    after_pause_on(&config(), pause)
}

fn after_pause_on(cfg: &Config, pause: &[u8]) -> (Vec<(u32, u64)>, Switch) {
    let mut sw = Switch::new(cfg, 1);
    sw.receive(OUT, &announce(OUT as u16, 0).unwrap(), 0);
    sw.receive(OUT, pause, 1_000);
    sw.receive(0, &frame(0, 0), 2_000);
    sw.receive(0, &frame(24, 3), 2_000);
    let mut sent = Vec::new();
    let mut now = 2_000;
    while now < 100_000 {
        sw.poll(now);
        for p in 0..3 {
            sw.transmit(p, now, &mut |port: usize, f: &[u8], at: u64| {
                if port == OUT {
                    if let Some(bth) = wire::parse(f, usize::MAX).ok().and_then(|i| i.bth(f)) {
                        sent.push((bth.psn(), at));
                    }
                }
            });
        }
        now += 100;
    }
    (sent, sw)
}

fn psns(sent: &[(u32, u64)]) -> Vec<u32> {
    sent.iter().map(|s| s.0).collect()
}

fn pause_ignored(sw: &Switch) -> u64 {
    sw.snapshot(0).ports[OUT].drops.get("pause_ignored")
}

#[test]
fn pfc_for_a_priority_without_pfc_pauses_nothing_and_is_counted() {
    let mut buf = [0u8; 64];
    let n = wire::pfc::encode_pfc(&mut buf, [2, 0, 0, 0, 0, 9], 1 << 0, [65535; 8]);
    let (sent, sw) = after_pause(&buf[..n]);
    assert_eq!(psns(&sent), [0, 3], "queue 0 is not paused: {sent:?}");
    assert!(sent[0].1 < 10_000, "queue 0 sent at once: {sent:?}");
    assert_eq!(pause_ignored(&sw), 1);
    assert_eq!(sw.snapshot(0).ports[OUT].pfc_rx[0], 1, "still counted as received");
}

#[test]
fn an_8023x_pause_pauses_nothing_and_is_counted() {
    let mut buf = [0u8; 64];
    let n = wire::encode_pause(&mut buf, [2, 0, 0, 0, 0, 9], 65535);
    let (sent, sw) = after_pause(&buf[..n]);
    assert_eq!(psns(&sent), [0, 3], "nothing is paused: {sent:?}");
    assert!(sent.iter().all(|s| s.1 < 10_000), "{sent:?}");
    assert_eq!(pause_ignored(&sw), 1);
    assert_eq!(sw.snapshot(0).ports[OUT].pause_rx, 1);
}

/// A PFC frame for priorities 0 and 3: priority 3 (PFC) pauses queue 3 for its 3.4 ms, priority
/// 0 is ignored, and the frame counts once.
#[test]
fn pfc_for_a_priority_with_pfc_still_pauses_its_queue() {
    let mut buf = [0u8; 64];
    let n = wire::pfc::encode_pfc(&mut buf, [2, 0, 0, 0, 0, 9], 1 << 0 | 1 << 3, [65535; 8]);
    let (sent, sw) = after_pause(&buf[..n]);
    assert_eq!(psns(&sent), [0], "queue 3 paused, queue 0 not: {sent:?}");
    assert_eq!(pause_ignored(&sw), 1);
    assert_eq!(sw.snapshot(0).totals.drops.get("pause_ignored"), 1);
}

/// A port whose own `pfc` leaves priority 3 out (SONiC: no `pfc_enable` on that port, issue 45)
/// obeys no PFC for it: its queue 3 sends at once and the frame counts as ignored, while the
/// switch's other ports keep priority 3 lossless.
#[test]
fn a_port_without_pfc_of_its_own_ignores_pfc() {
    let cfg = config_with("pfc = []");
    assert_eq!(cfg.ports[OUT].pfc_enabled, [false; 8]);
    assert!(cfg.ports[0].pfc_enabled[3] && cfg.ports[0].pgs[3].lossless);
    assert!(!cfg.ports[OUT].pgs[3].lossless && cfg.ports[OUT].headroom_bytes[3] == 0);
    let mut buf = [0u8; 64];
    let n = wire::pfc::encode_pfc(&mut buf, [2, 0, 0, 0, 0, 9], 1 << 3, [65535; 8]);
    let (sent, sw) = after_pause_on(&cfg, &buf[..n]);
    assert_eq!(
        psns(&sent),
        [0, 3],
        "queue 3 not paused on a port without PFC: {sent:?}"
    );
    assert!(sent.iter().all(|s| s.1 < 10_000), "{sent:?}");
    assert_eq!(pause_ignored(&sw), 1);
}
