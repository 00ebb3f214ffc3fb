//! Emulated links under a late worker, in virtual time: the code `rocesw run` uses
//! (`runtime::emulated::play_through`) with rounds that come milliseconds apart, as on a busy
//! 2-core machine. Hosts write into the ports' receive rings at their own rate whatever the
//! switch does; a lossless incast must lose nothing in the switch however late the rounds.

mod common;

use common::ports_config;
use dataplane::runtime::emulated::{play_through, EmulatedPort};
use dataplane::switch::Switch;
use dataplane::tools::gen::{announce, Flow};

struct Outcome {
    headroom_drops: u64,
    /// Frames a host could not write because its port's store was full (a kernel ring would
    /// drop them): the hosts here do not slow down for PFC, so this is the excess offered.
    host_blocked: u64,
    /// Frames the receiver's port sent.
    sent_to_receiver: u64,
    pfc_frames: u64,
    /// The most headroom any PG used, in cells.
    peak_headroom_cells: u32,
    /// Virtual time played.
    elapsed_ns: u64,
}

/// The switch of the config at `path` (port 0's host announced), an emulated peer on every
/// port, and the shortest step any of them plays a late round in.
fn switch_of(path: &std::path::Path) -> (Switch, Vec<Option<EmulatedPort>>, u64) {
    let cfg = controlplane::load_file(path).unwrap().config;
    let mut sw = Switch::new(&cfg, 1);
    let emu: Vec<Option<EmulatedPort>> = cfg.ports.iter().map(|p| Some(EmulatedPort::new(p, &cfg.pfc))).collect();
    let step = emu.iter().flatten().map(EmulatedPort::step_ns).min().unwrap();
    sw.receive(0, &announce(0, 1).unwrap(), 0);
    (sw, emu, step)
}

/// Host `s`'s lossless flow to host 0: `count` 1 KiB frames at `rate_bps`.
fn sender(s: u16, count: u64, rate_bps: u64) -> Flow {
    Flow {
        src: s,
        dst: 0,
        dscp: 26,
        ecn: dataplane::wire::Ecn::Ect0,
        qp: u32::from(s),
        frame_len: 1024,
        count,
        start_ns: 0,
        rate_bps,
    }
}

/// The worker's transmit step at `t`: every port, each frame shown to its port's emulated peer
/// as the worker does (`EmulatedPort::from_switch`: PFC pauses the peer); counts what port 0
/// (the receiver's) sent. With `pfc_to_hosts`, the PFC the peers pass on to their hosts goes
/// there, by port.
fn transmit_all(
    sw: &mut Switch,
    emu: &mut [Option<EmulatedPort>],
    t: u64,
    to_receiver: &mut u64,
    mut pfc_to_hosts: Option<&mut Vec<(usize, Vec<u8>)>>,
) -> usize {
    use dataplane::runtime::emulated::ToHost;
    let mut sink = |p: usize, f: &[u8], at: u64| {
        if p == 0 {
            *to_receiver += 1;
        }
        if let Some(em) = emu[p].as_mut() {
            let to_host = em.from_switch(f, at);
            if let Some(out) = pfc_to_hosts.as_deref_mut() {
                match to_host {
                    ToHost::Frame if f.get(12..14) == Some(&[0x88, 0x08]) => out.push((p, f.to_vec())),
                    ToHost::Rewritten(b, n) => out.push((p, b[..n].to_vec())),
                    _ => {}
                }
            }
        }
    };
    (0..4).map(|p| sw.transmit(p, t, &mut sink)).sum()
}

/// 3→1 lossless incast of 1 KiB frames at `host_bps` per sender into 500 Mb/s ports, rounds
/// `gaps` apart (cycled) for `rounds` rounds. With `lossless_shaper`, queue 3 is shaped to that
/// rate: the receiver's queue drains so slowly that the senders' PGs stay in XOFF for longer
/// than a pause lasts, and only the switch's refreshes keep the peers paused.
fn incast(host_bps: u64, gaps: &[u64], rounds: usize, lossless_shaper: Option<&str>) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let path = ports_config(dir.path(), |_| "speed = \"500M\"\npeer = \"emulated\"".into(), "");
    if let Some(rate) = lossless_shaper {
        let text = std::fs::read_to_string(&path).unwrap();
        let shaped = text.replacen(
            "[queue.3]",
            &format!("[queue.3]\nshaper = {{ rate = \"{rate}\", burst = \"2KiB\" }}"),
            1,
        );
        // No watchdog: a queue this slow is the point of the test, not a storm.
        let shaped = shaped.replacen("\nwatchdog = {", "\n# watchdog = {", 1);
        assert_ne!(text, shaped);
        std::fs::write(&path, shaped).unwrap();
    }
    let (mut sw, mut emu, step) = switch_of(&path);
    let frames: Vec<Vec<Vec<u8>>> = (1..4u16)
        .map(|s| {
            sender(s, 64, host_bps)
                .frames()
                .unwrap()
                .into_iter()
                .map(|(_, f)| f)
                .collect()
        })
        .collect();
    let frame_ns = 1024 * 8 * 1_000_000_000 / host_bps;
    let mut written = [0u64; 4];
    let mut host_blocked = 0u64;
    let mut last = 0u64;
    let mut now = 1_000u64;
    let mut rx0 = 0u64;
    for r in 0..rounds {
        // What each host wrote since the last round, in its ring (the store, here).
        for s in 1..4 {
            let due = now / frame_ns;
            while written[s] < due {
                let em = emu[s].as_mut().unwrap();
                if em.room() == 0 {
                    host_blocked += 1;
                } else {
                    em.accept(&frames[s - 1][(written[s] % 64) as usize], now, sw.port_maps(s));
                }
                written[s] += 1;
            }
        }
        let mut count0 = 0u64;
        play_through(&mut sw, &mut emu, last, now, step, 0, |sw, emu, t| {
            transmit_all(sw, emu, t, &mut count0, None)
        });
        sw.poll(now);
        transmit_all(&mut sw, &mut emu, now, &mut count0, None);
        rx0 += count0;
        last = now;
        now += gaps[r % gaps.len()];
    }
    let snap = sw.snapshot(now);
    let pfc: u64 = snap.ports.iter().map(|p| p.pfc_tx[3]).sum();
    Outcome {
        headroom_drops: snap.totals.drops.get("headroom_overflow"),
        host_blocked,
        sent_to_receiver: rx0,
        pfc_frames: pfc,
        peak_headroom_cells: snap
            .ports
            .iter()
            .flat_map(|p| &p.pgs)
            .map(|g| g.peak_headroom_cells)
            .max()
            .unwrap_or(0),
        elapsed_ns: last,
    }
}

/// However late the rounds (3 ms, a 50 ms stall among quick rounds, 190 ms stalls as seen on
/// a loaded 2-core lab), the incast loses nothing to headroom and PFC goes out; while the peers
/// hold a backlog the receiver's link stays busy across the gaps (played through, not lost).
/// A frame crosses the wire from when the switch reads it, so after a 190 ms stall the wire
/// was idle for whatever the stores did not already hold: that case keeps ~70 %.
#[test]
fn late_rounds_lose_nothing_and_keep_the_link_busy() {
    for (gaps, least_busy) in [
        (&[3_000_000u64][..], 0.95),
        (&[50_000_000, 20_000, 20_000], 0.95),
        (&[190_000_000, 1_000_000], 0.6),
    ] {
        let o = incast(300_000_000, gaps, 300, None);
        // 500 Mb/s of 1 KiB frames (1024 + 24 bytes on the wire each).
        let line_frames = o.elapsed_ns as f64 * 0.5 / ((1024 + 24) * 8) as f64;
        let busy = o.sent_to_receiver as f64 / line_frames;
        eprintln!(
            "gaps {gaps:?}: headroom drops {}, PFC {}, receiver link {:.1} % busy, hosts blocked {}",
            o.headroom_drops,
            o.pfc_frames,
            busy * 100.0,
            o.host_blocked
        );
        assert_eq!(o.headroom_drops, 0, "gaps {gaps:?}: headroom overflow");
        assert!(
            o.pfc_frames > 0,
            "gaps {gaps:?}: a 900 Mb/s incast into 500 Mb/s must pause"
        );
        assert!(
            busy > least_busy,
            "gaps {gaps:?}: the receiver's link was {:.1} % busy",
            busy * 100.0
        );
    }
}

/// The receiver's queue drains at 20 kb/s, so the senders' PGs stay in XOFF for seconds and
/// the peers stay paused only because the switch refreshes its XOFF every half pause (33 ms at
/// 500 Mb/s). Rounds come 190 ms apart: a late round must play the switch's refresh timers
/// through too. Jumping from one wire event to the next (a peer's pause running out) skipped
/// them: each peer resumed for a moment at every expiry, a few frames each time went into a
/// headroom that this queue never drains, and it overflowed.
#[test]
fn late_rounds_keep_refreshing_pfc_while_the_receiver_barely_drains() {
    let o = incast(300_000_000, &[190_000_000, 1_000_000], 120, Some("20k"));
    eprintln!(
        "headroom drops {}, PFC {}, frames to the receiver {}, peak headroom {} cells",
        o.headroom_drops, o.pfc_frames, o.sent_to_receiver, o.peak_headroom_cells
    );
    assert_eq!(
        o.headroom_drops, 0,
        "headroom overflowed while the peers should stay paused"
    );
    // 11.5 s of virtual time with the senders' PGs in XOFF throughout: a refresh every 33 ms,
    // not one XOFF per port (without the refreshes played through: 195 drops, 534 PFC).
    assert!(
        o.pfc_frames > 3 * 250,
        "PFC frames {}: the XOFF was not refreshed",
        o.pfc_frames
    );
}

/// What [`slow_worker`] saw.
struct SlowWorker {
    /// Frames the hosts wrote that their port's receive ring had no room for (the kernel's
    /// `rx_kernel_drops`).
    ring_drops: u64,
    headroom_drops: u64,
    /// Frames the hosts wrote, and frames port 0 sent the receiver, by the end of the drain.
    written: u64,
    delivered: u64,
    /// The longest real time between two rounds' back-pressure checks, ns.
    longest_round_ns: u64,
    /// How far the wires were behind real time at most, ns.
    most_behind_ns: u64,
}

/// A worker on a machine where every step of the emulated wires costs `step_cost_ns` of real
/// time, more than the wire time a step plays (262 µs at 500 Mb/s), and a round 50 µs more.
/// Three hosts write 1 KiB frames at 300 Mb/s into their ports' receive rings (each holds
/// 500 ms of the port's line rate, as `AfPacketOptions::for_port` sizes them) whenever the PFC
/// they were sent (the switch's, as their NICs pass it on, and their NICs' back-pressure) does
/// not pause them, in real time, for `secs` seconds; then the worker drains. Each round runs
/// the switch at `round_time(last, real, ..)` when `capped`, else at real time, as the worker
/// did before (a late round played its whole gap).
fn slow_worker(step_cost_ns: u64, mut stall_ns: u64, secs: u64, capped: bool) -> SlowWorker {
    use dataplane::nic::pause::PauseRx;
    use dataplane::runtime::emulated::round_time;
    let dir = tempfile::tempdir().unwrap();
    let path = ports_config(dir.path(), |_| "speed = \"500M\"\npeer = \"emulated\"".into(), "");
    let (mut sw, mut emu, step) = switch_of(&path);
    let template: Vec<Vec<u8>> = (1..4u16)
        .map(|s| sender(s, 1, 300_000_000).frames().unwrap().remove(0).1)
        .collect();
    let ring_slots = 500_000_000u64 * 500 / 8_000 / 1518;
    let frame_ns = 1024 * 8 * 1_000_000_000 / 300_000_000;
    let link_bps = 500_000_000;
    let mut hosts: Vec<PauseRx> = vec![PauseRx::default(); 4];
    let mut ring = [0u64; 4];
    let mut next_write = [0u64; 4];
    let (mut written, mut ring_drops, mut delivered) = (0u64, 0u64, 0u64);
    let (mut longest_round_ns, mut most_behind_ns) = (0u64, 0u64);
    let mut real = 1_000u64;
    let mut last = real;
    let mut last_check = real;
    let stop_writing = secs * 1_000_000_000;
    let mut pfc_out = Vec::new();
    loop {
        // The hosts write what is due by now, unless paused (a paused host's pacer waits).
        for s in 1..4 {
            while next_write[s] <= real.min(stop_writing) {
                let at = next_write[s];
                if hosts[s].is_paused(3, at) {
                    next_write[s] = hosts[s].until(3).max(at + 1);
                    continue;
                }
                next_write[s] = at + frame_ns;
                written += 1;
                if ring[s] == ring_slots {
                    ring_drops += 1;
                } else {
                    ring[s] += 1;
                }
            }
        }
        let holding = emu.iter().flatten().any(|em| !em.is_empty());
        if real > stop_writing && !holding && ring.iter().all(|&r| r == 0) && sw.is_idle() {
            break;
        }
        let now = if capped {
            round_time(last, real, step, holding)
        } else {
            real
        };
        most_behind_ns = most_behind_ns.max(real - now);
        // Receive: the rings into the stores.
        for s in 1..4 {
            let em = emu[s].as_mut().unwrap();
            while ring[s] > 0 && em.room() > 0 {
                em.accept(&template[s - 1], now, sw.port_maps(s));
                ring[s] -= 1;
            }
        }
        // The wires, each step costing real time.
        play_through(&mut sw, &mut emu, last, now, step, 0, |sw, emu, t| {
            real += step_cost_ns;
            transmit_all(sw, emu, t, &mut delivered, Some(&mut pfc_out))
        });
        sw.poll(now);
        transmit_all(&mut sw, &mut emu, now, &mut delivered, Some(&mut pfc_out));
        // The round's own step, at `now`.
        real += step_cost_ns;
        for (p, em) in emu.iter_mut().enumerate().skip(1) {
            if let Some((f, n)) = em.as_mut().unwrap().backpressure(real, now) {
                pfc_out.push((p, f[..n].to_vec()));
            }
        }
        for (p, f) in pfc_out.drain(..) {
            if let Ok(mc) = dataplane::wire::decode_mac_control(&f) {
                hosts[p].on_mac_control(mc, real, link_bps);
            }
        }
        longest_round_ns = longest_round_ns.max(real - last_check);
        last_check = real;
        last = now;
        real += 50_000;
        // Once, after a second, the worker is not scheduled for `stall_ns` (a busy machine).
        if stall_ns > 0 && real >= 1_000_000_000 {
            real += stall_ns;
            last_check += stall_ns;
            stall_ns = 0;
        }
        assert!(real < 60_000_000_000, "the worker never drained");
    }
    SlowWorker {
        ring_drops,
        headroom_drops: sw.snapshot(last).totals.drops.get("headroom_overflow"),
        written,
        delivered,
        longest_round_ns,
        most_behind_ns,
    }
}

/// A worker slower than its emulated wires (each 262 µs step costs 500 µs, as rounds measured
/// in the loaded lab did), descheduled once for 150 ms, falls behind real time instead of into
/// longer and longer rounds: every round stays short, so the hosts' back-pressure is refreshed
/// long before their pauses (67 ms at 500 Mb/s) run out, no receive ring overflows, and every
/// frame a host wrote reaches the receiver. Playing each late round's whole gap, as the worker
/// did, the stall grew into rounds of about 300 ms, during which no ring was read and no pause
/// refreshed; on CI's loaded machine such rounds overflowed the rings
/// (`loaded_7_to_1_incast_loses_nothing`: 22 111 `rx_ring` drops).
#[test]
fn a_worker_slower_than_its_wires_falls_behind_and_loses_nothing() {
    let pause_ns = 65_535 * 512 * 1_000_000_000 / 500_000_000;
    let capped = slow_worker(500_000, 150_000_000, 3, true);
    eprintln!(
        "capped: ring drops {}, headroom drops {}, written {}, delivered {}, longest round {} ms, at most {} ms behind",
        capped.ring_drops,
        capped.headroom_drops,
        capped.written,
        capped.delivered,
        capped.longest_round_ns / 1_000_000,
        capped.most_behind_ns / 1_000_000
    );
    assert_eq!(capped.ring_drops, 0);
    assert_eq!(capped.headroom_drops, 0);
    assert_eq!(
        capped.delivered, capped.written,
        "every frame written reached the receiver"
    );
    assert!(
        capped.longest_round_ns < pause_ns / 4,
        "a round took {} ms: the hosts' pauses may run out before the next refresh",
        capped.longest_round_ns / 1_000_000
    );
    assert!(
        capped.most_behind_ns > 100_000_000,
        "the worker kept up: the case is not tested"
    );

    let whole_gaps = slow_worker(500_000, 150_000_000, 3, false);
    eprintln!(
        "whole gaps: ring drops {}, longest round {} ms",
        whole_gaps.ring_drops,
        whole_gaps.longest_round_ns / 1_000_000
    );
    assert!(
        whole_gaps.longest_round_ns > pause_ns,
        "playing whole gaps kept rounds under a pause: this test's machine is not slow enough"
    );
}
