//! Transmit by batch (issue 47 item 2) against transmit frame by frame: the same random
//! traffic through two switches, one sending each queue's frames by batch and one through the
//! scheduler frame by frame, must send the same frames (bytes, ECN marks included) out of the
//! same ports at the same times, in the same order, and count the same.
//!
//! The traffic is built to reach every way a batch ends: four ports into one, so queues build
//! up; lossy frames that WRED drops at dequeue and lossless ones it marks; frames WRED decided at
//! enqueue (not decided again); CNPs on their strict queue (never WRED's); WDRR queues of
//! unequal weights beside the strict one; PFC frames received mid-run that pause the lossless
//! queue; transmit rings with little room; and frames from several ingress ports and PGs, whose
//! releases end a batch.
//!
//! Both tests were seen to fail on a broken batch (one that ignores the frame budget, one that
//! takes every release into what waits), so they do run the batch path: nothing but
//! `set_transmit_by_batch` tells the two switches apart.

use dataplane::counters::DropReason;
use dataplane::switch::TxSink;
use dataplane::tools::gen::{host_ip, host_mac, Flow};
use dataplane::wire::{self, Ecn};
use dataplane::Switch;
use proptest::prelude::*;

const CONFIG: &str = r#"
[buffer]
cell = "256B"
size = "2MiB"

[port_defaults]
speed = "25G"
cable = "15m"

[[port]]
id = 0
[[port]]
id = 1
[[port]]
id = 2
[[port]]
id = 3

[classify]
trust = "dscp"
default_tc = 0
dscp_to_tc = { 26 = 3, 48 = 6, 10 = 1 }

[cnp]
queue = 6

[pfc]
priorities = [3]

[pg.3]
alpha = "1/8"
headroom = "auto"
xon_offset = "3KiB"

[queue.0]
alpha = 1
sched = "wdrr"
weight = 1
ecn = "lossy"

[queue.1]
alpha = 1
sched = "wdrr"
weight = 3
ecn = "early"

[queue.3]
unlimited = true
sched = "wdrr"
weight = 2
ecn = "roce"

[queue.6]
sched = "strict"

[ecn.roce]
kmin = "4KB"
kmax = "40KB"
pmax = 0.5
mark_at = "dequeue"

[ecn.early]
kmin = "3KB"
kmax = "20KB"
pmax = 0.3
mark_at = "enqueue"

[ecn.lossy]
kmin = "2KB"
kmax = "30KB"
pmax = 0.6
mark_at = "dequeue"
non_ect = "drop"

[fdb]
learning = true
"#;

/// What a switch sent: (port, time, frame), in order.
#[derive(Default)]
struct Wire {
    sent: Vec<(usize, u64, Vec<u8>)>,
    /// Free transmit slots each port reports, taken in turn (a ring that drains unevenly).
    room: Vec<usize>,
    turn: usize,
}

impl TxSink for Wire {
    fn transmit(&mut self, port: usize, frame: &[u8], at_ns: u64) {
        self.sent.push((port, at_ns, frame.to_vec()));
    }
    fn room(&mut self, _port: usize) -> usize {
        if self.room.is_empty() {
            return usize::MAX;
        }
        self.turn += 1;
        self.room[self.turn % self.room.len()]
    }
}

#[derive(Debug, Clone)]
enum Step {
    /// A burst of `count` frames from port `src` to host `dst`.
    Frames {
        src: u16,
        dst: u16,
        dscp: u8,
        ect: bool,
        len: usize,
        count: u64,
    },
    /// `count` CNPs (DSCP 48: the strict queue 6) from host `src` to host `dst`.
    Cnp { src: u16, dst: u16, count: u8 },
    /// A PFC frame for priority 3 received on `port`, pausing its egress for `quanta`.
    Pause { port: usize, quanta: u16 },
    /// Time goes on, then every port transmits.
    Wait { ns: u64 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0u16..4, 0u16..4, prop::sample::select(vec![0u8, 26, 26, 10, 48]), any::<bool>(), 64usize..1500, 1u64..48)
            .prop_map(|(src, dst, dscp, ect, len, count)| Step::Frames { src, dst, dscp, ect, len, count }),
        1 => (0u16..4, 0u16..4, 1u8..8).prop_map(|(src, dst, count)| Step::Cnp { src, dst, count }),
        1 => (0usize..4, 0u16..2000).prop_map(|(port, quanta)| Step::Pause { port, quanta }),
        4 => (0u64..20_000).prop_map(|ns| Step::Wait { ns }),
    ]
}

/// What a run left: the frames sent, every counter and peak as text (to compare), the switch
/// (to read single figures from).
struct Outcome {
    sent: Vec<(usize, u64, Vec<u8>)>,
    counts: String,
    switch: Switch,
}

/// Runs `steps` through a switch sending by batch or not.
fn run(steps: &[Step], room: &[usize], by_batch: bool) -> Outcome {
    let cfg = controlplane::load_str(CONFIG).expect("the test config loads").config;
    let mut sw = Switch::new(&cfg, 7);
    sw.set_transmit_by_batch(by_batch);
    let mut wire = Wire {
        room: room.to_vec(),
        ..Wire::default()
    };
    let mut now = 1_000u64;
    let transmit_all = |sw: &mut Switch, wire: &mut Wire, now: u64| {
        for p in 0..4 {
            sw.transmit(p, now, wire);
        }
    };
    for s in steps {
        match *s {
            Step::Frames {
                src,
                dst,
                dscp,
                ect,
                len,
                count,
            } => {
                let flow = Flow {
                    src,
                    dst,
                    dscp,
                    ecn: if ect { Ecn::Ect0 } else { Ecn::NotEct },
                    qp: 1,
                    frame_len: len,
                    count,
                    start_ns: 0,
                    rate_bps: 25_000_000_000,
                };
                let frames: Vec<Vec<u8>> = flow.frames().unwrap().into_iter().map(|(_, f)| f).collect();
                for chunk in frames.chunks(32) {
                    sw.receive_burst(src as usize, chunk.iter().map(Vec::as_slice), now);
                }
            }
            Step::Cnp { src, dst, count } => {
                let ip = wire::IpPair::V4 {
                    src: host_ip(src),
                    dst: host_ip(dst),
                };
                let cnp = wire::build_cnp(host_mac(src), host_mac(dst), ip, 7);
                sw.receive_burst(src as usize, (0..count).map(|_| cnp.as_slice()), now);
            }
            Step::Pause { port, quanta } => {
                let mut buf = [0u8; 64];
                let mut times = [0u16; 8];
                times[3] = quanta;
                let n = wire::pfc::encode_pfc(&mut buf, [2, 0, 0, 0, 0, 0x99], 1 << 3, times);
                sw.receive(port, &buf[..n.max(60)], now);
            }
            Step::Wait { ns } => {
                now += ns;
                sw.poll(now);
                transmit_all(&mut sw, &mut wire, now);
            }
        }
    }
    // Drain, the rings taking everything.
    wire.room.clear();
    let mut guard = 0;
    while !sw.is_idle() {
        now = sw.next_event(now).unwrap_or(now + 1).max(now + 1);
        sw.poll(now);
        transmit_all(&mut sw, &mut wire, now);
        guard += 1;
        assert!(guard < 1_000_000, "did not drain");
    }
    assert_eq!(sw.accounting_errors(), Vec::<String>::new());
    // Port and queue counters first (the fixed test reads them), then the PGs' and the
    // buffer's peaks: a release counted as sent rather than dropped shows there.
    let counters: Vec<String> = (0..4)
        .map(|p| {
            let peaks: Vec<String> = (0..8)
                .map(|i| format!("{:?} {:?}", sw.pg_use(p, i), sw.queue_use(p, i)))
                .collect();
            format!(
                "{:?} {:?}\n{:?}\n{}",
                sw.port_counters(p),
                sw.queue_counters(p),
                sw.pg_counters(p),
                peaks.join(" ")
            )
        })
        .collect();
    Outcome {
        sent: wire.sent,
        counts: counters.join("\n"),
        switch: sw,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn batches_send_what_frame_by_frame_sends(
        steps in prop::collection::vec(step(), 1..60),
        room in prop::collection::vec(0usize..40, 0..6),
    ) {
        let batched = run(&steps, &room, true);
        let single = run(&steps, &room, false);
        prop_assert_eq!(batched.sent.len(), single.sent.len(), "frames sent");
        for (i, (b, s)) in batched.sent.iter().zip(&single.sent).enumerate() {
            prop_assert_eq!(b, s, "frame {} of {}", i, batched.sent.len());
        }
        prop_assert_eq!(batched.counts, single.counts);
    }
}

/// The property above is only worth as much as the traffic reaches: one fixed run of the same
/// kind shows it reaches WRED's marks and drops at dequeue, marks made at enqueue, CNPs on the
/// strict queue and received pauses, and sends the same there too.
#[test]
fn the_traffic_reaches_marks_drops_cnps_and_pauses() {
    let mut steps = Vec::new();
    for round in 0..20u64 {
        for src in 1..4u16 {
            steps.push(Step::Frames {
                src,
                dst: 0,
                dscp: [0, 26, 10][src as usize - 1],
                ect: src != 1,
                len: 700 + 100 * src as usize,
                count: 32,
            });
        }
        steps.push(Step::Cnp {
            src: 2,
            dst: 0,
            count: 3,
        });
        if round % 5 == 0 {
            steps.push(Step::Pause { port: 0, quanta: 500 });
        }
        steps.push(Step::Wait { ns: 3_000 });
    }
    let batched = run(&steps, &[], true);
    let single = run(&steps, &[], false);
    assert!(batched.sent == single.sent, "the two sent different frames");
    assert_eq!(batched.counts, single.counts);
    let (sw, counts) = (&batched.switch, &batched.counts);
    let port0 = sw.port_counters(0);
    let queues0 = sw.queue_counters(0);
    assert!(queues0[3].ecn_marked > 0, "no mark at dequeue: {counts}");
    assert!(queues0[1].ecn_marked > 0, "no mark at enqueue: {counts}");
    assert!(
        port0.drops[DropReason::Wred as usize] > 0,
        "no WRED drop at dequeue: {counts}"
    );
    assert_eq!(queues0[6].tx_packets, 60, "CNPs sent on the strict queue: {counts}");
    assert_eq!(port0.pfc_rx[3], 4, "pauses heard on port 0: {counts}");
    // Host 0 never sends, so its frames flood all ports; port 0 still carries hundreds.
    let to_port0 = batched.sent.iter().filter(|(p, _, _)| *p == 0).count();
    assert!(to_port0 > 500, "port 0 sent {to_port0}: {counts}");
}
