//! The sender (RC segmentation, pacing, PFC honouring, DCQCN reaction point): the NIC model in
//! `dataplane::nic::sender`, shared with the fabric's virtual-time hosts. rocegen's host loop
//! (`host.rs`) passes it the monotonic clock and its socket.

pub use dataplane::nic::pause::PauseRx;
pub use dataplane::nic::sender::*;
