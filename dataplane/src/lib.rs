//! rocesw's dataplane: the switch pipeline as a library, independent of ports and clock.

pub mod packet;
