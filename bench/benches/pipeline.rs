//! The whole per-packet pipeline on one core: parse, forward, classify, MMU admit, enqueue,
//! schedule, dequeue (with WRED), release, on bursts of 32 RoCEv2 frames through in-memory
//! ports. `cargo bench -p rocesw-bench --bench pipeline`.

use divan::counter::ItemsCount;
use divan::{AllocProfiler, Bencher};
use rocesw_bench::{burst, burst_time_ns, switch};

#[global_allocator]
static ALLOC: AllocProfiler = AllocProfiler::system();

const BURST: usize = 32;

fn main() {
    divan::main();
}

/// Receive a burst on port 0, transmit it on port 1: every stage of the switch per frame.
#[divan::bench(args = [64, 1024], sample_count = 300, sample_size = 200)]
fn rx_to_tx_burst32(bencher: Bencher, frame_len: usize) {
    let frames = burst(frame_len, BURST);
    let mut sw = switch();
    let step = burst_time_ns(frame_len, BURST);
    let mut now = 1_000_000u64;
    let mut sent = 0u64;
    bencher.counter(ItemsCount::new(BURST)).bench_local(|| {
        now += step;
        sw.receive_burst(0, frames.iter().map(Vec::as_slice), now);
        let mut sink = |_: usize, f: &[u8], _: u64| sent += f.len() as u64;
        let n = sw.transmit(1, now + step, &mut sink);
        debug_assert_eq!(n, BURST);
        divan::black_box(n)
    });
    assert!(sent > 0);
}

/// Parsing alone, for scale.
#[divan::bench(args = [64, 1024], sample_count = 300, sample_size = 200)]
fn parse_burst32(bencher: Bencher, frame_len: usize) {
    let frames = burst(frame_len, BURST);
    bencher.counter(ItemsCount::new(BURST)).bench_local(|| {
        for f in &frames {
            divan::black_box(dataplane::wire::parse(divan::black_box(f), 9216).ok());
        }
    });
}

/// The floor any store-and-forward switch pays: copy each frame into a packet buffer and hand
/// it to a sink. The baseline the pipeline's figures are quoted against (same run).
#[divan::bench(args = [64, 1024], sample_count = 300, sample_size = 200)]
fn copy_only_burst32(bencher: Bencher, frame_len: usize) {
    let frames = burst(frame_len, BURST);
    let mut pool = dataplane::buffers::pool::PacketPool::new(BURST, 2048);
    let mut sent = 0u64;
    bencher.counter(ItemsCount::new(BURST)).bench_local(|| {
        let mut slots = [0u32; BURST];
        for (s, f) in slots.iter_mut().zip(&frames) {
            *s = pool.alloc_copy(f).expect("pool sized for a burst");
        }
        for (s, f) in slots.iter().zip(&frames) {
            sent += divan::black_box(pool.get(*s, f.len())).len() as u64;
            pool.free(*s);
        }
    });
    assert!(sent > 0);
}

/// What a live config change costs the pipeline worker: `Switch::reconfigure` between two
/// bursts, alternating two configs (ECN thresholds and the lossless PG's alpha differ), with
/// frames queued. Forwarding stops for this long per change, so it bounds any dip.
#[divan::bench(sample_count = 200, sample_size = 20)]
fn reconfigure(bencher: Bencher) {
    let a = rocesw_bench::default_config();
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/default.toml")).unwrap();
    let patched = text
        .replace("kmax = \"400KB\"", "kmax = \"200KB\"")
        .replace("alpha = \"1/8\"", "alpha = \"1/4\"");
    let b = controlplane::load_str(&patched).expect("patched config loads").config;
    assert_ne!(a, b, "the two configs differ");
    let mut sw = switch();
    sw.receive_burst(0, burst(1024, BURST).iter().map(Vec::as_slice), 1_000_000);
    let mut flip = false;
    bencher.bench_local(|| {
        flip = !flip;
        sw.reconfigure(if flip { &b } else { &a }).expect("live change");
    });
}
