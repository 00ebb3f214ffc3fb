//! The `rx_to_tx_burst32` workload as a plain program, for instruction counting under
//! callgrind (deterministic on a shared, noisy machine; see bench/README.md and
//! bench/instructions.sh). Usage: pipeline_workload FRAME_LEN BURSTS
use rocesw_bench::{burst, burst_time_ns, switch};

fn main() {
    let mut args = std::env::args().skip(1);
    let len: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(64);
    let bursts: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let frames = burst(len, 32);
    let mut sw = switch();
    let step = burst_time_ns(len, 32);
    let mut now = 1_000_000u64;
    let mut sent = 0u64;
    for _ in 0..bursts {
        now += step;
        sw.receive_burst(0, frames.iter().map(Vec::as_slice), now);
        let mut sink = |_: usize, f: &[u8], _: u64| sent += f.len() as u64;
        sw.transmit(1, now + step, &mut sink);
    }
    println!("{bursts} bursts of 32 x {len} B, {sent} bytes out");
}
