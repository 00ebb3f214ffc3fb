//! PFC state machines (802.1Qbb): what the switch sends (XOFF, refresh, XON per ingress PG),
//! what it obeys (pause timers per priority, also the NIC model's) and the watchdog that
//! catches a queue paused for too long (SONiC pfcwd). Frame encoding lives in `wire::pfc`;
//! here is only time. Imports nothing of ours but `wire` (the emulated peer that obeys the
//! switch's PFC, which needs the link's pacing and the classifier, is `nic::peer`).

mod generator;
mod pause;
mod request;
mod watchdog;

pub use generator::PfcGenerator;
pub use pause::PauseState;
// The one import from above, kept only for runtime/emulated.rs (on the packet path's rework,
// not edited here), which still names `pfc::EmulatedLink`: once it imports
// `crate::nic::peer::EmulatedLink` this line goes and `pfc` depends on `wire` alone.
pub use crate::nic::peer::EmulatedLink;
pub use request::PfcRequest;
pub use watchdog::{Watchdog, WatchdogEvent};
