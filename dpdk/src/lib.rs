//! A small safe wrapper over DPDK for rocesw's port backend: the EAL (started once per
//! process), packet mempools, mbufs, and Ethernet ports with burst receive and transmit.
//!
//! The DPDK parts need the `dpdk` feature (and DPDK installed: libdpdk-dev, found with
//! pkg-config). Without it the crate still offers what needs no DPDK: parsing and checking
//! device strings ([`DeviceSpec`]), building EAL arguments ([`EalArgs`]) and the errors,
//! so a config can be validated on any machine.
//!
//! Ownership follows rocesw's I/O contract (DESIGN.md, "Buffers and ports"): a frame lives
//! in an mbuf of its port's pool; [`Mbuf`] owns one; a transmit offers a burst and learns
//! how many frames the driver took, the rest staying with the caller.

mod args;
mod device;
mod error;
pub mod vhost;

pub use args::{EalArgs, NO_HUGE_MEMORY_MB, PROGRAM};
pub use device::{driver_installed, Claim, DeviceSpec, RxSource};
pub use error::{Error, ErrorKind};

#[cfg(feature = "dpdk")]
mod eal;
#[cfg(feature = "dpdk")]
mod mbuf;
#[cfg(feature = "dpdk")]
mod mempool;
#[cfg(feature = "dpdk")]
mod port;

#[cfg(feature = "dpdk")]
pub use eal::{lcore_id, Eal, LcoreGuard};
#[cfg(feature = "dpdk")]
pub use mbuf::{free_raw_bulk, Mbuf, MbufBurst, NoRoom};
#[cfg(feature = "dpdk")]
pub use mempool::{AllocError, Mempool};
#[cfg(feature = "dpdk")]
pub use port::{EthPort, Link, PortConfig, PortInfo, PortStats};

/// The raw bindings, for what the wrapper does not cover.
#[cfg(feature = "dpdk")]
pub use dpdk_sys as sys;
