//! The tools above the switch, on top of `controlplane` (the config crate the switch builds
//! on): `rocectl`'s `set` edits and its help check, and `rocectl daemon` with its Prometheus
//! metrics. The `rocectl` binary is `src/bin/rocectl`. This crate owns the async runtime, HTTP,
//! Prometheus and command-line dependencies, so the switch's build carries none of them.

pub mod daemon;
pub mod help;
pub mod metrics;
pub mod set;
