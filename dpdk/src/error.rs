//! One error type for everything DPDK refuses, worded for the operator who reads it.
//!
//! DPDK reports failures as a negative errno or through `rte_errno`, and prints its own
//! reasons to the log; neither says which of rocesw's ports was meant or what to change.
//! Every error built here names the device (or the EAL arguments) and ends with what to do.

use std::fmt;

/// What kind of thing went wrong, for callers that react differently (tests, retries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The device string is not `net_<driver><N>[,key=value...]` or a PCI address.
    MalformedDevice,
    /// No installed DPDK driver (PMD) provides the device.
    NoSuchDriver,
    /// The device is not a DPDK Ethernet port in this process (not probed, or closed).
    NoSuchPort,
    /// The port is already open through another handle in this process.
    PortBusy,
    /// `rte_eal_init` failed.
    Eal,
    /// The EAL was not initialised yet, or was already initialised with other arguments.
    EalState,
    /// A PCI device needs hugepages and there are none (or not enough).
    Hugepages,
    /// Creating a mempool failed.
    Mempool,
    /// Configuring, setting up the queues of, starting or stopping a port failed.
    Port,
}

/// An error from the DPDK wrapper: a kind, the errno DPDK gave (if any), and a message
/// that names the device and says what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    errno: Option<i32>,
    message: String,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            errno: None,
            message: message.into(),
        }
    }

    // DPDK's errno comes only from the DPDK parts.
    #[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
    pub(crate) fn with_errno(kind: ErrorKind, errno: i32, message: impl Into<String>) -> Error {
        Error {
            kind,
            errno: Some(errno),
            message: message.into(),
        }
    }

    /// What went wrong, coarsely.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The (positive) errno DPDK reported, when the failure came from DPDK.
    pub fn errno(&self) -> Option<i32> {
        self.errno
    }

    /// The full message (also what `Display` prints).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}
