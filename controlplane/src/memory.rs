//! What the switch allocates for a config, computed once here so that `rocectl check` and
//! `rocesw run` state (and refuse, when the machine cannot hold it) the memory a config needs,
//! and `Switch::new` sizes its buffers from the same figures.
//!
//! Frames are stored by what they take (`dataplane::buffers::pool`), in one **arena** of
//! *units* shared by every frame size:
//!
//! * a **unit** is one cell, rounded up to 16 B ([`head_bytes`]); a frame of L bytes takes
//!   ⌈L / unit⌉ consecutive units, at most as many as the cells the MMU charges it, so the
//!   frames the buffer holds never take more units than it has cells;
//! * frames are stored in **size classes**, one per unit count (a frame of k units in a buffer
//!   of exactly k units), carved from **chunks** of [`chunk_units`] units that the classes take
//!   from the arena's free list as the traffic needs them, and give back when every buffer in
//!   them is free and another class finds the arena empty. A frame's slot number is the index
//!   of its first unit: the pipeline addresses every frame as `unit × unit bytes`, whatever
//!   its size, and nothing on the packet path allocates (a class's growth is a pop off the
//!   arena's free list);
//! * the arena has [`arena_units`]: the buffer's cells plus a burst per queue per port, plus
//!   room for fragmentation (a quarter), for the unusable end of each chunk and for one
//!   partly used chunk per class. Its bytes are the buffer's bytes × (unit / cell) × about
//!   1.3: within 1.5× the buffer's bytes for cells that are a multiple of 16 B;
//! * **bookkeeping and descriptors**, one per unit, since any unit may start a frame: a 4-byte
//!   free-list entry and link, the unit's class, a record of a backend's buffer (zero copy),
//!   the descriptor and its link (the egress queues are lists linked through the slots,
//!   `dataplane::egress::queues`), EDF's links and the flood groups.
//!
//! In real time (`rocesw run`) all of it is faulted in at start-up: that is
//! [`Footprint::total_bytes`], what `rocectl check` states and compares with what the machine
//! has ([`machine_available`]). In virtual time (replay, fabric, tune, conform) the arena is
//! left to the kernel's lazily mapped pages and its chunks handed out lowest first, so memory
//! follows the peak that was actually buffered.

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
/// Bytes each unit costs besides its bytes: its place in the one-unit class's free list and
/// its link in a longer class's (slot numbers), its class (a byte), and its record of a
/// backend's buffer its frame is in instead (24 B, zero copy; `dataplane::buffers::pool`
/// asserts the sizes at compile time).
pub const SLOT_BOOKKEEPING_BYTES: u64 = 4 + 4 + 1 + 24;
/// Bytes each chunk costs: its place in the arena's free list, its class and a count the
/// reclaim pass uses.
pub const CHUNK_BOOKKEEPING_BYTES: u64 = 4 + 1 + 4;
/// Frames of one burst (the dataplane's `TX_BURST`): each port and queue gets one burst of
/// slots on top of the buffer's cells.
pub const BURST_FRAMES: u64 = 32;
/// The largest `buffer.size` accepted: switch ASICs carry tens to hundreds of MiB; more is a
/// typo.
pub const MAX_BUFFER_BYTES: u64 = 1 << 30;
/// Bytes of a slot's head, the arena's unit: one cell, rounded up to 16 B.
pub fn head_bytes(cell_bytes: u32) -> u64 {
    u64::from(cell_bytes.max(1)).next_multiple_of(16)
}

/// Units the longest frame takes (`max_frame` rounded up to 64 B, as the pool takes it): the
/// number of size classes, one per unit count.
pub fn max_units(head: u64, max_frame: u64) -> u64 {
    max_frame.max(1).next_multiple_of(64).div_ceil(head.max(1))
}

/// Units of one chunk for classes of up to `max_units` units: a power of two (a unit's chunk
/// is a shift away), at least 16 of the longest buffers, so no class leaves more than a
/// sixteenth of a chunk unused at its end.
pub fn chunk_units(max_units: u64) -> u64 {
    (16 * max_units.max(1)).next_power_of_two().max(64)
}

/// Units of the arena for `frames` one-unit frames (the buffer's cells and the bursts on top)
/// when frames take up to `max_units` units: those, a quarter more for fragmentation (a chunk
/// goes back to the arena only once every buffer in it is free), the unused end of each
/// chunk, and one partly used chunk per class; whole chunks.
pub fn arena_units(frames: u64, max_units: u64) -> u64 {
    let chunk = chunk_units(max_units);
    let fragmentation = frames / 4;
    let chunk_ends = frames.saturating_mul(max_units.max(1) - 1).div_ceil(chunk);
    let partial = max_units.max(1).saturating_mul(chunk);
    (frames
        .saturating_add(fragmentation)
        .saturating_add(chunk_ends)
        .saturating_add(partial))
    .next_multiple_of(chunk)
}

/// The start-up allocation for a config, in its parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    /// Packet slots, the arena's units ([`arena_units`]), and descriptors, one per unit.
    pub slots: u64,
    /// The largest frame a slot takes, rounded up to a cache line.
    pub slot_bytes: u64,
    /// Bytes of one unit (a slot's head): one cell, rounded up to 16 B.
    pub head_bytes: u64,
    /// The arena: `slots × head_bytes`, where every frame is stored.
    pub arena_bytes: u64,
    /// The arena, the units' bookkeeping and the chunks'.
    pub packet_bytes: u64,
    /// The descriptor store all egress queues share: slots × (descriptor + link + EDF link +
    /// flood group).
    pub desc_bytes: u64,
    /// `packet_bytes + desc_bytes`: what one shard allocates and faults in at start-up in real
    /// time (each worker owning a port has one).
    pub total_bytes: u64,
    /// What one shard touches at start-up in virtual time, before any frame: everything but
    /// the arena, which fills as frames arrive.
    pub fixed_bytes: u64,
}

/// What a config makes one shard allocate at start-up, part by part.
pub fn footprint(cfg: &Config) -> Footprint {
    let cell = u64::from(cfg.buffer.cell_bytes.max(1));
    let cells = cfg.buffer.total_bytes / cell;
    let ports = cfg.ports.len() as u64;
    let burst = BURST_FRAMES * NUM_TC as u64 * ports;
    let max_frame = cfg
        .ports
        .iter()
        .map(|p| u64::from(p.max_frame_bytes))
        .max()
        .unwrap_or(1518);
    let slot_bytes = max_frame.next_multiple_of(64);
    let head = head_bytes(cfg.buffer.cell_bytes);
    let units = max_units(head, max_frame);
    let slots = arena_units(cells.saturating_add(burst), units);
    let chunks = slots / chunk_units(units);
    let arena_bytes = slots.saturating_mul(head);
    let bookkeeping = slots
        .saturating_mul(SLOT_BOOKKEEPING_BYTES)
        .saturating_add(chunks * CHUNK_BOOKKEEPING_BYTES);
    let packet_bytes = arena_bytes.saturating_add(bookkeeping);
    let desc_bytes = slots.saturating_mul(DESC_BYTES + LINK_BYTES + EDF_LINK_BYTES + FLOOD_BYTES);
    Footprint {
        slots,
        slot_bytes,
        head_bytes: head,
        arena_bytes,
        packet_bytes,
        desc_bytes,
        total_bytes: packet_bytes.saturating_add(desc_bytes),
        fixed_bytes: bookkeeping.saturating_add(desc_bytes),
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
            f.total_bytes >> 20
        )
    } else {
        String::new()
    };
    let buffer = cfg.buffer.total_bytes.max(1);
    format!(
        "needs {} MiB at start-up{each}: an arena of {} units of {} B for the frames ({} MiB, \
         {}.{:02}x the buffer's {} MiB in {} B cells: every size of frame shares it) and the \
         units' bookkeeping and descriptors ({} MiB)",
        f.total_bytes.saturating_mul(shards) >> 20,
        f.slots,
        f.head_bytes,
        f.arena_bytes >> 20,
        f.arena_bytes / buffer,
        f.arena_bytes % buffer * 100 / buffer,
        cfg.buffer.total_bytes >> 20,
        cfg.buffer.cell_bytes,
        (f.total_bytes - f.arena_bytes) >> 20,
    )
}

/// Why the machine cannot start a config in real time, with the figures, given the bytes it
/// has available (`machine_available`); None when it can.
pub fn machine_refusal(cfg: &Config, available: u64) -> Option<String> {
    let need = footprint(cfg).total_bytes.saturating_mul(shards(cfg));
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
        // 30 more ports add their burst slots (8 queues × 32 frames each) and their share of
        // the arena's slack, nothing else: the descriptors are one per unit, shared by every
        // queue of every port.
        let burst_slots = 30 * NUM_TC as u64 * BURST_FRAMES;
        assert!(many.slots - two.slots <= burst_slots * 3 / 2, "{two:?} {many:?}");
        let per_slot = (two.total_bytes - CHUNK_BOOKKEEPING_BYTES * (two.slots / chunk_units(24))) / two.slots;
        assert_eq!(
            per_slot,
            64 + SLOT_BOOKKEEPING_BYTES + DESC_BYTES + LINK_BYTES + EDF_LINK_BYTES + FLOOD_BYTES
        );
        assert_eq!(
            many.desc_bytes,
            many.slots * (DESC_BYTES + LINK_BYTES + EDF_LINK_BYTES + FLOOD_BYTES)
        );
        // 1 Mi cells and 8192 burst slots, and the arena's slack: 64 MB of descriptors, EDF
        // links and flood groups (per-queue rings took 4.3 GB).
        assert_eq!(many.slots, arena_units((1 << 20) + 8192, 24));
        assert!(many.desc_bytes < 64 << 20, "{many:?}");
        assert!(many.total_bytes < 2 << 30, "{many:?}");
    }

    /// The arena's units: the frames the buffer can hold, a quarter more, the chunks' unused
    /// ends and a partly used chunk per class, in whole chunks.
    #[test]
    fn the_arena_is_the_buffers_cells_and_bounded_slack() {
        assert_eq!(chunk_units(48), 1024);
        assert_eq!(chunk_units(1), 64);
        assert_eq!(max_units(192, 9118), 48);
        assert_eq!(max_units(9216, 1518), 1);
        let frames = 1_536_555;
        let u = arena_units(frames, 48);
        assert_eq!(u % 1024, 0);
        let slack = frames / 4 + (frames * 47).div_ceil(1024) + 48 * 1024;
        assert!((frames + slack..frames + slack + 1024).contains(&u), "{u}");
        assert!(u * 4 < frames * 11 / 2, "under 1.375x: {u}");
    }

    #[test]
    fn the_arena_follows_the_buffers_bytes_and_only_the_machine_refuses_a_large_one() {
        // An SN5600's pools (ingress lossless + egress lossless, 291,872,832 B) in 192 B cells
        // over 64 ports: refused before (13.4 GiB of 9152 B slots), then 6672 MiB with every
        // size class grown to the buffer; now one arena within 1.5x its bytes.
        let cfg = load("291872832B", "192B", 64).unwrap_or_else(|e| panic!("should load: {e}"));
        let f = footprint(&cfg);
        let cells = 291_872_832 / 192;
        assert_eq!(f.slots, arena_units(cells + 64 * 8 * 32, max_units(192, 1518)));
        assert_eq!((f.head_bytes, f.arena_bytes), (192, f.slots * 192));
        assert!(f.arena_bytes <= 291_872_832 * 3 / 2, "{f:?}");
        assert!(f.total_bytes < 2 * 291_872_832, "{f:?}");
        assert_eq!(
            statement(&cfg),
            "needs 518 MiB at start-up: an arena of 2005760 units of 192 B for the frames (367 \
             MiB, 1.31x the buffer's 278 MiB in 192 B cells: every size of frame shares it) and \
             the units' bookkeeping and descriptors (151 MiB)"
        );
        // Units round a cell up to 16 B: 144 B cells take 144 B units, 100 B cells 112 B.
        assert_eq!(footprint(&load("1MiB", "144B", 2).unwrap()).head_bytes, 144);
        assert_eq!(footprint(&load("1MiB", "100B", 2).unwrap()).head_bytes, 112);
        // Above 1 GiB: refused whatever the cell.
        let e = load("2GiB", "4KiB", 2).unwrap_err();
        assert!(
            e.contains("buffer.size (2GiB) is above the largest buffer the switch takes, 1GiB"),
            "{e}"
        );
        // 1 GiB in 64 B cells loads (before issue 50: refused, over 4 GiB); a machine with less
        // than its start-up memory refuses it with the figures.
        let big = load("1GiB", "64B", 2).unwrap_or_else(|e| panic!("should load: {e}"));
        let why = machine_refusal(&big, 1 << 30).expect("1 GiB cannot hold it");
        assert!(
            why.contains("needs 2964 MiB at start-up: an arena of 21738496 units of 64 B")
                && why.contains("above the 1024 MiB this machine has available"),
            "{why}"
        );
        assert_eq!(machine_refusal(&big, 4 << 30), None);
    }
}
