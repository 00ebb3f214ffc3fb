//! Where frames and their descriptors live: packet slots allocated once ([`pool`]) and the
//! fixed-capacity descriptor rings the queues are made of ([`ring`]).

pub mod pool;
pub mod ring;
