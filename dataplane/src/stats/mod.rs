//! What the switch counts and how it is read: single-writer counters ([`counters`]), snapshots
//! for summary.json and the control plane ([`report`]), and the watermarks the control thread
//! keeps from the switch's peaks ([`watermarks`]). Nothing here runs on the packet path except
//! the counter increments themselves.

pub mod counters;
pub mod live;
pub mod report;
pub mod watermarks;
