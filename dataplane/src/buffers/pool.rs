//! Packet buffers, stored by what a frame takes. Every packet slot has a *head* of one cell
//! (rounded up to a cache line), addressed by its slot number: a frame that fits in one cell
//! lives there, and only a small descriptor moves through the queues, as in a DPDK mempool. A
//! longer frame lives in a buffer of the smallest *size class* that holds it
//! (`controlplane::memory::size_classes`, at most a quarter larger than the frame), carved from
//! 64 KiB chunks the first time the traffic needs that many, and kept for reuse. The MMU bounds
//! how many frames can be held (one per cell at most), so the slots are sized from it; the
//! heads then take the buffer's bytes, and the larger buffers follow what was actually held.
//!
//! Why size classes and not an ASIC's chain of cells: a chained frame is not contiguous, and
//! everything after the pool reads and writes a frame as one slice (parsing, ECN and tag
//! rewrites in place, a crossing frame lent to another shard by its address, a backend's
//! transmit); a head of one cell keeps the smallest frames exactly where they were, at no cost
//! a frame (docs/design-history.md, "Packet storage").
//!
//! The heads are allocated as lazily mapped pages and handed out lowest first: in virtual time
//! memory follows the peak that was buffered. `rocesw run` faults them in at start-up
//! ([`PacketPool::prefault`]), so no page fault waits on the packet path.
//!
//! A slot may also hold a frame in a buffer its port backend owns (a DPDK mbuf, received
//! without a copy: [`super::foreign`]). The slot then refers to that buffer instead of its
//! head, through the same per-slot record as a larger buffer; `get`, `get_mut` and
//! `clone_slot` read and write it the same way, `free` releases it, and `take_foreign` hands
//! it to the transmitting backend. The pipeline never knows where a slot's frame is.

use std::ptr::NonNull;

use super::foreign::{self, Foreign, ForeignFrame};

/// A frame leaving its slot ([`PacketPool::take`]).
pub enum Taken<'a> {
    /// A copy in the pool: send these bytes.
    Arena(&'a [u8]),
    /// A backend's buffer, now the caller's.
    Foreign(ForeignFrame),
}

// The control plane's memory estimate counts a free-list entry and a foreign-buffer record per
// slot at exactly this size: a record that shrinks or grows fails here, not in a wrong estimate.
const _: () = assert!(
    (std::mem::size_of::<u32>() + std::mem::size_of::<Option<Foreign>>()) as u64
        == controlplane::memory::SLOT_BOOKKEEPING_BYTES
);

/// One size class: buffers of `size` bytes, carved from chunks as they are needed.
#[derive(Debug)]
struct Class {
    size: usize,
    /// Free buffers, the lowest on top.
    free: Vec<NonNull<u8>>,
    /// Where the buffers are; a chunk's heap block never moves, so pointers into it hold.
    chunks: Vec<Box<[u8]>>,
}

// SAFETY: the pointers in `free` point into `chunks`, which the class owns and moves with it.
unsafe impl Send for Class {}

impl Class {
    /// A new chunk's buffers on the free list: one allocation for a chunk's worth of frames.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) -> Option<NonNull<u8>> {
        let chunk_bytes = controlplane::memory::CHUNK_BYTES as usize;
        let n = (chunk_bytes / self.size).max(1);
        let mut chunk = vec![0u8; n * self.size].into_boxed_slice();
        let base = chunk.as_mut_ptr();
        self.free.reserve(n);
        for i in (1..n).rev() {
            // SAFETY: i * size + size <= the chunk's length.
            self.free
                .push(NonNull::new(unsafe { base.add(i * self.size) }).expect("in a chunk"));
        }
        self.chunks.push(chunk);
        NonNull::new(base)
    }
}

/// The packet slots of one switch (or shard): a head each, handed out by index, and the
/// larger buffers frames longer than a head are kept in.
#[derive(Debug)]
pub struct PacketPool {
    heads: Box<[u8]>,
    head_size: usize,
    /// The longest frame taken (a multiple of 64).
    max_frame: usize,
    slots: usize,
    free: Vec<u32>,
    /// Per slot: the buffer its frame is in instead of its head, if any: a backend's or one of
    /// the size classes'.
    elsewhere: Box<[Option<Foreign>]>,
    /// Slots whose frame is elsewhere: while none is, no look at `elsewhere`.
    elsewhere_held: usize,
    /// Of those, slots holding a frame in a backend's buffer.
    foreign_held: usize,
    /// The size classes, smallest first.
    classes: Vec<Class>,
    /// By a frame's length in 64 B units (rounded up): its class, for frames longer than a head.
    class_of: Box<[u8]>,
}

impl PacketPool {
    /// `slots` slots of at least `slot_size` bytes (rounded up to 64, a cache line), all free:
    /// every frame fits in a head (tests, benches).
    pub fn new(slots: usize, slot_size: usize) -> Self {
        Self::with_heads(slots, slot_size, slot_size)
    }

    /// `slots` slots with heads of `head_size` bytes, taking frames up to `max_frame` bytes
    /// (both rounded up to 64); the longer ones in size classes. The heads are mapped, not yet
    /// touched: see [`Self::prefault`].
    pub fn with_heads(slots: usize, head_size: usize, max_frame: usize) -> Self {
        let head_size = head_size.max(1).next_multiple_of(64);
        let max_frame = max_frame.max(1).next_multiple_of(64);
        let sizes = controlplane::memory::size_classes(head_size as u64, max_frame as u64);
        assert!(sizes.len() < usize::from(u8::MAX), "size classes fit a byte");
        let class_of: Box<[u8]> = (0..=max_frame / 64)
            .map(|units| sizes.iter().position(|&s| s >= units as u64 * 64).unwrap_or(0) as u8)
            .collect();
        PacketPool {
            // Zeroed: lazily mapped pages, which cost memory only once written.
            heads: vec![0u8; slots * head_size].into_boxed_slice(),
            head_size,
            max_frame,
            slots,
            // Popped from the end: hand out low slots first, which keeps memory warm and, in
            // virtual time, as small as the peak held.
            free: (0..slots as u32).rev().collect(),
            elsewhere: vec![None; slots].into_boxed_slice(),
            elsewhere_held: 0,
            foreign_held: 0,
            classes: sizes
                .into_iter()
                .map(|s| Class {
                    size: s as usize,
                    free: Vec::new(),
                    chunks: Vec::new(),
                })
                .collect(),
            class_of,
        }
    }

    /// Faults every head in now, like a DPDK mempool on hugepages, not on the packet path
    /// (`rocesw run`).
    pub fn prefault(&mut self) {
        std::hint::black_box(&mut self.heads);
        self.heads.fill(0);
    }

    /// Grows each size class (smallest first) to hold `frames[c]` frames now, off the packet
    /// path (`rocesw run`: [`controlplane::memory::class_frames`], as many as the buffer can
    /// hold), so that no frame allocates later.
    pub fn reserve_classes(&mut self, frames: &[u64]) {
        for (class, &want) in self.classes.iter_mut().zip(frames) {
            let want = usize::try_from(want).unwrap_or(usize::MAX).min(self.slots);
            while class.free.len() < want {
                let Some(first) = class.grow() else { break };
                class.free.push(first);
            }
            // Lowest buffers on top, as growth on demand hands them out.
            class
                .free
                .sort_unstable_by_key(|p| std::cmp::Reverse(p.as_ptr() as usize));
        }
    }

    /// The longest frame a slot takes (a multiple of 64).
    pub fn slot_size(&self) -> usize {
        self.max_frame
    }

    /// Bytes of a slot's head: frames up to this long live in it.
    pub fn head_size(&self) -> usize {
        self.head_size
    }

    /// Free slots.
    pub fn available(&self) -> usize {
        self.free.len()
    }

    /// Slots in all.
    pub fn capacity(&self) -> usize {
        self.slots
    }

    /// Slots holding a frame in a backend's buffer (zero copy) rather than a copy.
    pub fn foreign_held(&self) -> usize {
        self.foreign_held
    }

    /// Bytes the size classes have carved so far (all in use or kept for reuse).
    pub fn class_bytes(&self) -> usize {
        self.classes.iter().flat_map(|c| c.chunks.iter()).map(|c| c.len()).sum()
    }

    /// Copies `frame` into a free slot. None when the pool is empty or the frame does not fit.
    /// Always inlined: the receive path's one allocation a frame.
    #[inline(always)]
    pub fn alloc_copy(&mut self, frame: &[u8]) -> Option<u32> {
        if frame.len() > self.head_size {
            return self.alloc_long(frame.as_ptr(), frame.len());
        }
        let slot = self.free.pop()?;
        let start = slot as usize * self.head_size;
        self.heads[start..start + frame.len()].copy_from_slice(frame);
        Some(slot)
    }

    /// A frame longer than a head: a slot and a buffer of its size class, `len` bytes copied
    /// from `src` into it. Inlined, as the short path is: the class comes from a lookup table
    /// and its buffer off its free list, without a bounds check; only growing is out of line.
    #[inline(always)]
    fn alloc_long(&mut self, src: *const u8, len: usize) -> Option<u32> {
        if len > self.max_frame {
            return None;
        }
        let slot = self.free.pop()?;
        // SAFETY: `len <= max_frame`, and `class_of` has `max_frame / 64 + 1` entries (with
        // `max_frame` a multiple of 64), so `len.div_ceil(64)` is within it.
        let c = unsafe { *self.class_of.get_unchecked(len.div_ceil(64)) };
        // SAFETY: every entry of `class_of` is an index into `classes` (built together).
        let class = unsafe { self.classes.get_unchecked_mut(usize::from(c)) };
        let Some(buf) = class.free.pop().or_else(|| class.grow()) else {
            self.free.push(slot);
            return None;
        };
        // SAFETY: `src` holds `len` bytes (the caller's frame, or another slot's, never this
        // free buffer); `buf` holds the class's size, at least `len`.
        unsafe { std::ptr::copy_nonoverlapping(src, buf.as_ptr(), len) };
        // SAFETY: a slot off the free list is below `slots`, the length of `elsewhere`.
        *unsafe { self.elsewhere.get_unchecked_mut(slot as usize) } = Some(Foreign::pool_own(buf, usize::from(c)));
        self.elsewhere_held += 1;
        Some(slot)
    }

    /// Keeps `frame` in a free slot without copying it: the slot holds the backend's buffer
    /// until it is freed or taken. Gives the frame back when the pool is empty or the frame is
    /// longer than a slot takes (the switch never holds a frame it could not have copied).
    /// Always inlined: once a frame on the zero-copy path, where an out-of-line call moved
    /// the whole `ForeignFrame` through the stack.
    #[inline(always)]
    pub fn alloc_foreign(&mut self, frame: ForeignFrame) -> Result<u32, ForeignFrame> {
        if frame.len() > self.max_frame {
            return Err(frame);
        }
        let Some(slot) = self.free.pop() else {
            return Err(frame);
        };
        let (buf, _) = frame.into_slot();
        self.elsewhere[slot as usize] = Some(buf);
        self.elsewhere_held += 1;
        self.foreign_held += 1;
        Ok(slot)
    }

    /// Copies the first `len` bytes of slot `src` into a new slot (flooding): a flood copy
    /// always gets its own copy in the pool, whatever buffer the original is in.
    #[inline]
    pub fn clone_slot(&mut self, src: u32, len: usize) -> Option<u32> {
        let from = self.get(src, len).as_ptr();
        if len > self.head_size {
            return self.alloc_long(from, len);
        }
        let slot = self.free.pop()?;
        let d = slot as usize * self.head_size;
        let to = self.heads[d..d + len].as_mut_ptr();
        // SAFETY: `from` holds `len` bytes of slot `src`, which is held, so not this free
        // slot's head: the ranges do not overlap, and nothing freed `src` since the read.
        unsafe { std::ptr::copy_nonoverlapping(from, to, len) };
        Some(slot)
    }

    /// The buffer slot `slot`'s frame is in instead of its head, if any. Pools that hold none
    /// (replay of short frames, AF_PACKET, capture files) answer from one field, without
    /// reading the per-slot table.
    #[inline(always)]
    fn elsewhere_of(&self, slot: u32) -> Option<Foreign> {
        if self.elsewhere_held == 0 {
            return None;
        }
        self.elsewhere[slot as usize]
    }

    /// The first `len` bytes of the frame in `slot`, wherever it is kept; `len` must be the length
    /// it was queued with.
    #[inline]
    pub fn get(&self, slot: u32, len: usize) -> &[u8] {
        if let Some(f) = self.elsewhere_of(slot) {
            // SAFETY: the slot owns the buffer; `len` is the frame's length as queued.
            return unsafe { f.bytes(len) };
        }
        let start = slot as usize * self.head_size;
        &self.heads[start..start + len]
    }

    /// As [`Self::get`], writable: ECN marks, DSCP and tag rewrites happen in place.
    #[inline]
    pub fn get_mut(&mut self, slot: u32, len: usize) -> &mut [u8] {
        if let Some(f) = self.elsewhere_of(slot) {
            // SAFETY: as in `get`, and `&mut self` makes the access exclusive.
            return unsafe { f.bytes_mut(len) };
        }
        let start = slot as usize * self.head_size;
        &mut self.heads[start..start + len]
    }

    /// Gives back what slot `slot` held elsewhere (its record already cleared): a class's
    /// buffer to its free list; a backend's buffer is the caller's.
    #[inline(always)]
    fn forget(&mut self, slot: u32, f: Foreign) -> bool {
        self.elsewhere[slot as usize] = None;
        self.elsewhere_held -= 1;
        match f.own_class() {
            Some(c) => {
                // SAFETY: a pool-own record's class was an index into `classes` when made.
                unsafe { self.classes.get_unchecked_mut(c) }.free.push(f.data());
                true
            }
            None => {
                self.foreign_held -= 1;
                false
            }
        }
    }

    /// Frees a slot; a backend's buffer it held is released.
    #[inline]
    pub fn free(&mut self, slot: u32) {
        debug_assert!(self.free.len() < self.capacity(), "double free of slot {slot}");
        if let Some(f) = self.elsewhere_of(slot) {
            if !self.forget(slot, f) {
                // SAFETY: the slot owned the buffer and no longer refers to it.
                unsafe { foreign::release(f) };
            }
        }
        // Never reallocates: capacity was reserved for every slot at construction.
        self.free.push(slot);
    }

    /// If slot `slot` holds a backend's buffer (a frame of `len` bytes), frees the slot and
    /// hands the buffer over instead of releasing it; a frame in the pool is left as it is.
    #[inline]
    pub fn take_foreign(&mut self, slot: u32, len: usize) -> Option<ForeignFrame> {
        let f = self.elsewhere_of(slot)?;
        f.own_class().is_none().then_some(())?;
        match self.take(slot, len) {
            Taken::Foreign(f) => Some(f),
            Taken::Arena(_) => None,
        }
    }

    /// Frees a slot whose frame (of `len` bytes) is leaving: its bytes, valid until the next
    /// allocation, or the backend's buffer it held, handed over (one look at the slot for
    /// both: the transmit path). Always inlined: once a frame, and out of line it cost a call
    /// and a return of `Taken` through memory on every transmit.
    #[inline(always)]
    pub fn take(&mut self, slot: u32, len: usize) -> Taken<'_> {
        debug_assert!(self.free.len() < self.capacity(), "double free of slot {slot}");
        // Never reallocates: capacity was reserved for every slot at construction.
        self.free.push(slot);
        if let Some(f) = self.elsewhere_of(slot) {
            if self.forget(slot, f) {
                // SAFETY: the class's buffer is free but untouched until the next allocation,
                // which needs `&mut self`, which this borrow holds.
                return Taken::Arena(unsafe { f.bytes(len) });
            }
            // SAFETY: taken out of its slot, so owned here; `len` is the frame's queued length.
            return Taken::Foreign(unsafe { ForeignFrame::from_slot(f, len) });
        }
        let start = slot as usize * self.head_size;
        Taken::Arena(&self.heads[start..start + len])
    }
}

impl Drop for PacketPool {
    /// Frames still held when the switch goes (a drain that timed out) give their backends'
    /// buffers back.
    fn drop(&mut self) {
        if self.foreign_held == 0 {
            return;
        }
        for f in self.elsewhere.iter_mut().filter_map(Option::take) {
            if f.own_class().is_none() {
                // SAFETY: owned by the slot, which is going away.
                unsafe { foreign::release(f) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_copy_free_roundtrip() {
        let mut p = PacketPool::new(2, 100);
        assert_eq!(p.slot_size(), 128);
        let a = p.alloc_copy(&[1, 2, 3]).unwrap();
        let b = p.clone_slot(a, 3).unwrap();
        assert_eq!(p.get(b, 3), &[1, 2, 3]);
        assert!(p.alloc_copy(&[0]).is_none(), "exhausted");
        p.free(a);
        assert!(p.alloc_copy(&[0; 129]).is_none(), "too large");
        assert!(p.alloc_copy(&[9; 128]).is_some());
        p.free(b);
        assert_eq!(p.available(), 1);
    }

    /// Frames longer than a head go to the smallest size class that holds them, and come
    /// back out of it whole; freed buffers are reused, not grown again.
    #[test]
    fn long_frames_live_in_size_classes_and_their_buffers_are_reused() {
        let mut p = PacketPool::with_heads(8, 192, 9118);
        assert_eq!((p.head_size(), p.slot_size(), p.class_bytes()), (192, 9152, 0));
        let short: Vec<u8> = (0..192u32).map(|i| i as u8).collect();
        let long: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
        let jumbo = vec![0xab; 9118];
        let a = p.alloc_copy(&short).unwrap();
        assert_eq!(p.class_bytes(), 0, "a one-cell frame stays in its head");
        let b = p.alloc_copy(&long).unwrap();
        let c = p.alloc_copy(&jumbo).unwrap();
        let grown = p.class_bytes();
        assert!(grown >= 1000 + 9152, "{grown}");
        assert_eq!(p.get(a, 192), &short[..]);
        assert_eq!(p.get(b, 1000), &long[..]);
        assert_eq!(p.get(c, 9118), &jumbo[..]);
        p.get_mut(b, 1000)[999] = 1;
        // A flood copy of a long frame is a long frame of its own.
        let d = p.clone_slot(b, 1000).unwrap();
        assert_eq!(p.get(d, 1000)[999], 1);
        assert_eq!(p.get(d, 1000)[..999], long[..999]);
        // Not a backend's buffer: take_foreign leaves it; take hands the bytes out.
        assert!(p.take_foreign(b, 1000).is_none());
        match p.take(b, 1000) {
            Taken::Arena(f) => assert_eq!(f[..999], long[..999]),
            Taken::Foreign(_) => panic!("a size class's buffer is no backend's"),
        }
        p.free(c);
        p.free(d);
        p.free(a);
        assert_eq!(p.available(), 8);
        // The same frames again take the buffers freed: nothing grows.
        for _ in 0..3 {
            let s = [
                p.alloc_copy(&long).unwrap(),
                p.alloc_copy(&long).unwrap(),
                p.alloc_copy(&jumbo).unwrap(),
            ];
            s.into_iter().for_each(|s| p.free(s));
        }
        assert_eq!(p.class_bytes(), grown);
        // Longer than the largest frame: refused, nothing taken.
        assert!(p.alloc_copy(&[0; 9153]).is_none());
        assert_eq!(p.available(), 8);
    }

    /// The heads are lazily mapped: a pool sized for a large buffer costs nothing resident until
    /// frames arrive (virtual time), and `prefault` touches them all (real time). Counted by
    /// mincore(2) over the heads themselves, whatever other tests allocate meanwhile.
    #[test]
    #[cfg(target_os = "linux")]
    fn heads_cost_memory_only_once_written_unless_prefaulted() {
        fn resident(b: &[u8]) -> usize {
            let page = 4096;
            let start = b.as_ptr() as usize / page * page;
            let len = b.as_ptr() as usize + b.len() - start;
            let mut v = vec![0u8; len.div_ceil(page)];
            // SAFETY: the range covers `b`'s pages, mapped while `b` lives; `v` has a byte a page.
            let r = unsafe { libc::mincore(start as *mut libc::c_void, len, v.as_mut_ptr()) };
            assert_eq!(r, 0, "mincore");
            v.iter().filter(|&&x| x & 1 == 1).count() * page
        }
        // 1.5 Mi slots of 192 B: an SN5600's buffer, 281 MiB of heads.
        let mut p = PacketPool::with_heads(1_536_000, 192, 9118);
        let a = p.alloc_copy(&[7; 100]).unwrap();
        assert_eq!(p.get(a, 100), &[7; 100]);
        let lazy = resident(&p.heads);
        assert!(lazy <= 64 << 10, "one frame, a page or so resident: {lazy}");
        p.prefault();
        assert!(resident(&p.heads) >= p.heads.len() - 4096);
    }

    /// A backend's buffer for the tests: a leaked boxed frame, released by dropping the box
    /// and counting the release.
    fn lend(bytes: &[u8], released: &'static std::sync::atomic::AtomicUsize) -> ForeignFrame {
        use std::ffi::c_void;
        use std::ptr::NonNull;
        /// The token: the frame's box and the counter to bump.
        struct Buf(Box<[u8]>, &'static std::sync::atomic::AtomicUsize);
        unsafe fn release(token: NonNull<c_void>) {
            // SAFETY: made from Box::into_raw below, released once.
            let b = unsafe { Box::from_raw(token.as_ptr().cast::<Buf>()) };
            b.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        let mut b = Box::new(Buf(bytes.into(), released));
        let data = NonNull::new(b.0.as_mut_ptr()).unwrap();
        let token = NonNull::new(Box::into_raw(b).cast::<c_void>()).unwrap();
        static KIND: foreign::ForeignKind = foreign::ForeignKind { release, owner: 7 };
        // SAFETY: the box keeps the bytes alive until `release`, which runs once.
        unsafe { ForeignFrame::new(data, bytes.len() as u32, token, &KIND) }
    }

    #[test]
    fn a_slot_holds_a_foreign_buffer_until_freed_or_taken() {
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        static RELEASED: AtomicUsize = AtomicUsize::new(0);
        let mut p = PacketPool::new(4, 64);
        let a = p.alloc_foreign(lend(&[1, 2, 3, 4], &RELEASED)).unwrap();
        assert_eq!((p.foreign_held(), p.available()), (1, 3));
        assert_eq!(p.get(a, 4), &[1, 2, 3, 4], "read in place");
        p.get_mut(a, 4)[0] = 9;
        let c = p.clone_slot(a, 4).unwrap();
        assert_eq!(p.get(c, 4), &[9, 2, 3, 4], "a flood copy is a copy of the marked frame");
        p.free(c);
        assert_eq!(RELEASED.load(SeqCst), 0, "freeing a copy releases nothing");
        assert!(p.take_foreign(c, 4).is_none(), "an arena slot has nothing to hand over");

        // Taken for transmit: the slot is free, the buffer is the caller's.
        let f = p.take_foreign(a, 4).unwrap();
        assert_eq!((f.bytes(), f.owner()), (&[9, 2, 3, 4][..], 7));
        assert_eq!((p.foreign_held(), p.available()), (0, 4));
        assert_eq!(RELEASED.load(SeqCst), 0);
        drop(f);
        assert_eq!(RELEASED.load(SeqCst), 1, "dropping the frame releases the buffer");

        // Freed (a drop): released once.
        let b = p.alloc_foreign(lend(&[5; 10], &RELEASED)).unwrap();
        p.free(b);
        assert_eq!(RELEASED.load(SeqCst), 2);

        // Too long for a slot, or no slot free: given back, not released.
        let long = p.alloc_foreign(lend(&[0; 65], &RELEASED)).unwrap_err();
        assert_eq!(long.len(), 65);
        drop(long);
        assert_eq!(RELEASED.load(SeqCst), 3);
        for _ in 0..4 {
            p.alloc_copy(&[0]).unwrap();
        }
        let full = p.alloc_foreign(lend(&[1], &RELEASED)).unwrap_err();
        drop(full);
        assert_eq!(RELEASED.load(SeqCst), 4);

        // Still held when the pool goes: released then.
        let mut q = PacketPool::new(2, 64);
        q.alloc_foreign(lend(&[1], &RELEASED)).unwrap();
        q.alloc_foreign(lend(&[2], &RELEASED)).unwrap();
        drop(q);
        assert_eq!(RELEASED.load(SeqCst), 6);
    }
}
