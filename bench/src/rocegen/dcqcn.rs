//! The DCQCN reaction and notification points: the NIC model in `dataplane::nic::dcqcn`,
//! shared with the fabric's virtual-time hosts.

pub use dataplane::nic::dcqcn::*;
