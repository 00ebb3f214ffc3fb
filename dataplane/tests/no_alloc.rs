//! The packet path allocates nothing: a counting global allocator watches receive, classify,
//! admit, enqueue, WRED marking, PFC generation, scheduling and transmit at steady state.

mod common;
use common::*;
use dataplane::tools::gen::announce;
use dataplane::Switch;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

struct Counting;
static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn congested_pipeline_does_not_allocate() {
    let mut sw = Switch::new(&default_config(), 1);
    let flows: Vec<Vec<Vec<u8>>> = (0..3).map(|s| burst32(s, 3, if s == 2 { 0 } else { 26 })).collect();
    sw.receive(3, &announce(3, 0).unwrap(), 0);
    let mut tx = 0u64;
    let mut sink = |_: usize, _: &[u8], _: u64| tx += 1;
    // 3→1 at line rate for 2000 bursts: queues build, WRED marks, PFC goes out, lossy drops.
    let mut now = 1_000u64;
    COUNTING.store(true, Ordering::SeqCst);
    for _ in 0..2000 {
        for (s, burst) in flows.iter().enumerate() {
            sw.receive_burst(s, burst.iter().map(Vec::as_slice), now);
        }
        sw.poll(now);
        for p in 0..4 {
            sw.transmit(p, now, &mut sink);
        }
        now += 32 * 336;
    }
    COUNTING.store(false, Ordering::SeqCst);
    let allocs = ALLOCS.load(Ordering::SeqCst);
    let snap = sw.snapshot(now);
    assert!(
        snap.ports[0].pfc_tx[3] > 0 && snap.ports[3].ecn_marked > 0,
        "the run was congested"
    );
    assert!(tx > 0);
    assert_eq!(allocs, 0, "{allocs} allocations on the packet path");
}
