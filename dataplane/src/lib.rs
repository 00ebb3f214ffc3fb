//! rocesw's dataplane: the switch pipeline as a library, independent of ports and clock.
//!
//! The folders follow a frame: [`wire`] (views over its bytes) → [`ingress`] (parse, learn,
//! classify, admit) → [`mmu`] (the shared buffer, in cells) → [`egress`] (queues, WRED,
//! schedulers) → out through a port of [`io`]; [`pfc`] holds the flow-control machines both
//! sides use, [`switch`] ties one switch together. Around it: [`runtime`] (real-time workers
//! and the control server), [`replay`] (virtual time over captures), [`counters`] and [`report`]
//! (counters and the reports built from them) and [`tools`] (lab, traffic generator). ARCHITECTURE.md at the repository root is
//! the map.

pub mod buffers;
pub mod conform;
pub mod counters;
pub mod egress;
pub mod fabric;
pub mod ingress;
pub mod io;
pub mod logging;
pub mod mmu;
pub mod nic;
pub mod parts;
pub mod pfc;
pub mod replay;
pub mod report;
pub mod runtime;
pub mod shard;
pub mod switch;
pub mod timeline;
pub mod tools;
pub mod tune;
pub mod wire;

pub use switch::{Switch, TxSink};

/// The shipped default profile, for unit tests.
#[cfg(test)]
pub(crate) fn test_config() -> controlplane::Config {
    controlplane::load_str(include_str!("../../configs/default.toml"))
        .expect("configs/default.toml loads")
        .config
}
