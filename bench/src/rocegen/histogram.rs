//! The latency histogram: `dataplane::nic::histogram`, shared with the fabric.

pub use dataplane::nic::histogram::*;
