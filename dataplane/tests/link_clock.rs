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

/// Issue 41: back-to-back frames enter replay at the wire's rate, to the picosecond. 20,000
/// RoCEv2 frames captured 1 ns apart into a 100G port leave the switch's other 100G port one
/// every 7.04 ns at 64 B ((64 + 24) × 8 / 100 ns) and 83.84 ns at 1 KiB, on average over the
/// run, not every 8.000 and 84.0 ns (the emulated peer started each frame on a whole
/// nanosecond, losing the picoseconds it carried).
#[test]
fn back_to_back_frames_enter_replay_at_the_wires_rate() {
    for (len, gap_ps) in [(64usize, 7_040u64), (1024, 83_840)] {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = default_config();
        for p in &mut cfg.ports {
            p.speed_bps = 100_000_000_000;
        }
        const N: u64 = 20_000;
        let flow = dataplane::tools::gen::Flow {
            src: 0,
            dst: 1,
            dscp: 26,
            ecn: dataplane::wire::Ecn::Ect0,
            qp: 1,
            frame_len: len,
            count: N,
            start_ns: 1_000,
            rate_bps: u64::MAX,
        };
        let mut f = flow.frames().unwrap();
        for (i, fr) in f.iter_mut().enumerate() {
            fr.0 = 1_000 + i as u64;
        }
        let input0 = dir.path().join("in0.pcap");
        let input1 = dir.path().join("in1.pcap");
        write_pcap(&input0, f);
        write_pcap(&input1, vec![(0, announce(1, 0).unwrap())]);
        let o = replay(&cfg, dir.path(), &[(0, input0), (1, input1)], 1, false);
        let out: Vec<u64> = roce_frames(&read_pcap(&out_pcap(dir.path(), 1)))
            .iter()
            .map(|(t, _, _)| *t)
            .collect();
        assert_eq!(out.len() as u64, N, "every frame left on port 1: {:?}", o.duration_ns);
        eprintln!("{len}: {:?} ... {:?}", &out[..12], &out[out.len() - 5..]);
        let span_ps = (out[out.len() - 1] - out[0]) * 1000;
        let mean_ps = span_ps / (N - 1);
        // Departures are whole nanoseconds: the span is exact to within one.
        assert!(
            mean_ps.abs_diff(gap_ps) * (N - 1) <= 1_000,
            "{len} B: a frame every {mean_ps} ps on average, the wire's gap is {gap_ps} ps"
        );
    }
}
