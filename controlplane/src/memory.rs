//! What the switch allocates for a config, computed once here so validation refuses what could
//! not be allocated and `Switch::new` sizes its buffers from the same figures: a config that
//! `rocectl check` passes must not abort a replay or `rocesw run` on allocation.
//!
//! The switch allocates everything at start-up (nothing on the packet path), and all of it
//! grows with the buffer, not with ports × queues:
//!
//! * packet slots: one per frame the buffer can hold (every queued frame holds at least one
//!   cell), each as large as the largest frame, like a DPDK mempool of max-size mbufs, with its
//!   free-list entry and its record of a backend's buffer (zero copy); plus one burst of
//!   slots per queue per port on top of the buffer's cells (the only part that grows with
//!   ports);
//! * descriptors: one per packet slot, with a 4-byte link (the egress queues are lists linked
//!   through the slots, `dataplane::egress::queues`). A queue with a dynamic or no limit may
//!   take the whole shared pool, but all the queues together hold at most one frame per slot,
//!   so one store serves every queue of every port. (Per-queue rings, before, each as long as
//!   the pool, grew with ports × 8 queues × buffer cells: gigabytes for a 64 MiB buffer of
//!   64 B cells over a few dozen ports.)
//!
//! What makes a large buffer of small cells expensive is now the packet slots: a 64 B cell
//! still costs a max-frame slot.

use crate::model::{Config, NUM_TC};
use crate::units::format_size;

/// Bytes of one queued descriptor (`dataplane::egress::port::Desc`; the dataplane asserts its
/// size does not exceed this at compile time).
pub const DESC_BYTES: u64 = 20;
/// Bytes of the link from one queued descriptor to the next in its queue (a slot number).
pub const LINK_BYTES: u64 = 4;
/// Bytes per slot for EDF's queues (`dataplane::egress::queues`): the arrival number that
/// breaks ties between equal deadlines and a heap link (`ideal` mode), allocated for every slot
/// whatever the ports' schedulers, so a live change to EDF allocates nothing.
pub const EDF_LINK_BYTES: u64 = 8;
/// Bytes per slot for flood groups (`dataplane::ingress::flood`): a slot's group number, and
/// a group record (6 B) with its place in the free list, one per slot since each open group
/// holds a slot.
pub const FLOOD_BYTES: u64 = 4 + 6 + 4;
/// Bytes each packet slot costs besides its frame: its place in the free list (a slot number)
/// and its record of a port backend's buffer it may hold instead of a copy (zero copy: 24 B;
/// `dataplane::buffers::pool` asserts both fit at compile time).
pub const SLOT_BOOKKEEPING_BYTES: u64 = 4 + 24;
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
    /// Packet slots, and descriptors: every frame the buffer can hold (each holds at least one
    /// cell) plus a burst per queue per port.
    pub slots: u64,
    /// Bytes of one packet slot: the largest frame, rounded up to a cache line.
    pub slot_bytes: u64,
    /// Packet slots, their free list and their records of backends' buffers.
    pub packet_bytes: u64,
    /// The descriptor store all egress queues share: slots × (descriptor + link + EDF link +
    /// flood group).
    pub desc_bytes: u64,
    /// `packet_bytes + desc_bytes`: what one shard allocates (each worker owning a port has one).
    pub total_bytes: u64,
}

/// What a config makes one shard allocate at start-up, part by part.
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
    let packet_bytes = slots.saturating_mul(slot_bytes + SLOT_BOOKKEEPING_BYTES);
    let desc_bytes = slots.saturating_mul(DESC_BYTES + LINK_BYTES + EDF_LINK_BYTES + FLOOD_BYTES);
    Footprint {
        slots,
        slot_bytes,
        packet_bytes,
        desc_bytes,
        total_bytes: packet_bytes.saturating_add(desc_bytes),
    }
}

/// Shards `rocesw run` starts for a config: one per worker that owns a port. Each holds the
/// whole buffer's packet slots and descriptors, since any one of them may be asked to queue the
/// whole buffer on its ports.
pub fn shards(cfg: &Config) -> u64 {
    let workers = cfg.run.workers.max(1);
    let mut used: Vec<usize> = cfg.ports.iter().map(|p| p.worker.min(workers - 1)).collect();
    used.sort_unstable();
    used.dedup();
    used.len().max(1) as u64
}

/// Why a config's allocation is refused, naming the field and the figures; None when it fits.
pub fn refusal(cfg: &Config, size_text: &str) -> Option<String> {
    let f = footprint(cfg);
    let shards = shards(cfg);
    let total = f.total_bytes.saturating_mul(shards);
    let each = if shards > 1 {
        format!(
            " ({} MiB for each of its {shards} workers' shards)",
            f.total_bytes >> 20
        )
    } else {
        String::new()
    };
    if cfg.buffer.total_bytes > MAX_BUFFER_BYTES {
        return Some(format!(
            "buffer.size ({size_text}) is above the largest buffer the switch takes, {}",
            format_size(MAX_BUFFER_BYTES)
        ));
    }
    (total > MAX_ALLOC_BYTES).then(|| {
        format!(
            "buffer.size ({size_text}) in {}B cells over {} ports needs {} MiB at start-up{each}, \
             above the limit of {}: {} packet slots of {} B, one per frame the buffer can hold \
             ({} MiB), and their descriptors ({} MiB); use a smaller buffer.size or a larger \
             buffer.cell",
            cfg.buffer.cell_bytes,
            cfg.ports.len(),
            total >> 20,
            format_size(MAX_ALLOC_BYTES),
            f.slots,
            f.slot_bytes,
            f.packet_bytes >> 20,
            f.desc_bytes >> 20
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config of `ports` ports on a `size` buffer in `cell` cells.
    fn config(size: &str, cell: &str, ports: u16) -> String {
        let ports: String = (0..ports).map(|id| format!("[[port]]\nid = {id}\n")).collect();
        format!("[buffer]\nsize = \"{size}\"\ncell = \"{cell}\"\n\n[port_defaults]\nspeed = \"25G\"\n\n{ports}")
    }

    fn load(size: &str, cell: &str, ports: u16) -> Result<Config, String> {
        crate::load_str(&config(size, cell, ports))
            .map(|l| l.config)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_footprint_grows_with_the_buffer_not_with_ports_times_queues() {
        let two = footprint(&load("64MiB", "64B", 2).unwrap());
        let many = footprint(&load("64MiB", "64B", 32).unwrap());
        // 30 more ports add their burst slots (8 queues × 32 frames each), nothing else: the
        // descriptors are one per slot, shared by every queue of every port.
        let burst_slots = 30 * NUM_TC as u64 * BURST_FRAMES;
        assert_eq!(many.slots - two.slots, burst_slots);
        let per_slot = two.total_bytes / two.slots;
        assert_eq!(
            two.total_bytes,
            two.slots * per_slot,
            "a whole number of bytes per slot"
        );
        assert_eq!(many.total_bytes - two.total_bytes, burst_slots * per_slot);
        assert_eq!(
            many.desc_bytes,
            many.slots * (DESC_BYTES + LINK_BYTES + EDF_LINK_BYTES + FLOOD_BYTES)
        );
        // 1 Mi cells and 8192 burst slots: 49 MB of descriptors, EDF links and flood groups
        // (per-queue rings took 4.3 GB).
        assert_eq!(many.slots, (1 << 20) + 8192);
        assert_eq!(many.desc_bytes, 48_611_328);
        assert!(many.total_bytes < 2 << 30, "{many:?}");
    }

    #[test]
    fn a_config_refused_for_its_rings_is_accepted_and_large_buffers_are_still_refused() {
        // 64 MiB in 64 B cells over 32 ports: 1.6 GB of packet slots, and before, 4.3 GB of
        // per-queue descriptor rings on top, refused (over 4 GiB).
        let cfg = load("64MiB", "64B", 32).unwrap_or_else(|e| panic!("should load: {e}"));
        assert!(footprint(&cfg).total_bytes < MAX_ALLOC_BYTES);
        // Above 1 GiB: refused whatever the cell.
        let e = load("2GiB", "4KiB", 2).unwrap_err();
        assert!(
            e.contains("buffer.size (2GiB) is above the largest buffer the switch takes, 1GiB"),
            "{e}"
        );
        // 1 GiB in 64 B cells: its 16 Mi max-frame packet slots alone are over 4 GiB.
        let e = load("1GiB", "64B", 2).unwrap_err();
        assert!(
            e.contains("buffer.size (1GiB) in 64B cells over 2 ports needs")
                && e.contains("16777728 packet slots of 1536 B, one per frame the buffer can hold"),
            "{e}"
        );
        // 1 GiB in large cells fits.
        assert!(load("1GiB", "4KiB", 2).is_ok());
    }
}
