//! What the switch takes for a CNP (issue 21, item 5): BTH opcode 0x81 in a CNP-sized frame
//! (the UDP datagram is the BTH, 16 reserved bytes and the ICRC: 74 B untagged over IPv4, 78 B
//! tagged, 94 B over IPv6). Before, any frame with that opcode took the CNP queue (strict
//! priority) and its policer: 1400 B "CNPs" starved an incast. A larger frame with the opcode
//! is not a CNP: it is classified as the ordinary traffic of its DSCP (its class, queue, PFC,
//! WRED and shapers, as the sender's other frames), and it passes no CNP policer.

use controlplane::{load_str, Config};
use dataplane::tools::gen::{announce, host_ip, host_mac};
use dataplane::wire::{RoceFrameBuilder, VlanTag};
use dataplane::Switch;

const OUT: usize = 2;
const CNP_QUEUE: usize = 6;
const DATA_QUEUE: usize = 3;

/// Three 10G ports; DSCP 26 → queue 3 (lossless), CNPs → queue 6 (strict) behind a policer
/// that passes one small burst.
fn config() -> Config {
    let text = "[port_defaults]\nspeed = \"10G\"\n[[port]]\nid = 0\n[[port]]\nid = 1\n[[port]]\nid = 2\n\
                [classify]\ntrust = \"dscp\"\ndefault_tc = 0\ndscp_to_tc = { 26 = 3, 48 = 6 }\n\
                [pfc]\npriorities = [3]\n\
                [cnp]\nqueue = 6\npolicer = { rate = \"100M\", burst = \"1KiB\" }\n";
    load_str(text).unwrap_or_else(|e| panic!("{e}")).config
}

fn cnp(dscp: u8) -> RoceFrameBuilder {
    RoceFrameBuilder::cnp(0x100)
        .macs(host_mac(0), host_mac(OUT as u16))
        .ipv4(host_ip(0), host_ip(OUT as u16))
        .dscp(dscp)
}

/// Sends `frames` from port 0 to OUT at 1 µs steps and drains: per OUT queue, frames sent, and
/// the policer drops.
fn run(frames: &[Vec<u8>]) -> ([u64; 8], u64) {
    let mut sw = Switch::new(&config(), 1);
    sw.receive(OUT, &announce(OUT as u16, 0).unwrap(), 0);
    let mut now = 1_000;
    for f in frames {
        sw.receive(0, f, now);
        now += 1_000;
    }
    while !sw.is_idle() {
        now = sw.next_event(now).unwrap_or(now + 1).max(now + 1);
        sw.poll(now);
        for p in 0..3 {
            sw.transmit(p, now, &mut |_: usize, _: &[u8], _: u64| {});
        }
    }
    let snap = sw.snapshot(now);
    let port = &snap.ports[OUT];
    (
        std::array::from_fn(|q| port.queues[q].tx_packets),
        port.drops.get("policer"),
    )
}

#[test]
fn real_cnps_take_the_cnp_queue_in_every_encapsulation() {
    let v4 = cnp(48).build().unwrap();
    let tagged = RoceFrameBuilder {
        vlan: Some(VlanTag {
            pcp: 6,
            dei: false,
            vid: 7,
        }),
        ..cnp(48)
    }
    .build()
    .unwrap();
    let v6 = {
        let a = |i: u16| {
            let mut a = [0u8; 16];
            a[..2].copy_from_slice(&[0xfd, 0]);
            a[12..].copy_from_slice(&host_ip(i));
            a
        };
        cnp(48).ipv6(a(0), a(OUT as u16)).build().unwrap()
    };
    assert_eq!((v4.len(), tagged.len(), v6.len()), (74, 78, 94));
    let (sent, policed) = run(&[v4, tagged, v6]);
    assert_eq!(sent[CNP_QUEUE], 3, "{sent:?}");
    assert_eq!(policed, 0);
}

/// A 1400 B frame with opcode 0x81 (DSCP 26), and a real CNP padded to 1400 B, are not CNPs:
/// they leave from queue 3 as DSCP 26's traffic, all of them; the CNP policer (1 KiB of burst)
/// neither passes nor drops them. Before, they took queue 6 and the policer dropped most.
#[test]
fn frames_larger_than_a_cnp_are_ordinary_traffic_of_their_dscp() {
    let big = cnp(26).build_sized(1400).unwrap();
    let mut padded = cnp(26).build().unwrap();
    padded.resize(1400, 0);
    let frames: Vec<Vec<u8>> = (0..20)
        .map(|i| if i % 2 == 0 { big.clone() } else { padded.clone() })
        .collect();
    let (sent, policed) = run(&frames);
    assert_eq!(sent[DATA_QUEUE], 20, "{sent:?}");
    assert_eq!(sent[CNP_QUEUE], 0, "{sent:?}");
    assert_eq!(policed, 0);
    // The same number of real CNPs in a burst: the policer passes its 1 KiB burst, drops the rest.
    let (sent, policed) = run(&vec![cnp(26).build().unwrap(); 20]);
    assert_eq!(sent[CNP_QUEUE] + policed, 20, "{sent:?}");
    assert!(policed > 0 && sent[DATA_QUEUE] == 0, "{sent:?} {policed}");
}
