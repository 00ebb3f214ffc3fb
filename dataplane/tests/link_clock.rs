//! The link's clock does not wrap (issue 8): serialisation is summed in picoseconds, but an
//! absolute time in u64 picoseconds ends at 2^64 ps = 18_446_744_073_709_551_615 ps, i.e. at
//! `now` = 18_446_744_073_709_551 ns (213.5 days): from 18_446_744_073_709_552 ns on,
//! `now × 1000` overflowed (a panic in debug builds, wrong departure times in release).

mod common;
use common::*;
use dataplane::tools::gen::announce;
use dataplane::Switch;

/// The first `now`, in ns, whose picosecond value does not fit in a u64.
const WRAP_NS: u64 = u64::MAX / 1000 + 1;

#[test]
fn frames_keep_leaving_at_the_right_times_past_two_to_the_64_picoseconds() {
    assert_eq!(WRAP_NS, 18_446_744_073_709_552);
    let cfg = default_config();
    let mut sw = Switch::new(&cfg, 1);
    let start = WRAP_NS - 400;
    sw.receive(1, &announce(1, 0).unwrap(), start);
    let frames = burst32(0, 1, 26);
    sw.receive_burst(0, frames[..4].iter().map(Vec::as_slice), start);
    let mut times = Vec::new();
    let mut now = start;
    // Called every 100 ns, as a worker polls: the frames go back to back across the boundary.
    while times.len() < 4 && now < start + 10_000 {
        sw.transmit(1, now, &mut |_: usize, f: &[u8], at: u64| {
            if f.len() == 1024 {
                times.push(at)
            }
        });
        now += 100;
    }
    // 1024 B + 24 B of overhead at 25G: 335.36 ns each, summed exactly in picoseconds.
    let expect: Vec<u64> = (0..4).map(|i| start + (i * 335_360) / 1000).collect();
    assert_eq!(times, expect);
    assert!(times[2] >= WRAP_NS, "the run crosses the boundary: {times:?}");
}
