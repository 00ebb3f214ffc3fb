//! A port as one shard sees it: one value per port index, so the shard's loop, its sink and its
//! reports ask "what kind of port is this" once, instead of keeping parallel per-port lists (the
//! backends, the emulated peers) that must agree index by index.

use crate::runtime::emulated::EmulatedPort;
use crate::runtime::port_io::PortIo;

/// One port index of the switch, from one shard's side.
pub enum ShardPort {
    /// Another shard owns it: frames for it cross to that shard; nothing is sent here.
    Elsewhere,
    /// This shard's, with its far end a real host or NIC: frames enter the switch as the
    /// backend hands them over.
    Direct(PortIo),
    /// This shard's, with its far end software (a rocegen host, a capture file): an emulated
    /// link and NIC sit between the backend and the switch (`runtime::emulated`).
    Emulated(PortIo, Box<EmulatedPort>),
}

impl ShardPort {
    /// The backend, if this shard owns the port.
    pub fn io(&self) -> Option<&PortIo> {
        match self {
            ShardPort::Elsewhere => None,
            ShardPort::Direct(io) | ShardPort::Emulated(io, _) => Some(io),
        }
    }

    /// The backend, writable, if this shard owns the port.
    pub fn io_mut(&mut self) -> Option<&mut PortIo> {
        match self {
            ShardPort::Elsewhere => None,
            ShardPort::Direct(io) | ShardPort::Emulated(io, _) => Some(io),
        }
    }

    /// Whether this shard owns the port.
    pub fn is_mine(&self) -> bool {
        !matches!(self, ShardPort::Elsewhere)
    }
}

/// What [`crate::runtime::emulated::play_through`] needs of a list of ports: the emulated peer
/// of each index, if it has one. A shard plays its [`ShardPort`]s; tests of the emulated wire
/// alone play bare peers (`Option<EmulatedPort>`) without any backend.
pub trait PeerSlot {
    /// The emulated peer at this index, if any.
    fn peer(&self) -> Option<&EmulatedPort>;
    /// The emulated peer at this index, writable, if any.
    fn peer_mut(&mut self) -> Option<&mut EmulatedPort>;
}

impl PeerSlot for ShardPort {
    fn peer(&self) -> Option<&EmulatedPort> {
        match self {
            ShardPort::Emulated(_, em) => Some(em),
            _ => None,
        }
    }

    fn peer_mut(&mut self) -> Option<&mut EmulatedPort> {
        match self {
            ShardPort::Emulated(_, em) => Some(em),
            _ => None,
        }
    }
}

impl PeerSlot for Option<EmulatedPort> {
    fn peer(&self) -> Option<&EmulatedPort> {
        self.as_ref()
    }

    fn peer_mut(&mut self) -> Option<&mut EmulatedPort> {
        self.as_mut()
    }
}
