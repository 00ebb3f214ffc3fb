//! Property tests over the whole pipeline: random traffic in, drain, and every cell, buffer
//! and counter adds up.

mod common;
use common::*;
use dataplane::gen::{host_mac, Flow};
use dataplane::packet::Ecn;
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
        prop_assert!(sw.mmu().is_empty(), "{:?}", sw.mmu().pool());
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
}
