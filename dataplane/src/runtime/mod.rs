//! `rocesw run`: the real-time workers and the clock ([`worker`]) and the control socket
//! server ([`control_server`]) that reaches the pipeline between two bursts; [`emulated`] puts
//! an emulated link in front of ports whose far end is software; [`capture`] is the ring a
//! live capture (`rocectl capture`) copies a port's frames into.

pub mod capture;
pub mod control_server;
pub mod coordinator;
pub mod emulated;
pub mod port_io;
pub mod run;
pub mod shard;
pub mod shard_port;
pub mod sink;
pub mod worker;
