//! Forwarding rate of the wrapper's burst path, to compare with `dpdk-testpmd
//! --forward-mode=io` on the same virtual devices.
//!
//! Two `net_null` ports on one core: each loop receives a burst from each port and offers it
//! to the other, as testpmd's io forwarding does with two ports. `net_null` receives endless
//! 64-byte frames (allocating them from the pool) and frees what it transmits, so this
//! measures the cost of the burst calls, the mbuf handling and the mempool, the part of the
//! port backend the switch cannot avoid.
//!
//! ```sh
//! cargo run --release -p rocesw-dpdk --features dpdk --example fwd_bench -- [SECONDS] [RUNS]
//! ```
//!
//! Prints each run's rate (frames forwarded per second, both directions together, and per
//! direction) and the median. testpmd on the same devices, for comparison:
//!
//! ```sh
//! timeout -s INT 12 dpdk-testpmd --no-huge -m 512 --no-pci --no-shconf --no-telemetry \
//!   --file-prefix=tp --vdev net_null0 --vdev net_null1 -l 0,1 -- --forward-mode=io \
//!   --stats-period 2 --no-lsc-interrupt -a --nb-cores=1 --total-num-mbufs=16384
//! ```
//! (its `Rx-pps` is per port: the sum over both ports compares with the total here).

use dpdk::{Eal, EalArgs, EthPort, MbufBurst, Mempool, PortConfig};
use std::time::{Duration, Instant};

fn main() {
    let mut args = std::env::args().skip(1);
    let seconds: f64 = args.next().map_or(2.0, |s| s.parse().expect("SECONDS"));
    let runs: usize = args.next().map_or(5, |s| s.parse().expect("RUNS"));

    let eal_args = EalArgs::default_for_vdevs(&["net_null0", "net_null1"])
        .unwrap_or_else(|e| fail(&e))
        .into_vec();
    Eal::init(&eal_args).unwrap_or_else(|e| fail(&e));
    // testpmd's defaults: a cache of 250 per lcore, 1024-descriptor rings, bursts of 32.
    let pool = Mempool::new("fwd_bench", 16383, 256, 2048).unwrap_or_else(|e| fail(&e));
    let cfg = PortConfig::default();
    let mut ports = [open(&cfg, &pool, "net_null0"), open(&cfg, &pool, "net_null1")];
    let mut bursts = [MbufBurst::new(32), MbufBurst::new(32)];

    let mut rates = Vec::new();
    for run in 0..runs {
        let (frames, elapsed) = forward(&mut ports, &mut bursts, Duration::from_secs_f64(seconds));
        let mpps = frames as f64 / elapsed.as_secs_f64() / 1e6;
        println!(
            "run {run}: {frames} frames in {:.3} s: {mpps:.2} Mpps forwarded ({:.2} per direction)",
            elapsed.as_secs_f64(),
            mpps / 2.0
        );
        rates.push(mpps);
    }
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    println!(
        "median of {runs}: {median:.2} Mpps forwarded ({:.2} per direction), one core, \
         64 B, bursts of 32",
        median / 2.0
    );
    for p in &ports {
        let s = p.stats().unwrap_or_else(|e| fail(&e));
        println!(
            "{}: rx {} tx {} missed {} nombuf {}",
            p.name(),
            s.ipackets,
            s.opackets,
            s.imissed,
            s.rx_nombuf
        );
    }
}

fn open(cfg: &PortConfig, pool: &Mempool, name: &str) -> EthPort {
    let mut p = EthPort::open(name).unwrap_or_else(|e| fail(&e));
    p.configure(cfg, pool).unwrap_or_else(|e| fail(&e));
    p.start().unwrap_or_else(|e| fail(&e));
    p
}

/// Forwards port 0 → 1 and 1 → 0 for `duration`; returns frames the drivers took and the
/// time taken. A frame the peer does not take stays in its burst for the next round.
/// Not inlined, so callgrind can count its instructions alone
/// (`valgrind --tool=callgrind --toggle-collect='fwd_bench::forward'`).
#[inline(never)]
fn forward(ports: &mut [EthPort; 2], bursts: &mut [MbufBurst; 2], duration: Duration) -> (u64, Duration) {
    let start = Instant::now();
    let mut frames = 0u64;
    loop {
        for _ in 0..1024 {
            for (from, burst) in bursts.iter_mut().enumerate() {
                let [a, b] = ports;
                let (rx, tx) = if from == 0 { (a, b) } else { (b, a) };
                rx.rx_burst(burst);
                frames += tx.tx_burst(burst) as u64;
            }
        }
        let elapsed = start.elapsed();
        if elapsed >= duration {
            return (frames, elapsed);
        }
    }
}

fn fail(e: &dpdk::Error) -> ! {
    eprintln!("fwd_bench: {e}");
    std::process::exit(2);
}
