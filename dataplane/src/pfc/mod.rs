//! PFC state machines (802.1Qbb): what the switch sends (XOFF, refresh, XON per ingress PG),
//! what it obeys (pause timers per egress priority) and the watchdog that catches a queue
//! paused for too long (SONiC pfcwd), and the emulated peer that obeys the switch's PFC on a
//! link whose far end is software (peer.rs: replay's peers and `rocesw run`'s emulated links).
//! Frame encoding lives in `wire::pfc`; here is only time.

mod generator;
mod pause;
pub mod peer;
mod request;
mod watchdog;

pub use generator::PfcGenerator;
pub use pause::PauseState;
pub use peer::{EmulatedLink, PeerCounters};
pub use request::PfcRequest;
pub use watchdog::{Watchdog, WatchdogEvent};
