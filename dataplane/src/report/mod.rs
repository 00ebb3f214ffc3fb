//! How the switch is read, never on the packet path: snapshots of every counter and buffer
//! figure for summary.json and the control protocol ([`snapshot`]), the watermarks the control
//! thread keeps from the switch's peaks ([`watermarks`]), and the `--stats` lines ([`live`]).
//! The counters themselves are [`crate::counters`], written by the sides that own them.

pub mod live;
pub mod snapshot;
pub mod watermarks;

pub use snapshot::*;
