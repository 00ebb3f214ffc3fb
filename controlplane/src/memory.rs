//! What the switch allocates for a config, computed once here so that `rocectl check` and
//! `rocesw run` state (and refuse, when the machine cannot hold it) the memory a config needs,
//! and `Switch::new` sizes its buffers from the same figures.
//!
//! Frames are stored by what they take (`dataplane::buffers::pool`):
//!
//! * **heads**: every packet slot has a head of one cell (rounded up to 64 B): a frame that
//!   fits in one cell lives there, addressed by its slot number, as before. There are as many
//!   slots as the buffer has cells (every queued frame holds at least one cell) plus one burst
//!   per queue per port on top (the only part that grows with ports), so the heads take the
//!   buffer's bytes (× the cell's rounding to 64 B: at most 4/3 for 96 B or 144 B cells);
//! * **larger frames** live in buffers of a few size classes ([`size_classes`], each at most a
//!   quarter larger than the frames it holds), carved from 64 KiB chunks as the traffic first
//!   needs them and kept for reuse: memory then follows the largest frames the buffer actually
//!   held, not every frame it could hold × the largest frame. Nothing of it is allocated at
//!   start-up; a new chunk is one allocation per chunk's worth of frames, never one a frame;
//! * **descriptors**: one per packet slot, with a 4-byte link (the egress queues are lists
//!   linked through the slots, `dataplane::egress::queues`), EDF's links and the flood groups.
//!
//! In real time (`rocesw run`) the heads and descriptors are faulted in at start-up: that is
//! [`Footprint::total_bytes`], what `rocectl check` states and compares with what the machine
//! has ([`machine_available`]). In virtual time (replay, fabric, tune, conform) the heads are
//! left to the kernel's lazily mapped pages and handed out lowest first, so memory follows the
//! peak that was actually buffered.

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
/// Bytes each packet slot costs besides its head: its place in the free list (a slot number)
/// and its record of a buffer its frame is in instead of the head: a port backend's (zero
/// copy) or a larger size class's (24 B; `dataplane::buffers::pool` asserts both fit at
/// compile time).
pub const SLOT_BOOKKEEPING_BYTES: u64 = 4 + 24;
/// Frames of one burst (the dataplane's `TX_BURST`): each port and queue gets one burst of
/// slots on top of the buffer's cells.
pub const BURST_FRAMES: u64 = 32;
/// The largest `buffer.size` accepted: switch ASICs carry tens to hundreds of MiB; more is a
/// typo.
pub const MAX_BUFFER_BYTES: u64 = 1 << 30;
/// Bytes of a chunk the larger size classes carve their buffers from.
pub const CHUNK_BYTES: u64 = 64 << 10;

/// Bytes of a slot's head for cells of `cell_bytes`: one cell, rounded up to a cache line.
pub fn head_bytes(cell_bytes: u32) -> u64 {
    u64::from(cell_bytes.max(1)).next_multiple_of(64)
}

/// The buffer sizes frames longer than a head are kept in, smallest first: multiples of 64,
/// each at most a quarter (or 64 B) larger than the one below, the last `max_frame` rounded
/// up to 64. A frame goes to the smallest that holds it.
pub fn size_classes(head: u64, max_frame: u64) -> Vec<u64> {
    let top = max_frame.next_multiple_of(64);
    let mut sizes = Vec::new();
    let mut s = head;
    while s < top {
        s = (s + 64).max((s + s / 4) / 64 * 64).min(top);
        sizes.push(s);
    }
    sizes
}

/// The start-up allocation for a config, in its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    /// Packet slots, and descriptors: every frame the buffer can hold (each holds at least one
    /// cell) plus a burst per queue per port.
    pub slots: u64,
    /// The largest frame a slot takes, rounded up to a cache line.
    pub slot_bytes: u64,
    /// Bytes of one slot's head: one cell, rounded up to a cache line.
    pub head_bytes: u64,
    /// The slots' heads, their free list and their records of buffers elsewhere.
    pub packet_bytes: u64,
    /// The descriptor store all egress queues share: slots × (descriptor + link + EDF link +
    /// flood group).
    pub desc_bytes: u64,
    /// `packet_bytes + desc_bytes`: what one shard allocates and faults in at start-up in real
    /// time (each worker owning a port has one).
    pub total_bytes: u64,
    /// What one shard touches at start-up in virtual time, before any frame: everything but
    /// the heads, which fill as frames arrive.
    pub fixed_bytes: u64,
    /// The most the larger size classes can grow to, if the buffer is in turn filled with
    /// frames of each class (a class keeps its buffers for reuse).
    pub large_most_bytes: u64,
}

/// The most frames of each size class (smallest first) the buffer can hold at once: a class
/// holds frames longer than the class below it, so at least that many bytes' cells each (plus
/// a burst per queue per port, at most the slots). `rocesw run` grows each class to this at
/// start-up, so that no frame allocates on the packet path.
pub fn class_frames(cfg: &Config) -> Vec<u64> {
    let cell = u64::from(cfg.buffer.cell_bytes.max(1));
    let cells = cfg.buffer.total_bytes / cell;
    let burst = BURST_FRAMES * NUM_TC as u64 * cfg.ports.len() as u64;
    let slots = cells.saturating_add(burst);
    let max_frame = cfg
        .ports
        .iter()
        .map(|p| u64::from(p.max_frame_bytes))
        .max()
        .unwrap_or(1518);
    let head = head_bytes(cfg.buffer.cell_bytes);
    let mut below = head;
    (size_classes(head, max_frame).into_iter())
        .map(|size| {
            let frames = (cells / (below + 1).div_ceil(cell)).saturating_add(burst).min(slots);
            below = size;
            frames
        })
        .collect()
}

/// What a config makes one shard allocate at start-up, part by part.
pub fn footprint(cfg: &Config) -> Footprint {
    let cell = u64::from(cfg.buffer.cell_bytes.max(1));
    let cells = cfg.buffer.total_bytes / cell;
    let ports = cfg.ports.len() as u64;
    let burst = BURST_FRAMES * NUM_TC as u64 * ports;
    let slots = cells.saturating_add(burst);
    let max_frame = cfg
        .ports
        .iter()
        .map(|p| u64::from(p.max_frame_bytes))
        .max()
        .unwrap_or(1518);
    let slot_bytes = max_frame.next_multiple_of(64);
    let head = head_bytes(cfg.buffer.cell_bytes);
    let packet_bytes = slots.saturating_mul(head + SLOT_BOOKKEEPING_BYTES);
    let desc_bytes = slots.saturating_mul(DESC_BYTES + LINK_BYTES + EDF_LINK_BYTES + FLOOD_BYTES);
    // A class holds frames longer than the class below it, so at least that many bytes'
    // cells each: the buffer holds at most cells / that many of them (plus the bursts).
    let large_most_bytes = (size_classes(head, max_frame).into_iter())
        .zip(class_frames(cfg))
        .map(|(size, frames)| {
            let chunk = CHUNK_BYTES.max(size) / size * size;
            (frames * size).next_multiple_of(chunk)
        })
        .fold(0u64, u64::saturating_add);
    Footprint {
        slots,
        slot_bytes,
        head_bytes: head,
        packet_bytes,
        desc_bytes,
        total_bytes: packet_bytes.saturating_add(desc_bytes),
        fixed_bytes: slots.saturating_mul(SLOT_BOOKKEEPING_BYTES).saturating_add(desc_bytes),
        large_most_bytes,
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

/// Why a config's buffer is refused whatever the machine, naming the field; None when it is
/// within what a switch carries.
pub fn refusal(cfg: &Config, size_text: &str) -> Option<String> {
    (cfg.buffer.total_bytes > MAX_BUFFER_BYTES).then(|| {
        format!(
            "buffer.size ({size_text}) is above the largest buffer the switch takes, {}",
            format_size(MAX_BUFFER_BYTES)
        )
    })
}

/// What `rocesw run` allocates at start-up for a config, all shards together, in words: the
/// figure `rocectl check` states.
pub fn statement(cfg: &Config) -> String {
    let f = footprint(cfg);
    let shards = shards(cfg);
    let each = if shards > 1 {
        format!(
            " ({} MiB for each of its {shards} workers' shards)",
            f.total_bytes.saturating_add(f.large_most_bytes) >> 20
        )
    } else {
        String::new()
    };
    format!(
        "needs {} MiB at start-up{each}: {} packet slots with {} B heads ({} MiB, the buffer's \
         {} MiB in {} B cells) and their descriptors ({} MiB), and buffers of each size class \
         for the frames longer than a head, as many as the buffer can hold ({} MiB; replay and \
         the simulations grow them as the traffic needs them)",
        f.total_bytes.saturating_add(f.large_most_bytes).saturating_mul(shards) >> 20,
        f.slots,
        f.head_bytes,
        f.packet_bytes >> 20,
        cfg.buffer.total_bytes >> 20,
        cfg.buffer.cell_bytes,
        f.desc_bytes >> 20,
        f.large_most_bytes.saturating_mul(shards) >> 20
    )
}

/// Why the machine cannot start a config in real time, with the figures, given the bytes it
/// has available (`machine_available`); None when it can.
pub fn machine_refusal(cfg: &Config, available: u64) -> Option<String> {
    let f = footprint(cfg);
    let need = f
        .total_bytes
        .saturating_add(f.large_most_bytes)
        .saturating_mul(shards(cfg));
    (need > available).then(|| {
        format!(
            "the config {}, above the {} MiB this machine has available; use a smaller \
             buffer.size, a larger buffer.cell or fewer workers",
            statement(cfg),
            available >> 20
        )
    })
}

/// The memory this machine (or the control group it runs in) has available for a new
/// process: /proc/meminfo's MemAvailable, capped by the cgroup's limit less its use. None
/// where neither can be read.
pub fn machine_available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find_map(|l| l.strip_prefix("MemAvailable:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb << 10)
    });
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
    };
    let cgroup = read("/sys/fs/cgroup/memory.max")
        .map(|max| max.saturating_sub(read("/sys/fs/cgroup/memory.current").unwrap_or(0)))
        .or_else(|| {
            read("/sys/fs/cgroup/memory/memory.limit_in_bytes")
                .map(|max| max.saturating_sub(read("/sys/fs/cgroup/memory/memory.usage_in_bytes").unwrap_or(0)))
        });
    match (meminfo, cgroup) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
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
    fn heads_take_the_buffers_bytes_and_only_the_machine_refuses_a_large_one() {
        // An SN5600's pools (ingress lossless + egress lossless, 291,872,832 B) in 192 B cells
        // over 64 ports: refused before (13.4 GiB of 9152 B slots); now its heads are its bytes.
        let cfg = load("291872832B", "192B", 64).unwrap_or_else(|e| panic!("should load: {e}"));
        let f = footprint(&cfg);
        let cells = 291_872_832 / 192;
        assert_eq!(f.slots, cells + 64 * 8 * 32);
        assert_eq!(f.head_bytes, 192);
        assert!(f.packet_bytes <= 291_872_832 * 3 / 2, "{f:?}");
        assert!(f.total_bytes < 2 * 291_872_832, "{f:?}");
        // Heads round a cell up to a cache line: 144 B cells take 192 B heads (4/3).
        assert_eq!(footprint(&load("1MiB", "144B", 2).unwrap()).head_bytes, 192);
        // Above 1 GiB: refused whatever the cell.
        let e = load("2GiB", "4KiB", 2).unwrap_err();
        assert!(
            e.contains("buffer.size (2GiB) is above the largest buffer the switch takes, 1GiB"),
            "{e}"
        );
        // 1 GiB in 64 B cells loads (before: refused, over 4 GiB); a machine with less than its
        // start-up memory refuses it with the figures.
        let big = load("1GiB", "64B", 2).unwrap_or_else(|e| panic!("should load: {e}"));
        let why = machine_refusal(&big, 1 << 30).expect("1 GiB cannot hold it");
        assert!(
            why.contains("needs 16223 MiB at start-up: 16777728 packet slots with 64 B heads")
                && why.contains("above the 1024 MiB this machine has available"),
            "{why}"
        );
        // Its size classes grown to what the buffer can hold (`rocesw run`) are most of it.
        assert_eq!(machine_refusal(&big, 17 << 30), None);
    }

    #[test]
    fn size_classes_are_at_most_a_quarter_larger_than_their_frames() {
        let c = size_classes(192, 9152);
        assert_eq!(c.first(), Some(&256));
        assert_eq!(c.last(), Some(&9152));
        let mut below = 192;
        for &s in &c {
            assert!(s % 64 == 0 && s > below, "{c:?}");
            // The smallest frame this class holds is below + 1 bytes.
            assert!(s <= (below + 64).max((below + below / 4) / 64 * 64 + 64), "{c:?}");
            below = s;
        }
        assert!(size_classes(9216, 9152).is_empty(), "a head holds every frame");
    }
}
