//! rocesw's dataplane: the switch pipeline as a library, independent of ports and clock.
//! ARCHITECTURE.md at the repository root maps the modules.

pub mod classify;
pub mod control;
pub mod counters;
pub mod fdb;
pub mod gen;
pub mod lab;
pub mod mmu;
pub mod packet;
pub mod pfc;
pub mod pipeline;
pub mod pool;
pub mod port;
pub mod ratelimit;
pub mod replay;
pub mod report;
pub mod ring;
pub mod rng;
pub mod sched;
pub mod watermarks;
pub mod worker;
pub mod wred;

pub use pipeline::{Switch, TxSink};

/// The shipped default profile, for unit tests.
#[cfg(test)]
pub(crate) fn test_config() -> controlplane::Config {
    controlplane::load_str(include_str!("../../configs/default.toml"))
        .expect("configs/default.toml loads")
        .config
}
