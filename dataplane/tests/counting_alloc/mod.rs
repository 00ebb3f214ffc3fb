//! A global allocator that counts allocations, and the bytes they ask for, while `COUNTING` is
//! set: what the no-allocation tests (`no_alloc.rs`, `no_alloc_dpdk.rs`) watch the packet path
//! with, and what `startup_memory.rs` weighs `Switch::new` with. Included by those tests only
//! (`mod counting_alloc;`), since it replaces the test binary's allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub struct Counting;
pub static COUNTING: AtomicBool = AtomicBool::new(false);
/// When set, only threads that called [`mark_this_thread`] are counted: a test that runs the
/// real workers watches the worker's thread while its own thread (and the others) do as they
/// please.
pub static ONLY_MARKED: AtomicBool = AtomicBool::new(false);

thread_local! {
    // `const`: no lazy initialisation, so reading it never allocates (it runs inside `alloc`).
    static MARKED: Cell<bool> = const { Cell::new(false) };
    // Whether this thread is one the switch started ("rocesw-…"): 0 not known yet, 1 yes, 2 no.
    static SWITCH_THREAD: Cell<u8> = const { Cell::new(0) };
    static LOOKING: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread was started by the switch (a worker, the control coordinator): with
/// [`ONLY_MARKED`], they are counted like a marked thread, so a test of several workers counts
/// every worker although it cannot mark threads it did not create. Looked up once per thread
/// (by name), guarded against the look-up's own allocation.
fn switch_thread() -> bool {
    match SWITCH_THREAD.with(Cell::get) {
        1 => true,
        2 => false,
        _ if LOOKING.with(Cell::get) => false,
        _ => {
            LOOKING.with(|l| l.set(true));
            let yes = std::thread::current().name().is_some_and(|n| n.starts_with("rocesw-"));
            LOOKING.with(|l| l.set(false));
            SWITCH_THREAD.with(|t| t.set(if yes { 1 } else { 2 }));
            yes
        }
    }
}

/// Counts this thread's allocations while [`ONLY_MARKED`] is set.
#[allow(dead_code)]
pub fn mark_this_thread() {
    MARKED.with(|m| m.set(true));
}

fn counted() -> bool {
    COUNTING.load(Ordering::Relaxed)
        && (!ONLY_MARKED.load(Ordering::Relaxed) || MARKED.with(Cell::get) || switch_thread())
}
pub static ALLOCS: AtomicU64 = AtomicU64::new(0);
/// Bytes asked for by those allocations (a reallocation counts its new size; frees are not
/// subtracted).
pub static BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is passed on unchanged to the system allocator, which upholds
// GlobalAlloc's contract; counting touches only atomics and thread-locals (no allocation).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if counted() {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        }
        // SAFETY: the caller's `layout` contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if counted() {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        }
        // SAFETY: `ptr` came from `System` with `layout`; the caller vouches for `new_size`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;
