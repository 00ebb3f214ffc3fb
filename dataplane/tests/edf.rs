//! The EDF scheduler through the switch (`egress::sched::edf`): where deadlines come from
//! (queue and DSCP budgets, the IPv6 flow-label tag, rewritten with the time left on the way
//! out), the order each mode sends in, the counters, a paused regulated queue, and live
//! changes with frames queued.

use controlplane::{load_str, Config};
use dataplane::tools::gen::{announce, host_ip, host_mac};
use dataplane::wire::{self, roce::opcode, Ecn, RoceFrameBuilder};
use dataplane::Switch;

const OUT: usize = 3;

/// Four 10G ports; queue 3 regulated (DSCP 24 and 26 → queue 3, 26 with a tighter budget),
/// queue 6 strict, queue 0 WDRR.
fn config(edf: &str) -> Config {
    config_with_scheduler(&format!("scheduler = \"edf\"\n[port_defaults.edf]\n{edf}"))
}

/// The same four ports and classes with `scheduler` (the `scheduler` key and its section, which
/// end `[port_defaults]`).
fn config_with_scheduler(scheduler: &str) -> Config {
    let text = format!(
        "[buffer]\ncell = \"256B\"\nsize = \"4MiB\"\n[port_defaults]\nspeed = \"10G\"\n{scheduler}\n\
         [[port]]\nid = 0\n[[port]]\nid = 1\n[[port]]\nid = 2\n[[port]]\nid = 3\n\
         [classify]\ntrust = \"dscp\"\ndefault_tc = 0\ndscp_to_tc = {{ 0 = 0, 24 = 3, 26 = 3, 48 = 6 }}\n\
         [queue.6]\nsched = \"strict\"\n[pfc]\npriorities = [3]\n"
    );
    load_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}")).config
}

/// Host 1's frames into queue 3: DSCP 24 (the queue's lax budget) and 26 (urgent) in turn,
/// PSN 0 to 3.
fn lax_and_urgent() -> [Vec<u8>; 4] {
    [
        frame(1, 24, 0, None),
        frame(1, 26, 1, None),
        frame(1, 24, 2, None),
        frame(1, 26, 3, None),
    ]
}

/// A RoCE frame from host `src` to the host behind OUT: IPv6 when `label` is Some.
fn frame(src: u16, dscp: u8, psn: u32, label: Option<u32>) -> Vec<u8> {
    let mut b = RoceFrameBuilder::new().macs(host_mac(src), host_mac(OUT as u16));
    b = match label {
        Some(l) => {
            let v6 = |i: u16| {
                let mut a = [0u8; 16];
                a[..2].copy_from_slice(&[0xfd, 0]);
                a[12..].copy_from_slice(&host_ip(i));
                a
            };
            let mut b = b.ipv6(v6(src), v6(OUT as u16));
            b.flow_label = l;
            b
        }
        None => b.ipv4(host_ip(src), host_ip(OUT as u16)),
    };
    b.dscp(dscp)
        .ecn(Ecn::Ect0)
        .opcode(opcode::RC_SEND_ONLY)
        .dest_qp(100 + src as u32)
        .psn(psn)
        .build_sized(1000)
        .unwrap()
}

struct Out {
    /// (psn, departure, flow label) of each data frame OUT sent.
    sent: Vec<(u32, u64, u32)>,
}

fn sink(out: &mut Out) -> impl FnMut(usize, &[u8], u64) + '_ {
    |port, f, at| {
        if port != OUT {
            return;
        }
        let Ok(info) = wire::parse(f, usize::MAX) else { return };
        if let Some(bth) = info.bth(f) {
            let label = if info.l3_kind() == wire::L3Kind::Ipv6 {
                let o = info.l3_offset();
                u32::from(f[o + 1] & 0x0f) << 16 | u32::from(f[o + 2]) << 8 | u32::from(f[o + 3])
            } else {
                0
            };
            out.sent.push((bth.psn(), at, label));
        }
    }
}

fn switch(cfg: &Config) -> Switch {
    let mut sw = Switch::new(cfg, 1);
    sw.receive(OUT, &announce(OUT as u16, 0).unwrap(), 0);
    sw
}

/// Holds OUT's link busy with one best-effort frame, queues `frames` at 1 µs steps behind it,
/// then drains; returns what left.
fn run(sw: &mut Switch, frames: &[Vec<u8>]) -> Out {
    run_with(sw, frames, |_| {}).0
}

/// [`run`], with `between` done to the switch after the frames are queued and before they
/// drain; also returns when the switch went idle.
fn run_with(sw: &mut Switch, frames: &[Vec<u8>], between: impl FnOnce(&mut Switch)) -> (Out, u64) {
    let mut out = Out { sent: Vec::new() };
    sw.receive(0, &frame(0, 0, 999, None), 1_000);
    sw.transmit(OUT, 1_000, &mut sink(&mut out));
    let mut now = 1_000;
    for f in frames {
        now += 1;
        sw.receive(1, f, now);
    }
    between(sw);
    while !sw.is_idle() {
        now = sw.next_event(now).unwrap_or(now + 1).max(now + 1);
        sw.poll(now);
        for p in 0..4 {
            sw.transmit(p, now, &mut sink(&mut out));
        }
    }
    out.sent.retain(|s| s.0 != 999);
    (out, now)
}

fn psns(out: &Out) -> Vec<u32> {
    out.sent.iter().map(|s| s.0).collect()
}

/// A switch on `from` with OUT's link busy, `frames` queued behind it, then changed to `to` and
/// drained: what left (the frame that held the link left out), the switch, the time it idled.
fn change_with_frames_queued(from: &Config, to: &Config, frames: &[Vec<u8>]) -> (Out, Switch, u64) {
    let mut sw = switch(from);
    let (out, now) = run_with(&mut sw, frames, |sw| sw.reconfigure(to).unwrap());
    (out, sw, now)
}

/// DSCP 24 has the queue's 1 ms budget, DSCP 26 its own 10 µs: a late frame (24) queued first
/// holds the urgent ones (26) in fifo2 and not in the other modes; the counters say so.
#[test]
fn dscp_budgets_order_the_queue_by_mode() {
    let frames = [
        frame(1, 24, 0, None),
        frame(1, 26, 1, None),
        frame(1, 26, 2, None),
        frame(1, 24, 3, None),
    ];
    let expect = [
        ("fifo2", vec![0, 1, 2, 3], 1),
        ("take-over", vec![1, 2, 0, 3], 0),
        ("ideal", vec![1, 2, 0, 3], 0),
    ];
    for (mode, order, errors) in expect {
        let cfg = config(&format!(
            "mode = \"{mode}\"\nbudget = {{ 3 = \"1ms\" }}\ndscp_budget = {{ 26 = \"10us\" }}"
        ));
        let mut sw = switch(&cfg);
        let out = run(&mut sw, &frames);
        assert_eq!(psns(&out), order, "{mode}");
        let q = &sw.snapshot(0).ports[OUT].queues[3];
        assert_eq!(q.edf_order_errors, errors, "{mode}: order errors");
        // 1000-byte frames take 0.82 µs each at 10G behind a 0.82 µs frame: the urgent ones
        // make their 10 µs unless a late frame went first... which it never delays that much.
        assert_eq!(q.edf_deadline_misses, 0, "{mode}: misses");
    }
}

/// A frame that leaves after its deadline is counted; an IPv6 flow label is the tag (its unit
/// 1 µs here): it sets the deadline over any budget and leaves rewritten with the time left.
#[test]
fn tags_set_deadlines_and_leave_with_the_time_left() {
    let cfg = config("mode = \"take-over\"\nbudget = { 3 = \"1ms\" }\ntag = \"flow_label\"\ntag_unit = \"1us\"");
    let mut sw = switch(&cfg);
    // Tag 500 µs, then tag 2 µs (overtakes), then an untagged IPv6 frame (queue budget 1 ms),
    // then tag 1 µs: already impossible behind the others, a miss.
    let frames = [
        frame(1, 24, 0, Some(500)),
        frame(1, 24, 1, Some(2)),
        frame(1, 24, 2, Some(0)),
        frame(1, 24, 3, Some(1)),
    ];
    let out = run(&mut sw, &frames);
    assert_eq!(psns(&out), [1, 3, 0, 2]);
    let arrival = |psn: u64| 1_001 + psn;
    for &(psn, at, label) in &out.sent {
        let tag_ns = [500_000, 2_000, 0, 1_000][psn as usize];
        if tag_ns == 0 {
            assert_eq!(label, 0, "an untagged frame stays untagged");
            continue;
        }
        let left = (arrival(psn as u64) + tag_ns).saturating_sub(at);
        assert_eq!(label, left.div_ceil(1000).max(1) as u32, "psn {psn} left at {at} ns");
    }
    let q = &sw.snapshot(0).ports[OUT].queues[3];
    assert_eq!(q.edf_deadline_misses, 1, "psn 3 (1 µs) leaves after a frame and a half");
}

/// A paused regulated queue sends nothing, whichever list its frames are in; the other classes
/// go on; after the pause it sends in EDF order.
#[test]
fn a_paused_regulated_queue_waits() {
    let cfg = config("mode = \"take-over\"\nbudget = { 3 = \"1ms\" }\ndscp_budget = { 26 = \"10us\" }");
    let mut sw = switch(&cfg);
    let mut out = Out { sent: Vec::new() };
    let mut buf = [0u8; 64];
    // Pause priority 3 on OUT for 65535 quanta (3.4 ms at 10G).
    let n = wire::pfc::encode_pfc(&mut buf, [2, 0, 0, 0, 0, 9], 1 << 3, [65535; 8]);
    sw.receive(OUT, &buf[..n], 500);
    for (i, f) in [frame(1, 24, 0, None), frame(1, 26, 1, None), frame(1, 0, 2, None)]
        .iter()
        .enumerate()
    {
        sw.receive(1, f, 1_000 + i as u64);
    }
    let mut now = 1_000;
    let until = 500 + wire::pfc::quanta_to_ns(65535, 10_000_000_000);
    while !sw.is_idle() {
        now = sw.next_event(now).unwrap_or(now + 1).max(now + 1);
        sw.poll(now);
        for p in 0..4 {
            sw.transmit(p, now, &mut sink(&mut out));
        }
    }
    assert_eq!(
        psns(&out),
        [2, 1, 0],
        "best effort first, then the paused queue in EDF order"
    );
    assert!(out.sent[0].1 < until && out.sent[1].1 >= until && out.sent[2].1 >= until);
}

/// Changing the mode, or which queues are regulated, while frames wait keeps every frame and
/// files them again in the order the old rules would have sent them.
#[test]
fn live_changes_refile_queued_frames() {
    let fifo2 = config("mode = \"fifo2\"\nbudget = { 3 = \"1ms\" }\ndscp_budget = { 26 = \"10us\" }");
    let ideal = config("mode = \"ideal\"\nbudget = { 3 = \"1ms\" }\ndscp_budget = { 26 = \"10us\" }");
    let unregulated = config("mode = \"ideal\"\nbudget = { 5 = \"1ms\" }");
    let frames = lax_and_urgent();
    for (from, to, expect) in [
        (&ideal, &fifo2, vec![1, 3, 0, 2]),       // the heap's order, kept as a FIFO
        (&fifo2, &ideal, vec![1, 3, 0, 2]),       // re-sorted by the heap
        (&ideal, &unregulated, vec![1, 3, 0, 2]), // a plain list, in the order EDF had
    ] {
        let (out, sw, now) = change_with_frames_queued(from, to, &frames);
        assert_eq!(psns(&out), expect);
        assert_eq!(sw.snapshot(now).ports[OUT].queues[3].depth_packets, 0);
    }
}

/// A change between EDF and another kind (VL arbitration here) with frames queued keeps every
/// frame: leaving EDF, the regulated queue becomes a plain list in the order EDF would have
/// sent; entering it, the frames queued without deadlines keep their arrival order.
#[test]
fn a_change_of_kind_to_and_from_edf_keeps_queued_frames() {
    let edf = config("mode = \"ideal\"\nbudget = { 3 = \"1ms\" }\ndscp_budget = { 26 = \"10us\" }");
    let vlarb = config_with_scheduler(
        "scheduler = \"vlarb\"\n[port_defaults.vlarb]\nhigh = [[6, 255], [3, 16]]\nlow = [[0, 64]]",
    );
    let frames = lax_and_urgent();
    for (from, to, expect) in [
        (&edf, &vlarb, vec![1, 3, 0, 2]), // EDF's order, kept by the arbiter's FIFO
        (&vlarb, &edf, vec![0, 1, 2, 3]), // arrival order: no deadline was given
    ] {
        let (out, sw, now) = change_with_frames_queued(from, to, &frames);
        assert_eq!(
            psns(&out),
            expect,
            "{} → {}",
            from.ports[OUT].scheduler.name(),
            to.ports[OUT].scheduler.name()
        );
        assert_eq!(sw.snapshot(now).ports[OUT].queues[3].depth_packets, 0);
        assert_eq!(sw.snapshot(now).totals.drops.total(), 0);
    }
}

/// Drives the switch at 1 ms steps to `until` ns with priority 3 paused on OUT all along
/// (a PFC XOFF refreshed every step, no watchdog), receiving each of `arrivals` (time, frame)
/// and taking each of `changes` (time, config) at the step it falls in, then drains: what OUT
/// sent.
fn paused_run(sw: &mut Switch, arrivals: &[(u64, Vec<u8>)], changes: &[(u64, &Config)], until: u64) -> Out {
    let mut out = Out { sent: Vec::new() };
    let mut buf = [0u8; 64];
    let n = wire::pfc::encode_pfc(&mut buf, [2, 0, 0, 0, 0, 9], 1 << 3, [65535; 8]);
    let step = 1_000_000;
    let mut now = 0;
    while now < until {
        now += step;
        sw.receive(OUT, &buf[..n], now);
        for (at, f) in arrivals {
            if *at > now - step && *at <= now {
                sw.receive(1, f, now);
            }
        }
        for (at, c) in changes {
            if *at > now - step && *at <= now {
                sw.reconfigure(c).unwrap();
            }
        }
        sw.poll(now);
        for p in 0..4 {
            sw.transmit(p, now, &mut sink(&mut out));
        }
    }
    assert!(out.sent.is_empty(), "queue 3 was paused all along: {:?}", out.sent);
    while !sw.is_idle() {
        now = sw.next_event(now).unwrap_or(now + 1).max(now + 1);
        sw.poll(now);
        for p in 0..4 {
            sw.transmit(p, now, &mut sink(&mut out));
        }
    }
    out
}

/// A regulated queue paused for 3 s (no watchdog, or one that only alerts) sends its frames in
/// deadline order when the pause ends, and counts each one late: deadlines more than 2^31 ns
/// apart compare as they are. With deadlines modulo 2^32 ns (before), PSN 1 (due at 1 ms) sorted
/// after PSNs 2 and 3 (due at 2.2 s and 2.9 s), and left uncounted.
#[test]
fn frames_paused_for_seconds_leave_in_deadline_order_and_count_late() {
    let cfg = config("mode = \"ideal\"\nbudget = { 3 = \"1ms\" }");
    for (mode, cfg) in [
        ("ideal", cfg),
        ("take-over", config("mode = \"take-over\"\nbudget = { 3 = \"1ms\" }")),
    ] {
        let mut sw = switch(&cfg);
        let arrivals = [
            (1_000_000, frame(1, 24, 1, None)),
            (2_200_000_000, frame(1, 24, 2, None)),
            (2_900_000_000, frame(1, 24, 3, None)),
        ];
        let out = paused_run(&mut sw, &arrivals, &[], 3_000_000_000);
        assert_eq!(psns(&out), [1, 2, 3], "{mode}");
        let q = &sw.snapshot(0).ports[OUT].queues[3];
        assert_eq!(q.edf_deadline_misses, 3, "{mode}: all three left after their deadlines");
    }
}

/// A live change of kind to EDF keeps the waiting frames ahead of the ones that come after,
/// however long the switch has run: frames queued under `sp_wdrr` count as due at their
/// arrival. Before, they got deadline 0, which (modulo 2^32 ns) sorted after newer frames once
/// the clock passed 2^31 ns: PSNs 5-9 left before 0-4.
#[test]
fn a_change_to_edf_after_seconds_keeps_a_flow_in_order() {
    let sp = config_with_scheduler("scheduler = \"sp_wdrr\"");
    for mode in ["ideal", "take-over", "fifo2"] {
        let edf = config(&format!("mode = \"{mode}\"\nbudget = {{ 3 = \"1ms\" }}"));
        let mut sw = switch(&sp);
        let mut arrivals: Vec<_> = (0..5)
            .map(|i| (1_000_000 * (i + 1), frame(1, 24, i as u32, None)))
            .collect();
        arrivals.extend((5..10).map(|i| (2_600_000_000 + 1_000_000 * i, frame(1, 24, i as u32, None))));
        let out = paused_run(&mut sw, &arrivals, &[(2_500_000_000, &edf)], 3_000_000_000);
        assert_eq!(psns(&out), (0..10).collect::<Vec<_>>(), "sp_wdrr → edf ({mode})");
    }
}

/// EDF → `sp_wdrr` → EDF with frames waiting throughout: the frames queued under `sp_wdrr`
/// (due at their arrival, 4 and 5 ms) wait behind the older frames queued under EDF (due at
/// 101 and 102 ms), in the order `sp_wdrr` would have sent them. Before, they got deadline 0
/// and went first (at any uptime): 2, 3, 0, 1, 4.
#[test]
fn edf_to_sp_wdrr_and_back_keeps_a_flow_in_order() {
    let sp = config_with_scheduler("scheduler = \"sp_wdrr\"");
    for mode in ["ideal", "take-over", "fifo2"] {
        let edf = config(&format!("mode = \"{mode}\"\nbudget = {{ 3 = \"100ms\" }}"));
        let mut sw = switch(&edf);
        let arrivals: Vec<_> = [1, 2, 4, 5, 7]
            .iter()
            .enumerate()
            .map(|(psn, ms)| (ms * 1_000_000, frame(1, 24, psn as u32, None)))
            .collect();
        let out = paused_run(&mut sw, &arrivals, &[(3_000_000, &sp), (6_000_000, &edf)], 10_000_000);
        assert_eq!(psns(&out), [0, 1, 2, 3, 4], "edf → sp_wdrr → edf ({mode})");
        assert_eq!(sw.snapshot(0).totals.drops.total(), 0);
    }
}
