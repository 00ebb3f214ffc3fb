//! `rocesw run`: the real-time workers and the clock ([`worker`]) and the control socket
//! server ([`control_server`]) that reaches the pipeline between two bursts.

pub mod control_server;
pub mod run;
pub mod worker;
