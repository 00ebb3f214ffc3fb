//! Transmit by batch (issue 47 item 2) against transmit frame by frame: the same random
//! traffic through two switches, one sending each queue's frames by batch and one through the
//! scheduler frame by frame, must send the same frames (bytes, ECN marks included) out of the
//! same ports at the same times, in the same order, and count the same.
//!
//! The traffic is built to reach every way a batch ends: four ports into one, so queues build
//! up; lossy frames that WRED drops at dequeue and lossless ones it marks; WDRR queues of unequal
//! weights beside a strict one; PFC frames received mid-run that pause the lossless queue;
//! transmit rings with little room; and frames from several ingress ports and PGs, whose
//! releases end a batch.

use dataplane::switch::TxSink;
use dataplane::tools::gen::Flow;
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
    /// A PFC frame for priority 3 received on `port`, pausing its egress for `quanta`.
    Pause { port: usize, quanta: u16 },
    /// Time goes on, then every port transmits.
    Wait { ns: u64 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0u16..4, 0u16..4, prop::sample::select(vec![0u8, 26, 26, 10, 48]), any::<bool>(), 64usize..1500, 1u64..48)
            .prop_map(|(src, dst, dscp, ect, len, count)| Step::Frames { src, dst, dscp, ect, len, count }),
        1 => (0usize..4, 0u16..2000).prop_map(|(port, quanta)| Step::Pause { port, quanta }),
        4 => (0u64..20_000).prop_map(|ns| Step::Wait { ns }),
    ]
}

/// Runs `steps` through a switch sending by batch or not; what it sent and its counters.
fn run(steps: &[Step], room: &[usize], by_batch: bool) -> (Vec<(usize, u64, Vec<u8>)>, String) {
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
    let counters: Vec<String> = (0..4)
        .map(|p| format!("{:?} {:?}", sw.port_counters(p), sw.queue_counters(p)))
        .collect();
    (wire.sent, counters.join("\n"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn batches_send_what_frame_by_frame_sends(
        steps in prop::collection::vec(step(), 1..60),
        room in prop::collection::vec(0usize..40, 0..6),
    ) {
        let (batched, batched_counts) = run(&steps, &room, true);
        let (single, single_counts) = run(&steps, &room, false);
        prop_assert_eq!(batched.len(), single.len(), "frames sent");
        for (i, (b, s)) in batched.iter().zip(&single).enumerate() {
            prop_assert_eq!(b, s, "frame {} of {}", i, batched.len());
        }
        prop_assert_eq!(batched_counts, single_counts);
    }
}

/// The property above is only worth as much as the traffic reaches: one fixed run of the same
/// kind shows it reaches WRED's marks and drops at dequeue and received pauses, and sends the
/// same there too.
#[test]
fn the_traffic_reaches_marks_drops_and_pauses() {
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
        if round % 5 == 0 {
            steps.push(Step::Pause { port: 0, quanta: 500 });
        }
        steps.push(Step::Wait { ns: 3_000 });
    }
    let (sent, counts) = run(&steps, &[], true);
    let (single, single_counts) = run(&steps, &[], false);
    assert!(sent == single, "the two sent different frames");
    assert_eq!(counts, single_counts);
    let field = |name: &str| -> u64 {
        // `name: N` in the counters' Debug text, summed over ports and queues.
        counts
            .split(&format!("{name}: "))
            .skip(1)
            .map(|rest| {
                rest.split(|c: char| !c.is_ascii_digit())
                    .next()
                    .unwrap()
                    .parse::<u64>()
                    .unwrap()
            })
            .sum()
    };
    assert!(field("ecn_marked") > 0, "no ECN mark: {counts}");
    assert!(field("dropped_packets") > 0, "no WRED drop at dequeue: {counts}");
    let to_port0 = sent.iter().filter(|(p, _, _)| *p == 0).count();
    // Host 0 never sends, so its frames flood all ports; port 0 still carries hundreds.
    assert!(to_port0 > 500, "port 0 sent {to_port0}: {counts}");
    let pauses = counts.lines().next().unwrap();
    assert!(
        pauses.contains("pfc_rx: [0, 0, 0, 4"),
        "port 0 heard no pause: {pauses}"
    );
}
