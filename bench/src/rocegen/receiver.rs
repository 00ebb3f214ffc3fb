//! The receiver and the DCQCN notification point: `dataplane::nic::receiver`, shared with the
//! fabric's virtual-time hosts.

pub use dataplane::nic::receiver::*;
