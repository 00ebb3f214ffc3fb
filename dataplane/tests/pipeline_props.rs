//! Property tests over the whole pipeline: random traffic in, drain, and every cell, buffer
//! and counter adds up.

mod common;
use common::*;
use dataplane::tools::gen::{host_ip, host_mac, Flow};
use dataplane::wire::Ecn;
use dataplane::wire::{build_cnp, IpPair};
use dataplane::Switch;
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Burst {
    port: usize,
    dst: u16,
    dscp: u8,
    len: usize,
    count: u64,
    gap_ns: u64,
    corrupt: Option<usize>,
}

fn burst() -> impl Strategy<Value = Burst> {
    (
        0usize..4,
        0u16..5,
        prop::sample::select(vec![0u8, 26, 48, 10]),
        78usize..1500,
        1u64..64,
        0u64..2_000,
        prop::option::of(0usize..80),
    )
        .prop_map(|(port, dst, dscp, len, count, gap_ns, corrupt)| Burst {
            port,
            dst,
            dscp,
            len,
            count,
            gap_ns,
            corrupt,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Whatever arrives (unicast, unknown destinations that flood, every class, corrupted
    /// headers), once the queues drain the MMU is empty, every packet buffer is back, and each
    /// received frame is accounted for as transmitted copies or a counted drop.
    #[test]
    fn cells_and_buffers_are_conserved(bursts in prop::collection::vec(burst(), 1..40)) {
        let mut sw = Switch::new(&default_config(), 3);
        let mut now = 0u64;
        let mut tx = 0u64;
        let mut sink = |_: usize, _: &[u8], _: u64| tx += 1;
        for b in &bursts {
            let flow = Flow { src: b.port as u16, dst: b.dst, dscp: b.dscp, ecn: Ecn::Ect0, qp: 1, frame_len: b.len, count: b.count, start_ns: 0, rate_bps: 25_000_000_000 };
            for (_, mut f) in flow.frames().unwrap() {
                if let Some(at) = b.corrupt {
                    f[at % 60] ^= 0x5a;
                }
                sw.receive(b.port, &f, now);
            }
            sw.poll(now);
            for p in 0..4 {
                sw.transmit(p, now, &mut sink);
            }
            now += b.gap_ns;
        }
        // Drain: advance time until idle.
        let mut guard = 0;
        while !sw.is_idle() {
            now = sw.next_event(now).unwrap_or(now + 1).max(now + 1);
            sw.poll(now);
            for p in 0..4 {
                sw.transmit(p, now, &mut sink);
            }
            guard += 1;
            prop_assert!(guard < 1_000_000, "did not drain");
        }
        prop_assert!(sw.buffers_empty(), "{:?}", sw.pool_use());
        prop_assert_eq!(sw.accounting_errors(), Vec::<String>::new());
        prop_assert_eq!(sw.free_buffers(), sw.buffer_capacity());
        let s = sw.snapshot(now);
        for p in &s.ports {
            for q in &p.queues {
                prop_assert_eq!(q.depth_cells, 0);
                prop_assert_eq!(q.depth_packets, 0);
            }
            for g in &p.pgs {
                prop_assert_eq!(g.min_cells + g.shared_cells + g.headroom_cells, 0);
            }
        }
        prop_assert_eq!(s.totals.tx_packets, tx);
        let _ = host_mac(0);
    }

    /// A burst through `receive_burst` is handled exactly as its frames one by one through
    /// `receive`: the burst path reuses one parse result across frames, so mixed bursts
    /// (several senders and destinations, CNPs, floods, corrupted and truncated frames, time
    /// passing between bursts) must give the same frames out, at the same times, and the same
    /// counters. (The FDB caches are the same on both paths; `fdb::tests::recent` covers them.)
    ///
    /// With a small buffer (`tight_kib`: 400 of its cells are reserved minimums and headroom,
    /// the rest is the shared pool), the limits bind: lossy drops at the PG and the queue,
    /// headroom, XOFF and XON, where frames of one burst to one queue, admitted together when
    /// the MMU can show that is the same (`egress::run`), must still decide each frame as
    /// one by one.
    #[test]
    fn bursts_match_frame_by_frame(bursts in prop::collection::vec(prop::collection::vec(burst(), 1..4), 1..24), tight_kib in prop::sample::select(vec![0u64, 128, 192])) {
        let mut cfg = default_config();
        if tight_kib > 0 {
            cfg.buffer.total_bytes = tight_kib * 1024;
        }
        let mut by_burst = Switch::new(&cfg, 5);
        let mut by_frame = Switch::new(&cfg, 5);
        let mut out_burst = Vec::new();
        let mut out_frame = Vec::new();
        let mut now = 0u64;
        for group in &bursts {
            // One burst per ingress port, its frames interleaved from the group's flows.
            let mut per_port: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 4];
            for b in group {
                let flow = Flow { src: b.port as u16, dst: b.dst, dscp: b.dscp, ecn: Ecn::Ect0, qp: 1, frame_len: b.len, count: b.count.min(12), start_ns: 0, rate_bps: 25_000_000_000 };
                for (i, (_, mut f)) in flow.frames().unwrap().into_iter().enumerate() {
                    if b.dscp == 48 && i % 2 == 0 {
                        // CNPs among them: a stale parse result would send a frame after one
                        // to the CNP queue.
                        let ip = IpPair::V4 { src: host_ip(b.port as u16), dst: host_ip(b.dst) };
                        f = build_cnp(host_mac(b.port as u16), host_mac(b.dst), ip, 9);
                    }
                    if let Some(at) = b.corrupt {
                        if i % 3 == 0 {
                            f[at % 60] ^= 0x5a;
                        }
                        if i % 5 == 4 {
                            f.truncate(at % 60);
                        }
                    }
                    let frames = &mut per_port[b.port];
                    let pos = (i * 7 + b.corrupt.unwrap_or(0)) % (frames.len() + 1);
                    frames.insert(pos, f);
                }
            }
            for (port, frames) in per_port.iter().enumerate() {
                by_burst.receive_burst(port, frames.iter().map(Vec::as_slice), now);
                for f in frames {
                    by_frame.receive(port, f, now);
                }
            }
            for (sw, out) in [(&mut by_burst, &mut out_burst), (&mut by_frame, &mut out_frame)] {
                sw.poll(now);
                for p in 0..4 {
                    sw.transmit(p, now, &mut |port: usize, f: &[u8], t: u64| out.push((port, t, f.to_vec())));
                }
            }
            now += group[0].gap_ns * 10;
        }
        prop_assert_eq!(out_burst.len(), out_frame.len());
        prop_assert!(out_burst == out_frame, "different frames out");
        prop_assert_eq!(
            serde_json::to_string(&by_burst.snapshot(now)).unwrap(),
            serde_json::to_string(&by_frame.snapshot(now)).unwrap()
        );
    }
}

/// A sink that takes one frame a `transmit` call: the switch then sends, and returns the
/// frame's cells, one frame a call (the transmit side's frame-by-frame reference).
struct OneAtATime<'a>(&'a mut Out);

impl dataplane::switch::TxSink for OneAtATime<'_> {
    fn transmit(&mut self, port: usize, frame: &[u8], at_ns: u64) {
        self.0.push((port, at_ns, frame.to_vec()));
    }
    fn room(&mut self, _port: usize) -> usize {
        1
    }
}

/// What one `transmit` call sends on `port` (up to `TX_BURST` frames), one frame a call.
fn one_at_a_time(sw: &mut Switch, port: usize, now: u64, out: &mut Out) {
    for _ in 0..dataplane::egress::TX_BURST {
        if sw.transmit(port, now, &mut OneAtATime(out)) == 0 {
            break;
        }
    }
}

/// Frames out: port, departure time, bytes.
type Out = Vec<(usize, u64, Vec<u8>)>;

/// The timers, then every port's transmit at `now`: `by_burst` a call per port, `by_frame`
/// one frame a call.
fn send_both(by_burst: &mut Switch, out_burst: &mut Out, by_frame: &mut Switch, out_frame: &mut Out, now: u64) {
    by_burst.poll(now);
    by_frame.poll(now);
    for p in 0..4 {
        by_burst.transmit(p, now, &mut |port: usize, f: &[u8], t: u64| {
            out_burst.push((port, t, f.to_vec()))
        });
        one_at_a_time(by_frame, p, now, out_frame);
    }
}

/// Bursts into a small buffer that fills, lossless and lossy, small and large frames, from
/// two ports at once to one, against the same frames one by one on both sides (received
/// one a burst, sent one a `transmit` call): where frames of a burst to one queue are
/// admitted together (`egress::run`), a PG's XOFF, its headroom and a lossy drop must still
/// come at the same frame; where frames sent in one call give their ingress cells back
/// together (`Egress::release_sent`), XON must still leave at the same time; and every frame
/// out, PFC frame and counter be the same.
#[test]
fn bursts_into_a_filling_buffer_match_frame_by_frame() {
    use dataplane::tools::gen::announce;
    let (mut xoff_seen, mut lossy_drops_seen) = (false, false);
    for tight_kib in (112..=208).step_by(16) {
        for dscp in [26u8, 0] {
            for len in [64usize, 300, 1500] {
                let mut cfg = default_config();
                cfg.buffer.total_bytes = tight_kib * 1024;
                let mut by_burst = Switch::new(&cfg, 5);
                let mut by_frame = Switch::new(&cfg, 5);
                let (mut out_burst, mut out_frame) = (Vec::new(), Vec::new());
                for sw in [&mut by_burst, &mut by_frame] {
                    for p in 0..4 {
                        sw.receive(p, &announce(p as u16, 0).unwrap(), 0);
                    }
                }
                let flow = |src: u16| Flow {
                    src,
                    dst: 2,
                    dscp,
                    ecn: Ecn::Ect0,
                    qp: 1,
                    frame_len: len,
                    count: 32,
                    start_ns: 0,
                    rate_bps: 25_000_000_000,
                };
                let (a, b): (Vec<_>, Vec<_>) = (flow(0).frames().unwrap(), flow(1).frames().unwrap());
                // Twelve rounds of a burst from each of ports 0 and 1, 2 µs apart: port 2's
                // link carries about half of it, so its queue and the PGs fill.
                for round in 0..12u64 {
                    let now = 1_000 + round * 2_000;
                    for (port, frames) in [(0, &a), (1, &b)] {
                        by_burst.receive_burst(port, frames.iter().map(|(_, f)| f.as_slice()), now);
                        for (_, f) in frames {
                            by_frame.receive(port, f, now);
                        }
                    }
                    send_both(&mut by_burst, &mut out_burst, &mut by_frame, &mut out_frame, now);
                }
                // Drained later: the XONs and the last frames.
                for t in (100_000..3_000_000u64).step_by(20_000) {
                    send_both(&mut by_burst, &mut out_burst, &mut by_frame, &mut out_frame, t);
                }
                let what = format!("{tight_kib} KiB, DSCP {dscp}, {len} B");
                assert!(out_burst == out_frame, "{what}: different frames out");
                let (sb, sf) = (by_burst.snapshot(3_000_000), by_frame.snapshot(3_000_000));
                assert_eq!(
                    serde_json::to_string(&sb).unwrap(),
                    serde_json::to_string(&sf).unwrap(),
                    "{what}"
                );
                let pfc = out_frame.iter().filter(|(_, _, f)| f[12..14] == [0x88, 0x08]).count();
                assert!(
                    sf.ports.iter().all(|p| p.buffer.ingress_cells == 0),
                    "{what}: not drained"
                );
                let drops: u64 = sf.ports.iter().map(|p| p.drops.total()).sum();
                if dscp == 26 {
                    xoff_seen |= pfc > 0;
                } else {
                    lossy_drops_seen |= drops > 0;
                }
            }
        }
    }
    assert!(
        xoff_seen && lossy_drops_seen,
        "the buffer never filled: nothing here tests the limits"
    );
}
