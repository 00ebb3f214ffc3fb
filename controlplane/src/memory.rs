//! What the switch allocates for a config, computed once here so validation refuses what could
//! not be allocated and `Switch::new` sizes its buffers from the same figures: a config that
//! `rocectl check` passes must not abort a replay or `rocesw run` on allocation.
//!
//! The switch allocates everything at start-up (nothing on the packet path): packet slots
//! (one per frame the buffer can hold, each as large as the largest frame) and one descriptor
//! ring per queue per port, each able to hold every frame the buffer can hold (a queue with a
//! dynamic or no limit may take the whole shared pool). The rings therefore grow with
//! ports × queues × buffer cells, which is what makes a large buffer of small cells expensive.

use crate::model::{Config, NUM_TC};
use crate::units::format_size;

/// Bytes of one queued descriptor (`dataplane::egress::port::Desc`; the dataplane asserts its
/// size does not exceed this at compile time).
pub const DESC_BYTES: u64 = 16;
/// Frames of one burst (the dataplane's `TX_BURST`): each port and queue gets one burst of
/// slots on top of the buffer's cells.
pub const BURST_FRAMES: u64 = 32;
/// The largest `buffer.size` accepted: switch ASICs carry tens of MiB; more is a typo.
pub const MAX_BUFFER_BYTES: u64 = 1 << 30;
/// The most memory a config may make the switch allocate at start-up.
pub const MAX_ALLOC_BYTES: u64 = 4 << 30;

/// The start-up allocation for a config, in its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    /// Packet slots, and descriptors per queue ring: every frame the buffer can hold (each
    /// holds at least one cell) plus a burst per queue per port.
    pub slots: u64,
    /// Bytes of one packet slot: the largest frame, rounded up to a cache line.
    pub slot_bytes: u64,
    /// Packet slots and their free list.
    pub packet_bytes: u64,
    /// Descriptor rings: ports × queues × slots × descriptor.
    pub ring_bytes: u64,
    pub total_bytes: u64,
}

pub fn footprint(cfg: &Config) -> Footprint {
    let cells = cfg.buffer.total_bytes / u64::from(cfg.buffer.cell_bytes.max(1));
    let ports = cfg.ports.len() as u64;
    let slots = cells.saturating_add(BURST_FRAMES * NUM_TC as u64 * ports);
    let max_frame = cfg
        .ports
        .iter()
        .map(|p| u64::from(p.max_frame_bytes))
        .max()
        .unwrap_or(1518);
    let slot_bytes = max_frame.next_multiple_of(64);
    let packet_bytes = slots.saturating_mul(slot_bytes + 4);
    let ring_bytes = (ports * NUM_TC as u64).saturating_mul(slots).saturating_mul(DESC_BYTES);
    Footprint {
        slots,
        slot_bytes,
        packet_bytes,
        ring_bytes,
        total_bytes: packet_bytes.saturating_add(ring_bytes),
    }
}

/// Why a config's allocation is refused, naming the field and the figures; None when it fits.
pub fn refusal(cfg: &Config, size_text: &str) -> Option<String> {
    let f = footprint(cfg);
    if cfg.buffer.total_bytes > MAX_BUFFER_BYTES {
        return Some(format!(
            "buffer.size ({size_text}) is above the largest buffer the switch takes, {}",
            format_size(MAX_BUFFER_BYTES)
        ));
    }
    (f.total_bytes > MAX_ALLOC_BYTES).then(|| {
        format!(
            "buffer.size ({size_text}) in {}B cells over {} ports needs {} MiB at start-up, above \
             the limit of {}: {} packet slots of {} B ({} MiB) and {} queues × {} descriptors \
             ({} MiB); use a smaller buffer.size or a larger buffer.cell",
            cfg.buffer.cell_bytes,
            cfg.ports.len(),
            f.total_bytes >> 20,
            format_size(MAX_ALLOC_BYTES),
            f.slots,
            f.slot_bytes,
            f.packet_bytes >> 20,
            cfg.ports.len() * NUM_TC,
            f.slots,
            f.ring_bytes >> 20
        )
    })
}
