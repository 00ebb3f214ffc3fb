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

/// The worker's transmit step at `t`: every port, each frame shown to its port's emulated peer
/// as the worker does (`EmulatedPort::from_switch`: PFC pauses the peer); counts what port 0
/// (the receiver's) sent.
fn transmit_all(sw: &mut Switch, emu: &mut [Option<EmulatedPort>], t: u64, to_receiver: &mut u64) -> usize {
    let mut sink = |p: usize, f: &[u8], at: u64| {
        if p == 0 {
            *to_receiver += 1;
        }
        if let Some(em) = emu[p].as_mut() {
            em.from_switch(f, at);
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
    let cfg = controlplane::load_file(&path).unwrap().config;
    let mut sw = Switch::new(&cfg, 1);
    let mut emu: Vec<Option<EmulatedPort>> = cfg.ports.iter().map(|p| Some(EmulatedPort::new(p, &cfg.pfc))).collect();
    let step = emu.iter().flatten().map(EmulatedPort::step_ns).min().unwrap();
    sw.receive(0, &announce(0, 1).unwrap(), 0);
    let frames: Vec<Vec<Vec<u8>>> = (1..4u16)
        .map(|s| {
            Flow {
                src: s,
                dst: 0,
                dscp: 26,
                ecn: dataplane::wire::Ecn::Ect0,
                qp: u32::from(s),
                frame_len: 1024,
                count: 64,
                start_ns: 0,
                rate_bps: host_bps,
            }
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
                    em.accept(&frames[s - 1][(written[s] % 64) as usize], now, sw.classifier());
                }
                written[s] += 1;
            }
        }
        let mut count0 = 0u64;
        play_through(&mut sw, &mut emu, last, now, step, |sw, emu, t| {
            transmit_all(sw, emu, t, &mut count0)
        });
        sw.poll(now);
        transmit_all(&mut sw, &mut emu, now, &mut count0);
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
