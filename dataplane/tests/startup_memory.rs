//! What `Switch::new` allocates is what `controlplane::memory::footprint` says, the figure
//! `rocectl check` states and `rocesw run` compares with the machine's available memory:
//! memory that grows with the buffer, not with ports × queues.

use dataplane::Switch;
mod counting_alloc;
use counting_alloc::{BYTES, COUNTING};
use std::sync::atomic::Ordering;

/// A config of `ports` ports on a `size` buffer in `cell` cells.
fn config(size: &str, cell: &str, ports: u16) -> controlplane::Config {
    let ports: String = (0..ports).map(|id| format!("[[port]]\nid = {id}\n")).collect();
    let text = format!("[buffer]\nsize = \"{size}\"\ncell = \"{cell}\"\n\n[port_defaults]\nspeed = \"25G\"\n\n{ports}");
    controlplane::load_str(&text)
        .unwrap_or_else(|e| panic!("loads: {e}"))
        .config
}

/// Bytes `Switch::new` asks the allocator for.
fn allocated_by_new(cfg: &controlplane::Config) -> u64 {
    let before = BYTES.load(Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    let sw = Switch::new(cfg, 1);
    COUNTING.store(false, Ordering::SeqCst);
    let bytes = BYTES.load(Ordering::SeqCst) - before;
    drop(sw);
    bytes
}

/// Everything `Switch::new` allocates besides the footprint (ports' state, the FDB, the
/// classifier): a few hundred KiB whatever the buffer.
const OTHER_BYTES: u64 = 1 << 20;

#[test]
fn a_many_port_switch_allocates_what_the_footprint_says() {
    let (many, two) = (config("16MiB", "64B", 32), config("16MiB", "64B", 2));
    let (f_many, f_two) = (
        controlplane::memory::footprint(&many),
        controlplane::memory::footprint(&two),
    );
    for (cfg, f) in [
        (&many, f_many),
        (&two, f_two),
        (
            &config("4MiB", "256B", 4),
            controlplane::memory::footprint(&config("4MiB", "256B", 4)),
        ),
    ] {
        let bytes = allocated_by_new(cfg);
        assert!(
            (f.total_bytes..f.total_bytes + OTHER_BYTES).contains(&bytes),
            "{} ports: Switch::new allocated {bytes} B, the footprint says {f:?}",
            cfg.ports.len()
        );
    }
    // 30 more ports cost their burst slots and their own state, not 240 queues × the buffer
    // (per-queue descriptor rings were 1.1 GB here).
    let growth = allocated_by_new(&many) - allocated_by_new(&two);
    let burst_slots = f_many.slots - f_two.slots;
    assert_eq!(burst_slots, 30 * 8 * 32);
    let per_slot = f_many.total_bytes / f_many.slots;
    assert!(
        growth < burst_slots * per_slot + OTHER_BYTES,
        "{growth} B more for 30 more ports"
    );
}
