//! What the `rocesw` binary offers around the switch: test hosts in network namespaces
//! ([`lab`]) and synthetic RoCEv2 captures ([`gen`]).

pub mod demo;
pub mod gen;
pub mod lab;
