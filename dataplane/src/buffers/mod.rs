//! Where frames and their descriptors live: packet slots allocated once ([`pool`]), which may
//! hold frames in buffers a port backend owns ([`foreign`], zero copy), and the fixed-capacity
//! descriptor rings the queues are made of ([`ring`]).

pub mod foreign;
pub mod pool;
pub mod ring;
