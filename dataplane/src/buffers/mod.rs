//! Where frames live: packet slots allocated once ([`pool`]), which may hold frames in buffers
//! a port backend owns ([`foreign`], zero copy), and a fixed-capacity ring ([`ring`]) for the
//! PFC frames a port waits to send. The queued frames' descriptors are egress state
//! (`egress::queues`: one entry per packet slot).

pub mod foreign;
pub mod pool;
pub mod ring;
