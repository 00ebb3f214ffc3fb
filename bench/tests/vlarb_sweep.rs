//! The VL arbitration sweep's figures, checked through the switch over a grid: what the
//! arbiter shows of the paper's properties (bench/README.md, "VL arbitration sweep").
//!
//! With one high entry (weight H) and one low entry (weight L), both VLs backlogged, the
//! arbitration rules give the high VL max(1, ceil(64·Q / c)) packets of c credits for every
//! low packet: the limit alone sets the ratio, and the weights only end a turn that the same
//! entry then starts again. So the ratio is the same at every L and every H (the "stable
//! value" the paper's curves return to at L = nT is reached at every L: no sawtooth).

use rocesw_bench::vlarb_sweep::{predicted_ratio, Sweep};

const QS: [u8; 9] = [0, 1, 2, 3, 5, 6, 8, 10, 14];
const HS: [u8; 5] = [1, 3, 8, 25, 255];
const LS: [u8; 18] = [1, 2, 3, 4, 15, 16, 17, 31, 32, 33, 40, 63, 64, 65, 90, 100, 128, 255];

#[test]
fn the_ratio_is_set_by_the_limit_alone_at_every_weight() {
    for frame in [2048, 1500, 256] {
        let mut sweep = Sweep::new(frame).unwrap();
        for q in QS {
            let expect = predicted_ratio(q, frame).unwrap();
            for h in HS {
                for l in LS {
                    let p = sweep.point(q, h, l, 3, 6).unwrap();
                    assert_eq!(p.low_packets, 6, "Q={q} H={h} L={l} {frame} B");
                    assert_eq!(
                        p.high_packets,
                        6 * expect,
                        "Q={q} H={h} L={l} at {frame} B: {} high per 6 low, expected {expect} each",
                        p.high_packets
                    );
                }
            }
        }
    }
    // Spot values: 2048 B frames are 32 credits, so each 4 KiB of limit is two packets; 1500 B
    // frames are 24 credits, so Q = 1 (64 credits) lets three go, the third overdrawing.
    assert_eq!(predicted_ratio(6, 2048), Some(12));
    assert_eq!(predicted_ratio(1, 1500), Some(3));
    assert_eq!(predicted_ratio(0, 9000), Some(1));
}

/// 255 is unbounded: the low VL never sends while the high VL is backlogged.
#[test]
fn an_unbounded_limit_starves_the_low_vl() {
    let mut sweep = Sweep::new(2048).unwrap();
    let p = sweep.point(255, 16, 255, 0, 4).unwrap();
    assert_eq!(p.low_packets, 0);
    assert!(p.high_packets > 1000, "{p:?}");
    assert!(p.ratio().is_infinite());
    // And back to a bounded limit, live: the low VL gets its turn again.
    let p = sweep.point(2, 16, 255, 2, 4).unwrap();
    assert_eq!((p.high_packets, p.low_packets), (16, 4));
}
