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

/// The tests of this file one at a time: each counts what the whole process allocates, or has
/// resident.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

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
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
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
        eprintln!(
            "{} ports: {bytes} B allocated, {} B in the footprint",
            cfg.ports.len(),
            f.total_bytes
        );
        assert!(
            (f.total_bytes..f.total_bytes + OTHER_BYTES).contains(&bytes),
            "{} ports: Switch::new allocated {bytes} B, the footprint says {f:?}",
            cfg.ports.len()
        );
    }
    // 30 more ports cost their burst slots (and the arena's slack on them) and their own
    // state, not 240 queues × the buffer (per-queue descriptor rings were 1.1 GB here).
    let growth = allocated_by_new(&many) - allocated_by_new(&two);
    let burst_slots = f_many.slots - f_two.slots;
    assert!(burst_slots <= 30 * 8 * 32 * 3 / 2, "{burst_slots}");
    assert!(
        growth < f_many.total_bytes - f_two.total_bytes + OTHER_BYTES,
        "{growth} B more for 30 more ports"
    );
}

/// Resident bytes of this process (/proc/self/status VmRSS).
fn resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kb << 10
}

/// Issue 50's real-time goal: an SN5600-sized switch (its ingress and egress lossless pools,
/// 192 B cells, 64 ports of 9100 B MTU), faulted in as `rocesw run` does, is resident within
/// what `rocectl check` states, and the frames' arena within 1.5x the buffer's bytes; the
/// rest is the fixed bookkeeping and descriptors. Measured in the process's own resident set.
#[test]
#[cfg(target_os = "linux")]
fn an_sn5600_sized_switch_is_resident_within_one_and_a_half_times_its_buffer_and_fixed() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let ports: String = (0..64).map(|id| format!("[[port]]\nid = {id}\nmtu = 9100\n")).collect();
    let text =
        format!("[buffer]\nsize = \"291872832B\"\ncell = \"192B\"\n\n[port_defaults]\nspeed = \"100G\"\n\n{ports}");
    let cfg = controlplane::load_str(&text)
        .unwrap_or_else(|e| panic!("loads: {e}"))
        .config;
    let f = controlplane::memory::footprint(&cfg);
    let buffer = 291_872_832u64;
    assert!(f.arena_bytes <= buffer * 3 / 2, "{f:?}");
    let before = resident();
    let mut sw = Switch::new(&cfg, 1);
    sw.prefault();
    let grown = resident().saturating_sub(before);
    drop(sw);
    let fixed = f.total_bytes - f.arena_bytes;
    eprintln!(
        "resident: {} MiB for a {} MiB buffer (arena {} MiB, fixed {} MiB, stated {} MiB)",
        grown >> 20,
        buffer >> 20,
        f.arena_bytes >> 20,
        fixed >> 20,
        f.total_bytes >> 20
    );
    assert!(grown >= f.arena_bytes, "the arena is faulted in: {grown} B");
    assert!(grown <= f.total_bytes + (16 << 20), "{grown} B resident, {f:?}");
    assert!(
        grown <= buffer * 3 / 2 + fixed + (16 << 20),
        "{grown} B resident, {f:?}"
    );
}
