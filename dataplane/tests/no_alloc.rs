//! The packet path allocates nothing: a counting global allocator watches receive, classify,
//! admit, enqueue, WRED marking, PFC generation, scheduling and transmit at steady state.

mod common;
use common::*;
use dataplane::tools::gen::announce;
use dataplane::Switch;
mod counting_alloc;
use counting_alloc::{ALLOCS, COUNTING};
use std::sync::atomic::Ordering;

/// The counter is global: tests take turns, so one's set-up is not counted in another's run.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn congested_pipeline_does_not_allocate() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut sw = Switch::new(&default_config(), 1);
    let flows: Vec<Vec<Vec<u8>>> = (0..3).map(|s| burst32(s, 3, if s == 2 { 0 } else { 26 })).collect();
    sw.receive(3, &announce(3, 0).unwrap(), 0);
    let mut tx = 0u64;
    let mut sink = |_: usize, _: &[u8], _: u64| tx += 1;
    // 3→1 at line rate for 2000 bursts: queues build, WRED marks, PFC goes out, lossy drops.
    let mut now = 1_000u64;
    let before = ALLOCS.load(Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    for _ in 0..2000 {
        for (s, burst) in flows.iter().enumerate() {
            sw.receive_burst(s, burst.iter().map(Vec::as_slice), now);
        }
        sw.poll(now);
        for p in 0..4 {
            sw.transmit(p, now, &mut sink);
        }
        now += 32 * 336;
    }
    COUNTING.store(false, Ordering::SeqCst);
    let allocs = ALLOCS.load(Ordering::SeqCst) - before;
    let snap = sw.snapshot(now);
    assert!(
        snap.ports[0].pfc_tx[3] > 0 && snap.ports[3].ecn_marked > 0,
        "the run was congested"
    );
    assert!(tx > 0);
    assert_eq!(allocs, 0, "{allocs} allocations on the packet path");
}

/// The same incast through emulated links (`rocesw run`'s software ports): reading into the
/// peers' stores, releasing at line rate, and the PFC they obey allocate nothing either.
#[test]
fn emulated_links_do_not_allocate() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    use dataplane::runtime::emulated::{play_through, EmulatedPort};
    let cfg = default_config();
    let mut sw = Switch::new(&cfg, 1);
    let mut emu: Vec<Option<EmulatedPort>> = cfg.ports.iter().map(|p| Some(EmulatedPort::new(p, &cfg.pfc))).collect();
    let flows: Vec<Vec<Vec<u8>>> = (0..3).map(|s| burst32(s, 3, 26)).collect();
    sw.receive(3, &announce(3, 0).unwrap(), 0);
    let mut now = 1_000u64;
    // A burst of 32 frames per sender per round, at the senders' line rate.
    const ROUND_NS: u64 = 32 * 336;
    let step = emu.iter().flatten().map(EmulatedPort::step_ns).min().unwrap();
    let round = |sw: &mut Switch, emu: &mut [Option<EmulatedPort>], now: u64| {
        for (s, burst) in flows.iter().enumerate() {
            let em = emu[s].as_mut().unwrap();
            for f in burst.iter().take(em.room()) {
                em.accept(f, now, sw.classifier());
            }
        }
        // The round played through as the worker does (`play_through`), then the switch at
        // the round's end.
        let end = now + ROUND_NS;
        let mut to_peers = |sw: &mut Switch, emu: &mut [Option<EmulatedPort>], t: u64| {
            let mut sink = |p: usize, f: &[u8], at: u64| {
                if let Some(em) = emu[p].as_mut() {
                    em.from_switch(f, at);
                }
            };
            (0..4).map(|p| sw.transmit(p, t, &mut sink)).sum()
        };
        play_through(sw, emu, now, end, step, &mut to_peers);
        sw.poll(end);
        to_peers(sw, emu, end);
        // And what the emulated NICs tell their hosts (back-pressure PFC), as the worker does.
        for em in emu.iter_mut().flatten() {
            std::hint::black_box(em.backpressure(end));
        }
    };
    // Warm up until the peers hold frames (their queues are reserved up front regardless).
    for _ in 0..200 {
        round(&mut sw, &mut emu, now);
        now += ROUND_NS;
    }
    let before = ALLOCS.load(Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    for _ in 0..2000 {
        round(&mut sw, &mut emu, now);
        now += ROUND_NS;
    }
    COUNTING.store(false, Ordering::SeqCst);
    let allocs = ALLOCS.load(Ordering::SeqCst) - before;
    let snap = sw.snapshot(now);
    let held: u64 = emu.iter().flatten().map(|e| e.report().held_frames[3]).sum();
    assert!(
        snap.ports[0].pfc_tx[3] > 0 && held > 0,
        "PFC went out and the peers obeyed it: pfc_tx {:?}, held {held}, peers {:?}",
        snap.ports[0].pfc_tx,
        emu.iter().flatten().map(|e| e.report()).collect::<Vec<_>>()
    );
    assert_eq!(snap.totals.drops.get("headroom_overflow"), 0);
    assert_eq!(allocs, 0, "{allocs} allocations on the emulated path");
}

/// The EDF scheduler's path allocates nothing either, in each mode: deadlines from a DSCP
/// budget and from the IPv6 flow-label tag (read at enqueue, rewritten at departure), the
/// take-over list, the heap, order errors and deadline misses counted, under the same incast.
#[test]
fn edf_scheduler_does_not_allocate() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    use controlplane::{EdfConfig, EdfMode, SchedulerConfig};
    use dataplane::tools::gen::{host_ip, host_mac};
    use dataplane::wire::{roce::opcode, Ecn, RoceFrameBuilder};
    let v6 = |i: u16| {
        let mut a = [0u8; 16];
        a[0] = 0xfd;
        a[12..].copy_from_slice(&host_ip(i));
        a
    };
    // Host 1 sends tagged IPv6 frames whose tags alternate between lax and urgent (so the
    // take-over list and the heap work); hosts 0 and 2 IPv4 frames on DSCP 26 and 24.
    let tagged: Vec<Vec<u8>> = (0..32u32)
        .map(|i| {
            let mut b = RoceFrameBuilder::new()
                .macs(host_mac(1), host_mac(3))
                .ipv6(v6(1), v6(3))
                .dscp(26)
                .ecn(Ecn::Ect0)
                .opcode(opcode::RC_SEND_ONLY)
                .dest_qp(9)
                .psn(i);
            b.flow_label = if i % 3 == 0 { 50_000 } else { 200 + i };
            b.build_sized(1024).unwrap()
        })
        .collect();
    for mode in [EdfMode::Ideal, EdfMode::Fifo2, EdfMode::TakeOver] {
        let mut cfg = default_config();
        let mut queue_budget_ns = [None; 8];
        queue_budget_ns[3] = Some(1_000_000);
        let mut dscp_budget_ns = [None; 64];
        dscp_budget_ns[26] = Some(20_000);
        for p in &mut cfg.ports {
            p.scheduler = SchedulerConfig::Edf(Box::new(EdfConfig {
                mode,
                queue_budget_ns,
                dscp_budget_ns,
                tag_unit_ns: Some(16),
            }));
        }
        let mut sw = Switch::new(&cfg, 1);
        let flows = [burst32(0, 3, 26), tagged.clone(), burst32(2, 3, 24)];
        sw.receive(3, &announce(3, 0).unwrap(), 0);
        let mut tx = 0u64;
        let mut sink = |_: usize, _: &[u8], _: u64| tx += 1;
        let mut now = 1_000u64;
        let before = ALLOCS.load(Ordering::SeqCst);
        COUNTING.store(true, Ordering::SeqCst);
        for _ in 0..500 {
            for (s, burst) in flows.iter().enumerate() {
                sw.receive_burst(s, burst.iter().map(Vec::as_slice), now);
            }
            sw.poll(now);
            for p in 0..4 {
                sw.transmit(p, now, &mut sink);
            }
            now += 32 * 336;
        }
        COUNTING.store(false, Ordering::SeqCst);
        let allocs = ALLOCS.load(Ordering::SeqCst) - before;
        let snap = sw.snapshot(now);
        let q = &snap.ports[3].queues[3];
        assert!(tx > 0 && q.tx_packets > 0, "{mode:?}: the regulated queue sent");
        assert!(
            q.edf_deadline_misses > 0,
            "{mode:?}: the run was congested enough to miss deadlines"
        );
        if mode != EdfMode::Ideal {
            assert!(q.edf_order_errors > 0, "{mode:?}: the tags made order errors");
        }
        assert_eq!(allocs, 0, "{mode:?}: {allocs} allocations on the packet path");
    }
}
