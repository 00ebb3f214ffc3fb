//! Benchmarks and the workloads they share: a switch with the default profile, in-memory
//! ports, and pre-built RoCEv2 frames, so the benches measure the pipeline and nothing else.

pub mod edf;
pub mod rocegen;
pub mod vlarb_sweep;

use controlplane::Config;
use dataplane::tools::gen::{announce, Flow};
use dataplane::wire::Ecn;
use dataplane::Switch;

/// The repository's configs/default.toml, parsed and validated; panics if it does not load (a
/// broken checkout).
pub fn default_config() -> Config {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../configs/default.toml");
    controlplane::load_file(std::path::Path::new(path))
        .expect("configs/default.toml loads")
        .config
}

/// Line rate of the default profile's ports.
pub const LINE_BPS: u64 = 25_000_000_000;

/// A burst of `n` lossless RoCEv2 frames of `len` bytes from host 0 to host 1.
pub fn burst(len: usize, n: usize) -> Vec<Vec<u8>> {
    Flow {
        src: 0,
        dst: 1,
        dscp: 26,
        ecn: Ecn::Ect0,
        qp: 7,
        frame_len: len,
        count: n as u64,
        start_ns: 0,
        rate_bps: LINE_BPS,
    }
    .frames()
    .expect("frames build")
    .into_iter()
    .map(|(_, f)| f)
    .collect()
}

/// A switch on the default profile that has learnt host 1 on port 1 and host 0 on port 0.
pub fn switch() -> Switch {
    let mut sw = Switch::new(&default_config(), 1);
    sw.receive(1, &announce(1, 0).expect("announce"), 0);
    sw.receive(0, &announce(0, 1).expect("announce"), 0);
    let mut sink = |_: usize, _: &[u8], _: u64| {};
    for p in 0..sw.num_ports() {
        sw.transmit(p, 1_000, &mut sink);
    }
    sw
}

/// Virtual time one burst takes on the wire at line rate, so the egress link keeps up.
pub fn burst_time_ns(len: usize, n: usize) -> u64 {
    (dataplane::switch::ser_ps(len, LINE_BPS) * n as u64).div_ceil(1000) + 1
}
