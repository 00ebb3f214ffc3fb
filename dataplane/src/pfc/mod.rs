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
pub use request::PfcRequest;
pub use watchdog::{Watchdog, WatchdogEvent};
